//! Token accounting: prompt tokens as the server will count them (chat template applied for
//! chat requests, special tokens added for completions), and output tokens of generated text
//! after a run (vLLM's fallback when the server sends no usage).

use serde_json::Value;
use servebench_core::config::Api;
use servebench_core::record::RequestRecord;

use crate::datasets::multi_turn::prompt_text;
use crate::{Tokenizer, WorkloadError};

/// Prompt tokens of a single-prompt request: `encode(prompt)` with special tokens for
/// completions; the rendered chat template (one user message, generation prompt) without
/// added special tokens for chat, or the plain prompt when the tokenizer has no template.
pub fn prompt_tokens(tok: &Tokenizer, api: Api, prompt: &str) -> Result<u32, WorkloadError> {
    match (api, tok.chat_template()) {
        (Api::Chat, Some(t)) => tok.count(&t.render_user(prompt)?, false),
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

/// Fills `output_tokens_client` for every successful record from its text.
pub fn fill_output_tokens(tok: &Tokenizer, records: &mut [RequestRecord]) -> Result<(), WorkloadError> {
    for r in records.iter_mut().filter(|r| r.succeeded()) {
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
        let msgs = json!([{"role": "user", "content": "hello world"}]);
        assert_eq!(chat_prompt_tokens(tok, &msgs).unwrap(), chat);
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
}
