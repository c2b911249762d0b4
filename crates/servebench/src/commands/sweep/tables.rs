//! The tables a sweep prints after its runs besides the comparison: the spread of repeated
//! points, the SLO check of each point, and the probes and answer of an SLO search.

use servebench_core::config::Metric;
use servebench_core::metrics::Summary;
use servebench_report::Table;
use servebench_report::layout::number_text;

use super::run::{RunRecord, describe};
use servebench_core::search::{Answer, Search};
use servebench_core::threshold::{Threshold, Verdicts};

use servebench_core::threshold::slo::{self, conjunction, short};

/// `431 ± 12`, `4.35 ± 0.01` (sample standard deviation, at the mean's precision), or the
/// value alone for one run; `-` for none.
pub fn mean_std(values: &[f64]) -> String {
    mean_std_as(values, short)
}

/// [`mean_std`] with each number written by `write`.
fn mean_std_as(values: &[f64], write: impl Fn(f64) -> String) -> String {
    match values {
        [] => "-".into(),
        [one] => write(*one),
        _ => {
            let n = values.len() as f64;
            let mean = values.iter().sum::<f64>() / n;
            let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
            let decimals = write(mean).split('.').nth(1).map_or(0, str::len);
            format!("{} ± {std:.decimals$}", write(mean))
        }
    }
}

/// An objective's values in the SLO and probe tables: latencies as they read best, other
/// quantities at two decimals, so a throughput just under its bound (169.60 against 170) does
/// not read as the bound.
fn objective_cell(objective: &Threshold, values: &[f64]) -> String {
    match objective.quantity.unit() {
        "ms" => mean_std(values),
        _ => mean_std_as(values, |v| objective.quantity.format(v)),
    }
}

/// The summaries of the finished runs of `records` with index in `which`.
fn summaries<'r>(records: &'r [RunRecord], which: &[usize]) -> Vec<&'r Summary> {
    which.iter().filter_map(|&i| records[i].outcome.as_ref().ok()).map(|d| &d.summary).collect()
}

/// Points in run order with the indices of their records.
fn by_point(records: &[RunRecord]) -> Vec<(usize, Vec<usize>)> {
    let mut out: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, r) in records.iter().enumerate() {
        match out.iter_mut().find(|(p, _)| *p == r.point) {
            Some((_, v)) => v.push(i),
            None => out.push((r.point, vec![i])),
        }
    }
    out
}

/// Repeated points: each point's key numbers as mean ± standard deviation over its runs.
pub fn spread_table(records: &[RunRecord]) -> Table {
    type Pick = fn(&Summary) -> Option<f64>;
    let columns: [(&str, Pick); 5] = [
        ("OUT TOK/S", |s| s.output_throughput),
        ("TTFT MED", |s| s.metric(Metric::Ttft).map(|x| x.median_ms)),
        ("TTFT P99", |s| s.metric(Metric::Ttft).and_then(|x| x.percentile(99.0))),
        ("TPOT MED", |s| s.metric(Metric::Tpot).map(|x| x.median_ms)),
        ("TPOT P99", |s| s.metric(Metric::Tpot).and_then(|x| x.percentile(99.0))),
    ];
    let mut header = vec!["POINT".to_string(), "RUNS".to_string()];
    header.extend(columns.iter().map(|(h, _)| (*h).to_string()));
    let mut t = Table::new(header).with_title("Spread over repeats: mean ± standard deviation (latencies in ms)");
    t.right = [false, true].into_iter().chain(columns.iter().map(|_| true)).collect();
    for (_, runs) in by_point(records) {
        let done = summaries(records, &runs);
        let mut row = vec![describe(&records[runs[0]].shown), format!("{}/{}", done.len(), runs.len())];
        for (_, pick) in &columns {
            let values: Vec<f64> = done.iter().filter(|s| s.completed > 0).filter_map(|s| pick(s)).collect();
            row.push(mean_std(&values));
        }
        t.rows.push(row);
    }
    t
}

/// Each point against the SLOs (judged on the mean of its runs), and how many meet them all.
pub fn slo_table(records: &[RunRecord], slos: &[Threshold]) -> (Table, String) {
    let mut header = vec!["POINT".to_string()];
    header.extend(slos.iter().map(|s| s.quantity.key()));
    header.push("VERDICT".into());
    let mut t = Table::new(header).with_title(format!("SLOs: {}", conjunction(slos)));
    t.right = std::iter::once(false).chain(slos.iter().map(|_| true)).collect();
    let points = by_point(records);
    let mut passed = 0;
    for (_, runs) in &points {
        let done = summaries(records, runs);
        let verdict = slo::judge(slos, &done);
        let mut row = vec![describe(&records[runs[0]].shown)];
        for objective in slos {
            let values: Vec<f64> = done.iter().filter_map(|s| slo::value(objective, s)).collect();
            row.push(objective_cell(objective, &values));
        }
        if done.is_empty() {
            row.push("failed to run".into());
        } else {
            passed += usize::from(verdict.passed());
            row.push(slo::verdict_text(&verdict));
        }
        t.rows.push(row);
    }
    let summary = format!("{passed} of {} points meet {}.", points.len(), conjunction(slos));
    (t, summary)
}

