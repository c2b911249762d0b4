//! The pooling backends (`openai-embeddings`, `openai-embeddings-chat`, `vllm-pooling`)
//! against the simulator's pooling routes: vLLM's pooling report (no output lines, E2EL alone,
//! the input rate), vLLM's pooling result keys, the twin in virtual time agreeing with the
//! twin on a port, a pooling run named and skipped by the twin's check, and what is not built
//! refused with what to give.

use crate::common::{args, read_json, servebench, text};

const SIM: &str = "Qwen/Qwen3-0.6B@h100-sxm";

fn flags<'a>(backend: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut f = vec![
        "--backend",
        backend,
        "--num-prompts",
        "24",
        "--max-concurrency",
        "4",
        "--random-input-len",
        "64",
        "--no-store",
        "--disable-tqdm",
    ];
    f.extend_from_slice(extra);
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embeddings_run_reports_what_vllm_reports_for_pooling() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let mut all = vec!["bench", "serve", "--sim", SIM];
    all.extend(flags("openai-embeddings", &["--save-result", "--result-dir", d, "--result-filename", "e.json"]));
    let out = servebench(args(&all)).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let block = stdout.split("============ Serving Benchmark Result").nth(1).expect("a result block");
    let block = block.split("\n==================================================\n").next().unwrap();
    for line in
        ["Successful requests:                     24        \n", "Total input tokens:                      1536"]
    {
        assert!(block.contains(line), "{block}");
    }
    assert!(block.contains("Input throughput (inputs/s):"), "{block}");
    assert!(block.contains("Mean E2EL (ms):"), "{block}");
    for absent in ["Total generated tokens", "Output token throughput", "Peak", "TTFT", "TPOT", "ITL"] {
        assert!(!block.contains(absent), "{absent}: {block}");
    }
    let json = read_json(&dir.path().join("e.json"));
    let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
    let at = |k: &str| keys.iter().position(|x| *x == k).unwrap_or_else(|| panic!("{k} missing: {keys:?}"));
    assert!(at("completed") < at("total_input_tokens") && at("total_input_tokens") < at("total_input_sequences"));
    assert!(at("request_throughput") < at("input_sequence_throughput") && at("latencies") < at("mean_e2el_ms"));
    for absent in ["failed", "total_output_tokens", "output_throughput", "mean_ttft_ms", "max_concurrent_requests"] {
        assert!(!keys.contains(&absent), "{absent}: {keys:?}");
    }
    assert_eq!(json["total_input_sequences"], 24);
    assert_eq!(json["total_input_tokens"], 1536);
    let (req, inputs) =
        (json["request_throughput"].as_f64().unwrap(), json["input_sequence_throughput"].as_f64().unwrap());
    assert!(req > 0.0 && (req - inputs).abs() < 1e-9, "{req} {inputs}");
    let tokens = json["total_token_throughput"].as_f64().unwrap();
    assert!((tokens - 64.0 * req).abs() < 1e-6 * tokens, "{tokens} against {req} req/s of 64 tokens");

    // The same run in virtual time: the twin on a port and in virtual time agree.
    let mut predicted = vec!["sim", "predict", "--model", "Qwen/Qwen3-0.6B", "--hardware", "h100-sxm"];
    predicted.extend(flags("openai-embeddings", &["--save-result", "--result-dir", d, "--result-filename", "p.json"]));
    let out = servebench(args(&predicted)).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let p = read_json(&dir.path().join("p.json"));
    let (live, virt) = (json["mean_e2el_ms"].as_f64().unwrap(), p["mean_e2el_ms"].as_f64().unwrap());
    assert!((live / virt - 1.0).abs() < 0.25, "live {live} ms, predicted {virt} ms");
    assert_eq!(p["total_input_sequences"], 24);

    // The twin's check reads generation runs; a pooling run is named and skipped.
    let e = dir.path().join("e.json");
    let validate = ["sim", "validate", "--model", "Qwen/Qwen3-0.6B", "--hardware", "h100-sxm", e.to_str().unwrap()];
    let out = servebench(args(&validate)).await;
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success() && said.contains("a pooling run (embeddings, /pooling)"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_embeddings_and_vllm_pooling_run_on_their_routes() {
    for (backend, extra) in [("openai-embeddings-chat", vec![]), ("vllm-pooling", vec!["--endpoint", "/pooling"])] {
        let mut all = vec!["bench", "serve", "--sim", SIM];
        all.extend(flags(backend, &extra));
        let out = servebench(args(&all)).await;
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{backend}: {stdout}\n{}", text(&out.stderr));
        assert!(stdout.contains("Failed requests:                         0         \n"), "{backend}: {stdout}");
        assert!(stdout.contains("Input throughput (inputs/s):"), "{backend}: {stdout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooling_backend_on_another_route_or_an_unbuilt_one_is_refused_with_what_to_give() {
    let mut all = vec!["bench", "serve", "--sim", SIM];
    all.extend(flags("openai-embeddings", &["--endpoint", "/v1/completions"]));
    let out = servebench(args(&all)).await;
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("does not fit --backend openai-embeddings: use /v1/embeddings"), "{err}");
    let mut all = vec!["bench", "serve", "--sim", SIM];
    all.extend(flags("vllm-rerank", &[]));
    let out = servebench(args(&all)).await;
    let err = text(&out.stderr);
    assert!(!out.status.success() && err.contains("\"vllm-rerank\" is not supported"), "{err}");
}
