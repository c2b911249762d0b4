//! The benchmark client of a prediction: arrivals, the `--max-concurrency` cap, multi-turn
//! conversations and the per-request records.
//!
//! Items are the plan's independent requests followed by every conversation turn. Requests
//! arrive at their planned times; a conversation arrives at its planned start and takes an
//! active slot if one is free (else it waits, first come first served); its turns then arrive
//! one after another, each when the previous answer ended plus the think time.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use servebench_core::plan::Plan;
use servebench_core::record::{Failure, FailureKind, RequestRecord, TurnRef, Usage};

use super::Prompts;
use crate::engine::{Emission, Engine, NewRequest, PromptTokens};

/// A conversation's progress.
struct Conversation {
    /// Item of its first turn; turn k is `first_item + k`.
    first_item: usize,
    turns: usize,
    /// The prompt of the turn in flight.
    prompt: Vec<u32>,
    /// The answer so far of the turn in flight.
    answer: Vec<u32>,
}

/// What arrives next.
enum Source {
    Request,
    Conversation,
    Turn,
}

pub(super) struct Client<'a> {
    plan: &'a Plan,
    prompts: Prompts,
    records: Vec<RequestRecord>,
    /// Prompt ids of each turn item, set when the turn is built.
    turn_ids: Vec<Option<Vec<u32>>>,
    /// Absolute engine time each item was sent.
    sent_abs: Vec<u64>,
    t0: u64,
    cap: usize,
    in_flight: usize,
    queue: VecDeque<usize>,
    next_request: usize,
    convs: Vec<Conversation>,
    /// Conversation of each turn item (indexed from the first turn item).
    turn_conv: Vec<u32>,
    next_conv: usize,
    conv_waiting: VecDeque<usize>,
    active_convs: usize,
    max_active: usize,
    think_ns: u64,
    /// Turns due to arrive: (absolute time, item).
    turn_arrivals: BinaryHeap<Reverse<(u64, usize)>>,
    not_sent: usize,
}

impl<'a> Client<'a> {
    pub fn new(plan: &'a Plan, prompts: Prompts, t0: u64, cap: usize, max_active: usize, think_ns: u64) -> Self {
        let n = plan.requests.len();
        let mut records: Vec<RequestRecord> = plan
            .requests
            .iter()
            .map(|r| RequestRecord {
                index: r.index,
                planned_ns: r.at_ns,
                arrival_ns: r.at_ns,
                max_tokens: r.max_tokens,
                usage: Usage::default(),
                ..RequestRecord::default()
            })
            .collect();
        let mut convs = Vec::with_capacity(plan.conversations.len());
        let mut turn_conv = Vec::new();
        for (c, conv) in plan.conversations.iter().enumerate() {
            convs.push(Conversation {
                first_item: records.len(),
                turns: conv.turns.len(),
                prompt: Vec::new(),
                answer: Vec::new(),
            });
            for (k, t) in conv.turns.iter().enumerate() {
                records.push(RequestRecord {
                    index: u32::try_from(records.len()).unwrap_or(u32::MAX),
                    max_tokens: t.max_tokens,
                    turn: Some(TurnRef { conversation: conv.id, turn: k as u32, shared_prefix_tokens: 0 }),
                    ..RequestRecord::default()
                });
                turn_conv.push(c as u32);
            }
        }
        let items = records.len();
        Client {
            plan,
            prompts,
            turn_ids: vec![None; items - n],
            records,
            sent_abs: vec![0; items],
            t0,
            cap,
            in_flight: 0,
            queue: VecDeque::new(),
            next_request: 0,
            convs,
            turn_conv,
            next_conv: 0,
            conv_waiting: VecDeque::new(),
            active_convs: 0,
            max_active,
            think_ns,
            turn_arrivals: BinaryHeap::new(),
            not_sent: 0,
        }
    }

    pub fn t0(&self) -> u64 {
        self.t0
    }

    fn num_requests(&self) -> usize {
        self.plan.requests.len()
    }

