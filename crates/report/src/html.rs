//! The HTML report: one self-contained page (no network: inline CSS, inline SVG, an inline
//! script) with the findings, the comparison tables, charts of throughput and latency along
//! the sweep axis (or per run), latency distributions and a request timeline from the
//! per-request records, and each run's summary as JSON in a
//! `<script type="application/json" id="servebench-runs">`.
//!
//! The page is complete without its script, which only adds hover values and lets a click
//! on a legend entry hide or show a series. A first inline script records any script error
//! on the root element (`data-script-error`) and in the footer; the main one marks the root
//! with `data-ready="1"` and the number of charts (`data-charts`) once it has run.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};
use servebench_core::config::Metric;
use servebench_core::metrics::Sorted;
use servebench_store::{ChunkTimes, RunId, StoredRun};

use crate::ReportError;
use crate::bootstrap::samples;
use crate::compare::{Comparison, pair_table, ranges, sweep_tables};
use crate::layout::Layout;
use crate::quantity::{Quantity, Stat, metric_name};
use crate::svg::{self, Axis, Bar, Line, LineChart, Span};
use crate::table::html_escape;

/// At most this many runs get latency distributions.
pub const MAX_DISTRIBUTIONS: usize = 10;

/// At most this many requests are drawn on the timeline; more are thinned evenly.
pub const MAX_TIMELINE: usize = 200;

/// What the page says about itself.
#[derive(Clone, Debug, PartialEq)]
pub struct HtmlOptions {
    pub title: String,
    /// The sweep axis (`--by`).
    pub by: Option<String>,
    /// The run whose requests the timeline shows; the first run with records by default.
    pub timeline_run: Option<RunId>,
    /// `servebench 0.1.0`.
    pub generator: String,
    /// When the page was made, as text; left out when `None`.
    pub generated_at: Option<String>,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        HtmlOptions {
            title: "servebench report".into(),
            by: None,
            timeline_run: None,
            generator: "servebench".into(),
            generated_at: None,
        }
    }
}

const STYLE: &str = r#"
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  margin: 0 auto; max-width: 1180px; padding: 16px 24px 48px; color: #1a1a1a; background: #fff; line-height: 1.45; }
h1 { font-size: 1.7em; margin: 0.4em 0 0.1em; }
h2 { font-size: 1.3em; margin-top: 1.8em; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.meta, .note, figcaption { color: #555; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; margin: 0.8em 0 1.2em; font-size: 0.86em; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: 4px 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; white-space: nowrap; }
th { background: #f3f3f3; }
tbody tr:nth-child(even) { background: #fafafa; }
.num { text-align: right; }
.scroll { overflow-x: auto; }
figure { margin: 1em 0 1.6em; }
svg.chart { max-width: 100%; height: auto; font-family: inherit; }
.series.hidden { display: none; }
.legend-item { cursor: pointer; }
.legend-item.off { opacity: 0.35; }
.findings li { margin: 0.3em 0; }
.tip { position: absolute; pointer-events: none; background: #222; color: #fff; font-size: 12px;
  padding: 3px 6px; border-radius: 3px; max-width: 420px; }
#script-status { color: #b00; }
"#;

/// Records any script error on the root element and in the footer; runs before anything else.
const ERROR_HOOK: &str = r#"window.addEventListener("error", function (e) {
  var msg = String((e && e.message) || e);
  document.documentElement.setAttribute("data-script-error", msg);
  var s = document.getElementById("script-status");
  if (s) { s.hidden = false; s.textContent = "The page's script failed (" + msg + "); the charts and tables above are complete without it."; }
});"#;

const SCRIPT: &str = r#"(function () {
  "use strict";
  var root = document.documentElement;
  function toggle(item) {
    var svg = item.closest("svg");
    var key = item.getAttribute("data-series");
    var off = item.classList.toggle("off");
    var parts = svg.querySelectorAll('.series[data-series="' + key + '"]');
    for (var i = 0; i < parts.length; i++) { parts[i].classList.toggle("hidden", off); }
  }
  var items = document.querySelectorAll(".legend-item");
  for (var i = 0; i < items.length; i++) {
    items[i].addEventListener("click", function () { toggle(this); });
    items[i].addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(this); }
    });
  }
  var tip = document.createElement("div");
  tip.className = "tip";
  tip.hidden = true;
  document.body.appendChild(tip);
  document.addEventListener("mouseover", function (e) {
    var t = e.target && e.target.closest ? e.target.closest("[data-value]") : null;
    if (!t) { tip.hidden = true; return; }
    tip.textContent = t.getAttribute("data-value");
    tip.hidden = false;
  });
  document.addEventListener("mousemove", function (e) {
    tip.style.left = (e.pageX + 14) + "px";
    tip.style.top = (e.pageY + 14) + "px";
  });
  var data = JSON.parse(document.getElementById("servebench-runs").textContent);
  root.setAttribute("data-runs", String(data.length));
  root.setAttribute("data-charts", String(document.querySelectorAll("figure svg.chart").length));
  root.setAttribute("data-ready", "1");
})();"#;

