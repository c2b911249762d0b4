//! Multi-turn conversations: turns in order with the real history, the think time, the cap on
//! active conversations, failed turns ending their conversation, interruption, and the prefix
//! shares counted after the run.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use servebench_client::run;
use servebench_client::testserver::{RequestInfo, RequestTruth, Script, TestServer, TestServerConfig};
use servebench_core::config::{Api, MultiTurn, RunConfig, WorkloadSpec};
use servebench_core::metrics::{Ledger, Summary, TurnMetrics, render_notes, render_turns};
use servebench_core::plan::{ConversationPlan, Plan, TokenCounting, TurnPlan};
use servebench_core::record::{FailureKind, RequestRecord, RunResult};
use servebench_workload::{Tokenizer, account, build_plan, chat_prompt_tokens};

use crate::common::{PREFIX, all_succeeded, config, never, quiet, serial, truth_by_index};

/// The bodies the server received, by plan index.
type Bodies = Arc<Mutex<HashMap<u32, Value>>>;

fn index(info: &RequestInfo<'_>) -> Option<u32> {
    info.request_id.and_then(|id| id.strip_prefix(PREFIX)).and_then(|i| i.parse().ok())
}

/// A server that keeps every body and answers with `script`; its prompt tokens are the
/// body's bytes over four, so they grow with the history.
async fn server(
    n: usize,
    bodies: &Bodies,
    script: impl Fn(Option<u32>) -> Script + Send + Sync + 'static,
) -> TestServer {
    let bodies = Arc::clone(bodies);
    TestServer::start(TestServerConfig::new(n, move |info| {
        let i = index(info);
        if let (Some(i), Ok(body)) = (i, serde_json::from_slice::<Value>(info.body)) {
            bodies.lock().unwrap().insert(i, body);
        }
        Script { prompt_tokens: (info.body.len() / 4) as u32, ..script(i) }
    }))
    .await
    .unwrap()
}

fn conversations(n: u32, turns: usize, at: impl Fn(u32) -> u64) -> Plan {
    Plan {
        api: Api::Chat,
        requests: Vec::new(),
        conversations: (0..n)
            .map(|c| ConversationPlan {
                id: c,
                at_ns: at(c),
                system: (c % 2 == 0).then(|| format!("You are assistant {c}.")),
                turns: (0..turns).map(|k| TurnPlan { user: format!("c{c} question {k}?"), max_tokens: 3 }).collect(),
            })
            .collect(),
        token_counting: TokenCounting::Estimate,
        notes: Vec::new(),
    }
}

fn multi_turn_config(base_url: &str, max_active: usize, think_s: f64) -> RunConfig {
    let mut cfg = config(base_url, Api::Chat);
    cfg.workload = WorkloadSpec::Sharegpt {
        path: "unused.json".into(),
        output_len: None,
        oversample: false,
        shuffle: false,
        multi_turn: Some(MultiTurn { max_active_conversations: max_active, think_time_s: think_s, max_turns: 0 }),
    };
    cfg.ignore_eos = false;
    cfg
}

/// The messages turn `k` of `c` must carry: the system prompt, then every earlier turn with
/// the answer the client recorded for it, then the new question.
fn expected_messages(c: &ConversationPlan, k: usize, records: &[&RequestRecord]) -> Value {
    let mut m = Vec::new();
    if let Some(s) = &c.system {
        m.push(json!({"role": "system", "content": s}));
    }
    for (turn, answer) in c.turns.iter().zip(records).take(k) {
        m.push(json!({"role": "user", "content": turn.user}));
        m.push(json!({"role": "assistant", "content": answer.text}));
    }
    m.push(json!({"role": "user", "content": c.turns[k].user}));
    Value::Array(m)
}

