//! Comparisons, findings and the HTML report of servebench.
//!
//! Everything here is a pure function from stored runs ([`StoredRun`]s read through
//! [`servebench_store::Store`]) to text, so it is tested without a database or a terminal:
//!
//! - [`layout`] tells which settings the runs share and which vary, and finds the sweep axis
//!   (a numeric setting such as `max_concurrency` or `num_prompts`) and the series along it.
//! - [`compare`] builds the comparison tables (side by side, sweep pivots, the statistics of
//!   two runs) and prints them as a text table, markdown or CSV.
//! - [`bootstrap`] gives confidence intervals of the difference of medians and P99s of two
//!   runs' per-request distributions; [`gate`] reads `--fail-on` rules and checks them.
//! - [`findings`] writes sentences about the runs, each citing the numbers it rests on;
//!   [`pareto`] finds the runs that trade throughput per GPU against tokens per user best.
//! - [`html`] renders the self-contained HTML report with inline SVG charts from [`svg`], and
//!   the timeline page of `--plot-timeline`; [`dataset_stats`] the figure of
//!   `--plot-dataset-stats`.
//! - [`select`] reads the runs a command names from the store.

pub mod bootstrap;
pub mod compare;
pub mod dataset_stats;
pub mod findings;
pub mod gate;
pub mod html;
pub mod layout;
pub mod pareto;
pub mod quantity;
pub mod select;
pub mod svg;
pub mod table;
#[cfg(test)]
mod testutil;

use thiserror::Error;

pub use compare::{Comparison, PairRow, PairStats};
pub use findings::{Finding, FindingKind};
pub use layout::{Layout, Series, Sweep};
pub use quantity::{Quantity, Stat};
pub use servebench_store::StoredRun;
pub use table::{Format, Table};

/// What can go wrong when comparing or reporting.
#[derive(Debug, Error)]
pub enum ReportError {
    #[error(transparent)]
    BadRule(#[from] servebench_core::threshold::ThresholdError),
    #[error(transparent)]
    Store(#[from] servebench_store::StoreError),
    #[error("no runs match; `servebench runs list` shows what the store holds")]
    NoRuns,
    #[error(
        "comparing needs at least two runs, and only {0} matched; name two runs or more, or widen the filters \
         (`servebench runs list` shows what the store holds)"
    )]
    TooFewRuns(usize),
    #[error(
        "run {0} is named twice (a range such as 3-11 includes its ends); name each run once: a run compared with \
         itself shows only resampling noise"
    )]
    RunTwice(servebench_store::RunId),
    #[error("--timeline {id}: {why}; pick a run of the report that has per-request records")]
    BadTimeline { id: i64, why: String },
    #[error("--by {key}: {why}")]
    BadAxis { key: String, why: String },
}
