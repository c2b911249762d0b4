//! vLLM's `random` dataset, draw for draw: lengths and vocabulary offsets from
//! `default_rng(seed)`, prompts made of consecutive allowed token ids after a shared random
//! prefix, each decoded and re-encoded to its exact length. Without a tokenizer the same lengths
//! are drawn and prompts are made of one-token words.

use servebench_core::config::RangeRatio;
use servebench_core::rng::Generator;

use super::fit::{Extender, continue_fit, decode_to_target_len, first_pass, mismatch_note};
use super::words::WORDS;
use super::{Dataset, Sample, check_total_prompt_tokens, count_u32, par_map};
use crate::{Tokenizer, WorkloadError};

/// The random dataset's parameters (`--random-*`).
#[derive(Clone, Debug, PartialEq)]
pub struct RandomSpec {
    pub num_requests: usize,
    pub input_len: u32,
    pub output_len: u32,
    pub range_ratio: RangeRatio,
    pub prefix_len: u32,
    pub seed: u64,
}

/// The inclusive ranges lengths are drawn from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ranges {
    pub input: (i64, i64),
    pub output: (i64, i64),
}

/// vLLM's `get_sampling_params` bounds, with its validation.
pub fn ranges(spec: &RandomSpec, num_special: u32) -> Result<Ranges, WorkloadError> {
    let (ri, ro) = (spec.range_ratio.input, spec.range_ratio.output);
    if !(0.0..1.0).contains(&ri) {
        return Err(WorkloadError::Invalid(format!(
            "the input range ratio must be in [0, 1), got {ri}; pass --random-range-ratio below 1"
        )));
    }
    if !(0.0..1.0).contains(&ro) {
        return Err(WorkloadError::Invalid(format!(
            "the output range ratio must be in [0, 1), got {ro}; pass --random-range-ratio below 1"
        )));
    }
    let real = f64::from(spec.input_len.saturating_sub(num_special));
    let min_total = i64::from(spec.prefix_len) + (real * (1.0 - ri)).floor() as i64;
    if min_total < 1 {
        return Err(WorkloadError::Invalid(format!(
            "--random-input-len {} leaves prompts that can be empty: after {num_special} special \
             tokens, an input range ratio of {ri} and a prefix of {}, the shortest prompt has \
             {min_total} tokens; raise --random-input-len or --random-prefix-len, or lower the \
             range ratio",
            spec.input_len, spec.prefix_len
        )));
    }
    let out = f64::from(spec.output_len);
    let r = Ranges {
        input: ((real * (1.0 - ri)).floor() as i64, (real * (1.0 + ri)).ceil() as i64),
        output: (((out * (1.0 - ro)).floor() as i64).max(1), ((out * (1.0 + ro)).ceil() as i64).max(1)),
    };
    // Token counts are `u32`: a range past that is refused here, so every drawn length (and
    // the prefix plus it) converts without loss below.
    let longest_prompt = i64::from(spec.prefix_len) + r.input.1;
    if longest_prompt > i64::from(u32::MAX) || r.output.1 > i64::from(u32::MAX) {
        return Err(WorkloadError::Invalid(format!(
            "the range ratio stretches lengths past {} tokens (prompts up to {longest_prompt}, outputs up to \
             {}); lower --random-input-len, --random-output-len or --random-range-ratio",
            u32::MAX,
            r.output.1
        )));
    }
    Ok(r)
}

/// The log line vLLM prints for these ranges.
pub fn ranges_note(r: &Ranges) -> String {
    format!(
        "Sampling input_len from [{}, {}] and output_len from [{}, {}]",
        r.input.0, r.input.1, r.output.0, r.output.1
    )
}

/// Builds the dataset; with a tokenizer the prompts are byte-identical to vLLM's.
pub fn sample(tok: Option<&Tokenizer>, spec: &RandomSpec) -> Result<Dataset, WorkloadError> {
    let num_special = tok.map_or(0, Tokenizer::num_special_tokens_to_add);
    let r = ranges(spec, num_special)?;
    let n = spec.num_requests;
    let mut rng = Generator::default_rng(spec.seed);
    let input_lens = rng.integers(r.input.0, r.input.1 + 1, n);
    let output_lens = rng.integers(r.output.0, r.output.1 + 1, n);
    let total = input_lens.iter().map(|l| l + i64::from(spec.prefix_len)).sum();
    check_total_prompt_tokens(n, total, "--num-prompts or --random-input-len")?;
    let mut notes = vec![ranges_note(&r)];
    let samples = match tok {
        Some(tok) => with_tokenizer(tok, spec, &mut rng, &input_lens, &output_lens, &mut notes)?,
        None => synthetic(spec, &mut rng, &input_lens, &output_lens),
    };
    Ok(Dataset { samples, conversations: Vec::new(), notes, python_random: None, query: None })
}

