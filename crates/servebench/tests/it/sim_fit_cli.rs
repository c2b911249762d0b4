//! `servebench sim fit`: the real binary fitting stack constants to reports, the profile it
//! writes, which measured runs it takes, and its errors.

use std::path::Path;

use clap::Parser;
use servebench::cli::{Cli, Command, SimCommand};
use servebench::commands;
use servebench::output::Sink;

use super::sim_cli::{fails, ok, predict_args, report_000, value};
use crate::common::read_json;

/// A console report of two runs on a small deployment, as vLLM prints them.
fn report_of(runs: &[(&str, String)]) -> String {
    runs.iter().map(|(heading, block)| format!("{heading}\n{block}\n")).collect()
}

/// The vLLM block `sim predict` printed.
fn block(out: &str) -> String {
    let start = out.find("============ Serving Benchmark Result").unwrap();
    let end = out[start..].find("==================================================\n").unwrap() + start + 51;
    out[start..end].to_string()
}

/// `sim fit` of Qwen3-0.6B on an L40S to `report`, writing `profile`, with `extra` flags.
fn fit_small(profile: &Path, report: &Path, extra: &[&str]) -> String {
    let mut argv = vec!["sim", "fit", "--model", "Qwen/Qwen3-0.6B", "--hardware", "l40s"];
    argv.extend_from_slice(extra);
    argv.extend(["--out", profile.to_str().unwrap(), report.to_str().unwrap()]);
    ok(&argv)
}

#[test]
fn sim_fit_writes_a_profile_that_predict_accepts() {
    let dir = tempfile::tempdir().unwrap();
    // "Measurements": predictions with constants the fit does not start from.
    let truth = ["--option", "alpha-api-ms=90", "--option", "t0-ms=6"];
    let measure = |prompts: &str, conc: &str| block(&ok(&predict_args(prompts, conc, &truth)));
    let report = report_of(&[("# one at a time", measure("8", "1")), ("# eight at a time", measure("32", "8"))]);
    let report_path = dir.path().join("measured.txt");
    std::fs::write(&report_path, report).unwrap();
    let profile = dir.path().join("fitted.toml");
    let out = fit_small(&profile, &report_path, &["--fit", "alpha-api-ms,t0-ms", "--max-evals", "60"]);
    assert!(out.contains("measured.txt #2") && out.contains("mean TPOT (ms)"), "{out}");
    assert!(out.contains("Wrote the profile to"), "{out}");
    let text = std::fs::read_to_string(&profile).unwrap();
    assert!(text.starts_with("# Stack constants fitted by `servebench sim fit`"), "{text}");
    let number = |key: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(&format!("{key} = "))).unwrap();
        line.split('=').nth(1).unwrap().trim().parse().unwrap()
    };
    assert!((number("alpha_api_ms") / 90.0 - 1.0).abs() < 0.1, "{text}");
    assert!((number("t0_ms") / 6.0 - 1.0).abs() < 0.2, "{text}");

    // The profile reproduces the measurement.
    // (In process: the command line's vLLM-compatibility check refuses `--profile`, vLLM's
    // torch-profiler flag, before any subcommand sees it.)
    let saved = dir.path().to_str().unwrap();
    let with_profile = predict_args(
        "32",
        "8",
        &[
            "--profile",
            profile.to_str().unwrap(),
            "--save-result",
            "--result-dir",
            saved,
            "--result-filename",
            "p.json",
        ],
    );
    let cli = Cli::try_parse_from(std::iter::once("servebench").chain(with_profile.iter().copied())).unwrap();
    let Command::Sim(SimCommand::Predict(args)) = cli.command else { panic!("not sim predict") };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let out = Sink::memory();
    runtime.block_on(commands::sim_predict::run(*args, &out)).unwrap();
    assert!(out.text().contains("Saved the result to"), "{}", out.text());
    let predicted = read_json(&dir.path().join("p.json"));
    let measured = measure("32", "8");
    for (key, label) in [("mean_ttft_ms", "Mean TTFT (ms):"), ("mean_tpot_ms", "Mean TPOT (ms):")] {
        let (p, m) = (predicted[key].as_f64().unwrap(), value(&measured, label));
        assert!((p / m - 1.0).abs() < 0.05, "{label} {p} vs {m}");
    }

    // Result JSON files are read too.
    let json_dir = dir.path().to_str().unwrap();
    ok(&predict_args("40", "4", &["--save-result", "--result-dir", json_dir, "--result-filename", "m.json"]));
    let out = fit_small(&profile, &dir.path().join("m.json"), &["--max-evals", "12"]);
    assert!(out.contains("m.json") && out.contains("Fitting alpha-api-ms, gemm-eff.bf16"), "{out}");
}

