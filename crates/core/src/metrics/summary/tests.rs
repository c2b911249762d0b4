//! Tests of the run summary: vLLM's own cases bit for bit, TPOT, goodput, failures, the client-queue
//! sections, dispatch lag and the JSON round trip.

use super::*;
use crate::config::Slo;
use crate::record::{Failure, Usage, test_run};
use serde_json::Value;

fn f(v: &Value) -> f64 {
    v.as_str().expect("a float repr").parse().expect("parses")
}

fn run_from_case(case: &Value) -> RunResult {
    let records = case["records"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, r)| RequestRecord {
            index: i as u32,
            planned_ns: r["arrival_ns"].as_u64().unwrap(),
            arrival_ns: r["arrival_ns"].as_u64().unwrap(),
            start_ns: r["start_ns"].as_u64().unwrap(),
            chunks_us: serde_json::from_value(r["chunks_us"].clone()).unwrap(),
            usage: Usage {
                prompt_tokens: r["prompt_tokens"].as_u64().map(|n| n as u32),
                completion_tokens: r["completion_tokens"].as_u64().map(|n| n as u32),
            },
            status: 200,
            failure: r["failed"]
                .as_bool()
                .unwrap()
                .then(|| Failure { kind: FailureKind::Stream, message: format!("request {i} broke") }),
            ..RequestRecord::default()
        })
        .collect();
    let mut run = test_run(records, case["duration_s"].as_f64().unwrap());
    let traffic = &mut run.config.traffic;
    traffic.max_concurrency = case["max_concurrency"].as_u64().map(|c| c as usize);
    traffic.request_rate = case["request_rate"].as_f64().unwrap_or(f64::INFINITY);
    let out = &mut run.config.output;
    out.percentile_metrics =
        case["metrics"].as_array().unwrap().iter().map(|m| Metric::from_key(m.as_str().unwrap()).unwrap()).collect();
    out.metric_percentiles = serde_json::from_value(case["percentiles"].clone()).unwrap();
    out.goodput = case["goodput"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| Slo { metric: Metric::from_key(g[0].as_str().unwrap()).unwrap(), max_ms: g[1].as_f64().unwrap() })
        .collect();
    run
}

/// The committed cases were computed by a Python transcription of vLLM 0.33's
/// `calculate_metrics` (see testdata/gen_vectors.py); every float must match to the bit.
#[test]
fn matches_vllm_calculate_metrics_bit_for_bit() {
    let cases: Vec<Value> = serde_json::from_str(include_str!("../../../testdata/vllm_summary_cases.json")).unwrap();
    assert!(cases.len() >= 5);
    for (k, case) in cases.iter().enumerate() {
        let s = Summary::compute(&run_from_case(case));
        let e = &case["expected"];
        assert_eq!(s.completed, e["completed"].as_u64().unwrap(), "case {k}");
        assert_eq!(s.failed, e["failed"].as_u64(), "case {k}");
        assert_eq!(s.total_input_tokens, e["total_input"].as_u64().unwrap());
        assert_eq!(s.total_output_tokens, e["total_output"].as_u64());
        let bits = |x: f64| x.to_bits();
        assert_eq!(bits(s.request_throughput), bits(f(&e["request_throughput"])));
        assert_eq!(s.output_throughput.map(bits), Some(bits(f(&e["output_throughput"]))));
        assert_eq!(s.total_token_throughput.map(bits), Some(bits(f(&e["total_token_throughput"]))));
        assert_eq!(
            s.request_goodput.map(bits),
            e["request_goodput"].as_str().map(|g| bits(g.parse().unwrap())),
            "case {k}: goodput"
        );
        assert_eq!(s.vllm_max_output_tokens_per_s, Some(f(&e["max_output_tokens_per_s"])), "case {k}: bucket tokens");
        assert_eq!(
            s.vllm_max_concurrent_requests,
            e["max_concurrent_requests"].as_u64(),
            "case {k}: bucket concurrency"
        );
        let want = e["metrics"].as_object().unwrap();
        assert_eq!(s.metrics.len(), want.len(), "case {k}: sections");
        for m in &s.metrics {
            let w = &want[m.metric.key()];
            let name = m.metric.key();
            assert_eq!(bits(m.mean_ms), bits(f(&w["mean"])), "case {k} {name} mean");
            assert_eq!(bits(m.median_ms), bits(f(&w["median"])), "case {k} {name} median");
            assert_eq!(m.std_ms.map(bits), Some(bits(f(&w["std"]))), "case {k} {name} std");
            for ((_, got), want) in m.percentiles.iter().zip(w["percentiles"].as_array().unwrap()) {
                assert_eq!(bits(*got), bits(f(want)), "case {k} {name} percentile");
            }
        }
    }
}

