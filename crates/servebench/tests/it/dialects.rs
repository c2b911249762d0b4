//! `bench serve` against the simulator answering in llama.cpp's dialect (its `/tokenize`
//! schema, usage inside the last completions chunk, the connection closed after every stream),
//! on completions and chat, with and without a local tokenizer: the pre-run alignment is quick
//! and quiet, no request fails, every prompt has its requested length by the server's own
//! count, and generated tokens are exactly those asked for. In-process, as `sim_http.rs` does,
//! plus one run of the binary.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use servebench_core::config::{Api, Backend, RangeRatio, RunConfig, WorkloadSpec};
use servebench_sim::SimSetup;
use servebench_sim::server::{Dialect, ServerOptions, SimServer, start};
use servebench_workload::Tokenizer;

use crate::common::{args, servebench, text};

const MODEL: &str = "Qwen/Qwen3-0.6B";

fn qwen3_dir() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/tokenizers/qwen3").to_string()
}

fn qwen3() -> Arc<Tokenizer> {
    static TOK: OnceLock<Arc<Tokenizer>> = OnceLock::new();
    Arc::clone(
        TOK.get_or_init(|| Arc::new(Tokenizer::load(&qwen3_dir()).expect("the committed Qwen3 tokenizer loads"))),
    )
}

async fn sim(dialect: Dialect) -> SimServer {
    let setup = SimSetup::resolve(MODEL, "h100-sxm", &[], None).expect("the preset setup resolves");
    let options = ServerOptions { tokenizer: Some(qwen3()), dialect, ..ServerOptions::default() };
    start(setup, options).await.expect("the simulator starts")
}

/// The server's own count of `text` by its `/tokenize` (llama.cpp's schema reads `content`,
/// vLLM's and SGLang's `prompt`).
async fn server_count(base_url: &str, text: &str) -> usize {
    let client = servebench_client::http::HttpClient::new(base_url, &[], 1, false).unwrap();
    let target = client.target(&format!("{base_url}/tokenize")).unwrap();
    let body = serde_json::json!({"content": text, "prompt": text, "add_special_tokens": false}).to_string();
    let mut resp = client.send(http::Method::POST, &target, Some(body.into()), None).await.unwrap();
    let answer: serde_json::Value = serde_json::from_str(&resp.text(1 << 20).await.unwrap()).unwrap();
    answer["tokens"].as_array().expect("a list of tokens").len()
}

