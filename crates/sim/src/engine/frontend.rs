//! The API server in front of the engine: when the scheduler sees a request, and when the
//! client sees a token.
//!
//! vLLM's API server is one Python process with two workers that matter here. Its event loop
//! does the work on requests (parsing, validation, hand-off to the engine) and on streamed tokens
//! (detokenizing, writing the chunks), so a burst of arrivals reaches the scheduler spread by
//! that work, behind the tokens of steps that ended before they arrived or while they waited.
//! Each streamed token's work is counted once: tokens written while no request waits hold back
//! only a request that arrives during the writing. Tokenizing
//! a prompt's text it hands to one worker thread ([`super::tokenizer`]), where the tokenizer's
//! Rust code runs without the interpreter's lock: prompts are tokenized beside the loop's work,
//! not in its queue. Its output handler takes the engine's outputs in order as they come, so a
//! step's tokens reach the client at the step's end unless the writing of earlier steps' tokens
//! still holds it ([`Frontend::streamed_at`]); the engine does not wait for it.
//!
//! A request is taken in by the loop, then tokenized, then handed on. A chat request whose
//! messages the server renders with the model's Jinja template is taken in differently: vLLM
//! (0.9 to 0.11, `_preprocess_chat` in `entrypoints/openai/serving_engine.py`) renders the
//! template with a plain call in the event loop and only then awaits the tokenizer, so every
//! request that arrives while the loop is rendering is rendered before any of them is
//! tokenized. A burst of such requests reaches the tokenizing thread together, after the loop's
//! work on all of them. A prompt the server builds as token ids on the loop itself (gpt-oss's
//! chat, which OpenAI's harmony library renders and tokenizes at once) is all loop work: its
//! caller passes no tokenizing, and it is handed on when the loop is done with it.
//!
//! A streamed token's work is of two kinds: processing the engine's output (detokenizing,
//! handing it to the request's output collector) and writing its chunk (the response object,
//! its JSON, the server-sent event). When a request's next token comes while its last chunk
//! still waits to be written, vLLM's collector merges the two into one chunk, so a loop that
//! has fallen behind the steps writes fewer, longer chunks and pays only the processing for
//! the tokens that came meanwhile ([`CHUNK_SHARE`]).

use super::tokenizer::{Microbatch, TokenizerThread};

/// The share of a streamed token's work on the loop that writes its chunk, which a token
/// merged into a chunk still waiting to be written does not pay again. Measured on vLLM
/// 0.11.0's own server in front of a stand-in engine (`scripts/sim/frontend_probe.sh`;
/// CALIBRATION.md, "vLLM's API server, measured"): a streamed token costs the server 50 to
/// 57 µs of CPU where the loop keeps up with the steps (completions, 64 and 256 streams) and
/// 17 to 24 µs where the steps outrun it and its chunks carry several tokens, so about two
/// thirds of the cost is the chunk's (chat completions: 76 to 78 and 19 to 27 µs).
pub(crate) const CHUNK_SHARE: f64 = 0.65;

/// The API server's event loop and its tokenizing thread, in engine time (ns).
#[derive(Debug)]
pub(crate) struct Frontend {
    /// When the event loop has taken in every request queued on it, the streamed tokens that
    /// came while any was waiting included (the loop writes them first). Streamed tokens alone
    /// are the writer's queue (`out_free_ns`), not this one's.
    free_ns: u64,
    /// When the loop is done with the last request taken in, by its own work and what waited
    /// ahead of it when it came: streamed tokens queued before then hold back the requests
    /// that come after it.
    taken_in_ns: u64,
    /// The last step's streamed tokens, queued at the step's end: (end, work).
    backlog: Option<(u64, u64)>,
    /// Chat requests being rendered together, in arrival order: (slot, tokenizing work).
    rendering: Vec<(u32, u64)>,
    /// When the loop has written every streamed token queued so far (its output handler takes
    /// the engine's outputs as they come, between the requests it takes in).
    out_free_ns: u64,
    /// When the last step's streamed tokens leave the loop: its end until they are queued, then
    /// when the writing of earlier steps' tokens lets them go.
    leaves_ns: u64,
    /// When the loop has rendered every request of `rendering` (never after `free_ns`: streamed
    /// tokens queued since only push `free_ns` on).
    render_end_ns: u64,
    /// Work queued on the loop so far, ns.
    work_ns: u64,
    /// The tokenizing thread, with the prompts the loop has queued for it.
    tokenizer: TokenizerThread,
}

