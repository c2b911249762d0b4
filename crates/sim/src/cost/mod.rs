//! The step-time model: how long one engine step takes for a given batch.
//!
//! A step is a sequence of kernels, each priced by its own physical term ([`terms`]): the
//! dense matrix products (attention projections, dense and shared FFNs) and the lm_head as
//! rooflines whose compute efficiency grows with the step's token count; the routed experts of
//! a mixture of experts as the experts the batch touches, each read once, each product as tall
//! as its share of the tokens; attention as query-key FLOPs or KV-cache reads (bounded by a
//! sliding window, or by sparse attention's top-k, whose indexer scores every cached token);
//! linear-attention and Mamba-2 layers as each decode's recurrent state read and written and
//! the prefill's chunked recurrence; a tensor-parallel all-reduce after the input embedding,
//! each mixer and each FFN at its real message size over the link the deployment uses, and the
//! all-gather of the sampled rows' logits from the ranks' shards of the vocabulary; hand-offs
//! between pipeline stages. On top come the fixed costs a serving stack adds: per step
//! (scheduling, sampling), per layer (the kernels' floor under CUDA graphs, or their launches
//! without), per sequence, and per MoE layer (routing).
//! Everything is per GPU; the constants come from a [`crate::profile::StackProfile`].

mod batch;
mod breakdown;
mod drafter;
mod encoder;
mod mixers;
pub mod quick_reduce;
mod ranks;
pub mod terms;
pub mod tiles;
pub mod tp_allreduce;

pub use batch::BatchStats;
pub use breakdown::StepBreakdown;
use ranks::RankShares;

use crate::options::{CudaGraphMode, CudaGraphSizes};
use crate::setup::SimSetup;
pub use terms::expected_experts;
use terms::{ExpertSpread, GemmDevice, GemmShape, LinkCost, attention_seconds, experts_seconds, gemm_seconds};

/// A step-time model. The engine calls it once per step.
pub trait StepCost: Send + Sync {
    /// Seconds the step takes.
    fn step_seconds(&self, batch: &BatchStats) -> f64;

