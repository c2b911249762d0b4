//! Merging workers' result files: the whole run's summary, and missing, duplicate, foreign or
//! overlapping shards refused with the reason.

use proptest::prelude::*;
use servebench_core::metrics::Summary;
use servebench_core::record::{Failure, FailureKind, TurnRef, Usage};
use servebench_core::shard::{ClockOffset, Shard};
use servebench_core::vllm::result_json;

use super::*;
use crate::testutil::sample_run;

/// Wall-clock start of rank 0's timed run on its own clock (rank 0's clock is the reference).
const T0: i64 = 1_750_000_000_000_000_000;

/// A whole run of `n` requests with chunk gaps drawn from `gaps_us`, every fifth one failed.
fn whole_run(n: usize, gaps_us: &[u32]) -> RunResult {
    let mut run = sample_run();
    run.config.output.save_detailed = true;
    run.config.traffic.num_prompts = n;
    run.config.traffic.max_concurrency = Some(8);
    run.records = (0..n)
        .map(|i| {
            let planned = 2_000_000 + i as u64 * 7_919_123;
            let start = planned + 1_000 + (i as u64 % 3) * 250_000;
            if i % 5 == 4 {
                return RequestRecord {
                    index: i as u32,
                    planned_ns: planned,
                    arrival_ns: planned + 1_000,
                    start_ns: start,
                    status: 500,
                    failure: Some(Failure { kind: FailureKind::HttpStatus, message: format!("500 on {i}") }),
                    ..RequestRecord::default()
                };
            }
            let mut t = 40_000 + (i as u32 % 7) * 1_013;
            let mut chunks = vec![t];
            for g in gaps_us.iter().cycle().skip(i).take(3 + i % 4) {
                t += g;
                chunks.push(t);
            }
            RequestRecord {
                index: i as u32,
                planned_ns: planned,
                arrival_ns: planned + 1_000,
                start_ns: start,
                end_us: t + 17,
                usage: Usage { prompt_tokens: Some(100 + i as u32), completion_tokens: Some(chunks.len() as u32) },
                chunks_us: chunks,
                max_tokens: 16,
                prompt_tokens_client: Some(99),
                text: format!("text {i}"),
                status: 200,
                server_queue_s: Some(0.000_25 * i as f64),
                ..RequestRecord::default()
            }
        })
        .collect();
    let end = run.records.iter().map(|r| r.start_ns + u64::from(r.end_us) * 1_000).max().unwrap_or(0);
    run.duration_s = end as f64 * 1e-9;
    run
}

/// What rank `rank` of `world` would have written for `whole`: its requests, its times on
/// its own timeline (its timed run began `late_ns` after rank 0's, its clock reads
/// `offset_ns` behind rank 0's), as the JSON it saves.
fn worker_file(whole: &RunResult, rank: u32, world: u32, late_ns: u64, offset_ns: i64) -> String {
    let shard = Shard::new(rank, world).unwrap();
    let mut run = whole.clone();
    run.records = whole.records.iter().filter(|r| shard.owns(r.index as usize)).cloned().collect();
    for r in &mut run.records {
        r.planned_ns -= late_ns;
        r.arrival_ns -= late_ns;
        r.start_ns -= late_ns;
    }
    if rank > 0 {
        // Ends before rank 0, whose duration is the whole run's.
        run.duration_s = whole.duration_s / 2.0;
    }
    let split = servebench_core::shard::split_concurrency(8, world).unwrap();
    run.config.traffic.max_concurrency = Some(split[rank as usize]);
    run.shard = Some(Sharding::Worker(WorkerShard {
        rank,
        world,
        plan_hash: "0123456789abcdef".into(),
        plan_requests: whole.records.len(),
        max_concurrency: Some(8),
        concurrency_split: split,
        start_unix_ns: Some(T0),
        clock: (rank > 0).then_some(ClockOffset { offset_ns, rtt_ns: 120_000, samples: 8 }),
        t0_unix_ns: T0 + late_ns as i64 - if rank > 0 { offset_ns } else { 0 },
    }));
    let summary = Summary::compute(&run);
    serde_json::to_string(&result_json(&run, &summary)).unwrap()
}

fn read(text: &str, rank: u32) -> ShardResult {
    read_shard_result(text, &format!("rank{rank}.json")).unwrap()
}

