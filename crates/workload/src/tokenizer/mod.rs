//! The tokenizer `--tokenizer` names, loaded offline and used the way the Hugging Face stack
//! (and so vLLM's benchmark) uses it: `encode` with or without special tokens, `decode`,
//! `vocab_size` without added tokens, `num_special_tokens_to_add`, `all_special_ids`, and the
//! chat template from the same folder.

mod config;
mod locate;

use std::path::{Path, PathBuf};

pub use config::TokenizerConfig;
pub use locate::{CacheEnv, Located, locate};
use tokenizers::models::ModelWrapper;
use tokenizers::tokenizer::PostProcessor;

use crate::WorkloadError;
use crate::datasets::count_u32;
use crate::template::{ChatTemplate, TemplateError};

/// A loaded tokenizer with its configuration.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    name: String,
    dir: PathBuf,
    config: TokenizerConfig,
    template: Option<ChatTemplate>,
    template_error: Option<TemplateError>,
    vocab_size: u32,
    num_special: u32,
    special_ids: Vec<u32>,
    cleanup: bool,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .field("vocab_size", &self.vocab_size)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Resolves `spec` (a tokenizer.json, a model folder or a cached model id) and loads it.
    pub fn load(spec: &str) -> Result<Self, WorkloadError> {
        let found = locate(spec, &CacheEnv::from_process())?;
        Self::load_located(spec, &found)
    }

    /// Loads a tokenizer whose files were already found.
    pub fn load_located(name: &str, found: &Located) -> Result<Self, WorkloadError> {
        let inner = tokenizers::Tokenizer::from_file(&found.tokenizer_json)
            .map_err(|e| WorkloadError::TokenizerLoad { path: found.tokenizer_json.clone(), message: e.to_string() })?;
        let config = TokenizerConfig::load(&found.dir)?;
        Self::from_parts(name, &found.dir, inner, config)
    }

    /// Builds from an in-memory tokenizer and config (for tests and embedding).
    pub fn from_parts(
        name: &str,
        dir: &Path,
        inner: tokenizers::Tokenizer,
        config: TokenizerConfig,
    ) -> Result<Self, WorkloadError> {
        let vocab_size = count_u32(inner.get_vocab_size(false));
        let num_special = inner.get_post_processor().map_or(0, |pp| count_u32(pp.added_tokens(false)));
        let mut special_ids: Vec<u32> = config.all_special_tokens().filter_map(|t| inner.token_to_id(t)).collect();
        special_ids.sort_unstable();
        special_ids.dedup();
        // transformers 5 applies `clean_up_tokenization_spaces` only to WordPiece models.
        let cleanup = config.clean_up_tokenization_spaces && matches!(inner.get_model(), ModelWrapper::WordPiece(_));
        // A template that does not compile only matters when one is needed.
        let (template, template_error) = match &config.chat_template {
            Some((src, origin)) => match ChatTemplate::new(src, origin, &config.special_tokens) {
                Ok(t) => (Some(t), None),
                Err(e) => (None, Some(e)),
            },
            None => (None, None),
        };
        Ok(Tokenizer {
            inner,
            name: name.to_string(),
            dir: dir.to_path_buf(),
            config,
            template,
            template_error,
            vocab_size,
            num_special,
            special_ids,
            cleanup,
        })
    }

    /// How the tokenizer was named (`--tokenizer`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The folder its files came from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What its `tokenizer_config.json` (and chat-template files) say.
    pub fn config(&self) -> &TokenizerConfig {
        &self.config
    }

    /// The chat template, if the tokenizer ships one.
    pub fn chat_template(&self) -> Option<&ChatTemplate> {
        self.template.as_ref()
    }

    /// Why the tokenizer's chat template could not be compiled, if it could not.
    pub fn chat_template_error(&self) -> Option<&TemplateError> {
        self.template_error.as_ref()
    }

    /// The chat template, or an error saying none was found (or why it does not compile).
    pub fn require_chat_template(&self) -> Result<&ChatTemplate, WorkloadError> {
        if let Some(e) = &self.template_error {
            return Err(WorkloadError::Template(e.clone()));
        }
        self.template.as_ref().ok_or_else(|| WorkloadError::NoChatTemplate(self.name.clone()))
    }

    /// `tokenizer.vocab_size`: the base vocabulary, without added tokens.
    pub fn vocab_size(&self) -> u32 {
        self.vocab_size
    }

    /// `num_special_tokens_to_add()`: tokens the post-processor adds to one sequence (a BOS).
    pub fn num_special_tokens_to_add(&self) -> u32 {
        self.num_special
    }

    /// `all_special_ids`, sorted and without duplicates.
    pub fn all_special_ids(&self) -> &[u32] {
        &self.special_ids
    }

    /// The BOS token and its id, when the tokenizer has one.
    pub fn bos(&self) -> Option<(&str, u32)> {
        let t = self.config.special("bos_token")?;
        Some((t, self.inner.token_to_id(t)?))
    }

    /// The EOS token and its id, when the tokenizer has one.
    pub fn eos(&self) -> Option<(&str, u32)> {
        let t = self.config.special("eos_token")?;
        Some((t, self.inner.token_to_id(t)?))
    }

    /// `tokenizer.encode(text, add_special_tokens=...)`.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, WorkloadError> {
        self.inner
            .encode_fast(text, add_special_tokens)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| WorkloadError::Tokenize(e.to_string()))
    }

    /// The number of tokens `text` encodes to.
    pub fn count(&self, text: &str, add_special_tokens: bool) -> Result<u32, WorkloadError> {
        self.inner
            .encode_fast(text, add_special_tokens)
            .map(|e| count_u32(e.len()))
            .map_err(|e| WorkloadError::Tokenize(e.to_string()))
    }

    /// `tokenizer.decode(ids)` (special tokens kept, as Hugging Face does by default).
    pub fn decode(&self, ids: &[u32]) -> Result<String, WorkloadError> {
        let text = self.inner.decode(ids, false).map_err(|e| WorkloadError::Tokenize(e.to_string()))?;
        Ok(if self.cleanup { clean_up_tokenization(&text) } else { text })
    }

    /// The wrapped `tokenizers` tokenizer.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }
}

/// Hugging Face's `clean_up_tokenization`: removes spaces before punctuation and contractions.
pub fn clean_up_tokenization(s: &str) -> String {
    s.replace(" .", ".")
        .replace(" ?", "?")
        .replace(" !", "!")
        .replace(" ,", ",")
        .replace(" ' ", "'")
        .replace(" n't", "n't")
        .replace(" 'm", "'m")
        .replace(" 's", "'s")
        .replace(" 've", "'ve")
        .replace(" 're", "'re")
}

#[cfg(test)]
mod tests;
