//! The client's self-test: the real load engine against the scripted test server, at rising
//! concurrency, with every measurement compared to the server's own send times.
//!
//! Each level starts a fresh [`TestServer`] on its own thread and single-threaded runtime
//! (so its CPU time is that thread's alone), opens one connection per stream with as many
//! one-token warm-up requests, then runs `requests` closed-loop requests at `streams`
//! concurrency. The client's TTFT and inter-token gaps are compared, request by request, with
//! the arrival and chunk times the server recorded on the same monotonic clock. The client's
//! CPU is the process's CPU time over the level minus the server thread's, divided by the
//! token chunks streamed. The run's [`Health`] verdict and dispatch lag come from the
//! ordinary summary of the level's run.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use servebench_core::config::{Api, RunConfig};
use servebench_core::metrics::{Health, Sorted, Summary, mean};
use servebench_core::plan::{Plan, PlannedRequest, TokenCounting};
use servebench_core::record::RunResult;
use tokio::sync::oneshot;

use crate::monitor::{process_cpu, thread_cpu};
use crate::runner::{RunError, RunOptions, run};
use crate::testserver::{RequestTruth, Script, TestServer, TestServerConfig};

/// The request-id prefix of the self-test's requests (warm-ups carry none).
const PREFIX: &str = "selftest-";
/// The most a level's server lives; a level is also bounded by its request count.
const SERVER_LIFETIME: Duration = Duration::from_secs(900);
/// A level qualifies as measured "within 1 ms" when its mean TTFT error is at most this.
pub const WITHIN_MS: f64 = 1.0;

/// What the self-test runs.
#[derive(Clone, Debug, PartialEq)]
pub struct SelftestOptions {
    /// Concurrent streams, one level each, in order.
    pub levels: Vec<usize>,
    /// The server's time from a request's arrival to its first token.
    pub ttft: Duration,
    /// The server's gap between tokens.
    pub itl: Duration,
    /// Tokens per answer (one per chunk).
    pub output_tokens: u32,
    /// Requests per level as a multiple of its streams (at least [`Self::min_requests`]).
    pub requests_per_stream: usize,
    /// The fewest requests a level sends.
    pub min_requests: usize,
}

impl Default for SelftestOptions {
    fn default() -> Self {
        Self {
            levels: vec![1, 100, 1000, 2048, 4096],
            ttft: Duration::from_millis(50),
            itl: Duration::from_millis(10),
            output_tokens: 100,
            requests_per_stream: 2,
            min_requests: 50,
        }
    }
}

impl SelftestOptions {
    /// The requests a level of `streams` sends.
    pub fn requests(&self, streams: usize) -> usize {
        streams.saturating_mul(self.requests_per_stream).max(self.min_requests)
    }

    /// Refuses options no machine could run, before anything starts.
    pub fn check(&self) -> Result<(), SelftestError> {
        if self.levels.is_empty() {
            return Err(SelftestError::NoLevels);
        }
        if self.levels.contains(&0) {
            return Err(SelftestError::ZeroLevel);
        }
        if self.output_tokens == 0 {
            return Err(SelftestError::NoTokens);
        }
        if let Some(&streams) = self.levels.iter().find(|&&s| s > MAX_STREAMS) {
            return Err(SelftestError::TooManyStreams(streams));
        }
        if self.output_tokens > MAX_OUTPUT_TOKENS {
            return Err(SelftestError::TooManyTokens(self.output_tokens));
        }
        if self.request_time() >= SERVER_LIFETIME {
            return Err(SelftestError::TooSlow(self.request_time().as_secs_f64(), SERVER_LIFETIME.as_secs()));
        }
        Ok(())
    }

    /// How long one request streams by the script: the first token, then a gap per token.
    pub fn request_time(&self) -> Duration {
        self.ttft.saturating_add(self.itl.saturating_mul(self.output_tokens.saturating_sub(1)))
    }

    /// The least the whole self-test can take: each level sends its requests in rounds of its
    /// streams, no round shorter than one request, after one round of one-token warm-ups.
    pub fn least_duration(&self) -> Duration {
        let rounds: usize = self.levels.iter().map(|&s| self.requests(s).div_ceil(s.max(1))).sum();
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let warm_ups = self.ttft.saturating_mul(count(self.levels.len()));
        self.request_time().saturating_mul(count(rounds)).saturating_add(warm_ups)
    }
}

