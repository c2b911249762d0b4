//! The fidelity check on the reference reports (the store's `testdata/reports`): calibrate,
//! predict the held-out points, compare with the numbers recorded in `testdata/fidelity.json`.

use std::path::PathBuf;
use std::time::Instant;

use super::fidelity::*;
use super::{FitMetric, SearchOptions, residual_table};
use servebench_core::metrics::median;

const CASES: [(&str, &str); 4] = [
    ("000", "000-dense-models.txt"),
    ("001", "001-prompt-sweep.txt"),
    ("003", "003-sharegpt-percentiles.txt"),
    ("004", "004-prefill-decode.txt"),
];

pub(super) fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata")
}

fn case(id: &str) -> Case {
    let file = CASES.iter().find(|(c, _)| *c == id).map(|(_, f)| *f).unwrap();
    let text = std::fs::read_to_string(testdata().join("../../../testdata/vllm-reports").join(file)).unwrap();
    reference_case(id, &text).unwrap()
}

/// The full procedure from the presets' priors; prints every residual and the table.
/// `SERVEBENCH_WRITE_FIDELITY=1` rewrites `testdata/fidelity.json` with the result.
#[test]
#[ignore = "minutes in a debug build; run with --release"]
fn fidelity_full_refit() {
    let only = std::env::var("FIDELITY_CASES").unwrap_or_default();
    let mut outcomes = Vec::new();
    for (id, _) in CASES {
        if !only.is_empty() && !only.split(',').any(|c| c == id) {
            continue;
        }
        let c = case(id);
        let t = Instant::now();
        let search = SearchOptions { max_evals: 700, initial_step: 0.5, tolerance: 1e-6 };
        let o = evaluate(&c, search, None);
        println!("== {id}: {} ({:.1} s)", o.procedure, t.elapsed().as_secs_f64());
        for f in &o.folds {
            let values: Vec<String> = f.fit.values.iter().map(|(p, v)| format!("{}={v:.4}", p.name())).collect();
            println!(
                "fold {}: loss {:.4} -> {:.4} in {} runs; {}",
                f.name,
                f.fit.loss_start,
                f.fit.loss,
                f.fit.evaluations,
                values.join(" ")
            );
            print!("{}", residual_table(if o.held_out_counts { &f.held_out } else { &f.in_sample }));
        }
        outcomes.push(o);
    }
    let record = FidelityRecord::of(&outcomes, NOTE);
    println!("{}", record.table());
    if std::env::var_os("SERVEBENCH_WRITE_FIDELITY").is_some() && only.is_empty() {
        let text = serde_json::to_string_pretty(&record).unwrap() + "\n";
        std::fs::write(testdata().join("fidelity.json"), text).unwrap();
        println!("wrote testdata/fidelity.json");
    } else if only.is_empty() {
        check_against_record(&record, &recorded());
    }
}

const NOTE: &str = "Written by `SERVEBENCH_WRITE_FIDELITY=1 cargo test --release -p servebench-sim -- --ignored \
    fidelity_full_refit`. APE = |simulated / measured - 1| of mean TTFT, mean TPOT and output throughput per \
    point; MdAPE and P90 over the held-out points of each case (in sample for 003). Cases and deployments: \
    servebench_sim::calibration::fidelity.";

/// Worse than recorded by more than this (absolute, as a fraction) fails.
const MARGIN_MDAPE: f64 = 0.01;
const MARGIN_P90: f64 = 0.03;

