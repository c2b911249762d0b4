//! `servebench compare` and `servebench report` against a store in a temporary folder.

use std::path::Path;
use std::process::ExitCode;

use servebench_core::config::{Metric, RunConfig};
use servebench_core::metrics::Summary;
use servebench_core::record::{RequestRecord, RunResult, Usage};
use servebench_store::{NewRun, RunKind, Store};
use tempfile::TempDir;

use crate::common::{report_file, run, try_run};

/// A store holding reference reports 000 (runs 1-11) and 001 (runs 12-34).
fn imported() -> (TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db").to_string_lossy().into_owned();
    let files = [report_file("000-dense-models.txt"), report_file("001-prompt-sweep.txt")];
    let out = run(&["import", "--db", &db, &files[0].to_string_lossy(), &files[1].to_string_lossy()]);
    assert!(out.ends_with(&format!("Added 34 runs to {db}.\n")), "{out}");
    (dir, db)
}

/// A measured run of 150 requests through 4 slots, with TTFTs near `ttft_ms` and 16 tokens
/// 20 ms apart.
fn measured(ttft_ms: u32, seed: u32) -> NewRun {
    let mut config = RunConfig::for_target("http://127.0.0.1:8000", "org/model");
    config.traffic.num_prompts = 150;
    config.traffic.max_concurrency = Some(4);
    config.output.percentile_metrics = vec![Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];
    let mut free = [0u64; 4];
    let records: Vec<RequestRecord> = (0..150u32)
        .map(|i| {
            let jitter = (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 7) % 40_000;
            let ttft_us = ttft_ms * 1000 - 20_000 + jitter;
            let chunks_us: Vec<u32> = (0..16).map(|k| ttft_us + k * (20_000 + jitter / 40)).collect();
            let slot = (0..4).min_by_key(|&s| free[s]).unwrap();
            let start_ns = free[slot];
            let end_us = chunks_us[15] + 100;
            free[slot] = start_ns + u64::from(end_us) * 1000;
            RequestRecord {
                index: i,
                start_ns,
                end_us,
                usage: Usage { prompt_tokens: Some(64), completion_tokens: Some(16) },
                chunks_us,
                max_tokens: 16,
                status: 200,
                ..RequestRecord::default()
            }
        })
        .collect();
    let run = RunResult {
        date: "20260102-030405".into(),
        started_at: "2026-01-02T03:04:05Z".into(),
        ..RunResult::finished(config, records, free.iter().copied().max().unwrap() as f64 * 1e-9)
    };
    NewRun::from_run(RunKind::Bench, &run, &Summary::compute(&run))
}

/// A store with a baseline run 1 and a run 2 whose first tokens come 40 % later.
fn measured_store() -> (TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let mut store = Store::open(&path).unwrap();
    store.insert(&measured(100, 1).with_label("build", "old")).unwrap();
    store.insert(&measured(140, 2).with_label("build", "new")).unwrap();
    (dir, path.to_string_lossy().into_owned())
}

#[test]
fn the_000_models_compare_with_findings() {
    let (_dir, db) = imported();
    let out = run(&["compare", "--db", &db, "--model", "/", "--label", "model", "--format", "markdown", "--findings"]);
    insta::assert_snapshot!(out);
    assert!(out.contains(
        "- Highest output throughput at max_concurrency=4: Qwen/Qwen3-0.6B (124.81 tok/s, 1.01× the next, \
         meta-llama/Llama-3.2-1B at 123.95 tok/s).\n"
    ));
}

#[test]
fn the_001_sweep_is_a_pivot_with_its_knee() {
    let (_dir, db) = imported();
    let out = run(&["compare", "--db", &db, "--label", "seq_length=80", "--findings"]);
    assert!(out.starts_with("By num_prompts\n"), "{out}");
    let line = out.lines().find(|l| l.starts_with("Output throughput (tok/s)")).unwrap();
    let values: Vec<&str> = line["Output throughput (tok/s)".len()..].split_whitespace().collect();
    assert_eq!(values[..3], ["18.75", "27.28", "53.18"]);
    assert_eq!(values.len(), 12);
    assert!(out.contains("- Saturation knee at num_prompts=128 (273.89 tok/s): "), "{out}");
    // The same runs by number, in another order, give the same sweep.
    let by_id = run(&["compare", "--db", &db, "23", "12", "13", "14", "15", "16", "17", "18", "19", "20", "21", "22"]);
    assert_eq!(by_id, run(&["compare", "--db", &db, "--label", "seq_length=80"]));
    assert_eq!(by_id, run(&["compare", "--db", &db, "23", "12-22"]), "a range names the runs in number order");
    // CSV: a line per run.
    let csv = run(&["compare", "--db", &db, "--label", "seq_length=80", "--format", "csv"]);
    assert_eq!(csv.lines().count(), 13);
    assert!(csv.starts_with("id,uid,kind,name,num_prompts,completed,"), "{csv}");
}

