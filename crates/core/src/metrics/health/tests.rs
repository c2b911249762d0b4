//! The client's health verdict: each signal alone binds it from its own moment, and worse figures
//! never improve it.

use proptest::prelude::*;

use super::*;
use crate::record::{ClientSecond, Failure, test_run};

fn quiet_timer() -> TimerLateness {
    TimerLateness { tick_ms: 5.0, p50_ms: 0.1, p99_ms: 1.0, max_ms: 2.0 }
}

fn healthy() -> Signals {
    Signals {
        dispatch_lag: Some(DispatchLag { p50_ms: 0.05, p99_ms: 0.4, max_ms: 0.9 }),
        timer: Some(quiet_timer()),
        cpu_per_second: vec![0.3, 0.5, 0.4],
        cores: 2,
        fds_per_second: vec![Some(30), Some(40), Some(35)],
        fd_limit: Some(1024),
        ..Signals::default()
    }
}

#[test]
fn a_healthy_run_is_ok() {
    assert_eq!(judge(&healthy()), (Verdict::Ok, Vec::new()));
    assert_eq!(judge(&Signals::default()).0, Verdict::Ok, "nothing observed is nothing wrong");
}

#[test]
fn each_signal_alone_binds_the_client_from_its_own_moment() {
    let mut s = healthy();
    s.dispatch_lag = Some(DispatchLag { p50_ms: 2.0, p99_ms: 30.0, max_ms: 45.0 });
    s.first_late_dispatch_s = Some(3.5);
    let (v, reasons) = judge(&s);
    assert_eq!(v, Verdict::ClientBound { from_s: 3.5 });
    assert_eq!(reasons, ["requests left up to 45.0 ms late (p99 30.0 ms), so the offered load was lower than asked"]);

    let mut s = healthy();
    s.timer = Some(TimerLateness { max_ms: 300.0, ..quiet_timer() });
    s.first_late_tick_s = Some(1.25);
    assert_eq!(judge(&s).0, Verdict::ClientBound { from_s: 1.25 }, "one stall is enough");

    let mut s = healthy();
    s.cpu_per_second = vec![0.5, 1.85, 1.9];
    let (v, reasons) = judge(&s);
    assert_eq!(v, Verdict::ClientBound { from_s: 1.0 });
    assert_eq!(reasons, ["the client kept 1.85 of 2 cores busy"]);

    let mut s = healthy();
    s.fds_per_second = vec![Some(10), None, Some(950)];
    assert_eq!(judge(&s).0, Verdict::ClientBound { from_s: 2.0 });

    let mut s = healthy();
    s.first_fd_refusal_s = Some(0.75);
    assert_eq!(judge(&s).0, Verdict::ClientBound { from_s: 0.75 });
}

#[test]
fn a_lag_below_the_threshold_at_p99_is_not_a_verdict() {
    let mut s = healthy();
    // One late request in many: the p99 stays low, so the lag alone does not bind the client.
    s.dispatch_lag = Some(DispatchLag { p50_ms: 0.1, p99_ms: 3.0, max_ms: 40.0 });
    s.first_late_dispatch_s = Some(2.0);
    assert_eq!(judge(&s).0, Verdict::Ok);
}

fn signals() -> impl Strategy<Value = Signals> {
    (
        (0.0..50.0f64, 0.0..50.0f64, 0.0..10.0f64),
        (0.0..30.0f64, 0.0..200.0f64, 0.0..10.0f64),
        prop::collection::vec(0.0..2.0f64, 0..6),
        prop::collection::vec(prop::option::of(0u64..1200), 0..6),
        prop::option::of(0.0..10.0f64),
    )
        .prop_map(|((lag_p99, lag_extra, lag_at), (t_p99, t_extra, t_at), cpu, fds, refusal)| Signals {
            dispatch_lag: Some(DispatchLag { p50_ms: lag_p99 / 2.0, p99_ms: lag_p99, max_ms: lag_p99 + lag_extra }),
            first_late_dispatch_s: Some(lag_at),
            timer: Some(TimerLateness { tick_ms: 5.0, p50_ms: t_p99 / 2.0, p99_ms: t_p99, max_ms: t_p99 + t_extra }),
            first_late_tick_s: Some(t_at),
            cpu_per_second: cpu,
            cores: 2,
            fds_per_second: fds,
            fd_limit: Some(1024),
            first_fd_refusal_s: refusal,
        })
}

fn onset(v: Verdict) -> Option<f64> {
    match v {
        Verdict::Ok => None,
        Verdict::ClientBound { from_s } => Some(from_s),
    }
}

