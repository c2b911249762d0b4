//! `bench serve` flags, grouped so `sim predict` and `sweep` can share them ("low args").
//!
//! Names, defaults and meanings follow vLLM 0.33's `vllm bench serve`. Flags vLLM has and
//! servebench does not support yet are refused by [`super::compat`], with an error naming the
//! flag, so none is silently ignored.
//!
//! Each group's `Default` is what clap gives when none of its flags is passed
//! (`clap_defaults`), so the defaults are written once, in the `#[arg]` attributes.

use clap::{Args, Command, FromArgMatches};
use servebench_workload::datasets::spec_bench::SPEED_BENCH_SUBSETS;

/// What clap makes of flag group `T` when none of its flags is given.
pub(crate) fn clap_defaults<T: Args + FromArgMatches>() -> T {
    let cmd = T::augment_args(Command::new("defaults").no_binary_name(true));
    let parsed = cmd.try_get_matches_from(std::iter::empty::<&str>()).and_then(|m| T::from_arg_matches(&m));
    // Only groups without a required flag use this, so an empty command line always parses;
    // `tests::every_group_has_claps_defaults` builds each of them.
    parsed.unwrap_or_else(|e| unreachable!("a flag group without required flags failed to parse: {e}"))
}

/// Where requests go and which model they name.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Endpoint and model")]
pub struct EndpointArgs {
    /// Server or API base URL, used instead of --host/--port.
    #[arg(long)]
    pub base_url: Option<String>,
    /// Server host (ignored with --base-url).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Server port (ignored with --base-url).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Extra request headers, KEY=VALUE (several may follow one flag).
    #[arg(long, num_args = 0.., value_name = "KEY=VALUE")]
    pub header: Vec<String>,
    /// Model name; fetched from the server's /v1/models when absent.
    #[arg(long)]
    pub model: Option<String>,
    /// How many GPUs serve the model (all replicas behind the URL), for the per-GPU
    /// throughputs (tok/s/GPU) that comparisons and reports set against tok/s per user. The
    /// simulator counts its own (tp × pp × dp).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub gpus: Option<u32>,
    /// What one GPU costs an hour, in dollars (or any one currency: the costs are in it), for
    /// the cost per million output tokens beside the per-GPU throughputs. Needs the GPU count:
    /// --gpus, or the simulator's own.
    #[arg(long, value_name = "USD")]
    pub gpu_hour_cost: Option<f64>,
    #[command(flatten)]
    pub request: RequestArgs,
    /// Prefix of the x-request-id header sent with request i (prefix + i) [default:
    /// `bench-` and 8 random hex digits; the workers of a sharded run share one].
    #[arg(long, env = "SERVEBENCH_REQUEST_ID_PREFIX")]
    pub request_id_prefix: Option<String>,
    /// LoRA adapters the server serves: each request names one of them as its model, chosen
    /// by --lora-assignment (the ready check and warm-up use the base model).
    #[arg(long, num_args = 1.., value_name = "NAME")]
    pub lora_modules: Vec<String>,
    /// How requests get adapters: random (Python's random.choice, seeded as vLLM seeds it) or
    /// round-robin (request i gets adapter i mod n).
    #[arg(long, default_value = "random", value_parser = ["random", "round-robin"])]
    pub lora_assignment: String,
    /// Do not verify the TLS certificate of an https server (for self-signed certificates).
    #[arg(long)]
    pub insecure: bool,
    /// Run the server's profiler during the benchmark: POST /start_profile before the timed
    /// run and /stop_profile after it (a vLLM server started with its profiler enabled).
    #[arg(long)]
    pub profile: bool,
}

impl Default for EndpointArgs {
    fn default() -> Self {
        clap_defaults()
    }
}

