//! The Trace Event Format export: one JSON object Perfetto reads, rows packed without overlap,
//! server counters beside the requests.

use proptest::prelude::*;
use serde_json::Value;

use super::*;
use crate::testutil::sample_run;

fn records(chunk_times: ChunkTimes) -> RunRecords {
    RunRecords { chunk_times, records: sample_run().records }
}

fn context() -> TraceContext {
    TraceContext {
        title: "run 3: Qwen/Qwen3-8B".into(),
        request_id_prefix: Some("bench-1234abcd-".into()),
        server: None,
    }
}

fn written(records: &RunRecords) -> String {
    let mut out = Vec::new();
    write_requests_trace(records, &context(), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn the_sample_run_as_a_trace() {
    insta::assert_snapshot!(written(&records(ChunkTimes::All)));
}

#[test]
fn the_trace_is_one_json_object_that_perfetto_reads() {
    let v: Value = serde_json::from_str(&written(&records(ChunkTimes::All))).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let phases = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
    // Three requests: two with tokens (request, first-token wait and decode each), one failed.
    assert_eq!(phases("X") - events.iter().filter(|e| e["cat"] == "wait" || e["cat"] == "lag").count(), 3 + 2 * 2);
    let failed = events.iter().find(|e| e["cat"] == "failed").unwrap();
    assert_eq!(failed["args"]["failure"], "http_status: 503 Service Unavailable");
    assert_eq!(failed["args"]["x_request_id"], "bench-1234abcd-2");
    // The failed request was released 1 ms after its plan said.
    let late = events.iter().find(|e| e["cat"] == "lag").unwrap();
    assert_eq!((late["ts"].as_f64(), late["dur"].as_f64()), (Some(8000.0), Some(1000.0)));
    // Every slice of a row nests or follows: the first token inside the request.
    let second = events.iter().find(|e| e["name"] == "request 1").unwrap();
    assert_eq!(second["ts"].as_f64(), Some(5000.02));
    assert_eq!(second["dur"].as_f64(), Some(290.005 * 1000.0));
    assert_eq!(second["args"]["conversation"], 3);
    assert!(events.iter().any(|e| e["name"] == "token chunks/s"));
    let peak = events.iter().filter(|e| e["name"] == "in flight").map(|e| e["args"]["in flight"].as_i64().unwrap());
    assert_eq!(peak.max(), Some(2));
}

#[test]
fn without_every_chunk_time_there_is_no_chunk_rate() {
    let text = written(&records(ChunkTimes::FirstLast));
    assert!(!text.contains("token chunks/s"));
    assert!(text.contains("\"until first token\""));
}

#[test]
fn requests_never_sent_are_left_out() {
    let mut r = records(ChunkTimes::All);
    r.records[2].failure = Some(servebench_core::record::Failure {
        kind: servebench_core::record::FailureKind::NotSent,
        message: "x".into(),
    });
    let text = written(&r);
    assert!(!text.contains("request 2"));
}

#[test]
fn the_servers_gauges_and_counter_rates_follow_the_requests() {
    use servebench_core::telemetry::{Series, ServerTelemetry, Signal, Source};
    let source = Source {
        url: "http://gpu-1:8000/metrics".into(),
        engine: Some("vllm".into()),
        scrapes: 3,
        series: vec![
            Series { signal: Signal::Running, points: vec![[0.0, 0.0], [0.1, 2.0], [0.2, 1.0]] },
            // A drop between the last two scrapes is a restart: no rate there.
            Series { signal: Signal::GenerationTokens, points: vec![[0.0, 10.0], [0.1, 15.0], [0.2, 3.0]] },
            // Two first tokens in the first interval, 0.3 s in all; none in the second.
            Series { signal: Signal::TtftSum, points: vec![[0.0, 1.0], [0.1, 1.3], [0.2, 1.3]] },
            Series { signal: Signal::TtftCount, points: vec![[0.0, 5.0], [0.1, 7.0], [0.2, 7.0]] },
        ],
        ..Source::default()
    };
    let ctx = TraceContext { server: Some(ServerTelemetry { interval_s: 0.1, sources: vec![source] }), ..context() };
    let mut out = Vec::new();
    write_requests_trace(&records(ChunkTimes::All), &ctx, &mut out).unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let process = events.iter().find(|e| e["name"] == "process_name" && e["pid"] == 4).unwrap();
    assert_eq!(process["args"]["name"], "server: vllm metrics at http://gpu-1:8000/metrics");
    let running: Vec<(f64, f64)> = events
        .iter()
        .filter(|e| e["name"] == "running")
        .map(|e| (e["ts"].as_f64().unwrap(), e["args"]["running"].as_f64().unwrap()))
        .collect();
    assert_eq!(running, [(0.0, 0.0), (100_000.0, 2.0), (200_000.0, 1.0)]);
    let rate: Vec<&Value> = events.iter().filter(|e| e["name"] == "generation_tokens_per_s").collect();
    assert_eq!(rate.len(), 1);
    assert_eq!(rate[0]["ts"].as_f64(), Some(100_000.0));
    assert!((rate[0]["args"]["generation_tokens_per_s"].as_f64().unwrap() - 50.0).abs() < 1e-9);
    let ttft: Vec<&Value> = events.iter().filter(|e| e["name"] == "server_mean_ttft_ms").collect();
    assert_eq!(ttft.len(), 1);
    assert!((ttft[0]["args"]["server_mean_ttft_ms"].as_f64().unwrap() - 150.0).abs() < 1e-9);
    assert!(!events.iter().any(|e| e["name"] == "ttft_sum_per_s" || e["name"] == "ttft_count_per_s"));
}

#[test]
fn a_closed_loop_draws_its_queue_as_a_counter_not_a_row_per_wait() {
    let mut r = records(ChunkTimes::All);
    for rec in &mut r.records {
        (rec.planned_ns, rec.arrival_ns) = (0, 0);
    }
    let v: Value = serde_json::from_str(&written(&r)).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    assert!(!events.iter().any(|e| e["cat"] == "wait"));
    let waiting = events.iter().filter(|e| e["name"] == "waiting").map(|e| e["args"]["waiting"].as_i64().unwrap());
    assert_eq!(waiting.max(), Some(3));
}

#[test]
fn rows_are_packed_into_as_few_as_overlap() {
    assert_eq!(pack_rows(&[(0, 10), (5, 15), (10, 20), (12, 13)]), vec![0, 1, 0, 2]);
    assert_eq!(pack_rows(&[]), Vec::<u32>::new());
}

proptest! {
    #[test]
    fn packed_rows_never_overlap_and_number_the_most_at_once(
        spans in proptest::collection::vec((0u64..1000, 1u64..200), 0..60)
    ) {
        let intervals: Vec<(u64, u64)> = spans.iter().map(|&(a, len)| (a, a + len)).collect();
        let rows = pack_rows(&intervals);
        for i in 0..intervals.len() {
            for j in i + 1..intervals.len() {
                let ((a0, a1), (b0, b1)) = (intervals[i], intervals[j]);
                if rows[i] == rows[j] {
                    prop_assert!(a1 <= b0 || b1 <= a0, "{:?} and {:?} share row {}", intervals[i], intervals[j], rows[i]);
                }
            }
        }
        // The most intervals open at one begin time (ends are open) is the rows needed.
        let most = intervals.iter().map(|&(t, _)| intervals.iter().filter(|&&(a, b)| a <= t && t < b).count()).max();
        let used = rows.iter().max().map(|&m| m as usize + 1);
        prop_assert_eq!(used, most);
    }
}
