//! The token ledger: every token count of a run by its source, side by side.
//!
//! For each successful request there may be up to five counts: prompt tokens counted locally
//! (`prompt_tokens_client`, chat template applied, with a tokenizer) and by the server
//! (`usage.prompt_tokens`); output tokens by the server (`usage.completion_tokens`), by
//! streamed token chunks, and re-tokenized locally from the generated text
//! (`output_tokens_client`, filled after the run: for every request the server did not count,
//! and for an even sample of at most 256 of the others). The ledger sums each source, compares the
//! pairs request by request, and flags:
//! - local and server counts that disagree by more than [`TOLERANCE`] (2 %) of the server's;
//! - streams whose chunks do not match the server's output tokens (several tokens per chunk:
//!   ITL is then measured between chunks, not tokens);
//! - requests without server usage (their output count falls back to the local one, or to 1
//!   as vLLM does without a tokenizer);
//! - with `ignore_eos` set, requests that ended before `max_tokens`.
//!
//! When reasoning was streamed, the ledger also splits the token chunks into reasoning and
//! answer ([`crate::metrics::reasoning`]).
//!
//! Failed and unsent requests are left out: their counts are partial or absent.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::metrics::reasoning::{Reasoning, render_reasoning};
use crate::record::{RequestRecord, RunResult};

/// Relative disagreement between a local and a server count above which it is flagged.
pub const TOLERANCE: f64 = 0.02;
/// How many requests a note names before "and N more".
const NAMED: usize = 5;

/// One request whose two counts disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disagreement {
    pub index: u32,
    pub local: u32,
    pub server: u32,
}

/// Two sources of the same count, compared request by request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Requests with a local count, and their sum.
    pub local_requests: u64,
    pub local_total: u64,
    /// Requests with a server count, and their sum.
    pub server_requests: u64,
    pub server_total: u64,
    /// Requests with both, and the sums over those.
    pub compared: u64,
    pub compared_local_total: u64,
    pub compared_server_total: u64,
    /// `(local - server) / server` over the compared requests, in percent.
    pub difference_pct: Option<f64>,
    /// The compared requests whose counts differ by more than the tolerance, in order.
    pub disagreeing: Vec<Disagreement>,
}

impl Comparison {
    fn add(&mut self, index: u32, local: Option<u32>, server: Option<u32>) {
        if let Some(l) = local {
            self.local_requests += 1;
            self.local_total += u64::from(l);
        }
        if let Some(s) = server {
            self.server_requests += 1;
            self.server_total += u64::from(s);
        }
        if let (Some(l), Some(s)) = (local, server) {
            self.compared += 1;
            self.compared_local_total += u64::from(l);
            self.compared_server_total += u64::from(s);
            if disagree(l, s) {
                self.disagreeing.push(Disagreement { index, local: l, server: s });
            }
        }
    }

    fn finish(&mut self) {
        self.difference_pct = (self.compared_server_total > 0).then(|| {
            (self.compared_local_total as f64 - self.compared_server_total as f64) / self.compared_server_total as f64
                * 100.0
        });
    }
}

fn disagree(local: u32, server: u32) -> bool {
    f64::from(local.abs_diff(server)) > TOLERANCE * f64::from(server)
}

/// Requests that stopped before `max_tokens` although `ignore_eos` was set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShortOutputs {
    /// Whether the bodies asked for `ignore_eos` (the flag, or `--extra-body`'s value).
    pub ignore_eos: bool,
    /// Requests checked: successful ones with an output count (server's, else local).
    pub checked: u64,
    /// Indices of the requests that ended early, in order.
    pub indices: Vec<u32>,
    /// `(output tokens, max_tokens)` of each, in the same order.
    pub lengths: Vec<(u32, u32)>,
}

/// The token counts of a run by source; see the module docs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// Successful requests (the ones the ledger covers).
    pub requests: u64,
    /// Prompt tokens: local (`prompt_tokens_client`) against the server's usage.
    pub prompt: Comparison,
    /// Output tokens re-tokenized locally (`output_tokens_client`) against the server's usage.
    pub output: Comparison,
    /// Streamed token chunks (local) against the server's output tokens.
    pub chunks: Comparison,
    /// Server output tokens per token chunk, over requests with both; `None` without usage.
    pub tokens_per_chunk: Option<f64>,
    /// Successful requests without any usage from the server.
    pub without_usage: Vec<u32>,
    pub short_outputs: ShortOutputs,
    /// Reasoning and answer token chunks and their first-token times, when reasoning was
    /// streamed.
    #[serde(default)]
    pub reasoning: Option<Reasoning>,
}

