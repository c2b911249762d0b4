//! The JSON documents of a result file, whatever way they were put in it: one document
//! (`--save-result`), one per line (`--append-result`), pretty-printed documents one after
//! another (sweep results), or a list of documents.
//!
//! [`read_documents`] turns the text into values, each with the line it starts on, in file
//! order. A top-level list gives one entry per item (all on the list's line, told apart by
//! [`Document::item`]). A document that is not valid JSON becomes an error entry with its
//! line; reading resumes at the next line that starts with `{` or `[`, which is how appended
//! and pretty-printed documents start, so one broken document does not hide the others.
//! What a document means (a vLLM result or not) is for the caller to decide.

use serde_json::Value;
use thiserror::Error;

/// One JSON document of a file.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// 1-based line the document (or the list holding it) starts on.
    pub line: usize,
    /// The 0-based position in a top-level list; `None` for a document on its own.
    pub item: Option<usize>,
    pub value: Value,
}

impl Document {
    /// ` (list item 2)` for a list item, else nothing: to add to messages about the document.
    pub fn item_suffix(&self) -> String {
        self.item.map(|i| format!(" (list item {i})")).unwrap_or_default()
    }
}

/// A document that is not valid JSON.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("line {line}: not valid JSON ({message}, counting lines from this one)")]
pub struct DocumentError {
    /// 1-based line the broken document starts on.
    pub line: usize,
    /// What the JSON parser said, its line and column counted from the document's start.
    pub message: String,
}

/// Whether `text` is JSON rather than a console report: its first non-blank character is `{`
/// or `[`.
pub fn is_json(text: &str) -> bool {
    text.trim_start().starts_with(['{', '['])
}

/// `text` with Python's non-JSON number literals (`NaN`, `Infinity`, `-Infinity`, which its
/// `json.dump` writes for floats JSON cannot hold) outside strings read as `null`: a figure
/// that is not a number is absent. Newlines are kept, so lines count as in the file.
fn python_literals_as_null(text: &str) -> std::borrow::Cow<'_, str> {
    if !(text.contains("NaN") || text.contains("Infinity")) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped, mut copied) = (false, false, 0);
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        if c == '"' {
            in_string = true;
            continue;
        }
        let literal = ["-Infinity", "Infinity", "NaN"].into_iter().find(|l| text[i..].starts_with(l));
        if let Some(l) = literal {
            out.push_str(&text[copied..i]);
            out.push_str("null");
            copied = i + l.len();
            // Skip the rest of the literal.
            for _ in 1..l.len() {
                chars.next();
            }
        }
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}

/// Every JSON document in `text`, in file order (see the module docs). Blank text gives none.
/// Python's `NaN` and `Infinity` read as `null`.
pub fn read_documents(text: &str) -> Vec<Result<Document, DocumentError>> {
    let text = python_literals_as_null(text);
    let text = text.as_ref();
    let mut lines = LineCounter::new(text);
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let rest = &text[pos..];
        let start = pos + (rest.len() - rest.trim_start().len());
        if start >= text.len() {
            break;
        }
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(value)) => {
                let line = lines.line_of(start);
                match value {
                    Value::Array(items) => out.extend(
                        items.into_iter().enumerate().map(|(i, value)| Ok(Document { line, item: Some(i), value })),
                    ),
                    value => out.push(Ok(Document { line, item: None, value })),
                }
                pos = start + stream.byte_offset();
            }
            Some(Err(e)) => {
                out.push(Err(DocumentError { line: lines.line_of(start), message: e.to_string() }));
                match next_document_start(text, start) {
                    Some(next) => pos = next,
                    None => break,
                }
            }
            None => break,
        }
    }
    out
}

/// 1-based line numbers of byte positions asked about in increasing order.
struct LineCounter<'a> {
    text: &'a [u8],
    counted: usize,
    line: usize,
}

impl<'a> LineCounter<'a> {
    fn new(text: &'a str) -> Self {
        LineCounter { text: text.as_bytes(), counted: 0, line: 1 }
    }

    /// The line of `pos`; counts only the bytes since the position asked about last.
    fn line_of(&mut self, pos: usize) -> usize {
        self.line += self.text[self.counted..pos].iter().filter(|&&b| b == b'\n').count();
        self.counted = pos;
        self.line
    }
}

