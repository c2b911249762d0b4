//! vLLM's `sharegpt` dataset from the standard ShareGPT JSON file: entries with at least two
//! messages, shuffled with Python's `random` and the seed, first turn as the prompt, the reply's
//! length (or `--sharegpt-output-len`) as `max_tokens`, vLLM's length filters, oversampling.

use std::path::Path;

use serde::Deserialize;
use servebench_core::rng::PyRandom;

use super::{Dataset, Sample, count_with_special, oversample, seeded_shuffle};
use crate::{Tokenizer, WorkloadError};

/// One message of a ShareGPT conversation.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Message {
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub value: String,
}

/// One ShareGPT entry.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub struct Entry {
    #[serde(default)]
    pub id: Option<serde_json::Value>,
    #[serde(default)]
    pub conversations: Vec<Message>,
}

/// The sharegpt dataset's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct ShareGptSpec {
    pub num_requests: usize,
    /// `--sharegpt-output-len`: a fixed output length instead of each reply's.
    pub output_len: Option<u32>,
    pub oversample: bool,
    pub shuffle: bool,
    pub seed: u64,
}

/// Reads the file, keeps entries with at least two messages and shuffles them as vLLM does.
pub fn load(path: &Path, shuffle: bool, seed: u64) -> Result<Vec<Entry>, WorkloadError> {
    load_with_random(path, shuffle, seed).map(|(entries, _)| entries)
}

/// [`load`], with Python's `random` after the shuffle (`None` without one).
fn load_with_random(path: &Path, shuffle: bool, seed: u64) -> Result<(Vec<Entry>, Option<PyRandom>), WorkloadError> {
    let text = std::fs::read_to_string(path).map_err(|e| WorkloadError::read(path, e))?;
    let entries: Vec<Entry> = serde_json::from_str(&text).map_err(|e| {
        WorkloadError::parse(
            path,
            Some(e.line()),
            format!("not a ShareGPT file ({e}); expected a JSON list of {{\"conversations\": [{{\"from\", \"value\"}}, ...]}}"),
        )
    })?;
    let mut kept: Vec<Entry> = entries.into_iter().filter(|e| e.conversations.len() >= 2).collect();
    let random = seeded_shuffle(&mut kept, shuffle, seed);
    Ok((kept, random))
}

/// vLLM's `is_valid_sequence` with its default limits.
pub fn is_valid_sequence(prompt_len: u32, output_len: u32, skip_min_output_len_check: bool) -> bool {
    let prompt_too_short = prompt_len < 4;
    let output_too_short = !skip_min_output_len_check && output_len < 4;
    let prompt_too_long = prompt_len > 1024;
    let combined_too_long = u64::from(prompt_len) + u64::from(output_len) > 2048;
    !(prompt_too_short || output_too_short || prompt_too_long || combined_too_long)
}

/// Builds the dataset from a ShareGPT file.
pub fn sample(tok: Option<&Tokenizer>, path: &Path, spec: &ShareGptSpec) -> Result<Dataset, WorkloadError> {
    let (entries, shuffled) = load_with_random(path, spec.shuffle, spec.seed)?;
    let mut dataset = sample_entries(tok, &entries, spec, &path.display().to_string())?;
    dataset.python_random = dataset.python_random.or(shuffled);
    Ok(dataset)
}

