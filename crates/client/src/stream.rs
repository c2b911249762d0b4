//! Drives one streaming request (or one pooling request, answered whole) and fills its
//! [`RequestRecord`].
//!
//! The clock is read once per network read, right after the bytes arrive and before any
//! decoding; every token event in that read gets that timestamp (µs after the send). Token
//! times go into a vector sized from `max_tokens`, text into one `String`, so nothing is
//! allocated per token. Every way a request can go wrong ends as a [`Failure`] in the record:
//! a status other than 2xx, no connection, the per-request timeout, an in-band error event, a
//! stream without any token, a stream that broke off or could not be decoded, a Responses or
//! Messages stream without its terminal event, or an interruption of the run. A pooling
//! answer is read to its end; its one "chunk" is the time its last byte arrived (vLLM's
//! `ttft = latency` for pooling), its prompt tokens its `usage`'s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, Uri};
use servebench_core::config::Api;
use servebench_core::protocol::{
    Payload, PoolingError, SseDecoder, SseError, SseEvent, StreamChunk, classify, read_answer,
};
use servebench_core::record::{Failure, FailureKind, OUTLIVED, RECORD_SPAN_US, RequestRecord};
use tokio::sync::watch;

use crate::http::{HttpClient, with_causes};
use crate::progress::Progress;

/// vLLM's message for a stream that ended without a token chunk.
pub const NO_TOKEN_MESSAGE: &str =
    "Never received a valid chunk to calculate TTFT.This response will be marked as failed!";

/// How much of an error response's body goes into the failure message.
const ERROR_BODY_LIMIT: usize = 512;
/// How long to wait for that much of an error body.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(2);
/// Token-time capacity reserved up front is capped so a huge `max_tokens` costs nothing.
const MAX_RESERVED_CHUNKS: usize = 1 << 16;

/// What every request of a run shares.
#[derive(Clone, Debug)]
pub(crate) struct StreamContext {
    pub client: HttpClient,
    /// The request target for the API URL (see [`HttpClient::target`]).
    pub target: Uri,
    pub api: Api,
    /// Per-request timeout; `None` waits forever.
    pub timeout: Option<Duration>,
    /// Token chunks are counted here as they arrive (once per network read).
    pub progress: Arc<Progress>,
}

/// Sends one request and records what happened into `rec`, whose identity and schedule fields
/// the caller has set. `start` is the send time (`rec.start_ns`). Returns when the response
/// has ended, failed, timed out, or `stop` turned true.
pub(crate) async fn execute(
    ctx: &StreamContext,
    rec: &mut RequestRecord,
    start: Instant,
    body: Bytes,
    request_id: Option<HeaderValue>,
    stop: &mut watch::Receiver<bool>,
) {
    reserve(rec);
    let (limit, failed) = time_limit(ctx.timeout);
    let deadline = start.checked_add(limit);
    let outcome = {
        let drive = drive(ctx, rec, start, body, request_id);
        let timed = async {
            match deadline {
                Some(d) => tokio::time::timeout_at(d.into(), drive).await.unwrap_or(Err(failed)),
                None => drive.await,
            }
        };
        tokio::select! {
            r = timed => r,
            () = stopped(stop) => Err(failure(
                FailureKind::Interrupted,
                "the run was interrupted before the response ended".to_string(),
            )),
        }
    };
    rec.end_us = micros(start.elapsed());
    rec.failure = outcome.err();
}

fn reserve(rec: &mut RequestRecord) {
    let n = (rec.max_tokens as usize).saturating_add(1).min(MAX_RESERVED_CHUNKS);
    rec.chunks_us.reserve(n);
    rec.text.reserve(n.saturating_mul(4));
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|s| *s).await.is_err() {
        // The run dropped its stop switch: it will never be thrown.
        std::future::pending::<()>().await;
    }
}

