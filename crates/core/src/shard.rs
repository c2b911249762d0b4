//! Sharded runs: one plan sent by many workers, each its share, merged afterwards.
//!
//! Every worker builds the same [`Plan`] (same config, seed and files give the same bodies),
//! checks it by [`plan_hash`], keeps its share with [`select`] (every `world`-th request, or
//! every `world`-th conversation whole, at its planned time since the common start) and its
//! part of a global `--max-concurrency` with [`split_concurrency`]. What a worker records about
//! its shard is a [`WorkerShard`]; a merged run records the shards it came from as
//! [`MergedShards`]. Both travel in [`crate::record::RunResult::shard`] and the result JSON.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::hash::Fnv1a;
use crate::plan::{Plan, TokenCounting};

/// One worker's place: `rank` in `0..world`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Shard {
    pub rank: u32,
    pub world: u32,
}

impl Shard {
    /// A checked shard: `world` at least 1, `rank` below it.
    pub fn new(rank: u32, world: u32) -> Result<Shard, ShardError> {
        if world == 0 {
            return Err(ShardError::Invalid("the world size must be at least 1".into()));
        }
        if rank >= world {
            return Err(ShardError::Invalid(format!(
                "rank {rank} is not below the world size {world}; ranks count from 0 to {}",
                world - 1
            )));
        }
        Ok(Shard { rank, world })
    }

    /// Whether the plan item at `position` (a request, or a whole conversation) is this
    /// shard's: round robin, so every shard's load is spread over the whole run.
    pub fn owns(self, position: usize) -> bool {
        position % self.world as usize == self.rank as usize
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.rank, self.world)
    }
}

/// Why a shard could not be set up.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ShardError {
    #[error("--shard: {0}")]
    Invalid(String),
    #[error(
        "--shard auto found no rank in the environment: set SLURM_PROCID and SLURM_NTASKS (srun does), \
         or JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) with the world size in SERVEBENCH_WORLD or as \
         --shard auto/WORLD; or pass --shard RANK/WORLD"
    )]
    NoEnvironment,
    #[error("--shard auto: {name}={value:?} is not a whole number")]
    BadVariable { name: &'static str, value: String },
    #[error(
        "--max-concurrency {global} cannot be split over {world} workers: each needs at least one slot; \
         raise --max-concurrency to {world} or more, or run fewer workers"
    )]
    ConcurrencyTooLow { global: usize, world: u32 },
}

/// `--shard`: a fixed `RANK/WORLD`, or `auto` (`auto/WORLD`) read from the environment of the
/// engine running the worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardSpec {
    Fixed(Shard),
    Auto { world: Option<u32> },
}

impl FromStr for ShardSpec {
    type Err = ShardError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let whole = |part: &str, what: &str| {
            part.trim().parse::<u32>().map_err(|_| {
                ShardError::Invalid(format!(
                    "{what} {part:?} in {s:?} is not a whole number; write RANK/WORLD (0/4), auto or auto/WORLD"
                ))
            })
        };
        let (first, world) = match s.split_once('/') {
            Some((a, b)) => (a.trim(), Some(whole(b, "the world size")?)),
            None => (s.trim(), None),
        };
        if first.eq_ignore_ascii_case("auto") {
            if let Some(w) = world {
                Shard::new(0, w)?;
            }
            return Ok(ShardSpec::Auto { world });
        }
        let Some(world) = world else {
            return Err(ShardError::Invalid(format!(
                "{s:?} has no world size; write RANK/WORLD (0/4), auto or auto/WORLD"
            )));
        };
        Ok(ShardSpec::Fixed(Shard::new(whole(first, "the rank")?, world)?))
    }
}

impl ShardSpec {
    /// The shard, reading `env` for `auto`: Slurm's `SLURM_PROCID` and `SLURM_NTASKS` (the
    /// world given with `auto/WORLD` wins over `SLURM_NTASKS`), else Kubernetes'
    /// `JOB_COMPLETION_INDEX` with the world from `auto/WORLD` or `SERVEBENCH_WORLD`.
    pub fn resolve(self, env: impl Fn(&str) -> Option<String>) -> Result<Shard, ShardError> {
        let world_flag = match self {
            ShardSpec::Fixed(shard) => return Ok(shard),
            ShardSpec::Auto { world } => world,
        };
        let number = |name: &'static str| -> Result<Option<u32>, ShardError> {
            match env(name) {
                None => Ok(None),
                Some(v) if v.trim().is_empty() => Ok(None),
                Some(v) => v.trim().parse().map(Some).map_err(|_| ShardError::BadVariable { name, value: v }),
            }
        };
        if let Some(rank) = number("SLURM_PROCID")? {
            let world = match world_flag {
                Some(w) => Some(w),
                None => number("SLURM_NTASKS")?,
            };
            let world = world.ok_or(ShardError::NoEnvironment)?;
            return Shard::new(rank, world);
        }
        if let Some(rank) = number("JOB_COMPLETION_INDEX")? {
            let world = match world_flag {
                Some(w) => Some(w),
                None => number("SERVEBENCH_WORLD")?,
            };
            let world = world.ok_or(ShardError::NoEnvironment)?;
            return Shard::new(rank, world);
        }
        Err(ShardError::NoEnvironment)
    }
}

