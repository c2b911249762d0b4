//! vLLM's API server processes (`--api-server-count`, one by default): each is a [`Frontend`] of
//! its own, with its own event loop and tokenizing thread, that takes in the requests given to
//! it and streams their tokens. The operating system spreads the connections over the
//! processes (they share the port); the simulator gives them the requests in turn. A step's
//! tokens are written by the processes that took their requests in, side by side, and the step
//! counts as delivered when the last of them is done: where one process cannot write a step's
//! tokens as fast as the steps come, several can.

use super::Emission;
use super::frontend::Frontend;
use super::tokenizer::Microbatch;

/// The API server processes in front of one engine, in engine time (ns).
#[derive(Debug)]
pub(crate) struct ApiServers {
    servers: Vec<Frontend>,
    /// The process that took each request slot in.
    owner: Vec<u16>,
    /// The process the next request goes to.
    next: usize,
    /// Streamed tokens of the last step, by process (kept to spare an allocation a step).
    tokens: Vec<u64>,
}

impl ApiServers {
    /// `count` idle processes (at least one) whose tokenizing threads group prompts as
    /// `batching` says.
    pub fn new(count: u32, batching: Microbatch) -> Self {
        let count = usize::from(u16::try_from(count.max(1)).unwrap_or(u16::MAX));
        Self {
            servers: (0..count).map(|_| Frontend::new(batching)).collect(),
            owner: Vec::new(),
            next: 0,
            tokens: vec![0; count],
        }
    }

    /// The process that takes request `slot` in: the next in turn.
    fn assign(&mut self, slot: u32) -> usize {
        let at = self.next;
        self.next = (self.next + 1) % self.servers.len();
        let slot = slot as usize;
        if self.owner.len() <= slot {
            self.owner.resize(slot + 1, 0);
        }
        self.owner[slot] = at as u16;
        at
    }

    fn owner_of(&self, slot: u32) -> usize {
        self.owner.get(slot as usize).map_or(0, |&i| usize::from(i))
    }

    /// See [`Frontend::render`], on the process the request goes to.
    pub fn render(&mut self, slot: u32, arrived_ns: u64, render: u64, tokenize: u64) {
        let at = self.assign(slot);
        self.servers[at].render(slot, arrived_ns, render, tokenize);
    }

    /// See [`Frontend::take_in`], on the process the request goes to.
    pub fn take_in(&mut self, slot: u32, arrived_ns: u64, work: u64, tokenize: u64) -> Option<u64> {
        let at = self.assign(slot);
        self.servers[at].take_in(slot, arrived_ns, work, tokenize)
    }

    /// See [`Frontend::process_inputs`], on the process that took request `slot` in.
    pub fn process_inputs(&mut self, slot: u32, tokenized_ns: u64, work: u64) -> u64 {
        let at = self.owner_of(slot);
        self.servers[at].process_inputs(tokenized_ns, work)
    }

    /// See [`Frontend::close_by`]: what every process has settled by `t_ns`.
    pub fn close_by(&mut self, t_ns: u64) -> Vec<(u32, u64)> {
        match self.servers.as_mut_slice() {
            [one] => one.close_by(t_ns),
            many => many.iter_mut().flat_map(|s| s.close_by(t_ns)).collect(),
        }
    }

    /// See [`Frontend::next_hand_off`]: the soonest of any process.
    pub fn next_hand_off(&self) -> Option<u64> {
        self.servers.iter().filter_map(Frontend::next_hand_off).min()
    }

    /// See [`Frontend::forget`], on the process that took the request in.
    pub fn forget(&mut self, slot: u32) -> bool {
        let at = self.owner_of(slot);
        self.servers[at].forget(slot)
    }

    /// Requests being rendered or tokenized, on every process.
    pub fn holding(&self) -> usize {
        self.servers.iter().map(Frontend::holding).sum()
    }

