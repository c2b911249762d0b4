//! The findings on the reference reports, with every cited number checked against the report
//! text itself (read here line by line, not through the importer), and on made-up sweeps.

use servebench_core::metrics::{MetricStats, Summary};
use servebench_store::{NewRun, RunKind};

use super::*;
use crate::testutil::*;

fn all(runs: &[StoredRun], by: Option<&str>) -> Vec<Finding> {
    let layout = Layout::new(runs, by).unwrap();
    findings(runs, &layout, None)
}

fn of_kind(found: &[Finding], kind: FindingKind) -> Vec<&str> {
    found.iter().filter(|f| f.kind == kind).map(|f| f.text.as_str()).collect()
}

/// A result block: its heading and its `name: value` lines.
type Block = (String, Vec<(String, f64)>);

/// The result blocks of a console report, in order: the heading line before each (the last
/// non-blank line outside a block) and the `name: value` lines inside it.
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut heading = String::new();
    let mut inside: Option<Vec<(String, f64)>> = None;
    for line in text.lines().map(str::trim) {
        if line.contains("Serving Benchmark Result") {
            inside = Some(Vec::new());
        } else if line.starts_with("=====") {
            if let Some(values) = inside.take() {
                out.push((heading.clone(), values));
            }
        } else if let Some(values) = &mut inside {
            if let Some((name, value)) = line.rsplit_once(':')
                && let Ok(v) = value.trim().parse()
            {
                values.push((name.trim().to_string(), v));
            }
        } else if !line.is_empty() {
            heading = line.to_string();
        }
    }
    out
}

fn value(block: &Block, name: &str) -> f64 {
    block.1.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} in {}", block.0)).1
}

/// `(model, value)` of every block of report 000, best first by `name`.
fn ranked_000(name: &str, highest: bool) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = blocks(R000)
        .iter()
        .map(|b| (b.0.strip_prefix("Results ").expect("a model heading").to_string(), value(b, name)))
        .collect();
    v.sort_by(|a, b| if highest { b.1.total_cmp(&a.1) } else { a.1.total_cmp(&b.1) });
    v
}

#[test]
fn the_000_model_table_ranks_throughput_and_latency_at_concurrency_4() {
    let blocks = blocks(R000);
    assert_eq!(blocks.len(), 11);
    assert!(blocks.iter().all(|b| value(b, "Maximum request concurrency") == 4.0));
    let found = all(&reference_000(), None);

    let out = ranked_000("Output token throughput (tok/s)", true);
    let ((best, bv), (next, nv), (worst, wv)) = (&out[0], &out[1], &out[10]);
    assert_eq!(
        (best.as_str(), *bv, next.as_str(), *nv),
        ("Qwen/Qwen3-0.6B", 124.81, "meta-llama/Llama-3.2-1B", 123.95)
    );
    assert_eq!(
        of_kind(&found, FindingKind::HighestThroughput),
        [format!(
            "Highest output throughput at max_concurrency=4: {best} ({bv:.2} tok/s, {:.2}× the next, {next} at {nv:.2} tok/s).",
            bv / nv
        )]
    );
    assert_eq!(worst, "microsoft/phi-4");
    assert_eq!(
        of_kind(&found, FindingKind::ThroughputSpread),
        [format!(
            "Output throughput at max_concurrency=4 spans {:.2}×: from {worst} ({wv:.2} tok/s) to {best} ({bv:.2} tok/s).",
            bv / wv
        )]
    );
    assert!(of_kind(&found, FindingKind::ThroughputSpread)[0].contains("spans 5.24×"));

    // No E2EL in these reports: latency is ranked by median TPOT.
    let tpot = ranked_000("Median TPOT (ms)", false);
    assert_eq!(
        of_kind(&found, FindingKind::BestLatency),
        [format!(
            "Lowest latency at max_concurrency=4: {} (median TPOT {:.2} ms; next {} at {:.2} ms).",
            tpot[0].0, tpot[0].1, tpot[1].0, tpot[1].1
        )]
    );
    let ttft = ranked_000("Median TTFT (ms)", false);
    assert_eq!(ttft[0], ("google/gemma-3-1b-it".to_string(), 374.32));
    assert_eq!(
        of_kind(&found, FindingKind::FastestFirstToken),
        [format!(
            "Fastest first token at max_concurrency=4: {} (median TTFT {:.2} ms; next {} at {:.2} ms).",
            ttft[0].0, ttft[0].1, ttft[1].0, ttft[1].1
        )]
    );
    // Nothing failed, and there is no sweep to find a knee in.
    assert_eq!(found.len(), 4, "{found:#?}");
}

