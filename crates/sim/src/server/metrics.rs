//! `/metrics`: the simulated engine's state in vLLM's Prometheus names, labels and histogram
//! buckets, so dashboards and scrapers written for vLLM read it unchanged.
//!
//! The pacer keeps the histograms (observed in virtual time, as the engine saw each token) and
//! hands out a [`Snapshot`] on request; rendering happens in the HTTP handler.

use std::fmt::Write as _;

use servebench_core::pyjson::py_float_repr;
use servebench_core::telemetry::SpecDecodeCounts;

use crate::engine::{EngineCounters, FinishReason, RequestTimes};

/// vLLM's `vllm:time_to_first_token_seconds` buckets.
const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
];
/// vLLM's `vllm:inter_token_latency_seconds` buckets.
const ITL_BUCKETS: &[f64] =
    &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
/// vLLM's request latency buckets (`vllm:e2e_request_latency_seconds`, and its queue, prefill,
/// decode and inference times).
const E2E_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
];

/// A Prometheus histogram: counts per bucket (not cumulative), their sum and count.
#[derive(Clone, Debug)]
pub(crate) struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self { bounds, counts: vec![0; bounds.len()], sum: 0.0, count: 0 }
    }

    pub fn observe(&mut self, x: f64) {
        if let Some(i) = self.bounds.iter().position(|&b| x <= b) {
            self.counts[i] += 1;
        }
        self.sum += x;
        self.count += 1;
    }
}

/// What the pacer observes besides the engine's own counters.
#[derive(Clone, Debug)]
pub(crate) struct Observed {
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
    /// vLLM's phase times of finished requests: waiting, prefill, decode and running.
    pub queue: Histogram,
    pub prefill: Histogram,
    pub decode: Histogram,
    pub inference: Histogram,
    /// Finished requests by reason: stop, length, abort.
    pub finished: [u64; 3],
    /// Times the engine clock was moved up to real time because the pacer fell behind.
    pub resyncs: u64,
}

impl Default for Observed {
    fn default() -> Self {
        Self {
            ttft: Histogram::new(TTFT_BUCKETS),
            itl: Histogram::new(ITL_BUCKETS),
            e2e: Histogram::new(E2E_BUCKETS),
            queue: Histogram::new(E2E_BUCKETS),
            prefill: Histogram::new(E2E_BUCKETS),
            decode: Histogram::new(E2E_BUCKETS),
            inference: Histogram::new(E2E_BUCKETS),
            finished: [0; 3],
            resyncs: 0,
        }
    }
}

impl Observed {
    /// A finished request's phase times, as the engine finished it.
    pub fn phases(&mut self, t: &RequestTimes) {
        let secs = |ns: u64| ns as f64 * 1e-9;
        self.queue.observe(secs(t.queue_ns()));
        self.prefill.observe(secs(t.prefill_ns()));
        self.decode.observe(secs(t.decode_ns()));
        self.inference.observe(secs(t.inference_ns()));
    }

    pub fn finished(&mut self, reason: Option<FinishReason>) {
        let i = match reason {
            Some(FinishReason::Stop) => 0,
            Some(FinishReason::Length) => 1,
            None => 2,
        };
        self.finished[i] += 1;
    }
}

/// The engine's state at one moment, for `/metrics`.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    pub running: usize,
    pub waiting: usize,
    pub kv_usage: f64,
    /// The share of the last second the engine was running a step, percent.
    pub busy_percent: f64,
    pub counters: EngineCounters,
    pub observed: Observed,
    /// The speculative decoder's counters; `None` without speculative decoding.
    pub spec_decode: Option<SpecDecodeCounts>,
}

