//! vLLM's start-up log, read for what it says of the deployment and of one GPU's memory: the
//! settings the server ran with (its `non-default args` and the engine's config line), the
//! weights loaded, the KV cache it kept and the figures its memory profiling printed.
//!
//! A server logs each figure once per worker; the first is kept (rank 0 comes first, and the
//! ranks of one tensor-parallel group plan alike). Lines carry any prefix (a timestamp, a process
//! name, a container's): each figure is found by its own words, wherever it stands in the line.

use serde::Serialize;

/// What a vLLM start-up log says. Every figure is `None` where the log does not print it (its
/// release prints other lines, or the server stopped before it got there).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StartupLog {
    /// The release, as printed (`0.11.0`).
    pub release: Option<String>,
    /// The model served, as the server was given it (a Hugging Face id or a path).
    pub model: Option<String>,
    /// The serving options the log states, in servebench's option names (`tp`, `pp`, `dp`,
    /// `max-model-len`, `gpu-memory-utilization`, ...): the engine's effective values first,
    /// then what the command line set that the engine's config line does not repeat, then the
    /// chunk size, the utilization and the CUDA graph memory set aside as other lines print them.
    pub settings: Vec<(String, String)>,
    /// The command line's options a plan does not read (`quantization=modelopt`,
    /// `speculative_config`, `kv_transfer_config`, ...), as `name=value` or, for a nested
    /// value, the name alone; the server's interface (host, port, parsers, names) left out.
    pub unread: Vec<String>,
    /// "Model loading took X GiB": one GPU's weights.
    pub weights_gib: Option<f64>,
    /// "Available KV cache memory: X GiB".
    pub kv_cache_gib: Option<f64>,
    /// "GPU KV cache size: N tokens".
    pub kv_cache_tokens: Option<u64>,
    /// "Maximum concurrency for N tokens per request: X": (N, X).
    pub max_concurrency: Option<(u64, f64)>,
    /// "Estimated CUDA graph memory: X GiB total" (vLLM 0.19 on, counted against the KV cache
    /// by default from 0.21).
    pub graph_estimate_gib: Option<f64>,
    /// Whether the server set that estimate aside from the KV cache ("CUDA graph memory
    /// profiling is enabled"); releases before 0.21 print the estimate without it.
    pub graph_counted: bool,
    /// "Free memory on device (free/total GiB) on startup": the device's total.
    pub device_gib: Option<f64>,
    /// "Actual usage is X GiB for consumed memory (weights + non-torch), Y GiB for peak
    /// activation, and Z GiB for CUDAGraph memory" (newer releases).
    pub usage: Option<ProfiledUsage>,
}

/// The split of one GPU's memory a newer vLLM prints after profiling.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProfiledUsage {
    /// Weights and memory outside PyTorch's allocator (the CUDA context, communication buffers).
    pub consumed_gib: f64,
    /// The profiling run's peak of activations.
    pub peak_activation_gib: f64,
    /// CUDA graphs' memory.
    pub graph_gib: f64,
}

/// The engine's config line's fields that set a memory plan, with servebench's names.
const ENGINE_FIELDS: [(&str, &str); 6] = [
    ("max_seq_len", "max-model-len"),
    ("tensor_parallel_size", "tp"),
    ("pipeline_parallel_size", "pp"),
    ("data_parallel_size", "dp"),
    ("kv_cache_dtype", "kv-cache-dtype"),
    ("enforce_eager", "enforce-eager"),
];

/// The command line's options (`non-default args`) that set a memory plan, with servebench's
/// names; others (the API server's, the tokenizer's) are not read.
const ARG_FIELDS: [(&str, &str); 13] = [
    ("tensor_parallel_size", "tp"),
    ("pipeline_parallel_size", "pp"),
    ("data_parallel_size", "dp"),
    ("max_model_len", "max-model-len"),
    ("gpu_memory_utilization", "gpu-memory-utilization"),
    ("kv_cache_dtype", "kv-cache-dtype"),
    ("max_num_seqs", "max-num-seqs"),
    ("max_num_batched_tokens", "max-num-batched-tokens"),
    ("enable_expert_parallel", "enable-expert-parallel"),
    ("enforce_eager", "enforce-eager"),
    ("block_size", "block-size"),
    ("enable_prefix_caching", "enable-prefix-caching"),
    ("language_model_only", "language-model-only"),
];

