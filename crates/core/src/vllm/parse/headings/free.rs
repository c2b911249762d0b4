//! A deployment named inside free text or a title, the way people caption their results:
//! `## gpt-oss-120b, 8 nodes (tp)`, `Results openai/gpt-oss-120b TP=8`,
//! `GLM-4.6-FP8 -tp 8 (8x Spark)`, `**Llama-3.3-70B-Instruct-NVFP4**, TP 4 over 4 Sparks`.
//!
//! Read only where no stricter rule of the module above applies, and only for what such a line
//! can say without doubt:
//! - `model`: the first Hugging Face id (`org/name`), else the first word that names a model
//!   by its family, a version or size and a hyphen (`gpt-oss-120b`, `Qwen3-VL-32B-Instruct-FP8`,
//!   `GLM-4.6`; not `Qwen3` alone, not `vllm`); the simulator resolves a bare name by the
//!   part of its presets' ids after the organisation, and refuses one it does not know;
//! - `tp` and `pp`: a size written next to its name (`TP=8`, `tp 8`, `tp8`, `-tp 8`,
//!   `--tensor-parallel-size 4`, `tensor parallel 4`, `pp=2`, `pipeline-parallel 2`);
//! - the machines: a count before `node`/`nodes`/`spark`/`sparks` (`8 nodes`, `8-node`,
//!   `8x Spark`): `tp-nodes` or `pp-nodes` where the line says which parallelism spans them
//!   with a lone `tp`/`pp`/`tensor`/`pipeline` word, else `nodes`.

use super::count;

/// Families whose models people name without their organisation, lower-case.
const FAMILIES: [&str; 20] = [
    "gpt-oss",
    "qwen",
    "llama",
    "glm",
    "deepseek",
    "gemma",
    "phi-",
    "mistral",
    "mixtral",
    "kimi",
    "minimax",
    "nemotron",
    "granite",
    "olmo",
    "falcon",
    "internlm",
    "seed-oss",
    "devstral",
    "magistral",
    "ernie",
];

/// The labels a free-text line or a title names (see the module docs); empty if none.
pub fn deployment(line: &str) -> Vec<(String, Vec<String>)> {
    let words: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '[' | ']' | '*' | '`' | '|'))
        .map(|w| w.trim_matches(|c: char| matches!(c, '.' | ':' | '"' | '\'')))
        .filter(|w| !w.is_empty())
        .collect();
    let mut labels: Vec<(String, Vec<String>)> = Vec::new();
    let model = words.iter().find(|w| super::is_model_id(w)).or_else(|| words.iter().find(|w| is_model_name(w)));
    if let Some(model) = model {
        labels.push(("model".into(), vec![model.to_string()]));
    }
    // Sizes: `tp=8` and `tp:8` are one word, `tp 8` and `-tp 8` two.
    let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
    let split: Vec<&str> = lower.iter().flat_map(|w| w.split(['=', ':'])).filter(|w| !w.is_empty()).collect();
    for (key, word, names) in [
        (
            "tp",
            "tensor",
            [
                "tp",
                "-tp",
                "--tp",
                "tensor-parallel-size",
                "--tensor-parallel-size",
                "tensor-parallel",
                "tensor-parallelism",
            ],
        ),
        (
            "pp",
            "pipeline",
            [
                "pp",
                "-pp",
                "--pp",
                "pipeline-parallel-size",
                "--pipeline-parallel-size",
                "pipeline-parallel",
                "pipeline-parallelism",
            ],
        ),
    ] {
        let after_name = split.windows(2).find(|w| names.contains(&w[0]) && count(w[1]).is_some()).map(|w| w[1]);
        // Spelled out in two words: `tensor parallel 8`, `pipeline parallelism 2`.
        let spelled = || {
            split
                .windows(3)
                .find(|w| w[0] == word && matches!(w[1], "parallel" | "parallelism") && count(w[2]).is_some())
                .map(|w| w[2])
        };
        let joined = split.iter().find_map(|w| w.strip_prefix(key).filter(|n| count(n).is_some()));
        if let Some(n) = after_name.or_else(spelled).or(joined) {
            labels.push((key.into(), vec![n.to_string()]));
        }
    }
    if let Some(machines) = machines(&split) {
        let spans = |names: &[&str]| split.iter().any(|w| names.contains(w));
        let key = match (spans(&["tp", "tensor"]), spans(&["pp", "pipeline"])) {
            (true, false) if !labels.iter().any(|(k, _)| k == "tp") => "tp-nodes",
            (false, true) if !labels.iter().any(|(k, _)| k == "pp") => "pp-nodes",
            _ => "nodes",
        };
        labels.push((key.into(), vec![machines.to_string()]));
    }
    labels
}

