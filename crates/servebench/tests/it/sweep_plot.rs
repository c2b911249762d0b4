//! `bench sweep plot` and `plot_pareto` in-process, over a sweep's results as `bench sweep serve`
//! lays them out: the figures each writes, their panels and points, the runs filters and bins
//! keep, the Pareto frontier, and the errors that say what to pass.

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use serde_json::json;
use servebench::cli::sweep_serve_args::BenchSweepCommand;
use servebench::cli::{BenchCommand, Cli, Command};
use servebench::commands::sweep_serve;
use servebench::output::Sink;

/// Runs `bench sweep ARGS`; its exit code and printed lines, or the error.
fn sweep(args: &[&str]) -> anyhow::Result<(ExitCode, String)> {
    let cli = Cli::try_parse_from(["servebench", "bench", "sweep"].into_iter().chain(args.iter().copied()))?;
    let out = Sink::memory();
    let code = match cli.command {
        Command::Bench(BenchCommand::Sweep(BenchSweepCommand::Plot(a))) => sweep_serve::plot(&a, &out)?,
        Command::Bench(BenchCommand::Sweep(BenchSweepCommand::PlotPareto(a))) => sweep_serve::plot_pareto(&a, &out)?,
        other => panic!("not a plot command: {other:?}"),
    };
    Ok((code, out.text()))
}

/// A sweep's results: two server combinations (`max_num_seqs` 4 and 16, `tensor_parallel_size`
/// 1 and 2) by concurrencies 1, 4 and 16 (100, 300 and 800 output tokens/s a GPU), two runs
/// each, a `summary.json` per combination.
fn results(dir: &Path) {
    for (name, seqs, tp) in [("small", 4, 1), ("big", 16, 2)] {
        for (conc, per_gpu) in [(1, 100.0), (4, 300.0), (16, 800.0)] {
            let runs: Vec<_> = (0..2)
                .map(|run| {
                    let throughput = per_gpu * f64::from(tp);
                    json!({
                        "output_throughput": throughput,
                        "request_throughput": throughput / 100.0,
                        "p99_e2el_ms": 1000.0 + 10.0 * f64::from(conc) + f64::from(run),
                        "max_concurrency": conc,
                        "request_rate": "inf",
                        "run_number": run,
                        "_benchmark_name": name,
                        "max_num_seqs": seqs,
                        "tensor_parallel_size": tp,
                    })
                })
                .collect();
            let comb = dir.join("exp").join(format!("SERVE--{name}-BENCH--max_concurrency={conc}"));
            std::fs::create_dir_all(&comb).unwrap();
            std::fs::write(comb.join("summary.json"), serde_json::to_string_pretty(&runs).unwrap()).unwrap();
        }
    }
}

/// The `<circle>` markers of an SVG figure, and its panels.
fn markers(svg: &str) -> usize {
    svg.matches("<circle ").count()
}

#[test]
fn a_figure_per_group_a_panel_per_column_and_the_mean_of_the_runs_at_each_x() {
    let dir = tempfile::tempdir().unwrap();
    results(dir.path());
    let d = dir.path().to_str().unwrap();
    let (code, out) =
        sweep(&["plot", d, "--var-x", "max_concurrency", "--curve-by", "max_num_seqs", "--fig-by", "_benchmark_name"])
            .unwrap();
    assert_eq!(code, ExitCode::SUCCESS);
    // Files are read in path order: `big` comes first.
    let big = dir.path().join("FIGURE-_benchmark_name=big.svg");
    let expected = format!(
        "[BEGIN FIGURE]\nGroup: {{'_benchmark_name': 'big'}}\nGrid: 1 rows x 1 cols\nOutput file: {}\n[END FIGURE]\n",
        big.display()
    );
    assert!(out.starts_with(&expected), "{out}");
    assert_eq!(out.matches("[BEGIN FIGURE]").count(), 2, "{out}");
    let svg = std::fs::read_to_string(&big).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""), "a standalone SVG file");
    // One curve, three concurrencies: the two runs at each x are one point, their mean.
    assert_eq!(markers(&svg), 3, "{svg}");
    assert!(svg.contains("max_num_seqs=16: max_concurrency=16, 1160.50 p99_e2el_ms"), "{svg}");

    // A column per server, only the runs the filter keeps, and a log x axis.
    let (_, out) = sweep(&[
        "plot",
        d,
        "--var-x",
        "max_concurrency",
        "--var-y",
        "output_throughput",
        "--col-by",
        "max_num_seqs",
        "--filter-by",
        "max_concurrency>1,_benchmark_name!=nobody",
        "--scale-x",
        "log",
        "--fig-dir",
        "figs",
        "--fig-name",
        "tput",
    ])
    .unwrap();
    assert!(out.contains("Grid: 1 rows x 2 cols"), "{out}");
    let svg = std::fs::read_to_string(dir.path().join("figs/tput.svg")).unwrap();
    assert_eq!(svg.matches("<svg x=").count(), 2, "two panels");
    assert_eq!(markers(&svg), 4, "concurrency 1 is filtered out of both panels: {svg}");
    assert!(svg.contains("max_num_seqs=16"), "{svg}");

    // Bins put close x values on one point: 1 and 4 fall in the bin of 0 with a size of 10.
    let (_, _) =
        sweep(&["plot", d, "--var-x", "max_concurrency", "--bin-by", "max_concurrency%10", "--fig-name", "binned"])
            .unwrap();
    let svg = std::fs::read_to_string(dir.path().join("binned.svg")).unwrap();
    assert_eq!(markers(&svg), 2, "{svg}");

    // A dry run says what it would draw and writes nothing.
    let (_, out) = sweep(&["plot", d, "--dry-run", "--fig-name", "dry", "--row-by", "max_num_seqs"]).unwrap();
    assert!(out.contains("Grid: 2 rows x 1 cols"), "{out}");
    assert!(!dir.path().join("dry.svg").exists());
}

