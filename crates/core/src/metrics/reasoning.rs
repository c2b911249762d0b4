//! Reasoning-aware timing, for streams that carry reasoning (`reasoning_content` or
//! `reasoning` deltas): the time to the first reasoning token and to the first answer token,
//! and how the token chunks split between the two.
//!
//! TTFT stays vLLM's: the time to the first token chunk of either kind, reasoning included.
//! The time to the first answer token is what a user waiting for the answer sees; the report
//! states both, and which one TTFT is.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::metrics::stats::describe;
use crate::record::{RequestRecord, RunResult};

/// What the report says TTFT is when reasoning was streamed.
pub const TTFT_DEFINITION: &str =
    "TTFT is the time to the first streamed token of either kind, reasoning included (as vLLM measures it)";

/// Mean, median and P99 of one time, ms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimeStats {
    pub mean_ms: f64,
    pub median_ms: f64,
    pub p99_ms: f64,
}

impl TimeStats {
    fn of(us: &[u32]) -> Option<TimeStats> {
        if us.is_empty() {
            return None;
        }
        let seconds: Vec<f64> = us.iter().map(|&t| f64::from(t) * 1e-6).collect();
        let d = describe(&seconds, &[99.0]);
        Some(TimeStats { mean_ms: d.mean * 1000.0, median_ms: d.median * 1000.0, p99_ms: d.percentiles[0].1 * 1000.0 })
    }
}

/// The reasoning of a run's successful requests.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reasoning {
    /// Successful requests, and those that streamed reasoning.
    pub requests: u64,
    pub with_reasoning: u64,
    /// Token chunks carrying only reasoning, and all the others (the answer).
    pub reasoning_chunks: u64,
    pub answer_chunks: u64,
    /// From the send to the first reasoning chunk, over the requests that had one.
    pub time_to_first_reasoning: Option<TimeStats>,
    /// From the send to the first answer chunk, over the requests that had one.
    pub time_to_first_answer: Option<TimeStats>,
    pub ttft_definition: String,
}

impl Reasoning {
    /// The reasoning of `run`; `None` when no successful request streamed any.
    pub fn compute(run: &RunResult) -> Option<Reasoning> {
        let ok: Vec<&RequestRecord> = run.records.iter().filter(|r| r.succeeded()).collect();
        let with_reasoning = ok.iter().filter(|r| r.first_reasoning_us.is_some()).count() as u64;
        if with_reasoning == 0 {
            return None;
        }
        let reasoning_chunks: u64 = ok.iter().map(|r| u64::from(r.reasoning_chunks)).sum();
        let chunks: u64 = ok.iter().map(|r| r.chunks_us.len() as u64).sum();
        let firsts = |f: fn(&RequestRecord) -> Option<u32>| ok.iter().filter_map(|r| f(r)).collect::<Vec<u32>>();
        Some(Reasoning {
            requests: ok.len() as u64,
            with_reasoning,
            reasoning_chunks,
            answer_chunks: chunks.saturating_sub(reasoning_chunks),
            time_to_first_reasoning: TimeStats::of(&firsts(|r| r.first_reasoning_us)),
            time_to_first_answer: TimeStats::of(&firsts(|r| r.first_answer_us)),
            ttft_definition: TTFT_DEFINITION.to_string(),
        })
    }
}

/// The reasoning section printed after vLLM's block.
pub fn render_reasoning(r: &Reasoning) -> String {
    let mut out = format!(
        "Reasoning: {} of {} requests streamed reasoning: {} reasoning and {} answer token chunks.",
        r.with_reasoning, r.requests, r.reasoning_chunks, r.answer_chunks
    );
    let times = [("reasoning", r.time_to_first_reasoning), ("answer", r.time_to_first_answer)];
    for (what, t) in times {
        if let Some(t) = t {
            let _ = write!(
                out,
                " Time to first {what} token: mean {:.2} ms, median {:.2} ms, P99 {:.2} ms.",
                t.mean_ms, t.median_ms, t.p99_ms
            );
        }
    }
    let _ = writeln!(out, " {}.", r.ttft_definition);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::test_run;

    fn streamed(chunks_ms: &[u32], reasoning: u32) -> RequestRecord {
        let chunks_us: Vec<u32> = chunks_ms.iter().map(|m| m * 1000).collect();
        RequestRecord {
            first_reasoning_us: (reasoning > 0).then(|| chunks_us[0]),
            first_answer_us: chunks_us.get(reasoning as usize).copied(),
            reasoning_chunks: reasoning,
            chunks_us,
            status: 200,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn reasoning_is_timed_and_counted_apart_from_the_answer() {
        assert!(Reasoning::compute(&test_run(vec![streamed(&[10, 20], 0)], 1.0)).is_none());
        let run = test_run(vec![streamed(&[10, 20, 30, 40], 2), streamed(&[20, 60, 70], 1), streamed(&[5], 0)], 1.0);
        let r = Reasoning::compute(&run).unwrap();
        assert_eq!((r.requests, r.with_reasoning, r.reasoning_chunks, r.answer_chunks), (3, 2, 3, 5));
        let first_reasoning = r.time_to_first_reasoning.unwrap();
        assert!((first_reasoning.mean_ms - 15.0).abs() < 1e-9);
        // Answers began at 30, 60 and 5 ms.
        let first_answer = r.time_to_first_answer.unwrap();
        assert!((first_answer.median_ms - 30.0).abs() < 1e-9 && (first_answer.mean_ms - 95.0 / 3.0).abs() < 1e-9);
        insta::assert_snapshot!(render_reasoning(&r));
    }
}
