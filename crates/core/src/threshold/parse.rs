//! The one reader of thresholds: splits `KEY OP BOUND` and reads each flag's part of it, with
//! that flag's spellings and error messages.
//!
//! - `--goodput METRIC:MS` (vLLM's): METRIC is `ttft`, `tpot` or `e2el`, MS a number of
//!   milliseconds, 0 or more; no spaces.
//! - `--fail-on KEY>CHANGE` or `KEY<CHANGE`, comma-separated: KEY one of
//!   [`Quantity::all`]; CHANGE is `[+|-]NUMBER[%]`, a rise after `>` and a fall after `<`
//!   (the sign may be left out); spaces allowed; the flag repeatable, each rule given once.
//! - `--slo KEY<=VALUE` for latencies (any percentile), the probes' (`probe_p99_e2el_ms`...)
//!   and `failed_pct`, `KEY>=VALUE` for the throughputs (`output_throughput`,
//!   `request_throughput`, `total_token_throughput`, a pooling run's
//!   `input_sequence_throughput`, the per-GPU ones) and `interactivity`; comma-separated,
//!   spaces allowed, each objective given once.

use thiserror::Error;

use super::{Bound, Op, Quantity, Threshold};
use crate::config::{Metric, Slo};

/// A threshold that cannot be read, with what to write instead.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ThresholdError {
    #[error(
        "--fail-on {item:?}: {why}; write rules as KEY>+N% or KEY<-N (for example p99_ttft_ms>+10%,output_throughput<-5%)"
    )]
    FailOn { item: String, why: String },
    /// The same on one run (`bench serve --fail-on`), whose rules are values.
    #[error(
        "--fail-on {item:?}: {why}; write rules as KEY>VALUE or KEY<VALUE (for example p99_ttft_ms>500,output_throughput<1000)"
    )]
    FailOnValue { item: String, why: String },
    #[error("invalid --slo {item:?}: {why}")]
    Slo { item: String, why: String },
    #[error("invalid --goodput {0}")]
    Goodput(String),
    /// One rule given twice (however written): its verdict would be printed twice.
    #[error("{flag} {rule:?} is given twice{again}; give it once")]
    Repeated { flag: &'static str, rule: String, again: String },
}

/// The operator between a key and its bound.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sym {
    Op(Op),
    /// `:`, vLLM's goodput separator.
    Colon,
}

/// Splits `text` at its first operator: `(key, operator, bound)`, untrimmed.
fn split(text: &str) -> Option<(&str, Sym, &str)> {
    let at = text.find(['<', '>', ':'])?;
    let rest = &text[at + 1..];
    let (sym, bound) = match (text.as_bytes()[at], rest.strip_prefix('=')) {
        (b'<', Some(after)) => (Sym::Op(Op::AtMost), after),
        (b'>', Some(after)) => (Sym::Op(Op::AtLeast), after),
        (b'<', None) => (Sym::Op(Op::Below), rest),
        (b'>', None) => (Sym::Op(Op::Above), rest),
        _ => (Sym::Colon, rest),
    };
    Some((&text[..at], sym, bound))
}

/// Reads one `--goodput` item: `ttft:500`.
pub fn parse_goodput(item: &str) -> Result<Slo, ThresholdError> {
    let err = |why: String| Err(ThresholdError::Goodput(why));
    let Some((k, Sym::Colon, v)) = split(item) else {
        return err(format!("{item:?}: use KEY:VALUE with a value in milliseconds, e.g. ttft:500"));
    };
    let metric = match k {
        "ttft" => Metric::Ttft,
        "tpot" => Metric::Tpot,
        "e2el" => Metric::E2el,
        _ => {
            return err(format!("metric {k:?}: the service level objective name should be one of ttft, tpot, e2el"));
        }
    };
    let Ok(max_ms) = v.parse::<f64>() else {
        return err(format!("value {v:?}: not a number"));
    };
    if max_ms.is_nan() || max_ms < 0.0 {
        return err(format!("value {item:?}: the service level objective must be non-negative"));
    }
    Ok(Slo { metric, max_ms })
}

