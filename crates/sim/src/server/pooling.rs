//! The pooling endpoints, vLLM's `POST /v1/embeddings` (an `input`, chat `messages`, or
//! Infinity's one image as the `input` with `"modality": "image"`),
//! `POST /pooling` and `POST /v1/rerank` (a `query` and its `documents`), answered whole as
//! vLLM answers them. A pooling request is a prefill
//! alone: the engine runs each input as a request of one sampled token, so the step that ends
//! its prefill ends it (the lm_head and sampler of that step are the twin's excess over a
//! pooling model's head, small beside the prefill). Each input is its own sequence in the
//! batch, as vLLM schedules a list of inputs. The vectors are deterministic noise of the
//! model's hidden size, so an answer weighs what a real one does on the wire. A rerank runs as
//! the deployment's model does ([`crate::options::Convert`]): a cross-encoder's one sequence a
//! document (the query, a separator token, the document), or an embedding model's query once
//! and each document alone; the scores are deterministic noise.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use servebench_core::config::{Api, PoolingForm};

use super::api::{ApiError, Shared, json_text_response, read_json, unix_now};
use super::stream::{Admission, Answer};
use super::text::Prompt;
use crate::engine::{EncoderInput, Rejection};
use crate::options::Convert;
use crate::rng::mix64;

pub(crate) async fn embeddings(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let received = Instant::now();
    pool(s, PoolingForm::Embeddings, received, req).await.unwrap_or_else(IntoResponse::into_response)
}

pub(crate) async fn pooling(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let received = Instant::now();
    pool(s, PoolingForm::Pooling, received, req).await.unwrap_or_else(IntoResponse::into_response)
}

pub(crate) async fn rerank(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let received = Instant::now();
    pool(s, PoolingForm::Rerank, received, req).await.unwrap_or_else(IntoResponse::into_response)
}

/// The sequences a pooling body asks for: each input, each (query, document) pair, the one
/// conversation of chat messages with their images (their tokens after its text's), or the
/// one image an input of modality image is.
fn sequences(s: &Shared, api: Api, body: &Value) -> Result<(Vec<Prompt>, Vec<EncoderInput>), ApiError> {
    if api != Api::Pooling(PoolingForm::Rerank) {
        // An input of modality image (Infinity's form) is the image alone.
        let image = crate::tokens::image_input(api, body).map_err(|e| ApiError::bad_param("modality", e))?.is_some();
        return match crate::tokens::prompt_key(api) {
            Some(key) if !image => {
                let prompts = s.text.prompts_at(body, key, s.vocab).map_err(|e| ApiError::bad_param("input", e))?;
                Ok((prompts, Vec::new()))
            }
            _ => {
                let mut ids = if image { Vec::new() } else { s.text.prompt_ids(api, body).map_err(ApiError::bad)? };
                let images = s.tower.expand(api, body, &mut ids).map_err(|e| ApiError::bad_param("image", e))?;
                Ok((vec![Prompt { ids, text: None }], images))
            }
        };
    }
    let query = match s.text.prompts_at(body, "query", s.vocab).map_err(|e| ApiError::bad_param("query", e))?.as_slice()
    {
        [q] => q.ids.clone(),
        _ => return Err(ApiError::bad_param("query", "the query must be one text")),
    };
    // Before reading: an empty list would read as one prompt of no token ids.
    crate::tokens::check_documents(body).map_err(ApiError::bad)?;
    let documents = s.text.prompts_at(body, "documents", s.vocab).map_err(|e| ApiError::bad_param("documents", e))?;
    let ids = crate::tokens::rerank_sequences(&query, documents.iter().map(|d| d.ids.as_slice()), s.convert);
    // An embedding model's query, first, carries no document's text.
    let query = (s.convert == Convert::Embed).then_some(None);
    let texts = query.into_iter().chain(documents.into_iter().map(|d| d.text));
    Ok((ids.into_iter().zip(texts).map(|(ids, text)| Prompt { ids, text }).collect(), Vec::new()))
}