impl Frontend {
    /// An idle frontend whose tokenizing thread groups prompts as `batching` says.
    pub fn new(batching: Microbatch) -> Self {
        Self {
            free_ns: 0,
            taken_in_ns: 0,
            backlog: None,
            rendering: Vec::new(),
            out_free_ns: 0,
            leaves_ns: 0,
            render_end_ns: 0,
            work_ns: 0,
            tokenizer: TokenizerThread::new(batching),
        }
    }

    /// Queues the last step's streamed tokens (`work` ns of it, the step having ended at `end`,
    /// each token's chunk written apart).
    pub fn stream(&mut self, end: u64, work: u64) {
        self.leaves_ns = end;
        if work > 0 {
            self.backlog = Some((end, work));
        }
    }

    /// When the last step's streamed tokens leave the frontend: at the step's end, or once the
    /// tokens of earlier steps are written where that takes longer (its output handler takes
    /// the engine's outputs in order, as they come, between the requests it takes in). Queues
    /// them if they are not yet (the caller has taken in every request that arrived before the
    /// step ended). A frontend slower than the steps spaces every step's tokens by the time it
    /// takes to write a step's worth; one that keeps up delays none.
    pub fn streamed_at(&mut self) -> u64 {
        self.catch_up(u64::MAX);
        self.leaves_ns
    }

    /// Puts the last step's streamed tokens on the queue if the step ended by `until_ns`:
    /// requests that arrived during the step go before them, those after it behind. They go to
    /// the writer, after the tokens of earlier steps; requests still waiting to be taken in
    /// then wait for them too. A request arriving later waits for the writer only while it
    /// writes (`take_in`): the loop's work on streamed tokens is counted once, so a frontend
    /// that streams most of the time does not build a queue of requests that is not there.
    pub fn catch_up(&mut self, until_ns: u64) {
        if let Some((end, work)) = self.backlog
            && end <= until_ns
        {
            // Tokens that come while the writer is still busy with earlier steps' go out in
            // the chunks already waiting: only their processing is added.
            let work = if self.out_free_ns > end { merged(work) } else { work };
            self.work_ns = self.work_ns.saturating_add(work);
            if self.taken_in_ns > end {
                self.free_ns = self.free_ns.saturating_add(work);
            }
            self.leaves_ns = self.out_free_ns.max(end);
            self.out_free_ns = self.leaves_ns.saturating_add(work);
            self.backlog = None;
        }
    }

    /// Takes in request `slot` (`work` ns on the loop) and queues its prompt for the
    /// tokenizing thread (`tokenize` ns of tokenizing alone): `None`, it is handed on when its
    /// batch returns ([`Frontend::close_by`]). A prompt with nothing to tokenize (token ids made
    /// on the loop) never waits for the thread: handed on when the loop is done with it.
    pub fn take_in(&mut self, slot: u32, arrived_ns: u64, work: u64, tokenize: u64) -> Option<u64> {
        let taken_in = self.loop_work(arrived_ns, work);
        self.tokenizer.queue(slot, taken_in, tokenize)
    }

    /// The processor's `work` on a request's images, on the loop once its prompt is tokenized
    /// at `tokenized_ns`, behind what the loop is doing then. Returns when it is done.
    pub fn process_inputs(&mut self, tokenized_ns: u64, work: u64) -> u64 {
        self.loop_work(tokenized_ns, work)
    }

    /// A request's own `work` on the loop, from its arrival: after the requests before it and
    /// the tokens the writer is writing then. Returns when the loop is done with it.
    fn loop_work(&mut self, arrived_ns: u64, work: u64) -> u64 {
        self.work_ns = self.work_ns.saturating_add(work);
        self.catch_up(arrived_ns);
        self.free_ns = arrived_ns.max(self.free_ns).max(self.out_free_ns).saturating_add(work);
        self.taken_in_ns = self.free_ns;
        self.free_ns
    }

