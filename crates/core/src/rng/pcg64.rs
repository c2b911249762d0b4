//! numpy's `np.random.default_rng(seed)`: `SeedSequence` entropy mixing, the PCG64 (XSL-RR
//! 128/64) bit generator with its buffered 32-bit output, and `Generator.integers`.

use super::bounded::{self, BitSource, Method};

const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const POOL_SIZE: usize = 4;

/// numpy's `SeedSequence(entropy)` for an integer entropy and no spawn key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedSequence {
    pool: [u32; POOL_SIZE],
}

fn hashmix(value: u32, hash_const: &mut u32) -> u32 {
    let mut v = value ^ *hash_const;
    *hash_const = hash_const.wrapping_mul(MULT_A);
    v = v.wrapping_mul(*hash_const);
    v ^ (v >> XSHIFT)
}

fn mix(x: u32, y: u32) -> u32 {
    let r = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    r ^ (r >> XSHIFT)
}

impl SeedSequence {
    /// `SeedSequence(n)` for an integer `n` < 2^128.
    pub fn new(entropy: u128) -> Self {
        let mut words = Vec::new();
        let mut n = entropy;
        if n == 0 {
            words.push(0);
        }
        while n > 0 {
            words.push(n as u32);
            n >>= 32;
        }
        Self::from_words(&words)
    }

    /// `SeedSequence` over an entropy given as 32-bit words, least significant first.
    pub fn from_words(entropy: &[u32]) -> Self {
        let mut pool = [0u32; POOL_SIZE];
        let mut hash_const = INIT_A;
        for (i, slot) in pool.iter_mut().enumerate() {
            let e = entropy.get(i).copied().unwrap_or(0);
            *slot = hashmix(e, &mut hash_const);
        }
        for i_src in 0..POOL_SIZE {
            for i_dst in 0..POOL_SIZE {
                if i_src != i_dst {
                    let h = hashmix(pool[i_src], &mut hash_const);
                    pool[i_dst] = mix(pool[i_dst], h);
                }
            }
        }
        for &e in entropy.iter().skip(POOL_SIZE) {
            for slot in pool.iter_mut() {
                let h = hashmix(e, &mut hash_const);
                *slot = mix(*slot, h);
            }
        }
        SeedSequence { pool }
    }

    /// `generate_state(n_words, np.uint32)`.
    pub fn generate_state_u32(&self, n_words: usize) -> Vec<u32> {
        let mut hash_const = INIT_B;
        (0..n_words)
            .map(|i| {
                let mut v = self.pool[i % POOL_SIZE];
                v ^= hash_const;
                hash_const = hash_const.wrapping_mul(MULT_B);
                v = v.wrapping_mul(hash_const);
                v ^ (v >> XSHIFT)
            })
            .collect()
    }

    /// `generate_state(n_words, np.uint64)`: pairs of 32-bit words, low word first.
    pub fn generate_state_u64(&self, n_words: usize) -> Vec<u64> {
        self.generate_state_u32(n_words * 2).chunks(2).map(|c| u64::from(c[0]) | (u64::from(c[1]) << 32)).collect()
    }
}

const PCG_MULT: u128 = 0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645;

/// The PCG64 bit generator (numpy's default), including its 32-bit output buffer.
#[derive(Clone, Debug)]
pub struct Pcg64 {
    state: u128,
    inc: u128,
    buffered: Option<u32>,
}

impl Pcg64 {
    /// Seeds from a `SeedSequence` the way numpy's `PCG64(seed_seq)` does.
    pub fn from_seed_sequence(ss: &SeedSequence) -> Self {
        let v = ss.generate_state_u64(4);
        let seed = (u128::from(v[0]) << 64) | u128::from(v[1]);
        let initseq = (u128::from(v[2]) << 64) | u128::from(v[3]);
        let mut p = Pcg64 { state: 0, inc: (initseq << 1) | 1, buffered: None };
        p.step();
        p.state = p.state.wrapping_add(seed);
        p.step();
        p
    }

    fn step(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULT).wrapping_add(self.inc);
    }

    fn output(&self) -> u64 {
        let s = self.state;
        let x = ((s >> 64) as u64) ^ (s as u64);
        x.rotate_right((s >> 122) as u32)
    }
}

