//! Tests of the importers on the reference reports and on result JSON of every shape.

use serde_json::{Value, json};
use servebench_core::config::Metric;
use servebench_core::metrics::Summary;
use servebench_core::record::{FailureKind, RunResult};
use servebench_core::vllm::result_json;

use super::*;
use crate::runs::{ChunkTimes, RunKind};
use crate::testutil::sample;

const R000: &str = include_str!("../../../../testdata/vllm-reports/000-dense-models.txt");
const R001: &str = include_str!("../../../../testdata/vllm-reports/001-prompt-sweep.txt");
const R003: &str = include_str!("../../../../testdata/vllm-reports/003-sharegpt-percentiles.txt");
const R004: &str = include_str!("../../../../testdata/vllm-reports/004-prefill-decode.txt");

fn import(text: &str) -> ImportReport {
    import_bytes(text.as_bytes(), "/data/file")
}

fn labels(run: &NewRun) -> Vec<(&str, &str)> {
    run.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

#[test]
fn every_reference_block_becomes_one_run() {
    for (text, blocks) in [(R000, 11), (R001, 23), (R003, 1), (R004, 2)] {
        let report = import(text);
        assert_eq!(report.format, Format::Text);
        assert_eq!(report.runs.len(), blocks);
        assert!(report.skipped.is_empty(), "{:?}", report.skipped);
        assert!(report.notes.is_empty(), "{:?}", report.notes);
        for run in &report.runs {
            assert_eq!(run.kind, RunKind::Import);
            assert_eq!(run.source.as_ref().unwrap().file, "/data/file");
        }
    }
}

#[test]
fn reference_000_runs_are_labelled_with_their_models() {
    let runs = import(R000).runs;
    let models: Vec<&str> = runs.iter().map(|r| r.model.as_deref().unwrap()).collect();
    assert_eq!(
        models,
        [
            "Qwen/Qwen3-8B",
            "Qwen/Qwen3-4B",
            "Qwen/Qwen3-1.7B",
            "Qwen/Qwen3-0.6B",
            "meta-llama/Llama-3.2-1B",
            "meta-llama/Llama-3.2-3B",
            "google/gemma-3-1b-it",
            "google/gemma-3-4b-it",
            "google/gemma-3-12b-it",
            "microsoft/phi-4",
            "microsoft/Phi-4-mini-instruct",
        ]
    );
    for run in &runs {
        assert_eq!(labels(run), [("model", run.model.as_deref().unwrap())]);
    }
    let first = &runs[0];
    assert_eq!(first.source.as_ref().unwrap().line, Some(3));
    assert_eq!(first.summary.duration_s, 64.40);
    assert_eq!(first.summary.vllm_max_concurrent_requests, Some(8));
    assert_eq!(runs[10].source.as_ref().unwrap().line, Some(283));
}

#[test]
fn reference_001_runs_take_their_list_values_in_order() {
    let runs = import(R001).runs;
    let all: Vec<Vec<(&str, &str)>> = runs.iter().map(labels).collect();
    let sweep = ["1", "2", "4", "8", "16", "32", "64", "128", "256", "512", "1024", "2048"];
    for (i, n) in sweep.iter().enumerate() {
        assert_eq!(all[i], [("heading", "vllm"), ("num_prompts", *n), ("seq_length", "80")], "block {i}");
        assert_eq!(runs[i].summary.completed.to_string(), *n, "block {i}");
    }
    for (i, n) in ["1", "2", "4", "8", "16", "32", "64"].iter().enumerate() {
        // The first list ended, so `num_prompts` is set anew after `seq_length`.
        assert_eq!(all[12 + i], [("heading", "vllm"), ("seq_length", "10000"), ("num_prompts", *n)]);
        assert_eq!(runs[12 + i].summary.total_input_tokens, 10_000 * n.parse::<u64>().unwrap());
    }
    for l in &all[19..] {
        assert_eq!(*l, [("heading", "vllm"), ("seq_length", "10000"), ("num_prompt", "1")]);
    }
    assert!(runs.iter().all(|r| r.model.is_none()));
}

#[test]
fn reference_004_runs_are_labelled_with_their_sections() {
    let runs = import(R004).runs;
    assert_eq!(labels(&runs[0]), [("section", "Prefill")]);
    assert_eq!(labels(&runs[1]), [("section", "Decode")]);
    assert_eq!(runs[1].summary.total_output_tokens, Some(65536));
}

#[test]
fn a_malformed_block_is_skipped_with_its_line_and_keeps_its_list_value() {
    let block = |n: u64| {
        let s = Summary { completed: n, duration_s: 1.0, request_throughput: n as f64, ..Summary::default() };
        servebench_core::vllm::render_result_block(&s)
    };
    let bad = block(2).replace("Benchmark duration (s):                  1.00", "Benchmark duration (s):   fast");
    let text = format!("n: 1, 2, 3\n{}\n{bad}\n{}", block(1), block(3));
    let report = import(&text);
    assert_eq!(report.runs.len(), 2);
    assert_eq!(labels(&report.runs[0]), [("n", "1")]);
    assert_eq!(labels(&report.runs[1]), [("n", "3")]);
    assert_eq!(report.skipped.len(), 1);
    let skip = &report.skipped[0];
    assert_eq!(skip.line, 11);
    assert!(skip.message.contains("\"fast\"") && skip.message.contains("block at line 9"), "{skip}");
}

#[test]
fn a_block_of_gpustack_s_runner_is_labelled_and_its_figures_said_not_to_be_vllm_s() {
    let s = Summary { completed: 4, duration_s: 2.0, request_throughput: 2.0, ..Summary::default() };
    let block = servebench_core::vllm::render_result_block(&s);
    let other = servebench_core::vllm::render_result_block(&Summary { duration_s: 2.5, ..s.clone() });
    let runner = other.replace(
        "==================================================\n",
        "----------------------Latency---------------------\nMean Latency(s):                          1.00\n\
         ==================================================\n",
    );
    let report = import(&format!("{block}\n{runner}"));
    assert_eq!(report.runs.len(), 2);
    assert!(labels(&report.runs[0]).iter().all(|(k, _)| *k != "client"));
    assert!(labels(&report.runs[1]).contains(&("client", "gpustack-runner")));
    assert_eq!(report.notes.len(), 1, "{:?}", report.notes);
    assert!(report.notes[0].message.contains("not vLLM's"), "{:?}", report.notes);
}

#[test]
fn a_text_without_blocks_says_so() {
    let report = import("just some notes\n");
    assert!(report.runs.is_empty());
    assert!(report.skipped[0].message.contains("no vLLM result block"), "{:?}", report.skipped);
    let said = |text: &str| import(text).skipped[0].message.clone();
    assert_eq!(said(" \n"), "the file is empty; import a vLLM result JSON or console report");
    assert_eq!(said("null"), "the file is the JSON value null, not a result (an object, or a list of them)");
    assert!(said("42").starts_with("the file is the JSON value 42,"), "{}", said("42"));
}

/// The sample run saved as vLLM would (`--save-detailed`), without servebench's key.
fn vllm_doc() -> (RunResult, Summary, Value) {
    let (mut run, _) = sample();
    run.config.output.save_detailed = true;
    run.config.output.label = Some("nightly".into());
    let summary = Summary::compute(&run);
    let mut doc = result_json(&run, &summary);
    let m = doc.as_object_mut().unwrap();
    m.remove("servebench");
    // vLLM's start times are perf_counter readings.
    let starts = m["start_times"].as_array().unwrap().iter().map(|t| t.as_f64().unwrap() + 5000.0).collect();
    m.insert("start_times".into(), starts);
    m.insert("run_number".into(), json!(2));
    (run, summary, doc)
}

#[test]
fn a_vllm_result_file_gives_columns_labels_and_records() {
    let (run, summary, doc) = vllm_doc();
    let report = import(&doc.to_string());
    assert_eq!(report.format, Format::Json);
    assert!(report.skipped.is_empty() && report.notes.is_empty(), "{report:?}");
    let new = &report.runs[0];
    assert_eq!(new.model.as_deref(), Some("Qwen/Qwen3-8B"));
    assert_eq!(new.backend.as_deref(), Some("vllm"));
    assert_eq!(new.num_prompts, Some(3));
    assert_eq!(labels(new), [("label", "nightly"), ("gpu", "H100"), ("run_number", "2")]);
    assert!(new.started_at.as_deref().unwrap().starts_with("2025-06-01T12:00:00"));
    assert_eq!(new.summary.metric(Metric::Itl), summary.metric(Metric::Itl));

    let records = new.records.as_ref().unwrap();
    assert_eq!(records.chunk_times, ChunkTimes::All);
    for (got, want) in records.records.iter().zip(&run.records) {
        assert_eq!(got.chunks_us, want.chunks_us);
        assert_eq!(got.start_ns, want.start_ns - run.records[0].start_ns);
        assert_eq!(got.output_tokens(), want.output_tokens());
        assert_eq!(got.prompt_tokens(), if want.succeeded() { want.prompt_tokens() } else { 0 });
    }
    let failure = records.records[2].failure.as_ref().unwrap();
    assert_eq!((failure.kind, failure.message.as_str()), (FailureKind::HttpStatus, "503 Service Unavailable"));
    // The records give back the run's TTFT, TPOT, ITL and E2EL.
    let again = Summary::compute(&RunResult { records: records.records.clone(), ..run });
    for m in [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el] {
        assert_eq!(again.metric(m), summary.metric(m), "{m:?}");
    }
}

#[test]
fn appended_files_give_one_run_per_line_and_skip_broken_lines() {
    let (_, _, doc) = vllm_doc();
    let (line, next) = (doc.to_string(), another_run(&doc).to_string());
    let text = format!("{line}\n{{\"completed\": 3, \"dur\n{next}\n{{\"date\": \"x\"}}");
    let report = import(&text);
    assert_eq!(report.runs.len(), 2);
    let lines: Vec<_> = report.runs.iter().map(|r| r.source.as_ref().unwrap().line).collect();
    assert_eq!(lines, [Some(1), Some(3)]);
    assert_ne!(report.runs[0].fingerprint, report.runs[1].fingerprint);
    assert_eq!(report.skipped.len(), 2, "{:?}", report.skipped);
    assert_eq!(report.skipped[0].line, 2);
    assert!(report.skipped[0].message.contains("not valid JSON"), "{}", report.skipped[0]);
    assert_eq!(report.skipped[1].line, 4);
    assert!(report.skipped[1].message.contains("\"completed\""), "{}", report.skipped[1]);
}

/// `doc` with other figures: a run of its own, not a repeat of it.
fn another_run(doc: &Value) -> Value {
    let mut other = doc.clone();
    other["duration"] = json!(doc["duration"].as_f64().unwrap() + 1.0);
    other
}

/// A file that holds the same result twice (a report pasted twice, a file appended to twice)
/// imports it once and names the repeat; the same figures under other labels are kept and
/// noted; an empty list is said to hold nothing.
#[test]
fn a_result_repeated_in_one_file_is_imported_once() {
    let (_, _, doc) = vllm_doc();
    let line = doc.to_string();
    let report = import(&format!("{line}\n{line}\n"));
    assert_eq!(report.runs.len(), 1);
    assert_eq!(
        report.skipped,
        vec![Problem { line: 2, message: "repeats the result at line 1 exactly (the same report twice)".into() }]
    );
    let block = R003.to_string();
    let report = import(&format!("{block}\n{block}"));
    assert_eq!((report.runs.len(), report.skipped.len()), (1, 1), "{:?}", report.skipped);
    let relabelled = import(&format!("model: a\n{block}\nmodel: b\n{block}"));
    assert_eq!(relabelled.runs.len(), 2);
    assert!(
        relabelled.notes.iter().any(|n| n.message.contains("was one report pasted twice?")),
        "{:?}",
        relabelled.notes
    );
    let empty = import("[]");
    assert!(empty.runs.is_empty());
    assert!(empty.skipped[0].message.starts_with("the file holds no result"), "{:?}", empty.skipped);
}

#[test]
fn pretty_printed_documents_and_lists_are_read() {
    let (_, _, doc) = vllm_doc();
    let pretty = serde_json::to_string_pretty(&doc).unwrap();
    let next = serde_json::to_string_pretty(&another_run(&doc)).unwrap();
    let report = import(&format!("\n{pretty}\n{next}\n"));
    assert_eq!(report.runs.len(), 2);
    assert_eq!(report.runs[1].source.as_ref().unwrap().line, Some(2 + pretty.lines().count()));

    let list = json!([doc, {"not": "a result"}, another_run(&doc)]).to_string();
    let report = import(&list);
    assert_eq!(report.runs.len(), 2);
    assert!(report.skipped[0].message.contains("(list item 1)"), "{:?}", report.skipped);
    let fps: Vec<_> = report.runs.iter().map(|r| r.fingerprint.clone().unwrap()).collect();
    assert!(fps[0].ends_with(":1#0") && fps[1].ends_with(":1#2"), "{fps:?}");
}

#[test]
fn an_old_vllm_file_without_the_newer_keys_is_read() {
    let doc = json!({
        "backend": "vllm", "model_id": "meta-llama/Llama-2-7b-hf", "tokenizer_id": "meta-llama/Llama-2-7b-hf",
        "best_of": 1, "use_beam_search": false, "num_prompts": 2, "request_rate": "inf", "duration": 2.0,
        "completed": 2, "total_input_tokens": 20, "total_output_tokens": 4, "request_throughput": 1.0,
        "input_throughput": 10.0, "output_throughput": 2.0,
        "mean_ttft_ms": 150.0, "median_ttft_ms": 150.0, "p99_ttft_ms": 199.0,
        "mean_tpot_ms": 20.0, "median_tpot_ms": 20.0, "p99_tpot_ms": 20.0,
        "input_lens": [10, 10], "output_lens": [2, 2], "ttfts": [0.1, 0.2], "itls": [[0.02], [0.02]],
        "generated_texts": ["a", "b"], "errors": ["", ""],
        "gpu": "A100"
    });
    let report = import(&doc.to_string());
    let new = &report.runs[0];
    assert_eq!(labels(new), [("gpu", "A100")]);
    assert_eq!(new.summary.failed, None);
    assert_eq!(new.summary.request_rate, Some(f64::INFINITY));
    let records = new.records.as_ref().unwrap();
    assert_eq!(records.records[1].chunks_us, [200_000, 220_000]);
    assert!(records.records.iter().all(|r| r.succeeded() && r.start_ns == 0));
    assert!(new.started_at.is_none());
}

#[test]
fn vllm_error_texts_give_failure_kinds() {
    let doc = json!({
        "completed": 0, "duration": 1.0, "total_input_tokens": 0, "request_throughput": 0.0,
        "ttfts": [0.0, 0.0, 0.0, 0.0, 0.5], "itls": [[], [], [], [], [0.1]],
        "errors": [
            "Never received a valid chunk to calculate TTFT.This response will be marked as failed!",
            "Traceback (most recent call last):\n  ...\naiohttp.client_exceptions.ClientConnectorError: refused",
            "Traceback (most recent call last):\n  ...\nasyncio.exceptions.TimeoutError",
            "Bad Request",
            "Traceback (most recent call last):\n  ...\naiohttp.ClientPayloadError: broken"
        ]
    });
    let report = import(&doc.to_string());
    let kinds: Vec<_> =
        report.runs[0].records.as_ref().unwrap().records.iter().map(|r| r.failure.as_ref().unwrap().kind).collect();
    use FailureKind::*;
    assert_eq!(kinds, [NoToken, Connect, Timeout, HttpStatus, Stream]);
    // The broken stream keeps the chunks it got.
    assert_eq!(report.runs[0].records.as_ref().unwrap().records[4].chunks_us, [500_000, 600_000]);
}

#[test]
fn per_request_arrays_of_other_lengths_are_noted_and_left_out() {
    let (_, _, mut doc) = vllm_doc();
    doc["itls"] = json!([[0.01]]);
    let report = import(&doc.to_string());
    assert_eq!(report.runs.len(), 1);
    assert!(report.runs[0].records.is_none());
    assert!(report.notes[0].message.contains("`itls` has 1 entries but `ttfts` has 3"), "{:?}", report.notes);
}

#[test]
fn a_servebench_file_restores_config_and_records() {
    let (mut run, _) = sample();
    run.config.output.save_detailed = true;
    run.interrupted = true;
    let summary = Summary::compute(&run);
    let report = import(&result_json(&run, &summary).to_string());
    assert!(report.notes.is_empty(), "{:?}", report.notes);
    let new = &report.runs[0];
    assert_eq!(new.config, Some(serde_json::to_value(&run.config).unwrap()));
    assert_eq!(new.target.as_deref(), Some("http://127.0.0.1:8000"));
    assert_eq!(labels(new), [("gpu", "H100")]);
    assert_eq!(new.started_at.as_deref(), Some(run.started_at.as_str()));
    assert_eq!((new.interrupted, &new.notes), (true, &run.notes));
    assert_eq!(new.summary, summary);
    let records = new.records.as_ref().unwrap();
    assert_eq!(records.chunk_times, ChunkTimes::All);
    let mut want = run.records.clone();
    for r in &mut want {
        r.text.clear();
    }
    assert_eq!(records.records, want);

    // Without --save-detailed only the first and last chunk times are known.
    run.config.output.save_detailed = false;
    let report = import(&result_json(&run, &summary).to_string());
    let records = report.runs[0].records.as_ref().unwrap();
    assert_eq!(records.chunk_times, ChunkTimes::FirstLast);
    assert_eq!(records.records[0].chunks_us, [150_000, 211_000]);
    assert_eq!(records.records[1].turn, run.records[1].turn);
}

#[test]
fn a_run_s_gpu_count_comes_from_its_config_else_a_gpus_label_that_counts() {
    // servebench's own file: the saved config's `--gpus`.
    let (mut run, _) = sample();
    run.config.target.gpus = Some(8);
    let summary = Summary::compute(&run);
    assert_eq!(summary.gpus, Some(8));
    let report = import(&result_json(&run, &summary).to_string());
    assert_eq!(report.runs[0].summary.gpus, Some(8));
    assert_eq!(report.runs[0].summary, summary);
    // vLLM's file with `--metadata gpus=4` (written as text), and one without.
    let (_, _, doc) = vllm_doc();
    assert_eq!(import(&doc.to_string()).runs[0].summary.gpus, None);
    for (value, want) in [(json!("4"), Some(4)), (json!(4), Some(4)), (json!("H100"), None), (json!("0"), None)] {
        let mut with = doc.clone();
        with.as_object_mut().unwrap().insert("gpus".into(), value.clone());
        let new = &import(&with.to_string()).runs[0];
        assert_eq!(new.summary.gpus, want, "gpus: {value}");
        assert!(new.labels.iter().any(|(k, _)| k == "gpus"), "it stays a label");
    }
    // A sweep's run: the server parameters it added count the GPUs and are labelled as a
    // pasted `vllm serve` line labels them.
    let mut swept = doc.clone();
    for (k, v) in [("tensor_parallel_size", json!(2)), ("data_parallel_size", json!(2)), ("max_num_seqs", json!(64))] {
        swept.as_object_mut().unwrap().insert(k.into(), v);
    }
    let new = &import(&swept.to_string()).runs[0];
    assert_eq!(new.summary.gpus, Some(4));
    for label in [("tp", "2"), ("dp", "2"), ("max-num-seqs", "64")] {
        assert!(new.labels.contains(&(label.0.to_string(), label.1.to_string())), "{label:?}: {:?}", new.labels);
    }
    // Console reports under headings that name their GPUs, or the server's parallel sizes.
    let block = R003.lines().skip_while(|l| !l.starts_with("=====")).collect::<Vec<_>>().join("\n");
    for (heading, want) in [
        ("gpus: 2", Some(2)),
        ("$ vllm serve openai/gpt-oss-120b -tp 4 -dp 2", Some(8)),
        ("$ vllm serve openai/gpt-oss-120b -pp 2", Some(2)),
        ("Qwen/Qwen3-8B", None),
        ("gpus: H100\ntp=4", Some(4)),
        ("gpus: H100", None),
    ] {
        let run = &import(&format!("{heading}\n{block}\n")).runs[0];
        assert_eq!(run.summary.gpus, want, "{heading}: {:?}", run.labels);
    }
}

#[test]
fn a_damaged_servebench_key_keeps_what_vllm_s_keys_say() {
    let (_, _, mut doc) = vllm_doc();
    doc["servebench"] = json!({"version": "99", "records": "bad"});
    let report = import(&doc.to_string());
    let new = &report.runs[0];
    assert_eq!(new.model.as_deref(), doc["model_id"].as_str());
    assert!(new.model.is_some() && new.started_at.is_some(), "{new:?}");
    assert!(report.notes.iter().any(|n| n.message.contains("its servebench key has no config")), "{:?}", report.notes);
}

#[test]
fn fingerprints_follow_the_content_not_the_name() {
    let a = import_bytes(R004.as_bytes(), "/a");
    let b = import_bytes(R004.as_bytes(), "/b");
    let fp = |r: &ImportReport| r.runs.iter().map(|r| r.fingerprint.clone().unwrap()).collect::<Vec<_>>();
    assert_eq!(fp(&a), fp(&b));
    assert_ne!(fp(&a)[0], fp(&a)[1]);
    assert_ne!(fp(&a), fp(&import_bytes(R000.as_bytes(), "/a"))[..2]);
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let err = import_file(Path::new("/nonexistent/run.json")).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/run.json"), "{err}");
}

mod never_panics {
    use proptest::prelude::*;

    use super::*;

    /// Lines a report file is made of, to be shuffled into broken files.
    const PIECES: [&str; 12] = [
        "============ Serving Benchmark Result ============",
        "==================================================",
        "Successful requests:                     20",
        "Benchmark duration (s):                  64.40",
        "Total input tokens:                      2560",
        "Request throughput (req/s):              0.31",
        "---------------Time to First Token----------------",
        "Mean TTFT (ms):                          1616.70",
        "num_prompts: 1, 2, 4",
        "# Prefill",
        "Results Qwen/Qwen3-8B",
        "",
    ];

    proptest! {
        #[test]
        fn importing_any_text_never_panics(text in "\\PC{0,200}") {
            let _ = import(&text);
        }

        #[test]
        fn importing_shuffled_report_lines_never_panics(picks in proptest::collection::vec(0..PIECES.len(), 0..60)) {
            let text: Vec<&str> = picks.iter().map(|&i| PIECES[i]).collect();
            let report = import(&text.join("\n"));
            prop_assert!(report.runs.len() <= picks.iter().filter(|&&i| i == 0).count());
        }

        #[test]
        fn importing_broken_json_never_panics(text in "[{}\\[\\]\":,0-9a-z \n]{0,120}") {
            let _ = import(&format!("{{{text}"));
        }
    }
}

#[test]
fn a_byte_order_mark_is_not_part_of_the_result() {
    let (run, summary) = sample();
    let json = servebench_core::vllm::dumps(&result_json(&run, &summary));
    let report = import_bytes(&[b"\xEF\xBB\xBF".as_slice(), json.as_bytes()].concat(), "/data/bom.json");
    assert_eq!((report.format, report.runs.len()), (Format::Json, 1), "{:?}", report.skipped);
}

#[cfg(unix)]
#[test]
fn a_device_is_refused_before_it_is_read() {
    let err = import_file(Path::new("/dev/zero")).unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
}
