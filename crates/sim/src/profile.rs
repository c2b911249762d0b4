//! The serving-stack constants of the step-time model, in one struct a fitter can vary.
//!
//! A [`StackProfile`] holds every number of the cost model that a datasheet or config.json
//! does not give: how close kernels come to the hardware's peaks, the fixed costs a serving
//! stack adds per step, per layer and per sequence, the delay before a request reaches the
//! scheduler, memory reserves and jitter. Each constant has one physical meaning and a
//! plausible range ([`FitParam::bounds`]); a fit may only move it within that range, and is
//! pulled toward the preset's value by a prior of width [`FitParam::prior_sigma`].
//!
//! Hardware presets carry the values for their device; a fitted profile file (TOML or JSON, any
//! subset of the fields) and `key=value` options override them, in that order.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::SimError;
use crate::precision::{ComputePrecision, PrecisionTable};

mod attention;
mod fit_param;
mod kernels;
mod option_keys;
pub use attention::{AttentionKernels, AttentionRate};
pub use fit_param::FitParam;
pub use kernels::{FP4_MOE_FIXED_US, FP4_MOE_STREAM, Fp4MoeKernel, TritonMoeKernel};
use option_keys::option_field;
pub use option_keys::{PROFILE_OPTION_KEYS, is_option_key};

