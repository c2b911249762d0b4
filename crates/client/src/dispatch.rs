//! Executes a plan's requests or conversations in real time under the load policy
//! ([`servebench_core::load::LoadPolicy`], the one the simulator's predictor follows in
//! virtual time), and collects one record per item.
//!
//! One conductor task owns the policy. It sleeps until the next item falls due (each at its
//! absolute due time `t0 + at_ns`, so lateness never accumulates), hears each request's end
//! over a channel, and carries out the policy's actions: every send is a task of its own that
//! sends, streams and records, then hands its record back. A conversation's next body is built
//! by the task of the turn before it once its answer is in, off the conductor and while the
//! think time runs. The wait for a concurrency or conversation slot shows as the gap between
//! arrival and send, never inside TTFT; waiting items are only entries in the policy's queues,
//! so a huge backlog costs no tasks.
//!
//! On cancellation nothing more is sent, requests in flight get a grace period to finish, then
//! are told to stop and recorded as interrupted; items never sent are counted.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderValue;
use servebench_core::load::{Action, LoadPolicy, skip_message};
use servebench_core::record::{Failure, FailureKind, RequestRecord};
use servebench_workload::History;
use tokio::sync::{mpsc, watch};

use crate::conversation::ConversationSet;
use crate::progress::Progress;
use crate::stream::{StreamContext, execute};

/// How long interrupted requests get to notice the stop signal and hand their record back.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// The failure message of a request the run never got to send.
pub(crate) const INTERRUPTED_FIRST: &str = "not sent: the run was interrupted first";
/// The failure message of a request not sent because the run stopped before its timed part.
pub(crate) const INTERRUPTED_BEFORE_START: &str = "not sent: the run was interrupted before the timed run began";

/// One request, ready to send.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    pub index: u32,
    pub at_ns: u64,
    pub body: Bytes,
    pub max_tokens: u32,
    pub prompt_tokens: Option<u32>,
    pub request_id: Option<HeaderValue>,
}

impl Job {
    /// Its record before it is sent: due at `planned_ns`, reached the client at `arrived_ns`.
    fn record(&self, planned_ns: u64, arrived_ns: u64) -> RequestRecord {
        RequestRecord {
            index: self.index,
            planned_ns,
            arrival_ns: arrived_ns,
            max_tokens: self.max_tokens,
            prompt_tokens_client: self.prompt_tokens,
            ..RequestRecord::default()
        }
    }
}

/// What [`run_batch`] produced.
#[derive(Debug)]
pub(crate) struct BatchOutcome {
    /// One per job, in job order; never-sent ones have a `NotSent` failure.
    pub records: Vec<RequestRecord>,
    pub not_sent: usize,
    pub interrupted: bool,
    /// From just before the first dispatch to the end of the last request.
    pub duration: Duration,
}

impl BatchOutcome {
    /// The outcome of a run interrupted before its timed part: every request never sent.
    pub fn never_started(records: Vec<RequestRecord>) -> Self {
        BatchOutcome { not_sent: records.len(), records, interrupted: true, duration: Duration::ZERO }
    }
}

/// A cancellation future that can be awaited again and again; once it has fired it stays fired.
pub(crate) struct CancelSignal<F> {
    pending: Option<Pin<Box<F>>>,
}

impl<F: Future<Output = ()>> CancelSignal<F> {
    pub fn new(cancel: F) -> Self {
        Self { pending: Some(Box::pin(cancel)) }
    }

    /// Completes when the cancellation has fired (at once if it already has).
    pub async fn fired(&mut self) {
        if let Some(f) = self.pending.as_mut() {
            f.await;
            self.pending = None;
        }
    }
}

/// What a run sends: independent requests, or conversations.
pub(crate) enum Load {
    Requests(Arc<[Job]>),
    Conversations(Arc<ConversationSet>),
}

impl Load {
    fn len(&self) -> usize {
        match self {
            Load::Requests(jobs) => jobs.len(),
            Load::Conversations(set) => set.len(),
        }
    }

    fn policy(&self, max_concurrency: Option<usize>) -> LoadPolicy {
        match self {
            Load::Requests(jobs) => {
                LoadPolicy::from_times(jobs.iter().map(|j| j.at_ns).collect(), Vec::new(), max_concurrency, None, 0)
            }
            Load::Conversations(set) => {
                let starts = set.plans.iter().map(|c| (c.at_ns, c.turns.len())).collect();
                let think_ns = u64::try_from(set.think.as_nanos()).unwrap_or(u64::MAX);
                LoadPolicy::from_times(Vec::new(), starts, max_concurrency, set.max_active, think_ns)
            }
        }
    }

    fn unsent(&self, slot: usize, message: &str) -> RequestRecord {
        match self {
            Load::Requests(jobs) => unsent_record(&jobs[slot], message),
            Load::Conversations(set) => set.unsent(slot, message),
        }
    }
}

