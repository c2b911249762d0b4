//! The shape a multi-token-prediction drafter runs: one more decoder layer of the model itself.

use super::ModelShape;

impl ModelShape {
    /// The layer a model's multi-token prediction (`mtp`) runs for each draft token: one decoder
    /// layer of the model's own shape, with full attention (a hybrid's MTP layer attends; it has
    /// no linear-attention state) and, in a mixture of experts, the routed experts (DeepSeek's,
    /// GLM's and Qwen3-Next's MTP layers are MoE layers), then the shared LM head.
    pub fn mtp_layer(&self) -> ModelShape {
        let mut layer = self.clone();
        layer.id = format!("{} (MTP layer)", self.id);
        layer.aliases.clear();
        layer.layers = 1;
        layer.mixer_only_layers = 0;
        layer.bf16_mixers = layer.bf16_mixers.min(1);
        layer.linear = None;
        layer.sliding = None;
        if let Some(moe) = layer.moe.as_mut() {
            moe.dense_layers = 0;
        }
        layer
    }
}

#[cfg(test)]
mod tests {
    use crate::presets::Presets;

    #[test]
    fn an_mtp_layer_is_one_full_attention_layer_of_the_model_with_its_experts() {
        let presets = Presets::embedded().unwrap();
        let r1 = presets.model("deepseek-ai/DeepSeek-R1").unwrap().mtp_layer();
        assert_eq!((r1.layers, r1.moe_layers(), r1.full_attention_layers()), (1, 1, 1));
        assert!(r1.mla.is_some());
        assert!(r1.validate().is_ok());
        let next = presets.model("Qwen/Qwen3-Next-80B-A3B-Instruct").unwrap();
        assert!(next.linear.is_some());
        let layer = next.mtp_layer();
        assert_eq!((layer.layers, layer.linear_layers(), layer.moe_layers()), (1, 0, 1));
        assert!(layer.validate().is_ok());
    }
}
