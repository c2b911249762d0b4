//! Reading measured points: vLLM's text reports and result JSON, their headings and labels.

use super::*;
use crate::calibration::read::{read_file, read_points};

#[test]
fn lengths_expand_to_their_totals() {
    assert_eq!(Lengths::Even { total: 10 }.expand(4), vec![3, 3, 2, 2]);
    assert_eq!(Lengths::Even { total: 2 }.expand(4), vec![1, 1, 1, 1]);
    assert_eq!(Lengths::Each(vec![5, 7]).expand(3), vec![5, 7, 5]);
    let shape = Lengths::Shape { total: 30_000, quantiles: vec![(0.0, 1.0), (0.5, 10.0), (1.0, 100.0)] };
    let v = shape.expand(100);
    let sum: u64 = v.iter().map(|&x| u64::from(x)).sum();
    assert!((sum as i64 - 30_000).abs() < 100, "{sum}");
    assert!(v.windows(2).any(|w| w[0] > w[1]) && v.windows(2).any(|w| w[0] < w[1]), "shuffled");
    let mut sorted = v.clone();
    sorted.sort_unstable();
    assert!(sorted[50] < sorted[99] / 4, "skewed: {sorted:?}");
}

const REPORT: &str = "Results some/model

============ Serving Benchmark Result ============
Successful requests:                     20
Failed requests:                         0
Maximum request concurrency:             4
Benchmark duration (s):                  64.40
Total input tokens:                      2560
Total generated tokens:                  2570
Request throughput (req/s):              0.31
Output token throughput (tok/s):         39.75
Total token throughput (tok/s):          79.50
---------------Time to First Token----------------
Mean TTFT (ms):                          1616.70
Median TTFT (ms):                        1724.28
P99 TTFT (ms):                           2761.99
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          88.65
Median TPOT (ms):                        86.42
P99 TPOT (ms):                           102.80
---------------Inter-token Latency----------------
Mean ITL (ms):                           88.65
Median ITL (ms):                         87.08
P99 ITL (ms):                            101.28
==================================================
";

#[test]
fn a_console_block_becomes_a_point_with_its_totals() {
    let points = points_from_report(REPORT, "r.txt").unwrap();
    assert_eq!(points.len(), 1);
    let p = &points[0];
    assert_eq!(p.headings, vec!["Results some/model".to_string()]);
    assert_eq!(p.labels, [("model".to_string(), "some/model".to_string())]);
    assert_eq!((p.model(), p.labels_text().as_str()), (Some("some/model"), "model=some/model"));
    assert_eq!(p.workload.num_prompts, 20);
    assert_eq!(p.workload.max_concurrency, Some(4));
    assert!(p.workload.request_rate.is_infinite());
    assert_eq!(p.workload.input.expand(20), vec![128; 20]);
    assert_eq!(p.workload.output.expand(20).iter().sum::<u32>(), 2570);
    assert_eq!(p.value(FitMetric::MeanTtft), Some(1616.70));
    assert_eq!(p.value(FitMetric::MeanTpot), Some(88.65));
    assert_eq!(p.value(FitMetric::OutputThroughput), Some(39.75));
    let err = points_from_report("nothing here", "x.txt").unwrap_err().to_string();
    assert!(err.contains("x.txt") && err.contains("Serving Benchmark Result"), "{err}");
}

