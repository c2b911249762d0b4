//! Validation: how well the simulator predicts measured runs, with the presets as they are or
//! held out.
//!
//! Each measured point is mapped to the deployment it ran on: the model from its `model` label
//! (else the default given), the hardware from its `hw`/`hardware`/`gpu` label (else the default),
//! the parallelism from its `tp`, `pp`, `dp` and `ep` labels, the serving options its labels
//! name (`max-num-batched-tokens`, `max-model-len`, ...: a pasted `vllm serve` line gives
//! them), and the options given on top, which win. A point
//! that cannot be mapped (no model named and none given, an unknown preset, a deployment that does
//! not fit, a request longer than the KV cache the deployment keeps) is skipped with the reason,
//! never guessed.
//!
//! Without a split every point is predicted with the presets (or the given profile), nothing
//! fitted: the error of a planner that has never seen the data. With a split the constants are
//! fitted on the other folds and each fold predicted (held out), and a fit on every point gives
//! the in-sample residuals beside them; or, split within deployments (`split::Split::FitOn`),
//! each deployment is fitted on some of its runs and predicts its others. The splits themselves
//! are [`super::split`]'s.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use servebench_core::vllm::SERVE_OPTION_LABELS;

use super::fidelity::percentile;
use super::points::{FitMetric, MeasuredPoint};
use super::{Calibrator, FitParam, FitResult, Residual, SearchOptions, Target, default_params};
use crate::error::SimError;
use crate::precision::Precision;
use crate::presets::Presets;
use crate::setup::SimSetup;

/// What a point takes where its labels are silent.
#[derive(Clone, Debug, Default)]
pub struct Defaults {
    pub model: Option<String>,
    pub hardware: Option<String>,
    /// `key=value` serving options applied to every point (after those of its labels).
    pub options: Vec<(String, String)>,
    pub profile: Option<std::path::PathBuf>,
}

pub use super::read::Skipped;
pub(super) use super::split::group_order;
use super::split::groups_of;
pub use super::split::{
    Fold, Split, Training, WORKLOAD_KEYS, fit_on_problem, folds, folds_of, group_count, group_of, key_value,
    keys_problem,
};

/// The label keys that name a point's hardware, in order of preference.
const HARDWARE_KEYS: [&str; 3] = ["hw", "hardware", "gpu"];
/// Labels that name the serving engine a row measured (InferenceX's `framework`).
const ENGINE_KEYS: [&str; 2] = ["framework", "engine"];
/// Labels of ways of serving a point cannot be predicted from, with why, where a row sets them to
/// anything but none or false (InferenceX's `spec-decoding` and `disagg`; `_` or `-`).
const UNMODELLED_KEYS: [(&str, &str); 2] = [
    (
        "spec-decoding",
        "speculative decoding without its draft tokens and acceptance, which the simulator needs (a serve line's \
         --speculative-config and a report's Speculative Decoding section give them)",
    ),
    ("disagg", "disaggregated prefill and decode, which the simulator does not model"),
];

/// Maps each point to its deployment; points that cannot be mapped are returned as skipped.
pub fn targets_for(points: Vec<MeasuredPoint>, d: &Defaults, presets: &Presets) -> (Vec<Target>, Vec<Skipped>) {
    let mut targets = Vec::new();
    let mut skipped = Vec::new();
    for mut point in points {
        let setup = deployment(&point, d, presets).map(|(setup, short)| {
            // Said beside the point's settings, where its predictions are read.
            point.labels.extend(short.map(|note| ("memory-plan".to_string(), note)));
            setup
        });
        match setup.and_then(|setup| fits(&point, setup)) {
            Ok(setup) => targets.push(Target { setup, point }),
            Err(reason) => skipped.push(Skipped { label: point.label.clone(), reason }),
        }
    }
    (targets, skipped)
}

