//! The serving engine in virtual time: pure, deterministic for a seed, no runtime and no I/O.
//!
//! A caller submits requests ([`Engine::add`]), then calls [`Engine::step`] repeatedly. Each
//! step schedules one batch as vLLM V1 does (with async scheduling, planned while the step
//! before it ran), asks the [`StepCost`] model how long it takes,
//! moves the clock to the step's end and reports the tokens emitted at that instant. With
//! pipeline stages, as vLLM's batch queue does, up to one batch a stage is in flight: each
//! enters the first stage when it is free and leaves after the whole step's time, and `step`
//! reports them in the order they leave. When
//! nothing can run, [`Engine::next_wakeup_ns`] says when something will (a request becoming
//! visible) and [`Engine::advance_to`] moves the idle clock. `predict` drives it as fast as it
//! can; a real-time server sleeps until each step's end before delivering its tokens, and calls
//! [`Engine::cancel`] for clients that went away.

mod api_servers;
mod frontend;
#[cfg(test)]
mod frontend_tests;
mod kv;
mod phases;
mod request;
mod scheduler;
mod spec;
#[cfg(test)]
mod spec_tests;
#[cfg(test)]
mod tests;
mod tokenizer;

use std::collections::VecDeque;

#[cfg(test)]
pub(crate) use frontend::CHUNK_SHARE;
pub use phases::{PhaseTotals, RequestTimes};
pub use request::{EncoderInput, FinishReason, NewRequest, Pooling, PromptTokens, Rejection, RequestId, SharedPrefix};
pub use spec::SpecDraws;
pub use tokenizer::{MICROBATCH_SINCE, Microbatch};

use crate::cost::{BatchStats, CostModel, StepBreakdown, StepCost};
use crate::options::EosModel;
use crate::rng::{SimRng, mix64};
use crate::setup::{KvLayout, SimSetup};
use api_servers::ApiServers;
use kv::BlockPool;
use request::{Phase, Req};

/// The engine's fixed settings.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    pub max_model_len: u32,
    pub enable_prefix_caching: bool,
    pub kv: KvLayout,
    /// The look-back that bounds attention (a sliding window, or sparse attention's top-k; 0:
    /// none), for the cost of its pairs and reads.
    pub window: u32,
    /// Delay before a received request is visible to the scheduler (`alpha_api`), ns.
    pub api_delay_ns: u64,
    /// Tokenizing per prompt token, on the API server's tokenizing thread (on its loop for a
    /// prompt rendered to token ids there), ns.
    pub api_ns_per_token: f64,
    /// The frontend's serial work per request, and per further input of a pooling request, ns.
    pub api_ns_per_request: u64,
    pub api_ns_per_input: u64,
    /// How the tokenizing thread groups the prompts queued for it.
    pub tokenizer: Microbatch,
    /// The frontend's serial work per streamed token, ns.
    pub api_ns_per_output_token: f64,
    /// API server processes sharing that work (`--api-server-count`).
    pub api_servers: u32,
    /// The model's chat prompts are rendered by a Jinja template, which vLLM's API server runs
    /// for a whole burst of chat requests before it tokenizes any (`frontend`); false for
    /// gpt-oss, whose harmony format it renders to token ids at once.
    pub chat_template: bool,
    pub eos: EosModel,
    /// σ of the lognormal factor on each step's duration.
    pub jitter_sigma: f64,
    /// vLLM's async scheduling: a step that follows another back to back was planned when that
    /// one began, so a request that became visible since waits one step more for its prefill.
    pub async_scheduling: bool,
    /// Batches in flight at once: one a pipeline stage (vLLM's batch queue), 1 without stages.
    pub pipeline_batches: u32,
    /// Speculative decoding: each decoding sequence verifies draft tokens every step.
    pub spec: Option<SpecDraws>,
}

