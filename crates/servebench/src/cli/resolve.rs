//! Resolves parsed flags into the validated [`RunConfig`] ("high args"), once.
//!
//! Every rule vLLM applies to its flags is applied here (ramp-up needs an infinite
//! `--request-rate`, goodput keys, `--dataset-path` with random, ignore_eos forced for random)
//! with errors that say what to change. Nothing here touches the network or the disk: the
//! model a server serves, the simulator's deployment and the tokenizer are looked up after,
//! by `commands::resolve`, which makes the [`RunConfig`] of a run with [`run_config`].

use servebench_core::config::{
    Backend, Lora, LoraAssignment, Metric, OutputOptions, RampStrategy, RampUp, RunConfig, SimTarget, Slo, StopRules,
    Target, Traffic, WorkloadSpec,
};
use servebench_core::threshold;

use super::bench_args::{
    ContentArgs, DatasetArgs, EndpointArgs, ReportArgs, RequestArgs, RunExtraArgs, SimTargetArgs, TrafficArgs,
};
use super::sim_model::SimModelArgs;

/// A flag value that cannot be used, with what to do about it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ResolveError(pub String);

/// Greater than zero (and so not NaN).
fn is_positive(x: f64) -> bool {
    x > 0.0
}

fn err<T>(msg: impl Into<String>) -> Result<T, ResolveError> {
    Err(ResolveError(msg.into()))
}

/// The version header Anthropic's Messages API asks for, sent unless `--header` gives one.
const ANTHROPIC_VERSION: (&str, &str) = ("anthropic-version", "2023-06-01");

/// vLLM's other backends (its current ones and those of earlier releases), refused by name with
/// what to run instead: most of those engines serve the OpenAI API today.
const OTHER_VLLM_BACKENDS: &[(&str, &str)] = &[
    ("openai-audio", "audio transcription benchmarks are not supported yet"),
    (
        "tgi",
        "TGI serves OpenAI's chat API (its Messages API, /v1/chat/completions): run with --backend openai-chat; \
         its own /generate_stream is not supported",
    ),
    (
        "tensorrt-llm",
        "trtllm-serve serves the OpenAI API: run with --backend openai or openai-chat; Triton's generate_stream \
         endpoint is not supported",
    ),
    (
        "deepspeed-mii",
        "run DeepSpeed-MII's OpenAI-compatible server and --backend openai; its /mii endpoint, which does not \
         stream, is not supported",
    ),
    (
        "lmdeploy",
        "LMDeploy's api_server is OpenAI-compatible (vLLM's client sent it completions): use --backend openai",
    ),
    ("scalellm", "ScaleLLM's server is OpenAI-compatible (vLLM's client sent it completions): use --backend openai"),
];

pub fn parse_backend(s: &str) -> Result<Backend, ResolveError> {
    if let Some(b) = Backend::from_name(s) {
        return Ok(b);
    }
    let known: Vec<&str> = Backend::ALL.iter().map(|(_, n)| *n).collect();
    if let Some((_, hint)) = OTHER_VLLM_BACKENDS.iter().find(|(name, _)| *name == s) {
        return err(format!("the vLLM backend {s:?} is not supported by servebench: {hint}"));
    }
    err(format!("unknown --backend {s:?}; expected one of: {}", known.join(", ")))
}

/// `host:port`, with IPv6 hosts in brackets (vLLM's `join_host_port`).
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// Splits `KEY=VALUE` items on the first `=`, trimming both sides.
pub fn parse_kv_list(items: &[String], flag: &str) -> Result<Vec<(String, String)>, ResolveError> {
    items
        .iter()
        .map(|item| match item.split_once('=') {
            Some((k, v)) => Ok((k.trim().to_string(), v.trim().to_string())),
            None => err(format!("invalid {flag} {item:?}: use KEY=VALUE")),
        })
        .collect()
}

pub fn parse_goodput(items: &[String]) -> Result<Vec<Slo>, ResolveError> {
    items.iter().map(|item| threshold::parse_goodput(item).map_err(|e| ResolveError(e.to_string()))).collect()
}

