//! The one step from a run's flags to a [`Resolved`] run: the validated config, what executes
//! it, the tokenizer, the plan's source and where the run is kept.
//!
//! [`cli::resolve`](crate::cli::resolve) checks the flags without I/O; this step then looks up
//! what they name (ripgrep's "high args"): the model a server serves (`GET /v1/models`, with
//! vLLM's lines), the simulator's deployment, the tokenizer file. `bench serve`, `sim predict`
//! and every point of a sweep resolve here, through a [`Resolver`] that looks each thing up
//! once, so everything downstream reads one resolved value.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use serde::Serialize;
use servebench_core::config::{RunConfig, SimTarget, Target};
use servebench_sim::SimSetup;
use servebench_sim::server::Dialect;
use servebench_workload::Tokenizer;

use crate::cli::resolve::{RunFlags, run_config};
use crate::commands::finish::StoreChoice;
use crate::commands::shard::{ShardRun, shard_run};
use crate::output::Sink;

/// A run, resolved: everything [`execute`](super::execute::execute) needs. Saved with the
/// result through its config; a part of a larger run would be told apart here too.
#[derive(Clone, Serialize)]
pub struct Resolved {
    pub config: RunConfig,
    pub executor: Executor,
    /// `--replay-plan FILE`: the plan is read, not built, and sent exactly as written.
    pub replay_plan: Option<String>,
    /// `--dry-run FILE`: the plan is written there and nothing is sent.
    pub dry_run: Option<String>,
    pub store: StoreChoice,
    /// `--shard`: this run is one worker's share of a sharded run (its result is saved for
    /// `servebench merge`, and stored only once merged).
    pub shard: Option<ShardRun>,
    /// `--tokenizer`, loaded (its name is in the config).
    #[serde(skip)]
    pub tokenizer: Option<Arc<Tokenizer>>,
}

/// What runs the requests.
#[derive(Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Executor {
    /// A server over HTTP, at the config's base URL.
    Http,
    /// The simulator, started on a loopback port for the run and benchmarked over HTTP.
    Loopback {
        #[serde(serialize_with = "shared")]
        setup: Arc<SimSetup>,
        /// Whose HTTP API it answers in (`--sim-option dialect=...`).
        #[serde(serialize_with = "dialect_name")]
        dialect: Dialect,
        /// `--seed`: seeds the engine (with its own seed) and its generated text.
        seed: u64,
    },
    /// The simulator in virtual time: no HTTP, no sleeping.
    Virtual {
        #[serde(serialize_with = "shared")]
        setup: Arc<SimSetup>,
    },
}

fn shared<S: serde::Serializer>(setup: &Arc<SimSetup>, s: S) -> Result<S::Ok, S::Error> {
    setup.as_ref().serialize(s)
}

fn dialect_name<S: serde::Serializer>(d: &Dialect, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(d.name())
}

impl Resolved {
    /// Repeat `repeat` (1-based) of a run: in virtual time the engine's seed (its step-time
    /// jitter) moves on, so repeats differ as measured ones do; the prompts stay the same.
    pub fn repeat(mut self, repeat: u32) -> Resolved {
        if let Executor::Virtual { setup } = &mut self.executor {
            let engine = Arc::make_mut(setup);
            engine.options.seed = engine.options.seed.wrapping_add(u64::from(repeat.saturating_sub(1)));
        }
        self
    }
}

/// A model as a server lists it: `(id for results, name for requests)`.
type ServedModel = (String, String);

/// Resolves runs, looking up each tokenizer, simulator deployment and server's model once: a
/// failed lookup fails every run that needs it, with the same message, without asking again.
#[derive(Default)]
pub struct Resolver {
    tokenizers: Vec<(String, Arc<Tokenizer>)>,
    setups: Vec<(SimTarget, Result<Arc<SimSetup>, String>)>,
    /// Keyed by the server's base URL.
    models: Vec<(String, Result<ServedModel, String>)>,
}

/// What a run writes, checked before it starts: a result file or a plan named where a run
/// store is, and an empty file name, are refused then, not after the run. (The store itself is
/// opened just before the run starts: [`StoreChoice::check`].)
fn check_outputs(config: &RunConfig, dry_run: Option<&str>) -> anyhow::Result<()> {
    if config.output.result_filename.as_deref() == Some("") {
        anyhow::bail!("--result-filename is empty; give a file name, or leave it out for vLLM's default name");
    }
    if let Some(name) = &config.output.result_filename {
        let path = servebench_core::vllm::json::result_filename(config, &config.target.model_id, "");
        servebench_store::refuse_store_overwrite(&path)
            .with_context(|| format!("--result-filename {name} cannot be written"))?;
    }
    if let Some(plan) = dry_run {
        servebench_store::refuse_store_overwrite(Path::new(plan)).context("--dry-run cannot write its plan there")?;
    }
    Ok(())
}

