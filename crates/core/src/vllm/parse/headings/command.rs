//! What a pasted command line says: a `vllm serve` line's model, parallel sizes and the
//! serving flags the simulator has options for, and a benchmark command's dataset and backend.

/// The labels of a `vllm serve` line that name a serving option of the deployment, under the
/// simulator's option names (its parallel sizes and model aside). `quick-reduce` comes from the
/// environment assignment `VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=LEVEL` before the command,
/// `fuse-allreduce-rms`, `cudagraph-mode` and the CUDA graph sizes from the compilation config
/// (see `compilation_setting`) or `--cuda-graph-sizes`, `speculative-config` from the JSON
/// of `--speculative-config`, and `limit-mm-per-prompt` from that flag's JSON or its dotted
/// modalities (`--limit-mm-per-prompt.image 0`), written `image=0,video=0` ([`mm_limits`]).
pub const SERVE_OPTION_LABELS: [&str; 19] = [
    "max-num-batched-tokens",
    "max-num-seqs",
    "max-model-len",
    "kv-cache-dtype",
    "gpu-memory-utilization",
    "enforce-eager",
    "cudagraph-mode",
    "cudagraph-capture-sizes",
    "max-cudagraph-capture-size",
    "async-scheduling",
    "enable-prefix-caching",
    "quick-reduce",
    "fuse-allreduce-rms",
    "distributed-executor-backend",
    "nnodes",
    "api-server-count",
    "speculative-config",
    "limit-mm-per-prompt",
    "language-model-only",
];

/// Labels whose value is read whole from the line, not as the word after the flag.
const WHOLE: [&str; 2] = ["speculative-config", "limit-mm-per-prompt"];

