//! servebench's simulator: a digital twin of an LLM serving engine (vLLM-V1-like) that serves as
//! the embedded default benchmark target and as a capacity planner.
//!
//! - [`SimSetup::resolve`] turns a model (preset id or config.json), a hardware preset, serving
//!   options in vLLM's names and an optional fitted [`StackProfile`] into a validated setup with
//!   its KV memory plan.
//! - [`Engine`] is the scheduler and KV block pool in virtual time, pure and deterministic; a
//!   real-time server drives it step by step.
//! - [`CostModel`] prices each step (roofline plus stack overheads).
//! - [`predict()`] runs a whole benchmark plan through the engine in virtual time and returns the
//!   same [`servebench_core::record::RunResult`] a real run produces.
//! - [`server`] serves a setup over an OpenAI-compatible HTTP API in real time.
//! - [`Presets`] lists the built-in and user presets.
//! - [`calibration`] fits a [`StackProfile`] to measured runs and checks how well the fitted
//!   simulator predicts runs it was not fitted on.

pub mod calibration;
pub mod cost;
pub mod engine;
pub mod error;
pub mod hardware;
mod hf_config;
pub mod media;
pub mod memory;
pub mod model;
pub mod options;
pub mod precision;
pub mod predict;
pub mod presets;
pub mod profile;
pub mod rng;
pub mod sampling;
pub mod server;
pub mod setup;
pub mod tokens;

pub use cost::{BatchStats, CostModel, LinearCost, StepBreakdown, StepCost};
pub use engine::{
    Emission, Engine, EngineConfig, EngineCounters, FinishReason, NewRequest, Pooling, PromptTokens, Rejection,
    RequestId, SharedPrefix, StepReport,
};
pub use error::SimError;
pub use hardware::{HardwareSpec, Link, PeakTflops, Uncertainty};
pub use model::{ModelShape, MoeShape, SlidingWindow};
pub use options::{EosModel, ServingOptions, Warmup, canonical_key as canonical_option_key};
pub use precision::{KvDtype, Precision, PrecisionTable};
pub use predict::{predict, predict_with};
pub use presets::Presets;
pub use profile::StackProfile;
pub use setup::{KvLayout, MemoryPlan, SimSetup};
pub use tokens::{TokenMapper, WordHashMapper};
