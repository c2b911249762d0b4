//! Hand-written SVG charts: lines (with linear or logarithmic axes), horizontal bars and a
//! request timeline. Every chart has a title, labelled axes with units, tick values and a
//! legend; every point carries its value in a `<title>` (a tooltip without script) and in a
//! `data-value` attribute (for the page's script). Output is deterministic text.

use std::fmt::Write as _;

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

/// How an axis maps values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base 10; every value must be positive.
    Log,
}

/// One axis of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The label with its unit: `Output throughput (tok/s)`.
    pub label: String,
    pub scale: Scale,
    /// Ticks to use instead of computed ones (the values of a sweep axis).
    pub ticks: Option<Vec<f64>>,
    /// Start a linear axis at zero.
    pub from_zero: bool,
}

impl Axis {
    pub fn linear(label: impl Into<String>) -> Axis {
        Axis { label: label.into(), scale: Scale::Linear, ticks: None, from_zero: true }
    }

    pub fn log(label: impl Into<String>) -> Axis {
        Axis { label: label.into(), scale: Scale::Log, ticks: None, from_zero: false }
    }

    /// A log axis when the positive values span more than `ratio`, else a linear one.
    pub fn auto(label: impl Into<String>, values: impl IntoIterator<Item = f64>, ratio: f64) -> Axis {
        let (lo, hi) = min_max(values.into_iter().filter(|v| *v > 0.0));
        if lo > 0.0 && hi / lo > ratio { Axis::log(label) } else { Axis::linear(label) }
    }

    pub fn with_ticks(mut self, ticks: Vec<f64>) -> Axis {
        self.ticks = Some(ticks);
        self
    }
}

/// One line of a line chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Draw a marker at each point (with its value on hover).
    pub markers: bool,
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

fn min_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)))
}

/// A value as a tick label: at most three significant digits, `k` and `M` for thousands and
/// millions.
pub fn tick_text(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let digits = if x == 0.0 { 0 } else { (3 - 1 - x.abs().log10().floor() as i32).clamp(0, 6) as usize };
    let mut s = format!("{x:.digits$}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    if s == "-0" {
        s = "0".into();
    }
    format!("{s}{suffix}")
}

/// An x value in a tooltip: two decimals, or none for whole numbers (axis settings).
pub fn value_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 { format!("{v:.0}") } else { format!("{v:.2}") }
}

/// A round step near `span / count`: 1, 2, 2.5 or 5 times a power of ten.
pub(crate) fn nice_step(span: f64, count: f64) -> f64 {
    let raw = span / count;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 2.5 {
        2.5
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// Maps data to one pixel range.
#[derive(Clone, Debug)]
struct Mapper {
    scale: Scale,
    lo: f64,
    hi: f64,
    p0: f64,
    p1: f64,
    ticks: Vec<f64>,
}

impl Mapper {
    fn new(axis: &Axis, values: &[f64], p0: f64, p1: f64) -> Mapper {
        let positive: Vec<f64> = values.iter().copied().filter(|v| *v > 0.0 && v.is_finite()).collect();
        let scale = if axis.scale == Scale::Log && !positive.is_empty() { Scale::Log } else { Scale::Linear };
        let (mut lo, mut hi) = match scale {
            Scale::Log => min_max(positive.iter().copied()),
            Scale::Linear => min_max(values.iter().copied()),
        };
        if !lo.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        let ticks = match (&axis.ticks, scale) {
            (Some(t), _) if !t.is_empty() => {
                let (tl, th) = min_max(t.iter().copied());
                lo = lo.min(tl);
                hi = hi.max(th);
                t.clone()
            }
            (_, Scale::Log) => {
                let (d0, d1) = (lo.log10().floor(), hi.log10().ceil().max(lo.log10().floor() + 1.0));
                lo = 10f64.powf(d0);
                hi = 10f64.powf(d1);
                let decades = (d1 - d0) as i32;
                let mults: &[f64] = if decades <= 2 { &[1.0, 2.0, 5.0] } else { &[1.0] };
                let mut t = Vec::new();
                for d in d0 as i32..=d1 as i32 {
                    for m in mults {
                        let v = m * 10f64.powi(d);
                        if v >= lo * 0.999 && v <= hi * 1.001 {
                            t.push(v);
                        }
                    }
                }
                t
            }
            (_, Scale::Linear) => {
                if axis.from_zero && lo > 0.0 {
                    lo = 0.0;
                }
                if hi <= lo {
                    hi = lo + if lo == 0.0 { 1.0 } else { lo.abs() };
                }
                let step = nice_step(hi - lo, 5.0);
                lo = (lo / step).floor() * step;
                hi = (hi / step).ceil() * step;
                let n = ((hi - lo) / step).round() as i64;
                (0..=n).map(|i| lo + i as f64 * step).collect()
            }
        };
        if scale == Scale::Log {
            lo = lo.max(f64::MIN_POSITIVE);
        }
        if hi <= lo {
            hi = lo + 1.0;
        }
        Mapper { scale, lo, hi, p0, p1, ticks }
    }

    fn map(&self, v: f64) -> f64 {
        let f = match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log => (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10()),
        };
        self.p0 + f.clamp(0.0, 1.0) * (self.p1 - self.p0)
    }
}

fn px(v: f64) -> String {
    format!("{v:.1}")
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n - 1).collect();
    out.push('…');
    out
}

