//! The batch of one engine step as the cost model reads it: its sequences, tokens, and the
//! attention work they bring (query-key pairs and cached tokens read, in full and within the
//! window that bounds attention).

use super::terms::pair_sum;

/// The batch of one step, as the cost model sees it. The scheduler fills it with
/// [`BatchStats::add_sequence`] while it builds the step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BatchStats {
    pub num_seqs: u32,
    pub prefill_tokens: u64,
    pub decode_tokens: u64,
    /// Rows that produce logits (decodes and prompts finishing this step; with speculative
    /// decoding, every verified position).
    pub sampled: u32,
    /// Sequences that sample a token this step: with speculative decoding, those the drafter
    /// proposes for next.
    pub sampling_seqs: u32,
    /// Context tokens read by full-attention layers, summed over sequences.
    pub kv_tokens_full: u64,
    /// Context tokens read within the window (each sequence's capped at it): by sliding-window
    /// layers, or by every layer of sparse attention.
    pub kv_tokens_window: u64,
    /// Query-key pairs of prefill tokens, in full and within the window.
    pub pairs_prefill_full: f64,
    pub pairs_prefill_window: f64,
    /// Query-key pairs of decode tokens, in full and within the window.
    pub pairs_decode_full: f64,
    pub pairs_decode_window: f64,
    /// The longest context in the batch.
    pub max_context: u32,
    /// Requests taken from the waiting queue this step (new, or back after a preemption).
    pub admitted: u32,
    /// Cached tokens before the new ones of the prefilling sequences, summed.
    pub prefill_context_tokens: u64,
    /// The most tokens one sequence computes this step (its prefill chunk, or 1 for a decode).
    pub max_new: u32,
    /// Images the vision tower encodes this step: their patches, and their attention's
    /// query-key pairs summed over the tower's layers.
    pub encoder_patches: u64,
    pub encoder_pairs: u64,
}

impl BatchStats {
    /// Adds a sequence that computes `new` tokens after `context` cached ones. `window` bounds
    /// attention's look-back (a sliding window, or sparse attention's top-k; 0: none, see
    /// [`crate::model::ModelShape::pair_window`]); `prefill` tells the phase; `samples` whether it
    /// yields a token.
    pub fn add_sequence(&mut self, context: u32, new: u32, window: u32, prefill: bool, samples: bool) {
        let end = u64::from(context) + u64::from(new);
        let full = pair_sum(u64::from(context) + 1, end, 0);
        let win = if window == 0 { 0.0 } else { pair_sum(u64::from(context) + 1, end, u64::from(window)) };
        self.num_seqs += 1;
        if prefill {
            self.prefill_tokens += u64::from(new);
            self.prefill_context_tokens += u64::from(context);
            self.pairs_prefill_full += full;
            self.pairs_prefill_window += win;
        } else {
            self.decode_tokens += u64::from(new);
            self.pairs_decode_full += full;
            self.pairs_decode_window += win;
        }
        self.sampled += u32::from(samples);
        self.sampling_seqs += u32::from(samples);
        self.max_new = self.max_new.max(new);
        self.kv_tokens_full += end;
        self.kv_tokens_window += if window == 0 { 0 } else { end.min(u64::from(window)) };
        self.max_context = self.max_context.max(u32::try_from(end).unwrap_or(u32::MAX));
    }

    /// Adds an image the tower encodes this step (its prompt tokens are the chunk's).
    pub fn add_image(&mut self, work: crate::model::ImageWork) {
        self.encoder_patches += u64::from(work.patches);
        self.encoder_pairs += work.pairs;
    }

    /// Adds a decoding sequence that verifies `new - 1` draft tokens after `context` cached
    /// ones: its last token and the drafts run as one short chunk, every position producing
    /// logits.
    pub fn add_verification(&mut self, context: u32, new: u32, window: u32) {
        self.add_sequence(context, new, window, false, true);
        self.sampled += new.saturating_sub(1);
    }

    /// The batch of a drafter's later passes: one token for each sequence that samples, each
    /// attending to its context.
    pub fn draft_pass(&self) -> BatchStats {
        let n = self.sampling_seqs;
        BatchStats {
            num_seqs: n,
            decode_tokens: u64::from(n),
            sampled: n,
            sampling_seqs: n,
            kv_tokens_full: self.kv_tokens_full,
            kv_tokens_window: self.kv_tokens_window,
            pairs_decode_full: self.kv_tokens_full as f64,
            pairs_decode_window: self.kv_tokens_window as f64,
            max_context: self.max_context,
            max_new: n.min(1),
            ..BatchStats::default()
        }
    }

    /// Tokens computed this step.
    pub fn tokens(&self) -> u64 {
        self.prefill_tokens + self.decode_tokens
    }
}
