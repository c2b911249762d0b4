//! The one error type of the workload crate; every message says what to do about it.

use std::path::PathBuf;

/// Why a workload could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// `--tokenizer` named nothing that could be found.
    #[error(
        "no tokenizer found for `{spec}`; looked in:\n{}\npass --tokenizer with the path of a \
         tokenizer.json file or of a model folder that contains one (the Hugging Face cache is \
         read offline: set HF_HUB_CACHE or HF_HOME if it lives elsewhere)",
        looked.iter().map(|p| format!("  - {}", p.display())).collect::<Vec<_>>().join("\n")
    )]
    TokenizerNotFound { spec: String, looked: Vec<PathBuf> },

    /// A tokenizer file exists but could not be read.
    #[error(
        "could not load the tokenizer at {path}: {message}; check that it is a Hugging Face tokenizer.json (tokenizers >= 0.14 format)"
    )]
    TokenizerLoad { path: PathBuf, message: String },

    /// `tokenizer_config.json` exists but is not valid.
    #[error("could not read {path}: {message}; fix the file or remove it to use the tokenizer without a chat template")]
    TokenizerConfig { path: PathBuf, message: String },

    /// Encoding or decoding failed inside the tokenizer.
    #[error("the tokenizer failed: {0}; check that --tokenizer names the model's own tokenizer")]
    Tokenize(String),

    /// A chat template was needed but the tokenizer has none.
    #[error(
        "the tokenizer `{0}` has no chat template (looked for chat_template.jinja, chat_template.json and `chat_template` in tokenizer_config.json); add one, or skip templating (--skip-chat-template)"
    )]
    NoChatTemplate(String),

    /// The chat template failed to compile or render.
    #[error(transparent)]
    Template(#[from] crate::template::TemplateError),

    /// A dataset or plan file could not be read (the I/O error is in the message, not repeated
    /// as a cause).
    #[error("could not read {path}: {error}; check the path and that the file is readable")]
    Read { path: PathBuf, error: std::io::Error },

    /// A dataset or plan file has content that cannot be used.
    #[error("{path}{}: {message}", line.map(|l| format!(", line {l}")).unwrap_or_default())]
    Parse { path: PathBuf, line: Option<usize>, message: String },

    /// A dataset left no usable request.
    #[error("{0}")]
    Empty(String),

    /// The workload's parameters cannot produce requests.
    #[error("{0}")]
    Invalid(String),

    /// A plan file could not be written.
    #[error("could not write the plan to {path}: {error}; check that its folder exists and is writable")]
    Write { path: PathBuf, error: std::io::Error },
}

impl WorkloadError {
    pub(crate) fn parse(path: impl Into<PathBuf>, line: Option<usize>, message: impl Into<String>) -> Self {
        WorkloadError::Parse { path: path.into(), line, message: message.into() }
    }

    pub(crate) fn read(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        WorkloadError::Read { path: path.into(), error }
    }
}