impl StartupLog {
    /// Reads a start-up log's text.
    pub fn parse(text: &str) -> StartupLog {
        let mut log = StartupLog::default();
        let mut engine: Vec<(String, String)> = Vec::new();
        let mut args: Vec<(String, String)> = Vec::new();
        let mut arg_model = None;
        let mut batched_tokens = None;
        let mut utilization = None;
        for line in text.lines() {
            if log.release.is_none() {
                log.release = release_in(line);
            }
            if engine.is_empty()
                && let Some(config) = after(line, "with config: ")
            {
                set_once(&mut log.model, || config_field(config, "model"));
                for (field, key) in ENGINE_FIELDS {
                    if let Some(v) = config_field(config, field).and_then(|v| option_value(&v)) {
                        engine.push((key.to_string(), v));
                    }
                }
            }
            if args.is_empty()
                && let Some(dict) = after(line, "non-default args: ").and_then(python_dict)
            {
                for (name, raw) in dict {
                    let planned = ARG_FIELDS.iter().find(|(field, _)| *field == name);
                    let value = option_value(&raw);
                    match (value, planned) {
                        (None, _) if raw == "None" => {}
                        (Some(v), _) if name == "model" || (name == "model_tag" && arg_model.is_none()) => {
                            arg_model = Some(v);
                        }
                        (Some(v), Some((_, key))) => args.push((key.to_string(), v)),
                        (value, _) if !interface_only(&name, value.as_deref()) => {
                            log.unread.push(value.map_or(name.clone(), |v| format!("{name}={v}")));
                        }
                        _ => {}
                    }
                }
            }
            set_once(&mut batched_tokens, || {
                amount_after(line, "Chunked prefill is enabled with max_num_batched_tokens=")
            });
            set_once(&mut log.weights_gib, || {
                amount_after(line, "Model loading took ").or_else(|| amount_after(line, "Loading model weights took "))
            });
            // vLLM prints a negative figure here before it stops for want of memory.
            set_once(&mut log.kv_cache_gib, || number_after(line, "Available KV cache memory: "));
            set_once(&mut log.kv_cache_tokens, || amount_after(line, "GPU KV cache size: ").map(|v| v as u64));
            set_once(&mut log.max_concurrency, || {
                let tokens = amount_after(line, "Maximum concurrency for ").filter(|t| *t >= 1.0)?;
                let times = amount_after(line, "tokens per request: ")?;
                Some((tokens as u64, times))
            });
            set_once(&mut log.graph_estimate_gib, || amount_after(line, "Estimated CUDA graph memory: "));
            log.graph_counted |= line.contains("CUDA graph memory profiling is enabled");
            set_once(&mut log.device_gib, || {
                let free = after(line, "Free memory on device ")?;
                let total = &free[free.find('/')? + 1..];
                amount_after(total, "")
            });
            set_once(&mut utilization, || {
                amount_after(line, "Desired GPU memory utilization is (")
                    .or_else(|| amount_after(line, "desired GPU memory utilization ("))
            });
            set_once(&mut log.usage, || {
                Some(ProfiledUsage {
                    consumed_gib: amount_after(line, "Actual usage is ")?,
                    peak_activation_gib: amount_after(line, "for consumed memory (weights + non-torch), ")?,
                    graph_gib: amount_after(line, "for peak activation, and ")?,
                })
            });
        }
        log.model = log.model.or(arg_model);
        let mut settings = engine;
        let mut add = |key: &str, value: String| {
            if !settings.iter().any(|(k, _)| k == key) {
                settings.push((key.to_string(), value));
            }
        };
        for (key, value) in args {
            add(&key, value);
        }
        if let Some(n) = batched_tokens {
            add("max-num-batched-tokens", format!("{}", n as u64));
        }
        if let Some(u) = utilization {
            add("gpu-memory-utilization", format!("{u}"));
        }
        // The graph estimate the server set aside: not something a plan predicts, so a setting.
        if let Some(g) = log.graph_estimate_gib.filter(|_| log.graph_counted) {
            add("cudagraph-memory-gib", format!("{g}"));
        }
        log.settings = settings;
        log
    }

    /// Whether the log prints any of the memory figures a plan is held against.
    pub fn has_memory_figures(&self) -> bool {
        self.weights_gib.is_some() || self.kv_cache_gib.is_some() || self.kv_cache_tokens.is_some()
    }

