//! The end of every measured or predicted run: summarise, print vLLM's report, save the
//! result JSON when asked, and keep the run in the run store.

use anyhow::Context as _;
use std::path::PathBuf;

use servebench_core::metrics::{Ledger, Summary, TurnMetrics, render_health, render_notes, render_turns};
use servebench_core::record::RunResult;
use servebench_core::vllm::json::{result_filename, result_json, write_result};
use servebench_core::vllm::text::{render_failures, render_result_block, render_steady_state};
use servebench_store::{NewRun, RunId, RunKind};

use crate::output::Sink;

/// Stamps the run's wall-clock start (`date` as vLLM writes it, and RFC 3339) if unset.
pub fn stamp_dates(result: &mut RunResult, started: &jiff::Zoned) {
    if result.date.is_empty() {
        result.date = started.strftime("%Y%m%d-%H%M%S").to_string();
    }
    if result.started_at.is_empty() {
        result.started_at = started.timestamp().to_string();
    }
}

/// What happened to a finished run's outputs.
struct Finished {
    summary: Summary,
    /// The result JSON written, if `--save-result` or `--append-result` was given, or why it
    /// could not be: the run is kept in the store either way, then the command fails.
    saved_to: anyhow::Result<Option<PathBuf>>,
    /// The figures written (`--plot-timeline`, `--plot-dataset-stats`), each with the line
    /// that says where, or why one could not be, the same way.
    plotted: anyhow::Result<Vec<(&'static str, PathBuf)>>,
}

/// Prints the failure listing and the result block exactly as vLLM does, then saves the
/// result JSON if the config asks for it.
fn finish_run(
    result: &RunResult,
    uncertainty: Option<&servebench_sim::Uncertainty>,
    figure_suffix: Option<&str>,
    out: &Sink,
) -> anyhow::Result<Finished> {
    let summary = Summary::compute(result);
    out.out(&render_failures(&summary))?;
    out.out(&render_result_block(&summary))?;
    let band = uncertainty.map(|u| super::band::PredictionBand::of(&summary, u));
    if let Some(b) = &band {
        out.out(&b.render())?;
    }
    if let Some(line) = servebench_core::metrics::render_per_gpu(&summary) {
        out.line(line)?;
    }
    // servebench's own sections come after vLLM's block, so the block stays byte-identical.
    if let Some(turns) = TurnMetrics::compute(result) {
        out.out(&render_turns(&turns))?;
    }
    out.out(&render_notes(&Ledger::compute(result)))?;
    if let Some(steady) = &summary.steady_state {
        out.out(&render_steady_state(steady))?;
    }
    if let Some(health) = &summary.health {
        out.line(render_health(health))?;
    }
    if let Some(http) = &summary.http {
        out.line(servebench_core::metrics::render_http(http))?;
    }
    if let Some(line) = servebench_core::metrics::render_failed_probes(&result.probes) {
        out.line(line)?;
    }
    if let Some(telemetry) = &summary.server {
        out.out(&servebench_core::telemetry::render(telemetry, summary.total_output_tokens))?;
    }
    if result.interrupted {
        let how = result.stopped_by.as_ref().map_or_else(|| "interrupted".to_string(), |why| format!("stopped: {why}"));
        out.line(format!(
            "Run {how}: {} requests were not sent; the report covers what was measured until then.",
            result.not_sent
        ))?;
    }
    let options = &result.config.output;
    let saved_to = if options.save_result || options.append_result {
        let path = result_filename(&result.config, &result.config.target.model_id, &result.date);
        let mut value = result_json(result, &summary);
        if let (Some(b), Some(ours)) = (&band, value.get_mut("servebench").and_then(|v| v.as_object_mut())) {
            ours.insert("prediction_band".into(), serde_json::to_value(b)?);
        }
        match servebench_store::refuse_store_overwrite(&path) {
            Ok(()) => {
                write_result(&path, &value, options.append_result).map(|()| Some(path)).map_err(anyhow::Error::from)
            }
            Err(e) => Err(e.into()),
        }
    } else {
        Ok(None)
    };
    let plotted = write_plots(result, &summary, figure_suffix);
    Ok(Finished { summary, saved_to, plotted })
}

/// Writes the figures asked for where vLLM writes them: beside the result JSON, named after
/// it (`RESULT.timeline.html`, `RESULT.dataset_stats.svg`), whether or not the result itself
/// is saved; `suffix` names those of one run of several that append to one result file.
fn write_plots(
    result: &RunResult,
    summary: &Summary,
    suffix: Option<&str>,
) -> anyhow::Result<Vec<(&'static str, PathBuf)>> {
    let options = &result.config.output;
    let mut base = result_filename(&result.config, &result.config.target.model_id, &result.date);
    if let Some(suffix) = suffix {
        base = PathBuf::from(with_suffix(&base.to_string_lossy(), suffix));
    }
    let write = |extension: &str, what: &'static str, text: String| -> anyhow::Result<(&'static str, PathBuf)> {
        let path = base.with_extension(extension);
        super::write_file(&path, &text).with_context(|| format!("the {what} was not written"))?;
        Ok((what, path))
    };
    let mut written = Vec::new();
    if let Some(thresholds_ms) = options.plot_timeline {
        written.push(write("timeline.html", "Timeline plot", timeline_page(result, summary, thresholds_ms))?);
    }
    if options.plot_dataset_stats {
        let requests: Vec<(u32, u32)> =
            result.records.iter().filter(|r| !r.never_sent()).map(|r| (r.prompt_tokens(), r.output_tokens())).collect();
        let title = format!("Requests of {}: tokens", result.config.target.model_id);
        let figure = servebench_report::dataset_stats::dataset_stats(&title, &requests);
        written.push(write("dataset_stats.svg", "Dataset statistics plot", figure)?);
    }
    Ok(written)
}

