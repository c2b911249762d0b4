//! The end of every measured or predicted run: summarise, print vLLM's report, save the
//! result JSON when asked, and keep the run in the run store.

use std::path::PathBuf;

use servebench_core::metrics::Summary;
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
