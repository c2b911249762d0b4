//! Peak output throughput and peak concurrency: vLLM's 1-second bucket counters, and the
//! exact values servebench prints instead.
//!
//! vLLM (every release up to 0.33) buckets time into whole seconds from the first send. Its
//! peak output "tokens" per second counts SSE chunks, not tokens, so it can fall below the
//! average output throughput when a chunk carries several tokens. Its peak concurrency counts
//! every request that touches a bucket, so requests that end and start within the same second
//! are counted together and the value can exceed `--max-concurrency`. Both are reproduced
//! exactly in [`vllm_bucket_peaks`] for the result JSON's `max_output_tokens_per_s` and
//! `max_concurrent_requests`.
//!
//! The printed report shows [`peak_concurrency`] (an exact sweep line) and
//! [`peak_output_tokens_per_s`] (tokens in the busiest sliding one-second window) instead.
//!
//! All three consider successful requests only, as vLLM does.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use crate::record::RequestRecord;

const SECOND_NS: u64 = 1_000_000_000;

/// vLLM's bucketed peaks, exactly as `calculate_metrics` computes them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BucketPeaks {
    /// The most token chunks whose arrival falls in one whole-second bucket.
    pub max_output_tokens_per_s: f64,
    /// The most requests active at any moment of one whole-second bucket.
    pub max_concurrent_requests: u64,
}

/// vLLM's `max_output_tokens_per_s` and `max_concurrent_requests` (0 and 0 when nothing
/// succeeded), in vLLM's float arithmetic on seconds:
///
/// - buckets are `int(t - min_start)` for `min_start` the earliest send;
/// - each chunk time is rebuilt as `start + ttft`, then `+= gap` for each gap, and counts
///   one in its bucket if that bucket is below `int(ceil(max_end - min_start)) + 1`;
/// - a request counts in every bucket from `int(start - min_start)` to
///   `int(start + latency - min_start)`, both included.
pub fn vllm_bucket_peaks<R: Borrow<RequestRecord>>(records: &[R]) -> BucketPeaks {
    let succ: Vec<&RequestRecord> = records.iter().map(Borrow::borrow).filter(|r| r.succeeded()).collect();
    if succ.is_empty() {
        return BucketPeaks::default();
    }
    let min_start = succ.iter().map(|r| r.start_s()).fold(f64::INFINITY, f64::min);
    let max_end = succ.iter().map(|r| r.start_s() + r.latency_s()).fold(f64::NEG_INFINITY, f64::max);
    // Python's int() truncates toward zero, as `as i64` does.
    let buckets = (max_end - min_start).ceil() as i64 + 1;

    let mut token_buckets = Buckets::new(buckets, succ.iter().map(|r| r.chunks_us.len()).sum());
    // Bucket-index events (index, delta) for the concurrency count: +1 entering the first
    // bucket, -1 leaving after the last one.
    let mut events: Vec<(i64, i64)> = Vec::with_capacity(2 * succ.len());
    for r in &succ {
        let start = r.start_s();
        let mut count_chunk = |t: f64| {
            let b = (t - min_start) as i64;
            if (0..buckets).contains(&b) {
                token_buckets.add(b);
            }
        };
        let mut t = start + r.ttft_s();
        count_chunk(t);
        for gap in r.itl_s() {
            t += gap;
            count_chunk(t);
        }
        let s = (start - min_start) as i64;
        let e = (start + r.latency_s() - min_start) as i64;
        if e >= s {
            events.push((s, 1));
            events.push((e + 1, -1));
        }
    }

    let max_tokens = token_buckets.most();

    BucketPeaks { max_output_tokens_per_s: max_tokens as f64, max_concurrent_requests: max_running_sum(events) }
}

/// Chunks counted by the bucket they fall in, for the most in one: a count per bucket where
/// the buckets are few beside the chunks (any real run: one a second), else the buckets
/// listed and sorted (a run of chunks spread over more seconds than it has chunks).
enum Buckets {
    Counted(Vec<u64>),
    Listed(Vec<i64>),
}

impl Buckets {
    /// For at most `chunks` chunks in buckets `0..count`.
    fn new(count: i64, chunks: usize) -> Buckets {
        match usize::try_from(count) {
            Ok(n) if n <= chunks.max(1 << 16) => Buckets::Counted(vec![0; n]),
            _ => Buckets::Listed(Vec::with_capacity(chunks)),
        }
    }

    /// One chunk in bucket `b`, which is in `0..count`.
    fn add(&mut self, b: i64) {
        match self {
            Buckets::Counted(per) => per[b as usize] += 1,
            Buckets::Listed(list) => list.push(b),
        }
    }

