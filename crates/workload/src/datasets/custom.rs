//! vLLM's `custom` dataset: a JSONL file with a `prompt` per line and an optional
//! `output_tokens`; rows shuffled with Python's `random`, the chat template applied to each
//! prompt unless skipped, lengths counted with special tokens, oversampling. With images, vLLM's
//! `custom_image`: each row also names its `image_files`, sent after its prompt as vLLM's
//! `process_image` sends a path (a `file://` URL the server reads; `http(s)://` and `file://`
//! as given), its prompt never templated.

use std::path::Path;

use serde_json::{Map, Value};

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
    /// `custom_image`: every row's `image_files` go with it.
    pub images: bool,
    /// `--chat-template-kwargs`: extra variables of the chat template.
    pub template_kwargs: Option<Map<String, Value>>,
}

/// One row: its prompt and, if given, its output length and media files.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row {
    pub prompt: String,
    pub output_tokens: Option<Value>,
    pub line: usize,
    /// `image_files`, as written.
    pub image_files: Vec<String>,
    /// The first media field servebench does not send (`audio_files`, `video_files`), if any.
    pub other_media: Option<&'static str>,
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
        let image_files = match v.get("image_files") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(files)) if files.iter().all(Value::is_string) => {
                files.iter().filter_map(Value::as_str).map(str::to_string).collect()
            }
            Some(other) => {
                return Err(WorkloadError::parse(
                    path,
                    Some(i + 1),
                    format!("\"image_files\" must be a list of paths or URLs, e.g. [\"/data/cat.png\"], not {other}"),
                ));
            }
        };
        rows.push(Row {
            prompt: prompt.to_string(),
            output_tokens: v.get("output_tokens").cloned(),
            line: i + 1,
            image_files,
            other_media: ["audio_files", "video_files"].into_iter().find(|k| v.get(*k).is_some_and(|x| !x.is_null())),
        });
    }
    Ok(rows)
}

/// The `image_url` a row's image file is sent as, by vLLM's `process_image`: `http://`,
/// `https://` and `file://` URLs as given, a path as a `file://` URL. A relative path is made
/// absolute from the working directory (vLLM would send `file://` and the relative path, which
/// no server reads as a file).
pub fn image_url(file: &str) -> String {
    if ["http://", "https://", "file://"].iter().any(|p| file.starts_with(p)) {
        return file.to_string();
    }
    let path = std::path::absolute(file).unwrap_or_else(|_| Path::new(file).to_path_buf());
    format!("file://{}", path.display())
}

