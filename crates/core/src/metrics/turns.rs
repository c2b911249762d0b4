//! Per-turn metrics of a multi-turn run: TTFT, E2EL and output tokens by turn index, and the
//! share of prompt tokens a prefix cache could reuse from the conversation's previous turn.
//!
//! Only records with a [`TurnRef`](crate::record::TurnRef) count; a run without any has no
//! turn metrics ([`TurnMetrics::compute`] gives `None`), so single-turn output is unchanged.
//! Statistics are numpy's (as in vLLM's report) over the successful turns of each index.
//!
//! A turn's prefix share is [`TurnRef::shared_prefix_tokens`](crate::record::TurnRef): the
//! tokens at the start of its prompt that the previous turn's prompt and answer already had
//! (exact with a tokenizer, estimated otherwise: see the run's notes). The reusable fraction
//! is the sum of those over the sum of the same turns' prompt tokens (first turns included,
//! with nothing to reuse); reuse across conversations (a shared system prompt) is not counted.
//!
//! Turns never sent are split by cause: *skipped* when an earlier turn of their conversation
//! failed, *not sent* when the run was interrupted first (or cut that earlier turn off).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::metrics::stats::{Sorted, mean};
use crate::record::{FailureKind, RequestRecord, RunResult};

/// Mean, median and 99th percentile of one quantity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub mean: f64,
    pub median: f64,
    pub p99: f64,
}

impl Spread {
    /// numpy's mean, median and `percentile(99)` (an empty sample counts as `[0]`).
    pub fn of(values: &[f64]) -> Self {
        let sorted = Sorted::new(values);
        Spread { mean: mean(values), median: sorted.median(), p99: sorted.percentile(99.0) }
    }
}

/// The turns of one index (0 = every conversation's first turn).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnRow {
    pub turn: u32,
    /// Turns of this index that were sent.
    pub sent: u64,
    pub completed: u64,
    pub failed: u64,
    /// Time to first token, ms, over the completed turns.
    pub ttft_ms: Spread,
    /// End-to-end latency (send to last token), ms.
    pub e2el_ms: Spread,
    /// Output tokens (as the report counts them).
    pub output_tokens: Spread,
    /// Prompt tokens of the completed turns, summed.
    pub prompt_tokens: u64,
    /// Their shared prefix tokens, summed.
    pub shared_prefix_tokens: u64,
    /// `shared_prefix_tokens / prompt_tokens`; `None` without prompt counts.
    pub prefix_share: Option<f64>,
}

/// The multi-turn section of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnMetrics {
    pub conversations: u64,
    /// Conversations whose every turn succeeded.
    pub conversations_completed: u64,
    pub turns_planned: u64,
    pub turns_sent: u64,
    pub turns_completed: u64,
    pub turns_failed: u64,
    /// Never sent because an earlier turn of their conversation failed.
    pub turns_skipped: u64,
    /// Never sent because the run was interrupted.
    pub turns_not_sent: u64,
    /// Prompt tokens of all completed turns.
    pub prompt_tokens: u64,
    /// Shared prefix tokens of all completed turns.
    pub shared_prefix_tokens: u64,
    /// `shared_prefix_tokens / prompt_tokens`: what a prefix cache could reuse.
    pub prefix_share: Option<f64>,
    pub by_turn: Vec<TurnRow>,
}

fn share(shared: u64, prompt: u64) -> Option<f64> {
    (prompt > 0).then(|| shared as f64 / prompt as f64)
}

impl TurnMetrics {
    /// The turn metrics of `run`, or `None` when it has no multi-turn records.
    pub fn compute(run: &RunResult) -> Option<TurnMetrics> {
        let mut conversations: BTreeMap<u32, Vec<&RequestRecord>> = BTreeMap::new();
        for r in &run.records {
            if let Some(t) = r.turn {
                conversations.entry(t.conversation).or_default().push(r);
            }
        }
        if conversations.is_empty() {
            return None;
        }
        let mut m = TurnMetrics { conversations: conversations.len() as u64, ..TurnMetrics::default() };
        #[derive(Default)]
        struct Acc {
            sent: u64,
            failed: u64,
            ttft: Vec<f64>,
            e2el: Vec<f64>,
            output: Vec<f64>,
            prompt: u64,
            shared: u64,
        }
        let mut rows: BTreeMap<u32, Acc> = BTreeMap::new();
        for turns in conversations.values_mut() {
            turns.sort_by_key(|r| r.turn.map_or(0, |t| t.turn));
            let mut broken = false;
            let mut all_ok = true;
            for r in turns.iter() {
                m.turns_planned += 1;
                let k = r.turn.map_or(0, |t| t.turn);
                let acc = rows.entry(k).or_default();
                if r.never_sent() {
                    all_ok = false;
                    if broken {
                        m.turns_skipped += 1;
                    } else {
                        m.turns_not_sent += 1;
                    }
                    continue;
                }
                m.turns_sent += 1;
                acc.sent += 1;
                if let Some(f) = &r.failure {
                    m.turns_failed += 1;
                    acc.failed += 1;
                    // After a turn cut off by the interruption, the rest were lost to it too.
                    broken = f.kind != FailureKind::Interrupted;
                    all_ok = false;
                    continue;
                }
                m.turns_completed += 1;
                acc.ttft.push(r.ttft_s() * 1000.0);
                acc.e2el.push(r.latency_s() * 1000.0);
                acc.output.push(f64::from(r.output_tokens()));
                // A turn without a prompt count has no share to speak of.
                let prompt = u64::from(r.prompt_tokens());
                if prompt > 0 {
                    acc.prompt += prompt;
                    acc.shared += u64::from(r.turn.map_or(0, |t| t.shared_prefix_tokens)).min(prompt);
                }
            }
            if all_ok {
                m.conversations_completed += 1;
            }
        }
        for (turn, acc) in rows {
            m.prompt_tokens += acc.prompt;
            m.shared_prefix_tokens += acc.shared;
            m.by_turn.push(TurnRow {
                turn,
                sent: acc.sent,
                completed: acc.sent - acc.failed,
                failed: acc.failed,
                ttft_ms: Spread::of(&acc.ttft),
                e2el_ms: Spread::of(&acc.e2el),
                output_tokens: Spread::of(&acc.output),
                prompt_tokens: acc.prompt,
                shared_prefix_tokens: acc.shared,
                prefix_share: share(acc.shared, acc.prompt),
            });
        }
        m.prefix_share = share(m.shared_prefix_tokens, m.prompt_tokens);
        Some(m)
    }
}

