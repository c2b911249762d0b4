//! Plans, configs and comparisons shared by the tests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use servebench_client::RunOptions;
use servebench_client::testserver::RequestTruth;
use servebench_core::config::{Api, Backend, RunConfig};
use servebench_core::plan::{Plan, PlannedRequest, TokenCounting};
use servebench_core::record::{RequestRecord, RunResult};

pub const PREFIX: &str = "bench-test-";

/// Tests run one at a time: timing comparisons mean little while other tests load the
/// machine's two cores.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    SERIAL.lock().await
}

/// A plan of `n` requests, request `i` planned at `at(i)` ns; bodies name their index.
pub fn plan(api: Api, n: u32, max_tokens: u32, at: impl Fn(u32) -> u64) -> Plan {
    Plan {
        api,
        requests: (0..n)
            .map(|i| PlannedRequest {
                index: i,
                at_ns: at(i),
                body: Bytes::from(format!(r#"{{"i":{i},"max_tokens":{max_tokens},"stream":true}}"#)),
                max_tokens,
                prompt_tokens: 8,
                input_tokens: Vec::new(),
            })
            .collect(),
        conversations: Vec::new(),
        token_counting: TokenCounting::Estimate,
        notes: Vec::new(),
    }
}

/// A config for the test server at `base_url`.
pub fn config(base_url: &str, api: Api) -> RunConfig {
    let mut c = RunConfig::for_target(base_url, "test-model");
    c.target.backend = match api {
        Api::Completions => Backend::Vllm,
        Api::Chat => Backend::OpenaiChat,
        Api::Responses => Backend::OpenaiResponses,
        Api::Messages => Backend::AnthropicMessages,
        Api::Pooling(form) => Backend::ALL.iter().map(|(b, _)| *b).find(|b| b.api() == Api::Pooling(form)).unwrap(),
    };
    c.target.endpoint = c.target.backend.default_endpoint().to_string();
    c.target.api_url = format!("{}{}", c.target.base_url, c.target.endpoint);
    c.target.request_id_prefix = PREFIX.to_string();
    c.output.disable_progress = true;
    c
}

/// Options for tests: no progress bar, no API key, the log kept in `lines`, and no reading of
/// speculative-decoding counters (the test servers count every connection they see; the
/// reading has its own test).
pub fn options(lines: &Arc<Mutex<Vec<String>>>) -> RunOptions {
    let sink = Arc::clone(lines);
    RunOptions {
        grace: Duration::from_secs(5),
        log: Arc::new(move |l: &str| sink.lock().unwrap().push(l.to_string())),
        api_key: None,
        ready_retry_interval: Duration::from_millis(50),
        progress: false,
        start_at: None,
        spec_decode_counters: false,
    }
}

pub fn quiet() -> RunOptions {
    options(&Arc::new(Mutex::new(Vec::new())))
}

/// A cancellation that never comes.
pub async fn never() {
    std::future::pending::<()>().await;
}

/// The server's truth for each main-run request, by plan index.
pub fn truth_by_index(truth: &[RequestTruth]) -> HashMap<u32, RequestTruth> {
    truth
        .iter()
        .filter(|t| t.status != 0)
        .filter_map(|t| {
            let i = t.request_id.as_deref()?.strip_prefix(PREFIX)?.parse().ok()?;
            Some((i, t.clone()))
        })
        .collect()
}

/// Client-minus-server errors, in µs, of TTFT, of every token chunk's offset from the first
/// (ITL and all later gaps), and of E2EL.
#[derive(Debug, Default)]
pub struct Errors {
    pub ttft: Vec<f64>,
    pub chunk: Vec<f64>,
    pub e2el: Vec<f64>,
}

pub fn errors(result: &RunResult, truth: &[RequestTruth]) -> Errors {
    let truth = truth_by_index(truth);
    let mut e = Errors::default();
    for rec in result.records.iter().filter(|r| r.succeeded()) {
        let t = &truth[&rec.index];
        assert_eq!(rec.chunks_us.len(), t.token_chunks.len(), "request {}", rec.index);
        let server_us = |i: usize| (t.token_chunks[i] - t.arrived).as_secs_f64() * 1e6;
        let client_us = |i: usize| f64::from(rec.chunks_us[i]);
        e.ttft.push(client_us(0) - server_us(0));
        for i in 1..rec.chunks_us.len() {
            e.chunk.push((client_us(i) - client_us(0)) - (server_us(i) - server_us(0)));
        }
        let last = rec.chunks_us.len() - 1;
        e.e2el.push(client_us(last) - server_us(last));
    }
    e
}

/// The p-th percentile (nearest rank) of the absolute values.
pub fn abs_pct(v: &[f64], p: f64) -> f64 {
    let mut a: Vec<f64> = v.iter().map(|x| x.abs()).collect();
    a.sort_by(f64::total_cmp);
    if a.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * a.len() as f64).ceil() as usize;
    a[rank.clamp(1, a.len()) - 1]
}

pub fn all_succeeded(records: &[RequestRecord]) {
    let failed: Vec<_> = records.iter().filter(|r| !r.succeeded()).map(|r| (r.index, r.failure.clone())).collect();
    assert!(failed.is_empty(), "failed requests: {failed:?}");
}