async fn pool(s: Arc<Shared>, route: PoolingForm, received: Instant, req: Request) -> Result<Response, ApiError> {
    let body = read_json(req).await?;
    s.check_model(body.get("model").and_then(Value::as_str))?;
    let api = crate::tokens::read_as(Api::Pooling(route), &body);
    let form = match api {
        Api::Pooling(form) => form,
        _ => route,
    };
    let (mut prompts, images) = sequences(&s, api, &body)?;
    let limit = truncation(&body, s.max_model_len)?;
    for p in &mut prompts {
        if p.ids.is_empty() {
            return Err(ApiError::bad(Rejection::EmptyPrompt.to_string()));
        }
        match limit {
            Some(keep) if p.ids.len() > keep => {
                p.ids.drain(..p.ids.len() - keep);
            }
            _ if p.ids.len() > s.max_model_len as usize => {
                return Err(ApiError::context_too_long(s.max_model_len, p.ids.len() as u64));
            }
            _ => {}
        }
    }
    // Every input is admitted before any is awaited: they share the engine's batches.
    let mut admitted = Vec::with_capacity(prompts.len());
    for (k, Prompt { mut ids, text }) in prompts.into_iter().enumerate() {
        let prompt_tokens = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        // The one sampled token needs a slot of the context.
        ids.truncate(s.max_model_len.saturating_sub(1).max(1) as usize);
        // Only a conversation of chat messages, one sequence, carries images.
        let admission = s.admit(ids, images.clone(), 1, true, api, k, received)?;
        let salt = mix64(s.seed ^ mix64(admission.tag.wrapping_add(1)));
        admitted.push((admission, Answer { text: Arc::clone(&s.text), salt, prompt_tokens }, text));
    }
    if form == PoolingForm::Rerank {
        return ranked(&s, &body, admitted).await;
    }
    let (object, key) = match form {
        PoolingForm::Pooling => ("pooling", "data"),
        _ => ("embedding", "embedding"),
    };
    let mut prompt_total = 0u64;
    let mut data = String::new();
    for (index, (admission, answer, _)) in admitted.into_iter().enumerate() {
        admission.collect(&answer).await.map_err(ApiError::internal)?;
        prompt_total += u64::from(answer.prompt_tokens);
        if index > 0 {
            data.push(',');
        }
        let _ = write!(data, r#"{{"index":{index},"object":"{object}","{key}":"#);
        vector(&mut data, answer.salt, s.embedding_dim);
        data.push('}');
    }
    let prefix = if form == PoolingForm::Pooling { "pool" } else { "embd" };
    let id = format!("{prefix}-{:016x}", mix64(s.seed ^ prompt_total ^ unix_now()));
    let model = serde_json::to_string(&s.model_name).unwrap_or_default();
    let text = format!(
        r#"{{"id":"{id}","object":"list","created":{},"model":{model},"data":[{data}],"usage":{{"prompt_tokens":{prompt_total},"total_tokens":{prompt_total},"completion_tokens":0,"prompt_tokens_details":null}}}}"#,
        unix_now()
    );
    Ok(json_text_response(StatusCode::OK, text))
}

/// A rerank's answer once every pair is scored: vLLM's `results`, most relevant first (the
/// first `top_n` where it is above 0), each with its document's text, and the usage.
async fn ranked(
    s: &Shared,
    body: &Value,
    admitted: Vec<(Admission, Answer, Option<String>)>,
) -> Result<Response, ApiError> {
    let top_n = match body.get("top_n") {
        None | Some(Value::Null) => 0,
        Some(v) => {
            v.as_u64().ok_or_else(|| ApiError::bad_param("top_n", format!("top_n must be 0 or more, got {v}")))?
        }
    };
    let mut lens = Vec::with_capacity(admitted.len());
    let mut results = Vec::with_capacity(admitted.len());
    // An embedding model's query comes first and is no result.
    let query = usize::from(s.convert == Convert::Embed);
    for (k, (admission, answer, text)) in admitted.into_iter().enumerate() {
        admission.collect(&answer).await.map_err(ApiError::internal)?;
        lens.push(answer.prompt_tokens as usize);
        if let Some(index) = k.checked_sub(query) {
            let score = (mix64(answer.salt) >> 11) as f64 / (1u64 << 53) as f64;
            results.push((index, score, text));
        }
    }
    let prompt_total = crate::tokens::rerank_usage(&lens, s.convert) as u64;
    results.sort_by(|a, b| b.1.total_cmp(&a.1));
    if top_n > 0 {
        results.truncate(top_n as usize);
    }
    let mut data = String::new();
    for (k, (index, score, text)) in results.iter().enumerate() {
        if k > 0 {
            data.push(',');
        }
        let text = serde_json::to_string(text).unwrap_or_default();
        let _ = write!(
            data,
            r#"{{"index":{index},"document":{{"text":{text},"multi_modal":null}},"relevance_score":{score:.6}}}"#
        );
    }
    let id = format!("rerank-{:016x}", mix64(s.seed ^ prompt_total ^ unix_now()));
    let model = serde_json::to_string(&s.model_name).unwrap_or_default();
    let text = format!(
        r#"{{"id":"{id}","model":{model},"usage":{{"prompt_tokens":{prompt_total},"total_tokens":{prompt_total}}},"results":[{data}]}}"#
    );
    Ok(json_text_response(StatusCode::OK, text))
}

/// `truncate_prompt_tokens`: `-1` keeps the model's context, `k` the last `k` tokens; absent
/// or null, a prompt past the context is refused.
fn truncation(body: &Value, max_model_len: u32) -> Result<Option<usize>, ApiError> {
    match body.get("truncate_prompt_tokens") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_i64() {
            Some(-1) => Ok(Some(max_model_len as usize)),
            Some(k) if k >= 1 => Ok(Some((k as usize).min(max_model_len as usize))),
            _ => Err(ApiError::bad_param(
                "truncate_prompt_tokens",
                format!("truncate_prompt_tokens must be -1 or a whole number above 0, got {v}"),
            )),
        },
    }
}

/// `dim` floats of deterministic noise as a JSON list.
fn vector(out: &mut String, salt: u64, dim: u32) {
    out.push('[');
    for i in 0..dim {
        if i > 0 {
            out.push(',');
        }
        let x = (mix64(salt ^ u64::from(i)) >> 11) as f64 / (1u64 << 53) as f64;
        let _ = write!(out, "{:.6}", (x - 0.5) * 0.1);
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truncation_reads_vllm_s_values() {
        assert_eq!(truncation(&json!({}), 100).unwrap(), None);
        assert_eq!(truncation(&json!({"truncate_prompt_tokens": -1}), 100).unwrap(), Some(100));
        assert_eq!(truncation(&json!({"truncate_prompt_tokens": 7}), 100).unwrap(), Some(7));
        assert_eq!(truncation(&json!({"truncate_prompt_tokens": 700}), 100).unwrap(), Some(100));
        assert!(truncation(&json!({"truncate_prompt_tokens": 0}), 100).is_err());
        assert!(truncation(&json!({"truncate_prompt_tokens": "x"}), 100).is_err());
    }

    #[test]
    fn a_vector_is_a_json_list_of_its_size() {
        let mut s = String::new();
        vector(&mut s, 3, 5);
        let v: Vec<f64> = serde_json::from_str(&s).unwrap();
        assert_eq!(v.len(), 5);
        assert!(v.iter().all(|x| x.abs() <= 0.05));
    }
}
