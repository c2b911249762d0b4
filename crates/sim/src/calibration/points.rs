//! Measured points: what one benchmark run sent and the three numbers the fit matches (mean
//! TTFT, mean TPOT, output throughput), read from vLLM console reports or result JSON files.
//!
//! A console report keeps totals only, so its workload is rebuilt from them: `successful +
//! failed` requests, the total input and output tokens spread evenly over them, the
//! `Maximum request concurrency` line if present, and the `Request rate configured` line
//! (else everything sent at once). A result JSON gives per-request lengths when it has them
//! (`input_lens`/`output_lens`, or servebench's per-request records), else its totals.
//!
//! Each point also carries labels that say what it measured: a report block gets those of
//! its headings (`Results Qwen/Qwen3-8B` gives `model=Qwen/Qwen3-8B`, see
//! [`block_labels`]); a result JSON gives `model` (its `model_id`), `label` and its metadata.
//! Files of them, and the results in a file that cannot be read, are [`super::read`]'s.

use serde_json::Value;
use servebench_core::config::{Backend, Metric};
use servebench_core::metrics::Summary;
use servebench_core::vllm::json::scalar::whole_number;
use servebench_core::vllm::{
    BlockError, ParsedBlock, ReportOrigin, block_labels, labels, metadata_from_vllm_json, option_label, parse_reports,
    summary_from_vllm_json,
};

use super::CalibrationError;
use super::read::{FileRead, Skipped};

/// Token lengths of a point's requests.
#[derive(Clone, Debug, PartialEq)]
pub enum Lengths {
    /// `total` spread as evenly as possible (the first `total % n` requests get one more).
    Even { total: u64 },
    /// One length per request, in order.
    Each(Vec<u32>),
    /// A distribution: a piecewise-linear inverse CDF through `(p, length)` points, scaled so
    /// the lengths add up to `total`, assigned to requests in a fixed shuffled order.
    Shape { total: u64, quantiles: Vec<(f64, f64)> },
}

impl Lengths {
    /// The `n` lengths, each at least 1.
    pub fn expand(&self, n: usize) -> Vec<u32> {
        if n == 0 {
            return Vec::new();
        }
        match self {
            Lengths::Even { total } => {
                let base = total / n as u64;
                let extra = (total % n as u64) as usize;
                (0..n).map(|i| u32::try_from(base + u64::from(i < extra)).unwrap_or(u32::MAX).max(1)).collect()
            }
            Lengths::Each(v) => (0..n).map(|i| v.get(i % v.len().max(1)).copied().unwrap_or(1).max(1)).collect(),
            Lengths::Shape { total, quantiles } => {
                let raw: Vec<f64> = (0..n).map(|i| inverse_cdf(quantiles, (i as f64 + 0.5) / n as f64)).collect();
                let sum: f64 = raw.iter().sum();
                let scale = if sum > 0.0 { *total as f64 / sum } else { 1.0 };
                let mut out: Vec<u32> = raw.iter().map(|x| (x * scale).round().max(1.0) as u32).collect();
                // A fixed shuffle (multiplicative stride) so long and short requests interleave.
                let stride = (0..).map(|k| n / 2 + 1 + k).find(|s| gcd(*s, n) == 1).unwrap_or(1);
                let sorted = out.clone();
                for (i, slot) in out.iter_mut().enumerate() {
                    *slot = sorted[(i * stride) % n];
                }
                out
            }
        }
    }

