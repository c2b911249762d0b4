//! `servebench sweep`: `bench serve` over a grid of targets, lengths and loads, or a search
//! for the highest load that meets SLOs.
//!
//! - `grid` reads the grid from the flags and names its points, `targets` its targets (the
//!   simulator's deployments or the servers);
//! - `run` runs each point as a full `bench serve` run (or a prediction in virtual time with
//!   `--predict`), labelled and kept, and records failures without stopping;
//! - `servebench_core::threshold::slo` judges points against `--slo`, and
//!   `servebench_core::search` chooses the probes of `--search`;
//! - `tables` prints what the comparison does not: the spread of repeats, SLO verdicts, the
//!   probes and the answer.
//!
//! At the end the sweep's runs are compared exactly as `servebench compare --label sweep=NAME`
//! compares them.
//!
//! A sweep can be sharded like `bench serve`: with `--workers N` every run (a grid point, a
//! search's probe) is sent by N worker processes of this sweep, each told the one run to send,
//! and merged here before the next run is chosen; with `--shard` a grid sweep sends this
//! worker's share of every point, the workers meeting at the rendezvous before each.

mod capacity;
mod grid;
mod run;
mod tables;
mod targets;

use std::process::ExitCode;

use anyhow::Context as _;
use servebench_core::metrics::Summary;
use servebench_core::threshold::{Threshold, parse_slos};
use servebench_report::select::{Records, Selection, load};
use servebench_report::{Comparison, Format, StoredRun, Table};
use servebench_store::{RunFilter, RunRef, Store};

use self::grid::{Grid, Point, PromptCount};
use self::run::{Runner, Stop, describe};
use self::tables::{Probe, answer_text, probes_table, slo_table, spread_table};
use crate::cli::resolve::{parse_metric_percentiles, parse_percentile_metrics, run_config};
use crate::cli::sweep_args::{SearchKey, SweepArgs, SweepOptions};
use crate::commands::bench::{INTERRUPTED, STOPPED};
use crate::commands::compare::usage;
use crate::commands::launch::shell_word;
use crate::commands::resolve::Resolver;
use crate::output::{self, Sink};
use servebench_core::search::{Search, Tolerance};
use servebench_core::threshold::slo::{self, missing_sections};

/// Runs the sweep or the search the flags describe, then compares its runs.
pub async fn execute(args: SweepArgs, out: &Sink) -> anyhow::Result<ExitCode> {
    match Sweep::new(args) {
        Ok(sweep) => sweep.run(out).await,
        Err(e) => Ok(usage(&*e)),
    }
}

/// The checks `sweep` makes of its flags before its first run, for `launch --sweep` to make of
/// its workers' flags before it prints their job.
pub(crate) fn check(args: SweepArgs) -> anyhow::Result<()> {
    Sweep::new(args).map(drop)
}

/// A sweep, checked and ready to run.
struct Sweep {
    args: SweepArgs,
    grid: Grid,
    slos: Vec<Threshold>,
    /// The search, with its empty state.
    search: Option<(SearchKey, Search)>,
    id: String,
    /// Said before the first run.
    notes: Vec<String>,
}

/// One SLO search (one per base point of the grid).
struct SearchRun {
    search: Search,
    probes: Vec<Probe>,
    /// The base point's other settings (`model=...`), empty when there is one search.
    described: String,
    finished: bool,
}

