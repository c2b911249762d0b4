//! The pooling backends (`openai-embeddings`, `openai-embeddings-chat`, `vllm-pooling`,
//! `vllm-rerank`) against the simulator's pooling routes: vLLM's pooling report (no output
//! lines, E2EL alone, the input rate), vLLM's pooling result keys, several inputs a request
//! (`--random-batch-size`) and a query's documents (`random-rerank`) counted as vLLM counts
//! them, the twin in virtual time agreeing with the twin on a port, a pooling run named and
//! skipped by the twin's check, and what does not fit refused with what to give.

use crate::common::{args, read_json, servebench, text};

const SIM: &str = "Qwen/Qwen3-0.6B@h100-sxm";

fn flags<'a>(backend: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    prompts(backend, "24", extra)
}

/// `flags` with `n` prompts.
fn prompts<'a>(backend: &'a str, n: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut f = vec![
        "--backend",
        backend,
        "--num-prompts",
        n,
        "--max-concurrency",
        "4",
        "--random-input-len",
        "64",
        "--no-store",
        "--disable-tqdm",
    ];
    f.extend_from_slice(extra);
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embeddings_run_reports_what_vllm_reports_for_pooling() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut all = vec!["bench", "serve", "--sim", SIM];
    all.extend(flags("openai-embeddings", &["--save-result", "--result-dir", d, "--result-filename", "e.json"]));
    let out = servebench(args(&all)).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let block = stdout.split("============ Serving Benchmark Result").nth(1).expect("a result block");
    let block = block.split("\n==================================================\n").next().unwrap();
    for line in
        ["Successful requests:                     24        \n", "Total input tokens:                      1536"]
    {
        assert!(block.contains(line), "{block}");
    }
    assert!(block.contains("Input throughput (inputs/s):"), "{block}");
    assert!(block.contains("Mean E2EL (ms):"), "{block}");
    for absent in ["Total generated tokens", "Output token throughput", "Peak", "TTFT", "TPOT", "ITL"] {
        assert!(!block.contains(absent), "{absent}: {block}");
    }
    let json = read_json(&dir.path().join("e.json"));
    let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
    let at = |k: &str| keys.iter().position(|x| *x == k).unwrap_or_else(|| panic!("{k} missing: {keys:?}"));
    assert!(at("completed") < at("total_input_tokens") && at("total_input_tokens") < at("total_input_sequences"));
    assert!(at("request_throughput") < at("input_sequence_throughput") && at("latencies") < at("mean_e2el_ms"));
    for absent in ["failed", "total_output_tokens", "output_throughput", "mean_ttft_ms", "max_concurrent_requests"] {
        assert!(!keys.contains(&absent), "{absent}: {keys:?}");
    }
    assert_eq!(json["total_input_sequences"], 24);
    assert_eq!(json["total_input_tokens"], 1536);
    let (req, inputs) =
        (json["request_throughput"].as_f64().unwrap(), json["input_sequence_throughput"].as_f64().unwrap());
    assert!(req > 0.0 && (req - inputs).abs() < 1e-9, "{req} {inputs}");
    let tokens = json["total_token_throughput"].as_f64().unwrap();
    assert!((tokens - 64.0 * req).abs() < 1e-6 * tokens, "{tokens} against {req} req/s of 64 tokens");

    // The same run in virtual time: the twin on a port and in virtual time agree.
    let mut predicted = vec!["sim", "predict", "--model", "Qwen/Qwen3-0.6B", "--hardware", "h100-sxm"];
    predicted.extend(flags("openai-embeddings", &["--save-result", "--result-dir", d, "--result-filename", "p.json"]));
    let out = servebench(args(&predicted)).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let p = read_json(&dir.path().join("p.json"));
    let (live, virt) = (json["mean_e2el_ms"].as_f64().unwrap(), p["mean_e2el_ms"].as_f64().unwrap());
    assert!((live / virt - 1.0).abs() < 0.25, "live {live} ms, predicted {virt} ms");
    assert_eq!(p["total_input_sequences"], 24);

    // The twin's check reads generation runs; a pooling run is named and skipped.
    let e = dir.path().join("e.json");
    let validate = ["sim", "validate", "--model", "Qwen/Qwen3-0.6B", "--hardware", "h100-sxm", e.to_str().unwrap()];
    let out = servebench(args(&validate)).await;
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success() && said.contains("a pooling run (embeddings, /pooling)"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_embeddings_and_vllm_pooling_run_on_their_routes() {
    for (backend, extra) in [("openai-embeddings-chat", vec![]), ("vllm-pooling", vec!["--endpoint", "/pooling"])] {
        let mut all = vec!["bench", "serve", "--sim", SIM];
        all.extend(flags(backend, &extra));
        let out = servebench(args(&all)).await;
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{backend}: {stdout}\n{}", text(&out.stderr));
        assert!(stdout.contains("Failed requests:                         0         \n"), "{backend}: {stdout}");
        assert!(stdout.contains("Input throughput (inputs/s):"), "{backend}: {stdout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooling_backend_on_another_route_or_an_unbuilt_one_is_refused_with_what_to_give() {
    let mut all = vec!["bench", "serve", "--sim", SIM];
    all.extend(flags("openai-embeddings", &["--endpoint", "/v1/completions"]));
    let out = servebench(args(&all)).await;
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("does not fit --backend openai-embeddings: use /v1/embeddings"), "{err}");
    let mut all = vec!["bench", "serve", "--sim", SIM];
    all.extend(flags("vllm-rerank", &[]));
    let out = servebench(args(&all)).await;
    let err = text(&out.stderr);
    assert!(!out.status.success() && err.contains("pass --dataset-name random-rerank"), "{err}");
    let mut all = vec!["bench", "serve", "--sim", SIM];
    all.extend(flags("openai-embeddings-chat", &["--random-batch-size", "4"]));
    let out = servebench(args(&all)).await;
    let err = text(&out.stderr);
    assert!(!out.status.success() && err.contains("only the pooling backends with an input take"), "{err}");
    let mut all = vec!["bench", "serve", "--sim", SIM];
    all.extend(flags("vllm-rerank", &["--dataset-name", "random-rerank", "--no-reranker"]));
    let out = servebench(args(&all)).await;
    let err = text(&out.stderr);
    assert!(!out.status.success() && err.contains("pass --random-batch-size of at least 2"), "{err}");
}

/// Runs `flags` on the twin on a port and in virtual time, each saving its result JSON in
/// `dir`; returns both.
async fn live_and_predicted(dir: &std::path::Path, flags: &[&str]) -> (serde_json::Value, serde_json::Value) {
    live_and_predicted_on(dir, "Qwen/Qwen3-0.6B", flags).await
}

/// `live_and_predicted` with `model` on an H100.
async fn live_and_predicted_on(
    dir: &std::path::Path,
    model: &str,
    flags: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let d = dir.to_str().unwrap();
    let sim = format!("{model}@h100-sxm");
    let mut results = Vec::new();
    for (name, head) in [
        ("live.json", vec!["bench", "serve", "--sim", &sim]),
        ("virtual.json", vec!["sim", "predict", "--model", model, "--hardware", "h100-sxm"]),
    ] {
        let mut all = head;
        all.extend_from_slice(flags);
        all.extend(["--save-result", "--result-dir", d, "--result-filename", name]);
        let out = servebench(args(&all)).await;
        assert!(out.status.success(), "{name}: {}\n{}", text(&out.stdout), text(&out.stderr));
        results.push(read_json(&dir.join(name)));
    }
    let virt = results.pop().unwrap();
    (results.pop().unwrap(), virt)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_inputs_a_request_count_as_inputs_and_the_twin_runs_each() {
    // 50 prompts of 64 tokens, 8 a request: 7 requests, the last of 2 prompts.
    let dir = tempfile::tempdir().unwrap();
    let (live, virt) =
        live_and_predicted(dir.path(), &prompts("openai-embeddings", "50", &["--random-batch-size", "8"])).await;
    for (what, j) in [("live", &live), ("virtual", &virt)] {
        assert_eq!(j["completed"], 7, "{what}");
        assert_eq!(j["total_input_sequences"], 50, "{what}");
        assert_eq!(j["total_input_tokens"], 50 * 64, "{what}");
        let (req, inputs) =
            (j["request_throughput"].as_f64().unwrap(), j["input_sequence_throughput"].as_f64().unwrap());
        assert!((inputs / req - 50.0 / 7.0).abs() < 1e-9, "{what}: {inputs} inputs/s at {req} req/s");
    }
    let (l, v) = (live["mean_e2el_ms"].as_f64().unwrap(), virt["mean_e2el_ms"].as_f64().unwrap());
    assert!((l / v - 1.0).abs() < 0.25, "live {l} ms, predicted {v} ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerank_run_scores_each_document_against_the_query() {
    // 40 documents, 5 a request; a pair of 64 tokens: a 31-token query, a separator and a
    // 32-token document.
    let dir = tempfile::tempdir().unwrap();
    let rerank = ["--dataset-name", "random-rerank", "--random-batch-size", "5"];
    let (live, virt) = live_and_predicted(dir.path(), &prompts("vllm-rerank", "40", &rerank)).await;
    for (what, j) in [("live", &live), ("virtual", &virt)] {
        assert_eq!(j["completed"], 8, "{what}");
        assert_eq!(j["total_input_sequences"], 40, "{what}");
        assert_eq!(j["total_input_tokens"], 40 * 64, "{what}");
        assert_eq!(j["backend"], "vllm-rerank", "{what}");
    }
    let (l, v) = (live["mean_e2el_ms"].as_f64().unwrap(), virt["mean_e2el_ms"].as_f64().unwrap());
    assert!((l / v - 1.0).abs() < 0.25, "live {l} ms, predicted {v} ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_inputs_pays_the_api_server_s_request_work_once() {
    // 320 prompts, 1 or 16 a request, 4 requests at a time: the API server's work a request
    // (5.62 ms) bounds single inputs near 178 a second; a batch pays it once and 0.74 ms for
    // each further input, several times the inputs a second.
    let mut inputs_per_s = Vec::new();
    for batch in ["1", "16"] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let mut all = vec!["sim", "predict", "--model", "Qwen/Qwen3-0.6B", "--hardware", "h100-sxm"];
        all.extend(prompts("openai-embeddings", "320", &["--random-batch-size", batch]));
        all.extend(["--save-result", "--result-dir", d, "--result-filename", "p.json"]);
        let out = servebench(args(&all)).await;
        assert!(out.status.success(), "{batch}: {}", text(&out.stderr));
        inputs_per_s.push(read_json(&dir.path().join("p.json"))["input_sequence_throughput"].as_f64().unwrap());
    }
    assert!((150.0..200.0).contains(&inputs_per_s[0]), "{inputs_per_s:?}");
    assert!(inputs_per_s[1] > 3.0 * inputs_per_s[0], "{inputs_per_s:?}");
}

/// The sequences the engine ran over a run: its time-to-first-token count (vLLM's histogram,
/// which counts a pooling input's one step as its first token) at the last scrape less the
/// first's (the warm-up's).
fn engine_sequences(json: &serde_json::Value) -> u64 {
    let series = json["servebench"]["server_telemetry"]["sources"][0]["series"].as_array().unwrap();
    let count = series.iter().find(|s| s["signal"] == "ttft_count").unwrap()["points"].as_array().unwrap();
    let at = |p: &serde_json::Value| p[1].as_f64().unwrap();
    (at(count.last().unwrap()) - at(&count[0])) as u64
}

/// A rerank run of 40 prompts of 64 tokens, 5 a request (`head`: the command and its target,
/// `extra`: more flags), with the server's metrics: its printed report and its result JSON.
async fn rerank_run(head: &[&str], extra: &[&str]) -> (String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut rerank = vec!["--dataset-name", "random-rerank", "--random-batch-size", "5", "--server-metrics"];
    rerank.extend_from_slice(extra);
    let mut all = head.to_vec();
    all.extend(prompts("vllm-rerank", "40", &rerank));
    all.extend(["--save-result", "--result-dir", d, "--result-filename", "r.json"]);
    let out = servebench(args(&all)).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{extra:?}: {stdout}\n{}", text(&out.stderr));
    (stdout, read_json(&dir.path().join("r.json")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_twin_scores_as_the_flags_say_the_model_does() {
    // A reranker's 8 requests run 40 pairs; an embedding model's (--no-reranker: the query is
    // one of each request's 5) 10 requests run each request's query once and its 4 documents,
    // 49 sequences, and the usage counts each of the 39 documents with the query and a padding
    // token, as vLLM's does. The engine generates no token for them, as vLLM's counts none.
    let cases: [(&[&str], _, _, _); 2] = [(&[], 8, 40, 40 * 64), (&["--no-reranker"], 10, 49, 39 * 129)];
    for (extra, requests, sequences, tokens) in cases {
        let (stdout, json) = rerank_run(&["bench", "serve", "--sim", SIM], extra).await;
        assert_eq!(engine_sequences(&json), sequences, "{extra:?}");
        assert!(stdout.contains("generated tokens 0,"), "{extra:?}: {stdout}");
        assert_eq!((json["completed"].as_u64(), json["total_input_tokens"].as_u64()), (Some(requests), Some(tokens)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predicted_rerank_makes_each_input_as_long_as_the_plan_counted_it() {
    // With a tokenizer the plan counts each input: a query of 64 tokens and documents of 64
    // under --no-reranker (10 requests, 39 documents), 31 and 32 for a reranker (8 requests,
    // 40 documents). The twin builds its sequences from those lengths, as the model scores
    // them, whichever the flag: an embedding model's usage counts each document with the query
    // and a padding token (39 x 129 under the flag), a cross-encoder's pairs the same, where
    // they were once squeezed to the dataset's count of the query once (3,136); for a reranker
    // both come to 40 x 64.
    let tokenizer = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/tokenizers/qwen3");
    let head = ["sim", "predict", "--model", "Qwen/Qwen3-0.6B", "--hardware", "h100-sxm", "--tokenizer", tokenizer];
    let cases: [(&[&str], _, _); 4] = [
        (&["--no-reranker", "--option", "convert=embed"], 49, 39 * 129),
        (&["--no-reranker", "--option", "convert=classify"], 39, 39 * 129),
        (&["--option", "convert=classify"], 40, 40 * 64),
        (&["--option", "convert=embed"], 48, 40 * 64),
    ];
    for (extra, sequences, tokens) in cases {
        let (_, json) = rerank_run(&head, extra).await;
        assert_eq!(engine_sequences(&json), sequences, "{extra:?}");
        assert_eq!(json["total_input_tokens"].as_u64(), Some(tokens), "{extra:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_embeddings_count_the_images_live_and_in_virtual_time() {
    // random-mm's prompts with one 256 x 256 image each, embedded by a vision-language model:
    // with the prompt (`openai-embeddings-chat`), the image alone (CLIP) or the image first
    // and vLLM's VLM2Vec sentence.
    let image = ["--dataset-name", "random-mm", "--random-mm-bucket-config", "{(256, 256, 1): 1.0}"];
    let mut tokens = Vec::new();
    for backend in
        ["openai-embeddings-chat", "openai-embeddings-clip", "openai-embeddings-vlm2vec", "infinity-embeddings-clip"]
    {
        let dir = tempfile::tempdir().unwrap();
        let (live, virt) =
            live_and_predicted_on(dir.path(), "Qwen/Qwen3-VL-8B-Instruct", &prompts(backend, "8", &image)).await;
        for (what, j) in [("live", &live), ("virtual", &virt)] {
            assert_eq!(j["completed"], 8, "{backend} {what}");
        }
        assert_eq!(live["total_input_tokens"], virt["total_input_tokens"], "{backend}");
        let (l, v) = (live["mean_e2el_ms"].as_f64().unwrap(), virt["mean_e2el_ms"].as_f64().unwrap());
        assert!((l / v - 1.0).abs() < 0.25, "{backend}: live {l} ms, predicted {v} ms");
        tokens.push(live["total_input_tokens"].as_u64().unwrap());
    }
    // The image's tokens are in every count; CLIP sends no prompt text and VLM2Vec a sentence
    // shorter than the 64-token prompt; Infinity's CLIP input is the image alone, without the
    // chat template's tokens around it.
    assert!(tokens[1] < tokens[2] && tokens[2] < tokens[0], "{tokens:?}");
    assert!(tokens[1] > 8 * 32, "the images' tokens: {tokens:?}");
    assert!(tokens[3] > 8 * 32 && tokens[3] < tokens[1], "{tokens:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_merge_a_batched_run_counting_every_input_once() {
    // 50 prompts, 8 a request: 7 requests shared by two workers, merged.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut all = vec!["bench", "serve", "--sim", SIM];
    all.extend(prompts("openai-embeddings", "50", &["--random-batch-size", "8", "--workers", "2"]));
    all.extend(["--save-result", "--result-dir", d, "--result-filename", "m.json"]);
    let out = servebench(args(&all)).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("Merged 2 of 2 workers"), "{stdout}");
    let json = read_json(&dir.path().join("m.json"));
    assert_eq!(json["completed"], 7);
    assert_eq!(json["total_input_sequences"], 50);
    assert_eq!(json["total_input_tokens"], 50 * 64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_batched_plan_counts_its_inputs_from_its_bodies() {
    // 40 documents, 5 a request, written by --dry-run, then replayed with no batch flag on the
    // twin and predicted in virtual time: the bodies say how many inputs each request carries.
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("rerank.jsonl");
    let rerank = ["--dataset-name", "random-rerank", "--random-batch-size", "5", "--dry-run", plan.to_str().unwrap()];
    let mut all = vec!["bench", "serve", "--sim", SIM];
    all.extend(prompts("vllm-rerank", "40", &rerank));
    let out = servebench(args(&all)).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let replay = ["--backend", "vllm-rerank", "--replay-plan", plan.to_str().unwrap(), "--no-store", "--disable-tqdm"];
    let (live, virt) = live_and_predicted(dir.path(), &replay).await;
    for (what, j) in [("live", &live), ("virtual", &virt)] {
        assert_eq!(j["completed"], 8, "{what}");
        assert_eq!(j["total_input_sequences"], 40, "{what}");
        assert_eq!(j["num_prompts"], 40, "{what}");
        assert_eq!(j["total_input_tokens"], 40 * 64, "{what}");
    }
    let (l, v) = (live["mean_e2el_ms"].as_f64().unwrap(), virt["mean_e2el_ms"].as_f64().unwrap());
    assert!((l / v - 1.0).abs() < 0.25, "live {l} ms, predicted {v} ms");
}
