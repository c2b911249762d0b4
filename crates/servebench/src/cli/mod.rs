//! The command line: clap structs for every subcommand ("low args") and their resolution.

pub mod bench_args;
pub mod compat;
pub mod config_file;
pub mod dotted_args;
pub mod launch_args;
pub mod merge_args;
pub mod report_args;
pub mod resolve;
pub mod selftest_args;
pub mod shard_args;
pub mod sim_args;
pub mod sim_model;
pub mod sim_serve;
pub mod store_args;
pub mod sweep_args;
pub mod sweep_serve_args;

use clap::{Args, Parser, Subcommand};

use bench_args::{ContentArgs, DatasetArgs, EndpointArgs, ReportArgs, RunExtraArgs, SimTargetArgs, TrafficArgs};

/// Measure, predict and compare the performance of LLM serving engines.
#[derive(Parser, Debug)]
#[command(name = "servebench", version, infer_long_args = true, args_override_self = true, max_term_width = 110)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Benchmark a server (a drop-in `vllm bench serve`).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// List, show, remove and export the runs in the run store.
    #[command(subcommand)]
    Runs(store_args::RunsCommand),
    /// Import vLLM result files (JSON) and console reports (text) into the run store.
    Import(store_args::ImportArgs),
    /// Compare stored runs: side by side, as a sweep, or two with confidence intervals and --fail-on rules.
    Compare(report_args::CompareArgs),
    /// Write stored runs as one self-contained HTML report with charts, tables and findings.
    Report(report_args::HtmlReportArgs),
    /// The built-in simulator: serve it, predict a benchmark in virtual time, fit it to measurements.
    #[command(subcommand)]
    Sim(SimCommand),
    /// Run `bench serve` over a grid of loads, lengths and targets, or search for the highest
    /// load that meets SLOs; every point is kept in the run store and compared at the end.
    #[command(after_help = compat::SPELLINGS_HELP)]
    Sweep(Box<sweep_args::SweepArgs>),
    /// Measure this machine's client error: the real client against the built-in scripted server
    /// at rising concurrency, compared with the server's own send times.
    Selftest(selftest_args::SelftestArgs),
    /// Merge the result files of a sharded run's workers into one exact report, result JSON and stored run.
    Merge(merge_args::MergeArgs),
    /// Print a Kubernetes manifest or an sbatch script that runs a sharded `bench serve`.
    #[command(subcommand)]
    Launch(launch_args::LaunchCommand),
}

/// `servebench sim ...`. Each variant's flags live in their own file.
#[derive(Subcommand, Debug)]
pub enum SimCommand {
    /// Serve a simulated engine over an OpenAI-compatible HTTP API.
    Serve(Box<sim_serve::SimServeArgs>),
    /// Predict a benchmark in virtual time (`bench serve`'s workload flags, no server) and print its report.
    Predict(Box<sim_args::SimPredictArgs>),
    /// Fit the simulator's stack constants to measured results and write them as a profile.
    Fit(sim_args::SimFitArgs),
    /// Check the simulator against measured results, with the presets or held out.
    Validate(Box<sim_args::SimValidateArgs>),
    /// Price one engine step term by term (weights, experts, attention, all-reduce, fixed costs).
    Step(Box<sim_args::SimStepArgs>),
    /// Show where one GPU's memory goes (weights, activation reserve, KV cache), in vLLM's log's terms.
    Memory(Box<sim_args::SimMemoryArgs>),
    /// List the hardware and model presets.
    Presets(sim_args::SimPresetsArgs),
}

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Benchmark an OpenAI-compatible server, or the built-in simulator with --sim.
    Serve(Box<BenchServeArgs>),
    /// Benchmark servers started with each combination of parameters, and chart the results
    /// (drop-ins for `vllm bench sweep serve`, `serve_workload`, `plot` and `plot_pareto`).
    #[command(subcommand)]
    Sweep(sweep_serve_args::BenchSweepCommand),
}

/// `servebench bench serve`: vLLM 0.33's `vllm bench serve` flags plus servebench's own.
#[derive(Args, Debug, Clone, Default)]
#[command(infer_long_args = true, after_help = compat::SPELLINGS_HELP)]
pub struct BenchServeArgs {
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    #[command(flatten)]
    pub traffic: TrafficArgs,
    #[command(flatten)]
    pub content: ContentArgs,
    #[command(flatten)]
    pub report: ReportArgs,
    #[command(flatten)]
    pub dataset: DatasetArgs,
    #[command(flatten)]
    pub sim: SimTargetArgs,
    #[command(flatten)]
    pub extra: RunExtraArgs,
    #[command(flatten)]
    pub shard: shard_args::ShardArgs,
    /// Accepted for compatibility: servebench's tokenizers are always Hugging Face `tokenizer.json` ("hf").
    #[arg(long, hide = true, value_parser = ["auto", "hf"])]
    pub tokenizer_mode: Option<String>,
    /// Accepted for compatibility: servebench never runs code from a model repository.
    #[arg(long, hide = true)]
    pub trust_remote_code: bool,
}

impl BenchServeArgs {
    /// The run these flags describe; a `--sim` target runs in virtual time when `virtual_time`
    /// (`sweep --predict`), else on a loopback port.
    pub fn flags(&self, virtual_time: bool) -> resolve::RunFlags<'_> {
        resolve::RunFlags {
            virtual_time,
            sim: resolve::SimFlags::Target(&self.sim),
            endpoint: Some(&self.endpoint),
            request: &self.endpoint.request,
            traffic: &self.traffic,
            content: &self.content,
            report: &self.report,
            dataset: &self.dataset,
            extra: self.extra.clone(),
            shard: Some(&self.shard),
            gpu_hour_cost: self.endpoint.gpu_hour_cost,
        }
    }
}
