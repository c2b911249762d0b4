//! Virtual-time prediction: a whole benchmark plan executed through the engine, measured the way
//! `vllm bench serve` measures a real server.
//!
//! Requests arrive at their planned times; a client-side `--max-concurrency` cap holds the
//! excess in a FIFO queue (client queue time, outside TTFT); the bench's warm-up request (its
//! ready check, a copy of request 0) runs before the clock starts and leaves its prefix in the
//! cache; every token is a chunk that arrives at the end of the step that produced it.
//!
//! Multi-turn conversations run turn after turn: the next turn is sent when the previous answer
//! ends plus the think time, its prompt the previous prompt and answer (the same token ids, so
//! the prefix cache reuses their blocks) followed by the new user message; at most
//! `max_active_conversations` conversations are active at once. Their records follow the
//! independent requests', conversation by conversation.
//!
//! Nothing here reads a clock or does I/O, so a prediction is repeatable for a seed.

mod client;
pub(crate) mod dispatch;
mod probes;
mod telemetry;

use servebench_core::config::{Api, PoolingForm, RunConfig, WorkloadSpec};
use servebench_core::plan::Plan;
use servebench_core::record::{Failure, FailureKind, RunResult, TokenSource};
use servebench_core::telemetry::SpecDecodeWindow;

use crate::engine::{Emission, EncoderInput, Engine, NewRequest, Pooling, PromptTokens};
use crate::media::Tower;
use crate::options::{BenchClient, Convert, Warmup};
use crate::rng::mix64;
use crate::setup::SimSetup;
use crate::tokens::{TokenMapper, WordHashMapper};
use client::Client;
use probes::ProbeChain;

/// Predicts a run with the word-hash token mapper.
pub fn predict(plan: &Plan, config: &RunConfig, sim: &SimSetup) -> RunResult {
    predict_with(plan, config, sim, &WordHashMapper)
}

/// Predicts a run, mapping bodies to token ids with `mapper`.
pub fn predict_with(plan: &Plan, config: &RunConfig, sim: &SimSetup, mapper: &dyn TokenMapper) -> RunResult {
    let prompts = Prompts::prepare(plan, config, mapper, sim);
    predict_prepared(plan, config, sim, prompts, warmup_count(sim.options.warmup, config))
}

/// What a plan counted of a request's prompt, where it counted with the tokenizer: the total,
/// and each input's own for a request of several (`PlannedRequest::input_tokens`).
#[derive(Clone, Copy, Debug)]
struct Counted<'a> {
    total: usize,
    inputs: &'a [u32],
}

/// A request's prompt and flags, read from its body before the run.
#[derive(Clone, Debug)]
pub(crate) struct Prepared {
    pub ids: Option<Vec<u32>>,
    /// The further sequences of a pooling request that asks for several (a list of inputs, a
    /// rerank's sequences), each run as its own request; the request ends with the last.
    pub more: Vec<Vec<u32>>,
    /// The prompt tokens the server's usage reports where they are not the sequences' own (a
    /// rerank by an embedding model counts the query with every document).
    pub usage: Option<usize>,
    /// The route reads it as a pooling body: its sequences end with their one step, generating
    /// nothing.
    pub pooled: bool,
    pub ignore_eos: bool,
    /// The output budget the body asks for where it gives one (`--extra-body` may override
    /// the planned length, as it does on a real server); the planned length otherwise, as
    /// asked (the engine refuses one past the context, naming it).
    pub max_tokens: Option<u64>,
    pub error: Option<String>,
    /// Its images, their tokens at the end of `ids`.
    pub images: Vec<EncoderInput>,
}

/// A conversation's token ids: the first turn's whole prompt, then each later user message.
#[derive(Clone, Debug)]
pub(crate) struct PreparedConversation {
    pub first: Result<Vec<u32>, String>,
    pub next_users: Vec<Result<Vec<u32>, String>>,
}

/// Every prompt of a plan as token ids, computed once (a fitter reuses them across runs).
#[derive(Clone, Debug)]
pub(crate) struct Prompts {
    pub requests: Vec<Prepared>,
    pub conversations: Vec<PreparedConversation>,
    /// Whether conversation turns run to `max_tokens` regardless of the EOS model.
    pub turns_ignore_eos: bool,
    /// The output budget every turn's body asks for through the run's `extra_body`, if any.
    pub turns_max_tokens: Option<u64>,
    /// The probe requests' prompt, with `--probe-request-rate`.
    pub probe: Option<Prepared>,
}