/// Opens an `<svg>` with its accessible title.
fn open(out: &mut String, id: &str, title: &str, height: f64) {
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{id}\" class=\"chart\" viewBox=\"0 0 {WIDTH} {height}\" \
         width=\"{WIDTH}\" height=\"{height}\" role=\"img\" aria-labelledby=\"{id}-title\">"
    );
    let _ = writeln!(out, "<title id=\"{id}-title\">{}</title>", html_escape(title));
    let _ = writeln!(out, "<rect class=\"bg\" x=\"0\" y=\"0\" width=\"{WIDTH}\" height=\"{height}\" fill=\"#fff\"/>");
    let _ = writeln!(
        out,
        "<text class=\"chart-title\" x=\"{}\" y=\"22\" font-size=\"15\" font-weight=\"600\">{}</text>",
        px(LEFT),
        html_escape(title)
    );
}

/// The axes: lines, ticks with values and grid lines, and labels.
fn axes(out: &mut String, x: &Mapper, y: &Mapper, x_label: &str, y_label: &str, plot_bottom: f64) {
    let (l, r, t, b) = (x.p0, x.p1, y.p0.min(y.p1), plot_bottom);
    out.push_str("<g class=\"axes\" font-size=\"12\" fill=\"#333\">\n");
    for &v in &y.ticks {
        let py = y.map(v);
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{}\" x2=\"{}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#e5e5e5\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            px(l),
            px(r),
            px(l - 6.0),
            py + 4.0,
            tick_text(v)
        );
    }
    let mut last_end = f64::NEG_INFINITY;
    for &v in &x.ticks {
        let pxv = x.map(v);
        let label = tick_text(v);
        // Leave out a label that would overlap the previous one (its tick stays).
        let half = label.chars().count() as f64 * 3.6;
        let show = pxv - half > last_end + 4.0;
        let _ = write!(
            out,
            "<line x1=\"{pxv:.1}\" x2=\"{pxv:.1}\" y1=\"{}\" y2=\"{}\" stroke=\"#333\"/>",
            px(b),
            px(b + 5.0)
        );
        if show {
            last_end = pxv + half;
            let _ = write!(out, "<text x=\"{pxv:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>", px(b + 18.0));
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "<line x1=\"{l:.1}\" x2=\"{l:.1}\" y1=\"{t:.1}\" y2=\"{b:.1}\" stroke=\"#333\"/>\
         <line x1=\"{l:.1}\" x2=\"{r:.1}\" y1=\"{b:.1}\" y2=\"{b:.1}\" stroke=\"#333\"/>"
    );
    let _ = writeln!(
        out,
        "<text class=\"axis-label\" x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
        (l + r) / 2.0,
        px(b + 38.0),
        html_escape(x_label)
    );
    if !y_label.is_empty() {
        let _ = writeln!(
            out,
            "<text class=\"axis-label\" transform=\"translate(16 {:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            (t + b) / 2.0,
            html_escape(y_label)
        );
    }
    out.push_str("</g>\n");
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
    let ys: Vec<f64> = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).collect();
    let plot_bottom = HEIGHT - BOTTOM;
    let x = Mapper::new(&c.x, &xs, LEFT, WIDTH - LEGEND);
    let y = Mapper::new(&c.y, &ys, plot_bottom, TOP);
    let mut out = String::new();
    open(&mut out, &c.id, &c.title, HEIGHT);
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
        let _ = writeln!(
            out,
            "<path d=\"{d}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" data-value=\"{0}\"><title>{0}</title></path>",
            html_escape(&line.name)
        );
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
    open(&mut out, id, title, height);
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
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub index: u32,
    pub arrival: f64,
    pub start: f64,
    /// First token; `None` when none came.
    pub first: Option<f64>,
    pub end: f64,
    pub failed: bool,
}

/// The phases of a timeline, with their colours.
pub const PHASES: [(&str, &str); 4] = [
    ("queue wait", "#bbbbbb"),
    ("prefill (to the first token)", "#ff7f0e"),
    ("decode", "#1f77b4"),
    ("failed", "#d62728"),
];

