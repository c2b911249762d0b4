//! The backends `--backend` names and the API family each speaks: which body a request
//! carries, which route serves it and which event ends its stream (or, for a pooling API,
//! that its answer is one JSON body).

use serde::{Deserialize, Serialize};

/// The API family a backend speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `/v1/completions`: `prompt` in, `choices[].text` out.
    Completions,
    /// `/v1/chat/completions`: `messages` in, `choices[].delta.content` out.
    Chat,
    /// `/v1/responses` (OpenAI's Responses API): `input` in, `response.output_text.delta`
    /// events out, closed by `response.completed` (or `response.incomplete`) with the usage.
    Responses,
    /// `/v1/messages` (Anthropic's Messages API): `messages` in, `content_block_delta` events
    /// out, closed by `message_stop`, the usage in `message_start` and `message_delta`.
    Messages,
    /// A pooling API (vLLM's pooling backends): one JSON answer per request, no tokens
    /// streamed; only its end-to-end latency and input counts are measured.
    Pooling(PoolingForm),
}

/// The body a pooling backend sends, and the route it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolingForm {
    /// `/v1/embeddings` with `input` (`openai-embeddings`).
    Embeddings,
    /// `/v1/embeddings` with the prompt as one user message (`openai-embeddings-chat`).
    EmbeddingsChat,
    /// `/embeddings` of Infinity's server: `input` without vLLM's truncation key
    /// (`infinity-embeddings`), or one image's URL as the `input` with `"modality": "image"`
    /// (`infinity-embeddings-clip`).
    Infinity,
    /// vLLM's `/pooling` with `input` (`vllm-pooling`).
    Pooling,
    /// vLLM's `/v1/rerank` with a `query` and its `documents` (`vllm-rerank`): each document
    /// scored against the query.
    Rerank,
}

impl Api {
    /// The API a server answers at `endpoint`, told by the path's end as vLLM's routes name
    /// them (`/v1/chat/completions`: chat; any other `.../completions`: completions); `None` for
    /// a path that ends in none of them (a proxy's own route).
    pub fn served_at(endpoint: &str) -> Option<Api> {
        let path = endpoint.split(['?', '#']).next().unwrap_or_default().trim_end_matches('/');
        [
            ("/chat/completions", Api::Chat),
            ("/completions", Api::Completions),
            ("/responses", Api::Responses),
            ("/messages", Api::Messages),
            ("/embeddings", Api::Pooling(PoolingForm::Embeddings)),
            ("/pooling", Api::Pooling(PoolingForm::Pooling)),
            ("/rerank", Api::Pooling(PoolingForm::Rerank)),
        ]
        .into_iter()
        .find(|(end, _)| path.ends_with(end))
        .map(|(_, api)| api)
    }

    /// Whether the server renders the model's chat template around the prompt (chat,
    /// Responses and Messages requests; a completions prompt is read as it is).
    pub fn templated(self) -> bool {
        match self {
            Api::Completions => false,
            Api::Pooling(form) => form == PoolingForm::EmbeddingsChat,
            Api::Chat | Api::Responses | Api::Messages => true,
        }
    }

    /// Whether requests are pooling requests (answered whole, measured by latency alone).
    pub fn pooling(self) -> bool {
        matches!(self, Api::Pooling(_))
    }

    /// The route's last segment vLLM's request function checks the URL against.
    pub fn route_end(self) -> &'static str {
        match self {
            Api::Completions => "completions",
            Api::Chat => "chat/completions",
            Api::Responses => "responses",
            Api::Messages => "messages",
            Api::Pooling(PoolingForm::Pooling) => "pooling",
            Api::Pooling(PoolingForm::Rerank) => "rerank",
            Api::Pooling(_) => "embeddings",
        }
    }

    /// The event that ends a complete stream (a stream cut off before it failed), where the
    /// API has one: Responses' `response.completed` or `response.incomplete`, Messages'
    /// `message_stop`. Completions and chat streams just end.
    pub fn end_event(self) -> Option<&'static str> {
        match self {
            Api::Responses => Some("response.completed or response.incomplete"),
            Api::Messages => Some("message_stop"),
            Api::Completions | Api::Chat | Api::Pooling(_) => None,
        }
    }
}

/// How an image embedding backend writes the prompt of a request with images (vLLM's
/// `_preprocess_clip` and `_preprocess_vlm2vec`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImagePrompt {
    /// The images alone: after an empty text part (`openai-embeddings-clip`), or the one image
    /// as the `input` (`infinity-embeddings-clip`).
    Clip,
    /// The images first, then "Represent the given image." for an even request index, or that
    /// sentence with the prompt as a question for an odd one (`openai-embeddings-vlm2vec`).
    Vlm2vec,
}

/// `--backend`: every value vLLM accepts for an OpenAI-compatible server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    Vllm,
    Openai,
    OpenaiChat,
    VllmChat,
    Sglang,
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    OpenaiResponses,
    AnthropicMessages,
    OpenaiEmbeddings,
    OpenaiEmbeddingsChat,
    InfinityEmbeddings,
    VllmPooling,
    VllmRerank,
    OpenaiEmbeddingsClip,
    OpenaiEmbeddingsVlm2vec,
    InfinityEmbeddingsClip,
}