    /// The mean length over `n` requests.
    pub fn mean(&self, n: usize) -> f64 {
        let v = self.expand(n);
        v.iter().map(|&x| f64::from(x)).sum::<f64>() / n.max(1) as f64
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn inverse_cdf(q: &[(f64, f64)], p: f64) -> f64 {
    match q.iter().position(|&(x, _)| x >= p) {
        None => q.last().map_or(1.0, |l| l.1),
        Some(0) => q[0].1,
        Some(k) => {
            let (p0, l0) = q[k - 1];
            let (p1, l1) = q[k];
            if p1 <= p0 { l1 } else { l0 + (l1 - l0) * (p - p0) / (p1 - p0) }
        }
    }
}

/// What one measured run sent.
#[derive(Clone, Debug, PartialEq)]
pub struct PointWorkload {
    pub num_prompts: usize,
    pub input: Lengths,
    pub output: Lengths,
    pub max_concurrency: Option<usize>,
    /// Requests per second; infinite sends everything at once.
    pub request_rate: f64,
    pub burstiness: f64,
    pub seed: u64,
    /// Whether the bench sent its warm-up copy of request 0 first (vLLM always does).
    pub warmup: bool,
    /// Whether the requests went through the chat endpoint (a `backend` label or a result
    /// JSON's `backend`: `openai-chat`, `vllm-chat`); the frontend takes a burst of them in
    /// differently (see the engine's `frontend`).
    pub chat: bool,
    /// Tokens every prompt starts with, the same in each (a shared system prompt, the fixed
    /// lines of vLLM's sonnet dataset): the server's prefix cache holds them after the first
    /// request.
    pub shared_prefix: u32,
}

impl PointWorkload {
    /// `num_prompts` requests of `input` and `output` tokens in all, spread evenly, sent at once
    /// with at most `max_concurrency` in flight, through the completions endpoint and after
    /// the bench's warm-up request, sharing no prefix: what a report's totals say.
    pub fn even(num_prompts: usize, input: u64, output: u64, max_concurrency: Option<usize>) -> Self {
        PointWorkload {
            num_prompts,
            input: Lengths::Even { total: input },
            output: Lengths::Even { total: output },
            max_concurrency,
            request_rate: f64::INFINITY,
            burstiness: 1.0,
            seed: 0,
            warmup: true,
            chat: false,
            shared_prefix: 0,
        }
    }
}

/// The metrics a fit matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FitMetric {
    MeanTtft,
    MeanTpot,
    OutputThroughput,
    /// Fitted and reported where measured, with its own row in the error summaries but not in
    /// their "all": with the mean it tells the first token of a request that arrives alone
    /// from that of a burst's queue (the mean carries both).
    MedianTtft,
    /// Reported where measured, with its own row, but neither fitted nor in "all": on the
    /// steady loads a fit sees it moves with the mean TPOT, and fitting both would count the
    /// decode twice ([`FitMetric::fitted`]).
    MedianTpot,
    /// The mean and median end-to-end latency (the request sent to its last token): reported
    /// where measured, each with its own row, but neither fitted nor in "all": a request's
    /// latency is its first token plus its TPOT times its other tokens, which the fit matches
    /// already. It is the figure other twins quote their error on.
    MeanE2el,
    MedianE2el,
    /// The engine's share of the mean first token: the server's mean queue plus mean prefill
    /// (vLLM's `request_queue_time_seconds` and `request_prefill_time_seconds`), where the run
    /// scraped them (`--server-metrics`). Reported where measured, neither fitted nor in "all":
    /// beside the mean TTFT it tells whether a miss is the engine's or its frontend's.
    EngineTtft,
}

impl FitMetric {
    /// The headline metrics: the "all" of an error summary.
    pub const ALL: [FitMetric; 3] = [FitMetric::MeanTtft, FitMetric::MeanTpot, FitMetric::OutputThroughput];
    /// What an error summary has a row for, where measured, in their order: the headline
    /// metrics, the medians of TTFT and TPOT, the end-to-end latency and the engine's share of
    /// the first token.
    pub const REPORTED: [FitMetric; 8] = [
        FitMetric::MeanTtft,
        FitMetric::MedianTtft,
        FitMetric::MeanTpot,
        FitMetric::MedianTpot,
        FitMetric::OutputThroughput,
        FitMetric::MeanE2el,
        FitMetric::MedianE2el,
        FitMetric::EngineTtft,
    ];

    /// Whether a fit matches the metric where measured: the headline metrics and the median
    /// TTFT; the median TPOT and the end-to-end latencies are only reported.
    pub fn fitted(self) -> bool {
        matches!(self, FitMetric::MeanTtft | FitMetric::MeanTpot | FitMetric::OutputThroughput | FitMetric::MedianTtft)
    }

