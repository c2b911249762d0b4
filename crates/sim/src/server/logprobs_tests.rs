//! `logprobs`, `top_logprobs` and `echo` over HTTP: synthetic values in OpenAI's shapes, one
//! entry per token, whole and streamed, and the requests vLLM refuses.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::ServerOptions;
use super::tests::{app_with, call, chat, completion, frames, qwen3, setup};

fn app() -> axum::Router {
    app_with(&setup(&[]), ServerOptions::default())
}

/// Checks a completions logprobs object against the text it scores: one entry per token, the
/// tokens joining into the text, offsets counted from `offset`, `k + 1` candidates a scored
/// token. Returns how many tokens it scores.
fn check_completion_logprobs(lp: &Value, text: &str, k: usize, offset: usize) -> usize {
    let tokens: Vec<&str> = lp["tokens"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(tokens.concat(), text, "{lp}");
    let mut at = offset;
    for (i, t) in tokens.iter().enumerate() {
        assert_eq!(lp["text_offset"][i], at, "{lp}");
        at += t.chars().count();
        let top = &lp["top_logprobs"][i];
        if let Some(l) = lp["token_logprobs"][i].as_f64() {
            assert!(l <= 0.0, "{lp}");
            let top = top.as_object().unwrap();
            assert_eq!(top.len(), k + 1, "{lp}");
            assert_eq!(top[*t], l, "the token is among its own candidates: {lp}");
        } else {
            assert_eq!(*top, Value::Null);
        }
    }
    for field in ["text_offset", "token_logprobs", "top_logprobs"] {
        assert_eq!(lp[field].as_array().unwrap().len(), tokens.len(), "{field}: {lp}");
    }
    tokens.len()
}

#[tokio::test]
async fn completions_logprobs_score_every_token_and_echo_puts_the_prompt_first() {
    let app = app();
    let mut req = completion("the quick  brown fox", 6, false);
    req["logprobs"] = json!(3);
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let choice = &v["choices"][0];
    assert_eq!(check_completion_logprobs(&choice["logprobs"], choice["text"].as_str().unwrap(), 3, 0), 6);
    assert!(choice["logprobs"]["token_logprobs"].as_array().unwrap().iter().all(Value::is_f64), "{body}");

    // Echo: the prompt's text, then the completion; its 4 tokens scored before the 6 generated,
    // the first with nothing before it to predict it.
    req["echo"] = json!(true);
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let choice = &v["choices"][0];
    let text = choice["text"].as_str().unwrap();
    assert!(text.starts_with("the quick  brown fox "), "{text}");
    assert_eq!(check_completion_logprobs(&choice["logprobs"], text, 3, 0), 4 + 6);
    assert_eq!(choice["logprobs"]["token_logprobs"][0], Value::Null);
    assert_eq!(choice["logprobs"]["tokens"][1], " quick");
    assert_eq!(v["usage"]["prompt_tokens"], 4);

    // Streamed: each chunk scores its own tokens, the offsets going on from the last chunk's.
    req["stream"] = json!(true);
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let f = frames(&body);
    assert_eq!(f.len(), 6 + 2, "{body}");
    let mut offset = 0;
    let mut scored = 0;
    for chunk in &f[..6] {
        let c = &chunk["choices"][0];
        let text = c["text"].as_str().unwrap();
        scored += check_completion_logprobs(&c["logprobs"], text, 3, offset);
        offset += text.chars().count();
    }
    assert!(f[0]["choices"][0]["text"].as_str().unwrap().starts_with("the quick"), "{body}");
    assert_eq!(scored, 4 + 6);
    assert_eq!(f[6]["usage"]["completion_tokens"], 6);
}

#[tokio::test]
async fn chat_logprobs_list_top_logprobs_candidates_for_every_token() {
    let app = app();
    let mut req = chat("hello there", 5, false);
    req["logprobs"] = json!(true);
    req["top_logprobs"] = json!(2);
    let (status, _, body) = call(&app, "POST", "/v1/chat/completions", Some(req.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let content = v["choices"][0]["logprobs"]["content"].as_array().unwrap();
    assert_eq!(content.len(), 5, "{body}");
    let joined: String = content.iter().map(|e| e["token"].as_str().unwrap()).collect();
    assert_eq!(joined, v["choices"][0]["message"]["content"].as_str().unwrap());
    for e in content {
        let token = e["token"].as_str().unwrap();
        assert_eq!(e["bytes"], json!(token.as_bytes()));
        assert!(e["logprob"].as_f64().unwrap() <= 0.0);
        let top = e["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 2, "{e}");
        assert!(top[0]["logprob"].as_f64() >= top[1]["logprob"].as_f64(), "{e}");
        assert_eq!(top[1]["bytes"], json!(top[1]["token"].as_str().unwrap().as_bytes()));
    }

    // Streamed: each content chunk carries its token's entry; the role chunk none.
    req["stream"] = json!(true);
    let (_, _, body) = call(&app, "POST", "/v1/chat/completions", Some(req)).await;
    let f = frames(&body);
    assert_eq!(f.len(), 1 + 5 + 2, "{body}");
    assert_eq!(f[0]["choices"][0]["logprobs"], Value::Null);
    for chunk in &f[1..6] {
        let c = &chunk["choices"][0];
        let entries = c["logprobs"]["content"].as_array().unwrap();
        assert_eq!(entries.len(), 1, "{chunk}");
        assert_eq!(entries[0]["token"], c["delta"]["content"]);
    }
    // Without logprobs, none.
    let (_, _, body) = call(&app, "POST", "/v1/chat/completions", Some(chat("hi", 2, false))).await;
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["choices"][0]["logprobs"], Value::Null);
}

#[tokio::test]
async fn echo_of_token_ids_decodes_them_with_a_tokenizer_and_is_refused_without() {
    let tok = qwen3();
    let ids = tok.encode("Simulated servers answer", false).unwrap();
    let mut req = completion("unused", 3, false);
    req["prompt"] = json!(ids);
    req["echo"] = json!(true);
    req["logprobs"] = json!(0);
    let with = app_with(&setup(&[]), ServerOptions { tokenizer: Some(Arc::clone(&tok)), ..ServerOptions::default() });
    let (status, _, body) = call(&with, "POST", "/v1/completions", Some(req.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let choice = &v["choices"][0];
    let text = choice["text"].as_str().unwrap();
    assert!(text.starts_with("Simulated servers answer"), "{text}");
    assert_eq!(check_completion_logprobs(&choice["logprobs"], text, 0, 0), ids.len() + 3);

    let (status, _, body) = call(&app(), "POST", "/v1/completions", Some(req)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let err = serde_json::from_str::<Value>(&body).unwrap()["error"].clone();
    assert_eq!(err["param"], "echo");
    assert!(err["message"].as_str().unwrap().contains("--tokenizer"), "{body}");
}

#[tokio::test]
async fn logprobs_vllm_refuses_are_400s_that_name_the_field() {
    let app = app();
    let err = |body: &str| serde_json::from_str::<Value>(body).unwrap()["error"].clone();
    // vLLM's `bench serve` sends `"logprobs": null` unless asked: that is no logprobs.
    let mut req = completion("a b", 2, false);
    req["logprobs"] = Value::Null;
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req.clone())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["choices"][0]["logprobs"], Value::Null);
    req["logprobs"] = json!(21);
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
    assert_eq!((status, err(&body)["param"].clone()), (StatusCode::BAD_REQUEST, json!("logprobs")));
    assert!(err(&body)["message"].as_str().unwrap().contains("greater than max allowed: 20"), "{body}");
    let mut req = chat("a", 2, true);
    req["top_logprobs"] = json!(2);
    let (status, _, body) = call(&app, "POST", "/v1/chat/completions", Some(req)).await;
    assert_eq!((status, err(&body)["param"].clone()), (StatusCode::BAD_REQUEST, json!("top_logprobs")));
    assert_eq!(err(&body)["message"], "when using `top_logprobs`, `logprobs` must be set to true.");
}
