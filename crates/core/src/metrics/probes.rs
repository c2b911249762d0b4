//! Probe requests (`--probe-request-rate`, vLLM 0.27+): one-token requests sent one after
//! another beside the timed run, outside its concurrency cap, whose end-to-end latencies say
//! what a new, light request waits under the run's load. [`ProbeStats`] is vLLM's summary of
//! them: the count that succeeded and failed, and the median, P99 and largest latency of the
//! ones that succeeded (vLLM's `Probe Requests` section prints it, `crate::vllm::text`).

use serde::{Deserialize, Serialize};

use super::stats::Sorted;
use crate::record::ProbeRecord;

/// vLLM's probe statistics (the `probe_*` keys of its result JSON).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeStats {
    pub completed: u64,
    pub failed: u64,
    pub median_e2el_ms: f64,
    pub p99_e2el_ms: f64,
    pub max_e2el_ms: f64,
}

impl ProbeStats {
    /// The statistics of `probes` as vLLM computes them (`np.median`, `np.percentile(., 99)`
    /// and `max` of the latencies in seconds, times 1000); `None` when no probe succeeded,
    /// where vLLM prints and writes nothing of them.
    pub fn of(probes: &[ProbeRecord]) -> Option<ProbeStats> {
        let ok: Vec<f64> = probes.iter().filter(|p| p.error.is_none()).map(|p| p.latency_s).collect();
        if ok.is_empty() {
            return None;
        }
        let sorted = Sorted::new(&ok);
        Some(ProbeStats {
            completed: ok.len() as u64,
            failed: (probes.len() - ok.len()) as u64,
            median_e2el_ms: sorted.median() * 1000.0,
            p99_e2el_ms: sorted.percentile(99.0) * 1000.0,
            max_e2el_ms: sorted.max() * 1000.0,
        })
    }
}

/// What a report says after vLLM's block when probes ran and none succeeded (vLLM then says
/// nothing): how many failed and why the first did. `None` otherwise.
pub fn render_failed_probes(probes: &[ProbeRecord]) -> Option<String> {
    let first = probes.first()?.error.as_deref()?;
    probes.iter().all(|p| p.error.is_some()).then(|| {
        format!("Probe requests: all {} failed (the first: {first}); the run had no probe latencies.", probes.len())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn probe(latency_s: f64, error: Option<&str>) -> ProbeRecord {
        ProbeRecord { sent_s: 0.0, latency_s, error: error.map(str::to_string) }
    }

    #[test]
    fn the_statistics_are_vllm_s_over_the_probes_that_succeeded() {
        let probes = [
            probe(0.010, None),
            probe(0.030, None),
            probe(9.0, Some("HTTP 503")),
            probe(0.020, None),
            probe(0.5, None),
        ];
        let s = ProbeStats::of(&probes).unwrap();
        assert_eq!((s.completed, s.failed), (4, 1));
        // np.median([0.01, 0.02, 0.03, 0.5]) = 0.025; np.percentile(., 99) = 0.03 + 0.47 * 0.97.
        assert!((s.median_e2el_ms - 25.0).abs() < 1e-9, "{s:?}");
        assert!((s.p99_e2el_ms - (0.03 + 0.47 * 0.97) * 1000.0).abs() < 1e-9, "{s:?}");
        assert_eq!(s.max_e2el_ms, 500.0);
        assert_eq!(ProbeStats::of(&[probe(1.0, Some("timeout"))]), None);
        assert_eq!(ProbeStats::of(&[]), None);
    }

    #[test]
    fn all_probes_failing_is_said() {
        let failed = [probe(0.0, Some("connection refused")), probe(0.0, Some("connection refused"))];
        let line = render_failed_probes(&failed).unwrap();
        assert_eq!(
            line,
            "Probe requests: all 2 failed (the first: connection refused); the run had no probe latencies."
        );
        assert_eq!(render_failed_probes(&[probe(0.01, None), probe(0.0, Some("x"))]), None);
        assert_eq!(render_failed_probes(&[]), None);
    }

    proptest! {
        #[test]
        fn the_order_statistics_lie_between_the_fastest_and_slowest_success(
            lats in proptest::collection::vec((0.0f64..10.0, any::<bool>()), 0..40)
        ) {
            let probes: Vec<ProbeRecord> =
                lats.iter().map(|&(l, ok)| probe(l, (!ok).then_some("failed"))).collect();
            let ok: Vec<f64> = lats.iter().filter(|(_, ok)| *ok).map(|(l, _)| l * 1000.0).collect();
            match ProbeStats::of(&probes) {
                None => prop_assert!(ok.is_empty()),
                Some(s) => {
                    let lo = ok.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = ok.iter().copied().fold(0.0, f64::max);
                    prop_assert_eq!(s.completed + s.failed, probes.len() as u64);
                    prop_assert_eq!(s.max_e2el_ms, hi);
                    prop_assert!(lo - 1e-9 <= s.median_e2el_ms && s.median_e2el_ms <= s.p99_e2el_ms + 1e-9);
                    prop_assert!(s.p99_e2el_ms <= hi + 1e-9);
                }
            }
        }
    }
}
