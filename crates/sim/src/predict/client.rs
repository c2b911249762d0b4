//! The benchmark client of a prediction: the load policy the real client follows
//! ([`servebench_core::load::LoadPolicy`]: arrivals, the `--max-concurrency` cap, multi-turn
//! conversations), driven in the engine's virtual time, and the per-request records.
//!
//! Items are the plan's independent requests followed by every conversation turn. This file
//! only carries out the policy's actions: it turns each sent item into token ids for the
//! engine (a turn's prompt is the conversation's history, the answers actually generated
//! included) and records what comes back.

use std::collections::VecDeque;

use servebench_core::load::{Action, LoadPolicy, skip_message};
use servebench_core::plan::Plan;
use servebench_core::record::{Failure, FailureKind, OUTLIVED, RequestRecord, TurnRef, Usage};

use super::Prompts;
use super::dispatch::Dispatch;
use crate::engine::{Emission, Engine, NewRequest, Pooling, PromptTokens};

/// An item's further sequences carry their place above this bit of their tag (a plan holds
/// fewer than 2^32 items; probes are above bit 63).
const SEQUENCE_SHIFT: u32 = 32;
const ITEM_MASK: u64 = (1 << SEQUENCE_SHIFT) - 1;

/// A conversation's history: the prompt of its last turn and the answer in progress.
#[derive(Default)]
struct History {
    prompt: Vec<u32>,
    answer: Vec<u32>,
}

pub(super) struct Client<'a> {
    plan: &'a Plan,
    prompts: Prompts,
    policy: LoadPolicy,
    /// The policy's actions not yet carried out.
    actions: Vec<Action>,
    records: Vec<RequestRecord>,
    /// The prompt of each turn item once it can be built (indexed from the first turn item).
    turn_prompts: Vec<Option<Result<Vec<u32>, String>>>,
    histories: Vec<History>,
    /// Sequences of each item still running: a pooling request of several ends with its last.
    pending: Vec<u32>,
    /// Absolute engine time each item's clock started (when it was sent, unless the client
    /// is slower than the schedule).
    sent_abs: Vec<u64>,
    /// The client's send loop, where it is slower than the schedule (`bench-client=vllm`).
    dispatch: Option<Dispatch>,
    /// Requests sent but not yet on the wire, in the order the send loop writes them: (when
    /// they reach the server, item, request).
    on_the_way: VecDeque<(u64, usize, NewRequest)>,
    t0: u64,
}

impl<'a> Client<'a> {
    pub fn new(
        plan: &'a Plan,
        prompts: Prompts,
        t0: u64,
        limits: (usize, usize, u64),
        dispatch: Option<Dispatch>,
    ) -> Self {
        let (cap, max_active, think_ns) = limits;
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
        let mut turn_prompts = Vec::new();
        for (c, conv) in plan.conversations.iter().enumerate() {
            for (k, t) in conv.turns.iter().enumerate() {
                records.push(RequestRecord {
                    index: u32::try_from(records.len()).unwrap_or(u32::MAX),
                    planned_ns: conv.at_ns,
                    max_tokens: t.max_tokens,
                    turn: Some(TurnRef { conversation: conv.id, turn: k as u32, shared_prefix_tokens: 0 }),
                    ..RequestRecord::default()
                });
                turn_prompts.push((k == 0).then(|| prompts.conversations[c].first.clone()));
            }
        }
        let items = records.len();
        Client {
            plan,
            policy: LoadPolicy::new(plan, Some(cap), Some(max_active), think_ns),
            actions: Vec::new(),
            prompts,
            turn_prompts,
            histories: (0..plan.conversations.len()).map(|_| History::default()).collect(),
            records,
            pending: vec![1; items],
            sent_abs: vec![0; items],
            dispatch,
            on_the_way: VecDeque::new(),
            t0,
        }
    }

    pub fn t0(&self) -> u64 {
        self.t0
    }

    /// When the next request, conversation or turn falls due, or the next request sent
    /// reaches the server, engine time.
    pub fn next_arrival_abs(&self) -> Option<u64> {
        let wire = self.on_the_way.front().map(|&(at, _, _)| at);
        self.policy.next_due().map(|d| self.t0 + d).into_iter().chain(wire).min()
    }

    /// Takes in everything due by `t`, each at its own due time, sending what the policy
    /// allows then; requests reach the engine when they are on the wire.
    pub fn arrive_until(&mut self, engine: &mut Engine, t: u64) {
        while let Some(next) = self.next_arrival_abs().filter(|&n| n <= t) {
            // A request on the wire by then reaches the engine before what falls due with it.
            let on_the_wire = self.on_the_way.front().is_some_and(|&(wire, _, _)| wire == next);
            match on_the_wire.then(|| self.on_the_way.pop_front()).flatten() {
                Some((_, item, req)) => self.reach(engine, item, req),
                None => {
                    self.policy.advance(next - self.t0, &mut self.actions);
                    self.act(engine, next);
                }
            }
        }
    }

