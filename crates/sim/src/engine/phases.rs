//! Where a request's time went, as vLLM's per-request metrics divide it: waiting for the
//! scheduler (`vllm:request_queue_time_seconds`, from the moment the engine has the request to
//! its first scheduling), its prefill (`..._prefill_time_seconds`, to its first token), its
//! decode (`..._decode_time_seconds`, to its last), and the server's own time to first token
//! (`vllm:time_to_first_token_seconds`, from the moment the API server received it, so the
//! frontend's work is in it and in none of the others).

/// When one request passed each of those points, engine time (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestTimes {
    /// The caller's tag of the request.
    pub tag: u64,
    /// Received by the API server.
    pub arrived_ns: u64,
    /// Handed on to the scheduler, after the frontend's work and the API delay.
    pub ready_ns: u64,
    /// First scheduled (a request preempted and scheduled again keeps its first time, as vLLM's do).
    pub scheduled_ns: u64,
    pub first_token_ns: u64,
    pub finished_ns: u64,
}

impl RequestTimes {
    /// Waiting for the scheduler, ns.
    pub fn queue_ns(&self) -> u64 {
        self.scheduled_ns.saturating_sub(self.ready_ns)
    }

    /// From its first scheduling to its first token, ns.
    pub fn prefill_ns(&self) -> u64 {
        self.first_token_ns.saturating_sub(self.scheduled_ns)
    }

    /// From its first token to its last, ns.
    pub fn decode_ns(&self) -> u64 {
        self.finished_ns.saturating_sub(self.first_token_ns)
    }

    /// From its first scheduling to its last token, ns.
    pub fn inference_ns(&self) -> u64 {
        self.finished_ns.saturating_sub(self.scheduled_ns)
    }

    /// From the API server's receipt to its first token, ns.
    pub fn ttft_ns(&self) -> u64 {
        self.first_token_ns.saturating_sub(self.arrived_ns)
    }
}

/// The phases' sums over the requests finished so far, and the server's time to first token
/// summed over the first tokens emitted so far (as vLLM observes each: the phases when a request
/// finishes, the first token when it comes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseTotals {
    pub finished: u64,
    pub queue_ns: u64,
    pub prefill_ns: u64,
    pub decode_ns: u64,
    pub first_tokens: u64,
    pub ttft_ns: u64,
}

impl PhaseTotals {
    /// Counts a request's first token, `ttft_ns` after the API server received it.
    pub(super) fn first_token(&mut self, ttft_ns: u64) {
        self.first_tokens += 1;
        self.ttft_ns += ttft_ns;
    }

    /// Counts a finished request's phases.
    pub(super) fn finished(&mut self, t: &RequestTimes) {
        self.finished += 1;
        self.queue_ns += t.queue_ns();
        self.prefill_ns += t.prefill_ns();
        self.decode_ns += t.decode_ns();
    }
}

#[cfg(test)]
pub(super) mod tests {
    use proptest::prelude::*;

    use super::RequestTimes;
    use crate::engine::tests::{
        add_random_requests, config, engine, every_request_ended_at_its_length, ids, request, run_timed,
    };
    use crate::engine::{PhaseTotals, StepReport};

    /// What every checked step must hold (`run_timed`): each request it finished ended with an
    /// emission of this step, at its end, having passed the points in order, its server TTFT
    /// the frontend's time, the queue and the prefill.
    pub(in crate::engine) fn check_step(step: &StepReport<'_>) {
        for t in step.finished {
            assert!(step.emissions.iter().any(|x| x.tag == t.tag && x.finish.is_some()), "{t:?}");
            assert_eq!(t.finished_ns, step.end_ns);
            assert!(t.arrived_ns <= t.ready_ns && t.ready_ns <= t.scheduled_ns, "{t:?}");
            assert!(t.scheduled_ns < t.first_token_ns && t.first_token_ns <= t.finished_ns, "{t:?}");
            assert_eq!(t.ttft_ns(), t.ready_ns - t.arrived_ns + t.queue_ns() + t.prefill_ns());
        }
    }

    /// What a checked run must hold: the engine's phase totals grew, from `before` to `after`,
    /// by the sums of the phases of the requests it finished.
    pub(in crate::engine) fn check_totals(before: PhaseTotals, after: PhaseTotals, done: &[RequestTimes]) {
        let sum = |f: fn(&RequestTimes) -> u64| done.iter().map(f).sum::<u64>();
        assert_eq!(after.finished - before.finished, done.len() as u64);
        assert_eq!(after.queue_ns - before.queue_ns, sum(RequestTimes::queue_ns));
        assert_eq!(after.prefill_ns - before.prefill_ns, sum(RequestTimes::prefill_ns));
        assert_eq!(after.decode_ns - before.decode_ns, sum(RequestTimes::decode_ns));
    }

    #[test]
    fn a_request_alone_waits_for_no_one_and_prefills_in_one_step() {
        let mut cfg = config(1024, 8, 2048, false);
        cfg.api_delay_ns = 3_000_000;
        let mut e = engine(cfg, 1);
        e.add(request(7, ids(100, 1), 4, 1_000_000)).unwrap();
        let (_, _, t) = run_timed(&mut e);
        assert_eq!(t.len(), 1);
        let t = t[0];
        assert_eq!((t.tag, t.arrived_ns, t.ready_ns), (7, 1_000_000, 4_000_000));
        assert_eq!(t.queue_ns(), 0, "{t:?}");
        // One step of 100 prompt tokens: 10 ms, 1 ms of tokens, 0.1 ms of sequence (LinearCost).
        assert_eq!(t.prefill_ns(), 11_100_000, "{t:?}");
        assert_eq!(t.ttft_ns(), 3_000_000 + 11_100_000);
        // Three more tokens, a step each of one token and one sequence.
        assert_eq!(t.decode_ns(), 3 * 10_110_000);
        assert_eq!(t.inference_ns(), t.prefill_ns() + t.decode_ns());
        let p = e.counters().phases;
        assert_eq!(
            p,
            PhaseTotals {
                finished: 1,
                queue_ns: 0,
                prefill_ns: t.prefill_ns(),
                decode_ns: t.decode_ns(),
                first_tokens: 1,
                ttft_ns: t.ttft_ns(),
            }
        );
    }

    proptest! {
        /// Under any burst, budget and KV pool (small pools preempt), each request passes the
        /// points in order (checked step by step by the driver, with the engine's totals as the
        /// sums of the requests' phases at the end), finishes once, and gives one first token,
        /// whose server TTFT the totals sum too.
        #[test]
        fn phases_follow_each_other_and_add_up(
            lens in prop::collection::vec((1u32..200, 1u32..64, 0u64..2_000_000), 1..24),
            seqs in 1u32..6,
            budget in 64u32..1024,
            blocks in 20u64..200,
            async_scheduling: bool,
        ) {
            let mut cfg = config(blocks, seqs, budget, false);
            cfg.api_delay_ns = 2_000_000;
            cfg.async_scheduling = async_scheduling;
            let mut e = engine(cfg, 3);
            let asked = add_random_requests(&mut e, &lens, blocks, false);
            let (done, _, times) = run_timed(&mut e);
            every_request_ended_at_its_length(&done, &asked)?;
            let p = e.counters().phases;
            prop_assert_eq!(p.first_tokens, asked.len() as u64);
            prop_assert_eq!(p.ttft_ns, times.iter().map(RequestTimes::ttft_ns).sum::<u64>());
        }
    }
}
