//! The load policy driven on made-up plans without I/O: send times, the concurrency cap,
//! conversation turns and failed turns.

use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;

use super::*;
use crate::config::Api;
use crate::plan::{ConversationPlan, PlannedRequest, TokenCounting, TurnPlan};

/// A plan of requests due at `requests` and conversations `(start, turns)`.
fn plan(requests: &[u64], conversations: &[(u64, usize)]) -> Plan {
    Plan {
        api: Api::Chat,
        requests: requests
            .iter()
            .enumerate()
            .map(|(i, &at_ns)| PlannedRequest {
                index: i as u32,
                at_ns,
                body: Bytes::new(),
                max_tokens: 1,
                prompt_tokens: 1,
                input_tokens: Vec::new(),
            })
            .collect(),
        conversations: conversations
            .iter()
            .enumerate()
            .map(|(c, &(at_ns, turns))| ConversationPlan {
                id: c as u32,
                at_ns,
                system: None,
                turns: (0..turns).map(|_| TurnPlan { user: String::new(), max_tokens: 1 }).collect(),
            })
            .collect(),
        token_counting: TokenCounting::Estimate,
        notes: Vec::new(),
    }
}

/// What a run under the policy did: per item, its send time, end and whether it was skipped;
/// the most in flight and the most conversations active at once.
#[derive(Debug, Default)]
struct Trace {
    sent: BTreeMap<usize, (u64, u64, u64)>,
    skipped: BTreeMap<usize, usize>,
    most_in_flight: usize,
    most_active: usize,
}

/// Drives `policy` in virtual time: item `i` takes `service(i)` ns and fails when `fails(i)`.
fn drive(mut policy: LoadPolicy, service: impl Fn(usize) -> u64, fails: impl Fn(usize) -> bool) -> Trace {
    let mut trace = Trace::default();
    let mut ends: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut active: BTreeMap<usize, ()> = BTreeMap::new();
    let mut out = Vec::new();
    let mut steps = 0;
    while !policy.done() {
        steps += 1;
        assert!(steps < 100_000, "the policy never finishes");
        let due = policy.next_due();
        let end = ends.peek().map(|Reverse((t, _))| *t);
        let now = match (due, end) {
            (Some(d), e) if e.is_none_or(|e| d <= e) => {
                policy.advance(d, &mut out);
                d
            }
            (_, Some(_)) => {
                let Reverse((t, item)) = ends.pop().unwrap();
                policy.finished(item, !fails(item), t, &mut out);
                // The conversation's slot frees after a failure or its last turn.
                if let Some((c, _)) = policy.turn_of(item)
                    && (fails(item) || policy.turn_of(item + 1).is_none_or(|(next, _)| next != c))
                {
                    active.remove(&c);
                }
                t
            }
            _ => panic!("not done, yet nothing is due or in flight"),
        };
        for action in out.drain(..) {
            match action {
                Action::Send { item, planned_ns, arrived_ns } => {
                    assert!(arrived_ns >= planned_ns && now >= arrived_ns, "{item}: {planned_ns} {arrived_ns} {now}");
                    assert!(trace.sent.insert(item, (now, now + service(item), planned_ns)).is_none(), "{item} twice");
                    ends.push(Reverse((now + service(item), item)));
                    if let Some((c, _)) = policy.turn_of(item) {
                        active.insert(c, ());
                    }
                }
                Action::Skip { item, failed_turn, .. } => {
                    assert!(trace.skipped.insert(item, failed_turn).is_none(), "{item} skipped twice");
                }
            }
        }
        trace.most_in_flight = trace.most_in_flight.max(ends.len());
        trace.most_active = trace.most_active.max(active.len());
    }
    trace
}

#[test]
fn requests_are_sent_when_due_and_queue_for_the_cap_in_order() {
    let p = plan(&[0, 0, 0, 10], &[]);
    let trace = drive(LoadPolicy::new(&p, Some(2), None, 0), |_| 100, |_| false);
    let sends: Vec<u64> = trace.sent.values().map(|s| s.0).collect();
    // Two at once; the third when the first ends; the fourth (due at 10) when the second ends.
    assert_eq!(sends, [0, 0, 100, 100]);
    assert_eq!(trace.most_in_flight, 2);
}

#[test]
fn turns_follow_the_previous_answer_after_the_think_time() {
    let p = plan(&[], &[(5, 3)]);
    let trace = drive(LoadPolicy::new(&p, None, None, 7), |_| 100, |_| false);
    let sends: Vec<(u64, u64)> = trace.sent.values().map(|s| (s.0, s.2)).collect();
    assert_eq!(sends, [(5, 5), (112, 112), (219, 219)], "(sent, planned)");
}

