//! Serving options as vLLM names them (`tp`, `gpu-memory-utilization`, `max-num-seqs`, ...),
//! parsed from `key=value` pairs, defaulted by vLLM's rules and checked against the model and the
//! hardware. Keys naming a [`StackProfile`] constant (`t0-ms`, `eta-bw`, ...) override it.
//!
//! A deployment uses `tp × pp × dp` GPUs; when `nodes` is not given it is derived from the
//! hardware's GPUs per node, as Ray places vLLM's workers. A layout stated in machines
//! (`tp-nodes=4`: tensor parallel over every GPU of four machines, as reports say "4 nodes
//! (tp)") becomes sizes here, where the GPUs per node are known.

use serde::Serialize;

use crate::cost::quick_reduce::QuickReduce;
use crate::error::SimError;
use crate::hardware::{HardwareSpec, Link};
use crate::model::ModelShape;
use crate::precision::{KvDtype, Mxfp4Backend, Precision};
use crate::profile::{PROFILE_OPTION_KEYS, StackProfile};

/// The first vLLM release with async scheduling on by default (pull request 27614, January
/// 2026); older ones ran without it unless `--async-scheduling` was given.
pub const ASYNC_BY_DEFAULT_SINCE: (u32, u32) = (0, 14);

/// The first vLLM release that starts one API server a data-parallel engine unless told (pull
/// request 32525, merged the week of 2026-01-23, after 0.14's branch); older ones start one.
pub const API_SERVERS_PER_DP_SINCE: (u32, u32) = (0, 15);

/// The first vLLM release that sets its CUDA graph estimate aside from the KV cache by default
/// (`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`, pull request 30515); the plan does not model the
/// estimate (`cudagraph-memory-gib` gives it).
pub const GRAPH_ESTIMATE_SINCE: (u32, u32) = (0, 21);

/// The most GPUs one deployment may use (`tp × pp × dp`).
pub const MAX_GPUS: u32 = 16_384;