/// The non-empty comma-separated items of a `--fail-on` text; a text with none is refused, so
/// that an empty flag cannot turn the gate off unseen.
fn fail_on_items(text: &str) -> Result<impl Iterator<Item = &str>, ThresholdError> {
    let mut items = text.split(',').filter(|r| !r.trim().is_empty()).peekable();
    if items.peek().is_none() {
        return Err(ThresholdError::FailOn { item: text.to_string(), why: "no rule given".into() });
    }
    Ok(items)
}

/// Reads every item of every `--fail-on` text (the flag repeated) with `read`, refusing a text
/// with no rule and a rule given twice.
fn read_fail_on<S: AsRef<str>>(
    texts: &[S],
    read: impl Fn(&str) -> Result<Threshold, ThresholdError>,
) -> Result<Vec<Threshold>, ThresholdError> {
    let mut rules = Rules::new("--fail-on");
    for text in texts {
        for item in fail_on_items(text.as_ref())? {
            rules.add(item, read(item)?)?;
        }
    }
    Ok(rules.into_rules())
}

/// The rules of one flag as they are read, each once: a rule given twice (however written)
/// would be judged and printed twice.
struct Rules<'a> {
    flag: &'static str,
    read: Vec<(&'a str, Threshold)>,
}

impl<'a> Rules<'a> {
    fn new(flag: &'static str) -> Self {
        Rules { flag, read: Vec::new() }
    }

    /// Adds `rule`, written `item`; refused when it was read before.
    fn add(&mut self, item: &'a str, rule: Threshold) -> Result<(), ThresholdError> {
        if let Some((first, _)) = self.read.iter().find(|(_, r)| *r == rule) {
            let (first, item) = (first.trim(), item.trim());
            let again = if first == item { String::new() } else { format!(" (again as {item:?})") };
            return Err(ThresholdError::Repeated { flag: self.flag, rule: first.to_string(), again });
        }
        self.read.push((item, rule));
        Ok(())
    }

    fn into_rules(self) -> Vec<Threshold> {
        self.read.into_iter().map(|(_, r)| r).collect()
    }
}

/// Reads `--fail-on` rules, each flag's text comma-separated.
pub fn parse_fail_on<S: AsRef<str>>(texts: &[S]) -> Result<Vec<Threshold>, ThresholdError> {
    read_fail_on(texts, parse_rule)
}

/// Reads `--fail-on` rules on one run (`bench serve`), each flag's text comma-separated:
/// `KEY>VALUE` or `KEY<VALUE`, a plain number in the key's unit (`p99_ttft_ms>500`,
/// `output_throughput<1000`, `failed_pct>1`). A change (`+N`, `-N`, `N%`) needs a baseline,
/// so it is refused here.
pub fn parse_fail_on_values<S: AsRef<str>>(texts: &[S]) -> Result<Vec<Threshold>, ThresholdError> {
    let value = |rule: &str| {
        let parts = rule_parts(rule)?;
        if parts.sign.is_some() || parts.percent {
            return Err(ThresholdError::FailOn {
                item: rule.trim().to_string(),
                why: "a single run has no baseline to change from: give a value (KEY>VALUE or KEY<VALUE), \
                      or compare two stored runs with `servebench compare A B --fail-on`"
                    .into(),
            });
        }
        Ok(Threshold { quantity: parts.quantity, op: parts.op, bound: Bound::Value(parts.size) })
    };
    read_fail_on(texts, value).map_err(|e| match e {
        ThresholdError::FailOn { item, why } => ThresholdError::FailOnValue { item, why },
        other => other,
    })
}

/// A `--fail-on` rule taken apart: `KEY OP [SIGN] SIZE [%]`.
struct RuleParts {
    quantity: Quantity,
    op: Op,
    sign: Option<f64>,
    size: f64,
    percent: bool,
}

fn rule_parts(text: &str) -> Result<RuleParts, ThresholdError> {
    let err = |why: String| ThresholdError::FailOn { item: text.trim().to_string(), why };
    let (key, op, bound) = match split(text) {
        Some((key, Sym::Op(op @ (Op::Above | Op::Below)), bound)) => (key, op, bound),
        _ => return Err(err("it needs exactly one of > and <".into())),
    };
    let key = key.trim();
    let quantity = Quantity::from_key(key).filter(|q| Quantity::all().contains(q)).ok_or_else(|| {
        let keys: Vec<String> = Quantity::all().iter().map(|q| q.key()).collect();
        err(format!("{key:?} is not a quantity; use one of {}", keys.join(", ")))
    })?;
    let mut change = bound.trim();
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
    Ok(RuleParts { quantity, op, sign, size, percent })
}

