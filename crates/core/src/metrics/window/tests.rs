//! The steady state and time slices of capped, open-loop, all-at-once and synchronised runs, on
//! examples and generated runs.

use proptest::prelude::*;

use super::*;
use crate::config::Metric;
use crate::record::{Usage, test_run};

const MS: u64 = 1_000_000;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// A successful request sent at `start_ms`, with chunks at `chunks_ms` after the send and
/// `tokens` output tokens.
fn request(index: u32, start_ms: u64, chunks_ms: &[u32], tokens: u32) -> RequestRecord {
    RequestRecord {
        index,
        planned_ns: start_ms * MS,
        arrival_ns: start_ms * MS,
        start_ns: start_ms * MS,
        chunks_us: chunks_ms.iter().map(|m| m * 1000).collect(),
        end_us: chunks_ms.last().copied().unwrap_or(0) * 1000,
        usage: Usage { prompt_tokens: Some(10), completion_tokens: Some(tokens) },
        status: 200,
        ..RequestRecord::default()
    }
}

/// 20 requests arriving every 50 ms under a cap of 4, each 300 ms long, sent as the cap
/// allows (a FIFO queue, as the client does); the TTFT is 10 ms for the requests sent
/// before the cap was full or that were still running at the last send, 50 ms for the others.
fn capped_run() -> (RunResult, Vec<bool>) {
    let cap = 4;
    let mut free = vec![0u64; cap];
    let mut starts = Vec::new();
    for i in 0..20u64 {
        let slot = (0..cap).min_by_key(|&s| free[s]).unwrap();
        let start = free[slot].max(i * 50);
        free[slot] = start + 300;
        starts.push(start);
    }
    let last_send = *starts.last().unwrap();
    let drain = starts.iter().map(|s| s + 300).filter(|&e| e > last_send).min().unwrap();
    let steady: Vec<bool> = starts.iter().enumerate().map(|(i, &s)| i >= cap - 1 && s + 300 <= drain).collect();
    let records = starts
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let ttft = if steady[i] { 50 } else { 10 };
            let mut r = request(i as u32, s, &[ttft, 150, 300], 3);
            r.planned_ns = i as u64 * 50 * MS;
            r.arrival_ns = r.planned_ns;
            r
        })
        .collect();
    let mut run = test_run(records, (last_send + 300) as f64 / 1000.0);
    run.config.traffic.max_concurrency = Some(cap);
    run.config.traffic.request_rate = 20.0;
    (run, steady)
}

#[test]
fn the_steady_state_of_a_capped_run_leaves_out_the_ramp_and_the_drain() {
    let (run, steady) = capped_run();
    let (from, to, basis) = steady_window(&run).unwrap();
    assert_eq!((from, basis.as_str()), (150 * MS, "concurrency 4"), "the fourth send fills the cap");
    let last_send = run.records.last().unwrap().start_ns;
    let first_end_after = run.records.iter().map(|r| r.start_ns + 300 * MS).filter(|&e| e > last_send).min();
    assert_eq!(Some(to), first_end_after, "the first end after the last send starts the drain");
    let s = steady_state(&run).unwrap();
    let n_steady = steady.iter().filter(|&&b| b).count() as u64;
    assert!((5..20).contains(&n_steady), "{n_steady}");
    assert!(!steady[0] && !steady[2] && !steady[19], "ramp and drain requests exist");
    assert_eq!(s.summary.completed, n_steady);
    // Only the steady requests have a 50 ms TTFT: none of the ramp or the drain got in.
    let ttft = s.summary.metric(Metric::Ttft).unwrap();
    assert!(close(ttft.mean_ms, 50.0) && close(ttft.percentile(99.0).unwrap(), 50.0), "{ttft:?}");
    // Throughput over the window: 4 requests per 300 ms while the cap is full.
    let window_s = (to - from) as f64 / 1e9;
    let ended = run.records.iter().filter(|r| (from..to).contains(&(r.start_ns + 300 * MS))).count();
    assert_eq!(s.summary.request_throughput, ended as f64 / window_s);
    assert!((s.summary.request_throughput - 4.0 / 0.3).abs() < 1.5, "{}", s.summary.request_throughput);
    // The whole-run summary carries it, and leaves its own numbers alone.
    let whole = Summary::compute(&run);
    assert_eq!(whole.completed, 20);
    assert_eq!(whole.steady_state.as_deref(), Some(&s));
    assert!(s.summary.steady_state.is_none() && s.summary.health.is_none());
}

