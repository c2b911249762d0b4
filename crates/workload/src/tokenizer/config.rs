//! Reads the parts of `tokenizer_config.json` (and the chat-template files beside it) that
//! change behaviour: the named special tokens, the cleanup flag and the chat template source.

use std::path::Path;

use serde_json::{Map, Value};

use crate::WorkloadError;

/// The named special-token slots, in the order Hugging Face lists them.
pub const SPECIAL_SLOTS: [&str; 7] =
    ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];

/// What servebench uses from a tokenizer's configuration files.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenizerConfig {
    /// `(slot, token)` for every named special token that is set (`bos_token`, `eos_token`,
    /// ..., then the named `extra_special_tokens`), as passed to chat templates.
    pub special_tokens: Vec<(String, String)>,
    /// `additional_special_tokens` (plus list-form `extra_special_tokens`).
    pub additional_special_tokens: Vec<String>,
    /// `clean_up_tokenization_spaces`.
    pub clean_up_tokenization_spaces: bool,
    /// The chat template source and where it came from, if any.
    pub chat_template: Option<(String, String)>,
}

/// A token in the config: a plain string or an `AddedToken` object with `content`.
fn token_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}

impl TokenizerConfig {
    /// Reads `dir/tokenizer_config.json` (optional) and the chat template
    /// (`chat_template.jinja`, else `chat_template.json`, else the config's `chat_template`).
    pub fn load(dir: &Path) -> Result<Self, WorkloadError> {
        let path = dir.join("tokenizer_config.json");
        let raw: Map<String, Value> = match read_optional(&path)? {
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| WorkloadError::TokenizerConfig { path: path.clone(), message: e.to_string() })?,
            None => Map::new(),
        };
        let mut cfg = Self::from_map(&raw);
        let jinja = dir.join("chat_template.jinja");
        let json = dir.join("chat_template.json");
        if let Some(src) = read_optional(&jinja)? {
            cfg.chat_template = Some((src, jinja.display().to_string()));
        } else if let Some(text) = read_optional(&json)? {
            let v: Value = serde_json::from_str(&text)
                .map_err(|e| WorkloadError::TokenizerConfig { path: json.clone(), message: e.to_string() })?;
            if let Some(src) = pick_template(v.get("chat_template").unwrap_or(&Value::Null)) {
                cfg.chat_template = Some((src, json.display().to_string()));
            }
        }
        Ok(cfg)
    }

    /// Interprets an already-parsed `tokenizer_config.json`.
    pub fn from_map(raw: &Map<String, Value>) -> Self {
        let class = raw.get("tokenizer_class").and_then(Value::as_str).unwrap_or("");
        let defaults = class_defaults(class.strip_suffix("Fast").unwrap_or(class));
        let mut special_tokens = Vec::new();
        for slot in SPECIAL_SLOTS {
            let token = match raw.get(slot) {
                Some(v) => token_text(v),
                None => defaults.iter().find(|(s, _)| *s == slot).map(|(_, t)| (*t).to_string()),
            };
            if let Some(t) = token {
                special_tokens.push((slot.to_string(), t));
            }
        }
        let mut additional: Vec<String> = raw
            .get("additional_special_tokens")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(token_text).collect())
            .unwrap_or_default();
        match raw.get("extra_special_tokens") {
            Some(Value::Object(o)) => {
                for (name, v) in o {
                    if let Some(t) = token_text(v) {
                        special_tokens.push((name.clone(), t));
                    }
                }
            }
            Some(Value::Array(a)) => additional.extend(a.iter().filter_map(token_text)),
            _ => {}
        }
        let chat_template =
            raw.get("chat_template").and_then(pick_template).map(|s| (s, "tokenizer_config.json".to_string()));
        TokenizerConfig {
            special_tokens,
            additional_special_tokens: additional,
            clean_up_tokenization_spaces: raw
                .get("clean_up_tokenization_spaces")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            chat_template,
        }
    }

    /// The token in a named slot (`bos_token`, `eos_token`, ...).
    pub fn special(&self, slot: &str) -> Option<&str> {
        self.special_tokens.iter().find(|(s, _)| s == slot).map(|(_, t)| t.as_str())
    }

    /// Every special token string Hugging Face counts in `all_special_ids`.
    pub fn all_special_tokens(&self) -> impl Iterator<Item = &str> {
        self.special_tokens
            .iter()
            .map(|(_, t)| t.as_str())
            .chain(self.additional_special_tokens.iter().map(String::as_str))
    }
}