    /// The most chunks in one bucket (0 for none).
    fn most(self) -> u64 {
        match self {
            Buckets::Counted(per) => per.into_iter().max().unwrap_or(0),
            Buckets::Listed(mut list) => {
                list.sort_unstable();
                let mut most = 0u64;
                let mut run = 0u64;
                for (i, b) in list.iter().enumerate() {
                    run = if i > 0 && list[i - 1] == *b { run + 1 } else { 1 };
                    most = most.max(run);
                }
                most
            }
        }
    }
}

/// The largest running sum of `(time, delta)` events sorted by time, a departure (-1)
/// before an arrival (+1) at the same time.
fn max_running_sum<T: Ord + Copy>(mut events: Vec<(T, i64)>) -> u64 {
    events.sort_unstable();
    let mut current = 0i64;
    let mut peak = 0i64;
    for (_, delta) in events {
        current += delta;
        peak = peak.max(current);
    }
    peak.unsigned_abs()
}

/// The exact peak number of requests in flight: a sweep line over each successful
/// request's `[send, last token)` interval, in integer nanoseconds, with departures before
/// arrivals at equal times (a request that ends when another starts does not overlap it).
pub fn peak_concurrency<R: Borrow<RequestRecord>>(records: &[R]) -> u64 {
    let mut events: Vec<(u64, i64)> = Vec::new();
    for r in records.iter().map(Borrow::borrow).filter(|r| r.succeeded()) {
        let start = r.start_ns;
        let end = start.saturating_add(u64::from(r.chunks_us.last().copied().unwrap_or(0)) * 1000);
        events.push((start, 1));
        events.push((end, -1));
    }
    max_running_sum(events)
}

/// The exact peak output throughput, tokens per second: the most output tokens whose chunks
/// arrived within any sliding window `[t, t + 1 s)`. Each chunk of a request carries an equal
/// share, `output_tokens / chunks`, of that request's output tokens, so a chunk holding
/// several tokens counts for all of them.
pub fn peak_output_tokens_per_s<R: Borrow<RequestRecord>>(records: &[R]) -> f64 {
    let done: Vec<&RequestRecord> =
        records.iter().map(Borrow::borrow).filter(|r| r.succeeded() && !r.chunks_us.is_empty()).collect();
    // (output tokens, chunk count) per request position.
    let weights: Vec<(u64, u64)> =
        done.iter().map(|r| (u64::from(r.output_tokens()), r.chunks_us.len() as u64)).collect();
    let chunks = Chunks::sorted(&done);
    if chunks.len() == 0 {
        return 0.0;
    }
    let weight = |pos: usize| {
        let (tokens, n) = weights[pos];
        tokens as f64 / n as f64
    };

    // Two pointers over windows starting at each chunk. The running sum only picks the
    // window; its total is then recomputed from per-request chunk counts so that additions
    // and subtractions of shares leave no rounding residue in the result.
    let mut best = (f64::NEG_INFINITY, 0usize, 0usize);
    let mut sum = 0.0;
    let mut hi = 0;
    for lo in 0..chunks.len() {
        let limit = chunks.at(lo).0.saturating_add(SECOND_NS);
        while hi < chunks.len() && chunks.at(hi).0 < limit {
            sum += weight(chunks.at(hi).1);
            hi += 1;
        }
        if sum > best.0 {
            best = (sum, lo, hi);
        }
        sum -= weight(chunks.at(lo).1);
    }
    let mut per_request: BTreeMap<usize, u64> = BTreeMap::new();
    for i in best.1..best.2 {
        *per_request.entry(chunks.at(i).1).or_default() += 1;
    }
    per_request
        .into_iter()
        .map(|(pos, k)| {
            let (tokens, n) = weights[pos];
            (k * tokens) as f64 / n as f64
        })
        .sum()
}

/// Every chunk of the given requests as (arrival ns, request position), in time order (ties by
/// position). Packed into one `u64` each, its arrival after the earliest and then its
/// position in the bits the last position needs, wherever both fit (any run shorter than
/// months): half the memory of pairs and about half the time to sort; pairs otherwise.
enum Chunks {
    Packed { keys: Vec<u64>, first: u64, pos_bits: u32 },
    Pairs(Vec<(u64, usize)>),
}

