//! `servebench sweep` end to end: the real binary against the scripted test server (real
//! time, a few hundred milliseconds) and the simulator in virtual time (`--predict`), then
//! `compare` and `report` on what it stored.

use std::path::Path;
use std::time::Duration;

use servebench_client::testserver::{Script, TestServer, TestServerConfig};
use servebench_store::{RunFilter, RunKind, RunRow, Store};

use crate::common::{Arrivals, SMALL_SEARCH, args, servebench, servebench_blocking, text};

fn quick(tokens: u32) -> Script {
    Script { ttft: Duration::from_millis(3), itl: Duration::from_millis(1), tokens, ..Script::default() }
}

/// The runs of the store labelled `key=value`, in order.
fn runs_labelled(db: &Path, key: &str, value: &str) -> Vec<RunRow> {
    let store = Store::open(db).unwrap();
    store.list(&RunFilter { labels: vec![(key.into(), Some(value.into()))], ..RunFilter::default() }).unwrap()
}

/// The result files a sweep saved in `dir`, by what follows `model_tail` in their names (the
/// varying settings: `tp1-c32.json`), in name order.
fn result_files(dir: &Path, model_tail: &str) -> std::collections::BTreeMap<String, std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?.to_string();
            let short = name.rsplit_once(model_tail).map_or(name.clone(), |(_, s)| s.to_string());
            name.ends_with(".json").then_some((short, path))
        })
        .collect()
}

/// A sweep predicted in virtual time with `flags`, its results saved in `dir` and kept in a
/// store there under sweep id `id`: the store's path, stdout and stderr, once it succeeded.
fn saved_prediction(dir: &Path, id: &str, flags: &[&str]) -> (std::path::PathBuf, String, String) {
    let db = dir.join("runs.db");
    let (dir_s, db_s) = (dir.to_str().unwrap(), db.to_str().unwrap());
    let saving = ["--predict", "--save-result", "--result-dir", dir_s, "--db", db_s, "--sweep-id", id];
    let argv: Vec<&str> = std::iter::once("sweep").chain(flags.iter().copied()).chain(saving).collect();
    let out = servebench_blocking(&args(&argv));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    (db, stdout, stderr)
}

