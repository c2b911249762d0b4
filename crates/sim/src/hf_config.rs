//! Reading a model's shape from a Hugging Face `config.json` (`--model-config PATH`).
//!
//! Handles the layouts of the supported families: plain decoder configs, VL configs that nest
//! the language model under `text_config`, the MoE keys of Qwen3-MoE, GLM-4.x, gpt-oss, Mixtral,
//! Llama-4 and DeepSeek-V2/V3 (Kimi-K2), multi-head latent attention (`kv_lora_rank`; the
//! multi-token-prediction layers of `num_nextn_predict_layers` are left out), DeepSeek sparse
//! attention (`index_topk`, DeepSeek-V3.2), sliding/chunked attention (`layer_types`, `sliding_window_pattern`,
//! `attention_chunk_size`), Gated DeltaNet linear-attention layers (Qwen3-Next, Qwen3.5:
//! `linear_num_value_heads`, `layer_types` or `full_attention_interval`), Nemotron-H's Mamba-2
//! hybrids (`hybrid_override_pattern` or `layers_block_type`, blocks of one mixer or one FFN),
//! and `quantization_config` for the weight format. Layers it has no term for (other linear
//! attention, other state-space layers) are refused, not priced as attention.

use serde_json::Value;

use crate::error::SimError;
use crate::model::{LinearAttention, LinearKind, MlaShape, ModelShape, MoeShape, SlidingWindow, SparseAttention};
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
            Some(v) => as_u32(v)
                .map(Some)
                .ok_or_else(|| format!("{} must be a whole number from 0 to {}, got {v}", keys[0], u32::MAX)),
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
        check_layer_types(&k, blocks)?;
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
        _ => match k.num(&["intermediate_size", "ffn_hidden_size", "n_inner"])? {
            Some(n) => n,
            // GPT-2's rule where the config gives no width.
            None => hidden.checked_mul(4).ok_or_else(|| {
                format!("hidden_size {hidden} is too large: without intermediate_size the FFN is 4 × hidden_size wide")
            })?,
        },
    };
    let sliding = parse_sliding(&k, layers, max_context, &model_type)?;
    let formats = parse_precision(&k)?;
    let moe = moe.map(|m| MoeShape { shared_precision: formats.shared, ..m });
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
        precision: formats.weights,
        attention_precision: formats.attention,
        bf16_mixers: 0,
        max_context,
        moe,
        sliding,
        mla,
        sparse: parse_sparse(&k)?,
        linear,
        attention_output_gate,
        extra_params_b: 0.0,
        modalities: Vec::new(),
        vision: None,
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

