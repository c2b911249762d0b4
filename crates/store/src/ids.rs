//! Stable hashes: the short ids of runs and the fingerprints of imported files.
//!
//! FNV-1a (64 bit) is used because it is fixed forever, unlike `std`'s hasher, and ids and
//! fingerprints must come out the same in every servebench version.

pub(crate) use servebench_core::hash::fnv1a64;

/// The fingerprint of one document or block of an imported file: the file content's hash
/// ([`fnv1a64`]) and the 1-based line where the document starts.
pub(crate) fn fingerprint(content_hash: u64, line: usize) -> String {
    format!("{content_hash:016x}:{line}")
}

const LETTERS: &[u8; 26] = b"abcdefghijklmnopqrstuvwxyz";
const ALNUM: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// A short id: 8 characters from the hash of `seed`, a letter first (so it never reads as
/// a run number), then lowercase letters and digits.
pub(crate) fn short_id(seed: &str) -> String {
    let mut h = fnv1a64(seed.as_bytes());
    let mut out = String::with_capacity(8);
    out.push(char::from(LETTERS[(h % 26) as usize]));
    h /= 26;
    for _ in 0..7 {
        out.push(char::from(ALNUM[(h % 36) as usize]));
        h /= 36;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_are_stable_and_start_with_a_letter() {
        let id = short_id("x");
        assert_eq!(id, short_id("x"));
        assert_ne!(id, short_id("y"));
        assert_eq!(id.len(), 8);
        assert!(id.as_bytes()[0].is_ascii_lowercase());
        assert!(id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
    }
}
