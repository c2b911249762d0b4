//! Stop rules: a watchdog that ends a timed run early, in words, when too many of its requests
//! have failed (`--max-failures`) or when requests are in flight and none of them has received
//! a token or ended for too long (`--stall-timeout`, a hung server).
//!
//! It reads the run's [`Progress`] counters a few times a second, as the progress bar does, so
//! the requests' hot path is untouched. When a rule holds it completes, and the run stops as on
//! Ctrl-C: nothing more is sent, requests in flight get their grace, the rest are counted as
//! never sent, and what was measured is kept.

use std::sync::Arc;
use std::time::Duration;

use servebench_core::config::StopRules;
use tokio::time::Instant;

use crate::progress::{Counts, Progress};

/// How often the watchdog reads the counters (a stall is seen at most this late).
const PERIOD: Duration = Duration::from_millis(50);

/// Completes with the rule that held, in words; never, where `rules` has none.
pub(crate) async fn watch(progress: Arc<Progress>, rules: StopRules) -> String {
    if rules.is_empty() {
        return std::future::pending().await;
    }
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stall = Stall::new(Instant::now());
    loop {
        let now = tick.tick().await;
        if let Some(why) = check(&rules, &mut stall, &progress.counts(), now) {
            return why;
        }
    }
}

/// Since when the run has made no progress with requests in flight.
#[derive(Debug)]
struct Stall {
    activity: u64,
    since: Instant,
}

impl Stall {
    fn new(now: Instant) -> Self {
        Stall { activity: 0, since: now }
    }
}

/// The rule that holds at `now`, given the counters read then.
fn check(rules: &StopRules, stall: &mut Stall, c: &Counts, now: Instant) -> Option<String> {
    if let Some(n) = rules.max_failures
        && c.failed >= n
    {
        return Some(format!("{} requests failed (--max-failures {n})", c.failed));
    }
    // Token chunks received plus requests ended: it moves whenever any request progresses.
    let activity = c.chunks + c.completed;
    if activity != stall.activity || c.in_flight == 0 {
        *stall = Stall { activity, since: now };
        return None;
    }
    let limit = rules.stall_timeout_s?;
    let quiet = now.duration_since(stall.since).as_secs_f64();
    (quiet >= limit).then(|| {
        format!(
            "{} requests in flight received no token and none ended for {quiet:.1} s (--stall-timeout {limit})",
            c.in_flight
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, ms: u64) -> Instant {
        start + Duration::from_millis(ms)
    }

    #[test]
    fn failures_stop_the_run_at_the_limit() {
        let rules = StopRules { max_failures: Some(3), stall_timeout_s: None };
        let t0 = Instant::now();
        let mut stall = Stall::new(t0);
        let r = |failed| Counts { failed, in_flight: 5, completed: failed, ..Counts::default() };
        assert_eq!(check(&rules, &mut stall, &r(2), at(t0, 50)), None);
        assert_eq!(check(&rules, &mut stall, &r(3), at(t0, 100)).unwrap(), "3 requests failed (--max-failures 3)");
    }

    #[test]
    fn a_stall_counts_only_while_requests_are_in_flight_and_nothing_moves() {
        let rules = StopRules { max_failures: None, stall_timeout_s: Some(1.0) };
        let t0 = Instant::now();
        let mut stall = Stall::new(t0);
        let busy = |chunks| Counts { in_flight: 2, chunks, ..Counts::default() };
        let idle = Counts { chunks: 7, ..Counts::default() };
        // Progress at 0.5 s restarts the clock; an idle gap (nothing in flight) too.
        assert_eq!(check(&rules, &mut stall, &busy(7), at(t0, 500)), None);
        assert_eq!(check(&rules, &mut stall, &busy(7), at(t0, 1400)), None);
        assert_eq!(check(&rules, &mut stall, &idle, at(t0, 2000)), None);
        assert_eq!(check(&rules, &mut stall, &busy(7), at(t0, 2900)), None);
        let why = check(&rules, &mut stall, &busy(7), at(t0, 3000)).unwrap();
        assert_eq!(why, "2 requests in flight received no token and none ended for 1.0 s (--stall-timeout 1)");
    }

    #[tokio::test(start_paused = true)]
    async fn the_watchdog_completes_when_a_rule_holds_and_never_without_rules() {
        let progress = Arc::new(Progress::default());
        Progress::add(&progress.in_flight, 1);
        let rules = StopRules { max_failures: None, stall_timeout_s: Some(2.0) };
        let started = Instant::now();
        let why = watch(Arc::clone(&progress), rules).await;
        assert!(why.contains("--stall-timeout 2"), "{why}");
        let waited = started.elapsed().as_secs_f64();
        assert!((2.0..2.2).contains(&waited), "{waited}");
        let none = tokio::time::timeout(Duration::from_secs(3600), watch(progress, StopRules::default())).await;
        assert!(none.is_err(), "no rule, no stop");
    }
}
