-- A run store as servebench wrote it at schema version 1, before any migration: the v1
-- schema exactly as it shipped, then two runs (one with labels and a request).
-- The migration test opens a copy of it with `Store::open`. Do not change this file.
PRAGMA application_id = 1396855379;
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    created_at TEXT NOT NULL,
    started_at TEXT,
    time_ms INTEGER NOT NULL,
    model TEXT,
    backend TEXT,
    target TEXT,
    num_prompts INTEGER,
    completed INTEGER NOT NULL,
    failed INTEGER,
    max_concurrency INTEGER,
    request_rate REAL,
    duration_s REAL NOT NULL,
    request_throughput REAL NOT NULL,
    output_throughput REAL,
    total_token_throughput REAL,
    mean_ttft_ms REAL, median_ttft_ms REAL, p99_ttft_ms REAL,
    mean_tpot_ms REAL, median_tpot_ms REAL, p99_tpot_ms REAL,
    mean_itl_ms REAL, median_itl_ms REAL, p99_itl_ms REAL,
    mean_e2el_ms REAL, median_e2el_ms REAL, p99_e2el_ms REAL,
    config_json TEXT,
    summary_json TEXT NOT NULL,
    notes_json TEXT NOT NULL DEFAULT '[]',
    interrupted INTEGER NOT NULL DEFAULT 0,
    source_file TEXT,
    source_line INTEGER,
    num_requests INTEGER NOT NULL DEFAULT 0,
    chunk_times TEXT
);
CREATE INDEX runs_time ON runs(time_ms);
CREATE INDEX runs_model ON runs(model);
CREATE TABLE run_labels (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
) WITHOUT ROWID;
CREATE INDEX run_labels_key_value ON run_labels(key, value);
CREATE TABLE requests (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    dataset_index INTEGER NOT NULL,
    planned_ns INTEGER NOT NULL,
    arrival_ns INTEGER NOT NULL,
    start_ns INTEGER NOT NULL,
    ttft_us INTEGER,
    latency_us INTEGER,
    num_chunks INTEGER NOT NULL,
    end_us INTEGER NOT NULL,
    chunks BLOB,
    max_tokens INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    prompt_tokens_server INTEGER,
    completion_tokens_server INTEGER,
    prompt_tokens_client INTEGER,
    output_tokens_client INTEGER,
    status INTEGER NOT NULL,
    failure_kind TEXT,
    failure_message TEXT,
    retried INTEGER NOT NULL,
    conversation INTEGER,
    turn INTEGER,
    shared_prefix_tokens INTEGER,
    server_queue_s REAL,
    server_ttft_s REAL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

INSERT INTO runs (id, kind, created_at, started_at, time_ms, model, backend, target, num_prompts, completed, failed,
    max_concurrency, request_rate, duration_s, request_throughput, output_throughput, total_token_throughput,
    mean_ttft_ms, median_ttft_ms, p99_ttft_ms, config_json, summary_json, notes_json, interrupted, source_file,
    source_line, num_requests, chunk_times)
VALUES
    (1, 'import', '2025-05-01T10:00:00.000Z', NULL, 1746093600000, 'Qwen/Qwen3-8B', NULL, NULL, NULL, 20, 0, 4, NULL,
     64.4, 0.31, 39.75, 79.5, 1616.7, 1724.28, 2761.99, NULL,
     '{"completed":20,"failed":0,"max_concurrency":4,"duration_s":64.4,"total_input_tokens":2560,"request_throughput":0.31,"metrics":[{"metric":"ttft","mean_ms":1616.7,"median_ms":1724.28,"percentiles":[[99.0,2761.99]]}]}',
     '[]', 0, '/data/000.txt', 3, 0, NULL),
    (2, 'bench', '2025-05-02T10:00:00.000Z', '2025-05-02T11:59:00+02:00', 1746179940000, 'm', 'vllm',
     'http://127.0.0.1:8000', 1, 1, 0, NULL, 9e999, 0.5, 2.0, 6.0, 206.0, 150.0, 150.0, 150.0, NULL,
     '{"completed":1,"failed":0,"request_rate":"inf","duration_s":0.5,"total_input_tokens":100,"request_throughput":2.0}',
     '["a note"]', 1, NULL, NULL, 1, 'all');
INSERT INTO run_labels (run_id, position, key, value) VALUES (1, 0, 'model', 'Qwen/Qwen3-8B'), (2, 0, 'gpu', 'H100'),
    (2, 1, 'tp', '2');
INSERT INTO requests (run_id, seq, dataset_index, planned_ns, arrival_ns, start_ns, ttft_us, latency_us, num_chunks,
    end_us, chunks, max_tokens, prompt_tokens, output_tokens, prompt_tokens_server, completion_tokens_server,
    prompt_tokens_client, output_tokens_client, status, failure_kind, failure_message, retried, conversation, turn,
    shared_prefix_tokens, server_queue_s, server_ttft_s)
VALUES (2, 0, 0, 0, 10, 20, 150000, 211000, 3, 211005, X'01E0A712E0D403B0E403', 16, 100, 3, 100, 3, NULL, NULL,
    200, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL);
PRAGMA user_version = 1;