async fn drive(
    ctx: &StreamContext,
    rec: &mut RequestRecord,
    start: Instant,
    body: Bytes,
    request_id: Option<HeaderValue>,
) -> Result<(), Failure> {
    let extra = request_id.map(|v| (HeaderName::from_static("x-request-id"), v));
    let mut resp = ctx
        .client
        .send(Method::POST, &ctx.target, Some(body), extra)
        .await
        .map_err(|e| failure(FailureKind::Connect, e.to_string()))?;
    rec.retried = resp.retried();
    rec.status = resp.status().as_u16();
    rec.http.headers_us = Some(micros(resp.arrived().saturating_duration_since(start)));
    if let Some(o) = resp.opened() {
        rec.http.connect_us = Some(o.connect_us);
        rec.http.tls_us = o.tls_us;
    }
    if !resp.status().is_success() {
        let body = tokio::time::timeout(ERROR_BODY_WAIT, resp.text(ERROR_BODY_LIMIT))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let reason = match resp.reason() {
            "" => format!("HTTP {}", rec.status),
            r => r.to_string(),
        };
        let body = body.trim();
        let message = if body.is_empty() { reason } else { format!("{reason}: {body}") };
        return Err(failure(FailureKind::HttpStatus, message));
    }
    if ctx.api.pooling() {
        return read_pooling(ctx, rec, start, resp).await;
    }
    let mut recorder = StreamRecorder::new(ctx.api);
    loop {
        match resp.chunk().await {
            Ok(Some(piece)) => {
                let t_us = micros(piece.at.saturating_duration_since(start));
                rec.http.first_byte_us.get_or_insert(t_us);
                let before = rec.chunks_us.len();
                recorder.feed(rec, piece.data, t_us)?;
                let new = rec.chunks_us.len() - before;
                if new > 0 {
                    Progress::add(&ctx.progress.chunks, new as u64);
                    if before == 0 {
                        Progress::add(&ctx.progress.first_tokens, 1);
                        Progress::add(&ctx.progress.ttft_us_sum, u64::from(rec.chunks_us[0]));
                    }
                }
            }
            Ok(None) => break,
            Err(e) => {
                return Err(failure(FailureKind::Stream, format!("the stream broke off: {}", with_causes(&e))));
            }
        }
    }
    recorder.finish(rec, micros(start.elapsed()))?;
    if rec.chunks_us.is_empty() {
        return Err(failure(FailureKind::NoToken, NO_TOKEN_MESSAGE.to_string()));
    }
    Ok(())
}

/// A pooling answer, read whole: one chunk at its last byte, its usage's prompt tokens.
async fn read_pooling(
    ctx: &StreamContext,
    rec: &mut RequestRecord,
    start: Instant,
    mut resp: crate::http::Response,
) -> Result<(), Failure> {
    let mut body = Vec::new();
    let mut last_us = 0;
    loop {
        match resp.chunk().await {
            Ok(Some(piece)) => {
                last_us = micros(piece.at.saturating_duration_since(start));
                rec.http.first_byte_us.get_or_insert(last_us);
                body.extend_from_slice(piece.data);
            }
            Ok(None) => break,
            Err(e) => {
                return Err(failure(FailureKind::Stream, format!("the answer broke off: {}", with_causes(&e))));
            }
        }
    }
    record_pooling(rec, &body, last_us)?;
    Progress::add(&ctx.progress.chunks, 1);
    Progress::add(&ctx.progress.first_tokens, 1);
    Progress::add(&ctx.progress.ttft_us_sum, u64::from(last_us));
    Ok(())
}

/// The sans-IO half of a pooling request: its whole answer, whose last byte came `t_us` µs
/// after the send, into `rec`.
pub fn record_pooling(rec: &mut RequestRecord, body: &[u8], t_us: u32) -> Result<(), Failure> {
    let answer = read_answer(body).map_err(|e| match e {
        PoolingError::InBand(message) => failure(FailureKind::InBandError, message),
        e @ PoolingError::NotJson(_) => failure(FailureKind::Stream, e.to_string()),
    })?;
    rec.usage.prompt_tokens = answer.prompt_tokens.or(rec.usage.prompt_tokens);
    rec.chunks_us.push(t_us);
    Ok(())
}

