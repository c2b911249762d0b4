//! JSON scalars as result files hold them: a count written `64` or `64.0` (tables that went
//! through pandas, where a column with one missing value becomes floats), and a scalar as the
//! text of a label. Every reader of result files and table rows takes them through here.

use serde_json::Value;

/// A count: an integer, or a float with a whole value below 2^64. `None` for anything else
/// (negative, fractional, non-finite, not a number).
pub fn whole_number(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        // `u64::MAX as f64` is 2^64 exactly, the first float past every u64.
        v.as_f64().filter(|x| *x >= 0.0 && x.fract() == 0.0 && *x < u64::MAX as f64).map(|x| x as u64)
    })
}

/// A scalar as a label's text: a string as it is, a whole number without a fraction (`8.0`
/// reads `8`, so `tp: 8.0` names the same deployment as `tp: 8`), another number as JSON
/// spells it, a boolean as `true`/`false`. `None` for null, lists and objects.
pub fn label_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(whole_number(v).map_or_else(|| n.to_string(), |w| w.to_string())),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn counts_are_read_as_integers_or_whole_floats_and_nothing_else() {
        assert_eq!(whole_number(&json!(64)), Some(64));
        assert_eq!(whole_number(&json!(64.0)), Some(64));
        assert_eq!(whole_number(&json!(0)), Some(0));
        assert_eq!(whole_number(&json!(64.5)), None);
        assert_eq!(whole_number(&json!(-1)), None);
        assert_eq!(whole_number(&json!(-1.0)), None);
        assert_eq!(whole_number(&json!(1e30)), None);
        assert_eq!(whole_number(&json!("64")), None);
        assert_eq!(whole_number(&Value::Null), None);
    }

    #[test]
    fn labels_spell_whole_numbers_without_a_fraction() {
        assert_eq!(label_text(&json!(8.0)).as_deref(), Some("8"));
        assert_eq!(label_text(&json!(8)).as_deref(), Some("8"));
        assert_eq!(label_text(&json!(0.8)).as_deref(), Some("0.8"));
        assert_eq!(label_text(&json!("v0.11.2")).as_deref(), Some("v0.11.2"));
        assert_eq!(label_text(&json!(true)).as_deref(), Some("true"));
        assert_eq!(label_text(&json!([1])), None);
        assert_eq!(label_text(&Value::Null), None);
    }

    proptest! {
        #[test]
        fn a_count_reads_the_same_as_an_integer_or_as_a_float(n in 0u64..(1 << 53)) {
            prop_assert_eq!(whole_number(&json!(n)), Some(n));
            prop_assert_eq!(whole_number(&json!(n as f64)), Some(n));
            prop_assert_eq!(label_text(&json!(n as f64)), Some(n.to_string()));
        }

        #[test]
        fn a_fractional_or_negative_number_is_no_count(x in -1e12f64..1e12) {
            let expected = (x >= 0.0 && x.fract() == 0.0).then_some(x as u64);
            prop_assert_eq!(whole_number(&json!(x)), expected);
        }
    }
}
