//! vLLM's result JSON: the document `vllm bench serve --save-result` writes, its file name,
//! and how it is written to disk. Reading one back is in [`read`] (the summary) and
//! [`metadata`] (the labels); splitting a file into its documents is in [`documents`].
//!
//! [`result_json`] builds vLLM 0.33's keys in vLLM's insertion order, so that written with
//! [`write_result`] (Python `json.dump` spelling) a file is what vLLM would have written for
//! the same measurements. servebench's additions go under one extra top-level key,
//! `servebench`, which tools reading vLLM's keys ignore.
//!
//! Differences from vLLM, on purpose or by necessity:
//! - `max_output_tokens_per_s` and `max_concurrent_requests` hold vLLM's one-second bucket
//!   values, as vLLM writes them; the exact peaks that servebench prints are under
//!   `servebench.peak_output_token_throughput` and `servebench.peak_concurrent_requests`.
//! - `start_times` are seconds since the run started, not `perf_counter` readings.
//! - `rps_change_events` (ramp-up) are derived after the run from each request's dispatch
//!   time ([`ramp`]), not stamped as the requests go out.
//! - A non-finite float (which vLLM would write as `Infinity`) cannot live in a
//!   `serde_json::Value`; it is written as `null`, except the request rate, which is `"inf"`
//!   as in vLLM.

pub mod documents;
pub mod metadata;
pub mod ramp;
pub mod read;
pub mod scalar;

use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::config::RunConfig;
use crate::metrics::{Ledger, Summary, TurnMetrics};
use crate::pyjson::{dumps, py_float_repr, py_whole_or_float};
use crate::record::{RequestRecord, RunResult};
use crate::vllm::labels::p_word;

