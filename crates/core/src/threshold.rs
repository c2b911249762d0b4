//! One language for "a number of a run against a threshold", shared by `--goodput`,
//! `--fail-on` and `sweep --slo`, with the one [`Verdict`] their checks give.
//!
//! ```text
//! THRESHOLD = KEY OP BOUND
//! KEY       = STAT "_" LATENCY "_ms"        STAT: mean | median | pN (N from 0 to 100)
//!           | completed | failed | failed_pct | request_throughput | output_throughput
//!           | total_token_throughput | peak_concurrency
//! OP        = "<=" | ">=" | "<" | ">" | ":"
//! BOUND     = NUMBER                       a value in the key's unit
//!           | ( "+" | "-" ) NUMBER [ "%" ] a change from a baseline, relative with `%`
//! ```
//!
//! Each flag reads the part of the language it has a meaning for (see `parse.rs`):
//! `--goodput` vLLM's `METRIC:MS` (each request's latency at most MS), `compare --fail-on` a
//! change with `>` or `<`, `bench serve --fail-on` a value with `>` or `<`, `--slo` a value with `<=` (latencies, `failed_pct`) or `>=` (throughputs).

mod parse;
mod quantity;
pub mod slo;
mod verdict;

use std::fmt;

pub use parse::{ThresholdError, parse_fail_on, parse_fail_on_values, parse_goodput, parse_slo, parse_slos};
pub use quantity::{LATENCIES, PROBE_STATS, Quantity, Stat, failed_pct, metric_name, number_text, probe_stat};
pub use verdict::{Outcome, Verdict, Verdicts};

/// How a number is held against a bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `<=`
    AtMost,
    /// `>=`
    AtLeast,
    /// `>`: above the bound (for a change, a rise past it).
    Above,
    /// `<`: below the bound (for a change, a fall past it).
    Below,
}

impl Op {
    pub fn symbol(self) -> &'static str {
        match self {
            Op::AtMost => "<=",
            Op::AtLeast => ">=",
            Op::Above => ">",
            Op::Below => "<",
        }
    }

    /// Whether `value OP bound` holds.
    pub fn holds(self, value: f64, bound: f64) -> bool {
        match self {
            Op::AtMost => value <= bound,
            Op::AtLeast => value >= bound,
            Op::Above => value > bound,
            Op::Below => value < bound,
        }
    }
}

/// What a number is held against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    /// A value in the quantity's unit.
    Value(f64),
    /// A change from a baseline in the quantity's unit, signed (positive for a rise).
    Change(f64),
    /// A change from a baseline in percent of it, signed.
    PercentChange(f64),
}

impl Bound {
    /// The number, whatever its kind.
    pub fn amount(self) -> f64 {
        match self {
            Bound::Value(x) | Bound::Change(x) | Bound::PercentChange(x) => x,
        }
    }
}

/// One threshold: a quantity, a comparison and a bound. Whether holding it is good (an
/// objective) or bad (a regression rule) is up to the flag that reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub quantity: Quantity,
    pub op: Op,
    pub bound: Bound,
}

impl Threshold {
    /// Whether `value` (the quantity's value, or its change for a change bound) holds.
    pub fn holds(&self, value: f64) -> bool {
        self.op.holds(value, self.bound.amount())
    }
}

/// As it is written: `p99_ttft_ms<=500`, `p99_ttft_ms>+10%`, `output_throughput<-5`.
impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.quantity.key(), self.op.symbol())?;
        match self.bound {
            Bound::Value(x) => write!(f, "{}", number_text(x)),
            Bound::Change(x) => write!(f, "{x:+}"),
            Bound::PercentChange(x) => write!(f, "{x:+}%"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Metric;

    #[test]
    fn thresholds_print_as_written_and_hold_as_their_op_says() {
        let slo = Threshold {
            quantity: Quantity::Latency(Stat::Percentile(99.9), Metric::E2el),
            op: Op::AtMost,
            bound: Bound::Value(2000.0),
        };
        assert_eq!(slo.to_string(), "p99.9_e2el_ms<=2000");
        assert!(slo.holds(2000.0) && !slo.holds(2000.5));
        let rule = Threshold { quantity: Quantity::OutputThroughput, op: Op::Below, bound: Bound::PercentChange(-5.0) };
        assert_eq!(rule.to_string(), "output_throughput<-5%");
        assert!(rule.holds(-6.0) && !rule.holds(-5.0));
        assert_eq!(Bound::Change(2.5).amount(), 2.5);
    }
}
