//! `servebench bench serve`: resolve the flags, plan every request, run the plan against the
//! server (or the in-process simulator), then report and save what was measured.
//!
//! [`run_point`] is one such run without argv, so `servebench sweep` runs each of its points
//! exactly as `bench serve` would, with its own labels and result file name.
//!
//! With `--profile`, the server's profiler is started just before the run (vLLM's
//! `POST /start_profile`) and stopped after its report (`/stop_profile`), with vLLM's lines; a
//! server that refuses gets a warning, and the run goes on.

use std::future::Future;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use servebench_client::{Logger, RunOptions};
use servebench_core::config::{RunConfig, SimTarget};
use servebench_core::plan::Plan;
use servebench_store::RunKind;
use servebench_workload::Tokenizer;

use crate::cli::BenchServeArgs;
use crate::cli::resolve::{ResolvedModel, endpoint_urls, parse_backend, parse_kv_list, parse_sim_target};
use crate::commands::env::{self, ServerBefore};
use crate::commands::finish::{Keep, PointOutcome, StoreChoice, finish_and_keep, stamp_dates};
use crate::output;

/// Exit code of a run stopped with Ctrl-C (after its partial result was saved).
pub const INTERRUPTED: u8 = 130;

pub async fn serve(args: BenchServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(n) = args.shard.workers {
        return super::workers::run(&args, n).await;
    }
    check_target(&args)?;
    let tokenizer = load_tokenizer(args.endpoint.request.tokenizer.as_deref())?;
    let outcome = run_point(&args, tokenizer, &Keep::new(RunKind::Bench), interrupted()).await?;
    let Some(o) = outcome else { return Ok(ExitCode::SUCCESS) };
    if o.result.interrupted {
        return Ok(ExitCode::from(INTERRUPTED));
    }
    if o.summary.completed == 0 && o.summary.failed.unwrap_or(0) > 0 {
        output::line("Every request failed (see the failures above): the run measured nothing; exit status 1.")?;
        return Ok(ExitCode::from(ALL_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}

/// Exit code of a run in which every request failed (vLLM exits 0 there; scripts should not).
pub const ALL_FAILED: u8 = 1;

/// `--sim`, checked against `--base-url`.
pub fn check_target(args: &BenchServeArgs) -> anyhow::Result<Option<SimTarget>> {
    let sim = parse_sim_target(&args.sim)?;
    if sim.is_some() && args.endpoint.base_url.is_some() {
        anyhow::bail!("--sim starts the simulator on a loopback port and benchmarks it; leave out --base-url");
    }
    Ok(sim)
}

/// One `bench serve` run: against the server, or the simulator started for it with `--sim`;
/// printed, saved as `--save-result` asks and kept as `keep` says. `cancel` completing
/// interrupts it (what was measured until then is still reported and kept). `None` after a
/// `--dry-run`, which sends nothing.
pub async fn run_point(
    args: &BenchServeArgs,
    tokenizer: Option<Arc<Tokenizer>>,
    keep: &Keep,
    cancel: impl Future<Output = ()>,
) -> anyhow::Result<Option<PointOutcome>> {
    let sim = check_target(args)?;
    // A `--workers` worker benchmarks the simulator its parent started.
    let shared_sim = args.shard.sim_url.clone().filter(|_| sim.is_some());
    let sim_server = match (&sim, &shared_sim) {
        (Some(target), None) => Some(start_sim(target, args, tokenizer.clone()).await?),
        _ => None,
    };
    let base_override = sim_server.as_ref().map(|s| s.base_url().to_string()).or(shared_sim);
    let outcome = run_against(args, sim, base_override, tokenizer, keep, cancel).await;
    if let Some(server) = sim_server {
        server.shutdown().await;
    }
    outcome
}

pub fn load_tokenizer(spec: Option<&str>) -> anyhow::Result<Option<Arc<Tokenizer>>> {
    spec.map(|s| Tokenizer::load(s).map(Arc::new))
        .transpose()
        .context("could not load the tokenizer given by --tokenizer")
}

/// The run itself, against `base_override` when the simulator was started for it.
async fn run_against(
    args: &BenchServeArgs,
    sim: Option<SimTarget>,
    base_override: Option<String>,
    tokenizer: Option<Arc<Tokenizer>>,
    keep: &Keep,
    cancel: impl Future<Output = ()>,
) -> anyhow::Result<Option<PointOutcome>> {
    let backend = parse_backend(&args.endpoint.request.backend)?;
    let base_url = base_override.clone().unwrap_or_else(|| endpoint_urls(&args.endpoint, backend).0);
    let headers = parse_kv_list(&args.endpoint.header, "--header")?;
    let model = resolve_model(args, &base_url, &headers).await?;
    let mut config = crate::cli::resolve::resolve_run_config(&args.flags(), sim, base_override.as_deref(), model)?;
    let shard = super::shard::shard_of(&args.shard)?;

    let log: Logger = Arc::new(|line: &str| {
        let _ = output::line(line);
    });
    let mut plan = plan_for(args, &config, tokenizer.as_deref())?;
    for note in &plan.notes {
        output::line(note)?;
    }
    align_to_server(args, &mut plan, &config, tokenizer.as_deref(), &log).await;
    if let Some(path) = &args.extra.dry_run {
        servebench_workload::save_plan(&plan, Path::new(path))
            .with_context(|| format!("could not write the plan to {path}"))?;
        output::line(format!("Wrote {} planned requests to {path}; nothing was sent.", plan.len()))?;
        return Ok(None);
    }
    let mut worker = match shard {
        Some(s) => Some(super::shard::take_share(s, &args.shard, &mut config, &mut plan)?),
        None => None,
    };

    let in_flight = u64::try_from(config.traffic.max_concurrency.unwrap_or(plan.len())).unwrap_or(u64::MAX);
    let wanted_files = in_flight.saturating_mul(2).saturating_add(256);
    if let Err(e) = servebench_client::raise_nofile_limit(wanted_files) {
        output::line(format!("WARNING: could not raise the open-file limit ({e}); very high concurrency may fail."))?;
    }
    let target = &config.target;
    let before = ServerBefore::capture(&target.base_url, &target.headers, target.insecure).await;
    if target.profile {
        profiler(&config, Profiler::Start).await?;
    }
    let measured: anyhow::Result<Option<PointOutcome>> = async {
        let start_at = match worker.as_mut() {
            Some(w) => super::shard::common_start(&args.shard, w).await?,
            None => None,
        };
        let started = jiff::Zoned::now();
        let mut result =
            servebench_client::run(&config, &plan, RunOptions { log, start_at, ..RunOptions::default() }, cancel)
                .await
                .context("the benchmark could not run")?;
        stamp_dates(&mut result, &started);
        servebench_workload::account(tokenizer.as_deref(), &plan, &mut result);
        let metrics_after = env::ask(&target.base_url, "/metrics", &target.headers, target.insecure).await;
        let env = before.into_env(metrics_after);
        // A worker's share is stored once merged.
        let choice = StoreChoice { db: args.extra.db.as_deref(), no_store: args.extra.no_store || worker.is_some() };
        match worker.take() {
            Some(w) => {
                let keep = super::shard::keep(keep, &w);
                super::shard::stamp(&mut result, w);
                finish_and_keep(result, Some(env), &keep, &choice).map(Some)
            }
            None => finish_and_keep(result, Some(env), keep, &choice).map(Some),
        }
    }
    .await;
    // Stopped whatever happened to the run, so the server is not left profiling.
    if target.profile {
        profiler(&config, Profiler::Stop).await?;
    }
    measured
}

/// A step of vLLM's `--profile`.
#[derive(Clone, Copy)]
enum Profiler {
    Start,
    Stop,
}

/// Starts or stops the server's profiler, printing vLLM's lines; a failure is a warning.
async fn profiler(config: &RunConfig, step: Profiler) -> anyhow::Result<()> {
    let (path, doing, done, verb) = match step {
        Profiler::Start => ("/start_profile", "Starting profiler...", "Profiler started", "start"),
        Profiler::Stop => ("/stop_profile", "Stopping profiler...", "Profiler stopped", "stop"),
    };
    output::line(doing)?;
    let t = &config.target;
    // Stopping writes the traces, which can take minutes: the wait is the request timeout.
    let timeout = Duration::try_from_secs_f64(t.request_timeout_s).unwrap_or(Duration::from_secs(6 * 3600));
    let api_key = servebench_client::env_api_key();
    match servebench_client::post_empty(&t.base_url, path, &t.headers, api_key, t.insecure, timeout).await {
        Ok(()) => output::line(done)?,
        Err(e) => output::line(format!(
            "WARNING: could not {verb} the server's profiler ({e}); the run goes on. \
             vLLM serves {path} only when started with its profiler enabled."
        ))?,
    }
    Ok(())
}

/// `--model`, or the first model the server lists (vLLM's behaviour and messages).
async fn resolve_model(
    args: &BenchServeArgs,
    base_url: &str,
    headers: &[(String, String)],
) -> anyhow::Result<ResolvedModel> {
    if let Some(m) = &args.endpoint.model {
        let name = args.endpoint.request.served_model_name.clone().unwrap_or_else(|| m.clone());
        return Ok(ResolvedModel { model_id: m.clone(), model_name: name });
    }
    output::line("Model not specified, fetching first model from server...")?;
    let api_key = servebench_client::env_api_key();
    let info = servebench_client::fetch_models(base_url, headers, api_key, args.endpoint.insecure).await.with_context(
        || format!("could not fetch the model list from {base_url}/v1/models; is the server running? Or pass --model"),
    )?;
    let id = info.root.clone().unwrap_or_else(|| info.id.clone());
    output::line(format!("First model name: {}, first model id: {id}", info.id))?;
    Ok(ResolvedModel { model_id: id, model_name: info.id })
}

/// The plan: read from `--replay-plan`, or built from the workload flags.
fn plan_for(
    args: &BenchServeArgs,
    config: &servebench_core::config::RunConfig,
    tokenizer: Option<&Tokenizer>,
) -> anyhow::Result<Plan> {
    match &args.extra.replay_plan {
        Some(path) => servebench_workload::load_plan(Path::new(path))
            .with_context(|| format!("could not read the plan {path} (written by --dry-run)")),
        None => servebench_workload::build_plan(config, tokenizer).context("could not build the requests"),
    }
}

/// vLLM's alignment of `random` and `prefix_repetition` prompts to the server's tokenizer
/// (`/tokenize`), before `--dry-run` writes the plan and before the clock starts; never for
/// `--replay-plan`, whose plan is sent exactly as written.
async fn align_to_server(
    args: &BenchServeArgs,
    plan: &mut Plan,
    config: &RunConfig,
    tokenizer: Option<&Tokenizer>,
    log: &Logger,
) {
    if args.extra.replay_plan.is_some() {
        return;
    }
    servebench_client::align_prompts(plan, config, tokenizer, servebench_client::env_api_key(), log).await;
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn interrupted() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Starts the simulator on a loopback port for `--sim`.
pub(crate) async fn start_sim(
    target: &SimTarget,
    args: &BenchServeArgs,
    tokenizer: Option<Arc<Tokenizer>>,
) -> anyhow::Result<servebench_sim::server::SimServer> {
    // `dialect=vllm|llama.cpp|sglang` is the HTTP server's, not the engine's.
    let (dialects, engine_options): (Vec<_>, Vec<_>) =
        target.options.iter().cloned().partition(|(k, _)| k.trim() == "dialect");
    let dialect = match dialects.last() {
        Some((_, v)) => v.parse::<servebench_sim::server::Dialect>().context("--sim-option dialect")?,
        None => servebench_sim::server::Dialect::default(),
    };
    let setup = servebench_sim::SimSetup::resolve(
        &target.model,
        &target.hardware,
        &engine_options,
        target.profile.as_deref().map(Path::new),
    )?;
    let options = servebench_sim::server::ServerOptions {
        host: "127.0.0.1".into(),
        port: 0,
        served_model_name: args.endpoint.request.served_model_name.clone().or_else(|| args.endpoint.model.clone()),
        tokenizer,
        seed: args.traffic.seed,
        dialect,
    };
    let server = servebench_sim::server::start(setup, options).await?;
    output::line(format!("Simulating {}@{} at {}", target.model, target.hardware, server.base_url()))?;
    Ok(server)
}
