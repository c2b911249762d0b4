//! Runs a benchmark: executes a [`Plan`] for a [`RunConfig`] and returns the [`RunResult`].
//!
//! The sequence is that of vLLM's `benchmark` (`vllm/benchmarks/serve.py`): the optional ready
//! check (request 0 retried until it succeeds), `num_warmups` copies of request 0, then the
//! timed run: every request released at its planned time, at most `max_concurrency` in flight,
//! and the duration measured from just before the first dispatch to the end of the last
//! request. The lines vLLM prints along the way are handed to a log callback. Everything a request needs (body, `x-request-id`) is built
//! before the clock starts.
//!
//! A multi-turn plan runs its conversations instead (see `conversation.rs`): the ready check
//! and the warm-up send the first conversation's first turn, and each turn is one record. The
//! tokens of a run (output tokens, each turn's prompt tokens and prefix share) are counted
//! after it by the caller, with `servebench_workload::account`.
//!
//! While the timed run goes, a monitor (`monitor.rs`) watches the client itself; what it saw
//! is the result's `client`, the ground of the health verdict; with `--server-metrics` or
//! `--scrape` a scraper (`scrape.rs`) records the server's telemetry beside it.
//!
//! Runs on a multi-thread tokio runtime. A cancellation future (Ctrl-C) stops the run early:
//! see [`run`].

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::HeaderValue;
use servebench_core::config::{RunConfig, WorkloadSpec};
use servebench_core::plan::{Plan, TokenCounting};
use servebench_core::record::{RunResult, TokenSource};
use servebench_core::telemetry::SpecDecodeWindow;
use servebench_core::vllm::render_traffic;
use servebench_workload::BodyBuilder;

use crate::conversation::ConversationSet;
use crate::dispatch::{
    BatchOutcome, CancelSignal, INTERRUPTED_BEFORE_START, Job, run_batch, run_conversations, unsent_record,
};
use crate::http::{HttpClient, HttpError, request_headers};
use crate::monitor::Monitor;
use crate::probe::Probes;
use crate::progress::{Progress, progress_bar, spawn_ticker};
use crate::scrape::{ScrapeSpec, Scraper, spec_decode_counters};
use crate::stop;
use crate::stream::StreamContext;
use crate::warmup::{ReadyCheck, ready_check, warm_up};

/// Receives the progress lines a run prints (vLLM's wording).
pub type Logger = Arc<dyn Fn(&str) + Send + Sync>;

/// How a run is carried out, beyond what its config says.
#[derive(Clone)]
pub struct RunOptions {
    /// After an interruption, how long requests in flight may still finish normally.
    pub grace: Duration,
    /// Receives vLLM's progress lines ("Starting main benchmark run...", ...).
    pub log: Logger,
    /// Sent as `Authorization: Bearer …`; defaults to `$OPENAI_API_KEY`.
    pub api_key: Option<String>,
    /// Pause between ready-check attempts (vLLM: 5 s, or what is left of the timeout).
    pub ready_retry_interval: Duration,
    /// Show the progress bar (it is also hidden when stderr is not a terminal or the config
    /// disables it).
    pub progress: bool,
    /// Begin the timed run at this wall-clock instant (a start shared with other workers of a
    /// sharded run), after the ready check and the warm-up; at once when it has passed.
    pub start_at: Option<SystemTime>,
    /// Read the server's speculative-decoding counters from its `/metrics` before and after the
    /// timed run, as `vllm bench serve` does (two GETs outside the run's own connections).
    pub spec_decode_counters: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(5),
            log: Arc::new(|_| {}),
            api_key: crate::http::env_api_key(),
            ready_retry_interval: Duration::from_secs(5),
            progress: true,
            start_at: None,
            spec_decode_counters: true,
        }
    }
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("grace", &self.grace)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("ready_retry_interval", &self.ready_retry_interval)
            .field("progress", &self.progress)
            .field("start_at", &self.start_at)
            .field("spec_decode_counters", &self.spec_decode_counters)
            .finish_non_exhaustive()
    }
}

