//! Runs as CSV or JSON lines, and one run's requests as CSV or JSON lines, or as a trace for
//! Perfetto ([`trace`]).
//!
//! Run columns come in the fixed order of [`RUN_COLUMNS`], then one `label:KEY` column per
//! label key found among the exported runs, sorted by key. JSON objects have the same keys,
//! with the labels as one `labels` object after `target`. Numbers are written as JSON writes
//! them (shortest exact form); an infinite request rate is `inf`, as in vLLM's JSON; a value
//! that is not known is an empty CSV cell or `null`. A pooling run's input sequences a second
//! (vLLM's `input_sequence_throughput`) follow its request throughput, empty for a generation
//! run. The last fixed columns are the run's GPU count, its output and total tokens per second
//! per GPU, its interactivity (1000 / median TPOT) and, where its GPUs' price is known, its cost
//! per million output tokens, as `compare` shows them; then, where the run scraped a GPU
//! exporter, the joules its GPUs drew and the output tokens a joule served ([`ENERGY_COLUMNS`]).

use std::collections::BTreeSet;
use std::io::{self, Write};

use serde_json::{Map, Value, json};
use servebench_core::metrics::{cost_per_million, interactivity, per_gpu};
use servebench_core::telemetry::ServerTelemetry;
use servebench_core::threshold::Quantity;

pub mod trace;

use crate::requests::{EXPORT_COLUMNS, export_values};
use crate::runs::{KeyStats, RunRecords, RunRow, StoredRun};

/// The fixed columns of a run, in order.
pub const RUN_COLUMNS: [&str; 40] = [
    "id",
    "uid",
    "kind",
    "created_at",
    "started_at",
    "model",
    "backend",
    "target",
    "num_prompts",
    "completed",
    "failed",
    "max_concurrency",
    "request_rate",
    "duration_s",
    "request_throughput",
    "input_sequence_throughput",
    "output_throughput",
    "total_token_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
    "interrupted",
    "source_file",
    "source_line",
    "num_requests",
    "chunk_times",
    "gpus",
    "output_throughput_per_gpu",
    "total_token_throughput_per_gpu",
    "interactivity",
    "cost_per_million_output_tokens",
];

/// The columns after [`RUN_COLUMNS`] that a run's telemetry gives (a DCGM exporter's energy
/// counter or power gauge, `--scrape`d): the GPUs' joules over the run and the output tokens
/// a joule served, as `compare` shows them.
pub const ENERGY_COLUMNS: [&str; 2] = ["gpu_energy_j", "output_tokens_per_joule"];

