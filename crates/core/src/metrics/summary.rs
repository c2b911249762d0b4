//! The run summary: every number vLLM's report and result JSON show, plus servebench's own.
//!
//! [`Summary::compute`] follows vLLM 0.33's `calculate_metrics` on servebench's request
//! records, with the same arithmetic (throughput is `count / duration`, statistics are
//! numpy-exact and converted to milliseconds by `* 1000` after the statistic). A `Summary` is also what the
//! importers build from a vLLM text report or result JSON, so everything a report may lack
//! is an `Option`.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::{Metric, RunConfig};
use crate::metrics::health::Health;
use crate::metrics::peaks::{peak_concurrency, peak_output_tokens_per_s, vllm_bucket_peaks};
use crate::metrics::per_gpu::{cost_per_million, interactivity, per_gpu};
use crate::metrics::stats::{Sorted, describe, describe_in_place, describe_micros_in_place};
use crate::metrics::window::{Slice, SteadyState, slices, steady_state};
use crate::record::{FailureKind, RequestRecord, RunResult};

/// vLLM prints at most this many failure messages.
pub const MAX_FAILURE_MESSAGES: usize = 10;

/// The statistics of one metric with a percentile section, in milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricStats {
    pub metric: Metric,
    pub mean_ms: f64,
    pub median_ms: f64,
    /// Population standard deviation. Only in the JSON, so absent when read from a text report.
    #[serde(default)]
    pub std_ms: Option<f64>,
    /// `(p, value_ms)` in the order of `--metric-percentiles`.
    #[serde(default)]
    pub percentiles: Vec<(f64, f64)>,
}

impl MetricStats {
    /// The value at percentile `p`, if it was computed.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        self.percentiles.iter().find(|(q, _)| *q == p).map(|(_, v)| *v)
    }
}

/// How late the dispatcher released requests against the plan (client health).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DispatchLag {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Everything the report shows about one run.
///
/// What a pooling run counts beyond requests and tokens (vLLM's `EmbedBenchmarkMetrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolingFigures {
    /// Input sequences of the completed requests (vLLM's `total_input_sequences`); `None`
    /// when read from a text report, which does not print it.
    pub total_input_sequences: Option<u64>,
    /// Input sequences per second (vLLM's `input_sequence_throughput`).
    pub input_sequence_throughput: f64,
}

