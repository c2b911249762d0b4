//! Reading a model's shape from a Hugging Face `config.json` (`--model-config PATH`).
//!
//! Handles the layouts of the supported families: plain decoder configs, VL configs that nest
//! the language model under `text_config`, the MoE keys of Qwen3-MoE, GLM-4.x, gpt-oss, Mixtral,
//! Llama-4 and DeepSeek-V2/V3 (Kimi-K2), multi-head latent attention (`kv_lora_rank`; the
//! multi-token-prediction layers of `num_nextn_predict_layers` are left out), sliding/chunked attention (`layer_types`, `sliding_window_pattern`,
//! `attention_chunk_size`), Gated DeltaNet linear-attention layers (Qwen3-Next, Qwen3.5:
//! `linear_num_value_heads`, `layer_types` or `full_attention_interval`), Nemotron-H's Mamba-2
//! hybrids (`hybrid_override_pattern` or `layers_block_type`, blocks of one mixer or one FFN),
//! and `quantization_config` for the weight format. Layers it has no term for (other linear
//! attention, other state-space layers) are refused, not priced as attention.

use serde_json::Value;

use crate::error::SimError;
use crate::model::{LinearAttention, LinearKind, MlaShape, ModelShape, MoeShape, SlidingWindow};
use crate::precision::Precision;

impl ModelShape {
    /// Builds a shape from the text of a Hugging Face config.json.
    pub fn from_hf_config(json: &str) -> Result<ModelShape, SimError> {
        Self::from_hf_config_at(json, "config.json")
    }

    /// As [`ModelShape::from_hf_config`], naming `origin` (the file) in errors and as the id
    /// when the config has no `_name_or_path`.
    pub fn from_hf_config_at(json: &str, origin: &str) -> Result<ModelShape, SimError> {
        let bad = |message: String| SimError::ModelConfig { path: origin.to_string(), message };
        let root: Value = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
        if !root.is_object() {
            return Err(bad("expected a JSON object".into()));
        }
        let shape = parse(&root, origin).map_err(bad)?;
        shape.validate().map_err(bad)?;
        Ok(shape)
    }
}

/// Looks a key up in `text_config` first, then at the top level; JSON null counts as absent.
struct Keys<'a> {
    text: &'a Value,
    root: &'a Value,
}

impl<'a> Keys<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.text.get(key).or_else(|| self.root.get(key)).filter(|v| !v.is_null())
    }

    fn first(&self, keys: &[&str]) -> Option<&'a Value> {
        keys.iter().find_map(|k| self.get(k))
    }

    fn num(&self, keys: &[&str]) -> Result<Option<u32>, String> {
        match self.first(keys) {
            None => Ok(None),
            Some(v) => as_u32(v).map(Some).ok_or_else(|| format!("{} must be a whole number, got {v}", keys[0])),
        }
    }

    fn need(&self, keys: &[&str]) -> Result<u32, String> {
        self.num(keys)?.ok_or_else(|| format!("missing {} (looked for {})", keys[0], keys.join(", ")))
    }

    fn str(&self, key: &str) -> Option<&'a str> {
        self.get(key).and_then(Value::as_str)
    }
}

fn as_u32(v: &Value) -> Option<u32> {
    if let Some(n) = v.as_u64() {
        return u32::try_from(n).ok();
    }
    let f = v.as_f64()?;
    (f >= 0.0 && f.fract() == 0.0 && f <= f64::from(u32::MAX)).then_some(f as u32)
}

fn parse(root: &Value, origin: &str) -> Result<ModelShape, String> {
    let text = root.get("text_config").filter(|v| v.is_object()).unwrap_or(root);
    let k = Keys { text, root };
    let blocks = k.need(&["num_hidden_layers", "n_layer", "num_layers"])?;
    let hidden = k.need(&["hidden_size", "n_embd", "d_model"])?;
    let heads = k.need(&["num_attention_heads", "n_head"])?;
    let kv_heads = k.num(&["num_key_value_heads", "multi_query_group_num"])?.unwrap_or(heads);
    let mla = parse_mla(&k)?;
    let head_dim = match (&mla, k.num(&["head_dim"])?) {
        (Some(a), _) => a.qk_nope_head_dim + a.qk_rope_head_dim,
        (None, Some(d)) => d,
        (None, None) if heads > 0 => hidden / heads,
        (None, None) => 0,
    };
    let vocab = k.need(&["vocab_size", "padded_vocab_size"])?;
    let tied = root
        .get("tie_word_embeddings")
        .or_else(|| text.get("tie_word_embeddings"))
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let max_context = k.num(&["max_position_embeddings", "seq_length", "n_positions"])?.unwrap_or(4096);
    let model_type = k.str("model_type").unwrap_or("").to_ascii_lowercase();
    let hybrid = if model_type == "nemotron_h" { Some(NemotronBlocks::read(&k, blocks)?) } else { None };
    // A Nemotron-H layer here is a mixer and the FFN after it (`ModelShape::mixer_only_layers`).
    let layers = hybrid.as_ref().map_or(blocks, NemotronBlocks::mixers);
    if hybrid.is_none() {
        refuse_recurrent_layers(&k)?;
    }
    let linear = match &hybrid {
        Some(h) => h.mamba(&k)?,
        None => parse_linear(&k, layers)?,
    };
    let attention_output_gate =
        k.get("attn_output_gate").and_then(Value::as_bool).unwrap_or(model_type == "qwen3_next");

    let moe = match &hybrid {
        Some(h) => h.moe(&k, &model_type)?,
        None => parse_moe(&k, layers, &model_type)?,
    };
    let intermediate = match (&moe, k.num(&["intermediate_size_mlp"])?) {
        (_, Some(mlp)) => mlp,
        // MoE configs without a separate expert key use intermediate_size for the experts.
        (Some(_), None) if k.get("moe_intermediate_size").is_none() => 0,
        _ => k.num(&["intermediate_size", "ffn_hidden_size", "n_inner"])?.unwrap_or(4 * hidden),
    };
    let sliding = parse_sliding(&k, layers, max_context, &model_type)?;
    let (precision, attention_precision) = parse_precision(&k)?;
    let id = root.get("_name_or_path").and_then(Value::as_str).filter(|s| !s.is_empty()).unwrap_or(origin).to_string();
    Ok(ModelShape {
        id,
        aliases: Vec::new(),
        layers,
        mixer_only_layers: hybrid.as_ref().map_or(0, NemotronBlocks::mixer_only),
        hidden,
        heads,
        kv_heads,
        head_dim,
        intermediate,
        // Nemotron-H's FFNs and experts square a ReLU over one up projection (`relu2`).
        ungated_ffn: hybrid.is_some() && k.str("mlp_hidden_act").is_none_or(|a| a == "relu2"),
        vocab,
        tied_embeddings: tied,
        precision,
        attention_precision,
        bf16_mixers: 0,
        max_context,
        moe,
        sliding,
        mla,
        linear,
        attention_output_gate,
        extra_params_b: 0.0,
        attention_sinks: model_type == "gpt_oss",
        harmony_chat: model_type == "gpt_oss",
        derived_from: None,
    })
}

