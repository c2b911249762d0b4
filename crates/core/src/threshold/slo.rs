//! Service level objectives of `sweep --slo`: `p99_ttft_ms<=500,output_throughput>=1000`.
//!
//! The objectives are [`Threshold`]s (read by [`super::parse_slos`]):
//! a latency statistic in milliseconds or `failed_pct` with `<=`, a throughput with `>=`. A run
//! meets an SLO when it has the value and the value is within the bound (inclusive); a run
//! without the value (no successful request) does not meet it. This module judges points
//! against them and words the outcome.

use crate::config::Metric;
use crate::metrics::Summary;
use crate::threshold::{Outcome, Quantity, Stat, Threshold, Verdict, Verdicts, failed_pct};

/// The SLO's value in a run's summary; `None` when the run does not have it (a latency of a
/// run without a successful request; a missing failure count reads as none failed).
pub fn value(slo: &Threshold, s: &Summary) -> Option<f64> {
    match slo.quantity {
        Quantity::FailedPct => failed_pct(s.completed, s.failed.unwrap_or(0)),
        q => q.value(s),
    }
}

/// Whether `value` meets the objective (a missing value does not).
pub fn met_by(slo: &Threshold, value: Option<f64>) -> bool {
    value.is_some_and(|v| slo.holds(v))
}

/// `p99 TTFT`, `failed`, `output throughput`: the key as words.
pub fn name(slo: &Threshold) -> String {
    match slo.quantity {
        Quantity::FailedPct => "failed".into(),
        q => q.name(),
    }
}

/// A value with its unit: `431 ms`, `2.5 %`, `1234.5 tok/s`, `171.5 inputs/s`; `none` when
/// missing.
pub fn value_text(slo: &Threshold, value: Option<f64>) -> String {
    let Some(v) = value else { return "none".into() };
    match slo.quantity {
        Quantity::RequestThroughput => format!("{v:.2} req/s"),
        Quantity::OutputThroughput
        | Quantity::TotalTokenThroughput
        | Quantity::OutputThroughputPerGpu
        | Quantity::TotalTokenThroughputPerGpu
        | Quantity::InputThroughput
        | Quantity::Interactivity => format!("{v:.1} {}", slo.quantity.unit()),
        Quantity::FailedPct => format!("{v:.1} %"),
        Quantity::Latency(..) | Quantity::ProbeE2el(..) => format!("{} ms", short(v)),
        // Not objectives' quantities; in their own unit all the same.
        other => other.format_with_unit(v),
    }
}