/// The environment variables before a `vllm serve` command that set a serving option: (name,
/// label); the value is the label's, lower-cased.
const SERVE_ENV: [(&str, &str); 1] = [("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "quick-reduce")];

/// Switches of `vllm serve`: (flag, label, value). Every other `--NAME` flag whose NAME is one
/// of [`SERVE_OPTION_LABELS`] takes a value, read as the label NAME.
const SWITCHES: [(&str, &str, &str); 8] = [
    ("--enable-expert-parallel", "ep", "true"),
    ("--enforce-eager", "enforce-eager", "true"),
    ("--async-scheduling", "async-scheduling", "true"),
    ("--no-async-scheduling", "async-scheduling", "false"),
    ("--enable-prefix-caching", "enable-prefix-caching", "true"),
    ("--no-enable-prefix-caching", "enable-prefix-caching", "false"),
    ("-ep", "ep", "true"),
    ("--language-model-only", "language-model-only", "true"),
];

/// vLLM's parallel sizes, by their long flags' names, and their labels.
const PARALLEL_SIZES: [(&str, &str); 3] =
    [("tensor-parallel-size", "tp"), ("pipeline-parallel-size", "pp"), ("data-parallel-size", "dp")];

/// The label a `vllm serve` parameter given as a key is read as (a parameter a sweep adds to a
/// result, `--serve-params`' `max_num_seqs`; a field of a table row), in Python's spelling or
/// the flag's: a serving option by its flag's name (`max-num-seqs`), a parallel size by its
/// short name (`tensor_parallel_size` as `tp`), `enable_expert_parallel` as `ep`; any other key
/// as it is.
pub fn option_label(key: &str) -> String {
    let flag = key.replace('_', "-");
    if let Some((_, label)) = PARALLEL_SIZES.iter().find(|(name, _)| *name == flag) {
        return label.to_string();
    }
    if flag == "enable-expert-parallel" {
        return "ep".to_string();
    }
    if SERVE_OPTION_LABELS.contains(&flag.as_str()) { flag } else { key.to_string() }
}

/// The labels of a `vllm serve MODEL [flags]` line: the model, the parallel sizes and the
/// serving flags the simulator knows (see the module docs); none for a line of placeholders,
/// which still states a deployment of vLLM's defaults.
pub(super) fn serve_command(line: &str) -> Option<Vec<(String, Vec<String>)>> {
    let words: Vec<&str> = line.split_whitespace().map(|w| w.trim_matches(QUOTES)).filter(|w| !w.is_empty()).collect();
    let at = words.windows(2).position(|w| w == ["vllm", "serve"])?;
    let rest = &words[at + 2..];
    let mut labels = Vec::new();
    for (name, value) in words[..at].iter().filter_map(|w| w.split_once('=')) {
        if let Some((_, key)) = SERVE_ENV.iter().find(|(var, _)| *var == name)
            && !value.is_empty()
        {
            labels.push((key.to_string(), vec![value.to_ascii_lowercase()]));
        }
    }
    if let Some(model) = rest.first().filter(|m| !m.starts_with('-') && !is_placeholder(m)) {
        labels.push(("model".to_string(), vec![model.to_string()]));
    }
    let args = rest.join(" ");
    if let Some(on) = fused_norm_pass(&args) {
        labels.push(("fuse-allreduce-rms".to_string(), vec![on.to_string()]));
    }
    if let Some(mode) = cudagraph_mode(&args) {
        labels.push(("cudagraph-mode".to_string(), vec![mode]));
    }
    labels.extend(graph_sizes(rest, &args));
    if let Some(config) = json_after(line, "speculative-config") {
        labels.push(("speculative-config".to_string(), vec![config]));
    }
    if let Some(limits) = serve_mm_limits(line, rest) {
        labels.push(("limit-mm-per-prompt".to_string(), vec![limits]));
    }
    for (i, word) in rest.iter().enumerate() {
        let (flag, inline) = match word.split_once('=') {
            Some((f, v)) => (f, Some(v)),
            None => (*word, None),
        };
        if let Some((_, key, value)) = SWITCHES.iter().find(|(f, _, _)| *f == flag) {
            labels.push((key.to_string(), vec![value.to_string()]));
            continue;
        }
        let value = inline.or_else(|| rest.get(i + 1).copied());
        // Their JSON is read whole from the line (`json_after`), not word by word.
        if let Some(key) = flag.strip_prefix("--").filter(|k| SERVE_OPTION_LABELS.contains(k) && !WHOLE.contains(k)) {
            if let Some(v) = value.filter(|v| !v.is_empty() && !v.starts_with('-')) {
                labels.push((key.to_string(), vec![v.to_string()]));
            }
            continue;
        }
        let long = flag.strip_prefix("--").and_then(|n| PARALLEL_SIZES.iter().find(|(name, _)| *name == n));
        let key = match (flag, long) {
            (_, Some((_, label))) => *label,
            ("-tp", _) => "tp",
            ("-pp", _) => "pp",
            ("-dp", _) => "dp",
            _ => continue,
        };
        if let Some(value) = value.filter(|v| is_whole(v)) {
            labels.push((key.to_string(), vec![value.to_string()]));
        }
    }
    Some(labels)
}

/// The JSON object of the flag `--NAME` (or `--NAME` with underscores, `=` or a space, quoted
/// or not), as written: its braces matched, so the spaces inside do not split it.
fn json_after(line: &str, name: &str) -> Option<String> {
    let flags = [format!("--{name}"), format!("--{}", name.replace('-', "_"))];
    let at = flags.iter().find_map(|f| {
        line.match_indices(f.as_str()).map(|(i, _)| i + f.len()).find(|&end| !line[end..].starts_with(['.', '-', '_']))
    })?;
    let rest = &line[at..];
    let open = rest.find('{')?;
    // Only a space, `=` or quotes between the flag and its object.
    if !rest[..open].chars().all(|c| c.is_whitespace() || c == '=' || QUOTES.contains(&c)) {
        return None;
    }
    let mut depth = 0;
    for (i, c) in rest[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(rest[open..=open + i].to_string());
                }
            }
            _ => {}
        }
    }
    None
}

