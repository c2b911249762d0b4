//! Tests of the report parser: the reference reports, malformed blocks, and render→parse.

use proptest::prelude::*;

use super::*;
use crate::metrics::{PoolingFigures, ProbeStats};
use crate::vllm::text::{render_result_block, render_result_block_styled};

const R000: &str = include_str!("../../../../../testdata/vllm-reports/000-dense-models.txt");
const R001: &str = include_str!("../../../../../testdata/vllm-reports/001-prompt-sweep.txt");
const R003: &str = include_str!("../../../../../testdata/vllm-reports/003-sharegpt-percentiles.txt");
const R004: &str = include_str!("../../../../../testdata/vllm-reports/004-prefill-decode.txt");

fn blocks(text: &str) -> Vec<ParsedBlock> {
    parse_reports(text, ReportOrigin::Vllm).into_iter().map(|e| e.unwrap_or_else(|err| panic!("{err}"))).collect()
}

/// The lines of `text` that a block rendered from `block` covers, rejoined.
fn original(text: &str, block: &ParsedBlock, rendered: &str) -> String {
    let n = rendered.lines().count();
    let mut s = text.lines().skip(block.line - 1).take(n).collect::<Vec<_>>().join("\n");
    s.push('\n');
    s
}

#[test]
fn reference_000_has_eleven_blocks_under_model_headings() {
    let bs = blocks(R000);
    assert_eq!(bs.len(), 11);
    assert_eq!(bs[0].headings, ["Results Qwen/Qwen3-8B"]);
    assert_eq!(bs[10].headings, ["Results microsoft/Phi-4-mini-instruct"]);
    assert_eq!(bs[0].line, 3);
    let s = &bs[0].summary;
    assert_eq!((s.completed, s.failed, s.max_concurrency), (20, Some(0), Some(4)));
    assert_eq!(s.duration_s, 64.40);
    assert_eq!(s.total_output_tokens, Some(2560));
    assert_eq!(s.vllm_max_concurrent_requests, Some(8));
    assert_eq!(s.vllm_max_output_tokens_per_s, Some(52.0));
    assert_eq!(s.peak_concurrent_requests, None);
    assert_eq!(s.metric(Metric::Itl).unwrap().percentile(99.0), Some(101.28));
    assert_eq!(bs[0].values.len(), 20);
    assert_eq!(bs[0].values[0], ("Successful requests".to_string(), 20.0));
}

#[test]
fn reference_001_has_the_older_format_and_its_headings() {
    let bs = blocks(R001);
    assert_eq!(bs.len(), 23);
    assert_eq!(
        bs[0].headings,
        ["vllm", "num_prompts: 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048", "seq_length: 80"]
    );
    assert!(bs[1..12].iter().all(|b| b.headings.is_empty()));
    assert_eq!(bs[12].headings, ["num_prompts: 1, 2, 4, 8, 16, 32, 64", "seq_length: 10000"]);
    assert_eq!((bs[0].heading_lines.as_slice(), bs[12].heading_lines.as_slice()), (&[2, 3, 4][..], &[269, 270][..]));
    assert_eq!(bs[19].headings, ["num_prompt:1"]);
    // The next block follows its predecessor's footer directly.
    assert!(bs[20].headings.is_empty());
    assert_eq!(bs[20].line, bs[19].line + 21);
    for b in &bs {
        assert!(b.style.legacy_total_token_label);
        assert_eq!(b.summary.failed, None);
        assert_eq!(b.summary.vllm_max_concurrent_requests, None);
    }
    assert_eq!(bs[11].summary.completed, 2048);
    assert_eq!(bs[22].summary.total_input_tokens, 16000);
}

#[test]
fn references_003_and_004_parse_with_their_sections() {
    let bs = blocks(R003);
    assert_eq!(bs.len(), 1);
    let e2el = bs[0].summary.metric(Metric::E2el).unwrap();
    assert_eq!(e2el.percentiles.len(), 5);
    assert_eq!(e2el.percentile(95.0), Some(72128.81));
    let bs = blocks(R004);
    assert_eq!(bs.len(), 2);
    assert_eq!(bs[0].headings, ["# Prefill"]);
    assert_eq!(bs[1].headings, ["# Decode"]);
    assert_eq!(bs[1].summary.vllm_max_output_tokens_per_s, Some(2224.0));
}

