//! The step-time model: how long one engine step takes for a given batch.
//!
//! A roofline over the batch (weight, expert and KV bytes against bandwidth; linear, lm_head and
//! attention FLOPs against peak throughput) plus the overheads a real stack adds: a fixed cost
//! per step, per layer and per sequence, two tensor-parallel all-reduces per layer, hand-offs
//! between pipeline stages, a per-MoE-layer routing cost and an optional no-graph penalty.
//! Everything is per tensor-parallel rank; the constants come from a [`crate::profile::StackProfile`].

use crate::setup::SimSetup;

/// The batch of one step, as the cost model sees it. The scheduler fills it with
/// [`BatchStats::add_sequence`] while it builds the step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BatchStats {
    pub num_seqs: u32,
    pub prefill_tokens: u64,
    pub decode_tokens: u64,
    /// Rows that produce logits (decodes and prompts finishing this step).
    pub sampled: u32,
    /// Context tokens read by full-attention layers, summed over sequences.
    pub kv_tokens_full: u64,
    /// Context tokens read by sliding-window layers (each capped at the window).
    pub kv_tokens_window: u64,
    /// Query-key pairs of prefill tokens, full and windowed layers.
    pub pairs_prefill_full: f64,
    pub pairs_prefill_window: f64,
    /// Query-key pairs of decode tokens, full and windowed layers.
    pub pairs_decode_full: f64,
    pub pairs_decode_window: f64,
    /// The longest context in the batch.
    pub max_context: u32,
}

impl BatchStats {
    /// Adds a sequence that computes `new` tokens after `context` cached ones. `window` is the
    /// sliding window (0: none); `prefill` tells the phase; `samples` whether it yields a token.
    pub fn add_sequence(&mut self, context: u32, new: u32, window: u32, prefill: bool, samples: bool) {
        let end = u64::from(context) + u64::from(new);
        let full = pair_sum(u64::from(context) + 1, end, 0);
        let win = if window == 0 { 0.0 } else { pair_sum(u64::from(context) + 1, end, u64::from(window)) };
        self.num_seqs += 1;
        if prefill {
            self.prefill_tokens += u64::from(new);
            self.pairs_prefill_full += full;
            self.pairs_prefill_window += win;
        } else {
            self.decode_tokens += u64::from(new);
            self.pairs_decode_full += full;
            self.pairs_decode_window += win;
        }
        self.sampled += u32::from(samples);
        self.kv_tokens_full += end;
        self.kv_tokens_window += if window == 0 { 0 } else { end.min(u64::from(window)) };
        self.max_context = self.max_context.max(u32::try_from(end).unwrap_or(u32::MAX));
    }

    /// Tokens computed this step.
    pub fn tokens(&self) -> u64 {
        self.prefill_tokens + self.decode_tokens
    }
}

/// Σ_{x=a}^{b} min(x, w): keys seen by queries at positions a..=b (1-based), w = 0 for no cap.
fn pair_sum(a: u64, b: u64, w: u64) -> f64 {
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

/// Expected distinct experts touched when `tokens` tokens each pick `top_k` of `experts`.
pub fn expected_experts(experts: f64, top_k: f64, tokens: f64) -> f64 {
    if experts <= 0.0 || tokens <= 0.0 {
        return 0.0;
    }
    experts * (1.0 - (1.0 - top_k / experts).powf(tokens))
}

/// A step-time model. The engine calls it once per step.
pub trait StepCost: Send + Sync {
    /// Seconds the step takes.
    fn step_seconds(&self, batch: &BatchStats) -> f64;
}

/// A trivial model: a fixed cost per step plus a cost per token and per sequence.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearCost {
    pub per_step_s: f64,
    pub per_token_s: f64,
    pub per_seq_s: f64,
}

impl StepCost for LinearCost {
    fn step_seconds(&self, b: &BatchStats) -> f64 {
        self.per_step_s + self.per_token_s * b.tokens() as f64 + self.per_seq_s * f64::from(b.num_seqs)
    }
}

/// Where a step's time goes, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepBreakdown {
    /// T0 + per-layer + per-sequence overheads.
    pub fixed: f64,
    /// Bytes over bandwidth (all stages).
    pub memory: f64,
    /// FLOPs over throughput (all stages).
    pub compute: f64,
    /// The roofline: per stage the larger of memory and compute, summed over stages.
    pub roofline: f64,
    pub allreduce: f64,
    pub pipeline: f64,
    pub moe: f64,
    pub eager: f64,
    pub total: f64,
}

