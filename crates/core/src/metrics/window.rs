//! The run seen through windows of time: its steady state, and fixed-length time slices.
//!
//! **Steady state** is the span in which the load the user asked for was fully in force, so
//! its figures leave out the ramp (in flight still growing) and the drain (nothing left to
//! send):
//! - with `--max-concurrency C`: from the moment `C` requests were first in flight to the
//!   last send, or on to the next end if `C` were still in flight at the last send (from then
//!   on nothing waits for the slot it frees); with `C = 1` that is the whole run, which then has
//!   no separate steady state;
//! - without a cap, at a finite request rate without ramp-up: from the first response's end
//!   (until then requests only pile up) to the last send;
//! - otherwise (everything sent at once, or a ramping rate) there is none.
//!
//! Nor is there one where fewer requests were sent and ended inside the window than were in
//! flight in it on average (two waves of a cap's worth of prompts: the load never turned over
//! once, and the few requests wholly inside are stragglers of the edges).
//!
//! Its [`Summary`] takes latencies from the requests sent and ended inside the window, and
//! throughputs from what happened inside it: requests that ended in it, output tokens whose
//! chunks arrived in it (each chunk carrying its share of its request's tokens, as the peak
//! does) and prompt tokens of requests sent in it, over the window's length.
//!
//! **Time slices** (`--slice-seconds N`) cut the run into `[kN, (k+1)N)` from its start; each
//! [`Slice`] has the same throughputs, TTFT and ITL percentiles of the first tokens and the
//! chunk gaps that landed in it, and the requests in flight (time-weighted mean and most).

use serde::{Deserialize, Serialize};

use crate::metrics::stats::Sorted;
use crate::metrics::summary::Summary;
use crate::record::{RequestRecord, RunResult};

const NS: f64 = 1e9;

/// The summary of the steady-state window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SteadyState {
    /// The window, seconds since the run's start.
    pub from_s: f64,
    pub to_s: f64,
    /// What was in force: `"concurrency 16"` or `"rate 4 req/s"`.
    pub basis: String,
    pub summary: Summary,
}

/// One time slice of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    pub start_s: f64,
    pub end_s: f64,
    /// Successful requests that ended in the slice.
    pub completed: u64,
    /// Failed requests that ended in the slice.
    pub failed: u64,
    pub request_throughput: f64,
    /// Output tokens whose chunks arrived in the slice.
    pub output_tokens: f64,
    pub output_throughput: f64,
    /// TTFT of the requests whose first token arrived in the slice, ms.
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p99_ms: Option<f64>,
    /// Chunk gaps that ended in the slice, ms.
    pub itl_p50_ms: Option<f64>,
    pub itl_p99_ms: Option<f64>,
    /// Requests in flight: time-weighted mean over the slice, and the most at once.
    pub in_flight_mean: f64,
    pub in_flight_max: u64,
}

/// A request's `[send, end)` in ns since the run's start; `None` for one never sent.
fn span(r: &RequestRecord) -> Option<(u64, u64)> {
    if r.never_sent() {
        return None;
    }
    let last = r.chunks_us.last().copied().unwrap_or(0).max(if r.succeeded() { 0 } else { r.end_us });
    Some((r.start_ns, r.start_ns.saturating_add(u64::from(last) * 1000)))
}

/// The steady-state window in ns, and what was in force; see the module docs.
pub fn steady_window(run: &RunResult) -> Option<(u64, u64, String)> {
    let spans: Vec<(u64, u64)> = run.records.iter().filter_map(span).collect();
    window_of(run, &spans)
}

