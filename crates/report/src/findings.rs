//! Findings: sentences about the runs, each derived from the numbers it cites.
//!
//! The rules, on the [`Layout`] of the runs (values are the runs' summaries):
//!
//! - **Highest output throughput** in a group of comparable runs, with the ratio to the
//!   runner-up; and, for three runs or more, the spread from the lowest to the highest. A
//!   group is every run when there is no sweep (with the load they share, as in "at
//!   max_concurrency=4"); in a sweep of several series, the series at the lowest and at the
//!   highest axis value that two series or more reached. A sweep of one series says where its
//!   throughput peaks instead.
//! - **Most output tokens per joule** in the same groups, where two runs or more carry the
//!   GPUs' energy (a GPU exporter `--scrape`d), with the ratio to the runner-up.
//! - **Lowest latency** in the group at the lowest load: by median E2EL when every run has it,
//!   else by median TPOT ("best single-request latency" when that load is one request), and
//!   the **fastest first token** by median TTFT.
//! - **Degradation under load**: median TTFT at the highest axis value over the lowest. With
//!   several series spanning the whole axis, the series whose TTFT grows most "degrades
//!   hardest"; otherwise each series' growth is stated, with its TPOT growth.
//! - **Saturation knee** of each series of three points or more: with `s0` the throughput
//!   gained per added unit of the axis between its first two points, the knee is the first
//!   point from which every further step gains less than 10 % of `s0` per unit
//!   ([`KNEE_FRACTION`]). When the last step still gains more, the sweep found no knee and says
//!   so.
//! - **Superlinear TTFT**: the first step where median TTFT grows by a factor more than 1.1
//!   times the factor of the axis ([`SUPERLINEAR_MARGIN`]), that is, faster than the load.
//!
//!   These three only along a load ([`LOAD_KEYS`]): along `tp` or an input length each value
//!   is another deployment or workload, not more of the same traffic.
//! - **Failures**: every run that failed requests, with the share, count and load.
//! - **Pareto frontier** of output throughput per GPU against interactivity, over every run
//!   whose GPU count is known ([`crate::pareto`]): which runs are on it, as stretches of one
//!   series (or run) each, most interactive first.
//! - **Cheapest at each interactivity**: the same frontier of cost per million output tokens
//!   against interactivity, over every run that knows its GPU count and their price per hour
//!   (which the sentence names, or says each run has its own).
//! - **Two runs** (instead of the ranking above): each median and P99 latency whose 95 %
//!   interval of the difference excludes 0 and that changed by 1 % or more, and each
//!   throughput that changed by 5 % or more (no interval: one number per run).

use servebench_core::config::Metric;
use servebench_store::StoredRun;

use crate::compare::PairStats;
use crate::layout::{LOAD_KEYS, Layout, Sweep, number_text};
use crate::pareto::Trade;
use crate::quantity::{Quantity, Stat, failed_pct};

/// The knee is where the gain per added unit stays below this fraction of the first step's.
pub const KNEE_FRACTION: f64 = 0.10;

/// TTFT grows superlinearly when its factor exceeds the axis's factor times this.
pub const SUPERLINEAR_MARGIN: f64 = 1.10;

/// Which rule a finding comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindingKind {
    HighestThroughput,
    ThroughputSpread,
    MostTokensPerJoule,
    BestLatency,
    FastestFirstToken,
    DegradesUnderLoad,
    SaturationKnee,
    NoKnee,
    SuperlinearTtft,
    Failures,
    ParetoFrontier,
    CostFrontier,
    PairChange,
}

/// One sentence, ending in a full stop.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub kind: FindingKind,
    pub text: String,
}

const OUT: Quantity = Quantity::OutputThroughput;
const TTFT: Quantity = Quantity::Latency(Stat::Median, Metric::Ttft);
const TPOT: Quantity = Quantity::Latency(Stat::Median, Metric::Tpot);
const E2EL: Quantity = Quantity::Latency(Stat::Median, Metric::E2el);

/// Runs that compete at one load.
struct Group {
    /// `at max_concurrency=4`, or empty.
    context: String,
    /// `(name, run index)`.
    members: Vec<(String, usize)>,
    /// The load is a single request (concurrency or prompts 1).
    single_request: bool,
}

