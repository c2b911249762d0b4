//! The physical terms of a step's cost, one function each: a matrix product against the
//! roofline, the experts a batch touches, attention, collective communication.
//!
//! Every function is pure and takes SI units (seconds, bytes, FLOP/s, bytes/s); the step model in
//! [`super::CostModel`] adds them up. Each has unit and property tests below: a term never
//! takes less than its bytes over the bandwidth, more work never takes less time, and so on.

/// Columns of an expert's shard that its products lose to their tiles' fixed work: see
/// [`shard_efficiency`].
pub const SHARD_TILE_COLUMNS: f64 = 128.0;

/// Fraction of the expert kernels' ceiling their products reach on a GPU that holds `width`
/// columns of each expert's FFN: `width / (width + 128)`. Tensor parallelism slices each expert
/// (gate and up by columns, down by rows), so at TP8 a shard is a few 128-wide tiles: the down
/// product's reduction is only that long, and each tile pays its prologue and epilogue against
/// a short loop, as if it did one more tile of work. Kernel timings of vLLM's three expert
/// kernels on Hopper fall so from TP1 to TP8 at 1,024 to 8,192 tokens: Marlin's MXFP4 products
/// for gpt-oss-120b 0.77 to 0.81 times TP1's rate at TP8, triton_kernels' 0.81 to 0.82, the
/// Triton fused-MoE kernel's BF16 Qwen3-235B shard of 192 columns 0.78 times that of 384
/// (CALIBRATION.md, "Experts lose to their tiles as TP slices them"). A ceiling (`moe_eff`,
/// `TritonMoeKernel::ceiling`) is the rate of a shard far wider than a tile.
pub fn shard_efficiency(width: f64) -> f64 {
    if width <= 0.0 { 1.0 } else { width / (width + SHARD_TILE_COLUMNS) }
}

/// Kernels the layer that `t_layer_us` was fitted on launches beside its experts (gpt-oss's:
/// norms, the QKV and output products, GQA attention, the router and its top-k), and those of
/// an MLA layer with a shared expert (DeepSeek-V3's: the fused down-projection of queries and
/// latent, their norms, the queries' up-projection, the absorbed latent products either side
/// of the latent cache's attention, the output product, the router with its grouped top-k, the
/// shared expert), as `scripts/sim/mla_probe.py` counts them on an H200 with the same torch ops
/// for both (`testdata/kernel-probe/h200-mla.json`): see [`layer_floor_factor`].
pub const GQA_LAYER_KERNELS: f64 = 15.0;
/// See [`GQA_LAYER_KERNELS`].
pub const MLA_LAYER_KERNELS: f64 = 35.0;

/// The factor by which a layer's floor of small kernels (`t_layer_us`, and the launches of an
/// eager step, `eager_layer_us`) exceeds that of the layer it was fitted on: its kernels over
/// that layer's. An MLA layer launches 35 / 15 = 2.33 times as many; its kernels back to back
/// took 2.6 to 2.9 times as long at one to sixteen sequences (3.1 to 3.6 with block-scaled
/// products), so the count is the smaller of the two measures. Other layers keep the fitted floor.
pub fn layer_floor_factor(mla: bool) -> f64 {
    if mla { MLA_LAYER_KERNELS / GQA_LAYER_KERNELS } else { 1.0 }
}

/// Fraction of a format's peak reached by a matrix product of `rows` rows: the kernel's
/// `ceiling` for tall products, falling as `rows / (rows + m_half)` for short ones (tiles
/// padded with empty rows, too few tiles to fill the device).
pub fn gemm_efficiency(ceiling: f64, m_half: f64, rows: f64) -> f64 {
    if rows <= 0.0 {
        return 0.0;
    }
    ceiling * rows / (rows + m_half.max(0.0))
}

/// A matrix product's shape as the cost model sees it: FLOPs per row of activations and the
/// weight bytes it streams once per step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GemmShape {
    pub flops_per_row: f64,
    pub weight_bytes: f64,
}

/// The device a product runs on: its peak for the product's format, the efficiency ceiling and
/// half-efficiency row count of its kernels, and the bandwidth weights stream at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmDevice {
    pub peak_flops: f64,
    pub ceiling: f64,
    pub m_half: f64,
    pub bandwidth: f64,
}

