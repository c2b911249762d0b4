//! numpy's legacy `RandomState` (what `np.random.seed` / `np.random.gamma` / `np.random.randint`
//! use): MT19937 seeded with `init_genrand`, the legacy polar gaussian with its cached second
//! value, the legacy exponential and Marsaglia–Tsang gamma, and masked bounded integers.

use super::bounded::{self, BitSource, Method};
use super::mt19937::Mt19937;

/// A port of `numpy.random.RandomState` for the draws vLLM's benchmark makes.
#[derive(Clone, Debug)]
pub struct RandomState {
    mt: Mt19937,
    gauss: Option<f64>,
}

impl BitSource for Mt19937 {
    fn next_u32(&mut self) -> u32 {
        Mt19937::next_u32(self)
    }
    fn next_u64(&mut self) -> u64 {
        Mt19937::next_u64(self)
    }
}

impl RandomState {
    /// `np.random.seed(seed)` / `RandomState(seed)`. numpy accepts only seeds below 2^32.
    pub fn new(seed: u32) -> Self {
        RandomState { mt: Mt19937::from_seed(seed), gauss: None }
    }

    /// `random_sample()`: a double in [0, 1).
    pub fn random_sample(&mut self) -> f64 {
        self.mt.next_f64()
    }

    /// The legacy `standard_exponential()`: `-log(1 - U)`.
    pub fn standard_exponential(&mut self) -> f64 {
        -(1.0 - self.random_sample()).ln()
    }

    /// The legacy polar-method gaussian; the second value of each pair is kept for the next call.
    pub fn gauss(&mut self) -> f64 {
        if let Some(g) = self.gauss.take() {
            return g;
        }
        loop {
            let x1 = 2.0 * self.random_sample() - 1.0;
            let x2 = 2.0 * self.random_sample() - 1.0;
            let r2 = x1 * x1 + x2 * x2;
            if r2 < 1.0 && r2 != 0.0 {
                let f = (-2.0 * r2.ln() / r2).sqrt();
                self.gauss = Some(f * x1);
                return f * x2;
            }
        }
    }

    /// The legacy `standard_gamma(shape)`.
    pub fn standard_gamma(&mut self, shape: f64) -> f64 {
        if shape == 1.0 {
            return self.standard_exponential();
        }
        if shape == 0.0 {
            return 0.0;
        }
        if shape < 1.0 {
            loop {
                let u = self.random_sample();
                let v = self.standard_exponential();
                if u <= 1.0 - shape {
                    let x = u.powf(1.0 / shape);
                    if x <= v {
                        return x;
                    }
                } else {
                    let y = -((1.0 - u) / shape).ln();
                    let x = (1.0 - shape + shape * y).powf(1.0 / shape);
                    if x <= v + y {
                        return x;
                    }
                }
            }
        }
        let b = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * b).sqrt();
        loop {
            let (x, mut v);
            loop {
                let g = self.gauss();
                let t = 1.0 + c * g;
                if t > 0.0 {
                    x = g;
                    v = t;
                    break;
                }
            }
            v = v * v * v;
            let u = self.random_sample();
            if u < 1.0 - 0.0331 * (x * x) * (x * x) {
                return b * v;
            }
            if u.ln() < 0.5 * x * x + b * (1.0 - v + v.ln()) {
                return b * v;
            }
        }
    }

    /// `gamma(shape, scale)`: `scale * standard_gamma(shape)`.
    pub fn gamma(&mut self, shape: f64, scale: f64) -> f64 {
        scale * self.standard_gamma(shape)
    }

    /// `randint(low, high, size)` with the default int64 dtype: `size` values in `[low, high)`.
    /// Returns an empty vector when `high <= low` (numpy raises).
    pub fn randint(&mut self, low: i64, high: i64, size: usize) -> Vec<i64> {
        let Some((off, rng)) = bounded::span(low, high) else {
            return Vec::new();
        };
        bounded::fill(&mut self.mt, off, rng, size, Method::Masked).into_iter().map(|v| v as i64).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn vectors() -> Value {
        serde_json::from_str(include_str!("vectors/numpy_python.json")).unwrap()
    }

    fn u64s(v: &Value) -> Vec<u64> {
        v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect()
    }

    #[test]
    fn matches_numpy_legacy_draws() {
        let v = vectors();
        let cases = v["legacy"].as_array().unwrap();
        assert_eq!(cases.len(), 5);
        for case in cases {
            let seed = case["seed"].as_u64().unwrap() as u32;
            let mut rs = RandomState::new(seed);
            let raw: Vec<u64> = rs.randint(0, 1 << 32, 5).into_iter().map(|x| x as u64).collect();
            assert_eq!(raw, u64s(&case["raw_u32"]), "seed {seed}");
            let rs_bits: Vec<u64> = (0..8).map(|_| rs.random_sample().to_bits()).collect();
            assert_eq!(rs_bits, u64s(&case["random_sample"]), "seed {seed}");
            let ex: Vec<u64> = (0..6).map(|_| rs.standard_exponential().to_bits()).collect();
            assert_eq!(ex, u64s(&case["standard_exponential"]), "seed {seed}");

            for (shape, want) in case["gamma_scale_0.125"].as_object().unwrap() {
                let shape: f64 = shape.parse().unwrap();
                let mut r = RandomState::new(seed);
                let got: Vec<u64> = (0..25).map(|_| r.gamma(shape, 0.125).to_bits()).collect();
                assert_eq!(got, u64s(want), "seed {seed} shape {shape}");
            }

            let mut r = RandomState::new(seed);
            let mixed: Vec<u64> = (0..30)
                .map(|i| match i % 3 {
                    0 => r.gamma(2.5, 1.0),
                    1 => r.random_sample(),
                    _ => r.gamma(0.7, 2.0),
                })
                .map(f64::to_bits)
                .collect();
            assert_eq!(mixed, u64s(&case["mixed"]), "seed {seed}");

            for (n, want) in case["randint_0_n"].as_object().unwrap() {
                let n: i64 = n.parse().unwrap();
                let mut r = RandomState::new(seed);
                let got: Vec<u64> = r.randint(0, n, 12).into_iter().map(|x| x as u64).collect();
                assert_eq!(got, u64s(want), "seed {seed} n {n}");
            }
        }
    }

    #[test]
    fn first_double_for_seed_zero_is_numpys() {
        let mut rs = RandomState::new(0);
        assert_eq!(rs.random_sample(), 0.548_813_503_927_324_8);
    }

    #[test]
    fn empty_randint_range_draws_nothing() {
        let mut a = RandomState::new(3);
        let mut b = RandomState::new(3);
        assert!(a.randint(5, 5, 4).is_empty());
        assert_eq!(a.random_sample(), b.random_sample());
    }
}