/// The step model of this module (roofline plus stack overheads) with every per-step constant
/// precomputed.
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    layers: f64,
    moe_layers: f64,
    full_layers: f64,
    sliding_layers: f64,
    hidden: f64,
    experts: f64,
    top_k: f64,
    /// Bytes read every step regardless of routing, per rank (all layers).
    static_bytes: f64,
    /// One routed expert in one layer, per rank.
    expert_bytes: f64,
    lm_head_bytes: f64,
    kv_bytes_token_layer: f64,
    dense_flops_per_token: f64,
    expert_flops_per_token: f64,
    lm_flops_per_row: f64,
    attn_flops_per_pair_layer: f64,
    bandwidth: f64,
    linear_prefill_rate: f64,
    linear_decode_rate: f64,
    expert_rate: f64,
    attn_prefill_rate: f64,
    attn_decode_rate: f64,
    tp: f64,
    pp: f64,
    ar_alpha_s: f64,
    ar_beta: f64,
    pp_alpha_s: f64,
    pp_beta: f64,
    t0_s: f64,
    t_layer_s: f64,
    t_seq_s: f64,
    t_moe_s: f64,
    eager_s: f64,
    graph_max_tokens: u64,
    graph_max_ctx: u32,
}

impl CostModel {
    /// Precomputes the model for a resolved setup.
    pub fn new(setup: &SimSetup) -> Self {
        use crate::precision::ComputePrecision;
        let m = &setup.model;
        let hw = &setup.hardware;
        let o = &setup.options;
        let st = &setup.stack;
        let tp = f64::from(o.tp);
        let l = f64::from(m.layers);
        let moe_layers = f64::from(m.moe_layers());
        let dense_layers = f64::from(m.dense_ffn_layers());
        let (experts, top_k) = m.moe.as_ref().map_or((0.0, 0.0), |x| (f64::from(x.experts), f64::from(x.top_k)));
        let attn_b = m.attention_precision().bytes_per_param();
        let w_b = m.precision.bytes_per_param();
        let static_params_attn = l * m.attention_params();
        let static_params_ffn = dense_layers * m.dense_ffn_params() + moe_layers * m.moe_always_params();
        let static_bytes = (static_params_attn * attn_b + static_params_ffn * w_b) / tp;
        let expert_bytes = m.expert_params() * w_b / tp;
        let lm_head_bytes = m.embedding_params() * 2.0 / tp;
        let dense_flops_per_token = 2.0 * (static_params_attn + static_params_ffn) / tp;
        let expert_flops_per_token = 2.0 * moe_layers * top_k * m.expert_params() / tp;
        let lm_flops_per_row = 2.0 * m.embedding_params() / tp;
        let heads_rank = f64::from(m.heads) / tp;
        let attn_flops_per_pair_layer = 4.0 * heads_rank * f64::from(m.head_dim);

        let peaks = &hw.peak_tflops;
        let lin_p = m.precision.compute_on(peaks);
        let tera = 1e12;
        let peak_lin = peaks.get(lin_p) * tera;
        let peak_bf16 = peaks.get(ComputePrecision::Bf16) * tera;
        let ar = o.allreduce_link(hw);
        let pl = o.pipeline_link(hw);
        let (sliding, _) = m.sliding_layers();
        CostModel {
            layers: l,
            moe_layers,
            full_layers: f64::from(m.full_attention_layers()),
            sliding_layers: f64::from(sliding),
            hidden: f64::from(m.hidden),
            experts,
            top_k,
            static_bytes,
            expert_bytes,
            lm_head_bytes,
            kv_bytes_token_layer: m.kv_bytes_per_token_layer(o.kv_cache_dtype, o.tp),
            dense_flops_per_token,
            expert_flops_per_token,
            lm_flops_per_row,
            attn_flops_per_pair_layer,
            bandwidth: st.eta_bw * hw.bandwidth_gbs * 1e9,
            linear_prefill_rate: st.eta_f_prefill.get(lin_p) * peak_lin,
            linear_decode_rate: st.eta_f_decode.get(lin_p) * peak_lin,
            expert_rate: st.eta_f_moe.get(lin_p) * peak_lin,
            attn_prefill_rate: st.eta_f_prefill.bf16 * peak_bf16,
            attn_decode_rate: st.eta_f_decode.bf16 * peak_bf16,
            tp,
            pp: f64::from(o.pp),
            ar_alpha_s: st.alpha_ar_us.unwrap_or(ar.allreduce_latency_us) * 1e-6,
            ar_beta: ar.bandwidth_gbs * 1e9,
            pp_alpha_s: pl.allreduce_latency_us * 1e-6,
            pp_beta: pl.bandwidth_gbs * 1e9,
            t0_s: st.t0_ms * 1e-3,
            t_layer_s: st.t_layer_us * 1e-6,
            t_seq_s: st.t_seq_us * 1e-6,
            t_moe_s: st.t_moe_us * 1e-6,
            eager_s: st.eager_ms * 1e-3,
            graph_max_tokens: u64::from(st.graph_max_tokens),
            graph_max_ctx: st.graph_max_ctx,
        }
    }