/// Seconds of a product over `rows` rows: the larger of its FLOPs at the row-dependent
/// efficiency and its weight bytes over the bandwidth (weights are read once per step).
pub fn gemm_seconds(shape: GemmShape, rows: f64, dev: GemmDevice) -> f64 {
    if rows <= 0.0 {
        return 0.0;
    }
    let compute = shape.flops_per_row * rows / (dev.peak_flops * gemm_efficiency(dev.ceiling, dev.m_half, rows));
    let memory = shape.weight_bytes / dev.bandwidth;
    compute.max(memory)
}

/// Expected distinct experts touched when `tokens` tokens each pick `top_k` of `experts`
/// (uniform routing): `E · (1 − (1 − k/E)^N)`.
pub fn expected_experts(experts: f64, top_k: f64, tokens: f64) -> f64 {
    if experts <= 0.0 || tokens <= 0.0 {
        return 0.0;
    }
    experts * (1.0 - (1.0 - top_k / experts).powf(tokens))
}

/// How a MoE layer's routed experts are spread over the `gpus` GPUs that share them: slices of
/// every expert on each (tensor parallel), or whole experts, `ceil(experts / gpus)` on the
/// busiest (expert parallel).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpertSpread {
    pub gpus: f64,
    pub whole: bool,
}

impl ExpertSpread {
    /// Every expert sliced over `gpus` GPUs.
    pub fn sliced(gpus: f64) -> Self {
        ExpertSpread { gpus, whole: false }
    }

    /// Columns of an expert `width` columns wide that one GPU holds: all of them where experts
    /// stay whole, else its slice.
    pub fn shard_columns(&self, width: f64) -> f64 {
        if self.whole { width } else { width / self.gpus.max(1.0) }
    }
}

/// Expected touched experts on the busiest of `gpus` GPUs that hold `per_gpu` whole experts
/// each, when every expert is touched with probability `p` (independently, as uniform routing
/// nearly makes them): the mean of the largest of `gpus` draws of Binomial(`per_gpu`, `p`),
/// `Σ_m (1 − F(m)^gpus)`. One token routed to 8 of 128 experts over two GPUs touches 4 on
/// each on average but 5.1 on the busier one; a step waits for that one.
pub fn busiest_gpu_experts(per_gpu: f64, p: f64, gpus: f64) -> f64 {
    let n = per_gpu.round().max(0.0) as u32;
    let p = p.clamp(0.0, 1.0);
    if gpus <= 1.0 || p == 0.0 || p == 1.0 || n == 0 {
        return f64::from(n) * p;
    }
    // The probabilities in logs: (1 - p)^n underflows for many experts touched almost surely.
    let odds = (p / (1.0 - p)).ln();
    let (mut ln_pmf, mut cdf, mut expected) = (f64::from(n) * (1.0 - p).ln(), 0.0, 0.0);
    for m in 0..n {
        cdf += ln_pmf.exp();
        expected += 1.0 - cdf.min(1.0).powf(gpus);
        ln_pmf += (f64::from(n - m) / f64::from(m + 1)).ln() + odds;
    }
    expected
}

/// Seconds of one MoE layer's routed experts on one GPU. `tokens` tokens each use `top_k` of
/// `experts` experts, which `spread` shares over its GPUs: each holds 1/gpus of the weights
/// and does 1/gpus of the work, and with whole experts (expert parallel) the step waits for
/// the GPU whose experts the batch touches most ([`busiest_gpu_experts`]). Each touched
/// expert's weights are read once; its product has `tokens · top_k / touched` rows.
pub fn experts_seconds(
    expert: GemmShape,
    experts: f64,
    top_k: f64,
    tokens: f64,
    spread: ExpertSpread,
    dev: GemmDevice,
) -> f64 {
    let touched = expected_experts(experts, top_k, tokens);
    if touched <= 0.0 {
        return 0.0;
    }
    let rows_per_expert = tokens * top_k / touched;
    let shards = spread.gpus;
    let read = if spread.whole && shards > 1.0 {
        busiest_gpu_experts((experts / shards).ceil(), touched / experts, shards) * expert.weight_bytes
    } else {
        expert.weight_bytes * touched / shards
    };
    // All touched experts' rows together, each expert's product as tall as its own rows.
    let compute = expert.flops_per_row / shards * tokens * top_k
        / (dev.peak_flops * gemm_efficiency(dev.ceiling, dev.m_half, rows_per_expert));
    compute.max(read / dev.bandwidth)
}

