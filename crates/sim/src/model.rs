//! Model shapes: the handful of config.json numbers that decide weight bytes, KV bytes per token
//! and FLOPs per token, with those derived quantities.
//!
//! Presets are TOML files (`presets/models/`); [`ModelShape::from_hf_config`] builds the same struct from a
//! Hugging Face config.json. Attention is multi-head/grouped-query, or multi-head latent attention
//! ([`MlaShape`], DeepSeek-V2/V3/R1 and Kimi-K2); hybrid models keep some layers of Gated DeltaNet
//! linear attention or Mamba-2 ([`LinearAttention`], Qwen3-Next and Qwen3.5; Nemotron-H and
//! Nemotron 3, whose blocks hold one mixer or one FFN each: a layer here is a mixer and the FFN
//! after it, and the mixers beyond the FFNs stand alone, [`ModelShape::mixer_only_layers`]).

mod linear;

use serde::{Deserialize, Serialize};

pub use linear::{LinearAttention, LinearKind};

use crate::error::SimError;
use crate::precision::{KvDtype, Precision};

/// A transformer's shape, as far as serving cost is concerned.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelShape {
    /// The Hugging Face id (or the config file it was read from).
    pub id: String,
    /// Other Hugging Face ids of the same weights and shapes (the same checkpoint published by
    /// another organisation, or under another name), found as the id is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// Layers: a token mixer (attention or linear attention) and the FFN after it.
    pub layers: u32,
    /// Layers that have a mixer and no FFN (Nemotron-H's pattern, whose blocks are one mixer or
    /// one FFN each, has more mixers than FFNs): the FFNs, dense or MoE, are `layers` less these.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mixer_only_layers: u32,
    pub hidden: u32,
    /// Query heads.
    pub heads: u32,
    /// KV heads of grouped-query attention (with MLA: the config's `num_key_value_heads`, unused
    /// for sizes).
    pub kv_heads: u32,
    /// Per-head width (with MLA: the query/key head, `qk_nope_head_dim + qk_rope_head_dim`).
    pub head_dim: u32,
    /// Width of the dense FFN; unused when every layer is MoE.
    pub intermediate: u32,
    /// The FFNs (dense, shared and routed experts) have an up and a down projection and no gate
    /// (Nemotron-H's squared ReLU), two matrices instead of three.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ungated_ffn: bool,
    pub vocab: u32,
    /// The lm_head shares the embedding matrix.
    pub tied_embeddings: bool,
    /// Format of the transformer-block weights (embeddings and lm_head stay 16-bit).
    pub precision: Precision,
    /// Format of the attention projections when it differs (gpt-oss keeps them in BF16). The
    /// linear-attention layers' projections take it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_precision: Option<Precision>,
    /// Mixers whose projections the checkpoints keep in BF16 whatever their format, attention
    /// layers first, then linear-attention layers (NVIDIA's selective FP8 and NVFP4 recipes for
    /// Nemotron keep the attention blocks and the Mamba blocks beside them); the others take
    /// [`ModelShape::attention_precision`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bf16_mixers: u32,
    /// The longest context the model supports (`max_position_embeddings`).
    pub max_context: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<MoeShape>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding: Option<SlidingWindow>,
    /// Multi-head latent attention; replaces the q/k/v/o projections and the KV cache layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mla: Option<MlaShape>,
    /// Layers of linear attention in place of attention (hybrid models: Qwen3-Next, Qwen3.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear: Option<LinearAttention>,
    /// The attention layers gate their output with a second query-wide projection (Qwen3-Next's
    /// and Qwen3.5's gated attention, `attn_output_gate`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attention_output_gate: bool,
    /// Parameters outside the language model (a vision tower), billions: memory only.
    #[serde(default)]
    pub extra_params_b: f64,
    /// Learned attention sinks (gpt-oss): attention kernels must support them, which only
    /// some do (see `StackProfile::attn_eff_sinks`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attention_sinks: bool,
    /// Chat prompts in OpenAI's harmony format (gpt-oss), which vLLM renders to token ids with
    /// the harmony library rather than a Jinja template (see the engine's `frontend`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub harmony_chat: bool,
    /// The preset whose shapes these are, where the name asked for is that model in another
    /// weight format (`meta-llama/Llama-3.3-70B-Instruct`: the NVFP4 preset's shapes in BF16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived_from: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The name of the first of `dims` that is zero, where a shape needs at least one.
