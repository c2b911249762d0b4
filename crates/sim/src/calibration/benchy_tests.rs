//! llama-benchy's table, CSV and JSON read into measured runs; bad rows refused with their line;
//! any cell read without panicking.

use super::*;

/// A table as llama-benchy prints it at one request a time (the numbers are made up).
const ONE_AT_A_TIME: &str = "\
| model               |           test |             t/s |        ttfr (ms) |     est_ppt (ms) |    e2e_ttft (ms) |
|:--------------------|---------------:|----------------:|-----------------:|-----------------:|-----------------:|
| openai/gpt-oss-120b |         pp2048 | 2000.00 ± 30.00 |   1050.00 ± 17.5 |   1010.00 ± 17.5 |   1110.00 ± 18.0 |
| openai/gpt-oss-120b |           tg32 |    50.00 ± 1.00 |                  |                  |                  |
| openai/gpt-oss-120b | pp2048 @ d4096 | 1900.00 ± 70.00 |   3200.00 ± 120. |   3160.00 ± 120. |   3260.00 ± 122. |
| openai/gpt-oss-120b |   tg32 @ d4096 |    40.00 ± 1.10 |                  |                  |                  |

llama-benchy (build: 0000000)
date: 2026-01-02 17:11:19 | latency mode: generation
";

/// Several requests at once: the rates of the batch and of one request, the peaks.
const FOUR_AT_ONCE: &str = "\
| model | test | t/s (total) | t/s (req) | peak t/s | peak t/s (req) | ttfr (ms) | est_ppt (ms) | e2e_ttft (ms) |
|---|---|---|---|---|---|---|---|---|
| Qwen/Qwen3-8B | pp1024 (c4) | 4000.00 ± 10.00 | 1200.00 ± 9.00 | | | 950.00 ± 20.00 | 900.00 ± 20.00 | 960.00 ± 20.00 |
| Qwen/Qwen3-8B | tg128 (c4) | 120.00 ± 1.00 | 32.00 ± 0.50 | 130.00 ± 2.00 | 34.00 ± 1.00 | | | |
";

/// Every run of `text`, or the first that cannot be read (its line and why) as the error.
fn read(text: &str) -> Result<Vec<MeasuredPoint>, String> {
    points_from_benchy(text, "bench.md").and_then(|r| r.all("bench.md")).map_err(|e| e.to_string())
}

fn label<'a>(p: &'a MeasuredPoint, key: &str) -> Option<&'a str> {
    p.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

#[test]
fn each_prompt_row_and_the_decode_row_after_it_are_one_run() {
    let points = read(ONE_AT_A_TIME).unwrap();
    assert_eq!(points.len(), 2);
    for (p, (depth, ttft, rate)) in points.iter().zip([(0, 1050.0, 50.0), (4096, 3200.0, 40.0)]) {
        let w = &p.workload;
        // The tool's default of three batches of one request: 2,048 tokens after the context.
        assert_eq!((w.num_prompts, w.max_concurrency, w.request_rate), (3, Some(1), f64::INFINITY));
        assert_eq!((w.input.mean(3), w.output.mean(3)), (f64::from(2048 + depth), 32.0));
        assert!(w.chat, "llama-benchy sends chat requests");
        assert!(!w.warmup, "its warm-up is not a copy of the first request, which is sent uncached");
        assert_eq!(p.value(FitMetric::MeanTtft), Some(ttft));
        assert_eq!(p.value(FitMetric::MeanTpot), Some(1000.0 / rate));
        assert_eq!(p.value(FitMetric::OutputThroughput), None);
        assert_eq!(label(p, "model"), Some("openai/gpt-oss-120b"));
        assert_eq!(label(p, "client"), Some("llama-benchy"));
    }
    assert_eq!(label(&points[1], "test"), Some("pp2048 @ d4096 / tg32 @ d4096"));
    assert_eq!(points[1].label, "bench.md line 5");
}

