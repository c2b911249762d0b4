//! A plan's single-prompt requests, read back from their bodies and given new prompts: what
//! aligning prompts to a server's tokenizer needs after the plan is built.
//!
//! A body is only read back when the [`BodyBuilder`] rebuilds it from the prompt byte for byte,
//! and only rebuilt with that builder, so a new prompt changes the prompt and nothing else
//! (model, `max_tokens`, `ignore_eos`, `--extra-body`, key order and spacing stay as they were).
//! A request's `model` is read from its body, so LoRA adapters given per request stay.

use serde_json::Value;
use servebench_core::config::{Api, PoolingForm};
use servebench_core::plan::Plan;

use crate::body::BodyBuilder;
use crate::datasets::par_map;
use crate::datasets::random::words_text;
use crate::datasets::words::WORDS;
use crate::{Tokenizer, WorkloadError};

/// A new prompt for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptEdit {
    /// The request's position in `plan.requests`.
    pub position: usize,
    pub prompt: String,
    /// The request's prompt tokens with the new prompt.
    pub prompt_tokens: u32,
}

/// Reading and replacing the prompts of a [`Plan`]'s requests.
pub trait PlanPrompts {
    /// The prompt of the request at `position`, when its body is exactly what `bodies` builds
    /// from that prompt (a completions `prompt`, or a chat body's one user text); `None` for a
    /// body built otherwise (token ids, `--extra-body` replacing the prompt, a replayed file
    /// from another build) or a position past the end.
    fn prompt_text(&self, position: usize, bodies: &BodyBuilder) -> Option<String>;

    /// Gives each edited request its new prompt: the body is rebuilt by `bodies` and the prompt
    /// tokens set; every other request is left as it was. Nothing changes when an edit names a
    /// request that is not there or whose body `bodies` did not build.
    fn rewrite_prompts(&mut self, bodies: &BodyBuilder, edits: &[PromptEdit]) -> Result<(), WorkloadError>;
}

impl PlanPrompts for Plan {
    fn prompt_text(&self, position: usize, bodies: &BodyBuilder) -> Option<String> {
        read_back(self, position, bodies).map(|(_, text)| text)
    }

    fn rewrite_prompts(&mut self, bodies: &BodyBuilder, edits: &[PromptEdit]) -> Result<(), WorkloadError> {
        let mut models = Vec::with_capacity(edits.len());
        for e in edits {
            let Some((model, _)) = read_back(self, e.position, bodies) else {
                return Err(WorkloadError::Invalid(format!(
                    "request {} of the plan cannot be given a new prompt: it is not there, or its body was not \
                     built from a single text prompt with this run's settings; leave it out of the edits",
                    e.position
                )));
            };
            models.push(model);
        }
        for (e, model) in edits.iter().zip(models) {
            let r = &mut self.requests[e.position];
            r.body = bodies.prompt_as(&model, &e.prompt, r.max_tokens);
            r.prompt_tokens = e.prompt_tokens;
        }
        Ok(())
    }
}

/// The `model` and prompt of the request at `position`, when `bodies` rebuilds its body from
/// them byte for byte.
fn read_back(plan: &Plan, position: usize, bodies: &BodyBuilder) -> Option<(String, String)> {
    let r = plan.requests.get(position)?;
    if bodies.api() != plan.api || bodies.replaces_prompt() {
        return None;
    }
    let body: Value = serde_json::from_slice(&r.body).ok()?;
    let model = body.get("model")?.as_str()?;
    let text = match plan.api {
        Api::Completions => body.get("prompt")?.as_str()?,
        Api::Chat | Api::Pooling(PoolingForm::EmbeddingsChat) => match body.get("messages")?.as_array()?.as_slice() {
            [message] => match message.get("content")?.as_array()?.as_slice() {
                [part] => part.get("text")?.as_str()?,
                _ => return None,
            },
            _ => return None,
        },
        Api::Responses | Api::Pooling(_) => body.get("input")?.as_str()?,
        Api::Messages => match body.get("messages")?.as_array()?.as_slice() {
            [message] => message.get("content")?.as_str()?,
            _ => return None,
        },
    };
    (bodies.prompt_as(model, text, r.max_tokens) == r.body).then(|| (model.to_string(), text.to_string()))
}

/// Tokens each prompt encodes to with `tok`, without special tokens (vLLM's `prompt_len` of a
/// synthetic prompt), counted on all cores.
pub fn raw_lengths(tok: &Tokenizer, prompts: &[String]) -> Result<Vec<u32>, WorkloadError> {
    par_map(prompts, |p| tok.count(p, false)).into_iter().collect()
}

