//! Reads a vLLM result JSON back into a [`Summary`]: one servebench wrote, or one vLLM wrote
//! itself, of any 0.x version. Keys a version lacks become `None`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use thiserror::Error;

use crate::config::Metric;
use crate::metrics::{DispatchLag, MAX_FAILURE_MESSAGES, MetricStats, PoolingFigures, ProbeStats, Summary};
use crate::record::FailureKind;
use crate::telemetry::SpecDecodeCounts;
use crate::vllm::json::scalar::whole_number;

/// Why a JSON value is not a readable vLLM result.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum VllmJsonError {
    #[error("a vLLM result is a JSON object, but this is {0}; pass one document (one line of an appended file)")]
    NotAnObject(&'static str),
    #[error(
        "the result lacks {0:?}; is this a `vllm bench serve --save-result` file? Sweep summaries are not supported"
    )]
    Missing(&'static str),
    #[error("{key:?} should be {expected}; the file may be damaged")]
    WrongType { key: String, expected: &'static str },
}

/// Builds a summary from a vLLM result JSON.
///
/// `completed`, `duration`, `total_input_tokens` and `request_throughput` are required;
/// everything else is read when present. vLLM's `max_output_tokens_per_s` and
/// `max_concurrent_requests` become the `vllm_*` peaks; the exact peaks, failure counts,
/// failure messages and dispatch lag come from the `servebench` key when it is there. For a
/// file vLLM wrote with `--save-detailed`, the failure messages are the first ten non-empty
/// entries of `errors`.
pub fn summary_from_vllm_json(value: &Value) -> Result<Summary, VllmJsonError> {
    let m = value.as_object().ok_or(VllmJsonError::NotAnObject(kind(value)))?;
    let ours = m.get("servebench").and_then(Value::as_object);
    let required_f64 = |key: &'static str| f64_at(m, key)?.ok_or(VllmJsonError::Missing(key));
    let required_u64 = |key: &'static str| u64_at(m, key)?.ok_or(VllmJsonError::Missing(key));

    let request_rate = match m.get("request_rate") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "inf" || s == "Infinity" => Some(f64::INFINITY),
        Some(v) => Some(v.as_f64().ok_or_else(|| wrong("request_rate", "a number or \"inf\""))?),
    };

    let mut failure_messages: Vec<String> = Vec::new();
    if let Some(list) = ours.and_then(|o| o.get("failure_messages")) {
        failure_messages = serde_json::from_value(list.clone())
            .map_err(|_| wrong("servebench.failure_messages", "a list of strings"))?;
    } else if let Some(Value::Array(errors)) = m.get("errors") {
        failure_messages = errors
            .iter()
            .filter_map(Value::as_str)
            .filter(|e| !e.is_empty())
            .take(MAX_FAILURE_MESSAGES)
            .map(str::to_string)
            .collect();
    }

    let (mut peak_out, mut peak_conc) = (None, None);
    let mut failures_by_kind = BTreeMap::new();
    let mut dispatch_lag = None;
    let (mut health, mut steady_state, mut slices, mut server, mut http) = (None, None, Vec::new(), None, None);
    if let Some(o) = ours {
        if let Some(v) = o.get("http").filter(|v| !v.is_null()) {
            http = Some(
                serde_json::from_value(v.clone())
                    .map_err(|_| wrong("servebench.http", "an HTTP timing breakdown as servebench writes it"))?,
            );
        }
        if let Some(v) = o.get("server_telemetry").filter(|v| !v.is_null()) {
            server = Some(
                serde_json::from_value(v.clone())
                    .map_err(|_| wrong("servebench.server_telemetry", "server telemetry as servebench writes it"))?,
            );
        }
        if let Some(v) = o.get("steady_state").filter(|v| !v.is_null()) {
            steady_state = Some(
                serde_json::from_value(v.clone())
                    .map_err(|_| wrong("servebench.steady_state", "a steady-state object as servebench writes it"))?,
            );
        }
        if let Some(v) = o.get("slices").filter(|v| !v.is_null()) {
            slices = serde_json::from_value(v.clone())
                .map_err(|_| wrong("servebench.slices", "a list of time slices as servebench writes them"))?;
        }
        if let Some(h) = o.get("health").filter(|v| !v.is_null()) {
            health = Some(
                serde_json::from_value(h.clone())
                    .map_err(|_| wrong("servebench.health", "a health object as servebench writes it"))?,
            );
        }
        peak_out = f64_at(o, "peak_output_token_throughput")?;
        peak_conc = u64_at(o, "peak_concurrent_requests")?;
        if let Some(f) = o.get("failures_by_kind").filter(|v| !v.is_null()) {
            failures_by_kind = serde_json::from_value::<BTreeMap<FailureKind, u64>>(f.clone())
                .map_err(|_| wrong("servebench.failures_by_kind", "a map of failure kinds to counts"))?;
        }
        if let Some(l) = o.get("dispatch_lag_ms").and_then(Value::as_object) {
            let get = |k: &'static str| f64_at(l, k)?.ok_or(VllmJsonError::Missing(k));
            dispatch_lag = Some(DispatchLag { p50_ms: get("p50")?, p99_ms: get("p99")?, max_ms: get("max")? });
        }
    }

    // vLLM's pooling result has no `failed`; servebench's section counts them by kind.
    let failed = match u64_at(m, "failed")? {
        Some(n) => Some(n),
        None if ours.is_some_and(|o| o.contains_key("failures_by_kind")) => Some(failures_by_kind.values().sum()),
        None => None,
    };
    Ok(Summary {
        completed: required_u64("completed")?,
        failed,
        max_concurrency: u64_at(m, "max_concurrency")?,
        request_rate,
        duration_s: required_f64("duration")?,
        total_input_tokens: required_u64("total_input_tokens")?,
        total_output_tokens: u64_at(m, "total_output_tokens")?,
        request_throughput: required_f64("request_throughput")?,
        request_goodput: f64_at(m, "request_goodput")?,
        output_throughput: f64_at(m, "output_throughput")?,
        total_token_throughput: f64_at(m, "total_token_throughput")?,
        pooling: match f64_at(m, "input_sequence_throughput")? {
            Some(input_sequence_throughput) => Some(PoolingFigures {
                total_input_sequences: u64_at(m, "total_input_sequences")?,
                input_sequence_throughput,
            }),
            None => None,
        },
        peak_output_throughput: peak_out,
        peak_concurrent_requests: peak_conc,
        vllm_max_output_tokens_per_s: f64_at(m, "max_output_tokens_per_s")?,
        vllm_max_concurrent_requests: u64_at(m, "max_concurrent_requests")?,
        metrics: metrics(m)?,
        failures_by_kind,
        failure_messages,
        dispatch_lag,
        health,
        steady_state,
        slices,
        server,
        http,
        spec_decode: spec_decode(m)?,
        probes: probes(m)?,
        gpus: saved_target(ours).and_then(gpus),
        gpu_hour_cost: saved_target(ours)
            .and_then(|t| t.get("gpu_hour_cost")?.as_f64())
            .filter(|&c| crate::metrics::is_gpu_hour_cost(c)),
    })
}

