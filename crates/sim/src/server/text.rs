//! What the server reads and writes as text: the prompt's token ids and the generated tokens.
//!
//! With a tokenizer, prompt ids are the real encoding (the chat template applied for chat
//! requests), so the prefix cache sees the tokens a real server would, and generated text is
//! made of real vocabulary tokens: a seeded sequence drawn from a palette of ordinary words that
//! decode on their own and encode back to themselves, so a client re-tokenizing the text counts
//! what the server reported. Without one, prompt ids come from [`WordHashMapper`] (the mapping
//! `predict` uses) and each generated token is one synthetic word.

use std::sync::Arc;

use serde_json::{Map, Value};
use servebench_core::config::Api;
use servebench_workload::{RenderOptions, Tokenizer};

use crate::rng::mix64;
use crate::tokens::{TokenMapper, WordHashMapper, word_id};

/// Where `usage.prompt_tokens` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenCount {
    /// The tokenizer's count of the encoded prompt (chat template applied).
    Tokenizer,
    /// One whitespace-separated word, one token: an estimate.
    Estimate,
}

impl TokenCount {
    /// `tokenizer` or `estimate`, as the `x-servebench-token-count` header says it.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenCount::Tokenizer => "tokenizer",
            TokenCount::Estimate => "estimate",
        }
    }
}

/// Words of the synthetic text, one token each.
const WORDS: [&str; 64] = [
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not", "he",
    "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were", "their",
    "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who", "so", "no",
    "time", "about", "people", "out", "up", "into", "year", "new", "some", "could", "them", "other", "than", "then",
    "now", "only",
];

/// The most palette tokens kept, and how far into the vocabulary to look for them.
const PALETTE_SIZE: usize = 512;
const PALETTE_SCAN: u32 = 50_000;

/// Prompt tokenization and output text for one server.
pub(crate) struct TextModel {
    tokenizer: Option<Arc<Tokenizer>>,
    /// The text of each token the output is drawn from.
    palette: Vec<Box<str>>,
}

impl TextModel {
    pub fn new(tokenizer: Option<Arc<Tokenizer>>) -> Self {
        let palette = tokenizer.as_deref().map(palette_of).unwrap_or_default();
        let palette = if palette.is_empty() { WORDS.iter().map(|w| format!(" {w}").into()).collect() } else { palette };
        Self { tokenizer, palette }
    }

    pub fn token_count(&self) -> TokenCount {
        if self.tokenizer.is_some() { TokenCount::Tokenizer } else { TokenCount::Estimate }
    }

    pub fn tokenizer(&self) -> Option<&Tokenizer> {
        self.tokenizer.as_deref()
    }

    /// The text of output token `index` (1-based) of the request salted `salt`.
    pub fn token(&self, salt: u64, index: u32) -> &str {
        &self.palette[self.slot(salt, index)]
    }

