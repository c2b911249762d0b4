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
//!    one engine step go out together, when the simulated API server has written them: at the
//!    step's end unless its work queued before them outlasts the step, see
//!    [`Engine::delivered_ns`]), then computes the next step, which starts where the last one
//!    ended in virtual time, so waking late never stretches the simulated steps.
//!
//! A client sends a burst (the first requests of a run, or a wave of requests after a wave of
//! answers at a concurrency cap) at one instant, but the requests reach the server spread over
//! a few hundred microseconds, over a millisecond on a busy machine. Stamped one by one, the
//! first of them would become visible alone and get a step to itself, and the rest would wait
//! a step more, and the waves after it would stay split; `predict`, whose arrivals are exact,
//! schedules them together. So arrivals are grouped: a request received within
//! [`ARRIVAL_GROUPING`] of the first request of its group takes that request's arrival time.
//! Under steady traffic this times a request from up to 2 ms (on average under 1 ms) before
//! it arrived, about what the HTTP round trip adds to its TTFT the other way.
//!
//! It runs on its own OS thread rather than as a runtime task: a blocking wait with a timeout
//! wakes within tens of microseconds of the deadline, where the runtime's timer rounds up to
//! the next millisecond and waits for a busy worker, and no HTTP work delays a step. Should the
//! pacer fall more than [`MAX_LAG`] behind real time (an overloaded machine), the engine clock
//! is moved up to real time, and `/metrics` counts it.

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::metrics::{Observed, Snapshot};
use crate::engine::{Emission, EncoderInput, Engine, FinishReason, NewRequest, Pooling, PromptTokens, RequestId};

/// How far behind real time the engine clock may fall before it is moved up.
pub(crate) const MAX_LAG: Duration = Duration::from_millis(20);

/// Requests received this soon after the first of their group count as arriving with it.
pub(crate) const ARRIVAL_GROUPING: Duration = Duration::from_millis(2);

/// The window of `/metrics`' engine busy share: the last second, as a GPU exporter averages.
const BUSY_WINDOW_NS: u64 = 1_000_000_000;

/// A message to the pacer.
pub(crate) enum ToPacer {
    Arrive(Arrival),
    /// The client of this tag went away (or was served by other means): drop its request.
    Cancel(u64),
    Snapshot(oneshot::Sender<Snapshot>),
    /// Empty the prefix cache; the answer says whether it was (not while requests are held).
    ResetPrefixCache(oneshot::Sender<bool>),
    /// Abort every request and stop.
    Shutdown,
}

/// A request for the engine.
pub(crate) struct Arrival {
    pub tag: u64,
    pub prompt: Vec<u32>,
    /// Its images, where their tokens start in `prompt`.
    pub images: Vec<EncoderInput>,
    pub max_tokens: u32,
    pub ignore_eos: bool,
    /// It came through the chat endpoint.
    pub chat: bool,
    /// A pooling request's input, or a generation request.
    pub pooling: Pooling,
    /// When the request reached the server.
    pub received: Instant,
    pub events: mpsc::UnboundedSender<Event>,
}

/// What a stream hears from the pacer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// Output tokens `first..=index` (1-based) are out, in one chunk (more than one where
    /// speculative decoding accepted drafts); `finish` is set on the last one.
    Token { first: u32, index: u32, finish: Option<FinishReason> },
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
    /// Tokens of steps that ended but that the simulated API server has not written yet:
    /// (when it has, virtual ns; the step's emissions).
    outbox: VecDeque<(u64, Vec<Emission>)>,
    /// The engine holds work it cannot schedule; wait for a message before trying again.
    stalled: bool,
    /// Arrival time of the first request of the current arrival group, virtual ns.
    group_start: Option<u64>,
    observed: Observed,
    /// The spans of the steps of about the last second, virtual ns, for `/metrics`' busy share.
    recent_steps: VecDeque<(u64, u64)>,
}

