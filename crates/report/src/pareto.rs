//! The trade a serving deployment makes between what it gives and what each user sees,
//! against interactivity (tokens per second per user, 1000 / median TPOT), as InferenceX
//! charts it: output tokens per second per GPU (more is better), or what a million output
//! tokens cost (less is better; only runs that know their GPUs' price). A run is on the
//! **Pareto frontier** when no other run is at least as good on both axes and better on one;
//! the frontier says which deployment wins at which interactivity.

use std::fmt::Write as _;

use servebench_store::StoredRun;

use crate::compare::ranges;
use crate::layout::Layout;
use crate::quantity::Quantity;

/// The x of every trade: tokens per second per user.
pub const PER_USER: Quantity = Quantity::Interactivity;

/// What interactivity is traded against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trade {
    /// Output tokens per second per GPU: runs that know their GPU count.
    PerGpu,
    /// Cost per million output tokens: runs that know their GPU count and its price.
    Cost,
}

/// A run on a trade's plane.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// The run's index among the compared runs.
    pub index: usize,
    /// Tokens per second per user.
    pub user: f64,
    /// The trade's other value: tok/s per GPU, or $ per million output tokens.
    pub y: f64,
}

impl Trade {
    /// The y of the trade.
    pub fn y(self) -> Quantity {
        match self {
            Trade::PerGpu => Quantity::OutputThroughputPerGpu,
            Trade::Cost => Quantity::CostPerMillionOutput,
        }
    }

    /// Whether `a` is a better y than `b`.
    fn better(self, a: f64, b: f64) -> bool {
        if self.y().higher_is_better() { a > b } else { a < b }
    }

    /// Whether `p` is at least as good as `q` on both axes and better on one.
    pub fn dominates(self, p: &Point, q: &Point) -> bool {
        p.user >= q.user && !self.better(q.y, p.y) && (p.user > q.user || self.better(p.y, q.y))
    }

    /// The runs that have both numbers, in the order given.
    pub fn points(self, runs: &[StoredRun]) -> Vec<Point> {
        runs.iter()
            .enumerate()
            .filter_map(|(index, r)| {
                let (user, y) = (PER_USER.value(&r.summary)?, self.y().value(&r.summary)?);
                (user.is_finite() && y.is_finite()).then_some(Point { index, user, y })
            })
            .collect()
    }

    /// The points no other point dominates, by interactivity ascending (so the y worsening
    /// toward the right). Of points equal in both, the first is kept.
    pub fn frontier(self, points: &[Point]) -> Vec<Point> {
        let mut sorted = points.to_vec();
        // Most interactive first; among equals the best y, then the given order.
        sorted.sort_by(|a, b| {
            let by_y = if self.better(a.y, b.y) {
                std::cmp::Ordering::Less
            } else if self.better(b.y, a.y) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            };
            b.user.total_cmp(&a.user).then(by_y).then(a.index.cmp(&b.index))
        });
        let mut out: Vec<Point> = Vec::new();
        for p in sorted {
            // Every point kept so far is at least as interactive: `p` survives only by a
            // better y than all of them.
            if out.iter().all(|q| self.better(p.y, q.y)) {
                out.push(p);
            }
        }
        out.reverse();
        out
    }

    /// A y as a finding writes it.
    fn y_text(self, v: f64) -> String {
        match self {
            Trade::PerGpu => format!("{v:.1}"),
            Trade::Cost => format!("${v:.2}"),
        }
    }

    /// One sentence naming the frontier, most interactive first, as stretches of one owner
    /// each, and how many runs it leaves behind; `None` with fewer than two runs on the plane.
    pub fn finding(self, runs: &[StoredRun], layout: &Layout) -> Option<String> {
        let all = self.points(runs);
        if all.len() < 2 {
            return None;
        }
        let mut on = self.frontier(&all);
        on.reverse();
        let mut stretches: Vec<(String, Vec<Point>)> = Vec::new();
        for p in on.iter().copied() {
            let name = owner(layout, p.index);
            match stretches.last_mut() {
                Some((last, members)) if *last == name => members.push(p),
                _ => stretches.push((name, vec![p])),
            }
        }
        let unit = match self {
            Trade::PerGpu => " tok/s/GPU",
            Trade::Cost => "/Mtok",
        };
        let parts: Vec<String> = stretches
            .iter()
            .map(|(name, members)| {
                let first = members[0];
                let last = members[members.len() - 1];
                let mut ids: Vec<i64> = members.iter().map(|p| runs[p.index].row.id).collect();
                ids.sort_unstable();
                let mut text = if name.is_empty() { String::new() } else { format!("{name} ") };
                if members.len() == 1 {
                    let _ =
                        write!(text, "at {:.1} tok/s/user ({}{unit}; #{})", first.user, self.y_text(first.y), ids[0]);
                } else {
                    let _ = write!(
                        text,
                        "from {:.1} to {:.1} tok/s/user ({} to {}{unit}; #{})",
                        first.user,
                        last.user,
                        self.y_text(first.y),
                        self.y_text(last.y),
                        ranges(&ids).replace(", ", ", #")
                    );
                }
                text
            })
            .collect();
        let behind = all.len() - on.len();
        let rest = match (self, behind) {
            (_, 0) => " Every run is on it.".to_string(),
            (Trade::PerGpu, 1) => " The other run gives less of both than one on it.".to_string(),
            (Trade::PerGpu, n) => format!(" The other {n} runs each give less of both than one on it."),
            (Trade::Cost, 1) => {
                " The other run costs at least as much for no more tok/s per user than one on it.".to_string()
            }
            (Trade::Cost, n) => {
                format!(" The other {n} runs each cost at least as much for no more tok/s per user than one on it.")
            }
        };
        let lead = match self {
            Trade::PerGpu => "Pareto frontier of output tok/s per GPU against tok/s per user".to_string(),
            Trade::Cost => format!("Cheapest per million output tokens {}", price_text(runs, &all)),
        };
        Some(format!("{lead}, most interactive first: {}.{rest}", parts.join("; then ")))
    }
}

