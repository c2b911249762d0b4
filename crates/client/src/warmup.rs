//! The phases before the timed run: the ready check (request 0 retried until it succeeds, as
//! `--ready-check-timeout-sec` asks) and the warm-up (`--num-warmups` copies of request 0).
//!
//! Both print vLLM's lines and stop early, without error, when the run is cancelled.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use servebench_core::pyjson::py_whole_or_float;
use servebench_core::record::RequestRecord;
use tokio::sync::watch;

use crate::dispatch::{CancelSignal, Job, run_batch};
use crate::progress::Progress;
use crate::runner::{Logger, RunError};
use crate::stream::{StreamContext, execute};

/// How the ready check retries.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadyCheck {
    /// 0 (or less) skips the check.
    pub timeout_s: f64,
    /// Pause between attempts, cut short by the deadline.
    pub retry_interval: Duration,
}

/// Sends `probe` until it succeeds or the timeout passes. `Ok(false)` means cancelled.
pub(crate) async fn ready_check<F: Future<Output = ()>>(
    ctx: &StreamContext,
    probe: &Job,
    check: &ReadyCheck,
    log: &Logger,
    cancel: &mut CancelSignal<F>,
) -> Result<bool, RunError> {
    log("Starting initial single prompt test run...");
    if check.timeout_s.is_nan() || check.timeout_s <= 0.0 {
        log("Skipping endpoint ready check.");
        return Ok(true);
    }
    log(&format!("Waiting for endpoint to become up in {} seconds", py_whole_or_float(check.timeout_s)));
    let deadline = Duration::try_from_secs_f64(check.timeout_s).ok().and_then(|t| Instant::now().checked_add(t));
    let remaining = || deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(Instant::now()));
    // Attempts are bounded by the deadline instead; this switch is never thrown.
    let (_never, mut stop) = watch::channel(false);
    let ctx = StreamContext { progress: Arc::new(Progress::default()), ..ctx.clone() };
    let mut last_error = None;
    loop {
        let left = remaining();
        if left.is_zero()
            && let Some(error) = last_error
        {
            return Err(RunError::ReadyCheckFailed(error));
        }
        let mut rec = RequestRecord { max_tokens: probe.max_tokens, ..RequestRecord::default() };
        let attempt =
            tokio::time::timeout(left, execute(&ctx, &mut rec, Instant::now(), probe.body.clone(), None, &mut stop));
        let error = tokio::select! {
            r = attempt => match r {
                Ok(()) => rec.failure.map(|f| f.message),
                Err(_) => Some("no response before the ready-check timeout".to_string()),
            },
            () = cancel.fired() => return Ok(false),
        };
        let Some(error) = error else {
            log("Initial test run completed.");
            return Ok(true);
        };
        let left = remaining();
        if left.is_zero() {
            return Err(RunError::ReadyCheckFailed(error));
        }
        log(&format!("Endpoint is not ready. Error='{}'", last_line(&error)));
        tokio::select! {
            () = tokio::time::sleep(check.retry_interval.min(left)) => {}
            () = cancel.fired() => return Ok(false),
        }
        last_error = Some(error);
    }
}

/// Sends `count` copies of `probe` at once under the run's concurrency cap and waits for them;
/// their results are discarded. `false` means cancelled.
pub(crate) async fn warm_up<F: Future<Output = ()>>(
    ctx: &StreamContext,
    probe: &Job,
    count: usize,
    max_concurrency: Option<usize>,
    grace: Duration,
    log: &Logger,
    cancel: &mut CancelSignal<F>,
) -> bool {
    if count == 0 {
        return true;
    }
    log(&format!("Warming up with {count} requests..."));
    let ctx = StreamContext { progress: Arc::new(Progress::default()), ..ctx.clone() };
    let jobs: Arc<[Job]> = (0..count).map(|_| Job { at_ns: 0, ..probe.clone() }).collect();
    let outcome = run_batch(&ctx, jobs, max_concurrency, grace, cancel).await;
    if outcome.interrupted {
        return false;
    }
    log("Warmup run completed.");
    true
}

/// The last non-empty line of an error message (vLLM logs only that).
fn last_line(message: &str) -> &str {
    message.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::last_line;

    #[test]
    fn the_last_line_of_an_error_is_logged() {
        assert_eq!(last_line("Traceback\n  at x\nConnectionRefused: no\n\n"), "ConnectionRefused: no");
        assert_eq!(last_line("single"), "single");
        assert_eq!(last_line(""), "");
    }
}
