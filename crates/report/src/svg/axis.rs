//! Chart axes: linear and logarithmic scales, round tick values and their short labels, the
//! mapping of data to pixels, and drawing an axis pair with its grid lines and labels.

use std::fmt::Write as _;

use super::px;
use crate::table::html_escape;

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
    /// A linear axis from zero.
    pub fn linear(label: impl Into<String>) -> Axis {
        Axis { label: label.into(), scale: Scale::Linear, ticks: None, from_zero: true }
    }

    /// A base-10 logarithmic axis.
    pub fn log(label: impl Into<String>) -> Axis {
        Axis { label: label.into(), scale: Scale::Log, ticks: None, from_zero: false }
    }

    /// A log axis when the positive values span more than `ratio`, else a linear one.
    pub fn auto(label: impl Into<String>, values: impl IntoIterator<Item = f64>, ratio: f64) -> Axis {
        let (lo, hi) = min_max(values.into_iter().filter(|v| *v > 0.0));
        if lo > 0.0 && hi / lo > ratio { Axis::log(label) } else { Axis::linear(label) }
    }

    /// The axis with these tick values instead of computed ones.
    pub fn with_ticks(mut self, ticks: Vec<f64>) -> Axis {
        self.ticks = Some(ticks);
        self
    }
}

/// The smallest and largest finite value; `(inf, -inf)` when there is none.
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
pub(super) struct Mapper {
    pub(super) scale: Scale,
    pub(super) lo: f64,
    pub(super) hi: f64,
    /// The pixels of `lo` and of `hi`.
    pub(super) p0: f64,
    pub(super) p1: f64,
    pub(super) ticks: Vec<f64>,
}

impl Mapper {
    /// The mapping of `values` on `axis` to pixels `p0..p1`, with its ticks.
    pub(super) fn new(axis: &Axis, values: &[f64], p0: f64, p1: f64) -> Mapper {
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

    /// The pixel of `v` (clamped to the range).
    pub(super) fn map(&self, v: f64) -> f64 {
        let f = match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log => (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10()),
        };
        self.p0 + f.clamp(0.0, 1.0) * (self.p1 - self.p0)
    }
}

/// The axes: lines, ticks with values and grid lines, and labels.
pub(super) fn axes(out: &mut String, x: &Mapper, y: &Mapper, x_label: &str, y_label: &str, plot_bottom: f64) {
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
}