/// One probe of a search.
#[derive(Clone, Debug)]
pub struct Probe {
    pub value: f64,
    pub num_prompts: usize,
    pub verdict: Verdicts,
    /// Indices of its runs' records.
    pub runs: Vec<usize>,
}

/// The probes of one search in the order they ran.
pub fn probes_table(
    records: &[RunRecord],
    key: &str,
    scaled: bool,
    slos: &[Threshold],
    probes: &[Probe],
    title: String,
) -> Table {
    let mut header = vec!["PROBE".to_string(), key.to_string()];
    if scaled {
        header.push("num_prompts".into());
    }
    header.extend(slos.iter().map(|s| s.quantity.key()));
    header.push("VERDICT".into());
    let stored = |p: &Probe| -> Vec<String> {
        p.runs
            .iter()
            .filter_map(|&r| records[r].outcome.as_ref().ok().and_then(|d| d.stored))
            .map(|id| format!("#{id}"))
            .collect()
    };
    let with_ids = probes.iter().any(|p| !stored(p).is_empty());
    if with_ids {
        header.push("RUNS".into());
    }
    let mut t = Table::new(header).with_title(title);
    t.right = [true, true].into_iter().chain(std::iter::repeat_n(true, usize::from(scaled) + slos.len())).collect();
    for (i, p) in probes.iter().enumerate() {
        let mut row = vec![(i + 1).to_string(), number_text(p.value)];
        if scaled {
            row.push(p.num_prompts.to_string());
        }
        let done = summaries(records, &p.runs);
        for objective in slos {
            let values: Vec<f64> = done.iter().filter_map(|s| slo::value(objective, s)).collect();
            row.push(objective_cell(objective, &values));
        }
        row.push(slo::verdict_text(&p.verdict));
        if with_ids {
            let ids = stored(p);
            row.push(if ids.is_empty() { "-".into() } else { ids.join(" ") });
        }
        t.rows.push(row);
    }
    t
}

/// The answer of a search as a sentence: `highest max_concurrency meeting p99_ttft_ms<=500:
/// 48 (p99 TTFT 431 ms); 49 fails p99 TTFT (512 ms)`.
pub fn answer_text(key: &str, slos: &[Threshold], search: &Search, probes: &[Probe], finished: bool) -> String {
    let answer: Answer = search.answer();
    let verdict_at = |v: f64| probes.iter().find(|p| p.value == v).map(|p| &p.verdict);
    let fail_text = |v: f64| {
        let why: Vec<String> = verdict_at(v)
            .map(|verdict| {
                verdict
                    .verdicts
                    .iter()
                    .filter(|v| v.failed())
                    .map(|v| format!("{} ({})", slo::name(&v.threshold), slo::value_text(&v.threshold, v.value)))
                    .collect()
            })
            .unwrap_or_default();
        format!("{} fails {}", number_text(v), why.join(" and "))
    };
    let all = conjunction(slos);
    let mut text = match answer.best {
        None => match answer.lowest_fail {
            Some(f) => format!("no {key} from {} meets {all}: {}", number_text(search.min), fail_text(f)),
            None => format!("no probe of {key} finished, so there is no answer"),
        },
        Some(best) => {
            let values = verdict_at(best).map(slo::values_text).unwrap_or_default();
            let mut s = format!("highest {key} meeting {all}: {} ({values})", number_text(best));
            match answer.lowest_fail {
                Some(f) => s.push_str(&format!("; {}", fail_text(f))),
                None if answer.at_max => s.push_str("; that is --search-max: raise it to look further"),
                None => {}
            }
            s
        }
    };
    if !finished {
        text = format!("the search stopped before it ended; so far, {text}");
    }
    if !answer.passed_above.is_empty() {
        let values: Vec<String> = answer.passed_above.iter().map(|v| number_text(*v)).collect();
        text.push_str(&format!(
            ".\nNote: {} passed above the lowest failure: the runs are noisy (or the server is not monotonic in {key}); \
             the answer trusts the lowest failure",
            values.join(", ")
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use servebench_core::threshold::parse_slo;

    use super::*;

    #[test]
    fn objectives_show_latencies_short_and_throughputs_at_two_decimals() {
        let (ttft, inputs) =
            (parse_slo("p99_ttft_ms<=500").unwrap(), parse_slo("input_sequence_throughput>=170").unwrap());
        assert_eq!(objective_cell(&ttft, &[431.2]), "431");
        assert_eq!(objective_cell(&ttft, &[430.0, 432.0]), "431 ± 1");
        // Just under its bound, a throughput does not read as the bound.
        assert_eq!(objective_cell(&inputs, &[169.6]), "169.60");
        assert_eq!(objective_cell(&inputs, &[169.6, 170.4]), "170.00 ± 0.57");
        assert_eq!(objective_cell(&inputs, &[]), "-");
    }
}