#[test]
fn several_at_once_take_one_request_s_rate_and_the_batches_a_heading_gives() {
    let text = format!("runs: 50\n\n{FOUR_AT_ONCE}");
    let points = read(&text).unwrap();
    assert_eq!(points.len(), 1);
    let w = &points[0].workload;
    assert_eq!((w.num_prompts, w.max_concurrency), (200, Some(4)));
    assert_eq!(points[0].value(FitMetric::MeanTpot), Some(1000.0 / 32.0));
    assert_eq!(points[0].value(FitMetric::MeanTtft), Some(950.0));
    // Without a per-request rate the batch's does not stand in for it: no TPOT.
    let batch_only = FOUR_AT_ONCE.replace("| t/s (req) ", "| other ");
    let points = read(&batch_only).unwrap();
    assert_eq!(points[0].value(FitMetric::MeanTpot), None);
}

#[test]
fn the_text_above_a_table_labels_its_rows_and_names_the_model_first() {
    let text = format!(
        "vllm serve openai/gpt-oss-120b -tp 2 --kv-cache-dtype fp8\n\n{ONE_AT_A_TIME}\n## Qwen/Qwen3-8B, one Spark\n\n{FOUR_AT_ONCE}"
    );
    let points = read(&text).unwrap();
    assert_eq!(points.len(), 3);
    assert_eq!((label(&points[0], "tp"), label(&points[0], "kv-cache-dtype")), (Some("2"), Some("fp8")));
    assert_eq!(points[0].model(), Some("openai/gpt-oss-120b"));
    // A later heading names the next table's model ahead of its column; the serve line's
    // flags still stand, as they do for a report's blocks.
    assert_eq!(points[2].model(), Some("Qwen/Qwen3-8B"));
    assert_eq!(label(&points[2], "tp"), Some("2"));
}

#[test]
fn a_run_missing_half_or_an_unknown_test_is_refused_with_the_line() {
    let no_decode = ONE_AT_A_TIME.replace("|           tg32 |", "|    pp2048 @ d1 |");
    let e = read(&no_decode).unwrap_err();
    assert!(e.contains("line 3") && e.contains("no tg row after it"), "{e}");
    let lines: Vec<&str> = ONE_AT_A_TIME.lines().collect();
    let no_prompt = [lines[0], lines[1], lines[3]].join("\n");
    let e = read(&no_prompt).unwrap_err();
    assert!(e.contains("line 3") && e.contains("no pp row before it"), "{e}");
    let unknown = ONE_AT_A_TIME.replace("tg32 @ d4096", "decode 32    ");
    let e = read(&unknown).unwrap_err();
    assert!(e.contains("line 6") && e.contains("\"decode 32\""), "{e}");
    let untold = FOUR_AT_ONCE.replace(" (c4)", "");
    let e = read(&untold).unwrap_err();
    assert!(e.contains("does not say how many"), "{e}");
    // Context-loading rows are not runs; a table of nothing else has none.
    let ctx = "| model | test | t/s | ttfr (ms) |\n|---|---|---|---|\n| m | ctx_pp @ d4096 | 1.0 | 2.0 |\n";
    assert!(read(ctx).unwrap_err().contains("no pp and tg rows"));
    // Read as a file is, the run that cannot be read is skipped with its line, the others kept.
    let whole = read(ONE_AT_A_TIME).unwrap().len();
    let read = points_from_benchy(&no_decode, "bench.md").unwrap();
    assert_eq!(read.points.len(), whole - 1);
    assert_eq!(read.skipped.len(), 2, "the pair broken and the row put in its place: {:?}", read.skipped);
    assert_eq!(read.skipped[0].label, "bench.md line 3");
}

