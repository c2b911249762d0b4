//! Anthropic's Messages API (`POST /v1/messages`, served by vLLM, llama.cpp and SGLang beside
//! their OpenAI endpoints; `--backend anthropic-messages`): what one streamed event means, and
//! how servers render the events of one message.
//!
//! The stream is SSE with an `event:` line and a `data:` object whose `type` repeats it, and no
//! `data: [DONE]`:
//! - `content_block_delta` events carry tokens: a `text_delta` (the text), a `thinking_delta`
//!   (reasoning) or an `input_json_delta` (a tool call's arguments, timed but not text);
//! - `message_start` carries the prompt's count (`message.usage.input_tokens` plus the
//!   `cache_read_input_tokens` and `cache_creation_input_tokens` it leaves out), `message_delta`
//!   the `usage.output_tokens` (and the stop reason); `message_stop` ends the message, and a stream
//!   that ends without it failed;
//! - `error` (`{"error": {"type", "message"}}`) is an in-band error;
//! - `ping`, `content_block_start` and `content_block_stop` are bookkeeping.

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};
use serde::Deserialize;

use super::openai::{ClassifyError, LooseText, Payload, StreamChunk, usage};
use super::render::put_json_str;
use crate::record::Usage;

/// Classifies the data of one Messages event.
pub(super) fn classify(data: &[u8]) -> Result<Payload<'_>, ClassifyError> {
    let raw: RawEvent<'_> = serde_json::from_slice(data.trim_ascii()).map_err(|e| ClassifyError::new(e, data))?;
    let mut chunk = StreamChunk::default();
    match raw.kind.as_ref().map(|k| k.0.as_ref()) {
        Some("content_block_delta") => {
            let delta = raw.delta.unwrap_or_default();
            match delta.kind.as_ref().map(|k| k.0.as_ref()) {
                Some("text_delta") => {
                    chunk.token = true;
                    chunk.text = Some(delta.text.map_or(Cow::Borrowed(""), |t| t.0));
                }
                Some("thinking_delta") => {
                    chunk.token = true;
                    chunk.reasoning = Some(delta.thinking.map_or(Cow::Borrowed(""), |t| t.0));
                }
                Some("input_json_delta") => chunk.token = true,
                _ => {}
            }
        }
        Some("message_start") => {
            // The output count here is the count so far (0 or 1); `message_delta` has the total.
            let usage = raw.message.and_then(|m| m.usage).map(MessagesUsage::into_usage);
            chunk.usage = usage.map(|u| Usage { completion_tokens: None, ..u });
        }
        Some("message_delta") => {
            chunk.usage = raw.usage.map(MessagesUsage::into_usage);
            chunk.finish_reason = raw.delta.and_then(|d| d.stop_reason).map(Cow::Owned);
        }
        Some("message_stop") => chunk.end = true,
        Some("error") => {
            let e = raw.error.unwrap_or_default();
            let message = e.message.unwrap_or_else(|| "error event without a message".to_string());
            chunk.error = Some(match e.kind {
                Some(kind) => format!("{message} ({kind})"),
                None => message,
            });
        }
        _ => {}
    }
    Ok(Payload::Chunk(chunk))
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(default, rename = "type", borrow)]
    kind: Option<LooseText<'a>>,
    #[serde(default, borrow)]
    delta: Option<RawDelta<'a>>,
    #[serde(default)]
    message: Option<RawMessage>,
    #[serde(default)]
    usage: Option<MessagesUsage>,
    #[serde(default)]
    error: Option<RawError>,
}

/// A `content_block_delta`'s delta, or a `message_delta`'s.
#[derive(Default, Deserialize)]
struct RawDelta<'a> {
    #[serde(default, rename = "type", borrow)]
    kind: Option<LooseText<'a>>,
    #[serde(default, borrow)]
    text: Option<LooseText<'a>>,
    #[serde(default, borrow)]
    thinking: Option<LooseText<'a>>,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct RawMessage {
    #[serde(default)]
    usage: Option<MessagesUsage>,
}

