//! Turning a request body into prompt token ids without a tokenizer, so the prefix cache sees
//! the same ids for the same text in `predict` and in a simulated server alike.
//!
//! [`WordHashMapper`] splits the prompt (or the chat messages, each preceded by a role marker)
//! at whitespace and hashes each word to an id: one word, one token. A tokenizer-backed mapper
//! can implement [`TokenMapper`] later for exact counts.

use std::borrow::Cow;

use serde_json::{Value, json};

use servebench_core::config::{Api, PoolingForm};
use servebench_core::protocol::pooling::input_items;

use crate::options::Convert;

/// The key a body holds its prompt under where it is read as it is, not as a conversation:
/// a completions body's `prompt`, a pooling body's `input` (text, token ids, or a list of
/// either); `None` for the templated APIs.
pub fn prompt_key(api: Api) -> Option<&'static str> {
    match api {
        Api::Completions => Some("prompt"),
        Api::Pooling(form) if form != PoolingForm::EmbeddingsChat => Some("input"),
        _ => None,
    }
}

/// The image URL a pooling body's `input` is where the body says `"modality": "image"`
/// (Infinity's form, which vLLM's `infinity-embeddings-clip` sends: the image in place of the
/// text); `None` for text (`"text"`, or no modality) and for every other API. Another modality
/// is refused with what the simulator embeds.
pub fn image_input(api: Api, body: &Value) -> Result<Option<&str>, String> {
    if !matches!(api, Api::Pooling(PoolingForm::Embeddings | PoolingForm::Infinity | PoolingForm::Pooling)) {
        return Ok(None);
    }
    match body.get("modality").and_then(Value::as_str) {
        None | Some("text") => Ok(None),
        Some("image") => match body.get("input") {
            Some(Value::String(url)) => Ok(Some(url)),
            _ => Err("an input of modality \"image\" must be one image URL".into()),
        },
        Some(other) => Err(format!("the simulator embeds text and images; modality {other:?} is not supported")),
    }
}

/// The chat messages a templated request's body stands for: a chat body's `messages`; a
/// Responses body's `instructions` as the system message, then its `input`, a text (one user
/// message) or a list of messages; a Messages body's `system` (a text or a list of text
/// blocks) as the system message, then its `messages`. Completions have no conversation (their
/// prompt is read as it is): an error.
pub fn conversation(api: Api, body: &Value) -> Result<Cow<'_, Value>, String> {
    let system = |key: &str| body.get(key).filter(|v| !v.is_null()).map(|v| json!({"role": "system", "content": v}));
    let listed = |key: &str| match body.get(key) {
        Some(Value::Array(items)) => Ok(items.iter().cloned()),
        Some(other) => Err(format!("\"{key}\" must be a list of messages, got {other}")),
        None => Err(format!("the body has no \"{key}\" list")),
    };
    match api {
        Api::Completions => Err("a completions body has a prompt, not a conversation".into()),
        Api::Pooling(form) if form != PoolingForm::EmbeddingsChat => {
            Err("a pooling body has an input, not a conversation".into())
        }
        Api::Chat | Api::Pooling(_) => {
            body.get("messages").map(Cow::Borrowed).ok_or_else(|| "the body has no \"messages\" list".into())
        }
        Api::Responses => match body.get("input") {
            Some(Value::String(text)) => {
                let user = json!({"role": "user", "content": text});
                Ok(Cow::Owned(Value::Array(system("instructions").into_iter().chain([user]).collect())))
            }
            Some(Value::Array(_)) => {
                listed("input").map(|m| Cow::Owned(Value::Array(system("instructions").into_iter().chain(m).collect())))
            }
            Some(other) => Err(format!("\"input\" must be text or a list of messages, got {other}")),
            None => Err("the body has no \"input\"".into()),
        },
        Api::Messages => {
            listed("messages").map(|m| Cow::Owned(Value::Array(system("system").into_iter().chain(m).collect())))
        }
    }
}

/// Maps a request body to prompt token ids.
pub trait TokenMapper: Send + Sync {
    /// Appends the ids of the prompt of `body` (a completions, chat, Responses or Messages
    /// request) to `out`.
    /// The error says what in the body could not be read.
    fn prompt_ids(&self, api: Api, body: &Value, out: &mut Vec<u32>) -> Result<(), String>;
}