/// The text of `path`, or `None` when there is no such file; any other failure (no permission,
/// not UTF-8) is an error rather than a silently missing file.
fn read_optional(path: &Path) -> Result<Option<String>, WorkloadError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(WorkloadError::read(path, e)),
    }
}

/// Special tokens a transformers tokenizer class sets when the config leaves the slot out.
fn class_defaults(class: &str) -> &'static [(&'static str, &'static str)] {
    match class {
        "GemmaTokenizer" => &[
            ("unk_token", "<unk>"),
            ("bos_token", "<bos>"),
            ("eos_token", "<eos>"),
            ("pad_token", "<pad>"),
            ("mask_token", "<mask>"),
        ],
        "Qwen2Tokenizer" => {
            &[("unk_token", "<|endoftext|>"), ("eos_token", "<|endoftext|>"), ("pad_token", "<|endoftext|>")]
        }
        "LlamaTokenizer" => &[("unk_token", "<unk>"), ("bos_token", "<s>"), ("eos_token", "</s>")],
        _ => &[],
    }
}

/// A template string, or from a list of `{name, template}` the one named `default`
/// (else the first).
fn pick_template(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let named = |want: Option<&str>| {
                items.iter().find_map(|it| {
                    let name = it.get("name").and_then(Value::as_str);
                    let tpl = it.get("template").and_then(Value::as_str)?;
                    (want.is_none() || name == want).then(|| tpl.to_string())
                })
            };
            named(Some("default")).or_else(|| named(None))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(v: Value) -> TokenizerConfig {
        TokenizerConfig::from_map(v.as_object().unwrap())
    }

    #[test]
    fn reads_string_and_added_token_forms() {
        let c = cfg(json!({
            "bos_token": {"content": "<s>", "lstrip": false},
            "eos_token": "</s>",
            "unk_token": null,
            "additional_special_tokens": ["<a>", {"content": "<b>"}],
            "extra_special_tokens": {"image_token": "<img>"},
            "clean_up_tokenization_spaces": true,
        }));
        assert_eq!(c.special("bos_token"), Some("<s>"));
        assert_eq!(c.special("eos_token"), Some("</s>"));
        assert_eq!(c.special("unk_token"), None);
        assert_eq!(c.special("image_token"), Some("<img>"));
        let all: Vec<&str> = c.all_special_tokens().collect();
        assert_eq!(all, ["<s>", "</s>", "<img>", "<a>", "<b>"]);
        assert!(c.clean_up_tokenization_spaces);
        assert!(c.chat_template.is_none());
    }

    #[test]
    fn class_defaults_fill_only_missing_slots() {
        let c = cfg(json!({"tokenizer_class": "GemmaTokenizerFast", "eos_token": "<end_of_turn>"}));
        assert_eq!(c.special("mask_token"), Some("<mask>"));
        assert_eq!(c.special("eos_token"), Some("<end_of_turn>"));
        let c = cfg(json!({"tokenizer_class": "Qwen2Tokenizer", "unk_token": null, "bos_token": null}));
        assert_eq!(c.special("unk_token"), None);
        assert_eq!(c.special("pad_token"), Some("<|endoftext|>"));
        assert_eq!(c.special("bos_token"), None);
    }

    #[test]
    fn picks_the_default_named_template() {
        let c = cfg(json!({"chat_template": [
            {"name": "tool_use", "template": "T"},
            {"name": "default", "template": "D"},
        ]}));
        assert_eq!(c.chat_template.unwrap().0, "D");
        let c = cfg(json!({"chat_template": [{"name": "rag", "template": "R"}]}));
        assert_eq!(c.chat_template.unwrap().0, "R");
        let c = cfg(json!({"chat_template": null}));
        assert!(c.chat_template.is_none());
    }
}
