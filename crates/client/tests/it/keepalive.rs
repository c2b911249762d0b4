//! Servers that do not keep connections alive as they say lose no requests.

use std::collections::HashMap;
use std::time::Duration;

use servebench_client::run;
use servebench_client::testserver::{KeepAlive, Script, TestServer, TestServerConfig};
use servebench_core::config::Api;

use crate::common::{PREFIX, all_succeeded, config, never, plan, quiet, serial};

fn server_config(n: usize, keep_alive: KeepAlive) -> TestServerConfig {
    let mut c = TestServerConfig::new(n, |_| Script {
        ttft: Duration::from_millis(3),
        itl: Duration::from_millis(1),
        tokens: 3,
        ..Script::default()
    });
    c.keep_alive = keep_alive;
    c
}

/// How many times the server answered each main-run request.
fn answers(server: &TestServer) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for t in server.truth().into_iter().filter(|t| t.status == 200) {
        *m.entry(t.request_id.unwrap_or_default()).or_insert(0) += 1;
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_closes_after_every_response_loses_nothing() {
    let _serial = serial().await;
    let n = 30;
    let server = TestServer::start(server_config(n, KeepAlive::CloseAfterResponse)).await.unwrap();
    let mut cfg = config(&server.base_url(), Api::Completions);
    cfg.traffic.max_concurrency = Some(2);
    let result = run(&cfg, &plan(Api::Completions, n as u32, 3, |_| 0), quiet(), never()).await.unwrap();
    all_succeeded(&result.records);
    let answers = answers(&server);
    assert_eq!(answers.len(), n);
    assert!(answers.values().all(|&c| c == 1), "a request was answered twice: {answers:?}");
    // Every answer came on a connection of its own: none was reused after the server closed it.
    assert_eq!(server.connections(), n as u64);
    // And each record says so: a connect of its own, before the response head.
    assert!(result.records.iter().all(|r| r.http.connect_us.is_some() && r.http.tls_us.is_none()));
    let breakdown = servebench_core::metrics::HttpBreakdown::of(&result.records).unwrap();
    assert_eq!((breakdown.responses, breakdown.new_connections), (n as u64, n as u64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_alive_connections_are_opened_once_and_every_response_is_timed() {
    let _serial = serial().await;
    let n = 24;
    let server = TestServer::start(server_config(n, KeepAlive::Keep)).await.unwrap();
    let mut cfg = config(&server.base_url(), Api::Completions);
    cfg.traffic.max_concurrency = Some(3);
    let result = run(&cfg, &plan(Api::Completions, n as u32, 3, |_| 0), quiet(), never()).await.unwrap();
    all_succeeded(&result.records);
    let opened = result.records.iter().filter(|r| r.http.connect_us.is_some()).count() as u64;
    assert_eq!(opened, server.connections(), "a connect is recorded once per connection the server saw");
    assert!((1..=3).contains(&opened), "{opened} connections for a cap of 3");
    for r in &result.records {
        let (head, first) = (r.http.headers_us.unwrap(), r.http.first_byte_us.unwrap());
        // The server sends its head at once and the first token 3 ms later.
        assert!(head <= first && first <= r.chunks_us[0], "{:?} then {:?}", r.http, r.chunks_us);
        assert!(r.chunks_us[0] >= 3_000, "{:?}", r.chunks_us);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_dropped_on_a_reused_connection_is_sent_once_more_on_a_fresh_one() {
    let _serial = serial().await;
    let n = 20;
    let server = TestServer::start(server_config(n, KeepAlive::DropSecondRequest)).await.unwrap();
    let mut cfg = config(&server.base_url(), Api::Completions);
    cfg.traffic.max_concurrency = Some(1);
    let result = run(&cfg, &plan(Api::Completions, n as u32, 3, |_| 0), quiet(), never()).await.unwrap();
    all_succeeded(&result.records);
    let dropped: Vec<String> =
        server.truth().into_iter().filter(|t| t.status == 0).map(|t| t.request_id.unwrap_or_default()).collect();
    let retried: Vec<String> =
        result.records.iter().filter(|r| r.retried).map(|r| format!("{PREFIX}{}", r.index)).collect();
    assert!(!dropped.is_empty(), "the server never saw a reused connection");
    assert_eq!(retried, dropped, "exactly the dropped requests were sent again");
    assert!(answers(&server).values().all(|&c| c == 1));
}