impl Chunks {
    fn sorted(requests: &[&RequestRecord]) -> Chunks {
        fn arrivals(r: &RequestRecord) -> impl Iterator<Item = u64> + '_ {
            let start = r.start_ns;
            r.chunks_us.iter().map(move |&us| start.saturating_add(u64::from(us) * 1000))
        }
        let (first, last) =
            requests.iter().flat_map(|r| arrivals(r)).fold((u64::MAX, 0), |(lo, hi), t| (lo.min(t), hi.max(t)));
        let first = first.min(last);
        let pos_bits = u64::BITS - (requests.len() as u64).saturating_sub(1).leading_zeros();
        // Reserved at once: a run's millions of chunks collected from a flattened iterator would
        // grow the list by doubling, holding the old copy beside the new at each step.
        let count = requests.iter().map(|r| r.chunks_us.len()).sum();
        if (last - first).leading_zeros() < pos_bits {
            let mut pairs = Vec::with_capacity(count);
            pairs.extend(requests.iter().enumerate().flat_map(|(pos, r)| arrivals(r).map(move |t| (t, pos))));
            pairs.sort_unstable();
            return Chunks::Pairs(pairs);
        }
        let mut keys = Vec::with_capacity(count);
        keys.extend(
            requests
                .iter()
                .enumerate()
                .flat_map(|(pos, r)| arrivals(r).map(move |t| ((t - first) << pos_bits) | pos as u64)),
        );
        keys.sort_unstable();
        Chunks::Packed { keys, first, pos_bits }
    }

    fn len(&self) -> usize {
        match self {
            Chunks::Packed { keys, .. } => keys.len(),
            Chunks::Pairs(pairs) => pairs.len(),
        }
    }

    /// The `i`th chunk's arrival and request position.
    fn at(&self, i: usize) -> (u64, usize) {
        match self {
            Chunks::Packed { keys, first, pos_bits } => {
                let k = keys[i];
                ((k >> pos_bits) + first, (k & ((1u64 << pos_bits) - 1)) as usize)
            }
            Chunks::Pairs(pairs) => pairs[i],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Failure, FailureKind, Usage};

    /// A successful request sent at `start_ms` whose chunks arrive `chunks_ms` after it.
    fn req(start_ms: u64, chunks_ms: &[u32], tokens: u32) -> RequestRecord {
        RequestRecord {
            start_ns: start_ms * 1_000_000,
            arrival_ns: start_ms * 1_000_000,
            planned_ns: start_ms * 1_000_000,
            chunks_us: chunks_ms.iter().map(|m| m * 1000).collect(),
            usage: Usage { prompt_tokens: Some(10), completion_tokens: Some(tokens) },
            status: 200,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn back_to_back_requests_do_not_overlap_but_vllm_buckets_count_them_together() {
        // Concurrency 1 in truth: each request starts when the previous one ends.
        let rs = vec![req(0, &[100, 300], 2), req(300, &[100, 300], 2), req(600, &[100, 300], 2)];
        assert_eq!(peak_concurrency(&rs), 1);
        // vLLM: all three touch bucket 0.
        assert_eq!(vllm_bucket_peaks(&rs).max_concurrent_requests, 3);
    }

    #[test]
    fn overlapping_requests_are_counted_by_the_sweep() {
        let rs = vec![req(0, &[100, 900], 2), req(100, &[100, 500], 2), req(200, &[100, 200], 2), req(950, &[10], 1)];
        assert_eq!(peak_concurrency(&rs), 3);
    }

    #[test]
    fn multi_token_chunks_count_as_tokens_in_the_exact_peak_only() {
        // One request, 4 chunks within 300 ms, 40 tokens: vLLM sees 4 "tokens".
        let rs = vec![req(0, &[0, 100, 200, 300], 40)];
        assert_eq!(vllm_bucket_peaks(&rs).max_output_tokens_per_s, 4.0);
        assert_eq!(peak_output_tokens_per_s(&rs), 40.0);
    }

    #[test]
    fn the_sliding_window_finds_a_peak_that_straddles_bucket_edges() {
        // 6 chunks between 0.6 s and 1.3 s: buckets split them 3 + 3.
        let rs = vec![req(0, &[600, 700, 800, 1100, 1200, 1300], 6)];
        assert_eq!(vllm_bucket_peaks(&rs).max_output_tokens_per_s, 3.0);
        assert_eq!(peak_output_tokens_per_s(&rs), 6.0);
        // A window is half-open: chunks exactly one second apart are not in one window.
        let rs = vec![req(0, &[0, 1000], 2)];
        assert_eq!(peak_output_tokens_per_s(&rs), 1.0);
    }

    #[test]
    fn failures_and_empty_runs_count_nothing() {
        let mut failed = req(0, &[10, 20], 2);
        failed.failure = Some(Failure { kind: FailureKind::Stream, message: "broken".into() });
        let rs = vec![failed];
        assert_eq!(vllm_bucket_peaks(&rs), BucketPeaks::default());
        assert_eq!(peak_concurrency(&rs), 0);
        assert_eq!(peak_output_tokens_per_s(&rs), 0.0);
        assert_eq!(peak_output_tokens_per_s::<RequestRecord>(&[]), 0.0);
    }

    #[test]
    fn vllm_buckets_match_a_hand_count() {
        // Chunks at absolute 0.5, 1.2, 1.4 (request A) and 1.1, 2.5 (request B).
        let rs = vec![req(0, &[500, 1200, 1400], 3), req(1000, &[100, 1500], 2)];
        let p = vllm_bucket_peaks(&rs);
        assert_eq!(p.max_output_tokens_per_s, 3.0); // bucket 1 holds 1.2, 1.4, 1.1
        assert_eq!(p.max_concurrent_requests, 2); // bucket 1: A (0..=1) and B (1..=2)
    }

    use proptest::prelude::*;

    fn requests() -> impl Strategy<Value = Vec<RequestRecord>> {
        let one = (0u64..5_000, prop::collection::vec(1u32..400, 1..12), 1u32..4);
        prop::collection::vec(one, 0..25).prop_map(|v| {
            v.into_iter()
                .map(|(start, gaps, per_chunk)| {
                    let mut t = 0;
                    let chunks: Vec<u32> = gaps
                        .iter()
                        .map(|g| {
                            t += g;
                            t
                        })
                        .collect();
                    let n = chunks.len() as u32;
                    req(start, &chunks, n * per_chunk)
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn exact_peaks_are_bounded_by_the_bucket_counts_and_the_totals(rs in requests()) {
            let buckets = vllm_bucket_peaks(&rs);
            let conc = peak_concurrency(&rs);
            prop_assert!(conc <= buckets.max_concurrent_requests);
            prop_assert!(conc <= rs.len() as u64);
            let tokens: u32 = rs.iter().map(RequestRecord::output_tokens).sum();
            let peak = peak_output_tokens_per_s(&rs);
            prop_assert!(peak <= f64::from(tokens) + 1e-9);
            // Every token is in some chunk and every chunk weighs at least one token, so the
            // busiest window holds at least as many tokens as vLLM's busiest bucket has chunks.
            prop_assert!(peak + 1e-9 >= buckets.max_output_tokens_per_s);
        }

        #[test]
        fn the_busiest_window_is_the_one_a_brute_force_search_finds(rs in requests()) {
            // Every window [t, t + 1 s) that starts at a chunk, summed chunk by chunk.
            let chunks: Vec<(u64, f64)> = rs
                .iter()
                .filter(|r| r.succeeded())
                .flat_map(|r| {
                    let share = f64::from(r.output_tokens()) / r.chunks_us.len() as f64;
                    r.chunks_us.iter().map(move |&us| (r.start_ns + u64::from(us) * 1000, share))
                })
                .collect();
            let brute = chunks
                .iter()
                .map(|&(t, _)| chunks.iter().filter(|&&(u, _)| u >= t && u < t + SECOND_NS).map(|&(_, w)| w).sum::<f64>())
                .fold(0.0, f64::max);
            prop_assert!((peak_output_tokens_per_s(&rs) - brute).abs() < 1e-9);
        }

        /// Packed or not, the chunks come out in the order sorting the pairs gives: arrivals
        /// in any order, spread over anything from a millisecond to the whole `u64` range
        /// (where packing cannot fit).
        #[test]
        fn chunks_come_out_as_sorted_pairs(
            raw in proptest::collection::vec((any::<u64>(), proptest::collection::vec(any::<u32>(), 1..6)), 1..60),
            spread_bits in 20u32..=64,
        ) {
            let mask = if spread_bits == 64 { u64::MAX } else { (1u64 << spread_bits) - 1 };
            let records: Vec<RequestRecord> = raw
                .iter()
                .map(|(start, chunks)| RequestRecord {
                    start_ns: start & mask,
                    chunks_us: chunks.clone(),
                    ..RequestRecord::default()
                })
                .collect();
            let refs: Vec<&RequestRecord> = records.iter().collect();
            let mut want: Vec<(u64, usize)> = records
                .iter()
                .enumerate()
                .flat_map(|(pos, r)| r.chunks_us.iter().map(move |&us| (r.start_ns.saturating_add(u64::from(us) * 1000), pos)))
                .collect();
            want.sort_unstable();
            let chunks = Chunks::sorted(&refs);
            let got: Vec<(u64, usize)> = (0..chunks.len()).map(|i| chunks.at(i)).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn the_fullest_bucket_is_found_by_counting_and_by_sorting_alike(
            few in prop::collection::vec(0i64..50, 0..200),
            spread in prop::collection::vec(0i64..200_000, 0..200),
        ) {
            for (values, count) in [(few, 50), (spread, 200_000)] {
                let mut naive = BTreeMap::new();
                for &v in &values {
                    *naive.entry(v).or_insert(0u64) += 1;
                }
                let expected = naive.values().copied().max().unwrap_or(0);
                // The way the run's sizes choose, and each way forced.
                let ways = [
                    Buckets::new(count, values.len()),
                    Buckets::Counted(vec![0; count as usize]),
                    Buckets::Listed(Vec::new()),
                ];
                for mut buckets in ways {
                    for &v in &values {
                        buckets.add(v);
                    }
                    prop_assert_eq!(buckets.most(), expected);
                }
            }
        }
    }
}