    pub fn name(self) -> &'static str {
        match self {
            FitMetric::MeanTtft => "mean TTFT (ms)",
            FitMetric::MeanTpot => "mean TPOT (ms)",
            FitMetric::OutputThroughput => "output tok/s",
            FitMetric::MedianTtft => "median TTFT (ms)",
            FitMetric::MedianTpot => "median TPOT (ms)",
            FitMetric::MeanE2el => "mean E2EL (ms)",
            FitMetric::MedianE2el => "median E2EL (ms)",
            FitMetric::EngineTtft => "engine TTFT (ms)",
        }
    }

    /// A short name for a table's heading.
    pub fn short_name(self) -> &'static str {
        match self {
            FitMetric::MeanTtft => "TTFT",
            FitMetric::MeanTpot => "TPOT",
            FitMetric::OutputThroughput => "throughput",
            FitMetric::MedianTtft => "median TTFT",
            FitMetric::MedianTpot => "median TPOT",
            FitMetric::MeanE2el => "E2EL",
            FitMetric::MedianE2el => "median E2EL",
            FitMetric::EngineTtft => "engine TTFT",
        }
    }

    /// A short key for tables and files.
    pub fn key(self) -> &'static str {
        match self {
            FitMetric::MeanTtft => "ttft",
            FitMetric::MeanTpot => "tpot",
            FitMetric::OutputThroughput => "throughput",
            FitMetric::MedianTtft => "median_ttft",
            FitMetric::MedianTpot => "median_tpot",
            FitMetric::MeanE2el => "e2el",
            FitMetric::MedianE2el => "median_e2el",
            FitMetric::EngineTtft => "engine_ttft",
        }
    }

    /// The metric in a summary (`None` when absent or zero, as TPOT is for one-token outputs).
    pub fn of(self, s: &Summary) -> Option<f64> {
        let v = match self {
            FitMetric::MeanTtft => s.metric(Metric::Ttft).map(|m| m.mean_ms),
            FitMetric::MeanTpot => s.metric(Metric::Tpot).map(|m| m.mean_ms),
            FitMetric::OutputThroughput => s.output_throughput,
            FitMetric::MedianTtft => s.metric(Metric::Ttft).map(|m| m.median_ms),
            FitMetric::MedianTpot => s.metric(Metric::Tpot).map(|m| m.median_ms),
            FitMetric::MeanE2el => s.metric(Metric::E2el).map(|m| m.mean_ms),
            FitMetric::MedianE2el => s.metric(Metric::E2el).map(|m| m.median_ms),
            FitMetric::EngineTtft => s.server.as_ref().and_then(|t| t.engine_first_token_ms()),
        };
        v.filter(|x| x.is_finite() && *x > 0.0)
    }
}

/// One measured run.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredPoint {
    /// Where it came from: the file and the block or line.
    pub label: String,
    /// The text before the block in a report (`Results MODEL`, sweep notes).
    pub headings: Vec<String>,
    /// What the point measured, `(key, value)`: a report block's labels, or a result JSON's
    /// `model` (`model_id`), `label` and metadata. Empty when nothing says.
    pub labels: Vec<(String, String)>,
    pub workload: PointWorkload,
    /// The measured value of each metric it has.
    pub measured: Vec<(FitMetric, f64)>,
}

