//! Console reports: every `Serving Benchmark Result` block in a text file becomes a run,
//! labelled by the headings above it (see [`super::headings`]).
//!
//! Blocks are read with [`parse_reports`] as vLLM printed them: the "Peak ..." lines are
//! vLLM's one-second bucket values. A malformed block is skipped and reported with the line
//! of its problem; the blocks after it are read as usual.

use servebench_core::vllm::{ReportOrigin, parse_reports};

use super::headings::Headings;
use super::{Context, ImportReport, Problem};
use crate::model::{NewRun, RunKind};

pub(crate) fn import(text: &str, cx: &Context<'_>, report: &mut ImportReport) {
    let lines: Vec<&str> = text.lines().collect();
    let entries = parse_reports(text, ReportOrigin::Vllm);
    if entries.is_empty() {
        report.skipped.push(Problem {
            line: 1,
            message: "no vLLM result block (a line `============ Serving Benchmark Result ============`) in this file"
                .to_string(),
        });
        return;
    }
    let mut headings = Headings::new();
    for entry in entries {
        let (heading_texts, block_line) = match &entry {
            Ok(block) => (&block.headings, block.line),
            Err(err) => (&err.headings, err.block_line),
        };
        let located = locate(&lines, block_line, heading_texts.len());
        let labels = headings.block(&located, &mut report.notes);
        match entry {
            Ok(block) => {
                let mut run = NewRun::from_summary(RunKind::Import, block.summary);
                for (k, v) in &labels {
                    run.set_label(k, v);
                }
                run.model = run.label("model").map(str::to_string);
                cx.stamp(&mut run, block.line, None);
                report.runs.push(run);
            }
            Err(err) => report.skipped.push(Problem {
                line: err.line,
                message: format!("{} (the block at line {} is skipped)", err.problem, err.block_line),
            }),
        }
    }
    headings.finish(&mut report.notes);
}

/// The `count` non-blank lines right above the block that starts at 1-based `block_line`,
/// with their 1-based line numbers, in file order: the block's headings as [`parse_reports`]
/// collected them.
fn locate<'a>(lines: &[&'a str], block_line: usize, count: usize) -> Vec<(usize, &'a str)> {
    let mut found: Vec<(usize, &str)> = lines[..block_line.saturating_sub(1).min(lines.len())]
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, l)| !l.trim().is_empty())
        .take(count)
        .map(|(i, l)| (i + 1, l.trim()))
        .collect();
    found.reverse();
    found
}
