//! Per-request records from result JSON: vLLM's per-request arrays, or servebench's
//! `servebench.requests` list.
//!
//! Times become integers as [`RequestRecord`] keeps them (ns since the run's start, µs since
//! the request was sent), rounded to the nearest unit. Chunk times are the TTFT followed by
//! the running sum of the request's `itls`; without `itls` only the first and last chunk
//! times are known ([`ChunkTimes::FirstLast`]).

use serde_json::{Map, Value};
use servebench_core::record::{Failure, FailureKind, HttpTimes, RequestRecord, TurnRef, Usage};

use crate::runs::{ChunkTimes, RunRecords};

/// Records from vLLM's per-request arrays: `ttfts` is required; `itls`, `latencies`,
/// `start_times`, `queue_times`, `input_lens`, `output_lens`, `errors`, `server_queue_times`
/// and `server_ttfts` are used when present. `Ok(None)` when the file has no `ttfts` (vLLM
/// keeps them only with `--save-detailed`).
///
/// vLLM does not say why a request failed, only the error text: it becomes the failure
/// message, and the kind is read from it (`no_token` for vLLM's "Never received a valid
/// chunk", `timeout` and `connect` for those exceptions, `stream` for other tracebacks,
/// `http_status` for the rest, which vLLM takes from the HTTP reason phrase). Without
/// `errors`, a request with a TTFT and latency of 0 is failed, as vLLM writes them.
pub(crate) fn from_vllm_arrays(m: &Map<String, Value>) -> Result<Option<RunRecords>, String> {
    let Some(ttfts) = m.get("ttfts") else { return Ok(None) };
    let ttfts = times("ttfts", ttfts.as_array().ok_or("`ttfts` is not a list")?)?;
    let n = ttfts.len();
    let array = |key: &'static str| -> Result<Option<&Vec<Value>>, String> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) if a.len() == n => Ok(Some(a)),
            Some(Value::Array(a)) => Err(format!("`{key}` has {} entries but `ttfts` has {n}", a.len())),
            Some(_) => Err(format!("`{key}` is not a list")),
        }
    };
    let opt_times = |key: &'static str| -> Result<Option<Vec<Option<f64>>>, String> {
        array(key)?.map(|a| times(key, a)).transpose()
    };
    let itls = array("itls")?;
    let latencies = opt_times("latencies")?;
    let starts = opt_times("start_times")?;
    let queues = opt_times("queue_times")?;
    let server_queue = opt_times("server_queue_times")?;
    let server_ttft = opt_times("server_ttfts")?;
    let counts = |key: &'static str| -> Result<Option<Vec<Option<u32>>>, String> {
        array(key)?.map(|a| a.iter().map(|v| count(key, v)).collect()).transpose()
    };
    let input_lens = counts("input_lens")?;
    let output_lens = counts("output_lens")?;
    let errors = array("errors")?;

    let origin = starts.as_ref().and_then(|s| s.iter().flatten().copied().reduce(f64::min)).unwrap_or(0.0);
    let mut records = Vec::with_capacity(n);
    for i in 0..n {
        let ttft = ttfts[i];
        let latency = latencies.as_ref().and_then(|l| l[i]);
        let error = errors.and_then(|e| e[i].as_str()).unwrap_or("");
        let failed = match errors {
            Some(_) => !error.is_empty(),
            None => ttft.unwrap_or(0.0) == 0.0 && latency.unwrap_or(0.0) == 0.0,
        };
        let gaps = match itls {
            Some(a) => Some(times("itls", list(&a[i])?).map_err(|e| format!("request {i}: {e}"))?),
            None => None,
        };
        let chunks_us = chunk_times(ttft.filter(|&t| t > 0.0), gaps.as_deref(), latency)
            .ok_or_else(|| format!("request {i} has a time beyond 71 minutes or below zero"))?;
        let start_ns = starts.as_ref().and_then(|s| s[i]).map_or(0, |t| to_ns(t - origin));
        let queue_ns = queues.as_ref().and_then(|q| q[i]).map_or(0, to_ns);
        let end_us = chunks_us.last().copied().unwrap_or(0);
        records.push(RequestRecord {
            index: i as u32,
            planned_ns: start_ns.saturating_sub(queue_ns),
            arrival_ns: start_ns.saturating_sub(queue_ns),
            start_ns,
            chunks_us,
            end_us,
            usage: Usage {
                prompt_tokens: input_lens.as_ref().and_then(|c| c[i]),
                completion_tokens: output_lens.as_ref().and_then(|c| c[i]).filter(|_| !failed),
            },
            status: if failed { 0 } else { 200 },
            failure: failed.then(|| Failure { kind: failure_kind(error), message: error.to_string() }),
            server_queue_s: server_queue.as_ref().and_then(|s| s[i]),
            server_ttft_s: server_ttft.as_ref().and_then(|s| s[i]),
            ..RequestRecord::default()
        });
    }
    let chunk_times = if itls.is_some() { ChunkTimes::All } else { ChunkTimes::FirstLast };
    Ok(Some(RunRecords { chunk_times, records }))
}

