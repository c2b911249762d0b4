//! Reading config.json files: the families' layouts, their weight formats, and the refusals.

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
        ("gemma-2-9b-it.json", "google/gemma-2-9b-it"),
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
    // A whole number past what a dimension holds says so, not that it is no whole number.
    for (v, shown) in [("4294967296", "4294967296"), ("-1", "-1"), ("1.5", "1.5"), ("\"x\"", "\"x\"")] {
        let err = ModelShape::from_hf_config(&format!(r#"{{"hidden_size": 8, "num_hidden_layers": {v}}}"#))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("num_hidden_layers must be a whole number from 0 to 4294967295, got {shown}")),
            "{err}"
        );
    }
    // Without intermediate_size the FFN is 4 × hidden_size wide, which must fit too.
    let wide = r#"{"num_hidden_layers": 2, "hidden_size": 1073741824, "num_attention_heads": 2, "vocab_size": 10}"#;
    let err = ModelShape::from_hf_config(wide).unwrap_err().to_string();
    assert!(err.contains("hidden_size 1073741824 is too large: without intermediate_size"), "{err}");
    let mla = r#"{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2,
                  "vocab_size": 10, "kv_lora_rank": 512}"#;
    let err = ModelShape::from_hf_config(mla).unwrap_err().to_string();
    assert!(err.contains("qk_nope_head_dim"), "{err}");
    let sparse = r#"{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2,
                     "vocab_size": 10, "kv_lora_rank": 4, "qk_nope_head_dim": 2,
                     "qk_rope_head_dim": 2, "v_head_dim": 2, "index_topk": 2048}"#;
    let err = ModelShape::from_hf_config(sparse).unwrap_err().to_string();
    assert!(err.contains("index_n_heads"), "{err}");
    let zero = r#"{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2,
                   "vocab_size": 10, "kv_lora_rank": 0, "qk_nope_head_dim": 2,
                   "qk_rope_head_dim": 2, "v_head_dim": 2}"#;
    let err = ModelShape::from_hf_config(zero).unwrap_err().to_string();
    assert!(err.contains("kv_lora_rank"), "{err}");
    let q = r#"{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2,
                "vocab_size": 10, "quantization_config": {"quant_method": "hqq"}}"#;
    let err = ModelShape::from_hf_config(q).unwrap_err().to_string();
    assert!(err.contains("hqq") && err.contains("precision="), "{err}");
    // A 3-bit AWQ names its bits, and a quantization_config that is not an object is refused
    // rather than read as unquantized.
    let base = r#""num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10"#;
    let awq3 = format!(r#"{{{base}, "quantization_config": {{"quant_method": "awq", "bits": 3}}}}"#);
    let err = ModelShape::from_hf_config(&awq3).unwrap_err().to_string();
    assert!(err.contains(r#""awq" at 3 bits is not modelled"#), "{err}");
    let text = format!(r#"{{{base}, "quantization_config": "fp8"}}"#);
    let err = ModelShape::from_hf_config(&text).unwrap_err().to_string();
    assert!(err.contains("quantization_config should be an object") && err.contains(r#""fp8""#), "{err}");
    assert!(ModelShape::from_hf_config(&format!(r#"{{{base}, "quantization_config": null}}"#)).is_ok());
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
    // A list of another length than the layers, or not of strings, is named, not counted.
    for (extra, says) in [
        (
            r#""layer_types": ["sliding_attention", "full_attention"], "sliding_window": 128"#,
            "lists 2 layers, num_hidden_layers 4",
        ),
        (r#""layer_types": "sliding_attention", "sliding_window": 128"#, "must be a list of strings"),
        (r#""layer_types": [0, 1, 0, 1]"#, "must be a list of strings"),
    ] {
        let err = ModelShape::from_hf_config(&format!("{{{base}, {extra}}}")).unwrap_err().to_string();
        assert!(err.contains(says), "{extra}: {err}");
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
    assert_eq!((nano.allreduces(), nano.dense_ffn_layers()), (53, 0));
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
    assert_eq!((nine.layers, nine.mixer_only_layers, nine.dense_ffn_layers(), nine.linear_layers()), (31, 6, 25, 27));
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
    assert_eq!((p.allreduces(), p.moe_layers(), p.attention_layers()), (89, 40, 8));
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

#[test]
fn deepseek_sparse_attention_is_read_with_its_indexer() {
    // DeepSeek-V3.2's config is V3's with the indexer's three keys.
    let v32 = fixture("deepseek-v3.json").replace(
        r#""q_lora_rank": 1536,"#,
        r#""q_lora_rank": 1536, "index_topk": 2048, "index_n_heads": 64, "index_head_dim": 128,"#,
    );
    let m = ModelShape::from_hf_config(&v32).unwrap();
    assert_eq!(m.sparse, Some(SparseAttention { top_k: 2048, heads: 64, head_dim: 128, indexer_layers: None }));
    assert_eq!(m.pair_window(), 2048);
    // The preset has the same shape; 0.86 B indexer parameters beside V3's 671 B (published
    // 685 B with the multi-token-prediction layer).
    let preset = crate::presets::Presets::embedded().unwrap().model("deepseek-ai/DeepSeek-V3.2").unwrap();
    assert_eq!(preset.sparse, m.sparse);
    let v3 = ModelShape::from_hf_config(&fixture("deepseek-v3.json")).unwrap();
    let indexer = (m.total_params() - v3.total_params()) / 1e9;
    assert!((indexer - 61.0 * (1536.0 * 8192.0 + 7168.0 * 192.0) / 1e9).abs() < 1e-9, "{indexer}");
    // Every layer's cache keeps its indexer key (132 bytes) beside the latent.
    let kv = crate::precision::KvDtype::Auto;
    assert_eq!(m.kv_bytes_per_token_layer(kv, 8) - v3.kv_bytes_per_token_layer(kv, 8), 132.0);
    // GLM-5.2's layers share indexers: 16 of 61 here run one, and the keys and the indexer's
    // parameters are that share of every layer's.
    let types: Vec<&str> = (0..61).map(|i| if i % 4 == 0 { "\"full\"" } else { "\"shared\"" }).collect();
    let shared = v32
        .replace(r#""index_topk": 2048,"#, &format!(r#""index_topk": 2048, "indexer_types": [{}],"#, types.join(", ")));
    let s = ModelShape::from_hf_config(&shared).unwrap();
    assert_eq!(s.sparse.as_ref().unwrap().indexer_layers, Some(16));
    assert!((s.index_key_bytes() - 132.0 * 16.0 / 61.0).abs() < 1e-9);
    assert!(
        ((s.total_params() - v3.total_params()) / (m.total_params() - v3.total_params()) - 16.0 / 61.0).abs() < 1e-9
    );
}

#[test]
fn a_quantization_that_skips_the_shared_experts_keeps_them_in_the_checkpoint_s_dtype() {
    // Kimi-K2-Thinking's compressed-tensors INT4: routed experts only.
    let quant = r#""quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "group_size": 32}}},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]},"#;
    let fp8 = r#""quantization_config": {
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
    "quant_method": "fp8",
    "weight_block_size": [128, 128]
  },"#;
    let thinking = fixture("deepseek-v3.json").replace(fp8, quant);
    assert!(thinking.contains("pack-quantized"), "the fixture's FP8 block was replaced");
    let m = ModelShape::from_hf_config(&thinking).unwrap();
    assert_eq!(
        (m.precision, m.attention_precision(), m.always_precision()),
        (Precision::AwqInt4, Precision::Bf16, Precision::Bf16)
    );
    // Without the shared experts in the list (a gate's scalar is not them) they take the routed
    // experts' format.
    let all = thinking.replace(r#""re:.*shared_experts.*", "#, r#""mlp.shared_expert_gate", "#);
    assert_eq!(ModelShape::from_hf_config(&all).unwrap().always_precision(), Precision::AwqInt4);
}

#[test]
fn half_a_mixture_of_experts_is_refused_not_read_as_dense() {
    let config = |experts: &str| {
        format!(
            r#"{{"model_type": "qwen3_moe", "num_hidden_layers": 4, "hidden_size": 1024,
            "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 3072,
            "moe_intermediate_size": 512, {experts} "vocab_size": 1000, "torch_dtype": "bfloat16",
            "max_position_embeddings": 4096}}"#
        )
    };
    let err = |experts: &str| ModelShape::from_hf_config(&config(experts)).unwrap_err().to_string();
    let e = err(r#""num_experts": 0, "num_experts_per_tok": 8,"#);
    assert!(e.contains("routes each token to 8 experts") && e.contains("gives 0 experts"), "{e}");
    let e = err(r#""num_experts": 4, "num_experts_per_tok": 8,"#);
    assert!(e.contains("8 experts (num_experts_per_tok) of 4"), "{e}");
    let e = err(r#""num_experts": 16,"#);
    assert!(e.contains("no experts a token"), "{e}");
    // Neither, or 0 of both: dense, as before; both in range: a mixture of experts.
    for dense in ["", r#""num_experts": 0, "num_experts_per_tok": 0,"#] {
        assert!(ModelShape::from_hf_config(&config(dense)).unwrap().moe.is_none(), "{dense}");
    }
    let moe = ModelShape::from_hf_config(&config(r#""num_experts": 16, "num_experts_per_tok": 2,"#)).unwrap();
    assert_eq!(moe.moe.map(|m| (m.experts, m.top_k)), Some((16, 2)));
}
