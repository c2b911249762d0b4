//! Trace replay on small BurstGPT and Mooncake fixtures.

use super::{MOONCAKE_BLOCK_TOKENS, load, sample, split_csv};
use crate::datasets::multi_turn::shared_prefix_len;
use crate::testutil::{qwen3, testdata};

fn burstgpt() -> std::path::PathBuf {
    testdata().join("datasets/burstgpt_small.csv")
}

fn mooncake() -> std::path::PathBuf {
    testdata().join("datasets/mooncake_small.jsonl")
}

#[test]
fn burstgpt_rows_keep_their_times_and_lengths_and_failures_are_dropped() {
    let (records, notes) = load(&burstgpt(), None).unwrap();
    assert_eq!(records.len(), 10);
    assert_eq!(notes, ["Trace: dropped 2 requests with no output tokens."]);
    let times: Vec<f64> = records.iter().map(|r| r.timestamp_s).collect();
    assert_eq!(times, [0.0, 113.0, 113.0, 135.0, 168.0, 196.0, 197.5, 225.0, 257.0, 295.0]);
    assert_eq!((records[1].input_len, records[1].output_len), (417, 334));
    let ds = sample(Some(qwen3()), &burstgpt(), 4, 0, None).unwrap();
    assert_eq!(ds.samples.len(), 4);
    for (s, r) in ds.samples.iter().zip(&records) {
        assert_eq!(s.prompt_len, r.input_len);
        assert_eq!(qwen3().count(&s.prompt, false).unwrap(), r.input_len);
        assert_eq!(s.max_tokens, r.output_len);
        assert_eq!(s.timestamp_s, Some(r.timestamp_s));
    }
}

#[test]
fn mooncake_hash_ids_become_shared_prefixes() {
    let (records, notes) = load(&mooncake(), None).unwrap();
    assert!(notes.is_empty());
    assert_eq!(records.len(), 5);
    assert_eq!(records[1].timestamp_s, 0.25);
    assert_eq!(records[4].timestamp_s, 3.1);
    let ds = sample(Some(qwen3()), &mooncake(), 0, 3, None).unwrap();
    let enc: Vec<Vec<u32>> = ds.samples.iter().map(|s| qwen3().encode(&s.prompt, false).unwrap()).collect();
    for (e, r) in enc.iter().zip(&records) {
        assert_eq!(e.len(), r.input_len as usize);
    }
    // Requests 0 and 2 share blocks 46, 47; request 1 shares block 46 only; request 3 none.
    // Random ids re-encode to slightly more or fewer tokens, so the shares are near, not at,
    // the block edges.
    let b = MOONCAKE_BLOCK_TOKENS;
    let (s01, s02, s03) =
        (shared_prefix_len(&enc[0], &enc[1]), shared_prefix_len(&enc[0], &enc[2]), shared_prefix_len(&enc[0], &enc[3]));
    assert!((b * 3 / 4..b * 5 / 4).contains(&s01), "{s01}");
    assert!((b * 7 / 4..b * 9 / 4).contains(&s02), "{s02}");
    assert!(s03 < 16, "{s03}");
    // Without a tokenizer the shared blocks are word-for-word equal.
    let words = sample(None, &mooncake(), 0, 3, None).unwrap();
    let w: Vec<Vec<&str>> = words.samples.iter().map(|s| s.prompt.split(' ').skip(1).collect()).collect();
    assert_eq!(w[0][..2 * b], w[2][..2 * b]);
    assert_eq!(w[0][..b], w[1][..b]);
    assert_ne!(w[0][b..b + 8], w[1][b..b + 8]);
    assert_eq!(w[4].len(), 90);
}

#[test]
fn a_trace_without_the_needed_columns_names_them() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("t.csv");
    std::fs::write(&p, "when,in,out\n1,2,3\n").unwrap();
    let err = load(&p, None).unwrap_err().to_string();
    assert!(err.contains("timestamp") && err.contains("BurstGPT"), "{err}");
    let p = tmp.path().join("t.jsonl");
    std::fs::write(&p, "{\"input_length\": 3, \"output_length\": 2}\n").unwrap();
    let err = load(&p, None).unwrap_err().to_string();
    assert!(err.contains("line 1") && err.contains("timestamp"), "{err}");
    let p = tmp.path().join("t2.csv");
    std::fs::write(&p, "Timestamp,Request tokens,Response tokens\n1,x,3\n").unwrap();
    assert!(load(&p, None).unwrap_err().to_string().contains("line 2"));
}

