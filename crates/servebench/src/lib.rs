//! servebench: measure, predict and compare the performance of LLM serving engines.
//!
//! This crate is the command layer: flags parse into clap structs ([`cli`]) and each subcommand
//! in [`commands`] drives the library crates. A benchmark run, from `bench serve`, `sim predict`
//! or a sweep, is resolved once (`commands::resolve`), planned and executed
//! (`commands::execute`), and reported through an [`output::Sink`]. `main.rs` only calls
//! [`main_entry`].

pub mod cli;
pub mod commands;
pub mod output;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

/// Parses the command line, runs the command and maps the outcome to an exit code:
/// 0 success, 1 error (or a run in which every request failed), 2 bad usage, 3 a `--fail-on`
/// rule held, 130 interrupted (after saving what was measured).
pub fn main_entry(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args = match cli::compat::prepare_argv(args) {
        Ok(args) => args,
        Err(e) => {
            output::error(&e);
            return ExitCode::from(2);
        }
    };
    let cli = match cli::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            output::error(&e);
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::dispatch(cli.command)) {
        Ok(code) => code,
        Err(e) if output::is_broken_pipe(&*e) => ExitCode::SUCCESS,
        Err(e) => {
            output::error(&*e);
            if is_usage(&e) { ExitCode::from(2) } else { ExitCode::FAILURE }
        }
    }
}

/// Whether a command's error is bad usage, exit code 2: a flag value or a combination of flags
/// refused before anything ran ([`cli::resolve::ResolveError`]), or a simulator target that
/// names nothing known or options that cannot be read or conflict
/// ([`servebench_sim::SimError::is_usage`]). A deployment that is well formed but cannot run
/// (it does not fit) is an error, 1, as vLLM's start would fail.
fn is_usage(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause.downcast_ref::<cli::resolve::ResolveError>().is_some()
            || cause.downcast_ref::<servebench_sim::SimError>().is_some_and(servebench_sim::SimError::is_usage)
    })
}
