//! Request bodies exactly as vLLM's benchmark sends them: the completions, chat or Responses
//! payload in vLLM's key order (and Anthropic's Messages payload, which vLLM's benchmark does
//! not send: `model`, `messages` with the prompt as one user message's text, `max_tokens`),
//! or a pooling backend's (`input`, or one user message, with vLLM's `truncate_prompt_tokens`
//! where its backend sends it; no stream, no output budget), then `ignore_eos`, then
//! `--extra-body` merged last (an existing key keeps its place, as Python's `dict.update`
//! does), serialized once with `json.dumps` spacing.

use bytes::Bytes;
use serde_json::{Map, Value, json};
use servebench_core::config::{Api, ImagePrompt, PoolingForm, RunConfig};
use servebench_core::pyjson;
use servebench_core::record::PROBE_PROMPT;

/// Builds bodies for one run.
#[derive(Clone, Debug)]
pub struct BodyBuilder {
    api: Api,
    model: String,
    ignore_eos: bool,
    logprobs: Option<i64>,
    extra_body: Map<String, Value>,
    /// How an image embedding backend writes a prompt that comes with images.
    image_prompt: Option<ImagePrompt>,
}

impl BodyBuilder {
    /// From a run config: its API, `model` name, `ignore_eos` and `extra_body`.
    pub fn new(config: &RunConfig) -> Self {
        BodyBuilder {
            api: config.target.backend.api(),
            model: config.target.model_name.clone(),
            ignore_eos: config.ignore_eos,
            logprobs: config.logprobs,
            extra_body: config.extra_body.clone(),
            image_prompt: config.target.backend.image_prompt(),
        }
    }

    /// From explicit parts.
    pub fn from_parts(api: Api, model: &str, ignore_eos: bool, extra_body: Map<String, Value>) -> Self {
        BodyBuilder { api, model: model.to_string(), ignore_eos, logprobs: None, extra_body, image_prompt: None }
    }

    pub fn api(&self) -> Api {
        self.api
    }

    /// Whether `--extra-body` replaces the prompt (`prompt`, a chat or Messages body's
    /// `messages`, a Responses body's `input`), so bodies do not carry the prompt they are
    /// built with.
    pub fn replaces_prompt(&self) -> bool {
        self.extra_body.contains_key(match self.api {
            Api::Completions => "prompt",
            Api::Chat | Api::Messages | Api::Pooling(PoolingForm::EmbeddingsChat) => "messages",
            Api::Pooling(PoolingForm::Rerank) => "documents",
            Api::Responses | Api::Pooling(_) => "input",
        })
    }

    /// The body for a single prompt.
    pub fn prompt(&self, prompt: &str, max_tokens: u32) -> Bytes {
        self.prompt_as(&self.model, prompt, max_tokens)
    }

    /// The body of a probe request (`--probe-request-rate`): [`PROBE_PROMPT`] for one token,
    /// as vLLM's; the client sends it and the simulator's prediction reads it.
    pub fn probe(&self) -> Bytes {
        self.prompt(PROBE_PROMPT, 1)
    }

    /// The body for a single prompt sent to `model` (a LoRA adapter) instead of the run's model.
    pub fn prompt_as(&self, model: &str, prompt: &str, max_tokens: u32) -> Bytes {
        self.with_images(model, prompt, &[], max_tokens)
    }

    /// A pooling body carrying several prompts (`--random-batch-size`): `input` their list.
    pub fn inputs(&self, model: &str, prompts: &[&str]) -> Bytes {
        self.pooling(model, json!(prompts))
    }

    /// A rerank body (`vllm-rerank`): the query, its documents, and vLLM's truncation to the
    /// model's context; no `ignore_eos`, as vLLM sends none, but `--extra-body` (which vLLM's
    /// rerank client drops) merged as in every other body.
    pub fn rerank(&self, model: &str, query: &str, documents: &[&str]) -> Bytes {
        let mut p = Map::new();
        p.insert("model".into(), Value::String(model.to_string()));
        p.insert("query".into(), Value::String(query.to_string()));
        p.insert("documents".into(), json!(documents));
        p.insert("truncate_prompt_tokens".into(), json!(-1));
        self.finish(p)
    }

    /// A pooling backend's body with `input`.
    fn pooling(&self, model: &str, input: Value) -> Bytes {
        let mut p = Map::new();
        p.insert("model".into(), Value::String(model.to_string()));
        let truncate = ("truncate_prompt_tokens".to_string(), json!(-1));
        match self.api {
            // vLLM's `vllm-pooling` puts the truncation before the input.
            Api::Pooling(PoolingForm::Pooling) => {
                p.insert(truncate.0, truncate.1);
                p.insert("input".into(), input);
            }
            Api::Pooling(PoolingForm::Infinity) => {
                p.insert("input".into(), input);
            }
            _ => {
                p.insert("input".into(), input);
                p.insert(truncate.0, truncate.1);
            }
        }
        self.finish(p)
    }