/// How requests look, whoever serves them: their format, the model name they carry, the
/// tokenizer that counts their tokens and the result label (`bench serve` and `sim predict`).
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Requests")]
pub struct RequestArgs {
    /// Backend or endpoint type: vllm, openai (completions), openai-chat, vllm-chat,
    /// openai-responses (the Responses API, /v1/responses), anthropic-messages (Anthropic's
    /// Messages API, /v1/messages), sglang, llama.cpp; for pooling models openai-embeddings
    /// (/v1/embeddings), openai-embeddings-chat, openai-embeddings-clip,
    /// openai-embeddings-vlm2vec, infinity-embeddings, infinity-embeddings-clip, vllm-pooling
    /// (/pooling) and vllm-rerank (/v1/rerank).
    #[arg(long, default_value = "openai")]
    pub backend: String,
    /// API endpoint path, which must fit --backend (default depends on it: /v1/completions,
    /// /v1/chat/completions, ...).
    #[arg(long)]
    pub endpoint: Option<String>,
    /// The model name sent in requests (default: --model).
    #[arg(long)]
    pub served_model_name: Option<String>,
    /// A tokenizer.json, a model folder, or a Hugging Face id found in the local cache, for
    /// exact prompt lengths. Without it, token counts come from the server's usage.
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// Result label (default: the backend).
    #[arg(long)]
    pub label: Option<String>,
}

impl Default for RequestArgs {
    fn default() -> Self {
        clap_defaults()
    }
}

/// When requests are sent.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Traffic")]
pub struct TrafficArgs {
    /// Requests to send.
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
    /// Requests per second at the start of the ramp (with --ramp-up-strategy).
    #[arg(long)]
    pub ramp_up_start_rps: Option<i64>,
    /// Requests per second at the end of the ramp (with --ramp-up-strategy).
    #[arg(long)]
    pub ramp_up_end_rps: Option<i64>,
    /// Seed of the dataset sampling and of the arrival times.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Warm-up requests (copies of request 0) sent before the timed run.
    #[arg(long, default_value_t = 0)]
    pub num_warmups: usize,
    /// Retry the first request for up to this many seconds until it succeeds (0 skips the check).
    #[arg(long, default_value_t = 0)]
    pub ready_check_timeout_sec: u64,
    /// Beside the run, send one-token probe requests ("Hi", one at a time on a connection of
    /// their own, outside --max-concurrency) this many a second, and report their latencies:
    /// what a new, light request waits under the run's load (0 sends none).
    #[arg(long, value_name = "RATE", default_value_t = 0.0, allow_negative_numbers = true)]
    pub probe_request_rate: f64,
    /// Hide the progress bar.
    #[arg(long)]
    pub disable_tqdm: bool,
}

