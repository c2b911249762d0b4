//! The health verdict on real runs: a client whose runtime was blocked mid-run is client-bound
//! from the stall on; an unhindered one is ok.

use std::time::Duration;

use servebench_client::run;
use servebench_client::testserver::{RequestInfo, Script, TestServer, TestServerConfig};
use servebench_core::config::Api;
use servebench_core::metrics::{Health, Summary, Verdict};

use crate::common::{PREFIX, all_succeeded, config, never, plan, quiet, serial};

const N: u32 = 20;
/// Requests are planned this far apart.
const GAP_MS: u64 = 25;

fn index(info: &RequestInfo<'_>) -> Option<u32> {
    info.request_id.and_then(|id| id.strip_prefix(PREFIX)).and_then(|i| i.parse().ok())
}

/// One run of `N` requests `GAP_MS` apart; when request `block_at` arrives, the server's
/// handler (on the same runtime as the client) blocks its thread for `block`.
async fn health_of_run(block_at: Option<u32>, block: Duration) -> Health {
    let server = TestServer::start(TestServerConfig::new(N as usize, move |info| {
        if block_at.is_some() && index(info) == block_at {
            std::thread::sleep(block);
        }
        Script { ttft: Duration::from_millis(10), itl: Duration::from_millis(5), tokens: 4, ..Script::default() }
    }))
    .await
    .unwrap();
    let cfg = config(&server.base_url(), Api::Completions);
    let result = run(&cfg, &plan(Api::Completions, N, 4, |i| u64::from(i) * GAP_MS * 1_000_000), quiet(), never())
        .await
        .unwrap();
    all_succeeded(&result.records);
    let obs = result.client.as_ref().expect("a measured run carries the client's observations");
    assert!(obs.ticks > 10, "{obs:?}");
    Summary::compute(&result).health.expect("and so a health verdict")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_client_whose_runtime_was_blocked_is_client_bound_from_the_stall() {
    let _serial = serial().await;
    // Request 8 is planned at 200 ms; the one worker thread then stops for 250 ms. This machine
    // may stall the client earlier too (other work on its cores), which the verdict rightly
    // reports from then on; one run in three must show the injected stall alone.
    let mut seen = Vec::new();
    for _ in 0..3 {
        let h = health_of_run(Some(8), Duration::from_millis(250)).await;
        let from_the_stall = match h.verdict {
            Verdict::ClientBound { from_s } => (0.15..0.3).contains(&from_s),
            _ => false,
        };
        if from_the_stall {
            assert!(h.timer_lateness.max_ms >= 150.0, "{h:?}");
            assert!(h.dispatch_lag_ms.is_some_and(|l| l.max_ms >= 150.0), "later requests left late: {h:?}");
            assert!(h.reasons.iter().any(|r| r.contains("late")), "{:?}", h.reasons);
            return;
        }
        assert!(!matches!(h.verdict, Verdict::Ok), "a blocked client was judged ok: {h:?}");
        seen.push(h);
    }
    panic!("three blocked runs were never judged client-bound from the stall (0.15 to 0.3 s): {seen:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhindered_client_is_ok() {
    let _serial = serial().await;
    // This machine may be busy with other work, which is a real stall of the client; one run
    // in three must be clean.
    let mut seen = Vec::new();
    for _ in 0..3 {
        let h = health_of_run(None, Duration::ZERO).await;
        if h.verdict == Verdict::Ok {
            assert!(h.reasons.is_empty() && h.connection_errors == 0 && h.retries == 0, "{h:?}");
            assert!(h.cpu.is_some_and(|c| c.seconds > 0.0), "{h:?}");
            return;
        }
        seen.push(h);
    }
    panic!("three unhindered runs were all judged client-bound: {seen:#?}");
}
