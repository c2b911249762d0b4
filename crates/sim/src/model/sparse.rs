//! DeepSeek sparse attention (DeepSeek-V3.2): a lightning indexer scores every cached token for
//! each query, and the attention itself reads only the `top_k` best.
//!
//! The indexer has its own small heads (64 of 128 in FP8, one shared key a token) and its own
//! cache of keys beside the MLA latents; vLLM replicates it on every tensor-parallel rank. Its
//! scores grow with the square of the context at prefill and with the context at decode; the
//! attention over the selected tokens grows no further than `top_k` a query.

use serde::{Deserialize, Serialize};

/// The indexer and selection of a sparse-attention model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseAttention {
    /// Tokens each query attends to (`index_topk`).
    pub top_k: u32,
    /// The indexer's query heads (`index_n_heads`), scored against one key a token.
    pub heads: u32,
    /// Width of an indexer head and key (`index_head_dim`).
    pub head_dim: u32,
    /// Layers that run an indexer of their own where the others reuse the top-k of the one
    /// before (GLM-5.2's `indexer_types`, `full` against `shared`); unset: every layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indexer_layers: Option<u32>,
}

/// Tokens the indexer's keys are quantized in blocks of (one FP32 scale a block).
const KEY_SCALE_BLOCK: f64 = 128.0;

impl SparseAttention {
    /// Parameters of one layer's indexer: the query projection from the compressed query
    /// (`wq_b`), the key projection from the hidden state (`wk`) and the heads' weights
    /// (`weights_proj`). vLLM replicates them on every rank.
    pub fn params(&self, hidden: u32, q_lora_rank: u32) -> f64 {
        let (h, d, heads) = (f64::from(hidden), f64::from(self.head_dim), f64::from(self.heads));
        f64::from(q_lora_rank) * heads * d + h * d + h * heads
    }

    /// FLOPs of scoring one query against one cached key in one layer: every indexer head's
    /// dot product (FP8).
    pub fn flops_per_pair(&self) -> f64 {
        2.0 * f64::from(self.heads) * f64::from(self.head_dim)
    }

    /// Bytes of one token's indexer key in one layer's cache: the key in FP8 and a scale a
    /// block of 128 values (132 for DeepSeek-V3.2).
    pub fn key_bytes(&self) -> f64 {
        let d = f64::from(self.head_dim);
        d + 4.0 * (d / KEY_SCALE_BLOCK).ceil()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deepseek_v3_2_s_indexer_by_hand() {
        let s = SparseAttention { top_k: 2048, heads: 64, head_dim: 128, indexer_layers: None };
        // wq_b 1536 x 64 x 128, wk 7168 x 128, weights_proj 7168 x 64.
        assert_eq!(s.params(7168, 1536), 1536.0 * 8192.0 + 7168.0 * 128.0 + 7168.0 * 64.0);
        assert_eq!(s.flops_per_pair(), 16_384.0);
        assert_eq!(s.key_bytes(), 132.0);
    }
}
