//! The frontend's hand-off in the engine: requests queue for the API server before the scheduler sees them, chat bursts render together, and async scheduling delays a mid-step arrival by one step.

use super::tests::{config, engine, ids, request, run_checked};
use super::*;

/// An engine config whose frontend takes 1 ms to hand a request on, plus 50 µs of work per
/// request and 1 µs per prompt token.
fn frontend_config() -> EngineConfig {
    EngineConfig {
        api_delay_ns: 1_000_000,
        api_ns_per_token: 1_000.0,
        api_ns_per_request: 50_000,
        ..config(1000, 8, 8192, false)
    }
}

#[test]
fn requests_that_arrive_together_queue_for_the_frontend() {
    let mut e = engine(frontend_config(), 0);
    // Three 100-token prompts at t = 0 (50 µs each on the loop, then 100 µs each on the
    // tokenizing thread), a fourth long after.
    for tag in 0..3 {
        e.add(request(tag, ids(100, tag as u32 + 1), 4, 0)).unwrap();
    }
    e.add(request(3, ids(100, 9), 4, 50_000_000)).unwrap();
    // The fourth's tokenizing is settled when the engine next looks (a step, an arrival).
    assert_eq!(e.num_waiting(), 4);
    e.hand_on_settled_by(u64::MAX);
    let ready: Vec<u64> = e.pending.iter().map(|&s| e.req(s).ready_ns).collect();
    assert_eq!(ready, vec![1_150_000, 1_250_000, 1_350_000, 51_150_000]);
    // vLLM's batcher from 0.10 waits 2 ms after the first prompt and tokenizes the three
    // together (here on two cores: 150 µs), the fourth alone after its own window.
    let mut e = engine(EngineConfig { tokenizer: Microbatch::vllm(2.0), ..frontend_config() }, 0);
    for tag in 0..3 {
        e.add(request(tag, ids(100, tag as u32 + 1), 4, 0)).unwrap();
    }
    assert_eq!(e.next_wakeup_ns(), Some(50_000 + 2_000_000 + 150_000 + 1_000_000));
    e.add(request(3, ids(100, 9), 4, 50_000_000)).unwrap();
    e.hand_on_settled_by(u64::MAX);
    let ready: Vec<u64> = e.pending.iter().map(|&s| e.req(s).ready_ns).collect();
    assert_eq!(ready, vec![3_200_000, 3_200_000, 3_200_000, 50_050_000 + 2_000_000 + 100_000 + 1_000_000]);
}

#[test]
fn the_further_inputs_of_a_pooling_request_pay_an_input_s_work_not_a_request_s() {
    // Three 10-token inputs at t = 0 (10 µs each on the tokenizing thread): as requests, 50 µs
    // each on the loop; as one request of three inputs, 50 µs for the first and 20 for each
    // further one.
    let ready = |further: bool| {
        let mut e = engine(EngineConfig { api_ns_per_input: 20_000, ..frontend_config() }, 0);
        for tag in 0..3u64 {
            let input = request(tag, ids(10, tag as u32 + 1), 1, 0);
            let pooling = if further { Pooling::of(true, tag as usize) } else { Pooling::Input };
            e.add(NewRequest { pooling, ..input }).unwrap();
        }
        e.hand_on_settled_by(u64::MAX);
        e.pending.iter().map(|&s| e.req(s).ready_ns).collect::<Vec<u64>>()
    };
    assert_eq!(ready(false), [1_060_000, 1_110_000, 1_160_000]);
    assert_eq!(ready(true), [1_060_000, 1_080_000, 1_100_000]);
}

#[test]
fn a_burst_of_chat_requests_reaches_the_scheduler_together_once_all_are_rendered() {
    let cfg = frontend_config();
    let chat = |tag: u64, at: u64| NewRequest { chat: true, ..request(tag, ids(100, tag as u32 + 1), 4, at) };
    let mut e = engine(cfg.clone(), 0);
    // Three chat prompts at t = 0: rendered by 150 µs, then tokenized one by one (100 µs each).
    let burst: Vec<RequestId> = (0..3).map(|tag| e.add(chat(tag, 0)).unwrap()).collect();
    assert!(e.pending.is_empty() && e.num_waiting() == 3, "none is handed on while the burst renders");
    assert_eq!(e.next_wakeup_ns(), Some(1_250_000));
    assert!(!e.is_idle());
    // A fourth long after closes the burst and goes on its own.
    let late = e.add(chat(3, 50_000_000)).unwrap();
    let ready = |e: &Engine, id: RequestId| e.req(id.slot).ready_ns;
    let at: Vec<u64> = burst.iter().map(|&id| ready(&e, id)).collect();
    assert_eq!(at, vec![1_250_000, 1_350_000, 1_450_000]);
    e.advance_to(60_000_000);
    e.step().unwrap();
    assert_eq!(ready(&e, late), 50_000_000 + 150_000 + 1_000_000);
    // The same burst through the completions endpoint, or with a model rendered by harmony,
    // goes one at a time: the first is handed on after its own 150 µs. Completions are
    // tokenized beside the loop; harmony renders token ids on it.
    for (chat_template, is_chat, expected) in
        [(true, false, [1_150_000, 1_250_000, 1_350_000]), (false, true, [1_150_000, 1_300_000, 1_450_000])]
    {
        let mut e = engine(EngineConfig { chat_template, ..cfg.clone() }, 0);
        let ids: Vec<RequestId> =
            (0..3).map(|tag| e.add(NewRequest { chat: is_chat, ..chat(tag, 0) }).unwrap()).collect();
        e.hand_on_settled_by(u64::MAX);
        let at: Vec<u64> = ids.iter().map(|&id| ready(&e, id)).collect();
        assert_eq!(at, expected);
    }
    // A request cancelled while its burst renders is never scheduled; the others run.
    let mut e = engine(cfg, 0);
    let gone = e.add(chat(0, 0)).unwrap();
    e.add(chat(1, 0)).unwrap();
    assert!(e.cancel(gone));
    assert_eq!(e.num_waiting(), 1);
    let (done, _) = run_checked(&mut e);
    assert_eq!(done.iter().map(|d| d.0).collect::<Vec<_>>(), vec![1]);
}

