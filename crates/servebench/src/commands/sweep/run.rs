//! Running the points of a sweep: each resolved and executed as `bench serve` runs (in virtual
//! time, as `sim predict` runs, with `--predict`), under its heading, labelled, and recorded
//! whatever happens.

use std::future::Future;

use anyhow::Context as _;
use servebench_core::metrics::Summary;
use servebench_store::{NewRun, RunId, RunKind};
use tokio::sync::watch;

use super::grid::{Grid, Point, file_suffix};
use crate::cli::BenchServeArgs;
use crate::commands::bench;
use crate::commands::execute::{execute, plan};
use crate::commands::finish::{Keep, PointOutcome};
use crate::commands::resolve::{Resolved, Resolver, one_line};
use crate::commands::workers::send_by_workers;
use crate::output::{self, Sink};

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
    /// The stop rule that ended it early, in words.
    pub stopped_by: Option<String>,
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

/// Runs points one after the other and records them.
pub struct Runner<'a> {
    pub base: &'a BenchServeArgs,
    pub grid: &'a Grid,
    pub predict: bool,
    /// Looks up each target's model, simulator and the tokenizer once for all points.
    pub resolver: Resolver,
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
    pub out: Sink,
    /// `--workers N`: every run is sent by N worker processes and merged here.
    pub workers: Option<u32>,
}

impl Runner<'_> {
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
        let args = self.grid.args(self.base, point);
        let resolved = self.resolver.resolve(&args.flags(self.predict), &self.out).await.map(|r| r.repeat(repeat));
        let mut labels = vec![self.id_label.clone()];
        let mut shown = Vec::new();
        for (k, v) in self.grid.settings(point) {
            let v = match (&resolved, k.as_str()) {
                (Ok(r), "model") => r.config.target.model_id.clone(),
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

        let outcome = match resolved {
            Ok(resolved) => {
                let _ = print_heading(&shown, self.repeats, &self.out);
                let mut suffix_labels = shown.clone();
                if self.repeats == 1 {
                    suffix_labels.retain(|(k, _)| k != "repeat");
                }
                let keep = Keep {
                    kind: if self.predict { RunKind::Predict } else { RunKind::Sweep },
                    labels,
                    file_suffix: Some(file_suffix(&suffix_labels, point.target)),
                };
                let executed = match self.workers {
                    Some(n) => self.by_workers(n, &resolved, point, repeat, &keep).await,
                    None => self.execute(&resolved, &keep).await,
                };
                executed.map(|o| self.done(o)).map_err(|e| one_line(&e))
            }
            Err(e) => Err(one_line(&e)),
        };
        match &outcome {
            Err(e) => {
                let _ = self.out.line(format!("This point failed: {e}"));
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
            stopped_by: o.result.stopped_by.clone(),
            stored: o.stored,
            run: (o.stored.is_none()).then_some(o.run),
            summary: o.summary,
        }
    }

    /// One run of a resolved point, as `bench serve` runs it.
    async fn execute(&self, resolved: &Resolved, keep: &Keep) -> anyhow::Result<PointOutcome> {
        let plan = plan(resolved)?;
        execute(resolved, plan, keep, self.stop.wait(), &self.out).await?.context("a sweep point sent nothing")
    }
}

impl Runner<'_> {
    /// One run sent by `workers` processes of this sweep, each told the run (`point`, `repeat`)
    /// and its shard; their shares merged into the run this sweep reports and keeps.
    async fn by_workers(
        &self,
        workers: u32,
        resolved: &Resolved,
        point: &Point,
        repeat: u32,
        keep: &Keep,
    ) -> anyhow::Result<PointOutcome> {
        let env = [("SERVEBENCH_SWEEP_RUN", point.to_spec(repeat))];
        send_by_workers(resolved, workers, &env, keep, &self.out).await
    }
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
fn print_heading(labels: &[(String, String)], repeats: u32, out: &Sink) -> std::io::Result<()> {
    let model = labels.iter().find(|(k, _)| k == "model").map_or("?", |(_, v)| v.as_str());
    let mut text = format!("\nResults {model}\n");
    for (k, v) in labels {
        if k == "model" || (k == "repeat" && repeats == 1) {
            continue;
        }
        text.push_str(&format!("{k}: {v}\n"));
    }
    out.out(&text)
}
