//! Trace replay: recorded arrivals with their input and output lengths, from the BurstGPT CSV
//! (`Timestamp` in seconds, `Request tokens`, `Response tokens`), the Mooncake JSONL
//! (`timestamp` in ms, `input_length`, `output_length`, `hash_ids`) or similar files, or a
//! JSONL read as vLLM's `timed_trace` reads it (its field names, time unit and hash block size
//! given by its flags). Prompts are synthetic with the recorded lengths; requests sharing
//! `hash_ids` share their leading blocks (512 tokens in Mooncake's traces), so prefix caches
//! see the trace's reuse.

use std::path::Path;

use serde_json::Value;
use servebench_core::config::TimedTrace;
use servebench_core::rng::Generator;

use super::fit::{Extender, decode_to_target_len, mismatch_note};
use super::random::{allowed_tokens, words_text};
use super::words::WORDS;
use super::{Dataset, Sample, count_u32, par_map};
use crate::{Tokenizer, WorkloadError};

/// Tokens per `hash_ids` block in Mooncake traces.
pub const MOONCAKE_BLOCK_TOKENS: usize = 512;

/// One recorded request.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRecord {
    /// Seconds after the trace's first request.
    pub timestamp_s: f64,
    pub input_len: u32,
    pub output_len: u32,
    /// Ids of the prompt's blocks (512 tokens in Mooncake); equal ids mean equal content.
    pub hash_ids: Vec<u64>,
}

/// A row's `hash_ids`-like field: absent is no shared block; anything but a list of
/// non-negative integers is an error.
fn hash_ids(v: Option<&Value>, key: &str) -> Result<Vec<u64>, String> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|h| h.as_u64().ok_or_else(|| format!("{key} must be non-negative integers, got {h}")))
            .collect(),
        Some(other) => Err(format!("{key} must be a list of non-negative integers, got {other}")),
    }
}

/// The non-blank lines of a JSONL trace, parsed, with their line numbers.
fn json_lines<'a>(text: &'a str, path: &'a Path) -> impl Iterator<Item = Result<(usize, Value), WorkloadError>> + 'a {
    text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(move |(i, line)| {
        serde_json::from_str(line)
            .map(|v| (i + 1, v))
            .map_err(|e| WorkloadError::parse(path, Some(i + 1), format!("not JSON: {e}")))
    })
}

/// A JSONL trace read with vLLM's `timed_trace` fields: each row's timestamp times the
/// multiplier is its send time in seconds.
fn load_timed(text: &str, path: &Path, t: &TimedTrace) -> Result<Vec<TraceRecord>, WorkloadError> {
    let mut records = Vec::new();
    for row in json_lines(text, path) {
        let (n, v) = row?;
        let err = |m: String| WorkloadError::parse(path, Some(n), m);
        let num = |key: &str, flag: &str| {
            v.get(key).and_then(Value::as_f64).filter(|x| x.is_finite() && *x >= 0.0).ok_or_else(|| {
                err(format!(
                    "no non-negative number {key:?} (the field --timed-trace-label-{flag} names; give the \
                     file's own name with that flag)"
                ))
            })
        };
        records.push(TraceRecord {
            timestamp_s: num(&t.label_timestamp, "timestamp")? * t.sec_multiplier,
            input_len: length(num(&t.label_input_length, "input-length")?, path, n, "input length")?,
            output_len: length(num(&t.label_output_length, "output-length")?, path, n, "output length")?,
            hash_ids: hash_ids(v.get(&t.label_hash_ids), &t.label_hash_ids).map_err(err)?,
        });
    }
    Ok(records)
}

const TS_KEYS: [&str; 4] = ["timestamp", "time", "timestamp_s", "arrival_time"];
const IN_KEYS: [&str; 6] =
    ["request tokens", "input_length", "input_tokens", "prompt_tokens", "input_len", "contexttokens"];
const OUT_KEYS: [&str; 6] =
    ["response tokens", "output_length", "output_tokens", "completion_tokens", "output_len", "generatedtokens"];

fn find(header: &[String], keys: &[&str]) -> Option<usize> {
    keys.iter().find_map(|k| header.iter().position(|h| h.trim().eq_ignore_ascii_case(k)))
}

/// Splits one CSV line (double quotes group fields; `""` is a quote).
fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn parse_num(s: &str, path: &Path, line: usize, what: &str) -> Result<f64, WorkloadError> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| WorkloadError::parse(path, Some(line), format!("{what} {s:?} is not a non-negative number")))
}

