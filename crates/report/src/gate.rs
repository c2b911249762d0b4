//! `--fail-on`: regression rules for CI, checked on the comparison of two runs.
//!
//! ```text
//! RULES  = RULE { "," RULE }
//! RULE   = KEY OP CHANGE
//! OP     = ">"                  the candidate (B) rose above the baseline (A) by more than CHANGE
//!        | "<"                  B fell below A by more than CHANGE
//! CHANGE = [ "+" | "-" ] NUMBER [ "%" ]
//! ```
//!
//! The rules are thresholds of [`servebench_core::threshold`], read by its `parse_fail_on`.
//! `KEY` is a quantity key: `{mean,median,p99}_{ttft,tpot,itl,e2el}_ms`, `output_throughput`,
//! `request_throughput`, `total_token_throughput`, `completed`, `failed`, `failed_pct` or
//! `peak_concurrency`. `CHANGE` with `%` is relative to A; without it, it is in the key's unit
//! (ms, tok/s, req/s, requests, percentage points). A rise is written `+N` or `N`, a fall `-N`
//! or, after `<`, `N`. Spaces are allowed; rules may also be given in several `--fail-on` flags.
//!
//! Examples: `p99_ttft_ms>+10%`, `median_tpot_ms>+5%`, `output_throughput<-5%`,
//! `median_itl_ms>2`, `failed_pct>1`.
//!
//! A rule **fails** when the change passes the threshold **and** the 95 % interval of the
//! difference lies wholly on the side of the change (above zero for `>`, below for `<`).
//! Where there is no interval (a run without per-request records, or a quantity without a
//! per-request distribution such as a throughput), the threshold alone decides, and the
//! verdict says so. A rule whose quantity one of the runs lacks is not checked, but for a
//! latency rule whose candidate (B) completed no request while A did: that fails. A change in
//! % from a baseline of 0 is 0 when B is 0 too, else past any threshold (`failed>+10%` fails
//! when A failed no request and B failed some).
//!
//! On one run (`bench serve --fail-on`, read by `parse_fail_on_values`) a rule is a value:
//! `p99_ttft_ms>500` fails when the run's P99 TTFT is above 500 ms ([`check_run`]).

use servebench_core::threshold::{Bound, Op, Outcome, Threshold, Verdict, Verdicts};

use servebench_core::metrics::Summary;

use crate::compare::PairStats;

/// Checks `rules` (thresholds with a change bound, as `parse_fail_on` reads them) on the
/// comparison of two runs: a rule that holds fails.
pub fn check(rules: &[Threshold], pair: &PairStats) -> Verdicts {
    Verdicts { verdicts: rules.iter().map(|r| verdict(r, pair)).collect() }
}

fn verdict(rule: &Threshold, pair: &PairStats) -> Verdict {
    let q = rule.quantity;
    let unchecked = |reason: String| Verdict { threshold: rule.clone(), value: None, outcome: Outcome::Skip, reason };
    if q.latency().is_some() && pair.completed.1 == 0 && pair.completed.0 > 0 {
        // The candidate has no latency to judge because nothing it sent succeeded: a gate
        // must not read that as an improvement.
        return Verdict {
            threshold: rule.clone(),
            value: None,
            outcome: Outcome::Fail,
            reason: format!("run B completed no request, so it has no {}: fails", q.name()),
        };
    }
    let Some(row) = pair.judged(q) else {
        return unchecked(format!("not checked: the runs do not both have {}", with_article(&q.name())));
    };
    let (Some(a), Some(b)) = (row.a, row.b) else {
        return unchecked(format!("not checked: the runs do not both have {}", with_article(&q.name())));
    };
    let percent = matches!(rule.bound, Bound::PercentChange(_));
    let change = if percent {
        // From a baseline of 0 no change in % is finite: any rise (0 failures -> 3) passes
        // every `>` threshold, and a gate must not skip it.
        if a == 0.0 { if b == 0.0 { 0.0 } else { f64::INFINITY.copysign(b) } } else { (b - a) / a * 100.0 }
    } else {
        b - a
    };
    let threshold = rule.bound.amount();
    let unit = if percent { "%".to_string() } else { q.unit().to_string() };
    let shown = |x: f64| if unit.is_empty() { format!("{x:+.2}") } else { format!("{x:+.2} {unit}") };
    let passes = rule.holds(change);
    let ci = row.estimate.map(|e| e.ci);
    let values = format!("{} -> {}", q.format_with_unit(a), q.format_with_unit(b));
    let (failed, reason) = match (passes, ci) {
        (false, _) => (false, format!("{values} ({}), within {}", shown(change), shown(threshold))),
        (true, Some(ci)) => {
            let side = match rule.op {
                Op::Above | Op::AtLeast => ci.low > 0.0,
                Op::Below | Op::AtMost => ci.high < 0.0,
            };
            let interval = format!("95 % CI of the difference {:+.2} to {:+.2} {}", ci.low, ci.high, q.unit());
            if side {
                (true, format!("{values} ({}), past {}; {interval} excludes 0", shown(change), shown(threshold)))
            } else {
                (
                    false,
                    format!(
                        "{values} ({}) is past {} but {interval} includes 0: not a significant change",
                        shown(change),
                        shown(threshold)
                    ),
                )
            }
        }
        (true, None) => (
            true,
            format!(
                "{values} ({}), past {}; no confidence interval (summaries only), so the threshold alone decides",
                shown(change),
                shown(threshold)
            ),
        ),
    };
    let outcome = if failed { Outcome::Fail } else { Outcome::Pass };
    Verdict { threshold: rule.clone(), value: Some(change), outcome, reason }
}

