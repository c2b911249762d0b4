//! Executes multi-turn conversations: each conversation starts at its planned time, holds one
//! of `max_active_conversations` slots until its last turn has ended, and sends its turns one
//! after another, each `think_time` after the previous answer ended, with the whole history
//! (the answers actually generated included) in `messages`.
//!
//! Tasks, as for single requests (see `dispatch.rs`):
//! - the dispatcher releases each conversation at `t0 + at_ns`;
//! - the launcher takes released conversations in order and starts each once an active slot
//!   is free (a FIFO wait);
//! - one task per conversation builds each next body between turns (off the timing path:
//!   while the think time runs), sleeps until the turn is due, waits for a `--max-concurrency`
//!   slot when the run is capped, and sends it.
//!
//! Every turn is one record, in conversation order then turn order. A turn's `planned_ns` is
//! when it was due (the conversation's start for the first turn, the previous answer's end
//! plus the think time for the others), `arrival_ns` when the client got to it, and the wait
//! for an active-conversation or concurrency slot shows as client queue time (`start_ns -
//! arrival_ns`), never inside TTFT. A failed turn ends its conversation: the turns after it
//! are recorded as never sent (kind `NotSent`, with the failed turn named) and counted as
//! skipped, not as failed. On cancellation no new turn is sent, in-flight turns get the grace
//! period, and turns never sent count as `not_sent`.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderValue;
use servebench_core::plan::ConversationPlan;
use servebench_core::record::{FailureKind, RequestRecord, TurnRef};
use servebench_workload::BodyBuilder;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};

use crate::dispatch::{
    BatchOutcome, CancelSignal, INTERRUPTED_FIRST, acquire, collect, fill_unsent, launch_in_order, nanos_since,
    not_sent, release_on_schedule, semaphore, send_timed, sleep_until_due, stop_dispatching,
};
use crate::progress::Progress;
use crate::stream::StreamContext;
use servebench_workload::History;

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
                Some(t) => {
                    let mut h = History::new(c.system.as_deref());
                    h.push_user(&t.user);
                    builder.messages(h.messages(), t.max_tokens)
                }
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
    fn locate(&self, slot: usize) -> (usize, usize) {
        let c = self.offsets.partition_point(|&o| o <= slot).saturating_sub(1);
        // Conversations without turns share their offset with the next one: take the last.
        (c, slot - self.offsets[c])
    }

    /// The record of turn `slot`, never sent (`message` says why).
    pub fn unsent(&self, slot: usize, message: &str) -> RequestRecord {
        let (c, k) = self.locate(slot);
        let plan = &self.plans[c];
        RequestRecord {
            index: slot as u32,
            planned_ns: plan.at_ns,
            max_tokens: plan.turns[k].max_tokens,
            turn: Some(turn_ref(plan, k)),
            failure: Some(not_sent(message)),
            ..RequestRecord::default()
        }
    }
}

fn turn_ref(plan: &ConversationPlan, k: usize) -> TurnRef {
    TurnRef { conversation: plan.id, turn: k as u32, shared_prefix_tokens: 0 }
}

struct Shared {
    ctx: StreamContext,
    set: Arc<ConversationSet>,
    t0: Instant,
    /// `--max-concurrency`, over the turns of all conversations.
    requests: Option<Arc<Semaphore>>,
    /// Turns true when the run is cancelled: nothing new is sent.
    halt: watch::Receiver<bool>,
    /// Turns true when the grace period is over: turns in flight stop.
    stop: watch::Receiver<bool>,
}

