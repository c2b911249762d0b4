//! Server telemetry: what the server said about itself during a run, from its Prometheus
//! `/metrics` (and any other exposition given, such as a DCGM exporter's), scraped over time.
//!
//! Each engine names the same facts differently; [`KNOWN`] maps the names of vLLM, SGLang, TGI,
//! llama.cpp and DCGM onto one set of [`Signal`]s, so a run against any of them stores the same
//! series. [`read`] turns one scrape into signal values (label sets summed, or averaged where
//! a sum means nothing, such as a per-GPU utilisation); the scraper (in the client crate) keeps
//! them as [`ServerTelemetry`]; [`Digest`] reduces a source's series to the figures a report
//! prints: gauge peaks and means, counter increases over the run, and the ratios derived from
//! them (prefix-cache hits, spec-decode acceptance, mean queue time, the server's own TTFT),
//! and the GPUs' energy over the run (their energy counter, or their power integrated).

pub mod exposition;
mod spec_decode;
pub use spec_decode::{SpecDecodeCounts, SpecDecodeWindow};

use serde::{Deserialize, Serialize};

/// One fact a server reports, under whatever name its engine gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// Requests in the running batch.
    Running,
    /// Requests queued, not yet scheduled.
    Waiting,
    /// Fraction of the KV cache in use (0 to 1).
    KvCacheUsage,
    /// Requests preempted (counter).
    Preemptions,
    /// Prefix-cache hits and queries, in tokens (counters).
    PrefixHits,
    PrefixQueries,
    /// Prefix-cache hit rate as a gauge (engines without the counters), 0 to 1.
    PrefixHitRate,
    /// Speculative tokens accepted and proposed (counters).
    SpecAccepted,
    SpecDrafted,
    /// Prompt and generated tokens processed (counters).
    PromptTokens,
    GenerationTokens,
    /// Sum and count of the per-request queue time, seconds (a histogram's counters).
    QueueTimeSum,
    QueueTimeCount,
    /// Sum and count of the server's own time to first token, seconds.
    TtftSum,
    TtftCount,
    /// The server's own prompt (prefill) processing time summed over requests, seconds
    /// (counter): no request's time to first token can be shorter than its share.
    PrefillTimeSum,
    /// How many requests that sum is over, where the engine counts them (vLLM's histogram).
    PrefillTimeCount,
    /// GPU utilisation, percent (mean over GPUs).
    GpuUtil,
    /// GPU power draw, watts (sum over GPUs).
    GpuPower,
    /// Energy the GPUs consumed since their driver loaded, millijoules (counter, sum over GPUs).
    GpuEnergy,
    /// GPU memory in use, MiB (sum over GPUs).
    GpuMemoryUsed,
}

impl Signal {
    /// Counters only grow (a reset is a server restart); gauges are levels.
    pub fn is_counter(self) -> bool {
        use Signal::*;
        matches!(
            self,
            Preemptions
                | PrefixHits
                | PrefixQueries
                | SpecAccepted
                | SpecDrafted
                | PromptTokens
                | GenerationTokens
                | QueueTimeSum
                | QueueTimeCount
                | TtftSum
                | TtftCount
                | PrefillTimeSum
                | PrefillTimeCount
                | GpuEnergy
        )
    }
}

/// How the label sets of one metric combine into one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    Sum,
    Mean,
}

/// A metric name an engine exposes, and the signal it carries.
#[derive(Clone, Copy, Debug)]
pub struct Known {
    pub metric: &'static str,
    pub signal: Signal,
    pub engine: &'static str,
    pub combine: Combine,
}

const fn k(metric: &'static str, signal: Signal, engine: &'static str, combine: Combine) -> Known {
    Known { metric, signal, engine, combine }
}

