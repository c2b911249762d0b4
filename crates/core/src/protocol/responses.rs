//! OpenAI's Responses API (`POST /v1/responses`, vLLM's `--backend openai-responses`): what
//! one streamed event means, and how servers render the events of one response.
//!
//! The stream is SSE with an `event:` line and a `data:` object whose `type` repeats it; there
//! is no `data: [DONE]`. With vLLM's rules (0.31+):
//! - `response.output_text.delta` and `response.reasoning_text.delta` carry tokens (their
//!   arrival is a TTFT/ITL timestamp); the text is `delta`;
//! - `response.completed` and `response.incomplete` end the response and carry
//!   `response.usage.{input_tokens, output_tokens}`; a stream that ends without either failed;
//! - `error` (top-level `message` and `code`) and `response.failed` (`response.error`) are
//!   in-band errors;
//! - every other event (`response.created`, `response.output_item.added`, `.done` events, ...)
//!   is bookkeeping: read, not timed.
//!
//! A delta is borrowed from the payload when it has no escapes, so a token costs no allocation.

use std::borrow::Cow;
use std::cell::Cell;

use bytes::{BufMut, Bytes, BytesMut};
use serde::Deserialize;

use super::openai::{ClassifyError, ErrorMessage, LooseText, Payload, RawUsage, StreamChunk};
use super::render::put_json_str;

/// Classifies the data of one Responses event.
pub(super) fn classify(data: &[u8]) -> Result<Payload<'_>, ClassifyError> {
    let raw: RawEvent<'_> = serde_json::from_slice(data.trim_ascii()).map_err(|e| ClassifyError::new(e, data))?;
    let mut chunk = StreamChunk::default();
    let kind = raw.kind.as_ref().map(|k| k.0.as_ref());
    match kind {
        Some("response.output_text.delta") => {
            chunk.token = true;
            chunk.text = Some(raw.delta.map_or(Cow::Borrowed(""), |d| d.0));
        }
        Some("response.reasoning_text.delta") => {
            chunk.token = true;
            chunk.reasoning = Some(raw.delta.map_or(Cow::Borrowed(""), |d| d.0));
        }
        Some("response.completed" | "response.incomplete") => {
            chunk.end = true;
            if let Some(r) = raw.response {
                chunk.usage = r.usage.map(RawUsage::into_usage);
                chunk.finish_reason = r.incomplete_details.and_then(|d| d.reason).map(Cow::Owned);
            }
        }
        Some("response.failed") => {
            let error = raw.response.and_then(|r| r.error).map(|e| e.0);
            chunk.error = Some(error.unwrap_or_else(|| "the server reported response.failed".to_string()));
        }
        // The event itself is an error object (`message`, `code`): read as chat's errors are.
        Some("error") => {
            let error =
                serde_json::from_slice::<ErrorMessage>(data.trim_ascii()).map_err(|e| ClassifyError::new(e, data))?;
            chunk.error = Some(error.0);
        }
        _ => {}
    }
    // A payload in the chat shape's `{"error": ...}` is an error here too.
    if let Some(e) = raw.error {
        chunk.error.get_or_insert(e.0);
    }
    Ok(Payload::Chunk(chunk))
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(default, rename = "type", borrow)]
    kind: Option<LooseText<'a>>,
    #[serde(default, borrow)]
    delta: Option<LooseText<'a>>,
    #[serde(default)]
    response: Option<RawResponse>,
    #[serde(default)]
    error: Option<ErrorMessage>,
}

#[derive(Deserialize)]
struct RawResponse {
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: Option<ErrorMessage>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    #[serde(default)]
    reason: Option<String>,
}

/// A response's status for how it ended, and why it is incomplete: `max_output_tokens` cut
/// it (`finish_reason` "length"), or it completed.
pub fn status(finish_reason: Option<&str>) -> (&'static str, Option<&'static str>) {
    match finish_reason {
        Some("length") => ("incomplete", Some("max_output_tokens")),
        _ => ("completed", None),
    }
}

/// The message item's id of response `id` (`resp_X` → `msg_X`).
pub fn message_id(id: &str) -> String {
    format!("msg_{}", id.strip_prefix("resp_").unwrap_or(id))
}

/// The events of one streamed response, in the shape OpenAI and vLLM send them: each frame is
/// `event: TYPE` and `data: {"type": TYPE, "sequence_number": N, ...}`, numbered in order.
#[derive(Clone, Debug)]
pub(super) struct ResponsesRenderer {
    /// `{"id":…,"object":"response","created_at":…,"model":…`
    head: String,
    /// The message item's id, `msg_…`, and the reasoning item's, `rs_…`.
    message_id: String,
    reasoning_id: String,
    next: Cell<u64>,
}

