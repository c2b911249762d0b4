//! vLLM's `spec_bench`, `speed_bench` and `txt-slices` datasets end to end: the planned bodies (`--dry-run`),
//! a prediction and a benchmark of the served twin with them, and their errors.

use crate::common::read_json;
use crate::sim_cli::{fails, ok, value};

fn testdata(rel: &str) -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/").to_string() + rel
}

const QUESTIONS: &str = r#"{"question_id": 1, "category": "writing", "turns": ["Write a haiku about GPUs.", "Now a limerick."]}
{"question_id": 2, "category": "coding", "turns": ["Reverse a linked list in Rust."]}
{"question_id": 3, "category": "coding", "turns": ["Write a binary search in C."]}
{"question_id": 4, "category": "math", "turns": ["What is the integral of x^2?"]}
"#;

/// `bench serve --dry-run` of Qwen3-0.6B's template with the dataset flags `dataset`: the
/// planned requests (`body`, `at_s`, `prompt_tokens`, ...), or the exit code and stderr of a run
/// that fails.
fn planned(dataset: &[&str]) -> Result<Vec<serde_json::Value>, (i32, String)> {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.jsonl");
    let tokenizer = testdata("tokenizers/qwen3");
    let mut args = vec!["bench", "serve", "--model", "Qwen/Qwen3-0.6B", "--tokenizer", tokenizer.as_str()];
    args.extend(dataset);
    args.extend(["--dry-run", plan.to_str().unwrap()]);
    let out = crate::sim_cli::servebench(&args, &[]);
    if !out.status.success() {
        return Err((out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    let plan = std::fs::read_to_string(&plan).unwrap();
    // The plan's first line is its header.
    Ok(plan.lines().skip(1).map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()).collect())
}

/// The planned request bodies, as [`planned`].
fn planned_bodies(dataset: &[&str]) -> Result<Vec<serde_json::Value>, (i32, String)> {
    Ok(planned(dataset)?.into_iter().map(|r| r["body"].clone()).collect())
}

#[test]
fn spec_bench_plans_the_category_s_first_turns_templated() {
    let dir = tempfile::tempdir().unwrap();
    let questions = dir.path().join("question.jsonl");
    std::fs::write(&questions, QUESTIONS).unwrap();
    let path = questions.to_str().unwrap();
    let args = [
        "--dataset-name",
        "spec_bench",
        "--dataset-path",
        path,
        "--spec-bench-category",
        "coding",
        "--num-prompts",
        "3",
    ];
    let bodies = planned_bodies(&args).unwrap();
    assert_eq!(bodies.len(), 3);
    for body in &bodies {
        let prompt = body["prompt"].as_str().unwrap();
        assert!(prompt.starts_with("<|im_start|>user\n"), "templated: {prompt}");
        assert!(prompt.contains("Reverse a linked list") || prompt.contains("binary search"), "{prompt}");
        assert_eq!(body["max_tokens"], 256);
    }
    // An unknown category names the file's.
    let mut wrong = args;
    wrong[5] = "rag";
    let (code, err) = planned_bodies(&wrong).unwrap_err();
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("writing, coding, math"), "{err}");
}

#[test]
fn txt_slices_are_predicted_and_served_at_the_length_asked() {
    let text = testdata("datasets/txt_slices.txt");
    let tokenizer = testdata("tokenizers/qwen3");
    let common = [
        "--dataset-name",
        "txt-slices",
        "--dataset-path",
        text.as_str(),
        "--tokenizer",
        tokenizer.as_str(),
        "--random-input-len",
        "48",
        "--random-output-len",
        "8",
        "--num-prompts",
        "6",
    ];
    let mut predict = vec!["sim", "predict", "--model", "Qwen/Qwen3-0.6B", "--hardware", "l40s"];
    predict.extend(common);
    let predicted = ok(&predict);
    let dir = tempfile::tempdir().unwrap();
    let mut serve = vec![
        "bench",
        "serve",
        "--sim",
        "Qwen/Qwen3-0.6B@l40s",
        "--no-store",
        "--save-result",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
    ];
    serve.extend(common);
    let served = ok(&serve);
    for out in [&predicted, &served] {
        assert_eq!(value(out, "Successful requests:"), 6.0, "{out}");
        // Each slice re-encodes to about the 48 tokens cut (a word split at its edges may
        // merge or part); the same plan both ways.
        let input = value(out, "Total input tokens:");
        assert!((6.0 * 46.0..=6.0 * 50.0).contains(&input), "{out}");
        assert_eq!(input, value(&predicted, "Total input tokens:"));
    }
    let json = read_json(&dir.path().join("r.json"));
    assert_eq!(json["total_output_tokens"], 48, "{json}");
}

#[test]
fn speed_bench_plans_the_subset_s_first_messages_templated() {
    let dir = tempfile::tempdir().unwrap();
    let speed = dir.path().join("speed-bench");
    std::fs::create_dir(&speed).unwrap();
    let rows: Vec<String> = QUESTIONS
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let messages: Vec<_> = v["turns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| serde_json::json!({"role": "user", "content": t}))
                .collect();
            serde_json::json!({"category": v["category"], "messages": messages}).to_string()
        })
        .collect();
    std::fs::write(speed.join("throughput_2k.jsonl"), rows.join("\n")).unwrap();
    let mut args = [
        "--dataset-name",
        "speed_bench",
        "--dataset-path",
        speed.to_str().unwrap(),
        "--speed-bench-dataset-subset",
        "throughput_2k",
        "--speed-bench-category",
        "writing",
        "--num-prompts",
        "2",
    ];
    let bodies = planned_bodies(&args).unwrap();
    assert_eq!(bodies.len(), 2, "the one writing row, oversampled");
    for body in &bodies {
        let prompt = body["prompt"].as_str().unwrap();
        assert!(prompt.starts_with("<|im_start|>user\nWrite a haiku about GPUs."), "{prompt}");
        assert!(!prompt.contains("limerick"), "only the first message: {prompt}");
        assert_eq!(body["max_tokens"], 4096);
    }
    // The default subset's file is not there: the error names it.
    args[5] = "qualitative";
    let (code, err) = planned_bodies(&args).unwrap_err();
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("qualitative.jsonl"), "{err}");
}

