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
//! A result file may hold one document, one per line, pretty-printed documents or a list of
//! them ([`read_documents`]).

use std::path::Path;

use serde_json::Value;
use servebench_core::config::{Api, Backend, Metric};
use servebench_core::metrics::Summary;
use servebench_core::vllm::{
    ReportOrigin, block_labels, is_json, labels, metadata_from_vllm_json, parse_reports, read_documents,
    summary_from_vllm_json,
};

use super::CalibrationError;

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
}

impl FitMetric {
    /// The headline metrics: the "all" of an error summary.
    pub const ALL: [FitMetric; 3] = [FitMetric::MeanTtft, FitMetric::MeanTpot, FitMetric::OutputThroughput];
    /// What a fit matches and an error summary has a row for, where measured, in their order:
    /// the headline metrics and the median TTFT.
    pub const REPORTED: [FitMetric; 4] =
        [FitMetric::MeanTtft, FitMetric::MedianTtft, FitMetric::MeanTpot, FitMetric::OutputThroughput];

    pub fn name(self) -> &'static str {
        match self {
            FitMetric::MeanTtft => "mean TTFT (ms)",
            FitMetric::MeanTpot => "mean TPOT (ms)",
            FitMetric::OutputThroughput => "output tok/s",
            FitMetric::MedianTtft => "median TTFT (ms)",
        }
    }

    /// A short name for a table's heading.
    pub fn short_name(self) -> &'static str {
        match self {
            FitMetric::MeanTtft => "TTFT",
            FitMetric::MeanTpot => "TPOT",
            FitMetric::OutputThroughput => "throughput",
            FitMetric::MedianTtft => "median TTFT",
        }
    }

    /// A short key for tables and files.
    pub fn key(self) -> &'static str {
        match self {
            FitMetric::MeanTtft => "ttft",
            FitMetric::MeanTpot => "tpot",
            FitMetric::OutputThroughput => "throughput",
            FitMetric::MedianTtft => "median_ttft",
        }
    }

    /// The metric in a summary (`None` when absent or zero, as TPOT is for one-token outputs).
    pub fn of(self, s: &Summary) -> Option<f64> {
        let v = match self {
            FitMetric::MeanTtft => s.metric(Metric::Ttft).map(|m| m.mean_ms),
            FitMetric::MeanTpot => s.metric(Metric::Tpot).map(|m| m.mean_ms),
            FitMetric::OutputThroughput => s.output_throughput,
            FitMetric::MedianTtft => s.metric(Metric::Ttft).map(|m| m.median_ms),
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
        let Some(output) = s.total_output_tokens.filter(|t| *t > 0) else {
            return Err("the run has no total of generated tokens".into());
        };
        let measured: Vec<(FitMetric, f64)> =
            FitMetric::REPORTED.iter().filter_map(|m| m.of(s).map(|v| (*m, v))).collect();
        if measured.is_empty() {
            return Err("the run has none of mean TTFT, mean TPOT and output throughput".into());
        }
        Ok(MeasuredPoint {
            label,
            headings,
            labels: Vec::new(),
            workload: PointWorkload {
                num_prompts: usize::try_from(n).unwrap_or(usize::MAX),
                input: Lengths::Even { total: s.total_input_tokens.max(n) },
                output: Lengths::Even { total: output.max(n) },
                max_concurrency: s.max_concurrency.and_then(|c| usize::try_from(c).ok()).filter(|c| *c > 0),
                request_rate: s.request_rate.filter(|r| *r > 0.0).unwrap_or(f64::INFINITY),
                burstiness: 1.0,
                seed: 0,
                warmup: true,
                chat: false,
            },
            measured,
        })
    }

    /// Reads the endpoint from a `backend` label (`backend: openai-chat` above a report's
    /// blocks, a table row's or a result JSON's `backend`).
    pub fn read_backend(&mut self) {
        let named = self.labels.iter().rev().find(|(k, _)| k == "backend").map(|(_, v)| v.as_str());
        self.workload.chat = named.and_then(Backend::from_name).is_some_and(|b| b.api() == Api::Chat);
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

/// Every result block of a vLLM console report (one or several per file).
pub fn points_from_report(text: &str, origin: &str) -> Result<Vec<MeasuredPoint>, CalibrationError> {
    let entries = parse_reports(text, ReportOrigin::Vllm);
    let labelled = block_labels(&entries);
    let mut out = Vec::new();
    for (k, (entry, labels)) in entries.into_iter().zip(labelled.blocks).enumerate() {
        let block = entry.map_err(|e| CalibrationError::Input { path: origin.to_string(), message: e.to_string() })?;
        let label = format!("{origin} #{} (line {})", k + 1, block.line);
        let mut point = MeasuredPoint::from_summary(label, block.headings, &block.summary).map_err(|message| {
            CalibrationError::Input {
                path: origin.to_string(),
                message: format!("block at line {}: {message}", block.line),
            }
        })?;
        point.labels = labels;
        point.read_backend();
        super::datasets::shape_by_dataset(&mut point);
        rebuild_runner_metrics(&mut point, &block.values, &block.summary);
        out.push(point);
    }
    if out.is_empty() {
        return Err(CalibrationError::Input {
            path: origin.to_string(),
            message: "no `Serving Benchmark Result` block and not a result JSON; pass vLLM console reports or \
                      result files"
                .into(),
        });
    }
    Ok(out)
}

/// A block of GPUStack's benchmark runner (guidellm underneath), known by its `Latency` section
/// ([`labels::RUNNER_MEAN_LATENCY`]), with vLLM's metrics rebuilt from its own totals: its TPOT
/// column is the first token's wait over the output tokens and its output throughput is not the
/// generated tokens over the duration. Output throughput becomes total generated tokens over the
/// duration, as vLLM computes it; mean TPOT becomes (mean latency - mean TTFT) / (n - 1) where
/// every request generated the same n tokens (the total divides evenly by the requests, as a
/// fixed-length random profile's does), and is dropped otherwise (ShareGPT). The point is
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
    point.measured.retain(|(m, _)| !matches!(m, FitMetric::MeanTpot | FitMetric::OutputThroughput));
    point.measured.extend(tpot.map(|t| (FitMetric::MeanTpot, t)));
    point.measured.extend(throughput.map(|t| (FitMetric::OutputThroughput, t)));
}

/// A point from a result JSON document (vLLM's or servebench's `--save-result`).
pub fn point_from_json(value: &Value, label: String) -> Result<MeasuredPoint, String> {
    let summary = summary_from_vllm_json(value).map_err(|e| e.to_string())?;
    let mut p = MeasuredPoint::from_summary(label, Vec::new(), &summary)?;
    p.labels = json_labels(value);
    if let Some(b) = value.get("backend").and_then(Value::as_str) {
        p.labels.push(("backend".into(), b.to_string()));
    }
    p.read_backend();
    let config = value.pointer("/servebench/config");
    if let Some(n) = value.get("num_prompts").and_then(Value::as_u64) {
        p.workload.num_prompts = usize::try_from(n).unwrap_or(usize::MAX).max(1);
    }
    let lens = |key: &str| -> Option<Vec<u32>> {
        let a = value.get(key)?.as_array()?;
        a.iter().map(|x| x.as_u64().and_then(|v| u32::try_from(v).ok())).collect()
    };
    let from_records = |key: &str| -> Option<Vec<u32>> {
        let a = value.pointer("/servebench/requests")?.as_array()?;
        a.iter().map(|r| r.get(key).and_then(Value::as_u64).and_then(|v| u32::try_from(v).ok())).collect()
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
    // Without per-request lengths, a `dataset` label (`--metadata dataset=sharegpt`) shapes the
    // totals as a report's heading would.
    super::datasets::shape_by_dataset(&mut p);
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
    }
    Ok(p)
}

/// `model` (from `model_id`), `label` and the metadata of a result JSON, each key once (a
/// later value replaces an earlier one in place).
fn json_labels(value: &Value) -> Vec<(String, String)> {
    let text = |k: &str| value.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    let mut labels: Vec<(String, String)> = Vec::new();
    let named = [("model", text("model_id")), ("label", text("label"))];
    let found = named.into_iter().filter_map(|(k, v)| Some((k.to_string(), v?)));
    for (key, value) in found.chain(metadata_from_vllm_json(value)) {
        match labels.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => labels.push((key, value)),
        }
    }
    labels
}

