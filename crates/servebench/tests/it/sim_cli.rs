//! `servebench sim predict` and `sim presets`: the real binary, its output, the files it writes
//! and its errors (`sim step` and `sim memory` are in `sim_step_memory`, `sim validate` in
//! `sim_validate_cli`, `sim fit` in `sim_fit_cli`).

use std::path::Path;
use std::process::Output;

use crate::common::read_json;

pub(super) fn servebench(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_servebench"));
    cmd.args(args).env_remove("SERVEBENCH_DB").env_remove("SERVEBENCH_PRESETS").env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the servebench binary runs")
}

pub(super) fn ok(args: &[&str]) -> String {
    let out = servebench(args, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "servebench {args:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// The exit code and stderr of a command that must fail.
pub(super) fn fails(args: &[&str]) -> (i32, String) {
    let out = servebench(args, &[]);
    assert!(!out.status.success(), "servebench {args:?} succeeded:\n{}", String::from_utf8_lossy(&out.stdout));
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A `label: value` line of a vLLM block.
pub(super) fn value(report: &str, label: &str) -> f64 {
    let line = report.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("no {label:?} in\n{report}"));
    line[label.len()..].trim().parse().unwrap()
}

/// `sim predict` of a small deployment: `prompts` requests of 64 tokens in and 16 out,
/// `concurrency` at a time, then `extra`.
pub(super) fn predict_args<'a>(prompts: &'a str, concurrency: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "sim",
        "predict",
        "--model",
        "Qwen/Qwen3-0.6B",
        "--hardware",
        "l40s",
        "--random-input-len",
        "64",
        "--random-output-len",
        "16",
        "--option",
        "jitter=0",
        "--no-store",
        "--num-prompts",
        prompts,
        "--max-concurrency",
        concurrency,
    ];
    args.extend(extra);
    args
}

#[test]
fn sim_predict_prints_the_vllm_block_and_saves_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let result_dir = dir.path().to_str().unwrap();
    let args = predict_args("40", "4", &["--save-result", "--result-dir", result_dir, "--result-filename", "r.json"]);
    let out = ok(&args);
    assert!(out.contains("============ Serving Benchmark Result ============"), "{out}");
    assert!(out.contains("KV cache") && out.contains("max-num-seqs 256"), "{out}");
    assert_eq!(value(&out, "Successful requests:"), 40.0);
    assert_eq!(value(&out, "Failed requests:"), 0.0);
    assert_eq!(value(&out, "Maximum request concurrency:"), 4.0);
    assert_eq!(value(&out, "Total input tokens:"), 40.0 * 64.0);
    assert_eq!(value(&out, "Total generated tokens:"), 40.0 * 16.0);
    let ttft = value(&out, "Mean TTFT (ms):");
    let tpot = value(&out, "Mean TPOT (ms):");
    assert!(ttft > 15.0 && ttft < 500.0, "{ttft}");
    assert!(tpot > 1.0 && tpot < 100.0, "{tpot}");

    let json = read_json(&dir.path().join("r.json"));
    assert_eq!(json["completed"], 40);
    assert_eq!(json["total_output_tokens"], 640);
    assert_eq!(json["model_id"], "Qwen/Qwen3-0.6B");
    assert_eq!(json["servebench"]["token_source"], "simulated");
    assert_eq!(json["servebench"]["config"]["target"]["sim"]["hardware"], "l40s");
    assert!((json["mean_ttft_ms"].as_f64().unwrap() - ttft).abs() < 0.01);

    // The deployment's GPUs share its throughput: one L40S here.
    let per_gpu = out.lines().find(|l| l.starts_with("Per GPU (1 GPU): ")).expect(&out);
    let output = value(&out, "Output token throughput (tok/s):");
    assert!(per_gpu.starts_with(&format!("Per GPU (1 GPU): {output:.2} output tok/s/GPU")), "{per_gpu}");
    assert_eq!(json["servebench"]["config"]["target"]["gpus"], 1);

    // The same flags predict the same run.
    let again = ok(&args);
    assert_eq!(value(&again, "Mean TPOT (ms):"), tpot);

    // A run whose every request fails (a temperature vLLM refuses) is reported, with the
    // reason, and exits 1 as `bench serve` does.
    let out = servebench(&predict_args("3", "1", &["--temperature", "-1"]), &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("temperature must be non-negative, got -1.0."), "{stdout}");
    assert!(stdout.contains("Every request failed") && value(&stdout, "Failed requests:") == 3.0, "{stdout}");
}

