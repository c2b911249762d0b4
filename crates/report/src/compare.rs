//! The comparison of runs: side-by-side tables, sweep pivots and the statistics of two runs.
//!
//! What [`Comparison::render`] prints depends on the runs:
//! - **two runs**: one table with both runs' values, the difference `B - A`, its 95 %
//!   confidence interval (from the per-request records, see [`crate::bootstrap`]) and the
//!   relative change; the first run is the baseline A;
//! - **a sweep** (see [`crate::layout`]): pivots with the axis values as columns, one table per
//!   quantity when there are several series, else one table with a row per quantity; runs
//!   outside the sweep follow side by side;
//! - **otherwise**: the runs side by side, a column per run for up to four runs, else a row
//!   per run.
//!
//! Settings that differ between runs head the columns or rows. CSV is always one line per
//! run with every setting that varies and every quantity, at full precision.

use std::fmt::Write as _;

use servebench_core::config::Metric;
use servebench_core::metrics::per_user;
use servebench_core::threshold::{Threshold, Verdicts, failed_pct, probe_stat};
use servebench_store::{ChunkTimes, RunId, StoredRun};

use crate::ReportError;
use crate::bootstrap::{self, Estimate, RESAMPLES};
use crate::findings::{self, Finding};
use crate::gate;
use crate::layout::{Layout, number_text};
use crate::quantity::{LATENCIES, Quantity, Stat, metric_name, peak_is_vllm_bucket};
use crate::table::{Format, Table};

/// Below this many values a P99 interval gets a warning.
const FEW_FOR_P99: usize = 100;

/// Up to this many runs are shown a column each; more get a row each.
const MAX_COLUMNS: usize = 4;

/// One quantity of two runs.
#[derive(Clone, Debug, PartialEq)]
pub struct PairRow {
    pub quantity: Quantity,
    /// The value of A and of B: the summary's, else the records'.
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// The difference with its interval, when both runs have per-request values of it.
    pub estimate: Option<Estimate>,
}

impl PairRow {
    pub fn diff(&self) -> Option<f64> {
        Some(self.b? - self.a?)
    }

    /// `(B - A) / A`.
    pub fn rel(&self) -> Option<f64> {
        let (a, b) = (self.a?, self.b?);
        (a != 0.0).then(|| (b - a) / a)
    }
}

/// Two runs compared: A (the baseline) and B.
#[derive(Clone, Debug, PartialEq)]
pub struct PairStats {
    /// Indices of A and B in the runs.
    pub a: usize,
    pub b: usize,
    pub rows: Vec<PairRow>,
    /// What the statistics could not use.
    pub notes: Vec<String>,
    /// The requests A and B completed.
    pub completed: (u64, u64),
}

impl PairStats {
    /// Compares `runs[b]` (B) against `runs[a]` (A) on every key quantity, with intervals where
    /// both runs have per-request records.
    pub fn new(runs: &[StoredRun], a: usize, b: usize) -> PairStats {
        let (ra, rb) = (&runs[a], &runs[b]);
        let mut notes = Vec::new();
        for run in [ra, rb] {
            match &run.records {
                None => notes.push(format!(
                    "Run {} has no per-request records (it was imported from a report, or saved without them): \
                     the runs are compared on their summaries, without confidence intervals.",
                    run.row.id
                )),
                Some(r) if r.chunk_times == ChunkTimes::FirstLast => notes.push(format!(
                    "Run {}'s records hold only the first and last chunk time of each request: its ITL is compared \
                     on the summaries, without an interval.",
                    run.row.id
                )),
                Some(_) => {}
            }
        }
        // A pooling answer's one chunk is no first token: its runs have E2EL alone, as vLLM's.
        let pooled = ra.summary.pooling.is_some() || rb.summary.pooling.is_some();
        let rows: Vec<PairRow> = Quantity::key_rows()
            .into_iter()
            .map(|q| {
                let estimate = match q {
                    Quantity::Latency(_, Metric::Ttft | Metric::Tpot | Metric::Itl) if pooled => None,
                    Quantity::Latency(stat, metric) => estimate(ra, rb, stat, metric),
                    _ => None,
                };
                // A run that completed no request has no latency, from its summary or its records.
                let value = |run: &StoredRun, from_records: Option<f64>| {
                    q.value(&run.summary).or(from_records.filter(|_| run.summary.completed > 0))
                };
                let a = value(ra, estimate.map(|e| e.a));
                let b = value(rb, estimate.map(|e| e.b));
                PairRow { quantity: q, a, b, estimate }
            })
            .collect();
        let few = rows
            .iter()
            .filter_map(|r| r.estimate.filter(|e| e.stat == Stat::P99))
            .map(|e| e.n_a.min(e.n_b))
            .min()
            .filter(|&n| n < FEW_FOR_P99);
        if let Some(n) = few {
            notes.push(format!(
                "With {n} value{} in a run, a P99 rests on its one or two largest values, so its interval is rough.",
                if n == 1 { "" } else { "s" }
            ));
        }
        let completed = (ra.summary.completed, rb.summary.completed);
        PairStats { a, b, rows, notes, completed }
    }

