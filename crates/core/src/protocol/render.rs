//! Rendering of OpenAI streaming chunks as SSE frames, in the JSON shape vLLM's server emits.
//!
//! Used by every server servebench runs (the simulator and the test server), so what they send
//! is byte-for-byte what the client is tested against. A [`ChunkRenderer`] pre-renders the
//! parts shared by every chunk of one response (id, object, created, model), so a token frame
//! costs one buffer and one JSON-escape of the token text.
//!
//! Shapes (compact JSON, as pydantic writes it):
//! - completions: `{"id","object":"text_completion","created","model","choices":[{"index":0,
//!   "text","logprobs":null,"finish_reason":null,"stop_reason":null}]}`
//! - chat: `{"id","object":"chat.completion.chunk","created","model","choices":[{"index":0,
//!   "delta":{"content"},"logprobs":null,"finish_reason":null}]}`, opened by a role chunk
//!   `"delta":{"role":"assistant","content":""}`; the chunk with a finish reason also has
//!   `"stop_reason":null`.
//! - usage: the same head with `"choices":[]` and
//!   `"usage":{"prompt_tokens","total_tokens","completion_tokens"}`.
//! - Responses: `event:`/`data:` frames numbered by `sequence_number`, opened by
//!   `response.created`, `response.in_progress` and the message item's `.added` events, closed by
//!   `response.completed` with the usage; no `[DONE]` (the `.done` events, which repeat the
//!   whole text, are left out).
//! - Messages (Anthropic's): `event:`/`data:` frames, `message_start` (with the prompt's token
//!   count) and `content_block_start`, a `content_block_delta` per chunk, then
//!   `content_block_stop`, `message_delta` (stop reason, output tokens) and `message_stop`.

use bytes::{BufMut, Bytes, BytesMut};

use super::messages::MessagesRenderer;
use super::responses::ResponsesRenderer;
use crate::config::Api;

/// `data: [DONE]` and its blank line.
pub fn done_frame() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// vLLM's in-band error event: `{"error":{"message","type","param":null,"code"}}`.
pub fn error_frame(message: &str, error_type: &str, code: u16) -> Bytes {
    let mut b = BytesMut::with_capacity(message.len() + error_type.len() + 80);
    b.put_slice(b"data: {\"error\":{\"message\":");
    put_json_str(&mut b, message);
    b.put_slice(b",\"type\":");
    put_json_str(&mut b, error_type);
    b.put_slice(format!(",\"param\":null,\"code\":{code}}}}}\n\n").as_bytes());
    b.freeze()
}

/// The streams made of typed events (`event:` lines) rather than `choices` chunks: each
/// renders an opening, a delta, its terminal events and an error.
#[derive(Clone, Debug)]
enum Events {
    Responses(ResponsesRenderer),
    Messages(MessagesRenderer),
}

impl Events {
    fn opening(&self, prompt_tokens: u32) -> Bytes {
        match self {
            Events::Responses(r) => r.opening(),
            Events::Messages(m) => m.opening(prompt_tokens),
        }
    }

    fn delta(&self, text: &str, reasoning: bool) -> BytesMut {
        match self {
            Events::Responses(r) => r.delta(text, reasoning),
            Events::Messages(m) => m.delta(text, reasoning),
        }
    }

    fn end(&self, b: &mut BytesMut, prompt: u32, completion: u32, finish_reason: Option<&str>) {
        match self {
            Events::Responses(r) => r.completed(b, prompt, completion, finish_reason),
            Events::Messages(m) => m.end(b, completion, finish_reason),
        }
    }

    fn error(&self, message: &str, error_type: &str, code: u16) -> Bytes {
        match self {
            Events::Responses(r) => r.error(message, code),
            Events::Messages(m) => m.error(message, error_type),
        }
    }
}

/// Renders the chunks of one streamed response.
#[derive(Clone, Debug)]
pub struct ChunkRenderer {
    api: Api,
    /// `data: {"id":…,"object":…,"created":…,"model":…,"choices":[`
    head: Vec<u8>,
    /// The Responses or Messages API's events (their frames have no common head).
    events: Option<Events>,
}

impl ChunkRenderer {
    /// `id` is the response id (`cmpl-…`, `chatcmpl-…`, `resp_…` or `msg_…`), `created` Unix
    /// seconds.
    pub fn new(api: Api, id: &str, created: u64, model: &str) -> Self {
        let object = match api {
            // Pooling answers are not streamed (`pooling::render_answer`).
            Api::Completions | Api::Pooling(_) => "text_completion",
            Api::Chat => "chat.completion.chunk",
            Api::Responses => {
                let events = Some(Events::Responses(ResponsesRenderer::new(id, created, model)));
                return Self { api, head: Vec::new(), events };
            }
            Api::Messages => {
                let events = Some(Events::Messages(MessagesRenderer::new(id, model)));
                return Self { api, head: Vec::new(), events };
            }
        };
        let mut head = BytesMut::with_capacity(id.len() + model.len() + 96);
        head.put_slice(b"data: {\"id\":");
        put_json_str(&mut head, id);
        head.put_slice(format!(",\"object\":\"{object}\",\"created\":{created},\"model\":").as_bytes());
        put_json_str(&mut head, model);
        head.put_slice(b",\"choices\":[");
        Self { api, head: head.to_vec(), events: None }
    }

