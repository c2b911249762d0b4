//! Prompts aligned to the server's tokenizer before the run: vLLM's
//! `_align_prompts_to_server_tokenizer` (0.25+), taken further when there is no local tokenizer.
//!
//! Only `random` and `prefix_repetition` plans of single text prompts are aligned, once, right
//! after they are built (a replayed plan is sent exactly as written: the caller does not call
//! this for it). Request 0's prompt goes to `POST {base_url}/tokenize` in the server's own
//! schema (vLLM's, SGLang's or llama.cpp's, from `--backend` or detected: see `align/server.rs`):
//! - no answer: vLLM's `WARNING: {base_url} unreachable (...)` or `WARNING: /tokenize
//!   unavailable (404 Not Found), skipping alignment.`, and nothing changes; so does an answer
//!   in no schema the client reads (one `WARNING: /tokenize unavailable (...)` line saying so);
//! - with a local tokenizer (vLLM's behaviour): if the server counts request 0 as the tokenizer
//!   does, nothing changes; otherwise `WARNING: tokenizer mismatch (server=a, expected=b),
//!   re-aligning prompts.`, every prompt is tokenized by the server, and each with more tokens
//!   than planned becomes the `/detokenize`d text of its first planned-length tokens. Its
//!   planned count stays (vLLM keeps `prompt_len`); a request whose calls fail keeps its prompt;
//! - without one (the counts are estimates): every prompt is brought to its planned length as
//!   the server counts it, cut with `/detokenize` when too long and lengthened with one-token
//!   words when too short, re-checked each time, for at most [`MAX_ROUNDS`] rounds. For
//!   `random`, the planned length includes the special tokens the server adds, as vLLM's
//!   `--random-input-len` does with a tokenizer. When the server counted every prompt, the
//!   plan's counts become the server's ([`TokenCounting::Server`]), each with what the server
//!   adds around a prompt (special tokens, chat template), measured once on request 0.
//!
//! The same headers as the run go with every call. At most the run's `--max-concurrency` calls
//! are in flight ([`DEFAULT_CONCURRENCY`] without one, never more than vLLM's [`CONCURRENCY`]),
//! on as many pooled connections, so a server with a few HTTP threads that keeps idle
//! connections open is not left holding them; once a call gets no answer at all (refused, timed
//! out) no more are made, and after [`BUDGET`] the alignment stops with a line saying so and the
//! run goes on. A line every few seconds shows progress while it lasts, and one at the end says
//! how long it took. Only the bodies of prompts that changed are rebuilt, by the run's body
//! builder, so every other byte stays as planned. Nothing here is timed: it all happens before
//! the clock starts.

mod server;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::StatusCode;
use serde_json::Value;
use servebench_core::config::{Api, PoolingForm, RunConfig, WorkloadSpec};
use servebench_core::plan::{Plan, TokenCounting};
use servebench_workload::plan::ESTIMATE_NOTE;
use servebench_workload::prompts::{filler_words, raw_lengths};
use servebench_workload::{BodyBuilder, PlanPrompts, PromptEdit, Tokenizer};
use tokio::task::JoinSet;

use crate::http::{HttpError, SendError, request_headers};
use crate::runner::Logger;
use crate::server_info::InfoError;
pub use server::{BUDGET, Dialect};
use server::{HttpServer, TIMEOUT};

/// The most calls in flight at once (vLLM's `asyncio.Semaphore(64)`).
pub const CONCURRENCY: usize = 64;
/// Calls in flight at once when the run has no `--max-concurrency`: few enough for a server
/// with a handful of HTTP threads (llama.cpp's default is its slots + 2).
pub const DEFAULT_CONCURRENCY: usize = 4;
/// How often a line shows the progress of a long alignment.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// The most cut-or-lengthen rounds per prompt without a local tokenizer.
pub const MAX_ROUNDS: usize = 10;
/// The end of vLLM's warning when request 0 cannot be tokenized by the server.
pub const SKIPPING: &str = "skipping alignment.";

/// What the alignment did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Alignment {
    /// Not a plan that is aligned (another dataset, conversations, bodies not built from a
    /// single text prompt, a plan already counted by the server).
    NotApplicable,
    /// The server did not tokenize request 0: nothing changed.
    Unavailable,
    /// The server counts request 0 as the local tokenizer does: nothing changed.
    Agreed,
    /// vLLM's re-alignment: `cut` prompts were cut to their planned length; `failed` could not
    /// be checked and were kept.
    Realigned { cut: usize, failed: usize },
    /// Without a local tokenizer: `changed` prompts were cut or lengthened; `off` kept a length
    /// other than the planned one; `uncounted` were not counted by the server (then the plan's
    /// counts stay estimates).
    Fitted { changed: usize, off: usize, uncounted: usize },
}