/// A float as a JSON number (`null` when not finite, which JSON cannot hold).
fn num(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

fn opt_num(x: Option<f64>) -> Value {
    x.map_or(Value::Null, num)
}

/// A rate vLLM parses with `type=int` (ramp-up): an integer when whole.
fn whole_or_float(x: f64) -> Value {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 9e15 { json!(x as i64) } else { num(x) }
}

/// vLLM 0.33's result JSON for `run`, whose summary is `summary`, plus the `servebench` key.
///
/// Key order: `date`, `endpoint_type`, `backend`, `label`, `model_id`, `tokenizer_id`,
/// `num_prompts`, the `--metadata` keys, `request_rate`, `burstiness`, `max_concurrency`, the
/// ramp-up keys, `duration`, `completed`, `failed`, `total_input_tokens`,
/// `total_output_tokens`, `request_throughput`, `request_goodput`, `output_throughput`,
/// `total_token_throughput`, `input_lens`*, `output_lens`*, `ttfts`*, `itls`*, `latencies`,
/// `start_times`*, `queue_times`, `generated_texts`*, `errors`*, `max_output_tokens_per_s`,
/// `max_concurrent_requests`, `rtfx`, `server_queue_times`* and `server_ttfts`* (when the
/// server sent them), the `probe_*` keys (when probes ran and one succeeded), `rps_change_events`
/// (ramp-up), then `mean_`/`median_`/`std_`/`p{p}_{metric}_ms` per section, then
/// `servebench`. Keys marked * are written only with `--save-detailed`.
///
/// A pooling run (a pooling backend's) has vLLM's pooling keys instead, from `duration`:
/// `completed`, `total_input_tokens`, `total_input_sequences`, `request_throughput`,
/// `input_sequence_throughput`, `total_token_throughput`, `input_lens`*, `latencies`,
/// `queue_times`, `errors`*, then the same keys from the probes' on.
///
/// Per-request arrays are in dataset order; a failed request has latency 0.0 and output
/// length 0, as in vLLM.
pub fn result_json(run: &RunResult, summary: &Summary) -> Value {
    let config = &run.config;
    let traffic = &config.traffic;
    let output = &config.output;
    let detailed = output.save_detailed;
    let records = &run.records;
    let mut m = Map::new();

    let backend = config.target.backend.name();
    m.insert("date".into(), json!(run.date));
    m.insert("endpoint_type".into(), json!(backend));
    m.insert("backend".into(), json!(backend));
    m.insert("label".into(), json!(output.label));
    m.insert("model_id".into(), json!(config.target.model_id));
    m.insert("tokenizer_id".into(), json!(config.target.tokenizer));
    m.insert("num_prompts".into(), json!(traffic.num_prompts));
    for (k, v) in &output.metadata {
        m.insert(k.clone(), json!(v));
    }
    let rate = if traffic.request_rate.is_finite() { num(traffic.request_rate) } else { json!("inf") };
    m.insert("request_rate".into(), rate);
    m.insert("burstiness".into(), num(traffic.burstiness));
    m.insert("max_concurrency".into(), json!(traffic.max_concurrency));
    if let Some(ramp) = &traffic.ramp_up {
        m.insert("ramp_up_strategy".into(), json!(ramp.strategy.name()));
        m.insert("ramp_up_start_rps".into(), whole_or_float(ramp.start_rps));
        m.insert("ramp_up_end_rps".into(), whole_or_float(ramp.end_rps));
    }

    let per_request = |f: &dyn Fn(&RequestRecord) -> Value| -> Value { Value::Array(records.iter().map(f).collect()) };
    let latency = |r: &RequestRecord| if r.succeeded() { r.latency_s() } else { 0.0 };
    let input_lens = || per_request(&|r| json!(r.prompt_tokens()));
    let errors = || per_request(&|r| json!(r.failure.as_ref().map_or("", |f| f.message.as_str())));
    m.insert("duration".into(), num(summary.duration_s));
    m.insert("completed".into(), json!(summary.completed));
    if let Some(pooling) = &summary.pooling {
        // vLLM's pooling result: no failed count, no output, no token times.
        m.insert("total_input_tokens".into(), json!(summary.total_input_tokens));
        m.insert("total_input_sequences".into(), json!(pooling.total_input_sequences));
        m.insert("request_throughput".into(), num(summary.request_throughput));
        m.insert("input_sequence_throughput".into(), num(pooling.input_sequence_throughput));
        m.insert("total_token_throughput".into(), opt_num(summary.total_token_throughput));
        if detailed {
            m.insert("input_lens".into(), input_lens());
        }
        m.insert("latencies".into(), per_request(&|r| num(latency(r))));
        m.insert("queue_times".into(), per_request(&|r| num(r.client_queue_s())));
        if detailed {
            m.insert("errors".into(), errors());
        }
        return finish_result(m, run, summary);
    }
    m.insert("failed".into(), json!(summary.failed));
    m.insert("total_input_tokens".into(), json!(summary.total_input_tokens));
    m.insert("total_output_tokens".into(), json!(summary.total_output_tokens));
    m.insert("request_throughput".into(), num(summary.request_throughput));
    m.insert("request_goodput".into(), opt_num(summary.request_goodput));
    m.insert("output_throughput".into(), opt_num(summary.output_throughput));
    m.insert("total_token_throughput".into(), opt_num(summary.total_token_throughput));

    if detailed {
        m.insert("input_lens".into(), input_lens());
        m.insert("output_lens".into(), per_request(&|r| json!(r.output_tokens())));
        m.insert("ttfts".into(), per_request(&|r| num(r.ttft_s())));
        m.insert("itls".into(), per_request(&|r| Value::Array(r.itl_s().map(num).collect())));
    }
    m.insert("latencies".into(), per_request(&|r| num(latency(r))));
    if detailed {
        m.insert("start_times".into(), per_request(&|r| num(r.start_s())));
    }
    m.insert("queue_times".into(), per_request(&|r| num(r.client_queue_s())));
    if detailed {
        m.insert("generated_texts".into(), per_request(&|r| json!(r.text)));
        m.insert("errors".into(), errors());
    }
    m.insert("max_output_tokens_per_s".into(), num(summary.vllm_max_output_tokens_per_s.unwrap_or(0.0)));
    m.insert("max_concurrent_requests".into(), json!(summary.vllm_max_concurrent_requests.unwrap_or(0)));
    m.insert("rtfx".into(), num(0.0));
    let has_server_times = records.iter().any(|r| r.server_queue_s.is_some() || r.server_ttft_s.is_some());
    if detailed && has_server_times {
        m.insert("server_queue_times".into(), per_request(&|r| opt_num(r.server_queue_s)));
        m.insert("server_ttfts".into(), per_request(&|r| opt_num(r.server_ttft_s)));
    }
    finish_result(m, run, summary)
}

/// The keys after the per-request arrays, a generation or a pooling run's: the probes', the
/// ramp-up's events, the percentile sections, the speculative decoder's, then `servebench`.
fn finish_result(mut m: Map<String, Value>, run: &RunResult, summary: &Summary) -> Value {
    if let Some(p) = &summary.probes {
        m.insert("probe_completed".into(), json!(p.completed));
        m.insert("probe_failed".into(), json!(p.failed));
        m.insert("probe_median_e2el_ms".into(), num(p.median_e2el_ms));
        m.insert("probe_p99_e2el_ms".into(), num(p.p99_e2el_ms));
        m.insert("probe_max_e2el_ms".into(), num(p.max_e2el_ms));
    }

    if let Some(events) = ramp::rps_change_events(run) {
        m.insert("rps_change_events".into(), events);
    }

    for stats in &summary.metrics {
        let key = stats.metric.key();
        m.insert(format!("mean_{key}_ms"), num(stats.mean_ms));
        m.insert(format!("median_{key}_ms"), num(stats.median_ms));
        m.insert(format!("std_{key}_ms"), opt_num(stats.std_ms));
        for &(p, v) in &stats.percentiles {
            m.insert(format!("p{}_{key}_ms", p_word(p)), num(v));
        }
    }

    if let Some(spec) = &summary.spec_decode {
        m.insert("spec_decode_acceptance_rate".into(), num(spec.acceptance_rate_pct()));
        m.insert("spec_decode_acceptance_length".into(), num(spec.acceptance_length()));
        m.insert("spec_decode_num_drafts".into(), json!(spec.num_drafts));
        m.insert("spec_decode_draft_tokens".into(), json!(spec.draft_tokens));
        m.insert("spec_decode_accepted_tokens".into(), json!(spec.accepted_tokens));
        let rates: Vec<Value> = spec.per_position_rates().into_iter().map(num).collect();
        m.insert("spec_decode_per_position_acceptance_rates".into(), Value::Array(rates));
    }

    m.insert("servebench".into(), servebench_section(run, summary));
    Value::Object(m)
}

/// servebench's additions: the resolved config, how the run ended, the exact peaks, failures
/// by kind, dispatch lag, the client's health verdict, the steady state and the time slices,
/// the token ledger, the per-turn metrics of a multi-turn run (`turns`, only then), its place
/// in a sharded run (`shard`, only then), the server's telemetry (`server_telemetry`, only when
/// scraped), the speculative decoder's counters as read before and after the run
/// (`spec_decode_window`, where the server has them), the probe requests (`probes`, only with
/// them) and one record per request.
fn servebench_section(run: &RunResult, summary: &Summary) -> Value {
    let lag = summary
        .dispatch_lag
        .map_or(Value::Null, |l| json!({"p50": num(l.p50_ms), "p99": num(l.p99_ms), "max": num(l.max_ms)}));
    let mut section = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "config": serde_json::to_value(&run.config).unwrap_or(Value::Null),
        "started_at": run.started_at,
        "token_source": serde_json::to_value(run.token_source).unwrap_or(Value::Null),
        "interrupted": run.interrupted,
        "not_sent": run.not_sent,
        "notes": run.notes,
        "peak_output_token_throughput": opt_num(summary.peak_output_throughput),
        "peak_concurrent_requests": summary.peak_concurrent_requests,
        "failures_by_kind": serde_json::to_value(&summary.failures_by_kind).unwrap_or(Value::Null),
        "failure_messages": summary.failure_messages,
        "dispatch_lag_ms": lag,
        "health": serde_json::to_value(&summary.health).unwrap_or(Value::Null),
        "steady_state": serde_json::to_value(&summary.steady_state).unwrap_or(Value::Null),
        "slices": serde_json::to_value(&summary.slices).unwrap_or(Value::Null),
        "http": serde_json::to_value(&summary.http).unwrap_or(Value::Null),
    });
    if let Some(m) = section.as_object_mut() {
        if let Some(why) = &run.stopped_by {
            m.insert("stopped_by".into(), json!(why));
        }
        m.insert("token_ledger".into(), serde_json::to_value(Ledger::compute(run)).unwrap_or(Value::Null));
        if let Some(turns) = TurnMetrics::compute(run) {
            m.insert("turns".into(), serde_json::to_value(turns).unwrap_or(Value::Null));
        }
        if let Some(shard) = &run.shard {
            m.insert("shard".into(), serde_json::to_value(shard).unwrap_or(Value::Null));
        }
        if let Some(telemetry) = &summary.server {
            m.insert("server_telemetry".into(), serde_json::to_value(telemetry).unwrap_or(Value::Null));
        }
        if !run.probes.is_empty() {
            m.insert("probes".into(), serde_json::to_value(&run.probes).unwrap_or(Value::Null));
        }
        if let Some(window) = &run.spec_decode {
            m.insert("spec_decode_window".into(), serde_json::to_value(window).unwrap_or(Value::Null));
        }
        m.insert("requests".into(), run.records.iter().map(request_entry).collect());
    }
    section
}