/// The metric names read, by engine. Names not listed are ignored.
pub const KNOWN: &[Known] = &[
    k("vllm:num_requests_running", Signal::Running, "vllm", Combine::Sum),
    k("vllm:num_requests_waiting", Signal::Waiting, "vllm", Combine::Sum),
    k("vllm:kv_cache_usage_perc", Signal::KvCacheUsage, "vllm", Combine::Mean),
    k("vllm:gpu_cache_usage_perc", Signal::KvCacheUsage, "vllm", Combine::Mean),
    k("vllm:num_preemptions_total", Signal::Preemptions, "vllm", Combine::Sum),
    k("vllm:prefix_cache_hits_total", Signal::PrefixHits, "vllm", Combine::Sum),
    k("vllm:prefix_cache_queries_total", Signal::PrefixQueries, "vllm", Combine::Sum),
    k("vllm:gpu_prefix_cache_hit_rate", Signal::PrefixHitRate, "vllm", Combine::Mean),
    k("vllm:spec_decode_num_accepted_tokens_total", Signal::SpecAccepted, "vllm", Combine::Sum),
    k("vllm:spec_decode_num_draft_tokens_total", Signal::SpecDrafted, "vllm", Combine::Sum),
    k("vllm:prompt_tokens_total", Signal::PromptTokens, "vllm", Combine::Sum),
    k("vllm:generation_tokens_total", Signal::GenerationTokens, "vllm", Combine::Sum),
    k("vllm:request_queue_time_seconds_sum", Signal::QueueTimeSum, "vllm", Combine::Sum),
    k("vllm:request_queue_time_seconds_count", Signal::QueueTimeCount, "vllm", Combine::Sum),
    k("vllm:time_to_first_token_seconds_sum", Signal::TtftSum, "vllm", Combine::Sum),
    k("vllm:time_to_first_token_seconds_count", Signal::TtftCount, "vllm", Combine::Sum),
    k("vllm:request_prefill_time_seconds_sum", Signal::PrefillTimeSum, "vllm", Combine::Sum),
    k("vllm:request_prefill_time_seconds_count", Signal::PrefillTimeCount, "vllm", Combine::Sum),
    k("sglang:num_running_reqs", Signal::Running, "sglang", Combine::Sum),
    k("sglang:num_queue_reqs", Signal::Waiting, "sglang", Combine::Sum),
    k("sglang:token_usage", Signal::KvCacheUsage, "sglang", Combine::Mean),
    k("sglang:cache_hit_rate", Signal::PrefixHitRate, "sglang", Combine::Mean),
    k("sglang:prompt_tokens_total", Signal::PromptTokens, "sglang", Combine::Sum),
    k("sglang:generation_tokens_total", Signal::GenerationTokens, "sglang", Combine::Sum),
    k("sglang:time_to_first_token_seconds_sum", Signal::TtftSum, "sglang", Combine::Sum),
    k("sglang:time_to_first_token_seconds_count", Signal::TtftCount, "sglang", Combine::Sum),
    k("tgi_batch_current_size", Signal::Running, "tgi", Combine::Sum),
    k("tgi_queue_size", Signal::Waiting, "tgi", Combine::Sum),
    k("tgi_request_input_length_sum", Signal::PromptTokens, "tgi", Combine::Sum),
    k("tgi_request_generated_tokens_sum", Signal::GenerationTokens, "tgi", Combine::Sum),
    k("tgi_request_queue_duration_sum", Signal::QueueTimeSum, "tgi", Combine::Sum),
    k("tgi_request_queue_duration_count", Signal::QueueTimeCount, "tgi", Combine::Sum),
    k("llamacpp:requests_processing", Signal::Running, "llama.cpp", Combine::Sum),
    k("llamacpp:requests_deferred", Signal::Waiting, "llama.cpp", Combine::Sum),
    k("llamacpp:kv_cache_usage_ratio", Signal::KvCacheUsage, "llama.cpp", Combine::Mean),
    k("llamacpp:prompt_tokens_total", Signal::PromptTokens, "llama.cpp", Combine::Sum),
    k("llamacpp:tokens_predicted_total", Signal::GenerationTokens, "llama.cpp", Combine::Sum),
    k("llamacpp:prompt_seconds_total", Signal::PrefillTimeSum, "llama.cpp", Combine::Sum),
    k("DCGM_FI_DEV_GPU_UTIL", Signal::GpuUtil, "dcgm", Combine::Mean),
    // servebench's simulated server: its engine's busy share stands for the GPU's use.
    k("servebench:engine_busy_percent", Signal::GpuUtil, "servebench", Combine::Mean),
    k("DCGM_FI_DEV_POWER_USAGE", Signal::GpuPower, "dcgm", Combine::Sum),
    k("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", Signal::GpuEnergy, "dcgm", Combine::Sum),
    k("DCGM_FI_DEV_FB_USED", Signal::GpuMemoryUsed, "dcgm", Combine::Sum),
];