/// Two pairs of fields hold peaks. `peak_output_throughput` and `peak_concurrent_requests`
/// are exact (see [`crate::metrics::peaks`]) and are what servebench prints on the "Peak ..."
/// lines, where vLLM prints its bucketed values. vLLM's own values are kept in
/// `vllm_max_output_tokens_per_s` and `vllm_max_concurrent_requests`, which is what the
/// result JSON stores under vLLM's keys and what a report printed by vLLM contains.
///
/// `Summary::default()` is an empty run (all counts 0, every optional line absent), a base
/// for importers that fill in what their source has.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Successful requests.
    pub completed: u64,
    /// Failed requests (reports from vLLM before 0.12 lack this line).
    #[serde(default)]
    pub failed: Option<u64>,
    /// `--max-concurrency`, when one was given.
    #[serde(default)]
    pub max_concurrency: Option<u64>,
    /// The configured request rate; infinity when everything is sent at once. `None` when
    /// the source does not say (a text report prints the rate only when it is finite).
    #[serde(default, with = "opt_rate")]
    pub request_rate: Option<f64>,
    /// Benchmark duration, seconds.
    pub duration_s: f64,
    pub total_input_tokens: u64,
    /// Absent from reports made without a tokenizer.
    #[serde(default)]
    pub total_output_tokens: Option<u64>,
    /// Requests per second.
    pub request_throughput: f64,
    /// Requests per second that met every `--goodput` SLO; `None` without `--goodput`.
    #[serde(default)]
    pub request_goodput: Option<f64>,
    /// Output tokens per second.
    #[serde(default)]
    pub output_throughput: Option<f64>,
    /// Input plus output tokens per second.
    #[serde(default)]
    pub total_token_throughput: Option<f64>,
    /// A pooling run's input sequences (its `Input throughput (inputs/s)` line); `None` for a
    /// generation run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooling: Option<PoolingFigures>,
    /// Exact peak output tokens per second (busiest sliding one-second window).
    #[serde(default)]
    pub peak_output_throughput: Option<f64>,
    /// Exact peak number of requests in flight (sweep line).
    #[serde(default)]
    pub peak_concurrent_requests: Option<u64>,
    /// vLLM's `max_output_tokens_per_s`: most chunks in a whole-second bucket.
    #[serde(default)]
    pub vllm_max_output_tokens_per_s: Option<f64>,
    /// vLLM's `max_concurrent_requests`: most requests touching a whole-second bucket.
    #[serde(default)]
    pub vllm_max_concurrent_requests: Option<u64>,
    /// One entry per percentile section, in vLLM's order (ttft, tpot, itl, e2el, ...).
    #[serde(default)]
    pub metrics: Vec<MetricStats>,
    /// Failed requests by kind (empty when unknown or none failed).
    #[serde(default)]
    pub failures_by_kind: BTreeMap<FailureKind, u64>,
    /// The first ten failure messages, in dataset order.
    #[serde(default)]
    pub failure_messages: Vec<String>,
    /// Dispatch lag against the plan; `None` when unknown or nothing was dispatched.
    #[serde(default)]
    pub dispatch_lag: Option<DispatchLag>,
    /// The client's health verdict; `None` when the client observed nothing (an import, a
    /// prediction).
    #[serde(default)]
    pub health: Option<Health>,
    /// The summary of the window in which the asked-for load was fully in force, when the run
    /// had one (see [`crate::metrics::window`]).
    #[serde(default)]
    pub steady_state: Option<Box<SteadyState>>,
    /// The run in time slices of `--slice-seconds`; empty without it.
    #[serde(default)]
    pub slices: Vec<Slice>,
    /// The server's own telemetry during the run (`--server-metrics`, `--scrape`).
    #[serde(default)]
    pub server: Option<crate::telemetry::ServerTelemetry>,
    /// Connects, TLS, response heads and first bytes; `None` when the records do not say.
    #[serde(default)]
    pub http: Option<super::HttpBreakdown>,
    /// The server's speculative decoding over the run (vLLM's report section of that name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode: Option<crate::telemetry::SpecDecodeCounts>,
    /// The probe requests' latencies (`--probe-request-rate`, vLLM's section of that name);
    /// `None` without probes or when none succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<super::ProbeStats>,
    /// How many GPUs served the run (`--gpus`, the simulator's tp × pp × dp, or an imported
    /// file's `gpus`), for the per-GPU throughputs; `None` when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    /// What one of those GPUs costs an hour (`--gpu-hour-cost`), for the cost per million
    /// output tokens; `None` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_hour_cost: Option<f64>,
}

impl Summary {
    /// The statistics of `metric`, if its section was computed or reported.
    pub fn metric(&self, metric: Metric) -> Option<&MetricStats> {
        self.metrics.iter().find(|m| m.metric == metric)
    }

    /// `tokens_per_s` shared over the GPUs that served the run, when their count is known.
    pub fn per_gpu(&self, tokens_per_s: Option<f64>) -> Option<f64> {
        per_gpu(tokens_per_s, self.gpus)
    }

    /// What a million output tokens cost at this throughput: [`cost_per_million`] of the
    /// output throughput; `None` without a GPU count, a price or output.
    pub fn cost_per_million_output(&self) -> Option<f64> {
        cost_per_million(self.output_throughput, self.gpus, self.gpu_hour_cost)
    }

    /// Output tokens per second each request saw once it streamed, [`per_user`] of the median
    /// TPOT (InferenceX's interactivity, tok/s/user); `None` without requests or a TPOT above 0.
    pub fn interactivity(&self) -> Option<f64> {
        interactivity(self.completed, self.metric(Metric::Tpot).map(|m| m.median_ms))
    }

    /// Computes the summary of a run as vLLM 0.33's `calculate_metrics` does, plus the exact
    /// peaks, failure counts and dispatch lag.
    ///
    /// - Token counts are [`RequestRecord::output_tokens`] and
    ///   [`RequestRecord::prompt_tokens`]; input tokens count successful requests only.
    /// - TPOT is `(latency - ttft) / (output_tokens - 1)` and leaves out requests with at most
    ///   one output token; ITL is the flat list of every chunk gap of every request.
    /// - Goodput counts successful requests meeting every SLO, `slo_ms / 1000 >= value`
    ///   (inclusive), with a TPOT of 0 for requests of at most one token. vLLM accepts SLOs on
    ///   ttft, tpot and e2el only; SLOs on other metrics are not applied.
    /// - The client-queue sections need `--max-concurrency`, and the queue-inclusive E2EL
    ///   section also a finite request rate, as in vLLM.
    /// - Where vLLM would divide by a zero duration (and crash), the throughputs are 0.
    ///
    /// servebench's own sections come with it: the client's health, the steady state and the
    /// time slices of `--slice-seconds`.
    pub fn compute(run: &RunResult) -> Summary {
        let mut summary = Summary::compute_plain(run);
        summary.steady_state = steady_state(run).map(Box::new);
        if let Some(seconds) = run.config.output.slice_seconds {
            summary.slices = slices(run, seconds);
        }
        summary
    }

