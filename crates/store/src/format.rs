//! What `runs list` and `runs show` print.

use std::fmt::Write as _;

use serde_json::Value;
use servebench_core::config::Metric;
use servebench_core::vllm::{render_failures, render_result_block, render_traffic};

use crate::runs::{ChunkTimes, GPUS_LABEL, RunRow, StoredRun};

/// Labels longer than this are cut in the table (`runs list --json` has them whole).
const LABELS_WIDTH: usize = 60;

/// The `runs list` table: one line per run, columns padded to their widest cell.
///
/// `WHEN` is the run's own start as recorded (its local time), or, when unknown, when it was
/// stored (UTC). `TTFT` and `TPOT` are medians in milliseconds. Where a listed run is a pooling
/// run, an `INPUTS/S` column after `OUT TOK/S` gives its input sequences a second.
pub fn list_table(rows: &[RunRow]) -> String {
    printable(&table_of(rows))
}

/// Text for a terminal: control characters other than line breaks and tabs (an escape sequence
/// in an imported model name would retitle or clear the terminal) are shown escaped, as
/// `\u{1b}`.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

fn table_of(rows: &[RunRow]) -> String {
    if rows.is_empty() {
        return "No runs match.\n".to_string();
    }
    let pooling = rows.iter().any(|r| r.input_sequence_throughput.is_some());
    let mut header = vec!["ID", "UID", "KIND", "WHEN", "MODEL", "OK", "FAIL", "CONC", "RATE", "GPUS", "OUT TOK/S"];
    if pooling {
        header.push("INPUTS/S");
    }
    header.extend(["TTFT", "TPOT", "LABELS"]);
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for r in rows {
        let median = |m: Metric| r.key_stats(m).map_or("-".to_string(), |k| format!("{:.2}", k.median_ms));
        // A `model` or `gpus` label equal to its column says nothing more.
        let gpus = r.gpus.map(|g| g.to_string());
        let labels: Vec<String> = r
            .labels
            .iter()
            .filter(|(k, v)| {
                !((k == "model" && r.model.as_ref() == Some(v)) || (k == GPUS_LABEL && gpus.as_ref() == Some(v)))
            })
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let number = |x: Option<f64>| x.map_or("-".into(), |t| format!("{t:.2}"));
        let mut row = vec![
            if r.interrupted { format!("{}*", r.id) } else { r.id.to_string() },
            r.uid.clone(),
            r.kind.to_string(),
            when(r),
            r.model.clone().unwrap_or_else(|| "-".into()),
            r.completed.to_string(),
            r.failed.map_or("-".into(), |f| f.to_string()),
            r.max_concurrency.map_or("-".into(), |c| c.to_string()),
            r.request_rate.map_or("-".into(), rate),
            gpus.clone().unwrap_or_else(|| "-".into()),
            number(r.output_throughput),
        ];
        if pooling {
            row.push(number(r.input_sequence_throughput));
        }
        row.extend([median(Metric::Ttft), median(Metric::Tpot), cut(&labels.join(" "), LABELS_WIDTH)]);
        table.push(row);
    }
    let widths: Vec<usize> =
        (0..header.len()).map(|c| table.iter().map(|row| row[c].chars().count()).max().unwrap_or(0)).collect();
    // Every column but the uid, kind, time, model and labels holds numbers.
    let numeric = |c: usize| (5..header.len() - 1).contains(&c) || c == 0;
    let mut out = String::new();
    for row in &table {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let pad = widths[c] - cell.chars().count();
            if numeric(c) {
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if rows.iter().any(|r| r.interrupted) {
        out.push_str(
            "* interrupted, or stopped by a rule, before its end: its numbers are of the requests that ended before \
             (`servebench runs show ID` says why).\n",
        );
    }
    out
}

fn when(r: &RunRow) -> String {
    let t = r.started_at.as_deref().unwrap_or(&r.created_at);
    t.get(..16).map_or_else(|| t.to_string(), |s| s.replacen('T', " ", 1))
}

fn rate(r: f64) -> String {
    if r.is_infinite() { "inf".into() } else { format!("{r}") }
}

/// `s` cut to `width` characters, ending in `…` when cut (for table cells and legends).
pub fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The `runs show` text: who and what the run was, then its result block as vLLM prints it
/// (after vLLM's failure listing), its config, notes and a summary of its environment.
pub fn show_text(run: &StoredRun) -> String {
    printable(&show_of(run))
}

fn show_of(run: &StoredRun) -> String {
    let r = &run.row;
    let mut out = String::new();
    let _ = writeln!(out, "Run {} ({}), {}", r.id, r.uid, r.kind);
    let mut field = |name: &str, value: &str| {
        let _ = writeln!(out, "{:<13}{value}", format!("{name}:"));
    };
    if let Some(s) = &r.started_at {
        field("Started", s);
    }
    field("Stored", &r.created_at);
    for (name, value) in [("Model", &r.model), ("Backend", &r.backend), ("Target", &r.target)] {
        if let Some(v) = value {
            field(name, v);
        }
    }
    if !r.labels.is_empty() {
        field("Labels", &r.labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", "));
    }
    if let Some(src) = &r.source {
        match src.line {
            Some(line) => field("Source", &format!("{}, line {line}", src.file)),
            None => field("Source", &src.file),
        }
    }
    if r.num_requests > 0 {
        let detail = match r.chunk_times {
            Some(ChunkTimes::FirstLast) => " (first and last chunk times only)",
            _ => "",
        };
        field("Requests", &format!("{} stored{detail}", r.num_requests));
    }
    if r.interrupted {
        field("Interrupted", "yes: the numbers cover what was measured before the stop");
    }
    out.push('\n');
    out.push_str(&render_failures(&run.summary));
    out.push_str(&render_result_block(&run.summary));
    if let Some(config) = &run.config {
        out.push_str("\nConfig\n");
        out.push_str(&indent(&config_text(run, config)));
    }
    if !run.notes.is_empty() {
        out.push_str("\nNotes\n");
        for n in &run.notes {
            let _ = writeln!(out, "  {n}");
        }
    }
    if let Some(env) = &run.environment {
        out.push_str("\nEnvironment\n");
        out.push_str(&indent(&environment_text(env)));
    }
    out
}

/// The config's main settings, or the whole JSON when this servebench cannot read it.
fn config_text(run: &StoredRun, config: &Value) -> String {
    let Some(c) = run.run_config() else {
        return format!("{}\n", serde_json::to_string_pretty(config).unwrap_or_default());
    };
    let t = &c.target;
    let mut out = String::new();
    let _ = writeln!(out, "Endpoint: {} (backend {})", t.api_url, t.backend.name());
    if let Some(sim) = &t.sim {
        let _ = writeln!(out, "Simulator: {} on {}", sim.model, sim.hardware);
    }
    let _ = writeln!(out, "Model: {} (sent as {})", t.model_id, t.model_name);
    if let Some(tok) = &t.tokenizer {
        let _ = writeln!(out, "Tokenizer: {tok}");
    }
    let workload = serde_json::to_string(&c.workload).unwrap_or_default();
    let _ = writeln!(out, "Dataset: {workload}");
    let _ =
        writeln!(out, "Prompts: {}, seed {}, warmups {}", c.traffic.num_prompts, c.traffic.seed, c.traffic.num_warmups);
    out.push_str(&render_traffic(&c.traffic));
    if !c.extra_body.is_empty() {
        let _ = writeln!(out, "Extra body: {}", Value::Object(c.extra_body.clone()));
    }
    out
}

/// One line per top-level key: short values whole, long text as its first line and size,
/// lists and objects by their size.
fn environment_text(env: &Value) -> String {
    let Some(m) = env.as_object() else {
        return format!("{}\n", cut(&env.to_string(), 100));
    };
    let mut out = String::new();
    for (k, v) in m {
        let text = match v {
            Value::String(s) if s.lines().count() > 1 || s.chars().count() > 100 => {
                let first = s.lines().next().unwrap_or_default();
                format!("{} ({} lines, {} bytes)", cut(first, 60), s.lines().count(), s.len())
            }
            Value::String(s) => s.clone(),
            Value::Array(a) => format!("[{} items]", a.len()),
            Value::Object(o) if v.to_string().chars().count() > 100 => format!("{{{} keys}}", o.len()),
            other => other.to_string(),
        };
        let _ = writeln!(out, "{k}: {text}");
    }
    out
}

fn indent(text: &str) -> String {
    text.lines().map(|l| if l.is_empty() { "\n".to_string() } else { format!("  {l}\n") }).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::runs::{KeyStats, NewRun, RunKind, RunRef, Source};
    use crate::testutil::sample;
    use crate::{Store, import};

    const R000: &str = include_str!("../../../testdata/vllm-reports/000-dense-models.txt");

    fn fixed(mut row: RunRow) -> RunRow {
        row.created_at = "2026-01-02T03:04:05.678Z".into();
        row.uid = format!("run{:05}", row.id);
        row
    }

    #[test]
    fn the_list_table() {
        let mut store = Store::open_in_memory().unwrap();
        for run in import::import_bytes(R000.as_bytes(), "/data/000.txt").runs.iter().take(3) {
            store.insert(run).unwrap();
        }
        let (run, summary) = sample();
        let mut new = NewRun::from_run(RunKind::Bench, &run, &summary);
        new.set_label("comment", &"long ".repeat(20));
        store.insert(&new).unwrap();
        // A run that knows its GPUs shows their count in its column, not again as a label.
        let mut on_two = NewRun::from_run(
            RunKind::Bench,
            &run,
            &servebench_core::metrics::Summary { gpus: Some(2), ..summary.clone() },
        );
        on_two.set_label("gpus", "2");
        store.insert(&on_two).unwrap();
        let rows: Vec<RunRow> = store.list(&Default::default()).unwrap().into_iter().map(fixed).collect();
        insta::assert_snapshot!(list_table(&rows));
        assert_eq!(list_table(&[]), "No runs match.\n");
    }

    #[test]
    fn a_pooling_run_lists_its_inputs_a_second() {
        let mut store = Store::open_in_memory().unwrap();
        let (run, summary) = sample();
        store.insert(&NewRun::from_run(RunKind::Bench, &run, &summary)).unwrap();
        let rows = |store: &Store| store.list(&Default::default()).unwrap();
        assert!(!list_table(&rows(&store)).contains("INPUTS/S"), "no pooling run, no column");
        let pooling = servebench_core::metrics::PoolingFigures {
            total_input_sequences: Some(40),
            input_sequence_throughput: 451.049,
        };
        let pooled = servebench_core::metrics::Summary { pooling: Some(pooling), ..summary };
        store.insert(&NewRun::from_run(RunKind::Bench, &run, &pooled)).unwrap();
        let table = list_table(&rows(&store));
        let lines: Vec<&str> = table.lines().collect();
        let header: Vec<&str> = lines[0].split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        let at = header.iter().position(|&c| c == "INPUTS/S").unwrap();
        assert_eq!(header[at - 1], "OUT TOK/S");
        // Right-aligned under its header: the generation run's `-`, the pooling run's rate.
        let end = lines[0].find("INPUTS/S").unwrap() + "INPUTS/S".len();
        assert_eq!(&lines[1][end - 1..end], "-", "{table}");
        assert_eq!(&lines[2][end - 6..end], "451.05", "{table}");
    }

    #[test]
    fn show_a_measured_run() {
        let mut store = Store::open_in_memory().unwrap();
        let (run, summary) = sample();
        let env = json!({
            "client_host": "bench-box",
            "server_models": {"object": "list", "data": [{"id": "Qwen/Qwen3-8B", "object": "model", "owned_by": "vllm", "max_model_len": 40960}]},
            "server_version": "0.11.0",
            "metrics_before": "# HELP vllm:num_requests_running Number of requests.\nvllm:num_requests_running 0\n",
            "gpus": ["H100", "H100"],
        });
        let new = NewRun::from_run(RunKind::Bench, &run, &summary).with_environment(env);
        let id = store.insert(&new).unwrap();
        let mut stored = store.get(&RunRef::Id(id)).unwrap();
        stored.row = fixed(stored.row);
        insta::assert_snapshot!(show_text(&stored));
    }

    #[test]
    fn show_an_imported_run() {
        let mut store = Store::open_in_memory().unwrap();
        let run = &import::import_bytes(R000.as_bytes(), "/data/000.txt").runs[0];
        let id = store.insert(run).unwrap();
        let mut stored = store.get(&RunRef::Id(id)).unwrap();
        stored.row = fixed(stored.row);
        let text = show_text(&stored);
        insta::assert_snapshot!(text);
        // The block is the one in the file (whose trailing spaces were lost when pasted).
        let block = render_result_block(&stored.summary);
        let trimmed: Vec<&str> = block.lines().map(str::trim_end).collect();
        assert!(R000.contains(&trimmed.join("\n")));
    }

    #[test]
    fn cells_are_cut_with_an_ellipsis() {
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abcd", 4), "abcd");
        let row = RunRow {
            id: 1,
            uid: "a".into(),
            kind: RunKind::Import,
            created_at: "2026-01-02T03:04:05Z".into(),
            started_at: None,
            model: None,
            backend: None,
            target: None,
            labels: vec![],
            num_prompts: None,
            completed: 1,
            failed: None,
            max_concurrency: None,
            request_rate: Some(2.5),
            duration_s: 1.0,
            request_throughput: 1.0,
            output_throughput: None,
            total_token_throughput: None,
            stats: [Some(KeyStats { mean_ms: 1.0, median_ms: 2.0, p99_ms: None }), None, None, None],
            interrupted: false,
            source: Some(Source { file: "f".into(), line: None }),
            num_requests: 0,
            chunk_times: None,
            gpus: None,
            gpu_hour_cost: None,
            input_sequence_throughput: None,
        };
        let table = list_table(std::slice::from_ref(&row));
        assert!(table.contains("2026-01-02 03:04") && table.contains("2.5") && table.contains("2.00"), "{table}");
        assert!(!table.contains('*'), "{table}");
        // A run that ended early is starred, and the star explained under the table.
        let early = RunRow { id: 2, interrupted: true, ..row.clone() };
        let table = list_table(&[row, early]);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[1].trim_start().starts_with("1 ") && lines[2].trim_start().starts_with("2* "), "{table}");
        assert!(lines[3].starts_with("* interrupted, or stopped by a rule"), "{table}");
    }

    #[test]
    fn control_characters_of_stored_text_are_shown_escaped() {
        let mut store = Store::open_in_memory().unwrap();
        let (run, summary) = sample();
        store.insert(&NewRun::from_run(RunKind::Bench, &run, &summary)).unwrap();
        let mut row = fixed(store.list(&Default::default()).unwrap().remove(0));
        row.model = Some("evil\u{1b}]0;pwned\u{7}\u{1b}[2J".into());
        let table = list_table(&[row]);
        assert!(!table.chars().any(|c| c.is_control() && c != '\n'), "{table:?}");
        assert!(table.contains("evil\\u{1b}]0;"), "{table}");
        assert_eq!(printable("a\tb\nc\u{0}"), "a\tb\nc\\u{0}");
    }
}
