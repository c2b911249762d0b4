//! Token accounting: prompt tokens as the server will count them (chat template applied for
//! chat requests, special tokens added for completions), and the one accounting after a run
//! ([`account`]): output tokens of generated text (vLLM's fallback when the server sends no
//! usage) and the turns of a multi-turn run.

use serde_json::Value;
use servebench_core::config::Api;
use servebench_core::plan::Plan;
use servebench_core::record::{RequestRecord, RunResult};

use crate::datasets::multi_turn::prompt_text;
use crate::history::count_turns;
use crate::{Tokenizer, WorkloadError};

/// The accounting of a finished run of `plan`, with the `--tokenizer` when there is one, for
/// single requests and multi-turn conversations alike; the result's notes say how it counted.
///
/// - A multi-turn run that began gets every sent turn's prompt tokens and prefix share
///   ([`count_turns`]; counted after the clock stopped, never between turns), and a note of the
///   turns not sent because an earlier turn of their conversation failed.
/// - With a tokenizer, every successful request without the server's output count gets its
///   output tokens counted from its text, and a sample of the others for the token ledger
///   ([`fill_output_tokens`]).
pub fn account(tok: Option<&Tokenizer>, plan: &Plan, result: &mut RunResult) {
    // A run stopped before it began (during the ready check or warm-up) sent no turn.
    let began = !(result.interrupted && result.duration_s == 0.0);
    if !plan.conversations.is_empty() && began {
        let how = count_turns(tok, &plan.conversations, &mut result.records);
        result.notes.push(how.note());
        // Turns never sent: those skipped after a failed turn, and those the interruption left.
        let never_sent = result.records.iter().filter(|r| r.never_sent()).count();
        let skipped = never_sent.saturating_sub(result.not_sent);
        if skipped > 0 {
            result.notes.push(format!(
                "Multi-turn: {skipped} turns were not sent because an earlier turn of their conversation failed."
            ));
        }
    }
    if let Some(t) = tok
        && let Err(e) = fill_output_tokens(t, &mut result.records)
    {
        result.notes.push(format!("output tokens could not be counted with the tokenizer: {e}"));
    }
}

/// Prompt tokens of a single-prompt request: `encode(prompt)` with special tokens for
/// completions; the rendered chat template (one user message, generation prompt) without
/// added special tokens for chat, or the plain prompt when the tokenizer has no template.
pub fn prompt_tokens(tok: &Tokenizer, api: Api, prompt: &str) -> Result<u32, WorkloadError> {
    match (api, tok.chat_template()) {
        (api, Some(t)) if api.templated() => tok.count(&t.render_user(prompt)?, false),
        _ => tok.count(prompt, true),
    }
}

/// Prompt tokens of a chat request with prepared messages (multi-turn history).
pub fn chat_prompt_tokens(tok: &Tokenizer, messages: &Value) -> Result<u32, WorkloadError> {
    match tok.chat_template() {
        Some(_) => tok.count(&prompt_text(tok, messages)?, false),
        None => tok.count(&prompt_text(tok, messages)?, true),
    }
}

/// Output tokens of generated text: `len(tokenizer(text, add_special_tokens=False))`.
pub fn output_tokens(tok: &Tokenizer, text: &str) -> Result<u32, WorkloadError> {
    tok.count(text, false)
}

/// Successful requests with the server's output count that the ledger re-tokenizes: all of
/// them up to this many, else an even sample of about this many (every k-th in index order).
/// Re-tokenizing every output of a long run costs more CPU than the run's own streaming, and a
/// sample of this size shows a wrong tokenizer or a miscounting server as plainly.
pub const LEDGER_SAMPLE: usize = 256;