/// All findings about `runs`.
pub fn findings(runs: &[StoredRun], layout: &Layout, pair: Option<&PairStats>) -> Vec<Finding> {
    let mut out = Vec::new();
    match &layout.sweep {
        Some(sweep) => {
            let shared: Vec<f64> = sweep
                .values
                .iter()
                .copied()
                .filter(|&v| sweep.series.iter().filter(|s| sweep.point(s, v).is_some()).count() >= 2)
                .collect();
            let group = |v: f64| Group {
                context: format!("at {}", sweep.at(v)),
                members: sweep
                    .series
                    .iter()
                    .filter_map(|s| sweep.point(s, v).map(|i| (series_name(&s.name), i)))
                    .collect(),
                single_request: v == 1.0 && is_request_count(&sweep.axis),
            };
            if let (Some(&lo), Some(&hi)) = (shared.first(), shared.last()) {
                out.extend(highest_throughput(runs, &group(lo)));
                out.extend(most_tokens_per_joule(runs, &group(lo)));
                if hi != lo {
                    out.extend(highest_throughput(runs, &group(hi)));
                    out.extend(most_tokens_per_joule(runs, &group(hi)));
                }
                out.extend(lowest_latency(runs, &group(lo)));
            }
            if let [series] = sweep.series.as_slice() {
                out.extend(peak_along(runs, sweep, series));
            }
            // How latency and throughput bend as the load grows: only along a load (an axis of
            // `tp` or input lengths is a different deployment or workload at each value).
            if LOAD_KEYS.contains(&sweep.axis.as_str()) {
                out.extend(degradation(runs, sweep));
                for s in &sweep.series {
                    out.extend(knee(runs, sweep, s));
                    out.extend(superlinear_ttft(runs, sweep, s));
                }
            }
            out.extend(sweep_failures(runs, layout, sweep));
        }
        None if pair.is_some() => {
            for (i, name) in layout.names.iter().enumerate() {
                out.extend(run_failures(&runs[i], name, &layout.common_load()));
            }
        }
        None => {
            let single = ["max_concurrency", "concurrency", "num_prompts"]
                .iter()
                .any(|k| layout.common.iter().any(|(c, v)| c == k && v == "1"));
            let group = Group {
                context: layout.common_load(),
                members: layout.names.iter().cloned().zip(0..runs.len()).collect(),
                single_request: single,
            };
            out.extend(highest_throughput(runs, &group));
            out.extend(most_tokens_per_joule(runs, &group));
            out.extend(lowest_latency(runs, &group));
            for (name, i) in &group.members {
                out.extend(run_failures(&runs[*i], name, &group.context));
            }
        }
    }
    for (trade, kind) in [(Trade::PerGpu, FindingKind::ParetoFrontier), (Trade::Cost, FindingKind::CostFrontier)] {
        if let Some(text) = trade.finding(runs, layout) {
            out.push(Finding { kind, text });
        }
    }
    if let Some(pair) = pair {
        out.extend(pair_changes(runs, pair));
    }
    out
}

fn series_name(name: &str) -> String {
    if name.is_empty() { "(no other settings)".into() } else { name.to_string() }
}

fn is_request_count(axis: &str) -> bool {
    matches!(axis, "max_concurrency" | "concurrency" | "num_prompts")
}

/// What one unit of the axis is called: `prompt` in "each added prompt".
fn unit_word(axis: &str) -> String {
    match axis {
        "max_concurrency" | "concurrency" => "concurrent request".into(),
        "num_prompts" => "prompt".into(),
        "request_rate" | "rate" => "req/s of request rate".into(),
        other => format!("unit of {other}"),
    }
}

fn with_context(context: &str) -> String {
    if context.is_empty() { String::new() } else { format!(" {context}") }
}

/// `name: ` before a sentence about one series, or nothing for an unnamed one.
fn prefix(name: &str) -> String {
    if name.is_empty() { String::new() } else { format!("{name}: ") }
}

/// Upper-cases the first letter of a sentence that starts without a prefix.
fn sentence(prefix: &str, rest: String) -> String {
    if !prefix.is_empty() {
        return format!("{prefix}{rest}");
    }
    let mut chars = rest.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => rest,
    }
}

fn v2(x: f64) -> String {
    format!("{x:.2}")
}

fn finding(kind: FindingKind, text: String) -> Finding {
    Finding { kind, text }
}

/// Members with a value of `q`, best first (ties keep their order).
fn ranked(runs: &[StoredRun], group: &Group, q: Quantity) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> =
        group.members.iter().filter_map(|(n, i)| q.value(&runs[*i].summary).map(|x| (n.clone(), x))).collect();
    if q.higher_is_better() {
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
    } else {
        v.sort_by(|a, b| a.1.total_cmp(&b.1));
    }
    v
}

