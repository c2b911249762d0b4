//! Calibration: fitting the serving-stack constants of a [`StackProfile`] to measured runs,
//! and checking how well the fitted simulator predicts runs it was not fitted on.
//!
//! Each measured point's workload is rebuilt ([`points`]) and predicted in virtual time; the
//! constants chosen ([`FitParam`]) are moved by a bounded derivative-free search in log space to
//! minimise the mean of `|ln(simulated / measured)|` over mean TTFT, mean TPOT and output
//! throughput.
//! [`select`] keeps the points of the fitted model when the inputs name models.
//! [`fidelity`] holds the reference cases and the error statistics (MdAPE, P90); [`coverage`]
//! counts the measurements inside the prediction bands.

pub mod benchy;
pub mod coverage;
mod datasets;
pub mod fidelity;
pub mod first_wave;
mod optimize;
pub mod points;
pub mod read;
mod run;
pub mod select;
pub mod split;
pub mod table;
pub mod validate;

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use optimize::SearchOptions;
pub use points::{FitMetric, Lengths, MeasuredPoint, PointWorkload};
pub use read::{FileRead, SkipGroup, Skipped, read_file, read_points};
pub use select::{Selection, same_model, select_model};

use crate::cost::terms::LinkCost;
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

pub use crate::profile::FitParam;

/// Parses a constant's option-style name (`t0-ms`, `gemm-eff.fp8`) for a fit.
pub fn parse_param(name: &str) -> Result<FitParam, CalibrationError> {
    FitParam::parse(name)
        .ok_or_else(|| CalibrationError::UnknownParam { name: name.to_string(), known: FitParam::known_names() })
}

/// The typical relative error of one measured metric (run-to-run noise and what the model
/// leaves out), in ln units: a residual this size costs as much in the fit's objective as moving
/// a constant by its prior's σ costs half of.
pub const MEASUREMENT_NOISE: f64 = 0.05;

/// The constants worth fitting for `setup` from `points`, most identifiable first, no more
/// than the points have measured values.
pub fn default_params(setup: &SimSetup, points: &[MeasuredPoint]) -> Vec<FitParam> {
    let linear = setup.model.precision.compute_on(&setup.hardware.peak_tflops);
    let longest = |p: &MeasuredPoint| p.workload.input.expand(p.workload.num_prompts).into_iter().max().unwrap_or(0);
    let in_flight = |p: &MeasuredPoint| p.workload.num_prompts.min(p.workload.max_concurrency.unwrap_or(usize::MAX));
    let longest_prompt = points.iter().map(longest).max().unwrap_or(0);
    let busiest = points.iter().map(in_flight).max().unwrap_or(0);
    // The prompt tokens one run has in flight at its busiest (a burst's all at once).
    let prompt_tokens_at_once =
        points.iter().map(|p| (longest(p) as usize).saturating_mul(in_flight(p))).max().unwrap_or(0);
    // A mixture of experts spends its prefill in the expert products (attention and any dense
    // layers are a small part): their ceiling is what long or many prompts identify. Where
    // the tensor cores bind dequantizing products before their unpacking, the fraction of the
    // tensor rate they reach instead (`dequant_mma`, dense and expert products alike; the
    // weight-only ceilings do not reach them there).
    let peaks = setup.hardware.peak_tflops.at_clock(setup.hardware.sustained_clock);
    let st = &setup.stack;
    let weight_only = linear == ComputePrecision::WeightOnly;
    let experts = setup.model.moe.is_some();
    let products = if weight_only && st.dequantizing_tensor_bound(&peaks, experts) {
        FitParam::DequantMma
    } else if experts {
        FitParam::MoeEff(linear)
    } else {
        FitParam::GemmEff(linear)
    };
    let mut params = vec![FitParam::AlphaApi, products];
    // An all-reduce in message steps (Ethernet or InfiniBand between nodes, PCIe between
    // cards) has the least certain latency of a deployment, and every decode step pays it
    // twice a layer: the link's latency a step, which carries to other group sizes. Its rate
    // is as uncertain (a network's depends on how NCCL was set up) and binds where prompts
    // prefill thousands of tokens at once.
    if all_reduce_has_steps(setup) {
        params.push(FitParam::ArStep);
        if prompt_tokens_at_once >= 4096 {
            params.push(FitParam::ArRate);
        }
    }
    params.extend([FitParam::EtaBw, FitParam::T0]);
    if busiest >= 8 {
        params.push(FitParam::TSeq);
    }
    if setup.model.moe.is_some() {
        params.push(FitParam::TMoe);
    }
    if longest_prompt >= 4096 {
        params.push(FitParam::AttnEff);
    }
    if setup.stack.eager_layer_us > 0.0
        && (setup.stack.graph_max_ctx > 0 || setup.options.cudagraph_mode == crate::options::CudaGraphMode::None)
    {
        params.push(FitParam::EagerLayer);
    }
    let values: usize = points.iter().map(|p| p.measured.iter().filter(|(m, _)| m.fitted()).count()).sum();
    params.truncate(values.max(1));
    params
}