fn recorded() -> FidelityRecord {
    let text = std::fs::read_to_string(testdata().join("fidelity.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn check_stats(what: &str, now: &StatsTable, then: &StatsTable) {
    for ((label, n), (_, t)) in now.rows().into_iter().zip(then.rows()) {
        assert_eq!(n.n, t.n, "{what} {label}: {} residuals now, {} recorded", n.n, t.n);
        assert!(
            n.mdape <= t.mdape + MARGIN_MDAPE && n.p90 <= t.p90 + MARGIN_P90,
            "{what} {label} regressed: MdAPE {:.1} % (recorded {:.1} %), P90 {:.1} % (recorded {:.1} %)",
            n.mdape * 100.0,
            t.mdape * 100.0,
            n.p90 * 100.0,
            t.p90 * 100.0
        );
    }
}

/// The fidelity target on held-out points: MdAPE <= 10 %, P90 <= 30 %.
fn check_bounds(what: &str, s: &ErrorStats) {
    assert!(s.mdape <= 0.10 && s.p90 <= 0.30, "{what}: MdAPE {:.3}, P90 {:.3} exceed 0.10 / 0.30", s.mdape, s.p90);
}

/// Every case and the overall numbers no worse than recorded, and every held-out case and the
/// overall within the fidelity target ([`check_bounds`]).
fn check_against_record(now: &FidelityRecord, then: &FidelityRecord) {
    for (id, case) in &now.cases {
        let rec = then.cases.get(id).unwrap_or_else(|| panic!("case {id} is not in fidelity.json"));
        check_stats(id, &case.stats, &rec.stats);
        // The fidelity target holds where the deployment is known (000: the models are named,
        // the device is a DGX Spark); 001, 003 and 004 run on deployments read from their
        // numbers, and are kept from regressing only.
        if case.held_out && id == "000" {
            check_bounds(id, &case.stats.all);
        }
        for (f, r) in case.folds.iter().zip(&rec.folds) {
            assert!(
                f.fit_loss <= r.fit_loss * 1.02 + 1e-4,
                "{id} fold {}: the fit ends at loss {:.4}, recorded {:.4}",
                f.name,
                f.fit_loss,
                r.fit_loss
            );
        }
    }
    check_stats("overall", &now.overall, &then.overall);
}

/// The fast check: each fold refitted from its recorded constants with a one-simplex budget
/// (it can only keep or improve them), its held-out points predicted, the statistics compared.
#[test]
fn fidelity_has_not_regressed() {
    let then = recorded();
    let mut outcomes = Vec::new();
    for (id, _) in CASES {
        let c = case(id);
        let starts = then.cases[id].starts(&c.params).unwrap_or_else(|| panic!("{id}: recorded constants missing"));
        let search = SearchOptions { max_evals: c.params.len() + 1, initial_step: 0.05, tolerance: 1e-6 };
        outcomes.push(evaluate(&c, search, Some(&starts)));
    }
    let now = FidelityRecord::of(&outcomes, NOTE);
    println!("{}", now.table());
    check_against_record(&now, &then);
}

#[test]
fn the_check_fails_when_numbers_get_worse_or_break_the_bounds() {
    let then = recorded();
    assert!(std::panic::catch_unwind(|| check_against_record(&then, &then)).is_ok());
    let mut worse = then.clone();
    worse.cases.get_mut("001").unwrap().stats.tpot.p90 += 0.05;
    assert!(std::panic::catch_unwind(|| check_against_record(&worse, &then)).is_err());
    let mut worse = then.clone();
    worse.overall.all.mdape += 0.02;
    assert!(std::panic::catch_unwind(|| check_against_record(&worse, &then)).is_err());
    let mut worse = then.clone();
    worse.cases.get_mut("000").unwrap().folds[0].fit_loss *= 1.1;
    assert!(std::panic::catch_unwind(|| check_against_record(&worse, &then)).is_err());
    // Within the margin of a record that is itself out of bounds: still a failure.
    let mut out_of_bounds = then.clone();
    out_of_bounds.cases.get_mut("000").unwrap().stats.all.p90 = 0.35;
    assert!(std::panic::catch_unwind(|| check_against_record(&out_of_bounds, &out_of_bounds)).is_err());
}

/// The shipped presets on the public H100 rows they were calibrated on (in sample): a guard
/// against a change to the cost model or the presets that loses the calibration. The held-out
/// figures (leave one tensor-parallel size out) come from `servebench sim validate --leave-out
/// tp` and are in `presets/hardware/CALIBRATION.md`.
#[test]
fn the_presets_keep_their_h100_calibration() {
    use super::validate::{Defaults, by_metric};
    use super::{Residual, read_points};
    let rows = read_points(&testdata().join("inferencex-h100-gpt-oss-120b-vllm.json")).unwrap();
    // One vLLM version and the smallest and largest load of each shape keep the debug build quick.
    let rows: Vec<_> = rows
        .into_iter()
        .filter(|p| {
            let l = |k: &str| p.labels.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone()).unwrap_or_default();
            l("vllm") == "v0.13.0" && (l("conc") == "4" || l("conc") == "64")
        })
        .collect();
    let defaults = Defaults { model: Some("openai/gpt-oss-120b".into()), ..Defaults::default() };
    let v = predicted_by_the_presets(rows, &defaults, 17);
    let all: Vec<&Residual> = v.held_out.iter().collect();
    let rows = by_metric(&all);
    println!("{}", super::validate::errors_table("presets on the H100 rows (in sample):", &rows));
    for (metric, e) in &rows {
        let bound = if metric.contains("TTFT") { 0.15 } else { 0.06 };
        assert!(e.median <= bound, "{metric}: median error {:.1} % above {:.0} %", e.median * 100.0, bound * 100.0);
    }
}

/// Public InferenceX measurements of gpt-oss-120b on AMD parts (`testdata/public/`; used to choose
/// the AMD presets' mechanisms, CALIBRATION.md "AMD Instinct", so not held out): the shipped
/// presets predicted their output throughput at a median error of 12 % (the worst 24 %) and the
/// blog's median TTFTs within 32 % when this test was written; it fails past 20 % at the median
/// or 35 % on any point. Before the AMD presets' rework the MI300X's throughput was 40 to 50 %
/// high.
#[test]
fn the_amd_presets_keep_their_public_checks() {
    use super::FitMetric;
    use super::validate::{Defaults, by_metric};
    let rows = super::read_points(&testdata().join("public").join("inferencex-amd-gpt-oss-120b.json")).unwrap();
    let defaults = Defaults { model: Some("openai/gpt-oss-120b".into()), ..Defaults::default() };
    let v = predicted_by_the_presets(rows, &defaults, 14);
    for r in &v.held_out {
        let bound = if r.metric == FitMetric::MedianTtft { 0.40 } else { 0.35 };
        assert!(r.error().abs() <= bound, "{} {}: {:+.1} %", r.label, r.metric.name(), r.error() * 100.0);
    }
    let all: Vec<&super::Residual> = v.held_out.iter().collect();
    for (metric, e) in by_metric(&all) {
        assert!(e.median <= 0.20, "{metric}: median error {:.1} % above 20 %", e.median * 100.0);
    }
}

/// The NVIDIA points of InferenceX's blog "Best GPU for gpt-oss-120b" (`testdata/public/`: a B200
/// at TP1, 8k/1k and 128 streams; two H100 TP2 rows of a newer vLLM than the calibration's),
/// nothing fitted on them. When this test was written the presets predicted their output
/// throughput within 6 % (the B200's +2.9 %, +10.7 % before the FP4 block-scaled experts' own
/// kernel terms) and their median TTFT within 21 % (early but for the H100's 1k/1k); it fails
/// past 10 % on throughput, which the generic expert term for the B200's FP4 experts would, or
/// 30 % on TTFT.
#[test]
fn the_blog_s_nvidia_points_stay_predicted() {
    use super::FitMetric;
    use super::validate::Defaults;
    let rows = super::read_points(&testdata().join("public").join("inferencex-blog-nvidia-gpt-oss-120b.json")).unwrap();
    let defaults = Defaults { model: Some("openai/gpt-oss-120b".into()), ..Defaults::default() };
    let v = predicted_by_the_presets(rows, &defaults, 3);
    assert_eq!(v.held_out.len(), 8, "median TTFT and throughput of each, the H100 rows' median TPOT");
    for r in &v.held_out {
        let bound = if r.metric == FitMetric::MedianTtft { 0.30 } else { 0.10 };
        assert!(r.error().abs() <= bound, "{} {}: {:+.1} %", r.label, r.metric.name(), r.error() * 100.0);
    }
}

/// Public reports of gpt-oss-20b and -120b on one H100 with 32,000-token prompts
/// (`testdata/public/`), a model, a prompt length and a tensor-parallel size that no constant was
/// fitted to: the shipped presets predicted every metric within 10 % when this test was written;
/// it fails if a change takes any of them past 15 %.
#[test]
fn public_reports_no_constant_was_fitted_to_stay_predicted() {
    let v = gpustack_reports("gpustack-h100-gpt-oss-32k.txt", "h100-sxm", 2);
    assert_eq!(v.held_out.len(), 10, "mean and median TTFT and TPOT, and throughput of each");
    for r in &v.held_out {
        assert!(r.error().abs() <= 0.15, "{} {}: {:+.1} %", r.label, r.metric.name(), r.error() * 100.0);
    }
}

/// Public reports of gpt-oss-120b (four) and gpt-oss-20b (three) on one A100
/// (`testdata/public/`), a device no constant but the Triton attention rate of their 32K
/// reports was fitted on: experts priced by the SMs' integer rate, the KV pool sized for vLLM's
/// 256-sequence default there. The median error of mean TTFT, TPOT and throughput was 6.5 %,
/// 18.5 % and 2.7 % for the 120b and 8.6 %, 11 % and 11 % for the 20b when this test was written
/// (62 %, 39 % and 41 % for the 120b before those terms); it fails past 20 % (30 % for TPOT).
#[test]
fn public_a100_reports_stay_predicted() {
    use super::Residual;
    use super::validate::by_metric;
    for (file, reports) in [("gpustack-a100-gpt-oss-120b.txt", 4), ("gpustack-a100-gpt-oss-20b.txt", 3)] {
        let v = gpustack_reports(file, "a100-80g", reports);
        let all: Vec<&Residual> = v.held_out.iter().collect();
        for (metric, e) in by_metric(&all) {
            let bound = if metric.contains("TPOT") { 0.30 } else { 0.20 };
            if metric.starts_with("mean") || metric.contains("tok/s") {
                assert!(e.median <= bound, "{file} {metric}: median error {:.1} % above {bound}", e.median * 100.0);
            }
        }
    }
}

/// The reports of `file` in `testdata/public/` (GPUStack's: `vllm serve MODEL --max-model-len
/// 32768` on vLLM 0.11.0, as each file says) predicted on `hardware` by the shipped presets.
fn gpustack_reports(file: &str, hardware: &str, expected: usize) -> super::validate::Validation {
    use super::validate::Defaults;
    let points = super::read_points(&testdata().join("public").join(file)).unwrap();
    // The files name their release (vLLM 0.11.0), which ran without async scheduling.
    let options = [("max-model-len", "32768")];
    let defaults = Defaults {
        hardware: Some(hardware.into()),
        options: options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..Defaults::default()
    };
    predicted_by_the_presets(points, &defaults, expected)
}

/// `points` predicted with the shipped presets, nothing fitted; every point maps to a deployment
/// and there are `expected` of them.
pub(super) fn predicted_by_the_presets(
    points: Vec<super::MeasuredPoint>,
    defaults: &super::validate::Defaults,
    expected: usize,
) -> super::validate::Validation {
    predicted_with_targets(points, defaults, expected).1
}

/// [`predicted_by_the_presets`], with the calibrator that holds the points' deployments and
/// workloads.
pub(super) fn predicted_with_targets(
    points: Vec<super::MeasuredPoint>,
    defaults: &super::validate::Defaults,
    expected: usize,
) -> (super::Calibrator, super::validate::Validation) {
    use super::validate::{Split, targets_for, validate};
    let (targets, skipped) = targets_for(points, defaults, &crate::presets::Presets::embedded().unwrap());
    assert!(skipped.is_empty(), "{skipped:?}");
    assert_eq!(targets.len(), expected);
    let cal = super::Calibrator::new(targets).unwrap();
    let v = validate(
        &cal,
        &Split::None,
        &[],
        SearchOptions { max_evals: 1, initial_step: 0.1, tolerance: 1.0 },
        &mut |_, _, _| {},
    );
    (cal, v)
}

/// The medians of mean TTFT, mean TPOT and output throughput errors over `file`'s reports in
/// `testdata/public/` (GPUStack's, no async scheduling, each block's `vllm serve` line giving
/// its model and flags), predicted by the shipped presets on `hardware`.
fn public_medians(file: &str, hardware: &str, expected: usize) -> [f64; 3] {
    public_medians_with(file, hardware, expected, &[])
}

/// As [`public_medians`], with serving options beyond the lab's `--no-async-scheduling`.
fn public_medians_with(file: &str, hardware: &str, expected: usize, options: &[(&str, &str)]) -> [f64; 3] {
    use super::validate::{Defaults, by_metric};
    let points = super::read_points(&testdata().join("public").join(file)).unwrap();
    // The lab's pages ran without async scheduling, unless a check says otherwise.
    let mut all_options: Vec<(String, String)> = options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    if !options.iter().any(|(k, _)| *k == "async-scheduling") {
        all_options.push(("async-scheduling".to_string(), "false".to_string()));
    }
    let defaults = Defaults { hardware: Some(hardware.into()), options: all_options, ..Defaults::default() };
    let v = predicted_by_the_presets(points, &defaults, expected);
    let all: Vec<&super::Residual> = v.held_out.iter().collect();
    let rows = by_metric(&all);
    let median = |name: &str| rows.iter().find(|(m, _)| m.as_str() == name).map(|(_, e)| e.median).unwrap();
    [median("mean TTFT (ms)"), median("mean TPOT (ms)"), median("output tok/s")]
}

/// Fails unless each of `got`'s median errors (TTFT, TPOT, throughput) is at most its `bound`.
fn assert_medians_within(name: &str, got: [f64; 3], bound: [f64; 3]) {
    for ((e, b), metric) in got.iter().zip(bound).zip(["TTFT", "TPOT", "throughput"]) {
        assert!(*e <= b, "{name} {metric}: median error {:.1} % above {:.0} %", e * 100.0, b * 100.0);
    }
}

/// The BF16 and block-FP8 expert ceilings (vLLM's Triton fused-MoE kernels) were fitted to
/// GPUStack's eight random-prompt bursts of Qwen3-235B-A22B on H100s (in sample: median errors
/// of TTFT 8.0 %, TPOT 28.6 %, throughput 7.8 %; 33 %, 52 % and 43 % with the priors before;
/// 10.5 %, 26.6 %, 10.2 % with the kernels' measured fixed cost, `fused_moe_us`, added since).
/// Held out: GLM-4.6 (160 experts and a shared one) on H200s came out at 30.5 %, 26.1 % and
/// 42.3 % (55 %, 51 % and 106 % with the priors; 30.0 %, 23.6 %, 36.4 % with `fused_moe_us`),
/// and the lab's 13 reports of Qwen3-235B on A100s at 35 %, 35 % and 56 % (39 %, 46 % and 77 %:
/// there the FP8 checkpoint runs as W8A16 through Marlin, whose ceiling did not change). Since
/// the MoE reserve stopped carrying gpt-oss's second copy of its expert scales (4.66 GiB, not 8:
/// CALIBRATION.md, "The KV pool of MXFP4 experts") and the two ceilings were refitted beside it
/// (0.165 and 0.114): in sample 4.6 %, 5.8 %, 4.2 %; GLM-4.6 24.1 %, 20.2 %, 31.1 %; the A100's
/// 28.4 %, 31.7 %, 59.1 %. Since BF16 shapes without a tuned tile table in vLLM run its default
/// tile (`cost::tiles`: GLM-4.6's at TP8 on the H200, GLM-4.5-Air's at TP4 on the A100, nothing
/// fitted on either): GLM-4.6 8.6 %, 14.5 %, 20.2 %; GLM-4.5-Air on four A100s 15.4 %, 12.9 %,
/// 16.1 % (28.9 %, 18.9 %, 42.0 % before). DeepSeek-R1 on eight H200s (MLA's prefill priced
/// decompressed, as vLLM runs it): 30.4 %, 21.4 %, 35.4 %, every burst early. Since expert
/// parallelism within one engine exchanges nothing beyond tensor parallelism's all-reduces (as
/// vLLM runs it; the two all-to-alls priced before belong to data-parallel ranks only), the
/// A100's two expert-parallel bursts lost a cost that had hidden part of that page's FP8 error:
/// 35.2 %, 33.3 %, 59.1 %; its pair of TP4 bursts with and without expert parallelism now
/// differs by 0.2 % in TTFT where it measured 6.6 % (24.9 % before). Since a block whose heading
/// names ShareGPT gets that dataset's lengths behind its totals (`calibration::datasets`; the
/// lab's 1,000-prompt ShareGPT bursts had been spread evenly): the A100's 41.3 %, 31.7 %, 36.5 %;
/// GLM-4.6 18.1 %, 13.2 %, 10.7 %; GLM-4.5-Air 16.5 %, 12.9 %, 11.1 % (throughput closer, the
/// chat bursts' first tokens, the known miss of the frontend, further off). Since a burst of chat
/// requests reaches the scheduler once the frontend has rendered every one of them
/// (`engine::frontend`; all of the lab's runs went through the chat endpoint): in sample 7.2 %,
/// 5.8 %, 5.3 % (the ceilings were fitted with the one-at-a-time frontend; the bursts' P90s fell
/// from 50.5 %, 60.9 %, 25.0 % to 21.7 %, 100.2 %, 20.9 %); the A100's 28.3 %, 31.7 %, 30.1 %;
/// GLM-4.6 18.0 %, 13.2 %, 9.2 %; GLM-4.5-Air 16.8 %, 12.9 %, 6.1 %; DeepSeek-R1 24.1 %, 21.4 %,
/// 30.0 %. Since dense Marlin products run at Marlin's share of the tensor rate (`dequant_mma`),
/// the A100's FP8 attention projections with them: the A100's 24.6 %, 24.8 %, 21.8 %. Since
/// prompts are tokenized on the API server's tokenizing thread beside its loop, not on it, and
/// the frontend's three request constants were refitted for that (`engine::frontend`; 6.01 ms
/// a request rendered instead of 5.0): in sample 10.4 %, 5.8 %, 7.2 % (a thousand chat prompts
/// rendered at 6.01 ms each come out later); GLM-4.6 14.0 %, 13.2 %, 7.6 %; the A100's 24.1 %,
/// 24.8 %, 20.7 %; GLM-4.5-Air 11.3 %, 7.6 %, 4.7 %. The bounds hold those with a little room.
#[test]
fn the_expert_ceilings_hold_on_the_public_reports_of_other_moe_models() {
    let h100 = public_medians("gpustack-h100-qwen3-235b.txt", "h100-sxm", 8);
    let a100 = public_medians("gpustack-a100-qwen3-235b.txt", "a100-80g", 13);
    let glm = public_medians("gpustack-h200-glm-4.6.txt", "h200", 6);
    let air = public_medians("gpustack-a100-glm-4.5-air.txt", "a100-80g", 5);
    let r1 = public_medians_with("gpustack-h200-deepseek-r1.json", "h200", 4, &[("max-model-len", "32768")]);
    for (name, got, bound) in [
        ("H100 (in sample)", h100, [0.11, 0.08, 0.08]),
        ("A100", a100, [0.31, 0.34, 0.33]),
        ("GLM-4.6 on H200", glm, [0.20, 0.15, 0.11]),
        ("GLM-4.5-Air on A100", air, [0.18, 0.15, 0.08]),
        ("DeepSeek-R1 on H200", r1, [0.27, 0.25, 0.33]),
    ] {
        assert_medians_within(name, got, bound);
    }
}

/// GPUStack's lab sent 1,000 prompts at once (ShareGPT's, and 128 tokens with 4 out) through
/// the chat endpoint on every page: 22 such bursts of models whose chat template is Jinja (984
/// of the H100 Qwen3-235B page's 1,000 succeeded; the gpt-oss pages render harmony and are
/// left out). With the frontend taking one request
/// at a time their mean TTFT came out short at the median by 47.6 % (P90 64.7 %) and their
/// output throughput high by 33.2 % (P90 80.5 %); with a burst handed on once the frontend has
/// rendered all of it (`engine::frontend`, the same 5 ms a request): TTFT 25.7 % (P90 43.5 %,
/// still short: -24.2 % at the median), throughput 10.8 % (P90 44.9 %), TPOT 25.5 % -> 23.1 %.
#[test]
fn the_lab_s_chat_bursts_reach_their_first_tokens_once_the_frontend_has_rendered_them() {
    use super::validate::Defaults;
    let sync = ("async-scheduling", "false");
    let mem = ("gpu-memory-utilization", "0.95");
    type Check<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);
    let files: [Check; 9] = [
        ("gpustack-h100-qwen3-235b.txt", "h100-sxm", &[sync]),
        ("gpustack-h100-qwen3-14b.txt", "h100-pcie", &[sync]),
        ("gpustack-h100-qwen3-32b.txt", "h100-pcie", &[sync, mem]),
        ("gpustack-h200-glm-4.6.txt", "h200", &[sync]),
        ("gpustack-h200-deepseek-r1.json", "h200", &[sync, ("max-model-len", "32768")]),
        ("gpustack-a100-qwen3-235b.txt", "a100-80g", &[sync]),
        ("gpustack-a100-glm-4.5-air.txt", "a100-80g", &[sync]),
        ("gpustack-a100-qwen3-14b.txt", "a100-80g", &[sync]),
        ("gpustack-a100-qwen3-32b.txt", "a100-80g", &[sync, mem]),
    ];
    let (mut ttft, mut throughput) = (Vec::new(), Vec::new());
    for (file, hardware, options) in files {
        let points: Vec<_> = super::read_points(&testdata().join("public").join(file))
            .unwrap()
            .into_iter()
            .filter(|p| p.workload.num_prompts >= 900)
            .collect();
        assert!(points.iter().all(|p| p.workload.chat), "{file}: every block went through the chat endpoint");
        let options = options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let defaults = Defaults { hardware: Some(hardware.into()), options, ..Defaults::default() };
        let n = points.len();
        for r in predicted_by_the_presets(points, &defaults, n).held_out {
            match r.metric {
                FitMetric::MeanTtft => ttft.push(r.error()),
                FitMetric::OutputThroughput => throughput.push(r.error()),
                _ => {}
            }
        }
    }
    assert_eq!((ttft.len(), throughput.len()), (22, 22));
    let median_abs = |v: &[f64]| median(&v.iter().map(|e| e.abs()).collect::<Vec<_>>());
    let (t, q) = (median_abs(&ttft), median_abs(&throughput));
    assert!(t <= 0.28 && q <= 0.12, "median errors: TTFT {:.1} %, throughput {:.1} %", t * 100.0, q * 100.0);
    assert!(median(&ttft) > -0.27, "TTFT bias {:.1} %", median(&ttft) * 100.0);
}

