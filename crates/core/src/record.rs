//! What was measured: one [`RequestRecord`] per request, and a [`RunResult`] per run.
//!
//! Records hold raw timestamps only; every statistic is derived later by [`crate::metrics`].
//! Times are kept as integer offsets so a record stays small and exact: the arrival and send
//! times in nanoseconds since the run's start, token-chunk times in microseconds since the
//! request was sent (a `u32` covers 71 minutes per request).

use serde::{Deserialize, Serialize};

use crate::config::RunConfig;
use crate::shard::Sharding;

/// Why a request failed. Counted per kind in the report and the JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The server answered with a non-2xx status.
    HttpStatus,
    /// The connection could not be made, or broke before a response.
    Connect,
    /// The per-request timeout passed.
    Timeout,
    /// The stream carried an error event (`{"error": ...}`) after a 200.
    InBandError,
    /// The stream ended without any token.
    NoToken,
    /// The stream broke off, or could not be decoded.
    Stream,
    /// The run was interrupted while this request was in flight.
    Interrupted,
    /// The run was interrupted before this request was sent. Not a failure of the server:
    /// such requests are counted in [`RunResult::not_sent`], not in the failed requests.
    NotSent,
}

impl FailureKind {
    /// The kind's name in the JSON and the store (its serde spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::HttpStatus => "http_status",
            FailureKind::Connect => "connect",
            FailureKind::Timeout => "timeout",
            FailureKind::InBandError => "in_band_error",
            FailureKind::NoToken => "no_token",
            FailureKind::Stream => "stream",
            FailureKind::Interrupted => "interrupted",
            FailureKind::NotSent => "not_sent",
        }
    }
}

/// A failed request's reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub kind: FailureKind,
    /// Human-readable detail: the status line, the error message, the server's error text.
    pub message: String,
}

/// The longest a request's times can be kept: its token times are µs after its send, in 32
/// bits (71.6 minutes). A request that lives longer fails with [`OUTLIVED`] rather than read as
/// saturated times, in a measured run as in a prediction.
pub const RECORD_SPAN_US: u64 = u32::MAX as u64;

/// Why a request that outlived [`RECORD_SPAN_US`] failed.
pub const OUTLIVED: &str = "the request outlived the 71.6 minutes (2^32 µs) a request's token times are kept to; \
                            send fewer or shorter requests at once";

/// Token counts reported by the server (`usage`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
}

/// Where a multi-turn request sits in its conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRef {
    pub conversation: u32,
    pub turn: u32,
    /// Prompt tokens shared with the previous turn's prompt plus answer (reusable by a prefix cache).
    pub shared_prefix_tokens: u32,
}

/// Everything measured about one request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Position in the dataset (vLLM's per-request arrays are in this order).
    pub index: u32,
    /// When the schedule meant the request to arrive, ns since run start.
    pub planned_ns: u64,
    /// When the dispatcher actually released it (>= planned; the gap is client lag), ns since run start.
    pub arrival_ns: u64,
    /// When it was sent, after any wait for a concurrency slot (vLLM's `start_time`), ns since run start.
    pub start_ns: u64,
    /// Arrival times of the chunks that carried tokens, µs after `start_ns`, taken when the bytes arrived.
    pub chunks_us: Vec<u32>,
    /// When the response ended (the stream closed), µs after `start_ns`; 0 if it never started.
    pub end_us: u32,
    /// The `max_tokens` asked for.
    pub max_tokens: u32,
    /// Prompt tokens counted by the client (with the chat template applied), if a tokenizer was used.
    pub prompt_tokens_client: Option<u32>,
    /// Token counts from the server's `usage`, wherever in the stream it came.
    pub usage: Usage,
    /// Tokens counted by the client in the generated text after the run, if a tokenizer was used.
    pub output_tokens_client: Option<u32>,
    /// The generated text (kept for `--save-detailed` and post-run token counting).
    pub text: String,
    /// HTTP status, 0 if none was received.
    pub status: u16,
    /// Set when the request failed.
    pub failure: Option<Failure>,
    /// The request was sent again on a fresh connection because a pooled one had already closed.
    pub retried: bool,
    /// Set for a turn of a multi-turn conversation.
    pub turn: Option<TurnRef>,
    /// Token chunks that carried only reasoning (`reasoning_content` or `reasoning` deltas).
    #[serde(default)]
    pub reasoning_chunks: u32,
    /// When the first reasoning chunk arrived, µs after `start_ns`.
    #[serde(default)]
    pub first_reasoning_us: Option<u32>,
    /// When the first answer chunk (any token chunk not only reasoning) arrived, µs after
    /// `start_ns`.
    #[serde(default)]
    pub first_answer_us: Option<u32>,
    /// Server-reported timings, in seconds, when the stream carried them (vLLM `metrics` object).
    pub server_queue_s: Option<f64>,
    pub server_ttft_s: Option<f64>,
    /// Where the time before the first token went, on the HTTP side.
    #[serde(default)]
    pub http: HttpTimes,
}