impl MeasuredPoint {
    /// A point from a summary, the workload rebuilt from its totals.
    pub fn from_summary(label: String, headings: Vec<String>, s: &Summary) -> Result<Self, String> {
        let n = s.completed + s.failed.unwrap_or(0);
        if n == 0 {
            return Err("the run has no request".into());
        }
        if s.pooling.is_some() {
            return Err("a pooling run (embeddings, /pooling): the twin is checked and fitted on generation runs;                         pooling runs are not yet"
                .into());
        }
        let Some(output) = s.total_output_tokens.filter(|t| *t > 0) else {
            return Err("the run has no total of generated tokens".into());
        };
        let measured: Vec<(FitMetric, f64)> =
            FitMetric::REPORTED.iter().filter_map(|m| m.of(s).map(|v| (*m, v))).collect();
        if measured.is_empty() {
            return Err("the run has none of mean TTFT, mean TPOT and output throughput".into());
        }
        // A speculative decoder's acceptance is what the run measured of its drafter and text,
        // which the simulator takes as given (`spec-acceptance`).
        let labels = s
            .spec_decode
            .as_ref()
            .map(|spec| {
                let rates: Vec<String> = spec.per_position_rates().iter().map(|r| format!("{r:.4}")).collect();
                ("spec-acceptance".to_string(), rates.join(","))
            })
            .filter(|(_, rates)| !rates.is_empty())
            .into_iter()
            .collect();
        Ok(MeasuredPoint {
            label,
            headings,
            labels,
            workload: PointWorkload {
                request_rate: s.request_rate.filter(|r| *r > 0.0).unwrap_or(f64::INFINITY),
                ..PointWorkload::even(
                    usize::try_from(n).unwrap_or(usize::MAX),
                    s.total_input_tokens.max(n),
                    output.max(n),
                    s.max_concurrency.and_then(|c| usize::try_from(c).ok()).filter(|c| *c > 0),
                )
            },
            measured,
        })
    }

    /// Reads the endpoint from a `backend` label (`backend: openai-chat` above a report's
    /// blocks, a table row's or a result JSON's `backend`).
    pub fn read_backend(&mut self) {
        let named = self.labels.iter().rev().find(|(k, _)| k == "backend").map(|(_, v)| v.as_str());
        self.workload.chat = named.and_then(Backend::from_name).is_some_and(|b| b.api().templated());
    }

    /// Reads how requests arrived from labels where the run itself does not say (a report's
    /// headings `request-rate: 8`, `burstiness: 0.5`, or `arrivals: constant` for a client that
    /// sends at fixed intervals, as guidellm's `--profile constant` does; `poisson` is vLLM's
    /// default). A rate the report printed is kept.
    pub fn read_arrivals(&mut self) {
        let label =
            |key: &str| self.labels.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.trim().to_ascii_lowercase());
        let number = |key: &str| label(key).and_then(|v| v.parse::<f64>().ok()).filter(|x| x.is_finite() && *x > 0.0);
        if self.workload.request_rate.is_infinite()
            && let Some(rate) = number("request-rate")
        {
            self.workload.request_rate = rate;
        }
        match (label("arrivals").as_deref(), number("burstiness")) {
            (Some("constant"), _) => self.workload.burstiness = CONSTANT_ARRIVALS,
            (Some("poisson"), _) => self.workload.burstiness = 1.0,
            (_, Some(b)) => self.workload.burstiness = b,
            _ => {}
        }
    }

    /// Reads the tokens every prompt shares from a `prefix-len` label (a pasted benchmark
    /// command's `--random-prefix-len` or `--sonnet-prefix-len`, or a heading of that name).
    pub fn read_shared_prefix(&mut self) {
        let label = self.labels.iter().rev().find(|(k, _)| k == "prefix-len").map(|(_, v)| v.trim());
        if let Some(tokens) = label.and_then(|v| v.parse::<u32>().ok()) {
            self.workload.shared_prefix = tokens;
        }
    }

    /// The measured value of `m`.
    pub fn value(&self, m: FitMetric) -> Option<f64> {
        self.measured.iter().find(|(k, _)| *k == m).map(|(_, v)| *v)
    }

    /// The model the point names (its `model` label), if any.
    pub fn model(&self) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == "model").map(|(_, v)| v.as_str())
    }

    /// The labels as `key=value`, comma-separated (empty when there are none).
    pub fn labels_text(&self) -> String {
        self.labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
    }
}

/// The gamma shape that stands for arrivals at fixed intervals: gaps within 0.1 % of the mean.
pub const CONSTANT_ARRIVALS: f64 = 1e6;

