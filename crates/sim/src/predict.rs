//! Virtual-time prediction: a whole benchmark plan executed through the engine, measured the way
//! `vllm bench serve` measures a real server.
//!
//! Requests arrive at their planned times; a client-side `--max-concurrency` cap holds the
//! excess in a FIFO queue (client queue time, outside TTFT); the bench's warm-up request (its
//! ready check, a copy of request 0) runs before the clock starts and leaves its prefix in the
//! cache; every token is a chunk that arrives at the end of the step that produced it.
//! Nothing here reads a clock or does I/O, so a prediction is repeatable for a seed.

use std::collections::VecDeque;

use servebench_core::config::RunConfig;
use servebench_core::plan::Plan;
use servebench_core::record::{Failure, FailureKind, RequestRecord, RunResult, TokenSource, Usage};

use crate::engine::{Emission, Engine, NewRequest, PromptTokens};
use crate::options::Warmup;
use crate::rng::mix64;
use crate::setup::SimSetup;
use crate::tokens::{TokenMapper, WordHashMapper};

/// Predicts a run with the word-hash token mapper.
pub fn predict(plan: &Plan, config: &RunConfig, sim: &SimSetup) -> RunResult {
    predict_with(plan, config, sim, &WordHashMapper)
}

/// A request's prompt and flags, read from its body before the run.
struct Prepared {
    ids: Option<Vec<u32>>,
    ignore_eos: bool,
    error: Option<String>,
}

fn prepare(plan: &Plan, config: &RunConfig, mapper: &dyn TokenMapper) -> Vec<Prepared> {
    plan.requests
        .iter()
        .map(|r| {
            let body: serde_json::Value = match serde_json::from_slice(&r.body) {
                Ok(v) => v,
                Err(e) => {
                    return Prepared {
                        ids: None,
                        ignore_eos: false,
                        error: Some(format!("the request body is not JSON: {e}")),
                    };
                }
            };
            let mut ids = Vec::with_capacity(r.prompt_tokens as usize + 8);
            if let Err(e) = mapper.prompt_ids(plan.api, &body, &mut ids) {
                return Prepared { ids: None, ignore_eos: false, error: Some(e) };
            }
            if plan.tokens_exact() && r.prompt_tokens > 0 {
                resize_prompt(&mut ids, r.prompt_tokens as usize);
            }
            let ignore_eos =
                config.ignore_eos || body.get("ignore_eos").and_then(serde_json::Value::as_bool) == Some(true);
            Prepared { ids: Some(ids), ignore_eos, error: None }
        })
        .collect()
}

/// Makes `ids` exactly `len` long, keeping its prefix (padding ids continue a hash chain).
fn resize_prompt(ids: &mut Vec<u32>, len: usize) {
    ids.truncate(len);
    let mut prev = ids.last().copied().unwrap_or(0);
    while ids.len() < len {
        prev = (mix64(u64::from(prev) ^ ids.len() as u64) >> 33) as u32;
        ids.push(prev);
    }
}

/// How many warm-up copies of request 0 the bench sends before the timed run.
fn warmup_count(sim: &SimSetup, config: &RunConfig) -> usize {
    let auto = usize::from(config.traffic.ready_check_timeout_s > 0.0) + config.traffic.num_warmups;
    match sim.options.warmup {
        Warmup::Off => 0,
        Warmup::On => auto.max(1),
        Warmup::Auto => auto,
    }
}

/// Runs the warm-up requests to completion; returns how many ran.
fn run_warmups(engine: &mut Engine, plan: &Plan, prepared: &[Prepared], count: usize) -> usize {
    let (Some(first), Some(ids)) = (plan.requests.first(), prepared.first().and_then(|p| p.ids.as_ref())) else {
        return 0;
    };
    let mut sent = 0;
    for k in 0..count {
        let req = NewRequest {
            tag: u64::MAX - k as u64,
            prompt: PromptTokens::Ids(ids.clone()),
            max_tokens: first.max_tokens,
            ignore_eos: prepared[0].ignore_eos,
            arrived_ns: engine.now_ns(),
        };
        sent += usize::from(engine.add(req).is_ok());
    }
    while let Some(t) = engine.next_wakeup_ns() {
        let before = engine.now_ns();
        engine.advance_to(t);
        if engine.step().is_none() && t <= before {
            // Work the engine cannot schedule; the timed run reports it.
            break;
        }
    }
    sent
}

/// The timed run's client: arrivals, the concurrency cap, and the records.
struct Client<'a> {
    plan: &'a Plan,
    prepared: Vec<Prepared>,
    records: Vec<RequestRecord>,
    /// Absolute engine time each request was sent.
    sent_abs: Vec<u64>,
    t0: u64,
    cap: usize,
    in_flight: usize,
    queue: VecDeque<usize>,
    next_arrival: usize,
    exact_counts: bool,
}

