//! Tests of the comparison: the reference reports side by side and as a sweep, two measured
//! runs with intervals and `--fail-on` verdicts, and the errors.

use servebench_core::config::Metric;

use super::*;
use crate::testutil::*;
use servebench_core::threshold::Outcome;
use servebench_core::threshold::parse_fail_on as parse_rules;

fn compared(runs: &[StoredRun]) -> Comparison {
    Comparison::new(runs, None).unwrap()
}

/// Run A and a run B whose latencies are 30 % higher, both with records.
fn slower_pair() -> Vec<StoredRun> {
    let a = Synth { requests: 200, ..Synth::new("org/model", 1) };
    let b = Synth { requests: 200, ttft_ms: 130.0, itl_ms: 26.0, ..Synth::new("org/model", 2) };
    stored(&[a.new_run().with_label("build", "old"), b.new_run().with_label("build", "new")])
}

#[test]
fn the_000_models_side_by_side() {
    let c = compared(&reference_000());
    insta::assert_snapshot!("000_table", c.render(Format::Table, true));
    insta::assert_snapshot!("000_markdown", c.render(Format::Markdown, true));
    let csv = c.render(Format::Csv, true);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 12);
    assert!(
        lines[0].starts_with(
            "id,uid,kind,name,model,completed,failed,failed_pct,request_throughput,input_sequence_throughput,"
        ),
        "{}",
        lines[0]
    );
    assert!(
        lines[4]
            .starts_with("4,run00004,import,Qwen/Qwen3-0.6B,Qwen/Qwen3-0.6B,20,0,0,0.98,,124.81,249.62,,,,,495.14,")
    );
}

#[test]
fn the_001_sweep_pivots_on_num_prompts() {
    let c = compared(&reference_001());
    insta::assert_snapshot!("001_sweep", c.render(Format::Table, true));
    let short = compared(&reference_001_short());
    insta::assert_snapshot!("001_short_sweep", short.render(Format::Markdown, false));
}

#[test]
fn runs_that_ended_early_are_named_under_the_tables() {
    let mut runs: Vec<StoredRun> = reference_000().into_iter().take(4).collect();
    let text = compared(&runs).render(Format::Table, false);
    assert!(!text.contains("ended early"), "{text}");
    runs[1].row.interrupted = true;
    runs[2].row.interrupted = true;
    let text = compared(&runs).render(Format::Table, false);
    let note = "Note: Runs 2-3 ended early (interrupted, or stopped by a rule): their figures are of the requests";
    assert!(text.contains(note), "{text}");
}

#[test]
fn a_few_runs_get_a_column_each() {
    let runs: Vec<StoredRun> = reference_000().into_iter().take(3).collect();
    let text = compared(&runs).render(Format::Table, false);
    insta::assert_snapshot!(text);
}

#[test]
fn two_measured_runs_get_intervals_and_the_gate_fails_on_a_significant_regression() {
    let runs = slower_pair();
    let c = compared(&runs);
    insta::assert_snapshot!("pair_table", c.render(Format::Table, true));
    let pair = c.pair.as_ref().unwrap();
    let p99 = pair.row(Quantity::Latency(Stat::P99, Metric::Ttft)).unwrap().estimate.unwrap();
    assert_eq!(p99.method, crate::bootstrap::Method::Bootstrap);
    assert!(p99.ci.low > 0.0, "{p99:?}");
    assert_eq!((p99.n_a, p99.n_b), (200, 200));
    // ITL has one value per chunk: 23 gaps in each of 200 requests.
    assert_eq!(pair.row(Quantity::Latency(Stat::Median, Metric::Itl)).unwrap().estimate.unwrap().n_a, 200 * 23);

    let gate = c.check(&parse_rules(&["p99_ttft_ms>+10%,median_tpot_ms>+5%"]).unwrap()).unwrap();
    assert!(gate.failed());
    let text = gate.text();
    assert!(text.starts_with("FAIL p99_ttft_ms>+10%: "), "{text}");
    assert!(text.contains("excludes 0"), "{text}");
    // A threshold the change does not pass, and the other way round.
    let gate = c.check(&parse_rules(&["median_ttft_ms>+50%,output_throughput<-50%"]).unwrap()).unwrap();
    assert!(!gate.failed(), "{}", gate.text());
    assert!(gate.text().starts_with("pass median_ttft_ms>+50%: "), "{}", gate.text());
    // B against itself in the other order: an improvement, which a `>` rule never fails on.
    let reversed = compared(&[runs[1].clone(), runs[0].clone()]);
    assert!(!reversed.check(&parse_rules(&["p99_ttft_ms>+10%"]).unwrap()).unwrap().failed());
    assert!(reversed.check(&parse_rules(&["output_throughput>+10%"]).unwrap()).unwrap().failed());
    // Interactivity, 1000 / median TPOT, is judged on the median TPOT row: B's 26 ms chunks
    // against A's 20 ms are 23 % fewer tokens a second per user.
    let tpot = pair.row(Quantity::Latency(Stat::Median, Metric::Tpot)).unwrap();
    let rate = pair.judged(Quantity::Interactivity).unwrap();
    assert_eq!((rate.a, rate.b), (Some(1000.0 / tpot.a.unwrap()), Some(1000.0 / tpot.b.unwrap())));
    let gate = c.check(&parse_rules(&["interactivity<-10%,output_throughput_per_gpu<-10%"]).unwrap()).unwrap();
    assert_eq!(gate.verdicts[0].outcome, Outcome::Fail, "{}", gate.text());
    assert!(gate.text().contains("SKIP output_throughput_per_gpu<-10%: not checked: the runs do not both have an"));
}

