//! How the free text between result blocks becomes labels: [`block_labels`] gives each entry
//! of [`parse_reports`](super::parse_reports) its labels, from the headings above it and above
//! the blocks before it.
//!
//! Each non-blank line between two blocks (or before the first) is a heading. It is read as
//! one label `key=value`, in this order of rules:
//!
//! 1. Lines vLLM itself prints around a result are not headings: its log lines (`INFO ...`,
//!    `WARNING ...`), progress bars, the `Namespace(...)` line, the traffic lines
//!    (`Traffic request rate: inf`, `Maximum request concurrency: 4`, ...), the failure
//!    listing (`Error 3: ...`) and the other fixed progress messages.
//! 2. `# Title` (any number of `#`): `section=Title`, and the deployment the title names (as in
//!    rule 7); the `#` lines right below it go on with the same comment and set nothing.
//! 3. A `vllm serve MODEL ...` command line (after any prompt such as `$`): `model=MODEL` and
//!    the parallel sizes its flags give, `tp`, `pp` and `dp` (`-tp 4`,
//!    `--tensor-parallel-size=4`, `-pp`, `-dp` and their long forms), `ep=true` for
//!    `--enable-expert-parallel`, and the serving flags the simulator has options for, under
//!    the option's name: `--max-num-batched-tokens`, `--max-num-seqs`, `--max-model-len`,
//!    `--kv-cache-dtype`, `--gpu-memory-utilization`, `--distributed-executor-backend`,
//!    `--nnodes` with their values, and
//!    `--enforce-eager`, `--[no-]async-scheduling`, `--[no-]enable-prefix-caching` as
//!    `true`/`false`, `quick-reduce` from `VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=LEVEL`
//!    written before the command, and `fuse-allreduce-rms` from a compilation config that
//!    sets `pass_config`'s `fuse_allreduce_rms`; so that a pasted command tells `sim fit` and `sim validate` the
//!    deployment of the blocks below it. A serve line replaces every label an earlier one set:
//!    a flag it leaves out is vLLM's default again, not the earlier line's value.
//!    A command continued over several lines (each but the last ending in `\`, as pasted
//!    from a shell) is one heading. The command may be quoted inside another (`docker exec ... bash -c "vllm serve ..."`,
//!    straight or typographic quotes); a placeholder model (`M`, `$MODEL`, `<model>`) sets no
//!    model, and a placeholder size (`-tp X`) no size.
//!    A benchmark command (`vllm bench serve`, `benchmark_serving.py`) that names its dataset
//!    (`--dataset-name sharegpt`) gives `dataset=NAME`, which tells `sim validate` the shape of
//!    the request lengths behind the report's totals, and one that names its backend
//!    (`--backend openai-chat`) gives `backend=NAME`, the endpoint its requests went through.
//! 4. A parallel layout across machines: `4 nodes (tp)`, `tp over 8 nodes`, `2 nodes (pp)`
//!    (a count, `node`/`nodes`, and `tp` or `pp`, spelled out or not; case and brackets do
//!    not matter): `tp-nodes=N` or `pp-nodes=N`, tensor (or pipeline) parallel over every GPU
//!    of N machines, which the simulator turns into sizes with the hardware's GPUs per node.
//! 5. `key: value` or `key=value`, where the key is one word (letters, digits, `_`, `.`,
//!    `-`): `key=value`, the key as written (except the keys the simulator reads, `model`,
//!    `tp`, `pp`, `dp`, `ep`, `nodes`, `hw`, `hardware` and `gpu`, taken in any case).
//!    If the value is a comma-separated list of two or more single-word items
//!    (`num_prompts: 1, 2, 4, 8`), it is a **list** (see below). A line of several
//!    `key=value` words (`tp=2 pp=1`, `tp=2, pp=1`) gives one label per word, and so does a line
//!    of comma-separated pairs of one-word values (`model: org/name, tp=8, nodes=8`). A `model`
//!    whose value is several words is read as a caption (rule 7: `Model: GLM-4.6-FP8 (TP=8,
//!    8 nodes)`) where that names a model.
//! 6. A model id (`org/name`), alone or after one word (`Results Qwen/Qwen3-8B`):
//!    `model=org/name`; or first and followed by a layout over machines
//!    (`org/name (4 nodes, tp)`): that model and the layout's label. (The run store also makes
//!    the model the run's model, `sim fit` picks the blocks of the model it fits by it.)
//! 7. Anything else is free text: `heading=the line`, and the deployment it names, if it names
//!    a model (`gpt-oss-120b, 8 nodes (tp)`, `Results org/name TP=8`: `model`, `tp`, `pp` and
//!    the machines, read as the `free` module says). Several free-text lines before one block
//!    are joined with ` / `.
//!
//! Scope: a label applies to every block after its heading until a later heading sets the
//! same key. A list heading `key: v1, ..., vn` gives `v1` to the first block after it, `v2`
//! to the second, and so on; after the n-th block the key is unset. Malformed blocks take
//! their value too, so the values stay with the blocks they were written for. A list cut
//! short by a new heading of the same key, or by the end of the file, is reported as a note.
//!
//! Example (reference report `001`): `vllm`, `num_prompts: 1, 2, ..., 2048` (12 values),
//! `seq_length: 80`, then 12 blocks: block i gets `heading=vllm`, `num_prompts=<value i>`,
//! `seq_length=80`.
//! Then `num_prompts: 1, ..., 64` and `seq_length: 10000` govern the next 7 blocks, and
//! `num_prompt:1` (another key) the 4 after them, which still carry `seq_length=10000`
//! because no later heading sets `seq_length`.

