//! vLLM's `random-rerank` dataset, draw for draw: one random query and random documents, made
//! as the `random` dataset makes its prompts (consecutive allowed token ids from a drawn
//! offset, decoded and re-encoded to their exact lengths). A reranker's query takes half of
//! `--random-input-len` less one separator token and each document the rest, so a pair fills
//! the input length; without a reranker (`--no-reranker`: an embedding model scoring) the query
//! and every document are `--random-input-len` long, and the query is one of the prompts.
//! Without a tokenizer the same lengths are drawn and the texts are one-token words.

use servebench_core::config::RangeRatio;
use servebench_core::rng::Generator;

use super::fit::mismatch_note;
use super::random::{RandomSpec, Ranges, allowed_tokens, fitted_prompts, ranges, words_text};
use super::words::WORDS;
use super::{Dataset, Sample, check_total_prompt_tokens};
use crate::{Tokenizer, WorkloadError};

/// The dataset's parameters (`--random-input-len`, `--random-range-ratio`, `--no-reranker`).
#[derive(Clone, Debug, PartialEq)]
pub struct RerankSpec {
    pub num_prompts: usize,
    pub input_len: u32,
    pub range_ratio: f64,
    pub reranker: bool,
    pub seed: u64,
}

/// Builds the dataset: its documents as samples, its query apart.
pub fn sample(tok: Option<&Tokenizer>, spec: &RerankSpec) -> Result<Dataset, WorkloadError> {
    let num_special = tok.map_or(0, Tokenizer::num_special_tokens_to_add);
    let sep = i64::from(spec.reranker);
    let docs = if spec.reranker {
        spec.num_prompts
    } else if spec.num_prompts > 1 {
        spec.num_prompts - 1
    } else {
        return Err(WorkloadError::Invalid(
            "scoring without a reranker (--no-reranker) sends the query as one of the prompts: pass --num-prompts \
             of at least 2"
                .into(),
        ));
    };
    let half = i64::from(spec.input_len) / 2 - sep;
    let query_len_param = if spec.reranker { half } else { i64::from(spec.input_len) };
    let mut rng = Generator::default_rng(spec.seed);
    let query_ranges = length_ranges(spec, query_len_param, num_special, "the query")?;
    let (query_lens, query_offsets) = draw(&mut rng, &query_ranges, 1, tok);
    let query_len = query_lens[0];
    let doc_len_param = if spec.reranker { i64::from(spec.input_len) - query_len - sep } else { spec.input_len.into() };
    let doc_ranges = length_ranges(spec, doc_len_param, num_special, "a document")?;
    let (doc_lens, doc_offsets) = draw(&mut rng, &doc_ranges, docs, tok);
    let total = query_len + doc_lens.iter().sum::<i64>();
    check_total_prompt_tokens(docs, total, "--num-prompts or --random-input-len")?;
    let mut notes = vec![format!(
        "Random rerank: one query of {query_len} tokens and {docs} documents drawn from [{}, {}] tokens{}",
        doc_ranges.input.0,
        doc_ranges.input.1,
        if spec.reranker { ", each pair with one separator token" } else { " (no reranker)" }
    )];
    let (query, samples) = match tok {
        Some(tok) => {
            let allowed = allowed_tokens(tok)?;
            // The query is vLLM's prompt 0, the documents its prompts 1 to n.
            let starts: Vec<i64> =
                query_offsets.iter().chain(&doc_offsets).enumerate().map(|(i, o)| o + i as i64).collect();
            let lens: Vec<i64> = query_lens.iter().chain(&doc_lens).copied().collect();
            let (mut prompts, mismatch) = fitted_prompts(tok, &mut rng, &[], &allowed, &lens, &starts)?;
            notes.extend(mismatch_note(mismatch));
            let docs = prompts.split_off(1);
            (prompts.remove(0), docs)
        }
        None => {
            let mut words = |n: i64| {
                let text = words_text(&rng.integers(0, WORDS.len() as i64, n as usize));
                Sample {
                    prompt: text,
                    prompt_len: n as u32,
                    raw_tokens: None,
                    max_tokens: 0,
                    timestamp_s: None,
                    images: Vec::new(),
                }
            };
            let query = words(query_len);
            (query, doc_lens.iter().map(|&n| words(n)).collect())
        }
    };
    Ok(Dataset { samples, conversations: Vec::new(), notes, python_random: None, query: Some(query) })
}

/// vLLM's `get_sampling_params` bounds for a text of `len_param` tokens (no output is asked
/// for, so its range is vLLM's floor of one token); refuses one that can be empty.
fn length_ranges(spec: &RerankSpec, len_param: i64, num_special: u32, what: &str) -> Result<Ranges, WorkloadError> {
    let input_len = u32::try_from(len_param).ok().filter(|&l| l > 0).ok_or_else(|| {
        WorkloadError::Invalid(format!(
            "--random-input-len {} leaves {what} no tokens; raise --random-input-len",
            spec.input_len
        ))
    })?;
    let random = RandomSpec {
        num_requests: 1,
        input_len,
        output_len: 0,
        range_ratio: RangeRatio { input: spec.range_ratio, output: spec.range_ratio },
        prefix_len: 0,
        seed: spec.seed,
    };
    ranges(&random, num_special)
}

/// `n` lengths, then vLLM's output lengths (drawn and unused), then the vocabulary offsets
/// (drawn only where a tokenizer gives the vocabulary, as the `random` dataset draws them).
fn draw(rng: &mut Generator, r: &Ranges, n: usize, tok: Option<&Tokenizer>) -> (Vec<i64>, Vec<i64>) {
    let lens = rng.integers(r.input.0, r.input.1 + 1, n);
    let _outputs = rng.integers(r.output.0, r.output.1 + 1, n);
    let offsets = tok.map_or_else(Vec::new, |t| rng.integers(0, i64::from(t.vocab_size()), n));
    (lens, offsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(n: usize, input_len: u32, reranker: bool) -> RerankSpec {
        RerankSpec { num_prompts: n, input_len, range_ratio: 0.0, reranker, seed: 0 }
    }

    #[test]
    fn a_reranker_pair_fills_the_input_length() {
        let d = sample(None, &spec(6, 100, true)).unwrap();
        let q = d.query.as_ref().unwrap();
        assert_eq!(q.prompt_len, 49);
        assert_eq!(d.samples.len(), 6);
        // query + separator + document = the input length
        assert!(d.samples.iter().all(|s| s.prompt_len == 50), "{:?}", d.samples);
        assert_eq!(q.prompt.split_whitespace().count(), 49);
    }

    #[test]
    fn without_a_reranker_the_query_is_one_of_the_prompts() {
        let d = sample(None, &spec(6, 40, false)).unwrap();
        assert_eq!(d.query.as_ref().unwrap().prompt_len, 40);
        assert_eq!(d.samples.len(), 5);
        assert!(d.samples.iter().all(|s| s.prompt_len == 40));
        assert!(sample(None, &spec(1, 40, false)).unwrap_err().to_string().contains("at least 2"));
    }

    #[test]
    fn lengths_that_leave_a_text_empty_are_refused() {
        let e = sample(None, &spec(4, 2, true)).unwrap_err().to_string();
        assert!(e.contains("the query no tokens"), "{e}");
        // The same seed gives the same dataset.
        let mut s = spec(4, 64, true);
        s.range_ratio = 0.5;
        assert_eq!(sample(None, &s).unwrap(), sample(None, &s).unwrap());
    }
}
