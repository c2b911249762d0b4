//! The resolved, validated run configuration ("high args").
//!
//! Command-line flags are parsed into clap structs by the `servebench` crate and resolved exactly
//! once into a [`RunConfig`]. Everything downstream (the workload builder, the load engine, the
//! simulator's `predict`, the report and the run store) reads only this struct, and it is saved
//! verbatim with every result, so a run can always be explained and repeated.

use serde::{Deserialize, Serialize};

mod backend;
mod workload;
pub use backend::{Api, Backend, ImagePrompt, PoolingForm};
pub use workload::{ImageBucket, MultiTurn, RandomMedia, RangeRatio, TimedTrace, WorkloadSpec};

/// Everything that defines one benchmark run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Where requests go and which model they name.
    pub target: Target,
    /// What the requests contain.
    pub workload: WorkloadSpec,
    /// When requests are sent.
    pub traffic: Traffic,
    /// Sampling parameters and `--extra-body`, merged into every request body (applied last).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// `--chat-template-kwargs`: extra variables of the chat template where the client renders
    /// it (the custom, spec_bench and speed_bench prompts), e.g. `{"enable_thinking": false}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_template_kwargs: Option<serde_json::Map<String, serde_json::Value>>,
    /// `--ignore-eos` (forced on for the random dataset, as vLLM does).
    pub ignore_eos: bool,
    /// `--logprobs`: sent as `"logprobs"` in completions bodies (`null` when unset, as vLLM
    /// sends it); chat bodies carry no logprobs, as in vLLM.
    #[serde(default)]
    pub logprobs: Option<i64>,
    /// What is reported and saved.
    pub output: OutputOptions,
}

/// Where requests go.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub backend: Backend,
    /// Base URL used for `/v1/models`, `/metrics`, `/tokenize` (no trailing slash).
    pub base_url: String,
    /// The endpoint path (`--endpoint`), e.g. `/v1/completions`.
    pub endpoint: String,
    /// `base_url + endpoint`: where benchmark requests are POSTed.
    pub api_url: String,
    /// Extra request headers (`--header K=V`), in order. Values are redacted when saved.
    #[serde(serialize_with = "redact_headers")]
    pub headers: Vec<(String, String)>,
    /// The model id (`--model`, or the first model the server lists). Used for naming results.
    pub model_id: String,
    /// The `model` field sent in requests (`--served-model-name`, default `model_id`).
    pub model_name: String,
    /// The tokenizer used to build and count prompts, if any (`--tokenizer`, resolved path).
    pub tokenizer: Option<String>,
    /// Set when the target is the built-in simulator (`--sim MODEL@HARDWARE`).
    pub sim: Option<SimTarget>,
    /// Per-request timeout in seconds (vLLM: 6 hours).
    pub request_timeout_s: f64,
    /// Request `i` carries the header `x-request-id: {prefix}{i}` (`--request-id-prefix`).
    pub request_id_prefix: String,
    /// `--insecure`: accept any TLS certificate from an https server (self-signed ones).
    #[serde(default)]
    pub insecure: bool,
    /// `--lora-modules` and `--lora-assignment`: each request names one of these LoRA adapters
    /// as its `model` instead of `model_name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<Lora>,
    /// `--profile`: ask the server to run its profiler (vLLM's `POST /start_profile`, then
    /// `/stop_profile`) around the timed run.
    #[serde(default)]
    pub profile: bool,
    /// How many GPUs serve the target, for the per-GPU throughputs: `--gpus`, or the
    /// simulator's deployment (tp × pp × dp). `None` when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    /// What one GPU of the target costs an hour (`--gpu-hour-cost`, in dollars or any one
    /// currency), for the cost per million output tokens. `None` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_hour_cost: Option<f64>,
}

/// A simulator target: a model on some hardware, with serving options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimTarget {
    /// The model preset (Hugging Face id) or a config.json path.
    pub model: String,
    /// The hardware preset name.
    pub hardware: String,
    /// Serving options as `key=value` pairs, in vLLM's names (`tp=2`, `max-num-seqs=64`, ...).
    pub options: Vec<(String, String)>,
    /// A fitted profile file, if given.
    pub profile: Option<String>,
}

