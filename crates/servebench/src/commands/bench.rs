//! `servebench bench serve`: resolve, plan, run, report, save.

use std::process::ExitCode;

use crate::cli::BenchServeArgs;

pub async fn serve(_args: BenchServeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("bench serve is being wired up")
}
