//! `bench sweep plot_pareto`: every run of a sweep's results on the plane of output tokens per
//! second per user (its output throughput over its concurrent users) against output tokens
//! per second per GPU, and the Pareto frontier across them, as vLLM's `plot_pareto.py` counts
//! users and GPUs; drawn as `OUTPUT_DIR/pareto/PARETO.svg`.

use std::process::ExitCode;

use anyhow::bail;
use servebench_report::pareto::{Point, Trade};
use servebench_report::svg::{self, Axis, Line, LineChart};

use super::plot::{Record, number, read_runs};
use crate::cli::sweep_serve_args::SweepPlotParetoArgs;
use crate::output::Sink;

/// The first of `keys` a run gives (under either spelling, `_` or `-`), as a number; `None`
/// where it gives none of them (or null, or 0 unless `allow_zero`).
fn numeric(run: &Record, keys: &[&str], allow_zero: bool) -> anyhow::Result<Option<f64>> {
    let present = keys.iter().find_map(|k| {
        [k.to_string(), k.replace('_', "-"), k.replace('-', "_")]
            .into_iter()
            .find_map(|c| run.get(&c).filter(|v| !v.is_null()))
    });
    let Some(v) = present else { return Ok(None) };
    let x = number(Some(v)).or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()));
    let Some(x) = x else { bail!("expected a number for one of {keys:?}, but a run gives {v}") };
    Ok((allow_zero || x != 0.0).then_some(x))
}

/// A run's concurrent users: `user_count_var`, else its request rate, else the most requests
/// it had in flight.
fn user_count(run: &Record, user_count_var: &str) -> anyhow::Result<Option<f64>> {
    let candidates: Vec<&str> = [user_count_var, "request_rate"].into_iter().filter(|k| !k.is_empty()).collect();
    match numeric(run, &candidates, false)? {
        Some(users) => Ok(Some(users)),
        None => numeric(run, &["max_concurrent_requests"], false),
    }
}

/// A run's GPUs: `gpu_count_var` where given and not 0, else its tensor x pipeline x data
/// parallel sizes (each 1 where the run does not give it).
fn gpu_count(run: &Record, gpu_count_var: Option<&str>) -> anyhow::Result<f64> {
    if let Some(gpus) = gpu_count_var.map(|k| numeric(run, &[k], false)).transpose()?.flatten() {
        return Ok(gpus);
    }
    let mut world = 1.0;
    for keys in [["tensor_parallel_size", "tp"], ["pipeline_parallel_size", "pp"], ["data_parallel_size", "dp"]] {
        if let Some(size) = numeric(run, &keys, false)? {
            world *= size;
        }
    }
    Ok(world)
}

/// `bench sweep plot_pareto`.
pub fn plot(args: &SweepPlotParetoArgs, out: &Sink) -> anyhow::Result<ExitCode> {
    let runs = read_runs(&args.output_dir)?;
    let mut points = Vec::new();
    let mut skipped = 0;
    for run in &runs {
        let Some(throughput) = numeric(run, &["output_throughput"], true)? else {
            let keys: Vec<&str> = run.keys().map(String::as_str).collect();
            bail!("a run of the sweep gives no output_throughput; its keys: {}", keys.join(", "))
        };
        let Some(users) = user_count(run, &args.user_count_var)? else {
            skipped += 1;
            continue;
        };
        let gpus = gpu_count(run, args.gpu_count_var.as_deref())?;
        let (user, y) = (throughput / users, throughput / gpus);
        if user.is_finite() && y.is_finite() {
            points.push(Point { index: points.len(), user, y });
        }
    }
    if skipped > 0 {
        out.line(format!(
            "Skipped {skipped} runs without a user count (`max_concurrency` or `max_concurrent_requests`)."
        ))?;
    }
    if points.is_empty() {
        bail!("no run gives both an output throughput and a user count: nothing to chart");
    }
    let path = args.output_dir.join("pareto").join("PARETO.svg");
    out.line("[BEGIN FIGURE]")?;
    out.line("Group: {}")?;
    out.line(format!("Output file: {}", path.display()))?;
    if !args.dry_run {
        let frontier = Trade::PerGpu.frontier(&points);
        let chart = LineChart {
            id: "pareto".into(),
            title: "Output tokens per second per GPU against per user".into(),
            x: Axis::linear("Tokens/s/user"),
            y: Axis::linear("Tokens/s/GPU"),
            lines: vec![
                Line {
                    name: "All runs".into(),
                    points: points.iter().map(|p| (p.user, p.y)).collect(),
                    markers: true,
                    joined: false,
                    bands: Vec::new(),
                },
                Line {
                    name: "Pareto frontier".into(),
                    points: frontier.iter().map(|p| (p.user, p.y)).collect(),
                    markers: true,
                    joined: true,
                    bands: Vec::new(),
                },
            ],
            x_unit: "tok/s/user".into(),
            y_unit: "tok/s/GPU".into(),
        };
        crate::commands::write_file(&path, &svg::grid("PARETO", &[vec![svg::line_chart(&chart)]]))?;
        out.line(format!("Plotted {} points; Pareto frontier size: {}.", points.len(), frontier.len()))?;
    }
    out.line("[END FIGURE]")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn run(v: Value) -> Record {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn users_and_gpus_are_counted_as_vllm_counts_them() {
        let r = run(json!({"max_concurrency": 8, "request_rate": "inf", "tensor-parallel-size": 2, "dp": 2}));
        assert_eq!(user_count(&r, "max_concurrency").unwrap(), Some(8.0));
        assert_eq!(gpu_count(&r, None).unwrap(), 4.0);
        // No concurrency cap: the request rate, "inf" read as Python reads it.
        let r = run(json!({"max_concurrency": null, "request_rate": "inf", "max_concurrent_requests": 12}));
        assert_eq!(user_count(&r, "max_concurrency").unwrap(), Some(f64::INFINITY));
        // A rate of 0 counts as none: the peak in flight.
        let r = run(json!({"request_rate": 0, "max_concurrent_requests": 12}));
        assert_eq!(user_count(&r, "max_concurrency").unwrap(), Some(12.0));
        assert_eq!(user_count(&run(json!({"x": 1})), "max_concurrency").unwrap(), None);
        let r = run(json!({"gpus": 8, "tp": 2}));
        assert_eq!(gpu_count(&r, Some("gpus")).unwrap(), 8.0);
        assert_eq!(gpu_count(&r, Some("missing")).unwrap(), 2.0);
        let err = user_count(&run(json!({"max_concurrency": "many"})), "max_concurrency").unwrap_err();
        assert!(err.to_string().contains("\"many\""), "{err}");
    }
}
