//! Prediction bands from held-out errors, and whether they mean what they say: the band a set
//! of held-out errors gives ([`band_from`], what `sim fit` writes into a profile), and for
//! each measured point the band `sim predict` would print around its prediction
//! ([`crate::hardware::Uncertainty`]) with how many measurements fall inside it, below it or
//! above it. A band that says 80 % and holds half the measurements of a held-out set is too
//! narrow for that set.

use serde::Serialize;

use super::fidelity::percentile;
use super::{Calibrator, FitMetric, Residual};

/// The share of measurements a prediction band is meant to hold (its 10th to 90th percentile).
pub const NOMINAL: f64 = 0.8;

/// The fewest held-out errors of a metric a band is taken from: with fewer, the 10th and 90th
/// percentiles are little more than the extremes of a handful.
pub const MIN_POINTS: usize = 5;

/// The band held-out errors give, as `[lo, hi]` relative errors for the mean TTFT, the mean
/// TPOT and the output throughput ([`FitMetric::ALL`]'s order): the 10th and 90th percentiles
/// of each metric's errors, widened to hold 0 (a prediction lies inside its own band) and kept
/// above -1 (a failed simulation's error). `None` when a metric has fewer than [`MIN_POINTS`].
pub fn band_from(residuals: &[&Residual]) -> Option<[[f64; 2]; 3]> {
    let mut bands = [[0.0; 2]; 3];
    for (band, metric) in bands.iter_mut().zip(FitMetric::ALL) {
        let mut errors: Vec<f64> = residuals.iter().filter(|r| r.metric == metric).map(|r| r.error()).collect();
        if errors.len() < MIN_POINTS {
            return None;
        }
        errors.sort_by(f64::total_cmp);
        // The percent of measurements left out on each side: 10 for an 80 % band.
        let tail = (1.0 - NOMINAL) / 2.0 * 100.0;
        let lo = percentile(&errors, tail).clamp(-0.99, 0.0);
        let hi = percentile(&errors, 100.0 - tail).max(0.0);
        *band = [lo, hi];
    }
    Some(bands)
}

/// The band around a residual's prediction, as the range of relative errors
/// (`predicted / measured - 1`) whose measurements it holds: `[lo, hi]` of the deployment's
/// [`crate::hardware::Uncertainty`] for the metric. `None` for a metric without a band (the
/// median TTFT: `sim predict` bands the mean).
pub fn band_of(cal: &Calibrator, r: &Residual) -> Option<[f64; 2]> {
    cal.targets()[r.point].setup.uncertainty().errors(r.metric.key())
}

/// Where a measurement lies against its prediction's band.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Inside,
    /// Below the band: the prediction was too high for the band to reach it.
    Below,
    /// Above the band: the prediction was too low.
    Above,
}

/// The side of the band `[lo, hi]` (relative errors) a prediction with relative error `error`
/// puts its measurement on. A failed simulation (error -1) is below any band.
pub fn side(error: f64, [lo, hi]: [f64; 2]) -> Side {
    if error > hi {
        Side::Below
    } else if error >= lo {
        Side::Inside
    } else {
        Side::Above
    }
}

/// Counts of measurements inside, below and above their bands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    pub n: usize,
    pub inside: usize,
    pub below: usize,
    pub above: usize,
}

impl Coverage {
    /// Counts `sides`.
    pub fn of(sides: impl IntoIterator<Item = Side>) -> Coverage {
        let mut c = Coverage::default();
        for s in sides {
            c.n += 1;
            match s {
                Side::Inside => c.inside += 1,
                Side::Below => c.below += 1,
                Side::Above => c.above += 1,
            }
        }
        c
    }

    /// The share inside, 0 when there is nothing to count.
    pub fn share(&self) -> f64 {
        if self.n == 0 { 0.0 } else { self.inside as f64 / self.n as f64 }
    }
}

/// Coverage per banded metric measured ([`FitMetric::ALL`]) and over all of them (the row
/// "all"), for `residuals` of `cal`'s targets; nothing where none is banded.
pub fn by_metric(cal: &Calibrator, residuals: &[&Residual]) -> Vec<(String, Coverage)> {
    // Each residual's side, once (only the banded metrics have one).
    let sides: Vec<(FitMetric, Side)> =
        residuals.iter().filter_map(|r| band_of(cal, r).map(|band| (r.metric, side(r.error(), band)))).collect();
    let count = |m: FitMetric| Coverage::of(sides.iter().filter(|(x, _)| *x == m).map(|&(_, s)| s));
    let mut rows: Vec<(String, Coverage)> =
        FitMetric::ALL.iter().map(|&m| (m.name().to_string(), count(m))).filter(|(_, c)| c.n > 0).collect();
    if !sides.is_empty() {
        rows.push(("all".into(), Coverage::of(sides.iter().map(|&(_, s)| s))));
    }
    rows
}

