//! Hand-written SVG charts: lines (with linear or logarithmic axes), horizontal bars and a
//! request timeline. Every chart has a title, labelled axes with units, tick values and a
//! legend; every point carries its value in a `<title>` (a tooltip without script) and in a
//! `data-value` attribute (for the page's script). Output is deterministic text.

mod axis;

use std::fmt::Write as _;

pub(crate) use axis::nice_step;
pub use axis::{Axis, Scale, tick_text};
use axis::{Mapper, axes};
use servebench_store::format::cut;

use crate::table::html_escape;

/// Series colours (colour-blind friendly, distinct in greyscale order).
pub const PALETTE: [&str; 10] =
    ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

const WIDTH: f64 = 820.0;
const HEIGHT: f64 = 360.0;
const LEFT: f64 = 76.0;
const TOP: f64 = 40.0;
const LEGEND: f64 = 250.0;
const BOTTOM: f64 = 56.0;
/// Legend names are cut to this many characters (the whole name is in the tooltip).
const LEGEND_CHARS: usize = 30;

/// One line of a line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// The legend entry and the tooltip's prefix.
    pub name: String,
    /// `(x, y)` in data units, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// Draw a marker at each point (with its value on hover).
    pub markers: bool,
    /// Join the points by a line; false draws the markers alone (a scatter).
    pub joined: bool,
    /// Uncertainty bands of predicted points, `(x, low, high)`: a vertical bar at `x`.
    pub bands: Vec<(f64, f64, f64)>,
}

/// A line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    /// The element id, unique in the page.
    pub id: String,
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub lines: Vec<Line>,
    /// The units of a point's values in its tooltip (`ms`); an `x_unit` ending in `=` goes
    /// before the value instead (`num_prompts=`).
    pub x_unit: String,
    pub y_unit: String,
}

/// An x value in a tooltip: two decimals, or none for whole numbers (axis settings).
pub fn value_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 { format!("{v:.0}") } else { format!("{v:.2}") }
}

fn px(v: f64) -> String {
    format!("{v:.1}")
}

/// Opens an `<svg>` of `width` x `height` with its accessible title.
fn open(out: &mut String, id: &str, title: &str, width: f64, height: f64) {
    let _ = writeln!(
        out,
        "{CHART_OPENING}id=\"{id}\" class=\"chart\" viewBox=\"0 0 {width} {height}\" \
         width=\"{width}\" height=\"{height}\" role=\"img\" aria-labelledby=\"{id}-title\">"
    );
    let _ = writeln!(out, "<title id=\"{id}-title\">{}</title>", html_escape(title));
    let _ = writeln!(out, "<rect class=\"bg\" x=\"0\" y=\"0\" width=\"{width}\" height=\"{height}\" fill=\"#fff\"/>");
    let _ = writeln!(
        out,
        "<text class=\"chart-title\" x=\"{}\" y=\"22\" font-size=\"15\" font-weight=\"600\">{}</text>",
        px(LEFT),
        html_escape(title)
    );
}

/// The legend at the right: a swatch and a name per series; clicking one (with the page's
/// script) shows or hides its series.
fn legend(out: &mut String, names: &[(String, &str)], top: f64, shape: &str) {
    let x = WIDTH - LEGEND + 16.0;
    out.push_str("<g class=\"legend\" font-size=\"12\">\n");
    for (k, (name, color)) in names.iter().enumerate() {
        let y = top + 8.0 + k as f64 * 20.0;
        let swatch = match shape {
            "line" => format!(
                "<line x1=\"{x:.1}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"{color}\" stroke-width=\"3\"/>",
                x + 18.0
            ),
            _ => format!("<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"18\" height=\"10\" fill=\"{color}\"/>", y - 5.0),
        };
        let _ = writeln!(
            out,
            "<g class=\"legend-item\" data-series=\"{k}\" tabindex=\"0\" role=\"button\"><title>{}</title>{swatch}\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
            html_escape(name),
            x + 24.0,
            y + 4.0,
            html_escape(&cut(name, LEGEND_CHARS))
        );
    }
    out.push_str("</g>\n");
}