/// A recorded length (non-negative) as a token count, whole tokens (a fraction is dropped);
/// an error past `u32::MAX`.
fn length(x: f64, path: &Path, line: usize, what: &str) -> Result<u32, WorkloadError> {
    if x <= f64::from(u32::MAX) {
        Ok(x as u32)
    } else {
        Err(WorkloadError::parse(path, Some(line), format!("{what} {x} is more tokens than a request can hold")))
    }
}

fn load_csv(text: &str, path: &Path) -> Result<Vec<TraceRecord>, WorkloadError> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let Some((_, head)) = lines.next() else {
        return Ok(Vec::new());
    };
    let header = split_csv(head);
    let missing = |what: &str, keys: &[&str]| {
        WorkloadError::parse(
            path,
            Some(1),
            format!(
                "no {what} column; expected one of {keys:?} (BurstGPT: Timestamp, Request tokens, Response tokens)"
            ),
        )
    };
    let ts = find(&header, &TS_KEYS).ok_or_else(|| missing("timestamp", &TS_KEYS))?;
    let inp = find(&header, &IN_KEYS).ok_or_else(|| missing("input length", &IN_KEYS))?;
    let out = find(&header, &OUT_KEYS).ok_or_else(|| missing("output length", &OUT_KEYS))?;
    let mut records = Vec::new();
    for (i, line) in lines {
        let f = split_csv(line);
        let get = |c: usize, what: &str| parse_num(f.get(c).map_or("", String::as_str), path, i + 1, what);
        let len = |c: usize, what: &str| length(get(c, what)?, path, i + 1, what);
        records.push(TraceRecord {
            timestamp_s: get(ts, "timestamp")?,
            input_len: len(inp, "input length")?,
            output_len: len(out, "output length")?,
            hash_ids: Vec::new(),
        });
    }
    Ok(records)
}

fn load_jsonl(text: &str, path: &Path) -> Result<Vec<TraceRecord>, WorkloadError> {
    let mut records = Vec::new();
    for row in json_lines(text, path) {
        let (n, v) = row?;
        let err = |m: String| WorkloadError::parse(path, Some(n), m);
        let num = |keys: &[&str]| keys.iter().find_map(|k| v.get(*k).and_then(Value::as_f64));
        let timestamp_s =
            match (v.get("timestamp").and_then(Value::as_f64), v.get("timestamp_s").and_then(Value::as_f64)) {
                (Some(ms), _) => ms / 1000.0,
                (None, Some(s)) => s,
                _ => return Err(err("no \"timestamp\" (ms, as in Mooncake traces) or \"timestamp_s\"".into())),
            };
        let input =
            num(&IN_KEYS[1..]).ok_or_else(|| err(format!("no input length; expected one of {:?}", &IN_KEYS[1..])))?;
        let output = num(&OUT_KEYS[1..])
            .ok_or_else(|| err(format!("no output length; expected one of {:?}", &OUT_KEYS[1..])))?;
        let hash_ids = hash_ids(v.get("hash_ids"), "hash_ids").map_err(err)?;
        if !(timestamp_s >= 0.0 && input >= 0.0 && output >= 0.0) {
            return Err(err("timestamps and lengths must be non-negative".into()));
        }
        records.push(TraceRecord {
            timestamp_s,
            input_len: length(input, path, n, "input length")?,
            output_len: length(output, path, n, "output length")?,
            hash_ids,
        });
    }
    Ok(records)
}

/// Reads a trace file (with `timed`, JSONL of those fields; otherwise CSV, or JSONL when the
/// name ends in `.jsonl`/`.json` or the first character is `{`), sorted by time, with times
/// relative to the first request. Requests with no output (BurstGPT's failed ones) are dropped
/// and counted in the notes.
pub fn load(path: &Path, timed: Option<&TimedTrace>) -> Result<(Vec<TraceRecord>, Vec<String>), WorkloadError> {
    let text = std::fs::read_to_string(path).map_err(|e| WorkloadError::read(path, e))?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let jsonl =
        ext.eq_ignore_ascii_case("jsonl") || ext.eq_ignore_ascii_case("json") || text.trim_start().starts_with('{');
    let mut records = match timed {
        Some(t) => load_timed(&text, path, t)?,
        None if jsonl => load_jsonl(&text, path)?,
        None => load_csv(&text, path)?,
    };
    let total = records.len();
    records.retain(|r| r.output_len > 0);
    let mut notes = Vec::new();
    if records.len() < total {
        notes.push(format!("Trace: dropped {} requests with no output tokens.", total - records.len()));
    }
    records.sort_by(|a, b| a.timestamp_s.total_cmp(&b.timestamp_s));
    if let Some(t0) = records.first().map(|r| r.timestamp_s) {
        for r in &mut records {
            r.timestamp_s -= t0;
        }
    }
    Ok((records, notes))
}

