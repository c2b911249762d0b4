//! `--probe-request-rate`: probes beside a run, in vLLM's section of the report and its JSON
//! keys; probes that all fail said so; a prediction sends them in virtual time.

use std::time::Duration;

use servebench_client::testserver::{Script, TestServer, TestServerConfig};

use crate::common::{args, servebench, text};

/// `bench serve` of `test-model` at `base_url`: eight requests two at a time, probes five a
/// second, then `extra`.
fn probed(base_url: &str, extra: &[&str]) -> Vec<String> {
    let head = ["bench", "serve", "--base-url", base_url, "--model", "test-model", "--no-store", "--disable-tqdm"];
    let run = ["--num-prompts", "8", "--max-concurrency", "2", "--random-input-len", "16", "--random-output-len", "4"];
    args(&[&head[..], &run, &["--probe-request-rate", "5"], extra].concat())
}

/// The run's requests (with an `x-request-id`) take 100 ms to their first token; probes
/// (without one) answer `probe`.
fn server(probe: Script) -> TestServerConfig {
    TestServerConfig::new(200, move |info| match info.request_id {
        None => probe.clone(),
        Some(_) => {
            Script { ttft: Duration::from_millis(100), itl: Duration::from_millis(5), tokens: 4, ..Script::default() }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_are_reported_in_vllm_s_section_and_json_keys() {
    let probe = Script { ttft: Duration::from_millis(3), tokens: 1, ..Script::default() };
    let server = TestServer::start(server(probe)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let save = ["--save-result", "--result-dir", dir.path().to_str().unwrap(), "--result-filename", "r.json"];
    let out = servebench(probed(&server.base_url(), &save)).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    assert!(stdout.contains("Maximum request concurrency: 2\nProbe request rate: 5.0 req/s\n"), "{stdout}");
    let section = stdout.find("------------------Probe Requests------------------\n").expect("the probe section");
    assert!(stdout.find("Total token throughput (tok/s):").unwrap() < section, "{stdout}");
    assert!(section < stdout.find("---------------Time to First Token").unwrap(), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let completed = json["probe_completed"].as_u64().expect("probe_completed");
    assert!(completed >= 1 && json["probe_failed"] == 0, "{json}");
    assert!(stdout.contains(&format!("{:<40} {:<10}\n", "Probe requests completed:", completed)), "{stdout}");
    let median = json["probe_median_e2el_ms"].as_f64().unwrap();
    assert!(stdout.contains(&format!("{:<40} {:<10.2}\n", "Median probe E2EL (ms):", median)), "{stdout}");
    // A probe waits for no slot of the run: it is answered in milliseconds, not after a request.
    assert!(median < 90.0, "median probe latency {median} ms");
    assert_eq!(json["servebench"]["probes"].as_array().map(Vec::len), Some(completed as usize));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_that_all_fail_are_said_and_the_run_goes_on() {
    let server = TestServer::start(server(Script { status: 503, ..Script::default() })).await.unwrap();
    let out = servebench(probed(&server.base_url(), &[])).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "the run's own requests succeeded:\n{stdout}\n{}", text(&out.stderr));
    assert!(!stdout.contains("Probe Requests"), "vLLM prints no section without a probe that succeeded: {stdout}");
    let line = stdout.lines().find(|l| l.starts_with("Probe requests: all ")).expect("a line saying so");
    assert!(line.contains("failed (the first: ") && line.ends_with("the run had no probe latencies."), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prediction_sends_its_probes_in_virtual_time_and_a_rate_that_is_not_one_is_refused() {
    // Sixteen requests at a time keep the deployment busy: a probe that arrives while a wave
    // of their prompts is being prefilled waits behind it, the others go through at once.
    let predict = ["sim", "predict", "--model", "Qwen/Qwen3-8B", "--hardware", "h100-sxm", "--no-store"];
    let load = ["--num-prompts", "64", "--max-concurrency", "16", "--probe-request-rate", "5", "--save-result"];
    let dir = tempfile::tempdir().unwrap();
    let save = ["--result-dir", dir.path().to_str().unwrap(), "--result-filename", "p.json"];
    let out = servebench(args(&[&predict[..], &load, &save].concat())).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("------------------Probe Requests------------------\n"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("p.json")).unwrap()).unwrap();
    let probes = json["servebench"]["probes"].as_array().unwrap();
    assert!(probes.len() >= 5 && json["probe_failed"] == 0, "{json}");
    let (median, max) = (json["probe_median_e2el_ms"].as_f64().unwrap(), json["probe_max_e2el_ms"].as_f64().unwrap());
    assert!(probes[0]["sent_s"] == 0.0 && max > 3.0 * median, "{probes:?}");
    assert!(probes.windows(2).all(|w| w[1]["sent_s"].as_f64() >= Some(w[0]["sent_s"].as_f64().unwrap() + 0.2)));
    for bad in ["-1", "inf", "nan"] {
        let flags =
            ["bench", "serve", "--sim", "Qwen/Qwen3-0.6B@l40s", "--num-prompts", "1", "--probe-request-rate", bad];
        let out = servebench(args(&flags)).await;
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains("--probe-request-rate must be"), "{bad}: {}", text(&out.stderr));
    }
}