use thiserror::Error;

pub use command::{SERVE_OPTION_LABELS, mm_limits, option_label};
use command::{bench_labels, serve_command};

use super::{BlockError, ParsedBlock};

/// Each block's labels, and what did not fit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockLabels {
    /// One list per entry given to [`block_labels`], in the same order: `(key, value)` in the
    /// order the keys first appeared in the file.
    pub blocks: Vec<Vec<(String, String)>>,
    /// Lists cut short, at the line of their heading, in the order they were found.
    pub notes: Vec<HeadingNote>,
}

/// A list heading whose values did not all find a block.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("line {line}: {message}")]
pub struct HeadingNote {
    /// 1-based line of the list heading.
    pub line: usize,
    pub message: String,
}

/// The labels of every entry of [`parse_reports`](super::parse_reports) (blocks and malformed
/// blocks alike, so list values stay with the blocks they were written for), by the rules of
/// the module docs.
pub fn block_labels(entries: &[Result<ParsedBlock, BlockError>]) -> BlockLabels {
    let mut reader = HeadingLabels::default();
    let blocks = entries
        .iter()
        .map(|entry| {
            let (texts, lines) = match entry {
                Ok(block) => (&block.headings, &block.heading_lines),
                Err(err) => (&err.headings, &err.heading_lines),
            };
            let located: Vec<(usize, &str)> = lines.iter().copied().zip(texts.iter().map(String::as_str)).collect();
            reader.next_block(&located)
        })
        .collect();
    BlockLabels { blocks, notes: reader.finish() }
}

/// The same rules for results that are not vLLM's blocks, read one block at a time (a table of
/// another benchmark's rows, one block for every row of it): each block's labels from the
/// headings above it and above the blocks before it.
#[derive(Debug, Default)]
pub struct HeadingLabels {
    headings: Headings,
    notes: Vec<HeadingNote>,
}

impl HeadingLabels {
    /// The labels of the next block, whose headings are `(line, text)` in order.
    pub fn next_block(&mut self, headings: &[(usize, &str)]) -> Vec<(String, String)> {
        self.headings.block(headings, &mut self.notes)
    }

    /// The lists cut short, once every block is read.
    pub fn finish(mut self) -> Vec<HeadingNote> {
        self.headings.finish(&mut self.notes);
        self.notes
    }
}

/// The labels in force, in the order their keys first appeared.
#[derive(Debug, Default)]
struct Headings {
    scopes: Vec<Scope>,
}

#[derive(Debug)]
struct Scope {
    key: String,
    value: ScopeValue,
}

#[derive(Debug)]
enum ScopeValue {
    One(String),
    /// A list heading at `line`; `next` is the value for the next block.
    List {
        values: Vec<String>,
        next: usize,
        line: usize,
    },
}

/// The headings with shell continuations joined: a line that ends in `\` goes on in the next
/// one (a pasted multi-line `vllm serve ... \` command is one heading), at the first line's
/// number. A `#` comment line right below another one goes on with the same comment, which
/// its first line titles (the section), and is dropped.
fn join_continued(headings: &[(usize, &str)]) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::with_capacity(headings.len());
    let mut open = false;
    let is_comment = |text: &str| text.trim_start().starts_with('#');
    let mut previous_comment: Option<usize> = None;
    for &(line, text) in headings {
        let comment = is_comment(text);
        let continues_comment = comment && previous_comment.is_some_and(|l| l + 1 == line);
        previous_comment = comment.then_some(line);
        if continues_comment && !open {
            continue;
        }
        let trimmed = text.trim_end();
        let (body, continues) = match trimmed.strip_suffix('\\') {
            Some(body) => (body.trim_end(), true),
            None => (trimmed, false),
        };
        match out.last_mut() {
            Some((_, joined)) if open => {
                joined.push(' ');
                joined.push_str(body.trim_start());
            }
            _ => out.push((line, body.to_string())),
        }
        open = continues;
    }
    out
}