/// Builds the dataset from already loaded (and shuffled) entries.
pub fn sample_entries(
    tok: Option<&Tokenizer>,
    entries: &[Entry],
    spec: &ShareGptSpec,
    what: &str,
) -> Result<Dataset, WorkloadError> {
    let mut samples = Vec::new();
    let mut notes = Vec::new();
    if tok.is_none() {
        notes.push("No tokenizer: ShareGPT lengths are estimated at four bytes per token.".into());
    }
    for entry in entries {
        if samples.len() >= spec.num_requests {
            break;
        }
        // `load` keeps only entries with two messages or more; others have no reply to size.
        let [first, reply, ..] = entry.conversations.as_slice() else { continue };
        let (prompt, completion) = (&first.value, &reply.value);
        let prompt_len = count_with_special(tok, prompt)?;
        let output_len = match spec.output_len {
            Some(n) => n,
            None => count_with_special(tok, completion)?,
        };
        if !is_valid_sequence(prompt_len, output_len, spec.output_len.is_some()) {
            continue;
        }
        samples.push(Sample {
            prompt: prompt.clone(),
            prompt_len,
            raw_tokens: None,
            max_tokens: output_len,
            timestamp_s: None,
            images: Vec::new(),
        });
    }
    let python_random = oversample(&mut samples, spec.num_requests, spec.oversample, spec.seed, &mut notes, what)?;
    if samples.is_empty() {
        return Err(WorkloadError::Empty(format!(
            "{what} has no conversation that passes vLLM's length filters (prompt 4..=1024 \
             tokens, reply >= 4, both <= 2048)"
        )));
    }
    Ok(Dataset { samples, conversations: Vec::new(), notes, python_random, query: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{qwen3, testdata};
    use serde_json::Value;

    fn fixture() -> std::path::PathBuf {
        testdata().join("sharegpt/sharegpt_small.json")
    }

    #[test]
    fn picks_the_same_conversations_and_lengths_as_vllm() {
        let r: Value =
            serde_json::from_str(&std::fs::read_to_string(testdata().join("datasets/sharegpt_qwen3.json")).unwrap())
                .unwrap();
        assert_eq!(load(&fixture(), false, 0).unwrap().len() as u64, r["with_two_messages"].as_u64().unwrap());
        for c in r["cases"].as_array().unwrap() {
            let case = &c["case"];
            let spec = ShareGptSpec {
                num_requests: case["num"].as_u64().unwrap() as usize,
                output_len: case["output_len"].as_u64().map(|n| n as u32),
                oversample: case["oversample"].as_bool().unwrap(),
                shuffle: case["shuffle"].as_bool().unwrap(),
                seed: case["seed"].as_u64().unwrap(),
            };
            let entries = load(&fixture(), spec.shuffle, spec.seed).unwrap();
            let ds = sample_entries(Some(qwen3()), &entries, &spec, "fixture").unwrap();
            let got: Vec<(u32, u32)> = ds.samples.iter().map(|s| (s.prompt_len, s.max_tokens)).collect();
            let want: Vec<(u32, u32)> = c["samples"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| (s["prompt_len"].as_u64().unwrap() as u32, s["output_len"].as_u64().unwrap() as u32))
                .collect();
            assert_eq!(got, want, "{case}");
            // The first pick is the conversation vLLM picks.
            let first_id = &c["samples"][0]["id"];
            let entry = entries.iter().find(|e| e.id.as_ref() == Some(first_id)).unwrap();
            assert_eq!(ds.samples[0].prompt, entry.conversations[0].value);
        }
    }

    #[test]
    fn filter_counts_on_the_fixture() {
        let spec = ShareGptSpec { num_requests: 10_000, output_len: None, oversample: false, shuffle: false, seed: 0 };
        let ds = sample(Some(qwen3()), &fixture(), &spec).unwrap();
        assert_eq!(ds.samples.len(), 175);
        assert_eq!(ds.notes, ["Skipping oversampling. Total samples: 175."]);
        assert!(ds.samples.iter().all(|s| (4..=1024).contains(&s.prompt_len) && s.max_tokens >= 4));
        let fixed = ShareGptSpec { output_len: Some(2000), ..spec };
        let ds = sample(Some(qwen3()), &fixture(), &fixed).unwrap();
        assert!(ds.samples.iter().all(|s| s.max_tokens == 2000 && s.prompt_len <= 48));
    }

    #[test]
    fn vllms_length_filter() {
        assert!(is_valid_sequence(4, 4, false));
        assert!(!is_valid_sequence(3, 100, false));
        assert!(!is_valid_sequence(10, 3, false));
        assert!(is_valid_sequence(10, 1, true));
        assert!(!is_valid_sequence(1025, 10, false));
        assert!(!is_valid_sequence(1000, 1049, false));
        assert!(is_valid_sequence(1000, 1048, false));
    }

    #[test]
    fn works_without_a_tokenizer_using_estimates() {
        let spec = ShareGptSpec { num_requests: 20, output_len: None, oversample: true, shuffle: true, seed: 0 };
        let ds = sample(None, &fixture(), &spec).unwrap();
        assert_eq!(ds.samples.len(), 20);
        assert!(ds.notes[0].contains("estimated"));
    }

    #[test]
    fn a_file_that_is_not_sharegpt_is_a_parse_error_with_its_path() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("x.json");
        std::fs::write(&p, "{\"a\": 1}").unwrap();
        let err = load(&p, true, 0).unwrap_err().to_string();
        assert!(err.contains("x.json") && err.contains("ShareGPT"), "{err}");
        let missing = load(&tmp.path().join("nope.json"), true, 0).unwrap_err().to_string();
        assert!(missing.contains("nope.json"), "{missing}");
    }
}
