//! Splitting one plan among workers: shares that partition it, conversations kept whole, the plan's
//! hash, and the sharding flag and environment.

use std::collections::HashMap;

use bytes::Bytes;
use proptest::prelude::*;

use super::*;
use crate::config::Api;
use crate::plan::{ConversationPlan, PlannedRequest, TurnPlan};

fn plan(requests: usize, turns: &[usize]) -> Plan {
    Plan {
        api: Api::Chat,
        requests: (0..requests)
            .map(|i| PlannedRequest {
                index: i as u32,
                at_ns: i as u64 * 1_000,
                body: Bytes::from(format!("{{\"prompt\":\"p{i}\"}}")),
                max_tokens: 8,
                prompt_tokens: 3,
                input_tokens: Vec::new(),
            })
            .collect(),
        conversations: turns
            .iter()
            .enumerate()
            .map(|(c, &n)| ConversationPlan {
                id: c as u32,
                at_ns: c as u64 * 500,
                system: None,
                turns: (0..n).map(|k| TurnPlan { user: format!("c{c}t{k}"), max_tokens: 4 }).collect(),
            })
            .collect(),
        token_counting: TokenCounting::Estimate,
        notes: vec!["built".into()],
    }
}

proptest! {
    #[test]
    fn the_shards_of_any_world_partition_the_plan(n in 0usize..300, world in 1u32..17) {
        let whole = plan(n, &[]);
        let mut seen: HashMap<u32, u32> = HashMap::new();
        for rank in 0..world {
            let share = select(&whole, Shard::new(rank, world).unwrap());
            prop_assert!(share.requests.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
            for r in &share.requests {
                *seen.entry(r.index).or_default() += 1;
                // Kept at its planned time and with its body.
                prop_assert_eq!(r, &whole.requests[r.index as usize]);
            }
        }
        prop_assert_eq!(seen.len(), n);
        prop_assert!(seen.values().all(|&k| k == 1), "a request was sent twice");
    }

    #[test]
    fn conversations_are_never_split(turns in proptest::collection::vec(1usize..6, 0..40), world in 1u32..9) {
        let whole = plan(0, &turns);
        let mut owner: HashMap<u32, u32> = HashMap::new();
        for rank in 0..world {
            for c in &select(&whole, Shard::new(rank, world).unwrap()).conversations {
                prop_assert!(owner.insert(c.id, rank).is_none(), "conversation {} on two workers", c.id);
                prop_assert_eq!(c, &whole.conversations[c.id as usize], "conversation {} not whole", c.id);
            }
        }
        prop_assert_eq!(owner.len(), turns.len());
    }

    #[test]
    fn split_concurrencies_sum_to_the_global_one(global in 1usize..10_000, world in 1u32..64) {
        match split_concurrency(global, world) {
            Ok(parts) => {
                prop_assert_eq!(parts.len(), world as usize);
                prop_assert_eq!(parts.iter().sum::<usize>(), global);
                prop_assert!(parts.iter().all(|&p| p >= 1));
                let (lo, hi) = (parts.iter().min().unwrap(), parts.iter().max().unwrap());
                prop_assert!(hi - lo <= 1, "uneven split {parts:?}");
            }
            Err(e) => {
                prop_assert!(global < world as usize);
                prop_assert!(e.to_string().contains("each needs at least one slot"));
            }
        }
    }
}

#[test]
fn the_plan_hash_covers_what_is_sent_and_nothing_else() {
    let a = plan(20, &[2, 3]);
    assert_eq!(plan_hash(&a), plan_hash(&plan(20, &[2, 3])), "same plan, same hash");
    assert_eq!(plan_hash(&a).len(), 16);
    let mut notes = a.clone();
    notes.notes.push("another note".into());
    assert_eq!(plan_hash(&a), plan_hash(&notes), "notes do not change what is sent");
    // Counted by a server: which address it had (each worker's own `--sim`) is not what is sent.
    let server = |url: &str| Plan { token_counting: TokenCounting::Server { base_url: url.into() }, ..a.clone() };
    assert_eq!(plan_hash(&server("http://127.0.0.1:41001")), plan_hash(&server("http://127.0.0.1:52002")));
    let mut body = a.clone();
    body.requests[7].body = Bytes::from_static(b"{\"prompt\":\"other\"}");
    let mut time = a.clone();
    time.requests[3].at_ns += 1;
    let mut turn = a.clone();
    turn.conversations[1].turns[2].max_tokens = 5;
    let mut counting = a.clone();
    counting.token_counting = TokenCounting::Tokenizer("qwen3".into());
    for (what, changed) in [("body", body), ("time", time), ("turn", turn), ("counting", counting)] {
        assert_ne!(plan_hash(&a), plan_hash(&changed), "a changed {what} must change the hash");
    }
}

#[test]
fn shards_parse_from_the_flag() {
    assert_eq!("1/4".parse::<ShardSpec>(), Ok(ShardSpec::Fixed(Shard { rank: 1, world: 4 })));
    assert_eq!(" 0 / 1 ".parse::<ShardSpec>(), Ok(ShardSpec::Fixed(Shard { rank: 0, world: 1 })));
    assert_eq!("auto".parse::<ShardSpec>(), Ok(ShardSpec::Auto { world: None }));
    assert_eq!("AUTO/8".parse::<ShardSpec>(), Ok(ShardSpec::Auto { world: Some(8) }));
    for (bad, says) in [
        ("4/4", "rank 4 is not below the world size 4"),
        ("0/0", "at least 1"),
        ("2", "no world size"),
        ("a/4", "the rank \"a\""),
        ("1/x", "the world size \"x\""),
        ("auto/0", "at least 1"),
    ] {
        let e = bad.parse::<ShardSpec>().unwrap_err().to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
}

fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
}

#[test]
fn auto_reads_slurm_then_kubernetes() {
    let auto = ShardSpec::Auto { world: None };
    let slurm = [("SLURM_PROCID", "3"), ("SLURM_NTASKS", "8")];
    assert_eq!(auto.resolve(env(&slurm)), Ok(Shard { rank: 3, world: 8 }));
    let k8s = [("JOB_COMPLETION_INDEX", "2"), ("SERVEBENCH_WORLD", "5")];
    assert_eq!(auto.resolve(env(&k8s)), Ok(Shard { rank: 2, world: 5 }));
    let k8s_flag = [("JOB_COMPLETION_INDEX", "2")];
    assert_eq!(ShardSpec::Auto { world: Some(3) }.resolve(env(&k8s_flag)), Ok(Shard { rank: 2, world: 3 }));
    assert_eq!(auto.resolve(env(&k8s_flag)), Err(ShardError::NoEnvironment));
    assert_eq!(auto.resolve(env(&[])), Err(ShardError::NoEnvironment));
    let bad = [("SLURM_PROCID", "two"), ("SLURM_NTASKS", "8")];
    assert!(auto.resolve(env(&bad)).unwrap_err().to_string().contains("SLURM_PROCID=\"two\""));
    let out_of_range = [("JOB_COMPLETION_INDEX", "5"), ("SERVEBENCH_WORLD", "5")];
    assert!(auto.resolve(env(&out_of_range)).unwrap_err().to_string().contains("not below the world size"));
    let fixed = ShardSpec::Fixed(Shard { rank: 0, world: 2 });
    assert_eq!(fixed.resolve(env(&slurm)), Ok(Shard { rank: 0, world: 2 }), "a fixed shard ignores the environment");
}

#[test]
fn sharding_keeps_its_serialized_form() {
    let worker = Sharding::Worker(WorkerShard {
        rank: 1,
        world: 2,
        plan_hash: "00ff".into(),
        plan_requests: 10,
        max_concurrency: Some(3),
        concurrency_split: vec![2, 1],
        start_unix_ns: Some(5),
        clock: Some(ClockOffset { offset_ns: -40, rtt_ns: 90, samples: 8 }),
        t0_unix_ns: 7,
    });
    let json = serde_json::to_value(&worker).unwrap();
    assert_eq!(json["role"], "worker");
    assert_eq!(json["clock"]["offset_ns"], -40);
    assert_eq!(serde_json::from_value::<Sharding>(json).unwrap(), worker);
    let Sharding::Worker(w) = worker else { unreachable!() };
    assert_eq!(w.t0_on_rank0_ns(), 7 - 40);
}
