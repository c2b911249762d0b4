//! The servebench load engine: sends a [`Plan`](servebench_core::plan::Plan) to an
//! OpenAI-compatible server with vLLM's semantics and measures every streamed token chunk.
//!
//! - [`run`] executes a plan for a [`RunConfig`](servebench_core::config::RunConfig) and
//!   returns the [`RunResult`](servebench_core::record::RunResult), single requests and
//!   multi-turn conversations alike;
//! - [`fetch_models`], [`fetch_metrics`], [`post_empty`] and [`raise_nofile_limit`] serve the CLI
//!   around a run;
//! - [`align_prompts`] aligns a freshly built plan's prompts to the server's tokenizer
//!   (`/tokenize`, `/detokenize`) before the run, as vLLM does;
//! - [`progress_bar`] is the live progress display;
//! - [`rendezvous`] gives the workers of a sharded run a common start and their clock offsets
//!   to rank 0;
//! - `testserver` (with the `testserver` feature) is a scripted in-process server that records
//!   the true send times, for tests of this crate and of others, which enable the feature on
//!   their dev-dependency; `selftest` (same feature) runs the client against it at rising
//!   concurrency and compares what it measured with the server's send times.
//!
//! Modules: `http` (the only network code: pooled HTTP/1.1 connections, over TLS for https), `stream` (one request:
//! timestamps, SSE decoding, failures; its sans-IO [`stream::StreamRecorder`] is public for
//! benchmarks), `dispatch` (the load policy of `servebench_core::load` driven in real time: schedule,
//! concurrency and conversation caps, think time, skipped turns, interruption), `conversation`
//! (multi-turn conversations' bodies, request ids and records), `warmup` (ready check and
//! warm-up), `monitor` (the client's own lateness, CPU and open files during the run), `scrape` (the
//! server's Prometheus telemetry during the run), `runner` (the run's sequence and its result), `progress`, `proxy`, `server_info`.

pub mod align;
mod conversation;
mod dispatch;
pub mod http;
mod monitor;
mod probe;
mod progress;
mod proxy;
pub mod rendezvous;
mod runner;
mod scrape;
#[cfg(any(test, feature = "testserver"))]
pub mod selftest;
mod server_info;
mod stop;
pub mod stream;
#[cfg(any(test, feature = "testserver"))]
pub mod testserver;
mod warmup;

pub use align::{Alignment, align_prompts};
pub use http::env_api_key;
pub use progress::progress_bar;
pub use runner::{Logger, RunError, RunOptions, run};
pub use server_info::{InfoError, ModelInfo, fetch_metrics, fetch_models, fetch_text, post_empty, raise_nofile_limit};
