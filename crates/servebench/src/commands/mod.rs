//! One module per subcommand; each takes its arguments and returns an exit code. A benchmark
//! run, whichever command asks for it, goes `resolve` → `execute::plan` → `execute` →
//! `finish`. `anyhow` is used at this layer only.

pub mod band;
pub mod bench;
pub mod compare;
pub mod env;
pub mod execute;
pub mod finish;
pub mod import;
pub mod inputs;
pub mod launch;
pub mod merge;
pub mod report;
pub mod resolve;
pub mod runs;
pub mod selftest;
pub mod shard;
pub mod sim_fit;
pub mod sim_memory;
pub mod sim_predict;
pub mod sim_presets;
pub mod sim_serve;
pub mod sim_step;
pub mod sim_validate;
pub mod sweep;
pub mod sweep_serve;
pub mod workers;

use std::process::ExitCode;

use crate::cli::sweep_serve_args::BenchSweepCommand;
use crate::cli::{BenchCommand, Command, SimCommand};
use crate::output::Sink;

/// Runs one subcommand.
pub async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Bench(BenchCommand::Serve(args)) => bench::serve(*args, &Sink::Stdout).await,
        Command::Bench(BenchCommand::Sweep(BenchSweepCommand::Serve(args))) => {
            sweep_serve::run(*args, None, &Sink::Stdout).await
        }
        Command::Bench(BenchCommand::Sweep(BenchSweepCommand::ServeWorkload(args))) => {
            let workload = sweep_serve::Workload { var: args.workload_var, iters: args.workload_iters };
            sweep_serve::run(args.sweep, Some(workload), &Sink::Stdout).await
        }
        Command::Bench(BenchCommand::Sweep(BenchSweepCommand::Plot(args))) => sweep_serve::plot(&args, &Sink::Stdout),
        Command::Bench(BenchCommand::Sweep(BenchSweepCommand::PlotPareto(args))) => {
            sweep_serve::plot_pareto(&args, &Sink::Stdout)
        }
        Command::Sim(SimCommand::Serve(args)) => sim_serve::run(*args).await,
        Command::Sim(SimCommand::Predict(args)) => sim_predict::run(*args, &Sink::Stdout).await,
        Command::Sim(SimCommand::Fit(args)) => sim_fit::fit(args, &Sink::Stdout),
        Command::Sim(SimCommand::Validate(args)) => sim_validate::run(&args, &mut std::io::stdout().lock()),
        Command::Sim(SimCommand::Presets(args)) => sim_presets::presets(args, &mut std::io::stdout().lock()),
        Command::Sim(SimCommand::Step(args)) => sim_step::run(&args, &mut std::io::stdout().lock()),
        Command::Sim(SimCommand::Memory(args)) => sim_memory::run(&args, &mut std::io::stdout().lock()),
        Command::Runs(command) => runs::execute(command, &mut std::io::stdout().lock()),
        Command::Import(args) => import::execute(args, &mut std::io::stdout().lock()),
        Command::Compare(args) => compare::execute(args, &mut std::io::stdout().lock()),
        Command::Report(args) => report::execute(args, &mut std::io::stdout().lock()),
        Command::Sweep(args) => sweep::execute(*args, &Sink::Stdout).await,
        Command::Selftest(args) => selftest::run(args, &Sink::Stdout).await,
        Command::Merge(args) => merge::execute(&args, &Sink::Stdout),
        Command::Launch(command) => launch::execute(command, &Sink::Stdout),
    }
}

/// Writes `text` to `path`, creating its folder first: a file a command writes beside its
/// results (a figure, a summary).
pub(crate) fn write_file(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("could not create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("could not write {}", path.display()))
}
