//! Service level objectives of `sweep --slo`: `p99_ttft_ms<=500,output_throughput>=1000`.
//!
//! A key is `{mean,median,p99,pN}_{ttft,tpot,itl,e2el}_ms` (milliseconds, `<=`), `failed_pct`
//! (percent of the requests sent, `<=`), or `output_throughput`, `request_throughput`,
//! `total_token_throughput` (per second, `>=`). A run meets an SLO when it has the value and the
//! value is within the bound (inclusive); a run without the value (no successful request) does
//! not meet it.

use servebench_core::config::Metric;
use servebench_core::metrics::Summary;
use servebench_report::layout::number_text;
use servebench_report::quantity::{LATENCIES, failed_pct};

/// Which statistic of a latency.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SloStat {
    Mean,
    Median,
    /// A percentile, 0 to 100.
    P(f64),
}

impl SloStat {
    /// `mean`, `median`, `p99`: the statistic as keys and sentences write it.
    fn text(self) -> String {
        match self {
            SloStat::Mean => "mean".to_string(),
            SloStat::Median => "median".to_string(),
            SloStat::P(p) => format!("p{}", number_text(p)),
        }
    }
}

/// What an SLO bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SloKey {
    Latency(SloStat, Metric),
    FailedPct,
    OutputThroughput,
    RequestThroughput,
    TotalTokenThroughput,
}

/// One objective: the key, its direction and its limit.
#[derive(Clone, Debug, PartialEq)]
pub struct Slo {
    pub key: SloKey,
    /// `true` for `>=` (throughputs), `false` for `<=`.
    pub at_least: bool,
    pub limit: f64,
}

/// An SLO that cannot be read, with what to write instead.
#[derive(Debug, thiserror::Error)]
#[error("invalid --slo {item:?}: {why}")]
pub struct SloError {
    pub item: String,
    pub why: String,
}

const GRAMMAR: &str = "use KEY<=VALUE for {mean,median,p99,pN}_{ttft,tpot,itl,e2el}_ms (milliseconds) and \
     failed_pct, KEY>=VALUE for output_throughput, request_throughput and total_token_throughput, e.g. \
     p99_ttft_ms<=500,p99_tpot_ms<=50";

impl Slo {
    /// Reads `--slo` values, each a comma list.
    pub fn parse_all(items: &[String]) -> Result<Vec<Slo>, SloError> {
        let mut out = Vec::new();
        for item in items {
            for one in item.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                out.push(Slo::parse(one)?);
            }
        }
        Ok(out)
    }

    pub fn parse(item: &str) -> Result<Slo, SloError> {
        let bad = |why: String| SloError { item: item.to_string(), why };
        let (key, at_least, value) = if let Some((k, v)) = item.split_once("<=") {
            (k, false, v)
        } else if let Some((k, v)) = item.split_once(">=") {
            (k, true, v)
        } else {
            return Err(bad(GRAMMAR.to_string()));
        };
        let key = key.trim();
        let parsed = parse_key(key).ok_or_else(|| bad(format!("unknown key {key:?}; {GRAMMAR}")))?;
        let limit: f64 = value.trim().parse().ok().filter(|v: &f64| v.is_finite() && *v >= 0.0).ok_or_else(|| {
            bad(format!("{:?} is not a number of {}", value.trim(), if at_least { "at least 0" } else { "0 or more" }))
        })?;
        let wants_at_least =
            matches!(parsed, SloKey::OutputThroughput | SloKey::RequestThroughput | SloKey::TotalTokenThroughput);
        if at_least != wants_at_least {
            let op = if wants_at_least { ">=" } else { "<=" };
            return Err(bad(format!("{key} is bounded with {op} ({key}{op}{})", value.trim())));
        }
        Ok(Slo { key: parsed, at_least, limit })
    }

    /// `p99_ttft_ms`.
    pub fn key_text(&self) -> String {
        match self.key {
            SloKey::Latency(stat, metric) => format!("{}_{}_ms", stat.text(), metric.key()),
            SloKey::FailedPct => "failed_pct".into(),
            SloKey::OutputThroughput => "output_throughput".into(),
            SloKey::RequestThroughput => "request_throughput".into(),
            SloKey::TotalTokenThroughput => "total_token_throughput".into(),
        }
    }

    /// `p99_ttft_ms<=500`.
    pub fn text(&self) -> String {
        format!("{}{}{}", self.key_text(), if self.at_least { ">=" } else { "<=" }, number_text(self.limit))
    }

    /// The key's value in a run's summary; `None` when the run does not have it.
    pub fn value(&self, s: &Summary) -> Option<f64> {
        match self.key {
            SloKey::Latency(stat, metric) => {
                if s.completed == 0 {
                    return None;
                }
                let m = s.metric(metric)?;
                match stat {
                    SloStat::Mean => Some(m.mean_ms),
                    SloStat::Median => Some(m.median_ms),
                    SloStat::P(p) => m.percentile(p),
                }
            }
            SloKey::FailedPct => failed_pct(s.completed, s.failed.unwrap_or(0)),
            SloKey::OutputThroughput => s.output_throughput,
            SloKey::RequestThroughput => Some(s.request_throughput),
            SloKey::TotalTokenThroughput => s.total_token_throughput,
        }
    }

    /// Whether `value` meets the objective (a missing value does not).
    pub fn met_by(&self, value: Option<f64>) -> bool {
        value.is_some_and(|v| if self.at_least { v >= self.limit } else { v <= self.limit })
    }

    /// `p99 TTFT`, `failed`, `output throughput`: the key as words.
    pub fn name(&self) -> String {
        match self.key {
            SloKey::Latency(stat, metric) => format!("{} {}", stat.text(), metric.key().to_ascii_uppercase()),
            SloKey::FailedPct => "failed".into(),
            SloKey::OutputThroughput => "output throughput".into(),
            SloKey::RequestThroughput => "request throughput".into(),
            SloKey::TotalTokenThroughput => "total token throughput".into(),
        }
    }

    /// A value with its unit: `431 ms`, `2.5 %`, `1234.5 tok/s`; `none` when missing.
    pub fn value_text(&self, value: Option<f64>) -> String {
        let Some(v) = value else { return "none".into() };
        match self.key {
            SloKey::Latency(..) => format!("{} ms", short(v)),
            SloKey::FailedPct => format!("{v:.1} %"),
            SloKey::OutputThroughput | SloKey::TotalTokenThroughput => format!("{v:.1} tok/s"),
            SloKey::RequestThroughput => format!("{v:.2} req/s"),
        }
    }

    /// `p99 TTFT 431 ms`.
    pub fn describe(&self, value: Option<f64>) -> String {
        format!("{} {}", self.name(), self.value_text(value))
    }
}