/// A `custom_image` row's image URLs, or why the row cannot be sent.
fn row_images(row: &Row, path: &Path) -> Result<Vec<String>, WorkloadError> {
    if let Some(field) = row.other_media {
        return Err(WorkloadError::parse(
            path,
            Some(row.line),
            format!("servebench sends images only; \"{field}\" is not supported yet: leave it out of the row"),
        ));
    }
    if row.image_files.is_empty() {
        return Err(WorkloadError::parse(
            path,
            Some(row.line),
            "a custom_image row needs \"image_files\", e.g. {\"prompt\": \"What is this?\", \"image_files\": \
             [\"/data/cat.png\"]}; for text alone use --dataset-name custom",
        ));
    }
    Ok(row.image_files.iter().map(|f| image_url(f)).collect())
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
        Some(t) if !spec.skip_chat_template && !spec.images => Some(t.require_chat_template()?),
        _ => None,
    };
    if tok.is_none() {
        notes.push("No tokenizer: custom prompts are sent untemplated and their lengths are estimated.".into());
    }
    if spec.images && rows.iter().any(|r| r.image_files.iter().any(|f| !f.starts_with("http"))) {
        notes.push(
            "custom_image: image files are sent as file:// URLs, which the server reads from its own disk (vLLM needs \
             --allowed-local-media-path)."
                .into(),
        );
    }
    let mut samples = Vec::new();
    for row in rows.iter().take(num) {
        let max_tokens = match fixed_len {
            Some(n) => n,
            None => row_output_len(row, path)?,
        };
        let prompt = match template {
            Some(t) if !spec.images => t.render_user_with(&row.prompt, spec.template_kwargs.as_ref())?,
            _ => row.prompt.clone(),
        };
        samples.push(Sample {
            prompt_len: count_with_special(tok, &prompt)?,
            prompt,
            raw_tokens: None,
            max_tokens,
            timestamp_s: None,
            images: if spec.images { row_images(row, path)? } else { Vec::new() },
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
    Ok(Dataset { samples, conversations: Vec::new(), notes, python_random: oversampled.or(shuffled), query: None })
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
            template_kwargs: None,
            shuffle: true,
            oversample: true,
            seed: 0,
            images: false,
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

    #[test]
    fn custom_image_rows_send_their_files_untemplated() {
        let tmp = tempfile::tempdir().unwrap();
        let p = file(
            &tmp,
            "{\"prompt\": \"What is this?\", \"image_files\": [\"/data/a.png\", \"rel/b.jpg\"], \"output_tokens\": 7}\n\
             {\"prompt\": \"And this?\", \"image_files\": [\"https://example.com/c.jpg\"], \"output_tokens\": 9}\n",
        );
        let s = CustomSpec { output_len: -1, shuffle: false, images: true, ..spec() };
        let ds = sample(Some(qwen3()), &p, &s).unwrap();
        assert_eq!(ds.samples[0].prompt, "What is this?");
        assert_eq!(ds.samples[0].prompt_len, qwen3().count("What is this?", true).unwrap());
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            ds.samples[0].images,
            ["file:///data/a.png".to_string(), format!("file://{}", cwd.join("rel/b.jpg").display())]
        );
        assert_eq!(ds.samples[1].images, ["https://example.com/c.jpg"]);
        assert_eq!((ds.samples[0].max_tokens, ds.samples[1].max_tokens), (7, 9));
        assert!(ds.notes.iter().any(|n| n.contains("--allowed-local-media-path")), "{:?}", ds.notes);
        // The same file read as plain custom: templated, its images left out.
        let plain = sample(Some(qwen3()), &p, &CustomSpec { output_len: -1, shuffle: false, ..spec() }).unwrap();
        assert!(plain.samples[0].prompt.starts_with("<|im_start|>user") && plain.samples[0].images.is_empty());
    }

    #[test]
    fn custom_image_rows_without_images_or_with_other_media_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let s = CustomSpec { images: true, ..spec() };
        let p = file(&tmp, "{\"prompt\": \"a\", \"image_files\": [\"/x.png\"]}\n{\"prompt\": \"b\"}\n");
        let e = sample(None, &p, &CustomSpec { shuffle: false, ..s.clone() }).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("needs \"image_files\"") && e.contains("custom"), "{e}");
        let p = file(&tmp, "{\"prompt\": \"a\", \"image_files\": [\"/x.png\"], \"audio_files\": [\"/y.wav\"]}\n");
        let e = sample(None, &p, &s).unwrap_err().to_string();
        assert!(e.contains("audio_files") && e.contains("images only"), "{e}");
        let p = file(&tmp, "{\"prompt\": \"a\", \"image_files\": \"/x.png\"}\n");
        let e = load(&p).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("list of paths"), "{e}");
    }

    #[test]
    fn image_urls_follow_vllm_s_process_image() {
        assert_eq!(image_url("/data/cat.png"), "file:///data/cat.png");
        assert_eq!(image_url("file:///data/cat.png"), "file:///data/cat.png");
        assert_eq!(image_url("http://host/cat.png"), "http://host/cat.png");
        assert_eq!(image_url("https://host/cat.png"), "https://host/cat.png");
        assert!(image_url("cat.png").starts_with("file:///") && image_url("cat.png").ends_with("/cat.png"));
    }
}
