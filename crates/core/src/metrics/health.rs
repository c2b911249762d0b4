//! The client's health verdict: whether a run's latencies are the server's, or include delay
//! the client itself added.
//!
//! [`Health::assess`] gathers what the run observed (dispatch lag against the plan, how late
//! the client's ticker woke, the process's CPU use, connection errors and retries, open files
//! against the limit); [`judge`] is the verdict itself, a pure function of those figures:
//! "ok", or "client-bound from t = X s", X being the earliest moment any of these held:
//! - dispatch lag p99 above [`LATE_MS`] (from the first request released that late);
//! - ticker lateness p99 above [`LATE_MS`], or any tick later than [`STALL_MS`] (from the
//!   first tick later than [`LATE_MS`]);
//! - a whole second in which the process kept [`CPU_BUSY`] of its cores busy;
//! - open files reaching [`FD_BUSY`] of the limit, or a connection refused for want of file
//!   descriptors.
//!
//! [`render_health`] is the one line printed after vLLM's block.

use serde::{Deserialize, Serialize};

use crate::metrics::summary::DispatchLag;
use crate::record::{ClientObservations, FailureKind, RequestRecord, RunResult};

/// Dispatch lag or ticker lateness above this at p99: the client shaped the timing.
pub const LATE_MS: f64 = 10.0;
/// A single tick this late: the client stalled.
pub const STALL_MS: f64 = 50.0;
/// Share of the process's cores busy for a whole second that counts as saturated.
pub const CPU_BUSY: f64 = 0.9;
/// Share of the open-file limit that counts as exhausted.
pub const FD_BUSY: f64 = 0.9;

/// The verdict.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    /// From `from_s` seconds after the run's start, latencies include client delay.
    ClientBound {
        from_s: f64,
    },
}

/// The ticker's lateness, ms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimerLateness {
    pub tick_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// The client process's CPU use during the run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuUse {
    /// CPU seconds, every thread.
    pub seconds: f64,
    /// Mean cores busy over the run.
    pub mean_cores: f64,
    /// The busiest whole second, in cores.
    pub peak_cores: f64,
    /// Cores the process may use.
    pub cores: u32,
}

/// The run's health: the verdict, why, and the figures behind it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Health {
    pub verdict: Verdict,
    /// What made the client bound, one phrase each, earliest first; empty when ok.
    pub reasons: Vec<String>,
    pub dispatch_lag_ms: Option<DispatchLag>,
    pub timer_lateness: TimerLateness,
    pub cpu: Option<CpuUse>,
    /// Requests that failed to connect.
    pub connection_errors: u64,
    /// Requests sent again on a fresh connection.
    pub retries: u64,
    pub open_fds_peak: Option<u64>,
    pub fd_limit: Option<u64>,
}

/// Everything [`judge`] looks at, each with the moment it was first seen (s since the start).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Signals {
    pub dispatch_lag: Option<DispatchLag>,
    /// The planned time of the first request released more than [`LATE_MS`] late.
    pub first_late_dispatch_s: Option<f64>,
    pub timer: Option<TimerLateness>,
    /// The due time of the first tick more than [`LATE_MS`] late.
    pub first_late_tick_s: Option<f64>,
    /// Cores busy in each whole second, and the cores available.
    pub cpu_per_second: Vec<f64>,
    pub cores: u32,
    /// Open files at the end of each whole second, and the limit.
    pub fds_per_second: Vec<Option<u64>>,
    pub fd_limit: Option<u64>,
    /// When the first request that could not get a file descriptor was sent.
    pub first_fd_refusal_s: Option<f64>,
}

/// The verdict on `signals`, and the reasons behind a client-bound one (earliest first).
pub fn judge(signals: &Signals) -> (Verdict, Vec<String>) {
    let mut found: Vec<(f64, String)> = Vec::new();
    if let Some(lag) = signals.dispatch_lag.filter(|l| l.p99_ms > LATE_MS) {
        let at = signals.first_late_dispatch_s.unwrap_or(0.0);
        found.push((
            at,
            format!(
                "requests left up to {:.1} ms late (p99 {:.1} ms), so the offered load was lower than asked",
                lag.max_ms, lag.p99_ms
            ),
        ));
    }
    if let Some(t) = signals.timer.filter(|t| t.p99_ms > LATE_MS || t.max_ms > STALL_MS) {
        let at = signals.first_late_tick_s.unwrap_or(0.0);
        found.push((at, format!("the runtime woke up to {:.1} ms late (p99 {:.1} ms)", t.max_ms, t.p99_ms)));
    }
    let cores = f64::from(signals.cores.max(1));
    if let Some((i, &busy)) = signals.cpu_per_second.iter().enumerate().find(|(_, c)| **c >= CPU_BUSY * cores) {
        found.push((i as f64, format!("the client kept {busy:.2} of {cores} cores busy")));
    }
    if let Some(limit) = signals.fd_limit.filter(|&l| l > 0) {
        let full = signals.fds_per_second.iter().position(|n| n.is_some_and(|n| n as f64 >= FD_BUSY * limit as f64));
        if let Some(i) = full {
            let n = signals.fds_per_second[i].unwrap_or(0);
            found.push((i as f64, format!("{n} of {limit} file descriptors were open")));
        }
    }
    if let Some(at) = signals.first_fd_refusal_s {
        found.push((at, "connections failed for want of file descriptors".to_string()));
    }
    found.sort_by(|a, b| a.0.total_cmp(&b.0));
    match found.first() {
        None => (Verdict::Ok, Vec::new()),
        Some(&(from_s, _)) => (Verdict::ClientBound { from_s }, found.into_iter().map(|(_, r)| r).collect()),
    }
}

