//! `bench serve` flags, grouped so `sim predict` and `sweep` can share them ("low args").
//!
//! Names, defaults and meanings follow vLLM 0.33's `vllm bench serve`. Flags vLLM has and
//! servebench does not support yet are declared too (see [`super::unsupported`]) so that using
//! one is refused with an error naming it, never silently ignored.

use clap::Args;

/// Where requests go and which model they name.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Endpoint and model")]
pub struct EndpointArgs {
    /// Backend or endpoint type: vllm, openai (completions), openai-chat, vllm-chat, sglang, llama.cpp.
    #[arg(long, default_value = "openai")]
    pub backend: String,
    /// Server or API base URL, used instead of --host/--port.
    #[arg(long)]
    pub base_url: Option<String>,
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// API endpoint path (default depends on --backend: /v1/completions or /v1/chat/completions).
    #[arg(long)]
    pub endpoint: Option<String>,
    /// Extra request headers, KEY=VALUE (several may follow one flag).
    #[arg(long, num_args = 0.., value_name = "KEY=VALUE")]
    pub header: Vec<String>,
    /// Model name; fetched from the server's /v1/models when absent.
    #[arg(long)]
    pub model: Option<String>,
    /// The model name sent in requests (default: --model).
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// A tokenizer.json, a model folder, or a Hugging Face id found in the local cache.
    /// Without it, token counts come from the server's usage.
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// Result label (default: the backend).
    #[arg(long)]
    pub label: Option<String>,
    /// Prefix of the x-request-id header sent with request i (prefix + i).
    #[arg(long)]
    pub request_id_prefix: Option<String>,
}

/// When requests are sent.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Traffic")]
pub struct TrafficArgs {
    #[arg(long, default_value_t = 1000)]
    pub num_prompts: usize,
    /// Requests per second; inf sends everything at once.
    #[arg(long, default_value = "inf")]
    pub request_rate: f64,
    /// Gamma shape of the inter-arrival gaps (1.0 = Poisson).
    #[arg(long, default_value_t = 1.0)]
    pub burstiness: f64,
    /// At most this many requests in flight (a client-side cap).
    #[arg(long)]
    pub max_concurrency: Option<i64>,
    /// Ramp the rate up over the run: linear or exponential.
    #[arg(long)]
    pub ramp_up_strategy: Option<String>,
    #[arg(long)]
    pub ramp_up_start_rps: Option<i64>,
    #[arg(long)]
    pub ramp_up_end_rps: Option<i64>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Warm-up requests (copies of request 0) sent before the timed run.
    #[arg(long, default_value_t = 0)]
    pub num_warmups: usize,
    /// Retry the first request for up to this many seconds until it succeeds (0 skips the check).
    #[arg(long, default_value_t = 0)]
    pub ready_check_timeout_sec: u64,
    /// Hide the progress bar.
    #[arg(long)]
    pub disable_tqdm: bool,
}

impl Default for TrafficArgs {
    fn default() -> Self {
        Self {
            num_prompts: 1000,
            request_rate: f64::INFINITY,
            burstiness: 1.0,
            max_concurrency: None,
            ramp_up_strategy: None,
            ramp_up_start_rps: None,
            ramp_up_end_rps: None,
            seed: 0,
            num_warmups: 0,
            ready_check_timeout_sec: 0,
            disable_tqdm: false,
        }
    }
}

/// What the requests carry besides the prompt.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Request content")]
pub struct ContentArgs {
    /// General input length (maps to --random-input-len).
    #[arg(long)]
    pub input_len: Option<u32>,
    /// General output length (maps to every dataset's output length).
    #[arg(long)]
    pub output_len: Option<u32>,
    /// Send ignore_eos (always on for the random dataset).
    #[arg(long)]
    pub ignore_eos: bool,
    #[arg(long)]
    pub temperature: Option<f64>,
    #[arg(long)]
    pub top_p: Option<f64>,
    #[arg(long)]
    pub top_k: Option<i64>,
    #[arg(long)]
    pub min_p: Option<f64>,
    #[arg(long)]
    pub frequency_penalty: Option<f64>,
    #[arg(long)]
    pub presence_penalty: Option<f64>,
    #[arg(long)]
    pub repetition_penalty: Option<f64>,
    /// Logprobs per token (sent as "logprobs" in completions bodies).
    #[arg(long)]
    pub logprobs: Option<i64>,
    /// Accepted for compatibility; unused, as in vLLM.
    #[arg(long)]
    pub use_beam_search: bool,
    /// JSON object merged into every request body last.
    #[arg(long, value_name = "JSON")]
    pub extra_body: Option<String>,
}

/// What is reported and saved.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Reporting")]
pub struct ReportArgs {
    /// Comma list of metrics with percentile sections: ttft,tpot,itl,e2el,client_queue_time,e2el_including_client_queue.
    #[arg(long)]
    pub percentile_metrics: Option<String>,
    /// Comma list of percentiles, e.g. 25,50,75.
    #[arg(long, default_value = "99")]
    pub metric_percentiles: String,
    /// SLOs for goodput, KEY:VALUE in ms (ttft, tpot, e2el).
    #[arg(long, num_args = 1.., value_name = "KEY:VALUE")]
    pub goodput: Vec<String>,
    /// Save the result JSON (vLLM's format plus a `servebench` key).
    #[arg(long)]
    pub save_result: bool,
    /// Keep per-request arrays in the result JSON.
    #[arg(long)]
    pub save_detailed: bool,
    /// Append the result to the file as a new line.
    #[arg(long)]
    pub append_result: bool,
    #[arg(long)]
    pub result_dir: Option<String>,
    #[arg(long)]
    pub result_filename: Option<String>,
    /// KEY=VALUE pairs saved at the top level of the result JSON.
    #[arg(long, num_args = 0.., value_name = "KEY=VALUE")]
    pub metadata: Vec<String>,
}