pub fn parse_percentile_metrics(s: Option<&str>) -> Result<Vec<Metric>, ResolveError> {
    let s = s.unwrap_or("ttft,tpot,itl");
    s.split(',')
        .map(|k| {
            Metric::from_key(k).ok_or_else(|| {
                let known: Vec<&str> = Metric::ALL.iter().map(|m| m.key()).collect();
                ResolveError(format!("unknown --percentile-metrics entry {k:?}; allowed: {}", known.join(", ")))
            })
        })
        .collect()
}

pub fn parse_metric_percentiles(s: &str) -> Result<Vec<f64>, ResolveError> {
    s.split(',')
        .map(|p| match p.trim().parse::<f64>() {
            Ok(v) if (0.0..=100.0).contains(&v) => Ok(v),
            _ => err(format!("invalid --metric-percentiles entry {p:?}: use numbers from 0 to 100, e.g. 50,90,99")),
        })
        .collect()
}

/// The most warm-up requests a run sends (each is a copy of request 0 held in memory).
pub const MAX_WARMUPS: usize = 1_000_000;

/// The most requests one run plans. Each is held in memory from its plan to its saved result,
/// about 1 KB even at one token in and out (a million such requests predicted in 1.0 GB), so
/// more would exhaust a machine's memory hours into a run instead of failing before it.
pub const MAX_PROMPTS: usize = 10_000_000;

pub fn parse_traffic(t: &TrafficArgs) -> Result<Traffic, ResolveError> {
    if !is_positive(t.burstiness) {
        return err(format!("--burstiness must be greater than 0, got {}", t.burstiness));
    }
    if !is_positive(t.request_rate) {
        return err(format!("--request-rate must be greater than 0 (or inf), got {}", t.request_rate));
    }
    let max_concurrency = match t.max_concurrency {
        Some(c) if c <= 0 => return err("--max-concurrency must be greater than 0"),
        Some(c) => Some(usize::try_from(c).unwrap_or(usize::MAX)),
        None => None,
    };
    if t.num_prompts == 0 {
        return err("--num-prompts must be at least 1");
    }
    if t.num_prompts > MAX_PROMPTS {
        return err(format!(
            "--num-prompts {} is more than the {MAX_PROMPTS} one run holds in memory (about 1 KB a request); \
             split it into runs (a sweep over seeds) or lower it",
            t.num_prompts
        ));
    }
    if t.num_warmups > MAX_WARMUPS {
        return err(format!(
            "--num-warmups {} is more than {MAX_WARMUPS}: warm-ups only fill the server's caches and graphs; a few are enough",
            t.num_warmups
        ));
    }
    let ramp_up = match t.ramp_up_strategy.as_deref() {
        None => {
            if t.ramp_up_start_rps.is_some() || t.ramp_up_end_rps.is_some() {
                return err("--ramp-up-start-rps/--ramp-up-end-rps need --ramp-up-strategy linear or exponential");
            }
            None
        }
        Some(s) => {
            let strategy = match s {
                "linear" => RampStrategy::Linear,
                "exponential" => RampStrategy::Exponential,
                _ => {
                    return err(format!("invalid --ramp-up-strategy {s:?}: use linear or exponential"));
                }
            };
            if t.request_rate.is_finite() {
                return err(
                    "when using ramp-up, do not specify --request-rate: the rate is controlled by the ramp-up parameters",
                );
            }
            let (Some(start), Some(end)) = (t.ramp_up_start_rps, t.ramp_up_end_rps) else {
                return err(
                    "when using --ramp-up-strategy, both --ramp-up-start-rps and --ramp-up-end-rps must be given",
                );
            };
            if start < 0 || end < 0 {
                return err("ramp-up start and end RPS must be non-negative");
            }
            if start > end {
                return err("ramp-up start RPS must be less than end RPS");
            }
            if strategy == RampStrategy::Exponential && start == 0 {
                return err("for exponential ramp-up, the start RPS cannot be 0");
            }
            Some(RampUp { strategy, start_rps: start as f64, end_rps: end as f64 })
        }
    };
    Ok(Traffic {
        num_prompts: t.num_prompts,
        request_rate: t.request_rate,
        burstiness: t.burstiness,
        max_concurrency,
        ramp_up,
        seed: t.seed,
        num_warmups: t.num_warmups,
        ready_check_timeout_s: t.ready_check_timeout_sec as f64,
        probe_request_rate: match t.probe_request_rate {
            0.0 => None,
            r if is_positive(r) && r.is_finite() => Some(r),
            r => return err(format!("--probe-request-rate must be a number of probes a second above 0, got {r}")),
        },
        stop: StopRules::default(),
    })
}