/// Every constant of the step-time model that is not read from a datasheet or config.json.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackProfile {
    /// What the constants were calibrated on, e.g. `h100-sxm/vllm-0.11`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The band of predictions made with these constants: the held-out errors of the fit that
    /// wrote them (`sim fit`). Unset, predictions take their device's (its preset's
    /// `[uncertainty]`, which describes the preset's own constants).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncertainty: Option<crate::hardware::Uncertainty>,
    /// Fraction of datasheet memory bandwidth that streaming reads (weights, KV cache) reach.
    pub eta_bw: f64,
    /// Fraction of a format's peak that a large dense matrix product reaches (its ceiling).
    pub gemm_eff: PrecisionTable,
    /// The same for grouped expert products of a mixture of experts (per-expert row counts).
    pub moe_eff: PrecisionTable,
    /// Fraction of each unit's rate that attention kernels reach: the BF16 peak on their
    /// query-key FLOPs, the SFUs' on their softmax's exponentials (`attn_exp_exposed` says how
    /// the two add).
    pub attn_eff: f64,
    /// The fixed work of a prefill query in the attention kernels, in keys: each query of a
    /// prefill chunk costs as if it attended this many keys more than it does, in every
    /// attention layer that masks a causal diagonal or a window's edges (the per-tile work of
    /// those kernels, which their masked blocks and short rows do not amortize; not sparse
    /// attention's gathered top-k). Short prompts attend well below the kernels' long-context
    /// rate (`attn_eff`), long ones near it.
    #[serde(default)]
    pub attn_query_keys: f64,
    /// The share of the shorter of the attention kernels' two compute streams (the query-key
    /// FLOPs on the tensor cores, the softmax's exponentials on the special function units)
    /// that they do not hide under the longer: 0 where they overlap the two whole (the slower
    /// binds), 1 where one waits for the other. FlashAttention 3 on Hopper exposes most of its
    /// exponentials: its forward rates at head widths 64 to 256 want 0.73 of them added to the
    /// tensor cores' time, at 0.87 of both units' rates (CALIBRATION.md, "Hopper's attention:
    /// exponentials in series").
    #[serde(default)]
    pub attn_exp_exposed: f64,
    /// The same for models with attention sinks (gpt-oss) where the stack's fast attention
    /// kernels lack them and vLLM falls back to its Triton kernels (every NVIDIA part before
    /// Hopper, consumer Blackwell and GB10), or where the stack serves sinks with Triton's
    /// unified attention (ROCm, whose parts price it at their sustained clock); unset:
    /// `attn_eff`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attn_eff_sinks: Option<f64>,
    /// The same for sparse attention's kernels (FlashMLA's sparse kernels and DeepGEMM's
    /// indexer, DeepSeek-V3.2 and GLM-5), which overlap their few exponentials whole: where
    /// `attn_eff` describes another kernel family (Hopper's FlashAttention 3, its exponentials
    /// priced apart), they keep the rate they were priced at, unmeasured; unset: `attn_eff`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attn_eff_sparse: Option<f64>,
    /// The same for Gated DeltaNet's chunked prefill where the stack runs it as
    /// flash-linear-attention's Triton kernels, which reach about 90 to 100 TFLOP/s of it on
    /// every datacenter GPU whatever its tensor cores; unset: `attn_eff`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear_eff: Option<f64>,
    /// One value head's share of a linear-attention chunk's time in the chunked prefill, µs at
    /// the H100 SXM's clock: a prompt's chunks carry the state from one to the next, so a layer's
    /// prefill lasts at least its longest prompt's chunks one after another, each taking this
    /// times the value heads on the GPU, however few its FLOPs.
    #[serde(default = "linear_chunk_us")]
    pub linear_chunk_us: f64,
    /// Rows at which a matrix product reaches half its ceiling: efficiency is
    /// `ceiling × M / (M + gemm_m_half)` for M rows (tokens, or tokens per expert).
    pub gemm_m_half: f64,
    /// Fixed cost of every step that async scheduling does not hide (sampling, copying inputs
    /// to the GPU, synchronising with it), ms.
    pub t0_ms: f64,
    /// Fixed cost per transformer layer per step with CUDA graphs (the floor of each kernel), µs,
    /// at the H100 SXM's clock: a device whose preset gives its boost clock takes it scaled by
    /// [`crate::hardware::HardwareSpec::latency_scale`].
    pub t_layer_us: f64,
    /// Cost per sequence in the batch (input preparation, detokenisation), µs.
    pub t_seq_us: f64,
    /// Cost per MoE layer per step (routing, top-k, permutation), µs, at the H100 SXM's clock
    /// (scaled as `t_layer_us`).
    pub t_moe_us: f64,
    /// The host's own work per step (scheduling, preparing inputs, turning sampled ids into
    /// outputs), ms. With async scheduling it overlaps the GPU's step and shows only where it is
    /// longer; without, every step waits for it. Zero in profiles written before it existed.
    #[serde(default)]
    pub t_host_ms: f64,
    /// The host's work per sequence in a step (its slot in the batch's inputs, its sampled
    /// token turned into an output), µs: part of the step's host work, overlapped by async
    /// scheduling like the rest. A profile file that does not name it keeps the preset's.
    #[serde(default)]
    pub t_host_seq_us: f64,
    /// The host's work per request it takes from the waiting queue in a step (its state in
    /// the scheduler and the model runner), µs: part of the step's host work, overlapped by
    /// async scheduling like the rest. Zero where not calibrated.
    #[serde(default)]
    pub t_admit_us: f64,
    /// Delay between the client sending a request and the scheduler seeing it (HTTP, request
    /// parsing), ms. It lands in every TTFT.
    pub alpha_api_ms: f64,
    /// Further delay per prompt token before the scheduler sees the request (tokenising), µs:
    /// the API server's one tokenizing thread does it, one prompt after another, beside its
    /// event loop (on the loop for prompts rendered to token ids there, as gpt-oss's chat).
    pub api_us_per_token: f64,
    /// How many prompts of one batched tokenizer call the host tokenizes at once (its cores,
    /// at their efficiency together; vLLM from 0.10 tokenizes up to 32 prompts a call): at
    /// least 1. A profile file that does not name it keeps the preset's.
    #[serde(default = "tokenizer_parallel")]
    pub tokenizer_parallel: f64,
    /// The frontend's own work per request on its event loop (parsing, validation, hand-off to
    /// the engine; rendering a chat template), ms: done for one request at a time, so a burst
    /// of arrivals queues.
    pub api_ms_per_request: f64,
    /// The frontend's work per further input of a pooling request (its engine request, its
    /// output and its vector in the answer), ms: the request's own work is paid once, with its
    /// first input. A profile file that does not name it keeps the preset's.
    #[serde(default = "api_ms_per_input")]
    pub api_ms_per_input: f64,
    /// The frontend's work per streamed token (detokenising, writing the chunk), µs: the same
    /// one process does it after every step, so requests that arrive while it streams the
    /// running requests' tokens wait for it. Zero in profiles written before it existed.
    #[serde(default)]
    pub api_us_per_output_token: f64,
    /// The SMs' integer operations a dequantizing expert kernel (Marlin's) spends per weight:
    /// set, its weights stream no faster than `int32 rate / dequant_ops_per_weight`; unset
    /// (`false` in a preset or profile), at the memory's pace. vLLM's Marlin kernels for MXFP4
    /// experts take the same time on an H100 and an H200 (`scripts/sim/marlin_probe.py`): the
    /// SMs bound them, not the memory.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "ops_or_off")]
    pub dequant_ops_per_weight: Option<f64>,
    /// The fraction of the BF16 tensor rate a dequantizing (Marlin) kernel's `mma.sync` reaches
    /// where the tensor cores bind before its unpacking, for dense and expert products alike:
    /// parts whose integer rate is high beside their tensor rate (A100, RTX 4090, L40S, L4, the
    /// consumer Blackwell parts, the GB10). Written `dequant_mma_moe` before it priced dense
    /// products too; that name is still read.
    #[serde(default = "dequant_mma", alias = "dequant_mma_moe")]
    pub dequant_mma: f64,
    /// Latency of one tensor-parallel all-reduce, µs; unset takes the link's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha_ar_us: Option<f64>,
    /// The network's latency a message step of a collective between nodes, µs (the link's
    /// `step_latency_us`); unset takes the link's. Unlike `alpha_ar_us`, which fixes one group's
    /// whole latency (and decides the all-reduce where both are set), it carries from one node
    /// count to another through the ring's and the tree's step counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ar_step_us: Option<f64>,
    /// The fixed part of a collective over a link with message steps (the link's
    /// `allreduce_latency_us`), µs; unset takes the link's. With `ar_step_us` it splits a
    /// collective's latency into what every collective pays and what each message step adds,
    /// which runs over two or more group sizes tell apart (over one, only their sum shows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ar_fixed_us: Option<f64>,
    /// The rate a collective moves bytes over a link with message steps (the link's
    /// `bandwidth_gbs`), GB/s; unset takes the link's. A network's rate depends on how it is
    /// set up (two Sparks reach 200 Gb/s only where NCCL is given both of the port's PCIe
    /// devices, half of it otherwise). Long prefills, whose all-reduces carry megabytes, show
    /// it; a fit takes it where a run has thousands of prompt tokens in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ar_gbs: Option<f64>,
    /// Host cost of launching one layer's kernels one by one, µs: paid per layer by a step that
    /// runs without CUDA graphs (`enforce-eager`, or beyond the captured sizes); 0 disables it.
    pub eager_layer_us: f64,
    /// Query heads a GPU that vLLM's sparse MLA kernels (FlashMLA's, DeepSeek-V3.2) run at the
    /// least: a rank's heads are padded up to it, 64 on Hopper and 128 on datacenter Blackwell
    /// (`FlashMLASparseImpl`'s prefill padding).
    #[serde(default = "sparse_mla_heads")]
    pub sparse_mla_heads: u32,
    /// The cap on vLLM's own CUDA graph sizes (`options::CudaGraphSizes`): 512, as vLLM's.
    pub graph_max_tokens: u32,
    /// Steps with a context longer than this run without graphs (0: no limit).
    pub graph_max_ctx: u32,
    /// Memory kept outside weights and KV cache for a dense model, GiB per GPU: workspaces and
    /// the peak of vLLM's memory profiling, stated at 1,024 sequences and 8,192 batched tokens
    /// for Qwen3's 151,936-entry vocabulary (`memory::reserve` restates it for a deployment).
    pub activation_reserve_gib: f64,
    /// The same for a mixture-of-experts model, stated for gpt-oss's 201,088-entry vocabulary
    /// (fixed on gpt-oss-120b on one H100, with its experts' memory counted as vLLM's kernels
    /// hold it: CALIBRATION.md).
    pub activation_reserve_moe_gib: f64,
    /// σ of the lognormal factor applied to each step's duration (0: deterministic).
    pub jitter_sigma: f64,
    /// vLLM's Triton kernels for MXFP4 experts (`mxfp4-backend=triton`), as measured on the
    /// GPU by `scripts/sim/kernel_probe.py`; the calibrated default path is Marlin's.
    #[serde(default)]
    pub triton_moe: TritonMoeKernel,
    /// Fixed cost per MoE layer of vLLM's Triton fused-MoE kernels for experts kept in BF16 or
    /// FP8, beyond the floor `t_layer_us` already counts for their two products, µs: measured
    /// on an H200 (`scripts/sim/fused_moe_probe.py`), where at a few tokens the products take
    /// 23 to 40 µs for 38 to 75 MB of weights. Zero in profiles written before it existed.
    #[serde(default)]
    pub fused_moe_us: f64,
    /// The FP4 block-scaled expert kernels of parts with FP4 units (FlashInfer's TRTLLM MoE:
    /// NVFP4 experts as W4A4, MXFP4 ones such as gpt-oss's as W4A8), as timed on a B300.
    #[serde(default)]
    pub fp4_moe: Fp4MoeKernel,
}