impl ResponsesRenderer {
    pub(super) fn new(id: &str, created: u64, model: &str) -> Self {
        let mut head = BytesMut::new();
        head.put_slice(b"{\"id\":");
        put_json_str(&mut head, id);
        head.put_slice(format!(",\"object\":\"response\",\"created_at\":{created},\"model\":").as_bytes());
        put_json_str(&mut head, model);
        Self {
            head: String::from_utf8_lossy(&head).into_owned(),
            message_id: message_id(id),
            reasoning_id: format!("rs_{}", id.strip_prefix("resp_").unwrap_or(id)),
            next: Cell::new(0),
        }
    }

    /// `response.created`, `response.in_progress` and the message item's opening events.
    pub(super) fn opening(&self) -> Bytes {
        let response = format!("{},\"status\":\"in_progress\",\"output\":[],\"usage\":null}}", self.head);
        let item = format!(
            "\"output_index\":0,\"item\":{{\"id\":\"{}\",\"type\":\"message\",\"role\":\"assistant\",\
             \"status\":\"in_progress\",\"content\":[]}}",
            self.message_id
        );
        let part = format!(
            "\"item_id\":\"{}\",\"output_index\":0,\"content_index\":0,\
             \"part\":{{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[]}}",
            self.message_id
        );
        let mut b = BytesMut::with_capacity(4 * response.len());
        self.event(&mut b, "response.created", |b| b.put_slice(format!("\"response\":{response}").as_bytes()));
        self.event(&mut b, "response.in_progress", |b| b.put_slice(format!("\"response\":{response}").as_bytes()));
        self.event(&mut b, "response.output_item.added", |b| b.put_slice(item.as_bytes()));
        self.event(&mut b, "response.content_part.added", |b| b.put_slice(part.as_bytes()));
        b.freeze()
    }

    /// A `response.output_text.delta` (or, `reasoning`, a `response.reasoning_text.delta`).
    pub(super) fn delta(&self, text: &str, reasoning: bool) -> BytesMut {
        let (kind, item) = if reasoning {
            ("response.reasoning_text.delta", &self.reasoning_id)
        } else {
            ("response.output_text.delta", &self.message_id)
        };
        let mut b = BytesMut::with_capacity(text.len() + 160);
        self.event(&mut b, kind, |b| {
            b.put_slice(format!("\"item_id\":\"{item}\",\"output_index\":0,\"content_index\":0,\"delta\":").as_bytes());
            put_json_str(b, text);
            b.put_slice(b",\"logprobs\":[]");
        });
        b
    }

    /// The terminal `response.completed`, with the usage; a response cut by its
    /// `max_output_tokens` (`finish_reason` "length") says so with status `incomplete`.
    pub(super) fn completed(&self, b: &mut BytesMut, prompt: u32, completion: u32, finish_reason: Option<&str>) {
        let status = match status(finish_reason) {
            (status, Some(reason)) => {
                format!("\"status\":\"{status}\",\"incomplete_details\":{{\"reason\":\"{reason}\"}}")
            }
            (status, None) => format!("\"status\":\"{status}\",\"incomplete_details\":null"),
        };
        let total = u64::from(prompt) + u64::from(completion);
        let response = format!(
            "{},{status},\"usage\":{{\"input_tokens\":{prompt},\"input_tokens_details\":{{\"cached_tokens\":0}},\
             \"output_tokens\":{completion},\"output_tokens_details\":{{\"reasoning_tokens\":0}},\"total_tokens\":{total}}}}}",
            self.head
        );
        self.event(b, "response.completed", |b| b.put_slice(format!("\"response\":{response}").as_bytes()));
    }

    /// An `error` event.
    pub(super) fn error(&self, message: &str, code: u16) -> Bytes {
        let mut b = BytesMut::with_capacity(message.len() + 96);
        self.event(&mut b, "error", |b| {
            b.put_slice(format!("\"code\":\"{code}\",\"message\":").as_bytes());
            put_json_str(b, message);
            b.put_slice(b",\"param\":null");
        });
        b.freeze()
    }