/// Why a call to `/tokenize` or `/detokenize` failed. Alignment is best effort: these end up in
/// warnings, never as a failed run.
#[derive(Debug, thiserror::Error)]
pub enum AlignError {
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("POST {url}: {source}; check that the server is up")]
    Send { url: String, source: SendError },
    #[error("POST {url}: no answer within {} s", TIMEOUT.as_secs())]
    Timeout { url: String },
    #[error("POST {url}: HTTP {status}; the server may not offer /tokenize and /detokenize")]
    Status { url: String, status: StatusCode },
    #[error("POST {url}: the response broke off: {source}")]
    Body { url: String, source: crate::http::BodyError },
    #[error("POST {url}: unexpected answer: {reason}")]
    Format { url: String, reason: String },
    #[error("POST {url}: not sent, as an earlier call got no answer")]
    GaveUp { url: String },
    #[error("POST {url}: not finished within the alignment's {} s budget", budget.as_secs_f64())]
    OutOfTime { url: String, budget: Duration },
}

impl From<InfoError> for AlignError {
    fn from(e: InfoError) -> Self {
        match e {
            InfoError::Http(e) => AlignError::Http(e),
            InfoError::Send { url, source, .. } => AlignError::Send { url, source },
            InfoError::Timeout { url, .. } => AlignError::Timeout { url },
            InfoError::Status { url, status, .. } => AlignError::Status { url, status },
            InfoError::Body { url, source, .. } => AlignError::Body { url, source },
            InfoError::Format { url, reason } => AlignError::Format { url, reason },
        }
    }
}

/// Aligns `plan`'s prompts to the tokenizer of the server at `config.target.base_url` (see the
/// module docs); `tokenizer` is the local one the plan was built with, if any. vLLM's warnings
/// and a summary line go to `log`; the summary is also added to the plan's notes.
pub async fn align_prompts(
    plan: &mut Plan,
    config: &RunConfig,
    tokenizer: Option<&Tokenizer>,
    api_key: Option<String>,
    log: &Logger,
) -> Alignment {
    if !applies(plan, config, tokenizer) {
        return Alignment::NotApplicable;
    }
    let t = &config.target;
    let headers = request_headers(&t.headers, api_key);
    let dialect = Dialect::of_backend(t.backend);
    let pool = concurrency(config);
    let server = match HttpServer::new(&t.base_url, &t.model_name, &headers, t.insecure, pool, dialect, log.clone()) {
        Ok(server) => Arc::new(server),
        Err(e) => {
            log(&unavailable(&e, &t.base_url));
            return Alignment::Unavailable;
        }
    };
    let started = Instant::now();
    let outcome = {
        let work = align_with(Arc::clone(&server), plan, config, tokenizer, log);
        tokio::pin!(work);
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
        loop {
            tokio::select! {
                outcome = &mut work => break outcome,
                _ = ticks.tick() => log(&format!(
                    "Aligning prompts to the server's tokenizer: {} calls in {:.0} s (at most {} s)...",
                    server.calls(),
                    started.elapsed().as_secs_f64(),
                    BUDGET.as_secs(),
                )),
            }
        }
    };
    if matches!(outcome, Alignment::Realigned { .. } | Alignment::Fitted { .. }) {
        let schema = server.dialect().unwrap_or(Dialect::Vllm).label();
        log(&format!(
            "Prompt alignment took {:.2} s: {} calls in {schema} schema, at most {pool} at a time.",
            started.elapsed().as_secs_f64(),
            server.calls(),
        ));
    }
    outcome
}

/// How many alignment calls may be in flight: the run's concurrency, or a few.
fn concurrency(config: &RunConfig) -> usize {
    config.traffic.max_concurrency.unwrap_or(DEFAULT_CONCURRENCY).clamp(1, CONCURRENCY)
}

