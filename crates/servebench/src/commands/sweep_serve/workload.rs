//! `bench sweep serve_workload` (vLLM's `vllm bench sweep serve_workload`): each combination
//! is run one request at a time (`max_concurrency` 1, the varied load 1) and with the whole
//! dataset at once (both the dataset's size); the load those runs reached (requests a second,
//! or requests in flight: throughput times mean latency) bounds `--workload-iters` levels
//! spread evenly between them, the levels inside run as well, each in its own
//! `...-WL--VAR=VALUE` folder.

use anyhow::bail;
use serde_json::{Map, Value};

use super::Sweep;
use super::params::{self, Item};
use super::server::ServerProcess;
pub use crate::cli::sweep_serve_args::WorkloadVar;
use crate::output::Sink;

/// vLLM's `--num-prompts` default: the dataset's size where neither the combination nor the
/// command gives one.
const DEFAULT_NUM_PROMPTS: u64 = 1000;

/// The workload explored for each combination.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub var: WorkloadVar,
    pub iters: u32,
}

/// The load one run reached, as vLLM estimates it from its result.
fn reached(var: WorkloadVar, run: &Map<String, Value>) -> anyhow::Result<f64> {
    let get = |k: &str| run.get(k).and_then(Value::as_f64);
    let Some(throughput) = get("request_throughput") else { bail!("a run's result has no request_throughput") };
    match var {
        WorkloadVar::RequestRate => Ok(throughput),
        WorkloadVar::MaxConcurrency => match get("mean_e2el_ms") {
            Some(latency) => Ok(throughput * latency / 1000.0),
            None => bail!("a run's result has no mean_e2el_ms"),
        },
    }
}

/// The mean load a set of runs reached.
fn mean_reached(var: WorkloadVar, runs: &[Map<String, Value>], what: &str) -> anyhow::Result<f64> {
    if runs.is_empty() {
        bail!("the {what} runs measured nothing, so the levels between cannot be placed");
    }
    let total = runs.iter().map(|r| reached(var, r)).sum::<anyhow::Result<f64>>()?;
    Ok(total / runs.len() as f64)
}

