//! Datasets: where prompts, their token lengths and their `max_tokens` come from. Each module
//! reproduces one of vLLM's datasets (or adds trace replay and multi-turn conversations) and
//! returns a [`Dataset`].

pub mod custom;
pub mod fit;
pub mod images;
pub mod multi_turn;
pub mod prefix_repetition;
pub mod random;
pub mod rerank;
pub mod sharegpt;
pub mod spec_bench;
pub mod trace;
pub mod txt_slices;
pub mod words;

use servebench_core::plan::ConversationPlan;
use servebench_core::rng::PyRandom;

use crate::{Tokenizer, WorkloadError};

/// One request's content, before it becomes a body.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub prompt: String,
    /// Prompt tokens as the dataset counts them (vLLM's `prompt_len`; an estimate without a
    /// tokenizer).
    pub prompt_len: u32,
    /// Tokens `prompt` encodes to without special tokens, when known exactly (saves re-encoding).
    pub raw_tokens: Option<u32>,
    /// The output length asked for (`max_tokens`).
    pub max_tokens: u32,
    /// Seconds after the trace's start, for datasets that carry their own arrival times.
    pub timestamp_s: Option<f64>,
    /// Images sent after the prompt's text, as `data:` URLs (`random-mm`); empty for text alone.
    pub images: Vec<String>,
}

/// What a dataset produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dataset {
    /// Independent requests, in dataset order.
    pub samples: Vec<Sample>,
    /// Multi-turn conversations (their `at_ns` is filled in by the plan builder).
    pub conversations: Vec<ConversationPlan>,
    /// Lines to show before the run (vLLM logs similar ones).
    pub notes: Vec<String>,
    /// Python's global `random` as the dataset left it, when the dataset re-seeded it (vLLM's
    /// shuffles and oversampling do); `None` leaves it as vLLM's `random.seed(seed)` at start.
    /// LoRA assignment draws from it next.
    pub python_random: Option<PyRandom>,
    /// The query every request scores its documents against (`random-rerank`), whose
    /// documents are the samples.
    pub query: Option<Sample>,
}

/// A rough token count for text when no tokenizer is given: one token per four bytes.
pub fn estimate_tokens(text: &str) -> u32 {
    count_u32(text.len().div_ceil(4).max(1))
}

/// The most prompt tokens one generated dataset holds (2^30): every prompt is built before the
/// run, at a few bytes a token, so more would exhaust a machine's memory instead of failing.
pub const MAX_TOTAL_PROMPT_TOKENS: i64 = 1 << 30;

/// Refuses a generated dataset whose `n` prompts would hold `total` tokens, past
/// [`MAX_TOTAL_PROMPT_TOKENS`]; `lower` names the flags to lower.
pub(crate) fn check_total_prompt_tokens(n: usize, total: i64, lower: &str) -> Result<(), WorkloadError> {
    if total <= MAX_TOTAL_PROMPT_TOKENS {
        return Ok(());
    }
    Err(WorkloadError::Invalid(format!(
        "the {n} prompts would hold {total} tokens in all, more than the {MAX_TOTAL_PROMPT_TOKENS} a run \
         builds in memory (several GB of text); lower {lower}"
    )))
}

/// A length as a token count, saturating at `u32::MAX` (no prompt comes near: that is 16 GiB
/// of token ids).
pub(crate) fn count_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `len(tokenizer(text).input_ids)` (special tokens included, as vLLM's ShareGPT and custom
/// datasets count), or the estimate without a tokenizer.
pub(crate) fn count_with_special(tok: Option<&Tokenizer>, text: &str) -> Result<u32, WorkloadError> {
    match tok {
        Some(t) => t.count(text, true),
        None => Ok(estimate_tokens(text)),
    }
}

/// Maps `f` over `items` on all cores, keeping the order.
pub(crate) fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get).min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> =
            items.chunks(chunk).map(|c| s.spawn(move || c.iter().map(f).collect::<Vec<R>>())).collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    })
}

/// vLLM's `random.seed(seed); random.shuffle(items)` when `shuffle`: Python's `random` after
/// it, or `None` (and `items` as they were) without a shuffle.
pub(crate) fn seeded_shuffle<T>(items: &mut [T], shuffle: bool, seed: u64) -> Option<PyRandom> {
    shuffle.then(|| {
        let mut rng = PyRandom::new(seed);
        rng.shuffle(items);
        rng
    })
}

/// vLLM's `maybe_oversample_requests`: too few samples are topped up with `random.choice`
/// copies drawn from `random.seed(seed)`; `oversample = false` keeps what there is. Returns
/// Python's `random` after the draws, when there were some.
pub(crate) fn oversample(
    samples: &mut Vec<Sample>,
    num_requests: usize,
    oversample: bool,
    seed: u64,
    notes: &mut Vec<String>,
    what: &str,
) -> Result<Option<PyRandom>, WorkloadError> {
    if !oversample {
        notes.push(format!("Skipping oversampling. Total samples: {}.", samples.len()));
        return Ok(None);
    }
    if samples.len() >= num_requests {
        return Ok(None);
    }
    if samples.is_empty() {
        return Err(WorkloadError::Empty(format!(
            "{what} left no usable request to sample from; check the file and the length filters"
        )));
    }
    let mut rng = PyRandom::new(seed);
    let original = samples.len();
    for _ in 0..num_requests - original {
        let i = rng.choice_index(original).unwrap_or(0);
        samples.push(samples[i].clone());
    }
    notes.push(format!("Oversampled requests to reach {num_requests} total samples."));
    Ok(Some(rng))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(i: u32) -> Sample {
        Sample {
            prompt: i.to_string(),
            prompt_len: i,
            raw_tokens: None,
            max_tokens: 1,
            timestamp_s: None,
            images: Vec::new(),
        }
    }

    #[test]
    fn oversampling_uses_python_random_choice_over_the_original_samples() {
        let mut v: Vec<Sample> = (0..5).map(s).collect();
        let mut notes = Vec::new();
        let after = oversample(&mut v, 12, true, 0, &mut notes, "test").unwrap().unwrap();
        let mut expected = PyRandom::new(0);
        for _ in 0..7 {
            expected.choice_index(5);
        }
        assert_eq!(after, expected, "the state after the seven draws");
        let got: Vec<u32> = v.iter().map(|x| x.prompt_len).collect();
        // random.seed(0); [random.choice(range(5)) for _ in range(7)]
        assert_eq!(got, [0, 1, 2, 3, 4, 3, 3, 0, 2, 4, 3, 3]);
        assert_eq!(notes, ["Oversampled requests to reach 12 total samples."]);
    }

    #[test]
    fn no_oversampling_keeps_the_samples_and_says_so() {
        let mut v: Vec<Sample> = (0..2).map(s).collect();
        let mut notes = Vec::new();
        assert_eq!(oversample(&mut v, 12, false, 0, &mut notes, "test").unwrap(), None);
        assert_eq!(v.len(), 2);
        assert_eq!(notes, ["Skipping oversampling. Total samples: 2."]);
        let mut empty = Vec::new();
        assert!(oversample(&mut empty, 3, true, 0, &mut notes, "test").is_err());
    }

    #[test]
    fn par_map_keeps_order() {
        let v: Vec<u32> = (0..1000).collect();
        assert_eq!(par_map(&v, |x| x * 2), v.iter().map(|x| x * 2).collect::<Vec<_>>());
        assert!(par_map(&Vec::<u32>::new(), |x| *x).is_empty());
    }

    #[test]
    fn estimates_are_positive() {
        assert_eq!(estimate_tokens(""), 1);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
    }
}
