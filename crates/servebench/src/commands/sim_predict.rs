//! `servebench sim predict`: `bench serve`'s workload flags resolved into a run of the
//! simulator in virtual time, planned and executed as `bench serve` executes its runs, and
//! reported exactly like a measured run (with the prediction band of the hardware), and
//! ending as `bench serve` ends (exit 1 where every request failed).

use std::process::ExitCode;

use servebench_store::RunKind;

use super::execute::{execute, plan};
use super::finish::Keep;
use super::resolve::Resolver;
use crate::cli::sim_args::SimPredictArgs;
use crate::output::Sink;

/// `sim predict`, its report written to `out`.
pub async fn run(args: SimPredictArgs, out: &Sink) -> anyhow::Result<ExitCode> {
    let resolved = Resolver::default().resolve(&args.flags(), out).await?;
    let plan = plan(&resolved)?;
    let outcome = execute(&resolved, plan, &Keep::new(RunKind::Predict), std::future::pending(), out).await?;
    let Some(o) = outcome else { return Ok(ExitCode::SUCCESS) };
    // As `bench serve`: a run whose every request failed (a sampling value vLLM refuses,
    // prompts longer than the context) exits 1.
    super::bench::verdict(&o, &[], out)
}