/// `(num_prompts, block)` of the 80-token sweep of report 001: its first 12 blocks.
fn sweep_001(text: &str, first: usize, counts: &[f64]) -> Vec<(f64, Block)> {
    let b = blocks(text);
    counts.iter().zip(&b[first..]).map(|(n, blk)| (*n, blk.clone())).collect()
}

const SHORT: [f64; 12] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0];
const LONG: [f64; 7] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

#[test]
fn the_001_num_prompts_sweep_saturates_at_128_prompts() {
    let points = sweep_001(R001, 0, &SHORT);
    for (n, b) in &points {
        assert_eq!(value(b, "Successful requests"), *n, "the blocks follow the num_prompts list");
    }
    let out: Vec<(f64, f64)> = points.iter().map(|(n, b)| (*n, value(b, "Output token throughput (tok/s)"))).collect();
    let ttft: Vec<f64> = points.iter().map(|(_, b)| value(b, "Median TTFT (ms)")).collect();
    let tpot: Vec<f64> = points.iter().map(|(_, b)| value(b, "Median TPOT (ms)")).collect();
    let found = all(&reference_001_short(), None);

    let (peak_n, peak) = out.iter().copied().fold((0.0, 0.0), |m, p| if p.1 > m.1 { p } else { m });
    assert_eq!((peak_n, peak), (2048.0, 438.42));
    assert_eq!(
        of_kind(&found, FindingKind::HighestThroughput),
        [format!(
            "Output throughput peaks at num_prompts=2048: {peak:.2} tok/s, {:.2}× the {:.2} tok/s at num_prompts=1.",
            peak / out[0].1,
            out[0].1
        )]
    );
    assert_eq!(
        of_kind(&found, FindingKind::DegradesUnderLoad),
        [format!(
            "Median TTFT grows ×{:.2} from num_prompts=1 ({:.2} ms) to 2048 ({:.2} ms), median TPOT ×{:.2} ({:.2} → {:.2} ms).",
            ttft[11] / ttft[0],
            ttft[0],
            ttft[11],
            tpot[11] / tpot[0],
            tpot[0],
            tpot[11]
        )]
    );

    // The knee: the first step gains 8.53 tok/s per prompt; from 128 prompts on every step
    // gains less than a tenth of that (the step from 64 to 128 still gains 1.22).
    let slope = |i: usize| (out[i + 1].1 - out[i].1) / (out[i + 1].0 - out[i].0);
    let s0 = slope(0);
    assert!(slope(6) > 0.1 * s0 && (7..11).all(|i| slope(i) < 0.1 * s0));
    assert_eq!(out[7], (128.0, 273.89));
    assert_eq!(
        of_kind(&found, FindingKind::SaturationKnee),
        [format!(
            "Saturation knee at num_prompts=128 ({:.2} tok/s): beyond it each added prompt gains at most {:.2} tok/s, \
             under 10 % of the {s0:.2} tok/s per prompt from num_prompts=1 to 2; the highest is {peak:.2} tok/s at 2048.",
            out[7].1,
            slope(7)
        )]
    );
    assert!(of_kind(&found, FindingKind::SaturationKnee)[0].contains("the 8.53 tok/s per prompt"));

    // TTFT first grows more than 1.1 times as fast as the prompt count from 256 to 512.
    let first = (0..11).find(|&i| ttft[i + 1] / ttft[i] > 1.1 * 2.0).unwrap();
    assert_eq!(SHORT[first], 256.0);
    assert_eq!(
        of_kind(&found, FindingKind::SuperlinearTtft),
        [format!(
            "Median TTFT grows faster than the load from num_prompts=256 to 512: ×{:.2} ({:.2} → {:.2} ms) while \
             num_prompts grows ×2.00.",
            ttft[first + 1] / ttft[first],
            ttft[first],
            ttft[first + 1]
        )]
    );
    assert_eq!(found.len(), 4, "{found:#?}");
}

