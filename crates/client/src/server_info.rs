//! What the CLI asks a server (or this machine) outside the timed run: the served model
//! (`GET /v1/models`), the Prometheus metrics text (`GET /metrics`), and a file-descriptor
//! limit high enough for thousands of connections.

use std::time::Duration;

use http::{Method, StatusCode};
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
    #[error("GET {url}: {source}")]
    Send { url: String, source: SendError },
    #[error("GET {url}: no answer within {} s", TIMEOUT.as_secs())]
    Timeout { url: String },
    #[error("GET {url}: HTTP {status}")]
    Status { url: String, status: StatusCode },
    #[error("GET {url}: the response broke off: {source}")]
    Body { url: String, source: hyper::Error },
    #[error("GET {url}: unexpected answer: {reason}")]
    Format { url: String, reason: String },
}

/// `GET {base_url}/v1/models`: the first model's id and root (vLLM's `--model` default).
pub async fn fetch_models(
    base_url: &str,
    headers: &[(String, String)],
    api_key: Option<String>,
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
    let body = get(&url, headers, api_key).await?;
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
) -> Result<String, InfoError> {
    fetch_text(base_url, "/metrics", headers, api_key).await
}

/// `GET {base_url}{path}` as text: for questions outside the run (`/version`, `/v1/models`).
pub async fn fetch_text(
    base_url: &str,
    path: &str,
    headers: &[(String, String)],
    api_key: Option<String>,
) -> Result<String, InfoError> {
    get(&format!("{}{path}", base_url.trim_end_matches('/')), headers, api_key).await
}

async fn get(url: &str, headers: &[(String, String)], api_key: Option<String>) -> Result<String, InfoError> {
    let client = HttpClient::new(url, &request_headers(headers, api_key), 1)?;
    let target = client.target(url)?;
    let exchange = async {
        let mut resp = client
            .send(Method::GET, &target, None, None)
            .await
            .map_err(|source| InfoError::Send { url: url.to_string(), source })?;
        if !resp.status().is_success() {
            return Err(InfoError::Status { url: url.to_string(), status: resp.status() });
        }
        resp.text(BODY_LIMIT).await.map_err(|source| InfoError::Body { url: url.to_string(), source })
    };
    tokio::time::timeout(TIMEOUT, exchange).await.map_err(|_| InfoError::Timeout { url: url.to_string() })?
}

/// Raises the soft limit on open files towards `wanted` (bounded by the hard limit) and returns
/// the new soft limit. Each connection is a file descriptor, and the common default of 1024
/// caps a run at about a thousand streams.
pub fn raise_nofile_limit(wanted: u64) -> std::io::Result<u64> {
    rlimit::increase_nofile_limit(wanted)
}