/// Runs every conversation of `set` and returns one record per turn; see the module docs.
pub(crate) async fn run_conversations<F: Future<Output = ()>>(
    ctx: &StreamContext,
    set: Arc<ConversationSet>,
    max_concurrency: Option<usize>,
    grace: Duration,
    cancel: &mut CancelSignal<F>,
) -> BatchOutcome {
    let n = set.len();
    let (halt_tx, halt_rx) = watch::channel(false);
    let (stop_tx, stop_rx) = watch::channel(false);
    let (release_tx, release_rx) = mpsc::unbounded_channel();
    let (record_tx, mut record_rx) = mpsc::unbounded_channel();
    let active = set.max_active.map(semaphore);

    let t0 = Instant::now();
    let shared = Arc::new(Shared {
        ctx: ctx.clone(),
        set: Arc::clone(&set),
        t0,
        requests: max_concurrency.map(semaphore),
        halt: halt_rx,
        stop: stop_rx,
    });
    let at_ns: fn(&ConversationPlan) -> u64 = |c| c.at_ns;
    let dispatcher = tokio::spawn(release_on_schedule(Arc::clone(&set.plans), at_ns, t0, release_tx));
    let launcher = tokio::spawn(launch_in_order(release_rx, active, move |c, arrival_ns, slot| {
        conversation(Arc::clone(&shared), c, arrival_ns, slot, record_tx.clone())
    }));

    let halt = async {
        // Conversations waiting for a slot or thinking end at once; the record channel closes
        // when the last turn in flight has handed its record back.
        halt_tx.send_replace(true);
        stop_dispatching(dispatcher, launcher).await;
    };
    let (records, interrupted) = collect(n, &mut record_rx, cancel, grace, &stop_tx, halt).await;
    let duration = t0.elapsed();
    let (records, not_sent) = fill_unsent(records, |slot| set.unsent(slot, INTERRUPTED_FIRST));
    BatchOutcome { records, not_sent, interrupted, duration }
}

/// Completes once the run has been halted (never, if its switch is gone).
async fn halted(halt: &mut watch::Receiver<bool>) {
    if halt.wait_for(|h| *h).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Sends the turns of conversation `c` in order; `_active` is its slot, held to the end.
async fn conversation(
    shared: Arc<Shared>,
    c: usize,
    mut arrival_ns: u64,
    _active: Option<OwnedSemaphorePermit>,
    records: mpsc::UnboundedSender<(usize, RequestRecord)>,
) {
    let set = &shared.set;
    let plan = &set.plans[c];
    let first = set.offsets[c];
    let think_ns = u64::try_from(set.think.as_nanos()).unwrap_or(u64::MAX);
    let mut halt = shared.halt.clone();
    let mut stop = shared.stop.clone();
    let mut history = History::new(plan.system.as_deref());
    let mut body = set.first_bodies[c].clone();
    let mut planned_ns = plan.at_ns;
    for (k, turn) in plan.turns.iter().enumerate() {
        let slot = first + k;
        history.push_user(&turn.user);
        if k > 0 {
            body = set.builder.messages(history.messages(), turn.max_tokens);
            tokio::select! {
                () = sleep_until_due(shared.t0, planned_ns) => {}
                () = halted(&mut halt) => return,
            }
            arrival_ns = nanos_since(shared.t0);
        }
        let permit = tokio::select! {
            p = acquire(shared.requests.as_ref()) => p,
            () = halted(&mut halt) => return,
        };
        if *halt.borrow() {
            return;
        }
        let mut rec = RequestRecord {
            index: slot as u32,
            planned_ns,
            arrival_ns,
            max_tokens: turn.max_tokens,
            turn: Some(turn_ref(plan, k)),
            ..RequestRecord::default()
        };
        let id = set.request_ids[slot].clone();
        send_timed(&shared.ctx, shared.t0, &mut rec, std::mem::take(&mut body), Some(id), permit, &mut stop).await;
        let next_ns = rec.start_ns.saturating_add(u64::from(rec.end_us) * 1000).saturating_add(think_ns);
        let failed = rec.failure.as_ref().map(|f| f.kind);
        if failed.is_none() {
            history.push_assistant(&rec.text);
        }
        // The receiver is gone only if the run stopped waiting; the record is then not needed.
        let _ = records.send((slot, rec));
        match failed {
            None => planned_ns = next_ns,
            // The rest of an interrupted run's turns are counted as never sent by the run.
            Some(FailureKind::Interrupted) => return,
            // A failure ends the conversation, interrupted run or not.
            Some(_) => {
                skip_rest(&shared, plan, first, k, next_ns, &records);
                return;
            }
        }
    }
}

/// Records the turns after failed turn `k` as never sent.
fn skip_rest(
    shared: &Shared,
    plan: &ConversationPlan,
    first: usize,
    k: usize,
    planned_ns: u64,
    records: &mpsc::UnboundedSender<(usize, RequestRecord)>,
) {
    let message = format!("not sent: turn {k} of conversation {} failed", plan.id);
    for (j, turn) in plan.turns.iter().enumerate().skip(k + 1) {
        let rec = RequestRecord {
            index: (first + j) as u32,
            planned_ns,
            max_tokens: turn.max_tokens,
            turn: Some(turn_ref(plan, j)),
            failure: Some(not_sent(&message)),
            ..RequestRecord::default()
        };
        Progress::add(&shared.ctx.progress.completed, 1);
        let _ = records.send((first + j, rec));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