/// `--plot-timeline`'s page of the run's requests.
fn timeline_page(result: &RunResult, summary: &Summary, thresholds_ms: [f64; 2]) -> String {
    let config = &result.config;
    let target = match &config.target.sim {
        Some(sim) => format!("the simulator, {}@{}", sim.model, sim.hardware),
        None => config.target.base_url.clone(),
    };
    let title = format!("Requests of {} ({})", config.target.model_id, target);
    let load = match (config.traffic.max_concurrency, config.traffic.request_rate) {
        (Some(c), r) if r.is_finite() => format!("at most {c} at a time, {r} a second"),
        (Some(c), _) => format!("at most {c} at a time"),
        (None, r) if r.is_finite() => format!("{r} a second"),
        (None, _) => "all at once".into(),
    };
    let meta = format!(
        "{} requests sent {load} by the {} backend, {} of them failed; started {}.",
        result.records.iter().filter(|r| !r.never_sent()).count(),
        config.target.backend.name(),
        summary.failed.unwrap_or(0),
        result.started_at
    );
    servebench_report::html::timeline_page(&servebench_report::html::TimelinePage {
        title: &title,
        meta: &meta,
        records: &result.records,
        thresholds_ms,
    })
}

/// Where a finished run is kept: `--db PATH`, else `$SERVEBENCH_DB`, else the user's data
/// directory; `--no-store` keeps nothing.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StoreChoice {
    pub db: Option<String>,
    pub no_store: bool,
}

impl StoreChoice {
    /// The store's file, or none with `--no-store`; an empty `--db` names no file.
    pub fn path(&self) -> anyhow::Result<Option<PathBuf>> {
        match (&self.db, self.no_store) {
            (_, true) => Ok(None),
            (Some(p), false) if p.is_empty() => {
                anyhow::bail!("--db names no file; give the run store's path, or --no-store to keep nothing")
            }
            (Some(p), false) => Ok(Some(PathBuf::from(p))),
            (None, false) => Ok(Some(servebench_store::default_db_path()?)),
        }
    }

    /// Opens the store (creating it) before anything is measured, so that a run is not made
    /// only to be refused by a store that cannot take it.
    pub fn check(&self) -> anyhow::Result<()> {
        if let Some(path) = self.path()? {
            servebench_store::Store::open(&path)
                .with_context(|| "the run would not be kept; fix --db, or pass --no-store to keep nothing")?;
        }
        Ok(())
    }
}

/// How a finished run is kept: its kind in the run store, labels added to it, and a suffix
/// that gives its result file a name of its own (`-n80` in `...-20250601-120000-n80.json`).
#[derive(Clone, Debug)]
pub struct Keep {
    pub kind: RunKind,
    pub labels: Vec<(String, String)>,
    pub file_suffix: Option<String>,
}

impl Keep {
    pub fn new(kind: RunKind) -> Keep {
        Keep { kind, labels: Vec::new(), file_suffix: None }
    }
}

