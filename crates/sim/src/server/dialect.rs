//! Which real server the simulator's HTTP API imitates at its edges: vLLM's (the default),
//! llama.cpp's `llama-server`, or SGLang's.
//!
//! The generation endpoints are OpenAI's in all three; what differs, and what a client must
//! survive, is:
//! - `/tokenize` and `/detokenize`: vLLM's take `{"prompt"}` or `{"messages"}` and answer
//!   `{"count", "max_model_len", "tokens"}` / `{"prompt"}`; SGLang's take the same and answer
//!   `{"tokens", "count", "max_model_len"}` / `{"text"}`; llama.cpp's take `{"content",
//!   "add_special"}` and answer `{"tokens"}` (an empty list when `content` is missing, so a
//!   vLLM-style call counts 0 tokens) / `{"content"}`, and chat messages are rendered by
//!   `POST /apply-template` (`{"messages"}` → `{"prompt"}`);
//! - where usage arrives on a streamed `/v1/completions`: in a `choices: []` chunk of its own
//!   (vLLM, SGLang, when `stream_options.include_usage` asks), or inside the last chunk that
//!   still carries `choices` (llama.cpp);
//! - keep-alive: llama.cpp closes the connection after every streamed response (here with
//!   `Connection: close`), the others keep it open.

use std::fmt;
use std::str::FromStr;

/// The server the HTTP API imitates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dialect {
    #[default]
    Vllm,
    LlamaCpp,
    Sglang,
}

impl Dialect {
    /// Every dialect with its command-line spelling.
    pub const ALL: [(Dialect, &'static str); 3] =
        [(Dialect::Vllm, "vllm"), (Dialect::LlamaCpp, "llama.cpp"), (Dialect::Sglang, "sglang")];

    /// The command-line spelling.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(d, _)| *d == self).map_or("vllm", |(_, n)| n)
    }

    /// Whether usage goes inside the last content chunk of a streamed completion (always,
    /// as llama.cpp does) instead of a `choices: []` chunk of its own.
    pub fn usage_in_last_chunk(self, api: servebench_core::config::Api) -> bool {
        self == Dialect::LlamaCpp && api == servebench_core::config::Api::Completions
    }

    /// Whether the connection is closed after every streamed response.
    pub fn closes_after_stream(self) -> bool {
        self == Dialect::LlamaCpp
    }

    /// Whether sampling parameters are held to vLLM's ranges ([`crate::sampling`]): SGLang
    /// holds them to the same ones; llama.cpp takes any value (a temperature of 0 or below
    /// samples greedily).
    pub fn checks_sampling(self) -> bool {
        self != Dialect::LlamaCpp
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A dialect name that is none of [`Dialect::ALL`].
#[derive(Debug, thiserror::Error)]
#[error("unknown server dialect {0:?}; use vllm, llama.cpp or sglang")]
pub struct UnknownDialect(pub String);

impl FromStr for Dialect {
    type Err = UnknownDialect;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        let wanted = match wanted.as_str() {
            "llamacpp" | "llama-cpp" | "llama_cpp" => "llama.cpp",
            other => other,
        };
        Self::ALL.iter().find(|(_, n)| *n == wanted).map(|(d, _)| *d).ok_or_else(|| UnknownDialect(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_names_say_what_is_known() {
        for (d, n) in Dialect::ALL {
            assert_eq!(n.parse::<Dialect>().unwrap(), d);
            assert_eq!(d.to_string(), n);
        }
        assert_eq!("llama-cpp".parse::<Dialect>().unwrap(), Dialect::LlamaCpp);
        let e = "tgi".parse::<Dialect>().unwrap_err().to_string();
        assert!(e.contains("\"tgi\"") && e.contains("llama.cpp"), "{e}");
    }
}
