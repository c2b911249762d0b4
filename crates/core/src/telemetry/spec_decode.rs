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

/// The counters as read just before and just after a timed run: what a run keeps, so that the
/// readings of several clients of one server over one run (a sharded run's workers) can be
/// joined into the run's own.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpecDecodeWindow {
    /// `None` where the server had no counters yet (it had drafted nothing).
    #[serde(default)]
    pub before: Option<SpecDecodeCounts>,
    pub after: SpecDecodeCounts,
}

impl SpecDecodeWindow {
    /// What the decoder did within the window; `None` where it drafted nothing.
    pub fn counts(&self) -> Option<SpecDecodeCounts> {
        SpecDecodeCounts::between(self.before.as_ref(), &self.after)
    }

    /// The window from the earliest of `windows`' readings before to the latest after, all of
    /// one server: counters only grow, so that is the least of each counter before and the
    /// greatest after. `None` without any window.
    pub fn join<'a>(windows: impl IntoIterator<Item = &'a SpecDecodeWindow>) -> Option<SpecDecodeWindow> {
        let mut windows = windows.into_iter();
        let mut joined = windows.next()?.clone();
        for w in windows {
            joined.before = match (joined.before, &w.before) {
                (Some(a), Some(b)) => Some(a.zip_with(b, u64::min)),
                _ => None,
            };
            joined.after = joined.after.zip_with(&w.after, u64::max);
        }
        Some(joined)
    }
}

impl SpecDecodeCounts {
    /// Each counter of `self` and `other` combined by `f` (a position one side lacks counts 0).
    fn zip_with(&self, other: &SpecDecodeCounts, f: impl Fn(u64, u64) -> u64) -> SpecDecodeCounts {
        let positions = self.accepted_per_position.len().max(other.accepted_per_position.len());
        let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
        SpecDecodeCounts {
            num_drafts: f(self.num_drafts, other.num_drafts),
            draft_tokens: f(self.draft_tokens, other.draft_tokens),
            accepted_tokens: f(self.accepted_tokens, other.accepted_tokens),
            accepted_per_position: (0..positions)
                .map(|i| f(at(&self.accepted_per_position, i), at(&other.accepted_per_position, i)))
                .collect(),
        }
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

        /// Windows read from one server's growing counters join into the window from the
        /// earliest reading to the latest, whatever their order.
        #[test]
        fn joined_windows_span_from_the_earliest_reading_to_the_latest(
            steps in proptest::collection::vec((0u64..50, 0u64..3, 0u64..3), 2..30),
            picks in proptest::collection::vec((0usize..30, 0usize..30), 1..6),
        ) {
            // The server's counters at each reading: drafts of 2 tokens, accepted at 2 positions.
            let mut timeline = vec![SpecDecodeCounts { accepted_per_position: vec![0, 0], ..Default::default() }];
            for &(drafts, first, second) in &steps {
                let last = timeline.last().unwrap();
                let (first, second) = (first.min(drafts), second.min(first.min(drafts)));
                timeline.push(SpecDecodeCounts {
                    num_drafts: last.num_drafts + drafts,
                    draft_tokens: last.draft_tokens + 2 * drafts,
                    accepted_tokens: last.accepted_tokens + first + second,
                    accepted_per_position: vec![
                        last.accepted_per_position[0] + first,
                        last.accepted_per_position[1] + second,
                    ],
                });
            }
            let n = timeline.len();
            let spans: Vec<(usize, usize)> = picks.iter().map(|&(a, b)| (a % n, b % n)).map(|(a, b)| (a.min(b), a.max(b))).collect();
            let windows: Vec<SpecDecodeWindow> = spans
                .iter()
                .map(|&(a, b)| SpecDecodeWindow { before: Some(timeline[a].clone()), after: timeline[b].clone() })
                .collect();
            let earliest = spans.iter().map(|s| s.0).min().unwrap();
            let latest = spans.iter().map(|s| s.1).max().unwrap();
            let joined = SpecDecodeWindow::join(&windows).unwrap();
            prop_assert_eq!(&joined.before, &Some(timeline[earliest].clone()));
            prop_assert_eq!(&joined.after, &timeline[latest]);
            prop_assert_eq!(SpecDecodeWindow::join(windows.iter().rev()), Some(joined.clone()));
            // The whole run drafted at least what any one reader saw.
            let whole = joined.counts().map_or(0, |c| c.num_drafts);
            for w in &windows {
                prop_assert!(w.counts().map_or(0, |c| c.num_drafts) <= whole);
            }
        }
    }

    #[test]
    fn a_window_opened_before_any_counter_counts_from_zero() {
        let after =
            SpecDecodeCounts { num_drafts: 5, draft_tokens: 10, accepted_tokens: 4, accepted_per_position: vec![3, 1] };
        let fresh = SpecDecodeWindow { before: None, after: after.clone() };
        assert_eq!(fresh.counts(), Some(after.clone()));
        let later = SpecDecodeWindow { before: Some(after.clone()), after: after.clone() };
        assert_eq!(later.counts(), None, "nothing drafted within it");
        assert_eq!(SpecDecodeWindow::join([&later, &fresh]).unwrap().counts(), Some(after));
        assert_eq!(SpecDecodeWindow::join(std::iter::empty()), None);
    }
}
