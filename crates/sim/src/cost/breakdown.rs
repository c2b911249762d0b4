//! Where a step's time goes: the cost model's terms, one step's or a whole run's summed.

/// Where a step's time goes, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct StepBreakdown {
    /// Per-step, per-layer and per-sequence overheads.
    pub fixed: f64,
    /// Attention projections, dense and shared FFNs.
    pub dense: f64,
    /// Routed experts.
    pub experts: f64,
    /// Attention kernels (the longer of their KV reads and their compute: query-key FLOPs or
    /// softmax exponentials, the longer, plus the share of the shorter they do not hide).
    pub attention: f64,
    /// The softmax's exponentials over the SFUs' rate, for reference: where they equal
    /// `attention` (prefill on Blackwell at heads narrower than 128), they bind it.
    pub attention_exps: f64,
    /// What the prefill queries' tile work (`attn_query_keys`) adds to `attention`, for
    /// reference.
    pub attention_tiles: f64,
    /// What the share of the shorter compute stream the kernels do not hide
    /// (`attn_exp_exposed`: Hopper's exponentials) adds to `attention`, for reference.
    pub attention_exposed: f64,
    /// The LM head's product over each rank's shard of the vocabulary, and the all-gather of the
    /// sampled rows' logits across the tensor-parallel group.
    pub lm_head: f64,
    /// Linear-attention kernels: the chunked recurrence of prefill tokens and each decode's state
    /// read and written.
    pub recurrent: f64,
    /// Bytes over bandwidth of everything read (weights touched, KV and recurrent states), for
    /// reference.
    pub memory: f64,
    pub allreduce: f64,
    pub pipeline: f64,
    /// Routing cost of the MoE layers.
    pub moe_routing: f64,
    /// Launches of a step run without CUDA graphs, where the small kernels do not cover them.
    pub eager: f64,
    /// A speculative decoder's drafter: its passes, one a draft token.
    pub drafting: f64,
    /// The vision tower encoding the step's images.
    pub encoder: f64,
    /// The host's work that the step waits for: all of it without async scheduling, with it
    /// only what outlasts the GPU's part.
    pub host: f64,
    pub total: f64,
}

impl StepBreakdown {
    /// Adds `k` times `other`'s terms (a run's time summed step by step, each step scaled by
    /// its jitter).
    pub fn add_scaled(&mut self, other: &StepBreakdown, k: f64) {
        let pairs = [
            (&mut self.fixed, other.fixed),
            (&mut self.dense, other.dense),
            (&mut self.experts, other.experts),
            (&mut self.attention, other.attention),
            (&mut self.attention_exps, other.attention_exps),
            (&mut self.attention_tiles, other.attention_tiles),
            (&mut self.attention_exposed, other.attention_exposed),
            (&mut self.lm_head, other.lm_head),
            (&mut self.recurrent, other.recurrent),
            (&mut self.memory, other.memory),
            (&mut self.allreduce, other.allreduce),
            (&mut self.pipeline, other.pipeline),
            (&mut self.moe_routing, other.moe_routing),
            (&mut self.eager, other.eager),
            (&mut self.drafting, other.drafting),
            (&mut self.encoder, other.encoder),
            (&mut self.host, other.host),
            (&mut self.total, other.total),
        ];
        for (sum, v) in pairs {
            *sum += k * v;
        }
    }

    /// The terms that add up to `total`, in the order and with the names `sim step` prints
    /// them.
    pub fn terms(&self) -> [(&'static str, f64); 13] {
        [
            ("fixed (step, layers, sequences)", self.fixed),
            ("dense products", self.dense),
            ("routed experts", self.experts),
            ("attention", self.attention),
            ("linear attention", self.recurrent),
            ("LM head, logits gathered", self.lm_head),
            ("all-reduce", self.allreduce),
            ("pipeline hand-offs", self.pipeline),
            ("MoE routing", self.moe_routing),
            ("launches without graphs", self.eager),
            ("drafting", self.drafting),
            ("vision encoder", self.encoder),
            ("host, not hidden", self.host),
        ]
    }

    /// The terms that took any time, largest first.
    pub fn shares(&self) -> Vec<(&'static str, f64)> {
        let mut terms: Vec<_> = self.terms().into_iter().filter(|&(_, v)| v > 0.0).collect();
        terms.sort_by(|a, b| b.1.total_cmp(&a.1));
        terms
    }
}
