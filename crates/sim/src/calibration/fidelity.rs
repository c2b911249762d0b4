//! The fidelity check: calibrate on some measured points of a reference report, predict the
//! others, and report the absolute percentage errors (APE) of mean TTFT, mean TPOT and output
//! throughput per held-out point as their median (MdAPE) and 90th percentile.
//!
//! The reference cases and why their deployments were chosen:
//!
//! - **000**, eleven small dense BF16 models on a 273 GB/s unified-memory box (`dgx-spark`),
//!   20 requests at concurrency 4: five platform constants (API delay, fixed step cost, cost
//!   per layer, bandwidth and prefill efficiencies) fitted on ten models, the eleventh
//!   predicted, for each model in turn (leave one model out).
//! - **001**, one unnamed model on an older (V0) vLLM: read as Llama-3.1-8B with FP8 weights
//!   and FP8 KV cache on the same box (64 KiB of KV per token matches the decode slope of
//!   0.226 µs per context token), 512-token chunked prefill, 256 sequences, no prefix caching,
//!   CUDA graphs up to 256 tokens per step and 8192 tokens of context (beyond, steps run eager).
//!   Output lengths vary within a run (its duration puts the longest output at about 1.5 times
//!   the mean), so a multi-request run's outputs are spread evenly from 0.5 to 1.5 times its
//!   mean. Fitted on the six single-request runs and the saturated 2048-request run; every
//!   other sweep point is predicted.
//! - **003**, a 3000-request ShareGPT-like run of an unnamed deployment, read as Qwen3-8B on an
//!   L40S with 128 requests in flight (Little's law on the report) and the
//!   `--gpu-memory-utilization 0.8` of the reference set's command lines, which leaves the KV
//!   cache just short of the run's peak demand (its TTFT tail, P90 0.9 s against a 125 ms
//!   median, says admission stalled on KV blocks). Its length distributions are rebuilt from
//!   the report's means and latency percentiles. One point only: decode efficiency and
//!   per-sequence cost fitted on it, in sample (a consistency check of the batch, KV-capacity
//!   and prefill-interference model, not counted as held out).
//! - **004**, prefill and decode measured apart on a datacenter GPU, read as Qwen3-8B in FP8 on
//!   one H100 with `max-num-seqs` 16: the prefill efficiency fitted on the prefill run, the
//!   decode run predicted with the H100 priors.
//!
//! Every case runs with deterministic step times (no jitter), synchronous scheduling (the
//! reference set's servers ran on Ray's executor, which has no async scheduling) and the
//! built-in presets only.
//! 000 runs without CUDA graphs (`enforce-eager`), as its per-layer decode cost shows.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::points::{FitMetric, Lengths, MeasuredPoint, points_from_report};
use super::{CalibrationError, Calibrator, FitParam, FitResult, Residual, SearchOptions, Target};
use crate::precision::ComputePrecision;
use crate::presets::Presets;
use crate::setup::SimSetup;

/// The prior's weight in the fits of 001, 003 and 004: their stacks (an older vLLM, unknown
/// hardware read from the numbers) are not the presets', so the presets' values are a weak
/// guide there; 000's models and device are known and its fit keeps the full prior.
const UNLIKE_STACK_PRIOR: f64 = 0.05;

/// One fit and what it predicts.
#[derive(Clone, Debug)]
pub struct Fold {
    pub name: String,
    pub fit: Vec<usize>,
    pub held_out: Vec<usize>,
}

/// A reference report with its deployments, fitted constants and folds.
pub struct Case {
    pub id: String,
    /// How the points are split, in a sentence.
    pub procedure: String,
    pub calibrator: Calibrator,
    pub params: Vec<FitParam>,
    pub folds: Vec<Fold>,
    /// Whether the held-out points count toward the overall numbers (in-sample checks do not).
    pub held_out_counts: bool,
}

/// A fold's fit and its residuals.
#[derive(Clone, Debug)]
pub struct FoldOutcome {
    pub name: String,
    pub fit: FitResult,
    pub in_sample: Vec<Residual>,
    pub held_out: Vec<Residual>,
}

/// MdAPE and P90 APE over a set of residuals (fractions, 0.05 = 5 %).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorStats {
    pub n: usize,
    pub mdape: f64,
    pub p90: f64,
}

/// Error statistics overall and per metric.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsTable {
    pub all: ErrorStats,
    pub ttft: ErrorStats,
    pub tpot: ErrorStats,
    pub throughput: ErrorStats,
}