/// The target of servebench's saved config (`servebench.config.target`), where the file has one.
fn saved_target(ours: Option<&Map<String, Value>>) -> Option<&Value> {
    ours?.get("config")?.get("target")
}

/// The GPUs that served the run, as the saved target says (`--gpus`, or the simulator's
/// deployment); a file's own `gpus` label is read by the importer.
fn gpus(target: &Value) -> Option<u32> {
    u32::try_from(whole_number(target.get("gpus")?)?).ok().filter(|&n| n >= 1)
}

/// vLLM's `spec_decode_*` keys, back as the counts they were made from (each position's from
/// its rate over the drafts); `None` without them.
fn spec_decode(m: &Map<String, Value>) -> Result<Option<SpecDecodeCounts>, VllmJsonError> {
    let (Some(num_drafts), Some(draft_tokens), Some(accepted_tokens)) = (
        u64_at(m, "spec_decode_num_drafts")?,
        u64_at(m, "spec_decode_draft_tokens")?,
        u64_at(m, "spec_decode_accepted_tokens")?,
    ) else {
        return Ok(None);
    };
    let rates = m.get("spec_decode_per_position_acceptance_rates").and_then(Value::as_array);
    let accepted_per_position = rates
        .map(|r| r.iter().filter_map(Value::as_f64).map(|p| (p * num_drafts as f64).round() as u64).collect())
        .unwrap_or_default();
    Ok(Some(SpecDecodeCounts { num_drafts, draft_tokens, accepted_tokens, accepted_per_position }))
}