/// Resolved serving options: every value set, by the user or by vLLM's defaults.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServingOptions {
    pub tp: u32,
    pub pp: u32,
    /// Data-parallel engines (`--data-parallel-size`), each with `tp × pp` GPUs.
    pub dp: u32,
    /// `--enable-expert-parallel`: routed experts are spread over [`Self::expert_shards`] GPUs
    /// instead of each being split by tensor parallelism.
    pub expert_parallel: bool,
    /// How the steps' kernels are launched: in CUDA graphs (vLLM's default), or eagerly
    /// (`--enforce-eager`, which wins over any mode given).
    pub cudagraph_mode: CudaGraphMode,
    /// The batch sizes CUDA graphs are captured at, given or by vLLM's rule.
    pub cudagraph_sizes: CudaGraphSizes,
    /// `--async-scheduling` (vLLM's default where nothing rules it out): the host schedules
    /// and prepares step k + 1 while the GPU runs step k, so its work shows only where it
    /// outlasts the GPU's (without it every step waits for it), and a request that reaches the
    /// scheduler after step k began joins step k + 2 (the engine's planning).
    pub async_scheduling: bool,
    /// Why async scheduling was left off when it was not chosen either way (`None`: it was
    /// chosen, or it is on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync_because: Option<SyncBecause>,
    /// The executor of the engine's workers (`--distributed-executor-backend`): given, or as
    /// vLLM picks it ([`Executor::resolve`]).
    pub distributed_executor_backend: Executor,
    pub nodes: u32,
    /// `nodes` was not given and was derived from the GPUs the deployment needs.
    pub nodes_derived: bool,
    /// The link chosen with `interconnect`, replacing the preset's for the all-reduce.
    pub interconnect: Option<Link>,
    /// API server processes (`--api-server-count`), which share the frontend's work: given, or
    /// one a data-parallel engine, vLLM's default since [`API_SERVERS_PER_DP_SINCE`] (one before).
    pub api_server_count: u32,
    /// ROCm's QuickReduce level (vLLM's `VLLM_ROCM_QUICK_REDUCE_QUANTIZATION`).
    pub quick_reduce: QuickReduce,
    /// vLLM's `pass_config.fuse_allreduce_rms`: FlashInfer's fused all-reduce and RMSNorm.
    pub fuse_allreduce_rms: bool,
    /// The language model alone (`--language-model-only`, or `--limit-mm-per-prompt` 0 for every
    /// modality the model's tower takes): vLLM loads no tower (its Qwen3-VL since pull request
    /// 26000, vLLM 0.11) and profiles no encoder.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub language_model_only: bool,
    /// The images a prompt may carry (`--limit-mm-per-prompt`'s `image`); `None` leaves vLLM's
    /// default (999).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_limit: Option<u32>,
    pub gpu_memory_utilization: f64,
    /// CUDA graph memory set aside from the KV cache, GiB a GPU: what a vLLM from 0.21 on
    /// estimates and logs ("Estimated CUDA graph memory"); not modelled, so 0 unless given.
    #[serde(skip_serializing_if = "crate::memory::is_zero_f64")]
    pub cudagraph_memory_gib: f64,
    pub kv_cache_dtype: KvDtype,
    /// The kernels of an MXFP4 model's experts where they dequantize to BF16.
    pub mxfp4_backend: Mxfp4Backend,
    /// The memory layout those experts take (resolved once: the layout of the kernels asked
    /// for, else of the kernels vLLM runs on the device, which may differ from the ones that
    /// price them: see `HardwareSpec::mxfp4_layout`); `None` where no expert dequantizes MXFP4.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mxfp4_layout: Option<Mxfp4Backend>,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    /// Set explicitly; otherwise (unset, or `auto`) the setup derives it: the model's maximum,
    /// capped by the KV cache.
    pub max_model_len: Option<u32>,
    pub enable_prefix_caching: bool,
    pub block_size: u32,
    pub precision: Option<Precision>,
    pub eos: EosModel,
    pub warmup: Warmup,
    #[serde(skip_serializing_if = "BenchClient::is_servebench")]
    pub bench_client: BenchClient,
    /// How a rerank is scored: as a cross-encoder's pairs or by embeddings (`convert`).
    pub convert: Convert,
    pub seed: u64,
    /// The vLLM release served (major, minor), where given: what changed between releases is
    /// as that release had it (its default of async scheduling, [`ASYNC_BY_DEFAULT_SINCE`]; its
    /// default fused-MoE tiles, `cost::tiles::default_tile_rate`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vllm_release: Option<(u32, u32)>,
    /// Speculative decoding (`--speculative-config`), where given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculative: Option<SpecDecode>,
}

const BLOCK_SIZES: [u32; 6] = [1, 8, 16, 32, 64, 128];

/// An option's name as the options read it: dashes for underscores, without leading dashes, and
/// vLLM's long names shortened (`tensor-parallel-size` is `tp`).
pub fn canonical_key(key: &str) -> String {
    let k = key.trim().trim_start_matches('-').to_ascii_lowercase().replace('_', "-");
    match k.as_str() {
        "tensor-parallel-size" => "tp".into(),
        "pipeline-parallel-size" => "pp".into(),
        "data-parallel-size" => "dp".into(),
        "ep" | "expert-parallel" => "enable-expert-parallel".into(),
        "quantization" => "precision".into(),
        "cuda-graph-mode" => "cudagraph-mode".into(),
        "cuda-graph-sizes" => "cudagraph-capture-sizes".into(),
        _ => k,
    }
}

/// Whether one value of option `key` (as [`canonical_key`] names it) may itself hold commas: a
/// list of sizes, rates or modalities, or a JSON object. A sweep reads the other options'
/// comma lists as several values to sweep over (`tp=1,2,8`); these it sweeps by repeating the key.
pub fn value_holds_commas(key: &str) -> bool {
    matches!(
        canonical_key(key).as_str(),
        "cudagraph-capture-sizes" | "speculative-config" | "spec-acceptance" | "limit-mm-per-prompt"
    )
}

