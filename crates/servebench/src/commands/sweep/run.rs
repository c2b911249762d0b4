//! Running the points of a sweep: each a full `bench serve` run (or a `sim predict` run in
//! virtual time with `--predict`), under its heading, labelled, and recorded whatever happens.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use servebench_core::metrics::Summary;
use servebench_sim::SimSetup;
use servebench_store::{NewRun, RunId, RunKind};
use servebench_workload::Tokenizer;
use tokio::sync::watch;

use super::grid::{Grid, Point, TargetKind, file_suffix};
use crate::cli::BenchServeArgs;
use crate::cli::resolve::{BenchFlags, ResolvedModel, endpoint_urls, parse_backend, parse_kv_list, resolve_run_config};
use crate::commands::bench;
use crate::commands::finish::{Keep, PointOutcome, finish_and_keep};
use crate::commands::finish::{StoreChoice, stamp_dates};
use crate::output;

/// Ctrl-C (or SIGTERM) for the whole sweep: the run in progress is interrupted, kept, and no
/// further run starts.
#[derive(Clone)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// Starts listening for the signals.
    pub fn listen() -> Stop {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            bench::interrupted().await;
            let _ = tx.send(true);
        });
        Stop(rx)
    }

    pub fn requested(&self) -> bool {
        *self.0.borrow()
    }

    /// Completes when a stop is requested.
    pub fn wait(&self) -> impl Future<Output = ()> + use<> {
        let mut rx = self.0.clone();
        async move {
            if rx.wait_for(|stop| *stop).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// A finished run of a point.
#[derive(Clone, Debug)]
pub struct Done {
    pub summary: Summary,
    /// Its number in the run store.
    pub stored: Option<RunId>,
    /// The run itself, kept when the store is not written (`--no-store`) for the table at the end.
    pub run: Option<NewRun>,
    pub interrupted: bool,
}

/// One run of one point, finished or failed.
#[derive(Clone, Debug)]
pub struct RunRecord {
    /// Index of the point in [`Runner::points`].
    pub point: usize,
    /// 1-based.
    pub repeat: u32,
    /// The labels that tell it from the sweep's other runs (those that vary, the repeat).
    pub shown: Vec<(String, String)>,
    /// The progress line's description of the point.
    pub described: String,
    pub outcome: Result<Done, String>,
}

/// The model a target serves, as resolved once: `(model id, name sent in requests)`.
type Resolved = Result<(String, Option<String>), String>;

/// Runs points one after the other and records them.
pub struct Runner<'a> {
    pub base: &'a BenchServeArgs,
    pub grid: &'a Grid,
    pub predict: bool,
    pub tokenizer: Option<Arc<Tokenizer>>,
    pub stop: Stop,
    /// `("sweep", NAME)` or `("search", NAME)`: the label every run gets.
    pub id_label: (String, String),
    /// The settings that vary (see [`Grid::varying`]): shown in headings and progress, and
    /// labels like the settings given on the command line ([`Grid::given`]).
    pub varying: Vec<String>,
    pub repeats: u32,
    /// Every point run so far, in order; [`RunRecord::point`] indexes it.
    pub points: Vec<Point>,
    pub runs: Vec<RunRecord>,
    setups: Vec<Option<Result<Arc<SimSetup>, String>>>,
    models: Vec<Option<Resolved>>,
    /// Whether the setup notes of each simulator target were printed.
    noted: Vec<bool>,
}

impl<'a> Runner<'a> {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        base: &'a BenchServeArgs,
        grid: &'a Grid,
        predict: bool,
        tokenizer: Option<Arc<Tokenizer>>,
        stop: Stop,
        id_label: (String, String),
        varying: Vec<String>,
        repeats: u32,
    ) -> Runner<'a> {
        let n = grid.targets.len();
        Runner {
            base,
            grid,
            predict,
            tokenizer,
            stop,
            id_label,
            varying,
            repeats,
            points: Vec::new(),
            runs: Vec::new(),
            setups: vec![None; n],
            models: vec![None; n],
            noted: vec![false; n],
        }
    }

    fn choice(&self) -> StoreChoice<'a> {
        StoreChoice { db: self.base.extra.db.as_deref(), no_store: self.base.extra.no_store }
    }

    /// Runs `point` once as repeat `repeat` with `extra` labels after the grid's; `progress`
    /// starts its line on stderr (`point 3/12`). Returns the index of its record.
    pub async fn run(&mut self, point: &Point, repeat: u32, extra: &[(String, String)], progress: &str) -> usize {
        let index = match self.points.iter().position(|p| p == point) {
            Some(i) => i,
            None => {
                self.points.push(point.clone());
                self.points.len() - 1
            }
        };
        let model = self.model(point).await;
        let mut labels = vec![self.id_label.clone()];
        let mut shown = Vec::new();
        for (k, v) in self.grid.settings(point) {
            let v = match (&model, k.as_str()) {
                (Ok((id, _)), "model") => id.clone(),
                _ => v,
            };
            if self.varying.contains(&k) {
                shown.push((k.clone(), v.clone()));
            }
            if self.varying.contains(&k) || self.grid.given.contains(&k) {
                labels.push((k, v));
            }
        }
        for extra in std::iter::once(("repeat".to_string(), repeat.to_string())).chain(extra.iter().cloned()) {
            shown.push(extra.clone());
            labels.push(extra);
        }
        let described = describe(&shown);
        let repeat_text = if self.repeats > 1 { format!(" (repeat {repeat}/{})", self.repeats) } else { String::new() };
        output::note(format_args!("{progress}{repeat_text}: {described}"));

        let outcome = match model {
            Ok((id, served)) => {
                let _ = print_heading(&shown, self.repeats);
                let mut args = self.grid.args(self.base, point);
                args.endpoint.model = Some(id);
                if args.endpoint.request.served_model_name.is_none() {
                    args.endpoint.request.served_model_name = served;
                }
                let mut suffix_labels = shown.clone();
                if self.repeats == 1 {
                    suffix_labels.retain(|(k, _)| k != "repeat");
                }
                let keep = Keep {
                    kind: if self.predict { RunKind::Predict } else { RunKind::Sweep },
                    labels,
                    file_suffix: Some(file_suffix(&suffix_labels, point.target)),
                    uncertainty: None,
                };
                let ran = if self.predict {
                    self.predict_point(&args, point.target, repeat, &keep).await
                } else {
                    bench::run_point(&args, self.tokenizer.clone(), &keep, self.stop.wait())
                        .await
                        .and_then(|o| o.context("a sweep point sent nothing"))
                };
                ran.map(|o| self.done(o)).map_err(|e| one_line(&e))
            }
            Err(e) => Err(e),
        };
        match &outcome {
            Err(e) => {
                let _ = output::line(format!("This point failed: {e}"));
                output::note(format_args!("{progress}{repeat_text} failed: {e}"));
            }
            Ok(done) if done.summary.completed == 0 && done.summary.failed.unwrap_or(0) > 0 => {
                output::note(format_args!(
                    "{progress}{repeat_text}: every request failed ({}{})",
                    done.summary.failed.unwrap_or(0),
                    done.summary.failure_messages.first().map(|m| format!("; first: {m}")).unwrap_or_default()
                ));
            }
            Ok(_) => {}
        }
        self.runs.push(RunRecord { point: index, repeat, shown, described, outcome });
        self.runs.len() - 1
    }

    fn done(&self, o: PointOutcome) -> Done {
        Done {
            interrupted: o.result.interrupted,
            stored: o.stored,
            run: (o.stored.is_none()).then_some(o.run),
            summary: o.summary,
        }
    }

    /// The model of target `t`: given, the simulator's, or asked of the server once (as
    /// `bench serve` does, with its messages).
    async fn model(&mut self, point: &Point) -> Resolved {
        let t = point.target;
        if let Some(known) = &self.models[t] {
            return known.clone();
        }
        let target = self.grid.targets[t].clone();
        let resolved = match (&target.kind, &target.model) {
            (_, Some(m)) => Ok((m.clone(), None)),
            (TargetKind::Sim { .. }, None) => self.setup(t).map(|s| (s.model.id.clone(), None)),
            (TargetKind::Server { .. }, None) => self.ask_model(point).await,
        };
        self.models[t] = Some(resolved.clone());
        resolved
    }

    async fn ask_model(&self, point: &Point) -> Resolved {
        let args = self.grid.args(self.base, point);
        let asked = async {
            let backend = parse_backend(&args.endpoint.request.backend)?;
            let base_url = endpoint_urls(&args.endpoint, backend).0;
            let headers = parse_kv_list(&args.endpoint.header, "--header")?;
            output::line("Model not specified, fetching first model from server...")?;
            let api_key = servebench_client::env_api_key();
            let info = servebench_client::fetch_models(&base_url, &headers, api_key, args.endpoint.insecure)
                .await
                .with_context(|| {
                    format!(
                        "could not fetch the model list from {base_url}/v1/models; is the server running? Or pass --model"
                    )
                })?;
            let id = info.root.clone().unwrap_or_else(|| info.id.clone());
            output::line(format!("First model name: {}, first model id: {id}", info.id))?;
            anyhow::Ok((id, Some(info.id)))
        };
        asked.await.map_err(|e| one_line(&e))
    }

    /// The simulator setup of target `t`, resolved once.
    fn setup(&mut self, t: usize) -> Result<Arc<SimSetup>, String> {
        if let Some(s) = &self.setups[t] {
            return s.clone();
        }
        let resolved = match self.grid.targets[t].sim() {
            Some(sim) => SimSetup::resolve(
                &sim.model,
                &sim.hardware,
                &sim.options,
                sim.profile.as_deref().map(std::path::Path::new),
            )
            .map(Arc::new)
            .map_err(|e| format!("the simulator cannot run {}@{}: {e}", sim.model, sim.hardware)),
            None => Err("not a simulator target".to_string()),
        };
        self.setups[t] = Some(resolved.clone());
        resolved
    }

    /// A `--sim` point in virtual time, as `sim predict` runs it. Repeats vary the engine's
    /// seed (its step-time jitter), not the prompts.
    async fn predict_point(
        &mut self,
        args: &BenchServeArgs,
        t: usize,
        repeat: u32,
        keep: &Keep,
    ) -> anyhow::Result<PointOutcome> {
        let setup = self.setup(t).map_err(anyhow::Error::msg)?;
        if !std::mem::replace(&mut self.noted[t], true) {
            for note in &setup.notes {
                output::line(format!("Simulated: {note}"))?;
            }
        }
        let sim = self.grid.targets[t].sim().context("--predict needs a --sim target")?.clone();
        let base_url = format!("sim://{}@{}", sim.model, sim.hardware);
        let model_id = args.endpoint.model.clone().unwrap_or_else(|| setup.model.id.clone());
        let model = ResolvedModel {
            model_name: args.endpoint.request.served_model_name.clone().unwrap_or_else(|| model_id.clone()),
            model_id,
        };
        let mut endpoint = args.endpoint.clone();
        endpoint.base_url = Some(base_url.clone());
        let flags = BenchFlags {
            endpoint: &endpoint,
            traffic: &args.traffic,
            content: &args.content,
            report: &args.report,
            dataset: &args.dataset,
            extra: &args.extra,
        };
        let config = resolve_run_config(&flags, Some(sim), Some(&base_url), model)?;
        let plan = servebench_workload::build_plan(&config, self.tokenizer.as_deref())
            .context("could not build the workload")?;
        for note in &plan.notes {
            output::line(note)?;
        }
        let mut engine = (*setup).clone();
        engine.options.seed = engine.options.seed.wrapping_add(u64::from(repeat.saturating_sub(1)));
        let started = jiff::Zoned::now();
        let clock = Instant::now();
        let requests = plan.len();
        let (mut result, engine) = tokio::task::spawn_blocking(move || {
            let result = servebench_sim::predict(&plan, &config, &engine);
            (result, engine)
        })
        .await
        .context("the prediction stopped")?;
        let took = clock.elapsed();
        stamp_dates(&mut result, &started);
        for note in result.notes.iter().skip(setup.notes.len()) {
            output::line(format!("Simulated: {note}"))?;
        }
        output::line(format!(
            "Predicted {requests} requests ({:.1} s of simulated serving) in {:.0} ms.",
            result.duration_s,
            took.as_secs_f64() * 1e3
        ))?;
        let env = serde_json::to_value(&engine).ok().map(|s| serde_json::json!({ "simulated": s }));
        let keep = Keep { uncertainty: Some(engine.hardware.uncertainty.clone()), ..keep.clone() };
        finish_and_keep(result, env, &keep, &self.choice())
    }
}

/// An error on one line: its message, and its root cause when the message does not say it.
fn one_line(e: &anyhow::Error) -> String {
    let (top, root) = (e.to_string(), e.root_cause().to_string());
    if top.contains(&root) { top } else { format!("{top}: {root}") }
}

/// `model=Qwen/Qwen3-8B max_concurrency=16`: labels as the progress line shows them (the
/// repeat and the probe are shown apart).
pub fn describe(labels: &[(String, String)]) -> String {
    labels
        .iter()
        .filter(|(k, _)| k != "repeat" && k != "probe")
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The heading above a point's output, as people write them above pasted reports (and as
/// `servebench import` reads them back as labels): `Results MODEL`, then `key: value`.
fn print_heading(labels: &[(String, String)], repeats: u32) -> std::io::Result<()> {
    let model = labels.iter().find(|(k, _)| k == "model").map_or("?", |(_, v)| v.as_str());
    let mut text = format!("\nResults {model}\n");
    for (k, v) in labels {
        if k == "model" || (k == "repeat" && repeats == 1) {
            continue;
        }
        text.push_str(&format!("{k}: {v}\n"));
    }
    output::out(&text)
}
