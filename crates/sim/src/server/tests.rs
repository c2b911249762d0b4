//! The simulated server over HTTP: stream shapes per API, whole answers, `ignore_eos`,
//! `/metrics`, tokenize round trips with a real tokenizer, errors (vLLM's messages, its sampling
//! parameters' ranges), and cancellation when a client goes away (llama.cpp's and SGLang's
//! dialects: `dialect_tests`). Requests go through the router in-process (`oneshot`), or over real
//! sockets where the connection itself matters.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use servebench_core::config::Api;
use servebench_core::protocol::{Payload, SseDecoder, classify};
use servebench_workload::Tokenizer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tower::ServiceExt;

use super::{ServerOptions, TOKEN_COUNT_HEADER, api, spawn_engine, start};
use crate::presets::Presets;
use crate::setup::SimSetup;

/// Qwen3-0.6B on one H100 with a short API delay, so answers come quickly.
pub(super) fn setup(extra: &[(&str, &str)]) -> SimSetup {
    let mut pairs = vec![("alpha-api-ms", "2"), ("jitter", "0")];
    pairs.extend_from_slice(extra);
    let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    SimSetup::resolve_with(&Presets::embedded().unwrap(), "Qwen/Qwen3-0.6B", "h100-sxm", &pairs, None).unwrap()
}

pub(super) fn qwen3() -> Arc<Tokenizer> {
    static TOK: OnceLock<Arc<Tokenizer>> = OnceLock::new();
    Arc::clone(TOK.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/tokenizers/qwen3");
        Arc::new(Tokenizer::load(dir).expect("the committed Qwen3 tokenizer loads"))
    }))
}

pub(super) fn app_with(setup: &SimSetup, options: ServerOptions) -> Router {
    let (shared, _pacer) = spawn_engine(setup, options).unwrap();
    api::router(shared)
}

fn app() -> Router {
    app_with(&setup(&[]), ServerOptions::default())
}

/// Status, headers and body of one in-process request.
pub(super) async fn call(
    app: &Router,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Vec<(String, String)>, String) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(30), async {
        let resp = app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers =
            resp.headers().iter().map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string())).collect();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, headers, String::from_utf8(bytes.to_vec()).unwrap())
    })
    .await;
    resp.expect("the server answers within 30 s")
}

pub(super) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The JSON payloads of an SSE body, `[DONE]` as the string "[DONE]".
pub(super) fn frames(body: &str) -> Vec<Value> {
    let mut out = Vec::new();
    SseDecoder::new()
        .feed(body.as_bytes(), |e| {
            let data = std::str::from_utf8(e.data).unwrap();
            out.push(if data == "[DONE]" { json!("[DONE]") } else { serde_json::from_str(data).unwrap() });
        })
        .unwrap();
    out
}

/// Token chunks, text and usage of a stream, by the client's own classifier.
pub(super) fn tokens_of(api: Api, body: &str) -> (usize, String, Option<u32>, bool) {
    let (mut tokens, mut text, mut completion, mut done) = (0, String::new(), None, false);
    SseDecoder::new()
        .feed(body.as_bytes(), |e| match classify(api, e.data).unwrap() {
            Payload::Done => done = true,
            Payload::Chunk(c) => {
                tokens += usize::from(c.token);
                text.push_str(c.text.as_deref().unwrap_or(""));
                completion = c.usage.and_then(|u| u.completion_tokens).or(completion);
            }
        })
        .unwrap();
    (tokens, text, completion, done)
}

pub(super) fn completion(prompt: &str, max_tokens: u32, stream: bool) -> Value {
    json!({"model": "Qwen/Qwen3-0.6B", "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": true,
           "stream": stream, "stream_options": {"include_usage": true}})
}

pub(super) fn chat(content: &str, max_tokens: u32, stream: bool) -> Value {
    json!({"model": "Qwen/Qwen3-0.6B", "messages": [{"role": "user", "content": [{"type": "text", "text": content}]}],
           "max_completion_tokens": max_tokens, "ignore_eos": true, "stream": stream,
           "stream_options": {"include_usage": true}})
}