impl EngineConfig {
    pub fn from_setup(s: &SimSetup) -> Self {
        Self {
            max_num_seqs: s.options.max_num_seqs,
            max_num_batched_tokens: s.options.max_num_batched_tokens,
            max_model_len: s.max_model_len,
            enable_prefix_caching: s.options.enable_prefix_caching,
            kv: s.memory.layout,
            window: s.model.pair_window(),
            api_delay_ns: (s.stack.alpha_api_ms * 1e6).round() as u64,
            api_ns_per_token: s.stack.api_us_per_token * 1e3,
            api_ns_per_request: (s.stack.api_ms_per_request * 1e6).round() as u64,
            api_ns_per_input: (s.stack.api_ms_per_input * 1e6).round() as u64,
            tokenizer: match s.options.vllm_release {
                Some(release) if release < MICROBATCH_SINCE => Microbatch::one_at_a_time(),
                _ => Microbatch::vllm(s.stack.tokenizer_parallel),
            },
            api_ns_per_output_token: s.stack.api_us_per_output_token * 1e3,
            api_servers: s.options.api_server_count,
            chat_template: !s.model.harmony_chat,
            eos: s.options.eos,
            jitter_sigma: s.stack.jitter_sigma,
            async_scheduling: s.options.async_scheduling,
            pipeline_batches: s.options.pp.max(1),
            spec: s
                .options
                .speculative
                .as_ref()
                .map(|sp| SpecDraws::from_rates(sp.num_speculative_tokens, &sp.acceptance)),
        }
    }
}

/// One token delivered at a step's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Emission {
    pub id: RequestId,
    pub tag: u64,
    /// Outputs produced so far, this one included (1 = the first token).
    pub index: u32,
    /// The token's id: a later prompt that repeats this output (a conversation's next turn)
    /// with these ids shares its prefix-cache blocks.
    pub token: u32,
    /// Set on the request's last token; the id is stale afterwards.
    pub finish: Option<FinishReason>,
    /// The token follows another of the same request in the same step (an accepted draft):
    /// vLLM streams them in one chunk.
    pub continues: bool,
}

/// What one step did.
#[derive(Debug)]
pub struct StepReport<'a> {
    pub start_ns: u64,
    pub end_ns: u64,
    pub batch: BatchStats,
    /// Requests pushed back to the queue to free KV blocks during this step's scheduling.
    pub preempted: u32,
    pub emissions: &'a [Emission],
    /// When each request that finished in this step passed the points of vLLM's phase metrics.
    pub finished: &'a [RequestTimes],
}

/// Counters for `/metrics`-style reporting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineCounters {
    pub steps: u64,
    pub preemptions: u64,
    /// Prompt tokens looked up in the prefix cache, and found.
    pub prefix_queries: u64,
    pub prefix_hits: u64,
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
    /// Time some step was running, ns (steps in flight at once counted once).
    pub busy_ns: u64,
    /// Speculative decoding: sequences' verifications with drafts, the draft tokens, those
    /// accepted, and those accepted at each position (vLLM's `spec_decode` counters).
    pub spec_drafts: u64,
    pub spec_draft_tokens: u64,
    pub spec_accepted: u64,
    pub spec_accepted_per_pos: [u64; crate::options::MAX_SPEC_TOKENS as usize],
    /// Requests' time waiting, in prefill and in decode, and the server's time to first token.
    pub phases: PhaseTotals,
}

/// One scheduled sequence of a batch, and the request it was scheduled for (a slot may be
/// reused, or its request preempted, before a batch in flight returns).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scheduled {
    slot: u32,
    new_tokens: u32,
    generation: u32,
    epoch: u32,
}

/// A batch on its way through the pipeline's stages.
#[derive(Debug)]
struct Flight {
    start_ns: u64,
    end_ns: u64,
    batch: BatchStats,
    preempted: u32,
    scheduled: Vec<Scheduled>,
}

