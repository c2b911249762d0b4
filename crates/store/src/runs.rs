//! Runs as the store holds them: the values that go into the store and come out of it, and
//! the ways commands name runs.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use servebench_core::config::{Metric, RunConfig};
use servebench_core::metrics::Summary;
use servebench_core::record::{RequestRecord, RunResult};

/// A run's number in the store. Numbers are never reused, even after a run is removed.
pub type RunId = i64;

/// How a run came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// Measured against a server by `bench serve`.
    Bench,
    /// Computed by the simulator.
    Predict,
    /// Read from a vLLM result file or report.
    Import,
    /// One point of a sweep.
    Sweep,
}

impl RunKind {
    pub const ALL: [RunKind; 4] = [RunKind::Bench, RunKind::Predict, RunKind::Import, RunKind::Sweep];

    /// The name stored in the database and shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Bench => "bench",
            RunKind::Predict => "predict",
            RunKind::Import => "import",
            RunKind::Sweep => "sweep",
        }
    }

    /// The kind [`RunKind::as_str`] names; `None` for any other text.
    pub fn from_name(s: &str) -> Option<RunKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for RunKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run named on the command line: its number (`12`, `#12`) or its short id (`kq3v8x2a`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RunRef {
    /// The run's number.
    Id(RunId),
    /// The run's short id, lowercase.
    Uid(String),
}

impl fmt::Display for RunRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunRef::Id(id) => write!(f, "{id}"),
            RunRef::Uid(uid) => write!(f, "{uid:?}"),
        }
    }
}

impl From<RunId> for RunRef {
    fn from(id: RunId) -> Self {
        RunRef::Id(id)
    }
}

/// Why a run reference could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadRunRef {
    #[error("{0:?} is not a run: give its number (12) or its short id (kq3v8x2a) as `servebench runs list` shows them")]
    Unreadable(String),
    /// All digits, past the largest run number.
    #[error("{0} is past the largest run number ({max}); `servebench runs list` shows the ids", max = RunId::MAX)]
    TooLarge(String),
}

impl FromStr for RunRef {
    type Err = BadRunRef;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let digits = t.strip_prefix('#').unwrap_or(t);
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return digits.parse().map(RunRef::Id).map_err(|_| BadRunRef::TooLarge(digits.to_string()));
        }
        if !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Ok(RunRef::Uid(t.to_ascii_lowercase()));
        }
        Err(BadRunRef::Unreadable(s.to_string()))
    }
}

/// Runs named on the command line where several may be: one run ([`RunRef`]) or an
/// inclusive range of run numbers (`3-11`, `3..11`, `#3-#11`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RunSpec {
    One(RunRef),
    /// The runs numbered from the first to the second, both included, that are in the store.
    Range(RunId, RunId),
}

/// Why a run or range of runs could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadRunSpec {
    #[error(
        "{0:?} is not a run: give its number (12) or its short id (kq3v8x2a) as `servebench runs list` shows them, \
         or a range of numbers from low to high (3-11)"
    )]
    Unreadable(String),
    #[error(transparent)]
    Run(BadRunRef),
    #[error("the range {given:?} runs from high to low; write it from low to high: {to}-{from}")]
    Reversed { given: String, from: RunId, to: RunId },
}

impl FromStr for RunSpec {
    type Err = BadRunSpec;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        // A number past the largest says so; anything else unreadable names the whole spec.
        let spec_error = |e: BadRunRef| match e {
            BadRunRef::TooLarge(_) => BadRunSpec::Run(e),
            BadRunRef::Unreadable(_) => BadRunSpec::Unreadable(s.to_string()),
        };
        let ends = t.split_once("..").or_else(|| t.split_once('-'));
        if let Some((from, to)) = ends {
            let number = |e: &str| match e.trim().parse::<RunRef>().map_err(spec_error)? {
                RunRef::Id(id) => Ok(id),
                RunRef::Uid(_) => Err(BadRunSpec::Unreadable(s.to_string())),
            };
            let (from, to) = (number(from)?, number(to)?);
            return if from <= to {
                Ok(RunSpec::Range(from, to))
            } else {
                Err(BadRunSpec::Reversed { given: s.to_string(), from, to })
            };
        }
        t.parse().map(RunSpec::One).map_err(spec_error)
    }
}