/// Seconds of attention over a step, from its three streams, each at the rate the kernels
/// reach on its unit: the query-key FLOPs on the tensor cores, the softmax's exponentials (one
/// a score) on the special function units, the KV cache's bytes over the memory. The kernels
/// pipeline the bytes under the compute, so the longer binds; of the two compute streams the
/// longer binds too, plus the share `exposed` of the shorter that the kernel does not hide
/// (`StackProfile::attn_exp_exposed`: none where FlashAttention 4 overlaps them on Blackwell,
/// whose exponentials bind below a head width of 128; most on Hopper, where FlashAttention 3's
/// rates at widths 64 to 256 add the two).
pub fn attention_seconds(tensor_s: f64, exp_s: f64, bytes_s: f64, exposed: f64) -> f64 {
    (tensor_s.max(exp_s) + exposed * tensor_s.min(exp_s)).max(bytes_s)
}

/// Seconds of one linear-attention kernel over a step (the chunked prefill, or the recurrent
/// decode): the longer of its FLOPs at the attention kernels' rate and its bytes over the
/// bandwidth. The decode reads and writes each sequence's state for a few FLOPs a value, so
/// its bytes bind; the chunked prefill does C·(6·dk + 4·dv) FLOPs a token and head for one
/// state a chunk, so its FLOPs do once the chunks are long.
pub fn recurrent_seconds(tensor_s: f64, bytes_s: f64) -> f64 {
    tensor_s.max(bytes_s)
}

/// How much longer a network hop of NCCL's tree takes than one of its ring: the ratio of the
/// per-hop network latencies in NCCL's own tuning model for small messages (LL protocol:
/// 5.0 µs for a tree hop, 2.7 µs for a ring step).
pub const TREE_HOP: f64 = 5.0 / 2.7;

/// Seconds of one all-reduce of `bytes` over `ranks` ranks, as NCCL runs it: a fixed part
/// (launch, synchronisation) plus the cheaper of two algorithms. A ring takes `2 (n − 1)`
/// message steps of `step_s` each and moves `2 (n − 1) / n` of the bytes over the link; where
/// steps cost (`step_s` > 0: a network, PCIe between cards) a binary tree takes `2 ⌈log2 n⌉`
/// hops of [`TREE_HOP`] steps each and moves the bytes twice, so that small messages over many
/// nodes go by the tree (8 nodes: 6 hops against 14 steps) and large ones by the ring. Over a
/// one-shot link (`step_s` 0: NVLink, Infinity Fabric) the ring's steps cost nothing beyond the
/// fixed part. Nothing for one rank.
pub fn allreduce_seconds(ranks: f64, bytes: f64, fixed_s: f64, step_s: f64, bandwidth: f64) -> f64 {
    if ranks <= 1.0 {
        return 0.0;
    }
    let ring = 2.0 * (ranks - 1.0) * step_s + 2.0 * (ranks - 1.0) / ranks * bytes / bandwidth;
    let tree = if step_s > 0.0 {
        2.0 * ranks.log2().ceil() * TREE_HOP * step_s + 2.0 * bytes / bandwidth
    } else {
        f64::INFINITY
    };
    fixed_s + ring.min(tree)
}

/// What a link charges a collective: a fixed part (launch, synchronisation), a network latency
/// per message step (0 within a node) and a bandwidth, bytes a second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkCost {
    pub fixed_s: f64,
    pub step_s: f64,
    pub bandwidth: f64,
}

impl LinkCost {
    /// The link as a hardware preset states it.
    pub fn of(link: &crate::hardware::Link) -> Self {
        LinkCost {
            fixed_s: link.allreduce_latency_us * 1e-6,
            step_s: link.step_latency_us * 1e-6,
            bandwidth: link.bandwidth_gbs * 1e9,
        }
    }

