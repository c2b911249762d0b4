//! One run's requests as a trace in the Trace Event Format (JSON), which Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open: a row per concurrency slot, each request a
//! slice from its send to its end with its wait for the first token and its decode inside; the
//! waits for a slot (unless every request arrived at once) and the client's late dispatches (of
//! 1 ms or more) on rows of their own; counters of the requests in flight, waiting, and (with
//! every chunk time kept) token chunks a second; and where the server's metrics were scraped,
//! its gauges (running and waiting requests, KV cache, GPU) and its counters' rates (tokens a
//! second) as counters of their own, one group per source, on the same clock.
//!
//! Rows are packed greedily by start time, so a run never shows more rows than it had
//! requests at once. Times are µs since the run started.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};

use serde_json::{Map, Value, json};
use servebench_core::record::RequestRecord;
use servebench_core::telemetry::{ServerTelemetry, Signal, Source};

use crate::runs::{ChunkTimes, RunRecords};

/// The trace's processes (Perfetto's track groups).
const REQUESTS_PID: u32 = 1;
const WAITS_PID: u32 = 2;
const LATE_PID: u32 = 3;
/// The first server source's process; the next sources follow.
const SERVER_PID: u32 = 4;
/// Waits for a slot and late dispatches shorter than this get no slice (the counters keep
/// them): at a few µs they are the client's ordinary work, and would bury the ones that matter.
const MIN_SLICE_NS: u64 = 1_000_000;
/// The width of a bin of the token-chunk counter, µs.
const CHUNK_BIN_US: u64 = 100_000;

/// What the trace says about the run besides its records.
#[derive(Clone, Debug, Default)]
pub struct TraceContext {
    /// The process name shown above the request rows, e.g. `run 7: Qwen/Qwen3-8B`.
    pub title: String,
    /// The run's `x-request-id` prefix: each request's id is it followed by its index.
    pub request_id_prefix: Option<String>,
    /// What the server's metrics said over the run, when they were scraped.
    pub server: Option<ServerTelemetry>,
}

/// Assigns each interval `[begin, end)` a row: the lowest row free at its begin, taking the
/// intervals by begin time. Returns one row per interval, in the given order.
pub fn pack_rows(intervals: &[(u64, u64)]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..intervals.len()).collect();
    order.sort_by_key(|&i| (intervals[i].0, i));
    let mut busy: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut free: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
    let mut rows = vec![0; intervals.len()];
    let mut opened = 0u32;
    for i in order {
        let (begin, end) = intervals[i];
        while let Some(&Reverse((until, row))) = busy.peek() {
            if until > begin {
                break;
            }
            busy.pop();
            free.push(Reverse(row));
        }
        let row = free.pop().map_or_else(
            || {
                opened += 1;
                opened - 1
            },
            |Reverse(r)| r,
        );
        rows[i] = row;
        busy.push(Reverse((end.max(begin), row)));
    }
    rows
}

/// µs since the run's start, as the trace writes times.
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// When a request sent ended, ns since the run's start.
fn end_ns(r: &RequestRecord) -> u64 {
    r.start_ns + u64::from(r.last_heard_us()) * 1000
}

/// A complete slice (`ph: X`).
fn slice(name: &str, cat: &str, pid: u32, row: u32, from_ns: u64, to_ns: u64, args: Option<Value>) -> Value {
    let mut e = json!({
        "name": name, "cat": cat, "ph": "X", "pid": pid, "tid": row + 1,
        "ts": us(from_ns), "dur": us(to_ns.saturating_sub(from_ns)),
    });
    if let Some(args) = args {
        e["args"] = args;
    }
    e
}

/// The metadata events naming a process and its rows.
fn names(pid: u32, name: &str, rows: u32, row_name: &str) -> Vec<Value> {
    let mut out = vec![
        json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}),
        json!({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}),
    ];
    for row in 0..rows {
        out.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": row + 1,
            "args": {"name": format!("{row_name} {}", row + 1)}}));
    }
    out
}

/// What a request's slice carries: its index and id, tokens, first token and outcome.
fn request_args(r: &RequestRecord, ctx: &TraceContext) -> Value {
    let mut a = Map::new();
    a.insert("index".into(), json!(r.index));
    if let Some(prefix) = &ctx.request_id_prefix {
        a.insert("x_request_id".into(), json!(format!("{prefix}{}", r.index)));
    }
    a.insert("prompt_tokens".into(), json!(r.prompt_tokens()));
    a.insert("output_tokens".into(), json!(r.output_tokens()));
    a.insert("token_chunks".into(), json!(r.chunks_us.len()));
    if !r.chunks_us.is_empty() {
        a.insert("ttft_ms".into(), json!(f64::from(r.chunks_us[0]) / 1000.0));
    }
    a.insert("status".into(), json!(r.status));
    if let Some(f) = &r.failure {
        a.insert("failure".into(), json!(format!("{}: {}", f.kind.as_str(), f.message)));
    }
    if let Some(t) = &r.turn {
        a.insert("conversation".into(), json!(t.conversation));
        a.insert("turn".into(), json!(t.turn));
    }
    Value::Object(a)
}

