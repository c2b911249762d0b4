//! llama-benchy's results (its markdown table, CSV and JSON): the benchmark DGX Spark owners
//! post (llama-bench's columns for any OpenAI-compatible server), read as measured points.
//!
//! The table is markdown, one row a test: `| model | test | t/s | ... | ttfr (ms) | est_ppt
//! (ms) | e2e_ttft (ms) |`, values `mean ± std`. A test `ppN` times the prompt of N tokens
//! and `tgM` the M generated after it, in the same requests: `@ dD` puts D tokens of context
//! before the prompt and `(cC)` sends C requests at once (one at a time without it), each
//! batch waited out before the next. So a `pp` row and the `tg` row after it at the same
//! depth, concurrency and other tags are one run: `runs` batches (a `runs: N` heading, else
//! the tool's default of 3) of C chat requests of D + N tokens in and M out, at most C in
//! flight, none of whose prompts the server has seen (the tool warms up with a request of its
//! own, and each run reads its text from another place in its book). Of it the point keeps
//! - the mean TTFT: the `pp` row's `ttfr (ms)`, the wait for the first chunk, which is what
//!   `vllm bench serve` calls TTFT;
//! - the mean TPOT: 1000 over the `tg` row's decode rate of one request (`t/s` at one request,
//!   `t/s (req)` at several; a table with only `t/s (total)` gives none: that rate is the
//!   batch's over its decode window, no figure of vLLM's).
//!
//! Its CSV (`--format csv`: `test_name`, `t_s_mean`, `t_s_req_mean`, `ttfr_mean`, and
//! `ttfr_n`, the run's requests) is read as its table, and its JSON report (`--format json`)
//! says the same per benchmark ([`points_from_benchy_json`]).
//!
//! A run that cannot be read (half of it missing, an unknown test, nothing measured) is skipped
//! with its line and why, and the others are read ([`FileRead`]).
//!
//! Rows of the context-loading phase (`ctx_pp`, `ctx_tg`) and a footer are not runs. The text
//! above a table labels all of its rows, as headings do a report's blocks (a `vllm serve`
//! line, `Results MODEL`, `4 nodes (tp)`); a heading's `model` wins over the table's column,
//! which holds the served name.

use serde_json::Value;
use servebench_core::vllm::HeadingLabels;
use servebench_core::vllm::json::scalar::whole_number;

use super::CalibrationError;
use super::points::{FitMetric, MeasuredPoint, PointWorkload};
use super::read::{FileRead, Skipped};

/// The tool's default number of batches a test (`--runs`).
const DEFAULT_RUNS: usize = 3;

/// Whether `text` holds a llama-benchy table: a markdown header row with `test` and `ttfr (ms)`,
/// or the CSV header (`--format csv`) with `test_name` and `ttfr_mean`.
pub fn is_benchy(text: &str) -> bool {
    text.lines().any(|l| header(l).is_some())
}

/// The columns of a header row, by name.
#[derive(Clone, Debug, PartialEq)]
struct Columns {
    csv: bool,
    model: Option<usize>,
    test: usize,
    /// `t/s`, or `t/s (total)` where the table ran several requests at once (`t_s_mean`).
    rate: Option<usize>,
    total: bool,
    /// `t/s (req)`: one request's rate where several ran at once (`t_s_req_mean`).
    per_request: Option<usize>,
    ttfr: usize,
    /// How many TTFRs a CSV row's mean is of (`ttfr_n`): the run's requests.
    requests: Option<usize>,
}

impl Columns {
    /// The cells of a row under this header; `None` where the line is no row of it.
    fn cells<'a>(&self, line: &'a str) -> Option<Vec<&'a str>> {
        if !self.csv {
            return cells(line);
        }
        let line = line.trim();
        (!line.is_empty() && !line.starts_with('|'))
            .then(|| line.split(',').map(|c| c.trim().trim_matches('"')).collect())
    }
}

fn cells(line: &str) -> Option<Vec<&str>> {
    let line = line.trim();
    let inner = line.strip_prefix('|')?;
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    Some(inner.split('|').map(str::trim).collect())
}

