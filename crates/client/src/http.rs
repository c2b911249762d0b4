//! The only network code: HTTP/1.1 with hyper over TCP, or over TLS for `https://` targets,
//! one connection per request in flight.
//!
//! Connections are kept in a small pool (sized to the concurrency) and reused, with
//! `TCP_NODELAY` set. A pooled connection the server has closed is detected and replaced
//! before use. When a request fails on a reused connection before a single response byte came
//! back (a server that answers `Connection: keep-alive` and closes anyway), it is sent once more
//! on a fresh connection and the response says so ([`Response::retried`]); a request is never
//! sent again once the server has answered anything.
//!
//! A new connection is made inside the request that needs it, so its TCP connect, and for
//! https its TLS handshake (see `http/tls.rs`), count in that request's times, as in vLLM.
//!
//! Proxies follow Python's conventions, as vLLM's client does (see `proxy.rs`): `http_proxy`
//! for http targets, which are sent to the proxy in absolute form; `https_proxy` for https
//! targets, reached through a `CONNECT` tunnel (see `http/tunnel.rs`) with TLS end to end;
//! `no_proxy` for both, and loopback targets always directly.
//!
//! The pool's idle list is the only lock, taken when a request starts and when its response
//! ends, never per chunk.

mod tls;
mod tunnel;

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HOST, PROXY_AUTHORIZATION, USER_AGENT};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OnceCell;

use crate::proxy::{Proxy, proxy_for, split_host_port};
use tls::Tls;

/// A target or option that cannot be used; reported before anything is sent.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("invalid URL {url:?}: {reason}; give an http:// or https:// URL such as http://127.0.0.1:8000")]
    InvalidUrl { url: String, reason: String },
    #[error("TLS cannot be set up for {url}: {reason}; benchmark the server over http:// instead")]
    Tls { url: String, reason: String },
    #[error("invalid header {name:?}: {reason}; pass --header NAME=VALUE with a valid name and value")]
    InvalidHeader { name: String, reason: String },
    #[error("invalid proxy setting {var}={value:?}: {reason}; fix or unset {var}")]
    InvalidProxy { var: String, value: String, reason: String },
}

/// Why an exchange failed before a response arrived.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("cannot resolve {host}: {source}")]
    Resolve { host: String, source: io::Error },
    #[error("cannot connect to {addr}: {source}")]
    Connect { addr: String, source: io::Error },
    #[error("TLS handshake with {host} ({addr}) failed: {reason}")]
    Tls { host: String, addr: String, reason: String },
    #[error("the proxy {proxy} did not open a tunnel to {target}: {reason}")]
    Tunnel { proxy: String, target: String, reason: String },
    #[error("connection failed before a response: {}", with_causes(.0))]
    Exchange(hyper::Error),
}

/// A pooled client for one origin (scheme, host and port).
#[derive(Clone, Debug)]
pub struct HttpClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    host: String,
    port: u16,
    /// The `Host` header: the URL's authority.
    authority: HeaderValue,
    /// `http_proxy` for an http target, `https_proxy` (a `CONNECT` tunnel) for an https one.
    proxy: Option<Proxy>,
    /// Set for https targets.
    tls: Option<Tls>,
    addrs: OnceCell<Vec<SocketAddr>>,
    headers: HeaderMap,
    idle: Mutex<Vec<Conn>>,
    max_idle: usize,
}

#[derive(Debug)]
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    /// Bytes read from the socket so far: tells whether a failed request got any answer.
    read: Arc<AtomicU64>,
    /// Requests this connection has completed.
    served: u32,
    /// How long it took to open, until its first request takes it.
    opened: Option<Opened>,
}

/// How a new connection was opened: the TCP connect, then TLS (with any proxy tunnel), µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Opened {
    pub connect_us: u32,
    pub tls_us: Option<u32>,
}