/// What one heading line says.
#[derive(Debug, PartialEq, Eq)]
pub enum Heading {
    /// Printed by vLLM, not by the person.
    Ignored,
    /// `key=value` labels; a key with several values is a list.
    Labels(Vec<(String, Vec<String>)>),
    /// Free text.
    Text(String),
}

impl Headings {
    /// Reads the headings before one block (`(line, text)`, in order) and returns the labels
    /// of that block. Notes about lists cut short go to `notes`.
    fn block(&mut self, headings: &[(usize, &str)], notes: &mut Vec<HeadingNote>) -> Vec<(String, String)> {
        let mut text: Vec<String> = Vec::new();
        let mut text_line = 0;
        for (line, joined) in join_continued(headings) {
            let heading = joined.as_str();
            match classify(heading) {
                Heading::Ignored => {}
                Heading::Labels(labels) => {
                    // A `vllm serve` line states a whole deployment: what an earlier one set and
                    // this one leaves out (expert parallel, a token budget) does not carry over.
                    if serve_command(heading).is_some() {
                        self.scopes.retain(|scope| !set_by_serve(&scope.key));
                    }
                    let title = match labels.as_slice() {
                        [(key, values)] if key == "section" => values.first().cloned(),
                        _ => None,
                    };
                    self.set_all(labels, line, notes);
                    if let Some(title) = title {
                        self.set_caption(free::deployment(&title), line, notes);
                    }
                }
                Heading::Text(t) => {
                    // Set at the first line, so the label keeps its place among the others.
                    if text.is_empty() {
                        text_line = line;
                        self.set("heading".to_string(), vec![t.clone()], line, notes);
                    }
                    self.set_caption(free::deployment(&t), line, notes);
                    text.push(t);
                }
            }
        }
        if text.len() > 1 {
            self.set("heading".to_string(), vec![text.join(" / ")], text_line, notes);
        }
        let mut labels = Vec::with_capacity(self.scopes.len());
        self.scopes.retain_mut(|scope| match &mut scope.value {
            ScopeValue::One(v) => {
                labels.push((scope.key.clone(), v.clone()));
                true
            }
            ScopeValue::List { values, next, .. } => {
                labels.push((scope.key.clone(), values[*next].clone()));
                *next += 1;
                *next < values.len()
            }
        });
        labels
    }

    /// Reports lists that still have values when the file ends.
    fn finish(self, notes: &mut Vec<HeadingNote>) {
        for scope in self.scopes {
            if let ScopeValue::List { values, next, line } = scope.value {
                notes.push(HeadingNote {
                    line,
                    message: format!(
                        "the list `{}` has {} values but only {next} result blocks follow it; the values from {:?} on were not used",
                        scope.key,
                        values.len(),
                        values[next]
                    ),
                });
            }
        }
    }

    /// Sets each label of one heading. A layout in machines and one in sizes say the same thing
    /// twice: the later heading's stands.
    fn set_all(&mut self, labels: Vec<(String, Vec<String>)>, line: usize, notes: &mut Vec<HeadingNote>) {
        for (key, values) in labels {
            let replaced = superseded_by(&key);
            self.scopes.retain(|scope| !replaced.contains(&scope.key.as_str()));
            self.set(key, values, line, notes);
        }
    }

    /// Sets the deployment a caption names ([`free`]), if it names a model: a title such as
    /// `# Runs over 4 and 8 nodes` describes the file, not the blocks below it. One that names
    /// a model and how it is spread states a whole deployment, as a `vllm serve` line does: the
    /// parallel sizes and layouts of earlier headings do not carry over to it.
    fn set_caption(&mut self, labels: Vec<(String, Vec<String>)>, line: usize, notes: &mut Vec<HeadingNote>) {
        const PARALLEL: [&str; 7] = ["tp", "pp", "dp", "ep", "tp-nodes", "pp-nodes", "nodes"];
        let has = |key: &str| labels.iter().any(|(k, _)| k == key);
        if !has("model") {
            return;
        }
        if PARALLEL.iter().any(|k| has(k)) {
            self.scopes.retain(|scope| !PARALLEL.contains(&scope.key.as_str()));
        }
        self.set_all(labels, line, notes);
    }

