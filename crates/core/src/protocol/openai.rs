//! What one SSE data payload of an OpenAI-compatible stream means, with vLLM 0.33's rules.
//!
//! - Completions: a chunk with a non-empty `choices` list carries a token, even when its
//!   `text` is empty (special tokens).
//! - Chat: a chunk carries a token when `choices[0].delta` has a non-empty `content`,
//!   `reasoning`, `reasoning_content`, `tool_calls` or `function_call`, or has `content: ""`
//!   without a `role` key. The opening `{"role": "assistant", "content": ""}` chunk is not a
//!   token.
//! - `usage` is read wherever it appears (llama.cpp puts it in the last chunk that still has
//!   `choices`; vLLM in a separate `choices: []` chunk); the last one seen wins.
//! - An `{"error": ...}` payload is an in-band error (vLLM's own client counts those streams as
//!   successes; servebench does not).
//! - vLLM's per-request `metrics` object gives the server's queue time and TTFT.
//! - Responses and Messages streams are typed events, not `choices` chunks: [`classify`] hands
//!   them to `responses` and `messages`, which reuse this module's text and usage readers.
//!
//! Payloads are deserialized borrowed: text without escapes is not copied, and `choices` is
//! never collected into a vector (only its length and first element are kept).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::config::Api;
use crate::record::Usage;

/// A classified data payload.
#[derive(Clone, Debug, PartialEq)]
pub enum Payload<'a> {
    /// `data: [DONE]`.
    Done,
    /// A JSON chunk.
    Chunk(StreamChunk<'a>),
}

/// The parts of one streamed JSON chunk that a benchmark needs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamChunk<'a> {
    /// The chunk carries a token by vLLM's rules (its arrival is a TTFT/ITL timestamp).
    pub token: bool,
    /// Generated text: the completion `text`, or the chat delta's `content`.
    pub text: Option<Cow<'a, str>>,
    /// Reasoning text of a chat delta (`reasoning`, else `reasoning_content`).
    pub reasoning: Option<Cow<'a, str>>,
    pub finish_reason: Option<Cow<'a, str>>,
    /// Token counts, when this chunk carried `usage`.
    pub usage: Option<Usage>,
    /// The message of an in-band error payload.
    pub error: Option<String>,
    /// vLLM's per-request `metrics` object, when present.
    pub server: Option<ServerTimings>,
    /// The event that ends a Responses or Messages stream (`response.completed` or
    /// `response.incomplete`, `message_stop`); completions and chat streams have none.
    pub end: bool,
}

/// Server-side timings from vLLM's `metrics` object, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
pub struct ServerTimings {
    #[serde(default)]
    pub queue_time_ms: Option<f64>,
    #[serde(default)]
    pub time_to_first_token_ms: Option<f64>,
}

/// A payload that is neither `[DONE]` nor a JSON object of the expected shape.
#[derive(Debug, thiserror::Error)]
#[error("undecodable stream payload ({reason}): {excerpt}")]
pub struct ClassifyError {
    reason: String,
    excerpt: String,
}

impl ClassifyError {
    pub(super) fn new(reason: impl fmt::Display, data: &[u8]) -> Self {
        const MAX: usize = 120;
        let text = String::from_utf8_lossy(&data[..data.len().min(MAX)]);
        let more = if data.len() > MAX { "…" } else { "" };
        Self { reason: reason.to_string(), excerpt: format!("{text}{more}") }
    }
}

/// Classifies one SSE data payload of a completions, chat, Responses or Messages stream.
pub fn classify(api: Api, data: &[u8]) -> Result<Payload<'_>, ClassifyError> {
    let trimmed = data.trim_ascii();
    if trimmed == b"[DONE]" {
        return Ok(Payload::Done);
    }
    match api {
        // A pooling answer is one JSON body, read whole by `pooling::read_answer`; were it
        // streamed, its frames would be read as completions chunks.
        Api::Completions | Api::Pooling(_) => choices(false, trimmed, data),
        Api::Chat => choices(true, trimmed, data),
        Api::Responses => super::responses::classify(data),
        Api::Messages => super::messages::classify(data),
    }
}