/// A plain-text table of coverage: one row per metric.
pub fn table(rows: &[(String, Coverage)]) -> String {
    if rows.is_empty() {
        return "No prediction band to check: the band is given for mean TTFT, mean TPOT and output throughput, which these points did not measure.\n".into();
    }
    let mut out = format!(
        "Inside the prediction band ({:.0} % expected; below: predicted too high, above: too low):\n{:<16} {:>5} {:>9} {:>6} {:>6}\n",
        NOMINAL * 100.0,
        "metric",
        "n",
        "inside",
        "below",
        "above"
    );
    for (metric, c) in rows {
        out.push_str(&format!("{metric:<16} {:>5} {:>8.0}% {:>6} {:>6}\n", c.n, c.share() * 100.0, c.below, c.above));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_measurement_is_inside_its_band_up_to_the_edges() {
        let band = [-0.2, 0.1];
        assert_eq!(side(0.0, band), Side::Inside);
        assert_eq!(side(0.1, band), Side::Inside);
        assert_eq!(side(-0.2, band), Side::Inside);
        assert_eq!(side(0.15, band), Side::Below, "predicted 15 % high: the measurement is below the band");
        assert_eq!(side(-0.3, band), Side::Above);
        assert_eq!(side(-1.0, band), Side::Above, "a failed simulation predicts nothing");
    }

    #[test]
    fn coverage_counts_each_side_and_prints_a_row_per_metric() {
        let c = Coverage::of([Side::Inside, Side::Inside, Side::Inside, Side::Below, Side::Above]);
        assert_eq!(c, Coverage { n: 5, inside: 3, below: 1, above: 1 });
        assert!((c.share() - 0.6).abs() < 1e-12);
        assert_eq!(Coverage::default().share(), 0.0);
        let t = table(&[("mean TTFT (ms)".into(), c)]);
        let row = t.lines().nth(2).unwrap();
        assert_eq!(row.split_whitespace().collect::<Vec<_>>(), ["mean", "TTFT", "(ms)", "5", "60%", "1", "1"], "{t}");
        assert!(t.starts_with("Inside the prediction band (80 % expected"), "{t}");
        // Points that measured no banded metric (only medians) get a line that says so.
        let none = table(&[]);
        assert!(none.starts_with("No prediction band to check") && none.lines().count() == 1, "{none}");
    }

    fn residual(metric: FitMetric, error: f64) -> Residual {
        Residual {
            point: 0,
            label: String::new(),
            labels: String::new(),
            metric,
            measured: 100.0,
            simulated: 100.0 * (1.0 + error),
        }
    }

    #[test]
    fn held_out_errors_give_their_10th_to_90th_percentile_holding_zero() {
        let errors = [-0.2, -0.1, 0.0, 0.05, 0.1, 0.3];
        let mut rs: Vec<Residual> = errors.iter().map(|&e| residual(FitMetric::MeanTtft, e)).collect();
        // TPOT all too slow, throughput all too fast: the band still holds the prediction.
        rs.extend(errors.iter().map(|&e| residual(FitMetric::MeanTpot, e.abs() + 0.1)));
        rs.extend(errors.iter().map(|&e| residual(FitMetric::OutputThroughput, -e.abs() - 0.1)));
        let refs: Vec<&Residual> = rs.iter().collect();
        let [ttft, tpot, throughput] = band_from(&refs).unwrap();
        // Six sorted errors: the 10th percentile lies half-way from the first to the second.
        assert!((ttft[0] + 0.15).abs() < 1e-9 && (ttft[1] - 0.2).abs() < 1e-9, "{ttft:?}");
        assert_eq!(tpot[0], 0.0, "{tpot:?}");
        assert!(tpot[1] > 0.3, "{tpot:?}");
        assert_eq!(throughput[1], 0.0, "{throughput:?}");
        // A median TTFT counts for nothing; a metric with fewer than five errors gives no band.
        let few: Vec<&Residual> = refs.iter().copied().filter(|r| r.metric != FitMetric::MeanTpot).collect();
        assert_eq!(band_from(&few), None);
        let mut four = rs.clone();
        four.retain(|r| r.metric != FitMetric::MeanTtft || r.error() > -0.05);
        let four: Vec<&Residual> = four.iter().collect();
        assert_eq!(band_from(&four), None, "four TTFT errors are too few");
    }

    proptest! {
        /// The band `[p / (1 + hi), p / (1 + lo)]` printed around a prediction `p` holds a
        /// measurement exactly when the prediction's relative error is within `[lo, hi]`.
        #[test]
        fn inside_means_within_the_printed_band(
            measured in 0.01f64..1e5, ratio in 0.2f64..5.0, lo in -0.9f64..0.0, width in 0.0f64..1.5,
        ) {
            let hi = lo + width;
            let predicted = measured * ratio;
            let u = crate::hardware::Uncertainty { ttft: [lo, hi], ..Default::default() };
            let (low, high) = u.band("ttft", predicted).unwrap();
            // Away from the edges, where rounding could go either way.
            let e = ratio - 1.0;
            prop_assume!((e - lo).abs() > 1e-9 && (e - hi).abs() > 1e-9);
            let printed_holds = low <= measured && measured <= high;
            prop_assert_eq!(side(e, [lo, hi]) == Side::Inside, printed_holds);
        }
    }
}