    /// The step's time split into its terms; a model without terms counts all of it as fixed.
    fn breakdown(&self, batch: &BatchStats) -> StepBreakdown {
        let total = self.step_seconds(batch);
        StepBreakdown { fixed: total, total, ..StepBreakdown::default() }
    }
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

/// Passes over a layer's activations by its small kernels (norms, residual adds, rotary
/// embedding, activation function, quantisation), for when their launches stop showing.
const ELEMENTWISE_PASSES: f64 = 10.0;

/// A sparse-attention indexer on one GPU: FLOPs of scoring one query against one key in one
/// layer, bytes of one cached key in one layer, and the rate its FP8 scores run at.
#[derive(Clone, Copy, Debug, PartialEq)]
struct IndexerCost {
    flops_per_pair: f64,
    key_bytes: f64,
    rate: f64,
}

/// The step model of this module with every per-step constant precomputed.
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    layers: f64,
    /// Tensor-parallel all-reduces a step: one after the input embedding, one after each mixer
    /// and one after each FFN (`ModelShape::allreduces`).
    allreduces: f64,
    moe_layers: f64,
    full_layers: f64,
    sliding_layers: f64,
    hidden: f64,
    experts: f64,
    top_k: f64,
    /// The GPUs that share one layer's routed experts, and whether each holds whole experts.
    expert_spread: ExpertSpread,
    /// Data-parallel attention ranks: each runs its share of the batch's sequences.
    dp: f64,
    /// Attention projections of all layers, per GPU.
    attn_proj: GemmShape,
    attn_dev: GemmDevice,
    /// Dense FFNs, shared experts and routers of all layers, per GPU.
    ffn: GemmShape,
    ffn_dev: GemmDevice,
    /// One routed expert of one layer, whole (the shards split it).
    expert: GemmShape,
    expert_dev: GemmDevice,
    /// Fixed cost of one MoE layer's expert products beyond the layer floor (Triton's kernels).
    moe_fixed_s: f64,
    /// Whether the BF16 experts run vLLM's default tile (no tuned table for their shape).
    default_tile: bool,
    lm_head: GemmShape,
    lm_dev: GemmDevice,
    /// Bytes of one row of logits over the whole vocabulary (BF16), which the tensor-parallel
    /// ranks gather from their shards of the LM head.
    logits_row_bytes: f64,
    kv_bytes_token_layer: f64,
    /// Attention FLOPs of one query-key pair in one layer, per GPU: prefill tokens, decodes
    /// (they differ with MLA, whose two phases run different forms).
    attn_flops_prefill: f64,
    attn_flops_decode: f64,
    /// MLA: the up-projection of one cached token's latent to every head's key and value, which
    /// vLLM redoes for the context of each prefill chunk, one layer, per GPU (zero otherwise).
    context_upproj: GemmShape,
    attn_rate: f64,
    /// The fixed work of a prefill query in every attention layer, in keys
    /// (`StackProfile::attn_query_keys`).
    attn_query_keys: f64,
    /// The share of the shorter compute stream the attention kernels do not hide
    /// (`StackProfile::attn_exp_exposed`).
    attn_exp_exposed: f64,
    /// Linear-attention layers, and per GPU and layer: one sequence's state, bytes; a prefill
    /// token's FLOPs (at `linear_rate`) and bytes of per-chunk states; a decode token's FLOPs;
    /// the chunk's tokens and the seconds one chunk of a prompt takes at the least.
    linear_layers: f64,
    state_bytes: f64,
    linear_rate: f64,
    linear_chunk: (f64, f64),
    linear_prefill_flops: f64,
    linear_prefill_bytes: f64,
    linear_decode_flops: f64,
    /// Softmax exponentials of one query-key pair in one layer, per GPU (one a query head).
    attn_exps_per_pair: f64,
    /// DeepSeek sparse attention's indexer, replicated on every GPU (None without): attention
    /// then reads at most `top_k` tokens a query, the indexer scores them all.
    indexer: Option<IndexerCost>,
    /// The exponentials a second the attention kernels reach (the SFUs' rate at their
    /// efficiency); infinite where the preset gives no rate.
    exp_rate: f64,
    bandwidth: f64,
    datasheet_bandwidth: f64,
    tp: f64,
    pp: f64,
    /// The tensor-parallel all-reduce: its link, its GPUs, QuickReduce and the fused norm.
    tp_allreduce: tp_allreduce::TpAllReduce,
    /// The link of the GPUs that share a MoE layer, over which data-parallel ranks exchange
    /// their tokens.
    moe_link: LinkCost,
    /// The link between pipeline stages (a hand-off pays its fixed part and its bytes).
    pp_link: LinkCost,
    t0_s: f64,
    t_layer_s: f64,
    t_seq_s: f64,
    t_moe_s: f64,
    eager_layer_s: f64,
    host_s: f64,
    host_seq_s: f64,
    admit_s: f64,
    async_scheduling: bool,
    /// Which steps run in CUDA graphs (`cudagraph-mode`, `enforce-eager`).
    graph_mode: CudaGraphMode,
    /// The batch sizes graphs are captured at (`cudagraph-capture-sizes`, or vLLM's rule).
    graph_sizes: CudaGraphSizes,
    graph_max_ctx: u32,
    /// A speculative decoder's drafter on the GPU, where the deployment has one.
    drafter: Option<Box<drafter::Drafter>>,
    /// The vision tower, where the deployment loads one.
    encoder: Option<encoder::EncoderCost>,
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
        let (experts, top_k) = m.moe.as_ref().map_or((0.0, 0.0), |x| (f64::from(x.experts), f64::from(x.top_k)));
        let peaks = &hw.peak_tflops.at_clock(hw.sustained_clock);
        // The attention kernels' fraction of whichever unit binds them (`attention_seconds`),
        // and the share of their other compute stream they do not hide: sparse attention's own
        // kernels (its indexer's too) hide it whole.
        let attn = st.attention_rate(m.attention_sinks, m.sparse.is_some());
        let (attn_eff, attn_exp_exposed) = (attn.eff, attn.exposed);
        // Gated DeltaNet's chunked prefill where the stack runs flash-linear-attention's Triton
        // kernels; Mamba-2's (unmeasured) at the attention kernels' rate.
        let gdn = m.linear.as_ref().is_some_and(|x| x.kind == crate::model::LinearKind::GatedDeltaNet);
        let linear_eff = st.linear_eff.filter(|_| gdn).unwrap_or(attn_eff);
        // The floor of a layer's small kernels and the routing kernels are chains of dependent
        // instructions, calibrated at the H100's clock; the expert kernels' fixed costs are
        // long reads from memory (their latency does not follow the SMs' clock).
        let latency = hw.latency_scale();
        // An MLA layer launches more of those small kernels than the layer they were fitted on.
        let floor = terms::layer_floor_factor(m.mla.is_some());
        let bandwidth = st.eta_bw * hw.bandwidth_gbs * 1e9;
        // A dequantizing kernel runs at `PeakTflops::weight_only_rate`, where the tensor cores
        // bind at Marlin's own fraction of their rate (`dequant_mma`), dense and expert products
        // alike: not cuBLAS's dense BF16 ceiling, nor the BF16 experts', which are other kernels'.
        let device = |format: ComputePrecision, table: &crate::precision::PrecisionTable| {
            let (peak, ceiling) = match format {
                ComputePrecision::WeightOnly => {
                    (peaks.bf16, peaks.weight_only_rate(table.weight_only, st.dequant_mma) / peaks.bf16)
                }
                _ => (peaks.get(format), table.get(format)),
            };
            GemmDevice { peak_flops: peak * 1e12, ceiling, m_half: st.gemm_m_half, bandwidth }
        };
        let attn_format = m.attention_precision().compute_on(peaks);
        let lin_format = m.precision.compute_on(peaks);
        // MLA's down-projections stay whole on every rank; everything else (the linear-attention
        // layers' projections too) is split.
        let replicated = f64::from(m.attention_layers()) * m.attention_replicated_params();
        let attn_params = replicated + (m.mixer_params() - replicated) / tp;
        let ffn_params = m.always_ffn_params() / tp;
        let always_format = m.always_precision();
        let w_b = m.precision.bytes_per_param();
        let lm_params = m.embedding_params() / tp;
        let ar = o.allreduce_link(hw);
        let pl = o.pipeline_link(hw);
        // The link as the profile prices it (`LinkCost::profiled`); a fitted all-reduce latency
        // replaces its fixed part and its steps.
        let profiled = LinkCost::profiled(&ar, st);
        let ar_link = match st.alpha_ar_us {
            Some(us) => LinkCost { fixed_s: us * 1e-6, step_s: 0.0, ..profiled },
            None => profiled,
        };
        let (sliding, _) = m.sliding_layers();
        // vLLM's Triton kernels for MXFP4 experts have their own ceiling and half-efficiency
        // rows, stream weights no faster than the SMs dequantize them, and pay a fixed cost
        // per layer (all measured; see `TritonMoeKernel`).
        let triton = (o.mxfp4_backend == crate::precision::Mxfp4Backend::Triton).then_some(st.triton_moe);
        // Bytes a second of weights the SMs dequantize at `ops` integer operations a weight.
        let dequant_stream = |ops: f64| peaks.integer_tops() * 1e12 / ops * w_b;
        // The expert kernels' fixed cost per MoE layer, all measured: Triton's MXFP4 kernels'
        // (`TritonMoeKernel`); vLLM's Triton fused-MoE kernels' for experts kept in BF16 or FP8
        // (`StackProfile::fused_moe_us`); FlashInfer's FP4 block-scaled kernels' for NVFP4 and
        // MXFP4 experts on parts with FP4 units, which also read their weights at a stream of
        // their own (`Fp4MoeKernel`, applied in `expert_dev`'s arm without Triton below).
        let fp4_blocks = m.precision.runs_fp4_block_experts(peaks);
        let fused_us = match triton {
            Some(k) => k.fixed_us,
            None if m.precision.keeps_experts_native(peaks) => st.fused_moe_us,
            None if fp4_blocks => st.fp4_moe.fixed_us,
            None => 0.0,
        };
        let default_tile = tiles::untuned_bf16_experts(m, o, hw).is_some();
        // Sparse MLA (DeepSeek-V3.2) attends in the latent form in both phases, over a rank's
        // heads padded up to what FlashMLA's sparse kernels run; nothing is decompressed.
        let heads = f64::from(m.heads);
        let (attn_heads, attn_flops_prefill, context_upproj) = match &m.sparse {
            Some(_) => {
                let padded = (heads / tp).max(f64::from(st.sparse_mla_heads));
                (padded, m.attention_flops_per_pair(false) / heads * padded, 0.0)
            }
            None => (heads / tp, m.attention_flops_per_pair(true) / tp, m.mla_context_upproj_flops() / tp),
        };
        let attn_flops_decode = m.attention_flops_per_pair(false) / heads * attn_heads;
        // Per layer on average, where only some layers run an indexer of their own.
        let indexer = m.sparse.as_ref().map(|sp| IndexerCost {
            flops_per_pair: sp.flops_per_pair() * m.indexer_share(),
            key_bytes: m.index_key_bytes(),
            rate: peaks.get(ComputePrecision::Fp8) * 1e12 * attn_eff,
        });
        let expert_spread = ExpertSpread { gpus: f64::from(o.expert_shards()), whole: o.expert_parallel };
        // The products' rate on each GPU's columns of an expert's FFN.
        let shard_eff = terms::shard_efficiency(
            m.moe.as_ref().map_or(0.0, |x| expert_spread.shard_columns(f64::from(x.expert_intermediate))),
        );
        let expert_dev = match triton {
            Some(k) => GemmDevice {
                peak_flops: peaks.bf16 * 1e12,
                ceiling: k.ceiling * shard_eff,
                m_half: k.m_half,
                bandwidth: bandwidth.min(dequant_stream(k.ops_per_weight)),
            },
            None => {
                let mut dev = device(lin_format, &st.moe_eff);
                if let (ComputePrecision::WeightOnly, Some(ops)) = (lin_format, st.dequant_ops_per_weight) {
                    dev.bandwidth = dev.bandwidth.min(dequant_stream(ops));
                }
                // The BF16 ceiling was fitted on shapes vLLM has tuned tiles for; others run the
                // default tile of the release served.
                if default_tile {
                    dev.ceiling *= tiles::default_tile_rate(o.vllm_release);
                }
                if fp4_blocks {
                    dev.bandwidth *= st.fp4_moe.stream;
                }
                dev.ceiling *= shard_eff;
                dev
            }
        };
        CostModel {
            layers: l,
            allreduces: f64::from(m.allreduces()),
            moe_layers,
            full_layers: f64::from(m.full_attention_layers()),
            sliding_layers: f64::from(sliding),
            hidden: f64::from(m.hidden),
            experts,
            top_k,
            expert_spread,
            dp: f64::from(o.dp),
            attn_proj: GemmShape {
                flops_per_row: 2.0 * attn_params,
                weight_bytes: attn_params * m.mixer_bytes_per_param(),
            },
            attn_dev: device(attn_format, &st.gemm_eff),
            ffn: GemmShape {
                flops_per_row: 2.0 * ffn_params,
                weight_bytes: ffn_params * always_format.bytes_per_param(),
            },
            ffn_dev: device(always_format.compute_on(peaks), &st.gemm_eff),
            expert: GemmShape { flops_per_row: 2.0 * m.expert_params(), weight_bytes: m.expert_params() * w_b },
            expert_dev,
            moe_fixed_s: fused_us * 1e-6,
            default_tile,
            lm_head: GemmShape { flops_per_row: 2.0 * lm_params, weight_bytes: lm_params * 2.0 },
            lm_dev: device(ComputePrecision::Bf16, &st.gemm_eff),
            logits_row_bytes: f64::from(m.vocab) * 2.0,
            // A sparse model's indexer keys are the indexer's reads (`indexer`), not attention's.
            kv_bytes_token_layer: m.attention_kv_bytes_per_token_layer(o.kv_cache_dtype, o.tp),
            attn_flops_prefill,
            attn_flops_decode,
            context_upproj: GemmShape { flops_per_row: context_upproj, weight_bytes: 0.0 },
            attn_rate: peaks.bf16 * 1e12 * attn_eff,
            attn_query_keys: st.attn_query_keys,
            attn_exp_exposed,
            linear_layers: f64::from(m.linear_layers()),
            state_bytes: m.linear.as_ref().map_or(0.0, |x| x.state_bytes(o.tp)),
            linear_rate: peaks.bf16 * 1e12 * linear_eff,
            linear_chunk: m.linear.as_ref().map_or((1.0, 0.0), |x| {
                let heads = f64::from(x.value_heads) / tp;
                (x.chunk_tokens(), st.linear_chunk_us * heads * latency * 1e-6)
            }),
            linear_prefill_flops: m.linear.as_ref().map_or(0.0, |x| x.prefill_flops_per_token() / tp),
            linear_prefill_bytes: m.linear.as_ref().map_or(0.0, |x| x.prefill_bytes_per_token(o.tp)),
            linear_decode_flops: m.linear.as_ref().map_or(0.0, |x| x.decode_flops_per_token() / tp),
            attn_exps_per_pair: attn_heads,
            indexer,
            exp_rate: peaks.exp2.map_or(f64::INFINITY, |e| e * 1e12 * attn_eff),
            bandwidth,
            datasheet_bandwidth: hw.bandwidth_gbs * 1e9,
            tp,
            pp: f64::from(o.pp),
            tp_allreduce: tp_allreduce::TpAllReduce {
                link: ar_link,
                gpus: o.tp,
                quick: o.allreduce_quick_reduce(hw),
                fusion: o.allreduce_norm_fusion(hw),
            },
            moe_link: LinkCost::profiled(&o.expert_link(hw), st),
            pp_link: LinkCost::of(&pl),
            t0_s: st.t0_ms * 1e-3,
            t_layer_s: st.t_layer_us * latency * floor * 1e-6,
            t_seq_s: st.t_seq_us * 1e-6,
            t_moe_s: st.t_moe_us * latency * 1e-6,
            eager_layer_s: st.eager_layer_us * floor * 1e-6,
            host_s: st.t_host_ms * 1e-3,
            host_seq_s: st.t_host_seq_us * 1e-6,
            admit_s: st.t_admit_us * 1e-6,
            async_scheduling: o.async_scheduling,
            graph_mode: o.cudagraph_mode,
            graph_sizes: o.cudagraph_sizes.clone(),
            graph_max_ctx: st.graph_max_ctx,
            drafter: drafter::Drafter::of(setup),
            encoder: m.vision.as_ref().filter(|_| !o.language_model_only).map(|v| {
                let dev = device(ComputePrecision::Bf16, &st.gemm_eff);
                encoder::EncoderCost::new(v, m.hidden, tp, dev, peaks.bf16 * 1e12 * attn_eff, st.eager_layer_us * 1e-6)
            }),
        }
    }

    /// Expected distinct experts per MoE layer for a step of `tokens` tokens.
    pub fn experts_touched(&self, tokens: u64) -> f64 {
        expected_experts(self.experts, self.top_k, tokens as f64)
    }

    /// The routed experts' ceiling and the peak it is a fraction of, TFLOP/s: for dequantizing
    /// kernels the ceiling the SMs' issue rate leaves them (see [`CostModel::new`]).
    pub fn expert_ceiling(&self) -> (f64, f64) {
        (self.expert_dev.ceiling, self.expert_dev.peak_flops / 1e12)
    }

    /// The expert kernels' fixed cost per MoE layer beyond the floor of `t_layer_us`, µs (the
    /// measured latency of vLLM's Triton MXFP4 or fused-MoE kernels; zero where none applies).
    pub fn expert_fixed_us(&self) -> f64 {
        self.moe_fixed_s * 1e6
    }

    /// Whether the BF16 experts are priced at vLLM's default tile (no tuned table for their
    /// shape on the device: [`tiles::untuned_bf16_experts`]).
    pub fn expert_default_tile(&self) -> bool {
        self.default_tile
    }

    /// Why a step runs without CUDA graphs (the host launching every kernel), if it does.
    pub fn eager_reason(&self, b: &BatchStats) -> Option<&'static str> {
        if self.graph_mode == CudaGraphMode::None {
            Some("no graphs are captured (cudagraph-mode none, or enforce-eager)")
        } else if self.graph_mode == CudaGraphMode::FullDecodeOnly && b.prefill_tokens > 0 {
            Some("it carries a prefill, and only decode steps run in graphs (cudagraph-mode full-decode-only)")
        } else if b.tokens() > self.graph_sizes.largest() {
            Some("it has more tokens than the largest graph captured")
        } else if self.graph_max_ctx > 0 && b.max_context > self.graph_max_ctx {
            Some("a sequence's context is longer than the graphs were captured for")
        } else {
            None
        }
    }

    /// Seconds a speculative decoder's drafter adds to a step (none without one).
    fn drafting_seconds(&self, b: &BatchStats) -> f64 {
        self.drafter.as_ref().map_or(0.0, |d| d.seconds(b))
    }

    /// Whether a step runs without CUDA graphs.
    fn eager(&self, b: &BatchStats) -> bool {
        self.eager_reason(b).is_some()
    }

    /// Rows a step's products run on: its tokens, or with CUDA graphs the captured size they
    /// are padded to (see [`CudaGraphSizes::rows`]).
    pub fn rows(&self, b: &BatchStats) -> u64 {
        let tokens = b.tokens();
        if self.eager(b) { tokens } else { self.graph_sizes.rows(tokens).unwrap_or(tokens) }
    }

    /// The step time split into its terms.
    pub fn breakdown(&self, b: &BatchStats) -> StepBreakdown {
        // Products (and the router: vLLM routes padded rows like real ones) run on the padded
        // rows; attention, the LM head and the per-sequence costs see the real batch.
        let rows = self.rows(b);
        let all_tokens = rows as f64;
        // With data-parallel attention each rank runs its own sequences and the ranks step
        // together: a step lasts as long as its busiest rank's shares (`RankShares::busiest`).
        let dp = self.dp;
        let share = RankShares::busiest(self.dp, b);
        let n = all_tokens * share.tokens;
        let seqs = f64::from(b.num_seqs) * share.seqs;
        let fixed = self.t0_s + self.t_layer_s * self.layers + self.t_seq_s * seqs;
        let dense = gemm_seconds(self.attn_proj, n, self.attn_dev) + gemm_seconds(self.ffn, n, self.ffn_dev);
        let experts = self.moe_layers
            * (experts_seconds(self.expert, self.experts, self.top_k, all_tokens, self.expert_spread, self.expert_dev)
                + self.moe_fixed_s);
        // Sparse attention reads and attends at most its top-k tokens a query in every layer (the
        // batch's windowed figures), as sliding layers do within their window.
        let (kv_full, prefill_full, decode_full) = match self.indexer {
            Some(_) => (b.kv_tokens_window, b.pairs_prefill_window, b.pairs_decode_window),
            None => (b.kv_tokens_full, b.pairs_prefill_full, b.pairs_decode_full),
        };
        let kv_bytes = self.kv_bytes_token_layer
            * (self.full_layers * kv_full as f64 + self.sliding_layers * b.kv_tokens_window as f64)
            * share.seqs;
        // Each prefill query also pays its causal tiles' fixed work, as `attn_query_keys` keys
        // more, in every layer whose kernel masks a causal diagonal or a window's edges (not
        // sparse attention's gathered top-k, which has none).
        let masked_layers = if self.indexer.is_some() { 0.0 } else { self.full_layers } + self.sliding_layers;
        let prefill_queries = masked_layers * b.prefill_tokens as f64;
        let tile_pairs = self.attn_query_keys * prefill_queries;
        let attended = self.full_layers * prefill_full + self.sliding_layers * b.pairs_prefill_window;
        let decode_pairs = self.full_layers * decode_full + self.sliding_layers * b.pairs_decode_window;
        // The attention kernels' time, the prefill's pairs counted with or without their tiles'
        // work; with the exponentials' stream, and (for reference, priced again only where the
        // kernels leave any exposed) what the part of the shorter compute stream they do not
        // hide adds.
        let kernels = |prefill_pairs: f64| {
            let flops = self.attn_flops_prefill * prefill_pairs * share.prefill
                + self.attn_flops_decode * decode_pairs * share.seqs;
            let exps = self.attn_exps_per_pair * (prefill_pairs * share.prefill + decode_pairs * share.seqs);
            let (tensor_s, exps_s, bytes_s) = (flops / self.attn_rate, exps / self.exp_rate, kv_bytes / self.bandwidth);
            let time = attention_seconds(tensor_s, exps_s, bytes_s, self.attn_exp_exposed);
            let exposed = if self.attn_exp_exposed > 0.0 {
                time - attention_seconds(tensor_s, exps_s, bytes_s, 0.0)
            } else {
                0.0
            };
            (time, exps_s, exposed)
        };
        let (attention_kernels, attention_exps, attention_exposed) = kernels(attended + tile_pairs);
        // For reference only: priced again without the tiles where they cost anything.
        let attention_tiles = if tile_pairs > 0.0 { attention_kernels - kernels(attended).0 } else { 0.0 };
        let context = b.prefill_context_tokens as f64 * share.prefill;
        let (indexer, index_bytes) = self.indexer_seconds(b, share);
        let attention =
            attention_kernels + self.full_layers * gemm_seconds(self.context_upproj, context, self.attn_dev) + indexer;
        let (recurrent, state_bytes) = self.linear_attention(b, share);
        // The LM head: each rank's product over its shard of the vocabulary, then the all-gather
        // that gives every rank each sampled row's logits over the whole vocabulary (vLLM's
        // `LogitsProcessor` on GPUs, after the graphs), over the tensor-parallel link.
        let sampled = (f64::from(b.sampled.max(1)) * share.seqs).max(1.0);
        let lm_head = gemm_seconds(self.lm_head, sampled, self.lm_dev)
            + self.tp_allreduce.link.allgather_seconds(self.tp, sampled * self.logits_row_bytes);
        let touched = self.experts_touched(rows) * self.moe_layers * self.expert.weight_bytes / self.expert_spread.gpus;
        let memory = (self.attn_proj.weight_bytes
            + self.ffn.weight_bytes
            + touched
            + kv_bytes
            + index_bytes
            + state_bytes
            + self.lm_head.weight_bytes)
            / self.bandwidth;

        let act_bytes = n * self.hidden * 2.0;
        let mut allreduce = self.allreduces * self.tp_allreduce.seconds(act_bytes);
        if dp > 1.0 {
            // A MoE layer spans every data-parallel rank (with expert parallelism or not): each
            // gathers the other ranks' tokens before the experts and reduce-scatters the result
            // after them (vLLM's default all-gather / reduce-scatter exchange). The two are the
            // halves of an all-reduce of the whole batch's activations over the ranks, launched
            // twice.
            let link = self.moe_link;
            let batch_bytes = all_tokens * self.hidden * 2.0;
            allreduce += self.moe_layers * (link.allreduce_seconds(dp, batch_bytes) + link.fixed_s);
        }
        let pipeline = (self.pp - 1.0) * (self.pp_link.fixed_s + act_bytes / self.pp_link.bandwidth);
        let moe_routing = self.moe_layers * self.t_moe_s;
        // Without graphs the host launches every kernel. The few large products cover their own
        // launches, but the many small kernels between them (norms, residual adds, rotary
        // embedding, activations) finish before the next launch: their launches show, until
        // the step has tokens enough that those kernels' own passes over the activations
        // (about ten per layer) outlast them.
        let kernels = dense + experts + attention + recurrent + lm_head + allreduce;
        let small_kernels = self.layers * ELEMENTWISE_PASSES * act_bytes / self.bandwidth;
        let eager = if self.eager(b) { (self.eager_layer_s * self.layers - small_kernels).max(0.0) } else { 0.0 };
        let drafting = self.drafting_seconds(b);
        let encoder = self.encoder.as_ref().map_or(0.0, |e| e.seconds(b, &self.tp_allreduce));
        let gpu = fixed + kernels + pipeline + moe_routing + eager + drafting + encoder;
        let host_work = self.host_s + self.host_seq_s * f64::from(b.num_seqs) + self.admit_s * f64::from(b.admitted);
        let host = if self.async_scheduling { (host_work - gpu).max(0.0) } else { host_work };
        let total = gpu + host;
        StepBreakdown {
            fixed,
            dense,
            experts,
            attention,
            attention_exps,
            attention_tiles,
            attention_exposed,
            recurrent,
            lm_head,
            memory,
            allreduce,
            pipeline,
            moe_routing,
            eager,
            drafting,
            encoder,
            host,
            total,
        }
    }
}

impl StepCost for CostModel {
    fn step_seconds(&self, batch: &BatchStats) -> f64 {
        CostModel::breakdown(self, batch).total
    }

    fn breakdown(&self, batch: &BatchStats) -> StepBreakdown {
        CostModel::breakdown(self, batch)
    }
}

#[cfg(test)]
mod attention_tests;
#[cfg(test)]
mod host_tests;
#[cfg(test)]
mod kernel_checks;
#[cfg(test)]
mod linear_tests;
#[cfg(test)]
mod mla_checks;
#[cfg(test)]
mod sparse_tests;
#[cfg(test)]
mod tests;