/// The start of the first line after the one holding `pos` that begins with `{` or `[`.
fn next_document_start(text: &str, pos: usize) -> Option<usize> {
    let mut at = pos + text[pos..].find('\n')? + 1;
    loop {
        if text[at..].starts_with(['{', '[']) {
            return Some(at);
        }
        at += text[at..].find('\n')? + 1;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `(line, item, value)` of a document.
    type Entry = (usize, Option<usize>, Value);

    /// The documents, and the lines of the errors.
    fn read(text: &str) -> (Vec<Entry>, Vec<usize>) {
        let (mut docs, mut errors) = (Vec::new(), Vec::new());
        for entry in read_documents(text) {
            match entry {
                Ok(d) => docs.push((d.line, d.item, d.value)),
                Err(e) => errors.push(e.line),
            }
        }
        (docs, errors)
    }

    #[test]
    fn python_s_nan_and_infinity_read_as_null_outside_strings() {
        let text =
            "{\"std\": NaN, \"rate\": Infinity, \"low\": -Infinity,\n \"note\": \"NaN \\\" Infinity\"}\n{\"a\": 1}";
        let (docs, errors) = read(text);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            docs,
            [
                (1, None, json!({"std": null, "rate": null, "low": null, "note": "NaN \" Infinity"})),
                (3, None, json!({"a": 1}))
            ]
        );
        assert_eq!(python_literals_as_null("{\"é\": 1}"), "{\"é\": 1}");
    }

    #[test]
    fn one_document_is_one_entry() {
        let (docs, errors) = read("\n\n  {\"a\": 1}\n");
        assert_eq!(docs, [(3, None, json!({"a": 1}))]);
        assert!(errors.is_empty());
        assert!(read("").0.is_empty() && read(" \n\t\n").0.is_empty());
    }

    #[test]
    fn appended_documents_keep_their_lines_and_a_broken_one_is_an_error() {
        let text = "{\"n\": 1}\n{\"n\": 2, \"cut\n{\"n\": 3}\n\n{\"n\": 4}";
        let entries = read_documents(text);
        assert_eq!(entries.len(), 4);
        let (docs, errors) = read(text);
        let lines: Vec<(usize, i64)> = docs.iter().map(|(l, _, v)| (*l, v["n"].as_i64().unwrap())).collect();
        assert_eq!(lines, [(1, 1), (3, 3), (5, 4)]);
        assert_eq!(errors, [2]);
        let err = entries[1].as_ref().unwrap_err().to_string();
        assert!(err.starts_with("line 2: not valid JSON (") && err.contains("counting lines from this one"), "{err}");
    }

    #[test]
    fn pretty_printed_documents_follow_one_another() {
        let doc = json!({"completed": 3, "nested": {"x": [1, 2]}});
        let pretty = serde_json::to_string_pretty(&doc).unwrap();
        let n = pretty.lines().count();
        let (docs, errors) = read(&format!("\n{pretty}\n{pretty}{pretty}\n"));
        assert!(errors.is_empty(), "{errors:?}");
        let lines: Vec<usize> = docs.iter().map(|d| d.0).collect();
        assert_eq!(lines, [2, 2 + n, 1 + 2 * n]);
        assert!(docs.iter().all(|d| d.2 == doc && d.1.is_none()));
    }

    #[test]
    fn a_list_gives_one_entry_per_item() {
        let text = "[\n  {\"n\": 1},\n  2,\n  {\"n\": 3}\n]\n{\"n\": 4}\n";
        let (docs, _) = read(text);
        assert_eq!(
            docs,
            [
                (1, Some(0), json!({"n": 1})),
                (1, Some(1), json!(2)),
                (1, Some(2), json!({"n": 3})),
                (6, None, json!({"n": 4}))
            ]
        );
        let first = read_documents(text).remove(1).unwrap();
        assert_eq!(first.item_suffix(), " (list item 1)");
    }

    #[test]
    fn a_broken_document_at_the_end_stops_reading() {
        let (docs, errors) = read("{\"n\": 1}\n{\"n\": ");
        assert_eq!((docs.len(), errors), (1, vec![2]));
        let (docs, errors) = read("not json at all\nstill not\n");
        assert_eq!((docs.len(), errors), (0, vec![1]));
    }

    #[test]
    fn json_is_told_from_text_by_its_first_character() {
        assert!(is_json("\n  {\"a\": 1}") && is_json("[1]"));
        assert!(!is_json("Results Qwen/Qwen3-8B\n{") && !is_json(""));
    }
}