#[test]
fn every_reference_block_renders_back_to_its_text() {
    // 001, 003 and 004 kept their trailing spaces: byte-for-byte.
    for text in [R001, R003, R004] {
        for b in blocks(text) {
            let rendered = render_result_block_styled(&b.summary, b.style);
            assert_eq!(rendered, original(text, &b, &rendered), "block at line {}", b.line);
        }
    }
    // 000 lost its trailing spaces when pasted: compare trimmed lines.
    fn trim(s: &str) -> Vec<&str> {
        s.lines().map(str::trim_end).collect()
    }
    for b in blocks(R000) {
        let rendered = render_result_block_styled(&b.summary, b.style);
        assert_eq!(trim(&rendered), trim(&original(R000, &b, &rendered)));
    }
}

fn err(text: &str) -> BlockError {
    parse_reports(text, ReportOrigin::Vllm).into_iter().find_map(Result::err).expect("an error entry")
}

const GOOD: &str = "============ Serving Benchmark Result ============
Successful requests:                     2
Benchmark duration (s):                  1.00
Total input tokens:                      10
Request throughput (req/s):              2.00
==================================================
";

#[test]
fn an_unknown_line_is_reported_and_the_next_block_still_parses() {
    let text = format!("# A\n{}", GOOD.replace("Total input", "Accuracy (%):  3\nTotal input")) + "# B\n" + GOOD;
    let entries = parse_reports(&text, ReportOrigin::Vllm);
    assert_eq!(entries.len(), 2);
    let e = entries[0].as_ref().unwrap_err();
    assert_eq!((e.line, e.block_line), (5, 2));
    assert_eq!(e.headings, ["# A"]);
    assert_eq!(e.problem, BlockProblem::UnknownLine("Accuracy (%):  3".into()));
    let b = entries[1].as_ref().unwrap();
    assert_eq!(b.headings, ["# B"]);
    assert_eq!((e.heading_lines.as_slice(), b.heading_lines.as_slice()), (&[1][..], &[9][..]));
    assert_eq!(b.summary.completed, 2);
}

#[test]
fn a_percentile_the_client_could_not_give_is_absent_not_an_error() {
    // As GPUStack's benchmark runner prints its blocks: P95 lines it could not compute say N/A.
    let ttft = "---------------Time to First Token----------------\nMean TTFT (ms): 5.0\nMedian TTFT (ms): 4.0\n";
    let latency = "----------------------Latency---------------------\nMean Latency(s): 1.0\nMedian Latency(s): 1.0\n";
    let plain = GOOD.replace(
        "Request throughput (req/s):              2.00\n",
        &format!("Request throughput (req/s): 2.00\n{latency}{ttft}"),
    );
    let with_na = plain
        .replace("Median TTFT (ms): 4.0\n", "Median TTFT (ms): 4.0\nP95 TTFT (ms): N/A\nP99 TTFT (ms): 9.0\n")
        .replace("Median Latency(s): 1.0\n", "Median Latency(s): 1.0\nP95 Latency(s): N/A\n");
    let a = parse_reports(&plain, ReportOrigin::Vllm).remove(0).unwrap();
    let b = parse_reports(&with_na, ReportOrigin::Vllm).remove(0).unwrap();
    let ttft_of = |p: &ParsedBlock| p.summary.metric(Metric::Ttft).unwrap().clone();
    assert_eq!((ttft_of(&a).mean_ms, ttft_of(&b).mean_ms), (5.0, 5.0));
    assert_eq!(ttft_of(&b).percentiles, [(99.0, 9.0)], "the N/A percentile is absent, the next one read");
    assert_eq!(a.values.len() + 1, b.values.len(), "only the P99 line adds a value");
    // Only a percentile may be absent: a mean, or a line of the top, still needs a number.
    let e = err(&plain.replace("Mean TTFT (ms): 5.0", "Mean TTFT (ms): N/A"));
    assert!(matches!(e.problem, BlockProblem::NotANumber { .. }), "{e}");
    let e = err(&plain.replace("Benchmark duration (s):                  1.00", "Benchmark duration (s): N/A"));
    assert!(matches!(e.problem, BlockProblem::NotANumber { .. }), "{e}");
    let e = err(&with_na.replace("P95 TTFT (ms): N/A", "P95 Bogus (ms): N/A"));
    assert!(matches!(e.problem, BlockProblem::NotANumber { .. }), "{e}");
}

#[test]
fn bad_values_are_reported_at_their_line() {
    let e = err(&GOOD.replace("1.00\n", "1.O0\n"));
    assert_eq!(e.line, 3);
    assert!(matches!(e.problem, BlockProblem::NotANumber { .. }));
    assert!(e.to_string().starts_with("line 3: the value \"1.O0\""));
    let e = err(&GOOD.replace("requests:                     2", "requests: 2.5"));
    assert!(matches!(e.problem, BlockProblem::NotAWholeNumber { .. }));
    let e = err(&GOOD.replace("1.00\n", "nan\n"));
    assert!(matches!(e.problem, BlockProblem::NotANumber { .. }));
}