/// The simulated engine.
///
/// A real-time driver loops: `step()` at the current clock, sleep until the step's `end_ns`,
/// deliver its emissions, repeat; when `step()` returns `None`, wait for a new request or for
/// `next_wakeup_ns()`, then `advance_to` the wall-clock time and step again.
///
/// ```
/// use servebench_sim::{Engine, NewRequest, Pooling, Presets, PromptTokens, SimSetup};
///
/// let presets = Presets::embedded()?;
/// let setup = SimSetup::resolve_with(&presets, "Qwen/Qwen3-0.6B", "h100-sxm", &[], None)?;
/// let mut engine = Engine::new(&setup, 42);
/// let prompt = PromptTokens::Synthetic { len: 100, shared_prefix: None };
/// let (ignore_eos, chat, pooling) = (true, false, Pooling::No);
/// engine.add(NewRequest { tag: 7, prompt, max_tokens: 3, ignore_eos, arrived_ns: 0, chat, pooling, images: Vec::new() })?;
/// let mut tokens = Vec::new();
/// while let Some(wake) = engine.next_wakeup_ns() {
///     engine.advance_to(wake);
///     if let Some(step) = engine.step() {
///         tokens.extend(step.emissions.iter().map(|e| (e.tag, e.index, step.end_ns)));
///     }
/// }
/// assert_eq!(tokens.len(), 3);
/// assert!(tokens[0].2 > (setup.stack.alpha_api_ms * 1e6) as u64, "the first token comes after the API delay");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Engine {
    cfg: EngineConfig,
    cost: Box<dyn StepCost>,
    jitter_rng: SimRng,
    eos_rng: SimRng,
    /// Draws of accepted draft tokens (its own stream: runs without speculative decoding are
    /// unchanged).
    spec_rng: SimRng,
    seed: u64,
    now_ns: u64,
    pool: BlockPool,
    reqs: Vec<Option<Req>>,
    free_slots: Vec<u32>,
    next_generation: u32,
    /// The API server processes' queues: when requests reach the scheduler.
    frontend: ApiServers,
    /// The last step's (start, end), ns.
    last_step: (u64, u64),
    pending: VecDeque<u32>,
    waiting: VecDeque<u32>,
    running: Vec<u32>,
    scheduled: Vec<Scheduled>,
    /// Batches launched and not yet reported, oldest first.
    in_flight: VecDeque<Flight>,
    /// When the pipeline's first stage can take the next batch, ns.
    stage_free_ns: u64,
    emissions: Vec<Emission>,
    /// The requests that finished in the last step, with their phase times.
    finished: Vec<RequestTimes>,
    counters: EngineCounters,
    /// Every launched step's terms, summed (each scaled by its jitter).
    spent: StepBreakdown,
}

impl Engine {
    /// An engine for a resolved setup, its steps priced by [`CostModel`].
    pub fn new(setup: &SimSetup, seed: u64) -> Self {
        Self::with_cost(EngineConfig::from_setup(setup), Box::new(CostModel::new(setup)), seed)
    }