    /// One frame: `event: KIND`, then the data object with its type, its sequence number and
    /// the fields `body` writes.
    fn event(&self, b: &mut BytesMut, kind: &str, body: impl FnOnce(&mut BytesMut)) {
        let n = self.next.get();
        self.next.set(n + 1);
        b.put_slice(format!("event: {kind}\ndata: {{\"type\":\"{kind}\",\"sequence_number\":{n},").as_bytes());
        body(b);
        b.put_slice(b"}\n\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Api;
    use crate::protocol::ChunkRenderer;
    use crate::protocol::conformance_tests::{named_frames, summarize};
    use crate::record::Usage;

    fn chunk(json: &str) -> StreamChunk<'_> {
        match classify(json.as_bytes()).unwrap() {
            Payload::Chunk(c) => c,
            Payload::Done => panic!("not a chunk: {json}"),
        }
    }

    #[test]
    fn text_and_reasoning_deltas_are_tokens_and_text_is_borrowed() {
        let c = chunk(
            r#"{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","logprobs":[]}"#,
        );
        assert!(c.token && !c.end);
        assert!(matches!(c.text, Some(Cow::Borrowed("Hi"))));
        let c = chunk(r#"{"type":"response.reasoning_text.delta","delta":"hm\n"}"#);
        assert!(c.token);
        assert_eq!((c.text, c.reasoning.as_deref()), (None, Some("hm\n")));
        // vLLM's rule: the event type makes the token, as a completions chunk's `choices` does.
        assert!(chunk(r#"{"type":"response.output_text.delta","delta":""}"#).token);
    }

    #[test]
    fn bookkeeping_events_are_read_and_not_timed() {
        for kind in [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.done",
            "response.function_call_arguments.delta",
            "something.new",
        ] {
            let json = format!(
                r#"{{"type":"{kind}","sequence_number":1,"delta":{{"x":[1,2]}},"response":{{"status":"in_progress","usage":null}}}}"#
            );
            let c = chunk(&json);
            assert!(!c.token && !c.end && c.error.is_none() && c.usage.is_none(), "{kind}");
        }
        assert!(!chunk("{}").token);
    }

    #[test]
    fn the_terminal_events_end_the_stream_with_the_usage() {
        let c = chunk(
            r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"long"}]}],"usage":{"input_tokens":12,"output_tokens":5,"total_tokens":17}}}"#,
        );
        assert!(c.end && !c.token);
        assert_eq!(c.usage, Some(Usage { prompt_tokens: Some(12), completion_tokens: Some(5) }));
        let c = chunk(
            r#"{"type":"response.incomplete","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":1,"output_tokens":2}}}"#,
        );
        assert!(c.end);
        assert_eq!(c.finish_reason.as_deref(), Some("max_output_tokens"));
        assert_eq!(c.usage.and_then(|u| u.completion_tokens), Some(2));
    }

    #[test]
    fn error_events_and_failed_responses_are_in_band_errors() {
        let c =
            chunk(r#"{"type":"error","code":"server_error","message":"engine died","param":null,"sequence_number":9}"#);
        assert_eq!(c.error.as_deref(), Some(r#"engine died (code "server_error")"#));
        let c = chunk(
            r#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"out of memory"}}}"#,
        );
        assert_eq!(c.error.as_deref(), Some(r#"out of memory (code "server_error")"#));
        let c = chunk(r#"{"type":"response.failed","response":{"status":"failed"}}"#);
        assert_eq!(c.error.as_deref(), Some("the server reported response.failed"));
        assert_eq!(chunk(r#"{"error":{"message":"bad","code":400}}"#).error.as_deref(), Some("bad (code 400)"));
    }

    #[test]
    fn a_rendered_stream_decodes_back_to_what_was_rendered() {
        let r = ChunkRenderer::new(Api::Responses, "resp_7", 3, "m\"x");
        let mut wire = Vec::new();
        wire.extend_from_slice(&r.opening(0).unwrap());
        wire.extend_from_slice(&r.reasoning_chunk("think"));
        for t in ["He", "llo\n", ""] {
            wire.extend_from_slice(&r.token_chunk(t, None));
        }
        wire.extend_from_slice(&r.usage_chunk(4, 4, Some("length")));
        assert!(r.done().is_none() && r.usage_always());
        let s = summarize(Api::Responses, &[&wire]);
        assert_eq!((s.tokens, s.text.as_str(), s.reasoning.as_str(), s.ends), (4, "Hello\n", "think", 1));
        assert_eq!(s.usage, Some(Usage { prompt_tokens: Some(4), completion_tokens: Some(4) }));
        let frames = named_frames(&wire);
        for (name, v) in &frames {
            assert_eq!(name.as_deref(), v["type"].as_str());
        }
        let seq: Vec<u64> = frames.iter().map(|(_, v)| v["sequence_number"].as_u64().unwrap()).collect();
        assert_eq!(seq, (0..seq.len() as u64).collect::<Vec<_>>(), "numbered in order from 0");
        let end = &frames.last().unwrap().1["response"];
        assert_eq!(
            (&end["status"], &end["model"], &end["usage"]["total_tokens"]),
            (&"incomplete".into(), &"m\"x".into(), &8.into())
        );
        let error = r.error("boom", "InternalServerError", 500);
        assert_eq!(summarize(Api::Responses, &[&error]).error.as_deref(), Some(r#"boom (code "500")"#));
        assert_eq!(named_frames(&error)[0].0.as_deref(), Some("error"));
    }
}
