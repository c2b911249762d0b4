//! `logprobs` and `echo`: what a request asks for, and synthetic logprobs in OpenAI's shapes.
//!
//! The simulator honours them rather than refusing them: a benchmark client may send
//! `logprobs` (vLLM's `bench serve --logprobs N` does), and a served twin that refused it could
//! not stand in for vLLM in that run. The answer has the shape and the counts vLLM's has (one
//! entry per token, `N + 1` candidates a token in completions' `top_logprobs`, `N` in chat's),
//! but the values are made up: the simulated engine samples no distribution. They are seeded
//! draws that look like a model's (the chosen token the most likely, with a probability of 0.4
//! to 1; the others below it, all of them summing to less than 1), and the candidates are other
//! tokens of the text palette. Asking for logprobs changes nothing the simulator times.
//!
//! vLLM's checks hold: completions' `logprobs` and chat's `top_logprobs` at most 20 (vLLM's
//! default `--max-logprobs`; -1, the whole vocabulary, is over it), chat's `top_logprobs` only
//! with `logprobs: true`. `echo` (completions) puts the prompt's text before the completion and,
//! with `logprobs`, its tokens before the completion's, the first with no logprob.

use serde_json::{Map, Value, json};
use servebench_core::config::Api;

use super::text::TextModel;
use crate::rng::mix64;

/// vLLM's default `--max-logprobs`: the most candidates a token a request may ask for.
pub(crate) const MAX_LOGPROBS: u32 = 20;

/// A field of the request that vLLM would refuse: which, and why.
#[derive(Debug)]
pub(crate) struct BadField {
    pub param: &'static str,
    pub message: String,
}

fn bad(param: &'static str, message: String) -> BadField {
    BadField { param, message }
}

/// What a request asks beyond the text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Extras {
    /// Logprobs with this many candidates a token (completions' `logprobs`, chat's
    /// `top_logprobs` when `logprobs` is true).
    pub logprobs: Option<u32>,
    /// The prompt before the completion (completions only).
    pub echo: bool,
}

impl Extras {
    /// A request of a plain answer: only the text.
    pub fn plain(self) -> bool {
        self == Extras::default()
    }
}

/// The logprobs and echo fields of a completions or chat body (other APIs: none), checked as
/// vLLM checks them; `vocab` is what -1 stands for.
pub(crate) fn read(api: Api, body: &Value, vocab: u32) -> Result<Extras, BadField> {
    let field = |name: &str| body.get(name).filter(|v| !v.is_null());
    match api {
        Api::Completions => {
            let echo = match field("echo") {
                None => false,
                Some(v) => v.as_bool().ok_or_else(|| bad("echo", format!("echo must be true or false, got {v}.")))?,
            };
            let logprobs = field("logprobs").map(|v| count("logprobs", v, vocab)).transpose()?;
            Ok(Extras { logprobs, echo })
        }
        Api::Chat => {
            let wanted = match field("logprobs") {
                None => false,
                Some(v) => {
                    v.as_bool().ok_or_else(|| bad("logprobs", format!("logprobs must be true or false, got {v}.")))?
                }
            };
            let top = field("top_logprobs").map(|v| count("top_logprobs", v, vocab)).transpose()?;
            if top.is_some_and(|t| t > 0) && !wanted {
                return Err(bad("top_logprobs", "when using `top_logprobs`, `logprobs` must be set to true.".into()));
            }
            Ok(Extras { logprobs: wanted.then(|| top.unwrap_or(0)), echo: false })
        }
        Api::Responses | Api::Messages | Api::Pooling(_) => Ok(Extras::default()),
    }
}

/// A number of candidates: 0 to [`MAX_LOGPROBS`], or -1 for the whole vocabulary (which is over
/// the limit), as vLLM words its refusals.
fn count(param: &'static str, v: &Value, vocab: u32) -> Result<u32, BadField> {
    let n = v.as_i64().ok_or_else(|| bad(param, format!("{param} must be a whole number, got {v}.")))?;
    let n = match n {
        -1 => i64::from(vocab),
        n if n < 0 => return Err(bad(param, format!("`{param}` must be a positive value or -1, got {n}."))),
        n => n,
    };
    if n > i64::from(MAX_LOGPROBS) {
        return Err(bad(
            param,
            format!(
                "Requested sample logprobs of {n}, which is greater than max allowed: {MAX_LOGPROBS}. Ask for \
                 {MAX_LOGPROBS} or fewer."
            ),
        ));
    }
    Ok(n as u32)
}

/// One token's logprobs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub token: String,
    /// `None` for a prompt's first token, which nothing before it predicts.
    pub logprob: Option<f64>,
    /// The most likely tokens at its place, the token itself first (empty with no logprob).
    pub top: Vec<(String, f64)>,
}

/// The entries of output tokens `first..=last` of the request salted `salt`, with `k`
/// candidates besides each token.
pub(crate) fn sampled(text: &TextModel, salt: u64, first: u32, last: u32, k: u32) -> Vec<Entry> {
    (first..=last)
        .map(|i| {
            let token = text.token(salt, i);
            draw(text, mix64(salt ^ 0x6c6f_6770_726f_6273 ^ u64::from(i).wrapping_mul(0x9e37_79b9)), token, k)
        })
        .collect()
}

/// The entries of a prompt's tokens (its texts `tokens`), the first with no logprob; `salt`
/// seeds them (the same prompt, the same values).
pub(crate) fn prompt(text: &TextModel, salt: u64, tokens: &[String], k: u32) -> Vec<Entry> {
    tokens
        .iter()
        .enumerate()
        .map(|(i, token)| match i {
            0 => Entry { token: token.clone(), logprob: None, top: Vec::new() },
            i => draw(text, mix64(salt ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)), token, k),
        })
        .collect()
}

