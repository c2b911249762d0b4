//! vLLM's `prefix_repetition` dataset: `num_prefixes` random prefixes, each followed by
//! `num_requests / num_prefixes` random suffixes, drawn from the global legacy `np.random`
//! (so they shift the arrival draws that follow, as in vLLM), then shuffled with `random`.

use servebench_core::rng::RandomState;

use super::fit::{Extender, decode_to_target_len, mismatch_note};
use super::random::words_text;
use super::words::WORDS;
use super::{Dataset, Sample, check_total_prompt_tokens, seeded_shuffle};
use crate::{Tokenizer, WorkloadError};

/// The prefix-repetition parameters (`--prefix-repetition-*`).
#[derive(Clone, Debug, PartialEq)]
pub struct PrefixRepetitionSpec {
    pub num_requests: usize,
    pub prefix_len: u32,
    pub suffix_len: u32,
    pub num_prefixes: u32,
    pub output_len: u32,
    pub shuffle: bool,
    pub seed: u64,
}

/// Builds the dataset. `np_random` is the global legacy state, freshly seeded with the seed
/// (vLLM re-seeds it here); it is left where vLLM leaves it, for the arrival schedule.
pub fn sample(
    tok: Option<&Tokenizer>,
    spec: &PrefixRepetitionSpec,
    np_random: &mut RandomState,
) -> Result<Dataset, WorkloadError> {
    let per_prefix = match spec.num_prefixes {
        0 => 0,
        p => spec.num_requests / p as usize,
    };
    if per_prefix == 0 {
        return Err(WorkloadError::Invalid(format!(
            "--num-prompts ({}) must be at least the number of prefixes ({}), which must be \
             positive; raise --num-prompts or lower --prefix-repetition-num-prefixes",
            spec.num_requests, spec.num_prefixes
        )));
    }
    let prompts = per_prefix * spec.num_prefixes as usize;
    let total = prompts as i64 * (i64::from(spec.prefix_len) + i64::from(spec.suffix_len));
    check_total_prompt_tokens(
        prompts,
        total,
        "--num-prompts, --prefix-repetition-prefix-len or --prefix-repetition-suffix-len",
    )?;
    let mut notes = Vec::new();
    let mut samples = Vec::with_capacity(prompts);
    let mut mismatch = 0i64;
    let mut draw = |len: u32, np: &mut RandomState| -> Result<(Vec<u32>, String), WorkloadError> {
        match tok {
            Some(t) => {
                let ids: Vec<u32> =
                    np.randint(0, i64::from(t.vocab_size()), len as usize).into_iter().map(|i| i as u32).collect();
                let f = decode_to_target_len(t, ids, len as usize, &mut Extender::Legacy(np))?;
                mismatch += f.mismatch;
                Ok((f.tokens, String::new()))
            }
            None => {
                let idx = np.randint(0, WORDS.len() as i64, len as usize);
                Ok((Vec::new(), words_text(&idx)))
            }
        }
    };
    for _ in 0..spec.num_prefixes {
        let (prefix_ids, prefix_text) = draw(spec.prefix_len, np_random)?;
        for _ in 0..per_prefix {
            let (suffix_ids, suffix_text) = draw(spec.suffix_len, np_random)?;
            let sample = match tok {
                Some(t) => {
                    let mut ids = prefix_ids.clone();
                    ids.extend(&suffix_ids);
                    Sample {
                        prompt: t.decode(&ids)?,
                        prompt_len: ids.len() as u32,
                        raw_tokens: None,
                        max_tokens: spec.output_len,
                        timestamp_s: None,
                        images: Vec::new(),
                    }
                }
                None => Sample {
                    prompt: format!("{prefix_text}{suffix_text}"),
                    prompt_len: spec.prefix_len + spec.suffix_len,
                    raw_tokens: None,
                    max_tokens: spec.output_len,
                    timestamp_s: None,
                    images: Vec::new(),
                },
            };
            samples.push(sample);
        }
    }
    notes.extend(mismatch_note(mismatch));
    if samples.len() < spec.num_requests {
        notes.push(format!(
            "prefix_repetition builds {} x {} = {} requests, fewer than the {} asked for (as vLLM does)",
            spec.num_prefixes,
            per_prefix,
            samples.len(),
            spec.num_requests
        ));
    }
    let python_random = seeded_shuffle(&mut samples, spec.shuffle, spec.seed);
    Ok(Dataset { samples, conversations: Vec::new(), notes, python_random, query: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{qwen3, testdata};
    use serde_json::Value;

    #[test]
    fn prompts_and_the_following_gamma_draws_match_vllm() {
        let r: Value = serde_json::from_str(
            &std::fs::read_to_string(testdata().join("datasets/prefix_repetition_qwen3.json")).unwrap(),
        )
        .unwrap();
        for c in r["cases"].as_array().unwrap() {
            let case = &c["case"];
            let spec = PrefixRepetitionSpec {
                num_requests: case["num"].as_u64().unwrap() as usize,
                prefix_len: case["prefix_len"].as_u64().unwrap() as u32,
                suffix_len: case["suffix_len"].as_u64().unwrap() as u32,
                num_prefixes: case["num_prefixes"].as_u64().unwrap() as u32,
                output_len: case["output_len"].as_u64().unwrap() as u32,
                shuffle: true,
                seed: case["seed"].as_u64().unwrap(),
            };
            let mut np = RandomState::new(spec.seed as u32);
            let ds = sample(Some(qwen3()), &spec, &mut np).unwrap();
            let want = c["samples"].as_array().unwrap();
            assert_eq!(ds.samples.len(), want.len());
            for (s, w) in ds.samples.iter().zip(want) {
                assert_eq!(s.prompt, w["prompt"].as_str().unwrap());
                assert_eq!(u64::from(s.prompt_len), w["prompt_len"].as_u64().unwrap());
                assert_eq!(s.max_tokens, spec.output_len);
            }
            let next: Vec<u64> = (0..3).map(|_| np.gamma(1.0, 1.0).to_bits()).collect();
            let want_next: Vec<u64> =
                c["next_gamma_bits"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
            assert_eq!(next, want_next);
        }
    }

    #[test]
    fn prompts_share_their_prefixes_without_a_tokenizer() {
        let spec = PrefixRepetitionSpec {
            num_requests: 7,
            prefix_len: 20,
            suffix_len: 5,
            num_prefixes: 3,
            output_len: 9,
            shuffle: false,
            seed: 0,
        };
        let ds = sample(None, &spec, &mut RandomState::new(0)).unwrap();
        assert_eq!(ds.samples.len(), 6);
        assert!(ds.notes.iter().any(|n| n.contains("fewer than the 7")));
        let head = |s: &Sample| s.prompt.split(' ').take(21).collect::<Vec<_>>().join(" ");
        assert_eq!(head(&ds.samples[0]), head(&ds.samples[1]));
        assert_ne!(head(&ds.samples[1]), head(&ds.samples[2]));
        assert!(ds.samples.iter().all(|s| s.prompt_len == 25 && qwen3().count(&s.prompt, false).unwrap() == 25));
    }

    #[test]
    fn too_few_requests_for_the_prefixes_is_an_error() {
        let spec = PrefixRepetitionSpec {
            num_requests: 2,
            prefix_len: 4,
            suffix_len: 4,
            num_prefixes: 10,
            output_len: 1,
            shuffle: true,
            seed: 0,
        };
        let err = sample(None, &spec, &mut RandomState::new(0)).unwrap_err().to_string();
        assert!(err.contains("number of prefixes (10)"), "{err}");
    }

    #[test]
    fn prompts_too_many_to_build_are_refused_before_any_is_drawn() {
        let spec = PrefixRepetitionSpec {
            num_requests: 1000,
            prefix_len: 2_000_000,
            suffix_len: 0,
            num_prefixes: 1,
            output_len: 1,
            shuffle: false,
            seed: 0,
        };
        let err = sample(None, &spec, &mut RandomState::new(0)).unwrap_err().to_string();
        assert!(err.contains("2000000000 tokens") && err.contains("--prefix-repetition-prefix-len"), "{err}");
    }
}
