//! numpy's bounded integer generation (`random_bounded_uint64_fill`): masked rejection for the
//! legacy `RandomState.randint`, Lemire's multiply-shift for `Generator.integers`, each with the
//! 32-bit path numpy takes when the range fits in 32 bits.

/// A source of raw 32- and 64-bit draws (numpy's `bitgen_t`).
pub trait BitSource {
    fn next_u32(&mut self) -> u32;
    fn next_u64(&mut self) -> u64;
}

/// How out-of-range draws are rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Mask to the next power of two and redraw until in range (legacy `RandomState`).
    Masked,
    /// Lemire's nearly-divisionless method (`Generator`).
    Lemire,
}

/// Smallest all-ones mask covering `max`.
fn gen_mask(max: u64) -> u64 {
    let mut m = max;
    m |= m >> 1;
    m |= m >> 2;
    m |= m >> 4;
    m |= m >> 8;
    m |= m >> 16;
    m |= m >> 32;
    m
}

fn lemire_u32<S: BitSource + ?Sized>(src: &mut S, rng: u32) -> u32 {
    let rng_excl = rng + 1;
    let mut m = u64::from(src.next_u32()) * u64::from(rng_excl);
    let mut leftover = m as u32;
    if leftover < rng_excl {
        let threshold = (u32::MAX - rng) % rng_excl;
        while leftover < threshold {
            m = u64::from(src.next_u32()) * u64::from(rng_excl);
            leftover = m as u32;
        }
    }
    (m >> 32) as u32
}

fn lemire_u64<S: BitSource + ?Sized>(src: &mut S, rng: u64) -> u64 {
    let rng_excl = rng + 1;
    let mut m = u128::from(src.next_u64()) * u128::from(rng_excl);
    let mut leftover = m as u64;
    if leftover < rng_excl {
        let threshold = (u64::MAX - rng) % rng_excl;
        while leftover < threshold {
            m = u128::from(src.next_u64()) * u128::from(rng_excl);
            leftover = m as u64;
        }
    }
    (m >> 64) as u64
}

/// Draws `count` values in `[off, off + rng]` (inclusive), exactly as numpy does for int64.
pub fn fill<S: BitSource + ?Sized>(src: &mut S, off: u64, rng: u64, count: usize, method: Method) -> Vec<u64> {
    let mut out = Vec::with_capacity(count);
    if rng == 0 {
        out.resize(count, off);
    } else if rng <= u64::from(u32::MAX) {
        let rng32 = rng as u32;
        if rng32 == u32::MAX {
            for _ in 0..count {
                out.push(off.wrapping_add(u64::from(src.next_u32())));
            }
        } else {
            let mask = gen_mask(rng) as u32;
            for _ in 0..count {
                let v = match method {
                    Method::Masked => loop {
                        let v = src.next_u32() & mask;
                        if v <= rng32 {
                            break v;
                        }
                    },
                    Method::Lemire => lemire_u32(src, rng32),
                };
                out.push(off.wrapping_add(u64::from(v)));
            }
        }
    } else if rng == u64::MAX {
        for _ in 0..count {
            out.push(off.wrapping_add(src.next_u64()));
        }
    } else {
        let mask = gen_mask(rng);
        for _ in 0..count {
            let v = match method {
                Method::Masked => loop {
                    let v = src.next_u64() & mask;
                    if v <= rng {
                        break v;
                    }
                },
                Method::Lemire => lemire_u64(src, rng),
            };
            out.push(off.wrapping_add(v));
        }
    }
    out
}

/// `[low, high)` as numpy's int64 path sees it: the offset and the inclusive span.
/// `None` when the range is empty.
pub fn span(low: i64, high: i64) -> Option<(u64, u64)> {
    if high <= low {
        return None;
    }
    let rng = (high as i128 - 1 - low as i128) as u64;
    Some((low as u64, rng))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_is_the_smallest_covering_power_of_two_minus_one() {
        assert_eq!(gen_mask(0), 0);
        assert_eq!(gen_mask(1), 1);
        assert_eq!(gen_mask(5), 7);
        assert_eq!(gen_mask(8), 15);
        assert_eq!(gen_mask(151_642), 262_143);
        assert_eq!(gen_mask(u64::MAX), u64::MAX);
    }

    #[test]
    fn span_is_inclusive_and_rejects_empty_ranges() {
        assert_eq!(span(0, 10), Some((0, 9)));
        assert_eq!(span(-7, 9), Some(((-7i64) as u64, 15)));
        assert_eq!(span(3, 3), None);
        assert_eq!(span(i64::MIN, i64::MAX), Some((i64::MIN as u64, u64::MAX - 1)));
    }
}
