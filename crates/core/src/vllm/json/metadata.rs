//! The labels a result JSON carries besides vLLM's own keys: `vllm bench serve --metadata
//! KEY=VALUE` writes each pair as a top-level key, and sweeps add their parameters the same
//! way. Knowing every key vLLM defines (of any 0.x version) is what tells them apart.

use serde_json::Value;

use crate::vllm::json::scalar::label_text;

/// Top-level keys of vLLM's result JSON (every version read), and servebench's own key.
const VLLM_KEYS: &[&str] = &[
    "date",
    "endpoint_type",
    "backend",
    "label",
    "model_id",
    "tokenizer_id",
    "best_of",
    "use_beam_search",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "ramp_up_strategy",
    "ramp_up_start_rps",
    "ramp_up_end_rps",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "total_input_sequences",
    "request_throughput",
    "request_goodput",
    "request_goodput:",
    "input_throughput",
    "input_sequence_throughput",
    "output_throughput",
    "total_token_throughput",
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "start_times",
    "queue_times",
    "generated_texts",
    "errors",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "rtfx",
    "server_queue_times",
    "server_ttfts",
    "rps_change_events",
    "servebench",
];

/// Key prefixes of vLLM's per-metric and counter keys.
const VLLM_PREFIXES: &[&str] = &["mean_", "median_", "std_", "spec_decode_", "diffusion_", "probe_"];

/// Every top-level key of `value` that vLLM does not define and whose value is a string,
/// number or boolean, as `(key, value as text)` in file order. Empty when `value` is not an
/// object. `label` and `model_id` are vLLM's keys, so they are not in the list.
pub fn metadata_from_vllm_json(value: &Value) -> Vec<(String, String)> {
    let Some(m) = value.as_object() else { return Vec::new() };
    m.iter()
        .filter(|(key, _)| !is_vllm_key(key))
        .filter_map(|(key, value)| Some((key.clone(), label_text(value)?)))
        .collect()
}

/// Whether vLLM (or servebench) defines the top-level key `key`.
pub fn is_vllm_key(key: &str) -> bool {
    VLLM_KEYS.contains(&key) || is_percentile_key(key) || VLLM_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// `p99_ttft_ms`, `p99.9_itl_ms`: a percentile key.
fn is_percentile_key(key: &str) -> bool {
    key.strip_prefix('p')
        .and_then(|k| k.strip_suffix("_ms"))
        .and_then(|k| k.split_once('_'))
        .is_some_and(|(p, _)| p.parse::<f64>().is_ok())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_keys_vllm_does_not_define_are_metadata() {
        let doc = json!({
            "date": "20250601-120000", "label": "nightly", "model_id": "Qwen/Qwen3-8B", "gpu": "H100",
            "mean_ttft_ms": 1.0, "p99_ttft_ms": 2.0, "p99.9_itl_ms": 3.0, "tp": 2, "eager": false,
            "nested": {"a": 1}, "list": [1], "nothing": null, "pxyz_ms": 4.0, "servebench": {}
        });
        let got = metadata_from_vllm_json(&doc);
        // A whole number reads the same however it was written (`4.0` as `4`).
        let want = [("gpu", "H100"), ("tp", "2"), ("eager", "false"), ("pxyz_ms", "4")];
        assert_eq!(got, want.map(|(k, v)| (k.to_string(), v.to_string())));
        assert!(metadata_from_vllm_json(&json!([1])).is_empty());
        assert!(is_vllm_key("probe_requests") && is_vllm_key("request_goodput:") && !is_vllm_key("gpu"));
    }
}
