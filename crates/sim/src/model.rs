//! Model shapes: the handful of config.json numbers that decide weight bytes, KV bytes per token
//! and FLOPs per token, with those derived quantities.
//!
//! Presets are TOML files (`presets/models/`); [`ModelShape::from_hf_config`] builds the same struct from a
//! Hugging Face config.json. Attention is multi-head/grouped-query, or multi-head latent attention
//! ([`MlaShape`], DeepSeek-V2/V3/R1 and Kimi-K2); hybrid models keep some layers of Gated DeltaNet
//! linear attention or Mamba-2 ([`LinearAttention`], Qwen3-Next and Qwen3.5; Nemotron-H and
//! Nemotron 3, whose blocks hold one mixer or one FFN each: a layer here is a mixer and the FFN
//! after it, and the mixers beyond the FFNs stand alone, [`ModelShape::mixer_only_layers`]).

mod drafter;
mod linear;
mod sparse;
pub(crate) mod vision;

use serde::{Deserialize, Serialize};

pub use linear::{LinearAttention, LinearKind};
pub use sparse::SparseAttention;
pub use vision::{ImageWork, Vision};

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
    /// DeepSeek sparse attention: an indexer picks the tokens each query attends to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparse: Option<SparseAttention>,
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
    /// The inputs besides text that tower takes, as vLLM names them (`image`, `video`). A
    /// deployment that allows a prompt none of them (`--limit-mm-per-prompt` 0 for each, or
    /// `--language-model-only`) runs the language model alone and loads no tower.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modalities: Vec<String>,
    /// The tower's shape, for a model that takes images: how an image becomes prompt tokens
    /// and what encoding it costs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision: Option<Vision>,
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
    /// The format of the FFN weights every token uses (shared experts, the dense FFN layers)
    /// where the checkpoint keeps them apart from the routed experts' (Kimi-K2-Thinking's and
    /// K2.5's INT4 routed experts beside BF16 shared ones); unset, the model's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_precision: Option<Precision>,
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
        if let Some(sp) = &self.sparse {
            let dims = [("sparse.top_k", sp.top_k), ("sparse.heads", sp.heads), ("sparse.head_dim", sp.head_dim)];
            if let Some(name) = first_zero(&dims) {
                return Err(format!("{name} must be at least 1 for sparse attention"));
            }
            if sp.indexer_layers.is_some_and(|n| n == 0 || n > self.attention_layers()) {
                return Err(format!(
                    "sparse.indexer_layers must be between 1 and the {} attention layers",
                    self.attention_layers()
                ));
            }
            if self.sliding.is_some() {
                return Err("sparse attention beside sliding-window layers is not modelled".into());
            }
        }
        if !(self.extra_params_b.is_finite() && self.extra_params_b >= 0.0) {
            return Err("extra_params_b must be zero or positive".into());
        }
        if !self.modalities.is_empty() && self.extra_params_b == 0.0 {
            return Err("modalities name the inputs of a tower the model has: give its extra_params_b".into());
        }
        match &self.vision {
            Some(v) => v.validate()?,
            None if self.modalities.iter().any(|m| m == "image") => {
                return Err("a model that takes images needs its [vision] tower's shape".into());
            }
            None => {}
        }
        Ok(())
    }

    /// The format of the attention projections.
    pub fn attention_precision(&self) -> Precision {
        self.attention_precision.unwrap_or(self.precision)
    }

    /// The format of the FFN weights every token uses: dense FFN layers, shared experts.
    pub fn always_precision(&self) -> Precision {
        self.moe.as_ref().and_then(|m| m.shared_precision).unwrap_or(self.precision)
    }

    /// Parameters of the FFNs every token uses, all layers: dense FFNs, shared experts, routers.
    pub fn always_ffn_params(&self) -> f64 {
        f64::from(self.dense_ffn_layers()) * self.dense_ffn_params()
            + f64::from(self.moe_layers()) * self.moe_always_params()
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

    /// Tensor-parallel all-reduces of one forward pass: one after the input embedding (each rank
    /// looks up only the tokens of its shard of the vocabulary, the others' rows left zero), one
    /// after each mixer and one after each FFN.
    pub fn allreduces(&self) -> u32 {
        1 + self.layers + self.ffn_layers()
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
            return q + kv + o + self.indexer_params();
        }
        let q = heads * f64::from(self.head_dim);
        let kv = f64::from(self.kv_heads) * f64::from(self.head_dim);
        let gate = if self.attention_output_gate { h * q } else { 0.0 };
        h * q * 2.0 + h * kv * 2.0 + gate + self.indexer_params()
    }

    /// Attention parameters of one layer that every tensor-parallel rank holds whole: MLA's
    /// down-projections of queries and of the KV latent, and a sparse-attention indexer (vLLM
    /// replicates them); 0 otherwise.
    pub fn attention_replicated_params(&self) -> f64 {
        let mla =
            self.mla.as_ref().map_or(0.0, |a| f64::from(self.hidden) * f64::from(a.q_lora_rank + a.cache_width()));
        mla + self.indexer_params()
    }

    /// Parameters of one layer's sparse-attention indexer, on average over the layers where only
    /// some run one (0 without).
    fn indexer_params(&self) -> f64 {
        let q_lora =
            self.mla.as_ref().map_or(self.hidden, |a| if a.q_lora_rank > 0 { a.q_lora_rank } else { self.hidden });
        self.sparse.as_ref().map_or(0.0, |s| s.params(self.hidden, q_lora) * self.indexer_share())
    }

    /// The share of the attention layers that run a sparse-attention indexer of their own (1
    /// where every layer does, or without sparse attention).
    pub fn indexer_share(&self) -> f64 {
        let layers = f64::from(self.attention_layers().max(1));
        self.sparse.as_ref().and_then(|s| s.indexer_layers).map_or(1.0, |n| (f64::from(n) / layers).min(1.0))
    }

    /// Bytes of the indexer's keys one token keeps in one layer, on average over the layers (0
    /// without sparse attention).
    pub fn index_key_bytes(&self) -> f64 {
        self.sparse.as_ref().map_or(0.0, |s| s.key_bytes() * self.indexer_share())
    }

    /// The look-back that bounds a query's attention pairs and a decode's reads: a sliding
    /// window, or sparse attention's `top_k` (0: none). A sparse model keeps its whole cache;
    /// only its attention is bounded.
    pub fn pair_window(&self) -> u32 {
        match (&self.sliding, &self.sparse) {
            (Some(s), _) => s.window,
            (None, Some(s)) => s.top_k,
            (None, None) => 0,
        }
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
        let always = self.always_ffn_params();
        let routed = self.block_params() - self.mixer_params() - always;
        let rest = always * self.always_precision().bytes_per_param() + routed * self.precision.bytes_per_param();
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

    /// KV bytes one token occupies in one layer on one rank: what its attention reads
    /// ([`ModelShape::attention_kv_bytes_per_token_layer`]) and, with sparse attention, the
    /// indexer's key ([`ModelShape::index_key_bytes`]).
    pub fn kv_bytes_per_token_layer(&self, dtype: KvDtype, tp: u32) -> f64 {
        self.attention_kv_bytes_per_token_layer(dtype, tp) + self.index_key_bytes()
    }

    /// The keys and values one token keeps for attention in one layer on one rank. With MLA: the
    /// latent plus the rotary key, not divided by `tp` (vLLM keeps the whole latent cache on
    /// every rank).
    pub fn attention_kv_bytes_per_token_layer(&self, dtype: KvDtype, tp: u32) -> f64 {
        if let Some(a) = &self.mla {
            return f64::from(a.cache_width()) * dtype.bytes();
        }
        2.0 * f64::from(self.kv_heads_per_rank(tp)) * f64::from(self.head_dim) * dtype.bytes()
    }
}

#[cfg(test)]
mod tests;