impl Sweep {
    fn new(mut args: SweepArgs) -> anyhow::Result<Sweep> {
        if args.bench.extra.dry_run.is_some() || args.bench.extra.replay_plan.is_some() {
            anyhow::bail!("--dry-run and --replay-plan are about one run: use them with `servebench bench serve`");
        }
        if !args.bench.extra.fail_on.is_empty() {
            anyhow::bail!("--fail-on is about one run (`bench serve`) or two (`compare`); a sweep is held to --slo");
        }
        let grid = Grid::new(&args)?;
        if let Some(by) = &args.sweep.by {
            check_axis(by, &grid, &args.sweep)?;
        }
        check_sharding(&args)?;
        let slos = parse_slos(&args.sweep.slo)?;
        let notes = add_slo_sections(&mut args.bench, &slos)?;
        if let Some(d) = args.sweep.demand
            && !(d.is_finite() && d > 0.0)
        {
            anyhow::bail!("--demand {d}: give the load to serve as a number above 0, in the searched setting's unit");
        }
        let search = match args.sweep.search {
            None => None,
            Some(key) => {
                let integer = key == SearchKey::MaxConcurrency;
                let tolerance = match &args.sweep.search_tolerance {
                    Some(t) => Tolerance::parse(t).map_err(anyhow::Error::msg)?,
                    None if integer => Tolerance::Absolute(1.0),
                    None => Tolerance::Relative(0.05),
                };
                let min = args.sweep.search_min.unwrap_or(1.0);
                let max = args.sweep.search_max.unwrap_or(if integer { 4096.0 } else { 1024.0 });
                Some((key, Search::new(integer, min, max, tolerance).map_err(anyhow::Error::msg)?))
            }
        };
        // Every point's flags resolve (without the network), so a mistake is a usage error
        // before anything runs, not a failure of every point.
        for p in grid.points() {
            let p = match &search {
                Some((key, s)) => grid.probe(&p, *key, s.min),
                None => p,
            };
            run_config(&grid.args(&args.bench, &p).flags(args.sweep.predict))?;
        }
        let id = match &args.sweep.sweep_id {
            Some(id) if id.trim().is_empty() || id.contains(char::is_whitespace) => {
                anyhow::bail!("--sweep-id {id:?}: use a name without spaces, e.g. h100-tp2-0601")
            }
            Some(id) => id.clone(),
            None => default_id(),
        };
        Ok(Sweep { args, grid, slos, search, id, notes })
    }

    async fn run(self, out: &Sink) -> anyhow::Result<ExitCode> {
        for note in &self.notes {
            out.line(note)?;
        }
        let mut resolver = Resolver::default();
        if let Some(spec) = &self.args.bench.endpoint.request.tokenizer {
            resolver.tokenizer(spec)?;
        }
        let stop = Stop::listen();
        let points = self.grid.points();
        let repeats = self.args.sweep.repeats;
        let varying = varying(&self.grid, &points, self.search.as_ref().map(|(key, _)| *key));
        let id_key = if self.search.is_some() { "search" } else { "sweep" };
        let mut runner = Runner {
            base: &self.args.bench,
            grid: &self.grid,
            predict: self.args.sweep.predict,
            resolver,
            stop: stop.clone(),
            id_label: (id_key.to_string(), self.id.clone()),
            varying,
            repeats,
            points: Vec::new(),
            runs: Vec::new(),
            out: out.clone(),
            workers: self.args.bench.shard.workers,
        };
        if let Some(spec) = &self.args.sweep.worker_run {
            // A `--workers` worker: its one run, its share sent and saved for the parent.
            let (point, repeat) = Point::from_spec(spec).map_err(|e| anyhow::anyhow!(e.0))?;
            let i = runner.run(&point, repeat, &[], "worker run").await;
            return Ok(match &runner.runs[i].outcome {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => anyhow::bail!("{e}"),
            });
        }
        let searches = match &self.search {
            Some((key, template)) => self.run_search(&mut runner, &points, *key, template).await,
            None => {
                output::note(format_args!(
                    "{}",
                    start_line(&self.id, &points, repeats, self.args.bench.dataset.random_batch_size)
                ));
                for (i, p) in points.iter().enumerate() {
                    for r in 1..=repeats {
                        if stop.requested() {
                            break;
                        }
                        runner.run(p, r, &[], &format!("point {}/{}", i + 1, points.len())).await;
                    }
                }
                Vec::new()
            }
        };
        self.report(&runner, &searches, stop.requested(), out)
    }

