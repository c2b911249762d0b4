//! `servebench sim fit` and `sim presets`: the simulator's calibration and presets.
//!
//! `fit` calibrates the stack constants to measured results (those of the model fitted, when
//! the results name models) and writes them as a profile.
//! `presets` lists what `--model` and `--hardware` accept.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use servebench_sim::calibration::{self, Calibrator, FitParam, SearchOptions, validate};
use servebench_sim::{KvDtype, Presets, SimSetup};

use crate::cli::sim_args::{SimFitArgs, SimPresetsArgs};
use crate::output;

/// `sim fit`: calibrate the stack constants to measured results, write the profile.
pub fn fit(args: SimFitArgs) -> anyhow::Result<ExitCode> {
    let chosen: Vec<FitParam> = args.fit.iter().map(|p| calibration::parse_param(p)).collect::<Result<_, _>>()?;
    let d = &args.deployment;
    let model = d.model_spec()?;
    let setup = SimSetup::resolve(&model, &d.hardware, &d.option_pairs()?, d.profile.as_deref().map(Path::new))?;
    let mut points = Vec::new();
    for file in &args.results {
        points.extend(calibration::read_points(Path::new(file))?);
    }
    if !args.all_points {
        let names: Vec<&str> = args.deployment.model.as_deref().into_iter().chain([setup.model.id.as_str()]).collect();
        let total = points.len();
        let selection = calibration::select_model(points, &names)?;
        if selection.skipped() > 0 {
            output::line(format!(
                "Left out {} of {total} measured runs: {}. Add --all-points to fit them too.",
                selection.skipped(),
                selection.skipped_reasons()
            ))?;
        }
        points = selection.points;
    }
    // Each run on its own deployment: its labels (model, hw, tp, pp, dp) over the flags'.
    let mut options = args.deployment.option_pairs()?;
    options.push(("jitter".into(), "0".into()));
    let defaults = validate::Defaults {
        model: Some(args.deployment.model_spec()?),
        hardware: Some(args.deployment.hardware.clone()),
        options,
        profile: args.deployment.profile.as_ref().map(Into::into),
    };
    let (targets, skipped) = validate::targets_for(points, &defaults, &Presets::load_default()?);
    for s in &skipped {
        output::line(format!("Left out {}: {}", s.label, s.reason))?;
    }
    if targets.is_empty() {
        anyhow::bail!("none of the measured runs maps to a simulated deployment (see the lines above)");
    }
    let params = if chosen.is_empty() { validate::joint_params(&targets) } else { chosen };
    if args.max_evals < params.len() + 2 {
        anyhow::bail!(
            "--max-evals {} is too few to fit {} constants; give at least {}",
            args.max_evals,
            params.len(),
            params.len() + 2
        );
    }
    output::line(format!(
        "Fitting {} to {} measured run(s) of {} on {}...",
        params.iter().map(|p| p.name()).collect::<Vec<_>>().join(", "),
        targets.len(),
        setup.model.id,
        setup.hardware.name
    ))?;
    let calibrator = Calibrator::new(targets)?;
    let all: Vec<usize> = (0..calibrator.targets().len()).collect();
    let clock = Instant::now();
    let search = SearchOptions { max_evals: args.max_evals, initial_step: 0.3, tolerance: 1e-4 };
    let result = calibrator.fit(&all, &params, None, search);
    let took = clock.elapsed();

    let mut profile = result.profile.clone();
    profile.jitter_sigma = setup.stack.jitter_sigma;
    profile.name = Some(format!("{model}@{}", d.hardware));
    let header = format!(
        "# Stack constants fitted by `servebench sim fit` on {} run(s) of {} on {} (loss {:.4}).\n\
         # Use with: servebench sim predict --model {} --hardware {} --profile PATH\n",
        all.len(),
        setup.model.id,
        setup.hardware.name,
        result.loss,
        model,
        d.hardware
    );
    std::fs::write(&args.out, header + &profile.to_toml())
        .with_context(|| format!("could not write the profile to {}", args.out))?;

    output::line(format!(
        "Loss (mean |ln(simulated/measured)|): {:.4} -> {:.4} after {} simulations of the set in {:.1} s.",
        result.loss_start,
        result.loss,
        result.evaluations,
        took.as_secs_f64()
    ))?;
    output::line("Constants (prior -> fitted, x/÷ one σ):")?;
    output::out(&calibration::estimates_table(&result.estimates))?;
    let in_sample = calibrator.residuals(&all, &result.values);
    output::out(&calibration::residual_table(&in_sample))?;
    let ins: Vec<&calibration::Residual> = in_sample.iter().collect();
    output::out(&validate::errors_table("In-sample errors:", &validate::by_metric(&ins)))?;
    if !args.no_holdout && all.len() >= 2 {
        let split = if all.len() <= 10 { validate::Split::Folds(all.len()) } else { validate::Split::Folds(5) };
        let what = if all.len() <= 10 { "leave one out" } else { "5 folds" };
        let v = validate::validate(&calibrator, &split, &params, search);
        let held: Vec<&calibration::Residual> = v.held_out.iter().collect();
        output::out(&validate::errors_table(
            &format!("Held-out errors ({what}: each run predicted by a fit without it):"),
            &validate::by_metric(&held),
        ))?;
    }
    output::line(format!("Wrote the profile to {}", args.out))?;
    Ok(ExitCode::SUCCESS)
}