    /// Expected distinct experts per MoE layer for a step of `tokens` tokens.
    pub fn experts_touched(&self, tokens: u64) -> f64 {
        expected_experts(self.experts, self.top_k, tokens as f64)
    }

    /// The step time split into its terms.
    pub fn breakdown(&self, b: &BatchStats) -> StepBreakdown {
        let n = b.tokens() as f64;
        let fixed = self.t0_s + self.t_layer_s * self.layers + self.t_seq_s * f64::from(b.num_seqs);
        let kv_bytes = self.kv_bytes_token_layer
            * (self.full_layers * b.kv_tokens_full as f64 + self.sliding_layers * b.kv_tokens_window as f64);
        let layer_bytes =
            self.static_bytes + self.experts_touched(b.tokens()) * self.moe_layers * self.expert_bytes + kv_bytes;
        let mem_layers = layer_bytes / self.bandwidth;
        let mem_lm = self.lm_head_bytes / self.bandwidth;

        let pf = b.prefill_tokens as f64;
        let dc = b.decode_tokens as f64;
        let attn = self.attn_flops_per_pair_layer;
        let cmp_layers = self.dense_flops_per_token * (pf / self.linear_prefill_rate + dc / self.linear_decode_rate)
            + self.expert_flops_per_token * n / self.expert_rate
            + attn * (self.full_layers * b.pairs_prefill_full + self.sliding_layers * b.pairs_prefill_window)
                / self.attn_prefill_rate
            + attn * (self.full_layers * b.pairs_decode_full + self.sliding_layers * b.pairs_decode_window)
                / self.attn_decode_rate;
        let cmp_lm = self.lm_flops_per_row * f64::from(b.sampled.max(1)) / self.attn_decode_rate;

        let pp = self.pp;
        let stage = (mem_layers / pp).max(cmp_layers / pp);
        let last = (mem_layers / pp + mem_lm).max(cmp_layers / pp + cmp_lm);
        let roofline = (pp - 1.0) * stage + last;

        let act_bytes = n * self.hidden * 2.0;
        let allreduce = if self.tp > 1.0 {
            2.0 * self.layers * (self.ar_alpha_s + 2.0 * (self.tp - 1.0) / self.tp * act_bytes / self.ar_beta)
        } else {
            0.0
        };
        let pipeline = (pp - 1.0) * (self.pp_alpha_s + act_bytes / self.pp_beta);
        let moe = self.moe_layers * self.t_moe_s;
        let no_graph =
            b.tokens() > self.graph_max_tokens || (self.graph_max_ctx > 0 && b.max_context > self.graph_max_ctx);
        let eager = if no_graph { self.eager_s } else { 0.0 };
        let total = fixed + roofline + allreduce + pipeline + moe + eager;
        StepBreakdown {
            fixed,
            memory: mem_layers + mem_lm,
            compute: cmp_layers + cmp_lm,
            roofline,
            allreduce,
            pipeline,
            moe,
            eager,
            total,
        }
    }
}

