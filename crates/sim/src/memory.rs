//! How vLLM fills a GPU's memory, and what is left for the KV cache: weights on the most loaded
//! GPU (the checkpoint's bytes, and the layout the experts' kernels give them), the activation
//! reserve of the stack, and the block pool that sizes the KV cache.
//!
//! Memory per GPU follows vLLM: `memory × gpu-memory-utilization − weights per GPU − activation
//! reserve` is left for KV blocks. Weights per GPU: one pipeline stage's layers, attention, dense
//! FFNs, shared experts and embeddings split over `tp` (and whole on each data-parallel rank),
//! routed experts split over [`ServingOptions::expert_shards`]. Full-attention layers keep every
//! block of a request; sliding-window layers keep at most the blocks covering their window;
//! linear-attention layers keep one fixed-size state a request, in pages as large as an
//! attention block's (vLLM's hybrid layout: the block grows until one layer's page holds a
//! state). A speculative decoder's drafter (an MTP layer, an EAGLE head or a draft model) adds
//! its weights to each GPU's and its attention layers' keys and values to every cached token,
//! as vLLM allocates them from the same pool.

use serde::Serialize;

use crate::error::SimError;
use crate::hardware::HardwareSpec;
use crate::model::ModelShape;
use crate::options::{ServingOptions, SpecMethod};
use crate::profile::StackProfile;

/// Bytes in a GiB.
pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// How the KV pool is counted. One *unit* is `block_size` tokens of `unit_layers` layers on one
/// GPU; a full block of a request costs `units_per_block` units for its full-attention layers,
/// and `sliding_units_per_block` more for its sliding layers while it is inside the window; a
/// request with any block also holds `state_units` for its linear-attention layers' state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct KvLayout {
    pub block_size: u32,
    pub total_units: u64,
    pub units_per_block: u32,
    pub sliding_units_per_block: u32,
    /// Blocks of a request the sliding layers keep (window / block size, plus one).
    pub sliding_cap_blocks: u32,
    /// Units of one request's linear-attention state (0 without linear attention).
    #[serde(skip_serializing_if = "is_zero")]
    pub state_units: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

pub(crate) fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

impl KvLayout {
    /// Units a request of `blocks` blocks holds.
    pub fn units_for_blocks(&self, blocks: u64) -> u64 {
        let state = if blocks > 0 { u64::from(self.state_units) } else { 0 };
        u64::from(self.units_per_block) * blocks
            + u64::from(self.sliding_units_per_block) * blocks.min(u64::from(self.sliding_cap_blocks))
            + state
    }

    /// The longest single sequence the pool can hold, tokens.
    pub fn max_tokens_single(&self) -> u64 {
        let f = u64::from(self.units_per_block);
        let s = u64::from(self.sliding_units_per_block);
        let cap = u64::from(self.sliding_cap_blocks);
        let Some(total) = self.total_units.checked_sub(u64::from(self.state_units)) else {
            return 0;
        };
        let blocks = if f == 0 {
            if s * cap.max(1) <= total { u64::from(u32::MAX) } else { 0 }
        } else if (f + s) * cap >= total {
            total / (f + s)
        } else {
            cap + (total - (f + s) * cap) / f
        };
        blocks.saturating_mul(u64::from(self.block_size))
    }
}

/// The granularity vLLM rounds a hybrid model's attention block to (its attention kernels'
/// block alignment).
const HYBRID_BLOCK_ALIGN: u32 = 16;

/// The attention block of a model with linear-attention layers, tokens: vLLM makes every layer's
/// page the same size, growing the attention block (in multiples of 16 tokens) until one layer's
/// page holds one sequence's state of `state_bytes`, unless `block_size` is already larger
/// (Qwen3.5-4B: 2 MiB of FP32 state and 48 KiB of convolution inputs over 4 KiB a token, 528
/// tokens). Without state, `block_size` as it is.
pub fn hybrid_block_size(block_size: u32, state_bytes: f64, kv_bytes_per_token_layer: f64) -> u32 {
    if state_bytes <= 0.0 || kv_bytes_per_token_layer <= 0.0 {
        return block_size;
    }
    let align = f64::from(HYBRID_BLOCK_ALIGN);
    let tokens = (state_bytes / (align * kv_bytes_per_token_layer)).ceil() * align;
    block_size.max(u32::try_from(tokens as u64).unwrap_or(u32::MAX))
}

