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
//! verdict says so. A rule whose quantity one of the runs lacks is not checked.

use std::fmt;

use thiserror::Error;

use crate::bootstrap::Interval;
use crate::compare::PairStats;
use crate::quantity::Quantity;

/// Which way a rule looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// B above A.
    Rise,
    /// B below A.
    Fall,
}

/// One `--fail-on` rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub quantity: Quantity,
    pub op: Op,
    /// Signed: positive for a rise, negative for a fall.
    pub threshold: f64,
    /// The threshold is in percent of A.
    pub percent: bool,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            Op::Rise => '>',
            Op::Fall => '<',
        };
        let pct = if self.percent { "%" } else { "" };
        write!(f, "{}{op}{:+}{pct}", self.quantity.key(), self.threshold)
    }
}

/// A rule that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error(
    "--fail-on {rule:?}: {why}; write rules as KEY>+N% or KEY<-N (for example p99_ttft_ms>+10%,output_throughput<-5%)"
)]
pub struct RuleError {
    pub rule: String,
    pub why: String,
}

/// Reads comma-separated rules.
pub fn parse_rules(text: &str) -> Result<Vec<Rule>, RuleError> {
    text.split(',').filter(|r| !r.trim().is_empty()).map(parse_rule).collect()
}

fn parse_rule(text: &str) -> Result<Rule, RuleError> {
    let err = |why: String| RuleError { rule: text.trim().to_string(), why };
    let (at, op) = match (text.find('>'), text.find('<')) {
        (Some(i), None) => (i, Op::Rise),
        (None, Some(i)) => (i, Op::Fall),
        _ => return Err(err("it needs exactly one of > and <".into())),
    };
    let key = text[..at].trim();
    let quantity = Quantity::from_key(key).ok_or_else(|| {
        let keys: Vec<String> = Quantity::all().iter().map(|q| q.key()).collect();
        err(format!("{key:?} is not a quantity; use one of {}", keys.join(", ")))
    })?;
    let mut change = text[at + 1..].trim();
    let percent = change.ends_with('%');
    if percent {
        change = change[..change.len() - 1].trim_end();
    }
    let (sign, digits) = match change.as_bytes().first() {
        Some(b'+') => (Some(1.0), &change[1..]),
        Some(b'-') => (Some(-1.0), &change[1..]),
        _ => (None, change),
    };
    let size: f64 = digits
        .trim()
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| err(format!("{change:?} is not a number")))?;
    let threshold = match (op, sign) {
        (Op::Rise, Some(s)) if s < 0.0 => return Err(err("`>` looks for a rise, so its change is +N".into())),
        (Op::Fall, Some(s)) if s > 0.0 => return Err(err("`<` looks for a fall, so its change is -N".into())),
        (Op::Rise, _) => size,
        (Op::Fall, _) => -size,
    };
    Ok(Rule { quantity, op, threshold, percent })
}

/// The outcome of one rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub rule: Rule,
    /// The change in the rule's unit (percent or the quantity's unit); `None` when unchecked.
    pub change: Option<f64>,
    /// The 95 % interval of the difference B - A, in the quantity's unit, when there is one.
    pub ci: Option<Interval>,
    pub failed: bool,
    /// Why, in words.
    pub reason: String,
}

/// The outcome of every rule.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GateOutcome {
    pub verdicts: Vec<Verdict>,
}

impl GateOutcome {
    pub fn failed(&self) -> bool {
        self.verdicts.iter().any(|v| v.failed)
    }

    /// One line per rule: `FAIL p99_ttft_ms>+10%: ...`.
    pub fn text(&self) -> String {
        self.verdicts
            .iter()
            .map(|v| {
                let word = if v.failed {
                    "FAIL"
                } else if v.change.is_none() {
                    "SKIP"
                } else {
                    "pass"
                };
                format!("{word} {}: {}\n", v.rule, v.reason)
            })
            .collect()
    }
}

/// Checks `rules` on the comparison of two runs.
pub fn check(rules: &[Rule], pair: &PairStats) -> GateOutcome {
    GateOutcome { verdicts: rules.iter().map(|r| verdict(r, pair)).collect() }
}

