//! vLLM's `spec_bench` dataset: Spec-Bench's `question.jsonl` (one JSON object a line with a
//! `category` and its `turns`), the first turn of each row as the prompt, rows of one category
//! when asked, then vLLM's custom dataset: shuffled, chat-templated, counted with special
//! tokens, topped up by oversampling.
//!
//! vLLM builds this dataset without its `--seed` (the shuffle and the top-up draw from seed 0)
//! and without `--skip-chat-template` (every prompt is templated); servebench does the same, so
//! a run matches vLLM's request for request, and says so where a flag asked otherwise.

use std::path::Path;

use serde_json::Value;

use super::Dataset;
use super::custom::{self, CustomSpec, Row};
use crate::{Tokenizer, WorkloadError};

/// The seed vLLM's `SpecBench` shuffles and oversamples with (its `DEFAULT_SEED`).
pub const SPEC_BENCH_SEED: u64 = 0;

/// The spec_bench dataset's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecBenchSpec {
    /// Requests wanted; 0 takes every row.
    pub num_requests: usize,
    /// `--spec-bench-category`: rows of this category only.
    pub category: Option<String>,
    /// `--spec-bench-output-len`.
    pub output_len: u32,
    pub shuffle: bool,
    pub oversample: bool,
    /// `--skip-chat-template` was given (it changes nothing here; a note says so).
    pub skip_chat_template_asked: bool,
}

/// Reads the rows of `category` (every row for `None`): each line's first turn as the prompt.
pub fn load(path: &Path, category: Option<&str>) -> Result<Vec<Row>, WorkloadError> {
    let text = std::fs::read_to_string(path).map_err(|e| WorkloadError::read(path, e))?;
    let mut rows = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .map_err(|e| WorkloadError::parse(path, Some(i + 1), format!("not a JSON object: {e}")))?;
        let Some(first) = v.get("turns").and_then(Value::as_array).and_then(|t| t.first()).and_then(Value::as_str)
        else {
            return Err(WorkloadError::parse(
                path,
                Some(i + 1),
                "every line needs \"turns\", a list whose first item is the prompt, as in Spec-Bench's \
                 question.jsonl: {\"category\": \"coding\", \"turns\": [\"Write a function ...\"]}",
            ));
        };
        let row_category = v.get("category").and_then(Value::as_str);
        if let Some(c) = row_category
            && !seen.iter().any(|s| s == c)
        {
            seen.push(c.to_string());
        }
        if category.is_none_or(|want| row_category == Some(want)) {
            rows.push(Row { prompt: first.to_string(), output_tokens: None, line: i + 1 });
        }
    }
    if rows.is_empty()
        && let Some(want) = category
    {
        return Err(WorkloadError::Empty(format!(
            "{} has no row of --spec-bench-category {want:?}; its categories: {}",
            path.display(),
            if seen.is_empty() { "none (no row has a \"category\")".to_string() } else { seen.join(", ") }
        )));
    }
    Ok(rows)
}