/// vLLM's warning when request 0 could not be tokenized: the server unreachable, or
/// `/tokenize` answering with an error.
fn unavailable(e: &AlignError, base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    match e {
        AlignError::Send { source, .. } => format!("WARNING: {base} unreachable ({source}), {SKIPPING}"),
        AlignError::Timeout { .. } | AlignError::GaveUp { .. } | AlignError::OutOfTime { .. } => {
            format!("WARNING: {base} unreachable (no answer), {SKIPPING}")
        }
        AlignError::Status { status, .. } => format!("WARNING: /tokenize unavailable ({status}), {SKIPPING}"),
        other => format!("WARNING: /tokenize unavailable ({other}), {SKIPPING}"),
    }
}

/// Whether `plan` is one that is aligned: `random` (without images: a body with them is not
/// rebuilt from its prompt; one prompt a request: vLLM aligns text prompts, not lists of them)
/// or `prefix_repetition` requests, counted with the local tokenizer given or estimated.
fn applies(plan: &Plan, config: &RunConfig, tokenizer: Option<&Tokenizer>) -> bool {
    matches!(
        config.workload,
        WorkloadSpec::Random { media: None, batch_size: 1, .. } | WorkloadSpec::PrefixRepetition { .. }
    ) && plan.conversations.is_empty()
        && !plan.requests.is_empty()
        && match plan.token_counting {
            TokenCounting::Estimate => true,
            TokenCounting::Tokenizer(_) => tokenizer.is_some(),
            TokenCounting::Server { .. } => false,
        }
}

/// What alignment asks of a server: its `/tokenize` and `/detokenize`.
pub(crate) trait TokenServer: Send + Sync + 'static {
    /// The ids of a text prompt, with or without the special tokens the server adds.
    fn tokenize(
        &self,
        prompt: &str,
        add_special_tokens: bool,
    ) -> impl Future<Output = Result<Vec<u32>, AlignError>> + Send;
    /// How many tokens the server reads for chat `messages` (template and generation prompt
    /// included).
    fn tokenize_chat(&self, messages: &Value) -> impl Future<Output = Result<usize, AlignError>> + Send;
    /// The text of `tokens`.
    fn detokenize(&self, tokens: &[u32]) -> impl Future<Output = Result<String, AlignError>> + Send;
    /// A line saying why calls stopped being made before the end (the time budget), if so.
    fn stopped(&self) -> Option<String> {
        None
    }
}

/// The alignment against `server`, for a plan that [`applies`].
pub(crate) async fn align_with<S: TokenServer>(
    server: Arc<S>,
    plan: &mut Plan,
    config: &RunConfig,
    tokenizer: Option<&Tokenizer>,
    log: &Logger,
) -> Alignment {
    let bodies = BodyBuilder::new(config);
    let Some(first_text) = plan.prompt_text(0, &bodies) else { return Alignment::NotApplicable };
    let first = match server.tokenize(&first_text, false).await {
        Ok(ids) => ids,
        Err(e) => {
            log(&unavailable(&e, &config.target.base_url));
            return Alignment::Unavailable;
        }
    };
    let Some(texts) = (0..plan.requests.len()).map(|i| plan.prompt_text(i, &bodies)).collect::<Option<Vec<_>>>() else {
        return Alignment::NotApplicable;
    };
    let base = config.target.base_url.trim_end_matches('/');
    let outcome = match (&plan.token_counting, tokenizer) {
        (TokenCounting::Tokenizer(_), Some(tok)) => {
            let Ok(expected) = tok.count(&first_text, false) else { return Alignment::NotApplicable };
            if first.len() == expected as usize {
                return Alignment::Agreed;
            }
            log(&mismatch(first.len(), expected as usize));
            // A completions prompt's planned count is its tokens and the special ones the
            // tokenizer adds, so the local counts need no second pass over every prompt.
            let planned = (config.target.backend.api() == Api::Completions).then(|| {
                let special = tok.num_special_tokens_to_add();
                plan.requests.iter().map(|r| r.prompt_tokens.saturating_sub(special)).collect()
            });
            realign(&server, plan, &bodies, tok, texts, planned, concurrency(config)).await
        }
        _ => fit_all(&server, plan, config, &bodies, texts, first, log).await,
    };
    let note = summary(&outcome, plan, base);
    log(&note);
    plan.notes.push(note);
    if let Some(line) = server.stopped() {
        log(&line);
    }
    outcome
}

fn mismatch(server: usize, expected: usize) -> String {
    format!("WARNING: tokenizer mismatch (server={server}, expected={expected}), re-aligning prompts.")
}

