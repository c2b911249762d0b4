//! Tests of the stack profile: options, files, the dequantizing cap.

use super::*;

#[test]
fn options_set_fields_and_per_format_tables() {
    let mut p = StackProfile::default();
    assert!(p.set_option("t0-ms", "3.5").unwrap());
    assert!(p.set_option("gemm-eff.fp8", "0.7").unwrap());
    assert!(p.set_option("moe-eff", "0.2").unwrap());
    assert!(p.set_option("jitter", "0").unwrap());
    assert!(p.set_option("alpha-ar-us", "120").unwrap());
    assert!(p.set_option("fused-moe-us", "0").unwrap());
    assert_eq!(p.fused_moe_us, 0.0);
    assert_eq!(p.t0_ms, 3.5);
    assert_eq!(p.gemm_eff.fp8, 0.7);
    assert_eq!(p.gemm_eff.bf16, StackProfile::default().gemm_eff.bf16);
    assert_eq!(p.moe_eff, PrecisionTable::splat(0.2));
    // `--option` keys arrive with `_` turned to `-`: both spellings name the format.
    assert!(p.set_option("moe-eff.weight-only", "0.25").unwrap());
    assert_eq!(p.moe_eff.weight_only, 0.25);
    assert!(p.set_option("moe-eff.weight_only", "0.3").unwrap());
    assert_eq!(p.moe_eff.weight_only, 0.3);
    assert!(p.set_option("moe-eff.int3", "0.3").unwrap_err().contains("weight_only"));
    assert_eq!(p.jitter_sigma, 0.0);
    assert_eq!(p.alpha_ar_us, Some(120.0));
    assert!(!p.set_option("max-num-seqs", "4").unwrap());
    assert!(p.set_option("eta-bw", "-1").unwrap_err().contains("eta_bw"));
    assert!(p.set_option("t0-ms", "fast").is_err());
    for not_a_number in ["nan", "inf", "-inf"] {
        assert_eq!(
            p.set_option("t0-ms", not_a_number).unwrap_err(),
            format!("expected a number, got {not_a_number:?}")
        );
    }
    assert!(p.set_option("t0-ms.fp8", "1").is_err());
    // Attention's exposed exponentials are a share; the sparse kernels' rate an efficiency.
    assert!(p.set_option("attn-exp-exposed", "0.5").unwrap());
    assert_eq!(p.attn_exp_exposed, 0.5);
    let err = p.set_option("attn-exp-exposed", "1.5").unwrap_err();
    assert!(err.contains("attn_exp_exposed") && err.contains("[0, 1]"), "{err}");
    assert!(p.set_option("attn-eff-sparse", "0.4").unwrap());
    assert_eq!(p.attn_eff_sparse, Some(0.4));
    assert!(p.set_option("attn-eff-sparse", "0").unwrap_err().contains("attn_eff_sparse"));
    // A network's rate for its collectives, GB/s: a rate, so above 0.
    assert!(p.set_option("ar-gbs", "22").unwrap());
    assert_eq!(p.ar_gbs, Some(22.0));
    assert!(p.set_option("ar-gbs", "0").unwrap_err().contains("ar_gbs must be a rate above 0"));
    assert_eq!(p.ar_gbs, Some(22.0), "a refused value leaves the profile as it was");
}