/// The API a route serving `served` reads `body` as: `/v1/embeddings` takes chat messages as
/// well as an input, so a body there with `messages` is read as chat; any other as `served`.
pub fn read_as(served: Api, body: &Value) -> Api {
    match served {
        Api::Pooling(PoolingForm::Embeddings) if body.get("messages").is_some() => {
            Api::Pooling(PoolingForm::EmbeddingsChat)
        }
        other => other,
    }
}

/// A rerank pair as a cross-encoder reads it: the query, one separator token, the document.
fn rerank_pair(query: &[u32], document: &[u32]) -> Vec<u32> {
    let mut ids = Vec::with_capacity(query.len() + 1 + document.len());
    ids.extend_from_slice(query);
    ids.push(word_id("<|sep|>"));
    ids.extend_from_slice(document);
    ids
}

/// A rerank body's empty `documents` list refused in vLLM's words; any other body passes.
pub fn check_documents(body: &Value) -> Result<(), &'static str> {
    match body.get("documents").and_then(Value::as_array) {
        Some(documents) if documents.is_empty() => Err("At least one text_pair element must be given"),
        _ => Ok(()),
    }
}

/// A rerank's sequences as the deployment runs them: a cross-encoder's pairs (the query, one
/// separator token, the document), or an embedding model's query once, then each document.
pub fn rerank_sequences<'a>(
    query: &'a [u32],
    documents: impl Iterator<Item = &'a [u32]>,
    convert: Convert,
) -> Vec<Vec<u32>> {
    match convert {
        Convert::Classify => documents.map(|d| rerank_pair(query, d)).collect(),
        Convert::Embed => std::iter::once(query).chain(documents).map(<[u32]>::to_vec).collect(),
    }
}

/// The prompt tokens vLLM's usage counts for a rerank run as sequences of `lens` tokens
/// ([`rerank_sequences`]): every pair's, or for an embedding model each document's with the
/// query's and one padding token (the pair vLLM's `_cosine_similarity` reports).
pub fn rerank_usage(lens: &[usize], convert: Convert) -> usize {
    match (convert, lens) {
        (Convert::Embed, [query, documents @ ..]) => documents.iter().map(|d| query + 1 + d).sum(),
        _ => lens.iter().sum(),
    }
}

/// The inputs a pooling body carries, as token ids: each prompt of an `input` list (texts, or
/// lists of token ids), a rerank's query and then its documents (which the deployment runs as
/// [`rerank_sequences`]), or the body's one prompt.
pub fn pooling_inputs(mapper: &dyn TokenMapper, api: Api, body: &Value) -> Result<Vec<Vec<u32>>, String> {
    let one = |prompt: &Value| {
        let mut ids = Vec::new();
        mapper.prompt_ids(Api::Completions, &json!({ "prompt": prompt }), &mut ids).map(|()| ids)
    };
    match api {
        Api::Pooling(PoolingForm::Rerank) => {
            let query = one(body.get("query").ok_or("the body has no \"query\"")?)?;
            check_documents(body)?;
            let documents = input_items(api, body).ok_or("\"documents\" must be a list of texts")?;
            std::iter::once(Ok(query)).chain(documents.iter().map(one)).collect()
        }
        // An image in place of the text: no text token; its own follow ([`crate::media`]).
        _ if image_input(api, body)?.is_some() => Ok(vec![Vec::new()]),
        _ => match input_items(api, body) {
            Some(items) => items.iter().map(one).collect(),
            None => {
                let mut ids = Vec::new();
                mapper.prompt_ids(api, body, &mut ids).map(|()| vec![ids])
            }
        },
    }
}

/// One whitespace-separated word = one token, its id a hash of the word.
#[derive(Clone, Copy, Debug, Default)]
pub struct WordHashMapper;

/// The id of a word: 64-bit FNV-1a folded to 31 bits.
pub fn word_id(word: &str) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in word.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    ((h >> 33) ^ (h & 0x7fff_ffff)) as u32 & 0x7fff_ffff
}

fn push_words(text: &str, out: &mut Vec<u32>) {
    out.extend(text.split_whitespace().map(word_id));
}

