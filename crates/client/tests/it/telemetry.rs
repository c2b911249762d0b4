//! Server telemetry on real runs: the scripted server's `/metrics` is scraped through the run
//! and its series come back with the result; an endpoint that never answers is noted, and the
//! run goes on.

use std::time::Duration;

use servebench_client::run;
use servebench_client::testserver::{Script, TestServer, TestServerConfig};
use servebench_core::config::Api;
use servebench_core::telemetry::{Digest, Signal};

use crate::common::{all_succeeded, config, never, plan, quiet, serial};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_metrics_are_scraped_through_the_run() {
    let _serial = serial().await;
    let n = 30u32;
    // More than the run sends: the server is still up for the last scrape.
    let server = TestServer::start(TestServerConfig::new(n as usize + 1, |_| Script {
        ttft: Duration::from_millis(100),
        itl: Duration::from_millis(10),
        tokens: 10,
        ..Script::default()
    }))
    .await
    .unwrap();
    let mut cfg = config(&server.base_url(), Api::Completions);
    cfg.traffic.max_concurrency = Some(5);
    cfg.output.server_metrics = true;
    cfg.output.scrape = vec!["http://127.0.0.1:9/metrics".to_string()];
    cfg.output.scrape_interval_s = 0.1;
    let result = run(&cfg, &plan(Api::Completions, n, 10, |_| 0), quiet(), never()).await.unwrap();
    all_succeeded(&result.records);

    let telemetry = result.telemetry.as_ref().expect("scraped");
    assert_eq!(telemetry.interval_s, 0.1);
    let [own, absent] = &telemetry.sources[..] else { panic!("two sources: {telemetry:?}") };
    assert_eq!(own.url, format!("{}/metrics", server.base_url()));
    assert_eq!(own.engine.as_deref(), Some("vllm"));
    assert_eq!(own.failed, 0, "{:?}", own.first_error);
    // Six waves of ~0.2 s at 10 scrapes a second, plus the first and the last.
    assert!(own.scrapes >= 6, "{} scrapes", own.scrapes);
    let running = own.series(Signal::Running).expect("the server exposes its running requests");
    assert_eq!(running.points.len() as u32, own.scrapes);
    assert!(running.points.windows(2).all(|w| w[0][0] < w[1][0]), "times increase: {:?}", running.points);
    let last = running.points.last().unwrap();
    assert_eq!(last[1], 0.0, "the last scrape comes after the run");
    assert!((last[0] - result.duration_s).abs() < 0.5, "{last:?} against a run of {} s", result.duration_s);
    let level = Digest::of(own).running.unwrap();
    assert!(level.max >= 1.0 && level.max <= 5.0, "at most the cap in flight: {level:?}");

    assert_eq!((absent.scrapes, absent.engine.as_ref()), (0, None));
    assert_eq!(absent.failed, own.scrapes, "every scrape of a closed port fails, and is counted");
    assert!(absent.first_error.as_deref().is_some_and(|e| e.contains("127.0.0.1:9")), "{:?}", absent.first_error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_flags_nothing_is_scraped() {
    let _serial = serial().await;
    let server = TestServer::start(TestServerConfig::new(3, |_| Script::default())).await.unwrap();
    let cfg = config(&server.base_url(), Api::Completions);
    let result = run(&cfg, &plan(Api::Completions, 3, 4, |_| 0), quiet(), never()).await.unwrap();
    all_succeeded(&result.records);
    assert_eq!(result.telemetry, None);
}