    /// See [`Frontend::catch_up`], on every process.
    pub fn catch_up(&mut self, until_ns: u64) {
        for s in &mut self.servers {
            s.catch_up(until_ns);
        }
    }

    /// Queues the last step's streamed tokens (it ended at `end`), `ns_per_token` of work each,
    /// on the processes whose requests they are.
    pub fn stream(&mut self, end: u64, ns_per_token: f64, emitted: &[Emission]) {
        if let [one] = self.servers.as_mut_slice() {
            one.stream(end, (ns_per_token * emitted.len() as f64).round() as u64);
            return;
        }
        self.tokens.fill(0);
        for e in emitted {
            let at = self.owner_of(e.id.slot);
            self.tokens[at] += 1;
        }
        for (server, &n) in self.servers.iter_mut().zip(&self.tokens) {
            server.stream(end, (ns_per_token * n as f64).round() as u64);
        }
    }

    /// When the last step's streamed tokens have all left: when the slowest process is done
    /// with its share (see [`Frontend::streamed_at`]).
    pub fn streamed_at(&mut self) -> u64 {
        self.servers.iter_mut().map(Frontend::streamed_at).max().unwrap_or(0)
    }

    /// Work queued on a process's loop so far, ns: the mean over the processes.
    pub fn work_ns(&self) -> u64 {
        self.servers.iter().map(Frontend::work_ns).sum::<u64>() / self.servers.len() as u64
    }

    /// Time a process's tokenizing thread has spent in tokenizer calls so far, ns: the mean.
    pub fn tokenizer_busy_ns(&self) -> u64 {
        self.servers.iter().map(Frontend::tokenizer_busy_ns).sum::<u64>() / self.servers.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::RequestId;

    fn emission(slot: u32) -> Emission {
        Emission { id: RequestId { slot, generation: 0 }, tag: 0, index: 1, token: 0, finish: None, continues: false }
    }

    #[test]
    fn requests_go_to_the_processes_in_turn_and_each_takes_its_own_in() {
        // Two requests at once, 50 µs of loop work each, nothing to tokenize: one process takes
        // the second in after the first, two take them in side by side.
        for (count, second) in [(1, 100_000), (2, 50_000)] {
            let mut s = ApiServers::new(count, Microbatch::one_at_a_time());
            assert_eq!(s.take_in(0, 0, 50_000, 0), Some(50_000));
            assert_eq!(s.take_in(1, 0, 50_000, 0), Some(second), "{count} process(es)");
        }
        // A request being tokenized is forgotten by the process that holds it.
        let mut s = ApiServers::new(3, Microbatch::vllm(1.0));
        for slot in 0..3 {
            assert_eq!(s.take_in(slot, 0, 1_000, 5_000), None);
        }
        assert_eq!(s.holding(), 3);
        assert!(s.forget(2) && !s.forget(2));
        assert_eq!(s.holding(), 2);
    }

    #[test]
    fn a_step_s_tokens_leave_when_the_busiest_process_has_written_its_share() {
        let mut s = ApiServers::new(2, Microbatch::one_at_a_time());
        for slot in 0..3 {
            s.take_in(slot, 0, 0, 0);
        }
        // Slots 0 and 2 went to the first process, 1 to the second: at 1 ms a token the first
        // writes two, so the step ending at 10 ms is written by 12 ms, and the next, ending at
        // 11 ms, waits for that (its tokens merged into the first's chunks there, written whole
        // by the second process, free again at 11 ms).
        let emitted: Vec<Emission> = (0..3).map(emission).collect();
        s.stream(10_000_000, 1e6, &emitted);
        assert_eq!(s.streamed_at(), 10_000_000);
        s.stream(11_000_000, 1e6, &emitted);
        assert_eq!(s.streamed_at(), 12_000_000);
        // The mean process's work: 2 ms and the merged tokens' share of 2 more, and 1 + 1 ms.
        assert_eq!(s.work_ns(), (2_000_000 + super::super::frontend::merged(2_000_000) + 2_000_000) / 2);
    }
}
