//! The pooling routes in-process: a list of inputs answered one vector each with their summed
//! usage, and a rerank answered as vLLM answers it (each document's text and score, most
//! relevant first, `top_n` of them where asked, the pairs' tokens in the usage) by a
//! cross-encoder or an embedding model, and an empty prompt refused in the engine's words, as
//! the generation routes refuse it, and Infinity's image input embedded as its image alone.

use serde_json::{Value, json};

use super::ServerOptions;
use super::tests::{app_with, call, setup};

#[tokio::test]
async fn a_list_of_inputs_gets_a_vector_each_and_their_usage() {
    let app = app_with(&setup(&[]), ServerOptions::default());
    let body =
        json!({"model": "Qwen/Qwen3-0.6B", "input": ["one two three", "four five"], "truncate_prompt_tokens": -1});
    let (status, _, text) = call(&app, "POST", "/v1/embeddings", Some(body)).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data[1]["index"], 1);
    assert_eq!(v["usage"]["prompt_tokens"], 5);
}

#[tokio::test]
async fn a_rerank_scores_each_document_and_ranks_them() {
    let app = app_with(&setup(&[]), ServerOptions::default());
    let docs = ["a b", "c d e", "f", "g h i j"];
    for path in ["/rerank", "/v1/rerank", "/v2/rerank"] {
        let body =
            json!({"model": "Qwen/Qwen3-0.6B", "query": "q r s", "documents": docs, "truncate_prompt_tokens": -1});
        let (status, _, text) = call(&app, "POST", path, Some(body)).await;
        assert_eq!(status, 200, "{path}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert!(v["id"].as_str().unwrap().starts_with("rerank-"), "{v}");
        // Each pair: the 3-token query, a separator, the document.
        let words: usize = docs.iter().map(|d| d.split_whitespace().count()).sum();
        assert_eq!(v["usage"]["prompt_tokens"], json!(4 * docs.len() + words));
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), docs.len());
        let scores: Vec<f64> = results.iter().map(|r| r["relevance_score"].as_f64().unwrap()).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "most relevant first: {scores:?}");
        for r in results {
            let i = r["index"].as_u64().unwrap() as usize;
            assert_eq!(r["document"]["text"], docs[i]);
        }
    }
    let body = json!({"model": "Qwen/Qwen3-0.6B", "query": "q", "documents": docs, "top_n": 2});
    let (_, _, text) = call(&app, "POST", "/v1/rerank", Some(body)).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["results"].as_array().unwrap().len(), 2, "{v}");
    let (status, _, text) =
        call(&app, "POST", "/v1/rerank", Some(json!({"model": "Qwen/Qwen3-0.6B", "documents": docs}))).await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("query"), "{text}");
}

#[tokio::test]
async fn an_embedding_model_runs_a_rerank_s_query_once_and_reports_every_pair() {
    let docs = ["a b", "c d e", "f", "g h i j"];
    let body = json!({"model": "Qwen/Qwen3-0.6B", "query": "q r s", "documents": docs});
    let labels = "engine=\"0\",model_name=\"Qwen/Qwen3-0.6B\"";
    // The engine's prompt tokens: a pair a document (4 + 10), or the query once and each
    // document (3 + 10); the answers alike, four results and every pair in the usage.
    for (convert, engine_tokens) in [("classify", 26), ("embed", 13), ("auto", 13)] {
        let app = app_with(&setup(&[("convert", convert)]), ServerOptions::default());
        let (status, _, text) = call(&app, "POST", "/v1/rerank", Some(body.clone())).await;
        assert_eq!(status, 200, "{convert}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["results"].as_array().unwrap().len(), docs.len(), "{convert}: {v}");
        assert_eq!(v["usage"]["prompt_tokens"], 26, "{convert}: {v}");
        let mut indices: Vec<u64> =
            v["results"].as_array().unwrap().iter().map(|r| r["index"].as_u64().unwrap()).collect();
        indices.sort_unstable();
        assert_eq!(indices, [0, 1, 2, 3], "{convert}: {v}");
        let (_, _, metrics) = call(&app, "GET", "/metrics", None).await;
        let line = format!("vllm:prompt_tokens_total{{{labels}}} {engine_tokens}.0\n");
        assert!(metrics.contains(&line), "{convert}: {line}{metrics}");
        let none = json!({"model": "Qwen/Qwen3-0.6B", "query": "q", "documents": []});
        let (status, _, text) = call(&app, "POST", "/v1/rerank", Some(none)).await;
        assert_eq!(status, 400, "{convert}: {text}");
        assert!(text.contains("At least one text_pair element must be given"), "{convert}: {text}");
    }
}

#[tokio::test]
async fn an_empty_prompt_is_refused_in_the_engine_s_words_on_every_route() {
    let app = app_with(&setup(&[]), ServerOptions::default());
    let model = "Qwen/Qwen3-0.6B";
    let cases = [
        ("/v1/embeddings", json!({"model": model, "input": ["one", ""]})),
        ("/pooling", json!({"model": model, "input": ""})),
        ("/v1/completions", json!({"model": model, "prompt": "", "max_tokens": 4})),
    ];
    for (path, body) in cases {
        let (status, _, text) = call(&app, "POST", path, Some(body)).await;
        assert_eq!(status, 400, "{path}: {text}");
        assert!(text.contains("The decoder prompt cannot be empty"), "{path}: {text}");
    }
}

#[tokio::test]
async fn infinity_s_image_input_is_embedded_as_the_image_alone() {
    // vLLM's `infinity-embeddings-clip` sends the image's URL as the input, with its modality.
    let url = servebench_workload::datasets::images::data_url(1280, 720, 1).unwrap();
    let body = |modality: &str, input: Value| json!({"input": input, "modality": modality});
    let vl = crate::setup::tests::setup("Qwen/Qwen3-VL-8B-Instruct", "h100-sxm", &[("jitter", "0")]).unwrap();
    let app = app_with(&vl, ServerOptions::default());
    let (status, _, text) = call(&app, "POST", "/v1/embeddings", Some(body("image", json!(url)))).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 1, "{v}");
    // 720 x 1280 at 32 pixels a token (22 x 40), and no text or template token beside them.
    assert_eq!(v["usage"]["prompt_tokens"], 880, "{v}");
    // Text is text, whether it says so or not.
    let (_, _, text) = call(&app, "POST", "/v1/embeddings", Some(body("text", json!("a b c")))).await;
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["usage"]["prompt_tokens"], 3, "{text}");
    // Refused with the reason: another modality, an image that is not one URL, a model
    // without a tower.
    let text_model = app_with(&setup(&[]), ServerOptions::default());
    for (app, b, says) in [
        (&app, body("audio", json!(url)), "embeds text and images; modality"),
        (&app, body("image", json!([url])), "must be one image URL"),
        (&text_model, body("image", json!(url)), "takes no images"),
    ] {
        let (status, _, answer) = call(app, "POST", "/v1/embeddings", Some(b)).await;
        assert_eq!(status, 400, "{answer}");
        assert!(answer.contains(says), "{answer}");
    }
}
