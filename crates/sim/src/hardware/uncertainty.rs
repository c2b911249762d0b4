//! How far off a device's predictions are expected to be: the band `sim predict` prints beside
//! each headline figure, where it comes from, and how it widens for a deployment outside the
//! measurements that set it.

use serde::{Deserialize, Serialize};

/// How far off predictions on a device are expected to be: the 10th and 90th percentiles of
/// the relative error (`predicted / measured − 1`) per headline metric, and where they come
/// from. A prediction `p` is shown with the band `[p / (1 + hi), p / (1 + lo)]`, the measured
/// values that such errors would have come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Uncertainty {
    /// Where the figures come from (a calibration's held-out errors, or an assumption).
    pub source: String,
    pub ttft: [f64; 2],
    pub tpot: [f64; 2],
    pub throughput: [f64; 2],
    /// The tensor-parallel sizes the errors were measured at; empty when that is not known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tp: Vec<u32>,
    /// The models the errors were measured on; empty when that is not known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    /// The spread of a deployment outside those sizes and models on this device, where public
    /// checks of other deployments have measured it wider than the spread assumed for an
    /// uncalibrated device; unset, the assumed spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elsewhere: Option<Spread>,
}

/// The 10th and 90th percentile errors of the headline metrics, with where they come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spread {
    pub source: String,
    pub ttft: [f64; 2],
    pub tpot: [f64; 2],
    pub throughput: [f64; 2],
}

impl Spread {
    /// The spread assumed for a device without measurements: what the calibrated devices'
    /// datasheet-only predictions of other GPUs would need, assumed, not measured.
    pub fn assumed() -> Spread {
        Spread {
            source: "the spread assumed for an uncalibrated device".into(),
            ttft: [-0.4, 0.4],
            tpot: [-0.3, 0.3],
            throughput: [-0.3, 0.3],
        }
    }

