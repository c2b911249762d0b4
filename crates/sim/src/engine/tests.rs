//! Scheduler and block-pool invariants, checked step by step on random workloads, and the
//! engine's behaviours one by one (prefix hits, preemption, EOS, cancellation, determinism).

use proptest::prelude::*;

use super::*;
use crate::cost::LinearCost;
use crate::setup::KvLayout;

pub(super) fn config(total_blocks: u64, seqs: u32, budget: u32, caching: bool) -> EngineConfig {
    EngineConfig {
        max_num_seqs: seqs,
        max_num_batched_tokens: budget,
        max_model_len: 1 << 20,
        enable_prefix_caching: caching,
        kv: KvLayout {
            block_size: 16,
            total_units: total_blocks,
            units_per_block: 1,
            sliding_units_per_block: 0,
            sliding_cap_blocks: 0,
            state_units: 0,
        },
        window: 0,
        api_delay_ns: 0,
        api_ns_per_token: 0.0,
        api_ns_per_request: 0,
        api_ns_per_input: 0,
        tokenizer: Microbatch::one_at_a_time(),
        api_ns_per_output_token: 0.0,
        api_servers: 1,
        chat_template: true,
        eos: EosModel::None,
        jitter_sigma: 0.0,
        async_scheduling: false,
        pipeline_batches: 1,
        spec: None,
    }
}

pub(super) fn engine(cfg: EngineConfig, seed: u64) -> Engine {
    let cost = LinearCost { per_step_s: 0.01, per_token_s: 1e-5, per_seq_s: 1e-4 };
    Engine::with_cost(cfg, Box::new(cost), seed)
}

pub(super) fn ids(n: u32, seed: u32) -> PromptTokens {
    PromptTokens::Ids((0..n).map(|i| i.wrapping_mul(2_654_435_761) ^ seed).collect())
}

pub(super) fn request(tag: u64, prompt: PromptTokens, max_tokens: u32, at: u64) -> NewRequest {
    NewRequest {
        tag,
        prompt,
        max_tokens: u64::from(max_tokens),
        ignore_eos: true,
        arrived_ns: at,
        chat: false,
        pooling: Pooling::No,
        images: Vec::new(),
    }
}

/// Units held privately by requests (sliding-window blocks), for the pool's accounting check.
fn private_units(e: &Engine) -> u64 {
    let kv = &e.cfg.kv;
    e.reqs
        .iter()
        .flatten()
        .map(|r| {
            u64::from(r.sliding_blocks) * u64::from(kv.sliding_units_per_block)
                + if r.holds_state { u64::from(kv.state_units) } else { 0 }
        })
        .sum()
}

/// (tag, outputs, finish reason) of a finished request.
pub(super) type Finished = (u64, u32, Option<FinishReason>);

/// Runs every request to the end, checking invariants after each step; returns the finished
/// requests and the order in which tags were first scheduled.
pub(super) fn run_checked(e: &mut Engine) -> (Vec<Finished>, Vec<u64>) {
    let (done, first_scheduled, _) = run_timed(e);
    (done, first_scheduled)
}

/// [`run_checked`], with the phase times of the requests as they finished (checked too:
/// `phases::tests`).
pub(super) fn run_timed(e: &mut Engine) -> (Vec<Finished>, Vec<u64>, Vec<RequestTimes>) {
    let before = e.counters().phases;
    let mut times = Vec::new();
    let mut done = Vec::new();
    let mut first_scheduled = Vec::new();
    let mut guard = 0;
    loop {
        guard += 1;
        assert!(guard < 1_000_000, "engine did not finish");
        let budget = e.cfg.max_num_batched_tokens;
        let seqs = e.cfg.max_num_seqs as usize;
        let Some(step) = e.step() else {
            match e.next_wakeup_ns() {
                Some(t) => {
                    assert!(t > e.now_ns(), "engine stalled with work it could run");
                    e.advance_to(t);
                    continue;
                }
                None => break,
            }
        };
        assert!(step.batch.tokens() <= u64::from(budget), "token budget exceeded");
        assert!(step.batch.num_seqs as usize <= seqs, "max_num_seqs exceeded");
        assert!(step.end_ns > step.start_ns);
        super::phases::tests::check_step(&step);
        times.extend_from_slice(step.finished);
        for em in step.emissions {
            if let Some(f) = em.finish {
                done.push((em.tag, em.index, Some(f)));
            }
        }
        let scheduled: Vec<u64> =
            e.scheduled.iter().map(|s| e.reqs[s.slot as usize].as_ref().map_or(u64::MAX, |r| r.tag)).collect();
        for tag in scheduled {
            if tag != u64::MAX && !first_scheduled.contains(&tag) {
                first_scheduled.push(tag);
            }
        }
        assert!(e.running.len() <= seqs);
        e.pool.check(private_units(e)).unwrap();
    }
    super::phases::tests::check_totals(before, e.counters().phases, &times);
    (done, first_scheduled, times)
}

