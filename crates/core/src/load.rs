//! The load policy: which request to send next, given the plan, what has finished and the
//! clock. It does no I/O and keeps no clock of its own, so one policy drives both the real
//! client (in real time) and the simulator's predictor (in virtual time), and the two cannot
//! send differently.
//!
//! Items are numbered as the plan's records are: the independent requests first, then every
//! conversation's turns in conversation order. The rules:
//! - a request falls due at its planned time; a conversation at its planned start, when it
//!   takes one of `max_active` conversation slots if one is free, else waits for one, first come
//!   first served; its first turn then goes to the send queue, still counted from the
//!   conversation's arrival (the wait for a slot is client queue time, never inside TTFT);
//! - a turn after the first falls due `think` after the previous answer ended;
//! - due items are sent in arrival order while fewer than `cap` are in flight (a FIFO queue);
//! - a failed turn ends its conversation: the turns after it are skipped, never sent, and the
//!   conversation's slot goes to the next waiting one.
//!
//! A driver calls [`LoadPolicy::advance`] at (or after) each [`LoadPolicy::next_due`] time and
//! [`LoadPolicy::finished`] when a sent item ends, and carries out the [`Action`]s they append.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::plan::Plan;

/// What the driver does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Send `item` now. It was due at `planned_ns` and reached the client at `arrived_ns`
    /// (ns since the run's start); the gap to now is client queue time.
    Send { item: usize, planned_ns: u64, arrived_ns: u64 },
    /// `item` is never sent: turn `failed_turn` of its conversation failed. `planned_ns` is
    /// when it would have been due at the earliest.
    Skip { item: usize, planned_ns: u64, failed_turn: usize },
}

/// Why a skipped turn was not sent (the same words in every driver).
pub fn skip_message(conversation_id: u32, failed_turn: usize) -> String {
    format!("not sent: turn {failed_turn} of conversation {conversation_id} failed")
}

/// The state of a run's sending; see the module docs.
#[derive(Clone, Debug)]
pub struct LoadPolicy {
    /// Due time of each independent request (non-decreasing).
    requests: Vec<u64>,
    /// Each conversation's planned start and first item.
    conversations: Vec<(u64, usize)>,
    /// One past each conversation's last item (for turn counts and lookups).
    ends: Vec<usize>,
    cap: usize,
    max_active: usize,
    think_ns: u64,
    next_request: usize,
    next_conversation: usize,
    /// Later turns, by due time: `(due, item)`.
    turns_due: BinaryHeap<Reverse<(u64, usize)>>,
    /// Conversations waiting for a slot: `(conversation, arrived_ns)`.
    waiting: VecDeque<(usize, u64)>,
    active: usize,
    /// Items due and waiting for a concurrency slot: `(item, planned_ns, arrived_ns)`.
    queue: VecDeque<(usize, u64, u64)>,
    in_flight: usize,
}

impl LoadPolicy {
    /// The policy of `plan` under `cap` requests in flight and `max_active` conversations
    /// (`None`: no limit), with `think_ns` between an answer and the next turn.
    pub fn new(plan: &Plan, cap: Option<usize>, max_active: Option<usize>, think_ns: u64) -> Self {
        let requests = plan.requests.iter().map(|r| r.at_ns).collect();
        let conversations = plan.conversations.iter().map(|c| (c.at_ns, c.turns.len())).collect();
        LoadPolicy::from_times(requests, conversations, cap, max_active, think_ns)
    }

    /// [`LoadPolicy::new`] from the due times alone: each independent request's (non-decreasing),
    /// and each conversation's start and number of turns (by start).
    pub fn from_times(
        requests: Vec<u64>,
        conversations: Vec<(u64, usize)>,
        cap: Option<usize>,
        max_active: Option<usize>,
        think_ns: u64,
    ) -> Self {
        let mut next = requests.len();
        let (mut starts, mut ends) = (Vec::new(), Vec::new());
        for (at_ns, turns) in conversations {
            starts.push((at_ns, next));
            next += turns;
            ends.push(next);
        }
        LoadPolicy {
            requests,
            conversations: starts,
            ends,
            cap: cap.unwrap_or(usize::MAX).max(1),
            max_active: max_active.unwrap_or(usize::MAX).max(1),
            think_ns,
            next_request: 0,
            next_conversation: 0,
            turns_due: BinaryHeap::new(),
            waiting: VecDeque::new(),
            active: 0,
            queue: VecDeque::new(),
            in_flight: 0,
        }
    }