    /// The earliest pending arrival: its absolute time and kind.
    fn next_arrival(&self) -> Option<(u64, Source)> {
        let mut best: Option<(u64, Source)> = None;
        let mut consider = |t: u64, s: Source| {
            if best.as_ref().is_none_or(|(b, _)| t < *b) {
                best = Some((t, s));
            }
        };
        if let Some(r) = self.plan.requests.get(self.next_request) {
            consider(self.t0 + r.at_ns, Source::Request);
        }
        if let Some(c) = self.plan.conversations.get(self.next_conv) {
            consider(self.t0 + c.at_ns, Source::Conversation);
        }
        if let Some(Reverse((t, _))) = self.turn_arrivals.peek() {
            consider(*t, Source::Turn);
        }
        best
    }

    /// When the next request, conversation or turn arrives, engine time.
    pub fn next_arrival_abs(&self) -> Option<u64> {
        self.next_arrival().map(|(t, _)| t)
    }

    /// Takes in everything that has arrived by `t`, starting what a free slot allows at its
    /// arrival time (slots are as they were before `t`'s finishes).
    pub fn arrive_until(&mut self, engine: &mut Engine, t: u64) {
        while let Some((at, source)) = self.next_arrival() {
            if at > t {
                break;
            }
            match source {
                Source::Request => {
                    let i = self.next_request;
                    self.next_request += 1;
                    self.enqueue(engine, i, at);
                }
                Source::Conversation => {
                    let c = self.next_conv;
                    self.next_conv += 1;
                    if self.active_convs < self.max_active {
                        self.start_conversation(c, at);
                    } else {
                        self.conv_waiting.push_back(c);
                    }
                }
                Source::Turn => {
                    if let Some(Reverse((_, item))) = self.turn_arrivals.pop() {
                        self.enqueue(engine, item, at);
                    }
                }
            }
        }
    }

    fn start_conversation(&mut self, c: usize, at: u64) {
        self.active_convs += 1;
        let conv = &mut self.convs[c];
        let item = conv.first_item;
        match &self.prompts.conversations[c].first {
            Ok(ids) => {
                conv.prompt = ids.clone();
                self.turn_ids[item - self.plan.requests.len()] = Some(ids.clone());
                self.turn_arrivals.push(Reverse((at, item)));
            }
            Err(e) => {
                let message = e.clone();
                self.mark_arrival(item, at);
                self.fail_send(item, at, message);
                self.end_conversation(c, 0, at);
            }
        }
    }

    /// Sets a turn's arrival (it has no planned time of its own).
    fn mark_arrival(&mut self, i: usize, at: u64) {
        if i >= self.num_requests() {
            let rec = &mut self.records[i];
            rec.planned_ns = at - self.t0;
            rec.arrival_ns = at - self.t0;
        }
    }

    /// Frees a conversation's slot at `at`; turns from `from_turn` on are never sent.
    fn end_conversation(&mut self, c: usize, from_turn: usize, at: u64) {
        let (first, turns) = (self.convs[c].first_item, self.convs[c].turns);
        for k in from_turn..turns {
            let rec = &mut self.records[first + k];
            if rec.failure.is_none() && rec.status == 0 {
                rec.failure = Some(Failure {
                    kind: FailureKind::NotSent,
                    message: format!("not sent: turn {} of this conversation failed", from_turn.max(1) - 1),
                });
                self.not_sent += 1;
            }
        }
        self.active_convs -= 1;
        if let Some(next) = self.conv_waiting.pop_front() {
            self.start_conversation(next, at);
        }
    }

    fn enqueue(&mut self, engine: &mut Engine, i: usize, at: u64) {
        self.mark_arrival(i, at);
        self.queue.push_back(i);
        if self.in_flight < self.cap && self.queue.len() == 1 {
            self.queue.pop_front();
            self.send(engine, i, at);
        }
    }

    /// Starts queued items while slots are free, at time `t`.
    pub fn drain_queue(&mut self, engine: &mut Engine, t: u64) {
        while self.in_flight < self.cap {
            let Some(i) = self.queue.pop_front() else { break };
            let at = t.max(self.t0 + self.records[i].arrival_ns);
            self.send(engine, i, at);
        }
    }

    /// Records a request refused before it reached the engine.
    fn fail_send(&mut self, i: usize, at: u64, message: String) {
        let rec = &mut self.records[i];
        rec.start_ns = at - self.t0;
        rec.arrival_ns = rec.arrival_ns.min(rec.start_ns);
        rec.status = 400;
        rec.failure = Some(Failure { kind: FailureKind::HttpStatus, message });
    }