    /// The value of a setting the log states, by servebench's option name.
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.settings.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Options of the API server's interface that change nothing a GPU holds (and the model's
/// name, read apart); a `dtype` of 16 bits is the plan's own.
fn interface_only(name: &str, value: Option<&str>) -> bool {
    const INTERFACE: [&str; 20] = [
        "model",
        "model_tag",
        "host",
        "port",
        "api_key",
        "served_model_name",
        "uvicorn_log_level",
        "disable_log_requests",
        "enable_log_requests",
        "disable_log_stats",
        "enable_auto_tool_choice",
        "tool_call_parser",
        "reasoning_parser",
        "chat_template",
        "chat_template_content_format",
        "trust_remote_code",
        "download_dir",
        "tokenizer",
        "hf_config_path",
        "disable_uvicorn_access_log",
    ];
    INTERFACE.contains(&name)
        || (name == "dtype" && value.is_some_and(|v| matches!(v, "auto" | "bfloat16" | "float16" | "half")))
}

/// `1234567` as `1,234,567`, as vLLM's log writes token counts.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn set_once<T>(slot: &mut Option<T>, read: impl FnOnce() -> Option<T>) {
    if slot.is_none() {
        *slot = read();
    }
}

/// The text after the first `words` in `line`.
fn after<'a>(line: &'a str, words: &str) -> Option<&'a str> {
    line.find(words).map(|i| &line[i + words.len()..])
}

/// The number right after `words` (`1,001,650` and `-0.12` read as written).
fn number_after(line: &str, words: &str) -> Option<f64> {
    let rest = after(line, words)?.trim_start();
    let end = rest.find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | ',' | '-'))).unwrap_or(rest.len());
    let digits: String = rest[..end].trim_end_matches(['.', ',']).chars().filter(|&c| c != ',').collect();
    digits.parse().ok().filter(|v: &f64| v.is_finite())
}

/// A figure that cannot be below zero (a size, a count, a share): a negative one is not read, so
/// the comparison shows no log figure rather than a negative one.
fn amount_after(line: &str, words: &str) -> Option<f64> {
    number_after(line, words).filter(|v| *v >= 0.0)
}

/// The release a line names: vLLM's banner ("vLLM API server version 0.11.0", "version
/// 0.18.0") or the engine's ("Initializing a V1 LLM engine (v0.11.0) with config").
fn release_in(line: &str) -> Option<String> {
    let word = after(line, "LLM engine (v")
        .or_else(|| after(line, "API server version "))
        .or_else(|| after(line, "█  version "))?;
    let end = word.find(|c: char| c.is_whitespace() || c == ')').unwrap_or(word.len());
    let release = &word[..end];
    release.starts_with(|c: char| c.is_ascii_digit()).then(|| release.to_string())
}

/// A field of the engine's config line (`name=value, `), its quotes taken off.
fn config_field(config: &str, name: &str) -> Option<String> {
    let words = format!("{name}=");
    let at = config
        .match_indices(words.as_str())
        .map(|(i, _)| i)
        .find(|&i| i == 0 || config[..i].ends_with([' ', ',', '(']))?;
    let rest = &config[at + words.len()..];
    let value = match rest.chars().next()? {
        q @ ('\'' | '"') => &rest[1..rest[1..].find(q)? + 1],
        _ => rest[..rest.find([',', ')']).unwrap_or(rest.len())].trim(),
    };
    Some(value.to_string())
}

/// A Python literal as an option's value: numbers as written, booleans in lower case, `None`
/// and anything nested left out.
fn option_value(v: &str) -> Option<String> {
    match v {
        "None" | "" => None,
        "True" => Some("true".into()),
        "False" => Some("false".into()),
        _ if v.starts_with(['{', '[', '(']) => None,
        _ => Some(v.trim_matches(['\'', '"']).to_string()),
    }
}

/// The top-level entries of a Python dict's repr (`{'a': 1, 'b': 'x', 'c': {...}}`), as (key,
/// value as written). `None` where `text` does not open a dict or never closes it.
fn python_dict(text: &str) -> Option<Vec<(String, String)>> {
    let body = text.trim_start().strip_prefix('{')?;
    let mut entries = Vec::new();
    let (mut depth, mut quote, mut start) = (0usize, None::<char>, 0usize);
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        if let Some(q) = quote {
            match c {
                '\\' if !escaped => escaped = true,
                _ if c == q && !escaped => quote = None,
                _ => escaped = false,
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' if depth > 0 => depth -= 1,
            ',' | '}' if depth == 0 => {
                if let Some(entry) = dict_entry(&body[start..i]) {
                    entries.push(entry);
                }
                if c == '}' {
                    return Some(entries);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    None
}

fn dict_entry(item: &str) -> Option<(String, String)> {
    let item = item.trim();
    let q = item.chars().next().filter(|c| matches!(c, '\'' | '"'))?;
    let close = item[1..].find(q)? + 1;
    let key = &item[1..close];
    let value = item[close + 1..].trim_start().strip_prefix(':')?.trim();
    Some((key.to_string(), value.to_string()))
}

#[cfg(test)]
#[path = "startup_log_tests.rs"]
mod tests;
