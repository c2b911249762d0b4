//! The attention kernels' streams: the softmax's exponentials on the SFUs against the query-key
//! FLOPs on the tensor cores, how much of the shorter the kernels leave exposed, and the kernels
//! that run at rates of their own (attention sinks' fallback, sparse attention's).

use proptest::prelude::*;

use super::tests::{any_model, decode_batch, model, prefill};

/// Softmax's exponentials bind attention where the tensor cores outrun the SFUs: on Blackwell
/// (tensor rate an SM twice Hopper's, SFUs the same 16 a clock) below a head width of 128, and
/// not on Hopper from 64 (level there; its kernel adds most of them to the tensor cores' time
/// instead, `attn_exp_exposed`).
#[test]
fn softmax_exponentials_bind_blackwell_attention_below_a_head_width_of_128() {
    let pairs = prefill(8192).pairs_prefill_full;
    for (m, hw, binds) in [
        ("openai/gpt-oss-120b", "b200", true),
        ("openai/gpt-oss-120b", "gb200", true),
        ("openai/gpt-oss-120b", "h100-sxm", false),
        ("openai/gpt-oss-120b", "b300", false),
        ("Qwen/Qwen3-8B", "b200", false),
    ] {
        let c = model(m, hw, &[]);
        let exp_s = c.attn_exps_per_pair * c.full_layers * pairs / c.exp_rate;
        let tensor_s = c.attn_flops_prefill * c.full_layers * pairs / c.attn_rate;
        // On Hopper at 64-wide heads the two are level (both a 256th of the tensor rate).
        assert_eq!(exp_s > tensor_s * 1.01, binds, "{m} on {hw}: {exp_s} s of exponentials, {tensor_s} s of FLOPs");
    }
    // gpt-oss on a B200: the exponentials take twice the FLOPs' time (64-wide heads).
    let c = model("openai/gpt-oss-120b", "b200", &[]);
    let ratio = c.exp_rate.recip() * c.attn_exps_per_pair / (c.attn_flops_prefill / c.attn_rate);
    assert!((ratio - 2.0).abs() < 0.05, "{ratio}");
    // Without an SFU rate in the preset nothing changes.
    let spark = model("openai/gpt-oss-120b", "dgx-spark", &[]);
    assert!(spark.exp_rate.is_infinite());
}

proptest! {
    /// The two compute streams overlap whole at no exposure (the longest of the three binds) and
    /// add at full exposure; more exposure never takes less time.
    #[test]
    fn attention_exposes_none_to_all_of_its_shorter_compute_stream(
        tensor in 0.0..1.0f64, exps in 0.0..1.0f64, bytes in 0.0..1.0f64, exposed in 0.0..=1.0f64, more in 0.0..=1.0f64,
    ) {
        use super::terms::attention_seconds;
        let s = attention_seconds(tensor, exps, bytes, exposed);
        prop_assert!(s >= tensor.max(exps).max(bytes));
        prop_assert!(s <= (tensor + exps).max(bytes) * (1.0 + 1e-12));
        prop_assert_eq!(attention_seconds(tensor, exps, bytes, 0.0), tensor.max(exps).max(bytes));
        prop_assert_eq!(attention_seconds(tensor, exps, 0.0, 1.0), tensor + exps);
        prop_assert!(attention_seconds(tensor, exps, bytes, exposed.max(more)) >= s);
    }

    #[test]
    fn attention_never_beats_its_exponentials_over_the_sfus(c in any_model(), chunk in 1u32..8192, seqs in 1u32..128, ctx in 1u32..20_000) {
        for b in [prefill(chunk), decode_batch(seqs, ctx)] {
            let d = c.breakdown(&b);
            // Sparse attention attends the batch's windowed pairs in every layer.
            let full = if c.indexer.is_some() {
                b.pairs_prefill_window + b.pairs_decode_window
            } else {
                b.pairs_prefill_full + b.pairs_decode_full
            };
            let pairs = c.full_layers * full + c.sliding_layers * (b.pairs_prefill_window + b.pairs_decode_window);
            prop_assert!(d.attention >= c.attn_exps_per_pair * pairs / c.exp_rate * (1.0 - 1e-12), "{d:?}");
        }
    }
}

#[test]
fn attention_sinks_run_at_the_triton_kernels_rate_where_the_fast_kernels_lack_them() {
    let st = |hw: &str| crate::presets::Presets::embedded().unwrap().hardware(hw).unwrap().stack.clone();
    let rate = |m: &str, hw: &str| model(m, hw, &[]).attn_rate;
    // gpt-oss has sinks: on the A100 vLLM serves them with its Triton kernels.
    let sinks = st("a100-80g").attn_eff_sinks.unwrap();
    assert!((rate("openai/gpt-oss-20b", "a100-80g") - 312e12 * sinks).abs() < 1.0);
    // A model without sinks keeps FlashAttention's rate there, and the H100's kernels have sinks.
    assert!((rate("Qwen/Qwen3-8B", "a100-80g") - 312e12 * st("a100-80g").attn_eff).abs() < 1.0);
    assert!(st("h100-sxm").attn_eff_sinks.is_none());
    assert!((rate("openai/gpt-oss-20b", "h100-sxm") - 989e12 * st("h100-sxm").attn_eff).abs() < 1.0);
    // A long prompt's prefill takes longer for it.
    let long = prefill(8192);
    let a100 = model("openai/gpt-oss-20b", "a100-80g", &[]).breakdown(&long).attention;
    let without = model("openai/gpt-oss-20b", "a100-80g", &[("attn-eff-sinks", "0.65")]).breakdown(&long).attention;
    assert!(a100 > 3.0 * without, "{a100} {without}");
}

/// Sparse attention's kernels (FlashMLA's sparse kernels, the indexer) keep the rate attention
/// had before Hopper's was read from FlashAttention 3, and hide their exponentials; a dense MLA
/// model on the same GPU takes FA3's constants.
#[test]
fn sparse_attention_keeps_its_own_rate_where_flash_attention_s_is_read_from_fa3() {
    let tp = [("tp", "8")];
    let sparse = model("deepseek-ai/DeepSeek-V3.2", "h200", &tp);
    assert!((sparse.attn_rate - 989e12 * 0.65).abs() < 1.0, "{}", sparse.attn_rate);
    assert_eq!(sparse.attn_exp_exposed, 0.0);
    let indexer = sparse.indexer.expect("V3.2 has an indexer");
    assert!((indexer.rate - 1979e12 * 0.65).abs() < 1.0, "{}", indexer.rate);
    let dense = model("deepseek-ai/DeepSeek-R1", "h200", &tp);
    assert!((dense.attn_rate - 989e12 * 0.87).abs() < 1.0, "{}", dense.attn_rate);
    assert_eq!(dense.attn_exp_exposed, 0.73);
    // Elsewhere the field is unset and both take the stack's `attn_eff`.
    let b200 = model("deepseek-ai/DeepSeek-V3.2", "b200", &tp);
    assert_eq!(b200.attn_rate, model("deepseek-ai/DeepSeek-R1", "b200", &tp).attn_rate);
}