/// One scrape, read: the engine whose names it used and one value per signal found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    pub engine: Option<&'static str>,
    pub values: Vec<(Signal, f64)>,
    /// Lines that were not samples (skipped).
    pub bad_lines: usize,
}

/// Reads one exposition: every known metric's label sets combined, one value per signal (where
/// an engine exposes two names for one signal, as vLLM's old and new KV-cache gauges, the
/// first listed wins). NaN samples are left out.
pub fn read(text: &str) -> Reading {
    // (sum, count) per entry of KNOWN.
    let mut acc = vec![(0.0f64, 0u32); KNOWN.len()];
    let mut bad_lines = 0;
    for s in exposition::samples(text) {
        let Ok(s) = s else {
            bad_lines += 1;
            continue;
        };
        if s.value.is_nan() {
            continue;
        }
        if let Some(i) = KNOWN.iter().position(|k| k.metric == s.name) {
            acc[i].0 += s.value;
            acc[i].1 += 1;
        }
    }
    let mut reading = Reading { bad_lines, ..Reading::default() };
    let mut engines: Vec<(&'static str, usize)> = Vec::new();
    for (known, &(sum, n)) in KNOWN.iter().zip(&acc) {
        if n == 0 || reading.values.iter().any(|(s, _)| *s == known.signal) {
            continue;
        }
        let value = match known.combine {
            Combine::Sum => sum,
            Combine::Mean => sum / f64::from(n),
        };
        reading.values.push((known.signal, value));
        match engines.iter_mut().find(|(e, _)| *e == known.engine) {
            Some(e) => e.1 += 1,
            None => engines.push((known.engine, 1)),
        }
    }
    reading.engine = engines.iter().max_by_key(|(_, n)| *n).map(|(e, _)| *e);
    reading
}

/// The telemetry of a run: every source scraped, each with its series.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerTelemetry {
    /// Seconds between scrapes.
    pub interval_s: f64,
    pub sources: Vec<Source>,
}

/// One scraped endpoint.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub url: String,
    /// The engine whose metric names it used (`vllm`, `sglang`, `tgi`, `llama.cpp`, `dcgm`).
    pub engine: Option<String>,
    /// Scrapes answered and failed.
    pub scrapes: u32,
    pub failed: u32,
    /// Why the first failed scrape failed.
    pub first_error: Option<String>,
    pub series: Vec<Series>,
}

/// One signal over time: `[t, value]`, `t` in seconds since the timed run's start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub signal: Signal,
    pub points: Vec<[f64; 2]>,
}

impl Source {
    /// A source not yet scraped.
    pub fn new(url: impl Into<String>) -> Self {
        Source { url: url.into(), ..Source::default() }
    }

    /// Adds one answered scrape taken `t` seconds into the run.
    pub fn record(&mut self, t: f64, reading: &Reading) {
        self.scrapes += 1;
        if self.engine.is_none() {
            self.engine = reading.engine.map(str::to_string);
        }
        for &(signal, value) in &reading.values {
            match self.series.iter_mut().find(|s| s.signal == signal) {
                Some(s) => s.points.push([t, value]),
                None => self.series.push(Series { signal, points: vec![[t, value]] }),
            }
        }
    }

    /// Notes one failed scrape.
    pub fn fail(&mut self, reason: impl Into<String>) {
        self.failed += 1;
        if self.first_error.is_none() {
            self.first_error = Some(reason.into());
        }
    }

    /// The series of `signal`, if it was seen.
    pub fn series(&self, signal: Signal) -> Option<&Series> {
        self.series.iter().find(|s| s.signal == signal)
    }
}

/// A gauge reduced: its peak and mean over the scrapes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Level {
    pub max: f64,
    pub mean: f64,
}

