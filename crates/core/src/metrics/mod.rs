//! Metric maths: numpy-exact statistics, vLLM's and the exact peak counters, and the run
//! [`Summary`] that every report, JSON file and comparison is built from; the token
//! [`Ledger`] and the multi-turn [`TurnMetrics`] beside it.

pub mod ledger;
pub mod peaks;
pub mod stats;
pub mod summary;
pub mod turns;

pub use ledger::{Ledger, render_notes};
pub use peaks::{BucketPeaks, peak_concurrency, peak_output_tokens_per_s, vllm_bucket_peaks};
pub use stats::{Described, Sorted, describe, mean, median, pairwise_sum, percentile, std};
pub use summary::{DispatchLag, MAX_FAILURE_MESSAGES, MetricStats, Summary, dispatch_lag};
pub use turns::{TurnMetrics, render_turns};