/// The tensor-parallel all-reduce's link as the deployment uses it.
fn all_reduce_link(setup: &SimSetup) -> LinkCost {
    LinkCost::of(&setup.options.allreduce_link(&setup.hardware))
}

/// Whether the deployment's tensor-parallel all-reduce pays a latency a message step (a
/// network, PCIe), not only a fixed part.
pub(crate) fn all_reduce_has_steps(setup: &SimSetup) -> bool {
    setup.options.tp > 1 && all_reduce_link(setup).has_message_steps()
}

/// The value a fit pulls `param` toward for `setup`: the profile's, but for the all-reduce's
/// latencies and rate the profile leaves to the link, the deployment's own, not the range's
/// floor: the link's latency a network step, its fixed part, its rate, and one small message's
/// over the tensor-parallel group (the link's fixed part and its ring's or tree's steps).
pub fn prior_value(param: FitParam, setup: &SimSetup) -> f64 {
    let (lo, hi) = param.bounds();
    let link = all_reduce_link(setup);
    let us = match param {
        FitParam::AlphaAr if setup.stack.alpha_ar_us.is_none() && setup.options.tp > 1 => {
            link.allreduce_seconds(f64::from(setup.options.tp), 0.0) * 1e6
        }
        FitParam::ArStep if setup.stack.ar_step_us.is_none() && link.has_message_steps() => link.step_s * 1e6,
        FitParam::ArFixed if setup.stack.ar_fixed_us.is_none() && link.has_message_steps() => link.fixed_s * 1e6,
        FitParam::ArRate if setup.stack.ar_gbs.is_none() && link.has_message_steps() => link.bandwidth * 1e-9,
        _ => return param.start(&setup.stack),
    };
    us.clamp(lo, hi)
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

/// What a fit learned about one constant.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamEstimate {
    pub param: FitParam,
    /// The prior's centre (the profile's value before the fit).
    pub prior: f64,
    pub value: f64,
    /// σ of the estimate in ln units, from the objective's curvature (data and prior).
    pub sigma_ln: f64,
    /// Whether the data pinned the constant down more than the prior did; when not, the value
    /// is the prior's, give or take, and the data say little about it.
    pub determined: bool,
}

/// The outcome of a fit.
#[derive(Clone, Debug, PartialEq)]
pub struct FitResult {
    pub values: Vec<(FitParam, f64)>,
    /// Per constant: prior, estimate, its uncertainty, and whether the data determined it.
    pub estimates: Vec<ParamEstimate>,
    /// The first target's profile with the fitted values.
    pub profile: StackProfile,
    /// The loss at the starting values and at the end.
    pub loss_start: f64,
    pub loss: f64,
    pub evaluations: usize,
    /// The fit's own wall time.
    pub elapsed: std::time::Duration,
}