/// One request as servebench records it: times in seconds (`*_at_s` since the run's start,
/// the others since the request was sent), token counts from each source, and the outcome.
fn request_entry(r: &RequestRecord) -> Value {
    let secs = |ns: u64| num(ns as f64 * 1e-9);
    let chunk = |us: Option<&u32>| us.map_or(Value::Null, |&t| num(f64::from(t) * 1e-6));
    let end = if r.end_us > 0 { num(f64::from(r.end_us) * 1e-6) } else { Value::Null };
    json!({
        "index": r.index,
        "planned_at_s": secs(r.planned_ns),
        "arrival_at_s": secs(r.arrival_ns),
        "start_at_s": secs(r.start_ns),
        "ttft_s": chunk(r.chunks_us.first()),
        "latency_s": chunk(r.chunks_us.last()),
        "stream_end_s": end,
        "chunks": r.chunks_us.len(),
        "max_tokens": r.max_tokens,
        "output_tokens": r.output_tokens(),
        "prompt_tokens": r.prompt_tokens(),
        "output_tokens_server": r.usage.completion_tokens,
        "output_tokens_client": r.output_tokens_client,
        "prompt_tokens_server": r.usage.prompt_tokens,
        "prompt_tokens_client": r.prompt_tokens_client,
        "status": r.status,
        "failure": r.failure.as_ref().map(|f| json!({"kind": f.kind.as_str(), "message": f.message})),
        "retried": r.retried,
        "reasoning_chunks": r.reasoning_chunks,
        "first_reasoning_s": chunk(r.first_reasoning_us.as_ref()),
        "first_answer_s": chunk(r.first_answer_us.as_ref()),
        "connect_s": chunk(r.http.connect_us.as_ref()),
        "tls_s": chunk(r.http.tls_us.as_ref()),
        "headers_s": chunk(r.http.headers_us.as_ref()),
        "first_byte_s": chunk(r.http.first_byte_us.as_ref()),
        "turn": r.turn.map(|t| json!({
            "conversation": t.conversation,
            "turn": t.turn,
            "shared_prefix_tokens": t.shared_prefix_tokens,
        })),
    })
}

