//! Inputs vLLM refuses that the server once took (prompt token ids outside the vocabulary, an
//! empty served model name at startup), and images: counted as their tokens, or refused.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::tests::{app_with, call, completion, qwen3, setup};
use super::{ServerOptions, start};
use crate::error::SimError;

#[tokio::test]
async fn token_ids_outside_the_vocabulary_are_a_400_naming_the_id_and_the_vocabulary() {
    // Qwen3-0.6B's vocabulary: 151,936 ids.
    let app = app_with(&setup(&[]), ServerOptions::default());
    let err = |body: &str| serde_json::from_str::<Value>(body).unwrap()["error"].clone();
    for (prompt, id) in
        [(json!([1, 151_936]), "151936"), (json!([[5], [7, 4_000_000_000u64]]), "4000000000"), (json!([3, -1]), "-1")]
    {
        let mut req = completion("unused", 2, false);
        req["prompt"] = prompt.clone();
        let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{prompt}: {body}");
        assert_eq!(
            err(&body),
            json!({"message": format!("Token id {id} is out of vocabulary: the model's vocabulary has 151936 \
                                       tokens, ids 0 to 151935"),
                   "type": "BadRequestError", "param": "prompt", "code": 400}),
            "{prompt}"
        );
    }
    let mut req = completion("unused", 2, false);
    req["prompt"] = json!([1, 2.5]);
    let (status, _, body) = call(&app, "POST", "/v1/completions", Some(req)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(err(&body)["message"].as_str().unwrap().contains("prompt token 2.5 is not a token id"), "{body}");
    // The last id of the vocabulary is fine, and so it is with a tokenizer of that vocabulary.
    let tok = qwen3();
    let with = app_with(&setup(&[]), ServerOptions { tokenizer: Some(Arc::clone(&tok)), ..ServerOptions::default() });
    for app in [&app, &with] {
        let mut req = completion("unused", 2, false);
        req["prompt"] = json!([0, 151_935]);
        let (status, _, body) = call(app, "POST", "/v1/completions", Some(req)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["usage"]["prompt_tokens"], 2);
    }
}

#[tokio::test]
async fn an_empty_served_model_name_is_refused_at_startup_saying_what_to_pass() {
    for name in ["", "  "] {
        let options = ServerOptions { served_model_name: Some(name.into()), ..ServerOptions::default() };
        let Err(e) = start(setup(&[]), options).await else { panic!("{name:?} was accepted") };
        assert!(matches!(e, SimError::BadOption { .. }), "{e:?}");
        let message = e.to_string();
        assert!(message.contains("served-model-name"), "{message}");
        assert!(message.contains("--served-model-name my-model"), "{message}");
        assert!(message.contains("leave the flag out to serve as Qwen/Qwen3-0.6B"), "{message}");
    }
    let options = ServerOptions { served_model_name: Some("alias".into()), ..ServerOptions::default() };
    let server = start(setup(&[]), options).await.unwrap();
    assert_eq!(server.model_name(), "alias");
    server.shutdown().await;
}

#[tokio::test]
async fn a_chat_s_image_is_counted_in_its_tokens_and_refused_by_a_model_without_a_tower() {
    let url = servebench_workload::datasets::images::data_url(1280, 720, 1).unwrap();
    let chat = json!({"max_tokens": 2, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "describe"},
        {"type": "image_url", "image_url": {"url": url}},
    ]}]});
    let text = json!({"max_tokens": 2, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "describe"},
    ]}]});
    let tokens = |body: &str| serde_json::from_str::<Value>(body).unwrap()["usage"]["prompt_tokens"].as_u64().unwrap();
    let vl = crate::setup::tests::setup("Qwen/Qwen3-VL-8B-Instruct", "h100-sxm", &[("jitter", "0")]).unwrap();
    let app = app_with(&vl, ServerOptions::default());
    let (status, _, with) = call(&app, "POST", "/v1/chat/completions", Some(chat.clone())).await;
    assert_eq!(status, StatusCode::OK, "{with}");
    let (_, _, without) = call(&app, "POST", "/v1/chat/completions", Some(text)).await;
    // 720 x 1280 at 32 pixels a token: 22 x 40, as Qwen3-VL's processor gives it, and the
    // part's own marker (the template's vision-start token).
    assert_eq!(tokens(&with) - tokens(&without), 880 + 1, "{with}");
    // Served as the language model alone, with a cap of one image, or a text model: a 400
    // saying so, in vLLM's words where vLLM has them.
    let served = |pairs: &[(&str, &str)]| {
        let mut all = vec![("jitter", "0")];
        all.extend_from_slice(pairs);
        app_with(
            &crate::setup::tests::setup("Qwen/Qwen3-VL-8B-Instruct", "h100-sxm", &all).unwrap(),
            ServerOptions::default(),
        )
    };
    let mut two = chat.clone();
    two["messages"][0]["content"].as_array_mut().unwrap().push(chat["messages"][0]["content"][1].clone());
    for (app, body, says) in [
        (served(&[("language-model-only", "true")]), &chat, "At most 0 image(s) may be provided in one prompt."),
        (served(&[("limit-mm-per-prompt", "image=1")]), &two, "At most 1 image(s) may be provided in one prompt."),
        (app_with(&setup(&[]), ServerOptions::default()), &chat, "takes no images"),
    ] {
        let (status, _, answer) = call(&app, "POST", "/v1/chat/completions", Some(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
        assert!(answer.contains(says), "{answer}");
    }
    let (status, _, answer) =
        call(&served(&[("limit-mm-per-prompt", "image=2")]), "POST", "/v1/chat/completions", Some(two)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}
