//! Tests of the intervals: the order-statistic draws against resamples built in full, coverage
//! of the true difference, the shift of identical and of clearly different runs, and Welch.

use proptest::prelude::*;
use servebench_core::metrics::{Summary, median, percentile};
use servebench_store::RunRecords;

use super::*;
use crate::testutil::Synth;

/// A sample of `n` values from a seeded generator, with ties when `levels` is small.
fn sample(seed: u64, n: usize, levels: u64) -> Vec<f64> {
    let mut rng = Xoshiro::new(seed);
    (0..n).map(|_| (rng.next_u64() % levels) as f64 * 0.5 + 10.0).collect()
}

/// The bootstrap statistic computed the slow way: build the resample, sort it, take it.
fn brute_force(values: &[f64], q: Quantile, rng: &mut Xoshiro) -> f64 {
    let resample: Vec<f64> = (0..values.len()).map(|_| values[rng.below(values.len())]).collect();
    q.of_sorted(&Sorted::new(&resample))
}

/// The largest gap between the empirical distribution functions of two samples.
fn ks_distance(a: &[f64], b: &[f64]) -> f64 {
    let (sa, sb) = (Sorted::new(a), Sorted::new(b));
    let (a, b) = (sa.values(), sb.values());
    let mut points: Vec<f64> = a.iter().chain(b).copied().collect();
    points.sort_by(f64::total_cmp);
    points.dedup();
    let cdf = |s: &[f64], x: f64| s.partition_point(|v| *v <= x) as f64 / s.len() as f64;
    points.iter().map(|&x| (cdf(a, x) - cdf(b, x)).abs()).fold(0.0, f64::max)
}

#[test]
fn order_statistic_draws_match_building_the_resamples() {
    const DRAWS: usize = 10_000;
    for (case, (n, levels)) in
        [(2, 100), (3, 3), (10, 1000), (11, 4), (40, 1000), (101, 7), (100, 1_000_000)].into_iter().enumerate()
    {
        let mut values = sample(case as u64, n, levels);
        values.sort_by(f64::total_cmp);
        for q in [Quantile::Median, Quantile::Percentile(99.0), Quantile::Percentile(37.5)] {
            let mut fast = Xoshiro::new(1000 + case as u64);
            let mut slow = Xoshiro::new(2000 + case as u64);
            let a: Vec<f64> = (0..DRAWS).map(|_| resampled_quantile(&values, q, &mut fast)).collect();
            let b: Vec<f64> = (0..DRAWS).map(|_| brute_force(&values, q, &mut slow)).collect();
            let d = ks_distance(&a, &b);
            // Two samples of 10,000 from one distribution differ by more than 0.03 with
            // probability below 1e-6.
            assert!(d < 0.03, "n={n} {q:?}: distance {d}");
        }
    }
}

#[test]
fn the_median_interval_covers_the_true_difference_about_95_percent_of_the_time() {
    // Exponential samples of scale 1 and 1.25: the true medians differ by 0.25 ln 2.
    let truth = 0.25 * std::f64::consts::LN_2;
    let mut rng = Xoshiro::new(7);
    let mut exp = |scale: f64, n: usize| -> Vec<f64> { (0..n).map(|_| -scale * rng.uniform().ln()).collect() };
    let trials = 200;
    let mut covered = 0;
    let mut significant = 0;
    for t in 0..trials {
        let (a, b) = (exp(1.0, 150), exp(1.25, 150));
        let e = compare(&a, &b, Stat::Median, t as u64).unwrap();
        covered += usize::from(e.ci.low <= truth && truth <= e.ci.high);
        significant += usize::from(e.ci.excludes_zero());
    }
    let rate = covered as f64 / trials as f64;
    assert!((0.9..=0.99).contains(&rate), "coverage {rate}");
    // With 150 requests a 25 % shift is often, but not always, told apart.
    assert!(significant > 20 && significant < trials, "{significant}");
}

