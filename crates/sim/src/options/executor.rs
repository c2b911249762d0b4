//! Which executor runs an engine's workers (`--distributed-executor-backend`), and why a
//! deployment schedules synchronously where nobody chose so.
//!
//! vLLM picks the executor itself: multiprocessing (`mp`) when the engine's GPUs are on one
//! machine, Ray when it needs more GPUs than one machine has. Ray's executor has no async
//! scheduling (vLLM warns and turns it off, through 0.17 at least: pull request 29012, which
//! would have added it, was closed unmerged), so the executor decides whether the host's work
//! a step hides behind the GPU's. An engine can span machines without Ray too: vLLM's
//! multiprocessing executor takes `--nnodes` (pull request 23691), and keeps async scheduling.

use serde::Serialize;

use super::{ASYNC_BY_DEFAULT_SINCE, ServingOptions};
use crate::error::SimError;
use crate::hardware::HardwareSpec;

/// vLLM's executor of an engine's GPU workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Executor {
    /// Python multiprocessing: vLLM's choice within one machine, and across machines with
    /// `--nnodes`.
    Mp,
    /// Ray: vLLM's choice when an engine needs more GPUs than one machine has.
    Ray,
    /// One process driving one GPU.
    Uni,
    /// Workers the caller launched (`torchrun`).
    ExternalLauncher,
}

impl Executor {
    /// The executor a name gives (`mp`, `ray`, `uni`, `external_launcher` or
    /// `external-launcher`), any case.
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "mp" => Some(Self::Mp),
            "ray" => Some(Self::Ray),
            "uni" => Some(Self::Uni),
            "external_launcher" => Some(Self::ExternalLauncher),
            _ => None,
        }
    }

    /// The executor of deployment `o` on `hw`: the one `given`; else multiprocessing where the
    /// machines were given as `nnodes` (vLLM's multi-node multiprocessing) or the engine's
    /// `tp × pp` GPUs fit one machine, Ray where they do not. Refused: `uni` for more than one
    /// GPU an engine, and `nnodes` with Ray (which places the workers itself).
    pub fn resolve(given: Option<Self>, nnodes: bool, o: &ServingOptions, hw: &HardwareSpec) -> Result<Self, SimError> {
        let engine_gpus = o.tp.saturating_mul(o.pp);
        match given {
            Some(Self::Uni) if engine_gpus > 1 => Err(SimError::Conflict(format!(
                "distributed-executor-backend=uni drives one GPU, but {} needs {engine_gpus} an engine; give mp or \
                 ray, or leave it out",
                o.parallel_text()
            ))),
            Some(Self::Ray) if nnodes => Err(SimError::Conflict(
                "nnodes is the multiprocessing executor's machine count; with distributed-executor-backend=ray give \
                 nodes (Ray places the workers), or use mp"
                    .into(),
            )),
            Some(e) => Ok(e),
            None if !nnodes && engine_gpus > hw.gpus_per_node.max(1) => Ok(Self::Ray),
            None => Ok(Self::Mp),
        }
    }

    /// Whether vLLM can schedule asynchronously on this executor: on all but Ray's.
    pub fn schedules_async(self) -> bool {
        self != Self::Ray
    }
}

/// Why a deployment runs without async scheduling though nobody chose so: vLLM turns it off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncBecause {
    /// One engine spans machines: vLLM runs it on its Ray executor, which has none.
    RayExecutor,
    /// Ray's executor was chosen (`distributed-executor-backend=ray`), and it has none.
    RayChosen,
    /// Pipeline stages: vLLM has no async scheduling with them.
    PipelineParallel,
    /// The release served is older than 0.14, whose async scheduling was off unless asked.
    Release,
    /// Drafts matched on the host (`ngram`): vLLM schedules asynchronously only with drafters
    /// that run on the GPU (EAGLE, MTP, a draft model).
    HostDrafts,
}

impl SyncBecause {
    /// Why deployment `o` runs synchronously where async scheduling was not chosen either way,
    /// `None` where vLLM's default (on) stands: Ray's executor has none (`chose_executor`: it
    /// was given rather than picked for an engine that spans machines), pipeline parallelism
    /// has none either (0.13: "not yet supported with pipeline_parallel_size > 1"), a release
    /// before 0.14 had it off by default, and drafts matched on the host have none (0.17:
    /// "only supported with EAGLE/MTP/Draft Model kind of speculative decoding").
    pub fn of(o: &ServingOptions, chose_executor: bool) -> Option<Self> {
        if !o.distributed_executor_backend.schedules_async() {
            Some(if chose_executor { Self::RayChosen } else { Self::RayExecutor })
        } else if o.pp > 1 {
            Some(Self::PipelineParallel)
        } else if o.vllm_release.is_some_and(|r| r < ASYNC_BY_DEFAULT_SINCE) {
            Some(Self::Release)
        } else if o.speculative.as_ref().is_some_and(|s| s.method.drafts_on_host()) {
            Some(Self::HostDrafts)
        } else {
            None
        }
    }
}
