//! A model's config.json with numbers no real model has (zero, one, odd, huge, negative, not a
//! whole number, not a number) is refused with the reason or predicted with finite times, never
//! a panic: the shape's checks, the memory plan and the cost model meet every value a typo in a
//! user's config can give.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::Value;
use servebench_core::config::RunConfig;

use super::tests::plan;
use super::*;
use crate::presets::Presets;

/// The keys every config's values are drawn for (where a config has no such key, it gains
/// one), then a real config (its file), its hardware and options, and its own keys.
#[rustfmt::skip]
const SHARED_KEYS: &[&str] = &[
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
    "vocab_size", "max_position_embeddings",
];

type Case = (&'static str, &'static str, &'static [(&'static str, &'static str)], &'static [&'static str]);

#[rustfmt::skip]
const CONFIGS: &[Case] = &[
    ("qwen3-8b.json", "h100-sxm", &[], &[]),
    ("gpt-oss-20b.json", "h100-sxm", &[], &["num_local_experts", "num_experts_per_tok", "sliding_window"]),
    (
        "deepseek-v3.json",
        "b200",
        &[("tp", "8")],
        &[
            "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "n_routed_experts",
            "num_experts_per_tok", "moe_intermediate_size", "first_k_dense_replace", "n_group", "topk_group",
        ],
    ),
];

/// A value for a key: mostly a small whole number a model could have, else zero or a huge one,
/// else one of another kind.
fn value() -> impl Strategy<Value = Value> {
    let whole = |v: Vec<u64>| proptest::sample::select(v).prop_map(Value::from);
    prop_oneof![
        6 => whole(vec![1, 2, 3, 4, 7, 8, 16, 64, 128, 1000, 4096]),
        2 => whole(vec![0, 65_536, 1 << 20, 1 << 31, (1 << 32) + 1, 1 << 40]),
        1 => proptest::sample::select(vec![Value::from(-1), Value::from(1.5), Value::from("x"), Value::Null]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn any_config_is_refused_with_a_reason_or_predicted(
        which in 0..CONFIGS.len(),
        picks in proptest::collection::vec((any::<proptest::sample::Index>(), value()), 1..4),
    ) {
        let (name, hardware, options, own) = CONFIGS[which];
        let keys: Vec<&str> = SHARED_KEYS.iter().chain(own).copied().collect();
        let path = format!("{}/testdata/hf-configs/{name}", env!("CARGO_MANIFEST_DIR"));
        let mut config: BTreeMap<String, Value> = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for (key, v) in &picks {
            config.insert(keys[key.index(keys.len())].to_string(), v.clone());
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.json");
        std::fs::write(&file, serde_json::to_string(&config).unwrap()).unwrap();
        let options: Vec<(String, String)> = options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let presets = Presets::embedded().unwrap();
        match SimSetup::resolve_with(&presets, file.to_str().unwrap(), hardware, &options, None) {
            Err(e) => prop_assert!(e.to_string().len() > 10, "{picks:?}: {e}"),
            Ok(setup) => {
                let mut run = RunConfig::for_target("http://sim", "m");
                run.ignore_eos = true;
                run.traffic.ready_check_timeout_s = 0.0;
                let result = predict(&plan(3, |_| 16, |_| 4, 0), &run, &setup);
                for r in result.records.iter().filter(|r| r.succeeded()) {
                    prop_assert!(r.ttft_s().is_finite() && r.ttft_s() >= 0.0, "{picks:?}: TTFT {}", r.ttft_s());
                    prop_assert!(r.latency_s().is_finite() && r.latency_s() >= r.ttft_s(), "{picks:?}: {}", r.latency_s());
                }
            }
        }
    }
}