/// Checks value `rules` (`parse_fail_on_values`) on one run's summary: a rule that holds
/// fails; a rule whose quantity the run lacks (a latency with no successful request, a
/// section not computed) is not checked.
pub fn check_run(rules: &[Threshold], summary: &Summary) -> Verdicts {
    let verdicts = rules
        .iter()
        .map(|rule| {
            let q = rule.quantity;
            let Some(v) = q.value(summary) else {
                let reason = format!("not checked: the run has no {}", q.name());
                return Verdict { threshold: rule.clone(), value: None, outcome: Outcome::Skip, reason };
            };
            let bound = q.format_with_unit(rule.bound.amount());
            let (outcome, side) = if rule.holds(v) { (Outcome::Fail, "past") } else { (Outcome::Pass, "within") };
            let reason = format!("{} {side} {bound}", q.format_with_unit(v));
            Verdict { threshold: rule.clone(), value: Some(v), outcome, reason }
        })
        .collect();
    Verdicts { verdicts }
}

/// `a median TTFT`, `an interactivity`.
fn with_article(name: &str) -> String {
    let vowel = name.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {name}", if vowel { "an" } else { "a" })
}

#[cfg(test)]
mod tests {
    use servebench_core::config::Metric;
    use servebench_core::metrics::MetricStats;
    use servebench_core::threshold::parse_fail_on_values;

    use super::*;

    #[test]
    fn a_rule_on_one_run_fails_when_its_value_is_past_the_bound() {
        let ttft = MetricStats {
            metric: Metric::Ttft,
            mean_ms: 300.0,
            median_ms: 280.0,
            std_ms: None,
            percentiles: vec![(99.0, 612.5)],
        };
        let s = Summary {
            completed: 98,
            failed: Some(2),
            output_throughput: Some(1500.0),
            metrics: vec![ttft],
            ..Summary::default()
        };
        let rules =
            parse_fail_on_values(&["p99_ttft_ms>500,output_throughput<1000,failed_pct>5,p99_itl_ms>10"]).unwrap();
        let v = check_run(&rules, &s);
        let outcomes: Vec<Outcome> = v.verdicts.iter().map(|v| v.outcome).collect();
        assert_eq!(outcomes, [Outcome::Fail, Outcome::Pass, Outcome::Pass, Outcome::Skip]);
        assert!(v.failed());
        assert_eq!(
            v.text(),
            "FAIL p99_ttft_ms>500: 612.50 ms past 500.00 ms\n\
             pass output_throughput<1000: 1500.00 tok/s within 1000.00 tok/s\n\
             pass failed_pct>5: 2.00 % within 5.00 %\n\
             SKIP p99_itl_ms>10: not checked: the run has no p99 ITL\n"
        );
        let none_ok = Summary { completed: 0, failed: Some(3), ..s };
        assert_eq!(check_run(&rules[..1], &none_ok).verdicts[0].outcome, Outcome::Skip);
    }
}