/// The sans-IO half of a request: turns timestamped reads of a response body into token
/// times, text, usage and failures in a record.
#[derive(Debug)]
pub struct StreamRecorder {
    api: Api,
    decoder: SseDecoder,
    /// A Responses or Messages stream's terminal event has come.
    ended: bool,
}

/// Why a stream that ended without its API's terminal event failed (vLLM's rule for
/// Responses); `None` for APIs without one.
pub fn no_end_message(api: Api) -> Option<String> {
    api.end_event().map(|e| format!("the stream ended without {e}: the response was cut off"))
}

impl StreamRecorder {
    /// A recorder for one response of `api`.
    pub fn new(api: Api) -> Self {
        Self { api, decoder: SseDecoder::new(), ended: false }
    }

    /// One network read that arrived `t_us` µs after the send.
    pub fn feed(&mut self, rec: &mut RequestRecord, bytes: &[u8], t_us: u32) -> Result<(), Failure> {
        self.decode(rec, t_us, |decoder, on_event| decoder.feed(bytes, on_event))
    }

    /// The end of the body, `t_us` µs after the send.
    pub fn finish(&mut self, rec: &mut RequestRecord, t_us: u32) -> Result<(), Failure> {
        self.decode(rec, t_us, |decoder, on_event| decoder.finish(on_event))?;
        if !self.ended
            && let Some(message) = no_end_message(self.api)
        {
            return Err(failure(FailureKind::Stream, message));
        }
        Ok(())
    }

    /// Runs one decoder `step`, applying each event it completes to `rec` at `t_us`; the first
    /// failing event (or the decoder's own error) is the result.
    fn decode(
        &mut self,
        rec: &mut RequestRecord,
        t_us: u32,
        step: impl FnOnce(&mut SseDecoder, &mut dyn FnMut(SseEvent<'_>)) -> Result<(), SseError>,
    ) -> Result<(), Failure> {
        let api = self.api;
        let ended = &mut self.ended;
        let mut first_failure = None;
        let decoded = step(&mut self.decoder, &mut |ev: SseEvent<'_>| {
            if first_failure.is_none() {
                match apply(api, ev, t_us, rec) {
                    Ok(end) => *ended |= end,
                    Err(f) => first_failure = Some(f),
                }
            }
        });
        if let Some(f) = first_failure {
            return Err(f);
        }
        decoded.map_err(|e| failure(FailureKind::Stream, e.to_string()))
    }
}

/// Applies one event to `rec`; `Ok(true)` for the event that ends a Responses or Messages
/// stream.
fn apply(api: Api, ev: SseEvent<'_>, t_us: u32, rec: &mut RequestRecord) -> Result<bool, Failure> {
    if ev.event == Some(b"error") {
        // The message inside the event when it is one in a known shape, else its data.
        let message = match classify(api, ev.data) {
            Ok(Payload::Chunk(StreamChunk { error: Some(m), .. })) => m,
            _ => String::from_utf8_lossy(ev.data).trim().to_string(),
        };
        return Err(failure(FailureKind::InBandError, message));
    }
    let chunk = match classify(api, ev.data) {
        Ok(Payload::Done) => return Ok(false),
        Ok(Payload::Chunk(c)) => c,
        Err(e) => return Err(failure(FailureKind::Stream, e.to_string())),
    };
    if let Some(message) = chunk.error {
        return Err(failure(FailureKind::InBandError, message));
    }
    if chunk.token {
        rec.chunks_us.push(t_us);
        let reasoning = chunk.reasoning.as_deref().is_some_and(|r| !r.is_empty());
        if reasoning {
            rec.first_reasoning_us.get_or_insert(t_us);
        }
        if reasoning && chunk.text.as_deref().is_none_or(str::is_empty) {
            rec.reasoning_chunks += 1;
        } else {
            rec.first_answer_us.get_or_insert(t_us);
        }
    }
    if let Some(text) = chunk.text {
        rec.text.push_str(&text);
    }
    // Each count as last given (Messages gives the prompt's at the start, the output's at
    // the end).
    if let Some(usage) = chunk.usage {
        rec.usage.prompt_tokens = usage.prompt_tokens.or(rec.usage.prompt_tokens);
        rec.usage.completion_tokens = usage.completion_tokens.or(rec.usage.completion_tokens);
    }
    if let Some(server) = chunk.server {
        rec.server_queue_s = server.queue_time_ms.map(|ms| ms / 1000.0).or(rec.server_queue_s);
        rec.server_ttft_s = server.time_to_first_token_ms.map(|ms| ms / 1000.0).or(rec.server_ttft_s);
    }
    Ok(chunk.end)
}

fn failure(kind: FailureKind, message: String) -> Failure {
    Failure { kind, message }
}

/// How long a request may take, and its failure when it takes longer: the request's timeout,
/// or the span its times can be kept for where that comes first (vLLM's default timeout is 6
/// hours), when it fails as having outlived its record.
fn time_limit(timeout: Option<Duration>) -> (Duration, Failure) {
    let span = Duration::from_micros(RECORD_SPAN_US);
    match timeout {
        Some(t) if t <= span => {
            let secs = t.as_secs_f64();
            (t, failure(FailureKind::Timeout, format!("no complete response within the {secs} s request timeout")))
        }
        _ => (span, failure(FailureKind::Timeout, OUTLIVED.to_string())),
    }
}

/// A duration as whole µs, saturating at `u32::MAX` (71 minutes).
pub(crate) fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use servebench_core::protocol::{ChunkRenderer, done_frame, error_frame};

