//! `servebench compare`: runs side by side, a sweep, or two runs with confidence intervals,
//! with findings and `--fail-on` regression rules.

use std::io::Write;
use std::process::ExitCode;

use anyhow::anyhow;
use servebench_core::threshold::{Threshold, parse_fail_on};
use servebench_report::select::{Records, Selection, load};
use servebench_report::{Comparison, Format};
use servebench_store::RunRef;

use crate::cli::report_args::{CompareArgs, CompareFormat, RunSelection};
use crate::commands::runs::open_required;
use crate::output;

/// The exit code when a `--fail-on` rule fails.
pub const REGRESSION: u8 = 3;

pub fn execute(args: CompareArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let rules: Vec<Threshold> = match parse_fail_on(&args.fail_on) {
        Ok(rules) => rules,
        Err(e) => return Ok(usage(&e)),
    };
    let selection = match selection(&args.select, "compare") {
        Ok(s) => s,
        Err(e) => return Ok(usage(&*e)),
    };
    let store = open_required(&args.db)?;
    let mut runs = load(&store, &selection, &Records::None)?;
    if runs.len() < 2 {
        return Err(servebench_report::ReportError::TooFewRuns(runs.len()).into());
    }
    if !rules.is_empty() && runs.len() != 2 {
        return Ok(usage(&*anyhow!(
            "--fail-on checks the comparison of two runs (compare A B), and {} runs were selected",
            runs.len()
        )));
    }
    if runs.len() == 2 {
        for run in &mut runs {
            run.records = store.records(&RunRef::Id(run.row.id))?;
        }
    }
    let comparison = Comparison::new(&runs, args.by.as_deref())?;
    let format = match args.format {
        CompareFormat::Table => Format::Table,
        CompareFormat::Markdown => Format::Markdown,
        CompareFormat::Csv => Format::Csv,
    };
    out.write_all(comparison.render(format, args.findings).as_bytes())?;
    let mut code = ExitCode::SUCCESS;
    if let Some(gate) = comparison.check(&rules).filter(|_| !rules.is_empty()) {
        let mut text = String::from(if format == Format::Markdown { "\n### Regression rules\n\n" } else { "\n" });
        for line in gate.text().lines() {
            text.push_str(&format!("{}{line}\n", if format == Format::Markdown { "- " } else { "" }));
        }
        if format == Format::Csv {
            let _ = std::io::stderr().write_all(text.trim_start().as_bytes());
        } else {
            out.write_all(text.as_bytes())?;
        }
        if gate.failed() {
            code = ExitCode::from(REGRESSION);
        }
    }
    out.flush()?;
    Ok(code)
}

/// Prints a usage error and gives its exit code.
pub(crate) fn usage(e: &(dyn std::error::Error + 'static)) -> ExitCode {
    output::error(e);
    ExitCode::from(2)
}

/// What the flags select; an error when they select nothing.
pub(crate) fn selection(select: &RunSelection, command: &str) -> anyhow::Result<Selection> {
    if select.is_empty() {
        return Err(anyhow!(
            "name the runs to {command} (their numbers or short ids), or pick them with --all or filters such as \
             --label KEY=VALUE; `servebench runs list` shows what the store holds"
        ));
    }
    if !select.runs.is_empty() {
        return Ok(Selection::Runs(select.runs.clone()));
    }
    Ok(Selection::Filter(select.filter.to_filter()?))
}