#[test]
fn toml_output_reads_back_to_the_same_profile() {
    let p = StackProfile {
        name: Some("toy/vllm".into()),
        alpha_ar_us: Some(42.0),
        t_seq_us: 123.25,
        ..StackProfile::default()
    };
    let dir = std::env::temp_dir().join(format!("sb-sim-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("fit.toml");
    std::fs::write(&path, p.to_toml()).unwrap();
    let mut back = StackProfile::default();
    back.apply_file(&path).unwrap();
    assert_eq!(back, p);
    let json = dir.join("fit.json");
    std::fs::write(&json, r#"{"eta_bw": 0.9, "moe_eff": {"fp4": 0.1}}"#).unwrap();
    let mut partial = StackProfile::default();
    partial.apply_file(&json).unwrap();
    assert_eq!(partial.eta_bw, 0.9);
    assert_eq!(partial.moe_eff.fp4, 0.1);
    std::fs::write(&json, r#"{"eta_bandwidth": 0.9}"#).unwrap();
    let err = StackProfile::default().apply_file(&json).unwrap_err().to_string();
    assert!(err.contains("eta_bandwidth") && err.contains("fit.json"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_dequant_cap_is_on_by_default_and_false_turns_it_off() {
    let mut p = StackProfile::default();
    assert_eq!(p.dequant_ops_per_weight, Some(DEQUANT_OPS_PER_WEIGHT));
    p.apply_patch(&serde_json::json!({"dequant_ops_per_weight": false})).unwrap();
    assert_eq!(p.dequant_ops_per_weight, None);
    p.apply_patch(&serde_json::json!({"dequant_ops_per_weight": 6.0})).unwrap();
    assert_eq!(p.dequant_ops_per_weight, Some(6.0));
    let err = p.apply_patch(&serde_json::json!({"dequant_ops_per_weight": true})).unwrap_err();
    assert!(err.contains("false for no cap"), "{err}");
    let err = p.apply_patch(&serde_json::json!({"dequant_ops_per_weight": 0.0})).unwrap_err();
    assert!(err.contains("dequant_ops_per_weight"), "{err}");
    // ROCm has no Marlin: the AMD presets turn the cap off.
    let presets = crate::presets::Presets::embedded().unwrap();
    for hw in ["mi300x", "mi325x", "mi355x"] {
        assert_eq!(presets.hardware(hw).unwrap().stack.dequant_ops_per_weight, None, "{hw}");
    }
    assert_eq!(presets.hardware("h200").unwrap().stack.dequant_ops_per_weight, Some(DEQUANT_OPS_PER_WEIGHT));
}

#[test]
fn the_dequantizing_kernels_tensor_share_is_an_option_and_a_fit_parameter() {
    let mut p = StackProfile::default();
    assert_eq!(p.dequant_mma, DEQUANT_MMA);
    assert!(p.set_option("dequant-mma", "0.3").unwrap());
    assert_eq!(p.dequant_mma, 0.3);
    assert!(p.set_option("dequant-mma", "2").unwrap_err().contains("dequant_mma"));
    // A profile written before the constant existed reads with the default.
    let mut written = serde_json::to_value(&p).unwrap();
    written.as_object_mut().unwrap().remove("dequant_mma").unwrap();
    let old: StackProfile = serde_json::from_value(written.clone()).unwrap();
    assert_eq!(old.dequant_mma, DEQUANT_MMA);
    let param = FitParam::parse("dequant-mma").unwrap();
    assert_eq!(param, FitParam::DequantMma);
    param.set(&mut p, 0.4);
    assert_eq!((param.get(&p), param.name()), (0.4, "dequant-mma".to_string()));
}

#[test]
fn the_tensor_share_s_name_from_when_it_priced_experts_only_is_still_read() {
    // As an option, a fit parameter, a saved profile (a run's config) and a profile file's patch.
    let mut p = StackProfile::default();
    assert!(p.set_option("dequant-mma-moe", "0.3").unwrap());
    assert_eq!(p.dequant_mma, 0.3);
    assert_eq!(FitParam::parse("dequant_mma_moe"), Some(FitParam::DequantMma));
    let mut written = serde_json::to_value(StackProfile::default()).unwrap();
    let map = written.as_object_mut().unwrap();
    map.remove("dequant_mma").unwrap();
    map.insert("dequant_mma_moe".into(), serde_json::json!(0.35));
    assert_eq!(serde_json::from_value::<StackProfile>(written).unwrap().dequant_mma, 0.35);
    let mut q = StackProfile::default();
    q.apply_patch(&serde_json::json!({ "dequant_mma_moe": 0.25 })).unwrap();
    assert_eq!(q.dequant_mma, 0.25);
    // Given under both names, the current one wins.
    q.apply_patch(&serde_json::json!({ "dequant_mma_moe": 0.2, "dequant_mma": 0.45 })).unwrap();
    assert_eq!(q.dequant_mma, 0.45);
}

#[test]
fn attention_kernels_are_chosen_sparse_first_then_sinks_then_the_stack_s() {
    let p = StackProfile {
        attn_eff: 0.87,
        attn_exp_exposed: 0.73,
        attn_eff_sinks: Some(0.15),
        attn_eff_sparse: Some(0.65),
        ..StackProfile::default()
    };
    let rate = |sinks, sparse| {
        let r = p.attention_rate(sinks, sparse);
        (r.kernels, r.eff, r.exposed)
    };
    assert_eq!(rate(false, false), (AttentionKernels::Standard, 0.87, 0.73));
    assert_eq!(rate(true, false), (AttentionKernels::SinksOnTriton, 0.15, 0.73));
    assert_eq!(rate(false, true), (AttentionKernels::Sparse, 0.65, 0.0));
    assert_eq!(rate(true, true), (AttentionKernels::Sparse, 0.65, 0.0));
    // A stack without their own rates runs both on its kernels.
    let plain = StackProfile { attn_eff: 0.87, attn_exp_exposed: 0.73, ..StackProfile::default() };
    let r = plain.attention_rate(true, true);
    assert_eq!((r.kernels, r.eff, r.exposed), (AttentionKernels::Standard, 0.87, 0.73));
}

#[test]
fn constants_past_any_serving_stack_are_refused_with_their_bound() {
    let mut p = StackProfile::default();
    // A step's fixed cost of a minute is the most taken; more would also wrap the engine's clock.
    assert!(p.set_option("t0-ms", "60000").unwrap());
    let err = p.set_option("t0-ms", "1e15").unwrap_err();
    assert!(err.contains("t0_ms must be at most 60000 ms"), "{err}");
    assert_eq!(p.t0_ms, 60000.0, "a refused value leaves the profile as it was");
    let err = p.set_option("t-seq-us", "1e300").unwrap_err();
    assert!(err.contains("t_seq_us must be at most 60000000 µs"), "{err}");
    let err = p.set_option("gemm-m-half", "1e300").unwrap_err();
    assert!(err.contains("gemm_m_half must be positive and at most 1000000"), "{err}");
    let err = p.set_option("tokenizer-parallel", "1e9").unwrap_err();
    assert!(err.contains("tokenizer_parallel must be from 1 to 1000000"), "{err}");
    let err = p.set_option("activation-reserve-gib", "1e7").unwrap_err();
    assert!(err.contains("activation_reserve_gib must be at most"), "{err}");
}
