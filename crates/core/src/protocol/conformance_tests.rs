//! Conformance of the decoder, the classifier and the renderer with the stream shapes of real
//! servers (transcripts in `testdata/sse/`, see its README for where each shape comes from).

use serde_json::Value;

use super::openai::{Payload, ServerTimings, classify};
use super::render::{ChunkRenderer, done_frame};
use super::sse::SseDecoder;
use crate::config::Api;
use crate::record::Usage;

/// What a whole stream adds up to (the per-API modules' round trips read their streams with it).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Summary {
    pub(super) tokens: usize,
    pub(super) text: String,
    pub(super) reasoning: String,
    /// The usage, merged count by count as the recorder merges it.
    pub(super) usage: Option<Usage>,
    pub(super) error: Option<String>,
    pub(super) server: Option<ServerTimings>,
    /// The last finish (stop) reason given.
    pub(super) finish_reason: Option<String>,
    /// Events that end the stream (the typed-event APIs' terminal events).
    pub(super) ends: usize,
    /// `[DONE]` seen.
    pub(super) done: bool,
}

/// `pieces`, fed to one decoder in turn and classified as `api`.
pub(super) fn summarize(api: Api, pieces: &[&[u8]]) -> Summary {
    let mut s = Summary::default();
    let mut d = SseDecoder::new();
    let mut on_event = |e: super::sse::SseEvent<'_>| match classify(api, e.data).unwrap() {
        Payload::Done => s.done = true,
        Payload::Chunk(c) => {
            s.tokens += usize::from(c.token);
            s.ends += usize::from(c.end);
            if let Some(t) = c.text {
                s.text.push_str(&t);
            }
            if let Some(r) = c.reasoning {
                s.reasoning.push_str(&r);
            }
            if let Some(f) = c.finish_reason {
                s.finish_reason = Some(f.into_owned());
            }
            if let Some(u) = c.usage {
                let old = s.usage.unwrap_or_default();
                s.usage = Some(Usage {
                    prompt_tokens: u.prompt_tokens.or(old.prompt_tokens),
                    completion_tokens: u.completion_tokens.or(old.completion_tokens),
                });
            }
            s.error = c.error.or(s.error.take());
            s.server = c.server.or(s.server);
        }
    };
    for p in pieces {
        d.feed(p, &mut on_event).unwrap();
    }
    d.finish(&mut on_event).unwrap();
    s
}