#[test]
fn requests_that_arrive_while_tokens_stream_wait_behind_them() {
    let mut cfg = config(1000, 8, 8192, false);
    cfg.api_ns_per_request = 100_000;
    cfg.api_ns_per_output_token = 50_000.0;
    let mut e = engine(cfg, 0);
    for tag in 0..4 {
        e.add(request(tag, ids(10, tag as u32 + 1), 8, 0)).unwrap();
    }
    // All four are through the frontend by 400 µs; the step emits their first tokens.
    e.advance_to(400_000);
    let end = e.step().unwrap().end_ns;
    // One arrived during the step: it goes before the step's four tokens (200 µs of streaming).
    let during = e.add(request(10, ids(10, 11), 8, end - 1)).unwrap();
    let after = e.add(request(11, ids(10, 12), 8, end)).unwrap();
    let ready = |id: RequestId| e.req(id.slot).ready_ns;
    assert_eq!(ready(during), end - 1 + 100_000);
    assert_eq!(ready(after), end - 1 + 100_000 + 200_000 + 100_000);
    // Without the term nothing waits.
    let mut quiet = engine(config(1000, 8, 8192, false), 0);
    for tag in 0..4 {
        quiet.add(request(tag, ids(10, tag as u32 + 1), 8, 0)).unwrap();
    }
    let end = quiet.step().unwrap().end_ns;
    let id = quiet.add(request(11, ids(10, 12), 8, end)).unwrap();
    assert_eq!(quiet.req(id.slot).ready_ns, end);
}

#[test]
fn with_async_scheduling_a_request_that_arrives_mid_step_waits_one_step_more() {
    // One long decode keeps the engine stepping back to back; a second request becomes visible
    // halfway through the third step. Without async scheduling it is prefilled in the fourth
    // step; with it, the fourth step was planned when the third began, so the fifth.
    let first_token_step = |async_scheduling: bool| {
        let mut cfg = config(1000, 8, 8192, false);
        cfg.async_scheduling = async_scheduling;
        let mut e = engine(cfg, 0);
        e.add(request(0, ids(10, 1), 50, 0)).unwrap();
        let mut late: Option<RequestId> = None;
        for steps in 1..100 {
            let step = e.step().expect("the long decode outlasts the late request");
            if late.is_some_and(|id| step.emissions.iter().any(|em| em.id == id && em.index == 1)) {
                return steps;
            }
            let (start, end) = (step.start_ns, step.end_ns);
            if steps == 3 {
                late = Some(e.add(request(1, ids(10, 2), 4, (start + end) / 2)).unwrap());
            }
        }
        panic!("the late request never started")
    };
    assert_eq!(first_token_step(false), 4);
    assert_eq!(first_token_step(true), 5);
    // After the engine ran dry nothing was planned ahead: a new request starts at once.
    let mut cfg = config(1000, 8, 8192, false);
    cfg.async_scheduling = true;
    let mut e = engine(cfg, 0);
    e.add(request(0, ids(10, 1), 2, 0)).unwrap();
    while e.step().is_some() {}
    let id = e.add(request(1, ids(10, 2), 2, e.now_ns())).unwrap();
    let step = e.step().expect("the new request runs");
    assert!(step.emissions.iter().any(|em| em.id == id && em.index == 1));
}

#[test]
fn a_pooling_input_ends_with_its_step_and_generates_no_token() {
    // Two generation requests of 4 tokens and three pooling inputs of one request: vLLM counts
    // the generations' 8 tokens and none for the inputs, whose one step ends each with a vector;
    // their prompts and first tokens count as any request's.
    let mut e = engine(config(1000, 16, 4096, false), 0);
    for tag in 0..2u64 {
        e.add(request(tag, ids(10, tag as u32 + 1), 4, 0)).unwrap();
    }
    for k in 0..3usize {
        let input = request(10 + k as u64, ids(10, 20 + k as u32), 1, 0);
        e.add(NewRequest { pooling: Pooling::of(true, k), ..input }).unwrap();
    }
    let (done, _) = run_checked(&mut e);
    assert_eq!(done.len(), 5);
    let c = e.counters();
    assert_eq!((c.generation_tokens, c.prompt_tokens, c.phases.first_tokens), (8, 50, 5));
}
