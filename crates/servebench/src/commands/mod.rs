//! One module per subcommand; each takes its resolved arguments and returns an exit code.
//! `anyhow` is used at this layer only.

pub mod band;
pub mod bench;
pub mod compare;
pub mod env;
pub mod finish;
pub mod import;
pub mod launch;
pub mod merge;
pub mod report;
pub mod runs;
pub mod shard;
pub mod sim;
pub mod sim_serve;
pub mod sim_validate;
pub mod sweep;
pub mod workers;

use std::process::ExitCode;

use crate::cli::{BenchCommand, Command, SimCommand};

/// Runs one subcommand.
pub async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Bench(BenchCommand::Serve(args)) => bench::serve(*args).await,
        Command::Sim(SimCommand::Serve(args)) => sim_serve::run(*args).await,
        Command::Sim(SimCommand::Predict(args)) => sim::predict(*args),
        Command::Sim(SimCommand::Fit(args)) => sim::fit(args),
        Command::Sim(SimCommand::Validate(args)) => sim_validate::run(&args, &mut std::io::stdout().lock()),
        Command::Sim(SimCommand::Presets(args)) => sim::presets(args, &mut std::io::stdout().lock()),
        Command::Runs(command) => runs::execute(command, &mut std::io::stdout().lock()),
        Command::Import(args) => import::execute(args, &mut std::io::stdout().lock()),
        Command::Compare(args) => compare::execute(args, &mut std::io::stdout().lock()),
        Command::Report(args) => report::execute(args, &mut std::io::stdout().lock()),
        Command::Sweep(args) => sweep::execute(*args).await,
        Command::Merge(args) => merge::execute(&args),
        Command::Launch(command) => launch::execute(command),
    }
}