    /// Carries out the policy's actions at engine time `now` (sends that fail at once add
    /// actions of their own, carried out in turn). The sends of one moment are one burst to
    /// the client's send loop.
    fn act(&mut self, engine: &mut Engine, now: u64) {
        let mut i = 0;
        let mut burst = VecDeque::new();
        while let Some(&action) = self.actions.get(i) {
            i += 1;
            match action {
                Action::Send { item, planned_ns, arrived_ns } => {
                    let (clock, wire) = match self.dispatch.as_mut() {
                        None => (now, now),
                        Some(d) => {
                            if burst.is_empty() {
                                let sends =
                                    self.actions[i - 1..].iter().take_while(|a| matches!(a, Action::Send { .. }));
                                burst = d.burst(now, sends.count()).into();
                            }
                            burst.pop_front().unwrap_or((now, now))
                        }
                    };
                    let rec = &mut self.records[item];
                    rec.planned_ns = planned_ns;
                    rec.arrival_ns = arrived_ns;
                    self.send(engine, item, clock, wire);
                }
                Action::Skip { item, planned_ns, failed_turn } => {
                    let rec = &mut self.records[item];
                    let id = rec.turn.map_or(0, |t| t.conversation);
                    rec.planned_ns = planned_ns;
                    rec.failure = Some(Failure { kind: FailureKind::NotSent, message: skip_message(id, failed_turn) });
                }
            }
        }
        self.actions.clear();
    }

    /// Records a request refused before it reached the engine (its clock having started at
    /// `start`); the policy hears it failed at `at`.
    fn fail_send(&mut self, i: usize, start: u64, at: u64, message: String) {
        let rec = &mut self.records[i];
        rec.start_ns = start - self.t0;
        rec.arrival_ns = rec.arrival_ns.min(rec.start_ns);
        rec.status = 400;
        rec.failure = Some(Failure { kind: FailureKind::HttpStatus, message });
        self.policy.finished(i, false, at - self.t0, &mut self.actions);
    }

    /// Sends item `i`: its clock starts at `at`, and it reaches the engine at `wire`.
    fn send(&mut self, engine: &mut Engine, i: usize, at: u64, wire: u64) {
        let n = self.plan.requests.len();
        let (ids, ignore_eos, budget, images) = if i < n {
            let p = &mut self.prompts.requests[i];
            let ids = p.ids.take().ok_or_else(|| p.error.clone().unwrap_or_default());
            (ids, p.ignore_eos, p.max_tokens, std::mem::take(&mut p.images))
        } else {
            let prompt = self.turn_prompts[i - n].take().unwrap_or_else(|| Err("the turn has no prompt".into()));
            (prompt, self.prompts.turns_ignore_eos, self.prompts.turns_max_tokens, Vec::new())
        };
        let ids = match ids {
            Ok(ids) => ids,
            Err(message) => return self.fail_send(i, at, at, message),
        };
        if let Some((c, _)) = self.policy.turn_of(i) {
            let history = &mut self.histories[c];
            history.prompt.clone_from(&ids);
            history.answer.clear();
        }
        let rec = &mut self.records[i];
        rec.start_ns = at - self.t0;
        self.sent_abs[i] = at;
        let prepared = self.prompts.requests.get(i).filter(|_| i < n);
        let more: usize = prepared.map_or(0, |p| p.more.iter().map(Vec::len).sum());
        let usage = prepared.and_then(|p| p.usage).unwrap_or(ids.len() + more);
        let prompt_len = u32::try_from(usage).unwrap_or(u32::MAX);
        // The engine generates what the body asked for (and refuses a budget past the
        // context); the record keeps the planned length, as a real client's does.
        let max_tokens = budget.unwrap_or(u64::from(rec.max_tokens));
        if i < n && self.plan.tokens_exact() {
            rec.prompt_tokens_client = Some(self.plan.requests[i].prompt_tokens);
        }
        let chat = self.plan.api.templated();
        rec.usage.prompt_tokens = Some(prompt_len);
        let req = NewRequest {
            tag: i as u64,
            prompt: PromptTokens::Ids(ids),
            max_tokens,
            ignore_eos,
            arrived_ns: wire,
            chat,
            pooling: Pooling::of(prepared.is_some_and(|p| p.pooled), 0),
            images,
        };
        if wire > at {
            debug_assert!(self.on_the_way.back().is_none_or(|&(w, _, _)| w <= wire), "one loop writes in order");
            self.on_the_way.push_back((wire, i, req));
        } else {
            self.reach(engine, i, req);
        }
    }

