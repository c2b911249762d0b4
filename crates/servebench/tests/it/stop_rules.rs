//! `--max-failures` and `--stall-timeout` from the command line: a run against a failing
//! server stops, prints and saves what it measured with the rule that stopped it, and exits 4;
//! bad values and predictions are refused before anything runs.

use std::process::Output;

use servebench_client::testserver::{Script, TestServer, TestServerConfig};

use crate::common::{args, read_json, servebench, text};

/// `servebench` with `command` (`bench serve` or `sweep`) against a server that answers 500 to
/// every request, sent at 200 a second, then `extra`; a `bench serve` also saves its result as
/// `r.json` in the folder returned.
async fn against_a_failing_server(command: &[&str], extra: &[&str]) -> (Output, tempfile::TempDir) {
    let server =
        TestServer::start(TestServerConfig::new(400, |_| Script { status: 500, ..Script::default() })).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = server.base_url();
    let mut list = command.to_vec();
    list.extend([
        "--base-url",
        url.as_str(),
        "--model",
        "test-model",
        "--request-rate",
        "200",
        "--ready-check-timeout-sec",
        "0",
        "--disable-tqdm",
        "--no-store",
    ]);
    if command == ["bench", "serve"] {
        list.extend(["--save-result", "--result-dir", dir.path().to_str().unwrap(), "--result-filename", "r.json"]);
    }
    list.extend(extra);
    (servebench(args(&list)).await, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_server_is_stopped_by_max_failures_and_the_partial_run_is_saved() {
    let extra = ["--num-prompts", "300", "--max-concurrency", "1", "--max-failures", "4"];
    let (out, dir) = against_a_failing_server(&["bench", "serve"], &extra).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("Run stopped: ") && stdout.contains("requests failed (--max-failures 4)"), "{stdout}");
    assert!(stdout.contains("A stop rule ended the run ("), "{stdout}");
    let json = read_json(&dir.path().join("r.json"));
    let ours = &json["servebench"];
    assert_eq!(ours["interrupted"], true, "{ours}");
    assert!(ours["stopped_by"].as_str().unwrap().contains("--max-failures 4"), "{ours}");
    assert!(ours["not_sent"].as_u64().unwrap() > 100, "{ours}");
    assert_eq!(ours["config"]["traffic"]["stop"]["max_failures"], 4, "the rule is saved with the run");
}

#[tokio::test]
async fn bad_values_and_predictions_are_refused_with_what_to_do() {
    for (flag, value, want) in [
        ("--max-failures", "0", "--max-failures must be at least 1"),
        ("--stall-timeout", "0", "--stall-timeout must be a number of seconds above 0"),
        ("--stall-timeout", "inf", "--stall-timeout must be a number of seconds above 0"),
    ] {
        let out = servebench(args(&["bench", "serve", "--model", "m", "--port", "9", flag, value])).await;
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        assert!(text(&out.stderr).contains(want), "{}", text(&out.stderr));
    }
    let predict = ["sim", "predict", "--model", "Qwen/Qwen3-0.6B", "--hardware", "l40s", "--stall-timeout", "5"];
    let out = servebench(args(&predict)).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("a prediction runs its whole plan in virtual time"), "{}", text(&out.stderr));
    let sweep =
        ["sweep", "--predict", "--sim", "Qwen/Qwen3-0.6B@l40s", "--max-concurrency", "1,2", "--max-failures", "3"];
    let out = servebench(args(&sweep)).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("stop a run against a server"), "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_stopped_by_their_rules_still_merge_into_one_saved_run() {
    let extra = ["--num-prompts", "300", "--max-concurrency", "2", "--max-failures", "3", "--workers", "2"];
    let (out, dir) = against_a_failing_server(&["bench", "serve"], &extra).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{stdout}\n{}", text(&out.stderr));
    let json = read_json(&dir.path().join("r.json"));
    let ours = &json["servebench"];
    let why = ours["stopped_by"].as_str().unwrap();
    assert!(why.starts_with("rank ") && why.contains("(--max-failures 3)"), "{why}");
    assert_eq!(ours["shard"]["role"], "merged", "{ours}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_names_each_point_a_rule_stopped_and_exits_4() {
    let extra = ["--max-concurrency", "1,2", "--num-prompts", "100", "--max-failures", "2"];
    let (out, _dir) = against_a_failing_server(&["sweep"], &extra).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{stdout}\n{}", text(&out.stderr));
    let stopped: Vec<&str> = stdout.lines().filter(|l| l.starts_with("Stopped by a rule: ")).collect();
    assert_eq!(stopped.len(), 2, "{stdout}");
    assert!(stopped.iter().all(|l| l.contains("(--max-failures 2)")), "{stdout}");
}
