//! Speculative decoding as vLLM takes it (`--speculative-config`): how the drafts are made, how
//! many a step proposes for each decoding sequence, and how often they are accepted.
//!
//! How often a draft is accepted depends on the model, the drafter and the text, which the
//! simulator cannot know: it is given (`spec-acceptance`), as vLLM's own report states it (the
//! per-position acceptance rates of its speculative-decoding section), never assumed.

use serde::Serialize;

/// The most draft tokens one step may propose for a sequence.
pub const MAX_SPEC_TOKENS: u32 = 16;

/// Where the drafts come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecMethod {
    /// The checkpoint's own multi-token-prediction layer (`mtp`, `deepseek_mtp`, ...), run once
    /// for each draft token: priced as one layer of the model.
    Mtp,
    /// Matching the context's n-grams on the host: no GPU work.
    Ngram,
    /// Matching the context's n-grams on the GPU (`ngram_gpu`): no model to run, and vLLM keeps
    /// async scheduling with it.
    NgramGpu,
    /// An EAGLE head (`eagle`, `eagle3`), named by `model`: a few layers of its own over the
    /// target's hidden states, reading the target's embedding (vLLM shares it rather than load
    /// the head's copy).
    Eagle,
    /// A draft model of its own (`draft_model`), named by `model`, with its own embedding and
    /// LM head.
    Drafter,
}

impl SpecMethod {
    /// Whether the method runs a model named by the config's `model`.
    pub fn needs_model(self) -> bool {
        matches!(self, SpecMethod::Eagle | SpecMethod::Drafter)
    }

    /// Whether the drafts are made on the host, where vLLM has no async scheduling.
    pub fn drafts_on_host(self) -> bool {
        self == SpecMethod::Ngram
    }
}

/// A deployment's speculative decoding.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpecDecode {
    pub method: SpecMethod,
    /// Draft tokens a step proposes for each decoding sequence (`num_speculative_tokens`).
    pub num_speculative_tokens: u32,
    /// The draft model (a preset id or a config.json path) of `eagle`, `eagle3` and
    /// `draft_model`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The share of drafts whose position `i` (from 1) is accepted, as vLLM reports it: the
    /// position and every one before it; one value a position.
    pub acceptance: Vec<f64>,
}

impl SpecDecode {
    /// Tokens a verified step yields for a sequence on average: one of the model's own, and each
    /// accepted draft.
    pub fn acceptance_length(&self) -> f64 {
        1.0 + self.acceptance.iter().sum::<f64>()
    }
}

/// `--speculative-config`'s JSON as parsed: method, tokens and model.
#[derive(Debug, PartialEq)]
pub(super) struct SpecConfig {
    pub method: SpecMethod,
    pub tokens: Option<u32>,
    pub model: Option<String>,
}

/// Reads vLLM's `--speculative-config` JSON (`{"method": "mtp", "num_speculative_tokens": 2}`).
pub(super) fn parse_config(v: &str) -> Result<SpecConfig, String> {
    let json: serde_json::Value = serde_json::from_str(v).map_err(|e| {
        format!("expected vLLM's JSON, as {{\"method\": \"mtp\", \"num_speculative_tokens\": 2}} ({e})")
    })?;
    let obj =
        json.as_object().ok_or("expected a JSON object, as {\"method\": \"mtp\", \"num_speculative_tokens\": 2}")?;
    let model = obj.get("model").and_then(|m| m.as_str()).map(str::to_string);
    let method = match obj.get("method").and_then(|m| m.as_str()) {
        Some(m) => method(m)?,
        None => {
            return Err(
                "give the drafting method (\"method\": mtp, ngram, ngram_gpu, eagle, eagle3 or draft_model)".into()
            );
        }
    };
    if method.needs_model() && model.is_none() {
        return Err(
            "eagle, eagle3 and draft_model need the draft model (\"model\": a preset id or a config.json path)".into(),
        );
    }
    let tokens = match obj.get("num_speculative_tokens") {
        None => None,
        Some(n) => Some(
            n.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| (1..=MAX_SPEC_TOKENS).contains(n))
                .ok_or(format!("num_speculative_tokens: expected a whole number from 1 to {MAX_SPEC_TOKENS}"))?,
        ),
    };
    Ok(SpecConfig { method, tokens, model })
}