/// Milliseconds as they read best: whole numbers from 100, else two significant decimals.
pub fn short(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn parse_key(key: &str) -> Option<SloKey> {
    match key {
        "failed_pct" => return Some(SloKey::FailedPct),
        "output_throughput" => return Some(SloKey::OutputThroughput),
        "request_throughput" => return Some(SloKey::RequestThroughput),
        "total_token_throughput" => return Some(SloKey::TotalTokenThroughput),
        _ => {}
    }
    let rest = key.strip_suffix("_ms")?;
    let (stat, metric) = rest.split_once('_')?;
    let metric = LATENCIES.into_iter().find(|m| m.key() == metric)?;
    let stat = match stat {
        "mean" => SloStat::Mean,
        "median" => SloStat::Median,
        p => {
            let p: f64 = p.strip_prefix('p')?.parse().ok()?;
            if !(0.0..=100.0).contains(&p) {
                return None;
            }
            SloStat::P(p)
        }
    };
    Some(SloKey::Latency(stat, metric))
}

/// The percentile sections and percentiles the SLOs need a run to compute, beyond those of
/// `metrics` and `percentiles`: `(missing metrics, missing percentiles)`.
pub fn missing_sections(slos: &[Slo], metrics: &[Metric], percentiles: &[f64]) -> (Vec<Metric>, Vec<f64>) {
    let mut need_metrics: Vec<Metric> = Vec::new();
    let mut need_ps: Vec<f64> = Vec::new();
    for slo in slos {
        if let SloKey::Latency(stat, metric) = slo.key {
            if !metrics.contains(&metric) && !need_metrics.contains(&metric) {
                need_metrics.push(metric);
            }
            if let SloStat::P(p) = stat
                && !percentiles.contains(&p)
                && !need_ps.contains(&p)
            {
                need_ps.push(p);
            }
        }
    }
    (need_metrics, need_ps)
}

/// How runs fare against the SLOs: each SLO's value (the mean over the runs that have it) and
/// whether it is met.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// Per SLO, in order: the value and whether it meets the objective.
    pub checks: Vec<(Option<f64>, bool)>,
}

impl Verdict {
    /// Judges runs of one point on the mean of each value; a value missing from any run is
    /// missing (it fails).
    pub fn judge(slos: &[Slo], summaries: &[&Summary]) -> Verdict {
        let checks = slos
            .iter()
            .map(|slo| {
                let values: Option<Vec<f64>> = summaries.iter().map(|s| slo.value(s)).collect();
                let mean = values.filter(|v| !v.is_empty()).map(|v| v.iter().sum::<f64>() / v.len() as f64);
                (mean, slo.met_by(mean))
            })
            .collect();
        Verdict { checks }
    }

    pub fn passed(&self) -> bool {
        self.checks.iter().all(|(_, ok)| *ok)
    }