    /// Where in the palette output token `index` of the request salted `salt` is.
    pub fn slot(&self, salt: u64, index: u32) -> usize {
        let k = mix64(salt ^ u64::from(index).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        (k % self.palette.len() as u64) as usize
    }

    /// The tokens generated text is drawn from (never empty).
    pub fn palette(&self) -> &[Box<str>] {
        &self.palette
    }

    /// The prompts of a completions body, one per element of a batch (`prompt` a list of texts
    /// or of token-id lists), as vLLM splits them. Token ids must be in `0..vocab`. The error
    /// is the client's fault (400).
    pub fn completion_prompts(&self, body: &Value, vocab: u32) -> Result<Vec<Prompt>, String> {
        self.prompts_at(body, "prompt", vocab)
    }

    /// The prompts a body holds under `key` (`prompt` of completions, `input` of a pooling
    /// request), split as [`TextModel::completion_prompts`] splits them.
    pub fn prompts_at(&self, body: &Value, key: &str, vocab: u32) -> Result<Vec<Prompt>, String> {
        let prompt = body.get(key).ok_or_else(|| format!("the body has no \"{key}\""))?;
        let add_special = body.get("add_special_tokens").and_then(Value::as_bool).unwrap_or(true);
        split_prompt(prompt, vocab)?
            .into_iter()
            .map(|p| match p {
                PromptInput::Ids(ids) => Ok(Prompt { ids, text: None }),
                PromptInput::Text(text) => {
                    let ids = match self.tokenizer.as_deref() {
                        Some(tok) => tok.encode(text, add_special).map_err(|e| e.to_string())?,
                        None => text.split_whitespace().map(word_id).collect(),
                    };
                    Ok(Prompt { ids, text: Some(text.to_string()) })
                }
            })
            .collect()
    }

    /// What `echo` repeats of a prompt: its text, and the text of each of its tokens (one per
    /// id, so logprobs count `usage.prompt_tokens` of them). Without a tokenizer a prompt sent
    /// as token ids has no text, and asking is the client's fault.
    pub fn echo(&self, prompt: &Prompt) -> Result<Echo, String> {
        match (self.tokenizer.as_deref(), &prompt.text) {
            (Some(tok), text) => {
                let text = match text {
                    Some(t) => t.clone(),
                    None => tok.decode(&prompt.ids).map_err(|e| e.to_string())?,
                };
                let tokens = prompt.ids.iter().map(|&id| tok.decode(&[id]).unwrap_or_default()).collect();
                Ok(Echo { text, tokens })
            }
            (None, Some(text)) => Ok(Echo { text: text.clone(), tokens: word_pieces(text) }),
            (None, None) => Err("echo of a prompt sent as token ids needs a tokenizer to turn the ids back into \
                                 text: start the server with --tokenizer, or send the prompt as text"
                .into()),
        }
    }

    /// The prompt ids of a completions, chat, Responses or Messages body. The error is the client's fault (400).
    pub fn prompt_ids(&self, api: Api, body: &Value) -> Result<Vec<u32>, String> {
        let Some(tok) = self.tokenizer.as_deref() else {
            let mut out = Vec::new();
            WordHashMapper.prompt_ids(api, body, &mut out)?;
            return Ok(out);
        };
        match crate::tokens::prompt_key(api) {
            Some(key) => {
                let add_special = body.get("add_special_tokens").and_then(Value::as_bool).unwrap_or(true);
                let prompt = body.get(key).ok_or_else(|| format!("the body has no \"{key}\""))?;
                completion_ids(tok, prompt, add_special)
            }
            None => {
                let messages = crate::tokens::conversation(api, body)?;
                let text = chat_text(tok, &messages, body)?;
                let add_special = body.get("add_special_tokens").and_then(Value::as_bool).unwrap_or(false);
                tok.encode(&text, add_special).map_err(|e| e.to_string())
            }
        }
    }

    /// `/tokenize`: the ids, and their strings when asked for (tokenizer only).
    pub fn tokenize(&self, body: &Value) -> Result<(Vec<u32>, Option<Vec<String>>), String> {
        let api = if body.get("messages").is_some() { Api::Chat } else { Api::Completions };
        let ids = self.prompt_ids(api, body)?;
        let want_strs = body.get("return_token_strs").and_then(Value::as_bool).unwrap_or(false);
        let strs = match (want_strs, self.tokenizer.as_deref()) {
            (true, Some(tok)) => Some(ids.iter().map(|&id| tok.inner().id_to_token(id).unwrap_or_default()).collect()),
            _ => None,
        };
        Ok((ids, strs))
    }

    /// llama.cpp's `/apply-template`: the text the model reads for a chat body (tokenizer
    /// only, as the template is the tokenizer's).
    pub fn chat_prompt(&self, body: &Value) -> Result<String, String> {
        let tok = self.tokenizer.as_deref().ok_or(
            "this simulated server has no tokenizer, so it has no chat template to apply; start it with --tokenizer",
        )?;
        let messages = body.get("messages").ok_or("the body has no \"messages\" list")?;
        chat_text(tok, messages, body)
    }

    /// `/detokenize`: the text of `ids` (tokenizer only).
    pub fn detokenize(&self, ids: &[u32]) -> Result<String, String> {
        let tok = self.tokenizer.as_deref().ok_or(
            "this simulated server has no tokenizer, so token ids cannot be turned back into text; \
             start it with --tokenizer",
        )?;
        tok.decode(ids).map_err(|e| e.to_string())
    }
}

/// One prompt of a completions request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Prompt {
    pub ids: Vec<u32>,
    /// The text as sent; `None` when it came as token ids.
    pub text: Option<String>,
}