/// Why a prediction (`sim predict`, `sweep --predict`) takes no stop rules.
pub const STOP_RULES_NOT_PREDICTED: &str = "a prediction runs its whole plan in virtual time, and the stop rules \
     stop a run against a server (`bench serve`, `bench serve --sim MODEL@HARDWARE` for the simulator served on a \
     port, or a sweep without --predict)";

/// `--max-failures` and `--stall-timeout`: at least one failure, a finite time above 0.
pub fn parse_stop(e: &RunExtraArgs) -> Result<StopRules, ResolveError> {
    if e.max_failures == Some(0) {
        return err("--max-failures must be at least 1 (leave it out to let every request fail)");
    }
    if let Some(s) = e.stall_timeout.filter(|s| !(is_positive(*s) && s.is_finite())) {
        return err(format!("--stall-timeout must be a number of seconds above 0, got {s}"));
    }
    Ok(StopRules { max_failures: e.max_failures, stall_timeout_s: e.stall_timeout })
}

/// Sampling flags and `--extra-body` merged (extra body wins), as vLLM merges them; with
/// `sampling` false (a pooling backend, which samples nothing) the flags are checked and left
/// out, as vLLM leaves them out.
pub fn parse_extra_body(
    c: &ContentArgs,
    sampling: bool,
) -> Result<serde_json::Map<String, serde_json::Value>, ResolveError> {
    for (flag, v) in [
        ("--top-p", c.top_p),
        ("--min-p", c.min_p),
        ("--temperature", c.temperature),
        ("--frequency-penalty", c.frequency_penalty),
        ("--presence-penalty", c.presence_penalty),
        ("--repetition-penalty", c.repetition_penalty),
    ] {
        // JSON has no NaN or infinity: such a value would reach the server as null.
        if let Some(v) = v.filter(|v| !v.is_finite()) {
            return err(format!("{flag} must be a finite number, got {v}"));
        }
    }
    let mut m = serde_json::Map::new();
    let mut put = |k: &str, v: Option<serde_json::Value>| {
        if let Some(v) = v.filter(|_| sampling) {
            m.insert(k.to_string(), v);
        }
    };
    put("top_p", c.top_p.map(Into::into));
    put("top_k", c.top_k.map(Into::into));
    put("min_p", c.min_p.map(Into::into));
    put("temperature", c.temperature.map(Into::into));
    put("frequency_penalty", c.frequency_penalty.map(Into::into));
    put("presence_penalty", c.presence_penalty.map(Into::into));
    put("repetition_penalty", c.repetition_penalty.map(Into::into));
    if let Some(s) = &c.extra_body {
        m.extend(json_object("--extra-body", s, r#"'{"min_tokens": 10}'"#)?);
    }
    Ok(m)
}

/// `s` read as a JSON object, or an error that names `flag` and shows `example`.
fn json_object(flag: &str, s: &str, example: &str) -> Result<serde_json::Map<String, serde_json::Value>, ResolveError> {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Object(object)) => Ok(object),
        _ => err(format!("invalid {flag} {s:?}: it must be a JSON object, e.g. {example}")),
    }
}

pub fn parse_output(
    r: &ReportArgs,
    label: Option<String>,
    disable_progress: bool,
) -> Result<OutputOptions, ResolveError> {
    if !(r.scrape_interval.is_finite() && r.scrape_interval >= 0.1) {
        return err(format!("--scrape-interval {} is too short; give at least 0.1 seconds", r.scrape_interval));
    }
    if let Some(bad) = r.scrape.iter().find(|u| !(u.starts_with("http://") || u.starts_with("https://"))) {
        return err(format!("--scrape {bad:?} is not an address; give a URL such as http://gpu-node:9400/metrics"));
    }
    Ok(OutputOptions {
        percentile_metrics: parse_percentile_metrics(r.percentile_metrics.as_deref())?,
        metric_percentiles: parse_metric_percentiles(&r.metric_percentiles)?,
        goodput: parse_goodput(&r.goodput)?,
        save_result: r.save_result,
        save_detailed: r.save_detailed,
        append_result: r.append_result,
        result_dir: r.result_dir.clone(),
        result_filename: r.result_filename.clone(),
        metadata: parse_kv_list(&r.metadata, "--metadata")?,
        label,
        disable_progress,
        slice_seconds: r.slice_seconds.map(f64::from),
        server_metrics: r.server_metrics,
        scrape: r.scrape.clone(),
        scrape_interval_s: r.scrape_interval,
        plot_timeline: if r.plot_timeline { Some(parse_itl_thresholds(&r.timeline_itl_thresholds)?) } else { None },
        plot_dataset_stats: r.plot_dataset_stats,
    })
}

