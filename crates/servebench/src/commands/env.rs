//! The environment a run happened in, saved with it: the client host, and what the server says
//! about itself (`/v1/models`, `/version`, `/metrics` before and after the run).
//!
//! Everything here is best effort and bounded in time: a server without these endpoints gives
//! a run with less context, never a failed run.

use std::time::Duration;

use serde_json::{Value, json};

/// How long each question to the server may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// The client machine: host name, OS, CPU count, servebench version.
pub fn client_host() -> Value {
    let hostname = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok());
    json!({
        "hostname": hostname,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "cpus": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "servebench_version": env!("CARGO_PKG_VERSION"),
    })
}

/// `GET {base_url}{path}` as text, or `None` if the server does not answer in time.
/// `insecure` (`--insecure`) accepts any certificate from an https server.
pub async fn ask(base_url: &str, path: &str, headers: &[(String, String)], insecure: bool) -> Option<String> {
    let api_key = servebench_client::env_api_key();
    let fetch = servebench_client::fetch_text(base_url, path, headers, api_key, insecure);
    tokio::time::timeout(ASK_TIMEOUT, fetch).await.ok()?.ok()
}

/// What the server says about itself before a run.
pub struct ServerBefore {
    pub models: Option<Value>,
    pub version: Option<Value>,
    pub metrics: Option<String>,
}

impl ServerBefore {
    pub async fn capture(base_url: &str, headers: &[(String, String)], insecure: bool) -> Self {
        let as_json = |s: Option<String>| s.and_then(|t| serde_json::from_str::<Value>(&t).ok());
        let (models, version, metrics) = tokio::join!(
            ask(base_url, "/v1/models", headers, insecure),
            ask(base_url, "/version", headers, insecure),
            ask(base_url, "/metrics", headers, insecure),
        );
        Self { models: as_json(models), version: as_json(version), metrics }
    }

    /// The environment record saved with the run, with `/metrics` after the run added.
    pub fn into_env(self, metrics_after: Option<String>) -> Value {
        json!({
            "client": client_host(),
            "server": {
                "models": self.models,
                "version": self.version,
                "metrics_before": self.metrics,
                "metrics_after": metrics_after,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_host_names_the_machine_shape() {
        let h = client_host();
        assert!(h["cpus"].as_u64().unwrap() >= 1);
        assert_eq!(h["os"], std::env::consts::OS);
        assert_eq!(h["servebench_version"], env!("CARGO_PKG_VERSION"));
    }

    #[tokio::test]
    async fn an_unreachable_server_gives_an_empty_record_not_an_error() {
        // Port 9 (discard) on loopback is closed on test machines: the connection is refused.
        let before = ServerBefore::capture("http://127.0.0.1:9", &[], false).await;
        assert!(before.models.is_none() && before.version.is_none() && before.metrics.is_none());
        let env = before.into_env(None);
        assert!(env["server"]["models"].is_null());
        assert!(env["client"]["cpus"].as_u64().is_some());
    }
}
