//! `--dry-run` / `--replay-plan`: a [`Plan`] as JSONL. The first line is a header (API, token
//! counting, notes); then one line per request with its index, intended send time, `max_tokens`,
//! prompt tokens (each input's too, `input_tokens`, for a request of several) and the body
//! embedded verbatim; then one line per conversation. Reading it back
//! gives the same bodies byte for byte.

use std::io::{BufRead, Write};
use std::path::Path;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use servebench_core::config::Api;
use servebench_core::plan::{ConversationPlan, Plan, PlannedRequest, TokenCounting, check_start};
use servebench_core::pyjson;

use crate::WorkloadError;

/// The plan-file format version written in the header.
pub const FORMAT_VERSION: u32 = 1;

/// Room reserved up front for the requests (and conversations) a header announces, at most.
const PREALLOCATE_MAX: usize = 1 << 16;

#[derive(Serialize, Deserialize)]
struct Header {
    servebench_plan: u32,
    api: Api,
    token_counting: TokenCounting,
    notes: Vec<String>,
    requests: usize,
    conversations: usize,
}

#[derive(Deserialize)]
struct RequestLine<'a> {
    index: u32,
    at_s: f64,
    #[serde(default)]
    at_ns: Option<u64>,
    max_tokens: u32,
    prompt_tokens: u32,
    #[serde(default)]
    input_tokens: Vec<u32>,
    #[serde(borrow)]
    body: &'a RawValue,
}

#[derive(Serialize, Deserialize)]
struct ConversationLine {
    conversation: ConversationPlan,
}

fn io_err(e: serde_json::Error) -> std::io::Error {
    std::io::Error::other(e)
}

