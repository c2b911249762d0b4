//! What the simulated engine would say about itself during a prediction: its `/metrics` signals
//! sampled in virtual time, as `--server-metrics` scrapes a real server's, and where its time
//! went (how busy the engine and the API server were, and the cost model's terms over the run).
//!
//! A prediction with `--server-metrics` gets the same telemetry section a measured run gets, so
//! a planner sees whether the GPU, the API server or the client's arrivals bound the run.

use servebench_core::telemetry::{Reading, ServerTelemetry, Signal, Source};

use crate::engine::Engine;

/// Where a sampled prediction's telemetry says it came from.
const SOURCE: &str = "simulated engine (virtual time)";

/// Samples the engine every `interval` of virtual time from the timed run's start.
pub(crate) struct Sampler {
    t0_ns: u64,
    interval_ns: u64,
    next_ns: u64,
    /// The engine's busy time at the previous sample, ns.
    last_busy_ns: u64,
    /// The engine's totals as the run started (the warm-up's, left out of the note).
    start: Totals,
    source: Source,
}

impl Sampler {
    /// A sampler from `t0_ns` on, every `interval_s` (at least a millisecond).
    pub fn new(engine: &Engine, t0_ns: u64, interval_s: f64) -> Sampler {
        let interval_ns =
            if interval_s.is_finite() { (interval_s * 1e9).round().max(1e6) as u64 } else { 1_000_000_000 };
        let mut source = Source::new(SOURCE);
        source.engine = Some("vllm".to_string());
        let mut sampler = Sampler {
            t0_ns,
            interval_ns,
            next_ns: t0_ns.saturating_add(interval_ns),
            last_busy_ns: engine.counters().busy_ns,
            start: Totals::of(engine),
            source,
        };
        // A scrape as the run starts, as the scraper takes one: counters' increases over the
        // run leave out the warm-up.
        sampler.record(engine, t0_ns, 0);
        sampler
    }

    /// Records a sample for every sampling time the engine's clock has passed, with the
    /// engine's state now (a step's state stands for the samples that fall in it).
    pub fn observe(&mut self, engine: &Engine) {
        while engine.now_ns() >= self.next_ns {
            let at = self.next_ns;
            self.record(engine, at, self.interval_ns);
            self.next_ns = self.next_ns.saturating_add(self.interval_ns);
        }
    }

    /// The run's telemetry, with a last sample at `end_ns` if the run ended between samples,
    /// and the note of where its time went ([`time_note`]).
    pub fn finish(mut self, engine: &Engine, end_ns: u64) -> (ServerTelemetry, Option<String>) {
        let since = self.next_ns - self.interval_ns;
        if end_ns > since {
            self.record(engine, end_ns, end_ns - since);
        }
        let note = time_note(engine, &self.start, self.t0_ns, end_ns);
        (ServerTelemetry { interval_s: self.interval_ns as f64 * 1e-9, sources: vec![self.source] }, note)
    }

    fn record(&mut self, engine: &Engine, at_ns: u64, window_ns: u64) {
        let c = engine.counters();
        // A step that straddles a sample counts whole in the window it ends in: capped.
        let busy = (window_ns > 0).then(|| ((c.busy_ns - self.last_busy_ns) as f64 / window_ns as f64).min(1.0));
        self.last_busy_ns = c.busy_ns;
        let mut values = vec![
            (Signal::Running, engine.num_running() as f64),
            (Signal::Waiting, engine.num_waiting() as f64),
            (Signal::KvCacheUsage, engine.kv_usage()),
            (Signal::Preemptions, c.preemptions as f64),
            (Signal::PromptTokens, c.prompt_tokens as f64),
            (Signal::GenerationTokens, c.generation_tokens as f64),
        ];
        let (p, secs) = (c.phases, |ns: u64| ns as f64 * 1e-9);
        values.extend([
            (Signal::QueueTimeSum, secs(p.queue_ns)),
            (Signal::QueueTimeCount, p.finished as f64),
            (Signal::PrefillTimeSum, secs(p.prefill_ns)),
            (Signal::PrefillTimeCount, p.finished as f64),
            (Signal::TtftSum, secs(p.ttft_ns)),
            (Signal::TtftCount, p.first_tokens as f64),
        ]);
        values.extend(busy.map(|b| (Signal::GpuUtil, 100.0 * b)));
        if engine.config().enable_prefix_caching {
            values
                .extend([(Signal::PrefixHits, c.prefix_hits as f64), (Signal::PrefixQueries, c.prefix_queries as f64)]);
        }
        let reading = Reading { engine: Some("vllm"), values, bad_lines: 0 };
        self.source.record(at_ns.saturating_sub(self.t0_ns) as f64 * 1e-9, &reading);
    }
}

/// Where the time of a run from `t0_ns` to `end_ns` went, in one line: how busy the engine
/// and the API server were, and the cost model's terms as shares of the engine's step time
/// (those of at least half a percent). `before` holds the engine's totals at the run's start,
/// so the warm-up is left out.
fn time_note(engine: &Engine, before: &Totals, t0_ns: u64, end_ns: u64) -> Option<String> {
    let span = end_ns.checked_sub(t0_ns).filter(|&s| s > 0)? as f64;
    let now = Totals::of(engine);
    let steps = now.steps - before.steps;
    if steps == 0 {
        return None;
    }
    let mut spent = now.spent;
    spent.add_scaled(&before.spent, -1.0);
    let busy = (now.busy_ns - before.busy_ns) as f64 / span;
    let frontend = (now.frontend_ns - before.frontend_ns) as f64 / span;
    let tokenizer = (now.tokenizer_ns - before.tokenizer_ns) as f64 / span;
    let terms: Vec<String> = spent
        .shares()
        .into_iter()
        .filter(|&(_, v)| spent.total > 0.0 && v / spent.total >= 0.005)
        .map(|(name, v)| format!("{name} {:.0} %", 100.0 * v / spent.total))
        .collect();
    Some(format!(
        "where the time went: engine busy {:.0} % of the run ({steps} steps of {:.2} ms on average), \
         API server busy {:.0} % (its tokenizing thread {:.0} %); step time: {}",
        100.0 * busy.min(1.0),
        spent.total * 1e3 / steps as f64,
        100.0 * frontend,
        100.0 * tokenizer,
        terms.join(", ")
    ))
}

/// The engine's running totals at one moment.
#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    steps: u64,
    busy_ns: u64,
    frontend_ns: u64,
    tokenizer_ns: u64,
    spent: crate::cost::StepBreakdown,
}

impl Totals {
    fn of(engine: &Engine) -> Totals {
        let c = engine.counters();
        Totals {
            steps: c.steps,
            busy_ns: c.busy_ns,
            frontend_ns: engine.frontend_work_ns(),
            tokenizer_ns: engine.tokenizer_work_ns(),
            spent: engine.time_spent(),
        }
    }
}
