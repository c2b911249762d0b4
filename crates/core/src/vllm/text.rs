//! vLLM's console output, byte for byte: the result block, the failure listing printed before
//! it, and the traffic lines printed before the run; and servebench's steady-state block in
//! the same layout.
//!
//! Lines are `"{:<40} {:<10}"` (integers) or `"{:<40} {:<10.2f}"` (floats), so most end with
//! trailing spaces; headers are centred in 50 fill characters. Which lines appear follows the
//! [`Summary`]: a value that is `None` is a line the report does not have, so a summary read
//! from any vLLM version's report renders back to that report.
//!
//! One deliberate difference from vLLM: the "Peak output token throughput" and "Peak
//! concurrent requests" lines show the exact peaks ([`Summary::peak_output_throughput`],
//! [`Summary::peak_concurrent_requests`]) where vLLM shows its one-second bucket counts.
//! vLLM's values stay in the result JSON under its own keys. A summary that only has vLLM's
//! values (one imported from a vLLM report) prints those, as vLLM printed them.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::config::{Metric, Traffic};
use crate::metrics::{MAX_FAILURE_MESSAGES, SteadyState, Summary};
use crate::pyjson::{py_float_repr, py_whole_or_float};
use crate::vllm::labels::{self, p_word, section_title, short_name};

/// Spelling differences between vLLM versions that a [`Summary`] cannot express.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextStyle {
    /// Print `Total Token throughput (tok/s):` as vLLM 0.12 and earlier did, instead of
    /// `Total token throughput (tok/s):`.
    pub legacy_total_token_label: bool,
}

/// The result block as vLLM 0.33 prints it, from the `=====` header to the `=====` footer,
/// each line ending in `\n`.
pub fn render_result_block(summary: &Summary) -> String {
    render_result_block_styled(summary, TextStyle::default())
}

/// The result block with version-specific spellings.
pub fn render_result_block_styled(summary: &Summary, style: TextStyle) -> String {
    render_block(labels::HEADER, summary, style)
}

/// The steady state of a run as a second block in vLLM's layout, under its own header (so
/// no reader of vLLM's reports takes it for a run of its own), with the window it covers.
pub fn render_steady_state(steady: &SteadyState) -> String {
    let title = format!(" Steady state ({}) ", steady.basis);
    let mut out = render_block(&format!("{title:=^50}"), &steady.summary, TextStyle::default());
    let _ = writeln!(
        out,
        "Window: t = {:.2} s to {:.2} s; latencies of the requests sent and ended in it, throughputs of what ended in it.",
        steady.from_s, steady.to_s
    );
    out
}

fn render_block(header: &str, summary: &Summary, style: TextStyle) -> String {
    let s = summary;
    let mut out = String::with_capacity(2048);
    out.push_str(header);
    out.push('\n');
    int_line(&mut out, labels::SUCCESSFUL, s.completed);
    if let Some(n) = s.failed {
        int_line(&mut out, labels::FAILED, n);
    }
    if let Some(n) = s.max_concurrency {
        int_line(&mut out, labels::MAX_CONCURRENCY, n);
    }
    if let Some(rate) = s.request_rate.filter(|r| r.is_finite()) {
        float_line(&mut out, labels::RATE_CONFIGURED, rate);
    }
    float_line(&mut out, labels::DURATION, s.duration_s);
    int_line(&mut out, labels::TOTAL_INPUT, s.total_input_tokens);
    if let Some(n) = s.total_output_tokens {
        int_line(&mut out, labels::TOTAL_GENERATED, n);
    }
    float_line(&mut out, labels::REQUEST_THROUGHPUT, s.request_throughput);
    if let Some(p) = &s.pooling {
        float_line(&mut out, labels::INPUT_THROUGHPUT, p.input_sequence_throughput);
    }
    if let Some(v) = s.request_goodput {
        float_line(&mut out, labels::GOODPUT, v);
    }
    if let Some(v) = s.output_throughput {
        float_line(&mut out, labels::OUTPUT_THROUGHPUT, v);
    }
    if let Some(v) = s.peak_output_throughput.or(s.vllm_max_output_tokens_per_s) {
        float_line(&mut out, labels::PEAK_OUTPUT, v);
    }
    if let Some(n) = s.peak_concurrent_requests.or(s.vllm_max_concurrent_requests) {
        float_line(&mut out, labels::PEAK_CONCURRENT, n as f64);
    }
    if let Some(v) = s.total_token_throughput {
        let label = if style.legacy_total_token_label {
            labels::TOTAL_TOKEN_THROUGHPUT_LEGACY
        } else {
            labels::TOTAL_TOKEN_THROUGHPUT
        };
        float_line(&mut out, label, v);
    }
    if let Some(p) = &s.probes {
        let _ = writeln!(out, "{:-^50}", labels::PROBE_TITLE);
        let [completed, failed, median, p99, max] = labels::PROBE_LABELS;
        int_line(&mut out, completed, p.completed);
        int_line(&mut out, failed, p.failed);
        float_line(&mut out, median, p.median_e2el_ms);
        float_line(&mut out, p99, p.p99_e2el_ms);
        float_line(&mut out, max, p.max_e2el_ms);
    }
    for metric in Metric::ALL {
        let Some(m) = s.metric(metric) else { continue };
        let name = short_name(metric);
        let _ = writeln!(out, "{:-^50}", section_title(metric));
        float_line(&mut out, &format!("Mean {name} (ms):"), m.mean_ms);
        float_line(&mut out, &format!("Median {name} (ms):"), m.median_ms);
        for &(p, v) in &m.percentiles {
            float_line(&mut out, &format!("P{} {name} (ms):", p_word(p)), v);
        }
    }
    if let Some(spec) = &s.spec_decode {
        render_spec_decode(&mut out, spec);
    }
    out.push_str(labels::FOOTER);
    out.push('\n');
    out
}