/// The text from the sweep's closing rule on: its tables and notes.
fn closing(stdout: &str) -> &str {
    let rule = format!("\n{}\n", "=".repeat(50));
    let at = stdout.rfind(&rule).unwrap_or_else(|| panic!("no closing rule in\n{stdout}"));
    &stdout[at + rule.len()..]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grid_runs_every_point_repeated_labelled_and_saved_then_compares_them() {
    let server = TestServer::start(TestServerConfig::new(16, |_| quick(3))).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let out = servebench(args(&[
        "sweep",
        "--base-url",
        &server.base_url(),
        "--model",
        "test-model",
        "--max-concurrency",
        "1,2",
        "--num-prompts",
        "4",
        "--random-input-len",
        "8",
        "--random-output-len",
        "3",
        "--repeats",
        "2",
        "--save-result",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--sweep-id",
        "grid1",
        "--disable-tqdm",
    ]))
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // Every run is a full bench run under a heading people paste reports with.
    assert_eq!(stdout.matches("============ Serving Benchmark Result ============").count(), 4, "{stdout}");
    assert!(stdout.contains("\nResults test-model\nmax_concurrency: 2\nrepeat: 2\n"), "{stdout}");
    assert!(stderr.contains("point 2/2 (repeat 2/2): model=test-model max_concurrency=2\n"), "{stderr}");

    let rows = runs_labelled(&db, "sweep", "grid1");
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r.kind == RunKind::Sweep && r.completed == 4), "{rows:?}");
    let labels: Vec<(Option<&str>, Option<&str>, Option<&str>)> =
        rows.iter().map(|r| (r.label("model"), r.label("max_concurrency"), r.label("repeat"))).collect();
    let m = Some("test-model");
    assert_eq!(
        labels,
        [(m, Some("1"), Some("1")), (m, Some("1"), Some("2")), (m, Some("2"), Some("1")), (m, Some("2"), Some("2"))]
    );
    // One result file per run, each named after its point.
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 4, "{files:?}");
    assert!(files.iter().any(|f| f.ends_with("-c2-r2.json")), "{files:?}");

    // The closing table is `compare`'s pivot, with the spread of the repeats after it.
    let end = closing(&stdout);
    assert!(end.starts_with("Sweep grid1: 4 runs finished\n"), "{end}");
    assert!(end.contains("Output throughput (tok/s) by max_concurrency"), "{end}");
    assert!(end.contains("Spread over repeats: mean ± standard deviation (latencies in ms)"), "{end}");
    let spread = end.lines().find(|l| l.starts_with("model=test-model max_concurrency=2 ")).unwrap_or("");
    assert_eq!(spread.split_whitespace().nth(2), Some("2/2"), "{end}");
    assert!(spread.contains(" ± "), "{end}");
    let again = format!("servebench compare --label sweep=grid1 --db {}", db.display());
    assert!(end.contains(&again), "{end}");
    let compare = servebench(args(&["compare", "--label", "sweep=grid1", "--db", db.to_str().unwrap()])).await;
    let compared = text(&compare.stdout);
    assert!(compare.status.success(), "{}", text(&compare.stderr));
    assert!(end.contains(&compared), "the sweep's table is compare's:\n{compared}\n---\n{end}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_point_is_recorded_and_the_sweep_goes_on() {
    let live = TestServer::start(TestServerConfig::new(3, |_| quick(2))).await.unwrap();
    let broken = TestServer::start(TestServerConfig::new(3, |_| Script { status: 503, ..quick(2) })).await.unwrap();
    // A port nothing listens on.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let urls = format!("{dead},{},{}", live.base_url(), broken.base_url());
    let out = servebench(args(&[
        "sweep",
        "--base-url",
        &urls,
        "--num-prompts",
        "3",
        "--random-input-len",
        "4",
        "--random-output-len",
        "2",
        "--db",
        db.to_str().unwrap(),
        "--sweep-id",
        "partly",
        "--disable-tqdm",
    ]))
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // The dead server's point fails before it runs (no model to ask for); the others run.
    assert!(stderr.contains("point 1/3 failed: could not fetch the model list from"), "{stderr}");
    assert!(stderr.contains("point 3/3: every request failed (3; first: "), "{stderr}");
    let end = closing(&stdout);
    assert!(end.starts_with("Sweep partly: 2 runs finished, 1 failed\n"), "{end}");
    assert!(end.contains(&format!("Failed: model=? base_url={dead} (repeat 1): could not fetch")), "{end}");
    // Without --model each server is asked: its model id is the root it lists.
    let all_failed = format!("Every request failed: model=servebench/test-model base_url={}", broken.base_url());
    assert!(end.contains(&all_failed), "{end}");
    let rows = runs_labelled(&db, "sweep", "partly");
    let kept: Vec<(Option<&str>, u64)> = rows.iter().map(|r| (r.label("base_url"), r.completed)).collect();
    assert_eq!(kept, [(Some(live.base_url().as_str()), 3), (Some(broken.base_url().as_str()), 0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_the_grid_after_keeping_the_run_in_progress() {
    // Each request streams for about 0.4 s; the first point (4 requests, one at a time) is
    // interrupted, the other two never start.
    let arrivals = Arrivals::default();
    let seen = arrivals.clone();
    let server = TestServer::start(TestServerConfig::new(40, move |info| {
        seen.saw(info);
        Script { ttft: Duration::from_millis(20), itl: Duration::from_millis(100), tokens: 4, ..Script::default() }
    }))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let argv = args(&[
        "sweep",
        "--base-url",
        &server.base_url(),
        "--model",
        "test-model",
        "--max-concurrency",
        "1,2,4",
        "--num-prompts",
        "4",
        "--random-input-len",
        "4",
        "--random-output-len",
        "4",
        "--db",
        db.to_str().unwrap(),
        "--sweep-id",
        "stopped",
    ]);
    let (out, stderr) = tokio::task::spawn_blocking(move || {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_servebench"))
            .args(&argv)
            .env_remove("SERVEBENCH_DB")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the servebench binary starts");
        // Once the first point has started and sent its first request, interrupt.
        let (started, lines) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.starts_with("point 1/3") {
                    let _ = started.send(());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        lines.recv_timeout(Duration::from_secs(20)).expect("the first point starts");
        arrivals.wait_for(1);
        let killed = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status();
        assert!(killed.is_ok_and(|s| s.success()), "could not send SIGINT");
        (child.wait_with_output().expect("servebench exits"), reader.join().unwrap())
    })
    .await
    .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("Run interrupted: "), "{stdout}");
    assert!(!stderr.contains("point 2/3"), "{stderr}");
    assert!(closing(&stdout).starts_with("Sweep stopped: 1 run finished (interrupted)\n"), "{stdout}");
    let rows = runs_labelled(&db, "sweep", "stopped");
    assert_eq!(rows.len(), 1);
    assert!(rows[0].interrupted && rows[0].completed < 4, "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_points_run_over_http_in_real_time() {
    let out = servebench(args(&[
        "sweep",
        "--sim",
        "Qwen/Qwen3-0.6B@h100-sxm",
        "--num-prompts",
        "2,3,4",
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
        "--no-store",
        "--disable-tqdm",
    ]))
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(stdout.matches("Simulating Qwen/Qwen3-0.6B@h100-sxm at http://127.0.0.1:").count(), 3, "{stdout}");
    let end = closing(&stdout);
    assert!(end.contains("By num_prompts\n"), "{end}");
    assert!(end.contains("Not kept in the run store (--no-store)"), "{end}");
}

/// Reference 000 (models at one load) and 001 (a num_prompts sweep), small: fewer models and
/// points than docs/reproduce.md, the same commands otherwise. Then `compare` and `report`.
#[test]
fn the_reference_sweeps_reproduce_in_virtual_time_and_compare_and_report_render_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let db = db.to_str().unwrap();
    let models = ["Qwen/Qwen3-8B", "Qwen/Qwen3-4B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B", "meta-llama/Llama-3.2-1B"];
    let sims: Vec<String> = models.iter().map(|m| format!("{m}@dgx-spark")).collect();
    let out = servebench_blocking(&args(&[
        "sweep",
        "--sim",
        &sims.join(","),
        "--max-concurrency",
        "4",
        "--num-prompts",
        "20",
        "--random-input-len",
        "128",
        "--random-output-len",
        "128",
        "--predict",
        "--db",
        db,
        "--sweep-id",
        "r000",
    ]));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    for m in models {
        assert!(stdout.contains(&format!("\nResults {m}\n")), "{stdout}");
    }
    // The model table: one row per model, named by it.
    let end = closing(&stdout);
    let table: Vec<&str> =
        end.lines().skip_while(|l| !l.starts_with("Runs (latencies in ms)")).skip(2).take(5).collect();
    let names: Vec<&str> = table.iter().map(|l| l.split_whitespace().nth(1).unwrap_or("")).collect();
    assert_eq!(names, models, "{end}");
    let rows = runs_labelled(Path::new(db), "sweep", "r000");
    assert!(rows.iter().all(|r| r.kind == RunKind::Predict && r.completed == 20 && r.max_concurrency == Some(4)));
    let labelled: Vec<Option<&str>> = rows.iter().map(|r| r.label("model")).collect();
    assert_eq!(labelled, models.map(Some));
    // What the command line set is labelled too, so sweeps saved under one name stay apart.
    let given = ["hardware=dgx-spark", "random_input_len=128", "random_output_len=128", "max_concurrency=4"];
    for (key, value) in given.map(|l| l.split_once('=').unwrap()) {
        assert!(rows.iter().all(|r| r.label(key) == Some(value)), "{key}: {rows:?}");
    }

    let out = servebench_blocking(&args(&[
        "sweep",
        "--sim",
        "meta-llama/Llama-3.1-8B-Instruct@dgx-spark",
        "--sim-option",
        "precision=fp8",
        "--sim-option",
        "kv-cache-dtype=fp8",
        "--sim-option",
        "max-num-batched-tokens=512",
        "--sim-option",
        "max-num-seqs=256",
        "--sim-option",
        "enable-prefix-caching=false",
        "--sim-option",
        "graph-max-tokens=256",
        "--sim-option",
        "graph-max-ctx=8192",
        "--sim-option",
        "eager-layer-us=550",
        "--num-prompts",
        "1,2,4,8,16",
        "--random-input-len",
        "80",
        "--random-output-len",
        "60",
        "--random-range-ratio",
        r#"{"input":0,"output":0.5}"#,
        "--predict",
        "--db",
        db,
        "--sweep-id",
        "r001",
        "--slo",
        "p99_ttft_ms<=600",
    ]));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    let end = closing(&stdout);
    let header = end.lines().skip_while(|l| *l != "By num_prompts").nth(1).unwrap_or("");
    assert_eq!(header.split_whitespace().collect::<Vec<_>>(), ["1", "2", "4", "8", "16"], "{end}");
    assert!(end.contains("SLOs: p99_ttft_ms<=600\n"), "{end}");
    assert!(end.contains(" of 5 points meet p99_ttft_ms<=600.\n"), "{end}");
    let rows = runs_labelled(Path::new(db), "sweep", "r001");
    let counts: Vec<Option<&str>> = rows.iter().map(|r| r.label("num_prompts")).collect();
    assert_eq!(counts, ["1", "2", "4", "8", "16"].map(Some));

    for (id, first_line) in [("r000", "Runs (latencies in ms)"), ("r001", "By num_prompts")] {
        let label = format!("sweep={id}");
        let out = servebench_blocking(&args(&["compare", "--label", &label, "--db", db]));
        let compared = text(&out.stdout);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(compared.starts_with(first_line), "{compared}");
        let html = dir.path().join(format!("{id}.html"));
        let out = servebench_blocking(&args(&["report", "--label", &label, "--db", db, "-o", html.to_str().unwrap()]));
        assert!(out.status.success(), "{}", text(&out.stderr));
        let page = std::fs::read_to_string(&html).unwrap();
        assert!(page.starts_with("<!DOCTYPE html>") && page.contains("Llama-3"), "{id}: {} bytes", page.len());
    }
}

#[test]
fn an_slo_search_finds_the_highest_concurrency_and_keeps_every_probe() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let tail = ["p99_ttft_ms<=400,p90_tpot_ms<=25", "--db", db.to_str().unwrap(), "--sweep-id", "cap"];
    let out = servebench_blocking(&args(&[&["sweep"][..], &SMALL_SEARCH, &tail].concat()));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    // p90 is not among the default percentiles: the runs compute it.
    assert!(stdout.starts_with("The SLOs need these percentiles: --metric-percentiles 99,90\n"), "{stdout}");
    let end = closing(&stdout);
    let answer = end
        .lines()
        .find(|l| l.starts_with("Highest max_concurrency meeting p99_ttft_ms<=400 and p90_tpot_ms<=25: "))
        .unwrap_or_else(|| panic!("no answer in\n{end}"));
    let best: u64 = answer.split(": ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(answer.contains(&format!("; {} fails p99 TTFT (", best + 1)), "{answer}");
    assert!(end.contains("--repeats 3 judges each probe on the mean of three runs"), "{end}");

    let rows = runs_labelled(&db, "search", "cap");
    let probes: Vec<(u64, u64)> =
        rows.iter().map(|r| (r.max_concurrency.unwrap(), r.label("probe").unwrap().parse().unwrap())).collect();
    assert_eq!(probes.iter().map(|p| p.1).collect::<Vec<_>>(), (1..=probes.len() as u64).collect::<Vec<_>>());
    assert_eq!(&probes.iter().map(|p| p.0).collect::<Vec<_>>()[..3], [1, 2, 4]);
    assert!(probes.iter().any(|p| p.0 == best) && probes.iter().any(|p| p.0 == best + 1), "{probes:?}");
    // Prompts scale with the concurrency: two per slot.
    assert!(rows.iter().all(|r| r.num_prompts == r.max_concurrency.map(|c| 2 * c)), "{rows:?}");
}

#[test]
fn usage_errors_name_the_flag() {
    let out = servebench_blocking(&args(&["sweep", "--sim", "a@b,c@d", "--model", "x", "--predict"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("leave out --model"), "{}", text(&out.stderr));
    let out = servebench_blocking(&args(&["sweep", "--sim", "Qwen/Qwen3-8B@h100-sxm", "--slo", "p99_ttft_ms<5"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("invalid --slo \"p99_ttft_ms<5\""), "{}", text(&out.stderr));
    let out = servebench_blocking(&args(&["sweep", "--base-url", "http://127.0.0.1:9", "--gpu-hour-cost", "2"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("say how many with --gpus N"), "{}", text(&out.stderr));
    let out = servebench_blocking(&args(&["sweep", "--num-prompts", "1,two"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("\"two\" is not a valid value of --num-prompts"), "{}", text(&out.stderr));
    let sim = ["sweep", "--sim", "Qwen/Qwen3-8B@h100-sxm", "--predict", "--no-store", "--num-prompts", "4"];
    for (extra, said) in [
        (&["--max-concurrency", "1,4", "--max-concurrency", "1"][..], "--max-concurrency gives 1 twice"),
        (&["--request-rate", "inf,2,inf"], "--request-rate gives inf twice"),
        (&["--max-concurrency", "1,4", "--by", "zzz"], "--by zzz: this sweep varies max_concurrency; pick one"),
        (&["--by", "max_concurrency"], "--by max_concurrency: this sweep varies no setting"),
        (&["--gpu-hour-cost", "0"], "--gpu-hour-cost 0: give what one GPU costs an hour, a number above 0"),
    ] {
        let out = servebench_blocking(&args(&[&sim[..], extra].concat()));
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(text(&out.stderr).contains(said), "{extra:?}: {}", text(&out.stderr));
        assert!(text(&out.stdout).is_empty(), "{extra:?} ran: {}", text(&out.stdout));
    }
}

/// A predicted sweep with `--server-metrics`: each point carries the simulated engine's
/// telemetry, and the sweep's table shows the GPU's mean use beside the load.
#[test]
fn a_predicted_sweep_with_server_metrics_shows_the_gpu_s_use_beside_the_load() {
    let out = servebench_blocking(&args(&[
        "sweep",
        "--sim",
        "Qwen/Qwen3-0.6B@h100-sxm",
        "--max-concurrency",
        "1,4,16",
        "--num-prompts",
        "32",
        "--random-input-len",
        "256",
        "--random-output-len",
        "32",
        "--predict",
        "--server-metrics",
        "--no-store",
    ]));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert_eq!(stdout.matches("Server telemetry (vllm, simulated engine (virtual time), ").count(), 3, "{stdout}");
    let end = closing(&stdout);
    let row = end.lines().find(|l| l.starts_with("Mean GPU util (%)")).unwrap_or_else(|| panic!("{end}"));
    let values: Vec<f64> = row["Mean GPU util (%)".len()..].split_whitespace().map(|v| v.parse().unwrap()).collect();
    assert_eq!(values.len(), 3, "{row}");
    assert!(values.iter().all(|v| (0.0..=100.0).contains(v) && *v > 50.0), "{row}");
}

/// A serving option given several values is one deployment each: `tp=1,2` predicts the grid
/// at both sizes, labels and names each run by its size and lays the table out by it.
#[test]
fn a_sweep_over_serving_options_runs_each_deployment() {
    let dir = tempfile::tempdir().unwrap();
    let (db, stdout, stderr) = saved_prediction(
        dir.path(),
        "tps",
        &[
            "--sim",
            "Qwen/Qwen3-8B@h100-sxm",
            "--sim-option",
            "tp=1,2",
            "--max-concurrency",
            "1,32",
            "--num-prompts",
            "64",
            "--random-input-len",
            "512",
            "--random-output-len",
            "64",
            "--findings",
            "--gpu-hour-cost",
            "2",
        ],
    );
    assert!(stderr.contains("point 3/4: model=Qwen/Qwen3-8B tp=2 max_concurrency=1"), "{stderr}");
    let rows = runs_labelled(&db, "sweep", "tps");
    let sizes: Vec<(Option<&str>, Option<u64>)> = rows.iter().map(|r| (r.label("tp"), r.max_concurrency)).collect();
    assert_eq!(sizes, [(Some("1"), Some(1)), (Some("1"), Some(32)), (Some("2"), Some(1)), (Some("2"), Some(32))]);
    let files: Vec<String> = result_files(dir.path(), "-Qwen3-8B-").into_keys().collect();
    assert_eq!(files, ["tp1-c1.json", "tp1-c32.json", "tp2-c1.json", "tp2-c32.json"]);
    // The per-GPU table has a row per deployment; one stream gains less than twice from two GPUs.
    let end = closing(&stdout);
    let table: Vec<&str> =
        end.lines().skip_while(|l| !l.starts_with("Output throughput per GPU")).skip(1).take(3).collect();
    assert_eq!(table[0].split_whitespace().collect::<Vec<_>>(), ["tp", "1", "32"], "{end}");
    let per_gpu = |row: &str| -> Vec<f64> { row.split_whitespace().skip(1).map(|v| v.parse().unwrap()).collect() };
    let (one, two) = (per_gpu(table[1]), per_gpu(table[2]));
    assert!(table[1].starts_with("tp=1") && table[2].starts_with("tp=2"), "{end}");
    assert!(two[0] < one[0], "{end}");
    assert!(end.contains("Pareto frontier of output tok/s per GPU against tok/s per user"), "{end}");
    // At 2 an hour a GPU, a million tokens cost 2e6 / 3600 over the tok/s per GPU.
    let costs: Vec<&str> =
        end.lines().skip_while(|l| !l.starts_with("Cost per million output tokens ($/Mtok)")).skip(2).take(2).collect();
    for (row, served) in costs.iter().zip([&one, &two]) {
        for (c, g) in per_gpu(row).iter().zip(served.iter()) {
            assert!((c - 2e6 / 3600.0 / g).abs() < 0.01, "{row}: {c} at {g} tok/s/GPU");
        }
    }
}

#[test]
fn a_list_of_option_values_outside_a_sweep_says_where_lists_go() {
    let out = servebench_blocking(&args(&[
        "sim",
        "predict",
        "--model",
        "Qwen/Qwen3-8B",
        "--hardware",
        "h100-sxm",
        "--tp",
        "1",
        "--option",
        "max-num-seqs=32,64",
    ]));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "bad usage: {stderr}");
    assert!(stderr.contains("one value (`servebench sweep --sim-option max-num-seqs=A,B` sweeps a list)"), "{stderr}");
}

/// `--random-batch-size` as an axis: each pooling run carries its prompts so many a request,
/// is labelled and named by its batch, and the closing table sets inputs a second beside it.
#[test]
fn a_sweep_over_pooling_batch_sizes_counts_inputs_at_each() {
    let dir = tempfile::tempdir().unwrap();
    let (db, stdout, stderr) = saved_prediction(
        dir.path(),
        "batches",
        &[
            "--sim",
            "Qwen/Qwen3-0.6B@h100-sxm",
            "--backend",
            "openai-embeddings",
            "--random-batch-size",
            "1,8",
            "--num-prompts",
            "36",
            "--random-input-len",
            "128",
            "--max-concurrency",
            "2",
            "--slo",
            "input_sequence_throughput>=1",
        ],
    );
    assert!(stderr.contains("sweep batches: 2 points, 72 prompts in all"), "{stderr}");
    let rows = runs_labelled(&db, "sweep", "batches");
    let seen: Vec<(Option<&str>, u64)> = rows.iter().map(|r| (r.label("random_batch_size"), r.completed)).collect();
    // 36 prompts are 36 requests one at a time, 5 requests (4 of 8, the last of 4) eight at a time.
    assert_eq!(seen, [(Some("1"), 36), (Some("8"), 5)]);
    let files = result_files(dir.path(), "-Qwen3-0.6B-");
    assert_eq!(files.keys().collect::<Vec<_>>(), ["b1.json", "b8.json"]);
    for (name, path) in &files {
        let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(json["total_input_sequences"], 36, "{name}");
    }
    let end = closing(&stdout);
    let inputs = end.lines().find(|l| l.starts_with("Input throughput (inputs/s)")).unwrap_or_else(|| panic!("{end}"));
    let requests = end.lines().find(|l| l.starts_with("Request throughput (req/s)")).unwrap();
    // The two runs' columns (the comparison of two runs adds their difference after them).
    let nums = |row: &str| -> Vec<f64> {
        row.rsplit(')').next().unwrap().split_whitespace().take(2).map(|v| v.parse().unwrap()).collect()
    };
    let (inputs, requests) = (nums(inputs), nums(requests));
    // One prompt a request: inputs are requests; eight a request: more inputs than requests.
    assert_eq!(inputs[0], requests[0], "{end}");
    assert!(inputs[1] > 6.0 * requests[1], "{end}");
    assert!(stdout.contains("2 of 2 points meet input_sequence_throughput>=1"), "{stdout}");
}
