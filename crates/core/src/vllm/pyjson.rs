//! Python's number and JSON spelling: `repr(float)` and `json.dumps` with default arguments.
//!
//! vLLM writes its result file with `json.dump(result, f)`, and prints some values with
//! `str(float)`. Both differ from what serde_json and Rust's `Display` produce (`1e-05` vs
//! `1e-5`, `52.0` vs `52`, `", "` separators, `\u00e9` escapes), so they are spelled out here.

use std::fmt::Write as _;

use serde_json::Value;

/// Python's `repr(x)` (and `str(x)`) for a float: the shortest digits that read back to the
/// same value, in positional notation with at least one decimal (`52.0`, `0.0001`) when the
/// decimal exponent is in `[-4, 16)`, else in exponent notation (`1e-05`, `1.5e+16`).
/// Non-finite values are `inf`, `-inf` and `nan`.
pub fn py_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    let (digits, exp) = shortest_digits(x.abs());
    let negative = x.is_sign_negative();
    // Python's `decpt`: the value is 0.DIGITS * 10^decpt.
    let decpt = exp + 1;
    let mut out = String::with_capacity(digits.len() + 8);
    if negative {
        out.push('-');
    }
    if decpt <= -4 || decpt > 16 {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        let sign = if e < 0 { '-' } else { '+' };
        let _ = write!(out, "e{sign}{:02}", e.unsigned_abs());
    } else if decpt <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', decpt.unsigned_abs() as usize));
        out.push_str(&digits);
    } else {
        let point = decpt as usize;
        if point >= digits.len() {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', point - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
    out
}

/// The shortest decimal digits that read back as `x` (finite, non-negative) and the
/// decimal exponent of the first digit, choosing as Python does between two candidates that
/// are equally close to `x`: the one with an even last digit.
fn shortest_digits(x: f64) -> (String, i32) {
    let (digits, exp) = split_sci(&format!("{x:e}"));
    // An exact tie between two shortest candidates needs 16 or 17 digits (fewer digits are
    // spaced wider than the float's rounding interval), and an exact value with one more
    // digit, a 5. Rust rounds such ties up; Python rounds them to even.
    let k = digits.len();
    if k < 16 {
        return (digits, exp);
    }
    // Two more digits than the shortest: a tie reads `...50` (and is then checked exactly).
    let (longer, longer_exp) = split_sci(&format!("{x:.prec$e}", prec = k + 1));
    if longer_exp != exp || !longer.ends_with("50") || !is_exact(x, &longer, exp) {
        return (digits, exp);
    }
    let lower = &longer[..k];
    if lower.ends_with(['0', '2', '4', '6', '8']) && lower != digits {
        let candidate = format!("{}.{}e{exp}", &lower[..1], &lower[1..]);
        if candidate.parse::<f64>().ok() == Some(x) {
            return (lower.to_string(), exp);
        }
    }
    (digits, exp)
}

/// Whether `0.DIGITS × 10^(exp+1)` is exactly `x`: compares with the complete decimal
/// expansion of `x`, which has at most 767 significant digits.
fn is_exact(x: f64, digits: &str, exp: i32) -> bool {
    let (full, full_exp) = split_sci(&format!("{x:.800e}"));
    full_exp == exp && full.starts_with(digits) && full[digits.len()..].bytes().all(|b| b == b'0')
}

/// Splits Rust's `d.ddde±x` into the digits without the point and the exponent.
fn split_sci(sci: &str) -> (String, i32) {
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    let digits = mantissa.chars().filter(char::is_ascii_digit).collect();
    (digits, exp.parse().unwrap_or(0))
}

/// A float as Python's `json.dumps` writes it: its repr, with `Infinity`, `-Infinity` and
/// `NaN` for the non-finite values.
pub fn py_json_float(x: f64) -> String {
    if x.is_nan() {
        "NaN".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
    } else {
        py_float_repr(x)
    }
}

/// A number vLLM holds as a Python `int` when whole (ramp-up rates are parsed with
/// `type=int`) but which the config stores as `f64`: whole values print as integers,
/// others as a float repr.
pub fn py_whole_or_float(x: f64) -> String {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 1e16 { format!("{x:.0}") } else { py_float_repr(x) }
}

/// `json.dumps(value)` with Python's defaults: `", "` and `": "` separators, no indentation,
/// no trailing newline, keys in insertion order, non-ASCII escaped as `\uXXXX` (surrogate
/// pairs above U+FFFF), floats as [`py_float_repr`], integers as integers.
pub fn to_python_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                let _ = write!(out, "{u}");
            } else if let Some(i) = n.as_i64() {
                let _ = write!(out, "{i}");
            } else {
                out.push_str(&py_json_float(n.as_f64().unwrap_or(f64::NAN)));
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(out, k);
                out.push_str(": ");
                write_value(out, v);
            }
            out.push('}');
        }
    }
}

