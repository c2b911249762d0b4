//! A speculative decoder's counters over a timed run, as vLLM's `/metrics` counts them
//! (`vllm:spec_decode_*_total`), and the acceptance figures `vllm bench serve` derives from them:
//! the counters are read before and after the run, and only what changed in between counts.

use serde::{Deserialize, Serialize};

use super::exposition::samples;

/// What a speculative decoder did over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpecDecodeCounts {
    /// Verifications of drafts (one a sequence a step).
    pub num_drafts: u64,
    pub draft_tokens: u64,
    pub accepted_tokens: u64,
    /// Accepted tokens at each draft position (the first is position 0).
    #[serde(default)]
    pub accepted_per_position: Vec<u64>,
}

impl SpecDecodeCounts {
    /// Accepted draft tokens, percent of those drafted.
    pub fn acceptance_rate_pct(&self) -> f64 {
        if self.draft_tokens == 0 { 0.0 } else { self.accepted_tokens as f64 / self.draft_tokens as f64 * 100.0 }
    }

    /// Tokens a verification yields on average: the one sampled and the drafts accepted.
    pub fn acceptance_length(&self) -> f64 {
        if self.num_drafts == 0 { 0.0 } else { 1.0 + self.accepted_tokens as f64 / self.num_drafts as f64 }
    }

    /// The share of verifications that accepted each position (and every one before it).
    pub fn per_position_rates(&self) -> Vec<f64> {
        let n = self.num_drafts.max(1) as f64;
        self.accepted_per_position.iter().map(|&a| a as f64 / n).collect()
    }

    /// The counters of one Prometheus exposition, every engine's label set summed; `None`
    /// where it has none (a server without speculative decoding, or not vLLM).
    pub fn read(text: &str) -> Option<SpecDecodeCounts> {
        let mut c = SpecDecodeCounts::default();
        let mut found = false;
        for s in samples(text).flatten() {
            let Some(name) = s.name.strip_prefix("vllm:spec_decode_").and_then(|n| n.strip_suffix("_total")) else {
                continue;
            };
            if !s.value.is_finite() || s.value < 0.0 {
                continue;
            }
            let v = s.value.round() as u64;
            match name {
                "num_drafts" => c.num_drafts += v,
                "num_draft_tokens" => c.draft_tokens += v,
                "num_accepted_tokens" => c.accepted_tokens += v,
                "num_accepted_tokens_per_pos" => {
                    let Some(pos) = position(s.labels) else { continue };
                    if pos >= c.accepted_per_position.len() {
                        c.accepted_per_position.resize(pos + 1, 0);
                    }
                    c.accepted_per_position[pos] += v;
                }
                _ => continue,
            }
            found = true;
        }
        found.then_some(c)
    }

    /// What changed from `before` to `after`; `None` where nothing was drafted in between (the
    /// report then has no speculative-decoding section, as vLLM's).
    pub fn between(before: Option<&SpecDecodeCounts>, after: &SpecDecodeCounts) -> Option<SpecDecodeCounts> {
        let zero = SpecDecodeCounts::default();
        let b = before.unwrap_or(&zero);
        let per_position = if b.accepted_per_position.is_empty()
            || b.accepted_per_position.len() == after.accepted_per_position.len()
        {
            let at = |i: usize| b.accepted_per_position.get(i).copied().unwrap_or(0);
            after.accepted_per_position.iter().enumerate().map(|(i, &a)| a.saturating_sub(at(i))).collect()
        } else {
            Vec::new()
        };
        let d = SpecDecodeCounts {
            num_drafts: after.num_drafts.saturating_sub(b.num_drafts),
            draft_tokens: after.draft_tokens.saturating_sub(b.draft_tokens),
            accepted_tokens: after.accepted_tokens.saturating_sub(b.accepted_tokens),
            accepted_per_position: per_position,
        };
        (d.num_drafts > 0 && d.draft_tokens > 0).then_some(d)
    }
}

/// The `position` label of a per-position counter (`{engine="0",position="2"}`).
fn position(labels: &str) -> Option<usize> {
    let rest = &labels[labels.find("position=\"")? + "position=\"".len()..];
    rest[..rest.find('"')?].parse().ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const BEFORE: &str = "# HELP vllm:spec_decode_num_drafts_total Drafts.\n\
        # TYPE vllm:spec_decode_num_drafts_total counter\n\
        vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 10.0\n\
        vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 20.0\n\
        vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 12.0\n\
        vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"0\"} 8.0\n\
        vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"1\"} 4.0\n\
        vllm:num_requests_running{engine=\"0\"} 3.0\n";

    #[test]
    fn counters_are_read_from_vllms_exposition_and_differenced_over_the_run() {
        let before = SpecDecodeCounts::read(BEFORE).unwrap();
        assert_eq!(before.accepted_per_position, vec![8, 4]);
        let after_text = BEFORE
            .replace("} 10.0", "} 110.0")
            .replace("} 20.0", "} 220.0")
            .replace("} 12.0", "} 142.0")
            .replace("} 8.0", "} 88.0")
            .replace("} 4.0", "} 54.0");
        let after = SpecDecodeCounts::read(&after_text).unwrap();
        let d = SpecDecodeCounts::between(Some(&before), &after).unwrap();
        assert_eq!((d.num_drafts, d.draft_tokens, d.accepted_tokens), (100, 200, 130));
        assert_eq!(d.accepted_per_position, vec![80, 50]);
        assert!((d.acceptance_rate_pct() - 65.0).abs() < 1e-12);
        assert!((d.acceptance_length() - 2.3).abs() < 1e-12);
        assert_eq!(d.per_position_rates(), vec![0.8, 0.5]);
        // Nothing drafted over the run, or no counters at all: no section.
        assert_eq!(SpecDecodeCounts::between(Some(&before), &before), None);
        assert_eq!(SpecDecodeCounts::read("vllm:num_requests_running 3\n"), None);
        // Two engines' label sets add up.
        let two = format!("{BEFORE}{}", BEFORE.replace("engine=\"0\"", "engine=\"1\""));
        assert_eq!(SpecDecodeCounts::read(&two).unwrap().num_drafts, 20);
    }

    proptest! {
        /// Any counts read back as written, and a difference never exceeds what was counted.
        #[test]
        fn counts_round_trip_and_differences_are_bounded(
            drafts in 1u64..1_000_000, tokens in 1u64..4, share in 0.0f64..1.0, start in 0u64..1000,
        ) {
            let draft_tokens = drafts * tokens;
            let accepted = (draft_tokens as f64 * share) as u64;
            let text = |d: u64, t: u64, a: u64| format!(
                "vllm:spec_decode_num_drafts_total {d}\nvllm:spec_decode_num_draft_tokens_total {t}\n\
                 vllm:spec_decode_num_accepted_tokens_total {a}\n"
            );
            let before = SpecDecodeCounts::read(&text(start, start * tokens, 0)).unwrap();
            let after = SpecDecodeCounts::read(&text(start + drafts, (start + drafts) * tokens, accepted)).unwrap();
            let d = SpecDecodeCounts::between(Some(&before), &after).unwrap();
            prop_assert_eq!((d.num_drafts, d.draft_tokens, d.accepted_tokens), (drafts, draft_tokens, accepted));
            prop_assert!(d.acceptance_rate_pct() <= 100.0);
            prop_assert!(d.acceptance_length() >= 1.0 && d.acceptance_length() <= 1.0 + tokens as f64);
        }
    }
}