/// vLLM's re-alignment: every prompt with more server tokens than the local tokenizer counts
/// (`local`, when the plan already holds those counts) is cut to that many; its planned count
/// stays.
async fn realign<S: TokenServer>(
    server: &Arc<S>,
    plan: &mut Plan,
    bodies: &BodyBuilder,
    tok: &Tokenizer,
    texts: Vec<String>,
    local: Option<Vec<u32>>,
    limit: usize,
) -> Alignment {
    let n = texts.len();
    let Some(targets) = local.or_else(|| raw_lengths(tok, &texts).ok()) else {
        return Alignment::Realigned { cut: 0, failed: n };
    };
    let items: Vec<(String, usize)> = texts.into_iter().zip(targets.into_iter().map(|t| t as usize)).collect();
    let results = each(server, items, limit, |server, _, (text, target)| async move {
        let ids = server.tokenize(&text, false).await?;
        if ids.len() <= target {
            return Ok(None);
        }
        server.detokenize(&ids[..target]).await.map(Some)
    })
    .await;
    let mut edits = Vec::new();
    let mut failed = 0;
    for (position, r) in results.into_iter().enumerate() {
        match r {
            Some(Ok(Some(prompt))) => {
                edits.push(PromptEdit { position, prompt, prompt_tokens: plan.requests[position].prompt_tokens });
            }
            Some(Ok(None)) => {}
            Some(Err(_)) | None => failed += 1,
        }
    }
    match plan.rewrite_prompts(bodies, &edits) {
        Ok(()) => Alignment::Realigned { cut: edits.len(), failed },
        Err(_) => Alignment::Realigned { cut: 0, failed: n },
    }
}

/// Without a local tokenizer: every prompt brought to its planned length as the server counts.
async fn fit_all<S: TokenServer>(
    server: &Arc<S>,
    plan: &mut Plan,
    config: &RunConfig,
    bodies: &BodyBuilder,
    texts: Vec<String>,
    first: Vec<u32>,
    log: &Logger,
) -> Alignment {
    let n = texts.len();
    // What the server adds around a prompt: its special tokens, and for chat the template.
    let specials = server.tokenize(&texts[0], true).await.ok().map(|ids| ids.len().saturating_sub(first.len()));
    let added = match plan.api {
        Api::Completions => specials,
        Api::Pooling(form) if form != PoolingForm::EmbeddingsChat => specials,
        Api::Chat | Api::Responses | Api::Messages | Api::Pooling(_) => match chat_messages(&plan.requests[0].body) {
            Some(m) => server.tokenize_chat(&m).await.ok().map(|c| c.saturating_sub(first.len())),
            None => None,
        },
    };
    // vLLM's random prompts leave room for the special tokens in `--random-input-len`.
    let in_length = match config.workload {
        WorkloadSpec::Random { .. } => specials.unwrap_or(0),
        _ => 0,
    };
    let targets: Vec<usize> =
        plan.requests.iter().map(|r| (r.prompt_tokens as usize).saturating_sub(in_length).max(1)).collect();
    if first.len() != targets[0] {
        log(&mismatch(first.len(), targets[0]));
    }
    let mut known = Some(first);
    let items: Vec<(String, usize, Option<Vec<u32>>)> =
        texts.into_iter().zip(&targets).map(|(text, &target)| (text, target, known.take())).collect();
    let results = each(server, items, concurrency(config), |server, i, (text, target, ids)| async move {
        fit(&*server, i, text, target, ids).await
    })
    .await;

    let (mut edits, mut off, mut uncounted) = (Vec::new(), 0, 0);
    for (position, r) in results.into_iter().enumerate() {
        let Some(fitted) = r.filter(|f| f.count.is_some()) else {
            uncounted += 1;
            continue;
        };
        let count = fitted.count.unwrap_or_default();
        if count != targets[position] {
            off += 1;
        }
        let tokens = u32::try_from(count + added.unwrap_or(0)).unwrap_or(u32::MAX);
        if fitted.changed {
            edits.push(PromptEdit { position, prompt: fitted.prompt, prompt_tokens: tokens });
        } else {
            plan.requests[position].prompt_tokens = tokens;
        }
    }
    let changed = edits.len();
    if plan.rewrite_prompts(bodies, &edits).is_err() {
        return Alignment::Fitted { changed: 0, off: n, uncounted: n };
    }
    if uncounted == 0 && added.is_some() {
        plan.token_counting = TokenCounting::Server { base_url: config.target.base_url.clone() };
        plan.notes.retain(|note| note != ESTIMATE_NOTE);
    }
    Alignment::Fitted { changed, off, uncounted }
}