#[test]
fn an_open_loop_run_is_steady_from_its_first_end_and_an_all_at_once_run_never() {
    let records: Vec<RequestRecord> = (0..10).map(|i| request(i, u64::from(i) * 100, &[20, 250], 2)).collect();
    let mut run = test_run(records, 1.2);
    run.config.traffic.request_rate = 10.0;
    let (from, to, basis) = steady_window(&run).unwrap();
    assert_eq!((from, to, basis.as_str()), (250 * MS, 900 * MS, "rate 10 req/s"));
    let s = steady_state(&run).unwrap();
    // Sent at 300..=600 ms, ended by 900 ms.
    assert_eq!(s.summary.completed, 4);

    run.config.traffic.request_rate = f64::INFINITY;
    assert!(steady_window(&run).is_none());
    assert!(Summary::compute(&run).steady_state.is_none());
}

#[test]
fn a_cap_never_reached_has_no_steady_state() {
    let records: Vec<RequestRecord> = (0..5).map(|i| request(i, u64::from(i) * 100, &[20, 50], 2)).collect();
    let mut run = test_run(records, 0.6);
    run.config.traffic.max_concurrency = Some(4);
    assert!(steady_state(&run).is_none());
}

#[test]
fn one_request_at_a_time_is_steady_from_start_to_end_and_so_has_no_block_of_its_own() {
    // Each request sent when the one before ended: the cap of one holds until the last ends.
    let records: Vec<RequestRecord> = (0..5).map(|i| request(i, u64::from(i) * 100, &[20, 100], 2)).collect();
    let mut run = test_run(records, 0.5);
    run.config.traffic.max_concurrency = Some(1);
    assert_eq!(steady_window(&run).map(|w| (w.0, w.1)), Some((0, 500 * MS)));
    assert!(steady_state(&run).is_none() && Summary::compute(&run).steady_state.is_none());
}

#[test]
fn the_last_wave_of_a_synchronised_run_is_not_steady() {
    // Waves of four 100 ms requests under a cap of four; the last wave has two.
    let starts = [0, 0, 0, 0, 100, 100, 100, 100, 200, 200];
    let records: Vec<RequestRecord> =
        starts.iter().enumerate().map(|(i, &s)| request(i as u32, s, &[20, 100], 2)).collect();
    let mut run = test_run(records, 0.3);
    run.config.traffic.max_concurrency = Some(4);
    assert_eq!(steady_window(&run).map(|w| (w.0, w.1)), Some((0, 200 * MS)));
    assert_eq!(steady_state(&run).unwrap().summary.completed, 8);
}

#[test]
fn two_waves_of_a_cap_s_worth_have_no_steady_state() {
    // A cap of four, eight 300 ms requests: the first wave's last send is 3 ms late, the second
    // wave is sent as the first ends (a millisecond apart). Only that straggler and one of the
    // second wave both begin and end inside the window, fewer than the four in flight: no
    // steady state, rather than theirs.
    let starts = [0, 0, 0, 3, 300, 301, 302, 303];
    let records: Vec<RequestRecord> =
        starts.iter().enumerate().map(|(i, &s)| request(i as u32, s, &[50, 300], 2)).collect();
    let mut run = test_run(records, 0.603);
    run.config.traffic.max_concurrency = Some(4);
    assert_eq!(steady_window(&run).map(|w| (w.0, w.1)), Some((3 * MS, 600 * MS)));
    assert_eq!(steady_state(&run), None);
    // Five times the cap's worth turns the slots over: the steady state is there again.
    let starts: Vec<u64> = (0..20).map(|i| i / 4 * 300 + u64::from(i % 4 == 3) * 3).collect();
    let records = starts.iter().enumerate().map(|(i, &s)| request(i as u32, s, &[50, 300], 2)).collect();
    let mut run = test_run(records, 1.503);
    run.config.traffic.max_concurrency = Some(4);
    assert!(steady_state(&run).is_some_and(|s| s.summary.completed >= 4));
}