/// `--timeline-itl-thresholds LOW,HIGH`: two numbers of ms, neither negative, the first not
/// above the second.
pub fn parse_itl_thresholds(s: &str) -> Result<[f64; 2], ResolveError> {
    let bad = || {
        err(format!(
            "--timeline-itl-thresholds {s:?} is not two thresholds; give two numbers of milliseconds, the lower \
             first, e.g. 25,50"
        ))
    };
    let values: Vec<f64> = match s.split(',').map(|v| v.trim().parse::<f64>()).collect() {
        Ok(v) => v,
        Err(_) => return bad(),
    };
    match values[..] {
        [low, high] if low.is_finite() && high.is_finite() && 0.0 <= low && low <= high => Ok([low, high]),
        _ => bad(),
    }
}

/// Parses `--sim MODEL@HARDWARE` and its options.
pub fn parse_sim_target(s: &SimTargetArgs) -> Result<Option<SimTarget>, ResolveError> {
    let Some(spec) = &s.sim else {
        if !s.sim_options.is_empty() || s.sim_profile.is_some() {
            return err("--sim-option and --sim-profile need --sim MODEL@HARDWARE");
        }
        return Ok(None);
    };
    let Some((model, hardware)) = spec.rsplit_once('@') else {
        return err(format!("invalid --sim {spec:?}: use MODEL@HARDWARE, e.g. Qwen/Qwen3-8B@h100-sxm"));
    };
    if model.is_empty() || hardware.is_empty() {
        return err(format!("invalid --sim {spec:?}: use MODEL@HARDWARE, e.g. Qwen/Qwen3-8B@h100-sxm"));
    }
    Ok(Some(SimTarget {
        model: model.to_string(),
        hardware: hardware.to_string(),
        options: parse_kv_list(&s.sim_options, "--sim-option")?,
        profile: s.sim_profile.clone(),
    }))
}

/// Where the endpoint is: `(base_url, endpoint, api_url)` as vLLM computes them.
pub fn endpoint_urls(e: &EndpointArgs, backend: Backend) -> (String, String, String) {
    let endpoint = e.request.endpoint.clone().unwrap_or_else(|| backend.default_endpoint().to_string());
    let base = match &e.base_url {
        Some(b) => b.clone(),
        None => format!("http://{}", join_host_port(&e.host, e.port)),
    };
    let api_url = format!("{base}{endpoint}");
    (base.trim_end_matches('/').to_string(), endpoint, api_url)
}

/// Checks that the endpoint path fits the backend, as vLLM does.
fn check_endpoint(endpoint: &str, backend: Backend) -> Result<(), ResolveError> {
    if endpoint.ends_with(backend.api().route_end()) {
        Ok(())
    } else {
        err(format!(
            "--endpoint {endpoint:?} does not fit --backend {}: use {}",
            backend.name(),
            backend.default_endpoint()
        ))
    }
}

/// The flags of one run, whichever command gave them: `bench serve`, `sim predict`, a sweep
/// point.
pub struct RunFlags<'a> {
    /// Whether a simulator target runs in virtual time (`sim predict`, `sweep --predict`) or
    /// on a loopback port (`bench serve --sim`).
    pub virtual_time: bool,
    pub sim: SimFlags<'a>,
    /// `None` for `sim predict`, which has no server to reach: no headers, no TLS, no
    /// adapters.
    pub endpoint: Option<&'a EndpointArgs>,
    pub request: &'a RequestArgs,
    pub traffic: &'a TrafficArgs,
    pub content: &'a ContentArgs,
    pub report: &'a ReportArgs,
    pub dataset: &'a DatasetArgs,
    pub extra: RunExtraArgs,
    /// `bench serve`'s sharding flags (`None` where a command has none).
    pub shard: Option<&'a super::shard_args::ShardArgs>,
    /// `--gpu-hour-cost`: what one GPU costs an hour.
    pub gpu_hour_cost: Option<f64>,
}

