//! Scrapes the server's telemetry during the timed run, off the hot path: one task on the run's
//! runtime fetches every endpoint of `--server-metrics`/`--scrape` (Prometheus text) once at
//! the start, every interval after, and once more when the run ends, so that counters cover
//! the whole run. Each endpoint has its own one-connection client; a scrape that fails or times
//! out is noted with its reason and the next one is tried as usual: telemetry never stops or
//! fails a run. Everything stays in the task's locals and comes back once, when the run ends.
//! Apart from it, the speculative-decoding counters are read once before and once after the
//! run, as `vllm bench serve` reads them ([`spec_decode_counters`]).

use std::time::{Duration, Instant};

use http::{Method, Uri};
use servebench_core::telemetry::{ServerTelemetry, Source, SpecDecodeCounts, read};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::http::{HttpClient, request_headers};
use crate::server_info::call;

/// The running scraper; [`Scraper::finish`] takes the last scrape and returns the series.
pub(crate) struct Scraper {
    stop: oneshot::Sender<()>,
    task: JoinHandle<ServerTelemetry>,
}

/// Where and how often to scrape.
#[derive(Clone, Debug)]
pub(crate) struct ScrapeSpec<'a> {
    pub urls: &'a [String],
    pub interval: Duration,
    pub headers: &'a [(String, String)],
    pub api_key: Option<String>,
    pub insecure: bool,
}

impl Scraper {
    /// Starts scraping; times are counted from `t0`, the timed run's start. `None` when there
    /// is nothing to scrape.
    pub fn start(t0: Instant, spec: &ScrapeSpec<'_>) -> Option<Scraper> {
        if spec.urls.is_empty() {
            return None;
        }
        let headers = request_headers(spec.headers, spec.api_key.clone());
        let endpoints: Vec<Endpoint> =
            spec.urls.iter().map(|url| Endpoint::new(url, &headers, spec.insecure)).collect();
        let (stop, stopped) = oneshot::channel();
        let interval = spec.interval.max(Duration::from_millis(100));
        Some(Scraper { stop, task: tokio::spawn(scrape(t0, endpoints, interval, stopped)) })
    }

    /// Stops after one last scrape; `None` if the task was lost.
    pub async fn finish(self) -> Option<ServerTelemetry> {
        let _ = self.stop.send(());
        self.task.await.ok()
    }
}

/// One endpoint: its client (or why none could be made) and what was gathered.
struct Endpoint {
    client: Result<(HttpClient, Uri), String>,
    source: Source,
}

impl Endpoint {
    fn new(url: &str, headers: &[(String, String)], insecure: bool) -> Endpoint {
        let client = HttpClient::new(url, headers, 1, insecure)
            .and_then(|c| c.target(url).map(|t| (c, t)))
            .map_err(|e| e.to_string());
        Endpoint { client, source: Source::new(url) }
    }

    async fn scrape(&mut self, t0: Instant, timeout: Duration) {
        let (client, target) = match &self.client {
            Ok(c) => c,
            Err(reason) => return self.source.fail(reason.clone()),
        };
        match call(client, Method::GET, &self.source.url, target, None, timeout).await {
            Ok(text) => {
                let t = t0.elapsed().as_secs_f64();
                self.source.record(t, &read(&text));
            }
            Err(e) => self.source.fail(e.to_string()),
        }
    }
}

async fn scrape(
    t0: Instant,
    mut endpoints: Vec<Endpoint>,
    interval: Duration,
    mut stopped: oneshot::Receiver<()>,
) -> ServerTelemetry {
    // A scrape may take at most one interval (at least half a second, at most five).
    let timeout = interval.clamp(Duration::from_millis(500), Duration::from_secs(5));
    let mut k: u32 = 0;
    loop {
        for e in &mut endpoints {
            e.scrape(t0, timeout).await;
        }
        k += 1;
        // Scrapes missed while one was slow are skipped, not taken in a burst.
        let since = t0.elapsed();
        k = k.max(u32::try_from(since.as_nanos() / interval.as_nanos()).unwrap_or(u32::MAX - 1) + 1);
        tokio::select! {
            biased;
            _ = &mut stopped => break,
            () = tokio::time::sleep_until((t0 + interval * k).into()) => {}
        }
    }
    for e in &mut endpoints {
        e.scrape(t0, timeout).await;
    }
    ServerTelemetry { interval_s: interval.as_secs_f64(), sources: endpoints.into_iter().map(|e| e.source).collect() }
}

/// The server's speculative-decoding counters now (`{base_url}/metrics`), which `vllm bench
/// serve` reads before and after its timed run; `None` where the server has none, or does not
/// answer within two seconds (a server without `/metrics` loses nothing).
pub(crate) async fn spec_decode_counters(
    base_url: &str,
    headers: &[(String, String)],
    api_key: Option<String>,
    insecure: bool,
) -> Option<SpecDecodeCounts> {
    let url = format!("{}/metrics", base_url.trim_end_matches('/'));
    let headers = request_headers(headers, api_key);
    let client = HttpClient::new(&url, &headers, 1, insecure).ok()?;
    let target = client.target(&url).ok()?;
    let text = call(&client, Method::GET, &url, &target, None, Duration::from_secs(2)).await.ok()?;
    SpecDecodeCounts::read(&text)
}