/// The records of each conversation, in turn order.
fn by_conversation(result: &RunResult) -> HashMap<u32, Vec<&RequestRecord>> {
    let mut out: HashMap<u32, Vec<&RequestRecord>> = HashMap::new();
    for r in &result.records {
        out.entry(r.turn.expect("every record is a turn").conversation).or_default().push(r);
    }
    for turns in out.values() {
        assert!(turns.windows(2).all(|w| w[0].turn.unwrap().turn + 1 == w[1].turn.unwrap().turn));
    }
    out
}

/// The most conversations whose server-side span (first arrival to last end) overlapped.
fn peak_active(result: &RunResult, truth: &HashMap<u32, RequestTruth>) -> usize {
    let mut events = Vec::new();
    for turns in by_conversation(result).values() {
        let first = &truth[&turns[0].index];
        let last = &truth[&turns[turns.len() - 1].index];
        events.push((first.arrived, 1i32));
        events.push((last.ended, -1));
    }
    events.sort_by_key(|&(t, d)| (t, d));
    let mut now = 0i32;
    let mut peak = 0;
    for (_, d) in events {
        now += d;
        peak = peak.max(now);
    }
    peak as usize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turns_are_sent_in_order_with_the_growing_history_after_the_think_time() {
    let _serial = serial().await;
    let bodies = Bodies::default();
    let (n, turns) = (3u32, 3usize);
    let server = server(9, &bodies, |i| Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(2),
        tokens: 2 + i.unwrap_or(0) % 3,
        ..Script::default()
    })
    .await;
    let think = 0.08;
    let cfg = multi_turn_config(&server.base_url(), 0, think);
    let plan = conversations(n, turns, |c| u64::from(c) * 20_000_000);
    let mut result = run(&cfg, &plan, quiet(), never()).await.unwrap();
    account(None, &plan, &mut result);
    all_succeeded(&result.records);
    assert_eq!(result.records.len(), 9);
    assert!(result.records.iter().enumerate().all(|(i, r)| r.index as usize == i), "records in slot order");

    let bodies = bodies.lock().unwrap().clone();
    let truth = truth_by_index(&server.truth());
    let think_ns = (think * 1e9) as u64;
    for (c, recs) in by_conversation(&result) {
        let conv = &plan.conversations[c as usize];
        for (k, r) in recs.iter().enumerate() {
            let body = &bodies[&r.index];
            assert_eq!(body["messages"], expected_messages(conv, k, &recs), "conversation {c} turn {k}");
            assert_eq!(body["max_completion_tokens"], 3);
            assert_eq!(body["stream"], true);
            assert!(r.arrival_ns >= r.planned_ns && r.start_ns >= r.arrival_ns, "turn {k} of {c} went early");
            if k == 0 {
                // A conversation starts at its planned time.
                assert_eq!(r.planned_ns, conv.at_ns);
                continue;
            }
            let prev = recs[k - 1];
            // The recorded answer is what the server generated.
            let tokens = truth[&prev.index].token_chunks.len() as u32;
            assert_eq!(prev.text, (0..tokens).map(|t| format!(" t{t}")).collect::<String>());
            // Due when the previous answer ended plus the think time, and not sent before.
            assert_eq!(r.planned_ns, prev.start_ns + u64::from(prev.end_us) * 1000 + think_ns);
            let gap = truth[&r.index].arrived - truth[&prev.index].ended;
            assert!(gap >= Duration::from_secs_f64(think), "turn {k} of {c} came {gap:?} after the answer");
        }
    }

    // Prefix shares: nothing for a first turn, then a growing share of a growing prompt.
    for recs in by_conversation(&result).values() {
        assert_eq!(recs[0].turn.unwrap().shared_prefix_tokens, 0);
        for w in recs.windows(2) {
            let (a, b) = (w[0].turn.unwrap().shared_prefix_tokens, w[1].turn.unwrap().shared_prefix_tokens);
            assert!(b > a, "shares {a} then {b}");
            let prompt = w[1].usage.prompt_tokens.unwrap();
            assert!(b < prompt && b >= w[0].usage.prompt_tokens.unwrap() / 2, "share {b} of a {prompt}-token prompt");
        }
    }
    assert!(result.notes.iter().any(|n| n.starts_with("Multi-turn: no tokenizer")), "{:?}", result.notes);

    // The per-turn section and the ledger read the same records.
    let turns = TurnMetrics::compute(&result).expect("a multi-turn run");
    assert_eq!((turns.conversations, turns.turns_completed, turns.by_turn.len()), (3, 9, 3));
    assert!(
        turns.by_turn[0].prefix_share == Some(0.0) && turns.by_turn[2].prefix_share > turns.by_turn[1].prefix_share
    );
    assert_eq!(render_turns(&turns).lines().filter(|l| l.starts_with("   ")).count(), 3);
    let ledger = Ledger::compute(&result);
    assert_eq!((ledger.requests, ledger.chunks.disagreeing.len()), (9, 0), "one token per chunk");
    assert_eq!(render_notes(&ledger), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_active_conversation_cap_and_the_concurrency_cap_both_hold() {
    let _serial = serial().await;
    let bodies = Bodies::default();
    let (n, turns) = (6u32, 2usize);
    let server = server(12, &bodies, |_| Script {
        ttft: Duration::from_millis(15),
        itl: Duration::from_millis(2),
        tokens: 3,
        ..Script::default()
    })
    .await;
    let mut cfg = multi_turn_config(&server.base_url(), 3, 0.03);
    cfg.traffic.max_concurrency = Some(2);
    let plan = conversations(n, turns, |_| 0);
    let mut result = run(&cfg, &plan, quiet(), never()).await.unwrap();
    account(None, &plan, &mut result);
    all_succeeded(&result.records);
    let truth = truth_by_index(&server.truth());
    assert_eq!(server.max_in_flight(), 2, "--max-concurrency over all turns");
    assert_eq!(peak_active(&result, &truth), 3, "active conversations");
    // Conversations beyond the cap waited for a slot, which is client queue time, not TTFT.
    let waited = by_conversation(&result).values().filter(|t| t[0].client_queue_s() > 0.02).count();
    assert!(waited >= 3, "only {waited} conversations waited for a slot");
    for r in result.records.iter().filter(|r| r.client_queue_s() > 0.04) {
        let server_ttft = truth[&r.index].token_chunks[0] - truth[&r.index].arrived;
        let excess = r.ttft_s() - server_ttft.as_secs_f64();
        assert!(
            excess < r.client_queue_s() / 2.0,
            "turn {} waited {} s and its TTFT is {excess} s too long",
            r.index,
            r.client_queue_s()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_ends_its_conversation_and_the_rest_are_skipped_not_failed() {
    let _serial = serial().await;
    let bodies = Bodies::default();
    // Conversation 1's second turn (slot 4) fails; its third turn (slot 5) is never sent.
    let server = server(8, &bodies, |i| Script {
        status: if i == Some(4) { 500 } else { 200 },
        ttft: Duration::from_millis(3),
        itl: Duration::from_millis(1),
        tokens: 2,
        ..Script::default()
    })
    .await;
    let cfg = multi_turn_config(&server.base_url(), 0, 0.0);
    let plan = conversations(3, 3, |_| 0);
    let mut result = run(&cfg, &plan, quiet(), never()).await.unwrap();
    account(None, &plan, &mut result);
    assert!(!result.interrupted);
    assert_eq!(result.not_sent, 0, "skipped turns are not interruption losses");
    for r in &result.records {
        match r.index {
            4 => assert_eq!(r.failure.as_ref().map(|f| f.kind), Some(FailureKind::HttpStatus)),
            5 => {
                assert!(r.never_sent());
                assert_eq!(r.failure.as_ref().unwrap().message, "not sent: turn 1 of conversation 1 failed");
                assert_eq!(r.start_ns, 0);
            }
            _ => assert!(r.succeeded(), "turn {} failed: {:?}", r.index, r.failure),
        }
    }
    assert!(!bodies.lock().unwrap().contains_key(&5), "the server never saw the skipped turn");
    let summary = Summary::compute(&result);
    assert_eq!((summary.completed, summary.failed), (7, Some(1)));
    assert!(result.notes.iter().any(|n| n.contains("1 turns were not sent because an earlier turn")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_multi_turn_run_stops_sending_and_counts_the_turns_never_sent() {
    let _serial = serial().await;
    let bodies = Bodies::default();
    let server = server(4, &bodies, |_| Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 2,
        ..Script::default()
    })
    .await;
    // A long think time: only first turns go out before the cancellation.
    let cfg = multi_turn_config(&server.base_url(), 2, 30.0);
    let plan = conversations(4, 3, |_| 0);
    let started = Instant::now();
    let mut result = run(&cfg, &plan, quiet(), tokio::time::sleep(Duration::from_millis(300))).await.unwrap();
    account(None, &plan, &mut result);
    assert!(started.elapsed() < Duration::from_secs(5), "the run took {:?} to stop", started.elapsed());
    assert!(result.interrupted);
    assert_eq!(result.records.len(), 12);
    let sent: Vec<u32> = result.records.iter().filter(|r| r.succeeded()).map(|r| r.index).collect();
    assert_eq!(sent, [0, 3], "the first turns of the two active conversations");
    assert_eq!(result.not_sent, 10);
    assert!(result.records.iter().filter(|r| !r.succeeded()).all(RequestRecord::never_sent));
    assert_eq!(Summary::compute(&result).failed, Some(0));
    assert!(!result.notes.iter().any(|n| n.contains("were not sent because")), "{:?}", result.notes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_tokenizer_turn_prompts_and_prefix_shares_are_exact() {
    let _serial = serial().await;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let tok = Arc::new(Tokenizer::load(root.join("tokenizers/qwen3").to_str().unwrap()).unwrap());
    let bodies = Bodies::default();
    let server = server(100, &bodies, |_| Script {
        ttft: Duration::from_millis(2),
        itl: Duration::from_millis(1),
        tokens: 4,
        ..Script::default()
    })
    .await;
    let mut cfg = multi_turn_config(&server.base_url(), 4, 0.0);
    cfg.workload = WorkloadSpec::Sharegpt {
        path: root.join("sharegpt/sharegpt_small.json").to_string_lossy().into_owned(),
        output_len: Some(4),
        oversample: false,
        shuffle: false,
        multi_turn: Some(MultiTurn { max_active_conversations: 4, think_time_s: 0.0, max_turns: 3 }),
    };
    cfg.traffic.num_prompts = 4;
    let plan = build_plan(&cfg, Some(&tok)).unwrap();
    assert_eq!(plan.conversations.len(), 4);
    let mut result = run(&cfg, &plan, quiet(), never()).await.unwrap();
    account(Some(&tok), &plan, &mut result);
    all_succeeded(&result.records);
    assert_eq!(result.records.len(), plan.len());

    let bodies = bodies.lock().unwrap().clone();
    for recs in by_conversation(&result).values() {
        let mut prev_prompt = 0;
        for (k, r) in recs.iter().enumerate() {
            let prompt = r.prompt_tokens_client.expect("counted with the tokenizer");
            assert_eq!(prompt, chat_prompt_tokens(&tok, &bodies[&r.index]["messages"]).unwrap());
            let share = r.turn.unwrap().shared_prefix_tokens;
            if k == 0 {
                assert_eq!(share, 0);
            } else {
                // The whole previous prompt and (most of) its answer are reusable.
                assert!(share > prev_prompt && share < prompt, "turn {k}: {share} of {prompt}, previous {prev_prompt}");
            }
            prev_prompt = prompt;
        }
    }
    assert!(result.notes.iter().any(|n| n.contains("counted with") && n.contains("after the run")));
}
