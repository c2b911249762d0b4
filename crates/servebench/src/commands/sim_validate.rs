//! `servebench sim validate`: the simulator's errors on measured results, with the presets as
//! they are or held out (fit on some groups, predict the others), as a table or JSON.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use servebench_sim::Presets;
use servebench_sim::calibration::validate::{self, Defaults, Split, Validation};
use servebench_sim::calibration::{
    Calibrator, FitMetric, FitParam, FitResult, MeasuredPoint, Residual, SearchOptions, estimates_table, parse_param,
    residual_table,
};
use servebench_sim::calibration::{coverage, first_wave};

use crate::cli::sim_args::SimValidateArgs;
use crate::commands::inputs::{files_of, measured};

/// Runs the validation and writes its report to `out`.
pub fn run(args: &SimValidateArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    // A gate no error can exceed (NaN) or every error exceeds (below 0) checks nothing.
    if let Some(limit) = args.fail_above.filter(|l| !(l.is_finite() && *l >= 0.0)) {
        anyhow::bail!("--fail-above takes a percentage of 0 or more, got {limit}");
    }
    let chosen: Vec<FitParam> = args.fit.iter().map(|p| parse_param(p)).collect::<Result<_, _>>()?;
    let options = crate::cli::resolve::parse_kv_list(&args.options, "--option")?;
    let defaults = Defaults {
        model: args.model.clone(),
        hardware: args.hardware.clone(),
        options,
        profile: args.profile.as_ref().map(Into::into),
    };
    let mut paths = Vec::new();
    for named in &args.results {
        paths.extend(files_of(Path::new(named), measured, "measured results")?.files);
    }
    let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let (mut points, mut skipped) = validate::read_all(&paths);
    if !args.runs.is_empty() {
        let store = servebench_store::Store::open(&args.db.path()?)?;
        for id in store.resolve_all(&args.runs)? {
            let run = store.get_without_records(&servebench_store::RunRef::Id(id))?;
            match point_of_run(&run) {
                Ok(p) => points.push(p),
                Err(reason) => skipped.push(validate::Skipped { label: format!("run {id}"), reason }),
            }
        }
    }
    let (targets, unmapped) = validate::targets_for(points, &defaults, &Presets::load_default()?);
    skipped.extend(unmapped);
    let split = if let Some(k) = args.folds {
        Split::Folds(k as usize)
    } else if let Some(spec) = &args.fit_on {
        Split::fit_on(spec, &args.per).map_err(anyhow::Error::msg)?
    } else if !args.leave_out.is_empty() {
        Split::LeaveOut(args.leave_out.clone())
    } else {
        Split::None
    };
    let mapped: Vec<&MeasuredPoint> = targets.iter().map(|t| &t.point).collect();
    // Each fold is predicted by a fit on the others: more folds than results leaves folds
    // empty, and one result leaves nothing to fit on (a --fail-above gate would pass on nothing).
    if let Split::Folds(k) = split
        && !targets.is_empty()
        && k > mapped.len()
    {
        anyhow::bail!(
            "--folds {k} asks for more folds than the {} result(s) mapped; give --folds {} or fewer{}",
            mapped.len(),
            mapped.len().max(2),
            if mapped.len() < 2 { ", with two results or more" } else { "" }
        );
    }
    // A deployment with no run at the loads the fits take is named, not predicted.
    if let Split::FitOn { key, .. } = &split {
        for fold in validate::folds_of(&mapped, &split).into_iter().filter(|f| f.fit_on.is_empty()) {
            skipped.push(validate::Skipped {
                label: format!("{} ({} run(s))", fold.name, fold.predict.len()),
                reason: format!("none of its runs has the {key} the fits take (--fit-on), so it is not predicted"),
            });
        }
    }
    // With --json the skipped results are in the document (its "skipped"), which stays the
    // whole of the output; without a document to hold them, they are printed as lines.
    if !args.json || targets.is_empty() {
        for group in validate::Skipped::grouped(&skipped) {
            writeln!(out, "Skipped {group}")?;
        }
    }
    if targets.is_empty() {
        anyhow::bail!("no measured result could be mapped to a simulated deployment (see the lines above)");
    }
    let problem = match &split {
        Split::LeaveOut(keys) => validate::keys_problem(&mapped, keys, "--leave-out"),
        Split::FitOn { key, per, .. } => validate::keys_problem(&mapped, std::slice::from_ref(key), "--fit-on")
            .or_else(|| validate::keys_problem(&mapped, per, "--per"))
            .or_else(|| validate::fit_on_problem(&mapped, &split)),
        _ => None,
    };
    if let Some(problem) = problem.or_else(|| validate::keys_problem(&mapped, &args.by, "--by")) {
        anyhow::bail!(problem);
    }
    // A split within deployments fits in each what its runs can tell apart, unless told.
    let params = if split == Split::None || (chosen.is_empty() && split.within_deployments()) {
        Vec::new()
    } else if chosen.is_empty() {
        validate::joint_params(&targets)
    } else {
        chosen
    };
    let calibrator = Calibrator::new(targets)?;
    let clock = Instant::now();
    let search = SearchOptions { max_evals: args.max_evals.max(params.len() + 2), initial_step: 0.3, tolerance: 1e-4 };
    if !params.is_empty() || split.within_deployments() {
        // Each fit simulates the whole set up to `max_evals` times: say what is coming.
        let groups = validate::group_count(&calibrator, &split);
        let names: Vec<String> = params.iter().map(|p| p.name()).collect();
        let constants = match names.len() {
            0 => "what each deployment's runs can tell apart".to_string(),
            1 => format!("1 constant ({})", names[0]),
            n => format!("{n} constants ({})", names.join(", ")),
        };
        let times = match &split {
            Split::FitOn { .. } => format!("{groups} times: once per deployment, on its runs that --fit-on names"),
            _ => format!(
                "{} times: once per held-out group, then once on all {} results",
                groups + 1,
                calibrator.targets().len()
            ),
        };
        crate::output::note(format_args!(
            "Fitting {constants} {times}; up to {} simulations of the set each (--max-evals). With many \
             results this takes minutes.",
            search.max_evals
        ));
    }
    let mut v = validate::validate(&calibrator, &split, &params, search, &mut fit_progress(&split));
    let took = clock.elapsed().as_secs_f64();
    let by = if args.by.is_empty() && split == Split::None && several_devices(&calibrator) {
        vec!["hw".to_string()]
    } else {
        args.by.clone()
    };
    if !by.is_empty() {
        v.regroup(&calibrator, &by);
    }
    if args.json {
        let doc = json(&calibrator, &v, &skipped, &split, args.profile.as_deref());
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        print_text(out, &calibrator, &v, &split, &params, took, args)?;
    }
    if let Some(limit) = args.fail_above {
        let worst = v.worst_median() * 100.0;
        if worst > limit {
            writeln!(out, "FAIL: a median error of {worst:.1}% is above --fail-above {limit}%")?;
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A line on stderr as each fit of a validation ends, with the time it took, so that a
/// validation of many results that takes minutes says how far it is.
pub(crate) fn fit_progress(split: &Split) -> impl FnMut(Option<&str>, usize, &FitResult) {
    let per_deployment = split.within_deployments();
    move |group, runs, fit| {
        let what = match group {
            Some(deployment) if per_deployment => deployment.to_string(),
            Some(group) => format!("Without {group}"),
            None => "On every run".to_string(),
        };
        crate::output::note(format_args!(
            "  {what}: fitted on {runs} run(s) in {:.1} s (loss {:.4}).",
            fit.elapsed.as_secs_f64(),
            fit.loss
        ));
    }
}

/// Whether the results name more than one device in their `hw` labels.
fn several_devices(cal: &Calibrator) -> bool {
    let hw = ["hw".to_string()];
    let mut names: Vec<String> = cal.targets().iter().map(|t| validate::group_of(&t.point, &hw)).collect();
    names.sort();
    names.dedup();
    names.len() > 1
}

/// A measured run of the store as a point: its workload rebuilt from its totals, its labels and
/// model as the point's labels. Predictions are not measurements and are refused.
fn point_of_run(run: &servebench_store::StoredRun) -> Result<MeasuredPoint, String> {
    if run.row.kind == servebench_store::RunKind::Predict {
        return Err("it is a prediction, not a measurement".into());
    }
    // A bench run against the built-in simulator (`--sim MODEL@HARDWARE`) is one too.
    if let Some(sim) = run.row.simulated() {
        return Err(format!("it ran against the simulator ({sim}), so it is a prediction, not a measurement"));
    }
    let mut p = MeasuredPoint::from_summary(format!("run {}", run.row.id), Vec::new(), &run.summary)?;
    if let Some(model) = &run.row.model {
        p.labels.push(("model".into(), model.clone()));
    }
    for (k, v) in &run.row.labels {
        if k != "model" {
            p.labels.push((k.clone(), v.clone()));
        }
    }
    Ok(p)
}

/// Writes the validation as text: every point with `--points`, and headings that name what the
/// predictions started from (the presets, or the `--profile` given).
fn print_text(
    out: &mut dyn Write,
    cal: &Calibrator,
    v: &Validation,
    split: &Split,
    params: &[FitParam],
    took: f64,
    args: &SimValidateArgs,
) -> anyhow::Result<()> {
    let (show_points, profile) = (args.points, args.profile.as_deref());
    let points = cal.targets().len();
    let how = match (split, profile) {
        (Split::None, None) => "predicted with the presets, nothing fitted".to_string(),
        (Split::None, Some(p)) => format!("predicted with the profile {p}, nothing fitted here"),
        (Split::LeaveOut(keys), _) => format!("held out by {}: fitted on the other groups", keys.join(",")),
        (Split::Folds(k), _) => format!("held out in {k} folds: fitted on the other folds"),
        (Split::FitOn { key, on, per }, _) => format!(
            "held out within each deployment{}: fitted on its runs at {}, predicting its others",
            if per.is_empty() { String::new() } else { format!(" (by {})", per.join(",")) },
            match on {
                validate::Training::Ends => format!("its lowest and highest {key}"),
                validate::Training::Values(v) => format!("{key} {}", v.join(", ")),
            }
        ),
    };
    writeln!(out, "Validated {points} measured run(s), {how} ({took:.1} s).")?;
    if !params.is_empty() {
        let names: Vec<String> = params.iter().map(|p| p.name()).collect();
        writeln!(out, "Fitted constants: {}", names.join(", "))?;
    } else if split.within_deployments() {
        writeln!(out, "Fitted constants, each deployment's own:")?;
        for fold in &v.folds {
            let names: Vec<String> = fold.fit.estimates.iter().map(|e| e.param.name()).collect();
            writeln!(out, "  {}: {}", fold.name, names.join(", "))?;
        }
    }
    if show_points {
        writeln!(out)?;
        write!(out, "{}", residual_table(&v.held_out))?;
    }
    let held: Vec<&Residual> = v.held_out.iter().collect();
    let title = match (split, profile) {
        (Split::None, None) => "Errors (presets, no fit):",
        (Split::None, Some(_)) => "Errors (the profile, no fit here):",
        _ => "Held-out errors:",
    };
    writeln!(out)?;
    write!(out, "{}", validate::errors_table(title, &validate::by_metric(&held)))?;
    let waves = first_wave::table(&first_wave::first_waves(cal, &held));
    if !waves.is_empty() {
        write!(out, "\n{waves}")?;
    }
    // The band `sim predict` prints with each of these predictions: does it hold what it says?
    writeln!(out)?;
    write!(out, "{}", coverage::table(&coverage::by_metric(cal, &held)))?;
    if !v.in_sample.is_empty() {
        let ins: Vec<&Residual> = v.in_sample.iter().collect();
        writeln!(out)?;
        write!(
            out,
            "{}",
            validate::errors_table(
                if split.within_deployments() {
                    "In-sample errors (each deployment's fit on the runs it saw):"
                } else {
                    "In-sample errors (one fit on every run):"
                },
                &validate::by_metric(&ins)
            )
        )?;
    }
    // One pass over the groups: each one's errors per metric and its share in band (the
    // coverage's last row, "all").
    let groups: Vec<_> = v
        .groups()
        .into_iter()
        .map(|(g, rs)| {
            let inside = coverage::by_metric(cal, &rs).last().map(|(_, c)| c.share());
            (g, validate::by_metric(&rs), inside)
        })
        .collect();
    if groups.len() > 1 {
        let whose = if *split == Split::None { "Errors" } else { "Held-out errors" };
        // A column for each metric some group measured, in the summary's order.
        let columns: Vec<FitMetric> = FitMetric::REPORTED
            .into_iter()
            .filter(|m| groups.iter().any(|(_, rows, _)| rows.iter().any(|(name, _)| name == m.name())))
            .collect();
        let heads: Vec<&str> = columns.iter().map(|m| m.short_name()).collect();
        writeln!(out, "\n{whose} by group (median / P90 / bias of {}; share in band):", heads.join(", "))?;
        for (g, rows, inside) in groups {
            let cells: Vec<String> = columns
                .iter()
                .map(|m| {
                    let cell = rows.iter().find(|(name, _)| name == m.name()).map_or("-".to_string(), |(_, e)| {
                        format!("{:.0}/{:.0}/{:+.0}%", e.median * 100.0, e.p90 * 100.0, e.bias * 100.0)
                    });
                    format!(" {cell:>16}")
                })
                .collect();
            let inside = inside.map_or("-".to_string(), |x| format!("{:.0}%", x * 100.0));
            writeln!(out, "  {g:<28}{} {inside:>7}", cells.concat())?;
        }
    }
    if let Some(full) = &v.full_fit {
        writeln!(out, "\nOne fit on every run (prior -> estimate, x/÷ one σ):")?;
        write!(out, "{}", estimates_table(&full.estimates))?;
    }
    Ok(())
}

fn json(
    cal: &Calibrator,
    v: &Validation,
    skipped: &[validate::Skipped],
    split: &Split,
    profile: Option<&str>,
) -> serde_json::Value {
    let residual = |r: &Residual, group: &str| {
        let band = coverage::band_of(cal, r);
        serde_json::json!({
            "point": r.label, "labels": r.labels, "group": group, "metric": r.metric.key(),
            "measured": r.measured, "predicted": r.simulated, "error": r.error(),
            "band": band, "band_side": band.map(|b| coverage::side(r.error(), b)),
        })
    };
    let estimates = |f: &FitResult| -> Vec<serde_json::Value> {
        f.estimates
            .iter()
            .map(|e| {
                serde_json::json!({
                    "constant": e.param.name(), "prior": e.prior, "value": e.value, "sigma_ln": e.sigma_ln,
                    "determined": e.determined,
                })
            })
            .collect()
    };
    let held: Vec<&Residual> = v.held_out.iter().collect();
    let waves = first_wave::first_waves(cal, &held);
    let ins: Vec<&Residual> = v.in_sample.iter().collect();
    let table = |rows: Vec<(String, validate::Errors)>| -> serde_json::Value {
        rows.into_iter().map(|(m, e)| (m, serde_json::to_value(e).unwrap_or_default())).collect()
    };
    serde_json::json!({
        "split": format!("{split:?}"),
        "profile": profile,
        "skipped": skipped,
        "held_out": table(validate::by_metric(&held)),
        "in_sample": table(validate::by_metric(&ins)),
        "band_coverage": coverage_json(coverage::by_metric(cal, &held)),
        "first_waves": {
            "summary": first_wave::summary(&waves),
            "runs": waves,
        },
        "by_group": v.by_group().into_iter().map(|(g, rows)| (g, table(rows))).collect::<serde_json::Map<_, _>>(),
        "band_coverage_by_group": v
            .groups()
            .into_iter()
            .map(|(g, rs)| (g, coverage_json(coverage::by_metric(cal, &rs))))
            .collect::<serde_json::Map<_, _>>(),
        "fitted": v.full_fit.as_ref().map(estimates),
        // Each held-out group's (or deployment's) own fit.
        "fits": v.folds.iter().map(|f| serde_json::json!({
            "group": f.name, "loss": f.fit.loss, "fitted": estimates(&f.fit),
        })).collect::<Vec<_>>(),
        "points": v.held_out.iter().zip(&v.groups).map(|(r, g)| residual(r, g)).collect::<Vec<_>>(),
    })
}

/// Band coverage per metric as a JSON object.
fn coverage_json(rows: Vec<(String, coverage::Coverage)>) -> serde_json::Value {
    rows.into_iter().map(|(m, c)| (m, serde_json::to_value(c).unwrap_or_default())).collect()
}