/// See [`StackProfile::fused_moe_us`]: the touched weights at the calibrated stream (`eta_bw`)
/// plus 27 µs a layer for the two products fit the probe's 30 timings at 1 to 256 tokens (GLM-4.6,
/// Qwen3-235B-A22B, DeepSeek-R1 shards) at 9.7 % median and 31 % P90 error; 7 µs of the 27 are
/// the floor of two kernels in `t_layer_us`. The time is latency (small grids of long reads),
/// not bandwidth, so it is kept in µs on every device (ROCm's fused-MoE kernels, unmeasured,
/// are assumed alike).
pub const FUSED_MOE_US: f64 = 20.0;

/// Integer operations a weight that hold Marlin's MXFP4 experts to the H100's calibrated
/// stream: 33.5 TOPS / 5.7 x 0.53125 bytes a weight is 3.122 TB/s, just above the 3.116 TB/s
/// that `eta_bw` gives the H100 (so no H100 prediction moves), and the same on an H200,
/// whose Marlin kernels measured no faster than the H100's (2 % at the median, CALIBRATION.md,
/// "Marlin's experts are bound by the SMs"). The kernels alone, on uniformly routed random
/// tokens, stream the padded weights at 2.6 TB/s at most (6.6 operations a weight, 6.0 counted
/// on the checkpoint's own bytes).
pub const DEQUANT_OPS_PER_WEIGHT: f64 = 5.7;