    /// The body of the dataset's request `index` sent to `model`: its prompt and images as the
    /// backend writes them. An image embedding backend rewrites the prompt of a request with
    /// images as vLLM's does: CLIP sends the images after an empty text; VLM2Vec sends them
    /// first, then "Represent the given image." for an even index, or the prompt as that
    /// sentence's question for an odd one.
    pub fn request(&self, index: usize, model: &str, prompt: &str, images: &[String], max_tokens: u32) -> Bytes {
        let first = self.image_prompt == Some(ImagePrompt::Vlm2vec) && !images.is_empty();
        let text = self.image_text(index, prompt, !images.is_empty());
        self.build(model, text.as_deref().unwrap_or(prompt), images, first, max_tokens)
    }

    /// The text [`BodyBuilder::request`] sends instead of request `index`'s prompt, where an
    /// image embedding backend rewrites it (the request has images); `None` where the prompt
    /// goes as it is.
    pub fn image_text(&self, index: usize, prompt: &str, has_images: bool) -> Option<String> {
        Some(match self.image_prompt.filter(|_| has_images)? {
            ImagePrompt::Clip => String::new(),
            ImagePrompt::Vlm2vec if index.is_multiple_of(2) => "Represent the given image.".to_string(),
            ImagePrompt::Vlm2vec => format!("Represent the given image with the following question: {prompt}"),
        })
    }

    /// The body for a prompt followed by images (`data:` or other URLs), each an `image_url`
    /// part after the text part of the chat message, as vLLM's chat client sends them. Only a
    /// chat body (and Infinity's, one image in place of the prompt) carries images; the plan
    /// refuses them for the other APIs.
    pub fn with_images(&self, model: &str, prompt: &str, images: &[String], max_tokens: u32) -> Bytes {
        self.build(model, prompt, images, false, max_tokens)
    }

    /// A body with the prompt and its images, the images before the text where `images_first`.
    fn build(&self, model: &str, prompt: &str, images: &[String], images_first: bool, max_tokens: u32) -> Bytes {
        let mut p = Map::new();
        p.insert("model".into(), Value::String(model.to_string()));
        match self.api {
            Api::Pooling(PoolingForm::EmbeddingsChat) => {
                p.insert(
                    "messages".into(),
                    json!([{"role": "user", "content": content(prompt, images, images_first)}]),
                );
                p.insert("truncate_prompt_tokens".into(), json!(-1));
            }
            // One prompt to rerank (a probe's) is scored against itself.
            Api::Pooling(PoolingForm::Rerank) => return self.rerank(model, prompt, &[prompt]),
            // Infinity's image input: the one image's URL in place of the text, as vLLM's
            // `infinity-embeddings-clip` sends a request with an image (the plan refuses more).
            Api::Pooling(PoolingForm::Infinity) if !images.is_empty() => {
                p.insert("input".into(), Value::String(images[0].clone()));
                p.insert("modality".into(), Value::String("image".into()));
            }
            Api::Pooling(_) => return self.pooling(model, Value::String(prompt.to_string())),
            Api::Completions => {
                p.insert("prompt".into(), Value::String(prompt.to_string()));
                p.insert("repetition_penalty".into(), json!(1.0));
                p.insert("max_tokens".into(), json!(max_tokens));
                p.insert("logprobs".into(), self.logprobs.map_or(Value::Null, Value::from));
            }
            Api::Chat => {
                p.insert(
                    "messages".into(),
                    json!([{"role": "user", "content": content(prompt, images, images_first)}]),
                );
                p.insert("max_completion_tokens".into(), json!(max_tokens));
            }
            Api::Responses => {
                p.insert("input".into(), Value::String(prompt.to_string()));
                p.insert("max_output_tokens".into(), json!(max_tokens));
            }
            Api::Messages => {
                p.insert("messages".into(), json!([{"role": "user", "content": prompt}]));
                p.insert("max_tokens".into(), json!(max_tokens));
            }
        }
        self.finish(p)
    }

    /// A chat body for prepared messages (multi-turn history), sent as they are.
    pub fn messages(&self, messages: &Value, max_tokens: u32) -> Bytes {
        let mut p = Map::new();
        p.insert("model".into(), Value::String(self.model.clone()));
        p.insert("messages".into(), messages.clone());
        p.insert("max_completion_tokens".into(), json!(max_tokens));
        self.finish(p)
    }

