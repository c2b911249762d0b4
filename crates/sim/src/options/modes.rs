//! The options that pick one of several behaviours: what a request without `ignore_eos` does,
//! the warm-up before a run, the measuring client, which steps run in CUDA graphs, and how a
//! pooling model scores a rerank.

use serde::Serialize;

/// What a request without `ignore_eos` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EosModel {
    /// Runs to `max_tokens` anyway (datasets already set `max_tokens` to a natural length).
    None,
    /// Stops at a length drawn uniformly from 1..=max_tokens (seeded).
    Uniform,
}

/// Whether `predict` sends the bench's warm-up request before the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Warmup {
    /// Only when the run config has a ready check or warm-ups (`vllm bench serve` from 0.13 on).
    Auto,
    /// The default: the run config's warm-ups, and at least one copy of request 0 first, as
    /// `vllm bench serve` up to 0.12 sends (its initial test run, whose prefix stays cached). The
    /// published reports the presets are checked on were taken that way: a 1,024-token prompt's
    /// first token in 41 ms on four DGX Sparks is only possible with its prefix cached.
    On,
    Off,
}

/// Which benchmark client `predict` stands in for: how fast it puts requests on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BenchClient {
    /// servebench's: every request is on the wire at its scheduled time.
    Servebench,
    /// `vllm bench serve`'s Python client ([`crate::predict::dispatch`]).
    Vllm,
}

impl BenchClient {
    pub(crate) fn is_servebench(&self) -> bool {
        *self == BenchClient::Servebench
    }
}

/// What a pooling deployment's model is (vLLM's `--convert`), as far as its load tells: how it
/// scores a rerank's documents against the query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Convert {
    /// A sequence classifier (a cross-encoder): one sequence a document, the query, a separator
    /// and the document.
    Classify,
    /// An embedding model: the query embedded once and each document alone, scored by cosine
    /// similarity (vLLM's `_embedding_score`); its usage still counts the query, a padding token
    /// and the document for each document.
    Embed,
}

impl Convert {
    /// `classify` or `embed`; `auto` is `None` (the model's name decides).
    pub fn parse(v: &str) -> Result<Option<Self>, &'static str> {
        match v.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(None),
            "classify" => Ok(Some(Self::Classify)),
            "embed" => Ok(Some(Self::Embed)),
            _ => Err("expected auto, classify or embed"),
        }
    }

    /// vLLM's `auto` as far as a name tells: a checkpoint named a reranker or a cross-encoder
    /// is a sequence classifier (bge-reranker, Qwen3-Reranker served as one, ms-marco
    /// cross-encoders); any other model pools its embeddings, as a generative architecture run
    /// for pooling does.
    pub fn auto(model_id: &str) -> Self {
        let id = model_id.to_ascii_lowercase();
        if id.contains("rerank") || id.contains("cross-encoder") { Self::Classify } else { Self::Embed }
    }
}

/// How vLLM runs a step's kernels (`compilation_config.cudagraph_mode`), as far as the simulator
/// prices it: where a step runs in one CUDA graph the host launches it once, where it runs
/// eagerly the host launches every kernel (the preset's `eager_layer_us` a layer). A mixed step
/// of vLLM's default runs in graph pieces around its attention, priced as one graph: its prefill
/// keeps the GPU busy for longer than the host takes to launch the pieces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CudaGraphMode {
    /// vLLM's default from 0.11 (pull request 25444): decode steps in one graph, the others in
    /// graph pieces.
    FullAndPiecewise,
    /// Every step up to the captured sizes in one graph.
    Full,
    /// Decode steps in one graph; a step with a prefill runs eagerly.
    FullDecodeOnly,
    /// No graphs: every step eager (`--enforce-eager`).
    None,
}

/// Why the simulator refuses `cudagraph-mode=piecewise` rather than pricing it.
const PIECEWISE_NOT_MODELLED: &str = "piecewise CUDA graphs (vLLM's default before 0.11: each layer's attention launched \
     by the host between graph pieces) are not modelled: what they cost is the host's, and the public measurements \
     differ threefold on it (CALIBRATION.md, \"CUDA graph modes\"); leave it out, or give full-and-piecewise for \
     the fastest the deployment could be";

impl CudaGraphMode {
    /// The mode a name gives (`FULL_AND_PIECEWISE`, `full-decode-only`, ...), or why not.
    pub fn parse(name: &str) -> Result<Self, &'static str> {
        match name.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "full_and_piecewise" => Ok(Self::FullAndPiecewise),
            "full" => Ok(Self::Full),
            "full_decode_only" => Ok(Self::FullDecodeOnly),
            "none" => Ok(Self::None),
            "piecewise" => Err(PIECEWISE_NOT_MODELLED),
            _ => Err("expected full-and-piecewise, full, full-decode-only or none"),
        }
    }
}
