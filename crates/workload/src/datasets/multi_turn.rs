//! Multi-turn conversations from ShareGPT: each conversation's user turns, sent one after
//! another with the growing history, with `max_tokens` from the recorded reply (or fixed); and
//! the prefix share between consecutive turns that a prefix cache can reuse.

use std::path::Path;

use serde_json::Value;
use servebench_core::config::MultiTurn;
use servebench_core::plan::{ConversationPlan, TurnPlan};

use super::sharegpt::{Entry, load};
use super::{Dataset, count_u32};
use crate::template::RenderOptions;
use crate::{Tokenizer, WorkloadError};

/// Multi-turn parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct MultiTurnSpec {
    /// Conversations wanted.
    pub num_conversations: usize,
    /// A fixed `max_tokens` per turn instead of the recorded reply's length.
    pub output_len: Option<u32>,
    pub shuffle: bool,
    pub seed: u64,
    pub options: MultiTurn,
}

fn is_user(role: &str) -> bool {
    matches!(role, "human" | "user")
}

fn is_assistant(role: &str) -> bool {
    matches!(role, "gpt" | "chatgpt" | "bing" | "bard" | "assistant" | "model")
}

/// A conversation's optional system message and its (user, reply) pairs, up to the first
/// message out of the user/assistant alternation.
pub fn turns_of(entry: &Entry) -> (Option<String>, Vec<(String, String)>) {
    let mut msgs = entry.conversations.as_slice();
    let mut system = None;
    if let Some(first) = msgs.first().filter(|m| m.from == "system") {
        system = Some(first.value.clone());
        msgs = &msgs[1..];
    }
    let mut pairs = Vec::new();
    for pair in msgs.chunks(2) {
        match pair {
            [u, a] if is_user(&u.from) && is_assistant(&a.from) && !u.value.is_empty() => {
                pairs.push((u.value.clone(), a.value.clone()));
            }
            _ => break,
        }
    }
    (system, pairs)
}

/// Builds conversations from a ShareGPT file (shuffled as the sharegpt dataset is).
pub fn sample(tok: Option<&Tokenizer>, path: &Path, spec: &MultiTurnSpec) -> Result<Dataset, WorkloadError> {
    let entries = load(path, spec.shuffle, spec.seed)?;
    let ds = from_entries(tok, &entries, spec)?;
    if ds.conversations.is_empty() {
        return Err(WorkloadError::Empty(format!(
            "{} has no conversation with at least {} user turns",
            path.display(),
            min_turns(&spec.options)
        )));
    }
    Ok(ds)
}

fn min_turns(o: &MultiTurn) -> usize {
    if o.max_turns == 1 { 1 } else { 2 }
}

/// Builds conversations from loaded entries: those with at least two user turns (one when
/// `max_turns` is 1), cut to `max_turns` (0 = no limit).
pub fn from_entries(
    tok: Option<&Tokenizer>,
    entries: &[Entry],
    spec: &MultiTurnSpec,
) -> Result<Dataset, WorkloadError> {
    let mut conversations = Vec::new();
    let mut turns_total = 0usize;
    for entry in entries {
        if conversations.len() >= spec.num_conversations {
            break;
        }
        let (system, mut pairs) = turns_of(entry);
        if spec.options.max_turns > 0 {
            pairs.truncate(spec.options.max_turns);
        }
        if pairs.len() < min_turns(&spec.options) {
            continue;
        }
        let mut turns = Vec::with_capacity(pairs.len());
        for (user, reply) in pairs {
            let max_tokens = match (spec.output_len, tok) {
                (Some(n), _) => n,
                (None, Some(t)) => t.count(&reply, false)?.max(1),
                (None, None) => super::estimate_tokens(&reply),
            };
            turns.push(TurnPlan { user, max_tokens });
        }
        turns_total += turns.len();
        let id = u32::try_from(conversations.len()).map_err(|_| {
            WorkloadError::Invalid(format!("at most {} conversations fit in one run; lower --num-prompts", u32::MAX))
        })?;
        conversations.push(ConversationPlan { id, at_ns: 0, system, turns });
    }
    let mut notes = Vec::new();
    if !conversations.is_empty() {
        notes.push(format!(
            "Multi-turn: {} conversations, {} turns ({:.2} per conversation).",
            conversations.len(),
            turns_total,
            turns_total as f64 / conversations.len() as f64
        ));
    }
    if conversations.len() < spec.num_conversations {
        notes.push(format!(
            "Multi-turn: only {} conversations qualify; {} were asked for.",
            conversations.len(),
            spec.num_conversations
        ));
    }
    Ok(Dataset { samples: Vec::new(), conversations, notes, python_random: None, query: None })
}

/// Length of the common prefix of two sequences (token ids, or the bytes of two texts).
pub fn shared_prefix_len<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Tokens at the start of `next` that `prev` already had (both encoded without special tokens).
pub fn shared_prefix_tokens(tok: &Tokenizer, prev: &str, next: &str) -> Result<u32, WorkloadError> {
    let a = tok.encode(prev, false)?;
    let b = tok.encode(next, false)?;
    Ok(count_u32(shared_prefix_len(&a, &b)))
}

