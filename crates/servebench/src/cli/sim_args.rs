//! `servebench sim predict`, `sim fit`, `sim validate`, `sim step` and `sim presets` flags.

use clap::Args;

use super::bench_args::{ContentArgs, DatasetArgs, ReportArgs, RequestArgs, RunExtraArgs, TrafficArgs};
use super::resolve::{RunFlags, SimFlags};
use super::sim_model::SimModelArgs;

/// Predict a benchmark in virtual time: the same engine as `sim serve`, no HTTP, no sleeping.
#[derive(Args, Clone, Debug)]
#[command(after_help = super::compat::SPELLINGS_HELP)]
pub struct SimPredictArgs {
    #[command(flatten)]
    pub deployment: SimModelArgs,
    /// How the requests look to the simulated server (`bench serve`'s flags that matter without
    /// a network).
    #[command(flatten)]
    pub requests: RequestArgs,
    #[command(flatten)]
    pub traffic: TrafficArgs,
    #[command(flatten)]
    pub content: ContentArgs,
    #[command(flatten)]
    pub report: ReportArgs,
    #[command(flatten)]
    pub dataset: DatasetArgs,
    /// The run store (SQLite); default in the user's data directory, or $SERVEBENCH_DB.
    #[arg(long, value_name = "PATH", help_heading = "servebench")]
    pub db: Option<String>,
    /// Do not save this prediction to the run store.
    #[arg(long, help_heading = "servebench")]
    pub no_store: bool,
    /// What one GPU costs an hour, in dollars (or any one currency), for the prediction's cost
    /// per million output tokens over the deployment's GPUs.
    #[arg(long, value_name = "USD", help_heading = "servebench")]
    pub gpu_hour_cost: Option<f64>,
    /// Predict exactly the requests of a plan written by `bench serve --dry-run` (its bodies
    /// and send times), as `bench serve --replay-plan` sends them.
    #[arg(long, value_name = "FILE", help_heading = "servebench")]
    pub replay_plan: Option<String>,
}

impl SimPredictArgs {
    /// The run these flags describe: the deployment in virtual time, with no server to reach
    /// and servebench's run options at their defaults but for the store.
    pub fn flags(&self) -> RunFlags<'_> {
        RunFlags {
            virtual_time: true,
            sim: SimFlags::Deployment(&self.deployment),
            endpoint: None,
            request: &self.requests,
            traffic: &self.traffic,
            content: &self.content,
            report: &self.report,
            dataset: &self.dataset,
            extra: RunExtraArgs {
                db: self.db.clone(),
                no_store: self.no_store,
                replay_plan: self.replay_plan.clone(),
                ..RunExtraArgs::default()
            },
            shard: None,
            gpu_hour_cost: self.gpu_hour_cost,
        }
    }
}

/// Fit the simulator's stack constants to measured results and write them as a profile.
/// Without --model, the model the results name (their headings or fields) is fitted.
#[derive(Args, Clone, Debug)]
pub struct SimFitArgs {
    /// Boxed to keep `SimCommand` small.
    #[command(flatten)]
    pub deployment: Box<SimModelArgs>,
    /// Where to write the fitted profile (TOML), for --profile / --sim-profile.
    #[arg(long, value_name = "PROFILE")]
    pub out: String,
    /// Constants to fit, comma-separated (alpha-api-ms, api-us-per-token, api-ms-per-request,
    /// api-us-per-output-token, t0-ms, t-layer-us, t-seq-us, t-moe-us, t-host-ms,
    /// t-host-seq-us, eta-bw, attn-eff, gemm-m-half, eager-layer-us, alpha-ar-us, ar-step-us,
    /// ar-fixed-us, ar-gbs, gemm-eff.FMT, moe-eff.FMT); default: what the results can tell apart
    /// (with tensor parallelism across nodes, the network's ar-step-us too, its ar-gbs where
    /// runs prefill thousands of tokens at once, and its ar-fixed-us where the runs span two or
    /// more group sizes). Each stays within its physical range and is pulled toward the preset's
    /// value (the link's own for the all-reduce's).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub fit: Vec<String>,
    /// At most this many simulations of the whole set of results.
    #[arg(long, default_value_t = 300)]
    pub max_evals: usize,
    /// Fit every result given, even those of another model than --model (by default, when the
    /// results name models, only those of --model are fitted); each run is simulated on its own
    /// model, so one profile is fitted for all of them.
    #[arg(long)]
    pub all_points: bool,
    /// Skip the held-out check (leave one out for up to 10 runs, else 5 folds; its folds are
    /// fitted first, then the whole set once, which is the profile).
    #[arg(long)]
    pub no_holdout: bool,
    /// Measured results: vLLM or servebench result JSON files (one document, one per line,
    /// pretty-printed documents one after another, or a list), vLLM console reports (one or
    /// several result blocks per file, models named by headings such as `Results MODEL`), or
    /// llama-benchy's tables, CSV and JSON; a folder stands for the files in it and its subfolders (a parameter sweep's: its runs).
    #[arg(value_name = "RESULT", required = true)]
    pub results: Vec<String>,
}

/// List the hardware and model presets.
#[derive(Args, Clone, Debug, Default)]
pub struct SimPresetsArgs {
    /// Only the hardware presets.
    #[arg(long, conflicts_with = "models")]
    pub hardware: bool,
    /// Only the model presets.
    #[arg(long)]
    pub models: bool,
}