/// GPUStack's dense Qwen3-14B and Qwen3-32B pages ran on one H100 PCIe: their decode steps
/// match its 2 TB/s (the 32B's 32,000-token run: median ITL 43.30 ms measured, 43.22 predicted;
/// an SXM would take 27.6), and the 32B at its default context only fits 80 GB at a memory
/// utilization of 0.95. The part's clock under load (`sustained_clock` 0.62) was fitted on the
/// 14B's five reports (in sample: median errors TTFT 11.7 %, TPOT 4.7 %, throughput 6.6 %);
/// the 32B's five are held out (5.9 %, 5.5 %, 6.9 %; with the SXM preset 30 %, 56 %, 46 %).
#[test]
fn the_h100_pcie_preset_predicts_the_lab_s_dense_reports() {
    let options = [("gpu-memory-utilization", "0.95")];
    let fourteen = public_medians_with("gpustack-h100-qwen3-14b.txt", "h100-pcie", 5, &options);
    let thirty_two = public_medians_with("gpustack-h100-qwen3-32b.txt", "h100-pcie", 5, &options);
    for (name, got, bound) in [
        ("Qwen3-14B (in sample)", fourteen, [0.14, 0.07, 0.09]),
        ("Qwen3-32B (held out)", thirty_two, [0.08, 0.08, 0.09]),
    ] {
        assert_medians_within(name, got, bound);
    }
}

