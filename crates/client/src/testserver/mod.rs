//! A scripted, in-process OpenAI-compatible server for tests, which records the truth.
//!
//! It binds `127.0.0.1:0`, answers `/v1/completions`, `/v1/chat/completions`, `/v1/responses`
//! and `/v1/messages` by streaming tokens on a per-request [`Script`] (TTFT, inter-chunk gaps,
//! tokens per chunk, where usage goes, the opening events, an in-band error, a non-2xx status, a connection broken
//! mid-stream), serves `/v1/models` and `/metrics`, `/tokenize` and `/detokenize` in the schema
//! of vLLM, SGLang or llama.cpp or in none ([`TokenizeSchema`], see `tokenize.rs`), and can
//! mistreat keep-alive the way real servers do ([`KeepAlive`]). For every request it records
//! when it arrived and when each token chunk was handed to the connection, on the same monotonic clock as the client, so tests can
//! compare measurements with the truth. It stops by itself after `max_requests` scripted
//! requests have been answered or after `lifetime`, whichever comes first, and when dropped.

mod body;
mod tokenize;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use servebench_core::config::Api;
use servebench_core::protocol::ChunkRenderer;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::{JoinHandle, JoinSet};

use body::{ScriptedBody, plan_steps};
pub use tokenize::TokenizeSchema;
use tokenize::Words;

/// Where the token counts go in a stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UsagePlacement {
    /// No usage at all (for Responses and Messages: no terminal events, a broken stream).
    None,
    /// A final `choices: []` chunk (vLLM, SGLang); Responses' `response.completed`; Messages'
    /// `message_delta` and `message_stop`.
    #[default]
    Separate,
    /// Inside the last token chunk (llama.cpp's completions); Responses' last delta and
    /// `response.completed` in one write.
    InLastChunk,
}

/// How the server treats keep-alive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeepAlive {
    /// Connections are kept open between requests.
    #[default]
    Keep,
    /// Says `Connection: keep-alive`, then closes the connection after every response
    /// (llama.cpp's `llama-server`).
    CloseAfterResponse,
    /// Answers the first request of a connection; a later request on the same connection is
    /// read and the connection closed without an answer (the race a pooled client must survive).
    DropSecondRequest,
}

/// How to answer one request.
#[derive(Clone, Debug)]
pub struct Script {
    /// 200 streams the tokens; anything else answers with that status and an error body.
    pub status: u16,
    /// From the request's arrival to the first token chunk.
    pub ttft: Duration,
    /// Between token chunks.
    pub itl: Duration,
    /// Tokens in the whole answer.
    pub tokens: u32,
    /// Tokens carried by each chunk (the last one may carry fewer).
    pub tokens_per_chunk: u32,
    pub usage: UsagePlacement,
    pub prompt_tokens: u32,
    /// Chat: open with the `{"role":"assistant","content":""}` chunk, sent on arrival;
    /// Responses: with `response.created` and the other opening events; Messages: with
    /// `message_start` and `content_block_start`.
    pub opening: bool,
    /// Send an in-band error event instead of chunk `n` (0-based; `tokens` chunks: after all).
    pub error_after: Option<u32>,
    /// Break the connection instead of sending chunk `n`.
    pub close_after: Option<u32>,
    /// Chat and Responses: the first this many chunks carry reasoning (`reasoning_content`, or
    /// `response.reasoning_text.delta`), the rest the answer.
    pub reasoning_chunks: u32,
}

impl Default for Script {
    fn default() -> Self {
        Self {
            status: 200,
            ttft: Duration::from_millis(20),
            itl: Duration::from_millis(5),
            tokens: 10,
            tokens_per_chunk: 1,
            usage: UsagePlacement::Separate,
            prompt_tokens: 8,
            opening: true,
            error_after: None,
            close_after: None,
            reasoning_chunks: 0,
        }
    }
}