impl From<RunRef> for RunSpec {
    fn from(run: RunRef) -> Self {
        RunSpec::One(run)
    }
}

/// Where an imported run was read: the file, and the line its block or document starts on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// The file's absolute path when it could be found, else the path as given.
    pub file: String,
    /// 1-based line of the result block's header, or of the JSON document.
    pub line: Option<usize>,
}

/// How much of each request's token timing the stored records hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChunkTimes {
    /// Every token chunk's time: TTFT, ITL, TPOT and E2EL can all be recomputed.
    All,
    /// Only the first and last chunk times (a result file saved without per-request ITLs):
    /// `chunks_us` holds at most those two, so TTFT and E2EL can be recomputed but not ITL.
    FirstLast,
}

impl ChunkTimes {
    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            ChunkTimes::All => "all",
            ChunkTimes::FirstLast => "first_last",
        }
    }

    /// The value [`ChunkTimes::as_str`] names; `None` for any other text.
    pub fn from_name(s: &str) -> Option<ChunkTimes> {
        [ChunkTimes::All, ChunkTimes::FirstLast].into_iter().find(|c| c.as_str() == s)
    }
}

/// A run's per-request records. Generated texts are not stored.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRecords {
    /// Whether every chunk time was kept, or only the first and last.
    pub chunk_times: ChunkTimes,
    /// One per request, in the order they were planned (their `text` is empty).
    pub records: Vec<RequestRecord>,
}

/// A run to insert.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRun {
    pub kind: RunKind,
    /// When the run itself started, RFC 3339 (the insert time is recorded separately).
    pub started_at: Option<String>,
    /// Key/value labels in order; keys are unique (see [`NewRun::set_label`]).
    pub labels: Vec<(String, String)>,
    pub model: Option<String>,
    pub backend: Option<String>,
    /// The server's base URL, or `sim MODEL@HARDWARE` for the simulator.
    pub target: Option<String>,
    pub num_prompts: Option<u64>,
    /// The resolved [`RunConfig`] as JSON, when known.
    pub config: Option<Value>,
    pub summary: Summary,
    /// Whatever the caller knows about the environment (client host, server models, version,
    /// Prometheus text before and after); stored as given.
    pub environment: Option<Value>,
    pub notes: Vec<String>,
    pub interrupted: bool,
    pub source: Option<Source>,
    pub records: Option<RunRecords>,
    /// Identifies an imported block or document (file content hash and line), so importing
    /// the same file twice does not store its runs twice.
    pub fingerprint: Option<String>,
}

impl NewRun {
    /// A run with only a summary (an import); everything else empty.
    pub fn from_summary(kind: RunKind, summary: Summary) -> NewRun {
        NewRun {
            kind,
            started_at: None,
            labels: Vec::new(),
            model: None,
            backend: None,
            target: None,
            num_prompts: None,
            config: None,
            summary,
            environment: None,
            notes: Vec::new(),
            interrupted: false,
            source: None,
            records: None,
            fingerprint: None,
        }
    }

    /// A measured or predicted run: its config, records, notes and labels (`--label` as
    /// `label=...`, then the `--metadata` pairs).
    pub fn from_run(kind: RunKind, run: &RunResult, summary: &Summary) -> NewRun {
        let mut new = NewRun::from_summary(kind, summary.clone());
        new.apply_config(&run.config);
        new.started_at = Some(run.started_at.clone()).filter(|s| !s.is_empty());
        new.notes = run.notes.clone();
        new.interrupted = run.interrupted;
        new.records = Some(RunRecords { chunk_times: ChunkTimes::All, records: run.records.clone() });
        new
    }

