//! vLLM's two speculative-decoding datasets, `spec_bench` and `speed_bench`: Spec-Bench's
//! `question.jsonl` (each row's `category` and its `turns`, the first turn the prompt) or one
//! subset file of a SPEED-Bench directory (`qualitative.jsonl`, `throughput_8k.jsonl`, ...: each
//! row's `category` and its `messages`, the first message's `content` the prompt); rows of one
//! category when asked, then vLLM's custom dataset: shuffled, chat-templated, counted with
//! special tokens, topped up by oversampling.
//!
//! vLLM builds both without its `--seed` (the shuffle and the top-up draw from seed 0) and
//! without `--skip-chat-template` (every prompt is templated); servebench does the same, so a
//! run matches vLLM's request for request, and says so where a flag asked otherwise.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::Dataset;
use super::custom::{self, CustomSpec, Row};
use crate::{Tokenizer, WorkloadError};

/// The seed vLLM's `SpecBench` and `SpeedBench` shuffle and oversample with (its `DEFAULT_SEED`).
pub const SPEC_BENCH_SEED: u64 = 0;

/// SPEED-Bench's subsets, as vLLM's `--speed-bench-dataset-subset` offers them.
pub const SPEED_BENCH_SUBSETS: [&str; 6] =
    ["qualitative", "throughput_1k", "throughput_2k", "throughput_8k", "throughput_16k", "throughput_32k"];

/// Which of the two suites a file holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Suite {
    /// Spec-Bench: `--dataset-path` is its `question.jsonl`.
    SpecBench,
    /// SPEED-Bench: `--dataset-path` is the directory its download script writes, and `subset`
    /// names the file in it (`{subset}.jsonl`).
    SpeedBench { subset: String },
}

impl Suite {
    fn dataset_name(&self) -> &'static str {
        match self {
            Suite::SpecBench => "spec_bench",
            Suite::SpeedBench { .. } => "speed_bench",
        }
    }

    fn category_flag(&self) -> &'static str {
        match self {
            Suite::SpecBench => "--spec-bench-category",
            Suite::SpeedBench { .. } => "--speed-bench-category",
        }
    }

    /// The JSONL file of `path`: itself for Spec-Bench, the subset's file in the directory for
    /// SPEED-Bench.
    fn file(&self, path: &Path) -> Result<PathBuf, WorkloadError> {
        match self {
            Suite::SpecBench => Ok(path.to_path_buf()),
            Suite::SpeedBench { subset } => {
                if !path.is_dir() {
                    return Err(WorkloadError::Invalid(format!(
                        "--dataset-path {} is not a directory: speed_bench reads SPEED-Bench as its download \
                         script writes it (NVIDIA-NeMo/Skills, nemo_skills/dataset/speed-bench/prepare.py), a \
                         directory of qualitative.jsonl, throughput_1k.jsonl, ...; pass that directory",
                        path.display()
                    )));
                }
                Ok(path.join(format!("{subset}.jsonl")))
            }
        }
    }

    /// A row's prompt: the first turn (Spec-Bench) or the first message's content (SPEED-Bench).
    fn prompt<'v>(&self, v: &'v Value) -> Option<&'v str> {
        match self {
            Suite::SpecBench => v.get("turns")?.as_array()?.first()?.as_str(),
            Suite::SpeedBench { .. } => v.get("messages")?.as_array()?.first()?.get("content")?.as_str(),
        }
    }

    fn prompt_needed(&self) -> &'static str {
        match self {
            Suite::SpecBench => {
                "every line needs \"turns\", a list whose first item is the prompt, as in Spec-Bench's \
                 question.jsonl: {\"category\": \"coding\", \"turns\": [\"Write a function ...\"]}"
            }
            Suite::SpeedBench { .. } => {
                "every line needs \"messages\", a list whose first item's \"content\" is the prompt, as in \
                 SPEED-Bench: {\"category\": \"coding\", \"messages\": [{\"role\": \"user\", \"content\": \"...\"}]}"
            }
        }
    }
}