/// Why a run could not be carried out (failed requests are not errors: they are in the result).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error(
        "the plan has both single requests and multi-turn conversations; the load engine runs one kind per run; run them as two plans"
    )]
    MixedPlan,
    #[error(
        "--request-id-prefix {prefix:?} cannot be sent in an HTTP header: {reason}; use visible ASCII characters only"
    )]
    InvalidRequestId { prefix: String, reason: String },
    #[error("Initial test run failed - Please make sure benchmark arguments are correctly specified. Error: {0}")]
    ReadyCheckFailed(String),
}

/// Runs `plan` against the target of `config`: its single requests, or its multi-turn
/// conversations (a plan with both is refused). Tokens are counted afterwards, by
/// `servebench_workload::account`.
///
/// When `cancel` completes, nothing more is sent; requests in flight get `options.grace` to
/// finish, then are recorded as interrupted; requests never sent are counted in `not_sent`;
/// the result has `interrupted` set and is still returned.
pub async fn run<F>(config: &RunConfig, plan: &Plan, options: RunOptions, cancel: F) -> Result<RunResult, RunError>
where
    F: Future<Output = ()>,
{
    if !plan.conversations.is_empty() && !plan.requests.is_empty() {
        return Err(RunError::MixedPlan);
    }
    let target = &config.target;
    let traffic = &config.traffic;
    let pool = traffic.max_concurrency.unwrap_or(plan.len()).max(1);
    let headers = request_headers(&target.headers, options.api_key.clone());
    let client = HttpClient::new(&target.api_url, &headers, pool, target.insecure)?;
    let progress = Arc::new(Progress::default());
    let ctx = StreamContext {
        target: client.target(&target.api_url)?,
        client,
        api: plan.api,
        timeout: Duration::try_from_secs_f64(target.request_timeout_s).ok().filter(|t| !t.is_zero()),
        progress: Arc::clone(&progress),
    };
    let work = Work::prepare(config, plan)?;
    let log = &options.log;
    let mut cancel = CancelSignal::new(cancel);

    if let Some(first) = work.probe().map(|job| base_model_probe(job, config)) {
        let check =
            ReadyCheck { timeout_s: traffic.ready_check_timeout_s, retry_interval: options.ready_retry_interval };
        if !ready_check(&ctx, &first, &check, log, &mut cancel).await? {
            return Ok(result(config, plan, &options, work.interrupted_before(), None, None));
        }
        if !warm_up(&ctx, &first, traffic.num_warmups, traffic.max_concurrency, options.grace, log, &mut cancel).await {
            return Ok(result(config, plan, &options, work.interrupted_before(), None, None));
        }
    }
    if let Some(at) = options.start_at
        && !wait_until(at, log, &mut cancel).await
    {
        return Ok(result(config, plan, &options, work.interrupted_before(), None, None));
    }
    log("Starting main benchmark run...");
    for line in render_traffic(traffic).lines() {
        log(line);
    }

    let spec_counters = async || match options.spec_decode_counters {
        true => spec_decode_counters(&target.base_url, &target.headers, options.api_key.clone(), target.insecure).await,
        false => None,
    };
    let spec_before = spec_counters().await;
    let show = options.progress && !config.output.disable_progress;
    let bar = progress_bar(plan.len() as u64, show);
    let ticker = spawn_ticker(bar.clone(), Arc::clone(&progress), Duration::from_millis(125));
    let began = SystemTime::now();
    let t0 = Instant::now();
    let monitor = Monitor::start(t0);
    let urls = config.scrape_urls();
    let scraper = Scraper::start(
        t0,
        &ScrapeSpec {
            urls: &urls,
            interval: Duration::try_from_secs_f64(config.output.scrape_interval_s).unwrap_or(Duration::from_secs(1)),
            headers: &target.headers,
            api_key: options.api_key.clone(),
            insecure: target.insecure,
        },
    );
    let probes = match traffic.probe_request_rate {
        Some(rate) => {
            let client = HttpClient::new(&target.api_url, &headers, 1, target.insecure)?;
            Some(Probes::start(&ctx, client, BodyBuilder::new(config).probe(), rate, t0))
        }
        None => None,
    };
    // The timed run stops on the caller's signal or when a stop rule holds.
    let mut stopped_by = None;
    let mut stop = CancelSignal::new(async {
        tokio::select! {
            () = cancel.fired() => {}
            why = stop::watch(Arc::clone(&progress), traffic.stop) => stopped_by = Some(why),
        }
    });
    let outcome = match work {
        Work::Requests(jobs) => run_batch(&ctx, jobs.into(), traffic.max_concurrency, options.grace, &mut stop).await,
        Work::Conversations(set) => {
            run_conversations(&ctx, set, traffic.max_concurrency, options.grace, &mut stop).await
        }
    };
    drop(stop);
    if let Some(why) = &stopped_by {
        log(&format!("Stopping the run: {why}."));
    }
    let probes = match probes {
        Some(p) => p.finish(options.grace).await,
        None => Vec::new(),
    };
    let observed = monitor.finish().await;
    let telemetry = match scraper {
        Some(s) => s.finish().await,
        None => None,
    };
    let spec_decode = spec_counters().await.map(|after| SpecDecodeWindow { before: spec_before, after });
    ticker.abort();
    bar.set_position(Progress::get(&progress.completed));
    bar.finish();
    Ok(RunResult {
        client: observed,
        telemetry,
        spec_decode,
        probes,
        ..result(config, plan, &options, outcome, Some(began), stopped_by)
    })
}