    /// An engine with any step-time model.
    pub fn with_cost(cfg: EngineConfig, cost: Box<dyn StepCost>, seed: u64) -> Self {
        let pool = BlockPool::new(cfg.kv, cfg.enable_prefix_caching);
        let frontend = ApiServers::new(cfg.api_servers, cfg.tokenizer);
        Self {
            cfg,
            cost,
            jitter_rng: SimRng::new(seed),
            eos_rng: SimRng::new(seed ^ 0xE05),
            spec_rng: SimRng::new(seed ^ 0x5BEC),
            seed,
            now_ns: 0,
            pool,
            reqs: Vec::new(),
            free_slots: Vec::new(),
            next_generation: 0,
            frontend,
            last_step: (0, 0),
            pending: VecDeque::new(),
            waiting: VecDeque::new(),
            running: Vec::new(),
            scheduled: Vec::new(),
            in_flight: VecDeque::new(),
            stage_free_ns: 0,
            emissions: Vec::new(),
            finished: Vec::new(),
            counters: EngineCounters::default(),
            spent: StepBreakdown::default(),
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// The engine clock, ns.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Moves the clock forward (never back) while idle or between steps.
    pub fn advance_to(&mut self, t_ns: u64) {
        self.now_ns = self.now_ns.max(t_ns);
    }

    /// Whether a request of `prompt` tokens asking for `max_tokens` would be taken: its output
    /// budget as the engine keeps it, or why it is refused (an empty prompt, no output, or more
    /// than the context holds).
    pub fn admits(&self, prompt: u32, max_tokens: u64) -> Result<u32, Rejection> {
        if prompt == 0 {
            return Err(Rejection::EmptyPrompt);
        }
        let max_model_len = self.cfg.max_model_len;
        match u32::try_from(max_tokens) {
            Ok(0) => Err(Rejection::NoOutput),
            Ok(m) if u64::from(prompt) + u64::from(m) <= u64::from(max_model_len) => Ok(m),
            _ => Err(Rejection::TooLong { prompt, max_tokens, max_model_len }),
        }
    }

    /// Submits a request. It becomes visible to the scheduler `api_delay` after the frontend has
    /// taken it in: one at a time, or a burst of chat requests together once all are rendered
    /// (see `frontend`).
    pub fn add(&mut self, req: NewRequest) -> Result<RequestId, Rejection> {
        let len = req.prompt.len();
        let max_tokens = self.admits(len, req.max_tokens)?;
        let stop_at = if req.ignore_eos || self.cfg.eos == EosModel::None {
            max_tokens
        } else {
            self.eos_rng.range_inclusive(1, max_tokens)
        };
        self.next_generation = self.next_generation.wrapping_add(1);
        let generation = self.next_generation;
        let salt = mix64(self.seed ^ mix64(u64::from(generation)));
        // The frontend's loop and tokenizing thread: requests that arrive together wait for
        // each other, on the loop behind the tokens of the steps that ended before they arrived.
        self.hand_on_settled_by(req.arrived_ns);
        let tokenize = (self.cfg.api_ns_per_token * f64::from(len)).round() as u64;
        let rendered = req.chat && self.cfg.chat_template;
        // Visible once the frontend hands it on.
        let hash_blocks = self.cfg.enable_prefix_caching.then_some(self.cfg.kv.block_size);
        let state = Req::new(&req, max_tokens, generation, u64::MAX, stop_at, salt, hash_blocks);
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.reqs[s as usize] = Some(state);
                s
            }
            None => {
                self.reqs.push(Some(state));
                (self.reqs.len() - 1) as u32
            }
        };
        let further = req.pooling == Pooling::FurtherInput;
        let own = if further { self.cfg.api_ns_per_input } else { self.cfg.api_ns_per_request };
        if rendered {
            self.frontend.render(slot, req.arrived_ns, own, tokenize);
        } else {
            // gpt-oss's chat prompt is rendered to token ids on the loop; text goes to the
            // tokenizing thread.
            let (work, tokenize) = if req.chat { (own + tokenize, 0) } else { (own, tokenize) };
            if let Some(at) = self.frontend.take_in(slot, req.arrived_ns, work, tokenize) {
                self.hand_on(slot, at);
            }
        }
        Ok(RequestId { slot, generation })
    }

    /// Takes the requests the frontend has settled by `t_ns` (rendered, tokenized) among the
    /// pending ones.
    fn hand_on_settled_by(&mut self, t_ns: u64) {
        for (slot, at) in self.frontend.close_by(t_ns) {
            self.hand_on(slot, at);
        }
    }

    /// A request the frontend hands on at `at`: pending, visible `api_delay` later. Its images
    /// are decoded and processed on the loop first, after its prompt is tokenized (vLLM runs
    /// the processor in `add_request`, after the chat template and the tokenizer).
    fn hand_on(&mut self, slot: u32, at: u64) {
        let pixels: u64 = self.req(slot).images.iter().map(|i| i.work.pixels).sum();
        let at = match pixels {
            0 => at,
            _ => {
                let work = (pixels as f64 * crate::media::PREPROCESS_NS_PER_PIXEL) as u64;
                self.frontend.process_inputs(slot, at, work)
            }
        };
        self.req_mut(slot).ready_ns = at.saturating_add(self.cfg.api_delay_ns);
        self.queue_pending(slot);
    }

    /// Puts a received request among those not yet visible, ordered by when they become so
    /// (arrivals usually come in order).
    fn queue_pending(&mut self, slot: u32) {
        let ready = self.req(slot).ready_ns;
        let pos = self.pending.iter().rposition(|&s| self.req(s).ready_ns <= ready).map_or(0, |p| p + 1);
        self.pending.insert(pos, slot);
    }

