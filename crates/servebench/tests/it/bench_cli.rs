//! `servebench bench serve` end to end: the real binary against the scripted test server.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use servebench_client::testserver::{Script, TestServer, TestServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::{Arrivals, args, servebench, servebench_blocking, text};

/// `bench serve` of `test-model` at `base_url` with `flags`, storing nothing, without a bar.
fn serve_args(base_url: &str, flags: &[&str]) -> Vec<String> {
    let head = ["bench", "serve", "--base-url", base_url, "--model", "test-model"];
    args(&[&head[..], flags, &["--no-store", "--disable-tqdm"]].concat())
}

fn quick(tokens: u32) -> Script {
    Script { ttft: Duration::from_millis(5), itl: Duration::from_millis(2), tokens, ..Script::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_serve_prints_vllms_block_and_saves_a_json_that_agrees_with_it() {
    let server = TestServer::start(TestServerConfig::new(13, |_| quick(10))).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--num-prompts",
        "12",
        "--max-concurrency",
        "4",
        "--random-input-len",
        "16",
        "--random-output-len",
        "10",
        "--slice-seconds",
        "1",
    ];
    let save = ["--save-result", "--result-dir", dir.path().to_str().unwrap(), "--result-filename", "r.json"];
    let out = servebench(serve_args(&server.base_url(), &[&flags[..], &save[..]].concat())).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(stdout.contains("============ Serving Benchmark Result ============\n"), "{stdout}");
    assert!(stdout.contains("Successful requests:                     12        \n"), "{stdout}");
    assert!(stdout.contains("Failed requests:                         0         \n"), "{stdout}");
    assert!(stdout.contains("Maximum request concurrency:             4         \n"), "{stdout}");
    assert!(stdout.contains("Total generated tokens:                  120       \n"), "{stdout}");
    assert!(stdout.contains("Traffic request rate: inf\n"), "{stdout}");
    assert!(stdout.contains("Starting main benchmark run...\n"), "{stdout}");
    assert!(stdout.contains("the server's usage is authoritative"), "{stdout}");

    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap())
        .expect("the result file is JSON");
    assert_eq!(json["completed"], 12);
    assert_eq!(json["max_concurrency"], 4);
    assert_eq!(json["total_output_tokens"], 120);
    assert_eq!(json["backend"], "openai");
    assert_eq!(json["request_rate"], "inf");
    // The block's mean TTFT line is the JSON's value printed with two decimals.
    let mean_ttft = json["mean_ttft_ms"].as_f64().unwrap();
    assert!(stdout.contains(&format!("{:<40} {:<10.2}\n", "Mean TTFT (ms):", mean_ttft)), "{stdout}");
    assert_eq!(json["servebench"]["requests"].as_array().map(Vec::len), Some(12));
    // servebench's own sections: the health line after vLLM's block, the same verdict in the
    // JSON, one time slice per started second, and the steady state printed when there is one.
    let health = &json["servebench"]["health"];
    let state = health["verdict"]["state"].as_str().expect("a verdict");
    let line = stdout.lines().find(|l| l.starts_with("Client health: ")).expect("a health line");
    assert!(line.starts_with(&format!("Client health: {}", state.replace('_', "-"))), "{line} / {state}");
    assert!(stdout.find("Client health: ") > stdout.find("Serving Benchmark Result"), "{stdout}");
    assert!(health["timer_lateness"]["p99_ms"].is_number() && health["cpu"]["seconds"].is_number(), "{health}");
    let slices = json["servebench"]["slices"].as_array().unwrap();
    assert_eq!(slices.len() as f64, json["duration"].as_f64().unwrap().ceil(), "{slices:?}");
    assert_eq!(slices.iter().map(|s| s["completed"].as_u64().unwrap()).sum::<u64>(), 12);
    let steady = &json["servebench"]["steady_state"];
    assert_eq!(steady.is_object(), stdout.contains("== Steady state (concurrency 4) =="), "{stdout}");
    // The server truly saw at most 4 requests at once (the ready check is off by default).
    assert!(server.max_in_flight() <= 4, "server saw {} in flight", server.max_in_flight());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_requests_are_listed_counted_and_the_report_still_printed() {
    let server = TestServer::start(TestServerConfig::new(6, |info| {
        if info.seq % 2 == 0 { Script { status: 503, ..quick(4) } } else { quick(4) }
    }))
    .await
    .unwrap();
    let out = servebench(args(&[
        "bench",
        "serve",
        "--base-url",
        &server.base_url(),
        "--model",
        "test-model",
        "--num-prompts",
        "6",
        "--max-concurrency",
        "1",
        "--random-input-len",
        "8",
        "--random-output-len",
        "4",
        "--no-store",
    ]))
    .await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("Failed requests during benchmark run detected (capping to 10):\n"), "{stdout}");
    assert!(stdout.contains("Successful requests:                     3         \n"), "{stdout}");
    assert!(stdout.contains("Failed requests:                         3         \n"), "{stdout}");
    assert!(stdout.contains("Error 0: "), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_on_rules_hold_one_run_to_values_with_exit_code_3() {
    let server = TestServer::start(TestServerConfig::new(7, |_| quick(4))).await.unwrap();
    let flags = ["--num-prompts", "3", "--random-input-len", "8", "--random-output-len", "4"];
    let run = |rules: &'static str| {
        let base = server.base_url();
        async move { servebench(serve_args(&base, &[&flags[..], &["--fail-on", rules]].concat())).await }
    };
    let out = run("p99_ttft_ms>0.001").await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("FAIL p99_ttft_ms>0.001: "), "{stdout}");
    let out = run("failed_pct>50, p99_ttft_ms>100000").await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("pass failed_pct>50: 0.00 % within 50.00 %"), "{stdout}");
    // A change needs a baseline: a usage error, before anything is sent.
    let out = run("p99_ttft_ms>+10%").await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("servebench compare A B --fail-on"), "{}", text(&out.stderr));
    // One rule given twice (on two flags) would print its verdict twice: a usage error too.
    let twice = ["--fail-on", "failed_pct>50", "--fail-on", "failed_pct > 50"];
    let out = servebench(serve_args(&server.base_url(), &[&flags[..], &twice].concat())).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("--fail-on \"failed_pct>50\" is given twice (again as \"failed_pct > 50\")"), "{stderr}");
    let completions = server.truth().iter().filter(|t| t.path.ends_with("/completions")).count();
    assert_eq!(completions, 6, "the refused runs sent nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_which_every_request_failed_exits_non_zero() {
    let server = TestServer::start(TestServerConfig::new(3, |_| Script { status: 503, ..quick(4) })).await.unwrap();
    let out = servebench(args(&[
        "bench",
        "serve",
        "--base-url",
        &server.base_url(),
        "--model",
        "test-model",
        "--num-prompts",
        "3",
        "--random-input-len",
        "8",
        "--random-output-len",
        "4",
        "--no-store",
    ]))
    .await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("Failed requests:                         3         \n"), "{stdout}");
    assert!(stdout.contains("Every request failed"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_model_the_first_served_model_is_used() {
    let server = TestServer::start(TestServerConfig::new(2, |_| quick(3))).await.unwrap();
    let out = servebench(args(&[
        "bench",
        "serve",
        "--base-url",
        &server.base_url(),
        "--num-prompts",
        "2",
        "--random-input-len",
        "4",
        "--random-output-len",
        "3",
        "--no-store",
    ]))
    .await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("Model not specified, fetching first model from server...\n"), "{stdout}");
    assert!(stdout.contains("First model name: test-model, first model id: "), "{stdout}");
    assert!(stdout.contains("Successful requests:                     2 "), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_writes_the_plan_and_sends_nothing_and_replay_sends_it() {
    let server = TestServer::start(TestServerConfig::new(5, |_| quick(3))).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.jsonl");
    let common = [
        "bench",
        "serve",
        "--base-url",
        &server.base_url(),
        "--model",
        "test-model",
        "--num-prompts",
        "5",
        "--random-input-len",
        "6",
        "--random-output-len",
        "3",
        "--request-rate",
        "50",
        "--no-store",
    ];
    let mut dry = args(&common);
    dry.extend(args(&["--dry-run", plan.to_str().unwrap()]));
    let out = servebench(dry).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Wrote 5 planned requests"), "{}", text(&out.stdout));
    assert!(server.truth().iter().all(|t| t.path != "/v1/completions"), "a dry run must not send any request");
    let lines = std::fs::read_to_string(&plan).unwrap().lines().count();
    assert!(lines >= 5, "the plan file has {lines} lines");

    let mut replay = args(&common);
    replay.extend(args(&["--replay-plan", plan.to_str().unwrap()]));
    let out = servebench(replay).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("Successful requests:                     5 "), "{stdout}");
    // The server stops by itself after its fifth answer; its record is then complete.
    let truth = server.stopped().await;
    assert_eq!(truth.iter().filter(|t| t.path == "/v1/completions").count(), 5);
}

#[tokio::test]
async fn unsupported_vllm_flags_are_refused_by_name() {
    let out = servebench(args(&["bench", "serve", "--no-self-timed", "--num-prompts", "1"])).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--no-self-timed"), "{}", text(&out.stderr));
    let out = servebench(args(&["bench", "serve", "--dataset-name", "hf", "--model", "m", "--port", "9"])).await;
    assert_eq!(out.status.code(), Some(2), "a flag value refused before anything runs is bad usage");
    assert!(text(&out.stderr).contains("\"hf\" is not supported"), "{}", text(&out.stderr));
    let sim_url = ["bench", "serve", "--base-url", "sim://Qwen/Qwen3-0.6B@l40s", "--num-prompts", "1"];
    let out = servebench(args(&sim_url)).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("use --sim Qwen/Qwen3-0.6B@l40s"), "{}", text(&out.stderr));
    // The simulator counts its own GPUs.
    let sim_gpus = ["bench", "serve", "--sim", "Qwen/Qwen3-0.6B@l40s", "--gpus", "2", "--num-prompts", "1"];
    let out = servebench(args(&sim_gpus)).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--gpus 2: the simulator counts its own GPUs"), "{}", text(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_the_run_and_still_prints_and_saves_what_was_measured() {
    // Slow streams: 40 requests of 2 s each, 4 at a time, would take 20 s.
    let arrivals = Arrivals::default();
    let seen = arrivals.clone();
    let server = TestServer::start(TestServerConfig::new(40, move |info| {
        seen.saw(info);
        Script { ttft: Duration::from_millis(20), itl: Duration::from_millis(200), tokens: 10, ..Script::default() }
    }))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = server.base_url();
    let result_dir = dir.path().to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_servebench"))
            .args([
                "bench",
                "serve",
                "--base-url",
                &url,
                "--model",
                "test-model",
                "--num-prompts",
                "40",
                "--max-concurrency",
                "4",
                "--random-input-len",
                "8",
                "--random-output-len",
                "10",
                "--save-result",
                "--result-dir",
                &result_dir,
                "--result-filename",
                "partial.json",
                "--no-store",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the servebench binary starts");
        // With at most 4 in flight, the 8th request is sent only once the first 4 have finished:
        // interrupt the second wave then, however long the first one took.
        arrivals.wait_for(8);
        let killed = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status();
        assert!(killed.is_ok_and(|s| s.success()), "could not send SIGINT");
        child.wait_with_output().expect("servebench exits")
    })
    .await
    .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(stdout.contains("============ Serving Benchmark Result ============"), "{stdout}");
    assert!(stdout.contains("Run interrupted: "), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("partial.json")).unwrap()).unwrap();
    assert_eq!(json["servebench"]["interrupted"], true);
    let completed = json["completed"].as_u64().unwrap();
    assert!((4..40).contains(&completed), "completed {completed}: the first wave finishes, not all 40");
    assert!(json["servebench"]["not_sent"].as_u64().unwrap() > 0);
}

