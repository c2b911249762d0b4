//! Confidence intervals of the difference between two runs' latency distributions.
//!
//! **Medians and P99s: a percentile bootstrap.** Each of [`RESAMPLES`] resamples draws, with
//! replacement, as many values from each run as it has, takes the statistic of both (numpy's
//! median, and numpy's linear-interpolated percentile, as the reports compute them) and keeps
//! the difference `B - A` and the relative change `(B - A) / A`. The 95 % interval is the
//! 2.5th to the 97.5th percentile of those resampled differences.
//!
//! A resample is never built: a statistic of a resample only depends on one or two of its
//! order statistics, and the k-th smallest of `n` values drawn with replacement from the
//! sorted sample `x[1..n]` is `x[ceil(n * U)]` where `U` is the k-th smallest of `n` uniform
//! numbers, which is Beta(k, n - k + 1) distributed; the next one follows from the minimum
//! of the `n - k` uniforms above it. So each resample costs a few random draws, whatever the
//! sample size (a run's ITL sample, one value per token chunk, can hold millions), and the
//! result is exactly the bootstrap distribution.
//!
//! The random numbers come from xoshiro256** seeded from a fixed seed per metric and
//! statistic, so the same runs always give the same intervals.
//!
//! ITL values are resampled as independent values, like the other metrics; the chunks of one
//! request are not independent, so its interval is narrower than it would be if whole
//! requests were resampled.
//!
//! **Means: the normal approximation** (Welch): `B - A ± 1.96 · sqrt(s²_A/n_A + s²_B/n_B)`.

use servebench_core::config::Metric;
use servebench_core::metrics::{Sorted, mean};
use servebench_store::{ChunkTimes, RunRecords};

use crate::quantity::Stat;

/// Resamples per interval.
pub const RESAMPLES: usize = 2000;

/// The confidence level of every interval.
pub const CONFIDENCE: f64 = 0.95;

/// The standard normal quantile of 97.5 %.
const Z_975: f64 = 1.959_963_984_540_054;

/// The base of the fixed seeds.
const SEED: u64 = 0x5eb0_b007_57a9_0001;

/// A closed interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

impl Interval {
    /// Whether zero lies outside the interval.
    pub fn excludes_zero(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// How an interval was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Percentile bootstrap of [`RESAMPLES`] resamples.
    Bootstrap,
    /// Normal approximation with Welch's standard error.
    Welch,
}

/// A statistic of two samples, their difference and its interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub stat: Stat,
    /// The statistic of A and of B.
    pub a: f64,
    pub b: f64,
    /// `b - a`.
    pub diff: f64,
    /// The 95 % interval of `b - a`.
    pub ci: Interval,
    /// `(b - a) / a`, when `a` is not zero.
    pub rel: Option<f64>,
    /// The 95 % interval of the relative change (bootstrap only).
    pub rel_ci: Option<Interval>,
    pub n_a: usize,
    pub n_b: usize,
    pub method: Method,
}

/// The per-request values of `metric` in milliseconds, computed as the run summary computes
/// them (successful requests only; TPOT of requests with more than one output token; ITL as
/// every gap between token chunks). `None` for ITL when the records hold only the first and
/// last chunk times, and for metrics without per-request values.
pub fn samples(records: &RunRecords, metric: Metric) -> Option<Vec<f64>> {
    let ok = records.records.iter().filter(|r| r.succeeded());
    let ms: Vec<f64> = match metric {
        Metric::Ttft => ok.map(|r| r.ttft_s() * 1000.0).collect(),
        Metric::E2el => ok.map(|r| r.latency_s() * 1000.0).collect(),
        Metric::Tpot => ok
            .filter(|r| r.output_tokens() > 1)
            .map(|r| (r.latency_s() - r.ttft_s()) / f64::from(r.output_tokens() - 1) * 1000.0)
            .collect(),
        Metric::Itl if records.chunk_times == ChunkTimes::All => {
            ok.flat_map(|r| r.itl_s()).map(|s| s * 1000.0).collect()
        }
        _ => return None,
    };
    Some(ms)
}

/// The difference of a statistic between samples `a` and `b` with its 95 % interval; `None`
/// when a sample is empty. `salt` picks the seed (use one per metric).
pub fn compare(a: &[f64], b: &[f64], stat: Stat, salt: u64) -> Option<Estimate> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    match stat {
        Stat::Mean => Some(welch(a, b)),
        Stat::Median | Stat::Percentile(_) => Some(bootstrap(a, b, stat, salt)),
    }
}

fn relative(diff: f64, base: f64) -> Option<f64> {
    (base != 0.0 && base.is_finite()).then(|| diff / base)
}

fn welch(a: &[f64], b: &[f64]) -> Estimate {
    let (ma, mb) = (mean(a), mean(b));
    let var = |x: &[f64], m: f64| {
        if x.len() < 2 { 0.0 } else { x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() - 1) as f64 }
    };
    let se = (var(a, ma) / a.len() as f64 + var(b, mb) / b.len() as f64).sqrt();
    let diff = mb - ma;
    Estimate {
        stat: Stat::Mean,
        a: ma,
        b: mb,
        diff,
        ci: Interval { low: diff - Z_975 * se, high: diff + Z_975 * se },
        rel: relative(diff, ma),
        rel_ci: None,
        n_a: a.len(),
        n_b: b.len(),
        method: Method::Welch,
    }
}

/// An order-statistic quantile: numpy's median, or numpy's percentile (linear method).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Quantile {
    Median,
    Percentile(f64),
}

