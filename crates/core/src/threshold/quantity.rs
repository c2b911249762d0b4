//! The numbers a threshold can name: a statistic of a latency or a count or rate of a run, with
//! its key, label, unit and value in a [`Summary`].

use std::hash::{Hash, Hasher};

use crate::config::Metric;
use crate::metrics::Summary;

/// The latency metrics a threshold can name and a comparison shows, in vLLM's order.
pub const LATENCIES: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

/// The statistics vLLM gives of its probe requests: median, P99 and the largest (P100).
pub const PROBE_STATS: [Stat; 3] = [Stat::Median, Stat::P99, Stat::Percentile(100.0)];

/// A statistic of a latency distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stat {
    Mean,
    Median,
    /// A percentile, 0 to 100.
    Percentile(f64),
}

// Percentiles come from the parser (finite, 0 to 100) or from constants, never NaN.
impl Eq for Stat {}

impl Hash for Stat {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match *self {
            Stat::Mean => 0u8.hash(state),
            Stat::Median => 1u8.hash(state),
            Stat::Percentile(p) => {
                2u8.hash(state);
                // `+ 0.0` folds -0 into 0, which compare equal.
                (p + 0.0).to_bits().hash(state);
            }
        }
    }
}

impl Stat {
    /// The 99th percentile.
    pub const P99: Stat = Stat::Percentile(99.0);

    /// The statistics a comparison shows for each latency.
    pub const ALL: [Stat; 3] = [Stat::Mean, Stat::Median, Stat::P99];

    /// As in vLLM's JSON keys: `mean`, `median`, `p99`, `p99.9`.
    pub fn key(self) -> String {
        match self {
            Stat::Mean => "mean".into(),
            Stat::Median => "median".into(),
            Stat::Percentile(p) => format!("p{}", number_text(p)),
        }
    }

    /// `Mean`, `Median`, `P99`.
    pub fn label(self) -> String {
        match self {
            Stat::Mean => "Mean".into(),
            Stat::Median => "Median".into(),
            Stat::Percentile(p) => format!("P{}", number_text(p)),
        }
    }

    /// Reads a [`Stat::key`]: `mean`, `median` or `pN` with N from 0 to 100.
    pub fn from_key(key: &str) -> Option<Stat> {
        match key {
            "mean" => Some(Stat::Mean),
            "median" => Some(Stat::Median),
            p => {
                let p: f64 = p.strip_prefix('p')?.parse().ok()?;
                (0.0..=100.0).contains(&p).then_some(Stat::Percentile(p + 0.0))
            }
        }
    }
}

/// How vLLM names a probe statistic: `Median`, `P99`, `Max` (P100).
pub fn probe_stat(s: Stat) -> String {
    if s == Stat::Percentile(100.0) { "Max".into() } else { s.label() }
}

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
    /// Input sequences per second of a pooling run (vLLM's `input_sequence_throughput`: the
    /// prompts of its input lists, the documents of its reranks); only for pooling runs.
    InputThroughput,
    /// Output tokens per second.
    OutputThroughput,
    /// Input plus output tokens per second.
    TotalTokenThroughput,
    /// Output tokens per second per GPU serving the run (InferenceX's `output_tput_per_gpu`);
    /// only for a run whose GPU count is known.
    OutputThroughputPerGpu,
    /// Input plus output tokens per second per GPU (InferenceX's `tput_per_gpu`).
    TotalTokenThroughputPerGpu,
    /// What a million output tokens cost: the GPUs' price an hour over the output tokens
    /// they serve in it; only for a run that knows its GPU count and their price.
    CostPerMillionOutput,
    /// Output tokens per joule the GPUs consumed over the run (from a GPU exporter's energy
    /// counter or power gauge, `--scrape`d); only for a run whose telemetry has it.
    OutputTokensPerJoule,
    /// Output tokens per second each request sees once it streams: 1000 / median TPOT in ms
    /// (InferenceX's `median_intvty`), the axis that throughput per GPU is traded against.
    Interactivity,
    /// The most requests in flight at once: the exact count when the run has it, else vLLM's
    /// per-second bucket count (which can exceed the concurrency cap).
    PeakConcurrency,
    /// A latency statistic, in milliseconds.
    Latency(Stat, Metric),
    /// A statistic of the probe requests' end-to-end latency (`--probe-request-rate`), in
    /// milliseconds: one of [`PROBE_STATS`], vLLM's `probe_{median,p99,max}_e2el_ms`.
    ProbeE2el(Stat),
    /// The GPU's use the server telemetry gave over the run, mean percent (`--server-metrics`
    /// against a simulated server or a prediction, or a GPU exporter `--scrape`d), shown in a
    /// sweep beside the load. As a GPU exporter's, it is the share of time a kernel ran, not
    /// of the GPU's capacity: one stream keeps it busy. Not a threshold's.
    GpuUtil,
}

