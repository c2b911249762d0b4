//! `servebench sim validate`: measured results predicted and their errors summarised, what it
//! cannot read or map skipped with the reason, held-out folds, `--fail-above` as the exit
//! status, saved predictions and the run store read back.

use std::path::Path;

use clap::Parser;
use serde_json::Value;
use servebench::cli::{Cli, Command, SimCommand};
use servebench::commands;

use super::sim_cli::{fails, ok, predict_args, report_000};
use crate::common::read_json;

/// `sim validate --model openai/gpt-oss-120b EXTRA... FILES...`, parsed.
fn validate_args(extra: &[&str], files: &[&Path]) -> servebench::cli::sim_args::SimValidateArgs {
    let mut argv = vec!["servebench", "sim", "validate", "--model", "openai/gpt-oss-120b"];
    argv.extend_from_slice(extra);
    argv.extend(files.iter().map(|f| f.to_str().unwrap()));
    let Command::Sim(SimCommand::Validate(args)) = Cli::try_parse_from(argv).unwrap().command else {
        panic!("not sim validate")
    };
    *args
}

/// Rows of a table that all lack the same thing are one line, its first places and how many
/// more, not one line a row; `--json` still lists every one of them.
#[test]
fn sim_validate_says_once_why_many_rows_were_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let row = |hw: &str| {
        serde_json::json!({"hw": hw, "tp": 8, "isl": 1024, "osl": 128, "conc": 4, "mean_ttft": 0.034,
                           "mean_tpot": 0.0037, "output_tput_per_gpu": 130.0})
    };
    let mut rows = vec![row("h100")];
    rows.extend((0..6).map(|_| row("no-such-gpu")));
    let table = dir.path().join("rows.json");
    std::fs::write(&table, serde_json::Value::Array(rows).to_string()).unwrap();
    let run = |extra: &[&str]| {
        let mut out = Vec::new();
        commands::sim_validate::run(&validate_args(extra, &[&table]), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    let out = run(&[]);
    let skipped: Vec<&str> = out.lines().filter(|l| l.starts_with("Skipped")).collect();
    assert_eq!(skipped.len(), 1, "{out}");
    assert!(
        skipped[0].starts_with("Skipped rows.json line 1 (list item 1), rows.json line 1 (list item 2), rows.json line 1 (list item 3) and 3 more: "),
        "{out}"
    );
    assert!(skipped[0].contains("no-such-gpu"), "{out}");
    assert!(out.contains("Validated 1 measured run(s)"), "{out}");
    let json: Value = serde_json::from_str(&run(&["--json"])).unwrap();
    assert_eq!(json["skipped"].as_array().map(Vec::len), Some(6), "{json}");
}

/// `sim validate` in-process on a measurement table: errors per metric with the presets, a file
/// it cannot read skipped with the reason, a result it cannot map skipped with the reason,
/// held-out folds with in-sample errors beside them, and `--fail-above` as the exit status.
#[test]
fn sim_validate_reports_errors_skips_what_it_cannot_map_and_gates_on_them() {
    let dir = tempfile::tempdir().unwrap();
    let rows = serde_json::json!([
        {"hw": "h100", "tp": 8, "isl": 1024, "osl": 128, "conc": 4, "mean_ttft": 0.034, "mean_tpot": 0.0037,
         "output_tput_per_gpu": 130.0},
        {"hw": "h100", "tp": 4, "isl": 1024, "osl": 128, "conc": 8, "mean_ttft": 0.048, "mean_tpot": 0.0049,
         "output_tput_per_gpu": 400.0},
        {"hw": "no-such-gpu", "tp": 1, "isl": 1024, "osl": 128, "conc": 4, "mean_ttft": 0.05},
    ]);
    let table = dir.path().join("rows.json");
    std::fs::write(&table, rows.to_string()).unwrap();
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "[{\"oops\": ").unwrap();
    let run = |extra: &[&str]| {
        let args = validate_args(extra, &[&table, &broken]);
        let mut out = Vec::new();
        let code = commands::sim_validate::run(&args, &mut out).unwrap();
        (code, String::from_utf8(out).unwrap())
    };
    let (code, out) = run(&["--points"]);
    assert_eq!(code, std::process::ExitCode::SUCCESS, "{out}");
    assert!(out.contains("Validated 2 measured run(s), predicted with the presets"), "{out}");
    assert!(out.contains("broken.json: line 1: not valid JSON"), "{out}");
    // The file is named once in its line, not again by its error.
    let line = out.lines().find(|l| l.contains("broken.json")).unwrap();
    assert_eq!(line.matches("broken.json").count(), 1, "{line}");
    assert!(out.contains("no-such-gpu") && out.contains("unknown hardware"), "{out}");
    for metric in ["mean TTFT (ms)", "mean TPOT (ms)", "output tok/s"] {
        assert_eq!(out.matches(metric).count(), 4, "{metric} in the point table, the summary and the band's:\n{out}");
    }
    // A folder stands for its files: the same points, the same skipped file.
    let argv =
        ["servebench", "sim", "validate", "--model", "openai/gpt-oss-120b", "--points", dir.path().to_str().unwrap()];
    let Command::Sim(SimCommand::Validate(args)) = Cli::try_parse_from(argv).unwrap().command else { panic!() };
    let mut folder = Vec::new();
    commands::sim_validate::run(&args, &mut folder).unwrap();
    let folder = String::from_utf8(folder).unwrap();
    assert!(folder.contains("Validated 2 measured run(s)") && folder.contains("broken.json: line 1: not valid JSON"));
    let (code, out) = run(&["--fail-above", "0.001"]);
    assert_eq!(code, std::process::ExitCode::from(1), "{out}");
    assert!(out.contains("FAIL: a median error of"), "{out}");
    // A gate that could never fail (NaN), or always would (below 0), is refused before any work.
    for limit in ["--fail-above=nan", "--fail-above=-5"] {
        let argv = ["servebench", "sim", "validate", "--model", "openai/gpt-oss-120b", limit, table.to_str().unwrap()];
        let Command::Sim(SimCommand::Validate(args)) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not sim validate")
        };
        let e = commands::sim_validate::run(&args, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("--fail-above takes a percentage of 0 or more"), "{e}");
    }
    let (_, out) = run(&["--leave-out", "tp", "--fit", "t0-ms", "--max-evals", "4"]);
    assert!(out.contains("held out by tp") && out.contains("In-sample errors"), "{out}");
    assert!(out.contains("tp=4") && out.contains("tp=8") && out.contains("t0-ms"), "{out}");
    // The workload's own axes group runs that carry no label for them: fit on one load,
    // predict the other.
    let (_, out) = run(&["--leave-out", "num-prompts", "--fit", "t0-ms", "--max-evals", "4", "--points"]);
    assert!(out.contains("held out by num-prompts") && out.contains("num-prompts=40"), "{out}");
    // A key no result has, or one that makes a single group, is refused with what to give.
    let refused = |extra: &[&str]| {
        let args = validate_args(extra, &[&table]);
        commands::sim_validate::run(&args, &mut Vec::new()).unwrap_err().to_string()
    };
    let e = refused(&["--leave-out", "prompts"]);
    assert!(e.contains("no result has a `prompts` label") && e.contains("tp") && e.contains("num-prompts"), "{e}");
    let e = refused(&["--leave-out", "hw"]);
    assert!(e.contains("one group (hw=h100)") && e.contains("--folds"), "{e}");
    // More folds than results would hold some out with nothing in them.
    let e = refused(&["--folds", "1000"]);
    assert!(e.contains("--folds 1000 asks for more folds than the"), "{e}");
    let e = refused(&["--by", "gpu"]);
    assert!(e.contains("--by gpu: no result has a `gpu` label"), "{e}");
    // The band `sim predict` prints around each prediction: every point's side of it follows
    // from its error and the H100 preset's band (the JSON stays one document though a file
    // was skipped), and the summary counts those sides.
    let (_, out) = run(&["--json"]);
    let json: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(json["skipped"].as_array().map(Vec::len), Some(2), "{json}");
    let preset = [("ttft", [-0.17, 0.08]), ("tpot", [-0.04, 0.09]), ("throughput", [-0.09, 0.05])];
    let mut inside = 0;
    for p in json["points"].as_array().unwrap() {
        let [lo, hi] = preset.iter().find(|(k, _)| p["metric"] == *k).map(|(_, b)| *b).unwrap();
        assert_eq!(p["band"], serde_json::json!([lo, hi]), "{p}");
        let e = p["error"].as_f64().unwrap();
        let side = if e > hi {
            "below"
        } else if e >= lo {
            "inside"
        } else {
            "above"
        };
        assert_eq!(p["band_side"], side, "{p}");
        inside += usize::from(side == "inside");
    }
    let all = &json["band_coverage"]["all"];
    assert_eq!(all["n"], 6, "{json}");
    assert_eq!(all["inside"], inside, "{json}");
    assert_eq!(all["inside"].as_u64().unwrap() + all["below"].as_u64().unwrap() + all["above"].as_u64().unwrap(), 6);
    // One device: no summary by group unless asked for one.
    let (_, out) = run(&[]);
    assert!(out.contains("Inside the prediction band (80 % expected"), "{out}");
    // No run gives a median first token beside its mean: no first wave to read.
    assert!(!out.contains("First waves"), "{out}");
    assert!(!out.contains("by group"), "{out}");
    let (_, out) = run(&["--by", "tp"]);
    assert!(out.contains("Errors by group") && out.contains("tp=4") && out.contains("tp=8"), "{out}");
    // Each group's row ends with the share of its figures inside their bands, as the JSON has it.
    let (_, json) = run(&["--by", "tp", "--json"]);
    let json: Value = serde_json::from_str(&json).unwrap();
    for tp in ["tp=4", "tp=8"] {
        let c = &json["band_coverage_by_group"][tp]["all"];
        let share = c["inside"].as_f64().unwrap() / c["n"].as_f64().unwrap() * 100.0;
        let row = out.lines().find(|l| l.trim_start().starts_with(tp)).unwrap();
        assert_eq!(row.split_whitespace().last(), Some(format!("{share:.0}%").as_str()), "{row}\n{json}");
    }
    // Results of several devices are summarised by device without asking.
    let mixed = dir.path().join("mixed.json");
    let mut two = rows.as_array().unwrap()[..2].to_vec();
    two[1]["hw"] = "h200".into();
    two[1]["median_ttft"] = 0.045.into();
    two[0]["median_tpot"] = 0.0036.into();
    two[0]["median_e2el"] = 0.5.into();
    std::fs::write(&mixed, serde_json::Value::Array(two).to_string()).unwrap();
    let validate_mixed = |extra: &[&str]| {
        let args = validate_args(extra, &[&mixed]);
        let mut out = Vec::new();
        commands::sim_validate::run(&args, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    let out = validate_mixed(&[]);
    assert!(out.contains("Errors by group") && out.contains("hw=h100") && out.contains("hw=h200"), "{out}");
    // A median TTFT measured on one device has its own summary row (not in "all") and column;
    // so have a median TPOT and a median end-to-end latency measured on the other.
    assert!(
        out.contains("median / P90 / bias of TTFT, median TTFT, TPOT, median TPOT, throughput, median E2EL;"),
        "{out}"
    );
    let row = |name: &str| out.lines().find(|l| l.starts_with(name)).unwrap_or_default().to_string();
    assert_eq!(row("median TPOT (ms)").split_whitespace().nth(3), Some("1"), "{out}");
    assert_eq!(row("median E2EL (ms)").split_whitespace().nth(3), Some("1"), "{out}");
    assert!(!out.contains("mean E2EL"), "no mean E2EL measured: {out}");
    assert_eq!(row("median TTFT (ms)").split_whitespace().nth(3), Some("1"), "{out}");
    assert_eq!(row("all").split_whitespace().nth(1), Some("6"), "{out}");
    // The H200 run gives both first tokens at eight streams of 80 prompts: its first wave is
    // read from them, (48 - 45) x 80 / 8 = 30 ms a request, and set against the prediction's.
    assert!(out.contains("First waves (what the requests sent at once add") && out.contains("  1 run(s): median "));
    let json: Value = serde_json::from_str(&validate_mixed(&["--json"])).unwrap();
    let waves = &json["first_waves"];
    assert_eq!(waves["summary"]["runs"], 1, "{waves}");
    assert!((waves["runs"][0]["measured_ms"].as_f64().unwrap() - 30.0).abs() < 1e-6, "{waves}");
    let ratio = waves["summary"]["median"].as_f64().unwrap();
    assert!((ratio - waves["runs"][0]["simulated_ms"].as_f64().unwrap() / 30.0).abs() < 1e-9 && ratio > 0.0, "{waves}");
    let h100 = row("  hw=h100");
    assert_eq!(h100.split_whitespace().nth(2), Some("-"), "no median TTFT measured on the H100: {out}");
    assert_eq!(row("  hw=h200").split_whitespace().nth(4), Some("-"), "no median TPOT measured on the H200: {out}");
    assert_eq!(row("  hw=h200").split_whitespace().nth(6), Some("-"), "no median E2EL measured on the H200: {out}");
}

/// A prediction saved by `sim predict` and read back by `sim validate` on the same deployment
/// is predicted again as it was: the warm-up copy of request 0 that the simulator ran (and that
/// left request 0's prompt cached) is in the saved config, so the check runs it too.
#[test]
fn sim_validate_of_a_saved_prediction_gives_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let result_dir = dir.path().to_str().unwrap();
    let mut files = Vec::new();
    for n in ["1", "8"] {
        let name = format!("n{n}.json");
        let save = ["--save-result", "--result-dir", result_dir, "--result-filename", &name];
        let mut args = predict_args(n, n, &save);
        // The end-to-end latency's figures too, which the check reports but does not fit.
        args.extend(["--percentile-metrics", "ttft,tpot,itl,e2el"]);
        args[7] = "2048";
        ok(&args);
        let json = read_json(&dir.path().join(&name));
        assert_eq!(json["servebench"]["config"]["traffic"]["num_warmups"], 1, "{}", json["servebench"]["config"]);
        files.push(dir.path().join(&name).to_str().unwrap().to_string());
    }
    let mut argv = vec!["servebench", "sim", "validate", "--model", "Qwen/Qwen3-0.6B", "--hardware", "l40s"];
    argv.extend(["--option", "jitter=0", "--json"]);
    argv.extend(files.iter().map(String::as_str));
    let cli = Cli::try_parse_from(argv).unwrap();
    let Command::Sim(SimCommand::Validate(args)) = cli.command else { panic!("not sim validate") };
    let mut out = Vec::new();
    commands::sim_validate::run(&args, &mut out).unwrap();
    let json: Value = serde_json::from_slice(&out).unwrap();
    let all = &json["held_out"]["all"];
    assert_eq!(all["n"], 6, "{json}");
    assert!(all["p90"].as_f64().unwrap() < 0.02, "{json}");
    for metric in ["mean E2EL (ms)", "median E2EL (ms)"] {
        let e2el = &json["held_out"][metric];
        assert_eq!(e2el["n"], 2, "{metric}: {json}");
        assert!(e2el["p90"].as_f64().unwrap() < 0.02, "{metric}: {json}");
    }
    // Given back, every figure lies inside the band printed with it.
    assert_eq!(json["band_coverage"]["all"]["inside"], 6, "{json}");
}