/// The most streams one level opens: every stream is a connection to 127.0.0.1, and the
/// loopback has about 64K ports.
pub const MAX_STREAMS: usize = 65_536;

/// The most tokens each request of a level streams.
pub const MAX_OUTPUT_TOKENS: u32 = 100_000;

/// Why the self-test could not run.
#[derive(Debug, thiserror::Error)]
pub enum SelftestError {
    #[error("no concurrency levels given; pass --levels, for example --levels 1,100,1000")]
    NoLevels,
    #[error("a concurrency level of 0 streams was given; every level needs at least 1 stream")]
    ZeroLevel,
    #[error("--output-tokens must be at least 1")]
    NoTokens,
    #[error(
        "a level of {0} streams is more than {MAX_STREAMS}, which one machine's loopback cannot connect; lower --levels"
    )]
    TooManyStreams(usize),
    #[error(
        "--output-tokens {0} is more than {MAX_OUTPUT_TOKENS}; the client's error shows within a few hundred tokens"
    )]
    TooManyTokens(u32),
    #[error(
        "each request would stream for {0:.0} s, longer than the {1} s a level's test server lives; \
         lower --ttft-ms, --itl-ms or --output-tokens"
    )]
    TooSlow(f64, u64),
    #[error("could not start the test server on 127.0.0.1: {0}")]
    Server(#[from] std::io::Error),
    #[error("the test server's thread failed before returning its record")]
    ServerLost,
    #[error(transparent)]
    Run(#[from] RunError),
}

/// The client's error against the server's truth, in ms: the mean and p99 of the absolute
/// per-sample difference.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorStats {
    pub mean_ms: f64,
    pub p99_ms: f64,
}

impl ErrorStats {
    fn of(errors_us: &[f64]) -> ErrorStats {
        let abs: Vec<f64> = errors_us.iter().map(|e| e.abs() / 1000.0).collect();
        ErrorStats { mean_ms: mean(&abs), p99_ms: Sorted::new(&abs).percentile(99.0) }
    }
}

/// One level's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelResult {
    pub streams: usize,
    pub requests: usize,
    pub succeeded: usize,
    /// The most requests the server was answering at once.
    pub server_in_flight_max: usize,
    /// Token chunks the client received (warm-ups included).
    pub events: u64,
    pub ttft_error: ErrorStats,
    /// Every gap between consecutive token chunks of a request.
    pub itl_error: ErrorStats,
    /// Client CPU (process minus the server's thread) per received chunk, µs; `None` where
    /// CPU time cannot be read.
    pub cpu_us_per_event: Option<f64>,
    /// Dispatch lag p99 against the plan, ms.
    pub dispatch_lag_p99_ms: Option<f64>,
    /// The level's health verdict.
    pub health: Option<Health>,
    pub wall_s: f64,
}

/// The whole self-test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SelftestReport {
    pub ttft_ms: f64,
    pub itl_ms: f64,
    pub output_tokens: u32,
    pub cores: u32,
    pub levels: Vec<LevelResult>,
    /// The most streams whose mean TTFT error was within [`WITHIN_MS`] and whose requests all
    /// succeeded; `None` when no level was.
    pub within_1ms_streams: Option<usize>,
}

impl SelftestReport {
    fn new(options: &SelftestOptions, levels: Vec<LevelResult>) -> SelftestReport {
        let within_1ms_streams = levels
            .iter()
            .filter(|l| l.succeeded == l.requests && l.ttft_error.mean_ms <= WITHIN_MS)
            .map(|l| l.streams)
            .max();
        SelftestReport {
            ttft_ms: options.ttft.as_secs_f64() * 1000.0,
            itl_ms: options.itl.as_secs_f64() * 1000.0,
            output_tokens: options.output_tokens,
            cores: std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX)),
            levels,
            within_1ms_streams,
        }
    }
}

/// Runs every level in turn; `on_level` hears of each as it finishes, with the level's run.
pub async fn selftest(
    options: &SelftestOptions,
    mut on_level: impl FnMut(&LevelResult, &RunResult),
) -> Result<SelftestReport, SelftestError> {
    options.check()?;
    let mut levels = Vec::with_capacity(options.levels.len());
    for &streams in &options.levels {
        let (level, run) = run_level(options, streams).await?;
        on_level(&level, &run);
        levels.push(level);
    }
    Ok(SelftestReport::new(options, levels))
}

