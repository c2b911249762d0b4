//! The served twin under speculative decoding: a step's accepted drafts leave in one chunk.

use axum::http::StatusCode;
use servebench_core::config::Api;

use super::ServerOptions;
use super::tests::{app_with, call, completion, frames, setup, tokens_of};

#[tokio::test]
async fn accepted_drafts_stream_in_one_chunk_with_the_token_before_them() {
    // Drafts always accepted, three a step: 9 tokens come as 1 + 4 + 4, each chunk's text the
    // joined words of its tokens, the usage counting every token.
    let spec = setup(&[
        ("speculative-config", r#"{"method": "ngram", "num_speculative_tokens": 3}"#),
        ("spec-acceptance", "1"),
    ]);
    let app = app_with(&spec, ServerOptions::default());
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(completion("one two three", 9, true))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let f = frames(&body);
    let words: Vec<usize> =
        f[..3].iter().map(|c| c["choices"][0]["text"].as_str().unwrap().split_whitespace().count()).collect();
    assert_eq!(words, vec![1, 4, 4], "{body}");
    assert_eq!(f[2]["choices"][0]["finish_reason"], "length");
    assert_eq!(f[3]["usage"]["completion_tokens"], 9);
    let (chunks, text, usage, done) = tokens_of(Api::Completions, &body);
    assert_eq!((chunks, text.split_whitespace().count(), usage, done), (3, 9, Some(9), true));
}