/// Every result block of a vLLM console report (one or several per file).
pub fn points_from_report(text: &str, origin: &str) -> Result<Vec<MeasuredPoint>, CalibrationError> {
    report_points(parse_reports(text, ReportOrigin::Vllm), origin)?.finished().all(origin)
}

/// The points of a report's parsed blocks ([`parse_reports`]), a block that cannot be read
/// skipped with its reason.
pub(super) fn report_points(
    entries: Vec<Result<ParsedBlock, BlockError>>,
    origin: &str,
) -> Result<FileRead, CalibrationError> {
    if entries.is_empty() {
        return Err(CalibrationError::Input {
            path: origin.to_string(),
            message: "no `Serving Benchmark Result` block, no llama-benchy table and not a result JSON; pass vLLM \
                      console reports, llama-benchy's output or result files"
                .into(),
        });
    }
    let labelled = block_labels(&entries);
    let mut read = FileRead::default();
    for (k, (entry, labels)) in entries.into_iter().zip(labelled.blocks).enumerate() {
        let block = match entry {
            Ok(block) => block,
            Err(e) => {
                read.skipped.push(Skipped { label: format!("{origin} #{}", k + 1), reason: e.to_string() });
                continue;
            }
        };
        let label = format!("{origin} #{} (line {})", k + 1, block.line);
        let mut point = match MeasuredPoint::from_summary(label.clone(), block.headings, &block.summary) {
            Ok(point) => point,
            Err(reason) => {
                read.skipped.push(Skipped { label, reason });
                continue;
            }
        };
        // The block's own labels first (they win), then what it measured.
        point.labels.splice(0..0, labels);
        point.read_backend();
        point.read_arrivals();
        point.read_shared_prefix();
        rebuild_runner_metrics(&mut point, &block.values, &block.summary);
        read.points.push(point);
    }
    Ok(read)
}

/// A block of GPUStack's benchmark runner (guidellm underneath), known by its `Latency` section
/// ([`labels::RUNNER_MEAN_LATENCY`]), with vLLM's metrics rebuilt from its own totals: its TPOT
/// column is the first token's wait over the output tokens and its output throughput is not the
/// generated tokens over the duration. Output throughput becomes total generated tokens over the
/// duration, as vLLM computes it; mean TPOT becomes (mean latency - mean TTFT) / (n - 1) where
/// every request generated the same n tokens (the total divides evenly by the requests, as a
/// fixed-length random profile's does), and is dropped otherwise (ShareGPT). Its mean and
/// median latency (a request's, sent to last token) are the end-to-end latencies. The point is
/// labelled `client=gpustack-runner`.
fn rebuild_runner_metrics(point: &mut MeasuredPoint, values: &[(String, f64)], s: &Summary) {
    let Some(latency_s) = labels::runner_mean_latency(values) else { return };
    let (key, value) = labels::RUNNER_CLIENT;
    point.labels.push((key.into(), value.into()));
    let output = s.total_output_tokens.unwrap_or(0);
    let per_request = (s.completed > 0 && output.is_multiple_of(s.completed)).then(|| output / s.completed);
    let tpot = match (per_request, FitMetric::MeanTtft.of(s)) {
        (Some(n), Some(ttft)) if n > 1 => Some((latency_s * 1e3 - ttft) / (n - 1) as f64).filter(|t| *t > 0.0),
        _ => None,
    };
    let throughput = (s.duration_s > 0.0).then(|| output as f64 / s.duration_s).filter(|t| *t > 0.0);
    // Only its first-token figures are vLLM's as printed; the rest come from its totals and
    // its latencies.
    point.measured.retain(|(m, _)| matches!(m, FitMetric::MeanTtft | FitMetric::MedianTtft));
    point.measured.extend(tpot.map(|t| (FitMetric::MeanTpot, t)));
    point.measured.extend(throughput.map(|t| (FitMetric::OutputThroughput, t)));
    let median_s = values.iter().find(|(k, _)| k == labels::RUNNER_MEDIAN_LATENCY).map(|(_, v)| *v);
    let e2el = [(FitMetric::MeanE2el, Some(latency_s)), (FitMetric::MedianE2el, median_s)];
    point.measured.extend(e2el.into_iter().filter_map(|(m, v)| v.filter(|v| *v > 0.0).map(|v| (m, v * 1e3))));
}

