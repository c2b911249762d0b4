//! Reads vLLM result blocks out of free text: logs, notes, pasted reports of any 0.x version.
//!
//! A file may hold many blocks with headings between them (`Results Qwen/Qwen3-8B`,
//! `num_prompts: 1, 2, 4`, `# Prefill`). Each block becomes one entry: the parsed values, or
//! an error with a line number when the block is malformed (an unknown line, a value that is
//! not a number, a missing closing line or required line). Parsing never guesses: a malformed
//! block is reported and skipped, and the next block is read as usual.
//!
//! Whitespace is not significant (reports pasted into notes often lose their trailing spaces
//! or padding): a line is a label ending in `:`, then one value.
//!
//! How the headings become each block's labels (`model=Qwen/Qwen3-8B`, one value of a
//! `num_prompts` list per block) is in [`headings`].

pub mod headings;

use std::collections::BTreeMap;

use thiserror::Error;

use crate::config::Metric;
use crate::metrics::{MetricStats, PoolingFigures, Summary};
use crate::vllm::labels::{self, section_title, short_name};
use crate::vllm::text::TextStyle;

/// Who printed the report, which decides what its "Peak ..." lines mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReportOrigin {
    /// vLLM: the peaks are its one-second bucket counts, stored as
    /// [`Summary::vllm_max_output_tokens_per_s`] and [`Summary::vllm_max_concurrent_requests`].
    Vllm,
    /// servebench: the peaks are exact, stored as [`Summary::peak_output_throughput`] and
    /// [`Summary::peak_concurrent_requests`].
    Servebench,
}

/// One well-formed result block.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedBlock {
    /// 1-based line number of the block's `=== Serving Benchmark Result ===` line.
    pub line: usize,
    /// The non-empty lines between the previous block (or the start) and this one, trimmed.
    pub headings: Vec<String>,
    /// The 1-based line of each of [`Self::headings`].
    pub heading_lines: Vec<usize>,
    pub summary: Summary,
    /// Every `label: value` line in order, the label without its colon (including lines the
    /// summary has no field for, such as speculative-decoding counters).
    pub values: Vec<(String, f64)>,
    /// Spelling details needed to print the block back exactly.
    pub style: TextStyle,
}

/// Why a block could not be read.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum BlockProblem {
    #[error("unexpected line {0:?} inside a result block; remove it or move it out of the block")]
    UnknownLine(String),
    #[error("the value {value:?} of {label:?} is not a number; fix the value")]
    NotANumber { label: String, value: String },
    #[error("the value {value:?} of {label:?} must be a whole number; fix the value")]
    NotAWholeNumber { label: String, value: String },
    #[error("{0:?} appears twice in one block; keep one of them")]
    Duplicate(String),
    #[error("the block has no closing line of 50 '='; add one after the block's last line")]
    Unclosed,
    #[error("the block lacks the {0:?} line every report has; add it or drop the block")]
    Missing(&'static str),
    #[error("the {section:?} section lacks its {line:?} line; add it or drop the section")]
    IncompleteSection { section: String, line: String },
}

/// A malformed block: where it is, and what is wrong at which line.
#[derive(Clone, Debug, PartialEq, Error)]
#[error("line {line}: {problem}")]
pub struct BlockError {
    /// 1-based line of the problem (the block's first line for a missing line or footer).
    pub line: usize,
    /// 1-based line where the block starts.
    pub block_line: usize,
    /// The headings before the block and their lines, as for a [`ParsedBlock`].
    pub headings: Vec<String>,
    pub heading_lines: Vec<usize>,
    pub problem: BlockProblem,
}

/// Parses every result block in `text`, in order. Text outside blocks becomes the headings of
/// the block that follows it; a malformed block yields an error entry and parsing goes on.
pub fn parse_reports(text: &str, origin: ReportOrigin) -> Vec<Result<ParsedBlock, BlockError>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut entries = Vec::new();
    let mut headings = Headings::default();
    let mut i = 0;
    while i < lines.len() {
        let line = clean(lines[i]);
        if line == labels::HEADER {
            let headings = std::mem::take(&mut headings);
            let (entry, next) = parse_block(&lines, i, origin, headings);
            entries.push(entry);
            i = next;
        } else {
            if !line.is_empty() {
                headings.texts.push(line.to_string());
                headings.lines.push(i + 1);
            }
            i += 1;
        }
    }
    entries
}