/// The GPU-hour price the costed runs share (`at $2.49 per GPU-hour`), or that each has its own.
fn price_text(runs: &[StoredRun], points: &[Point]) -> String {
    let mut prices: Vec<f64> = points.iter().filter_map(|p| runs[p.index].summary.gpu_hour_cost).collect();
    prices.sort_by(f64::total_cmp);
    prices.dedup();
    match prices.as_slice() {
        [one] => format!("at ${one} per GPU-hour"),
        _ => "at each run's own GPU-hour price".to_string(),
    }
}

/// The name a run goes by on the frontier: its series in a sweep, else its own name.
pub fn owner(layout: &Layout, index: usize) -> String {
    layout
        .sweep
        .as_ref()
        .and_then(|s| s.series.iter().find(|s| s.points.iter().any(|&(_, i)| i == index)))
        .map_or_else(|| layout.names[index].clone(), |s| s.name.clone())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn p(index: usize, user: f64, y: f64) -> Point {
        Point { index, user, y }
    }

    #[test]
    fn the_frontier_keeps_what_nothing_beats_on_both() {
        let pts = [p(0, 100.0, 500.0), p(1, 50.0, 900.0), p(2, 60.0, 400.0), p(3, 20.0, 900.0), p(4, 100.0, 500.0)];
        // 2 is beaten by 0; 3 by 1 (as much per GPU, less per user); 4 equals 0 and comes later.
        assert_eq!(Trade::PerGpu.frontier(&pts), [p(1, 50.0, 900.0), p(0, 100.0, 500.0)]);
        assert!(Trade::PerGpu.frontier(&[]).is_empty());
        assert_eq!(Trade::PerGpu.frontier(&[p(7, 1.0, 1.0)]), [p(7, 1.0, 1.0)]);
    }

    #[test]
    fn the_cost_frontier_keeps_the_cheapest_at_each_interactivity() {
        // Dollars per million tokens: 0 is cheapest at 100 tok/s/user, 1 at 50; 2 costs more
        // than 0 at less per user; 3 costs as much as 1 at less per user.
        let pts = [p(0, 100.0, 1.5), p(1, 50.0, 0.4), p(2, 60.0, 2.0), p(3, 20.0, 0.4)];
        assert_eq!(Trade::Cost.frontier(&pts), [p(1, 50.0, 0.4), p(0, 100.0, 1.5)]);
        assert!(Trade::Cost.dominates(&pts[0], &pts[2]) && !Trade::Cost.dominates(&pts[2], &pts[0]));
        assert!(Trade::Cost.dominates(&pts[1], &pts[3]) && !Trade::PerGpu.dominates(&pts[0], &pts[2]));
    }

    proptest! {
        #[test]
        fn no_point_on_the_frontier_is_beaten_and_every_other_point_is(
            raw in proptest::collection::vec((1u32..20, 1u32..20), 0..30),
            cost in any::<bool>(),
        ) {
            let trade = if cost { Trade::Cost } else { Trade::PerGpu };
            let pts: Vec<Point> =
                raw.iter().enumerate().map(|(i, &(u, g))| p(i, f64::from(u), f64::from(g))).collect();
            let on = trade.frontier(&pts);
            for w in on.windows(2) {
                // Along the frontier, more per user costs some of the other.
                prop_assert!(w[0].user < w[1].user && trade.better(w[0].y, w[1].y), "{:?}", on);
            }
            for q in &pts {
                let kept = on.iter().any(|f| f.index == q.index);
                let beaten = pts.iter().any(|o| trade.dominates(o, q));
                let repeated = pts.iter().any(|o| o.index < q.index && o.user == q.user && o.y == q.y);
                prop_assert_eq!(kept, !beaten && !repeated, "{:?} in {:?}", q, on);
            }
        }
    }
}