fn highest_throughput(runs: &[StoredRun], group: &Group) -> Vec<Finding> {
    let r = ranked(runs, group, OUT);
    let mut out = Vec::new();
    let [(best, bv), (next, nv), ..] = r.as_slice() else { return out };
    let ctx = with_context(&group.context);
    let ratio = if *nv > 0.0 { format!(", {:.2}× the next", bv / nv) } else { String::new() };
    out.push(finding(
        FindingKind::HighestThroughput,
        format!("Highest output throughput{ctx}: {best} ({} tok/s{ratio}, {next} at {} tok/s).", v2(*bv), v2(*nv)),
    ));
    if r.len() >= 3 {
        let (worst, wv) = &r[r.len() - 1];
        if *wv > 0.0 {
            out.push(finding(
                FindingKind::ThroughputSpread,
                format!(
                    "Output throughput{ctx} spans {:.2}×: from {worst} ({} tok/s) to {best} ({} tok/s).",
                    bv / wv,
                    v2(*wv),
                    v2(*bv)
                ),
            ));
        }
    }
    out
}

/// The run of the group that served the most output tokens per joule its GPUs drew, where two
/// or more were measured with a GPU exporter's energy.
fn most_tokens_per_joule(runs: &[StoredRun], group: &Group) -> Option<Finding> {
    let r = ranked(runs, group, Quantity::OutputTokensPerJoule);
    let [(best, bv), (next, nv), ..] = r.as_slice() else { return None };
    let ctx = with_context(&group.context);
    let ratio = if *nv > 0.0 { format!(", {:.2}× the next", bv / nv) } else { String::new() };
    Some(finding(
        FindingKind::MostTokensPerJoule,
        format!("Most output tokens per joule{ctx}: {best} ({} tok/J{ratio}, {next} at {} tok/J).", v2(*bv), v2(*nv)),
    ))
}

fn lowest_latency(runs: &[StoredRun], group: &Group) -> Vec<Finding> {
    let mut out = Vec::new();
    let ctx = with_context(&group.context);
    // Among the runs that completed a request: the others have no latency.
    let all_have = |q: Quantity| {
        group
            .members
            .iter()
            .filter(|(_, i)| runs[*i].summary.completed > 0)
            .all(|(_, i)| q.value(&runs[*i].summary).is_some())
    };
    let by = if all_have(E2EL) {
        Some(E2EL)
    } else if all_have(TPOT) {
        Some(TPOT)
    } else {
        None
    };
    if let Some(q) = by
        && let [(best, bv), (next, nv), ..] = ranked(runs, group, q).as_slice()
    {
        let what = if group.single_request { "Best single-request latency" } else { "Lowest latency" };
        out.push(finding(
            FindingKind::BestLatency,
            format!("{what}{ctx}: {best} ({} {} ms; next {next} at {} ms).", q.name(), v2(*bv), v2(*nv)),
        ));
    }
    if let [(best, bv), (next, nv), ..] = ranked(runs, group, TTFT).as_slice() {
        out.push(finding(
            FindingKind::FastestFirstToken,
            format!("Fastest first token{ctx}: {best} (median TTFT {} ms; next {next} at {} ms).", v2(*bv), v2(*nv)),
        ));
    }
    out
}

/// The `(axis value, value)` points of a series that have `q`.
fn points(runs: &[StoredRun], series: &crate::layout::Series, q: Quantity) -> Vec<(f64, f64)> {
    series.points.iter().filter_map(|&(x, i)| q.value(&runs[i].summary).map(|v| (x, v))).collect()
}

fn peak_along(runs: &[StoredRun], sweep: &Sweep, series: &crate::layout::Series) -> Option<Finding> {
    let pts = points(runs, series, OUT);
    let &(x0, t0) = pts.first()?;
    let &(xp, tp) = pts.iter().rev().max_by(|a, b| a.1.total_cmp(&b.1))?;
    if pts.len() < 2 || xp == x0 {
        return None;
    }
    let ratio =
        if t0 > 0.0 { format!(", {:.2}× the {} tok/s at {}", tp / t0, v2(t0), sweep.at(x0)) } else { String::new() };
    let p = prefix(&series.name);
    Some(finding(
        FindingKind::HighestThroughput,
        sentence(&p, format!("output throughput peaks at {}: {} tok/s{ratio}.", sweep.at(xp), v2(tp))),
    ))
}