impl Resolver {
    /// Resolves the run `f` describes; the lookup of a server's model prints vLLM's lines.
    pub async fn resolve(&mut self, f: &RunFlags<'_>, out: &Sink) -> anyhow::Result<Resolved> {
        let mut config = run_config(f)?;
        let shard = match f.shard {
            Some(args) => shard_run(args)?,
            None => None,
        };
        let tokenizer = match &f.request.tokenizer {
            Some(spec) => Some(self.tokenizer(spec)?),
            None => None,
        };
        let given = f.endpoint.and_then(|e| e.model.clone());
        let served = f.request.served_model_name.clone();
        let (executor, (model_id, model_name)) = match &config.target.sim {
            None => (Executor::Http, self.server_model(&config.target, given, served, out).await?),
            Some(target) => {
                let (engine_options, dialect) = split_dialect(&target.options)?;
                let setup = self.setup(&SimTarget { options: engine_options, ..target.clone() })?;
                config.target.gpus = Some(setup.options.gpus());
                let id = given.unwrap_or_else(|| setup.model.id.clone());
                let model = (id.clone(), served.unwrap_or(id));
                let executor = if f.virtual_time {
                    Executor::Virtual { setup }
                } else {
                    Executor::Loopback { setup, dialect, seed: f.traffic.seed }
                };
                (executor, model)
            }
        };
        (config.target.model_id, config.target.model_name) = (model_id, model_name);
        // A worker's share is stored once merged.
        let store = StoreChoice { db: f.extra.db.clone(), no_store: f.extra.no_store || shard.is_some() };
        check_outputs(&config, f.extra.dry_run.as_deref())?;
        Ok(Resolved {
            config,
            executor,
            replay_plan: f.extra.replay_plan.clone(),
            dry_run: f.extra.dry_run.clone(),
            store,
            shard,
            tokenizer,
        })
    }

    /// The tokenizer `spec` names, loaded once.
    pub fn tokenizer(&mut self, spec: &str) -> anyhow::Result<Arc<Tokenizer>> {
        if let Some((_, t)) = self.tokenizers.iter().find(|(s, _)| s == spec) {
            return Ok(t.clone());
        }
        let loaded = load_tokenizer(spec)?;
        self.tokenizers.push((spec.to_string(), loaded.clone()));
        Ok(loaded)
    }

    /// The simulator's deployment for `target`, with the user's presets and profile.
    fn setup(&mut self, target: &SimTarget) -> anyhow::Result<Arc<SimSetup>> {
        if let Some((_, known)) = self.setups.iter().find(|(t, _)| t == target) {
            return known.clone().map_err(anyhow::Error::msg);
        }
        let profile = target.profile.as_deref().map(Path::new);
        let setup = SimSetup::resolve(&target.model, &target.hardware, &target.options, profile)
            .map(Arc::new)
            .with_context(|| format!("the simulator cannot run {}@{}", target.model, target.hardware));
        self.setups.push((target.clone(), remembered(&setup)));
        setup
    }

    /// `--model`, or the first model the server at `target` lists (vLLM's behaviour and
    /// lines): `(model id, name sent in requests)`, `--served-model-name` the latter.
    async fn server_model(
        &mut self,
        target: &Target,
        given: Option<String>,
        served: Option<String>,
        out: &Sink,
    ) -> anyhow::Result<ServedModel> {
        if let Some(model) = given {
            return Ok((model.clone(), served.unwrap_or(model)));
        }
        let base_url = &target.base_url;
        let known = self.models.iter().find(|(url, _)| url == base_url).map(|(_, m)| m.clone());
        let (id, name) = match known {
            Some(known) => known.map_err(anyhow::Error::msg)?,
            None => {
                let asked = ask_model(target, out).await;
                self.models.push((base_url.clone(), remembered(&asked)));
                asked?
            }
        };
        Ok((id, served.unwrap_or(name)))
    }
}

/// vLLM's lookup of the first model a server lists: `(its root, its id)`.
async fn ask_model(target: &Target, out: &Sink) -> anyhow::Result<ServedModel> {
    out.line("Model not specified, fetching first model from server...")?;
    let (base_url, api_key) = (&target.base_url, servebench_client::env_api_key());
    let info = servebench_client::fetch_models(base_url, &target.headers, api_key, target.insecure)
        .await
        .with_context(|| {
            format!("could not fetch the model list from {base_url}/v1/models; is the server running? Or pass --model")
        })?;
    let id = info.root.clone().unwrap_or_else(|| info.id.clone());
    out.line(format!("First model name: {}, first model id: {id}", info.id))?;
    Ok((id, info.id))
}

/// Loads the tokenizer `--tokenizer` names.
pub fn load_tokenizer(spec: &str) -> anyhow::Result<Arc<Tokenizer>> {
    Tokenizer::load(spec).map(Arc::new).context("could not load the tokenizer given by --tokenizer")
}

/// A lookup as remembered for the runs after the first: its value, or its error on one line.
fn remembered<T: Clone>(looked_up: &anyhow::Result<T>) -> Result<T, String> {
    match looked_up {
        Ok(value) => Ok(value.clone()),
        Err(e) => Err(one_line(e)),
    }
}

/// `dialect=vllm|llama.cpp|sglang` among `--sim-option`s is the HTTP server's, not the
/// engine's: the engine's options, and the dialect (the last given).
fn split_dialect(options: &[(String, String)]) -> anyhow::Result<(Vec<(String, String)>, Dialect)> {
    let (dialects, engine): (Vec<_>, Vec<_>) = options.iter().cloned().partition(|(k, _)| k.trim() == "dialect");
    let dialect = match dialects.last() {
        Some((_, v)) => v.parse::<Dialect>().context("--sim-option dialect")?,
        None => Dialect::default(),
    };
    Ok((engine, dialect))
}

/// An error on one line: its message, and its root cause when the message does not say it.
pub fn one_line(e: &anyhow::Error) -> String {
    let (top, root) = (e.to_string(), e.root_cause().to_string());
    if top.contains(&root) { top } else { format!("{top}: {root}") }
}

/// The simulated deployment `sim serve`, `sim fit` and `sim step` name with their flags.
pub fn deployment_setup(d: &crate::cli::sim_model::SimModelArgs) -> anyhow::Result<SimSetup> {
    Ok(SimSetup::resolve(&d.model_spec()?, &d.hardware, &d.option_pairs()?, d.profile.as_deref().map(Path::new))?)
}

#[cfg(test)]
mod tests;