fn known_keys() -> String {
    SERVING_OPTION_KEYS.iter().map(|(k, _)| *k).chain(PROFILE_OPTION_KEYS).collect::<Vec<_>>().join(", ")
}

impl ServingOptions {
    /// Parses `key=value` pairs for `model` on `hw`, applying stack keys to `stack`. `name` is
    /// the model as it was asked for, which `convert`'s `auto` goes by: a checkpoint may take
    /// the shapes of a preset of another name (`Qwen/Qwen3-Reranker-0.6B` is Qwen3-0.6B's
    /// shapes, and scores as a reranker).
    pub fn parse(
        pairs: &[(String, String)],
        model: &ModelShape,
        name: &str,
        hw: &HardwareSpec,
        stack: &mut StackProfile,
    ) -> Result<Self, SimError> {
        let large = hw.has_large_batch_defaults();
        let mut o = ServingOptions {
            tp: 1,
            pp: 1,
            dp: 1,
            expert_parallel: false,
            cudagraph_mode: CudaGraphMode::FullAndPiecewise,
            cudagraph_sizes: CudaGraphSizes::Default { largest: 0 },
            async_scheduling: true,
            sync_because: None,
            distributed_executor_backend: Executor::Mp,
            nodes: 1,
            nodes_derived: false,
            interconnect: None,
            api_server_count: 1,
            quick_reduce: QuickReduce::None,
            fuse_allreduce_rms: false,
            language_model_only: false,
            image_limit: None,
            gpu_memory_utilization: 0.9,
            cudagraph_memory_gib: 0.0,
            kv_cache_dtype: KvDtype::Auto,
            mxfp4_backend: Mxfp4Backend::Marlin,
            mxfp4_layout: None,
            max_num_seqs: if large { 1024 } else { 256 },
            max_num_batched_tokens: if large { 8192 } else { 2048 },
            max_model_len: None,
            // vLLM caches no prefix of a model with linear-attention layers unless asked: their
            // state is not kept at block boundaries by default.
            enable_prefix_caching: model.linear.is_none(),
            block_size: 16,
            precision: None,
            eos: EosModel::None,
            warmup: Warmup::On,
            bench_client: BenchClient::Servebench,
            convert: Convert::auto(name),
            seed: 0,
            vllm_release: None,
            speculative: None,
        };
        let mut nodes = None;
        let mut executor = None;
        let mut enforce_eager = false;
        let (mut graph_sizes, mut graph_largest) = (None, None);
        let mut layout: Option<(&str, u32)> = None;
        let (mut spec_config, mut spec_tokens, mut spec_acceptance) = (None, None, None);
        let mut mm_limits: Vec<(String, u32)> = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        for (raw_key, value) in pairs {
            let key = canonical_key(raw_key);
            if seen.contains(&key) {
                return Err(SimError::Conflict(format!("{key} is given twice; keep one")));
            }
            seen.push(key.clone());
            let bad = |expected: &str| SimError::BadOption {
                key: key.clone(),
                value: value.clone(),
                expected: if value.contains(',') && !value_holds_commas(&key) {
                    format!("{expected}, one value (`servebench sweep --sim-option {key}=A,B` sweeps a list)")
                } else {
                    expected.to_string()
                },
            };
            let v = value.trim();
            match key.as_str() {
                "tp" => o.tp = positive(v).ok_or_else(|| bad(WHOLE))?,
                "pp" => o.pp = positive(v).ok_or_else(|| bad(WHOLE))?,
                "dp" => o.dp = positive(v).ok_or_else(|| bad(WHOLE))?,
                "nodes" | "nnodes" => {
                    if let Some(other) = seen.iter().find(|k| *k != &key && ["nodes", "nnodes"].contains(&k.as_str())) {
                        return Err(SimError::Conflict(format!("{other} and {key} both give the machines; keep one")));
                    }
                    nodes = Some(positive(v).ok_or_else(|| bad(WHOLE))?);
                }
                "distributed-executor-backend" => {
                    executor =
                        Some(Executor::parse(v).ok_or_else(|| bad("expected mp, ray, uni or external_launcher"))?);
                }
                "tp-nodes" | "pp-nodes" => {
                    if let Some((other, _)) = layout {
                        return Err(SimError::Conflict(format!("{other} and {key} both give the layout; keep one")));
                    }
                    let machines = positive(v).ok_or_else(|| bad(WHOLE))?;
                    layout = Some((if key == "tp-nodes" { "tp-nodes" } else { "pp-nodes" }, machines));
                }
                "enable-expert-parallel" => {
                    o.expert_parallel = boolean(v).ok_or_else(|| bad("expected true or false"))?;
                }
                "no-enable-expert-parallel" => {
                    o.expert_parallel = !boolean(v).ok_or_else(|| bad("expected true or false"))?;
                }
                "enforce-eager" => enforce_eager = boolean(v).ok_or_else(|| bad("expected true or false"))?,
                "cudagraph-mode" => o.cudagraph_mode = CudaGraphMode::parse(v).map_err(bad)?,
                "cudagraph-capture-sizes" => {
                    let sizes = graphs::parse_sizes(v).ok_or_else(|| bad("expected whole numbers >= 1, as 1,2,4,8"))?;
                    // vLLM's `--cuda-graph-sizes N` with one number gave the largest of its list.
                    match sizes.as_slice() {
                        [largest] if raw_key.to_ascii_lowercase().replace('_', "-").contains("cuda-graph-sizes") => {
                            graph_largest = graph_largest.or(Some(*largest));
                        }
                        _ => graph_sizes = Some(sizes),
                    }
                }
                "max-cudagraph-capture-size" => {
                    graph_largest = Some(positive(v).ok_or_else(|| bad(WHOLE))?);
                }
                "async-scheduling" => o.async_scheduling = boolean(v).ok_or_else(|| bad("expected true or false"))?,
                "no-async-scheduling" => {
                    o.async_scheduling = !boolean(v).ok_or_else(|| bad("expected true or false"))?;
                }
                "max-num-seqs" => {
                    o.max_num_seqs = positive(v).ok_or_else(|| bad(WHOLE))?;
                }
                "api-server-count" => {
                    o.api_server_count = positive(v).ok_or_else(|| bad(WHOLE))?;
                }
                "max-num-batched-tokens" => {
                    o.max_num_batched_tokens = positive(v).ok_or_else(|| bad(WHOLE))?;
                }
                "max-model-len" => {
                    o.max_model_len = context_length(v).ok_or_else(|| {
                        bad("expected a whole number of tokens from 1 to 4294967295 (32768, or 32k for 32,000 and 32K for 32,768, as vLLM \
                             reads them), or auto (-1) for the most the KV cache holds")
                    })?;
                }
                "block-size" => {
                    o.block_size = positive(v)
                        .filter(|b| BLOCK_SIZES.contains(b))
                        .ok_or_else(|| bad("expected one of 1, 8, 16, 32, 64, 128"))?;
                }
                "cudagraph-memory-gib" => {
                    o.cudagraph_memory_gib = v
                        .parse::<f64>()
                        .ok()
                        .filter(|g| g.is_finite() && *g >= 0.0)
                        .ok_or_else(|| bad("expected GiB, 0 or more"))?;
                }
                "gpu-memory-utilization" => {
                    o.gpu_memory_utilization = v
                        .parse::<f64>()
                        .ok()
                        .filter(|u| *u > 0.0 && *u <= 1.0)
                        .ok_or_else(|| bad("expected a fraction in (0, 1]"))?;
                }
                "kv-cache-dtype" => {
                    o.kv_cache_dtype = KvDtype::parse(v).ok_or_else(|| bad("expected auto or fp8"))?;
                }
                "mxfp4-backend" => {
                    o.mxfp4_backend = Mxfp4Backend::parse(v).ok_or_else(|| bad("expected marlin or triton"))?;
                }
                "enable-prefix-caching" => {
                    o.enable_prefix_caching = boolean(v).ok_or_else(|| bad("expected true or false"))?;
                }
                "no-enable-prefix-caching" => {
                    o.enable_prefix_caching = !boolean(v).ok_or_else(|| bad("expected true or false"))?;
                }
                "quick-reduce" => {
                    o.quick_reduce =
                        QuickReduce::parse(v).ok_or_else(|| bad("expected none, fp, int8, int6 or int4"))?;
                }
                "fuse-allreduce-rms" => {
                    o.fuse_allreduce_rms = boolean(v).ok_or_else(|| bad("expected true or false"))?;
                }
                "language-model-only" => {
                    o.language_model_only = boolean(v).ok_or_else(|| bad("expected true or false"))?;
                }
                "limit-mm-per-prompt" => {
                    mm_limits = servebench_core::vllm::mm_limits(v)
                        .ok_or_else(|| bad("expected a count for each modality, as image=0,video=0"))?;
                }
                "interconnect" => {
                    o.interconnect =
                        Some(Link::named(v).ok_or_else(|| bad(&format!("expected one of {}", Link::known_names())))?);
                }
                "precision" => {
                    let names: Vec<&str> = Precision::ALL.iter().map(|(_, n)| *n).collect();
                    o.precision =
                        Some(Precision::parse(v).ok_or_else(|| bad(&format!("expected one of {}", names.join(", "))))?);
                }
                "eos" => {
                    o.eos = match v.to_ascii_lowercase().as_str() {
                        "none" | "never" | "off" => EosModel::None,
                        "uniform" => EosModel::Uniform,
                        _ => return Err(bad("expected none or uniform")),
                    };
                }
                "warmup" => {
                    o.warmup = match boolean(v) {
                        Some(true) => Warmup::On,
                        Some(false) => Warmup::Off,
                        None if v.eq_ignore_ascii_case("auto") => Warmup::Auto,
                        None => return Err(bad("expected auto, on or off")),
                    };
                }
                "bench-client" => {
                    o.bench_client = match v.to_ascii_lowercase().as_str() {
                        "servebench" => BenchClient::Servebench,
                        "vllm" => BenchClient::Vllm,
                        _ => return Err(bad("expected servebench or vllm")),
                    };
                }
                "convert" => o.convert = Convert::parse(v).map_err(bad)?.unwrap_or_else(|| Convert::auto(name)),
                "seed" => o.seed = v.parse().map_err(|_| bad("expected a whole number"))?,
                "speculative-config" => spec_config = Some(spec::parse_config(v).map_err(|e| bad(&e))?),
                "num-speculative-tokens" => {
                    spec_tokens =
                        Some(positive(v).filter(|k| *k <= spec::MAX_SPEC_TOKENS).ok_or_else(|| {
                            bad(&format!("expected a whole number from 1 to {}", spec::MAX_SPEC_TOKENS))
                        })?);
                }
                "spec-acceptance" => spec_acceptance = Some(spec::parse_acceptance(v).map_err(|e| bad(&e))?),
                "vllm-release" => {
                    o.vllm_release =
                        Some(vllm_release(v).ok_or_else(|| bad("expected a release such as 0.17 or v0.17.1"))?);
                }
                _ => match stack.set_option(&key, v) {
                    Ok(true) => {}
                    Ok(false) => {
                        return Err(SimError::UnknownOption { key: raw_key.trim().to_string(), known: known_keys() });
                    }
                    Err(e) => return Err(bad(&e)),
                },
            }
        }
        if enforce_eager {
            o.cudagraph_mode = CudaGraphMode::None;
        }
        let none_allowed = |m: &String| mm_limits.iter().any(|(n, count)| n == m && *count == 0);
        o.language_model_only |= !model.modalities.is_empty() && model.modalities.iter().all(none_allowed);
        o.image_limit = mm_limits.iter().find(|(n, _)| n == "image").map(|(_, count)| *count);
        o.speculative = spec::resolve(spec_config, spec_tokens, spec_acceptance).map_err(SimError::Conflict)?;
        // vLLM starts one API server a data-parallel engine unless told (`serve`'s internal
        // load balancing), since 0.15; a release named older starts one.
        if !seen.iter().any(|k| k == "api-server-count") && o.vllm_release.is_none_or(|r| r >= API_SERVERS_PER_DP_SINCE)
        {
            o.api_server_count = o.dp;
        }
        o.cudagraph_sizes = CudaGraphSizes::resolve(
            graph_sizes.as_deref(),
            graph_largest,
            o.max_num_seqs,
            o.max_num_batched_tokens,
            stack.graph_max_tokens,
            o.decode_query_len(),
        )
        .map_err(|e| SimError::Conflict(format!("cudagraph-capture-sizes: {e}")))?;
        if let Some((key, machines)) = layout {
            o.apply_layout(key, machines, hw, &seen, nodes)?;
            nodes = Some(machines);
        }
        match nodes {
            Some(n) => o.nodes = n,
            None => {
                o.nodes = o.gpus().div_ceil(hw.gpus_per_node.max(1)).max(1);
                o.nodes_derived = true;
            }
        }
        o.check(model, hw)?;
        let nnodes = seen.iter().any(|k| k == "nnodes");
        o.distributed_executor_backend = Executor::resolve(executor, nnodes, &o, hw)?;
        // Unless chosen, async scheduling is off where vLLM turns it off (`SyncBecause::of`).
        if !seen.iter().any(|k| k == "async-scheduling" || k == "no-async-scheduling") {
            o.sync_because = SyncBecause::of(&o, executor.is_some());
            if o.sync_because.is_some() {
                o.async_scheduling = false;
            }
        } else if o.async_scheduling && o.speculative.as_ref().is_some_and(|s| s.method.drafts_on_host()) {
            return Err(SimError::Conflict(
                "async-scheduling=true with ngram drafts: vLLM schedules asynchronously only with drafters on \
                 the GPU (eagle, eagle3, mtp, draft_model, ngram_gpu) and refuses to start; drop async-scheduling"
                    .into(),
            ));
        }
        // Unless chosen, MXFP4 experts that dequantize run the kernels of the device's stack.
        // Their memory layout is that of the kernels asked for, or else of the device's own.
        let precision = o.precision.unwrap_or(model.precision);
        if precision.dequantizes_mxfp4_experts(model.moe.is_some(), &hw.peak_tflops) {
            if seen.iter().any(|k| k == "mxfp4-backend") {
                o.mxfp4_layout = Some(o.mxfp4_backend);
            } else {
                o.mxfp4_backend = hw.mxfp4_backend;
                o.mxfp4_layout = Some(hw.mxfp4_layout);
            }
        }
        Ok(o)
    }