/// One request's HTTP timing breakdown, µs after `start_ns` for the response's head and first
/// byte; `None` where it did not happen (a reused connection has no connect, plain HTTP no TLS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpTimes {
    /// The TCP connect of a new connection, µs long.
    pub connect_us: Option<u32>,
    /// Its TLS handshake (and proxy tunnel), µs long.
    pub tls_us: Option<u32>,
    /// When the response's status line and headers had arrived.
    pub headers_us: Option<u32>,
    /// When the first byte of the body arrived.
    pub first_byte_us: Option<u32>,
}

/// A record's whole microseconds in seconds, as every figure reads them (the summary's
/// description of a run's gaps included, so it must stay this one map).
pub fn micros_s(us: u32) -> f64 {
    f64::from(us) * 1e-6
}

impl RequestRecord {
    /// Whether the request completed without a failure (a never-sent request did not).
    pub fn succeeded(&self) -> bool {
        self.failure.is_none()
    }

    /// Whether the request was never sent because the run was interrupted first.
    pub fn never_sent(&self) -> bool {
        self.failure.as_ref().is_some_and(|f| f.kind == FailureKind::NotSent)
    }

    /// Time to first token, seconds (0 when no token came, as vLLM records it).
    pub fn ttft_s(&self) -> f64 {
        self.chunks_us.first().map_or(0.0, |&t| micros_s(t))
    }

    /// Time from send to the last token chunk, seconds (vLLM's `latency`).
    pub fn latency_s(&self) -> f64 {
        self.chunks_us.last().map_or(0.0, |&t| micros_s(t))
    }

    /// Gaps between consecutive token chunks, whole microseconds.
    pub fn gaps_us(&self) -> impl Iterator<Item = u32> + '_ {
        self.chunks_us.windows(2).map(|w| w[1].saturating_sub(w[0]))
    }

    /// Gaps between consecutive token chunks, seconds (vLLM's `itl`).
    pub fn itl_s(&self) -> impl Iterator<Item = f64> + '_ {
        self.gaps_us().map(micros_s)
    }

    /// Seconds waited for a concurrency slot (vLLM's `client_queue_time`).
    pub fn client_queue_s(&self) -> f64 {
        self.start_ns.saturating_sub(self.arrival_ns) as f64 * 1e-9
    }

    /// Seconds between the planned and the actual arrival: how late the client was.
    pub fn dispatch_lag_s(&self) -> f64 {
        self.arrival_ns.saturating_sub(self.planned_ns) as f64 * 1e-9
    }

    /// When the request was last heard from, µs after `start_ns`: its last token chunk or its
    /// stream's close, whichever came later.
    pub fn last_heard_us(&self) -> u32 {
        self.chunks_us.last().copied().unwrap_or(0).max(self.end_us)
    }

    /// Send time in seconds since run start.
    pub fn start_s(&self) -> f64 {
        self.start_ns as f64 * 1e-9
    }

    /// Output tokens as vLLM counts them: the server's `completion_tokens`, else the client's
    /// count of the text, else 1 (vLLM's fallback without a tokenizer). 0 for failures.
    pub fn output_tokens(&self) -> u32 {
        if !self.succeeded() {
            return 0;
        }
        match self.usage.completion_tokens {
            Some(n) if n > 0 => n,
            _ => match self.output_tokens_client {
                Some(n) if n > 0 => n,
                _ => 1,
            },
        }
    }

    /// Prompt tokens as vLLM 0.20+ counts them: the server's `prompt_tokens`, else the client's.
    pub fn prompt_tokens(&self) -> u32 {
        self.usage.prompt_tokens.or(self.prompt_tokens_client).unwrap_or(0)
    }
}