#[test]
fn the_prediction_band_says_when_the_tp_size_was_not_measured() {
    let dir = tempfile::tempdir().unwrap();
    let result_dir = dir.path().to_str().unwrap();
    let band = |tp: &str, file: &str| {
        let args = [
            "sim",
            "predict",
            "--model",
            "Qwen/Qwen3-0.6B",
            "--hardware",
            "h100-sxm",
            "--tp",
            tp,
            "--random-input-len",
            "64",
            "--random-output-len",
            "8",
            "--num-prompts",
            "4",
            "--no-store",
            "--save-result",
            "--result-dir",
            result_dir,
            "--result-filename",
            file,
        ];
        let out = ok(&args);
        let line = out.lines().find(|l| l.starts_with("Prediction band")).map(str::to_string);
        let json = read_json(&dir.path().join(file));
        (line.unwrap_or_else(|| panic!("no band in\n{out}")), json["servebench"]["prediction_band"]["source"].clone())
    };
    // The H100's band was measured at TP 2, 4 and 8.
    let (measured, source) = band("2", "tp2.json");
    assert!(!measured.contains("outside"), "{measured}");
    assert!(source.as_str().is_some_and(|s| !s.contains("outside")), "{source}");
    let (outside, source) = band("1", "tp1.json");
    assert!(outside.contains("tp 1 is outside the sizes they were measured at (2, 4, 8)"), "{outside}");
    assert!(source.as_str().is_some_and(|s| s.contains("tp 1 is outside")), "{source}");
}

#[test]
fn sim_predict_runs_multi_turn_conversations() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("conversations.json");
    let conv = |i: usize| {
        serde_json::json!({"conversations": [
            {"from": "human", "value": format!("question {i} about cats and dogs")},
            {"from": "gpt", "value": "an answer of a few words here"},
            {"from": "human", "value": "and a follow-up question"},
            {"from": "gpt", "value": "another answer"},
        ]})
    };
    std::fs::write(&data, serde_json::to_string(&(0..6).map(conv).collect::<Vec<_>>()).unwrap()).unwrap();
    let out = ok(&[
        "sim",
        "predict",
        "--model",
        "Qwen/Qwen3-0.6B",
        "--hardware",
        "l40s",
        "--backend",
        "openai-chat",
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        data.to_str().unwrap(),
        "--multi-turn",
        "--max-active-conversations",
        "2",
        "--think-time",
        "0.2",
        "--num-prompts",
        "6",
        "--no-store",
    ]);
    assert_eq!(value(&out, "Successful requests:"), 12.0, "{out}");
    assert!(out.contains("6 conversation(s), 12 turn(s): at most 2 active at once"), "{out}");
}

#[test]
fn sim_presets_lists_the_presets_and_where_user_presets_live() {
    let out = ok(&["sim", "presets"]);
    for want in [
        "h100-sxm",
        "dgx-spark",
        "3350",
        "Qwen/Qwen3-8B",
        "openai/gpt-oss-120b",
        "also nvidia/Llama-3.3-70B-Instruct-FP4",
        "KV KiB/tok",
        "User presets",
    ] {
        assert!(out.contains(want), "{want} missing:\n{out}");
    }
    let hw = ok(&["sim", "presets", "--hardware"]);
    assert!(hw.contains("mi300x") && !hw.contains("Qwen/Qwen3-8B"), "{hw}");
    // The boost clock the kernels' latencies scale with; "-" where no datasheet gives one.
    let row = |name: &str| hw.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap().to_string();
    assert!(hw.lines().nth(1).unwrap().contains("MHz"), "{hw}");
    assert!(row("a100-80g").split_whitespace().any(|w| w == "1410"), "{hw}");
    assert!(row("dgx-spark").split_whitespace().filter(|w| *w == "-").count() >= 2, "{hw}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("models")).unwrap();
    std::fs::write(
        dir.path().join("models/tiny.toml"),
        "id = \"me/tiny-model\"\nlayers = 4\nhidden = 256\nheads = 4\nkv_heads = 2\nhead_dim = 64\n\
         intermediate = 512\nvocab = 1000\ntied_embeddings = true\nprecision = \"bf16\"\nmax_context = 2048\n",
    )
    .unwrap();
    let out = servebench(&["sim", "presets", "--models"], &[("SERVEBENCH_PRESETS", dir.path())]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("me/tiny-model") && text.contains(&dir.path().display().to_string()), "{text}");
}

/// The store's copy of reference report 000: eleven models on a `dgx-spark`, one block each.
pub(super) fn report_000() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/vllm-reports/000-dense-models.txt");
    path.to_str().unwrap().to_string()
}