    async fn run_search(
        &self,
        runner: &mut Runner<'_>,
        bases: &[Point],
        key: SearchKey,
        template: &Search,
    ) -> Vec<SearchRun> {
        let mut out = Vec::new();
        output::note(format_args!(
            "search {}: the highest {} meeting {}{}",
            self.id,
            key.key(),
            slo::conjunction(&self.slos),
            if bases.len() > 1 { format!(", for each of {} points", bases.len()) } else { String::new() }
        ));
        for (b, base) in bases.iter().enumerate() {
            let mut run =
                SearchRun { search: template.clone(), probes: Vec::new(), described: String::new(), finished: true };
            while let Some(value) = run.search.next() {
                if runner.stop.requested() {
                    run.finished = false;
                    break;
                }
                let point = self.grid.probe(base, key, value);
                let n = run.probes.len() + 1;
                let progress = if bases.len() > 1 {
                    format!("search {}/{}, probe {n}", b + 1, bases.len())
                } else {
                    format!("probe {n}")
                };
                let mut records = Vec::new();
                for r in 1..=self.args.sweep.repeats {
                    if runner.stop.requested() {
                        break;
                    }
                    records.push(runner.run(&point, r, &[("probe".into(), n.to_string())], &progress).await);
                }
                if bases.len() > 1 && run.described.is_empty() {
                    let labels = &runner.runs[records[0]].shown;
                    let skip = [key.key(), "num_prompts", "probe", "repeat"];
                    let rest: Vec<(String, String)> =
                        labels.iter().filter(|(k, _)| !skip.contains(&k.as_str())).cloned().collect();
                    run.described = describe(&rest);
                }
                let done: Vec<&Summary> =
                    records.iter().filter_map(|&i| runner.runs[i].outcome.as_ref().ok()).map(|d| &d.summary).collect();
                let interrupted = records.iter().any(|&i| runner.runs[i].outcome.as_ref().is_ok_and(|d| d.interrupted));
                let stopped = records.iter().find_map(|&i| runner.runs[i].outcome.as_ref().ok()?.stopped_by.clone());
                if let Some(why) = stopped {
                    output::note(format_args!(
                        "{progress}: {}={} stopped by a rule ({why}); a partial run cannot be judged, the search ends here",
                        key.key(),
                        servebench_report::layout::number_text(value),
                    ));
                }
                if interrupted || runner.stop.requested() || done.is_empty() {
                    // A partial or failed probe cannot be judged: this search ends here.
                    run.finished = false;
                    break;
                }
                let verdict = slo::judge(&self.slos, &done);
                output::note(format_args!(
                    "{progress}: {}={} {}",
                    key.key(),
                    servebench_report::layout::number_text(value),
                    slo::verdict_text(&verdict)
                ));
                run.search.record(value, verdict.passed());
                run.probes.push(Probe { value, num_prompts: point.num_prompts, verdict, runs: records });
            }
            out.push(run);
            if runner.stop.requested() {
                break;
            }
        }
        out
    }