fn redact_headers<S: serde::Serializer>(h: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(h.len()))?;
    for (k, _) in h {
        seq.serialize_element(&(k.as_str(), "***"))?;
    }
    seq.end()
}

/// Ramp-up of the request rate over the run (`--ramp-up-strategy`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RampUp {
    pub strategy: RampStrategy,
    pub start_rps: f64,
    pub end_rps: f64,
}

/// LoRA adapters the requests are spread over (vLLM's `--lora-modules`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lora {
    /// The adapters' served names, as the server lists them.
    pub modules: Vec<String>,
    pub assignment: LoraAssignment,
}

/// How requests are given adapters (`--lora-assignment`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoraAssignment {
    /// Each request draws one with Python's `random.choice`, continuing the global `random`
    /// state the dataset left (vLLM's default).
    #[default]
    Random,
    /// Request `i` gets adapter `i % n`.
    RoundRobin,
}

/// How the request rate moves from `start_rps` to `end_rps` (`--ramp-up-strategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RampStrategy {
    /// The rate grows by the same step per request.
    Linear,
    /// The rate grows by the same factor per request.
    Exponential,
}

impl RampStrategy {
    /// The spelling used on the command line, in vLLM's console lines and in its result JSON.
    pub fn name(self) -> &'static str {
        match self {
            RampStrategy::Linear => "linear",
            RampStrategy::Exponential => "exponential",
        }
    }
}

/// When requests are sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Traffic {
    pub num_prompts: usize,
    /// Requests per second; `f64::INFINITY` sends everything at once. Serialized as "inf".
    #[serde(with = "float_or_inf")]
    pub request_rate: f64,
    /// Gamma shape of inter-arrival gaps (1.0 = Poisson).
    pub burstiness: f64,
    /// Client-side cap on requests in flight.
    pub max_concurrency: Option<usize>,
    pub ramp_up: Option<RampUp>,
    pub seed: u64,
    /// Copies of request 0 sent before the timed run.
    pub num_warmups: usize,
    /// Retry the first request until it succeeds for this long (0 skips the check).
    pub ready_check_timeout_s: f64,
    /// One-token probe requests a second sent one at a time beside the timed run, outside its
    /// concurrency cap (`--probe-request-rate`, vLLM 0.27+); `None` sends none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_request_rate: Option<f64>,
    /// When the timed run stops early (servebench's `--max-failures`, `--stall-timeout`).
    #[serde(default, skip_serializing_if = "StopRules::is_empty")]
    pub stop: StopRules,
}

/// Rules that stop a timed run before its plan is sent, keeping what it measured: nothing more
/// is sent, requests in flight get the run's grace. Each worker of a sharded run applies them
/// to its own requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StopRules {
    /// Stop once this many requests have failed (`--max-failures`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_failures: Option<u64>,
    /// Stop when requests are in flight and none of them has received a token, nor ended, for
    /// this many seconds (`--stall-timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_timeout_s: Option<f64>,
}

impl StopRules {
    /// No rule set.
    pub fn is_empty(&self) -> bool {
        self.max_failures.is_none() && self.stall_timeout_s.is_none()
    }
}

impl Traffic {
    /// The request rate vLLM uses for request `i` of `n`: the ramp's rate at `i`'s share of
    /// the way from the first request to the last, or `request_rate` without a ramp.
    pub fn rate_at(&self, i: usize, n: usize) -> f64 {
        match &self.ramp_up {
            Some(r) => {
                let progress = i as f64 / (n.saturating_sub(1).max(1)) as f64;
                match r.strategy {
                    RampStrategy::Linear => r.start_rps + (r.end_rps - r.start_rps) * progress,
                    RampStrategy::Exponential => r.start_rps * (r.end_rps / r.start_rps).powf(progress),
                }
            }
            None => self.request_rate,
        }
    }
}

/// A metric that has a percentile section in the report (see [`Metric::key`] for each one's
/// name in flags and JSON keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Ttft,
    Tpot,
    Itl,
    E2el,
    ClientQueueTime,
    E2elIncludingClientQueue,
}

