//! Tests of the memory plan: weights by layout, the activation reserve, the KV pool.

use super::*;
use crate::setup::tests::setup;

#[test]
fn kv_capacity_of_qwen3_8b_on_one_h100() {
    let s = setup("Qwen/Qwen3-8B", "h100-sxm", &[("gpu-memory-utilization", "0.9")]).unwrap();
    // By hand: 79.2 GiB x 0.9 = 71.28 GiB; weights 8.19e9 params x 2 B = 15.26 GiB; 5.5 GiB
    // reserve; 50.52 GiB left. One token: 36 layers x 2 (K,V) x 8 heads x 128 x 2 B = 144 KiB,
    // a 16-token block 2.25 MiB, so 50.52 GiB / 2.25 MiB = 22 992 blocks = 367 872 tokens.
    let m = &s.memory;
    assert!((m.weights_gib - 15.26).abs() < 0.02, "{}", m.weights_gib);
    assert!((m.kv_gib - 50.52).abs() < 0.02, "{}", m.kv_gib);
    assert_eq!(m.kv_bytes_per_token, 147_456.0);
    assert!((m.layout.total_units as i64 - 22_992).abs() <= 10, "{}", m.layout.total_units);
    assert_eq!(m.kv_tokens, m.layout.total_units * 16);
    assert_eq!(s.max_model_len, 40960);
    // FP8 KV doubles the blocks; tp=2 halves the weights per GPU and the KV heads.
    let fp8 = setup("Qwen/Qwen3-8B", "h100-sxm", &[("kv-cache-dtype", "fp8")]).unwrap();
    assert_eq!(fp8.memory.layout.total_units / 2, m.layout.total_units);
    let tp2 = setup("Qwen/Qwen3-8B", "h100-sxm", &[("tp", "2")]).unwrap();
    assert!((tp2.memory.weights_gib - m.weights_gib / 2.0).abs() < 1e-9);
    assert!(tp2.memory.layout.total_units > 2 * m.layout.total_units);
    // CUDA graph memory a vLLM from 0.21 on sets aside comes off the KV cache, GiB for GiB, and
    // a negative or unreadable amount is refused.
    let graphs = setup("Qwen/Qwen3-8B", "h100-sxm", &[("cudagraph-memory-gib", "0.78")]).unwrap();
    assert_eq!(graphs.memory.graph_gib, 0.78);
    assert!((m.kv_gib - graphs.memory.kv_gib - 0.78).abs() < 1e-9);
    assert_eq!(m.graph_gib, 0.0);
    for bad in ["-1", "lots", "NaN"] {
        let err = setup("Qwen/Qwen3-8B", "h100-sxm", &[("cudagraph-memory-gib", bad)]).unwrap_err().to_string();
        assert!(err.contains("cudagraph-memory-gib") && err.contains("expected GiB"), "{err}");
    }
}

#[test]
fn linear_attention_state_takes_pages_as_large_as_an_attention_block() {
    let s = setup("Qwen/Qwen3-Next-80B-A3B-Instruct", "h100-sxm", &[("tp", "4")]).unwrap();
    let l = s.memory.layout;
    // One layer's state a GPU: (8 value heads x 128 x 128 + 3 x 2048 convolution inputs) x 2 B
    // = 274,432 B; one token's KV a layer a GPU: 1 KV head (2 over 4 ranks, at least one) x
    // 256 x 2 x 2 B = 1 KiB; 268 tokens, rounded up to 272.
    assert_eq!(l.block_size, 272);
    // Units of the 12 attention layers' pages; the 36 linear layers' states fill 3 of them.
    assert_eq!((l.units_per_block, l.state_units), (1, 3));
    assert_eq!(l.units_for_blocks(0), 0);
    assert_eq!(l.units_for_blocks(4), 4 + 3);
    assert_eq!(l.max_tokens_single(), (l.total_units - 3) * 272);
    assert_eq!(s.memory.kv_bytes_per_token, 12.0 * 1024.0);
    assert_eq!(s.memory.state_bytes_per_request, 36.0 * 274_432.0);
    // Without linear layers nothing changes: 16-token blocks, no state.
    let dense = setup("Qwen/Qwen3-8B", "h100-sxm", &[]).unwrap().memory.layout;
    assert_eq!((dense.block_size, dense.state_units), (16, 0));
    assert_eq!(hybrid_block_size(16, 0.0, 1024.0), 16);
    // A block asked larger than the state needs stays as asked.
    assert_eq!(hybrid_block_size(1024, 274_432.0, 1024.0), 1024);
}

