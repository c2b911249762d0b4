//! Merges the result files of a sharded run's workers into the run one process sending the
//! whole plan would have measured: every worker's raw per-request records, their times moved
//! onto one timeline, in plan order, so that every statistic computed from them is exact.
//!
//! [`read_shard_result`] reads one worker's result JSON (written by `bench serve --shard`,
//! which always keeps per-request chunk times). [`merge_shards`] checks that the set is
//! complete and consistent (one world size, every rank once, one plan hash, no request
//! twice), then moves each worker's times by how much later than the earliest worker its
//! timed run began, on rank 0's clock (its start on its own clock plus its measured offset).

use std::collections::BTreeMap;

use serde_json::Value;
use servebench_core::config::RunConfig;
use servebench_core::metrics::dispatch_lag;
use servebench_core::record::{ProbeRecord, RequestRecord, RunResult, TokenSource};
use servebench_core::shard::{MergedShards, RankFigures, Sharding, WorkerShard};
use servebench_core::telemetry::SpecDecodeWindow;
use thiserror::Error;

use crate::import::records::from_servebench;
use crate::runs::ChunkTimes;

/// One worker's result.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardResult {
    /// Where it was read from (a path), for messages.
    pub source: String,
    pub worker: WorkerShard,
    pub run: RunResult,
    /// The worker's client-health verdict, from its result file.
    pub health: Option<servebench_core::metrics::Verdict>,
}

/// Why worker results could not be read or merged.
#[derive(Debug, Error, PartialEq)]
pub enum MergeError {
    #[error("{file}: {reason}")]
    Unreadable { file: String, reason: String },
    #[error(
        "{file} is not a worker's result of a sharded run (it has no servebench.shard with role \"worker\"); \
         merge only the files `bench serve --shard` wrote"
    )]
    NotAWorker { file: String },
    #[error(
        "{file} lacks per-request chunk times (`itls`), so its records cannot be merged exactly; \
         sharded workers save them: was it written by `bench serve --shard`?"
    )]
    NoChunkTimes { file: String },
    #[error("no worker results to merge; pass the files (or the folder) the workers wrote")]
    Empty,
    #[error("{file} is rank {rank} of {world} workers, but {expected_file} is of {expected}; these are not one run")]
    WorldMismatch { file: String, rank: u32, world: u32, expected: u32, expected_file: String },
    #[error(
        "{file} (rank {rank}) sent a plan with hash {hash}, but {expected_file} sent {expected}: the workers \
         built different plans (check that every worker had the same flags, seed, dataset files and tokenizer)"
    )]
    PlanHashMismatch { file: String, rank: u32, hash: String, expected: String, expected_file: String },
    #[error(
        "{file} (rank {rank}) ran with a different {what} than {expected_file} ({got} against {expected}): \
         these are not one run (every worker of a run takes the same flags)"
    )]
    ConfigMismatch { file: String, rank: u32, what: &'static str, got: String, expected: String, expected_file: String },
    #[error("rank {rank} appears twice: in {first} and in {second}; pass each worker's result once")]
    DuplicateRank { rank: u32, first: String, second: String },
    #[error(
        "rank{} {missing} of {world} missing (present: {present}); pass every worker's result, or --partial \
         to merge those present (the result is marked partial)",
        if missing.contains(',') { "s" } else { "" }
    )]
    MissingRanks { missing: String, present: String, world: u32 },
    #[error("{request} was sent by rank {first} and again by rank {second}; the shards overlap")]
    DuplicateRequest { request: String, first: u32, second: u32 },
    #[error(
        "{file} (rank {rank}) began its timed run {apart_s:.0} s from {first_file}, more than an hour apart: \
         the workers of one run start together (check that these files are one run, and each worker's clock)"
    )]
    StartsApart { file: String, rank: u32, apart_s: f64, first_file: String },
}

/// The furthest apart two workers of one run may begin their timed runs, ns.
const MAX_START_SPREAD_NS: i64 = 3_600 * 1_000_000_000;