/// Linear-interpolated percentile (numpy's default) of sorted values.
pub(crate) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let pos = q / 100.0 * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

impl ErrorStats {
    pub fn of<'a>(residuals: impl IntoIterator<Item = &'a Residual>) -> ErrorStats {
        let mut apes: Vec<f64> = residuals.into_iter().map(Residual::ape).collect();
        apes.sort_by(f64::total_cmp);
        ErrorStats { n: apes.len(), mdape: percentile(&apes, 50.0), p90: percentile(&apes, 90.0) }
    }
}

impl StatsTable {
    pub fn of(residuals: &[&Residual]) -> StatsTable {
        let by = |m: FitMetric| ErrorStats::of(residuals.iter().copied().filter(move |r| r.metric == m));
        StatsTable {
            all: ErrorStats::of(residuals.iter().copied().filter(|r| FitMetric::ALL.contains(&r.metric))),
            ttft: by(FitMetric::MeanTtft),
            tpot: by(FitMetric::MeanTpot),
            throughput: by(FitMetric::OutputThroughput),
        }
    }

    /// `(label, stats)` rows in print order.
    pub fn rows(&self) -> [(&'static str, ErrorStats); 4] {
        [("mean TTFT", self.ttft), ("mean TPOT", self.tpot), ("output tok/s", self.throughput), ("all", self.all)]
    }
}

/// A case's outcome.
#[derive(Clone, Debug)]
pub struct CaseOutcome {
    pub id: String,
    pub procedure: String,
    pub folds: Vec<FoldOutcome>,
    pub held_out_counts: bool,
}

impl CaseOutcome {
    /// The residuals the case is judged on: held out, or in sample for in-sample checks.
    pub fn judged(&self) -> Vec<&Residual> {
        self.folds.iter().flat_map(|f| if self.held_out_counts { &f.held_out } else { &f.in_sample }).collect()
    }