    pub fn api(&self) -> Api {
        self.api
    }

    /// What a stream sends before its first token: the chat role chunk,
    /// `{"role":"assistant","content":""}`, the Responses API's opening events, or the Messages
    /// API's `message_start` (which carries `prompt_tokens`) and `content_block_start`; `None`
    /// for completions, which open with their first token.
    pub fn opening(&self, prompt_tokens: u32) -> Option<Bytes> {
        if let Some(e) = &self.events {
            return Some(e.opening(prompt_tokens));
        }
        (self.api == Api::Chat).then(|| {
            let mut b = self.start(64);
            b.put_slice(
                b"{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
            );
            b.freeze()
        })
    }

    /// A chunk carrying reasoning `text`: in chat, `delta.reasoning_content` (reasoning models
    /// behind a reasoning parser); in Responses, a `response.reasoning_text.delta`; in
    /// Messages, a `thinking_delta`; for completions, which have no reasoning field, a token
    /// chunk of `text`.
    pub fn reasoning_chunk(&self, text: &str) -> Bytes {
        if let Some(e) = &self.events {
            return e.delta(text, true).freeze();
        }
        if self.api != Api::Chat {
            return self.token_chunk(text, None);
        }
        let mut b = self.start(text.len() + 96);
        b.put_slice(b"{\"index\":0,\"delta\":{\"reasoning_content\":");
        put_json_str(&mut b, text);
        b.put_slice(b"},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
        b.freeze()
    }

    /// A chunk carrying `text` (one or more tokens); `finish_reason` is set on the last one
    /// (a Responses or Messages delta has no such field: its terminal events say how it ended).
    pub fn token_chunk(&self, text: &str, finish_reason: Option<&str>) -> Bytes {
        if let Some(e) = &self.events {
            return e.delta(text, false).freeze();
        }
        let mut b = self.token_body(text, finish_reason);
        b.put_slice(b"]}\n\n");
        b.freeze()
    }

    /// A token chunk that also carries `usage`, the way llama.cpp ends its streams (in
    /// Responses and Messages, the last delta and the terminal events in one write).
    pub fn token_chunk_with_usage(
        &self,
        text: &str,
        finish_reason: Option<&str>,
        prompt_tokens: u32,
        completion_tokens: u32,
    ) -> Bytes {
        if let Some(e) = &self.events {
            let mut b = e.delta(text, false);
            e.end(&mut b, prompt_tokens, completion_tokens, finish_reason);
            return b.freeze();
        }
        let mut b = self.token_body(text, finish_reason);
        b.put_slice(b"],");
        put_usage(&mut b, prompt_tokens, completion_tokens);
        b.put_slice(b"}\n\n");
        b.freeze()
    }

    /// The token counts after the last token: the final `choices: []` chunk of completions and
    /// chat (`stream_options.include_usage`), the Responses API's terminal `response.completed`
    /// or the Messages API's `message_delta` and `message_stop`, which also say how the
    /// response ended (`finish_reason` "length": status `incomplete`, stop reason `max_tokens`).
    pub fn usage_chunk(&self, prompt_tokens: u32, completion_tokens: u32, finish_reason: Option<&str>) -> Bytes {
        if let Some(e) = &self.events {
            let mut b = BytesMut::with_capacity(512);
            e.end(&mut b, prompt_tokens, completion_tokens, finish_reason);
            return b.freeze();
        }
        let mut b = self.start(96);
        b.put_slice(b"],");
        put_usage(&mut b, prompt_tokens, completion_tokens);
        b.put_slice(b"}\n\n");
        b.freeze()
    }

    /// Whether the token counts end every stream (Responses, Messages), not only those that
    /// ask for them.
    pub fn usage_always(&self) -> bool {
        self.events.is_some()
    }

    /// The end-of-stream marker, `data: [DONE]`; `None` for Responses and Messages, which
    /// have none.
    pub fn done(&self) -> Option<Bytes> {
        self.events.is_none().then(done_frame)
    }

    /// An in-band error: vLLM's `{"error": ...}` chunk, or the Responses or Messages API's
    /// `error` event.
    pub fn error(&self, message: &str, error_type: &str, code: u16) -> Bytes {
        match &self.events {
            Some(e) => e.error(message, error_type, code),
            None => error_frame(message, error_type, code),
        }
    }

    fn start(&self, extra: usize) -> BytesMut {
        let mut b = BytesMut::with_capacity(self.head.len() + extra);
        b.put_slice(&self.head);
        b
    }

    fn token_body(&self, text: &str, finish_reason: Option<&str>) -> BytesMut {
        let mut b = self.start(text.len() + 112);
        match self.api {
            Api::Completions | Api::Pooling(_) => {
                b.put_slice(b"{\"index\":0,\"text\":");
                put_json_str(&mut b, text);
                b.put_slice(b",\"logprobs\":null,\"finish_reason\":");
                put_opt_json_str(&mut b, finish_reason);
                b.put_slice(b",\"stop_reason\":null}");
            }
            // Responses and Messages render their own events (`Events`).
            Api::Chat | Api::Responses | Api::Messages => {
                b.put_slice(b"{\"index\":0,\"delta\":{\"content\":");
                put_json_str(&mut b, text);
                b.put_slice(b"},\"logprobs\":null,\"finish_reason\":");
                put_opt_json_str(&mut b, finish_reason);
                if finish_reason.is_some() {
                    b.put_slice(b",\"stop_reason\":null");
                }
                b.put_u8(b'}');
            }
        }
        b
    }
}

fn put_usage(b: &mut BytesMut, prompt: u32, completion: u32) {
    let total = u64::from(prompt) + u64::from(completion);
    b.put_slice(
        format!("\"usage\":{{\"prompt_tokens\":{prompt},\"total_tokens\":{total},\"completion_tokens\":{completion}}}")
            .as_bytes(),
    );
}

fn put_opt_json_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_json_str(b, s),
        None => b.put_slice(b"null"),
    }
}

