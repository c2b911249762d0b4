//! Descriptive statistics computed bit-for-bit as numpy computes them.
//!
//! vLLM reports `np.mean`, `np.std`, `np.median` and `np.percentile` of Python lists, and its
//! result JSON carries those floats at full precision. Matching them exactly needs numpy's
//! summation order (a blocked pairwise sum), its median (the mean of the two middle values)
//! and its linear interpolation formula, all reproduced here.
//!
//! vLLM passes `X or 0` to numpy, so an empty list is treated as the one-element list `[0]`:
//! every function here returns `0.0` for an empty slice.

/// Blocks of at most this many values are summed without further splitting (numpy's
/// `PW_BLOCKSIZE`).
const BLOCK: usize = 128;

/// numpy's pairwise summation of a float64 array (`np.add.reduce`).
///
/// - fewer than 8 values: summed left to right, starting from `0.0`;
/// - up to 128 values: eight strided accumulators, combined as
///   `((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))`, then the remainder added left to right;
/// - more: the two halves are summed recursively, split at `n/2` rounded down to a
///   multiple of 8.
///
/// The reduction adds the result to numpy's initial value `0.0`, which only matters for
/// `-0.0`; that addition is kept too.
pub fn pairwise_sum(values: &[f64]) -> f64 {
    0.0 + pairwise(values, |x| x)
}

/// The pairwise sum of `f` of each value, in the order and grouping of [`pairwise_sum`] over
/// the array of those terms, without building that array.
fn pairwise<T: Copy>(a: &[T], f: impl Fn(T) -> f64 + Copy) -> f64 {
    let n = a.len();
    if n < 8 {
        let mut res = 0.0;
        for &x in a {
            res += f(x);
        }
        res
    } else if n <= BLOCK {
        let mut r = [0.0f64; 8];
        for (acc, &x) in r.iter_mut().zip(&a[..8]) {
            *acc = f(x);
        }
        let whole = n - n % 8;
        let mut i = 8;
        while i < whole {
            for (j, acc) in r.iter_mut().enumerate() {
                *acc += f(a[i + j]);
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &x in &a[whole..] {
            res += f(x);
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise(&a[..n2], f) + pairwise(&a[n2..], f)
    }
}

/// `np.mean(values or 0)`: the pairwise sum divided by the count.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    mean_of(values)
}

/// [`mean`] of a non-empty sample read through [`Sample::value`].
fn mean_of<T: Sample>(values: &[T]) -> f64 {
    (0.0 + pairwise(values, T::value)) / values.len() as f64
}

/// `np.std(values or 0)`: the population standard deviation (ddof = 0),
/// `sqrt(pairwise_sum((x - mean)^2) / n)`.
pub fn std(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    std_about(values, mean(values))
}

/// [`std`] of a non-empty sample whose mean `m` is known: numpy's squares of the deviations,
/// summed pairwise as they come.
fn std_about<T: Sample>(values: &[T], m: f64) -> f64 {
    let square = |x: T| {
        let d = x.value() - m;
        d * d
    };
    ((0.0 + pairwise(values, square)) / values.len() as f64).sqrt()
}

/// `np.median(values or 0)`. Sorts a copy; use [`Sorted`] to take several order statistics.
pub fn median(values: &[f64]) -> f64 {
    Sorted::new(values).median()
}

/// `np.percentile(values or 0, p)` with the default `linear` method. Sorts a copy; use
/// [`Sorted`] to take several percentiles of the same values.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    Sorted::new(values).percentile(p)
}

/// A sorted copy of a sample, for taking several order statistics of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sorted(Vec<f64>);

impl Sorted {
    /// Sorts a copy of `values` (an empty sample becomes `[0.0]`, as vLLM's `X or 0`).
    pub fn new(values: &[f64]) -> Self {
        if values.is_empty() {
            return Sorted(vec![0.0]);
        }
        let mut v = values.to_vec();
        // Values equal in the total order are the same bits, so an unstable sort gives the
        // same slice as a stable one, faster.
        v.sort_unstable_by(f64::total_cmp);
        Sorted(v)
    }

    /// The sorted values (never empty).
    pub fn values(&self) -> &[f64] {
        &self.0
    }

    /// `np.median`: the middle value for an odd count, else `np.mean` of the two middle
    /// values, which is `(0.0 + a + b) / 2`. This is not the same arithmetic as
    /// `percentile(50)`.
    pub fn median(&self) -> f64 {
        median_at(self.0.len(), |i| self.0[i])
    }

    /// `np.percentile(x, p)`, method `linear`: `idx = (n-1) * (p/100)`, `lo = floor(idx)`,
    /// `t = idx - lo`; the last value when `idx >= n-1`; otherwise, with `a = x[lo]`,
    /// `b = x[lo+1]` and `d = b - a`, numpy's lerp `a + d*t` when `t < 0.5`, else
    /// `b - d*(1-t)`.
    ///
    /// numpy rejects `p` outside `[0, 100]`; here it is clamped into that range (and a NaN
    /// `p` is taken as 0), so bad input never panics.
    pub fn percentile(&self, p: f64) -> f64 {
        percentile_at(self.0.len(), p, |i| self.0[i])
    }

    /// The largest value.
    pub fn max(&self) -> f64 {
        self.0[self.0.len() - 1]
    }
}

/// Mean, median, population std and the requested percentiles of one sample, in the
/// sample's own unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Described {
    pub mean: f64,
    pub median: f64,
    pub std: f64,
    /// `(p, value)` in the order the percentiles were asked for.
    pub percentiles: Vec<(f64, f64)>,
}