    pub fn stats(&self) -> StatsTable {
        StatsTable::of(&self.judged())
    }
}

/// Runs every fold of `case`: fit (from `starts[fold]` when given, else the presets' priors),
/// then predict its held-out points.
pub fn evaluate(case: &Case, search: SearchOptions, starts: Option<&[Vec<f64>]>) -> CaseOutcome {
    let folds = case
        .folds
        .iter()
        .enumerate()
        .map(|(k, fold)| {
            let start = starts.and_then(|s| s.get(k)).map(Vec::as_slice);
            let fit = case.calibrator.fit(&fold.fit, &case.params, start, search);
            FoldOutcome {
                name: fold.name.clone(),
                in_sample: case.calibrator.residuals(&fold.fit, &fit.values),
                held_out: case.calibrator.residuals(&fold.held_out, &fit.values),
                fit,
            }
        })
        .collect();
    CaseOutcome { id: case.id.clone(), procedure: case.procedure.clone(), folds, held_out_counts: case.held_out_counts }
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn setup(model: &str, hardware: &str, options: &[(&str, &str)]) -> Result<SimSetup, CalibrationError> {
    // The reference set's servers ran on Ray's executor (`--distributed-executor-backend ray` in
    // the command lines its README quotes), which schedules synchronously: no step planned ahead.
    let mut all = pairs(&[("jitter", "0"), ("distributed-executor-backend", "ray")]);
    all.extend(pairs(options));
    Ok(SimSetup::resolve_with(&Presets::embedded()?, model, hardware, &all, None)?)
}

/// The reference case `id` (`000`, `001`, `003`, `004`) built on its report's text.
pub fn reference_case(id: &str, report: &str) -> Result<Case, CalibrationError> {
    let points = points_from_report(report, id)?;
    match id {
        "000" => case_000(points),
        "001" => case_001(points),
        "003" => case_003(points),
        "004" => case_004(points),
        other => Err(CalibrationError::Input {
            path: other.to_string(),
            message: "unknown reference case; known: 000, 001, 003, 004".into(),
        }),
    }
}

fn wrong_shape(id: &str, what: &str) -> CalibrationError {
    CalibrationError::Input { path: id.to_string(), message: what.to_string() }
}

fn case_000(points: Vec<MeasuredPoint>) -> Result<Case, CalibrationError> {
    let mut targets = Vec::new();
    for p in points {
        let model = p.model().ok_or_else(|| wrong_shape("000", "a block has no `Results MODEL` heading"))?.to_string();
        let mut point = p;
        point.label = model.clone();
        // Launch-bound decode (per-layer cost, no CUDA graphs) and a slow prefill.
        targets.push(Target { setup: setup(&model, "dgx-spark", &[("enforce-eager", "true")])?, point });
    }
    let folds = (0..targets.len())
        .map(|i| Fold {
            name: targets[i].point.label.clone(),
            fit: (0..targets.len()).filter(|&j| j != i).collect(),
            held_out: vec![i],
        })
        .collect();
    Ok(Case {
        id: "000".into(),
        procedure: "leave one model out: platform constants fitted on ten models, the eleventh predicted".into(),
        calibrator: Calibrator::new(targets)?,
        params: vec![
            FitParam::AlphaApi,
            FitParam::T0,
            FitParam::EagerLayer,
            FitParam::EtaBw,
            FitParam::GemmEff(ComputePrecision::Bf16),
        ],
        folds,
        held_out_counts: true,
    })
}

fn case_001(points: Vec<MeasuredPoint>) -> Result<Case, CalibrationError> {
    if points.len() != 23 {
        return Err(wrong_shape("001", "expected the 23 blocks of the prompt sweep"));
    }
    let s = setup(
        "meta-llama/Llama-3.1-8B-Instruct",
        "dgx-spark",
        &[
            ("precision", "fp8"),
            ("kv-cache-dtype", "fp8"),
            ("max-num-batched-tokens", "512"),
            ("max-num-seqs", "256"),
            ("enable-prefix-caching", "false"),
            ("graph-max-tokens", "256"),
            ("graph-max-ctx", "8192"),
            ("eager-layer-us", "550"),
        ],
    )?;
    let mut targets = Vec::new();
    for mut point in points {
        let w = &mut point.workload;
        if w.num_prompts > 1 {
            // Outputs vary per request: the durations put the longest at about 1.5x the mean.
            let total = w.output.mean(w.num_prompts) * w.num_prompts as f64;
            w.output = Lengths::Shape { total: total.round() as u64, quantiles: vec![(0.0, 0.5), (1.0, 1.5)] };
        }
        let w = &point.workload;
        point.label = format!(
            "n={} in={:.0} out={:.0}",
            w.num_prompts,
            w.input.mean(w.num_prompts),
            w.output.mean(w.num_prompts)
        );
        targets.push(Target { setup: s.clone(), point });
    }
    let most = targets.iter().map(|t| t.point.workload.num_prompts).max().unwrap_or(1);
    let (fit, held_out): (Vec<usize>, Vec<usize>) = (0..targets.len()).partition(|&i| {
        let n = targets[i].point.workload.num_prompts;
        n == 1 || n == most
    });
    Ok(Case {
        id: "001".into(),
        procedure: "fitted on the single-request runs and the saturated run, the other sweep points predicted".into(),
        calibrator: Calibrator::new(targets)?.with_prior_weight(UNLIKE_STACK_PRIOR),
        params: vec![
            FitParam::AlphaApi,
            FitParam::T0,
            FitParam::EtaBw,
            FitParam::GemmEff(ComputePrecision::Fp8),
            FitParam::AttnEff,
            FitParam::TSeq,
            FitParam::EagerLayer,
        ],
        folds: vec![Fold { name: "sweep".into(), fit, held_out }],
        held_out_counts: true,
    })
}

fn case_003(points: Vec<MeasuredPoint>) -> Result<Case, CalibrationError> {
    let [mut point] = <[MeasuredPoint; 1]>::try_from(points).map_err(|_| wrong_shape("003", "expected one block"))?;
    let w = &mut point.workload;
    let (input_total, output_total) = (w.input.mean(w.num_prompts), w.output.mean(w.num_prompts));
    let n = w.num_prompts as f64;
    // ShareGPT prompts: mostly short, a long tail to the dataset's 1024-token cut.
    w.input = Lengths::Shape {
        total: (input_total * n) as u64,
        quantiles: vec![(0.0, 4.0), (0.25, 30.0), (0.5, 90.0), (0.75, 280.0), (0.9, 620.0), (1.0, 1024.0)],
    };
    // Outputs from the E2E latency percentiles at the measured TPOT (P50 62 s, P75 69 s,
    // P90 71 s, P99 74 s at 67 ms per token), the lower half set by the 668-token mean.
    w.output = Lengths::Shape {
        total: (output_total * n) as u64,
        quantiles: vec![
            (0.0, 1.0),
            (0.25, 149.0),
            (0.5, 925.0),
            (0.75, 1025.0),
            (0.9, 1060.0),
            (0.99, 1100.0),
            (1.0, 1150.0),
        ],
    };
    w.max_concurrency = Some(128);
    point.label = "3000 ShareGPT-like requests, 128 in flight".into();
    let targets = vec![Target { setup: setup("Qwen/Qwen3-8B", "l40s", &[("gpu-memory-utilization", "0.8")])?, point }];
    Ok(Case {
        id: "003".into(),
        procedure: "one point: bandwidth efficiency and per-sequence cost fitted on it (in sample)".into(),
        calibrator: Calibrator::new(targets)?.with_prior_weight(UNLIKE_STACK_PRIOR),
        params: vec![FitParam::EtaBw, FitParam::TSeq],
        folds: vec![Fold { name: "in sample".into(), fit: vec![0], held_out: Vec::new() }],
        held_out_counts: false,
    })
}

fn case_004(points: Vec<MeasuredPoint>) -> Result<Case, CalibrationError> {
    if points.len() != 2 {
        return Err(wrong_shape("004", "expected a prefill block and a decode block"));
    }
    let s = setup("Qwen/Qwen3-8B", "h100-sxm", &[("precision", "fp8"), ("max-num-seqs", "16")])?;
    let names = ["prefill", "decode"];
    let targets = points
        .into_iter()
        .zip(names)
        .map(|(mut point, name)| {
            point.label = name.into();
            Target { setup: s.clone(), point }
        })
        .collect();
    Ok(Case {
        id: "004".into(),
        procedure: "prefill efficiency fitted on the prefill run, the decode run predicted".into(),
        calibrator: Calibrator::new(targets)?.with_prior_weight(UNLIKE_STACK_PRIOR),
        params: vec![FitParam::GemmEff(ComputePrecision::Fp8)],
        folds: vec![Fold { name: "prefill -> decode".into(), fit: vec![0], held_out: vec![1] }],
        held_out_counts: true,
    })
}

/// What a fidelity run recorded for one case.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CaseRecord {
    pub procedure: String,
    /// Whether the stats are held out (else in sample).
    pub held_out: bool,
    /// Fitted constants per fold, by option name.
    pub folds: Vec<FoldRecord>,
    pub stats: StatsTable,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FoldRecord {
    pub name: String,
    pub values: BTreeMap<String, f64>,
    pub fit_loss: f64,
}

/// The whole record: every case and the overall held-out numbers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FidelityRecord {
    pub note: String,
    pub cases: BTreeMap<String, CaseRecord>,
    pub overall: StatsTable,
}

impl CaseRecord {
    pub fn of(outcome: &CaseOutcome) -> CaseRecord {
        CaseRecord {
            procedure: outcome.procedure.clone(),
            held_out: outcome.held_out_counts,
            folds: outcome
                .folds
                .iter()
                .map(|f| FoldRecord {
                    name: f.name.clone(),
                    values: f.fit.values.iter().map(|(p, v)| (p.name(), *v)).collect(),
                    fit_loss: f.fit.loss,
                })
                .collect(),
            stats: outcome.stats(),
        }
    }

