//! Metric maths: numpy-exact statistics, vLLM's and the exact peak counters, and the run
//! [`Summary`] that every report, JSON file and comparison is built from; the token
//! [`Ledger`] and the multi-turn [`TurnMetrics`] beside it, the client's [`Health`], the HTTP
//! timing breakdown ([`HttpBreakdown`]), the run per GPU ([`render_per_gpu`]), the probe
//! requests' latencies ([`ProbeStats`]), and the run's steady state and time slices ([`window`]).

pub mod health;
pub mod http;
pub mod ledger;
pub mod peaks;
pub mod per_gpu;
pub mod probes;
pub mod reasoning;
pub mod stats;
pub mod summary;
pub mod turns;
pub mod window;

pub use health::{Health, Verdict, render_health};
pub use http::{HttpBreakdown, render_http};
pub use ledger::{Ledger, render_notes};
pub use peaks::{BucketPeaks, peak_concurrency, peak_output_tokens_per_s, vllm_bucket_peaks};
pub use per_gpu::{cost_per_million, interactivity, is_gpu_hour_cost, per_gpu, per_user, render_per_gpu};
pub use probes::{ProbeStats, render_failed_probes};
pub use reasoning::{Reasoning, render_reasoning};
pub use stats::{Described, Sorted, describe, mean, median, pairwise_sum, percentile, std};
pub use summary::{DispatchLag, MAX_FAILURE_MESSAGES, MetricStats, PoolingFigures, Summary, dispatch_lag};
pub use turns::{TurnMetrics, render_turns};
pub use window::{Slice, SteadyState};