fn ok(start_ms: u64, chunks_ms: &[u32], tokens: u32) -> RequestRecord {
    RequestRecord {
        planned_ns: start_ms * 1_000_000,
        arrival_ns: start_ms * 1_000_000,
        start_ns: start_ms * 1_000_000,
        chunks_us: chunks_ms.iter().map(|m| m * 1000).collect(),
        usage: Usage { prompt_tokens: Some(100), completion_tokens: Some(tokens) },
        status: 200,
        ..RequestRecord::default()
    }
}

fn failed(kind: FailureKind, message: &str) -> RequestRecord {
    RequestRecord { failure: Some(Failure { kind, message: message.into() }), ..RequestRecord::default() }
}

#[test]
fn single_token_requests_leave_tpot_but_count_everywhere_else() {
    let run = test_run(vec![ok(0, &[100], 1), ok(0, &[200, 300, 400], 3)], 2.0);
    let s = Summary::compute(&run);
    let tpot = s.metric(Metric::Tpot).unwrap();
    // Only the 3-token request: (0.4 - 0.2) / 2 = 100 ms.
    assert!((tpot.mean_ms - 100.0).abs() < 1e-9);
    assert_eq!(s.metric(Metric::Ttft).unwrap().median_ms, 150.0);
    assert_eq!(s.total_output_tokens, Some(4));
    assert_eq!(s.total_input_tokens, 200);
    assert_eq!(s.request_throughput, 1.0);
    assert_eq!(s.total_token_throughput, Some(102.0));
    // No concurrency cap: no client-queue sections even though they are not selected.
    assert!(s.metric(Metric::ClientQueueTime).is_none());
}

#[test]
fn goodput_slos_are_inclusive() {
    let mut run = test_run(vec![ok(0, &[500, 600], 2), ok(0, &[501, 600], 2)], 1.0);
    run.config.output.goodput = vec![Slo { metric: Metric::Ttft, max_ms: 500.0 }];
    assert_eq!(Summary::compute(&run).request_goodput, Some(1.0));
    run.config.output.goodput.clear();
    assert_eq!(Summary::compute(&run).request_goodput, None);
}

#[test]
fn failures_are_counted_by_kind_and_the_first_ten_messages_kept() {
    let mut records = vec![ok(0, &[10], 1)];
    for i in 0..12 {
        records.push(failed(FailureKind::HttpStatus, &format!("Bad Request {i}")));
    }
    records.push(failed(FailureKind::Timeout, "timed out"));
    let s = Summary::compute(&test_run(records, 1.0));
    assert_eq!(s.failed, Some(13));
    assert_eq!(s.failures_by_kind[&FailureKind::HttpStatus], 12);
    assert_eq!(s.failures_by_kind[&FailureKind::Timeout], 1);
    assert_eq!(s.failure_messages.len(), 10);
    assert_eq!(s.failure_messages[9], "Bad Request 9");
    // Failed requests add no input tokens.
    assert_eq!(s.total_input_tokens, 100);
}

#[test]
fn nothing_succeeded_gives_zeros_not_nans() {
    let s = Summary::compute(&test_run(vec![failed(FailureKind::Connect, "refused")], 0.0));
    assert_eq!(s.completed, 0);
    assert_eq!(s.request_throughput, 0.0);
    assert_eq!(s.metric(Metric::Ttft).unwrap().mean_ms, 0.0);
    assert_eq!(s.vllm_max_concurrent_requests, Some(0));
    assert_eq!(s.peak_output_throughput, Some(0.0));
}

#[test]
fn client_queue_sections_follow_vllms_conditions() {
    let mut a = ok(0, &[100], 1);
    a.start_ns = 50_000_000; // waited 50 ms for a slot
    let mut run = test_run(vec![a], 1.0);
    run.config.output.percentile_metrics = Metric::ALL.to_vec();
    run.config.traffic.max_concurrency = Some(1);
    let s = Summary::compute(&run);
    assert_eq!(s.metric(Metric::ClientQueueTime).unwrap().median_ms, 50.0);
    assert!(s.metric(Metric::E2elIncludingClientQueue).is_none(), "rate is inf");
    run.config.traffic.request_rate = 4.0;
    let s = Summary::compute(&run);
    let q = s.metric(Metric::E2elIncludingClientQueue).unwrap();
    assert!((q.median_ms - 150.0).abs() < 1e-9);
}