#[test]
fn the_whole_001_report_compares_its_two_prompt_lengths() {
    let short = sweep_001(R001, 0, &SHORT);
    let long = sweep_001(R001, 12, &LONG);
    for (n, b) in &long {
        assert_eq!(value(b, "Total input tokens"), n * 10_000.0, "the 10,000-token blocks");
    }
    let v = |b: &Block, name| value(b, name);
    let found = all(&reference_001(), None);

    let (s1, l1) = (&short[0].1, &long[0].1);
    let (s64, l64) = (&short[6].1, &long[6].1);
    let out = "Output token throughput (tok/s)";
    assert_eq!(
        of_kind(&found, FindingKind::HighestThroughput),
        [
            format!(
                "Highest output throughput at num_prompts=1: seq_length=80 ({:.2} tok/s, {:.2}× the next, \
                 seq_length=10000 at {:.2} tok/s).",
                v(s1, out),
                v(s1, out) / v(l1, out),
                v(l1, out)
            ),
            format!(
                "Highest output throughput at num_prompts=64: seq_length=80 ({:.2} tok/s, {:.2}× the next, \
                 seq_length=10000 at {:.2} tok/s).",
                v(s64, out),
                v(s64, out) / v(l64, out),
                v(l64, out)
            ),
        ]
    );
    assert_eq!(
        of_kind(&found, FindingKind::BestLatency),
        [format!(
            "Best single-request latency at num_prompts=1: seq_length=80 (median TPOT {:.2} ms; next seq_length=10000 \
             at {:.2} ms).",
            v(s1, "Median TPOT (ms)"),
            v(l1, "Median TPOT (ms)")
        )]
    );
    // The long prompts level off at 8 prompts: 1.48 tok/s gained per prompt from 1 to 2, then
    // no step from 8 on gains 0.148.
    let lo: Vec<(f64, f64)> = long.iter().map(|(n, b)| (*n, v(b, out))).collect();
    let slope = |i: usize| (lo[i + 1].1 - lo[i].1) / (lo[i + 1].0 - lo[i].0);
    assert!(slope(2) >= 0.1 * slope(0) && (3..6).all(|i| slope(i) < 0.1 * slope(0)));
    let knees = of_kind(&found, FindingKind::SaturationKnee);
    assert_eq!(knees.len(), 2);
    assert!(knees[0].starts_with("seq_length=80: saturation knee at num_prompts=128 (273.89 tok/s)"), "{}", knees[0]);
    assert_eq!(
        knees[1],
        format!(
            "seq_length=10000: saturation knee at num_prompts=8 ({:.2} tok/s): beyond it each added prompt gains at \
             most {:.2} tok/s, under 10 % of the {:.2} tok/s per prompt from num_prompts=1 to 2; the highest is {:.2} \
             tok/s at 16.",
            lo[3].1,
            slope(3),
            slope(0),
            lo[4].1
        )
    );
    // The long prompts' TTFT never grows faster than their count.
    assert_eq!(of_kind(&found, FindingKind::SuperlinearTtft).len(), 1);
    let degrade = of_kind(&found, FindingKind::DegradesUnderLoad);
    assert_eq!(degrade.len(), 2);
    assert!(
        degrade[1].starts_with("seq_length=10000: median TTFT grows ×32.60 from num_prompts=1 (12286.18 ms) to 64")
    );
}

/// A run with only the numbers the findings read.
fn point(model: &str, concurrency: u64, out: f64, ttft: f64, tpot: f64, failed: u64) -> NewRun {
    let stats = |metric, median_ms: f64| MetricStats {
        metric,
        mean_ms: median_ms,
        median_ms,
        std_ms: None,
        percentiles: vec![(99.0, median_ms * 2.0)],
    };
    let summary = Summary {
        completed: 100 - failed,
        failed: Some(failed),
        max_concurrency: Some(concurrency),
        duration_s: 10.0,
        request_throughput: (100 - failed) as f64 / 10.0,
        output_throughput: Some(out),
        metrics: vec![stats(Metric::Ttft, ttft), stats(Metric::Tpot, tpot)],
        ..Summary::default()
    };
    NewRun::from_summary(RunKind::Import, summary).with_label("model", model)
}