    /// Sets `tp` and `pp` from a layout over `machines` whole machines of `hw` (`tp-nodes`:
    /// one tensor-parallel group over all their GPUs; `pp-nodes`: one pipeline stage a machine,
    /// tensor parallel within it). Sizes or a machine count given as well must agree.
    fn apply_layout(
        &mut self,
        key: &str,
        machines: u32,
        hw: &HardwareSpec,
        given: &[String],
        nodes: Option<u32>,
    ) -> Result<(), SimError> {
        let per_node = hw.gpus_per_node.max(1);
        let (tp, pp) = if key == "tp-nodes" { (machines.saturating_mul(per_node), 1) } else { (per_node, machines) };
        let clash = |what: &str, was: u32, now: u32| {
            Err(SimError::Conflict(format!(
                "{key}={machines} on {} ({per_node} GPU(s) a node) means {what}={now}, but {what}={was} is given; \
                 keep one",
                hw.name
            )))
        };
        if given.iter().any(|k| k == "tp") && self.tp != tp {
            return clash("tp", self.tp, tp);
        }
        if given.iter().any(|k| k == "pp") && self.pp != pp {
            return clash("pp", self.pp, pp);
        }
        if let Some(n) = nodes.filter(|n| *n != machines) {
            return clash("nodes", n, machines);
        }
        (self.tp, self.pp) = (tp, pp);
        Ok(())
    }

