//! Tests of a sweep's grid: its axes, their order, pairs of lengths, labels and usage errors.

use clap::Parser;

use super::*;
use crate::cli::{Cli, Command};

pub(crate) fn sweep(argv: &[&str]) -> SweepArgs {
    let argv = std::iter::once("servebench").chain(std::iter::once("sweep")).chain(argv.iter().copied());
    match Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{e}")).command {
        Command::Sweep(a) => *a,
        other => panic!("not a sweep: {other:?}"),
    }
}

#[test]
fn lists_form_a_grid_with_targets_outermost() {
    let a = sweep(&[
        "--sim",
        "Qwen/Qwen3-8B@h100-sxm,Qwen/Qwen3-4B@h100-sxm",
        "--max-concurrency",
        "1,4",
        "--num-prompts=10",
        "--random-input-len",
        "64",
    ]);
    assert_eq!(a.lists.max_concurrency, [1, 4]);
    assert_eq!(a.bench.traffic.max_concurrency, Some(1));
    let grid = Grid::new(&a).unwrap();
    let points = grid.points();
    assert_eq!(points.len(), 4);
    assert_eq!((points[1].target, points[1].max_concurrency), (0, Some(4)));
    assert_eq!((points[2].target, points[2].max_concurrency), (1, Some(1)));
    assert_eq!(grid.varying(&points), ["model", "max_concurrency"]);
    let args = grid.args(&a.bench, &points[3]);
    assert_eq!(args.sim.sim.as_deref(), Some("Qwen/Qwen3-4B@h100-sxm"));
    assert_eq!((args.traffic.max_concurrency, args.traffic.num_prompts), (Some(4), 10));
    assert_eq!(args.dataset.random_input_len, 64);
}

#[test]
fn zipped_lengths_pair_item_by_item() {
    // Prefill and decode measured apart: two points, not the four a grid crosses.
    let lengths = ["--random-input-len", "8191,1", "--random-output-len", "1,128", "--max-concurrency", "4,16"];
    let crossed = Grid::new(&sweep(&lengths)).unwrap().points();
    assert_eq!(crossed.len(), 8);
    let zipped = Grid::new(&sweep(&[&lengths[..], &["--zip-lengths"]].concat())).unwrap();
    let pairs: Vec<_> = zipped.points().iter().map(|p| (p.input_len, p.output_len, p.max_concurrency)).collect();
    assert_eq!(
        pairs,
        [
            (Some(8191), Some(1), Some(4)),
            (Some(8191), Some(1), Some(16)),
            (Some(1), Some(128), Some(4)),
            (Some(1), Some(128), Some(16))
        ]
    );
    let p = &zipped.points()[2];
    let args = zipped.args(&sweep(&lengths).bench, p);
    assert_eq!((args.dataset.random_input_len, args.dataset.random_output_len), (1, 128));
    // The general flags pair too; lists of different lengths, or one list alone, are refused.
    let general = sweep(&["--input-len", "512,64", "--output-len", "1,256", "--zip-lengths"]);
    let points = Grid::new(&general).unwrap().points();
    assert_eq!(
        points.iter().map(|p| (p.input_len, p.output_len)).collect::<Vec<_>>(),
        [(Some(512), Some(1)), (Some(64), Some(256))]
    );
    for argv in [
        &["--random-input-len", "8191,1", "--random-output-len", "1,128,256", "--zip-lengths"][..],
        &["--random-input-len", "8191,1", "--zip-lengths"][..],
        &["--random-input-len", "64", "--zip-lengths"][..],
        &["--random-output-len", "64", "--zip-lengths"][..],
    ] {
        let e = Grid::new(&sweep(argv)).unwrap_err().to_string();
        assert!(e.contains("--zip-lengths pairs") && e.contains("as many values"), "{e}");
    }
}

#[test]
fn every_axis_varies_inside_the_ones_before_it() {
    let a = sweep(&[
        "--sim",
        "Qwen/Qwen3-8B@h100-sxm,Qwen/Qwen3-4B@h100-sxm",
        "--random-input-len",
        "64,128",
        "--random-output-len",
        "8,16",
        "--random-batch-size",
        "1,4",
        "--request-rate",
        "2,5",
        "--max-concurrency",
        "1,4",
        "--num-prompts",
        "10,20",
    ]);
    let points = Grid::new(&a).unwrap().points();
    assert_eq!(points.len(), 128);
    let key = |p: &Point| {
        (p.target, p.input_len, p.output_len, p.batch_size, p.request_rate as u32, p.max_concurrency, p.num_prompts)
    };
    let keys: Vec<_> = points.iter().map(key).collect();
    // Ascending and distinct: exactly the product of the axes, the first one outermost.
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    assert_eq!(keys[0], (0, Some(64), Some(8), Some(1), 2, Some(1), 10));
    assert_eq!(keys[1], (0, Some(64), Some(8), Some(1), 2, Some(1), 20));
    assert_eq!(keys[127], (1, Some(128), Some(16), Some(4), 5, Some(4), 20));
}