/// A point from a result JSON document (vLLM's or servebench's `--save-result`).
pub fn point_from_json(value: &Value, label: String) -> Result<MeasuredPoint, String> {
    let summary = summary_from_vllm_json(value).map_err(|e| e.to_string())?;
    let mut p = MeasuredPoint::from_summary(label, Vec::new(), &summary)?;
    p.labels.splice(0..0, json_labels(value));
    if let Some(b) = value.get("backend").and_then(Value::as_str) {
        p.labels.push(("backend".into(), b.to_string()));
    }
    p.read_backend();
    let config = value.pointer("/servebench/config");
    if let Some(n) = value.get("num_prompts").and_then(whole_number) {
        p.workload.num_prompts = usize::try_from(n).unwrap_or(usize::MAX).max(1);
    }
    let lens = |key: &str| -> Option<Vec<u32>> {
        let a = value.get(key)?.as_array()?;
        a.iter().map(|x| whole_number(x).and_then(|v| u32::try_from(v).ok())).collect()
    };
    let from_records = |key: &str| -> Option<Vec<u32>> {
        let a = value.pointer("/servebench/requests")?.as_array()?;
        a.iter().map(|r| r.get(key).and_then(whole_number).and_then(|v| u32::try_from(v).ok())).collect()
    };
    let pair = match (lens("input_lens"), lens("output_lens")) {
        (Some(i), Some(o)) => Some((i, o)),
        _ => from_records("prompt_tokens").zip(from_records("output_tokens")),
    };
    if let Some((i, o)) = pair
        && i.len() == o.len()
        && !i.is_empty()
    {
        p.workload.num_prompts = i.len();
        p.workload.input = Lengths::Each(i);
        p.workload.output = Lengths::Each(o);
    }
    if let Some(b) = value.get("burstiness").and_then(Value::as_f64).filter(|b| *b > 0.0) {
        p.workload.burstiness = b;
    }
    if let Some(c) = config {
        if let Some(seed) = c.pointer("/traffic/seed").and_then(Value::as_u64) {
            p.workload.seed = seed;
        }
        let ready = c.pointer("/traffic/ready_check_timeout_s").and_then(Value::as_f64).unwrap_or(0.0);
        let warmups = c.pointer("/traffic/num_warmups").and_then(Value::as_u64).unwrap_or(0);
        p.workload.warmup = ready > 0.0 || warmups > 0;
        // The random dataset's prefix, the same in every prompt (`--random-prefix-len`).
        if c.pointer("/workload/dataset").and_then(Value::as_str) == Some("random")
            && let Some(prefix) = c.pointer("/workload/prefix_len").and_then(Value::as_u64)
        {
            p.workload.shared_prefix = u32::try_from(prefix).unwrap_or(u32::MAX);
        }
    }
    Ok(p)
}

/// `model` (from `model_id`), `label` and the metadata of a result JSON (a sweep's parameters
/// among them, serving options and parallel sizes read as their labels: `max_num_seqs` as
/// `max-num-seqs`, `tensor_parallel_size` as `tp`), each key once (a later value replaces an
/// earlier one in place).
fn json_labels(value: &Value) -> Vec<(String, String)> {
    let text = |k: &str| value.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    let mut labels: Vec<(String, String)> = Vec::new();
    let named = [("model", text("model_id")), ("label", text("label"))];
    let found = named.into_iter().filter_map(|(k, v)| Some((k.to_string(), v?)));
    let metadata = metadata_from_vllm_json(value).into_iter().map(|(k, v)| (option_label(&k), v));
    for (key, value) in found.chain(metadata) {
        match labels.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => labels.push((key, value)),
        }
    }
    labels
}

#[cfg(test)]
mod tests;
