//! `servebench bench serve`: resolve the flags, plan every request, execute the plan against
//! the server (or the simulator started for it with `--sim`), report and keep what was
//! measured; the exit code says how it went. With `--workers N`, N worker processes send the
//! plan's shares and their results are merged into the one report (see `workers.rs`).

use std::process::ExitCode;

use servebench_core::threshold::{Threshold, parse_fail_on_values};
use servebench_store::RunKind;

use super::execute::{execute, plan};
use super::finish::{Keep, PointOutcome};
use super::resolve::Resolver;
use crate::cli::BenchServeArgs;
use crate::output::Sink;

/// Exit code of a run stopped with Ctrl-C (after its partial result was saved).
pub const INTERRUPTED: u8 = 130;

/// Exit code of a run in which every request failed (vLLM exits 0 there; scripts should not).
/// A run that measured something but broke a `--fail-on` rule exits with
/// [`super::compare::REGRESSION`] (3), as `compare` does.
pub const ALL_FAILED: u8 = 1;

/// Exit code of a run a stop rule ended (`--max-failures`, `--stall-timeout`), after its
/// partial result was saved: the server broke, which scripts tell from a failed tool (1).
pub const STOPPED: u8 = 4;

/// `bench serve`, its report written to `out`.
pub async fn serve(args: BenchServeArgs, out: &Sink) -> anyhow::Result<ExitCode> {
    let rules = match parse_fail_on_values(&args.extra.fail_on) {
        Ok(rules) => rules,
        Err(e) => return Ok(super::compare::usage(&e)),
    };
    if let Some(n) = args.shard.workers {
        let merged = super::workers::run(&args, n, out).await?;
        return verdict(&merged, &rules, out);
    }
    let resolved = Resolver::default().resolve(&args.flags(false), out).await?;
    let plan = plan(&resolved)?;
    let outcome = execute(&resolved, plan, &Keep::new(RunKind::Bench), interrupted(), out).await?;
    let Some(o) = outcome else { return Ok(ExitCode::SUCCESS) };
    verdict(&o, &rules, out)
}

/// The exit code of a finished run: stopped by a stop rule, interrupted, nothing measured, a
/// broken `--fail-on` rule (its verdicts printed), or success.
pub(super) fn verdict(o: &PointOutcome, rules: &[Threshold], out: &Sink) -> anyhow::Result<ExitCode> {
    if let Some(why) = &o.result.stopped_by {
        out.line(format!("A stop rule ended the run ({why}): exit status {STOPPED}."))?;
        return Ok(ExitCode::from(STOPPED));
    }
    if o.result.interrupted {
        return Ok(ExitCode::from(INTERRUPTED));
    }
    if o.summary.completed == 0 && o.summary.failed.unwrap_or(0) > 0 {
        out.line("Every request failed (see the failures above): the run measured nothing; exit status 1.")?;
        return Ok(ExitCode::from(ALL_FAILED));
    }
    if !rules.is_empty() {
        let verdicts = servebench_report::gate::check_run(rules, &o.summary);
        out.out(&verdicts.text())?;
        if verdicts.failed() {
            return Ok(ExitCode::from(super::compare::REGRESSION));
        }
    }
    Ok(ExitCode::SUCCESS)
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
