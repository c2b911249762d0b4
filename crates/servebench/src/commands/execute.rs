//! One run of a [`Resolved`] plan, whatever executes it: a server over HTTP, the simulator on a
//! loopback port, or the simulator in virtual time. The run's dates, its token accounting, the
//! environment it ran in, the server's profiler, the report and the saving happen here, once,
//! for `bench serve`, `sim predict` and every point of a sweep.
//!
//! With `--profile`, the server's profiler is started just before the run (vLLM's
//! `POST /start_profile`) and stopped after its report (`/stop_profile`), with vLLM's lines; a
//! server that refuses gets a warning, and the run goes on.
//!
//! A worker of a sharded run (`--shard`) sends its share of the plan, taken once the whole
//! plan is built and aligned (so every worker hashes the same plan), starts its timed run at
//! the common start (`--coordinator`, `--start-at`) and records its shard in its result.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use servebench_client::{Logger, RunOptions};
use servebench_core::config::RunConfig;
use servebench_core::plan::Plan;
use servebench_core::shard::WorkerShard;
use servebench_sim::SimSetup;
use servebench_sim::server::ServerOptions;

use super::env::{self, ServerBefore};
use super::finish::{Keep, PointOutcome, finish_and_keep, stamp_dates};
use super::resolve::{Executor, Resolved};
use super::shard;
use crate::output::Sink;

/// The plan of a run: read from `--replay-plan`, or built from its config.
pub fn plan(resolved: &Resolved) -> anyhow::Result<Plan> {
    match &resolved.replay_plan {
        Some(path) => servebench_workload::load_plan(Path::new(path))
            .with_context(|| format!("could not read the plan {path} (written by --dry-run)")),
        None => servebench_workload::build_plan(&resolved.config, resolved.tokenizer.as_deref())
            .context("could not build the requests"),
    }
}

/// Runs `plan` as `resolved` says, then reports it and keeps it as `keep` says. `cancel`
/// completing interrupts it (what was measured until then is still reported and kept). `None`
/// after a `--dry-run`, which sends nothing.
pub async fn execute(
    resolved: &Resolved,
    plan: Plan,
    keep: &Keep,
    cancel: impl Future<Output = ()>,
    out: &Sink,
) -> anyhow::Result<Option<PointOutcome>> {
    let mut config = resolved.config.clone();
    // A `--workers` worker benchmarks the simulator its parent started.
    let shared = resolved.shard.as_ref().and_then(|s| s.sim_url.as_deref());
    let server = match (&resolved.executor, shared) {
        (Executor::Loopback { .. }, Some(url)) => {
            listening_at(&mut config, url);
            None
        }
        _ => start_loopback(resolved, out).await?,
    };
    if let Some(server) = &server {
        listening_at(&mut config, server.base_url());
    }
    let outcome = run(resolved, config, plan, keep, cancel, out).await;
    if let Some(server) = server {
        server.shutdown().await;
    }
    outcome
}

/// The simulator a [`Executor::Loopback`] run benchmarks, started on a loopback port (`None`
/// for the other executors).
pub async fn start_loopback(
    resolved: &Resolved,
    out: &Sink,
) -> anyhow::Result<Option<servebench_sim::server::SimServer>> {
    let Executor::Loopback { setup, dialect, seed } = &resolved.executor else { return Ok(None) };
    let config = &resolved.config;
    let options = ServerOptions {
        served_model_name: Some(config.target.model_name.clone()),
        tokenizer: resolved.tokenizer.clone(),
        seed: *seed,
        dialect: *dialect,
        ..ServerOptions::default()
    };
    let server = servebench_sim::server::start((**setup).clone(), options).await?;
    out.line(format!("Simulating {} at {}", sim_name(config), server.base_url()))?;
    Ok(Some(server))
}

/// `MODEL@HARDWARE` of a simulator target.
fn sim_name(config: &RunConfig) -> String {
    config.target.sim.as_ref().map_or_else(String::new, |s| format!("{}@{}", s.model, s.hardware))
}

