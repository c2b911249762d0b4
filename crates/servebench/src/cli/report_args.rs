//! Flags of `servebench compare` and `servebench report`: which runs, and how to show them.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use servebench_store::{RunRef, RunSpec};

use crate::cli::store_args::{DbArgs, FilterArgs};

/// Which runs: named ones, every run, or those matching the filters.
#[derive(Args, Debug, Clone, Default)]
pub struct RunSelection {
    /// The runs, by number or short id, or ranges of numbers (3-11), in the order to show them
    /// (the first is the baseline of a two-run comparison).
    #[arg(value_name = "RUN", conflicts_with_all = ["all", "labels", "model", "kind", "since", "until", "limit"])]
    pub runs: Vec<RunSpec>,
    /// Every run in the store.
    #[arg(long, conflicts_with_all = ["labels", "model", "kind", "since", "until", "limit"])]
    pub all: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
}

impl RunSelection {
    /// Whether anything picks runs.
    pub fn is_empty(&self) -> bool {
        let f = &self.filter;
        self.runs.is_empty()
            && !self.all
            && f.labels.is_empty()
            && f.model.is_none()
            && f.kind.is_none()
            && f.since.is_none()
            && f.until.is_none()
            && f.limit.is_none()
    }
}

/// How `compare` prints.
#[derive(ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CompareFormat {
    /// Aligned columns.
    #[default]
    Table,
    /// GitHub-flavoured markdown tables (and findings as a bullet list).
    Markdown,
    /// One line per run with every setting that varies and every number; --fail-on verdicts go to stderr.
    Csv,
}

/// `servebench compare`: runs side by side, as a sweep, or two runs with confidence intervals.
#[derive(Args, Debug, Clone)]
#[command(after_long_help = COMPARE_HELP)]
pub struct CompareArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub select: RunSelection,
    /// The sweep axis: a numeric setting or label that varies (max_concurrency, num_prompts,
    /// request_rate, ...) [default: the first of those that varies].
    #[arg(long, value_name = "KEY")]
    pub by: Option<String>,
    /// How to print the comparison.
    #[arg(long, value_enum, default_value_t)]
    pub format: CompareFormat,
    /// Print findings (a bullet list of what the numbers show) under the tables.
    #[arg(long)]
    pub findings: bool,
    /// Two runs only: exit with code 3 when B regressed against A past a threshold with a
    /// confidence interval that excludes 0. RULES: KEY>+N% or KEY<-N, comma-separated
    /// (p99_ttft_ms>+10%,median_tpot_ms>+5%,output_throughput<-5%).
    #[arg(long, value_name = "RULES")]
    pub fail_on: Vec<String>,
}

const COMPARE_HELP: &str = "\
Two runs (compare A B) are compared on their per-request records when both have them: the \
difference B - A of each median and P99 (TTFT, TPOT, ITL per token chunk, E2EL) gets a 95 % \
confidence interval from a seeded bootstrap of 2000 resamples, means a normal-approximation \
interval. Runs imported from console reports have no records and are compared on their \
summaries, without intervals.

--fail-on rules: KEY > CHANGE or KEY < CHANGE, where KEY is mean_/median_/p99_ with \
ttft_ms, tpot_ms, itl_ms or e2el_ms, or output_throughput, request_throughput, \
total_token_throughput, completed, failed, failed_pct, peak_concurrency; CHANGE is +N or -N, \
in percent of A with %, else in the key's unit. A rule fails when the change passes it and \
the interval of B - A excludes 0; without an interval the threshold alone decides.

Exit codes: 0 done, 1 error, 2 bad usage, 3 a --fail-on rule failed.";

/// `servebench report`: one self-contained HTML file.
#[derive(Args, Debug, Clone)]
pub struct HtmlReportArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub select: RunSelection,
    /// The HTML file to write.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// The sweep axis (as for `compare --by`).
    #[arg(long, value_name = "KEY")]
    pub by: Option<String>,
    /// The page's title.
    #[arg(long, value_name = "TEXT", default_value = "servebench report")]
    pub title: String,
    /// The run whose requests the timeline shows [default: the first run with per-request records].
    #[arg(long, value_name = "RUN")]
    pub timeline: Option<RunRef>,
}