/// The fraction of the BF16 tensor rate dequantizing (Marlin) kernels reach where the tensor
/// cores bind: the expert ceiling's BF16 prior from before the BF16 and FP8 experts' own kernels
/// (vLLM's Triton fused-MoE) were calibrated, kept so that those kernels' low ceilings do not
/// cap Marlin's, which the A100's public reports show running faster; on one DGX Spark it gives
/// upstream vLLM's published prompt rate for gpt-oss-120b within 11 %. Dense products take it
/// too (they took cuBLAS's BF16 ceiling before): checked, not fitted, on the A100's public
/// reports of dense FP8 and AWQ checkpoints (CALIBRATION.md, "Marlin's tensor rate, dense and
/// experts").
pub const DEQUANT_MMA: f64 = 0.5;

/// See [`StackProfile::sparse_mla_heads`]: Hopper's FlashMLA sparse kernels.
const SPARSE_MLA_HEADS: u32 = 64;

/// [`StackProfile::attn_query_keys`] of datacenter Blackwell (the B200, GB200, B300 and
/// GB300 presets): FlashAttention 4's causal forward kernel on a B200 at head width 64
/// (flash-attention pull request 2605: 542 to 1,251 TFLOP/s from 1,024 to 16,384 tokens)
/// follows `rate = ceiling x k / (k + 780)` over a query's mean keys `k` within 3 %; at width
/// 128 the same kernel gives 650 (CALIBRATION.md, "Short prompts attend below the kernels'
/// rate"). The Hopper presets take FlashAttention 3's own (350, fitted with their exposed
/// exponentials); the other parts' kernels were not measured at these lengths and keep 0.
pub const BLACKWELL_ATTN_QUERY_KEYS: f64 = 780.0;

