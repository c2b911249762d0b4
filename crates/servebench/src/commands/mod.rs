//! One module per subcommand; each takes its resolved arguments and returns an exit code.
//! `anyhow` is used at this layer only.

pub mod bench;

use std::process::ExitCode;

use crate::cli::{BenchCommand, Command};

/// Runs one subcommand.
pub async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Bench(BenchCommand::Serve(args)) => bench::serve(*args).await,
    }
}