impl Metric {
    /// In the order vLLM prints and saves them.
    pub const ALL: [Metric; 6] = [
        Metric::Ttft,
        Metric::Tpot,
        Metric::Itl,
        Metric::E2el,
        Metric::ClientQueueTime,
        Metric::E2elIncludingClientQueue,
    ];

    /// The key used in `--percentile-metrics` and in JSON keys (`mean_{key}_ms`).
    pub fn key(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::E2el => "e2el",
            Metric::ClientQueueTime => "client_queue_time",
            Metric::E2elIncludingClientQueue => "e2el_including_client_queue",
        }
    }

    /// Parses a [`Metric::key`].
    pub fn from_key(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.key() == s)
    }
}

/// A goodput SLO (`--goodput ttft:500`), in milliseconds: each request's metric at most
/// `max_ms` (read by [`crate::threshold::parse_goodput`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    pub metric: Metric,
    pub max_ms: f64,
}

impl Slo {
    /// Whether a request whose metric took `seconds` meets the SLO.
    pub fn met_by(&self, seconds: f64) -> bool {
        crate::threshold::Op::AtMost.holds(seconds, self.max_ms / 1000.0)
    }
}

/// What is reported and saved.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutputOptions {
    /// Metrics with a percentile section, in the order given.
    pub percentile_metrics: Vec<Metric>,
    /// Percentiles printed for each metric (`--metric-percentiles`).
    pub metric_percentiles: Vec<f64>,
    /// Goodput SLOs; empty when `--goodput` is absent.
    pub goodput: Vec<Slo>,
    pub save_result: bool,
    pub save_detailed: bool,
    pub append_result: bool,
    pub result_dir: Option<String>,
    pub result_filename: Option<String>,
    /// `--metadata K=V`, in order.
    pub metadata: Vec<(String, String)>,
    pub label: Option<String>,
    pub disable_progress: bool,
    /// `--slice-seconds`: report the run in time slices this long.
    #[serde(default)]
    pub slice_seconds: Option<f64>,
    /// `--server-metrics`: scrape the target's own `/metrics` during the run.
    #[serde(default)]
    pub server_metrics: bool,
    /// `--scrape`: other Prometheus endpoints scraped during the run (a DCGM exporter).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scrape: Vec<String>,
    /// Seconds between scrapes (`--scrape-interval`).
    #[serde(default = "default_scrape_interval")]
    pub scrape_interval_s: f64,
    /// `--plot-timeline`: write a page of the run's requests beside its result, each gap
    /// between token chunks coloured by these two ITL thresholds in ms
    /// (`--timeline-itl-thresholds`); `None` without the flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plot_timeline: Option<[f64; 2]>,
    /// `--plot-dataset-stats`: write a figure of the requests' token counts beside the result.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plot_dataset_stats: bool,
}

/// vLLM's `--timeline-itl-thresholds` default, ms.
pub const DEFAULT_TIMELINE_ITL_THRESHOLDS_MS: [f64; 2] = [25.0, 50.0];

/// One scrape a second.
pub const DEFAULT_SCRAPE_INTERVAL_S: f64 = 1.0;

fn default_scrape_interval() -> f64 {
    DEFAULT_SCRAPE_INTERVAL_S
}

impl RunConfig {
    /// Every endpoint scraped during the run: the target's `/metrics` first (with
    /// `--server-metrics`), then those of `--scrape`.
    pub fn scrape_urls(&self) -> Vec<String> {
        let own = self.output.server_metrics.then(|| format!("{}/metrics", self.target.base_url.trim_end_matches('/')));
        own.into_iter().chain(self.output.scrape.iter().cloned()).collect()
    }
}

/// Serializes `f64::INFINITY` as the string "inf" (vLLM's JSON does this for request_rate).
pub mod float_or_inf {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_infinite() { s.serialize_str("inf") } else { s.serialize_f64(*v) }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum V {
            N(f64),
            S(String),
        }
        match V::deserialize(d)? {
            V::N(n) => Ok(n),
            V::S(s) if s == "inf" || s == "Infinity" => Ok(f64::INFINITY),
            V::S(s) => Err(serde::de::Error::custom(format!("expected a number or \"inf\", got {s:?}"))),
        }
    }
}

