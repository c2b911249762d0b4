//! A prediction's uncertainty band: each headline metric with the range its device's
//! calibration errors put around it, printed after vLLM's block and kept in the result JSON.

use serde::Serialize;
use servebench_core::config::Metric;
use servebench_core::metrics::Summary;
use servebench_sim::Uncertainty;

/// One metric: the prediction and the band around it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BandRow {
    pub metric: &'static str,
    pub predicted: f64,
    pub low: f64,
    pub high: f64,
}

/// The band of a predicted run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PredictionBand {
    /// The share of measurements expected inside the band.
    pub coverage: f64,
    /// Where the spread comes from.
    pub source: String,
    pub metrics: Vec<BandRow>,
}

impl PredictionBand {
    pub fn of(s: &Summary, u: &Uncertainty) -> PredictionBand {
        let mean = |m: Metric| s.metric(m).map(|x| x.mean_ms).filter(|v| v.is_finite() && *v > 0.0);
        // A pooling request is a prefill: its latency is a first token's, and takes TTFT's band.
        let pooled = |m: Metric| mean(m).filter(|_| s.pooling.is_some());
        let rows = [
            ("Mean TTFT (ms)", "ttft", mean(Metric::Ttft)),
            ("Mean E2EL (ms)", "ttft", pooled(Metric::E2el)),
            ("Mean TPOT (ms)", "tpot", mean(Metric::Tpot)),
            ("Output token throughput (tok/s)", "throughput", s.output_throughput.filter(|v| *v > 0.0)),
        ];
        let metrics = rows
            .into_iter()
            .filter_map(|(label, key, value)| {
                let v = value?;
                let (low, high) = u.band(key, v)?;
                Some(BandRow { metric: label, predicted: v, low, high })
            })
            .collect();
        PredictionBand { coverage: 0.8, source: u.source.clone(), metrics }
    }

    /// The printed section; nothing when no metric has a band.
    pub fn render(&self) -> String {
        if self.metrics.is_empty() {
            return String::new();
        }
        let mut out = format!(
            "Prediction band ({:.0} % of measurements expected inside; {}):\n",
            self.coverage * 100.0,
            self.source
        );
        for r in &self.metrics {
            out.push_str(&format!("  {:<34} {:>10.2}  [{:.2} .. {:.2}]\n", r.metric, r.predicted, r.low, r.high));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_band_brackets_each_prediction_and_prints_one_line_per_metric() {
        let u = Uncertainty {
            source: "test".into(),
            ttft: [-0.2, 0.25],
            tpot: [-0.05, 0.05],
            throughput: [-0.1, 0.1],
            tp: Vec::new(),
            models: Vec::new(),
            elsewhere: None,
        };
        let (lo, hi) = u.band("ttft", 100.0).unwrap();
        assert_eq!((lo, hi), (80.0, 125.0));
        let band = PredictionBand {
            coverage: 0.8,
            source: "test".into(),
            metrics: vec![BandRow { metric: "Mean TTFT (ms)", predicted: 100.0, low: lo, high: hi }],
        };
        insta::assert_snapshot!(band.render(), @r"
        Prediction band (80 % of measurements expected inside; test):
          Mean TTFT (ms)                         100.00  [80.00 .. 125.00]
        ");
    }
}