#[test]
fn a_significant_regression_fails_the_gate_with_code_3() {
    let (_dir, db) = measured_store();
    let (code, out) =
        try_run(&["compare", "--db", &db, "1", "2", "--fail-on", "p99_ttft_ms>+10%,median_tpot_ms>+5%"]).unwrap();
    assert_eq!(code, ExitCode::from(3), "{out}");
    assert!(out.contains("\nFAIL p99_ttft_ms>+10%: "), "{out}");
    assert!(out.contains("excludes 0"), "{out}");
    assert!(out.contains("\npass median_tpot_ms>+5%: "), "{out}");
    assert!(out.contains("Median TTFT (ms)"), "{out}");
    // The other way round, TTFT improved: the same rule passes.
    let (code, out) = try_run(&["compare", "--db", &db, "2", "1", "--fail-on", "p99_ttft_ms>+10%"]).unwrap();
    assert_eq!(code, ExitCode::SUCCESS, "{out}");
    // In CSV the verdicts leave stdout to the CSV.
    let (code, out) =
        try_run(&["compare", "--db", &db, "1", "2", "--format", "csv", "--fail-on", "p99_ttft_ms>+10%"]).unwrap();
    assert_eq!(code, ExitCode::from(3));
    assert_eq!(out.lines().count(), 3, "{out}");
}

#[test]
fn imported_runs_are_gated_on_their_summaries() {
    let (_dir, db) = imported();
    let (code, out) = try_run(&["compare", "--db", &db, "1", "2", "--fail-on", "median_ttft_ms<-30%"]).unwrap();
    assert_eq!(code, ExitCode::from(3), "{out}");
    assert!(out.contains("Run 1 has no per-request records"), "{out}");
    assert!(out.contains("the threshold alone decides"), "{out}");
}

#[test]
fn usage_errors_exit_with_code_2() {
    let (_dir, db) = imported();
    for args in [
        vec!["compare", "--db", &db],
        vec!["compare", "--db", &db, "1", "2", "--fail-on", "p99_ttft>10%"],
        vec!["compare", "--db", &db, "1", "2", "3", "--fail-on", "p99_ttft_ms>+10%"],
        vec!["compare", "--db", &db, "1", "2", "--fail-on", "p99_ttft_ms>+10%", "--fail-on", "p99_ttft_ms>+10%"],
    ] {
        let (code, out) = try_run(&args).unwrap();
        assert_eq!(code, ExitCode::from(2), "{args:?}: {out}");
    }
    let err = try_run(&["compare", "--db", &db, "1"]).unwrap_err();
    assert!(err.to_string().contains("at least two runs"), "{err}");
    let err = try_run(&["compare", "--db", &db, "1", "99"]).unwrap_err();
    assert!(err.to_string().contains("no run 99"), "{err}");
    assert!(try_run(&["compare", "--db", &db, "1", "2", "--label", "a=b"]).is_err());
    for twice in [&["1", "1"][..], &["1-3", "2"], &["5-2"]] {
        let mut args = vec!["compare", "--db", &db];
        args.extend_from_slice(twice);
        let err = try_run(&args).unwrap_err().to_string();
        let said = if twice == ["5-2"] { "write it from low to high: 2-5" } else { "is named twice" };
        assert!(err.contains(said), "{twice:?}: {err}");
    }
    let err = try_run(&["report", "--db", &db, "-o", "unused.html", "2", "2"]).unwrap_err();
    assert!(err.to_string().contains("run 2 is named twice"), "{err}");
    let missing = db.replace("runs.db", "none.db");
    let err = try_run(&["compare", "--db", &missing, "1", "2"]).unwrap_err();
    assert!(err.to_string().contains("no run store at"), "{err}");
    assert!(!Path::new(&missing).exists());
}

#[test]
fn report_writes_one_self_contained_page() {
    let (dir, db) = measured_store();
    let file = dir.path().join("report.html");
    let out = run(&["report", "--db", &db, "--all", "-o", &file.to_string_lossy(), "--title", "Nightly"]);
    assert_eq!(out, format!("Wrote the report of 2 runs to {}.\n", file.display()));
    let html = std::fs::read_to_string(&file).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
    assert!(html.contains("<title>Nightly</title>"));
    assert!(html.contains("<script type=\"application/json\" id=\"servebench-runs\">"));
    for id in ["cdf-ttft", "chart-timeline", "chart-tokens"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "{id}");
    }
    assert!(html.contains("Run 2 has a higher p99 TTFT than run 1"));

    let out = run(&["report", "--db", &db, "2", "-o", &file.to_string_lossy(), "--timeline", "2"]);
    assert!(out.starts_with("Wrote the report of 1 run to "), "{out}");

    let (code, _) = try_run(&["report", "--db", &db, "-o", &file.to_string_lossy()]).unwrap();
    assert_eq!(code, ExitCode::from(2));
    let err = try_run(&["report", "--db", &db, "1", "-o", &file.to_string_lossy(), "--timeline", "2"]).unwrap_err();
    assert!(err.to_string().contains("--timeline 2: it is not among the runs of the report"), "{err}");
    let err = try_run(&["report", "--db", &db, "--all", "-o", "/nonexistent/dir/r.html"]).unwrap_err();
    assert!(err.to_string().contains("could not write /nonexistent/dir/r.html"), "{err}");
}

#[test]
fn main_entry_maps_the_gate_to_exit_code_3() {
    let (_dir, db) = measured_store();
    let args = ["servebench", "compare", "--db", &db, "1", "2", "--fail-on", "p99_ttft_ms>+10%", "--format", "csv"]
        .map(std::ffi::OsString::from);
    assert_eq!(servebench::main_entry(args), ExitCode::from(3));
}