/// A seeded, plausible distribution at one place: `token` with probability 0.4 to 1, then up to
/// `k` other palette tokens, each at most half as likely as the one before.
fn draw(text: &TextModel, key: u64, token: &str, k: u32) -> Entry {
    let p = 0.4 + 0.6 * unit(key);
    let logprob = p.ln();
    let mut top = vec![(token.to_string(), logprob)];
    let palette = text.palette();
    let start = (mix64(key ^ 0x0074_6f70) % palette.len() as u64) as usize;
    let mut mass = 1.0 - p;
    for (j, candidate) in (0..palette.len()).map(|j| &palette[(start + j) % palette.len()]).enumerate() {
        if top.len() > k as usize {
            break;
        }
        if **candidate == *token {
            continue;
        }
        mass *= 0.5;
        let share = 0.5 + 0.5 * unit(mix64(key ^ (j as u64 + 1)));
        top.push((candidate.to_string(), (mass * share).ln().max(-9999.0)));
    }
    Entry { token: token.to_string(), logprob: Some(logprob), top }
}

/// A draw in [0, 1).
fn unit(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Completions' logprobs object, `{"text_offset", "token_logprobs", "tokens",
/// "top_logprobs"}`, offsets counted in characters from `offset`; `k + 1` candidates a token.
pub(crate) fn completion_json(entries: &[Entry], k: u32, offset: usize) -> Value {
    let mut at = offset;
    let mut offsets = Vec::with_capacity(entries.len());
    for e in entries {
        offsets.push(at);
        at += e.token.chars().count();
    }
    let top: Vec<Value> = entries
        .iter()
        .map(|e| match e.logprob {
            None => Value::Null,
            Some(_) => Value::Object(
                e.top.iter().take(k as usize + 1).map(|(t, l)| (t.clone(), json!(l))).collect::<Map<_, _>>(),
            ),
        })
        .collect();
    json!({
        "text_offset": offsets,
        "token_logprobs": entries.iter().map(|e| e.logprob).collect::<Vec<_>>(),
        "tokens": entries.iter().map(|e| e.token.as_str()).collect::<Vec<_>>(),
        "top_logprobs": top,
    })
}

/// Chat's logprobs object, `{"content": [{"token", "logprob", "bytes", "top_logprobs"}]}`, `k`
/// candidates a token.
pub(crate) fn chat_json(entries: &[Entry], k: u32) -> Value {
    let one = |t: &str, l: f64| json!({"token": t, "logprob": l, "bytes": t.as_bytes()});
    let content: Vec<Value> = entries
        .iter()
        .map(|e| {
            let top: Vec<Value> = e.top.iter().take(k as usize).map(|(t, l)| one(t, *l)).collect();
            let mut v = one(&e.token, e.logprob.unwrap_or(-9999.0));
            v["top_logprobs"] = Value::Array(top);
            v
        })
        .collect();
    json!({ "content": content })
}

/// The logprobs object of `api` for `entries`.
pub(crate) fn to_json(api: Api, entries: &[Entry], k: u32, offset: usize) -> Value {
    match api {
        Api::Chat => chat_json(entries, k),
        _ => completion_json(entries, k, offset),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_distinct_descending_and_sum_below_one() {
        let text = TextModel::new(None);
        for salt in 0..50u64 {
            let entries = sampled(&text, salt, 1, 8, 20);
            for e in &entries {
                assert_eq!(e.top.len(), 21, "{e:?}");
                assert_eq!(e.top[0], (e.token.clone(), e.logprob.unwrap()));
                let mut names: Vec<&str> = e.top.iter().map(|(t, _)| t.as_str()).collect();
                names.sort_unstable();
                names.dedup();
                assert_eq!(names.len(), 21, "{e:?}");
                assert!(e.top.windows(2).all(|w| w[0].1 >= w[1].1), "{e:?}");
                let mass: f64 = e.top.iter().map(|(_, l)| l.exp()).sum();
                assert!(mass < 1.0 + 1e-12 && e.logprob.unwrap() <= 0.0, "{e:?}");
            }
            // The same request, the same values.
            assert_eq!(entries, sampled(&text, salt, 1, 8, 20));
        }
    }

    #[test]
    fn counts_follow_vllms_rules() {
        let read = |api, body: Value| read(api, &body, 1000);
        assert_eq!(read(Api::Completions, json!({"logprobs": null})).unwrap(), Extras::default());
        assert_eq!(read(Api::Completions, json!({"logprobs": 5, "echo": true})).unwrap().logprobs, Some(5));
        assert_eq!(read(Api::Chat, json!({"logprobs": true})).unwrap().logprobs, Some(0));
        assert_eq!(read(Api::Chat, json!({"logprobs": false, "top_logprobs": 0})).unwrap().logprobs, None);
        for (api, body, param, words) in [
            (Api::Completions, json!({"logprobs": 21}), "logprobs", "Requested sample logprobs of 21"),
            (Api::Completions, json!({"logprobs": -1}), "logprobs", "Requested sample logprobs of 1000"),
            (Api::Completions, json!({"logprobs": -2}), "logprobs", "must be a positive value or -1"),
            (Api::Completions, json!({"logprobs": "5"}), "logprobs", "whole number"),
            (Api::Completions, json!({"echo": 1}), "echo", "true or false"),
            (Api::Chat, json!({"top_logprobs": 3}), "top_logprobs", "`logprobs` must be set to true"),
            (Api::Chat, json!({"logprobs": true, "top_logprobs": 30}), "top_logprobs", "max allowed: 20"),
        ] {
            let e = read(api, body.clone()).unwrap_err();
            assert_eq!(e.param, param, "{body}");
            assert!(e.message.contains(words), "{body}: {}", e.message);
        }
    }
}
