//! vLLM's checks of a request's sampling parameters (its `SamplingParams` refuses a value out of
//! range): the HTTP API answers such a request as vLLM's server does (400, naming the
//! parameter; SGLang's dialect too, llama.cpp's takes any value), and `predict` counts it as a
//! failed request with the same reason. A value in range is accepted and changes nothing the
//! simulator times.

use serde_json::Value;
use servebench_core::config::Api;

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

/// The output budget a body asks for, read as the server reads it for `api`: chat's
/// `max_completion_tokens` before its `max_tokens`, the Responses API's `max_output_tokens`,
/// `max_tokens` elsewhere; `None` where the body gives none (absent or null). A budget below 1,
/// or not a whole number, is refused as vLLM refuses it.
pub fn requested_max_tokens(api: Api, body: &Value) -> Result<Option<u64>, BadSampling> {
    let field = |k: &str| body.get(k).filter(|v| !v.is_null());
    let (param, value) = match api {
        Api::Chat => match field("max_completion_tokens") {
            Some(v) => ("max_completion_tokens", Some(v)),
            None => ("max_tokens", field("max_tokens")),
        },
        Api::Completions | Api::Messages => ("max_tokens", field("max_tokens")),
        Api::Responses => ("max_output_tokens", field("max_output_tokens")),
        // A pooling request generates nothing.
        Api::Pooling(_) => return Ok(None),
    };
    let Some(v) = value else { return Ok(None) };
    match v.as_i64() {
        Some(asked) if asked >= 1 => Ok(Some(asked.unsigned_abs())),
        Some(asked) => Err(BadSampling { param, message: format!("{param} must be at least 1, got {asked}.") }),
        None => Err(BadSampling { param, message: format!("{param} must be a whole number, got {v}.") }),
    }
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

    #[test]
    fn the_output_budget_is_read_per_api_and_refused_below_one() {
        let body = json!({"max_tokens": 7, "max_completion_tokens": 9, "max_output_tokens": 11});
        assert_eq!(requested_max_tokens(Api::Completions, &body), Ok(Some(7)));
        assert_eq!(requested_max_tokens(Api::Chat, &body), Ok(Some(9)));
        assert_eq!(
            requested_max_tokens(Api::Chat, &json!({"max_tokens": 5, "max_completion_tokens": null})),
            Ok(Some(5))
        );
        assert_eq!(requested_max_tokens(Api::Responses, &body), Ok(Some(11)));
        assert_eq!(requested_max_tokens(Api::Completions, &json!({"max_tokens": null})), Ok(None));
        let e = requested_max_tokens(Api::Completions, &json!({"max_tokens": 0})).unwrap_err();
        assert_eq!((e.param, e.message.as_str()), ("max_tokens", "max_tokens must be at least 1, got 0."));
        let e = requested_max_tokens(Api::Responses, &json!({"max_output_tokens": "ten"})).unwrap_err();
        assert!(e.message.contains("max_output_tokens must be a whole number"), "{}", e.message);
        assert_eq!(requested_max_tokens(Api::Completions, &json!({"max_tokens": 1u64 << 40})), Ok(Some(1 << 40)));
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
