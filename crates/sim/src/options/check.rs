//! The checks of a deployment's options against its model and hardware: GPUs the layout asks
//! for, node counts and links, expert and data parallelism, formats and context lengths the
//! model and device support. A conflict is refused with what to change.

use super::{MAX_GPUS, ServingOptions};
use crate::cost::quick_reduce::QuickReduce;
use crate::error::SimError;
use crate::hardware::HardwareSpec;
use crate::model::ModelShape;

impl ServingOptions {
    pub(super) fn check(&self, model: &ModelShape, hw: &HardwareSpec) -> Result<(), SimError> {
        let conflict = |s: String| Err(SimError::Conflict(s));
        if self.speculative.is_some() && self.pp > 1 {
            return conflict(format!(
                "speculative decoding with pp={} is not modelled (vLLM's drafters run beside one pipeline stage); \
                 use tp instead of pp, or drop speculative-config",
                self.pp
            ));
        }
        let gpus = u64::from(self.tp) * u64::from(self.pp) * u64::from(self.dp);
        if gpus > u64::from(MAX_GPUS) {
            return conflict(format!(
                "tp x pp x dp = {} x {} x {} = {gpus} GPUs; the simulator models at most {MAX_GPUS}; \
                 lower tp, pp or dp",
                self.tp, self.pp, self.dp
            ));
        }
        // vLLM turns it off by itself across nodes; a device without it is a mistake.
        let node_link = self.interconnect.as_ref().or(hw.intra_node.as_ref());
        if self.quick_reduce != QuickReduce::None && !node_link.is_some_and(|l| l.quick_reduce) {
            return conflict(format!(
                "quick-reduce is ROCm's QuickReduce, which vLLM runs within a node of MI300X, MI325X or MI355X; \
                 {} has none: drop quick-reduce",
                hw.name
            ));
        }
        if self.fuse_allreduce_rms && node_link.is_none_or(|l| l.norm_fusion.is_none()) {
            return conflict(format!(
                "fuse-allreduce-rms is FlashInfer's fused all-reduce and RMSNorm, which vLLM runs within a node of \
                 Hopper or Blackwell GPUs (H100, H200, B200, GB200); {} has none: drop fuse-allreduce-rms",
                hw.name
            ));
        }
        if !splits_attention(model, self.tp) {
            let fits: Vec<String> =
                (1..=model.heads.min(64)).filter(|&tp| splits_attention(model, tp)).map(|tp| tp.to_string()).collect();
            let why = if model.heads.is_multiple_of(self.tp) {
                format!(
                    "tp={} and the {} KV heads of {} do not split evenly (one must divide the other)",
                    self.tp, model.kv_heads, model.id
                )
            } else {
                format!("tp={} does not divide the {} attention heads of {}", self.tp, model.heads, model.id)
            };
            return conflict(format!("{why}; use one of {}", fits.join(", ")));
        }
        if self.pp > model.layers {
            return conflict(format!("pp={} is more than the {} layers of {}", self.pp, model.layers, model.id));
        }
        let precision = self.precision.unwrap_or(model.precision);
        if let Some(why) = self.mxfp4_backend.refusal(&model.id, precision, model.moe.is_some(), hw) {
            return conflict(why);
        }
        if self.expert_parallel {
            let Some(moe) = &model.moe else {
                return conflict(format!(
                    "enable-expert-parallel needs a mixture-of-experts model, but {} is dense; \
                     drop enable-expert-parallel",
                    model.id
                ));
            };
            if moe.experts < self.expert_shards() {
                return conflict(format!(
                    "enable-expert-parallel spreads the {} experts of {} over tp x dp = {} GPUs, \
                     more GPUs than experts; lower tp or dp, or drop enable-expert-parallel",
                    moe.experts,
                    model.id,
                    self.expert_shards()
                ));
            }
        }
        let available = hw.gpus_per_node.saturating_mul(self.nodes);
        if self.gpus() > available {
            return conflict(format!(
                "tp x pp x dp = {} GPUs, but nodes={} x {} GPUs per {} node = {}; raise nodes (or leave it \
                 out to derive it) or lower tp/pp/dp",
                self.gpus(),
                self.nodes,
                hw.gpus_per_node,
                hw.name,
                available
            ));
        }
        if self.nodes > 1 && self.gpus() <= hw.gpus_per_node.saturating_mul(self.nodes - 1) {
            return conflict(format!(
                "nodes={} but tp x pp x dp = {} fills only {} of them ({} GPUs per {} node); \
                 raise tp/pp/dp or lower nodes",
                self.nodes,
                self.gpus(),
                self.gpus().div_ceil(hw.gpus_per_node),
                hw.gpus_per_node,
                hw.name
            ));
        }
        if self.max_num_batched_tokens < self.max_num_seqs {
            return conflict(format!(
                "max-num-batched-tokens={} is smaller than max-num-seqs={}; vLLM requires \
                 max-num-batched-tokens >= max-num-seqs",
                self.max_num_batched_tokens, self.max_num_seqs
            ));
        }
        if let Some(len) = self.max_model_len
            && len > model.max_context
        {
            return conflict(format!(
                "max-model-len={len} is longer than the {} tokens {} supports",
                model.max_context, model.id
            ));
        }
        Ok(())
    }
}

/// Whether vLLM splits `model`'s attention over `tp` ranks: `tp` divides the query heads, and
/// divides or is divided by the KV heads (MLA's latent cache is whole on every rank, so its KV
/// heads constrain nothing).
fn splits_attention(model: &ModelShape, tp: u32) -> bool {
    let kv = model.kv_heads;
    let kv_split = if kv >= tp { kv.is_multiple_of(tp) } else { tp.is_multiple_of(kv) };
    model.heads.is_multiple_of(tp) && (model.mla.is_some() || kv_split)
}
