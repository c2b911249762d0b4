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

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

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

fn is_zero_f64(x: &f64) -> bool {
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
    pub reserve_gib: f64,
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
    let tower = if opts.language_model_only { 0.0 } else { model.extra_params_b * 1e9 * 2.0 };
    (heads * model.embedding_params() * 2.0 + tower) / f64::from(opts.tp)
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

/// Memory each GPU keeps outside weights and KV cache: the stack's reserve (CUDA graphs,
/// workspaces, and the peak of vLLM's memory profiling), stated at 1,024 sequences and 8,192
/// batched tokens. The profiling runs a forward pass of `max-num-batched-tokens` tokens, frees
/// its transients, then samples one row of logits for each of `min(max-num-seqs, tokens)`
/// sequences, so its peak is the larger of the two working sets, not their sum. A deployment
/// keeps the reserve less the stated peak plus its own: 2.9 GiB less for gpt-oss's 201,088-entry
/// vocabulary at 256 sequences (vLLM's default on the A100), whose sampler rows outweigh the
/// forward at either size; more where a large `max-num-batched-tokens` makes the forward the
/// larger (Llama-3.1-70B at TP 2 and 65,536 tokens: 7.3 GiB against 2.4 of sampler rows).
/// Never below a quarter of the reserve.
pub fn activation_reserve_gib(model: &ModelShape, opts: &ServingOptions, stack: &StackProfile) -> f64 {
    let reserve = if model.moe.is_some() { stack.activation_reserve_moe_gib } else { stack.activation_reserve_gib };
    let forward = forward_bytes_per_token(model, opts);
    let peak = |seqs: u32, tokens: u32| {
        let rows = f64::from(seqs.min(tokens));
        (rows * f64::from(model.vocab) * SAMPLER_BYTES_PER_LOGIT).max(f64::from(tokens) * forward)
    };
    let own = peak(opts.max_num_seqs, opts.max_num_batched_tokens) - peak(RESERVE_SEQS, RESERVE_TOKENS);
    (reserve + own / GIB).max(reserve / 4.0)
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
    let reserve_gib = activation_reserve_gib(model, opts, stack);
    let usable_gib = hw.memory_gib * opts.gpu_memory_utilization;
    let kv_gib = usable_gib - weights_gib - reserve_gib;
    let does_not_fit = || SimError::DoesNotFit {
        model: model.id.clone(),
        hardware: hw.name.clone(),
        tp: opts.tp,
        pp: opts.pp,
        weights_gib,
        device_gib: hw.memory_gib,
        utilization: opts.gpu_memory_utilization,
        reserve_gib,
        room_gib: (usable_gib - reserve_gib).max(0.0),
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
        reserve_gib,
        kv_gib,
        kv_bytes_per_token: per_token_layer * f64::from(full_stage + sliding_stage) + draft_kv,
        state_bytes_per_request: state_layer * f64::from(linear_stage),
        layout,
        kv_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::tests::setup;

    #[test]
    fn kv_capacity_of_qwen3_8b_on_one_h100() {
        let s = setup("Qwen/Qwen3-8B", "h100-sxm", &[("gpu-memory-utilization", "0.9")]).unwrap();
        // By hand: 79.2 GiB x 0.9 = 71.28 GiB; weights 8.19e9 params x 2 B = 15.26 GiB; 5.5 GiB
        // reserve; 50.52 GiB left. One token: 36 layers x 2 (K,V) x 8 heads x 128 x 2 B = 144 KiB,
        // a 16-token block 2.25 MiB, so 50.52 GiB / 2.25 MiB = 22 992 blocks = 367 872 tokens.
        let m = &s.memory;
        assert!((m.weights_gib - 15.26).abs() < 0.02, "{}", m.weights_gib);
        assert!((m.kv_gib - 50.52).abs() < 0.02, "{}", m.kv_gib);
        assert_eq!(m.kv_bytes_per_token, 147_456.0);
        assert!((m.layout.total_units as i64 - 22_992).abs() <= 10, "{}", m.layout.total_units);
        assert_eq!(m.kv_tokens, m.layout.total_units * 16);
        assert_eq!(s.max_model_len, 40960);
        // FP8 KV doubles the blocks; tp=2 halves the weights per GPU and the KV heads.
        let fp8 = setup("Qwen/Qwen3-8B", "h100-sxm", &[("kv-cache-dtype", "fp8")]).unwrap();
        assert_eq!(fp8.memory.layout.total_units / 2, m.layout.total_units);
        let tp2 = setup("Qwen/Qwen3-8B", "h100-sxm", &[("tp", "2")]).unwrap();
        assert!((tp2.memory.weights_gib - m.weights_gib / 2.0).abs() < 1e-9);
        assert!(tp2.memory.layout.total_units > 2 * m.layout.total_units);
    }

    #[test]
    fn linear_attention_state_takes_pages_as_large_as_an_attention_block() {
        let s = setup("Qwen/Qwen3-Next-80B-A3B-Instruct", "h100-sxm", &[("tp", "4")]).unwrap();
        let l = s.memory.layout;
        // One layer's state a GPU: (8 value heads x 128 x 128 + 3 x 2048 convolution inputs) x 2 B
        // = 274,432 B; one token's KV a layer a GPU: 1 KV head (2 over 4 ranks, at least one) x
        // 256 x 2 x 2 B = 1 KiB; 268 tokens, rounded up to 272.
        assert_eq!(l.block_size, 272);
        // Units of the 12 attention layers' pages; the 36 linear layers' states fill 3 of them.
        assert_eq!((l.units_per_block, l.state_units), (1, 3));
        assert_eq!(l.units_for_blocks(0), 0);
        assert_eq!(l.units_for_blocks(4), 4 + 3);
        assert_eq!(l.max_tokens_single(), (l.total_units - 3) * 272);
        assert_eq!(s.memory.kv_bytes_per_token, 12.0 * 1024.0);
        assert_eq!(s.memory.state_bytes_per_request, 36.0 * 274_432.0);
        // Without linear layers nothing changes: 16-token blocks, no state.
        let dense = setup("Qwen/Qwen3-8B", "h100-sxm", &[]).unwrap().memory.layout;
        assert_eq!((dense.block_size, dense.state_units), (16, 0));
        assert_eq!(hybrid_block_size(16, 0.0, 1024.0), 16);
        // A block asked larger than the state needs stays as asked.
        assert_eq!(hybrid_block_size(1024, 274_432.0, 1024.0), 1024);
    }

    #[test]
    fn sliding_layers_hold_only_their_window() {
        let s = setup("google/gemma-3-1b-it", "rtx-4090", &[]).unwrap();
        let l = s.memory.layout;
        // 4 global and 22 local layers: units of 2 layers, 2 + 11 per block; 512/16 + 1 = 33 blocks.
        assert_eq!((l.units_per_block, l.sliding_units_per_block, l.sliding_cap_blocks), (2, 11, 33));
        assert_eq!(l.units_for_blocks(10), 130);
        assert_eq!(l.units_for_blocks(100), 2 * 100 + 11 * 33);
        let long = l.max_tokens_single() / 16;
        assert!(l.units_for_blocks(long) <= l.total_units);
        assert!(l.units_for_blocks(long + 1) > l.total_units);
    }

    #[test]
    fn deepseek_r1_on_eight_h200s_keeps_the_latent_cache_whole_on_each_gpu() {
        let s = setup("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "8")]).unwrap();
        // By hand, FP8 bytes: attention 61 x ((187 105 280 - 15 138 816) / 8 + 15 138 816), the
        // down-projections whole on every rank; dense FFNs, shared experts and routers
        // (3 x 396 361 728 + 58 x 45 875 200) / 8; routed experts 58 x 32 x 44 040 192;
        // embedding and lm_head 2 x 129 280 x 7168 x 2 B / 8: 84 917 878 784 B = 79.09 GiB.
        let m = &s.memory;
        assert!((m.weights_gib - 79.085).abs() < 0.01, "{}", m.weights_gib);
        // 576 BF16 values per layer and token, not divided by tp.
        assert_eq!(m.kv_bytes_per_token, 70_272.0);
        assert_eq!(s.options.nodes, 1);
    }

    #[test]
    fn an_mtp_layer_takes_its_weights_and_its_cache_from_the_kv_pool() {
        let mtp = [
            ("tp", "8"),
            ("speculative-config", r#"{"method": "deepseek_mtp", "num_speculative_tokens": 1}"#),
            ("spec-acceptance", "0.8"),
        ];
        let plain = setup("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "8")]).unwrap().memory;
        let with = setup("deepseek-ai/DeepSeek-R1", "h200", &mtp).unwrap().memory;
        // By hand, one MoE layer at the checkpoint's FP8 bytes as in the test above: attention
        // (187 105 280 - 15 138 816) / 8 + 15 138 816, shared experts and router 45 875 200 / 8,
        // 32 routed experts of 44 040 192, and the BF16 projection of 2 x 7168 to 7168 on every
        // rank (205 520 896 B): 1 657 176 064 B; the embedding and LM head are the target's.
        let added = (with.weights_gib - plain.weights_gib) * GIB;
        assert!((added - 1_657_176_064.0).abs() < 1.0, "{added}");
        // One more layer's latent a token: 62 layers' keys in the pool where there were 61.
        assert_eq!(with.kv_bytes_per_token - plain.kv_bytes_per_token, 1152.0);
        let share = with.layout.total_units as f64 / plain.layout.total_units as f64;
        let expected = with.kv_gib / plain.kv_gib * 61.0 / 62.0;
        assert!((share - expected).abs() < 1e-4, "{share} {expected}");
        // ngram drafts on the host: nothing leaves the pool.
        let ngram = [
            ("tp", "8"),
            ("speculative-config", r#"{"method": "ngram", "num_speculative_tokens": 3}"#),
            ("spec-acceptance", "0.5"),
        ];
        assert_eq!(setup("deepseek-ai/DeepSeek-R1", "h200", &ngram).unwrap().memory, plain);
    }

    #[test]
    fn a_draft_model_keeps_its_own_embedding_and_an_eagle_head_reads_the_target_s() {
        let with = |method: &str, draft: &str| {
            let config = format!(r#"{{"method": "{method}", "model": "{draft}", "num_speculative_tokens": 2}}"#);
            let pairs = [("tp", "2"), ("speculative-config", config.as_str()), ("spec-acceptance", "0.7")];
            setup("Qwen/Qwen3-32B", "h100-sxm", &pairs).unwrap().memory
        };
        let plain = setup("Qwen/Qwen3-32B", "h100-sxm", &[("tp", "2")]).unwrap().memory;
        // Qwen3-8B drafting at tp=2: its own weights, halved; as an EAGLE head (untied), less
        // its embedding's half (151 936 x 4096 x 2 B / 2).
        let draft = with("draft_model", "Qwen/Qwen3-8B");
        let eight = setup("Qwen/Qwen3-8B", "h100-sxm", &[("tp", "2")]).unwrap().memory;
        assert!((draft.weights_gib - plain.weights_gib - eight.weights_gib).abs() < 1e-9);
        let eagle = with("eagle3", "Qwen/Qwen3-8B");
        let embedding = 151_936.0 * 4096.0 * 2.0 / 2.0 / GIB;
        assert!((draft.weights_gib - eagle.weights_gib - embedding).abs() < 1e-9);
        // Its 36 layers' keys and values join the target's 64 in every block: the pool holds
        // 64 / (64 + 36) of the bytes' tokens (8 KV heads a model, 4 a rank, both 128 wide).
        assert_eq!(draft.kv_bytes_per_token, plain.kv_bytes_per_token + eight.kv_bytes_per_token);
        let tokens = |m: &MemoryPlan| m.kv_gib * GIB / m.kv_bytes_per_token;
        let held = draft.layout.total_units as f64 * 16.0;
        assert!((held / tokens(&draft) - 1.0).abs() < 1e-3, "{held} {}", tokens(&draft));
        let ratio = draft.kv_tokens as f64 / plain.kv_tokens as f64;
        let expected = draft.kv_gib / plain.kv_gib * 64.0 / 100.0;
        assert!((ratio - expected).abs() < 1e-3, "{ratio} {expected}");
    }

    #[test]
    fn expert_parallel_spreads_whole_experts_and_dp_replicates_the_rest() {
        let r1 = |pairs: &[(&str, &str)]| setup("deepseek-ai/DeepSeek-R1", "h200", pairs).unwrap().memory.weights_gib;
        // tp=8 slices every expert 8 ways, ep over tp=8 gives each GPU 32 whole experts: same bytes.
        assert!((r1(&[("tp", "8")]) - r1(&[("tp", "8"), ("ep", "true")])).abs() < 1e-9);
        // dp=8 with ep: each GPU holds all of attention, the dense layers and the embeddings but only
        // 32 experts, 93.8 GiB.
        let dp_ep = r1(&[("dp", "8"), ("ep", "true")]);
        assert!((dp_ep - 93.79).abs() < 0.02, "{dp_ep}");
        // tp=8 x dp=2: a MoE layer spans all 16 GPUs with ep (16 whole experts each) or without
        // (every expert sliced 16 ways, as vLLM flattens tp across dp): the same bytes, and half
        // the experts' bytes of tp=8 alone (58 x 16 x 44 040 192 B fewer).
        let (dp2, dp2_ep) = (r1(&[("tp", "8"), ("dp", "2")]), r1(&[("tp", "8"), ("dp", "2"), ("ep", "true")]));
        assert!((dp2 - dp2_ep).abs() < 1e-9, "{dp2} {dp2_ep}");
        let saved = r1(&[("tp", "8")]) - dp2;
        assert!((saved - 58.0 * 16.0 * 44_040_192.0 / GIB).abs() < 1e-6, "{saved}");
    }

    #[test]
    fn mxfp4_experts_take_the_memory_of_the_kernels_vllm_runs_on_the_device() {
        // gpt-oss-120b on one GPU: the checkpoint's 60.7 GiB; vLLM logs 64.38 GiB with Triton's
        // kernels (Hopper's images) and 65.97 with Marlin's (every part before Hopper).
        let gib = |hw: &str, opts: &[(&str, &str)]| setup("openai/gpt-oss-120b", hw, opts).unwrap().memory.weights_gib;
        let (h100, a100) = (gib("h100-sxm", &[]), gib("a100-80g", &[]));
        assert!((h100 - 64.38).abs() < 0.5, "{h100}");
        assert!((a100 - 65.97).abs() < 0.3, "{a100}");
        // Kernels asked for bring their own layout (Marlin asked for on Hopper too); the pricing
        // default keeps the device's.
        assert_eq!(gib("a100-80g", &[("mxfp4-backend", "triton")]), h100);
        assert_eq!(gib("h100-sxm", &[("mxfp4-backend", "marlin")]), a100);
        // Experts kept in BF16 hold what the checkpoint holds; native FP4 units take no layout.
        let qwen = |hw: &str| setup("Qwen/Qwen3-30B-A3B", hw, &[]).unwrap().memory.weights_gib;
        assert_eq!(qwen("h100-sxm"), qwen("a100-80g"));
        assert!(gib("b200", &[]) < h100 - 3.0);
    }

    #[test]
    fn precision_override_shrinks_the_weights() {
        let bf16 = setup("Qwen/Qwen3-8B", "h100-sxm", &[]).unwrap();
        let fp8 = setup("Qwen/Qwen3-8B", "h100-sxm", &[("precision", "fp8")]).unwrap();
        assert!(fp8.memory.weights_gib < 0.6 * bf16.memory.weights_gib);
    }

    #[test]
    fn the_reserve_leaves_out_the_sampler_rows_fewer_sequences_do_not_profile() {
        // gpt-oss on the H100 runs vLLM's default 1,024 sequences: the reserve as stated.
        let stated = StackProfile::default().activation_reserve_moe_gib;
        let h100 = setup("openai/gpt-oss-120b", "h100-sxm", &[]).unwrap();
        assert_eq!(h100.memory.reserve_gib, stated);
        // The A100's default is 256: 768 rows of 201,088 logits at 20 bytes fewer.
        let a100 = setup("openai/gpt-oss-120b", "a100-80g", &[]).unwrap();
        let sampler = 768.0 * 201_088.0 * 20.0 / GIB;
        assert!((a100.memory.reserve_gib - (stated - sampler)).abs() < 1e-9, "{}", a100.memory.reserve_gib);
        assert!(a100.memory.kv_tokens > h100.memory.kv_tokens);
        // Asked for on the H100, the same; and never below a quarter of the reserve.
        let asked = setup("openai/gpt-oss-120b", "h100-sxm", &[("max-num-seqs", "256")]).unwrap();
        assert_eq!(asked.memory.reserve_gib, a100.memory.reserve_gib);
        let gemma = setup("google/gemma-3-1b-it", "l4", &[("max-num-seqs", "1")]).unwrap();
        assert_eq!(gemma.memory.reserve_gib, 4.17 / 4.0, "262,144 logits a row would take it all");
    }

    #[test]
    fn the_reserve_keeps_the_larger_of_the_profiled_forward_and_the_sampler_rows() {
        // Qwen3-8B on one GPU: a token of the forward holds 2 x 4,096 of residual and normed
        // state and, its largest transient, the FFN's 2 x 12,288 gate-up outputs and 12,288
        // activated, in BF16: 90,112 bytes.
        let qwen = setup("Qwen/Qwen3-8B", "l4", &[("max-num-seqs", "1")]).unwrap();
        assert_eq!(forward_bytes_per_token(&qwen.model, &qwen.options), 90_112.0);
        // One sequence on the L4 (2,048 batched tokens): the forward's 176 MiB is the peak, where
        // the stated reserve's was 1,024 rows of 151,936 logits (2.9 GiB; the forward's 8,192
        // tokens are 0.7).
        let stated = 1024.0 * 151_936.0 * 20.0;
        let expected = 4.17 + (2048.0 * 90_112.0 - stated) / GIB;
        assert!((qwen.memory.reserve_gib - expected).abs() < 1e-9, "{}", qwen.memory.reserve_gib);
        // Llama-3.1-70B at TP 2: 2 x 8,192, and 2 x 14,336 + 14,336 of FFN a token, 118,784
        // bytes. Twice vLLM's default tokens still profile less than the sampler's 1,024 rows
        // of 128,256 logits (2.4 GiB); 65,536 tokens hold 7.3 GiB, 4.8 more than stated.
        let llama = |opts: &[(&str, &str)]| {
            let s = setup("meta-llama/Llama-3.1-70B-Instruct", "h200", &[&[("tp", "2")], opts].concat()).unwrap();
            (forward_bytes_per_token(&s.model, &s.options), s.memory.reserve_gib)
        };
        let (per_token, default) = llama(&[]);
        assert_eq!(per_token, 118_784.0);
        assert_eq!(default, StackProfile::default().activation_reserve_gib);
        assert_eq!(llama(&[("max-num-batched-tokens", "16384")]).1, default);
        let (_, large) = llama(&[("max-num-batched-tokens", "65536")]);
        let expected = default + (65_536.0 * 118_784.0 - 1024.0 * 128_256.0 * 20.0) / GIB;
        assert!((large - expected).abs() < 1e-9 && (large - default - 4.80).abs() < 0.01, "{large}");
        // More sequences than the stated 1,024 profile more rows: 1,024 more of them at 2,048.
        let (_, seqs) = llama(&[("max-num-seqs", "2048")]);
        assert!((seqs - default - 1024.0 * 128_256.0 * 20.0 / GIB).abs() < 1e-9, "{seqs}");
    }

    #[test]
    fn a_mixture_of_experts_forward_holds_the_fused_kernels_caches() {
        // gpt-oss-120b on one GPU: 4 routed experts a token, each 2 x 2,880 of gate-up output
        // (wider than the 2,880 hidden the down products write into the same buffer) and 2,880
        // activated, and 128 router logits: 34,688 values, beside 2 x 2,880 of residual state.
        let gpt = setup("openai/gpt-oss-120b", "h100-sxm", &[]).unwrap();
        assert_eq!(forward_bytes_per_token(&gpt.model, &gpt.options), 2.0 * (5_760.0 + 34_688.0));
        // DeepSeek-R1 at TP 8: a rank's 256 columns of each of 8 experts write into buffers as
        // wide as the 7,168 hidden: the hidden width, not the expert's, sets them.
        let r1 = setup("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "8")]).unwrap();
        let routed = 8.0 * (7_168.0 + 256.0) + 256.0;
        assert_eq!(forward_bytes_per_token(&r1.model, &r1.options), 2.0 * (2.0 * 7_168.0 + routed));
    }

    proptest::proptest! {
        #[test]
        fn more_tokens_or_sequences_never_leave_more_kv_cache(
            model in proptest::sample::select(vec!["Qwen/Qwen3-8B", "openai/gpt-oss-20b", "Qwen/Qwen3-30B-A3B", "google/gemma-3-4b-it"]),
            seqs in 1u32..2048,
            tokens in 2048u32..65_536,
            more in 1u32..4096,
        ) {
            let reserve = |seqs: u32, tokens: u32| {
                let (s, t) = (seqs.to_string(), tokens.to_string());
                setup(model, "h200", &[("max-num-seqs", s.as_str()), ("max-num-batched-tokens", t.as_str())]).unwrap().memory.reserve_gib
            };
            let base = reserve(seqs, tokens);
            proptest::prop_assert!(reserve(seqs, tokens + more) >= base);
            proptest::prop_assert!(reserve((seqs + more).min(tokens), tokens) >= base);
        }
    }
}
