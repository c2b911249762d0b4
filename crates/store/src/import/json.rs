//! Result JSON files: `vllm bench serve --save-result` of any 0.x version, `--append-result`
//! files (one document per line), pretty-printed documents (sweep results), lists of
//! documents, and servebench's own files.
//!
//! The file is split into documents by [`read_documents`] (a list gives one run per item, a
//! broken document is skipped with its line); each document's summary is read by
//! [`summary_from_vllm_json`]. Then:
//! - A servebench file (with the `servebench` key) gives back its resolved config (model,
//!   backend, target, `--label` and `--metadata` labels), start time, notes, interrupted flag
//!   and one record per request from `servebench.requests` (with every chunk time when the
//!   file also has the per-request `itls`).
//! - A vLLM file gives `backend`, `model_id` and `num_prompts` as columns, `label` as the
//!   label `label`, and every other top-level key vLLM does not define whose value is a
//!   string, number or boolean as a label (vLLM writes `--metadata` there, and sweeps their
//!   parameters; see [`metadata_from_vllm_json`]). `date` (the local time of the machine
//!   that ran it) becomes the start time in this machine's time zone. The per-request arrays
//!   become records when present.

use serde_json::{Map, Value};
use servebench_core::config::RunConfig;
use servebench_core::vllm::{Document, metadata_from_vllm_json, option_label, read_documents, summary_from_vllm_json};

use super::records::{from_servebench, from_vllm_arrays};
use super::{Context, ImportReport, Problem};
use crate::dates::from_vllm_date;
use crate::runs::{NewRun, RunKind};

pub(crate) fn import(text: &str, cx: &Context<'_>, report: &mut ImportReport) {
    for entry in read_documents(text) {
        match entry {
            Ok(doc) => document(&doc, cx, report),
            Err(e) => report.skipped.push(Problem {
                line: e.line,
                message: format!(
                    "not valid JSON ({}, counting lines from this one); the document is skipped",
                    e.message
                ),
            }),
        }
    }
}

fn document(doc: &Document, cx: &Context<'_>, report: &mut ImportReport) {
    let (line, at) = (doc.line, doc.item_suffix());
    let summary = match summary_from_vllm_json(&doc.value) {
        Ok(s) => s,
        Err(e) => {
            report.skipped.push(Problem { line, message: format!("{e}{at}") });
            return;
        }
    };
    let Some(m) = doc.value.as_object() else { return };
    let mut run = NewRun::from_summary(RunKind::Import, summary);
    let mut note = |message: String| report.notes.push(Problem { line, message: format!("{message}{at}") });
    match m.get("servebench").and_then(Value::as_object) {
        Some(ours) => {
            servebench_file(m, ours, &mut run, &mut note);
            // A damaged `servebench` key must not lose what vLLM's own keys say.
            if run.model.is_none() && run.config.is_none() {
                note("its servebench key has no config; the model, backend and prompt count are vLLM's keys".into());
                vllm_columns(m, &mut run);
            }
            if run.started_at.is_none() {
                run.started_at = vllm_started_at(m, &cx.tz);
            }
        }
        None => vllm_file(&doc.value, &mut run, &cx.tz, &mut note),
    }
    cx.stamp(&mut run, line, doc.item);
    report.runs.push(run);
}

fn servebench_file(m: &Map<String, Value>, ours: &Map<String, Value>, run: &mut NewRun, note: &mut impl FnMut(String)) {
    if let Some(config) = ours.get("config").filter(|c| !c.is_null()) {
        match serde_json::from_value::<RunConfig>(config.clone()) {
            Ok(c) => run.apply_config(&c),
            Err(e) => {
                note(format!("its config is not one this servebench reads ({e}); it is stored as written"));
                run.config = Some(config.clone());
                vllm_columns(m, run);
            }
        }
    }
    run.started_at = ours.get("started_at").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    run.interrupted = ours.get("interrupted").and_then(Value::as_bool).unwrap_or(false);
    if let Some(notes) = ours.get("notes").and_then(Value::as_array) {
        run.notes = notes.iter().filter_map(Value::as_str).map(str::to_string).collect();
    }
    match from_servebench(m, ours) {
        Ok(records) => run.records = records,
        Err(e) => note(format!("its per-request records are not imported: {e}")),
    }
}

/// A file vLLM wrote: `value` is an object.
fn vllm_file(value: &Value, run: &mut NewRun, tz: &jiff::tz::TimeZone, note: &mut impl FnMut(String)) {
    let Some(m) = value.as_object() else { return };
    vllm_columns(m, run);
    run.started_at = vllm_started_at(m, tz);
    if let Some(label) = m.get("label").and_then(Value::as_str).filter(|l| !l.is_empty()) {
        run.set_label("label", label);
    }
    // A sweep's server parameters (`tensor_parallel_size`, `max_num_seqs`) under the labels a
    // pasted `vllm serve` line gives (`tp`, `max-num-seqs`), so its GPUs are counted too.
    for (key, text) in metadata_from_vllm_json(value) {
        run.set_label(&option_label(&key), &text);
    }
    match from_vllm_arrays(m) {
        Ok(records) => run.records = records,
        Err(e) => note(format!("its per-request arrays are not imported: {e}")),
    }
}

/// The start time from vLLM's `date` (the local time of the machine that ran it).
fn vllm_started_at(m: &Map<String, Value>, tz: &jiff::tz::TimeZone) -> Option<String> {
    m.get("date").and_then(Value::as_str).and_then(|d| from_vllm_date(d, tz))
}

/// Backend, model and prompt count from vLLM's keys.
fn vllm_columns(m: &Map<String, Value>, run: &mut NewRun) {
    let text = |k: &str| m.get(k).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    run.backend = text("backend").or_else(|| text("endpoint_type"));
    run.model = text("model_id");
    run.num_prompts = m.get("num_prompts").and_then(Value::as_u64);
}