fn first_zero<'a>(dims: &[(&'a str, u32)]) -> Option<&'a str> {
    dims.iter().find(|(_, v)| *v == 0).map(|(name, _)| *name)
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
    /// The width the routed experts read and write when it is not the hidden size (LatentMoE,
    /// Nemotron 3 Super's `moe_latent_size`): each MoE layer projects its tokens down to it
    /// before the experts and back up after them, two products every token runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latent: Option<u32>,
}

/// Multi-head latent attention (DeepSeek-V2/V3/R1, Kimi-K2): keys and values are compressed into
/// one latent vector per token, which is all the KV cache stores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlaShape {
    /// Rank of the query compression (0: queries are projected from the hidden state directly).
    #[serde(default)]
    pub q_lora_rank: u32,
    /// Width of the compressed KV latent.
    pub kv_lora_rank: u32,
    /// Per-head query/key width without rotary embedding.
    pub qk_nope_head_dim: u32,
    /// Per-head query/key width with rotary embedding (the key part is shared by all heads).
    pub qk_rope_head_dim: u32,
    /// Per-head value width.
    pub v_head_dim: u32,
}

impl MlaShape {
    /// Values one token stores per layer: the latent plus the shared rotary key.
    pub fn cache_width(&self) -> u32 {
        self.kv_lora_rank + self.qk_rope_head_dim
    }
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
        if let Some(name) = first_zero(&dims) {
            return Err(format!("{name} must be at least 1"));
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
            if m.latent == Some(0) {
                return Err("moe.latent must be at least 1 where given".into());
            }
            if m.dense_layers + self.mixer_only_layers > self.layers {
                return Err(format!(
                    "moe.dense_layers ({}) and mixer_only_layers ({}) exceed layers ({})",
                    m.dense_layers, self.mixer_only_layers, self.layers
                ));
            }
        }
        if self.bf16_mixers > self.layers {
            return Err(format!("bf16_mixers ({}) exceeds layers ({})", self.bf16_mixers, self.layers));
        }
        if self.mixer_only_layers >= self.layers {
            return Err(format!(
                "mixer_only_layers ({}) must leave at least one of the {} layers with an FFN",
                self.mixer_only_layers, self.layers
            ));
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
        if let Some(a) = &self.mla {
            let ranks = [
                ("mla.kv_lora_rank", a.kv_lora_rank),
                ("mla.qk_nope_head_dim", a.qk_nope_head_dim),
                ("mla.qk_rope_head_dim", a.qk_rope_head_dim),
                ("mla.v_head_dim", a.v_head_dim),
            ];
            if let Some(name) = first_zero(&ranks) {
                return Err(format!("{name} must be at least 1 for multi-head latent attention"));
            }
        }
        if let Some(l) = &self.linear {
            let dims = [
                ("linear.key_heads", l.key_heads),
                ("linear.value_heads", l.value_heads),
                ("linear.key_head_dim", l.key_head_dim),
                ("linear.value_head_dim", l.value_head_dim),
                ("linear.conv_kernel", l.conv_kernel),
            ];
            if let Some(name) = first_zero(&dims) {
                return Err(format!("{name} must be at least 1 for linear attention"));
            }
            if l.layers + self.sliding_layers().0 >= self.layers {
                return Err(format!(
                    "linear.layers ({}) and sliding.layers ({}) leave no full-attention layer of the {}: a model \
                     without one is not modelled",
                    l.layers,
                    self.sliding_layers().0,
                    self.layers
                ));
            }
            if self.mla.is_some() {
                return Err("linear attention beside multi-head latent attention (Kimi Linear) is not modelled".into());
            }
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

    /// Layers with an FFN, dense or MoE.
    pub fn ffn_layers(&self) -> u32 {
        self.layers.saturating_sub(self.mixer_only_layers)
    }

    /// Layers with an MoE FFN.
    pub fn moe_layers(&self) -> u32 {
        self.moe.as_ref().map_or(0, |m| self.ffn_layers().saturating_sub(m.dense_layers))
    }

    /// Layers with a dense FFN.
    pub fn dense_ffn_layers(&self) -> u32 {
        self.ffn_layers() - self.moe_layers()
    }

    /// Tensor-parallel all-reduces of one forward pass through the layers: one after each mixer
    /// and one after each FFN.
    pub fn allreduces(&self) -> u32 {
        self.layers + self.ffn_layers()
    }

    /// Weight matrices of one FFN or expert: gate, up and down, or up and down without a gate.
    fn ffn_matrices(&self) -> f64 {
        if self.ungated_ffn { 2.0 } else { 3.0 }
    }

    /// Layers attending to a window, and the window (0 layers when there is none).
    pub fn sliding_layers(&self) -> (u32, u32) {
        self.sliding.as_ref().map_or((0, 0), |s| (s.layers, s.window))
    }

    /// Layers of linear attention (0 without).
    pub fn linear_layers(&self) -> u32 {
        self.linear.as_ref().map_or(0, |l| l.layers)
    }

    /// Layers of attention, full or windowed (every layer but the linear-attention ones).
    pub fn attention_layers(&self) -> u32 {
        self.layers.saturating_sub(self.linear_layers())
    }

    /// Layers attending to the full context.
    pub fn full_attention_layers(&self) -> u32 {
        self.attention_layers().saturating_sub(self.sliding_layers().0)
    }

    /// Parameters of every layer's token mixer: the attention layers' projections and the
    /// linear-attention layers'.
    pub fn mixer_params(&self) -> f64 {
        let linear = self.linear.as_ref().map_or(0.0, |l| f64::from(l.layers) * l.params(self.hidden));
        f64::from(self.attention_layers()) * self.attention_params() + linear
    }

    /// Bytes a mixer parameter takes on average: the attention's format, BF16 for the
    /// [`ModelShape::bf16_mixers`].
    pub fn mixer_bytes_per_param(&self) -> f64 {
        let format = self.attention_precision().bytes_per_param();
        let bf16 = Precision::Bf16.bytes_per_param();
        let attention_kept = self.bf16_mixers.min(self.attention_layers());
        let linear_kept = (self.bf16_mixers - attention_kept).min(self.linear_layers());
        let linear = self.linear.as_ref().map_or(0.0, |l| l.params(self.hidden));
        let kept = f64::from(attention_kept) * self.attention_params() + f64::from(linear_kept) * linear;
        let all = self.mixer_params();
        if all <= 0.0 { format } else { (kept * bf16 + (all - kept) * format) / all }
    }

    /// q, k, v and o projection parameters of one attention layer, the output gate's with one
    /// (with MLA: the down- and up-projections of queries and of the KV latent, and o; the small
    /// norms are left out).
    pub fn attention_params(&self) -> f64 {
        let h = f64::from(self.hidden);
        let heads = f64::from(self.heads);
        if let Some(a) = &self.mla {
            let qk = f64::from(a.qk_nope_head_dim + a.qk_rope_head_dim);
            let q = if a.q_lora_rank == 0 {
                h * heads * qk
            } else {
                let r = f64::from(a.q_lora_rank);
                h * r + r * heads * qk
            };
            let kv_lora = f64::from(a.kv_lora_rank);
            let kv = h * f64::from(a.cache_width()) + kv_lora * heads * f64::from(a.qk_nope_head_dim + a.v_head_dim);
            let o = heads * f64::from(a.v_head_dim) * h;
            return q + kv + o;
        }
        let q = heads * f64::from(self.head_dim);
        let kv = f64::from(self.kv_heads) * f64::from(self.head_dim);
        let gate = if self.attention_output_gate { h * q } else { 0.0 };
        h * q * 2.0 + h * kv * 2.0 + gate
    }

    /// Attention parameters of one layer that every tensor-parallel rank holds whole: MLA's
    /// down-projections of queries and of the KV latent (vLLM replicates them); 0 otherwise.
    pub fn attention_replicated_params(&self) -> f64 {
        self.mla.as_ref().map_or(0.0, |a| f64::from(self.hidden) * f64::from(a.q_lora_rank + a.cache_width()))
    }

    /// FLOPs of one query attending to one key in one layer, all heads (before any
    /// tensor-parallel split): QK^T and PV. With MLA, vLLM runs two forms (`MLACommonImpl`):
    /// decodes the absorbed one, every head scoring against the latent plus the rotary key and
    /// summing the latent (2 x 128 x 576 + 2 x 128 x 512 for DeepSeek-V3); prefill tokens the
    /// decompressed one, the latents projected back to per-head keys and values and attended
    /// as plain multi-head attention (2 x 128 x 192 + 2 x 128 x 128), 3.4 times fewer.
    pub fn attention_flops_per_pair(&self, prefill: bool) -> f64 {
        let heads = f64::from(self.heads);
        match &self.mla {
            Some(a) if prefill => {
                2.0 * heads * f64::from(a.qk_nope_head_dim + a.qk_rope_head_dim) + 2.0 * heads * f64::from(a.v_head_dim)
            }
            Some(a) => 2.0 * heads * f64::from(a.cache_width()) + 2.0 * heads * f64::from(a.kv_lora_rank),
            None => 4.0 * heads * f64::from(self.head_dim),
        }
    }

    /// FLOPs of projecting one cached token's MLA latent back to every head's key and value
    /// (`kv_b_proj`), which vLLM's MLA prefill does for the cached context of each chunk it
    /// attends (`_compute_prefill_context`); zero without MLA.
    pub fn mla_context_upproj_flops(&self) -> f64 {
        self.mla.as_ref().map_or(0.0, |a| {
            2.0 * f64::from(a.kv_lora_rank) * f64::from(self.heads) * f64::from(a.qk_nope_head_dim + a.v_head_dim)
        })
    }

    /// Parameters of one dense FFN.
    pub fn dense_ffn_params(&self) -> f64 {
        self.ffn_matrices() * f64::from(self.hidden) * f64::from(self.intermediate)
    }

    /// Parameters of one routed expert (0 without MoE).
    pub fn expert_params(&self) -> f64 {
        self.moe.as_ref().map_or(0.0, |m| {
            let width = m.latent.unwrap_or(self.hidden);
            self.ffn_matrices() * f64::from(width) * f64::from(m.expert_intermediate)
        })
    }

    /// Parameters of one MoE layer that every token uses: shared experts, the router and, with
    /// latent experts, the projections to and from their width.
    pub fn moe_always_params(&self) -> f64 {
        self.moe.as_ref().map_or(0.0, |m| {
            let shared_inter = m.shared_intermediate.unwrap_or(m.expert_intermediate);
            let h = f64::from(self.hidden);
            let latent = m.latent.map_or(0.0, |l| 2.0 * h * f64::from(l));
            f64::from(m.shared_experts) * self.ffn_matrices() * h * f64::from(shared_inter)
                + h * f64::from(m.experts)
                + latent
        })
    }

    /// One embedding (or lm_head) matrix.
    pub fn embedding_params(&self) -> f64 {
        f64::from(self.vocab) * f64::from(self.hidden)
    }

    /// Parameters of the transformer blocks (without embeddings and lm_head).
    pub fn block_params(&self) -> f64 {
        let experts = self.moe.as_ref().map_or(0.0, |m| f64::from(m.experts));
        self.mixer_params()
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
        self.mixer_params()
            + f64::from(self.dense_ffn_layers()) * self.dense_ffn_params()
            + f64::from(self.moe_layers()) * (k * self.expert_params() + self.moe_always_params())
            + heads * self.embedding_params()
    }

    /// Bytes of all weights held in memory (vision tower included), over all GPUs. The
    /// linear-attention layers' projections are in the attention projections' format.
    pub fn weight_bytes(&self) -> f64 {
        let attn = self.mixer_params() * self.mixer_bytes_per_param();
        let rest = (self.block_params() - self.mixer_params()) * self.precision.bytes_per_param();
        let heads = if self.tied_embeddings { 1.0 } else { 2.0 };
        attn + rest + heads * self.embedding_params() * 2.0 + self.extra_params_b * 1e9 * 2.0
    }

    /// KV heads each tensor-parallel rank stores (replicated when there are fewer than ranks;
    /// with MLA one latent "head", the same on every rank).
    pub fn kv_heads_per_rank(&self, tp: u32) -> u32 {
        if self.mla.is_some() {
            return 1;
        }
        (self.kv_heads / tp.max(1)).max(1)
    }

    /// KV bytes one token occupies in one layer on one rank. With MLA: the latent plus the rotary
    /// key, not divided by `tp` (vLLM keeps the whole latent cache on every rank).
    pub fn kv_bytes_per_token_layer(&self, dtype: KvDtype, tp: u32) -> f64 {
        if let Some(a) = &self.mla {
            return f64::from(a.cache_width()) * dtype.bytes();
        }
        2.0 * f64::from(self.kv_heads_per_rank(tp)) * f64::from(self.head_dim) * dtype.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qwen3_8b() -> ModelShape {
        ModelShape {
            id: "Qwen/Qwen3-8B".into(),
            aliases: Vec::new(),
            layers: 36,
            mixer_only_layers: 0,
            hidden: 4096,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            intermediate: 12288,
            ungated_ffn: false,
            vocab: 151_936,
            tied_embeddings: false,
            precision: Precision::Bf16,
            attention_precision: None,
            bf16_mixers: 0,
            max_context: 40960,
            moe: None,
            sliding: None,
            mla: None,
            linear: None,
            attention_output_gate: false,
            extra_params_b: 0.0,
            attention_sinks: false,
            harmony_chat: false,
            derived_from: None,
        }
    }

    /// DeepSeek-V3 (and R1, the same shape) without its multi-token-prediction layer.
    fn deepseek_v3() -> ModelShape {
        ModelShape {
            id: "deepseek-ai/DeepSeek-V3".into(),
            aliases: Vec::new(),
            layers: 61,
            hidden: 7168,
            heads: 128,
            kv_heads: 128,
            head_dim: 192,
            intermediate: 18432,
            vocab: 129_280,
            precision: Precision::Fp8,
            max_context: 163_840,
            moe: Some(MoeShape {
                experts: 256,
                top_k: 8,
                expert_intermediate: 2048,
                shared_experts: 1,
                shared_intermediate: None,
                dense_layers: 3,
                latent: None,
            }),
            mla: Some(MlaShape {
                q_lora_rank: 1536,
                kv_lora_rank: 512,
                qk_nope_head_dim: 128,
                qk_rope_head_dim: 64,
                v_head_dim: 128,
            }),
            ..qwen3_8b()
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
    fn mla_counts_match_deepseek_v3() {
        let m = deepseek_v3();
        assert!(m.validate().is_ok());
        // Published: 671 B total (without the 14 B MTP module), 37 B active.
        let (total, active) = (m.total_params() / 1e9, m.active_params() / 1e9);
        assert!((total / 671.0 - 1.0).abs() < 0.02, "{total}");
        assert!((active / 37.0 - 1.0).abs() < 0.03, "{active}");
        // One layer's attention by hand: q 7168x1536 + 1536x128x192, kv 7168x576 + 512x128x256,
        // o 128x128x7168.
        assert_eq!(m.attention_params(), 187_105_280.0);
        assert_eq!(m.attention_replicated_params(), 7168.0 * (1536.0 + 576.0));
        // The latent cache: 512 + 64 values of 2 bytes per layer, the same on every TP rank.
        assert_eq!(m.kv_bytes_per_token_layer(KvDtype::Auto, 1), 1152.0);
        assert_eq!(m.kv_bytes_per_token_layer(KvDtype::Auto, 8), 1152.0);
        assert_eq!(m.kv_bytes_per_token_layer(KvDtype::Auto, 1) * 61.0, 70_272.0);
        assert_eq!(m.kv_bytes_per_token_layer(KvDtype::Fp8, 4), 576.0);
        assert_eq!(m.kv_heads_per_rank(8), 1);
        // Decodes run absorbed MLA: 2x128x576 for the scores, 2x128x512 for the latent sum;
        // prefill tokens the decompressed heads: 2x128x192 for the scores, 2x128x128 for values.
        assert_eq!(m.attention_flops_per_pair(false), 278_528.0);
        assert_eq!(m.attention_flops_per_pair(true), 81_920.0);
        // A cached token's latent back to 128 heads of 128 key and 128 value columns.
        assert_eq!(m.mla_context_upproj_flops(), 2.0 * 512.0 * 128.0 * 256.0);
    }

    #[test]
    fn mla_without_query_compression_projects_queries_directly() {
        let mut m = deepseek_v3();
        let with_q_lora = m.attention_params();
        m.mla.as_mut().unwrap().q_lora_rank = 0;
        let q_direct = 7168.0 * 128.0 * 192.0;
        let q_lora = 7168.0 * 1536.0 + 1536.0 * 128.0 * 192.0;
        assert_eq!(m.attention_params(), with_q_lora - q_lora + q_direct);
        assert_eq!(m.attention_replicated_params(), 7168.0 * 576.0);
    }

    #[test]
    fn flops_per_pair_of_grouped_query_attention() {
        // 32 heads of 128: QK^T and PV, 2 FLOPs per multiply-add each.
        assert_eq!(qwen3_8b().attention_flops_per_pair(true), 4.0 * 32.0 * 128.0);
        assert_eq!(qwen3_8b().attention_flops_per_pair(false), 4.0 * 32.0 * 128.0);
        assert_eq!(qwen3_8b().attention_replicated_params(), 0.0);
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
            latent: None,
        });
        assert!(m.validate().unwrap_err().contains("top_k"));
        let mut m = deepseek_v3();
        m.mla.as_mut().unwrap().kv_lora_rank = 0;
        let err = m.validate().unwrap_err();
        assert!(err.contains("mla.kv_lora_rank") && err.contains("latent"), "{err}");
    }
}
