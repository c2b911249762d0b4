//! A bounded Nelder–Mead minimiser: derivative-free, for objectives that are only piecewise
//! smooth (a simulation's outputs move in steps as batches change shape).
//!
//! Coordinates are clamped to their bounds at every trial point. When the simplex collapses
//! before the budget is spent, the search restarts around the best point with a smaller
//! simplex, which frees it from the degenerate shapes Nelder–Mead is known to stall in.

/// Search settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchOptions {
    /// At most this many objective evaluations.
    pub max_evals: usize,
    /// Size of the first simplex along each coordinate.
    pub initial_step: f64,
    /// Stop when the simplex's objective values differ by less than this.
    pub tolerance: f64,
}

/// The best point found, its value and the evaluations used.
#[derive(Clone, Debug, PartialEq)]
pub struct Minimum {
    pub x: Vec<f64>,
    pub value: f64,
    pub evaluations: usize,
}

fn clamp(x: &mut [f64], lo: &[f64], hi: &[f64]) {
    for (i, v) in x.iter_mut().enumerate() {
        *v = v.clamp(lo[i], hi[i]);
    }
}

/// Minimises `f` from `x0` within `[lo, hi]` (per coordinate).
pub fn minimize(f: &mut dyn FnMut(&[f64]) -> f64, x0: &[f64], lo: &[f64], hi: &[f64], o: SearchOptions) -> Minimum {
    let n = x0.len();
    let mut evals = 0usize;
    let mut eval = |x: &[f64], evals: &mut usize| {
        *evals += 1;
        let v = f(x);
        if v.is_nan() { f64::INFINITY } else { v }
    };
    let mut best_x = x0.to_vec();
    clamp(&mut best_x, lo, hi);
    let mut best = eval(&best_x, &mut evals);
    if n == 0 {
        return Minimum { x: best_x, value: best, evaluations: evals };
    }
    let mut step = o.initial_step;
    while evals + n < o.max_evals && step > 1e-4 {
        // A simplex around the best point, stepping away from a bound it sits on.
        let mut simplex: Vec<(Vec<f64>, f64)> = vec![(best_x.clone(), best)];
        for i in 0..n {
            let mut x = best_x.clone();
            x[i] = if x[i] + step <= hi[i] { x[i] + step } else { x[i] - step };
            clamp(&mut x, lo, hi);
            let v = eval(&x, &mut evals);
            simplex.push((x, v));
        }
        loop {
            simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
            let spread = simplex[n].1 - simplex[0].1;
            if evals + 2 > o.max_evals || spread.abs() < o.tolerance {
                break;
            }
            let centroid: Vec<f64> =
                (0..n).map(|i| simplex[..n].iter().map(|(x, _)| x[i]).sum::<f64>() / n as f64).collect();
            let along = |t: f64| -> Vec<f64> {
                let mut x: Vec<f64> = (0..n).map(|i| centroid[i] + t * (simplex[n].0[i] - centroid[i])).collect();
                clamp(&mut x, lo, hi);
                x
            };
            let xr = along(-1.0);
            let fr = eval(&xr, &mut evals);
            if fr < simplex[0].1 {
                let xe = along(-2.0);
                let fe = eval(&xe, &mut evals);
                simplex[n] = if fe < fr { (xe, fe) } else { (xr, fr) };
            } else if fr < simplex[n - 1].1 {
                simplex[n] = (xr, fr);
            } else {
                let (xc, fc) = if fr < simplex[n].1 {
                    let xc = along(-0.5);
                    let fc = eval(&xc, &mut evals);
                    (xc, fc)
                } else {
                    let xc = along(0.5);
                    let fc = eval(&xc, &mut evals);
                    (xc, fc)
                };
                if fc < simplex[n].1.min(fr) {
                    simplex[n] = (xc, fc);
                } else {
                    if evals + n > o.max_evals {
                        break;
                    }
                    let x0 = simplex[0].0.clone();
                    for (x, v) in simplex.iter_mut().skip(1) {
                        for i in 0..n {
                            x[i] = x0[i] + 0.5 * (x[i] - x0[i]);
                        }
                        *v = eval(x, &mut evals);
                    }
                }
            }
        }
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        let improved = simplex[0].1 < best - o.tolerance;
        if simplex[0].1 <= best {
            best = simplex[0].1;
            best_x = simplex[0].0.clone();
        }
        step *= if improved { 0.5 } else { 0.25 };
    }
    Minimum { x: best_x, value: best, evaluations: evals }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: SearchOptions = SearchOptions { max_evals: 600, initial_step: 0.5, tolerance: 1e-10 };

    #[test]
    fn finds_the_minimum_of_a_valley() {
        // Rosenbrock's banana in 2-D: minimum 0 at (1, 1).
        let mut f = |x: &[f64]| (1.0 - x[0]).powi(2) + 100.0 * (x[1] - x[0] * x[0]).powi(2);
        let m = minimize(&mut f, &[-1.0, 2.0], &[-5.0, -5.0], &[5.0, 5.0], OPTS);
        assert!(m.value < 1e-4, "{m:?}");
        assert!((m.x[0] - 1.0).abs() < 0.05 && (m.x[1] - 1.0).abs() < 0.1, "{m:?}");
        assert!(m.evaluations <= 600);
    }

    #[test]
    fn respects_bounds_and_budget() {
        // Unbounded minimum at (3, -3); the box stops it at (1, -1).
        let mut f = |x: &[f64]| (x[0] - 3.0).powi(2) + (x[1] + 3.0).powi(2) + (x[2] - 0.5).abs();
        let m = minimize(&mut f, &[0.0, 0.0, 0.0], &[-1.0, -1.0, -1.0], &[1.0, 1.0, 1.0], OPTS);
        assert!((m.x[0] - 1.0).abs() < 1e-3 && (m.x[1] + 1.0).abs() < 1e-3, "{m:?}");
        assert!((m.x[2] - 0.5).abs() < 1e-2, "{m:?}");
        let mut calls = 0;
        let mut g = |x: &[f64]| {
            calls += 1;
            x[0] * x[0]
        };
        let m = minimize(&mut g, &[0.7], &[-1.0], &[1.0], SearchOptions { max_evals: 9, ..OPTS });
        assert!(m.evaluations <= 9 && calls <= 9, "{m:?}");
        assert!(m.value < 0.49);
    }
}