fn shards(whole: &RunResult, world: u32) -> Vec<ShardResult> {
    (0..world)
        .map(|rank| {
            read(&worker_file(whole, rank, world, u64::from(rank) * 3_000, i64::from(rank) * 977 - 1_500), rank)
        })
        .collect()
}

proptest! {
    #[test]
    fn merged_records_give_the_summary_of_the_whole_set(
        n in 1usize..40,
        world in 1u32..6,
        gaps in proptest::collection::vec(1u32..90_000, 1..8),
    ) {
        let whole = whole_run(n, &gaps);
        let merged = merge_shards(shards(&whole, world), false).unwrap();
        prop_assert_eq!(&merged.records, &whole.records);
        prop_assert_eq!(merged.duration_s, whole.duration_s);
        prop_assert_eq!(merged.config.traffic.max_concurrency, Some(8));
        prop_assert_eq!(Summary::compute(&merged), Summary::compute(&whole));
    }
}

#[test]
fn the_merge_records_its_shards() {
    let whole = whole_run(12, &[10_000, 20_000]);
    let merged = merge_shards(shards(&whole, 3), false).unwrap();
    let Some(Sharding::Merged(m)) = &merged.shard else { panic!("not marked merged") };
    assert_eq!((m.world, m.plan_hash.as_str(), m.missing.len()), (3, "0123456789abcdef", 0));
    assert_eq!(m.concurrency_split, [3, 3, 2]);
    assert_eq!(
        m.ranks.iter().map(|r| (r.rank, r.requests, r.rebased_ns)).collect::<Vec<_>>(),
        [(0, 4, 0), (1, 4, 3_000), (2, 4, 6_000)]
    );
    assert!(merged.notes.iter().any(|n| n == "Merged from 3 of 3 shards (plan 0123456789abcdef)."));
    let json = result_json(&merged, &Summary::compute(&merged));
    assert_eq!(json["servebench"]["shard"]["role"], "merged");
    assert_eq!(json["servebench"]["requests"].as_array().unwrap().len(), 12);
}

#[test]
fn the_speculative_decoder_s_counters_span_every_worker_s_reading_of_the_server() {
    use servebench_core::telemetry::{SpecDecodeCounts, SpecDecodeWindow};
    let counts = |drafts: u64, first: u64, second: u64| SpecDecodeCounts {
        num_drafts: drafts,
        draft_tokens: 2 * drafts,
        accepted_tokens: first + second,
        accepted_per_position: vec![first, second],
    };
    let whole = whole_run(12, &[10_000, 20_000]);
    // Three workers of one server read its counters around their own timed runs: rank 1 first
    // (before: 100 drafts), rank 2 last (after: 1,100); the server drafted 1,000 times between.
    let windows = [(140, 190, 1_050), (100, 150, 1_000), (120, 170, 1_100)];
    let parts: Vec<ShardResult> = windows
        .iter()
        .enumerate()
        .map(|(rank, &(before, _, after))| {
            let mut run = whole.clone();
            run.spec_decode = Some(SpecDecodeWindow {
                before: Some(counts(before, before / 2, before / 4)),
                after: counts(after, after / 2, after / 4),
            });
            let text = worker_file(&run, rank as u32, 3, rank as u64 * 3_000, rank as i64 * 977 - 1_500);
            read(&text, rank as u32)
        })
        .collect();
    assert!(parts.iter().all(|p| p.run.spec_decode.is_some()), "each worker's file keeps its reading");
    let merged = merge_shards(parts.clone(), false).unwrap();
    let spec = Summary::compute(&merged).spec_decode.unwrap();
    assert_eq!((spec.num_drafts, spec.draft_tokens), (1_000, 2_000));
    assert_eq!(spec.accepted_per_position, vec![500, 250]);
    // One worker's own window is only part of the run; the three summed would count the
    // server's drafts thrice.
    let own = Summary::compute(&parts[0].run).spec_decode.unwrap();
    assert_eq!(own.num_drafts, 910);
    // A worker that could not read the counters leaves the others' span.
    let mut some = parts;
    some[2].run.spec_decode = None;
    let spec = Summary::compute(&merge_shards(some, false).unwrap()).spec_decode.unwrap();
    assert_eq!(spec.num_drafts, 950);
}

