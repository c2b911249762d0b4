//! Conversation histories: the `messages` each turn of a multi-turn conversation sends, and,
//! after the run, each turn's prompt tokens and the prefix it shares with the turn before.
//!
//! A turn's messages are the conversation's system prompt (if any), then every earlier user
//! turn followed by the answer the server actually generated for it, then the new user turn.
//! Contents are plain strings, as vLLM's multi-turn benchmark sends them.
//!
//! Prompt tokens and prefix shares are counted after the run ([`count_turns`], called by
//! [`crate::accounting::account`]), never between turns, so tokenizing neither delays a turn nor competes with the measurement for the CPU.
//! The shares are rebuilt from the plan and the recorded answers, which are exactly what was
//! sent:
//! - with a tokenizer, exactly: the turn's prompt is the chat template rendered with the
//!   generation prompt (the contents joined by newlines when the tokenizer has no template,
//!   as the workload crate counts them); its share is the length of the common token prefix
//!   of that prompt and the previous turn's prompt followed by its answer
//!   ([`crate::turn_prefix_share`]'s definition). `prompt_tokens_client` is
//!   set to the prompt's count ([`crate::chat_prompt_tokens`]'s definition).
//! - without one, estimated from text: the fraction of the prompt's bytes (contents joined by
//!   newlines) that the previous prompt and answer already had, times the server's
//!   `usage.prompt_tokens` for the turn; when the server sent no usage, the shared bytes at
//!   four per token ([`crate::datasets::multi_turn::estimate_prefix_share`]).
//!   `prompt_tokens_client` stays unset (the plan's counts are estimates too).

use crate::datasets::multi_turn::{estimate_prefix_share, prompt_text};
use crate::{Tokenizer, WorkloadError, shared_prefix_len};
use serde_json::{Value, json};
use servebench_core::plan::ConversationPlan;
use servebench_core::record::RequestRecord;

/// The growing `messages` array of one conversation.
#[derive(Clone, Debug)]
pub struct History {
    messages: Value,
}

impl History {
    /// An empty history, or one opened by `system`.
    pub fn new(system: Option<&str>) -> Self {
        let mut messages = Vec::new();
        if let Some(s) = system {
            messages.push(message("system", s));
        }
        Self { messages: Value::Array(messages) }
    }

    pub fn push_user(&mut self, text: &str) {
        self.push(message("user", text));
    }

    pub fn push_assistant(&mut self, text: &str) {
        self.push(message("assistant", text));
    }

    fn push(&mut self, m: Value) {
        if let Value::Array(list) = &mut self.messages {
            list.push(m);
        }
    }

    /// The `messages` array, ready for [`crate::BodyBuilder::messages`].
    pub fn messages(&self) -> &Value {
        &self.messages
    }

    /// The contents joined by newlines (what a tokenizer without a chat template sees).
    pub fn plain_text(&self) -> String {
        let list = self.messages.as_array().map(Vec::as_slice).unwrap_or_default();
        let mut out = String::new();
        for (i, m) in list.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(m["content"].as_str().unwrap_or_default());
        }
        out
    }
}

fn message(role: &str, content: &str) -> Value {
    json!({"role": role, "content": content})
}

/// How [`count_turns`] counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnCounting {
    /// Exactly, with this tokenizer.
    Tokenizer(String),
    /// Estimated from the text, because no tokenizer was given, or counting with it failed
    /// (the reason).
    Estimate(Option<String>),
}

impl TurnCounting {
    /// The line the run's notes get.
    pub fn note(&self) -> String {
        match self {
            TurnCounting::Tokenizer(name) => {
                format!("Multi-turn: prompt tokens and prefix shares of every turn counted with {name} after the run.")
            }
            TurnCounting::Estimate(None) => "Multi-turn: no tokenizer: prefix shares are estimated from the shared \
                 text, scaled to the server's prompt tokens."
                .to_string(),
            TurnCounting::Estimate(Some(reason)) => format!(
                "Multi-turn: counting turns with the tokenizer failed ({reason}); prefix shares are estimated from \
                 the shared text."
            ),
        }
    }
}

/// Fills `prompt_tokens_client` (with a tokenizer) and `turn.shared_prefix_tokens` of every
/// turn that was sent. `records` holds every conversation's turns, conversation after
/// conversation, in order. A conversation's turns are taken in order until the first one that
/// was not sent, or one that failed (whose prompt still counts: it was sent).
pub fn count_turns(
    tok: Option<&Tokenizer>,
    conversations: &[ConversationPlan],
    records: &mut [RequestRecord],
) -> TurnCounting {
    if let Some(t) = tok {
        match each_conversation(conversations, records, |c, recs| exact_shares(t, c, recs)) {
            Ok(()) => return TurnCounting::Tokenizer(t.name().to_string()),
            Err(e) => {
                for r in records.iter_mut() {
                    r.prompt_tokens_client = None;
                }
                let _ = each_conversation(conversations, records, estimated_shares);
                return TurnCounting::Estimate(Some(e.to_string()));
            }
        }
    }
    let _ = each_conversation(conversations, records, estimated_shares);
    TurnCounting::Estimate(None)
}

