//! The simulator behind an OpenAI-compatible HTTP API, answering in real time.
//!
//! [`start`] binds, starts the pacer and the HTTP server, and returns a [`SimServer`]. The
//! endpoints speak vLLM's dialect: `POST /v1/completions` and `/v1/chat/completions` (streamed
//! as vLLM's SSE chunks, rendered by [`servebench_core::protocol::ChunkRenderer`], or whole),
//! `GET /v1/models`, `/health`, `/version`, `/metrics` (vLLM's Prometheus names), and
//! `POST /tokenize` / `/detokenize`. [`ServerOptions::dialect`] makes it answer as llama.cpp's
//! `llama-server` or SGLang do instead, where those differ (see [`Dialect`]).
//!
//! # Timing
//!
//! One pacer thread owns the [`Engine`] and maps its virtual clock onto real
//! time (engine nanosecond `t` is `t0 + t`). Handlers stamp each request when it reaches the
//! server and send it to the pacer; the pacer runs the engine step by step, waits until each
//! step's end and then releases all the tokens of that step at once. A request is visible to
//! the scheduler the stack's API delay after it arrived, so timings match
//! [`predict`](crate::predict()) for the same plan, up to the network and the client; requests
//! of one burst that reach the server within 2 ms of each other count as arriving together
//! (see the pacer's notes). A stream whose client disconnects cancels its request, freeing its
//! KV blocks. If the machine cannot keep up and the pacer falls 20 ms behind, the simulated
//! clock is moved up to real time and `servebench:pacer_resyncs_total` counts it.
//!
//! Requests honour `max_tokens` (`max_completion_tokens` for chat), `ignore_eos`, `stream` and
//! `stream_options.include_usage`. A completions `prompt` that is a list of texts or of token-id
//! lists is a batch, and `n` (completions and chat) asks for several samples: each is a request
//! of its own to the engine, answered as one choice of the response (see `choices.rs`). Token
//! ids must be below the vocabulary's size. `logprobs`, `top_logprobs` and `echo` are honoured
//! with synthetic values in OpenAI's shapes (see `logprobs.rs`). Sampling parameters (temperature, stop, ...)
//! are held to vLLM's ranges ([`crate::sampling`]: one outside is a 400, as vLLM answers it;
//! not in llama.cpp's dialect, which takes any) and otherwise have no effect; whether a request stops before `max_tokens` is up to the
//! engine's EOS model (the `eos` serving option).
//!
//! # Token counts
//!
//! With a tokenizer ([`ServerOptions::tokenizer`]), prompts are encoded for real (chat
//! template applied), so `usage.prompt_tokens` is exact and the prefix cache sees real tokens;
//! generated text is made of real vocabulary tokens, one per reported completion token.
//! Without one, a prompt counts one token per whitespace-separated word (the mapping `predict`
//! uses), and each generated token is one synthetic word. The server says which: the
//! `x-servebench-token-count: tokenizer|estimate` header on every generation and `/tokenize`
//! answer, the `servebench.token_count` field of `/v1/models`, and [`SimServer::startup_line`].

mod api;
#[cfg(test)]
mod batch_tests;
mod choices;
mod dialect;
#[cfg(test)]
mod dialect_tests;
#[cfg(test)]
mod input_tests;
mod logprobs;
#[cfg(test)]
mod logprobs_tests;
mod metrics;
mod pacer;
mod pooling;
#[cfg(test)]
mod pooling_tests;
#[cfg(test)]
mod spec_tests;
mod stream;
#[cfg(test)]
mod tests;
mod text;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use servebench_workload::Tokenizer;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use dialect::{Dialect, UnknownDialect};
pub use text::TokenCount;

use crate::engine::Engine;
use crate::error::SimError;
use crate::setup::SimSetup;
use api::Shared;
use pacer::{Pacer, ToPacer};
use text::TextModel;

/// The response header that says how `usage.prompt_tokens` was counted.
pub const TOKEN_COUNT_HEADER: &str = "x-servebench-token-count";

/// Connections waiting to be accepted: a burst of hundreds of clients must not meet dropped
/// SYNs (and their one-second retransmits).
const LISTEN_BACKLOG: u32 = 4096;

/// How long [`SimServer::shutdown`] lets open connections close before cutting them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How to serve a simulated setup.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Address to listen on, e.g. `127.0.0.1`.
    pub host: String,
    /// 0 picks a free port.
    pub port: u16,
    /// The model name clients send; default: the simulated model's id (e.g. `Qwen/Qwen3-8B`).
    pub served_model_name: Option<String>,
    /// Counts prompts exactly and writes real tokens; without it counts are estimates.
    pub tokenizer: Option<Arc<Tokenizer>>,
    /// Seeds the engine (with the setup's own seed) and the generated text.
    pub seed: u64,
    /// The server whose API it imitates where servers differ.
    pub dialect: Dialect,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 0,
            served_model_name: None,
            tokenizer: None,
            seed: 0,
            dialect: Dialect::Vllm,
        }
    }
}

