use serde_json::Value;

use super::*;
use crate::datasets::estimate_tokens;
use crate::testutil::{qwen3, testdata};

fn fixture() -> std::path::PathBuf {
    testdata().join("datasets/txt_slices.txt")
}

fn spec(num: usize, seed: u64, input_len: u32) -> TxtSlicesSpec {
    TxtSlicesSpec { num_requests: num, input_len, output_len: 7, seed }
}

#[test]
fn prompts_match_vllm_s_slices_of_the_fixture() {
    let text = std::fs::read_to_string(testdata().join("datasets/txt_slices_qwen3.json")).unwrap();
    let cases: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(cases.len(), 3);
    for case in &cases {
        let num = case["num"].as_u64().unwrap() as usize;
        let s = spec(num, case["seed"].as_u64().unwrap(), case["input_len"].as_u64().unwrap() as u32);
        let ds = sample(Some(qwen3()), &fixture(), &s).unwrap();
        let want = case["samples"].as_array().unwrap();
        assert_eq!(ds.samples.len(), want.len());
        for (got, want) in ds.samples.iter().zip(want) {
            assert_eq!(got.prompt, want["prompt"].as_str().unwrap(), "seed {}", case["seed"]);
            assert_eq!(u64::from(got.prompt_len), want["prompt_len"].as_u64().unwrap());
            assert_eq!(got.max_tokens, 7);
        }
        // Python's `random` goes on from where the slices left it (LoRA draws come next).
        let mut after = ds.python_random.clone().unwrap();
        assert_eq!(after.random(), case["next_random"].as_f64().unwrap());
        assert!(ds.notes[0].contains(&format!("{} tokens)", case["total_tokens"])), "{:?}", ds.notes);
    }
}

#[test]
fn without_a_tokenizer_slices_are_characters_with_estimated_lengths() {
    let ds = sample(None, &fixture(), &spec(5, 3, 10)).unwrap();
    assert_eq!(ds.samples.len(), 5);
    for s in &ds.samples {
        assert_eq!(s.prompt.chars().count(), 40);
        assert_eq!(s.prompt_len, estimate_tokens(&s.prompt));
    }
    let text = std::fs::read_to_string(fixture()).unwrap();
    let doubled = format!("{text}{text}");
    assert!(ds.samples.iter().all(|s| doubled.contains(&s.prompt)), "each slice is the text's, wrapping");
    assert!(ds.notes[0].starts_with("No tokenizer"), "{:?}", ds.notes);
}

#[test]
fn empty_files_and_empty_prompts_are_refused_with_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("empty.txt");
    std::fs::write(&p, "  \n").unwrap();
    for tok in [Some(qwen3()), None] {
        let msg = sample(tok, &p, &spec(2, 0, 8)).unwrap_err().to_string();
        assert!(msg.contains("no text to slice"), "{msg}");
    }
    let msg = sample(Some(qwen3()), &fixture(), &spec(2, 0, 0)).unwrap_err().to_string();
    assert!(msg.contains("--random-input-len"), "{msg}");
    let msg = sample(None, &tmp.path().join("missing.txt"), &spec(2, 0, 8)).unwrap_err().to_string();
    assert!(msg.contains("missing.txt"), "{msg}");
}