fn model_sweep() -> Vec<StoredRun> {
    stored(&[
        point("small", 1, 50.0, 100.0, 10.0, 0),
        point("small", 8, 300.0, 400.0, 20.0, 0),
        point("small", 32, 400.0, 2000.0, 40.0, 3),
        point("large", 1, 20.0, 300.0, 30.0, 0),
        point("large", 8, 150.0, 600.0, 40.0, 0),
        point("large", 32, 310.0, 1200.0, 60.0, 10),
    ])
}

#[test]
fn a_model_by_concurrency_sweep_ranks_the_models_and_their_degradation() {
    let found = all(&model_sweep(), None);
    let texts: Vec<&str> = found.iter().map(|f| f.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "Highest output throughput at max_concurrency=1: small (50.00 tok/s, 2.50× the next, large at 20.00 tok/s).",
            "Highest output throughput at max_concurrency=32: small (400.00 tok/s, 1.29× the next, large at 310.00 tok/s).",
            "Best single-request latency at max_concurrency=1: small (median TPOT 10.00 ms; next large at 30.00 ms).",
            "Fastest first token at max_concurrency=1: small (median TTFT 100.00 ms; next large at 300.00 ms).",
            "Degrades hardest under load: small, median TTFT ×20.00 from max_concurrency=1 (100.00 ms) to 32 (2000.00 ms); \
             next large, ×4.00.",
            // small: 35.71 tok/s per request from 1 to 8, then 4.17 from 8 to 32.
            "small: no saturation knee up to max_concurrency=32: output throughput still gains 4.17 tok/s per added \
             concurrent request from 8 to 32 (300.00 → 400.00 tok/s), at least 10 % of the 35.71 tok/s per concurrent \
             request from max_concurrency=1 to 8.",
            "small: median TTFT grows faster than the load from max_concurrency=8 to 32: ×5.00 (400.00 → 2000.00 ms) \
             while max_concurrency grows ×4.00.",
            "large: no saturation knee up to max_concurrency=32: output throughput still gains 6.67 tok/s per added \
             concurrent request from 8 to 32 (150.00 → 310.00 tok/s), at least 10 % of the 18.57 tok/s per concurrent \
             request from max_concurrency=1 to 8.",
            "small fails 3.0 % of requests at max_concurrency=32 (3 of 100).",
            "large fails 10.0 % of requests at max_concurrency=32 (10 of 100).",
        ]
    );
}

#[test]
fn a_sweep_along_a_deployment_is_not_read_as_a_load() {
    // Along tp, numbers that would make every load finding (TTFT x20 and faster than the
    // axis, a knee) are other deployments at one load: only the rankings at a value apply.
    let runs: Vec<NewRun> = [(1, 50.0, 100.0), (2, 300.0, 400.0), (8, 310.0, 2000.0), (16, 311.0, 2500.0)]
        .into_iter()
        .map(|(tp, out, ttft)| point("m", 64, out, ttft, 10.0, 0).with_label("tp", &tp.to_string()))
        .collect();
    let along_tp = all(&stored(&runs), Some("tp"));
    for kind in
        [FindingKind::DegradesUnderLoad, FindingKind::SaturationKnee, FindingKind::NoKnee, FindingKind::SuperlinearTtft]
    {
        assert!(of_kind(&along_tp, kind).is_empty(), "{kind:?}: {along_tp:?}");
    }
    assert_eq!(
        of_kind(&along_tp, FindingKind::HighestThroughput),
        ["Output throughput peaks at tp=16: 311.00 tok/s, 6.22× the 50.00 tok/s at tp=1."]
    );
    // The same numbers along the concurrency are a load, and read as one.
    let load: Vec<NewRun> = [(1, 50.0, 100.0), (2, 300.0, 400.0), (8, 310.0, 2000.0), (16, 311.0, 2500.0)]
        .into_iter()
        .map(|(c, out, ttft)| point("m", c, out, ttft, 10.0, 0))
        .collect();
    let along_load = all(&stored(&load), None);
    assert_eq!(of_kind(&along_load, FindingKind::SaturationKnee).len(), 1, "{along_load:?}");
    assert_eq!(of_kind(&along_load, FindingKind::SuperlinearTtft).len(), 1, "{along_load:?}");
}

