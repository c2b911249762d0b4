//! The common start of a sharded run: rank 0 hosts a tiny HTTP endpoint (`--coordinator
//! HOST:PORT`), every other worker measures its clock against rank 0's and joins, and once
//! all have joined rank 0 names a start instant a moment ahead, which each worker turns into
//! its own clock's reading.
//!
//! - `GET /clock` answers rank 0's wall clock, ns since the Unix epoch, as text. A worker
//!   sends several on one connection and keeps the sample with the least round-trip time
//!   ([`estimate_offset`]): its offset error is at most half that time.
//! - `POST /join` with `{"rank", "world", "plan_hash"}` is answered when every rank has
//!   joined: `{"start_unix_ns"}` on rank 0's clock, or a 409 with the reason (another world
//!   size, a rank twice, a different plan, a rank that never came).
//!
//! The host stops serving once the start is decided and answered, or at its deadline.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use servebench_core::shard::{ClockOffset, Shard};

use crate::http::{HttpClient, SendError};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The longest answer read from the coordinator.
const ANSWER_LIMIT: usize = 64 * 1024;

/// Round trips measured per worker.
pub const CLOCK_SAMPLES: u32 = 8;

/// Why the rendezvous failed.
#[derive(Debug, thiserror::Error)]
pub enum RendezvousError {
    #[error(
        "could not reach the coordinator (rank 0) at {addr} within {waited_s:.0} s ({reason}); is rank 0 running and is the port reachable?"
    )]
    Unreachable { addr: String, waited_s: f64, reason: String },
    #[error("the coordinator at {addr} broke off: {reason}")]
    Broken { addr: String, reason: String },
    #[error("the coordinator refused this worker: {0}")]
    Refused(String),
    #[error("{0}")]
    Failed(String),
    #[error("could not serve the rendezvous on {addr}: {reason}; is the port free?")]
    Bind { addr: String, reason: String },
}

/// One `GET /clock` round trip: local send time, rank 0's reading, local receive time, in
/// ns since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockSample {
    pub sent_ns: i64,
    pub remote_ns: i64,
    pub received_ns: i64,
}

/// The offset from the sample with the least round-trip time, assuming rank 0 read its
/// clock halfway through the round trip. `None` without samples.
pub fn estimate_offset(samples: &[ClockSample]) -> Option<ClockOffset> {
    let best = samples.iter().min_by_key(|s| s.received_ns - s.sent_ns)?;
    let midpoint = best.sent_ns + (best.received_ns - best.sent_ns) / 2;
    Some(ClockOffset {
        offset_ns: best.remote_ns - midpoint,
        rtt_ns: (best.received_ns - best.sent_ns).max(0).unsigned_abs(),
        samples: samples.len() as u32,
    })
}

/// Now, ns since the Unix epoch.
pub fn unix_ns(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
    }
}