/// A request per row, by send time: queue wait, prefill and decode as coloured segments.
pub fn timeline(id: &str, title: &str, spans: &[Span]) -> String {
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
    open(&mut out, id, title, height);
    axes(&mut out, &x, &y, "Time since the run started (s)", "Requests, by send time", plot_bottom);
    let h = (row * 0.8).max(1.0);
    for (k, s) in spans.iter().enumerate() {
        let y0 = top + k as f64 * row;
        let tip = match s.first {
            _ if s.failed => format!("request {}: failed after {:.3} s", s.index, s.end - s.start),
            Some(f) => format!(
                "request {}: queued {:.3} s, first token after {:.3} s, done after {:.3} s",
                s.index,
                s.start - s.arrival,
                f - s.start,
                s.end - s.start
            ),
            None => format!("request {}: no token", s.index),
        };
        let _ = write!(out, "<g class=\"request\" data-value=\"{0}\"><title>{0}</title>", html_escape(&tip));
        let seg = |out: &mut String, a: f64, b: f64, phase: usize| {
            if b > a {
                let _ = write!(
                    out,
                    "<rect class=\"series\" data-series=\"{phase}\" x=\"{:.1}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"{}\"/>",
                    x.map(a),
                    (x.map(b) - x.map(a)).max(0.5),
                    PHASES[phase].1
                );
            }
        };
        seg(&mut out, s.arrival, s.start, 0);
        match (s.failed, s.first) {
            (true, _) => seg(&mut out, s.start, s.end.max(s.start + 1e-9), 3),
            (false, Some(f)) => {
                seg(&mut out, s.start, f, 1);
                seg(&mut out, f, s.end, 2);
            }
            (false, None) => {}
        }
        out.push_str("</g>\n");
    }
    let names: Vec<(String, &str)> = PHASES.iter().map(|(n, c)| (n.to_string(), *c)).collect();
    legend(&mut out, &names, TOP, "rect");
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_are_short() {
        let cases = [
            (0.0, "0"),
            (0.25, "0.25"),
            (1.0, "1"),
            (2.5, "2.5"),
            (100.0, "100"),
            (1500.0, "1500"),
            (20000.0, "20k"),
            (125000.0, "125k"),
            (2_500_000.0, "2.5M"),
            (-50.0, "-50"),
        ];
        for (v, want) in cases {
            assert_eq!(tick_text(v), want, "{v}");
        }
    }

    #[test]
    fn axes_get_round_ticks() {
        let m = Mapper::new(&Axis::linear("y"), &[3.0, 438.42], 0.0, 100.0);
        assert_eq!(m.ticks, [0.0, 100.0, 200.0, 300.0, 400.0, 500.0]);
        assert_eq!((m.map(0.0), m.map(500.0), m.map(250.0)), (0.0, 100.0, 50.0));
        let m = Mapper::new(&Axis::log("y"), &[314.58, 129063.54], 0.0, 100.0);
        assert_eq!(m.ticks, [100.0, 1e3, 1e4, 1e5, 1e6]);
        assert_eq!(m.map(1e4), 50.0);
        let m = Mapper::new(&Axis::log("y"), &[3.0, 40.0], 0.0, 100.0);
        assert_eq!(m.ticks, [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]);
        let m = Mapper::new(&Axis::log("x").with_ticks(vec![1.0, 2.0, 4.0]), &[1.0, 4.0], 0.0, 100.0);
        assert_eq!(m.ticks, [1.0, 2.0, 4.0]);
        assert_eq!(m.map(2.0), 50.0);
        // One value, or none: still a usable axis.
        assert_eq!(Mapper::new(&Axis::linear("y"), &[5.0], 0.0, 1.0).ticks.last(), Some(&5.0));
        assert_eq!(Mapper::new(&Axis::linear("y"), &[], 0.0, 1.0).ticks.first(), Some(&0.0));
        assert_eq!(Axis::auto("t", [10.0, 20.0], 50.0).scale, Scale::Linear);
        assert_eq!(Axis::auto("t", [10.0, 2000.0], 50.0).scale, Scale::Log);
    }

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
                },
                Line { name: "a <b>".into(), points: vec![(1.0, 5.0)], markers: true },
                Line { name: "empty".into(), points: vec![], markers: true },
            ],
            x_unit: "num_prompts=".into(),
            y_unit: "tok/s".into(),
        };
        insta::assert_snapshot!(line_chart(&chart));
    }

    #[test]
    fn bars_and_a_timeline() {
        let bars = [
            Bar { name: "Qwen/Qwen3-8B".into(), value: 1724.28, whisker: Some(2761.99) },
            Bar { name: "Qwen/Qwen3-4B".into(), value: 1024.18, whisker: Some(2069.61) },
        ];
        insta::assert_snapshot!("bars", bar_chart("b", "Median TTFT", "TTFT (ms)", &bars, "median", Some("P99")));
        let spans = [
            Span { index: 0, arrival: 0.0, start: 0.0, first: Some(0.1), end: 0.5, failed: false },
            Span { index: 1, arrival: 0.0, start: 0.2, first: Some(0.35), end: 0.9, failed: false },
            Span { index: 2, arrival: 0.0, start: 0.5, first: None, end: 0.6, failed: true },
        ];
        insta::assert_snapshot!("timeline", timeline("t", "Requests", &spans));
    }
}