fn degradation(runs: &[StoredRun], sweep: &Sweep) -> Vec<Finding> {
    let (Some(&lo), Some(&hi)) = (sweep.values.first(), sweep.values.last()) else { return Vec::new() };
    let at = |s: &crate::layout::Series, v: f64, q: Quantity| sweep.point(s, v).and_then(|i| q.value(&runs[i].summary));
    let mut spanning: Vec<(String, f64, f64)> = sweep
        .series
        .iter()
        .filter_map(|s| match (at(s, lo, TTFT), at(s, hi, TTFT)) {
            (Some(a), Some(b)) if a > 0.0 => Some((series_name(&s.name), a, b)),
            _ => None,
        })
        .collect();
    if spanning.len() >= 2 {
        spanning.sort_by(|x, y| (y.2 / y.1).total_cmp(&(x.2 / x.1)));
        let (name, a, b) = &spanning[0];
        let (next, na, nb) = &spanning[1];
        return vec![finding(
            FindingKind::DegradesUnderLoad,
            format!(
                "Degrades hardest under load: {name}, median TTFT ×{:.2} from {} ({} ms) to {} ({} ms); next {next}, ×{:.2}.",
                b / a,
                sweep.at(lo),
                v2(*a),
                number_text(hi),
                v2(*b),
                nb / na
            ),
        )];
    }
    let mut out = Vec::new();
    for s in &sweep.series {
        let pts = points(runs, s, TTFT);
        let (Some(&(x0, a)), Some(&(x1, b))) = (pts.first(), pts.last()) else { continue };
        if pts.len() < 2 || a <= 0.0 {
            continue;
        }
        let mut text = format!(
            "median TTFT grows ×{:.2} from {} ({} ms) to {} ({} ms)",
            b / a,
            sweep.at(x0),
            v2(a),
            number_text(x1),
            v2(b)
        );
        if let (Some(ta), Some(tb)) = (at(s, x0, TPOT), at(s, x1, TPOT))
            && ta > 0.0
        {
            text.push_str(&format!(", median TPOT ×{:.2} ({} → {} ms)", tb / ta, v2(ta), v2(tb)));
        }
        text.push('.');
        out.push(finding(FindingKind::DegradesUnderLoad, sentence(&prefix(&s.name), text)));
    }
    out
}

fn knee(runs: &[StoredRun], sweep: &Sweep, series: &crate::layout::Series) -> Option<Finding> {
    let pts = points(runs, series, OUT);
    if pts.len() < 3 {
        return None;
    }
    let slope = |j: usize| (pts[j + 1].1 - pts[j].1) / (pts[j + 1].0 - pts[j].0);
    let slopes: Vec<f64> = (0..pts.len() - 1).map(slope).collect();
    let s0 = slopes[0];
    if s0 <= 0.0 {
        return None;
    }
    let limit = KNEE_FRACTION * s0;
    let unit = unit_word(&sweep.axis);
    let p = prefix(&series.name);
    let first_step =
        format!("the {} tok/s per {unit} from {} to {}", v2(s0), sweep.at(pts[0].0), number_text(pts[1].0));
    let knee = (1..slopes.len()).find(|&i| slopes[i..].iter().all(|&s| s < limit));
    let Some(i) = knee else {
        let j = slopes.len() - 1;
        return Some(finding(
            FindingKind::NoKnee,
            sentence(
                &p,
                format!(
                    "no saturation knee up to {}: output throughput still gains {} tok/s per added {unit} from {} to {} \
                     ({} → {} tok/s), at least 10 % of {first_step}.",
                    sweep.at(pts[j + 1].0),
                    v2(slopes[j]),
                    number_text(pts[j].0),
                    number_text(pts[j + 1].0),
                    v2(pts[j].1),
                    v2(pts[j + 1].1)
                ),
            ),
        ));
    };
    let beyond = slopes[i..].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let &(xmax, tmax) = pts.iter().rev().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let gain = if beyond > 0.0 {
        format!("each added {unit} gains at most {} tok/s", v2(beyond))
    } else {
        format!("output throughput no longer rises ({} tok/s per added {unit} at best)", v2(beyond))
    };
    Some(finding(
        FindingKind::SaturationKnee,
        sentence(
            &p,
            format!(
                "saturation knee at {} ({} tok/s): beyond it {gain}, under 10 % of {first_step}; the highest is {} tok/s \
                 at {}.",
                sweep.at(pts[i].0),
                v2(pts[i].1),
                v2(tmax),
                number_text(xmax)
            ),
        ),
    ))
}