fn parse_rule(text: &str) -> Result<Threshold, ThresholdError> {
    let err = |why: String| ThresholdError::FailOn { item: text.trim().to_string(), why };
    let RuleParts { quantity, op, sign, size, percent } = rule_parts(text)?;
    let amount = match (op, sign) {
        (Op::Above, Some(s)) if s < 0.0 => return Err(err("`>` looks for a rise, so its change is +N".into())),
        (Op::Below, Some(s)) if s > 0.0 => return Err(err("`<` looks for a fall, so its change is -N".into())),
        (Op::Above, _) => size,
        _ => -size,
    };
    let bound = if percent { Bound::PercentChange(amount) } else { Bound::Change(amount) };
    Ok(Threshold { quantity, op, bound })
}

const SLO_GRAMMAR: &str = "use KEY<=VALUE for {mean,median,p99,pN}_{ttft,tpot,itl,e2el}_ms (milliseconds), \
     probe_{median,p99,max}_e2el_ms (with --probe-request-rate) and failed_pct, KEY>=VALUE for \
     output_throughput, request_throughput, total_token_throughput, input_sequence_throughput \
     (a pooling run's inputs/s), their per-GPU \
     output_throughput_per_gpu and total_token_throughput_per_gpu (runs that know their GPUs) and interactivity \
     (tok/s per user, 1000 / median TPOT), e.g. p99_ttft_ms<=500,p99_tpot_ms<=50 or interactivity>=50";

/// Reads `--slo` values, each a comma list; an objective given twice is refused.
pub fn parse_slos(items: &[String]) -> Result<Vec<Threshold>, ThresholdError> {
    let mut slos = Rules::new("--slo");
    for item in items {
        for one in item.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            slos.add(one, parse_slo(one)?)?;
        }
    }
    Ok(slos.into_rules())
}

/// Reads one objective: `p99_ttft_ms<=500`, `output_throughput>=1000`.
pub fn parse_slo(item: &str) -> Result<Threshold, ThresholdError> {
    let bad = |why: String| ThresholdError::Slo { item: item.to_string(), why };
    let (key, at_least, value) = match split(item) {
        Some((k, Sym::Op(Op::AtMost), v)) => (k, false, v),
        Some((k, Sym::Op(Op::AtLeast), v)) => (k, true, v),
        _ => return Err(bad(SLO_GRAMMAR.to_string())),
    };
    let key = key.trim();
    let quantity = Quantity::from_key(key)
        .filter(|q| {
            matches!(
                q,
                Quantity::Latency(..)
                    | Quantity::ProbeE2el(..)
                    | Quantity::FailedPct
                    | Quantity::OutputThroughput
                    | Quantity::RequestThroughput
                    | Quantity::InputThroughput
                    | Quantity::TotalTokenThroughput
                    | Quantity::OutputThroughputPerGpu
                    | Quantity::TotalTokenThroughputPerGpu
                    | Quantity::Interactivity
            )
        })
        .ok_or_else(|| bad(format!("unknown key {key:?}; {SLO_GRAMMAR}")))?;
    let limit: f64 = value.trim().parse().ok().filter(|v: &f64| v.is_finite() && *v >= 0.0).ok_or_else(|| {
        bad(format!("{:?} is not a number of {}", value.trim(), if at_least { "at least 0" } else { "0 or more" }))
    })?;
    let wants_at_least = quantity.higher_is_better();
    if at_least != wants_at_least {
        let op = if wants_at_least { ">=" } else { "<=" };
        return Err(bad(format!("{key} is bounded with {op} ({key}{op}{})", value.trim())));
    }
    let op = if at_least { Op::AtLeast } else { Op::AtMost };
    Ok(Threshold { quantity, op, bound: Bound::Value(limit) })
}

#[cfg(test)]
mod tests;