impl Backend {
    /// Every backend with its command-line spelling.
    pub const ALL: [(Backend, &'static str); 16] = [
        (Backend::Vllm, "vllm"),
        (Backend::Openai, "openai"),
        (Backend::OpenaiChat, "openai-chat"),
        (Backend::VllmChat, "vllm-chat"),
        (Backend::Sglang, "sglang"),
        (Backend::LlamaCpp, "llama.cpp"),
        (Backend::OpenaiResponses, "openai-responses"),
        (Backend::AnthropicMessages, "anthropic-messages"),
        (Backend::OpenaiEmbeddings, "openai-embeddings"),
        (Backend::OpenaiEmbeddingsChat, "openai-embeddings-chat"),
        (Backend::InfinityEmbeddings, "infinity-embeddings"),
        (Backend::VllmPooling, "vllm-pooling"),
        (Backend::VllmRerank, "vllm-rerank"),
        (Backend::OpenaiEmbeddingsClip, "openai-embeddings-clip"),
        (Backend::OpenaiEmbeddingsVlm2vec, "openai-embeddings-vlm2vec"),
        (Backend::InfinityEmbeddingsClip, "infinity-embeddings-clip"),
    ];

    /// The spelling used on the command line and in vLLM's result JSON.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(b, _)| *b == self).map(|(_, n)| *n).unwrap_or("openai")
    }

    /// Parses a command-line spelling.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.iter().find(|(_, n)| *n == s).map(|(b, _)| *b)
    }

    /// The API family this backend uses.
    pub fn api(self) -> Api {
        match self {
            Backend::OpenaiChat | Backend::VllmChat => Api::Chat,
            Backend::OpenaiResponses => Api::Responses,
            Backend::AnthropicMessages => Api::Messages,
            Backend::OpenaiEmbeddings => Api::Pooling(PoolingForm::Embeddings),
            Backend::OpenaiEmbeddingsChat | Backend::OpenaiEmbeddingsClip | Backend::OpenaiEmbeddingsVlm2vec => {
                Api::Pooling(PoolingForm::EmbeddingsChat)
            }
            Backend::InfinityEmbeddings | Backend::InfinityEmbeddingsClip => Api::Pooling(PoolingForm::Infinity),
            Backend::VllmPooling => Api::Pooling(PoolingForm::Pooling),
            Backend::VllmRerank => Api::Pooling(PoolingForm::Rerank),
            _ => Api::Completions,
        }
    }

    /// How the backend writes a prompt that comes with images (vLLM's image embedding
    /// backends); `None` where it sends the prompt as it is, its images after it.
    pub fn image_prompt(self) -> Option<ImagePrompt> {
        match self {
            Backend::OpenaiEmbeddingsClip | Backend::InfinityEmbeddingsClip => Some(ImagePrompt::Clip),
            Backend::OpenaiEmbeddingsVlm2vec => Some(ImagePrompt::Vlm2vec),
            _ => None,
        }
    }

    /// The endpoint vLLM uses for this backend when `--endpoint` is not given.
    pub fn default_endpoint(self) -> &'static str {
        match self.api() {
            Api::Completions => "/v1/completions",
            Api::Chat => "/v1/chat/completions",
            Api::Responses => "/v1/responses",
            Api::Messages => "/v1/messages",
            Api::Pooling(PoolingForm::Pooling) => "/pooling",
            Api::Pooling(PoolingForm::Rerank) => "/v1/rerank",
            Api::Pooling(_) => "/v1/embeddings",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_parse_their_own_names() {
        for (b, n) in Backend::ALL {
            assert_eq!(Backend::from_name(n), Some(b));
            assert_eq!(b.name(), n);
        }
        assert_eq!(Backend::OpenaiChat.api(), Api::Chat);
        assert_eq!(Backend::Sglang.api(), Api::Completions);
        assert_eq!(Backend::from_name("tgi"), None);
        let clip = Backend::InfinityEmbeddingsClip;
        assert_eq!((clip.api(), clip.image_prompt()), (Api::Pooling(PoolingForm::Infinity), Some(ImagePrompt::Clip)));
    }

    #[test]
    fn a_route_is_served_as_the_api_its_path_ends_in() {
        // A route names its API family; a pooling body's form is the backend's.
        for (b, _) in Backend::ALL {
            let served = Api::served_at(b.default_endpoint()).unwrap();
            assert_eq!(served.route_end(), b.api().route_end(), "{b:?}");
            assert!(b.default_endpoint().ends_with(b.api().route_end()));
            assert!(served == b.api() || b.api().pooling());
        }
        assert_eq!(Api::served_at("/v1/embeddings"), Some(Api::Pooling(PoolingForm::Embeddings)));
        assert_eq!(Api::served_at("/pooling"), Some(Api::Pooling(PoolingForm::Pooling)));
        assert_eq!(Api::served_at("/v2/rerank"), Some(Api::Pooling(PoolingForm::Rerank)));
        assert!(Backend::OpenaiEmbeddingsChat.api().templated() && !Backend::VllmPooling.api().templated());
        assert_eq!(Api::served_at("/gateway/v1/chat/completions/"), Some(Api::Chat));
        assert_eq!(Api::served_at("/v1/completions?api-version=1"), Some(Api::Completions));
        assert_eq!(Api::served_at("/generate"), None);
        assert_eq!(Api::served_at(""), None);
    }
}