/// Runs `f` on every conversation and its records, on all cores.
fn each_conversation<F>(
    conversations: &[ConversationPlan],
    records: &mut [RequestRecord],
    f: F,
) -> Result<(), WorkloadError>
where
    F: Fn(&ConversationPlan, &mut [RequestRecord]) -> Result<(), WorkloadError> + Sync,
{
    let mut parts: Vec<(&ConversationPlan, &mut [RequestRecord])> = Vec::with_capacity(conversations.len());
    let mut rest = records;
    for c in conversations {
        let n = c.turns.len().min(rest.len());
        let (mine, tail) = std::mem::take(&mut rest).split_at_mut(n);
        parts.push((c, mine));
        rest = tail;
    }
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let per = parts.len().div_ceil(threads).max(1);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = parts
            .chunks_mut(per)
            .map(|chunk| s.spawn(move || chunk.iter_mut().try_for_each(|(c, recs)| f(c, recs))))
            .collect();
        handles.into_iter().try_for_each(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    })
}

/// The turns of `c` that were sent, with their messages: calls `f(k, history, record)` with
/// the history up to and including user turn `k`, and stops after a failed turn.
fn sent_turns(
    c: &ConversationPlan,
    records: &mut [RequestRecord],
    mut f: impl FnMut(&History, &mut RequestRecord) -> Result<(), WorkloadError>,
) -> Result<(), WorkloadError> {
    let mut history = History::new(c.system.as_deref());
    for (turn, rec) in c.turns.iter().zip(records.iter_mut()) {
        if rec.never_sent() {
            break;
        }
        history.push_user(&turn.user);
        f(&history, rec)?;
        if !rec.succeeded() {
            break;
        }
        history.push_assistant(&rec.text);
    }
    Ok(())
}

fn exact_shares(tok: &Tokenizer, c: &ConversationPlan, records: &mut [RequestRecord]) -> Result<(), WorkloadError> {
    let templated = tok.chat_template().is_some();
    // The previous turn's prompt text followed by its answer.
    let mut prev: Option<String> = None;
    sent_turns(c, records, |history, rec| {
        let text = prompt_text(tok, history.messages())?;
        let ids = tok.encode(&text, false)?;
        rec.prompt_tokens_client = Some(if templated { saturating_u32(ids.len()) } else { tok.count(&text, true)? });
        let share = match &prev {
            Some(p) => saturating_u32(shared_prefix_len(&tok.encode(p, false)?, &ids)),
            None => 0,
        };
        set_share(rec, share);
        prev = Some(text + &rec.text);
        Ok(())
    })
}

