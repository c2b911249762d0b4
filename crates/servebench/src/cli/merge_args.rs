//! Flags of `servebench merge`: the worker results of a sharded run, and where the merged
//! result goes.

use std::path::PathBuf;

use clap::Args;

/// `servebench merge FILE...|DIR`
#[derive(Args, Debug, Clone)]
pub struct MergeArgs {
    /// The workers' result files, or folders holding them (every worker result `*.json` in
    /// the folder and its subfolders; other JSON files there are skipped).
    #[arg(required = true, value_name = "FILE|DIR")]
    pub inputs: Vec<PathBuf>,
    /// The inputs hold the workers' files of several runs (a sharded sweep's points): group
    /// them by run (the same plan, and the file name less `-shardRofW` and the date and time
    /// each worker stamped) and merge each into its own run, saved under its rank 0's name.
    #[arg(long)]
    pub per_run: bool,
    /// Merge the ranks present when some are missing; the result is marked partial.
    #[arg(long)]
    pub partial: bool,
    /// Where to write the merged result JSON (default: the current folder).
    #[arg(long, value_name = "DIR")]
    pub result_dir: Option<String>,
    /// The merged result's file name (default: vLLM's name for the run).
    #[arg(long, value_name = "NAME")]
    pub result_filename: Option<String>,
    /// The run store (SQLite); default in the user's data directory, or $SERVEBENCH_DB.
    #[arg(long, value_name = "PATH")]
    pub db: Option<String>,
    /// Do not save the merged run to the run store.
    #[arg(long)]
    pub no_store: bool,
}
