//! A measured point's workload as a plan, prepared once and predicted as often as a fit asks.
//!
//! Prompts are unique token ids of the point's lengths after the prefix they all share, if any
//! (request 0's copy in the bench's warm-up is the only other repeat), outputs run to their
//! length, and arrivals follow vLLM's schedule for the point's rate, burstiness and seed.

use bytes::Bytes;
use servebench_core::config::{Api, RunConfig, Traffic};
use servebench_core::metrics::{mean, median};
use servebench_core::plan::{Plan, PlannedRequest, TokenCounting};
use servebench_core::record::RunResult;
use servebench_core::rng::RandomState;

use super::points::{FitMetric, PointWorkload};
use crate::options::Warmup;
use crate::predict::{Prepared, Prompts, predict_prepared, warmup_count};
use crate::rng::mix64;
use crate::setup::SimSetup;

/// Limits that keep a damaged or enormous result file from exhausting memory.
pub(crate) const MAX_REQUESTS: usize = 1_000_000;
const MAX_PROMPT_TOKENS: u64 = 200_000_000;

/// Why a result of `n` requests is not simulated.
pub(crate) fn too_many(n: usize) -> String {
    format!("{n} requests are more than the {MAX_REQUESTS} a fit simulates; use a smaller run")
}

/// Whether a fit can simulate `w`: it has a request, and no more requests and prompt tokens
/// than the limits above. Gives the requests' prompt lengths where it can.
pub(crate) fn simulable(w: &PointWorkload) -> Result<Vec<u32>, String> {
    let n = w.num_prompts;
    if n == 0 {
        return Err("the point has no request".into());
    }
    if n > MAX_REQUESTS {
        return Err(too_many(n));
    }
    // The schedule's last request lands at n / rate (vLLM rescales it so); a run spans at
    // most what a plan may (`Plan::check_schedule`).
    let span_s = n as f64 / w.request_rate;
    let most_s = servebench_core::plan::MAX_SCHEDULE_NS as f64 * 1e-9;
    if span_s > most_s {
        return Err(format!(
            "{n} requests at {} a second span {:.1e} days, more than the {} days a run may span; check its \
             request rate",
            w.request_rate,
            span_s / 86_400.0,
            most_s / 86_400.0
        ));
    }
    let inputs = w.input.expand(n);
    let prompt_tokens: u64 = inputs.iter().map(|&x| u64::from(x)).sum();
    if prompt_tokens > MAX_PROMPT_TOKENS {
        return Err(format!(
            "{prompt_tokens} prompt tokens are more than the {MAX_PROMPT_TOKENS} a fit simulates; use a smaller run"
        ));
    }
    Ok(inputs)
}

pub(crate) struct PreparedPoint {
    plan: Plan,
    config: RunConfig,
    prompts: Prompts,
    /// Roughly how long it takes to simulate, for spreading points over cores: its output
    /// tokens (each a sequence's share of a step) plus its prompt tokens at a sixteenth (hashed
    /// in blocks, prefilled in chunks).
    pub work: u64,
}

impl PreparedPoint {
    /// Builds the plan of `w`; `salt` keeps prompts of different points apart.
    pub fn new(w: &PointWorkload, salt: u64) -> Result<Self, String> {
        let inputs = simulable(w)?;
        let n = w.num_prompts;
        let outputs = w.output.expand(n);
        let mut config = RunConfig::for_target("sim://calibration", "calibration");
        config.traffic = Traffic {
            num_prompts: n,
            request_rate: w.request_rate,
            burstiness: w.burstiness,
            max_concurrency: w.max_concurrency,
            seed: w.seed,
            ready_check_timeout_s: if w.warmup { 600.0 } else { 0.0 },
            ..Traffic::default()
        };
        config.ignore_eos = true;
        let times = if w.request_rate.is_finite() {
            let seed = u32::try_from(w.seed).unwrap_or(0);
            servebench_workload::arrival::delays(&config.traffic, n, &mut RandomState::new(seed))
                .map_err(|e| e.to_string())?
        } else {
            vec![0.0; n]
        };
        let requests = (0..n)
            .map(|i| PlannedRequest {
                index: i as u32,
                at_ns: servebench_workload::arrival::to_ns(times[i]),
                body: Bytes::new(),
                max_tokens: outputs[i],
                prompt_tokens: inputs[i],
                input_tokens: Vec::new(),
            })
            .collect();
        // The point's shared prefix: the same ids in every prompt, apart from other points'.
        let prefix_seed = mix64(salt.wrapping_mul(0x9E37_79B9) ^ 0x7072_6566_6978);
        let prompts = Prompts {
            requests: (0..n)
                .map(|i| {
                    let seed = mix64(salt.wrapping_mul(0x9E37_79B9) ^ (i as u64).rotate_left(24));
                    let token = |j: u32| {
                        let seed = if j < w.shared_prefix { prefix_seed } else { seed };
                        (mix64(seed ^ u64::from(j)) >> 33) as u32
                    };
                    let ids = (0..inputs[i]).map(token).collect();
                    Prepared {
                        ids: Some(ids),
                        more: Vec::new(),
                        usage: None,
                        pooled: false,
                        ignore_eos: true,
                        max_tokens: None,
                        error: None,
                        images: Vec::new(),
                    }
                })
                .collect(),
            conversations: Vec::new(),
            turns_ignore_eos: true,
            turns_max_tokens: None,
            probe: None,
        };
        let plan = Plan {
            api: if w.chat { Api::Chat } else { Api::Completions },
            requests,
            conversations: Vec::new(),
            token_counting: TokenCounting::Estimate,
            notes: Vec::new(),
        };
        let work =
            outputs.iter().map(|&x| u64::from(x)).sum::<u64>() + inputs.iter().map(|&x| u64::from(x)).sum::<u64>() / 16;
        Ok(PreparedPoint { plan, config, prompts, work })
    }

