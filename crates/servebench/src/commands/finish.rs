//! The end of every measured or predicted run: summarise, print vLLM's report, save the
//! result JSON when asked, and keep the run in the run store.

use std::path::PathBuf;

use servebench_core::metrics::{Ledger, Summary, TurnMetrics, render_notes, render_turns};
use servebench_core::record::RunResult;
use servebench_core::vllm::json::{result_filename, result_json, write_result};
use servebench_core::vllm::text::{render_failures, render_result_block};

use crate::output;

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
pub struct Finished {
    pub summary: Summary,
    /// The result JSON written, if `--save-result` or `--append-result` was given.
    pub saved_to: Option<PathBuf>,
}

/// Prints the failure listing and the result block exactly as vLLM does, then saves the
/// result JSON if the config asks for it.
pub fn finish_run(result: &RunResult) -> anyhow::Result<Finished> {
    let summary = Summary::compute(result);
    output::out(&render_failures(&summary))?;
    output::out(&render_result_block(&summary))?;
    // servebench's own sections come after vLLM's block, so the block stays byte-identical.
    if let Some(turns) = TurnMetrics::compute(result) {
        output::out(&render_turns(&turns))?;
    }
    output::out(&render_notes(&Ledger::compute(result)))?;
    if let Some(warning) = client_lag_warning(&summary) {
        output::line(warning)?;
    }
    if result.interrupted {
        output::line(format!(
            "Run interrupted: {} requests were not sent; the report covers what was measured until then.",
            result.not_sent
        ))?;
    }
    let out = &result.config.output;
    let saved_to = if out.save_result || out.append_result {
        let path = result_filename(&result.config, &result.config.target.model_id, &result.date);
        let value = result_json(result, &summary);
        write_result(&path, &value, out.append_result)
            .map_err(|e| anyhow::anyhow!("could not save the result to {}: {e}", path.display()))?;
        Some(path)
    } else {
        None
    };
    Ok(Finished { summary, saved_to })
}

/// Dispatch lag above this at p99 means the client, not the server, shaped the arrivals.
const LAG_WARN_MS: f64 = 10.0;

/// A warning when requests left the client noticeably later than the schedule said.
fn client_lag_warning(summary: &Summary) -> Option<String> {
    let lag = summary.dispatch_lag.as_ref()?;
    (lag.p99_ms > LAG_WARN_MS).then(|| {
        format!(
            "WARNING: requests left the client later than planned (dispatch lag p50 {:.2} ms, p99 {:.2} ms, \
             max {:.2} ms): the client or this machine was saturated, so the offered load was lower than asked.",
            lag.p50_ms, lag.p99_ms, lag.max_ms
        )
    })
}

/// Where a finished run is kept: `--db PATH`, else `$SERVEBENCH_DB`, else the user's data
/// directory; `--no-store` keeps nothing.
pub struct StoreChoice<'a> {
    pub db: Option<&'a str>,
    pub no_store: bool,
}

/// Saves a finished run in the run store and says where. A store that cannot be written is a
/// warning, not a lost run: the report was printed and any result file was written already.
pub fn keep_run(
    result: &RunResult,
    summary: &Summary,
    kind: servebench_store::RunKind,
    environment: Option<serde_json::Value>,
    choice: &StoreChoice<'_>,
) -> anyhow::Result<Option<servebench_store::RunId>> {
    if choice.no_store {
        return Ok(None);
    }
    let path = match choice.db {
        Some(p) => PathBuf::from(p),
        None => servebench_store::default_db_path()?,
    };
    let mut run = servebench_store::NewRun::from_run(kind, result, summary);
    if let Some(env) = environment {
        run = run.with_environment(env);
    }
    let stored = servebench_store::Store::open(&path).and_then(|mut store| store.insert(&run));
    match stored {
        Ok(id) => {
            output::line(format!("Saved as run {id} in {} (see `servebench runs show {id}`)", path.display()))?;
            Ok(Some(id))
        }
        Err(e) => {
            output::line(format!("WARNING: the run could not be saved in the run store {}: {e}", path.display()))?;
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use servebench_core::metrics::DispatchLag;

    #[test]
    fn a_late_client_is_called_out_and_a_punctual_one_is_not() {
        let mut s = Summary::default();
        assert!(client_lag_warning(&s).is_none(), "no lag measured");
        s.dispatch_lag = Some(DispatchLag { p50_ms: 1.1, p99_ms: 3.0, max_ms: 4.0 });
        assert!(client_lag_warning(&s).is_none());
        s.dispatch_lag = Some(DispatchLag { p50_ms: 2.0, p99_ms: 25.0, max_ms: 40.0 });
        let w = client_lag_warning(&s).unwrap();
        assert!(w.contains("p99 25.00 ms") && w.contains("saturated"), "{w}");
    }
}