#[test]
fn the_probes_come_through_the_merge_on_the_merged_clock() {
    use servebench_core::record::ProbeRecord;
    let probe = |sent_s: f64| ProbeRecord { sent_s, latency_s: 0.02, error: None };
    let whole = whole_run(12, &[10_000, 20_000]);
    // Rank 0 sends the run's probes; a probe of a rank that began 3 µs late moves 3 µs later.
    let parts: Vec<ShardResult> = (0..3u32)
        .map(|rank| {
            let mut run = whole.clone();
            run.probes = match rank {
                0 => vec![probe(0.1), probe(0.3)],
                1 => vec![probe(0.2)],
                _ => Vec::new(),
            };
            read(&worker_file(&run, rank, 3, u64::from(rank) * 3_000, 0), rank)
        })
        .collect();
    let merged = merge_shards(parts, false).unwrap();
    let sent: Vec<f64> = merged.probes.iter().map(|p| p.sent_s).collect();
    assert_eq!(sent, [0.1, 0.3, 0.2 + 3e-6]);
    assert_eq!(Summary::compute(&merged).probes.map(|p| p.completed), Some(3));
}

#[test]
fn a_missing_rank_is_refused_and_merged_with_partial() {
    let whole = whole_run(10, &[5_000]);
    let mut parts = shards(&whole, 4);
    parts.remove(2);
    let e = merge_shards(parts.clone(), false).unwrap_err();
    assert_eq!(
        e.to_string(),
        "rank 2 of 4 missing (present: 0, 1, 3); pass every worker's result, or --partial to merge those present (the result is marked partial)"
    );
    let merged = merge_shards(parts, true).unwrap();
    let Some(Sharding::Merged(m)) = &merged.shard else { panic!("not marked merged") };
    assert_eq!(m.missing, [2]);
    assert!(m.partial());
    assert_eq!(merged.records.len(), 10 - 2);
    assert!(
        merged.notes.iter().any(|n| n.starts_with("PARTIAL: rank 2 of 4 missing; 8 of the plan's 10")),
        "{:?}",
        merged.notes
    );
}

#[test]
fn a_duplicate_rank_a_foreign_plan_and_another_world_are_refused() {
    let whole = whole_run(6, &[5_000]);
    let mut twice = shards(&whole, 2);
    twice.push(read_shard_result(&worker_file(&whole, 1, 2, 0, 0), "again/rank1.json").unwrap());
    let e = merge_shards(twice, false).unwrap_err().to_string();
    assert!(
        e.starts_with("rank 1 appears twice: in rank1.json and in again/rank1.json")
            || e.contains("rank 1 appears twice"),
        "{e}"
    );

    let mut foreign = shards(&whole, 2);
    if let Some(p) = foreign.get_mut(1) {
        p.worker.plan_hash = "ffffffffffffffff".into();
    }
    assert_eq!(
        merge_shards(foreign, false).unwrap_err().to_string(),
        "rank1.json (rank 1) sent a plan with hash ffffffffffffffff, but rank0.json sent 0123456789abcdef: the workers built \
         different plans (check that every worker had the same flags, seed, dataset files and tokenizer)"
    );

    // A worker that ran another model, or a different workload, is another run: the plans'
    // hashes cover the bodies, not every setting saved beside them.
    let mut other_model = shards(&whole, 2);
    other_model[1].run.config.target.model_id = "other/model".into();
    let e = merge_shards(other_model, false).unwrap_err().to_string();
    assert!(e.starts_with("rank1.json (rank 1) ran with a different model (--model) than rank0.json"), "{e}");
    assert!(e.contains("\"other/model\" against"), "{e}");
    let mut other_seed = shards(&whole, 2);
    other_seed[1].run.config.traffic.seed += 1;
    let e = merge_shards(other_seed, false).unwrap_err().to_string();
    assert!(e.contains("ran with a different traffic"), "{e}");
    // Each worker's share of the concurrency and its own name for the server are its own.
    let mut own_address = shards(&whole, 2);
    own_address[1].run.config.target.base_url = "http://10.0.0.7:8000".into();
    assert!(merge_shards(own_address, false).is_ok());

    let mut other_world = shards(&whole, 2);
    other_world.push(read(&worker_file(&whole, 2, 3, 0, 0), 2));
    let e = merge_shards(other_world, true).unwrap_err().to_string();
    assert!(e.contains("rank2.json is rank 2 of 3 workers, but rank0.json is of 2"), "{e}");
}