#[test]
fn sim_fit_fits_only_the_blocks_of_the_model_given() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("fitted.toml");
    let report = report_000();
    let fit = |model: &'static str, extra: &[&'static str]| -> Vec<String> {
        let mut args = vec!["sim", "fit", "--model", model, "--hardware", "dgx-spark", "--max-evals", "4"];
        args.extend(["--fit", "alpha-api-ms,t0-ms"]);
        args.extend(extra);
        let mut args: Vec<String> = args.into_iter().map(str::to_string).collect();
        args.extend(["--out".to_string(), profile.to_str().unwrap().to_string(), report.clone()]);
        args
    };
    let run = |args: &[String]| ok(&args.iter().map(String::as_str).collect::<Vec<_>>());

    let out = run(&fit("Qwen/Qwen3-8B", &[]));
    assert!(
        out.contains("Left out 10 of 11 measured runs: 10 of other models (Qwen/Qwen3-4B, Qwen/Qwen3-1.7B,"),
        "{out}"
    );
    assert!(out.contains("to 1 measured run(s) of Qwen/Qwen3-8B on"), "{out}");
    let rows: Vec<&str> = out.lines().filter(|l| l.starts_with("000-dense-models.txt #")).collect();
    // Mean TTFT, mean TPOT, output throughput and the median TTFT the fit matches too, and the
    // median TPOT it reports beside them without matching it.
    assert_eq!(rows.len(), 5, "{out}");
    assert!(rows.iter().any(|r| r.contains("median TTFT (ms)")), "{out}");
    assert!(rows.iter().any(|r| r.contains("median TPOT (ms)")), "{out}");
    for row in rows {
        assert!(row.starts_with("000-dense-models.txt #1 (line 3)") && row.ends_with("  model=Qwen/Qwen3-8B"), "{out}");
    }
    assert!(profile.exists());

    let out = run(&fit("Qwen/Qwen3-8B", &["--all-points"]));
    assert!(out.contains("to 11 measured run(s)") && !out.contains("Left out"), "{out}");
    assert!(out.contains("model=microsoft/Phi-4-mini-instruct"), "{out}");

    std::fs::remove_file(&profile).unwrap();
    let args = fit("meta-llama/Llama-3.1-8B-Instruct", &[]);
    let (_, err) = fails(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(err.contains("no measured point is of meta-llama/Llama-3.1-8B-Instruct"), "{err}");
    assert!(err.contains("the 11 point(s) given are of Qwen/Qwen3-8B, Qwen/Qwen3-4B,"), "{err}");
    assert!(err.contains("microsoft/Phi-4-mini-instruct") && err.contains("--model NAME"), "{err}");
    assert!(err.contains("add --all-points to fit them all anyway"), "{err}");
    assert!(!profile.exists());
}

