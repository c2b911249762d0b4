//! The HTTP endpoints, in vLLM's request and response shapes.
//!
//! `POST /v1/completions`, `/v1/chat/completions`, `/v1/responses` and Anthropic's
//! `/v1/messages` (streamed or not; a Responses or Messages body read as the chat it stands
//! for, Messages' errors in Anthropic's shape), the pooling routes (`pooling.rs`), `GET /v1/models`,
//! `/health`, `/version`, `/metrics`, and `POST /tokenize` / `/detokenize`. Errors use OpenAI's
//! shape, `{"error": {"message", "type", "param", "code"}}`, with vLLM's messages where vLLM has
//! one (unknown model, context too long). Where llama.cpp's or SGLang's API differs from vLLM's,
//! the server's [`Dialect`] decides (see `dialect.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use servebench_core::config::Api;
use servebench_core::protocol::{ChunkRenderer, messages, responses};
use tokio::sync::{mpsc, oneshot};

use super::TOKEN_COUNT_HEADER;
use super::choices::{self, Choice, ChoicesStream, Head};
use super::dialect::Dialect;
use super::logprobs;
use super::metrics;
use super::pacer::{Arrival, ToPacer};
use super::stream::{Admission, Answer, SseStream, finish_str};
use super::text::{Prompt, TextModel};
use crate::engine::{EncoderInput, Pooling, Rejection};
use crate::rng::mix64;

/// The largest request body read (a prompt of a few hundred thousand tokens fits).
const BODY_LIMIT: usize = 64 << 20;

/// What every handler shares.
pub(crate) struct Shared {
    pub model_name: String,
    /// The model the setup simulates (`root` in `/v1/models`).
    pub root: String,
    pub hardware: String,
    pub max_model_len: u32,
    /// Token ids a prompt may hold are below it: the larger of the model's vocabulary and the
    /// tokenizer's.
    pub vocab: u32,
    /// When the server started, Unix seconds.
    pub created: u64,
    pub text: Arc<TextModel>,
    pub pacer: Sender<ToPacer>,
    pub next_tag: AtomicU64,
    pub seed: u64,
    pub dialect: Dialect,
    /// What the deployment takes of images.
    pub tower: crate::media::Tower,
    /// The length of a pooling answer's vectors (the model's hidden size).
    pub embedding_dim: u32,
    /// How the model scores a rerank.
    pub convert: crate::options::Convert,
}

impl Shared {
    /// Hands a request to the pacer (`input`: its place among a pooling request's inputs, from
    /// 0; 0 for any other).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn admit(
        &self,
        prompt: Vec<u32>,
        images: Vec<EncoderInput>,
        max_tokens: u32,
        ignore_eos: bool,
        api: Api,
        input: usize,
        received: Instant,
    ) -> Result<Admission, ApiError> {
        let tag = self.next_tag.fetch_add(1, Ordering::Relaxed);
        let (events, rx) = mpsc::unbounded_channel();
        let chat = api.templated();
        let pooling = Pooling::of(api.pooling(), input);
        let arrival = Arrival { tag, prompt, images, max_tokens, ignore_eos, chat, pooling, received, events };
        self.pacer.send(ToPacer::Arrive(arrival)).map_err(|_| ApiError::shutting_down())?;
        Ok(Admission { tag, rx, pacer: self.pacer.clone(), ended: false })
    }

    pub(super) fn check_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        match model {
            Some(m) if m != self.model_name => Err(ApiError {
                status: StatusCode::NOT_FOUND,
                kind: "NotFoundError",
                param: Some("model"),
                message: format!("The model `{m}` does not exist."),
            }),
            _ => Ok(()),
        }
    }

    fn token_count_header(&self) -> HeaderValue {
        HeaderValue::from_static(self.text.token_count().as_str())
    }
}

/// The router of a simulated server.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let router = match shared.dialect {
        // vLLM's development endpoints that `vllm bench sweep serve` calls between runs; the
        // twin keeps no multimodal or encoder cache apart from its prefix cache.
        Dialect::Vllm => Router::new()
            .route("/reset_prefix_cache", post(reset_prefix_cache))
            .route("/reset_mm_cache", post(empty_ok))
            .route("/reset_encoder_cache", post(empty_ok)),
        Dialect::LlamaCpp => Router::new().route("/apply-template", post(apply_template)),
        Dialect::Sglang => {
            Router::new().route("/v1/tokenize", post(tokenize)).route("/v1/detokenize", post(detokenize))
        }
    };
    router
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/responses", post(responses))
        .route("/v1/messages", post(messages))
        .route("/v1/embeddings", post(super::pooling::embeddings))
        .route("/pooling", post(super::pooling::pooling))
        .route("/rerank", post(super::pooling::rerank))
        .route("/v1/rerank", post(super::pooling::rerank))
        .route("/v2/rerank", post(super::pooling::rerank))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/version", get(version))
        .route("/metrics", get(metrics))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .fallback(not_found)
        .with_state(shared)
}

