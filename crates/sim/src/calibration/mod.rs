//! Calibration: fitting the serving-stack constants of a [`StackProfile`] to measured runs,
//! and checking how well the fitted simulator predicts runs it was not fitted on.
//!
//! Each measured point's workload is rebuilt ([`points`]) and predicted in virtual time; the
//! constants chosen ([`FitParam`]) are moved by a bounded derivative-free search in log space to
//! minimise the mean of `|ln(simulated / measured)|` over mean TTFT, mean TPOT and output
//! throughput.
//! [`select`] keeps the points of the fitted model when the inputs name models.
//! [`fidelity`] holds the reference cases and the error statistics (MdAPE, P90).

pub mod fidelity;
mod optimize;
pub mod points;
mod run;
pub mod select;

use std::fmt::Write as _;

pub use optimize::SearchOptions;
pub use points::{FitMetric, Lengths, MeasuredPoint, PointWorkload, read_points};
pub use select::{Selection, same_model, select_model};

use crate::precision::ComputePrecision;
use crate::profile::StackProfile;
use crate::setup::SimSetup;
use run::PreparedPoint;

/// Why a calibration could not run.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    #[error("{path}: {message}")]
    Input { path: String, message: String },
    #[error("unknown constant {name:?} to fit; known: {known}")]
    UnknownParam { name: String, known: String },
    #[error("nothing to fit: {0}")]
    Nothing(String),
    #[error(
        "no measured point is of {model}; the {points} point(s) given are of {found}. Fit one of those with \
         --model NAME (and the --hardware it ran on), or add --all-points to fit them all anyway"
    )]
    NoPointOfModel {
        /// The model fitted, as given.
        model: String,
        /// The models the points name, with counts.
        found: String,
        /// How many points were given.
        points: usize,
    },
    #[error(transparent)]
    Setup(#[from] crate::error::SimError),
}

/// A constant of the stack profile that a fit may move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FitParam {
    AlphaApi,
    T0,
    TLayer,
    TSeq,
    TMoe,
    EtaBw,
    EtaFPrefill(ComputePrecision),
    EtaFDecode(ComputePrecision),
    EtaFMoe(ComputePrecision),
    Eager,
    AlphaAr,
}