#[test]
fn the_pareto_frontier_of_tokens_per_gpu_against_tokens_per_user() {
    let dir = tempfile::tempdir().unwrap();
    results(dir.path());
    let d = dir.path().to_str().unwrap();
    let (code, out) = sweep(&["plot_pareto", d]).unwrap();
    assert_eq!(code, ExitCode::SUCCESS);
    let path = dir.path().join("pareto/PARETO.svg");
    // Per user: throughput / concurrency; per GPU: throughput / tensor_parallel_size. `small`
    // gives (100, 100), (75, 300), (50, 800); `big` (200, 100), (150, 300), (100, 800), each
    // twice: `big`'s three points are the frontier, each once.
    assert_eq!(
        out,
        format!(
            "[BEGIN FIGURE]\nGroup: {{}}\nOutput file: {}\nPlotted 12 points; Pareto frontier size: 3.\n[END FIGURE]\n",
            path.display()
        )
    );
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.contains("Pareto frontier: 100 tok/s/user, 800.00 tok/s/GPU"), "{svg}");
    // The runs are drawn as points, not joined; the frontier is one path.
    assert_eq!(svg.matches("<path ").count(), 1, "{svg}");

    // A count of users taken from another key; a run without one is skipped and said so.
    let (_, out) = sweep(&["plot_pareto", d, "--user-count-var", "max_num_seqs", "--gpu-count-var", "nope"]).unwrap();
    assert!(out.contains("Plotted 12 points"), "{out}");
}

#[test]
fn bad_flags_and_missing_results_say_what_to_pass() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let err = sweep(&["plot", d]).unwrap_err().to_string();
    assert!(err.contains("holds no files of parameter sweep results (summary.json)"), "{err}");
    let missing = dir.path().join("missing");
    let err = sweep(&["plot_pareto", missing.to_str().unwrap()]).unwrap_err().to_string();
    assert!(err.contains("no parameter sweep results under"), "{err}");
    results(dir.path());
    for (args, says) in [
        (vec!["--var-x", "nope"], "cannot find var_x=\"nope\""),
        (vec!["--curve-by", "a,b"], "cannot find curve_by=\"a\""),
        (vec!["--scale-y", "sqrt"], "linear and log"),
        (vec!["--filter-by", "max_concurrency~3"], "has no operator"),
        (vec!["--filter-by", "max_concurrency<many"], "not a number"),
        (vec!["--bin-by", "max_concurrency%0"], "above 0"),
        (vec!["--filter-by", "_benchmark_name>1"], "not a number"),
    ] {
        let err = sweep(&[&["plot", d][..], &args].concat()).unwrap_err().to_string();
        assert!(err.contains(says), "{args:?}: {err}");
    }
    std::fs::write(dir.path().join("summary.json"), "{\"not\": \"a list\"}").unwrap();
    let err = sweep(&["plot", d]).unwrap_err().to_string();
    assert!(err.contains("is not a sweep summary"), "{err}");
}