/// A completions (`chat` false) or chat chunk: `choices`, `usage`, `error` and `metrics`.
fn choices<'a>(chat: bool, trimmed: &'a [u8], data: &[u8]) -> Result<Payload<'a>, ClassifyError> {
    let raw: RawChunk<'_> = serde_json::from_slice(trimmed).map_err(|e| ClassifyError::new(e, data))?;
    let mut chunk = StreamChunk {
        usage: raw.usage.map(RawUsage::into_usage),
        error: raw.error.map(|e| e.0),
        server: raw.metrics,
        ..StreamChunk::default()
    };
    let Some(FirstChoice { len, first: Some(choice) }) = raw.choices else {
        return Ok(Payload::Chunk(chunk));
    };
    chunk.finish_reason = text(choice.finish_reason);
    if !chat {
        chunk.token = len > 0;
        chunk.text = text(choice.text);
    } else if let Some(delta) = choice.delta {
        let content = text(delta.content);
        let reasoning = text(delta.reasoning);
        let reasoning_content = text(delta.reasoning_content);
        let empty_content = content.as_deref() == Some("");
        chunk.token = truthy(&content)
            || truthy(&reasoning)
            || truthy(&reasoning_content)
            || delta.tool_calls.0
            || delta.function_call.0
            || (empty_content && !delta.role.0);
        chunk.text = content;
        chunk.reasoning = reasoning.or(reasoning_content);
    }
    Ok(Payload::Chunk(chunk))
}

fn truthy(s: &Option<Cow<'_, str>>) -> bool {
    s.as_deref().is_some_and(|s| !s.is_empty())
}

#[derive(Deserialize)]
struct RawChunk<'a> {
    #[serde(default, borrow)]
    choices: Option<FirstChoice<'a>>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<ErrorMessage>,
    #[serde(default)]
    metrics: Option<ServerTimings>,
}

#[derive(Deserialize)]
struct RawChoice<'a> {
    #[serde(default, borrow)]
    text: Option<Text<'a>>,
    #[serde(default, borrow)]
    delta: Option<RawDelta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Text<'a>>,
}

#[derive(Deserialize)]
struct RawDelta<'a> {
    #[serde(default)]
    role: Present,
    #[serde(default, borrow)]
    content: Option<Text<'a>>,
    #[serde(default, borrow)]
    reasoning: Option<Text<'a>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Text<'a>>,
    #[serde(default)]
    tool_calls: Truthy,
    #[serde(default)]
    function_call: Truthy,
}

/// Token counts: completions' and chat's `prompt_tokens`/`completion_tokens`, or the
/// Responses API's `input_tokens`/`output_tokens`.
#[derive(Deserialize)]
pub(super) struct RawUsage {
    #[serde(default, alias = "input_tokens")]
    prompt_tokens: Option<u64>,
    #[serde(default, alias = "output_tokens")]
    completion_tokens: Option<u64>,
}

impl RawUsage {
    pub(super) fn into_usage(self) -> Usage {
        usage(self.prompt_tokens, self.completion_tokens)
    }
}

/// Token counts as read, each clamped to `u32`.
pub(super) fn usage(prompt_tokens: Option<u64>, completion_tokens: Option<u64>) -> Usage {
    let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
    Usage { prompt_tokens: prompt_tokens.map(clamp), completion_tokens: completion_tokens.map(clamp) }
}

/// A string borrowed from the payload when it has no escapes (serde does not borrow a
/// `Cow` inside an `Option` by itself).
pub(super) struct Text<'a>(pub(super) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor { lenient: false }).map(Text)
    }
}

/// Like [`Text`], but any other JSON value reads as the empty string (a field whose type
/// differs between event types never fails the stream).
pub(super) struct LooseText<'a>(pub(super) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for LooseText<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TextVisitor { lenient: true }).map(LooseText)
    }
}

/// A string, borrowed when it can be; `lenient`: anything else is "" rather than an error.
struct TextVisitor {
    lenient: bool,
}