/// The items of each modality a `vllm serve` line allows a prompt, as `image=0,video=0`: from
/// the JSON of `--limit-mm-per-prompt` and from its dotted flags (`--limit-mm-per-prompt.video 0`
/// or `=0`), the dotted ones last; `None` where the line gives no limit.
fn serve_mm_limits(line: &str, rest: &[&str]) -> Option<String> {
    let mut limits = json_after(line, "limit-mm-per-prompt").and_then(|json| mm_limits(&json)).unwrap_or_default();
    for (i, word) in rest.iter().enumerate() {
        let (flag, inline) = word.split_once('=').map_or((*word, None), |(f, v)| (f, Some(v)));
        let Some(modality) = flag.replace('_', "-").strip_prefix("--limit-mm-per-prompt.").map(str::to_string) else {
            continue;
        };
        let value = inline.or_else(|| rest.get(i + 1).copied()).and_then(|v| v.parse().ok());
        if let Some(count) = value.filter(|_| !modality.is_empty()) {
            limits.retain(|(m, _)| *m != modality);
            limits.push((modality, count));
        }
    }
    (!limits.is_empty()).then(|| limits.iter().map(|(m, n)| format!("{m}={n}")).collect::<Vec<_>>().join(","))
}

/// The items of each modality vLLM's `--limit-mm-per-prompt` allows a prompt: its JSON
/// (`{"image": 0, "video": 0}`, or a modality's options with their `count`:
/// `{"image": {"count": 2, "width": 512}}`) or the list `image=0,video=0`, in the order given,
/// modalities lower-cased. `None` for anything else, or no modality.
pub fn mm_limits(text: &str) -> Option<Vec<(String, u32)>> {
    fn skip(s: &str) -> &str {
        s.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ':' | '=') || QUOTES.contains(&c))
    }
    let number = |s: &str| {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse::<u32>().ok().map(|n| (n, end))
    };
    let mut limits = Vec::new();
    let mut rest = text.trim().strip_prefix('{').unwrap_or(text.trim());
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',' || QUOTES.contains(&c));
        if rest.is_empty() || rest == "}" {
            break;
        }
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))?;
        let modality = rest[..end].to_ascii_lowercase();
        rest = skip(&rest[end..]);
        let count = if let Some(options) = rest.strip_prefix('{') {
            let (inner, after) = options.split_once('}')?;
            rest = after;
            number(skip(&inner[inner.find("count")? + "count".len()..]))?.0
        } else {
            let (n, used) = number(rest)?;
            rest = &rest[used..];
            n
        };
        if modality.is_empty() {
            return None;
        }
        limits.push((modality, count));
    }
    (!limits.is_empty()).then_some(limits)
}

/// The dataset and the backend a benchmark command names (`vllm bench serve ... --dataset-name
/// sharegpt --backend openai-chat`, or the older `benchmark_serving.py` script), lower-cased,
/// as `dataset` and `backend` labels, and the tokens every prompt shares (`--random-prefix-len`,
/// `--sonnet-prefix-len`; not the prefix-repetition dataset's, one of several prefixes a prompt)
/// as `prefix-len`; `None` for other lines and for a command that leaves them all to their
/// defaults.
pub(super) fn bench_labels(line: &str) -> Option<Vec<(String, Vec<String>)>> {
    let words: Vec<&str> = line.split_whitespace().map(|w| w.trim_matches(QUOTES)).collect();
    let bench = words.windows(3).any(|w| w == ["vllm", "bench", "serve"])
        || words.iter().any(|w| w.ends_with("benchmark_serving.py"));
    if !bench {
        return None;
    }
    let flag = |name: &str| {
        words.iter().enumerate().find_map(|(i, w)| {
            let value = match w.split_once('=') {
                Some((k, v)) if k == name => Some(v),
                _ if *w == name => words.get(i + 1).copied(),
                _ => None,
            }?;
            (!value.is_empty() && !value.starts_with('-')).then(|| value.to_ascii_lowercase())
        })
    };
    let labels: Vec<(String, Vec<String>)> = [
        ("dataset", "--dataset-name"),
        ("backend", "--backend"),
        ("prefix-len", "--random-prefix-len"),
        ("prefix-len", "--sonnet-prefix-len"),
    ]
    .into_iter()
    .filter_map(|(key, name)| Some((key.to_string(), vec![flag(name)?])))
    .collect();
    (!labels.is_empty()).then_some(labels)
}

/// Whether a `vllm serve` command's compilation config turns FlashInfer's fused all-reduce and
/// RMSNorm on or off, under its name or vLLM 0.10's (`enable_fi_allreduce_fusion`). `None` where
/// the command does not say.
fn fused_norm_pass(args: &str) -> Option<bool> {
    ["fuse_allreduce_rms", "enable_fi_allreduce_fusion"].iter().find_map(|name| {
        match compilation_setting(args, name)?.to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    })
}

