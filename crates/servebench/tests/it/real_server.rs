//! `bench serve` against a server servebench did not write: llama.cpp's `llama-server` with a
//! tiny random-weight model carrying the real Qwen3 tokenizer, built by
//! `scripts/real-server/setup.sh` (outside the clone: `$SERVEBENCH_REAL_SERVER_DIR`, else
//! `~/.cache/servebench-real-server`). On a machine without it these tests say so and pass;
//! with `SERVEBENCH_REQUIRE_REAL_SERVER` set they fail instead.
//!
//! Each test starts its own server on a free loopback port with 4 slots, under `timeout` so it
//! stops by itself, and kills it when done.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{args, read_json, servebench, text};

/// The repo's Qwen3 tokenizer: the model's own, so the client's counts are the server's.
fn tokenizer() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/tokenizers/qwen3").display().to_string()
}

/// Where the setup script put the server and the model, if it ran.
fn built() -> Option<(PathBuf, PathBuf)> {
    let dir = std::env::var_os("SERVEBENCH_REAL_SERVER_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/servebench-real-server")))?;
    let (server, model) = (dir.join("build/bin/llama-server"), dir.join("tiny-qwen3.gguf"));
    (server.is_file() && model.is_file()).then_some((server, model))
}

/// One server at a time: each uses both cores of a small machine, and the other tests of this
/// binary run beside them.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A running llama-server; killed on drop.
struct RealServer {
    child: Child,
    base_url: String,
    log: PathBuf,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl RealServer {
    /// Starts one, or says why not: `None` (after a note) when it is not built here.
    async fn start(log_dir: &Path) -> Option<RealServer> {
        Self::start_with(log_dir, &[]).await
    }

    /// [`RealServer::start`] with more of llama-server's flags.
    #[allow(clippy::print_stderr, reason = "a skipped test says why")]
    async fn start_with(log_dir: &Path, more: &[&str]) -> Option<RealServer> {
        let Some((server, model)) = built() else {
            assert!(
                std::env::var_os("SERVEBENCH_REQUIRE_REAL_SERVER").is_none(),
                "SERVEBENCH_REQUIRE_REAL_SERVER is set but llama-server is not built; run scripts/real-server/setup.sh"
            );
            eprintln!("note: llama-server is not built here (scripts/real-server/setup.sh); skipping");
            return None;
        };
        let turn = ONE_AT_A_TIME.lock().await;
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let log = log_dir.join("llama-server.log");
        let file = std::fs::File::create(&log).unwrap();
        // `timeout` stops the server even if this test process dies first.
        let child = Command::new("timeout")
            .arg("300")
            .arg(&server)
            .args(["-m", model.to_str().unwrap(), "--alias", "tiny-qwen3", "--host", "127.0.0.1"])
            .args(["--port", &port.to_string(), "-np", "4", "-c", "16384", "-t", "2", "--metrics", "--no-webui"])
            .args(more)
            .stdin(Stdio::null())
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .spawn()
            .expect("llama-server starts");
        let s = RealServer { child, base_url: format!("http://127.0.0.1:{port}"), log, _turn: turn };
        tokio::task::block_in_place(|| s.wait_healthy());
        Some(s)
    }

    fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let addr = self.base_url.trim_start_matches("http://").to_string();
        while Instant::now() < deadline {
            if health_ok(&addr) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("llama-server was not healthy within 60 s:\n{}", std::fs::read_to_string(&self.log).unwrap_or_default());
    }

    /// Returns once the server has finished `n` requests of 128 tokens (by its `/metrics`), or
    /// after a minute.
    async fn wait_for_finished_requests(&self, n: u32) {
        let addr = self.base_url.trim_start_matches("http://").to_string();
        let deadline = Instant::now() + Duration::from_secs(60);
        while tokens_predicted(&addr) < f64::from(n) * 128.0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Kills the server at once (SIGKILL, no graceful shutdown) with its `timeout` guard:
    /// `timeout` leads a process group of its own, the server in it.
    fn kill(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `GET path` by hand on a plain socket (the test needs no HTTP client): the whole answer,
/// head and body, or `None` when the server does not answer.
fn get(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).ok()?;
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    Some(String::from_utf8_lossy(&answer).into_owned())
}

/// `GET /health` answers 200.
fn health_ok(addr: &str) -> bool {
    get(addr, "/health").is_some_and(|a| a.starts_with("HTTP/1.1 200"))
}

/// Tokens of the requests the server has finished, from its `/metrics`.
fn tokens_predicted(addr: &str) -> f64 {
    let metrics = get(addr, "/metrics").unwrap_or_default();
    let line = metrics.lines().find(|l| l.starts_with("llamacpp:tokens_predicted_total"));
    line.and_then(|l| l.split_whitespace().last()).and_then(|v| v.parse().ok()).unwrap_or(0.0)
}

/// `bench serve` flags for 40 requests of 128/128 at concurrency 4 against `base_url`.
fn bench(base_url: &str, dir: &Path, name: &str, flags: &[&str]) -> Vec<String> {
    let head = ["bench", "serve", "--base-url", base_url, "--model", "tiny-qwen3", "--disable-tqdm", "--no-store"];
    let load = ["--random-input-len", "128", "--random-output-len", "128", "--max-concurrency", "4"];
    let save = ["--save-result", "--save-detailed", "--result-dir", dir.to_str().unwrap(), "--result-filename", name];
    let tok = tokenizer();
    let tokenizer = ["--tokenizer", tok.as_str()];
    args(&[&head[..], &load[..], &save[..], &tokenizer[..], flags].concat())
}

/// The increase of `signal` over the run, from the scraped telemetry.
fn server_count(json: &Value, signal: &str) -> Option<f64> {
    let series = json["servebench"]["server_telemetry"]["sources"][0]["series"].as_array()?;
    let points = series.iter().find(|s| s["signal"] == signal)?["points"].as_array()?;
    let values: Vec<f64> = points.iter().filter_map(|p| p[1].as_f64()).collect();
    Some(values.last()? - values.first()?)
}

/// One clean run on `api`'s endpoint: nothing lost, every count the server's.
async fn clean_run(endpoint: &[&str], name: &str) {
    // Chat, Responses and Messages requests go through the chat template.
    let templated = endpoint.iter().any(|f| ["openai-chat", "openai-responses", "anthropic-messages"].contains(f));
    let messages = endpoint.contains(&"anthropic-messages");
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = RealServer::start(dir.path()).await else { return };
    let flags = [&["--num-prompts", "40", "--server-metrics", "--scrape-interval", "0.5"][..], endpoint].concat();
    let out = servebench(bench(&server.base_url, dir.path(), name, &flags)).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(!stdout.contains("tokenizer mismatch"), "the server's own /tokenize was read: {stdout}");
    let json = read_json(&dir.path().join(name));
    assert_eq!((json["completed"].as_u64(), json["failed"].as_u64()), (Some(40), Some(0)), "{stdout}");
    let records = json["servebench"]["requests"].as_array().unwrap();
    // Random prompts are exactly their length by the server's count (through the chat template,
    // plus its tokens, the same for every request and counted by the client too), outputs
    // exactly theirs.
    let counts = |key: &str| -> Vec<u64> { records.iter().map(|r| r[key].as_u64().unwrap_or(0)).collect() };
    let mut prompts = counts("prompt_tokens_server");
    if messages {
        // llama.cpp leaves out `message_start`, the prompt's count with it, when its first token
        // is part of a character (held back and sent with the next): the prompt count of those
        // requests is the client's own.
        let missing = prompts.iter().filter(|&&p| p == 0).count();
        assert!(missing <= 8, "{missing} of 40 without the server's prompt count: {prompts:?}");
        let known = prompts.iter().copied().find(|&p| p > 0).expect("some prompt counted by the server");
        prompts.iter_mut().filter(|p| **p == 0).for_each(|p| *p = known);
        assert_eq!(counts("prompt_tokens"), prompts, "the count used is the client's where the server gave none");
    }
    let template = if templated { 1..=16 } else { 0..=0 };
    assert!(prompts.iter().all(|&p| p == prompts[0] && template.contains(&(p - 128))), "{prompts:?}");
    assert_eq!(prompts, counts("prompt_tokens_client"), "the client counts the prompt as the server does");
    // llama.cpp's `/v1/messages` does not pass `ignore_eos` on (only sampling parameters), so a
    // message may end early there; elsewhere every output is exactly its length.
    let outputs = counts("output_tokens_server");
    let full = outputs.iter().filter(|&&n| n == 128).count();
    assert!(outputs.iter().all(|&n| (1..=128).contains(&n)) && (full == 40 || messages && full >= 30), "{outputs:?}");
    if full < 40 {
        assert!(stdout.contains("ignore_eos"), "a run whose outputs end early says so: {stdout}");
    }
    // The server's own counters moved by exactly what the client counted.
    let generated = server_count(&json, "generation_tokens").expect("llama.cpp exposes tokens_predicted_total");
    assert_eq!(generated, json["total_output_tokens"].as_f64().unwrap(), "{stdout}");
    assert_eq!(json["servebench"]["server_telemetry"]["sources"][0]["engine"], "llama.cpp");
    // No first token before its prompt was processed: the client's TTFTs, summed, are at least
    // the prompt time the server spent (llama.cpp counts it per request, not per token).
    let prompt_s = server_count(&json, "prefill_time_sum").expect("llama.cpp exposes prompt_seconds_total");
    let ttft_s: f64 = records.iter().map(|r| r["ttft_s"].as_f64().unwrap()).sum();
    assert!(prompt_s > 0.0 && ttft_s >= prompt_s, "client TTFTs {ttft_s} s, server prompt time {prompt_s} s");
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_against_llama_server_lose_nothing_and_count_what_it_counts() {
    clean_run(&[], "completions.json").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_against_llama_server_loses_nothing_and_counts_what_it_counts() {
    clean_run(&["--backend", "openai-chat", "--endpoint", "/v1/chat/completions"], "chat.json").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_against_llama_server_lose_nothing_and_count_what_it_counts() {
    clean_run(&["--backend", "openai-responses"], "responses.json").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_against_llama_server_lose_nothing_and_count_what_it_counts() {
    clean_run(&["--backend", "anthropic-messages"], "messages.json").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_against_llama_server_lose_nothing_and_count_what_it_counts() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = RealServer::start_with(dir.path(), &["--embeddings", "--pooling", "mean"]).await else {
        return;
    };
    let flags = ["--num-prompts", "40", "--backend", "openai-embeddings", "--endpoint", "/v1/embeddings"];
    let out = servebench(bench(&server.base_url, dir.path(), "embeddings.json", &flags)).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(stdout.contains("Input throughput (inputs/s):") && !stdout.contains("TTFT"), "{stdout}");
    let json = read_json(&dir.path().join("embeddings.json"));
    assert_eq!(json["completed"].as_u64(), Some(40), "{stdout}");
    assert_eq!(json["total_input_sequences"].as_u64(), Some(40), "{stdout}");
    assert_eq!(json["servebench"]["failures_by_kind"], serde_json::json!({}), "{stdout}");
    // The prompt counts are the server's usage, each exactly its planned length.
    let records = json["servebench"]["requests"].as_array().unwrap();
    assert!(records.iter().all(|r| r["prompt_tokens_server"] == 128), "{records:?}");
    assert_eq!(json["total_input_tokens"].as_u64(), Some(40 * 128));
    assert!(json["latencies"].as_array().unwrap().iter().all(|l| l.as_f64().unwrap() > 0.0));

    // Eight prompts a request: five requests, each of the server's counts the eight prompts'.
    let batched = [&flags[..], &["--random-batch-size", "8"]].concat();
    let out = servebench(bench(&server.base_url, dir.path(), "batched.json", &batched)).await;
    assert!(out.status.success(), "stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
    let json = read_json(&dir.path().join("batched.json"));
    assert_eq!(json["completed"].as_u64(), Some(5), "{json}");
    assert_eq!(json["total_input_sequences"].as_u64(), Some(40));
    let records = json["servebench"]["requests"].as_array().unwrap();
    assert!(records.iter().all(|r| r["prompt_tokens_server"] == 8 * 128), "{records:?}");
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_run_is_counted_as_failures_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut server) = RealServer::start(dir.path()).await else { return };
    let flags = bench(&server.base_url, dir.path(), "killed.json", &["--num-prompts", "400"]);
    let run = tokio::spawn(servebench(flags));
    // Killed once a few requests have finished (however slow this machine is), long before the
    // 400th can.
    server.wait_for_finished_requests(3).await;
    server.kill();
    let out = tokio::time::timeout(Duration::from_secs(120), run).await.expect("the run ends").unwrap();
    let stdout = text(&out.stdout);
    let json = read_json(&dir.path().join("killed.json"));
    let (completed, failed) = (json["completed"].as_u64().unwrap(), json["failed"].as_u64().unwrap());
    assert!(completed > 0, "some requests finished before the kill: {stdout}");
    assert!(failed > 0, "the rest failed: {stdout}");
    assert_eq!(completed + failed, 400, "every request is accounted for: {stdout}");
    let kinds = json["servebench"]["failures_by_kind"].as_object().unwrap();
    assert!(!kinds.is_empty() && json["servebench"]["failure_messages"][0].as_str().is_some_and(|m| !m.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_mid_run_saves_what_was_measured() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = RealServer::start(dir.path()).await else { return };
    let flags = bench(&server.base_url, dir.path(), "stopped.json", &["--num-prompts", "400"]);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_servebench"))
        .args(&flags)
        .env_remove("SERVEBENCH_DB")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    server.wait_for_finished_requests(3).await;
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let out = tokio::task::spawn_blocking(move || child.wait_with_output()).await.unwrap().unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "interrupted runs exit 130: {stdout}");
    assert!(stdout.contains("Run interrupted"), "{stdout}");
    let json = read_json(&dir.path().join("stopped.json"));
    assert!(json["completed"].as_u64().unwrap() > 0, "{stdout}");
    assert_eq!(json["servebench"]["interrupted"], true);
    assert!(json["servebench"]["not_sent"].as_u64().unwrap() > 0, "{stdout}");
    drop(server);
}
