//! Multi-turn conversations, prepared for the run: each conversation starts at its planned
//! time, holds one of `max_active_conversations` slots until its last turn has ended, and sends
//! its turns one after another, each `think_time` after the previous answer ended, with the
//! whole history (the answers actually generated included) in `messages`. When each turn goes
//! is the load policy's to say (`dispatch.rs` drives it); this file holds the bodies, the
//! request ids and the records of the turns.
//!
//! Every turn is one record, in conversation order then turn order. A turn's `planned_ns` is
//! when it was due (the conversation's start for the first turn, the previous answer's end
//! plus the think time for the others), `arrival_ns` when the client got to it, and the wait
//! for an active-conversation or concurrency slot shows as client queue time (`start_ns -
//! arrival_ns`), never inside TTFT. A failed turn ends its conversation: the turns after it
//! are recorded as never sent (kind `NotSent`, with the failed turn named) and counted as
//! skipped, not as failed. On cancellation no new turn is sent, in-flight turns get the grace
//! period, and turns never sent count as `not_sent`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;
use servebench_core::plan::ConversationPlan;
use servebench_core::record::{RequestRecord, TurnRef};
use servebench_workload::{BodyBuilder, History};

use crate::dispatch::not_sent;

/// The conversations of a plan, with everything that does not depend on the run prepared.
#[derive(Debug)]
pub(crate) struct ConversationSet {
    pub plans: Arc<[ConversationPlan]>,
    /// The record slot of each conversation's first turn.
    pub offsets: Vec<usize>,
    /// Each conversation's first-turn body.
    pub first_bodies: Vec<Bytes>,
    /// The `x-request-id` of every slot.
    pub request_ids: Vec<HeaderValue>,
    pub builder: BodyBuilder,
    /// Between an answer's end and the next turn.
    pub think: Duration,
    /// At most this many conversations active at once (`None`: no cap).
    pub max_active: Option<usize>,
}

impl ConversationSet {
    /// Prepares `plans`; `request_id(slot)` names each turn.
    pub fn new(
        plans: &[ConversationPlan],
        builder: BodyBuilder,
        think_s: f64,
        max_active: usize,
        mut request_id: impl FnMut(usize) -> HeaderValue,
    ) -> Self {
        let mut offsets = Vec::with_capacity(plans.len());
        let mut first_bodies = Vec::with_capacity(plans.len());
        let mut slots = 0;
        for c in plans {
            offsets.push(slots);
            slots += c.turns.len();
            first_bodies.push(match c.turns.first() {
                Some(t) => builder.messages(first_history(c).messages(), t.max_tokens),
                None => Bytes::new(),
            });
        }
        Self {
            plans: plans.into(),
            offsets,
            first_bodies,
            request_ids: (0..slots).map(&mut request_id).collect(),
            builder,
            think: Duration::try_from_secs_f64(think_s).unwrap_or_default(),
            max_active: (max_active > 0).then_some(max_active),
        }
    }

    /// Turns in all.
    pub fn len(&self) -> usize {
        self.request_ids.len()
    }

    /// The conversation and turn of `slot`.
    pub fn locate(&self, slot: usize) -> (usize, usize) {
        let c = self.offsets.partition_point(|&o| o <= slot).saturating_sub(1);
        // Conversations without turns share their offset with the next one: take the last.
        (c, slot - self.offsets[c])
    }

    /// The record of turn `slot`, never sent (`message` says why).
    pub fn unsent(&self, slot: usize, message: &str) -> RequestRecord {
        let planned_ns = self.plans[self.locate(slot).0].at_ns;
        RequestRecord { failure: Some(not_sent(message)), ..self.turn_record(slot, planned_ns, 0) }
    }

    /// The record of turn `slot`, sent now: due at `planned_ns`, reached the client at `arrived_ns`.
    pub fn turn_record(&self, slot: usize, planned_ns: u64, arrived_ns: u64) -> RequestRecord {
        let (c, k) = self.locate(slot);
        let plan = &self.plans[c];
        RequestRecord {
            index: slot as u32,
            planned_ns,
            arrival_ns: arrived_ns,
            max_tokens: plan.turns[k].max_tokens,
            turn: Some(turn_ref(plan, k)),
            ..RequestRecord::default()
        }
    }

    /// After turn `k` of conversation `c` was answered with `answer`: the history with the
    /// answer and the next user message, and the next turn's body; `None` after the last turn.
    /// `history` is the conversation's so far (`None` after its first turn: made here).
    pub fn next_turn(&self, c: usize, k: usize, history: Option<History>, answer: &str) -> Option<(History, Bytes)> {
        let plan = &self.plans[c];
        let next = plan.turns.get(k + 1)?;
        let mut history = history.unwrap_or_else(|| first_history(plan));
        history.push_assistant(answer);
        history.push_user(&next.user);
        let body = self.builder.messages(history.messages(), next.max_tokens);
        Some((history, body))
    }
}

/// A conversation's history as its first turn sends it: the system prompt and the first user
/// message (a conversation without turns has only the system prompt).
fn first_history(plan: &ConversationPlan) -> History {
    let mut h = History::new(plan.system.as_deref());
    if let Some(t) = plan.turns.first() {
        h.push_user(&t.user);
    }
    h
}

fn turn_ref(plan: &ConversationPlan, k: usize) -> TurnRef {
    TurnRef { conversation: plan.id, turn: k as u32, shared_prefix_tokens: 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::INTERRUPTED_FIRST;
    use servebench_core::config::Api;
    use servebench_core::plan::TurnPlan;

    fn conv(id: u32, turns: usize) -> ConversationPlan {
        ConversationPlan {
            id,
            at_ns: u64::from(id) * 10,
            system: Some("sys".into()),
            turns: (0..turns).map(|k| TurnPlan { user: format!("u{k}"), max_tokens: 4 }).collect(),
        }
    }

    fn set(plans: &[ConversationPlan]) -> ConversationSet {
        let builder = BodyBuilder::from_parts(Api::Chat, "m", false, Default::default());
        ConversationSet::new(plans, builder, 0.25, 0, |slot| HeaderValue::from(slot as u64))
    }

    #[test]
    fn slots_map_back_to_conversation_and_turn() {
        let s = set(&[conv(0, 2), conv(1, 0), conv(2, 3)]);
        assert_eq!(s.len(), 5);
        assert_eq!(s.offsets, [0, 2, 2]);
        assert_eq!(s.locate(0), (0, 0));
        assert_eq!(s.locate(1), (0, 1));
        assert_eq!(s.locate(2), (2, 0));
        assert_eq!(s.locate(4), (2, 2));
        let r = s.unsent(3, INTERRUPTED_FIRST);
        assert_eq!(r.turn, Some(TurnRef { conversation: 2, turn: 1, shared_prefix_tokens: 0 }));
        assert!(r.never_sent());
        assert_eq!((s.think, s.max_active), (Duration::from_millis(250), None));
    }

    #[test]
    fn first_bodies_carry_the_system_prompt_and_the_first_user_turn() {
        let s = set(&[conv(0, 2)]);
        let body: serde_json::Value = serde_json::from_slice(&s.first_bodies[0]).unwrap();
        assert_eq!(
            body["messages"],
            serde_json::json!([{"role": "system", "content": "sys"}, {"role": "user", "content": "u0"}])
        );
        assert_eq!(body["max_completion_tokens"], 4);
    }
}