/// Records from servebench's own `servebench.requests`, with every chunk time when the file
/// also has `itls` (`--save-detailed`).
pub(crate) fn from_servebench(m: &Map<String, Value>, ours: &Map<String, Value>) -> Result<Option<RunRecords>, String> {
    let Some(requests) = ours.get("requests").and_then(Value::as_array) else { return Ok(None) };
    let n = requests.len();
    let itls = match m.get("itls") {
        Some(Value::Array(a)) if a.len() == n => Some(a),
        Some(Value::Array(a)) => return Err(format!("`itls` has {} entries but there are {n} requests", a.len())),
        _ => None,
    };
    let server_times = |key: &'static str| -> Result<Option<Vec<Option<f64>>>, String> {
        match m.get(key) {
            Some(Value::Array(a)) if a.len() == n => times(key, a).map(Some),
            _ => Ok(None),
        }
    };
    let server_queue = server_times("server_queue_times")?;
    let server_ttft = server_times("server_ttfts")?;
    let mut records = Vec::with_capacity(n);
    for (i, r) in requests.iter().enumerate() {
        let bad = |what: &str| format!("request {i}: {what}");
        let r = r.as_object().ok_or_else(|| bad("not an object"))?;
        let secs = |k: &str| r.get(k).and_then(Value::as_f64).filter(|x| x.is_finite() && *x >= 0.0);
        let u32_at = |k: &str| r.get(k).and_then(Value::as_u64).and_then(|x| u32::try_from(x).ok());
        let gaps = match itls {
            Some(a) => Some(list(&a[i]).and_then(|l| times("itls", l)).map_err(|e| bad(&e))?),
            None => None,
        };
        // The two times every statistic rests on: present, they must be times.
        let strict = |k: &str| match r.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => secs(k).map(Some).ok_or_else(|| bad(&format!("`{k}` holds {v}, not a time of 0 s or more"))),
        };
        let chunks_us = chunk_times(strict("ttft_s")?, gaps.as_deref(), strict("latency_s")?)
            .ok_or_else(|| bad("a time beyond 71 minutes"))?;
        let failure = match r.get("failure").filter(|f| !f.is_null()) {
            Some(f) => Some(Failure {
                kind: serde_json::from_value(f.get("kind").cloned().unwrap_or(Value::Null))
                    .map_err(|_| bad("an unknown failure kind"))?,
                message: f.get("message").and_then(Value::as_str).unwrap_or_default().to_string(),
            }),
            None => None,
        };
        let turn = r.get("turn").and_then(Value::as_object).and_then(|t| {
            let get = |k: &str| t.get(k).and_then(Value::as_u64).and_then(|x| u32::try_from(x).ok());
            Some(TurnRef {
                conversation: get("conversation")?,
                turn: get("turn")?,
                shared_prefix_tokens: get("shared_prefix_tokens")?,
            })
        });
        records.push(RequestRecord {
            index: u32_at("index").unwrap_or(i as u32),
            planned_ns: secs("planned_at_s").map_or(0, to_ns),
            arrival_ns: secs("arrival_at_s").map_or(0, to_ns),
            start_ns: secs("start_at_s").map_or(0, to_ns),
            chunks_us,
            end_us: secs("stream_end_s").and_then(to_us).unwrap_or(0),
            max_tokens: u32_at("max_tokens").unwrap_or(0),
            prompt_tokens_client: u32_at("prompt_tokens_client"),
            usage: Usage {
                prompt_tokens: u32_at("prompt_tokens_server"),
                completion_tokens: u32_at("output_tokens_server"),
            },
            output_tokens_client: u32_at("output_tokens_client"),
            text: String::new(),
            status: u32_at("status").and_then(|s| u16::try_from(s).ok()).unwrap_or(0),
            failure,
            retried: r.get("retried").and_then(Value::as_bool).unwrap_or(false),
            turn,
            reasoning_chunks: u32_at("reasoning_chunks").unwrap_or(0),
            first_reasoning_us: secs("first_reasoning_s").and_then(to_us),
            first_answer_us: secs("first_answer_s").and_then(to_us),
            server_queue_s: server_queue.as_ref().and_then(|s| s[i]),
            server_ttft_s: server_ttft.as_ref().and_then(|s| s[i]),
            http: HttpTimes {
                connect_us: secs("connect_s").and_then(to_us),
                tls_us: secs("tls_s").and_then(to_us),
                headers_us: secs("headers_s").and_then(to_us),
                first_byte_us: secs("first_byte_s").and_then(to_us),
            },
        });
    }
    let chunk_times = if itls.is_some() { ChunkTimes::All } else { ChunkTimes::FirstLast };
    Ok(Some(RunRecords { chunk_times, records }))
}