#[test]
fn repeated_flags_add_to_the_list_and_prompts_can_scale_with_the_load() {
    let a = sweep(&[
        "--base-url",
        "http://a:8000",
        "--max-concurrency",
        "2",
        "--max-concurrency",
        "8,16",
        "--scale-num-prompts",
        "5",
        "--input-len",
        "100,200",
    ]);
    let grid = Grid::new(&a).unwrap();
    let points = grid.points();
    let counts: Vec<usize> = points.iter().map(|p| p.num_prompts).collect();
    assert_eq!(counts, [10, 40, 80, 10, 40, 80]);
    let huge = sweep(&["--base-url", "http://a:8000", "--max-concurrency", "2", "--scale-num-prompts", "1e30"]);
    let e = Grid::new(&huge).err().unwrap().0;
    assert!(
        e.starts_with("--scale-num-prompts 1000000000000000000000000000000 times a load of 2 asks for 2.000e30"),
        "{e}"
    );
    assert_eq!(grid.input.key, "input_len");
    assert_eq!(grid.varying(&points), ["model", "input_len", "max_concurrency", "num_prompts"]);
    let args = grid.args(&a.bench, &points[4]);
    assert_eq!((args.content.input_len, args.endpoint.base_url.as_deref()), (Some(200), Some("http://a:8000")));
    let labels = [
        ("model".to_string(), "org/M-1".to_string()),
        ("max_concurrency".to_string(), "8".to_string()),
        ("repeat".to_string(), "1".to_string()),
    ];
    assert_eq!(file_suffix(&labels, 0), "M-1-c8-r1");
    let p = Point {
        target: 1,
        input_len: Some(128),
        output_len: None,
        batch_size: Some(8),
        request_rate: f64::INFINITY,
        max_concurrency: Some(16),
        num_prompts: 160,
    };
    let spec = p.to_spec(2);
    assert_eq!(
        spec,
        "target=1 input_len=128 output_len=- batch_size=8 request_rate=inf max_concurrency=16 num_prompts=160 repeat=2"
    );
    assert_eq!(Point::from_spec(&spec).unwrap(), (p, 2));
    assert!(Point::from_spec("target=1").is_err());
    assert!(Point::from_spec(&spec.replace("160", "many")).is_err());
}

#[test]
fn contradictions_are_usage_errors() {
    let cases: [(&[&str], &str); 5] = [
        (&["--sim", "a@b,c@d", "--model", "x"], "leave out --model"),
        (&["--sim", "a@b", "--base-url", "http://x"], "leave out --base-url"),
        (&["--base-url", "http://x", "--predict"], "--predict runs --sim targets"),
        (&["--input-len", "5", "--random-input-len", "1,2"], "give the list to one of them"),
        (
            &["--max-concurrency", "1,2", "--search", "max-concurrency", "--slo", "p99_ttft_ms<=5"],
            "leave out --max-concurrency",
        ),
    ];
    for (argv, says) in cases {
        let err = Grid::new(&sweep(argv)).unwrap_err().to_string();
        assert!(err.contains(says), "{argv:?}: {err}");
    }
    let scale = sweep(&["--scale-num-prompts", "4"]);
    assert!(Grid::new(&scale).unwrap_err().to_string().contains("needs --max-concurrency"));
    let bad = std::iter::once("servebench").chain(["sweep", "--max-concurrency", "1,x"]);
    let e = Cli::try_parse_from(bad).unwrap_err().to_string();
    assert!(e.contains("\"x\" is not a valid value of --max-concurrency"), "{e}");
    for list in ["1,,2", "1,2,", ","] {
        let argv = std::iter::once("servebench").chain(["sweep", "--max-concurrency", list]);
        let e = Cli::try_parse_from(argv).unwrap_err().to_string();
        assert!(e.contains("has an empty item"), "{list}: {e}");
    }
}