/// Fills `output_tokens_client` from the text: for every successful record the server gave no
/// output count (the count itself, vLLM's fallback), and for the ledger's sample of the others
/// ([`LEDGER_SAMPLE`]).
pub fn fill_output_tokens(tok: &Tokenizer, records: &mut [RequestRecord]) -> Result<(), WorkloadError> {
    let counted_by_server = |r: &RequestRecord| r.usage.completion_tokens.is_some_and(|n| n > 0);
    let with_count = records.iter().filter(|r| r.succeeded() && counted_by_server(r)).count();
    let every = with_count.div_ceil(LEDGER_SAMPLE).max(1);
    let mut seen = 0usize;
    for r in records.iter_mut().filter(|r| r.succeeded()) {
        if counted_by_server(r) {
            seen += 1;
            if !(seen - 1).is_multiple_of(every) {
                continue;
            }
        }
        r.output_tokens_client = Some(output_tokens(tok, &r.text)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::qwen3;
    use serde_json::json;
    use servebench_core::record::{Failure, FailureKind};

    #[test]
    fn chat_counts_include_the_template_and_completions_do_not() {
        let tok = qwen3();
        let plain = prompt_tokens(tok, Api::Completions, "hello world").unwrap();
        let chat = prompt_tokens(tok, Api::Chat, "hello world").unwrap();
        assert_eq!(plain, 2);
        // <|im_start|> user \n hello world <|im_end|> \n <|im_start|> assistant \n
        assert_eq!(chat, 10);
        // Responses and Messages requests go through the same template.
        assert_eq!(prompt_tokens(tok, Api::Responses, "hello world").unwrap(), chat);
        assert_eq!(prompt_tokens(tok, Api::Messages, "hello world").unwrap(), chat);
        let msgs = json!([{"role": "user", "content": "hello world"}]);
        assert_eq!(chat_prompt_tokens(tok, &msgs).unwrap(), chat);
    }

    #[test]
    fn the_ledger_re_tokenizes_a_sample_of_server_counted_outputs_and_every_uncounted_one() {
        use servebench_core::record::Usage;
        let tok = qwen3();
        let n = LEDGER_SAMPLE * 3 + 7;
        let mut recs: Vec<RequestRecord> = (0..n)
            .map(|i| RequestRecord {
                index: u32::try_from(i).unwrap(),
                text: "The answer is 42.".into(),
                status: 200,
                // every tenth request without the server's count
                usage: Usage { prompt_tokens: None, completion_tokens: (i % 10 != 0).then_some(5) },
                ..RequestRecord::default()
            })
            .collect();
        fill_output_tokens(tok, &mut recs).unwrap();
        let uncounted = recs.iter().filter(|r| r.usage.completion_tokens.is_none());
        assert!(uncounted.clone().all(|r| r.output_tokens_client.is_some()));
        let sampled = recs.iter().filter(|r| r.usage.completion_tokens.is_some() && r.output_tokens_client.is_some());
        let (sampled, total) = (sampled.count(), n - uncounted.count());
        assert!((LEDGER_SAMPLE / 2..=LEDGER_SAMPLE).contains(&sampled), "{sampled} of {total}");
        // the first server-counted request is always in the sample, and a short run is counted whole
        assert!(recs[1].output_tokens_client.is_some());
        let mut short = recs[..LEDGER_SAMPLE].to_vec();
        short.iter_mut().for_each(|r| r.output_tokens_client = None);
        fill_output_tokens(tok, &mut short).unwrap();
        assert!(short.iter().all(|r| r.output_tokens_client.is_some()));
    }

    #[test]
    fn output_tokens_are_filled_for_successes_only() {
        let tok = qwen3();
        let mut recs = vec![
            RequestRecord { text: "The answer is 42.".into(), ..RequestRecord::default() },
            RequestRecord {
                text: "partial".into(),
                failure: Some(Failure { kind: FailureKind::Timeout, message: "t".into() }),
                ..RequestRecord::default()
            },
        ];
        fill_output_tokens(tok, &mut recs).unwrap();
        assert_eq!(recs[0].output_tokens_client, Some(tok.count("The answer is 42.", false).unwrap()));
        assert_eq!(recs[1].output_tokens_client, None);
    }

    fn turns_run(interrupted: bool, duration_s: f64, not_sent: usize) -> (Plan, RunResult) {
        use servebench_core::config::RunConfig;
        use servebench_core::plan::{ConversationPlan, TokenCounting, TurnPlan};
        use servebench_core::record::TurnRef;
        let plan = Plan {
            api: Api::Chat,
            requests: Vec::new(),
            conversations: vec![ConversationPlan {
                id: 0,
                at_ns: 0,
                system: None,
                turns: ["a?", "b?", "c?"].map(|u| TurnPlan { user: u.into(), max_tokens: 4 }).to_vec(),
            }],
            token_counting: TokenCounting::Estimate,
            notes: Vec::new(),
        };
        let turn = |k: u32, failure: Option<FailureKind>| RequestRecord {
            index: k,
            text: "an answer".into(),
            turn: Some(TurnRef { conversation: 0, turn: k, shared_prefix_tokens: 0 }),
            failure: failure.map(|kind| Failure { kind, message: "x".into() }),
            ..RequestRecord::default()
        };
        let records = vec![turn(0, None), turn(1, Some(FailureKind::HttpStatus)), turn(2, Some(FailureKind::NotSent))];
        let result = RunResult {
            interrupted,
            not_sent,
            notes: vec!["from the plan".into()],
            ..RunResult::finished(RunConfig::for_target("http://127.0.0.1:8000", "m"), records, duration_s)
        };
        (plan, result)
    }

    #[test]
    fn a_multi_turn_run_is_counted_after_it_and_says_which_turns_were_skipped() {
        let (plan, mut result) = turns_run(false, 1.0, 0);
        account(Some(qwen3()), &plan, &mut result);
        assert_eq!(result.notes.len(), 3, "{:?}", result.notes);
        assert!(result.notes[1].contains("counted with"), "{:?}", result.notes);
        assert!(result.notes[2].starts_with("Multi-turn: 1 turns were not sent"), "{:?}", result.notes);
        assert!(result.records[0].prompt_tokens_client.is_some() && result.records[2].prompt_tokens_client.is_none());
        assert_eq!(result.records[0].output_tokens_client, Some(output_tokens(qwen3(), "an answer").unwrap()));
        // Turns the interruption left are not skipped ones; a run stopped before it began
        // counts nothing.
        let (plan, mut result) = turns_run(true, 1.0, 1);
        account(None, &plan, &mut result);
        assert_eq!(result.notes.len(), 2, "{:?}", result.notes);
        let (plan, mut result) = turns_run(true, 0.0, 3);
        account(None, &plan, &mut result);
        assert_eq!(result.notes, ["from the plan"]);
    }
}
