//! The report's charts of run summaries and distributions: output throughput and median
//! TTFT/TPOT along the sweep axis (a line per series) or per run (bars), and the cumulative
//! distribution of each latency from the per-request records; output throughput per GPU and
//! cost per million output tokens against interactivity, each with its Pareto frontier, where
//! the runs know their GPUs (and, for the cost, their price).

use std::fmt::Write as _;

use servebench_core::config::Metric;
use servebench_core::metrics::Sorted;
use servebench_store::StoredRun;

use super::{MAX_DISTRIBUTIONS, figure};
use crate::bootstrap::samples;
use crate::compare::ranges;
use crate::layout::Layout;
use crate::pareto::{self, Trade};
use crate::quantity::{Quantity, Stat, metric_name};
use crate::svg::{self, Axis, Bar, Line, LineChart};

/// A series' name in a chart's legend: an unnamed series (the only one) is `all runs`.
fn series_name(name: &str) -> String {
    if name.is_empty() { "all runs".to_string() } else { name.to_string() }
}

/// Milliseconds shown in seconds when values reach ten seconds.
fn time_unit(values: impl Iterator<Item = f64>) -> (f64, &'static str) {
    if values.fold(0.0f64, f64::max) >= 10_000.0 { (1000.0, "s") } else { (1.0, "ms") }
}

/// Throughput, TTFT and TPOT along the sweep axis per series, or per run as bars; then the
/// trades of throughput per GPU and of cost against interactivity where runs know their GPUs
/// (and their price).
pub(super) fn charts(runs: &[StoredRun], layout: &Layout) -> String {
    let mut out = load_charts(runs, layout);
    out.push_str(&pareto_chart(runs, layout, Trade::PerGpu));
    out.push_str(&pareto_chart(runs, layout, Trade::Cost));
    out
}