/// vLLM's probe statistics (`probe_completed`, ..., `probe_max_e2el_ms`), when the file has
/// them all.
fn probes(m: &Map<String, Value>) -> Result<Option<ProbeStats>, VllmJsonError> {
    let (Some(completed), Some(failed), Some(median_e2el_ms), Some(p99_e2el_ms), Some(max_e2el_ms)) = (
        u64_at(m, "probe_completed")?,
        u64_at(m, "probe_failed")?,
        f64_at(m, "probe_median_e2el_ms")?,
        f64_at(m, "probe_p99_e2el_ms")?,
        f64_at(m, "probe_max_e2el_ms")?,
    ) else {
        return Ok(None);
    };
    Ok(Some(ProbeStats { completed, failed, median_e2el_ms, p99_e2el_ms, max_e2el_ms }))
}

/// The metric sections present: `mean_{m}_ms` and `median_{m}_ms`, with `std_{m}_ms` and
/// every `p{word}_{m}_ms` key in file order.
fn metrics(m: &Map<String, Value>) -> Result<Vec<MetricStats>, VllmJsonError> {
    let mut out = Vec::new();
    for metric in Metric::ALL {
        let key = metric.key();
        let Some(mean_ms) = f64_at(m, &format!("mean_{key}_ms"))? else {
            continue;
        };
        let median_key = format!("median_{key}_ms");
        let median_ms = f64_at(m, &median_key)?.ok_or_else(|| wrong(&median_key, "a number"))?;
        let suffix = format!("_{key}_ms");
        let mut percentiles = Vec::new();
        for (k, v) in m {
            let word = k.strip_prefix('p').and_then(|k| k.strip_suffix(suffix.as_str()));
            let Some(p) = word.and_then(|w| w.parse::<f64>().ok()).filter(|p| p.is_finite()) else {
                continue;
            };
            if !(0.0..=100.0).contains(&p) {
                return Err(wrong(k, "named for a percentile from 0 to 100"));
            }
            percentiles.push((p, v.as_f64().ok_or_else(|| wrong(k, "a number"))?));
        }
        out.push(MetricStats { metric, mean_ms, median_ms, std_ms: f64_at(m, &format!("std_{key}_ms"))?, percentiles });
    }
    Ok(out)
}

fn wrong(key: &str, expected: &'static str) -> VllmJsonError {
    VllmJsonError::WrongType { key: key.to_string(), expected }
}

/// A number at `key`; `None` when absent or null.
fn f64_at(m: &Map<String, Value>, key: &str) -> Result<Option<f64>, VllmJsonError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_f64().map(Some).ok_or_else(|| wrong(key, "a number")),
    }
}

/// A count at `key` (an integer, or a float with a whole value); `None` when absent or null.
fn u64_at(m: &Map<String, Value>, key: &str) -> Result<Option<u64>, VllmJsonError> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => whole_number(v).map(Some).ok_or_else(|| wrong(key, "a whole number")),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