/// A number for JSON (`inf` for infinity, `null` for NaN).
fn num(x: f64) -> Value {
    if x.is_infinite() {
        return json!(if x > 0.0 { "inf" } else { "-inf" });
    }
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

fn opt_num(x: Option<f64>) -> Value {
    x.map_or(Value::Null, num)
}

/// One run as a JSON object: [`RUN_COLUMNS`] and the [`ENERGY_COLUMNS`], with `labels` after
/// `target`. This is what `runs list --json` prints, one per line.
pub fn run_row_json(run: &StoredRun) -> Map<String, Value> {
    let mut m = row_json(&run.row);
    let energy = run.summary.server.as_ref().and_then(ServerTelemetry::gpu_energy_j);
    m.insert("gpu_energy_j".into(), opt_num(energy));
    m.insert("output_tokens_per_joule".into(), opt_num(Quantity::OutputTokensPerJoule.value(&run.summary)));
    m
}

/// [`RUN_COLUMNS`] of a stored row, with `labels` after `target`.
fn row_json(row: &RunRow) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("id".into(), json!(row.id));
    m.insert("uid".into(), json!(row.uid));
    m.insert("kind".into(), json!(row.kind.as_str()));
    m.insert("created_at".into(), json!(row.created_at));
    m.insert("started_at".into(), json!(row.started_at));
    m.insert("model".into(), json!(row.model));
    m.insert("backend".into(), json!(row.backend));
    m.insert("target".into(), json!(row.target));
    let labels: Map<String, Value> = row.labels.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    m.insert("labels".into(), Value::Object(labels));
    m.insert("num_prompts".into(), json!(row.num_prompts));
    m.insert("completed".into(), json!(row.completed));
    m.insert("failed".into(), json!(row.failed));
    m.insert("max_concurrency".into(), json!(row.max_concurrency));
    m.insert("request_rate".into(), opt_num(row.request_rate));
    m.insert("duration_s".into(), num(row.duration_s));
    m.insert("request_throughput".into(), num(row.request_throughput));
    m.insert("input_sequence_throughput".into(), opt_num(row.input_sequence_throughput));
    m.insert("output_throughput".into(), opt_num(row.output_throughput));
    m.insert("total_token_throughput".into(), opt_num(row.total_token_throughput));
    for (name, stats) in ["ttft", "tpot", "itl", "e2el"].iter().zip(&row.stats) {
        let get = |f: fn(&KeyStats) -> Option<f64>| opt_num(stats.as_ref().and_then(f));
        m.insert(format!("mean_{name}_ms"), get(|k| Some(k.mean_ms)));
        m.insert(format!("median_{name}_ms"), get(|k| Some(k.median_ms)));
        m.insert(format!("p99_{name}_ms"), get(|k| k.p99_ms));
    }
    m.insert("interrupted".into(), json!(row.interrupted));
    m.insert("source_file".into(), json!(row.source.as_ref().map(|s| &s.file)));
    m.insert("source_line".into(), json!(row.source.as_ref().and_then(|s| s.line)));
    m.insert("num_requests".into(), json!(row.num_requests));
    m.insert("chunk_times".into(), json!(row.chunk_times.map(|c| c.as_str())));
    m.insert("gpus".into(), json!(row.gpus));
    m.insert("output_throughput_per_gpu".into(), opt_num(per_gpu(row.output_throughput, row.gpus)));
    m.insert("total_token_throughput_per_gpu".into(), opt_num(per_gpu(row.total_token_throughput, row.gpus)));
    let median_tpot = row.stats[1].as_ref().map(|k| k.median_ms);
    m.insert("interactivity".into(), opt_num(interactivity(row.completed, median_tpot)));
    let cost = cost_per_million(row.output_throughput, row.gpus, row.gpu_hour_cost);
    m.insert("cost_per_million_output_tokens".into(), opt_num(cost));
    m
}

/// One run with everything but its records: [`run_row_json`] plus `summary`, `config`,
/// `environment` and `notes`.
pub fn run_json(run: &StoredRun) -> Value {
    let mut m = run_row_json(run);
    m.insert("summary".into(), serde_json::to_value(&run.summary).unwrap_or(Value::Null));
    m.insert("config".into(), run.config.clone().unwrap_or(Value::Null));
    m.insert("environment".into(), run.environment.clone().unwrap_or(Value::Null));
    m.insert("notes".into(), json!(run.notes));
    Value::Object(m)
}

/// Writes runs as CSV: a header, then one line per run.
pub fn write_runs_csv(runs: &[StoredRun], w: &mut dyn Write) -> io::Result<()> {
    let keys: BTreeSet<&str> = runs.iter().flat_map(|r| r.row.labels.iter().map(|(k, _)| k.as_str())).collect();
    let columns = || RUN_COLUMNS.iter().chain(&ENERGY_COLUMNS);
    let header: Vec<String> =
        columns().map(|c| c.to_string()).chain(keys.iter().map(|k| format!("label:{k}"))).collect();
    write_csv_line(w, header.iter().map(String::as_str))?;
    for run in runs {
        let m = run_row_json(run);
        let mut cells: Vec<String> = columns().map(|c| m.get(*c).map_or_else(String::new, cell)).collect();
        cells.extend(keys.iter().map(|k| run.row.label(k).unwrap_or_default().to_string()));
        write_csv_line(w, cells.iter().map(String::as_str))?;
    }
    Ok(())
}

/// Writes runs as JSON lines: one [`run_json`] object per line.
pub fn write_runs_json(runs: &[StoredRun], w: &mut dyn Write) -> io::Result<()> {
    for run in runs {
        writeln!(w, "{}", run_json(run))?;
    }
    Ok(())
}

