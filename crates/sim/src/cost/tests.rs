//! The step-time model's terms one by one, and their properties (never under the bytes over the
//! bandwidth, more work never faster).

use proptest::prelude::*;

use super::*;
use crate::precision::Precision;
use crate::presets::Presets;

/// The resolved setup of `model` on `hw` with serving options `pairs`.
pub(super) fn setup(model: &str, hw: &str, pairs: &[(&str, &str)]) -> SimSetup {
    let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    SimSetup::resolve_with(&Presets::embedded().unwrap(), model, hw, &pairs, None).unwrap()
}

pub(super) fn model(model: &str, hw: &str, pairs: &[(&str, &str)]) -> CostModel {
    CostModel::new(&setup(model, hw, pairs))
}

pub(super) fn decode_batch(n: u32, ctx: u32) -> BatchStats {
    let mut b = BatchStats::default();
    for _ in 0..n {
        b.add_sequence(ctx, 1, 0, false, true);
    }
    b
}

pub(super) fn prefill(tokens: u32) -> BatchStats {
    let mut b = BatchStats::default();
    b.add_sequence(0, tokens, 0, true, true);
    b
}

#[test]
fn decode_streams_the_weights_and_prefill_is_compute_bound() {
    let c = model("Qwen/Qwen3-8B", "h100-sxm", &[]);
    let d = c.breakdown(&decode_batch(1, 100));
    // 15.1 GB of weights (the input embedding is not read whole) at eta_bw of 3.35 TB/s.
    let weights = c.attn_proj.weight_bytes + c.ffn.weight_bytes + c.lm_head.weight_bytes;
    assert!((weights / 1e9 - 15.14).abs() < 0.05, "{weights}");
    assert!(((d.dense + d.lm_head) - weights / c.bandwidth).abs() < 1e-9, "{d:?}");
    let p = c.breakdown(&prefill(8192));
    let flops = c.attn_proj.flops_per_row * 8192.0 + c.ffn.flops_per_row * 8192.0;
    assert!(p.dense > flops / (989e12 * 0.9), "{p:?}");
    assert!(p.dense > 3.0 * weights / c.bandwidth, "{p:?}");
    assert!(p.total > 10.0 * d.total);
}

#[test]
fn tensor_parallelism_halves_the_kernels_and_adds_two_allreduces_per_layer() {
    let one = model("Qwen/Qwen3-8B", "h100-sxm", &[]);
    let two = model("Qwen/Qwen3-8B", "h100-sxm", &[("tp", "2")]);
    let b = decode_batch(8, 500);
    let (b1, b2) = (one.breakdown(&b), two.breakdown(&b));
    assert_eq!(b1.allreduce, 0.0);
    // The embedding's all-reduce and 2 x 36 layers' x the NVLink latency, plus the bytes.
    let lat = two.tp_allreduce.link.allreduce_seconds(2.0, 0.0);
    assert!(b2.allreduce >= 73.0 * lat && b2.allreduce < 73.0 * (lat + 1e-6), "{b2:?}");
    assert!(((b2.dense + b2.lm_head) / (b1.dense + b1.lm_head) - 0.5).abs() < 0.01, "{b1:?} {b2:?}");
    assert!(b2.total < b1.total);
    // Over 200 GbE between Sparks the all-reduce dominates a small model's decode, and costs
    // more over more nodes (more network steps: 87 µs and 2 steps of 7 over two, the tree's six
    // hops of 13 over eight).
    let spark2 = model("Qwen/Qwen3-0.6B", "dgx-spark", &[("tp", "2"), ("nodes", "2")]);
    let spark8 = model("Qwen/Qwen3-0.6B", "dgx-spark", &[("tp", "8"), ("nodes", "8")]);
    let s2 = spark2.breakdown(&decode_batch(1, 100));
    assert!(s2.allreduce > s2.dense + s2.lm_head, "{s2:?}");
    assert!(spark8.breakdown(&decode_batch(1, 100)).allreduce > 1.5 * s2.allreduce);
}

#[test]
fn tensor_parallel_ranks_gather_the_sampled_rows_logits() {
    let b = decode_batch(100, 1100);
    let product = |c: &CostModel| gemm_seconds(c.lm_head, 100.0, c.lm_dev);
    // One GPU gathers nothing: its LM head is its product alone.
    let one = model("openai/gpt-oss-120b", "dgx-spark", &[]);
    assert_eq!(one.breakdown(&b).lm_head, product(&one));
    // Over four Sparks each node lacks three quarters of the 100 rows' logits (201,088 BF16
    // values a row, 40.2 MB in all): about 2.85 ms over one PCIe link's 11 GB/s.
    let four = model("openai/gpt-oss-120b", "dgx-spark", &[("tp", "4")]);
    let gather = four.breakdown(&b).lm_head - product(&four);
    let expected = four.tp_allreduce.link.allgather_seconds(4.0, 100.0 * 201_088.0 * 2.0);
    assert!((gather - expected).abs() < 1e-12 && gather > 2.7e-3 && gather < 3.0e-3, "{gather}");
    // Within an H100 node the same gather is a few percent of that.
    let h100 = model("openai/gpt-oss-120b", "h100-sxm", &[("tp", "4")]);
    let nvlink = h100.breakdown(&b).lm_head - product(&h100);
    assert!(nvlink > 0.0 && nvlink < 0.05 * gather, "{nvlink}");
}