fn verdict(rule: &Rule, pair: &PairStats) -> Verdict {
    let q = rule.quantity;
    let unchecked = |reason: String| Verdict { rule: rule.clone(), change: None, ci: None, failed: false, reason };
    let Some(row) = pair.row(q) else {
        return unchecked(format!("not checked: the runs do not both have a {}", q.name()));
    };
    let (Some(a), Some(b)) = (row.a, row.b) else {
        return unchecked(format!("not checked: the runs do not both have a {}", q.name()));
    };
    let change = if rule.percent {
        if a == 0.0 {
            return unchecked(format!("not checked: the baseline {} is 0, so a change in % is undefined", q.name()));
        }
        (b - a) / a * 100.0
    } else {
        b - a
    };
    let unit = if rule.percent { "%".to_string() } else { q.unit().to_string() };
    let shown = |x: f64| if unit.is_empty() { format!("{x:+.2}") } else { format!("{x:+.2} {unit}") };
    let passes = match rule.op {
        Op::Rise => change > rule.threshold,
        Op::Fall => change < rule.threshold,
    };
    let ci = row.estimate.map(|e| e.ci);
    let values = format!("{} -> {}", q.format_with_unit(a), q.format_with_unit(b));
    let (failed, reason) = match (passes, ci) {
        (false, _) => (false, format!("{values} ({}), within {}", shown(change), shown(rule.threshold))),
        (true, Some(ci)) => {
            let side = match rule.op {
                Op::Rise => ci.low > 0.0,
                Op::Fall => ci.high < 0.0,
            };
            let interval = format!("95 % CI of the difference {:+.2} to {:+.2} {}", ci.low, ci.high, q.unit());
            if side {
                (true, format!("{values} ({}), past {}; {interval} excludes 0", shown(change), shown(rule.threshold)))
            } else {
                (
                    false,
                    format!(
                        "{values} ({}) is past {} but {interval} includes 0: not a significant change",
                        shown(change),
                        shown(rule.threshold)
                    ),
                )
            }
        }
        (true, None) => (
            true,
            format!(
                "{values} ({}), past {}; no confidence interval (summaries only), so the threshold alone decides",
                shown(change),
                shown(rule.threshold)
            ),
        ),
    };
    Verdict { rule: rule.clone(), change: Some(change), ci, failed, reason }
}

#[cfg(test)]
mod tests {
    use servebench_core::config::Metric;

    use super::*;
    use crate::quantity::Stat;

    fn rule(q: Quantity, op: Op, threshold: f64, percent: bool) -> Rule {
        Rule { quantity: q, op, threshold, percent }
    }

    #[test]
    fn rules_read_with_signs_percent_and_spaces() {
        let ttft = Quantity::Latency(Stat::P99, Metric::Ttft);
        let tpot = Quantity::Latency(Stat::Median, Metric::Tpot);
        assert_eq!(
            parse_rules("p99_ttft_ms>+10%,median_tpot_ms>5%").unwrap(),
            [rule(ttft, Op::Rise, 10.0, true), rule(tpot, Op::Rise, 5.0, true)]
        );
        assert_eq!(
            parse_rules(" output_throughput < -5 % , median_tpot_ms>2").unwrap(),
            [rule(Quantity::OutputThroughput, Op::Fall, -5.0, true), rule(tpot, Op::Rise, 2.0, false)]
        );
        assert_eq!(parse_rules("output_throughput<5").unwrap()[0].threshold, -5.0);
        assert_eq!(parse_rules("p99_ttft_ms>+10%").unwrap()[0].to_string(), "p99_ttft_ms>+10%");
        assert_eq!(parse_rules("output_throughput<5%").unwrap()[0].to_string(), "output_throughput<-5%");
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        let why = |s: &str| parse_rules(s).unwrap_err().why;
        assert!(why("p99_ttft>+10%").contains("is not a quantity; use one of completed"), "{}", why("p99_ttft>+10%"));
        assert!(why("p99_ttft_ms>-10%").contains("`>` looks for a rise"));
        assert!(why("output_throughput<+10%").contains("`<` looks for a fall"));
        assert!(why("p99_ttft_ms=10%").contains("exactly one of > and <"));
        assert!(why("p99_ttft_ms>ten%").contains("\"ten\" is not a number"));
        let err = parse_rules("p99_ttft_ms>x").unwrap_err().to_string();
        assert!(err.starts_with("--fail-on \"p99_ttft_ms>x\": "), "{err}");
    }
}