/// Reads one worker's result JSON (`source` names it in messages).
pub fn read_shard_result(text: &str, source: &str) -> Result<ShardResult, MergeError> {
    let bad = |reason: String| MergeError::Unreadable { file: source.to_string(), reason };
    let value: Value = serde_json::from_str(text).map_err(|e| bad(format!("not one JSON document ({e})")))?;
    let m = value.as_object().ok_or_else(|| bad("not a JSON object".into()))?;
    let not_a_worker = || MergeError::NotAWorker { file: source.to_string() };
    let ours = m.get("servebench").and_then(Value::as_object).ok_or_else(not_a_worker)?;
    let worker = match ours.get("shard").map(|s| serde_json::from_value::<Sharding>(s.clone())) {
        Some(Ok(Sharding::Worker(w))) => w,
        Some(Err(e)) => return Err(bad(format!("servebench.shard is not readable ({e})"))),
        _ => return Err(not_a_worker()),
    };
    if worker.world == 0 || worker.rank >= worker.world {
        return Err(bad(format!(
            "servebench.shard says rank {} of {} workers; ranks run from 0 to the world size less one",
            worker.rank, worker.world
        )));
    }
    let config: RunConfig = serde_json::from_value(ours.get("config").cloned().unwrap_or(Value::Null))
        .map_err(|e| bad(format!("servebench.config is not readable by this servebench ({e})")))?;
    let records = from_servebench(m, ours).map_err(bad)?.ok_or_else(|| bad("it has no servebench.requests".into()))?;
    // A pooling answer is one chunk, at its request's end: its file (vLLM's pooling keys, no
    // `itls`) holds every chunk time there is.
    if records.chunk_times != ChunkTimes::All && !config.target.backend.api().pooling() {
        return Err(MergeError::NoChunkTimes { file: source.to_string() });
    }
    let mut records = records.records;
    if let Some(Value::Array(texts)) = m.get("generated_texts")
        && texts.len() == records.len()
    {
        for (r, t) in records.iter_mut().zip(texts) {
            r.text = t.as_str().unwrap_or_default().to_string();
        }
    }
    let text_at = |k: &str| m.get(k).or_else(|| ours.get(k)).and_then(Value::as_str).unwrap_or_default().to_string();
    let run = RunResult {
        config,
        records,
        duration_s: m.get("duration").and_then(Value::as_f64).ok_or_else(|| bad("it has no `duration`".into()))?,
        date: text_at("date"),
        started_at: text_at("started_at"),
        interrupted: ours.get("interrupted").and_then(Value::as_bool).unwrap_or(false),
        not_sent: ours.get("not_sent").and_then(Value::as_u64).map_or(0, |n| n as usize),
        stopped_by: ours.get("stopped_by").and_then(Value::as_str).map(str::to_string),
        notes: ours
            .get("notes")
            .and_then(Value::as_array)
            .map(|n| n.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default(),
        token_source: ours
            .get("token_source")
            .and_then(|t| serde_json::from_value::<TokenSource>(t.clone()).ok())
            .unwrap_or_default(),
        // The result file keeps the client's health verdict, not what it was computed from.
        client: None,
        shard: Some(Sharding::Worker(worker.clone())),
        telemetry: ours.get("server_telemetry").and_then(|v| serde_json::from_value(v.clone()).ok()),
        spec_decode: ours.get("spec_decode_window").and_then(|v| serde_json::from_value(v.clone()).ok()),
        probes: ours.get("probes").and_then(|v| serde_json::from_value(v.clone()).ok()).unwrap_or_default(),
    };
    let health = ours.get("health").and_then(|h| h.get("verdict")).and_then(|v| serde_json::from_value(v.clone()).ok());
    Ok(ShardResult { source: source.to_string(), worker, run, health })
}

/// Merges worker results into one run (see the module docs). Without `partial`, every rank
/// of the world must be there; with it, the ranks present are merged and the run records
/// which were missing.
pub fn merge_shards(mut parts: Vec<ShardResult>, partial: bool) -> Result<RunResult, MergeError> {
    parts.sort_by_key(|p| p.worker.rank);
    let first = parts.first().ok_or(MergeError::Empty)?;
    let (world, hash, base) = (first.worker.world, first.worker.plan_hash.clone(), first.source.clone());
    for pair in parts.windows(2) {
        if pair[0].worker.rank == pair[1].worker.rank {
            return Err(MergeError::DuplicateRank {
                rank: pair[0].worker.rank,
                first: pair[0].source.clone(),
                second: pair[1].source.clone(),
            });
        }
    }
    for p in &parts {
        if p.worker.world != world {
            return Err(MergeError::WorldMismatch {
                file: p.source.clone(),
                rank: p.worker.rank,
                world: p.worker.world,
                expected: world,
                expected_file: base,
            });
        }
        if p.worker.plan_hash != hash {
            return Err(MergeError::PlanHashMismatch {
                file: p.source.clone(),
                rank: p.worker.rank,
                hash: p.worker.plan_hash.clone(),
                expected: hash,
                expected_file: base,
            });
        }
    }
    for p in &parts[1..] {
        if let Some((what, got, expected)) = differing_setting(&p.run.config, &first.run.config) {
            return Err(MergeError::ConfigMismatch {
                file: p.source.clone(),
                rank: p.worker.rank,
                what,
                got,
                expected,
                expected_file: base,
            });
        }
    }
    let present: Vec<u32> = parts.iter().map(|p| p.worker.rank).collect();
    let missing: Vec<u32> = (0..world).filter(|r| !present.contains(r)).collect();
    if !missing.is_empty() && !partial {
        return Err(MergeError::MissingRanks { missing: list(&missing), present: list(&present), world });
    }

    // The earliest start on rank 0's clock is the merged run's start.
    let lead = parts.iter().min_by_key(|p| p.worker.t0_on_rank0_ns()).unwrap_or(first);
    let origin = lead.worker.t0_on_rank0_ns();
    for p in &parts {
        let apart = p.worker.t0_on_rank0_ns().saturating_sub(origin);
        if apart > MAX_START_SPREAD_NS {
            return Err(MergeError::StartsApart {
                file: p.source.clone(),
                rank: p.worker.rank,
                apart_s: apart as f64 * 1e-9,
                first_file: lead.source.clone(),
            });
        }
    }
    let mut owner: BTreeMap<(u32, u32, u32), (u32, RequestRecord)> = BTreeMap::new();
    let mut figures = Vec::with_capacity(parts.len());
    let mut duration_s: f64 = 0.0;
    for p in &parts {
        let shift = p.worker.t0_on_rank0_ns().saturating_sub(origin);
        let lag = dispatch_lag(&p.run.records);
        figures.push(RankFigures {
            rank: p.worker.rank,
            requests: p.run.records.len(),
            rebased_ns: shift,
            clock: p.worker.clock,
            duration_s: p.run.duration_s,
            dispatch_lag_p99_ms: lag.map(|l| l.p99_ms),
            dispatch_lag_max_ms: lag.map(|l| l.max_ms),
            health: p.health,
        });
        duration_s = duration_s.max(shift as f64 * 1e-9 + p.run.duration_s);
        for r in &p.run.records {
            let key = match r.turn {
                Some(t) => (1, t.conversation, t.turn),
                None => (0, r.index, 0),
            };
            if let Some((rank, _)) = owner.get(&key) {
                return Err(MergeError::DuplicateRequest {
                    request: match r.turn {
                        Some(t) => format!("turn {} of conversation {}", t.turn, t.conversation),
                        None => format!("request {}", r.index),
                    },
                    first: *rank,
                    second: p.worker.rank,
                });
            }
            owner.insert(key, (p.worker.rank, rebased(r, shift.unsigned_abs())));
        }
    }
    let multi_turn = owner.keys().any(|k| k.0 == 1);
    let records: Vec<RequestRecord> = owner
        .into_values()
        .enumerate()
        .map(|(slot, (_, mut r))| {
            // Turns are numbered in conversation order, as one process numbers them.
            if multi_turn {
                r.index = slot as u32;
            }
            r
        })
        .collect();

    let mut config = first.run.config.clone();
    config.traffic.max_concurrency = first.worker.max_concurrency;
    let mut notes: Vec<String> = Vec::new();
    for note in parts.iter().flat_map(|p| &p.run.notes) {
        if !notes.contains(note) {
            notes.push(note.clone());
        }
    }
    notes.push(format!("Merged from {} of {world} shards (plan {hash}).", parts.len()));
    if !missing.is_empty() {
        notes.push(format!(
            "PARTIAL: rank{} {} of {world} missing; {} of the plan's {} requests are reported.",
            if missing.len() > 1 { "s" } else { "" },
            list(&missing),
            records.len(),
            first.worker.plan_requests
        ));
    }
    Ok(RunResult {
        config,
        duration_s,
        date: lead.run.date.clone(),
        started_at: lead.run.started_at.clone(),
        interrupted: parts.iter().any(|p| p.run.interrupted),
        not_sent: parts.iter().map(|p| p.run.not_sent).sum(),
        // Each worker applies the stop rules to its own requests: the first rank stopped says why.
        stopped_by: parts
            .iter()
            .find_map(|p| p.run.stopped_by.as_ref().map(|why| format!("rank {}: {why}", p.worker.rank))),
        notes,
        token_source: first.run.token_source,
        // Each worker's client was watched apart; the merge keeps their dispatch lag per rank.
        client: None,
        // Every worker loads the same server: the first worker's scrapes stand for the run.
        telemetry: parts.iter().find_map(|p| p.run.telemetry.clone()),
        // Each worker read the server's counters around its own timed run: the run's are from
        // the earliest reading before to the latest after (summing would count the server's
        // drafts once a worker).
        spec_decode: SpecDecodeWindow::join(parts.iter().filter_map(|p| p.run.spec_decode.as_ref())),
        // Rank 0 alone sends probes; their times move onto the merged run's clock.
        probes: parts
            .iter()
            .flat_map(|p| {
                let shift_s = p.worker.t0_on_rank0_ns().saturating_sub(origin) as f64 * 1e-9;
                p.run.probes.iter().map(move |probe| ProbeRecord { sent_s: probe.sent_s + shift_s, ..probe.clone() })
            })
            .collect(),
        shard: Some(Sharding::Merged(MergedShards {
            world,
            plan_hash: hash,
            max_concurrency: first.worker.max_concurrency,
            concurrency_split: first.worker.concurrency_split.clone(),
            ranks: figures,
            missing,
        })),
        records,
    })
}

/// The first setting that tells two workers' configs apart as runs, with each one's value: the
/// model, the API, the simulated target, the workload, the traffic (less the concurrency each
/// worker's share of it had, and the probes, which rank 0 alone sends) and what every body
/// carries. Each worker's own server address
/// (one server reached by several names), outputs and timeouts may differ.
fn differing_setting(a: &RunConfig, b: &RunConfig) -> Option<(&'static str, String, String)> {
    let unshared = |c: &RunConfig| {
        let mut traffic = c.traffic.clone();
        traffic.max_concurrency = None;
        traffic.probe_request_rate = None;
        traffic
    };
    let pairs = [
        ("model (--model)", json(&a.target.model_id), json(&b.target.model_id)),
        ("served model name", json(&a.target.model_name), json(&b.target.model_name)),
        ("backend", json(&a.target.backend), json(&b.target.backend)),
        ("endpoint", json(&a.target.endpoint), json(&b.target.endpoint)),
        ("simulated target", json(&a.target.sim), json(&b.target.sim)),
        ("workload", json(&a.workload), json(&b.workload)),
        ("traffic", json(&unshared(a)), json(&unshared(b))),
        ("extra body", json(&a.extra_body), json(&b.extra_body)),
        ("ignore-eos and logprobs", json(&(a.ignore_eos, a.logprobs)), json(&(b.ignore_eos, b.logprobs))),
    ];
    // Compared whole, shown cut to a readable length.
    let shown = |text: String| match text.char_indices().nth(160) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    };
    pairs.into_iter().find(|(_, x, y)| x != y).map(|(what, x, y)| (what, shown(x), shown(y)))
}

/// A setting as compact JSON.
fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// `r` with its times moved `shift_ns` later; a request never sent keeps its zero times.
fn rebased(r: &RequestRecord, shift_ns: u64) -> RequestRecord {
    let mut r = r.clone();
    r.planned_ns += shift_ns;
    if !r.never_sent() {
        r.arrival_ns += shift_ns;
        r.start_ns += shift_ns;
    }
    r
}

fn list(ranks: &[u32]) -> String {
    if ranks.is_empty() {
        return "none".into();
    }
    ranks.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests;