    /// Tokens a decoding sequence runs a step: one, and its drafts with speculative decoding.
    pub fn decode_query_len(&self) -> u32 {
        1 + self.speculative.as_ref().map_or(0, |s| s.num_speculative_tokens)
    }

    /// GPUs the deployment uses: `tp × pp × dp`.
    pub fn gpus(&self) -> u32 {
        self.tp.saturating_mul(self.pp).saturating_mul(self.dp)
    }

    /// GPUs that share one MoE layer's routed experts: all `tp × dp` of a data-parallel group,
    /// with expert parallelism or not (vLLM flattens tensor parallelism across the data-parallel
    /// ranks for its MoE layers, `FusedMoEParallelConfig.make`): each holds whole experts with
    /// it, a slice of every expert without.
    pub fn expert_shards(&self) -> u32 {
        self.tp.saturating_mul(self.dp)
    }

    /// The routed experts of a layer, `experts` in all, of which one GPU holds a part: with expert
    /// parallelism its share of whole experts (the busiest GPU taking the rounded-up share),
    /// otherwise every one, sliced.
    pub fn experts_per_gpu(&self, experts: u32) -> u32 {
        if self.expert_parallel { experts.div_ceil(self.expert_shards().max(1)) } else { experts }
    }

    /// The columns of a routed expert's FFN, `width` in all, that one GPU holds: all of them
    /// with expert parallelism (whole experts), a slice over [`Self::expert_shards`] otherwise.
    pub fn expert_width_per_gpu(&self, width: u32) -> u32 {
        if self.expert_parallel { width } else { width / self.expert_shards().max(1) }
    }

