//! Multi-turn conversations in `predict`: turn order and think time, the history as a cached
//! prefix, the active-conversation limit, and a failing turn ending its conversation.

use servebench_core::config::{Api, MultiTurn, RunConfig, WorkloadSpec};
use servebench_core::plan::{ConversationPlan, Plan, TokenCounting, TurnPlan};
use servebench_core::record::{FailureKind, RequestRecord};

use super::*;
use crate::presets::Presets;

fn setup(pairs: &[(&str, &str)]) -> SimSetup {
    let mut all = vec![("jitter".to_string(), "0".to_string())];
    all.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    SimSetup::resolve_with(&Presets::embedded().unwrap(), "Qwen/Qwen3-8B", "h100-sxm", &all, None).unwrap()
}

/// `n` conversations of `turns` turns, each user message `words` unique words, started 1 ms apart.
fn plan(n: usize, turns: usize, words: usize, max_tokens: u32) -> Plan {
    let conversations = (0..n)
        .map(|c| ConversationPlan {
            id: c as u32,
            at_ns: c as u64 * 1_000_000,
            system: (c == 0).then(|| "you are terse".to_string()),
            turns: (0..turns)
                .map(|k| TurnPlan {
                    user: (0..words).map(|w| format!("c{c}t{k}w{w}")).collect::<Vec<_>>().join(" "),
                    max_tokens,
                })
                .collect(),
        })
        .collect();
    Plan {
        api: Api::Chat,
        requests: Vec::new(),
        conversations,
        token_counting: TokenCounting::Estimate,
        notes: Vec::new(),
    }
}

fn config(max_active: usize, think_s: f64) -> RunConfig {
    let mut c = RunConfig::for_target("sim://m", "m");
    c.workload = WorkloadSpec::Sharegpt {
        path: "conversations.json".into(),
        output_len: None,
        oversample: false,
        shuffle: false,
        multi_turn: Some(MultiTurn { max_active_conversations: max_active, think_time_s: think_s, max_turns: 8 }),
    };
    c.ignore_eos = true;
    c
}

/// When a record's answer ended, ns (to the microsecond the record keeps).
fn end_ns(r: &RequestRecord) -> u64 {
    r.start_ns + u64::from(r.end_us) * 1000
}

fn close(a: u64, b: u64) -> bool {
    a.abs_diff(b) < 1000
}

#[test]
fn turns_follow_each_other_with_the_history_in_the_prompt() {
    let p = plan(3, 4, 50, 20);
    let r = predict(&p, &config(8, 0.5), &setup(&[]));
    assert_eq!(r.records.len(), 12);
    assert!(r.records.iter().all(RequestRecord::succeeded), "{:?}", r.records[0].failure);
    for c in 0..3 {
        let turns = &r.records[c * 4..c * 4 + 4];
        for (k, t) in turns.iter().enumerate() {
            let turn = t.turn.unwrap();
            assert_eq!((turn.conversation, turn.turn), (c as u32, k as u32));
            assert_eq!(t.usage.completion_tokens, Some(20));
            assert_eq!(t.index as usize, c * 4 + k);
        }
        // Role marker, 50 words, assistant marker (and a 3-word system message in conversation 0).
        let first = turns[0].usage.prompt_tokens.unwrap();
        assert_eq!(first, if c == 0 { 52 + 4 } else { 52 });
        assert_eq!(turns[0].turn.unwrap().shared_prefix_tokens, 0);
        for k in 1..4 {
            let (prev, next) = (&turns[k - 1], &turns[k]);
            let shared = next.turn.unwrap().shared_prefix_tokens;
            assert_eq!(shared, prev.usage.prompt_tokens.unwrap() + 20);
            assert_eq!(next.usage.prompt_tokens.unwrap(), shared + 52);
            // Sent 0.5 s after the previous answer ended.
            assert!(close(next.start_ns, end_ns(prev) + 500_000_000), "conversation {c} turn {k}");
            assert_eq!(next.arrival_ns, next.start_ns);
        }
    }
    let last = r.records.iter().map(end_ns).max().unwrap();
    assert!((r.duration_s - last as f64 * 1e-9).abs() < 1e-5);
    assert!(r.notes.iter().any(|n| n.contains("3 conversation(s), 12 turn(s)")), "{:?}", r.notes);
}

#[test]
fn the_prefix_cache_serves_the_history_of_later_turns() {
    let p = plan(1, 3, 3000, 200);
    let cached = predict(&p, &config(1, 0.0), &setup(&[]));
    let uncached = predict(&p, &config(1, 0.0), &setup(&[("enable-prefix-caching", "false")]));
    let ttft = |r: &RunResult, k: usize| r.records[k].ttft_s();
    // Turn 0 computes the same prompt either way; turn 2 recomputes about 6400 tokens without
    // the cache and about 3000 with it.
    assert!((ttft(&cached, 0) - ttft(&uncached, 0)).abs() < 1e-3);
    assert!(ttft(&cached, 2) < 0.7 * ttft(&uncached, 2), "{} vs {}", ttft(&cached, 2), ttft(&uncached, 2));
}

