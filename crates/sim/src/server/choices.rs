//! Completions and chat answers of any number of choices, with logprobs and echo when asked.
//!
//! A request of several choices (a batch of prompts, `n` > 1, or both) is served as vLLM serves
//! it: each choice is a request of its own to the engine (prompt `i`, sample `j`), answered
//! under one id as choice `i * n + j`, the usage summed (each prompt's tokens once, every
//! choice's completion tokens). A whole answer lists the choices in that order; a stream sends
//! each choice's chunks with its own `index` as they come, a chat choice opened by its role
//! chunk, then the usage (when asked) and `[DONE]`. A plain one-choice stream is rendered by
//! [`SseStream`](super::stream::SseStream) instead; these chunks are the same with another
//! index or logprobs.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::Stream;
use serde_json::{Value, json};
use servebench_core::config::Api;
use servebench_core::protocol::{done_frame, error_frame};

use super::logprobs::{self, Entry};
use super::pacer::Event;
use super::stream::{Admission, Answer, finish_str};
use super::text::Echo;

/// One choice: its request to the engine and what its answer starts with.
pub(crate) struct Choice {
    pub admission: Admission,
    pub answer: Answer,
    /// Its `index` in the answer: prompt position × `n` + sample.
    pub index: u32,
    /// The prompt, repeated before the completion (`echo`).
    pub echo: Option<Arc<Echo>>,
    /// Seeds the prompt tokens' logprobs (the same for every choice of one prompt).
    pub prompt_salt: u64,
}

/// What every chunk and the whole answer share.
pub(crate) struct Head {
    pub api: Api,
    pub id: String,
    pub created: u64,
    pub model: String,
    /// Candidates a token when logprobs are asked for.
    pub logprobs: Option<u32>,
    /// The prompts' tokens, each prompt counted once.
    pub prompt_tokens: u64,
}

impl Head {
    fn usage(&self, completion: u64) -> Value {
        json!({"prompt_tokens": self.prompt_tokens, "total_tokens": self.prompt_tokens + completion,
               "completion_tokens": completion})
    }

    /// The text and logprobs of tokens `first..=last` of a choice (with the prompt before them
    /// when `first` is 1 and it echoes), logprob offsets counted from `offset` characters.
    fn piece(&self, c: &Text<'_>, first: u32, last: u32, offset: usize) -> (String, Value) {
        let text_model = &c.answer.text;
        let mut text: String = (first..=last).map(|i| text_model.token(c.answer.salt, i)).collect();
        let mut entries: Vec<Entry> = Vec::new();
        if first == 1
            && let Some(echo) = c.echo
        {
            text.insert_str(0, &echo.text);
            if let Some(k) = self.logprobs {
                entries = logprobs::prompt(text_model, c.prompt_salt, &echo.tokens, k);
            }
        }
        let lp = match self.logprobs {
            Some(k) => {
                entries.extend(logprobs::sampled(text_model, c.answer.salt, first, last, k));
                logprobs::to_json(self.api, &entries, k, offset)
            }
            None => Value::Null,
        };
        (text, lp)
    }
}

/// What a choice's text is made of.
struct Text<'a> {
    answer: &'a Answer,
    echo: Option<&'a Echo>,
    prompt_salt: u64,
}

impl Choice {
    fn text(&self) -> Text<'_> {
        Text { answer: &self.answer, echo: self.echo.as_deref(), prompt_salt: self.prompt_salt }
    }
}

/// Waits for every choice and writes the whole answer.
pub(crate) async fn whole(head: &Head, choices: Vec<Choice>) -> Result<Value, String> {
    let mut out = Vec::with_capacity(choices.len());
    let mut completion = 0u64;
    for c in choices {
        let Choice { admission, answer, index, echo, prompt_salt } = c;
        let done = admission.collect(&answer).await?;
        completion += u64::from(done.completion_tokens);
        let finish = finish_str(done.finish);
        let text = Text { answer: &answer, echo: echo.as_deref(), prompt_salt };
        let (text, lp) = head.piece(&text, 1, done.completion_tokens, 0);
        out.push(match head.api {
            Api::Chat => json!({"index": index,
                "message": {"role": "assistant", "content": text, "refusal": null, "annotations": null,
                            "audio": null, "function_call": null, "tool_calls": [], "reasoning_content": null},
                "logprobs": lp, "finish_reason": finish, "stop_reason": null}),
            _ => json!({"index": index, "text": text, "logprobs": lp, "finish_reason": finish,
                        "stop_reason": null, "prompt_logprobs": null}),
        });
    }
    let mut usage = head.usage(completion);
    usage["prompt_tokens_details"] = Value::Null;
    Ok(match head.api {
        Api::Chat => json!({
            "id": head.id, "object": "chat.completion", "created": head.created, "model": head.model,
            "choices": out, "service_tier": null, "system_fingerprint": null, "usage": usage,
            "prompt_logprobs": null, "kv_transfer_params": null
        }),
        _ => json!({
            "id": head.id, "object": "text_completion", "created": head.created, "model": head.model,
            "choices": out, "usage": usage, "kv_transfer_params": null
        }),
    })
}

