//! `servebench runs list|show|rm|export|label`: read and manage the run store.
//!
//! Commands that only read never create a store: with no file at the path, `list` and
//! `export` find no runs, and `show` and `rm` say there is no store.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::ExitCode;

use anyhow::{Context as _, anyhow, bail};
use serde_json::Value;
use servebench_store::export::trace::{self, TraceContext};
use servebench_store::{Store, StoredRun, export, format};

use crate::cli::resolve::parse_kv_list;
use crate::cli::store_args::{DbArgs, ExportFormat, RunsCommand, RunsExportArgs};

/// Runs one `runs` subcommand, printing to `out`.
pub fn execute(command: RunsCommand, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match command {
        RunsCommand::List(args) => {
            let filter = args.filter.to_filter()?;
            match open_existing(&args.db)? {
                // Not "no runs match": a mistyped --db must not read as an empty store.
                None if !args.json => writeln!(out, "{}.", no_store(&args.db))?,
                None => {}
                Some(store) => {
                    let rows = store.list(&filter)?;
                    if args.json {
                        for run in full_runs(&store, &rows)? {
                            writeln!(out, "{}", Value::Object(export::run_row_json(&run)))?;
                        }
                    } else {
                        out.write_all(format::list_table(&rows).as_bytes())?;
                    }
                }
            }
        }
        RunsCommand::Show(args) => {
            let store = open_required(&args.db)?;
            let run = store.get_without_records(&args.run)?;
            if args.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&export::run_json(&run))?)?;
            } else {
                out.write_all(format::show_text(&run).as_bytes())?;
            }
        }
        RunsCommand::Rm(args) => {
            let mut store = open_required(&args.db)?;
            let ids = store.remove(&args.runs)?;
            writeln!(out, "Removed {}.", runs_named(&ids))?;
        }
        RunsCommand::Export(args) => export_runs(args, out)?,
        RunsCommand::Label(args) => {
            let set = parse_kv_list(&args.set, "--set")?;
            let mut store = open_required(&args.db)?;
            let ids = store.relabel(&args.runs, &set, &args.unset)?;
            let mut did = Vec::new();
            if !set.is_empty() {
                did.push(format!("set {}", set.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")));
            }
            if !args.unset.is_empty() {
                did.push(format!("removed {}", args.unset.join(", ")));
            }
            writeln!(out, "Labelled {}: {}.", runs_named(&ids), did.join("; "))?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The listed runs with their summaries, config and notes (not their records).
fn full_runs(store: &Store, rows: &[servebench_store::RunRow]) -> anyhow::Result<Vec<StoredRun>> {
    Ok(rows.iter().map(|r| store.get_without_records(&r.id.into())).collect::<Result<_, _>>()?)
}

/// `run 4`, `runs 1, 2`: the runs a command changed.
fn runs_named(ids: &[servebench_store::RunId]) -> String {
    let list = ids.iter().map(|id| id.to_string()).collect::<Vec<_>>().join(", ");
    format!("{} {list}", if ids.len() == 1 { "run" } else { "runs" })
}

fn export_runs(args: RunsExportArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let store = open_existing(&args.db)?;
    if args.format == ExportFormat::Trace && args.requests.is_none() {
        bail!("--format trace draws one run's requests: add --requests ID (see `servebench runs list`)");
    }
    // Everything is read before the output file is created, so a failed export leaves none.
    let mut trace = TraceContext::default();
    let requests = match &args.requests {
        Some(run) => {
            let Some(store) = &store else { return Err(no_store(&args.db)) };
            let id = store.resolve(run)?;
            let Some(records) = store.records(run)? else {
                bail!(
                    "run {id} has no per-request records: it was imported from a report, or from a result file saved without them"
                );
            };
            if args.format == ExportFormat::Trace {
                trace = trace_context(&store.get_without_records(run)?);
            }
            Some(records)
        }
        None => None,
    };
    let rows = if requests.is_some() {
        Vec::new()
    } else {
        let filter = args.filter.to_filter()?;
        match &store {
            Some(store) => store.list(&filter)?,
            None => Vec::new(),
        }
    };
    // A run's energy columns come from its telemetry, in its summary.
    let runs = match &store {
        Some(store) => full_runs(store, &rows)?,
        None => Vec::new(),
    };

    let mut file = match &args.output {
        Some(path) => Some(BufWriter::new(
            servebench_store::refuse_store_overwrite(path).map(|()| File::create(path))?.with_context(|| {
                format!("could not create {}; check the folder exists and is writable", path.display())
            })?,
        )),
        None => None,
    };
    let w: &mut dyn Write = match &mut file {
        Some(f) => f,
        None => out,
    };
    let count = match (&requests, args.format) {
        (Some(records), ExportFormat::Csv) => export::write_requests_csv(records, w).map(|()| records.records.len()),
        (Some(records), ExportFormat::Json) => export::write_requests_json(records, w).map(|()| records.records.len()),
        (Some(records), ExportFormat::Trace) => {
            trace::write_requests_trace(records, &trace, w).map(|()| records.records.len())
        }
        (None, ExportFormat::Trace) => unreachable!("refused above"),
        (None, ExportFormat::Csv) => export::write_runs_csv(&runs, w).map(|()| runs.len()),
        (None, ExportFormat::Json) => export::write_runs_json(&runs, w).map(|()| runs.len()),
    }?;
    w.flush()?;
    if let Some(path) = &args.output {
        let what = if requests.is_some() { "requests" } else { "runs" };
        writeln!(out, "Wrote {count} {what} to {}.", path.display())?;
    }
    Ok(())
}

/// What a trace names: the run and its model, and its requests' `x-request-id` prefix.
fn trace_context(run: &StoredRun) -> TraceContext {
    let model = run.row.model.as_deref().map(|m| format!(": {m}")).unwrap_or_default();
    let prefix = run.config.as_ref().and_then(|c| c["target"]["request_id_prefix"].as_str());
    TraceContext {
        title: format!("run {}{model}", run.row.id),
        request_id_prefix: prefix.map(str::to_string),
        server: run.summary.server.clone(),
    }
}

/// The store at the chosen path, or `None` when there is no file there yet (or an empty one,
/// which opening would turn into a store: reading never writes).
fn open_existing(db: &DbArgs) -> anyhow::Result<Option<Store>> {
    let path = db.path()?;
    if std::fs::metadata(&path).map_or(true, |m| m.is_file() && m.len() == 0) {
        return Ok(None);
    }
    Ok(Some(Store::open(&path)?))
}

/// The store at the chosen path; an error when there is none (reading never creates one).
pub(crate) fn open_required(db: &DbArgs) -> anyhow::Result<Store> {
    match open_existing(db)? {
        Some(store) => Ok(store),
        None => Err(no_store(db)),
    }
}

/// The error for a command that needs a store when there is none at the path.
fn no_store(db: &DbArgs) -> anyhow::Error {
    match db.path() {
        Ok(path) => anyhow!(
            "there is no run store at {} yet; `servebench import` and `servebench bench serve` create it (or pass --db PATH)",
            path.display()
        ),
        Err(e) => e.into(),
    }
}
