//! The server's `/tokenize` and `/detokenize` over HTTP, in the server's own schema.
//!
//! - vLLM: `{"model", "prompt" | "messages", "add_special_tokens"}` → `{"count", "tokens",
//!   "max_model_len"}`; `/detokenize` `{"model", "tokens"}` → `{"prompt"}`.
//! - SGLang (its `/tokenize` since 0.5): the same requests; `/detokenize` answers `{"text"}`.
//! - llama.cpp's `llama-server`: `{"content", "add_special"}` → `{"tokens"}` (an empty list
//!   when `content` is missing, which is why a vLLM-style call counts 0 tokens there);
//!   `/detokenize` `{"tokens"}` → `{"content"}`; chat messages are rendered by
//!   `POST /apply-template` (`{"messages"}` → `{"prompt"}`) and then tokenized.
//!
//! The schema comes from `--backend` (`llama.cpp`, `sglang`) or, for any other backend, from
//! the server's first answer: vLLM's request is sent, and an answer with `tokens` but no
//! `count` that counts nothing for a non-empty prompt is llama.cpp's, so the call is sent again
//! in llama.cpp's schema and every later one is too. An answer in no known schema is an error,
//! so request 0's failure disables the alignment with one line instead of a false mismatch.
//! `/detokenize` answers are read under any of the three names.
//!
//! Calls share one connection pool the size of the alignment's concurrency, so connections are
//! reused under the run's rule (a request that fails on a pooled connection the server already
//! closed is sent once more on a fresh one, see `http.rs`). Once a call got no answer at all no
//! more are made, and all of them together have a time budget ([`BUDGET`]).

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Uri};
use serde_json::{Value, json};
use servebench_core::config::Backend;

use super::{AlignError, TokenServer};
use crate::http::HttpClient;
use crate::runner::Logger;
use crate::server_info::{InfoError, call};

/// How long one call may take.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(60);
/// How long all the alignment's calls may take together; then it stops and the run goes on.
pub const BUDGET: Duration = Duration::from_secs(30);

/// The schema of a server's `/tokenize` and `/detokenize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Vllm,
    Sglang,
    LlamaCpp,
}

impl Dialect {
    /// The schema `--backend` names, if it names one (`vllm` is also the default backend, so
    /// it proves nothing about the server).
    pub fn of_backend(backend: Backend) -> Option<Self> {
        match backend {
            Backend::LlamaCpp => Some(Dialect::LlamaCpp),
            Backend::Sglang => Some(Dialect::Sglang),
            _ => None,
        }
    }

    fn code(self) -> u8 {
        match self {
            Dialect::Vllm => 1,
            Dialect::Sglang => 2,
            Dialect::LlamaCpp => 3,
        }
    }

    fn from_code(code: u8) -> Option<Self> {
        [Dialect::Vllm, Dialect::Sglang, Dialect::LlamaCpp].into_iter().find(|d| d.code() == code)
    }

    /// Whose schema, for messages.
    pub fn label(self) -> &'static str {
        match self {
            Dialect::Vllm => "vLLM's",
            Dialect::Sglang => "SGLang's",
            Dialect::LlamaCpp => "llama.cpp's",
        }
    }
}

/// `/tokenize` and `/detokenize` over HTTP, with the run's headers.
pub(crate) struct HttpServer {
    client: HttpClient,
    model: String,
    tokenize: (String, Uri),
    detokenize: (String, Uri),
    apply_template: (String, Uri),
    /// 0 until known, else [`Dialect::code`].
    dialect: AtomicU8,
    /// Set once a call got no answer: later calls are not made.
    gave_up: AtomicBool,
    /// When the budget is spent.
    deadline: Instant,
    budget: Duration,
    /// Set once a call was refused or cut short by the budget.
    out_of_time: AtomicBool,
    calls: AtomicUsize,
    log: Logger,
}

impl HttpServer {
    /// `pool` connections at most (the alignment's concurrency); `dialect` when `--backend`
    /// says; `log` hears the line saying a schema was detected.
    pub fn new(
        base_url: &str,
        model: &str,
        headers: &[(String, String)],
        insecure: bool,
        pool: usize,
        dialect: Option<Dialect>,
        log: Logger,
    ) -> Result<Self, AlignError> {
        Self::with_budget(base_url, model, headers, insecure, pool, dialect, log, BUDGET)
    }