    /// Fills the model, backend, target, prompt count, labels (a simulator's options, `--label`,
    /// `--metadata`) and config from `config`.
    pub fn apply_config(&mut self, config: &RunConfig) {
        let target = &config.target;
        self.model = Some(target.model_id.clone());
        self.backend = Some(target.backend.name().to_string());
        self.target = Some(match &target.sim {
            Some(sim) => format!("{SIM_TARGET}{}@{}", sim.model, sim.hardware),
            None => target.base_url.clone(),
        });
        self.num_prompts = Some(config.traffic.num_prompts as u64);
        // A prediction's serving options (`tp=2`, `max-num-seqs=64`) tell it apart from one of
        // another deployment, under the keys a pasted `vllm serve` line gives an import.
        for (k, v) in target.sim.iter().flat_map(|sim| &sim.options) {
            self.set_label(k, v);
        }
        if let Some(label) = config.output.label.as_deref().filter(|l| !l.is_empty()) {
            self.set_label("label", label);
        }
        for (k, v) in &config.output.metadata {
            self.set_label(k, v);
        }
        self.config = serde_json::to_value(config).ok();
    }

    /// Sets label `key` to `value`, replacing an earlier value of the same key in place.
    pub fn set_label(&mut self, key: &str, value: &str) {
        match self.labels.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value.to_string(),
            None => self.labels.push((key.to_string(), value.to_string())),
        }
    }

    /// The run with label `key` set to `value` (see [`NewRun::set_label`]).
    pub fn with_label(mut self, key: &str, value: &str) -> NewRun {
        self.set_label(key, value);
        self
    }

    /// The run with its environment record.
    pub fn with_environment(mut self, environment: Value) -> NewRun {
        self.environment = Some(environment);
        self
    }

    /// The label `key`, if set.
    pub fn label(&self, key: &str) -> Option<&str> {
        label_of(&self.labels, key)
    }
}

fn label_of<'a>(labels: &'a [(String, String)], key: &str) -> Option<&'a str> {
    labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Mean, median and P99 of one metric, in milliseconds (P99 when the run computed it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KeyStats {
    pub mean_ms: f64,
    pub median_ms: f64,
    pub p99_ms: Option<f64>,
}

/// The metrics whose key numbers are columns of the store.
pub(crate) const KEY_METRICS: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

impl KeyStats {
    pub(crate) fn of(summary: &Summary, metric: Metric) -> Option<KeyStats> {
        summary.metric(metric).map(|m| KeyStats {
            mean_ms: m.mean_ms,
            median_ms: m.median_ms,
            p99_ms: m.percentile(99.0),
        })
    }
}

/// How a run's `target` names the built-in simulator: `sim MODEL@HARDWARE` (a server is its
/// URL, which has no space).
const SIM_TARGET: &str = "sim ";

/// The label whose value is a run's GPU count (`gpus=8`): the importer reads it, and `runs
/// label` sets the count with it.
pub(crate) const GPUS_LABEL: &str = "gpus";

/// A label's value as a count of GPUs or parallel ranks: a whole number of at least 1
/// (`gpus=H100` is none).
pub(crate) fn count_of(text: &str) -> Option<u32> {
    text.trim().parse::<u32>().ok().filter(|&n| n >= 1)
}

/// One run as `runs list` shows it: its identity, labels and key numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRow {
    pub id: RunId,
    /// Short stable id: 8 characters, a letter then letters and digits.
    pub uid: String,
    pub kind: RunKind,
    /// When the run was stored, RFC 3339 UTC.
    pub created_at: String,
    /// When the run itself started, RFC 3339, when known.
    pub started_at: Option<String>,
    pub model: Option<String>,
    pub backend: Option<String>,
    pub target: Option<String>,
    pub labels: Vec<(String, String)>,
    pub num_prompts: Option<u64>,
    pub completed: u64,
    /// `None` when the source did not say (an old vLLM report).
    pub failed: Option<u64>,
    pub max_concurrency: Option<u64>,
    /// Requests per second; infinity when everything was sent at once.
    pub request_rate: Option<f64>,
    pub duration_s: f64,
    pub request_throughput: f64,
    pub output_throughput: Option<f64>,
    pub total_token_throughput: Option<f64>,
    /// TTFT, TPOT, ITL and E2EL, in that order.
    pub stats: [Option<KeyStats>; 4],
    pub interrupted: bool,
    pub source: Option<Source>,
    /// How many per-request records are stored.
    pub num_requests: u64,
    /// How much chunk timing the records hold; `None` without records.
    pub chunk_times: Option<ChunkTimes>,
    /// How many GPUs served the run, when known (its summary's).
    pub gpus: Option<u32>,
    /// What one of them costs an hour, when given (its summary's).
    pub gpu_hour_cost: Option<f64>,
    /// A pooling run's input sequences a second (its summary's); `None` for a generation run.
    pub input_sequence_throughput: Option<f64>,
}

