//! `servebench sim predict`, `sim fit` and `sim presets` flags.

use clap::Args;

use super::args::{ContentArgs, DatasetArgs, EndpointArgs, ReportArgs, RequestArgs, RunExtraArgs, TrafficArgs};
use super::resolve::BenchFlags;
use super::sim_model::SimModelArgs;

/// Predict a benchmark in virtual time: the same engine as `sim serve`, no HTTP, no sleeping.
#[derive(Args, Clone, Debug)]
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
}

impl SimPredictArgs {
    /// The endpoint flags `resolve_run_config` expects, for a target at `base_url`.
    pub fn endpoint(&self, base_url: &str, model: &str) -> EndpointArgs {
        EndpointArgs {
            base_url: Some(base_url.to_string()),
            model: Some(model.to_string()),
            request: self.requests.clone(),
            ..EndpointArgs::default()
        }
    }

    /// servebench's run options: the store, else the defaults (no timeouts apply in virtual
    /// time).
    pub fn extra(&self) -> RunExtraArgs {
        RunExtraArgs { db: self.db.clone(), no_store: self.no_store, ..RunExtraArgs::default() }
    }

    /// The flags [`resolve_run_config`](super::resolve::resolve_run_config) reads, with
    /// [`Self::endpoint`] and [`Self::extra`].
    pub fn flags<'a>(&'a self, endpoint: &'a EndpointArgs, extra: &'a RunExtraArgs) -> BenchFlags<'a> {
        BenchFlags {
            endpoint,
            traffic: &self.traffic,
            content: &self.content,
            report: &self.report,
            dataset: &self.dataset,
            extra,
        }
    }
}

/// Fit the simulator's stack constants to measured results and write them as a profile.
#[derive(Args, Clone, Debug)]
pub struct SimFitArgs {
    /// Boxed to keep `SimCommand` small.
    #[command(flatten)]
    pub deployment: Box<SimModelArgs>,
    /// Where to write the fitted profile (TOML), for --profile / --sim-profile.
    #[arg(long, value_name = "PROFILE")]
    pub out: String,
    /// Constants to fit, comma-separated (t0-ms, t-layer-us, t-seq-us, t-moe-us, alpha-api-ms,
    /// eta-bw, eta-f-prefill.FMT, eta-f-decode.FMT, eta-f-moe.FMT, eager-ms, alpha-ar-us);
    /// default: what the results can tell apart.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub fit: Vec<String>,
    /// At most this many simulations of the whole set of results.
    #[arg(long, default_value_t = 300)]
    pub max_evals: usize,
    /// Fit every result given, even those of another model than --model (by default, when the
    /// results name models, only those of --model are fitted).
    #[arg(long)]
    pub all_points: bool,
    /// Measured results: vLLM or servebench result JSON files (one document, one per line,
    /// pretty-printed documents one after another, or a list), or vLLM console reports (one or
    /// several result blocks per file, models named by headings such as `Results MODEL`).
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
