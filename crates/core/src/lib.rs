//! Shared types of servebench: the resolved run config, the request plan, request records,
//! the OpenAI wire protocol with its SSE codec, the metric maths, server telemetry and vLLM's report formats.
//!
//! This crate has no network code and no async runtime, so every other crate can depend on it;
//! its only I/O is writing result files ([`vllm::json::write_result`]).

pub mod config;
pub mod hash;
pub mod load;
pub mod metrics;
pub mod plan;
pub mod protocol;
pub mod pyjson;
pub mod record;
pub mod rng;
pub mod search;
pub mod shard;
pub mod telemetry;
pub mod threshold;
pub mod vllm;
