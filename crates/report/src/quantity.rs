//! The numbers a comparison shows for each run: [`Quantity`] and its [`Stat`]s, shared with
//! the thresholds of `--fail-on` and `--slo` in [`servebench_core::threshold`].

use servebench_store::StoredRun;

pub use servebench_core::threshold::{LATENCIES, Quantity, Stat, failed_pct, metric_name};

/// Whether the run's peak concurrency is vLLM's per-second bucket count only.
pub fn peak_is_vllm_bucket(run: &StoredRun) -> bool {
    run.summary.peak_concurrent_requests.is_none() && run.summary.vllm_max_concurrent_requests.is_some()
}

#[cfg(test)]
mod tests {
    use servebench_core::config::Metric;

    use super::*;

    #[test]
    fn values_come_from_the_summary() {
        let run = crate::testutil::reference_000()[0].clone();
        assert_eq!(Quantity::OutputThroughput.value(&run.summary), Some(39.75));
        assert_eq!(Quantity::Latency(Stat::P99, Metric::Ttft).value(&run.summary), Some(2761.99));
        assert_eq!(Quantity::Latency(Stat::Median, Metric::E2el).value(&run.summary), None);
        assert_eq!(Quantity::PeakConcurrency.value(&run.summary), Some(8.0));
        assert!(peak_is_vllm_bucket(&run));
    }
}