impl StepCost for CostModel {
    fn step_seconds(&self, batch: &BatchStats) -> f64 {
        self.breakdown(batch).total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::Presets;

    fn model(model: &str, hw: &str, pairs: &[(&str, &str)]) -> CostModel {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let s = SimSetup::resolve_with(&Presets::embedded().unwrap(), model, hw, &pairs, None).unwrap();
        CostModel::new(&s)
    }

    fn decode_batch(n: u32, ctx: u32) -> BatchStats {
        let mut b = BatchStats::default();
        for _ in 0..n {
            b.add_sequence(ctx, 1, 0, false, true);
        }
        b
    }

    #[test]
    fn pair_sums_match_brute_force() {
        for (a, b, w) in [(1, 10, 0), (1, 10, 4), (5, 9, 3), (3, 3, 8), (100, 228, 128), (7, 6, 2)] {
            let brute: u64 = (a..=b).map(|x: u64| if w == 0 { x } else { x.min(w) }).sum();
            assert_eq!(pair_sum(a, b, w), brute as f64, "{a}..{b} w{w}");
        }
    }

    #[test]
    fn decode_is_bandwidth_bound_and_prefill_compute_bound() {
        let c = model("Qwen/Qwen3-8B", "h100-sxm", &[]);
        let d = c.breakdown(&decode_batch(1, 100));
        assert!(d.memory > 10.0 * d.compute, "{d:?}");
        // 16.38 GB of weights less the 1.24 GB input embedding (only rows are read), at
        // 0.85 x 3.35 TB/s: about 5.3 ms.
        assert!((d.memory - 15.14e9 / (0.85 * 3.35e12)).abs() < 0.1e-3, "{d:?}");
        let mut p = BatchStats::default();
        p.add_sequence(0, 8192, 0, true, true);
        let pb = c.breakdown(&p);
        assert!(pb.compute > 5.0 * pb.memory, "{pb:?}");
        assert!(pb.total > 10.0 * d.total);
    }

    #[test]
    fn tensor_parallelism_shortens_the_roofline_and_adds_allreduce_time() {
        let one = model("Qwen/Qwen3-8B", "h100-sxm", &[]);
        let two = model("Qwen/Qwen3-8B", "h100-sxm", &[("tp", "2")]);
        let b = decode_batch(8, 500);
        let (b1, b2) = (one.breakdown(&b), two.breakdown(&b));
        assert_eq!(b1.allreduce, 0.0);
        // 2 all-reduces x 36 layers x 15 µs, plus the bytes.
        assert!(b2.allreduce >= 72.0 * 15e-6 && b2.allreduce < 72.0 * 16e-6, "{b2:?}");
        assert!((b2.roofline / b1.roofline - 0.5).abs() < 0.02, "{b1:?} {b2:?}");
        assert!(b2.total < b1.total);
        // Over 200 GbE between Sparks the all-reduce dominates a small model's decode.
        let spark = model("Qwen/Qwen3-0.6B", "dgx-spark", &[("tp", "2"), ("nodes", "2")]);
        let s = spark.breakdown(&decode_batch(1, 100));
        assert!(s.allreduce > s.roofline, "{s:?}");
    }

    #[test]
    fn moe_expert_touch_grows_with_the_batch_until_every_expert_is_read() {
        let c = model("openai/gpt-oss-120b", "h100-sxm", &[]);
        let touched: Vec<f64> = [1, 4, 16, 64, 1024].iter().map(|&n| c.experts_touched(n)).collect();
        assert_eq!(touched[0], 4.0);
        assert!(touched.windows(2).all(|w| w[1] > w[0]), "{touched:?}");
        assert!(touched[4] > 127.9 && touched[4] <= 128.0, "{touched:?}");
        let m1 = c.breakdown(&decode_batch(1, 10)).memory;
        let m64 = c.breakdown(&decode_batch(64, 10)).memory;
        assert!(m64 > 5.0 * m1, "{m1} {m64}");
        let dense = model("Qwen/Qwen3-8B", "h100-sxm", &[]);
        assert_eq!(dense.experts_touched(64), 0.0);
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
        let grown = (long.memory - short.memory) / (32.0 * 30_000.0 * per_token_all_layers);
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
        assert!((p.roofline - a.roofline).abs() / a.roofline < 0.01);
    }

    #[test]
    fn eager_penalty_applies_only_beyond_the_graph_limits() {
        let c = model("Qwen/Qwen3-8B", "h100-sxm", &[("eager-ms", "18"), ("graph-max-ctx", "8192")]);
        assert_eq!(c.breakdown(&decode_batch(4, 100)).eager, 0.0);
        assert!((c.breakdown(&decode_batch(4, 9000)).eager - 0.018).abs() < 1e-12);
        assert!((c.breakdown(&decode_batch(600, 10)).eager - 0.018).abs() < 1e-12);
    }
}