    fn send(&mut self, engine: &mut Engine, i: usize, at: u64) {
        let n = self.num_requests();
        let (ids, ignore_eos, error) = if i < n {
            let p = &mut self.prompts.requests[i];
            (p.ids.take(), p.ignore_eos, p.error.clone())
        } else {
            (self.turn_ids[i - n].take(), self.prompts.turns_ignore_eos, None)
        };
        let Some(ids) = ids else {
            self.fail_send(i, at, error.unwrap_or_default());
            self.after_turn_failure(i, at);
            return;
        };
        let rec = &mut self.records[i];
        rec.start_ns = at - self.t0;
        self.sent_abs[i] = at;
        let prompt_len = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        let max_tokens = rec.max_tokens;
        if i < n && self.plan.tokens_exact() {
            rec.prompt_tokens_client = Some(self.plan.requests[i].prompt_tokens);
        }
        let req = NewRequest { tag: i as u64, prompt: PromptTokens::Ids(ids), max_tokens, ignore_eos, arrived_ns: at };
        match engine.add(req) {
            Ok(_) => {
                rec.usage.prompt_tokens = Some(prompt_len);
                rec.chunks_us.reserve_exact(max_tokens as usize);
                self.in_flight += 1;
            }
            Err(rejection) => {
                self.fail_send(i, at, rejection.to_string());
                self.after_turn_failure(i, at);
            }
        }
    }

    /// A failed turn ends its conversation.
    fn after_turn_failure(&mut self, i: usize, at: u64) {
        let n = self.num_requests();
        if i < n {
            return;
        }
        let c = self.turn_conv[i - n] as usize;
        let k = i - self.convs[c].first_item;
        self.end_conversation(c, k + 1, at);
    }

    /// Takes a token delivered at `end_abs`; a conversation's finished turn schedules the next.
    pub fn deliver(&mut self, e: &Emission, end_abs: u64) {
        let i = e.tag as usize;
        let n = self.num_requests();
        let Some(rec) = self.records.get_mut(i) else { return };
        let us = u32::try_from((end_abs - self.sent_abs[i]) / 1000).unwrap_or(u32::MAX);
        rec.chunks_us.push(us);
        if i >= n {
            let c = self.turn_conv[i - n] as usize;
            self.convs[c].answer.push(e.token);
        }
        if e.finish.is_none() {
            return;
        }
        let rec = &mut self.records[i];
        rec.end_us = us;
        rec.status = 200;
        rec.usage.completion_tokens = Some(e.index);
        self.in_flight -= 1;
        if i >= n {
            self.next_turn(self.turn_conv[i - n] as usize, i, end_abs);
        }
    }

    /// Builds the turn after item `done` of conversation `c` (or ends the conversation).
    fn next_turn(&mut self, c: usize, done: usize, end_abs: u64) {
        let (first, turns) = (self.convs[c].first_item, self.convs[c].turns);
        let k = done - first + 1;
        if k >= turns {
            self.end_conversation(c, k, end_abs);
            return;
        }
        let item = first + k;
        let user = match &self.prompts.conversations[c].next_users[k - 1] {
            Ok(ids) => ids,
            Err(e) => {
                let message = e.clone();
                self.mark_arrival(item, end_abs);
                self.fail_send(item, end_abs, message);
                self.end_conversation(c, k + 1, end_abs);
                return;
            }
        };
        let conv = &mut self.convs[c];
        let shared = conv.prompt.len() + conv.answer.len();
        conv.prompt.append(&mut conv.answer);
        conv.prompt.extend_from_slice(user);
        let prompt = conv.prompt.clone();
        if let Some(t) = self.records[item].turn.as_mut() {
            t.shared_prefix_tokens = u32::try_from(shared).unwrap_or(u32::MAX);
        }
        self.turn_ids[item - self.plan.requests.len()] = Some(prompt);
        self.turn_arrivals.push(Reverse((end_abs + self.think_ns, item)));
    }

    pub fn unsent_or_unfinished(&self) -> bool {
        self.next_request < self.plan.requests.len()
            || self.next_conv < self.plan.conversations.len()
            || !self.turn_arrivals.is_empty()
            || !self.conv_waiting.is_empty()
            || !self.queue.is_empty()
            || self.in_flight > 0
    }

    /// The records, and how many items were never sent.
    pub fn finish(self) -> (Vec<RequestRecord>, usize) {
        (self.records, self.not_sent)
    }
}
