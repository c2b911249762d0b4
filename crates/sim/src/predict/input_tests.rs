//! A request's inputs made as long as the plan counted them: a request's total spread over its
//! sequences, or each input its own count, and a rerank's sequences built from those lengths.

use proptest::prelude::*;
use serde_json::json;
use servebench_core::config::{Api, Backend, PoolingForm, RunConfig};

use super::*;
use crate::presets::Presets;

proptest! {
    /// Sequences resized to a plan's count hold it exactly, each near its share.
    #[test]
    fn resized_sequences_hold_the_total(lens in prop::collection::vec(0usize..50, 1..8), total in 0usize..400) {
        let mut seqs: Vec<Vec<u32>> = lens.iter().map(|&n| (0..n as u32).collect()).collect();
        resize_sequences(&mut seqs, total);
        prop_assert_eq!(seqs.iter().map(Vec::len).sum::<usize>(), total);
        let have: usize = lens.iter().sum();
        if have > 0 {
            for (s, &n) in seqs.iter().zip(&lens).take(lens.len() - 1) {
                let share = (total * n) as f64 / have as f64;
                prop_assert!((s.len() as f64 - share).abs() <= 1.0, "{} against {share}", s.len());
            }
        }
    }
}

/// One rerank body (a query of 3 words, documents of 2 and 4) read as `sim predict` reads it
/// under `convert`, with what the plan `counted`: the engine's sequences' lengths and the usage.
fn rerank(counted: Option<Counted>, convert: Convert) -> (Vec<usize>, Option<usize>) {
    let sim = SimSetup::resolve_with(&Presets::embedded().unwrap(), "Qwen/Qwen3-0.6B", "h100-sxm", &[], None).unwrap();
    let mut config = RunConfig::for_target("http://sim", "m");
    config.target.backend = Backend::VllmRerank;
    let body = json!({"model": "m", "query": "a b c", "documents": ["d e", "f g h i"]}).to_string();
    let served = Api::Pooling(PoolingForm::Rerank);
    let p = Prepared::of(body.as_bytes(), served, &config, &WordHashMapper, counted, &Tower::of(&sim), convert);
    assert_eq!(p.error, None);
    let lens = p.ids.iter().chain(&p.more).map(Vec::len).collect();
    (lens, p.usage)
}

#[test]
fn a_rerank_s_inputs_take_the_plan_s_counts_before_they_are_paired() {
    // The plan counted a query of 10 tokens and documents of 5 and 7 (and 34 for the request:
    // a reranker's pairs with their separators).
    let each = Some(Counted { total: 34, inputs: &[10, 5, 7] });
    // A cross-encoder: query, separator, document; an embedding model: the query once. Both
    // report vLLM's usage, each document with the query and one token between.
    assert_eq!(rerank(each, Convert::Classify), (vec![16, 18], Some(34)));
    assert_eq!(rerank(each, Convert::Embed), (vec![10, 5, 7], Some(34)));
    // Counted as the dataset does without a reranker (the query once: 22), the same lengths.
    let once = Some(Counted { total: 22, inputs: &[10, 5, 7] });
    assert_eq!(rerank(once, Convert::Classify), (vec![16, 18], Some(34)));
    // A plan that gives only the total (a plan file of an earlier release) spreads it over the
    // sequences as read: the pairs 6 and 8 words long, 34 tokens together.
    let total = Some(Counted { total: 34, inputs: &[] });
    assert_eq!(rerank(total, Convert::Classify), (vec![15, 19], Some(34)));
    // Without a tokenizer's counts, the words as they are.
    assert_eq!(rerank(None, Convert::Classify), (vec![6, 8], Some(14)));
}