/// A trade's value against tokens per second per user, a line per series (or run) and one
/// along the Pareto frontier; nothing with fewer than two runs that have both numbers.
fn pareto_chart(runs: &[StoredRun], layout: &Layout, trade: Trade) -> String {
    let all = trade.points(runs);
    if all.len() < 2 {
        return String::new();
    }
    let mut lines: Vec<Line> = Vec::new();
    for p in &all {
        let name = series_name(&pareto::owner(layout, p.index));
        match lines.iter_mut().find(|l| l.name == name) {
            Some(line) => line.points.push((p.user, p.y)),
            None => {
                lines.push(Line { name, points: vec![(p.user, p.y)], markers: true, joined: true, bands: Vec::new() })
            }
        }
    }
    for line in &mut lines {
        line.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let on = trade.frontier(&all);
    let mut ids: Vec<i64> = on.iter().map(|p| runs[p.index].row.id).collect();
    ids.sort_unstable();
    lines.push(Line {
        name: "Pareto frontier".into(),
        points: on.iter().map(|p| (p.user, p.y)).collect(),
        markers: false,
        joined: true,
        bands: Vec::new(),
    });
    let (id, title, what, better, wins) = match trade {
        Trade::PerGpu => (
            "chart-pareto",
            "Throughput per GPU against interactivity",
            "Each run's output tokens per second per GPU",
            "up and to the right",
            "no other run gives as much of both",
        ),
        Trade::Cost => (
            "chart-cost",
            "Cost against interactivity",
            "What a million output tokens cost each run (its GPUs' price an hour over the output tokens they \
             serve in it)",
            "down and to the right",
            "no other run is as cheap at as many tok/s per user",
        ),
    };
    figure(
        svg::line_chart(&LineChart {
            id: id.into(),
            title: title.into(),
            x: Axis::linear(pareto::PER_USER.label()),
            y: Axis::linear(trade.y().label()),
            lines,
            x_unit: "tok/s/user".into(),
            y_unit: trade.y().unit().into(),
        }),
        &format!(
            "{what} against the tokens per second each user saw (1000 / median TPOT), a line per series; {better} \
             is better. Runs {} are on the Pareto frontier: {wins}.",
            ranges(&ids)
        ),
    )
}

/// Throughput, TTFT and TPOT along the sweep axis per series, or per run as bars.
fn load_charts(runs: &[StoredRun], layout: &Layout) -> String {
    let mut out = String::new();
    let ttft = Quantity::Latency(Stat::Median, Metric::Ttft);
    let tpot = Quantity::Latency(Stat::Median, Metric::Tpot);
    let Some(sweep) = &layout.sweep else {
        let bars = |q: Quantity, whisker: Option<Quantity>| -> Vec<Bar> {
            runs.iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    q.value(&r.summary).map(|v| Bar {
                        name: layout.chart_name(r.row.id, i),
                        value: v,
                        whisker: whisker.and_then(|w| w.value(&r.summary)),
                    })
                })
                .collect()
        };
        let out_bars = bars(Quantity::OutputThroughput, None);
        if !out_bars.is_empty() {
            out.push_str(&figure(
                svg::bar_chart(
                    "chart-output",
                    "Output throughput per run",
                    "Output throughput (tok/s)",
                    &out_bars,
                    "output throughput",
                    None,
                ),
                "Output tokens per second over the whole run.",
            ));
        }
        for (q, id, metric) in [(ttft, "chart-ttft", Metric::Ttft), (tpot, "chart-tpot", Metric::Tpot)] {
            let p99 = Quantity::Latency(Stat::P99, metric);
            let b = bars(q, Some(p99));
            if b.is_empty() {
                continue;
            }
            let name = metric_name(metric);
            out.push_str(&figure(
                svg::bar_chart(
                    id,
                    &format!("Median {name} per run"),
                    &format!("{name} (ms)"),
                    &b,
                    "median",
                    Some("P99"),
                ),
                &format!("Bars are the median {name}; whiskers reach the P99 where the run has it."),
            ));
        }
        if out.is_empty() {
            out.push_str("<p class=\"note\">The runs have no throughput or latency to chart.</p>\n");
        }
        return out;
    };
    let axis_values = sweep.values.clone();
    let positive = axis_values.iter().all(|v| *v > 0.0);
    let spread = axis_values.last().copied().unwrap_or(1.0) / axis_values.first().copied().unwrap_or(1.0);
    let x_axis = || {
        let label = sweep.axis.clone();
        let axis = if positive && spread >= 8.0 { Axis::log(label) } else { Axis::linear(label) };
        Axis { from_zero: false, ..axis.with_ticks(axis_values.clone()) }
    };
    let lines = |q: Quantity, band: &str, scale: f64| -> Vec<Line> {
        sweep
            .series
            .iter()
            .map(|s| Line {
                name: series_name(&s.name),
                points: s
                    .points
                    .iter()
                    .filter_map(|&(x, i)| q.value(&runs[i].summary).map(|v| (x, v / scale)))
                    .collect(),
                markers: true,
                joined: true,
                bands: s
                    .points
                    .iter()
                    .filter_map(|&(x, i)| {
                        let v = q.value(&runs[i].summary)? / scale;
                        let [lo, hi] = prediction_errors(&runs[i], band)?;
                        Some((x, v / (1.0 + hi), v / (1.0 + lo)))
                    })
                    .collect(),
            })
            .collect()
    };
    let x_unit = format!("{}=", sweep.axis);
    let out_lines = lines(Quantity::OutputThroughput, "throughput", 1.0);
    out.push_str(&figure(
        svg::line_chart(&LineChart {
            id: "chart-output".into(),
            title: format!("Output throughput by {}", sweep.axis),
            x: x_axis(),
            y: Axis::linear("Output throughput (tok/s)"),
            lines: out_lines,
            x_unit: x_unit.clone(),
            y_unit: "tok/s".into(),
        }),
        &format!("Output tokens per second over each run, one line per series, against {}.", sweep.axis),
    ));
    for (metric, id, band) in [(Metric::Ttft, "chart-ttft", "ttft"), (Metric::Tpot, "chart-tpot", "tpot")] {
        let q = Quantity::Latency(Stat::Median, metric);
        let (scale, unit) = time_unit(runs.iter().filter_map(|r| q.value(&r.summary)));
        let l = lines(q, band, scale);
        let name = metric_name(metric);
        let label = format!("Median {name} ({unit})");
        let values: Vec<f64> = l.iter().flat_map(|l| l.points.iter().map(|p| p.1)).collect();
        out.push_str(&figure(
            svg::line_chart(&LineChart {
                id: id.into(),
                title: format!("Median {name} by {}", sweep.axis),
                x: x_axis(),
                y: Axis::auto(label, values, 50.0),
                lines: l,
                x_unit: x_unit.clone(),
                y_unit: unit.into(),
            }),
            &format!(
                "The median {name} of each run against {}; a logarithmic scale where values span more than 50×.",
                sweep.axis
            ),
        ));
    }
    out
}