    /// The tables at the end, the failures, and how to see the runs again.
    fn report(
        &self,
        runner: &Runner<'_>,
        searches: &[SearchRun],
        interrupted: bool,
        out: &Sink,
    ) -> anyhow::Result<ExitCode> {
        let records = &runner.runs;
        let failed: Vec<&run::RunRecord> = records.iter().filter(|r| r.outcome.is_err()).collect();
        let finished = records.len() - failed.len();
        let (id_key, id) = &runner.id_label;
        let mut text = format!(
            "\n{}\n{} {id}: {finished} run{} finished{}{}\n",
            "=".repeat(50),
            if id_key == "search" { "Search" } else { "Sweep" },
            if finished == 1 { "" } else { "s" },
            if failed.is_empty() { String::new() } else { format!(", {} failed", failed.len()) },
            if interrupted { " (interrupted)" } else { "" },
        );
        let (runs, earlier) = self.collected_runs(records, (id_key, id))?;
        if !runs.is_empty() {
            text.push('\n');
            match Comparison::new(&runs, self.args.sweep.by.as_deref()) {
                Ok(c) => text.push_str(&c.render(Format::Table, self.args.sweep.findings)),
                Err(e) => text.push_str(&format!("The runs could not be compared: {e}\n")),
            }
        }
        let mut tables: Vec<(Table, Option<String>)> = Vec::new();
        if self.search.is_none() && self.args.sweep.repeats > 1 && finished > 0 {
            tables.push((spread_table(records), None));
        }
        if self.search.is_none() && !self.slos.is_empty() && !records.is_empty() {
            let (t, summary) = slo_table(records, &self.slos);
            tables.push((t, Some(summary)));
        }
        if let Some((key, _)) = &self.search {
            for s in searches {
                let scaled = matches!(self.grid.num_prompts, PromptCount::Scale(_));
                let mut title = format!("Probes of the search along {}", key.key());
                if !s.described.is_empty() {
                    title.push_str(&format!(" ({})", s.described));
                }
                let t = probes_table(records, key.key(), scaled, &self.slos, &s.probes, title);
                let answer = answer_text(key.key(), &self.slos, &s.search, &s.probes, s.finished);
                let answer =
                    if s.described.is_empty() { capitalised(&answer) } else { format!("{}: {answer}", s.described) };
                tables.push((t, Some(format!("{answer}."))));
            }
        }
        if let Some((key, _)) = &self.search {
            let answers: Vec<capacity::Answered> = searches
                .iter()
                .map(|s| {
                    let best = s.search.answer().best;
                    let probe = best.and_then(|b| s.probes.iter().find(|p| p.value == b));
                    let runs = probe.map_or_else(Vec::new, |p| {
                        p.runs.iter().filter_map(|&i| records[i].outcome.as_ref().ok()).map(|d| &d.summary).collect()
                    });
                    capacity::Answered { described: &s.described, best, runs, finished: s.finished }
                })
                .collect();
            if let Some((t, sentence)) = capacity::capacity(*key, self.args.sweep.demand, &answers) {
                tables.push((t, Some(sentence)));
            }
        }
        for (t, after) in tables {
            text.push('\n');
            text.push_str(&t.render(Format::Table));
            if let Some(a) = after {
                text.push_str(&a);
                text.push('\n');
            }
        }
        if self.search.is_some() {
            text.push_str(&if self.args.sweep.repeats > 1 {
                format!(
                    "Each probe was judged on the mean of its {} runs (± is their standard deviation): the answer \
                     moves with the noise those show.\n",
                    self.args.sweep.repeats
                )
            } else {
                "The answer is as stable as the runs are: a probe near the limit can pass or fail on noise. \
                 --repeats 3 judges each probe on the mean of three runs and shows their spread.\n"
                    .to_string()
            });
        }
        if !failed.is_empty() {
            text.push('\n');
            for r in &failed {
                let e = r.outcome.as_ref().err().map_or("", String::as_str);
                text.push_str(&format!("Failed: {} (repeat {}): {e}\n", r.described, r.repeat));
            }
        }
        let all_failed: Vec<&run::RunRecord> = records
            .iter()
            // A point a stop rule ended is told below, with the rule (exit 4, as `bench serve`).
            .filter(|r| {
                r.outcome.as_ref().is_ok_and(|d| {
                    d.stopped_by.is_none() && d.summary.completed == 0 && d.summary.failed.unwrap_or(0) > 0
                })
            })
            .collect();
        for r in &all_failed {
            text.push_str(&format!("Every request failed: {} (repeat {}).\n", r.described, r.repeat));
        }
        let stopped: Vec<(&run::RunRecord, &str)> =
            records.iter().filter_map(|r| Some((r, r.outcome.as_ref().ok()?.stopped_by.as_deref()?))).collect();
        for (r, why) in &stopped {
            text.push_str(&format!(
                "Stopped by a rule: {} (repeat {}): {why}; its figures are of the requests that ended before.\n",
                r.described, r.repeat
            ));
        }
        text.push('\n');
        if self.args.bench.extra.no_store {
            text.push_str("Not kept in the run store (--no-store); the run numbers above are this table's own.\n");
        } else if records.iter().any(|r| r.outcome.as_ref().is_ok_and(|d| d.stored.is_some())) {
            let db = self.args.bench.extra.db.as_ref().map(|d| format!(" --db {}", shell_word(d))).unwrap_or_default();
            let label = shell_word(&format!("{id_key}={id}"));
            if earlier > 0 {
                text.push_str(&format!(
                    "The store also holds {earlier} earlier run{} labelled {id_key}={id}: the commands below show them \
                     with these.\n",
                    if earlier == 1 { "" } else { "s" }
                ));
            }
            text.push_str(&format!(
                "See these runs again: servebench compare --label {label}{db}\n\
                 As an HTML report:    servebench report --label {label}{db} -o {}.html\n",
                file_stem(id)
            ));
        }
        out.out(&text)?;
        Ok(if interrupted {
            ExitCode::from(INTERRUPTED)
        } else if !(failed.is_empty() && all_failed.is_empty()) {
            ExitCode::FAILURE
        } else if !stopped.is_empty() {
            ExitCode::from(STOPPED)
        } else {
            ExitCode::SUCCESS
        })
    }