/// A prompt's text and its tokens' texts, for `echo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Echo {
    pub text: String,
    pub tokens: Vec<String>,
}

/// One element of a completions `prompt`, before encoding.
#[derive(Debug, PartialEq, Eq)]
enum PromptInput<'a> {
    Text(&'a str),
    Ids(Vec<u32>),
}

/// vLLM's four shapes of `prompt`: a text, a list of texts, a list of token ids, a list of
/// token-id lists; each text or id list is one prompt. (An empty list is one empty prompt,
/// which the caller refuses as vLLM does.)
fn split_prompt(prompt: &Value, vocab: u32) -> Result<Vec<PromptInput<'_>>, String> {
    match prompt {
        Value::String(s) => Ok(vec![PromptInput::Text(s)]),
        Value::Array(items) if items.iter().all(Value::is_number) => {
            Ok(vec![PromptInput::Ids(token_ids(items, vocab)?)])
        }
        Value::Array(items) if items.iter().all(Value::is_string) => {
            Ok(items.iter().filter_map(Value::as_str).map(PromptInput::Text).collect())
        }
        Value::Array(items) if items.iter().all(Value::is_array) => items
            .iter()
            .map(|item| match item {
                Value::Array(ids) if ids.iter().all(Value::is_number) => Ok(PromptInput::Ids(token_ids(ids, vocab)?)),
                other => {
                    Err(format!("each prompt of a list of token-id lists must be a list of token ids, got {other}"))
                }
            })
            .collect(),
        Value::Array(_) => Err("a prompt list must hold only texts, only token ids, or only lists of token ids \
                                (one per prompt); it mixes them"
            .into()),
        other => Err(format!(
            "prompt must be a text, a list of texts, a list of token ids or a list of token-id lists, got {other}"
        )),
    }
}

/// Token ids as vLLM takes them: whole numbers below the vocabulary's size.
fn token_ids(items: &[Value], vocab: u32) -> Result<Vec<u32>, String> {
    items
        .iter()
        .map(|v| {
            let id = v.as_i64().ok_or_else(|| format!("prompt token {v} is not a token id (a whole number)"))?;
            u32::try_from(id).ok().filter(|&id| id < vocab).ok_or_else(|| {
                format!(
                    "Token id {id} is out of vocabulary: the model's vocabulary has {vocab} tokens, ids 0 to {}",
                    i64::from(vocab) - 1
                )
            })
        })
        .collect()
}

/// A text cut into one piece per whitespace-separated word (the estimate's tokens), each with
/// the whitespace before it, the last with the whitespace after it: the pieces join back into
/// the text.
fn word_pieces(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut piece = String::new();
    let mut in_word = false;
    for c in text.chars() {
        let space = c.is_whitespace();
        if space && in_word {
            out.push(std::mem::take(&mut piece));
        }
        in_word = !space;
        piece.push(c);
    }
    if in_word {
        out.push(piece);
    } else if let Some(last) = out.last_mut() {
        last.push_str(&piece);
    }
    out
}

/// A completions prompt: text, or token ids (a list of one prompt only).
fn completion_ids(tok: &Tokenizer, prompt: &Value, add_special: bool) -> Result<Vec<u32>, String> {
    match prompt {
        Value::String(s) => tok.encode(s, add_special).map_err(|e| e.to_string()),
        Value::Array(items) if items.iter().all(Value::is_number) => items
            .iter()
            .map(|v| {
                v.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| format!("prompt token {v} is not a token id"))
            })
            .collect(),
        Value::Array(items) if items.len() == 1 => completion_ids(tok, &items[0], add_special),
        Value::Array(_) => Err("a list of several prompts is not supported; send one prompt per request".into()),
        other => Err(format!("prompt must be text or a list of token ids, got {other}")),
    }
}

