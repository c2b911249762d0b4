//! vLLM's `custom` dataset: a JSONL file with a `prompt` per line and an optional
//! `output_tokens`; rows shuffled with Python's `random`, the chat template applied to each
//! prompt unless skipped, lengths counted with special tokens, oversampling.

use std::path::Path;

use serde_json::Value;

use super::{Dataset, Sample, count_with_special, oversample, seeded_shuffle};
use crate::{Tokenizer, WorkloadError};

/// The custom dataset's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomSpec {
    /// Requests wanted; 0 takes every row.
    pub num_requests: usize,
    /// `--custom-output-len`; -1 takes each row's `output_tokens`.
    pub output_len: i64,
    pub skip_chat_template: bool,
    pub shuffle: bool,
    pub oversample: bool,
    pub seed: u64,
}

/// One row: its prompt and, if given, its output length.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub prompt: String,
    pub output_tokens: Option<Value>,
    pub line: usize,
}

/// Reads the JSONL rows (blank lines are skipped).
pub fn load(path: &Path) -> Result<Vec<Row>, WorkloadError> {
    let text = std::fs::read_to_string(path).map_err(|e| WorkloadError::read(path, e))?;
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .map_err(|e| WorkloadError::parse(path, Some(i + 1), format!("not a JSON object: {e}")))?;
        let Some(prompt) = v.get("prompt").and_then(Value::as_str) else {
            return Err(WorkloadError::parse(
                path,
                Some(i + 1),
                "every line needs a \"prompt\" string, e.g. {\"prompt\": \"Hi\", \"output_tokens\": 100}",
            ));
        };
        rows.push(Row { prompt: prompt.to_string(), output_tokens: v.get("output_tokens").cloned(), line: i + 1 });
    }
    Ok(rows)
}

fn row_output_len(row: &Row, path: &Path) -> Result<u32, WorkloadError> {
    match &row.output_tokens {
        Some(v) => v.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| {
            WorkloadError::parse(
                path,
                Some(row.line),
                format!("invalid value for 'output_tokens': {v}; it must be a non-negative integer below 2^32"),
            )
        }),
        None => Err(WorkloadError::parse(
            path,
            Some(row.line),
            "no 'output_tokens' field: with --custom-output-len -1 every row needs one; pass a fixed --custom-output-len instead",
        )),
    }
}

/// Builds the dataset.
pub fn sample(tok: Option<&Tokenizer>, path: &Path, spec: &CustomSpec) -> Result<Dataset, WorkloadError> {
    sample_rows(tok, load(path)?, path, spec)
}