/// A source reduced to what a report prints.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Digest {
    pub running: Option<Level>,
    pub waiting: Option<Level>,
    pub kv_cache_usage: Option<Level>,
    pub gpu_util: Option<Level>,
    pub gpu_power: Option<Level>,
    pub gpu_memory_used: Option<Level>,
    /// Joules the GPUs consumed between the first and the last scrape: the increase of their
    /// energy counter, else the power gauge integrated over the scrapes' times (trapezoids).
    pub gpu_energy_j: Option<f64>,
    /// Counter increases over the run.
    pub preemptions: Option<f64>,
    pub prompt_tokens: Option<f64>,
    pub generation_tokens: Option<f64>,
    /// Prefix-cache hits over queries in the run (or the gauge's mean), 0 to 1.
    pub prefix_hit_rate: Option<f64>,
    /// Speculative tokens accepted over proposed in the run, 0 to 1.
    pub spec_acceptance: Option<f64>,
    /// Mean queue time, mean prefill time and mean server-side TTFT of the requests finished in
    /// the run, ms: what of the server's TTFT is neither queue nor prefill is its frontend's.
    pub mean_queue_ms: Option<f64>,
    pub mean_prefill_ms: Option<f64>,
    pub mean_server_ttft_ms: Option<f64>,
}

impl Digest {
    pub fn of(source: &Source) -> Digest {
        let level = |s: Signal| source.series(s).and_then(level);
        let rise = |s: Signal| source.series(s).map(increase);
        let ratio = |num: Signal, den: Signal| match (rise(num), rise(den)) {
            (Some(n), Some(d)) if d > 0.0 => Some(n / d),
            _ => None,
        };
        Digest {
            running: level(Signal::Running),
            waiting: level(Signal::Waiting),
            kv_cache_usage: level(Signal::KvCacheUsage),
            gpu_util: level(Signal::GpuUtil),
            gpu_power: level(Signal::GpuPower),
            gpu_memory_used: level(Signal::GpuMemoryUsed),
            gpu_energy_j: rise(Signal::GpuEnergy)
                .map(|mj| mj / 1000.0)
                .or_else(|| source.series(Signal::GpuPower).and_then(integral)),
            preemptions: rise(Signal::Preemptions),
            prompt_tokens: rise(Signal::PromptTokens),
            generation_tokens: rise(Signal::GenerationTokens),
            prefix_hit_rate: ratio(Signal::PrefixHits, Signal::PrefixQueries)
                .or_else(|| level(Signal::PrefixHitRate).map(|l| l.mean)),
            spec_acceptance: ratio(Signal::SpecAccepted, Signal::SpecDrafted),
            mean_queue_ms: ratio(Signal::QueueTimeSum, Signal::QueueTimeCount).map(|s| s * 1000.0),
            mean_prefill_ms: ratio(Signal::PrefillTimeSum, Signal::PrefillTimeCount).map(|s| s * 1000.0),
            mean_server_ttft_ms: ratio(Signal::TtftSum, Signal::TtftCount).map(|s| s * 1000.0),
        }
    }
}

fn level(series: &Series) -> Option<Level> {
    let values: Vec<f64> = series.points.iter().map(|p| p[1]).filter(|v| v.is_finite()).collect();
    if values.is_empty() {
        return None;
    }
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some(Level { max, mean: crate::metrics::stats::mean(&values) })
}

/// The area under a gauge over its points' times (trapezoids): a power in watts over seconds
/// gives joules. `None` without two points a positive time apart.
fn integral(series: &Series) -> Option<f64> {
    let points: Vec<[f64; 2]> =
        series.points.iter().copied().filter(|p| p[0].is_finite() && p[1].is_finite()).collect();
    let span = points.last()?[0] - points.first()?[0];
    (span > 0.0).then(|| points.windows(2).map(|w| (w[1][0] - w[0][0]) * (w[0][1] + w[1][1]) / 2.0).sum())
}

/// How much a counter grew over the series; a drop (the server restarted and its counters
/// began again) counts what was counted after it.
pub fn increase(series: &Series) -> f64 {
    series
        .points
        .windows(2)
        .map(|w| {
            let (a, b) = (w[0][1], w[1][1]);
            if b >= a { b - a } else { b }
        })
        .filter(|d| d.is_finite())
        .sum()
}

/// Output tokens per joule: `tokens` served on `joules` the GPUs drew; `None` without either,
/// or without energy.
pub fn tokens_per_joule(tokens: Option<u64>, joules: Option<f64>) -> Option<f64> {
    Some(tokens? as f64 / joules.filter(|&j| j > 0.0)?)
}

