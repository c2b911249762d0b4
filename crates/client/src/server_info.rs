//! What the CLI asks a server (or this machine) outside the timed run: the served model
//! (`GET /v1/models`), the Prometheus metrics text (`GET /metrics`), control calls such as
//! vLLM's `POST /start_profile`, and a file-descriptor limit high enough for thousands of
//! connections.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode, Uri};
use serde::Deserialize;

use crate::http::{HttpClient, HttpError, SendError, request_headers};

/// How long one of these requests may take.
const TIMEOUT: Duration = Duration::from_secs(60);
/// The most of a response body that is read.
const BODY_LIMIT: usize = 64 * 1024 * 1024;

/// The first model a server lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelInfo {
    /// `data[0].id`: the name to send in requests.
    pub id: String,
    /// `data[0].root` (vLLM's model path), when the server gives one.
    pub root: Option<String>,
}

/// Why a server question got no answer. The messages say what failed; callers add what to
/// do about it (pass `--model`, check the address), which depends on why they asked.
#[derive(Debug, thiserror::Error)]
pub enum InfoError {
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("{method} {url}: {source}")]
    Send { method: Method, url: String, source: SendError },
    #[error("{method} {url}: no answer within {} s", timeout.as_secs_f64())]
    Timeout { method: Method, url: String, timeout: Duration },
    #[error("{method} {url}: HTTP {status}")]
    Status { method: Method, url: String, status: StatusCode },
    #[error("{method} {url}: the response broke off: {source}")]
    Body { method: Method, url: String, source: crate::http::BodyError },
    #[error("GET {url}: unexpected answer: {reason}")]
    Format { url: String, reason: String },
}

/// `GET {base_url}/v1/models`: the first model's id and root (vLLM's `--model` default).
/// `insecure` (`--insecure`) accepts any certificate from an https server.
pub async fn fetch_models(
    base_url: &str,
    headers: &[(String, String)],
    api_key: Option<String>,
    insecure: bool,
) -> Result<ModelInfo, InfoError> {
    #[derive(Deserialize)]
    struct List {
        data: Vec<Card>,
    }
    #[derive(Deserialize)]
    struct Card {
        id: String,
        #[serde(default)]
        root: Option<String>,
    }
    let url = format!("{}/v1/models", base_url.trim_end_matches('/'));
    let body = get(&url, headers, api_key, insecure).await?;
    let list: List =
        serde_json::from_str(&body).map_err(|e| InfoError::Format { url: url.clone(), reason: e.to_string() })?;
    let card = list
        .data
        .into_iter()
        .next()
        .ok_or_else(|| InfoError::Format { url, reason: "the server lists no models".to_string() })?;
    Ok(ModelInfo { id: card.id, root: card.root })
}

/// `GET {base_url}/metrics`: the Prometheus text exposition.
pub async fn fetch_metrics(
    base_url: &str,
    headers: &[(String, String)],
    api_key: Option<String>,
    insecure: bool,
) -> Result<String, InfoError> {
    fetch_text(base_url, "/metrics", headers, api_key, insecure).await
}

/// `GET {base_url}{path}` as text: for questions outside the run (`/version`, `/v1/models`).
pub async fn fetch_text(
    base_url: &str,
    path: &str,
    headers: &[(String, String)],
    api_key: Option<String>,
    insecure: bool,
) -> Result<String, InfoError> {
    get(&format!("{}{path}", base_url.trim_end_matches('/')), headers, api_key, insecure).await
}

/// `POST {base_url}{path}` without a body, for control calls outside the run (vLLM's
/// `/start_profile` and `/stop_profile`); any 2xx answer is success. Stopping a profiler
/// writes its traces first, which can take minutes: `timeout` bounds the wait.
pub async fn post_empty(
    base_url: &str,
    path: &str,
    headers: &[(String, String)],
    api_key: Option<String>,
    insecure: bool,
    timeout: Duration,
) -> Result<(), InfoError> {
    let url = format!("{}{path}", base_url.trim_end_matches('/'));
    exchange(Method::POST, &url, &request_headers(headers, api_key), insecure, timeout).await.map(drop)
}

async fn get(
    url: &str,
    headers: &[(String, String)],
    api_key: Option<String>,
    insecure: bool,
) -> Result<String, InfoError> {
    exchange(Method::GET, url, &request_headers(headers, api_key), insecure, TIMEOUT).await
}

/// One request on a fresh client; the body of a 2xx answer.
async fn exchange(
    method: Method,
    url: &str,
    headers: &[(String, String)],
    insecure: bool,
    timeout: Duration,
) -> Result<String, InfoError> {
    let client = HttpClient::new(url, headers, 1, insecure)?;
    let target = client.target(url)?;
    call(&client, method, url, &target, None, timeout).await
}

/// One request outside the run on `client` (`url` is `target`'s full address, for messages):
/// the body of a 2xx answer, read up to 64 MiB, within `timeout`.
pub(crate) async fn call(
    client: &HttpClient,
    method: Method,
    url: &str,
    target: &Uri,
    body: Option<Bytes>,
    timeout: Duration,
) -> Result<String, InfoError> {
    let exchange = async {
        let mut resp = client.send(method.clone(), target, body, None).await.map_err(|source| InfoError::Send {
            method: method.clone(),
            url: url.to_string(),
            source,
        })?;
        if !resp.status().is_success() {
            return Err(InfoError::Status { method: method.clone(), url: url.to_string(), status: resp.status() });
        }
        resp.text(BODY_LIMIT).await.map_err(|source| InfoError::Body {
            method: method.clone(),
            url: url.to_string(),
            source,
        })
    };
    tokio::time::timeout(timeout, exchange).await.map_err(|_| InfoError::Timeout {
        method: method.clone(),
        url: url.to_string(),
        timeout,
    })?
}

/// Raises the soft limit on open files towards `wanted` (bounded by the hard limit) and returns
/// the new soft limit. Each connection is a file descriptor, and the common default of 1024
/// caps a run at about a thousand streams.
pub fn raise_nofile_limit(wanted: u64) -> std::io::Result<u64> {
    rlimit::increase_nofile_limit(wanted)
}