impl RunRow {
    /// `MODEL@HARDWARE` of a run against the built-in simulator; `None` for a server.
    pub fn simulated(&self) -> Option<&str> {
        self.target.as_deref().and_then(|t| t.strip_prefix(SIM_TARGET))
    }

    /// The label `key`, if set.
    pub fn label(&self, key: &str) -> Option<&str> {
        label_of(&self.labels, key)
    }

    /// The key numbers of TTFT, TPOT, ITL or E2EL; none for a run that completed no request
    /// (its summary reads 0).
    pub fn key_stats(&self, metric: Metric) -> Option<KeyStats> {
        if self.completed == 0 {
            return None;
        }
        KEY_METRICS.iter().position(|m| *m == metric).and_then(|i| self.stats[i])
    }
}

/// One run with everything stored about it.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredRun {
    pub row: RunRow,
    pub summary: Summary,
    /// The resolved config as JSON (see [`StoredRun::run_config`]); `None` for imports
    /// without one.
    pub config: Option<Value>,
    /// What the run recorded about its client and server, as stored.
    pub environment: Option<Value>,
    pub notes: Vec<String>,
    /// `None` when the run has no records or they were not asked for.
    pub records: Option<RunRecords>,
}

impl StoredRun {
    /// The stored config read back as a [`RunConfig`]; `None` when there is none or it was
    /// written by a servebench whose config had other fields.
    pub fn run_config(&self) -> Option<RunConfig> {
        self.config.clone().and_then(|c| serde_json::from_value(c).ok())
    }
}

/// Which runs to list or export. Every condition given must hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunFilter {
    /// `(key, Some(value))`: the label is set to exactly that value; `(key, None)`: it is set.
    pub labels: Vec<(String, Option<String>)>,
    /// A case-insensitive substring of the model id.
    pub model: Option<String>,
    pub kind: Option<RunKind>,
    /// The run started (or, if its start is unknown, was stored) at or after this time.
    pub since: Option<jiff::Timestamp>,
    /// ... and before this time.
    pub until: Option<jiff::Timestamp>,
    /// At most this many runs: the most recent ones (highest numbers), listed in number order.
    pub limit: Option<usize>,
}

impl RunFilter {
    /// Reads a `--label` filter: `KEY=VALUE` or `KEY`; an empty key is an error (no label has
    /// one, so it would match nothing).
    pub fn parse_label(s: &str) -> Result<(String, Option<String>), crate::StoreError> {
        let (key, value) = match s.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
            None => (s.trim(), None),
        };
        if key.is_empty() {
            return Err(crate::StoreError::EmptyLabelKey(s.to_string()));
        }
        Ok((key.to_string(), value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_refs_are_numbers_or_short_ids() {
        assert_eq!("12".parse::<RunRef>().unwrap(), RunRef::Id(12));
        assert_eq!("#7".parse::<RunRef>().unwrap(), RunRef::Id(7));
        assert_eq!("KQ3v8x2a".parse::<RunRef>().unwrap(), RunRef::Uid("kq3v8x2a".into()));
        assert!("".parse::<RunRef>().is_err());
        assert!("a b".parse::<RunRef>().is_err());
        let err = "99999999999999999999999".parse::<RunRef>().unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "99999999999999999999999 is past the largest run number ({}); `servebench runs list` shows the ids",
                i64::MAX
            )
        );
    }

