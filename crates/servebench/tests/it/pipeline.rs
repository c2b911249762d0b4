//! `bench serve` in-process, through resolve → plan → execute with its report written to a
//! memory sink: against the scripted test server and against the simulator on a loopback port,
//! checking the printed vLLM block and the saved result JSON.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use servebench::cli::{BenchCommand, BenchServeArgs, Cli, Command};
use servebench::commands::bench::serve;
use servebench::commands::resolve::{Executor, Resolver};
use servebench::output::Sink;
use servebench_client::testserver::{Script, TestServer, TestServerConfig};

use crate::common::read_json;

/// `bench serve ARGS`, parsed as the command line is.
fn bench_serve(argv: &[&str]) -> BenchServeArgs {
    let cli =
        Cli::try_parse_from(["servebench", "bench", "serve"].iter().chain(argv)).unwrap_or_else(|e| panic!("{e}"));
    match cli.command {
        Command::Bench(BenchCommand::Serve(args)) => *args,
        other => panic!("not bench serve: {other:?}"),
    }
}

/// `Label:` of vLLM's block, its value.
fn value(report: &str, label: &str) -> f64 {
    let line = report.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("no {label} in\n{report}"));
    line[label.len()..].trim().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_serve_against_the_scripted_server_prints_the_block_and_saves_the_json() {
    let quick =
        Script { ttft: Duration::from_millis(5), itl: Duration::from_millis(2), tokens: 6, ..Script::default() };
    let server = TestServer::start(TestServerConfig::new(8, move |_| quick.clone())).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (base, saved) = (server.base_url(), dir.path().to_str().unwrap().to_string());
    let args = bench_serve(&[
        "--base-url",
        &base,
        "--num-prompts",
        "8",
        "--max-concurrency",
        "2",
        "--random-input-len",
        "12",
        "--random-output-len",
        "6",
        "--save-result",
        "--result-dir",
        &saved,
        "--result-filename",
        "r.json",
        "--no-store",
        "--disable-tqdm",
    ]);
    let out = Sink::memory();
    let code = serve(args, &out).await.unwrap();
    let text = out.text();
    assert_eq!(code, ExitCode::SUCCESS, "{text}");
    // The model was looked up while resolving, with vLLM's lines, before the plan's notes.
    let asked = text.find("Model not specified, fetching first model from server...\n").expect(&text);
    assert!(asked < text.find("Starting main benchmark run...").unwrap(), "{text}");
    assert!(text.contains("First model name: test-model, first model id: "), "{text}");
    assert!(text.contains("============ Serving Benchmark Result ============\n"), "{text}");
    assert_eq!(value(&text, "Successful requests:"), 8.0);
    assert_eq!(value(&text, "Maximum request concurrency:"), 2.0);
    assert_eq!(value(&text, "Total generated tokens:"), 48.0);
    assert!(text.ends_with(&format!("Saved the result to {saved}/r.json\n")), "{text}");

    let json = read_json(&dir.path().join("r.json"));
    assert_eq!((json["completed"].as_u64(), json["total_output_tokens"].as_u64()), (Some(8), Some(48)));
    // vLLM names results after the root of the first model the server lists.
    assert_eq!(json["model_id"], "servebench/test-model");
    assert_eq!(json["servebench"]["config"]["target"]["base_url"], base.as_str());
    assert_eq!(
        json["mean_ttft_ms"].as_f64().map(|v| format!("{v:.2}")),
        Some(format!("{:.2}", value(&text, "Mean TTFT (ms):")))
    );
    assert!(server.max_in_flight() <= 2, "server saw {} in flight", server.max_in_flight());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_serve_against_the_simulator_on_loopback_names_its_model_without_asking() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().to_str().unwrap().to_string();
    let args = bench_serve(&[
        "--sim",
        "Qwen/Qwen3-0.6B@h100-sxm",
        "--num-prompts",
        "6",
        "--max-concurrency",
        "3",
        "--random-input-len",
        "32",
        "--random-output-len",
        "4",
        "--save-result",
        "--result-dir",
        &saved,
        "--result-filename",
        "s.json",
        "--no-store",
        "--disable-tqdm",
        "--server-metrics",
        "--scrape-interval",
        "0.2",
    ]);
    let out = Sink::memory();
    assert_eq!(serve(args, &out).await.unwrap(), ExitCode::SUCCESS, "{}", out.text());
    let text = out.text();
    assert!(text.starts_with("Simulating Qwen/Qwen3-0.6B@h100-sxm at http://127.0.0.1:"), "{text}");
    assert!(!text.contains("Model not specified"), "the simulator's model is known: {text}");
    assert_eq!(value(&text, "Successful requests:"), 6.0);
    assert_eq!(value(&text, "Total input tokens:"), 6.0 * 32.0);
    assert_eq!(value(&text, "Total generated tokens:"), 24.0);

    let json = read_json(&dir.path().join("s.json"));
    assert_eq!(json["completed"].as_u64(), Some(6));
    assert_eq!(json["model_id"], "Qwen/Qwen3-0.6B");
    let target = &json["servebench"]["config"]["target"];
    // The config saved is the one the run used: pointed at the port the simulator listened on.
    let listened = text.lines().next().and_then(|l| l.rsplit(' ').next()).unwrap();
    assert_eq!(target["base_url"], listened);
    assert_eq!(target["sim"]["hardware"], "h100-sxm");
    // The simulator's own /metrics, scraped through the run: its count of generated tokens
    // is the client's.
    let telemetry = text.lines().find(|l| l.starts_with("Server telemetry")).expect("a telemetry line");
    assert!(telemetry.starts_with(&format!("Server telemetry (vllm, {listened}/metrics, ")), "{telemetry}");
    assert!(telemetry.contains("generated tokens 24 (client counted 24)"), "{telemetry}");
    let source = &json["servebench"]["server_telemetry"]["sources"][0];
    assert_eq!(source["engine"], "vllm");
    assert_eq!(source["failed"], 0);
    assert!(source["series"].as_array().is_some_and(|s| s.iter().any(|x| x["signal"] == "running")), "{source}");
}