#[test]
fn timed_trace_plans_the_trace_s_times_and_lengths_with_vllm_s_flags() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let rows = "{\"ts\": 10, \"input_length\": 40, \"output_length\": 5, \"hash_ids\": [1, 2]}\n\
                {\"ts\": 10.5, \"input_length\": 24, \"output_length\": 3, \"hash_ids\": [1]}\n\
                {\"ts\": 12, \"input_length\": 16, \"output_length\": 7}\n";
    std::fs::write(&trace, rows).unwrap();
    let args = [
        "--dataset-name",
        "timed_trace",
        "--dataset-path",
        trace.to_str().unwrap(),
        "--timed-trace-label-timestamp",
        "ts",
        "--timed-trace-sec-multiplier",
        "2",
        "--num-prompts",
        "3",
    ];
    let plan = planned(&args).unwrap();
    let got: Vec<(f64, u64, u64)> = plan
        .iter()
        .map(|r| (r["at_s"].as_f64().unwrap(), r["prompt_tokens"].as_u64().unwrap(), r["max_tokens"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, [(0.0, 40, 5), (1.0, 24, 3), (4.0, 16, 7)]);
    // Without the label the file's timestamps are not found, and the error says which flag.
    let (code, err) = planned(&args[..4]).unwrap_err();
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("--timed-trace-label-timestamp"), "{err}");
}

#[test]
fn datasets_that_read_a_file_need_one() {
    for name in ["spec_bench", "speed_bench", "txt-slices", "timed_trace"] {
        let (code, err) =
            fails(&["sim", "predict", "--model", "Qwen/Qwen3-0.6B", "--hardware", "l40s", "--dataset-name", name]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(&format!("--dataset-name {name} needs --dataset-path")), "{err}");
    }
}

/// A PNG of `height x width` as far as its header: all the twin reads of a picture.
fn png_header(height: u32, width: u32) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    b.extend(width.to_be_bytes());
    b.extend(height.to_be_bytes());
    b.extend([8, 2, 0, 0, 0]);
    b
}

#[test]
fn custom_image_sends_each_row_s_files_and_the_twin_counts_their_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let (wide, small) = (dir.path().join("wide.png"), dir.path().join("small.png"));
    std::fs::write(&wide, png_header(720, 1280)).unwrap();
    std::fs::write(&small, png_header(256, 256)).unwrap();
    let rows = dir.path().join("rows.jsonl");
    let row = |prompt: &str, files: &[&std::path::Path]| {
        serde_json::json!({"prompt": prompt, "image_files": files.iter().map(|f| f.to_str().unwrap()).collect::<Vec<_>>()})
            .to_string()
    };
    std::fs::write(&rows, [row("Describe the picture.", &[&wide]), row("Compare them.", &[&small, &wide])].join("\n"))
        .unwrap();
    let dataset = |name: &'static str| {
        vec![
            "--backend",
            "openai-chat",
            "--dataset-name",
            name,
            "--dataset-path",
            rows.to_str().unwrap(),
            "--num-prompts",
            "2",
            "--disable-shuffle",
        ]
    };
    // The bodies: the prompt as it is (no template), then each file as a file:// URL.
    let bodies = planned_bodies(&dataset("custom_image")).unwrap();
    let content = &bodies[1]["messages"][0]["content"];
    assert_eq!(content[0], serde_json::json!({"type": "text", "text": "Compare them."}), "{content}");
    let urls: Vec<&str> = (1..3).map(|i| content[i]["image_url"]["url"].as_str().unwrap()).collect();
    assert_eq!(urls, [format!("file://{}", small.display()), format!("file://{}", wide.display())]);
    // Served by the twin of a vision-language model: each image adds its tower's tokens (880
    // for 720 x 1280 on Qwen3-VL, 64 for 256 x 256) to the usage, and its time to the first token.
    let serve = |name: &'static str| {
        let mut args = vec!["bench", "serve", "--sim", "Qwen/Qwen3-VL-8B-Instruct@h100-sxm", "--no-store"];
        args.extend(dataset(name));
        ok(&args)
    };
    let (with, without) = (serve("custom_image"), serve("custom"));
    assert_eq!(value(&with, "Successful requests:"), 2.0, "{with}");
    let added = value(&with, "Total input tokens:") - value(&without, "Total input tokens:");
    assert!((2.0 * 880.0 + 64.0..=2.0 * 880.0 + 64.0 + 6.0).contains(&added), "{added}: {with}\n{without}");
    assert!(value(&with, "Mean TTFT (ms):") > value(&without, "Mean TTFT (ms):"), "{with}\n{without}");
    // A file the twin cannot read is a failed request with its reason, not a crash.
    std::fs::remove_file(&small).unwrap();
    let out = serve("custom_image");
    assert_eq!(value(&out, "Failed requests:"), 1.0, "{out}");
    assert!(out.contains("cannot read the image file"), "{out}");
}
