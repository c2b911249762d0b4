//! The simulated server in llama.cpp's and SGLang's dialects: where they answer otherwise than
//! vLLM (tokenize schemas, where usage goes, closing the connection).

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{Value, json};
use servebench_core::config::Api;

use super::tests::{app_with, call, chat, completion, frames, header, qwen3, setup, tokens_of};
use super::{Dialect, ServerOptions};

#[tokio::test]
async fn llama_cpp_dialect_speaks_its_tokenize_schema_usage_placement_and_closes_streams() {
    let tok = qwen3();
    let options =
        ServerOptions { tokenizer: Some(Arc::clone(&tok)), dialect: Dialect::LlamaCpp, ..ServerOptions::default() };
    let app = app_with(&setup(&[]), options);
    let text = "Simulated servers answer in real time, token by token.";
    // vLLM's request reads as llama.cpp reads it: no `content`, no tokens.
    let (status, _, body) = call(&app, "POST", "/tokenize", Some(json!({"model": "x", "prompt": text}))).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, r#"{"tokens":[]}"#));
    let (_, _, body) = call(&app, "POST", "/tokenize", Some(json!({"content": text}))).await;
    let ids: Vec<u32> =
        serde_json::from_value(serde_json::from_str::<Value>(&body).unwrap()["tokens"].clone()).unwrap();
    assert_eq!(ids, tok.encode(text, false).unwrap());
    let (_, _, body) = call(&app, "POST", "/detokenize", Some(json!({"tokens": ids}))).await;
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), json!({"content": text}));
    let messages = json!([{"role": "user", "content": text}]);
    let (_, _, body) = call(&app, "POST", "/apply-template", Some(json!({"messages": messages}))).await;
    let rendered = tok.chat_template().unwrap().render_user(text).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), json!({"prompt": rendered}));

    // Any sampling value is taken, as llama.cpp takes it.
    let mut req = completion(text, 2, false);
    req["temperature"] = json!(-1);
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Completions: usage inside the last chunk with choices, even unasked; the connection closes.
    let mut req = completion(text, 5, true);
    req.as_object_mut().unwrap().remove("stream_options");
    let (_, headers, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
    assert_eq!(header(&headers, "connection"), Some("close"));
    let f = frames(&body);
    assert_eq!(f.len(), 6, "{body}");
    assert_eq!(f[4]["choices"][0]["finish_reason"], "length");
    assert_eq!(f[4]["usage"]["completion_tokens"], 5);
    assert_eq!(f[5], json!("[DONE]"));
    assert_eq!(tokens_of(Api::Completions, &body).2, Some(5));
    // Chat: usage in a chunk of its own, as asked.
    let (_, headers, body) = call(&app, "POST", "/v1/chat/completions", Some(chat(text, 4, true))).await;
    assert_eq!(header(&headers, "connection"), Some("close"));
    let f = frames(&body);
    assert_eq!(f[f.len() - 2]["choices"], json!([]));
    assert_eq!(f[f.len() - 2]["usage"]["completion_tokens"], 4);
}

#[tokio::test]
async fn sglang_dialect_detokenizes_to_text_and_serves_v1_tokenize() {
    let tok = qwen3();
    let options =
        ServerOptions { tokenizer: Some(Arc::clone(&tok)), dialect: Dialect::Sglang, ..ServerOptions::default() };
    let app = app_with(&setup(&[]), options);
    for path in ["/tokenize", "/v1/tokenize"] {
        let (status, _, body) =
            call(&app, "POST", path, Some(json!({"prompt": "one two", "add_special_tokens": false}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["count"], 2);
        assert_eq!(v["tokens"].as_array().unwrap().len(), 2);
        assert!(v.get("token_strs").is_none(), "{body}");
    }
    let ids = tok.encode("one two", false).unwrap();
    let (_, headers, body) = call(&app, "POST", "/v1/detokenize", Some(json!({"tokens": ids}))).await;
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), json!({"text": "one two"}));
    assert_eq!(header(&headers, "connection"), None);
}

/// The `vllm:prefix_cache_hits_total` counter of a server's `/metrics`.
async fn prefix_hits(app: &axum::Router) -> f64 {
    let (_, _, body) = call(app, "GET", "/metrics", None).await;
    let line = body.lines().find(|l| l.starts_with("vllm:prefix_cache_hits_total")).expect("the counter is exported");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn vllm_s_reset_endpoints_empty_the_prefix_cache_between_runs() {
    let app = app_with(&setup(&[]), ServerOptions::default());
    let prompt = "the same long prompt again ".repeat(20);
    let (status, _, _) = call(&app, "POST", "/v1/completions", Some(completion(&prompt, 2, false))).await;
    assert_eq!(status, StatusCode::OK);
    call(&app, "POST", "/v1/completions", Some(completion(&prompt, 2, false))).await;
    let hits = prefix_hits(&app).await;
    assert!(hits > 0.0, "the repeated prompt is served from the cache");
    for path in ["/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache"] {
        assert_eq!(call(&app, "POST", path, None).await.0, StatusCode::OK, "{path}");
    }
    call(&app, "POST", "/v1/completions", Some(completion(&prompt, 2, false))).await;
    assert_eq!(prefix_hits(&app).await, hits, "nothing cached after the reset");
    // Other engines' dialects have no such endpoint.
    let llama = app_with(&setup(&[]), ServerOptions { dialect: Dialect::LlamaCpp, ..ServerOptions::default() });
    assert_eq!(call(&llama, "POST", "/reset_prefix_cache", None).await.0, StatusCode::NOT_FOUND);
}