/// Reads a measurement file: result JSON (one document, one per line when appended,
/// pretty-printed documents or a list of them) or a console report with one or more result
/// blocks.
pub fn read_points(path: &Path) -> Result<Vec<MeasuredPoint>, CalibrationError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| CalibrationError::Input { path: origin.clone(), message: e.to_string() })?;
    let name = path.file_name().map_or(origin.clone(), |n| n.to_string_lossy().into_owned());
    if is_json(&text) {
        points_from_json_text(&text, &name).map_err(|message| CalibrationError::Input { path: origin, message })
    } else {
        points_from_report(&text, &name)
    }
}

/// Every document of a result JSON file named `name`: one point each, labelled with the
/// name alone when the file holds one document, else with the line (and list item).
fn points_from_json_text(text: &str, name: &str) -> Result<Vec<MeasuredPoint>, String> {
    let docs = read_documents(text)
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{e}; fix that document or leave it out of the file"))?;
    if docs.is_empty() {
        return Err("the file holds no result document (an empty list?); pass a file with results".into());
    }
    let one = docs.len() == 1 && docs[0].item.is_none();
    docs.iter()
        .map(|d| {
            let item = d.item_suffix();
            let label = if one { name.to_string() } else { format!("{name} line {}{item}", d.line) };
            let point = if super::table::is_row(&d.value) {
                super::table::point_from_row(&d.value, label, super::table::RowDefaults::default())
            } else {
                point_from_json(&d.value, label)
            };
            point.map_err(|message| format!("line {}{item}: {message}", d.line))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_expand_to_their_totals() {
        assert_eq!(Lengths::Even { total: 10 }.expand(4), vec![3, 3, 2, 2]);
        assert_eq!(Lengths::Even { total: 2 }.expand(4), vec![1, 1, 1, 1]);
        assert_eq!(Lengths::Each(vec![5, 7]).expand(3), vec![5, 7, 5]);
        let shape = Lengths::Shape { total: 30_000, quantiles: vec![(0.0, 1.0), (0.5, 10.0), (1.0, 100.0)] };
        let v = shape.expand(100);
        let sum: u64 = v.iter().map(|&x| u64::from(x)).sum();
        assert!((sum as i64 - 30_000).abs() < 100, "{sum}");
        assert!(v.windows(2).any(|w| w[0] > w[1]) && v.windows(2).any(|w| w[0] < w[1]), "shuffled");
        let mut sorted = v.clone();
        sorted.sort_unstable();
        assert!(sorted[50] < sorted[99] / 4, "skewed: {sorted:?}");
    }

    const REPORT: &str = "Results some/model

============ Serving Benchmark Result ============
Successful requests:                     20
Failed requests:                         0
Maximum request concurrency:             4
Benchmark duration (s):                  64.40
Total input tokens:                      2560
Total generated tokens:                  2570
Request throughput (req/s):              0.31
Output token throughput (tok/s):         39.75
Total token throughput (tok/s):          79.50
---------------Time to First Token----------------
Mean TTFT (ms):                          1616.70
Median TTFT (ms):                        1724.28
P99 TTFT (ms):                           2761.99
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          88.65
Median TPOT (ms):                        86.42
P99 TPOT (ms):                           102.80
---------------Inter-token Latency----------------
Mean ITL (ms):                           88.65
Median ITL (ms):                         87.08
P99 ITL (ms):                            101.28
==================================================
";

    #[test]
    fn a_console_block_becomes_a_point_with_its_totals() {
        let points = points_from_report(REPORT, "r.txt").unwrap();
        assert_eq!(points.len(), 1);
        let p = &points[0];
        assert_eq!(p.headings, vec!["Results some/model".to_string()]);
        assert_eq!(p.labels, [("model".to_string(), "some/model".to_string())]);
        assert_eq!((p.model(), p.labels_text().as_str()), (Some("some/model"), "model=some/model"));
        assert_eq!(p.workload.num_prompts, 20);
        assert_eq!(p.workload.max_concurrency, Some(4));
        assert!(p.workload.request_rate.is_infinite());
        assert_eq!(p.workload.input.expand(20), vec![128; 20]);
        assert_eq!(p.workload.output.expand(20).iter().sum::<u32>(), 2570);
        assert_eq!(p.value(FitMetric::MeanTtft), Some(1616.70));
        assert_eq!(p.value(FitMetric::MeanTpot), Some(88.65));
        assert_eq!(p.value(FitMetric::OutputThroughput), Some(39.75));
        let err = points_from_report("nothing here", "x.txt").unwrap_err().to_string();
        assert!(err.contains("x.txt") && err.contains("Serving Benchmark Result"), "{err}");
    }

    #[test]
    fn a_result_json_gives_its_lengths_and_config() {
        let v = serde_json::json!({
            "num_prompts": 3, "request_rate": 2.0, "burstiness": 0.5, "max_concurrency": null,
            "completed": 3, "failed": 0, "duration": 4.0, "total_input_tokens": 60,
            "total_output_tokens": 30, "request_throughput": 0.75, "output_throughput": 7.5,
            "mean_ttft_ms": 100.0, "median_ttft_ms": 100.0, "mean_tpot_ms": 20.0, "median_tpot_ms": 20.0,
            "input_lens": [10, 20, 30], "output_lens": [5, 10, 15],
            "servebench": {"config": {"traffic": {"seed": 7, "ready_check_timeout_s": 0.0, "num_warmups": 0}}}
        });
        let p = point_from_json(&v, "r.json".into()).unwrap();
        assert!(p.labels.is_empty() && p.model().is_none(), "{:?}", p.labels);
        assert_eq!(p.workload.input, Lengths::Each(vec![10, 20, 30]));
        assert_eq!(p.workload.output, Lengths::Each(vec![5, 10, 15]));
        assert_eq!((p.workload.request_rate, p.workload.burstiness, p.workload.seed), (2.0, 0.5, 7));
        assert!(!p.workload.warmup);
        assert_eq!(p.value(FitMetric::MeanTpot), Some(20.0));
        let err = point_from_json(&serde_json::json!({"completed": 1}), "bad.json".into()).unwrap_err();
        assert!(err.contains("duration"), "{err}");

        // An appended file holds one document per line.
        let dir = std::env::temp_dir().join(format!("sb-sim-points-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("runs.jsonl");
        std::fs::write(&path, format!("{v}\n{v}\n")).unwrap();
        let points = read_points(&path).unwrap();
        assert_eq!(points.len(), 2);
        assert_eq!(points[1].label, "runs.jsonl line 2");
        std::fs::write(&path, "{not json").unwrap();
        let err = read_points(&path).unwrap_err().to_string();
        assert!(err.contains("runs.jsonl") && err.contains("not valid JSON"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_endpoint_is_read_from_a_backend_heading_or_a_result_json() {
        let chat = |p: &MeasuredPoint| p.workload.chat;
        let report = |heading: &str| points_from_report(&format!("{heading}\n{REPORT}"), "r.txt").unwrap();
        assert!(chat(&report("backend: openai-chat")[0]));
        assert!(chat(&report("backend: vllm-chat")[0]));
        assert!(!chat(&report("backend: vllm")[0]) && !chat(&report("")[0]));
        // The pasted benchmark command says it too.
        assert!(chat(&report("vllm bench serve --backend openai-chat --dataset-name random --num-prompts 20")[0]));
        // A result JSON's own `backend` (vLLM writes it); unknown spellings are completions.
        let mut v = doc("Qwen/Qwen3-8B", 100.0);
        let json_chat = |v: &serde_json::Value| point_from_json(v, "r.json".into()).unwrap().workload.chat;
        assert!(!json_chat(&v));
        v["backend"] = "openai-chat".into();
        assert!(json_chat(&v));
        v["backend"] = "tgi".into();
        assert!(!json_chat(&v));
    }

    /// A result document of `model` with metadata `gpu`.
    fn doc(model: &str, ttft: f64) -> serde_json::Value {
        serde_json::json!({
            "model_id": model, "label": "nightly", "gpu": "H100", "num_prompts": 2,
            "completed": 2, "duration": 1.0, "total_input_tokens": 20, "total_output_tokens": 10,
            "request_throughput": 2.0, "output_throughput": 10.0,
            "mean_ttft_ms": ttft, "median_ttft_ms": ttft
        })
    }

    #[test]
    fn pretty_printed_documents_and_lists_are_read_with_their_labels() {
        let dir = std::env::temp_dir().join(format!("sb-sim-points-docs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (doc("Qwen/Qwen3-8B", 100.0), doc("google/gemma-3-1b-it", 200.0));
        let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap();
        let path = dir.join("sweep.json");
        std::fs::write(&path, format!("{}\n{}\n", pretty(&a), pretty(&b))).unwrap();
        let points = read_points(&path).unwrap();
        assert_eq!(points.len(), 2);
        let second_line = 1 + pretty(&a).lines().count();
        assert_eq!(points[1].label, format!("sweep.json line {second_line}"));
        assert_eq!(points[1].value(FitMetric::MeanTtft), Some(200.0));
        let want = [("model", "google/gemma-3-1b-it"), ("label", "nightly"), ("gpu", "H100")];
        assert_eq!(points[1].labels, want.map(|(k, v)| (k.to_string(), v.to_string())));

        let path = dir.join("list.json");
        std::fs::write(&path, serde_json::json!([a, b]).to_string()).unwrap();
        let points = read_points(&path).unwrap();
        let labels: Vec<(&str, Option<&str>)> = points.iter().map(|p| (p.label.as_str(), p.model())).collect();
        assert_eq!(
            labels,
            [
                ("list.json line 1 (list item 0)", Some("Qwen/Qwen3-8B")),
                ("list.json line 1 (list item 1)", Some("google/gemma-3-1b-it"))
            ]
        );

        std::fs::write(&path, serde_json::json!([a, {"completed": 1}]).to_string()).unwrap();
        let err = read_points(&path).unwrap_err().to_string();
        assert!(err.contains("list.json: line 1 (list item 1): ") && err.contains("duration"), "{err}");
        std::fs::write(&path, "[]").unwrap();
        let err = read_points(&path).unwrap_err().to_string();
        assert!(err.contains("no result document"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