    /// Renders a chat request's template (`render` ns) with the others that arrived while the
    /// loop was rendering; its tokenizing (`tokenize` ns) waits until all are rendered. The
    /// caller first closes a burst rendered by the arrival ([`Frontend::close_by`]).
    pub fn render(&mut self, slot: u32, arrived_ns: u64, render: u64, tokenize: u64) {
        self.render_end_ns = self.loop_work(arrived_ns, render);
        self.rendering.push((slot, tokenize));
    }

    /// Hands on what is settled by `t_ns` (the caller has taken in every request that arrived
    /// before it): the burst being rendered, if rendered by then, goes to the tokenizing thread,
    /// and every batch of the thread that no later prompt can join is tokenized. Returns each
    /// request handed on with the time it is.
    pub fn close_by(&mut self, t_ns: u64) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        if !self.rendering.is_empty() && self.render_end_ns <= t_ns {
            let rendered = self.render_end_ns;
            for (slot, tokenize) in std::mem::take(&mut self.rendering) {
                out.extend(self.tokenizer.queue(slot, rendered, tokenize).map(|t| (slot, t)));
            }
        }
        self.tokenizer.close_by(t_ns, &mut out);
        out
    }

    /// When the next request held here would be handed on as things stand (no sooner, if
    /// requests that arrive later join its batch); `None` if none is held.
    pub fn next_hand_off(&self) -> Option<u64> {
        let rendered = self.render_end_ns;
        let to_tokenize = self.rendering.iter().filter(|&&(_, k)| k > 0).map(|&(_, k)| (rendered, k));
        let untokenized = self.rendering.iter().any(|&(_, k)| k == 0).then_some(rendered);
        self.tokenizer.next_hand_off(to_tokenize).into_iter().chain(untokenized).min()
    }

    /// Drops a request being rendered or tokenized; false if it is not among them.
    pub fn forget(&mut self, slot: u32) -> bool {
        let before = self.rendering.len();
        self.rendering.retain(|&(s, _)| s != slot);
        self.rendering.len() != before || self.tokenizer.forget(slot)
    }

    /// Requests being rendered or tokenized.
    pub fn holding(&self) -> usize {
        self.rendering.len() + self.tokenizer.queued()
    }

    /// Work queued on the loop so far, ns.
    pub fn work_ns(&self) -> u64 {
        self.work_ns
    }

    /// Time the tokenizing thread has spent in tokenizer calls so far, ns.
    pub fn tokenizer_busy_ns(&self) -> u64 {
        self.tokenizer.busy_ns()
    }
}

