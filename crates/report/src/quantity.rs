//! The numbers a comparison shows for each run, with their keys, labels and units.

use servebench_core::config::Metric;
use servebench_store::StoredRun;

/// A statistic of a latency distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stat {
    Mean,
    Median,
    P99,
}

impl Stat {
    pub const ALL: [Stat; 3] = [Stat::Mean, Stat::Median, Stat::P99];

    /// As in vLLM's JSON keys (`mean_ttft_ms`).
    pub fn key(self) -> &'static str {
        match self {
            Stat::Mean => "mean",
            Stat::Median => "median",
            Stat::P99 => "p99",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Stat::Mean => "Mean",
            Stat::Median => "Median",
            Stat::P99 => "P99",
        }
    }
}

/// The latency metrics a comparison shows, in vLLM's order.
pub const LATENCIES: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

/// The short upper-case name of a latency metric.
pub fn metric_name(metric: Metric) -> &'static str {
    match metric {
        Metric::Ttft => "TTFT",
        Metric::Tpot => "TPOT",
        Metric::Itl => "ITL",
        Metric::E2el => "E2EL",
        Metric::ClientQueueTime => "client queue time",
        Metric::E2elIncludingClientQueue => "E2EL with client queue",
    }
}

/// One number of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Quantity {
    /// Successful requests.
    Completed,
    /// Failed requests.
    Failed,
    /// Failed requests in percent of those sent.
    FailedPct,
    /// Requests per second.
    RequestThroughput,
    /// Output tokens per second.
    OutputThroughput,
    /// Input plus output tokens per second.
    TotalTokenThroughput,
    /// The most requests in flight at once: the exact count when the run has it, else vLLM's
    /// per-second bucket count (which can exceed the concurrency cap).
    PeakConcurrency,
    /// A latency statistic, in milliseconds.
    Latency(Stat, Metric),
}

impl Quantity {
    /// The rows of a side-by-side comparison, in order.
    pub fn key_rows() -> Vec<Quantity> {
        let mut rows = vec![
            Quantity::Completed,
            Quantity::Failed,
            Quantity::RequestThroughput,
            Quantity::OutputThroughput,
            Quantity::TotalTokenThroughput,
        ];
        for metric in LATENCIES {
            rows.extend(Stat::ALL.map(|s| Quantity::Latency(s, metric)));
        }
        rows.push(Quantity::PeakConcurrency);
        rows
    }

    /// Every quantity that has a key (for `--fail-on`).
    pub fn all() -> Vec<Quantity> {
        let mut all = Quantity::key_rows();
        all.insert(2, Quantity::FailedPct);
        all
    }

    /// The key used in `--fail-on` rules and CSV headers: vLLM's JSON key where it has one.
    pub fn key(self) -> String {
        match self {
            Quantity::Completed => "completed".into(),
            Quantity::Failed => "failed".into(),
            Quantity::FailedPct => "failed_pct".into(),
            Quantity::RequestThroughput => "request_throughput".into(),
            Quantity::OutputThroughput => "output_throughput".into(),
            Quantity::TotalTokenThroughput => "total_token_throughput".into(),
            Quantity::PeakConcurrency => "peak_concurrency".into(),
            Quantity::Latency(s, m) => format!("{}_{}_ms", s.key(), m.key()),
        }
    }

    /// The quantity of a [`Quantity::key`]; `None` for any other text.
    pub fn from_key(key: &str) -> Option<Quantity> {
        Quantity::all().into_iter().find(|q| q.key() == key)
    }

    /// A label with the unit: `Median TTFT (ms)`.
    pub fn label(self) -> String {
        match self {
            Quantity::Completed => "Successful requests".into(),
            Quantity::Failed => "Failed requests".into(),
            Quantity::FailedPct => "Failed requests (%)".into(),
            Quantity::RequestThroughput => "Request throughput (req/s)".into(),
            Quantity::OutputThroughput => "Output throughput (tok/s)".into(),
            Quantity::TotalTokenThroughput => "Total token throughput (tok/s)".into(),
            Quantity::PeakConcurrency => "Peak concurrency".into(),
            Quantity::Latency(s, m) => format!("{} {} (ms)", s.label(), metric_name(m)),
        }
    }

    /// The label without the unit: `median TTFT`, for sentences.
    pub fn name(self) -> String {
        match self {
            Quantity::Latency(s, m) => format!("{} {}", s.key(), metric_name(m)),
            other => {
                let label = other.label();
                let base = label.split(" (").next().unwrap_or(&label).to_string();
                base.to_lowercase()
            }
        }
    }

