//! The API server's tokenizing thread: prompts its event loop queues, tokenized in batches.
//!
//! From 0.10 (`AsyncMicrobatchTokenizer`: `vllm/utils/__init__.py` in 0.10 and 0.11,
//! `vllm/utils/async_utils.py` in 0.13 and 0.16) vLLM's API server queues every prompt's text
//! for one batcher. The batcher takes the first prompt queued, waits up to 2 ms for more (at
//! most 32 in all), then tokenizes them in one call on its one worker thread, and every prompt
//! of the batch is handed on when the call returns. The call goes to the Rust tokenizer's
//! batched encode, which releases the interpreter's lock and spreads the prompts over the host's
//! cores (measured on this repository's 2-core machine with gpt-oss's tokenizer: 32 prompts in
//! one call take 0.47 to 0.57 of their time one by one, the two cores' worth). Before 0.10 a
//! one-thread executor took the prompts one at a time: no wait, batches of one.

use std::collections::VecDeque;

/// The first vLLM release whose API server batches the prompts it tokenizes (0.10).
pub const MICROBATCH_SINCE: (u32, u32) = (0, 10);

/// How the tokenizing thread groups the prompts queued for it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Microbatch {
    /// How long the batcher waits for more prompts after the first, ns.
    pub window_ns: u64,
    /// The most prompts one call takes.
    pub max_prompts: usize,
    /// How many prompts of a batch the host tokenizes at once (its cores, at their efficiency
    /// together); at least 1.
    pub parallel: f64,
}

impl Microbatch {
    /// vLLM's batcher from 0.10: 2 ms, 32 prompts, spread over `parallel` of the host's cores.
    pub fn vllm(parallel: f64) -> Self {
        Self { window_ns: 2_000_000, max_prompts: 32, parallel: parallel.max(1.0) }
    }

    /// One prompt at a time as it comes (vLLM before 0.10).
    pub fn one_at_a_time() -> Self {
        Self { window_ns: 0, max_prompts: 1, parallel: 1.0 }
    }

    /// How long one call takes on prompts each of which takes `works` ns alone: one prompt its
    /// own time; several the longest of them, or their sum over the prompts tokenized at once,
    /// whichever is longer.
    pub fn call_ns(&self, works: impl IntoIterator<Item = u64>) -> u64 {
        let mut call = Call::default();
        works.into_iter().for_each(|w| call.add(w));
        self.time(&call)
    }

    fn time(&self, call: &Call) -> u64 {
        if call.n <= 1 {
            return call.total;
        }
        let at_once = self.parallel.min(call.n as f64);
        call.longest.max((call.total as f64 / at_once).round() as u64)
    }
}

/// The prompts of one call: how many, the longest's work and all their work, ns.
#[derive(Clone, Copy, Debug, Default)]
struct Call {
    n: usize,
    longest: u64,
    total: u64,
}

impl Call {
    fn add(&mut self, work: u64) {
        self.n += 1;
        self.longest = self.longest.max(work);
        self.total = self.total.saturating_add(work);
    }
}

/// The batch at the head of the queue, as the prompts queued so far make it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Batch {
    /// Prompts in it.
    len: usize,
    /// When the call begins (the window's end, or when the batch filled).
    start_ns: u64,
    /// When the call returns and its prompts are handed on.
    end_ns: u64,
}

/// The thread and its queue, in engine time (ns).
#[derive(Debug)]
pub(crate) struct TokenizerThread {
    batching: Microbatch,
    /// Prompts queued and not yet in a call, in the order queued: (slot, queued at, work alone).
    queued: VecDeque<(u32, u64, u64)>,
    /// When the last call returns.
    free_ns: u64,
    /// Time spent in calls so far, ns.
    busy_ns: u64,
}

impl TokenizerThread {
    pub fn new(batching: Microbatch) -> Self {
        Self { batching, queued: VecDeque::new(), free_ns: 0, busy_ns: 0 }
    }