/// An error answered in OpenAI's shape.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    kind: &'static str,
    param: Option<&'static str>,
    message: String,
}

impl ApiError {
    pub(super) fn bad(message: impl Into<String>) -> Self {
        Self { status: StatusCode::BAD_REQUEST, kind: "BadRequestError", param: None, message: message.into() }
    }

    pub(super) fn bad_param(param: &'static str, message: impl Into<String>) -> Self {
        Self { param: Some(param), ..Self::bad(message) }
    }

    fn shutting_down() -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            kind: "ServiceUnavailableError",
            param: None,
            message: "the simulated server is shutting down".into(),
        }
    }

    /// vLLM's refusal of a prompt of `prompt` tokens that leaves the context no room.
    pub(super) fn context_too_long(max_model_len: u32, prompt: u64) -> Self {
        Self::bad(format!(
            "This model's maximum context length is {max_model_len} tokens. However, your request has {prompt} \
             input tokens. Please reduce the length of the input messages."
        ))
    }

    pub(super) fn internal(message: String) -> Self {
        Self { status: StatusCode::INTERNAL_SERVER_ERROR, kind: "InternalServerError", param: None, message }
    }
}

impl ApiError {
    /// The error in Anthropic's shape, `{"type": "error", "error": {"type", "message"}}`.
    fn into_anthropic(self) -> Response {
        let kind = match self.status {
            StatusCode::NOT_FOUND => "not_found_error",
            StatusCode::SERVICE_UNAVAILABLE => "overloaded_error",
            s if s.is_client_error() => "invalid_request_error",
            _ => "api_error",
        };
        json_response(self.status, &json!({"type": "error", "error": {"type": kind, "message": self.message}}))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {
            "message": self.message, "type": self.kind, "param": self.param, "code": self.status.as_u16()
        }});
        json_response(self.status, &body)
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    json_text_response(status, body.to_string())
}

/// A JSON answer already written.
pub(super) fn json_text_response(status: StatusCode, body: String) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

pub(super) async fn read_json(req: Request) -> Result<Value, ApiError> {
    let bytes = axum::body::to_bytes(req.into_body(), BODY_LIMIT)
        .await
        .map_err(|e| ApiError::bad(format!("could not read the request body: {e}")))?;
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|e| ApiError::bad(format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad("the body must be a JSON object"));
    }
    Ok(value)
}

/// The generation parameters the simulator honours; other keys are accepted and ignored.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Params {
    model: Option<String>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    ignore_eos: Option<bool>,
    n: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StreamOptions {
    include_usage: Option<bool>,
}

async fn completions(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let received = Instant::now();
    generate(s, Api::Completions, received, req).await.unwrap_or_else(IntoResponse::into_response)
}

async fn chat_completions(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let received = Instant::now();
    generate(s, Api::Chat, received, req).await.unwrap_or_else(IntoResponse::into_response)
}

async fn responses(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let received = Instant::now();
    generate(s, Api::Responses, received, req).await.unwrap_or_else(IntoResponse::into_response)
}

async fn messages(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let received = Instant::now();
    generate(s, Api::Messages, received, req).await.unwrap_or_else(ApiError::into_anthropic)
}

