//! A pooling answer (vLLM's `/v1/embeddings` and `/pooling`, Infinity's `/embeddings`): one
//! JSON body, not a stream. The client reads from it what vLLM's benchmark reads (the
//! `usage.prompt_tokens` count); an `error` object in a 200 answer is the request's failure.
//! A pooling body's inputs ([`input_items`]) are read here too, one rule for every reader.

use serde::Deserialize;
use serde_json::Value;

use crate::config::{Api, PoolingForm};

/// The inputs of a pooling body that holds several, each its own sequence on the server: a
/// rerank's `documents`, or an `input` list of texts or of token-id lists (not of a chat
/// body, whose messages are one prompt). `None` for a body of one prompt (a text, one list of
/// token ids), and for a rerank body without a `documents` list.
pub fn input_items(api: Api, body: &Value) -> Option<&[Value]> {
    match api {
        Api::Pooling(PoolingForm::Rerank) => body.get("documents")?.as_array().map(Vec::as_slice),
        Api::Pooling(form) if form != PoolingForm::EmbeddingsChat => {
            let items = body.get("input")?.as_array()?;
            let several = !items.is_empty() && items.iter().all(|i| i.is_string() || i.is_array());
            several.then_some(items.as_slice())
        }
        _ => None,
    }
}

/// What a pooling answer says about its request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolingAnswer {
    /// `usage.prompt_tokens`, where the answer gives it.
    pub prompt_tokens: Option<u32>,
}

#[derive(Deserialize)]
struct Wire {
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u32>,
}

/// Why a pooling answer counts as a failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolingError {
    /// The body is not the JSON object a pooling API answers with.
    #[error("the pooling answer is not a JSON object ({0})")]
    NotJson(String),
    /// The body is an error object.
    #[error("{0}")]
    InBand(String),
}

/// Reads a whole pooling answer.
pub fn read_answer(body: &[u8]) -> Result<PoolingAnswer, PoolingError> {
    let wire: Wire = serde_json::from_slice(body).map_err(|e| PoolingError::NotJson(e.to_string()))?;
    if let Some(error) = wire.error.filter(|e| !e.is_null()) {
        let message = error.get("message").and_then(|m| m.as_str()).map_or_else(|| error.to_string(), str::to_string);
        return Err(PoolingError::InBand(message));
    }
    Ok(PoolingAnswer { prompt_tokens: wire.usage.and_then(|u| u.prompt_tokens) })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_body_s_inputs_are_its_list_or_its_documents() {
        let embeddings = Api::Pooling(PoolingForm::Embeddings);
        let count = |api, body: Value| input_items(api, &body).map(<[Value]>::len);
        assert_eq!(count(embeddings, json!({"input": ["a", "b", "c"]})), Some(3));
        assert_eq!(count(embeddings, json!({"input": [[1, 2], [3]]})), Some(2));
        // One prompt: a text, or one list of token ids.
        assert_eq!(count(embeddings, json!({"input": "a"})), None);
        assert_eq!(count(embeddings, json!({"input": [1, 2, 3]})), None);
        assert_eq!(count(embeddings, json!({"input": []})), None);
        let rerank = Api::Pooling(PoolingForm::Rerank);
        assert_eq!(count(rerank, json!({"query": "q", "documents": ["a", "b"]})), Some(2));
        assert_eq!(count(rerank, json!({"query": "q"})), None);
        assert_eq!(count(Api::Pooling(PoolingForm::EmbeddingsChat), json!({"input": ["a", "b"]})), None);
        assert_eq!(count(Api::Completions, json!({"input": ["a", "b"]})), None);
    }

    #[test]
    fn an_answer_gives_its_prompt_tokens() {
        let vllm = br#"{"id":"embd-1","object":"list","created":1,"model":"m","data":[{"index":0,"object":"embedding","embedding":[0.1,-0.2]},{"index":1,"object":"embedding","embedding":[0.3,0.4]}],"usage":{"prompt_tokens":12,"total_tokens":12,"completion_tokens":0,"prompt_tokens_details":null}}"#;
        assert_eq!(read_answer(vllm), Ok(PoolingAnswer { prompt_tokens: Some(12) }));
        let bare = br#"{"object":"list","data":[{"object":"embedding","embedding":"AAAA","index":0}]}"#;
        assert_eq!(read_answer(bare), Ok(PoolingAnswer { prompt_tokens: None }));
    }

    #[test]
    fn an_error_object_or_a_broken_body_is_a_failure() {
        let e = read_answer(br#"{"error":{"message":"too long","type":"BadRequestError"}}"#).unwrap_err();
        assert_eq!(e, PoolingError::InBand("too long".into()));
        assert!(matches!(read_answer(b"{\"data\": ["), Err(PoolingError::NotJson(_))));
        assert!(matches!(read_answer(b"[1]"), Err(PoolingError::NotJson(_))));
        assert_eq!(read_answer(br#"{"error": null, "data": []}"#), Ok(PoolingAnswer::default()));
    }
}
