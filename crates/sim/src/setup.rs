//! Resolving a simulated target: model + hardware + options (+ a fitted profile) into a
//! [`SimSetup`], with the memory plan that sizes the KV block pool.
//!
//! Memory per GPU follows vLLM: `memory × gpu-memory-utilization − weights per GPU − activation
//! reserve` is left for KV blocks. Weights per GPU: one pipeline stage's layers, attention, dense
//! FFNs, shared experts and embeddings split over `tp` (and whole on each data-parallel rank),
//! routed experts split over [`ServingOptions::expert_shards`]. Full-attention layers keep every
//! block of a request; sliding-window layers keep at most the blocks covering their window.
//!
//! Data parallelism (`dp > 1`) runs `dp` engines, each with its own scheduler and KV pool. The
//! simulator approximates them by one scheduler whose KV pool, `max-num-seqs` and
//! `max-num-batched-tokens` are `dp` times one rank's, while the longest sequence stays what one
//! rank holds.

use std::path::Path;

use serde::Serialize;

use crate::error::SimError;
use crate::hardware::HardwareSpec;
use crate::model::ModelShape;
use crate::options::ServingOptions;
use crate::precision::Mxfp4Backend;
use crate::presets::Presets;
use crate::profile::StackProfile;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// How the KV pool is counted. One *unit* is `block_size` tokens of `unit_layers` layers on one
/// GPU; a full block of a request costs `units_per_block` units for its full-attention layers,
/// and `sliding_units_per_block` more for its sliding layers while it is inside the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct KvLayout {
    pub block_size: u32,
    pub total_units: u64,
    pub units_per_block: u32,
    pub sliding_units_per_block: u32,
    /// Blocks of a request the sliding layers keep (window / block size, plus one).
    pub sliding_cap_blocks: u32,
}

impl KvLayout {
    /// Units a request of `blocks` blocks holds.
    pub fn units_for_blocks(&self, blocks: u64) -> u64 {
        u64::from(self.units_per_block) * blocks
            + u64::from(self.sliding_units_per_block) * blocks.min(u64::from(self.sliding_cap_blocks))
    }

    /// The longest single sequence the pool can hold, tokens.
    pub fn max_tokens_single(&self) -> u64 {
        let f = u64::from(self.units_per_block);
        let s = u64::from(self.sliding_units_per_block);
        let cap = u64::from(self.sliding_cap_blocks);
        let blocks = if f == 0 {
            if s * cap.max(1) <= self.total_units { u64::from(u32::MAX) } else { 0 }
        } else if (f + s) * cap >= self.total_units {
            self.total_units / (f + s)
        } else {
            cap + (self.total_units - (f + s) * cap) / f
        };
        blocks.saturating_mul(u64::from(self.block_size))
    }
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
    /// The block pool: one GPU's, or in a [`SimSetup`] with `dp > 1` the `dp` ranks' together.
    pub layout: KvLayout,
    /// The longest sequence one rank's KV cache can hold ("GPU KV cache size" in vLLM's log).
    pub kv_tokens: u64,
}

/// A fully resolved simulated target: everything the engine, the cost model and `predict` need.
///
/// With data parallelism (`options.dp > 1`) the `dp` engines are approximated by one scheduler:
/// `options.max_num_seqs`, `options.max_num_batched_tokens` and `memory.layout.total_units` are
/// the whole deployment's, `dp` times what one engine has (`--max-num-seqs` as given is per
/// engine, as in vLLM); `memory.kv_gib`, `memory.weights_gib` and `memory.kv_tokens` stay one
/// GPU's / one rank's.
#[derive(Clone, Debug, Serialize)]
pub struct SimSetup {
    /// The model, with any precision override applied.
    pub model: ModelShape,
    pub hardware: HardwareSpec,
    /// The options, with the per-engine batch limits scaled by `dp` (see above).
    pub options: ServingOptions,
    /// The longest prompt plus output accepted (explicit, or derived from the model and the KV cache).
    pub max_model_len: u32,
    pub stack: StackProfile,
    pub memory: MemoryPlan,
    /// What was derived or adjusted, worth showing the user.
    pub notes: Vec<String>,
}

impl SimSetup {
    /// Resolves a target with the built-in and user presets. `model` is a preset id or the path
    /// of a Hugging Face config.json (or of the folder holding one); `profile` a fitted
    /// [`StackProfile`] file.
    pub fn resolve(
        model: &str,
        hardware: &str,
        options: &[(String, String)],
        profile: Option<&Path>,
    ) -> Result<SimSetup, SimError> {
        Self::resolve_with(&Presets::load_default()?, model, hardware, options, profile)
    }