/// The result file's path as vLLM names it: `--result-filename` if given, else
/// `{label}-{rate}qps{-concurrencyN}-{model}-{date}.json` (or
/// `{label}-ramp-up-{strategy}-{start}qps-{end}qps{-concurrencyN}-{model}-{date}.json`),
/// where the label defaults to the backend, the rate is a Python float (`inf`, `4.0`) and
/// the model is the last `/` segment of `model_id`; joined under `--result-dir` if given.
pub fn result_filename(config: &RunConfig, model_id: &str, date: &str) -> PathBuf {
    let output = &config.output;
    let traffic = &config.traffic;
    let name = match &output.result_filename {
        Some(name) => name.clone(),
        None => {
            let label = output.label.as_deref().filter(|l| !l.is_empty()).unwrap_or(config.target.backend.name());
            let base = model_id.rsplit('/').next().unwrap_or(model_id);
            let mc = traffic.max_concurrency.map(|n| format!("-concurrency{n}")).unwrap_or_default();
            match &traffic.ramp_up {
                Some(r) => format!(
                    "{label}-ramp-up-{}-{}qps-{}qps{mc}-{base}-{date}.json",
                    r.strategy.name(),
                    py_whole_or_float(r.start_rps),
                    py_whole_or_float(r.end_rps)
                ),
                None => format!("{label}-{}qps{mc}-{base}-{date}.json", py_float_repr(traffic.request_rate)),
            }
        }
    };
    match &output.result_dir {
        Some(dir) => Path::new(dir).join(name),
        None => PathBuf::from(name),
    }
}

/// Writing a result file failed (the I/O error is in the message, not repeated as a cause).
#[derive(Debug, Error)]
#[error("could not write the result file {}: {error}; check that its directory is writable", path.display())]
pub struct ResultFileError {
    pub path: PathBuf,
    pub error: io::Error,
}

/// Writes `value` as Python's `json.dump` would, with no trailing newline. With `append`
/// (vLLM's `--append-result`) the document is added to the end of the file, after a `"\n"`
/// when the file is not empty (one JSON document per line); otherwise the file is replaced.
/// A missing parent directory is created, as vLLM does for `--result-dir`.
pub fn write_result(path: &Path, value: &Value, append: bool) -> Result<(), ResultFileError> {
    let fail = |error| ResultFileError { path: path.to_path_buf(), error };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(fail)?;
    }
    let mut file =
        OpenOptions::new().create(true).write(true).append(append).truncate(!append).open(path).map_err(fail)?;
    if append && file.metadata().map_err(fail)?.len() > 0 {
        file.write_all(b"\n").map_err(fail)?;
    }
    file.write_all(dumps(value).as_bytes()).map_err(fail)
}

#[cfg(test)]
mod tests;