/// A method as vLLM names it.
fn method(name: &str) -> Result<SpecMethod, String> {
    let m = name.trim().to_ascii_lowercase();
    match m.as_str() {
        "ngram" => Ok(SpecMethod::Ngram),
        "ngram_gpu" => Ok(SpecMethod::NgramGpu),
        "eagle" | "eagle3" => Ok(SpecMethod::Eagle),
        "draft_model" => Ok(SpecMethod::Drafter),
        _ if m == "mtp" || m.ends_with("_mtp") => Ok(SpecMethod::Mtp),
        _ => Err(format!(
            "method {name:?} is not modelled; use mtp (or a model's *_mtp), ngram, ngram_gpu, eagle, eagle3 or draft_model"
        )),
    }
}

/// Reads `spec-acceptance`: one rate for each draft position (`0.8,0.55`), or one number, the
/// chance that a draft is accepted after the one before it was (`0.7`: 0.7, 0.49, ...).
pub(super) fn parse_acceptance(v: &str) -> Result<Vec<f64>, String> {
    let values: Option<Vec<f64>> = v
        .trim_matches(|c| c == '[' || c == ']')
        .split([',', ' '])
        .filter(|s| !s.is_empty())
        .map(|s| s.trim().parse::<f64>().ok().filter(|p| (0.0..=1.0).contains(p)))
        .collect();
    match values {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err("expected rates in [0, 1]: one for each draft position (0.8,0.55), or one for all (0.7)".into()),
    }
}

/// The per-position rates for `k` draft tokens: a list as given (one a position, none rising:
/// a position is accepted only after every one before it), or one conditional rate raised to
/// each position.
pub(super) fn acceptance_for(given: &[f64], k: u32) -> Result<Vec<f64>, String> {
    let rates = match given {
        [p] if k > 1 => (1..=k).map(|i| p.powi(i as i32)).collect(),
        _ if given.len() == k as usize => given.to_vec(),
        _ => {
            return Err(format!(
                "spec-acceptance gives {} rates for {k} draft tokens; give one a position, or one for all",
                given.len()
            ));
        }
    };
    if rates.windows(2).any(|w| w[1] > w[0]) {
        return Err("spec-acceptance rises with the position; a draft is accepted only after every one before it, \
                    so each rate is at most the one before"
            .into());
    }
    Ok(rates)
}

/// The deployment's speculative decoding from its three keys: `speculative-config`, the draft
/// tokens it may leave to `num-speculative-tokens`, and `spec-acceptance`, which it needs.
pub(super) fn resolve(
    config: Option<SpecConfig>,
    tokens: Option<u32>,
    acceptance: Option<Vec<f64>>,
) -> Result<Option<SpecDecode>, String> {
    let Some(config) = config else {
        return match (tokens, acceptance) {
            (None, None) => Ok(None),
            _ => Err("num-speculative-tokens and spec-acceptance describe speculative decoding; give its \
                      speculative-config too, as {\"method\": \"mtp\", \"num_speculative_tokens\": 1}"
                .into()),
        };
    };
    if let (Some(a), Some(b)) = (config.tokens, tokens)
        && a != b
    {
        return Err(format!("speculative-config proposes {a} draft tokens and num-speculative-tokens {b}; keep one"));
    }
    let k = tokens.or(config.tokens).ok_or(
        "speculative-config needs num_speculative_tokens (the draft tokens a step proposes for each sequence)",
    )?;
    let given = acceptance.ok_or(
        "speculative decoding needs spec-acceptance: how often drafts are accepted depends on the model, the \
         drafter and the text, so give the per-position rates vLLM reports for your drafter (0.8,0.55), or one \
         rate for all positions (0.7)",
    )?;
    Ok(Some(SpecDecode {
        method: config.method,
        num_speculative_tokens: k,
        model: config.model,
        acceptance: acceptance_for(&given, k)?,
    }))
}