#[test]
fn a_candidate_that_completed_nothing_fails_its_latency_rules_and_shows_no_latency() {
    let ok = Synth { requests: 12, ..Synth::new("m", 21) };
    let broken = Synth { requests: 12, fail_every: Some(1), ..Synth::new("m", 22) };
    let runs = stored(&[ok.new_run(), broken.new_run()]);
    let c = compared(&runs);
    let row = c.pair.as_ref().unwrap().row(Quantity::Latency(Stat::P99, Metric::Ttft)).unwrap().clone();
    assert_eq!((row.a.is_some(), row.b), (true, None), "{row:?}");
    let gate = c.check(&parse_rules(&["p99_ttft_ms>+10%,median_tpot_ms>+5%,failed>5"]).unwrap()).unwrap();
    assert!(gate.failed(), "{}", gate.text());
    assert!(
        gate.text().starts_with("FAIL p99_ttft_ms>+10%: run B completed no request, so it has no p99 TTFT"),
        "{}",
        gate.text()
    );
    // Interactivity is read from the median TPOT: with none, it fails too, never skips.
    let gate = c.check(&parse_rules(&["interactivity<-10%"]).unwrap()).unwrap();
    assert!(
        gate.text().starts_with("FAIL interactivity<-10%: run B completed no request, so it has no interactivity"),
        "{}",
        gate.text()
    );
    // The other way round there is no baseline to judge a latency against: not checked.
    let reversed = compared(&[runs[1].clone(), runs[0].clone()]);
    let gate = reversed.check(&parse_rules(&["p99_ttft_ms>+10%"]).unwrap()).unwrap();
    assert!(!gate.failed() && gate.text().starts_with("SKIP p99_ttft_ms>+10%: not checked"), "{}", gate.text());
}

#[test]
fn failure_rules_are_judged_from_a_clean_baseline_and_on_failed_pct() {
    let clean = Synth { requests: 12, ..Synth::new("m", 23) };
    let failing = Synth { requests: 12, fail_every: Some(4), ..Synth::new("m", 24) };
    let runs = stored(&[clean.new_run(), failing.new_run(), clean.new_run()]);
    let rules = parse_rules(&["failed>+10%,failed_pct>+50%,failed_pct>+20"]).unwrap();
    let gate = compared(&runs[..2]).check(&rules).unwrap();
    assert!(gate.failed(), "{}", gate.text());
    assert!(gate.text().starts_with("FAIL failed>+10%: 0 -> 3 (+inf %), past +10.00 %"), "{}", gate.text());
    assert!(
        gate.text().contains("FAIL failed_pct>+20: 0.00 % -> 25.00 % (+25.00 %), past +20.00 %"),
        "{}",
        gate.text()
    );
    assert!(gate.verdicts.iter().all(|v| v.outcome == Outcome::Fail), "{}", gate.text());
    let gate = compared(&[runs[0].clone(), runs[2].clone()]).check(&rules).unwrap();
    assert!(gate.verdicts.iter().all(|v| v.outcome == Outcome::Pass), "{}", gate.text());
}