/// Waits for the wall-clock instant `at`: on the timer until 2 ms before it (the timer's
/// granularity is 1 ms), then yielding until it is reached. `false` when cancelled first.
async fn wait_until<F: Future<Output = ()>>(at: SystemTime, log: &Logger, cancel: &mut CancelSignal<F>) -> bool {
    let left = match at.duration_since(SystemTime::now()) {
        Ok(left) => left,
        Err(late) => {
            log(&format!(
                "WARNING: the common start passed {:.3} s ago; starting now (merging moves this worker's times by its lateness).",
                late.duration().as_secs_f64()
            ));
            return true;
        }
    };
    log(&format!("Waiting {:.3} s for the common start...", left.as_secs_f64()));
    tokio::select! {
        () = tokio::time::sleep(left.saturating_sub(Duration::from_millis(2))) => {}
        () = cancel.fired() => return false,
    }
    while SystemTime::now() < at {
        tokio::task::yield_now().await;
    }
    true
}

/// What the timed run will send, prepared before the clock starts.
enum Work {
    Requests(Vec<Job>),
    Conversations(Arc<ConversationSet>),
}

impl Work {
    fn prepare(config: &RunConfig, plan: &Plan) -> Result<Self, RunError> {
        let prefix = &config.target.request_id_prefix;
        if plan.conversations.is_empty() {
            return Ok(Work::Requests(jobs(plan, prefix)?));
        }
        // Checked once: every id is the prefix followed by digits.
        request_id(prefix, 0)?;
        let (think_s, max_active) = match &config.workload {
            WorkloadSpec::Sharegpt { multi_turn: Some(mt), .. } => (mt.think_time_s, mt.max_active_conversations),
            _ => (0.0, 0),
        };
        let builder = BodyBuilder::new(config);
        let set = ConversationSet::new(&plan.conversations, builder, think_s, max_active, |slot| {
            request_id(prefix, slot).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
        });
        Ok(Work::Conversations(Arc::new(set)))
    }

    /// What the ready check and the warm-up send: the first request, or the first turn of the
    /// first conversation.
    fn probe(&self) -> Option<Job> {
        match self {
            Work::Requests(jobs) => jobs.first().map(|j| Job { request_id: None, ..j.clone() }),
            Work::Conversations(set) => {
                let c = set.plans.iter().position(|c| !c.turns.is_empty())?;
                Some(Job {
                    index: 0,
                    at_ns: 0,
                    body: set.first_bodies[c].clone(),
                    max_tokens: set.plans[c].turns[0].max_tokens,
                    prompt_tokens: None,
                    request_id: None,
                })
            }
        }
    }

