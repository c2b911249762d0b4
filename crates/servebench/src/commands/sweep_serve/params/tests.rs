use proptest::prelude::*;
use serde_json::json;

use super::*;

fn cmd(s: &str) -> Vec<String> {
    s.split(' ').map(str::to_string).collect()
}

fn item(v: Value) -> Item {
    from_value(json!([v])).unwrap().remove(0)
}

#[test]
fn parameters_replace_the_command_s_flags_or_are_appended_as_vllm_writes_them() {
    let base = cmd("vllm serve m --max-num-seqs 4 --enforce-eager --max_model_len 2048");
    let it = item(json!({"max_num_seqs": 8, "max_model_len": 4096, "enable_prefix_caching": false,
                          "enforce_eager": true, "compilation_config": {"level": 3, "x": [1, 2]},
                          "speculative_config.method": true}));
    assert_eq!(
        it.apply_to_cmd(&base),
        cmd("vllm serve m --max-num-seqs 8 --enforce-eager --max-model-len 4096 --no-enable-prefix-caching")
            .into_iter()
            .chain([
                "--compilation-config".to_string(),
                r#"{"level": 3, "x": [1, 2]}"#.to_string(),
                "--speculative-config.method=true".to_string()
            ])
            .collect::<Vec<_>>()
    );
    // Strings and floats as Python's str writes them.
    let it = item(json!({"request_rate": 2.5, "dataset_name": "sharegpt", "label": null}));
    assert_eq!(
        it.apply_to_cmd(&cmd("vllm bench serve --request-rate 1")),
        cmd("vllm bench serve --request-rate 2.5 --dataset-name sharegpt --label None")
    );
    assert!(Item::default().apply_to_cmd(&base) == base);
    // Python's float repr and json.dumps, not Rust's spellings.
    let it = item(json!({"temperature": 0.00001, "top_p": 1.0, "extra_body": {"name": "é"}}));
    assert_eq!(
        it.apply_to_cmd(&cmd("vllm bench serve")),
        cmd("vllm bench serve --temperature 1e-05 --top-p 1.0")
            .into_iter()
            .chain(["--extra-body".to_string(), r#"{"name": "\u00e9"}"#.to_string()])
            .collect::<Vec<_>>()
    );
}

#[test]
fn combinations_are_named_by_their_name_or_their_parameters() {
    let named = from_value(json!({"small": {"max_num_seqs": 8}, "big": {"max_num_seqs": 64, "x": true}})).unwrap();
    assert_eq!(named.iter().map(Item::name).collect::<Vec<_>>(), ["small", "big"]);
    assert_eq!(named[1].as_text(", "), "max_num_seqs=64, x=True");
    // The name is not a flag.
    assert_eq!(named[0].apply_to_cmd(&cmd("vllm serve m")), cmd("vllm serve m --max-num-seqs 8"));
    let listed = from_value(json!([{"max_concurrency": 4, "num_prompts": 40}, {}])).unwrap();
    assert_eq!(listed[0].name(), "max_concurrency=4-num_prompts=40");
    assert!(listed[1].is_empty() && listed[1].name().is_empty());
    assert_eq!(sanitize("a/b..c"), "a_b__c");
}

#[test]
fn bad_sweeps_and_link_vars_are_refused_with_what_to_write() {
    let e = from_value(json!([{"_benchmark_name": "a"}, {"_benchmark_name": "a"}])).unwrap_err().to_string();
    assert!(e.contains("\"a\" is given twice"), "{e}");
    assert!(from_value(json!([1])).unwrap_err().to_string().contains("must be an object"));
    assert!(from_value(json!("x")).unwrap_err().to_string().contains("list of objects"));
    assert!(from_value(json!({"a": 1})).unwrap_err().to_string().contains("\"a\" must be an object"));
    assert_eq!(
        parse_link_vars(" max_num_seqs = max_concurrency,a=b").unwrap(),
        [("max_num_seqs".to_string(), "max_concurrency".to_string()), ("a".into(), "b".into())]
    );
    assert!(parse_link_vars("").unwrap().is_empty());
    assert!(parse_link_vars("a").unwrap_err().to_string().contains("SERVE_KEY=BENCH_KEY"));
}

#[test]
fn linked_combinations_agree_on_every_pair() {
    let links = parse_link_vars("max_num_seqs=max_concurrency").unwrap();
    let serve = item(json!({"max_num_seqs": 8}));
    assert!(linked(&serve, &item(json!({"max_concurrency": 8})), &links));
    assert!(!linked(&serve, &item(json!({"max_concurrency": 4})), &links));
    assert!(!linked(&serve, &item(json!({})), &links), "a missing key never links");
    assert!(linked(&serve, &item(json!({})), &[]));
}

proptest! {
    /// Applying a combination twice is applying it once: every flag it sets is found again
    /// and replaced, never appended a second time.
    #[test]
    fn applying_twice_is_applying_once(
        keys in proptest::collection::btree_map("[a-z]{1,3}(_[a-z]{1,3})?", 0u32..100, 0..5),
        flag in any::<bool>(),
    ) {
        let mut m: Map<String, Value> = keys.into_iter().map(|(k, v)| (k, json!(v))).collect();
        m.insert("some_flag".into(), json!(flag));
        let it = Item(m);
        let once = it.apply_to_cmd(&cmd("prog run"));
        let twice = it.apply_to_cmd(&once);
        if flag {
            prop_assert_eq!(&twice, &once);
        } else {
            // `--no-x` is not found as `--x` (as in vLLM): only that flag repeats.
            prop_assert_eq!(twice.len(), once.len() + 1);
        }
    }
}