impl Pacer {
    pub fn new(engine: Engine, t0: Instant) -> Self {
        Self {
            engine,
            t0,
            live: HashMap::new(),
            step: Vec::new(),
            step_end: None,
            outbox: VecDeque::new(),
            stalled: false,
            group_start: None,
            observed: Observed::default(),
            recent_steps: VecDeque::new(),
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

    /// The share of the last second of virtual time (of the run so far, before a second has
    /// passed) that a step was running, percent; forgets older steps.
    fn busy_percent(&mut self, now: u64) -> f64 {
        let since = now.saturating_sub(BUSY_WINDOW_NS);
        self.forget_steps_before(since);
        let busy: u64 =
            self.recent_steps.iter().map(|&(start, end)| end.min(now).saturating_sub(start.max(since))).sum();
        let window = (now - since).max(1);
        (100.0 * busy as f64 / window as f64).min(100.0)
    }

    /// Drops the steps that ended by `since`, ns.
    fn forget_steps_before(&mut self, since: u64) {
        while self.recent_steps.front().is_some_and(|&(_, end)| end <= since) {
            self.recent_steps.pop_front();
        }
    }

    fn instant_at(&self, ns: u64) -> Instant {
        self.t0 + Duration::from_nanos(ns)
    }

    /// When the loop must act next: the end of the step in flight, or when the engine can run,
    /// or when tokens waiting for the API server are written, whichever comes first.
    fn deadline(&self) -> Option<Instant> {
        let next = match self.step_end {
            Some(end) => Some(end),
            None if self.stalled => None,
            None => self.engine.next_wakeup_ns(),
        };
        let written = self.outbox.front().map(|&(at, _)| at);
        next.into_iter().chain(written).min().map(|ns| self.instant_at(ns))
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
                let busy_percent = self.busy_percent(self.ns_at(Instant::now()));
                let _ = reply.send(Snapshot {
                    running: self.engine.num_running(),
                    waiting: self.engine.num_waiting(),
                    kv_usage: self.engine.kv_usage(),
                    busy_percent,
                    counters: self.engine.counters(),
                    observed: self.observed.clone(),
                    spec_decode: self.engine.spec_decode_counts(),
                });
            }
            ToPacer::ResetPrefixCache(reply) => {
                let _ = reply.send(self.engine.reset_prefix_cache());
            }
            ToPacer::Shutdown => return false,
        }
        self.stalled = false;
        true
    }

    fn arrive(&mut self, a: Arrival) {
        let arrived_ns = self.group_arrival(self.ns_at(a.received));
        let req = NewRequest {
            tag: a.tag,
            prompt: PromptTokens::Ids(a.prompt),
            max_tokens: u64::from(a.max_tokens),
            ignore_eos: a.ignore_eos,
            arrived_ns,
            chat: a.chat,
            pooling: a.pooling,
            images: a.images,
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

    /// The arrival time a request received at `received_ns` counts with (see the module docs).
    fn group_arrival(&mut self, received_ns: u64) -> u64 {
        match self.group_start {
            Some(start) if received_ns < start => received_ns,
            Some(start) if received_ns - start <= ARRIVAL_GROUPING.as_nanos() as u64 => start,
            _ => {
                self.group_start = Some(received_ns);
                received_ns
            }
        }
    }

    /// At a deadline: deliver the step in flight and the tokens written since, then start the
    /// next step if none is in flight and the engine can.
    fn tick(&mut self) {
        let now = self.now_ns();
        if self.step_end.is_some_and(|end| end <= now) {
            self.step_end = None;
            let at = self.engine.delivered_ns();
            let step = std::mem::take(&mut self.step);
            if at <= now && self.outbox.is_empty() {
                self.deliver(at, &step);
                self.step = step;
                self.step.clear();
            } else {
                self.outbox.push_back((at, step));
            }
        }
        while let Some(&(at, _)) = self.outbox.front() {
            if at > now {
                break;
            }
            let (_, step) = self.outbox.pop_front().expect("looked at above");
            self.deliver(at, &step);
        }
        if self.step_end.is_some() {
            return;
        }
        let Some(wake) = self.engine.next_wakeup_ns() else { return };
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
                for t in report.finished {
                    self.observed.phases(t);
                }
                self.step_end = Some(report.end_ns);
                // Only the last second's steps are kept, scraped or not.
                let (start, end) = (report.start_ns, report.end_ns);
                self.forget_steps_before(start.saturating_sub(BUSY_WINDOW_NS));
                self.recent_steps.push_back((start, end));
            }
            // Nothing to run now: stalled until a message comes, unless the engine has a later
            // wake-up of its own (a request handed on once its images are processed).
            None => self.stalled = self.engine.next_wakeup_ns().is_none_or(|w| w <= self.engine.now_ns()),
        }
    }