/// The levels strictly between `low` and `high` of `iters` spread evenly (numpy's `linspace`
/// less its ends), rounded half to even as Python rounds, each once, in order.
pub fn levels_between(low: f64, high: f64, iters: u32) -> Vec<i64> {
    let n = iters as usize;
    let mut out: Vec<i64> = (1..n.saturating_sub(1))
        .map(|i| (low + (high - low) * i as f64 / (n - 1) as f64).round_ties_even() as i64)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The dataset's size: the combination's `num_prompts`, else the command's `--num-prompts`.
fn dataset_size(bench: &Item, cmd: &[String]) -> anyhow::Result<u64> {
    if let Some(v) = bench.0.get("num_prompts") {
        return params::py_str(v).parse().map_err(|_| anyhow::anyhow!("num_prompts {v} is not a count"));
    }
    match params::flag_value(cmd, &["--num-prompts"]) {
        Some(v) => v.parse().map_err(|_| anyhow::anyhow!("--num-prompts {v} is not a count")),
        None => Ok(DEFAULT_NUM_PROMPTS),
    }
}

impl Workload {
    /// The checks vLLM makes before a sweep: at least two levels, and the varied load not
    /// given by a benchmark combination.
    pub fn check(&self, bench_params: &[Item]) -> anyhow::Result<()> {
        if self.iters < 2 {
            bail!("--workload-iters must be at least 2 (the first two levels place the others)");
        }
        let key = self.var.key();
        if bench_params.iter().any(|b| b.0.contains_key(key) || b.0.contains_key(&key.replace('_', "-"))) {
            bail!("--bench-params sets {key}, which serve_workload explores itself: leave it out of the file");
        }
        Ok(())
    }

    /// One combination's levels, run; their data, the one-at-a-time runs first.
    pub(super) async fn explore(
        &self,
        sweep: &Sweep,
        server: Option<&ServerProcess>,
        serve: &Item,
        bench: &Item,
        out: &Sink,
    ) -> anyhow::Result<Vec<Map<String, Value>>> {
        let key = self.var.key();
        out.line("[WL START]")?;
        out.line(format!("Serve parameters: {}", or_none(serve.as_text(", "))))?;
        out.line(format!("Bench parameters: {}", or_none(bench.as_text(", "))))?;
        out.line(format!("Number of workload iterations: {}", self.iters))?;
        let size = dataset_size(bench, &sweep.bench_cmd)?;
        out.line(format!("Dataset size: {size}"))?;
        let level = |comb: &Item, value: u64| {
            let mut c = comb.clone();
            c.0.insert(key.into(), Value::from(value));
            let dir = sweep.comb_dir(serve, bench, &["WL-".into(), format!("{key}={value}")]);
            (c, dir)
        };
        let with_concurrency = |n: u64| {
            let mut c = bench.clone();
            c.0.insert("max_concurrency".into(), Value::from(n));
            c
        };
        let (serial, serial_dir) = level(&with_concurrency(1), 1);
        let serial = sweep.run_comb(server, serve, &serial, &serial_dir, out).await?;
        let (batch, batch_dir) = level(&with_concurrency(size), size);
        let batch = sweep.run_comb(server, serve, &batch, &batch_dir, out).await?;
        if sweep.args.dry_run {
            out.line("Omitting intermediate Workload iterations.")?;
            out.line("[WL END]")?;
            return Ok(Vec::new());
        }
        let low = mean_reached(self.var, &serial, "one-at-a-time")?.ceil();
        out.line(format!("Serial inference: {key}={low}"))?;
        let high = mean_reached(self.var, &batch, "all-at-once")?.floor();
        out.line(format!("Batch inference: {key}={high}"))?;
        let mut data = serial;
        for value in levels_between(low, high, self.iters) {
            out.line(format!("Exploring: {key}={value}"))?;
            let (comb, dir) = level(bench, value.max(0).unsigned_abs());
            data.extend(sweep.run_comb(server, serve, &comb, &dir, out).await?);
        }
        data.extend(batch);
        out.line("[WL END]")?;
        Ok(data)
    }
}

fn or_none(s: String) -> String {
    if s.is_empty() { "(None)".into() } else { s }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn levels_are_spread_evenly_between_the_ends_rounded_as_python_rounds() {
        // numpy.linspace(3, 40, 10)[1:-1] -> 7.11, 11.22, ..., 35.89, rounded.
        assert_eq!(levels_between(3.0, 40.0, 10), [7, 11, 15, 19, 24, 28, 32, 36]);
        // Close ends give each level once.
        assert_eq!(levels_between(2.0, 4.0, 10), [2, 3, 4]);
        assert!(levels_between(1.0, 100.0, 2).is_empty());
        // 0.5 and 2.5 round to even.
        assert_eq!(levels_between(0.0, 3.0, 7), [0, 1, 2]);
    }

    #[test]
    fn the_dataset_size_and_the_load_reached_come_from_the_combination_or_the_command() {
        let cmd = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        let item = |v: Value| Item(v.as_object().unwrap().clone());
        assert_eq!(
            dataset_size(&item(json!({"num_prompts": 50})), &cmd("vllm bench serve --num-prompts 9")).unwrap(),
            50
        );
        assert_eq!(dataset_size(&item(json!({})), &cmd("vllm bench serve --num-prompts 9")).unwrap(), 9);
        assert_eq!(dataset_size(&item(json!({})), &cmd("vllm bench serve --num-prompts=7")).unwrap(), 7);
        assert_eq!(dataset_size(&item(json!({})), &cmd("vllm bench serve")).unwrap(), 1000);
        let run = json!({"request_throughput": 4.0, "mean_e2el_ms": 1500.0}).as_object().unwrap().clone();
        assert_eq!(reached(WorkloadVar::RequestRate, &run).unwrap(), 4.0);
        assert_eq!(reached(WorkloadVar::MaxConcurrency, &run).unwrap(), 6.0);
        assert!(
            mean_reached(WorkloadVar::RequestRate, &[], "one-at-a-time").unwrap_err().to_string().contains("nothing")
        );
        let w = Workload { var: WorkloadVar::MaxConcurrency, iters: 5 };
        assert!(w.check(&[item(json!({"max_concurrency": 4}))]).unwrap_err().to_string().contains("leave it out"));
        assert!(w.check(&[item(json!({"num_prompts": 4}))]).is_ok());
        assert!(Workload { iters: 1, ..w }.check(&[]).is_err());
    }
}
