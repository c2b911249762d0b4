//! The wire protocol shared by the load engine and the servers it talks to: the SSE framing
//! ([`sse`]), what one OpenAI streaming payload means ([`openai`]; the Responses API's events
//! in [`responses`], Anthropic's Messages API's in [`messages`]), how servers render those
//! payloads ([`render`]), and a pooling API's whole answer ([`pooling`]).
//!
//! Everything here is sans-IO: bytes in, meaning out (or meaning in, bytes out).

pub mod messages;
pub mod openai;
pub mod pooling;
pub mod render;
pub mod responses;
pub mod sse;

#[cfg(test)]
mod conformance_tests;

pub use openai::{ClassifyError, Payload, ServerTimings, StreamChunk, classify};
pub use pooling::{PoolingAnswer, PoolingError, read_answer};
pub use render::{ChunkRenderer, done_frame, error_frame};
pub use sse::{SseDecoder, SseError, SseEvent};