#[test]
fn a_block_without_footer_ends_at_its_first_foreign_line() {
    let unclosed = GOOD.replace("==================================================\n", "");
    let text = format!("{unclosed}\nResults next\n{GOOD}");
    let entries = parse_reports(&text, ReportOrigin::Vllm);
    assert_eq!(entries.len(), 2);
    let e = entries[0].as_ref().unwrap_err();
    assert_eq!((e.line, &e.problem), (1, &BlockProblem::Unclosed));
    assert_eq!(entries[1].as_ref().unwrap().headings, ["Results next"]);
    // At the end of the text.
    assert_eq!(err(&unclosed).problem, BlockProblem::Unclosed);
}

#[test]
fn missing_lines_and_incomplete_sections_are_errors() {
    let e = err(&GOOD.replace("Total input tokens:                      10\n", ""));
    assert_eq!(e.problem, BlockProblem::Missing("Total input tokens:"));
    let text = GOOD.replace(
        "==================================================\n",
        "---------------Time to First Token----------------\nP99 TTFT (ms): 3.0\n\
         ==================================================\n",
    );
    let e = err(&text);
    assert_eq!(e.line, 6);
    assert!(matches!(e.problem, BlockProblem::IncompleteSection { .. }));
    let e = err(&GOOD.replace("Total input", "Successful requests: 3\nTotal input"));
    assert_eq!(e.problem, BlockProblem::Duplicate("Successful requests:".into()));
    let e = err(&GOOD.replace("Total input", "-----Nonsense-----\nTotal input"));
    assert_eq!(e.line, 4);
}

#[test]
fn crlf_and_other_sections_are_read() {
    let text = GOOD
        .replace(
            "==================================================\n",
            "---------------Speculative Decoding---------------\nAcceptance rate (%): 71.50\n\
             Drafts: 10\nPer-position acceptance (%):\n  Position 0:  80.00\n\
             ==================================================\n",
        )
        .replace('\n', "\r\n");
    let b = blocks(&text).remove(0);
    assert_eq!(b.values.last().unwrap(), &("Position 0".to_string(), 80.0));
    assert_eq!(labels::OTHER_SECTIONS[SPECULATIVE].0, "Speculative Decoding");
}

#[test]
fn a_runner_s_latency_section_is_kept_as_raw_values() {
    // GPUStack's benchmark runner prints end-to-end latencies in seconds before the metrics.
    let text = GOOD.replace(
        "Total input",
        "----------------------Latency---------------------\nMean Latency(s):                          19.96\n\
         P95 Latency(s):                           32.86\nTotal input",
    );
    let e = err(&text);
    assert!(matches!(e.problem, BlockProblem::UnknownLine(_)), "a top line after the section is not its: {e:?}");
    let at_end = GOOD.replace(
        "==================================================\n",
        "----------------------Latency---------------------\nMean Latency(s):                          19.96\n\
         ==================================================\n",
    );
    let b = blocks(&at_end).remove(0);
    assert!(b.values.contains(&(labels::RUNNER_MEAN_LATENCY.to_string(), 19.96)));
    let unknown = at_end.replace("Mean Latency(s)", "Mean Delay(s)");
    assert!(matches!(err(&unknown).problem, BlockProblem::UnknownLine(_)));
}

fn two_decimals(x: f64) -> f64 {
    format!("{x:.2}").parse().unwrap()
}