/// Measured targets, prepared once, simulated as often as a fit needs.
pub struct Calibrator {
    targets: Vec<Target>,
    prepared: Vec<PreparedPoint>,
    /// How much the prior counts (1: as much as [`FitParam::prior_sigma`] says; less for a
    /// stack known to be unlike the preset's).
    prior_weight: f64,
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
                let phases = t.point.measured.iter().any(|(m, _)| *m == FitMetric::EngineTtft);
                PreparedPoint::new(&t.point.workload, i as u64)
                    .map(|p| if phases { p.sampling_phases() } else { p })
                    .map_err(|message| CalibrationError::Input { path: t.point.label.clone(), message })
            })
            .collect::<Result<_, _>>()?;
        Ok(Calibrator { targets, prepared, prior_weight: 1.0 })
    }

    /// The same targets with the prior counted `weight` times (0 ignores it).
    pub fn with_prior_weight(mut self, weight: f64) -> Self {
        self.prior_weight = weight.max(0.0);
        self
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

    /// Residuals of the targets in `subset` with `values` applied, in `subset`'s order.
    /// The points are simulated on every core, the longest first, each core taking the next
    /// point when it is done with one (each prediction is independent and deterministic, so
    /// the result does not depend on how they are spread).
    pub fn residuals(&self, subset: &[usize], values: &[(FitParam, f64)]) -> Vec<Residual> {
        let threads = std::thread::available_parallelism().map_or(1, usize::from).min(subset.len()).max(1);
        if threads == 1 {
            return subset.iter().flat_map(|&i| self.simulate(i, values)).collect();
        }
        let mut order: Vec<usize> = (0..subset.len()).collect();
        order.sort_by_key(|&k| std::cmp::Reverse(self.prepared[subset[k]].work));
        let next = AtomicUsize::new(0);
        let mut per_point: Vec<(usize, Vec<Residual>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let at = next.fetch_add(1, Ordering::Relaxed);
                            let Some(&k) = order.get(at) else { break done };
                            done.push((k, self.simulate(subset[k], values)));
                        }
                    })
                })
                .collect();
            handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
        });
        per_point.sort_by_key(|(k, _)| *k);
        per_point.into_iter().flat_map(|(_, r)| r).collect()
    }

    /// The residuals a fit matches ([`FitMetric::fitted`]) of the targets in `subset`.
    fn fitted_residuals(&self, subset: &[usize], values: &[(FitParam, f64)]) -> Vec<Residual> {
        let mut r = self.residuals(subset, values);
        r.retain(|r| r.metric.fitted());
        r
    }

    /// The fit's loss: mean `|ln(sim/meas)|` over every fitted metric of `subset`.
    pub fn loss(&self, subset: &[usize], values: &[(FitParam, f64)]) -> f64 {
        let r = self.fitted_residuals(subset, values);
        r.iter().map(Residual::log_error).sum::<f64>() / r.len().max(1) as f64
    }

    /// The fit's objective: the residuals' `|ln(sim/meas)|` in units of the measurement noise,
    /// plus the prior's `½ Σ ((ln v − ln prior) / σ)²`.
    fn objective(&self, subset: &[usize], params: &[FitParam], prior: &[f64], x: &[f64]) -> f64 {
        let values: Vec<(FitParam, f64)> = params.iter().zip(x).map(|(p, v)| (*p, v.exp())).collect();
        let data: f64 =
            self.fitted_residuals(subset, &values).iter().map(Residual::log_error).sum::<f64>() / MEASUREMENT_NOISE;
        data + self.prior_weight * prior_penalty(params, prior, x)
    }

    /// Fits `params` on the targets in `subset`: a bounded derivative-free search in log space
    /// within each constant's physical range, pulled toward the profile's values (the prior) so
    /// that points which cannot tell a constant apart leave it where the preset has it.
    /// `start` overrides the starting point (not the prior).
    pub fn fit(&self, subset: &[usize], params: &[FitParam], start: Option<&[f64]>, o: SearchOptions) -> FitResult {
        let clock = std::time::Instant::now();
        let base = &self.targets[subset.first().copied().unwrap_or(0)].setup;
        let prior: Vec<f64> = params.iter().map(|p| prior_value(*p, base).ln()).collect();
        let x0: Vec<f64> = match start {
            Some(s) if s.len() == params.len() => s.iter().map(|v| v.max(1e-12).ln()).collect(),
            _ => prior.clone(),
        };
        let lo: Vec<f64> = params.iter().map(|p| p.bounds().0.ln()).collect();
        let hi: Vec<f64> = params.iter().map(|p| p.bounds().1.ln()).collect();
        let values_at =
            |x: &[f64]| -> Vec<(FitParam, f64)> { params.iter().zip(x).map(|(p, v)| (*p, v.exp())).collect() };
        let loss_start = self.loss(subset, &values_at(&x0));
        let mut objective = |x: &[f64]| self.objective(subset, params, &prior, x);
        let m = optimize::minimize(&mut objective, &x0, &lo, &hi, o);
        let values = values_at(&m.x);
        let estimates = self.estimates(subset, params, &prior, &m.x, (&lo, &hi));
        let mut profile = base.stack.clone();
        for &(p, v) in &values {
            p.set(&mut profile, v);
        }
        let loss = self.loss(subset, &values);
        let evaluations = m.evaluations + 1 + 2 * params.len();
        FitResult { values, estimates, profile, loss_start, loss, evaluations, elapsed: clock.elapsed() }
    }

    /// Each fitted constant's uncertainty: the data's Fisher information along it (the squared
    /// sensitivities of the residuals' logs to the constant's log, over the noise², from a
    /// central difference of 0.1) plus the prior's; the constant is determined by the data when
    /// their information exceeds the prior's.
    fn estimates(
        &self,
        subset: &[usize],
        params: &[FitParam],
        prior: &[f64],
        x: &[f64],
        (lo, hi): (&[f64], &[f64]),
    ) -> Vec<ParamEstimate> {
        let h = 0.1;
        let logs = |x: &[f64]| -> Vec<f64> {
            let values: Vec<(FitParam, f64)> = params.iter().zip(x).map(|(p, v)| (*p, v.exp())).collect();
            self.fitted_residuals(subset, &values)
                .iter()
                .map(|r| if r.simulated > 0.0 { (r.simulated / r.measured).ln() } else { -10.0 })
                .collect()
        };
        params
            .iter()
            .enumerate()
            .map(|(i, &param)| {
                let mut up = x.to_vec();
                let mut down = x.to_vec();
                up[i] = (x[i] + h).min(hi[i]);
                down[i] = (x[i] - h).max(lo[i]);
                let span = up[i] - down[i];
                let information = if span > 0.0 {
                    let (a, b) = (logs(&up), logs(&down));
                    a.iter().zip(&b).map(|(u, d)| ((u - d) / span).powi(2)).sum::<f64>() / MEASUREMENT_NOISE.powi(2)
                } else {
                    0.0
                };
                let prior_information = self.prior_weight / param.prior_sigma().powi(2);
                ParamEstimate {
                    param,
                    prior: prior[i].exp(),
                    value: x[i].exp(),
                    sigma_ln: 1.0 / (information + prior_information).max(1e-6).sqrt(),
                    determined: information > prior_information,
                }
            })
            .collect()
    }
}

