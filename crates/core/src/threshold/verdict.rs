//! The outcome of holding a run (or a pair of runs) against thresholds.

use super::Threshold;

/// How one threshold fared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    /// Not checked: the runs lack what the threshold needs.
    Skip,
}

/// The outcome of one threshold, with the number it was judged on and why, in words.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub threshold: Threshold,
    /// The number held against the bound (the value, or the change for a change bound);
    /// `None` when there was none.
    pub value: Option<f64>,
    pub outcome: Outcome,
    /// Why, in words.
    pub reason: String,
}

impl Verdict {
    pub fn failed(&self) -> bool {
        self.outcome == Outcome::Fail
    }

    /// `FAIL`, `SKIP` or `pass`.
    pub fn word(&self) -> &'static str {
        match self.outcome {
            Outcome::Fail => "FAIL",
            Outcome::Skip => "SKIP",
            Outcome::Pass => "pass",
        }
    }
}

/// The verdicts of several thresholds, in their order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdicts {
    pub verdicts: Vec<Verdict>,
}

impl Verdicts {
    /// Whether any threshold failed.
    pub fn failed(&self) -> bool {
        self.verdicts.iter().any(Verdict::failed)
    }

    /// Whether none failed.
    pub fn passed(&self) -> bool {
        !self.failed()
    }

    /// One line per threshold: `FAIL p99_ttft_ms>+10%: ...`.
    pub fn text(&self) -> String {
        self.verdicts.iter().map(|v| format!("{} {}: {}\n", v.word(), v.threshold, v.reason)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threshold::{Bound, Op, Quantity};

    #[test]
    fn verdicts_fail_when_one_fails_and_print_a_line_each() {
        let t = Threshold { quantity: Quantity::FailedPct, op: Op::AtMost, bound: Bound::Value(1.0) };
        let v =
            |outcome, reason: &str| Verdict { threshold: t.clone(), value: Some(0.5), outcome, reason: reason.into() };
        let all = Verdicts { verdicts: vec![v(Outcome::Pass, "fine"), v(Outcome::Skip, "no runs")] };
        assert!(all.passed());
        assert_eq!(all.text(), "pass failed_pct<=1: fine\nSKIP failed_pct<=1: no runs\n");
        let all = Verdicts { verdicts: vec![v(Outcome::Fail, "too many")] };
        assert!(all.failed() && !all.passed());
    }
}