/// The work of streamed tokens that join chunks already waiting to be written.
pub(super) fn merged(work: u64) -> u64 {
    (work as f64 * (1.0 - CHUNK_SHARE)).round() as u64
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn serial() -> Frontend {
        Frontend::new(Microbatch::one_at_a_time())
    }

    /// Takes a request in; one prompt at a time, the thread's call for it is settled at once.
    fn take(f: &mut Frontend, at: u64, work: u64, tokenize: u64) -> u64 {
        f.take_in(0, at, work, tokenize).unwrap_or_else(|| {
            let mut out = Vec::new();
            f.tokenizer.close_by(0, &mut out);
            out[0].1
        })
    }

    /// Hand-offs of `arrivals` (time, render or take-in work, tokenizing work), all chat when
    /// `chat`, else all one at a time; by arrival index.
    fn hand_offs(arrivals: &[(u64, u64, u64)], chat: bool) -> Vec<u64> {
        let mut f = serial();
        let mut out = vec![0; arrivals.len()];
        for (i, &(at, work, tokenize)) in arrivals.iter().enumerate() {
            for (slot, t) in f.close_by(at) {
                out[slot as usize] = t;
            }
            if chat {
                f.render(i as u32, at, work, tokenize);
            } else if let Some(t) = f.take_in(i as u32, at, work, tokenize) {
                out[i] = t;
            }
        }
        for (slot, t) in f.close_by(u64::MAX) {
            out[slot as usize] = t;
        }
        out
    }

    proptest! {
        #[test]
        fn a_rendered_burst_is_never_handed_on_sooner_than_one_at_a_time(
            gaps in prop::collection::vec(
                (0u64..20_000, 1u64..10_000, prop_oneof![Just(0u64), 1u64..5_000]),
                1..40,
            ),
        ) {
            let mut t = 0;
            let arrivals: Vec<(u64, u64, u64)> = gaps.iter().map(|&(gap, w, k)| { t += gap; (t, w, k) }).collect();
            let (chat, one) = (hand_offs(&arrivals, true), hand_offs(&arrivals, false));
            for (i, &(at, work, tokenize)) in arrivals.iter().enumerate() {
                prop_assert!(chat[i] >= at + work + tokenize, "{i}: handed on before its own work was done");
                prop_assert!(one[i] >= at + work + tokenize, "{i}: handed on before its own work was done");
                prop_assert!(chat[i] >= one[i], "{i}: a burst made a request sooner");
                // Each worker is one queue: prompts the thread tokenizes are handed on in
                // arrival order, and so are prompts made on the loop alone, which may pass a
                // prompt still being tokenized.
                let before = arrivals[..i].iter().rposition(|&(_, _, k)| (k == 0) == (tokenize == 0));
                if let Some(j) = before {
                    prop_assert!(chat[i] >= chat[j], "{i}: handed on before {j} of its kind");
                    prop_assert!(one[i] >= one[j], "{i}: handed on before {j} of its kind");
                }
            }
            // Each worker does its share in turn: the last hand-off comes no sooner than either
            // worker's whole share after the first arrival, and no later than both together
            // after the last.
            let loop_work: u64 = arrivals.iter().map(|&(_, w, _)| w).sum();
            let tokenizing: u64 = arrivals.iter().map(|&(_, _, k)| k).sum();
            let last = arrivals.last().unwrap().0;
            for hand_offs in [&chat, &one] {
                let end = *hand_offs.iter().max().unwrap();
                prop_assert!(end >= arrivals[0].0 + loop_work.max(tokenizing));
                prop_assert!(end <= last + loop_work + tokenizing);
            }
        }
    }

    proptest! {
        #[test]
        fn a_writer_behind_the_steps_merges_their_tokens_and_keeps_pace(
            steps in prop::collection::vec((1u64..5_000, 0u64..10_000), 1..200),
        ) {
            // Steps `gap` apart whose tokens take `work` to write in chunks of their own.
            let mut f = serial();
            let (mut end, mut last, mut written) = (0, 0, 0);
            let mut behind_at_most = 0;
            for &(gap, work) in &steps {
                end += gap;
                f.stream(end, work);
                let left = f.streamed_at();
                prop_assert!(left >= end, "tokens left before their step ended");
                if work == 0 {
                    // Nothing to write: the step's (no) tokens leave with its end.
                    continue;
                }
                prop_assert!(left >= last, "tokens left before an earlier step's");
                last = left;
                written += work;
                // Where merged tokens cost no more than the time between steps, the writer falls
                // no further behind than the longest step's whole writing (vLLM's server kept
                // its clients at the engine's pace when 88 % busy, the probe's burst of 1,000).
                if steps.iter().all(|&(g, w)| merged(w) <= g) {
                    behind_at_most = behind_at_most.max(work);
                    prop_assert!(left - end <= behind_at_most, "{} behind", left - end);
                }
            }
            // The loop's work is what it wrote: no more than every chunk apart, and no less than
            // the tokens' processing alone.
            prop_assert!(f.work_ns() <= written);
            prop_assert!(f.work_ns() >= merged(written).saturating_sub(steps.len() as u64));
        }
    }

    #[test]
    fn a_burst_of_chat_requests_is_handed_on_after_all_are_rendered() {
        let mut f = serial();
        for slot in 0..3 {
            f.render(slot, 0, 5_000, 1_000);
        }
        // Still rendering at 14 µs: nothing is handed on; a request arriving then joins.
        assert!(f.close_by(14_999).is_empty());
        f.render(3, 14_999, 5_000, 1_000);
        assert_eq!(f.next_hand_off(), Some(21_000));
        assert_eq!(f.close_by(20_000), vec![(0, 21_000), (1, 22_000), (2, 23_000), (3, 24_000)]);
        assert_eq!(f.holding(), 0);
        // One arriving later is rendered on the loop as soon as it comes (the tokenizing is
        // another thread's), then tokenized on its own.
        assert!(f.close_by(22_000).is_empty());
        f.render(4, 22_000, 5_000, 1_000);
        assert_eq!(f.close_by(u64::MAX), vec![(4, 28_000)]);
        assert_eq!((f.work_ns(), f.tokenizer_busy_ns()), (5 * 5_000, 5 * 1_000));
    }

    #[test]
    fn a_rendered_burst_reaches_the_batcher_together_and_shares_its_calls() {
        let mut f = Frontend::new(Microbatch::vllm(4.0));
        for slot in 0..4 {
            f.render(slot, 0, 5_000, 1_000_000);
        }
        // Rendered by 20 µs; the batcher waits its 2 ms for more, then tokenizes the four at
        // once on four cores.
        assert_eq!(f.next_hand_off(), Some(20_000 + 2_000_000 + 1_000_000));
        assert!(f.close_by(2_020_000).is_empty(), "a prompt queued by then could still join");
        let handed: Vec<u64> = f.close_by(2_020_001).into_iter().map(|(_, t)| t).collect();
        assert_eq!(handed, vec![3_020_000; 4]);
        assert_eq!((f.holding(), f.tokenizer_busy_ns()), (0, 1_000_000));
        // A completion's prompt is queued by the loop and waits for its own batch.
        assert_eq!(f.take_in(9, 4_000_000, 1_000, 300), None);
        assert_eq!(f.holding(), 1);
        assert_eq!(f.close_by(u64::MAX), vec![(9, 4_001_000 + 2_000_000 + 300)]);
    }

    #[test]
    fn one_at_a_time_each_request_is_taken_in_then_tokenized() {
        let mut f = serial();
        assert_eq!(take(&mut f, 0, 1_000, 5_000), 6_000);
        // The loop takes the second in while the first is tokenized; its tokenizing waits.
        assert_eq!(take(&mut f, 0, 1_000, 5_000), 11_000);
        assert_eq!(take(&mut f, 20_000, 1_000, 5_000), 26_000);
        // Prompts on the loop (gpt-oss's chat) are loop work alone, and do not wait for a
        // prompt the thread is still tokenizing.
        assert_eq!(take(&mut f, 30_000, 6_000, 0), 36_000);
        assert_eq!(take(&mut f, 40_000, 1_000, 50_000), 91_000);
        assert_eq!(take(&mut f, 42_000, 6_000, 0), 48_000);
    }

    #[test]
    fn a_step_s_tokens_go_after_requests_that_arrived_during_the_step() {
        let mut f = serial();
        f.stream(10_000, 3_000);
        assert_eq!(take(&mut f, 9_000, 1_000, 0), 10_000, "arrived during the step: before its tokens");
        assert_eq!(take(&mut f, 10_000, 1_000, 0), 14_000, "after the step: behind its 3 µs of tokens");
        // A burst being rendered when a step's tokens come waits for them too.
        f.stream(20_000, 4_000);
        f.render(0, 19_000, 2_000, 500);
        f.render(1, 20_500, 2_000, 500);
        assert_eq!(f.close_by(u64::MAX), vec![(0, 27_500), (1, 28_000)]);
        // The loop's work: two requests taken in, two steps' tokens, two rendered.
        assert_eq!(f.work_ns(), 2 * 1_000 + 3_000 + 4_000 + 2 * 2_000);
        assert_eq!(f.tokenizer_busy_ns(), 2 * 500);
    }

    #[test]
    fn tokenizing_does_not_hold_the_loop_nor_the_loop_the_tokenizing() {
        let mut f = serial();
        // A long prompt is tokenized for 30 µs after 1 µs on the loop.
        assert_eq!(take(&mut f, 0, 1_000, 30_000), 31_000);
        // A step ending meanwhile writes its tokens at once.
        f.stream(5_000, 2_000);
        assert_eq!(f.streamed_at(), 5_000);
        // The next request is taken in by the loop after the step's tokens, then waits for
        // the thread.
        assert_eq!(take(&mut f, 6_000, 1_000, 100), 31_100);
        // The loop being behind with streamed tokens delays a request's taking in, not the
        // prompt tokenized before it.
        f.stream(40_000, 20_000);
        assert_eq!(take(&mut f, 40_000, 1_000, 100), 61_100);
    }

    #[test]
    fn streamed_tokens_leave_at_the_step_s_end_unless_earlier_steps_tokens_hold_the_writer() {
        let mut f = serial();
        // Nothing to write: a step's tokens leave with its end, and work taken in before it
        // (a request on the loop) does not hold them.
        f.stream(5_000, 0);
        assert_eq!(f.streamed_at(), 5_000);
        take(&mut f, 0, 50_000, 0);
        f.stream(10_000, 3_000);
        assert_eq!(f.streamed_at(), 10_000);
        // Steps every 2 µs whose tokens take 3 µs to write in chunks of their own. A step that
        // ends while the writer is busy leaves when it is free, its tokens merged into the
        // chunks waiting (only their processing, `m`, is added); once the writer has caught up,
        // the next step's tokens are written whole again.
        let m = merged(3_000);
        assert!(m < 2_000 && m > 0, "{m}");
        let mut left = Vec::new();
        for k in 1..=4 {
            f.stream(20_000 + 2_000 * k, 3_000);
            left.push(f.streamed_at());
        }
        assert_eq!(left, vec![22_000, 25_000, 25_000 + m, 28_000]);
        // The writing also stays in the one queue that takes requests in, merged as written.
        assert_eq!(take(&mut f, 34_000, 1_000, 0), 50_000 + 3_000 + 2 * 3_000 + 2 * m + 1_000);
        // A request that arrives as a step ends puts the step's tokens on the queues first; they
        // still wait for the writer (busy until 31 µs), and merge.
        f.stream(30_000, 3_000);
        take(&mut f, 30_000, 1_000, 0);
        assert_eq!(f.streamed_at(), 31_000);
        f.stream(33_000, 3_000);
        assert_eq!(f.streamed_at(), 33_000);
    }

    #[test]
    fn tokens_written_while_no_request_waits_hold_back_no_later_request() {
        let mut f = serial();
        // Ten requests at once, 1 µs each on the loop: taken in by 10 µs.
        for slot in 0..10 {
            f.take_in(slot, 0, 1_000, 0);
        }
        // Then a step every 1 µs for 100 µs whose tokens take 0.99 µs to write: the writer
        // keeps up, and only the tokens of the steps that ended while requests waited to be
        // taken in (the first nine) hold back requests that come later. (Counted in one queue
        // with the requests, the 10 µs they took would still stand 9 µs ahead at 100 µs.)
        for k in 1..=100 {
            f.stream(k * 1_000, 990);
            assert_eq!(f.streamed_at(), k * 1_000);
        }
        // A request at 101 µs finds the loop free: it is handed on after its own work.
        assert_eq!(take(&mut f, 101_000, 1_000, 0), 102_000);
        // One arriving while the writer is busy waits for the tokens being written.
        f.stream(200_000, 5_000);
        assert_eq!(take(&mut f, 201_000, 1_000, 0), 206_000);
        // The loop's own work counts each streamed token once.
        assert_eq!(f.work_ns(), 12 * 1_000 + 100 * 990 + 5_000);
    }

    #[test]
    fn a_request_dropped_while_rendering_is_not_handed_on() {
        let mut f = serial();
        f.render(0, 0, 1_000, 0);
        f.render(1, 0, 1_000, 0);
        assert!(f.forget(0) && !f.forget(0));
        assert_eq!(f.close_by(u64::MAX), vec![(1, 2_000)]);
        assert_eq!(f.next_hand_off(), None);
    }
}
