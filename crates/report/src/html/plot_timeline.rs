//! The page `--plot-timeline` writes beside a run's result, as `vllm bench serve` does: a row
//! per request with its wait for a concurrency slot, its time to the first token, then each
//! gap between token chunks coloured by the two ITL thresholds (`--timeline-itl-thresholds`).

use std::fmt::Write as _;

use servebench_core::record::RequestRecord;

use super::timeline::{by_send_time, span};
use super::{figure, page};
use crate::svg::{self, Span};
use crate::table::html_escape;

/// At most this many requests are drawn; more are thinned evenly, and the caption says so.
pub const MAX_PLOT_TIMELINE: usize = 2_000;

/// vLLM's colours for the time to the first token and the three ITL classes.
const TTFT_COLOUR: &str = "#636efa";
const ITL_COLOURS: [&str; 3] = ["#109618", "#ff7f0e", "#d62728"];

/// What the page shows.
#[derive(Clone, Debug)]
pub struct TimelinePage<'a> {
    /// The heading: what ran, on what.
    pub title: &'a str,
    /// A line under it (when the run started, its load).
    pub meta: &'a str,
    /// The run's requests, in any order.
    pub records: &'a [RequestRecord],
    /// ITL thresholds in ms, the first below the second: gaps below the first are one class,
    /// those up to the second another, the rest a third.
    pub thresholds_ms: [f64; 2],
}

/// The whole page.
pub fn timeline_page(p: &TimelinePage) -> String {
    let [low, high] = p.thresholds_ms;
    let labels =
        [format!("ITL < {low} ms"), format!("{low} ms \u{2264} ITL < {high} ms"), format!("ITL \u{2265} {high} ms")];
    let phases: Vec<(&str, &str)> = [("queue wait", "#bbbbbb"), ("time to first token", TTFT_COLOUR)]
        .into_iter()
        .chain(labels.iter().map(String::as_str).zip(ITL_COLOURS))
        .chain([("failed", "#222222")])
        .collect();
    let mut spans: Vec<Span> =
        p.records.iter().filter(|r| !r.never_sent()).map(|r| itl_span(r, p.thresholds_ms)).collect();
    by_send_time(&mut spans);
    let total = spans.len();
    let step = total.div_ceil(MAX_PLOT_TIMELINE).max(1);
    let shown: Vec<Span> = spans.into_iter().step_by(step).collect();
    let which = if step > 1 {
        format!("{} of its {total} requests (one in {step}, by send time)", shown.len())
    } else {
        format!("all {total} requests")
    };
    let mut body = String::new();
    let _ = writeln!(body, "<header>\n<h1>{}</h1>", html_escape(p.title));
    let _ = writeln!(body, "<p class=\"meta\">{}</p>\n</header>", html_escape(p.meta));
    body.push_str(&figure(
        svg::timeline("chart-timeline", "Requests over time", &shown, &phases),
        &format!(
            "Each row is a request, {which}: grey while it waited for a concurrency slot, violet until its first \
             token, then each gap between token chunks by its length (green below {low} ms, orange below {high} ms, \
             red at or above); black for a failed request. Gaps narrower than a pixel are drawn together in the \
             colour of the longest among them."
        ),
    ));
    page(p.title, &body)
}

/// A request's row, its decode split where its token gaps change class.
fn itl_span(r: &RequestRecord, [low, high]: [f64; 2]) -> Span {
    let mut s = span(r);
    let class = |gap_us: u32| {
        let ms = f64::from(gap_us) * 1e-3;
        2 + usize::from(ms >= low) + usize::from(ms >= high)
    };
    // A failed request, or one without a token, keeps its tooltip and has no decode.
    if let (false, Some(first)) = (s.failed, s.first) {
        for (at, gap) in r.chunks_us.iter().skip(1).zip(r.gaps_us()) {
            let (until, phase) = (s.start + f64::from(*at) * 1e-6, class(gap));
            match s.decode.last_mut() {
                Some(last) if last.1 == phase => last.0 = until,
                _ => s.decode.push((until, phase)),
            }
        }
        let slow = r.gaps_us().filter(|&g| class(g) == 4).count();
        s.tip = format!(
            "request {}: {} prompt tokens, {} output tokens; queued {:.3} s, first token after {:.3} s, done after \
             {:.3} s; {slow} of {} token gaps at or above {high} ms",
            s.index,
            r.prompt_tokens(),
            r.output_tokens(),
            s.start - s.arrival,
            first - s.start,
            s.end - s.start,
            r.chunks_us.len().saturating_sub(1),
        );
    }
    s
}

#[cfg(test)]
mod tests;
