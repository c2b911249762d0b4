//! The first wave of a capped run, read from its mean and median first tokens: what the
//! `conc` requests sent at once add to a run's first tokens, measured and predicted.
//!
//! A run of `n` prompts at most `conc` at a time starts with `conc` requests at once, which
//! queue for the frontend and for their prefills; the requests after them arrive one at a time
//! as others end. The median first token is one of those later requests; what lifts the mean
//! above it is mostly the first wave. Taking the later requests at the median, the first wave
//! adds `(mean - median) · n / conc` to each of its requests. A twin whose steady first tokens
//! are right and whose waves are short has its prefills, frontend or a cold server's first
//! steps to look at, not its steps under load (CALIBRATION.md, "InferenceX served without
//! prefix caching").

use servebench_core::metrics::{median, percentile};

use super::{Calibrator, FitMetric, Residual};

/// One run's first wave, ms a request of the wave.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FirstWave {
    pub label: String,
    pub labels: String,
    pub measured_ms: f64,
    pub simulated_ms: f64,
}

impl FirstWave {
    /// The predicted wave over the measured one.
    pub fn ratio(&self) -> f64 {
        self.simulated_ms / self.measured_ms
    }
}

/// What a first wave of `wave` requests adds to each of them, from the mean and median first
/// token of the run's `prompts` (the requests after it taken at the median).
pub fn wave_excess(mean: f64, median: f64, prompts: usize, wave: usize) -> f64 {
    (mean - median) * prompts as f64 / wave as f64
}

/// The first waves of the runs among `residuals` that sent their prompts at once, at most
/// `conc` at a time with prompts beyond the first wave, and measured both mean and median
/// first token; a run whose measured wave adds nothing (its mean at or below its median) is left
/// out, as it has no wave to compare.
pub fn first_waves(cal: &Calibrator, residuals: &[&Residual]) -> Vec<FirstWave> {
    let mut points: Vec<usize> = residuals.iter().map(|r| r.point).collect();
    points.sort_unstable();
    points.dedup();
    let find = |point: usize, metric: FitMetric| residuals.iter().find(|r| r.point == point && r.metric == metric);
    points
        .into_iter()
        .filter_map(|point| {
            let w = &cal.targets()[point].point.workload;
            let wave = w.max_concurrency.filter(|&c| c > 0 && c < w.num_prompts && w.request_rate.is_infinite())?;
            let (mean, med) = (find(point, FitMetric::MeanTtft)?, find(point, FitMetric::MedianTtft)?);
            let measured_ms = wave_excess(mean.measured, med.measured, w.num_prompts, wave);
            (measured_ms > 0.0 && mean.simulated > 0.0).then(|| FirstWave {
                label: mean.label.clone(),
                labels: mean.labels.clone(),
                measured_ms,
                simulated_ms: wave_excess(mean.simulated, med.simulated, w.num_prompts, wave),
            })
        })
        .collect()
}

/// The waves' predicted-over-measured ratios: how many, and their median, 10th and 90th
/// percentiles.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct WaveSummary {
    pub runs: usize,
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
}

/// The summary of `waves` whose ratio is a number; `None` without one.
pub fn summary(waves: &[FirstWave]) -> Option<WaveSummary> {
    let ratios: Vec<f64> = waves.iter().map(FirstWave::ratio).filter(|r| r.is_finite()).collect();
    (!ratios.is_empty()).then(|| WaveSummary {
        runs: ratios.len(),
        median: median(&ratios),
        p10: percentile(&ratios, 10.0),
        p90: percentile(&ratios, 90.0),
    })
}

/// The text `sim validate` prints for the waves, empty without one.
pub fn table(waves: &[FirstWave]) -> String {
    let Some(s) = summary(waves) else { return String::new() };
    format!(
        "First waves (what the requests sent at once add to each one's first token, (mean - median) x prompts / \
         concurrency), predicted over measured:\n  {} run(s): median {:.2}, P10 {:.2}, P90 {:.2}\n",
        s.runs, s.median, s.p10, s.p90
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_wave_of_four_in_forty_prompts_adds_ten_times_the_gap_to_each() {
        // 36 requests at 30 ms and 4 at 66 ms: mean 33.6, median 30.
        assert!((wave_excess(33.6, 30.0, 40, 4) - 36.0).abs() < 1e-9);
        assert_eq!(summary(&[]), None);
        assert_eq!(table(&[]), "");
        let w =
            |m: f64, s: f64| FirstWave { label: "x".into(), labels: String::new(), measured_ms: m, simulated_ms: s };
        let s = summary(&[w(10.0, 5.0), w(10.0, 10.0), w(10.0, 20.0)]).unwrap();
        assert_eq!((s.runs, s.median), (3, 1.0));
        assert!(s.p10 < 1.0 && s.p90 > 1.0);
        assert!(table(&[w(10.0, 8.0)]).contains("1 run(s): median 0.80"));
    }

    proptest! {
        /// The later requests at the median and the wave's at `median + extra`: the excess gives
        /// `extra` back, whatever the sizes.
        #[test]
        fn the_excess_gives_back_what_the_wave_added(
            wave in 1usize..256, later in 1usize..2560, median in 1.0..1e4f64, extra in 0.0..1e5f64
        ) {
            let n = wave + later;
            let mean = (median * later as f64 + (median + extra) * wave as f64) / n as f64;
            let got = wave_excess(mean, median, n, wave);
            prop_assert!((got - extra).abs() <= 1e-6 * (1.0 + extra + median), "{got} against {extra}");
        }
    }
}