/// A counter's events from +1/-1 changes at times (ns): one event per distinct time.
fn counter(name: &str, mut changes: Vec<(u64, i64)>) -> Vec<Value> {
    changes.sort_unstable();
    let mut out: Vec<Value> = Vec::new();
    let mut level = 0i64;
    for (i, &(t, d)) in changes.iter().enumerate() {
        level += d;
        if changes.get(i + 1).is_some_and(|&(next, _)| next == t) {
            continue;
        }
        out.push(count(REQUESTS_PID, name, us(t), level));
    }
    out
}

/// Token chunks a second, in bins of [`CHUNK_BIN_US`], over the requests sent.
fn chunk_rate(sent: &[&RequestRecord]) -> Vec<Value> {
    let mut bins: Vec<u64> = Vec::new();
    for r in sent {
        for &c in &r.chunks_us {
            let bin = ((r.start_ns / 1000 + u64::from(c)) / CHUNK_BIN_US) as usize;
            if bins.len() <= bin {
                bins.resize(bin + 1, 0);
            }
            bins[bin] += 1;
        }
    }
    let per_s = 1e6 / CHUNK_BIN_US as f64;
    let name = "token chunks/s";
    let mut out: Vec<Value> = bins
        .iter()
        .enumerate()
        .map(|(i, &n)| count(REQUESTS_PID, name, (i as u64 * CHUNK_BIN_US) as f64, n as f64 * per_s))
        .collect();
    if !bins.is_empty() {
        out.push(count(REQUESTS_PID, name, (bins.len() as u64 * CHUNK_BIN_US) as f64, 0.0));
    }
    out
}

/// The sum and count counters whose ratio over each scrape interval is a mean the trace
/// shows, ms (the sums alone are not worth a counter).
const MEANS: [(Signal, Signal, &str); 3] = [
    (Signal::TtftSum, Signal::TtftCount, "server_mean_ttft_ms"),
    (Signal::QueueTimeSum, Signal::QueueTimeCount, "server_mean_queue_ms"),
    (Signal::PrefillTimeSum, Signal::PrefillTimeCount, "server_mean_prefill_ms"),
];

/// A trace time, µs, from seconds since the run's start.
fn at_s(t: f64) -> f64 {
    (t.max(0.0) * 1e9).round() / 1000.0
}

/// A counter event of process `pid` at `ts` µs.
fn count(pid: u32, name: &str, ts: f64, value: impl Into<Value>) -> Value {
    json!({"name": name, "ph": "C", "pid": pid, "ts": ts, "args": {name: value.into()}})
}

/// One source's series as counters: gauges as they were read, counters as their rate between
/// scrapes (`_per_s`; a drop, a server restart, gives no point), and the server's own mean
/// TTFT, queue and prefill time over each interval (a prefill sum without its count, as
/// llama.cpp gives it, is left out). Series times are seconds since the run's start.
fn source_counters(pid: u32, source: &Source) -> Vec<Value> {
    let mut out = Vec::new();
    let is_mean_part = |s: Signal| MEANS.iter().any(|&(sum, n, _)| s == sum || s == n);
    for series in &source.series {
        let key = serde_json::to_value(series.signal).ok().and_then(|v| v.as_str().map(str::to_string));
        let Some(key) = key else { continue };
        if is_mean_part(series.signal) {
            continue;
        }
        if series.signal.is_counter() {
            let name = format!("{key}_per_s");
            for w in series.points.windows(2) {
                let (dt, dv) = (w[1][0] - w[0][0], w[1][1] - w[0][1]);
                if dt > 0.0 && dv >= 0.0 {
                    out.push(count(pid, &name, at_s(w[1][0]), dv / dt));
                }
            }
        } else {
            out.extend(series.points.iter().map(|p| count(pid, &key, at_s(p[0]), p[1])));
        }
    }
    for (sum, n, name) in MEANS {
        let (Some(sum), Some(n)) = (source.series(sum), source.series(n)) else { continue };
        for (s, c) in sum.points.windows(2).zip(n.points.windows(2)) {
            let (ds, dc) = (s[1][1] - s[0][1], c[1][1] - c[0][1]);
            if s[1][0] == c[1][0] && dc > 0.0 && ds >= 0.0 {
                out.push(count(pid, name, at_s(s[1][0]), ds / dc * 1000.0));
            }
        }
    }
    out
}