/// The section printed after vLLM's block for a multi-turn run: the conversation counts, the
/// reusable prefix share, and one line per turn index. Every line ends in `\n`.
pub fn render_turns(t: &TurnMetrics) -> String {
    let mut out = String::with_capacity(512 + 120 * t.by_turn.len());
    let _ = writeln!(out, "{:=^50}", " Multi-turn Conversations ");
    let line = |out: &mut String, label: &str, value: String| {
        let _ = writeln!(out, "{label:<40} {value:<10}");
    };
    line(&mut out, "Conversations:", t.conversations.to_string());
    line(&mut out, "Conversations completed:", t.conversations_completed.to_string());
    line(&mut out, "Turns sent:", format!("{} of {}", t.turns_sent, t.turns_planned));
    if t.turns_failed > 0 {
        line(&mut out, "Turns failed:", t.turns_failed.to_string());
    }
    if t.turns_skipped > 0 {
        line(&mut out, "Turns skipped (earlier turn failed):", t.turns_skipped.to_string());
    }
    if t.turns_not_sent > 0 {
        line(&mut out, "Turns not sent (interrupted):", t.turns_not_sent.to_string());
    }
    if let Some(s) = t.prefix_share {
        line(&mut out, "Reusable prompt prefix (%):", format!("{:.2}", s * 100.0));
    }
    let _ = writeln!(out, "{:-^50}", "By turn (times in ms)");
    let _ = writeln!(
        out,
        "{:>4} {:>5} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8}",
        "Turn",
        "Done",
        "TTFT mean",
        "TTFT med",
        "TTFT p99",
        "E2EL mean",
        "E2EL med",
        "E2EL p99",
        "Out mean",
        "Out med",
        "Out p99",
        "Prefix %"
    );
    for r in &t.by_turn {
        let prefix = r.prefix_share.map_or_else(|| "-".to_string(), |s| format!("{:.2}", s * 100.0));
        let _ = writeln!(
            out,
            "{:>4} {:>5} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>8.1} {:>8.1} {:>8.1} {:>8}",
            r.turn,
            r.completed,
            r.ttft_ms.mean,
            r.ttft_ms.median,
            r.ttft_ms.p99,
            r.e2el_ms.mean,
            r.e2el_ms.median,
            r.e2el_ms.p99,
            r.output_tokens.mean,
            r.output_tokens.median,
            r.output_tokens.p99,
            prefix,
        );
    }
    out.push_str(&"=".repeat(50));
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Failure, FailureKind, TurnRef, Usage, test_run};

    fn turn(
        conversation: u32,
        k: u32,
        ttft_ms: u32,
        e2el_ms: u32,
        out: u32,
        prompt: u32,
        shared: u32,
    ) -> RequestRecord {
        RequestRecord {
            chunks_us: vec![ttft_ms * 1000, e2el_ms * 1000],
            usage: Usage { prompt_tokens: Some(prompt), completion_tokens: Some(out) },
            turn: Some(TurnRef { conversation, turn: k, shared_prefix_tokens: shared }),
            status: 200,
            ..RequestRecord::default()
        }
    }

    fn failed(mut r: RequestRecord, kind: FailureKind, message: &str) -> RequestRecord {
        r.failure = Some(Failure { kind, message: message.into() });
        r
    }

    fn run(records: Vec<RequestRecord>) -> RunResult {
        test_run(records, 1.0)
    }

    fn sample() -> RunResult {
        run(vec![
            turn(0, 0, 10, 100, 20, 100, 0),
            turn(0, 1, 20, 200, 30, 200, 150),
            turn(0, 2, 30, 300, 40, 300, 260),
            turn(1, 0, 30, 110, 22, 120, 0),
            failed(turn(1, 1, 0, 0, 0, 0, 0), FailureKind::HttpStatus, "Internal Server Error"),
            failed(turn(1, 2, 0, 0, 0, 0, 0), FailureKind::NotSent, "not sent: turn 1 of conversation 1 failed"),
            turn(2, 0, 50, 120, 24, 80, 0),
            failed(turn(2, 1, 0, 0, 0, 0, 0), FailureKind::NotSent, "not sent: the run was interrupted first"),
        ])
    }

    #[test]
    fn turns_after_one_cut_off_by_the_interruption_are_not_sent_not_skipped() {
        let t = TurnMetrics::compute(&run(vec![
            turn(0, 0, 10, 100, 20, 100, 0),
            failed(turn(0, 1, 0, 0, 0, 0, 0), FailureKind::Interrupted, "interrupted"),
            failed(turn(0, 2, 0, 0, 0, 0, 0), FailureKind::NotSent, "not sent: the run was interrupted first"),
        ]))
        .unwrap();
        assert_eq!((t.turns_failed, t.turns_skipped, t.turns_not_sent), (1, 0, 1));
    }

    #[test]
    fn turns_are_grouped_by_index_and_unsent_ones_by_cause() {
        let t = TurnMetrics::compute(&sample()).unwrap();
        assert_eq!((t.conversations, t.conversations_completed), (3, 1));
        assert_eq!((t.turns_planned, t.turns_sent, t.turns_completed), (8, 6, 5));
        assert_eq!((t.turns_failed, t.turns_skipped, t.turns_not_sent), (1, 1, 1));
        assert_eq!(t.by_turn.len(), 3);
        let first = &t.by_turn[0];
        assert_eq!((first.sent, first.completed, first.failed), (3, 3, 0));
        assert_eq!((first.ttft_ms.mean, first.ttft_ms.median), (30.0, 30.0));
        assert!((first.ttft_ms.p99 - 49.6).abs() < 1e-9, "numpy's linear p99 of 10, 30, 50");
        assert_eq!(first.output_tokens.median, 22.0);
        assert_eq!(first.prefix_share, Some(0.0));
        let second = &t.by_turn[1];
        assert_eq!((second.sent, second.completed, second.failed), (2, 1, 1));
        assert!((second.e2el_ms.mean - 200.0).abs() < 1e-9);
        assert_eq!(second.prefix_share, Some(0.75));
        assert_eq!(t.by_turn[2].sent, 1);
        // (150 + 260) / (100 + 200 + 300 + 120 + 80)
        assert_eq!((t.shared_prefix_tokens, t.prompt_tokens), (410, 800));
        assert_eq!(t.prefix_share, Some(410.0 / 800.0));
    }

    #[test]
    fn single_turn_runs_have_no_turn_metrics() {
        let mut r = turn(0, 0, 1, 2, 3, 4, 0);
        r.turn = None;
        assert_eq!(TurnMetrics::compute(&run(vec![r])), None);
    }

    #[test]
    fn the_section_has_one_line_per_turn() {
        let text = render_turns(&TurnMetrics::compute(&sample()).unwrap());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "============ Multi-turn Conversations ============");
        assert_eq!(lines[0].len(), 50);
        assert_eq!(lines[1], format!("{:<40} {:<10}", "Conversations:", 3));
        assert!(text.contains("Turns sent:                              6 of 8"), "{text}");
        assert!(text.contains("Turns skipped (earlier turn failed):     1"), "{text}");
        assert!(text.contains("Reusable prompt prefix (%):              51.25"), "{text}");
        let rows: Vec<&&str> =
            lines.iter().filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())).collect();
        assert_eq!(rows.len(), 3);
        assert!(rows[1].ends_with("75.00"), "{}", rows[1]);
        assert_eq!(lines.last(), Some(&"=".repeat(50).as_str()));
        insta::assert_snapshot!(text);
    }

    #[test]
    fn the_result_json_carries_turns_only_for_multi_turn_runs() {
        use crate::metrics::Summary;
        use crate::vllm::json::result_json;
        let multi = sample();
        let v = result_json(&multi, &Summary::compute(&multi));
        let ours = &v["servebench"];
        assert_eq!(ours["turns"]["turns_skipped"], 1);
        assert_eq!(ours["turns"]["by_turn"][1]["prefix_share"], 0.75);
        assert_eq!(ours["token_ledger"]["requests"], 5);
        let keys: Vec<&String> = ours.as_object().unwrap().keys().collect();
        assert_eq!(keys[keys.len() - 3..], ["token_ledger", "turns", "requests"]);

        let mut single = multi.clone();
        for r in &mut single.records {
            r.turn = None;
        }
        let v = result_json(&single, &Summary::compute(&single));
        assert!(v["servebench"].get("turns").is_none());
        assert!(v["servebench"]["token_ledger"].is_object());
    }

    #[test]
    fn turn_metrics_round_trip_through_json() {
        let t = TurnMetrics::compute(&sample()).unwrap();
        let back: TurnMetrics = serde_json::from_value(serde_json::to_value(&t).unwrap()).unwrap();
        assert_eq!(back, t);
    }
}
