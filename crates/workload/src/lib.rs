//! Workloads for servebench: what requests contain and when they are sent.
//!
//! - [`Tokenizer`] loads `--tokenizer` offline (file, folder or cached Hugging Face id), with
//!   its [`ChatTemplate`].
//! - [`datasets`] builds prompts with token lengths and `max_tokens` the way vLLM's benchmark
//!   does (random, ShareGPT, custom, prefix repetition), plus trace replay and multi-turn.
//! - [`arrival`] draws vLLM's arrival schedule bit-exactly.
//! - [`build_plan`] turns a [`servebench_core::config::RunConfig`] into a
//!   [`servebench_core::plan::Plan`] whose bodies are byte-identical to vLLM's; [`plan_file`]
//!   saves and replays it; [`prompts`] reads a plan's prompts back and gives requests new ones
//!   (aligning them to the server's tokenizer).
//! - [`accounting`] counts prompt tokens as the server will (chat template applied), and holds
//!   the one post-run accounting ([`account`]): output tokens of generated text and, for
//!   multi-turn runs, each turn's prompt tokens and prefix share ([`history`], which also builds
//!   the `messages` a conversation sends).

pub mod accounting;
pub mod arrival;
pub mod body;
pub mod datasets;
pub mod error;
pub mod history;
pub mod plan;
pub mod plan_file;
pub mod prompts;
pub mod template;
pub mod tokenizer;

#[cfg(test)]
mod testutil;

pub use accounting::{account, chat_prompt_tokens, fill_output_tokens, output_tokens, prompt_tokens};
pub use body::BodyBuilder;
pub use datasets::multi_turn::{shared_prefix_len, shared_prefix_tokens, turn_prefix_share};
pub use datasets::{Dataset, Sample};
pub use error::WorkloadError;
pub use history::History;
pub use plan::build_plan;
pub use plan_file::{load_plan, read_plan, save_plan, write_plan};
pub use prompts::{PlanPrompts, PromptEdit};
pub use template::{ChatTemplate, RenderOptions, TemplateError};
pub use tokenizer::Tokenizer;
