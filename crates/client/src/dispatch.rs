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
    /// One per job, in job order; never-sent ones are marked interrupted.
    pub records: Vec<RequestRecord>,
    pub not_sent: usize,
    pub interrupted: bool,
    /// From just before the first dispatch to the end of the last request.
    pub duration: Duration,
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
    let semaphore = max_concurrency.map(|c| Arc::new(Semaphore::new(c.max(1))));

    let t0 = Instant::now();
    let shared = Arc::new(Shared { ctx: ctx.clone(), jobs: Arc::clone(&jobs), t0, stop: stop_rx });
    let dispatcher = tokio::spawn(dispatch(Arc::clone(&jobs), t0, release_tx));
    let launcher = tokio::spawn(launch(shared, release_rx, semaphore, record_tx));

    let mut records: Vec<Option<RequestRecord>> = vec![None; n];
    let mut received = 0;
    while received < n && !cancel.has_fired() {
        tokio::select! {
            biased;
            msg = record_rx.recv() => match msg {
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
        stop_dispatching(dispatcher, launcher).await;
        let drained = tokio::time::timeout(grace, drain(&mut record_rx, &mut records)).await;
        if drained.is_err() {
            // Requests still streaming are told to stop; each records itself as interrupted.
            let _ = stop_tx.send(true);
            let _ = tokio::time::timeout(STOP_WAIT, drain(&mut record_rx, &mut records)).await;
        }
    }
    let duration = t0.elapsed();
    let mut not_sent = 0;
    let records = records
        .into_iter()
        .zip(jobs.iter())
        .map(|(rec, job)| {
            rec.unwrap_or_else(|| {
                not_sent += 1;
                unsent_record(job)
            })
        })
        .collect();
    BatchOutcome { records, not_sent, interrupted, duration }
}

async fn stop_dispatching(dispatcher: JoinHandle<()>, launcher: JoinHandle<()>) {
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

fn unsent_record(job: &Job) -> RequestRecord {
    RequestRecord {
        index: job.index,
        planned_ns: job.at_ns,
        max_tokens: job.max_tokens,
        prompt_tokens_client: job.prompt_tokens,
        failure: Some(Failure {
            kind: FailureKind::NotSent,
            message: "not sent: the run was interrupted first".to_string(),
        }),
        ..RequestRecord::default()
    }
}

/// Releases each job at `t0 + at_ns` (jobs are in non-decreasing `at_ns` order).
async fn dispatch(jobs: Arc<[Job]>, t0: Instant, release: mpsc::UnboundedSender<(usize, u64)>) {
    for (slot, job) in jobs.iter().enumerate() {
        if let Some(due) = t0.checked_add(Duration::from_nanos(job.at_ns))
            && Instant::now() < due
        {
            tokio::time::sleep_until(due.into()).await;
        }
        if release.send((slot, nanos_since(t0))).is_err() {
            return;
        }
    }
}

/// Starts released jobs in order, each once a concurrency slot is free.
async fn launch(
    shared: Arc<Shared>,
    mut released: mpsc::UnboundedReceiver<(usize, u64)>,
    semaphore: Option<Arc<Semaphore>>,
    records: mpsc::UnboundedSender<(usize, RequestRecord)>,
) {
    while let Some((slot, arrival_ns)) = released.recv().await {
        let permit = match &semaphore {
            // The semaphore is never closed, so acquiring only fails if it were.
            Some(s) => match Arc::clone(s).acquire_owned().await {
                Ok(p) => Some(p),
                Err(_) => return,
            },
            None => None,
        };
        tokio::spawn(request_task(Arc::clone(&shared), slot, arrival_ns, permit, records.clone()));
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
    let progress = &shared.ctx.progress;
    let mut stop = shared.stop.clone();
    Progress::add(&progress.in_flight, 1);
    let start = Instant::now();
    let mut rec = RequestRecord {
        index: job.index,
        planned_ns: job.at_ns,
        arrival_ns,
        start_ns: nanos_between(shared.t0, start),
        max_tokens: job.max_tokens,
        prompt_tokens_client: job.prompt_tokens,
        ..RequestRecord::default()
    };
    execute(&shared.ctx, &mut rec, start, job.body.clone(), job.request_id.clone(), &mut stop).await;
    drop(permit);
    Progress::sub(&progress.in_flight, 1);
    Progress::add(&progress.completed, 1);
    if rec.failure.is_some() {
        Progress::add(&progress.failed, 1);
    }
    // The receiver is gone only if the run stopped waiting; the record is then not needed.
    let _ = records.send((slot, rec));
}

fn nanos_since(t0: Instant) -> u64 {
    nanos_between(t0, Instant::now())
}

fn nanos_between(t0: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(t0).as_nanos()).unwrap_or(u64::MAX)
}