impl TextVisitor {
    fn other<'de, E: de::Error>(&self, what: de::Unexpected<'_>) -> Result<Cow<'de, str>, E> {
        if self.lenient { Ok(Cow::Borrowed("")) } else { Err(E::invalid_type(what, self)) }
    }
}

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(if self.lenient { "any JSON value" } else { "a string" })
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        self.other(de::Unexpected::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.other(de::Unexpected::Signed(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.other(de::Unexpected::Unsigned(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        self.other(de::Unexpected::Float(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.other(de::Unexpected::Unit)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        self.other(de::Unexpected::Seq)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        self.other(de::Unexpected::Map)
    }
}

fn text(t: Option<Text<'_>>) -> Option<Cow<'_, str>> {
    t.map(|t| t.0)
}

/// The `choices` array, reduced to its length and first element.
struct FirstChoice<'a> {
    len: usize,
    first: Option<RawChoice<'a>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for FirstChoice<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = FirstChoice<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of choices")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let first: Option<RawChoice<'a>> = seq.next_element()?;
                let mut len = usize::from(first.is_some());
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    len += 1;
                }
                Ok(FirstChoice { len, first })
            }
        }
        d.deserialize_seq(V(std::marker::PhantomData))
    }
}

/// Whether a key was present at all (Python's `"role" in delta`), whatever its value.
#[derive(Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d)?;
        Ok(Present(true))
    }
}

/// Python truthiness of any JSON value, computed without building it.
#[derive(Default)]
struct Truthy(bool);

