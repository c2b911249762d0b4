//! Benchmarks of servebench's hot paths (divan): `cargo bench -p servebench-bench`.
//!
//! - `sse`: SSE decoding plus classification of every event of a vLLM-shaped stream, one
//!   read per frame (as vLLM writes them) or 4 KiB reads (a busy connection);
//! - `recorder`: the client's per-read path (`StreamRecorder::feed`: decode, classify, push
//!   the token time and text) for one token chunk, with allocations counted;
//! - `summary`: `Summary::compute` over 10k and 100k records;
//! - `plan`: `build_plan` for 1000 random prompts without a tokenizer;
//! - `loopback`: whole runs of the load engine against the scripted test server answering at
//!   once, on this machine: the client's ceiling (with the server's cost included);
//! - `sim`: one prediction of the twin as a fit simulates an InferenceX point (gpt-oss-120b on
//!   two H100s, 640 requests of 1k/1k at 64 streams), output tokens per second of wall time.
//!
//! Not run by `cargo test`: bench targets are built only by `cargo bench` (or `--benches`).

use std::sync::OnceLock;

use bytes::Bytes;
use divan::counter::{BytesCount, ItemsCount};
use divan::{AllocProfiler, Bencher, black_box};
use servebench_bench::{
    capped_records, coalesced, instant_server, loopback_config, loopback_plan, quiet_options, random_config,
    run_result, synthetic_records, vllm_transcript,
};
use servebench_client::stream::StreamRecorder;
use servebench_client::testserver::TestServer;
use servebench_core::config::Api;
use servebench_core::metrics::Summary;
use servebench_core::protocol::{Payload, SseDecoder, classify};
use servebench_core::record::RequestRecord;

#[global_allocator]
static ALLOC: AllocProfiler = AllocProfiler::system();

fn main() {
    divan::main();
}

const APIS: [Api; 4] = [Api::Completions, Api::Chat, Api::Responses, Api::Messages];
/// Tokens in the streams the SSE benchmarks decode.
const STREAM_TOKENS: usize = 256;

mod sse {
    use super::*;

    fn decode_all(api: Api, reads: &[Bytes]) -> usize {
        let mut decoder = SseDecoder::new();
        let mut tokens = 0;
        let mut on_event = |ev: servebench_core::protocol::SseEvent<'_>| {
            if let Ok(Payload::Chunk(c)) = classify(api, ev.data) {
                tokens += usize::from(c.token);
                black_box(c.text);
            }
        };
        for r in reads {
            let _ = decoder.feed(r, &mut on_event);
        }
        let _ = decoder.finish(&mut on_event);
        tokens
    }

    /// One read per frame; throughput in token chunks (and bytes) per second.
    #[divan::bench(args = APIS)]
    fn per_frame(bencher: Bencher, api: Api) {
        let reads = vllm_transcript(api, STREAM_TOKENS, false);
        let bytes: usize = reads.iter().map(Bytes::len).sum();
        bencher
            .counter(ItemsCount::new(STREAM_TOKENS))
            .counter(BytesCount::new(bytes))
            .bench(|| decode_all(api, black_box(&reads)));
    }

    /// 4 KiB reads, cutting frames apart.
    #[divan::bench(args = APIS)]
    fn coalesced_4k(bencher: Bencher, api: Api) {
        let reads = coalesced(&vllm_transcript(api, STREAM_TOKENS, false), 4096);
        let bytes: usize = reads.iter().map(Bytes::len).sum();
        bencher
            .counter(ItemsCount::new(STREAM_TOKENS))
            .counter(BytesCount::new(bytes))
            .bench(|| decode_all(api, black_box(&reads)));
    }
}

mod recorder {
    use super::*;

    /// Records are cleared (keeping their capacity) after this many chunks.
    const KEEP: usize = 1 << 16;

    /// One read carrying one token chunk, fed to a long-lived recorder: the steady state of a
    /// stream. The allocation columns are per chunk; `escaped` chunks carry a JSON-escaped
    /// newline, whose text cannot be borrowed from the read.
    fn one_chunk(bencher: Bencher, api: Api, escaped: bool) {
        let transcript = vllm_transcript(api, 16, true);
        // The opening frame (chat's role chunk, the Responses and Messages opening events).
        let skip = usize::from(api != Api::Completions);
        // Token 7 of the transcript is the escaped one, token 0 a plain word.
        let frame = transcript[skip + if escaped { 7 } else { 0 }].clone();
        let mut recorder = StreamRecorder::new(api);
        let mut rec = RequestRecord { max_tokens: KEEP as u32, ..RequestRecord::default() };
        rec.chunks_us.reserve(KEEP);
        rec.text.reserve(KEEP * 8);
        let mut t = 0u32;
        bencher.counter(ItemsCount::new(1usize)).bench_local(|| {
            if rec.chunks_us.len() == KEEP {
                rec.chunks_us.clear();
                rec.text.clear();
            }
            t = t.wrapping_add(1);
            let _ = recorder.feed(&mut rec, black_box(&frame), t);
        });
    }

    #[divan::bench(args = APIS)]
    fn plain_chunk(bencher: Bencher, api: Api) {
        one_chunk(bencher, api, false);
    }