impl Prompts {
    pub fn prepare(plan: &Plan, config: &RunConfig, mapper: &dyn TokenMapper, sim: &SimSetup) -> Prompts {
        let (tower, convert) = (&Tower::of(sim), sim.options.convert);
        // The server reads a body as the API of the route it was sent to, whatever the backend
        // built: a completions body sent to `/v1/chat/completions` (`--backend openai
        // --endpoint /v1/chat/completions`, which vLLM's client lets through) is refused there,
        // as `sim serve` refuses it.
        let served = Api::served_at(&config.target.endpoint).unwrap_or(plan.api);
        let requests = plan
            .requests
            .iter()
            .map(|r| {
                let exact = (plan.tokens_exact() && r.prompt_tokens > 0)
                    .then_some(Counted { total: r.prompt_tokens as usize, inputs: &r.input_tokens });
                Prepared::of(&r.body, served, config, mapper, exact, tower, convert)
            })
            .collect();
        // The probes' body as the real client builds it (`--probe-request-rate`).
        let probe = config.traffic.probe_request_rate.map(|_| {
            Prepared::of(
                &servebench_workload::BodyBuilder::new(config).probe(),
                served,
                config,
                mapper,
                None,
                tower,
                convert,
            )
        });
        let chat_ids = |messages: serde_json::Value| -> Result<Vec<u32>, String> {
            let mut ids = Vec::new();
            mapper.prompt_ids(Api::Chat, &serde_json::json!({ "messages": messages }), &mut ids).map(|()| ids)
        };
        // A conversation's turns carry the run's sampling parameters (`extra_body`): one vLLM
        // refuses fails each conversation at its first turn.
        let extra = serde_json::Value::Object(config.extra_body.clone());
        let turns_budget = crate::sampling::requested_max_tokens(Api::Chat, &extra);
        let sampling = crate::sampling::check_fields(&config.extra_body).and(turns_budget.clone().map(|_| ()));
        let conversations = plan
            .conversations
            .iter()
            .map(|c| {
                let mut first = Vec::new();
                if let Some(s) = &c.system {
                    first.push(serde_json::json!({"role": "system", "content": s}));
                }
                if let Some(t) = c.turns.first() {
                    first.push(serde_json::json!({"role": "user", "content": t.user}));
                }
                PreparedConversation {
                    first: match &sampling {
                        Ok(()) => chat_ids(serde_json::Value::Array(first)),
                        Err(e) => Err(e.to_string()),
                    },
                    next_users: c
                        .turns
                        .iter()
                        .skip(1)
                        .map(|t| chat_ids(serde_json::json!([{"role": "user", "content": t.user}])))
                        .collect(),
                }
            })
            .collect();
        let turns_ignore_eos =
            config.ignore_eos || config.extra_body.get("ignore_eos").and_then(serde_json::Value::as_bool) == Some(true);
        Prompts { requests, conversations, turns_ignore_eos, turns_max_tokens: turns_budget.ok().flatten(), probe }
    }
}

