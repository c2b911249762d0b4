//! The database schema, its version (`PRAGMA user_version`) and the forward migrations.
//!
//! A new file is created at version 0 and taken through every migration in order, so a new
//! store and an old one that was migrated are the same. Migrations run in one `IMMEDIATE`
//! transaction that re-reads the version under the write lock, so two processes opening an
//! old store at once migrate it once. A migration is never edited after it shipped: a change
//! is a new migration at the end of [`MIGRATIONS`].
//!
//! Version history:
//! - v1: `runs` (identity, key numbers as columns, config/summary/notes as JSON, source),
//!   `run_labels` and `requests` (one row per request, chunk times as a compact blob).
//! - v2: `runs.uid` (short stable id, filled in for existing runs), `runs.environment_json`
//!   and `runs.fingerprint` (identifies an imported block, so it is imported once).

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, Transaction, TransactionBehavior};

use crate::StoreError;
use crate::ids::short_id;

/// The schema version this servebench writes.
pub const SCHEMA_VERSION: i64 = 2;

/// `PRAGMA application_id` of a servebench store ("SBRS").
pub(crate) const APPLICATION_ID: i64 = 0x5342_5253;

/// How long a writer waits for another one before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

type Migration = fn(&Transaction<'_>) -> rusqlite::Result<()>;

/// Migration `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: [Migration; 2] = [v1_initial, v2_uid_environment_fingerprint];

const V1: &str = "
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
";

fn v1_initial(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(V1)
}

fn v2_uid_environment_fingerprint(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE runs ADD COLUMN uid TEXT;
         ALTER TABLE runs ADD COLUMN environment_json TEXT;
         ALTER TABLE runs ADD COLUMN fingerprint TEXT;",
    )?;
    let existing: Vec<(i64, String)> = {
        let mut stmt = tx.prepare("SELECT id, created_at FROM runs ORDER BY id")?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?
    };
    let mut update = tx.prepare("UPDATE runs SET uid = ?1 WHERE id = ?2")?;
    for (id, created_at) in existing {
        update.execute((short_id(&format!("v1-run|{id}|{created_at}")), id))?;
    }
    tx.execute_batch(
        "CREATE UNIQUE INDEX runs_uid ON runs(uid);
         CREATE UNIQUE INDEX runs_fingerprint ON runs(fingerprint);",
    )
}

/// Sets the connection up (busy timeout, foreign keys, WAL) and brings the schema to
/// [`SCHEMA_VERSION`].
pub(crate) fn prepare(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let open_err = |source| classify(path, source);
    conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
    conn.pragma_update(None, "foreign_keys", true).map_err(open_err)?;
    if !path.as_os_str().is_empty() && path != Path::new(":memory:") {
        retry_busy(|| conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))).map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL").map_err(open_err)?;
    }
    migrate(conn, path)
}

/// `NOTADB` means the file is something else; other errors are failures to open.
fn classify(path: &Path, error: rusqlite::Error) -> StoreError {
    match error.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => StoreError::NotSqlite { path: path.to_path_buf() },
        _ => StoreError::Open { path: path.to_path_buf(), error },
    }
}

/// Runs `f` again while the database is busy, for statements the busy handler does not
/// cover (switching the journal mode), up to the busy timeout.
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let start = Instant::now();
    loop {
        match f() {
            Err(e) if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) && start.elapsed() < BUSY_TIMEOUT => {
                thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let too_new = |found| StoreError::TooNew { path: path.to_path_buf(), found, known: SCHEMA_VERSION };
    let not_ours = || StoreError::NotAStore { path: path.to_path_buf() };
    let open_err = |source| classify(path, source);
    let version = user_version(conn).map_err(open_err)?;
    if version > SCHEMA_VERSION {
        return Err(too_new(version));
    }
    if version < 0 {
        return Err(not_ours());
    }
    let app_id: i64 = conn.pragma_query_value(None, "application_id", |r| r.get(0)).map_err(open_err)?;
    if app_id != 0 && app_id != APPLICATION_ID {
        return Err(not_ours());
    }
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(open_err)?;
    let version = user_version(&tx)?;
    if version > SCHEMA_VERSION {
        return Err(too_new(version));
    }
    if version < 0 {
        return Err(not_ours());
    }
    if version == 0 {
        let tables: i64 = tx.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table'", [], |r| r.get(0))?;
        if tables > 0 {
            return Err(not_ours());
        }
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
    }
    for step in &MIGRATIONS[version as usize..] {
        step(&tx)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_is_one_migration_per_version() {
        assert_eq!(MIGRATIONS.len() as i64, SCHEMA_VERSION);
    }

    #[test]
    fn a_new_database_gets_the_current_version_and_our_application_id() {
        let mut conn = Connection::open_in_memory().unwrap();
        prepare(&mut conn, Path::new(":memory:")).unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
        let app: i64 = conn.pragma_query_value(None, "application_id", |r| r.get(0)).unwrap();
        assert_eq!(app, APPLICATION_ID);
        // Opening again is a no-op.
        prepare(&mut conn, Path::new(":memory:")).unwrap();
    }

    #[test]
    fn someone_elses_database_is_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x)").unwrap();
        assert!(matches!(prepare(&mut conn, Path::new(":memory:")), Err(StoreError::NotAStore { .. })));
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "application_id", 7).unwrap();
        assert!(matches!(prepare(&mut conn, Path::new(":memory:")), Err(StoreError::NotAStore { .. })));
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", -1).unwrap();
        assert!(matches!(prepare(&mut conn, Path::new(":memory:")), Err(StoreError::NotAStore { .. })));
    }

    #[test]
    fn a_newer_schema_is_refused_with_advice() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        let err = prepare(&mut conn, Path::new(":memory:")).unwrap_err();
        assert!(matches!(err, StoreError::TooNew { found, .. } if found == SCHEMA_VERSION + 1));
        assert!(err.to_string().contains("upgrade servebench"), "{err}");
    }
}