fn transcript(name: &str) -> Vec<u8> {
    let path = format!("{}/testdata/sse/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn usage(prompt: u32, completion: u32) -> Option<Usage> {
    Some(Usage { prompt_tokens: Some(prompt), completion_tokens: Some(completion) })
}

struct Case {
    file: &'static str,
    api: Api,
    tokens: usize,
    text: &'static str,
    usage: Option<Usage>,
    error: Option<&'static str>,
}

const fn case(file: &'static str, api: Api, tokens: usize, text: &'static str) -> Case {
    Case { file, api, tokens, text, usage: None, error: None }
}

fn cases() -> Vec<Case> {
    use Api::{Chat, Completions};
    vec![
        Case { usage: usage(6, 5), ..case("vllm_completions.sse", Completions, 5, " The capital of France is") },
        Case { usage: usage(12, 6), ..case("vllm_chat.sse", Chat, 6, "Hello! How can I help") },
        Case { usage: usage(15, 6), ..case("vllm_chat_reasoning.sse", Chat, 5, "\n\n42") },
        Case {
            error: Some("The engine core died unexpectedly. (code 500)"),
            ..case("vllm_in_band_error.sse", Completions, 2, " Once upon")
        },
        Case {
            usage: usage(5, 4),
            // Four text chunks plus the empty final chunk that carries usage.
            ..case("llamacpp_completions.sse", Completions, 5, " Paris is the capital")
        },
        Case { usage: usage(8, 3), ..case("llamacpp_chat.sse", Chat, 3, "Bonjour le monde") },
        case("llamacpp_python_chat.sse", Chat, 2, "Hi there"),
        Case { usage: usage(10, 5), ..case("sglang_chat.sse", Chat, 5, "Sure, here it is") },
        Case { usage: usage(4, 4), ..case("sglang_completions.sse", Completions, 4, " one two three four") },
        Case { usage: usage(14, 5), ..case("tgi_chat.sse", Chat, 4, "Deep learning is a") },
    ]
}

#[test]
fn every_transcript_classifies_to_its_known_counts() {
    for c in cases() {
        let bytes = transcript(c.file);
        let s = summarize(c.api, &[&bytes]);
        assert_eq!(s.tokens, c.tokens, "{}: token chunks", c.file);
        assert_eq!(s.text, c.text, "{}: text", c.file);
        assert_eq!(s.usage, c.usage, "{}: usage", c.file);
        assert_eq!(s.error.as_deref(), c.error, "{}: error", c.file);
        assert!(s.done, "{}: [DONE] seen", c.file);
    }
}

#[test]
fn every_transcript_decodes_the_same_one_byte_at_a_time() {
    for c in cases() {
        let bytes = transcript(c.file);
        let pieces: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(summarize(c.api, &pieces), summarize(c.api, &[&bytes]), "{}", c.file);
    }
}

#[test]
fn a_captured_responses_stream_classifies_to_its_counts_whole_or_byte_by_byte() {
    // The Responses API has no `[DONE]`: `response.completed` ends it, with the usage.
    let bytes = transcript("llamacpp_responses.sse");
    let whole = summarize(Api::Responses, &[&bytes]);
    let want =
        Summary {
            tokens: 4, text: "لعبة Zucker.File-Out".into(), usage: usage(14, 4), ends: 1, ..Summary::default()
        };
    assert_eq!(whole, want);
    let pieces: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(summarize(Api::Responses, &pieces), whole);
}

#[test]
fn a_captured_messages_stream_classifies_to_its_counts_whole_or_byte_by_byte() {
    // Anthropic's Messages API has no `[DONE]` either: `message_stop` ends it; the prompt's count
    // comes with `message_start`, the output's and the stop reason with `message_delta`.
    let bytes = transcript("llamacpp_messages.sse");
    let whole = summarize(Api::Messages, &[&bytes]);
    let want = Summary {
        tokens: 4,
        text: "PureComponentclinicᕙ joins".into(),
        usage: usage(14, 4),
        finish_reason: Some("max_tokens".into()),
        ends: 1,
        ..Summary::default()
    };
    assert_eq!(whole, want);
    let pieces: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(summarize(Api::Messages, &pieces), whole);
}

#[test]
fn rendered_typed_events_carry_what_a_real_servers_do() {
    // Each rendered event has at least the keys llama.cpp's of the same type has, but for
    // llama.cpp's own `timings` (vLLM and OpenAI add `sequence_number`, which llama.cpp leaves
    // out), and so has the usage inside it; the same event types open and close the stream.
    for (api, file) in [(Api::Responses, "llamacpp_responses.sse"), (Api::Messages, "llamacpp_messages.sse")] {
        let theirs = frames(&transcript(file));
        let r = ChunkRenderer::new(api, "x_1", 1, "m");
        let mine = frames(&[r.opening(0).unwrap(), r.token_chunk("a", None), r.usage_chunk(3, 1, None)].concat());
        for m in &mine {
            let t = theirs
                .iter()
                .find(|t| t["type"] == m["type"])
                .unwrap_or_else(|| panic!("{file}: {} not sent by llama.cpp", m["type"]));
            for k in keys(t).into_iter().filter(|k| k != "timings") {
                assert!(m.get(&k).is_some(), "{file}: {}: no {k}", m["type"]);
            }
            for k in keys(usage_in(t)) {
                assert!(usage_in(m).get(&k).is_some(), "{file}: {}: usage has no {k}", m["type"]);
            }
        }
        assert_eq!(mine[0]["type"], theirs[0]["type"], "{file}: the first event");
        assert_eq!(mine.last().unwrap()["type"], theirs.last().unwrap()["type"], "{file}: the last event");
    }
}

/// An event's usage object wherever its API puts it (Null where it has none).
fn usage_in(v: &Value) -> &Value {
    [&v["usage"], &v["response"]["usage"], &v["message"]["usage"]]
        .into_iter()
        .find(|u| u.is_object())
        .unwrap_or(&Value::Null)
}

#[test]
fn vllm_per_request_metrics_are_read() {
    let s = summarize(Api::Completions, &[&transcript("vllm_completions.sse")]);
    assert_eq!(s.server, Some(ServerTimings { queue_time_ms: Some(0.8), time_to_first_token_ms: Some(21.5) }));
}

/// The JSON of every `data:` frame in a transcript, `[DONE]` excluded.
fn frames(bytes: &[u8]) -> Vec<Value> {
    named_frames(bytes).into_iter().map(|(_, v)| v).collect()
}

/// Every `data:` frame but `[DONE]`, with the name its `event:` line gave it.
pub(super) fn named_frames(bytes: &[u8]) -> Vec<(Option<String>, Value)> {
    let mut out = Vec::new();
    let mut d = SseDecoder::new();
    d.feed(bytes, |e| {
        if !e.is_done() {
            let name = e.event.map(|n| String::from_utf8_lossy(n).into_owned());
            out.push((name, serde_json::from_slice(e.data).unwrap()));
        }
    })
    .unwrap();
    out
}

/// The value with every scalar replaced by its JSON type, so shapes compare, values don't.
fn shape(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(shape).collect()),
        Value::String(_) => Value::from("string"),
        Value::Number(_) => Value::from("number"),
        Value::Bool(_) => Value::from("bool"),
        Value::Null => Value::Null,
    }
}

