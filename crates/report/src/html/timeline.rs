//! The report's timeline of one run: a row per request (queue wait, prefill, decode), and
//! output tokens per second and requests in flight over the run, and beside them the server's
//! own telemetry when it was scraped (running and waiting requests, KV cache and GPU use).

use servebench_core::record::RequestRecord;
use servebench_core::telemetry::Signal;
use servebench_store::{ChunkTimes, RunId, StoredRun};

use super::{MAX_TIMELINE, figure};
use crate::ReportError;
use crate::layout::Layout;
use crate::svg::{self, Axis, Line, LineChart, Span};

/// The timeline of run `pick`, else of the first run with per-request records.
pub(super) fn timeline_section(
    runs: &[StoredRun],
    layout: &Layout,
    pick: Option<RunId>,
) -> Result<String, ReportError> {
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
    let mut spans: Vec<Span> = records.records.iter().filter(|r| !r.never_sent()).map(span).collect();
    by_send_time(&mut spans);
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
        svg::timeline("chart-timeline", &format!("Requests of run {}", run.row.id), &shown, &svg::PHASES),
        &format!(
            "Each row is a request of {name}, {thinned}: grey while it waited for a concurrency slot, orange until its \
             first token, blue until its last; red for a failed request."
        ),
    ));

    let end = spans.iter().map(|s| s.end).fold(0.0, f64::max);
    if end > 0.0 {
        let (tokens, in_flight) = over_time(run, &spans, end);
        out.push_str(&figure(
            time_chart(
                "chart-tokens",
                format!("Output tokens per second, run {}", run.row.id),
                ("Output throughput (tok/s)", "tok/s"),
                vec![line("output tokens/s", tokens)],
            ),
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
            time_chart(
                "chart-inflight",
                format!("Requests in flight, run {}", run.row.id),
                ("Requests in flight", "requests"),
                std::iter::once(line("in flight", in_flight))
                    .chain(server_lines(
                        run,
                        &[(Signal::Running, "server running", 1.0), (Signal::Waiting, "server waiting", 1.0)],
                    ))
                    .collect(),
            ),
            &format!(
                "Requests of {name} sent and not yet finished, at the middle of each time bucket{}.",
                if run.summary.server.is_some() {
                    "; beside them what the server said it was running and holding in its queue, scrape by scrape"
                } else {
                    ""
                }
            ),
        ));
    }
    if let Some(chart) = slices_chart(run, &name) {
        out.push_str(&chart);
    }
    let levels =
        server_lines(run, &[(Signal::KvCacheUsage, "KV cache used", 100.0), (Signal::GpuUtil, "GPU utilisation", 1.0)]);
    if !levels.is_empty() {
        out.push_str(&figure(
            time_chart(
                "chart-server",
                format!("Server KV cache and GPU use, run {}", run.row.id),
                ("Percent", "%"),
                levels,
            ),
            &format!("What the server reported about itself during {name}, scrape by scrape."),
        ));
    }
    Ok(out)
}

/// The run's `--slice-seconds` slices: TTFT and ITL percentiles slice by slice, each at the
/// slice's middle; `None` without slices.
fn slices_chart(run: &StoredRun, name: &str) -> Option<String> {
    let slices = &run.summary.slices;
    let seconds = slices.first().map(|s| s.end_s - s.start_s)?;
    let series = |pick: fn(&servebench_core::metrics::Slice) -> Option<f64>| -> Points {
        slices.iter().filter_map(|s| pick(s).map(|v| ((s.start_s + s.end_s) / 2.0, v))).collect()
    };
    let lines: Vec<Line> = [
        ("TTFT p50", series(|s| s.ttft_p50_ms)),
        ("TTFT p99", series(|s| s.ttft_p99_ms)),
        ("ITL p50", series(|s| s.itl_p50_ms)),
        ("ITL p99", series(|s| s.itl_p99_ms)),
    ]
    .into_iter()
    .filter(|(_, points)| !points.is_empty())
    .map(|(n, points)| Line { name: n.into(), points, markers: true, joined: true, bands: Vec::new() })
    .collect();
    if lines.is_empty() {
        return None;
    }
    Some(figure(
        time_chart("chart-slices", format!("Latency by time slice, run {}", run.row.id), ("Latency (ms)", "ms"), lines),
        &format!(
            "The percentiles of {name} slice by slice ({seconds:.0} s slices of --slice-seconds): a TTFT counts in the \
             slice its first token arrived in, a gap between tokens in the slice its later token arrived in."
        ),
    ))
}