proptest! {
    /// Making any figure worse never clears the verdict, nor moves its onset later.
    #[test]
    fn worse_figures_never_improve_the_verdict(s in signals(), extra in 0.0..100.0f64, cpu in 0.0..2.0f64) {
        let before = onset(judge(&s).0);
        let mut worse = s.clone();
        worse.dispatch_lag = s.dispatch_lag.map(|l| DispatchLag { p99_ms: l.p99_ms + extra, max_ms: l.max_ms + extra, ..l });
        worse.timer = s.timer.map(|t| TimerLateness { p99_ms: t.p99_ms + extra, max_ms: t.max_ms + extra, ..t });
        worse.cpu_per_second = s.cpu_per_second.iter().map(|c| c + cpu).collect();
        let after = onset(judge(&worse).0);
        if let Some(b) = before {
            let a = after.expect("a client-bound run stays client-bound when its figures get worse");
            prop_assert!(a <= b, "onset moved from {b} to {a}");
        }
    }

    /// The verdict is ok exactly when no reason is given, and the onset is one of the
    /// moments the signals carry.
    #[test]
    fn the_onset_is_the_earliest_reason(s in signals()) {
        let (v, reasons) = judge(&s);
        prop_assert_eq!(v == Verdict::Ok, reasons.is_empty());
        if let Some(at) = onset(v) {
            let mut moments = vec![s.first_late_dispatch_s.unwrap(), s.first_late_tick_s.unwrap()];
            moments.extend((0..6).map(f64::from));
            moments.extend(s.first_fd_refusal_s);
            prop_assert!(moments.contains(&at), "{at} is no signal's moment");
        }
    }
}

fn observations() -> ClientObservations {
    ClientObservations {
        tick_ms: 5.0,
        ticks: 400,
        lateness_p50_ms: 0.2,
        lateness_p99_ms: 1.1,
        lateness_max_ms: 1.8,
        late_ticks: Vec::new(),
        wall_s: 2.0,
        cpu_s: Some(0.5),
        cores: 2,
        fd_limit: Some(1024),
        per_second: vec![
            ClientSecond { cpu_cores: Some(0.2), open_fds: Some(20) },
            ClientSecond { cpu_cores: Some(0.3), open_fds: Some(24) },
        ],
    }
}

fn record(planned_ms: u64, arrival_ms: u64) -> RequestRecord {
    RequestRecord {
        planned_ns: planned_ms * 1_000_000,
        arrival_ns: arrival_ms * 1_000_000,
        start_ns: arrival_ms * 1_000_000,
        chunks_us: vec![1000],
        status: 200,
        ..RequestRecord::default()
    }
}

#[test]
fn assess_reads_the_records_and_the_observations() {
    let mut refused = record(900, 900);
    refused.failure = Some(Failure {
        kind: FailureKind::Connect,
        message: "could not connect: Too many open files (os error 24)".into(),
    });
    let mut retried = record(100, 100);
    retried.retried = true;
    let run = test_run(vec![record(0, 0), retried, refused], 2.0);
    let h = Health::assess(&run, &observations(), None);
    assert_eq!(h.verdict, Verdict::ClientBound { from_s: 0.9 });
    assert_eq!((h.connection_errors, h.retries, h.open_fds_peak), (1, 1, Some(24)));
    let cpu = h.cpu.unwrap();
    assert!((cpu.mean_cores - 0.25).abs() < 1e-12 && (cpu.peak_cores - 0.3).abs() < 1e-12);

    let late = Health::assess(
        &test_run(vec![record(0, 0), record(500, 540)], 2.0),
        &observations(),
        Some(DispatchLag { p50_ms: 20.0, p99_ms: 39.6, max_ms: 40.0 }),
    );
    assert_eq!(late.verdict, Verdict::ClientBound { from_s: 0.5 }, "from the planned time of the late request");

    let mut stalled = observations();
    stalled.lateness_max_ms = 250.0;
    stalled.late_ticks = vec![(0.4, 6.0), (1.2, 250.0)];
    let h = Health::assess(&test_run(vec![record(0, 0)], 2.0), &stalled, None);
    assert_eq!(h.verdict, Verdict::ClientBound { from_s: 1.2 }, "from the first tick over the threshold");
}

#[test]
fn the_line_names_the_verdict_and_the_figures() {
    let run = test_run(vec![record(0, 0)], 2.0);
    let lag = Some(DispatchLag { p50_ms: 0.04, p99_ms: 0.31, max_ms: 0.52 });
    let ok = Health::assess(&run, &observations(), lag);
    let mut stalled = observations();
    stalled.lateness_p99_ms = 12.0;
    stalled.lateness_max_ms = 301.5;
    stalled.late_ticks = vec![(1.2, 301.5)];
    stalled.per_second[1].cpu_cores = Some(1.9);
    let bound = Health::assess(&run, &stalled, lag);
    insta::assert_snapshot!(format!("{}\n{}", render_health(&ok), render_health(&bound)));
}

#[test]
fn cpu_time_below_a_second_reads_in_milliseconds_never_as_zero_seconds() {
    assert_eq!(cpu_time_text(0.003), "3 ms");
    assert_eq!(cpu_time_text(0.5), "500 ms");
    assert_eq!(cpu_time_text(0.9996), "1.00 s", "a rounded 1000 ms reads as seconds");
    assert_eq!(cpu_time_text(12.345), "12.35 s");
    assert_eq!(cpu_time_text(0.0002), "under 1 ms");
    assert_eq!(cpu_time_text(0.0), "0 ms");
    let mut h = Health::assess(&test_run(vec![record(0, 0)], 0.003), &observations(), None);
    h.cpu = Some(CpuUse { seconds: 0.003, mean_cores: 1.14, cores: 2, peak_cores: 1.14 });
    let line = render_health(&h);
    assert!(line.contains("client CPU 3 ms, 1.14 of 2 cores (peak 1.14)"), "{line}");
}