/// Where the flags say the simulator is.
pub enum SimFlags<'a> {
    /// `--sim MODEL@HARDWARE` (with `--sim-option`, `--sim-profile`), or none: a server.
    Target(&'a SimTargetArgs),
    /// `sim predict`'s deployment flags.
    Deployment(&'a SimModelArgs),
}

impl SimFlags<'_> {
    fn parse(&self, e: Option<&EndpointArgs>) -> Result<Option<SimTarget>, ResolveError> {
        match self {
            SimFlags::Target(s) => match parse_sim_target(s)? {
                Some(_) if e.is_some_and(|e| e.base_url.is_some()) => {
                    err("--sim starts the simulator on a loopback port and benchmarks it; leave out --base-url")
                }
                target => Ok(target),
            },
            SimFlags::Deployment(d) => Ok(Some(SimTarget {
                model: d.model_spec()?,
                hardware: d.hardware.clone(),
                options: d.option_pairs()?,
                profile: d.profile.clone(),
            })),
        }
    }
}

/// A simulator benchmarked with `random-rerank` scores as the flags say its model does: a
/// reranker (a cross-encoder) unless `--no-reranker` says it is an embedding model; a
/// `convert` option given wins.
fn scored_as_the_workload_says(mut target: SimTarget, workload: &WorkloadSpec) -> SimTarget {
    if let WorkloadSpec::RandomRerank { reranker, .. } = workload
        && !target.options.iter().any(|(k, _)| servebench_sim::canonical_option_key(k) == "convert")
    {
        let convert = if *reranker { "classify" } else { "embed" };
        target.options.push(("convert".into(), convert.into()));
    }
    target
}

/// `sim://MODEL@HARDWARE`: the address of a simulator that listens nowhere (in virtual time,
/// or before it is started on its loopback port).
pub fn sim_url(target: &SimTarget) -> String {
    format!("sim://{}@{}", target.model, target.hardware)
}

/// `--lora-modules` and `--lora-assignment`; the simulator serves no adapters.
fn parse_lora(e: &EndpointArgs, sim: bool) -> Result<Option<Lora>, ResolveError> {
    if e.lora_modules.is_empty() {
        return Ok(None);
    }
    if sim {
        return err(
            "the simulator serves no LoRA adapters, so requests naming them would fail; leave out --lora-modules \
             with --sim and sim predict",
        );
    }
    let assignment = match e.lora_assignment.as_str() {
        "round-robin" => LoraAssignment::RoundRobin,
        _ => LoraAssignment::Random,
    };
    Ok(Some(Lora { modules: e.lora_modules.clone(), assignment }))
}