/// Two series, small on 1 GPU and large on 2, at 1, 8 and 32 streams: per user 100, 50, 25
/// tok/s and 33.3, 25, 16.7 tok/s; the GPUs priced per hour at `prices` (small, large).
fn small_and_large(prices: Option<(f64, f64)>) -> Vec<NewRun> {
    [
        point("small", 1, 50.0, 100.0, 10.0, 0),
        point("small", 8, 300.0, 400.0, 20.0, 0),
        point("small", 32, 400.0, 2000.0, 40.0, 0),
        point("large", 1, 20.0, 300.0, 30.0, 0),
        point("large", 8, 900.0, 600.0, 40.0, 0),
        point("large", 32, 1000.0, 1200.0, 60.0, 0),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, mut run)| {
        let small = i < 3;
        run.summary.gpus = Some(if small { 1 } else { 2 });
        run.summary.gpu_hour_cost = prices.map(|(s, l)| if small { s } else { l });
        run
    })
    .collect()
}

#[test]
fn the_pareto_frontier_says_which_series_serves_most_per_gpu_at_which_interactivity() {
    let runs = small_and_large(None);
    let found = all(&stored(&runs), None);
    // Per GPU: small 50, 300, 400; large 10, 450, 500. Large's first (#4: 10 at 33.3 tok/s/user)
    // is beaten by small's second (300 at 50), and small's last (#3: 400 at 25) by large's
    // second (450 at 25).
    assert_eq!(
        of_kind(&found, FindingKind::ParetoFrontier),
        ["Pareto frontier of output tok/s per GPU against tok/s per user, most interactive first: small from 100.0 \
             to 50.0 tok/s/user (50.0 to 300.0 tok/s/GPU; #1-2); then large from 25.0 to 16.7 tok/s/user (450.0 to \
             500.0 tok/s/GPU; #5-6). The other 2 runs each give less of both than one on it."]
    );
    // Without GPU counts there is no frontier.
    assert!(of_kind(&all(&model_sweep(), None), FindingKind::ParetoFrontier).is_empty());
}

#[test]
fn the_cost_frontier_says_which_series_is_cheapest_at_which_interactivity() {
    // small on 1 GPU at $1 an hour, large on 2 at $3; a million output tokens cost 10^6 ×
    // price × GPUs / (3600 × output tok/s).
    // Small: $5.56, $0.93, $0.69; large: $83.33, $1.85, $1.67. Small is cheaper at every
    // interactivity large reaches, and large reaches none beyond it.
    let found = all(&stored(&small_and_large(Some((1.0, 3.0)))), None);
    assert_eq!(
        of_kind(&found, FindingKind::CostFrontier),
        ["Cheapest per million output tokens at each run's own GPU-hour price, most interactive first: small from \
             100.0 to 25.0 tok/s/user ($5.56 to $0.69/Mtok; #1-3). The other 3 runs each cost at least as much for no \
             more tok/s per user than one on it."]
    );
    // At one price the cost follows the throughput per GPU, and the frontier is that one: small
    // $3.33 and $0.56 at 100 and 50 tok/s/user, large $0.37 and $0.33 at 25 and 16.7 (small's
    // $0.42 at 25 loses to large's $0.37).
    let found = all(&stored(&small_and_large(Some((0.6, 0.6)))), None);
    assert_eq!(
        of_kind(&found, FindingKind::CostFrontier),
        ["Cheapest per million output tokens at $0.6 per GPU-hour, most interactive first: small from 100.0 to 50.0 \
             tok/s/user ($3.33 to $0.56/Mtok; #1-2); then large from 25.0 to 16.7 tok/s/user ($0.37 to $0.33/Mtok; \
             #5-6). The other 2 runs each cost at least as much for no more tok/s per user than one on it."]
    );
    // Without a price there is no cost frontier, though the GPU counts give the other one.
    let unpriced = small_and_large(None);
    let found = all(&stored(&unpriced), None);
    assert!(of_kind(&found, FindingKind::CostFrontier).is_empty());
    assert_eq!(of_kind(&found, FindingKind::ParetoFrontier).len(), 1);
}

