//! Importers: vLLM result files and console reports into [`NewRun`]s.
//!
//! [`import_file`] reads one file and tells its kind from its content:
//! - **JSON** (the first non-blank character is `{` or `[`, see
//!   [`servebench_core::vllm::is_json`]): result files of `vllm bench
//!   serve --save-result` of any 0.x version, files of `--append-result` (one document per
//!   line), pretty-printed sweep results, and servebench's own result files. See [`json`].
//! - **Text**: console reports, any number of result blocks with free-text headings between
//!   them. See [`text`] and, for how headings become labels,
//!   [`servebench_core::vllm::parse::headings`].
//!
//! Every run records its source file and the line its document or block starts on, and a
//! fingerprint (the file content's hash and that line), so the store refuses to import the
//! same block twice. A document or block that cannot be read is reported with its line and a
//! reason, and skipped; the rest of the file is imported. Nothing is guessed.
//!
//! A run's GPU count (for the per-GPU throughputs) is its servebench config's, else what its
//! labels say (see [`gpus_of`]).

pub mod json;
pub(crate) mod records;
pub mod text;

use std::fmt;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::ids;
use crate::runs::{GPUS_LABEL, NewRun, Source, count_of};

/// What a file held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// vLLM (or servebench) result JSON.
    Json,
    /// vLLM console reports.
    Text,
}

/// A problem at a line of the imported file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// The outcome of reading one file.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportReport {
    /// The file as given.
    pub path: PathBuf,
    pub format: Format,
    /// One per result block or document that could be read, in file order.
    pub runs: Vec<NewRun>,
    /// Blocks or documents that were skipped, and why.
    pub skipped: Vec<Problem>,
    /// Things worth knowing that did not stop a run from being imported (a heading list
    /// with more values than blocks, per-request arrays that could not be used).
    pub notes: Vec<Problem>,
}

/// The file could not be read at all.
#[derive(Debug, Error)]
#[error("could not read {}: {error}; check the path and that the file is readable", path.display())]
pub struct ImportError {
    pub path: PathBuf,
    /// Not a `#[source]`: the message already holds it.
    pub error: std::io::Error,
}

/// Reads `path` and turns every result in it into a run. The stored source file name is the
/// absolute path when it can be found.
pub fn import_file(path: &Path) -> Result<ImportReport, ImportError> {
    let fail = |error| ImportError { path: path.to_path_buf(), error };
    // A device or a pipe (`/dev/zero`, a FIFO) may never end; a result is a file.
    if !std::fs::metadata(path).map_err(fail)?.is_file() {
        return Err(fail(std::io::Error::new(std::io::ErrorKind::InvalidInput, "it is not a regular file")));
    }
    let bytes = std::fs::read(path).map_err(fail)?;
    let source = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut report = import_bytes(&bytes, &source.to_string_lossy());
    report.path = path.to_path_buf();
    Ok(report)
}

/// [`import_file`] on content already read; `source` is the name stored with each run.
pub fn import_bytes(bytes: &[u8], source: &str) -> ImportReport {
    // A byte-order mark (some editors write one) is not part of the JSON or the report.
    let text = String::from_utf8_lossy(bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes));
    let cx = Context { source, content_hash: ids::fnv1a64(bytes), tz: jiff::tz::TimeZone::system() };
    let is_json = servebench_core::vllm::is_json(&text);
    let mut report = ImportReport {
        path: PathBuf::from(source),
        format: if is_json { Format::Json } else { Format::Text },
        runs: Vec::new(),
        skipped: Vec::new(),
        notes: Vec::new(),
    };
    if is_json {
        json::import(&text, &cx, &mut report);
    } else {
        text::import(&text, &cx, &mut report);
    }
    if report.runs.is_empty() && report.skipped.is_empty() {
        report.skipped.push(Problem {
            line: 1,
            message: "the file holds no result (an empty list of documents); import a `vllm bench serve \
                      --save-result` file or a console report"
                .to_string(),
        });
    }
    set_repeats_apart(&mut report);
    for run in &mut report.runs {
        run.summary.gpus = run.summary.gpus.or_else(|| gpus_of(&run.labels));
    }
    report
}

/// The GPU count a run's labels give, for a run whose file does not say it otherwise: a `gpus`
/// label (`vllm bench serve --metadata gpus=8`, or `gpus: 8` above a report), else the product
/// of the `tp`, `pp` and `dp` a pasted `vllm serve` line gave (vLLM's 1 for those it left out).
/// A `gpus` that is not a count of at least 1 (`gpus=H100`) stays a label only.
fn gpus_of(labels: &[(String, String)]) -> Option<u32> {
    let count = |key: &str| count_of(&labels.iter().find(|(k, _)| k == key)?.1);
    if let Some(n) = count(GPUS_LABEL) {
        return Some(n);
    }
    let sizes = ["tp", "pp", "dp"].map(count);
    sizes.iter().any(Option::is_some).then(|| sizes.iter().map(|s| s.unwrap_or(1)).fold(1u32, u32::saturating_mul))
}

/// A block or document that repeats an earlier one of the file exactly (figures, labels and
/// all) is the same report pasted twice: skipped, naming the first. One with the same figures
/// under other labels is kept, with a note: measured figures never repeat to the last digit.
fn set_repeats_apart(report: &mut ImportReport) {
    let line = |run: &NewRun| run.source.as_ref().and_then(|s| s.line).unwrap_or(0);
    let mut kept: Vec<NewRun> = Vec::with_capacity(report.runs.len());
    for run in std::mem::take(&mut report.runs) {
        let Some(first) = kept.iter().find(|k| k.summary == run.summary && k.summary.completed > 0) else {
            kept.push(run);
            continue;
        };
        let placed = |r: &NewRun| NewRun { source: None, fingerprint: None, ..r.clone() };
        if placed(first) == placed(&run) {
            let message = format!("repeats the result at line {} exactly (the same report twice)", line(first));
            report.skipped.push(Problem { line: line(&run), message });
            continue;
        }
        let message = format!(
            "its figures are exactly those of the result at line {}, under other labels: was one report pasted twice?",
            line(first)
        );
        report.notes.push(Problem { line: line(&run), message });
        kept.push(run);
    }
    report.runs = kept;
}

/// What every importer needs to stamp its runs.
pub(crate) struct Context<'a> {
    /// The file name stored with each run.
    pub source: &'a str,
    /// The hash of the file's bytes, for fingerprints.
    pub content_hash: u64,
    /// The zone of vLLM's local-time `date` field (the importing machine's).
    pub tz: jiff::tz::TimeZone,
}

impl Context<'_> {
    /// Stamps `run` with its source line and fingerprint (`part` tells apart several runs
    /// that start on one line, such as the elements of a JSON list).
    pub(crate) fn stamp(&self, run: &mut NewRun, line: usize, part: Option<usize>) {
        run.source = Some(Source { file: self.source.to_string(), line: Some(line) });
        let mut fp = ids::fingerprint(self.content_hash, line);
        if let Some(part) = part {
            fp.push_str(&format!("#{part}"));
        }
        run.fingerprint = Some(fp);
    }
}

#[cfg(test)]
mod tests;