impl Quantity {
    /// The rows of a side-by-side comparison, in order.
    pub fn key_rows() -> Vec<Quantity> {
        let mut rows = vec![
            Quantity::Completed,
            Quantity::Failed,
            Quantity::RequestThroughput,
            Quantity::InputThroughput,
            Quantity::OutputThroughput,
            Quantity::TotalTokenThroughput,
            Quantity::OutputThroughputPerGpu,
            Quantity::TotalTokenThroughputPerGpu,
            Quantity::CostPerMillionOutput,
            Quantity::OutputTokensPerJoule,
        ];
        for metric in LATENCIES {
            rows.extend(Stat::ALL.map(|s| Quantity::Latency(s, metric)));
        }
        rows.extend(PROBE_STATS.map(Quantity::ProbeE2el));
        rows.push(Quantity::PeakConcurrency);
        rows
    }

    /// Every quantity a comparison of two runs has (what `--fail-on` can check). Interactivity
    /// is not a row of its own: the median TPOT row shows the same figure.
    pub fn all() -> Vec<Quantity> {
        let mut all = Quantity::key_rows();
        all.insert(2, Quantity::FailedPct);
        all.push(Quantity::Interactivity);
        all
    }

    /// The key of thresholds and CSV headers: vLLM's JSON key where it has one.
    pub fn key(self) -> String {
        match self {
            Quantity::Completed => "completed".into(),
            Quantity::Failed => "failed".into(),
            Quantity::FailedPct => "failed_pct".into(),
            Quantity::RequestThroughput => "request_throughput".into(),
            Quantity::InputThroughput => "input_sequence_throughput".into(),
            Quantity::OutputThroughput => "output_throughput".into(),
            Quantity::TotalTokenThroughput => "total_token_throughput".into(),
            Quantity::OutputThroughputPerGpu => "output_throughput_per_gpu".into(),
            Quantity::TotalTokenThroughputPerGpu => "total_token_throughput_per_gpu".into(),
            Quantity::CostPerMillionOutput => "cost_per_million_output_tokens".into(),
            Quantity::OutputTokensPerJoule => "output_tokens_per_joule".into(),
            Quantity::Interactivity => "interactivity".into(),
            Quantity::PeakConcurrency => "peak_concurrency".into(),
            Quantity::Latency(s, m) => format!("{}_{}_ms", s.key(), m.key()),
            Quantity::ProbeE2el(s) => format!("probe_{}_e2el_ms", probe_stat(s).to_lowercase()),
            Quantity::GpuUtil => "mean_gpu_util_pct".into(),
        }
    }

    /// Reads a [`Quantity::key`], a latency with any percentile included (`p99.9_e2el_ms`);
    /// `None` for any other text.
    pub fn from_key(key: &str) -> Option<Quantity> {
        let fixed = [
            Quantity::Completed,
            Quantity::Failed,
            Quantity::FailedPct,
            Quantity::RequestThroughput,
            Quantity::InputThroughput,
            Quantity::OutputThroughput,
            Quantity::TotalTokenThroughput,
            Quantity::OutputThroughputPerGpu,
            Quantity::TotalTokenThroughputPerGpu,
            Quantity::CostPerMillionOutput,
            Quantity::OutputTokensPerJoule,
            Quantity::Interactivity,
            Quantity::PeakConcurrency,
        ];
        let probes = PROBE_STATS.map(Quantity::ProbeE2el);
        if let Some(q) = fixed.into_iter().chain(probes).find(|q| q.key() == key) {
            return Some(q);
        }
        let (stat, metric) = key.strip_suffix("_ms")?.split_once('_')?;
        let metric = LATENCIES.into_iter().find(|m| m.key() == metric)?;
        Some(Quantity::Latency(Stat::from_key(stat)?, metric))
    }