/// The same lab's Qwen3-14B page for one A100 (vLLM 0.11.0), on which nothing was fitted: the
/// A100 preset's dense terms (datasheet peak and bandwidth, the H100's constants) predict its
/// five reports at median errors of TTFT 12.4 %, TPOT 17.4 %, throughput 14.8 %; the
/// prefill-bound runs of 32,000, 4,000 and 2,000-token prompts come within 8 to 17 %, the
/// bursts of 1,000 short chat prompts come out early (the frontend, CALIBRATION.md).
/// Its Qwen3-32B page (the 32,000-token runs and the 32,768-token server only fit the simulated
/// card at a memory utilization of 0.95): TTFT 7.8 %, TPOT 27.4 % (slow), throughput 8.1 %.
#[test]
fn a_dense_model_on_the_a100_is_predicted_from_its_datasheet() {
    let fourteen = public_medians("gpustack-a100-qwen3-14b.txt", "a100-80g", 5);
    let options = [("gpu-memory-utilization", "0.95")];
    let thirty_two = public_medians_with("gpustack-a100-qwen3-32b.txt", "a100-80g", 5, &options);
    for (name, got, bound) in
        [("Qwen3-14B", fourteen, [0.15, 0.20, 0.17]), ("Qwen3-32B", thirty_two, [0.10, 0.30, 0.10])]
    {
        assert_medians_within(name, got, bound);
    }
}