    /// Drops a request wherever it is, freeing its KV blocks. False if it already ended.
    pub fn cancel(&mut self, id: RequestId) -> bool {
        let Some(r) = self.reqs.get(id.slot as usize).and_then(Option::as_ref) else {
            return false;
        };
        if r.generation != id.generation {
            return false;
        }
        match r.phase {
            Phase::Pending => {
                if !self.frontend.forget(id.slot) {
                    self.pending.retain(|&s| s != id.slot);
                }
            }
            Phase::Waiting => self.waiting.retain(|&s| s != id.slot),
            Phase::Running => self.running.retain(|&s| s != id.slot),
        }
        self.free_request(id.slot);
        true
    }

    /// When the engine next has something to do: now when a step can run, else when the
    /// earliest received request becomes visible; `None` when it holds no request at all.
    pub fn next_wakeup_ns(&self) -> Option<u64> {
        if !self.running.is_empty() || !self.waiting.is_empty() || !self.in_flight.is_empty() {
            return Some(self.now_ns);
        }
        let pending = self.pending.front().map(|&s| self.req(s).ready_ns);
        let rendered = self.frontend.next_hand_off().map(|t| t.saturating_add(self.cfg.api_delay_ns));
        pending.into_iter().chain(rendered).min().map(|t| t.max(self.now_ns))
    }

    /// When the tokens of the step that last ended reach the client: vLLM's API server writes
    /// every streamed token after its work queued before them (requests that arrived before the
    /// step ended, earlier steps' tokens), so at loads where that work outlasts the steps the
    /// tokens leave later than the step ends; never before it. Call it once every request that
    /// arrived by the step's end is submitted.
    pub fn delivered_ns(&mut self) -> u64 {
        self.frontend.streamed_at()
    }

    /// Whether the engine holds no request.
    pub fn is_idle(&self) -> bool {
        self.running.is_empty()
            && self.waiting.is_empty()
            && self.pending.is_empty()
            && self.in_flight.is_empty()
            && self.frontend.holding() == 0
    }

    /// Empties the prefix cache, as vLLM's `/reset_prefix_cache` does between benchmark runs:
    /// false (nothing done) while a request is held anywhere in the engine.
    pub fn reset_prefix_cache(&mut self) -> bool {
        self.is_idle() && self.pool.reset_cache()
    }

