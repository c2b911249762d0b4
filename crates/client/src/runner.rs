//! Runs a benchmark: executes a [`Plan`] for a [`RunConfig`] and returns the [`RunResult`].
//!
//! The sequence is vLLM's (spec §4.2–4.5): the optional ready check (request 0 retried until it
//! succeeds), `num_warmups` copies of request 0, then the timed run: every request released at
//! its planned time, at most `max_concurrency` in flight, and the duration measured from just
//! before the first dispatch to the end of the last request. The lines vLLM prints along the
//! way are handed to a log callback. Everything a request needs (body, `x-request-id`) is built
//! before the clock starts.
//!
//! Runs on a multi-thread tokio runtime. A cancellation future (Ctrl-C) stops the run early:
//! see [`run`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use servebench_core::config::RunConfig;
use servebench_core::plan::Plan;
use servebench_core::record::{RunResult, TokenSource};
use servebench_core::vllm::render_traffic;

use crate::dispatch::{BatchOutcome, CancelSignal, Job, run_batch};
use crate::http::{HttpClient, HttpError, request_headers};
use crate::progress::{Progress, progress_bar, spawn_ticker};
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
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(5),
            log: Arc::new(|_| {}),
            api_key: std::env::var("OPENAI_API_KEY").ok(),
            ready_retry_interval: Duration::from_secs(5),
            progress: true,
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
            .finish_non_exhaustive()
    }
}

/// Why a run could not be carried out (failed requests are not errors: they are in the result).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("multi-turn conversations are not supported by the load engine yet; use a single-turn workload")]
    ConversationsUnsupported,
    #[error("--request-id-prefix {prefix:?} cannot be sent in an HTTP header: {reason}")]
    InvalidRequestId { prefix: String, reason: String },
    #[error("Initial test run failed - Please make sure benchmark arguments are correctly specified. Error: {0}")]
    ReadyCheckFailed(String),
}

/// Runs `plan` against the target of `config`.
///
/// When `cancel` completes, nothing more is sent; requests in flight get `options.grace` to
/// finish, then are recorded as interrupted; requests never sent are counted in `not_sent`;
/// the result has `interrupted` set and is still returned.
pub async fn run<F>(config: &RunConfig, plan: &Plan, options: RunOptions, cancel: F) -> Result<RunResult, RunError>
where
    F: Future<Output = ()>,
{
    if !plan.conversations.is_empty() {
        return Err(RunError::ConversationsUnsupported);
    }
    let target = &config.target;
    let traffic = &config.traffic;
    let pool = traffic.max_concurrency.unwrap_or(plan.requests.len()).max(1);
    let headers = request_headers(&target.headers, options.api_key.clone());
    let client = HttpClient::new(&target.api_url, &headers, pool)?;
    let progress = Arc::new(Progress::default());
    let ctx = StreamContext {
        target: client.target(&target.api_url)?,
        client,
        api: plan.api,
        timeout: Duration::try_from_secs_f64(target.request_timeout_s).ok().filter(|t| !t.is_zero()),
        progress: Arc::clone(&progress),
    };
    let jobs = jobs(plan, &target.request_id_prefix)?;
    let log = &options.log;
    let mut cancel = CancelSignal::new(cancel);

    if let Some(first) = jobs.first() {
        let probe = Job { request_id: None, ..first.clone() };
        let check =
            ReadyCheck { timeout_s: traffic.ready_check_timeout_s, retry_interval: options.ready_retry_interval };
        if !ready_check(&ctx, &probe, &check, log, &mut cancel).await? {
            return Ok(result(config, plan, &options, interrupted_before(&jobs)));
        }
        if !warm_up(&ctx, &probe, traffic.num_warmups, traffic.max_concurrency, options.grace, log, &mut cancel).await {
            return Ok(result(config, plan, &options, interrupted_before(&jobs)));
        }
    }
    log("Starting main benchmark run...");
    for line in render_traffic(traffic).lines() {
        log(line);
    }

    let show = options.progress && !config.output.disable_progress;
    let bar = progress_bar(jobs.len() as u64, show);
    let ticker = spawn_ticker(bar.clone(), Arc::clone(&progress), Duration::from_millis(125));
    let outcome = run_batch(&ctx, jobs.into(), traffic.max_concurrency, options.grace, &mut cancel).await;
    ticker.abort();
    bar.set_position(Progress::get(&progress.completed));
    bar.finish();
    Ok(result(config, plan, &options, outcome))
}

/// Every request of the plan with its `x-request-id`, built before the clock starts.
fn jobs(plan: &Plan, prefix: &str) -> Result<Vec<Job>, RunError> {
    let exact = plan.tokens_exact();
    plan.requests
        .iter()
        .map(|r| {
            let id = HeaderValue::try_from(format!("{prefix}{}", r.index))
                .map_err(|e| RunError::InvalidRequestId { prefix: prefix.to_string(), reason: e.to_string() })?;
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

fn interrupted_before(jobs: &[Job]) -> BatchOutcome {
    let records = jobs
        .iter()
        .map(|job| servebench_core::record::RequestRecord {
            index: job.index,
            planned_ns: job.at_ns,
            max_tokens: job.max_tokens,
            prompt_tokens_client: job.prompt_tokens,
            failure: Some(servebench_core::record::Failure {
                kind: servebench_core::record::FailureKind::NotSent,
                message: "not sent: the run was interrupted before the timed run began".to_string(),
            }),
            ..Default::default()
        })
        .collect();
    BatchOutcome { records, not_sent: jobs.len(), interrupted: true, duration: Duration::ZERO }
}

fn result(config: &RunConfig, plan: &Plan, options: &RunOptions, outcome: BatchOutcome) -> RunResult {
    let now = jiff::Zoned::now();
    let started = now.checked_sub(jiff::SignedDuration::try_from(outcome.duration).unwrap_or_default()).unwrap_or(now);
    let mut notes = plan.notes.clone();
    if outcome.interrupted {
        notes.push(format!(
            "interrupted: {} requests never sent, in-flight requests had {:.1} s to finish",
            outcome.not_sent,
            options.grace.as_secs_f64()
        ));
    }
    RunResult {
        config: config.clone(),
        records: outcome.records,
        duration_s: outcome.duration.as_secs_f64(),
        date: started.strftime("%Y%m%d-%H%M%S").to_string(),
        started_at: started.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string(),
        interrupted: outcome.interrupted,
        not_sent: outcome.not_sent,
        notes,
        token_source: if plan.tokens_exact() { TokenSource::LocalTokenizer } else { TokenSource::ServerUsage },
    }
}