/// What a script sees of a request.
#[derive(Debug)]
pub struct RequestInfo<'a> {
    /// Arrival order, from 0, over all requests the server saw.
    pub seq: usize,
    pub path: &'a str,
    pub request_id: Option<&'a str>,
    pub body: &'a [u8],
}

/// Chooses the script for each request.
pub type ScriptFn = Arc<dyn Fn(&RequestInfo<'_>) -> Script + Send + Sync>;

/// The server's configuration.
#[derive(Clone)]
pub struct TestServerConfig {
    pub script: ScriptFn,
    pub keep_alive: KeepAlive,
    /// Stop after this many completions/chat requests have been answered.
    pub max_requests: usize,
    /// Stop after this long in any case.
    pub lifetime: Duration,
    /// The model `/v1/models` lists and chunks name.
    pub model: String,
    /// The schema of `/tokenize` and `/detokenize` (none by default: they answer 404).
    pub tokenize: TokenizeSchema,
}

impl TestServerConfig {
    /// A server answering every request with `script`, stopping after `max_requests` or 60 s.
    pub fn new(max_requests: usize, script: impl Fn(&RequestInfo<'_>) -> Script + Send + Sync + 'static) -> Self {
        Self {
            script: Arc::new(script),
            keep_alive: KeepAlive::Keep,
            max_requests,
            lifetime: Duration::from_secs(60),
            model: "test-model".to_string(),
            tokenize: TokenizeSchema::None,
        }
    }
}

/// What happened to one request, as the server saw it.
#[derive(Clone, Debug)]
pub struct RequestTruth {
    pub seq: usize,
    pub path: String,
    pub request_id: Option<String>,
    /// Which connection it came on (numbered from 0 in accept order).
    pub connection: u64,
    pub arrived: Instant,
    /// 0 when the request was dropped without an answer.
    pub status: u16,
    /// When each token chunk was handed to the connection.
    pub token_chunks: Vec<Instant>,
    /// When the response ended (or was abandoned).
    pub ended: Instant,
}

struct State {
    config: TestServerConfig,
    seq: AtomicUsize,
    answered: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    tokenize_in_flight: AtomicUsize,
    max_tokenize_in_flight: AtomicUsize,
    words: Words,
    connections: AtomicU64,
    truth: Mutex<Vec<RequestTruth>>,
    shutdown: watch::Sender<bool>,
}

impl State {
    fn record(&self, truth: RequestTruth) {
        self.truth.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(truth);
    }

    fn answered_one(&self) {
        if self.answered.fetch_add(1, Ordering::SeqCst) + 1 >= self.config.max_requests {
            self.shutdown.send_replace(true);
        }
    }
}

struct Connection {
    id: u64,
    served: AtomicUsize,
    close: Notify,
}

/// A running test server; stops when dropped.
pub struct TestServer {
    addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl TestServer {
    /// Binds a loopback port and starts serving `config`.
    pub async fn start(config: TestServerConfig) -> std::io::Result<Self> {
        // A deep accept queue (like uvicorn's 2048), so a burst of connections is not met
        // with dropped SYNs and one-second retransmits.
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let listener = socket.listen(4096)?;
        let addr = listener.local_addr()?;
        let lifetime = config.lifetime;
        let state = Arc::new(State {
            config,
            seq: AtomicUsize::new(0),
            answered: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            tokenize_in_flight: AtomicUsize::new(0),
            max_tokenize_in_flight: AtomicUsize::new(0),
            words: Words::default(),
            connections: AtomicU64::new(0),
            truth: Mutex::new(Vec::new()),
            shutdown: watch::channel(false).0,
        });
        let task = tokio::spawn({
            let state = Arc::clone(&state);
            async move {
                let _ = tokio::time::timeout(lifetime, serve(listener, state)).await;
            }
        });
        Ok(Self { addr, state, task })
    }

    /// The loopback address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request seen so far, in arrival order.
    pub fn truth(&self) -> Vec<RequestTruth> {
        let mut t = self.state.truth.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        t.sort_by_key(|r| r.seq);
        t
    }

    /// The most scripted requests that were being answered at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// The most `/tokenize`-family calls that were being answered at the same time.
    pub fn max_tokenize_in_flight(&self) -> usize {
        self.state.max_tokenize_in_flight.load(Ordering::SeqCst)
    }

    /// The token ids of `text` as this server's `/tokenize` counts them.
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        self.state.words.ids(text)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// Waits until the server has stopped (after `max_requests` or its lifetime).
    pub async fn stopped(mut self) -> Vec<RequestTruth> {
        let _ = (&mut self.task).await;
        self.truth()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(listener: TcpListener, state: Arc<State>) {
    let mut shutdown = state.shutdown.subscribe();
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    conns.spawn(serve_connection(stream, Arc::clone(&state)));
                }
            }
            _ = shutdown.wait_for(|s| *s) => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    // Open connections finish their responses and close (they were told to shut down).
    while conns.join_next().await.is_some() {}
}

async fn serve_connection(stream: TcpStream, state: Arc<State>) {
    let _ = stream.set_nodelay(true);
    let conn = Arc::new(Connection {
        id: state.connections.fetch_add(1, Ordering::SeqCst),
        served: AtomicUsize::new(0),
        close: Notify::new(),
    });
    let mut shutdown = state.shutdown.subscribe();
    let service = {
        let (state, conn) = (Arc::clone(&state), Arc::clone(&conn));
        service_fn(move |req| handle(Arc::clone(&state), Arc::clone(&conn), req))
    };
    let http = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    let mut http = std::pin::pin!(http);
    let mut closing = false;
    loop {
        tokio::select! {
            _ = http.as_mut() => break,
            () = conn.close.notified(), if !closing => {
                http.as_mut().graceful_shutdown();
                closing = true;
            }
            _ = shutdown.wait_for(|s| *s), if !closing => {
                http.as_mut().graceful_shutdown();
                closing = true;
            }
        }
    }
}

/// A request the server reads and then answers by closing the connection.
#[derive(Debug, thiserror::Error)]
#[error("scripted: connection closed without an answer")]
struct DropConnection;

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

async fn handle(
    state: Arc<State>,
    conn: Arc<Connection>,
    req: Request<Incoming>,
) -> Result<Response<Body>, DropConnection> {
    let arrived = Instant::now();
    let seq = state.seq.fetch_add(1, Ordering::SeqCst);
    let nth_on_connection = conn.served.fetch_add(1, Ordering::SeqCst);
    let path = req.uri().path().to_string();
    let request_id = req.headers().get("x-request-id").and_then(|v| v.to_str().ok()).map(str::to_string);
    let truth = RequestTruth {
        seq,
        path: path.clone(),
        request_id,
        connection: conn.id,
        arrived,
        status: 0,
        token_chunks: Vec::new(),
        ended: arrived,
    };
    // A server that closes after every response never reads a second request; one that
    // arrives before the close took effect is dropped the same way.
    let drops_reuse = matches!(state.config.keep_alive, KeepAlive::DropSecondRequest | KeepAlive::CloseAfterResponse);
    if drops_reuse && nth_on_connection > 0 {
        state.record(truth);
        return Err(DropConnection);
    }
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    if let Some((status, text)) = tokenize::answer(state.config.tokenize, &state.words, &path, &body) {
        let now = state.tokenize_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.max_tokenize_in_flight.fetch_max(now, Ordering::SeqCst);
        // Long enough for calls sent together to overlap.
        tokio::time::sleep(Duration::from_millis(2)).await;
        state.tokenize_in_flight.fetch_sub(1, Ordering::SeqCst);
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let resp = simple(&state, truth, status, "application/json", text);
        if state.config.keep_alive == KeepAlive::CloseAfterResponse {
            conn.close.notify_one();
        }
        return Ok(resp);
    }
    let api = match path.as_str() {
        "/v1/completions" => Api::Completions,
        "/v1/chat/completions" => Api::Chat,
        "/v1/responses" => Api::Responses,
        "/v1/messages" => Api::Messages,
        "/v1/models" => return Ok(simple(&state, truth, StatusCode::OK, "application/json", models_json(&state))),
        "/metrics" => {
            return Ok(simple(&state, truth, StatusCode::OK, "text/plain; version=0.0.4", metrics_text(&state)));
        }
        _ => {
            let msg = r#"{"detail":"Not Found"}"#.to_string();
            return Ok(simple(&state, truth, StatusCode::NOT_FOUND, "application/json", msg));
        }
    };
    let script =
        (state.config.script)(&RequestInfo { seq, path: &path, request_id: truth.request_id.as_deref(), body: &body });
    let in_flight = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.max_in_flight.fetch_max(in_flight, Ordering::SeqCst);
    if script.status != 200 {
        let status = StatusCode::from_u16(script.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let msg = format!(
            r#"{{"object":"error","message":"scripted failure","type":"BadRequestError","param":null,"code":{}}}"#,
            status.as_u16()
        );
        let resp = simple(&state, truth, status, "application/json", msg);
        state.in_flight.fetch_sub(1, Ordering::SeqCst);
        state.answered_one();
        return Ok(resp);
    }
    let id = match api {
        Api::Responses => format!("resp_{seq}"),
        Api::Messages => format!("msg_{seq}"),
        // The test server streams every answer, a pooling request's too.
        Api::Completions | Api::Chat | Api::Pooling(_) => format!("cmpl-{seq}"),
    };
    let renderer = ChunkRenderer::new(api, &id, 1_767_225_600, &state.config.model);
    let steps = plan_steps(&script, arrived, &renderer);
    let on_end = {
        let (state, conn) = (Arc::clone(&state), Arc::clone(&conn));
        Box::new(move |token_chunks: Vec<Instant>| {
            state.record(RequestTruth { status: 200, token_chunks, ended: Instant::now(), ..truth });
            state.in_flight.fetch_sub(1, Ordering::SeqCst);
            state.answered_one();
            if state.config.keep_alive == KeepAlive::CloseAfterResponse {
                conn.close.notify_one();
            }
        })
    };
    let mut resp = Response::new(ScriptedBody::new(steps, on_end).boxed_unsync());
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-cache"));
    if state.config.keep_alive == KeepAlive::CloseAfterResponse {
        headers.insert(header::CONNECTION, header::HeaderValue::from_static("keep-alive"));
    }
    Ok(resp)
}

fn simple(
    state: &State,
    truth: RequestTruth,
    status: StatusCode,
    content_type: &'static str,
    body: String,
) -> Response<Body> {
    state.record(RequestTruth { status: status.as_u16(), ended: Instant::now(), ..truth });
    let mut resp =
        Response::new(Full::new(Bytes::from(body)).map_err(|never: Infallible| match never {}).boxed_unsync());
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(content_type));
    resp
}

fn models_json(state: &State) -> String {
    serde_json::json!({
        "object": "list",
        "data": [{
            "id": state.config.model,
            "object": "model",
            "created": 0,
            "owned_by": "servebench",
            "root": format!("servebench/{}", state.config.model),
            "parent": null,
            "max_model_len": 4096,
        }]
    })
    .to_string()
}

fn metrics_text(state: &State) -> String {
    let model = &state.config.model;
    format!(
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n\
         # TYPE vllm:num_requests_running gauge\n\
         vllm:num_requests_running{{model_name=\"{model}\"}} {}\n\
         # HELP vllm:request_success_total Count of successfully processed requests.\n\
         # TYPE vllm:request_success_total counter\n\
         vllm:request_success_total{{model_name=\"{model}\"}} {}\n",
        state.in_flight.load(Ordering::SeqCst),
        state.answered.load(Ordering::SeqCst),
    )
}