#[test]
fn sliding_layers_hold_only_their_window() {
    let s = setup("google/gemma-3-1b-it", "rtx-4090", &[]).unwrap();
    let l = s.memory.layout;
    // 4 global and 22 local layers: units of 2 layers, 2 + 11 per block; 512/16 + 1 = 33 blocks.
    assert_eq!((l.units_per_block, l.sliding_units_per_block, l.sliding_cap_blocks), (2, 11, 33));
    assert_eq!(l.units_for_blocks(10), 130);
    assert_eq!(l.units_for_blocks(100), 2 * 100 + 11 * 33);
    let long = l.max_tokens_single() / 16;
    assert!(l.units_for_blocks(long) <= l.total_units);
    assert!(l.units_for_blocks(long + 1) > l.total_units);
}

#[test]
fn deepseek_r1_on_eight_h200s_keeps_the_latent_cache_whole_on_each_gpu() {
    let s = setup("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "8")]).unwrap();
    // By hand, FP8 bytes: attention 61 x ((187 105 280 - 15 138 816) / 8 + 15 138 816), the
    // down-projections whole on every rank; dense FFNs, shared experts and routers
    // (3 x 396 361 728 + 58 x 45 875 200) / 8; routed experts 58 x 32 x 44 040 192;
    // embedding and lm_head 2 x 129 280 x 7168 x 2 B / 8: 84 917 878 784 B = 79.09 GiB.
    let m = &s.memory;
    assert!((m.weights_gib - 79.085).abs() < 0.01, "{}", m.weights_gib);
    // 576 BF16 values per layer and token, not divided by tp.
    assert_eq!(m.kv_bytes_per_token, 70_272.0);
    assert_eq!(s.options.nodes, 1);
}

#[test]
fn an_mtp_layer_takes_its_weights_and_its_cache_from_the_kv_pool() {
    let mtp = [
        ("tp", "8"),
        ("speculative-config", r#"{"method": "deepseek_mtp", "num_speculative_tokens": 1}"#),
        ("spec-acceptance", "0.8"),
    ];
    let plain = setup("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "8")]).unwrap().memory;
    let with = setup("deepseek-ai/DeepSeek-R1", "h200", &mtp).unwrap().memory;
    // By hand, one MoE layer at the checkpoint's FP8 bytes as in the test above: attention
    // (187 105 280 - 15 138 816) / 8 + 15 138 816, shared experts and router 45 875 200 / 8,
    // 32 routed experts of 44 040 192, and the BF16 projection of 2 x 7168 to 7168 on every
    // rank (205 520 896 B): 1 657 176 064 B; the embedding and LM head are the target's.
    let added = (with.weights_gib - plain.weights_gib) * GIB;
    assert!((added - 1_657_176_064.0).abs() < 1.0, "{added}");
    // One more layer's latent a token: 62 layers' keys in the pool where there were 61.
    assert_eq!(with.kv_bytes_per_token - plain.kv_bytes_per_token, 1152.0);
    let share = with.layout.total_units as f64 / plain.layout.total_units as f64;
    let expected = with.kv_gib / plain.kv_gib * 61.0 / 62.0;
    assert!((share - expected).abs() < 1e-4, "{share} {expected}");
    // ngram drafts on the host: nothing leaves the pool.
    let ngram = [
        ("tp", "8"),
        ("speculative-config", r#"{"method": "ngram", "num_speculative_tokens": 3}"#),
        ("spec-acceptance", "0.5"),
    ];
    assert_eq!(setup("deepseek-ai/DeepSeek-R1", "h200", &ngram).unwrap().memory, plain);
}

#[test]
fn a_draft_model_keeps_its_own_embedding_and_an_eagle_head_reads_the_target_s() {
    let with = |method: &str, draft: &str| {
        let config = format!(r#"{{"method": "{method}", "model": "{draft}", "num_speculative_tokens": 2}}"#);
        let pairs = [("tp", "2"), ("speculative-config", config.as_str()), ("spec-acceptance", "0.7")];
        setup("Qwen/Qwen3-32B", "h100-sxm", &pairs).unwrap().memory
    };
    let plain = setup("Qwen/Qwen3-32B", "h100-sxm", &[("tp", "2")]).unwrap().memory;
    // Qwen3-8B drafting at tp=2: its own weights, halved; as an EAGLE head (untied), less
    // its embedding's half (151 936 x 4096 x 2 B / 2).
    let draft = with("draft_model", "Qwen/Qwen3-8B");
    let eight = setup("Qwen/Qwen3-8B", "h100-sxm", &[("tp", "2")]).unwrap().memory;
    assert!((draft.weights_gib - plain.weights_gib - eight.weights_gib).abs() < 1e-9);
    let eagle = with("eagle3", "Qwen/Qwen3-8B");
    let embedding = 151_936.0 * 4096.0 * 2.0 / 2.0 / GIB;
    assert!((draft.weights_gib - eagle.weights_gib - embedding).abs() < 1e-9);
    // Its 36 layers' keys and values join the target's 64 in every block: the pool holds
    // 64 / (64 + 36) of the bytes' tokens (8 KV heads a model, 4 a rank, both 128 wide).
    assert_eq!(draft.kv_bytes_per_token, plain.kv_bytes_per_token + eight.kv_bytes_per_token);
    let tokens = |m: &MemoryPlan| m.kv_gib * GIB / m.kv_bytes_per_token;
    let held = draft.layout.total_units as f64 * 16.0;
    assert!((held / tokens(&draft) - 1.0).abs() < 1e-3, "{held} {}", tokens(&draft));
    let ratio = draft.kv_tokens as f64 / plain.kv_tokens as f64;
    let expected = draft.kv_gib / plain.kv_gib * 64.0 / 100.0;
    assert!((ratio - expected).abs() < 1e-3, "{ratio} {expected}");
}

#[test]
fn expert_parallel_spreads_whole_experts_and_dp_replicates_the_rest() {
    let r1 = |pairs: &[(&str, &str)]| setup("deepseek-ai/DeepSeek-R1", "h200", pairs).unwrap().memory.weights_gib;
    // tp=8 slices every expert 8 ways, ep over tp=8 gives each GPU 32 whole experts: same bytes.
    assert!((r1(&[("tp", "8")]) - r1(&[("tp", "8"), ("ep", "true")])).abs() < 1e-9);
    // dp=8 with ep: each GPU holds all of attention, the dense layers and the embeddings but only
    // 32 experts, 93.8 GiB.
    let dp_ep = r1(&[("dp", "8"), ("ep", "true")]);
    assert!((dp_ep - 93.79).abs() < 0.02, "{dp_ep}");
    // tp=8 x dp=2: a MoE layer spans all 16 GPUs with ep (16 whole experts each) or without
    // (every expert sliced 16 ways, as vLLM flattens tp across dp): the same bytes, and half
    // the experts' bytes of tp=8 alone (58 x 16 x 44 040 192 B fewer).
    let (dp2, dp2_ep) = (r1(&[("tp", "8"), ("dp", "2")]), r1(&[("tp", "8"), ("dp", "2"), ("ep", "true")]));
    assert!((dp2 - dp2_ep).abs() < 1e-9, "{dp2} {dp2_ep}");
    let saved = r1(&[("tp", "8")]) - dp2;
    assert!((saved - 58.0 * 16.0 * 44_040_192.0 / GIB).abs() < 1e-6, "{saved}");
}

#[test]
fn mxfp4_experts_take_the_memory_of_the_kernels_vllm_runs_on_the_device() {
    // gpt-oss-120b on one GPU: the checkpoint's 60.7 GiB; vLLM logs 64.38 GiB with Triton's
    // kernels (Hopper's images) and 65.97 with Marlin's (every part before Hopper).
    let gib = |hw: &str, opts: &[(&str, &str)]| setup("openai/gpt-oss-120b", hw, opts).unwrap().memory.weights_gib;
    let (h100, a100) = (gib("h100-sxm", &[]), gib("a100-80g", &[]));
    assert!((h100 - 64.38).abs() < 0.5, "{h100}");
    assert!((a100 - 65.97).abs() < 0.3, "{a100}");
    // Kernels asked for bring their own layout (Marlin asked for on Hopper too); the pricing
    // default keeps the device's.
    assert_eq!(gib("a100-80g", &[("mxfp4-backend", "triton")]), h100);
    assert_eq!(gib("h100-sxm", &[("mxfp4-backend", "marlin")]), a100);
    // Experts kept in BF16 hold what the checkpoint holds; native FP4 units take no layout.
    let qwen = |hw: &str| setup("Qwen/Qwen3-30B-A3B", hw, &[]).unwrap().memory.weights_gib;
    assert_eq!(qwen("h100-sxm"), qwen("a100-80g"));
    assert!(gib("b200", &[]) < h100 - 3.0);
}

#[test]
fn precision_override_shrinks_the_weights() {
    let bf16 = setup("Qwen/Qwen3-8B", "h100-sxm", &[]).unwrap();
    let fp8 = setup("Qwen/Qwen3-8B", "h100-sxm", &[("precision", "fp8")]).unwrap();
    assert!(fp8.memory.weights_gib < 0.6 * bf16.memory.weights_gib);
}

#[test]
fn the_reserve_leaves_out_the_sampler_rows_fewer_sequences_do_not_profile() {
    // gpt-oss on the H100 runs vLLM's default 1,024 sequences: the reserve as stated.
    let stated = StackProfile::default().activation_reserve_moe_gib;
    let h100 = setup("openai/gpt-oss-120b", "h100-sxm", &[]).unwrap();
    assert_eq!(h100.memory.reserve.gib, stated);
    // The A100's default is 256: 768 rows of 201,088 logits at 20 bytes fewer.
    let a100 = setup("openai/gpt-oss-120b", "a100-80g", &[]).unwrap();
    let sampler = 768.0 * 201_088.0 * 20.0 / GIB;
    assert!((a100.memory.reserve.gib - (stated - sampler)).abs() < 1e-9, "{}", a100.memory.reserve.gib);
    assert!(a100.memory.kv_tokens > h100.memory.kv_tokens);
    // Asked for on the H100, the same.
    let asked = setup("openai/gpt-oss-120b", "h100-sxm", &[("max-num-seqs", "256")]).unwrap();
    assert_eq!(asked.memory.reserve.gib, a100.memory.reserve.gib);
    // The reserves are stated for the vocabularies they were fixed on, gpt-oss's for a mixture
    // of experts and Qwen3's (151,936) for a dense model: Gemma 3's 262,144 logits a row take
    // 2.1 GiB more at 1,024 sequences, DeepSeek-R1's 129,280 1.4 GiB less than gpt-oss's.
    let dense = StackProfile::default().activation_reserve_gib;
    let gemma = setup("google/gemma-3-1b-it", "h100-sxm", &[]).unwrap();
    let more = 1024.0 * (262_144.0 - 151_936.0) * 20.0 / GIB;
    assert!((gemma.memory.reserve.gib - dense - more).abs() < 1e-9 && more > 2.1, "{}", gemma.memory.reserve.gib);
    let r1 = setup("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "8")]).unwrap();
    let less = 1024.0 * (201_088.0 - 129_280.0) * 20.0 / GIB;
    assert!((stated - r1.memory.reserve.gib - less).abs() < 1e-9 && less > 1.3, "{}", r1.memory.reserve.gib);
    // Never below a quarter of the reserve: a stated 3 GiB is 2.9 of Qwen3's rows.
    let one = setup("Qwen/Qwen3-8B", "l4", &[("max-num-seqs", "1"), ("activation-reserve-gib", "3")]).unwrap();
    assert_eq!(one.memory.reserve.gib, 3.0 / 4.0);
}

#[test]
fn the_reserve_keeps_the_larger_of_the_profiled_forward_and_the_sampler_rows() {
    // Qwen3-8B on one GPU: a token of the forward holds 2 x 4,096 of residual and normed
    // state and, its largest transient, the FFN's 2 x 12,288 gate-up outputs and 12,288
    // activated, in BF16: 90,112 bytes.
    let qwen = setup("Qwen/Qwen3-8B", "l4", &[("max-num-seqs", "1")]).unwrap();
    assert_eq!(forward_bytes_per_token(&qwen.model, &qwen.options), 90_112.0);
    // One sequence on the L4 (2,048 batched tokens): the forward's 176 MiB is the peak, where
    // the stated reserve's was 1,024 rows of 151,936 logits (2.9 GiB; the forward's 8,192
    // tokens are 0.7).
    let stated = 1024.0 * 151_936.0 * 20.0;
    let expected = 4.17 + (2048.0 * 90_112.0 - stated) / GIB;
    assert!((qwen.memory.reserve.gib - expected).abs() < 1e-9, "{}", qwen.memory.reserve.gib);
    // Llama-3.1-70B at TP 2: 2 x 8,192, and 2 x 14,336 + 14,336 of FFN a token, 118,784
    // bytes. Twice vLLM's default tokens still profile less than the sampler's 1,024 rows
    // of 128,256 logits (2.4 GiB, 0.45 less than the stated reserve's Qwen3 rows); 65,536
    // tokens hold 7.3 GiB, 4.8 more than those rows.
    let llama = |opts: &[(&str, &str)]| {
        let s = setup("meta-llama/Llama-3.1-70B-Instruct", "h200", &[&[("tp", "2")], opts].concat()).unwrap();
        (forward_bytes_per_token(&s.model, &s.options), s.memory.reserve.gib)
    };
    let (per_token, default) = llama(&[]);
    assert_eq!(per_token, 118_784.0);
    let qwen_rows = 1024.0 * 151_936.0 * 20.0 / GIB;
    let rows = 1024.0 * 128_256.0 * 20.0 / GIB;
    assert!((default - (StackProfile::default().activation_reserve_gib - qwen_rows + rows)).abs() < 1e-9);
    assert_eq!(llama(&[("max-num-batched-tokens", "16384")]).1, default);
    let (_, large) = llama(&[("max-num-batched-tokens", "65536")]);
    let expected = default + 65_536.0 * 118_784.0 / GIB - rows;
    assert!((large - expected).abs() < 1e-9 && (large - default - 4.80).abs() < 0.01, "{large}");
    // More sequences than the stated 1,024 profile more rows: 1,024 more of them at 2,048.
    let (_, seqs) = llama(&[("max-num-seqs", "2048")]);
    assert!((seqs - default - 1024.0 * 128_256.0 * 20.0 / GIB).abs() < 1e-9, "{seqs}");
}

#[test]
fn a_mixture_of_experts_forward_holds_the_fused_kernels_caches() {
    // gpt-oss-120b on one GPU: 4 routed experts a token, each 2 x 2,880 of gate-up output
    // (wider than the 2,880 hidden the down products write into the same buffer) and 2,880
    // activated, and 128 router logits: 34,688 values, beside 2 x 2,880 of residual state.
    let gpt = setup("openai/gpt-oss-120b", "h100-sxm", &[]).unwrap();
    assert_eq!(forward_bytes_per_token(&gpt.model, &gpt.options), 2.0 * (5_760.0 + 34_688.0));
    // DeepSeek-R1 at TP 8: a rank's 256 columns of each of 8 experts write into buffers as
    // wide as the 7,168 hidden: the hidden width, not the expert's, sets them.
    let r1 = setup("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "8")]).unwrap();
    let routed = 8.0 * (7_168.0 + 256.0) + 256.0;
    assert_eq!(forward_bytes_per_token(&r1.model, &r1.options), 2.0 * (2.0 * 7_168.0 + routed));
}

proptest::proptest! {
    #[test]
    fn more_tokens_or_sequences_never_leave_more_kv_cache(
        model in proptest::sample::select(vec!["Qwen/Qwen3-8B", "openai/gpt-oss-20b", "Qwen/Qwen3-30B-A3B", "google/gemma-3-4b-it"]),
        seqs in 1u32..2048,
        tokens in 2048u32..65_536,
        more in 1u32..4096,
    ) {
        let reserve = |seqs: u32, tokens: u32| {
            let (s, t) = (seqs.to_string(), tokens.to_string());
            setup(model, "h200", &[("max-num-seqs", s.as_str()), ("max-num-batched-tokens", t.as_str())]).unwrap().memory.reserve.gib
        };
        let base = reserve(seqs, tokens);
        proptest::prop_assert!(reserve(seqs, tokens + more) >= base);
        proptest::prop_assert!(reserve((seqs + more).min(tokens), tokens) >= base);
    }
}