/// The 10th and 90th percentile relative errors of a predicted run's band for `metric`
/// (`ttft`, `tpot`, `throughput`): the band printed with it, kept with the run (its device's
/// for runs kept before that was); `None` for a measured run.
fn prediction_errors(run: &StoredRun, metric: &str) -> Option<[f64; 2]> {
    let env = run.environment.as_ref()?;
    let band = env
        .pointer(&format!("/prediction_band/{metric}"))
        .or_else(|| env.pointer(&format!("/simulated/hardware/uncertainty/{metric}")))?;
    let pair = band.as_array()?;
    let (lo, hi) = (pair.first()?.as_f64()?, pair.get(1)?.as_f64()?);
    (lo > -1.0 && hi >= lo).then_some([lo, hi])
}

/// Up to 101 points of the empirical distribution function of `values`.
fn cdf_points(values: &[f64], scale: f64) -> Vec<(f64, f64)> {
    if values.is_empty() {
        return Vec::new();
    }
    let sorted = Sorted::new(values);
    let v = sorted.values();
    let n = v.len();
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut last = usize::MAX;
    for j in 0..=100 {
        let idx = ((j as f64 / 100.0) * (n - 1) as f64).round() as usize;
        if idx != last {
            out.push((v[idx] / scale, (idx + 1) as f64 / n as f64));
            last = idx;
        }
    }
    out
}

/// The cumulative distributions of TTFT, TPOT, ITL and E2EL of the runs with records.
pub(super) fn distributions(runs: &[StoredRun], layout: &Layout) -> String {
    let mut out = String::new();
    let with: Vec<usize> =
        (0..runs.len()).filter(|&i| runs[i].records.as_ref().is_some_and(|r| !r.records.is_empty())).collect();
    let without: Vec<i64> = (0..runs.len()).filter(|i| !with.contains(i)).map(|i| runs[i].row.id).collect();
    if with.is_empty() {
        out.push_str(
            "<p class=\"note\">None of these runs has per-request records (runs imported from console reports \
             hold only their summaries), so their distributions are not known.</p>\n",
        );
        return out;
    }
    let shown = &with[..with.len().min(MAX_DISTRIBUTIONS)];
    for (metric, id) in
        [(Metric::Ttft, "cdf-ttft"), (Metric::Tpot, "cdf-tpot"), (Metric::Itl, "cdf-itl"), (Metric::E2el, "cdf-e2el")]
    {
        let data: Vec<(usize, Vec<f64>)> = shown
            .iter()
            .filter_map(|&i| samples(runs[i].records.as_ref()?, metric).filter(|s| !s.is_empty()).map(|s| (i, s)))
            .collect();
        if data.is_empty() {
            continue;
        }
        let (scale, unit) = time_unit(data.iter().flat_map(|(_, s)| s.iter().copied()));
        let lines: Vec<Line> = data
            .iter()
            .map(|(i, s)| Line {
                name: layout.chart_name(runs[*i].row.id, *i),
                points: cdf_points(s, scale),
                markers: false,
                joined: true,
                bands: Vec::new(),
            })
            .collect();
        let xs: Vec<f64> = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)).collect();
        let name = metric_name(metric);
        let per = if metric == Metric::Itl { "token chunk" } else { "request" };
        let y_label = if metric == Metric::Itl { "Fraction of chunk gaps" } else { "Fraction of requests" };
        out.push_str(&figure(
            svg::line_chart(&LineChart {
                id: id.into(),
                title: format!("{name}: cumulative distribution"),
                x: Axis { from_zero: false, ..Axis::auto(format!("{name} ({unit})"), xs, 50.0) },
                y: Axis::linear(y_label),
                lines,
                x_unit: unit.into(),
                y_unit: String::new(),
            }),
            &format!(
                "The share of values at or below each {name}, one value per successful {per}, from the stored records."
            ),
        ));
    }
    if with.len() > shown.len() {
        let rest: Vec<i64> = with[shown.len()..].iter().map(|&i| runs[i].row.id).collect();
        let _ = writeln!(
            out,
            "<p class=\"note\">Only the first {MAX_DISTRIBUTIONS} runs with records are drawn; runs {} are left out.</p>",
            ranges(&rest)
        );
    }
    if !without.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"note\">Run{} {} ha{} no per-request records, so no distribution.</p>",
            if without.len() == 1 { "" } else { "s" },
            ranges(&without),
            if without.len() == 1 { "s" } else { "ve" }
        );
    }
    out
}