/// Which dataset the prompts come from.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Dataset")]
pub struct DatasetArgs {
    /// random, sharegpt, custom, prefix_repetition, or trace (a recorded arrival trace).
    #[arg(long, default_value = "random")]
    pub dataset_name: String,
    #[arg(long)]
    pub dataset_path: Option<String>,
    #[arg(long)]
    pub no_oversample: bool,
    #[arg(long)]
    pub skip_chat_template: bool,
    #[arg(long)]
    pub disable_shuffle: bool,
    #[arg(long, default_value_t = 1024)]
    pub random_input_len: u32,
    #[arg(long, default_value_t = 128)]
    pub random_output_len: u32,
    /// A float in [0, 1), or JSON {"input": a, "output": b}.
    #[arg(long, default_value = "0.0")]
    pub random_range_ratio: String,
    #[arg(long, default_value_t = 0)]
    pub random_prefix_len: u32,
    #[arg(long)]
    pub sharegpt_output_len: Option<u32>,
    /// Output tokens per request for the custom dataset; -1 uses each row's output_tokens.
    #[arg(long, default_value_t = 256, allow_negative_numbers = true)]
    pub custom_output_len: i64,
    #[arg(long, default_value_t = 256)]
    pub prefix_repetition_prefix_len: u32,
    #[arg(long, default_value_t = 256)]
    pub prefix_repetition_suffix_len: u32,
    #[arg(long, default_value_t = 10)]
    pub prefix_repetition_num_prefixes: u32,
    #[arg(long, default_value_t = 128)]
    pub prefix_repetition_output_len: u32,
    /// Trace replay: multiply the recorded gaps between arrivals (2.0 halves the rate).
    #[arg(long, default_value_t = 1.0)]
    pub trace_time_scale: f64,
    /// Send whole ShareGPT conversations turn by turn, each turn carrying the history.
    #[arg(long)]
    pub multi_turn: bool,
    /// Multi-turn: at most this many conversations active at once.
    #[arg(long, default_value_t = 64)]
    pub max_active_conversations: usize,
    /// Multi-turn: seconds between an answer's end and the next turn.
    #[arg(long, default_value_t = 0.0)]
    pub think_time: f64,
    /// Multi-turn: at most this many turns per conversation.
    #[arg(long, default_value_t = 8)]
    pub max_turns: usize,
}

impl Default for DatasetArgs {
    fn default() -> Self {
        Self {
            dataset_name: "random".into(),
            dataset_path: None,
            no_oversample: false,
            skip_chat_template: false,
            disable_shuffle: false,
            random_input_len: 1024,
            random_output_len: 128,
            random_range_ratio: "0.0".into(),
            random_prefix_len: 0,
            sharegpt_output_len: None,
            custom_output_len: 256,
            prefix_repetition_prefix_len: 256,
            prefix_repetition_suffix_len: 256,
            prefix_repetition_num_prefixes: 10,
            prefix_repetition_output_len: 128,
            trace_time_scale: 1.0,
            multi_turn: false,
            max_active_conversations: 64,
            think_time: 0.0,
            max_turns: 8,
        }
    }
}

/// The built-in simulator as a target (servebench's own flags).
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Simulator target")]
pub struct SimTargetArgs {
    /// Benchmark the built-in simulator: MODEL@HARDWARE, e.g. Qwen/Qwen3-8B@h100-sxm.
    /// It is started in-process on a loopback port and benchmarked over HTTP.
    #[arg(long, value_name = "MODEL@HARDWARE")]
    pub sim: Option<String>,
    /// A serving option for the simulator, in vLLM's names: tp=2, max-num-seqs=64, ...
    #[arg(long = "sim-option", value_name = "KEY=VALUE")]
    pub sim_options: Vec<String>,
    /// A profile fitted by `servebench sim fit`.
    #[arg(long, value_name = "PROFILE")]
    pub sim_profile: Option<String>,
}

/// servebench's own run options.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "servebench")]
pub struct RunExtraArgs {
    /// Seconds before a single request is abandoned and counted as a timeout.
    #[arg(long, default_value_t = 6.0 * 3600.0)]
    pub request_timeout_sec: f64,
    /// Write the planned requests (bodies and intended send times) as JSONL and exit without sending.
    #[arg(long, value_name = "FILE")]
    pub dry_run: Option<String>,
    /// Send exactly the requests of a plan written by --dry-run.
    #[arg(long, value_name = "FILE")]
    pub replay_plan: Option<String>,
    /// The run store (SQLite); default in the user's data directory, or $SERVEBENCH_DB.
    #[arg(long, value_name = "PATH")]
    pub db: Option<String>,
    /// Do not save this run to the run store.
    #[arg(long)]
    pub no_store: bool,
}