/// The deployment a point measured, and, where the run's own `max-model-len` does not fit the
/// simulator's memory plan, what the plan is short of: the run started, so vLLM had that room;
/// the point is then predicted with the context the plan holds (its requests must still fit).
fn deployment(point: &MeasuredPoint, d: &Defaults, presets: &Presets) -> Result<(SimSetup, Option<String>), String> {
    let label = |k: &str| point.labels.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    if let Some(engine) = ENGINE_KEYS.iter().find_map(|k| label(k)).filter(|e| !e.trim().eq_ignore_ascii_case("vllm")) {
        return Err(format!(
            "it measured {engine}, not vLLM; the simulator prices vLLM's engine, so it is not predicted (leave \
             it out, or drop its framework to compare anyway)"
        ));
    }
    for (key, what) in UNMODELLED_KEYS {
        if let Some(v) = label(key)
            .or_else(|| label(&key.replace('-', "_")))
            .filter(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "none" | "false" | "0" | "off"))
        {
            return Err(format!("it ran {what} ({key} {v}), so it is not predicted (leave it out)"));
        }
    }
    // A point carries the deployment's settings; the simulator's own constants are given to
    // every point at once, and one among its labels would otherwise do nothing.
    let mut spelled = point.labels.iter().map(|(k, v)| (k, k.replace('_', "-"), v));
    if let Some((key, option, v)) = spelled.find(|(_, o, _)| crate::profile::is_option_key(o)) {
        return Err(format!(
            "it sets {key} {v}, one of the simulator's constants rather than a setting of the deployment it \
             measured, so it is not predicted: give it to every point with --option {option}={v} (or in a --profile)"
        ));
    }
    let model =
        label("model").or(d.model.as_deref()).ok_or("it names no model; give --model for results that do not say")?;
    let hardware = HARDWARE_KEYS
        .iter()
        .find_map(|k| label(k))
        .or(d.hardware.as_deref())
        .ok_or("it names no hardware; give --hardware for results that do not say")?;
    let hardware = device_of_series(hardware, presets)?;
    let mut options: Vec<(String, String)> = vec![("jitter".into(), "0".into())];
    let precision = match (label("precision"), presets.model(model)) {
        (Some(asked), Ok(preset)) => precision_option(asked, preset.precision)?,
        _ => None,
    };
    let release = super::table::release_named(&point.labels);
    let from_labels = parallelism(&label)?
        .into_iter()
        .chain(SERVE_OPTION_LABELS.iter().filter_map(|k| label(k).map(|v| (k.to_string(), v.to_string()))))
        .chain(precision.map(|p| ("precision".to_string(), p.to_string())))
        // The acceptance a speculative decoder measured, for the drafts its serve line gives.
        .chain(
            label("speculative-config")
                .and(label("spec-acceptance"))
                .map(|a| ("spec-acceptance".to_string(), a.to_string())),
        )
        .chain(release.map(|(major, minor)| ("vllm-release".to_string(), format!("{major}.{minor}"))));
    options.extend(from_labels.filter(|(key, _)| !d.options.iter().any(|(k, _)| k == key)));
    options.extend(d.options.iter().filter(|(k, _)| k != "jitter").cloned());
    let resolve =
        |options: &[(String, String)]| SimSetup::resolve_with(presets, model, hardware, options, d.profile.as_deref());
    let said = |e: SimError| format!("{model} on {hardware}: {e}");
    match resolve(&options) {
        Err(SimError::MaxModelLenTooLong { max_model_len, needed_gib, kv_gib, fit_tokens })
            if !d.options.iter().any(|(k, _)| k == "max-model-len") =>
        {
            options.retain(|(k, _)| k != "max-model-len");
            let note = format!(
                "short: the run's max-model-len {max_model_len} needs {needed_gib:.2} GiB of KV cache a GPU, the \
                 simulator's plan leaves {kv_gib:.2}; predicted with the {fit_tokens} tokens it holds"
            );
            resolve(&options).map(|setup| (setup, Some(note))).map_err(said)
        }
        resolved => resolved.map(|setup| (setup, None)).map_err(|e| said(e) + &spans_unsaid(&label)),
    }
}

