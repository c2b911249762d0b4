//! `--flag.key value`: a JSON-object flag given one key at a time, as vLLM's parser reads it.
//!
//! `--extra-body.temperature 0.5 --extra-body.chat_template_kwargs.enable_thinking false` is
//! `--extra-body '{"temperature": 0.5, "chat_template_kwargs": {"enable_thinking": false}}'`.
//! A value is read as JSON where it is JSON, then as a whole number with a size suffix (`2k` is
//! 2000, `2K` 2048), else as a string; `--flag.key+ a,b` adds the strings a and b to the list
//! at key. Where the same flag is also given whole (`--extra-body '{...}'`), the keys are merged
//! into that object, a dotted key winning over the same key there (vLLM keeps the dotted keys
//! and drops the whole object).

use std::ffi::OsString;

use serde_json::{Map, Value};

/// Gathers every `--flag.key value` (or `--flag.key=value`) into one `--flag JSON`, in place
/// of the flag's whole value where it has one, else after the other flags; the arguments after
/// a `--` are left as they are.
pub fn merge_dotted(args: Vec<OsString>) -> Vec<OsString> {
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let mut out: Vec<OsString> = Vec::with_capacity(args.len());
    let mut objects: Vec<(String, Map<String, Value>)> = Vec::new();
    let mut i = 0;
    while i < end {
        let dotted = args[i].to_str().and_then(split_dotted);
        let Some((flag, keys, inline)) = dotted else {
            out.push(args[i].clone());
            i += 1;
            continue;
        };
        let value = match inline {
            Some(v) => v.to_string(),
            None => match args.get(i + 1).filter(|_| i + 1 < end).and_then(|a| a.to_str()) {
                Some(v) => {
                    i += 1;
                    v.to_string()
                }
                // No value: left for the parser to refuse, as the flag it is not.
                None => {
                    out.push(args[i].clone());
                    i += 1;
                    continue;
                }
            },
        };
        let (keys, append) = keys.strip_suffix('+').map_or((keys, false), |k| (k, true));
        let value = if append {
            Value::Array(value.split(',').map(|s| Value::String(s.to_string())).collect())
        } else {
            read_value(&value)
        };
        let nested = keys.rsplit('.').fold(value, |v, k| Value::Object(Map::from_iter([(k.to_string(), v)])));
        let Value::Object(nested) = nested else { unreachable!("a key path of at least one key") };
        let flag = format!("--{flag}");
        match objects.iter_mut().find(|(f, _)| *f == flag) {
            Some((_, object)) => merge(object, nested),
            None => objects.push((flag, nested)),
        }
        i += 1;
    }
    for (flag, object) in objects {
        place(&mut out, &flag, object);
    }
    out.extend(args[end..].iter().cloned());
    out
}

/// `--flag.key[=value]` as (flag, key path, value given with `=`).
fn split_dotted(s: &str) -> Option<(&str, &str, Option<&str>)> {
    let rest = s.strip_prefix("--")?;
    let (name, inline) = match rest.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (rest, None),
    };
    let (flag, keys) = name.split_once('.')?;
    (!flag.is_empty() && !keys.is_empty()).then_some((flag, keys, inline))
}

/// A dotted value: JSON, else a whole number with a size suffix, else the string.
fn read_value(s: &str) -> Value {
    serde_json::from_str(s)
        .ok()
        .or_else(|| servebench_core::vllm::human_readable_int(s).map(Value::from))
        .unwrap_or_else(|| Value::String(s.to_string()))
}

/// Merges `update` into `object`: objects key by key, lists one after the other, anything else
/// replaced.
fn merge(object: &mut Map<String, Value>, update: Map<String, Value>) {
    for (k, v) in update {
        match (object.get_mut(&k), v) {
            (Some(Value::Object(old)), Value::Object(new)) => merge(old, new),
            (Some(Value::Array(old)), Value::Array(new)) => old.extend(new),
            (_, v) => {
                object.insert(k, v);
            }
        }
    }
}