/// A sent item's end, from its task: the record and, for a turn that was answered and has a
/// turn after it, the conversation, its history and that turn's body.
struct Done {
    slot: usize,
    rec: RequestRecord,
    next: Option<(usize, History, Bytes)>,
}

struct Shared {
    ctx: StreamContext,
    load: Load,
    t0: Instant,
    stop: watch::Receiver<bool>,
}

/// Runs `jobs` and returns their records; see the module docs.
pub(crate) async fn run_batch<F: Future<Output = ()>>(
    ctx: &StreamContext,
    jobs: Arc<[Job]>,
    max_concurrency: Option<usize>,
    grace: Duration,
    cancel: &mut CancelSignal<F>,
) -> BatchOutcome {
    conduct(ctx, Load::Requests(jobs), max_concurrency, grace, cancel).await
}

/// Runs every conversation of `set` and returns one record per turn; see the module docs.
pub(crate) async fn run_conversations<F: Future<Output = ()>>(
    ctx: &StreamContext,
    set: Arc<ConversationSet>,
    max_concurrency: Option<usize>,
    grace: Duration,
    cancel: &mut CancelSignal<F>,
) -> BatchOutcome {
    conduct(ctx, Load::Conversations(set), max_concurrency, grace, cancel).await
}

/// The conductor: the policy driven in real time until every item is done or `cancel` fires.
async fn conduct<F: Future<Output = ()>>(
    ctx: &StreamContext,
    load: Load,
    max_concurrency: Option<usize>,
    grace: Duration,
    cancel: &mut CancelSignal<F>,
) -> BatchOutcome {
    let n = load.len();
    let mut policy = load.policy(max_concurrency);
    let (stop_tx, stop_rx) = watch::channel(false);
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Done>();
    let t0 = Instant::now();
    let shared = Arc::new(Shared { ctx: ctx.clone(), load, t0, stop: stop_rx });
    let mut state = Sending::new(&shared.load, n);
    let mut actions = Vec::new();
    let sleep = tokio::time::sleep_until(t0.into());
    tokio::pin!(sleep);
    let mut armed: Option<u64> = None;
    let interrupted = loop {
        for action in actions.drain(..) {
            state.carry_out(action, &shared, &done_tx);
        }
        if policy.done() {
            break false;
        }
        let due = policy.next_due();
        // Items already due go at once: a timer would wait for its next tick.
        let now = nanos_since(t0);
        if due.is_some_and(|d| d <= now) {
            policy.advance(now, &mut actions);
            continue;
        }
        if due.is_some() && due != armed {
            let at = due.and_then(|d| t0.checked_add(Duration::from_nanos(d))).unwrap_or(t0);
            sleep.as_mut().reset(at.into());
        }
        armed = due;
        tokio::select! {
            biased;
            () = cancel.fired() => break true,
            () = &mut sleep, if armed.is_some() => {
                armed = None;
                policy.advance(nanos_since(t0), &mut actions);
            }
            Some(done) = done_rx.recv() => {
                let (slot, ok, end_ns) = state.receive(done);
                policy.finished(slot, ok, end_ns, &mut actions);
            }
        }
    };
    if interrupted {
        // Nothing more is sent; requests in flight get the grace period, then are told to stop.
        let drained = tokio::time::timeout(grace, state.drain(&mut done_rx)).await;
        if drained.is_err() {
            let _ = stop_tx.send(true);
            let _ = tokio::time::timeout(STOP_WAIT, state.drain(&mut done_rx)).await;
        }
    }
    let duration = t0.elapsed();
    let (records, not_sent) = fill_unsent(state.records, |slot| shared.load.unsent(slot, INTERRUPTED_FIRST));
    BatchOutcome { records, not_sent, interrupted, duration }
}

/// The conductor's bookkeeping: records by slot, requests in flight, and each conversation's
/// history and next body between its turns.
struct Sending {
    records: Vec<Option<RequestRecord>>,
    in_flight: usize,
    histories: Vec<Option<History>>,
    bodies: Vec<Option<Bytes>>,
}

impl Sending {
    fn new(load: &Load, n: usize) -> Self {
        let (histories, bodies) = match load {
            Load::Requests(_) => (Vec::new(), Vec::new()),
            Load::Conversations(set) => ((0..set.plans.len()).map(|_| None).collect(), vec![None; n]),
        };
        Sending { records: vec![None; n], in_flight: 0, histories, bodies }
    }

