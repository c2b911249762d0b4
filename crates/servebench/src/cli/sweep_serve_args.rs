//! `servebench bench sweep serve`: the flags of vLLM's `vllm bench sweep serve`, as it spells
//! them, plus the run store servebench keeps every run in.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// vLLM's `vllm bench sweep` commands.
#[derive(Subcommand, Debug)]
pub enum BenchSweepCommand {
    /// Start a server for each combination of --serve-params and run the benchmark of each
    /// combination of --bench-params against it, --num-runs times (a drop-in `vllm bench sweep
    /// serve`); `vllm bench serve` commands run as servebench's own `bench serve`.
    Serve(Box<SweepServeArgs>),
    /// As `serve`, exploring the load of each combination (a drop-in `vllm bench sweep
    /// serve_workload`): one request at a time, the whole dataset at once, then
    /// --workload-iters levels of --workload-var spread evenly between what those two reached.
    #[command(name = "serve_workload", alias = "serve-workload")]
    ServeWorkload(Box<SweepServeWorkloadArgs>),
    /// Chart a sweep's results (every `summary.json` under OUTPUT_DIR) as SVG figures: one per
    /// combination of --fig-by, a panel per --row-by and --col-by value, a curve per --curve-by
    /// value of --var-y against --var-x (a drop-in `vllm bench sweep plot`).
    Plot(Box<SweepPlotArgs>),
    /// Chart the Pareto frontier of output tokens per second per GPU against tokens per second
    /// per user over a sweep's results, as `OUTPUT_DIR/pareto/PARETO.svg` (a drop-in `vllm
    /// bench sweep plot_pareto`).
    #[command(name = "plot_pareto", alias = "plot-pareto")]
    PlotPareto(Box<SweepPlotParetoArgs>),
}