    /// Sends every emission of a step to its stream, as written at `end`.
    fn deliver(&mut self, end: u64, step: &[Emission]) {
        let secs = |ns: u64| ns as f64 * 1e-9;
        let mut first = 0;
        for (k, e) in step.iter().enumerate() {
            if !e.continues {
                first = e.index;
            }
            // Accepted draft tokens go out in the chunk of the token before them.
            if step.get(k + 1).is_some_and(|next| next.continues) {
                continue;
            }
            let Some(live) = self.live.get_mut(&e.tag) else { continue };
            if first == 1 {
                self.observed.ttft.observe(secs(end - live.arrived_ns));
            } else {
                self.observed.itl.observe(secs(end - live.last_ns));
            }
            live.last_ns = end;
            let sent = live.events.send(Event::Token { first, index: e.index, finish: e.finish }).is_ok();
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
    }

    fn abort_all(mut self, why: &str) {
        for (_, live) in self.live.drain() {
            let _ = live.events.send(Event::Failed(why.to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::Presets;
    use crate::setup::SimSetup;

    fn pacer() -> Pacer {
        let s =
            SimSetup::resolve_with(&Presets::embedded().unwrap(), "Qwen/Qwen3-0.6B", "h100-sxm", &[], None).unwrap();
        Pacer::new(Engine::new(&s, 1), Instant::now())
    }

    #[test]
    fn arrivals_within_the_window_of_the_first_of_a_group_share_its_time() {
        let mut p = pacer();
        let ms = |x: f64| (x * 1e6) as u64;
        assert_eq!(p.group_arrival(ms(10.0)), ms(10.0));
        assert_eq!(p.group_arrival(ms(10.5)), ms(10.0));
        assert_eq!(p.group_arrival(ms(12.0)), ms(10.0));
        // A stamp older than the group's first keeps its own time.
        assert_eq!(p.group_arrival(ms(9.0)), ms(9.0));
        // Past the window a new group starts (chains do not extend a group).
        assert_eq!(p.group_arrival(ms(12.1)), ms(12.1));
        assert_eq!(p.group_arrival(ms(14.0)), ms(12.1));
        assert_eq!(p.group_arrival(ms(14.2)), ms(14.2));
    }

    #[test]
    fn the_busy_share_is_of_the_last_second_and_forgets_older_steps() {
        let mut p = pacer();
        let ms = |x: f64| (x * 1e6) as u64;
        // Before a second has passed, the share is of the time so far.
        p.recent_steps.extend([(ms(0.0), ms(100.0)), (ms(200.0), ms(300.0))]);
        assert!((p.busy_percent(ms(400.0)) - 50.0).abs() < 1e-9);
        // A step that straddles the window's start counts its part inside.
        p.recent_steps.push_back((ms(900.0), ms(1_500.0)));
        assert!((p.busy_percent(ms(1_500.0)) - 60.0).abs() < 1e-9, "{}", p.busy_percent(ms(1_500.0)));
        assert_eq!(p.recent_steps.len(), 1, "steps that ended before the window are forgotten");
        // A step still running counts up to now; idle, the share falls to nothing.
        assert!((p.busy_percent(ms(1_200.0)) - 30.0).abs() < 1e-9);
        assert_eq!(p.busy_percent(ms(3_000.0)), 0.0);
        assert!(p.recent_steps.is_empty());
    }

    #[test]
    fn a_burst_spread_over_a_millisecond_and_a_half_is_scheduled_in_one_step() {
        let t0 = Instant::now();
        // No frontend work, so the arrivals reach the scheduler as they came.
        let free_frontend: [(String, String); 3] =
            [("api-ms-per-request", "0"), ("api-us-per-token", "0"), ("api-us-per-output-token", "0")]
                .map(|(k, v)| (k.into(), v.into()));
        let s =
            SimSetup::resolve_with(&Presets::embedded().unwrap(), "Qwen/Qwen3-0.6B", "h100-sxm", &free_frontend, None)
                .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || Pacer::new(Engine::new(&s, 1), t0).run(rx));
        let mut streams = Vec::new();
        for (tag, offset_us) in [0u64, 400, 900, 1500].into_iter().enumerate() {
            let (events, stream) = mpsc::unbounded_channel();
            let received = t0 + Duration::from_millis(5) + Duration::from_micros(offset_us);
            let arrival = Arrival {
                tag: tag as u64,
                prompt: vec![7; 100],
                images: Vec::new(),
                max_tokens: 1,
                ignore_eos: true,
                chat: false,
                pooling: Pooling::No,
                received,
                events,
            };
            tx.send(ToPacer::Arrive(arrival)).unwrap();
            streams.push(stream);
        }
        for stream in &mut streams {
            assert_eq!(
                stream.blocking_recv(),
                Some(Event::Token { first: 1, index: 1, finish: Some(FinishReason::Length) })
            );
        }
        let (reply, snap) = oneshot::channel();
        tx.send(ToPacer::Snapshot(reply)).unwrap();
        let snap = snap.blocking_recv().unwrap();
        assert_eq!(snap.counters.steps, 1, "one prefill step for the whole burst");
        assert_eq!(snap.observed.finished, [0, 4, 0]);
        tx.send(ToPacer::Shutdown).unwrap();
        thread.join().unwrap();
    }
}