    /// The row of quantity `q`.
    pub fn row(&self, q: Quantity) -> Option<&PairRow> {
        self.rows.iter().find(|r| r.quantity == q)
    }

    /// The row a `--fail-on` rule on `q` is judged on: `failed_pct` and `interactivity`, which
    /// the table leaves out, come from the completed and failed rows and the median TPOT row.
    pub fn judged(&self, q: Quantity) -> Option<PairRow> {
        if let (Quantity::Interactivity, Some((stat, metric))) = (q, q.latency()) {
            let tpot = self.row(Quantity::Latency(stat, metric))?;
            let rate = |ms: Option<f64>| per_user(ms?);
            return Some(PairRow { quantity: q, a: rate(tpot.a), b: rate(tpot.b), estimate: None });
        }
        if q != Quantity::FailedPct {
            return self.row(q).cloned();
        }
        let (completed, failed) = (self.row(Quantity::Completed)?, self.row(Quantity::Failed)?);
        let pct = |c: Option<f64>, f: Option<f64>| failed_pct(c? as u64, f? as u64);
        Some(PairRow { quantity: q, a: pct(completed.a, failed.a), b: pct(completed.b, failed.b), estimate: None })
    }
}

fn estimate(a: &StoredRun, b: &StoredRun, stat: Stat, metric: Metric) -> Option<Estimate> {
    let sa = bootstrap::samples(a.records.as_ref()?, metric)?;
    let sb = bootstrap::samples(b.records.as_ref()?, metric)?;
    let m = LATENCIES.iter().position(|&x| x == metric).unwrap_or(0) as u64;
    let s = Stat::ALL.iter().position(|&x| x == stat).unwrap_or(0) as u64;
    bootstrap::compare(&sa, &sb, stat, m * 3 + s)
}

/// Runs laid out and compared, ready to print.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub layout: Layout,
    /// The runs' numbers, in order.
    pub ids: Vec<i64>,
    /// The main tables, in print order.
    pub tables: Vec<Table>,
    /// Every run a row, for CSV and the HTML report.
    pub runs_table: Table,
    /// What `--format csv` prints: every run a line, every quantity at full precision.
    pub csv: Table,
    /// Set when exactly two runs are compared.
    pub pair: Option<PairStats>,
    pub findings: Vec<Finding>,
    /// Things to know about the numbers.
    pub notes: Vec<String>,
}

