//! Conformance of the decoder, the classifier and the renderer with the stream shapes of real
//! servers (transcripts in `testdata/sse/`, see its README for where each shape comes from).

use serde_json::Value;

use super::openai::{Payload, ServerTimings, classify};
use super::render::{ChunkRenderer, done_frame};
use super::sse::SseDecoder;
use crate::config::Api;
use crate::record::Usage;

/// What a whole stream adds up to.
#[derive(Debug, Default, PartialEq)]
struct Summary {
    tokens: usize,
    text: String,
    usage: Option<Usage>,
    error: Option<String>,
    server: Option<ServerTimings>,
    done: bool,
}

fn summarize(api: Api, pieces: &[&[u8]]) -> Summary {
    let mut s = Summary::default();
    let mut d = SseDecoder::new();
    let mut on_event = |e: super::sse::SseEvent<'_>| match classify(api, e.data).unwrap() {
        Payload::Done => s.done = true,
        Payload::Chunk(c) => {
            s.tokens += usize::from(c.token);
            if let Some(t) = c.text {
                s.text.push_str(&t);
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
        Summary { tokens: 4, text: "لعبة Zucker.File-Out".into(), usage: usage(14, 4), ..Summary::default() };
    assert_eq!(whole, want);
    let pieces: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(summarize(Api::Responses, &pieces), whole);
    let mut ends = 0;
    SseDecoder::new()
        .feed(&bytes, |e| {
            if let Ok(Payload::Chunk(c)) = classify(Api::Responses, e.data) {
                ends += usize::from(c.end);
            }
        })
        .unwrap();
    assert_eq!(ends, 1);
}

#[test]
fn rendered_responses_events_carry_what_a_real_servers_do() {
    // Each rendered event has at least the keys llama.cpp's of the same type has, but for
    // llama.cpp's own `timings` (vLLM and OpenAI add `sequence_number`, which llama.cpp leaves
    // out), and the same event types open and close the stream.
    let theirs = frames(&transcript("llamacpp_responses.sse"));
    let r = ChunkRenderer::new(Api::Responses, "resp_x", 1, "m");
    let mine = frames(&[r.opening(0).unwrap(), r.token_chunk("a", None), r.usage_chunk(3, 1, None)].concat());
    for m in &mine {
        let t = theirs
            .iter()
            .find(|t| t["type"] == m["type"])
            .unwrap_or_else(|| panic!("{} not sent by llama.cpp", m["type"]));
        for k in keys(t).into_iter().filter(|k| k != "timings") {
            assert!(m.get(&k).is_some(), "{}: no {k}", m["type"]);
        }
    }
    let usage = &mine.last().unwrap()["response"]["usage"];
    for k in keys(&theirs.last().unwrap()["response"]["usage"]) {
        assert!(usage.get(&k).is_some(), "usage: no {k}");
    }
}

#[test]
fn vllm_per_request_metrics_are_read() {
    let s = summarize(Api::Completions, &[&transcript("vllm_completions.sse")]);
    assert_eq!(s.server, Some(ServerTimings { queue_time_ms: Some(0.8), time_to_first_token_ms: Some(21.5) }));
}

/// The JSON of every `data:` frame in a transcript, `[DONE]` excluded.
fn frames(bytes: &[u8]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut d = SseDecoder::new();
    d.feed(bytes, |e| {
        if !e.is_done() {
            out.push(serde_json::from_slice(e.data).unwrap());
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