/// A finished run: what was measured, its summary, and how it was kept.
pub struct PointOutcome {
    pub result: RunResult,
    pub summary: Summary,
    /// The run as it went into the run store (or would have, with `--no-store`).
    pub run: NewRun,
    /// Its number in the run store, when it was saved there.
    pub stored: Option<RunId>,
}

/// Reports a finished run (vLLM's block, the result file) and keeps it in the run store. A
/// prediction comes with how far off its device's predictions are expected to be.
pub fn finish_and_keep(
    mut result: RunResult,
    environment: Option<serde_json::Value>,
    uncertainty: Option<&servebench_sim::Uncertainty>,
    keep: &Keep,
    choice: &StoreChoice,
    out: &Sink,
) -> anyhow::Result<PointOutcome> {
    if let Some(suffix) = &keep.file_suffix {
        name_result_file(&mut result, suffix);
    }
    // Runs appending to one result file still each get figures of their own.
    let figure_suffix = keep.file_suffix.as_deref().filter(|_| result.config.output.append_result);
    let finished = finish_run(&result, uncertainty, figure_suffix, out)?;
    if let Ok(Some(path)) = &finished.saved_to {
        out.line(format!("Saved the result to {}", path.display()))?;
    }
    for (what, path) in finished.plotted.iter().flatten() {
        out.line(format!("{what} saved to: {}", path.display()))?;
    }
    let mut run = NewRun::from_run(keep.kind, &result, &finished.summary);
    for (k, v) in &keep.labels {
        run.set_label(k, v);
    }
    if let Some(env) = environment {
        run = run.with_environment(env);
    }
    let stored = store_run(&run, choice, out)?;
    if let Err(e) = finished.saved_to.and(finished.plotted) {
        let kept = stored.map_or_else(String::new, |id| format!("; what was measured is kept as run {id}"));
        anyhow::bail!("{e:#}{kept}");
    }
    Ok(PointOutcome { result, summary: finished.summary, run, stored })
}

/// Saves a run in the run store and says where. A store that cannot be written is a warning,
/// not a lost run: the report was printed and any result file was written already.
pub fn store_run(run: &NewRun, choice: &StoreChoice, out: &Sink) -> anyhow::Result<Option<RunId>> {
    let Some(path) = choice.path()? else {
        return Ok(None);
    };
    let stored = servebench_store::Store::open(&path).and_then(|mut store| store.insert(run));
    match stored {
        Ok(id) => {
            out.line(format!("Saved as run {id} in {} (see `servebench runs show {id}`)", path.display()))?;
            Ok(Some(id))
        }
        Err(e) => {
            out.line(format!("WARNING: the run could not be saved in the run store {}: {e}", path.display()))?;
            Ok(None)
        }
    }
}

/// Gives the result file of a `--save-result` run (and the figures named after it) a name of
/// its own: `suffix` goes before the extension of `--result-filename`, or of
/// vLLM's default name. Appended results (`--append-result`) keep their one file.
fn name_result_file(result: &mut RunResult, suffix: &str) {
    let output = &result.config.output;
    if !(output.save_result || output.plot_timeline.is_some() || output.plot_dataset_stats) || output.append_result {
        return;
    }
    let name = match &output.result_filename {
        Some(name) => name.clone(),
        None => {
            let path = servebench_core::vllm::json::result_filename(
                &result.config,
                &result.config.target.model_id,
                &result.date,
            );
            path.file_name().map_or_else(|| "result.json".to_string(), |n| n.to_string_lossy().into_owned())
        }
    };
    result.config.output.result_filename = Some(with_suffix(&name, suffix));
}

/// `dir/name.ext` with `-suffix` before the extension of its last component.
fn with_suffix(name: &str, suffix: &str) -> String {
    let file_start = name.rfind('/').map_or(0, |i| i + 1);
    match name[file_start..].rfind('.').filter(|&i| i > 0) {
        Some(dot) => format!("{}-{suffix}{}", &name[..file_start + dot], &name[file_start + dot..]),
        None => format!("{name}-{suffix}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suffix_goes_before_the_extension_of_the_file_name() {
        assert_eq!(
            with_suffix("openai-infqps-Qwen3-8B-20250601-120000.json", "n80"),
            "openai-infqps-Qwen3-8B-20250601-120000-n80.json"
        );
        assert_eq!(with_suffix("out.v2/result", "c8"), "out.v2/result-c8");
        assert_eq!(with_suffix("runs/r.json", "c8-r2"), "runs/r-c8-r2.json");
        assert_eq!(with_suffix(".json", "c1"), ".json-c1");
    }
}