impl Ledger {
    /// The ledger of `run`'s successful requests (see the module docs for what is compared).
    pub fn compute(run: &RunResult) -> Ledger {
        let ignore_eos = run
            .config
            .extra_body
            .get("ignore_eos")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(run.config.ignore_eos);
        let mut l =
            Ledger { short_outputs: ShortOutputs { ignore_eos, ..ShortOutputs::default() }, ..Ledger::default() };
        for r in run.records.iter().filter(|r| r.succeeded()) {
            l.requests += 1;
            let usage = r.usage;
            l.prompt.add(r.index, r.prompt_tokens_client, usage.prompt_tokens);
            l.output.add(r.index, r.output_tokens_client, usage.completion_tokens);
            let chunks = u32::try_from(r.chunks_us.len()).unwrap_or(u32::MAX);
            l.chunks.add(r.index, Some(chunks), usage.completion_tokens);
            if usage.prompt_tokens.is_none() && usage.completion_tokens.is_none() {
                l.without_usage.push(r.index);
            }
            if ignore_eos {
                check_length(&mut l.short_outputs, r);
            }
        }
        l.prompt.finish();
        l.output.finish();
        l.chunks.finish();
        let c = &l.chunks;
        l.tokens_per_chunk =
            (c.compared_local_total > 0).then(|| c.compared_server_total as f64 / c.compared_local_total as f64);
        l.reasoning = Reasoning::compute(run);
        l
    }
}

fn check_length(short: &mut ShortOutputs, r: &RequestRecord) {
    let Some(out) = r.usage.completion_tokens.or(r.output_tokens_client) else { return };
    if r.max_tokens == 0 {
        return;
    }
    short.checked += 1;
    if out < r.max_tokens {
        short.indices.push(r.index);
        short.lengths.push((out, r.max_tokens));
    }
}

/// `#3 (local 120, server 131), #9 (…) and 4 more`
fn name_disagreements(list: &[Disagreement]) -> String {
    let named: Vec<String> =
        list.iter().take(NAMED).map(|d| format!("#{} (local {}, server {})", d.index, d.local, d.server)).collect();
    with_more(named.join(", "), list.len())
}

fn with_more(mut text: String, total: usize) -> String {
    if total > NAMED {
        let _ = write!(text, " and {} more", total - NAMED);
    }
    text
}

fn pct(x: Option<f64>) -> String {
    x.map_or_else(String::new, |p| format!(" ({p:+.2} %)"))
}

/// The note on a comparison with disagreeing requests: `{what} differ by more than 2 % for
/// ...`, naming the first few and the totals. Nothing when all agree.
fn comparison_note(out: &mut String, what: &str, c: &Comparison) {
    if c.disagreeing.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "Token ledger: {what} differ by more than {:.0} % for {} of {} requests: {}. Totals: local {}, server {}{}.",
        TOLERANCE * 100.0,
        c.disagreeing.len(),
        c.compared,
        name_disagreements(&c.disagreeing),
        c.compared_local_total,
        c.compared_server_total,
        pct(c.difference_pct),
    );
}