/// `sim validate --runs` reads measured runs from the run store: report 000 imported, its eleven
/// models validated against the DGX Spark run without graphs and the profile fitted to it.
#[test]
fn sim_validate_reads_runs_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let db = db.to_str().unwrap();
    ok(&["import", "--db", db, &report_000()]);
    let profile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/profiles/dgx-spark-eager-ref-000.toml");
    let profile_arg = profile.to_str().unwrap().to_string();
    let out = ok(&[
        "sim",
        "validate",
        "--db",
        db,
        "--runs",
        "1-11",
        "--hardware",
        "dgx-spark",
        "--option",
        "enforce-eager=true",
        "--profile",
        profile.to_str().unwrap(),
        "--fail-above",
        "25",
    ]);
    // The headings name the profile the predictions started from, not the presets.
    let predicted_with = format!("Validated 11 measured run(s), predicted with the profile {}", profile.display());
    assert!(out.contains(&predicted_with), "{out}");
    assert!(out.contains("Errors (the profile, no fit here):") && !out.contains("presets"), "{out}");
    let doc = ok(&[
        "sim",
        "validate",
        "--db",
        db,
        "--runs",
        "1-3",
        "--hardware",
        "dgx-spark",
        "--profile",
        &profile_arg,
        "--json",
    ]);
    let doc: Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["profile"], profile_arg.as_str(), "{doc}");
    let (code, err) = fails(&["sim", "validate", "--db", db, "--runs", "12"]);
    assert_eq!(code, 1, "{err}");
    // A bench run against the built-in simulator is stored as a bench run, and skipped as
    // what it is: the twin's prediction.
    let bench = ["bench", "serve", "--db", db, "--sim", "Qwen/Qwen3-0.6B@h100-sxm", "--num-prompts", "2"];
    ok(&[&bench[..], &["--random-input-len", "16", "--random-output-len", "2", "--disable-tqdm"]].concat());
    let out = ok(&["sim", "validate", "--db", db, "--runs", "1,12", "--hardware", "dgx-spark"]);
    assert!(
        out.contains("Skipped run 12: it ran against the simulator (Qwen/Qwen3-0.6B@h100-sxm), so it is a prediction"),
        "{out}"
    );
    assert!(out.contains("Validated 1 measured run(s)"), "{out}");
}