/// The same pages' quantized checkpoints (Qwen3-14B and -32B in FP8 and AWQ, ShareGPT bursts
/// of 1,000 on one A100), which vLLM runs through Marlin there: priced with cuBLAS's dense BF16
/// ceiling, they came out fast by a median 34.6 % (TTFT), 21.9 % (TPOT) and 28.7 %
/// (throughput); at Marlin's own share of the tensor rate (`dequant_mma`, the experts' constant
/// from before these reports were read, nothing fitted on them) 24.7 %, 8.7 % and 11.9 %. The
/// TTFT left is the chat bursts' early first token that the pages' BF16 bursts show as well.
#[test]
fn dense_quantized_checkpoints_on_the_a100_run_at_marlin_s_share_of_the_tensor_rate() {
    let file = "gpustack-a100-qwen3-dense-quantized.txt";
    let now = public_medians(file, "a100-80g", 4);
    assert_medians_within("A100 FP8 and AWQ", now, [0.27, 0.11, 0.14]);
    // cuBLAS's ceiling in its place (the A100 preset's dense BF16 one) undoes it.
    let bf16_ceiling = public_medians_with(file, "a100-80g", 4, &[("dequant-mma", "0.6")]);
    assert!(bf16_ceiling[1] > 0.18 && bf16_ceiling[2] > 0.25, "{bf16_ceiling:?}");
}