/// A line as the reader takes it: without the spaces around it or the markers of a quotation
/// (`> `, as a mail or forum reply quotes a pasted report, nested as `> > `).
fn clean(line: &str) -> &str {
    let mut t = line.trim();
    while let Some(rest) = t.strip_prefix('>') {
        t = rest.trim_start();
    }
    t
}

/// The headings collected before a block, with their 1-based lines.
#[derive(Default)]
struct Headings {
    texts: Vec<String>,
    lines: Vec<usize>,
}

/// Reads the block whose header is at index `start`; returns its entry and the index where
/// reading resumes.
///
/// After the first bad line the block is only scanned for its footer. If a header or the end
/// of the text comes first, the block is unclosed and it ends at that bad line, which
/// becomes free text again (often a heading of the next block).
fn parse_block(
    lines: &[&str],
    start: usize,
    origin: ReportOrigin,
    headings: Headings,
) -> (Result<ParsedBlock, BlockError>, usize) {
    let mut block = Block::new(origin);
    let mut first_bad: Option<(usize, BlockProblem)> = None;
    let mut j = start + 1;
    let (outcome, next) = loop {
        let line = lines.get(j).map(|l| clean(l));
        match line {
            Some(labels::FOOTER) => {
                let outcome = match first_bad {
                    Some(bad) => Err(bad),
                    None => block.finish(start),
                };
                break (outcome, j + 1);
            }
            None | Some(labels::HEADER) => {
                let resume = first_bad.map_or(j, |(bad_line, _)| bad_line - 1);
                break (Err((start + 1, BlockProblem::Unclosed)), resume);
            }
            Some(line) => {
                if first_bad.is_none()
                    && let Err(problem) = block.line(line, j + 1)
                {
                    first_bad = Some((j + 1, problem));
                }
                j += 1;
            }
        }
    };
    let Headings { texts: headings, lines: heading_lines } = headings;
    let entry = match outcome {
        Ok((summary, values, style)) => {
            Ok(ParsedBlock { line: start + 1, headings, heading_lines, summary, values, style })
        }
        Err((line, problem)) => Err(BlockError { line, block_line: start + 1, headings, heading_lines, problem }),
    };
    (entry, next)
}

/// A field of the summary that a top-level line sets.
#[derive(Clone, Copy)]
enum Field {
    Completed,
    Failed,
    MaxConcurrency,
    Rate,
    Duration,
    TotalInput,
    TotalOutput,
    RequestThroughput,
    Goodput,
    OutputThroughput,
    PeakOutput,
    PeakConcurrent,
    TotalTokenThroughput,
    TotalTokenThroughputLegacy,
    /// A line vLLM prints that the summary has no field for.
    RawOnly,
    /// A pooling run's input sequences per second.
    InputThroughput,
}

const TOP_LINES: [(&str, Field); 15] = [
    (labels::SUCCESSFUL, Field::Completed),
    (labels::FAILED, Field::Failed),
    (labels::MAX_CONCURRENCY, Field::MaxConcurrency),
    (labels::RATE_CONFIGURED, Field::Rate),
    (labels::DURATION, Field::Duration),
    (labels::TOTAL_INPUT, Field::TotalInput),
    (labels::TOTAL_GENERATED, Field::TotalOutput),
    (labels::REQUEST_THROUGHPUT, Field::RequestThroughput),
    (labels::INPUT_THROUGHPUT, Field::InputThroughput),
    (labels::GOODPUT, Field::Goodput),
    (labels::OUTPUT_THROUGHPUT, Field::OutputThroughput),
    (labels::PEAK_OUTPUT, Field::PeakOutput),
    (labels::PEAK_CONCURRENT, Field::PeakConcurrent),
    (labels::RTFX, Field::RawOnly),
    (labels::TOTAL_TOKEN_THROUGHPUT, Field::TotalTokenThroughput),
];

