//! Failed requests are data: each is recorded with its kind and the run goes on.

use std::time::Duration;

use servebench_client::stream::NO_TOKEN_MESSAGE;
use servebench_client::testserver::{RequestInfo, Script, TestServer, TestServerConfig};
use servebench_client::{RunError, run};
use servebench_core::config::{Api, StopRules};
use servebench_core::record::FailureKind;

use crate::common::{PREFIX, config, never, plan, quiet, serial};

fn index(info: &RequestInfo<'_>) -> u32 {
    info.request_id.and_then(|id| id.strip_prefix(PREFIX)).and_then(|i| i.parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_failure_is_recorded_with_its_kind_and_the_run_completes() {
    let _serial = serial().await;
    let n = 24;
    let server = TestServer::start(TestServerConfig::new(n, |info| {
        let ok =
            Script { ttft: Duration::from_millis(5), itl: Duration::from_millis(2), tokens: 4, ..Script::default() };
        match index(info) % 6 {
            0 => Script { status: 500, ..ok },
            1 => Script { error_after: Some(2), ..ok },
            2 => Script { close_after: Some(2), ..ok },
            3 => Script { tokens: 0, ..ok },
            4 => Script { ttft: Duration::from_secs(5), ..ok },
            _ => ok,
        }
    }))
    .await
    .unwrap();
    let mut cfg = config(&server.base_url(), Api::Chat);
    cfg.traffic.max_concurrency = Some(8);
    cfg.target.request_timeout_s = 0.5;
    let result = run(&cfg, &plan(Api::Chat, n as u32, 4, |_| 0), quiet(), never()).await.unwrap();
    assert_eq!(result.records.len(), n);
    assert!(!result.interrupted);
    for r in &result.records {
        let kind = r.failure.as_ref().map(|f| f.kind);
        let message = r.failure.as_ref().map_or("", |f| f.message.as_str());
        match r.index % 6 {
            0 => {
                assert_eq!(kind, Some(FailureKind::HttpStatus));
                assert_eq!(r.status, 500);
                assert!(message.starts_with("Internal Server Error: "), "{message}");
                assert!(message.contains("scripted failure"), "{message}");
            }
            1 => {
                assert_eq!(kind, Some(FailureKind::InBandError));
                assert_eq!(message, "scripted in-band error (code 500)");
                assert_eq!(r.chunks_us.len(), 2, "tokens before the error are kept");
            }
            2 => {
                assert_eq!(kind, Some(FailureKind::Stream));
                assert!(message.starts_with("the stream broke off"), "{message}");
                assert_eq!(r.chunks_us.len(), 2);
            }
            3 => {
                assert_eq!(kind, Some(FailureKind::NoToken));
                assert_eq!(message, NO_TOKEN_MESSAGE);
            }
            4 => {
                assert_eq!(kind, Some(FailureKind::Timeout));
                assert!(r.end_us >= 500_000, "timed out after {} µs", r.end_us);
            }
            _ => assert_eq!(kind, None, "request {} failed: {message}", r.index),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_fails_every_request_as_a_connect_error() {
    let _serial = serial().await;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let cfg = config(&format!("http://127.0.0.1:{port}"), Api::Completions);
    let result = run(&cfg, &plan(Api::Completions, 3, 4, |_| 0), quiet(), never()).await.unwrap();
    for r in &result.records {
        let f = r.failure.as_ref().expect("no server, no success");
        assert_eq!(f.kind, FailureKind::Connect);
        assert!(f.message.contains(&format!("127.0.0.1:{port}")), "{}", f.message);
        assert_eq!(r.status, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_targets_and_mixed_plans_are_refused_before_sending() {
    let _serial = serial().await;
    let cfg = config("ftp://127.0.0.1:1", Api::Completions);
    let err = run(&cfg, &plan(Api::Completions, 1, 4, |_| 0), quiet(), never()).await.unwrap_err();
    assert!(matches!(err, RunError::Http(_)), "{err}");

    let cfg = config("http://127.0.0.1:1", Api::Chat);
    let mut p = plan(Api::Chat, 1, 4, |_| 0);
    p.conversations.push(servebench_core::plan::ConversationPlan { id: 0, at_ns: 0, system: None, turns: Vec::new() });
    let err = run(&cfg, &p, quiet(), never()).await.unwrap_err();
    assert!(matches!(err, RunError::MixedPlan), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_failures_stops_the_run_and_keeps_what_it_measured() {
    let _serial = serial().await;
    let n = 200;
    // Every request fails at once; one at a time, a few milliseconds apart.
    let server =
        TestServer::start(TestServerConfig::new(n, |_| Script { status: 503, ..Script::default() })).await.unwrap();
    let mut cfg = config(&server.base_url(), Api::Completions);
    cfg.traffic.max_concurrency = Some(1);
    cfg.traffic.stop = StopRules { max_failures: Some(5), stall_timeout_s: None };
    let result =
        run(&cfg, &plan(Api::Completions, n as u32, 4, |i| u64::from(i) * 5_000_000), quiet(), never()).await.unwrap();
    assert!(result.interrupted);
    let why = result.stopped_by.as_deref().unwrap();
    assert!(why.ends_with("requests failed (--max-failures 5)"), "{why}");
    let failed =
        result.records.iter().filter(|r| r.failure.as_ref().is_some_and(|f| f.kind == FailureKind::HttpStatus)).count();
    // The watchdog reads the counters every 50 ms: a few more may fail before it does.
    assert!((5..n / 2).contains(&failed), "{failed} failed");
    assert!(result.not_sent > n / 2, "{} never sent", result.not_sent);
    assert!(result.notes.iter().any(|l| l.starts_with("interrupted (stopped: ")), "{:?}", result.notes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_is_stopped_by_the_stall_timeout() {
    let _serial = serial().await;
    // The first request answers; the rest are accepted and then nothing comes for a minute.
    let server = TestServer::start(TestServerConfig::new(8, |info| {
        let ok =
            Script { ttft: Duration::from_millis(5), itl: Duration::from_millis(2), tokens: 4, ..Script::default() };
        if index(info) == 0 { ok } else { Script { ttft: Duration::from_secs(60), ..ok } }
    }))
    .await
    .unwrap();
    let mut cfg = config(&server.base_url(), Api::Chat);
    cfg.traffic.max_concurrency = Some(2);
    cfg.traffic.stop = StopRules { max_failures: None, stall_timeout_s: Some(0.3) };
    let mut opts = quiet();
    opts.grace = Duration::from_millis(200);
    let started = std::time::Instant::now();
    let result = run(&cfg, &plan(Api::Chat, 8, 4, |_| 0), opts, never()).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(30), "stopped long before the server's minute");
    let why = result.stopped_by.as_deref().unwrap();
    assert!(why.starts_with("2 requests in flight received no token and none ended for "), "{why}");
    assert!(why.ends_with("(--stall-timeout 0.3)"), "{why}");
    assert!(result.records[0].succeeded(), "the answered request is kept");
    let cut = result.records.iter().filter(|r| r.failure.as_ref().is_some_and(|f| f.kind == FailureKind::Interrupted));
    assert_eq!(cut.count(), 2, "the two hung requests are cut off after their grace");
    assert_eq!(result.not_sent, 5);
}