/// `sim validate --fit-on num-prompts=1,100 --per deployment`, the study's check: each
/// deployment is fitted on its 1- and 100-prompt reports and predicts its 10-prompt one. Here the
/// "measurements" come from constants well off the presets (a slow frontend and host), which the
/// presets miss and the fit on two loads recovers; a deployment without a run at those loads is
/// named and not predicted, and a load no result has is refused with the values they have.
#[test]
fn sim_validate_fits_each_deployment_on_two_loads_and_predicts_the_third() {
    let dir = tempfile::tempdir().unwrap();
    let truth = ["--option", "alpha-api-ms=90", "--option", "t0-ms=6"];
    let block = |prompts: &str, conc: &str| {
        let out = ok(&predict_args(prompts, conc, &truth));
        let start = out.find("============ Serving Benchmark Result").unwrap();
        let end = out[start..].find("==================================================\n").unwrap() + start + 51;
        out[start..end].to_string()
    };
    let mut report = String::new();
    for (deployment, conc, loads) in [("one", "4", ["1", "10", "100"]), ("two", "16", ["1", "10", "100"])] {
        report.push_str(&format!("deployment: {deployment}\n\n"));
        for n in loads {
            report.push_str(&format!("# {n} prompts\n{}\n", block(n, conc)));
        }
    }
    report.push_str(&format!("deployment: three\n\n# 10 prompts\n{}\n", block("10", "4")));
    let path = dir.path().join("study.txt");
    std::fs::write(&path, report).unwrap();
    let run = |extra: &[&str]| {
        let mut argv = vec!["servebench", "sim", "validate", "--model", "Qwen/Qwen3-0.6B", "--hardware", "l40s"];
        argv.extend_from_slice(extra);
        argv.push(path.to_str().unwrap());
        let cli = Cli::try_parse_from(argv).unwrap();
        let Command::Sim(SimCommand::Validate(args)) = cli.command else { panic!("not sim validate") };
        let mut out = Vec::new();
        let code = commands::sim_validate::run(&args, &mut out);
        (code, String::from_utf8(out).unwrap())
    };
    let median = |json: &Value, metric: &str| json["held_out"][metric]["median"].as_f64().unwrap();

    let (code, out) = run(&["--fit-on", "num-prompts=1,100", "--per", "deployment", "--json"]);
    assert_eq!(code.unwrap(), std::process::ExitCode::SUCCESS, "{out}");
    let fitted: Value = serde_json::from_slice(out.as_bytes()).unwrap();
    let points = fitted["points"].as_array().unwrap();
    assert!(
        !points.is_empty() && points.iter().all(|p| p["labels"].as_str().unwrap().contains("section=10 prompts")),
        "{fitted}"
    );
    let groups: Vec<&str> = points.iter().map(|p| p["group"].as_str().unwrap()).collect();
    assert!(groups.contains(&"deployment=one") && groups.contains(&"deployment=two"), "{groups:?}");
    assert!(!groups.contains(&"deployment=three"), "nothing to fit three on: {groups:?}");
    let (_, before) = run(&["--json"]);
    let before: Value = serde_json::from_slice(before.as_bytes()).unwrap();
    assert!(median(&before, "mean TTFT (ms)") > 0.3, "the presets miss the slow frontend: {before}");
    assert!(median(&fitted, "mean TTFT (ms)") < 0.05, "{fitted}");
    assert!(median(&fitted, "mean TPOT (ms)") < 0.05, "{fitted}");

    let (_, text) = run(&["--fit-on", "num-prompts=1,100", "--per", "deployment"]);
    assert!(text.contains("Skipped deployment=three (1 run(s)): none of its runs has the num-prompts"), "{text}");
    assert_eq!(fitted["skipped"][0]["label"], "deployment=three (1 run(s))", "{fitted}");
    let fits: Vec<&str> = fitted["fits"].as_array().unwrap().iter().map(|f| f["group"].as_str().unwrap()).collect();
    assert_eq!(fits, ["deployment=one", "deployment=two"], "{fitted}");
    assert_eq!(fitted["fits"][0]["fitted"][0]["constant"], "alpha-api-ms", "{fitted}");
    assert!(text.contains("held out within each deployment (by deployment): fitted on its runs at num-prompts 1, 100"));
    assert!(text.contains("In-sample errors (each deployment's fit on the runs it saw):"), "{text}");
    assert!(text.contains("  deployment=one: alpha-api-ms"), "each deployment's own constants: {text}");

    let (refused, _) = run(&["--fit-on", "num-prompts=7"]);
    let e = refused.unwrap_err().to_string();
    assert!(e.contains("no result has num-prompts 7") && e.contains("1, 10, 100"), "{e}");
    let (refused, _) = run(&["--fit-on", "num-prompts"]);
    assert!(refused.unwrap_err().to_string().contains("KEY=VALUE,VALUE"));
    let conflict = Cli::try_parse_from(["servebench", "sim", "validate", "--fit-on", "conc=ends", "--folds", "2", "x"]);
    assert!(conflict.is_err());
    assert!(
        Cli::try_parse_from(["servebench", "sim", "validate", "--per", "tp", "x"]).is_err(),
        "--per needs --fit-on"
    );
}