/// Where each GPU's memory goes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryPlan {
    pub device_gib: f64,
    pub utilization: f64,
    /// Weights on the most loaded GPU.
    pub weights_gib: f64,
    /// The activation reserve, and what it is made of.
    pub reserve: Reserve,
    /// CUDA graph memory set aside before the KV cache (`ServingOptions::cudagraph_memory_gib`).
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub graph_gib: f64,
    /// Left for the KV cache.
    pub kv_gib: f64,
    /// KV bytes one token takes on one GPU, over the layers of the largest stage.
    pub kv_bytes_per_token: f64,
    /// Linear-attention state one request holds on one GPU, over the layers of the largest
    /// stage (0 without linear attention).
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub state_bytes_per_request: f64,
    /// The block pool: one GPU's, or in a [`crate::setup::SimSetup`] with `dp > 1` the `dp` ranks' together.
    pub layout: KvLayout,
    /// The longest sequence one rank's KV cache can hold ("GPU KV cache size" in vLLM's log).
    pub kv_tokens: u64,
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Weight bytes on the most loaded GPU: one pipeline stage's share of the transformer blocks,
/// split over `tp` (MLA's down-projections whole on every rank, routed experts over
/// [`ServingOptions::expert_shards`]: whole experts, the busiest GPU taking the rounded-up share,
/// with expert parallelism), plus the embeddings (and lm_head with one stage) split over `tp`.
/// Dequantized MXFP4 experts take the layout resolved in [`ServingOptions::mxfp4_layout`]: they
/// hold more than the checkpoint ([`crate::precision::Mxfp4Backend::expert_memory_factor`]).
pub fn weight_bytes_per_gpu(model: &ModelShape, opts: &ServingOptions) -> f64 {
    let tp = f64::from(opts.tp);
    let layers = f64::from(model.layers);
    let stage_fraction = f64::from(model.layers.div_ceil(opts.pp)) / layers;
    let attn_b = model.mixer_bytes_per_param();
    let w_b = model.precision.bytes_per_param();
    let replicated = f64::from(model.attention_layers()) * model.attention_replicated_params();
    let attention = ((model.mixer_params() - replicated) / tp + replicated) * attn_b;
    let always = model.always_ffn_params() * model.always_precision().bytes_per_param() / tp;
    let experts_per_gpu = model.moe.as_ref().map_or(0.0, |m| {
        if opts.expert_parallel {
            f64::from(opts.experts_per_gpu(m.experts))
        } else {
            f64::from(m.experts) / f64::from(opts.expert_shards())
        }
    });
    let layout = match (opts.mxfp4_layout, model.moe.as_ref()) {
        (Some(kernels), Some(m)) => {
            kernels.expert_memory_factor(model.hidden, opts.expert_width_per_gpu(m.expert_intermediate))
        }
        _ => 1.0,
    };
    let experts = f64::from(model.moe_layers()) * experts_per_gpu * model.expert_params() * w_b * layout;
    (attention + always + experts) * stage_fraction + outside_blocks_bytes_per_gpu(model, opts)
}

/// Weight bytes outside the transformer blocks on one GPU: the BF16 embedding, and the LM head
/// with one stage (the same matrix where the two are tied), and the parameters the preset counts
/// beside the blocks (a vision encoder's, unless the language model is served alone), split over
/// `tp`.
fn outside_blocks_bytes_per_gpu(model: &ModelShape, opts: &ServingOptions) -> f64 {
    let heads = if opts.pp == 1 && !model.tied_embeddings { 2.0 } else { 1.0 };
    let tower = if opts.language_model_only { 0.0 } else { tower_bytes_per_gpu(model, opts) };
    heads * model.embedding_params() * 2.0 / f64::from(opts.tp) + tower
}