/// `bench sweep plot`'s flags, as vLLM spells them.
#[derive(Args, Debug, Clone)]
pub struct SweepPlotArgs {
    /// The folder holding the sweep's results (its --output-dir, or one experiment in it).
    #[arg(value_name = "OUTPUT_DIR", default_value = "results")]
    pub output_dir: PathBuf,
    /// Where the figures are written, relative to OUTPUT_DIR [default: OUTPUT_DIR itself].
    #[arg(long)]
    pub fig_dir: Option<PathBuf>,
    /// Variables, comma-separated: a figure for each combination of their values.
    #[arg(long, default_value = "")]
    pub fig_by: String,
    /// Variables, comma-separated: a row of panels for each combination of their values.
    #[arg(long, default_value = "")]
    pub row_by: String,
    /// Variables, comma-separated: a column of panels for each combination of their values.
    #[arg(long, default_value = "")]
    pub col_by: String,
    /// Variables, comma-separated: a curve for each combination of their values.
    #[arg(long, default_value = "")]
    pub curve_by: String,
    /// The variable along the x axis.
    #[arg(long, default_value = "request_throughput")]
    pub var_x: String,
    /// The variable along the y axis (where several runs share an x, their mean).
    #[arg(long, default_value = "p99_e2el_ms")]
    pub var_y: String,
    /// Runs kept, comma-separated conditions `VAR<OP>VALUE` with OP one of ==, !=, <=, >=, <, >
    /// (e.g. `max_concurrency<1000,max_num_batched_tokens<=4096`).
    #[arg(long, default_value = "")]
    pub filter_by: String,
    /// Bins, comma-separated `VAR%SIZE`: each value of VAR rounded down to a multiple of SIZE
    /// (e.g. `request_throughput%1`), so points that close share an x.
    #[arg(long, default_value = "")]
    pub bin_by: String,
    /// The x axis's scale: linear or log.
    #[arg(long)]
    pub scale_x: Option<String>,
    /// The y axis's scale: linear or log.
    #[arg(long)]
    pub scale_y: Option<String>,
    /// The figures' file names start with this; the figure's group follows.
    #[arg(long, default_value = "FIGURE")]
    pub fig_name: String,
    /// Print the figures that would be drawn, writing nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `bench sweep plot_pareto`'s flags, as vLLM spells them.
#[derive(Args, Debug, Clone)]
pub struct SweepPlotParetoArgs {
    /// The folder holding the sweep's results (its --output-dir, or one experiment in it).
    #[arg(value_name = "OUTPUT_DIR", default_value = "results")]
    pub output_dir: PathBuf,
    /// The result key holding a run's concurrent users; where a run has none (or 0), its
    /// `request_rate`, else the most requests it had in flight (`max_concurrent_requests`).
    #[arg(long, default_value = "max_concurrency")]
    pub user_count_var: String,
    /// The result key holding a run's GPU count [default: its tensor_parallel_size x
    /// pipeline_parallel_size x data_parallel_size, each 1 where not given].
    #[arg(long)]
    pub gpu_count_var: Option<String>,
    /// Print the figure that would be drawn, writing nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Which load `serve_workload` varies.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
#[value(rename_all = "snake_case")]
pub enum WorkloadVar {
    RequestRate,
    MaxConcurrency,
}

impl WorkloadVar {
    /// The benchmark parameter's name.
    pub fn key(self) -> &'static str {
        match self {
            WorkloadVar::RequestRate => "request_rate",
            WorkloadVar::MaxConcurrency => "max_concurrency",
        }
    }
}

/// `bench sweep serve_workload`'s flags: `serve`'s and the workload's.
#[derive(Args, Debug, Clone)]
pub struct SweepServeWorkloadArgs {
    #[command(flatten)]
    pub sweep: SweepServeArgs,
    /// The load varied from level to level.
    #[arg(long, value_enum, default_value = "request_rate")]
    pub workload_var: WorkloadVar,
    /// Levels explored, the first two (one at a time, all at once) included.
    #[arg(long, default_value_t = 10)]
    pub workload_iters: u32,
}

/// `bench sweep serve`'s flags.
#[derive(Args, Debug, Clone)]
pub struct SweepServeArgs {
    /// The command that starts the server, e.g. `vllm serve MODEL` or `servebench sim serve
    /// --model MODEL`; its `--host` and `-p`/`--port` say where it listens (localhost:8000).
    #[arg(long)]
    pub serve_cmd: String,
    /// The benchmark command: `vllm bench serve ...` or `servebench bench serve ...` run as
    /// servebench's `bench serve` in this process; any other command runs as it is.
    #[arg(long)]
    pub bench_cmd: String,
    /// Run this after each benchmark instead of resetting the server's caches (vLLM's
    /// `/reset_prefix_cache`, `/reset_mm_cache` and `/reset_encoder_cache`, which vLLM and the
    /// simulator answer; other servers need this).
    #[arg(long)]
    pub after_bench_cmd: Option<String>,
    /// Show the output of the server and of the benchmarks.
    #[arg(long)]
    pub show_stdout: bool,
    /// Seconds to wait for the server's `/health` to answer 200.
    #[arg(long, default_value_t = 300)]
    pub server_ready_timeout: u64,
    /// A JSON file of server parameter combinations: a list of objects, or an object of named
    /// ones. Each key becomes a flag of --serve-cmd (`max_num_seqs: 8` -> `--max-num-seqs 8`;
    /// true -> `--key`, false -> `--no-key`), replacing the flag where the command has it.
    #[arg(long)]
    pub serve_params: Option<PathBuf>,
    /// A JSON file of benchmark parameter combinations, as --serve-params, for --bench-cmd.
    #[arg(long)]
    pub bench_params: Option<PathBuf>,
    /// Pairs of linked parameters, `SERVE_KEY=BENCH_KEY,...`: only the combinations in which
    /// both have the same value run (e.g. `max_num_seqs=max_concurrency`).
    #[arg(long, default_value = "")]
    pub link_vars: String,
    /// The folder the experiments are written under.
    #[arg(short = 'o', long, default_value = "results")]
    pub output_dir: PathBuf,
    /// The experiment's folder under --output-dir [default: the local time, %Y%m%d_%H%M%S].
    #[arg(short = 'e', long)]
    pub experiment_name: Option<String>,
    /// Runs of each combination.
    #[arg(long, default_value_t = 3)]
    pub num_runs: u32,
    /// Prompts of one unmeasured warm-up run before each combination (saved as warmup.json,
    /// left out of the summaries); 0: none.
    #[arg(long, default_value_t = 0)]
    pub warmup_num_prompts: u32,
    /// Record a failed run (`run=N.failure.json`) or server (`SERVE-NAME-failure.json`) and go on.
    #[arg(long)]
    pub continue_on_error: bool,
    /// Print the commands without running them.
    #[arg(long)]
    pub dry_run: bool,
    /// Go on with an experiment folder that exists, running only the combinations without
    /// results.
    #[arg(long)]
    pub resume: bool,
}