/// A line chart; lines without points are left out, and an empty chart says it has no data.
pub fn line_chart(c: &LineChart) -> String {
    let lines: Vec<&Line> = c.lines.iter().filter(|l| !l.points.is_empty()).collect();
    let xs: Vec<f64> = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0)).collect();
    let ys: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1).chain(l.bands.iter().flat_map(|b| [b.1, b.2])))
        .collect();
    let plot_bottom = HEIGHT - BOTTOM;
    let x = Mapper::new(&c.x, &xs, LEFT, WIDTH - LEGEND);
    let y = Mapper::new(&c.y, &ys, plot_bottom, TOP);
    let mut out = String::new();
    open(&mut out, &c.id, &c.title, WIDTH, HEIGHT);
    axes(&mut out, &x, &y, &c.x.label, &c.y.label, plot_bottom);
    if lines.is_empty() {
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#666\">no data</text>",
            (LEFT + WIDTH - LEGEND) / 2.0,
            (TOP + plot_bottom) / 2.0
        );
    }
    for (k, line) in lines.iter().enumerate() {
        let color = PALETTE[k % PALETTE.len()];
        let _ = writeln!(out, "<g class=\"series\" data-series=\"{k}\">");
        let mut d = String::new();
        for (i, &(vx, vy)) in line.points.iter().enumerate() {
            let _ = write!(d, "{}{:.1} {:.1}", if i == 0 { "M" } else { " L" }, x.map(vx), y.map(vy));
        }
        if line.joined {
            let _ = writeln!(
                out,
                "<path d=\"{d}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" data-value=\"{0}\"><title>{0}</title></path>",
                html_escape(&line.name)
            );
        }
        for &(vx, lo, hi) in &line.bands {
            let text = html_escape(&format!("{}: predicted range {lo:.2} to {hi:.2} {}", line.name, c.y_unit));
            let _ = writeln!(
                out,
                "<line class=\"band\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"{color}\" \
                 stroke-width=\"6\" stroke-opacity=\"0.3\" data-value=\"{text}\"><title>{text}</title></line>",
                x.map(vx),
                y.map(lo),
                y.map(hi)
            );
        }
        if line.markers {
            for &(vx, vy) in &line.points {
                let x_text = match c.x_unit.strip_suffix('=') {
                    Some(key) => format!("{key}={}", value_text(vx)),
                    None => format!("{} {}", value_text(vx), c.x_unit),
                };
                let text = format!("{}: {}, {vy:.2} {}", line.name, x_text.trim(), c.y_unit);
                let text = html_escape(text.trim());
                let _ = writeln!(
                    out,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{color}\" data-value=\"{text}\"><title>{text}</title></circle>",
                    x.map(vx),
                    y.map(vy)
                );
            }
        }
        out.push_str("</g>\n");
    }
    let names: Vec<(String, &str)> =
        lines.iter().enumerate().map(|(k, l)| (l.name.clone(), PALETTE[k % PALETTE.len()])).collect();
    legend(&mut out, &names, TOP, "line");
    out.push_str("</svg>\n");
    out
}

/// The opening of every chart's element, which [`grid`] replaces to place a chart in a figure.
const CHART_OPENING: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" ";

/// Charts (each as [`line_chart`] draws it, with an id unique in the figure) laid out in rows,
/// in one standalone SVG figure under `title`: a file a browser opens as it is.
pub fn grid(title: &str, rows: &[Vec<String>]) -> String {
    const HEADER: f64 = 36.0;
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let (width, height) = (WIDTH * cols as f64, HEADER + HEIGHT * rows.len() as f64);
    let mut out = String::new();
    open(&mut out, "figure", title, width, height);
    for (r, row) in rows.iter().enumerate() {
        for (c, chart) in row.iter().enumerate() {
            let at = format!("<svg x=\"{}\" y=\"{}\" ", px(WIDTH * c as f64), px(HEADER + HEIGHT * r as f64));
            out.push_str(&chart.replacen(CHART_OPENING, &at, 1));
        }
    }
    out.push_str("</svg>\n");
    out
}

/// One bar: its name, value, and an optional whisker (a P99 beside a median).
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    pub name: String,
    pub value: f64,
    pub whisker: Option<f64>,
}