impl Client<'_> {
    fn arrival_abs(&self, i: usize) -> u64 {
        self.t0 + self.plan.requests[i].at_ns
    }

    /// Queues every request that has arrived by `t`, starting those a free slot allows at
    /// their arrival time (slots are as they were before `t`'s finishes).
    fn arrive_until(&mut self, engine: &mut Engine, t: u64) {
        while self.next_arrival < self.plan.requests.len() && self.arrival_abs(self.next_arrival) <= t {
            let i = self.next_arrival;
            self.next_arrival += 1;
            self.queue.push_back(i);
            if self.in_flight < self.cap && self.queue.len() == 1 {
                self.queue.pop_front();
                let at = self.arrival_abs(i);
                self.send(engine, i, at);
            }
        }
    }

    /// Starts queued requests while slots are free, at time `t`.
    fn drain_queue(&mut self, engine: &mut Engine, t: u64) {
        while self.in_flight < self.cap {
            let Some(i) = self.queue.pop_front() else { break };
            let at = t.max(self.arrival_abs(i));
            self.send(engine, i, at);
        }
    }

    fn send(&mut self, engine: &mut Engine, i: usize, at: u64) {
        let rec = &mut self.records[i];
        rec.start_ns = at - self.t0;
        self.sent_abs[i] = at;
        let p = &mut self.prepared[i];
        let Some(ids) = p.ids.take() else {
            rec.status = 400;
            rec.failure = Some(Failure { kind: FailureKind::HttpStatus, message: p.error.clone().unwrap_or_default() });
            return;
        };
        let prompt_len = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        let req = NewRequest {
            tag: i as u64,
            prompt: PromptTokens::Ids(ids),
            max_tokens: self.plan.requests[i].max_tokens,
            ignore_eos: p.ignore_eos,
            arrived_ns: at,
        };
        if self.exact_counts {
            rec.prompt_tokens_client = Some(self.plan.requests[i].prompt_tokens);
        }
        match engine.add(req) {
            Ok(_) => {
                rec.usage.prompt_tokens = Some(prompt_len);
                rec.chunks_us.reserve_exact(self.plan.requests[i].max_tokens as usize);
                self.in_flight += 1;
            }
            Err(rejection) => {
                rec.status = 400;
                rec.failure = Some(Failure { kind: FailureKind::HttpStatus, message: rejection.to_string() });
            }
        }
    }

    fn deliver(&mut self, e: &Emission, end_abs: u64) {
        let i = e.tag as usize;
        let Some(rec) = self.records.get_mut(i) else { return };
        let us = u32::try_from((end_abs - self.sent_abs[i]) / 1000).unwrap_or(u32::MAX);
        rec.chunks_us.push(us);
        if e.finish.is_some() {
            rec.end_us = us;
            rec.status = 200;
            rec.usage.completion_tokens = Some(e.index);
            self.in_flight -= 1;
        }
    }

    fn unsent_or_unfinished(&self) -> bool {
        self.next_arrival < self.plan.requests.len() || !self.queue.is_empty() || self.in_flight > 0
    }
}

/// Predicts a run, mapping bodies to token ids with `mapper`.
pub fn predict_with(plan: &Plan, config: &RunConfig, sim: &SimSetup, mapper: &dyn TokenMapper) -> RunResult {
    let seed = config.traffic.seed ^ sim.options.seed;
    let mut engine = Engine::new(sim, seed);
    let prepared = prepare(plan, config, mapper);
    let mut notes = sim.notes.clone();

    let warmups = run_warmups(&mut engine, plan, &prepared, warmup_count(sim, config));
    if warmups > 0 {
        notes.push(format!(
            "{warmups} warm-up request(s) identical to request 0 ran before the clock started \
             (their prefix stays cached)"
        ));
    }
    if !plan.conversations.is_empty() {
        notes.push(format!(
            "{} multi-turn conversation(s) are not simulated yet and have no records",
            plan.conversations.len()
        ));
    }

    let n = plan.requests.len();
    let records = plan
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
    let mut client = Client {
        plan,
        prepared,
        records,
        sent_abs: vec![0; n],
        t0: engine.now_ns(),
        cap: config.traffic.max_concurrency.unwrap_or(usize::MAX).max(1),
        in_flight: 0,
        queue: VecDeque::new(),
        next_arrival: 0,
        exact_counts: plan.tokens_exact(),
    };

    let mut emitted: Vec<Emission> = Vec::new();
    let mut last_end = client.t0;
    client.arrive_until(&mut engine, client.t0);
    while client.unsent_or_unfinished() {
        let stepped = match engine.step() {
            Some(step) => {
                emitted.clear();
                emitted.extend_from_slice(step.emissions);
                Some(step.end_ns)
            }
            None => None,
        };
        match stepped {
            Some(end) => {
                client.arrive_until(&mut engine, end);
                for e in &emitted {
                    client.deliver(e, end);
                }
                if emitted.iter().any(|e| e.finish.is_some()) {
                    last_end = last_end.max(end);
                }
                client.drain_queue(&mut engine, end);
            }
            None => {
                let next_arrival = (client.next_arrival < n).then(|| client.arrival_abs(client.next_arrival));
                let wake = match (engine.next_wakeup_ns(), next_arrival) {
                    (Some(a), Some(b)) => a.min(b),
                    (Some(a), None) | (None, Some(a)) => a,
                    (None, None) => break,
                };
                if wake <= engine.now_ns() {
                    // Arrivals up to now are in; the engine holds work it cannot schedule.
                    break;
                }
                engine.advance_to(wake);
                client.arrive_until(&mut engine, wake);
                client.drain_queue(&mut engine, wake);
            }
        }
    }
    for rec in &mut client.records {
        if rec.status == 0 && rec.failure.is_none() {
            rec.failure = Some(Failure {
                kind: FailureKind::Interrupted,
                message: "the simulated engine could not schedule this request".into(),
            });
        }
    }
    for rec in &client.records {
        if rec.failure.is_some() && rec.status == 400 {
            last_end = last_end.max(client.t0 + rec.start_ns);
        }
    }
    RunResult {
        config: config.clone(),
        records: client.records,
        duration_s: (last_end - client.t0) as f64 * 1e-9,
        date: String::new(),
        started_at: String::new(),
        interrupted: false,
        not_sent: 0,
        notes,
        token_source: TokenSource::Simulated,
    }
}

#[cfg(test)]
mod tests;
