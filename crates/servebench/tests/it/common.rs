//! Helpers shared by the integration tests: running servebench (the binary, or the store and
//! report commands in-process), the reference reports, and a server arrival counter.

use std::path::{Path, PathBuf};
use std::process::{ExitCode, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use servebench::cli::{Cli, Command};
use servebench::commands;
use servebench_client::testserver::RequestInfo;

/// A JSON file the run wrote (a saved result, a sweep's or a shard's file), parsed.
pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("the file is JSON")
}

/// A small SLO search on the simulated Qwen3-8B: 1,024-token prompts, 32 tokens out, two
/// prompts a stream, at most 64 streams (the sweep tests' and the capacity tests').
pub const SMALL_SEARCH: [&str; 14] = [
    "--sim",
    "Qwen/Qwen3-8B@h100-sxm",
    "--predict",
    "--search",
    "max-concurrency",
    "--scale-num-prompts",
    "2",
    "--search-max",
    "64",
    "--random-input-len",
    "1024",
    "--random-output-len",
    "32",
    "--slo",
];

/// Runs the servebench binary with `args`, without the user's store or presets.
pub fn servebench_blocking(args: &[String]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_servebench"))
        .args(args)
        .env_remove("SERVEBENCH_DB")
        .env_remove("SERVEBENCH_PRESETS")
        .env("NO_COLOR", "1")
        .output()
        .expect("the servebench binary runs")
}

/// [`servebench_blocking`] off the async runtime, which serves the test server.
pub async fn servebench(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || servebench_blocking(&args)).await.expect("the runner thread finishes")
}

pub fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_string()).collect()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A reference report of the store's test data.
pub fn report_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/vllm-reports").join(name)
}

/// Runs a store or report command (`import`, `runs`, `compare`, `report`) in-process; returns
/// the exit code and what it printed, or the error.
pub fn try_run(args: &[&str]) -> anyhow::Result<(ExitCode, String)> {
    let cli = Cli::try_parse_from(std::iter::once("servebench").chain(args.iter().copied()))?;
    let mut out = Vec::new();
    let code = match cli.command {
        Command::Runs(command) => commands::runs::execute(command, &mut out)?,
        Command::Import(args) => commands::import::execute(args, &mut out)?,
        Command::Compare(args) => commands::compare::execute(args, &mut out)?,
        Command::Report(args) => commands::report::execute(args, &mut out)?,
        other => panic!("not a store or report command: {other:?}"),
    };
    Ok((code, String::from_utf8(out)?))
}

/// [`try_run`] of a command that must succeed; returns what it printed.
pub fn run(args: &[&str]) -> String {
    let (code, out) = try_run(args).unwrap_or_else(|e| panic!("servebench {args:?}: {e:#}"));
    assert_eq!(code, ExitCode::SUCCESS, "servebench {args:?}: {out}");
    out
}

/// Counts the requests a test server has seen, from its script function.
#[derive(Clone, Default)]
pub struct Arrivals(Arc<AtomicUsize>);

impl Arrivals {
    /// Records a request; call it from the server's script.
    pub fn saw(&self, info: &RequestInfo<'_>) {
        self.0.fetch_max(info.seq + 1, Ordering::SeqCst);
    }

    /// Blocks until the server has seen `n` requests (a minute at most, however busy the
    /// machine is, before the test gives up).
    pub fn wait_for(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.0.load(Ordering::SeqCst) < n {
            assert!(Instant::now() < deadline, "the server saw {} requests, not {n}", self.0.load(Ordering::SeqCst));
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