#[test]
fn a_result_json_gives_its_lengths_and_config() {
    let v = serde_json::json!({
        "num_prompts": 3, "request_rate": 2.0, "burstiness": 0.5, "max_concurrency": null,
        "completed": 3, "failed": 0, "duration": 4.0, "total_input_tokens": 60,
        "total_output_tokens": 30, "request_throughput": 0.75, "output_throughput": 7.5,
        "mean_ttft_ms": 100.0, "median_ttft_ms": 100.0, "mean_tpot_ms": 20.0, "median_tpot_ms": 20.0,
        "input_lens": [10, 20, 30], "output_lens": [5, 10, 15],
        "servebench": {"config": {"traffic": {"seed": 7, "ready_check_timeout_s": 0.0, "num_warmups": 0}}}
    });
    let p = point_from_json(&v, "r.json".into()).unwrap();
    assert!(p.labels.is_empty() && p.model().is_none(), "{:?}", p.labels);
    assert_eq!(p.workload.input, Lengths::Each(vec![10, 20, 30]));
    assert_eq!(p.workload.output, Lengths::Each(vec![5, 10, 15]));
    assert_eq!((p.workload.request_rate, p.workload.burstiness, p.workload.seed), (2.0, 0.5, 7));
    assert!(!p.workload.warmup);
    assert_eq!(p.workload.shared_prefix, 0);
    assert_eq!(p.value(FitMetric::MeanTpot), Some(20.0));
    // servebench's saved config names the random dataset's shared prefix.
    let mut prefixed = v.clone();
    prefixed["servebench"]["config"]["workload"] = serde_json::json!({
        "dataset": "random", "input_len": 16, "output_len": 10,
        "range_ratio": {"input": 0.0, "output": 0.0}, "prefix_len": 8
    });
    assert_eq!(point_from_json(&prefixed, "r.json".into()).unwrap().workload.shared_prefix, 8);
    let err = point_from_json(&serde_json::json!({"completed": 1}), "bad.json".into()).unwrap_err();
    assert!(err.contains("duration"), "{err}");
    // A run that scraped vLLM's phase metrics (`--server-metrics`) measured the engine's share
    // of its first token: 30 ms of queue and 50 of prefill over its 3 requests.
    let series = |signal: &str, end: f64| serde_json::json!({"signal": signal, "points": [[0.0, 0.0], [4.0, end]]});
    let mut scraped = v.clone();
    scraped["servebench"]["server_telemetry"] = serde_json::json!({"interval_s": 1.0, "sources": [{
        "url": "http://gpu:8000/metrics", "engine": "vllm", "scrapes": 2, "failed": 0, "first_error": null,
        "series": [series("queue_time_sum", 0.09), series("queue_time_count", 3.0),
                   series("prefill_time_sum", 0.15), series("prefill_time_count", 3.0)]
    }]});
    let engine = point_from_json(&scraped, "r.json".into()).unwrap().value(FitMetric::EngineTtft).unwrap();
    assert!((engine - 80.0).abs() < 1e-9, "{engine}");
    assert_eq!(p.value(FitMetric::EngineTtft), None, "not scraped, not measured");

    // An appended file holds one document per line.
    let dir = std::env::temp_dir().join(format!("sb-sim-points-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("runs.jsonl");
    std::fs::write(&path, format!("{v}\n{v}\n")).unwrap();
    let points = read_points(&path).unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[1].label, "runs.jsonl line 2");
    std::fs::write(&path, "{not json").unwrap();
    let err = read_points(&path).unwrap_err().to_string();
    assert!(err.contains("runs.jsonl") && err.contains("not valid JSON"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_endpoint_is_read_from_a_backend_heading_or_a_result_json() {
    let chat = |p: &MeasuredPoint| p.workload.chat;
    let report = |heading: &str| points_from_report(&format!("{heading}\n{REPORT}"), "r.txt").unwrap();
    assert!(chat(&report("backend: openai-chat")[0]));
    assert!(chat(&report("backend: vllm-chat")[0]));
    // Responses and Messages requests go through the chat template as chat requests do.
    assert!(chat(&report("backend: openai-responses")[0]) && chat(&report("backend: anthropic-messages")[0]));
    assert!(!chat(&report("backend: vllm")[0]) && !chat(&report("")[0]));
    // The pasted benchmark command says it too.
    assert!(chat(&report("vllm bench serve --backend openai-chat --dataset-name random --num-prompts 20")[0]));
    // A result JSON's own `backend` (vLLM writes it); unknown spellings are completions.
    let mut v = doc("Qwen/Qwen3-8B", 100.0);
    let json_chat = |v: &serde_json::Value| point_from_json(v, "r.json".into()).unwrap().workload.chat;
    assert!(!json_chat(&v));
    v["backend"] = "openai-chat".into();
    assert!(json_chat(&v));
    v["backend"] = "tgi".into();
    assert!(!json_chat(&v));
}

#[test]
fn how_requests_arrived_is_read_from_headings_where_the_report_does_not_print_it() {
    let report = |heading: &str| points_from_report(&format!("{heading}\n{REPORT}"), "r.txt").unwrap().remove(0);
    // The block prints no rate: all at once, Poisson gaps.
    let plain = report("");
    assert!(plain.workload.request_rate.is_infinite());
    assert_eq!(plain.workload.burstiness, 1.0);
    // A client at fixed intervals (guidellm's constant profile), 4 a second.
    let constant = report("request-rate: 4\narrivals: constant");
    assert_eq!((constant.workload.request_rate, constant.workload.burstiness), (4.0, CONSTANT_ARRIVALS));
    let gamma = report("request-rate: 2.5\nburstiness: 0.5");
    assert_eq!((gamma.workload.request_rate, gamma.workload.burstiness), (2.5, 0.5));
    // Nonsense is not a rate.
    assert!(report("request-rate: fast").workload.request_rate.is_infinite());
    assert!(report("request-rate: -3").workload.request_rate.is_infinite());
    // A rate the block printed is kept.
    let printed = REPORT.replace(
        "Successful requests:                     20",
        "Request rate configured (RPS):           8.00\nSuccessful requests:                     20",
    );
    let p = points_from_report(&format!("request-rate: 4\n{printed}"), "r.txt").unwrap().remove(0);
    assert_eq!(p.workload.request_rate, 8.0);
}

#[test]
fn a_shared_prefix_is_read_from_the_pasted_benchmark_command() {
    let report = |heading: &str| points_from_report(&format!("{heading}\n{REPORT}"), "r.txt").unwrap().remove(0);
    assert_eq!(report("").workload.shared_prefix, 0);
    let random = report("vllm bench serve --model m --random-input-len 128 --random-prefix-len 896 --num-prompts 20");
    assert_eq!(random.workload.shared_prefix, 896);
    let sonnet = report("vllm bench serve --dataset-name sonnet --sonnet-input-len 512 --sonnet-prefix-len 256");
    assert_eq!(sonnet.workload.shared_prefix, 256);
    assert_eq!(report("prefix-len: 64").workload.shared_prefix, 64);
    assert_eq!(report("prefix-len: many").workload.shared_prefix, 0);
    // The prefix-repetition dataset draws each prompt's prefix from several: no one shared prefix.
    let repeated = report("vllm bench serve --dataset-name prefix_repetition --prefix-repetition-prefix-len 512");
    assert_eq!(repeated.workload.shared_prefix, 0);
}

/// A result document of `model` with metadata `gpu`.
fn doc(model: &str, ttft: f64) -> serde_json::Value {
    serde_json::json!({
        "model_id": model, "label": "nightly", "gpu": "H100", "num_prompts": 2,
        "completed": 2, "duration": 1.0, "total_input_tokens": 20, "total_output_tokens": 10,
        "request_throughput": 2.0, "output_throughput": 10.0,
        "mean_ttft_ms": ttft, "median_ttft_ms": ttft
    })
}

#[test]
fn pretty_printed_documents_and_lists_are_read_with_their_labels() {
    let dir = std::env::temp_dir().join(format!("sb-sim-points-docs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (doc("Qwen/Qwen3-8B", 100.0), doc("google/gemma-3-1b-it", 200.0));
    let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap();
    let path = dir.join("sweep.json");
    std::fs::write(&path, format!("{}\n{}\n", pretty(&a), pretty(&b))).unwrap();
    let points = read_points(&path).unwrap();
    assert_eq!(points.len(), 2);
    let second_line = 1 + pretty(&a).lines().count();
    assert_eq!(points[1].label, format!("sweep.json line {second_line}"));
    assert_eq!(points[1].value(FitMetric::MeanTtft), Some(200.0));
    let want = [("model", "google/gemma-3-1b-it"), ("label", "nightly"), ("gpu", "H100")];
    assert_eq!(points[1].labels, want.map(|(k, v)| (k.to_string(), v.to_string())));

    let path = dir.join("list.json");
    std::fs::write(&path, serde_json::json!([a, b]).to_string()).unwrap();
    let points = read_points(&path).unwrap();
    let labels: Vec<(&str, Option<&str>)> = points.iter().map(|p| (p.label.as_str(), p.model())).collect();
    assert_eq!(
        labels,
        [
            ("list.json line 1 (list item 0)", Some("Qwen/Qwen3-8B")),
            ("list.json line 1 (list item 1)", Some("google/gemma-3-1b-it"))
        ]
    );

    // A document that cannot be read as a run is skipped with its place and reason; the others
    // are read. Where every result must read (`read_points`), it is the file's error.
    std::fs::write(&path, serde_json::json!([a, {"completed": 1}, b]).to_string()).unwrap();
    let read = read_file(&path).unwrap();
    assert_eq!(
        read.points.iter().map(|p| p.model()).collect::<Vec<_>>(),
        [Some("Qwen/Qwen3-8B"), Some("google/gemma-3-1b-it")]
    );
    assert_eq!(read.skipped.len(), 1);
    assert_eq!(read.skipped[0].label, "list.json line 1 (list item 1)");
    assert!(read.skipped[0].reason.contains("duration"), "{:?}", read.skipped);
    let err = read_points(&path).unwrap_err().to_string();
    assert!(err.contains("list.json: line 1 (list item 1): ") && err.contains("duration"), "{err}");
    assert_eq!(err.matches("list.json").count(), 1, "{err}");
    // A file none of whose results can be read is an error naming the first.
    std::fs::write(&path, serde_json::json!([{"completed": 1}, {"completed": 2}]).to_string()).unwrap();
    let err = read_file(&path).unwrap_err().to_string();
    assert!(err.contains("none of its 2 results") && err.contains("(list item 0)"), "{err}");
    // The error names the file once: its results' places are given without the name again.
    assert_eq!(err.matches("list.json").count(), 1, "{err}");
    std::fs::write(&path, serde_json::json!([{"completed": 1}]).to_string()).unwrap();
    let err = read_file(&path).unwrap_err().to_string();
    assert!(err.contains("list.json: line 1 (list item 0): ") && err.contains("duration"), "{err}");
    assert_eq!(err.matches("list.json").count(), 1, "{err}");
    // Bytes that are not text are named as such, with what to pass.
    std::fs::write(&path, [0xff, 0xfe, 0x00, 0x81]).unwrap();
    let err = read_file(&path).unwrap_err().to_string();
    assert!(err.contains("it is not text (UTF-8); pass vLLM console reports"), "{err}");
    // JSON that does not parse fails the file: which of its runs are whole cannot be told.
    std::fs::write(&path, format!("[{a}, {{\"completed\": ]")).unwrap();
    assert!(read_file(&path).is_err());
    std::fs::write(&path, "[]").unwrap();
    let err = read_points(&path).unwrap_err().to_string();
    assert!(err.contains("no result document"), "{err}");
    // A folder is not a file of results: the error says to pass its files.
    let err = read_file(&dir).unwrap_err().to_string();
    assert!(err.contains("it is a folder") && err.contains("/*.json"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_block_without_figures_is_skipped_and_the_report_s_other_blocks_are_read() {
    // Two good blocks around one whose run sent nothing (a failed launch pasted as it printed).
    let empty =
        REPORT.replace("Successful requests:                     20", "Successful requests:                     0");
    let text = format!("{REPORT}\nResults other/model\n{}\n{REPORT}", empty.trim_start_matches("Results some/model\n"));
    let read = report_points(parse_reports(&text, ReportOrigin::Vllm), "notes.md").unwrap();
    assert_eq!(read.points.len(), 2, "{:?}", read.skipped);
    assert_eq!(read.skipped.len(), 1);
    assert!(read.skipped[0].label.starts_with("notes.md #2 (line "), "{:?}", read.skipped);
    assert!(read.skipped[0].reason.contains("no request"), "{:?}", read.skipped);
    let err = points_from_report(&text, "notes.md").unwrap_err().to_string();
    assert!(err.contains("notes.md: #2 (line ") && err.contains("no request"), "{err}");
    assert_eq!(err.matches("notes.md").count(), 1, "{err}");
}
