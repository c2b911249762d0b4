//! vLLM's report formats: the console result block (render and parse), the result JSON
//! (write and read), and Python's number and JSON spelling they depend on; and its start-up
//! log, read for the deployment and the memory it reports.

pub mod json;
pub mod labels;
pub mod parse;
pub mod sizes;
pub mod startup_log;
pub mod text;

/// Python's spelling lives in [`crate::pyjson`]; re-exported here where the report writers use it.
pub use crate::pyjson;
pub use crate::pyjson::{dumps, py_float_repr, py_json_float};
pub use json::documents::{Document, DocumentError, is_json, read_documents};
pub use json::metadata::metadata_from_vllm_json;
pub use json::read::{VllmJsonError, summary_from_vllm_json};
pub use json::{ResultFileError, result_filename, result_json, write_result};
pub use labels::p_word;
pub use parse::headings::{
    BlockLabels, HeadingLabels, HeadingNote, SERVE_OPTION_LABELS, block_labels, mm_limits, option_label,
};
pub use parse::{BlockError, BlockProblem, ParsedBlock, ReportOrigin, parse_reports};
pub use sizes::human_readable_int;
pub use startup_log::{ProfiledUsage, StartupLog, group_thousands};
pub use text::{TextStyle, render_failures, render_result_block, render_result_block_styled, render_traffic};