    /// When the next request, conversation or turn falls due, ns since the run's start; `None`
    /// when nothing is scheduled (everything arrived, or the rest waits on answers).
    pub fn next_due(&self) -> Option<u64> {
        let request = self.requests.get(self.next_request).copied();
        let conversation = self.conversations.get(self.next_conversation).map(|c| c.0);
        let turn = self.turns_due.peek().map(|Reverse((t, _))| *t);
        [request, conversation, turn].into_iter().flatten().min()
    }

    /// Takes in everything due by `now`, in due order, each arriving at `now`, and sends what
    /// the free slots allow.
    pub fn advance(&mut self, now: u64, out: &mut Vec<Action>) {
        while let Some(due) = self.next_due().filter(|&t| t <= now) {
            if self.requests.get(self.next_request) == Some(&due) {
                let item = self.next_request;
                self.next_request += 1;
                self.queue.push_back((item, due, now));
            } else if self.conversations.get(self.next_conversation).is_some_and(|c| c.0 == due) {
                let c = self.next_conversation;
                self.next_conversation += 1;
                self.waiting.push_back((c, now));
                self.start_conversations();
            } else if let Some(Reverse((due, item))) = self.turns_due.pop() {
                self.queue.push_back((item, due, now));
            }
        }
        self.send_queued(out);
    }

    /// `item` (sent) ended at `now`, `ok` or failed: its slot frees; a conversation's next turn
    /// falls due `think` later, or the conversation ends (after a failure its other turns are
    /// skipped); then queued items are sent.
    pub fn finished(&mut self, item: usize, ok: bool, now: u64, out: &mut Vec<Action>) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(c) = self.conversation_of(item) {
            let (end, first) = (self.ends[c], self.conversations[c].1);
            let due = now.saturating_add(self.think_ns);
            if !ok {
                for skipped in item + 1..end {
                    out.push(Action::Skip { item: skipped, planned_ns: due, failed_turn: item - first });
                }
            }
            if ok && item + 1 < end {
                self.turns_due.push(Reverse((due, item + 1)));
            } else {
                self.active -= 1;
                self.start_conversations();
            }
        }
        self.send_queued(out);
    }

    /// Whether everything has been sent and has finished (or was skipped).
    pub fn done(&self) -> bool {
        self.next_due().is_none() && self.waiting.is_empty() && self.queue.is_empty() && self.in_flight == 0
    }

    /// The conversation (index in the plan) and turn of `item`; `None` for an independent request.
    pub fn turn_of(&self, item: usize) -> Option<(usize, usize)> {
        self.conversation_of(item).map(|c| (c, item - self.conversations[c].1))
    }

    fn conversation_of(&self, item: usize) -> Option<usize> {
        if item < self.requests.len() {
            return None;
        }
        let c = self.ends.partition_point(|&end| end <= item);
        (c < self.ends.len()).then_some(c)
    }

    /// Waiting conversations take free slots; each one's first turn joins the send queue,
    /// counted from the conversation's arrival. Conversations without turns end at once.
    fn start_conversations(&mut self) {
        while self.active < self.max_active {
            let Some((c, arrived)) = self.waiting.pop_front() else { break };
            let (planned, first) = self.conversations[c];
            if first < self.ends[c] {
                self.active += 1;
                self.queue.push_back((first, planned, arrived));
            }
        }
    }

    fn send_queued(&mut self, out: &mut Vec<Action>) {
        while self.in_flight < self.cap {
            let Some((item, planned_ns, arrived_ns)) = self.queue.pop_front() else { break };
            self.in_flight += 1;
            out.push(Action::Send { item, planned_ns, arrived_ns });
        }
    }
}

#[cfg(test)]
mod tests;