    fn set(&mut self, key: String, mut values: Vec<String>, line: usize, notes: &mut Vec<HeadingNote>) {
        let value = if values.len() >= 2 {
            ScopeValue::List { values, next: 0, line }
        } else {
            ScopeValue::One(values.pop().unwrap_or_default())
        };
        match self.scopes.iter_mut().find(|s| s.key == key) {
            Some(scope) => {
                if let ScopeValue::List { values, next, line: at } = &scope.value {
                    notes.push(HeadingNote {
                        line: *at,
                        message: format!(
                            "the list `{key}` has {} values but only {next} result blocks came before line {line} set `{key}` again; the values from {:?} on were not used",
                            values.len(),
                            values[*next]
                        ),
                    });
                }
                scope.value = value;
            }
            None => self.scopes.push(Scope { key, value }),
        }
    }
}

/// Prefixes of lines vLLM prints around a result.
const VLLM_LINES: &[&str] = &[
    "Namespace(",
    "Model not specified",
    "First model name:",
    "Starting initial single prompt test run",
    "Skipping endpoint ready check",
    "Waiting for endpoint",
    "Endpoint is not ready",
    "Initial test run completed",
    "Warming up with",
    "Warmup run completed",
    "Starting main benchmark run",
    "Starting profiler",
    "Profiler started",
    "Stopping profiler",
    "Profiler stopped",
    "Traffic request rate:",
    "Traffic ramp-up strategy:",
    "Will increase RPS",
    "Burstiness factor:",
    "Maximum request concurrency:",
    "Self timing is set",
    "Probe request rate:",
    "Failed requests during benchmark run detected",
    "tip: install termplotlib",
];

const LOG_LEVELS: &[&str] = &["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"];

/// Reads one heading line (see the module docs for the rules).
pub fn classify(line: &str) -> Heading {
    let line = line.trim();
    if is_vllm_line(line) {
        return Heading::Ignored;
    }
    if let Some(title) = line.strip_prefix('#') {
        let title = title.trim_start_matches('#').trim();
        if title.is_empty() {
            return Heading::Ignored;
        }
        return Heading::Labels(vec![("section".into(), vec![title.to_string()])]);
    }
    if let Some(labels) = serve_command(line) {
        return Heading::Labels(labels);
    }
    if let Some(labels) = bench_labels(line) {
        return Heading::Labels(labels);
    }
    if let Some((key, nodes)) = nodes_layout(line) {
        return Heading::Labels(vec![(key.to_string(), vec![nodes.to_string()])]);
    }
    let words: Vec<&str> = line.split([',', ' ', '\t']).filter(|w| !w.is_empty()).collect();
    if words.len() >= 2 {
        let pairs: Option<Vec<_>> = words.iter().map(|w| key_value(w).filter(|_| w.contains('='))).collect();
        if let Some(pairs) = pairs {
            return Heading::Labels(pairs);
        }
    }
    // `model: org/name, tp=8, nodes=8`: one label per comma-separated `key: value` or
    // `key=value`, each value one word.
    let parts: Vec<&str> = line.split(',').map(str::trim).collect();
    if parts.len() >= 2 {
        let one_word = |(k, v): (String, Vec<String>)| {
            (v.len() == 1 && !v[0].contains(|c: char| c.is_whitespace() || c == '=' || c == ':')).then_some((k, v))
        };
        let pairs: Option<Vec<_>> = parts.iter().map(|p| key_value(p).and_then(one_word)).collect();
        if let Some(pairs) = pairs {
            return Heading::Labels(pairs);
        }
    }
    if let Some((key, values)) = key_value(line) {
        // `model: GLM-4.6-FP8 (TP=8, 8 nodes)`: a caption after the key.
        if let [value] = values.as_slice()
            && key == "model"
            && value.contains(char::is_whitespace)
        {
            let named = free::deployment(value);
            if named.iter().any(|(k, _)| k == "model") {
                return Heading::Labels(named);
            }
        }
        return Heading::Labels(vec![(key, values)]);
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    if let Some(&last) = words.last()
        && words.len() <= 2
        && is_model_id(last)
    {
        return Heading::Labels(vec![("model".into(), vec![last.to_string()])]);
    }
    // A model id with its layout: `org/name (4 nodes, tp)`, `org/name - TP over 8 nodes`.
    if let Some((&model, rest)) = words.split_first()
        && is_model_id(model)
        && let Some((key, nodes)) = nodes_layout(&rest.join(" "))
    {
        return Heading::Labels(vec![
            ("model".into(), vec![model.to_string()]),
            (key.to_string(), vec![nodes.to_string()]),
        ]);
    }
    Heading::Text(line.to_string())
}

/// Whether a `vllm serve` line can set the label `key` (and so resets it): its parallel sizes
/// replace a layout over machines given before it too.
fn set_by_serve(key: &str) -> bool {
    ["model", "tp", "pp", "dp", "ep", "tp-nodes", "pp-nodes", "nodes"].contains(&key)
        || SERVE_OPTION_LABELS.contains(&key)
}

/// The labels a heading setting `key` replaces besides `key` itself: a layout over machines
/// replaces the sizes and the other layout, and a size replaces the layouts.
fn superseded_by(key: &str) -> &'static [&'static str] {
    match key {
        "tp-nodes" => &["tp", "pp", "nodes", "pp-nodes"],
        "pp-nodes" => &["tp", "pp", "nodes", "tp-nodes"],
        "tp" | "pp" | "nodes" => &["tp-nodes", "pp-nodes"],
        _ => &[],
    }
}