/// Refuses a config with layers the cost model has no term for: linear attention other than
/// Gated DeltaNet (MiniMax-M1's lightning attention, Kimi Linear's) and state-space layers other
/// than Nemotron-H's blocks (Jamba, Falcon-H1, Granite 4). Pricing them as attention, or as Gated DeltaNet, would be a
/// guess, not a prediction.
fn refuse_recurrent_layers(k: &Keys) -> Result<(), String> {
    const MARKERS: [&str; 6] = [
        "linear_attn_config",
        "hybrid_override_pattern",
        "ssm_state_size",
        "mamba_d_state",
        "mamba_num_heads",
        "mamba_expand",
    ];
    let attention = ["full_attention", "sliding_attention", "chunked_attention", "attention", "linear_attention"];
    let other_layer = |key: &str| {
        k.get(key)
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|t| t.as_str().is_some_and(|t| !attention.contains(&t))))
    };
    // MiniMax's `attn_type_list`: 1 for softmax attention, 0 for lightning (linear) attention.
    let lightning =
        k.get("attn_type_list").and_then(Value::as_array).is_some_and(|a| a.iter().any(|t| t.as_u64() == Some(0)));
    let found = MARKERS
        .iter()
        .find(|m| k.get(m).is_some())
        .copied()
        .or_else(|| ["layer_types", "layers_block_type"].into_iter().find(|key| other_layer(key)))
        .or(lightning.then_some("attn_type_list"));
    match found {
        Some(key) => Err(format!(
            "its `{key}` marks linear-attention or state-space layers other than Gated DeltaNet and Nemotron-H's \
             Mamba-2 (MiniMax-M1, Kimi Linear, Jamba, Falcon-H1 and the like), which are not modelled: the simulator \
             prices attention over a KV cache, Gated DeltaNet's state (Qwen3-Next, Qwen3.5) and the Mamba-2 blocks of \
             model_type nemotron_h only"
        )),
        None => Ok(()),
    }
}

/// Gated DeltaNet layers, when the config has `linear_num_value_heads` (Qwen3-Next, Qwen3.5): as
/// many layers as `layer_types` lists as `linear_attention`, or, without that list, all but every
/// `full_attention_interval`-th layer.
fn parse_linear(k: &Keys, layers: u32) -> Result<Option<LinearAttention>, String> {
    let interval = k.num(&["full_attention_interval"])?;
    if k.get("linear_num_value_heads").is_none() {
        let listed = k
            .get("layer_types")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|t| t.as_str() == Some("linear_attention")));
        return match (interval, listed) {
            (None, false) => Ok(None),
            (Some(_), _) => Err("full_attention_interval is given without the linear-attention heads \
                                 (linear_num_value_heads, linear_num_key_heads, linear_key_head_dim, ...)"
                .into()),
            (None, true) => Err("layer_types lists linear_attention layers without their heads \
                                 (linear_num_value_heads, linear_num_key_heads, linear_key_head_dim, ...)"
                .into()),
        };
    }
    let count = match (k.get("layer_types"), interval) {
        (Some(types), _) => {
            let types = types.as_array().ok_or("layer_types must be a list of strings")?;
            u32::try_from(types.iter().filter(|t| t.as_str() == Some("linear_attention")).count()).unwrap_or(u32::MAX)
        }
        (None, Some(n)) if n > 0 => layers - layers / n,
        _ => {
            return Err("linear_num_value_heads is given without layer_types or full_attention_interval to say \
                         which layers are linear attention"
                .into());
        }
    };
    if count == 0 {
        return Ok(None);
    }
    Ok(Some(LinearAttention {
        kind: LinearKind::GatedDeltaNet,
        chunk: None,
        layers: count,
        key_heads: k.need(&["linear_num_key_heads"])?,
        value_heads: k.need(&["linear_num_value_heads"])?,
        key_head_dim: k.need(&["linear_key_head_dim"])?,
        value_head_dim: k.need(&["linear_value_head_dim"])?,
        conv_kernel: k.num(&["linear_conv_kernel_dim"])?.unwrap_or(4),
        state_fp32: k.str("mamba_ssm_dtype") == Some("float32"),
    }))
}

