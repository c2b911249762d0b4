//! The alignment over HTTP against the scripted test server answering in each server's
//! `/tokenize` schema: chosen by `--backend` or detected, with a server that closes every
//! connection after each response (as llama.cpp does), one that answers garbage, and the time
//! budget.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use servebench_core::config::{Api, Backend, RangeRatio, RunConfig, WorkloadSpec};
use servebench_core::plan::{Plan, TokenCounting};
use servebench_workload::{BodyBuilder, PlanPrompts, build_plan};

use super::super::{Alignment, align_prompts, align_with};
use super::{Dialect, HttpServer};
use crate::runner::Logger;
use crate::testserver::{KeepAlive, Script, TestServer, TestServerConfig, TokenizeSchema};

async fn server(schema: TokenizeSchema, keep_alive: KeepAlive) -> TestServer {
    let mut config = TestServerConfig::new(1, |_| Script::default());
    config.tokenize = schema;
    config.keep_alive = keep_alive;
    TestServer::start(config).await.expect("the test server starts")
}

fn config(base_url: &str, backend: Backend, n: usize, input_len: u32) -> RunConfig {
    let mut c = RunConfig::for_target(base_url, "test-model");
    c.target.backend = backend;
    c.target.endpoint = backend.default_endpoint().to_string();
    c.workload = WorkloadSpec::Random {
        input_len,
        output_len: 4,
        range_ratio: RangeRatio { input: 0.0, output: 0.0 },
        prefix_len: 0,
        media: None,
        batch_size: 1,
    };
    c.traffic.num_prompts = n;
    c
}

fn recorder() -> (Logger, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    (Arc::new(move |l: &str| sink.lock().unwrap().push(l.to_string())), lines)
}

fn texts(plan: &Plan, c: &RunConfig) -> Vec<String> {
    let bodies = BodyBuilder::new(c);
    (0..plan.requests.len()).map(|i| plan.prompt_text(i, &bodies).expect("a prompt body")).collect()
}