/// Writes a run's requests as CSV: a header, then one line per request in dataset order.
/// Times: `*_s` in seconds since the run started, `*_ms` in milliseconds since the request
/// was sent; `chunk_times_ms` lists every token chunk's time, space-separated.
pub fn write_requests_csv(records: &RunRecords, w: &mut dyn Write) -> io::Result<()> {
    write_csv_line(w, EXPORT_COLUMNS.iter().copied())?;
    for (seq, r) in records.records.iter().enumerate() {
        let values = export_values(seq, r);
        write_csv_line(w, values.iter().map(cell).collect::<Vec<_>>().iter().map(String::as_str))?;
    }
    Ok(())
}

/// Writes a run's requests as JSON lines, with the keys of [`write_requests_csv`]'s columns.
pub fn write_requests_json(records: &RunRecords, w: &mut dyn Write) -> io::Result<()> {
    for (seq, r) in records.records.iter().enumerate() {
        let m: Map<String, Value> = EXPORT_COLUMNS.iter().map(|c| c.to_string()).zip(export_values(seq, r)).collect();
        writeln!(w, "{}", Value::Object(m))?;
    }
    Ok(())
}

/// A JSON value as a CSV cell: text as is, `null` empty, anything else as JSON writes it.
fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Writes one CSV record, ended by `\n` (cells with a comma, quote or line break, or with
/// spaces at either end, are quoted as RFC 4180 says).
fn write_csv_line<'a>(w: &mut dyn Write, cells: impl Iterator<Item = &'a str>) -> io::Result<()> {
    let mut line = String::new();
    for (i, c) in cells.enumerate() {
        if i > 0 {
            line.push(',');
        }
        if c.contains([',', '"', '\n', '\r']) || c.starts_with(' ') || c.ends_with(' ') {
            line.push('"');
            line.push_str(&c.replace('"', "\"\""));
            line.push('"');
        } else {
            line.push_str(c);
        }
    }
    line.push('\n');
    w.write_all(line.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::{NewRun, RunFilter, RunKind, RunRef};
    use crate::testutil::sample;
    use crate::{Store, import};
    use servebench_core::metrics::{PoolingFigures, Summary};
    use servebench_core::telemetry::{Series, Signal, Source};

    const R004: &str = include_str!("../../../testdata/vllm-reports/004-prefill-decode.txt");

    /// A store holding the two runs of reference 004 and the sample run, with fixed times.
    fn store() -> Store {
        let mut store = Store::open_in_memory().unwrap();
        for run in import::import_bytes(R004.as_bytes(), "/data/004.txt").runs {
            store.insert(&run).unwrap();
        }
        let (run, summary) = sample();
        // Served by 2 GPUs at 2.5 an hour: 7 output and 207 total tok/s per GPU, and 5 an hour
        // for 14 output tok/s (0.0504 million an hour) is 99.2 a million. Their exporter's
        // energy counter rose by 3,500 mJ: 3.5 J for its 7 output tokens, 2 a joule.
        let energy = Series { signal: Signal::GpuEnergy, points: vec![[0.0, 5.0e6], [1.0, 5.0015e6], [2.0, 5.0035e6]] };
        let dcgm = Source {
            url: "http://gpu-node:9400/metrics".into(),
            engine: Some("dcgm".into()),
            series: vec![energy],
            ..Source::default()
        };
        let server = ServerTelemetry { interval_s: 1.0, sources: vec![dcgm] };
        let summary = Summary { gpus: Some(2), gpu_hour_cost: Some(2.5), server: Some(server), ..summary };
        let mut new = NewRun::from_run(RunKind::Bench, &run, &summary);
        new.set_label("note", "with, comma \"quoted\"");
        store.insert(&new).unwrap();
        store
    }

    /// Every run of the store, with its summary.
    fn runs(store: &Store) -> Vec<StoredRun> {
        let rows = store.list(&RunFilter::default()).unwrap();
        rows.iter().map(|r| store.get_without_records(&RunRef::Id(r.id)).unwrap()).collect()
    }

    /// Export text with the insert times and short ids of this test run replaced.
    fn stable(text: &str, runs: &[StoredRun]) -> String {
        let mut text = text.to_string();
        for r in runs {
            text = text.replace(&r.row.created_at, "<created>").replace(&r.row.uid, "<uid>");
        }
        text
    }

    #[test]
    fn runs_as_csv() {
        let runs = runs(&store());
        let mut out = Vec::new();
        write_runs_csv(&runs, &mut out).unwrap();
        insta::assert_snapshot!(stable(&String::from_utf8(out).unwrap(), &runs));
    }

    #[test]
    fn a_run_s_energy_columns_come_from_its_gpu_exporter() {
        let runs = runs(&store());
        let with = run_row_json(&runs[2]);
        assert_eq!((&with["gpu_energy_j"], &with["output_tokens_per_joule"]), (&json!(3.5), &json!(2.0)));
        let without = run_row_json(&runs[0]);
        assert_eq!((&without["gpu_energy_j"], &without["output_tokens_per_joule"]), (&Value::Null, &Value::Null));
        let keys: Vec<&str> = with.keys().map(String::as_str).collect();
        assert_eq!(keys[keys.len() - 2..], ENERGY_COLUMNS, "the energy columns come last");
    }

    #[test]
    fn a_pooling_run_exports_its_input_sequences_a_second() {
        let (run, summary) = sample();
        let pooling = PoolingFigures { total_input_sequences: Some(40), input_sequence_throughput: 171.5 };
        let summary = Summary { pooling: Some(pooling), ..summary };
        let mut one = Store::open_in_memory().unwrap();
        one.insert(&NewRun::from_run(RunKind::Bench, &run, &summary)).unwrap();
        let pooled = runs(&one);
        let mut out = Vec::new();
        write_runs_csv(&pooled, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let (header, row) = text.split_once('\n').unwrap();
        let at = header.split(',').position(|c| c == "input_sequence_throughput").unwrap();
        assert_eq!(header.split(',').nth(at - 1), Some("request_throughput"));
        assert_eq!(row.split(',').nth(at), Some("171.5"));
        let keys: Vec<String> = run_row_json(&pooled[0]).keys().cloned().collect();
        let after = keys.iter().position(|k| k == "request_throughput").unwrap() + 1;
        assert_eq!(keys[after], "input_sequence_throughput", "JSON keeps the CSV's order");
        // A generation run has none.
        assert_eq!(run_row_json(&runs(&store())[2])["input_sequence_throughput"], Value::Null);
    }

    #[test]
    fn runs_as_json_lines() {
        let runs = runs(&store());
        let mut out = Vec::new();
        write_runs_json(&runs, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 3);
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last["request_rate"], "inf");
        assert_eq!(last["labels"]["gpu"], "H100");
        assert_eq!(last["config"]["target"]["model_id"], "Qwen/Qwen3-8B");
        assert_eq!(last["summary"]["completed"], 2);
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["labels"], json!({"section": "Prefill"}));
        assert_eq!(first["source_line"], 3);
        let keys: Vec<&String> = first.as_object().unwrap().keys().collect();
        assert_eq!(
            keys[..9],
            ["id", "uid", "kind", "created_at", "started_at", "model", "backend", "target", "labels"]
        );
    }

    #[test]
    fn requests_as_csv_and_json() {
        let store = store();
        let records = store.records(&RunRef::Id(3)).unwrap().unwrap();
        let mut out = Vec::new();
        write_requests_csv(&records, &mut out).unwrap();
        insta::assert_snapshot!(String::from_utf8(out).unwrap());
        let mut out = Vec::new();
        write_requests_json(&records, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let second: Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
        assert_eq!(second["chunk_times_ms"], "200 230 260.5 290");
        assert_eq!(second["conversation"], 3);
    }

    #[test]
    fn csv_cells_are_quoted_when_needed() {
        let mut out = Vec::new();
        write_csv_line(&mut out, ["a", "b,c", "say \"hi\"", "two\nlines", " pad"].into_iter()).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a,\"b,c\",\"say \"\"hi\"\"\",\"two\nlines\",\" pad\"\n");
    }
}