/// The index of the speculative-decoding section in [`labels::OTHER_SECTIONS`].
const SPECULATIVE: usize = 1;

/// Where in the block a line sits.
#[derive(Clone, Copy, PartialEq)]
enum Section {
    Top,
    Metric(Metric),
    /// One of [`labels::OTHER_SECTIONS`], whose values are kept raw only.
    Other(usize),
}

/// A metric section being read: its header line, mean, median and percentiles.
struct OpenSection {
    line: usize,
    mean: Option<f64>,
    median: Option<f64>,
    percentiles: Vec<(f64, f64)>,
}

/// What a block has accumulated so far.
struct Block {
    origin: ReportOrigin,
    summary: Summary,
    values: Vec<(String, f64)>,
    style: TextStyle,
    section: Section,
    /// (section title, label) of every line read, to catch duplicates.
    seen: Vec<(&'static str, String)>,
    sections: BTreeMap<Metric, OpenSection>,
    other_sections: Vec<usize>,
}

type Finished = (Summary, Vec<(String, f64)>, TextStyle);

impl Block {
    fn new(origin: ReportOrigin) -> Self {
        Block {
            origin,
            summary: Summary::default(),
            values: Vec::new(),
            style: TextStyle::default(),
            section: Section::Top,
            seen: Vec::new(),
            sections: BTreeMap::new(),
            other_sections: Vec::new(),
        }
    }

    /// Reads one non-footer line (trimmed) at 1-based line `at`.
    fn line(&mut self, line: &str, at: usize) -> Result<(), BlockProblem> {
        let unknown = || BlockProblem::UnknownLine(line.to_string());
        if line.len() > 2 && line.starts_with('-') && line.ends_with('-') {
            return self.section_header(line.trim_matches('-'), at).unwrap_or_else(|| Err(unknown()));
        }
        if self.section == Section::Other(SPECULATIVE) && line == labels::PER_POSITION {
            return Ok(());
        }
        let (label, value) = line.rsplit_once(char::is_whitespace).ok_or_else(unknown)?;
        let label = label.trim_end();
        if !label.ends_with(':') {
            return Err(unknown());
        }
        let title = match self.section {
            Section::Top => "",
            Section::Metric(m) => section_title(m),
            Section::Other(i) => labels::OTHER_SECTIONS[i].0,
        };
        if self.seen.iter().any(|(t, l)| *t == title && l == label) {
            return Err(BlockProblem::Duplicate(label.to_string()));
        }
        self.seen.push((title, label.to_string()));
        if value == NOT_AVAILABLE && self.absent_percentile(label) {
            return Ok(());
        }
        let x = number(label, value)?;
        match self.section {
            Section::Top => self.top_line(label, value, x).ok_or_else(unknown)??,
            Section::Metric(m) => self.metric_line(m, label, x).ok_or_else(unknown)?,
            Section::Other(i) => {
                let known =
                    labels::OTHER_SECTIONS[i].1.contains(&label) || (i == SPECULATIVE && is_position_label(label));
                if !known {
                    return Err(unknown());
                }
            }
        }
        self.values.push((label.trim_end_matches(':').to_string(), x));
        Ok(())
    }

    /// Accepts a known percentile line whose value the client could not give (GPUStack's
    /// runner prints `P95 TTFT (ms): N/A`): the percentile is absent, not zero. False for any
    /// other line, whose `N/A` is then not a number.
    fn absent_percentile(&self, label: &str) -> bool {
        match self.section {
            Section::Top => false,
            Section::Metric(m) => metric_stem(m, label).and_then(percentile).is_some(),
            Section::Other(i) => label.starts_with('P') && labels::OTHER_SECTIONS[i].1.contains(&label),
        }
    }