/// `½ Σ ((x − prior) / σ)²` over the constants, in ln units.
fn prior_penalty(params: &[FitParam], prior: &[f64], x: &[f64]) -> f64 {
    params.iter().zip(prior.iter().zip(x)).map(|(p, (c, v))| ((v - c) / p.prior_sigma()).powi(2) / 2.0).sum()
}

/// A plain-text table of fitted constants: prior, estimate and its ×/÷ one-σ factor, and a
/// note on those the data did not determine.
pub fn estimates_table(estimates: &[ParamEstimate]) -> String {
    let mut out = String::new();
    for e in estimates {
        let note = if e.determined { "" } else { "  not determined by these runs: stays near the prior" };
        let _ = writeln!(
            out,
            "  {:<20} {:>10.4} -> {:>10.4}  x/÷ {:.2}{note}",
            e.param.name(),
            e.prior,
            e.value,
            e.sigma_ln.exp()
        );
    }
    out
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
mod band_tests;
#[cfg(test)]
mod fidelity_tests;
#[cfg(test)]
mod first_wave_tests;
#[cfg(test)]
mod metrics_tests;
#[cfg(test)]
mod network_tests;
#[cfg(test)]
mod public_models_tests;
#[cfg(test)]
mod split_tests;
#[cfg(test)]
mod tests;
