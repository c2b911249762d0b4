//! Model shapes: the handful of config.json numbers that decide weight bytes, KV bytes per token
//! and FLOPs per token, with those derived quantities.
//!
//! Presets are TOML files (`presets/models/`); [`ModelShape::from_hf_config`] builds the same struct from a
//! Hugging Face config.json.

use serde::{Deserialize, Serialize};

use crate::error::SimError;
use crate::precision::{KvDtype, Precision};

/// A transformer's shape, as far as serving cost is concerned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelShape {
    /// The Hugging Face id (or the config file it was read from).
    pub id: String,
    pub layers: u32,
    pub hidden: u32,
    /// Query heads.
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    /// Width of the dense (gated) FFN; unused when every layer is MoE.
    pub intermediate: u32,
    pub vocab: u32,
    /// The lm_head shares the embedding matrix.
    pub tied_embeddings: bool,
    /// Format of the transformer-block weights (embeddings and lm_head stay 16-bit).
    pub precision: Precision,
    /// Format of the attention projections when it differs (gpt-oss keeps them in BF16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_precision: Option<Precision>,
    /// The longest context the model supports (`max_position_embeddings`).
    pub max_context: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<MoeShape>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding: Option<SlidingWindow>,
    /// Parameters outside the language model (a vision tower), billions: memory only.
    #[serde(default)]
    pub extra_params_b: f64,
}

/// Mixture-of-experts FFN layers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeShape {
    /// Routed experts per layer.
    pub experts: u32,
    /// Experts each token is routed to.
    pub top_k: u32,
    /// Width of one routed expert's gated FFN.
    pub expert_intermediate: u32,
    /// Always-active shared experts per layer.
    #[serde(default)]
    pub shared_experts: u32,
    /// Width of a shared expert (default: the routed expert's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_intermediate: Option<u32>,
    /// Layers that keep a dense FFN (GLM's `first_k_dense_replace`, interleaved layers).
    #[serde(default)]
    pub dense_layers: u32,
}

/// Layers whose attention looks back at most `window` tokens (sliding or chunked attention).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlidingWindow {
    pub window: u32,
    /// How many layers use the window; the rest attend to the full context.
    pub layers: u32,
}