/// The whole page.
pub fn render(runs: &[StoredRun], opts: &HtmlOptions) -> Result<String, ReportError> {
    let c = Comparison::new(runs, opts.by.as_deref())?;
    let layout = &c.layout;
    let mut body = String::new();

    let ids: Vec<i64> = runs.iter().map(|r| r.row.id).collect();
    let noun = if runs.len() == 1 { "run" } else { "runs" };
    let _ = writeln!(body, "<header>\n<h1>{}</h1>", html_escape(&opts.title));
    let mut meta = format!("{} {noun} ({}); made by {}", runs.len(), ranges(&ids), opts.generator);
    if let Some(at) = &opts.generated_at {
        let _ = write!(meta, " on {at}");
    }
    let _ = writeln!(body, "<p class=\"meta\">{}.</p>", html_escape(&meta));
    if !layout.common.is_empty() {
        let shared: Vec<String> = layout.common.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(body, "<p class=\"meta\">Shared by every run: {}.</p>", html_escape(&shared.join(", ")));
    }
    body.push_str(
        "<nav><a href=\"#findings\">Findings</a><a href=\"#runs\">Runs</a><a href=\"#charts\">Charts</a>\
         <a href=\"#distributions\">Distributions</a><a href=\"#timeline\">Timeline</a></nav>\n</header>\n",
    );

    body.push_str("<section id=\"findings\">\n<h2>Findings</h2>\n");
    if c.findings.is_empty() {
        body.push_str("<p class=\"note\">Nothing to rank: the runs form no group and no sweep.</p>\n");
    } else {
        body.push_str("<ul class=\"findings\">\n");
        for f in &c.findings {
            let _ = writeln!(body, "<li>{}</li>", html_escape(&f.text));
        }
        body.push_str("</ul>\n");
    }
    body.push_str("</section>\n");

    body.push_str("<section id=\"runs\">\n<h2>Runs</h2>\n");
    let _ = writeln!(body, "<div class=\"scroll\">{}</div>", c.runs_table.html());
    if let Some(pair) = &c.pair {
        let _ = writeln!(body, "<div class=\"scroll\">{}</div>", pair_table(runs, layout, pair).html());
    }
    for t in sweep_tables(runs, layout) {
        let _ = writeln!(body, "<div class=\"scroll\">{}</div>", t.html());
    }
    if !c.notes.is_empty() {
        body.push_str("<ul class=\"note\">\n");
        for n in &c.notes {
            let _ = writeln!(body, "<li>{}</li>", html_escape(n));
        }
        body.push_str("</ul>\n");
    }
    body.push_str("</section>\n");

    body.push_str("<section id=\"charts\">\n<h2>Throughput and latency</h2>\n");
    body.push_str(&charts(runs, layout));
    body.push_str("</section>\n");

    body.push_str("<section id=\"distributions\">\n<h2>Latency distributions</h2>\n");
    body.push_str(&distributions(runs, layout));
    body.push_str("</section>\n");

    body.push_str("<section id=\"timeline\">\n<h2>Requests over time</h2>\n");
    body.push_str(&timeline_section(runs, layout, opts.timeline_run)?);
    body.push_str("</section>\n");

    body.push_str("<section id=\"data\">\n<h2>Data</h2>\n");
    body.push_str(
        "<p class=\"note\">Each run's stored summary is embedded in this page as JSON \
         (<code>script#servebench-runs</code>).</p>\n",
    );
    let _ = writeln!(
        body,
        "<script type=\"application/json\" id=\"servebench-runs\">{}</script>",
        script_json(&runs_json(runs, layout))
    );
    body.push_str("</section>\n");
    body.push_str("<footer><p id=\"script-status\" hidden></p></footer>\n");

    let mut page = String::new();
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    page.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(page, "<title>{}</title>", html_escape(&opts.title));
    let _ = writeln!(page, "<script>{ERROR_HOOK}</script>");
    let _ = writeln!(page, "<style>{STYLE}</style>\n</head>\n<body>");
    page.push_str(&body);
    let _ = writeln!(page, "<script>{SCRIPT}</script>\n</body>\n</html>");
    Ok(page)
}

/// JSON made safe inside a `<script>` element: `<`, `>` and `&` as `\u` escapes (they only
/// occur inside JSON strings, where the escapes mean the same).
fn script_json(value: &Value) -> String {
    value.to_string().replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026")
}