    /// The unit as written after a number (empty for counts).
    pub fn unit(self) -> &'static str {
        match self {
            Quantity::Completed | Quantity::Failed | Quantity::PeakConcurrency => "",
            Quantity::FailedPct => "%",
            Quantity::RequestThroughput => "req/s",
            Quantity::OutputThroughput | Quantity::TotalTokenThroughput => "tok/s",
            Quantity::Latency(..) => "ms",
        }
    }

    /// Whether a larger value is the better one.
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Quantity::Completed
                | Quantity::RequestThroughput
                | Quantity::OutputThroughput
                | Quantity::TotalTokenThroughput
        )
    }

    /// Whether the value is a count, printed without decimals.
    pub fn is_count(self) -> bool {
        matches!(self, Quantity::Completed | Quantity::Failed | Quantity::PeakConcurrency)
    }

    /// The run's value, when its summary has it.
    pub fn value(self, run: &StoredRun) -> Option<f64> {
        let s = &run.summary;
        match self {
            Quantity::Completed => Some(s.completed as f64),
            Quantity::Failed => s.failed.map(|f| f as f64),
            Quantity::FailedPct => failed_pct(s.completed, s.failed?),
            Quantity::RequestThroughput => Some(s.request_throughput),
            Quantity::OutputThroughput => s.output_throughput,
            Quantity::TotalTokenThroughput => s.total_token_throughput,
            Quantity::PeakConcurrency => {
                s.peak_concurrent_requests.or(s.vllm_max_concurrent_requests).map(|p| p as f64)
            }
            Quantity::Latency(stat, metric) => {
                let m = s.metric(metric)?;
                match stat {
                    Stat::Mean => Some(m.mean_ms),
                    Stat::Median => Some(m.median_ms),
                    Stat::P99 => m.percentile(99.0),
                }
            }
        }
    }

    /// The value as a table shows it: counts whole, everything else with two decimals (as
    /// vLLM prints them).
    pub fn format(self, value: f64) -> String {
        if self.is_count() { format!("{value:.0}") } else { format!("{value:.2}") }
    }

    /// The value with its unit: `124.81 tok/s`, `20`, `2.50 %`.
    pub fn format_with_unit(self, value: f64) -> String {
        match self.unit() {
            "" => self.format(value),
            unit => format!("{} {unit}", self.format(value)),
        }
    }
}

/// Failed requests in percent of those sent (`completed + failed`); `None` when none was sent.
pub fn failed_pct(completed: u64, failed: u64) -> Option<f64> {
    let sent = completed.saturating_add(failed);
    (sent > 0).then(|| failed as f64 * 100.0 / sent as f64)
}

/// Whether the run's peak concurrency is vLLM's per-second bucket count only.
pub fn peak_is_vllm_bucket(run: &StoredRun) -> bool {
    run.summary.peak_concurrent_requests.is_none() && run.summary.vllm_max_concurrent_requests.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_back_and_follow_vllms_json() {
        for q in Quantity::all() {
            assert_eq!(Quantity::from_key(&q.key()), Some(q), "{q:?}");
        }
        assert_eq!(Quantity::Latency(Stat::P99, Metric::Ttft).key(), "p99_ttft_ms");
        assert_eq!(Quantity::Latency(Stat::Median, Metric::E2el).label(), "Median E2EL (ms)");
        assert_eq!(Quantity::Latency(Stat::Median, Metric::Tpot).name(), "median TPOT");
        assert_eq!(Quantity::OutputThroughput.name(), "output throughput");
        assert_eq!(Quantity::from_key("p50_ttft_ms"), None);
    }

    #[test]
    fn values_come_from_the_summary() {
        let run = crate::testutil::reference_000()[0].clone();
        assert_eq!(Quantity::OutputThroughput.value(&run), Some(39.75));
        assert_eq!(Quantity::Latency(Stat::P99, Metric::Ttft).value(&run), Some(2761.99));
        assert_eq!(Quantity::Latency(Stat::Median, Metric::E2el).value(&run), None);
        assert_eq!(Quantity::FailedPct.value(&run), Some(0.0));
        assert_eq!(Quantity::PeakConcurrency.value(&run), Some(8.0));
        assert!(peak_is_vllm_bucket(&run));
        assert_eq!(Quantity::Completed.format(20.0), "20");
        assert_eq!(Quantity::OutputThroughput.format_with_unit(39.75), "39.75 tok/s");
    }
}