/// A conversation as the model reads it: the chat template with the generation prompt, or a
/// role-prefixed join when the tokenizer has no template.
fn chat_text(tok: &Tokenizer, messages: &Value, body: &Value) -> Result<String, String> {
    let list = messages.as_array().ok_or("\"messages\" must be a list")?;
    let flat: Vec<Value> = list.iter().map(flatten_message).collect::<Result<_, _>>()?;
    let Some(template) = tok.chat_template() else {
        let mut text = String::new();
        for m in &flat {
            let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
            let content = m.get("content").and_then(Value::as_str).unwrap_or("");
            text.push_str(&format!("{role}: {content}\n"));
        }
        text.push_str("assistant:");
        return Ok(text);
    };
    let kwargs: Option<&Map<String, Value>> = body.get("chat_template_kwargs").and_then(Value::as_object);
    let opts = RenderOptions {
        add_generation_prompt: body.get("add_generation_prompt").and_then(Value::as_bool).unwrap_or(true),
        tools: body.get("tools").filter(|t| !t.is_null()),
        kwargs,
    };
    template.render(&Value::Array(flat), &opts).map_err(|e| e.to_string())
}

/// A message with list-of-parts content turned into text (parts joined by newlines), the way
/// vLLM hands "string"-format templates their content.
fn flatten_message(m: &Value) -> Result<Value, String> {
    let obj = m.as_object().ok_or_else(|| format!("each message must be an object, got {m}"))?;
    let mut out = obj.clone();
    if let Some(Value::Array(parts)) = obj.get("content") {
        let texts: Vec<&str> = parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect();
        out.insert("content".into(), Value::String(texts.join("\n")));
    }
    Ok(Value::Object(out))
}

/// Ordinary words of the vocabulary: tokens that decode to a space and 2 to 10 lowercase
/// letters and encode back to themselves alone, taken from the lowest ids (the most frequent
/// merges) up.
fn palette_of(tok: &Tokenizer) -> Vec<Box<str>> {
    let special = tok.all_special_ids();
    let mut out = Vec::with_capacity(PALETTE_SIZE);
    for id in 0..tok.vocab_size().min(PALETTE_SCAN) {
        if out.len() == PALETTE_SIZE {
            break;
        }
        if special.binary_search(&id).is_ok() {
            continue;
        }
        let Ok(text) = tok.decode(&[id]) else { continue };
        let Some(word) = text.strip_prefix(' ') else { continue };
        if !(2..=10).contains(&word.len()) || !word.bytes().all(|b| b.is_ascii_lowercase()) {
            continue;
        }
        if tok.encode(&text, false).ok().as_deref() == Some(&[id][..]) {
            out.push(text.into_boxed_str());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn word_pieces_join_back_into_the_text_one_per_word() {
        for text in ["the cat", "  the cat  sat ", "one", "a\tb\nc", " é ü "] {
            let pieces = word_pieces(text);
            assert_eq!(pieces.concat(), text);
            assert_eq!(pieces.len(), text.split_whitespace().count(), "{text:?}: {pieces:?}");
        }
        assert!(word_pieces("   ").is_empty());
    }

    #[test]
    fn a_completions_prompt_splits_into_vllms_four_shapes() {
        let split = |v: Value| split_prompt(&v, 100).map(|p| p.len());
        assert_eq!(split(json!("a b")), Ok(1));
        assert_eq!(split(json!([1, 2, 3])), Ok(1));
        assert_eq!(split(json!(["a", "b c", ""])), Ok(3));
        assert_eq!(split(json!([[1], [2, 3]])), Ok(2));
        assert_eq!(split(json!([])), Ok(1));
        assert_eq!(
            split_prompt(&json!([[1], [100]]), 100).unwrap_err(),
            "Token id 100 is out of vocabulary: the model's vocabulary has 100 tokens, ids 0 to 99"
        );
    }
}
