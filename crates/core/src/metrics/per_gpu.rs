//! The run per GPU and per user: what each GPU served against what each stream saw, the trade
//! InferenceX charts (throughput per GPU against interactivity), and with the GPUs' price what
//! a million output tokens cost, printed after vLLM's block; and the formulas behind them.

use std::fmt::Write as _;

use super::Summary;

/// `tokens_per_s` shared over `gpus` GPUs, when both are known.
pub fn per_gpu(tokens_per_s: Option<f64>, gpus: Option<u32>) -> Option<f64> {
    Some(tokens_per_s? / f64::from(gpus?))
}

/// Whether `cost` can be a GPU's price an hour: a finite number above 0.
pub fn is_gpu_hour_cost(cost: f64) -> bool {
    cost.is_finite() && cost > 0.0
}

/// What a million tokens cost from `gpus` GPUs at `gpu_hour_cost` each an hour, serving
/// `tokens_per_s`: the hour's cost of all of them over the millions of tokens they serve in it.
/// `None` when one is not known, or nothing was served.
pub fn cost_per_million(tokens_per_s: Option<f64>, gpus: Option<u32>, gpu_hour_cost: Option<f64>) -> Option<f64> {
    let per_hour = gpu_hour_cost? * f64::from(gpus?);
    let millions_per_hour = tokens_per_s.filter(|&t| t > 0.0)? * 3600.0 / 1e6;
    Some(per_hour / millions_per_hour).filter(|c| c.is_finite())
}

/// The tokens per second a user sees at a time per output token of `tpot_ms`: 1000 / TPOT;
/// `None` at a TPOT of 0 (every request gave one token), which has no rate.
pub fn per_user(tpot_ms: f64) -> Option<f64> {
    Some(1000.0 / tpot_ms).filter(|rate| rate.is_finite())
}

/// Interactivity (InferenceX's `median_intvty`): [`per_user`] of the median TPOT of a run that
/// completed requests; `None` for one that completed none, or without a TPOT.
pub fn interactivity(completed: u64, median_tpot_ms: Option<f64>) -> Option<f64> {
    per_user(median_tpot_ms.filter(|_| completed > 0)?)
}

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
    if let (Some(cost), Some(price)) = (s.cost_per_million_output(), s.gpu_hour_cost) {
        let _ = write!(line, "; ${cost:.4} per million output tokens at ${price} per GPU-hour");
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
        // 2 GPUs at 2.5 an hour cost 5 an hour; 1901.04 tok/s is 6.8437 million tokens an hour.
        let priced = Summary { gpu_hour_cost: Some(2.5), ..run(Some(2), 8.0) };
        assert_eq!(
            render_per_gpu(&priced).unwrap(),
            "Per GPU (2 GPUs): 950.52 output tok/s/GPU, 1901.03 total tok/s/GPU; interactivity 125.00 tok/s/user \
             (1000 / median TPOT); $0.7306 per million output tokens at $2.5 per GPU-hour."
        );
        let none_done = Summary { completed: 0, ..run(Some(2), 8.0) };
        assert_eq!(none_done.interactivity(), None);
        assert_eq!(none_done.cost_per_million_output(), None, "no price, no cost");
    }

    proptest::proptest! {
        /// The cost of a million tokens is the GPUs' hour over the millions served in it: it
        /// grows with the price and the GPU count as they do, and falls as throughput grows.
        #[test]
        fn cost_is_the_hour_of_the_gpus_over_the_tokens_of_the_hour(
            price in 0.01f64..100.0, gpus in 1u32..64, tokens_per_s in 1.0f64..1e6, k in 1.5f64..10.0,
        ) {
            let cost = cost_per_million(Some(tokens_per_s), Some(gpus), Some(price)).unwrap();
            let hour = price * f64::from(gpus);
            proptest::prop_assert!((cost * tokens_per_s * 3600.0 / 1e6 - hour).abs() <= 1e-9 * hour);
            let dearer = cost_per_million(Some(tokens_per_s), Some(gpus), Some(price * k)).unwrap();
            proptest::prop_assert!((dearer / cost - k).abs() < 1e-9);
            let faster = cost_per_million(Some(tokens_per_s * k), Some(gpus), Some(price)).unwrap();
            proptest::prop_assert!(faster < cost);
            let more = cost_per_million(Some(tokens_per_s), Some(gpus + 1), Some(price)).unwrap();
            proptest::prop_assert!(more > cost);
        }
    }

    #[test]
    fn nothing_served_or_nothing_known_costs_nothing_known() {
        assert_eq!(cost_per_million(Some(0.0), Some(1), Some(2.0)), None);
        assert_eq!(cost_per_million(Some(10.0), None, Some(2.0)), None);
        assert_eq!(cost_per_million(Some(10.0), Some(1), None), None);
        assert!(is_gpu_hour_cost(2.49) && !is_gpu_hour_cost(0.0) && !is_gpu_hour_cost(f64::INFINITY));
        assert!(!is_gpu_hour_cost(f64::NAN) && !is_gpu_hour_cost(-1.0));
    }
}