/// Without `--model`, `sim fit` fits the model the runs name; several need `--model` or
/// `--all-points`, and runs that name none need `--model`.
#[test]
fn sim_fit_takes_the_model_the_runs_name_when_none_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("fitted.toml");
    let report = report_000();
    let out_path = profile.to_str().unwrap();
    let base = ["sim", "fit", "--hardware", "dgx-spark", "--max-evals", "4", "--fit", "t0-ms", "--out", out_path];
    let (_, err) = fails(&[&base[..], &[report.as_str()]].concat());
    assert!(err.contains("the results name 11 models (Qwen/Qwen3-8B, Qwen/Qwen3-4B,"), "{err}");
    assert!(err.contains("give --model to fit one of them, or --all-points"), "{err}");
    let out = ok(&[&base[..], &["--all-points", report.as_str()]].concat());
    // A joint fit says it is one: the runs' models, in its output and in the profile's header.
    assert!(out.contains("to 11 measured run(s) of 11 models (Qwen/Qwen3-0.6B, Qwen/Qwen3-1.7B,"), "{out}");
    let written = std::fs::read_to_string(&profile).unwrap();
    assert!(written.contains("on 11 run(s) of 11 models (") && written.contains("--model MODEL"), "{written}");
    assert!(written.contains("name = \"11 models@dgx-spark\""), "{written}");
    // One model named: fitted without --model.
    let one = dir.path().join("one.txt");
    let text = std::fs::read_to_string(&report).unwrap();
    let first_two_blocks: String = text.split("Results ").take(2).collect::<Vec<_>>().join("Results ");
    std::fs::write(&one, first_two_blocks).unwrap();
    let out = ok(&[&base[..], &[one.to_str().unwrap()]].concat());
    assert!(out.contains("to 1 measured run(s) of Qwen/Qwen3-8B on dgx-spark"), "{out}");
    // A folder stands for its files; one of them without results is left out, not an error
    // as it is when named alone.
    let folder = dir.path().join("results");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(&one, folder.join("one.txt")).unwrap();
    std::fs::write(folder.join("README.md"), "how these were run\n").unwrap();
    let out = ok(&[&base[..], &[folder.to_str().unwrap()]].concat());
    assert!(out.contains("to 1 measured run(s) of Qwen/Qwen3-8B on dgx-spark"), "{out}");
    assert!(out.contains("Left out ") && out.contains("README.md: no `Serving Benchmark Result` block"), "{out}");
    let (_, err) = fails(&[&base[..], &[folder.join("README.md").to_str().unwrap()]].concat());
    assert!(err.contains("README.md: no `Serving Benchmark Result` block"), "{err}");
    let bare = dir.path().join("bare.txt");
    let block = &text[text.find("============ Serving").unwrap()..];
    std::fs::write(&bare, &block[..block.find("Results ").unwrap_or(block.len())]).unwrap();
    let (_, err) = fails(&[&base[..], &[bare.to_str().unwrap()]].concat());
    assert!(err.contains("the results name no model: give the model to simulate with --model"), "{err}");
}

