//! Measurement files: a file of results as read ([`read_file`]), one point a result, and the
//! results in it that could not be read, each with its place and why ([`FileRead`]). Result JSON
//! (one document, one a line, pretty-printed documents or a list of them), vLLM console reports
//! and llama-benchy's output are told apart by their text; what a point is and how each result
//! becomes one is [`super::points`].

use std::fmt;
use std::path::Path;

use servebench_core::vllm::{ReportOrigin, is_json, parse_reports, read_documents};

use super::CalibrationError;
use super::points::{MeasuredPoint, point_from_json, report_points};

/// A result that was not read or not validated, and why: `label` says which (its file and place
/// in it, as a point's label does).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Skipped {
    pub label: String,
    pub reason: String,
}

impl Skipped {
    /// The results of `list` that were skipped for the same reason, one group a reason in the
    /// order its first result came: a table whose rows all lack the same label is one line to
    /// read, not one a row. Each group keeps its results' labels in their order.
    pub fn grouped(list: &[Skipped]) -> Vec<SkipGroup<'_>> {
        let mut groups: Vec<SkipGroup<'_>> = Vec::new();
        for s in list {
            match groups.iter_mut().find(|g| g.reason == s.reason) {
                Some(g) => g.labels.push(&s.label),
                None => groups.push(SkipGroup { labels: vec![&s.label], reason: &s.reason }),
            }
        }
        groups
    }
}

/// Results skipped for one reason ([`Skipped::grouped`]). Shown as the first three labels, how
/// many more there are, and the reason: `a.json line 1 (list item 1), a.json line 1 (list item
/// 2), a.json line 1 (list item 3) and 83 more: it names no model; ...`.
#[derive(Clone, Debug, PartialEq)]
pub struct SkipGroup<'a> {
    pub labels: Vec<&'a str>,
    pub reason: &'a str,
}

impl fmt::Display for SkipGroup<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 3;
        let n = self.labels.len();
        let shown = &self.labels[..n.min(SHOWN)];
        match (shown, n.saturating_sub(SHOWN)) {
            ([], _) => {}
            ([one], _) => write!(f, "{one}")?,
            ([first @ .., last], 0) => write!(f, "{} and {last}", first.join(", "))?,
            (all, more) => write!(f, "{} and {more} more", all.join(", "))?,
        }
        write!(f, ": {}", self.reason)
    }
}

/// A measurement file as read: its results that became points, and those that could not (a row
/// without a workload, a block without figures), each with its place in the file and why. A
/// file is often many runs: one that cannot be read does not hide the others.
#[derive(Debug, Default)]
pub struct FileRead {
    pub points: Vec<MeasuredPoint>,
    pub skipped: Vec<Skipped>,
}

impl FileRead {
    /// The points where every result of the file was read; else the first that was not, as the
    /// file's error.
    pub fn all(self, origin: &str) -> Result<Vec<MeasuredPoint>, CalibrationError> {
        let Some(first) = self.skipped.first() else { return Ok(self.points) };
        let message = match place(&first.label, origin) {
            "" => first.reason.clone(),
            place => format!("{place}: {}", first.reason),
        };
        Err(CalibrationError::Input { path: origin.into(), message })
    }

    /// What every reader's points go through, once: a result of more requests than a fit
    /// simulates is skipped with the reason before anything expands its lengths (a damaged
    /// count of 10^14 would exhaust the memory), then the others' totals take the shape of the
    /// dataset they name ([`super::datasets::shape_by_dataset`]).
    pub(super) fn finished(mut self) -> FileRead {
        let (mut kept, big): (Vec<_>, Vec<_>) =
            self.points.drain(..).partition(|p| p.workload.num_prompts <= super::run::MAX_REQUESTS);
        kept.iter_mut().for_each(super::datasets::shape_by_dataset);
        self.points = kept;
        self.skipped.extend(
            big.into_iter().map(|p| Skipped { reason: super::run::too_many(p.workload.num_prompts), label: p.label }),
        );
        self
    }

    fn any(self, origin: &str) -> Result<FileRead, CalibrationError> {
        if !self.points.is_empty() || self.skipped.is_empty() {
            return Ok(self);
        }
        let n = self.skipped.len();
        let first = &self.skipped[0];
        let message = match (n, place(&first.label, origin)) {
            (1, "") => first.reason.clone(),
            (1, place) => format!("{place}: {}", first.reason),
            (_, "") => format!("none of its {n} results could be read; the first: {}", first.reason),
            (_, place) => format!("none of its {n} results could be read; the first, {place}: {}", first.reason),
        };
        Err(CalibrationError::Input { path: origin.into(), message })
    }
}

/// A result's place in the file `origin`, for an error that names the file already: its label
/// without the file's name it starts with ("line 3 (list item 1)", "#2 (line 29)", or nothing
/// where the file is one result).
fn place<'a>(label: &'a str, origin: &str) -> &'a str {
    let name = Path::new(origin).file_name().map_or(origin.into(), |n| n.to_string_lossy());
    label.strip_prefix(name.as_ref()).unwrap_or(label).trim_start()
}