    /// The runs of the sweep as the store holds them (with `--no-store`, held in memory), and how
    /// many other runs the store holds under the same name (from an earlier sweep).
    fn collected_runs(
        &self,
        records: &[run::RunRecord],
        (key, id): (&str, &str),
    ) -> anyhow::Result<(Vec<StoredRun>, usize)> {
        let done: Vec<&run::Done> = records.iter().filter_map(|r| r.outcome.as_ref().ok()).collect();
        let (store, ids) = if self.args.bench.extra.no_store {
            let mut store = Store::open_in_memory()?;
            let mut ids = Vec::new();
            for run in done.iter().filter_map(|d| d.run.as_ref()) {
                ids.push(store.insert(run)?);
            }
            (store, ids)
        } else {
            let ids: Vec<i64> = done.iter().filter_map(|d| d.stored).collect();
            if ids.is_empty() {
                return Ok((Vec::new(), 0));
            }
            let path = match &self.args.bench.extra.db {
                Some(p) => std::path::PathBuf::from(p),
                None => servebench_store::default_db_path()?,
            };
            (Store::open(&path).context("could not read the sweep's runs back from the run store")?, ids)
        };
        if ids.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let filter = RunFilter { labels: vec![(key.to_string(), Some(id.to_string()))], ..RunFilter::default() };
        let earlier = store.list(&filter)?.iter().filter(|r| !ids.contains(&r.id)).count();
        // Two runs are compared with intervals from their records, as `compare A B` does.
        let records = if ids.len() == 2 { Records::All } else { Records::None };
        Ok((
            load(&store, &Selection::Runs(ids.into_iter().map(|id| RunRef::Id(id).into()).collect()), &records)?,
            earlier,
        ))
    }
}

/// Makes sure each run computes what the SLOs name (a percentile or an E2EL section beyond
/// `bench serve`'s defaults), and says so.
fn add_slo_sections(bench: &mut crate::cli::BenchServeArgs, slos: &[Threshold]) -> anyhow::Result<Vec<String>> {
    let metrics = parse_percentile_metrics(bench.report.percentile_metrics.as_deref())?;
    let percentiles = parse_metric_percentiles(&bench.report.metric_percentiles)?;
    let (more_metrics, more_ps) = missing_sections(slos, &metrics, &percentiles);
    let mut notes = Vec::new();
    if !more_metrics.is_empty() {
        let all: Vec<&str> = metrics.iter().chain(&more_metrics).map(|m| m.key()).collect();
        bench.report.percentile_metrics = Some(all.join(","));
        notes.push(format!("The SLOs need these sections: --percentile-metrics {}", all.join(",")));
    }
    if !more_ps.is_empty() {
        let all: Vec<String> =
            percentiles.iter().chain(&more_ps).map(|p| servebench_report::layout::number_text(*p)).collect();
        bench.report.metric_percentiles = all.join(",");
        notes.push(format!("The SLOs need these percentiles: --metric-percentiles {}", all.join(",")));
    }
    Ok(notes)
}

