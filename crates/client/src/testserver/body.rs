//! The test server's streamed body: the frames of one scripted response, each released at its
//! due time, with the moment every token chunk is handed to the connection recorded.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use hyper::body::Frame;
use servebench_core::protocol::ChunkRenderer;
use tokio::time::Sleep;

use super::{Script, UsagePlacement};

/// One step of a scripted stream.
#[derive(Debug)]
pub(super) enum Step {
    /// A chunk that carries tokens: its write time is part of the truth.
    Token(Bytes),
    /// Any other frame (role, usage, error, `[DONE]`).
    Other(Bytes),
    /// Break the connection off mid-stream.
    Break,
}

/// The steps of `script`'s stream with their due times (absolute, from `arrived`).
pub(super) fn plan_steps(script: &Script, arrived: Instant, renderer: &ChunkRenderer) -> VecDeque<(Instant, Step)> {
    let mut steps = VecDeque::new();
    if script.opening
        && let Some(role) = renderer.opening(script.prompt_tokens)
    {
        steps.push_back((arrived, Step::Other(role)));
    }
    let per_chunk = script.tokens_per_chunk.max(1);
    let chunks = script.tokens.div_ceil(per_chunk);
    let mut due = arrived + script.ttft;
    let mut sent = 0;
    for j in 0..chunks {
        due = arrived + script.ttft + script.itl * j;
        if script.error_after == Some(j) {
            let error = renderer.error("scripted in-band error", "InternalServerError", 500);
            steps.push_back((due, Step::Other(error)));
            steps.extend(renderer.done().map(|d| (due, Step::Other(d))));
            return steps;
        }
        if script.close_after == Some(j) {
            steps.push_back((due, Step::Break));
            return steps;
        }
        let n = per_chunk.min(script.tokens - sent);
        let text: String = (sent..sent + n).map(|k| format!(" t{k}")).collect();
        sent += n;
        let last = j + 1 == chunks;
        let finish = last.then_some("length");
        let frame = match (last, script.usage) {
            (true, UsagePlacement::InLastChunk) => {
                renderer.token_chunk_with_usage(&text, finish, script.prompt_tokens, script.tokens)
            }
            _ if j < script.reasoning_chunks && !last => renderer.reasoning_chunk(&text),
            _ => renderer.token_chunk(&text, finish),
        };
        steps.push_back((due, Step::Token(frame)));
    }
    if script.error_after.is_some_and(|e| e >= chunks) {
        let error = renderer.error("scripted in-band error", "InternalServerError", 500);
        steps.push_back((due, Step::Other(error)));
    } else if script.close_after.is_some_and(|c| c >= chunks) {
        steps.push_back((due, Step::Break));
        return steps;
    }
    if script.usage == UsagePlacement::Separate {
        let usage = renderer.usage_chunk(script.prompt_tokens, script.tokens, Some("length"));
        steps.push_back((due, Step::Other(usage)));
    }
    steps.extend(renderer.done().map(|d| (due, Step::Other(d))));
    steps
}

/// Called once when the body ends or is dropped, with the token-chunk write times.
pub(super) type OnEnd = Box<dyn FnOnce(Vec<Instant>) + Send>;

/// A break of the connection comes at least this long after the frame before it, so that
/// frame has been flushed to the socket (a body error makes hyper drop what it still buffers).
const BREAK_AFTER_WRITE: std::time::Duration = std::time::Duration::from_millis(1);

/// A body that releases `steps` on time.
pub(super) struct ScriptedBody {
    steps: VecDeque<(Instant, Step)>,
    sleep: Pin<Box<Sleep>>,
    written: Vec<Instant>,
    last_frame: Option<Instant>,
    on_end: Option<OnEnd>,
}

impl ScriptedBody {
    pub(super) fn new(steps: VecDeque<(Instant, Step)>, on_end: OnEnd) -> Self {
        Self {
            written: Vec::with_capacity(steps.len()),
            steps,
            sleep: Box::pin(tokio::time::sleep_until(Instant::now().into())),
            last_frame: None,
            on_end: Some(on_end),
        }
    }

    fn end(&mut self) {
        if let Some(f) = self.on_end.take() {
            f(std::mem::take(&mut self.written));
        }
    }
}

impl hyper::body::Body for ScriptedBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = &mut *self;
        let Some((due, step)) = this.steps.front() else {
            this.end();
            return Poll::Ready(None);
        };
        let mut due = *due;
        if matches!(step, Step::Break)
            && let Some(last) = this.last_frame
        {
            due = due.max(last + BREAK_AFTER_WRITE);
        }
        if Instant::now() < due {
            this.sleep.as_mut().reset(due.into());
            if this.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        match this.steps.pop_front() {
            Some((_, Step::Token(b))) => {
                let now = Instant::now();
                this.written.push(now);
                this.last_frame = Some(now);
                Poll::Ready(Some(Ok(Frame::data(b))))
            }
            Some((_, Step::Other(b))) => {
                this.last_frame = Some(Instant::now());
                Poll::Ready(Some(Ok(Frame::data(b))))
            }
            Some((_, Step::Break)) => {
                this.end();
                Poll::Ready(Some(Err(io::Error::other("scripted break of the connection"))))
            }
            None => {
                this.end();
                Poll::Ready(None)
            }
        }
    }
}

impl Drop for ScriptedBody {
    fn drop(&mut self) {
        self.end();
    }
}