/// vLLM's `timed_trace` reading of a file whose fields are named `ts`, `in`, `out`, `h`.
fn timed() -> servebench_core::config::TimedTrace {
    servebench_core::config::TimedTrace {
        chunk_tokens: 8,
        sec_multiplier: 0.001,
        label_timestamp: "ts".into(),
        label_input_length: "in".into(),
        label_output_length: "out".into(),
        label_hash_ids: "h".into(),
    }
}

#[test]
fn a_timed_trace_reads_its_own_fields_units_and_block_size() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("t.jsonl");
    let rows = "{\"ts\": 2000, \"in\": 40, \"out\": 5, \"h\": [7, 11, 12]}\n\
                {\"ts\": 2500, \"in\": 48, \"out\": 6, \"h\": [7, 11, 19]}\n\
                {\"ts\": 3000, \"in\": 20, \"out\": 0}\n\
                {\"ts\": 4750, \"in\": 30, \"out\": 4}\n";
    std::fs::write(&p, rows).unwrap();
    let (records, notes) = load(&p, Some(&timed())).unwrap();
    let times: Vec<f64> = records.iter().map(|r| r.timestamp_s).collect();
    assert_eq!(times, [0.0, 0.5, 2.75], "milliseconds times 0.001, from the first row");
    assert_eq!((records[1].input_len, records[1].output_len, records[1].hash_ids.clone()), (48, 6, vec![7, 11, 19]));
    assert!(records[2].hash_ids.is_empty());
    assert_eq!(notes, ["Trace: dropped 1 requests with no output tokens."]);
    // Hash ids stand for 8 tokens here: the first two rows share two blocks, 16 tokens, word
    // for word without a tokenizer (and not the third block).
    let words = sample(None, &p, 0, 3, Some(&timed())).unwrap();
    let w: Vec<Vec<&str>> = words.samples.iter().map(|s| s.prompt.split(' ').skip(1).collect()).collect();
    assert_eq!(w[0][..16], w[1][..16]);
    assert_ne!(w[0][16..24], w[1][16..24]);
    let ds = sample(Some(qwen3()), &p, 0, 3, Some(&timed())).unwrap();
    let enc: Vec<Vec<u32>> = ds.samples.iter().map(|s| qwen3().encode(&s.prompt, false).unwrap()).collect();
    assert_eq!(enc.iter().map(Vec::len).collect::<Vec<_>>(), [40, 48, 30]);
    assert!((12..=20).contains(&shared_prefix_len(&enc[0], &enc[1])));
}

#[test]
fn a_timed_trace_row_without_a_labelled_field_names_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("t.jsonl");
    std::fs::write(&p, "{\"ts\": 1, \"in\": 4, \"out\": 2}\n{\"timestamp\": 2, \"in\": 4, \"out\": 2}\n").unwrap();
    let err = load(&p, Some(&timed())).unwrap_err().to_string();
    assert!(err.contains("line 2") && err.contains("\"ts\"") && err.contains("--timed-trace-label-timestamp"), "{err}");
    std::fs::write(&p, "{\"ts\": 1, \"in\": 4, \"out\": 2, \"h\": \"x\"}\n").unwrap();
    let err = load(&p, Some(&timed())).unwrap_err().to_string();
    assert!(err.contains("h must be a list"), "{err}");
}

#[test]
fn more_requests_than_the_trace_has_replays_it_all() {
    let ds = sample(None, &burstgpt(), 1000, 0, None).unwrap();
    assert_eq!(ds.samples.len(), 10);
    assert!(ds.notes.iter().any(|n| n.contains("only 10 requests")));
}

#[test]
fn csv_fields_may_be_quoted() {
    assert_eq!(split_csv("a,\"b,c\",\"d\"\"e\",f"), ["a", "b,c", "d\"e", "f"]);
    assert_eq!(split_csv(""), [""]);
}

proptest::proptest! {
    #[test]
    fn quoted_csv_fields_split_back(fields in proptest::collection::vec("[^\r\n]{0,12}", 1..6)) {
        let line: Vec<String> = fields.iter().map(|f| format!("\"{}\"", f.replace('"', "\"\""))).collect();
        proptest::prop_assert_eq!(split_csv(&line.join(",")), fields);
    }
}
