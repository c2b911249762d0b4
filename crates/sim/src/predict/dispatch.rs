//! How fast the benchmark client puts requests on the wire, and when it starts timing each.
//!
//! servebench's client sends every request at its scheduled time. `vllm bench serve` runs one
//! Python event loop (its `endpoint_request_func.py` over one aiohttp session): every request
//! is a task, and a burst of them (`--request-rate inf`, or the first wave of a capped run)
//! reaches the loop together. The loop first runs each task up to its connection's first
//! `await` (the request's own clock, `st`, starts there), and only then, one after another,
//! builds and writes each request. So request k of a burst of n is on the wire about
//! `n x start + (k + 1) x send` after the burst falls due, while its clock started at
//! `k x start`: the wait counts in its TTFT. A lone request pays `start + send`.
//!
//! The costs were measured with vLLM's own request function (0.10.1's, 0.11.0's and 0.13.0's),
//! launched as its `serve.py` launches it, against a server in another process that stamps
//! each request's arrival (`scripts/sim/vllm_client_probe.py`; aiohttp 3.14, CPython 3.11, a
//! two-core EPYC VM). Over bursts of 300 and 1,000, medians of 13 runs: the first request is on
//! the wire after 0.26 ms x n (0.15 to 0.52), then one every 0.54 ms (0.44 to 0.82); the
//! requests' clocks start 0.08 ms apart. A faster host sends faster.

/// A task's work before its clock starts and up to its connection's first `await`, ns.
const VLLM_START_NS: u64 = 260_000;
/// Of that, the part before the request's clock starts, ns.
const VLLM_CLOCK_NS: u64 = 80_000;
/// Building and writing one request once its connection is ready, ns.
const VLLM_SEND_NS: u64 = 540_000;

/// One client's send loop.
#[derive(Clone, Debug)]
pub(crate) struct Dispatch {
    start_ns: u64,
    clock_ns: u64,
    send_ns: u64,
    /// When the loop has sent every request it was given.
    free_ns: u64,
}

impl Dispatch {
    /// `vllm bench serve`'s client.
    pub fn vllm() -> Self {
        Dispatch { start_ns: VLLM_START_NS, clock_ns: VLLM_CLOCK_NS, send_ns: VLLM_SEND_NS, free_ns: 0 }
    }

    /// What the run's notes say of this client.
    pub fn note(&self) -> String {
        format!(
            "vLLM's benchmark client: a burst reaches the server one request after another, {} ms apart after {} ms \
             a request of setup, each timed from its own start (bench-client=vllm)",
            self.send_ns as f64 / 1e6,
            self.start_ns as f64 / 1e6
        )
    }

    /// For `n` requests falling due together at `at`, in order: when each one's clock starts
    /// and when it is on the wire. The loop takes a burst after the one before it is sent.
    pub fn burst(&mut self, at: u64, n: usize) -> Vec<(u64, u64)> {
        let s0 = at.max(self.free_ns);
        let n64 = n as u64;
        let starts = s0 + n64 * self.start_ns;
        let out: Vec<(u64, u64)> =
            (0..n64).map(|k| (s0 + k * self.clock_ns, starts + (k + 1) * self.send_ns)).collect();
        self.free_ns = starts + n64 * self.send_ns;
        out
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_lone_request_pays_its_start_and_its_send() {
        let mut d = Dispatch::vllm();
        assert_eq!(d.burst(1_000_000, 1), vec![(1_000_000, 1_000_000 + VLLM_START_NS + VLLM_SEND_NS)]);
    }

    #[test]
    fn a_burst_is_written_after_every_task_has_started() {
        let mut d = Dispatch::vllm();
        let b = d.burst(0, 1_000);
        // The measured burst of 1,000: first on the wire after about 260 ms, last after 800.
        assert_eq!(b[0], (0, 260_540_000));
        assert_eq!(b[999], (999 * 80_000, 800_000_000));
        // A request due while the loop is still sending waits for it.
        assert_eq!(d.burst(300_000_000, 1), vec![(800_000_000, 800_800_000)]);
    }

    proptest! {
        #[test]
        fn no_request_is_on_the_wire_before_it_is_due_nor_before_its_clock(
            bursts in prop::collection::vec((0u64..5_000_000, 1usize..50), 1..20),
        ) {
            let mut d = Dispatch::vllm();
            let (mut at, mut last_wire) = (0u64, 0u64);
            for (gap, n) in bursts {
                at += gap;
                let b = d.burst(at, n);
                prop_assert_eq!(b.len(), n);
                // The loop idles only while nothing is due, and then spends on the burst its
                // starts and sends, no more and no less.
                let busy_from = at.max(last_wire);
                prop_assert_eq!(b[n - 1].1, busy_from + n as u64 * (VLLM_START_NS + VLLM_SEND_NS));
                for &(clock, wire) in &b {
                    prop_assert!(clock >= at && wire > clock, "clock {clock}, wire {wire}, due {at}");
                    prop_assert!(wire > last_wire, "one loop sends one request at a time");
                    last_wire = wire;
                }
            }
        }
    }
}