/// Computes what vLLM reports for one metric: `np.mean`, `np.median`, `np.std` and
/// `np.percentile` for each `p` (an empty sample counts as `[0]`).
///
/// The order statistics are selected, not sorted for: the same values as [`Sorted`] gives, in
/// a few passes over the sample where sorting takes a few dozen (a run's millions of
/// inter-token latencies).
pub fn describe(values: &[f64], percentiles: &[f64]) -> Described {
    describe_in_place(&mut values.to_vec(), percentiles)
}

/// [`describe`] of a sample the caller no longer needs in its order: the mean and the std
/// are taken first (in the sample's order, as numpy sums), then the order statistics are
/// selected in `values` itself, which is left reordered. No copy: a run's millions of
/// inter-token latencies are described where they were collected.
pub fn describe_in_place(values: &mut [f64], percentiles: &[f64]) -> Described {
    described(values, percentiles)
}

/// [`describe_in_place`] of a sample of whole microseconds, described in seconds (each value
/// `µs × 1e-6`, as the records' times give them): the same figures as describing those
/// seconds, from half the memory. The map is strictly increasing, so the order statistics are
/// the microseconds' own.
pub fn describe_micros_in_place(values_us: &mut [u32], percentiles: &[f64]) -> Described {
    described(values_us, percentiles)
}

/// A sample's value as [`describe`] reads it, and its order.
trait Sample: Copy {
    const ZERO: Self;
    fn value(self) -> f64;
    fn order(a: &Self, b: &Self) -> std::cmp::Ordering;
}

impl Sample for f64 {
    const ZERO: Self = 0.0;
    fn value(self) -> f64 {
        self
    }
    // Values equal in the total order are the same bits, so the value at a rank is one.
    fn order(a: &Self, b: &Self) -> std::cmp::Ordering {
        a.total_cmp(b)
    }
}

/// Whole microseconds.
impl Sample for u32 {
    const ZERO: Self = 0;
    fn value(self) -> f64 {
        crate::record::micros_s(self)
    }
    fn order(a: &Self, b: &Self) -> std::cmp::Ordering {
        a.cmp(b)
    }
}

fn described<T: Sample>(values: &mut [T], percentiles: &[f64]) -> Described {
    if values.is_empty() {
        // vLLM's `X or 0`.
        return described(&mut [T::ZERO], percentiles);
    }
    let mean = mean_of(values);
    let std = std_about(values, mean);
    let n = values.len();
    // The ranks the formulas read, found by running them on a recorder.
    let mut ranks = Vec::new();
    median_at(n, |i| {
        ranks.push(i);
        0.0
    });
    for &p in percentiles {
        percentile_at(n, p, |i| {
            ranks.push(i);
            0.0
        });
    }
    select_ranks(values, &mut ranks);
    let at = |i: usize| values[i].value();
    Described {
        mean,
        median: median_at(n, at),
        std,
        percentiles: percentiles.iter().map(|&p| (p, percentile_at(n, p, at))).collect(),
    }
}