impl ModelShape {
    /// Reads a model preset; `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, SimError> {
        let shape: ModelShape = toml::from_str(text)
            .map_err(|e| SimError::Preset { origin: origin.to_string(), message: e.to_string() })?;
        shape.validate().map_err(|message| SimError::Preset { origin: origin.to_string(), message })?;
        Ok(shape)
    }

    /// Checks that the numbers describe a buildable model.
    pub fn validate(&self) -> Result<(), String> {
        let dims = [
            ("layers", self.layers),
            ("hidden", self.hidden),
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
            ("head_dim", self.head_dim),
            ("vocab", self.vocab),
            ("max_context", self.max_context),
        ];
        for (name, v) in dims {
            if v == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(format!("heads ({}) must be a multiple of kv_heads ({})", self.heads, self.kv_heads));
        }
        if let Some(m) = &self.moe {
            if m.experts == 0 || m.top_k == 0 || m.top_k > m.experts {
                return Err(format!("moe.top_k ({}) must be between 1 and moe.experts ({})", m.top_k, m.experts));
            }
            if m.expert_intermediate == 0 {
                return Err("moe.expert_intermediate must be at least 1".into());
            }
            if m.dense_layers > self.layers {
                return Err(format!("moe.dense_layers ({}) exceeds layers ({})", m.dense_layers, self.layers));
            }
        }
        if self.dense_ffn_layers() > 0 && self.intermediate == 0 {
            return Err("intermediate must be at least 1 when some layers have a dense FFN".into());
        }
        if let Some(s) = &self.sliding
            && (s.window == 0 || s.layers > self.layers)
        {
            return Err(format!(
                "sliding.window must be at least 1 and sliding.layers ({}) at most layers ({})",
                s.layers, self.layers
            ));
        }
        if !(self.extra_params_b.is_finite() && self.extra_params_b >= 0.0) {
            return Err("extra_params_b must be zero or positive".into());
        }
        Ok(())
    }

    /// The format of the attention projections.
    pub fn attention_precision(&self) -> Precision {
        self.attention_precision.unwrap_or(self.precision)
    }

    /// Layers with an MoE FFN.
    pub fn moe_layers(&self) -> u32 {
        self.moe.as_ref().map_or(0, |m| self.layers.saturating_sub(m.dense_layers))
    }

    /// Layers with a dense FFN.
    pub fn dense_ffn_layers(&self) -> u32 {
        self.layers - self.moe_layers()
    }

    /// Layers attending to a window, and the window (0 layers when there is none).
    pub fn sliding_layers(&self) -> (u32, u32) {
        self.sliding.as_ref().map_or((0, 0), |s| (s.layers, s.window))
    }

    /// Layers attending to the full context.
    pub fn full_attention_layers(&self) -> u32 {
        self.layers - self.sliding_layers().0
    }

    /// q, k, v and o projection parameters of one layer.
    pub fn attention_params(&self) -> f64 {
        let h = f64::from(self.hidden);
        let q = f64::from(self.heads) * f64::from(self.head_dim);
        let kv = f64::from(self.kv_heads) * f64::from(self.head_dim);
        h * q * 2.0 + h * kv * 2.0
    }

    /// Parameters of one dense gated FFN.
    pub fn dense_ffn_params(&self) -> f64 {
        3.0 * f64::from(self.hidden) * f64::from(self.intermediate)
    }

    /// Parameters of one routed expert (0 without MoE).
    pub fn expert_params(&self) -> f64 {
        self.moe.as_ref().map_or(0.0, |m| 3.0 * f64::from(self.hidden) * f64::from(m.expert_intermediate))
    }

    /// Parameters of one MoE layer that every token uses: shared experts and the router.
    pub fn moe_always_params(&self) -> f64 {
        self.moe.as_ref().map_or(0.0, |m| {
            let shared_inter = m.shared_intermediate.unwrap_or(m.expert_intermediate);
            let h = f64::from(self.hidden);
            f64::from(m.shared_experts) * 3.0 * h * f64::from(shared_inter) + h * f64::from(m.experts)
        })
    }

    /// One embedding (or lm_head) matrix.
    pub fn embedding_params(&self) -> f64 {
        f64::from(self.vocab) * f64::from(self.hidden)
    }

    /// Parameters of the transformer blocks (without embeddings and lm_head).
    pub fn block_params(&self) -> f64 {
        let experts = self.moe.as_ref().map_or(0.0, |m| f64::from(m.experts));
        f64::from(self.layers) * self.attention_params()
            + f64::from(self.dense_ffn_layers()) * self.dense_ffn_params()
            + f64::from(self.moe_layers()) * (experts * self.expert_params() + self.moe_always_params())
    }

    /// Every language-model parameter, embeddings included (billions × 1e9).
    pub fn total_params(&self) -> f64 {
        let heads = if self.tied_embeddings { 1.0 } else { 2.0 };
        self.block_params() + heads * self.embedding_params()
    }

    /// Parameters a token touches (routed experts counted `top_k` times), embeddings included.
    pub fn active_params(&self) -> f64 {
        let heads = if self.tied_embeddings { 1.0 } else { 2.0 };
        let k = self.moe.as_ref().map_or(0.0, |m| f64::from(m.top_k));
        f64::from(self.layers) * self.attention_params()
            + f64::from(self.dense_ffn_layers()) * self.dense_ffn_params()
            + f64::from(self.moe_layers()) * (k * self.expert_params() + self.moe_always_params())
            + heads * self.embedding_params()
    }

    /// Bytes of all weights held in memory (vision tower included), over all GPUs.
    pub fn weight_bytes(&self) -> f64 {
        let attn = f64::from(self.layers) * self.attention_params() * self.attention_precision().bytes_per_param();
        let rest =
            (self.block_params() - f64::from(self.layers) * self.attention_params()) * self.precision.bytes_per_param();
        let heads = if self.tied_embeddings { 1.0 } else { 2.0 };
        attn + rest + heads * self.embedding_params() * 2.0 + self.extra_params_b * 1e9 * 2.0
    }

    /// KV heads each tensor-parallel rank stores (replicated when there are fewer than ranks).
    pub fn kv_heads_per_rank(&self, tp: u32) -> u32 {
        (self.kv_heads / tp.max(1)).max(1)
    }

    /// KV bytes one token occupies in one layer on one rank.
    pub fn kv_bytes_per_token_layer(&self, dtype: KvDtype, tp: u32) -> f64 {
        2.0 * f64::from(self.kv_heads_per_rank(tp)) * f64::from(self.head_dim) * dtype.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qwen3_8b() -> ModelShape {
        ModelShape {
            id: "Qwen/Qwen3-8B".into(),
            layers: 36,
            hidden: 4096,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            intermediate: 12288,
            vocab: 151_936,
            tied_embeddings: false,
            precision: Precision::Bf16,
            attention_precision: None,
            max_context: 40960,
            moe: None,
            sliding: None,
            extra_params_b: 0.0,
        }
    }

    #[test]
    fn dense_counts_match_the_published_size() {
        let m = qwen3_8b();
        // Published: 8.19 B parameters, 144 KiB of BF16 KV per token.
        assert!((m.total_params() / 1e9 - 8.19).abs() < 0.02, "{}", m.total_params());
        let kv = m.kv_bytes_per_token_layer(KvDtype::Auto, 1) * f64::from(m.layers);
        assert_eq!(kv, 144.0 * 1024.0);
        assert_eq!(m.kv_bytes_per_token_layer(KvDtype::Fp8, 2) * 36.0, kv / 4.0);
        assert_eq!(m.kv_heads_per_rank(16), 1);
    }

    #[test]
    fn invalid_shapes_are_rejected_with_the_reason() {
        let mut m = qwen3_8b();
        m.kv_heads = 5;
        assert!(m.validate().unwrap_err().contains("kv_heads"));
        let mut m = qwen3_8b();
        m.moe = Some(MoeShape {
            experts: 8,
            top_k: 9,
            expert_intermediate: 10,
            shared_experts: 0,
            shared_intermediate: None,
            dense_layers: 0,
        });
        assert!(m.validate().unwrap_err().contains("top_k"));
    }
}