    fn record(max_tokens: u32) -> RequestRecord {
        let mut r = RequestRecord { max_tokens, ..RequestRecord::default() };
        reserve(&mut r);
        r
    }

    #[test]
    fn a_pooling_answer_is_one_chunk_at_its_end_with_its_prompt_tokens() {
        let mut r = record(0);
        record_pooling(&mut r, br#"{"data":[{"embedding":[0.5]}],"usage":{"prompt_tokens":9}}"#, 1234).unwrap();
        assert_eq!((r.chunks_us.as_slice(), r.usage.prompt_tokens), ([1234].as_slice(), Some(9)));
        let f = record_pooling(&mut record(0), br#"{"error":{"message":"no"}}"#, 5).unwrap_err();
        assert_eq!((f.kind, f.message.as_str()), (FailureKind::InBandError, "no"));
        let f = record_pooling(&mut record(0), b"data: {}", 5).unwrap_err();
        assert_eq!(f.kind, FailureKind::Stream);
    }

    #[test]
    fn every_token_in_a_read_gets_that_reads_time_and_usage_is_kept() {
        let r = ChunkRenderer::new(Api::Completions, "c", 0, "m");
        let mut rec = record(4);
        let mut s = StreamRecorder::new(Api::Completions);
        let two = [r.token_chunk("a", None), r.token_chunk("b", None)].concat();
        s.feed(&mut rec, &two, 100).unwrap();
        // A read that ends inside an event: the event belongs to the read that completes it.
        let last = r.token_chunk_with_usage("c", Some("length"), 7, 3);
        s.feed(&mut rec, &last[..10], 150).unwrap();
        s.feed(&mut rec, &last[10..], 200).unwrap();
        s.feed(&mut rec, &done_frame(), 210).unwrap();
        s.finish(&mut rec, 220).unwrap();
        assert_eq!(rec.chunks_us, vec![100, 100, 200]);
        assert_eq!(rec.text, "abc");
        assert_eq!(rec.usage.completion_tokens, Some(3));
        assert_eq!(rec.usage.prompt_tokens, Some(7));
    }

    #[test]
    fn the_chat_role_chunk_is_not_timed() {
        let r = ChunkRenderer::new(Api::Chat, "c", 0, "m");
        let mut rec = record(2);
        let mut s = StreamRecorder::new(Api::Chat);
        s.feed(&mut rec, &r.opening(0).unwrap(), 10).unwrap();
        s.feed(&mut rec, &r.token_chunk("x", None), 20).unwrap();
        assert_eq!(rec.chunks_us, vec![20]);
    }

    #[test]
    fn in_band_errors_and_garbage_fail_with_their_kind() {
        let mut rec = record(2);
        let mut s = StreamRecorder::new(Api::Chat);
        let f = s.feed(&mut rec, &error_frame("engine died", "InternalServerError", 500), 5).unwrap_err();
        assert_eq!(f.kind, FailureKind::InBandError);
        assert_eq!(f.message, "engine died (code 500)");

        let mut s = StreamRecorder::new(Api::Chat);
        let f = s.feed(&mut rec, b"event: error\ndata: overloaded\n\n", 5).unwrap_err();
        assert_eq!((f.kind, f.message.as_str()), (FailureKind::InBandError, "overloaded"));

        let mut s = StreamRecorder::new(Api::Chat);
        let f = s.feed(&mut rec, b"data: {not json\n\n", 5).unwrap_err();
        assert_eq!(f.kind, FailureKind::Stream);
    }

    #[test]
    fn a_truncated_last_event_is_a_stream_failure_at_the_end() {
        let r = ChunkRenderer::new(Api::Completions, "c", 0, "m");
        let mut rec = record(2);
        let mut s = StreamRecorder::new(Api::Completions);
        let frame = r.token_chunk("x", None);
        s.feed(&mut rec, &frame[..frame.len() - 6], 5).unwrap();
        let f = s.finish(&mut rec, 6).unwrap_err();
        assert_eq!(f.kind, FailureKind::Stream);
        assert!(rec.chunks_us.is_empty());
    }

    #[test]
    fn reasoning_and_answer_chunks_are_timed_and_counted_apart() {
        let r = ChunkRenderer::new(Api::Chat, "c", 0, "m");
        let mut rec = record(4);
        let mut s = StreamRecorder::new(Api::Chat);
        s.feed(&mut rec, &r.opening(0).unwrap(), 5).unwrap();
        s.feed(&mut rec, &r.reasoning_chunk("think"), 10).unwrap();
        s.feed(&mut rec, &r.reasoning_chunk("more"), 20).unwrap();
        s.feed(&mut rec, &r.token_chunk("answer", None), 35).unwrap();
        s.feed(&mut rec, &r.token_chunk("!", Some("stop")), 40).unwrap();
        assert_eq!(rec.chunks_us, vec![10, 20, 35, 40], "TTFT counts the first token of either kind");
        assert_eq!((rec.reasoning_chunks, rec.first_reasoning_us, rec.first_answer_us), (2, Some(10), Some(35)));
        assert_eq!(rec.text, "answer!");

        let mut plain = record(2);
        let mut s = StreamRecorder::new(Api::Chat);
        s.feed(&mut plain, &r.token_chunk("x", None), 7).unwrap();
        assert_eq!((plain.reasoning_chunks, plain.first_reasoning_us, plain.first_answer_us), (0, None, Some(7)));
    }

    #[test]
    fn a_responses_stream_times_its_deltas_and_needs_its_terminal_event() {
        let r = ChunkRenderer::new(Api::Responses, "resp_1", 0, "m");
        let mut rec = record(3);
        let mut s = StreamRecorder::new(Api::Responses);
        s.feed(&mut rec, &r.opening(0).unwrap(), 5).unwrap();
        s.feed(&mut rec, &r.reasoning_chunk("hm"), 10).unwrap();
        s.feed(&mut rec, &r.token_chunk("a", None), 20).unwrap();
        s.feed(&mut rec, &r.token_chunk_with_usage("b", Some("length"), 9, 3), 30).unwrap();
        s.finish(&mut rec, 31).unwrap();
        assert_eq!(rec.chunks_us, vec![10, 20, 30], "the opening events are not tokens");
        assert_eq!((rec.text.as_str(), rec.reasoning_chunks, rec.first_answer_us), ("ab", 1, Some(20)));
        assert_eq!(rec.usage, servebench_core::record::Usage { prompt_tokens: Some(9), completion_tokens: Some(3) });

        // Cut off before `response.completed`: failed, even though tokens came.
        let mut rec = record(3);
        let mut s = StreamRecorder::new(Api::Responses);
        s.feed(&mut rec, &r.token_chunk("a", None), 20).unwrap();
        let f = s.finish(&mut rec, 21).unwrap_err();
        assert_eq!((f.kind, Some(f.message)), (FailureKind::Stream, no_end_message(Api::Responses)));

        // An `error` event fails with its own message.
        let mut s = StreamRecorder::new(Api::Responses);
        let f = s.feed(&mut rec, &r.error("engine died", "InternalServerError", 500), 25).unwrap_err();
        assert_eq!((f.kind, f.message.as_str()), (FailureKind::InBandError, r#"engine died (code "500")"#));
    }

    #[test]
    fn a_messages_stream_takes_its_counts_from_start_and_end_and_needs_message_stop() {
        let r = ChunkRenderer::new(Api::Messages, "msg_1", 0, "m");
        let mut rec = record(2);
        let mut s = StreamRecorder::new(Api::Messages);
        s.feed(&mut rec, &r.opening(17).unwrap(), 5).unwrap();
        assert_eq!(rec.usage.prompt_tokens, Some(17), "message_start gives the prompt's count");
        s.feed(&mut rec, &r.token_chunk("a", None), 20).unwrap();
        s.feed(&mut rec, &r.token_chunk("b", None), 30).unwrap();
        s.feed(&mut rec, &r.usage_chunk(17, 2, Some("length")), 31).unwrap();
        s.finish(&mut rec, 32).unwrap();
        assert_eq!(rec.chunks_us, vec![20, 30]);
        assert_eq!(rec.usage, servebench_core::record::Usage { prompt_tokens: Some(17), completion_tokens: Some(2) });

        let mut rec = record(2);
        let mut s = StreamRecorder::new(Api::Messages);
        s.feed(&mut rec, &r.token_chunk("a", None), 20).unwrap();
        let f = s.finish(&mut rec, 21).unwrap_err();
        assert_eq!((f.kind, Some(f.message)), (FailureKind::Stream, no_end_message(Api::Messages)));
        let f = StreamRecorder::new(Api::Messages).feed(
            &mut rec,
            &r.error("slow down", "ServiceUnavailableError", 503),
            22,
        );
        assert_eq!(f.unwrap_err().message, "slow down (overloaded_error)");
    }

    #[test]
    fn vllm_server_timings_are_kept_in_seconds() {
        let mut rec = record(1);
        let mut s = StreamRecorder::new(Api::Completions);
        let frame = br#"data: {"choices":[],"metrics":{"queue_time_ms":2.0,"time_to_first_token_ms":30.0}}

"#;
        s.feed(&mut rec, frame, 5).unwrap();
        assert_eq!((rec.server_queue_s, rec.server_ttft_s), (Some(0.002), Some(0.03)));
    }

    #[test]
    fn a_timeout_past_what_a_record_keeps_gives_way_to_its_span() {
        let (limit, f) = time_limit(Some(Duration::from_secs(30)));
        assert_eq!(limit, Duration::from_secs(30));
        assert_eq!(f.message, "no complete response within the 30 s request timeout");
        // vLLM's default of 6 hours, or none: the record's 71.6 minutes come first.
        for timeout in [Some(Duration::from_secs(6 * 3600)), None] {
            let (limit, f) = time_limit(timeout);
            assert_eq!(limit.as_micros(), u128::from(u32::MAX));
            assert_eq!((f.kind, f.message.as_str()), (FailureKind::Timeout, OUTLIVED));
        }
    }

    #[test]
    fn micros_saturate() {
        assert_eq!(micros(Duration::from_micros(1500)), 1500);
        assert_eq!(micros(Duration::from_secs(10_000)), u32::MAX);
    }
}