/// A stable hash of everything a plan sends: the API, every request's index, planned time,
/// body, `max_tokens` and prompt count, every conversation's start, system prompt and turns,
/// and how tokens were counted (not which server counted them). Notes are left out (they say
/// how the plan was built, not what it sends). The same seed and bodies give the same hash on every machine.
pub fn plan_hash(plan: &Plan) -> String {
    let mut h = Fnv1a::default();
    h.write_field(format!("{:?}", plan.api).as_bytes());
    h.write(&(plan.requests.len() as u64).to_le_bytes());
    for r in &plan.requests {
        h.write(&r.index.to_le_bytes());
        h.write(&r.at_ns.to_le_bytes());
        h.write_field(&r.body);
        h.write(&r.max_tokens.to_le_bytes());
        h.write(&r.prompt_tokens.to_le_bytes());
    }
    h.write(&(plan.conversations.len() as u64).to_le_bytes());
    for c in &plan.conversations {
        h.write(&c.id.to_le_bytes());
        h.write(&c.at_ns.to_le_bytes());
        h.write_field(c.system.as_deref().unwrap_or("\u{0}none").as_bytes());
        h.write(&(c.turns.len() as u64).to_le_bytes());
        for t in &c.turns {
            h.write_field(t.user.as_bytes());
            h.write(&t.max_tokens.to_le_bytes());
        }
    }
    let counting = match &plan.token_counting {
        TokenCounting::Tokenizer(name) => format!("tokenizer:{name}"),
        TokenCounting::Estimate => "estimate".into(),
        // Not the server's address: workers that each start their own simulator (`--sim`),
        // or reach one server by different names, align the same prompts, and the bodies
        // and counts above already say what was sent.
        TokenCounting::Server { .. } => "server".into(),
    };
    h.write_field(counting.as_bytes());
    format!("{:016x}", h.finish())
}

/// The share of `plan` that `shard` sends: every request at a position it [`Shard::owns`],
/// and every conversation at such a position, whole. Indices, conversation ids and planned
/// times stay those of the whole plan, so the shards' records merge back into it.
pub fn select(plan: &Plan, shard: Shard) -> Plan {
    Plan {
        api: plan.api,
        requests: plan.requests.iter().enumerate().filter(|(i, _)| shard.owns(*i)).map(|(_, r)| r.clone()).collect(),
        conversations: plan
            .conversations
            .iter()
            .enumerate()
            .filter(|(i, _)| shard.owns(*i))
            .map(|(_, c)| c.clone())
            .collect(),
        token_counting: plan.token_counting.clone(),
        notes: plan.notes.clone(),
    }
}

/// A global `--max-concurrency` split over `world` workers: as even as can be, the first
/// ranks taking one more. The parts sum to `global`; each is at least 1.
pub fn split_concurrency(global: usize, world: u32) -> Result<Vec<usize>, ShardError> {
    let w = world as usize;
    if w == 0 || global < w {
        return Err(ShardError::ConcurrencyTooLow { global, world });
    }
    Ok((0..w).map(|rank| global / w + usize::from(rank < global % w)).collect())
}

/// A worker's clock against rank 0's: `rank0 = local + offset_ns`, from the round-trip sample
/// with the least round-trip time (its error is at most half that time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockOffset {
    pub offset_ns: i64,
    pub rtt_ns: u64,
    pub samples: u32,
}

/// What a worker records about its shard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerShard {
    pub rank: u32,
    pub world: u32,
    /// [`plan_hash`] of the whole plan.
    pub plan_hash: String,
    /// Requests (turns) in the whole plan.
    pub plan_requests: usize,
    /// The global `--max-concurrency`, and each rank's part of it (empty when uncapped).
    pub max_concurrency: Option<usize>,
    pub concurrency_split: Vec<usize>,
    /// The agreed start, ns since the Unix epoch on rank 0's clock (`--start-at`, or the
    /// coordinator's), when there was one.
    pub start_unix_ns: Option<i64>,
    /// This worker's clock against rank 0's, when measured (`--coordinator`).
    pub clock: Option<ClockOffset>,
    /// When this worker's timed run began, ns since the Unix epoch on its own clock.
    pub t0_unix_ns: i64,
}

impl WorkerShard {
    pub fn shard(&self) -> Shard {
        Shard { rank: self.rank, world: self.world }
    }

    /// When the timed run began on rank 0's clock.
    pub fn t0_on_rank0_ns(&self) -> i64 {
        self.t0_unix_ns.saturating_add(self.clock.map_or(0, |c| c.offset_ns))
    }
}

/// One worker's figures in a merged run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankFigures {
    pub rank: u32,
    pub requests: usize,
    /// How far its times were moved to rank 0's run start (its start was this much later).
    pub rebased_ns: i64,
    pub clock: Option<ClockOffset>,
    pub duration_s: f64,
    /// Its dispatch lag (client health), ms, when measured.
    pub dispatch_lag_p99_ms: Option<f64>,
    pub dispatch_lag_max_ms: Option<f64>,
    /// Its own client-health verdict, as its result file recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<crate::metrics::Verdict>,
}

/// What a merged run came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergedShards {
    pub world: u32,
    pub plan_hash: String,
    pub max_concurrency: Option<usize>,
    pub concurrency_split: Vec<usize>,
    pub ranks: Vec<RankFigures>,
    /// Ranks left out (`--partial`); empty for a complete merge.
    pub missing: Vec<u32>,
}

impl MergedShards {
    pub fn partial(&self) -> bool {
        !self.missing.is_empty()
    }
}

/// A run's place among shards.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Sharding {
    /// One worker's share of a sharded run.
    Worker(WorkerShard),
    /// The merge of a sharded run's workers.
    Merged(MergedShards),
}

#[cfg(test)]
mod tests;