/// A report pasted on NVIDIA's developer forum (crates/sim/testdata/public/README.md) as users
/// write them: the serve command as a template inside `docker exec ... bash -c "..."` with
/// typographic quotes and placeholders (`M`, `-tp X`), then the model, then `4 nodes (tp)`.
/// The headings give the deployment (tp 4 over four DGX Sparks, FP8 KV cache, memory
/// utilization 0.8), and the preset, which nothing from this post set, predicts its one-prompt
/// run at TTFT -5.1 %, TPOT -0.6 %, throughput +0.7 %, synchronously, as vLLM's Ray executor
/// runs an engine over several machines.
#[test]
fn a_forum_report_of_four_sparks_is_read_from_its_headings_and_predicted() {
    let file = "nvidia-forum-spark-qwen3-vl-32b-fp8.txt";
    let points = super::read_points(&testdata().join("public").join(file)).unwrap();
    let labels = &points[0].labels;
    for (key, value) in [
        ("model", "Qwen/Qwen3-VL-32B-Instruct-FP8"),
        ("tp-nodes", "4"),
        ("kv-cache-dtype", "fp8"),
        ("gpu-memory-utilization", "0.8"),
        ("distributed-executor-backend", "ray"),
    ] {
        assert!(labels.iter().any(|(k, v)| k == key && v == value), "{key}={value} not in {labels:?}");
    }
    // Its deployment spans four machines: synchronous unless chosen, as on vLLM's Ray executor,
    // which its command also names.
    let deployment: Vec<(String, String)> =
        labels.iter().filter(|(k, _)| ["tp-nodes", "kv-cache-dtype"].contains(&k.as_str())).cloned().collect();
    let presets = crate::presets::Presets::embedded().unwrap();
    let model = "Qwen/Qwen3-VL-32B-Instruct-FP8";
    let setup = crate::setup::SimSetup::resolve_with(&presets, model, "dgx-spark", &deployment, None).unwrap();
    assert!(
        !setup.options.async_scheduling && setup.options.sync_because == Some(crate::options::SyncBecause::RayExecutor)
    );
    // With the executor its command names, the reason is that choice.
    let named: Vec<(String, String)> = labels
        .iter()
        .filter(|(k, _)| ["tp-nodes", "kv-cache-dtype", "distributed-executor-backend"].contains(&k.as_str()))
        .cloned()
        .collect();
    let setup = crate::setup::SimSetup::resolve_with(&presets, model, "dgx-spark", &named, None).unwrap();
    assert_eq!(setup.options.sync_because, Some(crate::options::SyncBecause::RayChosen));
    let got = public_medians_with(file, "dgx-spark", 1, &[("async-scheduling", "false")]);
    assert_medians_within("Qwen3-VL-32B-FP8 on four Sparks (held out)", got, [0.12, 0.05, 0.05]);
}