/// See [`StackProfile::linear_chunk_us`]: FlashInfer's Hopper kernel for Gated DeltaNet's
/// chunked prefill, which vLLM runs there, takes 3.0 µs a 64-token chunk of one prompt with 32
/// value heads on an H200 (CALIBRATION.md, "Gated DeltaNet hybrids").
const LINEAR_CHUNK_US: f64 = 3.0 / 32.0;

fn linear_chunk_us() -> f64 {
    LINEAR_CHUNK_US
}

/// Prompts of a batched tokenizer call tokenized at once on a datacenter GPU's host: 16, a
/// prior (not fitted). Such hosts give a GPU 16 to 28 of their threads or more (an 8-GPU
/// server has 100 to 224); a call takes at most 32 prompts, and the tokenizer's threads share
/// the host with the API server's loop. Measured here: two cores tokenize a batch at 1.5 to 2.1
/// times one core's pace.
const TOKENIZER_PARALLEL: f64 = 16.0;

fn tokenizer_parallel() -> f64 {
    TOKENIZER_PARALLEL
}

/// vLLM 0.11.0's API server's CPU time per further input of a `/v1/embeddings` request,
/// measured on this repository's 2-core VM (`scripts/sim/frontend_pooling_probe.sh`: 1.04 ms a
/// request, 0.74 an input, 4.8 µs a prompt token; CALIBRATION.md); nothing fitted.
const API_MS_PER_INPUT: f64 = 0.74;

fn api_ms_per_input() -> f64 {
    API_MS_PER_INPUT
}

fn sparse_mla_heads() -> u32 {
    SPARSE_MLA_HEADS
}

fn dequant_mma() -> f64 {
    DEQUANT_MMA
}

/// The host's work per sequence in a step, µs (set in CALIBRATION.md, "The host's work a step").
pub const HOST_SEQ_US: f64 = 16.0;

/// A number, or `false` for none (TOML has no null).
fn ops_or_off<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OpsOrOff {
        Off(bool),
        Ops(f64),
    }
    match Option::<OpsOrOff>::deserialize(d)? {
        Some(OpsOrOff::Ops(v)) => Ok(Some(v)),
        Some(OpsOrOff::Off(false)) | None => Ok(None),
        Some(OpsOrOff::Off(true)) => {
            Err(serde::de::Error::custom("dequant_ops_per_weight takes a number of operations, or false for no cap"))
        }
    }
}