fn header(line: &str) -> Option<Columns> {
    if let Some(cells) = cells(line) {
        let at = |name: &str| cells.iter().position(|c| c.eq_ignore_ascii_case(name));
        let total = at("t/s (total)");
        return Some(Columns {
            csv: false,
            model: at("model"),
            test: at("test")?,
            rate: total.or_else(|| at("t/s")),
            total: total.is_some(),
            per_request: at("t/s (req)"),
            ttfr: at("ttfr (ms)")?,
            requests: None,
        });
    }
    let cells: Vec<&str> = line.trim().split(',').map(str::trim).collect();
    let at = |name: &str| cells.iter().position(|c| *c == name);
    Some(Columns {
        csv: true,
        model: at("model"),
        test: at("test_name")?,
        rate: at("t_s_mean"),
        total: false,
        per_request: at("t_s_req_mean"),
        ttfr: at("ttfr_mean")?,
        requests: at("ttfr_n"),
    })
}

/// What a test's name says.
#[derive(Clone, Debug, PartialEq)]
struct Test {
    prefill: bool,
    tokens: u32,
    depth: u32,
    concurrency: Option<u32>,
    /// Any other tags (`(think=off)`), which set the run apart from the others.
    tags: String,
}

/// `ppN`, `tgM`, with ` @ dD`, `(cC)` and other tags; `None` for a context-loading row
/// (`ctx_pp @ d4096`) or anything else.
fn test(name: &str) -> Option<Test> {
    let mut words = name.split_whitespace();
    let first = words.next()?;
    let (prefill, digits) = match (first.strip_prefix("pp"), first.strip_prefix("tg")) {
        (Some(d), _) => (true, d),
        (_, Some(d)) => (false, d),
        _ => return None,
    };
    let tokens = digits.parse().ok().filter(|n| *n > 0)?;
    let (mut depth, mut concurrency, mut tags) = (0, None, Vec::new());
    let rest: Vec<&str> = words.collect();
    let mut i = 0;
    while i < rest.len() {
        let word = rest[i];
        if word == "@" {
            depth = rest.get(i + 1)?.strip_prefix('d')?.parse().ok()?;
            i += 2;
            continue;
        }
        if let Some(d) = word.strip_prefix("@d") {
            depth = d.parse().ok()?;
        } else if let Some(c) = word.strip_prefix("(c").and_then(|w| w.strip_suffix(')')) {
            concurrency = Some(c.parse().ok().filter(|c| *c > 0)?);
        } else {
            tags.push(word);
        }
        i += 1;
    }
    Some(Test { prefill, tokens, depth, concurrency, tags: tags.join(" ") })
}

/// The mean of a `mean ± std` cell; `None` for an empty one.
fn mean(cell: &str) -> Option<f64> {
    let first = cell.split('±').next()?.trim();
    first.parse::<f64>().ok().filter(|v| v.is_finite() && *v > 0.0)
}

/// One row of a table, read.
struct Row<'a> {
    line: usize,
    model: Option<&'a str>,
    name: &'a str,
    test: Test,
    rate: Option<f64>,
    per_request: Option<f64>,
    ttfr: Option<f64>,
    /// The requests a CSV row's TTFR is the mean of.
    requests: Option<usize>,
}

/// Every run of every llama-benchy table in `text` (see the module docs).
pub fn points_from_benchy(text: &str, origin: &str) -> Result<FileRead, CalibrationError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut scopes = HeadingLabels::default();
    let mut headings: Vec<(usize, &str)> = Vec::new();
    let mut out = FileRead::default();
    let skip = |out: &mut FileRead, line: usize, reason: String| skip_line(out, origin, line, reason);
    let mut i = 0;
    while i < lines.len() {
        let Some(columns) = header(lines[i]) else {
            let line = lines[i].trim();
            if !line.is_empty() {
                headings.push((i + 1, line));
            }
            i += 1;
            continue;
        };
        let labels = scopes.next_block(&std::mem::take(&mut headings));
        let mut rows = Vec::new();
        i += 1;
        while i < lines.len() {
            let Some(cells) = columns.cells(lines[i]) else { break };
            let line = i + 1;
            i += 1;
            // The separator under the header.
            if cells.iter().all(|c| c.chars().all(|ch| matches!(ch, '-' | ':' | ' '))) {
                continue;
            }
            let cell = |at: Option<usize>| at.and_then(|k| cells.get(k).copied()).filter(|c| !c.is_empty());
            let Some(name) = cell(Some(columns.test)) else { continue };
            let Some(test) = test(name) else {
                if !name.starts_with("ctx_") {
                    let why = format!(
                        "the test {name:?} is none of llama-benchy's (ppN or tgN, with `@ dD` and `(cC)`); fix the \
                         row or leave it out"
                    );
                    skip(&mut out, line, why);
                }
                continue;
            };
            if columns.total && test.concurrency.is_none() {
                let why = format!(
                    "the table ran several requests at once (its `t/s (total)` column) but the test {name:?} does \
                     not say how many; write it into the name as llama-benchy does (`{name} (c4)`)"
                );
                skip(&mut out, line, why);
                continue;
            }
            rows.push(Row {
                line,
                model: cell(columns.model),
                name,
                test,
                rate: cell(columns.rate).and_then(mean),
                per_request: cell(columns.per_request).and_then(mean),
                ttfr: cell(Some(columns.ttfr)).and_then(mean),
                requests: cell(columns.requests)
                    .and_then(|n| n.parse::<f64>().ok())
                    .map(|n| n as usize)
                    .filter(|n| *n > 0),
            });
        }
        let runs = labels
            .iter()
            .rev()
            .find(|(k, _)| k == "runs")
            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
            .filter(|r| *r > 0)
            .unwrap_or(DEFAULT_RUNS);
        runs_of(&rows, &labels, runs, origin, &mut out);
    }
    if out.points.is_empty() && out.skipped.is_empty() {
        return Err(CalibrationError::Input {
            path: origin.to_string(),
            message: "its llama-benchy table has no pp and tg rows; pass a table with results".into(),
        });
    }
    Ok(out)
}