    /// As [`SimSetup::resolve`], with an explicit preset registry.
    pub fn resolve_with(
        presets: &Presets,
        model: &str,
        hardware: &str,
        options: &[(String, String)],
        profile: Option<&Path>,
    ) -> Result<SimSetup, SimError> {
        let hw = presets.hardware(hardware)?.clone();
        let shape = load_model(presets, model)?;
        Self::from_parts(shape, hw, options, profile)
    }

    /// Builds a setup from an explicit model shape and hardware description.
    pub fn from_parts(
        mut model: ModelShape,
        hardware: HardwareSpec,
        options: &[(String, String)],
        profile: Option<&Path>,
    ) -> Result<SimSetup, SimError> {
        let mut stack = hardware.stack.clone();
        if let Some(path) = profile {
            stack.apply_file(path)?;
        }
        let mut opts = ServingOptions::parse(options, &model, &hardware, &mut stack)?;
        if let Some(p) = opts.precision {
            model.precision = p;
            model.attention_precision = None;
        }
        let mut memory = plan_memory(&model, &hardware, &opts, &stack)?;
        let mut notes = Vec::new();
        if opts.nodes_derived && opts.nodes > 1 {
            notes.push(format!(
                "{} on {} ({} GPU{} per node): {} nodes",
                opts.parallel_text(),
                hardware.name,
                hardware.gpus_per_node,
                if hardware.gpus_per_node == 1 { "" } else { "s" },
                opts.nodes
            ));
        }
        if opts.sync_for_ray {
            notes.push(format!(
                "no async scheduling: one engine of {} spans {} machines, which vLLM runs on its Ray \
                 executor, and that has none (async-scheduling=true to override)",
                opts.parallel_text(),
                opts.nodes
            ));
        }
        let max_model_len = match opts.max_model_len {
            Some(len) => {
                let blocks = u64::from(len).div_ceil(u64::from(opts.block_size));
                let needed = memory.layout.units_for_blocks(blocks);
                if needed > memory.layout.total_units {
                    let unit_gib = memory.kv_gib / memory.layout.total_units.max(1) as f64;
                    return Err(SimError::MaxModelLenTooLong {
                        max_model_len: len,
                        needed_gib: needed as f64 * unit_gib,
                        kv_gib: memory.kv_gib,
                        fit_tokens: memory.kv_tokens,
                    });
                }
                len
            }
            None => {
                let fit = u32::try_from(memory.kv_tokens).unwrap_or(u32::MAX);
                if fit < model.max_context {
                    notes.push(format!(
                        "max-model-len lowered from {} to {fit}, the most the KV cache holds",
                        model.max_context
                    ));
                }
                model.max_context.min(fit)
            }
        };
        notes.push(format!(
            "{} on {} x{} ({}): weights {:.1} GiB/GPU, KV cache {:.1} GiB/GPU = {} tokens, \
             max-num-seqs {}, max-num-batched-tokens {}",
            model.id,
            hardware.name,
            opts.gpus(),
            opts.parallel_text(),
            memory.weights_gib,
            memory.kv_gib,
            memory.kv_tokens,
            opts.max_num_seqs,
            opts.max_num_batched_tokens
        ));
        if model.precision.dequantizes_mxfp4_experts(model.moe.is_some(), &hardware.peak_tflops) {
            use crate::precision::Mxfp4Backend::{Marlin, Triton};
            notes.push(
                match (opts.mxfp4_backend, hardware.mxfp4_backend) {
                    (Marlin, Marlin) => {
                        "MXFP4 experts priced as Marlin's dequantizing kernels (mxfp4-backend=marlin; vLLM takes \
                     Triton's on Hopper where its triton_kernels package is installed: mxfp4-backend=triton)"
                    }
                    (Marlin, Triton) => "MXFP4 experts priced as Marlin's dequantizing kernels (mxfp4-backend=marlin)",
                    (Triton, Triton) => {
                        "MXFP4 experts priced as vLLM's Triton kernels, the ones it runs on ROCm \
                     (mxfp4-backend=marlin prices Marlin's)"
                    }
                    (Triton, Marlin) => "MXFP4 experts priced as vLLM's Triton kernels (mxfp4-backend=triton)",
                }
                .to_string(),
            );
        }
        if let Some((e, n)) = crate::cost::tiles::untuned_bf16_experts(&model, &opts, &hardware) {
            notes.push(format!(
                "vLLM ships no tuned fused-MoE tiles for these BF16 experts (E={e},N={n}) on {}: their products \
                 are priced at vLLM's default tile, {:.2} of the tuned ceiling",
                hardware.device_name,
                crate::cost::tiles::DEFAULT_TILE_RATE
            ));
        }
        if opts.dp > 1 {
            let dp = opts.dp;
            opts.max_num_seqs = opts.max_num_seqs.saturating_mul(dp);
            opts.max_num_batched_tokens = opts.max_num_batched_tokens.saturating_mul(dp);
            memory.layout.total_units = memory.layout.total_units.saturating_mul(u64::from(dp));
            notes.push(format!(
                "dp={dp}: the {dp} engines are simulated as one scheduler with {dp}x the KV pool, \
                 max-num-seqs {} and max-num-batched-tokens {} (load balancing between engines is not modelled)",
                opts.max_num_seqs, opts.max_num_batched_tokens
            ));
        }
        Ok(SimSetup { model, hardware, options: opts, max_model_len, stack, memory, notes })
    }

