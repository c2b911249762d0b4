//! The probe requests of a prediction (`--probe-request-rate`), sent as the real client sends
//! them: one request of the prompt "Hi" and one output token at a time beside the run, outside
//! its concurrency cap, the next 1 / rate after the last one ended, none once the run's own
//! requests have all ended (the one in flight then ends first). Their engine tags carry
//! [`PROBE_TAG`], above every item's, so the run's records never see them.

use servebench_core::record::ProbeRecord;

use crate::engine::{Emission, Engine, NewRequest, Pooling, PromptTokens};

/// The bit that marks a probe's engine tag.
pub(super) const PROBE_TAG: u64 = 1 << 63;

/// Whether `e` is a probe's token.
pub(super) fn is_probe(e: &Emission) -> bool {
    e.tag & PROBE_TAG != 0
}

pub(super) struct ProbeChain {
    /// The probe's prompt as token ids, or why its body could not be read.
    ids: Result<Vec<u32>, String>,
    ignore_eos: bool,
    chat: bool,
    pause_ns: u64,
    t0: u64,
    /// When the next probe falls due (engine time); `None` while one is in flight or after
    /// [`ProbeChain::stop`].
    next_abs: Option<u64>,
    /// When the probe in flight was sent.
    in_flight: Option<u64>,
    /// The run has ended: no probe is sent any more.
    stopped: bool,
    records: Vec<ProbeRecord>,
}

impl ProbeChain {
    /// A chain of `rate` probes a second at most, the first at `t0`, the timed run's start.
    pub fn new(ids: Result<Vec<u32>, String>, ignore_eos: bool, chat: bool, rate: f64, t0: u64) -> Self {
        let pause = 1e9 / rate;
        let pause_ns = if pause.is_finite() && pause < u64::MAX as f64 { pause.round() as u64 } else { u64::MAX };
        ProbeChain {
            ids,
            ignore_eos,
            chat,
            pause_ns,
            t0,
            next_abs: Some(t0),
            in_flight: None,
            stopped: false,
            records: Vec::new(),
        }
    }

    /// When the next probe falls due.
    pub fn next_due(&self) -> Option<u64> {
        self.next_abs
    }

    pub fn in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Sends the probe due by `t`, if one is.
    pub fn arrive_until(&mut self, engine: &mut Engine, t: u64) {
        let Some(at) = self.next_abs.filter(|&a| a <= t) else { return };
        self.next_abs = None;
        let refused = match &self.ids {
            Err(e) => e.clone(),
            Ok(ids) => {
                let req = NewRequest {
                    tag: PROBE_TAG | self.records.len() as u64,
                    prompt: PromptTokens::Ids(ids.clone()),
                    max_tokens: 1,
                    ignore_eos: self.ignore_eos,
                    arrived_ns: at,
                    chat: self.chat,
                    pooling: Pooling::No,
                    images: Vec::new(),
                };
                match engine.add(req) {
                    Ok(_) => {
                        self.in_flight = Some(at);
                        return;
                    }
                    Err(rejection) => rejection.to_string(),
                }
            }
        };
        self.records.push(ProbeRecord { sent_s: seconds(at - self.t0), latency_s: 0.0, error: Some(refused) });
        self.next_after(at);
    }

    /// Takes a probe's token, delivered at `end_abs`: its last ends the probe, and the next
    /// falls due a pause later.
    pub fn deliver(&mut self, e: &Emission, end_abs: u64) {
        if e.finish.is_none() {
            return;
        }
        if let Some(sent) = self.in_flight.take() {
            self.records.push(ProbeRecord {
                sent_s: seconds(sent - self.t0),
                latency_s: seconds(end_abs - sent),
                error: None,
            });
            self.next_after(end_abs);
        }
    }

    /// Sends no more probes (the run has ended).
    pub fn stop(&mut self) {
        self.stopped = true;
        self.next_abs = None;
    }

    pub fn finish(self) -> Vec<ProbeRecord> {
        self.records
    }

    /// The next probe falls due a pause after a probe ended at `t`, unless the run has.
    fn next_after(&mut self, t: u64) {
        self.next_abs = t.checked_add(self.pause_ns).filter(|_| !self.stopped);
    }
}

fn seconds(ns: u64) -> f64 {
    ns as f64 * 1e-9
}

#[cfg(test)]
mod tests {
    use servebench_core::config::RunConfig;

    use crate::SimSetup;
    use crate::predict::predict;
    use crate::predict::tests::plan;
    use crate::presets::Presets;

    #[test]
    fn probes_go_one_at_a_time_beside_the_run_and_end_with_it() {
        let pairs = [("jitter".to_string(), "0".to_string())];
        let sim =
            SimSetup::resolve_with(&Presets::embedded().unwrap(), "Qwen/Qwen3-8B", "h100-sxm", &pairs, None).unwrap();
        let p = plan(48, |_| 512, |_| 64, 0);
        let config = || {
            let mut c = RunConfig::for_target("http://sim", "m");
            c.traffic.max_concurrency = Some(8);
            c.ignore_eos = true;
            c
        };
        let mut cfg = config();
        cfg.traffic.probe_request_rate = Some(20.0);
        let with = predict(&p, &cfg, &sim);
        let without = predict(&p, &config(), &sim);
        assert_eq!(without.probes, Vec::new());
        assert!(with.records.iter().all(|r| r.succeeded()) && with.records.len() == 48);
        let probes = &with.probes;
        assert!(probes.len() >= 10 && probes.iter().all(|x| x.error.is_none()), "{probes:?}");
        // Each is sent a pause of 1/20 s after the one before ended, none after the run's end,
        // and the run's duration is its own requests'.
        for w in probes.windows(2) {
            assert!((w[1].sent_s - (w[0].sent_s + w[0].latency_s + 0.05)).abs() < 1e-6, "{w:?}");
        }
        let end = with.records.iter().map(|r| (r.start_ns as f64 * 1e-9) + r.latency_s()).fold(0.0, f64::max);
        assert!(probes.iter().all(|x| x.sent_s <= end), "{probes:?}");
        assert!((with.duration_s - end).abs() < 1e-6, "{} against {end}", with.duration_s);
        // A probe is one short request: it takes a step or a few, never a request's decode.
        let fastest = probes.iter().map(|x| x.latency_s).fold(f64::INFINITY, f64::min);
        let first_tokens = with.records.iter().map(|r| r.ttft_s()).sum::<f64>() / 48.0;
        assert!(fastest < first_tokens, "{probes:?}");
    }
}
