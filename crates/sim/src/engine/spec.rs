//! Speculative decoding in the engine: how many of a sequence's drafts a verification
//! accepts (drawn at the given rates), and vLLM's counters of what was drafted and accepted.

use servebench_core::telemetry::SpecDecodeCounts;

use super::Engine;
use crate::rng::SimRng;

/// Speculative decoding as the engine runs it: the draft tokens a step proposes for each
/// decoding sequence, and the chance each is accepted once the one before it was.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecDraws {
    pub tokens: u32,
    pub conditional: Vec<f64>,
}

impl SpecDraws {
    /// From the per-position rates vLLM reports (position `i` accepted in `rates[i]` of drafts,
    /// every one before it too).
    pub fn from_rates(tokens: u32, rates: &[f64]) -> Self {
        let mut before = 1.0;
        let conditional = rates
            .iter()
            .map(|&p| {
                let c = if before > 0.0 { (p / before).clamp(0.0, 1.0) } else { 0.0 };
                before = p;
                c
            })
            .collect();
        SpecDraws { tokens, conditional }
    }

    /// Draft tokens accepted out of `drafts`: each after the one before it, at its chance.
    pub(super) fn accepted(&self, drafts: u32, rng: &mut SimRng) -> u32 {
        let mut n = 0;
        while n < drafts && rng.next_f64() < self.conditional.get(n as usize).copied().unwrap_or(0.0) {
            n += 1;
        }
        n
    }
}

impl Engine {
    /// The speculative decoder's counters so far, as vLLM's `/metrics` counts them (one value a
    /// draft position); `None` without speculative decoding.
    pub fn spec_decode_counts(&self) -> Option<SpecDecodeCounts> {
        let spec = self.cfg.spec.as_ref()?;
        let c = &self.counters;
        Some(SpecDecodeCounts {
            num_drafts: c.spec_drafts,
            draft_tokens: c.spec_draft_tokens,
            accepted_tokens: c.spec_accepted,
            accepted_per_position: c.spec_accepted_per_pos[..spec.tokens as usize].to_vec(),
        })
    }
}
