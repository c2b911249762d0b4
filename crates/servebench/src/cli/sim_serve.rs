//! `servebench sim serve` flags.

use clap::Args;

use super::sim_model::SimModelArgs;

/// Serve a simulated engine over an OpenAI-compatible HTTP API.
///
/// The server answers `/v1/completions` and `/v1/chat/completions` (streamed or not) in real
/// time, as the simulated engine would, plus `/v1/models`, `/metrics` (vLLM's names), `/health`,
/// `/version`, `/tokenize` and `/detokenize`, in vLLM's dialect unless `--dialect` says
/// otherwise. It runs until Ctrl-C or SIGTERM.
#[derive(Args, Clone, Debug)]
pub struct SimServeArgs {
    #[command(flatten)]
    pub deployment: SimModelArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1", help_heading = "Server")]
    pub host: String,
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 8000, help_heading = "Server")]
    pub port: u16,
    /// Tokenizer for exact prompt counts and real output tokens (a tokenizer.json, a model
    /// folder or a cached Hugging Face id); without it prompts count one token per word.
    #[arg(long, help_heading = "Server")]
    pub tokenizer: Option<String>,
    /// The model name clients send (default: the simulated model's id).
    #[arg(long, help_heading = "Server")]
    pub served_model_name: Option<String>,
    /// Seed of the engine's random draws and of the generated text.
    #[arg(long, default_value_t = 0, help_heading = "Server")]
    pub seed: u64,
    /// Answer as this server does where servers differ: vllm, llama.cpp (its `/tokenize`
    /// schema, usage inside the last completions chunk, the connection closed after every
    /// stream) or sglang (its `/detokenize` schema).
    #[arg(long, default_value = "vllm", help_heading = "Server")]
    pub dialect: String,
}