/// A report whose serve command was pasted over three lines (`\` at each line's end): the
/// headings still give the whole deployment (vLLM pull request 43232's B200 run,
/// crates/sim/testdata/public/README.md), and the prediction keeps the miss CALIBRATION.md
/// records ("B200: block-scaled FP8 experts"), held out: throughput fast, first tokens early.
#[test]
fn a_serve_command_over_several_lines_gives_the_b200_run_its_deployment() {
    let file = "vllm-pr-43232-b200-qwen3-235b-fp8.txt";
    let points = super::read_points(&testdata().join("public").join(file)).unwrap();
    assert_eq!(points.len(), 1);
    let labels = &points[0].labels;
    for (key, value) in [
        ("model", "Qwen/Qwen3-235B-A22B-FP8"),
        ("tp", "4"),
        ("kv-cache-dtype", "fp8"),
        ("max-model-len", "32768"),
        ("gpu-memory-utilization", "0.85"),
    ] {
        assert!(labels.iter().any(|(k, v)| k == key && v == value), "{key}={value} not in {labels:?}");
    }
    let defaults = super::validate::Defaults { hardware: Some("b200".into()), ..Default::default() };
    let v = predicted_by_the_presets(points, &defaults, 1);
    let error = |metric: super::FitMetric| v.held_out.iter().find(|r| r.metric == metric).unwrap().error();
    assert!(v.held_out.iter().all(|r| r.metric != super::FitMetric::MeanTpot), "the copy has no TPOT");
    let (ttft, tput) = (error(super::FitMetric::MeanTtft), error(super::FitMetric::OutputThroughput));
    assert!((-0.6..=-0.3).contains(&ttft) && (0.3..=0.6).contains(&tput), "TTFT {ttft:+.3}, throughput {tput:+.3}");
}