/// What to add where a point counts its machines (`nodes`, from a caption such as `on 4x DGX
/// Spark`) but names no parallel size: which of tensor, pipeline or data parallelism spans
/// them is not guessed. Empty where a size is given.
fn spans_unsaid<'a>(label: &impl Fn(&str) -> Option<&'a str>) -> String {
    let sized = ["tp", "pp", "dp", "tp-nodes", "pp-nodes"].iter().any(|k| label(k).is_some());
    match label("nodes") {
        Some(n) if !sized => format!(
            " (its labels count {n} machines but not how the model spans them: say so where the run is \
             described, `{n} nodes (tp)` or `tp={n}`, or give --option tp=N to every point)"
        ),
        _ => String::new(),
    }
}

/// The weight format a row's `precision` label asks of its model preset: none where it names the
/// preset's own format or one of its kind (InferenceX writes `fp4` for gpt-oss's MXFP4 and for an
/// NVFP4 checkpoint alike), else the format it names (`fp4` for an FP8 preset: NVFP4).
fn precision_option(asked: &str, preset: Precision) -> Result<Option<&'static str>, String> {
    let kind = |p: Precision| match p {
        Precision::Bf16 | Precision::Fp16 => "16-bit",
        Precision::Fp8 => "8-bit",
        Precision::Nvfp4 | Precision::Mxfp4 => "4-bit float",
        Precision::AwqInt4 => "4-bit integer",
    };
    let named = Precision::parse(asked).ok_or_else(|| {
        let known: Vec<&str> = Precision::ALL.iter().map(|(_, n)| *n).collect();
        format!("its precision {asked:?} is no weight format the simulator knows ({}, or fp4)", known.join(", "))
    })?;
    Ok((kind(named) != kind(preset)).then(|| named.name()))
}

/// The device a hardware label names. InferenceX's dashboard keys a series by device and
/// engine, joined by `_` (`h200_vllm`, `b200_sglang`, `mi355x_mori-sglang_mtp`), and its runners
/// by machine and index (`b200-dgxc_03`, `mi300x-amds_1`); a machine is its device and a site
/// (`b200-dgxc`, `gb200-dgxc-slurm`): where the label is no preset itself but has such a `_`
/// part, the device is the longest part before a `-` of what precedes the first `_` that names
/// a preset (the presets know the usual machines as aliases, and a site they do not know names
/// its device the same way; a label without `_`, such as `--hardware`, is taken as it is), and
/// a series of an engine other than vLLM is refused (the simulator prices vLLM's engine).
fn device_of_series<'a>(label: &'a str, presets: &Presets) -> Result<&'a str, String> {
    let known = |name: &str| presets.hardware(name).is_ok();
    let Some((machine, engine)) = label.split_once('_').filter(|_| !known(label)) else { return Ok(label) };
    let sites = machine.match_indices('-').rev().map(|(i, _)| &machine[..i]);
    let Some(device) = std::iter::once(machine).chain(sites).find(|d| known(d)) else { return Ok(label) };
    let runner_index = engine.bytes().all(|b| b.is_ascii_digit());
    if runner_index || engine.trim().eq_ignore_ascii_case("vllm") {
        return Ok(device);
    }
    Err(format!(
        "its hardware label {label:?} names a series of {engine} on {device}; the simulator prices vLLM's \
         engine, so runs of another engine are not predicted (leave them out, or label them {device} to compare \
         anyway)"
    ))
}