impl Quantile {
    fn of(stat: Stat) -> Quantile {
        match stat {
            Stat::Median => Quantile::Median,
            Stat::Percentile(p) => Quantile::Percentile(p),
            Stat::Mean => Quantile::Percentile(99.0),
        }
    }

    /// The quantile of a sorted sample, as the reports compute it.
    pub(crate) fn of_sorted(self, sorted: &Sorted) -> f64 {
        match self {
            Quantile::Median => sorted.median(),
            Quantile::Percentile(p) => sorted.percentile(p),
        }
    }
}

fn bootstrap(a: &[f64], b: &[f64], stat: Stat, salt: u64) -> Estimate {
    let q = Quantile::of(stat);
    let (sa, sb) = (Sorted::new(a), Sorted::new(b));
    let (pa, pb) = (q.of_sorted(&sa), q.of_sorted(&sb));
    let mut rng = Xoshiro::new(SEED ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut diffs = Vec::with_capacity(RESAMPLES);
    let mut rels = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        let ra = resampled_quantile(sa.values(), q, &mut rng);
        let rb = resampled_quantile(sb.values(), q, &mut rng);
        diffs.push(rb - ra);
        if let Some(r) = relative(rb - ra, ra) {
            rels.push(r);
        }
    }
    let interval = |v: &[f64]| {
        let s = Sorted::new(v);
        let tail = (1.0 - CONFIDENCE) / 2.0 * 100.0;
        Interval { low: s.percentile(tail), high: s.percentile(100.0 - tail) }
    };
    let diff = pb - pa;
    Estimate {
        stat,
        a: pa,
        b: pb,
        diff,
        ci: interval(&diffs),
        rel: relative(diff, pa),
        // Only when every resample had a relative change.
        rel_ci: (rels.len() == RESAMPLES).then(|| interval(&rels)),
        n_a: a.len(),
        n_b: b.len(),
        method: Method::Bootstrap,
    }
}

/// The 1-based position in a sorted sample of `n` values of the value a uniform order
/// statistic `u` picks: `ceil(n * u)`.
fn position(n: usize, u: f64) -> usize {
    ((n as f64 * u).ceil() as usize).clamp(1, n)
}

/// The quantile of one bootstrap resample of `sorted` (ascending, not empty), drawn through
/// the resample's order statistics.
pub(crate) fn resampled_quantile(sorted: &[f64], q: Quantile, rng: &mut Xoshiro) -> f64 {
    let n = sorted.len();
    if n == 1 {
        return sorted[0];
    }
    match q {
        Quantile::Median if n % 2 == 1 => sorted[position(n, rng.uniform_order_statistic(n, n / 2 + 1)) - 1],
        Quantile::Median => {
            let k = n / 2;
            let u = rng.uniform_order_statistic(n, k);
            let v = rng.next_uniform_order_statistic(n, k, u);
            (sorted[position(n, u) - 1] + sorted[position(n, v) - 1]) / 2.0
        }
        Quantile::Percentile(p) => {
            // numpy's linear method, as `Sorted::percentile` computes it.
            let idx = (n - 1) as f64 * (p.clamp(0.0, 100.0) / 100.0);
            if idx >= (n - 1) as f64 {
                return sorted[position(n, rng.uniform_order_statistic(n, n)) - 1];
            }
            let lo = idx.floor();
            let t = idx - lo;
            let k = lo as usize + 1;
            let u = rng.uniform_order_statistic(n, k);
            let a = sorted[position(n, u) - 1];
            if t == 0.0 {
                return a;
            }
            let b = sorted[position(n, rng.next_uniform_order_statistic(n, k, u)) - 1];
            let d = b - a;
            if t < 0.5 { a + d * t } else { b - d * (1.0 - t) }
        }
    }
}

/// xoshiro256** with the continuous draws the bootstrap needs.
pub(crate) struct Xoshiro([u64; 4]);

impl Xoshiro {
    /// Seeds the state with SplitMix64.
    pub(crate) fn new(seed: u64) -> Xoshiro {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Xoshiro([next(), next(), next(), next()])
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in the open interval (0, 1).
    pub(crate) fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * 2f64.powi(-53)
    }

    /// Uniform integer in `0..n` (`n > 0`), by rejection so that it is unbiased.
    #[cfg(test)]
    pub(crate) fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        let zone = u64::MAX - u64::MAX % n;
        loop {
            let x = self.next_u64();
            if x < zone {
                return (x % n) as usize;
            }
        }
    }

    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// Gamma(shape, 1) for `shape >= 1` (Marsaglia and Tsang).
    fn gamma(&mut self, shape: f64) -> f64 {
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = self.uniform();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }

    /// Beta(a, b) for `a, b >= 1`.
    fn beta(&mut self, a: f64, b: f64) -> f64 {
        let x = self.gamma(a);
        let y = self.gamma(b);
        x / (x + y)
    }

    /// The `k`-th smallest of `n` uniform numbers (`1 <= k <= n`).
    fn uniform_order_statistic(&mut self, n: usize, k: usize) -> f64 {
        self.beta(k as f64, (n - k + 1) as f64)
    }

    /// The next larger of the `n` uniform numbers whose `k`-th smallest is `u` (`k < n`): `u`
    /// plus the smallest of the `n - k` uniforms above it.
    fn next_uniform_order_statistic(&mut self, n: usize, k: usize, u: f64) -> f64 {
        let m = (n - k).max(1) as f64;
        u + (1.0 - u) * (1.0 - (self.uniform().ln() / m).exp())
    }
}

#[cfg(test)]
mod tests;
