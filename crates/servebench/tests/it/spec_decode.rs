//! Speculative decoding end to end: the twin drafts and verifies, and both `sim predict` and
//! `bench serve` against the served twin print vLLM's speculative-decoding section and write its
//! `spec_decode_*` keys; the bench reads the counters from the server's `/metrics` before and
//! after the timed run, as `vllm bench serve` does.

use crate::common::read_json;
use crate::sim_cli::{ok, predict_args, value};

const NGRAM: &str = r#"speculative-config={"method": "ngram", "num_speculative_tokens": 2}"#;

#[test]
fn a_prediction_reports_the_acceptance_it_drew() {
    let dir = tempfile::tempdir().unwrap();
    let result_dir = dir.path().to_str().unwrap();
    let extra = [
        "--option",
        NGRAM,
        "--option",
        "spec-acceptance=0.8,0.4",
        "--save-result",
        "--result-dir",
        result_dir,
        "--result-filename",
        "r.json",
    ];
    let out = ok(&predict_args("200", "16", &extra));
    assert!(out.contains("---------------Speculative Decoding---------------"), "{out}");
    let (p0, p1) = (value(&out, "  Position 0:"), value(&out, "  Position 1:"));
    assert!((p0 - 80.0).abs() < 5.0 && (p1 - 40.0).abs() < 5.0, "{out}");
    let length = value(&out, "Acceptance length:");
    assert!((length - (1.0 + p0 / 100.0 + p1 / 100.0)).abs() < 0.011, "{out}");
    let json = read_json(&dir.path().join("r.json"));
    assert!((json["spec_decode_acceptance_length"].as_f64().unwrap() - length).abs() < 0.006, "{json}");
    assert_eq!(json["spec_decode_per_position_acceptance_rates"].as_array().unwrap().len(), 2);
    assert_eq!(json["spec_decode_num_drafts"].as_u64(), Some(value(&out, "Drafts:") as u64));
    // Without speculative decoding, no section.
    assert!(!ok(&predict_args("20", "4", &[])).contains("Speculative Decoding"));
}

#[test]
fn a_benchmark_of_the_served_twin_reads_its_counters_over_the_run() {
    let out = ok(&[
        "bench",
        "serve",
        "--sim",
        "Qwen/Qwen3-0.6B@h100-sxm",
        "--sim-option",
        NGRAM,
        "--sim-option",
        "spec-acceptance=1",
        "--sim-option",
        "jitter=0",
        "--num-prompts",
        "8",
        "--random-input-len",
        "32",
        "--random-output-len",
        "16",
        "--no-store",
    ]);
    assert!(out.contains("---------------Speculative Decoding---------------"), "{out}");
    // Every draft accepted; the warm-up request's drafts are not the run's.
    assert_eq!(value(&out, "Acceptance rate (%):"), 100.0, "{out}");
    assert_eq!(value(&out, "  Position 0:"), 100.0, "{out}");
    let accepted = value(&out, "Accepted tokens:");
    assert!(accepted > 0.0 && accepted < 8.0 * 15.0, "{out}");
}

#[test]
fn a_report_with_its_serve_line_and_acceptance_is_validated_against_its_own_drafts() {
    let out = ok(&predict_args("100", "8", &["--option", NGRAM, "--option", "spec-acceptance=0.7,0.45"]));
    let start = out.find("============ Serving Benchmark Result").expect("a result block");
    let end =
        start + out[start..].find("==================================================\n").expect("its footer") + 51;
    let block = &out[start..end];
    let serve = r#"vllm serve Qwen/Qwen3-0.6B --speculative-config '{"method": "ngram", "num_speculative_tokens": 2}'"#;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spec.txt");
    std::fs::write(&file, format!("{serve}\n{block}")).unwrap();
    let validated = ok(&["sim", "validate", "--hardware", "l40s", "--points", file.to_str().unwrap()]);
    assert!(validated.contains("Validated 1 measured run(s)"), "{validated}");
    // Its own drafts and acceptance predict it back closely.
    let tpot = validated.lines().find(|l| l.contains("mean TPOT (ms)") && l.contains('%')).unwrap();
    let error: f64 = tpot.split_whitespace().find(|w| w.ends_with('%')).unwrap().trim_end_matches('%').parse().unwrap();
    assert!(error.abs() < 5.0, "{validated}");
    // Without its Speculative Decoding section, the acceptance is unknown: skipped, saying why.
    let cut = block[..block.find("---------------Speculative Decoding").unwrap()].to_string()
        + "==================================================\n";
    std::fs::write(&file, format!("{serve}\n{cut}")).unwrap();
    let out =
        crate::sim_cli::servebench(&["sim", "validate", "--hardware", "l40s", "--points", file.to_str().unwrap()], &[]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("needs spec-acceptance"), "{text}");
}