#[test]
fn overlapping_shards_are_refused() {
    let whole = whole_run(6, &[5_000]);
    let mut parts = shards(&whole, 2);
    let stray = parts[0].run.records[1].clone();
    parts[1].run.records.push(stray);
    assert_eq!(
        merge_shards(parts, false).unwrap_err().to_string(),
        "request 2 was sent by rank 0 and again by rank 1; the shards overlap"
    );
}

#[test]
fn turns_are_keyed_by_conversation_and_renumbered_in_conversation_order() {
    let mut whole = whole_run(6, &[5_000]);
    for (slot, r) in whole.records.iter_mut().enumerate() {
        r.turn = Some(TurnRef { conversation: slot as u32 / 2, turn: slot as u32 % 2, shared_prefix_tokens: 0 });
    }
    // Conversation c is on rank c % 2; its turns are numbered from 0 on each worker.
    let mut parts = Vec::new();
    for rank in 0..2u32 {
        let mut run = whole.clone();
        run.records.retain(|r| r.turn.unwrap().conversation % 2 == rank);
        for (slot, r) in run.records.iter_mut().enumerate() {
            r.index = slot as u32;
        }
        run.shard = Some(Sharding::Worker(WorkerShard {
            rank,
            world: 2,
            plan_hash: "aa".into(),
            plan_requests: 6,
            max_concurrency: None,
            concurrency_split: Vec::new(),
            start_unix_ns: None,
            clock: None,
            t0_unix_ns: T0,
        }));
        let text = serde_json::to_string(&result_json(&run, &Summary::compute(&run))).unwrap();
        parts.push(read(&text, rank));
    }
    let merged = merge_shards(parts, false).unwrap();
    assert_eq!(merged.records, whole.records);
}

#[test]
fn files_that_are_not_worker_results_are_refused_with_the_reason() {
    let mut plain = sample_run();
    plain.config.output.save_detailed = true;
    let text = serde_json::to_string(&result_json(&plain, &Summary::compute(&plain))).unwrap();
    assert!(
        read_shard_result(&text, "plain.json")
            .unwrap_err()
            .to_string()
            .starts_with("plain.json is not a worker's result")
    );

    let whole = whole_run(4, &[5_000]);
    let mut value: Value = serde_json::from_str(&worker_file(&whole, 0, 1, 0, 0)).unwrap();
    value.as_object_mut().unwrap().remove("itls");
    assert_eq!(
        read_shard_result(&value.to_string(), "r0.json").unwrap_err(),
        MergeError::NoChunkTimes { file: "r0.json".into() }
    );
    assert!(read_shard_result("{", "x.json").unwrap_err().to_string().starts_with("x.json: not one JSON document"));
    assert_eq!(merge_shards(Vec::new(), true).unwrap_err(), MergeError::Empty);
}

#[test]
fn impossible_shard_metadata_and_times_are_refused_with_the_reason() {
    let whole = whole_run(8, &[5_000]);
    let edit = |rank: u32, f: &dyn Fn(&mut Value)| {
        let mut v: Value = serde_json::from_str(&worker_file(&whole, rank, 2, 0, 0)).unwrap();
        f(&mut v);
        read_shard_result(&v.to_string(), "w.json")
    };
    for (key, value) in [("world", 0), ("rank", 5)] {
        let e = edit(1, &|v| v["servebench"]["shard"][key] = value.into()).unwrap_err().to_string();
        assert!(e.contains("ranks run from 0 to the world size less one"), "{key}: {e}");
    }
    let e = edit(0, &|v| v["servebench"]["requests"][0]["ttft_s"] = (-1.0).into()).unwrap_err().to_string();
    assert!(e.contains("request 0: `ttft_s` holds -1.0, not a time of 0 s or more"), "{e}");

    // A worker whose start lies years from the others' is not of the same run.
    let mut parts = shards(&whole, 2);
    if let Some(Sharding::Worker(w)) = &mut parts[1].run.shard {
        w.t0_unix_ns = i64::MAX;
    }
    parts[1].worker.t0_unix_ns = i64::MAX;
    let e = merge_shards(parts, false).unwrap_err();
    assert!(matches!(e, MergeError::StartsApart { rank: 1, .. }), "{e}");
    assert!(e.to_string().contains("more than an hour apart"), "{e}");
}