/// One choice of a stream, and how far it got.
struct Streaming {
    choice: Choice,
    /// Characters sent so far (completions' logprob offsets go on from there).
    sent_chars: usize,
    done: bool,
}

/// The SSE body of a streamed answer of several choices, or with logprobs or echo.
pub(crate) struct ChoicesStream {
    head: Head,
    choices: Vec<Streaming>,
    include_usage: bool,
    /// Usage inside the chunk that ends the last choice (llama.cpp's completions).
    usage_in_last: bool,
    open: usize,
    completion: u64,
    /// The choice polled first next time, so no choice starves the others.
    next: usize,
    queued: VecDeque<Bytes>,
    finished: bool,
}

impl ChoicesStream {
    pub fn new(head: Head, choices: Vec<Choice>, include_usage: bool, usage_in_last: bool) -> Self {
        let open = choices.len();
        let choices = choices.into_iter().map(|choice| Streaming { choice, sent_chars: 0, done: false }).collect();
        Self {
            head,
            choices,
            include_usage,
            usage_in_last,
            open,
            completion: 0,
            next: 0,
            queued: VecDeque::new(),
            finished: false,
        }
    }

    fn frame(&self, choices: Value, usage: Option<Value>) -> Bytes {
        let object = if self.head.api == Api::Chat { "chat.completion.chunk" } else { "text_completion" };
        let mut v = json!({"id": self.head.id, "object": object, "created": self.head.created,
                           "model": self.head.model, "choices": choices});
        if let Some(u) = usage {
            v["usage"] = u;
        }
        Bytes::from(format!("data: {v}\n\n"))
    }

    fn on_event(&mut self, at: usize, event: Event) {
        let (first, last, finish) = match event {
            Event::Token { first, index, finish } => (first, index, finish),
            Event::Failed(why) => return self.fail(&why),
        };
        let chat = self.head.api == Api::Chat;
        let s = &self.choices[at];
        let index = s.choice.index;
        if first == 1 && chat {
            let role = json!([{"index": index, "delta": {"role": "assistant", "content": ""}, "logprobs": null,
                               "finish_reason": null}]);
            let frame = self.frame(role, None);
            self.queued.push_back(frame);
        }
        let (text, lp) = self.head.piece(&s.choice.text(), first, last, s.sent_chars);
        let finish_reason = finish.map(finish_str);
        let mut choice = if chat {
            json!({"index": index, "delta": {"content": text}, "logprobs": lp, "finish_reason": finish_reason})
        } else {
            json!({"index": index, "text": text, "logprobs": lp, "finish_reason": finish_reason, "stop_reason": null})
        };
        if chat && finish.is_some() {
            choice["stop_reason"] = Value::Null;
        }
        let s = &mut self.choices[at];
        s.sent_chars += text.chars().count();
        let mut usage = None;
        if finish.is_some() {
            s.done = true;
            s.choice.admission.ended = true;
            self.open -= 1;
            self.completion += u64::from(last);
            if self.open == 0 && self.usage_in_last {
                usage = Some(self.head.usage(self.completion));
            }
        }
        let frame = self.frame(json!([choice]), usage);
        self.queued.push_back(frame);
        if self.open == 0 {
            if self.include_usage && !self.usage_in_last {
                let frame = self.frame(json!([]), Some(self.head.usage(self.completion)));
                self.queued.push_back(frame);
            }
            self.queued.push_back(done_frame());
            self.finished = true;
        }
    }

    /// Ends the stream with vLLM's error event; the choices still running are cancelled when
    /// the stream is dropped.
    fn fail(&mut self, why: &str) {
        self.queued.push_back(error_frame(why, "InternalServerError", 500));
        self.queued.push_back(done_frame());
        self.finished = true;
    }
}

impl Stream for ChoicesStream {
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
            let n = this.choices.len();
            let mut heard = None;
            for k in 0..n {
                let at = (this.next + k) % n;
                let s = &mut this.choices[at];
                if s.done {
                    continue;
                }
                match s.choice.admission.rx.poll_recv(cx) {
                    Poll::Pending => {}
                    Poll::Ready(event) => {
                        heard = Some((at, event));
                        break;
                    }
                }
            }
            match heard {
                None => return Poll::Pending,
                Some((at, event)) => {
                    this.next = (at + 1) % n;
                    match event {
                        Some(event) => this.on_event(at, event),
                        None => this.fail("the simulated engine dropped the request"),
                    }
                }
            }
        }
    }
}
