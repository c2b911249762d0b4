//! What `sim validate` compares: the metrics a measured point carries, how the twin computes
//! the same from its simulated records, and which of them a fit matches.

use super::tests::{point, setup};
use super::*;

#[test]
fn the_fit_metrics_are_the_summary_s() {
    let mut s = setup(&[]);
    s.stack.jitter_sigma = 0.05;
    let mut p = point(30, 200, 40, Some(8));
    p.workload.output = Lengths::Shape { total: 30 * 40, quantiles: vec![(0.0, 1.0), (1.0, 80.0)] };
    // Sampling the engine's phases, as a point that measured them is predicted.
    let prepared = run::PreparedPoint::new(&p.workload, 3).unwrap().sampling_phases();
    let mut result = prepared.run(&s);
    // The end-to-end latency's section, which a report prints where asked for it.
    result.config.output.percentile_metrics.push(servebench_core::config::Metric::E2el);
    let summary = servebench_core::metrics::Summary::compute(&result);
    let fast = run::FitMetrics::of(&result);
    for m in FitMetric::REPORTED {
        let (a, b) = (fast.get(m).unwrap(), m.of(&summary).unwrap());
        assert!((a / b - 1.0).abs() < 1e-12, "{}: {a} vs {b}", m.name());
    }
    let too_big = PointWorkload { num_prompts: 2_000_000, ..p.workload.clone() };
    let err = run::PreparedPoint::new(&too_big, 0).err().unwrap();
    assert!(err.contains("more than"), "{err}");
}

/// A measured median TPOT and end-to-end latency are predicted and reported beside the others,
/// but the fit neither matches them (they move with the TTFT and the mean TPOT it matches) nor
/// counts them among the values that let it fit one more constant.
#[test]
fn the_median_tpot_and_the_end_to_end_latency_are_reported_but_not_fitted() {
    let s = setup(&[]);
    let mut p = point(16, 300, 64, Some(8));
    p.measured = vec![(FitMetric::MeanTtft, 50.0), (FitMetric::MeanTpot, 5.0)];
    let without = p.clone();
    let plain = Calibrator::new(vec![Target { setup: s.clone(), point: without.clone() }]).unwrap();
    let reported_only: Vec<FitMetric> = FitMetric::REPORTED.into_iter().filter(|m| !m.fitted()).collect();
    assert_eq!(
        reported_only,
        [FitMetric::MedianTpot, FitMetric::MeanE2el, FitMetric::MedianE2el, FitMetric::EngineTtft]
    );
    // Measured far from anything the twin predicts: were they fitted, the loss would show it.
    p.measured.extend(reported_only.iter().map(|&m| (m, 1e5)));
    let with = Calibrator::new(vec![Target { setup: s.clone(), point: p.clone() }]).unwrap();
    let r = with.simulate(0, &[]);
    let got = |m: FitMetric| r.iter().find(|r| r.metric == m).unwrap_or_else(|| panic!("{m:?} is predicted")).simulated;
    let (ttft, tpot) = (got(FitMetric::MeanTtft), got(FitMetric::MeanTpot));
    assert!(got(FitMetric::MedianTpot) > 0.0 && (got(FitMetric::MedianTpot) / tpot - 1.0).abs() < 0.2, "{r:?}");
    // Every request generates its 64 tokens: its latency is its first token and 63 gaps.
    let e2el = ttft + 63.0 * tpot;
    assert!((got(FitMetric::MeanE2el) / e2el - 1.0).abs() < 1e-9, "{r:?}");
    assert!(got(FitMetric::MedianE2el) > ttft && (got(FitMetric::MedianE2el) / e2el - 1.0).abs() < 0.2, "{r:?}");
    // The engine's share of the first token (the sampled queue and prefill): the frontend's
    // work and the API delay come on top of it.
    let engine = got(FitMetric::EngineTtft);
    assert!(engine > 0.0 && engine < ttft, "{r:?}");
    assert_eq!(with.loss(&[0], &[]), plain.loss(&[0], &[]));
    assert_eq!(default_params(&s, &[p.clone()]), default_params(&s, &[without]));
    assert!(reported_only.iter().all(|m| !FitMetric::ALL.contains(m)));
}