impl Prepared {
    /// A request's `body` read as the server reads it at `served`: its prompt's ids (made as
    /// long as the plan counted them, `exact`, where it did), its output budget and
    /// `ignore_eos`; a body the server would refuse is a failure naming why.
    fn of(
        body: &[u8],
        served: Api,
        config: &RunConfig,
        mapper: &dyn TokenMapper,
        exact: Option<Counted>,
        tower: &Tower,
        convert: Convert,
    ) -> Prepared {
        let body: serde_json::Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return Prepared::failed(format!("the request body is not JSON: {e}")),
        };
        // As the route reads this body (`/v1/embeddings` takes chat messages too).
        let served = crate::tokens::read_as(served, &body);
        // As vLLM's server answers it: a 400 naming the parameter.
        let budget = crate::sampling::check(&body).and_then(|()| crate::sampling::requested_max_tokens(served, &body));
        let max_tokens = match budget {
            Ok(m) => m,
            Err(e) => return Prepared::failed(e.to_string()),
        };
        // A pooling body may carry several inputs (a list of them, a rerank's query and
        // documents).
        let inputs = if served.pooling() {
            crate::tokens::pooling_inputs(mapper, served, &body)
        } else {
            let mut ids = Vec::with_capacity(exact.map_or(0, |c| c.total) + 8);
            mapper.prompt_ids(served, &body, &mut ids).map(|()| vec![ids])
        };
        let mut inputs = match inputs {
            Ok(s) if s.is_empty() => {
                return Prepared::failed("the request has nothing to score: send documents".into());
            }
            Ok(s) => s,
            Err(e) => return Prepared::failed(e),
        };
        // Each input as long as the plan counted it, where it counted each.
        let each = exact.filter(|c| c.inputs.len() == inputs.len());
        for (ids, &len) in inputs.iter_mut().zip(each.map_or(&[][..], |c| c.inputs)) {
            resize_prompt(ids, len as usize);
        }
        // A rerank runs as the deployment scores it: pairs, or the query once.
        let rerank = served == Api::Pooling(PoolingForm::Rerank);
        let mut sequences = match inputs.split_first() {
            Some((query, documents)) if rerank => {
                crate::tokens::rerank_sequences(query, documents.iter().map(Vec::as_slice), convert)
            }
            _ => inputs,
        };
        // Else all of them as long as the plan's total (one prompt; a plan file that gives no
        // input's count).
        if let Some(c) = exact.filter(|_| each.is_none()) {
            resize_sequences(&mut sequences, c.total);
        }
        let usage = rerank.then(|| {
            let lens: Vec<usize> = sequences.iter().map(Vec::len).collect();
            crate::tokens::rerank_usage(&lens, convert)
        });
        let more = sequences.split_off(1);
        let Some(mut ids) = sequences.pop() else { return Prepared::failed("the request has no prompt".into()) };
        // The plan counts a prompt's text; its images' tokens follow.
        let images = match tower.expand(served, &body, &mut ids) {
            Ok(images) => images,
            Err(e) => return Prepared::failed(e),
        };
        // A pooling request is its prefill: one sampled token ends it (as `sim serve` runs it).
        if served.pooling() {
            return Prepared {
                ids: Some(ids),
                more,
                usage,
                pooled: true,
                ignore_eos: true,
                max_tokens: Some(1),
                error: None,
                images,
            };
        }
        let ignore_eos = config.ignore_eos || body_ignores_eos(&body);
        let more = Vec::new();
        Prepared { ids: Some(ids), more, usage: None, pooled: false, ignore_eos, max_tokens, error: None, images }
    }

    fn failed(error: String) -> Prepared {
        Prepared {
            ids: None,
            more: Vec::new(),
            usage: None,
            pooled: false,
            ignore_eos: false,
            max_tokens: None,
            error: Some(error),
            images: Vec::new(),
        }
    }
}

fn body_ignores_eos(body: &serde_json::Value) -> bool {
    body.get("ignore_eos").and_then(serde_json::Value::as_bool) == Some(true)
}