/// Builds the dataset.
pub fn sample(tok: Option<&Tokenizer>, path: &Path, spec: &SpecBenchSpec) -> Result<Dataset, WorkloadError> {
    let rows = load(path, spec.category.as_deref())?;
    let custom = CustomSpec {
        num_requests: spec.num_requests,
        output_len: i64::from(spec.output_len),
        skip_chat_template: false,
        shuffle: spec.shuffle,
        oversample: spec.oversample,
        seed: SPEC_BENCH_SEED,
    };
    let mut ds = custom::sample_rows(tok, rows, path, &custom)?;
    if spec.skip_chat_template_asked {
        ds.notes.push(
            "--skip-chat-template does not apply to spec_bench: vLLM templates its prompts whatever the flag says, \
             and so does servebench (to send them as written, put them in a --dataset-name custom file)."
                .into(),
        );
    }
    Ok(ds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::qwen3;

    const ROWS: &str = r#"{"question_id": 1, "category": "writing", "turns": ["Write a haiku.", "Now another."]}
{"question_id": 2, "category": "coding", "turns": ["Reverse a list in Python."]}

{"question_id": 3, "category": "writing", "turns": ["Write a limerick."]}
{"question_id": 4, "category": "math", "turns": ["What is 2 + 2?"]}
"#;

    fn file(tmp: &tempfile::TempDir, body: &str) -> std::path::PathBuf {
        let p = tmp.path().join("question.jsonl");
        std::fs::write(&p, body).unwrap();
        p
    }

    fn spec() -> SpecBenchSpec {
        SpecBenchSpec {
            num_requests: 0,
            category: None,
            output_len: 256,
            shuffle: true,
            oversample: true,
            skip_chat_template_asked: false,
        }
    }

    fn prompts(ds: &Dataset) -> Vec<String> {
        let tok = qwen3();
        let template = tok.require_chat_template().unwrap();
        let firsts = ["Write a haiku.", "Reverse a list in Python.", "Write a limerick.", "What is 2 + 2?"];
        ds.samples
            .iter()
            .map(|s| {
                let found = firsts.iter().find(|p| template.render_user(p).unwrap() == s.prompt);
                found.map_or_else(|| format!("untemplated: {}", s.prompt), |p| (*p).to_string())
            })
            .collect()
    }

    #[test]
    fn first_turns_are_shuffled_from_seed_zero_and_templated() {
        let tmp = tempfile::tempdir().unwrap();
        let p = file(&tmp, ROWS);
        let ds = sample(Some(qwen3()), &p, &spec()).unwrap();
        // random.seed(0); x = [0, 1, 2, 3]; random.shuffle(x) -> [2, 0, 1, 3]
        assert_eq!(
            prompts(&ds),
            ["Write a limerick.", "Write a haiku.", "Reverse a list in Python.", "What is 2 + 2?"]
        );
        for s in &ds.samples {
            assert_eq!(s.max_tokens, 256);
            assert_eq!(s.prompt_len, qwen3().count(&s.prompt, true).unwrap());
        }
        assert!(ds.notes.is_empty(), "{:?}", ds.notes);
    }

    #[test]
    fn a_category_keeps_its_rows_and_an_unknown_one_names_those_there_are() {
        let tmp = tempfile::tempdir().unwrap();
        let p = file(&tmp, ROWS);
        let s = SpecBenchSpec { category: Some("writing".into()), shuffle: false, num_requests: 3, ..spec() };
        let ds = sample(Some(qwen3()), &p, &s).unwrap();
        assert_eq!(prompts(&ds)[..2], ["Write a haiku.", "Write a limerick."]);
        assert_eq!(ds.samples.len(), 3, "topped up to --num-prompts");
        assert_eq!(ds.notes, ["Oversampled requests to reach 3 total samples."]);
        let err = sample(Some(qwen3()), &p, &SpecBenchSpec { category: Some("qa".into()), ..spec() }).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("\"qa\"") && msg.contains("writing, coding, math"), "{msg}");
    }

    #[test]
    fn skip_chat_template_is_noted_not_followed_and_no_oversample_keeps_the_rows() {
        let tmp = tempfile::tempdir().unwrap();
        let p = file(&tmp, ROWS);
        let s = SpecBenchSpec { skip_chat_template_asked: true, oversample: false, num_requests: 9, ..spec() };
        let ds = sample(Some(qwen3()), &p, &s).unwrap();
        assert_eq!(ds.samples.len(), 4);
        assert!(prompts(&ds).iter().all(|p| !p.starts_with("untemplated")));
        assert!(ds.notes.iter().any(|n| n.starts_with("--skip-chat-template does not apply to spec_bench")));
        assert!(ds.notes.iter().any(|n| n == "Skipping oversampling. Total samples: 4."));
    }

    #[test]
    fn a_line_without_turns_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let p = file(&tmp, "{\"category\": \"x\", \"turns\": [\"a\"]}\n{\"category\": \"x\", \"turns\": []}\n");
        let msg = load(&p, None).unwrap_err().to_string();
        assert!(msg.contains("line 2") && msg.contains("\"turns\""), "{msg}");
        let p = file(&tmp, "{\"prompt\": \"a\"}\n");
        assert!(load(&p, None).unwrap_err().to_string().contains("line 1"));
    }
}