    #[allow(clippy::too_many_arguments, reason = "the constructor and its test variant")]
    pub fn with_budget(
        base_url: &str,
        model: &str,
        headers: &[(String, String)],
        insecure: bool,
        pool: usize,
        dialect: Option<Dialect>,
        log: Logger,
        budget: Duration,
    ) -> Result<Self, AlignError> {
        let base = base_url.trim_end_matches('/');
        let url = |path: &str| format!("{base}{path}");
        let client = HttpClient::new(&url("/tokenize"), headers, pool.max(1), insecure)?;
        let endpoint = |path: &str| -> Result<(String, Uri), AlignError> {
            let u = url(path);
            let target = client.target(&u)?;
            Ok((u, target))
        };
        Ok(Self {
            model: model.to_string(),
            tokenize: endpoint("/tokenize")?,
            detokenize: endpoint("/detokenize")?,
            apply_template: endpoint("/apply-template")?,
            client,
            dialect: AtomicU8::new(dialect.map_or(0, Dialect::code)),
            gave_up: AtomicBool::new(false),
            deadline: Instant::now() + budget,
            budget,
            out_of_time: AtomicBool::new(false),
            calls: AtomicUsize::new(0),
            log,
        })
    }

    /// The schema in use, once known.
    pub fn dialect(&self) -> Option<Dialect> {
        Dialect::from_code(self.dialect.load(Ordering::Relaxed))
    }

    /// Calls answered or attempted so far.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }

    async fn post(&self, (url, target): &(String, Uri), body: &Value) -> Result<Value, AlignError> {
        if self.gave_up.load(Ordering::Relaxed) {
            return Err(AlignError::GaveUp { url: url.clone() });
        }
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            self.out_of_time.store(true, Ordering::Relaxed);
            return Err(AlignError::OutOfTime { url: url.clone(), budget: self.budget });
        }
        self.calls.fetch_add(1, Ordering::Relaxed);
        let body = Some(Bytes::from(body.to_string()));
        let text = match call(&self.client, Method::POST, url, target, body, TIMEOUT.min(left)).await {
            Ok(text) => text,
            Err(InfoError::Timeout { .. }) if left < TIMEOUT => {
                self.out_of_time.store(true, Ordering::Relaxed);
                return Err(AlignError::OutOfTime { url: url.clone(), budget: self.budget });
            }
            Err(e) => {
                let e = AlignError::from(e);
                if matches!(e, AlignError::Send { .. } | AlignError::Timeout { .. } | AlignError::Body { .. }) {
                    self.gave_up.store(true, Ordering::Relaxed);
                }
                return Err(e);
            }
        };
        serde_json::from_str(&text).map_err(|_| format_error(url, &text, "not JSON"))
    }

    /// `prompt` tokenized in `dialect`'s schema.
    async fn tokenize_as(&self, dialect: Dialect, prompt: &str, special: bool) -> Result<Value, AlignError> {
        let body = match dialect {
            Dialect::LlamaCpp => json!({"content": prompt, "add_special": special}),
            Dialect::Vllm | Dialect::Sglang => {
                json!({"model": self.model, "prompt": prompt, "add_special_tokens": special})
            }
        };
        self.post(&self.tokenize, &body).await
    }

    /// The ids of a `/tokenize` answer in `dialect`'s schema; 0 tokens for a non-empty text is
    /// an answer this client cannot use.
    fn ids(&self, dialect: Dialect, answer: &Value, text: &str) -> Result<Vec<u32>, AlignError> {
        let url = &self.tokenize.0;
        let ids = token_list(answer).ok_or_else(|| unreadable(url, answer))?;
        if let Some(count) = answer.get("count")
            && count.as_u64() != Some(ids.len() as u64)
        {
            return Err(format_error(url, &answer.to_string(), "\"count\" is not the number of \"tokens\""));
        }
        if ids.is_empty() && !text.is_empty() {
            return Err(format_error(
                url,
                &answer.to_string(),
                &format!("0 tokens for a non-empty prompt in {} schema", dialect.label()),
            ));
        }
        Ok(ids)
    }
}

/// `tokens` as ids, if the answer has such a list.
fn token_list(answer: &Value) -> Option<Vec<u32>> {
    answer.get("tokens")?.as_array()?.iter().map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok())).collect()
}