/// Anthropic's usage: `input_tokens` counts only the prompt tokens read neither from the
/// prompt cache nor into it, so the prompt is their sum with `cache_read_input_tokens` and
/// `cache_creation_input_tokens`.
#[derive(Deserialize)]
struct MessagesUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

impl MessagesUsage {
    fn into_usage(self) -> Usage {
        let cached = self.cache_read_input_tokens.unwrap_or(0) + self.cache_creation_input_tokens.unwrap_or(0);
        let prompt = self.input_tokens.map(|n| n.saturating_add(cached));
        usage(prompt, self.output_tokens)
    }
}

#[derive(Default, Deserialize)]
struct RawError {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// The events of one streamed message, in the shape Anthropic's API sends them: `event: TYPE`
/// and `data: {"type": TYPE, ...}`. Reasoning and text share the one content block.
#[derive(Clone, Debug)]
pub(super) struct MessagesRenderer {
    /// `{"id":…,"type":"message","role":"assistant","content":[],"model":…`
    head: String,
}

impl MessagesRenderer {
    pub(super) fn new(id: &str, model: &str) -> Self {
        let mut head = BytesMut::new();
        head.put_slice(b"{\"id\":");
        put_json_str(&mut head, id);
        head.put_slice(b",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":");
        put_json_str(&mut head, model);
        Self { head: String::from_utf8_lossy(&head).into_owned() }
    }

    /// `message_start`, with the prompt's tokens, and the content block's start.
    pub(super) fn opening(&self, prompt_tokens: u32) -> Bytes {
        let mut b = BytesMut::with_capacity(self.head.len() + 320);
        let message = format!(
            "\"message\":{},\"stop_reason\":null,\"stop_sequence\":null,\
             \"usage\":{{\"input_tokens\":{prompt_tokens},\"cache_read_input_tokens\":0,\"output_tokens\":0}}}}",
            self.head
        );
        event(&mut b, "message_start", &message);
        event(&mut b, "content_block_start", "\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}");
        b.freeze()
    }

    /// A `content_block_delta`: a `text_delta`, or (`reasoning`) a `thinking_delta`.
    pub(super) fn delta(&self, text: &str, reasoning: bool) -> BytesMut {
        let (kind, key) = if reasoning { ("thinking_delta", "thinking") } else { ("text_delta", "text") };
        let mut b = BytesMut::with_capacity(text.len() + 128);
        b.put_slice(
            format!(
                "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\
                 \"delta\":{{\"type\":\"{kind}\",\"{key}\":"
            )
            .as_bytes(),
        );
        put_json_str(&mut b, text);
        b.put_slice(b"}}\n\n");
        b
    }

    /// `content_block_stop`, `message_delta` with the stop reason (`max_tokens` for
    /// `finish_reason` "length") and the output tokens, and `message_stop`.
    pub(super) fn end(&self, b: &mut BytesMut, completion: u32, finish_reason: Option<&str>) {
        let stop = stop_reason(finish_reason);
        event(b, "content_block_stop", "\"index\":0");
        let delta = format!(
            "\"delta\":{{\"stop_reason\":\"{stop}\",\"stop_sequence\":null}},\"usage\":{{\"output_tokens\":{completion}}}"
        );
        event(b, "message_delta", &delta);
        b.put_slice(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    }

    /// An `error` event (`api_error` unless the server's error type names another).
    pub(super) fn error(&self, message: &str, error_type: &str) -> Bytes {
        let kind = match error_type {
            "BadRequestError" => "invalid_request_error",
            "ServiceUnavailableError" => "overloaded_error",
            _ => "api_error",
        };
        let mut b = BytesMut::with_capacity(message.len() + 96);
        b.put_slice(
            format!("event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"{kind}\",\"message\":").as_bytes(),
        );
        put_json_str(&mut b, message);
        b.put_slice(b"}}\n\n");
        b.freeze()
    }
}

/// Anthropic's stop reason for how a response ended: `max_tokens` for `finish_reason`
/// "length", else `end_turn`.
pub fn stop_reason(finish_reason: Option<&str>) -> &'static str {
    match finish_reason {
        Some("length") => "max_tokens",
        _ => "end_turn",
    }
}

/// One frame whose data is `{"type": KIND, FIELDS}`.
fn event(b: &mut BytesMut, kind: &str, fields: &str) {
    b.put_slice(format!("event: {kind}\ndata: {{\"type\":\"{kind}\",{fields}}}\n\n").as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Api;
    use crate::protocol::ChunkRenderer;
    use crate::protocol::conformance_tests::{named_frames, summarize};

    fn chunk(json: &str) -> StreamChunk<'_> {
        match classify(json.as_bytes()).unwrap() {
            Payload::Chunk(c) => c,
            Payload::Done => panic!("not a chunk: {json}"),
        }
    }

    #[test]
    fn text_thinking_and_tool_deltas_are_tokens() {
        let c = chunk(r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}"#);
        assert!(c.token);
        assert!(matches!(c.text, Some(Cow::Borrowed("Hi"))));
        let c = chunk(r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#);
        assert!(c.token);
        assert_eq!((c.text, c.reasoning.as_deref()), (None, Some("hm")));
        let c = chunk(
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
        );
        assert!(c.token && c.text.is_none());
        let c = chunk(r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"x"}}"#);
        assert!(!c.token);
    }

    #[test]
    fn the_usage_comes_in_two_parts_and_message_stop_ends_the_stream() {
        let c = chunk(
            r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#,
        );
        assert_eq!(
            c.usage,
            Some(Usage { prompt_tokens: Some(25), completion_tokens: None }),
            "the output so far is not the count"
        );
        let c = chunk(
            r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":15}}"#,
        );
        assert_eq!(c.usage, Some(Usage { prompt_tokens: None, completion_tokens: Some(15) }));
        assert_eq!(c.finish_reason.as_deref(), Some("max_tokens"));
        assert!(!c.end);
        assert!(chunk(r#"{"type":"message_stop"}"#).end);
        for quiet in [
            r#"{"type": "ping"}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            "{}",
        ] {
            let c = chunk(quiet);
            assert!(!c.token && !c.end && c.usage.is_none() && c.error.is_none(), "{quiet}");
        }
    }

    #[test]
    fn error_events_are_in_band_errors() {
        let c = chunk(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#);
        assert_eq!(c.error.as_deref(), Some("Overloaded (overloaded_error)"));
        assert_eq!(chunk(r#"{"type":"error"}"#).error.as_deref(), Some("error event without a message"));
    }

    #[test]
    fn a_rendered_stream_decodes_back_to_what_was_rendered() {
        let r = ChunkRenderer::new(Api::Messages, "msg_7", 3, "m\"x");
        let mut wire = Vec::new();
        wire.extend_from_slice(&r.opening(11).unwrap());
        wire.extend_from_slice(&r.reasoning_chunk("think"));
        for t in ["He", "llo\n"] {
            wire.extend_from_slice(&r.token_chunk(t, None));
        }
        wire.extend_from_slice(&r.token_chunk_with_usage("", Some("length"), 11, 4));
        assert!(r.done().is_none() && r.usage_always());
        let s = summarize(Api::Messages, &[&wire]);
        assert_eq!((s.tokens, s.text.as_str(), s.reasoning.as_str(), s.ends), (4, "Hello\n", "think", 1));
        assert_eq!(s.usage, Some(Usage { prompt_tokens: Some(11), completion_tokens: Some(4) }));
        assert_eq!(s.finish_reason.as_deref(), Some("max_tokens"));
        let frames = named_frames(&wire);
        for (name, v) in &frames {
            assert_eq!(name.as_deref(), v["type"].as_str());
        }
        assert_eq!(frames[0].1["message"]["model"], "m\"x");
        let error = r.error("boom", "InternalServerError", 500);
        assert_eq!(summarize(Api::Messages, &[&error]).error.as_deref(), Some("boom (api_error)"));
        assert_eq!(named_frames(&error)[0].0.as_deref(), Some("error"));
    }
}