    #[test]
    fn run_specs_are_runs_or_ranges_from_low_to_high() {
        assert_eq!("3-11".parse::<RunSpec>().unwrap(), RunSpec::Range(3, 11));
        assert_eq!("#3..#11".parse::<RunSpec>().unwrap(), RunSpec::Range(3, 11));
        assert_eq!(" 5 - 5 ".parse::<RunSpec>().unwrap(), RunSpec::Range(5, 5));
        assert_eq!("kq3v8x2a".parse::<RunSpec>().unwrap(), RunSpec::One(RunRef::Uid("kq3v8x2a".into())));
        assert_eq!("#12".parse::<RunSpec>().unwrap(), RunSpec::One(RunRef::Id(12)));
        for bad in ["a-b", "3-", "-3", "3..", "1-2-3", ""] {
            let err = bad.parse::<RunSpec>().unwrap_err();
            assert!(err.to_string().contains("(3-11)"), "{bad}: {err}");
        }
        let err = "11-3".parse::<RunSpec>().unwrap_err();
        assert_eq!(err.to_string(), "the range \"11-3\" runs from high to low; write it from low to high: 3-11");
        for too_large in ["18446744073709551616", "1-18446744073709551616"] {
            let err = too_large.parse::<RunSpec>().unwrap_err();
            assert!(err.to_string().contains("18446744073709551616 is past the largest run number"), "{err}");
        }
    }

    #[test]
    fn labels_keep_their_order_and_replace_by_key() {
        let mut run = NewRun::from_summary(RunKind::Import, Summary::default());
        run.set_label("b", "1");
        run.set_label("a", "2");
        run.set_label("b", "3");
        assert_eq!(run.labels, [("b".to_string(), "3".to_string()), ("a".to_string(), "2".to_string())]);
        assert_eq!(run.label("a"), Some("2"));
    }

    #[test]
    fn a_bench_run_takes_its_labels_and_target_from_the_config() {
        let mut config = RunConfig::for_target("http://h:8000", "Qwen/Qwen3-8B");
        config.output.label = Some("nightly".into());
        config.output.metadata = vec![("gpu".into(), "H100".into()), ("tp".into(), "2".into())];
        let run = RunResult {
            date: "20250601-120000".into(),
            started_at: "2025-06-01T12:00:00+02:00".into(),
            interrupted: true,
            notes: vec!["a note".into()],
            token_source: Default::default(),
            ..RunResult::finished(config, vec![RequestRecord::default()], 1.0)
        };
        let new = NewRun::from_run(RunKind::Bench, &run, &Summary::default());
        assert_eq!(new.target.as_deref(), Some("http://h:8000"));
        assert_eq!(new.model.as_deref(), Some("Qwen/Qwen3-8B"));
        assert_eq!(new.backend.as_deref(), Some("vllm"));
        assert_eq!(new.num_prompts, Some(1000));
        assert_eq!(new.label("label"), Some("nightly"));
        assert_eq!(new.label("gpu"), Some("H100"));
        assert!(new.interrupted);
        assert_eq!(new.records.as_ref().unwrap().records.len(), 1);
        assert_eq!(new.started_at.as_deref(), Some("2025-06-01T12:00:00+02:00"));
    }

    #[test]
    fn label_filters_take_a_value_or_not() {
        assert_eq!(RunFilter::parse_label("gpu=H100").unwrap(), ("gpu".into(), Some("H100".into())));
        assert_eq!(RunFilter::parse_label("note=a=b").unwrap(), ("note".into(), Some("a=b".into())));
        assert_eq!(RunFilter::parse_label("gpu").unwrap(), ("gpu".into(), None));
        for empty in ["=H100", " = x", "", "  "] {
            let err = RunFilter::parse_label(empty).unwrap_err();
            assert!(err.to_string().contains("the label's key is empty"), "{empty:?}: {err}");
        }
    }
}