/// `n` words to lengthen a synthetic prompt with, `" w1 w2 …"`: words that are one token each
/// in common vocabularies, chosen by `salt` so that different prompts get different words.
pub fn filler_words(salt: usize, n: usize) -> String {
    let len = WORDS.len();
    let idx: Vec<i64> =
        (0..n).map(|k| (salt.wrapping_mul(7919).wrapping_add(k.wrapping_mul(31)) % len) as i64).collect();
    words_text(&idx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::qwen3;
    use bytes::Bytes;
    use serde_json::{Map, json};
    use servebench_core::config::{Backend, RangeRatio, RunConfig, WorkloadSpec};
    use servebench_core::plan::TokenCounting;

    fn config(backend: Backend, extra: Map<String, Value>) -> RunConfig {
        let mut c = RunConfig::for_target("http://127.0.0.1:8000", "m");
        c.target.backend = backend;
        c.workload = WorkloadSpec::Random {
            input_len: 12,
            output_len: 5,
            range_ratio: RangeRatio { input: 0.0, output: 0.0 },
            prefix_len: 0,
            media: None,
            batch_size: 1,
        };
        c.traffic.num_prompts = 6;
        c.extra_body = extra;
        c
    }

    #[test]
    fn prompts_read_back_and_rewritten_change_only_the_prompt() {
        for backend in [Backend::Vllm, Backend::OpenaiChat] {
            let c = config(backend, Map::from_iter([("temperature".to_string(), json!(0.5))]));
            let mut plan = crate::build_plan(&c, None).unwrap();
            let before = plan.clone();
            let bodies = BodyBuilder::new(&c);
            let texts: Vec<String> = (0..plan.len()).map(|i| plan.prompt_text(i, &bodies).unwrap()).collect();
            assert!(texts.iter().all(|t| t.split(' ').count() == 13), "{texts:?}");
            assert_eq!(plan.prompt_text(plan.len(), &bodies), None);

            let edit = PromptEdit { position: 2, prompt: " the cat".into(), prompt_tokens: 2 };
            plan.rewrite_prompts(&bodies, std::slice::from_ref(&edit)).unwrap();
            assert_eq!(plan.prompt_text(2, &bodies).as_deref(), Some(" the cat"));
            assert_eq!(plan.requests[2].prompt_tokens, 2);
            let old = String::from_utf8_lossy(&before.requests[2].body).replace(&texts[2], " the cat");
            assert_eq!(plan.requests[2].body, old.as_bytes(), "only the prompt changed");
            for i in [0, 1, 3, 4, 5] {
                assert_eq!(plan.requests[i], before.requests[i], "request {i} is untouched");
            }
            assert_eq!(plan.token_counting, TokenCounting::Estimate);
        }
    }

    #[test]
    fn a_rewritten_prompt_keeps_its_lora_adapter() {
        use servebench_core::config::{Lora, LoraAssignment};
        let mut c = config(Backend::Vllm, Map::new());
        c.target.lora =
            Some(Lora { modules: vec!["ad-1".into(), "ad-2".into()], assignment: LoraAssignment::RoundRobin });
        let mut plan = crate::build_plan(&c, None).unwrap();
        let bodies = BodyBuilder::new(&c);
        assert!(plan.prompt_text(1, &bodies).is_some(), "bodies sent to an adapter are read back");
        let edit = PromptEdit { position: 1, prompt: " the dog".into(), prompt_tokens: 2 };
        plan.rewrite_prompts(&bodies, &[edit]).unwrap();
        let body: Value = serde_json::from_slice(&plan.requests[1].body).unwrap();
        assert_eq!((body["model"].as_str(), body["prompt"].as_str()), (Some("ad-2"), Some(" the dog")));
    }

    #[test]
    fn bodies_built_otherwise_are_neither_read_nor_rewritten() {
        // `--extra-body` replacing the prompt: the body is not the prompt's.
        let c = config(Backend::Vllm, Map::from_iter([("prompt".to_string(), json!("fixed"))]));
        let mut plan = crate::build_plan(&c, None).unwrap();
        let bodies = BodyBuilder::new(&c);
        assert_eq!(plan.prompt_text(0, &bodies), None);
        let before = plan.clone();
        let edit = PromptEdit { position: 0, prompt: " a".into(), prompt_tokens: 1 };
        let err = plan.rewrite_prompts(&bodies, &[edit]).unwrap_err().to_string();
        assert!(err.contains("leave it out of the edits"), "{err}");
        assert_eq!(plan, before);

        // A body from elsewhere, and a builder for the other API.
        let c = config(Backend::Vllm, Map::new());
        let mut plan = crate::build_plan(&c, None).unwrap();
        plan.requests[1].body = Bytes::from_static(br#"{"prompt": [1, 2, 3]}"#);
        assert_eq!(plan.prompt_text(1, &BodyBuilder::new(&c)), None);
        assert!(plan.prompt_text(0, &BodyBuilder::new(&config(Backend::OpenaiChat, Map::new()))).is_none());
        let edits = [PromptEdit { position: 9, prompt: " a".into(), prompt_tokens: 1 }];
        assert!(plan.rewrite_prompts(&BodyBuilder::new(&c), &edits).is_err());
    }

    #[test]
    fn filler_words_are_one_token_each_and_vary_with_the_salt() {
        let a = filler_words(0, 40);
        assert_eq!(qwen3().count(&a, false).unwrap(), 40);
        assert_eq!(a.split(' ').count(), 41);
        assert_ne!(filler_words(1, 5), filler_words(2, 5));
        assert_eq!(filler_words(3, 0), "");
        let lens = raw_lengths(qwen3(), &[a, " the cat".to_string()]).unwrap();
        assert_eq!(lens, [40, 2]);
    }
}