fn micros(d: std::time::Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

impl HttpClient {
    /// A client for the origin of `url` (e.g. the run's `base_url`). `headers` go with every
    /// request, after `Authorization` from the caller's list; `pool_size` is how many idle
    /// connections are kept (the concurrency). `insecure` (`--insecure`) accepts any
    /// certificate from an https server; it changes nothing for http.
    pub fn new(url: &str, headers: &[(String, String)], pool_size: usize, insecure: bool) -> Result<Self, HttpError> {
        Self::with_env(url, headers, pool_size, insecure, |k| std::env::var(k).ok())
    }

    /// As [`HttpClient::new`], with the environment (for proxy settings) given explicitly.
    pub fn with_env(
        url: &str,
        headers: &[(String, String)],
        pool_size: usize,
        insecure: bool,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, HttpError> {
        Self::build_client(url, headers, pool_size, env, |host| Tls::new(host, insecure))
    }

    /// As [`HttpClient::with_env`], trusting only `roots` (tests of certificate checks).
    #[cfg(test)]
    fn with_roots(url: &str, roots: rustls::RootCertStore) -> Result<Self, HttpError> {
        Self::build_client(url, &[], 1, |_| None, |host| Tls::with_roots(host, roots))
    }

    fn build_client(
        url: &str,
        headers: &[(String, String)],
        pool_size: usize,
        env: impl Fn(&str) -> Option<String>,
        tls: impl FnOnce(&str) -> Result<Tls, String>,
    ) -> Result<Self, HttpError> {
        let uri = parse_url(url)?;
        let https = is_https(&uri);
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        let (host, port) = split_host_port(authority)
            .ok_or_else(|| HttpError::InvalidUrl { url: url.to_string(), reason: "no host".to_string() })?;
        let port = port.unwrap_or(if https { 443 } else { 80 });
        let mut map = HeaderMap::new();
        map.insert(USER_AGENT, HeaderValue::from_static(concat!("servebench/", env!("CARGO_PKG_VERSION"))));
        for (name, value) in headers {
            let invalid = |reason: String| HttpError::InvalidHeader { name: name.clone(), reason };
            let n = HeaderName::try_from(name.trim()).map_err(|e| invalid(e.to_string()))?;
            let v = HeaderValue::try_from(value.trim()).map_err(|e| invalid(e.to_string()))?;
            map.insert(n, v);
        }
        let tls = if https {
            Some(tls(&host).map_err(|reason| HttpError::Tls { url: url.to_string(), reason })?)
        } else {
            None
        };
        let proxy = proxy_for(&host, port, https, env)?;
        Ok(Self {
            inner: Arc::new(Inner {
                authority: HeaderValue::try_from(authority)
                    .map_err(|e| HttpError::InvalidUrl { url: url.to_string(), reason: e.to_string() })?,
                host,
                port,
                proxy,
                tls,
                addrs: OnceCell::new(),
                headers: map,
                idle: Mutex::new(Vec::with_capacity(pool_size.min(65_536))),
                max_idle: pool_size.max(1),
            }),
        })
    }

    /// Whether requests go through an HTTP proxy (forwarded, or tunnelled for https).
    pub fn via_proxy(&self) -> bool {
        self.inner.proxy.is_some()
    }

    /// The proxy that forwards plain-http requests (not a tunnel, which sees no request).
    fn forwarding_proxy(&self) -> Option<&Proxy> {
        self.inner.proxy.as_ref().filter(|_| self.inner.tls.is_none())
    }

    /// The request target for `url`, a URL on this client's origin: origin-form (`/v1/…`)
    /// when direct or tunnelled, absolute-form through a forwarding proxy.
    pub fn target(&self, url: &str) -> Result<Uri, HttpError> {
        let uri = parse_url(url)?;
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let target = if self.forwarding_proxy().is_some() {
            format!("http://{}{path}", uri.authority().map(|a| a.as_str()).unwrap_or_default())
        } else {
            path.to_string()
        };
        Uri::try_from(target).map_err(|e| HttpError::InvalidUrl { url: url.to_string(), reason: e.to_string() })
    }

    /// Sends one request and returns once the response head has arrived.
    pub async fn send(
        &self,
        method: Method,
        target: &Uri,
        body: Option<Bytes>,
        extra: Option<(HeaderName, HeaderValue)>,
    ) -> Result<Response, SendError> {
        let build = || self.build(method.clone(), target, body.clone(), extra.clone());
        let mut conn = self.checkout().await?;
        let reused = conn.served > 0;
        let read_before = conn.read.load(Ordering::Relaxed);
        match conn.sender.try_send_request(build()).await {
            Ok(resp) => Ok(self.response(resp, conn, false)),
            Err(mut e) => {
                // Never written (the connection closed first): sending it now is not a retry.
                let unsent = e.take_message().is_some();
                let no_answer = conn.read.load(Ordering::Relaxed) == read_before;
                drop(conn);
                let resend = unsent || (reused && no_answer);
                if !resend {
                    return Err(SendError::Exchange(e.into_error()));
                }
                let mut fresh = self.dial().await?;
                let resp = fresh.sender.send_request(build()).await.map_err(SendError::Exchange)?;
                Ok(self.response(resp, fresh, !unsent))
            }
        }
    }

    fn build(
        &self,
        method: Method,
        target: &Uri,
        body: Option<Bytes>,
        extra: Option<(HeaderName, HeaderValue)>,
    ) -> Request<Full<Bytes>> {
        let has_body = body.is_some();
        let mut req = Request::new(Full::new(body.unwrap_or_default()));
        *req.method_mut() = method;
        *req.uri_mut() = target.clone();
        let headers = req.headers_mut();
        headers.reserve(self.inner.headers.len() + 4);
        headers.insert(HOST, self.inner.authority.clone());
        if has_body {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        for (name, value) in &self.inner.headers {
            headers.insert(name, value.clone());
        }
        if let Some(auth) = self.forwarding_proxy().and_then(|p| p.authorization.clone()) {
            headers.insert(PROXY_AUTHORIZATION, auth);
        }
        if let Some((name, value)) = extra {
            headers.insert(name, value);
        }
        req
    }

    fn response(&self, resp: http::Response<Incoming>, mut conn: Conn, retried: bool) -> Response {
        let (parts, body) = resp.into_parts();
        let opened = conn.opened.take();
        let reason = parts
            .extensions
            .get::<hyper::ext::ReasonPhrase>()
            .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned());
        Response { status: parts.status, reason, retried, opened, body, conn: Some(conn), client: self.clone() }
    }

    /// An idle pooled connection that is still open, or a new one. The most recently used
    /// connection that is ready right now is preferred (one whose last response is still
    /// settling would cost a wait, one idle for long is likelier to be closed by the server).
    async fn checkout(&self) -> Result<Conn, SendError> {
        loop {
            let pooled = {
                let mut idle = lock(&self.inner.idle);
                match idle.iter().rposition(|c| c.sender.is_ready() && !c.sender.is_closed()) {
                    Some(i) => idle.swap_remove(i),
                    None => match idle.pop() {
                        Some(c) => c,
                        None => break,
                    },
                }
            };
            let mut conn = pooled;
            if conn.sender.ready().await.is_ok() {
                return Ok(conn);
            }
        }
        self.dial().await
    }

    fn release(&self, mut conn: Conn) {
        conn.served = conn.served.saturating_add(1);
        if conn.sender.is_closed() {
            return;
        }
        let mut idle = lock(&self.inner.idle);
        if idle.len() >= self.inner.max_idle {
            idle.retain(|c| !c.sender.is_closed());
        }
        if idle.len() < self.inner.max_idle {
            idle.push(conn);
        }
    }

    async fn dial(&self) -> Result<Conn, SendError> {
        let addrs = self.resolve().await?;
        let mut last = None;
        for addr in addrs {
            let began = std::time::Instant::now();
            match TcpStream::connect(addr).await {
                Ok(stream) => {
                    let connect_us = micros(began.elapsed());
                    let mut conn = self.open(stream, addr).await?;
                    let tls_us = self.inner.tls.is_some().then(|| micros(began.elapsed()).saturating_sub(connect_us));
                    conn.opened = Some(Opened { connect_us, tls_us });
                    return Ok(conn);
                }
                Err(e) => last = Some((addr, e)),
            }
        }
        let (addr, source) =
            last.map_or_else(|| (self.connect_host(), io::Error::other("no addresses")), |(a, e)| (a.to_string(), e));
        Err(SendError::Connect { addr, source })
    }

    /// HTTP/1.1 on a new TCP connection: directly, or through the proxy's tunnel and TLS.
    async fn open(&self, mut stream: TcpStream, addr: SocketAddr) -> Result<Conn, SendError> {
        // Nagle's algorithm would hold small request writes back; failure to disable it only
        // costs latency, so it is not an error.
        let _ = stream.set_nodelay(true);
        let Some(tls) = &self.inner.tls else {
            return handshake(stream).await;
        };
        if let Some(proxy) = &self.inner.proxy {
            tunnel::open(&mut stream, &self.inner.host, self.inner.port, proxy.authorization.as_ref()).await.map_err(
                |reason| SendError::Tunnel {
                    proxy: format!("{}:{}", proxy.host, proxy.port),
                    target: format!("{}:{}", self.inner.host, self.inner.port),
                    reason,
                },
            )?;
        }
        let stream = tls.connect(stream).await.map_err(|reason| SendError::Tls {
            host: self.inner.host.clone(),
            addr: addr.to_string(),
            reason,
        })?;
        handshake(stream).await
    }

    fn connect_host(&self) -> String {
        match &self.inner.proxy {
            Some(p) => format!("{}:{}", p.host, p.port),
            None => format!("{}:{}", self.inner.host, self.inner.port),
        }
    }

    async fn resolve(&self) -> Result<Vec<SocketAddr>, SendError> {
        let (host, port) = match &self.inner.proxy {
            Some(p) => (p.host.as_str(), p.port),
            None => (self.inner.host.as_str(), self.inner.port),
        };
        self.inner
            .addrs
            .get_or_try_init(|| async move {
                let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
                    .await
                    .map_err(|source| SendError::Resolve { host: host.to_string(), source })?
                    .collect();
                if addrs.is_empty() {
                    return Err(SendError::Resolve {
                        host: host.to_string(),
                        source: io::Error::other("no addresses"),
                    });
                }
                Ok(addrs)
            })
            .await
            .cloned()
    }
}

/// Starts HTTP/1.1 on a connected stream (TCP, or TLS over TCP); a task drives the stream.
async fn handshake<S>(stream: S) -> Result<Conn, SendError>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let read = Arc::new(AtomicU64::new(0));
    let io = TokioIo::new(CountingIo { inner: stream, read: Arc::clone(&read) });
    let (mut sender, connection) =
        hyper::client::conn::http1::Builder::new().handshake(io).await.map_err(SendError::Exchange)?;
    tokio::spawn(async move {
        // Errors surface on the request side; the task only drives the socket.
        let _ = connection.await;
    });
    sender.ready().await.map_err(SendError::Exchange)?;
    Ok(Conn { sender, read, served: 0, opened: None })
}

/// An error and its chain of causes, `: `-separated.
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn parse_url(url: &str) -> Result<Uri, HttpError> {
    let uri = Uri::try_from(url).map_err(|e| HttpError::InvalidUrl { url: url.to_string(), reason: e.to_string() })?;
    match uri.scheme_str() {
        Some("http" | "https") => Ok(uri),
        _ => Err(HttpError::InvalidUrl { url: url.to_string(), reason: "expected http:// or https://".to_string() }),
    }
}

fn is_https(uri: &Uri) -> bool {
    uri.scheme_str() == Some("https")
}

/// A response whose head has arrived; the body is read with [`Response::chunk`]. When the body
/// has been read to its end the connection goes back to the pool; dropping the response earlier
/// closes it.
#[derive(Debug)]
pub struct Response {
    status: StatusCode,
    reason: Option<String>,
    retried: bool,
    /// How its connection was opened, when this request was the connection's first.
    opened: Option<Opened>,
    body: Incoming,
    conn: Option<Conn>,
    client: HttpClient,
}

impl Response {
    /// How the connection was opened, when this request opened it (`None` on a reused one).
    pub fn opened(&self) -> Option<Opened> {
        self.opened
    }

    /// The response's status code.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The status line's reason phrase (`Bad Request`), as the server sent it.
    pub fn reason(&self) -> &str {
        self.reason.as_deref().or_else(|| self.status.canonical_reason()).unwrap_or("")
    }

    /// The request was sent a second time, on a fresh connection, because the pooled
    /// connection it was first sent on closed without answering.
    pub fn retried(&self) -> bool {
        self.retried
    }

    /// The next piece of the body as it came off the network; `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, hyper::Error> {
        loop {
            match self.body.frame().await {
                None => {
                    if let Some(conn) = self.conn.take() {
                        self.client.release(conn);
                    }
                    return Ok(None);
                }
                Some(Err(e)) => {
                    self.conn = None;
                    return Err(e);
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// Reads the whole body, up to `limit` bytes (the rest is dropped).
    pub async fn text(&mut self, limit: usize) -> Result<String, hyper::Error> {
        let mut buf = Vec::new();
        while let Some(c) = self.chunk().await? {
            let room = limit.saturating_sub(buf.len());
            buf.extend_from_slice(&c[..c.len().min(room)]);
            if buf.len() >= limit {
                break;
            }
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }
}

/// A stream that counts the bytes it reads (after decryption, for TLS: a session ticket is
/// not an answer).
struct CountingIo<S> {
    inner: S,
    read: Arc<AtomicU64>,
}

impl<S: AsyncRead + Unpin> AsyncRead for CountingIo<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.read.fetch_add(n as u64, Ordering::Relaxed);
        }
        res
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for CountingIo<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The API key vLLM's client sends as a bearer token: `$OPENAI_API_KEY`, when set.
pub fn env_api_key() -> Option<String> {
    std::env::var("OPENAI_API_KEY").ok()
}

/// `Authorization: Bearer $OPENAI_API_KEY` (when set) followed by the user's headers, in the
/// order vLLM applies them (later ones win).
pub fn request_headers(user: &[(String, String)], api_key: Option<String>) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(user.len() + 1);
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        out.push((AUTHORIZATION.to_string(), format!("Bearer {key}")));
    }
    out.extend(user.iter().cloned());
    out
}

#[cfg(test)]
mod tests;