/// One run: its config, what was measured, and how it ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub config: RunConfig,
    /// One per request, in dataset order (failed and unsent ones included).
    pub records: Vec<RequestRecord>,
    /// Benchmark duration in seconds (vLLM semantics: from the start of dispatch to the last end).
    pub duration_s: f64,
    /// Wall-clock start, `YYYYMMDD-HHMMSS` local time (vLLM's `date`).
    pub date: String,
    /// Wall-clock start as RFC 3339, for the run store.
    pub started_at: String,
    /// The run was stopped early (Ctrl-C, or a stop rule); what was measured until then is here.
    pub interrupted: bool,
    /// Requests never sent because the run was interrupted.
    pub not_sent: usize,
    /// The stop rule that ended the run early (`--max-failures`, `--stall-timeout`), in words;
    /// `None` where the run ended by itself or was interrupted by a signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// Lines the run logged that belong with its result (token-count source, warnings).
    pub notes: Vec<String>,
    /// Where token counts came from.
    pub token_source: TokenSource,
    /// What the client observed about itself during the timed run (a measured run only).
    #[serde(default)]
    pub client: Option<ClientObservations>,
    /// A worker's share of a sharded run, or the merge of one (`None` for a run of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Sharding>,
    /// What the server said about itself during the run (`--server-metrics`, `--scrape`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<crate::telemetry::ServerTelemetry>,
    /// The server's speculative-decoding counters read just before and just after the timed
    /// run (vLLM's `/metrics`); `None` where it has no such counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode: Option<crate::telemetry::SpecDecodeWindow>,
    /// The probe requests sent beside the timed run (`--probe-request-rate`), in the order
    /// they were sent; empty without probes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeRecord>,
}

/// The prompt of every probe request (`--probe-request-rate`), as vLLM's.
pub const PROBE_PROMPT: &str = "Hi";

/// One probe request (`--probe-request-rate`): a one-token request of [`PROBE_PROMPT`] sent
/// beside the timed run, outside its concurrency cap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// When it was sent, seconds since the timed run began.
    pub sent_s: f64,
    /// From its send to its last byte, seconds (0 when it failed before an answer).
    pub latency_s: f64,
    /// Why it failed; `None` when it succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What the client process observed about itself during the timed run, gathered off the hot
/// path by a periodic ticker: how late the runtime woke it, the CPU it used, its open files.
/// [`crate::metrics::Health`] turns this into the run's health verdict.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientObservations {
    /// The ticker's period, ms.
    pub tick_ms: f64,
    /// Ticks taken.
    pub ticks: u64,
    /// How late the ticks woke against their due times, ms.
    pub lateness_p50_ms: f64,
    pub lateness_p99_ms: f64,
    pub lateness_max_ms: f64,
    /// Ticks that woke noticeably late: `(due, late)`, seconds since the run's start and ms,
    /// in time order (the first ones only).
    pub late_ticks: Vec<(f64, f64)>,
    /// How long the ticker watched, seconds.
    pub wall_s: f64,
    /// CPU time the whole process used meanwhile (user and system, every thread), seconds.
    pub cpu_s: Option<f64>,
    /// CPU cores this process may use.
    pub cores: u32,
    /// The soft limit on open files.
    pub fd_limit: Option<u64>,
    /// One entry per whole second of the run, from its start.
    pub per_second: Vec<ClientSecond>,
}

/// One second of the client's own use of the machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientSecond {
    /// CPU used in that second, in cores (1.0: one core busy all second).
    pub cpu_cores: Option<f64>,
    /// File descriptors open at its end.
    pub open_fds: Option<u64>,
}

impl RunResult {
    /// A finished run of `config` that measured `records` over `duration_s` and nothing else:
    /// no start time, not interrupted, token counts from the server's usage, no client, shard,
    /// telemetry, speculative-decoding or probe observations. Other fields are set with struct update
    /// syntax.
    pub fn finished(config: RunConfig, records: Vec<RequestRecord>, duration_s: f64) -> RunResult {
        RunResult {
            config,
            records,
            duration_s,
            date: String::new(),
            started_at: String::new(),
            interrupted: false,
            not_sent: 0,
            stopped_by: None,
            notes: Vec::new(),
            token_source: TokenSource::ServerUsage,
            client: None,
            shard: None,
            telemetry: None,
            spec_decode: None,
            probes: Vec::new(),
        }
    }
}

/// A finished run of `records` lasting `duration_s`, against a local target with vLLM's
/// defaults: the base of the metric and report tests.
#[cfg(test)]
pub(crate) fn test_run(records: Vec<RequestRecord>, duration_s: f64) -> RunResult {
    RunResult {
        date: "20250101-120000".into(),
        started_at: "2025-01-01T12:00:00Z".into(),
        ..RunResult::finished(RunConfig::for_target("http://127.0.0.1:8000", "org/model"), records, duration_s)
    }
}

/// Where prompt and output token counts came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// Counted with a local tokenizer; the server's usage is kept beside it.
    #[default]
    LocalTokenizer,
    /// No tokenizer: counts come from the server's `usage`.
    ServerUsage,
    /// Computed by the simulator in virtual time.
    Simulated,
}