/// Where a run would lose what it measured, it is refused before it starts: a result file named
/// where the run store is, an empty file name, a store that names no file or cannot be opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_that_would_lose_the_run_are_refused_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    servebench_store::Store::open(&db).unwrap();
    let (db, folder) = (db.to_str().unwrap(), dir.path().to_str().unwrap());
    let sim = ["--sim", "Qwen/Qwen3-0.6B@h100-sxm", "--num-prompts", "2", "--random-output-len", "2", "--disable-tqdm"];
    for (flags, expected) in [
        (
            &["--save-result", "--result-dir", folder, "--result-filename", "runs.db", "--db", db][..],
            "choose another output path",
        ),
        (&["--dry-run", db][..], "choose another output path"),
        (&["--save-result", "--result-filename", ""][..], "--result-filename is empty"),
        (&["--db", ""][..], "--db names no file"),
        (&["--db", folder][..], "the run would not be kept"),
    ] {
        let out = Sink::memory();
        let e = serve(bench_serve(&[&sim[..], flags].concat()), &out).await.expect_err("refused");
        assert!(format!("{e:#}").contains(expected), "{flags:?}: {e:#}");
        assert!(!out.text().contains("Successful requests"), "{flags:?} ran: {}", out.text());
    }
    assert!(servebench_store::Store::open(Path::new(db)).is_ok(), "the store is intact");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrape_flags_are_checked_before_anything_runs() {
    let mut resolver = Resolver::default();
    let out = Sink::memory();
    for (flags, expected) in [
        (&["--scrape-interval", "0.01"][..], "--scrape-interval 0.01 is too short"),
        (&["--scrape", "dcgm:9400"][..], "--scrape \"dcgm:9400\" is not an address"),
    ] {
        let args = bench_serve(&[&["--sim", "Qwen/Qwen3-0.6B@h100-sxm"][..], flags].concat());
        let e = resolver.resolve(&args.flags(true), &out).await.err().expect("refused");
        assert!(format!("{e:#}").contains(expected), "{e:#}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_asks_a_server_for_its_model_once_and_resolves_the_simulator_without_one() {
    let server = TestServer::start(TestServerConfig::new(1, |_| Script::default())).await.unwrap();
    let base = server.base_url();
    let out = Sink::memory();
    let mut resolver = Resolver::default();
    let args = bench_serve(&["--base-url", &base, "--served-model-name", "alias"]);
    for _ in 0..2 {
        let resolved = resolver.resolve(&args.flags(false), &out).await.unwrap();
        let target = &resolved.config.target;
        assert_eq!((target.model_id.as_str(), target.model_name.as_str()), ("servebench/test-model", "alias"));
        assert!(matches!(resolved.executor, Executor::Http));
    }
    assert_eq!(out.text().matches("Model not specified").count(), 1, "{}", out.text());

    let sim = bench_serve(&["--sim", "Qwen/Qwen3-0.6B@h100-sxm", "--num-prompts", "3"]);
    let predicted = resolver.resolve(&sim.flags(true), &out).await.unwrap();
    assert_eq!(predicted.config.target.base_url, "sim://Qwen/Qwen3-0.6B@h100-sxm");
    assert_eq!(predicted.config.target.model_id, "Qwen/Qwen3-0.6B");
    assert!(matches!(predicted.executor, Executor::Virtual { .. }));
    let json = serde_json::to_value(&predicted).unwrap();
    assert_eq!(json["executor"]["kind"], "virtual");

    let unknown = bench_serve(&["--sim", "acme/none@h100-sxm"]);
    let e = resolver.resolve(&unknown.flags(false), &out).await.err().expect("an unknown model fails");
    assert!(format!("{e:#}").contains("the simulator cannot run acme/none@h100-sxm"), "{e:#}");
    let both = bench_serve(&["--sim", "Qwen/Qwen3-0.6B@h100-sxm", "--base-url", &base]);
    let e = resolver.resolve(&both.flags(false), &out).await.err().expect("--sim with --base-url fails");
    assert!(e.to_string().contains("leave out --base-url"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_file_that_cannot_be_written_fails_the_run_after_it_is_kept_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the result's folder should be: no folder can be made under it.
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, "").unwrap();
    let (result_dir, db) = (blocker.join("results"), dir.path().join("runs.db"));
    let args = bench_serve(&[
        "--sim",
        "Qwen/Qwen3-0.6B@h100-sxm",
        "--num-prompts",
        "3",
        "--random-input-len",
        "16",
        "--random-output-len",
        "2",
        "--save-result",
        "--result-dir",
        result_dir.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--disable-tqdm",
    ]);
    let out = Sink::memory();
    let e = serve(args, &out).await.expect_err("the result file cannot be written");
    let message = format!("{e:#}");
    assert!(message.contains("could not write the result file") && message.contains("kept as run 1"), "{message}");
    // Said once: the I/O error is in the message, not repeated as its cause.
    assert_eq!(message.matches("Not a directory").count(), 1, "{message}");
    let text = out.text();
    assert_eq!(value(&text, "Successful requests:"), 3.0, "the report was printed first: {text}");
    let runs = servebench_store::Store::open(&db).unwrap().list(&servebench_store::RunFilter::default()).unwrap();
    assert_eq!(runs.len(), 1, "what was measured is kept");
}
