//! The servebench run store: every measured, predicted or imported run in one SQLite file,
//! with its summary, configuration, labels, environment and per-request records.
//!
//! - [`Store`] opens (and creates or migrates) the database and inserts, lists, reads and
//!   removes runs. The file is in WAL mode with a busy timeout, so several servebench
//!   processes can write to one store at once.
//! - [`NewRun`] is what goes in: built from a [`RunResult`](servebench_core::record::RunResult)
//!   and its [`Summary`](servebench_core::metrics::Summary), or from a summary alone (imports).
//! - [`import`] turns vLLM result files (JSON of any 0.x version, appended JSON lines, console
//!   reports with free-text headings) into [`NewRun`]s.
//! - [`merge`] merges the result files of a sharded run's workers into one exact run.
//! - [`export`] writes runs as CSV or JSON lines, and one run's requests likewise or as a trace
//!   for Perfetto; [`mod@format`] prints the `runs list` table and the `runs show` text.
//!
//! Where the database lives is decided by [`default_db_path`] unless the caller passes a path.

pub mod dates;
pub mod export;
pub mod format;
mod ids;
pub mod import;
pub mod merge;
mod path;
mod requests;
mod runs;
mod schema;
mod store;
#[cfg(test)]
mod testutil;

use std::path::PathBuf;

use thiserror::Error;

pub use path::{db_path_from, default_db_path, refuse_store_overwrite};
pub use runs::{
    BadRunRef, BadRunSpec, ChunkTimes, KeyStats, NewRun, RunFilter, RunId, RunKind, RunRecords, RunRef, RunRow,
    RunSpec, Source, StoredRun,
};
pub use schema::SCHEMA_VERSION;
pub use store::Store;

/// What can go wrong with the run store.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("could not create the folder {} for the run store: {error}; pass --db PATH to put it elsewhere", path.display())]
    CreateDir { path: PathBuf, error: std::io::Error },
    #[error("could not open the run store {}: {error}; check the path, or pass another --db", path.display())]
    Open { path: PathBuf, error: rusqlite::Error },
    #[error("{} is not a servebench run store (it is an SQLite file with other tables); pass another --db", path.display())]
    NotAStore { path: PathBuf },
    #[error("{} is not a servebench run store (it is not an SQLite file at all); pass another --db", path.display())]
    NotSqlite { path: PathBuf },
    #[error("{} holds an SQLite database (a run store?), which writing there would destroy; choose another output path", path.display())]
    WouldOverwrite { path: PathBuf },
    #[error(
        "the run store {} has schema version {found}, newer than this servebench knows ({known}); \
         upgrade servebench or pass another --db",
        path.display()
    )]
    TooNew { path: PathBuf, found: i64, known: i64 },
    #[error("the run store failed: {0}; if another program holds it locked, retry; if it is damaged, pass a new --db")]
    Sql(rusqlite::Error),
    #[error("there is no run {0} in the store; `servebench runs list` shows the ids")]
    NotFound(RunRef),
    #[error("there are no runs numbered {0} to {1} in the store; `servebench runs list` shows the ids")]
    EmptyRange(RunId, RunId),
    #[error(
        "this run is already in the store as run {existing} (same source file content and line); remove it first with `servebench runs rm {existing}` to import it again"
    )]
    Duplicate { existing: RunId },
    #[error(
        "run {id} has a damaged {what} in the store; export what is readable, then remove it with `servebench runs rm {id}`"
    )]
    Corrupt { id: RunId, what: &'static str },
    #[error(
        "cannot tell where the run store should live: neither $XDG_DATA_HOME nor $HOME is set; pass --db PATH or set SERVEBENCH_DB"
    )]
    NoDataDir,
    #[error(
        "cannot read the date {0:?}; use 2025-06-01, 2025-06-01T14:30, an RFC 3339 time (2025-06-01T14:30:00Z) or an age such as 7d or 12h"
    )]
    BadDate(String),
    #[error("the age {0:?} reaches back before the earliest date there is; give a smaller age, or a date")]
    AgeTooLong(String),
    #[error("--since {since} is not before --until {until}, so no run can match; swap them")]
    EmptyWindow { since: String, until: String },
    #[error(
        "--label {0:?}: the label's key is empty; write KEY=VALUE, or KEY for any value (`servebench runs show ID` lists a run's labels)"
    )]
    EmptyLabelKey(String),
    #[error(
        "gpus={0:?}: the gpus label is the run's GPU count, which its per-GPU figures divide by; give a whole number \
         from 1 (name the device under another key, such as gpu={0})"
    )]
    BadGpus(String),
    #[error(
        "gpu_hour_cost={0:?}: the gpu_hour_cost label is what one GPU costs an hour; give a number above 0, as 2.49"
    )]
    BadCost(String),
}

// Not `#[from]`: the message already holds the SQLite error, which would print twice as its
// cause. The same holds for the `error` fields above.
impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Sql(e)
    }
}
