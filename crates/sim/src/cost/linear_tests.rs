//! The linear-attention term: each decode's recurrent state read and written, the chunked
//! prefill's FLOPs, nothing that grows with the context.

use super::tests::{decode_batch, model, prefill, setup};

#[test]
fn linear_attention_reads_and_writes_each_decode_s_state_whatever_its_context() {
    let c = model("Qwen/Qwen3.5-35B-A3B", "h100-sxm", &[("tp", "2")]);
    let s = setup("Qwen/Qwen3.5-35B-A3B", "h100-sxm", &[("tp", "2")]);
    let state = s.model.linear.as_ref().unwrap().state_bytes(2);
    // 16 of 32 value heads a GPU, 128 x 128 FP32 values each, and 3 x 4096 BF16 convolution inputs.
    assert_eq!(state, 16.0 * 16_384.0 * 4.0 + 3.0 * 4096.0 * 2.0);
    let short = c.breakdown(&decode_batch(32, 100));
    let long = c.breakdown(&decode_batch(32, 10_000));
    // The 30 linear layers read and write every decode's state once, bound by the bytes.
    let bytes = 30.0 * 32.0 * 2.0 * state / c.bandwidth;
    assert!((short.recurrent / bytes - 1.0).abs() < 1e-9, "{} vs {bytes}", short.recurrent);
    assert_eq!(short.recurrent, long.recurrent);
    // Only the 10 attention layers read more KV as the context grows.
    let kv = c.kv_bytes_token_layer * 10.0 * 32.0 * 9_900.0 / c.bandwidth;
    assert!(((long.attention - short.attention) / kv - 1.0).abs() < 1e-6);
    assert!((c.breakdown(&decode_batch(64, 100)).recurrent / short.recurrent - 2.0).abs() < 1e-9);
    // A prefill runs the chunked recurrence: its FLOPs at the attention kernels' rate at least,
    // growing with the tokens.
    let p = c.breakdown(&prefill(4096));
    let flops = 30.0 * 4096.0 * s.model.linear.as_ref().unwrap().prefill_flops_per_token() / 2.0;
    assert!(p.recurrent >= flops / c.attn_rate * (1.0 - 1e-12));
    assert!(c.breakdown(&prefill(8192)).recurrent > p.recurrent);
    // A model without linear layers has no such term.
    assert_eq!(model("Qwen/Qwen3-8B", "h100-sxm", &[]).breakdown(&decode_batch(32, 100)).recurrent, 0.0);
}
