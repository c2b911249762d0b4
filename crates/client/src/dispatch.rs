//! Executes a list of prepared requests on their schedule, under an optional concurrency cap,
//! and collects one record per request.
//!
//! Three kinds of task share the work:
//! - the dispatcher sleeps until each request's absolute due time `t0 + at_ns` (so lateness
//!   never accumulates) and releases it, recording the actual arrival;
//! - the launcher takes released requests in order, waits for a concurrency slot when the run
//!   is capped (a FIFO wait, recorded as the gap between arrival and send, never inside TTFT),
//!   and spawns the request;
//! - each request task sends, streams and records, then hands its record back over a channel.
//!
//! Waiting requests are only small `(slot, arrival)` messages, so a huge backlog costs no
//! tasks. On cancellation nothing more is dispatched, requests in flight get a grace period to
//! finish, then are told to stop and recorded as interrupted; requests never sent are counted.
//!
//! The schedule ([`release_on_schedule`]), the FIFO caps ([`launch_in_order`], [`acquire`]), the
//! timed send ([`send_timed`]) and the collection of records with its interruption handling
//! ([`collect`], [`stop_dispatching`], [`fill_unsent`]) are shared with the multi-turn runner
//! (`conversation.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderValue;
use servebench_core::record::{Failure, FailureKind, RequestRecord};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinHandle;

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

    pub fn has_fired(&self) -> bool {
        self.pending.is_none()
    }

    /// Completes when the cancellation has fired (at once if it already has).
    pub async fn fired(&mut self) {
        if let Some(f) = self.pending.as_mut() {
            f.await;
            self.pending = None;
        }
    }
}

struct Shared {
    ctx: StreamContext,
    jobs: Arc<[Job]>,
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
    let n = jobs.len();
    let (stop_tx, stop_rx) = watch::channel(false);
    let (release_tx, release_rx) = mpsc::unbounded_channel();
    let (record_tx, mut record_rx) = mpsc::unbounded_channel();
    let semaphore = max_concurrency.map(semaphore);

    let t0 = Instant::now();
    let shared = Arc::new(Shared { ctx: ctx.clone(), jobs: Arc::clone(&jobs), t0, stop: stop_rx });
    let dispatcher = tokio::spawn(release_on_schedule(Arc::clone(&jobs), |j: &Job| j.at_ns, t0, release_tx));
    let launcher = tokio::spawn(launch_in_order(release_rx, semaphore, move |slot, arrival_ns, permit| {
        request_task(Arc::clone(&shared), slot, arrival_ns, permit, record_tx.clone())
    }));

    let halt = stop_dispatching(dispatcher, launcher);
    let (records, interrupted) = collect(n, &mut record_rx, cancel, grace, &stop_tx, halt).await;
    let duration = t0.elapsed();
    // `records` has one slot per job.
    let (records, not_sent) = fill_unsent(records, |slot| unsent_record(&jobs[slot], INTERRUPTED_FIRST));
    BatchOutcome { records, not_sent, interrupted, duration }
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

/// A semaphore of `permits` (at least one), for a FIFO cap.
pub(crate) fn semaphore(permits: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(permits.clamp(1, Semaphore::MAX_PERMITS)))
}

/// Receives `n` records by slot until all came or `cancel` fires. On cancellation `halt` runs
/// (it stops anything new from being sent), requests in flight get `grace` to finish, then
/// are told to stop through `stop` and get a little longer to hand their records back.
/// Returns the records by slot (`None`: never sent) and whether the run was interrupted.
pub(crate) async fn collect<F: Future<Output = ()>>(
    n: usize,
    rx: &mut mpsc::UnboundedReceiver<(usize, RequestRecord)>,
    cancel: &mut CancelSignal<F>,
    grace: Duration,
    stop: &watch::Sender<bool>,
    halt: impl Future<Output = ()>,
) -> (Vec<Option<RequestRecord>>, bool) {
    // Slots come from this run's own tasks, each below `n`.
    let mut records: Vec<Option<RequestRecord>> = vec![None; n];
    let mut received = 0;
    while received < n && !cancel.has_fired() {
        tokio::select! {
            biased;
            msg = rx.recv() => match msg {
                Some((slot, rec)) => {
                    records[slot] = Some(rec);
                    received += 1;
                }
                None => break,
            },
            () = cancel.fired() => {}
        }
    }
    let interrupted = received < n;
    if interrupted {
        halt.await;
        let drained = tokio::time::timeout(grace, drain(rx, &mut records)).await;
        if drained.is_err() {
            // Requests still streaming are told to stop; each records itself as interrupted.
            let _ = stop.send(true);
            let _ = tokio::time::timeout(STOP_WAIT, drain(rx, &mut records)).await;
        }
    }
    (records, interrupted)
}