/// Each block runs on the deployment of the `vllm serve` line above it, so a model too big for
/// one GPU fits without a `--tp` (which would override the blocks' own): with `--all-points`
/// every block, without it the blocks of the model given. A `--tp` given must fit, and the
/// error says so.
#[test]
fn sim_fit_all_points_takes_each_block_s_deployment_from_its_serve_line() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("fitted.toml");
    let report = dir.path().join("reports.txt");
    let block = |n: u64| {
        let s = servebench_core::metrics::Summary {
            completed: n,
            duration_s: 10.0,
            total_input_tokens: 1024 * n,
            total_output_tokens: Some(64 * n),
            output_throughput: Some(6.4 * n as f64),
            ..Default::default()
        };
        servebench_core::vllm::render_result_block(&s)
    };
    std::fs::write(
        &report,
        format!(
            "vllm serve Qwen/Qwen3-235B-A22B -tp 8\n{}\nvllm serve Qwen/Qwen3-235B-A22B-FP8 -tp 4\n{}",
            block(8),
            block(4)
        ),
    )
    .unwrap();
    let args = |extra: &[&str]| {
        let mut a: Vec<String> = ["sim", "fit", "--model", "Qwen/Qwen3-235B-A22B", "--hardware", "h100-sxm"]
            .into_iter()
            .map(str::to_string)
            .collect();
        a.extend(["--fit", "moe-eff.bf16", "--max-evals", "4", "--out"].map(str::to_string));
        a.push(profile.to_str().unwrap().to_string());
        a.extend(extra.iter().map(|s| s.to_string()));
        a.push(report.to_str().unwrap().to_string());
        a
    };
    let all = args(&["--all-points"]);
    let out = ok(&all.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.contains("to 2 measured run(s)"), "{out}");
    assert!(out.contains("tp=8") && out.contains("tp=4"), "{out}");
    let own = args(&[]);
    let out = ok(&own.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.contains("Left out 1 of 2 measured runs") && out.contains("to 1 measured run(s)"), "{out}");
    assert!(out.contains("tp=8") && !out.contains("tp=4"), "{out}");
    let asked = args(&["--tp", "2"]);
    let (_, err) = fails(&asked.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(err.contains("does not fit on h100-sxm with tp=2") && err.contains("Use more GPUs"), "{err}");
}

/// Results that name a model by another of its ids (an alias of the preset) are fitted for it.
#[test]
fn sim_fit_takes_results_that_name_the_model_by_an_alias() {
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../sim/testdata/public/nvidia-forum-spark-qwen3-vl-32b-fp8.txt");
    let text = std::fs::read_to_string(fixture).unwrap();
    let renamed = text.replace("\nQwen/Qwen3-VL-32B-Instruct-FP8\n", "\nnvidia/Llama-3.3-70B-Instruct-FP4\n");
    assert_ne!(renamed, text);
    let report = dir.path().join("alias.txt");
    std::fs::write(&report, renamed).unwrap();
    let profile = dir.path().join("fitted.toml");
    let out = ok(&[
        "sim",
        "fit",
        "--model",
        "nvidia/Llama-3.3-70B-Instruct-NVFP4",
        "--hardware",
        "dgx-spark",
        "--fit",
        "t-layer-us",
        "--max-evals",
        "4",
        "--out",
        profile.to_str().unwrap(),
        report.to_str().unwrap(),
    ]);
    assert!(out.contains("to 1 measured run(s) of nvidia/Llama-3.3-70B-Instruct-NVFP4 on dgx-spark"), "{out}");
    assert!(out.contains("tp-nodes=4"), "{out}");
}