    /// The link as `st` prices it: a fitted step latency, fixed part and rate (`ar-step-us`,
    /// `ar-fixed-us`, `ar-gbs`) replace the link's where its message steps cost a latency of
    /// their own (a network, PCIe); NVLink and Infinity Fabric keep theirs.
    pub fn profiled(link: &crate::hardware::Link, st: &crate::profile::StackProfile) -> Self {
        let c = LinkCost::of(link);
        if !c.has_message_steps() {
            return c;
        }
        LinkCost {
            step_s: st.ar_step_us.map_or(c.step_s, |us| us * 1e-6),
            fixed_s: st.ar_fixed_us.map_or(c.fixed_s, |us| us * 1e-6),
            bandwidth: st.ar_gbs.map_or(c.bandwidth, |gbs| gbs * 1e9),
        }
    }

    /// Whether the link's message steps cost a latency of their own (a network, PCIe between
    /// cards); NVLink and Infinity Fabric, whose all-reduce is one shot, charge only the fixed part.
    pub fn has_message_steps(&self) -> bool {
        self.step_s > 0.0
    }

    /// Seconds of one all-reduce of `bytes` over `ranks` ranks on this link ([`allreduce_seconds`]).
    pub fn allreduce_seconds(&self, ranks: f64, bytes: f64) -> f64 {
        allreduce_seconds(ranks, bytes, self.fixed_s, self.step_s, self.bandwidth)
    }

    /// Seconds of one all-gather over `ranks` ranks that leaves `bytes` on each, every rank
    /// giving an equal share, as NCCL runs it: the fixed part, then a ring of `n − 1` message
    /// steps in which each rank receives the `(n − 1) / n` of the bytes it lacks (NCCL gathers
    /// by the ring alone). Nothing for one rank.
    pub fn allgather_seconds(&self, ranks: f64, bytes: f64) -> f64 {
        if ranks <= 1.0 {
            return 0.0;
        }
        self.fixed_s + (ranks - 1.0) * self.step_s + (ranks - 1.0) / ranks * bytes / self.bandwidth
    }
}