    /// The same point, its predictions sampling the engine's phases as `--server-metrics` does,
    /// for a point that measured the engine's share of its first token.
    pub fn sampling_phases(mut self) -> Self {
        self.config.output.server_metrics = true;
        self
    }

    /// Predicts the point on `setup`.
    pub fn run(&self, setup: &SimSetup) -> RunResult {
        // The point's own record of the bench's warm-up (its ready check), whatever the setup's default.
        let warmups = warmup_count(Warmup::Auto, &self.config);
        predict_prepared(&self.plan, &self.config, setup, self.prompts.clone(), warmups)
    }

    /// Predicts the point on `setup`: the fit's metrics as the bench computes them.
    pub fn simulate(&self, setup: &SimSetup) -> FitMetrics {
        FitMetrics::of(&self.run(setup))
    }
}

/// Mean and median TTFT, TPOT and end-to-end latency (ms) and output throughput (tok/s) of a
/// run, by vLLM's definitions (successful requests only; TPOT over requests of more than one
/// token), without the percentiles a full summary sorts for.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct FitMetrics {
    pub ttft_ms: Option<f64>,
    pub ttft_median_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub tpot_median_ms: Option<f64>,
    pub e2el_ms: Option<f64>,
    pub e2el_median_ms: Option<f64>,
    pub throughput: Option<f64>,
    /// The engine's share of the mean first token, where the run sampled its phases.
    pub engine_ttft_ms: Option<f64>,
}

impl FitMetrics {
    pub fn of(run: &RunResult) -> FitMetrics {
        let mut out = 0u64;
        let mut ttfts = Vec::with_capacity(run.records.len());
        let mut tpots = Vec::with_capacity(run.records.len());
        let mut e2els = Vec::with_capacity(run.records.len());
        for r in run.records.iter().filter(|r| r.succeeded()) {
            let tokens = r.output_tokens();
            ttfts.push(r.ttft_s());
            e2els.push(r.latency_s());
            out += u64::from(tokens);
            if tokens > 1 {
                tpots.push((r.latency_s() - r.ttft_s()) / f64::from(tokens - 1));
            }
        }
        let positive = |x: f64| (x.is_finite() && x > 0.0).then_some(x);
        let ms = |values: &[f64], stat: fn(&[f64]) -> f64| positive(stat(values) * 1e3);
        FitMetrics {
            ttft_ms: ms(&ttfts, mean),
            ttft_median_ms: ms(&ttfts, median),
            tpot_ms: ms(&tpots, mean),
            tpot_median_ms: ms(&tpots, median),
            e2el_ms: ms(&e2els, mean),
            e2el_median_ms: ms(&e2els, median),
            throughput: positive(out as f64 / run.duration_s),
            engine_ttft_ms: run.telemetry.as_ref().and_then(|t| t.engine_first_token_ms()).and_then(positive),
        }
    }

    pub fn get(&self, m: FitMetric) -> Option<f64> {
        match m {
            FitMetric::MeanTtft => self.ttft_ms,
            FitMetric::MeanTpot => self.tpot_ms,
            FitMetric::OutputThroughput => self.throughput,
            FitMetric::MedianTtft => self.ttft_median_ms,
            FitMetric::MedianTpot => self.tpot_median_ms,
            FitMetric::MeanE2el => self.e2el_ms,
            FitMetric::MedianE2el => self.e2el_median_ms,
            FitMetric::EngineTtft => self.engine_ttft_ms,
        }
    }
}