/// One prompt after fitting: its text, whether that changed, and its length as the server
/// counts it (`None` when the server never counted it).
struct Fitted {
    prompt: String,
    changed: bool,
    count: Option<usize>,
}

/// Brings `prompt` to `target` server tokens: cut with `/detokenize`, lengthened with words
/// (chosen by `salt`), re-counted each time. A call that fails ends it with the last counted
/// text.
async fn fit<S: TokenServer>(server: &S, salt: usize, prompt: String, target: usize, ids: Option<Vec<u32>>) -> Fitted {
    let mut ids = match ids {
        Some(ids) => ids,
        None => match server.tokenize(&prompt, false).await {
            Ok(ids) => ids,
            Err(_) => return Fitted { prompt, changed: false, count: None },
        },
    };
    let mut current = prompt;
    let mut changed = false;
    for round in 0..MAX_ROUNDS {
        if ids.len() == target {
            break;
        }
        let candidate = if ids.len() > target {
            match server.detokenize(&ids[..target]).await {
                Ok(text) => text,
                Err(_) => break,
            }
        } else {
            format!("{current}{}", filler_words(salt.wrapping_add(round), target - ids.len()))
        };
        if candidate == current {
            break;
        }
        match server.tokenize(&candidate, false).await {
            Ok(new) => {
                ids = new;
                current = candidate;
                changed = true;
            }
            Err(_) => break,
        }
    }
    Fitted { prompt: current, changed, count: Some(ids.len()) }
}

/// The `messages` of a chat body, or a Responses body's `input` as the one user message it is.
fn chat_messages(body: &[u8]) -> Option<Value> {
    let body = serde_json::from_slice::<Value>(body).ok()?;
    match body.get("messages") {
        Some(m) => Some(m.clone()),
        // A Responses body's `input` text is one user message to the server's template.
        None => {
            body.get("input").filter(|i| i.is_string()).map(|i| serde_json::json!([{"role": "user", "content": i}]))
        }
    }
}

/// The summary line (also a plan note) of what the alignment did.
fn summary(outcome: &Alignment, plan: &Plan, base: &str) -> String {
    let n = plan.requests.len();
    match *outcome {
        Alignment::Realigned { cut, failed } => {
            let mut s = format!(
                "Prompts re-aligned to the server's tokenizer ({base}/tokenize): {cut} of {n} cut to their planned length"
            );
            if failed > 0 {
                s.push_str(&format!("; {failed} could not be checked and were kept as they were"));
            }
            s.push('.');
            s
        }
        Alignment::Fitted { changed, off, uncounted } => {
            let mut s = format!(
                "Prompt lengths aligned to the server's tokenizer ({base}/tokenize): {changed} of {n} prompts adjusted"
            );
            if off > 0 {
                s.push_str(&format!(
                    "; {off} did not reach their planned length in {MAX_ROUNDS} rounds and keep the length the server counts"
                ));
            }
            if matches!(plan.token_counting, TokenCounting::Server { .. }) {
                s.push_str("; prompt token counts are the server's, exact.");
            } else if uncounted > 0 {
                s.push_str(&format!("; the server did not count {uncounted}, so prompt token counts stay estimates."));
            } else {
                s.push_str(
                    "; the server did not say what it adds around a prompt, so prompt token counts stay estimates.",
                );
            }
            s
        }
        _ => String::new(),
    }
}

/// Runs `f` on every item, at most `limit` at a time; the results in item order, `None` for a
/// task that did not finish (it panicked).
async fn each<S, T, R, F, Fut>(server: &Arc<S>, items: Vec<T>, limit: usize, f: F) -> Vec<Option<R>>
where
    S: TokenServer,
    T: Send + 'static,
    R: Send + 'static,
    F: Fn(Arc<S>, usize, T) -> Fut,
    Fut: Future<Output = R> + Send + 'static,
{
    let mut out: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    let mut pending = items.into_iter().enumerate();
    let mut set = JoinSet::new();
    loop {
        while set.len() < limit.max(1) {
            let Some((i, item)) = pending.next() else { break };
            let task = f(Arc::clone(server), i, item);
            set.spawn(async move { (i, task.await) });
        }
        match set.join_next().await {
            Some(Ok((i, r))) => out[i] = Some(r),
            Some(Err(_)) => {}
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests;
