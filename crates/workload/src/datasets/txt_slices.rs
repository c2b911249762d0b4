//! vLLM's `txt-slices` dataset: a text file tokenized whole (no special tokens), each prompt
//! `input_len` of its tokens from a start drawn with Python's `random.randint` after
//! `random.seed(seed)`, wrapping past the end to the start; decoded, then counted again with
//! special tokens. Natural text at an exact length, where the random dataset's token soup
//! would tell a speculative decoder or a prefix cache nothing.
//!
//! Without a tokenizer the text is cut in characters, four to a token, and lengths are
//! estimated.

use std::path::Path;

use servebench_core::rng::PyRandom;

use super::{Dataset, Sample, check_total_prompt_tokens, count_with_special};
use crate::{Tokenizer, WorkloadError};

/// Characters a token is taken to hold where there is no tokenizer (as [`super::estimate_tokens`]'s
/// bytes: a slice of plain English holds about as many tokens as asked).
const CHARS_PER_TOKEN: usize = 4;

/// The txt-slices dataset's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct TxtSlicesSpec {
    pub num_requests: usize,
    /// Tokens of text in each prompt.
    pub input_len: u32,
    pub output_len: u32,
    pub seed: u64,
}

/// Builds the dataset.
pub fn sample(tok: Option<&Tokenizer>, path: &Path, spec: &TxtSlicesSpec) -> Result<Dataset, WorkloadError> {
    if spec.input_len == 0 {
        return Err(WorkloadError::Invalid(
            "txt-slices needs prompts of at least one token: raise --random-input-len (or --input-len)".into(),
        ));
    }
    let n = spec.num_requests;
    check_total_prompt_tokens(n, n as i64 * i64::from(spec.input_len), "--num-prompts or --random-input-len")?;
    let text = std::fs::read_to_string(path).map_err(|e| WorkloadError::read(path, e))?;
    if text.trim().is_empty() {
        return Err(empty(path));
    }
    let mut rng = PyRandom::new(spec.seed);
    let len = spec.input_len as usize;
    let (prompts, note) = match tok {
        Some(tok) => {
            let ids = tok.encode(&text, false)?;
            if ids.is_empty() {
                return Err(empty(path));
            }
            let prompts = (0..n).map(|_| tok.decode(&wrapped(&ids, &mut rng, len))).collect::<Result<Vec<_>, _>>()?;
            let note = format!(
                "Slicing {n} prompts of {} tokens from {} ({} tokens).",
                spec.input_len,
                path.display(),
                ids.len()
            );
            (prompts, note)
        }
        None => {
            let chars: Vec<char> = text.chars().collect();
            let cut = len.saturating_mul(CHARS_PER_TOKEN);
            let prompts = (0..n).map(|_| wrapped(&chars, &mut rng, cut).into_iter().collect()).collect();
            let note = format!(
                "No tokenizer: txt-slices cuts {cut} characters a prompt ({CHARS_PER_TOKEN} a token) and estimates \
                 their lengths; pass --tokenizer for exact slices."
            );
            (prompts, note)
        }
    };
    let samples = prompts
        .into_iter()
        .map(|prompt: String| {
            Ok(Sample {
                prompt_len: count_with_special(tok, &prompt)?,
                prompt,
                raw_tokens: None,
                max_tokens: spec.output_len,
                timestamp_s: None,
                images: Vec::new(),
            })
        })
        .collect::<Result<Vec<_>, WorkloadError>>()?;
    let notes = vec![note];
    Ok(Dataset { samples, conversations: Vec::new(), notes, python_random: Some(rng), query: None })
}

/// `len` items of `items` from a start drawn as `random.randint(0, len(items) - 1)`, wrapping
/// past the end.
fn wrapped<T: Copy>(items: &[T], rng: &mut PyRandom, len: usize) -> Vec<T> {
    let start = rng.randbelow(items.len() as u64) as usize;
    items.iter().cycle().skip(start).take(len).copied().collect()
}

fn empty(path: &Path) -> WorkloadError {
    WorkloadError::Empty(format!("{} has no text to slice prompts from; pass a text file with some", path.display()))
}

#[cfg(test)]
mod tests;
