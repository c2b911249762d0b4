//! One admitted request on the HTTP side: the [`Admission`] that hears its tokens (and cancels
//! the request if dropped before the end), the SSE body of a streamed answer, and the collected
//! text of a non-streamed one.
//!
//! Frames are rendered here, on the connection's task, from a token's index alone: the pacer
//! sends only `(index, finish)`, so a step's delivery costs it one channel send per request.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use servebench_core::protocol::ChunkRenderer;
use tokio::sync::mpsc;

use super::pacer::{Event, ToPacer};
use super::text::TextModel;
use crate::engine::FinishReason;

/// `finish_reason` as OpenAI spells it.
pub(crate) fn finish_str(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Length => "length",
        FinishReason::Stop => "stop",
    }
}

/// A request handed to the pacer; dropping it before the last token cancels the request.
pub(crate) struct Admission {
    pub tag: u64,
    pub rx: mpsc::UnboundedReceiver<Event>,
    pub pacer: Sender<ToPacer>,
    pub ended: bool,
}

impl Drop for Admission {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.pacer.send(ToPacer::Cancel(self.tag));
        }
    }
}

/// How one answer is written.
pub(crate) struct Answer {
    pub text: Arc<TextModel>,
    /// Seeds the generated tokens of this request.
    pub salt: u64,
    pub prompt_tokens: u32,
}

/// What a non-streamed answer collected.
pub(crate) struct Collected {
    pub text: String,
    pub completion_tokens: u32,
    pub finish: FinishReason,
}

impl Admission {
    /// Waits for every token; `Err` carries the reason the request failed.
    pub async fn collect(mut self, answer: &Answer) -> Result<Collected, String> {
        let mut text = String::new();
        while let Some(event) = self.rx.recv().await {
            match event {
                Event::Token { first, index, finish } => {
                    for i in first..=index {
                        text.push_str(answer.text.token(answer.salt, i));
                    }
                    if let Some(finish) = finish {
                        self.ended = true;
                        return Ok(Collected { text, completion_tokens: index, finish });
                    }
                }
                Event::Failed(why) => {
                    self.ended = true;
                    return Err(why);
                }
            }
        }
        self.ended = true;
        Err("the simulated engine dropped the request".into())
    }
}

/// The SSE body of a streamed answer.
pub(crate) struct SseStream {
    admission: Admission,
    answer: Answer,
    renderer: ChunkRenderer,
    include_usage: bool,
    /// Usage inside the last token chunk, always (llama.cpp's completions).
    usage_in_last: bool,
    /// Frames ready to go (the role chunk with the first token; usage and `[DONE]` with the last).
    queued: VecDeque<Bytes>,
    finished: bool,
}

impl SseStream {
    pub fn new(
        admission: Admission,
        answer: Answer,
        renderer: ChunkRenderer,
        include_usage: bool,
        usage_in_last: bool,
    ) -> Self {
        Self {
            admission,
            answer,
            renderer,
            include_usage,
            usage_in_last,
            queued: VecDeque::with_capacity(4),
            finished: false,
        }
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Token { first, index, finish } => {
                if first == 1
                    && let Some(role) = self.renderer.opening(self.answer.prompt_tokens)
                {
                    self.queued.push_back(role);
                }
                // One token's text as it is; accepted drafts' joined into their chunk.
                let joined: String;
                let text = if first == index {
                    self.answer.text.token(self.answer.salt, index)
                } else {
                    joined = (first..=index).map(|i| self.answer.text.token(self.answer.salt, i)).collect();
                    &joined
                };
                let finish_reason = finish.map(finish_str);
                let chunk = if finish.is_some() && self.usage_in_last {
                    self.renderer.token_chunk_with_usage(text, finish_reason, self.answer.prompt_tokens, index)
                } else {
                    self.renderer.token_chunk(text, finish_reason)
                };
                self.queued.push_back(chunk);
                if finish.is_some() {
                    self.admission.ended = true;
                    if (self.include_usage || self.renderer.usage_always()) && !self.usage_in_last {
                        let usage = self.renderer.usage_chunk(self.answer.prompt_tokens, index, finish_reason);
                        self.queued.push_back(usage);
                    }
                    self.queued.extend(self.renderer.done());
                    self.finished = true;
                }
            }
            Event::Failed(why) => self.fail(&why),
        }
    }

    fn fail(&mut self, why: &str) {
        self.admission.ended = true;
        self.queued.push_back(self.renderer.error(why, "InternalServerError", 500));
        self.queued.extend(self.renderer.done());
        self.finished = true;
    }
}

impl Stream for SseStream {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(frame) = this.queued.pop_front() {
                return Poll::Ready(Some(Ok(frame)));
            }
            if this.finished {
                return Poll::Ready(None);
            }
            match this.admission.rx.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(event)) => this.on_event(event),
                Poll::Ready(None) => this.fail("the simulated engine dropped the request"),
            }
        }
    }
}
