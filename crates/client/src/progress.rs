//! Live progress of a run on stderr: completed of total, requests in flight, token chunks per
//! second and the mean time to first token of the requests that got theirs in the last second.
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
    /// Requests that received their first token, and the sum of their TTFTs (µs): the live
    /// status shows the mean of those that came in its last second.
    pub first_tokens: AtomicU64,
    pub ttft_us_sum: AtomicU64,
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

    /// Every counter's value now, as the live status and the stop rules' watchdog read them.
    pub(crate) fn counts(&self) -> Counts {
        Counts {
            completed: Progress::get(&self.completed),
            failed: Progress::get(&self.failed),
            in_flight: Progress::get(&self.in_flight),
            chunks: Progress::get(&self.chunks),
            first_tokens: Progress::get(&self.first_tokens),
            ttft_us_sum: Progress::get(&self.ttft_us_sum),
        }
    }
}

/// The values of [`Progress`]'s counters at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Counts {
    pub completed: u64,
    pub failed: u64,
    pub in_flight: u64,
    pub chunks: u64,
    pub first_tokens: u64,
    pub ttft_us_sum: u64,
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

/// The span the live rates and the live TTFT are taken over.
const WINDOW: Duration = Duration::from_secs(1);

/// Redraws `bar` from `progress` every `period` until aborted; returns the ticker task.
pub fn spawn_ticker(bar: ProgressBar, progress: Arc<Progress>, period: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut window = Window::default();
        let mut tick = tokio::time::interval(period);
        loop {
            tick.tick().await;
            let counts = progress.counts();
            let live = window.push(Instant::now(), counts);
            bar.set_position(counts.completed);
            bar.set_message(status_line(&counts, &live));
        }
    })
}

/// What the status line shows beside the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Live {
    chunks_per_s: f64,
    /// Mean TTFT of the requests whose first token came within the window, ms; the last one
    /// seen when none did (`None` before any).
    ttft_ms: Option<f64>,
}

/// The counts read over the last [`WINDOW`], oldest first.
#[derive(Debug, Default)]
struct Window {
    readings: std::collections::VecDeque<(Instant, Counts)>,
    last_ttft_ms: Option<f64>,
}

impl Window {
    fn push(&mut self, at: Instant, c: Counts) -> Live {
        while self.readings.len() > 1 && self.readings[1].0 + WINDOW <= at {
            self.readings.pop_front();
        }
        let live = match self.readings.front() {
            Some(&(then, old)) => {
                let firsts = c.first_tokens - old.first_tokens;
                if firsts > 0 {
                    self.last_ttft_ms = Some((c.ttft_us_sum - old.ttft_us_sum) as f64 / firsts as f64 / 1e3);
                }
                let seconds = (at - then).as_secs_f64().max(1e-9);
                Live { chunks_per_s: (c.chunks - old.chunks) as f64 / seconds, ttft_ms: self.last_ttft_ms }
            }
            None => Live::default(),
        };
        self.readings.push_back((at, c));
        live
    }
}

fn status_line(c: &Counts, live: &Live) -> String {
    let failed = if c.failed > 0 { format!(", {} failed", c.failed) } else { String::new() };
    let ttft = live.ttft_ms.map_or_else(String::new, |t| format!(", TTFT {t:.0} ms"));
    format!("{} in flight, {:.0} tok/s{ttft}{failed}", c.in_flight, live.chunks_per_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_shows_in_flight_rate_ttft_and_failures_only_when_some() {
        let p = Progress::default();
        Progress::add(&p.in_flight, 3);
        let live = Live { chunks_per_s: 1234.4, ttft_ms: None };
        assert_eq!(status_line(&p.counts(), &live), "3 in flight, 1234 tok/s");
        Progress::add(&p.failed, 2);
        Progress::sub(&p.in_flight, 1);
        let live = Live { chunks_per_s: 0.0, ttft_ms: Some(85.4) };
        assert_eq!(status_line(&p.counts(), &live), "2 in flight, 0 tok/s, TTFT 85 ms, 2 failed");
    }

    #[test]
    fn the_window_takes_rates_and_ttft_over_its_last_second_and_keeps_the_last_ttft() {
        let t0 = Instant::now();
        let mut w = Window::default();
        let mut push = |ms: u64, chunks, first_tokens, ttft_us_sum| {
            let counts = Counts { chunks, first_tokens, ttft_us_sum, ..Counts::default() };
            w.push(t0 + Duration::from_millis(ms), counts)
        };
        assert_eq!(push(0, 0, 0, 0), Live::default());
        // Two first tokens of 100 and 300 ms in the first half second: a mean of 200.
        assert_eq!(push(500, 500, 2, 400_000), Live { chunks_per_s: 1000.0, ttft_ms: Some(200.0) });
        assert_eq!(push(1000, 1000, 2, 400_000), Live { chunks_per_s: 1000.0, ttft_ms: Some(200.0) });
        // The reading at 0 leaves the window: over 0.5..1.5 s, one first token of 50 ms.
        assert_eq!(push(1500, 1100, 3, 450_000), Live { chunks_per_s: 600.0, ttft_ms: Some(50.0) });
        // None in the window: the last mean is kept.
        let quiet = push(3000, 1100, 3, 450_000);
        assert_eq!(quiet, Live { chunks_per_s: 0.0, ttft_ms: Some(50.0) });
    }

    #[test]
    fn a_disabled_bar_is_hidden() {
        assert!(progress_bar(10, false).is_hidden());
    }
}
