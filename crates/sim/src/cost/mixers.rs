//! The mixers that are neither attention's softmax nor a matrix product: a sparse-attention
//! indexer scoring every cached key, and linear attention's recurrences (each decode's state
//! read and written, the chunked prefill's FLOPs, per-chunk states and chunks in order).

use super::terms::{attention_seconds, recurrent_seconds};
use super::{BatchStats, CostModel, RankShares};

impl CostModel {
    /// Seconds of a sparse-attention indexer over a step, and the bytes it reads: every query
    /// scored against every cached key of its sequence (the square of a prompt's length, a
    /// decode's whole context), each key read from the indexer's cache; on every GPU whole.
    /// Zero without sparse attention.
    pub(super) fn indexer_seconds(&self, b: &BatchStats, share: RankShares) -> (f64, f64) {
        let Some(ix) = self.indexer else { return (0.0, 0.0) };
        let pairs = self.full_layers * (b.pairs_prefill_full * share.prefill + b.pairs_decode_full * share.seqs);
        let bytes = self.full_layers * ix.key_bytes * b.kv_tokens_full as f64 * share.seqs;
        (attention_seconds(pairs * ix.flops_per_pair / ix.rate, 0.0, bytes / self.bandwidth, 0.0), bytes)
    }

    /// Seconds of the linear-attention layers' kernels over a step, and the bytes they move. vLLM
    /// runs a step's prefill chunks and its decodes as separate kernels, each reading and writing
    /// every sequence's state once; the chunked prefill also writes and reads back a state a
    /// chunk, and takes at least its longest prompt's chunks one after another. Zero without
    /// linear attention.
    pub(super) fn linear_attention(&self, b: &BatchStats, share: RankShares) -> (f64, f64) {
        if self.linear_layers == 0.0 {
            return (0.0, 0.0);
        }
        let decodes = b.decode_tokens as f64 * share.seqs;
        let prefill_seqs = (f64::from(b.num_seqs) - b.decode_tokens as f64).max(0.0) * share.prefill;
        let prefill_tokens = b.prefill_tokens as f64 * share.prefill;
        let prefill_bytes = self.linear_prefill_bytes * prefill_tokens + 2.0 * self.state_bytes * prefill_seqs;
        let decode_bytes = 2.0 * self.state_bytes * decodes;
        let (chunk_tokens, chunk_s) = self.linear_chunk;
        let in_order = if b.prefill_tokens > 0 { (f64::from(b.max_new) / chunk_tokens).ceil() * chunk_s } else { 0.0 };
        let prefill = recurrent_seconds(
            self.linear_prefill_flops * prefill_tokens / self.linear_rate,
            prefill_bytes / self.bandwidth,
        )
        .max(in_order);
        let decode =
            recurrent_seconds(self.linear_decode_flops * decodes / self.attn_rate, decode_bytes / self.bandwidth);
        (self.linear_layers * (prefill + decode), self.linear_layers * (prefill_bytes + decode_bytes))
    }
}
