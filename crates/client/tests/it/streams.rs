//! Stream shapes: usage placement, the chat role chunk, multi-token chunks, collected text.

use std::time::Duration;

use servebench_client::run;
use servebench_client::testserver::{Script, TestServer, TestServerConfig, UsagePlacement};
use servebench_core::config::Api;
use servebench_core::record::Usage;

use crate::common::{all_succeeded, config, never, plan, quiet, serial, truth_by_index};

async fn one_run(api: Api, n: usize, script: Script) -> (servebench_core::record::RunResult, TestServer) {
    let server = TestServer::start(TestServerConfig::new(n, move |_| script.clone())).await.unwrap();
    let cfg = config(&server.base_url(), api);
    let result = run(&cfg, &plan(api, n as u32, 8, |_| 0), quiet(), never()).await.unwrap();
    all_succeeded(&result.records);
    (result, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_in_the_last_content_chunk_is_read() {
    let _serial = serial().await;
    let script = Script { tokens: 7, usage: UsagePlacement::InLastChunk, prompt_tokens: 11, ..Script::default() };
    let (result, _server) = one_run(Api::Completions, 4, script).await;
    for r in &result.records {
        assert_eq!(r.usage, Usage { prompt_tokens: Some(11), completion_tokens: Some(7) });
        assert_eq!(r.output_tokens(), 7);
        assert_eq!(r.prompt_tokens(), 11);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_role_chunk_is_not_counted_as_a_token() {
    let _serial = serial().await;
    // The role chunk goes out on arrival, the first token 40 ms later.
    let script = Script {
        ttft: Duration::from_millis(40),
        tokens: 5,
        opening: true,
        usage: UsagePlacement::Separate,
        ..Script::default()
    };
    let (result, server) = one_run(Api::Chat, 4, script).await;
    let truth = truth_by_index(&server.truth());
    for r in &result.records {
        assert_eq!(r.chunks_us.len(), 5, "one time per content chunk, none for the role chunk");
        let server_ttft = (truth[&r.index].token_chunks[0] - truth[&r.index].arrived).as_secs_f64();
        assert!(r.ttft_s() >= server_ttft, "TTFT {} s before the first token ({server_ttft} s)", r.ttft_s());
        assert_eq!(r.text, " t0 t1 t2 t3 t4");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_of_several_tokens_is_one_chunk_time_and_usage_counts_tokens() {
    let _serial = serial().await;
    let script = Script { tokens: 12, tokens_per_chunk: 5, usage: UsagePlacement::Separate, ..Script::default() };
    let (result, _server) = one_run(Api::Completions, 3, script).await;
    for r in &result.records {
        assert_eq!(r.chunks_us.len(), 3);
        assert_eq!(r.usage.completion_tokens, Some(12));
        assert_eq!(r.text.split_whitespace().count(), 12);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_usage_nothing_is_invented() {
    let _serial = serial().await;
    let script = Script { tokens: 3, usage: UsagePlacement::None, ..Script::default() };
    let (result, _server) = one_run(Api::Chat, 2, script).await;
    for r in &result.records {
        assert_eq!(r.usage, Usage::default());
        assert_eq!(r.chunks_us.len(), 3);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_deltas_are_timed_and_counted_apart_from_the_answer() {
    let _serial = serial().await;
    // Six tokens 10 ms apart: three of reasoning, then three of answer.
    let script = Script {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(10),
        tokens: 6,
        reasoning_chunks: 3,
        ..Script::default()
    };
    let (result, server) = one_run(Api::Chat, 3, script).await;
    let truth = truth_by_index(&server.truth());
    for r in &result.records {
        assert_eq!(r.chunks_us.len(), 6, "TTFT and ITL still count every token");
        assert_eq!(r.reasoning_chunks, 3);
        assert_eq!(r.first_reasoning_us, Some(r.chunks_us[0]));
        assert_eq!(r.first_answer_us, Some(r.chunks_us[3]));
        // The answer began where the server sent its fourth chunk, about 30 ms after the first.
        let t = &truth[&r.index];
        let server_gap = (t.token_chunks[3] - t.token_chunks[0]).as_secs_f64() * 1e6;
        let client_gap = f64::from(r.chunks_us[3] - r.chunks_us[0]);
        assert!((client_gap - server_gap).abs() < 5_000.0, "{client_gap} µs against {server_gap} µs");
        assert!(!r.text.contains("t0") && r.text.contains("t5"), "only the answer is the text: {:?}", r.text);
    }
    let ledger = servebench_core::metrics::Ledger::compute(&result);
    let reasoning = ledger.reasoning.expect("the ledger splits the chunks");
    assert_eq!((reasoning.with_reasoning, reasoning.reasoning_chunks, reasoning.answer_chunks), (3, 9, 9));
    let (first_r, first_a) = (reasoning.time_to_first_reasoning.unwrap(), reasoning.time_to_first_answer.unwrap());
    assert!(first_a.mean_ms - first_r.mean_ms > 20.0, "{first_r:?} {first_a:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responses_stream_is_timed_on_its_deltas_and_counted_from_its_terminal_event() {
    let _serial = serial().await;
    // The opening events go out on arrival, the first delta 40 ms later; 2 reasoning deltas.
    let script = Script {
        ttft: Duration::from_millis(40),
        tokens: 6,
        reasoning_chunks: 2,
        prompt_tokens: 13,
        ..Script::default()
    };
    let (result, server) = one_run(Api::Responses, 3, script).await;
    let truth = truth_by_index(&server.truth());
    for r in &result.records {
        assert_eq!(r.chunks_us.len(), 6, "one time per delta, none for the opening events");
        assert_eq!(r.reasoning_chunks, 2);
        let server_ttft = (truth[&r.index].token_chunks[0] - truth[&r.index].arrived).as_secs_f64();
        assert!(r.ttft_s() >= server_ttft, "TTFT {} s before the first delta ({server_ttft} s)", r.ttft_s());
        assert_eq!(r.text, " t2 t3 t4 t5");
        assert_eq!(r.usage, Usage { prompt_tokens: Some(13), completion_tokens: Some(6) });
    }
    assert!(server.truth().iter().all(|t| t.path == "/v1/responses"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responses_stream_without_its_terminal_event_is_a_failure_with_its_reason() {
    let _serial = serial().await;
    let script = Script { tokens: 3, usage: UsagePlacement::None, ..Script::default() };
    let server = TestServer::start(TestServerConfig::new(2, move |_| script.clone())).await.unwrap();
    let cfg = config(&server.base_url(), Api::Responses);
    let result = run(&cfg, &plan(Api::Responses, 2, 8, |_| 0), quiet(), never()).await.unwrap();
    for r in &result.records {
        let f = r.failure.as_ref().expect("cut off before response.completed");
        assert_eq!(Some(f.message.clone()), servebench_client::stream::no_end_message(Api::Responses));
        assert_eq!(r.chunks_us.len(), 3, "what arrived is kept");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_messages_stream_is_timed_on_its_deltas_and_counted_from_its_start_and_end() {
    let _serial = serial().await;
    let script = Script { ttft: Duration::from_millis(40), tokens: 5, prompt_tokens: 21, ..Script::default() };
    let (result, server) = one_run(Api::Messages, 3, script).await;
    let truth = truth_by_index(&server.truth());
    for r in &result.records {
        assert_eq!(r.chunks_us.len(), 5, "one time per delta, none for message_start");
        let server_ttft = (truth[&r.index].token_chunks[0] - truth[&r.index].arrived).as_secs_f64();
        assert!(r.ttft_s() >= server_ttft, "TTFT {} s before the first delta ({server_ttft} s)", r.ttft_s());
        assert_eq!(r.text, " t0 t1 t2 t3 t4");
        assert_eq!(r.usage, Usage { prompt_tokens: Some(21), completion_tokens: Some(5) });
    }
    assert!(server.truth().iter().all(|t| t.path == "/v1/messages"));
}