/// `max_tokens` after vLLM's checks: the prompt must leave room, the request must fit.
/// `requested` is the body's budget as [`crate::sampling::requested_max_tokens`] reads it (at least 1).
fn output_budget(api: Api, prompt: u32, requested: Option<u64>, max_model_len: u32) -> Result<u32, ApiError> {
    if prompt == 0 {
        return Err(ApiError::bad(Rejection::EmptyPrompt.to_string()));
    }
    if prompt >= max_model_len {
        return Err(ApiError::context_too_long(max_model_len, u64::from(prompt)));
    }
    let room = max_model_len - prompt;
    let asked = match (requested, api) {
        (Some(m), _) => m,
        // vLLM's defaults: 16 for completions, the rest of the context for chat and Responses.
        (None, Api::Completions) => 16,
        (None, Api::Chat | Api::Responses) => u64::from(room),
        // A pooling request runs its prefill alone (its one sampled token the step that ends it).
        (None, Api::Pooling(_)) => 1,
        // Anthropic's API requires it.
        (None, Api::Messages) => return Err(ApiError::bad_param("max_tokens", "max_tokens: Field required")),
    };
    let (param, names) = match api {
        Api::Responses => ("max_output_tokens", "'max_output_tokens'"),
        Api::Completions | Api::Chat | Api::Pooling(_) => ("max_tokens", "'max_tokens' or 'max_completion_tokens'"),
        Api::Messages => ("max_tokens", "'max_tokens'"),
    };
    if asked > u64::from(room) {
        return Err(ApiError::bad_param(
            param,
            format!(
                "{names} is too large: {asked}. This model's maximum context length is {max_model_len} tokens and \
                 your request has {prompt} input tokens ({asked} > {max_model_len} - {prompt})."
            ),
        ));
    }
    Ok(asked as u32)
}

/// The most choices (prompts × `n`) one request may ask for.
const MAX_CHOICES: usize = 4096;

/// `n`: at least 1; more than one only where the API has several choices.
fn samples_per_prompt(api: Api, n: Option<i64>) -> Result<u32, ApiError> {
    let n = n.unwrap_or(1);
    if n < 1 {
        return Err(ApiError::bad_param("n", format!("n must be at least 1, got {n}.")));
    }
    if n > 1 && matches!(api, Api::Responses | Api::Messages) {
        return Err(ApiError::bad_param(
            "n",
            format!("n={n} is not supported on this endpoint, which answers with one output; leave n out"),
        ));
    }
    u32::try_from(n).ok().filter(|&n| n as usize <= MAX_CHOICES).ok_or_else(|| {
        ApiError::bad_param("n", format!("n={n} is more than the {MAX_CHOICES} choices one request may ask for"))
    })
}

