//! `servebench import FILE...`: vLLM result files and reports into the run store.
//!
//! Prints, per file, how many runs were added (with their numbers) and every block or
//! document skipped with its line and reason, then the total. A block already in the store
//! (same file content and line) is skipped, so importing a file again adds nothing. The exit
//! code is 1 when a file could not be read or held no result at all; the other files are still
//! imported.

use std::io::Write;
use std::process::ExitCode;

use servebench_report::compare::ranges;
use servebench_store::import::{Problem, import_file};
use servebench_store::{RunId, Store, StoreError};

use crate::cli::store_args::ImportArgs;
use crate::output;

pub fn execute(args: ImportArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let path = args.db.path()?;
    let mut store = Store::open(&path)?;
    let mut total = 0;
    let mut failed = 0;
    for file in &args.files {
        let report = match import_file(file) {
            Ok(report) => report,
            Err(e) => {
                output::error(&e);
                failed += 1;
                continue;
            }
        };
        let mut added: Vec<RunId> = Vec::new();
        let mut skipped = report.skipped.clone();
        for run in &report.runs {
            match store.insert(run) {
                Ok(id) => added.push(id),
                Err(StoreError::Duplicate { existing }) => skipped.push(Problem {
                    line: run.source.as_ref().and_then(|s| s.line).unwrap_or(0),
                    message: format!("already in the store as run {existing}"),
                }),
                Err(e) => return Err(e.into()),
            }
        }
        skipped.sort_by_key(|p| p.line);
        total += added.len();
        // A file with no result in it is a mistake to report; one whose results are all in the
        // store already is not (importing twice is harmless).
        if report.runs.is_empty() {
            failed += 1;
        }
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
    }
    writeln!(out, "Added {} to {}.", runs(total), path.display())?;
    out.flush()?;
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn runs(n: usize) -> String {
    if n == 1 { "1 run".to_string() } else { format!("{n} runs") }
}
