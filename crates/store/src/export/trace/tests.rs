use proptest::prelude::*;
use serde_json::Value;

use super::*;
use crate::testutil::sample_run;

fn records(chunk_times: ChunkTimes) -> RunRecords {
    RunRecords { chunk_times, records: sample_run().records }
}

fn context() -> TraceContext {
    TraceContext { title: "run 3: Qwen/Qwen3-8B".into(), request_id_prefix: Some("bench-1234abcd-".into()) }
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
