//! Result JSON files: `vllm bench serve --save-result` of any 0.x version, `--append-result`
//! files (one document per line), pretty-printed documents (sweep results), lists of
//! documents, and servebench's own files.
//!
//! Each document's summary is read by [`summary_from_vllm_json`]. Then:
//! - A servebench file (with the `servebench` key) gives back its resolved config (model,
//!   backend, target, `--label` and `--metadata` labels), start time, notes, interrupted flag
//!   and one record per request from `servebench.requests` (with every chunk time when the
//!   file also has the per-request `itls`).
//! - A vLLM file gives `backend`, `model_id` and `num_prompts` as columns, `label` as the
//!   label `label`, and every other top-level key vLLM does not define whose value is a
//!   string, number or boolean as a label (vLLM writes `--metadata` there, and sweeps their
//!   parameters). `date` (the local time of the machine that ran it) becomes the start time
//!   in this machine's time zone. The per-request arrays become records when present.

use serde_json::{Map, Value};
use servebench_core::config::RunConfig;
use servebench_core::vllm::summary_from_vllm_json;

use super::records::{from_servebench, from_vllm_arrays};
use super::{Context, ImportReport, Problem};
use crate::dates::from_vllm_date;
use crate::model::{NewRun, RunKind};

/// Top-level keys of vLLM's result JSON (every version read) that are not labels.
const VLLM_KEYS: &[&str] = &[
    "date",
    "endpoint_type",
    "backend",
    "label",
    "model_id",
    "tokenizer_id",
    "best_of",
    "use_beam_search",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "ramp_up_strategy",
    "ramp_up_start_rps",
    "ramp_up_end_rps",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "total_input_sequences",
    "request_throughput",
    "request_goodput",
    "request_goodput:",
    "input_throughput",
    "input_sequence_throughput",
    "output_throughput",
    "total_token_throughput",
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "start_times",
    "queue_times",
    "generated_texts",
    "errors",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "rtfx",
    "server_queue_times",
    "server_ttfts",
    "rps_change_events",
    "servebench",
];

/// Key prefixes of vLLM's per-metric and counter keys.
const VLLM_PREFIXES: &[&str] = &["mean_", "median_", "std_", "spec_decode_", "diffusion_", "probe_"];

pub(crate) fn import(text: &str, cx: &Context<'_>, report: &mut ImportReport) {
    for (line, doc) in documents(text, report) {
        match doc {
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    document(item, line, Some(i), cx, report);
                }
            }
            other => document(&other, line, None, cx, report),
        }
    }
}

/// Every JSON document in `text` with the line it starts on. A document that does not parse
/// is reported; reading resumes at the next line that starts with `{` or `[` (how appended
/// and pretty-printed documents start).
fn documents(text: &str, report: &mut ImportReport) -> Vec<(usize, Value)> {
    // Positions only grow, so lines are counted from the last position asked about.
    let (mut counted, mut lines) = (0, 1);
    let mut line_of = |pos: usize| {
        lines += text.as_bytes()[counted..pos].iter().filter(|&&b| b == b'\n').count();
        counted = pos;
        lines
    };
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let rest = &text[pos..];
        let start = pos + (rest.len() - rest.trim_start().len());
        if start >= text.len() {
            break;
        }
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(value)) => {
                out.push((line_of(start), value));
                pos = start + stream.byte_offset();
            }
            Some(Err(e)) => {
                let line = line_of(start);
                report.skipped.push(Problem {
                    line,
                    message: format!("not valid JSON ({e}, counting lines from this one); the document is skipped"),
                });
                match next_document_start(text, start) {
                    Some(next) => pos = next,
                    None => break,
                }
            }
            None => break,
        }
    }
    out
}

/// The start of the first line after the one holding `pos` that begins with `{` or `[`.
fn next_document_start(text: &str, pos: usize) -> Option<usize> {
    let mut at = pos + text[pos..].find('\n')? + 1;
    loop {
        if text[at..].starts_with(['{', '[']) {
            return Some(at);
        }
        at += text[at..].find('\n')? + 1;
    }
}

fn document(value: &Value, line: usize, part: Option<usize>, cx: &Context<'_>, report: &mut ImportReport) {
    let at = |i: Option<usize>| i.map(|i| format!(" (list item {i})")).unwrap_or_default();
    let summary = match summary_from_vllm_json(value) {
        Ok(s) => s,
        Err(e) => {
            report.skipped.push(Problem { line, message: format!("{e}{}", at(part)) });
            return;
        }
    };
    let Some(m) = value.as_object() else { return };
    let mut run = NewRun::from_summary(RunKind::Import, summary);
    let mut note = |message: String| report.notes.push(Problem { line, message: format!("{message}{}", at(part)) });
    match m.get("servebench").and_then(Value::as_object) {
        Some(ours) => servebench_file(m, ours, &mut run, &mut note),
        None => vllm_file(m, &mut run, &cx.tz, &mut note),
    }
    cx.stamp(&mut run, line, part);
    report.runs.push(run);
}

fn servebench_file(m: &Map<String, Value>, ours: &Map<String, Value>, run: &mut NewRun, note: &mut impl FnMut(String)) {
    if let Some(config) = ours.get("config").filter(|c| !c.is_null()) {
        match serde_json::from_value::<RunConfig>(config.clone()) {
            Ok(c) => run.apply_config(&c),
            Err(e) => {
                note(format!("its config is not one this servebench reads ({e}); it is stored as written"));
                run.config = Some(config.clone());
                vllm_columns(m, run);
            }
        }
    }
    run.started_at = ours.get("started_at").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    run.interrupted = ours.get("interrupted").and_then(Value::as_bool).unwrap_or(false);
    if let Some(notes) = ours.get("notes").and_then(Value::as_array) {
        run.notes = notes.iter().filter_map(Value::as_str).map(str::to_string).collect();
    }
    match from_servebench(m, ours) {
        Ok(records) => run.records = records,
        Err(e) => note(format!("its per-request records are not imported: {e}")),
    }
}

fn vllm_file(m: &Map<String, Value>, run: &mut NewRun, tz: &jiff::tz::TimeZone, note: &mut impl FnMut(String)) {
    vllm_columns(m, run);
    run.started_at = m.get("date").and_then(Value::as_str).and_then(|d| from_vllm_date(d, tz));
    if let Some(label) = m.get("label").and_then(Value::as_str).filter(|l| !l.is_empty()) {
        run.set_label("label", label);
    }
    for (key, value) in m {
        if VLLM_KEYS.contains(&key.as_str()) || is_metric_key(key) || VLLM_PREFIXES.iter().any(|p| key.starts_with(p)) {
            continue;
        }
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => continue,
        };
        run.set_label(key, &text);
    }
    match from_vllm_arrays(m) {
        Ok(records) => run.records = records,
        Err(e) => note(format!("its per-request arrays are not imported: {e}")),
    }
}

/// Backend, model and prompt count from vLLM's keys.
fn vllm_columns(m: &Map<String, Value>, run: &mut NewRun) {
    let text = |k: &str| m.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    run.backend = text("backend").or_else(|| text("endpoint_type"));
    run.model = text("model_id");
    run.num_prompts = m.get("num_prompts").and_then(Value::as_u64);
}

/// `p99_ttft_ms`, `p99.9_itl_ms`: a percentile key.
fn is_metric_key(key: &str) -> bool {
    key.strip_prefix('p')
        .and_then(|k| k.strip_suffix("_ms"))
        .and_then(|k| k.split_once('_'))
        .is_some_and(|(p, _)| p.parse::<f64>().is_ok())
}