    /// The recorded constants of each fold, in `params` order, as fit starting points.
    pub fn starts(&self, params: &[FitParam]) -> Option<Vec<Vec<f64>>> {
        self.folds.iter().map(|f| params.iter().map(|p| f.values.get(&p.name()).copied()).collect()).collect()
    }
}

impl FidelityRecord {
    pub fn of(outcomes: &[CaseOutcome], note: &str) -> FidelityRecord {
        let overall: Vec<&Residual> = outcomes.iter().filter(|o| o.held_out_counts).flat_map(|o| o.judged()).collect();
        FidelityRecord {
            note: note.to_string(),
            cases: outcomes.iter().map(|o| (o.id.clone(), CaseRecord::of(o))).collect(),
            overall: StatsTable::of(&overall),
        }
    }

    /// The table: per case and overall, MdAPE and P90 per metric.
    pub fn table(&self) -> String {
        let mut out = format!("{:<10} {:<13} {:>4} {:>8} {:>8}\n", "file", "metric", "n", "MdAPE", "P90");
        let mut rows = |name: &str, t: &StatsTable| {
            for (label, s) in t.rows() {
                if s.n > 0 {
                    out.push_str(&format!(
                        "{name:<10} {label:<13} {:>4} {:>7.1}% {:>7.1}%\n",
                        s.n,
                        s.mdape * 100.0,
                        s.p90 * 100.0
                    ));
                }
            }
        };
        for (id, c) in &self.cases {
            let name = if c.held_out { id.clone() } else { format!("{id} (in)") };
            rows(&name, &c.stats);
        }
        rows("overall", &self.overall);
        out
    }
}