/// Puts `--flag JSON` into the arguments: merged into the flag's whole value where it is given
/// as a JSON object (the last one given), else after the other flags.
fn place(out: &mut Vec<OsString>, flag: &str, object: Map<String, Value>) {
    let with_eq = format!("{flag}=");
    let whole = out.iter().rposition(|a| a == flag || a.to_str().is_some_and(|s| s.starts_with(&with_eq)));
    if let Some(at) = whole {
        let (value_at, text) = match out[at].to_str().and_then(|s| s.strip_prefix(&with_eq)) {
            Some(v) => (at, v.to_string()),
            None => (at + 1, out.get(at + 1).and_then(|a| a.to_str()).unwrap_or_default().to_string()),
        };
        if let Ok(Value::Object(mut given)) = serde_json::from_str(&text) {
            merge(&mut given, object);
            let json = Value::Object(given).to_string();
            out[value_at] = if value_at == at { format!("{with_eq}{json}") } else { json }.into();
            return;
        }
    }
    out.push(flag.into());
    out.push(Value::Object(object).to_string().into());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(v: &[&str]) -> Vec<String> {
        merge_dotted(v.iter().map(OsString::from).collect()).into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    #[test]
    fn dotted_keys_become_one_json_object() {
        let got = run(&[
            "servebench",
            "bench",
            "serve",
            "--extra-body.temperature",
            "0.5",
            "--num-prompts",
            "5",
            "--extra-body.chat_template_kwargs.enable_thinking=false",
            "--extra-body.stop+",
            "a,b",
            "--extra-body.stop+=c",
            "--extra-body.max_tokens",
            "2k",
            "--extra-body.name",
            "plain text",
        ]);
        assert_eq!(&got[..5], ["servebench", "bench", "serve", "--num-prompts", "5"]);
        assert_eq!(got[5], "--extra-body");
        let body: Value = serde_json::from_str(&got[6]).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"temperature": 0.5, "chat_template_kwargs": {"enable_thinking": false},
                "stop": ["a", "b", "c"], "max_tokens": 2000, "name": "plain text"})
        );
        assert_eq!(got.len(), 7);
    }

    #[test]
    fn dotted_keys_merge_into_the_whole_value_and_win() {
        let got = run(&["s", "--extra-body", r#"{"top_k": 5, "temperature": 1.0}"#, "--extra-body.temperature", "0"]);
        assert_eq!(got, ["s", "--extra-body", r#"{"top_k":5,"temperature":0}"#]);
        let got = run(&["s", r#"--extra-body={"a": {"b": 1}}"#, "--extra-body.a.c=2", "--model", "m"]);
        assert_eq!(got, ["s", r#"--extra-body={"a":{"b":1,"c":2}}"#, "--model", "m"]);
        // A whole value that is not an object is left for the flag's own check; the keys follow.
        let got = run(&["s", "--extra-body", "[1]", "--extra-body.a", "1"]);
        assert_eq!(got, ["s", "--extra-body", "[1]", "--extra-body", r#"{"a":1}"#]);
    }

    #[test]
    fn other_words_are_left_alone() {
        let args =
            ["s", "--base-url=http://a.b:8000", "--dataset-path", "x.v1.jsonl", "--", "--extra-body.a", "1", "-x.y"];
        assert_eq!(run(&args), args);
        // A dotted flag with no value is left for the parser to refuse.
        assert_eq!(run(&["s", "--extra-body.a"]), ["s", "--extra-body.a"]);
        assert_eq!(run(&["s", "--.a", "1", "--b.", "2"]), ["s", "--.a", "1", "--b.", "2"]);
    }

    #[test]
    fn values_read_as_json_then_sizes_then_strings() {
        assert_eq!(read_value("1k"), Value::from(1000));
        assert_eq!(read_value("25.6k"), Value::from(25_600));
        assert_eq!(read_value("2K"), Value::from(2048));
        assert_eq!(read_value("1.5K"), Value::from("1.5K"));
        assert_eq!(read_value("80g"), Value::from(80_000_000_000u64));
        assert_eq!(read_value("-1k"), Value::from("-1k"));
        assert_eq!(read_value("true"), Value::from(true));
        assert_eq!(read_value("null"), Value::Null);
        assert_eq!(read_value("k"), Value::from("k"));
        assert_eq!(read_value("[1, 2]"), serde_json::json!([1, 2]));
        assert_eq!(read_value("1e3k"), Value::from("1e3k"));
        assert_eq!(read_value(".5k"), Value::from(".5k"));
        assert_eq!(read_value("5.k"), Value::from("5.k"));
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// A word of a command line: a flag, a dotted flag (with or without `=`), a value, `--`.
        fn word() -> impl Strategy<Value = String> {
            prop_oneof![
                "--[a-z-]{1,8}",
                "--(extra-body|x)\\.[a-z_]{0,4}(\\.[a-z]{0,3})?\\+?(=[a-z0-9.\\[\\]{}\",]{0,6})?",
                "[a-zA-Z0-9.,:\\[\\]{}\"-]{0,8}",
                Just("--".to_string()),
            ]
        }

        proptest! {
            #[test]
            fn any_command_line_is_merged_without_a_panic_and_keeps_its_other_words(words in proptest::collection::vec(word(), 0..12)) {
                let got = run(&words.iter().map(String::as_str).collect::<Vec<_>>());
                // The words that are not dotted flags come back in their order (a dotted flag's
                // value is taken with it, so only those before the first dotted flag are sure).
                let end = words.iter().position(|w| w == "--").unwrap_or(words.len());
                let plain: Vec<&String> = words[..end].iter().take_while(|w| split_dotted(w).is_none()).collect();
                prop_assert_eq!(&got[..plain.len()], &plain.iter().map(|w| w.to_string()).collect::<Vec<_>>()[..]);
                // What follows `--` is kept as it is, at the end.
                prop_assert!(got.ends_with(&words[end..]));
            }

            #[test]
            fn every_dotted_key_is_found_at_its_path(
                keys in proptest::collection::btree_map("[a-z]{1,3}(\\.[a-z]{1,3}){0,2}", any::<i32>(), 1..6),
            ) {
                // No key path may run through another's value.
                let paths: Vec<&String> = keys.keys().collect();
                prop_assume!(!paths.iter().any(|a| paths.iter().any(|b| b.starts_with(&format!("{a}.")))));
                let mut argv = vec!["s".to_string()];
                for (path, v) in &keys {
                    argv.extend([format!("--extra-body.{path}"), v.to_string()]);
                }
                let got = run(&argv.iter().map(String::as_str).collect::<Vec<_>>());
                prop_assert_eq!(&got[..2], &["s", "--extra-body"]);
                let body: Value = serde_json::from_str(&got[2]).unwrap();
                for (path, v) in &keys {
                    let pointer = format!("/{}", path.replace('.', "/"));
                    prop_assert_eq!(body.pointer(&pointer), Some(&Value::from(*v)), "{}", pointer);
                }
            }
        }
    }
}
