//! Shared types of servebench: the resolved run config, the request plan, request records,
//! the OpenAI wire protocol with its SSE codec, the metric maths and vLLM's report formats.
//!
//! This crate does no I/O and has no async runtime, so every other crate can depend on it.

pub mod config;
pub mod metrics;
pub mod plan;
pub mod protocol;
pub mod record;
pub mod rng;
pub mod vllm;