/// A replayed pooling plan's inputs are counted as its bodies group them (the plan file holds
/// bodies, not the `--random-batch-size` that built them): the config saved with the run takes
/// the batch size and prompt count that give that grouping. A plan no batch size explains is
/// counted as the flags group it, and says so.
fn replayed_grouping(config: &mut RunConfig, plan: &Plan, out: &Sink) -> anyhow::Result<()> {
    if !plan.api.pooling() {
        return Ok(());
    }
    match plan.input_batches().and_then(|(inputs, per)| config.workload.regroup(inputs, per)) {
        Some(n) => config.traffic.num_prompts = n,
        None => out.line(format!(
            "The plan's requests carry their inputs as no one batch size would (or several each, where \
             --dataset-name {} sends one): its inputs are counted as the flags group them",
            config.workload.dataset_name()
        ))?,
    }
    Ok(())
}

/// Points a config at the server now listening at `base_url`.
fn listening_at(config: &mut RunConfig, base_url: &str) {
    let t = &mut config.target;
    t.base_url = base_url.trim_end_matches('/').to_string();
    t.api_url = format!("{}{}", t.base_url, t.endpoint);
}

/// The run with its executor started: the plan's notes, the alignment of its prompts to the
/// server's tokenizer, the dry run, a worker's share of the plan, or the run itself.
async fn run(
    resolved: &Resolved,
    mut config: RunConfig,
    mut plan: Plan,
    keep: &Keep,
    cancel: impl Future<Output = ()>,
    out: &Sink,
) -> anyhow::Result<Option<PointOutcome>> {
    for note in &plan.notes {
        out.line(note)?;
    }
    let log = logger(out);
    let over_http = !matches!(resolved.executor, Executor::Virtual { .. });
    // vLLM's alignment of `random` and `prefix_repetition` prompts to the server's tokenizer
    // (`/tokenize`), before `--dry-run` writes the plan and before the clock starts; never for
    // `--replay-plan`, whose plan is sent exactly as written.
    if over_http && resolved.replay_plan.is_none() {
        let (tokenizer, key) = (resolved.tokenizer.as_deref(), servebench_client::env_api_key());
        servebench_client::align_prompts(&mut plan, &config, tokenizer, key, &log).await;
    }
    if resolved.replay_plan.is_some() {
        replayed_grouping(&mut config, &plan, out)?;
    }
    if let Some(path) = &resolved.dry_run {
        servebench_workload::save_plan(&plan, Path::new(path))
            .with_context(|| format!("could not write the plan to {path}"))?;
        out.line(format!("Wrote {} planned requests to {path}; nothing was sent.", plan.len()))?;
        return Ok(None);
    }
    // A store that cannot take the run is found before anything is measured.
    resolved.store.check()?;
    let worker = match &resolved.shard {
        Some(s) => Some(shard::take_share(s, &mut config, &mut plan, out)?),
        None => None,
    };
    match &resolved.executor {
        Executor::Virtual { .. } if worker.is_some() => {
            anyhow::bail!("--shard splits a measured run; a prediction in virtual time is not sharded")
        }
        Executor::Virtual { setup } => predict(resolved, &config, plan, setup, keep, out).await.map(Some),
        Executor::Http | Executor::Loopback { .. } => {
            measure(resolved, &config, plan, worker, keep, cancel, log, out).await
        }
    }
}

/// The load engine's progress lines, written to `out`.
fn logger(out: &Sink) -> Logger {
    let out = out.clone();
    Arc::new(move |line: &str| {
        let _ = out.line(line);
    })
}