/// The runs of one table: each `pp` row with the `tg` row after it at the same depth,
/// concurrency and tags; a row without its other half, or a run that measured nothing, skipped.
fn runs_of(rows: &[Row], labels: &[(String, String)], runs: usize, origin: &str, out: &mut FileRead) {
    let same = |a: &Test, b: &Test| (a.depth, a.concurrency, &a.tags) == (b.depth, b.concurrency, &b.tags);
    let skip = |out: &mut FileRead, line: usize, reason: String| skip_line(out, origin, line, reason);
    let mut used = vec![false; rows.len()];
    for (k, pp) in rows.iter().enumerate().filter(|(_, r)| r.test.prefill) {
        used[k] = true;
        let found = rows.iter().enumerate().skip(k + 1).find(|(j, r)| !used[*j] && same(&r.test, &pp.test));
        let Some((j, tg)) = found.filter(|(_, r)| !r.test.prefill) else {
            let why = format!(
                "{:?} has no tg row after it at the same depth and concurrency, so the run's output is unknown; keep \
                 the pair llama-benchy printed",
                pp.name
            );
            skip(out, pp.line, why);
            continue;
        };
        used[j] = true;
        match point(pp, tg, labels, runs, origin) {
            Some(p) => out.points.push(p),
            None => {
                let why = format!(
                    "{:?} has no ttfr and {:?} no rate of one request, so the run measured nothing the simulator \
                     predicts",
                    pp.name, tg.name
                );
                skip(out, pp.line, why);
            }
        }
    }
    for tg in rows.iter().zip(&used).filter(|(r, u)| !**u && !r.test.prefill).map(|(r, _)| r) {
        let why = format!(
            "{:?} has no pp row before it, so the run's prompt is unknown; keep the pair llama-benchy printed",
            tg.name
        );
        skip(out, tg.line, why);
    }
}

/// Skips the run or row at `line` of `origin`, with why.
fn skip_line(out: &mut FileRead, origin: &str, line: usize, reason: String) {
    out.skipped.push(Skipped { label: format!("{origin} line {line}"), reason });
}

/// What one run of the tool sent and measured, read from a table or from its JSON.
struct Run {
    label: String,
    model: Option<String>,
    test: String,
    /// Tokens in (context and prompt) and out, a request.
    input: u32,
    output: u32,
    concurrency: u32,
    requests: usize,
    ttfr_ms: Option<f64>,
    /// One request's decode rate, tokens a second.
    decode_rate: Option<f64>,
}

/// The run of `pp` and `tg`; `None` where it measured neither TTFT nor TPOT.
fn point(pp: &Row, tg: &Row, labels: &[(String, String)], runs: usize, origin: &str) -> Option<MeasuredPoint> {
    let c = pp.test.concurrency.unwrap_or(1);
    let run = Run {
        label: format!("{origin} line {}", pp.line),
        model: pp.model.map(str::to_string),
        test: format!("{} / {}", pp.name, tg.name),
        input: pp.test.tokens.saturating_add(pp.test.depth),
        output: tg.test.tokens,
        concurrency: c,
        requests: pp.requests.unwrap_or(runs * c as usize),
        ttfr_ms: pp.ttfr,
        // `t/s` where one ran at a time, `t/s (req)` where several did.
        decode_rate: if c == 1 { tg.rate.or(tg.per_request) } else { tg.per_request },
    };
    run_point(run, labels)
}