impl FitParam {
    const SCALARS: [(FitParam, &'static str); 8] = [
        (FitParam::AlphaApi, "alpha-api-ms"),
        (FitParam::T0, "t0-ms"),
        (FitParam::TLayer, "t-layer-us"),
        (FitParam::TSeq, "t-seq-us"),
        (FitParam::TMoe, "t-moe-us"),
        (FitParam::EtaBw, "eta-bw"),
        (FitParam::Eager, "eager-ms"),
        (FitParam::AlphaAr, "alpha-ar-us"),
    ];

    /// Every name [`FitParam::parse`] accepts, comma-separated.
    pub fn known_names() -> String {
        let mut names: Vec<String> = Self::SCALARS.iter().map(|(_, n)| n.to_string()).collect();
        for table in ["eta-f-prefill", "eta-f-decode", "eta-f-moe"] {
            names.push(format!("{table}.{{bf16,fp8,fp4}}"));
        }
        names.join(", ")
    }

    /// Parses an option-style name: `t0-ms`, `eta-f-prefill.fp8`.
    pub fn parse(name: &str) -> Result<FitParam, CalibrationError> {
        let key = name.trim().to_ascii_lowercase().replace('_', "-");
        let unknown = || CalibrationError::UnknownParam { name: name.to_string(), known: Self::known_names() };
        if let Some((p, _)) = Self::SCALARS.iter().find(|(_, n)| *n == key) {
            return Ok(*p);
        }
        let (table, fmt) = key.split_once('.').ok_or_else(unknown)?;
        let fmt = ComputePrecision::parse(fmt).ok_or_else(unknown)?;
        match table {
            "eta-f-prefill" => Ok(FitParam::EtaFPrefill(fmt)),
            "eta-f-decode" => Ok(FitParam::EtaFDecode(fmt)),
            "eta-f-moe" => Ok(FitParam::EtaFMoe(fmt)),
            _ => Err(unknown()),
        }
    }

    /// The option-style name.
    pub fn name(self) -> String {
        match self {
            FitParam::EtaFPrefill(p) => format!("eta-f-prefill.{}", p.name()),
            FitParam::EtaFDecode(p) => format!("eta-f-decode.{}", p.name()),
            FitParam::EtaFMoe(p) => format!("eta-f-moe.{}", p.name()),
            other => Self::SCALARS.iter().find(|(p, _)| *p == other).map_or("?", |(_, n)| n).to_string(),
        }
    }

    pub fn get(self, s: &StackProfile) -> f64 {
        match self {
            FitParam::AlphaApi => s.alpha_api_ms,
            FitParam::T0 => s.t0_ms,
            FitParam::TLayer => s.t_layer_us,
            FitParam::TSeq => s.t_seq_us,
            FitParam::TMoe => s.t_moe_us,
            FitParam::EtaBw => s.eta_bw,
            FitParam::EtaFPrefill(p) => s.eta_f_prefill.get(p),
            FitParam::EtaFDecode(p) => s.eta_f_decode.get(p),
            FitParam::EtaFMoe(p) => s.eta_f_moe.get(p),
            FitParam::Eager => s.eager_ms,
            FitParam::AlphaAr => s.alpha_ar_us.unwrap_or(0.0),
        }
    }

    pub fn set(self, s: &mut StackProfile, v: f64) {
        match self {
            FitParam::AlphaApi => s.alpha_api_ms = v,
            FitParam::T0 => s.t0_ms = v,
            FitParam::TLayer => s.t_layer_us = v,
            FitParam::TSeq => s.t_seq_us = v,
            FitParam::TMoe => s.t_moe_us = v,
            FitParam::EtaBw => s.eta_bw = v,
            FitParam::EtaFPrefill(p) => *s.eta_f_prefill.get_mut(p) = v,
            FitParam::EtaFDecode(p) => *s.eta_f_decode.get_mut(p) = v,
            FitParam::EtaFMoe(p) => *s.eta_f_moe.get_mut(p) = v,
            FitParam::Eager => s.eager_ms = v,
            FitParam::AlphaAr => s.alpha_ar_us = Some(v),
        }
    }

    /// The range searched, in the constant's unit.
    pub fn bounds(self) -> (f64, f64) {
        match self {
            FitParam::AlphaApi => (0.01, 10_000.0),
            FitParam::T0 => (0.01, 500.0),
            FitParam::TLayer | FitParam::TSeq | FitParam::TMoe | FitParam::AlphaAr => (0.1, 10_000.0),
            FitParam::EtaBw => (0.05, 1.2),
            FitParam::EtaFPrefill(_) | FitParam::EtaFDecode(_) | FitParam::EtaFMoe(_) => (1e-4, 1.5),
            FitParam::Eager => (0.01, 1000.0),
        }
    }

    /// Where the search starts when the profile's value is at or below the lower bound (0
    /// disables some terms).
    fn typical(self) -> f64 {
        match self {
            FitParam::AlphaApi => 15.0,
            FitParam::T0 => 2.0,
            FitParam::TLayer | FitParam::TSeq => 10.0,
            FitParam::TMoe | FitParam::AlphaAr => 20.0,
            FitParam::EtaBw => 0.85,
            FitParam::EtaFPrefill(_) | FitParam::EtaFDecode(_) | FitParam::EtaFMoe(_) => 0.3,
            FitParam::Eager => 5.0,
        }
    }

    /// The starting value for a profile: its value, or a typical one when it is switched off.
    pub fn start(self, s: &StackProfile) -> f64 {
        let (lo, hi) = self.bounds();
        let v = self.get(s);
        if v > lo { v.min(hi) } else { self.typical() }
    }
}

/// The constants worth fitting for `setup` from `points`, most identifiable first, no more
/// than the points have measured values.
pub fn default_params(setup: &SimSetup, points: &[MeasuredPoint]) -> Vec<FitParam> {
    let linear = setup.model.precision.compute_on(&setup.hardware.peak_tflops);
    let longest_prompt = points
        .iter()
        .map(|p| p.workload.input.expand(p.workload.num_prompts).into_iter().max().unwrap_or(0))
        .max()
        .unwrap_or(0);
    let busiest = points
        .iter()
        .map(|p| p.workload.num_prompts.min(p.workload.max_concurrency.unwrap_or(usize::MAX)))
        .max()
        .unwrap_or(0);
    let mut params = vec![FitParam::AlphaApi, FitParam::EtaFPrefill(linear), FitParam::EtaBw, FitParam::T0];
    if busiest >= 8 {
        params.push(FitParam::TSeq);
    }
    if setup.model.moe.is_some() {
        params.push(FitParam::TMoe);
    }
    if linear != ComputePrecision::Bf16 && longest_prompt >= 4096 {
        params.push(FitParam::EtaFPrefill(ComputePrecision::Bf16));
    }
    if setup.stack.eager_ms > 0.0 {
        params.push(FitParam::Eager);
    }
    let values: usize = points.iter().map(|p| p.measured.len()).sum();
    params.truncate(values.max(1));
    params
}

/// A measured point and the deployment it ran on.
#[derive(Clone, Debug)]
pub struct Target {
    pub setup: SimSetup,
    pub point: MeasuredPoint,
}

/// One metric of one point: measured and simulated.
#[derive(Clone, Debug, PartialEq)]
pub struct Residual {
    /// Index of the point among the calibrator's targets.
    pub point: usize,
    pub label: String,
    /// The point's labels as [`MeasuredPoint::labels_text`] writes them.
    pub labels: String,
    pub metric: FitMetric,
    pub measured: f64,
    /// 0 when the simulation produced no value (every request failed).
    pub simulated: f64,
}

impl Residual {
    /// Signed relative error, `simulated / measured - 1`.
    pub fn error(&self) -> f64 {
        self.simulated / self.measured - 1.0
    }