/// The machines a line counts: `8 nodes`, `8-node`, `8x spark`, `8 sparks`, `8xspark`,
/// `4x DGX Spark`.
fn machines(words: &[&str]) -> Option<u32> {
    let machine = |w: &str| matches!(w, "node" | "nodes" | "spark" | "sparks");
    let words: Vec<&str> = words.iter().copied().filter(|w| *w != "dgx").collect();
    let mut found = None;
    for (i, w) in words.iter().enumerate() {
        let next_is_machine = words.get(i + 1).is_some_and(|next| machine(next));
        let n = if let Some((n, _)) = w.split_once('-').filter(|(_, r)| machine(r)) {
            count(n)
        } else if let Some(n) = w.strip_suffix('x').and_then(count) {
            next_is_machine.then_some(n)
        } else if let Some(at) = w.find('x').filter(|&at| machine(&w[at + 1..])) {
            count(&w[..at])
        } else {
            count(w).filter(|_| next_is_machine)
        };
        if let Some(n) = n {
            // Two different counts of machines: say nothing.
            if found.is_some_and(|f| f != n) {
                return None;
            }
            found = Some(n);
        }
    }
    found
}

/// A model named without its organisation: a known family, a digit and a hyphen.
fn is_model_name(word: &str) -> bool {
    let lower = word.to_ascii_lowercase();
    FAMILIES.iter().any(|f| lower.starts_with(f))
        && lower.contains('-')
        && lower.bytes().any(|b| b.is_ascii_digit())
        && lower.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(line: &str) -> Vec<(String, String)> {
        deployment(line).into_iter().map(|(k, v)| (k, v.join(","))).collect()
    }

    fn expect(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_caption_names_its_model_sizes_and_machines() {
        let cases: [(&str, &[(&str, &str)]); 13] = [
            ("gpt-oss-120b, 8 nodes (tp)", &[("model", "gpt-oss-120b"), ("tp-nodes", "8")]),
            ("Results openai/gpt-oss-120b TP=8", &[("model", "openai/gpt-oss-120b"), ("tp", "8")]),
            ("GLM-4.6-FP8 -tp 8 (8x Spark)", &[("model", "GLM-4.6-FP8"), ("tp", "8"), ("nodes", "8")]),
            ("Qwen3-VL-235B-A22B-Instruct-AWQ tp4", &[("model", "Qwen3-VL-235B-A22B-Instruct-AWQ"), ("tp", "4")]),
            (
                "**Llama-3.3-70B-Instruct-NVFP4** — TP 4 over 4 Sparks",
                &[("model", "Llama-3.3-70B-Instruct-NVFP4"), ("tp", "4"), ("nodes", "4")],
            ),
            ("gpt-oss-20b (tensor-parallel-size 4)", &[("model", "gpt-oss-20b"), ("tp", "4")]),
            ("gpt-oss-20b on a 2-node cluster, pipeline parallel", &[("model", "gpt-oss-20b"), ("pp-nodes", "2")]),
            ("deepseek-ai/DeepSeek-R1 tp=8 pp=2", &[("model", "deepseek-ai/DeepSeek-R1"), ("tp", "8"), ("pp", "2")]),
            ("Qwen3-VL-32B-Instruct-FP8: 4 nodes", &[("model", "Qwen3-VL-32B-Instruct-FP8"), ("nodes", "4")]),
            (
                "nvidia/Llama-3.3-70B-Instruct-FP4 on 4x DGX Spark",
                &[("model", "nvidia/Llama-3.3-70B-Instruct-FP4"), ("nodes", "4")],
            ),
            ("8x spark and 4 nodes", &[]),
            ("openai/gpt-oss-120b, tensor parallel 8", &[("model", "openai/gpt-oss-120b"), ("tp", "8")]),
            (
                "gpt-oss-20b: tensor-parallel 4, pipeline parallelism 2",
                &[("model", "gpt-oss-20b"), ("tp", "4"), ("pp", "2")],
            ),
        ];
        for (line, want) in cases {
            assert_eq!(pairs(line), expect(want), "{line}");
        }
    }

    #[test]
    fn plain_words_name_nothing() {
        for line in [
            "vllm",
            "Prefill",
            "decode phase, second try",
            "ShareGPT with the Qwen3 tokenizer",
            "after the reboot: 2 runs",
            "tp over",
            "Llama numbers look off",
            "run 3 of 4",
        ] {
            assert!(deployment(line).is_empty(), "{line}: {:?}", deployment(line));
        }
    }

    proptest::proptest! {
        #[test]
        fn any_line_is_read_without_panicking_and_sizes_are_whole(line in "\\PC{0,80}") {
            for (key, values) in deployment(&line) {
                proptest::prop_assert_eq!(values.len(), 1);
                if key != "model" {
                    proptest::prop_assert!(values[0].parse::<u32>().is_ok_and(|n| n >= 1), "{key}={:?}", values);
                }
            }
        }
    }
}