impl Default for TrafficArgs {
    fn default() -> Self {
        clap_defaults()
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
    /// Sampling temperature sent with every request.
    #[arg(long, allow_negative_numbers = true)]
    pub temperature: Option<f64>,
    /// Top-p sampling parameter sent with every request.
    #[arg(long, allow_negative_numbers = true)]
    pub top_p: Option<f64>,
    /// Top-k sampling parameter sent with every request.
    #[arg(long, allow_negative_numbers = true)]
    pub top_k: Option<i64>,
    /// Min-p sampling parameter sent with every request.
    #[arg(long, allow_negative_numbers = true)]
    pub min_p: Option<f64>,
    /// Frequency penalty sent with every request.
    #[arg(long, allow_negative_numbers = true)]
    pub frequency_penalty: Option<f64>,
    /// Presence penalty sent with every request.
    #[arg(long, allow_negative_numbers = true)]
    pub presence_penalty: Option<f64>,
    /// Repetition penalty sent with every request.
    #[arg(long, allow_negative_numbers = true)]
    pub repetition_penalty: Option<f64>,
    /// Logprobs per token (sent as "logprobs" in completions bodies).
    #[arg(long, allow_negative_numbers = true)]
    pub logprobs: Option<i64>,
    /// Accepted for compatibility; unused, as in vLLM.
    #[arg(long)]
    pub use_beam_search: bool,
    /// JSON object merged into every request body last.
    #[arg(long, value_name = "JSON")]
    pub extra_body: Option<String>,
}

/// What is reported and saved.
#[derive(Args, Clone, Debug)]
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
    /// Folder of the result JSON (default: the current folder).
    #[arg(long)]
    pub result_dir: Option<String>,
    /// File name of the result JSON (default as vLLM names it:
    /// LABEL-RATEqps[-concurrencyN]-MODEL-DATE.json).
    #[arg(long)]
    pub result_filename: Option<String>,
    /// KEY=VALUE pairs saved at the top level of the result JSON.
    #[arg(long, num_args = 0.., value_name = "KEY=VALUE")]
    pub metadata: Vec<String>,
    /// Also report the run in time slices of N seconds (throughput, TTFT and ITL percentiles,
    /// requests in flight), in the result JSON and the run store.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub slice_seconds: Option<u32>,
    /// Scrape the server's Prometheus `/metrics` during the run (running and waiting requests,
    /// KV cache use, preemptions, prefix-cache hits, the server's own queue time and TTFT;
    /// vLLM, SGLang, TGI and llama.cpp names), stored with the run and charted in its report.
    #[arg(long)]
    pub server_metrics: bool,
    /// Also scrape this Prometheus endpoint during the run (a DCGM exporter for GPU use, power
    /// and memory); repeatable. A failing scrape is noted, never fatal.
    #[arg(long, value_name = "URL")]
    pub scrape: Vec<String>,
    /// Seconds between scrapes.
    #[arg(long, value_name = "SECONDS", default_value_t = servebench_core::config::DEFAULT_SCRAPE_INTERVAL_S)]
    pub scrape_interval: f64,
    /// Write a page of the run's requests beside its result JSON (RESULT.timeline.html, as
    /// vLLM names it): each request's wait for a slot, its time to the first token, then its
    /// token gaps coloured by --timeline-itl-thresholds. Written without --save-result too.
    #[arg(long)]
    pub plot_timeline: bool,
    /// The two ITL thresholds of --plot-timeline's colours, in ms: gaps below the first,
    /// below the second, and the rest.
    #[arg(long, value_name = "LOW,HIGH", default_value = "25,50")]
    pub timeline_itl_thresholds: String,
    /// Write a figure of the requests' prompt, output and total tokens beside the result JSON
    /// (RESULT.dataset_stats.svg: vLLM's four panels, as an SVG where vLLM writes a PNG).
    #[arg(long)]
    pub plot_dataset_stats: bool,
}

impl Default for ReportArgs {
    fn default() -> Self {
        clap_defaults()
    }
}