    /// Absolute percentage error as a fraction.
    pub fn ape(&self) -> f64 {
        self.error().abs()
    }

    /// `|ln(simulated / measured)|`, capped so one failed simulation cannot dominate.
    pub fn log_error(&self) -> f64 {
        if self.simulated <= 0.0 { 10.0 } else { (self.simulated / self.measured).ln().abs().min(10.0) }
    }
}

/// The outcome of a fit.
#[derive(Clone, Debug, PartialEq)]
pub struct FitResult {
    pub values: Vec<(FitParam, f64)>,
    /// The first target's profile with the fitted values.
    pub profile: StackProfile,
    /// The loss at the starting values and at the end.
    pub loss_start: f64,
    pub loss: f64,
    pub evaluations: usize,
}

/// Measured targets, prepared once, simulated as often as a fit needs.
pub struct Calibrator {
    targets: Vec<Target>,
    prepared: Vec<PreparedPoint>,
}

impl Calibrator {
    pub fn new(targets: Vec<Target>) -> Result<Self, CalibrationError> {
        if targets.is_empty() {
            return Err(CalibrationError::Nothing("no measured point was given".into()));
        }
        let prepared = targets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                PreparedPoint::new(&t.point.workload, i as u64)
                    .map_err(|message| CalibrationError::Input { path: t.point.label.clone(), message })
            })
            .collect::<Result<_, _>>()?;
        Ok(Calibrator { targets, prepared })
    }

    pub fn targets(&self) -> &[Target] {
        &self.targets
    }

    /// The simulated metrics of target `i` with `values` applied to its profile.
    pub fn simulate(&self, i: usize, values: &[(FitParam, f64)]) -> Vec<Residual> {
        let t = &self.targets[i];
        let mut setup = t.setup.clone();
        for &(p, v) in values {
            p.set(&mut setup.stack, v);
        }
        let metrics = self.prepared[i].simulate(&setup);
        t.point
            .measured
            .iter()
            .map(|&(metric, measured)| Residual {
                point: i,
                label: t.point.label.clone(),
                labels: t.point.labels_text(),
                metric,
                measured,
                simulated: metrics.get(metric).unwrap_or(0.0),
            })
            .collect()
    }

    /// Residuals of the targets in `subset` with `values` applied.
    pub fn residuals(&self, subset: &[usize], values: &[(FitParam, f64)]) -> Vec<Residual> {
        subset.iter().flat_map(|&i| self.simulate(i, values)).collect()
    }

    /// The fit's loss: mean `|ln(sim/meas)|` over every metric of `subset`.
    pub fn loss(&self, subset: &[usize], values: &[(FitParam, f64)]) -> f64 {
        let r = self.residuals(subset, values);
        r.iter().map(Residual::log_error).sum::<f64>() / r.len().max(1) as f64
    }

    /// Fits `params` on the targets in `subset`, starting from `start` (or the first target's
    /// profile), searching in log space within each constant's bounds.
    pub fn fit(&self, subset: &[usize], params: &[FitParam], start: Option<&[f64]>, o: SearchOptions) -> FitResult {
        let base = &self.targets[subset.first().copied().unwrap_or(0)].setup.stack;
        let x0: Vec<f64> = match start {
            Some(s) if s.len() == params.len() => s.iter().map(|v| v.max(1e-12).ln()).collect(),
            _ => params.iter().map(|p| p.start(base).ln()).collect(),
        };
        let lo: Vec<f64> = params.iter().map(|p| p.bounds().0.ln()).collect();
        let hi: Vec<f64> = params.iter().map(|p| p.bounds().1.ln()).collect();
        let values_at =
            |x: &[f64]| -> Vec<(FitParam, f64)> { params.iter().zip(x).map(|(p, v)| (*p, v.exp())).collect() };
        let loss_start = self.loss(subset, &values_at(&x0));
        let mut objective = |x: &[f64]| self.loss(subset, &values_at(x));
        let m = optimize::minimize(&mut objective, &x0, &lo, &hi, o);
        let values = values_at(&m.x);
        let mut profile = base.clone();
        for &(p, v) in &values {
            p.set(&mut profile, v);
        }
        FitResult { values, profile, loss_start, loss: m.value, evaluations: m.evaluations + 1 }
    }
}

/// A plain-text table of residuals: point, metric, measured, simulated, error, and the
/// point's labels when any point has some (so points of one file can be told apart).
pub fn residual_table(residuals: &[Residual]) -> String {
    let width = residuals.iter().map(|r| r.label.chars().count()).max().unwrap_or(5).clamp(5, 60);
    let with_labels = residuals.iter().any(|r| !r.labels.is_empty());
    let mut out =
        format!("{:<width$}  {:<15} {:>12} {:>12} {:>8}", "point", "metric", "measured", "simulated", "error");
    out.push_str(if with_labels { "  labels\n" } else { "\n" });
    for r in residuals {
        let chars: Vec<char> = r.label.chars().collect();
        let label: String = if chars.len() > width {
            format!("...{}", chars[chars.len() - (width - 3)..].iter().collect::<String>())
        } else {
            r.label.clone()
        };
        let _ = write!(
            out,
            "{label:<width$}  {:<15} {:>12.2} {:>12.2} {:>+7.1}%",
            r.metric.name(),
            r.measured,
            r.simulated,
            r.error() * 100.0
        );
        if with_labels && !r.labels.is_empty() {
            let _ = write!(out, "  {}", r.labels);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod fidelity_tests;
#[cfg(test)]
mod tests;