async fn generate(s: Arc<Shared>, api: Api, received: Instant, req: Request) -> Result<Response, ApiError> {
    let body = read_json(req).await?;
    let p = Params::deserialize(&body).map_err(|e| ApiError::bad(format!("invalid request: {e}")))?;
    s.check_model(p.model.as_deref())?;
    if s.dialect.checks_sampling() {
        crate::sampling::check(&body).map_err(|e| ApiError::bad_param(e.param, e.message))?;
    }
    let n = samples_per_prompt(api, p.n)?;
    let extras = logprobs::read(api, &body, s.vocab).map_err(|e| ApiError::bad_param(e.param, e.message))?;
    let (prompts, images) = match api {
        Api::Completions => {
            (s.text.completion_prompts(&body, s.vocab).map_err(|e| ApiError::bad_param("prompt", e))?, Vec::new())
        }
        api => {
            let mut ids = s.text.prompt_ids(api, &body).map_err(ApiError::bad)?;
            let images = s.tower.expand(api, &body, &mut ids).map_err(|e| ApiError::bad_param("image", e))?;
            (vec![Prompt { ids, text: None }], images)
        }
    };
    if prompts.len() * n as usize > MAX_CHOICES {
        return Err(ApiError::bad_param(
            "prompt",
            format!(
                "{} prompts × n={n} are more than the {MAX_CHOICES} choices one request may ask for; send the \
                 prompts over several requests",
                prompts.len()
            ),
        ));
    }
    let requested =
        crate::sampling::requested_max_tokens(api, &body).map_err(|e| ApiError::bad_param(e.param, e.message))?;
    // Every prompt is checked before any is admitted, as vLLM refuses a batch with one bad prompt.
    let mut admitted = Vec::with_capacity(prompts.len());
    for prompt in &prompts {
        let prompt_tokens = u32::try_from(prompt.ids.len()).unwrap_or(u32::MAX);
        let max_tokens = output_budget(api, prompt_tokens, requested, s.max_model_len)?;
        let echo = extras.echo.then(|| s.text.echo(prompt).map(Arc::new)).transpose();
        let echo = echo.map_err(|e| ApiError::bad_param("echo", e))?;
        admitted.push((prompt_tokens, max_tokens, echo));
    }
    let ignore_eos = p.ignore_eos.unwrap_or(false);
    let mut choices = Vec::with_capacity(prompts.len() * n as usize);
    for (prompt, (prompt_tokens, max_tokens, echo)) in prompts.into_iter().zip(admitted) {
        let prompt_salt = prompt.ids.iter().fold(mix64(s.seed ^ 0x7072_6f6d_7074), |h, &id| mix64(h ^ u64::from(id)));
        for _ in 0..n {
            let admission = s.admit(prompt.ids.clone(), images.clone(), max_tokens, ignore_eos, api, 0, received)?;
            let salt = mix64(s.seed ^ mix64(admission.tag.wrapping_add(1)));
            let answer = Answer { text: Arc::clone(&s.text), salt, prompt_tokens };
            let index = choices.len() as u32;
            choices.push(Choice { admission, answer, index, echo: echo.clone(), prompt_salt });
        }
    }
    let prompt_tokens: u64 = choices.iter().step_by(n as usize).map(|c| u64::from(c.answer.prompt_tokens)).sum();
    let salt = choices.first().map_or(0, |c| c.answer.salt);
    let prefix = match api {
        Api::Completions => "cmpl-",
        Api::Chat => "chatcmpl-",
        Api::Responses => "resp_",
        Api::Messages => "msg_",
        Api::Pooling(_) => "embd-",
    };
    let id = format!("{prefix}{:016x}{:016x}", mix64(salt ^ 1), mix64(salt ^ 2));
    let created = unix_now();
    let stream = p.stream.unwrap_or(false);
    let include_usage = p.stream_options.and_then(|o| o.include_usage).unwrap_or(false);
    let usage_in_last = s.dialect.usage_in_last_chunk(api);
    if matches!(api, Api::Completions | Api::Chat) && (choices.len() > 1 || !extras.plain() || !stream) {
        let head = Head { api, id, created, model: s.model_name.clone(), logprobs: extras.logprobs, prompt_tokens };
        if stream {
            let stream = ChoicesStream::new(head, choices, include_usage, usage_in_last);
            return Ok(sse_response(&s, Body::from_stream(stream)));
        }
        let body = choices::whole(&head, choices).await.map_err(ApiError::internal)?;
        let mut resp = json_response(StatusCode::OK, &body);
        resp.headers_mut().insert(TOKEN_COUNT_HEADER, s.token_count_header());
        return Ok(resp);
    }
    let Some(Choice { admission, answer, .. }) = choices.pop() else {
        return Err(ApiError::internal("the request made no choice to answer".into()));
    };
    let prompt_tokens = answer.prompt_tokens;
    if stream {
        let renderer = ChunkRenderer::new(api, &id, created, &s.model_name);
        let stream = SseStream::new(admission, answer, renderer, include_usage, usage_in_last);
        return Ok(sse_response(&s, Body::from_stream(stream)));
    }
    let done = admission.collect(&answer).await.map_err(ApiError::internal)?;
    let n = done.completion_tokens;
    let finish = finish_str(done.finish);
    let body = match api {
        Api::Responses => {
            let (status, reason) = responses::status(Some(finish));
            let details = reason.map_or(Value::Null, |r| json!({"reason": r}));
            let item = responses::message_id(&id);
            json!({
                "id": id, "object": "response", "created_at": created, "model": s.model_name,
                "status": status, "incomplete_details": details,
                "output": [{"id": item, "type": "message", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": done.text, "annotations": []}]}],
                "usage": {"input_tokens": prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": n, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": u64::from(prompt_tokens) + u64::from(n)}
            })
        }
        _ => json!({
            "id": id, "type": "message", "role": "assistant", "model": s.model_name,
            "content": [{"type": "text", "text": done.text}],
            "stop_reason": messages::stop_reason(Some(finish)), "stop_sequence": null,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": n}
        }),
    };
    let mut resp = json_response(StatusCode::OK, &body);
    resp.headers_mut().insert(TOKEN_COUNT_HEADER, s.token_count_header());
    Ok(resp)
}

/// A streamed answer with its SSE headers.
fn sse_response(s: &Shared, body: Body) -> Response {
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    if s.dialect.closes_after_stream() {
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream; charset=utf-8"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(TOKEN_COUNT_HEADER, s.token_count_header());
    resp
}

async fn models(State(s): State<Arc<Shared>>) -> Response {
    let tokenizer = s.text.tokenizer().map(|t| t.name().to_string());
    let body = json!({"object": "list", "data": [{
        "id": s.model_name, "object": "model", "created": s.created, "owned_by": "servebench",
        "root": s.root, "parent": null, "max_model_len": s.max_model_len, "permission": [],
        "servebench": {"simulated": true, "hardware": s.hardware,
                       "token_count": s.text.token_count().as_str(), "tokenizer": tokenizer}
    }]});
    json_response(StatusCode::OK, &body)
}

async fn health() -> StatusCode {
    StatusCode::OK
}

async fn reset_prefix_cache(State(s): State<Arc<Shared>>) -> Response {
    let (tx, rx) = oneshot::channel();
    if s.pacer.send(ToPacer::ResetPrefixCache(tx)).is_err() {
        return ApiError::shutting_down().into_response();
    }
    match rx.await {
        Ok(true) => empty_ok().await,
        Ok(false) => ApiError {
            status: StatusCode::CONFLICT,
            kind: "Conflict",
            param: None,
            message: "requests are still being served; reset the prefix cache once they are done".into(),
        }
        .into_response(),
        Err(_) => ApiError::shutting_down().into_response(),
    }
}

async fn empty_ok() -> Response {
    StatusCode::OK.into_response()
}

async fn version() -> Response {
    json_response(StatusCode::OK, &json!({"version": env!("CARGO_PKG_VERSION"), "server": "servebench-sim"}))
}

async fn metrics(State(s): State<Arc<Shared>>) -> Response {
    let (tx, rx) = oneshot::channel();
    if s.pacer.send(ToPacer::Snapshot(tx)).is_err() {
        return ApiError::shutting_down().into_response();
    }
    let Ok(snap) = rx.await else { return ApiError::shutting_down().into_response() };
    let mut resp = Response::new(Body::from(metrics::render(&snap, &s.model_name)));
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    resp
}

async fn tokenize(State(s): State<Arc<Shared>>, req: Request) -> Result<Response, ApiError> {
    let body = read_json(req).await?;
    let answer = match s.dialect {
        Dialect::LlamaCpp => {
            // llama.cpp reads only `content` (an empty list of tokens without it) and never
            // checks the model.
            let ids = match body.get("content").and_then(Value::as_str) {
                Some(content) => {
                    let special = body.get("add_special").and_then(Value::as_bool).unwrap_or(false);
                    let as_vllm = json!({"prompt": content, "add_special_tokens": special});
                    s.text.tokenize(&as_vllm).map_err(ApiError::bad)?.0
                }
                None => Vec::new(),
            };
            json!({"tokens": ids})
        }
        Dialect::Vllm | Dialect::Sglang => {
            s.check_model(body.get("model").and_then(Value::as_str))?;
            let (ids, strs) = s.text.tokenize(&body).map_err(ApiError::bad)?;
            match s.dialect {
                Dialect::Sglang => json!({"tokens": ids, "count": ids.len(), "max_model_len": s.max_model_len}),
                _ => json!({"count": ids.len(), "max_model_len": s.max_model_len, "tokens": ids, "token_strs": strs}),
            }
        }
    };
    let mut resp = json_response(StatusCode::OK, &answer);
    resp.headers_mut().insert(TOKEN_COUNT_HEADER, s.token_count_header());
    Ok(resp)
}

/// llama.cpp's `POST /apply-template`: `{"messages"}` → `{"prompt"}`, the chat template applied.
async fn apply_template(State(s): State<Arc<Shared>>, req: Request) -> Result<Response, ApiError> {
    let body = read_json(req).await?;
    let prompt = s.text.chat_prompt(&body).map_err(ApiError::bad)?;
    Ok(json_response(StatusCode::OK, &json!({"prompt": prompt})))
}

async fn detokenize(State(s): State<Arc<Shared>>, req: Request) -> Result<Response, ApiError> {
    let body = read_json(req).await?;
    if s.dialect != Dialect::LlamaCpp {
        s.check_model(body.get("model").and_then(Value::as_str))?;
    }
    let ids: Vec<u32> = body
        .get("tokens")
        .and_then(|t| serde_json::from_value(t.clone()).ok())
        .ok_or_else(|| ApiError::bad_param("tokens", "\"tokens\" must be a list of token ids"))?;
    let text = s.text.detokenize(&ids).map_err(ApiError::bad)?;
    let key = match s.dialect {
        Dialect::Vllm => "prompt",
        Dialect::LlamaCpp => "content",
        Dialect::Sglang => "text",
    };
    Ok(json_response(StatusCode::OK, &json!({ key: text })))
}

async fn not_found() -> Response {
    json_response(StatusCode::NOT_FOUND, &json!({"detail": "Not Found"}))
}
