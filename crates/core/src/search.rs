//! The SLO search of `sweep --search` as a pure state machine: which value to probe next,
//! given the verdicts so far.
//!
//! It probes `min`, then doubles the highest passing value until a probe fails or `max` is
//! reached (bracketing), then bisects between the highest pass and the lowest fail until they
//! are within the tolerance (whole numbers for a concurrency: until they are neighbours).
//! Probes are full runs, so noise can make a value pass above one that failed; the search
//! then trusts the lowest failure, and [`Answer::passed_above`] says what passed above it.

use crate::threshold::number_text;

/// How close the highest pass and the lowest fail must come.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tolerance {
    /// In the setting's unit.
    Absolute(f64),
    /// A fraction of the passing value.
    Relative(f64),
}

impl Tolerance {
    /// `2`, `0.5` or `5%`.
    pub fn parse(s: &str) -> Result<Tolerance, String> {
        let t = s.trim();
        let bad = || format!("invalid --search-tolerance {s:?}: use a number (2, 0.5) or a percentage (5%)");
        match t.strip_suffix('%') {
            Some(p) => {
                let p: f64 = p.trim().parse().map_err(|_| bad())?;
                if p > 0.0 && p < 100.0 { Ok(Tolerance::Relative(p / 100.0)) } else { Err(bad()) }
            }
            None => {
                let v: f64 = t.parse().map_err(|_| bad())?;
                if v > 0.0 && v.is_finite() { Ok(Tolerance::Absolute(v)) } else { Err(bad()) }
            }
        }
    }

    fn width(self, at: f64) -> f64 {
        match self {
            Tolerance::Absolute(v) => v,
            Tolerance::Relative(f) => f * at,
        }
    }
}

/// A search in progress: its bounds and the probes so far.
#[derive(Clone, Debug, PartialEq)]
pub struct Search {
    /// Whole numbers only (a concurrency).
    pub integer: bool,
    pub min: f64,
    pub max: f64,
    pub tolerance: Tolerance,
    /// `(value, passed)` in the order probed.
    pub probes: Vec<(f64, bool)>,
}

/// What a search found.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The highest value that passed below the lowest failure; `None` when `min` failed.
    pub best: Option<f64>,
    /// The lowest value that failed; `None` when every probe passed.
    pub lowest_fail: Option<f64>,
    /// The best is `max`: higher values were not tried.
    pub at_max: bool,
    /// Values that passed above the lowest failure (noise, or a non-monotonic server).
    pub passed_above: Vec<f64>,
}

/// The most concurrent requests a `max-concurrency` search may probe.
pub const MAX_CONCURRENCY_SEARCHED: f64 = 1_000_000.0;

/// The highest request rate (a second) a `request-rate` search may probe.
pub const MAX_RATE_SEARCHED: f64 = 1_000_000.0;

impl Search {
    /// Bounds a search's `max` to loads a run can really offer, so that every value it probes
    /// and reports is the one that ran (a float holds every whole number up to 2^53 exactly).
    pub fn new(integer: bool, min: f64, max: f64, tolerance: Tolerance) -> Result<Search, String> {
        if !(min > 0.0 && min.is_finite()) {
            return Err(format!("--search-min must be greater than 0, got {}", number_text(min)));
        }
        if !max.is_finite() {
            return Err(format!("--search-max must be a finite number, got {}", number_text(max)));
        }
        let ceiling = if integer { MAX_CONCURRENCY_SEARCHED } else { MAX_RATE_SEARCHED };
        if max > ceiling {
            return Err(format!(
                "--search-max {} is beyond any load a run can offer; give at most {}",
                number_text(max),
                number_text(ceiling)
            ));
        }
        if max < min {
            return Err(format!(
                "--search-max must be at least --search-min ({}), got {}",
                number_text(min),
                number_text(max)
            ));
        }
        if integer && (min.fract() != 0.0 || max.fract() != 0.0) {
            return Err("a max-concurrency search takes whole numbers for --search-min and --search-max".into());
        }
        Ok(Search { integer, min, max, tolerance, probes: Vec::new() })
    }

    /// Records the verdict of the probe at `value`.
    pub fn record(&mut self, value: f64, passed: bool) {
        self.probes.push((value, passed));
    }

    pub fn answer(&self) -> Answer {
        let lowest_fail = self.probes.iter().filter(|(_, ok)| !ok).map(|(v, _)| *v).reduce(f64::min);
        let below = |v: f64| lowest_fail.is_none_or(|f| v < f);
        let best = self.probes.iter().filter(|(v, ok)| *ok && below(*v)).map(|(v, _)| *v).reduce(f64::max);
        let mut passed_above: Vec<f64> =
            self.probes.iter().filter(|(v, ok)| *ok && !below(*v)).map(|(v, _)| *v).collect();
        passed_above.sort_by(f64::total_cmp);
        Answer { best, lowest_fail, at_max: best == Some(self.max), passed_above }
    }