impl Default for StackProfile {
    /// vLLM V1 with CUDA graphs on an NVIDIA datacenter GPU: the constants calibrated on the
    /// H100 (see `presets/hardware/CALIBRATION.md`); other devices' presets override only what
    /// differs physically. The experts' ceilings are calibrated: weight-only (Marlin) on
    /// InferenceX's gpt-oss-120b rows, BF16 and block-scaled FP8 (vLLM's Triton fused-MoE
    /// kernels) on GPUStack's public Qwen3-235B-A22B reports; the dense ceilings and the FP4
    /// experts' are priors the data could not determine.
    fn default() -> Self {
        Self {
            name: None,
            uncertainty: None,
            eta_bw: 0.93,
            gemm_eff: PrecisionTable { bf16: 0.75, fp8: 0.65, fp4: 0.5, weight_only: 0.5 },
            moe_eff: PrecisionTable { bf16: 0.275, fp8: 0.152, fp4: 0.35, weight_only: 0.196 },
            attn_eff: 0.65,
            attn_query_keys: 0.0,
            attn_exp_exposed: 0.0,
            attn_eff_sinks: None,
            attn_eff_sparse: None,
            linear_eff: None,
            linear_chunk_us: LINEAR_CHUNK_US,
            gemm_m_half: 12.5,
            t0_ms: 0.71,
            t_layer_us: 33.0,
            t_seq_us: 11.2,
            t_moe_us: 19.4,
            t_host_ms: 0.5,
            t_host_seq_us: HOST_SEQ_US,
            t_admit_us: 0.0,
            alpha_api_ms: 4.47,
            api_us_per_token: 3.74,
            api_ms_per_request: 5.62,
            api_ms_per_input: API_MS_PER_INPUT,
            tokenizer_parallel: TOKENIZER_PARALLEL,
            api_us_per_output_token: 38.1,
            dequant_ops_per_weight: Some(DEQUANT_OPS_PER_WEIGHT),
            dequant_mma: DEQUANT_MMA,
            alpha_ar_us: None,
            ar_step_us: None,
            ar_fixed_us: None,
            ar_gbs: None,
            eager_layer_us: 0.0,
            sparse_mla_heads: SPARSE_MLA_HEADS,
            graph_max_tokens: 512,
            graph_max_ctx: 0,
            activation_reserve_gib: 5.5,
            activation_reserve_moe_gib: 4.66,
            jitter_sigma: 0.03,
            triton_moe: TritonMoeKernel::default(),
            fused_moe_us: FUSED_MOE_US,
            fp4_moe: Fp4MoeKernel::default(),
        }
    }
}

impl StackProfile {
    /// The weight-only (unpacking) ceiling of a model's main products: the experts' for a
    /// mixture of experts, else the dense products'.
    pub fn weight_only_ceiling(&self, experts: bool) -> f64 {
        if experts { self.moe_eff.weight_only } else { self.gemm_eff.weight_only }
    }

    /// Whether a model's main dequantizing products are bound by the tensor cores (at
    /// `dequant_mma`) before their unpacking on a device of these peaks.
    pub fn dequantizing_tensor_bound(&self, peaks: &crate::hardware::PeakTflops, experts: bool) -> bool {
        peaks.weight_only_tensor_bound(self.weight_only_ceiling(experts), self.dequant_mma)
    }

    /// Overlays a partial profile (a JSON object with any subset of the fields; nested
    /// per-format tables may be partial too). Unknown fields and out-of-range values are errors.
    pub fn apply_patch(&mut self, patch: &serde_json::Value) -> Result<(), String> {
        let serde_json::Value::Object(_) = patch else {
            return Err("expected a table of constants".into());
        };
        let mut base = serde_json::to_value(&*self).map_err(|e| e.to_string())?;
        let mut patch = patch.clone();
        // A profile written before `dequant_mma` priced dense products names it by its old name.
        if let Some(map) = patch.as_object_mut()
            && let Some(v) = map.remove("dequant_mma_moe")
        {
            map.entry("dequant_mma").or_insert(v);
        }
        merge(&mut base, &patch);
        let next: StackProfile = serde_json::from_value(base).map_err(|e| e.to_string())?;
        next.validate()?;
        *self = next;
        Ok(())
    }

