//! CPython's `random.Random`: `seed(int)` through `init_by_array`, `random()`, `getrandbits`,
//! `_randbelow`, `shuffle` and `choice`, bit-exact so shuffles match vLLM's datasets.

use super::mt19937::Mt19937;

/// A port of `random.Random` (Python 3.11+ semantics).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyRandom {
    mt: Mt19937,
}

impl PyRandom {
    /// `random.seed(n)` for a non-negative integer `n`.
    pub fn new(seed: u64) -> Self {
        Self::from_u128(u128::from(seed))
    }

    /// `random.seed(n)` for integers up to 2^128.
    pub fn from_u128(seed: u128) -> Self {
        let mut words = Vec::new();
        let mut n = seed;
        while n > 0 {
            words.push(n as u32);
            n >>= 32;
        }
        Self::from_words(&words)
    }

    /// `random.seed(n)` where `n`'s 32-bit words are given least significant first.
    pub fn from_words(words: &[u32]) -> Self {
        let mut key: Vec<u32> = words.to_vec();
        while key.len() > 1 && key.last() == Some(&0) {
            key.pop();
        }
        if key.is_empty() {
            key.push(0);
        }
        PyRandom { mt: Mt19937::from_key(&key) }
    }

    /// `random()`: a double in [0, 1).
    pub fn random(&mut self) -> f64 {
        self.mt.next_f64()
    }

    /// `getrandbits(k)` for `k <= 64`.
    pub fn getrandbits(&mut self, k: u32) -> u64 {
        assert!(k <= 64, "getrandbits is ported for k <= 64");
        if k == 0 {
            return 0;
        }
        if k <= 32 {
            return u64::from(self.mt.next_u32() >> (32 - k));
        }
        let low = u64::from(self.mt.next_u32());
        let high = u64::from(self.mt.next_u32() >> (64 - k));
        (high << 32) | low
    }

    /// `_randbelow(n)`: a uniform integer in `[0, n)` by rejection on `n.bit_length()` bits.
    /// `n` must be positive (Python would loop forever on 0); 0 returns 0 without drawing.
    pub fn randbelow(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        let k = 64 - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `shuffle(x)` in place (Fisher–Yates from the end).
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        for i in (1..x.len()).rev() {
            let j = self.randbelow(i as u64 + 1) as usize;
            x.swap(i, j);
        }
    }

    /// `choice(seq)`: an index into a sequence of length `len`, or `None` when it is empty
    /// (Python raises `IndexError`).
    pub fn choice_index(&mut self, len: usize) -> Option<usize> {
        if len == 0 {
            return None;
        }
        Some(self.randbelow(len as u64) as usize)
    }

    /// `choice(seq)`.
    pub fn choice<'a, T>(&mut self, seq: &'a [T]) -> Option<&'a T> {
        self.choice_index(seq.len()).map(|i| &seq[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn u64s(v: &Value) -> Vec<u64> {
        v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect()
    }

    #[test]
    fn matches_cpython_random() {
        let v: Value = serde_json::from_str(include_str!("vectors/numpy_python.json")).unwrap();
        let cases = v["python"].as_array().unwrap();
        assert_eq!(cases.len(), 6);
        for case in cases {
            let seed: u128 = case["seed"].as_str().unwrap().parse().unwrap();
            let mut r = PyRandom::from_u128(seed);
            let got: Vec<u64> = (0..6).map(|_| r.random().to_bits()).collect();
            assert_eq!(got, u64s(&case["random"]), "seed {seed}");
            for k in [1u32, 7, 32, 33, 64] {
                let got: Vec<u64> = (0..3).map(|_| r.getrandbits(k)).collect();
                assert_eq!(got, u64s(&case["getrandbits"][k.to_string()]), "seed {seed} k {k}");
            }
            for n in [1u64, 2, 10, 1000, 1 << 31, (1 << 40) + 1] {
                let got: Vec<u64> = (0..8).map(|_| r.randbelow(n)).collect();
                assert_eq!(got, u64s(&case["randbelow"][n.to_string()]), "seed {seed} n {n}");
            }
            let mut lst: Vec<u64> = (0..37).collect();
            r.shuffle(&mut lst);
            assert_eq!(lst, u64s(&case["shuffle_37"]), "seed {seed}");
            let digits: Vec<u64> = (0..10).collect();
            let got: Vec<u64> = (0..10).map(|_| *r.choice(&digits).unwrap()).collect();
            assert_eq!(got, u64s(&case["choice_10"]), "seed {seed}");
        }
    }

    #[test]
    fn seed_zero_and_empty_words_agree() {
        let mut a = PyRandom::new(0);
        let mut b = PyRandom::from_words(&[]);
        assert_eq!(a.random(), b.random());
        assert!(a.choice::<u8>(&[]).is_none());
    }
}
