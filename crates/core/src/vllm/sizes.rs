//! vLLM's human-readable whole numbers (`32k`, `32K`), as its argument parser reads them.

/// A whole number as vLLM's `human_readable_int` reads it: digits, or digits with a size
/// suffix: `k`, `m`, `g`, `t` powers of 1,000 (with decimals: `25.6k` is 25,600, rounded
/// down), `K`, `M`, `G`, `T` powers of 1,024 (whole numbers only: `32K` is 32,768). Spaces
/// around it are ignored; a number without a suffix is read as Python's `int` reads it (`+5`,
/// `1_000`). `None` for anything else, a negative number and a count past `u64`.
pub fn human_readable_int(s: &str) -> Option<u64> {
    let s = s.trim();
    let (at, suffix) = s.char_indices().last()?;
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    let number = &s[..at];
    // The suffix's place in its row is its power: k is 1,000^1, K is 1,024^1, and so on.
    if let Some(power) = "kmgt".find(suffix) {
        let decimal = match number.split_once('.') {
            Some((whole, frac)) => digits(whole) && digits(frac),
            None => digits(number),
        };
        let n = (number.parse::<f64>().ok().filter(|_| decimal)? * 1e3_f64.powi(power as i32 + 1)).floor();
        // u64::MAX as f64 rounds up to 2^64, itself past u64.
        return (n < u64::MAX as f64).then_some(n as u64);
    }
    if let Some(power) = "KMGT".find(suffix) {
        return number.parse::<u64>().ok().filter(|_| digits(number))?.checked_mul(1 << (10 * (power + 1)));
    }
    // Python's int(): an optional `+`, and `_` between digits (`1_000`).
    let unsigned = s.strip_prefix('+').unwrap_or(s);
    unsigned.split('_').all(digits).then(|| unsigned.replace('_', "").parse().ok())?
}

#[cfg(test)]
mod tests {
    use super::human_readable_int as int;

    #[test]
    fn suffixes_read_as_vllm_reads_them() {
        for (s, n) in [
            ("32768", 32_768),
            ("32k", 32_000),
            ("32K", 32_768),
            ("25.6k", 25_600),
            ("0.04m", 40_000),
            (" 4K ", 4_096),
            ("80g", 80_000_000_000),
            ("2t", 2_000_000_000_000),
            ("1T", 1 << 40),
            ("0", 0),
        ] {
            assert_eq!(int(s), Some(n), "{s}");
        }
        assert_eq!((int("+5"), int("1_000"), int("2_5k")), (Some(5), Some(1_000), None));
        for s in
            ["2.5K", "k", "K", "1e3k", ".5k", "5.k", "-1k", "+4K", "inf", "-2", "32KiB", "", "99999999999T", "_1", "1_"]
        {
            assert_eq!(int(s), None, "{s}");
        }
        assert_eq!(int("18446744073709551615"), Some(u64::MAX));
        assert_eq!(int("18446744073709551616"), None);
        assert_eq!(int("18446744073709551.616k"), None);
    }

    mod properties {
        use proptest::prelude::*;

        use super::int;

        proptest! {
            #[test]
            fn digits_read_as_their_number(n: u64) {
                prop_assert_eq!(int(&n.to_string()), Some(n));
                prop_assert_eq!(int(&format!("  {n}\t")), Some(n));
            }

            #[test]
            fn a_binary_suffix_multiplies_by_its_power_of_1024(n in 0u64..(1 << 24), s in 0usize..4) {
                let (suffix, shift) = [('K', 10), ('M', 20), ('G', 30), ('T', 40)][s];
                prop_assert_eq!(int(&format!("{n}{suffix}")), n.checked_mul(1 << shift));
            }

            #[test]
            fn a_decimal_suffix_multiplies_by_its_power_of_1000(n in 0u64..1_000_000_000, s in 0usize..4) {
                let (suffix, scale) = [('k', 1_000u64), ('m', 1_000_000), ('g', 1_000_000_000), ('t', 1_000_000_000_000)][s];
                prop_assert_eq!(int(&format!("{n}{suffix}")), n.checked_mul(scale));
                // A decimal reads between its whole part and the next whole one.
                if let Some(next) = (n + 1).checked_mul(scale) {
                    let half = int(&format!("{n}.5{suffix}")).unwrap();
                    prop_assert!(half >= n * scale && half < next, "{} {}", n, half);
                }
            }

            #[test]
            fn any_text_is_read_or_refused_without_a_panic(s in "\\PC{0,12}") {
                let _ = int(&s);
            }

            #[test]
            fn a_word_that_is_no_size_is_refused(s in "[0-9]{1,4}([a-zA-Z][0-9a-zA-Z]{1,3}|[.+-][0-9]{0,3}|_|__[0-9])") {
                // A letter before the last character, a sign or point after digits, an
                // underscore not between two digits.
                prop_assert_eq!(int(&s), None, "{}", s);
            }
        }
    }
}