    /// A label with the unit: `Median TTFT (ms)`.
    pub fn label(self) -> String {
        match self {
            Quantity::Completed => "Successful requests".into(),
            Quantity::Failed => "Failed requests".into(),
            Quantity::FailedPct => "Failed requests (%)".into(),
            Quantity::RequestThroughput => "Request throughput (req/s)".into(),
            Quantity::InputThroughput => "Input throughput (inputs/s)".into(),
            Quantity::OutputThroughput => "Output throughput (tok/s)".into(),
            Quantity::TotalTokenThroughput => "Total token throughput (tok/s)".into(),
            Quantity::OutputThroughputPerGpu => "Output throughput per GPU (tok/s/GPU)".into(),
            Quantity::TotalTokenThroughputPerGpu => "Total token throughput per GPU (tok/s/GPU)".into(),
            Quantity::CostPerMillionOutput => "Cost per million output tokens ($/Mtok)".into(),
            Quantity::OutputTokensPerJoule => "Output tokens per joule (tok/J)".into(),
            Quantity::Interactivity => "Interactivity (tok/s/user)".into(),
            Quantity::PeakConcurrency => "Peak concurrency".into(),
            Quantity::Latency(s, m) => format!("{} {} (ms)", s.label(), metric_name(m)),
            Quantity::ProbeE2el(s) => format!("{} probe E2EL (ms)", probe_stat(s)),
            Quantity::GpuUtil => "Mean GPU util (%)".into(),
        }
    }

    /// The label without the unit: `median TTFT`, for sentences.
    pub fn name(self) -> String {
        match self {
            Quantity::Latency(s, m) => format!("{} {}", s.key(), metric_name(m)),
            other => {
                let label = other.label();
                let base = label.split(" (").next().unwrap_or(&label);
                // Lower-case the first letter only: `output throughput per GPU`.
                let mut chars = base.chars();
                chars.next().map_or_else(String::new, |c| c.to_lowercase().chain(chars).collect())
            }
        }
    }

