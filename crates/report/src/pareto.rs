//! The trade a serving deployment makes between what each GPU serves and what each user sees:
//! output tokens per second per GPU against interactivity (tokens per second per user, 1000 /
//! median TPOT), as InferenceX charts it. A run is on the **Pareto frontier** when no other
//! run gives at least as much of both and more of one; the frontier says which deployment wins
//! at which interactivity.

use std::fmt::Write as _;

use servebench_store::StoredRun;

use crate::compare::ranges;
use crate::layout::Layout;
use crate::quantity::Quantity;

/// The y of the trade: output tokens per second per GPU.
pub const PER_GPU: Quantity = Quantity::OutputThroughputPerGpu;
/// The x of the trade: tokens per second per user.
pub const PER_USER: Quantity = Quantity::Interactivity;

/// A run on the trade's plane.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// The run's index among the compared runs.
    pub index: usize,
    /// Tokens per second per user.
    pub user: f64,
    /// Output tokens per second per GPU.
    pub gpu: f64,
}

impl Point {
    /// Whether `self` gives at least as much of both as `other` and more of one.
    pub fn dominates(&self, other: &Point) -> bool {
        self.user >= other.user && self.gpu >= other.gpu && (self.user > other.user || self.gpu > other.gpu)
    }
}

/// The runs that have both numbers (a GPU count and a median TPOT), in the order given.
pub fn points(runs: &[StoredRun]) -> Vec<Point> {
    runs.iter()
        .enumerate()
        .filter_map(|(index, r)| {
            let (user, gpu) = (PER_USER.value(&r.summary)?, PER_GPU.value(&r.summary)?);
            (user.is_finite() && gpu.is_finite()).then_some(Point { index, user, gpu })
        })
        .collect()
}

/// The points no other point dominates, by interactivity ascending (so throughput per GPU
/// descending). Of points equal in both, the first is kept.
pub fn frontier(points: &[Point]) -> Vec<Point> {
    let mut sorted = points.to_vec();
    // Most interactive first; among equals the most per GPU, then the given order.
    sorted.sort_by(|a, b| b.user.total_cmp(&a.user).then(b.gpu.total_cmp(&a.gpu)).then(a.index.cmp(&b.index)));
    let mut out: Vec<Point> = Vec::new();
    for p in sorted {
        // Every point kept so far is at least as interactive: `p` survives only by giving more
        // per GPU than all of them.
        if out.iter().all(|q| p.gpu > q.gpu) {
            out.push(p);
        }
    }
    out.reverse();
    out
}

/// The name a run goes by on the frontier: its series in a sweep, else its own name.
pub fn owner(layout: &Layout, index: usize) -> String {
    layout
        .sweep
        .as_ref()
        .and_then(|s| s.series.iter().find(|s| s.points.iter().any(|&(_, i)| i == index)))
        .map_or_else(|| layout.names[index].clone(), |s| s.name.clone())
}

/// One sentence naming the frontier, most interactive first, as stretches of one owner each,
/// and how many runs it leaves behind; `None` with fewer than two runs on the plane.
pub fn finding(runs: &[StoredRun], layout: &Layout) -> Option<String> {
    let all = points(runs);
    if all.len() < 2 {
        return None;
    }
    let mut on = frontier(&all);
    on.reverse();
    let mut stretches: Vec<(String, Vec<Point>)> = Vec::new();
    for p in on.iter().copied() {
        let name = owner(layout, p.index);
        match stretches.last_mut() {
            Some((last, members)) if *last == name => members.push(p),
            _ => stretches.push((name, vec![p])),
        }
    }
    let parts: Vec<String> = stretches
        .iter()
        .map(|(name, members)| {
            let first = members[0];
            let last = members[members.len() - 1];
            let mut ids: Vec<i64> = members.iter().map(|p| runs[p.index].row.id).collect();
            ids.sort_unstable();
            let mut text = if name.is_empty() { String::new() } else { format!("{name} ") };
            if members.len() == 1 {
                let _ = write!(text, "at {:.1} tok/s/user ({:.1} tok/s/GPU; #{})", first.user, first.gpu, ids[0]);
            } else {
                let _ = write!(
                    text,
                    "from {:.1} to {:.1} tok/s/user ({:.1} to {:.1} tok/s/GPU; #{})",
                    first.user,
                    last.user,
                    first.gpu,
                    last.gpu,
                    ranges(&ids).replace(", ", ", #")
                );
            }
            text
        })
        .collect();
    let behind = all.len() - on.len();
    let rest = match behind {
        0 => " Every run is on it.".to_string(),
        1 => " The other run gives less of both than one on it.".to_string(),
        n => format!(" The other {n} runs each give less of both than one on it."),
    };
    Some(format!(
        "Pareto frontier of output tok/s per GPU against tok/s per user, most interactive first: {}.{rest}",
        parts.join("; then ")
    ))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn p(index: usize, user: f64, gpu: f64) -> Point {
        Point { index, user, gpu }
    }

    #[test]
    fn the_frontier_keeps_what_nothing_beats_on_both() {
        let pts = [p(0, 100.0, 500.0), p(1, 50.0, 900.0), p(2, 60.0, 400.0), p(3, 20.0, 900.0), p(4, 100.0, 500.0)];
        // 2 is beaten by 0; 3 by 1 (as much per GPU, less per user); 4 equals 0 and comes later.
        assert_eq!(frontier(&pts), [p(1, 50.0, 900.0), p(0, 100.0, 500.0)]);
        assert!(frontier(&[]).is_empty());
        assert_eq!(frontier(&[p(7, 1.0, 1.0)]), [p(7, 1.0, 1.0)]);
    }

    proptest! {
        #[test]
        fn no_point_on_the_frontier_is_beaten_and_every_other_point_is(
            raw in proptest::collection::vec((1u32..20, 1u32..20), 0..30)
        ) {
            let pts: Vec<Point> =
                raw.iter().enumerate().map(|(i, &(u, g))| p(i, f64::from(u), f64::from(g))).collect();
            let on = frontier(&pts);
            for w in on.windows(2) {
                prop_assert!(w[0].user < w[1].user && w[0].gpu > w[1].gpu, "{:?}", on);
            }
            for q in &pts {
                let kept = on.iter().any(|f| f.index == q.index);
                let beaten = pts.iter().any(|o| o.dominates(q));
                let repeated = pts.iter().any(|o| o.index < q.index && o.user == q.user && o.gpu == q.gpu);
                prop_assert_eq!(kept, !beaten && !repeated, "{:?} in {:?}", q, on);
            }
        }
    }
}