#[test]
fn slices_count_what_landed_in_them() {
    // Two requests: one 0-900 ms with chunks at 100, 500, 900; one 1200-1700 ms.
    let run = test_run(vec![request(0, 0, &[100, 500, 900], 6), request(1, 1200, &[300, 500], 2)], 2.0);
    let s = slices(&run, 1.0);
    assert_eq!(s.len(), 2);
    let (a, b) = (&s[0], &s[1]);
    assert_eq!((a.start_s, a.end_s, b.start_s, b.end_s), (0.0, 1.0, 1.0, 2.0));
    assert_eq!((a.completed, b.completed), (1, 1));
    assert_eq!((a.output_tokens, b.output_tokens), (6.0, 2.0));
    let ms = |v: Option<f64>| v.map(|v| (v * 1e6).round() / 1e6);
    assert_eq!((ms(a.ttft_p50_ms), ms(b.ttft_p50_ms)), (Some(100.0), Some(300.0)));
    assert_eq!((ms(a.itl_p99_ms), ms(b.itl_p50_ms)), (Some(400.0), Some(200.0)));
    assert_eq!((a.in_flight_max, b.in_flight_max), (1, 1));
    assert!((a.in_flight_mean - 0.9).abs() < 1e-12 && (b.in_flight_mean - 0.5).abs() < 1e-12);
    assert!(slices(&run, 0.0).is_empty() && slices(&run, f64::NAN).is_empty());
}

fn arbitrary_run() -> impl Strategy<Value = RunResult> {
    prop::collection::vec((0u64..3000, prop::collection::vec(1u32..800, 1..6), 1u32..20), 1..25).prop_map(|reqs| {
        let records: Vec<RequestRecord> = reqs
            .into_iter()
            .enumerate()
            .map(|(i, (start, mut gaps, tokens))| {
                let mut t = 0;
                for g in &mut gaps {
                    t += *g;
                    *g = t;
                }
                request(i as u32, start, &gaps, tokens)
            })
            .collect();
        let end_ms = records.iter().map(|r| r.start_ns / MS + u64::from(r.end_us / 1000)).max().unwrap_or(0);
        test_run(records, (end_ms + 1) as f64 / 1000.0)
    })
}

proptest! {
    /// Slices covering the run add up to the run: every token, every request, every first
    /// token, every chunk gap lands in exactly one.
    #[test]
    fn slices_partition_the_run(run in arbitrary_run(), seconds in 0.1..2.0f64) {
        let s = slices(&run, seconds);
        let tokens: f64 = s.iter().map(|x| x.output_tokens).sum();
        let total: u32 = run.records.iter().map(RequestRecord::output_tokens).sum();
        prop_assert!((tokens - f64::from(total)).abs() < 1e-6, "{tokens} != {total}");
        prop_assert_eq!(s.iter().map(|x| x.completed).sum::<u64>(), run.records.len() as u64);
        let peak = crate::metrics::peak_concurrency(&run.records);
        prop_assert_eq!(s.iter().map(|x| x.in_flight_max).max().unwrap_or(0), peak);
        for x in &s {
            prop_assert!(x.in_flight_mean <= x.in_flight_max as f64 + 1e-9);
        }
    }
}

#[test]
fn the_steady_state_prints_as_a_block_of_its_own() {
    let (run, _) = capped_run();
    let block = crate::vllm::text::render_steady_state(&steady_state(&run).unwrap());
    assert!(!block.contains("Serving Benchmark Result"), "no reader may take it for a run of its own");
    insta::assert_snapshot!(block);
}