#[test]
fn a_pooling_run_counts_inputs_and_latencies_only() {
    let pooled = |ms: u32| {
        let mut r = ok(0, &[ms], 0);
        r.usage.completion_tokens = None;
        r.end_us = ms * 1000;
        r
    };
    let records = vec![pooled(40), pooled(60), failed(FailureKind::InBandError, "too long")];
    let mut run = test_run(records, 2.0);
    run.config.target.backend = crate::config::Backend::OpenaiEmbeddings;
    run.config.output.percentile_metrics = vec![Metric::Ttft, Metric::E2el];
    run.config.output.goodput = vec![Slo { metric: Metric::E2el, max_ms: 50.0 }];
    run.config.output.slice_seconds = Some(1.0);
    let s = Summary::compute(&run);
    assert_eq!(s.slices.iter().map(|x| x.completed).sum::<u64>(), 2);
    assert!(s.slices.iter().all(|x| x.output_tokens == 0.0), "an answer is not a token");
    assert_eq!((s.completed, s.failed, s.total_input_tokens), (2, Some(1), 200));
    assert_eq!(s.pooling, Some(PoolingFigures { total_input_sequences: Some(2), input_sequence_throughput: 1.0 }));
    assert_eq!(s.total_token_throughput, Some(100.0), "input tokens alone");
    // vLLM's pooling metrics: no output, goodput, peaks or token-time sections.
    assert_eq!((s.total_output_tokens, s.output_throughput, s.request_goodput), (None, None, None));
    assert_eq!((s.peak_output_throughput, s.vllm_max_concurrent_requests), (None, None));
    assert_eq!(s.metrics.iter().map(|m| m.metric).collect::<Vec<_>>(), [Metric::E2el]);
    assert_eq!(s.metric(Metric::E2el).unwrap().mean_ms, 50.0);
    // vLLM's pooling block: its input rate after the request rate, E2EL alone.
    let expected = [
        "============ Serving Benchmark Result ============",
        "Successful requests:                     2         ",
        "Failed requests:                         1         ",
        "Benchmark duration (s):                  2.00      ",
        "Total input tokens:                      200       ",
        "Request throughput (req/s):              1.00      ",
        "Input throughput (inputs/s):             1.00      ",
        "Total token throughput (tok/s):          100.00    ",
        "----------------End-to-end Latency----------------",
        "Mean E2EL (ms):                          50.00     ",
        "Median E2EL (ms):                        50.00     ",
        "P99 E2EL (ms):                           59.80     ",
        "==================================================",
        "",
    ];
    assert_eq!(crate::vllm::render_result_block(&s), expected.join("\n"));
}

#[test]
fn a_pooling_request_of_several_inputs_counts_each() {
    // 10 prompts, 4 a request: requests 0 and 1 carry 4, request 2 the last 2.
    let records: Vec<RequestRecord> = (0..3)
        .map(|i| {
            let mut r = ok(0, &[40], 0);
            r.index = i;
            r.end_us = 40_000;
            r
        })
        .collect();
    let mut run = test_run(records, 2.0);
    run.config.target.backend = crate::config::Backend::OpenaiEmbeddings;
    run.config.traffic.num_prompts = 10;
    if let crate::config::WorkloadSpec::Random { batch_size, .. } = &mut run.config.workload {
        *batch_size = 4;
    }
    let s = Summary::compute(&run);
    assert_eq!(s.pooling, Some(PoolingFigures { total_input_sequences: Some(10), input_sequence_throughput: 5.0 }));
    // A failed request's inputs are not counted.
    run.records[1].failure = Some(Failure { kind: FailureKind::InBandError, message: "x".into() });
    assert_eq!(Summary::compute(&run).pooling.unwrap().total_input_sequences, Some(6));
}

#[test]
fn dispatch_lag_skips_unsent_requests() {
    let mut late = ok(0, &[10], 1);
    late.planned_ns = 1_000_000_000;
    late.arrival_ns = 1_004_000_000;
    late.start_ns = late.arrival_ns;
    let mut unsent = failed(FailureKind::NotSent, "not sent");
    unsent.planned_ns = 5_000_000_000;
    let s = Summary::compute(&test_run(vec![ok(0, &[10], 1), late, unsent], 2.0));
    assert_eq!(s.failed, Some(0), "a request never sent is not a failed request");
    let lag = s.dispatch_lag.unwrap();
    assert!((lag.max_ms - 4.0).abs() < 1e-6);
    assert!((lag.p50_ms - 2.0).abs() < 1e-6);
}

#[test]
fn summary_round_trips_through_json_with_an_infinite_rate() {
    let s = Summary::compute(&test_run(vec![ok(0, &[10, 20], 2), failed(FailureKind::NoToken, "none")], 1.0));
    assert_eq!(s.failures_by_kind.len(), 1);
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["request_rate"], "inf");
    assert_eq!(serde_json::from_value::<Summary>(json).unwrap(), s);
    // A minimal summary (what an old text report gives) deserializes with defaults.
    let old: Summary = serde_json::from_str(
        r#"{"completed": 3, "duration_s": 1.5, "total_input_tokens": 30, "request_throughput": 2.0}"#,
    )
    .unwrap();
    assert_eq!(old.failed, None);
    assert!(old.metrics.is_empty());
}