    /// Item `i`'s request reaches the engine, with the further sequences of a pooling request
    /// of several (tagged with the item and their place above it), all or none.
    fn reach(&mut self, engine: &mut Engine, i: usize, req: NewRequest) {
        let (at, max_tokens) = (req.arrived_ns, req.max_tokens);
        let more = match self.prompts.requests.get_mut(i) {
            Some(p) => std::mem::take(&mut p.more),
            None => Vec::new(),
        };
        let refused =
            more.iter().find_map(|ids| engine.admits(u32::try_from(ids.len()).unwrap_or(u32::MAX), max_tokens).err());
        let added = match refused {
            Some(rejection) => Err(rejection),
            None => {
                let fields = (req.ignore_eos, req.chat);
                engine.add(req).map(|_| {
                    for (k, ids) in more.into_iter().enumerate() {
                        let tag = i as u64 | ((k as u64 + 1) << SEQUENCE_SHIFT);
                        let (ignore_eos, chat) = fields;
                        let prompt = PromptTokens::Ids(ids);
                        let seq = NewRequest {
                            tag,
                            prompt,
                            max_tokens,
                            ignore_eos,
                            arrived_ns: at,
                            chat,
                            pooling: Pooling::FurtherInput,
                            images: Vec::new(),
                        };
                        // Checked above: the engine takes it.
                        self.pending[i] += u32::from(engine.add(seq).is_ok());
                    }
                })
            }
        };
        match added {
            Ok(()) => self.records[i].chunks_us.reserve_exact(max_tokens as usize),
            Err(rejection) => {
                self.records[i].usage.prompt_tokens = None;
                self.fail_send(i, self.sent_abs[i], at, rejection.to_string());
            }
        }
    }

    /// Takes a token delivered at `end_abs`; a finished item is reported to the policy, and a
    /// conversation's next prompt is built from its history.
    pub fn deliver(&mut self, engine: &mut Engine, e: &Emission, end_abs: u64) {
        let i = (e.tag & ITEM_MASK) as usize;
        let Some(rec) = self.records.get_mut(i) else { return };
        // A sequence of a pooling request of several that is not its last.
        if e.finish.is_some() && self.pending[i] > 1 {
            self.pending[i] -= 1;
            return;
        }
        // A record keeps its tokens' times in µs after the send, as 32 bits: 71.6 minutes. A
        // request that lives longer fails as a client's timeout would, rather than read as
        // saturated times (a first token at 4,294,967 ms, its tokens 0 ms apart).
        let us = match u32::try_from((end_abs - self.sent_abs[i]) / 1000) {
            Ok(us) if rec.failure.is_none() => us,
            outlived => {
                if outlived.is_err() && rec.failure.is_none() {
                    rec.failure = Some(Failure { kind: FailureKind::Timeout, message: OUTLIVED.into() });
                    rec.end_us = u32::MAX;
                }
                if e.finish.is_some() {
                    self.policy.finished(i, false, end_abs - self.t0, &mut self.actions);
                    self.act(engine, end_abs);
                }
                return;
            }
        };
        // Accepted draft tokens travel in the chunk of the token before them.
        if !e.continues {
            rec.chunks_us.push(us);
        }
        let turn = self.policy.turn_of(i);
        if let Some((c, _)) = turn {
            self.histories[c].answer.push(e.token);
        }
        if e.finish.is_none() {
            return;
        }
        let rec = &mut self.records[i];
        rec.end_us = us;
        rec.status = 200;
        rec.usage.completion_tokens = Some(e.index);
        if let Some((c, k)) = turn {
            self.next_prompt(c, k, i + 1);
        }
        self.policy.finished(i, true, end_abs - self.t0, &mut self.actions);
        self.act(engine, end_abs);
    }

    /// The prompt of turn `k + 1` (item `next`) of conversation `c`: the last prompt, the
    /// answer and the next user message.
    fn next_prompt(&mut self, c: usize, k: usize, next: usize) {
        let Some(user) = self.prompts.conversations[c].next_users.get(k) else { return };
        let n = self.plan.requests.len();
        let prompt = match user {
            Ok(user) => {
                let history = &mut self.histories[c];
                let shared = history.prompt.len() + history.answer.len();
                let mut prompt = std::mem::take(&mut history.prompt);
                prompt.append(&mut history.answer);
                prompt.extend_from_slice(user);
                if let Some(t) = self.records[next].turn.as_mut() {
                    t.shared_prefix_tokens = u32::try_from(shared).unwrap_or(u32::MAX);
                }
                Ok(prompt)
            }
            Err(e) => Err(e.clone()),
        };
        self.turn_prompts[next - n] = Some(prompt);
    }

    pub fn unsent_or_unfinished(&self) -> bool {
        !self.policy.done()
    }

    /// The records. A turn skipped after a failed one is counted as skipped, not as never
    /// sent, as the real client counts it.
    pub fn finish(self) -> Vec<RequestRecord> {
        self.records
    }
}