/// Adds requests of random lengths and arrival gaps, each of which fits the pool alone; returns
/// each tag with its output length.
pub(super) fn add_random_requests(
    e: &mut Engine,
    lens: &[(u32, u32, u64)],
    blocks: u64,
    shared: bool,
) -> Vec<(u64, u32)> {
    let mut at = 0;
    let mut asked = Vec::new();
    for (tag, (prompt, out, gap)) in lens.iter().enumerate() {
        at += gap;
        // Every request must fit alone: prompt + output within the pool.
        let prompt = (*prompt).min((blocks as u32 * 16).saturating_sub(*out + 16)).max(1);
        let p = if shared {
            PromptTokens::Synthetic { len: prompt, shared_prefix: Some(SharedPrefix { group: 7, len: 64 }) }
        } else {
            ids(prompt, tag as u32)
        };
        e.add(request(tag as u64, p, *out, at)).unwrap();
        asked.push((tag as u64, *out));
    }
    asked
}

/// Every request asked for finished once, at its length (each is sent with `ignore_eos`).
pub(super) fn every_request_ended_at_its_length(done: &[Finished], asked: &[(u64, u32)]) -> Result<(), TestCaseError> {
    prop_assert_eq!(done.len(), asked.len());
    for &(tag, out) in asked {
        let got = done.iter().find(|d| d.0 == tag).unwrap();
        prop_assert_eq!(got.1, out, "request {} produced {} of {}", tag, got.1, out);
        prop_assert_eq!(got.2, Some(FinishReason::Length));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn scheduler_invariants_hold_on_random_workloads(
        lens in prop::collection::vec((1u32..300, 1u32..80, 0u64..50_000_000), 1..40),
        blocks in 40u64..400,
        seqs in 1u32..16,
        budget in 16u32..600,
        caching in any::<bool>(),
        shared in any::<bool>(),
        stages in 1u32..4,
    ) {
        let budget = budget.max(seqs);
        let cfg = EngineConfig { pipeline_batches: stages, ..config(blocks, seqs, budget, caching) };
        let mut e = engine(cfg, 1);
        let asked = add_random_requests(&mut e, &lens, blocks, shared);
        let (done, _) = run_checked(&mut e);
        every_request_ended_at_its_length(&done, &asked)?;
        prop_assert!(e.is_idle());
        prop_assert_eq!(e.pool.used_units(), 0);
    }
}

#[test]
fn pipeline_stages_keep_a_batch_a_stage_in_flight() {
    // Eight prompts of 64 tokens and a budget of 64: eight one-prompt batches of T each.
    let t = 0.01 + 64.0 * 1e-5 + 1e-4;
    let last_token = |stages: u32, prompts: u64, out: u32| {
        let cfg = EngineConfig { pipeline_batches: stages, ..config(10_000, 16, 64, false) };
        let mut e = engine(cfg, 0);
        for tag in 0..prompts {
            e.add(request(tag, ids(64, tag as u32), out, 0)).unwrap();
        }
        let mut ends = Vec::new();
        while let Some(step) = e.step() {
            ends.extend(step.emissions.iter().map(|_| step.end_ns));
        }
        assert!(e.is_idle());
        let last = *ends.last().unwrap() as f64 * 1e-9;
        // The steps' time summed, and the time some step was running (overlaps once).
        let (spent, busy) = (e.time_spent().total, e.counters().busy_ns as f64 * 1e-9);
        if prompts == 8 {
            assert!((spent / (8.0 * t) - 1.0).abs() < 1e-9, "{spent}");
            assert!((busy / last - 1.0).abs() < 1e-6, "busy {busy} s of {last} s, all of it");
        }
        (ends.len(), last)
    };
    // One after another without stages; over two, a batch enters every half step and the
    // last leaves after 1 + 7 / 2 steps.
    let (n, sync) = last_token(1, 8, 1);
    assert!(n == 8 && (sync / (8.0 * t) - 1.0).abs() < 1e-3, "{sync}");
    let (_, piped) = last_token(2, 8, 1);
    assert!((piped / (4.5 * t) - 1.0).abs() < 1e-3, "{piped}");
    // A decoding request waits for its batch to leave the last stage: one alone gains nothing.
    let decode = |stages: u32| last_token(stages, 1, 40).1;
    assert!((decode(2) / decode(1) - 1.0).abs() < 1e-9, "{} {}", decode(2), decode(1));
}

#[test]
fn waiting_requests_are_admitted_first_come_first_served() {
    let mut e = engine(config(10_000, 3, 64, false), 0);
    for tag in 0..12u64 {
        e.add(request(tag, ids(100 + 10 * tag as u32, tag as u32), 5, tag)).unwrap();
    }
    let (done, first) = run_checked(&mut e);
    assert_eq!(first, (0..12).collect::<Vec<_>>());
    assert_eq!(done.len(), 12);
    assert_eq!(e.counters().preemptions, 0);
}

#[test]
fn a_step_counts_the_requests_it_takes_from_the_waiting_queue() {
    // Three sequences a step: the first step admits three, the next ones one each time a
    // request finishes (a prompt of 10 tokens, 2 out: two steps each), the running ones none.
    let mut e = engine(config(10_000, 3, 64, false), 0);
    for tag in 0..5u64 {
        e.add(request(tag, ids(10, tag as u32), 2, 0)).unwrap();
    }
    let admitted: Vec<u32> = std::iter::from_fn(|| e.step().map(|s| s.batch.admitted)).collect();
    assert_eq!(admitted.iter().sum::<u32>(), 5, "{admitted:?}");
    assert_eq!(admitted[..2], [3, 0], "{admitted:?}");
}

#[test]
fn a_repeated_prompt_hits_the_prefix_cache_except_its_last_token() {
    let mut e = engine(config(1000, 8, 2048, true), 0);
    let a = e.add(request(0, ids(100, 9), 4, 0)).unwrap();
    assert_eq!(e.cached_tokens(a), Some(0));
    run_checked(&mut e);
    let b = e.add(request(1, ids(100, 9), 4, e.now_ns())).unwrap();
    let step = e.step().unwrap();
    // 100 tokens: 6 full blocks are cached, and only the last 4 tokens are computed.
    assert_eq!(step.batch.prefill_tokens, 4);
    assert_eq!(e.cached_tokens(b), Some(96));
    run_checked(&mut e);
    // A prompt of exactly 64 tokens reuses 3 blocks: its last token must be recomputed.
    e.add(request(2, ids(64, 5), 1, e.now_ns())).unwrap();
    run_checked(&mut e);
    let c = e.add(request(3, ids(64, 5), 1, e.now_ns())).unwrap();
    assert_eq!(e.step().unwrap().batch.prefill_tokens, 16);
    assert_eq!(e.counters().prefix_hits, 96 + 48);
    assert!(e.cached_tokens(c).is_none(), "finished requests are gone");
    // Without prefix caching the same prompt is computed in full.
    let mut off = engine(config(1000, 8, 2048, false), 0);
    off.add(request(0, ids(100, 9), 1, 0)).unwrap();
    run_checked(&mut off);
    off.add(request(1, ids(100, 9), 1, off.now_ns())).unwrap();
    assert_eq!(off.step().unwrap().batch.prefill_tokens, 100);
}

#[test]
fn a_tiny_kv_cache_preempts_and_every_request_still_finishes() {
    // 30 blocks = 480 tokens; 8 requests of 100 + 150 tokens cannot run together.
    let mut e = engine(config(30, 8, 512, true), 0);
    for tag in 0..8 {
        e.add(request(tag, ids(100, tag as u32), 150, 0)).unwrap();
    }
    let (done, _) = run_checked(&mut e);
    assert!(e.counters().preemptions > 0, "{:?}", e.counters());
    assert_eq!(done.len(), 8);
    assert!(done.iter().all(|d| d.1 == 150));
}

#[test]
fn prompts_are_prefilled_in_budget_sized_chunks() {
    let mut e = engine(config(1000, 4, 256, false), 0);
    e.add(request(0, ids(1000, 1), 2, 0)).unwrap();
    let mut chunks = Vec::new();
    while let Some(s) = e.step() {
        chunks.push((s.batch.prefill_tokens, s.batch.decode_tokens, s.emissions.len()));
    }
    assert_eq!(chunks, vec![(256, 0, 0), (256, 0, 0), (256, 0, 0), (232, 0, 1), (0, 1, 1)]);
}

#[test]
fn requests_wait_for_the_api_delay_and_cancelled_ones_free_their_blocks() {
    let mut cfg = config(100, 4, 512, false);
    cfg.api_delay_ns = 5_000_000;
    let mut e = engine(cfg, 0);
    let id = e.add(request(0, ids(200, 1), 50, 1_000)).unwrap();
    assert!(e.step().is_none());
    assert_eq!(e.next_wakeup_ns(), Some(5_001_000));
    e.advance_to(5_001_000);
    assert!(e.step().is_some());
    assert!(e.kv_usage() > 0.0);
    assert!(e.cancel(id));
    assert!(!e.cancel(id), "a cancelled request is gone");
    assert_eq!(e.kv_usage(), 0.0);
    assert!(e.is_idle() && e.step().is_none() && e.next_wakeup_ns().is_none());
}

#[test]
fn a_request_cancelled_while_its_batch_is_in_flight_drops_the_result() {
    // Two stages, a budget of one prompt a batch: both prompts go in flight at once.
    let cfg = EngineConfig { pipeline_batches: 2, ..config(100, 4, 64, false) };
    let mut e = engine(cfg, 0);
    e.add(request(0, ids(64, 1), 3, 0)).unwrap();
    let second = e.add(request(1, ids(64, 2), 3, 0)).unwrap();
    let step = e.step().unwrap();
    assert_eq!(step.emissions.len(), 1, "the first batch left; the second is still in flight");
    assert_eq!(e.req(second.slot).in_flight, 64);
    // Cancelled in flight, its slot taken by a new request: the returning batch's result for
    // that slot is stale and dropped.
    assert!(e.cancel(second));
    let again = e.add(request(2, ids(64, 3), 1, e.now_ns())).unwrap();
    assert_eq!(again.slot, second.slot);
    let (done, _) = run_checked(&mut e);
    let mut tags: Vec<u64> = done.iter().map(|d| d.0).collect();
    tags.sort_unstable();
    assert_eq!(tags, vec![0, 2]);
    assert!(done.iter().all(|d| d.1 == if d.0 == 0 { 3 } else { 1 }), "{done:?}");
    assert_eq!(e.kv_usage(), 0.0);
}

#[test]
fn requests_longer_than_the_model_allows_are_rejected() {
    let mut cfg = config(100, 4, 512, false);
    cfg.max_model_len = 1000;
    let mut e = engine(cfg, 0);
    let err = e.add(request(0, ids(900, 1), 200, 0)).unwrap_err();
    assert!(err.to_string().contains("maximum context length is 1000 tokens"), "{err}");
    assert_eq!(e.add(request(0, ids(0, 1), 2, 0)).unwrap_err(), Rejection::EmptyPrompt);
    assert_eq!(e.add(request(0, ids(5, 1), 0, 0)).unwrap_err(), Rejection::NoOutput);
}

#[test]
fn without_ignore_eos_the_uniform_model_stops_early() {
    let mut cfg = config(10_000, 64, 8192, false);
    cfg.eos = EosModel::Uniform;
    let mut e = engine(cfg, 3);
    for tag in 0..64 {
        let mut r = request(tag, ids(20, tag as u32), 100, 0);
        r.ignore_eos = tag % 2 == 0;
        e.add(r).unwrap();
    }
    let (done, _) = run_checked(&mut e);
    for (tag, n, f) in &done {
        if tag % 2 == 0 {
            assert_eq!((*n, *f), (100, Some(FinishReason::Length)));
        } else {
            assert!((1..=100).contains(n));
        }
    }
    let early = done.iter().filter(|d| d.2 == Some(FinishReason::Stop)).count();
    assert!(early > 20, "{early} of 32 stopped early");
}

#[test]
fn the_same_seed_gives_the_same_timeline_and_another_seed_does_not() {
    let timeline = |seed: u64| {
        let mut cfg = config(500, 8, 512, true);
        cfg.jitter_sigma = 0.05;
        let mut e = engine(cfg, seed);
        for tag in 0..20 {
            e.add(request(tag, ids(50 + tag as u32, 3), 30, tag * 1_000_000)).unwrap();
        }
        let mut out = Vec::new();
        loop {
            match e.step() {
                Some(s) => out.extend(s.emissions.iter().map(|x| (x.tag, x.index, s.end_ns))),
                None => match e.next_wakeup_ns() {
                    Some(t) => e.advance_to(t),
                    None => break,
                },
            }
        }
        out
    };
    assert_eq!(timeline(11), timeline(11));
    assert_ne!(timeline(11), timeline(12));
}

#[test]
fn sliding_window_units_are_capped_at_the_window() {
    let mut cfg = config(0, 4, 4096, false);
    cfg.kv = KvLayout {
        block_size: 16,
        total_units: 10_000,
        units_per_block: 2,
        sliding_units_per_block: 11,
        sliding_cap_blocks: 33,
        state_units: 0,
    };
    cfg.window = 512;
    let mut e = engine(cfg, 0);
    e.add(request(0, ids(2000, 1), 10, 0)).unwrap();
    e.step().unwrap();
    // 2000 tokens = 125 blocks: 2 x 125 full-layer units + 11 x 33 windowed ones.
    let used = e.pool.used_units();
    assert_eq!(used, 2 * 125 + 11 * 33);
    e.pool.check(private_units(&e)).unwrap();
    run_checked(&mut e);
    assert_eq!(e.pool.used_units(), 0);
}

/// A hybrid model's pool: 528-token blocks of one unit, and three units of state a request.
fn hybrid_layout(total_units: u64) -> KvLayout {
    KvLayout {
        block_size: 528,
        total_units,
        units_per_block: 1,
        sliding_units_per_block: 0,
        sliding_cap_blocks: 0,
        state_units: 3,
    }
}

#[test]
fn a_request_holds_its_linear_attention_state_once_from_its_first_block_to_its_end() {
    let mut cfg = config(0, 4, 4096, false);
    cfg.kv = hybrid_layout(40);
    let mut e = engine(cfg, 0);
    for tag in 0..4 {
        e.add(request(tag, ids(1000, tag as u32), 200, 0)).unwrap();
    }
    e.step().unwrap();
    // 1000 tokens = 2 blocks of 528, and 3 units of state each: 4 x (2 + 3).
    assert_eq!(e.pool.used_units(), 4 * 5);
    e.pool.check(private_units(&e)).unwrap();
    // Growing past a block boundary takes a block, never another state; the end frees all.
    run_checked(&mut e);
    assert_eq!(e.pool.used_units(), 0);

    // 16 units hold eight one-block requests without state, four with it: the state decides
    // how many run at once.
    let mut cfg = config(0, 8, 4096, false);
    cfg.kv = hybrid_layout(16);
    let mut e = engine(cfg, 0);
    for tag in 0..8 {
        e.add(request(tag, ids(100, tag as u32), 4, 0)).unwrap();
    }
    let first = e.step().unwrap();
    assert_eq!(first.batch.num_seqs, 4);
    assert_eq!(e.pool.used_units(), 16);
    e.pool.check(private_units(&e)).unwrap();
    let (done, _) = run_checked(&mut e);
    assert_eq!(done.len(), 8);
}

#[test]
fn the_engine_can_move_to_a_server_task() {
    fn assert_send<T: Send>() {}
    assert_send::<Engine>();
}

/// Runs `e` to idle; returns each step's start and the patches it encoded.
fn encoded_by_step(e: &mut Engine) -> Vec<(u64, u64)> {
    let mut steps = Vec::new();
    while let Some(t) = e.next_wakeup_ns() {
        let before = e.now_ns();
        e.advance_to(t.max(before));
        match e.step() {
            Some(s) => steps.push((s.start_ns, s.batch.encoder_patches)),
            None if t <= before => break,
            None => {}
        }
    }
    steps
}

#[test]
fn an_image_is_encoded_once_in_the_step_that_reaches_it_after_the_frontend_decodes_it() {
    use crate::model::ImageWork;
    // Chunks of 64 tokens: the image's 200 tokens start at 100, so the second chunk encodes it.
    let mut e = engine(config(1000, 8, 64, true), 0);
    let work = ImageWork { tokens: 200, patches: 800, pairs: 800 * 800, pixels: 1_000_000 };
    let image = |tag: u64, at: u64| NewRequest {
        images: vec![EncoderInput { at: 100, work }],
        ..request(tag, ids(300, 3), 2, at)
    };
    e.add(image(0, 0)).unwrap();
    let steps = encoded_by_step(&mut e);
    let encoding: Vec<usize> = (0..steps.len()).filter(|&i| steps[i].1 > 0).collect();
    assert_eq!(encoding, [1], "{steps:?}");
    assert_eq!(steps[1].1, 800);
    // The frontend decoded and resized its million pixels before the scheduler saw it.
    let decode_ns = (1e6 * crate::media::PREPROCESS_NS_PER_PIXEL) as u64;
    assert!(steps[0].0 >= decode_ns, "{} < {decode_ns}", steps[0].0);
    // The same image again: its tokens are in the prefix cache, so nothing is encoded.
    let now = e.now_ns();
    e.add(image(1, now)).unwrap();
    let again = encoded_by_step(&mut e);
    assert!(!again.is_empty() && again.iter().all(|s| s.1 == 0), "{again:?}");
    // Without prefix caching it is encoded again.
    let mut e = engine(config(1000, 8, 64, false), 0);
    e.add(image(0, 0)).unwrap();
    encoded_by_step(&mut e);
    let now = e.now_ns();
    e.add(image(1, now)).unwrap();
    assert_eq!(encoded_by_step(&mut e).iter().map(|s| s.1).sum::<u64>(), 800);
}

#[test]
fn a_reset_prefix_cache_forgets_every_prompt_and_is_refused_while_one_is_held() {
    let mut e = engine(config(1000, 8, 2048, true), 0);
    e.add(request(0, ids(100, 9), 4, 0)).unwrap();
    assert!(!e.reset_prefix_cache(), "a request is waiting");
    run_checked(&mut e);
    assert!(e.reset_prefix_cache());
    let b = e.add(request(1, ids(100, 9), 4, e.now_ns())).unwrap();
    assert_eq!(e.step().unwrap().batch.prefill_tokens, 100, "computed in full after the reset");
    assert_eq!(e.cached_tokens(b), Some(0));
    assert!(!e.reset_prefix_cache(), "a request is running");
    run_checked(&mut e);
    // Cached again by the request after the reset, and all memory free once more.
    let c = e.add(request(2, ids(100, 9), 4, e.now_ns())).unwrap();
    assert_eq!(e.step().unwrap().batch.prefill_tokens, 4);
    assert_eq!(e.cached_tokens(c), Some(96));
    run_checked(&mut e);
    assert!(e.reset_prefix_cache());
    assert_eq!(e.kv_usage(), 0.0);
}