impl Comparison {
    /// Compares `runs` (at least one); `by` names the sweep axis.
    pub fn new(runs: &[StoredRun], by: Option<&str>) -> Result<Comparison, ReportError> {
        if runs.is_empty() {
            return Err(ReportError::NoRuns);
        }
        let layout = Layout::new(runs, by)?;
        let all: Vec<usize> = (0..runs.len()).collect();
        let pair = (runs.len() == 2).then(|| PairStats::new(runs, 0, 1));
        let mut notes = Vec::new();
        let mut tables = Vec::new();
        if let Some(pair) = &pair {
            tables.push(pair_table(runs, &layout, pair));
            notes.extend(pair.notes.iter().cloned());
        } else if let Some(sweep) = &layout.sweep {
            tables.extend(sweep_tables(runs, &layout));
            for key in &sweep.follow {
                notes.push(format!(
                    "{key} changes with {} (one value for each), so it does not split the runs.",
                    sweep.axis
                ));
            }
            let outside: Vec<usize> = sweep.outside.iter().map(|(i, _)| *i).collect();
            if !outside.is_empty() {
                tables.push(side_by_side(runs, &layout, &outside).with_title("Runs outside the sweep"));
                let mut reasons: Vec<(&str, Vec<i64>)> = Vec::new();
                for (i, why) in &sweep.outside {
                    match reasons.iter_mut().find(|(w, _)| w == why) {
                        Some((_, ids)) => ids.push(runs[*i].row.id),
                        None => reasons.push((why, vec![runs[*i].row.id])),
                    }
                }
                for (why, ids) in reasons {
                    let noun = if ids.len() == 1 { "run" } else { "runs" };
                    notes.push(format!("Outside the sweep along {} ({why}): {noun} {}.", sweep.axis, ranges(&ids)));
                }
            }
        } else {
            tables.push(side_by_side(runs, &layout, &all));
        }
        let bucketed: Vec<i64> = runs.iter().filter(|r| peak_is_vllm_bucket(r)).map(|r| r.row.id).collect();
        if !bucketed.is_empty() {
            notes.push(format!(
                "Peak concurrency of run{} {} is vLLM's count of requests touching a one-second bucket, which can \
                 exceed the concurrency cap.",
                if bucketed.len() == 1 { "" } else { "s" },
                ranges(&bucketed)
            ));
        }
        let cut_short: Vec<i64> = runs.iter().filter(|r| r.row.interrupted).map(|r| r.row.id).collect();
        if !cut_short.is_empty() {
            let (s, its) = if cut_short.len() == 1 { ("", "its") } else { ("s", "their") };
            notes.push(format!(
                "Run{s} {} ended early (interrupted, or stopped by a rule): {its} figures are of the requests \
                 that ended before, the slow ones it cut off missing (`servebench runs show ID` says why).",
                ranges(&cut_short),
            ));
        }
        let findings = findings::findings(runs, &layout, pair.as_ref());
        Ok(Comparison {
            ids: runs.iter().map(|r| r.row.id).collect(),
            tables,
            runs_table: rows_per_run(runs, &layout, &all),
            csv: csv_table(runs, &layout),
            pair,
            findings,
            notes,
            layout,
        })
    }

    /// The comparison as text: its tables and notes, and the findings when asked for.
    pub fn render(&self, format: Format, with_findings: bool) -> String {
        if format == Format::Csv {
            return self.csv.csv();
        }
        let mut out = String::new();
        for (i, t) in self.tables.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&t.render(format));
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for (i, n) in self.notes.iter().enumerate() {
                match format {
                    Format::Markdown => {
                        let gap = if i > 0 { "\n" } else { "" };
                        let _ = writeln!(out, "{gap}_{n}_");
                    }
                    _ => {
                        let _ = writeln!(out, "Note: {n}");
                    }
                }
            }
        }
        if with_findings {
            out.push('\n');
            out.push_str(if format == Format::Markdown { "### Findings\n\n" } else { "Findings\n" });
            if self.findings.is_empty() {
                out.push_str("- Nothing stands out: the runs share no sweep axis and no group to rank.\n");
            }
            for f in &self.findings {
                let _ = writeln!(out, "- {}", f.text);
            }
        }
        out
    }

    /// Checks `--fail-on` rules; `None` unless exactly two runs are compared.
    pub fn check(&self, rules: &[Threshold]) -> Option<Verdicts> {
        self.pair.as_ref().map(|p| gate::check(rules, p))
    }
}

/// Run numbers as ranges: `1-11, 14`.
pub fn ranges(ids: &[RunId]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j].checked_add(1) == Some(ids[j + 1]) {
            j += 1;
        }
        parts.push(if i == j { ids[i].to_string() } else { format!("{}-{}", ids[i], ids[j]) });
        i = j + 1;
    }
    parts.join(", ")
}

/// The short column header of a quantity in a row-per-run table.
fn short_header(q: Quantity) -> String {
    match q {
        Quantity::Completed => "OK".into(),
        Quantity::Failed => "FAIL".into(),
        Quantity::FailedPct => "FAIL %".into(),
        Quantity::RequestThroughput => "REQ/S".into(),
        Quantity::InputThroughput => "IN/S".into(),
        Quantity::OutputThroughput => "OUT TOK/S".into(),
        Quantity::TotalTokenThroughput => "TOK/S".into(),
        Quantity::OutputThroughputPerGpu => "OUT/GPU".into(),
        Quantity::TotalTokenThroughputPerGpu => "TOK/S/GPU".into(),
        Quantity::CostPerMillionOutput => "$/MTOK".into(),
        Quantity::OutputTokensPerJoule => "TOK/J".into(),
        Quantity::Interactivity => "TOK/S/USER".into(),
        Quantity::PeakConcurrency => "PEAK".into(),
        Quantity::GpuUtil => "GPU %".into(),
        Quantity::ProbeE2el(Stat::Median) => "PROBE MED".into(),
        Quantity::ProbeE2el(s) => format!("PROBE {}", probe_stat(s).to_uppercase()),
        Quantity::Latency(s, m) => {
            let stat = match s {
                Stat::Mean => "MEAN".to_string(),
                Stat::Median => "MED".to_string(),
                Stat::Percentile(_) => s.label(),
            };
            format!("{} {stat}", metric_name(m))
        }
    }
}