/// The blocks of a Nemotron-H model (Nemotron-H, Nemotron Nano 2, Nemotron 3), each one mixer or
/// one FFN: `hybrid_override_pattern`'s `M` (Mamba-2), `*` (attention), `-` (dense FFN) and `E`
/// (MoE), or the same as `layers_block_type`'s `mamba`, `attention`, `mlp` and `moe`.
struct NemotronBlocks {
    mamba: u32,
    attention: u32,
    dense: u32,
    moe: u32,
}

impl NemotronBlocks {
    fn read(k: &Keys, blocks: u32) -> Result<Self, String> {
        let kinds: Vec<char> = if let Some(p) = k.str("hybrid_override_pattern") {
            p.chars().collect()
        } else if let Some(list) = k.get("layers_block_type").and_then(Value::as_array) {
            let letter = |t: &Value| match t.as_str() {
                Some("mamba") => Ok('M'),
                Some("attention") => Ok('*'),
                Some("mlp") => Ok('-'),
                Some("moe") => Ok('E'),
                _ => Err(format!("layers_block_type has {t}, not one of mamba, attention, mlp, moe")),
            };
            list.iter().map(letter).collect::<Result<_, _>>()?
        } else {
            return Err("a nemotron_h config needs hybrid_override_pattern or layers_block_type to say which \
                        blocks are Mamba, attention and FFN"
                .into());
        };
        if let Some(c) = kinds.iter().find(|c| !matches!(c, 'M' | '*' | '-' | 'E')) {
            return Err(format!(
                "hybrid_override_pattern has `{c}`: only M (Mamba-2), * (attention), - (FFN) and E (MoE) are known"
            ));
        }
        if kinds.len() != blocks as usize {
            return Err(format!("hybrid_override_pattern has {} blocks, num_hidden_layers {blocks}", kinds.len()));
        }
        let count = |c: char| u32::try_from(kinds.iter().filter(|&&x| x == c).count()).unwrap_or(u32::MAX);
        let b = NemotronBlocks { mamba: count('M'), attention: count('*'), dense: count('-'), moe: count('E') };
        if b.attention == 0 {
            return Err(
                "hybrid_override_pattern has no attention block (*): a model without one is not modelled".into()
            );
        }
        if b.dense + b.moe > b.mixers() || b.dense + b.moe == 0 {
            return Err(format!(
                "hybrid_override_pattern has {} FFN blocks for {} mixers: only patterns with at least one FFN and no \
                 more FFNs than mixers are modelled",
                b.dense + b.moe,
                b.mixers()
            ));
        }
        Ok(b)
    }

    fn mixers(&self) -> u32 {
        self.mamba + self.attention
    }

    fn mixer_only(&self) -> u32 {
        self.mixers() - self.dense - self.moe
    }

    /// The Mamba-2 layers: `mamba_num_heads` heads of `mamba_head_dim` values, `n_groups` groups
    /// of `ssm_state_size` state, the SSM cache in the config's `mamba_ssm_cache_dtype` (vLLM's
    /// default for Nemotron-H; FP32 where the config says nothing, as vLLM now takes it).
    fn mamba(&self, k: &Keys) -> Result<Option<LinearAttention>, String> {
        if self.mamba == 0 {
            return Ok(None);
        }
        Ok(Some(LinearAttention {
            kind: LinearKind::Mamba2,
            chunk: k.num(&["chunk_size"])?,
            layers: self.mamba,
            key_heads: k.num(&["n_groups", "mamba_num_groups"])?.unwrap_or(1),
            value_heads: k.need(&["mamba_num_heads"])?,
            key_head_dim: k.need(&["ssm_state_size"])?,
            value_head_dim: k.need(&["mamba_head_dim"])?,
            conv_kernel: k.num(&["conv_kernel"])?.unwrap_or(4),
            state_fp32: k.str("mamba_ssm_cache_dtype").is_none_or(|d| d == "float32"),
        }))
    }

    /// The MoE blocks' experts (none without `E` blocks); the dense FFN blocks are the MoE
    /// shape's dense layers.
    fn moe(&self, k: &Keys, model_type: &str) -> Result<Option<MoeShape>, String> {
        if self.moe == 0 {
            return Ok(None);
        }
        let moe = parse_moe(k, self.mixers(), model_type)?
            .ok_or("hybrid_override_pattern has MoE blocks (E) but the config names no experts (n_routed_experts, num_experts_per_tok)")?;
        Ok(Some(MoeShape { dense_layers: self.dense, ..moe }))
    }
}