    /// Enters the section titled `title`; `None` for an unknown title.
    fn section_header(&mut self, title: &str, at: usize) -> Option<Result<(), BlockProblem>> {
        if let Some(m) = Metric::ALL.into_iter().find(|m| section_title(*m) == title) {
            self.section = Section::Metric(m);
            if self.sections.contains_key(&m) {
                return Some(Err(BlockProblem::Duplicate(title.to_string())));
            }
            self.sections.insert(m, OpenSection { line: at, mean: None, median: None, percentiles: Vec::new() });
            return Some(Ok(()));
        }
        let i = labels::OTHER_SECTIONS.iter().position(|(t, _)| *t == title)?;
        self.section = Section::Other(i);
        if self.other_sections.contains(&i) {
            return Some(Err(BlockProblem::Duplicate(title.to_string())));
        }
        self.other_sections.push(i);
        Some(Ok(()))
    }

    /// Sets the field of a top-level line; `None` for an unknown label.
    fn top_line(&mut self, label: &str, value: &str, x: f64) -> Option<Result<(), BlockProblem>> {
        let field = match TOP_LINES.iter().find(|(l, _)| *l == label) {
            Some((_, f)) => *f,
            None if label == labels::TOTAL_TOKEN_THROUGHPUT_LEGACY => Field::TotalTokenThroughputLegacy,
            None => return None,
        };
        Some(self.set(field, label, value, x))
    }

    fn set(&mut self, field: Field, label: &str, value: &str, x: f64) -> Result<(), BlockProblem> {
        let count = || parse_whole(label, value, x);
        let vllm = self.origin == ReportOrigin::Vllm;
        let s = &mut self.summary;
        match field {
            Field::Completed => s.completed = count()?,
            Field::Failed => s.failed = Some(count()?),
            Field::MaxConcurrency => s.max_concurrency = Some(count()?),
            Field::Rate => s.request_rate = Some(x),
            Field::Duration => s.duration_s = x,
            Field::TotalInput => s.total_input_tokens = count()?,
            Field::TotalOutput => s.total_output_tokens = Some(count()?),
            Field::RequestThroughput => s.request_throughput = x,
            // A pooling report's; its count of sequences is not printed.
            Field::InputThroughput => {
                s.pooling = Some(PoolingFigures { total_input_sequences: None, input_sequence_throughput: x })
            }
            Field::Goodput => s.request_goodput = Some(x),
            Field::OutputThroughput => s.output_throughput = Some(x),
            Field::PeakOutput if vllm => s.vllm_max_output_tokens_per_s = Some(x),
            Field::PeakOutput => s.peak_output_throughput = Some(x),
            Field::PeakConcurrent if vllm => s.vllm_max_concurrent_requests = Some(count()?),
            Field::PeakConcurrent => s.peak_concurrent_requests = Some(count()?),
            Field::TotalTokenThroughput | Field::TotalTokenThroughputLegacy => {
                if s.total_token_throughput.is_some() {
                    return Err(BlockProblem::Duplicate(label.to_string()));
                }
                s.total_token_throughput = Some(x);
                self.style.legacy_total_token_label = matches!(field, Field::TotalTokenThroughputLegacy);
            }
            Field::RawOnly => {}
        }
        Ok(())
    }

    /// Records a line of metric `m`'s section; `None` when the label is not one of its lines.
    fn metric_line(&mut self, m: Metric, label: &str, x: f64) -> Option<()> {
        let section = self.sections.get_mut(&m)?;
        let stem = metric_stem(m, label)?;
        match stem {
            "Mean " => section.mean = Some(x),
            "Median " => section.median = Some(x),
            _ => section.percentiles.push((percentile(stem)?, x)),
        }
        Some(())
    }