/// One run of `n` random prompts of `input`/`output` tokens at concurrency 4, in-process.
async fn run_against(server: &SimServer, backend: Backend, local: bool, n: usize, input: u32, output: u32) {
    let what = format!("--backend {}, {} local tokenizer", backend.name(), if local { "with a" } else { "no" });
    let mut config = RunConfig::for_target(server.base_url(), server.model_name());
    config.target.backend = backend;
    config.target.endpoint = backend.default_endpoint().to_string();
    config.target.api_url = format!("{}{}", server.base_url(), config.target.endpoint);
    config.workload = WorkloadSpec::Random {
        input_len: input,
        output_len: output,
        range_ratio: RangeRatio { input: 0.0, output: 0.0 },
        prefix_len: 0,
        media: None,
        batch_size: 1,
    };
    config.traffic.num_prompts = n;
    config.traffic.max_concurrency = Some(4);
    config.output.disable_progress = true;
    let tok = local.then(qwen3);
    let mut plan = servebench_workload::build_plan(&config, tok.as_deref()).expect("the plan builds");

    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&lines);
    let log: servebench_client::Logger = Arc::new(move |l: &str| sink.lock().unwrap().push(l.to_string()));
    let started = Instant::now();
    servebench_client::align_prompts(&mut plan, &config, tok.as_deref(), None, &log).await;
    let took = started.elapsed();
    let lines = lines.lock().unwrap().clone();
    assert!(took < Duration::from_secs(1), "{what}: the alignment took {took:?}: {lines:?}");
    assert!(!lines.iter().any(|l| l.contains("mismatch") || l.contains("WARNING")), "{what}: {lines:?}");
    assert!(plan.tokens_exact(), "{what}: prompt counts are exact: {:?}", plan.notes);

    let bodies = servebench_workload::BodyBuilder::new(&config);
    for i in 0..n {
        let prompt = servebench_workload::PlanPrompts::prompt_text(&plan, i, &bodies).expect("a text prompt");
        assert_eq!(server_count(server.base_url(), &prompt).await, input as usize, "{what}: request {i}");
    }

    let options = servebench_client::RunOptions {
        progress: false,
        log: Arc::new(|_| {}),
        api_key: None,
        ..servebench_client::RunOptions::default()
    };
    let run = tokio::time::timeout(
        Duration::from_secs(120),
        servebench_client::run(&config, &plan, options, std::future::pending::<()>()),
    )
    .await
    .expect("the run ends within 2 minutes")
    .expect("the run is carried out");
    let failed: Vec<_> = run.records.iter().filter_map(|r| r.failure.as_ref()).collect();
    assert!(failed.is_empty(), "{what}: {} failed, e.g. {:?}", failed.len(), failed.first());
    assert_eq!(run.records.len(), n, "{what}");
    for r in &run.records {
        let planned = plan.requests[r.index as usize].prompt_tokens;
        assert_eq!(r.usage.completion_tokens, Some(output), "{what}: request {}", r.index);
        assert_eq!(r.usage.prompt_tokens, Some(planned), "{what}: request {}", r.index);
        if backend.api() == Api::Completions {
            assert_eq!(planned, input, "{what}: request {}", r.index);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_serve_against_the_llama_cpp_dialect_is_exact_quick_and_quiet() {
    let server = sim(Dialect::LlamaCpp).await;
    for backend in [Backend::LlamaCpp, Backend::OpenaiChat, Backend::Openai] {
        for local in [false, true] {
            run_against(&server, backend, local, 12, 48, 16).await;
        }
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_serve_on_the_responses_and_messages_apis_is_exact_and_quiet() {
    // The server renders the chat template around `input` (Responses) or `messages`
    // (Messages): the plan's counts include it, with
    // the local tokenizer's template or, without one, the server's `/tokenize` of the messages.
    let server = sim(Dialect::Vllm).await;
    for backend in [Backend::OpenaiResponses, Backend::AnthropicMessages] {
        for local in [false, true] {
            run_against(&server, backend, local, 8, 40, 8).await;
        }
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_serve_against_the_sglang_dialect_is_exact_and_quiet() {
    let server = sim(Dialect::Sglang).await;
    run_against(&server, Backend::Sglang, false, 8, 40, 8).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_benchmarks_its_simulator_in_llama_cpps_dialect() {
    let sim = format!("{MODEL}@h100-sxm");
    let flags = [
        "bench",
        "serve",
        "--sim",
        &sim,
        "--sim-option",
        "dialect=llama.cpp",
        "--backend",
        "llama.cpp",
        "--num-prompts",
        "8",
        "--max-concurrency",
        "4",
        "--random-input-len",
        "32",
        "--random-output-len",
        "8",
        "--no-store",
        "--disable-tqdm",
    ];
    let out = servebench(args(&flags)).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("Failed requests:                         0         \n"), "{stdout}");
    assert!(stdout.contains("Total generated tokens:                  64        \n"), "{stdout}");
    assert!(!format!("{stdout}{stderr}").contains("mismatch"), "{stdout}\n{stderr}");

    let bad = servebench(args(&["bench", "serve", "--sim", &sim, "--sim-option", "dialect=tgi"])).await;
    assert!(!bad.status.success());
    assert!(text(&bad.stderr).contains("unknown server dialect \"tgi\""), "{}", text(&bad.stderr));
}