/// The plan sent over HTTP and measured, with the server's environment and profiler around it;
/// a `worker`'s run starts at the common start and records its shard.
#[allow(clippy::too_many_arguments)]
async fn measure(
    resolved: &Resolved,
    config: &RunConfig,
    plan: Plan,
    mut worker: Option<WorkerShard>,
    keep: &Keep,
    cancel: impl Future<Output = ()>,
    log: Logger,
    out: &Sink,
) -> anyhow::Result<Option<PointOutcome>> {
    let in_flight = u64::try_from(config.traffic.max_concurrency.unwrap_or(plan.len())).unwrap_or(u64::MAX);
    let wanted_files = in_flight.saturating_mul(2).saturating_add(256);
    if let Err(e) = servebench_client::raise_nofile_limit(wanted_files) {
        out.line(format!("WARNING: could not raise the open-file limit ({e}); very high concurrency may fail."))?;
    }
    let target = &config.target;
    let before = ServerBefore::capture(&target.base_url, &target.headers, target.insecure).await;
    if target.profile {
        profiler(config, Profiler::Start, out).await?;
    }
    let measured: anyhow::Result<Option<PointOutcome>> = async {
        let start_at = match (&resolved.shard, worker.as_mut()) {
            (Some(s), Some(w)) => shard::common_start(s, w, out).await?,
            _ => None,
        };
        let started = jiff::Zoned::now();
        let options = RunOptions { log, start_at, ..RunOptions::default() };
        let mut result =
            servebench_client::run(config, &plan, options, cancel).await.context("the benchmark could not run")?;
        stamp_dates(&mut result, &started);
        servebench_workload::account(resolved.tokenizer.as_deref(), &plan, &mut result);
        let metrics_after = env::ask(&target.base_url, "/metrics", &target.headers, target.insecure).await;
        let env = before.into_env(metrics_after);
        match worker {
            Some(w) => {
                let keep = shard::keep(keep, &w);
                shard::stamp(&mut result, w);
                finish_and_keep(result, Some(env), None, &keep, &resolved.store, out).map(Some)
            }
            None => finish_and_keep(result, Some(env), None, keep, &resolved.store, out).map(Some),
        }
    }
    .await;
    // Stopped whatever happened to the run, so the server is not left profiling.
    if target.profile {
        profiler(config, Profiler::Stop, out).await?;
    }
    measured
}

/// The plan run through the simulated engine in virtual time, reported like a measured run
/// with the prediction band of its hardware.
async fn predict(
    resolved: &Resolved,
    config: &RunConfig,
    plan: Plan,
    setup: &Arc<SimSetup>,
    keep: &Keep,
    out: &Sink,
) -> anyhow::Result<PointOutcome> {
    for note in setup.all_notes() {
        out.line(format!("Simulated: {note}"))?;
    }
    let started = jiff::Zoned::now();
    let clock = Instant::now();
    let requests = plan.len();
    let (config, engine) = (config.clone(), setup.clone());
    let mut result = tokio::task::spawn_blocking(move || servebench_sim::predict(&plan, &config, &engine))
        .await
        .context("the prediction stopped")?;
    let took = clock.elapsed();
    stamp_dates(&mut result, &started);
    for note in result.notes.iter().skip(setup.all_notes().count()) {
        out.line(format!("Simulated: {note}"))?;
    }
    out.line(format!(
        "Predicted {requests} requests ({:.1} s of simulated serving) in {:.0} ms.",
        result.duration_s,
        took.as_secs_f64() * 1e3
    ))?;
    // The band as printed (the profile's or the device's, widened for another model) beside the
    // setup, for the report's charts.
    let band = setup.uncertainty();
    let env = serde_json::to_value(setup.as_ref())
        .ok()
        .map(|s| serde_json::json!({ "simulated": s, "prediction_band": band }));
    finish_and_keep(result, env, Some(&band), keep, &resolved.store, out)
}

/// A step of vLLM's `--profile`.
#[derive(Clone, Copy)]
enum Profiler {
    Start,
    Stop,
}

/// Starts or stops the server's profiler, printing vLLM's lines; a failure is a warning.
async fn profiler(config: &RunConfig, step: Profiler, out: &Sink) -> anyhow::Result<()> {
    let (path, doing, done, verb) = match step {
        Profiler::Start => ("/start_profile", "Starting profiler...", "Profiler started", "start"),
        Profiler::Stop => ("/stop_profile", "Stopping profiler...", "Profiler stopped", "stop"),
    };
    out.line(doing)?;
    let t = &config.target;
    // Stopping writes the traces, which can take minutes: the wait is the request timeout.
    let timeout = Duration::try_from_secs_f64(t.request_timeout_s).unwrap_or(Duration::from_secs(6 * 3600));
    let api_key = servebench_client::env_api_key();
    match servebench_client::post_empty(&t.base_url, path, &t.headers, api_key, t.insecure, timeout).await {
        Ok(()) => out.line(done)?,
        Err(e) => out.line(format!(
            "WARNING: could not {verb} the server's profiler ({e}); the run goes on. \
             vLLM serves {path} only when started with its profiler enabled."
        ))?,
    }
    Ok(())
}