/// Builds the dataset: the first `num_requests` records (0 = all), with synthetic prompts
/// (`timed` reads the file as vLLM's `timed_trace`).
pub fn sample(
    tok: Option<&Tokenizer>,
    path: &Path,
    num_requests: usize,
    seed: u64,
    timed: Option<&TimedTrace>,
) -> Result<Dataset, WorkloadError> {
    let (mut records, mut notes) = load(path, timed)?;
    if records.is_empty() {
        return Err(WorkloadError::Empty(format!("the trace {} has no request with output tokens", path.display())));
    }
    if num_requests > 0 && records.len() > num_requests {
        records.truncate(num_requests);
    } else if num_requests > records.len() {
        notes.push(format!("Trace: only {} requests available; replaying all of them.", records.len()));
    }
    let block = timed.map_or(MOONCAKE_BLOCK_TOKENS, |t| t.chunk_tokens as usize);
    let samples = prompts(tok, &records, Blocks { tokens: block, seed }, &mut notes)?;
    Ok(Dataset { samples, conversations: Vec::new(), notes, python_random: None, query: None })
}

/// How prompts are drawn: tokens a hash id stands for, and the run's seed.
#[derive(Clone, Copy)]
struct Blocks {
    tokens: usize,
    seed: u64,
}

/// Ids (into `pool_len` choices) for a request: its blocks' ids, then its own for the rest.
fn pick(record: &TraceRecord, index: usize, blocks: Blocks, pool_len: i64) -> (Vec<i64>, Generator) {
    let Blocks { tokens, seed } = blocks;
    let len = record.input_len as usize;
    let mut ids = Vec::with_capacity(len);
    for &h in &record.hash_ids {
        if ids.len() >= len {
            break;
        }
        let take = tokens.min(len - ids.len());
        let mut block = Generator::from_entropy((u128::from(h) << 64) | u128::from(seed));
        ids.extend(block.integers(0, pool_len, take));
    }
    let mut own = Generator::from_entropy((1u128 << 127) | ((index as u128) << 64) | u128::from(seed));
    let rest = len - ids.len();
    ids.extend(own.integers(0, pool_len, rest));
    (ids, own)
}

fn prompts(
    tok: Option<&Tokenizer>,
    records: &[TraceRecord],
    blocks: Blocks,
    notes: &mut Vec<String>,
) -> Result<Vec<Sample>, WorkloadError> {
    let Some(tok) = tok else {
        return Ok(records
            .iter()
            .enumerate()
            .map(|(i, r)| Sample {
                prompt: words_text(&pick(r, i, blocks, WORDS.len() as i64).0),
                prompt_len: r.input_len,
                raw_tokens: None,
                max_tokens: r.output_len,
                timestamp_s: Some(r.timestamp_s),
                images: Vec::new(),
            })
            .collect());
    };
    let allowed = allowed_tokens(tok)?;
    let indexed: Vec<(usize, &TraceRecord)> = records.iter().enumerate().collect();
    let fitted = par_map(&indexed, |&(i, r)| {
        let (idx, mut own) = pick(r, i, blocks, allowed.len() as i64);
        let seq = idx.iter().map(|&j| allowed[j as usize]).collect();
        decode_to_target_len(tok, seq, r.input_len as usize, &mut Extender::Pcg(&mut own))
    });
    let mut mismatch = 0;
    let mut out = Vec::with_capacity(records.len());
    for (f, r) in fitted.into_iter().zip(records) {
        let f = f?;
        mismatch += f.mismatch;
        let len = count_u32(f.tokens.len());
        out.push(Sample {
            prompt_len: len,
            raw_tokens: Some(len),
            prompt: f.prompt,
            max_tokens: r.output_len,
            timestamp_s: Some(r.timestamp_s),
            images: Vec::new(),
        });
    }
    notes.extend(mismatch_note(mismatch));
    Ok(out)
}

#[cfg(test)]
mod tests;
