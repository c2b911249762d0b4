//! Python's number and JSON spelling: `repr(float)` and `json.dumps`, byte for byte.
//!
//! vLLM writes its result file with `json.dump(result, f)` and prints some values with
//! `str(float)`; its benchmark client sends request bodies as `json.dumps(payload)`; chat
//! templates' `tojson` is Jinja2's, itself `json.dumps`. All differ from what serde_json and
//! Rust's `Display` produce (`1e-05` vs `1e-5`, `52.0` vs `52`, `", "` separators, `\u00e9`
//! escapes), so they are spelled out here once.
//!
//! [`dumps`] uses `json.dumps`'s defaults: `", "` and `": "`
//! separators, `ensure_ascii=True` (`\uXXXX` escapes, lowercase hex, surrogate pairs), keys in
//! insertion order, floats as [`py_float_repr`]. [`dumps_with`] takes the other options.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// The `json.dumps` options that change the output.
#[derive(Clone, Debug, PartialEq)]
pub struct Style {
    pub ensure_ascii: bool,
    /// Pretty-print with this many spaces per level (`indent=`).
    pub indent: Option<usize>,
    pub item_separator: String,
    pub key_separator: String,
    pub sort_keys: bool,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            ensure_ascii: true,
            indent: None,
            item_separator: ", ".into(),
            key_separator: ": ".into(),
            sort_keys: false,
        }
    }
}

impl Style {
    /// Python's defaults for a given `indent`: with an indent the item separator is `","`.
    pub fn with_indent(indent: Option<usize>, ensure_ascii: bool) -> Self {
        Style {
            ensure_ascii,
            indent,
            item_separator: if indent.is_some() { "," } else { ", " }.into(),
            ..Style::default()
        }
    }
}

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

/// `json.dumps(value)` with Python's defaults.
pub fn dumps(value: &Value) -> String {
    dumps_with(value, &Style::default())
}

/// `json.dumps(value, ...)` with the given options.
pub fn dumps_with(value: &Value, style: &Style) -> String {
    let mut out = String::new();
    write_value(&mut out, value, style, 0);
    out
}

fn newline(out: &mut String, style: &Style, level: usize) {
    if let Some(n) = style.indent {
        out.push('\n');
        out.extend(std::iter::repeat_n(' ', n * level));
    }
}

fn write_value(out: &mut String, v: &Value, style: &Style, level: usize) {
    match v {
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
        Value::String(s) => write_str(out, s, style.ensure_ascii),
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_separator);
                }
                newline(out, style, level + 1);
                write_value(out, item, style, level + 1);
            }
            newline(out, style, level);
            out.push(']');
        }
        Value::Object(map) => write_object(out, map, style, level),
    }
}

fn write_object(out: &mut String, map: &Map<String, Value>, style: &Style, level: usize) {
    if map.is_empty() {
        out.push_str("{}");
        return;
    }
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    if style.sort_keys {
        entries.sort_by(|a, b| a.0.cmp(b.0));
    }
    out.push('{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push_str(&style.item_separator);
        }
        newline(out, style, level + 1);
        write_str(out, k, style.ensure_ascii);
        out.push_str(&style.key_separator);
        write_value(out, v, style, level + 1);
    }
    newline(out, style, level);
    out.push('}');
}