    /// Queues a prompt at `at_ns` (never before one queued earlier) whose tokenizing alone takes
    /// `work` ns: `None`, it is handed on when its batch returns ([`TokenizerThread::close_by`]).
    /// A prompt with nothing to tokenize (token ids made on the loop) never waits for the
    /// thread: handed on at `at_ns`.
    pub fn queue(&mut self, slot: u32, at_ns: u64, work: u64) -> Option<u64> {
        if work == 0 {
            return Some(at_ns);
        }
        let at = self.queued.back().map_or(at_ns, |&(_, last, _)| at_ns.max(last));
        self.queued.push_back((slot, at, work));
        None
    }

    /// Closes every batch no prompt queued from `t_ns` on can join (the caller has queued every
    /// prompt that reached the queue before `t_ns`): each prompt with the time it is handed on.
    pub fn close_by(&mut self, t_ns: u64, out: &mut Vec<(u32, u64)>) {
        while let Some(b) = self.head()
            && (b.len == self.batching.max_prompts || b.start_ns < t_ns)
        {
            for (slot, _, _) in self.queued.drain(..b.len) {
                out.push((slot, b.end_ns));
            }
            self.busy_ns = self.busy_ns.saturating_add(b.end_ns - b.start_ns);
            self.free_ns = b.end_ns;
        }
    }

    /// When the first prompt now queued would be handed on, with `more` (queued at, work)
    /// queued after them; `None` if there is none. No sooner than that, if later prompts join.
    pub fn next_hand_off(&self, more: impl IntoIterator<Item = (u64, u64)>) -> Option<u64> {
        let queued = self.queued.iter().map(|&(_, at, w)| (at, w));
        self.plan(queued.chain(more)).map(|b| b.end_ns)
    }

    /// Drops a queued prompt; false if it is not queued.
    pub fn forget(&mut self, slot: u32) -> bool {
        let before = self.queued.len();
        self.queued.retain(|&(s, _, _)| s != slot);
        self.queued.len() != before
    }

    /// Prompts queued and not yet handed on.
    pub fn queued(&self) -> usize {
        self.queued.len()
    }

    /// Time spent in calls so far, ns.
    pub fn busy_ns(&self) -> u64 {
        self.busy_ns
    }

    fn head(&self) -> Option<Batch> {
        self.plan(self.queued.iter().map(|&(_, at, w)| (at, w)))
    }