/// Horizontal bars, one per run, with the value at the end of each; `value_label` names the
/// value axis with its unit, and the legend says what a bar (`bar_label`) and a whisker
/// (`whisker_label`) show.
pub fn bar_chart(
    id: &str,
    title: &str,
    value_label: &str,
    bars: &[Bar],
    bar_label: &str,
    whisker_label: Option<&str>,
) -> String {
    let row = 22.0;
    let left = 230.0;
    let right = WIDTH - 90.0;
    let top = TOP + 4.0;
    let plot_bottom = top + row * bars.len().max(1) as f64;
    let height = plot_bottom + BOTTOM;
    let values: Vec<f64> = bars.iter().flat_map(|b| std::iter::once(b.value).chain(b.whisker)).collect();
    let x = Mapper::new(&Axis::linear(value_label), &values, left, right);
    let mut out = String::new();
    open(&mut out, id, title, WIDTH, height);
    let y = Mapper { scale: Scale::Linear, lo: 0.0, hi: 1.0, p0: plot_bottom, p1: top, ticks: Vec::new() };
    axes(&mut out, &x, &y, value_label, "", plot_bottom);
    for (k, b) in bars.iter().enumerate() {
        let y0 = top + k as f64 * row + 3.0;
        let w = x.map(b.value) - left;
        let mut text = format!("{}: {:.2}", b.name, b.value);
        if let (Some(wv), Some(wl)) = (b.whisker, whisker_label) {
            let _ = write!(text, ", {wl} {wv:.2}");
        }
        let text = html_escape(&text);
        let _ = writeln!(
            out,
            "<g class=\"bar\" data-value=\"{text}\"><title>{text}</title>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"12\">{}</text>\
             <rect x=\"{left:.1}\" y=\"{y0:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{}\"/>",
            left - 6.0,
            y0 + 12.0,
            html_escape(&cut(&b.name, 34)),
            row - 6.0,
            PALETTE[0]
        );
        let mut end = left + w;
        if let Some(wv) = b.whisker {
            let wx = x.map(wv);
            let mid = y0 + (row - 6.0) / 2.0;
            let _ = write!(
                out,
                "<line x1=\"{end:.1}\" x2=\"{wx:.1}\" y1=\"{mid:.1}\" y2=\"{mid:.1}\" stroke=\"#333\"/>\
                 <line x1=\"{wx:.1}\" x2=\"{wx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>",
                y0 + 2.0,
                y0 + row - 8.0
            );
            end = end.max(wx);
        }
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">{:.2}</text></g>",
            end + 4.0,
            y0 + 12.0,
            b.value
        );
    }
    // The legend, top right: what a bar and a whisker show.
    let x = WIDTH - LEGEND + 16.0;
    let _ = write!(
        out,
        "<g class=\"legend\" font-size=\"12\"><rect x=\"{x:.1}\" y=\"13\" width=\"18\" height=\"10\" fill=\"{}\"/>\
         <text x=\"{:.1}\" y=\"22\">{}</text>",
        PALETTE[0],
        x + 24.0,
        html_escape(bar_label)
    );
    if let Some(wl) = whisker_label {
        let wx = x + 24.0 + 7.0 * bar_label.chars().count() as f64 + 14.0;
        let _ = write!(
            out,
            "<line x1=\"{wx:.1}\" x2=\"{:.1}\" y1=\"18\" y2=\"18\" stroke=\"#333\"/>\
             <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"13\" y2=\"23\" stroke=\"#333\"/><text x=\"{:.1}\" y=\"22\">{}</text>",
            wx + 18.0,
            wx + 18.0,
            wx + 18.0,
            wx + 24.0,
            html_escape(wl)
        );
    }
    out.push_str("</g>\n</svg>\n");
    out
}

/// One request on a timeline, in seconds since the run started.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Span {
    /// The request's dataset index.
    pub index: u32,
    /// When it was due (it waits for a concurrency slot until `start`).
    pub arrival: f64,
    /// When it was sent.
    pub start: f64,
    /// First token; `None` when none came.
    pub first: Option<f64>,
    /// The last token or the end of the stream, whichever came later.
    pub end: f64,
    pub failed: bool,
    /// The decode in runs of one class, each `(until, phase)`: from the first token (or the
    /// end of the run before) to `until`, in the colour of that phase of the timeline. Empty:
    /// one decode segment from the first token to `end`, in phase 2.
    pub decode: Vec<(f64, usize)>,
    /// What hovering over the row says; empty: its wait, first token and end.
    pub tip: String,
}

