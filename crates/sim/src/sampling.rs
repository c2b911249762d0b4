//! vLLM's checks of a request's sampling parameters (its `SamplingParams` refuses a value out of
//! range): the HTTP API answers such a request as vLLM's server does (400, naming the
//! parameter; SGLang's dialect too, llama.cpp's takes any value), and `predict` counts it as a
//! failed request with the same reason. A value in range is accepted and changes nothing the
//! simulator times.

use serde_json::Value;

/// A sampling parameter out of vLLM's range: which, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct BadSampling {
    pub param: &'static str,
    pub message: String,
}

/// Each parameter, the values vLLM takes, and its rule as vLLM words it.
type Rule = (&'static str, fn(f64) -> bool, &'static str);

const RULES: [Rule; 7] = [
    ("temperature", |t| t >= 0.0, "must be non-negative"),
    ("top_p", |p| p > 0.0 && p <= 1.0, "must be in (0, 1]"),
    ("top_k", |k| k.fract() == 0.0 && k >= -1.0, "must be 0 or -1 (disable), or a whole number of at least 1"),
    ("min_p", |p| (0.0..=1.0).contains(&p), "must be in [0, 1]"),
    ("presence_penalty", |p| (-2.0..=2.0).contains(&p), "must be in [-2, 2]"),
    ("frequency_penalty", |p| (-2.0..=2.0).contains(&p), "must be in [-2, 2]"),
    ("repetition_penalty", |p| p > 0.0, "must be greater than zero"),
];

/// The first sampling parameter of a request body that vLLM would refuse; a parameter that is
/// absent or null is vLLM's default.
pub fn check(body: &Value) -> Result<(), BadSampling> {
    body.as_object().map_or(Ok(()), check_fields)
}

/// [`check`] on a body's fields (a run's `extra_body`, which every request carries).
pub fn check_fields(fields: &serde_json::Map<String, Value>) -> Result<(), BadSampling> {
    for (param, ok, rule) in RULES {
        let Some(v) = fields.get(param).filter(|v| !v.is_null()) else { continue };
        let message = match v.as_f64() {
            Some(x) if ok(x) => continue,
            Some(_) => format!("{param} {rule}, got {v}."),
            None => format!("{param} must be a number, got {v}."),
        };
        return Err(BadSampling { param, message });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn values_vllm_refuses_are_named_with_their_rule() {
        for (body, param, words) in [
            (json!({"temperature": -1}), "temperature", "temperature must be non-negative, got -1."),
            (json!({"top_p": 0}), "top_p", "top_p must be in (0, 1], got 0."),
            (json!({"top_p": 1.5}), "top_p", "top_p must be in (0, 1], got 1.5."),
            (
                json!({"top_k": -2}),
                "top_k",
                "top_k must be 0 or -1 (disable), or a whole number of at least 1, got -2.",
            ),
            (json!({"top_k": 2.5}), "top_k", "got 2.5."),
            (json!({"min_p": 1.1}), "min_p", "min_p must be in [0, 1], got 1.1."),
            (json!({"presence_penalty": -2.5}), "presence_penalty", "presence_penalty must be in [-2, 2], got -2.5."),
            (json!({"frequency_penalty": 3}), "frequency_penalty", "frequency_penalty must be in [-2, 2], got 3."),
            (json!({"repetition_penalty": 0}), "repetition_penalty", "repetition_penalty must be greater than zero"),
            (json!({"temperature": "hot"}), "temperature", "temperature must be a number, got \"hot\"."),
        ] {
            let e = check(&body).unwrap_err();
            assert_eq!(e.param, param, "{body}");
            assert!(e.message.contains(words), "{body}: {}", e.message);
        }
    }

    #[test]
    fn vllm_s_defaults_and_the_values_it_takes_pass() {
        let fine = json!({"temperature": 0, "top_p": 1, "top_k": -1, "min_p": 0, "presence_penalty": -2,
            "frequency_penalty": 2, "repetition_penalty": 1.1, "seed": -5, "logprobs": -1});
        assert_eq!(check(&fine), Ok(()));
        assert_eq!(check(&json!({"top_k": 0, "temperature": null})), Ok(()));
        assert_eq!(check(&json!({"prompt": "hi"})), Ok(()));
    }

    proptest! {
        /// A penalty is refused exactly outside [-2, 2], and the refusal names it.
        #[test]
        fn a_penalty_is_refused_exactly_outside_its_range(p in -10.0f64..10.0) {
            let got = check(&json!({"presence_penalty": p}));
            prop_assert_eq!(got.is_ok(), (-2.0..=2.0).contains(&p));
            if let Err(e) = got {
                prop_assert_eq!(e.param, "presence_penalty");
            }
        }
    }
}
