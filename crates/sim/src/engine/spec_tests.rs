//! Speculative decoding in the engine: drafts verified each step, accepted ones emitted in the
//! chunk of the token before them, the acceptance drawn at the given rates, and the scheduler's
//! invariants kept.

use proptest::prelude::*;

use super::tests::{add_random_requests, config, engine, every_request_ended_at_its_length, ids, request, run_checked};
use super::*;

fn spec_config(tokens: u32, rates: &[f64]) -> EngineConfig {
    EngineConfig { spec: Some(SpecDraws::from_rates(tokens, rates)), ..config(400, 8, 512, true) }
}

/// Every step's emissions of a run, as (index, continues) of each token.
fn steps_of(e: &mut Engine) -> Vec<Vec<(u32, bool)>> {
    let mut steps = Vec::new();
    while let Some(step) = e.step() {
        steps.push(step.emissions.iter().map(|m| (m.index, m.continues)).collect());
    }
    steps
}

#[test]
fn drafts_always_accepted_give_one_token_and_every_draft_a_step() {
    let mut e = engine(spec_config(2, &[1.0, 1.0]), 1);
    e.add(request(0, ids(40, 1), 7, 0)).unwrap();
    let steps = steps_of(&mut e);
    assert_eq!(
        steps,
        vec![vec![(1, false)], vec![(2, false), (3, true), (4, true)], vec![(5, false), (6, true), (7, true)],]
    );
    let c = e.counters();
    assert_eq!((c.spec_drafts, c.spec_draft_tokens, c.spec_accepted), (2, 4, 4));
    assert_eq!(&c.spec_accepted_per_pos[..3], &[2, 2, 0]);
    assert_eq!(c.generation_tokens, 7);
}

#[test]
fn drafts_never_accepted_still_cost_their_verification() {
    let mut e = engine(spec_config(3, &[0.0, 0.0, 0.0]), 1);
    e.add(request(0, ids(40, 1), 5, 0)).unwrap();
    let mut decode_tokens = Vec::new();
    let mut emitted = 0;
    while let Some(step) = e.step() {
        decode_tokens.push(step.batch.decode_tokens);
        emitted += step.emissions.len();
        assert!(step.emissions.iter().all(|m| !m.continues));
    }
    assert_eq!(emitted, 5);
    // The prompt's step, then the last token and three drafts, then fewer drafts as the
    // request's room runs out (no draft past its last output).
    assert_eq!(decode_tokens, vec![0, 4, 3, 2, 1]);
    assert_eq!(e.counters().spec_accepted, 0);
}

#[test]
fn a_request_s_last_tokens_take_no_drafts_past_its_end() {
    let mut e = engine(spec_config(4, &[1.0, 1.0, 1.0, 1.0]), 1);
    e.add(request(0, ids(20, 1), 3, 0)).unwrap();
    let steps = steps_of(&mut e);
    // Two outputs remain after the first: one token and one draft, both accepted.
    assert_eq!(steps, vec![vec![(1, false)], vec![(2, false), (3, true)]]);
    assert_eq!(e.counters().spec_draft_tokens, 1);
}

#[test]
fn drafts_are_accepted_at_the_rates_given() {
    let mut e = engine(EngineConfig { max_num_seqs: 64, ..spec_config(2, &[0.8, 0.5]) }, 7);
    for tag in 0..64 {
        e.add(request(tag, ids(30, tag as u32), 200, 0)).unwrap();
    }
    let (done, _) = run_checked(&mut e);
    assert_eq!(done.len(), 64);
    assert!(done.iter().all(|d| d.1 == 200 && d.2 == Some(FinishReason::Length)));
    let c = e.counters();
    let drafts = c.spec_drafts as f64;
    let p1 = c.spec_accepted_per_pos[0] as f64 / drafts;
    let p2 = c.spec_accepted_per_pos[1] as f64 / drafts;
    assert!((p1 - 0.8).abs() < 0.02 && (p2 - 0.5).abs() < 0.02, "{p1} {p2} over {drafts} drafts");
    assert_eq!(c.spec_accepted, c.spec_accepted_per_pos.iter().sum::<u64>());
    assert_eq!(c.generation_tokens, 64 * 200);
}

#[test]
fn rates_become_the_chance_of_each_draft_after_the_one_before() {
    let d = SpecDraws::from_rates(3, &[0.8, 0.4, 0.0]);
    assert_eq!(d.conditional, vec![0.8, 0.5, 0.0]);
    assert_eq!(SpecDraws::from_rates(2, &[0.0, 0.0]).conditional, vec![0.0, 0.0]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// With drafts verified every step, every request still ends at its length, within the
    /// budget, `max_num_seqs` and the block pool (checked after each step), and frees its blocks.
    #[test]
    fn scheduler_invariants_hold_with_speculative_decoding(
        lens in prop::collection::vec((1u32..300, 1u32..80, 0u64..50_000_000), 1..30),
        blocks in 40u64..400,
        seqs in 1u32..16,
        budget in 16u32..600,
        caching in any::<bool>(),
        tokens in 1u32..5,
        rate in 0.0f64..1.0,
    ) {
        let budget = budget.max(seqs);
        let rates: Vec<f64> = (1..=tokens).map(|i| rate.powi(i as i32)).collect();
        let cfg = EngineConfig { spec: Some(SpecDraws::from_rates(tokens, &rates)), ..config(blocks, seqs, budget, caching) };
        let mut e = engine(cfg, 3);
        let asked = add_random_requests(&mut e, &lens, blocks, false);
        let (done, _) = run_checked(&mut e);
        every_request_ended_at_its_length(&done, &asked)?;
        let c = e.counters();
        prop_assert!(c.spec_accepted <= c.spec_draft_tokens);
        prop_assert!(e.is_idle());
        prop_assert_eq!(e.pool.used_units(), 0);
    }
}
