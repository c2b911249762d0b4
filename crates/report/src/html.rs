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

mod charts;
mod plot_timeline;
mod timeline;

use std::fmt::Write as _;

use serde_json::{Map, Value, json};
use servebench_store::{RunId, StoredRun};

use crate::ReportError;
use crate::compare::{Comparison, pair_table, ranges, sweep_tables};
use crate::layout::Layout;
use crate::table::html_escape;
use charts::{charts, distributions};
use timeline::timeline_section;

pub use plot_timeline::{MAX_PLOT_TIMELINE, TimelinePage, timeline_page};

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
  var runs = document.getElementById("servebench-runs");
  var data = runs ? JSON.parse(runs.textContent) : [];
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
    Ok(page(&opts.title, &body))
}

/// A self-contained page around `body`: the style, the error hook, a footer for script errors
/// and the script.
fn page(title: &str, body: &str) -> String {
    let mut page = String::new();
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    page.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(page, "<title>{}</title>", html_escape(title));
    let _ = writeln!(page, "<script>{ERROR_HOOK}</script>");
    let _ = writeln!(page, "<style>{STYLE}</style>\n</head>\n<body>");
    page.push_str(body);
    page.push_str("<footer><p id=\"script-status\" hidden></p></footer>\n");
    let _ = writeln!(page, "<script>{SCRIPT}</script>\n</body>\n</html>");
    page
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

/// An SVG chart with its caption.
fn figure(svg: String, caption: &str) -> String {
    format!("<figure>\n{svg}<figcaption>{}</figcaption>\n</figure>\n", html_escape(caption))
}

#[cfg(test)]
mod tests;
