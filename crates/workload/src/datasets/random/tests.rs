//! The random dataset against vLLM's own sampling (`testdata/datasets/random_*.json`, written
//! by `gen_random_reference.py` and cross-checked against vLLM 0.33's code).

use serde_json::Value;
use servebench_core::config::RangeRatio;

use super::{RandomSpec, ranges, sample};
use crate::Tokenizer;
use crate::testutil::{EXTRA_TOKENIZERS, extra_tokenizer, qwen3, testdata};

fn spec_of(case: &Value) -> RandomSpec {
    RandomSpec {
        num_requests: case["num"].as_u64().unwrap() as usize,
        input_len: case["input_len"].as_u64().unwrap() as u32,
        output_len: case["output_len"].as_u64().unwrap() as u32,
        range_ratio: RangeRatio {
            input: case["ratio"][0].as_f64().unwrap(),
            output: case["ratio"][1].as_f64().unwrap(),
        },
        prefix_len: case["prefix"].as_u64().unwrap() as u32,
        seed: case["seed"].as_u64().unwrap(),
    }
}

fn check(tok: &Tokenizer, name: &str) {
    let path = testdata().join(format!("datasets/random_{name}.json"));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for c in r["cases"].as_array().unwrap() {
        let spec = spec_of(&c["case"]);
        let ds = sample(Some(tok), &spec).unwrap();
        let rg = &c["ranges"];
        assert_eq!(
            ds.notes[0],
            format!("Sampling input_len from [{}, {}] and output_len from [{}, {}]", rg[0], rg[1], rg[2], rg[3])
        );
        let want = c["samples"].as_array().unwrap();
        assert_eq!(ds.samples.len(), want.len());
        for (got, w) in ds.samples.iter().zip(want) {
            assert_eq!(got.prompt, w["prompt"].as_str().unwrap(), "{name} {spec:?}");
            assert_eq!(u64::from(got.prompt_len), w["prompt_len"].as_u64().unwrap());
            assert_eq!(u64::from(got.max_tokens), w["output_len"].as_u64().unwrap());
            // Every prompt re-encodes to exactly its length.
            assert_eq!(tok.count(&got.prompt, false).unwrap(), got.prompt_len);
        }
    }
}

#[test]
fn qwen3_prompts_are_vllms_byte_for_byte() {
    check(qwen3(), "qwen3");
}

#[test]
fn extra_tokenizers_prompts_are_vllms() {
    for name in EXTRA_TOKENIZERS {
        if let Some(tok) = extra_tokenizer(name) {
            check(tok, name);
        }
    }
}

#[test]
fn every_prompt_has_its_exact_length_at_realistic_sizes() {
    let spec = RandomSpec {
        num_requests: 12,
        input_len: 1024,
        output_len: 128,
        range_ratio: RangeRatio { input: 0.2, output: 0.2 },
        prefix_len: 50,
        seed: 9,
    };
    let ds = sample(Some(qwen3()), &spec).unwrap();
    for s in &ds.samples {
        assert_eq!(qwen3().count(&s.prompt, false).unwrap(), s.prompt_len);
        assert!((50 + 819..=50 + 1229).contains(&s.prompt_len), "{}", s.prompt_len);
        assert!((102..=154).contains(&s.max_tokens));
    }
}

#[test]
fn without_a_tokenizer_prompts_are_words_of_the_drawn_lengths() {
    let spec = RandomSpec {
        num_requests: 20,
        input_len: 100,
        output_len: 10,
        range_ratio: RangeRatio { input: 0.5, output: 0.0 },
        prefix_len: 7,
        seed: 1,
    };
    let a = sample(None, &spec).unwrap();
    let b = sample(None, &spec).unwrap();
    assert_eq!(a, b);
    let with_tok = sample(Some(qwen3()), &spec).unwrap();
    for (s, t) in a.samples.iter().zip(&with_tok.samples) {
        assert_eq!(s.prompt.split(' ').count() as u32 - 1, s.prompt_len);
        // The Qwen3 tokenizer has no special tokens to add, so the same lengths are drawn.
        assert_eq!(s.prompt_len, t.prompt_len);
        assert_eq!(s.max_tokens, t.max_tokens);
        // And each word is one token.
        assert_eq!(qwen3().count(&s.prompt, false).unwrap(), s.prompt_len);
    }
    let other_seed = sample(None, &RandomSpec { seed: 2, ..spec }).unwrap();
    assert_ne!(a.samples[0].prompt, other_seed.samples[0].prompt);
}

#[test]
fn bad_parameters_are_rejected_with_advice() {
    let base = RandomSpec {
        num_requests: 1,
        input_len: 1,
        output_len: 1,
        range_ratio: RangeRatio::default(),
        prefix_len: 0,
        seed: 0,
    };
    let too_short = RandomSpec { input_len: 0, ..base.clone() };
    assert!(ranges(&too_short, 0).unwrap_err().to_string().contains("raise --random-input-len"));
    let bad_ratio = RandomSpec { range_ratio: RangeRatio { input: 1.0, output: 0.0 }, ..base.clone() };
    assert!(ranges(&bad_ratio, 0).unwrap_err().to_string().contains("[0, 1)"));
    let past_u32 =
        RandomSpec { input_len: u32::MAX, range_ratio: RangeRatio { input: 0.5, output: 0.0 }, ..base.clone() };
    assert!(ranges(&past_u32, 0).unwrap_err().to_string().contains("lower --random-input-len"));
    let r = ranges(&RandomSpec { input_len: 10, output_len: 0, ..base.clone() }, 1).unwrap();
    assert_eq!(r.input, (9, 9));
    assert_eq!(r.output, (1, 1));
    // A thousand prompts of ten million tokens would be built in memory before the run: refused
    // at once, with what to lower, instead of exhausting the machine.
    let huge = RandomSpec { num_requests: 1000, input_len: 10_000_000, ..base.clone() };
    let err = sample(None, &huge).unwrap_err().to_string();
    assert!(err.contains("10000000000 tokens") && err.contains("lower --num-prompts"), "{err}");
    // The limit counts every prompt: four of a quarter of it would be built, a fifth is refused.
    let quarter = (crate::datasets::MAX_TOTAL_PROMPT_TOKENS / 4) as u32;
    let five = RandomSpec { num_requests: 5, input_len: quarter, ..base };
    assert!(sample(None, &five).unwrap_err().to_string().contains("lower --num-prompts"));
}