impl Span {
    /// The row's tooltip: what [`Span::tip`] says, else its wait, first token and end.
    fn tooltip(&self) -> String {
        match self.first {
            _ if !self.tip.is_empty() => self.tip.clone(),
            _ if self.failed => format!("request {}: failed after {:.3} s", self.index, self.end - self.start),
            Some(f) => format!(
                "request {}: queued {:.3} s, first token after {:.3} s, done after {:.3} s",
                self.index,
                self.start - self.arrival,
                f - self.start,
                self.end - self.start
            ),
            None => format!("request {}: no token", self.index),
        }
    }
}

/// The phases of a timeline, with their colours: the wait for a slot, the time to the first
/// token, the decode, a failure. A timeline may split the decode into several phases (by
/// ITL), between the second and the last.
pub const PHASES: [(&str, &str); 4] = [
    ("queue wait", "#bbbbbb"),
    ("prefill (to the first token)", "#ff7f0e"),
    ("decode", "#1f77b4"),
    ("failed", "#d62728"),
];

/// A request per row, by send time: queue wait, prefill and decode as coloured segments, in
/// the colours of `phases` (see [`PHASES`]: the first two, then the decode's, then failure's).
/// Decode runs narrower than a pixel are drawn together, in the colour of the later phase
/// among them (the worse ITL class), so that a long run of token gaps stays a few shapes.
pub fn timeline(id: &str, title: &str, spans: &[Span], phases: &[(&str, &str)]) -> String {
    let failed = phases.len().saturating_sub(1);
    let rows = spans.len().max(1) as f64;
    let row = (300.0 / rows).clamp(1.0, 8.0);
    let top = TOP + 4.0;
    let plot_bottom = top + row * rows;
    let height = plot_bottom + BOTTOM;
    let times: Vec<f64> = spans.iter().flat_map(|s| [s.arrival, s.end]).chain([0.0]).collect();
    let x = Mapper::new(&Axis::linear("Time since the run started (s)"), &times, LEFT, WIDTH - LEGEND);
    let y = Mapper {
        scale: Scale::Linear,
        lo: 0.0,
        hi: rows,
        p0: top,
        p1: plot_bottom,
        ticks: if spans.is_empty() { Vec::new() } else { vec![0.0, rows] },
    };
    let mut out = String::new();
    open(&mut out, id, title, WIDTH, height);
    axes(&mut out, &x, &y, "Time since the run started (s)", "Requests, by send time", plot_bottom);
    let h = (row * 0.8).max(1.0);
    for (k, s) in spans.iter().enumerate() {
        let y0 = top + k as f64 * row;
        let _ = write!(out, "<g class=\"request\" data-value=\"{0}\"><title>{0}</title>", html_escape(&s.tooltip()));
        let rect = |out: &mut String, xa: f64, xb: f64, phase: usize| {
            let _ = write!(
                out,
                "<rect class=\"series\" data-series=\"{phase}\" x=\"{xa:.1}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{}\"/>",
                (xb - xa).max(0.5),
                phases[phase].1
            );
        };
        let seg = |out: &mut String, a: f64, b: f64, phase: usize| {
            if b > a {
                rect(out, x.map(a), x.map(b), phase);
            }
        };
        seg(&mut out, s.arrival, s.start, 0);
        match (s.failed, s.first) {
            (true, _) => seg(&mut out, s.start, s.end.max(s.start + 1e-9), failed),
            (false, Some(f)) => {
                seg(&mut out, s.start, f, 1);
                if s.decode.is_empty() {
                    seg(&mut out, f, s.end, 2);
                } else {
                    // (left, right, phase) of the shape being drawn, in pixels.
                    let mut open: Option<(f64, f64, usize)> = None;
                    let mut from = f;
                    for &(until, phase) in &s.decode {
                        if until <= from {
                            continue;
                        }
                        let (a, b) = (x.map(from), x.map(until));
                        from = until;
                        open = match open {
                            Some((left, _, p)) if p == phase || b - left < 1.0 => Some((left, b, p.max(phase))),
                            Some((left, right, p)) => {
                                rect(&mut out, left, right, p);
                                Some((a, b, phase))
                            }
                            None => Some((a, b, phase)),
                        };
                    }
                    if let Some((left, right, p)) = open {
                        rect(&mut out, left, right, p);
                    }
                }
            }
            (false, None) => {}
        }
        out.push_str("</g>\n");
    }
    let names: Vec<(String, &str)> = phases.iter().map(|(n, c)| (n.to_string(), *c)).collect();
    legend(&mut out, &names, TOP, "rect");
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_line_chart() {
        let chart = LineChart {
            id: "c".into(),
            title: "Output throughput by num_prompts".into(),
            x: Axis::log("num_prompts").with_ticks(vec![1.0, 2.0, 4.0]),
            y: Axis::linear("Output throughput (tok/s)"),
            lines: vec![
                Line {
                    name: "seq_length=80".into(),
                    points: vec![(1.0, 18.75), (2.0, 27.28), (4.0, 53.18)],
                    markers: true,
                    joined: true,
                    bands: vec![],
                },
                Line { name: "a <b>".into(), points: vec![(1.0, 5.0)], markers: true, joined: true, bands: vec![] },
                Line { name: "empty".into(), points: vec![], markers: true, joined: true, bands: vec![] },
            ],
            x_unit: "num_prompts=".into(),
            y_unit: "tok/s".into(),
        };
        insta::assert_snapshot!(line_chart(&chart));
    }

    #[test]
    fn a_grid_places_each_chart_in_its_row_and_column_and_a_scatter_draws_no_path() {
        let chart = |id: &str, joined: bool| {
            line_chart(&LineChart {
                id: id.into(),
                title: id.into(),
                x: Axis::linear("x"),
                y: Axis::linear("y"),
                lines: vec![Line {
                    name: "s".into(),
                    points: vec![(1.0, 2.0), (2.0, 3.0)],
                    markers: true,
                    joined,
                    bands: vec![],
                }],
                x_unit: String::new(),
                y_unit: String::new(),
            })
        };
        let figure = grid("fig <1>", &[vec![chart("a", true), chart("b", false)], vec![chart("c", true)]]);
        let size = format!("viewBox=\"0 0 {} {}\"", 2.0 * WIDTH, 36.0 + 2.0 * HEIGHT);
        assert!(figure.starts_with(&format!("{CHART_OPENING}id=\"figure\" class=\"chart\" {size}")), "{figure}");
        assert!(figure.contains("<title id=\"figure-title\">fig &lt;1&gt;</title>"));
        assert!(figure.contains(&format!("<svg x=\"{}\" y=\"36.0\" id=\"b\"", px(WIDTH))), "{figure}");
        assert!(figure.contains(&format!("<svg x=\"0.0\" y=\"{}\" id=\"c\"", px(36.0 + HEIGHT))), "{figure}");
        assert_eq!(figure.matches(CHART_OPENING).count(), 1, "only the figure declares the namespace");
        assert_eq!(figure.matches("<path ").count(), 2, "the scatter is drawn by its markers alone");
        assert_eq!(figure.matches("<circle ").count(), 6);
    }

    #[test]
    fn bars_and_a_timeline() {
        let bars = [
            Bar { name: "Qwen/Qwen3-8B".into(), value: 1724.28, whisker: Some(2761.99) },
            Bar { name: "Qwen/Qwen3-4B".into(), value: 1024.18, whisker: Some(2069.61) },
        ];
        insta::assert_snapshot!("bars", bar_chart("b", "Median TTFT", "TTFT (ms)", &bars, "median", Some("P99")));
        let spans = [
            Span { index: 0, arrival: 0.0, start: 0.0, first: Some(0.1), end: 0.5, ..Span::default() },
            Span { index: 1, arrival: 0.0, start: 0.2, first: Some(0.35), end: 0.9, ..Span::default() },
            Span { index: 2, arrival: 0.0, start: 0.5, first: None, end: 0.6, failed: true, ..Span::default() },
        ];
        insta::assert_snapshot!("timeline", timeline("t", "Requests", &spans, &PHASES));
    }
}