/// Multi-head latent attention, when the config has `kv_lora_rank` (DeepSeek-V2/V3, Kimi-K2).
fn parse_mla(k: &Keys) -> Result<Option<MlaShape>, String> {
    let Some(kv_lora_rank) = k.num(&["kv_lora_rank"])? else {
        return Ok(None);
    };
    if k.get("index_topk").is_some() {
        return Err("DeepSeek sparse attention (index_topk, DeepSeek-V3.2) is not modelled; \
                    describe the model in a preset without it, or pick a DeepSeek-V3/R1 preset"
            .into());
    }
    Ok(Some(MlaShape {
        // JSON null (no query compression) reads as absent.
        q_lora_rank: k.num(&["q_lora_rank"])?.unwrap_or(0),
        kv_lora_rank,
        qk_nope_head_dim: k.need(&["qk_nope_head_dim"])?,
        qk_rope_head_dim: k.need(&["qk_rope_head_dim"])?,
        v_head_dim: k.need(&["v_head_dim"])?,
    }))
}

fn parse_moe(k: &Keys, layers: u32, model_type: &str) -> Result<Option<MoeShape>, String> {
    let experts = k.num(&["num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"])?.unwrap_or(0);
    let top_k = k.num(&["num_experts_per_tok", "experts_per_token", "moe_top_k", "num_selected_experts"])?.unwrap_or(0);
    if experts == 0 || top_k == 0 {
        return Ok(None);
    }
    let expert_intermediate = k.need(&["moe_intermediate_size", "expert_intermediate_size", "intermediate_size"])?;
    let shared_intermediate =
        k.num(&["shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"])?.filter(|&n| n > 0);
    let shared_experts = match k.num(&["n_shared_experts", "num_shared_experts"])? {
        Some(n) => n,
        None if shared_intermediate.is_some() => 1,
        // Llama-4 text layers always carry one shared expert.
        None if model_type.starts_with("llama4") => 1,
        None => 0,
    };
    let mut dense_layers = k.num(&["first_k_dense_replace"])?.unwrap_or(0);
    if let Some(Value::Array(only)) = k.get("mlp_only_layers") {
        dense_layers += u32::try_from(only.len()).unwrap_or(u32::MAX);
    }
    let step = k.num(&["decoder_sparse_step", "interleave_moe_layer_step", "moe_layer_freq"])?.unwrap_or(1);
    if step > 1 {
        dense_layers = dense_layers.max(layers - layers / step);
    }
    Ok(Some(MoeShape {
        experts,
        top_k,
        expert_intermediate,
        shared_experts,
        shared_intermediate,
        dense_layers: dense_layers.min(layers),
        latent: k.num(&["moe_latent_size"])?,
    }))
}

fn parse_sliding(k: &Keys, layers: u32, max_context: u32, model_type: &str) -> Result<Option<SlidingWindow>, String> {
    if k.get("use_sliding_window").and_then(Value::as_bool) == Some(false) {
        return Ok(None);
    }
    let window = k.num(&["sliding_window", "attention_chunk_size"])?.unwrap_or(0);
    if window == 0 || window >= max_context {
        return Ok(None);
    }
    let count = |v: &Value, pred: &dyn Fn(&Value) -> bool| {
        v.as_array().map(|a| u32::try_from(a.iter().filter(|x| pred(x)).count()).unwrap_or(0))
    };
    let windowed = if let Some(types) = k.get("layer_types") {
        count(types, &|t| matches!(t.as_str(), Some("sliding_attention" | "chunked_attention")))
            .ok_or("layer_types must be a list of strings")?
    } else if let Some(p) = k.num(&["sliding_window_pattern"])? {
        // Every p-th layer attends globally.
        layers - layers / p.max(1)
    } else if let Some(rope) = k.get("no_rope_layers") {
        // Llama-4: 1 marks a RoPE layer with chunked attention, 0 a global NoPE layer.
        count(rope, &|x| x.as_u64() == Some(1)).ok_or("no_rope_layers must be a list")?
    } else if model_type.starts_with("llama4") {
        layers - layers / 4
    } else if model_type.starts_with("gemma3") {
        layers - layers / 6
    } else {
        layers
    };
    Ok((windowed > 0).then_some(SlidingWindow { window, layers: windowed.min(layers) }))
}

fn parse_precision(k: &Keys) -> Result<(Precision, Option<Precision>), String> {
    let dtype = match k.first(&["torch_dtype", "dtype"]).and_then(Value::as_str) {
        Some("float16") => Precision::Fp16,
        _ => Precision::Bf16,
    };
    let Some(qc) = k.get("quantization_config").filter(|v| v.is_object()) else {
        return Ok((dtype, None));
    };
    let method = qc.get("quant_method").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    let bits = qc.get("bits").and_then(as_u32).unwrap_or(4);
    let unsupported = || {
        format!(
            "quantization {method:?} is not modelled; supported: fp8, mxfp4, awq/gptq 4-bit, \
             modelopt (FP8, NVFP4), compressed-tensors (fp8, nvfp4, int4); \
             or pass precision=... as an option"
        )
    };
    let precision = match method.as_str() {
        "fp8" | "fbgemm_fp8" => Precision::Fp8,
        "mxfp4" => Precision::Mxfp4,
        "awq" | "gptq" | "awq_marlin" | "gptq_marlin" if bits == 4 => Precision::AwqInt4,
        "modelopt" | "modelopt_fp4" => {
            let algo = qc.get("quant_algo").and_then(Value::as_str).unwrap_or("").to_ascii_uppercase();
            match algo.as_str() {
                "NVFP4" | "FP4" => Precision::Nvfp4,
                "FP8" => Precision::Fp8,
                _ => return Err(unsupported()),
            }
        }
        "compressed-tensors" => compressed_tensors(qc).ok_or_else(unsupported)?,
        _ => return Err(unsupported()),
    };
    let skip_lists = ["modules_to_not_convert", "ignore", "exclude_modules", "ignored_layers"];
    let attention_kept = skip_lists.iter().any(|key| {
        qc.get(*key).and_then(Value::as_array).is_some_and(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter(|s| !s.contains("visual") && !s.contains("vision"))
                .any(|s| s.contains("self_attn") || s.contains(".attn") || s.contains("linear_attn"))
        })
    });
    Ok((precision, attention_kept.then_some(dtype)))
}

