//! The only network code: HTTP/1.1 over TCP, or over TLS for `https://` targets, one
//! connection per request in flight.
//!
//! The protocol is written here rather than taken from a general HTTP library because the
//! client's own cost per streamed event is what it measures with: the task that sends a
//! request owns its connection and reads the socket itself into the connection's buffer; the
//! clock is read as each read returns, before anything is parsed, and the body's framing is
//! taken off in place (`http/wire.rs`), so a streamed event costs one read and no allocation
//! or hand-off between tasks. Response heads are parsed by `httparse`.
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

mod conn;
mod tls;
mod tunnel;
mod wire;

use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HOST, PROXY_AUTHORIZATION, USER_AGENT};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use tokio::net::TcpStream;
use tokio::sync::OnceCell;

use crate::proxy::{Proxy, proxy_for, split_host_port};
use conn::{Conn, Failed, Io};
use tls::Tls;
use wire::BodyDecoder;
pub use wire::WireError;

/// A connection's read buffer: reads are up to this size.
const READ_BUFFER: usize = 16 * 1024;
/// The longest response head accepted.
const HEAD_LIMIT: usize = 64 * 1024;

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
    #[error("connection failed before a response: {0}")]
    Exchange(BodyError),
}

/// Why reading a response failed.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error(transparent)]
    Wire(#[from] WireError),
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

/// How a new connection was opened: the TCP connect, then TLS (with any proxy tunnel), µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Opened {
    pub connect_us: u32,
    pub tls_us: Option<u32>,
}

