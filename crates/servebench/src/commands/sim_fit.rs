//! `servebench sim fit`: calibrate the simulator's stack constants to measured results (those
//! of the model fitted, when the results name models), write them as a profile, and say how
//! well they fit, in sample and held out.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use servebench_sim::Presets;
use servebench_sim::calibration::{self, Calibrator, FitParam, SearchOptions, validate};

use crate::cli::sim_args::SimFitArgs;
use crate::commands::inputs::{files_of, measured};
use crate::output::Sink;

/// `sim fit`: calibrate the stack constants to measured results, write the profile.
pub fn fit(args: SimFitArgs, out: &Sink) -> anyhow::Result<ExitCode> {
    let chosen: Vec<FitParam> = args.fit.iter().map(|p| calibration::parse_param(p)).collect::<Result<_, _>>()?;
    let mut points = Vec::new();
    for named in &args.results {
        let named = files_of(Path::new(named), measured, "measured results")?;
        for file in &named.files {
            // A result of the file that cannot be read is left out with its reason, as `sim
            // validate` leaves it out; a file named alone of which none can be read is an
            // error, one of a folder's is left out.
            let read = match calibration::read_file(file) {
                Ok(read) => read,
                Err(e) if named.folder => {
                    out.line(format!("Left out {e}"))?;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            for group in calibration::Skipped::grouped(&read.skipped) {
                out.line(format!("Left out {group}"))?;
            }
            points.extend(read.points);
        }
    }
    let mut deployment = args.deployment.clone();
    if deployment.model.is_none() && deployment.model_config.is_none() {
        deployment.model = Some(model_the_runs_name(&points, args.all_points)?);
    }
    let d = &deployment;
    let model = d.model_spec()?;
    // With --all-points every run resolves its own deployment from its labels, so the flags'
    // one need not fit (a model too big for one GPU without --tp, which would override the
    // runs' own tp); the first run's deployment then stands for the fit's hardware and stack.
    // So too where no parallelism is asked for and the model does not fit one GPU: the runs'
    // serve lines say theirs (a 355B model at `-tp 8` over Sparks).
    let own_layouts = d.tp.is_none() && d.pp.is_none() && d.nodes.is_none();
    let base = match (super::resolve::deployment_setup(d), args.all_points) {
        (Ok(setup), _) => Some(setup),
        (Err(_), true) => None,
        (Err(_), false) if own_layouts => None,
        (Err(e), false) => return Err(e),
    };
    let presets = Presets::load_default()?;
    if !args.all_points {
        let shape = match &base {
            Some(setup) => Some(setup.model.clone()),
            None => d.model.as_deref().and_then(|m| presets.model(m).ok()),
        };
        let names: Vec<&str> = d
            .model
            .as_deref()
            .into_iter()
            .chain(shape.iter().flat_map(|m| [m.id.as_str()].into_iter().chain(m.aliases.iter().map(String::as_str))))
            .collect();
        let total = points.len();
        let selection = calibration::select_model(points, &names)?;
        if selection.skipped() > 0 {
            out.line(format!(
                "Left out {} of {total} measured runs: {}. Add --all-points to fit them too.",
                selection.skipped(),
                selection.skipped_reasons()
            ))?;
        }
        points = selection.points;
    }
    // Each run on its own deployment: its labels (model, hw, tp, pp, dp and the serving flags of a
    // pasted `vllm serve` line) where the flags given here do not set the same option.
    let mut options = d.option_pairs()?;
    options.push(("jitter".into(), "0".into()));
    let defaults = validate::Defaults {
        model: Some(model.clone()),
        hardware: Some(d.hardware.clone()),
        options,
        profile: d.profile.as_ref().map(Into::into),
    };
    let (targets, skipped) = validate::targets_for(points, &defaults, &presets);
    for group in calibration::Skipped::grouped(&skipped) {
        out.line(format!("Left out {group}"))?;
    }
    if targets.is_empty() {
        anyhow::bail!("none of the measured runs maps to a simulated deployment (see the lines above)");
    }
    let setup = match base {
        Some(setup) => setup,
        None => targets[0].setup.clone(),
    };
    let params = if chosen.is_empty() { validate::joint_params(&targets) } else { chosen };
    if args.max_evals < params.len() + 2 {
        anyhow::bail!(
            "--max-evals {} is too few to fit {} constants; give at least {}",
            args.max_evals,
            params.len(),
            params.len() + 2
        );
    }
    let calibrator = Calibrator::new(targets)?;
    let models = models_of(&calibrator);
    let of_models = match models.as_slice() {
        [one] => one.clone(),
        many => format!("{} models ({})", many.len(), many.join(", ")),
    };
    out.line(format!(
        "Fitting {} to {} measured run(s) of {of_models} on {}...",
        params.iter().map(|p| p.name()).collect::<Vec<_>>().join(", "),
        calibrator.targets().len(),
        setup.hardware.name
    ))?;
    let all: Vec<usize> = (0..calibrator.targets().len()).collect();
    let search = SearchOptions { max_evals: args.max_evals, initial_step: 0.3, tolerance: 1e-4 };
    let holdout = match all.len() {
        _ if args.no_holdout => None,
        0 | 1 => None,
        n @ 2..=10 => Some((validate::Split::Folds(n), "leave one out")),
        _ => Some((validate::Split::Folds(5), "5 folds")),
    };
    // With held-out errors asked for, the validation's own fit on every run is the profile's:
    // the folds are fitted first, then the whole set once (not twice).
    let mut validation = holdout.as_ref().map(|(split, _)| {
        validate::validate(&calibrator, split, &params, search, &mut super::sim_validate::fit_progress(split))
    });
    let fitted = validation.as_mut().and_then(|v| Some((v.full_fit.take()?, std::mem::take(&mut v.in_sample))));
    let (result, in_sample) = fitted.unwrap_or_else(|| {
        let full = calibrator.fit(&all, &params, None, search);
        let in_sample = calibrator.residuals(&all, &full.values);
        (full, in_sample)
    });
    out.line(format!(
        "Loss (mean |ln(simulated/measured)|): {:.4} -> {:.4} after {} simulations of the set in {:.1} s.",
        result.loss_start,
        result.loss,
        result.evaluations,
        result.elapsed.as_secs_f64()
    ))?;
    out.line("Constants (prior -> fitted, x/÷ one σ):")?;
    out.out(&calibration::estimates_table(&result.estimates))?;
    out.out(&calibration::residual_table(&in_sample))?;
    let ins: Vec<&calibration::Residual> = in_sample.iter().collect();
    out.out(&validate::errors_table("In-sample errors:", &validate::by_metric(&ins)))?;
    // The profile's own prediction band: its held-out errors. A band the starting profile
    // carried described other constants and is dropped.
    let mut profile = result.profile.clone();
    profile.uncertainty = None;
    if let (Some(v), Some((_, what))) = (&validation, &holdout) {
        let held: Vec<&calibration::Residual> = v.held_out.iter().collect();
        out.out(&validate::errors_table(
            &format!("Held-out errors ({what}: each run predicted by a fit without it):"),
            &validate::by_metric(&held),
        ))?;
        profile.uncertainty = band_of_fit(&calibrator, &held, what);
        match &profile.uncertainty {
            Some(u) => out.line(format!(
                "Prediction band written with the profile (10th to 90th percentile of the held-out errors): \
                 TTFT {}, TPOT {}, output throughput {}.",
                percent_range(u.ttft),
                percent_range(u.tpot),
                percent_range(u.throughput)
            ))?,
            None => out.line(format!(
                "No prediction band written: it needs at least {} held-out errors of each of mean TTFT, mean \
                 TPOT and output throughput; predictions with the profile show the device's.",
                calibration::coverage::MIN_POINTS
            ))?,
        }
    }
    profile.jitter_sigma = setup.stack.jitter_sigma;
    profile.name = Some(match models.len() {
        1 => format!("{model}@{}", d.hardware),
        n => format!("{n} models@{}", d.hardware),
    });
    let header = format!(
        "# Stack constants fitted by `servebench sim fit` on {} run(s) of {of_models} on {} (loss {:.4}).\n\
         # Use with: servebench sim predict --model {} --hardware {} --profile PATH\n",
        all.len(),
        setup.hardware.name,
        result.loss,
        if models.len() == 1 { model.as_str() } else { "MODEL" },
        d.hardware
    );
    servebench_store::refuse_store_overwrite(Path::new(&args.out))?;
    std::fs::write(&args.out, header + &profile.to_toml())
        .with_context(|| format!("could not write the profile to {}", args.out))?;
    out.line(format!("Wrote the profile to {}", args.out))?;
    Ok(ExitCode::SUCCESS)
}

/// The model of the runs when `--model` is not given: the one their labels name, or with
/// `--all-points` the first of several (each run is still simulated as its own model).
fn model_the_runs_name(points: &[calibration::MeasuredPoint], all_points: bool) -> anyhow::Result<String> {
    let mut names: Vec<&str> = Vec::new();
    for name in points.iter().filter_map(calibration::MeasuredPoint::model) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    match names.as_slice() {
        [] => anyhow::bail!(
            "the results name no model: give the model to simulate with --model HF_ID (see `servebench sim presets`) \
             or --model-config config.json"
        ),
        [one] => Ok(one.to_string()),
        [first, ..] if all_points => Ok(first.to_string()),
        many => anyhow::bail!(
            "the results name {} models ({}): give --model to fit one of them, or --all-points to fit them jointly",
            many.len(),
            many.join(", ")
        ),
    }
}

/// The models the runs are simulated as, sorted, each once.
fn models_of(cal: &Calibrator) -> Vec<String> {
    let mut models: Vec<String> = cal.targets().iter().map(|t| t.setup.model.id.clone()).collect();
    models.sort();
    models.dedup();
    models
}

/// The band a fit's held-out errors give, for the deployments they were measured on (their
/// models and tensor-parallel sizes); `None` with too few errors.
fn band_of_fit(cal: &Calibrator, held: &[&calibration::Residual], how: &str) -> Option<servebench_sim::Uncertainty> {
    let [ttft, tpot, throughput] = calibration::coverage::band_from(held)?;
    let models = models_of(cal);
    let mut tp: Vec<u32> = cal.targets().iter().map(|t| t.setup.options.tp).collect();
    tp.sort_unstable();
    tp.dedup();
    let hardware = &cal.targets()[0].setup.hardware.name;
    Some(servebench_sim::Uncertainty {
        source: format!(
            "held-out errors of `sim fit` ({how}) on {} run(s) of {} on {hardware}",
            cal.targets().len(),
            models.join(", ")
        ),
        ttft,
        tpot,
        throughput,
        tp,
        models,
        elsewhere: None,
    })
}

/// `[lo, hi]` relative errors as "-12 % to +8 %".
fn percent_range([lo, hi]: [f64; 2]) -> String {
    format!("{:+.0} % to {:+.0} %", lo * 100.0, hi * 100.0)
}