/// The instant `ns` since the Unix epoch.
pub fn from_unix_ns(ns: i64) -> SystemTime {
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

#[derive(Serialize, Deserialize)]
struct Join {
    rank: u32,
    world: u32,
    plan_hash: String,
}

#[derive(Serialize, Deserialize)]
struct Start {
    start_unix_ns: i64,
}

/// What a worker learns: when to start, on its own clock, and its clock against rank 0's.
#[derive(Clone, Copy, Debug)]
pub struct Rendezvous {
    pub start: SystemTime,
    /// The start on rank 0's clock, ns since the Unix epoch.
    pub start_unix_ns: i64,
    pub clock: Option<ClockOffset>,
}

/// The host's state: who joined, and the start (or the failure) once decided.
struct Host {
    shard: Shard,
    plan_hash: String,
    lead: Duration,
    joined: Mutex<BTreeMap<u32, ()>>,
    decided: watch::Sender<Option<Result<i64, String>>>,
}

impl Host {
    fn decide(&self, outcome: Result<i64, String>) {
        self.decided.send_if_modified(|d| {
            if d.is_none() {
                *d = Some(outcome);
                true
            } else {
                false
            }
        });
    }

    /// Registers a join; decides the start when it was the last one.
    fn join(&self, j: &Join) -> Result<(), String> {
        let me = self.shard;
        if j.world != me.world {
            return Err(format!("rank {} runs with a world of {}, rank 0 with {}", j.rank, j.world, me.world));
        }
        if j.rank == 0 || j.rank >= me.world {
            return Err(format!("rank {} cannot join a world of {} as a worker (rank 0 hosts)", j.rank, me.world));
        }
        if j.plan_hash != self.plan_hash {
            let e = format!(
                "rank {} built a plan with hash {}, rank 0 {}: the workers have different flags, seeds, files or tokenizers",
                j.rank, j.plan_hash, self.plan_hash
            );
            self.decide(Err(e.clone()));
            return Err(e);
        }
        let mut joined = self.joined.lock().map_err(|_| "the coordinator failed".to_string())?;
        if joined.insert(j.rank, ()).is_some() {
            return Err(format!("rank {} joined twice; give every worker its own rank", j.rank));
        }
        if joined.len() + 1 == me.world as usize {
            self.decide(Ok(unix_ns(SystemTime::now() + self.lead)));
        }
        Ok(())
    }

    fn missing(&self) -> Vec<u32> {
        let joined = self.joined.lock().map(|j| j.keys().copied().collect::<Vec<_>>()).unwrap_or_default();
        (1..self.shard.world).filter(|r| !joined.contains(r)).collect()
    }
}

type Reply = Response<Full<Bytes>>;

fn reply(status: StatusCode, body: String) -> Reply {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r
}

async fn handle(host: Arc<Host>, req: Request<hyper::body::Incoming>) -> Result<Reply, std::convert::Infallible> {
    Ok(match (req.method(), req.uri().path()) {
        (&Method::GET, "/clock") => reply(StatusCode::OK, unix_ns(SystemTime::now()).to_string()),
        (&Method::POST, "/join") => {
            let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            match serde_json::from_slice::<Join>(&body) {
                Err(e) => reply(StatusCode::BAD_REQUEST, format!("not a join request: {e}")),
                Ok(j) => match host.join(&j) {
                    Err(e) => reply(StatusCode::CONFLICT, e),
                    Ok(()) => {
                        let mut decided = host.decided.subscribe();
                        let outcome = decided.wait_for(Option::is_some).await.ok().and_then(|d| d.clone());
                        match outcome {
                            Some(Ok(start_unix_ns)) => reply(
                                StatusCode::OK,
                                serde_json::to_string(&Start { start_unix_ns }).unwrap_or_default(),
                            ),
                            Some(Err(e)) => reply(StatusCode::CONFLICT, e),
                            None => reply(StatusCode::CONFLICT, "the coordinator stopped".into()),
                        }
                    }
                },
            }
        }
        _ => reply(StatusCode::NOT_FOUND, "the rendezvous serves GET /clock and POST /join".into()),
    })
}

/// Binds rank 0's endpoint (`0.0.0.0:PORT` to be reachable from other machines; tests bind
/// 127.0.0.1 on port 0).
pub async fn bind(addr: &str) -> Result<TcpListener, RendezvousError> {
    TcpListener::bind(addr).await.map_err(|e| RendezvousError::Bind { addr: addr.to_string(), reason: e.to_string() })
}

/// Rank 0's side: serves `listener` until every other rank of `shard.world` has joined with
/// `plan_hash`, then names the start `lead` ahead and returns it. Fails naming the ranks that
/// did not join within `timeout`, or the rank whose plan differs.
pub async fn host(
    listener: TcpListener,
    shard: Shard,
    plan_hash: &str,
    lead: Duration,
    timeout: Duration,
) -> Result<Rendezvous, RendezvousError> {
    let (decided, mut outcome) = watch::channel(None);
    let host =
        Arc::new(Host { shard, plan_hash: plan_hash.to_string(), lead, joined: Mutex::new(BTreeMap::new()), decided });
    if shard.world == 1 {
        host.decide(Ok(unix_ns(SystemTime::now() + lead)));
    }
    let server = tokio::spawn(accept_loop(listener, Arc::clone(&host)));
    let waited = tokio::time::timeout(timeout, outcome.wait_for(Option::is_some)).await;
    if waited.is_err() {
        let missing: Vec<String> = host.missing().iter().map(u32::to_string).collect();
        host.decide(Err(format!(
            "rank{} {} did not join within {:.1} s",
            if missing.len() > 1 { "s" } else { "" },
            missing.join(", "),
            timeout.as_secs_f64()
        )));
    }
    let outcome = host.decided.borrow().clone();
    // Joiners are answered by now or within moments; serving stops at the start at the latest.
    let stop_after = match &outcome {
        Some(Ok(start)) => from_unix_ns(*start).duration_since(SystemTime::now()).unwrap_or_default(),
        _ => Duration::from_millis(200),
    };
    tokio::spawn(async move {
        tokio::time::sleep(stop_after).await;
        server.abort();
    });
    match outcome {
        Some(Ok(start_unix_ns)) => Ok(Rendezvous { start: from_unix_ns(start_unix_ns), start_unix_ns, clock: None }),
        Some(Err(e)) => Err(RendezvousError::Failed(e)),
        None => Err(RendezvousError::Failed("the rendezvous ended undecided".into())),
    }
}

async fn accept_loop(listener: TcpListener, host: Arc<Host>) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let _ = stream.set_nodelay(true);
                    let host = Arc::clone(&host);
                    conns.spawn(async move {
                        let service = service_fn(move |req| handle(Arc::clone(&host), req));
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// A worker's side: connects to rank 0 at `addr` (retrying until `timeout`, as rank 0 may
/// start later), measures its clock offset by [`CLOCK_SAMPLES`] round trips, joins, and
/// waits for the start.
pub async fn join(addr: &str, shard: Shard, plan_hash: &str, timeout: Duration) -> Result<Rendezvous, RendezvousError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let broken = |reason: String| RendezvousError::Broken { addr: addr.to_string(), reason };
    // The coordinator is reached directly, whatever proxies the environment names.
    let client =
        HttpClient::with_env(&format!("http://{addr}"), &[], 1, false, |_| None).map_err(|e| broken(e.to_string()))?;
    let call =
        async |method: Method, path: &'static str, body: Option<String>| -> Result<(StatusCode, String), SendError> {
            let mut resp = client.send(method, &Uri::from_static(path), body.map(Bytes::from), None).await?;
            let text = resp.text(ANSWER_LIMIT).await.map_err(SendError::Exchange)?;
            Ok((resp.status(), text))
        };
    let mut samples = Vec::with_capacity(CLOCK_SAMPLES as usize);
    while samples.len() < CLOCK_SAMPLES as usize {
        let sent_ns = unix_ns(SystemTime::now());
        let (status, text) = match call(Method::GET, "/clock", None).await {
            Ok(answer) => answer,
            // Rank 0 may start later: until the deadline, its port not answering is waited out,
            // and so is its name not resolving (a Kubernetes pod's name resolves once it runs).
            Err(e @ (SendError::Connect { .. } | SendError::Resolve { .. })) if samples.is_empty() => {
                if tokio::time::Instant::now() + Duration::from_millis(200) >= deadline {
                    return Err(RendezvousError::Unreachable {
                        addr: addr.to_string(),
                        waited_s: timeout.as_secs_f64(),
                        reason: e.to_string(),
                    });
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Err(e) => return Err(broken(format!("/clock: {e}"))),
        };
        let received_ns = unix_ns(SystemTime::now());
        let remote_ns = text.trim().parse().ok().filter(|_| status.is_success());
        let remote_ns = remote_ns.ok_or_else(|| broken(format!("GET /clock answered {status} {text:?}")))?;
        samples.push(ClockSample { sent_ns, remote_ns, received_ns });
    }
    let clock = estimate_offset(&samples);
    let join = Join { rank: shard.rank, world: shard.world, plan_hash: plan_hash.to_string() };
    let body = serde_json::to_string(&join).map_err(|e| broken(e.to_string()))?;
    let answer = tokio::time::timeout_at(deadline, call(Method::POST, "/join", Some(body))).await;
    let (status, text) = answer
        .map_err(|_| {
            RendezvousError::Failed(format!("rank 0 did not name a start within {:.0} s", timeout.as_secs_f64()))
        })?
        .map_err(|e| broken(format!("/join: {e}")))?;
    if !status.is_success() {
        return Err(RendezvousError::Refused(text));
    }
    let start: Start =
        serde_json::from_str(&text).map_err(|e| broken(format!("POST /join answered {text:?} ({e})")))?;
    let offset = clock.map_or(0, |c| c.offset_ns);
    Ok(Rendezvous { start: from_unix_ns(start.start_unix_ns - offset), start_unix_ns: start.start_unix_ns, clock })
}

/// The listening address of a bound listener, for messages and tests.
pub fn local_addr(listener: &TcpListener) -> Option<SocketAddr> {
    listener.local_addr().ok()
}

#[cfg(test)]
mod tests;
