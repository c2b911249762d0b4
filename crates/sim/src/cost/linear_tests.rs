//! The linear-attention term: each decode's recurrent state read and written, the chunked
//! prefill's FLOPs and its chunks in order, nothing that grows with the context; and the layout of Nemotron-H's blocks
//! (one all-reduce a block, FFNs without a gate, the mixers NVIDIA's checkpoints keep in BF16).

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

#[test]
fn a_prompt_s_chunks_run_in_order_and_flash_linear_attention_s_rate_prices_the_rest() {
    // Qwen3.5-9B on one H100: 24 Gated DeltaNet layers of 32 value heads. One prompt of 8,192
    // tokens is 128 chunks one after another, 3.0 µs each with 32 heads (FlashInfer's kernel),
    // which its few FLOPs at the attention kernels' rate would take less than.
    let id = "Qwen/Qwen3.5-9B";
    let c = model(id, "h100-sxm", &[]);
    let s = setup(id, "h100-sxm", &[]);
    let one = c.breakdown(&prefill(8192)).recurrent;
    let in_order = 24.0 * 128.0 * 3.0e-6;
    assert!((one / in_order - 1.0).abs() < 1e-9, "{one} vs {in_order}");
    let flops = 24.0 * 8192.0 * s.model.linear.as_ref().unwrap().prefill_flops_per_token();
    assert!(flops / c.attn_rate < in_order);
    // Eight prompts of 1,024 are 16 chunks each, side by side: their FLOPs and bytes bind, not
    // their order.
    let mut eight = crate::cost::BatchStats::default();
    for _ in 0..8 {
        eight.add_sequence(0, 1024, 0, true, true);
    }
    let many = c.breakdown(&eight).recurrent;
    assert!(many >= flops / c.attn_rate && many > 2.0 * 24.0 * 16.0 * 3.0e-6, "{many}");
    // At TP2 each GPU holds 16 of the heads: each chunk takes half as long.
    let tp2 = model(id, "h100-sxm", &[("tp", "2")]).breakdown(&prefill(8192)).recurrent;
    assert!((tp2 / (in_order / 2.0) - 1.0).abs() < 1e-9, "{tp2}");
    // Where the stack runs flash-linear-attention's Triton kernels (datacenter Blackwell before
    // vLLM enabled FlashInfer's there), the FLOPs take their rate: 4 % of the B200's BF16 peak.
    let b200 = model(id, "b200", &[]);
    let triton = b200.breakdown(&prefill(8192)).recurrent;
    let at_rate = flops / (2250e12 * 0.04);
    assert!((triton / at_rate - 1.0).abs() < 1e-9, "{triton} vs {at_rate}");
    let fi = model(id, "b200", &[("linear-eff", "0.65")]).breakdown(&prefill(8192)).recurrent;
    assert!(fi < 0.8 * triton, "{fi} vs {triton}");
    // Mamba-2 layers keep the attention kernels' rate: the Triton figures are Gated DeltaNet's.
    let nano = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16";
    let m = |eff: &str| model(nano, "b200", &[("linear-eff", eff)]).breakdown(&prefill(1024)).recurrent;
    assert_eq!(m("0.04"), m("0.65"));
}

#[test]
fn nemotron_h_s_blocks_pay_one_all_reduce_each_and_read_their_mamba_state() {
    let id = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16";
    let c = model(id, "h100-sxm", &[("tp", "2")]);
    let s = setup(id, "h100-sxm", &[("tp", "2")]);
    let b = decode_batch(8, 500);
    let d = c.breakdown(&b);
    // 52 blocks, one all-reduce each: 29 mixers and 23 MoE FFNs (not 2 x 29), and the
    // embedding's.
    let one = c.tp_allreduce.seconds(c.rows(&b) as f64 * 2688.0 * 2.0);
    assert!((d.allreduce / (53.0 * one) - 1.0).abs() < 1e-9, "{} vs {}", d.allreduce, 53.0 * one);
    // The 23 Mamba-2 layers read and write each decode's FP32 state: 32 of 64 heads of 64 x 128
    // a GPU, and 3 x 3072 BF16 convolution inputs.
    let state = s.model.linear.as_ref().unwrap().state_bytes(2);
    assert_eq!(state, 32.0 * 8192.0 * 4.0 + 3.0 * 3072.0 * 2.0);
    let bytes = 23.0 * 8.0 * 2.0 * state / c.bandwidth;
    assert!((d.recurrent / bytes - 1.0).abs() < 1e-9, "{} vs {bytes}", d.recurrent);
    // Squared-ReLU experts have two matrices: 6 of 128 experts touched by one token read
    // 6 x 2 x 2688 x 1856 BF16 weights a layer.
    assert_eq!(s.model.expert_params(), 2.0 * 2688.0 * 1856.0);
}

#[test]
fn nvidia_s_selective_checkpoints_read_their_bf16_mixers_in_bf16() {
    let bf16 = setup("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "h100-sxm", &[]).model;
    let fp8 = setup("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", "h100-sxm", &[]).model;
    assert_eq!((fp8.bf16_mixers, fp8.precision), (12, crate::precision::Precision::Fp8));
    // The 6 attention layers and 6 of the 23 Mamba layers in BF16, the 17 others in FP8.
    let attention = 6.0 * fp8.attention_params();
    let mamba = fp8.linear.as_ref().unwrap().params(2688);
    let bytes = 2.0 * (attention + 6.0 * mamba) + 17.0 * mamba;
    assert!((fp8.mixer_params() * fp8.mixer_bytes_per_param() / bytes - 1.0).abs() < 1e-12);
    assert_eq!(bf16.mixer_bytes_per_param(), 2.0);
    // Without the kept mixers every mixer would be in FP8: fewer bytes for one decode.
    let all_fp8 = crate::model::ModelShape { bf16_mixers: 0, ..fp8.clone() };
    assert!(all_fp8.weight_bytes() < fp8.weight_bytes() && fp8.weight_bytes() < bf16.weight_bytes());
}