/// A parameter sweep's folder (`bench sweep serve -o`) is read as its runs: each `run=N.json`,
/// not the summaries, warm-up and failure records beside it, and the parameters the sweep
/// added to a run (`max_num_seqs`, `tensor_parallel_size`) are the deployment it is predicted
/// for.
#[test]
fn sim_validate_reads_a_sweep_s_runs_with_their_server_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let result_dir = dir.path().to_str().unwrap();
    let save =
        ["--option", "max-num-seqs=2", "--save-result", "--result-dir", result_dir, "--result-filename", "p.json"];
    ok(&predict_args("32", "16", &save));
    let mut run = read_json(&dir.path().join("p.json"));
    let fields = run.as_object_mut().unwrap();
    // As a vLLM server's result: nothing but the sweep's parameters says how it was served.
    fields.remove("servebench");
    for (k, v) in [("_benchmark_name", "a".into()), ("max_num_seqs", 2.into()), ("tensor_parallel_size", 1.into())] {
        fields.insert(k.to_string(), v);
    }
    let comb = dir.path().join("exp/SERVE--a-BENCH--max_concurrency=16");
    std::fs::create_dir_all(&comb).unwrap();
    let write = |name: &str, v: &Value| std::fs::write(comb.join(name), serde_json::to_string(v).unwrap()).unwrap();
    write("run=0.json", &run);
    write("summary.json", &Value::Array(vec![run.clone(), run.clone()]));
    write("warmup.json", &run);
    write("run=1.partial.json", &run);
    std::fs::write(dir.path().join("exp/summary.csv"), ",date\n0,x\n").unwrap();
    let validate = || {
        let exp = dir.path().join("exp");
        let argv = ["servebench", "sim", "validate", "--model", "Qwen/Qwen3-0.6B", "--hardware", "l40s", "--json"];
        let cli = Cli::try_parse_from(argv.iter().copied().chain([exp.to_str().unwrap()])).unwrap();
        let Command::Sim(SimCommand::Validate(args)) = cli.command else { panic!("not sim validate") };
        let mut out = Vec::new();
        commands::sim_validate::run(&args, &mut out).unwrap();
        serde_json::from_slice::<Value>(&out).unwrap()
    };
    let json = validate();
    let all = &json["held_out"]["all"];
    assert_eq!(all["n"], 3, "one run, its three headline figures: {json}");
    assert!(all["p90"].as_f64().unwrap() < 0.05, "{json}");
    // Without its server's parameter the run is predicted for vLLM's default batch, far off.
    let fields = run.as_object_mut().unwrap();
    fields.remove("max_num_seqs");
    write("run=0.json", &run);
    let json = validate();
    assert!(json["held_out"]["output tok/s"]["p90"].as_f64().unwrap() > 0.3, "{json}");
}