/// What a sharded sweep can do. With `--workers` every run of the sweep (a grid point, a
/// search's probe) is sent by N processes and merged before the next; with `--shard` each
/// point of a grid sends this worker's share, the workers meeting per point. Refused: a
/// prediction (virtual time has no client to spread), `--start-at` (one instant for many
/// runs), and a search with `--shard` (its workers cannot see the merged result of a probe).
fn check_sharding(args: &SweepArgs) -> anyhow::Result<()> {
    let shard = &args.bench.shard;
    if shard.workers.is_none() && shard.shard.is_none() {
        return Ok(());
    }
    if args.sweep.predict {
        anyhow::bail!(
            "--predict runs in virtual time, with no client to spread over processes; drop --workers and --shard"
        );
    }
    if shard.start_at.is_some() {
        anyhow::bail!("--start-at is one instant, and a sweep's runs start one after another; use --coordinator");
    }
    if args.sweep.search.is_some() && shard.shard.is_some() && args.sweep.worker_run.is_none() {
        anyhow::bail!(
            "an SLO search chooses each probe from the merged result of the one before, which workers started \
             apart cannot see; search with --workers N (this machine), or shard a grid sweep"
        );
    }
    Ok(())
}

/// The settings the sweep's runs differ in: the grid's lists of several values, and a search's
/// key (with the prompt count where it scales with the load).
fn varying(grid: &Grid, points: &[Point], search: Option<SearchKey>) -> Vec<String> {
    let mut keys = grid.varying(points);
    if let Some(key) = search {
        keys.push(key.key().to_string());
        if matches!(grid.num_prompts, PromptCount::Scale(_)) {
            keys.push("num_prompts".into());
        }
    }
    keys
}

/// `--by`, checked before anything runs (it is used only by the table at the end): a setting
/// that varies across the sweep's runs.
fn check_axis(by: &str, grid: &Grid, sweep: &SweepOptions) -> anyhow::Result<()> {
    let mut axes = varying(grid, &grid.points(), sweep.search);
    axes.retain(|k| !["model", "hardware", "base_url"].contains(&k.as_str()));
    if sweep.repeats > 1 {
        axes.push("repeat".into());
    }
    if axes.iter().any(|a| a == by) {
        return Ok(());
    }
    if axes.is_empty() {
        anyhow::bail!(
            "--by {by}: this sweep varies no setting to lay its table along; leave --by out, or give a list flag \
             several values (--max-concurrency 1,4,16)"
        );
    }
    anyhow::bail!("--by {by}: this sweep varies {}; pick one of them, or leave --by out", axes.join(", "))
}

/// `20250601-143012-a3f9`: the start time and four hex digits.
fn default_id() -> String {
    let now = jiff::Zoned::now();
    format!("{}-{:04x}", now.strftime("%Y%m%d-%H%M%S"), (crate::cli::resolve::nonce() >> 48) as u16)
}

fn file_stem(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}

/// The line a grid sweep starts with: its points, runs of each and the requests all of them
/// send, so that a grid larger than meant is seen before it has run for hours.
/// The sweep's first line: its points, runs and prompts. Prompts are requests unless a pooling
/// run carries several a request (`--random-batch-size`, flag `batch` or the point's own).
fn start_line(id: &str, points: &[Point], repeats: u32, batch: u32) -> String {
    let times = if repeats > 1 { format!(", {repeats} runs each") } else { String::new() };
    let prompts: usize = points.iter().map(|p| p.num_prompts).sum::<usize>() * repeats as usize;
    let batched = points.iter().any(|p| p.batch_size.unwrap_or(batch) > 1);
    let what = if batched { "prompts" } else { "requests" };
    format!("sweep {id}: {} points{times}, {prompts} {what} in all", points.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_starts_by_saying_how_many_requests_its_grid_sends() {
        let point = |num_prompts| Point { num_prompts, ..Point::default() };
        let points = [point(100), point(400)];
        assert_eq!(start_line("s", &points, 1, 1), "sweep s: 2 points, 500 requests in all");
        assert_eq!(start_line("s", &points, 3, 1), "sweep s: 2 points, 3 runs each, 1500 requests in all");
        assert_eq!(start_line("s", &points, 1, 8), "sweep s: 2 points, 500 prompts in all");
        let batched = [Point { batch_size: Some(4), ..point(10) }, point(10)];
        assert_eq!(start_line("s", &batched, 1, 1), "sweep s: 2 points, 20 prompts in all");
    }
}
