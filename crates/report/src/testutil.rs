//! Fixtures of this crate's tests: the reference reports imported into an in-memory store,
//! and synthetic measured runs with per-request records.

use servebench_core::config::{Metric, RunConfig};
use servebench_core::metrics::Summary;
use servebench_core::record::{Failure, FailureKind, RequestRecord, RunResult, Usage};
use servebench_store::import::import_bytes;
use servebench_store::{NewRun, RunKind, RunRef, Store, StoredRun};

pub(crate) const R000: &str = include_str!("../../../testdata/vllm-reports/000-dense-models.txt");
pub(crate) const R001: &str = include_str!("../../../testdata/vllm-reports/001-prompt-sweep.txt");

/// Stores `runs` in a fresh in-memory store and reads them back with their records, with a
/// fixed storage time and short ids so that printed output is stable.
pub(crate) fn stored(runs: &[NewRun]) -> Vec<StoredRun> {
    let mut store = Store::open_in_memory().expect("an in-memory store");
    let ids: Vec<_> = runs.iter().map(|r| store.insert(r).expect("insert")).collect();
    ids.into_iter()
        .map(|id| {
            let mut run = store.get(&RunRef::Id(id)).expect("read back");
            run.row.created_at = "2026-01-02T03:04:05.678Z".into();
            run.row.uid = format!("run{id:05}");
            run
        })
        .collect()
}

fn imported(text: &str, name: &str) -> Vec<NewRun> {
    let report = import_bytes(text.as_bytes(), name);
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    report.runs
}

/// The 11 models of reference report 000, at max concurrency 4.
pub(crate) fn reference_000() -> Vec<StoredRun> {
    stored(&imported(R000, "/data/000-dense-models.txt"))
}

/// The 23 blocks of reference report 001 (num_prompts sweeps at two prompt lengths, then
/// four single long prompts).
pub(crate) fn reference_001() -> Vec<StoredRun> {
    stored(&imported(R001, "/data/001-prompt-sweep.txt"))
}

/// The 12 blocks of reference report 001 at 80-token prompts: num_prompts 1 to 2048.
pub(crate) fn reference_001_short() -> Vec<StoredRun> {
    reference_001().into_iter().filter(|r| r.row.label("seq_length") == Some("80")).collect()
}

/// A synthetic measured run: `requests` requests sent at once through `concurrency` slots,
/// with TTFTs around `ttft_ms`, `tokens` output tokens per request one chunk each, gaps
/// around `itl_ms`; every `fail_every`-th request fails.
#[derive(Clone, Debug)]
pub(crate) struct Synth {
    pub model: &'static str,
    pub requests: usize,
    pub concurrency: usize,
    pub ttft_ms: f64,
    pub itl_ms: f64,
    pub tokens: u32,
    pub seed: u64,
    pub fail_every: Option<usize>,
}

impl Synth {
    pub(crate) fn new(model: &'static str, seed: u64) -> Synth {
        Synth { model, requests: 60, concurrency: 4, ttft_ms: 100.0, itl_ms: 20.0, tokens: 24, seed, fail_every: None }
    }

    pub(crate) fn run(&self) -> RunResult {
        let mut x = self.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut uniform = move || {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (x >> 11) as f64 * 2f64.powi(-53)
        };
        let mut free_at_ns = vec![0u64; self.concurrency.max(1)];
        let mut records = Vec::new();
        let mut last_end_ns = 0u64;
        for i in 0..self.requests {
            let slot = (0..free_at_ns.len()).min_by_key(|&s| free_at_ns[s]).unwrap_or(0);
            let start_ns = free_at_ns[slot];
            let failed = self.fail_every.is_some_and(|k| k > 0 && i % k == k - 1);
            let ttft_us = (self.ttft_ms * (0.6 + 0.8 * uniform()) * 1000.0) as u32;
            let mut chunks_us = vec![ttft_us];
            if !failed {
                for _ in 1..self.tokens {
                    let spike = if uniform() < 0.03 { 4.0 } else { 1.0 };
                    let gap = self.itl_ms * (0.8 + 0.4 * uniform()) * spike * 1000.0;
                    chunks_us.push(chunks_us.last().unwrap() + gap as u32);
                }
            }
            let end_us = chunks_us.last().unwrap() + 200;
            let end_ns = start_ns + u64::from(end_us) * 1000;
            free_at_ns[slot] = end_ns;
            last_end_ns = last_end_ns.max(end_ns);
            records.push(RequestRecord {
                index: i as u32,
                planned_ns: 0,
                arrival_ns: 0,
                start_ns,
                end_us,
                usage: Usage { prompt_tokens: Some(128), completion_tokens: Some(self.tokens) },
                chunks_us: if failed { Vec::new() } else { chunks_us },
                max_tokens: self.tokens,
                status: if failed { 500 } else { 200 },
                failure: failed
                    .then(|| Failure { kind: FailureKind::HttpStatus, message: "500 Internal Server Error".into() }),
                ..RequestRecord::default()
            });
        }
        let mut config = RunConfig::for_target("http://127.0.0.1:8000", self.model);
        config.traffic.num_prompts = self.requests;
        config.traffic.max_concurrency = Some(self.concurrency);
        config.output.percentile_metrics = vec![Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];
        RunResult {
            date: "20260102-030405".into(),
            started_at: "2026-01-02T03:04:05Z".into(),
            ..RunResult::finished(config, records, last_end_ns as f64 * 1e-9)
        }
    }

    pub(crate) fn new_run(&self) -> NewRun {
        let run = self.run();
        let summary = Summary::compute(&run);
        NewRun::from_run(RunKind::Bench, &run, &summary)
    }
}
