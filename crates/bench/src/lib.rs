//! Inputs for the benchmarks in `benches/hot_paths.rs` (run them with
//! `cargo bench -p servebench-bench`; see this crate's README).
//!
//! Everything here is deterministic, so two runs of a benchmark measure the same work:
//! vLLM-shaped SSE transcripts, synthetic request records, a random-dataset config, and the
//! plan, config and options of a loopback run against the scripted test server.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use servebench_client::RunOptions;
use servebench_client::testserver::{Script, TestServerConfig};
use servebench_core::config::{Api, Backend, RangeRatio, RunConfig, WorkloadSpec};
use servebench_core::plan::{Plan, PlannedRequest, TokenCounting};
use servebench_core::protocol::ChunkRenderer;
use servebench_core::record::{RequestRecord, RunResult, Usage};

/// Words of the generated text; every `ESCAPE_EVERY`-th token of an escaped transcript is a
/// newline instead, which JSON escapes (`"\n"`), so its text cannot be borrowed.
const WORDS: [&str; 8] = [" the", " quick", " brown", " fox", " jumps", " over", " lazy", " dogs"];
const ESCAPE_EVERY: usize = 8;

/// The frames of one streamed response as vLLM's server writes them (Responses and Messages:
/// as the simulator renders them), one token per chunk: the opening (chat's role chunk, the
/// Responses and Messages opening events; none for completions), `tokens` token chunks (the
/// last with `finish_reason: "length"`), the usage chunk (Responses' and Messages' terminal
/// events) and `[DONE]` (not in Responses and Messages). With `escaped`, one token in eight is
/// a newline.
pub fn vllm_transcript(api: Api, tokens: usize, escaped: bool) -> Vec<Bytes> {
    let r = ChunkRenderer::new(api, "cmpl-bench-0", 1_767_225_600, "Qwen/Qwen3-8B");
    let mut frames = Vec::with_capacity(tokens + 3);
    frames.extend(r.opening(0));
    for i in 0..tokens {
        let text = if escaped && i % ESCAPE_EVERY == ESCAPE_EVERY - 1 { "\n" } else { WORDS[i % WORDS.len()] };
        let finish = (i + 1 == tokens).then_some("length");
        frames.push(r.token_chunk(text, finish));
    }
    frames.push(r.usage_chunk(128, tokens as u32, Some("length")));
    frames.extend(r.done());
    frames
}

/// `frames` joined and cut into reads of `read_size` bytes (a busy connection coalesces
/// frames; a read may end inside one).
pub fn coalesced(frames: &[Bytes], read_size: usize) -> Vec<Bytes> {
    let all: Vec<u8> = frames.concat();
    all.chunks(read_size.max(1)).map(Bytes::copy_from_slice).collect()
}

/// A small deterministic generator (64-bit LCG), so records are the same on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// `n` successful records of a 60-second run: arrivals spread over the run, 16 to 256 token
/// chunks each with a TTFT of 20 to 220 ms and gaps of 5 to 25 ms, usage set.
pub fn synthetic_records(n: usize) -> Vec<RequestRecord> {
    let mut rng = Lcg(0x5eed);
    (0..n)
        .map(|i| {
            let start_ns = rng.below(60_000_000_000);
            let chunks = 16 + rng.below(241) as usize;
            let mut t = 20_000 + rng.below(200_000) as u32;
            let mut chunks_us = Vec::with_capacity(chunks);
            for _ in 0..chunks {
                chunks_us.push(t);
                t += 5_000 + rng.below(20_000) as u32;
            }
            RequestRecord {
                index: i as u32,
                planned_ns: start_ns,
                arrival_ns: start_ns,
                start_ns,
                end_us: t,
                chunks_us,
                max_tokens: 256,
                usage: Usage { prompt_tokens: Some(1024), completion_tokens: Some(chunks as u32) },
                status: 200,
                ..RequestRecord::default()
            }
        })
        .collect()
}

/// `n` successful records of a run capped at `slots` requests in flight: the records of
/// [`synthetic_records`], each sent when a slot frees (the earliest end so far), so the cap
/// holds from the first `slots` sends to the last and the run has a steady state.
pub fn capped_records(n: usize, slots: usize) -> Vec<RequestRecord> {
    let mut records = synthetic_records(n);
    let mut free = vec![0u64; slots.max(1)];
    for r in &mut records {
        let slot = (0..free.len()).min_by_key(|&i| free[i]).unwrap_or(0);
        r.start_ns = free[slot];
        r.planned_ns = r.start_ns;
        r.arrival_ns = r.start_ns;
        free[slot] = r.start_ns + u64::from(r.end_us) * 1000;
    }
    records
}

/// A finished run holding `records`, with vLLM's default report sections.
pub fn run_result(records: Vec<RequestRecord>) -> RunResult {
    let mut config = RunConfig::for_target("http://127.0.0.1:8000", "Qwen/Qwen3-8B");
    config.traffic.num_prompts = records.len();
    config.traffic.max_concurrency = Some(256);
    RunResult {
        date: "20260101-000000".into(),
        started_at: "2026-01-01T00:00:00+00:00".into(),
        ..RunResult::finished(config, records, 61.0)
    }
}