/// The quantities that at least one of `runs[indices]` has.
fn present(runs: &[StoredRun], indices: &[usize]) -> Vec<Quantity> {
    Quantity::key_rows().into_iter().filter(|q| indices.iter().any(|&i| q.value(&runs[i].summary).is_some())).collect()
}

fn cell(q: Quantity, run: &StoredRun) -> String {
    q.value(&run.summary).map_or_else(|| "-".to_string(), |v| q.format(v))
}

/// The runs side by side: a column per run for a few runs, else a row per run.
pub fn side_by_side(runs: &[StoredRun], layout: &Layout, indices: &[usize]) -> Table {
    if indices.len() > MAX_COLUMNS {
        return rows_per_run(runs, layout, indices);
    }
    let mut header = vec![String::new()];
    header.extend(indices.iter().map(|&i| format!("#{}", runs[i].row.id)));
    let mut t = Table::new(header);
    t.right = std::iter::once(false).chain(indices.iter().map(|_| true)).collect();
    for key in layout.varying.iter().filter(|k| indices.iter().any(|&i| layout.setting(i, k).is_some())) {
        let mut row = vec![key.clone()];
        row.extend(indices.iter().map(|&i| layout.setting(i, key).unwrap_or("-").to_string()));
        t.rows.push(row);
    }
    for q in present(runs, indices) {
        let mut row = vec![q.label()];
        row.extend(indices.iter().map(|&i| cell(q, &runs[i])));
        t.rows.push(row);
    }
    t
}

/// A row per run: its number, name and key numbers (latencies in ms).
pub fn rows_per_run(runs: &[StoredRun], layout: &Layout, indices: &[usize]) -> Table {
    let quantities = present(runs, indices);
    let mut header = vec!["ID".to_string(), "RUN".to_string()];
    header.extend(quantities.iter().map(|&q| short_header(q)));
    let mut t = Table::new(header).with_title("Runs (latencies in ms)");
    t.right = [true, false].into_iter().chain(quantities.iter().map(|_| true)).collect();
    for &i in indices {
        let mut row = vec![runs[i].row.id.to_string(), layout.names[i].clone()];
        row.extend(quantities.iter().map(|&q| cell(q, &runs[i])));
        t.rows.push(row);
    }
    t
}

/// The quantities a sweep pivots, in order.
fn pivot_quantities(runs: &[StoredRun]) -> Vec<Quantity> {
    let mut qs = vec![
        Quantity::InputThroughput,
        Quantity::OutputThroughput,
        Quantity::OutputThroughputPerGpu,
        Quantity::CostPerMillionOutput,
        Quantity::OutputTokensPerJoule,
        Quantity::RequestThroughput,
        Quantity::Latency(Stat::Median, Metric::Ttft),
        Quantity::Latency(Stat::P99, Metric::Ttft),
        Quantity::Latency(Stat::Median, Metric::Tpot),
        Quantity::Latency(Stat::P99, Metric::Tpot),
        Quantity::Latency(Stat::Median, Metric::Itl),
        Quantity::Latency(Stat::Median, Metric::E2el),
        Quantity::Latency(Stat::P99, Metric::E2el),
    ];
    if runs.iter().any(|r| r.summary.failed.is_some_and(|f| f > 0)) {
        qs.push(Quantity::FailedPct);
    }
    // Where the server said how busy its GPU was, beside the load.
    qs.push(Quantity::GpuUtil);
    qs.retain(|q| runs.iter().any(|r| q.value(&r.summary).is_some()));
    qs
}

