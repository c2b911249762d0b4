//! Model shapes by hand: parameter counts, attention FLOPs, KV bytes and the checks of a shape.

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
        sparse: None,
        linear: None,
        attention_output_gate: false,
        extra_params_b: 0.0,
        modalities: Vec::new(),
        vision: None,
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
            shared_precision: None,
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
        shared_precision: None,
        latent: None,
    });
    assert!(m.validate().unwrap_err().contains("top_k"));
    let mut m = deepseek_v3();
    m.mla.as_mut().unwrap().kv_lora_rank = 0;
    let err = m.validate().unwrap_err();
    assert!(err.contains("mla.kv_lora_rank") && err.contains("latent"), "{err}");
    let mut m = qwen3_8b();
    m.modalities = vec!["image".into()];
    assert!(m.validate().unwrap_err().contains("extra_params_b"));
}

#[test]
fn the_language_model_alone_leaves_its_tower_s_memory_to_the_kv_cache() {
    use crate::setup::tests::setup;
    // Every preset with a tower says what the tower takes.
    let presets = crate::presets::Presets::embedded().unwrap();
    for m in presets.model_presets() {
        assert_eq!(m.extra_params_b > 0.0, !m.modalities.is_empty(), "{}", m.id);
    }
    // Qwen3-VL-32B on one L40S, as vLLM pull request 29217 served it: no image, no video, and
    // its 0.5 B-parameter tower's BF16 bytes go to the KV cache.
    let plan = |model: &str, opts: &[(&str, &str)]| setup(model, "l40s", opts).unwrap().memory;
    let vl = "Qwen/Qwen3-VL-32B-Instruct-FP8";
    let (whole, alone) = (plan(vl, &[]), plan(vl, &[("limit-mm-per-prompt", "video=0,image=0")]));
    let tower = 0.5e9 * 2.0 / (1u64 << 30) as f64;
    assert!((whole.weights_gib - alone.weights_gib - tower).abs() < 1e-9);
    assert!((alone.kv_gib - whole.kv_gib - tower).abs() < 1e-9 && alone.kv_tokens > whole.kv_tokens);
    // vLLM's switch says the same; one modality of two still loads the tower, and a limit
    // above zero is no limit to it.
    assert_eq!(plan(vl, &[("language-model-only", "true")]), alone);
    let notes = setup(vl, "l40s", &[("language-model-only", "true")]).unwrap().notes;
    assert!(notes.iter().any(|n| n.contains("no image or video input, the tower's 0.9 GiB/GPU")), "{notes:?}");
    assert_eq!(plan(vl, &[("limit-mm-per-prompt", r#"{"image": 0}"#)]), whole);
    assert_eq!(plan(vl, &[("limit-mm-per-prompt", "image=0,video=1")]), whole);
    // Gemma 3's tower takes images only; a text model has nothing to leave.
    let gemma = "google/gemma-3-12b-it";
    assert!(plan(gemma, &[("limit-mm-per-prompt", "image=0")]).kv_gib > plan(gemma, &[]).kv_gib);
    assert_eq!(plan("Qwen/Qwen3-8B", &[("language-model-only", "true")]), plan("Qwen/Qwen3-8B", &[]));
    let bad = setup(vl, "l40s", &[("limit-mm-per-prompt", "images")]).unwrap_err().to_string();
    assert!(bad.contains("image=0,video=0"), "{bad}");
}

#[test]
fn the_glm_5_and_minimax_m2_5_presets_are_the_published_models() {
    let presets = crate::presets::Presets::embedded().unwrap();
    // GLM-5: published 744 B parameters, 40 B active; counted 743.8 and 41.6 with the
    // embeddings (1.9 B) and the indexers (0.7 B).
    let glm = presets.model("zai-org/GLM-5").unwrap();
    let (total, active) = (glm.total_params() / 1e9, glm.active_params() / 1e9);
    assert!((total / 744.0 - 1.0).abs() < 0.005, "{total}");
    assert!((active - 41.6).abs() < 0.3, "{active}");
    assert_eq!((glm.pair_window(), glm.moe_layers(), glm.allreduces()), (2048, 75, 157));
    // InferenceX's names, and the FP8 checkpoint by its name.
    assert_eq!(presets.model("glm5").unwrap().id, "zai-org/GLM-5");
    assert_eq!(presets.model("zai-org/GLM-5-FP8").unwrap().precision, Precision::Fp8);
    // GLM-5.2: GLM-5's shapes with 21 of its 78 indexers (layers 0, 1, 2 and every fourth from
    // 6): 57 indexers of 9.4 M parameters each fewer; its FP8 checkpoint by name.
    let glm52 = presets.model("zai-org/GLM-5.2-FP8").unwrap();
    assert_eq!((glm52.precision, glm52.layers, glm52.pair_window()), (Precision::Fp8, 78, 2048));
    assert_eq!(glm52.sparse.as_ref().and_then(|s| s.indexer_layers), Some(21));
    let fewer = glm.total_params() - presets.model("zai-org/GLM-5.2").unwrap().total_params();
    let one = glm.sparse.as_ref().unwrap().params(6144, 2048);
    assert!((fewer / (57.0 * one) - 1.0).abs() < 1e-9, "{fewer}");
    // MiniMax-M2.5 and M2.7 are M2's shapes (229.9 B, 9.8 B active as published for M2.5).
    let m25 = presets.model("MiniMaxAI/MiniMax-M2.5").unwrap();
    assert_eq!(
        (m25.id.as_str(), presets.model("minimaxm2.5").unwrap().id.as_str()),
        ("MiniMaxAI/MiniMax-M2", "MiniMaxAI/MiniMax-M2")
    );
    assert!((m25.total_params() / 229.9e9 - 1.0).abs() < 0.01, "{}", m25.total_params());
}

#[test]
fn kimi_k2_5_keeps_its_shared_experts_in_bf16_beside_int4_routed_ones() {
    let presets = crate::presets::Presets::embedded().unwrap();
    let k25 = presets.model("moonshotai/Kimi-K2.5").unwrap();
    assert_eq!(
        (k25.precision, k25.always_precision(), k25.attention_precision()),
        (Precision::AwqInt4, Precision::Bf16, Precision::Bf16)
    );
    // 1.03 T parameters like Kimi-K2: the routed experts at 0.53 bytes, the 23 B of attention,
    // shared experts, dense layer and embeddings at 2 (a 595 GB checkpoint, vision aside).
    let k2 = presets.model("moonshotai/Kimi-K2-Instruct").unwrap();
    assert!((k25.total_params() / k2.total_params() - 1.0).abs() < 1e-12);
    let routed = f64::from(k25.moe_layers()) * 384.0 * k25.expert_params();
    let rest = k25.total_params() - routed;
    let bytes = routed * 0.53 + rest * 2.0 + 0.4e9 * 2.0;
    assert!((k25.weight_bytes() / bytes - 1.0).abs() < 1e-9, "{} vs {bytes}", k25.weight_bytes());
    assert_eq!(presets.model("kimik2.5").unwrap().id, "moonshotai/Kimi-K2.5");
    // Kimi-K2-Instruct's FP8 covers its shared experts too.
    assert_eq!(k2.always_precision(), Precision::Fp8);
}

#[test]
fn every_tower_s_shape_holds_about_the_parameters_its_preset_s_memory_counts() {
    // The shapes price the tower's work, `extra_params_b` its memory: the two agree to a third
    // (Qwen3-VL's deep-stack mergers, left out of the shape, are most of the gap).
    let presets = crate::presets::Presets::embedded().unwrap();
    let mut towers = 0;
    for m in presets.model_presets() {
        let Some(v) = &m.vision else { continue };
        towers += 1;
        let ratio = v.params(m.hidden) / (m.extra_params_b * 1e9);
        assert!((0.7..1.3).contains(&ratio), "{}: the [vision] shape holds {ratio:.2} of extra_params_b", m.id);
        assert!(m.modalities.iter().any(|x| x == "image"), "{}", m.id);
    }
    assert_eq!(towers, 16);
}