/// `setup` if it can serve the point's longest request; otherwise why not: every request
/// longer than the KV cache fails in the simulator, which is not a prediction of the run.
fn fits(point: &MeasuredPoint, setup: SimSetup) -> Result<SimSetup, String> {
    let w = &point.workload;
    // A run too large to simulate (or with no request) is left out here, with its reason, not
    // when the whole set is prepared.
    let inputs = super::run::simulable(w)?;
    let longest = inputs.iter().zip(w.output.expand(w.num_prompts)).map(|(i, o)| u64::from(*i) + u64::from(o)).max();
    match longest {
        Some(len) if len > u64::from(setup.max_model_len) => Err(format!(
            "its longest request ({len} tokens) does not fit the {} tokens the KV cache of {} on {} holds in the \
             simulator's memory plan; the run it measured had more room (more memory, a smaller reserve or a \
             higher --gpu-memory-utilization): give that as an option, or leave the point out",
            setup.max_model_len, setup.model.id, setup.hardware.name
        )),
        _ => Ok(setup),
    }
}

/// A point's parallelism from its labels, as serving options. `tp`, `pp`, `dp`, `nodes`
/// and a layout over machines (`tp-nodes`, `pp-nodes`: a heading such as `4 nodes (tp)`) as
/// given;
/// `ep` is an expert-parallel size as InferenceX records it (above 1: experts spread over the
/// GPUs, vLLM's `--enable-expert-parallel`) or `true`/`false`; `dp_attention` (or
/// `dp-attention`) `true` means attention data-parallel over the `tp` GPUs, as vLLM serves it
/// with `--data-parallel-size N --tensor-parallel-size 1`.
fn parallelism<'a>(label: &impl Fn(&str) -> Option<&'a str>) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = ["tp", "pp", "dp", "nodes", "tp-nodes", "pp-nodes"]
        .iter()
        .filter_map(|k| label(k).map(|v| (k.to_string(), v.to_string())))
        .collect();
    if let Some(ep) = label("ep") {
        let on = match ep.trim().to_ascii_lowercase().as_str() {
            "true" => true,
            "false" => false,
            n => n.parse::<u32>().map_err(|_| format!("its ep label {ep:?} is neither a size nor true/false"))? > 1,
        };
        out.push(("enable-expert-parallel".into(), on.to_string()));
    }
    let dp_attention = label("dp_attention").or_else(|| label("dp-attention"));
    if dp_attention.is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        let tp = label("tp").unwrap_or("1").to_string();
        out.retain(|(k, _)| k != "tp" && k != "dp");
        out.push(("tp".into(), "1".into()));
        out.push(("dp".into(), tp));
    }
    Ok(out)
}

/// A fold's fit.
#[derive(Clone, Debug)]
pub struct FoldFit {
    pub name: String,
    pub fit: FitResult,
}

/// The outcome of a validation.
#[derive(Clone, Debug)]
pub struct Validation {
    /// Per point's metric: predicted by a fit that did not see it (or by the presets).
    pub held_out: Vec<Residual>,
    /// The group (fold) of each held-out residual's point.
    pub groups: Vec<String>,
    /// Residuals of one fit on every point (empty without a split); for a [`Split::FitOn`],
    /// of each deployment's fit on the runs it saw.
    pub in_sample: Vec<Residual>,
    pub folds: Vec<FoldFit>,
    /// The fit on every point, when there was a split other than [`Split::FitOn`].
    pub full_fit: Option<FitResult>,
}

/// The constants fitted when none are named: what each deployment's points can tell apart,
/// once each, and a collective's fixed part (`ar-fixed-us`) beside its steps where the runs
/// cross a link with message steps in groups of two or more sizes.
pub fn joint_params(targets: &[Target]) -> Vec<FitParam> {
    let mut params: Vec<FitParam> = Vec::new();
    let mut by_model: BTreeMap<String, Vec<MeasuredPoint>> = BTreeMap::new();
    for t in targets {
        by_model.entry(t.setup.model.id.clone()).or_default().push(t.point.clone());
    }
    for t in targets {
        if let Some(points) = by_model.remove(&t.setup.model.id) {
            for p in default_params(&t.setup, &points) {
                if !params.contains(&p) {
                    params.push(p);
                }
            }
        }
    }
    // Runs over two or more group sizes on a link with message steps (four Sparks and eight)
    // tell a collective's fixed part from its steps: fit both, the fixed part beside the steps.
    let mut sizes: Vec<u32> =
        targets.iter().filter(|t| super::all_reduce_has_steps(&t.setup)).map(|t| t.setup.options.tp).collect();
    sizes.sort_unstable();
    sizes.dedup();
    if let Some(at) = params.iter().position(|p| *p == FitParam::ArStep).filter(|_| sizes.len() >= 2) {
        params.insert(at + 1, FitParam::ArFixed);
    }
    params
}