fn compressed_tensors(qc: &Value) -> Option<Precision> {
    if let Some(fmt) = qc.get("format").and_then(Value::as_str) {
        if fmt.contains("nvfp4") {
            return Some(Precision::Nvfp4);
        }
        if fmt.contains("mxfp4") {
            return Some(Precision::Mxfp4);
        }
    }
    let groups = qc.get("config_groups")?.as_object()?;
    let weights = groups.values().find_map(|g| g.get("weights"))?;
    let bits = weights.get("num_bits").and_then(as_u32)?;
    let kind = weights.get("type").and_then(Value::as_str).unwrap_or("int");
    match (bits, kind) {
        (8, "float") => Some(Precision::Fp8),
        (4, "float") => Some(if weights.get("group_size").and_then(as_u32) == Some(32) {
            Precision::Mxfp4
        } else {
            Precision::Nvfp4
        }),
        (4, "int") => Some(Precision::AwqInt4),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/testdata/hf-configs/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn dense_config_reads_every_shape_number() {
        let m = ModelShape::from_hf_config(&fixture("qwen3-8b.json")).unwrap();
        assert_eq!((m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim), (36, 4096, 32, 8, 128));
        assert_eq!((m.intermediate, m.vocab, m.tied_embeddings), (12288, 151_936, false));
        assert_eq!(m.precision, Precision::Bf16);
        assert!(m.moe.is_none() && m.sliding.is_none());
        assert_eq!(m.id, "Qwen/Qwen3-8B");
    }

    #[test]
    fn moe_families_read_experts_shared_and_dense_layers() {
        let glm = ModelShape::from_hf_config(&fixture("glm-4.6-fp8.json")).unwrap();
        let moe = glm.moe.as_ref().unwrap();
        assert_eq!((moe.experts, moe.top_k, moe.expert_intermediate), (160, 8, 1536));
        assert_eq!((moe.shared_experts, moe.dense_layers), (1, 3));
        assert_eq!(glm.intermediate, 12288);
        assert_eq!(glm.precision, Precision::Fp8);

        let oss = ModelShape::from_hf_config(&fixture("gpt-oss-20b.json")).unwrap();
        let moe = oss.moe.as_ref().unwrap();
        assert_eq!((moe.experts, moe.top_k, moe.expert_intermediate), (32, 4, 2880));
        assert_eq!(oss.precision, Precision::Mxfp4);
        assert_eq!(oss.attention_precision(), Precision::Bf16);
        assert_eq!(oss.sliding, Some(SlidingWindow { window: 128, layers: 12 }));
        assert!(oss.attention_sinks && !glm.attention_sinks);
        assert!(oss.harmony_chat && !glm.harmony_chat);

        let scout = ModelShape::from_hf_config(&fixture("llama-4-scout-nvfp4.json")).unwrap();
        let moe = scout.moe.as_ref().unwrap();
        assert_eq!((moe.experts, moe.top_k, moe.shared_experts), (16, 1, 1));
        assert_eq!(moe.dense_layers, 0);
        assert_eq!(scout.precision, Precision::Nvfp4);
        assert_eq!(scout.sliding, Some(SlidingWindow { window: 8192, layers: 36 }));
    }

    #[test]
    fn deepseek_v3_style_configs_read_mla_and_leave_out_the_mtp_layer() {
        let v3 = ModelShape::from_hf_config(&fixture("deepseek-v3.json")).unwrap();
        // num_nextn_predict_layers = 1 is not counted.
        assert_eq!((v3.layers, v3.hidden, v3.heads, v3.head_dim), (61, 7168, 128, 192));
        assert_eq!((v3.intermediate, v3.vocab, v3.tied_embeddings), (18432, 129_280, false));
        assert_eq!(
            v3.mla,
            Some(MlaShape {
                q_lora_rank: 1536,
                kv_lora_rank: 512,
                qk_nope_head_dim: 128,
                qk_rope_head_dim: 64,
                v_head_dim: 128
            })
        );
        let moe = v3.moe.as_ref().unwrap();
        assert_eq!((moe.experts, moe.top_k, moe.expert_intermediate), (256, 8, 2048));
        assert_eq!((moe.shared_experts, moe.dense_layers), (1, 3));
        assert_eq!(v3.precision, Precision::Fp8);
        assert_eq!(v3.attention_precision(), Precision::Fp8);
        assert_eq!(v3.max_context, 163_840);
        assert_eq!(v3.kv_bytes_per_token_layer(crate::precision::KvDtype::Auto, 8) * 61.0, 70_272.0);
        assert!((v3.total_params() / 1e9 / 671.0 - 1.0).abs() < 0.02, "{}", v3.total_params());

        let kimi = ModelShape::from_hf_config(&fixture("kimi-k2.json")).unwrap();
        assert_eq!((kimi.layers, kimi.hidden, kimi.heads, kimi.vocab), (61, 7168, 64, 163_840));
        let moe = kimi.moe.as_ref().unwrap();
        assert_eq!((moe.experts, moe.top_k, moe.expert_intermediate), (384, 8, 2048));
        assert_eq!((moe.shared_experts, moe.dense_layers), (1, 1));
        assert_eq!(kimi.mla.as_ref().map(|a| (a.q_lora_rank, a.kv_lora_rank)), Some((1536, 512)));
        assert_eq!(kimi.precision, Precision::Fp8);
        // Published: about 1.04 T parameters, 32 B active.
        let (total, active) = (kimi.total_params() / 1e9, kimi.active_params() / 1e9);
        assert!((total / 1040.0 - 1.0).abs() < 0.02, "{total}");
        assert!((active / 32.0 - 1.0).abs() < 0.03, "{active}");
    }

    #[test]
    fn mla_without_query_compression_reads_a_null_q_lora_rank() {
        // DeepSeek-V2-Lite: q_lora_rank is null; 15.7 B parameters published.
        let lite = r#"{"model_type": "deepseek_v2", "num_hidden_layers": 27, "hidden_size": 2048,
            "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": 10944,
            "moe_intermediate_size": 1408, "n_routed_experts": 64, "num_experts_per_tok": 6,
            "n_shared_experts": 2, "first_k_dense_replace": 1, "q_lora_rank": null,
            "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
            "vocab_size": 102400, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
            "max_position_embeddings": 163840}"#;
        let m = ModelShape::from_hf_config(lite).unwrap();
        assert_eq!(m.mla.as_ref().map(|a| a.q_lora_rank), Some(0));
        assert_eq!(m.precision, Precision::Bf16);
        assert!((m.total_params() / 1e9 / 15.7 - 1.0).abs() < 0.02, "{}", m.total_params());
    }

    #[test]
    fn vl_configs_use_the_nested_text_config() {
        let m = ModelShape::from_hf_config(&fixture("qwen3-vl-235b-a22b-fp8.json")).unwrap();
        assert_eq!((m.layers, m.hidden, m.kv_heads), (94, 4096, 4));
        assert_eq!(m.moe.as_ref().unwrap().experts, 128);
        assert_eq!(m.precision, Precision::Fp8);
        assert!(!m.tied_embeddings);
        // Total language-model parameters: 235 B.
        assert!((m.total_params() / 1e9 - 235.1).abs() < 1.0, "{}", m.total_params());

        let g = ModelShape::from_hf_config(&fixture("gemma-3-4b-it.json")).unwrap();
        assert_eq!(g.sliding, Some(SlidingWindow { window: 1024, layers: 29 }));
        assert!(g.tied_embeddings);
    }

    #[test]
    fn configs_and_presets_describe_the_same_models() {
        let presets = crate::presets::Presets::embedded().unwrap();
        let kv = |m: &ModelShape| m.kv_bytes_per_token_layer(crate::precision::KvDtype::Auto, 1);
        for (file, id) in [
            ("qwen3-8b.json", "Qwen/Qwen3-8B"),
            ("gpt-oss-20b.json", "openai/gpt-oss-20b"),
            ("glm-4.6-fp8.json", "zai-org/GLM-4.6-FP8"),
            ("llama-4-scout-nvfp4.json", "nvidia/Llama-4-Scout-17B-16E-Instruct-NVFP4"),
            ("qwen3-vl-235b-a22b-fp8.json", "Qwen/Qwen3-VL-235B-A22B-Instruct-FP8"),
            ("gemma-3-4b-it.json", "google/gemma-3-4b-it"),
            ("kimi-k2.json", "moonshotai/Kimi-K2-Instruct"),
            ("minimax-m2.json", "MiniMaxAI/MiniMax-M2"),
            ("qwen3-next-80b-a3b-instruct.json", "Qwen/Qwen3-Next-80B-A3B-Instruct"),
            ("qwen3.5-397b-a17b.json", "Qwen/Qwen3.5-397B-A17B"),
        ] {
            let from_config = ModelShape::from_hf_config(&fixture(file)).unwrap();
            let preset = presets.model(id).unwrap();
            assert_eq!(from_config.total_params(), preset.total_params(), "{file}");
            assert_eq!(from_config.active_params(), preset.active_params(), "{file}");
            assert_eq!(kv(&from_config), kv(&preset), "{file}");
            assert_eq!(from_config.sliding, preset.sliding, "{file}");
            assert_eq!(from_config.precision, preset.precision, "{file}");
            assert_eq!(from_config.attention_precision(), preset.attention_precision(), "{file}");
            assert_eq!(from_config.attention_sinks, preset.attention_sinks, "{file}");
            assert_eq!(from_config.harmony_chat, preset.harmony_chat, "{file}");
            assert_eq!(from_config.linear, preset.linear, "{file}");
            assert_eq!(from_config.attention_output_gate, preset.attention_output_gate, "{file}");
        }
        // DeepSeek-R1 has DeepSeek-V3's config apart from the name.
        let mut v3 = ModelShape::from_hf_config(&fixture("deepseek-v3.json")).unwrap();
        let r1 = presets.model("deepseek-ai/DeepSeek-R1").unwrap();
        v3.id = r1.id.clone();
        v3.aliases = r1.aliases.clone();
        assert_eq!(v3, r1);
    }

    #[test]
    fn unreadable_configs_say_what_is_missing() {
        let err = ModelShape::from_hf_config(r#"{"hidden_size": 8}"#).unwrap_err().to_string();
        assert!(err.contains("num_hidden_layers"), "{err}");
        let err = ModelShape::from_hf_config("[1]").unwrap_err().to_string();
        assert!(err.contains("object"), "{err}");
        let mla = r#"{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2,
                      "vocab_size": 10, "kv_lora_rank": 512}"#;
        let err = ModelShape::from_hf_config(mla).unwrap_err().to_string();
        assert!(err.contains("qk_nope_head_dim"), "{err}");
        let sparse = r#"{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2,
                         "vocab_size": 10, "kv_lora_rank": 4, "qk_nope_head_dim": 2,
                         "qk_rope_head_dim": 2, "v_head_dim": 2, "index_topk": 2048}"#;
        let err = ModelShape::from_hf_config(sparse).unwrap_err().to_string();
        assert!(err.contains("index_topk") && err.contains("preset"), "{err}");
        let zero = r#"{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2,
                       "vocab_size": 10, "kv_lora_rank": 0, "qk_nope_head_dim": 2,
                       "qk_rope_head_dim": 2, "v_head_dim": 2}"#;
        let err = ModelShape::from_hf_config(zero).unwrap_err().to_string();
        assert!(err.contains("kv_lora_rank"), "{err}");
        let q = r#"{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2,
                    "vocab_size": 10, "quantization_config": {"quant_method": "hqq"}}"#;
        let err = ModelShape::from_hf_config(q).unwrap_err().to_string();
        assert!(err.contains("hqq") && err.contains("precision="), "{err}");
    }

    #[test]
    fn linear_attention_and_state_space_layers_are_refused_not_priced_as_attention() {
        let base = r#""num_hidden_layers": 4, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10"#;
        for (extra, key) in [
            (r#""model_type": "kimi_linear", "linear_attn_config": {"kda_layers": [1, 2, 3]}"#, "linear_attn_config"),
            (r#""layer_types": ["mamba", "mamba", "mamba", "full_attention"]"#, "layer_types"),
            (r#""model_type": "jamba", "mamba_d_state": 16"#, "mamba_d_state"),
            (r#""model_type": "falcon_h1", "hybrid_override_pattern": "M-M*""#, "hybrid_override_pattern"),
            (r#""layers_block_type": ["mamba", "attention", "mamba", "mamba"]"#, "layers_block_type"),
            (r#""model_type": "minimax", "attn_type_list": [0, 0, 0, 1]"#, "attn_type_list"),
        ] {
            let err = ModelShape::from_hf_config(&format!("{{{base}, {extra}}}")).unwrap_err().to_string();
            assert!(err.contains(key) && err.contains("not modelled"), "{key}: {err}");
        }
        // Gated DeltaNet without its heads, or without saying which layers it takes, is named.
        let err = ModelShape::from_hf_config(&format!("{{{base}, \"full_attention_interval\": 4}}")).unwrap_err();
        assert!(err.to_string().contains("linear_num_value_heads"), "{err}");
        let err = ModelShape::from_hf_config(&format!("{{{base}, \"linear_num_value_heads\": 4}}")).unwrap_err();
        assert!(err.to_string().contains("layer_types or full_attention_interval"), "{err}");
        let listed = r#""layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]"#;
        let err = ModelShape::from_hf_config(&format!("{{{base}, {listed}}}")).unwrap_err();
        assert!(err.to_string().contains("linear_num_value_heads"), "{err}");
        // Softmax attention in every layer, however the config lists it, is read.
        for extra in [
            r#""attn_type_list": [1, 1, 1, 1]"#,
            r#""layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"], "sliding_window": 128"#,
        ] {
            assert!(ModelShape::from_hf_config(&format!("{{{base}, {extra}}}")).is_ok(), "{extra}");
        }
    }

    #[test]
    fn gated_deltanet_layers_are_read_with_their_state() {
        // Qwen3-Next-80B-A3B: every fourth layer attends (gated), the other 36 are Gated DeltaNet.
        let next = ModelShape::from_hf_config(&fixture("qwen3-next-80b-a3b-instruct.json")).unwrap();
        let l = next.linear.as_ref().unwrap();
        assert_eq!((l.layers, l.key_heads, l.value_heads, l.key_head_dim, l.conv_kernel), (36, 16, 32, 128, 4));
        assert!(!l.state_fp32 && next.attention_output_gate);
        assert_eq!((next.attention_layers(), next.full_attention_layers()), (12, 12));
        // Published: 80 B parameters, "3 B activated"; counted here 3.9 B with the embeddings (0.6 B
        // of them), 3.3 B without.
        let (total, active) = (next.total_params() / 1e9, next.active_params() / 1e9);
        assert!((total / 80.0 - 1.0).abs() < 0.01, "{total}");
        assert!((active - 3.9).abs() < 0.1, "{active}");
        // Qwen3.5-397B-A17B nests its language model under text_config, lists its layer types and
        // keeps its recurrent state in FP32.
        let big = ModelShape::from_hf_config(&fixture("qwen3.5-397b-a17b.json")).unwrap();
        let l = big.linear.as_ref().unwrap();
        assert_eq!((l.layers, l.value_heads, big.attention_layers()), (45, 64, 15));
        assert!(l.state_fp32 && big.attention_output_gate);
        // Published: 397 B parameters (the vision tower's few hundred million among them), 17 B active.
        let (total, active) = (big.total_params() / 1e9, big.active_params() / 1e9);
        assert!((total / 397.0 - 1.0).abs() < 0.01, "{total}");
        assert!((active / 17.0 - 1.0).abs() < 0.03, "{active}");
    }

    #[test]
    fn nemotron_h_blocks_pair_each_ffn_with_a_mixer_and_read_mamba_2() {
        // Nemotron 3 Nano: 23 Mamba-2, 6 attention and 23 MoE blocks; 29 layers of which 6 have
        // no FFN.
        let nano = ModelShape::from_hf_config(&fixture("nemotron-3-nano-30b-a3b.json")).unwrap();
        assert_eq!((nano.layers, nano.mixer_only_layers, nano.attention_layers(), nano.moe_layers()), (29, 6, 6, 23));
        assert_eq!((nano.allreduces(), nano.dense_ffn_layers()), (52, 0));
        let l = nano.linear.as_ref().unwrap();
        assert_eq!(l.kind, LinearKind::Mamba2);
        assert_eq!((l.layers, l.key_heads, l.value_heads, l.key_head_dim, l.value_head_dim), (23, 8, 64, 128, 64));
        assert_eq!((l.chunk, l.state_fp32, nano.ungated_ffn), (Some(128), true, true));
        let moe = nano.moe.as_ref().unwrap();
        assert_eq!((moe.experts, moe.top_k, moe.shared_experts, moe.shared_intermediate), (128, 6, 1, Some(3712)));
        // Published: 31.6 B parameters, 3.2 B active (3.6 B with the 0.7 B of embeddings).
        let (total, active) = (nano.total_params() / 1e9, nano.active_params() / 1e9);
        assert!((total / 31.6 - 1.0).abs() < 0.01, "{total}");
        assert!((active - 3.6).abs() < 0.1, "{active}");
        // Nemotron Nano 9B v2: 27 Mamba-2, 4 attention and 25 dense blocks; published 8.89 B.
        let nine = ModelShape::from_hf_config(&fixture("nemotron-nano-9b-v2.json")).unwrap();
        assert_eq!(
            (nine.layers, nine.mixer_only_layers, nine.dense_ffn_layers(), nine.linear_layers()),
            (31, 6, 25, 27)
        );
        assert!(nine.moe.is_none() && nine.ungated_ffn);
        assert!((nine.total_params() / 8.89e9 - 1.0).abs() < 0.01, "{}", nine.total_params());
        // The same blocks listed by name read the same.
        let listed = fixture("nemotron-3-nano-30b-a3b.json").replace(
            r#""hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME","#,
            &format!(
                r#""layers_block_type": [{}],"#,
                "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
                    .chars()
                    .map(|c| match c {
                        'M' => "\"mamba\"",
                        'E' => "\"moe\"",
                        _ => "\"attention\"",
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        assert_eq!(ModelShape::from_hf_config(&listed).unwrap(), nano);
    }

    #[test]
    fn latent_experts_read_and_write_their_own_width() {
        // Nemotron 3 Super's MoE blocks: 512 experts of 2,688 over a latent width of 1,024, 22 a
        // token, one shared expert of 5,376 on the hidden width of 4,096.
        let super_moe = fixture("nemotron-3-nano-30b-a3b.json")
            .replace(r#""hidden_size": 2688,"#, r#""hidden_size": 4096, "moe_latent_size": 1024,"#)
            .replace(r#""n_routed_experts": 128,"#, r#""n_routed_experts": 512,"#)
            .replace(r#""moe_intermediate_size": 1856,"#, r#""moe_intermediate_size": 2688,"#);
        let m = ModelShape::from_hf_config(&super_moe).unwrap();
        assert_eq!(m.moe.as_ref().unwrap().latent, Some(1024));
        assert_eq!(m.expert_params(), 2.0 * 1024.0 * 2688.0);
        // Shared expert, router and the two projections to and from the latent width.
        let shared = 2.0 * 4096.0 * 3712.0;
        assert_eq!(m.moe_always_params(), shared + 4096.0 * 512.0 + 2.0 * 4096.0 * 1024.0);
        // The preset: published 120 B parameters, 12 B active (12.7 B with the embeddings).
        let p = crate::presets::Presets::embedded().unwrap().model("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B").unwrap();
        let (total, active) = (p.total_params() / 1e9, p.active_params() / 1e9);
        assert!((total / 120.5 - 1.0).abs() < 0.01, "{total}");
        assert!((active - 12.7).abs() < 0.15, "{active}");
        assert_eq!((p.allreduces(), p.moe_layers(), p.attention_layers()), (88, 40, 8));
    }

    #[test]
    fn nemotron_h_patterns_it_cannot_price_are_refused_with_the_reason() {
        let nano = fixture("nemotron-3-nano-30b-a3b.json");
        let pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME";
        for (from, to, says) in [
            (pattern, "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEMX", "`X`"),
            (pattern, "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEM", "51 blocks"),
            (pattern, "MEMEMMEMEMEMMEMEMEMMEMEMEMMEMEMEMMEMEMEMEMMEMEMEMEME", "no attention block"),
            (pattern, &pattern.replace('M', "E"), "no more FFNs than mixers"),
        ] {
            let err = ModelShape::from_hf_config(&nano.replace(from, to)).unwrap_err().to_string();
            assert!(err.contains(says), "{says}: {err}");
        }
    }
}
