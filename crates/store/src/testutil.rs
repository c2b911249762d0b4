//! Helpers for this crate's tests: sample runs.

use servebench_core::config::{Metric, RunConfig};
use servebench_core::metrics::Summary;
use servebench_core::record::{Failure, FailureKind, RequestRecord, RunResult, Usage};

/// A small measured run: three requests, one of them failed, on a multi-turn conversation.
pub(crate) fn sample_run() -> RunResult {
    let mut config = RunConfig::for_target("http://127.0.0.1:8000", "Qwen/Qwen3-8B");
    config.traffic.num_prompts = 3;
    config.traffic.max_concurrency = Some(2);
    config.output.percentile_metrics = vec![Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];
    config.output.metadata = vec![("gpu".into(), "H100".into())];
    let ok = |index: u32, start_ns: u64, chunks_us: Vec<u32>| RequestRecord {
        index,
        planned_ns: start_ns,
        arrival_ns: start_ns + 10,
        start_ns: start_ns + 20,
        end_us: chunks_us.last().copied().unwrap_or(0) + 5,
        usage: Usage { prompt_tokens: Some(100), completion_tokens: Some(chunks_us.len() as u32) },
        chunks_us,
        max_tokens: 16,
        prompt_tokens_client: Some(99),
        output_tokens_client: None,
        text: "generated text".into(),
        status: 200,
        failure: None,
        retried: index == 1,
        turn: None,
        reasoning_chunks: 0,
        first_reasoning_us: None,
        first_answer_us: None,
        server_queue_s: Some(0.001),
        server_ttft_s: None,
        http: Default::default(),
    };
    let mut second = ok(1, 5_000_000, vec![200_000, 230_000, 260_500, 290_000]);
    second.turn = Some(servebench_core::record::TurnRef { conversation: 3, turn: 1, shared_prefix_tokens: 80 });
    let failed = RequestRecord {
        index: 2,
        start_ns: 9_000_000,
        arrival_ns: 9_000_000,
        planned_ns: 8_000_000,
        status: 503,
        failure: Some(Failure { kind: FailureKind::HttpStatus, message: "503 Service Unavailable".into() }),
        ..RequestRecord::default()
    };
    let records = vec![ok(0, 0, vec![150_000, 180_000, 211_000]), second, failed];
    RunResult {
        date: "20250601-120000".into(),
        started_at: "2025-06-01T12:00:00+02:00".into(),
        notes: vec!["token counts from the server's usage".into()],
        ..RunResult::finished(config, records, 0.5)
    }
}

/// The sample run and its summary.
pub(crate) fn sample() -> (RunResult, Summary) {
    let run = sample_run();
    let summary = Summary::compute(&run);
    (run, summary)
}