/// The BF16 bytes of a model's vision tower (its `extra_params_b`) on one GPU, split over `tp`,
/// whether the deployment loads it or not (0 for a model without one).
pub fn tower_bytes_per_gpu(model: &ModelShape, opts: &ServingOptions) -> f64 {
    model.extra_params_b * 1e9 * 2.0 / f64::from(opts.tp)
}

/// The weights a drafter adds to each GPU, run at the target's parallelism (vLLM's drafters take
/// the target's tensor-parallel group). An MTP layer (`drafter` is [`ModelShape::mtp_layer`]) is
/// one decoder layer and the projection that joins the token's embedding to the hidden state
/// (`2 × hidden` to `hidden`, a plain BF16 linear on every rank), reading the target's embedding
/// and LM head; an EAGLE head reads the target's embedding and keeps its own layers and LM head;
/// a draft model keeps everything of its own.
pub fn drafter_weight_bytes_per_gpu(
    drafter: &ModelShape,
    method: SpecMethod,
    target: &ModelShape,
    opts: &ServingOptions,
) -> f64 {
    let mut opts = opts.clone();
    if drafter.precision != target.precision {
        opts.mxfp4_layout = None;
    }
    let all = weight_bytes_per_gpu(drafter, &opts);
    match method {
        SpecMethod::Mtp => {
            let fusion = 2.0 * f64::from(drafter.hidden).powi(2) * 2.0;
            all - outside_blocks_bytes_per_gpu(drafter, &opts) + fusion
        }
        SpecMethod::Eagle if !drafter.tied_embeddings => all - drafter.embedding_params() * 2.0 / f64::from(opts.tp),
        SpecMethod::Eagle | SpecMethod::Drafter => all,
        SpecMethod::Ngram | SpecMethod::NgramGpu => 0.0,
    }
}

/// The keys and values a drafter keeps for each cached token on one GPU: every attention layer
/// it runs (an MTP layer's one), as full attention.
pub fn drafter_kv_bytes_per_token(drafter: &ModelShape, opts: &ServingOptions) -> f64 {
    f64::from(drafter.attention_layers()) * drafter.kv_bytes_per_token_layer(opts.kv_cache_dtype, opts.tp)
}

/// The sequences the stack's activation reserves are stated at: vLLM's default `max-num-seqs`
/// on the large GPUs they were calibrated on.
const RESERVE_SEQS: u32 = 1024;

/// Bytes per vocabulary entry of the sampler's working set that vLLM's memory profiling runs for
/// `max-num-seqs` rows: the logits and probabilities in FP32 and the sort top-k/top-p does on
/// them (FP32 values, int64 indices).
const SAMPLER_BYTES_PER_LOGIT: f64 = 20.0;

/// The vocabularies the stack's reserves are stated for: Qwen3's (151,936 logits a row) for a
/// dense model, gpt-oss's (201,088) for a mixture of experts, the models they were fixed on.
const RESERVE_VOCAB: u32 = 151_936;
const RESERVE_VOCAB_MOE: u32 = 201_088;

/// The batched tokens the stack's activation reserves are stated at: vLLM's default
/// `max-num-batched-tokens` on the large GPUs they were calibrated on.
const RESERVE_TOKENS: u32 = 8192;

/// Bytes of one activation value (BF16, whatever the weights' format).
const ACTIVATION_BYTES: f64 = 2.0;