/// The spec_bench and speed_bench datasets' parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecBenchSpec {
    pub suite: Suite,
    /// Requests wanted; 0 takes every row.
    pub num_requests: usize,
    /// `--spec-bench-category` / `--speed-bench-category`: rows of this category only.
    pub category: Option<String>,
    /// `--spec-bench-output-len` / `--speed-bench-output-len`.
    pub output_len: u32,
    pub shuffle: bool,
    pub oversample: bool,
    /// `--skip-chat-template` was given (it changes nothing here; a note says so).
    pub skip_chat_template_asked: bool,
    /// `--chat-template-kwargs`: extra variables of the chat template.
    pub template_kwargs: Option<Map<String, Value>>,
}

/// Reads the rows of `category` (every row for `None`) of the suite's file at `path`.
pub fn load(suite: &Suite, path: &Path, category: Option<&str>) -> Result<Vec<Row>, WorkloadError> {
    let path = suite.file(path)?;
    let path = path.as_path();
    let text = std::fs::read_to_string(path).map_err(|e| WorkloadError::read(path, e))?;
    let mut rows = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .map_err(|e| WorkloadError::parse(path, Some(i + 1), format!("not a JSON object: {e}")))?;
        let Some(first) = suite.prompt(&v) else {
            return Err(WorkloadError::parse(path, Some(i + 1), suite.prompt_needed()));
        };
        let row_category = v.get("category").and_then(Value::as_str);
        if let Some(c) = row_category
            && !seen.iter().any(|s| s == c)
        {
            seen.push(c.to_string());
        }
        if category.is_none_or(|want| row_category == Some(want)) {
            rows.push(Row { prompt: first.to_string(), line: i + 1, ..Row::default() });
        }
    }
    if rows.is_empty()
        && let Some(want) = category
    {
        return Err(WorkloadError::Empty(format!(
            "{} has no row of {} {want:?}; its categories: {}",
            path.display(),
            suite.category_flag(),
            if seen.is_empty() { "none (no row has a \"category\")".to_string() } else { seen.join(", ") }
        )));
    }
    Ok(rows)
}

