//! `servebench selftest`: runs the client self-test, keeps each level's run in the run store
//! and prints the levels as a table or as JSON.

use std::process::ExitCode;

use servebench_client::selftest::{LevelResult, SelftestOptions, SelftestReport, WITHIN_MS, selftest};
use servebench_core::metrics::{Summary, Verdict};
use servebench_store::{NewRun, RunKind};

use crate::cli::selftest_args::SelftestArgs;
use crate::commands::finish::{StoreChoice, store_run};
use crate::output::{Sink, note};

/// Room for a client and a server socket per stream, and the process's other files.
const SPARE_FILES: u64 = 512;

/// `selftest`: every level in turn, then the table (or JSON).
pub async fn run(args: SelftestArgs, out: &Sink) -> anyhow::Result<ExitCode> {
    let options = SelftestOptions {
        levels: args.levels.clone(),
        ttft: args.ttft,
        itl: args.itl,
        output_tokens: args.output_tokens,
        requests_per_stream: args.requests_per_stream,
        ..SelftestOptions::default()
    };
    let most = options.levels.iter().copied().max().unwrap_or(0) as u64;
    if let Err(e) = servebench_client::raise_nofile_limit(2 * most + SPARE_FILES) {
        note(format!("WARNING: could not raise the open-file limit: {e}"));
    }
    options.check()?;
    note(format!(
        "selftest: {} levels ({}); each request streams for {:.2} s, so this takes at least {:.0} s",
        options.levels.len(),
        options.levels.iter().map(usize::to_string).collect::<Vec<_>>().join(", "),
        options.request_time().as_secs_f64(),
        options.least_duration().as_secs_f64()
    ));
    let choice = StoreChoice { db: args.db.clone(), no_store: args.no_store };
    choice.check()?;
    let mut store_error = None;
    let report = selftest(&options, |level, run| {
        note(format!(
            "selftest: {} streams done in {:.1} s, mean TTFT error {:.3} ms",
            level.streams, level.wall_s, level.ttft_error.mean_ms
        ));
        if store_error.is_none() {
            store_error = keep_level(level, run, &choice).err();
        }
    })
    .await?;
    if let Some(e) = store_error {
        return Err(e);
    }
    if args.json {
        out.line(serde_json::to_string_pretty(&report)?)?;
    } else {
        out.out(&render_table(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Saves one level's run in the run store, labelled `selftest` with its streams, the level's
/// figures as its environment. Where it went is said on stderr, so stdout stays the table.
fn keep_level(
    level: &LevelResult,
    run: &servebench_core::record::RunResult,
    choice: &StoreChoice,
) -> anyhow::Result<()> {
    let mut new = NewRun::from_run(RunKind::Bench, run, &Summary::compute(run));
    new.set_label("selftest", &level.streams.to_string());
    let new = new.with_environment(serde_json::json!({ "selftest": level }));
    let said = Sink::memory();
    store_run(&new, choice, &said)?;
    for line in said.text().lines() {
        note(line);
    }
    Ok(())
}

/// The table: one row per level, then the highest level measured within 1 ms.
pub fn render_table(report: &SelftestReport) -> String {
    let mut s = format!(
        "Client self-test: scripted server TTFT {} ms, ITL {} ms, {} tokens; errors are |client - server| in ms; {} cores\n",
        report.ttft_ms, report.itl_ms, report.output_tokens, report.cores
    );
    s.push_str(&format!(
        "{:>7} {:>8} {:>6} {:>10} {:>9} {:>9} {:>8} {:>10} {:>11}  {}\n",
        "streams",
        "requests",
        "failed",
        "TTFT mean",
        "TTFT p99",
        "ITL mean",
        "ITL p99",
        "CPU us/ev",
        "lag p99 ms",
        "health"
    ));
    for l in &report.levels {
        let opt = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |x| format!("{x:.prec$}"));
        let health = match l.health.as_ref().map(|h| h.verdict) {
            None => "-".to_string(),
            Some(Verdict::Ok) => "ok".to_string(),
            Some(Verdict::ClientBound { from_s }) => format!("client-bound from {from_s:.2} s"),
        };
        s.push_str(&format!(
            "{:>7} {:>8} {:>6} {:>10.3} {:>9.3} {:>9.3} {:>8.3} {:>10} {:>11}  {}\n",
            l.streams,
            l.requests,
            l.requests - l.succeeded,
            l.ttft_error.mean_ms,
            l.ttft_error.p99_ms,
            l.itl_error.mean_ms,
            l.itl_error.p99_ms,
            opt(l.cpu_us_per_event, 1),
            opt(l.dispatch_lag_p99_ms, 2),
            health,
        ));
    }
    s.push_str(&match report.within_1ms_streams {
        Some(n) => format!("Highest load measured within {WITHIN_MS} ms of mean TTFT error: {n} streams\n"),
        None => format!("No level was measured within {WITHIN_MS} ms of mean TTFT error\n"),
    });
    s
}