/// `sim presets`: the hardware and model presets with their key numbers.
pub fn presets(args: SimPresetsArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let presets = Presets::load_default()?;
    let both = !args.hardware && !args.models;
    if args.hardware || both {
        writeln!(
            out,
            "Hardware ({}):\n{:<16} {:>8} {:>8} {:>7} {:>7} {:>7} {:>5}  description",
            presets.hardware_presets().len(),
            "name",
            "mem GiB",
            "GB/s",
            "BF16 TF",
            "FP8 TF",
            "FP4 TF",
            "GPUs",
        )?;
        for h in presets.hardware_presets() {
            let tf = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.0}"));
            writeln!(
                out,
                "{:<16} {:>8.1} {:>8.0} {:>7.0} {:>7} {:>7} {:>5}  {}",
                h.name,
                h.memory_gib,
                h.bandwidth_gbs,
                h.peak_tflops.bf16,
                tf(h.peak_tflops.fp8),
                tf(h.peak_tflops.fp4),
                h.gpus_per_node,
                h.description
            )?;
        }
    }
    if args.models || both {
        if both {
            writeln!(out)?;
        }
        writeln!(
            out,
            "Models ({}):\n{:<44} {:>9} {:>7} {:>7} {:>6} {:>8} {:>10} {:>9}",
            presets.model_presets().len(),
            "id",
            "params B",
            "active",
            "layers",
            "hidden",
            "weights",
            "KV KiB/tok",
            "context"
        )?;
        for m in presets.model_presets() {
            let kv = m.kv_bytes_per_token_layer(KvDtype::Auto, 1);
            let (sliding, window) = m.sliding_layers();
            let kv_text = if sliding > 0 {
                format!(
                    "{:.0} ({:.0}>{window})",
                    kv * f64::from(m.layers) / 1024.0,
                    kv * f64::from(m.full_attention_layers()) / 1024.0
                )
            } else {
                format!("{:.0}", kv * f64::from(m.layers) / 1024.0)
            };
            writeln!(
                out,
                "{:<44} {:>9.2} {:>7.2} {:>7} {:>6} {:>8} {:>10} {:>9}",
                m.id,
                m.total_params() / 1e9,
                m.active_params() / 1e9,
                m.layers,
                m.hidden,
                m.precision.name(),
                kv_text,
                m.max_context
            )?;
        }
        writeln!(out, "KV KiB/tok: BF16 cache, all layers (with sliding windows: the growth beyond the window).")?;
    }
    let dir = presets.user_dir().map(Path::to_path_buf).or_else(servebench_sim::presets::default_user_dir);
    match dir {
        Some(d) => writeln!(
            out,
            "\nUser presets are read from {} (hardware/*.toml, models/*.toml; set SERVEBENCH_PRESETS to move it){}.",
            d.display(),
            if d.is_dir() { "" } else { "; it does not exist yet" }
        )?,
        None => {
            writeln!(out, "\nUser presets: set SERVEBENCH_PRESETS to a folder with hardware/*.toml and models/*.toml.")?
        }
    }
    writeln!(out, "A model can also be given as the path of a Hugging Face config.json.")?;
    Ok(ExitCode::SUCCESS)
}
