//! `servebench import FILE|FOLDER...`: vLLM result files and reports into the run store.
//!
//! Prints, per file, how many runs were added (with their numbers) and every block or
//! document skipped with its line and reason, then the total. A block already in the store
//! (same file content and line) is skipped, so importing a file again adds nothing. A folder
//! (vLLM's `--result-dir`) stands for the files in it, in name order, not its subfolders nor
//! hidden files. The exit code is 1 when a file could not be read, when a file named on the
//! command line held no result at all, or when no file of a folder did; the other files are
//! still imported. `--gpus N` gives the runs whose files do not say how many GPUs served them
//! that count.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use servebench_report::compare::ranges;
use servebench_store::import::{Problem, import_file};
use servebench_store::{RunId, Store, StoreError};

use crate::cli::store_args::ImportArgs;
use crate::commands::inputs::{Named, files_of, measured};
use crate::output;

pub fn execute(args: ImportArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    crate::cli::resolve::check_gpu_hour_cost(args.gpu_hour_cost)?;
    let path = args.db.path()?;
    // Opened at the first run to store: a command whose files hold none creates no store.
    let mut store = Lazy { path: &path, store: None };
    let mut total = 0;
    let mut failed = 0;
    for named in &args.files {
        let Named { files, folder } = match files_of(named, measured, "vLLM results") {
            Ok(named) => named,
            Err(e) => {
                output::error(e.as_ref());
                failed += 1;
                continue;
            }
        };
        // A folder fails where none of its files holds a result; a file named alone, where it
        // holds none.
        let mut held = false;
        for file in &files {
            match import_one(&mut store, file, &args, out)? {
                Imported::Unreadable => failed += 1,
                Imported::Runs(n) => {
                    total += n.added;
                    held |= n.held;
                    failed += usize::from(!folder && !n.held);
                }
            }
        }
        if folder && !held {
            let e = anyhow::anyhow!(
                "no file in {} holds a vLLM result; pass the folder vLLM saved its results in (--result-dir) or the files",
                named.display()
            );
            output::error(e.as_ref());
            failed += 1;
        }
    }
    match store.store {
        Some(_) => writeln!(out, "Added {} to {}.", runs(total), path.display())?,
        None => writeln!(out, "Added no run; {} was not opened.", path.display())?,
    }
    out.flush()?;
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// What one file gave: it could not be read, or the runs added from it and whether it held
/// any result at all (its results may all be in the store already).
enum Imported {
    Unreadable,
    Runs(Added),
}

struct Added {
    added: usize,
    held: bool,
}

/// Imports one file into the store and prints its line, its skipped blocks and its notes.
/// The run store, opened when a run is first stored.
struct Lazy<'a> {
    path: &'a Path,
    store: Option<Store>,
}

impl Lazy<'_> {
    fn get(&mut self) -> anyhow::Result<&mut Store> {
        Ok(match self.store {
            Some(ref mut store) => store,
            None => self.store.insert(Store::open(self.path)?),
        })
    }
}

fn import_one(store: &mut Lazy<'_>, file: &Path, args: &ImportArgs, out: &mut dyn Write) -> anyhow::Result<Imported> {
    let mut report = match import_file(file) {
        Ok(report) => report,
        Err(e) => {
            output::error(&e);
            return Ok(Imported::Unreadable);
        }
    };
    for run in &mut report.runs {
        run.summary.gpus = run.summary.gpus.or(args.gpus);
        run.summary.gpu_hour_cost = run.summary.gpu_hour_cost.or(args.gpu_hour_cost);
    }
    let mut added: Vec<RunId> = Vec::new();
    let mut skipped = report.skipped.clone();
    for run in &report.runs {
        match store.get()?.insert(run) {
            Ok(id) => added.push(id),
            Err(StoreError::Duplicate { existing }) => skipped.push(Problem {
                line: run.source.as_ref().and_then(|s| s.line).unwrap_or(0),
                message: format!("already in the store as run {existing}"),
            }),
            Err(e) => return Err(e.into()),
        }
    }
    skipped.sort_by_key(|p| p.line);
    let mut line = format!("{}: added {}", file.display(), runs(added.len()));
    if !added.is_empty() {
        line.push_str(&format!(" ({})", ranges(&added)));
    }
    if !skipped.is_empty() {
        line.push_str(&format!(", skipped {}", skipped.len()));
    }
    writeln!(out, "{line}")?;
    for s in &skipped {
        writeln!(out, "  skipped {s}")?;
    }
    for n in &report.notes {
        writeln!(out, "  note: {n}")?;
    }
    // A file with no result in it is a mistake to report; one whose results are all in the
    // store already is not (importing twice is harmless).
    Ok(Imported::Runs(Added { added: added.len(), held: !report.runs.is_empty() }))
}

fn runs(n: usize) -> String {
    if n == 1 { "1 run".to_string() } else { format!("{n} runs") }
}