/// A running simulated server. Dropping it stops it abruptly; [`SimServer::shutdown`] stops it
/// gracefully.
pub struct SimServer {
    base_url: String,
    addr: SocketAddr,
    model_name: String,
    token_count: TokenCount,
    tokenizer_name: Option<String>,
    dialect: Dialect,
    pacer: Sender<ToPacer>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl SimServer {
    /// `http://HOST:PORT`, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The name requests must give as `model`.
    pub fn model_name(&self) -> &str {
        &self.model_name
    }

    /// How `usage.prompt_tokens` is counted.
    pub fn token_count(&self) -> TokenCount {
        self.token_count
    }

    /// One line saying where the server listens and how it counts tokens.
    pub fn startup_line(&self) -> String {
        let counting = match (&self.token_count, &self.tokenizer_name) {
            (TokenCount::Tokenizer, Some(name)) => format!("prompt tokens counted with the tokenizer {name}"),
            _ => "prompt tokens estimated at one per word; pass a tokenizer for exact counts".to_string(),
        };
        let dialect = match self.dialect {
            Dialect::Vllm => String::new(),
            d => format!(" in {d}'s dialect"),
        };
        format!("Simulated {} serving at {}{dialect}: {counting}", self.model_name, self.base_url)
    }

    /// Stops accepting, aborts the requests in flight (their streams end with an error event),
    /// lets connections close for a few seconds, then stops.
    pub async fn shutdown(mut self) {
        let _ = self.pacer.send(ToPacer::Shutdown);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(SHUTDOWN_GRACE, &mut task).await.is_err()
        {
            task.abort();
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        let _ = self.pacer.send(ToPacer::Shutdown);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Binds `options.host:options.port`, starts the pacer and the HTTP server, and returns.
pub async fn start(setup: SimSetup, options: ServerOptions) -> Result<SimServer, SimError> {
    if setup.options.bench_client != crate::options::BenchClient::Servebench {
        return Err(SimError::BadOption {
            key: "bench-client".into(),
            value: "vllm".into(),
            expected: "it is `sim predict`'s stand-in for a benchmark client; a served twin is timed by the client \
                       that calls it: leave it out"
                .into(),
        });
    }
    let listener = listen(&options.host, options.port).await?;
    let addr = listener.local_addr().map_err(|e| listen_error(&options.host, options.port, &e))?;
    let (shared, pacer) = spawn_engine(&setup, options)?;
    let base_url = match addr {
        SocketAddr::V4(a) if a.ip().is_unspecified() => format!("http://127.0.0.1:{}", a.port()),
        SocketAddr::V6(a) if a.ip().is_unspecified() => format!("http://[::1]:{}", a.port()),
        a => format!("http://{a}"),
    };
    let model_name = shared.model_name.clone();
    let token_count = shared.text.token_count();
    let tokenizer_name = shared.text.tokenizer().map(|t| t.name().to_string());
    let dialect = shared.dialect;
    let pacer_tx = shared.pacer.clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let app = api::router(shared);
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        // Every SSE frame goes out as soon as it is written.
        let _ = tcp.set_nodelay(true);
    });
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await;
    });
    // The pacer thread ends by itself once told to, or once every sender is gone.
    drop(pacer);
    Ok(SimServer {
        base_url,
        addr,
        model_name,
        token_count,
        tokenizer_name,
        dialect,
        pacer: pacer_tx,
        stop: Some(stop),
        task: Some(task),
    })
}

/// The engine on its pacer thread, and what the handlers share.
fn spawn_engine(
    setup: &SimSetup,
    options: ServerOptions,
) -> Result<(Arc<Shared>, std::thread::JoinHandle<()>), SimError> {
    let model_name = match options.served_model_name {
        Some(name) if name.trim().is_empty() => {
            return Err(SimError::BadOption {
                key: "served-model-name".into(),
                value: name,
                expected: format!(
                    "the name clients send as `model` cannot be empty; pass a name such as --served-model-name my-model, \
                     or leave the flag out to serve as {}",
                    setup.model.id
                ),
            });
        }
        Some(name) => name,
        None => setup.model.id.clone(),
    };
    let vocab = options.tokenizer.as_deref().map_or(0, Tokenizer::vocab_size).max(setup.model.vocab);
    let engine = Engine::new(setup, options.seed ^ setup.options.seed);
    let (tx, rx) = std::sync::mpsc::channel();
    let t0 = Instant::now();
    let pacer = std::thread::Builder::new()
        .name("sim-pacer".into())
        .spawn(move || Pacer::new(engine, t0).run(rx))
        .map_err(|e| SimError::Conflict(format!("cannot start the simulator's pacer thread: {e}")))?;
    let shared = Arc::new(Shared {
        model_name,
        root: setup.model.id.clone(),
        hardware: setup.hardware.name.clone(),
        max_model_len: setup.max_model_len,
        vocab,
        created: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        text: Arc::new(TextModel::new(options.tokenizer)),
        pacer: tx,
        next_tag: AtomicU64::new(0),
        seed: options.seed,
        dialect: options.dialect,
        tower: crate::media::Tower::of(setup),
        embedding_dim: setup.model.hidden,
        convert: setup.options.convert,
    });
    Ok((shared, pacer))
}

/// A listening socket with a deep accept queue.
async fn listen(host: &str, port: u16) -> Result<TcpListener, SimError> {
    let addr = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| listen_error(host, port, &e))?
        .next()
        .ok_or_else(|| listen_error(host, port, &std::io::Error::other("the host name has no address")))?;
    let socket = if addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() };
    let listener = socket
        .and_then(|s| {
            s.set_reuseaddr(true)?;
            s.bind(addr)?;
            s.listen(LISTEN_BACKLOG)
        })
        .map_err(|e| listen_error(host, port, &e))?;
    Ok(listener)
}

fn listen_error(host: &str, port: u16, e: &std::io::Error) -> SimError {
    SimError::Listen { address: format!("{host}:{port}"), message: e.to_string() }
}