    /// [`Summary::compute`] without the steady state and the time slices.
    fn compute_plain(run: &RunResult) -> Summary {
        let mut summary = Summary::over(&run.config, &run.records, run.duration_s);
        summary.health = run.client.as_ref().map(|obs| Health::assess(run, obs, summary.dispatch_lag));
        summary.server = run.telemetry.clone();
        summary.spec_decode = run.spec_decode.as_ref().and_then(|w| w.counts());
        summary.probes = super::ProbeStats::of(&run.probes);
        summary
    }

    /// The figures of `records` (a whole run's, or those of a window of it, borrowed) over
    /// `duration_s`, as [`Summary::compute`] gives them, without what only the whole run has:
    /// the client's health, the server's figures, the steady state and the slices.
    pub(crate) fn over<R: Borrow<RequestRecord>>(config: &RunConfig, records: &[R], duration_s: f64) -> Summary {
        let output = &config.output;
        let traffic = &config.traffic;
        // A pooling run (vLLM's `calculate_metrics_for_embeddings`) has inputs and latencies
        // only: no output, no goodput, no token-time sections, no peaks.
        let pooling = config.target.backend.api().pooling();

        let mut completed = 0u64;
        let mut failed = 0u64;
        let mut total_input = 0u64;
        let mut total_output = 0u64;
        let mut sequences = 0u64;
        let mut ttfts = Vec::new();
        let mut tpots = Vec::new();
        let mut all_tpots = Vec::new();
        // Every gap of every request, for vLLM's ITL percentiles, in the records' whole
        // microseconds: reserved at once, as it can run to millions.
        let gaps = records.iter().map(|r| r.borrow().chunks_us.len().saturating_sub(1)).sum();
        let mut itls_us: Vec<u32> = Vec::with_capacity(gaps);
        let mut e2els = Vec::new();
        let mut queues = Vec::new();
        let mut failures_by_kind = BTreeMap::new();
        let mut failure_messages = Vec::new();

        for r in records.iter().map(Borrow::borrow) {
            let Some(failure) = &r.failure else {
                let out = if pooling { 0 } else { r.output_tokens() };
                total_output += u64::from(out);
                total_input += u64::from(r.prompt_tokens());
                sequences += input_sequences(config, r);
                let (ttft, latency) = (r.ttft_s(), r.latency_s());
                let mut tpot = 0.0;
                if out > 1 {
                    tpot = (latency - ttft) / f64::from(out - 1);
                    tpots.push(tpot);
                }
                all_tpots.push(tpot);
                itls_us.extend(r.gaps_us());
                ttfts.push(ttft);
                e2els.push(latency);
                queues.push(r.client_queue_s());
                completed += 1;
                continue;
            };
            if failure.kind == FailureKind::NotSent {
                continue;
            }
            failed += 1;
            *failures_by_kind.entry(failure.kind).or_insert(0) += 1;
            if failure_messages.len() < MAX_FAILURE_MESSAGES {
                failure_messages.push(failure.message.clone());
            }
        }

        let per_s = |count: f64| {
            if duration_s > 0.0 && duration_s.is_finite() { count / duration_s } else { 0.0 }
        };

        let request_goodput = (!output.goodput.is_empty() && !pooling).then(|| {
            let good = ttfts
                .iter()
                .zip(&all_tpots)
                .zip(&e2els)
                .filter(|&((&ttft, &tpot), &e2el)| {
                    output.goodput.iter().all(|slo| {
                        let value = match slo.metric {
                            Metric::Ttft => ttft,
                            Metric::Tpot => tpot,
                            Metric::E2el => e2el,
                            _ => return true,
                        };
                        slo.met_by(value)
                    })
                })
                .count();
            per_s(good as f64)
        });

        let rate_finite = traffic.request_rate.is_finite();
        let mut metrics = Vec::new();
        for metric in Metric::ALL {
            if !output.percentile_metrics.contains(&metric) {
                continue;
            }
            let pcts = &output.metric_percentiles;
            let d = match metric {
                Metric::Ttft | Metric::Tpot | Metric::Itl if pooling => continue,
                Metric::Ttft => describe(&ttfts, pcts),
                Metric::Tpot => describe(&tpots, pcts),
                // Nothing reads the gaps after this: described where they lie, not copied.
                Metric::Itl => describe_micros_in_place(&mut itls_us, pcts),
                Metric::E2el => describe(&e2els, pcts),
                Metric::ClientQueueTime if traffic.max_concurrency.is_some() => describe(&queues, pcts),
                Metric::E2elIncludingClientQueue if traffic.max_concurrency.is_some() && rate_finite => {
                    describe_in_place(&mut e2els.iter().zip(&queues).map(|(e, q)| e + q).collect::<Vec<_>>(), pcts)
                }
                _ => continue,
            };
            metrics.push(MetricStats {
                metric,
                mean_ms: d.mean * 1000.0,
                median_ms: d.median * 1000.0,
                std_ms: Some(d.std * 1000.0),
                percentiles: d.percentiles.iter().map(|&(p, v)| (p, v * 1000.0)).collect(),
            });
        }

        // The output figures and peaks of a generation run; a pooling run's are not computed.
        let generated = !pooling;
        let buckets = generated.then(|| vllm_bucket_peaks(records));
        Summary {
            completed,
            failed: Some(failed),
            max_concurrency: traffic.max_concurrency.map(|c| c as u64),
            request_rate: Some(traffic.request_rate),
            duration_s,
            total_input_tokens: total_input,
            total_output_tokens: generated.then_some(total_output),
            request_throughput: per_s(completed as f64),
            request_goodput,
            output_throughput: generated.then(|| per_s(total_output as f64)),
            total_token_throughput: Some(per_s((total_input + total_output) as f64)),
            pooling: pooling.then(|| PoolingFigures {
                total_input_sequences: Some(sequences),
                input_sequence_throughput: per_s(sequences as f64),
            }),
            peak_output_throughput: generated.then(|| peak_output_tokens_per_s(records)),
            peak_concurrent_requests: generated.then(|| peak_concurrency(records)),
            vllm_max_output_tokens_per_s: buckets.as_ref().map(|b| b.max_output_tokens_per_s),
            vllm_max_concurrent_requests: buckets.as_ref().map(|b| b.max_concurrent_requests),
            metrics,
            failures_by_kind,
            failure_messages,
            dispatch_lag: dispatch_lag(records),
            health: None,
            steady_state: None,
            slices: Vec::new(),
            server: None,
            http: super::HttpBreakdown::of(records),
            spec_decode: None,
            probes: None,
            gpus: config.target.gpus,
            gpu_hour_cost: config.target.gpu_hour_cost,
        }
    }
}

