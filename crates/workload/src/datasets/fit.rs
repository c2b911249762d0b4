//! vLLM's `gen_prompt_decode_to_target_len`: decode token ids to text, re-encode, and extend
//! (with random ids) or truncate until the text encodes to the target length, at most 10 times.

use servebench_core::rng::{Generator, RandomState};

use crate::{Tokenizer, WorkloadError};

/// Where extension ids come from: the dataset's own `default_rng` (random dataset) or the
/// global legacy `np.random` (prefix repetition).
pub enum Extender<'a> {
    Pcg(&'a mut Generator),
    Legacy(&'a mut RandomState),
}

impl Extender<'_> {
    fn draw(&mut self, vocab_size: u32, n: usize) -> Vec<u32> {
        let ids = match self {
            Extender::Pcg(g) => g.integers(0, i64::from(vocab_size), n),
            Extender::Legacy(r) => r.randint(0, i64::from(vocab_size), n),
        };
        ids.into_iter().map(|i| i as u32).collect()
    }
}

/// A prompt fitted to a token length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fitted {
    pub prompt: String,
    /// What `prompt` encodes to (without special tokens).
    pub tokens: Vec<u32>,
    /// `len(tokens) - target` when the retries ran out, else 0.
    pub mismatch: i64,
}

/// The retry budget vLLM uses.
pub const MAX_RETRY: u32 = 10;

/// Fits `seq` to `target` tokens exactly as vLLM does.
pub fn decode_to_target_len(
    tok: &Tokenizer,
    seq: Vec<u32>,
    target: usize,
    ext: &mut Extender<'_>,
) -> Result<Fitted, WorkloadError> {
    let first = first_pass(tok, &seq)?;
    continue_fit(tok, first, target, ext)
}

/// The first decode and re-encode, which draws nothing and so can run ahead in parallel.
pub fn first_pass(tok: &Tokenizer, seq: &[u32]) -> Result<(String, Vec<u32>), WorkloadError> {
    let prompt = tok.decode(seq)?;
    let ids = tok.encode(&prompt, false)?;
    Ok((prompt, ids))
}

/// The rest of the fitting loop, from the result of [`first_pass`].
pub fn continue_fit(
    tok: &Tokenizer,
    (mut prompt, mut seq): (String, Vec<u32>),
    target: usize,
    ext: &mut Extender<'_>,
) -> Result<Fitted, WorkloadError> {
    let mut remaining = MAX_RETRY;
    loop {
        if remaining == 0 {
            let mismatch = seq.len() as i64 - target as i64;
            return Ok(Fitted { prompt, tokens: seq, mismatch });
        }
        if seq.len() == target {
            return Ok(Fitted { prompt, tokens: seq, mismatch: 0 });
        }
        if seq.len() < target {
            let extra = ext.draw(tok.vocab_size(), target - seq.len());
            seq.extend(extra);
        } else {
            seq.truncate(target);
        }
        remaining -= 1;
        (prompt, seq) = first_pass(tok, &seq)?;
    }
}

/// A warning when fitted prompts still missed their lengths after the retries, in total.
pub fn mismatch_note(total: i64) -> Option<String> {
    (total != 0).then(|| {
        format!(
            "After {MAX_RETRY} rounds of decoding and re-encoding, the prompts hold {} {} tokens in \
             total than asked for.",
            total.abs(),
            if total > 0 { "more" } else { "fewer" }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::qwen3;

    #[test]
    fn fitted_prompts_re_encode_to_the_target() {
        let tok = qwen3();
        let mut g = Generator::default_rng(1);
        for target in [1usize, 5, 64, 300] {
            let seq: Vec<u32> =
                g.integers(0, i64::from(tok.vocab_size()), target).into_iter().map(|i| i as u32).collect();
            let f = decode_to_target_len(tok, seq, target, &mut Extender::Pcg(&mut g)).unwrap();
            assert_eq!(f.mismatch, 0);
            assert_eq!(f.tokens.len(), target);
            assert_eq!(tok.encode(&f.prompt, false).unwrap(), f.tokens);
        }
    }

    #[test]
    fn an_empty_target_gives_an_empty_prompt() {
        let mut r = RandomState::new(0);
        let f = decode_to_target_len(qwen3(), vec![], 0, &mut Extender::Legacy(&mut r)).unwrap();
        assert_eq!(f.prompt, "");
        assert!(f.tokens.is_empty());
    }

    #[test]
    fn the_mismatch_note_is_vllms() {
        assert_eq!(mismatch_note(0), None);
        assert!(mismatch_note(-3).unwrap().contains("hold 3 fewer tokens"));
    }
}