#[test]
fn a_change_inside_the_noise_passes_the_threshold_but_not_the_gate() {
    // Two samples of the same behaviour, 12 requests each: P99s differ by chance.
    let a = Synth { requests: 12, ..Synth::new("m", 11) };
    let b = Synth { requests: 12, ..Synth::new("m", 12) };
    let runs = stored(&[a.new_run(), b.new_run()]);
    let c = compared(&runs);
    let row = c.pair.as_ref().unwrap().row(Quantity::Latency(Stat::P99, Metric::Ttft)).unwrap().clone();
    let rel = row.rel().unwrap();
    assert!(!row.estimate.unwrap().ci.excludes_zero(), "{row:?}");
    // A rule at half the observed change: passed, but not significant.
    let rule = if rel > 0.0 {
        format!("p99_ttft_ms>+{:.3}%", rel * 50.0)
    } else {
        format!("p99_ttft_ms<-{:.3}%", -rel * 50.0)
    };
    let gate = c.check(&parse_rules(&[&rule]).unwrap()).unwrap();
    assert!(!gate.failed(), "{}", gate.text());
    assert!(gate.text().contains("includes 0: not a significant change"), "{}", gate.text());
}

#[test]
fn imported_runs_are_compared_on_their_summaries() {
    let runs: Vec<StoredRun> = reference_000().into_iter().take(2).collect();
    let c = compared(&runs);
    let text = c.render(Format::Table, false);
    insta::assert_snapshot!(text);
    assert!(text.contains("Run 1 has no per-request records"), "{text}");
    let gate = c.check(&parse_rules(&["p99_ttft_ms<-10%,p99_e2el_ms>+1%"]).unwrap()).unwrap();
    assert!(gate.failed());
    assert!(gate.text().contains("no confidence interval (summaries only), so the threshold alone decides"));
    assert!(gate.text().contains("SKIP p99_e2el_ms>+1%: not checked: the runs do not both have a p99 E2EL"));
}

#[test]
fn no_runs_is_an_error_and_a_bad_axis_says_why() {
    assert!(matches!(Comparison::new(&[], None), Err(ReportError::NoRuns)));
    let err = Comparison::new(&reference_000(), Some("num_prompts")).unwrap_err();
    assert!(err.to_string().starts_with("--by num_prompts: no run has this setting"), "{err}");
}

#[test]
fn a_setting_that_follows_the_axis_is_not_named_as_a_series_key() {
    // Two models swept over concurrency, with num_prompts scaled to 10 × concurrency: num_prompts
    // follows the axis, so the series are told apart by the model alone.
    let mut runs = Vec::new();
    for model in ["org/a", "org/b"] {
        for c in [1usize, 2, 4] {
            runs.push(Synth { requests: 10 * c, concurrency: c, ..Synth::new(model, c as u64) }.new_run());
        }
    }
    let text = compared(&stored(&runs)).render(Format::Table, false);
    assert!(text.contains("by max_concurrency"), "{text}");
    assert!(!text.contains("model num_prompts"), "num_prompts follows the axis:\n{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("model ")), "the series are keyed by model:\n{text}");
}

#[test]
fn numbers_are_shown_as_ranges() {
    assert_eq!(ranges(&[1, 2, 3, 5, 7, 8]), "1-3, 5, 7-8");
    assert_eq!(ranges(&[4]), "4");
    assert_eq!(ranges(&[]), "");
    assert_eq!(ranges(&[i64::MAX - 1, i64::MAX]), format!("{}-{}", i64::MAX - 1, i64::MAX));
}

#[test]
fn pooling_runs_compare_their_latency_as_e2el_alone() {
    // One chunk a request, at its end: a pooling answer.
    let pooled = |seed| {
        let mut run = Synth { requests: 40, tokens: 1, ..Synth::new("org/embedder", seed) }.run();
        run.config.target.backend = servebench_core::config::Backend::OpenaiEmbeddings;
        let summary = servebench_core::metrics::Summary::compute(&run);
        servebench_store::NewRun::from_run(servebench_store::RunKind::Bench, &run, &summary)
    };
    let c = compared(&stored(&[pooled(1), pooled(2)]));
    let pair = c.pair.as_ref().unwrap();
    for metric in [Metric::Ttft, Metric::Tpot, Metric::Itl] {
        let row = pair.row(Quantity::Latency(Stat::Median, metric));
        assert!(row.is_none_or(|r| r.a.is_none() && r.b.is_none() && r.estimate.is_none()), "{metric:?}: {row:?}");
    }
    let e2el = pair.row(Quantity::Latency(Stat::Median, Metric::E2el)).unwrap();
    assert!(e2el.a.is_some() && e2el.estimate.is_some(), "{e2el:?}");
}