fn runs_json(runs: &[StoredRun], layout: &Layout) -> Value {
    Value::Array(
        runs.iter()
            .enumerate()
            .map(|(i, r)| {
                let row = &r.row;
                let labels: Map<String, Value> =
                    row.labels.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
                json!({
                    "id": row.id,
                    "uid": row.uid,
                    "kind": row.kind.as_str(),
                    "name": layout.names[i],
                    "model": row.model,
                    "backend": row.backend,
                    "started_at": row.started_at,
                    "labels": labels,
                    "source": row.source.as_ref().map(|s| json!({"file": s.file, "line": s.line})),
                    "summary": serde_json::to_value(&r.summary).unwrap_or(Value::Null),
                })
            })
            .collect(),
    )
}

fn figure(svg: String, caption: &str) -> String {
    format!("<figure>\n{svg}<figcaption>{}</figcaption>\n</figure>\n", html_escape(caption))
}

/// Milliseconds shown in seconds when values reach ten seconds.
fn time_unit(values: impl Iterator<Item = f64>) -> (f64, &'static str) {
    if values.fold(0.0f64, f64::max) >= 10_000.0 { (1000.0, "s") } else { (1.0, "ms") }
}

/// Throughput, TTFT and TPOT along the sweep axis per series, or per run as bars.
fn charts(runs: &[StoredRun], layout: &Layout) -> String {
    let mut out = String::new();
    let ttft = Quantity::Latency(Stat::Median, Metric::Ttft);
    let tpot = Quantity::Latency(Stat::Median, Metric::Tpot);
    let Some(sweep) = &layout.sweep else {
        let names = &layout.names;
        let bars = |q: Quantity, whisker: Option<Quantity>| -> Vec<Bar> {
            runs.iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    q.value(r).map(|v| Bar {
                        name: format!("#{} {}", r.row.id, names[i]),
                        value: v,
                        whisker: whisker.and_then(|w| w.value(r)),
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
    let series_name = |name: &str| if name.is_empty() { "all runs".to_string() } else { name.to_string() };
    let lines = |q: Quantity, scale: f64| -> Vec<Line> {
        sweep
            .series
            .iter()
            .map(|s| Line {
                name: series_name(&s.name),
                points: s.points.iter().filter_map(|&(x, i)| q.value(&runs[i]).map(|v| (x, v / scale))).collect(),
                markers: true,
            })
            .collect()
    };
    let x_unit = format!("{}=", sweep.axis);
    let out_lines = lines(Quantity::OutputThroughput, 1.0);
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
    for (metric, id) in [(Metric::Ttft, "chart-ttft"), (Metric::Tpot, "chart-tpot")] {
        let q = Quantity::Latency(Stat::Median, metric);
        let (scale, unit) = time_unit(runs.iter().filter_map(|r| q.value(r)));
        let l = lines(q, scale);
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

fn distributions(runs: &[StoredRun], layout: &Layout) -> String {
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
                name: format!("#{} {}", runs[*i].row.id, layout.names[*i]),
                points: cdf_points(s, scale),
                markers: false,
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

fn timeline_section(runs: &[StoredRun], layout: &Layout, pick: Option<RunId>) -> Result<String, ReportError> {
    let has_records = |r: &StoredRun| r.records.as_ref().is_some_and(|rec| !rec.records.is_empty());
    let index = match pick {
        Some(id) => {
            let i = runs
                .iter()
                .position(|r| r.row.id == id)
                .ok_or_else(|| ReportError::BadTimeline { id, why: "it is not among the runs of the report".into() })?;
            if !has_records(&runs[i]) {
                return Err(ReportError::BadTimeline { id, why: "it has no per-request records".into() });
            }
            Some(i)
        }
        None => runs.iter().position(has_records),
    };
    let Some(i) = index else {
        return Ok(
            "<p class=\"note\">None of these runs has per-request records, so there is no timeline.</p>\n".into()
        );
    };
    let run = &runs[i];
    let Some(records) = &run.records else { return Ok(String::new()) };
    let mut spans: Vec<Span> = records
        .records
        .iter()
        .filter(|r| !r.never_sent())
        .map(|r| {
            let start = r.start_s();
            let last = r.chunks_us.last().copied().unwrap_or(r.end_us).max(r.end_us);
            Span {
                index: r.index,
                arrival: r.arrival_ns as f64 * 1e-9,
                start,
                first: r.chunks_us.first().map(|&c| start + f64::from(c) * 1e-6),
                end: start + f64::from(last) * 1e-6,
                failed: !r.succeeded(),
            }
        })
        .collect();
    spans.sort_by(|a, b| a.start.total_cmp(&b.start).then(a.index.cmp(&b.index)));
    let total = spans.len();
    let step = total.div_ceil(MAX_TIMELINE).max(1);
    let shown: Vec<Span> = spans.iter().step_by(step).cloned().collect();
    let name = format!("run {} ({})", run.row.id, layout.names[i]);
    let mut out = String::new();
    let thinned = if step > 1 {
        format!("{} of its {total} requests (every {} by send time)", shown.len(), ordinal(step))
    } else {
        format!("all {total} requests")
    };
    out.push_str(&figure(
        svg::timeline("chart-timeline", &format!("Requests of run {}", run.row.id), &shown),
        &format!(
            "Each row is a request of {name}, {thinned}: grey while it waited for a concurrency slot, orange until its \
             first token, blue until its last; red for a failed request."
        ),
    ));

    let end = spans.iter().map(|s| s.end).fold(0.0, f64::max);
    if end > 0.0 {
        let (tokens, in_flight) = over_time(run, &spans, end);
        out.push_str(&figure(
            svg::line_chart(&LineChart {
                id: "chart-tokens".into(),
                title: format!("Output tokens per second, run {}", run.row.id),
                x: Axis::linear("Time since the run started (s)"),
                y: Axis::linear("Output throughput (tok/s)"),
                lines: vec![Line { name: "output tokens/s".into(), points: tokens, markers: false }],
                x_unit: "s".into(),
                y_unit: "tok/s".into(),
            }),
            &format!(
                "Output tokens per second of {name} in time buckets{}.",
                if records.chunk_times == ChunkTimes::FirstLast {
                    "; the records hold only the first and last chunk of each request, so a request's tokens after \
                     the first are spread evenly between them"
                } else {
                    ", each token chunk counted at its arrival"
                }
            ),
        ));
        out.push_str(&figure(
            svg::line_chart(&LineChart {
                id: "chart-inflight".into(),
                title: format!("Requests in flight, run {}", run.row.id),
                x: Axis::linear("Time since the run started (s)"),
                y: Axis::linear("Requests in flight"),
                lines: vec![Line { name: "in flight".into(), points: in_flight, markers: false }],
                x_unit: "s".into(),
                y_unit: "requests".into(),
            }),
            &format!("Requests of {name} sent and not yet finished, at the middle of each time bucket."),
        ));
    }
    Ok(out)
}

/// `(x, y)` points of a line.
type Points = Vec<(f64, f64)>;

/// `2nd`, `3rd`, `11th`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Output tokens per second and requests in flight, per time bucket of about a sixtieth of
/// the run.
fn over_time(run: &StoredRun, spans: &[Span], end: f64) -> (Points, Points) {
    let width = svg::nice_step(end, 60.0);
    let bins = ((end / width).ceil() as usize).max(1);
    let mut tokens = vec![0.0f64; bins];
    let bin = |t: f64| ((t / width).floor().max(0.0) as usize).min(bins - 1);
    let Some(records) = &run.records else { return (Vec::new(), Vec::new()) };
    for r in records.records.iter().filter(|r| r.succeeded() && !r.chunks_us.is_empty()) {
        let start = r.start_s();
        let out = f64::from(r.output_tokens());
        let at = |c: u32| start + f64::from(c) * 1e-6;
        match records.chunk_times {
            ChunkTimes::All => {
                let per = out / r.chunks_us.len() as f64;
                for &c in &r.chunks_us {
                    tokens[bin(at(c))] += per;
                }
            }
            ChunkTimes::FirstLast => {
                let (first, last) = (at(r.chunks_us[0]), at(*r.chunks_us.last().unwrap_or(&r.chunks_us[0])));
                tokens[bin(first)] += 1.0;
                let rest = out - 1.0;
                if rest > 0.0 {
                    if last <= first {
                        tokens[bin(last)] += rest;
                    } else {
                        for (k, slot) in tokens.iter_mut().enumerate().take(bin(last) + 1).skip(bin(first)) {
                            let (a, b) = (k as f64 * width, (k + 1) as f64 * width);
                            let overlap = (b.min(last) - a.max(first)).max(0.0);
                            *slot += rest * overlap / (last - first);
                        }
                    }
                }
            }
        }
    }
    let mid = |k: usize| (k as f64 + 0.5) * width;
    let rate = tokens.iter().enumerate().map(|(k, t)| (mid(k), t / width)).collect();
    let in_flight = (0..bins)
        .map(|k| {
            let t = mid(k);
            (t, spans.iter().filter(|s| s.start <= t && t < s.end).count() as f64)
        })
        .collect();
    (rate, in_flight)
}

#[cfg(test)]
mod tests;