/// Writes `s` as a JSON string literal (quoted and escaped).
pub(super) fn put_json_str(b: &mut BytesMut, s: &str) {
    // Writing a &str into an in-memory buffer cannot fail.
    let _ = serde_json::to_writer(BufMut::writer(&mut *b), s);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::openai::{Payload, classify};
    use crate::protocol::sse::SseDecoder;
    use serde_json::{Value, json};

    fn json_of(frame: &Bytes) -> Value {
        let s = std::str::from_utf8(frame).unwrap();
        let body = s.strip_prefix("data: ").unwrap().strip_suffix("\n\n").unwrap();
        serde_json::from_str(body).unwrap()
    }

    #[test]
    fn completion_chunks_have_vllms_shape() {
        let r = ChunkRenderer::new(Api::Completions, "cmpl-1", 7, "m\"x");
        assert_eq!(
            json_of(&r.token_chunk("a\"b\n", None)),
            json!({"id":"cmpl-1","object":"text_completion","created":7,"model":"m\"x",
                   "choices":[{"index":0,"text":"a\"b\n","logprobs":null,"finish_reason":null,"stop_reason":null}]})
        );
        assert_eq!(
            json_of(&r.usage_chunk(3, 4, None)),
            json!({"id":"cmpl-1","object":"text_completion","created":7,"model":"m\"x","choices":[],
                   "usage":{"prompt_tokens":3,"total_tokens":7,"completion_tokens":4}})
        );
        assert!(r.opening(0).is_none());
    }

    #[test]
    fn chat_chunks_have_vllms_shape() {
        let r = ChunkRenderer::new(Api::Chat, "chatcmpl-9", 1, "m");
        assert_eq!(
            json_of(&r.opening(0).unwrap())["choices"],
            json!([{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}])
        );
        assert_eq!(
            json_of(&r.token_chunk("hi", Some("length")))["choices"],
            json!([{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":"length","stop_reason":null}])
        );
        let last = json_of(&r.token_chunk_with_usage("!", None, 5, 6));
        assert_eq!(last["usage"], json!({"prompt_tokens":5,"total_tokens":11,"completion_tokens":6}));
        assert_eq!(last["object"], "chat.completion.chunk");
    }

    #[test]
    fn error_and_done_frames() {
        let e = json_of(&error_frame("bad \"thing\"", "BadRequestError", 400));
        assert_eq!(e, json!({"error":{"message":"bad \"thing\"","type":"BadRequestError","param":null,"code":400}}));
        assert_eq!(&done_frame()[..], b"data: [DONE]\n\n");
    }

    #[test]
    fn a_rendered_stream_classifies_back_to_what_was_rendered() {
        let r = ChunkRenderer::new(Api::Chat, "c", 0, "m");
        let mut wire = Vec::new();
        wire.extend_from_slice(&r.opening(0).unwrap());
        for (i, t) in ["He", "llo", ""].iter().enumerate() {
            wire.extend_from_slice(&r.token_chunk(t, (i == 2).then_some("length")));
        }
        wire.extend_from_slice(&r.usage_chunk(2, 3, Some("length")));
        wire.extend_from_slice(&done_frame());
        let mut d = SseDecoder::new();
        let (mut tokens, mut text, mut usage, mut done) = (0, String::new(), None, false);
        d.feed(&wire, |e| match classify(Api::Chat, e.data).unwrap() {
            Payload::Done => done = true,
            Payload::Chunk(c) => {
                tokens += usize::from(c.token);
                text.push_str(c.text.as_deref().unwrap_or(""));
                usage = c.usage.or(usage);
            }
        })
        .unwrap();
        // The last chunk has content "" and no role: a token by vLLM's rules.
        assert_eq!((tokens, text.as_str(), done), (3, "Hello", true));
        assert_eq!(usage.and_then(|u| u.completion_tokens), Some(3));
    }
}