/// Renders `snap` in Prometheus' text format (0.0.4) as vLLM's `prometheus_client` writes it:
/// labels sorted by name, values as Python floats, counters with `_total`.
pub(crate) fn render(snap: &Snapshot, model: &str) -> String {
    let model = escape_label(model);
    let labels = format!("engine=\"0\",model_name=\"{model}\"");
    let mut out = String::with_capacity(8192);
    let c = &snap.counters;
    let o = &snap.observed;
    let mut scalar = |name: &str, kind: &str, help: &str, value: f64| {
        let _ =
            writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{{labels}}} {}", py_float_repr(value));
    };
    scalar("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", snap.running as f64);
    scalar("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", snap.waiting as f64);
    scalar("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", snap.kv_usage);
    // Not a vLLM metric: the simulated GPU's use, which a real deployment's DCGM exporter gives.
    scalar(
        "servebench:engine_busy_percent",
        "gauge",
        "Share of the last second the simulated engine was running a step, percent.",
        snap.busy_percent,
    );
    scalar(
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        c.prefix_queries as f64,
    );
    scalar(
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        c.prefix_hits as f64,
    );
    scalar(
        "vllm:num_preemptions_total",
        "counter",
        "Cumulative number of preemption from the engine.",
        c.preemptions as f64,
    );
    scalar("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", c.prompt_tokens as f64);
    scalar(
        "vllm:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
        c.generation_tokens as f64,
    );
    if let Some(spec) = &snap.spec_decode {
        scalar(
            "vllm:spec_decode_num_drafts_total",
            "counter",
            "Number of spec decoding drafts.",
            spec.num_drafts as f64,
        );
        scalar(
            "vllm:spec_decode_num_draft_tokens_total",
            "counter",
            "Number of draft tokens.",
            spec.draft_tokens as f64,
        );
        scalar(
            "vllm:spec_decode_num_accepted_tokens_total",
            "counter",
            "Number of accepted tokens.",
            spec.accepted_tokens as f64,
        );
        let name = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
        let _ = writeln!(out, "# HELP {name} Accepted tokens per draft position.\n# TYPE {name} counter");
        for (pos, n) in spec.accepted_per_position.iter().enumerate() {
            let _ = writeln!(out, "{name}{{{labels},position=\"{pos}\"}} {}", py_float_repr(*n as f64));
        }
    }
    let name = "vllm:request_success_total";
    let _ = writeln!(out, "# HELP {name} Count of successfully processed requests.\n# TYPE {name} counter");
    for (reason, n) in ["stop", "length", "abort"].iter().zip(o.finished) {
        let _ = writeln!(
            out,
            "{name}{{engine=\"0\",finished_reason=\"{reason}\",model_name=\"{model}\"}} {}",
            py_float_repr(n as f64)
        );
    }
    histogram(
        &mut out,
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        &o.ttft,
        &model,
    );
    histogram(
        &mut out,
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        &o.itl,
        &model,
    );
    histogram(
        &mut out,
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        &o.e2e,
        &model,
    );
    for (name, phase, h) in [
        ("vllm:request_queue_time_seconds", "WAITING", &o.queue),
        ("vllm:request_inference_time_seconds", "RUNNING", &o.inference),
        ("vllm:request_prefill_time_seconds", "PREFILL", &o.prefill),
        ("vllm:request_decode_time_seconds", "DECODE", &o.decode),
    ] {
        histogram(&mut out, name, &format!("Histogram of time spent in {phase} phase for request."), h, &model);
    }
    let name = "servebench:pacer_resyncs_total";
    let _ = writeln!(
        out,
        "# HELP {name} Times the simulated clock was moved up to real time because the server fell behind.\n\
         # TYPE {name} counter\n{name}{{{labels}}} {}",
        py_float_repr(o.resyncs as f64)
    );
    out
}

fn histogram(out: &mut String, name: &str, help: &str, h: &Histogram, model: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    let mut cumulative = 0;
    for (bound, n) in h.bounds.iter().zip(&h.counts) {
        cumulative += n;
        let le = py_float_repr(*bound);
        let _ = writeln!(
            out,
            "{name}_bucket{{engine=\"0\",le=\"{le}\",model_name=\"{model}\"}} {}",
            py_float_repr(cumulative as f64)
        );
    }
    let count = py_float_repr(h.count as f64);
    let _ = writeln!(out, "{name}_bucket{{engine=\"0\",le=\"+Inf\",model_name=\"{model}\"}} {count}");
    let _ = writeln!(out, "{name}_count{{engine=\"0\",model_name=\"{model}\"}} {count}");
    let _ = writeln!(out, "{name}_sum{{engine=\"0\",model_name=\"{model}\"}} {}", py_float_repr(h.sum));
}

/// A label value with `\`, `"` and newlines escaped.
fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_with_vllms_bounds() {
        let mut o = Observed::default();
        for x in [0.003, 0.02, 0.02, 3000.0] {
            o.ttft.observe(x);
        }
        o.finished(Some(FinishReason::Length));
        let snap = Snapshot {
            running: 2,
            waiting: 1,
            kv_usage: 0.25,
            busy_percent: 40.0,
            counters: EngineCounters::default(),
            observed: o,
            spec_decode: None,
        };
        let text = render(&snap, "m\"x");
        assert!(text.contains("vllm:num_requests_running{engine=\"0\",model_name=\"m\\\"x\"} 2.0\n"), "{text}");
        assert!(text.contains("vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\\\"x\"} 0.25\n"));
        assert!(text.contains("servebench:engine_busy_percent{engine=\"0\",model_name=\"m\\\"x\"} 40.0\n"));
        let ttft = "vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=";
        assert!(text.contains(&format!("{ttft}\"0.001\",model_name=\"m\\\"x\"}} 0.0\n")));
        assert!(text.contains(&format!("{ttft}\"0.005\",model_name=\"m\\\"x\"}} 1.0\n")));
        assert!(text.contains(&format!("{ttft}\"0.02\",model_name=\"m\\\"x\"}} 3.0\n")));
        assert!(text.contains(&format!("{ttft}\"2560.0\",model_name=\"m\\\"x\"}} 3.0\n")));
        assert!(text.contains(&format!("{ttft}\"+Inf\",model_name=\"m\\\"x\"}} 4.0\n")));
        assert!(text.contains("finished_reason=\"length\",model_name=\"m\\\"x\"} 1.0\n"));
        assert!(text.contains("# TYPE vllm:e2e_request_latency_seconds histogram\n"));
        assert!(!text.contains("spec_decode"), "no counters without speculative decoding");
    }

    #[test]
    fn speculative_decoding_counters_read_back_as_vllm_bench_reads_them() {
        let spec = SpecDecodeCounts {
            num_drafts: 100,
            draft_tokens: 200,
            accepted_tokens: 130,
            accepted_per_position: vec![80, 50],
        };
        let snap = Snapshot {
            running: 0,
            waiting: 0,
            kv_usage: 0.0,
            busy_percent: 0.0,
            counters: EngineCounters::default(),
            observed: Observed::default(),
            spec_decode: Some(spec.clone()),
        };
        let text = render(&snap, "m");
        assert_eq!(SpecDecodeCounts::read(&text), Some(spec));
    }
}