/// Bytes one token of vLLM's profiling forward holds on one GPU at the pass's peak: the residual
/// stream and the normed hidden state (whose last rows the sampler takes), beside the largest
/// transient of a layer. Attention's is its projections (queries, keys and values, and the
/// output); a dense FFN's its gate-up output and the activated half; an MoE layer's the fused
/// kernel's caches (`fused_moe`: one buffer of `top_k × max(2 × width, hidden)` shared by the
/// gate-up and down outputs, and `top_k × width` for the activated half) and the router's logits.
pub fn forward_bytes_per_token(model: &ModelShape, opts: &ServingOptions) -> f64 {
    let tp = opts.tp.max(1);
    let hidden = f64::from(model.hidden);
    let gated = |width: f64| if model.ungated_ffn { 2.0 * width } else { 3.0 * width };
    let heads = f64::from((model.heads / tp).max(1));
    let kv_heads = f64::from(model.kv_heads_per_rank(tp));
    let attention = (2.0 * heads + 2.0 * kv_heads) * f64::from(model.head_dim);
    let dense = if model.dense_ffn_layers() > 0 { gated(f64::from(model.intermediate / tp)) } else { 0.0 };
    let moe = model.moe.as_ref().filter(|_| model.moe_layers() > 0).map_or(0.0, |m| {
        let width = f64::from(opts.expert_width_per_gpu(m.expert_intermediate));
        let read = f64::from(m.latent.unwrap_or(model.hidden));
        let routed = f64::from(m.top_k) * ((2.0 * width).max(read) + width) + f64::from(m.experts);
        let shared_width = f64::from(m.shared_intermediate.unwrap_or(m.expert_intermediate) / tp);
        routed.max(f64::from(m.shared_experts) * gated(shared_width))
    });
    ACTIVATION_BYTES * (2.0 * hidden + attention.max(dense).max(moe))
}

/// The activation reserve of one GPU, and where it comes from ([`reserve`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Reserve {
    /// The stack's reserve as stated, at 1,024 sequences and 8,192 batched tokens.
    pub stated_gib: f64,
    /// The vocabulary it is stated for (Qwen3's for a dense model, gpt-oss's for a mixture of
    /// experts).
    pub stated_vocab: u32,
    /// The profiled peak inside the stated reserve: the larger of its sampler rows and its
    /// forward.
    pub stated_peak_gib: f64,
    /// This deployment's sampler rows: `min(max-num-seqs, max-num-batched-tokens)` rows of
    /// logits.
    pub sampler_gib: f64,
    /// This deployment's forward of `max-num-batched-tokens` tokens.
    pub forward_gib: f64,
    /// What the GPU keeps: the stated reserve less its peak plus this deployment's.
    pub gib: f64,
}

/// Memory each GPU keeps outside weights and KV cache: the stack's reserve (CUDA graphs,
/// workspaces, and the peak of vLLM's memory profiling), stated at 1,024 sequences and 8,192
/// batched tokens for the vocabulary of the models it was fixed on (`RESERVE_VOCAB`). The
/// profiling runs a forward pass of `max-num-batched-tokens` tokens, frees its transients, then
/// samples one row of logits for each of `min(max-num-seqs, tokens)`
/// sequences, so its peak is the larger of the two working sets, not their sum. A deployment
/// keeps the reserve less the stated peak plus its own: 2.9 GiB less for gpt-oss's 201,088-entry
/// vocabulary at 256 sequences (vLLM's default on the A100), whose sampler rows outweigh the
/// forward at either size; 2.1 GiB more for Gemma 3's 262,144 entries at 1,024; more where a
/// large `max-num-batched-tokens` makes the forward the larger (Llama-3.1-70B at TP 2 and
/// 65,536 tokens: 7.3 GiB against 2.4 of sampler rows).
/// Never below a quarter of the reserve.
pub fn reserve(model: &ModelShape, opts: &ServingOptions, stack: &StackProfile) -> Reserve {
    let stated = if model.moe.is_some() { stack.activation_reserve_moe_gib } else { stack.activation_reserve_gib };
    let reference = if model.moe.is_some() { RESERVE_VOCAB_MOE } else { RESERVE_VOCAB };
    let rows = |seqs: u32, tokens: u32, vocab: u32| {
        f64::from(seqs.min(tokens)) * f64::from(vocab) * SAMPLER_BYTES_PER_LOGIT / GIB
    };
    let per_token = forward_bytes_per_token(model, opts);
    let pass = |tokens: u32| f64::from(tokens) * per_token / GIB;
    let stated_peak = rows(RESERVE_SEQS, RESERVE_TOKENS, reference).max(pass(RESERVE_TOKENS));
    let sampler = rows(opts.max_num_seqs, opts.max_num_batched_tokens, model.vocab);
    let forward = pass(opts.max_num_batched_tokens);
    Reserve {
        stated_gib: stated,
        stated_vocab: reference,
        stated_peak_gib: stated_peak,
        sampler_gib: sampler,
        forward_gib: forward,
        gib: (stated + (sampler.max(forward) - stated_peak)).max(stated / 4.0),
    }
}