fn keys(v: &Value) -> Vec<String> {
    v.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

#[test]
fn rendered_chunks_have_the_shape_and_key_order_of_vllms() {
    let vllm = frames(&transcript("vllm_chat.sse"));
    let r = ChunkRenderer::new(Api::Chat, "chatcmpl-x", 1, "m");
    let mine = frames(
        &[
            r.opening(0).unwrap(),
            r.token_chunk("Hello", None),
            r.token_chunk(" help", Some("length")),
            r.usage_chunk(12, 6, None),
            done_frame(),
        ]
        .concat(),
    );
    let theirs = [&vllm[0], &vllm[1], &vllm[6], &vllm[7]];
    for (m, t) in mine.iter().zip(theirs) {
        assert_eq!(shape(m), shape(t));
        assert_eq!(keys(m), keys(t));
        assert_eq!(keys(&m["choices"][0]), keys(&t["choices"][0]));
    }

    let vllm = frames(&transcript("vllm_completions.sse"));
    let r = ChunkRenderer::new(Api::Completions, "cmpl-x", 1, "m");
    let token = frames(&r.token_chunk(" The", None));
    assert_eq!(shape(&token[0]), shape(&vllm[0]));
    assert_eq!(keys(&token[0]["choices"][0]), keys(&vllm[0]["choices"][0]));
    let last = frames(&r.token_chunk(" is", Some("length")));
    assert_eq!(shape(&last[0]), shape(&vllm[4]));
    // vLLM's usage chunk may also carry `metrics`; everything else must match.
    let usage = frames(&r.usage_chunk(6, 5, None));
    let mut theirs = vllm[5].clone();
    theirs.as_object_mut().unwrap().remove("metrics");
    assert_eq!(shape(&usage[0]), shape(&theirs));
    assert_eq!(keys(&usage[0]["usage"]), keys(&theirs["usage"]));
}

proptest::proptest! {
    #[test]
    fn no_payload_makes_any_classifier_panic(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
        for api in [Api::Completions, Api::Chat, Api::Responses, Api::Messages] {
            let _ = classify(api, &data);
        }
    }

    #[test]
    fn any_token_text_round_trips_through_every_api(text in "\\PC{0,40}") {
        for api in [Api::Completions, Api::Chat, Api::Responses, Api::Messages] {
            let frame = ChunkRenderer::new(api, "x_1", 0, "m").token_chunk(&text, None);
            let mut got = None;
            SseDecoder::new().feed(&frame, |e| {
                if let Ok(Payload::Chunk(c)) = classify(api, e.data) {
                    got = c.text.map(std::borrow::Cow::into_owned);
                }
            }).unwrap();
            proptest::prop_assert_eq!(got.as_deref(), Some(text.as_str()), "{:?}", api);
        }
    }
}
