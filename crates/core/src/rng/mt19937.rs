//! The Mersenne Twister MT19937 generator shared by numpy's legacy `RandomState` and CPython's
//! `random` module, with both of their seeding procedures.

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// MT19937 state: 624 words and the read position.
#[derive(Clone, PartialEq, Eq)]
pub struct Mt19937 {
    key: [u32; N],
    pos: usize,
}

impl std::fmt::Debug for Mt19937 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mt19937").field("pos", &self.pos).finish()
    }
}

impl Mt19937 {
    /// `init_genrand(seed)`: numpy's `np.random.seed(int)`.
    pub fn from_seed(seed: u32) -> Self {
        let mut key = [0u32; N];
        key[0] = seed;
        for i in 1..N {
            let prev = key[i - 1];
            key[i] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i as u32);
        }
        Mt19937 { key, pos: N }
    }

    /// `init_by_array(key)`: CPython's `random.seed(int)` with the int's 32-bit words,
    /// least significant first.
    pub fn from_key(init_key: &[u32]) -> Self {
        let mut s = Self::from_seed(19_650_218);
        let mt = &mut s.key;
        let key_len = init_key.len().max(1);
        let word = |j: usize| init_key.get(j).copied().unwrap_or(0);
        let mut i = 1usize;
        let mut j = 0usize;
        for _ in 0..N.max(key_len) {
            let prev = mt[i - 1];
            mt[i] =
                (mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525)).wrapping_add(word(j)).wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key_len {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = mt[i - 1];
            mt[i] = (mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
        s.pos = N;
        s
    }

    fn generate(&mut self) {
        let twist = |a: u32, b: u32, c: u32| {
            let y = (a & UPPER_MASK) | (b & LOWER_MASK);
            c ^ (y >> 1) ^ (0u32.wrapping_sub(y & 1) & MATRIX_A)
        };
        for i in 0..N - M {
            self.key[i] = twist(self.key[i], self.key[i + 1], self.key[i + M]);
        }
        for i in N - M..N - 1 {
            self.key[i] = twist(self.key[i], self.key[i + 1], self.key[i + M - N]);
        }
        self.key[N - 1] = twist(self.key[N - 1], self.key[0], self.key[M - 1]);
        self.pos = 0;
    }

    /// The next tempered 32-bit output (`genrand_uint32`).
    pub fn next_u32(&mut self) -> u32 {
        if self.pos >= N {
            self.generate();
        }
        let mut y = self.key[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// A double in [0, 1) with 53 random bits, as both numpy (`random_sample`) and CPython
    /// (`random()`) build it: `(a >> 5) * 2^26 + (b >> 6)` over `2^53`.
    pub fn next_f64(&mut self) -> f64 {
        let a = f64::from(self.next_u32() >> 5);
        let b = f64::from(self.next_u32() >> 6);
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }

    /// Two outputs joined high word first, as numpy's `mt19937_next64` does.
    pub fn next_u64(&mut self) -> u64 {
        let hi = u64::from(self.next_u32());
        let lo = u64::from(self.next_u32());
        (hi << 32) | lo
    }
}