    /// The outcome of a run interrupted before the timed run began.
    fn interrupted_before(&self) -> BatchOutcome {
        let records = match self {
            Work::Requests(jobs) => jobs.iter().map(|job| unsent_record(job, INTERRUPTED_BEFORE_START)).collect(),
            Work::Conversations(set) => (0..set.len()).map(|slot| set.unsent(slot, INTERRUPTED_BEFORE_START)).collect(),
        };
        BatchOutcome::never_started(records)
    }
}

fn request_id(prefix: &str, index: usize) -> Result<HeaderValue, RunError> {
    HeaderValue::try_from(format!("{prefix}{index}"))
        .map_err(|e| RunError::InvalidRequestId { prefix: prefix.to_string(), reason: e.to_string() })
}

/// Every request of the plan with its `x-request-id`, built before the clock starts.
fn jobs(plan: &Plan, prefix: &str) -> Result<Vec<Job>, RunError> {
    let exact = plan.tokens_exact();
    plan.requests
        .iter()
        .map(|r| {
            let id = request_id(prefix, r.index as usize)?;
            Ok(Job {
                index: r.index,
                at_ns: r.at_ns,
                body: r.body.clone(),
                max_tokens: r.max_tokens,
                prompt_tokens: exact.then_some(r.prompt_tokens),
                request_id: Some(id),
            })
        })
        .collect()
}

/// With LoRA adapters, the ready check and the warm-up send request 0 to the base model, as
/// vLLM's test request does; the body is otherwise unchanged.
fn base_model_probe(mut job: Job, config: &RunConfig) -> Job {
    if config.target.lora.is_none() {
        return job;
    }
    if let Ok(mut body) = serde_json::from_slice::<serde_json::Value>(&job.body)
        && let Some(model) = body.get_mut("model")
    {
        *model = serde_json::Value::String(config.target.model_name.clone());
        job.body = servebench_core::pyjson::dumps(&body).into();
    }
    job
}

/// The run's result; `began` is the wall-clock instant the timed run began (`None` when it
/// never did).
fn result(
    config: &RunConfig,
    plan: &Plan,
    options: &RunOptions,
    outcome: BatchOutcome,
    began: Option<SystemTime>,
    stopped_by: Option<String>,
) -> RunResult {
    let now = jiff::Zoned::now();
    let started = match began.and_then(|t| jiff::Timestamp::try_from(t).ok()) {
        Some(t) => t.to_zoned(now.time_zone().clone()),
        None => now,
    };
    let mut notes = plan.notes.clone();
    if outcome.interrupted {
        let by = stopped_by.as_ref().map_or_else(String::new, |why| format!(" (stopped: {why})"));
        notes.push(format!(
            "interrupted{by}: {} requests never sent, in-flight requests had {:.1} s to finish",
            outcome.not_sent,
            options.grace.as_secs_f64()
        ));
    }
    RunResult {
        config: config.clone(),
        records: outcome.records,
        duration_s: outcome.duration.as_secs_f64(),
        date: started.strftime("%Y%m%d-%H%M%S").to_string(),
        started_at: started.strftime("%Y-%m-%dT%H:%M:%S%.6f%:z").to_string(),
        interrupted: outcome.interrupted,
        not_sent: outcome.not_sent,
        stopped_by: stopped_by.filter(|_| outcome.interrupted),
        notes,
        probes: Vec::new(),
        token_source: match plan.token_counting {
            TokenCounting::Tokenizer(_) => TokenSource::LocalTokenizer,
            TokenCounting::Estimate | TokenCounting::Server { .. } => TokenSource::ServerUsage,
        },
        client: None,
        shard: None,
        telemetry: None,
        spec_decode: None,
    }
}
