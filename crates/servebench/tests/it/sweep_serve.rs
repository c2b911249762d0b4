//! `bench sweep serve` end to end, as `vllm bench sweep serve` is used: the simulator started
//! by `--serve-cmd` for each server combination, `vllm bench serve` commands run as servebench's
//! own, linked combinations only, vLLM's result layout, the run store, `--dry-run`, `--resume`
//! and `--continue-on-error`.

use std::path::Path;

use crate::common::read_json;
use crate::sim_cli::servebench;

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `bench sweep serve` of the simulator with `params` (a server's and a benchmark's files in
/// `dir`) and `extra`; its exit status and stdout.
fn sweep(dir: &Path, port: u16, bench_extra: &str, extra: &[&str]) -> (bool, String, String) {
    let exe = env!("CARGO_BIN_EXE_servebench");
    let serve_cmd = format!("{exe} sim serve --model Qwen/Qwen3-0.6B --hardware l40s --host 127.0.0.1 --port {port}");
    let bench_cmd = format!(
        "vllm bench serve --model Qwen/Qwen3-0.6B --host 127.0.0.1 --port {port} --num-prompts 4 \
         --random-input-len 48 --random-output-len 4 {bench_extra}"
    );
    let out_dir = dir.join("results");
    let mut args = vec![
        "bench",
        "sweep",
        "serve",
        "--serve-cmd",
        &serve_cmd,
        "--bench-cmd",
        &bench_cmd,
        "-o",
        out_dir.to_str().unwrap(),
        "-e",
        "exp",
    ];
    args.extend(extra);
    let db = dir.join("runs.db");
    let out = servebench(&args, &[("SERVEBENCH_DB", &db)]);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_sweep_runs_the_linked_combinations_on_their_servers_and_writes_vllm_s_layout() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("serve.json"), r#"{"small": {"max_num_seqs": 2}, "big": {"max_num_seqs": 4}}"#)
        .unwrap();
    std::fs::write(dir.path().join("bench.json"), r#"[{"max_concurrency": 2}, {"max_concurrency": 4}]"#).unwrap();
    let serve = dir.path().join("serve.json");
    let bench = dir.path().join("bench.json");
    let params = [
        "--serve-params",
        serve.to_str().unwrap(),
        "--bench-params",
        bench.to_str().unwrap(),
        "--link-vars",
        "max_num_seqs=max_concurrency",
        "--num-runs",
        "2",
    ];
    let port = free_port();
    // The dry run prints what would run and writes nothing.
    let mut dry = params.to_vec();
    dry.push("--dry-run");
    let (ok, out, err) = sweep(dir.path(), port, "", &dry);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("'--max-num-seqs', '2'") && out.contains("'--result-filename', 'run=1.json'"), "{out}");
    assert!(out.contains("Experiment will be saved at:"), "{out}");
    assert!(!dir.path().join("results").exists());

    let (ok, out, err) = sweep(dir.path(), port, "", &params);
    assert!(ok, "{out}\n{err}");
    let exp = dir.path().join("results/exp");
    for (serve, conc) in [("small", 2), ("big", 4)] {
        let comb = exp.join(format!("SERVE--{serve}-BENCH--max_concurrency={conc}"));
        for run in 0..2 {
            let data = read_json(&comb.join(format!("run={run}.json")));
            assert_eq!((data["completed"].as_u64(), data["run_number"].as_i64()), (Some(4), Some(run)), "{data}");
            assert_eq!((data["max_concurrency"].as_u64(), data["max_num_seqs"].as_u64()), (Some(conc), Some(conc)));
            assert_eq!(data["_benchmark_name"], serve);
            assert!(data["p99_e2el_ms"].as_f64().unwrap() > 0.0, "--percentile-metrics ttft,tpot,itl,e2el");
        }
        assert_eq!(read_json(&comb.join("summary.json")).as_array().unwrap().len(), 2);
    }
    // Unlinked combinations did not run; the table has the four runs.
    assert!(!exp.join("SERVE--small-BENCH--max_concurrency=4").exists());
    let csv = std::fs::read_to_string(exp.join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");
    assert!(csv.lines().next().unwrap().starts_with(",date,"), "{csv}");
    assert_eq!(out.matches("Resetting caches at http://127.0.0.1:").count(), 4, "{out}");
    // Every run is in the run store too.
    let db = dir.path().join("runs.db");
    let listed = servebench(&["runs", "list", "--json"], &[("SERVEBENCH_DB", &db)]);
    let runs = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert_eq!(runs.lines().filter(|l| l.contains("\"kind\":\"bench\"")).count(), 4, "{runs}");

    // The experiment exists: refused without --resume; with it, nothing runs again.
    let (ok, _, err) = sweep(dir.path(), port, "", &params);
    assert!(!ok && err.contains("--resume"), "{err}");
    let mut resume = params.to_vec();
    resume.push("--resume");
    let (ok, out, err) = sweep(dir.path(), port, "", &resume);
    assert!(ok, "{out}\n{err}");
    assert!(!out.contains("[BEGIN SERVER]"), "every combination had its summary: {out}");
}

#[test]
fn a_failed_benchmark_is_recorded_and_the_sweep_goes_on_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // A flag servebench refuses makes every run fail.
    let (ok, out, err) = sweep(dir.path(), port, "--hf-split train", &["--num-runs", "1"]);
    assert!(!ok, "{out}");
    assert!(err.contains("--hf-split"), "{err}");
    assert!(out.contains("--resume"), "{out}");
    // The benchmark command's flags are read as on the command line: its --config file too.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bench.yaml");
    std::fs::write(&config, "num-prompt: 4\n").unwrap();
    let (ok, _, err) = sweep(dir.path(), port, &format!("--config {}", config.display()), &["--num-runs", "1"]);
    assert!(!ok && err.contains("`num-prompt` is not a flag of `servebench bench serve`"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let (ok, out, err) = sweep(dir.path(), port, "--hf-split train", &["--num-runs", "1", "--continue-on-error"]);
    assert!(ok, "{out}\n{err}");
    let failure = read_json(&dir.path().join("results/exp/run=0.failure.json"));
    assert!(failure["error"].as_str().unwrap().contains("--hf-split"), "{failure}");
    assert!(out.contains("[NO SUCCESSFUL MEASURED RUNS]"), "{out}");
    // A run in which every request failed is a failed run; what it measured is kept apart, so
    // --resume runs it again.
    let dir = tempfile::tempdir().unwrap();
    let (ok, out, err) =
        sweep(dir.path(), port, "--base-url http://127.0.0.1:1", &["--num-runs", "1", "--continue-on-error"]);
    assert!(ok, "{out}\n{err}");
    let exp = dir.path().join("results/exp");
    assert_eq!(read_json(&exp.join("run=0.partial.json"))["failed"], 4);
    assert!(!exp.join("run=0.json").exists());
    let failure = read_json(&exp.join("run=0.failure.json"));
    assert!(failure["error"].as_str().unwrap().contains("run=0.partial.json"), "{failure}");
    // A server that is not vLLM's nor the simulator needs --after-bench-cmd.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("serve.sh");
    let exe = env!("CARGO_BIN_EXE_servebench");
    std::fs::write(
        &script,
        format!("#!/bin/sh\nexec {exe} sim serve --model Qwen/Qwen3-0.6B --hardware l40s \"$@\"\n"),
    )
    .unwrap();
    let serve_cmd = format!("sh {} --host 127.0.0.1 --port {port}", script.display());
    let bench_cmd = format!(
        "vllm bench serve --host 127.0.0.1 --port {port} --num-prompts 2 --random-input-len 16 --random-output-len 2"
    );
    let run = |extra: &[&str]| {
        let results = dir.path().join("r");
        let mut args = vec!["bench", "sweep", "serve", "--serve-cmd", &serve_cmd, "--bench-cmd", &bench_cmd];
        args.extend(["--num-runs", "1", "-o", results.to_str().unwrap(), "--resume"]);
        args.extend(extra);
        std::fs::create_dir_all(results.join("exp")).unwrap();
        args.extend(["-e", "exp"]);
        servebench(&args, &[("SERVEBENCH_DB", &dir.path().join("db"))])
    };
    let out = run(&[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--after-bench-cmd"), "{out:?}");
    let out = run(&["--after-bench-cmd", "true"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(read_json(&dir.path().join("r/exp/run=0.json"))["completed"], 2);
}

#[test]
fn serve_workload_runs_one_at_a_time_all_at_once_and_the_levels_between() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let exe = env!("CARGO_BIN_EXE_servebench");
    let serve_cmd = format!("{exe} sim serve --model Qwen/Qwen3-0.6B --hardware l40s --host 127.0.0.1 --port {port}");
    let bench_cmd = format!(
        "vllm bench serve --model Qwen/Qwen3-0.6B --host 127.0.0.1 --port {port} --num-prompts 16 \
         --random-input-len 64 --random-output-len 16"
    );
    let results = dir.path().join("results");
    let run = |extra: &[&str]| {
        let mut args = vec!["bench", "sweep", "serve_workload", "--serve-cmd", &serve_cmd, "--bench-cmd", &bench_cmd];
        args.extend(["--workload-var", "max_concurrency", "--workload-iters", "4", "--num-runs", "1"]);
        args.extend(["-o", results.to_str().unwrap(), "-e", "wl"]);
        args.extend(extra);
        servebench(&args, &[("SERVEBENCH_DB", &dir.path().join("db"))])
    };
    let out = run(&["--dry-run"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && text.contains("Omitting intermediate Workload iterations."), "{text}");
    let out = run(&[]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    // One at a time, then 16 at once (which reach fewer in flight), and two levels between.
    assert!(text.contains("Serial inference: max_concurrency=1"), "{text}");
    let batch: u64 =
        text.lines().find_map(|l| l.strip_prefix("Batch inference: max_concurrency=")).unwrap().parse().unwrap();
    assert!((2..=16).contains(&batch), "{text}");
    let explored: Vec<&str> = text.lines().filter(|l| l.starts_with("Exploring: max_concurrency=")).collect();
    assert!(!explored.is_empty() && explored.len() <= 2, "{text}");
    for dir_name in ["WL--max_concurrency=1", "WL--max_concurrency=16"] {
        let data = read_json(&results.join("wl").join(dir_name).join("run=0.json"));
        assert_eq!(data["completed"], 16, "{data}");
    }
    let csv = std::fs::read_to_string(results.join("wl/summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2 + explored.len(), "{csv}");
    // The varied load is the sweep's to set.
    let bench = dir.path().join("bench.json");
    std::fs::write(&bench, r#"[{"max_concurrency": 4}]"#).unwrap();
    let out = run(&["--bench-params", bench.to_str().unwrap(), "--resume"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("leave it out"));
}
