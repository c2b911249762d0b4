//! Requests of several choices, as vLLM answers them: a completions batch (`prompt` a list of
//! texts or of token-id lists) and `n` > 1, each choice a request of its own, indexed
//! `prompt * n + sample`, the usage summed; whole and streamed.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::tests::{app_with, call, chat, completion, frames, raw_get, raw_post, read_frames, sample, setup};
use super::{ServerOptions, start};

fn app() -> axum::Router {
    app_with(&setup(&[]), ServerOptions::default())
}

/// Each choice's text, by index, joined over the chunks of a stream, and the finish reasons.
fn streamed_choices(f: &[Value], field: &str) -> (Vec<String>, Vec<Option<String>>) {
    let mut texts: Vec<String> = Vec::new();
    let mut finish: Vec<Option<String>> = Vec::new();
    for chunk in f.iter().filter(|c| c.is_object()) {
        for c in chunk["choices"].as_array().unwrap() {
            let i = c["index"].as_u64().unwrap() as usize;
            if texts.len() <= i {
                texts.resize(i + 1, String::new());
                finish.resize(i + 1, None);
            }
            let piece = if field == "text" { &c["text"] } else { &c["delta"]["content"] };
            texts[i].push_str(piece.as_str().unwrap_or(""));
            if let Some(r) = c["finish_reason"].as_str() {
                assert!(finish[i].is_none(), "choice {i} finished twice");
                finish[i] = Some(r.to_string());
            }
        }
    }
    (texts, finish)
}

#[tokio::test]
async fn a_batch_of_prompts_answers_one_choice_a_prompt_with_the_usage_summed() {
    let app = app();
    // Texts: prompts of 2, 3 and 1 words, 4 tokens each.
    let mut req = completion("unused", 4, false);
    req["prompt"] = json!(["one two", "three four five", "six"]);
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let choices = v["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 3, "{body}");
    for (i, c) in choices.iter().enumerate() {
        assert_eq!(c["index"], i);
        assert_eq!(c["text"].as_str().unwrap().split_whitespace().count(), 4, "{c}");
        assert_eq!(c["finish_reason"], "length");
    }
    assert_eq!(v["usage"]["prompt_tokens"], 2 + 3 + 1);
    assert_eq!(v["usage"]["completion_tokens"], 12);
    assert_eq!(v["usage"]["total_tokens"], 18);

    // Token-id lists, two samples each: index = prompt * n + sample, each prompt counted once.
    let mut req = completion("unused", 3, false);
    req["prompt"] = json!([[11, 12, 13], [21, 22]]);
    req["n"] = json!(2);
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let indexes: Vec<u64> = v["choices"].as_array().unwrap().iter().map(|c| c["index"].as_u64().unwrap()).collect();
    assert_eq!(indexes, vec![0, 1, 2, 3]);
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 5, "total_tokens": 17, "completion_tokens": 12,
                                  "prompt_tokens_details": null})
    );
    // Samples of one prompt are drawn apart.
    assert_ne!(v["choices"][0]["text"], v["choices"][1]["text"], "{body}");

    // Every choice was a request of its own to the engine.
    let (_, _, metrics) = call(&app, "GET", "/metrics", None).await;
    let line = metrics
        .lines()
        .find(|l| l.starts_with("vllm:e2e_request_latency_seconds_count{"))
        .unwrap_or_else(|| panic!("{metrics}"));
    assert!(line.ends_with(" 7.0"), "3 + 4 requests: {line}");
}

#[tokio::test]
async fn a_streamed_batch_sends_each_choices_chunks_under_its_own_index() {
    let app = app();
    let mut req = completion("unused", 5, true);
    req["prompt"] = json!(["alpha beta", "gamma"]);
    req["n"] = json!(2);
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let f = frames(&body);
    // 4 choices × 5 tokens, then the usage and [DONE].
    assert_eq!(f.len(), 4 * 5 + 2, "{body}");
    for chunk in &f[..20] {
        assert_eq!(chunk["object"], "text_completion");
        assert!(chunk["id"].as_str().unwrap().starts_with("cmpl-"));
        assert_eq!(chunk["id"], f[0]["id"], "one id for the whole answer");
        assert_eq!(chunk["choices"].as_array().unwrap().len(), 1);
        let keys: Vec<&str> = chunk["choices"][0].as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["index", "text", "logprobs", "finish_reason", "stop_reason"]);
    }
    let (texts, finish) = streamed_choices(&f, "text");
    assert_eq!(texts.len(), 4);
    assert!(texts.iter().all(|t| t.split_whitespace().count() == 5), "{texts:?}");
    assert!(finish.iter().all(|r| r.as_deref() == Some("length")), "{finish:?}");
    assert_eq!(f[20]["choices"], json!([]));
    assert_eq!(f[20]["usage"], json!({"prompt_tokens": 3, "total_tokens": 23, "completion_tokens": 20}));
    assert_eq!(f[21], "[DONE]");
}