    /// `pass`, or `fails p99_ttft_ms, failed_pct`.
    pub fn text(&self, slos: &[Slo]) -> String {
        let failed: Vec<String> =
            slos.iter().zip(&self.checks).filter(|(_, (_, ok))| !ok).map(|(s, _)| s.key_text()).collect();
        if failed.is_empty() { "pass".into() } else { format!("fails {}", failed.join(", ")) }
    }

    /// `p99 TTFT 431 ms, p99 TPOT 38 ms`: every SLO's value.
    pub fn values(&self, slos: &[Slo]) -> String {
        slos.iter().zip(&self.checks).map(|(s, (v, _))| s.describe(*v)).collect::<Vec<_>>().join(", ")
    }
}

/// The SLOs as a phrase: `p99_ttft_ms<=500 and p99_tpot_ms<=50`.
pub fn conjunction(slos: &[Slo]) -> String {
    let texts: Vec<String> = slos.iter().map(Slo::text).collect();
    match texts.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use servebench_core::metrics::MetricStats;

    use super::*;

    fn summary(completed: u64, failed: u64, p99_ttft: f64) -> Summary {
        Summary {
            completed,
            failed: Some(failed),
            request_throughput: 2.0,
            output_throughput: Some(300.0),
            metrics: vec![MetricStats {
                metric: Metric::Ttft,
                mean_ms: p99_ttft / 2.0,
                median_ms: p99_ttft / 3.0,
                std_ms: None,
                percentiles: vec![(99.0, p99_ttft), (90.0, p99_ttft * 0.8)],
            }],
            ..Summary::default()
        }
    }

    #[test]
    fn keys_parse_with_their_direction_and_print_back() {
        let slos =
            Slo::parse_all(&["p99_ttft_ms<=500, median_tpot_ms<=50".into(), "p99.9_e2el_ms<=2000".into()]).unwrap();
        let texts: Vec<String> = slos.iter().map(Slo::text).collect();
        assert_eq!(texts, ["p99_ttft_ms<=500", "median_tpot_ms<=50", "p99.9_e2el_ms<=2000"]);
        assert_eq!(slos[2].key, SloKey::Latency(SloStat::P(99.9), Metric::E2el));
        let t = Slo::parse("output_throughput>=1000").unwrap();
        assert!(t.at_least);
        assert_eq!(Slo::parse("failed_pct<=1").unwrap().key, SloKey::FailedPct);
        assert_eq!(conjunction(&slos), "p99_ttft_ms<=500, median_tpot_ms<=50 and p99.9_e2el_ms<=2000");
    }

    #[test]
    fn bad_slos_say_what_to_write() {
        for (item, says) in [
            ("p99_ttft_ms<500", "KEY<=VALUE"),
            ("p99_ttfx_ms<=5", "unknown key"),
            ("p101_ttft_ms<=5", "unknown key"),
            ("p99_ttft_ms>=5", "bounded with <="),
            ("output_throughput<=5", "bounded with >="),
            ("p99_ttft_ms<=fast", "not a number"),
        ] {
            let err = Slo::parse(item).unwrap_err().to_string();
            assert!(err.contains(says), "{item}: {err}");
        }
    }

    #[test]
    fn runs_are_judged_on_the_mean_and_a_missing_value_fails() {
        let slos = Slo::parse_all(&["p99_ttft_ms<=500,p90_ttft_ms<=380,failed_pct<=10,output_throughput>=250".into()])
            .unwrap();
        let (a, b) = (summary(20, 0, 400.0), summary(20, 0, 560.0));
        let v = Verdict::judge(&slos, &[&a, &b]);
        assert_eq!(v.checks[0], (Some(480.0), true));
        assert_eq!(v.checks[1], (Some(384.0), false));
        assert!(!v.passed());
        assert_eq!(v.text(&slos), "fails p90_ttft_ms");
        assert_eq!(v.values(&slos).split(", ").nth(1), Some("p90 TTFT 384 ms"));
        let none = summary(0, 20, 1.0);
        let v = Verdict::judge(&slos, &[&none]);
        assert_eq!(v.checks[0], (None, false));
        assert_eq!(v.checks[2], (Some(100.0), false));
        assert_eq!(v.values(&slos).split(", ").next(), Some("p99 TTFT none"));
    }

    #[test]
    fn missing_sections_are_the_metrics_and_percentiles_not_asked_for() {
        let slos = Slo::parse_all(&["p90_e2el_ms<=5,p99_ttft_ms<=5,mean_tpot_ms<=1".into()]).unwrap();
        let (m, p) = missing_sections(&slos, &[Metric::Ttft, Metric::Tpot, Metric::Itl], &[99.0]);
        assert_eq!(m, [Metric::E2el]);
        assert_eq!(p, [90.0]);
    }
}