/// Runs the validation of `cal`'s targets, fitting `params` in each fit (none: every point
/// predicted as it is, nothing fitted; but a [`Split::FitOn`] without named constants fits in
/// each deployment what its runs can tell apart, as `sim fit` on them would). `on_fit` hears of
/// each fit as it ends (a fit takes seconds to minutes): the held-out group's name (a
/// [`Split::FitOn`]'s deployment) and the runs it was fitted on, `None` for the one fit on
/// every run.
pub fn validate(
    cal: &Calibrator,
    split: &Split,
    params: &[FitParam],
    search: SearchOptions,
    on_fit: &mut dyn FnMut(Option<&str>, usize, &FitResult),
) -> Validation {
    let n = cal.targets().len();
    let all: Vec<usize> = (0..n).collect();
    // Each deployment of a `FitOn` split has its own fit, and its in-sample residuals are those
    // of the runs that fit saw; other splits fit every run once more for them.
    let per_deployment = split.within_deployments();
    if *split == Split::None || (params.is_empty() && !per_deployment) {
        let points: Vec<&MeasuredPoint> = cal.targets().iter().map(|t| &t.point).collect();
        let groups = groups_of(&points, split);
        let held_out = cal.residuals(&all, &[]);
        let groups = held_out.iter().map(|r| groups[r.point].clone()).collect();
        return Validation { held_out, groups, in_sample: Vec::new(), folds: Vec::new(), full_fit: None };
    }
    let mut held_out = Vec::new();
    let mut residual_groups = Vec::new();
    let mut in_sample = Vec::new();
    let mut folds = Vec::new();
    for fold in super::split::folds(cal, split).into_iter().filter(|f| !f.fit_on.is_empty()) {
        let own: Vec<FitParam>;
        let fitted = if params.is_empty() {
            let targets: Vec<Target> = fold.fit_on.iter().map(|&i| cal.targets()[i].clone()).collect();
            own = joint_params(&targets);
            &own
        } else {
            params
        };
        let fit = cal.fit(&fold.fit_on, fitted, None, search);
        on_fit(Some(&fold.name), fold.fit_on.len(), &fit);
        for r in cal.residuals(&fold.predict, &fit.values) {
            residual_groups.push(fold.name.clone());
            held_out.push(r);
        }
        if per_deployment {
            in_sample.extend(cal.residuals(&fold.fit_on, &fit.values));
        }
        folds.push(FoldFit { name: fold.name, fit });
    }
    if per_deployment {
        return Validation { held_out, groups: residual_groups, in_sample, folds, full_fit: None };
    }
    let full = cal.fit(&all, params, None, search);
    on_fit(None, all.len(), &full);
    let in_sample = cal.residuals(&all, &full.values);
    Validation { held_out, groups: residual_groups, in_sample, folds, full_fit: Some(full) }
}

/// Median and P90 of the absolute errors and the median signed error (bias), as fractions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Errors {
    pub n: usize,
    pub median: f64,
    pub p90: f64,
    pub bias: f64,
}

impl Errors {
    pub fn of<'a>(residuals: impl IntoIterator<Item = &'a Residual>) -> Errors {
        let (mut abs, mut signed): (Vec<f64>, Vec<f64>) = residuals.into_iter().map(|r| (r.ape(), r.error())).unzip();
        abs.sort_by(f64::total_cmp);
        signed.sort_by(f64::total_cmp);
        Errors {
            n: abs.len(),
            median: percentile(&abs, 50.0),
            p90: percentile(&abs, 90.0),
            bias: percentile(&signed, 50.0),
        }
    }
}