#[test]
fn bad_input_errors_say_what_to_do() {
    // What names nothing known, or cannot be read, is bad usage (2); a deployment that cannot
    // run is an error (1), as vLLM's start fails.
    let (code, err) = fails(&["sim", "predict", "--model", "acme/unknown-9b", "--hardware", "h100-sxm", "--no-store"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown model \"acme/unknown-9b\"") && err.contains("Qwen/Qwen3-8B"), "{err}");
    assert!(err.contains("config.json"), "{err}");
    let (code, err) = fails(&["sim", "predict", "--model", "Qwen/Qwen3-8B", "--hardware", "tpu-v9", "--no-store"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unknown hardware \"tpu-v9\"; known presets: h100-sxm, h100-pcie, h100-nvl, h800, h200, h200-nvl"),
        "{err}"
    );
    // A name a keystroke or two from presets offers them (all of them where they tie).
    let (_, err) = fails(&["sim", "predict", "--model", "Qwen/Qwen3-8B", "--hardware", "mi300", "--no-store"]);
    assert!(err.contains("unknown hardware \"mi300\" (did you mean mi300x?); known presets:"), "{err}");
    let (_, err) = fails(&["sim", "predict", "--model", "Qwen/Qwen3-8B", "--hardware", "x100-80gb", "--no-store"]);
    assert!(err.contains("(did you mean h100-sxm or a100-80g?)"), "{err}");
    let (code, err) = fails(&[
        "sim",
        "predict",
        "--model",
        "Qwen/Qwen3-VL-235B-A22B-Instruct-FP8",
        "--hardware",
        "rtx-4090",
        "--no-store",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("does not fit on rtx-4090") && err.contains("GiB per GPU"), "{err}");
    assert!(err.contains("Use more GPUs"), "{err}");
    let (_, err) = fails(&["sim", "predict", "--hardware", "h100-sxm", "--no-store"]);
    assert!(err.contains("--model"), "{err}");
    let (code, err) = fails(&["sim", "predict", "--model", "Qwen/Qwen3-8B", "--hardware", "h100-sxm", "--tp", "3"]);
    assert_eq!(code, 2);
    assert!(err.contains("tp=3") && err.contains("32 attention heads"), "{err}");
    // A stand-in for vLLM's client is predict's: a served twin is timed by its real caller.
    let (_, err) = fails(&[
        "bench",
        "serve",
        "--sim",
        "Qwen/Qwen3-8B@h100-sxm",
        "--sim-option",
        "bench-client=vllm",
        "--num-prompts",
        "2",
        "--no-store",
    ]);
    assert!(err.contains("bench-client") && err.contains("leave it out"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("notes.txt");
    std::fs::write(&junk, "no report here\n").unwrap();
    let out = dir.path().join("p.toml");
    let fit = |extra: &[&str]| {
        let mut args = vec!["sim", "fit", "--model", "Qwen/Qwen3-8B", "--hardware", "h100-sxm"];
        args.extend(["--out", out.to_str().unwrap()]);
        args.extend(extra);
        fails(&args).1
    };
    let err = fit(&[junk.to_str().unwrap()]);
    assert!(err.contains("notes.txt") && err.contains("Serving Benchmark Result"), "{err}");
    let err = fit(&["--fit", "t0", junk.to_str().unwrap()]);
    assert!(err.contains("unknown constant \"t0\"") && err.contains("t0-ms"), "{err}");
    let err = fit(&["/nonexistent/result.json"]);
    assert!(err.contains("/nonexistent/result.json"), "{err}");
    assert!(!out.exists());
}

#[test]
fn sim_predict_with_server_metrics_reports_the_engine_s_own_telemetry_and_where_its_time_went() {
    let dir = tempfile::tempdir().unwrap();
    let result_dir = dir.path().to_str().unwrap();
    let extra = ["--server-metrics", "--scrape-interval", "0.1", "--save-result", "--result-dir", result_dir];
    let mut args = predict_args("40", "4", &extra);
    args.extend(["--result-filename", "r.json"]);
    let out = ok(&args);
    let line = out.lines().find(|l| l.starts_with("Server telemetry (vllm, simulated engine (virtual time), "));
    let line = line.unwrap_or_else(|| panic!("no telemetry line in\n{out}"));
    // The engine's own count of generated tokens over the run is the client's.
    assert!(line.contains("generated tokens 640 (client counted 640)") && line.contains("GPU util max"), "{line}");
    let note = out.lines().find(|l| l.starts_with("Simulated: where the time went: engine busy ")).unwrap();
    assert!(note.contains("API server busy") && note.contains("step time: "), "{note}");

    let json = read_json(&dir.path().join("r.json"));
    let telemetry = &json["servebench"]["server_telemetry"];
    assert_eq!(telemetry["interval_s"], 0.1);
    let series = telemetry["sources"][0]["series"].as_array().unwrap();
    let signals: Vec<&str> = series.iter().filter_map(|s| s["signal"].as_str()).collect();
    for signal in ["running", "waiting", "kv_cache_usage", "generation_tokens", "gpu_util"] {
        assert!(signals.contains(&signal), "{signal} not in {signals:?}");
    }
    // Without the flag the prediction is as before: no telemetry, no note.
    let plain = ok(&predict_args("40", "4", &[]));
    assert!(!plain.contains("Server telemetry") && !plain.contains("where the time went"), "{plain}");
}

/// A plan written by `bench serve --dry-run` is predicted as written: the same requests at the
/// same times as predicting its flags directly, so the same report.
#[test]
fn sim_predict_replays_a_plan_as_its_flags_predict() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.jsonl");
    let load =
        ["--num-prompts", "30", "--random-input-len", "256", "--random-output-len", "32", "--request-rate", "10"];
    let mut dry = vec!["bench", "serve", "--sim", "Qwen/Qwen3-0.6B@l40s", "--dry-run", plan.to_str().unwrap()];
    dry.extend(load);
    ok(&dry);
    let head = ["sim", "predict", "--model", "Qwen/Qwen3-0.6B", "--hardware", "l40s", "--no-store"];
    let replayed = ok(&[&head[..], &["--replay-plan", plan.to_str().unwrap()]].concat());
    let direct = ok(&[&head[..], &load].concat());
    for label in ["Successful requests:", "Output token throughput (tok/s):", "Mean TTFT (ms):", "Mean TPOT (ms):"] {
        assert_eq!(value(&replayed, label), value(&direct, label), "{label}\n{replayed}\n{direct}");
    }
    assert_eq!(value(&replayed, "Successful requests:"), 30.0);
}

#[test]
fn sim_predict_reads_its_flags_from_a_config_file_as_vllm_does() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("predict.yaml");
    let yaml = "model: Qwen/Qwen3-0.6B\nhardware: l40s\nrandom_input_len: 64\nrandom-output-len: 16\n\
                num-prompts: 40\nmax-concurrency: 4\noption: [jitter=0]\nno-store: true\n\
                extra-body: {top_k: 5}\nsave-result: true\n";
    std::fs::write(&config, yaml).unwrap();
    let result_dir = dir.path().to_str().unwrap();
    let config = config.to_str().unwrap();
    let extra = ["--result-dir", result_dir, "--result-filename", "r.json", "--extra-body.temperature", "0"];
    let args: Vec<&str> =
        ["sim", "predict", "--config", config, "--num-prompts", "8"].into_iter().chain(extra).collect();
    let out = ok(&args);
    // The command line's --num-prompts wins over the file's.
    assert_eq!(value(&out, "Successful requests:"), 8.0);
    assert_eq!(value(&out, "Total input tokens:"), 8.0 * 64.0);
    let json = read_json(&dir.path().join("r.json"));
    let saved = &json["servebench"]["config"];
    assert_eq!(saved["target"]["sim"]["hardware"], "l40s");
    assert_eq!(saved["extra_body"], serde_json::json!({"top_k": 5, "temperature": 0}));

    std::fs::write(dir.path().join("bad.yaml"), "num-prompt: 5\n").unwrap();
    let bad = dir.path().join("bad.yaml");
    let (code, err) = fails(&["sim", "predict", "--config", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("`num-prompt` is not a flag of `servebench sim predict`; did you mean `num-prompts`?"),
        "{err}"
    );
}