fn superlinear_ttft(runs: &[StoredRun], sweep: &Sweep, series: &crate::layout::Series) -> Option<Finding> {
    let pts = points(runs, series, TTFT);
    let j = (0..pts.len().saturating_sub(1)).find(|&j| {
        let ((x0, a), (x1, b)) = (pts[j], pts[j + 1]);
        x0 > 0.0 && a > 0.0 && b / a > SUPERLINEAR_MARGIN * (x1 / x0)
    })?;
    let ((x0, a), (x1, b)) = (pts[j], pts[j + 1]);
    Some(finding(
        FindingKind::SuperlinearTtft,
        sentence(
            &prefix(&series.name),
            format!(
                "median TTFT grows faster than the load from {} to {}: ×{:.2} ({} → {} ms) while {} grows ×{:.2}.",
                sweep.at(x0),
                number_text(x1),
                b / a,
                v2(a),
                v2(b),
                sweep.axis,
                x1 / x0
            ),
        ),
    ))
}

/// `(failed, sent, percent)` of a run that failed requests.
fn failure_share(run: &StoredRun) -> Option<(u64, u64, f64)> {
    let (completed, failed) = (run.summary.completed, run.summary.failed.filter(|&f| f > 0)?);
    Some((failed, completed.saturating_add(failed), failed_pct(completed, failed)?))
}

fn run_failures(run: &StoredRun, name: &str, context: &str) -> Option<Finding> {
    let (f, t, pct) = failure_share(run)?;
    Some(finding(
        FindingKind::Failures,
        format!("{name} fails {pct:.1} % of requests{} ({f} of {t}).", with_context(context)),
    ))
}

fn sweep_failures(runs: &[StoredRun], layout: &Layout, sweep: &Sweep) -> Vec<Finding> {
    let mut out = Vec::new();
    for s in &sweep.series {
        let parts: Vec<String> = s
            .points
            .iter()
            .filter_map(|&(x, i)| {
                failure_share(&runs[i])
                    .map(|(f, t, pct)| format!("{pct:.1} % of requests at {} ({f} of {t})", sweep.at(x)))
            })
            .collect();
        if parts.is_empty() {
            continue;
        }
        let list = match parts.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => parts.join(""),
        };
        let who = if s.name.is_empty() { "The sweep".to_string() } else { s.name.clone() };
        out.push(finding(FindingKind::Failures, format!("{who} fails {list}.")));
    }
    for (i, _) in &sweep.outside {
        out.extend(run_failures(&runs[*i], &layout.names[*i], ""));
    }
    out
}

fn pair_changes(runs: &[StoredRun], pair: &PairStats) -> Vec<Finding> {
    let (ia, ib) = (runs[pair.a].row.id, runs[pair.b].row.id);
    let mut out = Vec::new();
    for row in &pair.rows {
        let q = row.quantity;
        let (Some(a), Some(b), Some(rel)) = (row.a, row.b, row.rel()) else { continue };
        let word = if b > a { "higher" } else { "lower" };
        match (q, row.estimate) {
            (Quantity::Latency(Stat::Median | Stat::Percentile(_), _), Some(e))
                if e.ci.excludes_zero() && rel.abs() >= 0.01 =>
            {
                out.push(finding(
                    FindingKind::PairChange,
                    format!(
                        "Run {ib} has a {word} {} than run {ia}: {} against {} ms ({:+.1} %; 95 % CI of the difference \
                         {:+.2} to {:+.2} ms).",
                        q.name(),
                        v2(b),
                        v2(a),
                        rel * 100.0,
                        e.ci.low,
                        e.ci.high
                    ),
                ));
            }
            (Quantity::OutputThroughput | Quantity::RequestThroughput | Quantity::InputThroughput, _)
                if rel.abs() >= 0.05 =>
            {
                out.push(finding(
                    FindingKind::PairChange,
                    format!(
                        "Run {ib} has {word} {} than run {ia}: {} against {} {} ({:+.1} %; one number per run, so no \
                         interval).",
                        q.name(),
                        v2(b),
                        v2(a),
                        q.unit(),
                        rel * 100.0
                    ),
                ));
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