/// vLLM's random dataset (1024 input, 128 output tokens, range ratio 0.5) for `n` prompts
/// at 10 requests per second, chat API.
pub fn random_config(n: usize) -> RunConfig {
    let mut c = RunConfig::for_target("http://127.0.0.1:8000", "Qwen/Qwen3-8B");
    c.target.backend = Backend::OpenaiChat;
    c.workload = WorkloadSpec::Random {
        input_len: 1024,
        output_len: 128,
        range_ratio: RangeRatio { input: 0.5, output: 0.5 },
        prefix_len: 0,
        media: None,
        batch_size: 1,
    };
    c.traffic.num_prompts = n;
    c.traffic.request_rate = 10.0;
    c
}

/// The loopback run: `requests` completions requests of `tokens` tokens each, all due at once.
pub fn loopback_plan(requests: u32, tokens: u32) -> Plan {
    Plan {
        api: Api::Completions,
        requests: (0..requests)
            .map(|i| PlannedRequest {
                index: i,
                at_ns: 0,
                body: Bytes::from(format!(
                    r#"{{"model": "test-model", "prompt": "p{i}", "max_tokens": {tokens}, "stream": true}}"#
                )),
                max_tokens: tokens,
                prompt_tokens: 8,
                input_tokens: Vec::new(),
            })
            .collect(),
        conversations: Vec::new(),
        token_counting: TokenCounting::Estimate,
        notes: Vec::new(),
    }
}

/// A test server that answers at once: no TTFT, no gaps, one token per chunk, usage last.
/// It lives for an hour and never stops on a request count, so one server serves every
/// iteration of a benchmark.
pub fn instant_server(tokens: u32) -> TestServerConfig {
    let mut c = TestServerConfig::new(usize::MAX, move |_| Script {
        ttft: Duration::ZERO,
        itl: Duration::ZERO,
        tokens,
        opening: false,
        ..Script::default()
    });
    c.lifetime = Duration::from_secs(3600);
    c
}

/// The config of a loopback run against `base_url`, capped at `concurrency` requests in flight.
pub fn loopback_config(base_url: &str, concurrency: usize) -> RunConfig {
    let mut c = RunConfig::for_target(base_url, "test-model");
    c.traffic.max_concurrency = Some(concurrency);
    c.output.disable_progress = true;
    c
}

/// Options without a progress bar, log or API key.
pub fn quiet_options() -> RunOptions {
    RunOptions { log: Arc::new(|_| {}), api_key: None, progress: false, ..RunOptions::default() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use servebench_core::metrics::Summary;
    use servebench_core::protocol::{Payload, SseDecoder, classify};

    fn count_tokens(api: Api, reads: &[Bytes]) -> (usize, usize) {
        let mut d = SseDecoder::new();
        let (mut tokens, mut escaped) = (0, 0);
        let mut on = |ev: servebench_core::protocol::SseEvent<'_>| {
            if let Ok(Payload::Chunk(c)) = classify(api, ev.data) {
                tokens += usize::from(c.token);
                escaped += usize::from(matches!(c.text, Some(std::borrow::Cow::Owned(_))));
            }
        };
        for r in reads {
            d.feed(r, &mut on).unwrap();
        }
        d.finish(&mut on).unwrap();
        (tokens, escaped)
    }

    #[test]
    fn transcripts_carry_their_tokens_whole_or_cut_into_reads() {
        for api in [Api::Completions, Api::Chat, Api::Responses, Api::Messages] {
            let t = vllm_transcript(api, 64, true);
            // Opening, tokens, usage, [DONE]: chat has all four, completions no opening,
            // Responses and Messages no [DONE].
            let (opening, done) = (api != Api::Completions, api.end_event().is_none());
            assert_eq!(t.len(), 64 + 1 + usize::from(opening) + usize::from(done), "{api:?}");
            assert_eq!(count_tokens(api, &t), (64, 8));
            assert_eq!(count_tokens(api, &coalesced(&t, 4096)), (64, 8));
            assert_eq!(count_tokens(api, &coalesced(&t, 7)), (64, 8));
            assert_eq!(count_tokens(api, &vllm_transcript(api, 64, false)).1, 0);
        }
    }

    #[test]
    fn synthetic_records_are_deterministic_and_summarise() {
        let a = synthetic_records(100);
        assert_eq!(a, synthetic_records(100));
        assert!(a.iter().all(|r| (16..=256).contains(&r.chunks_us.len()) && r.chunks_us.is_sorted()));
        let s = Summary::compute(&run_result(a));
        assert_eq!(s.completed, 100);
        assert!(s.output_throughput.unwrap() > 0.0);
        let capped = run_result(capped_records(2_000, 256));
        let steady = Summary::compute(&capped).steady_state.expect("a capped run has a steady state");
        assert!(steady.summary.completed > 1_000, "{}", steady.summary.completed);
    }

    #[test]
    fn the_random_config_builds_a_plan_without_a_tokenizer() {
        let plan = servebench_workload::build_plan(&random_config(20), None).unwrap();
        assert_eq!(plan.requests.len(), 20);
        assert_eq!(loopback_plan(3, 2).len(), 3);
    }
}
