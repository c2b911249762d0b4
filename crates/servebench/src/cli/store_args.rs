//! Flags of `servebench import` and `servebench runs ...`: the run store and its filters.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use servebench_store::dates::parse_date;
use servebench_store::{RunFilter, RunKind, RunRef, RunSpec, StoreError, default_db_path};

/// Where the run store is.
#[derive(Args, Debug, Clone, Default)]
pub struct DbArgs {
    /// The run store [default: $SERVEBENCH_DB, else $XDG_DATA_HOME/servebench/runs.db,
    /// else ~/.local/share/servebench/runs.db].
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
}

impl DbArgs {
    /// `--db`, else the default location.
    pub fn path(&self) -> Result<PathBuf, StoreError> {
        match &self.db {
            Some(p) => Ok(p.clone()),
            None => default_db_path(),
        }
    }
}

/// `servebench import`: read vLLM result files and reports into the run store.
#[derive(Args, Debug, Clone)]
pub struct ImportArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// vLLM result JSON (saved or appended, any version), servebench result JSON, or text
    /// holding console reports with headings between them; a folder stands for the files in it
    /// and its subfolders (vLLM's --result-dir, or a parameter sweep's folder: its runs, not
    /// the summaries, warm-ups and failure records beside them).
    #[arg(required = true, value_name = "FILE|FOLDER")]
    pub files: Vec<PathBuf>,
    /// How many GPUs served the imported runs, for their per-GPU throughputs, where a file
    /// does not say: a servebench file's config, a `gpus` key (`vllm bench serve --metadata
    /// gpus=8`), or the tp, pp and dp of a `vllm serve` line above a report say it first.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub gpus: Option<u32>,
    /// What one of those GPUs costs an hour, in dollars, for the imported runs' cost per
    /// million output tokens, where a servebench file's config does not say.
    #[arg(long, value_name = "USD")]
    pub gpu_hour_cost: Option<f64>,
}

/// `servebench runs ...`
#[derive(Subcommand, Debug, Clone)]
pub enum RunsCommand {
    /// List stored runs (a table, or one JSON object per line with --json).
    List(RunsListArgs),
    /// Show one run: its result block as vLLM prints it, labels, config and environment.
    Show(RunsShowArgs),
    /// Remove runs with their records.
    Rm(RunsRmArgs),
    /// Write runs as CSV or JSON lines, or one run's requests with --requests.
    Export(RunsExportArgs),
    /// Set or remove labels of stored runs (gpus=N gives an imported run its GPU count).
    Label(RunsLabelArgs),
}

/// Which runs: every condition given must hold.
#[derive(Args, Debug, Clone, Default)]
pub struct FilterArgs {
    /// Only runs with this label: KEY=VALUE, or KEY for any value. Repeat to require several.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Only runs whose model id contains this text (any case).
    #[arg(long, value_name = "TEXT")]
    pub model: Option<String>,
    /// Only runs of this kind.
    #[arg(long, value_parser = RunKind::ALL.map(RunKind::as_str))]
    pub kind: Option<String>,
    /// Only runs started at or after DATE: 2025-06-01, 2025-06-01T14:30, RFC 3339, or an age (7d, 12h).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Only runs started before DATE (same forms as --since).
    #[arg(long, value_name = "DATE")]
    pub until: Option<String>,
    /// At most N runs: the most recent ones, listed oldest first.
    #[arg(long, value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub limit: Option<usize>,
}

impl FilterArgs {
    /// The store's filter; an error when a date cannot be read.
    pub fn to_filter(&self) -> Result<RunFilter, StoreError> {
        let since = self.since.as_deref().map(parse_date).transpose()?;
        let until = self.until.as_deref().map(parse_date).transpose()?;
        if let (Some(s), Some(u), Some(since_text), Some(until_text)) = (since, until, &self.since, &self.until)
            && s >= u
        {
            return Err(StoreError::EmptyWindow { since: since_text.clone(), until: until_text.clone() });
        }
        Ok(RunFilter {
            labels: self.labels.iter().map(|l| RunFilter::parse_label(l)).collect::<Result<_, _>>()?,
            model: self.model.clone(),
            kind: self.kind.as_deref().and_then(RunKind::from_name),
            since,
            until,
            limit: self.limit,
        })
    }
}

#[derive(Args, Debug, Clone)]
pub struct RunsListArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// One JSON object per run, one per line, instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct RunsShowArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// The run: its number or its short id.
    #[arg(value_name = "ID")]
    pub run: RunRef,
    /// Everything stored about the run as one JSON object (records excepted).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct RunsRmArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// The runs: numbers, short ids or ranges of numbers (3-11). If a run named alone is not
    /// in the store, or a range holds none, none is removed.
    #[arg(required = true, value_name = "ID")]
    pub runs: Vec<RunSpec>,
}

#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("change").args(["set", "unset"]).required(true).multiple(true)))]
pub struct RunsLabelArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// The runs: numbers, short ids or ranges of numbers (3-11). If a run named alone is not
    /// in the store, or a range holds none, none is changed.
    #[arg(required = true, value_name = "ID")]
    pub runs: Vec<RunSpec>,
    /// Set a label, replacing its value where the run has it. gpus=N is the run's GPU count,
    /// which its per-GPU throughputs divide by, and gpu_hour_cost=USD their price an hour, for
    /// its cost per million output tokens. Repeat for several.
    #[arg(long, value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Remove a label (gpus, gpu_hour_cost: the run forgets its GPU count, their price).
    /// Repeat for several.
    #[arg(long, value_name = "KEY")]
    pub unset: Vec<String>,
}

/// Output format of `runs export`.
#[derive(ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ExportFormat {
    /// A header line, then one line per run (labels as `label:KEY` columns).
    #[default]
    Csv,
    /// One JSON object per line.
    Json,
    /// With --requests: the run's requests as a trace (Trace Event Format JSON) to open in
    /// ui.perfetto.dev or chrome://tracing: a row per concurrency slot, each request's wait
    /// for its first token and its decode, waits for a slot, late dispatches, and counters.
    Trace,
}

#[derive(Args, Debug, Clone)]
pub struct RunsExportArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// The output format.
    #[arg(long, value_enum, default_value_t)]
    pub format: ExportFormat,
    /// Write to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Export the requests of run ID (one line per request) instead of runs.
    #[arg(long, value_name = "ID", conflicts_with_all = ["labels", "model", "kind", "since", "until", "limit"])]
    pub requests: Option<RunRef>,
}