/// Builds the dataset from rows already read from `path` (vLLM's `CustomDataset.sample`, which
/// its `spec_bench` dataset shares).
pub(crate) fn sample_rows(
    tok: Option<&Tokenizer>,
    mut rows: Vec<Row>,
    path: &Path,
    spec: &CustomSpec,
) -> Result<Dataset, WorkloadError> {
    let shuffled = seeded_shuffle(&mut rows, spec.shuffle, spec.seed);
    // `None`: each row's `output_tokens`.
    let fixed_len = match spec.output_len {
        -1 => None,
        n => Some(u32::try_from(n).map_err(|_| {
            WorkloadError::Invalid(format!(
                "--custom-output-len must be -1 (use each row's output_tokens) or a length below 2^32, got {n}"
            ))
        })?),
    };
    let num = if spec.num_requests == 0 { rows.len() } else { spec.num_requests };
    let mut notes = Vec::new();
    let template = match tok {
        Some(t) if !spec.skip_chat_template => Some(t.require_chat_template()?),
        _ => None,
    };
    if tok.is_none() {
        notes.push("No tokenizer: custom prompts are sent untemplated and their lengths are estimated.".into());
    }
    let mut samples = Vec::new();
    for row in rows.iter().take(num) {
        let max_tokens = match fixed_len {
            Some(n) => n,
            None => row_output_len(row, path)?,
        };
        let prompt = match template {
            Some(t) => t.render_user(&row.prompt)?,
            None => row.prompt.clone(),
        };
        samples.push(Sample {
            prompt_len: count_with_special(tok, &prompt)?,
            prompt,
            raw_tokens: None,
            max_tokens,
            timestamp_s: None,
            images: Vec::new(),
        });
    }
    let oversampled =
        oversample(&mut samples, num, spec.oversample, spec.seed, &mut notes, &path.display().to_string())?;
    if samples.is_empty() {
        return Err(WorkloadError::Empty(format!(
            "{} has no rows; add one JSON object per line, e.g. {{\"prompt\": \"Hi\"}}",
            path.display()
        )));
    }
    Ok(Dataset { samples, conversations: Vec::new(), notes, python_random: oversampled.or(shuffled) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::qwen3;

    fn file(tmp: &tempfile::TempDir, body: &str) -> std::path::PathBuf {
        let p = tmp.path().join("data.jsonl");
        std::fs::write(&p, body).unwrap();
        p
    }

    fn spec() -> CustomSpec {
        CustomSpec {
            num_requests: 0,
            output_len: 256,
            skip_chat_template: false,
            shuffle: true,
            oversample: true,
            seed: 0,
        }
    }

    #[test]
    fn rows_are_shuffled_templated_and_counted() {
        let tmp = tempfile::tempdir().unwrap();
        let p = file(
            &tmp,
            "{\"prompt\": \"a\", \"output_tokens\": 3}\n\n{\"prompt\": \"b\", \"output_tokens\": 4}\n{\"prompt\": \"c\", \"output_tokens\": 5}\n",
        );
        let ds = sample(Some(qwen3()), &p, &CustomSpec { output_len: -1, ..spec() }).unwrap();
        // random.seed(0); x = ['a', 'b', 'c']; random.shuffle(x) -> ['a', 'c', 'b']
        let order: Vec<u32> = ds.samples.iter().map(|s| s.max_tokens).collect();
        assert_eq!(order, [3, 5, 4]);
        assert_eq!(ds.samples[0].prompt, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n");
        assert_eq!(ds.samples[0].prompt_len, qwen3().count(&ds.samples[0].prompt, true).unwrap());
    }

    #[test]
    fn skipping_the_template_and_fixed_lengths_and_oversampling() {
        let tmp = tempfile::tempdir().unwrap();
        let p = file(&tmp, "{\"prompt\": \"hello there\"}\n{\"prompt\": \"general kenobi\"}\n");
        let s = CustomSpec { num_requests: 5, skip_chat_template: true, shuffle: false, ..spec() };
        let ds = sample(Some(qwen3()), &p, &s).unwrap();
        assert_eq!(ds.samples.len(), 5);
        assert_eq!(ds.samples[0].prompt, "hello there");
        assert_eq!(ds.samples[0].prompt_len, 2);
        assert!(ds.samples.iter().all(|x| x.max_tokens == 256));
    }

    #[test]
    fn missing_output_tokens_and_prompt_are_errors_with_line_numbers() {
        let tmp = tempfile::tempdir().unwrap();
        let p = file(&tmp, "{\"prompt\": \"x\"}\n");
        let err = sample(Some(qwen3()), &p, &CustomSpec { output_len: -1, ..spec() }).unwrap_err().to_string();
        assert!(err.contains("line 1") && err.contains("output_tokens"), "{err}");
        let p = file(&tmp, "{\"prompt\": \"x\"}\n{\"text\": \"y\"}\n");
        let err = load(&p).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("prompt"), "{err}");
        let p = file(&tmp, "{\"prompt\": \"x\", \"output_tokens\": \"many\"}\n");
        let err = sample(None, &p, &CustomSpec { output_len: -1, ..spec() }).unwrap_err().to_string();
        assert!(err.contains("non-negative integer"), "{err}");
        let p = file(&tmp, "{\"prompt\": \"x\", \"output_tokens\": 4294967296}\n");
        let err = sample(None, &p, &CustomSpec { output_len: -1, ..spec() }).unwrap_err().to_string();
        assert!(err.contains("below 2^32"), "{err}");
        let err = sample(None, &p, &CustomSpec { output_len: 1 << 40, ..spec() }).unwrap_err().to_string();
        assert!(err.contains("--custom-output-len"), "{err}");
    }

    #[test]
    fn without_a_tokenizer_prompts_are_untemplated_estimates() {
        let tmp = tempfile::tempdir().unwrap();
        let p = file(&tmp, "{\"prompt\": \"twelve bytes\"}\n");
        let ds = sample(None, &p, &spec()).unwrap();
        assert_eq!(ds.samples[0].prompt, "twelve bytes");
        assert_eq!(ds.samples[0].prompt_len, 3);
    }
}