impl ServerTelemetry {
    /// The joules the GPUs consumed over the run: the first source that tells them (a GPU
    /// exporter's energy counter or power gauge).
    pub fn gpu_energy_j(&self) -> Option<f64> {
        self.sources.iter().find_map(|s| Digest::of(s).gpu_energy_j)
    }

    /// The engine's share of the mean first token over the run, ms: the mean queue plus the
    /// mean prefill of the first source that reports both (vLLM's phase metrics); what else
    /// of the first token there is was spent in front of the engine.
    pub fn engine_first_token_ms(&self) -> Option<f64> {
        self.sources.iter().map(Digest::of).find_map(|d| Some(d.mean_queue_ms? + d.mean_prefill_ms?))
    }
}

/// The lines a report prints for the telemetry: one per source. `client_output_tokens` is
/// what the client counted, printed beside the server's own count.
pub fn render(t: &ServerTelemetry, client_output_tokens: Option<u64>) -> String {
    let mut out = String::new();
    for source in &t.sources {
        out.push_str(&render_source(source, client_output_tokens));
        out.push('\n');
    }
    out
}

/// Joules in the unit that keeps them short: `850 J`, `12.3 kJ`, `4.56 MJ`.
fn energy_text(j: f64) -> String {
    if j >= 1e6 {
        format!("{:.2} MJ", j / 1e6)
    } else if j >= 1e3 {
        format!("{:.1} kJ", j / 1e3)
    } else {
        format!("{j:.0} J")
    }
}

fn render_source(source: &Source, client_output_tokens: Option<u64>) -> String {
    let engine = source.engine.as_deref().unwrap_or("unknown names");
    let failed = match (&source.first_error, source.failed) {
        (Some(e), n) if n > 0 => format!(", {n} failed: {e}"),
        _ => String::new(),
    };
    let head = format!("Server telemetry ({engine}, {}, {} scrapes{failed})", source.url, source.scrapes);
    if source.scrapes == 0 {
        return format!("{head}: nothing recorded.");
    }
    let d = Digest::of(source);
    let mut parts = Vec::new();
    let count = |v: f64| format!("{v:.0}");
    let level = |name: &str, l: Option<Level>, f: &dyn Fn(f64) -> String| {
        l.map(|l| format!("{name} max {} mean {}", f(l.max), f(l.mean)))
    };
    parts.extend(level("running", d.running, &count));
    parts.extend(level("waiting", d.waiting, &count));
    parts.extend(level("KV cache", d.kv_cache_usage, &|v| format!("{:.1} %", v * 100.0)));
    parts.extend(d.preemptions.map(|v| format!("preemptions {v:.0}")));
    parts.extend(d.prefix_hit_rate.map(|v| format!("prefix-cache hits {:.1} %", v * 100.0)));
    parts.extend(d.spec_acceptance.map(|v| format!("spec-decode acceptance {:.1} %", v * 100.0)));
    parts.extend(d.mean_queue_ms.map(|v| format!("mean queue {v:.1} ms")));
    parts.extend(d.mean_prefill_ms.map(|v| format!("mean prefill {v:.1} ms")));
    parts.extend(d.mean_server_ttft_ms.map(|v| format!("server mean TTFT {v:.1} ms")));
    parts.extend(d.generation_tokens.map(|v| match client_output_tokens {
        Some(c) => format!("generated tokens {v:.0} (client counted {c})"),
        None => format!("generated tokens {v:.0}"),
    }));
    parts.extend(level("GPU util", d.gpu_util, &|v| format!("{v:.0} %")));
    parts.extend(level("GPU power", d.gpu_power, &|v| format!("{v:.0} W")));
    parts.extend(d.gpu_energy_j.map(|j| match tokens_per_joule(client_output_tokens, Some(j)) {
        Some(rate) => format!("GPU energy {} ({rate:.2} output tok/J)", energy_text(j)),
        None => format!("GPU energy {}", energy_text(j)),
    }));
    parts.extend(level("GPU memory", d.gpu_memory_used, &|v| format!("{:.1} GiB", v / 1024.0)));
    if parts.is_empty() {
        return format!("{head}: no metric servebench knows.");
    }
    format!("{head}: {}.", parts.join(", "))
}

#[cfg(test)]
mod tests;