/// Which dataset the prompts come from.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Dataset")]
pub struct DatasetArgs {
    /// random, random-mm (random prompts with random images), sharegpt, custom, custom_image
    /// (custom rows with their `image_files`), spec_bench, speed_bench, txt-slices,
    /// prefix_repetition, trace (a recorded arrival trace), or timed_trace (a JSONL trace read as
    /// vLLM reads it).
    #[arg(long, default_value = "random")]
    pub dataset_name: String,
    /// The dataset file: ShareGPT JSON, custom or custom_image JSONL, Spec-Bench's question.jsonl, a text file
    /// to slice (txt-slices), or a BurstGPT or Mooncake trace; for speed_bench, the directory
    /// SPEED-Bench's download script writes.
    #[arg(long)]
    pub dataset_path: Option<String>,
    /// Do not repeat samples when the dataset has fewer than --num-prompts.
    #[arg(long)]
    pub no_oversample: bool,
    /// Custom dataset: send prompts as written, without the chat template (vLLM's spec_bench
    /// and speed_bench template their prompts whatever this says, and so does servebench).
    #[arg(long)]
    pub skip_chat_template: bool,
    /// JSON object of extra chat-template variables for the prompts the client templates
    /// (custom, spec_bench, speed_bench), e.g. '{"enable_thinking": false}'.
    #[arg(long, value_name = "JSON")]
    pub chat_template_kwargs: Option<String>,
    /// Take the dataset's samples in file order instead of shuffled.
    #[arg(long)]
    pub disable_shuffle: bool,
    /// Random and txt-slices datasets: prompt tokens per request.
    #[arg(long, default_value_t = 1024)]
    pub random_input_len: u32,
    /// Random and txt-slices datasets: output tokens per request.
    #[arg(long, default_value_t = 128)]
    pub random_output_len: u32,
    /// A float in [0, 1), or JSON {"input": a, "output": b}.
    #[arg(long, default_value = "0.0")]
    pub random_range_ratio: String,
    /// Random dataset: tokens of a fixed prefix shared by every prompt.
    #[arg(long, default_value_t = 0)]
    pub random_prefix_len: u32,
    /// Random and random-rerank datasets, pooling backends: prompts one request carries (its
    /// input list, or a rerank's documents).
    #[arg(long, default_value_t = 1)]
    pub random_batch_size: u32,
    /// random-rerank dataset: score with an embedding model instead of a reranker (the query
    /// is one of the prompts and each prompt is --random-input-len long).
    #[arg(long)]
    pub no_reranker: bool,
    /// random-mm dataset: the middle of the range of images a request carries.
    #[arg(long, default_value_t = 1)]
    pub random_mm_base_items_per_request: u32,
    /// random-mm dataset: images per request are drawn from [floor(n(1-r)), ceil(n(1+r))], r in [0, 1].
    #[arg(long, default_value_t = 0.0)]
    pub random_mm_num_mm_items_range_ratio: f64,
    /// random-mm dataset: caps per modality, JSON like {"image": 3, "video": 0}.
    #[arg(long, default_value = r#"{"image": 255, "video": 1}"#)]
    pub random_mm_limit_mm_per_prompt: String,
    /// random-mm dataset: shapes (height, width, frames) and their probabilities, as vLLM takes
    /// them: {(256, 256, 1): 0.5, (720, 1280, 1): 0.5}; frames 1 is an image (video is not sent yet).
    #[arg(long, default_value = "{(256, 256, 1): 0.5, (720, 1280, 1): 0.5, (720, 1280, 16): 0.0}")]
    pub random_mm_bucket_config: String,
    /// ShareGPT dataset: output tokens per request, instead of each conversation's answer length.
    #[arg(long)]
    pub sharegpt_output_len: Option<u32>,
    /// Output tokens per request for the custom and custom_image datasets; -1 uses each row's
    /// output_tokens.
    #[arg(long, default_value_t = 256, allow_negative_numbers = true)]
    pub custom_output_len: i64,
    /// Spec-Bench dataset: output tokens per request.
    #[arg(long, default_value_t = 256)]
    pub spec_bench_output_len: u32,
    /// Spec-Bench dataset: only the rows of this category (writing, coding, math, translation,
    /// summarization, qa, rag, ...); every row if not given.
    #[arg(long)]
    pub spec_bench_category: Option<String>,
    /// SPEED-Bench dataset: which subset's file of the directory to read.
    #[arg(long, default_value = "qualitative", value_parser = SPEED_BENCH_SUBSETS)]
    pub speed_bench_dataset_subset: String,
    /// SPEED-Bench dataset: output tokens per request.
    #[arg(long, default_value_t = 4096)]
    pub speed_bench_output_len: u32,
    /// SPEED-Bench dataset: only the rows of this category; every row if not given.
    #[arg(long)]
    pub speed_bench_category: Option<String>,
    /// Prefix-repetition dataset: tokens of each shared prefix.
    #[arg(long, default_value_t = 256)]
    pub prefix_repetition_prefix_len: u32,
    /// Prefix-repetition dataset: tokens after the prefix, different in every prompt.
    #[arg(long, default_value_t = 256)]
    pub prefix_repetition_suffix_len: u32,
    /// Prefix-repetition dataset: how many distinct prefixes the prompts share.
    #[arg(long, default_value_t = 10)]
    pub prefix_repetition_num_prefixes: u32,
    /// Prefix-repetition dataset: output tokens per request.
    #[arg(long, default_value_t = 128)]
    pub prefix_repetition_output_len: u32,
    /// Trace replay: multiply the recorded gaps between arrivals (2.0 halves the rate).
    #[arg(long, default_value_t = 1.0)]
    pub trace_time_scale: f64,
    /// Trace datasets: send each request at its recorded time, as servebench does for trace and
    /// timed_trace with or without this flag (accepted as vLLM spells it).
    #[arg(long)]
    pub self_timed: bool,
    /// timed_trace dataset: prompt tokens each of a row's hash ids stands for (rows sharing an
    /// id share that block of their prompts).
    #[arg(long, default_value_t = 16)]
    pub timed_trace_chunk_hash_size: u32,
    /// timed_trace dataset: seconds a unit of the timestamps is (0.001 for milliseconds).
    #[arg(long, default_value_t = 1.0)]
    pub timed_trace_sec_multiplier: f64,
    /// timed_trace dataset: the field of each row holding its timestamp.
    #[arg(long, default_value = "timestamp")]
    pub timed_trace_label_timestamp: String,
    /// timed_trace dataset: the field holding the prompt's length in tokens.
    #[arg(long, default_value = "input_length")]
    pub timed_trace_label_input_length: String,
    /// timed_trace dataset: the field holding the output's length in tokens.
    #[arg(long, default_value = "output_length")]
    pub timed_trace_label_output_length: String,
    /// timed_trace dataset: the field holding the row's hash ids (optional in a row).
    #[arg(long, default_value = "hash_ids")]
    pub timed_trace_label_hash_ids: String,
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
        clap_defaults()
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
    /// A serving option for the simulator, in vLLM's names: tp=2, max-num-seqs=64, ...;
    /// dialect=llama.cpp or dialect=sglang makes its HTTP API answer as that server does.
    #[arg(long = "sim-option", value_name = "KEY=VALUE")]
    pub sim_options: Vec<String>,
    /// A profile fitted by `servebench sim fit`.
    #[arg(long, value_name = "PROFILE")]
    pub sim_profile: Option<String>,
}