/// A JSON string with `ensure_ascii=True`: printable ASCII as is, the usual short escapes,
/// everything else as lowercase `\uXXXX`.
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python_on_the_committed_vectors() {
        let cases: Vec<(String, String)> =
            serde_json::from_str(include_str!("../../testdata/python_float_repr.json")).unwrap();
        assert!(cases.len() > 1000, "the vector file lost its cases");
        for (bits, want) in cases {
            let x = f64::from_bits(u64::from_str_radix(&bits, 16).unwrap());
            assert_eq!(py_float_repr(x), want, "bits {bits}");
        }
    }

    #[test]
    fn float_repr_examples() {
        assert_eq!(py_float_repr(52.0), "52.0");
        assert_eq!(py_float_repr(0.1), "0.1");
        assert_eq!(py_float_repr(1e-5), "1e-05");
        assert_eq!(py_float_repr(0.0001), "0.0001");
        assert_eq!(py_float_repr(1.5e16), "1.5e+16");
        assert_eq!(py_float_repr(1e16), "1e+16");
        assert_eq!(py_float_repr(9_999_999_999_999_998.0), "9999999999999998.0");
        assert_eq!(py_float_repr(-0.0), "-0.0");
        assert_eq!(py_float_repr(f64::INFINITY), "inf");
        assert_eq!(py_float_repr(f64::NAN), "nan");
        assert_eq!(py_json_float(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(py_json_float(f64::NAN), "NaN");
        assert_eq!(py_whole_or_float(4.0), "4");
        assert_eq!(py_whole_or_float(2.5), "2.5");
    }

    #[test]
    fn json_dumps_matches_python_on_the_committed_vectors() {
        let cases: Vec<serde_json::Value> =
            serde_json::from_str(include_str!("../../testdata/python_json_dumps.json")).unwrap();
        assert!(cases.len() >= 5);
        for case in cases {
            let input: Value = serde_json::from_str(case["input"].as_str().unwrap()).unwrap();
            assert_eq!(to_python_json(&input), case["python"].as_str().unwrap());
        }
    }

    proptest::proptest! {
        #[test]
        fn float_repr_reads_back_exactly_with_the_fewest_digits(bits in proptest::prelude::any::<u64>()) {
            let x = f64::from_bits(bits);
            let repr = py_float_repr(x);
            if x.is_finite() {
                proptest::prop_assert_eq!(repr.parse::<f64>().unwrap().to_bits(), x.to_bits());
                // As many significant digits as Rust's shortest round-trip form.
                let significant = |s: &str| {
                    let m: String = s.split('e').next().unwrap().chars().filter(char::is_ascii_digit).collect();
                    m.trim_matches('0').len().max(1)
                };
                proptest::prop_assert_eq!(significant(&repr), significant(&format!("{x:e}")));
            }
        }

        #[test]
        fn strings_survive_python_escaping(s in "\\PC*|[\\x00-\\x7f]*") {
            let text = to_python_json(&Value::String(s.clone()));
            proptest::prop_assert!(text.is_ascii());
            proptest::prop_assert_eq!(serde_json::from_str::<String>(&text).unwrap(), s);
        }
    }
}