/// `layer_types` names every layer's kind, one string a layer (as Transformers checks it): a
/// list of another length would count the sliding or linear layers wrongly.
fn check_layer_types(k: &Keys, layers: u32) -> Result<(), String> {
    let Some(types) = k.get("layer_types") else { return Ok(()) };
    let listed = types.as_array().filter(|a| a.iter().all(Value::is_string));
    match listed {
        None => Err("layer_types must be a list of strings, one a layer".into()),
        Some(a) if a.len() != layers as usize => {
            Err(format!("layer_types lists {} layers, num_hidden_layers {layers}; give one kind a layer", a.len()))
        }
        Some(_) => Ok(()),
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

/// DeepSeek sparse attention, when the config has `index_topk` (DeepSeek-V3.2, GLM-5): its
/// indexer's heads and width, and the layers that run one where some share (GLM-5.2).
fn parse_sparse(k: &Keys) -> Result<Option<SparseAttention>, String> {
    let Some(top_k) = k.num(&["index_topk"])? else {
        return Ok(None);
    };
    // GLM-5.2 lists which layers run an indexer (`full`) and which reuse the top-k before them
    // (`shared`).
    let indexer_layers = match k.get("indexer_types") {
        Some(Value::Array(types)) => {
            Some(u32::try_from(types.iter().filter(|t| t.as_str() != Some("shared")).count()).unwrap_or(u32::MAX))
        }
        Some(_) => return Err("indexer_types must be a list of `full` and `shared`".into()),
        None => None,
    };
    Ok(Some(SparseAttention {
        top_k,
        heads: k.need(&["index_n_heads"])?,
        head_dim: k.need(&["index_head_dim"])?,
        indexer_layers,
    }))
}

/// Multi-head latent attention, when the config has `kv_lora_rank` (DeepSeek-V2/V3, Kimi-K2).
fn parse_mla(k: &Keys) -> Result<Option<MlaShape>, String> {
    let Some(kv_lora_rank) = k.num(&["kv_lora_rank"])? else {
        return Ok(None);
    };
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
    let experts = k.num(&["num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"])?;
    let top_k = k.num(&["num_experts_per_tok", "experts_per_token", "moe_top_k", "num_selected_experts"])?;
    // A dense model names neither (or 0 experts, a key some dense configs carry); one half of a
    // mixture of experts without the other is a damaged config, not a guess to make.
    let (experts, top_k) = match (experts, top_k) {
        (None | Some(0), None | Some(0)) | (None, Some(_)) => return Ok(None),
        (Some(e), Some(t)) if t > 0 && t <= e => (e, t),
        (Some(0), Some(t)) => {
            return Err(format!(
                "the config routes each token to {t} experts (num_experts_per_tok) but gives 0 experts \
                 (num_experts): give the experts' count, or drop num_experts_per_tok for a dense model"
            ));
        }
        (Some(e), Some(t)) if t > e => {
            return Err(format!(
                "the config routes each token to {t} experts (num_experts_per_tok) of {e} (num_experts); \
                 a token cannot use more experts than the layer has: fix one of them"
            ));
        }
        (Some(e), _) => {
            return Err(format!(
                "the config gives {e} experts (num_experts) but no experts a token (num_experts_per_tok): \
                 give how many each token is routed to"
            ));
        }
    };
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
        shared_precision: None,
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
    } else if model_type.starts_with("gemma2") {
        // Gemma 2: the even layers are local, the odd ones global.
        layers.div_ceil(2)
    } else if model_type.starts_with("gemma3") {
        layers - layers / 6
    } else {
        layers
    };
    Ok((windowed > 0).then_some(SlidingWindow { window, layers: windowed.min(layers) }))
}

/// The 16-bit format of the weights a quantization leaves alone (`torch_dtype`).
fn checkpoint_dtype(k: &Keys) -> Precision {
    match k.first(&["torch_dtype", "dtype"]).and_then(Value::as_str) {
        Some("float16") => Precision::Fp16,
        _ => Precision::Bf16,
    }
}

/// Whether a quantization config's skip lists keep a module `names` matches unquantized (the
/// vision tower's modules aside).
fn quantization_skips(qc: &Value, names: impl Fn(&str) -> bool) -> bool {
    ["modules_to_not_convert", "ignore", "exclude_modules", "ignored_layers"].iter().any(|key| {
        qc.get(*key).and_then(Value::as_array).is_some_and(|a| {
            a.iter().filter_map(Value::as_str).filter(|s| !s.contains("visual") && !s.contains("vision")).any(&names)
        })
    })
}

/// The weight formats a config's quantization gives: the model's, and the parts its skip lists
/// keep in the checkpoint's 16-bit format where that differs.
struct Formats {
    weights: Precision,
    /// The attention (and linear-attention) projections.
    attention: Option<Precision>,
    /// The FFN weights every token uses: Kimi-K2-Thinking's and K2.5's INT4 checkpoints quantize
    /// the routed experts only.
    shared: Option<Precision>,
}

fn parse_precision(k: &Keys) -> Result<Formats, String> {
    let dtype = checkpoint_dtype(k);
    let qc = match k.get("quantization_config") {
        None | Some(Value::Null) => return Ok(Formats { weights: dtype, attention: None, shared: None }),
        Some(qc) if qc.is_object() => qc,
        // Read as unquantized, it would price the weights at the checkpoint's 16 bits.
        Some(other) => {
            return Err(format!(
                "quantization_config should be an object with a quant_method (as a checkpoint's \
                 config.json gives it), not {other}; or pass precision=... as an option"
            ));
        }
    };
    let method = qc.get("quant_method").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    let given_bits = qc.get("bits").and_then(as_u32);
    let bits = given_bits.unwrap_or(4);
    let unsupported = || {
        let asked = match given_bits {
            Some(b) => format!("{method:?} at {b} bits"),
            None => format!("{method:?}"),
        };
        format!(
            "quantization {asked} is not modelled; supported: fp8, mxfp4, awq/gptq 4-bit, \
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
    let attention_kept =
        quantization_skips(qc, |s| s.contains("self_attn") || s.contains(".attn") || s.contains("linear_attn"));
    // The shared experts themselves, not Qwen's `shared_expert_gate` scalar.
    let shared = |s: &str| s.contains("shared_experts") || s.contains("shared_expert.") || s.ends_with("shared_expert");
    let shared_kept = precision != dtype && quantization_skips(qc, shared);
    Ok(Formats { weights: precision, attention: attention_kept.then_some(dtype), shared: shared_kept.then_some(dtype) })
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
mod tests;
