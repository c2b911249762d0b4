//! The servebench load engine: sends a [`Plan`](servebench_core::plan::Plan) to an
//! OpenAI-compatible server with vLLM's semantics and measures every streamed token chunk.
//!
//! - [`run`] executes a plan for a [`RunConfig`](servebench_core::config::RunConfig) and
//!   returns the [`RunResult`](servebench_core::record::RunResult), single requests and
//!   multi-turn conversations alike;
//! - [`history`] builds a conversation's growing `messages` and counts each turn's prompt
//!   tokens and prefix share after the run;
//! - [`fetch_models`], [`fetch_metrics`] and [`raise_nofile_limit`] serve the CLI around a run;
//! - [`progress_bar`] is the live progress display;
//! - [`testserver`] is a scripted in-process server that records the true send times, for
//!   tests of this crate and of others.
//!
//! Modules: `http` (the only network code: pooled HTTP/1.1 connections), `stream` (one request:
//! timestamps, SSE decoding, failures; its sans-IO [`stream::StreamRecorder`] is public for
//! benchmarks), `dispatch` (schedule, concurrency cap, interruption), `conversation` (multi-turn
//! conversations: active-conversation cap, think time, skipped turns), `warmup` (ready check and
//! warm-up), `runner` (the run's sequence and its result), `progress`, `proxy`, `server_info`.

mod conversation;
mod dispatch;
pub mod history;
pub mod http;
mod progress;
mod proxy;
mod runner;
mod server_info;
pub mod stream;
pub mod testserver;
mod warmup;

pub use progress::progress_bar;
pub use runner::{Logger, RunError, RunOptions, run};
pub use server_info::{InfoError, ModelInfo, fetch_metrics, fetch_models, fetch_text, raise_nofile_limit};
