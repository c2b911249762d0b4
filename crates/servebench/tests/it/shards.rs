//! Sharded runs end to end: `bench serve --workers N` (local worker processes, a rendezvous,
//! one merged report), `bench serve --shard` workers merged by `servebench merge`, and the
//! merge's refusals.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use servebench_client::testserver::{Script, TestServer, TestServerConfig};

use crate::common::{args, read_json, servebench, text};

const PROMPTS: usize = 24;

fn fixed() -> Script {
    Script { ttft: Duration::from_millis(20), itl: Duration::from_millis(4), tokens: 6, ..Script::default() }
}

/// `bench serve` of the test model at `base_url` with `flags`, storing nothing, saving the
/// result in `dir` as `name`.
fn serve_args(base_url: &str, dir: &Path, name: &str, flags: &[&str]) -> Vec<String> {
    let head = ["bench", "serve", "--base-url", base_url, "--model", "test-model", "--disable-tqdm", "--no-store"];
    let load =
        ["--num-prompts", "24", "--max-concurrency", "8", "--random-input-len", "16", "--random-output-len", "6"];
    let save = ["--save-result", "--save-detailed", "--result-dir", dir.to_str().unwrap(), "--result-filename", name];
    args(&[&head[..], &load[..], &save[..], flags].concat())
}

/// `sweep` of the test model at `base_url` with requests of 16/6 tokens, storing nothing,
/// with `flags`.
fn sweep_args(base_url: &str, flags: &[&str]) -> Vec<String> {
    let head = ["sweep", "--base-url", base_url, "--model", "test-model", "--disable-tqdm", "--no-store"];
    let load = ["--random-input-len", "16", "--random-output-len", "6"];
    args(&[&head[..], &load[..], flags].concat())
}

