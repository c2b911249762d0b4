//! Probe requests (`--probe-request-rate`), as vLLM 0.27+ sends them: beside the timed run,
//! one request of the prompt "Hi" and one output token at a time, on a connection pool of one
//! of their own and outside the run's concurrency cap; after each ends, a pause of 1 / rate,
//! then the next, until the run ends. Each is a [`ProbeRecord`]: when it was sent, how long it
//! took and why it failed, if it did.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use servebench_core::record::{ProbeRecord, RequestRecord};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::http::HttpClient;
use crate::progress::Progress;
use crate::stream::{StreamContext, execute};

/// The probes' loop, running until [`Probes::finish`].
pub(crate) struct Probes {
    /// Turned true when the run has ended: no probe is sent after it.
    ending: watch::Sender<bool>,
    /// Turned true when the probe in flight is cut off.
    cut: watch::Sender<bool>,
    task: JoinHandle<Vec<ProbeRecord>>,
}

impl Probes {
    /// Starts sending `body` `rate` times a second (at most, as each waits for the one
    /// before) through `client`, a pool of its own, to `ctx`'s target; times are from `t0`,
    /// the timed run's start.
    pub(crate) fn start(ctx: &StreamContext, client: HttpClient, body: Bytes, rate: f64, t0: Instant) -> Probes {
        let ctx = StreamContext { client, progress: Arc::new(Progress::default()), ..ctx.clone() };
        let pause = Duration::try_from_secs_f64(1.0 / rate).unwrap_or(Duration::MAX);
        let (ending, mut ended) = watch::channel(false);
        let (cut, mut cut_off) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut probes = Vec::new();
            while !*ended.borrow() {
                let start = Instant::now();
                let mut rec = RequestRecord { max_tokens: 1, ..RequestRecord::default() };
                execute(&ctx, &mut rec, start, body.clone(), None, &mut cut_off).await;
                probes.push(ProbeRecord {
                    sent_s: start.saturating_duration_since(t0).as_secs_f64(),
                    latency_s: rec.latency_s(),
                    error: rec.failure.map(|f| f.message),
                });
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    _ = ended.changed() => {}
                }
            }
            probes
        });
        Probes { ending, cut, task }
    }

    /// Stops the loop and returns the probes sent, in order. None is sent after this; the one
    /// in flight, if any, gets `grace` to end, then is cut off and recorded as interrupted, as
    /// the run's own requests are.
    pub(crate) async fn finish(self, grace: Duration) -> Vec<ProbeRecord> {
        let Probes { ending, cut, mut task } = self;
        let _ = ending.send(true);
        tokio::select! {
            r = &mut task => return r.unwrap_or_default(),
            () = tokio::time::sleep(grace) => {}
        }
        let _ = cut.send(true);
        task.await.unwrap_or_default()
    }
}