    fn carry_out(&mut self, action: Action, shared: &Arc<Shared>, done: &mpsc::UnboundedSender<Done>) {
        match action {
            Action::Send { item, planned_ns, arrived_ns } => {
                let (rec, body, id, turn) = match &shared.load {
                    Load::Requests(jobs) => {
                        let job = &jobs[item];
                        (job.record(planned_ns, arrived_ns), job.body.clone(), job.request_id.clone(), None)
                    }
                    Load::Conversations(set) => {
                        let (c, k) = set.locate(item);
                        let rec = set.turn_record(item, planned_ns, arrived_ns);
                        let body = match k {
                            0 => set.first_bodies[c].clone(),
                            _ => self.bodies[item].take().unwrap_or_default(),
                        };
                        (rec, body, Some(set.request_ids[item].clone()), Some((c, k, self.histories[c].take())))
                    }
                };
                self.in_flight += 1;
                tokio::spawn(request_task(Arc::clone(shared), item, rec, body, id, turn, done.clone()));
            }
            Action::Skip { item, planned_ns, failed_turn } => {
                let Load::Conversations(set) = &shared.load else { return };
                let (c, _) = set.locate(item);
                let mut rec = set.unsent(item, &skip_message(set.plans[c].id, failed_turn));
                rec.planned_ns = planned_ns;
                Progress::add(&shared.ctx.progress.completed, 1);
                self.records[item] = Some(rec);
            }
        }
    }

    /// Files a finished item; returns its slot, whether it succeeded, and when it ended.
    fn receive(&mut self, done: Done) -> (usize, bool, u64) {
        self.in_flight -= 1;
        let Done { slot, rec, next } = done;
        if let Some((c, history, body)) = next {
            self.bodies[slot + 1] = Some(body);
            self.histories[c] = Some(history);
        }
        let ok = rec.failure.is_none();
        let end_ns = rec.start_ns.saturating_add(u64::from(rec.end_us) * 1000);
        self.records[slot] = Some(rec);
        (slot, ok, end_ns)
    }

    /// Receives the records of the requests still in flight.
    async fn drain(&mut self, rx: &mut mpsc::UnboundedReceiver<Done>) {
        while self.in_flight > 0 {
            let Some(done) = rx.recv().await else { return };
            self.in_flight -= 1;
            self.records[done.slot] = Some(done.rec);
        }
    }
}

/// Sends item `slot` and hands its record back; a conversation's turn (`turn`: conversation,
/// turn and history so far) that was answered also builds the next turn's body.
async fn request_task(
    shared: Arc<Shared>,
    slot: usize,
    mut rec: RequestRecord,
    body: Bytes,
    request_id: Option<HeaderValue>,
    turn: Option<(usize, usize, Option<History>)>,
    done: mpsc::UnboundedSender<Done>,
) {
    let mut stop = shared.stop.clone();
    send_timed(&shared.ctx, shared.t0, &mut rec, body, request_id, &mut stop).await;
    let next = match (&shared.load, turn) {
        (Load::Conversations(set), Some((c, k, history))) if rec.failure.is_none() => {
            set.next_turn(c, k, history, &rec.text).map(|(h, body)| (c, h, body))
        }
        _ => None,
    };
    // The receiver is gone only if the run stopped waiting; the record is then not needed.
    let _ = done.send(Done { slot, rec, next });
}

/// The records by slot, `unsent(slot)` standing in for each one never received, and how
/// many those were.
pub(crate) fn fill_unsent(
    records: Vec<Option<RequestRecord>>,
    unsent: impl Fn(usize) -> RequestRecord,
) -> (Vec<RequestRecord>, usize) {
    let mut not_sent = 0;
    let records = records
        .into_iter()
        .enumerate()
        .map(|(slot, rec)| {
            rec.unwrap_or_else(|| {
                not_sent += 1;
                unsent(slot)
            })
        })
        .collect();
    (records, not_sent)
}

/// The record of `job`, never sent (`message` says why).
pub(crate) fn unsent_record(job: &Job, message: &str) -> RequestRecord {
    RequestRecord { failure: Some(not_sent(message)), ..job.record(job.at_ns, 0) }
}

/// The failure of a request that was never sent.
pub(crate) fn not_sent(message: &str) -> Failure {
    Failure { kind: FailureKind::NotSent, message: message.to_string() }
}

/// Sends one request now and fills `rec` (whose identity and schedule fields the caller has
/// set): the send time, then everything [`execute`] measures; the progress counters are kept.
async fn send_timed(
    ctx: &StreamContext,
    t0: Instant,
    rec: &mut RequestRecord,
    body: Bytes,
    request_id: Option<HeaderValue>,
    stop: &mut watch::Receiver<bool>,
) {
    let progress = &ctx.progress;
    Progress::add(&progress.in_flight, 1);
    let start = Instant::now();
    rec.start_ns = nanos_between(t0, start);
    execute(ctx, rec, start, body, request_id, stop).await;
    Progress::sub(&progress.in_flight, 1);
    Progress::add(&progress.completed, 1);
    if rec.failure.is_some() {
        Progress::add(&progress.failed, 1);
    }
}

pub(crate) fn nanos_since(t0: Instant) -> u64 {
    nanos_between(t0, Instant::now())
}

pub(crate) fn nanos_between(t0: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(t0).as_nanos()).unwrap_or(u64::MAX)
}
