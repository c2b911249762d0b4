//! How much of a step falls on the busiest data-parallel rank: the ranks step together, so a
//! step lasts as long as that rank's share of its tokens, prefill work and sequences.

use super::BatchStats;

/// The busiest data-parallel rank's shares of a step ([`RankShares::busiest`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct RankShares {
    pub tokens: f64,
    pub prefill: f64,
    pub seqs: f64,
}

impl RankShares {
    /// The whole step (no data parallelism).
    pub fn whole() -> Self {
        RankShares { tokens: 1.0, prefill: 1.0, seqs: 1.0 }
    }

    /// The busiest of `dp` ranks' shares of a step. vLLM gives each request to one rank and the
    /// ranks step together, so the step lasts as long as the busiest: a prefill chunk is one
    /// rank's whole (beside its even share of the rest), while sequences spread evenly, the
    /// busiest rank taking the rounded-up share. Returns the shares of the step's tokens (the
    /// products' rows), of its prefill work (query-key pairs, cached context) and of its
    /// sequences (their KV reads, decode attention, sampled rows, per-sequence costs); all 1
    /// without data parallelism. One long prompt among a few decodes is nearly all one rank's
    /// work and holds the other ranks' step; many decodes spread evenly.
    pub fn busiest(dp: f64, b: &BatchStats) -> Self {
        if dp <= 1.0 {
            return RankShares::whole();
        }
        // `n` units of which one is `largest` units: the busiest rank takes that one whole and an
        // even share of the rest, or the rounded-up even share when nothing stands out.
        let busiest = |n: f64, largest: f64| {
            if n <= 0.0 {
                return 1.0;
            }
            let largest = largest.min(n);
            let even = (n / dp).ceil();
            let whole = if largest > 1.0 { largest + (n - largest) / dp } else { 0.0 };
            (even.max(whole) / n).min(1.0)
        };
        let largest = f64::from(b.max_new);
        RankShares {
            tokens: busiest(b.tokens() as f64, largest),
            prefill: busiest(b.prefill_tokens as f64, largest),
            seqs: busiest(f64::from(b.num_seqs), 1.0),
        }
    }
}