/// Builds the dataset.
pub fn sample(tok: Option<&Tokenizer>, path: &Path, spec: &SpecBenchSpec) -> Result<Dataset, WorkloadError> {
    let rows = load(&spec.suite, path, spec.category.as_deref())?;
    let custom = CustomSpec {
        num_requests: spec.num_requests,
        output_len: i64::from(spec.output_len),
        skip_chat_template: false,
        shuffle: spec.shuffle,
        oversample: spec.oversample,
        seed: SPEC_BENCH_SEED,
        images: false,
        template_kwargs: spec.template_kwargs.clone(),
    };
    let mut ds = custom::sample_rows(tok, rows, path, &custom)?;
    if spec.skip_chat_template_asked {
        ds.notes.push(format!(
            "--skip-chat-template does not apply to {}: vLLM templates its prompts whatever the flag says, \
             and so does servebench (to send them as written, put them in a --dataset-name custom file).",
            spec.suite.dataset_name()
        ));
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
            suite: Suite::SpecBench,
            num_requests: 0,
            category: None,
            output_len: 256,
            shuffle: true,
            oversample: true,
            skip_chat_template_asked: false,
            template_kwargs: None,
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
        let msg = load(&Suite::SpecBench, &p, None).unwrap_err().to_string();
        assert!(msg.contains("line 2") && msg.contains("\"turns\""), "{msg}");
        let p = file(&tmp, "{\"prompt\": \"a\"}\n");
        assert!(load(&Suite::SpecBench, &p, None).unwrap_err().to_string().contains("line 1"));
    }

    /// A SPEED-Bench directory: `qualitative.jsonl` of the four rows above as first messages
    /// (with a second message that must not be taken), and a one-row `throughput_1k.jsonl`.
    fn speed_dir(tmp: &tempfile::TempDir) -> std::path::PathBuf {
        let dir = tmp.path().join("speed-bench");
        std::fs::create_dir(&dir).unwrap();
        let row = |cat: &str, prompt: &str| {
            serde_json::json!({"category": cat, "messages": [
                {"role": "user", "content": prompt}, {"role": "assistant", "content": "not this"}]})
            .to_string()
        };
        let q = [
            row("writing", "Write a haiku."),
            row("coding", "Reverse a list in Python."),
            row("writing", "Write a limerick."),
            row("math", "What is 2 + 2?"),
        ];
        std::fs::write(dir.join("qualitative.jsonl"), q.join("\n")).unwrap();
        std::fs::write(dir.join("throughput_1k.jsonl"), row("long", "What is 2 + 2?")).unwrap();
        dir
    }

    fn speed(subset: &str) -> SpecBenchSpec {
        SpecBenchSpec { suite: Suite::SpeedBench { subset: subset.into() }, output_len: 4096, ..spec() }
    }

    #[test]
    fn chat_template_kwargs_reach_the_templated_prompts() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = speed_dir(&tmp);
        let plain = sample(Some(qwen3()), &dir, &speed("throughput_1k")).unwrap();
        let kwargs = serde_json::json!({"enable_thinking": false}).as_object().cloned();
        let off =
            sample(Some(qwen3()), &dir, &SpecBenchSpec { template_kwargs: kwargs, ..speed("throughput_1k") }).unwrap();
        assert_eq!(off.samples[0].prompt, format!("{}<think>\n\n</think>\n\n", plain.samples[0].prompt));
    }

    #[test]
    fn speed_bench_reads_the_subset_s_first_messages_as_spec_bench_reads_first_turns() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = speed_dir(&tmp);
        let ds = sample(Some(qwen3()), &dir, &speed("qualitative")).unwrap();
        // The same rows in the same order as Spec-Bench's test above: one shuffle from seed 0.
        assert_eq!(
            prompts(&ds),
            ["Write a limerick.", "Write a haiku.", "Reverse a list in Python.", "What is 2 + 2?"]
        );
        assert!(ds.samples.iter().all(|s| s.max_tokens == 4096));
        let one = sample(Some(qwen3()), &dir, &SpecBenchSpec { num_requests: 2, ..speed("throughput_1k") }).unwrap();
        assert_eq!(prompts(&one), ["What is 2 + 2?", "What is 2 + 2?"]);
        let s =
            SpecBenchSpec { category: Some("coding".into()), skip_chat_template_asked: true, ..speed("qualitative") };
        let ds = sample(Some(qwen3()), &dir, &s).unwrap();
        assert_eq!(prompts(&ds), ["Reverse a list in Python."]);
        assert!(ds.notes.iter().any(|n| n.starts_with("--skip-chat-template does not apply to speed_bench")));
    }

    #[test]
    fn speed_bench_names_what_is_wrong_with_its_directory_and_rows() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = speed_dir(&tmp);
        let msg = sample(Some(qwen3()), &dir.join("qualitative.jsonl"), &speed("qualitative")).unwrap_err().to_string();
        assert!(msg.contains("is not a directory") && msg.contains("prepare.py"), "{msg}");
        let msg = sample(Some(qwen3()), &dir, &speed("throughput_32k")).unwrap_err().to_string();
        assert!(msg.contains("throughput_32k.jsonl"), "{msg}");
        let msg = sample(Some(qwen3()), &dir, &SpecBenchSpec { category: Some("qa".into()), ..speed("qualitative") })
            .unwrap_err()
            .to_string();
        assert!(msg.contains("--speed-bench-category \"qa\"") && msg.contains("writing, coding, math"), "{msg}");
        std::fs::write(dir.join("throughput_2k.jsonl"), "{\"category\": \"x\", \"turns\": [\"a\"]}\n").unwrap();
        let msg = sample(Some(qwen3()), &dir, &speed("throughput_2k")).unwrap_err().to_string();
        assert!(msg.contains("line 1") && msg.contains("\"messages\""), "{msg}");
    }
}
