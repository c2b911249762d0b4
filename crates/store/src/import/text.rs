//! Console reports: every `Serving Benchmark Result` block in a text file becomes a run,
//! labelled by the headings above it (see [`block_labels`] for the rules).
//!
//! Blocks are read with [`parse_reports`] as vLLM printed them: the "Peak ..." lines are
//! vLLM's one-second bucket values. A malformed block is skipped and reported with the line
//! of its problem; the blocks after it are read as usual.

use servebench_core::vllm::{ReportOrigin, block_labels, labels, parse_reports};

use super::{Context, ImportReport, Problem};
use crate::runs::{NewRun, RunKind};

pub(crate) fn import(text: &str, cx: &Context<'_>, report: &mut ImportReport) {
    let entries = parse_reports(text, ReportOrigin::Vllm);
    if entries.is_empty() {
        let trimmed = text.trim();
        let message = if trimmed.is_empty() {
            "the file is empty; import a vLLM result JSON or console report".to_string()
        } else if let Ok(value) = serde_json::from_str::<serde_json::Value>(trimmed) {
            let shown: String = value.to_string().chars().take(40).collect();
            format!("the file is the JSON value {shown}, not a result (an object, or a list of them)")
        } else {
            "no vLLM result block (a line `============ Serving Benchmark Result ============`) in this file"
                .to_string()
        };
        report.skipped.push(Problem { line: 1, message });
        return;
    }
    let labelled = block_labels(&entries);
    for (entry, labels) in entries.into_iter().zip(labelled.blocks) {
        match entry {
            Ok(block) => {
                let mut run = NewRun::from_summary(RunKind::Import, block.summary);
                for (k, v) in &labels {
                    run.set_label(k, v);
                }
                run.model = run.label("model").map(str::to_string);
                // GPUStack's benchmark runner prints vLLM's block with figures that are not
                // vLLM's: kept as printed, labelled, and said.
                if labels::runner_mean_latency(&block.values).is_some() {
                    let (key, value) = labels::RUNNER_CLIENT;
                    run.set_label(key, value);
                    report.notes.push(Problem {
                        line: block.line,
                        message: "a block of GPUStack's benchmark runner (its `Latency` section): its TPOT and ITL \
                                  are not vLLM's (TPOT is the first token's wait over the output tokens) and are \
                                  stored as printed; `sim validate` rebuilds vLLM's TPOT from the block's mean \
                                  latency"
                            .to_string(),
                    });
                }
                cx.stamp(&mut run, block.line, None);
                report.runs.push(run);
            }
            Err(err) => report.skipped.push(Problem {
                line: err.line,
                message: format!("{} (the block at line {} is skipped)", err.problem, err.block_line),
            }),
        }
    }
    report.notes.extend(labelled.notes.into_iter().map(|n| Problem { line: n.line, message: n.message }));
}