    fn sides(&self) -> [(&'static str, [f64; 2]); 3] {
        sides(self.ttft, self.tpot, self.throughput)
    }
}

/// The three headline metrics' errors, named as a preset's `[uncertainty]` names them.
fn sides(ttft: [f64; 2], tpot: [f64; 2], throughput: [f64; 2]) -> [(&'static str, [f64; 2]); 3] {
    [("ttft", ttft), ("tpot", tpot), ("throughput", throughput)]
}

impl Default for Uncertainty {
    /// A device without measurements: the assumed spread.
    fn default() -> Self {
        let Spread { ttft, tpot, throughput, .. } = Spread::assumed();
        Uncertainty {
            source: "assumed for a device the presets were not calibrated on (datasheet priors only)".into(),
            ttft,
            tpot,
            throughput,
            tp: Vec::new(),
            models: Vec::new(),
            elsewhere: None,
        }
    }
}

impl Uncertainty {
    /// The 10th and 90th percentile relative errors for a metric (`ttft`, `tpot` or
    /// `throughput`); `None` for another.
    pub fn errors(&self, metric: &str) -> Option<[f64; 2]> {
        match metric {
            "ttft" => Some(self.ttft),
            "tpot" => Some(self.tpot),
            "throughput" => Some(self.throughput),
            _ => None,
        }
    }

    /// The band around a prediction `value` for a metric (`ttft`, `tpot` or `throughput`).
    pub fn band(&self, metric: &str, value: f64) -> Option<(f64, f64)> {
        let [lo, hi] = self.errors(metric)?;
        Some((value / (1.0 + hi), value / (1.0 + lo)))
    }

    /// The spread a deployment outside the measured sizes and models takes: the device's
    /// [`Uncertainty::elsewhere`], or the assumed one.
    pub fn outside(&self) -> Spread {
        self.elsewhere.clone().unwrap_or_else(Spread::assumed)
    }

    /// The band for a deployment over `tp` GPUs: as it is, or, for a size its errors were not
    /// measured at, widened to at least [`Uncertainty::outside`], its source saying so (a fit's
    /// errors at the sizes it saw do not hold at others: constants fitted on H100 runs at TP 2
    /// and 4 and checked at TP 8 held 44 % of the figures in their own 5-fold band,
    /// CALIBRATION.md).
    pub fn for_tp(&self, tp: u32) -> Uncertainty {
        if self.tp.is_empty() || self.tp.contains(&tp) {
            return self.clone();
        }
        let sizes = self.tp.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        self.widened(format!("tp {tp} is outside the sizes they were measured at ({sizes})"))
    }

    /// The band for a deployment of `model`: as it is for a model its errors were measured on;
    /// for another, at least [`Uncertainty::outside`], its source saying so (the constants are
    /// shared across models, but the checks on other models' public reports in CALIBRATION.md
    /// find larger errors than the calibration's own).
    pub fn for_model(&self, model: &str) -> Uncertainty {
        if self.models.is_empty() || self.models.iter().any(|m| m == model) {
            return self.clone();
        }
        self.widened(format!("{model} is not among the models they were measured on ({})", self.models.join(", ")))
    }

    /// The band of a deployment that drafts speculatively: at least [`Uncertainty::outside`],
    /// as no public measurement with drafts has checked how they are priced.
    pub fn for_drafts(&self) -> Uncertainty {
        self.widened(
            "speculative decoding is priced from its design, not yet checked against a measurement with drafts".into(),
        )
    }

    /// Each side at least as wide as [`Uncertainty::outside`], with `why` and that spread's
    /// source added to the source.
    fn widened(&self, why: String) -> Uncertainty {
        let floor = self.outside();
        let widen = |a: [f64; 2], b: [f64; 2]| [a[0].min(b[0]), a[1].max(b[1])];
        // Widened once already (a size and a model both outside): one more reason, one spread.
        let to = format!(": widened to {}", floor.source);
        let reasons = self.source.strip_suffix(&to).unwrap_or(&self.source);
        Uncertainty {
            source: format!("{reasons}; {why}{to}"),
            ttft: widen(self.ttft, floor.ttft),
            tpot: widen(self.tpot, floor.tpot),
            throughput: widen(self.throughput, floor.throughput),
            ..self.clone()
        }
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        for (name, [lo, hi]) in sides(self.ttft, self.tpot, self.throughput) {
            if !(lo.is_finite() && hi.is_finite() && lo > -1.0 && lo <= hi) {
                return Err(format!("uncertainty.{name} must be [low, high] with -1 < low <= high, got [{lo}, {hi}]"));
            }
        }
        let Some(elsewhere) = &self.elsewhere else { return Ok(()) };
        for ((name, [lo, hi]), (_, [a, b])) in elsewhere.sides().into_iter().zip(Spread::assumed().sides()) {
            // Checks of other deployments only ever widen the assumed spread.
            if !(lo.is_finite() && hi.is_finite() && lo <= a && hi >= b) {
                return Err(format!(
                    "uncertainty.elsewhere.{name} must hold the spread assumed for an uncalibrated device \
                     [{a}, {b}], got [{lo}, {hi}]"
                ));
            }
            if lo <= -1.0 {
                return Err(format!("uncertainty.elsewhere.{name} must be above -1, got {lo}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(ttft: [f64; 2], tp: Vec<u32>, models: &[&str]) -> Uncertainty {
        Uncertainty {
            source: "held out".into(),
            ttft,
            tpot: [-0.05, 0.1],
            throughput: [0.0, 0.0],
            tp,
            models: models.iter().map(|m| m.to_string()).collect(),
            elsewhere: None,
        }
    }

    #[test]
    fn a_band_brackets_a_prediction_by_the_errors_that_would_have_come_from_it() {
        let (lo, hi) = Uncertainty::default().band("tpot", 10.0).unwrap();
        assert!(lo < 10.0 && hi > 10.0 && (lo - 10.0 / 1.3).abs() < 1e-12, "{lo} {hi}");
        assert!(Uncertainty::default().band("e2el", 1.0).is_none());
        let bad = Uncertainty { ttft: [0.2, -0.2], ..Uncertainty::default() };
        assert!(bad.validate().unwrap_err().contains("uncertainty.ttft"));
    }

    #[test]
    fn a_band_says_when_the_deployment_is_outside_the_sizes_it_was_measured_at() {
        let u = measured([-0.1, 0.1], vec![2, 4], &[]);
        assert_eq!(u.for_tp(4), u, "a measured size keeps the band as it is");
        let outside = u.for_tp(1);
        assert_eq!(
            outside.source,
            "held out; tp 1 is outside the sizes they were measured at (2, 4): widened to the spread assumed \
             for an uncalibrated device"
        );
        let assumed = Uncertainty::default();
        assert_eq!((outside.ttft, outside.tpot), (assumed.ttft, assumed.tpot), "each side at least the assumed");
        let unknown = Uncertainty::default();
        assert_eq!(unknown.for_tp(1), unknown, "a band that names no sizes says nothing more");
    }

    #[test]
    fn a_band_measured_on_one_model_widens_for_another() {
        let u = measured([-0.5, 0.1], Vec::new(), &["a/b"]);
        assert_eq!(u.for_model("a/b"), u, "the measured model keeps the band");
        let other = u.for_model("c/d");
        let assumed = Uncertainty::default();
        assert_eq!(other.ttft, [-0.5, assumed.ttft[1]], "each side at least as wide as either");
        assert_eq!(other.tpot, assumed.tpot);
        assert!(other.source.starts_with("held out; c/d is not among the models they were measured on (a/b)"));
        assert_eq!(Uncertainty::default().for_model("c/d"), Uncertainty::default());
    }

    #[test]
    fn outside_its_measurements_a_device_takes_the_spread_its_other_checks_measured() {
        let elsewhere = Spread {
            source: "the public checks of other models".into(),
            ttft: [-0.6, 0.4],
            tpot: [-0.3, 0.35],
            throughput: [-0.3, 0.3],
        };
        let u = Uncertainty { elsewhere: Some(elsewhere.clone()), ..measured([-0.1, 0.1], vec![2], &["a/b"]) };
        assert_eq!(u.validate(), Ok(()));
        assert_eq!(u.for_model("a/b").for_tp(2), u, "inside, the measured band");
        let both = u.for_tp(8).for_model("c/d");
        assert_eq!(
            both.source,
            "held out; tp 8 is outside the sizes they were measured at (2); c/d is not among the models they were \
             measured on (a/b): widened to the public checks of other models",
            "two reasons, the spread named once"
        );
        for other in [both, u.for_model("c/d"), u.for_tp(8), u.for_drafts()] {
            assert_eq!(
                (other.ttft, other.tpot, other.throughput),
                (elsewhere.ttft, elsewhere.tpot, elsewhere.throughput)
            );
            assert!(other.source.ends_with("widened to the public checks of other models"), "{}", other.source);
        }
        // A spread narrower than the assumed one on any side is refused: checks only widen it.
        let narrow = Uncertainty { elsewhere: Some(Spread { tpot: [-0.2, 0.3], ..elsewhere }), ..u };
        let e = narrow.validate().unwrap_err();
        assert!(
            e.contains("uncertainty.elsewhere.tpot must hold the spread assumed") && e.contains("[-0.3, 0.3]"),
            "{e}"
        );
    }
}