#[test]
fn moe_layers_exchange_tokens_only_between_data_parallel_ranks() {
    // vLLM's expert parallelism within one engine (tp=8, ep) keeps tensor parallelism's two
    // all-reduces a layer and adds no exchange; the step waits for the GPU whose whole experts
    // the batch touches most.
    let b = decode_batch(64, 1000);
    let tp = model("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "8")]).breakdown(&b);
    let ep = model("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "8"), ("ep", "true")]).breakdown(&b);
    assert_eq!(tp.allreduce, ep.allreduce);
    assert!(ep.experts > 1.05 * tp.experts && ep.experts < 1.5 * tp.experts, "{tp:?} {ep:?}");
    // Data-parallel ranks (dp=8, ep) run no tensor-parallel all-reduce, but every MoE layer
    // gathers the other ranks' tokens and reduce-scatters the result: an all-reduce's traffic
    // of the whole batch over the eight ranks, launched twice.
    let c = model("deepseek-ai/DeepSeek-R1", "h200", &[("dp", "8"), ("ep", "true")]);
    let link = c.moe_link;
    let whole_batch = 64.0 * 7168.0 * 2.0;
    let exchange = c.moe_layers * (link.allreduce_seconds(8.0, whole_batch) + link.fixed_s);
    assert!((c.breakdown(&b).allreduce - exchange).abs() < 1e-12, "{:?}", c.breakdown(&b));
    // Without ep the ranks exchange the same way (their experts are sliced over all 8 GPUs).
    let sliced = model("deepseek-ai/DeepSeek-R1", "h200", &[("dp", "8")]).breakdown(&b);
    assert_eq!(sliced.allreduce, c.breakdown(&b).allreduce);
    // Ranks spread over two nodes exchange over the network.
    let two_nodes = model("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "8"), ("dp", "2"), ("ep", "true")]);
    assert!(two_nodes.moe_link.bandwidth < link.bandwidth, "{:?}", two_nodes.moe_link);
}

#[test]
fn a_data_parallel_step_lasts_as_long_as_its_busiest_rank() {
    let one = model("Qwen/Qwen3-30B-A3B", "h100-sxm", &[]);
    let eight = model("Qwen/Qwen3-30B-A3B", "h100-sxm", &[("dp", "8")]);
    // A prompt's chunk is one rank's work: beside seven decodes elsewhere, that rank's products
    // and attention take what one engine's would, not an eighth.
    let mut b = prefill(8192);
    for _ in 0..7 {
        b.add_sequence(1000, 1, 0, false, true);
    }
    assert_eq!(b.max_new, 8192);
    let (p1, p8) = (one.breakdown(&b), eight.breakdown(&b));
    assert!(p8.dense > 0.99 * p1.dense && p8.attention > 0.99 * p1.attention, "{p1:?} {p8:?}");
    // Many decodes spread evenly: each rank reads about an eighth of their KV cache.
    let d = decode_batch(800, 2000);
    let (d1, d8) = (one.breakdown(&d), eight.breakdown(&d));
    assert!((d8.attention / d1.attention - 0.125).abs() < 1e-9, "{d1:?} {d8:?}");
    // A chunk among many decodes: the chunk's rank prefills it whole, but reads only its even
    // share of the decodes' KV cache, not the share of the step's tokens the chunk gives it.
    let mut mixed = prefill(8192);
    for _ in 0..1000 {
        mixed.add_sequence(2000, 1, 0, false, true);
    }
    let (m1, m8, alone) = (one.breakdown(&mixed), eight.breakdown(&mixed), one.breakdown(&prefill(8192)));
    assert!(m8.attention >= 0.99 * alone.attention && m8.attention < 0.8 * m1.attention, "{m1:?} {m8:?} {alone:?}");
    // Four decodes over eight ranks: the busiest holds one.
    let (f1, f8) = (one.breakdown(&decode_batch(1, 2000)), eight.breakdown(&decode_batch(4, 2000)));
    assert!((f8.attention - f1.attention).abs() < 1e-12 && f8.fixed == f1.fixed, "{f1:?} {f8:?}");
}

#[test]
fn a_graph_pads_the_batch_and_its_padded_rows_touch_experts() {
    // Five decodes run in the graph captured for eight, whose padded rows route like tokens.
    let c = model("openai/gpt-oss-120b", "h100-sxm", &[]);
    let (five, eight) = (c.breakdown(&decode_batch(5, 100)), c.breakdown(&decode_batch(8, 100)));
    assert!((five.experts - eight.experts).abs() < 1e-12, "{five:?} {eight:?}");
    assert!(five.experts > c.breakdown(&decode_batch(4, 100)).experts);
    // Attention and the per-sequence costs see the five real sequences.
    assert!(five.attention < eight.attention && five.fixed < eight.fixed, "{five:?} {eight:?}");
    // Without graphs nothing is padded.
    let eager = model("openai/gpt-oss-120b", "h100-sxm", &[("enforce-eager", "true")]);
    assert!(eager.breakdown(&decode_batch(5, 100)).experts < eager.breakdown(&decode_batch(8, 100)).experts);
    // A dense model's padded rows only add rows to products that stream their weights anyway.
    let dense = model("Qwen/Qwen3-8B", "h100-sxm", &[]);
    let (d5, d8) = (dense.breakdown(&decode_batch(5, 100)), dense.breakdown(&decode_batch(8, 100)));
    assert!((d5.dense - d8.dense).abs() < 1e-12 && d5.total < d8.total, "{d5:?} {d8:?}");
}

#[test]
fn graphs_captured_at_the_batch_s_own_size_do_not_pad_it() {
    // Five and ten decodes captured as they are read the experts of five and ten tokens.
    let sized = model("openai/gpt-oss-120b", "dgx-spark", &[("cudagraph-capture-sizes", "1,2,4,5,8,10,16")]);
    let default = model("openai/gpt-oss-120b", "dgx-spark", &[]);
    for (n, padded) in [(5, 8), (10, 16)] {
        assert_eq!(sized.rows(&decode_batch(n, 100)), u64::from(n));
        assert_eq!(default.rows(&decode_batch(n, 100)), padded);
        let (own, pad) = (sized.breakdown(&decode_batch(n, 100)), default.breakdown(&decode_batch(n, 100)));
        assert!(own.experts < pad.experts && own.total < pad.total, "{n}: {own:?} {pad:?}");
    }
    // Beyond the largest size given, a step runs without graphs.
    assert_eq!(sized.eager_reason(&decode_batch(16, 100)), None);
    assert!(sized.eager_reason(&decode_batch(17, 100)).is_some());
    assert!(sized.breakdown(&decode_batch(17, 100)).eager > 0.0);
    // vLLM's own sizes end at twice max-num-seqs: four sequences capture up to eight tokens.
    let four = model("openai/gpt-oss-120b", "dgx-spark", &[("max-num-seqs", "4")]);
    assert_eq!(four.eager_reason(&decode_batch(4, 100)), None);
    let mut prefill_step = decode_batch(2, 100);
    prefill_step.add_sequence(0, 20, 0, true, true);
    assert!(four.eager_reason(&prefill_step).is_some() && default.eager_reason(&prefill_step).is_none());
}

#[test]
fn moe_steps_read_the_experts_their_tokens_touch() {
    let c = model("openai/gpt-oss-120b", "h100-sxm", &[]);
    let touched: Vec<f64> = [1, 4, 16, 64, 1024].iter().map(|&n| c.experts_touched(n)).collect();
    assert_eq!(touched[0], 4.0);
    assert!(touched.windows(2).all(|w| w[1] > w[0]), "{touched:?}");
    assert!(touched[4] > 127.9 && touched[4] <= 128.0, "{touched:?}");
    let e1 = c.breakdown(&decode_batch(1, 10)).experts;
    let e64 = c.breakdown(&decode_batch(64, 10)).experts;
    assert!(e64 > 5.0 * e1, "{e1} {e64}");
    // One decode token reads 4 experts in each of 36 layers.
    assert!((e1 - 36.0 * 4.0 * c.expert.weight_bytes / c.bandwidth).abs() / e1 < 1e-9, "{e1}");
    let dense = model("Qwen/Qwen3-8B", "h100-sxm", &[]);
    assert_eq!(dense.experts_touched(64), 0.0);
    assert_eq!(dense.breakdown(&decode_batch(64, 10)).experts, 0.0);
}

#[test]
fn windowed_layers_read_less_kv_on_long_contexts() {
    let c = model("google/gemma-3-12b-it", "h100-sxm", &[]);
    let batch = |ctx: u32| {
        let mut b = BatchStats::default();
        for _ in 0..32 {
            b.add_sequence(ctx, 1, 1024, false, true);
        }
        b
    };
    let short = c.breakdown(&batch(2000));
    let long = c.breakdown(&batch(32_000));
    // Beyond the window only the 8 global layers of 48 read more KV.
    let per_token_all_layers = c.kv_bytes_token_layer * 48.0 / c.bandwidth;
    let grown = (long.attention - short.attention) / (32.0 * 30_000.0 * per_token_all_layers);
    assert!((grown - 8.0 / 48.0).abs() < 1e-9, "{grown}");
}

#[test]
fn pipeline_stages_add_handoffs_and_run_in_sequence() {
    let one = model("Qwen/Qwen3-8B", "h100-sxm", &[]);
    let two = model("Qwen/Qwen3-8B", "h100-sxm", &[("pp", "2")]);
    let b = decode_batch(4, 100);
    let (a, p) = (one.breakdown(&b), two.breakdown(&b));
    assert_eq!(a.pipeline, 0.0);
    assert!(p.pipeline > 0.0);
    assert!((p.dense - a.dense).abs() / a.dense < 0.01);
}

#[test]
fn launches_are_paid_per_layer_only_beyond_the_graph_limits() {
    let c = model("Qwen/Qwen3-8B", "h100-sxm", &[("eager-layer-us", "500"), ("graph-max-ctx", "8192")]);
    assert_eq!(c.breakdown(&decode_batch(4, 100)).eager, 0.0);
    // A long-context decode step of four tokens: the small kernels' launches show in full
    // (less a few microseconds of their own work).
    let long = c.breakdown(&decode_batch(4, 9000));
    assert!(long.eager > 0.99 * 36.0 * 500e-6 && long.eager <= 36.0 * 500e-6, "{long:?}");
    // A long prefill's small kernels take longer than their launches where memory is slow.
    let always = model("Qwen/Qwen3-8B", "dgx-spark", &[("eager-layer-us", "500"), ("enforce-eager", "true")]);
    assert_eq!(always.breakdown(&prefill(8192)).eager, 0.0);
    assert!(always.breakdown(&decode_batch(1, 10)).eager > 0.0);
    // With graphs for decode steps only, a small prefill beside decodes is launched kernel by
    // kernel, a decode step is not; no graphs at all is `--enforce-eager`.
    let mut mixed = decode_batch(4, 100);
    mixed.add_sequence(0, 20, 0, true, true);
    let pairs = |mode| [("eager-layer-us", "500"), ("cudagraph-mode", mode)];
    let decode_only = model("Qwen/Qwen3-8B", "dgx-spark", &pairs("full-decode-only"));
    assert!(decode_only.breakdown(&mixed).eager > 0.0);
    assert_eq!(decode_only.breakdown(&decode_batch(4, 100)).eager, 0.0);
    for mode in ["full", "full-and-piecewise"] {
        assert_eq!(model("Qwen/Qwen3-8B", "dgx-spark", &pairs(mode)).breakdown(&mixed).eager, 0.0, "{mode}");
    }
    let none = model("Qwen/Qwen3-8B", "dgx-spark", &pairs("none"));
    assert_eq!(none.breakdown(&decode_batch(4, 100)).eager, always.breakdown(&decode_batch(4, 100)).eager);
}

pub(super) fn any_model() -> impl Strategy<Value = CostModel> {
    let models = [
        "Qwen/Qwen3-8B",
        "openai/gpt-oss-120b",
        "google/gemma-3-12b-it",
        "Qwen/Qwen3-0.6B",
        "deepseek-ai/DeepSeek-R1",
        "Qwen/Qwen3.5-35B-A3B",
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        "deepseek-ai/DeepSeek-V3.2",
    ];
    let hws = ["h100-sxm", "dgx-spark", "l40s", "b200", "mi300x", "gb200"];
    (0..models.len(), 0..hws.len(), prop::sample::select(vec![1u32, 2, 4, 8])).prop_filter_map(
        "the model does not fit",
        move |(m, h, tp)| {
            let pairs = vec![("tp".to_string(), tp.to_string())];
            let s = SimSetup::resolve_with(&Presets::embedded().unwrap(), models[m], hws[h], &pairs, None).ok()?;
            Some(CostModel::new(&s))
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_step_never_beats_its_bytes_over_the_datasheet_bandwidth(
        c in any_model(), seqs in 1u32..256, ctx in 0u32..20_000, chunk in 0u32..4096
    ) {
        let mut b = decode_batch(seqs, ctx);
        if chunk > 0 {
            b.add_sequence(0, chunk, 0, true, true);
        }
        let d = c.breakdown(&b);
        // Every byte read at the attainable bandwidth (at most the datasheet's) is a floor.
        prop_assert!(c.bandwidth <= c.datasheet_bandwidth);
        prop_assert!(d.total >= d.memory * (1.0 - 1e-12), "{d:?}");
        prop_assert!(d.total.is_finite() && d.total > 0.0);
        // The named terms (what a prediction's time note shares out) are the whole step, and
        // a run's sum of them stays so.
        let named: f64 = d.shares().iter().map(|&(_, v)| v).sum();
        prop_assert!((named - d.total).abs() <= 1e-9 * d.total, "{named} of {d:?}");
        let mut run = StepBreakdown::default();
        run.add_scaled(&d, 1.5);
        run.add_scaled(&c.breakdown(&prefill(chunk.max(1))), 0.5);
        let named: f64 = run.shares().iter().map(|&(_, v)| v).sum();
        prop_assert!((named - run.total).abs() <= 1e-9 * run.total, "{named} of {run:?}");
    }

    #[test]
    fn more_work_never_takes_less_time(
        c in any_model(), seqs in 1u32..256, more in 1u32..64, ctx in 0u32..20_000, chunk in 1u32..4096, extra in 1u32..2048
    ) {
        let t = |b: &BatchStats| c.step_seconds(b);
        prop_assert!(t(&decode_batch(seqs + more, ctx)) >= t(&decode_batch(seqs, ctx)));
        prop_assert!(t(&decode_batch(seqs, ctx + extra)) >= t(&decode_batch(seqs, ctx)));
        prop_assert!(t(&prefill(chunk + extra)) >= t(&prefill(chunk)));
    }
}

#[test]
fn dense_dequantizing_products_reach_marlin_s_share_of_the_tensor_rate_not_cublas_s() {
    let st = crate::profile::StackProfile::default();
    let rate = |c: &CostModel| c.ffn_dev.peak_flops * c.ffn_dev.ceiling;
    // The A100's integer rate unpacks faster than its tensor cores multiply: an FP8 or AWQ
    // checkpoint's dense products (Marlin, W8A16 and W4A16) run at `dequant_mma` of the BF16
    // rate, where the BF16 checkpoint's run at cuBLAS's ceiling.
    let bf16 = model("Qwen/Qwen3-14B", "a100-80g", &[]);
    for precision in ["fp8", "awq-int4"] {
        let c = model("Qwen/Qwen3-14B", "a100-80g", &[("precision", precision)]);
        let share = st.dequant_mma / bf16.ffn_dev.ceiling;
        assert!((rate(&c) / rate(&bf16) - share).abs() < 1e-9, "{precision}");
        assert!((c.attn_dev.peak_flops * c.attn_dev.ceiling / rate(&c) - 1.0).abs() < 1e-9, "{precision}");
        let slower = model("Qwen/Qwen3-14B", "a100-80g", &[("precision", precision), ("dequant-mma", "0.25")]);
        assert!((rate(&slower) / rate(&c) - 0.25 / st.dequant_mma).abs() < 1e-9, "{precision}");
    }
    // On the H100 the unpacking binds first: the share does not reach them there.
    let h100 = model("Qwen/Qwen3-14B", "h100-sxm", &[("precision", "awq-int4")]);
    let lower = model("Qwen/Qwen3-14B", "h100-sxm", &[("precision", "awq-int4"), ("dequant-mma", "0.6")]);
    assert_eq!(rate(&h100), rate(&lower));
    // FP8 runs on the H100's own FP8 units, no dequantizing at all.
    let fp8 = model("Qwen/Qwen3-14B", "h100-sxm", &[("precision", "fp8"), ("dequant-mma", "0.1")]);
    assert_eq!(rate(&fp8), rate(&model("Qwen/Qwen3-14B", "h100-sxm", &[("precision", "fp8")])));
}

#[test]
fn dequantizing_experts_run_at_the_sms_issue_rate_capped_by_the_tensor_rate() {
    let st = crate::profile::StackProfile::default();
    // gpt-oss's experts whole on one GPU: 2,880 columns, a little under a wide shard's rate.
    let whole = super::terms::shard_efficiency(2880.0);
    let expert_rate = |c: &CostModel| c.expert_dev.peak_flops * c.expert_dev.ceiling / whole;
    // The H100's integer rate gives back the BF16-peak pricing its ceilings were fitted with.
    let h100 = model("openai/gpt-oss-120b", "h100-sxm", &[]);
    assert!((expert_rate(&h100) / (989e12 * st.moe_eff.weight_only) - 1.0).abs() < 1e-9);
    // The A100 issues 19.5 / 33.5 of the H100's integer work: its Marlin experts run at that
    // share of the H100's rate, not at the 312 / 989 share of the tensor peaks.
    let a100 = model("openai/gpt-oss-120b", "a100-80g", &[]);
    assert!((expert_rate(&a100) / expert_rate(&h100) - 19.5 / 33.5).abs() < 1e-9);
    let b = decode_batch(256, 1000);
    let (ta, th) = (a100.breakdown(&b).experts, h100.breakdown(&b).experts);
    assert!(ta / th > 1.5 && ta / th < 1.8, "{ta} {th}");
    // Weak tensor cores bind first: the RTX 4090's integer rate would allow more than its BF16
    // rate at the dequantizing kernels' mma ceiling (not the BF16 experts' own ceiling).
    let rtx = model("openai/gpt-oss-20b", "rtx-4090", &[]);
    assert!((expert_rate(&rtx) / (165e12 * crate::profile::DEQUANT_MMA) - 1.0).abs() < 1e-9);
    assert!(st.moe_eff.bf16 < crate::profile::DEQUANT_MMA);
    // So do the GB10's (its 128 integer lanes an SM unpack faster than its tensor cores
    // multiply), and the fraction they reach is a constant of the stack.
    let spark = model("openai/gpt-oss-120b", "dgx-spark", &[]);
    assert!((expert_rate(&spark) / (100e12 * crate::profile::DEQUANT_MMA) - 1.0).abs() < 1e-9);
    let slower = model("openai/gpt-oss-120b", "dgx-spark", &[("dequant-mma", "0.25")]);
    assert!((expert_rate(&slower) / expert_rate(&spark) - 0.5).abs() < 1e-9);
    // A device without an integer rate keeps its BF16 peak at the weight-only ceiling.
    let thor = model("openai/gpt-oss-120b", "jetson-agx-thor", &[]);
    assert!((expert_rate(&thor) / (258e12 * st.moe_eff.weight_only) - 1.0).abs() < 1e-9);
}

#[test]
fn rocm_parts_run_mxfp4_experts_in_triton_s_kernels_at_their_sustained_clock() {
    let presets = crate::presets::Presets::embedded().unwrap();
    let st = crate::profile::StackProfile::default();
    // gpt-oss's experts whole on one GPU: 2,880 columns.
    let whole = super::terms::shard_efficiency(2880.0);
    for (hw, peak) in [("mi300x", 1307e12), ("mi325x", 1307e12), ("mi355x", 2517e12)] {
        let spec = presets.hardware(hw).unwrap();
        assert_eq!(spec.mxfp4_backend, crate::precision::Mxfp4Backend::Triton, "{hw}");
        // Held below the H100's share of its peak by its power limit, not above it.
        assert!(spec.sustained_clock > 0.5 && spec.sustained_clock < 0.9, "{hw}");
        let c = model("openai/gpt-oss-120b", hw, &[]);
        assert!((c.expert_dev.ceiling - st.triton_moe.ceiling * whole).abs() < 1e-12, "{hw}");
        assert!((c.expert_dev.peak_flops - peak * spec.sustained_clock).abs() < 1e6, "{hw}");
        assert!((c.moe_fixed_s - st.triton_moe.fixed_us * 1e-6).abs() < 1e-12, "{hw}");
    }
    // The same experts on a CUDA part stay Marlin's, and a ROCm part takes Marlin's if asked.
    let h100 = model("openai/gpt-oss-120b", "h100-sxm", &[]);
    assert!((h100.expert_dev.ceiling - st.moe_eff.weight_only * whole).abs() < 1e-12);
    let marlin = model("openai/gpt-oss-120b", "mi300x", &[("mxfp4-backend", "marlin")]);
    assert!(marlin.moe_fixed_s == 0.0 && (marlin.expert_dev.m_half - st.gemm_m_half).abs() < 1e-12);
    // A dense model on a ROCm part is priced at the same clock, not refused for the kernels'
    // default it has no use for.
    let dense = model("Qwen/Qwen3-8B", "mi300x", &[]);
    let clock = presets.hardware("mi300x").unwrap().sustained_clock;
    assert!((dense.ffn_dev.peak_flops - 1307e12 * clock).abs() < 1e6);
}

proptest! {
    #[test]
    fn triton_experts_never_stream_faster_than_the_sms_dequantize(n in 1u32..129, tp in prop::sample::select(vec![1u32, 2, 4, 8])) {
        let tp = tp.to_string();
        let c = model("openai/gpt-oss-120b", "h100-sxm", &[("tp", tp.as_str()), ("mxfp4-backend", "triton")]);
        let b = decode_batch(n, 1000);
        let st = crate::profile::StackProfile::default().triton_moe;
        let stream = 33.5e12 / st.ops_per_weight * Precision::Mxfp4.bytes_per_param();
        let bytes = c.experts_touched(u64::from(n)) * c.expert.weight_bytes / c.expert_spread.gpus * c.moe_layers;
        prop_assert!(c.breakdown(&b).experts >= bytes / stream);
        // At decode sizes (up to 128 sequences) they are slower than the calibrated Marlin path;
        // with many rows per expert their higher ceiling wins (the probe's prefill figures).
        let marlin = model("openai/gpt-oss-120b", "h100-sxm", &[("tp", tp.as_str())]);
        prop_assert!(c.breakdown(&b).experts > marlin.breakdown(&b).experts);
    }
}

proptest! {
    /// The fused-MoE latency is paid once a MoE layer whatever the batch, and more tokens never
    /// make the experts cheaper.
    #[test]
    fn fused_moe_experts_pay_their_latency_once_a_layer_and_grow_with_tokens(
        n in 1u32..300,
        extra in 1u32..300,
        tp in prop::sample::select(vec!["4", "8"]),
    ) {
        let c = model("Qwen/Qwen3-235B-A22B-FP8", "h200", &[("tp", tp)]);
        let st = crate::profile::StackProfile::default();
        let small = c.breakdown(&decode_batch(n, 1000)).experts;
        let large = c.breakdown(&decode_batch(n + extra, 1000)).experts;
        prop_assert!(small >= c.moe_layers * st.fused_moe_us * 1e-6);
        prop_assert!(large >= small);
    }
}

#[test]
fn each_expert_kernel_family_pays_its_own_fixed_cost() {
    let st = crate::profile::StackProfile::default();
    let b = decode_batch(4, 1000);
    // Native experts pay the fused-MoE kernels' fixed cost; FP4 experts on parts with FP4 units
    // the FP4 block-scaled kernels' (and read at their stream); Marlin's dequantizing experts
    // (MXFP4 on Hopper, NVFP4 on a Spark, W8A16 on an A100) neither.
    let (fused, fp4) = (st.fused_moe_us * 1e-6, st.fp4_moe.fixed_us * 1e-6);
    for (id, hw, fixed, fp4_stream) in [
        ("Qwen/Qwen3-235B-A22B-FP8", "h100-sxm", fused, false),
        ("Qwen/Qwen3-235B-A22B", "a100-80g", fused, false),
        ("Qwen/Qwen3-235B-A22B-FP8", "a100-80g", 0.0, false),
        ("openai/gpt-oss-120b", "h100-sxm", 0.0, false),
        ("openai/gpt-oss-120b", "b200", fp4, true),
        ("nvidia/Llama-4-Scout-17B-16E-Instruct-NVFP4", "gb200", fp4, true),
        ("nvidia/Llama-4-Scout-17B-16E-Instruct-NVFP4", "dgx-spark", 0.0, false),
    ] {
        let s = setup(id, hw, &[("tp", "8")]);
        let c = CostModel::new(&s);
        assert_eq!(c.moe_fixed_s, fixed, "{id} on {hw}");
        let calibrated = s.stack.eta_bw * s.hardware.bandwidth_gbs * 1e9;
        if fp4_stream {
            assert!((c.expert_dev.bandwidth / (calibrated * st.fp4_moe.stream) - 1.0).abs() < 1e-12, "{id} on {hw}");
        } else {
            assert!(c.expert_dev.bandwidth <= calibrated * (1.0 + 1e-12), "{id} on {hw}");
        }
        assert!(c.breakdown(&b).experts > 0.0);
    }
}

#[test]
fn a_dequant_rate_caps_the_weight_only_experts_stream_when_set() {
    let b = decode_batch(4, 1000);
    let free = model("openai/gpt-oss-120b", "h100-sxm", &[]);
    let capped = model("openai/gpt-oss-120b", "h100-sxm", &[("dequant-ops-per-weight", "6.45")]);
    assert!((capped.expert_dev.bandwidth - 33.5e12 / 6.45 * 0.53125).abs() < 1e3);
    assert!(capped.breakdown(&b).experts > free.breakdown(&b).experts);
    // A cap above what the memory delivers changes nothing; dense products never see it.
    let loose = model("openai/gpt-oss-120b", "h100-sxm", &[("dequant-ops-per-weight", "1")]);
    assert_eq!(loose.breakdown(&b).total, free.breakdown(&b).total);
    assert_eq!(capped.breakdown(&b).dense, free.breakdown(&b).dense);
}

#[test]
fn a_held_back_clock_slows_compute_and_leaves_the_memory_stream() {
    let pcie = model("Qwen/Qwen3-14B", "h100-pcie", &[]);
    let mut s = setup("Qwen/Qwen3-14B", "h100-pcie", &[]);
    assert_eq!(s.hardware.sustained_clock, 0.62);
    s.hardware.sustained_clock = 1.0;
    let full = CostModel::new(&s);
    // An 8,192-token prefill is compute-bound: its products take 1 / 0.62 as long.
    let (slow, fast) = (pcie.breakdown(&prefill(8192)), full.breakdown(&prefill(8192)));
    assert!((slow.dense / fast.dense - 1.0 / 0.62).abs() < 0.02, "{} / {}", slow.dense, fast.dense);
    // One sequence's decode streams the weights, at the memory's rate either way.
    let (slow, fast) = (pcie.breakdown(&decode_batch(1, 1000)), full.breakdown(&decode_batch(1, 1000)));
    assert!((slow.dense - fast.dense).abs() < 1e-9, "{} / {}", slow.dense, fast.dense);
}

#[test]
fn a_light_step_s_kernel_floor_follows_the_boost_clock() {
    // The constants were calibrated at the H100 SXM's clock: there they are as written.
    assert_eq!(setup("Qwen/Qwen3-30B-A3B", "h100-sxm", &[]).hardware.latency_scale(), 1.0);
    let a100 = setup("Qwen/Qwen3-30B-A3B", "a100-80g", &[]);
    assert_eq!(a100.hardware.boost_clock_mhz, Some(1410.0));
    let mut unclocked = a100.clone();
    unclocked.hardware.boost_clock_mhz = None;
    let b = decode_batch(1, 200);
    let (slow, at_h100) = (CostModel::new(&a100).breakdown(&b), CostModel::new(&unclocked).breakdown(&b));
    let k = crate::hardware::CALIBRATION_CLOCK_MHZ / 1410.0;
    // The layers' floor and the routing kernels take 1980 / 1410 as long; the per-step and
    // per-sequence costs, the experts' long reads and their fixed cost do not move.
    let st = &a100.stack;
    let layers = f64::from(a100.model.layers);
    assert!(((slow.fixed - at_h100.fixed) - (k - 1.0) * layers * st.t_layer_us * 1e-6).abs() < 1e-12);
    assert!((slow.moe_routing / at_h100.moe_routing - k).abs() < 1e-12, "{slow:?} {at_h100:?}");
    assert_eq!(slow.experts, at_h100.experts);
    assert_eq!(slow.dense, at_h100.dense);
}

#[test]
fn mla_prefill_attends_decompressed_heads_and_decodes_the_latent() {
    // DeepSeek-R1 at TP8: a 32,768-token prompt's last chunk (24,576 cached, 8,192 new) is
    // compute-bound at the decompressed heads' 81,920 FLOPs a pair, plus the up-projection of
    // the 24,576 cached latents to those heads in every layer; decodes are priced at the
    // absorbed form's 278,528. (Without Hopper's exposed exponentials and tile work, which
    // `kernel_checks` prices on their own.)
    let c =
        model("deepseek-ai/DeepSeek-R1", "h200", &[("tp", "8"), ("attn-exp-exposed", "0"), ("attn-query-keys", "0")]);
    let mut chunk = BatchStats::default();
    chunk.add_sequence(24_576, 8_192, 0, true, true);
    assert_eq!(chunk.prefill_context_tokens, 24_576);
    let pairs = chunk.pairs_prefill_full * c.full_layers;
    let upproj = super::terms::GemmShape { flops_per_row: 2.0 * 512.0 * 128.0 * 256.0 / 8.0, weight_bytes: 0.0 };
    let expected =
        pairs * 81_920.0 / 8.0 / c.attn_rate + c.full_layers * super::terms::gemm_seconds(upproj, 24_576.0, c.attn_dev);
    let attention = c.breakdown(&chunk).attention;
    assert!((attention / expected - 1.0).abs() < 1e-9, "{attention} {expected}");
    // The up-projection is a few percent of the chunk's attention, and nothing without context.
    let mut first = BatchStats::default();
    first.add_sequence(0, 8_192, 0, true, true);
    let share = c.full_layers * super::terms::gemm_seconds(upproj, 24_576.0, c.attn_dev) / attention;
    assert!(share > 0.005 && share < 0.1, "{share}");
    assert_eq!(c.breakdown(&first).attention, first.pairs_prefill_full * c.full_layers * 81_920.0 / 8.0 / c.attn_rate);
    assert_eq!((c.attn_flops_prefill, c.attn_flops_decode), (81_920.0 / 8.0, 278_528.0 / 8.0));
    // A dense model's two phases cost the same a pair.
    let q = model("Qwen/Qwen3-8B", "h100-sxm", &[]);
    assert_eq!(q.attn_flops_prefill, q.attn_flops_decode);
}

proptest! {
    /// FP4 experts on a part with FP4 units (gpt-oss's MXFP4 on a B200, an NVFP4 checkpoint on a
    /// B300) pay the FP4 kernels' fixed cost once a MoE layer and read the touched weights no
    /// faster than their stream; more tokens never make them cheaper.
    #[test]
    fn fp4_block_experts_pay_their_fixed_cost_and_read_at_their_stream(
        n in 1u32..300,
        extra in 1u32..300,
        case in prop::sample::select(vec![("openai/gpt-oss-120b", "b200"), ("nvidia/Llama-4-Scout-17B-16E-Instruct-NVFP4", "b300")]),
        tp in prop::sample::select(vec!["1", "4", "8"]),
    ) {
        let s = setup(case.0, case.1, &[("tp", tp)]);
        let c = CostModel::new(&s);
        let st = &s.stack;
        let stream = st.fp4_moe.stream * st.eta_bw * s.hardware.bandwidth_gbs * 1e9;
        let small = c.breakdown(&decode_batch(n, 1000)).experts;
        let bytes = c.experts_touched(u64::from(n)) * c.expert.weight_bytes / c.expert_spread.gpus * c.moe_layers;
        prop_assert!(small >= c.moe_layers * st.fp4_moe.fixed_us * 1e-6 + bytes / stream * (1.0 - 1e-9));
        prop_assert!(c.breakdown(&decode_batch(n + extra, 1000)).experts >= small);
    }
}

/// The Jetson AGX Thor's memory is the DGX Spark's (256-bit LPDDR5X, 273 GB/s, shared with the
/// CPU), so it streams weights at the fraction measured on the Spark. A public vLLM 0.20.2 run on
/// a Thor (NVIDIA's developer forum, topic 370044: Nemotron 3 Nano in NVFP4 with an FP8 KV
/// cache, one stream) reads a mean ITL of 14.18 ms; one decode step prices 14.6 ms (16.0 with
/// the generic 0.85 the preset had). Seen beside the change, so not held out; fails past 8 %.
#[test]
fn the_thor_streams_weights_as_the_spark_does() {
    let presets = Presets::embedded().unwrap();
    let eta = |hw: &str| presets.hardware(hw).unwrap().stack.eta_bw;
    assert_eq!(eta("jetson-agx-thor"), eta("dgx-spark"));
    let pairs = [("precision", "nvfp4"), ("kv-cache-dtype", "fp8")];
    let c = model("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B", "jetson-agx-thor", &pairs);
    let itl = c.breakdown(&decode_batch(1, 1024)).total;
    assert!((itl / 14.18e-3 - 1.0).abs() < 0.08, "{itl}");
}