/// [`steady_window`] from the run's request spans, taken once by the caller.
fn window_of(run: &RunResult, spans: &[(u64, u64)]) -> Option<(u64, u64, String)> {
    let traffic = &run.config.traffic;
    let last_send = spans.iter().map(|s| s.0).max()?;
    let (from, to, basis) = match traffic.max_concurrency {
        Some(cap) => {
            // After the last send the cap holds until the next end, if it was full then; in the
            // last wave of a synchronised run it is not (fewer requests are left than slots).
            let in_flight = spans.iter().filter(|&&(s, e)| s <= last_send && e > last_send).count();
            let drain = if in_flight >= cap {
                spans.iter().map(|s| s.1).filter(|&e| e > last_send).min().unwrap_or(last_send)
            } else {
                last_send
            };
            (first_time_at(spans, cap as u64)?, drain, format!("concurrency {cap}"))
        }
        None if traffic.request_rate.is_finite() && traffic.ramp_up.is_none() => {
            (spans.iter().map(|s| s.1).min()?, last_send, format!("rate {} req/s", traffic.request_rate))
        }
        None => return None,
    };
    (from < last_send).then_some((from, to, basis))
}

/// The first moment `level` requests were in flight (ends before starts at equal times).
fn first_time_at(spans: &[(u64, u64)], level: u64) -> Option<u64> {
    let mut events: Vec<(u64, i64)> = spans.iter().flat_map(|&(s, e)| [(s, 1), (e, -1)]).collect();
    events.sort_unstable();
    let mut running = 0i64;
    events.into_iter().find_map(|(t, d)| {
        running += d;
        (running >= level as i64).then_some(t)
    })
}

/// The steady state of `run`, if it had one that leaves something out; see the module docs.
pub fn steady_state(run: &RunResult) -> Option<SteadyState> {
    let spans: Vec<(u64, u64)> = run.records.iter().filter_map(span).collect();
    let (from, to, basis) = window_of(run, &spans)?;
    let inside: Vec<&RequestRecord> =
        run.records.iter().filter(|r| span(r).is_some_and(|(s, e)| s >= from && e <= to)).collect();
    // Every request sent has a span.
    if !inside.iter().any(|r| r.succeeded()) || inside.len() == spans.len() {
        return None;
    }
    // Fewer requests lived wholly inside the window than were in flight in it: the load never
    // turned over once, and the few inside are stragglers of its edges, not its steady state.
    let (in_flight, _) = InFlight::new(&spans).over(from, to);
    if (inside.len() as f64) < in_flight {
        return None;
    }
    let len_s = (to - from) as f64 / NS;
    // The server's counters and the client's health cover the whole run, not the window.
    let mut summary = Summary::over(&run.config, &inside, len_s);
    let counts = Counts::of(run, from, to);
    summary.request_throughput = counts.completed as f64 / len_s;
    summary.total_token_throughput = Some((counts.output_tokens + counts.input_tokens as f64) / len_s);
    match summary.pooling.as_mut() {
        Some(pooling) => pooling.input_sequence_throughput = counts.sequences as f64 / len_s,
        None => summary.output_throughput = Some(counts.output_tokens / len_s),
    }
    Some(SteadyState { from_s: from as f64 / NS, to_s: to as f64 / NS, basis, summary })
}

/// What happened inside `[from, to)` ns.
#[derive(Default)]
struct Counts {
    completed: u64,
    /// Input sequences of the requests completed (a pooling request may carry several).
    sequences: u64,
    failed: u64,
    output_tokens: f64,
    input_tokens: u64,
}

impl Counts {
    /// What `run`'s requests did inside the window; a pooling answer's one chunk is no token.
    fn of(run: &RunResult, from: u64, to: u64) -> Counts {
        let inside = |t: u64| t >= from && t < to;
        let tokens = !run.config.target.backend.api().pooling();
        let mut c = Counts::default();
        for r in &run.records {
            let Some((start, end)) = span(r) else { continue };
            if inside(end) {
                if r.succeeded() {
                    c.completed += 1;
                    c.sequences += super::summary::input_sequences(&run.config, r);
                } else {
                    c.failed += 1
                }
            }
            if !r.succeeded() || r.chunks_us.is_empty() {
                continue;
            }
            if inside(start) {
                c.input_tokens += u64::from(r.prompt_tokens());
            }
            if !tokens {
                continue;
            }
            let share = f64::from(r.output_tokens()) / r.chunks_us.len() as f64;
            let arrived = r.chunks_us.iter().filter(|&&us| inside(start + u64::from(us) * 1000)).count();
            c.output_tokens += share * arrived as f64;
        }
        c
    }
}