/// A block of GPUStack's benchmark runner (its `Latency` section) gets vLLM's TPOT and output
/// throughput rebuilt from its totals; a plain vLLM block keeps its own.
#[test]
fn runner_blocks_get_vllm_s_tpot_and_throughput_from_their_totals() {
    let block = |generated: u32, latency: bool| {
        let section = if latency {
            "----------------------Latency---------------------\nMean Latency(s):                          1.00\n\
             Median Latency(s):                        0.90\n"
        } else {
            ""
        };
        format!(
            "============ Serving Benchmark Result ============\n\
             Successful requests:                     4\n\
             Benchmark duration (s):                  2.00\n\
             Total input tokens:                      400\n\
             Total generated tokens:                  {generated}\n\
             Request throughput (req/s):              2.00\n\
             Output token throughput (tok/s):         999.00\n\
             Total token throughput (tok/s):          1199.00\n\
             {section}\
             ---------------Time to First Token----------------\n\
             Mean TTFT (ms):                          100.00\n\
             Median TTFT (ms):                        100.00\n\
             P99 TTFT (ms):                           100.00\n\
             -----Time per Output Token (excl. 1st token)------\n\
             Mean TPOT (ms):                          2.50\n\
             Median TPOT (ms):                        2.50\n\
             P99 TPOT (ms):                           2.50\n\
             ==================================================\n"
        )
    };
    let text = format!("{}\n{}\n{}", block(40, true), block(41, true), block(40, false));
    let points = super::points::points_from_report(&text, "runner.txt").unwrap();
    // Ten tokens a request: (1,000 ms - 100 ms) / 9 between them; 40 tokens over 2 s.
    let fixed = &points[0];
    assert!((fixed.value(FitMetric::MeanTpot).unwrap() - 100.0).abs() < 1e-9);
    assert_eq!(fixed.value(FitMetric::OutputThroughput), Some(20.0));
    assert!(fixed.labels.contains(&("client".to_string(), "gpustack-runner".to_string())));
    // The runner's median TPOT is its own column's, which no rebuilt figure replaces.
    assert_eq!(fixed.value(FitMetric::MedianTpot), None);
    // Its latencies are the requests' end to end.
    assert_eq!(fixed.value(FitMetric::MeanE2el), Some(1000.0));
    assert_eq!(fixed.value(FitMetric::MedianE2el), Some(900.0));
    // Requests of different lengths: no TPOT can be rebuilt, so none is compared.
    assert_eq!(points[1].value(FitMetric::MeanTpot), None);
    assert_eq!(points[1].value(FitMetric::OutputThroughput), Some(20.5));
    // vLLM's own block is read as printed, its median TPOT too.
    assert_eq!(points[2].value(FitMetric::MeanTpot), Some(2.5));
    assert_eq!(points[2].value(FitMetric::MedianTpot), Some(2.5));
    assert_eq!(points[2].value(FitMetric::OutputThroughput), Some(999.0));
    assert!(points[2].labels.iter().all(|(k, _)| k != "client"));
    assert_eq!(points[2].value(FitMetric::MeanE2el), None, "no E2EL section");
}

/// A point whose prompts share a prefix is predicted with that prefix cached after the first
/// request: the same prompts, unique, take longer to their first token, by the prefill of the
/// shared tokens; the prompt tokens the run counts do not change.
#[test]
fn a_shared_prefix_is_cached_after_the_first_request() {
    let s = setup(&[]);
    let mut p = point(20, 8192, 16, None);
    p.workload.request_rate = 2.0;
    let mut ttft = |shared: u32| {
        p.workload.shared_prefix = shared;
        let result = run::PreparedPoint::new(&p.workload, 5).unwrap().run(&s);
        let prompts: u64 = result.records.iter().map(|r| u64::from(r.prompt_tokens())).sum();
        (run::FitMetrics::of(&result).ttft_median_ms.unwrap(), prompts)
    };
    let (unique, n_unique) = ttft(0);
    let (shared, n_shared) = ttft(8064);
    assert_eq!(n_unique, n_shared);
    assert!(shared < 0.5 * unique, "{shared} ms with 8,064 of 8,192 tokens shared, {unique} ms with none");
}

/// Groups are listed value by value, numbers as numbers (`--by request_rate`, `--by tp,conc`).
#[test]
fn groups_are_listed_in_the_order_of_their_values() {
    let mut names =
        vec!["request_rate=10", "request_rate=2.5", "request_rate=1", "request_rate=inf", "request_rate=50"];
    names.sort_by(|a, b| validate::group_order(a, b));
    assert_eq!(names, ["request_rate=1", "request_rate=2.5", "request_rate=10", "request_rate=50", "request_rate=inf"]);
    let mut names = vec!["tp=8 conc=4", "tp=2 conc=64", "tp=2 conc=8", "hw=mi300x tp=1", "hw=b200 tp=8"];
    names.sort_by(|a, b| validate::group_order(a, b));
    assert_eq!(names, ["hw=b200 tp=8", "hw=mi300x tp=1", "tp=2 conc=8", "tp=2 conc=64", "tp=8 conc=4"]);
}

proptest::proptest! {
    /// Numeric group values sort as numbers, whatever their spelling's length.
    #[test]
    fn numeric_group_values_sort_as_numbers(mut xs in proptest::collection::vec(0u32..100_000, 1..20)) {
        let mut names: Vec<String> = xs.iter().map(|x| format!("conc={x}")).collect();
        names.sort_by(|a, b| validate::group_order(a, b));
        xs.sort_unstable();
        let expected: Vec<String> = xs.iter().map(|x| format!("conc={x}")).collect();
        proptest::prop_assert_eq!(names, expected);
    }
}