    /// The unit as written after a number (empty for counts).
    pub fn unit(self) -> &'static str {
        match self {
            Quantity::Completed | Quantity::Failed | Quantity::PeakConcurrency => "",
            Quantity::FailedPct | Quantity::GpuUtil => "%",
            Quantity::RequestThroughput => "req/s",
            Quantity::InputThroughput => "inputs/s",
            Quantity::OutputThroughput | Quantity::TotalTokenThroughput => "tok/s",
            Quantity::OutputThroughputPerGpu | Quantity::TotalTokenThroughputPerGpu => "tok/s/GPU",
            Quantity::Interactivity => "tok/s/user",
            Quantity::CostPerMillionOutput => "$/Mtok",
            Quantity::OutputTokensPerJoule => "tok/J",
            Quantity::Latency(..) | Quantity::ProbeE2el(..) => "ms",
        }
    }

    /// The latency statistic the value is read from: a latency's own, and the median TPOT for
    /// interactivity (so it needs that section, and a run that completed nothing has none).
    pub fn latency(self) -> Option<(Stat, Metric)> {
        match self {
            Quantity::Latency(stat, metric) => Some((stat, metric)),
            Quantity::Interactivity => Some((Stat::Median, Metric::Tpot)),
            _ => None,
        }
    }

    /// Whether a larger value is the better one.
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Quantity::Completed
                | Quantity::RequestThroughput
                | Quantity::InputThroughput
                | Quantity::OutputThroughput
                | Quantity::TotalTokenThroughput
                | Quantity::OutputThroughputPerGpu
                | Quantity::TotalTokenThroughputPerGpu
                | Quantity::OutputTokensPerJoule
                | Quantity::Interactivity
        )
    }

    /// Whether the value is a count, printed without decimals.
    pub fn is_count(self) -> bool {
        matches!(self, Quantity::Completed | Quantity::Failed | Quantity::PeakConcurrency)
    }

    /// The value in a run's summary, when it has it.
    pub fn value(self, s: &Summary) -> Option<f64> {
        match self {
            Quantity::Completed => Some(s.completed as f64),
            Quantity::Failed => s.failed.map(|f| f as f64),
            Quantity::FailedPct => failed_pct(s.completed, s.failed?),
            Quantity::RequestThroughput => Some(s.request_throughput),
            Quantity::InputThroughput => s.pooling.as_ref().map(|p| p.input_sequence_throughput),
            Quantity::OutputThroughput => s.output_throughput,
            Quantity::TotalTokenThroughput => s.total_token_throughput,
            Quantity::OutputThroughputPerGpu => s.per_gpu(s.output_throughput),
            Quantity::TotalTokenThroughputPerGpu => s.per_gpu(s.total_token_throughput),
            Quantity::CostPerMillionOutput => s.cost_per_million_output(),
            Quantity::OutputTokensPerJoule => {
                crate::telemetry::tokens_per_joule(s.total_output_tokens, s.server.as_ref()?.gpu_energy_j())
            }
            Quantity::Interactivity => s.interactivity(),
            Quantity::PeakConcurrency => {
                s.peak_concurrent_requests.or(s.vllm_max_concurrent_requests).map(|p| p as f64)
            }
            // A run that completed no request has no latency (its summary reads 0).
            Quantity::Latency(..) if s.completed == 0 => None,
            Quantity::Latency(stat, metric) => {
                let m = s.metric(metric)?;
                match stat {
                    Stat::Mean => Some(m.mean_ms),
                    Stat::Median => Some(m.median_ms),
                    Stat::Percentile(p) => m.percentile(p),
                }
            }
            Quantity::ProbeE2el(stat) => {
                let p = s.probes.as_ref()?;
                match stat {
                    Stat::Median => Some(p.median_e2el_ms),
                    Stat::Percentile(100.0) => Some(p.max_e2el_ms),
                    Stat::Percentile(99.0) => Some(p.p99_e2el_ms),
                    _ => None,
                }
            }
            Quantity::GpuUtil => s
                .server
                .as_ref()?
                .sources
                .iter()
                .find_map(|source| crate::telemetry::Digest::of(source).gpu_util.map(|l| l.mean)),
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

/// A number as flags and keys write it: whole numbers without a fraction, `inf` for infinity.
pub fn number_text(x: f64) -> String {
    if x.is_infinite() {
        "inf".into()
    } else if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x}")
    }
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
        assert_eq!(Quantity::OutputThroughputPerGpu.name(), "output throughput per GPU");
        assert_eq!(Quantity::from_key("interactivity"), Some(Quantity::Interactivity));
        assert_eq!(Quantity::from_key("p99.9_e2el_ms"), Some(Quantity::Latency(Stat::Percentile(99.9), Metric::E2el)));
        assert_eq!(Quantity::from_key("p99.0_ttft_ms"), Some(Quantity::Latency(Stat::P99, Metric::Ttft)));
        for bad in ["p101_ttft_ms", "p99_client_queue_time_ms", "p99_ttft", "ttft", "pnan_ttft_ms", ""] {
            assert_eq!(Quantity::from_key(bad), None, "{bad}");
        }
    }

    #[test]
    fn values_come_from_the_summary() {
        let s = Summary {
            completed: 20,
            failed: Some(0),
            output_throughput: Some(39.75),
            vllm_max_concurrent_requests: Some(8),
            ..Summary::default()
        };
        assert_eq!(Quantity::OutputThroughput.value(&s), Some(39.75));
        assert_eq!(Quantity::OutputThroughputPerGpu.value(&s), None, "no GPU count");
        assert_eq!(Quantity::OutputThroughputPerGpu.value(&Summary { gpus: Some(4), ..s.clone() }), Some(39.75 / 4.0));
        assert_eq!(Quantity::Interactivity.value(&s), None, "no TPOT");
        assert_eq!(Quantity::Latency(Stat::Median, Metric::E2el).value(&s), None);
        assert_eq!(Quantity::FailedPct.value(&s), Some(0.0));
        assert_eq!(Quantity::PeakConcurrency.value(&s), Some(8.0));
        assert_eq!(Quantity::Completed.format(20.0), "20");
        assert_eq!(Quantity::OutputThroughput.format_with_unit(39.75), "39.75 tok/s");
        assert_eq!(number_text(2.0), "2");
        assert_eq!(number_text(99.9), "99.9");
        // Inputs a second are a pooling run's alone, under vLLM's key.
        assert_eq!(Quantity::InputThroughput.value(&s), None, "a generation run");
        let pooled =
            crate::metrics::PoolingFigures { total_input_sequences: Some(40), input_sequence_throughput: 171.5 };
        let s = Summary { pooling: Some(pooled), ..s };
        assert_eq!(Quantity::InputThroughput.value(&s), Some(171.5));
        assert_eq!(Quantity::InputThroughput.key(), "input_sequence_throughput");
        assert_eq!(Quantity::InputThroughput.format_with_unit(171.5), "171.50 inputs/s");
        assert!(Quantity::InputThroughput.higher_is_better());
    }

    #[test]
    fn the_gpu_s_use_is_the_mean_of_the_first_source_that_reported_it() {
        use crate::telemetry::{Reading, ServerTelemetry, Signal, Source};
        let reading = |values: Vec<(Signal, f64)>| Reading { engine: Some("vllm"), values, bad_lines: 0 };
        let mut server = Source::new("http://s/metrics");
        server.record(0.0, &reading(vec![(Signal::Running, 4.0)]));
        let mut gpu = Source::new("http://dcgm/metrics");
        for (t, util) in [(0.0, 50.0), (1.0, 90.0), (2.0, 100.0)] {
            gpu.record(t, &reading(vec![(Signal::GpuUtil, util)]));
        }
        let mut s = Summary::default();
        assert_eq!(Quantity::GpuUtil.value(&s), None, "no telemetry");
        s.server = Some(ServerTelemetry { interval_s: 1.0, sources: vec![server.clone()] });
        assert_eq!(Quantity::GpuUtil.value(&s), None, "no source gave the GPU's use");
        s.server = Some(ServerTelemetry { interval_s: 1.0, sources: vec![server, gpu] });
        assert!((Quantity::GpuUtil.value(&s).unwrap() - 80.0).abs() < 1e-9);
        assert_eq!(Quantity::GpuUtil.format_with_unit(80.0), "80.00 %");
        // Not a threshold's: the threshold language does not read it.
        assert!(!Quantity::all().contains(&Quantity::GpuUtil));
        assert_eq!(Quantity::from_key(&Quantity::GpuUtil.key()), None);
    }

    #[test]
    fn the_probes_latencies_are_quantities_under_vllm_s_keys() {
        let probes = crate::metrics::ProbeStats {
            completed: 9,
            failed: 1,
            median_e2el_ms: 31.0,
            p99_e2el_ms: 80.5,
            max_e2el_ms: 81.0,
        };
        let s = Summary { completed: 10, probes: Some(probes), ..Summary::default() };
        let got: Vec<(String, String, Option<f64>)> =
            PROBE_STATS.map(Quantity::ProbeE2el).into_iter().map(|q| (q.key(), q.label(), q.value(&s))).collect();
        assert_eq!(
            got,
            [
                ("probe_median_e2el_ms".into(), "Median probe E2EL (ms)".into(), Some(31.0)),
                ("probe_p99_e2el_ms".into(), "P99 probe E2EL (ms)".into(), Some(80.5)),
                ("probe_max_e2el_ms".into(), "Max probe E2EL (ms)".into(), Some(81.0)),
            ]
        );
        for q in PROBE_STATS.map(Quantity::ProbeE2el) {
            assert_eq!(Quantity::from_key(&q.key()), Some(q));
            assert!(!q.higher_is_better() && Quantity::all().contains(&q) && q.unit() == "ms");
            assert_eq!(q.value(&Summary::default()), None, "a run without probes has none");
        }
        assert_eq!(Quantity::from_key("probe_p50_e2el_ms"), None, "vLLM gives the median, P99 and max only");
        assert_eq!(Quantity::ProbeE2el(Stat::Median).name(), "median probe E2EL");
    }

    #[test]
    fn output_tokens_per_joule_divide_the_run_s_tokens_by_its_gpus_energy() {
        use crate::telemetry::{Reading, ServerTelemetry, Signal, Source};
        let mut gpu = Source::new("http://dcgm/metrics");
        for (t, watts) in [(0.0, 500.0), (10.0, 700.0)] {
            gpu.record(t, &Reading { engine: Some("dcgm"), values: vec![(Signal::GpuPower, watts)], bad_lines: 0 });
        }
        let mut s = Summary { completed: 10, total_output_tokens: Some(12_000), ..Summary::default() };
        assert_eq!(Quantity::OutputTokensPerJoule.value(&s), None, "no telemetry");
        s.server = Some(ServerTelemetry { interval_s: 1.0, sources: vec![gpu] });
        // 600 W on average for 10 s: 6 kJ for 12,000 tokens.
        assert_eq!(Quantity::OutputTokensPerJoule.value(&s), Some(2.0));
        assert_eq!(Quantity::OutputTokensPerJoule.value(&Summary { total_output_tokens: None, ..s }), None);
        // A --fail-on key, more is better; not an --slo key.
        let q = Quantity::from_key("output_tokens_per_joule").unwrap();
        assert!(q.higher_is_better() && Quantity::all().contains(&q));
        assert_eq!(q.format_with_unit(2.0), "2.00 tok/J");
    }
}