#[test]
fn the_runs_that_serve_most_tokens_per_joule_are_named_where_the_gpus_energy_was_measured() {
    use servebench_core::telemetry::{Reading, ServerTelemetry, Signal, Source};
    // A GPU exporter's power over each run's 10 s: small's GPU draws 500 W, large's two 1000 W.
    let runs: Vec<NewRun> = small_and_large(None)
        .into_iter()
        .enumerate()
        .map(|(i, mut run)| {
            let watts = if i < 3 { 500.0 } else { 1000.0 };
            let mut gpu = Source::new("http://dcgm:9400/metrics");
            for t in [0.0, 10.0] {
                gpu.record(t, &Reading { engine: Some("dcgm"), values: vec![(Signal::GpuPower, watts)], bad_lines: 0 });
            }
            run.summary.total_output_tokens = run.summary.output_throughput.map(|o| (o * 10.0) as u64);
            run.summary.server = Some(ServerTelemetry { interval_s: 1.0, sources: vec![gpu] });
            run
        })
        .collect();
    // Output tokens over joules: small 0.1, 0.6, 0.8; large 0.02, 0.9, 1.0.
    let found = all(&stored(&runs), None);
    assert_eq!(
        of_kind(&found, FindingKind::MostTokensPerJoule),
        [
            "Most output tokens per joule at max_concurrency=1: small (0.10 tok/J, 5.00× the next, large at 0.02 tok/J).",
            "Most output tokens per joule at max_concurrency=32: large (1.00 tok/J, 1.25× the next, small at 0.80 tok/J)."
        ]
    );
    // Without the GPUs' energy, nothing is said.
    assert!(of_kind(&all(&stored(&small_and_large(None)), None), FindingKind::MostTokensPerJoule).is_empty());
}

#[test]
fn failures_of_runs_side_by_side_name_the_run() {
    let runs = stored(&[point("a", 4, 10.0, 1.0, 1.0, 0), point("b", 4, 12.0, 1.0, 1.0, 25)]);
    let found = all(&runs, None);
    assert_eq!(
        of_kind(&found, FindingKind::Failures),
        ["b fails 25.0 % of requests at max_concurrency=4 (25 of 100)."]
    );
}

/// A run whose every request failed reads 0 ms in its summary's latencies; it has none, and is
/// never the fastest.
#[test]
fn a_run_that_completed_nothing_is_not_ranked_by_latency() {
    let runs = stored(&[
        point("a", 4, 10.0, 50.0, 5.0, 0),
        point("down", 4, 0.0, 0.0, 0.0, 100),
        point("c", 4, 12.0, 80.0, 4.0, 0),
    ]);
    let found = all(&runs, None);
    assert_eq!(
        of_kind(&found, FindingKind::FastestFirstToken),
        ["Fastest first token at max_concurrency=4: a (median TTFT 50.00 ms; next c at 80.00 ms)."]
    );
    assert_eq!(
        of_kind(&found, FindingKind::BestLatency),
        ["Lowest latency at max_concurrency=4: c (median TPOT 4.00 ms; next a at 5.00 ms)."]
    );
    assert_eq!(
        of_kind(&found, FindingKind::Failures),
        ["down fails 100.0 % of requests at max_concurrency=4 (100 of 100)."]
    );
}

#[test]
fn a_knee_where_throughput_falls_says_it_no_longer_rises() {
    let runs = stored(&[
        point("m", 1, 10.0, 1.0, 1.0, 0),
        point("m", 2, 20.0, 1.0, 1.0, 0),
        point("m", 4, 19.0, 1.0, 1.0, 0),
        point("m", 8, 18.0, 1.0, 1.0, 0),
    ]);
    assert_eq!(
        of_kind(&all(&runs, None), FindingKind::SaturationKnee),
        [
            "Saturation knee at max_concurrency=2 (20.00 tok/s): beyond it output throughput no longer rises (-0.25 tok/s \
          per added concurrent request at best), under 10 % of the 10.00 tok/s per concurrent request from \
          max_concurrency=1 to 2; the highest is 20.00 tok/s at 2."
        ]
    );
}
