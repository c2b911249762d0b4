//! The concurrency cap and the arrival schedule.

use std::time::Duration;

use servebench_client::run;
use servebench_client::testserver::{Script, TestServer, TestServerConfig};
use servebench_core::config::Api;

use crate::common::{all_succeeded, config, never, plan, quiet, serial, truth_by_index};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrency_cap_is_never_exceeded_and_its_wait_is_kept_out_of_ttft() {
    let _serial = serial().await;
    let n = 60;
    let server = TestServer::start(TestServerConfig::new(n, |_| Script {
        ttft: Duration::from_millis(10),
        itl: Duration::from_millis(2),
        tokens: 5,
        ..Script::default()
    }))
    .await
    .unwrap();
    let mut cfg = config(&server.base_url(), Api::Completions);
    cfg.traffic.max_concurrency = Some(4);
    let result = run(&cfg, &plan(Api::Completions, n as u32, 5, |_| 0), quiet(), never()).await.unwrap();
    all_succeeded(&result.records);
    assert_eq!(server.max_in_flight(), 4, "server-side peak of concurrent requests");

    // Client side: intervals [start, end] never overlap more than 4 deep.
    let mut events: Vec<(u64, i32)> =
        result.records.iter().flat_map(|r| [(r.start_ns, 1), (r.start_ns + u64::from(r.end_us) * 1000, -1)]).collect();
    events.sort_by_key(|&(t, d)| (t, d));
    let peak = events.iter().scan(0, |c, &(_, d)| {
        *c += d;
        Some(*c)
    });
    assert_eq!(peak.max(), Some(4));

    // Everything arrived at once; later requests waited for a slot, and TTFT excludes that wait.
    let truth = truth_by_index(&server.truth());
    let waited = result.records.iter().filter(|r| r.client_queue_s() > 0.015).count();
    assert!(waited > n / 2, "only {waited} requests waited for a slot");
    for r in result.records.iter().filter(|r| r.client_queue_s() > 0.05) {
        let server_ttft = truth[&r.index].token_chunks[0] - truth[&r.index].arrived;
        let excess = r.ttft_s() - server_ttft.as_secs_f64();
        assert!(
            excess < 0.015,
            "request {} waited {} s and its TTFT exceeds the server's by {excess} s",
            r.index,
            r.client_queue_s()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrivals_follow_the_absolute_schedule() {
    let _serial = serial().await;
    let n = 80u32;
    let gap_ns = 10_000_000; // 100 requests per second
    let server = TestServer::start(TestServerConfig::new(n as usize, |_| Script {
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(1),
        tokens: 2,
        ..Script::default()
    }))
    .await
    .unwrap();
    let cfg = config(&server.base_url(), Api::Completions);
    let result = run(&cfg, &plan(Api::Completions, n, 2, |i| u64::from(i) * gap_ns), quiet(), never()).await.unwrap();
    all_succeeded(&result.records);
    for r in &result.records {
        assert!(r.arrival_ns >= r.planned_ns, "request {} released before its time", r.index);
        assert!(r.start_ns >= r.arrival_ns);
    }
    let first = &result.records[0];
    let last = &result.records[n as usize - 1];
    let span = (last.arrival_ns - first.arrival_ns) as f64 * 1e-9;
    let rate = f64::from(n - 1) / span;
    let mut lags: Vec<f64> = result.records.iter().map(|r| r.dispatch_lag_s() * 1e3).collect();
    lags.sort_by(f64::total_cmp);
    eprintln!(
        "100 req/s planned: {rate:.1} achieved; dispatch lag ms median {:.2}, max {:.2}",
        lags[lags.len() / 2],
        lags[lags.len() - 1]
    );
    assert!((rate - 100.0).abs() < 5.0, "achieved {rate} req/s");

    // The server saw the same spacing.
    let truth = truth_by_index(&server.truth());
    let server_span = (truth[&(n - 1)].arrived - truth[&0].arrived).as_secs_f64();
    assert!((server_span - span).abs() < 0.02, "server span {server_span} s vs client {span} s");
    // The run lasts from just before dispatch to the last response's end.
    assert!(result.duration_s >= last.start_s());
}