    /// The next value to probe; `None` when the search is done.
    pub fn next(&self) -> Option<f64> {
        if self.probes.is_empty() {
            return Some(self.min);
        }
        let answer = self.answer();
        let best = answer.best?;
        let next = match answer.lowest_fail {
            None => {
                if best >= self.max {
                    return None;
                }
                let doubled = if self.integer { (best * 2.0).max(best + 1.0) } else { self.round(best * 2.0) };
                doubled.min(self.max)
            }
            Some(fail) => {
                if fail - best <= self.tolerance.width(best) {
                    return None;
                }
                let mid = (best + fail) / 2.0;
                if self.integer { mid.floor() } else { self.round(mid) }
            }
        };
        let fresh = next > best && answer.lowest_fail.is_none_or(|f| next < f);
        (fresh && !self.probes.iter().any(|(v, _)| *v == next)).then_some(next)
    }

    /// A rate to 4 significant digits, so labels stay readable (0.3 doubled is 0.6, not
    /// 0.6000000000000001).
    fn round(&self, x: f64) -> f64 {
        if x <= 0.0 {
            return x;
        }
        let scale = 10f64.powi(3 - x.log10().floor() as i32);
        (x * scale).round() / scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search against a verdict function; returns the probes and the answer.
    fn run(mut s: Search, pass: impl Fn(f64) -> bool) -> (Vec<f64>, Answer) {
        let mut probed = Vec::new();
        while let Some(x) = s.next() {
            assert!(probed.len() < 64, "the search does not end: {probed:?}");
            probed.push(x);
            s.record(x, pass(x));
        }
        (probed, s.answer())
    }

    #[test]
    fn concurrency_doubles_then_bisects_to_neighbours() {
        let s = Search::new(true, 1.0, 4096.0, Tolerance::Absolute(1.0)).unwrap();
        let (probed, answer) = run(s, |c| c <= 48.0);
        assert_eq!(probed, [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 48.0, 56.0, 52.0, 50.0, 49.0]);
        assert_eq!(answer.best, Some(48.0));
        assert_eq!(answer.lowest_fail, Some(49.0));
        assert!(!answer.at_max && answer.passed_above.is_empty());
    }

    #[test]
    fn a_failing_minimum_and_a_passing_maximum_end_the_search() {
        let s = Search::new(true, 4.0, 64.0, Tolerance::Absolute(1.0)).unwrap();
        let (probed, answer) = run(s.clone(), |_| false);
        assert_eq!(probed, [4.0]);
        assert_eq!((answer.best, answer.lowest_fail), (None, Some(4.0)));
        let (probed, answer) = run(s, |_| true);
        assert_eq!(probed, [4.0, 8.0, 16.0, 32.0, 64.0]);
        assert_eq!(answer.best, Some(64.0));
        assert!(answer.at_max);
    }

    #[test]
    fn rates_stop_within_a_relative_tolerance_and_stay_readable() {
        let s = Search::new(false, 0.3, 1024.0, Tolerance::parse("5%").unwrap()).unwrap();
        let (probed, answer) = run(s, |r| r <= 7.0);
        assert_eq!(&probed[..6], [0.3, 0.6, 1.2, 2.4, 4.8, 9.6]);
        let best = answer.best.unwrap();
        let fail = answer.lowest_fail.unwrap();
        assert!(best <= 7.0 && fail > 7.0 && fail - best <= 0.05 * best, "{best} {fail} {probed:?}");
        assert!(probed.iter().all(|p| number_text(*p).len() <= 6), "{probed:?}");
    }

    #[test]
    fn noise_is_reported_and_the_lowest_failure_is_trusted() {
        let mut s = Search::new(true, 1.0, 64.0, Tolerance::Absolute(1.0)).unwrap();
        for (v, ok) in [(1.0, true), (2.0, true), (4.0, false), (3.0, true)] {
            s.record(v, ok);
        }
        assert_eq!(s.next(), None);
        s.record(8.0, true);
        let a = s.answer();
        assert_eq!((a.best, a.lowest_fail, a.passed_above), (Some(3.0), Some(4.0), vec![8.0]));
    }

    #[test]
    fn bounds_and_tolerances_are_checked() {
        assert!(Search::new(true, 0.0, 8.0, Tolerance::Absolute(1.0)).is_err());
        assert!(Search::new(true, 8.0, 4.0, Tolerance::Absolute(1.0)).is_err());
        assert!(Search::new(true, 1.5, 4.0, Tolerance::Absolute(1.0)).is_err());
        let huge = Search::new(true, 1.0, 18446744073709551615.0, Tolerance::Absolute(1.0)).unwrap_err();
        assert!(huge.contains("give at most 1000000"), "{huge}");
        assert!(Search::new(false, 1.0, 1e300, Tolerance::Relative(0.05)).is_err());
        let inf = Search::new(false, 1.0, f64::INFINITY, Tolerance::Relative(0.05)).unwrap_err();
        assert!(inf.contains("finite"), "{inf}");
        assert!(Search::new(true, 1.0, MAX_CONCURRENCY_SEARCHED, Tolerance::Absolute(1.0)).is_ok());
        assert_eq!(Tolerance::parse("2").unwrap(), Tolerance::Absolute(2.0));
        assert_eq!(Tolerance::parse("5%").unwrap(), Tolerance::Relative(0.05));
        assert!(Tolerance::parse("-1").is_err());
        assert!(Tolerance::parse("x%").is_err());
    }
}
