//! vLLM's `rps_change_events`: with a ramp-up, the wall-clock moments the integer request
//! rate went up, `[{"rps": k, "timestamp": iso}]`.
//!
//! vLLM appends the start rate when the run starts, then, as each request is dispatched, one
//! event per integer the rate passed since the last event, stamped with that dispatch's local
//! time (`datetime.now().isoformat()`). The same events come from a finished run's records:
//! request `i` was dispatched `arrival_ns` after the start, at the rate
//! [`Traffic::rate_at`](crate::config::Traffic::rate_at); a request never sent makes none.
//! Times are written in the civil time of `started_at`'s own UTC offset (the local time the
//! client recorded), so the file does not depend on the reader's time zone.

use jiff::fmt::temporal::{Pieces, PiecesOffset};
use jiff::tz::Offset;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::record::RunResult;

/// The events of a ramped run, or `None` without a ramp or without a readable `started_at`.
pub fn rps_change_events(run: &RunResult) -> Option<Value> {
    let traffic = &run.config.traffic;
    let ramp = traffic.ramp_up.as_ref()?;
    let clock = WallClock::parse(&run.started_at)?;
    let n = run.records.len();
    // vLLM's flag is an integer; a fractional start counts from its integer part.
    let mut last = ramp.start_rps.floor() as i64;
    let mut events = vec![json!({"rps": last, "timestamp": clock.at(0)})];
    for (i, r) in run.records.iter().enumerate().filter(|(_, r)| !r.never_sent()) {
        let rate = traffic.rate_at(i, n).floor() as i64;
        if rate > last {
            let timestamp = clock.at(r.arrival_ns);
            events.extend((last + 1..=rate).map(|rps| json!({"rps": rps, "timestamp": timestamp})));
            last = rate;
        }
    }
    Some(Value::Array(events))
}

/// The run's start as a moment and the UTC offset it was recorded in.
struct WallClock {
    start: Timestamp,
    offset: Offset,
}

impl WallClock {
    fn parse(started_at: &str) -> Option<Self> {
        let start: Timestamp = started_at.parse().ok()?;
        let offset = match Pieces::parse(started_at).ok()?.offset() {
            Some(PiecesOffset::Numeric(n)) => n.offset(),
            _ => Offset::UTC,
        };
        Some(Self { start, offset })
    }

    /// `after_ns` past the start, as Python's `datetime.isoformat()` writes a naive local
    /// time (microseconds only when not zero).
    fn at(&self, after_ns: u64) -> String {
        let after = SignedDuration::from_nanos(i64::try_from(after_ns).unwrap_or(i64::MAX));
        let t = self.start.checked_add(after).unwrap_or(self.start);
        let civil = self.offset.to_datetime(t);
        let seconds = civil.strftime("%Y-%m-%dT%H:%M:%S").to_string();
        match civil.subsec_nanosecond() / 1000 {
            0 => seconds,
            us => format!("{seconds}.{us:06}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{RampStrategy, RampUp};
    use crate::record::{Failure, FailureKind, RequestRecord, test_run};

    fn ramped(arrivals_ms: &[u64], start_rps: f64, end_rps: f64) -> RunResult {
        let records = arrivals_ms
            .iter()
            .enumerate()
            .map(|(i, &ms)| RequestRecord { index: i as u32, arrival_ns: ms * 1_000_000, ..RequestRecord::default() })
            .collect();
        let mut run = test_run(records, 1.0);
        run.config.traffic.ramp_up = Some(RampUp { strategy: RampStrategy::Linear, start_rps, end_rps });
        run.started_at = "2025-06-01T12:00:00.5+02:00".into();
        run
    }

    #[test]
    fn each_integer_the_rate_passes_is_stamped_when_its_request_was_dispatched() {
        // Five requests ramp 1 -> 9 req/s: rates 1, 3, 5, 7, 9.
        let run = ramped(&[0, 1000, 1500, 1750, 2000], 1.0, 9.0);
        let events = rps_change_events(&run).unwrap();
        let got: Vec<(i64, &str)> = events
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["rps"].as_i64().unwrap(), e["timestamp"].as_str().unwrap()))
            .collect();
        assert_eq!(
            got,
            [
                (1, "2025-06-01T12:00:00.500000"),
                (2, "2025-06-01T12:00:01.500000"),
                (3, "2025-06-01T12:00:01.500000"),
                (4, "2025-06-01T12:00:02"),
                (5, "2025-06-01T12:00:02"),
                (6, "2025-06-01T12:00:02.250000"),
                (7, "2025-06-01T12:00:02.250000"),
                (8, "2025-06-01T12:00:02.500000"),
                (9, "2025-06-01T12:00:02.500000"),
            ]
        );
    }

    #[test]
    fn unsent_requests_make_no_event_and_a_run_without_a_ramp_has_none() {
        let mut run = ramped(&[0, 1000, 0], 1.0, 3.0);
        run.records[2].failure = Some(Failure { kind: FailureKind::NotSent, message: String::new() });
        let events = rps_change_events(&run).unwrap();
        let rps: Vec<i64> = events.as_array().unwrap().iter().map(|e| e["rps"].as_i64().unwrap()).collect();
        assert_eq!(rps, [1, 2]);
        run.config.traffic.ramp_up = None;
        assert!(rps_change_events(&run).is_none());
    }

    #[test]
    fn utc_start_times_are_written_in_utc() {
        let mut run = ramped(&[0, 250], 2.0, 3.0);
        run.started_at = "2025-06-01T23:59:59.9Z".into();
        let events = rps_change_events(&run).unwrap();
        assert_eq!(events[1]["timestamp"], "2025-06-02T00:00:00.150000");
        run.started_at = String::new();
        assert!(rps_change_events(&run).is_none(), "no start time, no events (as sim predict before stamping)");
    }
}