/// The failure listing vLLM prints before the block when requests failed:
/// `Failed requests during benchmark run detected (capping to 10):`, then `Error {i}: {error}`
/// for the first ten. Empty when the summary holds no failure messages.
pub fn render_failures(summary: &Summary) -> String {
    if summary.failure_messages.is_empty() {
        return String::new();
    }
    let mut out = String::from("Failed requests during benchmark run detected (capping to 10):\n");
    for (i, message) in summary.failure_messages.iter().take(MAX_FAILURE_MESSAGES).enumerate() {
        let _ = writeln!(out, "Error {i}: {message}");
    }
    out
}

/// The traffic lines vLLM prints before the run: the request rate (a Python float, `inf`,
/// `4.0`) or the ramp-up strategy, the burstiness with its distribution, the concurrency
/// cap (`None` when absent) and, with probes, their rate.
pub fn render_traffic(traffic: &Traffic) -> String {
    let mut out = String::new();
    match &traffic.ramp_up {
        Some(ramp) => {
            let _ = writeln!(out, "Traffic ramp-up strategy: {}.", ramp.strategy.name());
            let _ = writeln!(
                out,
                "Will increase RPS from {} to {} RPS over the duration of the benchmark.",
                py_whole_or_float(ramp.start_rps),
                py_whole_or_float(ramp.end_rps)
            );
        }
        None => {
            let _ = writeln!(out, "Traffic request rate: {}", py_float_repr(traffic.request_rate));
        }
    }
    let distribution = if traffic.burstiness == 1.0 { "Poisson process" } else { "Gamma distribution" };
    let _ = writeln!(out, "Burstiness factor: {} ({distribution})", py_float_repr(traffic.burstiness));
    let cap = traffic.max_concurrency.map_or_else(|| "None".to_string(), |c| c.to_string());
    let _ = writeln!(out, "Maximum request concurrency: {cap}");
    if let Some(rate) = traffic.probe_request_rate {
        let _ = writeln!(out, "Probe request rate: {} req/s", py_float_repr(rate));
    }
    out
}

/// vLLM's speculative-decoding section: acceptance, counts, and the rate of each position.
fn render_spec_decode(out: &mut String, spec: &crate::telemetry::SpecDecodeCounts) {
    let _ = writeln!(out, "{:-^50}", "Speculative Decoding");
    float_line(out, "Acceptance rate (%):", spec.acceptance_rate_pct());
    float_line(out, "Acceptance length:", spec.acceptance_length());
    int_line(out, "Drafts:", spec.num_drafts);
    int_line(out, "Draft tokens:", spec.draft_tokens);
    int_line(out, "Accepted tokens:", spec.accepted_tokens);
    let rates = spec.per_position_rates();
    if !rates.is_empty() {
        out.push_str("Per-position acceptance (%):\n");
        for (i, r) in rates.iter().enumerate() {
            float_line(out, &format!("  Position {i}:"), r * 100.0);
        }
    }
}

fn int_line(out: &mut String, label: &str, value: u64) {
    let _ = writeln!(out, "{label:<40} {value:<10}");
}