    fn finish(&self, mut p: Map<String, Value>) -> Bytes {
        if !self.api.pooling() {
            p.insert("stream".into(), Value::Bool(true));
        }
        match self.api {
            // A pooling answer is one body, its usage in it.
            Api::Pooling(_) => None,
            // A Responses stream always ends with its usage; `store: false` keeps the server
            // from holding every response for later retrieval.
            Api::Responses => p.insert("store".into(), Value::Bool(false)),
            // A Messages stream always carries its usage.
            Api::Messages => None,
            Api::Completions | Api::Chat => p.insert("stream_options".into(), json!({"include_usage": true})),
        };
        // vLLM's rerank client sends no `ignore_eos` (a score has no end of sequence).
        if self.ignore_eos && self.api != Api::Pooling(PoolingForm::Rerank) {
            p.insert("ignore_eos".into(), Value::Bool(true));
        }
        for (k, v) in &self.extra_body {
            p.insert(k.clone(), v.clone());
        }
        Bytes::from(pyjson::dumps(&Value::Object(p)))
    }
}

/// A user message's content: the text part and an `image_url` part per image, the images
/// after the text or (`images_first`) before it.
fn content(prompt: &str, images: &[String], images_first: bool) -> Vec<Value> {
    let text = json!({"type": "text", "text": prompt});
    let urls = images.iter().map(|url| json!({"type": "image_url", "image_url": {"url": url}}));
    if images_first { urls.chain([text]).collect() } else { std::iter::once(text).chain(urls).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::testdata;
    use servebench_core::config::Backend;

    #[test]
    fn bodies_are_byte_identical_to_python_json_dumps() {
        let r: Value =
            serde_json::from_str(&std::fs::read_to_string(testdata().join("datasets/random_qwen3.json")).unwrap())
                .unwrap();
        let extra = r["extra_body"].as_object().unwrap().clone();
        let model = r["model"].as_str().unwrap();
        let comp = BodyBuilder::from_parts(Api::Completions, model, true, extra.clone());
        let chat = BodyBuilder::from_parts(Api::Chat, model, true, extra);
        let mut n = 0;
        for c in r["cases"].as_array().unwrap() {
            for (i, s) in c["samples"].as_array().unwrap().iter().enumerate() {
                let prompt = s["prompt"].as_str().unwrap();
                let max = s["output_len"].as_u64().unwrap() as u32;
                assert_eq!(comp.prompt(prompt, max), c["completions_bodies"][i].as_str().unwrap().as_bytes());
                assert_eq!(chat.prompt(prompt, max), c["chat_bodies"][i].as_str().unwrap().as_bytes());
                n += 1;
            }
        }
        assert_eq!(n, 23);
    }

    #[test]
    fn default_bodies_have_vllms_keys_in_order() {
        let b = BodyBuilder::from_parts(Api::Completions, "m", false, Map::new());
        assert_eq!(
            b.prompt("hi", 7),
            r#"{"model": "m", "prompt": "hi", "repetition_penalty": 1.0, "max_tokens": 7, "logprobs": null, "stream": true, "stream_options": {"include_usage": true}}"#
        );
        let c = BodyBuilder::from_parts(Api::Chat, "m", true, Map::new());
        assert_eq!(
            c.messages(&json!([{"role": "user", "content": "a"}]), 3),
            r#"{"model": "m", "messages": [{"role": "user", "content": "a"}], "max_completion_tokens": 3, "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true}"#
        );
    }

    #[test]
    fn responses_and_messages_bodies_have_their_keys_in_order() {
        let r = BodyBuilder::from_parts(Api::Responses, "m", true, Map::new());
        assert_eq!(
            r.prompt("hi", 7),
            r#"{"model": "m", "input": "hi", "max_output_tokens": 7, "stream": true, "store": false, "ignore_eos": true}"#
        );
        let mut extra = Map::new();
        extra.insert("temperature".into(), json!(0.5));
        let m = BodyBuilder::from_parts(Api::Messages, "m", false, extra);
        assert_eq!(
            m.prompt("hi", 7),
            r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 7, "stream": true, "temperature": 0.5}"#
        );
        let mut replaced = Map::new();
        replaced.insert("input".into(), json!([]));
        assert!(BodyBuilder::from_parts(Api::Responses, "m", false, replaced).replaces_prompt());
    }

    #[test]
    fn pooling_bodies_have_their_backend_s_keys_in_order() {
        let body = |form, ignore_eos| BodyBuilder::from_parts(Api::Pooling(form), "m", ignore_eos, Map::new());
        assert_eq!(
            body(PoolingForm::Embeddings, false).prompt("hi", 7),
            r#"{"model": "m", "input": "hi", "truncate_prompt_tokens": -1}"#
        );
        assert_eq!(
            body(PoolingForm::EmbeddingsChat, true).prompt("hi", 7),
            r#"{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "truncate_prompt_tokens": -1, "ignore_eos": true}"#
        );
        assert_eq!(body(PoolingForm::Infinity, false).prompt("hi", 7), r#"{"model": "m", "input": "hi"}"#);
        assert_eq!(
            body(PoolingForm::Pooling, false).prompt("hi", 7),
            r#"{"model": "m", "truncate_prompt_tokens": -1, "input": "hi"}"#
        );
        let mut extra = Map::new();
        extra.insert("input".into(), json!("x"));
        assert!(BodyBuilder::from_parts(Api::Pooling(PoolingForm::Embeddings), "m", false, extra).replaces_prompt());
        // Several inputs are a list (`--random-batch-size`), in the backend's own key order.
        assert_eq!(
            body(PoolingForm::Pooling, false).inputs("m", &["a", "b"]),
            r#"{"model": "m", "truncate_prompt_tokens": -1, "input": ["a", "b"]}"#
        );
        assert_eq!(body(PoolingForm::Infinity, false).inputs("m", &["a"]), r#"{"model": "m", "input": ["a"]}"#);
    }

    #[test]
    fn image_embedding_backends_write_the_prompt_as_vllm_s() {
        let mut config = RunConfig::for_target("http://127.0.0.1:8000", "m");
        config.ignore_eos = false;
        let mut body = |backend, index, images: &[String]| {
            config.target.backend = backend;
            String::from_utf8(BodyBuilder::new(&config).request(index, "m", "p", images, 1).to_vec()).unwrap()
        };
        let img = vec!["data:x".to_string()];
        let part = r#"{"type": "image_url", "image_url": {"url": "data:x"}}"#;
        assert_eq!(
            body(Backend::OpenaiEmbeddingsClip, 0, &img),
            format!(
                r#"{{"model": "m", "messages": [{{"role": "user", "content": [{{"type": "text", "text": ""}}, {part}]}}], "truncate_prompt_tokens": -1}}"#
            )
        );
        assert_eq!(
            body(Backend::OpenaiEmbeddingsVlm2vec, 2, &img),
            format!(
                r#"{{"model": "m", "messages": [{{"role": "user", "content": [{part}, {{"type": "text", "text": "Represent the given image."}}]}}], "truncate_prompt_tokens": -1}}"#
            )
        );
        assert!(
            body(Backend::OpenaiEmbeddingsVlm2vec, 3, &img)
                .contains(r#""text": "Represent the given image with the following question: p"}]"#)
        );
        // Without images the prompt goes as it is; the chat backend puts images after it.
        assert!(body(Backend::OpenaiEmbeddingsClip, 1, &[]).contains(r#"[{"type": "text", "text": "p"}]"#));
        assert!(body(Backend::OpenaiEmbeddingsChat, 1, &img).contains(&format!(r#""text": "p"}}, {part}]"#)));
        // Infinity's CLIP input: the image's URL alone, with its modality; else the prompt.
        assert_eq!(
            body(Backend::InfinityEmbeddingsClip, 0, &img),
            r#"{"model": "m", "input": "data:x", "modality": "image"}"#
        );
        assert_eq!(body(Backend::InfinityEmbeddingsClip, 1, &[]), r#"{"model": "m", "input": "p"}"#);
    }

    #[test]
    fn a_rerank_body_is_vllm_s_query_and_documents() {
        let b = BodyBuilder::from_parts(Api::Pooling(PoolingForm::Rerank), "m", true, Map::new());
        assert_eq!(
            b.rerank("m", "q", &["d1", "d2"]),
            r#"{"model": "m", "query": "q", "documents": ["d1", "d2"], "truncate_prompt_tokens": -1}"#
        );
        // One prompt (a probe's) is scored against itself.
        assert_eq!(
            b.prompt("hi", 1),
            r#"{"model": "m", "query": "hi", "documents": ["hi"], "truncate_prompt_tokens": -1}"#
        );
        let mut extra = Map::new();
        extra.insert("documents".into(), json!(["x"]));
        assert!(BodyBuilder::from_parts(Api::Pooling(PoolingForm::Rerank), "m", false, extra).replaces_prompt());
    }

    #[test]
    fn logprobs_take_their_place_in_completions_bodies_and_stay_out_of_chat() {
        let mut config = RunConfig::for_target("http://127.0.0.1:8000", "m");
        config.ignore_eos = false;
        config.logprobs = Some(5);
        assert_eq!(
            BodyBuilder::new(&config).prompt("hi", 7),
            r#"{"model": "m", "prompt": "hi", "repetition_penalty": 1.0, "max_tokens": 7, "logprobs": 5, "stream": true, "stream_options": {"include_usage": true}}"#
        );
        config.target.backend = servebench_core::config::Backend::OpenaiChat;
        let chat = BodyBuilder::new(&config).prompt("hi", 7);
        assert!(!String::from_utf8_lossy(&chat).contains("logprobs"), "{chat:?}");
    }
}