    /// The first batch of prompts (queued at, work) in the order queued: the batcher opens it
    /// when the first is queued and the thread is free, and takes every prompt queued within
    /// the window, up to its size.
    fn plan(&self, prompts: impl Iterator<Item = (u64, u64)>) -> Option<Batch> {
        let mut prompts = prompts.peekable();
        let open = prompts.peek()?.0.max(self.free_ns);
        let deadline = open.saturating_add(self.batching.window_ns);
        let mut call = Call::default();
        let mut last_ns = open;
        for (at, work) in prompts.take(self.batching.max_prompts) {
            if at > deadline {
                break;
            }
            last_ns = last_ns.max(at);
            call.add(work);
        }
        let start_ns = if call.n == self.batching.max_prompts { last_ns } else { deadline };
        let end_ns = start_ns.saturating_add(self.batching.time(&call));
        Some(Batch { len: call.n, start_ns, end_ns })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn hand_offs(b: Microbatch, prompts: &[(u64, u64)]) -> Vec<u64> {
        let mut t = TokenizerThread::new(b);
        let mut out = Vec::new();
        for (i, &(at, w)) in prompts.iter().enumerate() {
            t.close_by(at, &mut out);
            assert_eq!(t.queue(i as u32, at, w), None);
        }
        t.close_by(u64::MAX, &mut out);
        assert_eq!(t.queued(), 0);
        out.sort_by_key(|&(slot, _)| slot);
        out.into_iter().map(|(_, at)| at).collect()
    }

    #[test]
    fn a_lone_prompt_waits_out_the_window_then_is_tokenized_alone() {
        let b = Microbatch::vllm(16.0);
        assert_eq!(hand_offs(b, &[(1_000, 500)]), vec![1_000 + 2_000_000 + 500]);
        // Before 0.10: at once.
        assert_eq!(hand_offs(Microbatch::one_at_a_time(), &[(1_000, 500), (1_200, 500)]), vec![1_500, 2_000]);
    }

    #[test]
    fn prompts_within_the_window_share_a_call_spread_over_the_cores() {
        let b = Microbatch { window_ns: 2_000, max_prompts: 32, parallel: 2.0 };
        // Three within 2 µs of the first: one call of max(4, (4 + 3 + 1) / 2) µs from 2 µs;
        // the fourth, later, opens the next window when the call returns.
        let got = hand_offs(b, &[(0, 4_000), (500, 3_000), (2_000, 1_000), (2_001, 1_000)]);
        assert_eq!(got, vec![6_000, 6_000, 6_000, 6_000 + 2_000 + 1_000]);
        assert_eq!(b.call_ns([1_000, 1_000, 1_000, 1_000]), 2_000);
        assert_eq!(b.call_ns([]), 0);
    }

    #[test]
    fn a_full_batch_starts_without_waiting_and_the_rest_queue_behind_it() {
        let b = Microbatch { window_ns: 1_000_000, max_prompts: 2, parallel: 8.0 };
        let got = hand_offs(b, &[(0, 100), (10, 300), (20, 100), (30, 100), (40, 100)]);
        // {0, 1} fill at 10 ns and return at 310; {2, 3} are queued by then and fill at once.
        assert_eq!(got[..4], [310, 310, 410, 410]);
        // The last waits out its window from 410.
        assert_eq!(got[4], 410 + 1_000_000 + 100);
        let mut t = TokenizerThread::new(b);
        t.queue(0, 0, 100);
        t.queue(1, 0, 100);
        assert_eq!(t.queue(2, 7, 0), Some(7), "nothing to tokenize: handed on at once");
        assert!(t.forget(0) && !t.forget(0));
        assert_eq!(t.next_hand_off([]), Some(1_000_100));
        assert_eq!(t.next_hand_off([(5, 300)]), Some(305), "a second prompt fills it: max(300, 400 / 2) from 5 ns");
    }

    proptest! {
        #[test]
        fn batches_never_hand_on_sooner_than_the_work_allows_nor_later_than_one_at_a_time_plus_the_windows(
            gaps in prop::collection::vec((0u64..3_000_000, 1u64..1_000_000), 1..80),
            parallel in 1.0f64..40.0,
        ) {
            let mut t = 0;
            let prompts: Vec<(u64, u64)> = gaps.iter().map(|&(g, w)| { t += g; (t, w) }).collect();
            let batched = Microbatch::vllm(parallel);
            let got = hand_offs(batched, &prompts);
            let alone = hand_offs(Microbatch::one_at_a_time(), &prompts);
            for (i, &(at, w)) in prompts.iter().enumerate() {
                prop_assert!(got[i] >= at + w, "{i}: handed on before its own tokenizing");
                prop_assert!(i == 0 || got[i] >= got[i - 1], "{i}: hand-offs keep the queue's order");
            }
            // A call takes no longer than its prompts one by one: the last is handed on no later
            // than one at a time, but for a window a call.
            let n = prompts.len() as u64;
            prop_assert!(*got.last().unwrap() <= *alone.last().unwrap() + n * batched.window_ns);
            // Calls never overlap: the thread's busy time fits between the first prompt and the last hand-off.
            let busy: u64 = {
                let mut th = TokenizerThread::new(batched);
                let mut out = Vec::new();
                for (i, &(at, w)) in prompts.iter().enumerate() { th.close_by(at, &mut out); th.queue(i as u32, at, w); }
                th.close_by(u64::MAX, &mut out);
                th.busy_ns()
            };
            prop_assert!(busy <= got.last().unwrap() - prompts[0].0);
            let total: u64 = prompts.iter().map(|&(_, w)| w).sum();
            prop_assert!(busy as f64 >= total as f64 / parallel.max(1.0) - prompts.len() as f64, "a call took less than its work over the cores");
        }
    }
}
