//! The run per GPU and per user: what each GPU served against what each stream saw, the trade
//! InferenceX charts (throughput per GPU against interactivity), printed after vLLM's block.

use std::fmt::Write as _;

use super::Summary;

/// `Per GPU (2 GPUs): 950.52 output tok/s/GPU, 1901.03 total tok/s/GPU; interactivity 123.15
/// tok/s/user (1000 / median TPOT).`; `None` when the run's GPU count or output is not known.
pub fn render_per_gpu(s: &Summary) -> Option<String> {
    let gpus = s.gpus?;
    let output = s.per_gpu(s.output_throughput)?;
    let mut line = format!("Per GPU ({gpus} GPU{}): {output:.2} output tok/s/GPU", if gpus == 1 { "" } else { "s" });
    if let Some(total) = s.per_gpu(s.total_token_throughput) {
        let _ = write!(line, ", {total:.2} total tok/s/GPU");
    }
    if let Some(rate) = s.interactivity() {
        let _ = write!(line, "; interactivity {rate:.2} tok/s/user (1000 / median TPOT)");
    }
    line.push('.');
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Metric;
    use crate::metrics::MetricStats;

    fn run(gpus: Option<u32>, median_tpot_ms: f64) -> Summary {
        Summary {
            completed: 10,
            output_throughput: Some(1901.04),
            total_token_throughput: Some(3802.06),
            metrics: vec![MetricStats {
                metric: Metric::Tpot,
                mean_ms: median_tpot_ms,
                median_ms: median_tpot_ms,
                std_ms: None,
                percentiles: Vec::new(),
            }],
            gpus,
            ..Summary::default()
        }
    }

    #[test]
    fn the_line_shares_the_throughputs_over_the_gpus_and_inverts_the_median_tpot() {
        assert_eq!(
            render_per_gpu(&run(Some(2), 8.0)).unwrap(),
            "Per GPU (2 GPUs): 950.52 output tok/s/GPU, 1901.03 total tok/s/GPU; interactivity 125.00 tok/s/user \
             (1000 / median TPOT)."
        );
        assert_eq!(
            render_per_gpu(&run(Some(1), 0.0)).unwrap(),
            "Per GPU (1 GPU): 1901.04 output tok/s/GPU, 3802.06 total tok/s/GPU.",
            "a TPOT of 0 has no rate"
        );
        assert_eq!(render_per_gpu(&run(None, 8.0)), None, "no GPU count, no line");
        let none_done = Summary { completed: 0, ..run(Some(2), 8.0) };
        assert_eq!(none_done.interactivity(), None);
    }
}