/// A JSON string literal as Python writes it: the usual short escapes, other control
/// characters as `\u00XX`; with `ensure_ascii` everything outside printable ASCII as lowercase
/// `\uXXXX` (surrogate pairs above U+FFFF), without it as is.
pub fn write_str(out: &mut String, s: &str, ensure_ascii: bool) {
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
            c if ensure_ascii || (c as u32) < 0x20 => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn float_repr_matches_python_on_the_committed_vectors() {
        let cases: Vec<(String, String)> =
            serde_json::from_str(include_str!("../testdata/python_float_repr.json")).unwrap();
        assert!(cases.len() > 1000, "the vector file lost its cases");
        for (bits, want) in cases {
            let x = f64::from_bits(u64::from_str_radix(&bits, 16).unwrap());
            assert_eq!(py_float_repr(x), want, "bits {bits}");
        }
    }

    #[test]
    fn float_repr_examples() {
        let cases = [
            (52.0, "52.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (0.3, "0.3"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1.5e16, "1.5e+16"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (9_999_999_999_999_998.0, "9999999999999998.0"),
            (123456789.125, "123456789.125"),
            (-2.5, "-2.5"),
            (1.5e300, "1.5e+300"),
            (5e-324, "5e-324"),
            (2.0f64.powi(60), "1.152921504606847e+18"),
            (-0.0, "-0.0"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
        ];
        for (x, want) in cases {
            assert_eq!(py_float_repr(x), want, "{x:e}");
        }
        assert_eq!(py_json_float(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(py_json_float(f64::NAN), "NaN");
        assert_eq!(py_whole_or_float(4.0), "4");
        assert_eq!(py_whole_or_float(2.5), "2.5");
    }

    #[test]
    fn json_dumps_matches_python_on_the_committed_vectors() {
        let cases: Vec<Value> = serde_json::from_str(include_str!("../testdata/python_json_dumps.json")).unwrap();
        assert!(cases.len() >= 5);
        for case in cases {
            let input: Value = serde_json::from_str(case["input"].as_str().unwrap()).unwrap();
            assert_eq!(dumps(&input), case["python"].as_str().unwrap());
        }
    }

    #[test]
    fn dumps_uses_python_separators_and_ascii_escapes() {
        let v = json!({"model": "m", "prompt": "héllo \"q\"\n\t\u{1}😀\u{7f}", "n": [1, 2.0, null, true], "e": {}});
        assert_eq!(
            dumps(&v),
            r#"{"model": "m", "prompt": "h\u00e9llo \"q\"\n\t\u0001\ud83d\ude00\u007f", "n": [1, 2.0, null, true], "e": {}}"#
        );
    }

    #[test]
    fn ensure_ascii_false_keeps_unicode_and_indent_matches_python() {
        let v = json!({"b": [1, {"c": "é\u{7f}\u{1}"}], "a": []});
        let s = Style::with_indent(Some(2), false);
        assert_eq!(
            dumps_with(&v, &s),
            "{\n  \"b\": [\n    1,\n    {\n      \"c\": \"é\u{7f}\\u0001\"\n    }\n  ],\n  \"a\": []\n}"
        );
        let sorted = Style { sort_keys: true, ensure_ascii: false, ..Style::default() };
        assert_eq!(dumps_with(&v, &sorted), "{\"a\": [], \"b\": [1, {\"c\": \"é\u{7f}\\u0001\"}]}");
    }

    proptest! {
        #[test]
        fn float_repr_reads_back_exactly_with_the_fewest_digits(bits in any::<u64>()) {
            let x = f64::from_bits(bits);
            let repr = py_float_repr(x);
            if x.is_finite() {
                prop_assert_eq!(repr.parse::<f64>().unwrap().to_bits(), x.to_bits());
                prop_assert!(repr.contains('.') || repr.contains('e'));
                // As many significant digits as Rust's shortest round-trip form.
                let significant = |s: &str| {
                    let m: String = s.split('e').next().unwrap().chars().filter(char::is_ascii_digit).collect();
                    m.trim_matches('0').len().max(1)
                };
                prop_assert_eq!(significant(&repr), significant(&format!("{x:e}")));
            }
        }

        #[test]
        fn strings_survive_python_escaping(s in "\\PC*|[\\x00-\\x7f]*") {
            let text = dumps(&Value::String(s.clone()));
            prop_assert!(text.is_ascii());
            prop_assert_eq!(serde_json::from_str::<String>(&text).unwrap(), s.clone());
            let unicode = dumps_with(&Value::String(s.clone()), &Style { ensure_ascii: false, ..Style::default() });
            prop_assert_eq!(serde_json::from_str::<String>(&unicode).unwrap(), s);
        }
    }
}