#[test]
fn a_depth_and_prompt_past_any_count_are_read_without_overflowing() {
    let huge = ONE_AT_A_TIME.replace("pp2048 @ d4096", "pp4294967295 @ d9").replace("tg32 @ d4096", "tg32 @ d9");
    let points = read(&huge).unwrap();
    assert_eq!(points[1].workload.input.mean(3), f64::from(u32::MAX));
}

#[test]
fn a_file_of_tables_is_read_as_such_unless_it_holds_vllm_s_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spark.md");
    std::fs::write(&path, ONE_AT_A_TIME).unwrap();
    assert_eq!(super::super::read_points(&path).unwrap().len(), 2);
    // Notes that paste a vLLM report beside a table are read for the report's blocks.
    let report = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/public/nvidia-forum-spark-qwen3-vl-32b-fp8.txt"),
    )
    .unwrap();
    std::fs::write(&path, format!("{ONE_AT_A_TIME}\n{report}")).unwrap();
    let points = super::super::read_points(&path).unwrap();
    assert!(points.iter().all(|p| label(p, "client") != Some("llama-benchy")) && !points.is_empty());
    assert!(is_benchy(ONE_AT_A_TIME) && is_benchy(FOUR_AT_ONCE));
    assert!(!is_benchy("| model | test | t/s |\n|---|---|---|\n"));
}

#[test]
fn its_csv_is_read_as_its_table_with_the_requests_it_counts() {
    let csv = "\
model,test_name,t_s_mean,t_s_std,t_s_req_mean,t_s_req_std,ttfr_mean,ttfr_std,ttfr_n,est_ppt_mean,e2e_ttft_mean
Qwen/Qwen3-8B,pp1024 (c1),4000.0,10.0,,,260.0,2.0,5,255.0,262.0
Qwen/Qwen3-8B,tg128 (c1),15.0,0.1,,,,,,,
Qwen/Qwen3-8B,pp1024 @d4096 (c4),9000.0,10.0,3000.0,10.0,900.0,5.0,20,890.0,905.0
Qwen/Qwen3-8B,tg128 @d4096 (c4),56.0,1.0,14.0,0.2,,,,,
";
    assert!(is_benchy(csv));
    let points = read(csv).unwrap();
    assert_eq!(points.len(), 2);
    let (one, four) = (&points[0], &points[1]);
    assert_eq!((one.workload.num_prompts, one.workload.max_concurrency), (5, Some(1)));
    assert_eq!((one.value(FitMetric::MeanTtft), one.value(FitMetric::MeanTpot)), (Some(260.0), Some(1000.0 / 15.0)));
    assert_eq!((four.workload.num_prompts, four.workload.max_concurrency), (20, Some(4)));
    assert_eq!(four.workload.input.mean(20), 5120.0);
    assert_eq!(four.value(FitMetric::MeanTpot), Some(1000.0 / 14.0), "one request's rate, not the batch's");
    assert_eq!(four.model(), Some("Qwen/Qwen3-8B"));
}

