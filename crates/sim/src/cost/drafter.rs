//! A speculative decoder's drafter, priced pass by pass as vLLM runs it: one forward pass of the
//! draft model (or the model's MTP layer) for each draft token, the first over every token of
//! the step (it reads the verified positions' hidden states), the others over one token of each
//! sequence that samples. Its passes run inside the step, so they pay no step's fixed cost of
//! their own, only their layers' and the LM head's.

use super::{BatchStats, CostModel};
use crate::setup::SimSetup;

#[derive(Clone, Debug, PartialEq)]
pub(super) struct Drafter {
    /// One pass of the draft model, without a step's own fixed costs.
    pass: CostModel,
    /// Draft tokens a step proposes for each sequence: passes a step.
    tokens: u32,
}

impl Drafter {
    /// The drafter of a setup with speculative decoding on the GPU; none otherwise.
    pub(super) fn of(setup: &SimSetup) -> Option<Box<Drafter>> {
        let spec = setup.options.speculative.as_ref()?;
        let model = setup.drafter.as_ref()?;
        let mut s = setup.clone();
        s.model = model.clone();
        s.drafter = None;
        s.options.speculative = None;
        s.notes.clear();
        // The step's scheduling, sampling and host work are the step's, counted once.
        s.stack.t0_ms = 0.0;
        s.stack.t_seq_us = 0.0;
        s.stack.t_host_ms = 0.0;
        s.stack.t_host_seq_us = 0.0;
        s.stack.t_admit_us = 0.0;
        Some(Box::new(Drafter { pass: CostModel::new(&s), tokens: spec.num_speculative_tokens }))
    }

    /// Seconds the drafter adds to a step: nothing when no sequence samples.
    pub(super) fn seconds(&self, b: &BatchStats) -> f64 {
        if b.sampling_seqs == 0 {
            return 0.0;
        }
        let first = self.pass.breakdown(b).total;
        let later = match self.tokens {
            0 | 1 => 0.0,
            k => f64::from(k - 1) * self.pass.breakdown(&b.draft_pass()).total,
        };
        first + later
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::cost::{BatchStats, CostModel};
    use crate::setup::SimSetup;

    fn cost(model: &str, options: &[(&str, &str)]) -> CostModel {
        let pairs: Vec<(String, String)> = options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let presets = crate::presets::Presets::embedded().unwrap();
        CostModel::new(&SimSetup::resolve_with(&presets, model, "h200", &pairs, None).unwrap())
    }

    fn mtp(tokens: u32) -> [(&'static str, String); 2] {
        [
            ("speculative-config", format!(r#"{{"method": "mtp", "num_speculative_tokens": {tokens}}}"#)),
            ("spec-acceptance", "0.7".to_string()),
        ]
    }

    fn decodes(seqs: u32, drafts: u32, context: u32) -> BatchStats {
        let mut b = BatchStats::default();
        for _ in 0..seqs {
            b.add_verification(context, 1 + drafts, 0);
        }
        b
    }

    #[test]
    fn an_mtp_draft_costs_about_one_layer_of_the_model_and_ngram_drafts_cost_nothing() {
        let opts = mtp(1);
        let pairs: Vec<(&str, &str)> = opts.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let with = cost("Qwen/Qwen3-8B", &pairs).breakdown(&decodes(8, 1, 1024));
        let without = cost("Qwen/Qwen3-8B", &[]).breakdown(&decodes(8, 1, 1024));
        assert_eq!(without.drafting, 0.0);
        // Qwen3-8B has 36 layers: one more, with the LM head, is a few percent of the step's
        // products, and nothing of its fixed cost a step.
        let layers = with.dense + with.attention;
        assert!(
            with.drafting > layers / 36.0 && with.drafting < 3.0 * (layers / 36.0 + with.lm_head) + 1e-4,
            "{with:?}"
        );
        assert!((with.total - without.total - with.drafting).abs() < 1e-12);
        let ngram = cost(
            "Qwen/Qwen3-8B",
            &[
                ("speculative-config", r#"{"method": "ngram", "num_speculative_tokens": 3}"#),
                ("spec-acceptance", "0.3"),
            ],
        );
        assert_eq!(ngram.breakdown(&decodes(8, 3, 1024)).drafting, 0.0);
        // A step where no sequence samples (a prompt's middle chunk) drafts nothing.
        let mut chunk = BatchStats::default();
        chunk.add_sequence(0, 512, 0, true, false);
        assert_eq!(cost("Qwen/Qwen3-8B", &pairs).breakdown(&chunk).drafting, 0.0);
    }

    /// Under CUDA graphs a step with more drafts may cost less: the captured sizes follow the
    /// drafts (multiples of 1 + k), so four sequences with two drafts pad their 12 rows to 18,
    /// where with three they run their 16 in a graph of 16, and the padded rows reach the
    /// experts, as in vLLM.
    #[test]
    fn graph_padding_can_make_fewer_drafts_cost_more() {
        let step = |k: u32| {
            let opts = mtp(k);
            let pairs: Vec<(&str, &str)> = opts.iter().map(|(a, b)| (*a, b.as_str())).collect();
            cost("deepseek-ai/DeepSeek-R1", &[&pairs[..], &[("tp", "8")]].concat()).breakdown(&decodes(4, k, 1))
        };
        let (two, three) = (step(2), step(3));
        assert!(two.experts > three.experts && two.total > three.total, "{two:?} {three:?}");
        assert!(three.drafting > two.drafting);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// More draft tokens never take less time without CUDA graphs (whose padding the test
        /// above shows): each is one more pass of the drafter, and one more position each
        /// sequence verifies.
        #[test]
        fn more_drafts_never_take_less_time(seqs in 1u32..64, context in 1u32..8192, tokens in 1u32..4) {
            let step = |k: u32| {
                let opts = mtp(k);
                let pairs: Vec<(&str, &str)> = opts.iter().map(|(a, b)| (*a, b.as_str())).collect();
                let eager = [("tp", "8"), ("cudagraph-mode", "none")];
                let c = cost("deepseek-ai/DeepSeek-R1", &[&pairs[..], &eager[..]].concat());
                c.breakdown(&decodes(seqs, k, context))
            };
            let (fewer, more) = (step(tokens), step(tokens + 1));
            prop_assert!(more.drafting >= fewer.drafting, "{:?} {:?}", fewer, more);
            prop_assert!(more.total >= fewer.total, "{:?} {:?}", fewer, more);
        }
    }
}