fn is_vllm_line(line: &str) -> bool {
    if VLLM_LINES.iter().any(|p| line.starts_with(p)) || line.contains("%|") {
        return true;
    }
    if let Some(rest) = line.strip_prefix("Error ")
        && let Some((n, _)) = rest.split_once(':')
        && !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
    {
        return true;
    }
    LOG_LEVELS
        .iter()
        .any(|level| line.strip_prefix(level).is_some_and(|rest| rest.starts_with(' ') || rest.starts_with(':')))
}

/// `key: value`, `key:value` or `key=value` with a one-word key; the value split into a list
/// when it is two or more single-word items.
fn key_value(line: &str) -> Option<(String, Vec<String>)> {
    let at = line.find([':', '='])?;
    let (key, value) = (line[..at].trim_end(), line[at + 1..].trim());
    let key_ok = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if !key_ok || value.is_empty() || value.starts_with("//") {
        return None;
    }
    let key =
        NORMALISED_KEYS.iter().find(|k| key.eq_ignore_ascii_case(k)).map_or_else(|| key.to_string(), |k| k.to_string());
    let items: Vec<&str> = value.split(',').map(str::trim).collect();
    let list = items.len() >= 2
        && items.iter().all(|i| !i.is_empty() && !i.contains(|c: char| c.is_whitespace() || c == '=' || c == ':'));
    let values = if list { items.into_iter().map(str::to_string).collect() } else { vec![value.to_string()] };
    Some((key, values))
}

/// Keys written in any case that are read in lower case (the ones the simulator reads).
const NORMALISED_KEYS: [&str; 12] =
    ["model", "tp", "pp", "dp", "ep", "nodes", "hw", "hardware", "gpu", "vllm", "version", "image"];

/// A parallel layout across machines (`4 nodes (tp)`, `TP over 8 nodes`, `2-node pp`,
/// `4 nodes (tp=4)`): the label key (`tp-nodes` or `pp-nodes`) and the count. Every word must
/// be one of the count (said once, or twice alike),
/// `node`/`nodes`, the layout (`tp`, `pp`, or `tensor`/`pipeline` with `parallel`) and the
/// fillers `over`, `across`, `on`; anything else makes the line something else.
fn nodes_layout(line: &str) -> Option<(&'static str, u32)> {
    let lower = line.to_ascii_lowercase().replace(['(', ')', '[', ']', ',', '-', ':', '='], " ");
    let (mut found, mut node, mut key) = (None, false, None);
    for word in lower.split_whitespace() {
        match word {
            "node" | "nodes" if !node => node = true,
            "tp" | "tensor" if key.is_none() => key = Some("tp-nodes"),
            "pp" | "pipeline" if key.is_none() => key = Some("pp-nodes"),
            "parallel" | "over" | "across" | "on" => {}
            n if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                // The count may be said twice (`4 nodes (tp=4)`), never two counts.
                let n = count(n)?;
                if found.is_some_and(|c| c != n) {
                    return None;
                }
                found = Some(n);
            }
            _ => return None,
        }
    }
    Some((key?, found.filter(|_| node)?))
}

/// A whole number of at least 1 (a count of machines or GPUs).
fn count(word: &str) -> Option<u32> {
    word.parse::<u32>().ok().filter(|n| *n >= 1 && word.bytes().all(|b| b.is_ascii_digit()))
}

/// A Hugging Face style model id: `org/name`, each part starting with a letter or digit,
/// the name holding at least one letter.
fn is_model_id(word: &str) -> bool {
    let Some((org, name)) = word.split_once('/') else {
        return false;
    };
    let part_ok = |p: &str| {
        p.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    };
    part_ok(org) && part_ok(name) && name.chars().any(|c| c.is_ascii_alphabetic())
}

mod command;
mod free;
#[cfg(test)]
mod tests;