/// A front for `backend` that answers vLLM's profiler calls itself and relays every other
/// connection to the backend; it records when each profiler call arrived. It takes at most
/// `connections` connections.
async fn profiler_front(
    backend: std::net::SocketAddr,
    connections: usize,
) -> (std::net::SocketAddr, Arc<Mutex<Vec<(String, Instant)>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&calls);
    tokio::spawn(async move {
        for _ in 0..connections {
            let Ok((mut client, _)) = listener.accept().await else { return };
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                // Each connection is routed by its first request's head.
                let mut head = Vec::new();
                let mut buf = [0_u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match client.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_string();
                if line.contains("_profile ") {
                    seen.lock().unwrap().push((line, Instant::now()));
                    let _ =
                        client.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
                    return;
                }
                let Ok(mut upstream) = TcpStream::connect(backend).await else { return };
                if upstream.write_all(&head).await.is_ok() {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                }
            });
        }
    });
    (addr, calls)
}

fn profiled_run(base_url: &str) -> Vec<String> {
    let flags = ["--num-prompts", "4", "--max-concurrency", "2", "--random-input-len", "8", "--random-output-len", "3"];
    serve_args(base_url, &[&flags[..], &["--profile"]].concat())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_starts_the_servers_profiler_before_the_run_and_stops_it_after() {
    let server = TestServer::start(TestServerConfig::new(4, |_| quick(3))).await.unwrap();
    let (front, calls) = profiler_front(server.addr(), 16).await;
    let out = servebench(profiled_run(&format!("http://{front}"))).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    let at = |needle: &str| stdout.find(needle).unwrap_or_else(|| panic!("{needle:?} missing from:\n{stdout}"));
    assert!(at("Starting profiler...\nProfiler started\n") < at("Starting main benchmark run...\n"), "{stdout}");
    let block_end = at("Successful requests:");
    assert!(at("Stopping profiler...\nProfiler stopped\n") > block_end, "{stdout}");

    let calls = calls.lock().unwrap().clone();
    let paths: Vec<&str> = calls.iter().map(|(line, _)| line.as_str()).collect();
    assert_eq!(paths, ["POST /start_profile HTTP/1.1", "POST /stop_profile HTTP/1.1"]);
    let truth = server.stopped().await;
    let requests: Vec<_> = truth.iter().filter(|t| t.path == "/v1/completions").collect();
    assert_eq!(requests.len(), 4);
    assert!(requests.iter().all(|t| calls[0].1 < t.arrived && t.ended < calls[1].1), "the run is between the calls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_a_profiler_gets_a_warning_and_the_run_goes_on() {
    // One answer more than the run needs, so the server is still up for /stop_profile.
    let server = TestServer::start(TestServerConfig::new(5, |_| quick(3))).await.unwrap();
    let out = servebench(profiled_run(&server.base_url())).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(stdout.contains("Starting profiler...\nWARNING: could not start the server's profiler (POST "), "{stdout}");
    assert!(stdout.contains("/start_profile: HTTP 404 Not Found); the run goes on."), "{stdout}");
    assert!(stdout.contains("Stopping profiler...\nWARNING: could not stop the server's profiler"), "{stdout}");
    assert!(!stdout.contains("Profiler started") && !stdout.contains("Profiler stopped"), "{stdout}");
    assert!(stdout.contains("Successful requests:                     4 "), "{stdout}");
    // A 404 is recorded before it is sent, so the record is complete once servebench exited.
    let truth = server.truth();
    let posts: Vec<_> = truth.iter().filter(|t| t.path.ends_with("_profile")).map(|t| t.path.as_str()).collect();
    assert_eq!(posts, ["/start_profile", "/stop_profile"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lora_modules_name_the_adapter_of_each_request_and_warm_up_uses_the_base_model() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    // Request 0 once as the initial test run, one warm-up, then the six requests.
    let server = TestServer::start(TestServerConfig::new(8, move |info| {
        let body: serde_json::Value = serde_json::from_slice(info.body).unwrap_or_default();
        sink.lock().unwrap().push(body["model"].as_str().unwrap_or_default().to_string());
        quick(2)
    }))
    .await
    .unwrap();
    let flags = ["--num-prompts", "6", "--max-concurrency", "1", "--num-warmups", "1", "--random-input-len", "8"];
    let lora = ["--random-output-len", "2", "--lora-modules", "ad-a", "ad-b", "--lora-assignment", "round-robin"];
    let out = servebench(serve_args(&server.base_url(), &[&flags[..], &lora[..]].concat())).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(stdout.contains("Successful requests:                     6 "), "{stdout}");
    let seen = seen.lock().unwrap().clone();
    // One request at a time, so the server sees them in order.
    let (probes, run) = seen.split_at(seen.len() - 6);
    assert!(!probes.is_empty() && probes.iter().all(|m| m == "test-model"), "{seen:?}");
    assert_eq!(run, ["ad-a", "ad-b", "ad-a", "ad-b", "ad-a", "ad-b"]);

    // The simulator serves no adapters: refused with the flag named, before and after parsing.
    let predict = servebench(args(&["sim", "predict", "--model", "Qwen/Qwen3-0.6B", "--lora-modules", "a"])).await;
    assert_eq!(predict.status.code(), Some(2), "{}", text(&predict.stderr));
    assert!(text(&predict.stderr).contains("--lora-modules is not supported by servebench's simulator commands"));
    let sim = ["bench", "serve", "--sim", "Qwen/Qwen3-0.6B@h100-sxm", "--lora-modules", "a", "--num-prompts", "2"];
    let sim = servebench(args(&sim)).await;
    assert_eq!(sim.status.code(), Some(2), "{}", text(&sim.stderr));
    assert!(text(&sim.stderr).contains("the simulator serves no LoRA adapters"), "{}", text(&sim.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plot_timeline_writes_a_page_of_every_request_beside_the_result_named_as_vllm_names_it() {
    // Token gaps of 30 ms: orange between the default thresholds of 25 and 50 ms.
    let slow =
        Script { ttft: Duration::from_millis(5), itl: Duration::from_millis(30), tokens: 4, ..Script::default() };
    let server = TestServer::start(TestServerConfig::new(16, move |_| slow.clone())).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let run = |extra: &[&str]| {
        let flags = [&["--num-prompts", "6", "--max-concurrency", "3", "--random-output-len", "4"][..], extra].concat();
        servebench(serve_args(&server.base_url(), &flags))
    };
    let rows = |page: &str| page.matches("<g class=\"request\"").count();
    // Shapes of a colour in the requests' rows (the legend has one of each too).
    let in_rows = |page: &str, colour: &str| {
        let rows: String = page.split("<g class=\"request\"").skip(1).map(|g| &g[..g.find("</g>").unwrap()]).collect();
        rows.matches(&format!("fill=\"{colour}\"")).count()
    };
    let out = run(&[
        "--plot-timeline",
        "--plot-dataset-stats",
        "--save-result",
        "--result-dir",
        d,
        "--result-filename",
        "r.json",
    ])
    .await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let path = dir.path().join("r.timeline.html");
    assert!(stdout.contains(&format!("Timeline plot saved to: {}\n", path.display())), "{stdout}");
    assert!(dir.path().join("r.json").is_file());
    let page = std::fs::read_to_string(&path).unwrap();
    assert_eq!(rows(&page), 6);
    assert_eq!(in_rows(&page, "#ff7f0e"), 6, "one orange run of gaps a request");
    assert!(page.contains("6 requests sent at most 3 at a time"), "{page}");
    // vLLM's four panels of the requests' tokens, as an SVG beside the result too.
    let stats = dir.path().join("r.dataset_stats.svg");
    assert!(stdout.contains(&format!("Dataset statistics plot saved to: {}\n", stats.display())), "{stdout}");
    let figure = std::fs::read_to_string(&stats).unwrap();
    assert!(figure.starts_with("<svg xmlns=") && figure.matches("<svg x=").count() == 4, "{figure}");
    assert!(figure.contains(">Output tokens distribution</title>"));

    // Written without --save-result too, under vLLM's default name; thresholds of 1 and 2 ms
    // make every gap slow.
    let out = run(&["--plot-timeline", "--timeline-itl-thresholds", "1,2", "--result-dir", d]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pages: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("openai-infqps-concurrency3-test-model-") && n.ends_with(".timeline.html"))
        .collect();
    assert_eq!(pages.len(), 1, "{pages:?}");
    let page = std::fs::read_to_string(dir.path().join(&pages[0])).unwrap();
    assert_eq!(in_rows(&page, "#d62728"), 6, "one red run of gaps a request");
    let results =
        dir.path().read_dir().unwrap().filter(|e| e.as_ref().unwrap().path().extension() == Some("json".as_ref()));
    assert_eq!(results.count(), 1, "no result JSON without --save-result");

    // Thresholds that are not two numbers, the lower first, are refused before anything runs.
    for bad in ["25", "50,25", "a,b", "-1,5", "1,2,3", "1,inf"] {
        let out = run(&["--plot-timeline", &format!("--timeline-itl-thresholds={bad}")]).await;
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(text(&out.stderr).contains("give two numbers of milliseconds, the lower first"), "{bad}");
    }
}

#[test]
fn a_sweep_plots_a_timeline_page_for_each_point_even_when_its_results_append_to_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let pages = |sub: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join(sub))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    };
    for (sub, extra) in [("apart", &[][..]), ("appended", &["--append-result", "--result-filename", "all.json"][..])] {
        let result_dir = format!("{d}/{sub}");
        let flags = [
            &["sweep", "--predict", "--sim", "Qwen/Qwen3-0.6B@l40s", "--num-prompts", "4", "--max-concurrency", "1,2"]
                [..],
            &["--random-output-len", "8", "--plot-timeline", "--no-store", "--result-dir", &result_dir],
            extra,
        ]
        .concat();
        let out = servebench_blocking(&args(&flags));
        assert!(out.status.success(), "{}\n{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(text(&out.stdout).matches("Timeline plot saved to: ").count(), 2);
    }
    let apart = pages("apart");
    assert_eq!(apart.len(), 2, "{apart:?}");
    assert!(apart[0].ends_with("-c1.timeline.html") && apart[1].ends_with("-c2.timeline.html"), "{apart:?}");
    assert_eq!(pages("appended"), ["all-Qwen3-0.6B-c1.timeline.html", "all-Qwen3-0.6B-c2.timeline.html", "all.json"]);
}
