//! The pacer: the one thread that owns the [`Engine`] and plays it in real time.
//!
//! Virtual time is real time since `t0`: engine nanosecond `t` is the instant `t0 + t`. HTTP
//! handlers send arrivals, cancellations and metric queries over one channel, stamped with the
//! instant the request reached the server. The loop:
//!
//! 1. computes the next deadline: the end of the step in flight, or when the engine can next
//!    run (a received request becoming visible after the API delay);
//! 2. waits for a message or the deadline, whichever comes first, handling messages as they
//!    come (an arrival is added to the engine at once, with its stamp, so it joins the first
//!    step that starts after it became visible, exactly as in `predict`);
//! 3. at the deadline, sends every emission of the step to its stream at once (the tokens of
//!    one engine step go out together), then computes the next step, which starts where the
//!    last one ended in virtual time, so waking late never stretches the simulated steps.
//!
//! It runs on its own OS thread rather than as a runtime task: a blocking wait with a timeout
//! wakes within tens of microseconds of the deadline, where the runtime's timer rounds up to
//! the next millisecond and waits for a busy worker, and no HTTP work delays a step. Should the
//! pacer fall more than [`MAX_LAG`] behind real time (an overloaded machine), the engine clock
//! is moved up to real time, and `/metrics` counts it.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::metrics::{Observed, Snapshot};
use crate::engine::{Emission, Engine, FinishReason, NewRequest, PromptTokens, RequestId};

/// How far behind real time the engine clock may fall before it is moved up.
pub(crate) const MAX_LAG: Duration = Duration::from_millis(20);

/// A message to the pacer.
pub(crate) enum ToPacer {
    Arrive(Arrival),
    /// The client of this tag went away (or was served by other means): drop its request.
    Cancel(u64),
    Snapshot(oneshot::Sender<Snapshot>),
    /// Abort every request and stop.
    Shutdown,
}

/// A request for the engine.
pub(crate) struct Arrival {
    pub tag: u64,
    pub prompt: Vec<u32>,
    pub max_tokens: u32,
    pub ignore_eos: bool,
    /// When the request reached the server.
    pub received: Instant,
    pub events: mpsc::UnboundedSender<Event>,
}

/// What a stream hears from the pacer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// Output token `index` (1-based) is out; `finish` is set on the last one.
    Token { index: u32, finish: Option<FinishReason> },
    /// The request ended without finishing (refused by the engine, or the server stopped).
    Failed(String),
}

/// A request the engine holds.
struct Live {
    id: RequestId,
    events: mpsc::UnboundedSender<Event>,
    arrived_ns: u64,
    last_ns: u64,
}

pub(crate) struct Pacer {
    engine: Engine,
    t0: Instant,
    live: HashMap<u64, Live>,
    /// The emissions of the step in flight and its end, virtual ns.
    step: Vec<Emission>,
    step_end: Option<u64>,
    /// The engine holds work it cannot schedule; wait for a message before trying again.
    stalled: bool,
    observed: Observed,
}

impl Pacer {
    pub fn new(engine: Engine, t0: Instant) -> Self {
        Self {
            engine,
            t0,
            live: HashMap::new(),
            step: Vec::new(),
            step_end: None,
            stalled: false,
            observed: Observed::default(),
        }
    }

    /// Runs until told to shut down or every sender is gone.
    pub fn run(mut self, rx: Receiver<ToPacer>) {
        loop {
            let waited = match self.deadline() {
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(at) => match at.checked_duration_since(Instant::now()) {
                    Some(wait) if !wait.is_zero() => rx.recv_timeout(wait),
                    _ => Err(RecvTimeoutError::Timeout),
                },
            };
            match waited {
                Ok(msg) => {
                    if !self.handle(msg) {
                        return self.abort_all("the simulated server is shutting down");
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return self.abort_all("the simulated server stopped"),
                Err(RecvTimeoutError::Timeout) => {}
            }
            // Whatever came while the deadline passed goes in first.
            while let Ok(msg) = rx.try_recv() {
                if !self.handle(msg) {
                    return self.abort_all("the simulated server is shutting down");
                }
            }
            self.tick();
        }
    }

    fn now_ns(&self) -> u64 {
        self.ns_at(Instant::now())
    }

    fn ns_at(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.t0).as_nanos()).unwrap_or(u64::MAX)
    }