/// What the server's thread hands back: the truth, its CPU seconds, its peak in flight.
type ServerOutcome = (Vec<RequestTruth>, Option<f64>, usize);

async fn run_level(options: &SelftestOptions, streams: usize) -> Result<(LevelResult, RunResult), SelftestError> {
    let requests = options.requests(streams);
    let script = Script {
        ttft: options.ttft,
        itl: options.itl,
        tokens: options.output_tokens,
        opening: false,
        ..Script::default()
    };
    let started = Instant::now();
    let cpu0 = process_cpu();
    let (server, base_url) = ServerThread::start(script).await?;
    let config = level_config(&base_url, streams);
    let result =
        run(&config, &level_plan(requests, options.output_tokens), quiet(), std::future::pending::<()>()).await;
    let (truth, server_cpu, in_flight) = server.finish().await?;
    let process = process_cpu().zip(cpu0).map(|(c, c0)| c - c0);
    let result = result?;
    let level = measure(&result, &truth, process.zip(server_cpu).map(|(p, s)| (p - s).max(0.0)), in_flight, started);
    Ok((level, result))
}

/// The client's config for one level: completions, closed loop at `streams`, one warm-up per
/// stream so connections are open before the timed run.
fn level_config(base_url: &str, streams: usize) -> RunConfig {
    let mut c = RunConfig::for_target(base_url, "test-model");
    c.target.request_id_prefix = PREFIX.to_string();
    c.traffic.max_concurrency = Some(streams);
    c.traffic.request_rate = f64::INFINITY;
    c.traffic.num_warmups = streams;
    c.output.disable_progress = true;
    c
}

fn level_plan(requests: usize, max_tokens: u32) -> Plan {
    Plan {
        api: Api::Completions,
        requests: (0..u32::try_from(requests).unwrap_or(u32::MAX))
            .map(|i| PlannedRequest {
                index: i,
                at_ns: 0,
                body: Bytes::from(format!(r#"{{"prompt":"selftest {i}","max_tokens":{max_tokens},"stream":true}}"#)),
                max_tokens,
                prompt_tokens: 8,
                input_tokens: Vec::new(),
            })
            .collect(),
        conversations: Vec::new(),
        token_counting: TokenCounting::Estimate,
        notes: Vec::new(),
    }
}

fn quiet() -> RunOptions {
    // The scripted server has no `/metrics`: nothing to read before and after.
    RunOptions {
        log: Arc::new(|_| {}),
        api_key: None,
        progress: false,
        spec_decode_counters: false,
        ..RunOptions::default()
    }
}

/// The server's thread: told to stop, it hands back what it saw.
struct ServerThread {
    stop: oneshot::Sender<()>,
    handle: std::thread::JoinHandle<ServerOutcome>,
}

impl ServerThread {
    /// Starts the server on its own thread and runtime; returns it with its base URL once it
    /// listens. Warm-ups (no request id) get one token at once.
    async fn start(script: Script) -> Result<(ServerThread, String), SelftestError> {
        let (stop, stop_rx) = oneshot::channel::<()>();
        let (url_tx, url_rx) = oneshot::channel::<std::io::Result<String>>();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let handle = std::thread::Builder::new().name("selftest-server".into()).spawn(move || {
            runtime.block_on(async move {
                let cpu0 = thread_cpu();
                let mut config = TestServerConfig::new(usize::MAX, move |info| {
                    if info.request_id.is_some() {
                        script.clone()
                    } else {
                        Script { ttft: Duration::ZERO, tokens: 1, ..script.clone() }
                    }
                });
                config.lifetime = SERVER_LIFETIME;
                let server = match TestServer::start(config).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = url_tx.send(Err(e));
                        return (Vec::new(), None, 0);
                    }
                };
                let _ = url_tx.send(Ok(server.base_url()));
                let _ = tokio::time::timeout(SERVER_LIFETIME, stop_rx).await;
                let cpu = thread_cpu().zip(cpu0).map(|(c, c0)| c - c0);
                (server.truth(), cpu, server.max_in_flight())
            })
        })?;
        let url = url_rx.await.map_err(|_| SelftestError::ServerLost)??;
        Ok((ServerThread { stop, handle }, url))
    }

    /// Stops the server and waits for its record.
    async fn finish(self) -> Result<ServerOutcome, SelftestError> {
        let _ = self.stop.send(());
        let handle = self.handle;
        tokio::task::spawn_blocking(move || handle.join())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or(SelftestError::ServerLost)
    }
}