/// Gives request `i` a prompt one word too long, so that it has to be cut with `/detokenize`.
fn lengthen(plan: &mut Plan, c: &RunConfig, i: usize) {
    let prompt = format!("{} surplus", texts(plan, c)[i]);
    let edit = servebench_workload::PromptEdit { position: i, prompt, prompt_tokens: plan.requests[i].prompt_tokens };
    plan.rewrite_prompts(&BodyBuilder::new(c), &[edit]).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_schema_aligns_prompts_exactly_chosen_or_detected() {
    let cases = [
        (TokenizeSchema::Vllm, Backend::Vllm, KeepAlive::Keep),
        (TokenizeSchema::Sglang, Backend::Sglang, KeepAlive::Keep),
        (TokenizeSchema::Sglang, Backend::Vllm, KeepAlive::Keep),
        (TokenizeSchema::LlamaCpp, Backend::LlamaCpp, KeepAlive::CloseAfterResponse),
        (TokenizeSchema::LlamaCpp, Backend::Vllm, KeepAlive::CloseAfterResponse),
        (TokenizeSchema::LlamaCpp, Backend::OpenaiChat, KeepAlive::CloseAfterResponse),
    ];
    for (schema, backend, keep_alive) in cases {
        let what = format!("{schema:?} server, --backend {}", backend.name());
        let server = server(schema, keep_alive).await;
        let c = config(&server.base_url(), backend, 40, 16);
        let mut plan = build_plan(&c, None).unwrap();
        lengthen(&mut plan, &c, 7);
        let (log, lines) = recorder();
        let started = Instant::now();
        let outcome = align_prompts(&mut plan, &c, None, None, &log).await;
        let took = started.elapsed();
        let lines = lines.lock().unwrap().clone();

        assert_eq!(outcome, Alignment::Fitted { changed: 1, off: 0, uncounted: 0 }, "{what}: {lines:?}");
        let added = if backend.api() == Api::Chat { 2 } else { 0 };
        for (i, text) in texts(&plan, &c).iter().enumerate() {
            assert_eq!(server.token_ids(text).len(), 16, "{what}: request {i}: {text:?}");
            assert_eq!(plan.requests[i].prompt_tokens, 16 + added, "{what}: the server's count of request {i}");
        }
        assert!(matches!(plan.token_counting, TokenCounting::Server { .. }), "{what}");
        assert!(!lines.iter().any(|l| l.contains("mismatch") || l.starts_with("WARNING")), "{what}: {lines:?}");
        let detected = lines.iter().any(|l| l.contains("speaks llama.cpp's schema"));
        assert_eq!(detected, schema == TokenizeSchema::LlamaCpp && backend != Backend::LlamaCpp, "{what}: {lines:?}");
        let last = lines.last().unwrap();
        assert!(last.starts_with("Prompt alignment took ") && last.ends_with("at most 4 at a time."), "{last}");
        assert!(server.max_tokenize_in_flight() <= 4, "{what}: {}", server.max_tokenize_in_flight());
        assert!(took < Duration::from_secs(2), "{what}: took {took:?}");
        if keep_alive == KeepAlive::CloseAfterResponse {
            // Requests sent on connections the server had closed were sent again, once.
            let truth = server.truth();
            assert!(truth.iter().all(|t| t.status == 200 || t.status == 0), "{what}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_in_no_known_schema_disables_alignment_with_one_line() {
    let server = server(TokenizeSchema::Garbage, KeepAlive::Keep).await;
    for backend in [Backend::Vllm, Backend::LlamaCpp] {
        let c = config(&server.base_url(), backend, 5, 8);
        let mut plan = build_plan(&c, None).unwrap();
        let before = plan.clone();
        let (log, lines) = recorder();
        assert_eq!(align_prompts(&mut plan, &c, None, None, &log).await, Alignment::Unavailable);
        let lines = lines.lock().unwrap().clone();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("WARNING: /tokenize unavailable (POST "), "{}", lines[0]);
        assert!(lines[0].contains("none of the /tokenize schemas servebench reads"), "{}", lines[0]);
        assert!(lines[0].ends_with("skipping alignment."), "{}", lines[0]);
        assert_eq!(plan, before);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_llama_cpp_answer_to_a_vllm_call_is_never_a_count_of_zero() {
    // Told it is llama.cpp, the client never sends vLLM's request at all.
    let server = server(TokenizeSchema::LlamaCpp, KeepAlive::CloseAfterResponse).await;
    let quiet: Logger = Arc::new(|_: &str| {});
    let told = HttpServer::new(&server.base_url(), "m", &[], false, 2, Some(Dialect::LlamaCpp), quiet.clone()).unwrap();
    use super::super::TokenServer as _;
    assert_eq!(told.tokenize("one two three", false).await.unwrap().len(), 3);
    assert_eq!(told.detokenize(&[0, 1]).await.unwrap(), " one two");
    // Not told, it finds out from the first answer and keeps to it.
    let detects = HttpServer::new(&server.base_url(), "m", &[], false, 2, None, quiet).unwrap();
    assert_eq!(detects.tokenize("one two three four", false).await.unwrap().len(), 4);
    assert_eq!(detects.dialect(), Some(Dialect::LlamaCpp));
    assert_eq!(detects.calls(), 2, "vLLM's call, then llama.cpp's");
    assert_eq!(detects.tokenize("five", false).await.unwrap().len(), 1);
    assert_eq!(detects.calls(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_time_budget_stops_the_alignment_and_the_run_goes_on() {
    let server = server(TokenizeSchema::Vllm, KeepAlive::Keep).await;
    let c = config(&server.base_url(), Backend::Vllm, 400, 8);
    let mut plan = build_plan(&c, None).unwrap();
    let (log, lines) = recorder();
    let budget = Duration::from_millis(40);
    let http =
        HttpServer::with_budget(&server.base_url(), "test-model", &[], false, 4, None, log.clone(), budget).unwrap();
    let started = Instant::now();
    let outcome = align_with(Arc::new(http), &mut plan, &c, None, &log).await;
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    let Alignment::Fitted { uncounted, .. } = outcome else { panic!("{outcome:?}") };
    assert!(uncounted > 0 && uncounted < 400, "{uncounted}");
    assert_eq!(plan.token_counting, TokenCounting::Estimate, "not every prompt was counted");
    let lines = lines.lock().unwrap().clone();
    assert_eq!(
        lines.last().map(String::as_str),
        Some(
            "WARNING: prompt alignment stopped at its 0.04 s budget; prompts not yet aligned are sent as planned, \
             and the run goes on."
        ),
        "{lines:?}"
    );
}