/// Writes `plan` as JSONL.
pub fn write_plan(plan: &Plan, out: &mut impl Write) -> std::io::Result<()> {
    let header = Header {
        servebench_plan: FORMAT_VERSION,
        api: plan.api,
        token_counting: plan.token_counting.clone(),
        notes: plan.notes.clone(),
        requests: plan.requests.len(),
        conversations: plan.conversations.len(),
    };
    serde_json::to_writer(&mut *out, &header).map_err(io_err)?;
    out.write_all(b"\n")?;
    for r in &plan.requests {
        if r.body.contains(&b'\n') {
            return Err(std::io::Error::other(format!(
                "the body of request {} spans lines and cannot be written as JSONL",
                r.index
            )));
        }
        write!(
            out,
            "{{\"index\": {}, \"at_s\": {}, \"at_ns\": {}, \"max_tokens\": {}, \"prompt_tokens\": {}, ",
            r.index,
            pyjson::py_float_repr(r.at_ns as f64 / 1e9),
            r.at_ns,
            r.max_tokens,
            r.prompt_tokens
        )?;
        if !r.input_tokens.is_empty() {
            let counts: Vec<String> = r.input_tokens.iter().map(u32::to_string).collect();
            write!(out, "\"input_tokens\": [{}], ", counts.join(", "))?;
        }
        out.write_all(b"\"body\": ")?;
        out.write_all(&r.body)?;
        out.write_all(b"}\n")?;
    }
    for c in &plan.conversations {
        serde_json::to_writer(&mut *out, &ConversationLine { conversation: c.clone() }).map_err(io_err)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Writes `plan` to a file.
pub fn save_plan(plan: &Plan, path: &Path) -> Result<(), WorkloadError> {
    let write = || -> std::io::Result<()> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        write_plan(plan, &mut f)?;
        f.flush()
    };
    write().map_err(|error| WorkloadError::Write { path: path.to_path_buf(), error })
}

/// Reads a plan written by [`write_plan`]; `path` names the source in errors.
pub fn read_plan(input: impl BufRead, path: &Path) -> Result<Plan, WorkloadError> {
    let mut lines = input.lines().enumerate();
    let bad = |line: usize, m: String| WorkloadError::parse(path, Some(line), m);
    let (_, first) = lines.next().ok_or_else(|| bad(1, "empty file; expected a plan written by --dry-run".into()))?;
    let first = first.map_err(|e| WorkloadError::read(path, e))?;
    let header: Header = serde_json::from_str(&first)
        .map_err(|e| bad(1, format!("not a servebench plan header ({e}); write one with --dry-run")))?;
    if header.servebench_plan != FORMAT_VERSION {
        return Err(bad(
            1,
            format!("plan format {} is not supported (this build reads {FORMAT_VERSION})", header.servebench_plan),
        ));
    }
    // The header's counts are only checked at the end: a damaged one must not size the lists.
    let mut plan = Plan {
        api: header.api,
        requests: Vec::with_capacity(header.requests.min(PREALLOCATE_MAX)),
        conversations: Vec::with_capacity(header.conversations.min(PREALLOCATE_MAX)),
        token_counting: header.token_counting,
        notes: header.notes,
    };
    let mut indices = std::collections::HashSet::new();
    for (i, line) in lines {
        let line = line.map_err(|e| WorkloadError::read(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with("{\"conversation\"") {
            let c: ConversationLine =
                serde_json::from_str(&line).map_err(|e| bad(i + 1, format!("bad conversation: {e}")))?;
            if c.conversation.turns.iter().any(|t| t.max_tokens == 0) {
                return Err(bad(i + 1, "a turn's max_tokens is 0; every request must ask for at least 1 token".into()));
            }
            check_start(c.conversation.at_ns, "this conversation").map_err(|m| bad(i + 1, m))?;
            plan.conversations.push(c.conversation);
            continue;
        }
        let r: RequestLine = serde_json::from_str(&line).map_err(|e| bad(i + 1, format!("bad request line: {e}")))?;
        if !(r.at_s.is_finite() && r.at_s >= 0.0) {
            return Err(bad(i + 1, format!("at_s must be a time >= 0, got {}", r.at_s)));
        }
        let at_ns = r.at_ns.unwrap_or_else(|| (r.at_s * 1e9).round() as u64);
        check_request(&r, at_ns, plan.api, plan.requests.last(), &mut indices)
            .and_then(|()| check_start(at_ns, "this request"))
            .map_err(|m| bad(i + 1, m))?;
        plan.requests.push(PlannedRequest {
            index: r.index,
            at_ns,
            body: Bytes::copy_from_slice(r.body.get().as_bytes()),
            max_tokens: r.max_tokens,
            prompt_tokens: r.prompt_tokens,
            input_tokens: r.input_tokens,
        });
    }
    if plan.requests.len() != header.requests || plan.conversations.len() != header.conversations {
        return Err(bad(
            1,
            format!(
                "the header promises {} requests and {} conversations but the file has {} and {}; the file is truncated",
                header.requests,
                header.conversations,
                plan.requests.len(),
                plan.conversations.len()
            ),
        ));
    }
    Ok(plan)
}

/// Refuses a request line the load engine could not send as written: a repeated index (results
/// and shards are keyed by it), a start before the previous line's (requests go out in file
/// order) or `max_tokens` 0 for a generation API (servers refuse it; `--dry-run` never writes
/// it). A pooling request generates nothing: its plan line says 0.
fn check_request(
    r: &RequestLine,
    at_ns: u64,
    api: Api,
    previous: Option<&PlannedRequest>,
    indices: &mut std::collections::HashSet<u32>,
) -> Result<(), String> {
    if r.max_tokens == 0 && !api.pooling() {
        return Err("max_tokens is 0; every request must ask for at least 1 token".into());
    }
    if !indices.insert(r.index) {
        return Err(format!("index {} appears twice; each request needs its own index", r.index));
    }
    match previous {
        Some(p) if at_ns < p.at_ns => Err(format!(
            "request {} starts at {at_ns} ns, before request {} on the line above ({} ns); \
             keep the lines in order of their start",
            r.index, p.index, p.at_ns
        )),
        _ => Ok(()),
    }
}

/// Reads a plan file.
pub fn load_plan(path: &Path) -> Result<Plan, WorkloadError> {
    let f = std::fs::File::open(path).map_err(|e| WorkloadError::read(path, e))?;
    read_plan(std::io::BufReader::new(f), path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use servebench_core::plan::TurnPlan;

    fn plan() -> Plan {
        Plan {
            api: Api::Completions,
            requests: vec![
                PlannedRequest {
                    index: 0,
                    at_ns: 0,
                    body: Bytes::from_static(br#"{"model": "m", "prompt": "a\u00e9 \"x\"", "max_tokens": 3}"#),
                    max_tokens: 3,
                    prompt_tokens: 5,
                    input_tokens: Vec::new(),
                },
                PlannedRequest {
                    index: 1,
                    at_ns: 1_234_567_891,
                    body: Bytes::from_static(br#"{ "spaced" :  [1, 2.0 ] }"#),
                    max_tokens: 9,
                    prompt_tokens: 2,
                    input_tokens: vec![1, 1],
                },
            ],
            conversations: vec![ConversationPlan {
                id: 0,
                at_ns: 5,
                system: Some("s".into()),
                turns: vec![TurnPlan { user: "u".into(), max_tokens: 4 }],
            }],
            token_counting: TokenCounting::Tokenizer("qwen3".into()),
            notes: vec!["n1".into()],
        }
    }

    #[test]
    fn write_then_read_gives_the_same_plan_and_bodies() {
        let p = plan();
        let mut buf = Vec::new();
        write_plan(&p, &mut buf).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert_eq!(text.lines().count(), 4);
        assert!(
            text.lines().nth(2).unwrap().starts_with("{\"index\": 1, \"at_s\": 1.234567891, \"at_ns\": 1234567891,")
        );
        // Each input's count where a request has several, and only there.
        assert!(text.lines().nth(2).unwrap().contains("\"prompt_tokens\": 2, \"input_tokens\": [1, 1], \"body\": {"));
        assert!(!text.lines().nth(1).unwrap().contains("input_tokens"));
        let back = read_plan(&buf[..], Path::new("mem")).unwrap();
        assert_eq!(back, p);
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("plan.jsonl");
        save_plan(&p, &f).unwrap();
        assert_eq!(load_plan(&f).unwrap(), p);
    }

    #[test]
    fn truncated_or_foreign_files_are_rejected_with_line_numbers() {
        let mut buf = Vec::new();
        write_plan(&plan(), &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let cut: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        let err = read_plan(cut.as_bytes(), Path::new("p.jsonl")).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");
        let huge = text.replacen("\"requests\":2,", "\"requests\":18446744073709551615,", 1);
        assert_ne!(huge, text);
        let err = read_plan(huge.as_bytes(), Path::new("p.jsonl")).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");
        let err = read_plan(&b"{\"a\": 1}\n"[..], Path::new("p.jsonl")).unwrap_err().to_string();
        assert!(err.contains("line 1") && err.contains("--dry-run"), "{err}");
        let broken = text.replace("\"max_tokens\": 9", "\"max_tokens\": -9");
        let err = read_plan(broken.as_bytes(), Path::new("p.jsonl")).unwrap_err().to_string();
        assert!(err.contains("line 3"), "{err}");
        assert!(read_plan(&b""[..], Path::new("p")).is_err());
    }

    #[test]
    fn lines_the_engine_could_not_send_as_written_are_refused() {
        let mut buf = Vec::new();
        write_plan(&plan(), &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let cases = [
            (text.replace("\"max_tokens\": 9", "\"max_tokens\": 0"), "line 3", "max_tokens is 0"),
            (text.replace("\"index\": 1,", "\"index\": 0,"), "line 3", "index 0 appears twice"),
            (
                text.replace("\"at_ns\": 0,", "\"at_ns\": 7,").replace("\"at_ns\": 1234567891", "\"at_ns\": 0"),
                "line 3",
                "before request 0",
            ),
            (text.replace("\"max_tokens\":4", "\"max_tokens\":0"), "line 4", "a turn's max_tokens is 0"),
            // A start past the 7 days a run may span names its own line, not the header's.
            (
                text.replace("\"at_ns\": 1234567891", "\"at_ns\": 18446744073709551615"),
                "line 3",
                "this request starts 1.8447e10 s after the run begins",
            ),
            (text.replace("\"at_ns\":5", "\"at_ns\":604800000000001"), "line 4", "this conversation starts"),
        ];
        for (bad, line, says) in cases {
            assert_ne!(bad, text, "{says}: the case must change the file");
            let err = read_plan(bad.as_bytes(), Path::new("p.jsonl")).unwrap_err().to_string();
            assert!(err.contains(line) && err.contains(says), "{says}: {err}");
        }
        let gaps = text.replace("\"index\": 1,", "\"index\": 7,");
        assert_eq!(read_plan(gaps.as_bytes(), Path::new("p.jsonl")).unwrap().requests[1].index, 7);
    }

    /// A pooling request generates nothing, so its plan line asks for 0 tokens and reads back;
    /// the same line in a generation plan is refused.
    #[test]
    fn a_pooling_plan_asks_for_no_tokens() {
        let mut p = plan();
        p.api = Api::Pooling(servebench_core::config::PoolingForm::Embeddings);
        p.conversations.clear();
        for r in &mut p.requests {
            r.max_tokens = 0;
        }
        let mut buf = Vec::new();
        write_plan(&p, &mut buf).unwrap();
        assert_eq!(read_plan(&buf[..], Path::new("p.jsonl")).unwrap(), p);
        p.api = Api::Completions;
        let mut buf = Vec::new();
        write_plan(&p, &mut buf).unwrap();
        let err = read_plan(&buf[..], Path::new("p.jsonl")).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("max_tokens is 0"), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn any_prompt_round_trips_byte_for_byte(prompts in proptest::collection::vec(proptest::prelude::any::<String>(), 1..8), chat in proptest::prelude::any::<bool>()) {
            let api = if chat { Api::Chat } else { Api::Completions };
            let b = crate::BodyBuilder::from_parts(api, "m", true, serde_json::Map::new());
            let p = Plan {
                api,
                requests: prompts.iter().enumerate().map(|(i, s)| PlannedRequest {
                    index: i as u32, at_ns: i as u64 * 333_333_333, body: b.prompt(s, 7), max_tokens: 7, prompt_tokens: 1,
                    input_tokens: Vec::new(),
                }).collect(),
                conversations: Vec::new(),
                token_counting: TokenCounting::Estimate,
                notes: Vec::new(),
            };
            let mut buf = Vec::new();
            write_plan(&p, &mut buf).unwrap();
            proptest::prop_assert_eq!(read_plan(&buf[..], Path::new("mem")).unwrap(), p);
        }
    }

    #[test]
    fn a_multi_line_body_is_refused() {
        let mut p = plan();
        p.requests[0].body = Bytes::from_static(b"{\n}");
        assert!(write_plan(&p, &mut Vec::new()).is_err());
    }
}
