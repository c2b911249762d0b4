//! The engine's seeded random numbers: SplitMix64 draws, uniform integers and a standard normal
//! (for the lognormal step jitter). Small and dependency-free so a run is reproducible from its
//! seed on every platform.

/// A SplitMix64 generator.
#[derive(Clone, Debug)]
pub struct SimRng {
    state: u64,
}

impl SimRng {
    pub fn new(seed: u64) -> Self {
        Self { state: seed ^ 0x5EB5_D1CE_5EED_0001 }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.state)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in `lo..=hi`.
    pub fn range_inclusive(&mut self, lo: u32, hi: u32) -> u32 {
        if hi <= lo {
            return lo;
        }
        let span = u64::from(hi - lo) + 1;
        lo + (self.next_u64() % span) as u32
    }

    /// A standard normal draw (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// A lognormal factor with mean 1 and shape `sigma` (1 exactly when `sigma` is 0).
    pub fn lognormal_factor(&mut self, sigma: f64) -> f64 {
        if sigma <= 0.0 {
            return 1.0;
        }
        (sigma * self.normal() - 0.5 * sigma * sigma).exp()
    }
}

/// The SplitMix64 finaliser: a cheap, well-mixed 64-bit hash step.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_repeat_for_a_seed_and_differ_across_seeds() {
        let a: Vec<u64> = (0..5).scan(SimRng::new(7), |r, _| Some(r.next_u64())).collect();
        let b: Vec<u64> = (0..5).scan(SimRng::new(7), |r, _| Some(r.next_u64())).collect();
        let c: Vec<u64> = (0..5).scan(SimRng::new(8), |r, _| Some(r.next_u64())).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn lognormal_factor_has_mean_one_and_the_asked_spread() {
        let mut r = SimRng::new(1);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| r.lognormal_factor(0.1)).collect();
        let mean = xs.iter().sum::<f64>() / f64::from(n);
        let sd_log = {
            let logs: Vec<f64> = xs.iter().map(|x| x.ln()).collect();
            let m = logs.iter().sum::<f64>() / f64::from(n);
            (logs.iter().map(|l| (l - m).powi(2)).sum::<f64>() / f64::from(n)).sqrt()
        };
        assert!((mean - 1.0).abs() < 0.002, "{mean}");
        assert!((sd_log - 0.1).abs() < 0.002, "{sd_log}");
        assert_eq!(r.lognormal_factor(0.0), 1.0);
    }

    #[test]
    fn ranges_stay_inside_their_bounds() {
        let mut r = SimRng::new(3);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let x = r.range_inclusive(10, 14);
            assert!((10..=14).contains(&x));
            seen[(x - 10) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
        assert_eq!(r.range_inclusive(4, 4), 4);
    }
}
