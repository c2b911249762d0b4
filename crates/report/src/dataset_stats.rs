//! The figure `--plot-dataset-stats` writes beside a run's result, as `vllm bench serve` does
//! (vLLM's is a PNG, this one an SVG, as `bench sweep plot` writes its figures): how many
//! requests had how many prompt, output and total tokens, and each request's tokens in order.

use crate::svg::{self, Axis, Line, LineChart};

/// Bins of each histogram, as vLLM's figure has.
pub const BINS: usize = 30;

/// The figure of the requests' `(prompt, output)` tokens, in request order.
pub fn dataset_stats(title: &str, requests: &[(u32, u32)]) -> String {
    let prompt: Vec<f64> = requests.iter().map(|&(p, _)| f64::from(p)).collect();
    let output: Vec<f64> = requests.iter().map(|&(_, o)| f64::from(o)).collect();
    let total: Vec<f64> = requests.iter().map(|&(p, o)| f64::from(p) + f64::from(o)).collect();
    // `x` and `y`: each axis's label and the unit of its values in a tooltip.
    let chart = |id: &str, title: &str, x: (&str, &str), y: (&str, &str), lines: Vec<Line>| {
        svg::line_chart(&LineChart {
            id: id.into(),
            title: title.into(),
            x: Axis::linear(x.0),
            y: Axis::linear(y.0),
            lines,
            x_unit: x.1.into(),
            y_unit: y.1.into(),
        })
    };
    let line = |name: &str, points: Vec<(f64, f64)>| Line {
        name: name.into(),
        points,
        markers: false,
        joined: true,
        bands: vec![],
    };
    let hist = |id: &str, what: &str, values: &[f64]| {
        chart(
            id,
            &format!("{what} tokens distribution"),
            (&format!("{what} tokens"), "tokens"),
            ("Requests", "requests"),
            vec![line("requests", steps(&histogram(values)))],
        )
    };
    let index = |values: &[f64]| values.iter().enumerate().map(|(i, &v)| (i as f64, v)).collect::<Vec<_>>();
    let per_request = chart(
        "per-request",
        "Tokens of each request",
        ("Request", "request "),
        ("Tokens", "tokens"),
        vec![line("prompt", index(&prompt)), line("prompt + output", index(&total))],
    );
    svg::grid(
        title,
        &[
            vec![hist("prompt", "Prompt", &prompt), hist("output", "Output", &output)],
            vec![hist("total", "Total (prompt + output)", &total), per_request],
        ],
    )
}

/// `values` counted in [`BINS`] equal bins from the least to the most (from half below to
/// half above a single value, as matplotlib's histogram takes one): `(left edge, width,
/// count)` of each bin, the last bin holding the most.
fn histogram(values: &[f64]) -> Vec<(f64, f64, usize)> {
    if values.is_empty() {
        return Vec::new();
    }
    let (lo, hi) = values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| (l.min(v), h.max(v)));
    let (lo, hi) = if hi > lo { (lo, hi) } else { (lo - 0.5, hi + 0.5) };
    let width = (hi - lo) / BINS as f64;
    let mut counts = vec![0usize; BINS];
    for &v in values {
        counts[(((v - lo) / width) as usize).min(BINS - 1)] += 1;
    }
    counts.into_iter().enumerate().map(|(k, n)| (lo + k as f64 * width, width, n)).collect()
}

/// A histogram's outline: up each bin's left edge, across its top, down after the last.
fn steps(bins: &[(f64, f64, usize)]) -> Vec<(f64, f64)> {
    let mut points = Vec::with_capacity(2 * bins.len() + 2);
    for &(left, width, n) in bins {
        if points.is_empty() {
            points.push((left, 0.0));
        }
        points.push((left, n as f64));
        points.push((left + width, n as f64));
    }
    if let Some(&(x, _)) = points.last() {
        points.push((x, 0.0));
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_falls_in_one_of_thirty_equal_bins_the_most_in_the_last() {
        let values: Vec<f64> = (0..=300).map(f64::from).collect();
        let bins = histogram(&values);
        assert_eq!(bins.len(), BINS);
        assert_eq!(bins.iter().map(|b| b.2).sum::<usize>(), values.len());
        assert!(bins.iter().all(|b| (b.1 - 10.0).abs() < 1e-12));
        assert_eq!((bins[0].0, bins[0].2, bins[29].2), (0.0, 10, 11), "300 is in the last bin");
        // One value: a bin of a thirtieth around it, as matplotlib draws it.
        let one = histogram(&[128.0; 5]);
        assert_eq!(one.iter().map(|b| b.2).sum::<usize>(), 5);
        let full = one.iter().find(|b| b.2 == 5).unwrap();
        assert!((one[0].0 - 127.5).abs() < 1e-12 && full.0 <= 128.0 && 128.0 < full.0 + full.1, "{one:?}");
        assert!(histogram(&[]).is_empty() && steps(&[]).is_empty());
    }

    #[test]
    fn the_outline_climbs_each_bin_and_closes_at_zero() {
        let s = steps(&[(0.0, 1.0, 2), (1.0, 1.0, 0), (2.0, 1.0, 3)]);
        assert_eq!(s, [(0.0, 0.0), (0.0, 2.0), (1.0, 2.0), (1.0, 0.0), (2.0, 0.0), (2.0, 3.0), (3.0, 3.0), (3.0, 0.0)]);
    }

    #[test]
    fn the_figure_has_four_panels_titled_as_vllm_s() {
        let requests: Vec<(u32, u32)> = (0..40).map(|i| (100 + i, 10 + i % 7)).collect();
        let svg = dataset_stats("Dataset of run", &requests);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        for title in [
            "Prompt tokens distribution",
            "Output tokens distribution",
            "Total (prompt + output) tokens distribution",
            "Tokens of each request",
        ] {
            assert!(svg.contains(&format!(">{title}</title>")), "{title}");
        }
        assert_eq!(svg.matches("<svg x=").count(), 4);
    }
}
