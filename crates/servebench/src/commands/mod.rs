//! One module per subcommand; each takes its resolved arguments and returns an exit code.
//! `anyhow` is used at this layer only.

pub mod bench;
pub mod finish;
pub mod import;
pub mod runs;

use std::process::ExitCode;

use crate::cli::{BenchCommand, Command};

/// Runs one subcommand.
pub async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Bench(BenchCommand::Serve(args)) => bench::serve(*args).await,
        Command::Runs(command) => runs::execute(command, &mut std::io::stdout().lock()),
        Command::Import(args) => import::execute(args, &mut std::io::stdout().lock()),
    }
}