/// Σ_{x=a}^{b} min(x, w): keys seen by queries at positions a..=b (1-based), w = 0 for no cap.
pub fn pair_sum(a: u64, b: u64, w: u64) -> f64 {
    if b < a {
        return 0.0;
    }
    let tri = |lo: u64, hi: u64| (lo + hi) as f64 * (hi - lo + 1) as f64 / 2.0;
    if w == 0 || b <= w {
        return tri(a, b);
    }
    let below = if a <= w { tri(a, w) } else { 0.0 };
    let above_from = a.max(w + 1);
    below + (b - above_from + 1) as f64 * w as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const H100_BF16: GemmDevice = GemmDevice { peak_flops: 989e12, ceiling: 0.7, m_half: 32.0, bandwidth: 2.85e12 };

    #[test]
    fn pair_sums_match_brute_force() {
        for (a, b, w) in [(1, 10, 0), (1, 10, 4), (5, 9, 3), (3, 3, 8), (100, 228, 128), (7, 6, 2)] {
            let brute: u64 = (a..=b).map(|x: u64| if w == 0 { x } else { x.min(w) }).sum();
            assert_eq!(pair_sum(a, b, w), brute as f64, "{a}..{b} w{w}");
        }
    }

    #[test]
    fn a_short_product_is_bandwidth_bound_and_a_tall_one_compute_bound() {
        // One 4096 x 4096 BF16 projection.
        let w = GemmShape { flops_per_row: 2.0 * 4096.0 * 4096.0, weight_bytes: 2.0 * 4096.0 * 4096.0 };
        let one = gemm_seconds(w, 1.0, H100_BF16);
        assert_eq!(one, w.weight_bytes / H100_BF16.bandwidth);
        let tall = gemm_seconds(w, 8192.0, H100_BF16);
        let ideal = w.flops_per_row * 8192.0 / (989e12 * 0.7);
        assert!(tall > ideal && tall < 1.01 * ideal, "{tall} {ideal}");
        assert_eq!(gemm_seconds(w, 0.0, H100_BF16), 0.0);
    }

    #[test]
    fn efficiency_is_half_the_ceiling_at_m_half() {
        assert_eq!(gemm_efficiency(0.8, 64.0, 64.0), 0.4);
        assert_eq!(gemm_efficiency(0.8, 64.0, 0.0), 0.0);
        assert!(gemm_efficiency(0.8, 64.0, 1e9) > 0.7999);
    }

    #[test]
    fn a_shard_one_tile_wide_reaches_half_the_ceiling() {
        assert_eq!(shard_efficiency(SHARD_TILE_COLUMNS), 0.5);
        // gpt-oss-120b's 2,880-column experts: whole, and sliced over 8 GPUs.
        assert!((shard_efficiency(2880.0) - 2880.0 / 3008.0).abs() < 1e-12);
        assert!((shard_efficiency(360.0) / shard_efficiency(2880.0) - 0.771).abs() < 0.001);
        assert_eq!(shard_efficiency(0.0), 1.0);
    }

    #[test]
    fn expert_touch_grows_with_tokens_until_every_expert_is_read() {
        assert_eq!(expected_experts(128.0, 4.0, 1.0), 4.0);
        assert!(expected_experts(128.0, 4.0, 1024.0) > 127.9);
        assert_eq!(expected_experts(0.0, 4.0, 10.0), 0.0);
        let e = GemmShape { flops_per_row: 2.0 * 24.9e6, weight_bytes: 13.2e6 };
        let one = experts_seconds(e, 128.0, 4.0, 1.0, ExpertSpread::sliced(1.0), H100_BF16);
        assert!((one - 4.0 * 13.2e6 / H100_BF16.bandwidth).abs() < 1e-12, "{one}");
        let two_gpus = experts_seconds(e, 128.0, 4.0, 1.0, ExpertSpread::sliced(2.0), H100_BF16);
        assert!((two_gpus - one / 2.0).abs() < 1e-12);
    }

    #[test]
    fn whole_experts_wait_for_the_busiest_gpu() {
        // One token to 8 of 128 experts, 64 on each of two GPUs: 4 touched on each on average,
        // 5.1 on the busier (the hypergeometric's exact answer is 5.07).
        let busiest = busiest_gpu_experts(64.0, 1.0 / 16.0, 2.0);
        assert!((busiest - 5.1).abs() < 0.05, "{busiest}");
        assert_eq!(busiest_gpu_experts(64.0, 1.0 / 16.0, 1.0), 4.0);
        assert_eq!(busiest_gpu_experts(64.0, 1.0, 8.0), 64.0);
        // Slices spread the same reads evenly; whole experts read the busiest GPU's.
        let e = GemmShape { flops_per_row: 2.0 * 24.9e6, weight_bytes: 13.2e6 };
        let sliced = experts_seconds(e, 128.0, 8.0, 1.0, ExpertSpread::sliced(2.0), H100_BF16);
        let whole = experts_seconds(e, 128.0, 8.0, 1.0, ExpertSpread { gpus: 2.0, whole: true }, H100_BF16);
        assert!((whole / sliced - busiest / 4.0).abs() < 1e-9, "{whole} {sliced}");
        // Once every expert is touched there is nothing to wait for.
        let many = |whole| experts_seconds(e, 128.0, 8.0, 4096.0, ExpertSpread { gpus: 2.0, whole }, H100_BF16);
        assert!((many(true) / many(false) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn a_network_allreduce_takes_the_cheaper_of_ring_and_tree() {
        // The latency of one all-reduce: one of no bytes.
        let allreduce_latency_s =
            |ranks: f64, fixed_s: f64, step_s: f64| allreduce_seconds(ranks, 0.0, fixed_s, step_s, 1.0);
        assert_eq!(allreduce_latency_s(1.0, 20e-6, 18e-6), 0.0);
        // Four nodes: the ring's 6 steps (108 µs) beat the tree's 4 slower hops (133 µs).
        assert!((allreduce_latency_s(4.0, 20e-6, 18e-6) - 128e-6).abs() < 1e-12);
        // Eight: the tree's 6 hops (200 µs) beat the ring's 14 steps (252 µs).
        let tree8 = 20e-6 + 6.0 * TREE_HOP * 18e-6;
        assert!((allreduce_latency_s(8.0, 20e-6, 18e-6) - tree8).abs() < 1e-12);
        assert!(tree8 < 20e-6 + 14.0 * 18e-6);
        // Large messages go by the ring, which moves fewer bytes: 8 nodes, 100 MB at 22 GB/s.
        let ring = 20e-6 + 14.0 * 18e-6 + 1.75 * 1e8 / 22e9;
        assert!((allreduce_seconds(8.0, 1e8, 20e-6, 18e-6, 22e9) - ring).abs() < 1e-12);
        // Within a node only the ring counts, and its steps cost nothing beyond the fixed part.
        assert_eq!(allreduce_seconds(1.0, 1e6, 1e-5, 0.0, 1e9), 0.0);
        assert!((allreduce_seconds(2.0, 1e6, 1e-5, 0.0, 1e9) - (1e-5 + 1e-3)).abs() < 1e-12);
        assert!((allreduce_seconds(8.0, 0.0, 1e-5, 0.0, 1e9) - 1e-5).abs() < 1e-15);
    }

    #[test]
    fn a_logits_gather_moves_what_each_rank_lacks_by_the_ring() {
        let spark = LinkCost { fixed_s: 87e-6, step_s: 7e-6, bandwidth: 11e9 };
        assert_eq!(spark.allgather_seconds(1.0, 1e8), 0.0);
        // gpt-oss-120b's 100 decodes over four Sparks: 100 rows of 201,088 BF16 logits (40.2
        // MB), of which each node lacks three quarters: 2.74 ms on the wire, 2.85 in all.
        let bytes = 100.0 * 201_088.0 * 2.0;
        let t = spark.allgather_seconds(4.0, bytes);
        assert!((t - (87e-6 + 3.0 * 7e-6 + 0.75 * bytes / 11e9)).abs() < 1e-12, "{t}");
        assert!((t - 2.85e-3).abs() < 0.01e-3, "{t}");
    }

    fn device() -> impl Strategy<Value = GemmDevice> {
        (1e12..1e16f64, 0.02..0.95f64, 1.0..1024f64, 1e11..1e13f64).prop_map(|(p, c, m, b)| GemmDevice {
            peak_flops: p,
            ceiling: c,
            m_half: m,
            bandwidth: b,
        })
    }

    proptest! {
        #[test]
        fn a_wider_shard_is_never_slower_and_never_past_the_ceiling(w in 1.0f64..1e6, extra in 0.0f64..1e5) {
            let (narrow, wide) = (shard_efficiency(w), shard_efficiency(w + extra));
            prop_assert!(narrow > 0.0 && narrow <= wide && wide < 1.0);
        }

        #[test]
        fn a_product_never_beats_its_bytes_over_the_bandwidth(
            f in 1e3..1e12f64, w in 1e3..1e12f64, rows in 1.0..1e5f64, dev in device()
        ) {
            let t = gemm_seconds(GemmShape { flops_per_row: f, weight_bytes: w }, rows, dev);
            prop_assert!(t >= w / dev.bandwidth);
            prop_assert!(t >= f * rows / (dev.peak_flops * dev.ceiling) * 0.999_999);
        }

        #[test]
        fn more_rows_never_take_less_time(
            f in 1e3..1e12f64, w in 1e3..1e12f64, rows in 1.0..1e5f64, extra in 0.0..1e5f64, dev in device()
        ) {
            let s = GemmShape { flops_per_row: f, weight_bytes: w };
            prop_assert!(gemm_seconds(s, rows + extra, dev) >= gemm_seconds(s, rows, dev));
        }

        #[test]
        fn more_tokens_never_make_experts_cheaper(
            tokens in 1.0..1e5f64, extra in 0.0..1e4f64, experts in 2u32..512, k in 1u32..16, shards in 1u32..16,
            whole in any::<bool>(), dev in device()
        ) {
            let k = f64::from(k.min(experts));
            let e = GemmShape { flops_per_row: 5e7, weight_bytes: 1.3e7 };
            let spread = ExpertSpread { gpus: f64::from(shards), whole };
            let (a, b) = (
                experts_seconds(e, f64::from(experts), k, tokens, spread, dev),
                experts_seconds(e, f64::from(experts), k, tokens + extra, spread, dev),
            );
            prop_assert!(b >= a * (1.0 - 1e-9), "{a} {b}");
            // Whole experts never take less than slices of the same experts.
            let sliced = experts_seconds(e, f64::from(experts), k, tokens, ExpertSpread::sliced(f64::from(shards)), dev);
            prop_assert!(!whole || a >= sliced * (1.0 - 1e-9), "{a} {sliced}");
            let touched = expected_experts(f64::from(experts), k, tokens);
            prop_assert!(touched <= f64::from(experts) + 1e-9 && touched >= k.min(tokens * k) - 1e-9);
        }

        #[test]
        fn the_busiest_gpu_holds_at_least_the_mean_and_at_most_its_experts(
            per_gpu in 1u32..300, p in 0.0..1.0f64, gpus in 1u32..64, more in 0.0..0.5f64
        ) {
            let (n, g) = (f64::from(per_gpu), f64::from(gpus));
            let busiest = busiest_gpu_experts(n, p, g);
            prop_assert!(busiest >= n * p * (1.0 - 1e-9) && busiest <= n * (1.0 + 1e-9), "{busiest}");
            prop_assert!(busiest_gpu_experts(n, p, g + 1.0) >= busiest * (1.0 - 1e-9));
            prop_assert!(busiest_gpu_experts(n, (p + more).min(1.0), g) >= busiest * (1.0 - 1e-9));
        }

        #[test]
        fn an_allreduce_grows_with_bytes_and_ranks(
            ranks in 2u32..64, bytes in 0.0..1e9f64, more in 0.0..1e9f64, lat in 0.0..1e-3f64,
            step in prop_oneof![Just(0.0), 1e-7..1e-4f64], bw in 1e8..1e12f64
        ) {
            let n = f64::from(ranks);
            let ar = |n: f64, bytes: f64| allreduce_seconds(n, bytes, lat, step, bw);
            prop_assert!(ar(n, bytes + more) >= ar(n, bytes));
            prop_assert!(ar(n + 1.0, bytes) >= ar(n, bytes));
            let latency = |n: f64| allreduce_seconds(n, 0.0, lat, 1e-5, 1.0);
            prop_assert!(latency(n + 1.0) >= latency(n));
            // Never slower than the ring alone, nor faster than the bytes over the link.
            let ring_alone = lat + 2.0 * (n - 1.0) * step + 2.0 * (n - 1.0) / n * bytes / bw;
            prop_assert!(ar(n, bytes) <= ring_alone * (1.0 + 1e-12));
            prop_assert!(ar(n, bytes) >= lat + bytes / bw * (1.0 - 1e-12));
        }

        /// An all-gather grows with its bytes and ranks, and where the link's steps cost nothing
        /// it moves half of what a ring all-reduce of the same bytes moves (an all-reduce is a
        /// reduce-scatter and an all-gather).
        #[test]
        fn an_allgather_grows_with_bytes_and_ranks_and_is_half_a_ring_allreduce(
            ranks in 2u32..64, bytes in 0.0..1e9f64, more in 0.0..1e9f64, fixed in 0.0..1e-3f64,
            step in prop_oneof![Just(0.0), 1e-7..1e-4f64], bw in 1e8..1e12f64
        ) {
            let n = f64::from(ranks);
            let link = LinkCost { fixed_s: fixed, step_s: step, bandwidth: bw };
            prop_assert!(link.allgather_seconds(n, bytes + more) >= link.allgather_seconds(n, bytes));
            prop_assert!(link.allgather_seconds(n + 1.0, bytes) >= link.allgather_seconds(n, bytes));
            prop_assert!(link.allgather_seconds(n, bytes) >= fixed + bytes / (2.0 * bw) * (1.0 - 1e-12));
            let one_shot = LinkCost { step_s: 0.0, ..link };
            let wire = |t: f64| t - fixed;
            let (gather, reduce) = (one_shot.allgather_seconds(n, bytes), one_shot.allreduce_seconds(n, bytes));
            prop_assert!((wire(gather) - wire(reduce) / 2.0).abs() <= 1e-12 * wire(reduce).max(1e-9));
        }
    }
}
