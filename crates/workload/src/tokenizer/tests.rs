//! Checks the loader against what transformers does with the same files
//! (`testdata/tokenizers/reference/*.json`, written by `gen_reference.py`).

use serde_json::Value;

use crate::Tokenizer;
use crate::testutil::{EXTRA_TOKENIZERS, extra_tokenizer, qwen3, testdata};

fn reference(name: &str) -> Value {
    let path = testdata().join(format!("tokenizers/reference/{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn check_against_reference(tok: &Tokenizer, name: &str) {
    let r = reference(name);
    assert_eq!(u64::from(tok.vocab_size()), r["vocab_size"].as_u64().unwrap(), "{name} vocab_size");
    assert_eq!(
        u64::from(tok.num_special_tokens_to_add()),
        r["num_special_tokens_to_add"].as_u64().unwrap(),
        "{name} num_special_tokens_to_add"
    );
    assert_eq!(tok.all_special_ids(), ids(&r["all_special_ids"]), "{name} all_special_ids");
    let encodings = r["encodings"].as_array().unwrap();
    assert!(encodings.len() > 50);
    for case in encodings {
        let text = case["text"].as_str().unwrap();
        assert_eq!(tok.encode(text, true).unwrap(), ids(&case["with_special"]), "{name}: {text:?}");
        assert_eq!(tok.encode(text, false).unwrap(), ids(&case["without_special"]), "{name}: {text:?}");
        assert_eq!(tok.count(text, true).unwrap() as usize, case["with_special"].as_array().unwrap().len());
    }
    for case in r["decodings"].as_array().unwrap() {
        assert_eq!(tok.decode(&ids(&case["ids"])).unwrap(), case["text"].as_str().unwrap(), "{name} decode");
    }
}

#[test]
fn qwen3_matches_transformers() {
    check_against_reference(qwen3(), "qwen3");
}

#[test]
fn extra_tokenizers_match_transformers() {
    for name in EXTRA_TOKENIZERS {
        if let Some(tok) = extra_tokenizer(name) {
            check_against_reference(tok, name);
        }
    }
}

#[test]
fn qwen3_special_tokens_and_template_come_from_its_config() {
    let tok = qwen3();
    assert_eq!(tok.eos(), Some(("<|im_end|>", 151_645)));
    assert_eq!(tok.bos(), None);
    assert!(tok.chat_template().is_some());
    assert!(tok.require_chat_template().is_ok());
}

#[test]
fn a_bare_tokenizer_json_loads_without_config_or_template() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("tokenizer.json");
    std::fs::copy(testdata().join("tokenizers/qwen3/tokenizer.json"), &file).unwrap();
    let tok = Tokenizer::load(file.to_str().unwrap()).unwrap();
    assert!(tok.chat_template().is_none());
    assert!(tok.all_special_ids().is_empty());
    let err = tok.require_chat_template().unwrap_err().to_string();
    assert!(err.contains("no chat template"), "{err}");
    assert_eq!(tok.encode("hello world", false).unwrap(), [14990, 1879]);
}

#[test]
fn a_broken_tokenizer_file_names_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("tokenizer.json");
    std::fs::write(&file, "{not json").unwrap();
    let err = Tokenizer::load(file.to_str().unwrap()).unwrap_err().to_string();
    assert!(err.contains(&file.display().to_string()), "{err}");
}

#[test]
fn cleanup_matches_transformers_rules() {
    assert_eq!(
        crate::tokenizer::clean_up_tokenization("a , b . c ? d ! it 's I 'm we 're do n't"),
        "a, b. c? d! it's I'm we're don't"
    );
}

#[test]
fn a_broken_chat_template_fails_only_when_it_is_needed() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(testdata().join("tokenizers/qwen3/tokenizer.json"), tmp.path().join("tokenizer.json")).unwrap();
    std::fs::write(tmp.path().join("chat_template.jinja"), "{% for m in messages %}{{ m.content }").unwrap();
    let tok = Tokenizer::load(tmp.path().to_str().unwrap()).unwrap();
    assert_eq!(tok.count("hello world", false).unwrap(), 2);
    assert!(tok.chat_template().is_none());
    let err = tok.require_chat_template().unwrap_err().to_string();
    assert!(err.contains("chat_template.jinja") && err.contains("does not compile"), "{err}");
    assert!(tok.chat_template_error().is_some());
}
