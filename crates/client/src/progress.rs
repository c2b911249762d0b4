//! Live progress of a run on stderr: completed of total, requests in flight and token chunks
//! per second.
//!
//! Request tasks only bump atomic counters ([`Progress`]); a ticker reads them a few times a
//! second and redraws the bar, so the hot path never touches the terminal. The bar is hidden
//! when disabled or when stderr is not a terminal.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::task::JoinHandle;

/// Counters bumped by request tasks.
#[derive(Debug, Default)]
pub struct Progress {
    /// Requests that ended, failed or not (and turns skipped after a failed one).
    pub completed: AtomicU64,
    /// Requests that ended with a failure.
    pub failed: AtomicU64,
    /// Requests sent whose response has not ended yet.
    pub in_flight: AtomicU64,
    /// Token chunks received so far (vLLM's unit of "tokens" when streaming).
    pub chunks: AtomicU64,
}

impl Progress {
    /// Adds `n` to one of the counters.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Takes `n` from one of the counters (`in_flight` when a request ends).
    pub fn sub(counter: &AtomicU64, n: u64) {
        counter.fetch_sub(n, Ordering::Relaxed);
    }

    /// The counter's current value.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// A styled progress bar on stderr for `total` requests, hidden unless `enabled` and stderr is
/// a terminal.
pub fn progress_bar(total: u64, enabled: bool) -> ProgressBar {
    if !enabled || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let style =
        ProgressStyle::with_template("{percent:>3}%|{wide_bar}| {pos}/{len} [{elapsed_precise}<{eta_precise}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(8)).with_style(style)
}

/// Redraws `bar` from `progress` every `period` until aborted; returns the ticker task.
pub fn spawn_ticker(bar: ProgressBar, progress: Arc<Progress>, period: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut last = (Instant::now(), Progress::get(&progress.chunks));
        let mut tick = tokio::time::interval(period);
        loop {
            tick.tick().await;
            let now = Instant::now();
            let chunks = Progress::get(&progress.chunks);
            let rate = (chunks - last.1) as f64 / (now - last.0).as_secs_f64().max(1e-9);
            last = (now, chunks);
            bar.set_position(Progress::get(&progress.completed));
            bar.set_message(status_line(&progress, rate));
        }
    })
}

fn status_line(p: &Progress, chunks_per_s: f64) -> String {
    let failed = Progress::get(&p.failed);
    let failed = if failed > 0 { format!(", {failed} failed") } else { String::new() };
    format!("{} in flight, {chunks_per_s:.0} tok/s{failed}", Progress::get(&p.in_flight))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_shows_in_flight_rate_and_failures_only_when_some() {
        let p = Progress::default();
        Progress::add(&p.in_flight, 3);
        assert_eq!(status_line(&p, 1234.4), "3 in flight, 1234 tok/s");
        Progress::add(&p.failed, 2);
        Progress::sub(&p.in_flight, 1);
        assert_eq!(status_line(&p, 0.0), "2 in flight, 0 tok/s, 2 failed");
    }

    #[test]
    fn a_disabled_bar_is_hidden() {
        assert!(progress_bar(10, false).is_hidden());
    }
}
