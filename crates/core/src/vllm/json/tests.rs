//! Tests of the result JSON: key order, detailed keys, file names, writing and reading back.

use super::read::{VllmJsonError, summary_from_vllm_json};
use super::*;
use crate::config::{Metric, RampStrategy, RampUp, Slo};
use crate::record::{Failure, FailureKind, Usage};

fn record(i: u32, start_ms: u64, chunks_ms: &[u32], tokens: u32) -> RequestRecord {
    RequestRecord {
        index: i,
        planned_ns: start_ms * 1_000_000,
        arrival_ns: start_ms * 1_000_000,
        start_ns: start_ms * 1_000_000 + 250_000,
        chunks_us: chunks_ms.iter().map(|m| m * 1000).collect(),
        end_us: chunks_ms.last().map_or(0, |m| m * 1000 + 500),
        max_tokens: 8,
        prompt_tokens_client: Some(31),
        usage: Usage { prompt_tokens: Some(32), completion_tokens: Some(tokens) },
        text: "héllo".into(),
        status: 200,
        ..RequestRecord::default()
    }
}

fn sample_run() -> RunResult {
    let mut config = RunConfig::for_target("http://127.0.0.1:8000", "Qwen/Qwen3-8B");
    config.target.tokenizer = Some("Qwen/Qwen3-8B".into());
    config.traffic.num_prompts = 3;
    config.traffic.request_rate = 4.0;
    config.traffic.max_concurrency = Some(2);
    config.output.metric_percentiles = vec![50.0, 99.9];
    config.output.percentile_metrics = vec![Metric::Ttft, Metric::E2el];
    config.output.goodput = vec![Slo { metric: Metric::Ttft, max_ms: 150.0 }];
    config.output.metadata = vec![("gpu".into(), "H100".into())];
    config.output.save_detailed = true;
    let mut failed = record(2, 500, &[], 0);
    failed.status = 503;
    failed.failure = Some(Failure { kind: FailureKind::HttpStatus, message: "Service Unavailable".into() });
    let mut with_server = record(1, 250, &[120, 150, 190], 6);
    with_server.server_queue_s = Some(0.01);
    let records = vec![record(0, 0, &[100, 130, 170, 200], 4), with_server, failed];
    RunResult {
        date: "20250102-030405".into(),
        started_at: "2025-01-02T03:04:05+00:00".into(),
        notes: vec!["token counts from the server's usage".into()],
        ..RunResult::finished(config, records, 1.25)
    }
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[test]
fn a_pooling_run_writes_vllm_s_pooling_keys_and_reads_them_back() {
    let mut run = sample_run();
    run.config.target.backend = crate::config::Backend::VllmPooling;
    run.config.output.percentile_metrics = vec![Metric::E2el];
    let summary = Summary::compute(&run);
    let v = result_json(&run, &summary);
    let before_metrics: Vec<&str> = keys(&v).into_iter().skip_while(|k| *k != "duration").collect();
    assert_eq!(
        before_metrics,
        [
            "duration",
            "completed",
            "total_input_tokens",
            "total_input_sequences",
            "request_throughput",
            "input_sequence_throughput",
            "total_token_throughput",
            "input_lens",
            "latencies",
            "queue_times",
            "errors",
            "mean_e2el_ms",
            "median_e2el_ms",
            "std_e2el_ms",
            "p50_e2el_ms",
            "p99.9_e2el_ms",
            "servebench",
        ]
    );
    assert_eq!(v["total_input_sequences"], 2);
    let back = summary_from_vllm_json(&v).unwrap();
    assert_eq!(back.pooling, summary.pooling);
    assert_eq!(back.total_output_tokens, None);
    // No `failed` key in vLLM's pooling keys: the count comes back from servebench's section.
    assert_eq!((back.failed, summary.failed), (Some(1), Some(1)));
}

#[test]
fn keys_follow_vllm_0_33_order_without_detailed_arrays() {
    let mut run = sample_run();
    run.config.output.save_detailed = false;
    run.config.traffic.ramp_up = Some(RampUp { strategy: RampStrategy::Linear, start_rps: 1.0, end_rps: 10.0 });
    let v = result_json(&run, &Summary::compute(&run));
    assert_eq!(
        keys(&v),
        [
            "date",
            "endpoint_type",
            "backend",
            "label",
            "model_id",
            "tokenizer_id",
            "num_prompts",
            "gpu",
            "request_rate",
            "burstiness",
            "max_concurrency",
            "ramp_up_strategy",
            "ramp_up_start_rps",
            "ramp_up_end_rps",
            "duration",
            "completed",
            "failed",
            "total_input_tokens",
            "total_output_tokens",
            "request_throughput",
            "request_goodput",
            "output_throughput",
            "total_token_throughput",
            "latencies",
            "queue_times",
            "max_output_tokens_per_s",
            "max_concurrent_requests",
            "rtfx",
            "rps_change_events",
            "mean_ttft_ms",
            "median_ttft_ms",
            "std_ttft_ms",
            "p50_ttft_ms",
            "p99.9_ttft_ms",
            "mean_e2el_ms",
            "median_e2el_ms",
            "std_e2el_ms",
            "p50_e2el_ms",
            "p99.9_e2el_ms",
            "servebench",
        ]
    );
    let text = dumps(&v);
    // Three requests ramping 1 -> 10 req/s: rates 1, 5.5, 10, sent 0, 250 and 500 ms in.
    assert!(text.contains(r#""rps_change_events": [{"rps": 1, "timestamp": "2025-01-02T03:04:05"}, {"rps": 2, "timestamp": "2025-01-02T03:04:05.250000"}, "#));
    assert!(text.contains(r#"{"rps": 10, "timestamp": "2025-01-02T03:04:05.500000"}], "mean_ttft_ms""#));
    assert!(text.contains(r#""request_rate": 4.0, "burstiness": 1.0, "max_concurrency": 2, "ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 10, "duration": 1.25, "completed": 2, "failed": 1,"#));
    assert!(text.contains(r#""latencies": [0.19999999999999998, 0.19, 0.0]"#));
}

#[test]
fn snapshot_detailed_result_json() {
    let run = sample_run();
    let v = result_json(&run, &Summary::compute(&run));
    assert!(keys(&v).contains(&"server_ttfts"));
    insta::assert_snapshot!(dumps(&v));
}

#[test]
fn result_file_names_follow_vllm() {
    let mut c = RunConfig::for_target("http://h:1", "org/sub/Model-7B");
    let date = "20250101-000000";
    let name = |c: &RunConfig| result_filename(c, &c.target.model_id, date);
    assert_eq!(name(&c), PathBuf::from("vllm-infqps-Model-7B-20250101-000000.json"));
    c.traffic.request_rate = 4.0;
    c.traffic.max_concurrency = Some(8);
    c.output.label = Some("mine".into());
    assert_eq!(name(&c), PathBuf::from("mine-4.0qps-concurrency8-Model-7B-20250101-000000.json"));
    c.traffic.ramp_up = Some(RampUp { strategy: RampStrategy::Exponential, start_rps: 2.0, end_rps: 16.0 });
    assert_eq!(
        name(&c),
        PathBuf::from("mine-ramp-up-exponential-2qps-16qps-concurrency8-Model-7B-20250101-000000.json")
    );
    c.output.result_dir = Some("out/runs".into());
    c.output.result_filename = Some("fixed.json".into());
    assert_eq!(name(&c), Path::new("out/runs").join("fixed.json"));
}

#[test]
fn write_result_replaces_or_appends_one_document_per_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let path = dir.join("nested").join("r.json");
    let a = json!({"a": 1.0});
    let b = json!({"b": [1e-05]});
    write_result(&path, &a, false).unwrap();
    write_result(&path, &a, false).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), r#"{"a": 1.0}"#);
    write_result(&path, &b, true).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "{\"a\": 1.0}\n{\"b\": [1e-05]}");
    let fresh = dir.join("fresh.json");
    write_result(&fresh, &b, true).unwrap();
    assert_eq!(fs::read_to_string(&fresh).unwrap(), r#"{"b": [1e-05]}"#);
    let err = write_result(&dir.join("nested"), &a, false).unwrap_err();
    assert!(err.to_string().contains("could not write the result file"));
}

#[test]
fn our_json_reads_back_into_the_same_summary() {
    let run = sample_run();
    let summary = Summary::compute(&run);
    let v = result_json(&run, &summary);
    assert_eq!(summary_from_vllm_json(&v).unwrap(), summary);
    // Through text, floats may move by the JSON parser's rounding but no more.
    let reparsed: Value = serde_json::from_str(&dumps(&v)).unwrap();
    let back = summary_from_vllm_json(&reparsed).unwrap();
    assert_eq!(back.failures_by_kind, summary.failures_by_kind);
    assert!((back.duration_s - summary.duration_s).abs() < 1e-12);
    // A speculative decoder's counters come back from vLLM's spec_decode_* keys.
    let spec = crate::telemetry::SpecDecodeCounts {
        num_drafts: 400,
        draft_tokens: 800,
        accepted_tokens: 500,
        accepted_per_position: vec![300, 200],
    };
    // Read as the server counted before and after the run; the report gives what changed.
    let before = crate::telemetry::SpecDecodeCounts {
        num_drafts: 10,
        draft_tokens: 20,
        accepted_tokens: 5,
        accepted_per_position: vec![4, 1],
    };
    let after = crate::telemetry::SpecDecodeCounts {
        num_drafts: 410,
        draft_tokens: 820,
        accepted_tokens: 505,
        accepted_per_position: vec![304, 201],
    };
    let window = crate::telemetry::SpecDecodeWindow { before: Some(before), after };
    let run = RunResult { spec_decode: Some(window.clone()), ..sample_run() };
    let summary = Summary::compute(&run);
    let v = result_json(&run, &summary);
    assert_eq!(v["spec_decode_acceptance_rate"], 62.5);
    assert_eq!(v["spec_decode_acceptance_length"], 2.25);
    assert_eq!(summary_from_vllm_json(&v).unwrap().spec_decode, Some(spec));
    // The readings themselves are kept, for a sharded run's merge.
    let kept: crate::telemetry::SpecDecodeWindow =
        serde_json::from_value(v["servebench"]["spec_decode_window"].clone()).unwrap();
    assert_eq!(kept, window);
}

#[test]
fn probes_are_written_under_vllm_s_keys_in_its_place_and_read_back() {
    use crate::record::ProbeRecord;
    let probe = |sent_s: f64, latency_s: f64, error: Option<&str>| ProbeRecord {
        sent_s,
        latency_s,
        error: error.map(str::to_string),
    };
    let probes = vec![probe(0.0, 0.030, None), probe(0.25, 0.0, Some("HTTP 503")), probe(0.5, 0.050, None)];
    let run = RunResult { probes: probes.clone(), ..sample_run() };
    let summary = Summary::compute(&run);
    let v = result_json(&run, &summary);
    assert_eq!((&v["probe_completed"], &v["probe_failed"]), (&json!(2), &json!(1)));
    assert_eq!((&v["probe_median_e2el_ms"], &v["probe_max_e2el_ms"]), (&json!(40.0), &json!(50.0)));
    let k = keys(&v);
    let at = |key: &str| k.iter().position(|x| *x == key).unwrap();
    assert!(at("rtfx") < at("probe_completed") && at("probe_max_e2el_ms") < at("mean_ttft_ms"), "{k:?}");
    assert_eq!(summary_from_vllm_json(&v).unwrap().probes, summary.probes);
    // The probes themselves are kept, for a sharded run's merge.
    let kept: Vec<ProbeRecord> = serde_json::from_value(v["servebench"]["probes"].clone()).unwrap();
    assert_eq!(kept, probes);
    // A run without probes has none of the keys.
    let plain = result_json(&sample_run(), &Summary::compute(&sample_run()));
    assert!(keys(&plain).iter().all(|k| !k.starts_with("probe")), "{:?}", keys(&plain));
}

#[test]
fn reads_a_file_vllm_wrote_and_older_versions_with_missing_keys() {
    let v: Value = serde_json::from_str(
        r#"{"date": "20250101-000000", "backend": "vllm", "request_rate": "inf",
        "max_concurrency": null, "duration": 64.4, "completed": 20, "failed": 1,
        "total_input_tokens": 2560, "total_output_tokens": 2560, "request_throughput": 0.31,
        "request_goodput": null, "output_throughput": 39.75, "total_token_throughput": 79.5,
        "errors": ["", "Bad Request", ""], "max_output_tokens_per_s": 52.0,
        "max_concurrent_requests": 8, "mean_ttft_ms": 1616.7, "median_ttft_ms": 1724.28,
        "std_ttft_ms": 3.0, "p99_ttft_ms": 2761.99, "p99.9_ttft_ms": 2800.0,
        "probe_p99_e2el_ms": 5.0}"#,
    )
    .unwrap();
    let s = summary_from_vllm_json(&v).unwrap();
    assert_eq!(s.request_rate, Some(f64::INFINITY));
    assert_eq!(s.vllm_max_concurrent_requests, Some(8));
    assert_eq!(s.peak_concurrent_requests, None);
    assert_eq!(s.failure_messages, ["Bad Request"]);
    let ttft = s.metric(Metric::Ttft).unwrap();
    assert_eq!(ttft.percentiles, [(99.0, 2761.99), (99.9, 2800.0)]);
    assert!(s.metric(Metric::E2el).is_none());
    // An early 0.x file: no failed, no peaks, no goodput key at all.
    let old: Value = serde_json::from_str(
        r#"{"duration": 4.53, "completed": 1, "total_input_tokens": 80,
        "total_output_tokens": 85, "request_throughput": 0.22, "output_throughput": 18.75,
        "mean_ttft_ms": 314.58, "median_ttft_ms": 314.58, "p99_ttft_ms": 314.58}"#,
    )
    .unwrap();
    let s = summary_from_vllm_json(&old).unwrap();
    assert_eq!((s.failed, s.request_rate, s.vllm_max_concurrent_requests), (None, None, None));
    assert_eq!(s.metric(Metric::Ttft).unwrap().std_ms, None);
}

#[test]
fn unreadable_documents_say_what_is_wrong() {
    assert_eq!(summary_from_vllm_json(&json!([1])), Err(VllmJsonError::NotAnObject("a list")));
    assert_eq!(summary_from_vllm_json(&json!({"duration": 1.0})), Err(VllmJsonError::Missing("completed")));
    let e = summary_from_vllm_json(&json!({"completed": "20", "duration": 1.0})).unwrap_err();
    assert_eq!(e.to_string(), "\"completed\" should be a whole number; the file may be damaged");
    let e = summary_from_vllm_json(&json!({"completed": 2, "duration": 1.0,
        "total_input_tokens": 1, "request_throughput": 2.0, "mean_ttft_ms": 1.0}))
    .unwrap_err();
    assert!(matches!(e, VllmJsonError::WrongType { .. }));
    // A percentile past 100 is no percentile: the key is named, not shown as P101.
    let e = summary_from_vllm_json(&json!({"completed": 2, "duration": 1.0, "total_input_tokens": 1,
        "request_throughput": 2.0, "mean_ttft_ms": 1.0, "median_ttft_ms": 1.0, "p101_ttft_ms": 5.0}))
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "\"p101_ttft_ms\" should be named for a percentile from 0 to 100; the file may be damaged"
    );
}
