//! The words of vLLM's result block: line labels, section titles and metric names, shared by
//! the renderer and the parser so the two cannot drift apart.

use crate::config::Metric;
use crate::pyjson::py_float_repr;

/// The block's first line: the title centred in 50 `=`.
pub const HEADER: &str = "============ Serving Benchmark Result ============";
/// The block's last line.
pub const FOOTER: &str = "==================================================";

pub const SUCCESSFUL: &str = "Successful requests:";
pub const FAILED: &str = "Failed requests:";
pub const MAX_CONCURRENCY: &str = "Maximum request concurrency:";
pub const RATE_CONFIGURED: &str = "Request rate configured (RPS):";
pub const DURATION: &str = "Benchmark duration (s):";
pub const TOTAL_INPUT: &str = "Total input tokens:";
pub const TOTAL_GENERATED: &str = "Total generated tokens:";
pub const REQUEST_THROUGHPUT: &str = "Request throughput (req/s):";
pub const INPUT_THROUGHPUT: &str = "Input throughput (inputs/s):";
pub const GOODPUT: &str = "Request goodput (req/s):";
pub const OUTPUT_THROUGHPUT: &str = "Output token throughput (tok/s):";
pub const PEAK_OUTPUT: &str = "Peak output token throughput (tok/s):";
pub const PEAK_CONCURRENT: &str = "Peak concurrent requests:";
pub const RTFX: &str = "RTFx (Inverse Real-Time Factor):";
pub const TOTAL_TOKEN_THROUGHPUT: &str = "Total token throughput (tok/s):";
/// The spelling of vLLM 0.12 and earlier.
pub const TOTAL_TOKEN_THROUGHPUT_LEGACY: &str = "Total Token throughput (tok/s):";

/// The title of vLLM's probe section (`--probe-request-rate`).
pub const PROBE_TITLE: &str = "Probe Requests";
/// Its lines, in vLLM's order: two counts, then three latencies.
pub const PROBE_LABELS: [&str; 5] = [
    "Probe requests completed:",
    "Probe requests failed:",
    "Median probe E2EL (ms):",
    "P99 probe E2EL (ms):",
    "Max probe E2EL (ms):",
];

/// Sections vLLM may print that carry no [`Metric`]; their lines are kept as raw values (and
/// the probe and speculative-decoding sections' also read back into the summary).
/// The last is not vLLM's: GPUStack's benchmark runner (guidellm underneath) prints vLLM's block
/// with a `Latency` section of end-to-end latencies in seconds, and TPOT and ITL figures that
/// are not vLLM's ([`RUNNER_MEAN_LATENCY`]).
pub const OTHER_SECTIONS: [(&str, &[&str]); 4] = [
    (PROBE_TITLE, &PROBE_LABELS),
    (
        "Speculative Decoding",
        &["Acceptance rate (%):", "Acceptance length:", "Drafts:", "Draft tokens:", "Accepted tokens:"],
    ),
    (
        "Diffusion Decoding",
        &[
            "Committed throughput (tok/s):",
            "Denoising steps per canvas:",
            "Committed per denoising step:",
            "Committed tokens:",
            "Denoising steps:",
            "Canvas positions evaluated:",
        ],
    ),
    ("Latency", &["Mean Latency(s):", "Median Latency(s):", "P95 Latency(s):", "P99 Latency(s):"]),
];

/// The raw value of the `Latency` section's mean (seconds): a block with it comes from GPUStack's
/// benchmark runner, whose `Mean TPOT` is not vLLM's (the first token's wait over the output
/// tokens) and whose output throughput is not the generated tokens over the duration.
pub const RUNNER_MEAN_LATENCY: &str = "Mean Latency(s)";

/// The raw value of the same section's median (seconds).
pub const RUNNER_MEDIAN_LATENCY: &str = "Median Latency(s)";

/// The label a block of GPUStack's runner is stored and predicted with.
pub const RUNNER_CLIENT: (&str, &str) = ("client", "gpustack-runner");

/// The mean latency (seconds) among a block's raw values where the block is GPUStack's
/// runner's ([`RUNNER_MEAN_LATENCY`]); none for vLLM's own.
pub fn runner_mean_latency(values: &[(String, f64)]) -> Option<f64> {
    values.iter().find(|(k, _)| k == RUNNER_MEAN_LATENCY).map(|(_, v)| *v)
}

/// The speculative-decoding section's value-less line before its `  Position {i}:` lines.
pub const PER_POSITION: &str = "Per-position acceptance (%):";

/// The title of a metric's section (centred in 50 `-`).
pub fn section_title(metric: Metric) -> &'static str {
    match metric {
        Metric::Ttft => "Time to First Token",
        Metric::Tpot => "Time per Output Token (excl. 1st token)",
        Metric::Itl => "Inter-token Latency",
        Metric::E2el => "End-to-end Latency",
        Metric::ClientQueueTime => "Client-side Queueing",
        Metric::E2elIncludingClientQueue => "Queue-inclusive End-to-end Latency",
    }
}

/// The metric's name inside its lines (`Mean {name} (ms):`).
pub fn short_name(metric: Metric) -> &'static str {
    match metric {
        Metric::Ttft => "TTFT",
        Metric::Tpot => "TPOT",
        Metric::Itl => "ITL",
        Metric::E2el => "E2EL",
        Metric::ClientQueueTime => "Client Queue Time",
        Metric::E2elIncludingClientQueue => "E2EL incl. Client Queue",
    }
}

/// How vLLM names a percentile in labels and JSON keys: `str(int(p))` for whole values
/// (`99`), else `str(p)` (`99.9`, `0.5`).
pub fn p_word(p: f64) -> String {
    if p.is_finite() && p.fract() == 0.0 {
        // `+ 0.0` turns -0.0 into 0.0, as `int()` does.
        format!("{:.0}", p + 0.0)
    } else {
        py_float_repr(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_centred_with_the_odd_fill_on_the_right() {
        assert_eq!(format!("{:=^50}", " Serving Benchmark Result "), HEADER);
        assert_eq!(FOOTER, "=".repeat(50));
        assert_eq!(
            format!("{:-^50}", section_title(Metric::Ttft)),
            "---------------Time to First Token----------------"
        );
    }

    #[test]
    fn percentile_words_follow_python() {
        assert_eq!(p_word(99.0), "99");
        assert_eq!(p_word(99.9), "99.9");
        assert_eq!(p_word(0.5), "0.5");
        assert_eq!(p_word(0.0), "0");
        assert_eq!(p_word(1e-5), "1e-05");
    }
}