/// Sizes the KV pool of one GPU (the most loaded pipeline stage of one data-parallel rank), with
/// the speculative decoder's drafter, if any, and how it drafts.
pub fn plan_memory(
    model: &ModelShape,
    hw: &HardwareSpec,
    opts: &ServingOptions,
    stack: &StackProfile,
    drafter: Option<(&ModelShape, SpecMethod)>,
) -> Result<MemoryPlan, SimError> {
    let pp = opts.pp;
    let drafter_bytes = drafter.map_or(0.0, |(d, method)| drafter_weight_bytes_per_gpu(d, method, model, opts));
    let weights_gib = (weight_bytes_per_gpu(model, opts) + drafter_bytes) / GIB;
    let reserve = reserve(model, opts, stack);
    let reserve_gib = reserve.gib;
    let usable_gib = hw.memory_gib * opts.gpu_memory_utilization;
    let graph_gib = opts.cudagraph_memory_gib;
    let kv_gib = usable_gib - weights_gib - reserve_gib - graph_gib;
    let does_not_fit = || SimError::DoesNotFit {
        model: model.id.clone(),
        hardware: hw.name.clone(),
        tp: opts.tp,
        pp: opts.pp,
        weights_gib,
        device_gib: hw.memory_gib,
        utilization: opts.gpu_memory_utilization,
        reserve_gib: reserve_gib + graph_gib,
        room_gib: (usable_gib - reserve_gib - graph_gib).max(0.0),
    };
    if kv_gib <= 0.0 {
        return Err(does_not_fit());
    }
    let (sliding, window) = model.sliding_layers();
    let full_stage = model.full_attention_layers().div_ceil(pp);
    let sliding_stage = sliding.div_ceil(pp);
    let linear_stage = model.linear_layers().div_ceil(pp);
    let g = gcd(full_stage, sliding_stage).max(1);
    let per_token_layer = model.kv_bytes_per_token_layer(opts.kv_cache_dtype, opts.tp);
    let state_layer = model.linear.as_ref().map_or(0.0, |l| l.state_bytes(opts.tp));
    let block_size = hybrid_block_size(opts.block_size, state_layer, per_token_layer);
    let unit_bytes = f64::from(block_size) * per_token_layer * f64::from(g);
    // The drafter's keys and values grow with every block of a request, as the full-attention
    // layers' do: the pool keeps the target's share of each block's bytes.
    let draft_kv = drafter.map_or(0.0, |(d, _)| drafter_kv_bytes_per_token(d, opts));
    let full_kv = per_token_layer * f64::from(full_stage);
    let target_share = if draft_kv > 0.0 && full_kv > 0.0 { full_kv / (full_kv + draft_kv) } else { 1.0 };
    let total_units = (kv_gib * GIB * target_share / unit_bytes).floor() as u64;
    let layout = KvLayout {
        block_size,
        total_units,
        units_per_block: full_stage / g,
        sliding_units_per_block: sliding_stage / g,
        sliding_cap_blocks: if sliding_stage == 0 { 0 } else { window.div_ceil(block_size).saturating_add(1) },
        // One layer's state fills one page of one layer; a unit is `g` layers' pages.
        state_units: linear_stage.div_ceil(g),
    };
    let kv_tokens = layout.max_tokens_single();
    if kv_tokens < u64::from(block_size) {
        return Err(does_not_fit());
    }
    Ok(MemoryPlan {
        device_gib: hw.memory_gib,
        utilization: opts.gpu_memory_utilization,
        weights_gib,
        reserve,
        graph_gib,
        kv_gib,
        kv_bytes_per_token: per_token_layer * f64::from(full_stage + sliding_stage) + draft_kv,
        state_bytes_per_request: state_layer * f64::from(linear_stage),
        layout,
        kv_tokens,
    })
}

#[cfg(test)]
mod tests;
