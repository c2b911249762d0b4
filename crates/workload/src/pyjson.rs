//! JSON text exactly as Python's `json.dumps` writes it, so request bodies are byte-identical to
//! vLLM's (aiohttp sends `json.dumps(payload)`) and chat templates' `tojson` matches Jinja2's.
//!
//! Defaults are `json.dumps`'s: `", "` and `": "` separators, `ensure_ascii=True` (`\uXXXX`
//! escapes, lowercase hex, surrogate pairs), floats as Python `repr` (`1.0`, `1e-05`, `1e+16`).

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

/// `json.dumps(value)` with default options.
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
            if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else if let Some(u) = n.as_u64() {
                out.push_str(&u.to_string());
            } else {
                out.push_str(&float_repr(n.as_f64().unwrap_or(f64::NAN)));
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

fn push_u_escape(out: &mut String, unit: u16) {
    use std::fmt::Write;
    let _ = write!(out, "\\u{unit:04x}");
}

/// A JSON string literal as Python writes it.
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
            c if (c as u32) < 0x20 => push_u_escape(out, c as u16),
            c if ensure_ascii && (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    push_u_escape(out, *unit);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr(float)`: the shortest round-tripping digits, in fixed notation when the
/// decimal exponent is in [-4, 16), else as `d.ddde+XX`.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` prints the shortest round-tripping digits: "1.2345e-7".
    let sci = format!("{:e}", x.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let sign = if x < 0.0 { "-" } else { "" };
    let decpt = exp + 1; // value = 0.DIGITS * 10^decpt
    let n = digits.len() as i32;
    let body = if (-4 < decpt) && (decpt <= 16) {
        if decpt <= 0 {
            format!("0.{}{}", "0".repeat((-decpt) as usize), digits)
        } else if decpt >= n {
            format!("{}{}.0", digits, "0".repeat((decpt - n) as usize))
        } else {
            let (a, b) = digits.split_at(decpt as usize);
            format!("{a}.{b}")
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let e = decpt - 1;
        let esign = if e < 0 { '-' } else { '+' };
        if rest.is_empty() {
            format!("{first}e{esign}{:02}", e.abs())
        } else {
            format!("{first}.{rest}e{esign}{:02}", e.abs())
        }
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn floats_print_like_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789.125, "123456789.125"),
            (-2.5, "-2.5"),
            (1.5e300, "1.5e+300"),
            (5e-324, "5e-324"),
            (0.3, "0.3"),
            (2.0f64.powi(60), "1.152921504606847e+18"),
            (-0.0, "-0.0"),
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(x), want, "{x:e}");
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
        let v = json!({"b": [1, {"c": "é"}], "a": []});
        let s = Style::with_indent(Some(2), false);
        assert_eq!(dumps_with(&v, &s), "{\n  \"b\": [\n    1,\n    {\n      \"c\": \"é\"\n    }\n  ],\n  \"a\": []\n}");
        let sorted = Style { sort_keys: true, ensure_ascii: false, ..Style::default() };
        assert_eq!(dumps_with(&v, &sorted), r#"{"a": [], "b": [1, {"c": "é"}]}"#);
    }

    proptest! {
        #[test]
        fn float_repr_round_trips(bits in any::<u64>()) {
            let x = f64::from_bits(bits);
            prop_assume!(x.is_finite());
            let s = float_repr(x);
            let back: f64 = s.parse().unwrap();
            prop_assert_eq!(back.to_bits(), x.to_bits());
            prop_assert!(s.contains('.') || s.contains('e'));
        }

        #[test]
        fn ascii_output_parses_back_to_the_same_string(s in any::<String>()) {
            let out = dumps(&Value::String(s.clone()));
            prop_assert!(out.is_ascii());
            let back: String = serde_json::from_str(&out).unwrap();
            prop_assert_eq!(back, s);
        }
    }
}