    /// The prediction band of this deployment: the device's, saying so when the deployment's
    /// tensor-parallel size is outside those its errors were measured at, and widened for a
    /// model other than those they were measured on.
    pub fn uncertainty(&self) -> crate::hardware::Uncertainty {
        let mut band = self.hardware.uncertainty.for_tp(self.options.tp).for_model(&self.model.id);
        let dequantizes =
            self.model.precision.dequantizes_mxfp4_experts(self.model.moe.is_some(), &self.hardware.peak_tflops);
        if dequantizes && self.options.mxfp4_backend != self.hardware.mxfp4_backend {
            let kernels = match self.options.mxfp4_backend {
                crate::precision::Mxfp4Backend::Triton => "Triton's",
                crate::precision::Mxfp4Backend::Marlin => "Marlin's",
            };
            band.source.push_str(&format!(
                "; the experts are priced as {kernels} kernels, not the device's own that these errors come with"
            ));
        }
        band
    }
}

/// A preset by id, or a config.json path (a folder means its config.json).
fn load_model(presets: &Presets, model: &str) -> Result<ModelShape, SimError> {
    let path = Path::new(model);
    let looks_like_path = model.ends_with(".json") || path.is_dir() || path.is_file();
    if !looks_like_path {
        return Ok(presets.model(model)?.clone());
    }
    let file = if path.is_dir() { path.join("config.json") } else { path.to_path_buf() };
    let origin = file.display().to_string();
    let text = std::fs::read_to_string(&file)
        .map_err(|e| SimError::ModelConfig { path: origin.clone(), message: e.to_string() })?;
    ModelShape::from_hf_config_at(&text, &origin)
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Weight bytes on the most loaded GPU: one pipeline stage's share of the transformer blocks,
/// split over `tp` (MLA's down-projections whole on every rank, routed experts over
/// [`ServingOptions::expert_shards`]: whole experts, the busiest GPU taking the rounded-up share,
/// with expert parallelism), plus the embeddings (and lm_head with one stage) split over `tp`.
/// `mxfp4` names the kernels whose layout dequantized MXFP4 experts take (None for other
/// experts): they hold more than the checkpoint ([`Mxfp4Backend::expert_memory_factor`]).
pub fn weight_bytes_per_gpu(model: &ModelShape, opts: &ServingOptions, mxfp4: Option<Mxfp4Backend>) -> f64 {
    let tp = f64::from(opts.tp);
    let layers = f64::from(model.layers);
    let stage_fraction = f64::from(model.layers.div_ceil(opts.pp)) / layers;
    let attn_b = model.attention_precision().bytes_per_param();
    let w_b = model.precision.bytes_per_param();
    let replicated = model.attention_replicated_params();
    let attention = layers * ((model.attention_params() - replicated) / tp + replicated) * attn_b;
    let always = (f64::from(model.dense_ffn_layers()) * model.dense_ffn_params()
        + f64::from(model.moe_layers()) * model.moe_always_params())
        * w_b
        / tp;
    let experts_per_gpu = model.moe.as_ref().map_or(0.0, |m| {
        if opts.expert_parallel {
            f64::from(m.experts.div_ceil(opts.expert_shards().max(1)))
        } else {
            f64::from(m.experts) / tp
        }
    });
    let layout = match (mxfp4, model.moe.as_ref()) {
        (Some(kernels), Some(m)) => {
            let shard =
                if opts.expert_parallel { m.expert_intermediate } else { m.expert_intermediate / opts.tp.max(1) };
            kernels.expert_memory_factor(model.hidden, shard)
        }
        _ => 1.0,
    };
    let experts = f64::from(model.moe_layers()) * experts_per_gpu * model.expert_params() * w_b * layout;
    let embedding_bytes = model.embedding_params() * 2.0;
    let heads = if opts.pp == 1 && !model.tied_embeddings { 2.0 } else { 1.0 };
    let extra = model.extra_params_b * 1e9 * 2.0;
    (attention + always + experts) * stage_fraction + (heads * embedding_bytes + extra) / tp
}

/// The sequences the stack's activation reserves are stated at: vLLM's default `max-num-seqs`
/// on the large GPUs they were calibrated on.
const RESERVE_SEQS: u32 = 1024;

/// Bytes per vocabulary entry of the sampler's working set that vLLM's memory profiling runs for
/// `max-num-seqs` rows: the logits and probabilities in FP32 and the sort top-k/top-p does on
/// them (FP32 values, int64 indices).
const SAMPLER_BYTES_PER_LOGIT: f64 = 20.0;

/// Memory each GPU keeps outside weights and KV cache: the stack's reserve (CUDA graphs,
/// workspaces, the profiled peak of a forward pass and of the sampler), stated at
/// 1,024 sequences, less the sampler rows a smaller `max-num-seqs` does not profile
/// (2.9 GiB for gpt-oss's 201,088-entry vocabulary at 256 sequences, vLLM's default on the A100),
/// and never below a quarter of the reserve.
pub fn activation_reserve_gib(model: &ModelShape, opts: &ServingOptions, stack: &StackProfile) -> f64 {
    let reserve = if model.moe.is_some() { stack.activation_reserve_moe_gib } else { stack.activation_reserve_gib };
    let rows = f64::from(RESERVE_SEQS.saturating_sub(opts.max_num_seqs));
    (reserve - rows * f64::from(model.vocab) * SAMPLER_BYTES_PER_LOGIT / GIB).max(reserve / 4.0)
}

/// Sizes the KV pool of one GPU (the most loaded pipeline stage of one data-parallel rank).
pub fn plan_memory(
    model: &ModelShape,
    hw: &HardwareSpec,
    opts: &ServingOptions,
    stack: &StackProfile,
) -> Result<MemoryPlan, SimError> {
    let pp = opts.pp;
    // Dequantized MXFP4 experts take the layout of the kernels vLLM runs on the device, unless
    // other kernels were asked for.
    let mxfp4 = model
        .precision
        .dequantizes_mxfp4_experts(model.moe.is_some(), &hw.peak_tflops)
        .then_some(if opts.mxfp4_backend == hw.mxfp4_backend { hw.mxfp4_layout } else { opts.mxfp4_backend });
    let weights_gib = weight_bytes_per_gpu(model, opts, mxfp4) / GIB;
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
    let g = gcd(full_stage, sliding_stage).max(1);
    let per_token_layer = model.kv_bytes_per_token_layer(opts.kv_cache_dtype, opts.tp);
    let unit_bytes = f64::from(opts.block_size) * per_token_layer * f64::from(g);
    let total_units = (kv_gib * GIB / unit_bytes).floor() as u64;
    let layout = KvLayout {
        block_size: opts.block_size,
        total_units,
        units_per_block: full_stage / g,
        sliding_units_per_block: sliding_stage / g,
        sliding_cap_blocks: if sliding_stage == 0 { 0 } else { window.div_ceil(opts.block_size).saturating_add(1) },
    };
    let kv_tokens = layout.max_tokens_single();
    if kv_tokens < u64::from(opts.block_size) {
        return Err(does_not_fit());
    }
    Ok(MemoryPlan {
        device_gib: hw.memory_gib,
        utilization: opts.gpu_memory_utilization,
        weights_gib,
        reserve_gib,
        kv_gib,
        kv_bytes_per_token: per_token_layer * f64::from(full_stage + sliding_stage),
        layout,
        kv_tokens,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(model: &str, hw: &str, pairs: &[(&str, &str)]) -> Result<SimSetup, SimError> {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        SimSetup::resolve_with(&Presets::embedded().unwrap(), model, hw, &pairs, None)
    }

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
    fn the_notes_say_which_kernels_price_mxfp4_experts() {
        let says = |hw: &str, pairs: &[(&str, &str)]| {
            let s = setup("openai/gpt-oss-120b", hw, pairs).unwrap();
            s.notes.iter().find(|n| n.starts_with("MXFP4 experts")).cloned()
        };
        assert!(says("h100-sxm", &[]).unwrap().contains("Marlin's dequantizing kernels (mxfp4-backend=marlin"));
        assert!(says("h100-sxm", &[("mxfp4-backend", "triton")]).unwrap().contains("vLLM's Triton kernels"));
        let triton = setup("openai/gpt-oss-120b", "h100-sxm", &[("tp", "2"), ("mxfp4-backend", "triton")]).unwrap();
        assert!(
            triton
                .uncertainty()
                .source
                .ends_with("priced as Triton's kernels, not the device's own that these errors come with")
        );
        // On ROCm Triton's are the device's own: the band says nothing of them, and of Marlin's
        // when chosen there.
        assert!(says("mi300x", &[]).unwrap().contains("the ones it runs on ROCm"));
        let rocm = setup("openai/gpt-oss-120b", "mi300x", &[]).unwrap();
        assert!(!rocm.uncertainty().source.contains("priced as"));
        let marlin = setup("openai/gpt-oss-120b", "mi300x", &[("mxfp4-backend", "marlin")]).unwrap();
        assert!(
            marlin
                .uncertainty()
                .source
                .ends_with("priced as Marlin's kernels, not the device's own that these errors come with")
        );
        // On parts whose MXFP4 experts take FP8 activations there is no such choice to note.
        assert_eq!(says("b200", &[]), None);
        assert!(setup("Qwen/Qwen3-8B", "h100-sxm", &[]).unwrap().notes.iter().all(|n| !n.contains("MXFP4")));
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
    fn a_model_that_does_not_fit_says_so_with_the_numbers() {
        let err = setup("Qwen/Qwen3-VL-235B-A22B-Instruct-FP8", "rtx-4090", &[]).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, SimError::DoesNotFit { .. }));
        assert!(msg.contains("does not fit on rtx-4090"), "{msg}");
        assert!(msg.contains("GiB per GPU") && msg.contains("23.6 GiB"), "{msg}");
        if let SimError::DoesNotFit { weights_gib, .. } = err {
            assert!(weights_gib > 200.0 && weights_gib < 240.0, "{weights_gib}");
        }
        // Spread over 8 B200s it fits.
        assert!(setup("Qwen/Qwen3-VL-235B-A22B-Instruct-FP8", "b200", &[("tp", "4")]).is_ok());
    }

    #[test]
    fn max_model_len_is_checked_or_derived() {
        let err = setup("Qwen/Qwen3-8B", "rtx-4090", &[("max-model-len", "40960")]);
        // 8B BF16 on a 24 GB card barely fits; a 40k context does not.
        let msg = err.unwrap_err().to_string();
        assert!(msg.contains("max-model-len=40960") && msg.contains("GiB"), "{msg}");
        let s = setup("Qwen/Qwen3-4B", "rtx-4090", &[]).unwrap();
        assert!(u64::from(s.max_model_len) <= s.memory.kv_tokens);
        let scout = setup("nvidia/Llama-4-Scout-17B-16E-Instruct-NVFP4", "h100-sxm", &[("tp", "4")]).unwrap();
        assert!(scout.max_model_len < 10_485_760);
        assert!(scout.notes.iter().any(|n| n.contains("lowered")));
    }

    #[test]
    fn a_config_json_path_resolves_like_a_preset() {
        let path = format!("{}/testdata/hf-configs/qwen3-8b.json", env!("CARGO_MANIFEST_DIR"));
        let from_file = setup(&path, "h100-sxm", &[]).unwrap();
        let from_preset = setup("Qwen/Qwen3-8B", "h100-sxm", &[]).unwrap();
        assert_eq!(from_file.memory, from_preset.memory);
        let err = setup("/nonexistent/config.json", "h100-sxm", &[]).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/config.json"), "{err}");
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
    fn expert_parallel_spreads_whole_experts_and_dp_replicates_the_rest() {
        let r1 = |pairs: &[(&str, &str)]| setup("deepseek-ai/DeepSeek-R1", "h200", pairs).unwrap().memory.weights_gib;
        // tp=8 slices every expert 8 ways, ep over tp=8 gives each GPU 32 whole experts: same bytes.
        assert!((r1(&[("tp", "8")]) - r1(&[("tp", "8"), ("ep", "true")])).abs() < 1e-9);
        // dp=8 with ep: each GPU holds all of attention, the dense layers and the embeddings but only
        // 32 experts, 93.8 GiB.
        let dp_ep = r1(&[("dp", "8"), ("ep", "true")]);
        assert!((dp_ep - 93.79).abs() < 0.02, "{dp_ep}");
        // tp=8 x dp=2 with ep: 16 experts per GPU, 58 x 16 x 44 040 192 B fewer than without ep.
        let saved = r1(&[("tp", "8"), ("dp", "2")]) - r1(&[("tp", "8"), ("dp", "2"), ("ep", "true")]);
        assert!((saved - 58.0 * 16.0 * 44_040_192.0 / GIB).abs() < 1e-6, "{saved}");
    }

    #[test]
    fn data_parallel_ranks_are_simulated_as_one_larger_scheduler() {
        let one = setup("Qwen/Qwen3-30B-A3B", "h100-sxm", &[("max-num-seqs", "256")]).unwrap();
        let two = setup("Qwen/Qwen3-30B-A3B", "h100-sxm", &[("max-num-seqs", "256"), ("dp", "2")]).unwrap();
        assert_eq!(two.memory.weights_gib, one.memory.weights_gib);
        assert_eq!(two.memory.kv_gib, one.memory.kv_gib);
        assert_eq!(two.memory.layout.total_units, 2 * one.memory.layout.total_units);
        assert_eq!(two.memory.kv_tokens, one.memory.kv_tokens);
        assert_eq!(two.max_model_len, one.max_model_len);
        assert_eq!((two.options.max_num_seqs, two.options.max_num_batched_tokens), (512, 16384));
        assert_eq!(two.options.gpus(), 2);
        assert!(two.notes.iter().any(|n| n.contains("dp=2") && n.contains("one scheduler")), "{:?}", two.notes);
        assert!(!one.notes.iter().any(|n| n.contains("one scheduler")));
    }

    #[test]
    fn one_gpu_per_node_hardware_takes_as_many_nodes_as_gpus() {
        let s = setup("openai/gpt-oss-120b", "dgx-spark", &[("tp", "4")]).unwrap();
        assert_eq!(s.options.nodes, 4);
        assert!(s.notes.iter().any(|n| n == "tp=4 on dgx-spark (1 GPU per node): 4 nodes"), "{:?}", s.notes);
        let err = setup("openai/gpt-oss-120b", "dgx-spark", &[("tp", "4"), ("nodes", "3")]).unwrap_err().to_string();
        assert!(err.contains("nodes=3") && err.contains("raise nodes"), "{err}");
        let one = setup("openai/gpt-oss-120b", "h100-sxm", &[("tp", "4")]).unwrap();
        assert!(!one.notes.iter().any(|n| n.contains("nodes")), "{:?}", one.notes);
    }

    #[test]
    fn mxfp4_experts_take_the_memory_of_the_kernels_vllm_runs_on_the_device() {
        // gpt-oss-120b on one GPU: the checkpoint's 60.7 GiB; vLLM logs 64.38 GiB with Triton's
        // kernels (Hopper's images) and 65.97 with Marlin's (every part before Hopper).
        let gib = |hw: &str, opts: &[(&str, &str)]| setup("openai/gpt-oss-120b", hw, opts).unwrap().memory.weights_gib;
        let (h100, a100) = (gib("h100-sxm", &[]), gib("a100-80g", &[]));
        assert!((h100 - 64.38).abs() < 0.5, "{h100}");
        assert!((a100 - 65.97).abs() < 0.3, "{a100}");
        // Other kernels asked for bring their own layout; the pricing default keeps the device's.
        assert_eq!(gib("a100-80g", &[("mxfp4-backend", "triton")]), h100);
        assert_eq!(gib("h100-sxm", &[("mxfp4-backend", "marlin")]), h100);
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
        let one = setup("Qwen/Qwen3-8B", "l4", &[("max-num-seqs", "1")]).unwrap();
        assert!((one.memory.reserve_gib - (4.17 - 1023.0 * 151_936.0 * 20.0 / GIB)).abs() < 1e-9);
        let gemma = setup("google/gemma-3-1b-it", "l4", &[("max-num-seqs", "1")]).unwrap();
        assert_eq!(gemma.memory.reserve_gib, 4.17 / 4.0, "262,144 logits a row would take it all");
    }
}