fn float_line(out: &mut String, label: &str, value: f64) {
    let _ = writeln!(out, "{label:<40} {value:<10.2}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{RampStrategy, RampUp};
    use crate::metrics::MetricStats;

    fn stats(metric: Metric, mean: f64, median: f64, ps: &[(f64, f64)]) -> MetricStats {
        MetricStats { metric, mean_ms: mean, median_ms: median, std_ms: None, percentiles: ps.to_vec() }
    }

    fn bare(completed: u64, duration_s: f64, input: u64, throughput: f64) -> Summary {
        Summary {
            completed,
            duration_s,
            total_input_tokens: input,
            request_throughput: throughput,
            ..Summary::default()
        }
    }

    /// Reference 003: an older vLLM (no "Failed requests", capitalised "Token"), five
    /// percentiles and the E2EL section. The file keeps its trailing spaces.
    #[test]
    fn renders_reference_003_byte_for_byte() {
        let ps = |v: [f64; 5]| [50.0, 75.0, 90.0, 95.0, 99.0].into_iter().zip(v).collect::<Vec<_>>();
        let s = Summary {
            total_output_tokens: Some(2_004_890),
            output_throughput: Some(1900.04),
            total_token_throughput: Some(2560.58),
            metrics: vec![
                stats(Metric::Ttft, 463.85, 124.74, &ps([124.74, 209.08, 932.55, 3035.43, 5874.28])),
                stats(Metric::Tpot, 66.78, 66.80, &ps([66.80, 68.97, 70.84, 72.10, 88.89])),
                stats(Metric::Itl, 65.71, 48.17, &ps([48.17, 56.68, 74.48, 164.84, 321.39])),
                stats(Metric::E2el, 44313.70, 61938.89, &ps([61938.89, 68664.12, 70962.80, 72128.81, 73790.91])),
            ],
            ..bare(3000, 1055.18, 696_991, 2.84)
        };
        let style = TextStyle { legacy_total_token_label: true };
        assert_eq!(
            render_result_block_styled(&s, style),
            include_str!("../../../../testdata/vllm-reports/003-sharegpt-percentiles.txt")
        );
    }

    /// Reference 004: two blocks with free text around them; peaks as vLLM printed them.
    #[test]
    fn renders_reference_004_byte_for_byte() {
        let p99 = |v: f64| vec![(99.0, v)];
        let prefill = Summary {
            failed: Some(0),
            total_output_tokens: Some(512),
            output_throughput: Some(10.06),
            vllm_max_output_tokens_per_s: Some(11.0),
            vllm_max_concurrent_requests: Some(512),
            total_token_throughput: Some(82451.94),
            metrics: vec![
                stats(Metric::Ttft, 25793.19, 25786.62, &p99(50212.61)),
                stats(Metric::Tpot, 0.0, 0.0, &p99(0.0)),
                stats(Metric::Itl, 0.0, 0.0, &p99(0.0)),
            ],
            ..bare(512, 50.87, 4_193_792, 10.06)
        };
        let decode = Summary {
            failed: Some(0),
            total_output_tokens: Some(65536),
            output_throughput: Some(2131.64),
            // servebench's own summaries print the exact values; here they equal vLLM's.
            peak_output_throughput: Some(2224.0),
            peak_concurrent_requests: Some(512),
            vllm_max_output_tokens_per_s: Some(1.0),
            vllm_max_concurrent_requests: Some(1),
            total_token_throughput: Some(2148.29),
            metrics: vec![
                stats(Metric::Ttft, 15266.31, 14933.56, &p99(29780.21)),
                stats(Metric::Tpot, 7.28, 7.29, &p99(7.45)),
                stats(Metric::Itl, 7.29, 7.26, &p99(9.85)),
            ],
            ..bare(512, 30.74, 512, 16.65)
        };
        let file =
            format!("# Prefill\n\n{}\n\n# Decode\n\n{}", render_result_block(&prefill), render_result_block(&decode));
        assert_eq!(
            file.strip_suffix('\n').unwrap(),
            include_str!("../../../../testdata/vllm-reports/004-prefill-decode.txt")
        );
    }

    fn full() -> Summary {
        let ps = vec![(50.0, 1.0), (90.0, 2.0), (99.0, 3.5), (99.9, 4.125)];
        Summary {
            failed: Some(2),
            max_concurrency: Some(16),
            request_rate: Some(8.0),
            total_output_tokens: Some(123_456),
            request_goodput: Some(3.456),
            output_throughput: Some(1234.5678),
            total_token_throughput: Some(5678.9),
            peak_output_throughput: Some(1500.25),
            peak_concurrent_requests: Some(16),
            vllm_max_output_tokens_per_s: Some(1400.0),
            vllm_max_concurrent_requests: Some(31),
            metrics: Metric::ALL
                .into_iter()
                .enumerate()
                .map(|(i, m)| stats(m, 10.0 * i as f64 + 0.005, 9.999, &ps))
                .collect(),
            failure_messages: vec!["Bad Request".into(), "Service Unavailable".into()],
            ..bare(998, 123.456, 1_000_000, 8.08)
        }
    }

    #[test]
    fn snapshot_block_with_goodput_rate_and_all_sections() {
        insta::assert_snapshot!(render_result_block(&full()));
    }

    #[test]
    fn snapshot_failures_and_traffic_lines() {
        let mut traffic =
            Traffic { request_rate: 4.0, burstiness: 0.5, max_concurrency: Some(4), ..Traffic::default() };
        let mut out = render_traffic(&traffic);
        traffic.ramp_up = Some(RampUp { strategy: RampStrategy::Exponential, start_rps: 1.0, end_rps: 20.0 });
        traffic.request_rate = f64::INFINITY;
        out.push_str(&render_traffic(&traffic));
        out.push_str(&render_failures(&full()));
        insta::assert_snapshot!(out);
    }

    /// What a ramp-up run with a goodput SLO and a concurrency cap prints, from its records.
    #[test]
    fn snapshot_console_output_of_a_computed_ramp_up_run() {
        use crate::config::Slo;
        use crate::record::{Failure, FailureKind, RequestRecord, Usage, test_run};
        let records: Vec<RequestRecord> = (0..6u32)
            .map(|i| RequestRecord {
                index: i,
                planned_ns: u64::from(i) * 400_000_000,
                arrival_ns: u64::from(i) * 400_000_000 + 1_000,
                start_ns: u64::from(i) * 400_000_000 + 1_000 + u64::from(i % 3) * 30_000_000,
                chunks_us: (0..8).map(|k| 90_000 + 10_000 * i + 25_000 * k).collect(),
                usage: Usage { prompt_tokens: Some(64), completion_tokens: Some(8 + i % 2) },
                status: 200,
                failure: (i == 5).then(|| Failure { kind: FailureKind::Timeout, message: "timed out".into() }),
                ..RequestRecord::default()
            })
            .collect();
        let mut run = test_run(records, 2.5);
        let config = &mut run.config;
        config.traffic.ramp_up = Some(RampUp { strategy: RampStrategy::Linear, start_rps: 1.0, end_rps: 5.0 });
        config.traffic.max_concurrency = Some(2);
        config.output.percentile_metrics = Metric::ALL.to_vec();
        config.output.metric_percentiles = vec![50.0, 99.0, 99.9];
        config.output.goodput = vec![Slo { metric: Metric::Ttft, max_ms: 120.0 }];
        let summary = Summary::compute(&run);
        let out = render_traffic(&run.config.traffic) + &render_failures(&summary) + &render_result_block(&summary);
        insta::assert_snapshot!(out);
    }

    #[test]
    fn default_traffic_lines_match_vllm() {
        assert_eq!(
            render_traffic(&Traffic::default()),
            "Traffic request rate: inf\nBurstiness factor: 1.0 (Poisson process)\n\
             Maximum request concurrency: None\n"
        );
    }

    #[test]
    fn exact_peaks_are_printed_and_vllm_peaks_are_the_fallback() {
        let s = full();
        let block = render_result_block(&s);
        assert!(block.contains("Peak concurrent requests:                16.00     \n"));
        assert!(!block.contains("31.00"));
        let imported = Summary { peak_concurrent_requests: None, ..s };
        assert!(render_result_block(&imported).contains("Peak concurrent requests:                31.00"));
    }

    #[test]
    fn infinite_rate_and_missing_lines_are_left_out() {
        let s = Summary { request_rate: Some(f64::INFINITY), ..bare(1, 1.0, 2, 1.0) };
        assert_eq!(
            render_result_block(&s),
            format!(
                "{}\n{:<40} {:<10}\n{:<40} {:<10}\n{:<40} {:<10}\n{:<40} {:<10}\n{}\n",
                labels::HEADER,
                "Successful requests:",
                1,
                "Benchmark duration (s):",
                "1.00",
                "Total input tokens:",
                2,
                "Request throughput (req/s):",
                "1.00",
                labels::FOOTER
            )
        );
        assert_eq!(render_failures(&s), "");
    }
}