/// Chunk times in µs: the TTFT, then the running sum of `gaps`; without gaps, the TTFT and
/// the latency when it is later. Empty without a TTFT. `None` when a time does not fit.
fn chunk_times(ttft: Option<f64>, gaps: Option<&[Option<f64>]>, latency: Option<f64>) -> Option<Vec<u32>> {
    let Some(ttft) = ttft else { return Some(Vec::new()) };
    let mut out = vec![to_us(ttft)?];
    match gaps {
        Some(gaps) => {
            let mut t = ttft;
            for g in gaps {
                t += g.unwrap_or(0.0);
                out.push(to_us(t)?);
            }
        }
        None => {
            if let Some(last) = latency.and_then(to_us).filter(|&l| l > out[0]) {
                out.push(last);
            }
        }
    }
    Some(out)
}

/// One request's `itls` entry: a list.
fn list(v: &Value) -> Result<&[Value], String> {
    v.as_array().map(Vec::as_slice).ok_or_else(|| format!("an `itls` entry is {v}, not a list"))
}

/// A list of times in seconds (null entries kept as `None`).
fn times(key: &str, a: &[Value]) -> Result<Vec<Option<f64>>, String> {
    a.iter()
        .map(|x| match x {
            Value::Null => Ok(None),
            x => x
                .as_f64()
                .filter(|t| t.is_finite() && *t >= 0.0)
                .map(Some)
                .ok_or_else(|| format!("`{key}` holds {x}, which is not a time")),
        })
        .collect()
}

fn count(key: &str, v: &Value) -> Result<Option<u32>, String> {
    match v {
        Value::Null => Ok(None),
        v => v
            .as_u64()
            .and_then(|x| u32::try_from(x).ok())
            .map(Some)
            .ok_or_else(|| format!("`{key}` holds {v}, which is not a token count")),
    }
}

fn to_ns(seconds: f64) -> u64 {
    (seconds * 1e9).round().max(0.0) as u64
}

fn to_us(seconds: f64) -> Option<u32> {
    let us = (seconds * 1e6).round();
    (0.0..=f64::from(u32::MAX)).contains(&us).then_some(us as u32)
}

/// The failure kind that vLLM's error text tells (see [`from_vllm_arrays`]).
fn failure_kind(error: &str) -> FailureKind {
    if error.contains("Never received a valid chunk") {
        FailureKind::NoToken
    } else if error.contains("TimeoutError") {
        FailureKind::Timeout
    } else if error.contains("ClientConnectorError") || error.contains("ConnectionRefusedError") {
        FailureKind::Connect
    } else if error.contains("Traceback") {
        FailureKind::Stream
    } else {
        FailureKind::HttpStatus
    }
}
