//! The rendezvous: clock offsets from the fastest round trip, one agreed start, and a foreign plan,
//! a missing rank or coordinator named.

use super::*;

fn sample(sent_ns: i64, remote_ns: i64, received_ns: i64) -> ClockSample {
    ClockSample { sent_ns, remote_ns, received_ns }
}

#[test]
fn the_offset_comes_from_the_fastest_round_trip() {
    // Rank 0's clock is 5 ms ahead; the slow samples were delayed on one leg only, which
    // would skew their estimate by half the delay.
    let ahead = 5_000_000;
    let samples = [
        sample(0, 900_000 + ahead, 1_000_000),
        sample(2_000_000, 2_050_000 + ahead, 2_100_000),
        sample(3_000_000, 3_010_000 + ahead + 700_000, 3_800_000),
    ];
    let c = estimate_offset(&samples).unwrap();
    assert_eq!(c, ClockOffset { offset_ns: ahead, rtt_ns: 100_000, samples: 3 });
    assert_eq!(estimate_offset(&[]), None);
    let behind = estimate_offset(&[sample(10_000, 4_000, 12_000)]).unwrap();
    assert_eq!((behind.offset_ns, behind.rtt_ns), (-7_000, 2_000));
}

#[test]
fn unix_times_round_trip() {
    for ns in [0, 1, 1_750_000_000_123_456_789, -5] {
        assert_eq!(unix_ns(from_unix_ns(ns)), ns);
    }
}

async fn rendezvous(world: u32, hashes: &[&str], lead: Duration) -> Vec<Result<Rendezvous, String>> {
    let listener = bind("127.0.0.1:0").await.unwrap();
    let addr = local_addr(&listener).unwrap().to_string();
    let timeout = Duration::from_secs(3);
    let host = tokio::spawn({
        let hash = hashes[0].to_string();
        async move { host(listener, Shard { rank: 0, world }, &hash, lead, timeout).await }
    });
    let workers: Vec<_> = (1..hashes.len())
        .map(|rank| {
            let (addr, hash) = (addr.clone(), hashes[rank].to_string());
            tokio::spawn(async move { join(&addr, Shard { rank: rank as u32, world }, &hash, timeout).await })
        })
        .collect();
    let mut out = vec![host.await.unwrap().map_err(|e| e.to_string())];
    for w in workers {
        out.push(w.await.unwrap().map_err(|e| e.to_string()));
    }
    out
}

#[tokio::test]
async fn three_workers_agree_on_one_start_and_measure_their_offsets() {
    let before = unix_ns(SystemTime::now());
    let all = rendezvous(3, &["abc", "abc", "abc"], Duration::from_millis(300)).await;
    let all: Vec<Rendezvous> = all.into_iter().map(Result::unwrap).collect();
    let start = all[0].start_unix_ns;
    assert!(start >= before + 300_000_000, "the start is the lead ahead of the last join");
    assert!(start < unix_ns(SystemTime::now()) + 300_000_000);
    assert!(all[0].clock.is_none(), "rank 0 is the reference");
    for w in &all[1..] {
        assert_eq!(w.start_unix_ns, start);
        let c = w.clock.unwrap();
        assert_eq!(c.samples, CLOCK_SAMPLES);
        // One machine, one clock: the true offset is 0, and the estimate is within half the RTT.
        assert!(c.offset_ns.unsigned_abs() <= c.rtt_ns / 2 + 1, "{c:?}");
        assert!(c.rtt_ns < 50_000_000, "a loopback round trip took {} ns", c.rtt_ns);
        assert_eq!(unix_ns(w.start), start - c.offset_ns);
    }
}

#[tokio::test]
async fn a_worker_with_another_plan_stops_everyone_with_the_reason() {
    let all = rendezvous(3, &["abc", "abc", "xyz"], Duration::from_millis(100)).await;
    let says = "rank 2 built a plan with hash xyz, rank 0 abc";
    assert!(all[0].as_ref().unwrap_err().contains(says), "{:?}", all[0]);
    assert!(all[2].as_ref().unwrap_err().contains(says), "{:?}", all[2]);
    // Rank 1 may have joined before or after rank 2: either way it does not start.
    assert!(all[1].is_err(), "{:?}", all[1]);
}

#[tokio::test]
async fn a_rank_that_never_joins_is_named() {
    let listener = bind("127.0.0.1:0").await.unwrap();
    let addr = local_addr(&listener).unwrap().to_string();
    let world = Shard { rank: 0, world: 3 };
    let h = tokio::spawn(async move { host(listener, world, "abc", Duration::ZERO, Duration::from_millis(600)).await });
    let w = join(&addr, Shard { rank: 1, world: 3 }, "abc", Duration::from_secs(3)).await;
    let e = h.await.unwrap().unwrap_err().to_string();
    assert_eq!(e, "rank 2 did not join within 0.6 s");
    assert!(w.unwrap_err().to_string().contains("rank 2 did not join"));
}

#[tokio::test]
async fn an_absent_coordinator_is_reported_with_its_address() {
    let listener = bind("127.0.0.1:0").await.unwrap();
    let addr = local_addr(&listener).unwrap().to_string();
    drop(listener);
    let e = join(&addr, Shard { rank: 1, world: 2 }, "abc", Duration::from_millis(300)).await.unwrap_err().to_string();
    assert!(e.starts_with(&format!("could not reach the coordinator (rank 0) at {addr}")), "{e}");
}

#[tokio::test]
async fn workers_may_come_before_rank_0() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let workers: Vec<_> = (1..3u32)
        .map(|rank| {
            let addr = addr.clone();
            tokio::spawn(async move { join(&addr, Shard { rank, world: 3 }, "abc", Duration::from_secs(5)).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let listener = bind(&addr).await.unwrap();
    let start = host(listener, Shard { rank: 0, world: 3 }, "abc", Duration::from_millis(100), Duration::from_secs(5))
        .await
        .unwrap()
        .start_unix_ns;
    for w in workers {
        assert_eq!(w.await.unwrap().unwrap().start_unix_ns, start);
    }
}