#[test]
fn identical_runs_differ_by_zero_and_a_clear_shift_is_found() {
    let a = sample(1, 500, 1000);
    let e = compare(&a, &a, Stat::P99, 3).unwrap();
    assert_eq!((e.diff, e.rel), (0.0, Some(0.0)));
    assert!(!e.ci.excludes_zero(), "{e:?}");
    let b: Vec<f64> = a.iter().map(|x| x * 1.5).collect();
    let e = compare(&a, &b, Stat::Median, 3).unwrap();
    assert!(e.ci.low > 0.0, "{e:?}");
    let rel = e.rel_ci.unwrap();
    assert!(rel.low < 0.5 && 0.5 < rel.high, "{rel:?}");
    assert_eq!(e.rel, Some(0.5));
    assert_eq!(compare(&[], &a, Stat::Median, 0), None);
}

#[test]
fn means_use_welchs_interval() {
    let a = [1.0, 2.0, 3.0, 4.0];
    let b = [2.0, 3.0, 4.0, 5.0];
    let e = compare(&a, &b, Stat::Mean, 0).unwrap();
    assert_eq!((e.a, e.b, e.diff, e.method), (2.5, 3.5, 1.0, Method::Welch));
    // Both variances are 5/3, so the standard error is sqrt(5/6).
    let half = Z_975 * (5.0f64 / 6.0).sqrt();
    assert!((e.ci.low - (1.0 - half)).abs() < 1e-12 && (e.ci.high - (1.0 + half)).abs() < 1e-12, "{e:?}");
    assert_eq!(e.rel_ci, None);
}

#[test]
fn samples_agree_with_the_run_summary() {
    let run = Synth { fail_every: Some(7), ..Synth::new("m", 5) }.run();
    let summary = Summary::compute(&run);
    let records = RunRecords { chunk_times: ChunkTimes::All, records: run.records.clone() };
    for metric in [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el] {
        let values = samples(&records, metric).unwrap();
        let want = summary.metric(metric).unwrap();
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * y.abs().max(1.0);
        assert!(close(median(&values), want.median_ms), "{metric:?}");
        assert!(close(percentile(&values, 99.0), want.percentile(99.0).unwrap()), "{metric:?}");
    }
    let first_last = RunRecords { chunk_times: ChunkTimes::FirstLast, ..records };
    assert_eq!(samples(&first_last, Metric::Itl), None);
    assert!(samples(&first_last, Metric::Ttft).is_some());
}

fn values() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(0.0f64..1e4, 1..80)
}

proptest! {
    #[test]
    fn intervals_are_ordered_and_within_reach(a in values(), b in values(), p99 in any::<bool>(), salt in 0u64..4) {
        let stat = if p99 { Stat::P99 } else { Stat::Median };
        let e = compare(&a, &b, stat, salt).unwrap();
        let (sa, sb) = (Sorted::new(&a), Sorted::new(&b));
        let lowest = sb.values()[0] - sa.max();
        let highest = sb.max() - sa.values()[0];
        prop_assert!(e.ci.low <= e.ci.high);
        prop_assert!(lowest <= e.ci.low && e.ci.high <= highest, "{:?} outside [{}, {}]", e.ci, lowest, highest);
        let q = Quantile::of(stat);
        prop_assert_eq!(e.a, q.of_sorted(&sa));
        prop_assert_eq!(e.b, q.of_sorted(&sb));
        // The same input always gives the same interval.
        prop_assert_eq!(compare(&a, &b, stat, salt), Some(e));
    }

    #[test]
    fn shifting_one_run_shifts_the_interval(a in values(), b in values(), shift in -500.0f64..500.0) {
        let e = compare(&a, &b, Stat::Median, 1).unwrap();
        let moved: Vec<f64> = b.iter().map(|x| x + shift).collect();
        let m = compare(&a, &moved, Stat::Median, 1).unwrap();
        let tol = 1e-9 * 2e4;
        prop_assert!((m.diff - e.diff - shift).abs() < tol);
        prop_assert!((m.ci.low - e.ci.low - shift).abs() < tol && (m.ci.high - e.ci.high - shift).abs() < tol);
    }

    #[test]
    fn resampled_quantiles_are_values_of_the_sample_or_between_them(v in values(), seed in any::<u64>()) {
        let sorted = Sorted::new(&v);
        let mut rng = Xoshiro::new(seed);
        for q in [Quantile::Median, Quantile::Percentile(99.0), Quantile::Percentile(0.0), Quantile::Percentile(100.0)] {
            let x = resampled_quantile(sorted.values(), q, &mut rng);
            prop_assert!(sorted.values()[0] <= x && x <= sorted.max());
        }
    }
}