/// Check the simulator against measured results: predict each with the presets (or a profile),
/// or fit on some and predict the others.
#[derive(Args, Clone, Debug, Default)]
pub struct SimValidateArgs {
    /// The model of results that do not name theirs (a preset id or a config.json path).
    #[arg(long)]
    pub model: Option<String>,
    /// The hardware of results that do not name theirs (their `hw`, `hardware` or `gpu` label).
    #[arg(long)]
    pub hardware: Option<String>,
    /// A serving option applied to every result, as KEY=VALUE (as `sim predict --option`);
    /// results' own `tp`, `pp` and `dp` labels are used unless given here.
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// Stack constants to predict with (a profile from `sim fit`) instead of the presets'.
    #[arg(long, value_name = "PROFILE")]
    pub profile: Option<String>,
    /// Held out by group: fit on every other group, predict this one, for each value of these
    /// labels (comma-separated, e.g. `tp` or `isl,osl`; `num-prompts`, `max-concurrency` and
    /// `request-rate` come from each run's workload where it has no such label).
    #[arg(long, value_name = "KEY", value_delimiter = ',', conflicts_with = "folds")]
    pub leave_out: Vec<String>,
    /// Held out by fold: N folds of the results (result i in fold i mod N).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..))]
    pub folds: Option<u32>,
    /// Held out within each deployment: fit on its results whose label KEY has one of these
    /// values (`KEY=ends`: its lowest and highest), predict its others, e.g.
    /// `num-prompts=1,100` or `max-concurrency=ends`; deployments are told apart by --per.
    #[arg(long, value_name = "KEY=VALUES", conflicts_with_all = ["folds", "leave_out"])]
    pub fit_on: Option<String>,
    /// With --fit-on: the labels that tell deployments apart, each fitted on its own
    /// (comma-separated, e.g. `model,tp` or `tp,isl,osl`) [default: one fit for all results].
    #[arg(long, value_name = "KEY", value_delimiter = ',', requires = "fit_on")]
    pub per: Vec<String>,
    /// Summarise the errors by the values of these labels too (comma-separated, e.g. `hw` or
    /// `hw,tp`); without a split and with results of several devices, by `hw`.
    #[arg(long, value_name = "KEY", value_delimiter = ',')]
    pub by: Vec<String>,
    /// Constants fitted in each fold, comma-separated (default: what the results can tell apart).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub fit: Vec<String>,
    /// At most this many simulations of the fitted set per fold.
    #[arg(long, default_value_t = 120)]
    pub max_evals: usize,
    /// Exit with status 1 when the median error of any metric measured (mean and median TTFT
    /// and TPOT, throughput, mean and median end-to-end latency; held out, or of the presets'
    /// predictions without a split) is above this percentage.
    #[arg(long, value_name = "PCT")]
    pub fail_above: Option<f64>,
    /// Print every point's predictions, not only the summary.
    #[arg(long)]
    pub points: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    /// Runs of the run store to validate too: numbers, short ids or ranges (3-11),
    /// comma-separated. Their labels (`model`, `hw`, `tp`, ...) say what they ran on.
    #[arg(long, value_name = "RUNS", value_delimiter = ',')]
    pub runs: Vec<servebench_store::RunSpec>,
    #[command(flatten)]
    pub db: super::store_args::DbArgs,
    /// Measured results: servebench or vLLM result JSON, vLLM console reports with their
    /// headings, llama-benchy's tables (`ppN` / `tgM` rows), CSV and JSON, or tables of rows
    /// with `isl`, `osl` and `conc` fields (InferenceX's format; `request_rate`, `burstiness`
    /// and `prefix_len`, the tokens every prompt shares, where a row was sent at a rate or
    /// shared a prefix); a folder stands for the files in it and its subfolders (a parameter sweep's: its runs).
    #[arg(value_name = "RESULT", required_unless_present = "runs")]
    pub results: Vec<String>,
}

/// Price one engine step term by term: the cost model's breakdown for a batch you describe.
#[derive(Args, Clone, Debug)]
pub struct SimStepArgs {
    #[command(flatten)]
    pub deployment: SimModelArgs,
    /// Sequences decoding one token each in the step.
    #[arg(long, default_value_t = 1)]
    pub batch: u32,
    /// Tokens of context each decoding sequence has already.
    #[arg(long, default_value_t = 1024)]
    pub context: u32,
    /// Prompt tokens of one sequence prefilled in the same step (a chunk).
    #[arg(long, default_value_t = 0)]
    pub prefill: u32,
    /// Tokens of that prompt already in the KV cache before the chunk (earlier chunks of a long
    /// prompt, or a cached prefix): the chunk attends to them too.
    #[arg(long, default_value_t = 0, value_name = "TOKENS")]
    pub prefill_after: u32,
    /// An image the prefill chunk reaches, HEIGHTxWIDTH pixels (repeat for more): the model's
    /// vision tower encodes it in the step; its tokens are the chunk's (count them in --prefill).
    #[arg(long, value_name = "HEIGHTxWIDTH")]
    pub image: Vec<String>,
    /// Print the breakdown as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Where one GPU's memory goes, as vLLM plans it: weights, the activation reserve and the KV cache.
#[derive(Args, Clone, Debug)]
pub struct SimMemoryArgs {
    #[command(flatten)]
    pub deployment: SimModelArgs,
    /// A vLLM server's start-up log to hold the plan against: the model and settings it names are
    /// planned (flags given here win), and the weights, KV cache and graph memory it printed
    /// stand beside the plan's.
    #[arg(long, value_name = "LOG")]
    pub against: Option<std::path::PathBuf>,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}