/// Runs the workload with `--workers workers`; returns the result JSON and how many times
/// the server saw each planned request (by its `x-request-id`).
async fn run_with_workers(workers: &str) -> (Value, BTreeMap<usize, usize>) {
    let server = TestServer::start(TestServerConfig::new(PROMPTS, |_| fixed())).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = servebench(serve_args(&server.base_url(), dir.path(), "r.json", &["--workers", workers])).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(stdout.contains(&format!("Merged {workers} of {workers} workers (plan ")), "{stdout}");
    assert!(stdout.contains("Successful requests:                     24 "), "{stdout}");
    // Each rank's own client-health verdict, read from its result file.
    let ranks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("  rank ")).collect();
    assert_eq!(ranks.len(), workers.parse::<usize>().unwrap(), "{stdout}");
    assert!(
        ranks.iter().all(|l| l.contains(", client health ok") || l.contains(", client-bound from t = ")),
        "{stdout}"
    );
    // Request ids are the run's prefix (one for every worker) and the request's index in the plan.
    let mut seen = BTreeMap::new();
    let mut prefixes = std::collections::BTreeSet::new();
    for truth in server.truth().into_iter().filter(|t| t.path == "/v1/completions") {
        let id = truth.request_id.unwrap_or_default();
        prefixes.insert(id.rsplit_once('-').map(|(p, _)| p.to_string()).unwrap_or_default());
        let index: usize = id.rsplit('-').next().and_then(|i| i.parse().ok()).unwrap_or(usize::MAX);
        *seen.entry(index).or_insert(0) += 1;
    }
    assert_eq!(prefixes.len(), 1, "every worker's request ids share one prefix: {prefixes:?}");
    (read_json(&dir.path().join("r.json")), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_two_and_four_workers_send_every_planned_request_once_and_merge_them_all() {
    let mut means = Vec::new();
    for workers in ["1", "2", "4"] {
        let (json, seen) = run_with_workers(workers).await;
        let expected: BTreeMap<usize, usize> = (0..PROMPTS).map(|i| (i, 1)).collect();
        assert_eq!(seen, expected, "{workers} workers: every planned request exactly once");
        assert_eq!(json["completed"], 24);
        assert_eq!(json["max_concurrency"], 8, "the global cap, not a worker's part");
        assert_eq!(json["total_output_tokens"], 24 * 6);
        let records = json["servebench"]["requests"].as_array().unwrap();
        let indices: Vec<u64> = records.iter().map(|r| r["index"].as_u64().unwrap()).collect();
        assert_eq!(indices, (0..PROMPTS as u64).collect::<Vec<_>>(), "every shard's records, in plan order");
        assert_eq!(json["ttfts"].as_array().unwrap().len(), PROMPTS);
        let shard = &json["servebench"]["shard"];
        let n: u64 = workers.parse().unwrap();
        assert_eq!((shard["role"].as_str(), shard["world"].as_u64()), (Some("merged"), Some(n)));
        let split: Vec<u64> =
            shard["concurrency_split"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).collect();
        assert_eq!(split.iter().sum::<u64>(), 8);
        assert_eq!(split.len() as u64, n);
        let per_rank: Vec<u64> =
            shard["ranks"].as_array().unwrap().iter().map(|r| r["requests"].as_u64().unwrap()).collect();
        assert_eq!(per_rank, vec![PROMPTS as u64 / n; n as usize]);
        means.push((json["mean_ttft_ms"].as_f64().unwrap(), json["mean_tpot_ms"].as_f64().unwrap()));
    }
    // Fixed server timings: the merged figures are the single process's, within timer noise.
    let (ttft1, tpot1) = means[0];
    for &(ttft, tpot) in &means[1..] {
        assert!((ttft - ttft1).abs() < 15.0, "mean TTFT {ttft} ms vs {ttft1} ms in one process");
        assert!((tpot - tpot1).abs() < 3.0, "mean TPOT {tpot} ms vs {tpot1} ms in one process");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_against_the_simulator_merge_into_one_report_with_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let out = servebench(args(&[
        "bench",
        "serve",
        "--sim",
        "Qwen/Qwen3-8B@h100-sxm",
        "--workers",
        "4",
        "--num-prompts",
        "32",
        "--max-concurrency",
        "8",
        "--random-input-len",
        "64",
        "--random-output-len",
        "8",
        "--disable-tqdm",
        "--no-store",
        "--save-result",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--result-filename",
        "sim.json",
    ]))
    .await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    let json = read_json(&dir.path().join("sim.json"));
    assert_eq!(json["completed"], 32);
    assert_eq!(json["servebench"]["config"]["target"]["sim"]["model"], "Qwen/Qwen3-8B", "still a run of the simulator");
    let records = json["servebench"]["requests"].as_array().unwrap();
    assert_eq!(records.len(), 32);
    assert!(records.iter().all(|r| r["failure"].is_null() && r["output_tokens"] == 8));
    let ranks = json["servebench"]["shard"]["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 4);
    for r in &ranks[1..] {
        assert!(r["clock"]["samples"].as_u64() == Some(8), "every worker but rank 0 measured its clock: {r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_takes_the_workers_files_and_refuses_incomplete_or_foreign_sets() {
    let server = TestServer::start(TestServerConfig::new(PROMPTS + 12, |_| fixed())).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (rank, extra) in [("0/2", &[][..]), ("1/2", &[][..]), ("1/2", &["--seed", "7"][..])] {
        let name = format!("w{}{}.json", &rank[..1], if extra.is_empty() { "" } else { "-seed7" });
        let out = servebench(serve_args(&server.base_url(), d, &name, &[&["--shard", rank][..], extra].concat())).await;
        assert!(out.status.success(), "stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
        assert!(text(&out.stdout).contains(&format!("Shard {rank}: 12 of the plan's 24 requests")));
    }
    let file = |n: &str| d.join(n).to_str().unwrap().to_string();
    let merge = |inputs: &[String]| {
        let mut a = args(&["merge", "--no-store", "--result-dir", d.join("merged").to_str().unwrap()]);
        a.extend(inputs.iter().cloned());
        servebench(a)
    };

    let out = merge(&[file("w0-shard0of2.json"), file("w1-shard1of2.json")]).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(stdout.contains("Merged 2 of 2 workers (plan "), "{stdout}");
    assert!(stdout.contains("Successful requests:                     24 "), "{stdout}");
    let merged = std::fs::read_dir(d.join("merged")).unwrap().next().unwrap().unwrap().path();
    let json = read_json(&merged);
    assert_eq!(json["servebench"]["requests"].as_array().unwrap().len(), 24);
    assert_eq!(json["max_concurrency"], 8);

    let refusals = [
        (vec![file("w0-shard0of2.json")], "rank 1 of 2 missing (present: 0); pass every worker's result, or --partial"),
        (vec![file("w0-shard0of2.json"), file("w0-shard0of2.json")], "rank 0 appears twice"),
        (vec![file("w0-shard0of2.json"), file("w1-seed7-shard1of2.json")], "sent a plan with hash"),
        (
            vec![file("w0-shard0of2.json"), merged.to_str().unwrap().to_string()],
            "is not a worker's result of a sharded run",
        ),
    ];
    for (inputs, says) in refusals {
        let out = merge(&inputs).await;
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{inputs:?} merged");
        assert!(stderr.contains(says), "{inputs:?}: {stderr}");
    }

    let mut partial = vec![file("w0-shard0of2.json")];
    partial.insert(0, "--partial".into());
    let out = merge(&partial).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stderr:\n{}", text(&out.stderr));
    assert!(stdout.contains("PARTIAL: ranks missing: 1"), "{stdout}");
    assert!(stdout.contains("Successful requests:                     12 "), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rank_zero_alone_sends_the_probes_and_the_merge_reports_them() {
    let server = TestServer::start(TestServerConfig::new(200, |_| fixed())).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for rank in ["0/2", "1/2"] {
        let flags = ["--shard", rank, "--probe-request-rate", "20"];
        let out = servebench(serve_args(&server.base_url(), d, &format!("w{}.json", &rank[..1]), &flags)).await;
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
        assert_eq!(stdout.contains("Probe request rate: 20.0 req/s"), rank == "0/2", "{rank}: {stdout}");
    }
    let worker = |rank: usize| read_json(&d.join(format!("w{rank}-shard{rank}of2.json")));
    assert!(worker(0)["probe_completed"].as_u64().is_some_and(|n| n >= 1), "{}", worker(0));
    assert!(worker(1).get("probe_completed").is_none(), "rank 1 sends no probes");
    let merged_dir = d.join("merged");
    let mut merge = args(&["merge", "--no-store", "--result-dir", merged_dir.to_str().unwrap()]);
    merge.extend([0, 1].map(|r| d.join(format!("w{r}-shard{r}of2.json")).to_str().unwrap().to_string()));
    let out = servebench(merge).await;
    assert!(out.status.success(), "stderr:\n{}", text(&out.stderr));
    let merged = read_json(&std::fs::read_dir(&merged_dir).unwrap().next().unwrap().unwrap().path());
    assert_eq!(merged["probe_completed"], worker(0)["probe_completed"]);
    assert!(text(&out.stdout).contains("------------------Probe Requests------------------"), "{}", text(&out.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_with_workers_merges_each_point_from_every_workers_share() {
    let server = TestServer::start(TestServerConfig::new(200, |_| fixed())).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let points = ["--num-prompts", "8,16", "--max-concurrency", "4", "--workers", "2"];
    let save = ["--save-result", "--result-dir", dir.path().to_str().unwrap()];
    let out = servebench(sweep_args(&server.base_url(), &[&points[..], &save[..]].concat())).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert_eq!(stdout.matches("Merged 2 of 2 workers (plan ").count(), 2, "{stdout}");
    assert!(stdout.contains("Sweep ") && stdout.contains("2 runs finished"), "{stdout}");
    // One merged result per point, each with every planned request once.
    let mut completed: Vec<u64> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| read_json(&e.unwrap().path()))
        .map(|json| {
            let records = json["servebench"]["requests"].as_array().unwrap().len() as u64;
            assert_eq!(json["servebench"]["shard"]["world"], 2, "a merge of two workers");
            assert_eq!(json["completed"].as_u64(), Some(records));
            records
        })
        .collect();
    completed.sort_unstable();
    assert_eq!(completed, [8, 16]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_of_a_sharded_sweep_are_merged_one_run_per_point() {
    let server = TestServer::start(TestServerConfig::new(100, |_| fixed())).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for rank in ["0/2", "1/2"] {
        let flags = ["--num-prompts", "8,16", "--shard", rank, "--result-dir", d.to_str().unwrap()];
        let out = servebench(sweep_args(&server.base_url(), &flags)).await;
        assert!(out.status.success(), "stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
    }
    // Workers on other machines, or started in another second, stamp their own date and time
    // on their files: rank 1's are given another day's.
    for path in std::fs::read_dir(d).unwrap().map(|e| e.unwrap().path()) {
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let stamp = name.split('-').collect::<Vec<_>>().windows(2).find_map(|w| {
            let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
            (digits(w[0], 8) && digits(w[1], 6)).then(|| format!("{}-{}", w[0], w[1]))
        });
        let stamp = stamp.unwrap_or_else(|| panic!("{name} carries no date and time"));
        if name.contains("shard1of2") {
            std::fs::rename(&path, d.join(name.replace(&stamp, "20000101-000000"))).unwrap();
        }
    }
    let merged = d.join("merged");
    let merge = || {
        servebench(args(&[
            "merge",
            "--per-run",
            "--no-store",
            "--result-dir",
            merged.to_str().unwrap(),
            d.to_str().unwrap(),
        ]))
    };
    let out = merge().await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert_eq!(stdout.matches("Merged 2 of 2 workers (plan ").count(), 2, "{stdout}");
    let mut names: Vec<(String, usize)> = std::fs::read_dir(&merged)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let records = read_json(&p)["servebench"]["requests"].as_array().unwrap().len();
            (p.file_name().unwrap().to_str().unwrap().to_string(), records)
        })
        .collect();
    names.sort_by_key(|n| n.1);
    assert_eq!(names.iter().map(|n| n.1).collect::<Vec<_>>(), [8, 16], "{names:?}");
    assert!(names.iter().all(|(n, _)| !n.contains("shard") && n.ends_with(".json")), "{names:?}");

    // One point's rank lost: the other point is still merged and saved, the merge fails naming it.
    let lost = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_str().unwrap().contains("n16") && p.to_str().unwrap().ends_with("-shard1of2.json"))
        .expect("the 16-prompt point's rank 1 file");
    std::fs::remove_file(&lost).unwrap();
    std::fs::remove_dir_all(&merged).unwrap();
    let out = merge().await;
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("rank 1 of 2 missing") && stderr.contains("1 of 2 runs could not be merged"), "{stderr}");
    assert_eq!(std::fs::read_dir(&merged).unwrap().count(), 1, "the complete point is saved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_slo_search_with_workers_judges_each_probe_on_its_merged_run() {
    let server = TestServer::start(TestServerConfig::new(400, |_| fixed())).await.unwrap();
    let search = ["--search", "max-concurrency", "--slo", "p99_ttft_ms<=5000", "--search-min", "2"];
    let probes = ["--search-max", "8", "--scale-num-prompts", "2", "--workers", "2"];
    let out = servebench(sweep_args(&server.base_url(), &[&search[..], &probes[..]].concat())).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    // Probes 2, 4 and 8, each sent by both workers and merged before the next was chosen.
    let merged: Vec<&str> = stdout.lines().filter(|l| l.starts_with("Merged 2 of 2 workers")).collect();
    assert_eq!(merged.len(), 3, "{stdout}");
    for (line, requests) in merged.iter().zip([4, 8, 16]) {
        assert!(line.contains(&format!("): {requests} requests")), "{line}");
    }
    assert!(stdout.contains("Highest max_concurrency meeting p99_ttft_ms<=5000: 8"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_sweeps_refuse_what_workers_cannot_share() {
    let base = ["sweep", "--sim", "Qwen/Qwen3-0.6B@h100-sxm", "--num-prompts", "4,8", "--no-store"];
    for (extra, expected) in [
        (&["--workers", "2", "--predict"][..], "--predict runs in virtual time"),
        (&["--shard", "0/2", "--search", "max-concurrency", "--slo", "p99_ttft_ms<500"][..], "an SLO search chooses"),
        (&["--shard", "0/2", "--start-at", "1750000000"][..], "--start-at is one instant"),
    ] {
        let out = servebench(args(&[&base[..], extra].concat())).await;
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{extra:?} should be refused");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
    }
}