/// The level's figures from the client's run and the server's truth.
fn measure(
    run: &RunResult,
    truth: &[RequestTruth],
    client_cpu_s: Option<f64>,
    server_in_flight_max: usize,
    started: Instant,
) -> LevelResult {
    let by_index: HashMap<u32, &RequestTruth> = truth
        .iter()
        .filter(|t| t.status != 0)
        .filter_map(|t| Some((t.request_id.as_deref()?.strip_prefix(PREFIX)?.parse().ok()?, t)))
        .collect();
    let (mut ttft_us, mut itl_us) = (Vec::new(), Vec::new());
    let mut succeeded = 0;
    for rec in run.records.iter().filter(|r| r.succeeded()) {
        succeeded += 1;
        let Some(t) = by_index.get(&rec.index) else { continue };
        if t.token_chunks.len() != rec.chunks_us.len() || t.token_chunks.is_empty() {
            continue;
        }
        let server_us = |i: usize| (t.token_chunks[i] - t.arrived).as_secs_f64() * 1e6;
        let client_us = |i: usize| f64::from(rec.chunks_us[i]);
        ttft_us.push(client_us(0) - server_us(0));
        for i in 1..rec.chunks_us.len() {
            itl_us.push((client_us(i) - client_us(i - 1)) - (server_us(i) - server_us(i - 1)));
        }
    }
    // Chunks the client received: the server's count for every answered request.
    let events: u64 = truth.iter().map(|t| t.token_chunks.len() as u64).sum();
    let summary = Summary::compute(run);
    LevelResult {
        streams: run.config.traffic.max_concurrency.unwrap_or(0),
        requests: run.records.len(),
        succeeded,
        server_in_flight_max,
        events,
        ttft_error: ErrorStats::of(&ttft_us),
        itl_error: ErrorStats::of(&itl_us),
        cpu_us_per_event: client_cpu_s.filter(|_| events > 0).map(|s| s * 1e6 / events as f64),
        dispatch_lag_p99_ms: summary.dispatch_lag.map(|l| l.p99_ms),
        health: summary.health,
        wall_s: started.elapsed().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn refused(options: SelftestOptions) -> String {
        match selftest(&options, |_, _| {}).await {
            Err(e) => e.to_string(),
            Ok(_) => panic!("ran a self-test that should have been refused"),
        }
    }

    #[tokio::test]
    async fn levels_and_tokens_beyond_what_a_machine_can_run_are_refused_before_anything_starts() {
        let huge = SelftestOptions { levels: vec![1, 1_000_000_000], ..SelftestOptions::default() };
        assert!(refused(huge).await.starts_with("a level of 1000000000 streams is more than 65536"));
        let long = SelftestOptions { output_tokens: u32::MAX, ..SelftestOptions::default() };
        assert!(refused(long).await.starts_with("--output-tokens 4294967295 is more than 100000"));
        let slow = SelftestOptions { itl: Duration::from_secs(10), ..SelftestOptions::default() };
        assert!(refused(slow).await.starts_with("each request would stream for 990 s, longer than the 900 s"));
    }

    #[test]
    fn the_least_duration_counts_each_levels_rounds_and_its_warm_ups() {
        let o = SelftestOptions::default();
        assert_eq!(o.request_time(), Duration::from_millis(50 + 99 * 10));
        // 1 stream: 50 requests one by one; 100 streams: 200 requests in 2 rounds; the
        // others 2 rounds each; every level one round of one-token warm-ups.
        assert_eq!(o.least_duration(), o.request_time() * (50 + 2 * 4) + o.ttft * 5);
        let one = SelftestOptions { levels: vec![3], min_requests: 1, requests_per_stream: 1, ..o };
        assert_eq!(one.least_duration(), one.request_time() + one.ttft);
    }
}