    /// Checks the required lines and sections; returns the summary, or the problem with the
    /// line it belongs to.
    fn finish(mut self, start: usize) -> Result<Finished, (usize, BlockProblem)> {
        let required = [labels::SUCCESSFUL, labels::DURATION, labels::TOTAL_INPUT, labels::REQUEST_THROUGHPUT];
        // Top-level lines are seen under the empty section title.
        let read = |label: &str| self.seen.iter().any(|(title, l)| title.is_empty() && l == label);
        if let Some(missing) = required.into_iter().find(|l| !read(l)) {
            return Err((start + 1, BlockProblem::Missing(missing)));
        }
        for (metric, section) in std::mem::take(&mut self.sections) {
            let incomplete = |what: &str| {
                let line = format!("{what} {} (ms):", short_name(metric));
                let section_name = section_title(metric).to_string();
                (section.line, BlockProblem::IncompleteSection { section: section_name, line })
            };
            let mean = section.mean.ok_or_else(|| incomplete("Mean"))?;
            let median = section.median.ok_or_else(|| incomplete("Median"))?;
            self.summary.metrics.push(MetricStats {
                metric,
                mean_ms: mean,
                median_ms: median,
                std_ms: None,
                percentiles: section.percentiles,
            });
        }
        self.summary.spec_decode = spec_decode_of(&self.values);
        self.summary.probes = probes_of(&self.values);
        Ok((self.summary, self.values, self.style))
    }
}

/// The speculative-decoding section's counts, back from its raw values (each position's from
/// its rate over the drafts); `None` without the section's counts.
fn spec_decode_of(values: &[(String, f64)]) -> Option<crate::telemetry::SpecDecodeCounts> {
    let get = |label: &str| values.iter().find(|(l, _)| l == label).map(|(_, v)| *v);
    let count = |label: &str| get(label).filter(|v| v.is_finite() && *v >= 0.0).map(|v| v.round() as u64);
    let (num_drafts, draft_tokens, accepted_tokens) =
        (count("Drafts")?, count("Draft tokens")?, count("Accepted tokens")?);
    let accepted_per_position = (0..)
        .map_while(|i| get(&format!("Position {i}")))
        .map(|pct| (pct / 100.0 * num_drafts as f64).round().max(0.0) as u64)
        .collect();
    Some(crate::telemetry::SpecDecodeCounts { num_drafts, draft_tokens, accepted_tokens, accepted_per_position })
}

/// The probe section's statistics, back from its raw values; `None` without all five.
fn probes_of(values: &[(String, f64)]) -> Option<crate::metrics::ProbeStats> {
    let [completed, failed, median, p99, max] =
        labels::PROBE_LABELS.map(|l| values.iter().find(|(v, _)| v == l.trim_end_matches(':')).map(|(_, x)| *x));
    let count = |v: Option<f64>| v.filter(|v| v.is_finite() && *v >= 0.0).map(|v| v.round() as u64);
    Some(crate::metrics::ProbeStats {
        completed: count(completed)?,
        failed: count(failed)?,
        median_e2el_ms: median?,
        p99_e2el_ms: p99?,
        max_e2el_ms: max?,
    })
}

/// What a metric section's line says before the metric's name (`Mean `, `P99 `): `label`
/// without `TTFT (ms):` and the like; none for a line of another metric.
fn metric_stem(m: Metric, label: &str) -> Option<&str> {
    label.strip_suffix(" (ms):")?.strip_suffix(short_name(m))
}

/// The percentile a line's stem names (`P99 ` gives 99); none for any other stem, and for a
/// number past 0 to 100 (`P101 ` is no line vLLM prints).
fn percentile(stem: &str) -> Option<f64> {
    stem.strip_prefix('P')?.strip_suffix(' ')?.parse().ok().filter(|p: &f64| (0.0..=100.0).contains(p))
}

/// The speculative-decoding section's `Position {i}:` lines (printed indented).
fn is_position_label(label: &str) -> bool {
    label
        .strip_prefix("Position ")
        .and_then(|l| l.strip_suffix(':'))
        .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
}

/// The value a client prints for a percentile it could not compute.
const NOT_AVAILABLE: &str = "N/A";

/// Parses a finite number.
fn number(label: &str, value: &str) -> Result<f64, BlockProblem> {
    value
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| BlockProblem::NotANumber { label: label.to_string(), value: value.to_string() })
}

/// A count: a whole, non-negative number (`8` or `8.00`).
fn parse_whole(label: &str, value: &str, x: f64) -> Result<u64, BlockProblem> {
    if x >= 0.0 && x.fract() == 0.0 && x < 2f64.powi(63) {
        Ok(x as u64)
    } else {
        Err(BlockProblem::NotAWholeNumber { label: label.to_string(), value: value.to_string() })
    }
}

#[cfg(test)]
mod tests;