/// Stops the dispatcher and the launcher and waits until both are gone.
pub(crate) async fn stop_dispatching(dispatcher: JoinHandle<()>, launcher: JoinHandle<()>) {
    dispatcher.abort();
    launcher.abort();
    // Both end at their next await point; waiting makes sure the launcher's channel ends are
    // dropped, so the record channel closes once the last request task is done.
    let _ = dispatcher.await;
    let _ = launcher.await;
}

async fn drain(rx: &mut mpsc::UnboundedReceiver<(usize, RequestRecord)>, records: &mut [Option<RequestRecord>]) {
    while let Some((slot, rec)) = rx.recv().await {
        records[slot] = Some(rec);
    }
}

/// The record of `job`, never sent (`message` says why).
pub(crate) fn unsent_record(job: &Job, message: &str) -> RequestRecord {
    RequestRecord {
        index: job.index,
        planned_ns: job.at_ns,
        max_tokens: job.max_tokens,
        prompt_tokens_client: job.prompt_tokens,
        failure: Some(not_sent(message)),
        ..RequestRecord::default()
    }
}

/// The failure of a request that was never sent.
pub(crate) fn not_sent(message: &str) -> Failure {
    Failure { kind: FailureKind::NotSent, message: message.to_string() }
}

/// Releases each item at `t0 + at_ns(item)` (items are in non-decreasing `at_ns` order),
/// sending its slot and the actual release time (ns since `t0`).
pub(crate) async fn release_on_schedule<T: Send + Sync + 'static>(
    items: Arc<[T]>,
    at_ns: fn(&T) -> u64,
    t0: Instant,
    release: mpsc::UnboundedSender<(usize, u64)>,
) {
    for (slot, item) in items.iter().enumerate() {
        sleep_until_due(t0, at_ns(item)).await;
        if release.send((slot, nanos_since(t0))).is_err() {
            return;
        }
    }
}

/// Sleeps until `t0 + at_ns`, unless that time has passed.
pub(crate) async fn sleep_until_due(t0: Instant, at_ns: u64) {
    if let Some(due) = t0.checked_add(Duration::from_nanos(at_ns))
        && Instant::now() < due
    {
        tokio::time::sleep_until(due.into()).await;
    }
}

/// A permit of `semaphore`, waiting in FIFO order; `None` when uncapped.
pub(crate) async fn acquire(semaphore: Option<&Arc<Semaphore>>) -> Option<OwnedSemaphorePermit> {
    // The semaphores are never closed, so acquiring cannot fail; were one closed, the
    // request would go uncapped rather than hang.
    Arc::clone(semaphore?).acquire_owned().await.ok()
}

/// Takes released `(slot, arrival_ns)` items in order and spawns `start` for each once a
/// permit of `semaphore` is free (a FIFO wait; none when uncapped). The permit goes to the task.
pub(crate) async fn launch_in_order<T>(
    mut released: mpsc::UnboundedReceiver<(usize, u64)>,
    semaphore: Option<Arc<Semaphore>>,
    start: impl Fn(usize, u64, Option<OwnedSemaphorePermit>) -> T,
) where
    T: Future<Output = ()> + Send + 'static,
{
    while let Some((slot, arrival_ns)) = released.recv().await {
        let permit = acquire(semaphore.as_ref()).await;
        tokio::spawn(start(slot, arrival_ns, permit));
    }
}

async fn request_task(
    shared: Arc<Shared>,
    slot: usize,
    arrival_ns: u64,
    permit: Option<OwnedSemaphorePermit>,
    records: mpsc::UnboundedSender<(usize, RequestRecord)>,
) {
    let job = &shared.jobs[slot];
    let mut stop = shared.stop.clone();
    let mut rec = RequestRecord {
        index: job.index,
        planned_ns: job.at_ns,
        arrival_ns,
        max_tokens: job.max_tokens,
        prompt_tokens_client: job.prompt_tokens,
        ..RequestRecord::default()
    };
    send_timed(&shared.ctx, shared.t0, &mut rec, job.body.clone(), job.request_id.clone(), permit, &mut stop).await;
    // The receiver is gone only if the run stopped waiting; the record is then not needed.
    let _ = records.send((slot, rec));
}

/// Sends one request now and fills `rec` (whose identity and schedule fields the caller has
/// set): the send time, then everything [`execute`] measures. The concurrency `permit` is
/// given back as soon as the response has ended; the progress counters are kept.
pub(crate) async fn send_timed(
    ctx: &StreamContext,
    t0: Instant,
    rec: &mut RequestRecord,
    body: Bytes,
    request_id: Option<HeaderValue>,
    permit: Option<OwnedSemaphorePermit>,
    stop: &mut watch::Receiver<bool>,
) {
    let progress = &ctx.progress;
    Progress::add(&progress.in_flight, 1);
    let start = Instant::now();
    rec.start_ns = nanos_between(t0, start);
    execute(ctx, rec, start, body, request_id, stop).await;
    drop(permit);
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