fn micros(d: std::time::Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// One `--header NAME=VALUE`, as HTTP allows it (the command layer checks them with this before
/// a run).
pub fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), HttpError> {
    let invalid = |reason: String| HttpError::InvalidHeader { name: name.to_string(), reason };
    let n = HeaderName::try_from(name.trim()).map_err(|e| invalid(e.to_string()))?;
    let v = HeaderValue::try_from(value.trim()).map_err(|e| invalid(e.to_string()))?;
    Ok((n, v))
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
            .ok_or_else(|| HttpError::InvalidUrl { url: url.to_string(), reason: authority_problem(authority) })?;
        let port = port.unwrap_or(if https { 443 } else { 80 });
        let mut map = HeaderMap::new();
        map.insert(USER_AGENT, HeaderValue::from_static(concat!("servebench/", env!("CARGO_PKG_VERSION"))));
        for (name, value) in headers {
            let (n, v) = header(name, value)?;
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
        let headers = self.headers(body.is_some(), extra);
        let request = request_bytes(&method, target, &headers, body.as_deref());
        let mut conn = self.checkout().await?;
        let reused = conn.served > 0;
        let (head, retried) = match conn.exchange(&request).await {
            Ok(head) => (head, false),
            Err(Failed::Answered(e)) => return Err(SendError::Exchange(e)),
            Err(Failed::NoAnswer(e)) if !reused => return Err(SendError::Exchange(e)),
            Err(Failed::Unsent(e)) if !reused => return Err(SendError::Exchange(e.into())),
            Err(failed) => {
                // A pooled connection the server had closed: sending it on a fresh one is a
                // retry only when the first copy went out.
                conn = self.dial().await?;
                let head = conn.exchange(&request).await.map_err(|f| match f {
                    Failed::Unsent(e) => SendError::Exchange(e.into()),
                    Failed::NoAnswer(e) | Failed::Answered(e) => SendError::Exchange(e),
                })?;
                (head, matches!(failed, Failed::NoAnswer(_)))
            }
        };
        Ok(Response {
            status: head.status,
            reason: head.reason,
            retried,
            opened: conn.opened.take(),
            keep_alive: head.keep_alive,
            decoder: BodyDecoder::new(head.framing),
            at: conn.arrived,
            conn: Some(conn),
            client: self.clone(),
        })
    }

    /// The headers of a request: `Host`, `Content-Type` for a body, the client's own (the
    /// user agent, the user's), the proxy's credentials when forwarding, then `extra`; a later
    /// one replaces an earlier one of the same name.
    fn headers(&self, has_body: bool, extra: Option<(HeaderName, HeaderValue)>) -> HeaderMap {
        let mut headers = HeaderMap::with_capacity(self.inner.headers.len() + 4);
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
        headers
    }

    /// An idle pooled connection that is still open, or a new one. The most recently used
    /// connection is preferred (one idle for long is likelier to be closed by the server).
    async fn checkout(&self) -> Result<Conn, SendError> {
        loop {
            let Some(mut conn) = lock(&self.inner.idle).pop() else { break };
            if conn.io.is_idle_open() {
                return Ok(conn);
            }
        }
        self.dial().await
    }

    /// A connection whose response was read to its end, back to the pool when it may carry
    /// another request.
    fn release(&self, mut conn: Conn) {
        conn.served = conn.served.saturating_add(1);
        let mut idle = lock(&self.inner.idle);
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
            return Ok(Conn::new(Io::Plain(stream)));
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
        Ok(Conn::new(Io::Tls(Box::new(stream))))
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

/// Why `authority` (`host:port`) names no server: no host, or a port out of range.
fn authority_problem(authority: &str) -> String {
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && !port.contains(']') && port.parse::<u16>().is_err() => {
            format!("port {port} is not a port number (1 to 65535)")
        }
        _ => "no host".to_string(),
    }
}

fn is_https(uri: &Uri) -> bool {
    uri.scheme_str() == Some("https")
}

/// The bytes of a request: its line, `headers`, `Content-Length` when there is a body, and
/// the body, in one buffer for one write.
fn request_bytes(method: &Method, target: &Uri, headers: &HeaderMap, body: Option<&[u8]>) -> Vec<u8> {
    let body = body.unwrap_or_default();
    let mut out = Vec::with_capacity(256 + body.len());
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    // The target as `HttpClient::target` made it: origin form, or absolute through a proxy.
    let _ = write!(out, "{target} HTTP/1.1\r\n");
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() || *method == Method::POST || *method == Method::PUT {
        let _ = write!(out, "content-length: {}\r\n", body.len());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
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
    /// The server allows another request on the connection after this body.
    keep_alive: bool,
    decoder: BodyDecoder,
    /// When the bytes last read arrived.
    at: Instant,
    /// `None` once the body has ended or failed.
    conn: Option<Conn>,
    client: HttpClient,
}

/// A piece of a response body, in the connection's buffer, and when the read that brought it
/// returned.
#[derive(Debug)]
pub struct Piece<'a> {
    pub data: &'a [u8],
    pub at: Instant,
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

    /// When the response head arrived (before [`Response::chunk`] is called), then when the
    /// last piece's bytes did.
    pub fn arrived(&self) -> Instant {
        self.at
    }

    /// The next piece of the body, as it came off the network (a read may hold several pieces,
    /// which share its time); `None` at its end. Reads the socket only when the bytes already
    /// read hold no more of the body.
    pub async fn chunk(&mut self) -> Result<Option<Piece<'_>>, BodyError> {
        let result = self.next_range().await;
        if result.is_err() {
            self.conn = None;
        }
        match result? {
            Some(range) => {
                let conn = self.conn.as_ref().expect("a range is only found on an open connection");
                Ok(Some(Piece { data: &conn.buf[range], at: self.at }))
            }
            None => {
                if let Some(conn) = self.conn.take()
                    && self.keep_alive
                    && self.decoder.is_done()
                    && conn.lo == conn.hi
                {
                    self.client.release(conn);
                }
                Ok(None)
            }
        }
    }

    /// Where the next piece of the body lies in the connection's buffer.
    async fn next_range(&mut self) -> Result<Option<std::ops::Range<usize>>, BodyError> {
        let Some(conn) = self.conn.as_mut() else { return Ok(None) };
        loop {
            if conn.lo < conn.hi {
                let base = conn.lo;
                let (taken, data) = self.decoder.next(conn.unread())?;
                conn.lo += taken;
                if let Some(r) = data.filter(|r| !r.is_empty()) {
                    return Ok(Some(base + r.start..base + r.end));
                }
            }
            if self.decoder.is_done() {
                return Ok(None);
            }
            let n = conn.fill().await?;
            self.at = conn.arrived;
            if n == 0 {
                self.decoder.eof()?;
                self.keep_alive = false;
                return Ok(None);
            }
        }
    }

    /// Reads the whole body, up to `limit` bytes (the rest is dropped).
    pub async fn text(&mut self, limit: usize) -> Result<String, BodyError> {
        let mut buf = Vec::new();
        while let Some(piece) = self.chunk().await? {
            let room = limit.saturating_sub(buf.len());
            buf.extend_from_slice(&piece.data[..piece.data.len().min(room)]);
            if buf.len() >= limit {
                break;
            }
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
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