    /// Runs one step at the current time. `None` when nothing can be scheduled now.
    pub fn step(&mut self) -> Option<StepReport<'_>> {
        self.hand_on_settled_by(self.now_ns);
        self.admit_visible(self.planned_at());
        if self.running.is_empty() && self.waiting.is_empty() {
            // Nothing was planned for this step: the engine idled and schedules as requests come.
            self.admit_visible(self.now_ns);
        }
        self.frontend.catch_up(u64::MAX);
        self.emissions.clear();
        self.finished.clear();
        while self.in_flight.len() < self.cfg.pipeline_batches.max(1) as usize && self.launch() {}
        let flight = self.in_flight.pop_front()?;
        // Flights end in order: the busy time is the union of their spans.
        self.counters.busy_ns += flight.end_ns - flight.start_ns.max(self.last_step.1).min(flight.end_ns);
        self.now_ns = flight.end_ns;
        self.last_step = (flight.start_ns, flight.end_ns);
        self.scheduled = flight.scheduled;
        self.finish_step();
        self.frontend.stream(self.now_ns, self.cfg.api_ns_per_output_token, &self.emissions);
        Some(StepReport {
            start_ns: flight.start_ns,
            end_ns: flight.end_ns,
            batch: flight.batch,
            preempted: flight.preempted,
            emissions: &self.emissions,
            finished: &self.finished,
        })
    }

    /// Schedules a batch and puts it in flight; false when nothing can be scheduled. The batch
    /// enters the first stage when that is free, holds each stage for its share of the step's
    /// time, and leaves the last one no sooner than that share after the batch ahead of it.
    /// Without stages it simply runs from now for the step's time.
    fn launch(&mut self) -> bool {
        self.scheduled.clear();
        let (batch, preempted) = self.schedule();
        if self.scheduled.is_empty() {
            return false;
        }
        let parts = self.cost.breakdown(&batch);
        let jitter = self.jitter_rng.lognormal_factor(self.cfg.jitter_sigma);
        self.spent.add_scaled(&parts, jitter);
        let seconds = parts.total * jitter;
        let step_ns = ((seconds * 1e9).round() as u64).max(1);
        let stage_ns = (step_ns / u64::from(self.cfg.pipeline_batches.max(1))).max(1);
        let start_ns = self.now_ns.max(self.stage_free_ns);
        // The clock saturates rather than wraps: a run whose steps pass u64 nanoseconds ends
        // with its requests past the times they can keep, and fails them so.
        let behind = self.in_flight.back().map_or(0, |f| f.end_ns.saturating_add(stage_ns));
        let end_ns = start_ns.saturating_add(step_ns).max(behind);
        self.stage_free_ns = start_ns.saturating_add(stage_ns);
        self.counters.steps += 1;
        let scheduled = std::mem::take(&mut self.scheduled);
        self.in_flight.push_back(Flight { start_ns, end_ns, batch, preempted, scheduled });
        true
    }

    /// When the step starting now was scheduled: with async scheduling vLLM plans each step
    /// while the one before it runs (its engine loop schedules step N+1, launches it, then waits
    /// for step N's output), so a step that follows another back to back was planned when that
    /// one began; otherwise now.
    fn planned_at(&self) -> u64 {
        let (start, end) = self.last_step;
        if self.cfg.async_scheduling && end == self.now_ns { start } else { self.now_ns }
    }

    /// Moves the requests visible by `t_ns` to the waiting queue, in arrival order.
    fn admit_visible(&mut self, t_ns: u64) {
        while let Some(&slot) = self.pending.front() {
            if self.req(slot).ready_ns > t_ns {
                break;
            }
            self.pending.pop_front();
            self.req_mut(slot).phase = Phase::Waiting;
            self.waiting.push_back(slot);
        }
    }

    /// Requests running now.
    pub fn num_running(&self) -> usize {
        self.running.len()
    }

    /// Requests received but not running (queued, or not yet visible).
    pub fn num_waiting(&self) -> usize {
        self.waiting.len() + self.pending.len() + self.frontend.holding()
    }

    /// Fraction of KV memory held by requests (vLLM's `kv_cache_usage_perc`).
    pub fn kv_usage(&self) -> f64 {
        let total = self.pool.layout().total_units;
        if total == 0 {
            return 0.0;
        }
        self.pool.used_units() as f64 / total as f64
    }

    pub fn counters(&self) -> EngineCounters {
        self.counters
    }

    /// Every step's time so far, term by term (the terms of [`StepCost::breakdown`]).
    pub fn time_spent(&self) -> StepBreakdown {
        self.spent
    }

    /// The API server's event loop's work so far, ns: taking requests in, rendering chat
    /// templates and writing streamed tokens (with several processes, the mean over them).
    pub fn frontend_work_ns(&self) -> u64 {
        self.frontend.work_ns()
    }

    /// Time the API server's tokenizing thread has spent in tokenizer calls so far, ns (the
    /// mean over the processes).
    pub fn tokenizer_work_ns(&self) -> u64 {
        self.frontend.tokenizer_busy_ns()
    }

    /// Prompt tokens of `id` served from the prefix cache when it was first admitted.
    pub fn cached_tokens(&self, id: RequestId) -> Option<u32> {
        self.live(id).map(|r| r.cached_tokens)
    }

    /// Times `id` was preempted so far.
    pub fn preemptions_of(&self, id: RequestId) -> Option<u32> {
        self.live(id).map(|r| r.preemptions)
    }

    fn live(&self, id: RequestId) -> Option<&Req> {
        self.reqs.get(id.slot as usize).and_then(Option::as_ref).filter(|r| r.generation == id.generation)
    }

    fn req(&self, slot: u32) -> &Req {
        self.reqs[slot as usize].as_ref().expect("live request slot")
    }

    fn req_mut(&mut self, slot: u32) -> &mut Req {
        self.reqs[slot as usize].as_mut().expect("live request slot")
    }

    /// Releases a request's blocks and its slot.
    fn free_request(&mut self, slot: u32) {
        self.release_blocks(slot);
        self.reqs[slot as usize] = None;
        self.free_slots.push(slot);
    }
}