#[test]
fn a_waiting_conversation_counts_its_wait_as_queue_time() {
    let p = plan(&[], &[(0, 1), (0, 1)]);
    let mut policy = LoadPolicy::new(&p, None, Some(1), 0);
    let mut out = Vec::new();
    policy.advance(0, &mut out);
    assert_eq!(out, [Action::Send { item: 0, planned_ns: 0, arrived_ns: 0 }]);
    out.clear();
    policy.finished(0, true, 50, &mut out);
    assert_eq!(out, [Action::Send { item: 1, planned_ns: 0, arrived_ns: 0 }], "sent at 50, arrived at 0");
    out.clear();
    policy.finished(1, true, 90, &mut out);
    assert!(out.is_empty() && policy.done());
}

#[test]
fn a_failed_turn_skips_the_rest_of_its_conversation_and_frees_its_slot() {
    let p = plan(&[], &[(0, 3), (0, 2)]);
    let trace = drive(LoadPolicy::new(&p, None, Some(1), 0), |_| 10, |item| item == 1);
    assert_eq!(trace.skipped, BTreeMap::from([(2, 1)]), "turn 2 skipped after turn 1 failed");
    assert_eq!(trace.sent.keys().copied().collect::<Vec<_>>(), [0, 1, 3, 4]);
    assert_eq!(trace.sent[&3].0, 20, "the second conversation starts when the first one's failed turn ends");
    assert_eq!(skip_message(4, 1), "not sent: turn 1 of conversation 4 failed");
}

#[test]
fn empty_plans_and_empty_conversations_are_done_at_once() {
    let mut out = Vec::new();
    let mut policy = LoadPolicy::new(&plan(&[], &[(0, 0), (3, 0)]), Some(1), Some(1), 0);
    assert!(!policy.done());
    policy.advance(3, &mut out);
    assert!(out.is_empty() && policy.done());
    assert!(LoadPolicy::new(&plan(&[], &[]), None, None, 0).done());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Under any plan, cap, conversation limit, service times and failures: every item is sent
    /// once or skipped once, never before it is due; the caps hold; requests go out in due
    /// order; a conversation's turns go in order, each at least the think time after the one
    /// before ended; the turns after a failed one are skipped.
    #[test]
    fn the_policy_keeps_its_rules(
        mut requests in prop::collection::vec(0u64..1_000, 0..12),
        mut conversations in prop::collection::vec((0u64..1_000, 0usize..4), 0..6),
        cap in prop::option::of(1usize..4),
        max_active in prop::option::of(1usize..3),
        think in 0u64..50,
        service in prop::collection::vec(1u64..200, 40),
        fails in prop::collection::vec(prop::bool::weighted(0.15), 40),
    ) {
        requests.sort_unstable();
        conversations.sort_by_key(|c| c.0);
        let p = plan(&requests, &conversations);
        let policy = LoadPolicy::new(&p, cap, max_active, think);
        let n = p.len();
        let trace = drive(policy.clone(), |i| service[i % 40], |i| fails[i % 40]);
        prop_assert_eq!(trace.sent.len() + trace.skipped.len(), n);
        prop_assert!(trace.sent.keys().all(|i| !trace.skipped.contains_key(i)));
        prop_assert!(trace.most_in_flight <= cap.unwrap_or(usize::MAX));
        prop_assert!(trace.most_active <= max_active.unwrap_or(usize::MAX));
        for (i, &due) in requests.iter().enumerate() {
            prop_assert!(trace.sent[&i].0 >= due);
            if i > 0 {
                prop_assert!(trace.sent[&i].0 >= trace.sent[&(i - 1)].0, "FIFO");
            }
        }
        for item in requests.len()..n {
            let (c, k) = policy.turn_of(item).unwrap();
            if k == 0 {
                prop_assert!(trace.sent[&item].0 >= conversations[c].0);
                continue;
            }
            match (trace.sent.get(&(item - 1)), trace.sent.get(&item)) {
                (Some(before), Some(now)) => {
                    prop_assert!(!fails[(item - 1) % 40]);
                    prop_assert!(now.0 >= before.1 + think);
                }
                (_, None) => prop_assert!(trace.skipped.contains_key(&item)),
                (None, Some(_)) => prop_assert!(false, "turn {} sent after an unsent one", item),
            }
            if trace.sent.contains_key(&(item - 1)) && fails[(item - 1) % 40] {
                prop_assert_eq!(trace.skipped.get(&item), Some(&(k - 1)));
            }
        }
    }
}