/// `p99 TTFT 431 ms`.
pub fn describe(slo: &Threshold, value: Option<f64>) -> String {
    format!("{} {}", name(slo), value_text(slo, value))
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

/// The percentile sections and percentiles the SLOs need a run to compute, beyond those of
/// `metrics` and `percentiles`: `(missing metrics, missing percentiles)`.
pub fn missing_sections(slos: &[Threshold], metrics: &[Metric], percentiles: &[f64]) -> (Vec<Metric>, Vec<f64>) {
    let mut need_metrics: Vec<Metric> = Vec::new();
    let mut need_ps: Vec<f64> = Vec::new();
    for slo in slos {
        if let Some((stat, metric)) = slo.quantity.latency() {
            if !metrics.contains(&metric) && !need_metrics.contains(&metric) {
                need_metrics.push(metric);
            }
            if let Stat::Percentile(p) = stat
                && !percentiles.contains(&p)
                && !need_ps.contains(&p)
            {
                need_ps.push(p);
            }
        }
    }
    (need_metrics, need_ps)
}

/// Judges runs of one point on the mean of each SLO's value: one verdict per SLO, in order,
/// with the value and its words as the reason; a value missing from any run is missing (it
/// fails).
pub fn judge(slos: &[Threshold], summaries: &[&Summary]) -> Verdicts {
    let verdicts = slos
        .iter()
        .map(|slo| {
            let values: Option<Vec<f64>> = summaries.iter().map(|s| value(slo, s)).collect();
            let mean = values.filter(|v| !v.is_empty()).map(|v| v.iter().sum::<f64>() / v.len() as f64);
            let outcome = if met_by(slo, mean) { Outcome::Pass } else { Outcome::Fail };
            Verdict { threshold: slo.clone(), value: mean, outcome, reason: describe(slo, mean) }
        })
        .collect();
    Verdicts { verdicts }
}

/// `pass`, or `fails p99_ttft_ms, failed_pct`.
pub fn verdict_text(verdicts: &Verdicts) -> String {
    let failed: Vec<String> =
        verdicts.verdicts.iter().filter(|v| v.failed()).map(|v| v.threshold.quantity.key()).collect();
    if failed.is_empty() { "pass".into() } else { format!("fails {}", failed.join(", ")) }
}

/// `p99 TTFT 431 ms, p99 TPOT 38 ms`: every SLO's value.
pub fn values_text(verdicts: &Verdicts) -> String {
    verdicts.verdicts.iter().map(|v| v.reason.as_str()).collect::<Vec<_>>().join(", ")
}

/// The SLOs as a phrase: `p99_ttft_ms<=500 and p99_tpot_ms<=50`.
pub fn conjunction(slos: &[Threshold]) -> String {
    let texts: Vec<String> = slos.iter().map(Threshold::to_string).collect();
    match texts.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::MetricStats;

    use crate::threshold::parse_slos;

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
    fn runs_are_judged_on_the_mean_and_a_missing_value_fails() {
        let slos =
            parse_slos(&["p99_ttft_ms<=500,p90_ttft_ms<=380,failed_pct<=10,output_throughput>=250".into()]).unwrap();
        let (a, b) = (summary(20, 0, 400.0), summary(20, 0, 560.0));
        let checks = |v: &Verdicts| v.verdicts.iter().map(|v| (v.value, !v.failed())).collect::<Vec<_>>();
        let v = judge(&slos, &[&a, &b]);
        assert_eq!(checks(&v)[0], (Some(480.0), true));
        assert_eq!(checks(&v)[1], (Some(384.0), false));
        assert!(!v.passed());
        assert_eq!(verdict_text(&v), "fails p90_ttft_ms");
        assert_eq!(values_text(&v).split(", ").nth(1), Some("p90 TTFT 384 ms"));
        assert_eq!(values_text(&v).split(", ").nth(2), Some("failed 0.0 %"));
        let none = summary(0, 20, 1.0);
        let v = judge(&slos, &[&none]);
        assert_eq!(checks(&v)[0], (None, false));
        assert_eq!(checks(&v)[2], (Some(100.0), false));
        assert_eq!(values_text(&v).split(", ").next(), Some("p99 TTFT none"));
    }

    #[test]
    fn each_objective_s_value_is_written_in_its_own_unit() {
        let slos =
            parse_slos(&["input_sequence_throughput>=176,request_throughput>=1,probe_p99_e2el_ms<=9".into()]).unwrap();
        let texts: Vec<String> = slos.iter().zip([175.6, 2.0, 431.2]).map(|(s, v)| value_text(s, Some(v))).collect();
        assert_eq!(texts, ["175.6 inputs/s", "2.00 req/s", "431 ms"]);
    }

    #[test]
    fn per_gpu_and_per_user_objectives_read_what_the_run_knows() {
        let slos = parse_slos(&["interactivity>=50,output_throughput_per_gpu>=100".into()]).unwrap();
        let mut s = summary(20, 0, 400.0);
        s.metrics.push(MetricStats {
            metric: Metric::Tpot,
            mean_ms: 25.0,
            median_ms: 16.0,
            std_ms: None,
            percentiles: Vec::new(),
        });
        let v = judge(&slos, &[&s]);
        assert_eq!(v.verdicts[0].value, Some(62.5), "1000 / 16 ms");
        assert_eq!(v.verdicts[1].value, None, "no GPU count: the objective fails, as any missing value");
        assert_eq!(values_text(&v), "interactivity 62.5 tok/s/user, output throughput per GPU none");
        s.gpus = Some(2);
        let v = judge(&slos, &[&s]);
        assert_eq!((v.verdicts[1].value, v.passed()), (Some(150.0), true));
        assert_eq!(values_text(&v).split(", ").nth(1), Some("output throughput per GPU 150.0 tok/s/GPU"));
        let err = parse_slos(&["interactivity<=50".into()]).unwrap_err().to_string();
        assert!(err.contains("interactivity is bounded with >="), "{err}");
        let (m, _) = missing_sections(&slos, &[Metric::Ttft], &[]);
        assert_eq!(m, [Metric::Tpot], "interactivity needs TPOT's section");
    }

    #[test]
    fn missing_sections_are_the_metrics_and_percentiles_not_asked_for() {
        let slos = parse_slos(&["p90_e2el_ms<=5,p99_ttft_ms<=5,mean_tpot_ms<=1".into()]).unwrap();
        let (m, p) = missing_sections(&slos, &[Metric::Ttft, Metric::Tpot, Metric::Itl], &[99.0]);
        assert_eq!(m, [Metric::E2el]);
        assert_eq!(p, [90.0]);
    }
}