#[tokio::test]
async fn completion_streams_have_vllms_shape_with_usage_and_done() {
    let app = app();
    let (status, headers, body) =
        call(&app, "POST", "/v1/completions", Some(completion("one two three", 5, true))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(header(&headers, "content-type"), Some("text/event-stream; charset=utf-8"));
    assert_eq!(header(&headers, TOKEN_COUNT_HEADER), Some("estimate"));
    let f = frames(&body);
    assert_eq!(f.len(), 5 + 2, "{body}");
    for (i, chunk) in f[..5].iter().enumerate() {
        assert_eq!(chunk["object"], "text_completion");
        assert_eq!(chunk["model"], "Qwen/Qwen3-0.6B");
        assert!(chunk["id"].as_str().unwrap().starts_with("cmpl-"));
        let choice = &chunk["choices"][0];
        assert_eq!(choice["finish_reason"], if i == 4 { json!("length") } else { json!(null) });
        assert!(choice["text"].as_str().unwrap().starts_with(' '));
    }
    assert_eq!(f[5]["choices"], json!([]));
    assert_eq!(f[5]["usage"], json!({"prompt_tokens": 3, "total_tokens": 8, "completion_tokens": 5}));
    assert_eq!(f[6], "[DONE]");
    let (tokens, text, usage, done) = tokens_of(Api::Completions, &body);
    assert_eq!((tokens, text.split_whitespace().count(), usage, done), (5, 5, Some(5), true));
}

#[tokio::test]
async fn chat_streams_open_with_the_role_chunk() {
    let app = app();
    let (status, _, body) = call(&app, "POST", "/v1/chat/completions", Some(chat("hello there", 4, true))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let f = frames(&body);
    assert_eq!(f.len(), 1 + 4 + 2, "{body}");
    assert_eq!(f[0]["object"], "chat.completion.chunk");
    assert_eq!(f[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
    assert!(f[0]["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(f[4]["choices"][0]["finish_reason"], "length");
    // Role marker, two words, assistant marker: the word-hash count `predict` uses.
    assert_eq!(f[5]["usage"]["prompt_tokens"], 4);
    assert_eq!(f[6], "[DONE]");
    assert_eq!(tokens_of(Api::Chat, &body).0, 4);
    // Without include_usage there is no usage chunk.
    let mut req = chat("hello", 3, true);
    req.as_object_mut().unwrap().remove("stream_options");
    let (_, _, body) = call(&app, "POST", "/v1/chat/completions", Some(req)).await;
    let f = frames(&body);
    assert_eq!(f.len(), 1 + 3 + 1);
    assert!(f.iter().all(|c| c.get("usage").is_none()));
}

fn responses(input: Value, max_tokens: u32, stream: bool) -> Value {
    json!({"model": "Qwen/Qwen3-0.6B", "input": input, "max_output_tokens": max_tokens, "stream": stream,
           "store": false, "ignore_eos": true})
}

#[tokio::test]
async fn responses_streams_are_numbered_events_closed_by_response_completed() {
    let app = app();
    let (status, _, body) = call(&app, "POST", "/v1/responses", Some(responses(json!("hello there"), 4, true))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let f = frames(&body);
    let kinds: Vec<&str> = f.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let mut want =
        vec!["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"];
    want.extend(["response.output_text.delta"; 4]);
    want.push("response.completed");
    assert_eq!(kinds, want, "{body}");
    assert!(f.iter().enumerate().all(|(i, e)| e["sequence_number"] == i), "numbered from 0: {body}");
    assert!(f[0]["response"]["id"].as_str().unwrap().starts_with("resp_"));
    let end = &f[8]["response"];
    assert_eq!(
        (end["status"].as_str(), end["incomplete_details"]["reason"].as_str()),
        (Some("incomplete"), Some("max_output_tokens"))
    );
    // The same word-hash count as the chat body of the same text: role marker, two words, assistant marker.
    assert_eq!(end["usage"]["input_tokens"], 4);
    assert_eq!(end["usage"]["output_tokens"], 4);
    let (tokens, text, usage, done) = tokens_of(Api::Responses, &body);
    assert_eq!((tokens, text.split_whitespace().count(), usage, done), (4, 4, Some(4), false), "no [DONE]");

    // A list of messages and instructions read as the chat they stand for; whole answers too.
    let input = json!([{"role": "user", "content": "hello there"}]);
    let mut req = responses(input, 3, false);
    req["instructions"] = json!("be brief");
    let (status, _, body) = call(&app, "POST", "/v1/responses", Some(req)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((v["object"].as_str(), v["status"].as_str()), (Some("response"), Some("incomplete")));
    assert_eq!(v["output"][0]["content"][0]["text"].as_str().unwrap().split_whitespace().count(), 3);
    assert_eq!(v["usage"]["input_tokens"], 4 + 3);

    // Bad input is the client's fault, named.
    let (status, _, body) = call(&app, "POST", "/v1/responses", Some(json!({"max_output_tokens": 3}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("no \\\"input\\\""), "{body}");
    let (status, _, body) = call(&app, "POST", "/v1/responses", Some(responses(json!("x"), 0, true))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("max_output_tokens must be at least 1"), "{body}");
}

#[tokio::test]
async fn messages_streams_carry_anthropics_events_and_errors_take_its_shape() {
    let app = app();
    let req = json!({"model": "Qwen/Qwen3-0.6B", "max_tokens": 3, "stream": true, "ignore_eos": true,
                     "system": "be brief", "messages": [{"role": "user", "content": "hello there"}]});
    let (status, _, body) = call(&app, "POST", "/v1/messages", Some(req.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let f = frames(&body);
    let kinds: Vec<&str> = f.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let mut want = vec!["message_start", "content_block_start"];
    want.extend(["content_block_delta"; 3]);
    want.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(kinds, want, "{body}");
    assert!(f[0]["message"]["id"].as_str().unwrap().starts_with("msg_"));
    // System marker and two words, user marker and two words, assistant marker.
    assert_eq!(f[0]["message"]["usage"]["input_tokens"], 7);
    assert_eq!(
        (f[6]["delta"]["stop_reason"].as_str(), f[6]["usage"]["output_tokens"].as_u64()),
        (Some("max_tokens"), Some(3))
    );
    let (tokens, text, usage, done) = tokens_of(Api::Messages, &body);
    assert_eq!((tokens, text.split_whitespace().count(), usage, done), (3, 3, Some(3), false), "no [DONE]");

    let mut whole = req.clone();
    whole["stream"] = json!(false);
    let (status, _, body) = call(&app, "POST", "/v1/messages", Some(whole)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((v["type"].as_str(), v["stop_reason"].as_str()), (Some("message"), Some("max_tokens")));
    assert_eq!(v["content"][0]["text"].as_str().unwrap().split_whitespace().count(), 3);
    assert_eq!((v["usage"]["input_tokens"].as_u64(), v["usage"]["output_tokens"].as_u64()), (Some(7), Some(3)));

    // Anthropic's API requires max_tokens; errors come in its shape.
    let mut bad = req;
    bad.as_object_mut().unwrap().remove("max_tokens");
    let (status, _, body) = call(&app, "POST", "/v1/messages", Some(bad)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v,
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"}})
    );
}

#[tokio::test]
async fn whole_answers_have_vllms_shape() {
    let app = app();
    let (status, headers, body) = call(&app, "POST", "/v1/completions", Some(completion("a b c d", 6, false))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(header(&headers, TOKEN_COUNT_HEADER), Some("estimate"));
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["choices"][0]["text"].as_str().unwrap().split_whitespace().count(), 6);
    assert_eq!(v["usage"]["prompt_tokens"], 4);
    assert_eq!(v["usage"]["completion_tokens"], 6);
    assert_eq!(v["usage"]["total_tokens"], 10);

    let (status, _, body) = call(&app, "POST", "/v1/chat/completions", Some(chat("hi", 3, false))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["message"]["content"].as_str().unwrap().split_whitespace().count(), 3);
    assert_eq!(v["usage"]["completion_tokens"], 3);
}

#[tokio::test]
async fn ignore_eos_runs_to_max_tokens_and_without_it_the_eos_model_stops_early() {
    let app = app_with(&setup(&[("eos", "uniform")]), ServerOptions::default());
    for _ in 0..3 {
        let (_, _, body) = call(&app, "POST", "/v1/completions", Some(completion("x y", 40, true))).await;
        assert_eq!(tokens_of(Api::Completions, &body).0, 40);
    }
    let mut stopped_early = 0;
    for _ in 0..4 {
        let mut req = completion("x y", 40, false);
        req["ignore_eos"] = json!(false);
        let (_, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
        let v: Value = serde_json::from_str(&body).unwrap();
        let n = v["usage"]["completion_tokens"].as_u64().unwrap();
        assert!((1..=40).contains(&n));
        if n < 40 {
            assert_eq!(v["choices"][0]["finish_reason"], "stop");
            stopped_early += 1;
        }
    }
    assert!(stopped_early > 0, "a uniform EOS draw over 1..=40 stops some of 4 requests early");
}

#[tokio::test]
async fn metrics_use_vllms_names_and_move_with_the_work_done() {
    let app = app();
    let (status, headers, before) = call(&app, "GET", "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(header(&headers, "content-type").unwrap().starts_with("text/plain; version=0.0.4"));
    for name in [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:request_success_total",
        "vllm:num_preemptions_total",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket",
    ] {
        assert!(before.contains(&format!("{name}{{engine=\"0\",")), "{name} missing:\n{before}");
    }
    let labels = "engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"";
    assert!(before.contains(&format!("vllm:generation_tokens_total{{{labels}}} 0.0\n")), "{before}");
    for _ in 0..2 {
        call(&app, "POST", "/v1/completions", Some(completion("p q r s", 7, true))).await;
    }
    let (_, _, after) = call(&app, "GET", "/metrics", None).await;
    assert!(after.contains(&format!("vllm:generation_tokens_total{{{labels}}} 14.0\n")), "{after}");
    assert!(after.contains(&format!("vllm:prompt_tokens_total{{{labels}}} 8.0\n")), "{after}");
    assert!(after.contains("finished_reason=\"length\",model_name=\"Qwen/Qwen3-0.6B\"} 2.0\n"), "{after}");
    assert!(after.contains(&format!("vllm:time_to_first_token_seconds_count{{{labels}}} 2.0\n")), "{after}");
    assert!(after.contains(&format!("vllm:inter_token_latency_seconds_count{{{labels}}} 12.0\n")), "{after}");
    assert!(after.contains(&format!("vllm:e2e_request_latency_seconds_count{{{labels}}} 2.0\n")), "{after}");
    // vLLM's phase times of each finished request: queue, prefill, decode, and their running span.
    for phase in ["queue", "prefill", "decode", "inference"] {
        let name = format!("vllm:request_{phase}_time_seconds");
        assert!(after.contains(&format!("{name}_count{{{labels}}} 2.0\n")), "{name}:\n{after}");
        assert!(after.contains(&format!("# TYPE {name} histogram\n")), "{name}:\n{after}");
    }
    assert!(after.contains(&format!("vllm:num_requests_running{{{labels}}} 0.0\n")), "{after}");
    // The simulated GPU's use over the last second, in percent, which servebench's scraper
    // reads as the GPU's utilisation.
    let busy = format!("servebench:engine_busy_percent{{{labels}}} ");
    let line = after.lines().find(|l| l.starts_with(&busy)).unwrap_or_else(|| panic!("{after}"));
    let percent: f64 = line[busy.len()..].parse().unwrap();
    assert!((0.0..=100.0).contains(&percent), "{line}");
    let reading = servebench_core::telemetry::read(&after);
    assert_eq!(reading.engine, Some("vllm"));
    assert!(reading.values.contains(&(servebench_core::telemetry::Signal::GpuUtil, percent)), "{:?}", reading.values);
}

#[tokio::test]
async fn tokenize_and_detokenize_round_trip_with_the_qwen3_tokenizer() {
    let tok = qwen3();
    let options = ServerOptions { tokenizer: Some(Arc::clone(&tok)), ..ServerOptions::default() };
    let app = app_with(&setup(&[]), options);
    let text = "Simulated servers answer in real time, token by token.";
    let (status, headers, body) =
        call(&app, "POST", "/tokenize", Some(json!({"prompt": text, "return_token_strs": true}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(header(&headers, TOKEN_COUNT_HEADER), Some("tokenizer"));
    let v: Value = serde_json::from_str(&body).unwrap();
    let ids: Vec<u32> = serde_json::from_value(v["tokens"].clone()).unwrap();
    assert_eq!(ids, tok.encode(text, true).unwrap());
    assert_eq!(v["count"], ids.len());
    assert_eq!(v["max_model_len"], 40960);
    assert_eq!(v["token_strs"].as_array().unwrap().len(), ids.len());
    let (status, _, body) = call(&app, "POST", "/detokenize", Some(json!({"tokens": ids}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["prompt"], text);

    // Chat: the template is applied, as the generation endpoints count it.
    let messages = json!([{"role": "user", "content": text}]);
    let (_, _, body) = call(&app, "POST", "/tokenize", Some(json!({"messages": messages}))).await;
    let chat_count = serde_json::from_str::<Value>(&body).unwrap()["count"].as_u64().unwrap();
    let rendered = tok.chat_template().unwrap().render_user(text).unwrap();
    assert_eq!(chat_count, u64::from(tok.count(&rendered, false).unwrap()));
    let (_, headers, body) = call(&app, "POST", "/v1/chat/completions", Some(chat(text, 12, false))).await;
    assert_eq!(header(&headers, TOKEN_COUNT_HEADER), Some("tokenizer"));
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["usage"]["prompt_tokens"].as_u64(), Some(chat_count));
    // The generated text is made of real tokens: it encodes back to what usage reports.
    let answer = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(tok.count(answer, false).unwrap(), 12, "{answer:?}");
}

#[tokio::test]
async fn bad_requests_get_openai_errors_with_vllms_messages() {
    let app = app();
    let err = |body: &str| serde_json::from_str::<Value>(body).unwrap()["error"].clone();
    let mut req = completion("a", 3, false);
    req["model"] = json!("other/model");
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        err(&body),
        json!({"message": "The model `other/model` does not exist.", "type": "NotFoundError", "param": "model", "code": 404})
    );
    let mut req = chat("a", 3, true);
    req["n"] = json!(0);
    let (status, _, body) = call(&app, "POST", "/v1/chat/completions", Some(req)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!((err(&body)["type"].clone(), err(&body)["param"].clone()), (json!("BadRequestError"), json!("n")));
    assert_eq!(err(&body)["message"], "n must be at least 1, got 0.");

    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(completion("a b c", 40_958, false))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        err(&body)["message"],
        "'max_tokens' or 'max_completion_tokens' is too large: 40958. This model's maximum context length is 40960 \
         tokens and your request has 3 input tokens (40958 > 40960 - 3)."
    );
    // A budget past 32 bits is named as asked.
    let mut req = completion("a b c", 1, false);
    req["max_tokens"] = json!(1u64 << 40);
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(err(&body)["message"].as_str().unwrap().contains("is too large: 1099511627776."), "{body}");
    let long = vec!["w"; 40_960].join(" ");
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(completion(&long, 1, false))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(err(&body)["message"].as_str().unwrap().contains("However, your request has 40960 input tokens"));

    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(completion("a", 0, false))).await;
    assert_eq!((status, err(&body)["param"].clone()), (StatusCode::BAD_REQUEST, json!("max_tokens")));
    // A sampling parameter out of vLLM's range, named as vLLM names it.
    let mut req = chat("a", 3, true);
    req["top_p"] = json!(0);
    let (status, _, body) = call(&app, "POST", "/v1/chat/completions", Some(req)).await;
    assert_eq!((status, err(&body)["param"].clone()), (StatusCode::BAD_REQUEST, json!("top_p")));
    assert_eq!(err(&body)["message"], "top_p must be in (0, 1], got 0.");
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(json!({"max_tokens": 3}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(err(&body)["message"].as_str().unwrap().contains("prompt"), "{body}");
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(json!("just a string"))).await;
    assert_eq!((status, err(&body)["code"].clone()), (StatusCode::BAD_REQUEST, json!(400)));
    let (status, _, body) = call(&app, "POST", "/detokenize", Some(json!({"tokens": [1, 2]}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(err(&body)["message"].as_str().unwrap().contains("--tokenizer"), "{body}");
    let (status, _, body) = call(&app, "GET", "/v2/nothing", None).await;
    assert_eq!((status, body.as_str()), (StatusCode::NOT_FOUND, r#"{"detail":"Not Found"}"#));
}

#[tokio::test]
async fn models_health_and_version_describe_the_simulated_server() {
    let app =
        app_with(&setup(&[]), ServerOptions { served_model_name: Some("sim".into()), ..ServerOptions::default() });
    let (status, _, body) = call(&app, "GET", "/v1/models", None).await;
    assert_eq!(status, StatusCode::OK);
    let card = serde_json::from_str::<Value>(&body).unwrap()["data"][0].clone();
    assert_eq!(card["id"], "sim");
    assert_eq!(card["object"], "model");
    assert_eq!(card["root"], "Qwen/Qwen3-0.6B");
    assert_eq!(card["max_model_len"], 40960);
    assert_eq!(card["servebench"]["token_count"], "estimate");
    assert_eq!(card["servebench"]["hardware"], "h100-sxm");
    assert_eq!(call(&app, "GET", "/health", None).await.0, StatusCode::OK);
    let (_, _, body) = call(&app, "GET", "/version", None).await;
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["version"], env!("CARGO_PKG_VERSION"));
    // The served name is the one requests must use.
    let (status, _, _) = call(&app, "POST", "/v1/completions", Some(completion("a", 2, false))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// Sends raw HTTP/1.1 and reads the whole answer (the server closes after it).
pub(super) async fn raw_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: sim\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out)).await.unwrap().unwrap();
    out
}

/// Sends a completions request over a raw connection and returns it, to read the answer from.
pub(super) async fn raw_post(addr: std::net::SocketAddr, body: &Value) -> TcpStream {
    let body = body.to_string();
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.write_all(format!("{head}{body}").as_bytes()).await.unwrap();
    conn
}

/// The value of the first sample line of the metrics text that starts with `line_start`.
/// Reads a stream until `frames` SSE events (`data:` lines) have come.
pub(super) async fn read_frames(conn: &mut TcpStream, frames: usize) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while seen.windows(5).filter(|w| w == b"data:").count() < frames {
        let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0, "the stream ended early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
}

pub(super) fn sample(metrics: &str, line_start: &str) -> f64 {
    let line = metrics.lines().find(|l| l.starts_with(line_start)).unwrap_or_else(|| panic!("{line_start}\n{metrics}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_cancels_its_request() {
    let server = start(setup(&[]), ServerOptions::default()).await.unwrap();
    assert!(server.base_url().starts_with("http://127.0.0.1:"));
    let addr = server.local_addr();
    let mut conn = raw_post(addr, &completion("a long answer please", 20_000, true)).await;
    // Read until a few tokens have come.
    read_frames(&mut conn, 3).await;
    let running = "vllm:num_requests_running{";
    assert_eq!(sample(&raw_get(addr, "/metrics").await, running), 1.0);
    drop(conn);
    // The engine drops the request within a step or two of the disconnect.
    let mut metrics = String::new();
    for _ in 0..200 {
        metrics = raw_get(addr, "/metrics").await;
        if sample(&metrics, running) == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(sample(&metrics, running), 0.0, "{metrics}");
    assert_eq!(sample(&metrics, "vllm:kv_cache_usage_perc{"), 0.0);
    assert_eq!(sample(&metrics, "vllm:request_success_total{engine=\"0\",finished_reason=\"abort\""), 1.0);
    assert!(sample(&metrics, "vllm:generation_tokens_total{") < 20_000.0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_open_streams_and_frees_the_port() {
    let server = start(setup(&[]), ServerOptions::default()).await.unwrap();
    assert_eq!(server.token_count(), super::TokenCount::Estimate);
    let line = server.startup_line();
    assert!(line.contains(server.base_url()) && line.contains("estimated"), "{line}");
    let addr = server.local_addr();
    // The port is taken now: a second server on it says so.
    let taken = ServerOptions { port: addr.port(), ..ServerOptions::default() };
    let err = start(setup(&[]), taken).await.err().expect("the port is in use").to_string();
    assert!(err.contains(&format!("127.0.0.1:{}", addr.port())) && err.contains("--port"), "{err}");
    let mut conn = raw_post(addr, &completion("x", 20_000, true)).await;
    let mut buf = [0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf)).await.unwrap().unwrap();
    assert!(n > 0);
    tokio::time::timeout(Duration::from_secs(10), server.shutdown()).await.expect("shutdown completes");
    // The open stream got an error event and [DONE].
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut rest)).await;
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.contains("shutting down") && rest.contains("[DONE]"), "{rest}");
    assert!(TcpStream::connect(addr).await.is_err(), "nothing listens after shutdown");
}