/// The beginning of an answer, for messages.
fn excerpt(text: &str) -> String {
    let mut s: String = text.chars().take(80).collect();
    if s.len() < text.len() {
        s.push('…');
    }
    s
}

fn format_error(url: &str, text: &str, what: &str) -> AlignError {
    AlignError::Format { url: url.to_string(), reason: format!("{what}: {}", excerpt(text)) }
}

fn unreadable(url: &str, answer: &Value) -> AlignError {
    format_error(
        url,
        &answer.to_string(),
        "an answer in none of the /tokenize schemas servebench reads (vLLM's and SGLang's {\"count\", \"tokens\"}, \
         llama.cpp's {\"tokens\"})",
    )
}

impl TokenServer for HttpServer {
    async fn tokenize(&self, prompt: &str, add_special_tokens: bool) -> Result<Vec<u32>, AlignError> {
        if let Some(dialect) = self.dialect() {
            let answer = self.tokenize_as(dialect, prompt, add_special_tokens).await?;
            return self.ids(dialect, &answer, prompt);
        }
        // Not known yet: vLLM's request, and the answer tells.
        let answer = self.tokenize_as(Dialect::Vllm, prompt, add_special_tokens).await?;
        let has_count = answer.get("count").is_some();
        match token_list(&answer) {
            Some(ids) if !has_count && ids.is_empty() && !prompt.is_empty() => {
                let again = self.tokenize_as(Dialect::LlamaCpp, prompt, add_special_tokens).await?;
                let ids = self.ids(Dialect::LlamaCpp, &again, prompt)?;
                self.dialect.store(Dialect::LlamaCpp.code(), Ordering::Relaxed);
                (self.log)(
                    "The server's /tokenize speaks llama.cpp's schema ({\"content\"} in, {\"tokens\"} out); \
                     the alignment uses it.",
                );
                Ok(ids)
            }
            Some(_) => {
                let ids = self.ids(Dialect::Vllm, &answer, prompt)?;
                self.dialect.store(Dialect::Vllm.code(), Ordering::Relaxed);
                Ok(ids)
            }
            None => Err(unreadable(&self.tokenize.0, &answer)),
        }
    }

    async fn tokenize_chat(&self, messages: &Value) -> Result<usize, AlignError> {
        match self.dialect().unwrap_or(Dialect::Vllm) {
            Dialect::LlamaCpp => {
                let rendered = self.post(&self.apply_template, &json!({"messages": messages})).await?;
                let prompt = rendered
                    .get("prompt")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format_error(&self.apply_template.0, &rendered.to_string(), "no \"prompt\""))?;
                let answer = self.tokenize_as(Dialect::LlamaCpp, prompt, true).await?;
                self.ids(Dialect::LlamaCpp, &answer, prompt).map(|ids| ids.len())
            }
            d @ (Dialect::Vllm | Dialect::Sglang) => {
                let body = json!({"model": self.model, "messages": messages, "add_generation_prompt": true});
                let answer = self.post(&self.tokenize, &body).await?;
                self.ids(d, &answer, "messages").map(|ids| ids.len())
            }
        }
    }

    async fn detokenize(&self, tokens: &[u32]) -> Result<String, AlignError> {
        let body = match self.dialect() {
            Some(Dialect::LlamaCpp) => json!({"tokens": tokens}),
            _ => json!({"model": self.model, "tokens": tokens}),
        };
        let answer = self.post(&self.detokenize, &body).await?;
        ["prompt", "content", "text"]
            .iter()
            .find_map(|k| answer.get(*k).and_then(Value::as_str))
            .map(str::to_string)
            .ok_or_else(|| {
                format_error(
                    &self.detokenize.0,
                    &answer.to_string(),
                    "no text under \"prompt\" (vLLM), \"text\" (SGLang) or \"content\" (llama.cpp)",
                )
            })
    }

    fn stopped(&self) -> Option<String> {
        self.out_of_time.load(Ordering::Relaxed).then(|| {
            format!(
                "WARNING: prompt alignment stopped at its {} s budget; prompts not yet aligned are sent as \
                 planned, and the run goes on.",
                self.budget.as_secs_f64()
            )
        })
    }
}

#[cfg(test)]
mod tests;