impl BitSource for Pcg64 {
    fn next_u64(&mut self) -> u64 {
        self.step();
        self.output()
    }

    fn next_u32(&mut self) -> u32 {
        if let Some(v) = self.buffered.take() {
            return v;
        }
        let next = self.next_u64();
        self.buffered = Some((next >> 32) as u32);
        next as u32
    }
}

/// `np.random.Generator` over PCG64, for the draws vLLM's random dataset makes.
#[derive(Clone, Debug)]
pub struct Generator {
    bitgen: Pcg64,
}

impl Generator {
    /// `np.random.default_rng(seed)`.
    pub fn default_rng(seed: u64) -> Self {
        Generator { bitgen: Pcg64::from_seed_sequence(&SeedSequence::new(u128::from(seed))) }
    }

    /// `np.random.default_rng(n)` for an integer seed up to 2^128.
    pub fn from_entropy(entropy: u128) -> Self {
        Generator { bitgen: Pcg64::from_seed_sequence(&SeedSequence::new(entropy)) }
    }

    /// `integers(low, high, size)` (int64, `high` exclusive). Empty when `high <= low`
    /// (numpy raises).
    pub fn integers(&mut self, low: i64, high: i64, size: usize) -> Vec<i64> {
        let Some((off, rng)) = bounded::span(low, high) else {
            return Vec::new();
        };
        bounded::fill(&mut self.bitgen, off, rng, size, Method::Lemire).into_iter().map(|v| v as i64).collect()
    }

    /// `random()`: a double in [0, 1) from the top 53 bits of a 64-bit draw.
    pub fn random(&mut self) -> f64 {
        (self.bitgen.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `bit_generator.random_raw()`.
    pub fn random_raw(&mut self) -> u64 {
        self.bitgen.next_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn u64s(v: &Value) -> Vec<u64> {
        v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect()
    }

    fn i64s(v: &Value) -> Vec<i64> {
        v.as_array().unwrap().iter().map(|x| x.as_i64().unwrap()).collect()
    }

    #[test]
    fn matches_numpy_default_rng() {
        let v: Value = serde_json::from_str(include_str!("vectors/numpy_python.json")).unwrap();
        let cases = v["pcg64"].as_array().unwrap();
        assert_eq!(cases.len(), 5);
        for case in cases {
            let seed: u128 = case["seed"].as_str().unwrap().parse().unwrap();
            let ss = SeedSequence::new(seed);
            assert_eq!(ss.generate_state_u64(4), u64s(&case["state_u64"]), "seed {seed}");
            let fresh = || Generator::from_entropy(seed);
            let mut g = fresh();
            let raw: Vec<u64> = (0..4).map(|_| g.random_raw()).collect();
            assert_eq!(raw, u64s(&case["raw_u64"]), "seed {seed}");
            let mut g = fresh();
            let r: Vec<u64> = (0..5).map(|_| g.random().to_bits()).collect();
            assert_eq!(r, u64s(&case["random"]), "seed {seed}");
            for (range, want) in case["integers"].as_object().unwrap() {
                let (lo, hi) = range.split_once(',').unwrap();
                let (lo, hi): (i64, i64) = (lo.parse().unwrap(), hi.parse().unwrap());
                let mut g = fresh();
                assert_eq!(g.integers(lo, hi, 11), i64s(want), "seed {seed} [{lo},{hi})");
            }
            let mut g = fresh();
            let mut seq = g.integers(0, 10, 3);
            seq.extend(g.integers(0, 1 << 40, 2));
            seq.extend(g.integers(0, 1000, 3));
            seq.extend(g.integers(3, 4, 2));
            seq.extend(g.integers(0, 7, 1));
            assert_eq!(seq, i64s(&case["interleaved"]), "seed {seed}");
        }
    }

    #[test]
    fn default_rng_takes_u64_seeds() {
        let mut a = Generator::default_rng(42);
        let mut b = Generator::default_rng(42);
        assert_eq!(a.integers(0, 100, 5), b.integers(0, 100, 5));
        assert!(a.integers(3, 3, 2).is_empty());
    }
}