#[test]
fn its_json_report_gives_the_same_runs_counted_by_their_requests() {
    let report = serde_json::json!({
        "version": "0.3.5", "timestamp": "2026-03-22 10:00:00Z", "latency_mode": "api", "latency_ms": 1.2,
        "model": "openai/gpt-oss-120b", "prefix_caching_enabled": true, "max_concurrency": 4,
        "benchmarks": [
            {"concurrency": 1, "context_size": 0, "prompt_size": 1024, "response_size": 128,
             "is_context_prefill_phase": false,
             "ttfr": {"mean": 420.0, "std": 5.0, "values": [415.0, 420.0, 425.0, 420.0, 420.0]},
             "tg_throughput": {"mean": 50.0, "std": 1.0, "values": []}},
            {"concurrency": 4, "context_size": 4096, "prompt_size": 1024, "response_size": 128,
             "is_context_prefill_phase": true, "ttfr": {"mean": 900.0, "std": 5.0, "values": [900.0]}},
            {"concurrency": 4, "context_size": 4096, "prompt_size": 1024, "response_size": 128,
             "is_context_prefill_phase": false,
             "ttfr": {"mean": 2500.0, "std": 50.0, "values": [2400.0, 2500.0, 2550.0, 2550.0]},
             "tg_throughput": {"mean": 120.0, "std": 1.0, "values": []},
             "tg_req_throughput": {"mean": 31.25, "std": 0.5, "values": []}}
        ]
    });
    let points = points_from_benchy_json(&report, "bench.json").unwrap().all("bench.json").unwrap();
    assert_eq!(points.len(), 2, "the context-loading phase is no run");
    let (one, four) = (&points[0], &points[1]);
    assert_eq!((one.workload.num_prompts, one.workload.max_concurrency), (5, Some(1)));
    assert_eq!((one.workload.input.mean(5), one.workload.output.mean(5)), (1024.0, 128.0));
    assert_eq!((one.value(FitMetric::MeanTtft), one.value(FitMetric::MeanTpot)), (Some(420.0), Some(20.0)));
    assert_eq!((four.workload.num_prompts, four.workload.max_concurrency), (4, Some(4)));
    assert_eq!(four.workload.input.mean(4), 5120.0);
    assert_eq!(four.value(FitMetric::MeanTpot), Some(32.0), "one request's rate, not the batch's");
    assert_eq!(label(four, "test"), Some("pp1024 @ d4096 tg128 (c4)"));
    assert_eq!(four.model(), Some("openai/gpt-oss-120b"));
    // Through the file reader, as any result JSON.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.json");
    std::fs::write(&path, report.to_string()).unwrap();
    assert_eq!(super::super::read_points(&path).unwrap().len(), 2);
    let broken = serde_json::json!({"latency_mode": "api", "benchmarks": [{"concurrency": 1}]});
    let read = points_from_benchy_json(&broken, "x").unwrap();
    assert!(read.points.is_empty() && read.skipped[0].label == "x benchmark 0", "{:?}", read.skipped);
    // A run that measured neither figure is skipped by name, as the table's row is; the others
    // are read.
    let mut empty = report.clone();
    empty["benchmarks"][2].as_object_mut().unwrap().retain(|k, _| !k.contains("ttfr") && !k.contains("throughput"));
    let read = points_from_benchy_json(&empty, "x").unwrap();
    assert_eq!(read.points.len(), 1);
    assert_eq!(read.skipped.len(), 1);
    assert_eq!(read.skipped[0].label, "x benchmark 2 (pp1024 @ d4096 tg128 (c4))");
    assert!(read.skipped[0].reason.contains("no ttfr"), "{:?}", read.skipped);
    let phases_only = serde_json::json!({"latency_mode": "api", "benchmarks": [report["benchmarks"][1].clone()]});
    assert!(points_from_benchy_json(&phases_only, "x").unwrap_err().contains("context-loading"));
}

proptest::proptest! {
    #[test]
    fn a_test_name_reads_back_what_it_says(
        prefill in proptest::bool::ANY,
        tokens in 1u32..100_000,
        depth in proptest::option::of(1u32..1_000_000),
        c in proptest::option::of(1u32..1024),
    ) {
        let mut name = format!("{}{tokens}", if prefill { "pp" } else { "tg" });
        if let Some(d) = depth {
            name += &format!(" @ d{d}");
        }
        if let Some(c) = c {
            name += &format!(" (c{c})");
        }
        let t = test(&name).unwrap();
        proptest::prop_assert_eq!((t.prefill, t.tokens, t.depth, t.concurrency), (prefill, tokens, depth.unwrap_or(0), c));
        proptest::prop_assert!(t.tags.is_empty());
    }

    #[test]
    fn any_name_or_cell_is_read_without_panicking(text in "\\PC{0,40}") {
        let _ = test(&text);
        let _ = mean(&text);
        let _ = header(&text);
    }
}