/// Errors per metric measured ([`FitMetric::REPORTED`]) and over the headline metrics
/// ([`FitMetric::ALL`], the row "all", where there are any) of a set of residuals.
pub fn by_metric(residuals: &[&Residual]) -> Vec<(String, Errors)> {
    let mut rows: Vec<(String, Errors)> = FitMetric::REPORTED
        .iter()
        .map(|m| (m.name().to_string(), Errors::of(residuals.iter().copied().filter(|r| r.metric == *m))))
        .filter(|(_, e)| e.n > 0)
        .collect();
    let all = Errors::of(residuals.iter().copied().filter(|r| FitMetric::ALL.contains(&r.metric)));
    // Points that measured only medians have no headline figure to sum up.
    if all.n > 0 {
        rows.push(("all".into(), all));
    }
    rows
}

impl Validation {
    /// The held-out residuals of each group, the groups in order.
    pub fn groups(&self) -> Vec<(String, Vec<&Residual>)> {
        let mut names: Vec<&String> = self.groups.iter().collect();
        names.sort_by(|a, b| group_order(a, b));
        names.dedup();
        names
            .into_iter()
            .map(|g| {
                let rs = self.held_out.iter().zip(&self.groups).filter(|(_, name)| *name == g).map(|(r, _)| r);
                (g.clone(), rs.collect())
            })
            .collect()
    }

    /// Held-out errors per group and metric.
    pub fn by_group(&self) -> Vec<(String, Vec<(String, Errors)>)> {
        self.groups().into_iter().map(|(g, rs)| (g, by_metric(&rs))).collect()
    }

    /// Groups the held-out residuals by the values of label `keys` instead of the split's
    /// groups, for the summary by group (`sim validate --by hw`); the fits are unchanged.
    pub fn regroup(&mut self, cal: &Calibrator, keys: &[String]) {
        self.groups = self.held_out.iter().map(|r| group_of(&cal.targets()[r.point].point, keys)).collect();
    }

    /// The largest held-out median error over the metrics, as a fraction.
    pub fn worst_median(&self) -> f64 {
        let rs: Vec<&Residual> = self.held_out.iter().collect();
        by_metric(&rs).iter().filter(|(m, _)| m != "all").map(|(_, e)| e.median).fold(0.0, f64::max)
    }
}

/// A plain-text table of errors: one row per metric.
pub fn errors_table(title: &str, rows: &[(String, Errors)]) -> String {
    let mut out = format!("{title}\n{:<16} {:>5} {:>9} {:>9} {:>9}\n", "metric", "n", "median", "P90", "bias");
    for (metric, e) in rows {
        out.push_str(&format!(
            "{metric:<16} {:>5} {:>8.1}% {:>8.1}% {:>+8.1}%\n",
            e.n,
            e.median * 100.0,
            e.p90 * 100.0,
            e.bias * 100.0
        ));
    }
    out
}

/// Reads measured points from files, skipping (with the reason) files that cannot be read and
/// the results within a file that cannot ([`super::read_file`]).
pub fn read_all(paths: &[&Path]) -> (Vec<MeasuredPoint>, Vec<Skipped>) {
    let mut points = Vec::new();
    let mut skipped = Vec::new();
    for path in paths {
        match super::read_file(path) {
            Ok(read) => {
                points.extend(read.points);
                skipped.extend(read.skipped);
            }
            // The label names the file; the error's own message says the rest.
            Err(super::CalibrationError::Input { message, .. }) => {
                skipped.push(Skipped { label: path.display().to_string(), reason: message })
            }
            Err(e) => skipped.push(Skipped { label: path.display().to_string(), reason: e.to_string() }),
        }
    }
    (points, skipped)
}