/// The input sequences record `r` carried (vLLM's `num_input_sequences`), from the plan's
/// grouping of the dataset's inputs into requests, which the config fixes.
pub(crate) fn input_sequences(config: &RunConfig, r: &RequestRecord) -> u64 {
    config.workload.input_sequences(config.traffic.num_prompts, r.index)
}

/// p50, p99 and max of [`RequestRecord::dispatch_lag_s`] over the requests that were
/// dispatched (an unsent request has an arrival time before its planned time).
pub fn dispatch_lag<R: Borrow<RequestRecord>>(records: &[R]) -> Option<DispatchLag> {
    let lags: Vec<f64> = records
        .iter()
        .map(Borrow::borrow)
        .filter(|r| r.arrival_ns >= r.planned_ns)
        .map(RequestRecord::dispatch_lag_s)
        .collect();
    if lags.is_empty() {
        return None;
    }
    let sorted = Sorted::new(&lags);
    Some(DispatchLag {
        p50_ms: sorted.percentile(50.0) * 1000.0,
        p99_ms: sorted.percentile(99.0) * 1000.0,
        max_ms: sorted.max() * 1000.0,
    })
}

/// Serializes an optional rate with infinity as `"inf"`, as vLLM's JSON does.
mod opt_rate {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(x) => crate::config::float_or_inf::serialize(x, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        #[derive(Deserialize, Serialize)]
        struct Rate(#[serde(with = "crate::config::float_or_inf")] f64);
        Ok(Option::<Rate>::deserialize(d)?.map(|r| r.0))
    }
}

#[cfg(test)]
mod tests;