/// Reads a measurement file: result JSON (one document, one per line when appended,
/// pretty-printed documents or a list of them), a console report with one or more result
/// blocks, or llama-benchy's tables ([`super::benchy`]). A result in it that cannot be read as
/// a measurement is skipped with its reason ([`FileRead`]); the file fails where it cannot be
/// read at all, or where none of its results can.
pub fn read_file(path: &Path) -> Result<FileRead, CalibrationError> {
    let origin = path.display().to_string();
    if path.is_dir() {
        let message = format!("it is a folder; pass the result files in it ({}/*.json, or the reports)", origin);
        return Err(CalibrationError::Input { path: origin, message });
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        let message = match e.kind() {
            std::io::ErrorKind::InvalidData => {
                "it is not text (UTF-8); pass vLLM console reports, llama-benchy's output or result JSON".into()
            }
            _ => e.to_string(),
        };
        CalibrationError::Input { path: origin.clone(), message }
    })?;
    let name = path.file_name().map_or(origin.clone(), |n| n.to_string_lossy().into_owned());
    let read = if is_json(&text) {
        points_from_json_text(&text, &name)
            .map_err(|message| CalibrationError::Input { path: origin.clone(), message })?
    } else {
        // Parsed once: a file of report blocks is read for them even if it holds a table too.
        let blocks = parse_reports(&text, ReportOrigin::Vllm);
        if blocks.is_empty() && super::benchy::is_benchy(&text) {
            super::benchy::points_from_benchy(&text, &name)?
        } else {
            report_points(blocks, &name)?
        }
    };
    read.finished().any(&origin)
}

/// [`read_file`] where every result of the file must be read: the first that cannot is the
/// file's error.
pub fn read_points(path: &Path) -> Result<Vec<MeasuredPoint>, CalibrationError> {
    read_file(path)?.all(&path.display().to_string())
}

/// Every document of a result JSON file named `name`: one point each (or a llama-benchy
/// report's runs), labelled with the name alone when the file holds one document, else with
/// the line (and list item). A document that is not valid JSON fails the file; one that is but
/// cannot be read as a measurement is skipped.
fn points_from_json_text(text: &str, name: &str) -> Result<FileRead, String> {
    let docs = read_documents(text)
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{e}; fix that document or leave it out of the file"))?;
    if docs.is_empty() {
        return Err("the file holds no result document (an empty list?); pass a file with results".into());
    }
    let one = docs.len() == 1 && docs[0].item.is_none();
    let mut read = FileRead::default();
    for d in &docs {
        let item = d.item_suffix();
        let label = if one { name.to_string() } else { format!("{name} line {}{item}", d.line) };
        let this = if super::benchy::is_benchy_json(&d.value) {
            super::benchy::points_from_benchy_json(&d.value, &label)
        } else if super::table::is_row(&d.value) {
            super::table::point_from_row(&d.value, label.clone(), super::table::RowDefaults::default())
                .map(|p| FileRead { points: vec![p], skipped: Vec::new() })
        } else {
            point_from_json(&d.value, label.clone()).map(|p| FileRead { points: vec![p], skipped: Vec::new() })
        };
        match this {
            Ok(this) => {
                read.points.extend(this.points);
                read.skipped.extend(this.skipped);
            }
            Err(reason) => read.skipped.push(Skipped { label, reason }),
        }
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::Skipped;

    fn skipped(label: &str, reason: &str) -> Skipped {
        Skipped { label: label.into(), reason: reason.into() }
    }

    #[test]
    fn results_skipped_for_one_reason_are_one_line() {
        let rows: Vec<Skipped> =
            (1..=5).map(|i| skipped(&format!("t.json line 1 (list item {i})"), "it names no model")).collect();
        let mut list = rows.clone();
        list.insert(1, skipped("r.txt #2 (line 30)", "it sent nothing"));
        let lines: Vec<String> = Skipped::grouped(&list).iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "t.json line 1 (list item 1), t.json line 1 (list item 2), t.json line 1 (list item 3) and 2 more: \
                 it names no model",
                "r.txt #2 (line 30): it sent nothing",
            ]
        );
        let two: Vec<String> = Skipped::grouped(&rows[..2]).iter().map(ToString::to_string).collect();
        assert_eq!(two, ["t.json line 1 (list item 1) and t.json line 1 (list item 2): it names no model"]);
        let three = Skipped::grouped(&rows[..3])[0].to_string();
        assert!(three.starts_with("t.json line 1 (list item 1), t.json line 1 (list item 2) and t.json"), "{three}");
        assert!(Skipped::grouped(&[]).is_empty());
    }

    proptest! {
        /// Every skipped result is in exactly one group, the one of its reason; groups come in the
        /// order of their first result, and keep their results' order.
        #[test]
        fn every_skipped_result_is_in_the_group_of_its_reason(picks in prop::collection::vec(0usize..4, 0..40)) {
            let list: Vec<Skipped> =
                picks.iter().enumerate().map(|(i, r)| skipped(&format!("#{i}"), &format!("reason {r}"))).collect();
            let groups = Skipped::grouped(&list);
            prop_assert_eq!(groups.iter().map(|g| g.labels.len()).sum::<usize>(), list.len());
            let mut firsts = Vec::new();
            for g in &groups {
                let members: Vec<&str> =
                    list.iter().filter(|s| s.reason == g.reason).map(|s| s.label.as_str()).collect();
                prop_assert_eq!(&g.labels, &members);
                firsts.push(list.iter().position(|s| s.reason == g.reason).unwrap());
            }
            prop_assert!(firsts.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