/// servebench's own run options.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "servebench")]
pub struct RunExtraArgs {
    /// Seconds before a single request is abandoned and counted as a timeout.
    #[arg(long, default_value_t = 6.0 * 3600.0)]
    pub request_timeout_sec: f64,
    /// Stop the run once this many requests have failed: nothing more is sent, requests in
    /// flight get their grace, and what was measured is reported and saved (exit code 4).
    #[arg(long, value_name = "N")]
    pub max_failures: Option<u64>,
    /// Stop the run when requests are in flight and none of them has received a token or ended
    /// for this many seconds (a hung server), keeping what was measured (exit code 4).
    #[arg(long, value_name = "SECONDS")]
    pub stall_timeout: Option<f64>,
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
    /// Exit with code 3 when a rule holds on this run: KEY>VALUE or KEY<VALUE, comma-separated
    /// (p99_ttft_ms>500,output_throughput<1000,failed_pct>1).
    #[arg(long, value_name = "RULES")]
    pub fail_on: Vec<String>,
}

impl Default for RunExtraArgs {
    fn default() -> Self {
        clap_defaults()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_group_has_claps_defaults() {
        let e = EndpointArgs::default();
        assert_eq!((e.request.backend.as_str(), e.host.as_str(), e.port), ("openai", "127.0.0.1", 8000));
        assert!(!e.insecure && !e.profile);
        assert!(e.lora_modules.is_empty() && e.lora_assignment == "random");
        let t = TrafficArgs::default();
        assert_eq!((t.num_prompts, t.request_rate, t.burstiness), (1000, f64::INFINITY, 1.0));
        assert_eq!(ReportArgs::default().metric_percentiles, "99");
        let d = DatasetArgs::default();
        assert_eq!((d.dataset_name.as_str(), d.random_input_len, d.max_turns), ("random", 1024, 8));
        assert_eq!(RunExtraArgs::default().request_timeout_sec, 6.0 * 3600.0);
    }

    #[test]
    fn the_backend_help_names_every_backend() {
        use clap::CommandFactory;
        let mut cmd = crate::cli::Cli::command();
        let bench = cmd.find_subcommand_mut("bench").and_then(|b| b.find_subcommand_mut("serve")).unwrap();
        let backend = bench.get_arguments().find(|a| a.get_id() == "backend").unwrap();
        let help = backend.get_help().unwrap().to_string();
        let words: Vec<&str> = help.split(|c: char| c.is_whitespace() || ",;()".contains(c)).collect();
        for (_, name) in servebench_core::config::Backend::ALL {
            assert!(words.contains(&name), "--backend's help leaves out {name}: {help}");
        }
    }
}
