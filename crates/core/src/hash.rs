//! Stable hashing: FNV-1a (64 bit), fixed forever unlike `std`'s hasher, for anything that
//! must hash the same in every servebench version and on every machine (run ids, import
//! fingerprints, plan hashes).

/// A streaming FNV-1a (64 bit) hasher.
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    /// Adds `bytes`.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Adds a length-prefixed byte string, so that `("ab", "c")` and `("a", "bc")` differ.
    pub fn write_field(&mut self, bytes: &[u8]) {
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }

    pub fn finish(self) -> u64 {
        self.0
    }
}

/// FNV-1a of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = Fnv1a::default();
    h.write(bytes);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_its_published_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn fields_are_length_prefixed() {
        let pair = |a: &[u8], b: &[u8]| {
            let mut h = Fnv1a::default();
            h.write_field(a);
            h.write_field(b);
            h.finish()
        };
        assert_ne!(pair(b"ab", b"c"), pair(b"a", b"bc"));
        assert_eq!(pair(b"ab", b"c"), pair(b"ab", b"c"));
    }
}
