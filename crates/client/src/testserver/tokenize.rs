//! The test server's `/tokenize`, `/detokenize` and `/apply-template`, in the schema of the
//! server it imitates ([`TokenizeSchema`]), over a word tokenizer: one token per
//! whitespace-separated word (its text is the word after a space), ids given in order of first
//! appearance, so `/detokenize` gives back the words.

use std::sync::Mutex;

use serde_json::{Value, json};

/// Which server's `/tokenize` schema the test server speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TokenizeSchema {
    /// No `/tokenize` (404), as before these endpoints existed.
    #[default]
    None,
    /// `{"prompt" | "messages"}` → `{"count", "max_model_len", "tokens"}`; detokenize → `{"prompt"}`.
    Vllm,
    /// vLLM's requests; detokenize → `{"text"}`.
    Sglang,
    /// `{"content"}` → `{"tokens"}` (empty without `content`); detokenize → `{"content"}`;
    /// `/apply-template` renders chat messages.
    LlamaCpp,
    /// `200 OK` with a body that is no tokenize answer at all.
    Garbage,
}

/// Chat messages as the imitated template renders them: `<|user|> TEXT <|assistant|>`, two
/// tokens around the text.
const USER: &str = "<|user|>";
const ASSISTANT: &str = "<|assistant|>";

/// The words seen so far: a word's id is its index.
#[derive(Debug, Default)]
pub(crate) struct Words {
    words: Mutex<Vec<String>>,
}

impl Words {
    pub fn ids(&self, text: &str) -> Vec<u32> {
        let mut words = self.words.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        text.split_whitespace()
            .map(|w| match words.iter().position(|k| k == w) {
                Some(i) => i as u32,
                None => {
                    words.push(w.to_string());
                    (words.len() - 1) as u32
                }
            })
            .collect()
    }

    fn text(&self, ids: &[u32]) -> Option<String> {
        let words = self.words.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        ids.iter().map(|&i| words.get(i as usize).map(|w| format!(" {w}"))).collect()
    }
}

/// The text of chat `messages` as the template renders them.
fn render(messages: &Value) -> String {
    let texts: Vec<&str> = messages
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| match &m["content"] {
            Value::String(s) => Some(s.as_str()),
            Value::Array(parts) => parts.first().and_then(|p| p["text"].as_str()),
            _ => None,
        })
        .collect();
    format!("{USER} {} {ASSISTANT}", texts.join(" "))
}

/// The answer to `POST path` with `body`, or `None` for a 404.
pub(crate) fn answer(schema: TokenizeSchema, words: &Words, path: &str, body: &[u8]) -> Option<(u16, String)> {
    let req: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let bad = || Some((400, r#"{"error":{"message":"bad request"}}"#.to_string()));
    let out = match (schema, path) {
        (TokenizeSchema::None, _) => return None,
        (TokenizeSchema::Garbage, "/tokenize" | "/detokenize") => {
            return Some((200, r#"{"result":"ok","n":"several"}"#.to_string()));
        }
        (TokenizeSchema::LlamaCpp, "/tokenize") => {
            let ids = req["content"].as_str().map(|c| words.ids(c)).unwrap_or_default();
            json!({"tokens": ids})
        }
        (TokenizeSchema::LlamaCpp, "/apply-template") => match req.get("messages") {
            Some(m) => json!({"prompt": render(m)}),
            None => return bad(),
        },
        (TokenizeSchema::Vllm | TokenizeSchema::Sglang, "/tokenize") => {
            let ids = match (req["prompt"].as_str(), req.get("messages")) {
                (Some(p), _) => words.ids(p),
                (None, Some(m)) => words.ids(&render(m)),
                _ => return bad(),
            };
            json!({"count": ids.len(), "max_model_len": 4096, "tokens": ids})
        }
        (_, "/detokenize") => {
            let ids: Option<Vec<u32>> = serde_json::from_value(req["tokens"].clone()).ok();
            let Some(text) = ids.and_then(|ids| words.text(&ids)) else { return bad() };
            let key = match schema {
                TokenizeSchema::LlamaCpp => "content",
                TokenizeSchema::Sglang => "text",
                _ => "prompt",
            };
            json!({ key: text })
        }
        _ => return None,
    };
    Some((200, out.to_string()))
}