fn estimated_shares(c: &ConversationPlan, records: &mut [RequestRecord]) -> Result<(), WorkloadError> {
    // The previous turn's messages with its answer, as plain text: a prefix of this turn's.
    let mut prev: Option<String> = None;
    sent_turns(c, records, |history, rec| {
        let text = history.plain_text();
        let share = match &prev {
            Some(p) => {
                let bytes = shared_prefix_len(p.as_bytes(), text.as_bytes());
                match rec.usage.prompt_tokens {
                    Some(n) if !text.is_empty() => {
                        (f64::from(n) * bytes as f64 / text.len() as f64).round().min(f64::from(n)) as u32
                    }
                    _ => estimate_prefix_share(p, &text),
                }
            }
            None => 0,
        };
        set_share(rec, share);
        let mut next = history.clone();
        next.push_assistant(&rec.text);
        prev = Some(next.plain_text());
        Ok(())
    })
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn set_share(rec: &mut RequestRecord, share: u32) {
    if let Some(t) = rec.turn.as_mut() {
        t.shared_prefix_tokens = share;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::qwen3;
    use crate::{chat_prompt_tokens, turn_prefix_share};
    use servebench_core::plan::TurnPlan;
    use servebench_core::record::{Failure, FailureKind, TurnRef, Usage};

    fn conversation(id: u32, system: Option<&str>, users: &[&str]) -> ConversationPlan {
        ConversationPlan {
            id,
            at_ns: 0,
            system: system.map(str::to_string),
            turns: users.iter().map(|u| TurnPlan { user: u.to_string(), max_tokens: 8 }).collect(),
        }
    }

    fn turn(conversation: u32, turn: u32, answer: &str) -> RequestRecord {
        RequestRecord {
            index: turn,
            text: answer.to_string(),
            usage: Usage { prompt_tokens: Some(40 * (turn + 1)), completion_tokens: Some(5) },
            turn: Some(TurnRef { conversation, turn, shared_prefix_tokens: 0 }),
            ..RequestRecord::default()
        }
    }

    fn share(r: &RequestRecord) -> u32 {
        r.turn.unwrap().shared_prefix_tokens
    }

    #[test]
    fn histories_alternate_after_the_system_prompt() {
        let mut h = History::new(Some("Be brief."));
        h.push_user("Hi");
        h.push_assistant("Hello.");
        h.push_user("Bye");
        assert_eq!(
            h.messages(),
            &json!([
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello."},
                {"role": "user", "content": "Bye"},
            ])
        );
        assert_eq!(h.plain_text(), "Be brief.\nHi\nHello.\nBye");
        assert_eq!(History::new(None).plain_text(), "");
    }

    #[test]
    fn exact_counts_match_the_workload_helpers() {
        let tok = qwen3();
        let c = conversation(0, Some("You are terse."), &["Tell me about cats.", "And dogs?", "Birds?"]);
        let answers = ["Cats are small carnivores.", "Dogs are loyal.", "They fly."];
        let mut recs: Vec<RequestRecord> = answers.iter().enumerate().map(|(k, a)| turn(0, k as u32, a)).collect();
        let how = count_turns(Some(tok), std::slice::from_ref(&c), &mut recs);
        assert_eq!(how, TurnCounting::Tokenizer(tok.name().to_string()));

        let mut h = History::new(c.system.as_deref());
        let mut prev: Option<(Value, &str)> = None;
        for (k, rec) in recs.iter().enumerate() {
            h.push_user(&c.turns[k].user);
            assert_eq!(rec.prompt_tokens_client, Some(chat_prompt_tokens(tok, h.messages()).unwrap()), "turn {k}");
            let want = prev.map_or(0, |(m, a)| turn_prefix_share(tok, &m, a, h.messages()).unwrap());
            assert_eq!(share(rec), want, "turn {k}");
            prev = Some((h.messages().clone(), answers[k]));
            h.push_assistant(answers[k]);
        }
        assert_eq!(share(&recs[0]), 0);
        assert!(share(&recs[1]) > 0 && share(&recs[2]) > share(&recs[1]));
        assert!(share(&recs[2]) < recs[2].prompt_tokens_client.unwrap());
    }

    #[test]
    fn estimates_scale_the_shared_text_to_the_servers_prompt_tokens() {
        let c = conversation(0, None, &["aaaa", "bbbb"]);
        let mut recs = vec![turn(0, 0, "cccc"), turn(0, 1, "dddd")];
        assert_eq!(count_turns(None, std::slice::from_ref(&c), &mut recs), TurnCounting::Estimate(None));
        // Turn 1 is "aaaa\ncccc\nbbbb" (14 bytes), of which "aaaa\ncccc" (9) was there: 80 * 9 / 14.
        assert_eq!(share(&recs[0]), 0);
        assert_eq!(share(&recs[1]), 51);
        assert_eq!(recs[1].prompt_tokens_client, None);
        // Without usage: four bytes a token.
        recs[1].usage = Usage::default();
        count_turns(None, std::slice::from_ref(&c), &mut recs);
        assert_eq!(share(&recs[1]), 2);
    }

    #[test]
    fn counting_stops_at_a_failed_or_unsent_turn_and_keeps_conversations_apart() {
        let a = conversation(0, None, &["a1", "a2", "a3"]);
        let b = conversation(1, None, &["b1", "b2"]);
        let mut recs = vec![turn(0, 0, "x"), turn(0, 1, "y"), turn(0, 2, "z"), turn(1, 0, "p"), turn(1, 1, "q")];
        recs[1].failure = Some(Failure { kind: FailureKind::Stream, message: "broke".into() });
        recs[2].failure = Some(Failure { kind: FailureKind::NotSent, message: "not sent".into() });
        count_turns(Some(qwen3()), &[a, b], &mut recs);
        assert!(recs[1].prompt_tokens_client.is_some(), "a failed turn was sent: its prompt counts");
        assert!(share(&recs[1]) > 0);
        assert_eq!((recs[2].prompt_tokens_client, share(&recs[2])), (None, 0));
        assert_eq!(share(&recs[3]), 0, "a conversation's first turn shares nothing");
        assert!(share(&recs[4]) > 0);
    }
}