impl Health {
    /// The health of `run` from what its client observed, `lag` being its dispatch lag.
    pub fn assess(run: &RunResult, obs: &ClientObservations, lag: Option<DispatchLag>) -> Health {
        let records = &run.records;
        let sent = || records.iter().filter(|r| !r.never_sent());
        let first_late_dispatch_s = records
            .iter()
            .filter(|r| r.arrival_ns >= r.planned_ns && r.dispatch_lag_s() * 1000.0 > LATE_MS)
            .map(|r| r.planned_ns as f64 * 1e-9)
            .min_by(f64::total_cmp);
        let timer = TimerLateness {
            tick_ms: obs.tick_ms,
            p50_ms: obs.lateness_p50_ms,
            p99_ms: obs.lateness_p99_ms,
            max_ms: obs.lateness_max_ms,
        };
        let first_late_tick_s = obs.late_ticks.iter().find(|(_, late)| *late > LATE_MS).map(|&(due, _)| due);
        let cpu_per_second: Vec<f64> = obs.per_second.iter().filter_map(|s| s.cpu_cores).collect();
        let fds_per_second: Vec<Option<u64>> = obs.per_second.iter().map(|s| s.open_fds).collect();
        let connect_failure = |r: &&RequestRecord| r.failure.as_ref().is_some_and(|f| f.kind == FailureKind::Connect);
        let first_fd_refusal_s = sent()
            .filter(connect_failure)
            .filter(|r| r.failure.as_ref().is_some_and(|f| out_of_descriptors(&f.message)))
            .map(RequestRecord::start_s)
            .min_by(f64::total_cmp);
        let signals = Signals {
            dispatch_lag: lag,
            first_late_dispatch_s,
            timer: Some(timer),
            first_late_tick_s,
            cpu_per_second,
            cores: obs.cores,
            fds_per_second,
            fd_limit: obs.fd_limit,
            first_fd_refusal_s,
        };
        let (verdict, reasons) = judge(&signals);
        let cpu = obs.cpu_s.map(|seconds| CpuUse {
            seconds,
            mean_cores: if obs.wall_s > 0.0 { seconds / obs.wall_s } else { 0.0 },
            peak_cores: signals.cpu_per_second.iter().copied().fold(0.0, f64::max),
            cores: obs.cores,
        });
        Health {
            verdict,
            reasons,
            dispatch_lag_ms: lag,
            timer_lateness: timer,
            cpu,
            connection_errors: sent().filter(connect_failure).count() as u64,
            retries: sent().filter(|r| r.retried).count() as u64,
            open_fds_peak: signals.fds_per_second.iter().flatten().copied().max(),
            fd_limit: obs.fd_limit,
        }
    }
}

/// Whether a connection error says the process ran out of file descriptors (`EMFILE`).
fn out_of_descriptors(message: &str) -> bool {
    message.contains("Too many open files") || message.contains("os error 24")
}

/// The health line printed after vLLM's block.
pub fn render_health(h: &Health) -> String {
    let head = match h.verdict {
        Verdict::Ok => "Client health: ok".to_string(),
        Verdict::ClientBound { from_s } => format!(
            "Client health: client-bound from t = {from_s:.2} s: latencies above this point include client delay: {}.",
            h.reasons.join("; ")
        ),
    };
    let mut figures = Vec::new();
    if let Some(l) = h.dispatch_lag_ms {
        figures.push(format!("dispatch lag p50 {:.2} / p99 {:.2} / max {:.2} ms", l.p50_ms, l.p99_ms, l.max_ms));
    }
    let t = &h.timer_lateness;
    figures.push(format!("timer late p99 {:.2} / max {:.2} ms", t.p99_ms, t.max_ms));
    if let Some(c) = h.cpu {
        figures.push(format!(
            "client CPU {}, {:.2} of {} cores (peak {:.2})",
            cpu_time_text(c.seconds),
            c.mean_cores,
            c.cores,
            c.peak_cores
        ));
    }
    figures.push(format!("{} connection errors, {} retries", h.connection_errors, h.retries));
    match (h.open_fds_peak, h.fd_limit) {
        (Some(n), Some(l)) => figures.push(format!("{n} of {l} files open")),
        (Some(n), None) => figures.push(format!("{n} files open")),
        _ => {}
    }
    format!("{head} ({}).", figures.join(", "))
}

/// CPU time as it reads: seconds from one second up, else whole milliseconds, so that the
/// few milliseconds of a short run do not print as `0.00 s`.
fn cpu_time_text(seconds: f64) -> String {
    let ms = (seconds * 1000.0).round();
    if ms >= 1000.0 {
        format!("{seconds:.2} s")
    } else if ms >= 1.0 {
        format!("{ms:.0} ms")
    } else if seconds > 0.0 {
        "under 1 ms".to_string()
    } else {
        "0 ms".to_string()
    }
}

#[cfg(test)]
mod tests;