    #[divan::bench(args = APIS)]
    fn escaped_chunk(bencher: Bencher, api: Api) {
        one_chunk(bencher, api, true);
    }

    /// A whole 256-token stream into a fresh recorder and record (reserved as the client does).
    #[divan::bench(args = APIS)]
    fn whole_stream(bencher: Bencher, api: Api) {
        let frames = vllm_transcript(api, STREAM_TOKENS, false);
        bencher
            .counter(ItemsCount::new(STREAM_TOKENS))
            .with_inputs(|| {
                let mut rec = RequestRecord { max_tokens: STREAM_TOKENS as u32, ..RequestRecord::default() };
                rec.chunks_us.reserve(STREAM_TOKENS + 1);
                rec.text.reserve((STREAM_TOKENS + 1) * 4);
                (StreamRecorder::new(api), rec)
            })
            .bench_local_refs(|(recorder, rec)| {
                for (i, f) in frames.iter().enumerate() {
                    let _ = recorder.feed(rec, f, i as u32);
                }
                let _ = recorder.finish(rec, STREAM_TOKENS as u32);
            });
    }
}

mod summary {
    use super::*;

    #[divan::bench(args = [10_000, 100_000], sample_count = 20)]
    fn compute(bencher: Bencher, n: usize) {
        let run = run_result(synthetic_records(n));
        bencher.counter(ItemsCount::new(n)).bench(|| Summary::compute(black_box(&run)));
    }

    /// The same records sent 256 at a time: the summary of the whole run and of its steady state.
    #[divan::bench(args = [10_000, 100_000], sample_count = 20)]
    fn compute_capped(bencher: Bencher, n: usize) {
        let run = run_result(capped_records(n, 256));
        bencher.counter(ItemsCount::new(n)).bench(|| Summary::compute(black_box(&run)));
    }
}

mod plan {
    use super::*;

    #[divan::bench(sample_count = 20)]
    fn build_random_1000_without_tokenizer(bencher: Bencher) {
        let config = random_config(1000);
        bencher.counter(ItemsCount::new(1000usize)).bench(|| servebench_workload::build_plan(black_box(&config), None));
    }
}

mod loopback {
    use super::*;

    /// Requests per timed run.
    const REQUESTS: u32 = 2000;
    /// Requests in flight.
    const CONCURRENCY: usize = 64;

    fn runtime() -> &'static tokio::runtime::Runtime {
        static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
        RT.get_or_init(|| tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime"))
    }

    /// Whole runs of 2000 requests, 64 in flight, against a server that answers at once with
    /// `tokens` one-token chunks: requests per second (items); chunks per second is that times
    /// `tokens`.
    #[divan::bench(args = [1, 16, 128], sample_count = 10, sample_size = 1)]
    fn run_2000_requests(bencher: Bencher, tokens: u32) {
        let rt = runtime();
        let server = rt.block_on(TestServer::start(instant_server(tokens))).expect("the test server starts");
        let config = loopback_config(&server.base_url(), CONCURRENCY);
        let plan = loopback_plan(REQUESTS, tokens);
        bencher.counter(ItemsCount::new(REQUESTS)).bench_local(|| {
            let result = rt
                .block_on(servebench_client::run(&config, &plan, quiet_options(), std::future::pending::<()>()))
                .expect("the loopback run");
            assert!(result.records.iter().all(RequestRecord::succeeded), "a loopback request failed");
            result
        });
        drop(server);
    }
}

mod sim {
    use super::*;
    use servebench_core::config::{RunConfig, WorkloadSpec};
    use servebench_sim::{SimSetup, predict};

    /// Requests of one prediction.
    const REQUESTS: usize = 640;
    /// Prompt and output tokens of each.
    const TOKENS: u32 = 1024;

    /// gpt-oss-120b on two H100s, `REQUESTS` random requests of `TOKENS` in and out at 64
    /// streams, all due at once: the work of one fit evaluation of an InferenceX point, the
    /// engine and the simulated client together. Items are output tokens.
    #[divan::bench(sample_count = 10, sample_size = 1)]
    fn predict_640_requests_1k_1k(bencher: Bencher) {
        let setup = SimSetup::resolve("openai/gpt-oss-120b", "h100-sxm", &[("tp".into(), "2".into())], None)
            .expect("the preset setup resolves");
        let mut config = RunConfig::for_target("sim://openai/gpt-oss-120b", "openai/gpt-oss-120b");
        config.traffic.num_prompts = REQUESTS;
        config.workload = WorkloadSpec::Random {
            input_len: TOKENS,
            output_len: TOKENS,
            range_ratio: Default::default(),
            prefix_len: 0,
            media: None,
            batch_size: 1,
        };
        config.traffic.request_rate = f64::INFINITY;
        config.traffic.max_concurrency = Some(64);
        config.ignore_eos = true;
        let plan = servebench_workload::build_plan(&config, None).expect("the random plan builds");
        bencher.counter(ItemsCount::new(REQUESTS * TOKENS as usize)).bench_local(|| {
            let result = predict(black_box(&plan), &config, &setup);
            assert!(result.records.iter().all(RequestRecord::succeeded), "a simulated request failed");
            result
        });
    }
}