    fn instant_at(&self, ns: u64) -> Instant {
        self.t0 + Duration::from_nanos(ns)
    }

    /// When the loop must act next: the end of the step in flight, or when the engine can run.
    fn deadline(&self) -> Option<Instant> {
        if let Some(end) = self.step_end {
            return Some(self.instant_at(end));
        }
        if self.stalled {
            return None;
        }
        self.engine.next_wakeup_ns().map(|ns| self.instant_at(ns))
    }

    /// Handles one message; false on shutdown.
    fn handle(&mut self, msg: ToPacer) -> bool {
        match msg {
            ToPacer::Arrive(a) => self.arrive(a),
            ToPacer::Cancel(tag) => {
                if let Some(live) = self.live.remove(&tag) {
                    self.engine.cancel(live.id);
                    self.observed.finished(None);
                }
            }
            ToPacer::Snapshot(reply) => {
                let _ = reply.send(Snapshot {
                    running: self.engine.num_running(),
                    waiting: self.engine.num_waiting(),
                    kv_usage: self.engine.kv_usage(),
                    counters: self.engine.counters(),
                    observed: self.observed.clone(),
                });
            }
            ToPacer::Shutdown => return false,
        }
        self.stalled = false;
        true
    }

    fn arrive(&mut self, a: Arrival) {
        let arrived_ns = self.ns_at(a.received);
        let req = NewRequest {
            tag: a.tag,
            prompt: PromptTokens::Ids(a.prompt),
            max_tokens: a.max_tokens,
            ignore_eos: a.ignore_eos,
            arrived_ns,
        };
        match self.engine.add(req) {
            Ok(id) => {
                self.live.insert(a.tag, Live { id, events: a.events, arrived_ns, last_ns: arrived_ns });
            }
            Err(rejection) => {
                let _ = a.events.send(Event::Failed(rejection.to_string()));
            }
        }
    }

    /// At a deadline: deliver the step in flight, then start the next one if the engine can.
    fn tick(&mut self) {
        if let Some(end) = self.step_end.take() {
            self.deliver(end);
        }
        let Some(wake) = self.engine.next_wakeup_ns() else { return };
        let now = self.now_ns();
        if wake > now {
            return;
        }
        self.engine.advance_to(wake);
        if now.saturating_sub(self.engine.now_ns()) > MAX_LAG.as_nanos() as u64 {
            self.engine.advance_to(now);
            self.observed.resyncs += 1;
        }
        match self.engine.step() {
            Some(report) => {
                self.step.clear();
                self.step.extend_from_slice(report.emissions);
                self.step_end = Some(report.end_ns);
            }
            None => self.stalled = true,
        }
    }

    /// Sends every emission of the step that ended at `end` to its stream.
    fn deliver(&mut self, end: u64) {
        let secs = |ns: u64| ns as f64 * 1e-9;
        for e in &self.step {
            let Some(live) = self.live.get_mut(&e.tag) else { continue };
            if e.index == 1 {
                self.observed.ttft.observe(secs(end - live.arrived_ns));
            } else {
                self.observed.itl.observe(secs(end - live.last_ns));
            }
            live.last_ns = end;
            let sent = live.events.send(Event::Token { index: e.index, finish: e.finish }).is_ok();
            if e.finish.is_some() {
                let live = self.live.remove(&e.tag).expect("looked up above");
                self.observed.e2e.observe(secs(end - live.arrived_ns));
                self.observed.finished(e.finish);
            } else if !sent {
                // The stream is gone; its cancel message may still be on the way.
                let live = self.live.remove(&e.tag).expect("looked up above");
                self.engine.cancel(live.id);
                self.observed.finished(None);
            }
        }
        self.step.clear();
    }

    fn abort_all(mut self, why: &str) {
        for (_, live) in self.live.drain() {
            let _ = live.events.send(Event::Failed(why.to_string()));
        }
    }
}