fn arb_summary() -> impl Strategy<Value = Summary> {
    let value = || 0f64..1e6;
    let counts = (
        0u64..1_000_000,
        prop::option::of(0u64..1000),
        prop::option::of(1u64..512),
        prop::option::of(prop_oneof![Just(f64::INFINITY), 0.01f64..1000.0]),
        0u64..100_000_000,
        prop::option::of(0u64..100_000_000),
        prop::option::of(0u64..10_000),
    );
    let rates = (
        value(),
        value(),
        prop::option::of(value()),
        prop::option::of(value()),
        prop::option::of(value()),
        prop::option::of(value()),
    );
    let ps = prop::sample::subsequence(vec![0.5, 25.0, 50.0, 90.0, 99.0, 99.9], 0..=6);
    let section = (value(), value(), prop::collection::vec(value(), 6), ps);
    let sections = prop::collection::vec(prop::option::of(section), 6);
    let probes = prop::option::of((0u64..10_000, 0u64..100, value(), value(), value()));
    // A text report prints a pooling run's input rate, not its count of sequences.
    let pooling = prop::option::of(value())
        .prop_map(|x| x.map(|x| PoolingFigures { total_input_sequences: None, input_sequence_throughput: x }));
    (counts, rates, sections, probes, pooling).prop_map(|(c, r, sections, probes, pooling)| {
        let metrics = Metric::ALL
            .into_iter()
            .zip(sections)
            .filter_map(|(metric, s)| {
                let (mean_ms, median_ms, values, ps) = s?;
                Some(MetricStats {
                    metric,
                    mean_ms,
                    median_ms,
                    std_ms: Some(1.0),
                    percentiles: ps.into_iter().zip(values).collect(),
                })
            })
            .collect();
        Summary {
            completed: c.0,
            failed: c.1,
            max_concurrency: c.2,
            request_rate: c.3,
            duration_s: r.0,
            total_input_tokens: c.4,
            total_output_tokens: c.5,
            request_throughput: r.1,
            request_goodput: r.2,
            output_throughput: r.3,
            total_token_throughput: r.4,
            pooling,
            peak_output_throughput: r.5,
            peak_concurrent_requests: c.6,
            vllm_max_output_tokens_per_s: None,
            vllm_max_concurrent_requests: None,
            metrics,
            failures_by_kind: BTreeMap::new(),
            failure_messages: Vec::new(),
            dispatch_lag: None,
            health: None,
            steady_state: None,
            slices: Vec::new(),
            server: None,
            http: None,
            spec_decode: None,
            probes: probes.map(|(completed, failed, median_e2el_ms, p99_e2el_ms, max_e2el_ms)| ProbeStats {
                completed,
                failed,
                median_e2el_ms,
                p99_e2el_ms,
                max_e2el_ms,
            }),
            gpus: None,
            gpu_hour_cost: None,
        }
    })
}

/// What a summary looks like after printing: two decimals, no std, no infinite rate.
fn as_printed(s: &Summary) -> Summary {
    let round = |x: Option<f64>| x.map(two_decimals);
    Summary {
        request_rate: s.request_rate.filter(|r| r.is_finite()).map(two_decimals),
        duration_s: two_decimals(s.duration_s),
        request_throughput: two_decimals(s.request_throughput),
        request_goodput: round(s.request_goodput),
        output_throughput: round(s.output_throughput),
        total_token_throughput: round(s.total_token_throughput),
        pooling: s
            .pooling
            .map(|p| PoolingFigures { input_sequence_throughput: two_decimals(p.input_sequence_throughput), ..p }),
        peak_output_throughput: round(s.peak_output_throughput),
        metrics: s
            .metrics
            .iter()
            .map(|m| MetricStats {
                metric: m.metric,
                mean_ms: two_decimals(m.mean_ms),
                median_ms: two_decimals(m.median_ms),
                std_ms: None,
                percentiles: m.percentiles.iter().map(|&(p, v)| (p, two_decimals(v))).collect(),
            })
            .collect(),
        probes: s.probes.map(|p| ProbeStats {
            median_e2el_ms: two_decimals(p.median_e2el_ms),
            p99_e2el_ms: two_decimals(p.p99_e2el_ms),
            max_e2el_ms: two_decimals(p.max_e2el_ms),
            ..p
        }),
        ..s.clone()
    }
}

proptest! {
    #[test]
    fn render_then_parse_gives_the_summary_to_two_decimals(s in arb_summary()) {
        let text = format!("heading\n{}", render_result_block(&s));
        let entries = parse_reports(&text, ReportOrigin::Servebench);
        prop_assert_eq!(entries.len(), 1);
        let b = entries[0].as_ref().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&b.headings, &["heading".to_string()]);
        prop_assert_eq!(&b.summary, &as_printed(&s));
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC*") {
        let _ = parse_reports(&text, ReportOrigin::Vllm);
    }

    #[test]
    fn mangled_blocks_never_panic_and_keep_line_numbers_in_range(
        cut in 0usize..2000, junk in "[ -~]{0,12}"
    ) {
        let mut text = R004.to_string();
        let at = text.char_indices().map(|(i, _)| i).nth(cut % text.len()).unwrap_or(0);
        text.insert_str(at, &junk);
        let lines = text.lines().count();
        for e in parse_reports(&text, ReportOrigin::Vllm) {
            let line = match e { Ok(b) => b.line, Err(e) => e.line };
            prop_assert!(line >= 1 && line <= lines);
        }
    }
}

#[test]
fn a_report_quoted_in_a_reply_is_read_as_pasted() {
    let plain = blocks(R000);
    let quoted: String = R000.lines().map(|l| format!("> {l}\n")).collect();
    let nested: String = R000.lines().map(|l| format!(">> {l}\n")).collect();
    for text in [quoted, nested] {
        let got = blocks(&text);
        assert_eq!(got.len(), plain.len());
        for (a, b) in got.iter().zip(&plain) {
            assert_eq!((&a.summary, &a.headings), (&b.summary, &b.headings));
        }
    }
}