/// The ledger's notes, printed after the result block: one line (ending in `\n`) per thing
/// worth knowing, nothing when every count agrees.
pub fn render_notes(l: &Ledger) -> String {
    let mut out = String::new();
    comparison_note(&mut out, "prompt tokens counted locally (chat template applied) and by the server", &l.prompt);
    comparison_note(&mut out, "output tokens re-tokenized locally and counted by the server", &l.output);
    let c = &l.chunks;
    if !c.disagreeing.is_empty() {
        let per = l.tokens_per_chunk.map_or_else(String::new, |t| format!(", {t:.2} tokens per chunk"));
        let _ = writeln!(
            out,
            "Token ledger: for {} of {} requests the streamed token chunks do not match the server's output tokens \
             ({} chunks for {} tokens{per}); ITL is measured between chunks.",
            c.disagreeing.len(),
            c.compared,
            c.compared_local_total,
            c.compared_server_total,
        );
    }
    if !l.without_usage.is_empty() {
        let named: Vec<String> = l.without_usage.iter().take(NAMED).map(|i| format!("#{i}")).collect();
        let _ = writeln!(
            out,
            "Token ledger: the server sent no usage for {} of {} requests ({}); their output tokens are the local \
             count, or 1 without a tokenizer, as vLLM counts them.",
            l.without_usage.len(),
            l.requests,
            with_more(named.join(", "), l.without_usage.len()),
        );
    }
    let s = &l.short_outputs;
    if !s.indices.is_empty() {
        let named: Vec<String> = s
            .indices
            .iter()
            .zip(&s.lengths)
            .take(NAMED)
            .map(|(i, (out, max))| format!("#{i} ({out} of {max})"))
            .collect();
        let _ = writeln!(
            out,
            "Token ledger: {} of {} requests ended before max_tokens although ignore_eos was set: {}.",
            s.indices.len(),
            s.checked,
            with_more(named.join(", "), s.indices.len()),
        );
    }
    if let Some(r) = &l.reasoning {
        out.push_str(&render_reasoning(r));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Failure, FailureKind, Usage, test_run};

    fn rec(
        index: u32,
        prompt: (Option<u32>, Option<u32>),
        output: (Option<u32>, Option<u32>),
        chunks: usize,
    ) -> RequestRecord {
        RequestRecord {
            index,
            chunks_us: (0..chunks as u32).collect(),
            max_tokens: 10,
            prompt_tokens_client: prompt.0,
            usage: Usage { prompt_tokens: prompt.1, completion_tokens: output.1 },
            output_tokens_client: output.0,
            status: 200,
            ..RequestRecord::default()
        }
    }

    fn run(records: Vec<RequestRecord>) -> RunResult {
        test_run(records, 1.0)
    }

    #[test]
    fn agreeing_counts_give_totals_and_no_notes() {
        let r = run(vec![
            rec(0, (Some(100), Some(100)), (Some(10), Some(10)), 10),
            rec(1, (Some(200), Some(203)), (Some(10), Some(10)), 10),
        ]);
        let l = Ledger::compute(&r);
        assert_eq!(l.requests, 2);
        assert_eq!((l.prompt.local_total, l.prompt.server_total, l.prompt.compared), (300, 303, 2));
        assert!(l.prompt.disagreeing.is_empty(), "3 of 203 is within 2 %");
        assert!((l.prompt.difference_pct.unwrap() + 0.990_099).abs() < 1e-4);
        assert_eq!(l.tokens_per_chunk, Some(1.0));
        assert!(l.short_outputs.ignore_eos && l.short_outputs.checked == 2 && l.short_outputs.indices.is_empty());
        assert_eq!(render_notes(&l), "");
    }

    #[test]
    fn disagreements_are_flagged_with_the_requests_named() {
        let mut records: Vec<RequestRecord> =
            (0..8).map(|i| rec(i, (Some(100), Some(110)), (Some(10), Some(10)), 5)).collect();
        records[2].output_tokens_client = Some(12);
        records.push(rec(8, (None, None), (Some(4), None), 4));
        let failed = RequestRecord {
            failure: Some(Failure { kind: FailureKind::Timeout, message: "t".into() }),
            ..rec(9, (Some(1), Some(999)), (None, None), 0)
        };
        records.push(failed);
        let l = Ledger::compute(&run(records));
        assert_eq!(l.requests, 9, "the failed request is left out");
        assert_eq!(l.prompt.disagreeing.len(), 8);
        assert_eq!(l.prompt.disagreeing[0], Disagreement { index: 0, local: 100, server: 110 });
        assert_eq!(l.output.disagreeing, [Disagreement { index: 2, local: 12, server: 10 }]);
        assert_eq!(l.chunks.disagreeing.len(), 8);
        assert_eq!(l.tokens_per_chunk, Some(2.0));
        assert_eq!(l.without_usage, [8]);
        // Request 8 ended at 4 of 10 tokens by its local count; the rest at 10 of 10.
        assert_eq!((l.short_outputs.checked, l.short_outputs.indices.clone()), (9, vec![8]));

        let notes = render_notes(&l);
        let lines: Vec<&str> = notes.lines().collect();
        assert_eq!(lines.len(), 5, "{notes}");
        assert_eq!(
            lines[0],
            "Token ledger: prompt tokens counted locally (chat template applied) and by the server differ by more \
             than 2 % for 8 of 8 requests: #0 (local 100, server 110), #1 (local 100, server 110), #2 (local 100, \
             server 110), #3 (local 100, server 110), #4 (local 100, server 110) and 3 more. Totals: local 800, \
             server 880 (-9.09 %)."
        );
        assert!(lines[1].contains("for 1 of 8 requests: #2 (local 12, server 10)"), "{}", lines[1]);
        assert!(lines[2].contains("(40 chunks for 80 tokens, 2.00 tokens per chunk)"), "{}", lines[2]);
        assert!(lines[3].contains("no usage for 1 of 9 requests (#8)"), "{}", lines[3]);
        assert_eq!(
            lines[4],
            "Token ledger: 1 of 9 requests ended before max_tokens although ignore_eos was set: #8 (4 of 10)."
        );
    }

    #[test]
    fn short_outputs_follow_the_effective_ignore_eos() {
        let mut r = run(vec![rec(0, (None, Some(5)), (None, Some(3)), 3)]);
        assert_eq!(Ledger::compute(&r).short_outputs.indices, [0]);
        r.config.extra_body.insert("ignore_eos".into(), serde_json::Value::Bool(false));
        let l = Ledger::compute(&r);
        assert!(!l.short_outputs.ignore_eos && l.short_outputs.checked == 0);
        r.config.ignore_eos = false;
        r.config.extra_body.insert("ignore_eos".into(), serde_json::Value::Bool(true));
        assert_eq!(Ledger::compute(&r).short_outputs.indices, [0]);
    }

    #[test]
    fn a_zero_server_count_disagrees_with_any_other() {
        assert!(disagree(1, 0));
        assert!(!disagree(0, 0));
        assert!(!disagree(102, 100) && disagree(103, 100));
    }

    #[test]
    fn the_ledger_round_trips_through_json() {
        let l = Ledger::compute(&run(vec![rec(0, (Some(9), Some(10)), (Some(3), Some(3)), 2)]));
        let back: Ledger = serde_json::from_value(serde_json::to_value(&l).unwrap()).unwrap();
        assert_eq!(back, l);
    }
}