/// A chart of `lines` over the run's time; `y` is the axis label and the values' unit.
fn time_chart(id: &str, title: String, y: (&str, &str), lines: Vec<Line>) -> String {
    svg::line_chart(&LineChart {
        id: id.into(),
        title,
        x: Axis::linear("Time since the run started (s)"),
        y: Axis::linear(y.0),
        lines,
        x_unit: "s".into(),
        y_unit: y.1.into(),
    })
}

fn line(name: &str, points: Points) -> Line {
    Line { name: name.into(), points, markers: false, joined: true, bands: Vec::new() }
}

/// The lines of the run's scraped `signals` (`(signal, name, scale)`), every source's; a
/// source's engine is named when there are several.
fn server_lines(run: &StoredRun, signals: &[(Signal, &str, f64)]) -> Vec<Line> {
    let Some(telemetry) = &run.summary.server else { return Vec::new() };
    let several = telemetry.sources.len() > 1;
    let mut lines = Vec::new();
    for source in &telemetry.sources {
        for &(signal, name, scale) in signals {
            let Some(series) = source.series(signal) else { continue };
            let name = match (several, &source.engine) {
                (true, Some(engine)) => format!("{name} ({engine})"),
                _ => name.to_string(),
            };
            let points = series.points.iter().map(|p| (p[0], p[1] * scale)).collect();
            lines.push(line(&name, points));
        }
    }
    lines
}

/// A request's row on a timeline: its wait, send, first token and end, from its record.
pub(super) fn span(r: &RequestRecord) -> Span {
    let start = r.start_s();
    Span {
        index: r.index,
        arrival: r.arrival_ns as f64 * 1e-9,
        start,
        first: r.chunks_us.first().map(|&c| start + f64::from(c) * 1e-6),
        end: start + f64::from(r.last_heard_us()) * 1e-6,
        failed: !r.succeeded(),
        ..Span::default()
    }
}

/// Rows in the order they were sent (by dataset index among those sent together).
pub(super) fn by_send_time(spans: &mut [Span]) {
    spans.sort_by(|a, b| a.start.total_cmp(&b.start).then(a.index.cmp(&b.index)));
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
mod tests {
    use super::*;
    use crate::html::tests::measured_pair;

    #[test]
    fn ordinals_read_as_english() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111].map(ordinal).to_vec();
        assert_eq!(got, ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]);
    }

    #[test]
    fn tokens_over_time_add_up_to_the_runs_output() {
        let runs = measured_pair();
        let run = &runs[0];
        let records = run.records.as_ref().unwrap();
        let spans: Vec<Span> = records
            .records
            .iter()
            .map(|r| Span {
                index: r.index,
                arrival: 0.0,
                start: r.start_s(),
                first: None,
                end: r.start_s() + f64::from(r.end_us) * 1e-6,
                ..Span::default()
            })
            .collect();
        let end = spans.iter().map(|s| s.end).fold(0.0, f64::max);
        let total = run.summary.total_output_tokens.unwrap() as f64;
        let width = svg::nice_step(end, 60.0);
        for chunk_times in [ChunkTimes::All, ChunkTimes::FirstLast] {
            let mut r = run.clone();
            r.records.as_mut().unwrap().chunk_times = chunk_times;
            let (rate, in_flight) = over_time(&r, &spans, end);
            let sum: f64 = rate.iter().map(|(_, v)| v * width).sum();
            assert!((sum - total).abs() < 1e-6 * total, "{chunk_times:?}: {sum} against {total}");
            // Four slots: never more than four requests in flight.
            assert!(in_flight.iter().all(|(_, n)| *n <= 4.0));
            assert!(in_flight.iter().any(|(_, n)| *n == 4.0));
        }
    }
}