impl<'de> Deserialize<'de> for Truthy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Truthy;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Truthy, E> {
                Ok(Truthy(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Truthy, E> {
                Ok(Truthy(v != 0))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Truthy, E> {
                Ok(Truthy(v != 0))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Truthy, E> {
                Ok(Truthy(v != 0.0))
            }
            fn visit_str<E>(self, v: &str) -> Result<Truthy, E> {
                Ok(Truthy(!v.is_empty()))
            }
            fn visit_unit<E>(self) -> Result<Truthy, E> {
                Ok(Truthy(false))
            }
            fn visit_none<E>(self) -> Result<Truthy, E> {
                Ok(Truthy(false))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Truthy, D::Error> {
                Truthy::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Truthy, A::Error> {
                let mut any = false;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(Truthy(any))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Truthy, A::Error> {
                let mut any = false;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    any = true;
                }
                Ok(Truthy(any))
            }
        }
        d.deserialize_any(V)
    }
}

/// The message of an `error` field: a string, or an object with a `message`.
pub(super) struct ErrorMessage(pub(super) String);

impl<'de> Deserialize<'de> for ErrorMessage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Option<ErrorMessage>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an error message or object")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Some(ErrorMessage(v.to_string())))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut message = None;
                let mut code = None;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    match key.as_ref() {
                        "message" => message = map.next_value::<Option<String>>()?,
                        "code" | "http_status_code" => {
                            code = map.next_value::<Option<serde_json::Value>>()?;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                let mut text = message.unwrap_or_else(|| "error without a message".to_string());
                if let Some(code) = code.filter(|c| !c.is_null()) {
                    text.push_str(&format!(" (code {code})"));
                }
                Ok(Some(ErrorMessage(text)))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(v.then(|| ErrorMessage("error: true".to_string())))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Some(ErrorMessage(format!("error {v}"))))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Some(ErrorMessage(format!("error {v}"))))
            }
        }
        d.deserialize_any(V)?.ok_or_else(|| de::Error::custom("null error"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(api: Api, json: &str) -> StreamChunk<'_> {
        match classify(api, json.as_bytes()).unwrap() {
            Payload::Chunk(c) => c,
            Payload::Done => panic!("not a chunk: {json}"),
        }
    }

    #[test]
    fn completions_tokens_are_non_empty_choices_even_with_empty_text() {
        let c = chunk(Api::Completions, r#"{"choices":[{"index":0,"text":""}]}"#);
        assert!(c.token);
        assert_eq!(c.text.as_deref(), Some(""));
        let c = chunk(Api::Completions, r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#);
        assert!(!c.token);
        assert_eq!(c.usage, Some(Usage { prompt_tokens: Some(3), completion_tokens: Some(4) }));
        assert!(!chunk(Api::Completions, r#"{"choices":null,"usage":null}"#).token);
        assert!(!chunk(Api::Completions, r#"{"id":"x"}"#).token);
    }

    #[test]
    fn the_role_only_chat_chunk_is_not_a_token() {
        let role = r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#;
        assert!(!chunk(Api::Chat, role).token);
        let role_null = r#"{"choices":[{"delta":{"role":null,"content":""}}]}"#;
        assert!(!chunk(Api::Chat, role_null).token, "a role key counts even when null");
        let empty = r#"{"choices":[{"delta":{"content":""}}]}"#;
        assert!(chunk(Api::Chat, empty).token, "content \"\" without role is a token");
        let finish = r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#;
        let c = chunk(Api::Chat, finish);
        assert!(!c.token);
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn chat_tokens_come_from_content_reasoning_and_tool_calls() {
        let cases = [
            (r#"{"choices":[{"delta":{"role":"assistant","content":"Hi"}}]}"#, true),
            (r#"{"choices":[{"delta":{"reasoning":"hm"}}]}"#, true),
            (r#"{"choices":[{"delta":{"reasoning_content":"hm","content":null}}]}"#, true),
            (r#"{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#, true),
            (r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#, false),
            (r#"{"choices":[{"delta":{"function_call":{"name":"f"}}}]}"#, true),
            (r#"{"choices":[{"delta":{"function_call":null,"content":null}}]}"#, false),
            (r#"{"choices":[{"index":0}]}"#, false),
        ];
        for (json, token) in cases {
            assert_eq!(chunk(Api::Chat, json).token, token, "{json}");
        }
        let c = chunk(Api::Chat, r#"{"choices":[{"delta":{"reasoning_content":"r","content":"c"}}]}"#);
        assert_eq!((c.text.as_deref(), c.reasoning.as_deref()), (Some("c"), Some("r")));
    }

    #[test]
    fn only_the_first_choice_is_read_and_text_is_borrowed_when_unescaped() {
        let json = r#"{"choices":[{"text":"a"},{"text":"b"},{"text":"c"}]}"#;
        let c = chunk(Api::Completions, json);
        assert!(matches!(c.text, Some(Cow::Borrowed("a"))));
        let c = chunk(Api::Completions, r#"{"choices":[{"text":"a\nb"}]}"#);
        assert_eq!(c.text.as_deref(), Some("a\nb"));
    }

    #[test]
    fn usage_in_a_content_chunk_is_read() {
        let json = r#"{"choices":[{"text":"","finish_reason":"length"}],"usage":{"completion_tokens":128,"prompt_tokens":9,"total_tokens":137}}"#;
        let c = chunk(Api::Completions, json);
        assert!(c.token);
        assert_eq!(c.usage.and_then(|u| u.completion_tokens), Some(128));
    }

    #[test]
    fn in_band_errors_are_detected_in_their_common_shapes() {
        let vllm = r#"{"error":{"message":"boom","type":"InternalServerError","param":null,"code":500}}"#;
        assert_eq!(chunk(Api::Chat, vllm).error.as_deref(), Some("boom (code 500)"));
        let tgi = r#"{"error":{"message":"overloaded","http_status_code":422}}"#;
        assert_eq!(chunk(Api::Chat, tgi).error.as_deref(), Some("overloaded (code 422)"));
        let plain = r#"{"error":"Input validation error","error_type":"validation"}"#;
        assert_eq!(chunk(Api::Completions, plain).error.as_deref(), Some("Input validation error"));
        assert!(chunk(Api::Chat, r#"{"error":null,"choices":[]}"#).error.is_none());
    }

    #[test]
    fn vllm_metrics_give_server_timings() {
        let json = r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2},"metrics":{"time_to_first_token_ms":12.5,"queue_time_ms":3.0,"mean_itl_ms":1.0}}"#;
        let c = chunk(Api::Chat, json);
        assert_eq!(c.server, Some(ServerTimings { queue_time_ms: Some(3.0), time_to_first_token_ms: Some(12.5) }));
    }

    #[test]
    fn done_and_garbage_are_told_apart() {
        assert_eq!(classify(Api::Chat, b" [DONE] ").unwrap(), Payload::Done);
        let err = classify(Api::Chat, b"{\"choices\":[").unwrap_err();
        assert!(err.to_string().contains("{\"choices\":["), "{err}");
        assert!(classify(Api::Chat, b"42").is_err());
        assert!(classify(Api::Chat, br#"{"choices":{"text":"x"}}"#).is_err());
    }

    proptest::proptest! {
        #[test]
        fn classify_never_panics(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let _ = classify(Api::Chat, &data);
            let _ = classify(Api::Completions, &data);
        }

        #[test]
        fn completion_text_round_trips_through_json(text in "\\PC{0,40}") {
            let json = serde_json::json!({"choices": [{"index": 0, "text": text}]}).to_string();
            let c = chunk(Api::Completions, &json);
            proptest::prop_assert!(c.token);
            proptest::prop_assert_eq!(c.text.as_deref(), Some(text.as_str()));
        }
    }
}