/// One stream's decode on an A100 and an RTX 4090 (`tenstorrent-gpu-one-stream.json`: the mean
/// TPOTs of the vLLM reference sweeps in tenstorrent/tt-inference-server's issues 340 and 394).
/// Nothing was fitted to them; they showed the A100's light steps 10 to 18 % slower than the
/// H100's constants said, the gap that the kernel floor's scaling with the boost clock
/// (1,410 MHz against the H100's 1,980) closes: median error 16.3 % before, 6.8 % after over
/// all sixteen, the A100's within 9 %. The RTX 4090's were 16 to 20 % slow with the GDDR
/// prior `eta_bw` 0.8; at the 0.9 public microbenchmarks of its GDDR6X read (CALIBRATION.md,
/// "Other NVIDIA devices"; these rows seen before, not fitted) they are 5 to 9 % slow, and fail
/// past 12 %.
#[test]
fn one_stream_s_decode_on_an_a100_follows_its_clock() {
    let points = super::read_points(&testdata().join("public/tenstorrent-gpu-one-stream.json")).unwrap();
    let v = predicted_by_the_presets(points, &super::validate::Defaults::default(), 16);
    let errors = |hw: &str| -> Vec<f64> {
        let on = format!("hw={hw}");
        v.held_out.iter().filter(|r| r.labels.contains(&on)).map(|r| r.simulated / r.measured - 1.0).collect()
    };
    let (a100, rtx) = (errors("a100-80g"), errors("rtx-4090"));
    assert_eq!((a100.len(), rtx.len()), (10, 6));
    assert!(a100.iter().all(|e| e.abs() <= 0.09), "{a100:?}");
    assert!(rtx.iter().all(|e| (0.0..=0.12).contains(e)), "{rtx:?}");
}