/// Makes `sequences` exactly `total` tokens long together, each its share by its own length
/// (the plan counts a request's tokens, not each input's; equal shares where all are empty).
/// The running total is rounded, not each share, so no share strays a token from its own.
fn resize_sequences(sequences: &mut [Vec<u32>], total: usize) {
    let have: usize = sequences.iter().map(Vec::len).sum();
    let weight = if have == 0 { sequences.len() } else { have };
    let (mut weighed, mut given) = (0, 0);
    for ids in sequences.iter_mut() {
        weighed += if have == 0 { 1 } else { ids.len() };
        let upto = (total * weighed + weight / 2) / weight;
        resize_prompt(ids, upto - given);
        given = upto;
    }
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

/// How many warm-up copies of request 0 run before the timed run, in `mode`.
pub(crate) fn warmup_count(mode: Warmup, config: &RunConfig) -> usize {
    let auto = asked_warmups(config);
    match mode {
        Warmup::Off => 0,
        Warmup::On => auto.max(1),
        Warmup::Auto => auto,
    }
}

/// The warm-up requests the run's own flags ask for: the ready check's first request and
/// `--num-warmups`.
fn asked_warmups(config: &RunConfig) -> usize {
    usize::from(config.traffic.ready_check_timeout_s > 0.0) + config.traffic.num_warmups
}

/// Runs the warm-up requests to completion; returns how many ran.
fn run_warmups(engine: &mut Engine, plan: &Plan, prompts: &Prompts, count: usize) -> usize {
    let (Some(first), Some(p)) = (plan.requests.first(), prompts.requests.first()) else {
        return 0;
    };
    let Some(ids) = p.ids.as_ref() else {
        return 0;
    };
    // Request 0's body, its output budget included (one past the context is refused as the
    // timed request is).
    let max_tokens = p.max_tokens.unwrap_or(u64::from(first.max_tokens));
    let mut sent = 0;
    for k in 0..count {
        // A pooling request of several sequences warms up with all of them.
        for (j, seq) in std::iter::once(ids).chain(&p.more).enumerate() {
            let req = NewRequest {
                tag: u64::MAX - k as u64,
                prompt: PromptTokens::Ids(seq.clone()),
                max_tokens,
                ignore_eos: p.ignore_eos,
                arrived_ns: engine.now_ns(),
                chat: plan.api.templated(),
                pooling: Pooling::of(p.pooled, j),
                images: if j == 0 { p.images.clone() } else { Vec::new() },
            };
            let added = engine.add(req).is_ok();
            sent += usize::from(added && j == 0);
        }
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

/// Runs a plan whose prompts are already token ids, after `warmups` copies of request 0.
pub(crate) fn predict_prepared(
    plan: &Plan,
    config: &RunConfig,
    sim: &SimSetup,
    mut prompts: Prompts,
    warmups: usize,
) -> RunResult {
    let seed = config.traffic.seed ^ sim.options.seed;
    let mut engine = Engine::new(sim, seed);
    let mut notes: Vec<String> = sim.all_notes().cloned().collect();

    let warmups = run_warmups(&mut engine, plan, &prompts, warmups);
    // The speculative decoder's counters as `vllm bench serve` reads them: after the warm-ups.
    let spec_before = engine.spec_decode_counts();
    if warmups > 0 {
        let cached = if sim.options.enable_prefix_caching { " (their prefix stays cached)" } else { "" };
        notes.push(format!("{warmups} warm-up request(s) identical to request 0 ran before the clock started{cached}"));
    }
    if plan.api.templated() && !sim.model.harmony_chat {
        notes.push(
            "chat and Responses requests: the frontend renders the chat template of every request of a burst before it \
             tokenizes any (vLLM's API server), so a burst reaches the scheduler together"
                .to_string(),
        );
    }
    let (max_active, think_s) = match &config.workload {
        WorkloadSpec::Sharegpt { multi_turn: Some(m), .. } => (m.max_active_conversations.max(1), m.think_time_s),
        _ => (usize::MAX, 0.0),
    };
    if !plan.conversations.is_empty() {
        let turns: usize = plan.conversations.iter().map(|c| c.turns.len()).sum();
        notes.push(format!(
            "{} conversation(s), {turns} turn(s): at most {} active at once, {think_s} s think time; \
             each turn's prompt repeats the history as token ids",
            plan.conversations.len(),
            if max_active == usize::MAX { "all".to_string() } else { max_active.to_string() }
        ));
    }

    let cap = config.traffic.max_concurrency.unwrap_or(usize::MAX).max(1);
    let think_ns = if think_s.is_finite() && think_s > 0.0 { (think_s * 1e9).round() as u64 } else { 0 };
    let dispatch = match sim.options.bench_client {
        BenchClient::Servebench => None,
        BenchClient::Vllm => {
            let d = dispatch::Dispatch::vllm();
            notes.push(d.note());
            Some(d)
        }
    };
    let probe = prompts.probe.take();
    let mut client = Client::new(plan, prompts, engine.now_ns(), (cap, max_active, think_ns), dispatch);

    let mut emitted: Vec<Emission> = Vec::new();
    let t0 = client.t0();
    let mut last_end = t0;
    // `--server-metrics`: the engine's own metrics, sampled in virtual time.
    let out = &config.output;
    let mut sampler = out.server_metrics.then(|| telemetry::Sampler::new(&engine, t0, out.scrape_interval_s));
    let mut chain = probe.zip(config.traffic.probe_request_rate).map(|(p, rate)| {
        let ids = p.ids.ok_or_else(|| p.error.unwrap_or_default());
        ProbeChain::new(ids, p.ignore_eos, plan.api.templated(), rate, t0)
    });
    // A probe due with requests goes first, as the real client starts its probes before it
    // sends the run's first request.
    let arrive = |client: &mut Client, chain: &mut Option<ProbeChain>, engine: &mut Engine, t: u64| {
        if let Some(p) = chain.as_mut() {
            p.arrive_until(engine, t);
        }
        client.arrive_until(engine, t);
    };
    arrive(&mut client, &mut chain, &mut engine, t0);
    let mut pressure = KvPressure::default();
    // The run goes on while any of its requests is unsent or unfinished; a probe in flight
    // when it ends ends first, and none is sent after.
    while client.unsent_or_unfinished() || chain.as_ref().is_some_and(ProbeChain::in_flight) {
        if !client.unsent_or_unfinished()
            && let Some(p) = chain.as_mut()
        {
            p.stop();
        }
        if let Some(s) = sampler.as_mut() {
            s.observe(&engine);
        }
        pressure.observe(&engine);
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
                arrive(&mut client, &mut chain, &mut engine, end);
                // The tokens reach the client once the frontend has written them.
                let at = engine.delivered_ns();
                for e in &emitted {
                    match chain.as_mut().filter(|_| probes::is_probe(e)) {
                        Some(p) => p.deliver(e, at),
                        None => client.deliver(&mut engine, e, at),
                    }
                }
                if emitted.iter().any(|e| e.finish.is_some() && !probes::is_probe(e)) {
                    last_end = last_end.max(at);
                }
                // Turns that follow an answer at once (no think time) arrive now.
                arrive(&mut client, &mut chain, &mut engine, at);
            }
            None => {
                let due =
                    [engine.next_wakeup_ns(), client.next_arrival_abs(), chain.as_ref().and_then(ProbeChain::next_due)];
                let Some(wake) = due.into_iter().flatten().min() else { break };
                if wake <= engine.now_ns() {
                    // Arrivals up to now are in; the engine holds work it cannot schedule.
                    break;
                }
                engine.advance_to(wake);
                arrive(&mut client, &mut chain, &mut engine, wake);
            }
        }
    }
    notes.extend(pressure.note(sim, engine.counters().preemptions));
    let telemetry = sampler.map(|s| {
        let (telemetry, note) = s.finish(&engine, last_end);
        notes.extend(note);
        telemetry
    });
    let spec_decode = engine.spec_decode_counts().map(|after| SpecDecodeWindow { before: spec_before, after });
    let mut records = client.finish();
    let probes = chain.map(ProbeChain::finish).unwrap_or_default();
    for rec in &records {
        if rec.failure.is_some() && rec.status == 400 {
            last_end = last_end.max(t0 + rec.start_ns);
        }
    }
    // A clock that saturated (steps of years, from absurd constants) schedules nothing more.
    let unscheduled = if engine.now_ns() == u64::MAX {
        "the simulated engine's clock ran out (2^64 ns): its steps last longer than any run; \
         check the stack's constants (--option, --profile)"
    } else {
        "the simulated engine could not schedule this request"
    };
    for rec in &mut records {
        if rec.status == 0 && rec.failure.is_none() {
            rec.failure = Some(Failure { kind: FailureKind::Interrupted, message: unscheduled.into() });
        }
    }
    // The saved config says what ran: warm-ups beyond the flags' own (the simulator's default
    // `warmup=on` emulates the bench's initial test request) count as `num_warmups`, so a
    // prediction read back as a measured point (`sim fit`, `sim validate`) gets them too.
    let mut config = config.clone();
    config.traffic.num_warmups += warmups.saturating_sub(asked_warmups(&config));
    RunResult {
        config,
        records,
        duration_s: (last_end - t0) as f64 * 1e-9,
        date: String::new(),
        started_at: String::new(),
        interrupted: false,
        not_sent: 0,
        stopped_by: None,
        notes,
        token_source: TokenSource::Simulated,
        client: None,
        shard: None,
        telemetry,
        spec_decode,
        probes,
    }
}

/// Whether the KV cache held back the run: the most requests running at once, the most in the
/// server at once (running, queued or on their way to the scheduler), and the fullest the cache
/// was, over the steps.
#[derive(Default)]
struct KvPressure {
    running: usize,
    in_server: usize,
    fullest: f64,
}

impl KvPressure {
    fn observe(&mut self, engine: &Engine) {
        self.running = self.running.max(engine.num_running());
        self.in_server = self.in_server.max(engine.num_running() + engine.num_waiting());
        self.fullest = self.fullest.max(engine.kv_usage());
    }

    /// A note where requests waited for the cache's blocks (it filled while fewer ran than were
    /// in the server, or it preempted some): the latencies then include that queue, which a
    /// larger cache would not.
    fn note(&self, sim: &SimSetup, preemptions: u64) -> Option<String> {
        let full = self.fullest >= 0.95 && self.running < self.in_server;
        if !full && preemptions == 0 {
            return None;
        }
        let preempted = match preemptions {
            0 => String::new(),
            n => format!(", and {n} preemption(s) pushed running requests back to recompute"),
        };
        Some(format!(
            "the KV cache ({} tokens) filled: at most {} request(s) ran at once while up to {} were in the \
             server, the rest queued for its blocks{preempted}; the latencies include that wait (more memory for it \
             runs more at once: --gpu-memory-utilization, more GPUs, --kv-cache-dtype fp8)",
            sim.memory.kv_tokens * u64::from(sim.options.dp.max(1)),
            self.running,
            self.in_server
        ))
    }
}

#[cfg(test)]
mod config_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod turn_tests;

#[cfg(test)]
mod input_tests;
#[cfg(test)]
mod vision_tests;