impl Default for OutputOptions {
    fn default() -> Self {
        Self {
            percentile_metrics: vec![Metric::Ttft, Metric::Tpot, Metric::Itl],
            metric_percentiles: vec![99.0],
            goodput: Vec::new(),
            save_result: false,
            save_detailed: false,
            append_result: false,
            result_dir: None,
            result_filename: None,
            metadata: Vec::new(),
            label: None,
            disable_progress: false,
            slice_seconds: None,
            server_metrics: false,
            scrape: Vec::new(),
            scrape_interval_s: DEFAULT_SCRAPE_INTERVAL_S,
            plot_timeline: None,
            plot_dataset_stats: false,
        }
    }
}

impl Default for Traffic {
    fn default() -> Self {
        Self {
            num_prompts: 1000,
            request_rate: f64::INFINITY,
            burstiness: 1.0,
            max_concurrency: None,
            ramp_up: None,
            seed: 0,
            num_warmups: 0,
            ready_check_timeout_s: 0.0,
            probe_request_rate: None,
            stop: StopRules::default(),
        }
    }
}

impl RunConfig {
    /// A config for tests and programmatic use: the given URL and model, vLLM's defaults elsewhere.
    pub fn for_target(base_url: &str, model: &str) -> Self {
        let backend = Backend::Vllm;
        let base_url = base_url.trim_end_matches('/').to_string();
        let endpoint = backend.default_endpoint().to_string();
        RunConfig {
            target: Target {
                backend,
                api_url: format!("{base_url}{endpoint}"),
                base_url,
                endpoint,
                headers: Vec::new(),
                model_id: model.to_string(),
                model_name: model.to_string(),
                tokenizer: None,
                sim: None,
                gpus: None,
                gpu_hour_cost: None,
                request_timeout_s: 6.0 * 3600.0,
                request_id_prefix: "bench-servebench-".to_string(),
                insecure: false,
                lora: None,
                profile: false,
            },
            workload: WorkloadSpec::default(),
            traffic: Traffic::default(),
            extra_body: serde_json::Map::new(),
            chat_template_kwargs: None,
            ignore_eos: true,
            logprobs: None,
            output: OutputOptions::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_round_trips_through_json_with_inf_rate_and_redacted_headers() {
        let mut c = RunConfig::for_target("http://127.0.0.1:8000/", "m");
        c.target.headers.push(("Authorization".into(), "Bearer secret".into()));
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["traffic"]["request_rate"], "inf");
        assert_eq!(json["target"]["headers"][0][1], "***");
        assert_eq!(json["target"]["api_url"], "http://127.0.0.1:8000/v1/completions");
        assert_eq!(json["workload"]["dataset"], "random");
        let back: RunConfig = serde_json::from_value(json).unwrap();
        assert!(back.traffic.request_rate.is_infinite());
        assert_eq!(back.target.headers[0].1, "***");
    }

    #[test]
    fn configs_saved_before_insecure_and_profile_existed_still_load() {
        let mut c = RunConfig::for_target("https://gpu:8443", "m");
        c.target.insecure = true;
        c.target.profile = true;
        let mut json = serde_json::to_value(&c).unwrap();
        assert_eq!(
            (json["target"]["insecure"].as_bool(), json["target"]["profile"].as_bool()),
            (Some(true), Some(true))
        );
        let target = json["target"].as_object_mut().unwrap();
        target.remove("insecure");
        target.remove("profile");
        let old: RunConfig = serde_json::from_value(json).unwrap();
        assert!(!old.target.insecure && !old.target.profile);
    }

    #[test]
    fn a_custom_workload_saved_before_custom_image_reads_as_text_only() {
        let spec = |images| WorkloadSpec::Custom {
            path: "rows.jsonl".into(),
            output_len: 256,
            skip_chat_template: images,
            shuffle: true,
            oversample: true,
            images,
        };
        let plain = serde_json::to_value(spec(false)).unwrap();
        assert!(plain.get("images").is_none(), "{plain}");
        assert_eq!(serde_json::from_value::<WorkloadSpec>(plain).unwrap(), spec(false));
        let with = serde_json::to_value(spec(true)).unwrap();
        assert_eq!(with["images"], true);
        assert_eq!(serde_json::from_value::<WorkloadSpec>(with).unwrap().dataset_name(), "custom_image");
    }
}