/// The run cut into slices of `seconds` from its start (none for a length that is not
/// positive); see the module docs.
pub fn slices(run: &RunResult, seconds: f64) -> Vec<Slice> {
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if !positive(seconds) || !positive(run.duration_s) {
        return Vec::new();
    }
    let step = (seconds * NS) as u64;
    let end = (run.duration_s * NS) as u64;
    let spans: Vec<(u64, u64)> = run.records.iter().filter_map(span).collect();
    let mut flight = InFlight::new(&spans);
    let mut out = Vec::new();
    let mut from = 0u64;
    while from < end && step > 0 {
        let to = from.saturating_add(step);
        let counts = Counts::of(run, from, to);
        let (ttfts, itls) = latencies_in(&run.records, from, to);
        let (mean, max) = flight.over(from, to);
        let len_s = (to - from) as f64 / NS;
        let pct = |v: &[f64], p: f64| (!v.is_empty()).then(|| Sorted::new(v).percentile(p) * 1000.0);
        out.push(Slice {
            start_s: from as f64 / NS,
            end_s: to as f64 / NS,
            completed: counts.completed,
            failed: counts.failed,
            request_throughput: counts.completed as f64 / len_s,
            output_tokens: counts.output_tokens,
            output_throughput: counts.output_tokens / len_s,
            ttft_p50_ms: pct(&ttfts, 50.0),
            ttft_p99_ms: pct(&ttfts, 99.0),
            itl_p50_ms: pct(&itls, 50.0),
            itl_p99_ms: pct(&itls, 99.0),
            in_flight_mean: mean,
            in_flight_max: max,
        });
        from = to;
    }
    out
}

/// TTFTs whose first token, and chunk gaps whose later chunk, arrived in `[from, to)`, in s.
fn latencies_in(records: &[RequestRecord], from: u64, to: u64) -> (Vec<f64>, Vec<f64>) {
    let at = |r: &RequestRecord, us: u32| r.start_ns + u64::from(us) * 1000;
    let inside = |t: u64| t >= from && t < to;
    let (mut ttfts, mut itls) = (Vec::new(), Vec::new());
    for r in records.iter().filter(|r| r.succeeded()) {
        if r.chunks_us.first().is_some_and(|&us| inside(at(r, us))) {
            ttfts.push(r.ttft_s());
        }
        for w in r.chunks_us.windows(2).filter(|w| inside(at(r, w[1]))) {
            itls.push(f64::from(w[1].saturating_sub(w[0])) * 1e-6);
        }
    }
    (ttfts, itls)
}

/// Requests in flight over time, asked about in consecutive intervals.
struct InFlight {
    /// `(t, +1 | -1)`, ends before starts at equal times.
    events: Vec<(u64, i64)>,
    next: usize,
    level: i64,
}

impl InFlight {
    fn new(spans: &[(u64, u64)]) -> InFlight {
        let mut events: Vec<(u64, i64)> = spans.iter().flat_map(|&(s, e)| [(s, 1), (e, -1)]).collect();
        events.sort_unstable();
        InFlight { events, next: 0, level: 0 }
    }

    /// Time-weighted mean and most in flight over `[from, to)`; intervals asked in order.
    fn over(&mut self, from: u64, to: u64) -> (f64, u64) {
        while self.next < self.events.len() && self.events[self.next].0 < from {
            self.level += self.events[self.next].1;
            self.next += 1;
        }
        let (mut area, mut max, mut t) = (0.0, self.level, from);
        while self.next < self.events.len() && self.events[self.next].0 < to {
            let (at, d) = self.events[self.next];
            area += self.level as f64 * (at - t) as f64;
            t = at;
            self.level += d;
            max = max.max(self.level);
            self.next += 1;
        }
        area += self.level as f64 * (to - t) as f64;
        (area / (to - from) as f64, max.max(0).unsigned_abs())
    }
}

#[cfg(test)]
mod tests;