    /// The parallel layout in vLLM's words: `tp=8`, plus `pp=`, `dp=` and `ep` when used.
    pub fn parallel_text(&self) -> String {
        let mut s = format!("tp={}", self.tp);
        if self.pp > 1 {
            s.push_str(&format!(" pp={}", self.pp));
        }
        if self.dp > 1 {
            s.push_str(&format!(" dp={}", self.dp));
        }
        if self.expert_parallel {
            s.push_str(" ep");
        }
        s
    }
}

/// What a count option takes: it is held in 32 bits, as vLLM's engine holds it.
const WHOLE: &str = "expected a whole number from 1 to 4294967295";

fn positive(v: &str) -> Option<u32> {
    v.parse::<u32>().ok().filter(|n| *n >= 1)
}

/// `--max-model-len` as vLLM reads it: `auto` or `-1` (the most the KV cache holds: `None`), or
/// a count of tokens, whole or with a suffix
/// ([`servebench_core::vllm::human_readable_int`]: `25.6k` is 25,600, `32K` 32,768).
fn context_length(v: &str) -> Option<Option<u32>> {
    let v = v.trim();
    if v.eq_ignore_ascii_case("auto") || v == "-1" {
        return Some(None);
    }
    let tokens = u32::try_from(servebench_core::vllm::human_readable_int(v)?).ok()?;
    (tokens >= 1).then_some(Some(tokens))
}

fn boolean(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" | "" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

mod check;
mod executor;
mod graphs;
mod keys;
mod links;
mod modes;
mod release;
mod spec;
pub use executor::{Executor, SyncBecause};
pub use graphs::CudaGraphSizes;
pub use keys::SERVING_OPTION_KEYS;
pub use modes::{BenchClient, Convert, CudaGraphMode, EosModel, Warmup};
pub use release::vllm_release;
pub use spec::{MAX_SPEC_TOKENS, SpecDecode, SpecMethod};
#[cfg(test)]
mod layout_tests;
#[cfg(test)]
mod tests;