/// Every scraped source as a process of counters.
fn server_counters(server: &ServerTelemetry) -> Vec<Value> {
    let mut out = Vec::new();
    for (i, source) in server.sources.iter().enumerate() {
        let pid = SERVER_PID + i as u32;
        let engine = source.engine.as_deref().map(|e| format!("{e} ")).unwrap_or_default();
        let name = format!("server: {engine}metrics at {}", source.url);
        out.extend(names(pid, &name, 0, ""));
        out.extend(source_counters(pid, source));
    }
    out
}

/// Every event of the trace, metadata first.
pub fn trace_events(records: &RunRecords, ctx: &TraceContext) -> Vec<Value> {
    let sent: Vec<&RequestRecord> = records.records.iter().filter(|r| !r.never_sent()).collect();
    let spans: Vec<(u64, u64)> = sent.iter().map(|r| (r.start_ns, end_ns(r))).collect();
    let rows = pack_rows(&spans);
    let waiting: Vec<&RequestRecord> = sent.iter().copied().filter(|r| r.start_ns > r.arrival_ns).collect();
    // When every request arrived at the start (a closed loop), each waits from there for a
    // slot: the counter says as much as a row per queued request would.
    let closed_loop = sent.iter().all(|r| r.arrival_ns == sent[0].arrival_ns);
    let long_waits: Vec<&RequestRecord> =
        waiting.iter().copied().filter(|r| !closed_loop && r.start_ns - r.arrival_ns >= MIN_SLICE_NS).collect();
    let wait_rows = pack_rows(&long_waits.iter().map(|r| (r.arrival_ns, r.start_ns)).collect::<Vec<_>>());
    let late: Vec<&RequestRecord> =
        sent.iter().copied().filter(|r| r.arrival_ns >= r.planned_ns.saturating_add(MIN_SLICE_NS)).collect();
    let late_rows = pack_rows(&late.iter().map(|r| (r.planned_ns, r.arrival_ns)).collect::<Vec<_>>());

    let count = |rows: &[u32]| rows.iter().max().map_or(0, |&m| m + 1);
    let mut events = names(REQUESTS_PID, &ctx.title, count(&rows), "slot");
    if !long_waits.is_empty() {
        events.extend(names(WAITS_PID, "waiting for a concurrency slot", count(&wait_rows), "wait"));
    }
    if !late.is_empty() {
        events.extend(names(LATE_PID, "sent late (dispatch lag)", count(&late_rows), "lag"));
    }
    for ((r, &(from, to)), &row) in sent.iter().zip(&spans).zip(&rows) {
        let failed = !r.succeeded();
        let name = if failed { format!("request {} failed", r.index) } else { format!("request {}", r.index) };
        let cat = if failed { "failed" } else { "request" };
        events.push(slice(&name, cat, REQUESTS_PID, row, from, to, Some(request_args(r, ctx))));
        if let Some(&first) = r.chunks_us.first() {
            let first_ns = from + u64::from(first) * 1000;
            events.push(slice("until first token", "ttft", REQUESTS_PID, row, from, first_ns, None));
            events.push(slice("decode", "decode", REQUESTS_PID, row, first_ns, to, None));
        }
    }
    for (r, &row) in long_waits.iter().zip(&wait_rows) {
        let name = format!("request {} waits", r.index);
        events.push(slice(&name, "wait", WAITS_PID, row, r.arrival_ns, r.start_ns, None));
    }
    for (r, &row) in late.iter().zip(&late_rows) {
        let name = format!("request {} late", r.index);
        events.push(slice(&name, "lag", LATE_PID, row, r.planned_ns, r.arrival_ns, None));
    }
    events.extend(counter("in flight", spans.iter().flat_map(|&(a, b)| [(a, 1), (b, -1)]).collect()));
    if !waiting.is_empty() {
        let changes = waiting.iter().flat_map(|r| [(r.arrival_ns, 1), (r.start_ns, -1)]).collect();
        events.extend(counter("waiting", changes));
    }
    if records.chunk_times == ChunkTimes::All {
        events.extend(chunk_rate(&sent));
    }
    if let Some(server) = &ctx.server {
        events.extend(server_counters(server));
    }
    events
}

/// Writes the trace: a JSON object whose `traceEvents` holds one event per line.
pub fn write_requests_trace(records: &RunRecords, ctx: &TraceContext, w: &mut dyn Write) -> io::Result<()> {
    w.write_all(b"{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n")?;
    for (i, e) in trace_events(records, ctx).iter().enumerate() {
        if i > 0 {
            w.write_all(b",\n")?;
        }
        serde_json::to_writer(&mut *w, e)?;
    }
    w.write_all(b"\n]}\n")
}

#[cfg(test)]
mod tests;