#[tokio::test]
async fn chat_with_n_samples_opens_each_choice_with_its_role_chunk() {
    let app = app();
    let mut req = chat("hello there", 3, true);
    req["n"] = json!(3);
    let (status, _, body) = call(&app, "POST", "/v1/chat/completions", Some(req.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let f = frames(&body);
    assert_eq!(f.len(), 3 * (1 + 3) + 2, "{body}");
    for i in 0..3u64 {
        let of_choice: Vec<&Value> = f[..12].iter().filter(|c| c["choices"][0]["index"] == i).collect();
        assert_eq!(of_choice.len(), 4, "choice {i}: {body}");
        assert_eq!(of_choice[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
        assert_eq!(of_choice[3]["choices"][0]["finish_reason"], "length");
        assert_eq!(of_choice[3]["choices"][0]["stop_reason"], Value::Null);
    }
    let (texts, _) = streamed_choices(&f, "delta");
    assert!(texts.iter().all(|t| t.split_whitespace().count() == 3), "{texts:?}");
    // The prompt (4 tokens: role marker, two words, assistant marker) counted once.
    assert_eq!(f[12]["usage"], json!({"prompt_tokens": 4, "total_tokens": 13, "completion_tokens": 9}));

    req["stream"] = json!(false);
    let (status, _, body) = call(&app, "POST", "/v1/chat/completions", Some(req)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let indexes: Vec<u64> = v["choices"].as_array().unwrap().iter().map(|c| c["index"].as_u64().unwrap()).collect();
    assert_eq!(indexes, vec![0, 1, 2]);
    assert_eq!(v["usage"]["completion_tokens"], 9);
}

#[tokio::test]
async fn batches_vllm_cannot_read_are_refused_before_anything_runs() {
    let app = app();
    let err = |body: &str| serde_json::from_str::<Value>(body).unwrap()["error"].clone();
    for (prompt, words) in [
        (json!(["a", 1]), "mixes them"),
        (json!([[1, 2], "b"]), "mixes them"),
        (json!([[1, "x"]]), "list of token ids"),
        (json!({"text": "a"}), "prompt must be a text"),
    ] {
        let mut req = completion("unused", 2, false);
        req["prompt"] = prompt.clone();
        let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
        assert_eq!((status, err(&body)["param"].clone()), (StatusCode::BAD_REQUEST, json!("prompt")), "{prompt}");
        assert!(err(&body)["message"].as_str().unwrap().contains(words), "{prompt}: {body}");
    }
    // One prompt too long for the context refuses the whole batch.
    let long = vec!["w"; 40_960].join(" ");
    let mut req = completion("unused", 2, false);
    req["prompt"] = json!(["short", long]);
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(err(&body)["message"].as_str().unwrap().contains("40960 input tokens"), "{body}");
    // More choices than one request may ask for.
    let mut req = completion("unused", 2, false);
    req["prompt"] = json!(vec!["a"; 100]);
    req["n"] = json!(50);
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(err(&body)["message"].as_str().unwrap().contains("send the prompts over several requests"), "{body}");
    // n > 1 where the API has one output.
    let req = json!({"model": "Qwen/Qwen3-0.6B", "input": "hi", "max_output_tokens": 2, "n": 2});
    let (status, _, body) = call(&app, "POST", "/v1/responses", Some(req)).await;
    assert_eq!((status, err(&body)["param"].clone()), (StatusCode::BAD_REQUEST, json!("n")), "{body}");
    let (_, _, metrics) = call(&app, "GET", "/metrics", None).await;
    assert!(metrics.contains("vllm:prompt_tokens_total{engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"} 0.0\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_a_streamed_batch_cancels_every_choice() {
    let server = start(setup(&[]), ServerOptions::default()).await.unwrap();
    let addr = server.local_addr();
    let mut req = completion("unused", 20_000, true);
    req["prompt"] = json!(["a long answer", "another long answer"]);
    req["n"] = json!(2);
    let mut conn = raw_post(addr, &req).await;
    read_frames(&mut conn, 8).await;
    let running = "vllm:num_requests_running{";
    // Some may still wait for the engine to schedule them.
    let held = |metrics: &str| sample(metrics, running) + sample(metrics, "vllm:num_requests_waiting{");
    let metrics = raw_get(addr, "/metrics").await;
    assert_eq!(held(&metrics), 4.0, "{metrics}");
    drop(conn);
    let mut metrics = String::new();
    for _ in 0..200 {
        metrics = raw_get(addr, "/metrics").await;
        if held(&metrics) == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(held(&metrics), 0.0, "{metrics}");
    assert_eq!(sample(&metrics, "vllm:request_success_total{engine=\"0\",finished_reason=\"abort\""), 4.0, "{metrics}");
    server.shutdown().await;
}