/// The text the server tokenizes for `messages`: the chat template with the generation prompt,
/// or the contents joined by newlines when the tokenizer has no template.
pub fn prompt_text(tok: &Tokenizer, messages: &Value) -> Result<String, WorkloadError> {
    match tok.chat_template() {
        Some(t) => Ok(t.render(messages, &RenderOptions { add_generation_prompt: true, ..RenderOptions::default() })?),
        None => Ok(messages
            .as_array()
            .map(|m| m.iter().filter_map(|x| x["content"].as_str()).collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()),
    }
}

/// The prefix share of turn k: tokens of its prompt (`next_messages`) already present in turn
/// k-1's prompt (`prev_messages`) followed by its answer.
pub fn turn_prefix_share(
    tok: &Tokenizer,
    prev_messages: &Value,
    prev_answer: &str,
    next_messages: &Value,
) -> Result<u32, WorkloadError> {
    let prev = prompt_text(tok, prev_messages)? + prev_answer;
    let next = prompt_text(tok, next_messages)?;
    shared_prefix_tokens(tok, &prev, &next)
}

/// Without a tokenizer: the shared prefix in bytes, at four bytes per token.
pub fn estimate_prefix_share(prev: &str, next: &str) -> u32 {
    count_u32(shared_prefix_len(prev.as_bytes(), next.as_bytes()) / 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{qwen3, testdata};
    use serde_json::json;

    fn spec(n: usize, max_turns: usize) -> MultiTurnSpec {
        MultiTurnSpec {
            num_conversations: n,
            output_len: None,
            shuffle: true,
            seed: 0,
            options: MultiTurn { max_active_conversations: 4, think_time_s: 0.5, max_turns },
        }
    }

    #[test]
    fn sharegpt_conversations_become_turns_with_reply_lengths() {
        let path = testdata().join("sharegpt/sharegpt_small.json");
        let ds = sample(Some(qwen3()), &path, &spec(30, 3)).unwrap();
        assert_eq!(ds.conversations.len(), 30);
        assert!(ds.samples.is_empty());
        let entries = load(&path, true, 0).unwrap();
        let first = entries.iter().find(|e| turns_of(e).1.len() >= 2).unwrap();
        let (_, pairs) = turns_of(first);
        let c = &ds.conversations[0];
        assert_eq!(c.turns[0].user, pairs[0].0);
        assert_eq!(c.turns[1].max_tokens, qwen3().count(&pairs[1].1, false).unwrap().max(1));
        assert!(ds.conversations.iter().all(|c| (2..=3).contains(&c.turns.len())));
        assert!(ds.conversations.iter().enumerate().all(|(i, c)| c.id as usize == i));
        let fixed = sample(None, &path, &MultiTurnSpec { output_len: Some(64), ..spec(30, 0) }).unwrap();
        assert!(fixed.conversations.iter().flat_map(|c| &c.turns).all(|t| t.max_tokens == 64));
        assert!(fixed.conversations.iter().any(|c| c.turns.len() > 3));
    }

    #[test]
    fn system_messages_and_broken_alternation() {
        let e: Entry = serde_json::from_value(json!({"conversations": [
            {"from": "system", "value": "S"},
            {"from": "human", "value": "u1"}, {"from": "gpt", "value": "a1"},
            {"from": "human", "value": "u2"}, {"from": "human", "value": "u3"},
        ]}))
        .unwrap();
        let (system, pairs) = turns_of(&e);
        assert_eq!(system.as_deref(), Some("S"));
        assert_eq!(pairs, [("u1".to_string(), "a1".to_string())]);
    }

    #[test]
    fn the_prefix_share_counts_the_previous_prompt_and_answer() {
        let tok = qwen3();
        let prev = json!([{"role": "user", "content": "Tell me about cats."}]);
        let next = json!([
            {"role": "user", "content": "Tell me about cats."},
            {"role": "assistant", "content": "Cats are small carnivores."},
            {"role": "user", "content": "And dogs?"}
        ]);
        let share = turn_prefix_share(tok, &prev, "Cats are small carnivores.", &next).unwrap();
        let prev_prompt = tok.count(&prompt_text(tok, &prev).unwrap(), false).unwrap();
        let next_prompt = tok.count(&prompt_text(tok, &next).unwrap(), false).unwrap();
        assert!(share > prev_prompt, "{share} vs {prev_prompt}");
        assert!(share < next_prompt);
        assert_eq!(shared_prefix_len(&[1, 2, 3], &[1, 2, 4, 5]), 2);
        assert_eq!(shared_prefix_len(&[], &[1]), 0);
        assert_eq!(estimate_prefix_share("abcdefgh-x", "abcdefgh-y"), 2);
    }
}