/// The CUDA graph mode a `vllm serve` command's compilation config asks for, lower-cased
/// (`piecewise`, `full_and_piecewise`, ...); vLLM 0.9 and 0.10's `full_cuda_graph: true` is
/// `full`. `None` where the command does not say.
fn cudagraph_mode(args: &str) -> Option<String> {
    let mode = compilation_setting(args, "cudagraph_mode").filter(|m| !m.is_empty()).map(str::to_ascii_lowercase);
    let legacy = || compilation_setting(args, "full_cuda_graph").filter(|v| v.eq_ignore_ascii_case("true"));
    mode.or_else(|| legacy().map(|_| "full".to_string()))
}

/// The CUDA graph sizes a `vllm serve` command gives, as labels: the compilation config's
/// `cudagraph_capture_sizes` list (`"cudagraph_capture_sizes": [1, 2, 4]`, or dotted,
/// `-cc.cudagraph_capture_sizes=[1,2,4]`) and `max_cudagraph_capture_size`, or vLLM 0.10 and
/// 0.11's `--cuda-graph-sizes 1 2 4` (one number: the largest of vLLM's own list).
/// `--max-cudagraph-capture-size N` is read as the flag of that name.
fn graph_sizes(rest: &[&str], args: &str) -> Vec<(String, Vec<String>)> {
    let mut sizes: Vec<String> = match rest.iter().position(|w| *w == "--cuda-graph-sizes") {
        Some(at) => rest[at + 1..].iter().take_while(|w| is_whole(w)).map(|w| w.to_string()).collect(),
        None => Vec::new(),
    };
    let mut largest =
        compilation_setting(args, "max_cudagraph_capture_size").filter(|v| is_whole(v)).map(str::to_string);
    if sizes.len() == 1 {
        largest = largest.or(sizes.pop());
    }
    if let Some(at) = args.find("cudagraph_capture_sizes").map(|i| i + "cudagraph_capture_sizes".len()) {
        let list = args[at..].trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ':' | '='));
        if let Some(inner) = list.strip_prefix('[').and_then(|l| l.split_once(']')).map(|(inner, _)| inner) {
            let numbers: Vec<&str> = inner.split(',').map(str::trim).collect();
            if numbers.iter().all(|n| is_whole(n)) {
                sizes = numbers.iter().map(|n| n.to_string()).collect();
            }
        }
    }
    let mut labels = Vec::new();
    if !sizes.is_empty() {
        labels.push(("cudagraph-capture-sizes".to_string(), vec![sizes.join(",")]));
    }
    if let Some(n) = largest {
        labels.push(("max-cudagraph-capture-size".to_string(), vec![n]));
    }
    labels
}

/// The value a compilation-config setting `name` is given in any of vLLM's spellings: JSON
/// (`-O '{"cudagraph_mode": "FULL"}'`, `--compilation-config '...'`) or dotted
/// (`-O.cudagraph_mode=FULL`, `--compilation-config.pass_config.fuse_allreduce_rms=true`): the
/// word after the name, its quotes, colon or equals sign skipped.
fn compilation_setting<'a>(args: &'a str, name: &str) -> Option<&'a str> {
    let at = args.find(name)? + name.len();
    let value = args[at..].trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ':' | '='));
    let end = value.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(value.len());
    Some(&value[..end])
}

/// Whether a word is a whole number (digits only).
fn is_whole(word: &str) -> bool {
    !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit())
}

/// Quotes a pasted command may be wrapped in, straight or typographic.
const QUOTES: &[char] = &['"', '\'', '`', '\u{201c}', '\u{201d}', '\u{2018}', '\u{2019}'];

/// A stand-in for a model in a command template: one capital letter (`M`), a shell variable
/// (`$MODEL`, `${MODEL}`) or a bracketed name (`<model>`, `{model}`).
fn is_placeholder(word: &str) -> bool {
    (word.len() == 1 && word.bytes().all(|b| b.is_ascii_uppercase())) || word.starts_with(['$', '<', '{'])
}