fn run_point(run: Run, labels: &[(String, String)]) -> Option<MeasuredPoint> {
    let measured: Vec<(FitMetric, f64)> =
        [(FitMetric::MeanTtft, run.ttfr_ms), (FitMetric::MeanTpot, run.decode_rate.map(|r| 1000.0 / r))]
            .into_iter()
            .filter_map(|(m, v)| Some((m, v?)))
            .collect();
    if measured.is_empty() {
        return None;
    }
    let mut all = labels.to_vec();
    if !all.iter().any(|(k, _)| k == "model") {
        all.extend(run.model.map(|m| ("model".to_string(), m)));
    }
    all.push(("client".into(), "llama-benchy".into()));
    all.push(("backend".into(), "openai-chat".into()));
    all.push(("test".into(), run.test));
    let n = run.requests.max(1);
    let mut point = MeasuredPoint {
        label: run.label,
        headings: Vec::new(),
        labels: all,
        workload: PointWorkload {
            // Its warm-up is a short request of its own, not a copy of the first: no prompt of a
            // run is in the server's prefix cache when it is sent.
            warmup: false,
            ..PointWorkload::even(
                n,
                u64::from(run.input) * n as u64,
                u64::from(run.output) * n as u64,
                Some(run.concurrency as usize),
            )
        },
        measured,
    };
    point.read_backend();
    Some(point)
}

/// Whether a JSON document is llama-benchy's report (`--format json`): its `benchmarks` and
/// `latency_mode`.
pub fn is_benchy_json(value: &Value) -> bool {
    value.get("benchmarks").is_some_and(Value::is_array) && value.get("latency_mode").is_some()
}

/// The runs of llama-benchy's JSON report: one a benchmark other than a context-loading phase,
/// its requests counted by its TTFR values (else the tool's 3 batches), its TTFT their mean,
/// its TPOT over one request's decode rate (`tg_req_throughput`, or `tg_throughput` where one
/// ran at a time). A benchmark that measured neither is skipped by name, as its table's row is.
pub fn points_from_benchy_json(value: &Value, name: &str) -> Result<FileRead, String> {
    let model = value.get("model").and_then(Value::as_str).map(str::to_string);
    let benchmarks = value.get("benchmarks").and_then(Value::as_array).ok_or("its `benchmarks` is not a list")?;
    let mut out = FileRead::default();
    for (k, b) in benchmarks.iter().enumerate() {
        if b.get("is_context_prefill_phase").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let whole = |key: &str| b.get(key).and_then(whole_number).and_then(|v| u32::try_from(v).ok());
        let (Some(c), Some(prompt), Some(output)) =
            (whole("concurrency"), whole("prompt_size"), whole("response_size"))
        else {
            out.skipped.push(Skipped {
                label: format!("{name} benchmark {k}"),
                reason: "it lacks a whole concurrency, prompt_size or response_size; fix the report".into(),
            });
            continue;
        };
        let depth = whole("context_size").unwrap_or(0);
        let metric = |key: &str| b.get(key).and_then(|m| m.get("mean")).and_then(Value::as_f64).filter(|v| *v > 0.0);
        let ttfr_values = b.pointer("/ttfr/values").and_then(Value::as_array).map_or(0, Vec::len);
        let c = c.max(1);
        let run = Run {
            label: format!("{name} benchmark {k}"),
            model: model.clone(),
            test: format!(
                "pp{prompt}{} tg{output} (c{c})",
                if depth > 0 { format!(" @ d{depth}") } else { String::new() }
            ),
            input: prompt.saturating_add(depth),
            output,
            concurrency: c,
            requests: if ttfr_values > 0 { ttfr_values } else { DEFAULT_RUNS * c as usize },
            ttfr_ms: metric("ttfr"),
            decode_rate: metric("tg_req_throughput").or_else(|| if c == 1 { metric("tg_throughput") } else { None }),
        };
        let test = run.test.clone();
        match run_point(run, &[]) {
            Some(p) => out.points.push(p),
            None => out.skipped.push(Skipped {
                label: format!("{name} benchmark {k} ({test})"),
                reason: "it has no ttfr and no decode rate of one request, so it measured nothing the simulator \
                         predicts; drop it from the report or rerun it"
                    .into(),
            }),
        }
    }
    if out.points.is_empty() && out.skipped.is_empty() {
        return Err(
            "its llama-benchy report has no benchmark but context-loading phases; pass a report with runs".into()
        );
    }
    Ok(out)
}

#[cfg(test)]
#[path = "benchy_tests.rs"]
mod tests;