/// Token ids in `[0, vocab_size)` that are not special, ascending (Python's
/// `list(set(arange(vocab)) - set(all_special_ids))` iterates small ints in order); an error
/// when there are none, as synthetic prompts are drawn from them.
pub fn allowed_tokens(tok: &Tokenizer) -> Result<Vec<u32>, WorkloadError> {
    let special = tok.all_special_ids();
    let allowed: Vec<u32> = (0..tok.vocab_size()).filter(|id| special.binary_search(id).is_err()).collect();
    if allowed.is_empty() {
        return Err(WorkloadError::Invalid(format!(
            "the tokenizer `{}` has no ordinary tokens to build synthetic prompts from; pass the model's own \
             tokenizer with --tokenizer",
            tok.name()
        )));
    }
    Ok(allowed)
}

fn with_tokenizer(
    tok: &Tokenizer,
    spec: &RandomSpec,
    rng: &mut Generator,
    input_lens: &[i64],
    output_lens: &[i64],
    notes: &mut Vec<String>,
) -> Result<Vec<Sample>, WorkloadError> {
    let n = spec.num_requests;
    let offsets = rng.integers(0, i64::from(tok.vocab_size()), n);
    let allowed = allowed_tokens(tok)?;
    let len = allowed.len() as i64;
    let prefix_len = spec.prefix_len as usize;
    let prefix: Vec<u32> = if prefix_len == 0 {
        Vec::new()
    } else {
        let picks: Vec<u32> = rng.integers(0, len, prefix_len).into_iter().map(|i| allowed[i as usize]).collect();
        let fitted = decode_to_target_len(tok, picks, prefix_len, &mut Extender::Pcg(rng))?;
        if fitted.mismatch != 0 {
            notes.push(format!(
                "After decoding and re-encoding, the shared prefix holds {} {} tokens than \
                 --random-prefix-len asks for.",
                fitted.mismatch.abs(),
                if fitted.mismatch > 0 { "more" } else { "fewer" }
            ));
        }
        fitted.tokens
    };
    let offsets: Vec<i64> = offsets.iter().enumerate().map(|(i, o)| o + i as i64).collect();
    let (samples, total_mismatch) = fitted_prompts(tok, rng, &prefix, &allowed, input_lens, &offsets)?;
    let samples =
        samples.into_iter().zip(output_lens).map(|(s, &out)| Sample { max_tokens: out as u32, ..s }).collect();
    notes.extend(mismatch_note(total_mismatch));
    Ok(samples)
}

/// vLLM's `generate_token_sequence` for each prompt in turn: `prefix`, then `lens[i]`
/// consecutive allowed tokens from `starts[i]` (its offset plus its index), decoded and
/// re-encoded to its exact length (the retries draw from `rng`, in prompt order). The samples
/// ask for no output; the caller sets it. Returns them and the total mismatch.
pub(crate) fn fitted_prompts(
    tok: &Tokenizer,
    rng: &mut Generator,
    prefix: &[u32],
    allowed: &[u32],
    lens: &[i64],
    starts: &[i64],
) -> Result<(Vec<Sample>, i64), WorkloadError> {
    let len = allowed.len() as i64;
    let seqs: Vec<Vec<u32>> = lens
        .iter()
        .zip(starts)
        .map(|(&n, &start)| {
            let mut seq = prefix.to_vec();
            seq.extend((0..n).map(|j| allowed[((start + j) % len) as usize]));
            seq
        })
        .collect();
    // The first decode/encode draws nothing, so it runs ahead on all cores; the retries that
    // draw run in request order, as in vLLM.
    let firsts = par_map(&seqs, |seq| first_pass(tok, seq));
    drop(seqs);
    let mut total_mismatch = 0i64;
    let mut samples = Vec::with_capacity(lens.len());
    for (first, &n) in firsts.into_iter().zip(lens) {
        let target = prefix.len() + n as usize;
        let fitted = continue_fit(tok, first?, target, &mut Extender::Pcg(rng))?;
        total_mismatch += fitted.mismatch;
        let len = count_u32(fitted.tokens.len());
        samples.push(Sample {
            raw_tokens: Some(len),
            prompt_len: len,
            prompt: fitted.prompt,
            max_tokens: 0,
            timestamp_s: None,
            images: Vec::new(),
        });
    }
    Ok((samples, total_mismatch))
}

/// Prompts of one-token words, drawn from the same generator after the lengths.
fn synthetic(spec: &RandomSpec, rng: &mut Generator, input_lens: &[i64], output_lens: &[i64]) -> Vec<Sample> {
    let nwords = WORDS.len() as i64;
    let prefix = words_text(&rng.integers(0, nwords, spec.prefix_len as usize));
    (0..spec.num_requests)
        .map(|i| {
            let body = words_text(&rng.integers(0, nwords, input_lens[i] as usize));
            let len = spec.prefix_len + input_lens[i] as u32;
            Sample {
                prompt: format!("{prefix}{body}"),
                prompt_len: len,
                raw_tokens: None,
                max_tokens: output_lens[i] as u32,
                timestamp_s: None,
                images: Vec::new(),
            }
        })
        .collect()
}

/// `" w1 w2 ..."` for word indices.
pub fn words_text(idx: &[i64]) -> String {
    let mut s = String::with_capacity(idx.len() * 6);
    for &i in idx {
        s.push(' ');
        s.push_str(WORDS[i as usize]);
    }
    s
}

#[cfg(test)]
mod tests;
