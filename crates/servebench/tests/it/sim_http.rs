//! The simulator served over HTTP agrees with its own virtual-time prediction: the same plan,
//! run by the load engine against `servebench_sim::server` on a loopback port and by
//! `servebench_sim::predict`, gives the same mean TTFT, TPOT, E2EL and output throughput
//! within 5 %.
//!
//! The larger case is ignored by default (it holds 512 streams for a while); run it in release:
//! `cargo test --release -p servebench --test it sim_http -- --ignored --nocapture`

use std::sync::Arc;
use std::time::Duration;

use servebench_core::config::{Metric, RangeRatio, RunConfig, WorkloadSpec};
use servebench_core::metrics::Summary;
use servebench_core::record::RunResult;
use servebench_sim::SimSetup;
use servebench_sim::server::{ServerOptions, start};

/// One comparison: a random workload at a concurrency cap, served and predicted.
struct Case {
    model: &'static str,
    hardware: &'static str,
    prompts: usize,
    concurrency: usize,
    input: u32,
    output: u32,
    /// Spread of the lengths (vLLM's `--random-range-ratio`).
    range: f64,
}

struct Means {
    ttft_ms: f64,
    tpot_ms: f64,
    e2el_ms: f64,
    output_tok_s: f64,
}

fn means(run: &RunResult) -> Means {
    let s = Summary::compute(run);
    let mean = |m: Metric| s.metric(m).map_or(f64::NAN, |x| x.mean_ms);
    Means {
        ttft_ms: mean(Metric::Ttft),
        tpot_ms: mean(Metric::Tpot),
        e2el_ms: mean(Metric::E2el),
        output_tok_s: s.output_throughput.unwrap_or(f64::NAN),
    }
}

/// Runs `case` both ways; returns (served, predicted) and prints both.
async fn served_and_predicted(case: &Case) -> (Means, Means) {
    let setup = SimSetup::resolve(case.model, case.hardware, &[], None).expect("the preset setup resolves");
    let server = start(setup.clone(), ServerOptions::default()).await.expect("the simulator starts");
    let mut config = RunConfig::for_target(server.base_url(), server.model_name());
    config.workload = WorkloadSpec::Random {
        input_len: case.input,
        output_len: case.output,
        range_ratio: RangeRatio { input: case.range, output: case.range },
        prefix_len: 0,
    };
    config.traffic.num_prompts = case.prompts;
    config.traffic.max_concurrency = Some(case.concurrency);
    config.output.disable_progress = true;
    config.output.percentile_metrics = vec![Metric::Ttft, Metric::Tpot, Metric::E2el];
    let plan = servebench_workload::build_plan(&config, None).expect("the plan builds");

    let options = servebench_client::RunOptions {
        progress: false,
        log: Arc::new(|_| {}),
        api_key: None,
        ..servebench_client::RunOptions::default()
    };
    let run = tokio::time::timeout(
        Duration::from_secs(600),
        servebench_client::run(&config, &plan, options, std::future::pending::<()>()),
    )
    .await
    .expect("the run ends")
    .expect("the run is carried out");
    server.shutdown().await;
    let failed: Vec<_> = run.records.iter().filter(|r| !r.succeeded()).map(|r| r.failure.clone()).collect();
    assert!(failed.is_empty(), "{} failed: {:?}", failed.len(), &failed[..failed.len().min(3)]);

    let predicted = servebench_sim::predict(&plan, &config, &setup);
    let (served, predicted) = (means(&run), means(&predicted));
    eprintln!(
        "{} on {}, {} prompts {}/{} tokens at concurrency {}:\n\
         \x20 served:    TTFT {:8.3} ms  TPOT {:7.3} ms  E2EL {:9.2} ms  output {:9.1} tok/s\n\
         \x20 predicted: TTFT {:8.3} ms  TPOT {:7.3} ms  E2EL {:9.2} ms  output {:9.1} tok/s",
        case.model,
        case.hardware,
        case.prompts,
        case.input,
        case.output,
        case.concurrency,
        served.ttft_ms,
        served.tpot_ms,
        served.e2el_ms,
        served.output_tok_s,
        predicted.ttft_ms,
        predicted.tpot_ms,
        predicted.e2el_ms,
        predicted.output_tok_s,
    );
    (served, predicted)
}

fn assert_agree(served: &Means, predicted: &Means, tolerance: f64) {
    for (name, s, p) in [
        ("mean TTFT", served.ttft_ms, predicted.ttft_ms),
        ("mean TPOT", served.tpot_ms, predicted.tpot_ms),
        ("mean E2EL", served.e2el_ms, predicted.e2el_ms),
        ("output throughput", served.output_tok_s, predicted.output_tok_s),
    ] {
        let off = (s - p).abs() / p;
        assert!(off <= tolerance, "{name}: served {s:.3}, predicted {p:.3} ({:.1} % apart)", off * 100.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_timings_agree_with_the_prediction_at_modest_concurrency() {
    let case = Case {
        model: "Qwen/Qwen3-8B",
        hardware: "h100-sxm",
        prompts: 96,
        concurrency: 16,
        input: 256,
        output: 48,
        range: 0.25,
    };
    let (served, predicted) = served_and_predicted(&case).await;
    assert_agree(&served, &predicted, 0.05);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "holds 512 streams for several seconds; run in release (see the module docs)"]
async fn served_timings_agree_with_the_prediction_at_512_streams() {
    let case = Case {
        model: "Qwen/Qwen3-8B",
        hardware: "h100-sxm",
        prompts: 1536,
        concurrency: 512,
        input: 512,
        output: 128,
        range: 0.25,
    };
    let (served, predicted) = served_and_predicted(&case).await;
    assert_agree(&served, &predicted, 0.05);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn scratch_probe() {
    let v = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let case = Case {
        model: Box::leak(v("P_MODEL", "Qwen/Qwen3-0.6B").into_boxed_str()),
        hardware: "h100-sxm",
        prompts: v("P_N", "256").parse().unwrap(),
        concurrency: v("P_C", "16").parse().unwrap(),
        input: v("P_IN", "128").parse().unwrap(),
        output: v("P_OUT", "64").parse().unwrap(),
        range: v("P_R", "0").parse().unwrap(),
    };
    let t = std::time::Instant::now();
    let (served, predicted) = served_and_predicted(&case).await;
    eprintln!("took {:?}", t.elapsed());
    let _ = (served, predicted);
}