/// Reorders `v` so that each of `ranks` holds the value a sort would put there: each
/// selected in turn, lowest first, among the values above the one selected before it.
fn select_ranks<T: Sample>(v: &mut [T], ranks: &mut Vec<usize>) {
    ranks.sort_unstable();
    ranks.dedup();
    let mut from = 0;
    for &r in ranks.iter() {
        v[from..].select_nth_unstable_by(r - from, T::order);
        from = r + 1;
    }
}

/// `np.median` of `n` sorted values read through `at`: the middle value for an odd count,
/// else `np.mean` of the two middle values, which is `(0.0 + a + b) / 2`. This is not the same
/// arithmetic as `percentile(50)`.
fn median_at(n: usize, mut at: impl FnMut(usize) -> f64) -> f64 {
    if n % 2 == 1 { at(n / 2) } else { mean(&[at(n / 2 - 1), at(n / 2)]) }
}

/// `np.percentile(x, p)`, method `linear`, of `n` sorted values read through `at`; see
/// [`Sorted::percentile`].
fn percentile_at(n: usize, p: f64, mut at: impl FnMut(usize) -> f64) -> f64 {
    let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 100.0) };
    let q = p / 100.0;
    let idx = (n - 1) as f64 * q;
    if idx >= (n - 1) as f64 {
        return at(n - 1);
    }
    let lo_f = idx.floor();
    let t = idx - lo_f;
    // idx is in [0, n-1), so lo is a valid index and lo + 1 <= n - 1.
    let lo = lo_f as usize;
    let (a, b) = (at(lo), at(lo + 1));
    let d = b - a;
    if t < 0.5 { a + d * t } else { b - d * (1.0 - t) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The generator `gen_vectors.py` uses for its large cases (a 64-bit LCG).
    fn lcg_values(seed: u64, n: usize, scale: f64) -> Vec<f64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                (x >> 11) as f64 * 2f64.powi(-53) * scale
            })
            .collect()
    }

    fn float(v: &serde_json::Value) -> f64 {
        v.as_str().expect("vectors store floats as repr strings").parse().expect("a Python float repr parses")
    }

    fn floats(v: &serde_json::Value) -> Vec<f64> {
        v.as_array().expect("a list").iter().map(float).collect()
    }

    #[test]
    fn matches_numpy_bit_for_bit() {
        let doc: serde_json::Value = serde_json::from_str(include_str!("../../testdata/numpy_stats.json")).unwrap();
        let ps = floats(&doc["percentiles"]);
        let cases = doc["cases"].as_array().unwrap();
        assert!(cases.len() > 30, "the vector file lost its cases");
        for case in cases {
            let name = case["name"].as_str().unwrap();
            let values = if let Some(l) = case.get("lcg") {
                lcg_values(l["seed"].as_u64().unwrap(), l["n"].as_u64().unwrap() as usize, l["scale"].as_f64().unwrap())
            } else {
                floats(&case["values"])
            };
            let d = describe(&values, &ps);
            let bits = |x: f64| x.to_bits();
            assert_eq!(bits(d.mean), bits(float(&case["mean"])), "{name}: mean");
            assert_eq!(bits(d.std), bits(float(&case["std"])), "{name}: std");
            assert_eq!(bits(d.median), bits(float(&case["median"])), "{name}: median");
            for ((p, got), want) in d.percentiles.iter().zip(floats(&case["percentiles"])) {
                assert_eq!(bits(*got), bits(want), "{name}: percentile {p}");
            }
        }
    }

    #[test]
    fn pairwise_differs_from_a_plain_loop_where_numpy_does() {
        // 0.1 added 200 times: the naive sum drifts, the blocked sum drifts differently.
        let v = vec![0.1; 200];
        let naive: f64 = v.iter().fold(0.0, |a, b| a + b);
        assert_ne!(pairwise_sum(&v).to_bits(), naive.to_bits());
        assert_eq!(pairwise_sum(&v[..7]), v[..7].iter().fold(0.0, |a, b| a + b));
    }

    #[test]
    fn empty_counts_as_zero_and_even_median_is_a_mean() {
        assert_eq!(describe(&[], &[50.0, 99.0]).percentiles, [(50.0, 0.0), (99.0, 0.0)]);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(percentile(&[1.0, 2.0], 150.0), 2.0);
        assert_eq!(percentile(&[1.0, 2.0], -3.0), 1.0);
        assert_eq!(percentile(&[1.0, 2.0], f64::NAN), 1.0);
    }

    /// Every figure of a description as its bits.
    fn bits(d: &Described) -> (u64, u64, u64, Vec<(u64, u64)>) {
        let percentiles = d.percentiles.iter().map(|(p, x)| (p.to_bits(), x.to_bits())).collect();
        (d.mean.to_bits(), d.median.to_bits(), d.std.to_bits(), percentiles)
    }

    fn sample() -> impl Strategy<Value = Vec<f64>> {
        prop::collection::vec(-1e6f64..1e6, 0..300)
    }

    proptest! {
        #[test]
        fn percentiles_stay_within_bounds(v in sample(), p in 0f64..=100.0) {
            let s = Sorted::new(&v);
            let x = s.percentile(p);
            prop_assert!(x >= s.values()[0] && x <= s.max());
            let m = s.median();
            prop_assert!(m >= s.values()[0] && m <= s.max());
            let mean = mean(&v);
            prop_assert!(mean >= s.values()[0] - 1e-6 && mean <= s.max() + 1e-6);
            prop_assert!(std(&v) >= 0.0);
        }

        #[test]
        fn described_order_statistics_are_the_sorted_ones(
            v in prop::collection::vec(prop_oneof![-1e6f64..1e6, (0u8..4).prop_map(f64::from)], 0..300),
            ps in prop::collection::vec(0f64..=100.0, 0..6),
        ) {
            let d = describe(&v, &ps);
            let s = Sorted::new(&v);
            prop_assert_eq!(d.median.to_bits(), s.median().to_bits());
            for (p, got) in d.percentiles {
                prop_assert_eq!(got.to_bits(), s.percentile(p).to_bits(), "percentile {}", p);
            }
        }

        #[test]
        fn described_in_place_as_from_a_copy_and_std_as_from_numpy_s_squares(
            v in prop::collection::vec(-1e6f64..1e6, 0..1000),
            ps in prop::collection::vec(0f64..=100.0, 0..6),
        ) {
            let mut own = v.clone();
            let (copied, in_place) = (describe(&v, &ps), describe_in_place(&mut own, &ps));
            prop_assert_eq!(bits(&copied), bits(&in_place));
            // numpy's `std`: the array of squared deviations, then its pairwise sum.
            let m = mean(&v);
            let squares: Vec<f64> = v.iter().map(|&x| (x - m) * (x - m)).collect();
            let numpy = if v.is_empty() { 0.0 } else { (pairwise_sum(&squares) / v.len() as f64).sqrt() };
            prop_assert_eq!(std(&v).to_bits(), numpy.to_bits());
        }

        #[test]
        fn microseconds_are_described_as_their_seconds(
            us in prop::collection::vec(prop_oneof![0u32..50_000, 0u32..4, any::<u32>()], 0..1000),
            ps in prop::collection::vec(0f64..=100.0, 0..6),
        ) {
            let seconds: Vec<f64> = us.iter().map(|&g| f64::from(g) * 1e-6).collect();
            prop_assert_eq!(bits(&describe_micros_in_place(&mut us.clone(), &ps)), bits(&describe(&seconds, &ps)));
        }

        #[test]
        fn percentiles_rise_with_p(v in sample(), p in 0f64..=100.0, q in 0f64..=100.0) {
            let s = Sorted::new(&v);
            let (lo, hi) = if p <= q { (p, q) } else { (q, p) };
            prop_assert!(s.percentile(lo) <= s.percentile(hi));
            prop_assert_eq!(s.percentile(0.0), s.values()[0]);
            prop_assert_eq!(s.percentile(100.0), s.max());
        }

        #[test]
        fn order_statistics_ignore_input_order(v in sample(), seed in any::<u64>(), p in 0f64..=100.0) {
            let mut shuffled = v.clone();
            // A deterministic Fisher-Yates shuffle driven by the seed.
            let mut x = seed;
            for i in (1..shuffled.len()).rev() {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                shuffled.swap(i, (x >> 33) as usize % (i + 1));
            }
            prop_assert_eq!(percentile(&v, p).to_bits(), percentile(&shuffled, p).to_bits());
            prop_assert_eq!(median(&v).to_bits(), median(&shuffled).to_bits());
            let (a, b) = (mean(&v), mean(&shuffled));
            prop_assert!((a - b).abs() <= 1e-9 * (1.0 + a.abs()));
        }
    }
}
