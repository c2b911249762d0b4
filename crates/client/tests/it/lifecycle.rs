//! The run's phases: ready check, warm-up, interruption, the result's bookkeeping, and the
//! helpers the CLI calls around a run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use servebench_client::testserver::{RequestInfo, Script, TestServer, TestServerConfig};
use servebench_client::{RunError, fetch_metrics, fetch_models, run};
use servebench_core::config::Api;
use servebench_core::record::{FailureKind, TokenSource};

use crate::common::{PREFIX, all_succeeded, config, never, options, plan, quiet, serial};

fn index(info: &RequestInfo<'_>) -> Option<u32> {
    info.request_id.and_then(|id| id.strip_prefix(PREFIX)).and_then(|i| i.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_returns_what_it_measured() {
    let _serial = serial().await;
    let n = 40u32;
    // Requests every 50 ms; the first seven end ~320 ms after being sent, the rest would take 10 s.
    let server = TestServer::start(TestServerConfig::new(n as usize, |info| {
        let slow = index(info).is_none_or(|i| i > 6);
        Script {
            ttft: Duration::from_millis(if slow { 10_000 } else { 300 }),
            itl: Duration::from_millis(10),
            tokens: 3,
            ..Script::default()
        }
    }))
    .await
    .unwrap();
    let cfg = config(&server.base_url(), Api::Completions);
    let mut opts = quiet();
    opts.grace = Duration::from_secs(1);
    let started = std::time::Instant::now();
    let cancel = tokio::time::sleep(Duration::from_millis(475));
    let result = run(&cfg, &plan(Api::Completions, n, 3, |i| u64::from(i) * 50_000_000), opts, cancel).await.unwrap();
    let took = started.elapsed();

    assert!(result.interrupted);
    assert_eq!(result.records.len(), n as usize);
    assert!(took < Duration::from_secs(5), "the run took {took:?} to stop");
    let unsent: Vec<u32> = result.records.iter().filter(|r| r.never_sent()).map(|r| r.index).collect();
    assert_eq!(result.not_sent, unsent.len());
    assert!(result.not_sent >= 25, "only {} never sent", result.not_sent);
    for r in &result.records {
        if r.index <= 6 {
            assert!(r.succeeded(), "request {} should have finished within the grace period: {:?}", r.index, r.failure);
        } else if unsent.contains(&r.index) {
            assert_eq!(r.failure.as_ref().map(|f| f.kind), Some(FailureKind::NotSent), "request {}", r.index);
        } else {
            assert_eq!(r.failure.as_ref().map(|f| f.kind), Some(FailureKind::Interrupted), "request {}", r.index);
        }
    }
    let cut_off = result.records.iter().filter(|r| r.index > 6 && !unsent.contains(&r.index)).count();
    assert!(cut_off >= 1, "no request was in flight when the run stopped");
    assert!(result.notes.iter().any(|n| n.starts_with("interrupted")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ready_check_retries_request_zero_until_the_server_answers() {
    let _serial = serial().await;
    let server = TestServer::start(TestServerConfig::new(5, |info| Script {
        status: if info.seq < 2 { 503 } else { 200 },
        tokens: 2,
        ..Script::default()
    }))
    .await
    .unwrap();
    let mut cfg = config(&server.base_url(), Api::Completions);
    cfg.traffic.ready_check_timeout_s = 10.0;
    let lines = Arc::new(Mutex::new(Vec::new()));
    let result = run(&cfg, &plan(Api::Completions, 2, 2, |_| 0), options(&lines), never()).await.unwrap();
    all_succeeded(&result.records);
    let lines = lines.lock().unwrap().clone();
    let not_ready = "Endpoint is not ready. Error='Service Unavailable: {\"object\":\"error\",\"message\":\"scripted failure\",\"type\":\"BadRequestError\",\"param\":null,\"code\":503}'";
    assert_eq!(
        lines,
        [
            "Starting initial single prompt test run...",
            "Waiting for endpoint to become up in 10 seconds",
            not_ready,
            not_ready,
            "Initial test run completed.",
            "Starting main benchmark run...",
            "Traffic request rate: inf",
            "Burstiness factor: 1.0 (Poisson process)",
            "Maximum request concurrency: None",
        ]
    );
    let truth = server.truth();
    assert!(truth[..3].iter().all(|t| t.request_id.is_none()), "ready-check requests carry no x-request-id");
    assert!(truth[3..].iter().all(|t| t.request_id.is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_check_that_never_succeeds_fails_the_run_with_vllms_message() {
    let _serial = serial().await;
    let server =
        TestServer::start(TestServerConfig::new(100, |_| Script { status: 400, ..Script::default() })).await.unwrap();
    let mut cfg = config(&server.base_url(), Api::Completions);
    cfg.traffic.ready_check_timeout_s = 0.3;
    let err = run(&cfg, &plan(Api::Completions, 2, 2, |_| 0), quiet(), never()).await.unwrap_err();
    assert!(matches!(err, RunError::ReadyCheckFailed(_)));
    assert!(err.to_string().starts_with(
        "Initial test run failed - Please make sure benchmark arguments are correctly specified. Error: Bad Request"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warmups_are_copies_of_request_zero_sent_before_the_timed_run() {
    let _serial = serial().await;
    let server =
        TestServer::start(TestServerConfig::new(7, |_| Script { tokens: 2, ..Script::default() })).await.unwrap();
    let mut cfg = config(&server.base_url(), Api::Chat);
    cfg.traffic.num_warmups = 3;
    cfg.traffic.max_concurrency = Some(2);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let result = run(&cfg, &plan(Api::Chat, 4, 2, |_| 0), options(&lines), never()).await.unwrap();
    all_succeeded(&result.records);
    let lines = lines.lock().unwrap().clone();
    assert_eq!(
        lines[..5],
        [
            "Starting initial single prompt test run...",
            "Skipping endpoint ready check.",
            "Warming up with 3 requests...",
            "Warmup run completed.",
            "Starting main benchmark run...",
        ]
    );
    let truth = server.truth();
    assert_eq!(truth.len(), 7);
    assert!(truth[..3].iter().all(|t| t.request_id.is_none()));
    let main_start = truth[3..].iter().map(|t| t.arrived).min().unwrap();
    assert!(truth[..3].iter().all(|t| t.ended <= main_start), "warm-ups end before the timed run");
    assert!(server.max_in_flight() <= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_result_carries_its_bookkeeping() {
    let _serial = serial().await;
    let server =
        TestServer::start(TestServerConfig::new(2, |_| Script { tokens: 2, ..Script::default() })).await.unwrap();
    let cfg = config(&server.base_url(), Api::Completions);
    let result = run(&cfg, &plan(Api::Completions, 2, 2, |_| 0), quiet(), never()).await.unwrap();
    assert_eq!(result.config, cfg);
    assert_eq!(result.date.len(), "20260101-000000".len());
    assert!(result.started_at.contains('T'));
    assert_eq!(result.token_source, TokenSource::ServerUsage);
    assert!(!result.interrupted && result.not_sent == 0);
    let last_end = result.records.iter().map(|r| r.start_s() + f64::from(r.end_us) * 1e-6).fold(0.0, f64::max);
    assert!(
        result.duration_s >= last_end,
        "duration {} s ends before the last request ({last_end} s)",
        result.duration_s
    );
    assert!(result.records.iter().all(|r| r.prompt_tokens_client.is_none()), "estimated counts are not exact");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_and_metrics_are_fetched() {
    let _serial = serial().await;
    let server = TestServer::start(TestServerConfig::new(1, |_| Script::default())).await.unwrap();
    let model = fetch_models(&server.base_url(), &[], None, false).await.unwrap();
    assert_eq!(model.id, "test-model");
    assert_eq!(model.root.as_deref(), Some("servebench/test-model"));
    let metrics = fetch_metrics(&format!("{}/", server.base_url()), &[], None, false).await.unwrap();
    assert!(metrics.contains("vllm:num_requests_running{model_name=\"test-model\"} 0"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_go_one_at_a_time_beside_the_run_outside_its_cap() {
    let _serial = serial().await;
    // The run's four requests take 300 ms to their first token, two at a time; a probe
    // ("Hi", one token) is answered in 5 ms.
    let probe_body = Arc::new(Mutex::new(None::<String>));
    let seen = Arc::clone(&probe_body);
    let server = TestServer::start(TestServerConfig::new(200, move |info| {
        if info.request_id.is_none() {
            *seen.lock().unwrap() = Some(String::from_utf8_lossy(info.body).into_owned());
            return Script { ttft: Duration::from_millis(5), tokens: 1, ..Script::default() };
        }
        Script { ttft: Duration::from_millis(300), itl: Duration::from_millis(10), tokens: 3, ..Script::default() }
    }))
    .await
    .unwrap();
    let mut cfg = config(&server.base_url(), Api::Completions);
    cfg.traffic.max_concurrency = Some(2);
    cfg.traffic.probe_request_rate = Some(20.0);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let result = run(&cfg, &plan(Api::Completions, 4, 3, |_| 0), options(&lines), never()).await.unwrap();
    all_succeeded(&result.records);
    assert!(lines.lock().unwrap().iter().any(|l| l == "Probe request rate: 20.0 req/s"));

    let probes = &result.probes;
    assert!(probes.len() >= 5, "{} probes in a run of about 0.65 s at 20 a second", probes.len());
    assert!(probes.iter().all(|p| p.error.is_none()), "{probes:?}");
    assert!(probes.windows(2).all(|w| w[0].sent_s + w[0].latency_s <= w[1].sent_s), "one at a time: {probes:?}");
    assert!(probes.iter().all(|p| p.latency_s < 0.2), "probes wait for no slot of the cap: {probes:?}");
    let body: serde_json::Value = serde_json::from_str(probe_body.lock().unwrap().as_deref().unwrap()).unwrap();
    assert_eq!((&body["prompt"], &body["max_tokens"]), (&serde_json::json!("Hi"), &serde_json::json!(1)));
    // Both of the run's slots were busy while a probe went through.
    assert_eq!(server.max_in_flight(), 3);
    let truth = server.truth();
    let run_end = truth.iter().filter(|t| t.request_id.is_some()).map(|t| t.ended).max().unwrap();
    let late = truth.iter().filter(|t| t.request_id.is_none() && t.arrived > run_end).count();
    assert!(late <= 1, "no probe is sent once the run has ended ({late} were)");
}