#[test]
fn at_most_max_active_conversations_run_at_once() {
    let p = plan(6, 3, 20, 10);
    let r = predict(&p, &config(2, 0.0), &setup(&[]));
    assert!(r.records.iter().all(RequestRecord::succeeded));
    let spans: Vec<(u64, u64)> = (0..6)
        .map(|c| {
            let turns = &r.records[c * 3..c * 3 + 3];
            (turns[0].start_ns, end_ns(&turns[2]))
        })
        .collect();
    for &(t, _) in &spans {
        let active = spans.iter().filter(|(a, b)| *a <= t && t < *b).count();
        assert!(active <= 2, "{active} conversations active at {t}: {spans:?}");
    }
    // The third conversation starts when one of the first two ends.
    let first_end = spans[0].1.min(spans[1].1);
    assert!(close(spans[2].0, first_end), "{spans:?}");
    // Without a limit they overlap.
    let free = predict(&p, &config(64, 0.0), &setup(&[]));
    assert!(free.duration_s < r.duration_s);
}

#[test]
fn a_turn_that_fails_ends_its_conversation() {
    // The history outgrows a 600-token context at the third turn of the long conversation.
    let mut p = plan(2, 4, 200, 40);
    p.conversations[1].turns.iter_mut().for_each(|t| t.user = "short one".into());
    let r = predict(&p, &config(8, 0.0), &setup(&[("max-model-len", "600")]));
    let long = &r.records[0..4];
    assert!(long[0].succeeded() && long[1].succeeded());
    assert_eq!(long[2].status, 400);
    assert!(long[2].failure.as_ref().unwrap().message.contains("maximum context length is 600"));
    assert_eq!(long[3].failure.as_ref().unwrap().kind, FailureKind::NotSent);
    assert!(long[3].never_sent());
    assert!(long[3].failure.as_ref().unwrap().message.contains("turn 2 of conversation"));
    assert_eq!(r.not_sent, 0, "a skipped turn is not an interruption loss, as in the real client");
    assert!(r.records[4..8].iter().all(RequestRecord::succeeded));

    // A sampling value vLLM refuses, carried by every turn, fails each conversation at its first.
    let mut c = config(8, 0.0);
    c.extra_body.insert("top_p".into(), serde_json::json!(1.5));
    let r = predict(&plan(2, 2, 10, 5), &c, &setup(&[]));
    for first in [&r.records[0], &r.records[2]] {
        assert_eq!(first.failure.as_ref().unwrap().message, "top_p must be in (0, 1], got 1.5.");
    }
    assert!(r.records.iter().all(|rec| !rec.succeeded()));
}

#[test]
fn requests_and_conversations_share_the_client() {
    let mut p = plan(2, 2, 10, 5);
    let single = super::tests::plan(3, |_| 30, |_| 7, 0);
    p.requests = single.requests;
    p.api = Api::Chat;
    for r in &mut p.requests {
        r.body = bytes::Bytes::from(
            serde_json::json!({"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 7}).to_string(),
        );
    }
    let mut c = config(8, 0.0);
    c.target.endpoint = "/v1/chat/completions".into();
    let r = predict(&p, &c, &setup(&[]));
    assert_eq!(r.records.len(), 3 + 4);
    assert!(r.records.iter().all(RequestRecord::succeeded));
    assert!(r.records[..3].iter().all(|x| x.turn.is_none() && x.output_tokens() == 7));
    assert!(r.records[3..].iter().all(|x| x.turn.is_some() && x.output_tokens() == 5));
}

#[test]
fn with_vllm_s_client_turns_still_follow_their_answers_and_a_failing_turn_ends_its_conversation() {
    let mut p = plan(2, 4, 200, 40);
    p.conversations[1].turns.iter_mut().for_each(|t| t.user = "short one".into());
    let r = predict(&p, &config(8, 0.0), &setup(&[("max-model-len", "600"), ("bench-client", "vllm")]));
    // Every turn sent reaches the engine, however long it waits for the client's loop.
    let statuses: Vec<u16> = r.records.iter().map(|x| x.status).collect();
    assert_eq!(statuses, vec![200, 200, 400, 0, 200, 200, 200, 200]);
    assert_eq!(r.records[3].failure.as_ref().unwrap().kind, FailureKind::NotSent);
    // A turn's clock starts once the answer before it has ended, and its answer comes after
    // its request is on the wire (0.8 ms for a lone request).
    for pair in r.records[4..8].windows(2) {
        assert!(pair[1].start_ns >= end_ns(&pair[0]), "{pair:?}");
    }
    assert!(r.records[4..8].iter().all(|x| x.ttft_s() > 0.8e-3));
}