/// A fit on five runs writes its held-out errors into the profile as its prediction band, and
/// `sim predict` with that profile prints that band, not the device's: here the fit moves only
/// the API delay while the "measurements" had a slower step, so every held-out TPOT is short
/// and the TPOT band reaches only upwards.
#[test]
fn sim_fit_writes_its_held_out_band_and_predict_prints_it() {
    let dir = tempfile::tempdir().unwrap();
    let truth = ["--option", "alpha-api-ms=90", "--option", "t0-ms=6"];
    let measure = |prompts: &str, conc: &str| block(&ok(&predict_args(prompts, conc, &truth)));
    let loads = [("8", "1"), ("16", "2"), ("16", "4"), ("24", "6"), ("32", "8")];
    let runs: Vec<(String, String)> = loads.iter().map(|(n, c)| (format!("# {c} at a time"), measure(n, c))).collect();
    let runs: Vec<(&str, String)> = runs.iter().map(|(h, b)| (h.as_str(), b.clone())).collect();
    let report_path = dir.path().join("measured.txt");
    std::fs::write(&report_path, report_of(&runs)).unwrap();
    let profile = dir.path().join("fitted.toml");
    let argv: Vec<String> = ["sim", "fit", "--model", "Qwen/Qwen3-0.6B", "--hardware", "l40s"]
        .iter()
        .chain(&["--fit", "alpha-api-ms", "--max-evals", "10", "--out", profile.to_str().unwrap()])
        .chain(&[report_path.to_str().unwrap()])
        .map(|a| a.to_string())
        .collect();
    let run = crate::common::servebench_blocking(&argv);
    let (out, progress) = (crate::common::text(&run.stdout), crate::common::text(&run.stderr));
    assert!(run.status.success(), "{out}\n{progress}");
    assert!(out.contains("Prediction band written with the profile"), "{out}");
    // Each fit is said as it ends on stderr: the five folds, then the whole set, whose fit is
    // the profile's (its loss is the one printed).
    assert_eq!(progress.matches("  Without ").count(), 5, "{progress}");
    assert_eq!(progress.matches("  On every run: fitted on 5 run(s)").count(), 1, "{progress}");
    let whole = progress.lines().find(|l| l.contains("On every run")).unwrap();
    let loss = whole.rsplit("(loss ").next().unwrap().trim_end_matches(").");
    assert!(out.contains(&format!("-> {loss} after")), "{whole}\n{out}");
    let text = std::fs::read_to_string(&profile).unwrap();
    let mut back = servebench_sim::StackProfile::default();
    back.apply_file(&profile).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let band = back.uncertainty.clone().unwrap_or_else(|| panic!("no band in\n{text}"));
    assert!(band.source.contains("held-out errors of `sim fit` (leave one out) on 5 run(s)"), "{text}");
    assert_eq!(band.models, ["Qwen/Qwen3-0.6B"]);
    assert_eq!(band.tp, [1]);
    assert!(band.tpot[0] < -0.05 && band.tpot[1] == 0.0, "TPOT always short: {:?}", band.tpot);
    for [lo, hi] in [band.ttft, band.tpot, band.throughput] {
        assert!(lo <= 0.0 && 0.0 <= hi, "{text}");
    }

    // `sim predict --profile` prints the profile's band (in process: the command line's vLLM
    // check refuses `--profile`, vLLM's torch-profiler flag).
    // (Kept in a run store, where the report's charts read the band from.)
    let db = dir.path().join("runs.db");
    let mut args = predict_args("16", "4", &["--profile", profile.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    args.retain(|a| *a != "--no-store");
    let cli = Cli::try_parse_from(std::iter::once("servebench").chain(args.iter().copied())).unwrap();
    let Command::Sim(SimCommand::Predict(args)) = cli.command else { panic!("not sim predict") };
    let sink = Sink::memory();
    tokio::runtime::Runtime::new().unwrap().block_on(commands::sim_predict::run(*args, &sink)).unwrap();
    let printed = sink.text();
    assert!(printed.contains("held-out errors of `sim fit` (leave one out)"), "{printed}");
    let tpot = value(&printed, "Mean TPOT (ms):");
    let row = printed.lines().find(|l| l.trim_start().starts_with("Mean TPOT (ms)") && l.contains('[')).unwrap();
    let high: f64 = row.rsplit(".. ").next().unwrap().trim_end_matches(']').trim().parse().unwrap();
    assert!((high / (tpot / (1.0 + band.tpot[0])) - 1.0).abs() < 1e-3, "{row} against {:?}", band.tpot);
    let store = servebench_store::Store::open(&db).unwrap();
    let kept = store.get_without_records(&servebench_store::RunRef::Id(1)).unwrap();
    let env = kept.environment.unwrap();
    assert_eq!(env["prediction_band"]["tpot"], serde_json::json!(band.tpot), "{env}");

    // Without held-out runs there is no band to write, and one carried by the starting
    // profile is not kept: it described other constants.
    let again = dir.path().join("again.toml");
    let start = ["--fit", "alpha-api-ms", "--max-evals", "6", "--no-holdout", "--profile", profile.to_str().unwrap()];
    fit_small(&again, &report_path, &start);
    let text = std::fs::read_to_string(&again).unwrap();
    assert!(!text.contains("uncertainty"), "{text}");
}