/// The sweep's pivots: the axis values as columns.
pub fn sweep_tables(runs: &[StoredRun], layout: &Layout) -> Vec<Table> {
    let Some(sweep) = &layout.sweep else { return Vec::new() };
    let values: Vec<String> = sweep.values.iter().map(|&v| number_text(v)).collect();
    let right: Vec<bool> = std::iter::once(false).chain(values.iter().map(|_| true)).collect();
    let value_at = |q: Quantity, s: &crate::layout::Series, v: f64| {
        sweep.point(s, v).map_or_else(|| "-".to_string(), |i| cell(q, &runs[i]))
    };
    if let [series] = sweep.series.as_slice() {
        let mut title = format!("By {}", sweep.axis);
        if !series.name.is_empty() {
            let _ = write!(title, " ({})", series.name);
        }
        let mut t =
            Table::new(std::iter::once(String::new()).chain(values.iter().cloned()).collect()).with_title(title);
        t.right = right;
        t.rows.push(
            std::iter::once("Run".to_string())
                .chain(
                    sweep
                        .values
                        .iter()
                        .map(|&v| sweep.point(series, v).map_or("-".into(), |i| runs[i].row.id.to_string())),
                )
                .collect(),
        );
        for q in pivot_quantities(runs) {
            t.rows
                .push(std::iter::once(q.label()).chain(sweep.values.iter().map(|&v| value_at(q, series, v))).collect());
        }
        return vec![t];
    }
    let in_sweep: Vec<usize> = sweep.series.iter().flat_map(|s| s.points.iter().map(|&(_, i)| i)).collect();
    let others: Vec<&str> = layout
        .varying
        .iter()
        .filter(|k| **k != sweep.axis && !sweep.follow.contains(k))
        .filter(|k| in_sweep.iter().any(|&i| layout.setting(i, k).is_some()))
        .map(String::as_str)
        .collect();
    let series_header = if others.is_empty() { "series".to_string() } else { others.join(" ") };
    pivot_quantities(runs)
        .into_iter()
        .map(|q| {
            let mut t = Table::new(std::iter::once(series_header.clone()).chain(values.iter().cloned()).collect())
                .with_title(format!("{} by {}", q.label(), sweep.axis));
            t.right = right.clone();
            for s in &sweep.series {
                t.rows.push(
                    std::iter::once(s.name.clone()).chain(sweep.values.iter().map(|&v| value_at(q, s, v))).collect(),
                );
            }
            t
        })
        .collect()
}

fn signed(x: f64) -> String {
    format!("{x:+.2}")
}

/// The table of two runs: values, difference, interval and change.
pub fn pair_table(runs: &[StoredRun], layout: &Layout, pair: &PairStats) -> Table {
    let (ra, rb) = (&runs[pair.a], &runs[pair.b]);
    let header = vec![
        String::new(),
        format!("#{} (A)", ra.row.id),
        format!("#{} (B)", rb.row.id),
        "B - A".to_string(),
        "95% CI OF B - A".to_string(),
        "CHANGE".to_string(),
    ];
    let mut t = Table::new(header).with_title(format!(
        "Run {} (A) against run {} (B); intervals by bootstrap of {RESAMPLES} resamples (medians, P99), \
         normal approximation (means); * the interval excludes 0",
        ra.row.id, rb.row.id
    ));
    t.right = vec![false, true, true, true, true, true];
    for key in &layout.varying {
        let s = |i| layout.setting(i, key).unwrap_or("-").to_string();
        t.rows.push(vec![key.clone(), s(pair.a), s(pair.b), String::new(), String::new(), String::new()]);
    }
    for row in &pair.rows {
        if row.a.is_none() && row.b.is_none() {
            continue;
        }
        let q = row.quantity;
        let show = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| q.format(v));
        let ci = match row.estimate {
            Some(e) => {
                let star = if e.ci.excludes_zero() { " *" } else { "" };
                format!("[{}, {}]{star}", signed(e.ci.low), signed(e.ci.high))
            }
            None => "-".to_string(),
        };
        t.rows.push(vec![
            q.label(),
            show(row.a),
            show(row.b),
            row.diff().map_or_else(|| "-".to_string(), |d| if q.is_count() { format!("{d:+.0}") } else { signed(d) }),
            ci,
            row.rel().map_or_else(|| "-".to_string(), |r| format!("{:+.2} %", r * 100.0)),
        ]);
    }
    t
}

/// One line per run with every varying setting and every quantity, at full precision.
pub fn csv_table(runs: &[StoredRun], layout: &Layout) -> Table {
    let quantities = Quantity::all();
    let mut header: Vec<String> = ["id", "uid", "kind", "name"].iter().map(|s| s.to_string()).collect();
    header.extend(layout.varying.iter().cloned());
    header.extend(quantities.iter().map(|q| q.key()));
    let mut t = Table::new(header);
    for (i, run) in runs.iter().enumerate() {
        let mut row =
            vec![run.row.id.to_string(), run.row.uid.clone(), run.row.kind.to_string(), layout.names[i].clone()];
        row.extend(layout.varying.iter().map(|k| layout.setting(i, k).unwrap_or_default().to_string()));
        row.extend(quantities.iter().map(|q| q.value(&run.summary).map_or_else(String::new, |v| v.to_string())));
        t.rows.push(row);
    }
    t
}

#[cfg(test)]
mod tests;