    /// Reads a fitted profile file (`.json`, else TOML) and overlays it.
    pub fn apply_file(&mut self, path: &Path) -> Result<(), SimError> {
        // Parsers' messages may end in a newline (TOML's point at the line): the advice follows
        // on the message's last line.
        let bad = |message: String| SimError::Profile {
            path: path.display().to_string(),
            message: message.trim_end().into(),
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let is_json = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
        let value: serde_json::Value = if is_json {
            serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?
        } else {
            toml::from_str(&text).map_err(|e| bad(e.to_string()))?
        };
        self.apply_patch(&value).map_err(bad)
    }

    /// Sets one field from an option (`t0-ms=3`, `gemm-eff.fp8=0.6`, `jitter=0`).
    /// Returns `Ok(false)` when `key` is not a profile key.
    pub fn set_option(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let Some((field, sub)) = option_field(key) else {
            return Ok(false);
        };
        let number = value
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .ok_or_else(|| format!("expected a number, got {value:?}"))?;
        let name = field.replace('-', "_");
        let table_field = name == "gemm_eff" || name == "moe_eff";
        let v = if name.starts_with("graph_max") {
            if number < 0.0 || number.fract() != 0.0 {
                return Err(format!("expected a whole number, got {value:?}"));
            }
            serde_json::json!(number as u64)
        } else {
            serde_json::json!(number)
        };
        let patch = match (table_field, sub) {
            (true, None) => serde_json::json!({ name: { "bf16": v, "fp8": v, "fp4": v, "weight_only": v } }),
            (true, Some(fmt)) => {
                let fmt = ComputePrecision::parse(fmt)
                    .ok_or_else(|| format!("{field}.{fmt}: the formats are bf16, fp8, fp4 and weight_only"))?;
                serde_json::json!({ name: { fmt.name(): v } })
            }
            (false, None) => serde_json::json!({ name: v }),
            (false, Some(_)) => return Err(format!("{field} has no per-format values")),
        };
        self.apply_patch(&patch)?;
        Ok(true)
    }

    /// Checks that every constant is in a meaningful range.
    pub fn validate(&self) -> Result<(), String> {
        let mut effs = vec![("eta_bw".to_string(), self.eta_bw), ("attn_eff".to_string(), self.attn_eff)];
        effs.extend(self.attn_eff_sinks.map(|v| ("attn_eff_sinks".to_string(), v)));
        effs.extend(self.attn_eff_sparse.map(|v| ("attn_eff_sparse".to_string(), v)));
        effs.extend(self.linear_eff.map(|v| ("linear_eff".to_string(), v)));
        effs.push(("triton_moe.ceiling".to_string(), self.triton_moe.ceiling));
        effs.push(("dequant_mma".to_string(), self.dequant_mma));
        effs.push(("fp4_moe.stream".to_string(), self.fp4_moe.stream));
        for p in ComputePrecision::ALL {
            effs.push((format!("gemm_eff.{}", p.name()), self.gemm_eff.get(p)));
            effs.push((format!("moe_eff.{}", p.name()), self.moe_eff.get(p)));
        }
        for (name, v) in effs {
            if !(v.is_finite() && (1e-3..=1.5).contains(&v)) {
                return Err(format!("{name} is an efficiency and must be in [0.001, 1.5], got {v}"));
            }
        }
        // Counts past any kernel's: a million rows, a thousand operations a weight.
        for (name, v, max) in [
            ("triton_moe.ops_per_weight", self.triton_moe.ops_per_weight, 1e3),
            ("triton_moe.m_half", self.triton_moe.m_half, 1e6),
            ("dequant_ops_per_weight", self.dequant_ops_per_weight.unwrap_or(1.0), 1e3),
            ("gemm_m_half", self.gemm_m_half, 1e6),
        ] {
            if !(v.is_finite() && v > 0.0 && v <= max) {
                return Err(format!("{name} must be positive and at most {max}, got {v}"));
            }
        }
        if !(self.tokenizer_parallel.is_finite() && (1.0..=1e6).contains(&self.tokenizer_parallel)) {
            return Err(format!(
                "tokenizer_parallel must be from 1 to 1000000 prompts at once, got {}",
                self.tokenizer_parallel
            ));
        }
        // A minute a step, a layer, a sequence or a request is past any serving stack; larger
        // values would also overflow the engine's nanosecond clock.
        const MINUTE_MS: f64 = 60_000.0;
        const MINUTE_US: f64 = 60_000_000.0;
        let bounded = [
            ("t0_ms", self.t0_ms, MINUTE_MS, "ms"),
            ("t_layer_us", self.t_layer_us, MINUTE_US, "µs"),
            ("t_seq_us", self.t_seq_us, MINUTE_US, "µs"),
            ("t_moe_us", self.t_moe_us, MINUTE_US, "µs"),
            ("t_host_ms", self.t_host_ms, MINUTE_MS, "ms"),
            ("t_host_seq_us", self.t_host_seq_us, MINUTE_US, "µs"),
            ("t_admit_us", self.t_admit_us, MINUTE_US, "µs"),
            ("alpha_api_ms", self.alpha_api_ms, MINUTE_MS, "ms"),
            ("api_us_per_token", self.api_us_per_token, MINUTE_US, "µs"),
            ("api_ms_per_request", self.api_ms_per_request, MINUTE_MS, "ms"),
            ("api_ms_per_input", self.api_ms_per_input, MINUTE_MS, "ms"),
            ("api_us_per_output_token", self.api_us_per_output_token, MINUTE_US, "µs"),
            ("alpha_ar_us", self.alpha_ar_us.unwrap_or(0.0), MINUTE_US, "µs"),
            ("ar_step_us", self.ar_step_us.unwrap_or(0.0), MINUTE_US, "µs"),
            ("ar_fixed_us", self.ar_fixed_us.unwrap_or(0.0), MINUTE_US, "µs"),
            ("eager_layer_us", self.eager_layer_us, MINUTE_US, "µs"),
            ("linear_chunk_us", self.linear_chunk_us, MINUTE_US, "µs"),
            ("triton_moe.fixed_us", self.triton_moe.fixed_us, MINUTE_US, "µs"),
            ("fused_moe_us", self.fused_moe_us, MINUTE_US, "µs"),
            ("fp4_moe.fixed_us", self.fp4_moe.fixed_us, MINUTE_US, "µs"),
            // A key count past any context a model serves.
            ("attn_query_keys", self.attn_query_keys, 1e8, "keys"),
            // No device holds a petabyte.
            ("activation_reserve_gib", self.activation_reserve_gib, 1e6, "GiB"),
            ("activation_reserve_moe_gib", self.activation_reserve_moe_gib, 1e6, "GiB"),
        ];
        if let Some(gbs) = self.ar_gbs.filter(|g| !(g.is_finite() && *g > 0.0)) {
            return Err(format!("ar_gbs must be a rate above 0 GB/s, got {gbs}"));
        }
        for (name, v, max, unit) in bounded {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{name} must be zero or positive, got {v}"));
            }
            if v > max {
                return Err(format!("{name} must be at most {max} {unit}, got {v}"));
            }
        }
        if !(self.attn_exp_exposed.is_finite() && (0.0..=1.0).contains(&self.attn_exp_exposed)) {
            return Err(format!(
                "attn_exp_exposed is a share of the exponentials' time and must be in [0, 1], got {}",
                self.attn_exp_exposed
            ));
        }
        if !(self.jitter_sigma.is_finite() && (0.0..=1.0).contains(&self.jitter_sigma)) {
            return Err(format!("jitter_sigma must be in [0, 1], got {}", self.jitter_sigma));
        }
        if let Some(u) = &self.uncertainty {
            u.validate()?;
        }
        Ok(())
    }

    /// The profile as TOML text, readable back by [`StackProfile::apply_file`].
    pub fn to_toml(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or_default();
        let mut scalars = String::new();
        let mut tables = String::new();
        if let serde_json::Value::Object(map) = value {
            for (k, v) in map {
                match v {
                    serde_json::Value::Object(inner) => {
                        tables.push_str(&format!("\n[{k}]\n"));
                        for (ik, iv) in inner {
                            tables.push_str(&format!("{ik} = {iv}\n"));
                        }
                    }
                    other => scalars.push_str(&format!("{k} = {other}\n")),
                }
            }
        }
        scalars + &tables
    }
}

fn merge(base: &mut serde_json::Value, patch: &serde_json::Value) {
    match (base, patch) {
        (serde_json::Value::Object(b), serde_json::Value::Object(p)) => {
            for (k, v) in p {
                match b.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge(slot, v),
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, p) => *b = p.clone(),
    }
}

#[cfg(test)]
mod tests;