fn push_prompt(prompt: &Value, out: &mut Vec<u32>) -> Result<(), String> {
    match prompt {
        Value::String(s) => push_words(s, out),
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::String(s) => push_words(s, out),
                    Value::Number(n) => out.push(
                        n.as_u64()
                            .and_then(|v| u32::try_from(v).ok())
                            .ok_or_else(|| format!("prompt token {n} is not a token id"))?,
                    ),
                    Value::Array(_) => push_prompt(item, out)?,
                    other => return Err(format!("prompt items must be text or token ids, got {other}")),
                }
            }
        }
        other => return Err(format!("prompt must be text or a list, got {other}")),
    }
    Ok(())
}

fn push_content(content: &Value, out: &mut Vec<u32>) -> Result<(), String> {
    match content {
        Value::String(s) => push_words(s, out),
        Value::Null => {}
        Value::Array(parts) => {
            for part in parts {
                match part.get("text").and_then(Value::as_str) {
                    Some(t) => push_words(t, out),
                    // Images and other parts: one placeholder token each.
                    None => out.push(word_id("<|media|>")),
                }
            }
        }
        other => return Err(format!("message content must be text or a list of parts, got {other}")),
    }
    Ok(())
}

impl TokenMapper for WordHashMapper {
    fn prompt_ids(&self, api: Api, body: &Value, out: &mut Vec<u32>) -> Result<(), String> {
        match prompt_key(api) {
            Some(key) => {
                let prompt = body.get(key).ok_or_else(|| format!("the body has no \"{key}\""))?;
                push_prompt(prompt, out)
            }
            None => {
                let conversation = conversation(api, body)?;
                let messages = conversation.as_array().ok_or("\"messages\" must be a list")?;
                for m in messages {
                    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
                    out.push(word_id(&format!("<|{role}|>")));
                    push_content(m.get("content").unwrap_or(&Value::Null), out)?;
                }
                // The assistant header the chat template appends.
                out.push(word_id("<|assistant|>"));
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ids(api: Api, body: Value) -> Result<Vec<u32>, String> {
        let mut out = Vec::new();
        WordHashMapper.prompt_ids(api, &body, &mut out).map(|()| out)
    }

    #[test]
    fn words_become_one_token_each_and_equal_words_equal_ids() {
        let a = ids(Api::Completions, json!({"prompt": "the cat  sat on the mat"})).unwrap();
        assert_eq!(a.len(), 6);
        assert_eq!(a[0], a[4]);
        assert_ne!(a[0], a[1]);
        let b = ids(Api::Completions, json!({"prompt": "the cat sat on a hat"})).unwrap();
        assert_eq!(a[..4], b[..4]);
        let t = ids(Api::Completions, json!({"prompt": [1, 2, 3]})).unwrap();
        assert_eq!(t, vec![1, 2, 3]);
    }

    #[test]
    fn an_input_of_modality_image_is_an_image_url_and_no_text() {
        let embed = Api::Pooling(PoolingForm::Embeddings);
        let image = json!({"input": "data:image/png;base64,AAAA", "modality": "image"});
        assert_eq!(image_input(embed, &image), Ok(Some("data:image/png;base64,AAAA")));
        assert_eq!(pooling_inputs(&WordHashMapper, embed, &image).unwrap(), vec![Vec::<u32>::new()]);
        for text in [json!({"input": "a b", "modality": "text"}), json!({"input": "a b"})] {
            assert_eq!(image_input(embed, &text), Ok(None));
            assert_eq!(pooling_inputs(&WordHashMapper, embed, &text).unwrap()[0].len(), 2);
        }
        // Only a pooling input reads a modality; a rerank or a completion ignores the key.
        assert_eq!(image_input(Api::Completions, &image), Ok(None));
        assert_eq!(image_input(Api::Pooling(PoolingForm::Rerank), &image), Ok(None));
        let audio = json!({"input": "x", "modality": "audio"});
        assert!(image_input(embed, &audio).unwrap_err().contains("\"audio\" is not supported"));
        assert!(image_input(embed, &json!({"input": ["x"], "modality": "image"})).is_err());
    }

    #[test]
    fn a_pooling_body_is_one_sequence_an_input_or_a_query_and_documents() {
        let inputs = |api, body| pooling_inputs(&WordHashMapper, api, &body).unwrap();
        let embed = Api::Pooling(PoolingForm::Embeddings);
        assert_eq!(inputs(embed, json!({"input": "a b c"})).len(), 1);
        assert_eq!(inputs(embed, json!({"input": [1, 2, 3]})), vec![vec![1, 2, 3]]);
        let two = inputs(embed, json!({"input": ["a b", "c d e"]}));
        assert_eq!(two.iter().map(Vec::len).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(inputs(embed, json!({"input": [[1], [2, 3]]})), vec![vec![1], vec![2, 3]]);
        let rerank = Api::Pooling(PoolingForm::Rerank);
        let read = inputs(rerank, json!({"query": "q r", "documents": ["x", "y z w"]}));
        assert_eq!(read.iter().map(Vec::len).collect::<Vec<_>>(), [2, 1, 3], "the query, then each document");
        assert!(pooling_inputs(&WordHashMapper, rerank, &json!({"query": "q"})).is_err());
    }

    #[test]
    fn an_embedding_model_runs_a_rerank_s_query_once_and_counts_it_with_every_document() {
        let body = json!({"query": "q r", "documents": ["x", "y z w"]});
        let rerank = Api::Pooling(PoolingForm::Rerank);
        let read = pooling_inputs(&WordHashMapper, rerank, &body).unwrap();
        let lens = |convert| -> Vec<usize> {
            let docs = read[1..].iter().map(Vec::as_slice);
            rerank_sequences(&read[0], docs, convert).iter().map(Vec::len).collect()
        };
        // A cross-encoder: two pairs (query, separator, document) sharing the query's ids; an
        // embedding model: the query, then each document.
        assert_eq!(lens(Convert::Classify), [4, 6]);
        let pairs = rerank_sequences(&read[0], read[1..].iter().map(Vec::as_slice), Convert::Classify);
        assert_eq!(pairs[0][..3], pairs[1][..3]);
        assert_eq!(lens(Convert::Embed), [2, 1, 3]);
        // vLLM's usage: every pair, or for each document the query, a padding token and it.
        assert_eq!(rerank_usage(&[4, 6], Convert::Classify), 10);
        assert_eq!(rerank_usage(&[2, 1, 3], Convert::Embed), 10);
        assert_eq!(rerank_usage(&[2], Convert::Embed), 0);
        let none = json!({"query": "q", "documents": []});
        let e = pooling_inputs(&WordHashMapper, rerank, &none).unwrap_err();
        assert_eq!(e, "At least one text_pair element must be given");
    }

    #[test]
    fn chat_messages_carry_role_markers() {
        let body = json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hello there"}]}
        ]});
        let v = ids(Api::Chat, body).unwrap();
        assert_eq!(v.len(), 1 + 2 + 1 + 2 + 1);
        assert_eq!(v[0], word_id("<|system|>"));
    }

    #[test]
    fn responses_and_messages_bodies_read_as_the_chat_they_stand_for() {
        let text = ids(Api::Responses, json!({"input": "hello there", "instructions": "be brief"})).unwrap();
        let chat = json!({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]});
        assert_eq!(text, ids(Api::Chat, chat.clone()).unwrap());
        let listed = ids(Api::Responses, json!({"input": chat["messages"], "instructions": null})).unwrap();
        assert_eq!(listed, text);
        let messages = json!({"system": [{"type": "text", "text": "be brief"}], "messages": [{"role": "user", "content": "hello there"}]});
        assert_eq!(ids(Api::Messages, messages).unwrap(), text);
    }

    #[test]
    fn unreadable_bodies_say_what_is_missing() {
        assert!(ids(Api::Completions, json!({"messages": []})).unwrap_err().contains("prompt"));
        assert!(ids(Api::Chat, json!({"prompt": "x"})).unwrap_err().contains("messages"));
        assert!(ids(Api::Completions, json!({"prompt": [-1]})).unwrap_err().contains("token id"));
        assert!(ids(Api::Responses, json!({"prompt": "x"})).unwrap_err().contains("input"));
        assert!(ids(Api::Responses, json!({"input": 3})).unwrap_err().contains("input"));
        assert!(ids(Api::Messages, json!({"input": "x"})).unwrap_err().contains("messages"));
    }
}