/// The run config of `f`, every flag checked, but for the model it names: `model_id` and
/// `model_name` are left empty, since a server's model is looked up on the network, after
/// every flag is known to be good (`commands::resolve` names it). A simulator's address is
/// [`sim_url`] until it listens.
pub fn run_config(f: &RunFlags<'_>) -> Result<RunConfig, ResolveError> {
    let backend = parse_backend(&f.request.backend)?;
    let endpoint = f.request.endpoint.clone().unwrap_or_else(|| backend.default_endpoint().into());
    check_endpoint(&endpoint, backend)?;
    let sim = f.sim.parse(f.endpoint)?;
    let base_url = match (&sim, f.endpoint) {
        (Some(target), _) => sim_url(target),
        (None, Some(e)) => endpoint_urls(e, backend).0,
        (None, None) => return err("a server needs its address: --base-url, or --host and --port"),
    };
    if let (Some(target), Some(n)) = (&sim, e_gpus(f.endpoint)) {
        return err(format!(
            "--gpus {n}: the simulator counts its own GPUs from {}@{}'s tp, pp and dp; leave out --gpus",
            target.model, target.hardware
        ));
    }
    if let Some(spec) = sim.is_none().then(|| base_url.strip_prefix("sim://")).flatten() {
        return err(format!("--base-url takes a server's http:// or https:// URL; for the simulator use --sim {spec}"));
    }
    let gpu_hour_cost = check_gpu_hour_cost(f.gpu_hour_cost)?;
    if gpu_hour_cost.is_some() && sim.is_none() && e_gpus(f.endpoint).is_none() {
        return err("--gpu-hour-cost prices the GPUs serving the run: say how many with --gpus N");
    }
    if !is_positive(f.extra.request_timeout_sec) {
        return err("--request-timeout-sec must be greater than 0");
    }
    let workload = parse_workload(f.dataset, f.content)?;
    let sim = sim.map(|target| scored_as_the_workload_says(target, &workload));
    // A pooling backend samples nothing and generates nothing: no sampling flags in its
    // bodies, no ignore_eos forced, its latency the one percentile metric by default (vLLM's).
    let pooling = backend.api().pooling();
    let extra_body = parse_extra_body(f.content, !pooling)?;
    let chat_template_kwargs = (f.dataset.chat_template_kwargs.as_deref())
        .map(|s| json_object("--chat-template-kwargs", s, r#"'{"enable_thinking": false}'"#))
        .transpose()?;
    let ignore_eos = f.content.ignore_eos || (!pooling && matches!(workload, WorkloadSpec::Random { .. }));
    let stop = parse_stop(&f.extra)?;
    if f.virtual_time && !stop.is_empty() {
        return err(format!("--max-failures and --stall-timeout do not apply here: {STOP_RULES_NOT_PREDICTED}"));
    }
    let traffic = Traffic { stop, ..parse_traffic(f.traffic)? };
    let mut output = parse_output(f.report, f.request.label.clone(), f.traffic.disable_tqdm)?;
    if pooling && f.report.percentile_metrics.is_none() {
        output.percentile_metrics = vec![Metric::E2el];
    }
    let e = f.endpoint;
    let mut headers = e.map(|e| parse_kv_list(&e.header, "--header")).transpose()?.unwrap_or_default();
    for (name, value) in &headers {
        servebench_client::http::header(name, value).map_err(|e| ResolveError(e.to_string()))?;
    }
    if backend == Backend::AnthropicMessages
        && !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(ANTHROPIC_VERSION.0))
    {
        headers.push((ANTHROPIC_VERSION.0.to_string(), ANTHROPIC_VERSION.1.to_string()));
    }
    Ok(RunConfig {
        target: Target {
            backend,
            api_url: format!("{base_url}{endpoint}"),
            base_url,
            endpoint,
            headers,
            model_id: String::new(),
            model_name: String::new(),
            tokenizer: f.request.tokenizer.clone(),
            request_timeout_s: f.extra.request_timeout_sec,
            request_id_prefix: e.and_then(|e| e.request_id_prefix.clone()).unwrap_or_else(default_request_id_prefix),
            insecure: e.is_some_and(|e| e.insecure),
            lora: e.map(|e| parse_lora(e, sim.is_some())).transpose()?.flatten(),
            profile: e.is_some_and(|e| e.profile),
            gpus: e_gpus(e),
            gpu_hour_cost,
            sim,
        },
        workload,
        traffic,
        extra_body,
        chat_template_kwargs,
        ignore_eos,
        logprobs: f.content.logprobs,
        output,
    })
}

/// `--gpu-hour-cost`, where given: a price above 0 (`bench serve`, `sim predict`, `import`).
pub fn check_gpu_hour_cost(cost: Option<f64>) -> Result<Option<f64>, ResolveError> {
    match cost {
        Some(cost) if !servebench_core::metrics::is_gpu_hour_cost(cost) => {
            err(format!("--gpu-hour-cost {cost}: give what one GPU costs an hour, a number above 0"))
        }
        _ => Ok(cost),
    }
}

/// `--gpus`, where the command has it.
fn e_gpus(e: Option<&EndpointArgs>) -> Option<u32> {
    e.and_then(|e| e.gpus)
}

/// `bench-{8 hex digits}-`, different for every run (vLLM uses a random uuid).
fn default_request_id_prefix() -> String {
    format!("bench-{:08x}-", (nonce() >> 32) as u32)
}

/// A number that differs between runs: the clock's nanoseconds and the process id, mixed.
pub fn nonce() -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    (nanos as u64 ^ u64::from(std::process::id()).rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

mod media;
#[cfg(test)]
mod tests;
mod workload;
pub use workload::{parse_range_ratio, parse_workload};
