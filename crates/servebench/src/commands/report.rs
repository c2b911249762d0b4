//! `servebench report`: the runs as one self-contained HTML file.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
use servebench_report::html::{HtmlOptions, MAX_DISTRIBUTIONS, render};
use servebench_report::select::{Records, load};

use crate::cli::report_args::HtmlReportArgs;
use crate::commands::compare::{selection, usage};
use crate::commands::runs::open_required;

pub fn execute(args: HtmlReportArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let selection = match selection(&args.select, "report on") {
        Ok(s) => s,
        Err(e) => return Ok(usage(&*e)),
    };
    let store = open_required(&args.db)?;
    let timeline = args.timeline.as_ref().map(|r| store.resolve(r)).transpose()?;
    let runs = load(&store, &selection, &Records::Some { first: MAX_DISTRIBUTIONS, also: timeline })?;
    let now = jiff::Zoned::now();
    let options = HtmlOptions {
        title: args.title.clone(),
        by: args.by.clone(),
        timeline_run: timeline,
        generator: format!("servebench {}", env!("CARGO_PKG_VERSION")),
        generated_at: Some(now.strftime("%Y-%m-%d %H:%M %Z").to_string()),
    };
    let html = render(&runs, &options)?;
    servebench_store::refuse_store_overwrite(&args.output)?;
    std::fs::write(&args.output, html).with_context(|| {
        format!("could not write {}; check the folder exists and is writable", args.output.display())
    })?;
    let noun = if runs.len() == 1 { "run" } else { "runs" };
    writeln!(out, "Wrote the report of {} {noun} to {}.", runs.len(), args.output.display())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
