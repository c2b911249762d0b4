//! [`Store`]: open, insert, list, read and remove runs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params, params_from_iter};
use serde_json::Value;
use servebench_core::metrics::{Summary, is_gpu_hour_cost};

use crate::dates::rfc3339_utc;
use crate::ids::short_id;
use crate::runs::{
    ChunkTimes, GPUS_LABEL, KEY_METRICS, KeyStats, NewRun, RunFilter, RunId, RunKind, RunRecords, RunRef, RunRow,
    RunSpec, Source, StoredRun, count_of,
};
use crate::{StoreError, requests, schema};

/// An open run store: one SQLite connection.
///
/// Every insert is one transaction (the run, its labels and its requests), taken with the
/// write lock up front; other processes writing at the same time wait for it (up to 30 s)
/// instead of failing.
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// The `runs` columns a [`RunRow`] is read from, in [`read_row`]'s order.
const ROW_COLUMNS: &str = "id, uid, kind, created_at, started_at, model, backend, target, num_prompts, completed,
    failed, max_concurrency, request_rate, duration_s, request_throughput, output_throughput,
    total_token_throughput, mean_ttft_ms, median_ttft_ms, p99_ttft_ms, mean_tpot_ms, median_tpot_ms, p99_tpot_ms,
    mean_itl_ms, median_itl_ms, p99_itl_ms, mean_e2el_ms, median_e2el_ms, p99_e2el_ms, interrupted, source_file,
    source_line, num_requests, chunk_times, json_extract(summary_json, '$.gpus'),
    json_extract(summary_json, '$.gpu_hour_cost'),
    json_extract(summary_json, '$.pooling.input_sequence_throughput')";
const ROW_COLUMN_COUNT: usize = 37;

/// The label that is the price an hour of a run's GPUs ([`Store::relabel`]; its count is
/// [`GPUS_LABEL`]).
const GPU_HOUR_COST: &str = "gpu_hour_cost";

/// Makes short-id seeds unique among inserts of one process.
static INSERTS: AtomicU64 = AtomicU64::new(0);

impl Store {
    /// Opens the store at `path`, creating the file and its folder if needed and migrating an
    /// older schema.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|error| StoreError::CreateDir { path: dir.to_path_buf(), error })?;
        }
        let mut conn = Connection::open(path).map_err(|error| StoreError::Open { path: path.to_path_buf(), error })?;
        schema::prepare(&mut conn, path)?;
        Ok(Store { conn, path: path.to_path_buf() })
    }

    /// A store that lives in memory only (tests, dry runs).
    pub fn open_in_memory() -> Result<Store, StoreError> {
        let path = PathBuf::from(":memory:");
        let mut conn = Connection::open_in_memory().map_err(|error| StoreError::Open { path: path.clone(), error })?;
        schema::prepare(&mut conn, &path)?;
        Ok(Store { conn, path })
    }

    /// The file this store was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stores a run with its labels and records, in one transaction; returns its number.
    ///
    /// A run with a fingerprint that is already stored is refused with
    /// [`StoreError::Duplicate`] (an import of the same file content).
    pub fn insert(&mut self, run: &NewRun) -> Result<RunId, StoreError> {
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        if let Some(fp) = &run.fingerprint {
            let existing: Option<RunId> =
                tx.query_row("SELECT id FROM runs WHERE fingerprint = ?1", [fp], |r| r.get(0)).optional()?;
            if let Some(existing) = existing {
                return Err(StoreError::Duplicate { existing });
            }
        }
        let now = jiff::Timestamp::now();
        let created_at = rfc3339_utc(now);
        let started = run.started_at.as_deref().and_then(|s| s.parse::<jiff::Timestamp>().ok());
        let time_ms = started.unwrap_or(now).as_millisecond();
        let mut seed = match &run.fingerprint {
            Some(fp) => format!("import|{fp}"),
            None => format!(
                "{}|{created_at}|{}|{}|{}",
                run.kind,
                std::process::id(),
                INSERTS.fetch_add(1, Ordering::Relaxed),
                now.as_nanosecond()
            ),
        };
        let uid = loop {
            let uid = short_id(&seed);
            let taken = tx.query_row("SELECT 1 FROM runs WHERE uid = ?1", [&uid], |_| Ok(())).optional()?.is_some();
            if !taken {
                break uid;
            }
            seed.push('+');
        };

        let s = &run.summary;
        let stats: Vec<Option<KeyStats>> = KEY_METRICS.iter().map(|&m| KeyStats::of(s, m)).collect();
        let stat = |i: usize, f: fn(&KeyStats) -> Option<f64>| stats[i].as_ref().and_then(f);
        let (num_requests, chunk_times) = match &run.records {
            Some(r) => (r.records.len() as i64, Some(r.chunk_times.as_str())),
            None => (0, None),
        };
        tx.execute(
            "INSERT INTO runs (uid, kind, created_at, started_at, time_ms, model, backend, target, num_prompts,
                 completed, failed, max_concurrency, request_rate, duration_s, request_throughput, output_throughput,
                 total_token_throughput, mean_ttft_ms, median_ttft_ms, p99_ttft_ms, mean_tpot_ms, median_tpot_ms,
                 p99_tpot_ms, mean_itl_ms, median_itl_ms, p99_itl_ms, mean_e2el_ms, median_e2el_ms, p99_e2el_ms,
                 config_json, summary_json, notes_json, interrupted, source_file, source_line, num_requests,
                 chunk_times, environment_json, fingerprint)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,
                 ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36, ?37, ?38, ?39)",
            params![
                uid,
                run.kind.as_str(),
                created_at,
                run.started_at,
                time_ms,
                run.model,
                run.backend,
                run.target,
                run.num_prompts.map(clamp_i64),
                clamp_i64(s.completed),
                s.failed.map(clamp_i64),
                s.max_concurrency.map(clamp_i64),
                s.request_rate,
                s.duration_s,
                s.request_throughput,
                s.output_throughput,
                s.total_token_throughput,
                stat(0, |k| Some(k.mean_ms)),
                stat(0, |k| Some(k.median_ms)),
                stat(0, |k| k.p99_ms),
                stat(1, |k| Some(k.mean_ms)),
                stat(1, |k| Some(k.median_ms)),
                stat(1, |k| k.p99_ms),
                stat(2, |k| Some(k.mean_ms)),
                stat(2, |k| Some(k.median_ms)),
                stat(2, |k| k.p99_ms),
                stat(3, |k| Some(k.mean_ms)),
                stat(3, |k| Some(k.median_ms)),
                stat(3, |k| k.p99_ms),
                run.config.as_ref().map(Value::to_string),
                to_json(s),
                to_json(&run.notes),
                run.interrupted,
                run.source.as_ref().map(|src| src.file.as_str()),
                run.source.as_ref().and_then(|src| src.line).map(|l| l as i64),
                num_requests,
                chunk_times,
                run.environment.as_ref().map(Value::to_string),
                run.fingerprint,
            ],
        )?;
        let id = tx.last_insert_rowid();
        insert_labels(&tx, id, &run.labels)?;
        if let Some(records) = &run.records {
            requests::insert(&tx, id, records)?;
        }
        tx.commit()?;
        Ok(id)
    }

    /// The runs that match `filter`, in number order, with their labels.
    pub fn list(&self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        let mut sql = format!("SELECT {ROW_COLUMNS} FROM runs WHERE 1 = 1");
        let mut args: Vec<SqlValue> = Vec::new();
        for (key, value) in &filter.labels {
            sql.push_str(" AND EXISTS (SELECT 1 FROM run_labels l WHERE l.run_id = runs.id AND l.key = ?");
            args.push(SqlValue::Text(key.clone()));
            if let Some(value) = value {
                sql.push_str(" AND l.value = ?");
                args.push(SqlValue::Text(value.clone()));
            }
            sql.push(')');
        }
        if let Some(model) = &filter.model {
            sql.push_str(" AND instr(lower(coalesce(model, '')), lower(?)) > 0");
            args.push(SqlValue::Text(model.clone()));
        }
        if let Some(kind) = filter.kind {
            sql.push_str(" AND kind = ?");
            args.push(SqlValue::Text(kind.as_str().to_string()));
        }
        if let Some(since) = filter.since {
            sql.push_str(" AND time_ms >= ?");
            args.push(SqlValue::Integer(since.as_millisecond()));
        }
        if let Some(until) = filter.until {
            sql.push_str(" AND time_ms < ?");
            args.push(SqlValue::Integer(until.as_millisecond()));
        }
        match filter.limit {
            Some(n) => {
                sql.push_str(" ORDER BY id DESC LIMIT ?");
                args.push(SqlValue::Integer(clamp_i64(n as u64)));
            }
            None => sql.push_str(" ORDER BY id"),
        }
        let mut rows: Vec<RunRow> = {
            let mut stmt = self.conn.prepare(&sql)?;
            stmt.query_map(params_from_iter(args), read_row)?.collect::<Result<_, _>>()?
        };
        if filter.limit.is_some() {
            rows.reverse();
        }
        for row in &mut rows {
            row.labels = self.labels(row.id)?;
        }
        Ok(rows)
    }

    /// The run's number.
    pub fn resolve(&self, run: &RunRef) -> Result<RunId, StoreError> {
        let found: Option<RunId> = match run {
            RunRef::Id(id) => {
                self.conn.query_row("SELECT id FROM runs WHERE id = ?1", [id], |r| r.get(0)).optional()?
            }
            RunRef::Uid(uid) => {
                self.conn.query_row("SELECT id FROM runs WHERE uid = ?1", [uid], |r| r.get(0)).optional()?
            }
        };
        found.ok_or_else(|| StoreError::NotFound(run.clone()))
    }

    /// The numbers of the runs `specs` name, in their order (a range in number order): an
    /// error when a run named alone is not in the store, or a range holds none.
    pub fn resolve_all(&self, specs: &[RunSpec]) -> Result<Vec<RunId>, StoreError> {
        let mut ids = Vec::new();
        for spec in specs {
            match spec {
                RunSpec::One(run) => ids.push(self.resolve(run)?),
                RunSpec::Range(from, to) => {
                    let mut stmt =
                        self.conn.prepare_cached("SELECT id FROM runs WHERE id BETWEEN ?1 AND ?2 ORDER BY id")?;
                    let found: Vec<RunId> = stmt.query_map([from, to], |r| r.get(0))?.collect::<Result<_, _>>()?;
                    if found.is_empty() {
                        return Err(StoreError::EmptyRange(*from, *to));
                    }
                    ids.extend(found);
                }
            }
        }
        Ok(ids)
    }

    /// [`Store::resolve_all`], each run once: a run named twice (`rm 1 1`, or by number and by
    /// id) is changed, and reported, once.
    fn resolve_distinct(&self, specs: &[RunSpec]) -> Result<Vec<RunId>, StoreError> {
        let mut ids = self.resolve_all(specs)?;
        let mut seen = std::collections::HashSet::new();
        ids.retain(|id| seen.insert(*id));
        Ok(ids)
    }

    /// Everything stored about a run, its records included.
    pub fn get(&self, run: &RunRef) -> Result<StoredRun, StoreError> {
        let mut stored = self.get_without_records(run)?;
        stored.records = self.records(&RunRef::Id(stored.row.id))?;
        Ok(stored)
    }

    /// Everything stored about a run except its records (cheap for runs of many requests).
    pub fn get_without_records(&self, run: &RunRef) -> Result<StoredRun, StoreError> {
        let id = self.resolve(run)?;
        let sql = format!(
            "SELECT {ROW_COLUMNS}, summary_json, config_json, environment_json, notes_json FROM runs WHERE id = ?1"
        );
        type Json = (String, Option<String>, Option<String>, String);
        let (mut row, (summary, config, environment, notes)): (RunRow, Json) =
            self.conn.query_row(&sql, [id], |r| {
                let n = ROW_COLUMN_COUNT;
                Ok((read_row(r)?, (r.get(n)?, r.get(n + 1)?, r.get(n + 2)?, r.get(n + 3)?)))
            })?;
        row.labels = self.labels(id)?;
        let corrupt = |what| StoreError::Corrupt { id, what };
        let summary: Summary = serde_json::from_str(&summary).map_err(|_| corrupt("summary"))?;
        let parse = |s: Option<String>, what| -> Result<Option<Value>, StoreError> {
            s.map(|s| serde_json::from_str(&s).map_err(|_| corrupt(what))).transpose()
        };
        let config = parse(config, "config")?;
        let environment = parse(environment, "environment")?;
        let notes: Vec<String> = serde_json::from_str(&notes).map_err(|_| corrupt("notes"))?;
        Ok(StoredRun { row, summary, config, environment, notes, records: None })
    }

    /// The run's per-request records; `None` when it has none.
    pub fn records(&self, run: &RunRef) -> Result<Option<RunRecords>, StoreError> {
        let id = self.resolve(run)?;
        let chunk_times: Option<String> =
            self.conn.query_row("SELECT chunk_times FROM runs WHERE id = ?1", [id], |r| r.get(0))?;
        let Some(chunk_times) = chunk_times else {
            return Ok(None);
        };
        let corrupt = StoreError::Corrupt { id, what: "request records" };
        let chunk_times = ChunkTimes::from_name(&chunk_times).ok_or(StoreError::Corrupt { id, what: "chunk_times" })?;
        let records = requests::load(&self.conn, id)?.map_err(|_| corrupt)?;
        Ok(Some(RunRecords { chunk_times, records }))
    }

    /// Removes runs with their labels and records. Either every run named is removed, or
    /// (when one is not in the store) none is. Returns their numbers.
    pub fn remove(&mut self, runs: &[RunSpec]) -> Result<Vec<RunId>, StoreError> {
        let ids = self.resolve_distinct(runs)?;
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        for id in &ids {
            tx.execute("DELETE FROM runs WHERE id = ?1", [id])?;
        }
        tx.commit()?;
        Ok(ids)
    }

    /// Sets labels of runs (a key already set keeps its place, with the new value) and removes
    /// the keys `unset` names, for every run named or (when one is not in the store) none.
    /// The `gpus` label is the run's GPU count, which its per-GPU figures divide by: setting it
    /// to a whole number sets the count, removing it forgets the count; another value is an
    /// error. `gpu_hour_cost` (a number above 0) is their price an hour the same way, for the
    /// cost per million output tokens. Returns the runs' numbers.
    pub fn relabel(
        &mut self,
        runs: &[RunSpec],
        set: &[(String, String)],
        unset: &[String],
    ) -> Result<Vec<RunId>, StoreError> {
        if let Some((k, _)) = set.iter().find(|(k, _)| k.trim().is_empty()) {
            return Err(StoreError::EmptyLabelKey(format!("{k}=")));
        }
        let gpus = typed_change(GPUS_LABEL, set, unset, |v| count_of(v).ok_or_else(|| StoreError::BadGpus(v.into())))?;
        let cost = typed_change(GPU_HOUR_COST, set, unset, |v| {
            v.parse::<f64>().ok().filter(|&c| is_gpu_hour_cost(c)).ok_or_else(|| StoreError::BadCost(v.into()))
        })?;
        let ids = self.resolve_distinct(runs)?;
        let mut changes = Vec::with_capacity(ids.len());
        for &id in &ids {
            let mut labels = self.labels(id)?;
            labels.retain(|(k, _)| !unset.contains(k));
            for (key, value) in set {
                match labels.iter_mut().find(|(k, _)| k == key) {
                    Some(slot) => slot.1.clone_from(value),
                    None => labels.push((key.clone(), value.clone())),
                }
            }
            let summary = if gpus.is_none() && cost.is_none() {
                None
            } else {
                let text: String =
                    self.conn.query_row("SELECT summary_json FROM runs WHERE id = ?1", [id], |r| r.get(0))?;
                let mut summary: Summary =
                    serde_json::from_str(&text).map_err(|_| StoreError::Corrupt { id, what: "summary" })?;
                if let Some(count) = gpus {
                    summary.gpus = count;
                }
                if let Some(price) = cost {
                    summary.gpu_hour_cost = price;
                }
                Some(to_json(&summary))
            };
            changes.push((id, labels, summary));
        }
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        for (id, labels, summary) in &changes {
            tx.execute("DELETE FROM run_labels WHERE run_id = ?1", [id])?;
            insert_labels(&tx, *id, labels)?;
            if let Some(summary) = summary {
                tx.execute("UPDATE runs SET summary_json = ?1 WHERE id = ?2", params![summary, id])?;
            }
        }
        tx.commit()?;
        Ok(ids)
    }

    fn labels(&self, id: RunId) -> Result<Vec<(String, String)>, StoreError> {
        let mut stmt =
            self.conn.prepare_cached("SELECT key, value FROM run_labels WHERE run_id = ?1 ORDER BY position")?;
        let labels = stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
        Ok(labels)
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

/// What a relabelling does to the summary field behind label `key`: `None`, nothing;
/// `Some(Some(value))`, sets it to the label's value read by `parse` (the last one set);
/// `Some(None)`, forgets it (the label removed).
fn typed_change<T>(
    key: &str,
    set: &[(String, String)],
    unset: &[String],
    parse: impl Fn(&str) -> Result<T, StoreError>,
) -> Result<Option<Option<T>>, StoreError> {
    match set.iter().rev().find(|(k, _)| k == key) {
        Some((_, v)) => parse(v.trim()).map(|value| Some(Some(value))),
        None => Ok(unset.iter().any(|k| k == key).then_some(None)),
    }
}

/// Writes a run's labels in their order.
fn insert_labels(conn: &Connection, id: RunId, labels: &[(String, String)]) -> Result<(), StoreError> {
    let mut insert =
        conn.prepare_cached("INSERT INTO run_labels (run_id, position, key, value) VALUES (?1, ?2, ?3, ?4)")?;
    for (i, (k, v)) in labels.iter().enumerate() {
        insert.execute(params![id, i as i64, k, v])?;
    }
    Ok(())
}

/// A count as SQLite's signed integer.
fn clamp_i64(x: u64) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// Reads [`ROW_COLUMNS`] (labels are filled in afterwards).
fn read_row(r: &Row<'_>) -> rusqlite::Result<RunRow> {
    let kind: String = r.get(2)?;
    let kind = RunKind::from_name(&kind).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            2,
            rusqlite::types::Type::Text,
            format!("unknown run kind {kind:?}").into(),
        )
    })?;
    let count =
        |i: usize| -> rusqlite::Result<Option<u64>> { Ok(r.get::<_, Option<i64>>(i)?.map(|x| x.max(0) as u64)) };
    let stats = |base: usize| -> rusqlite::Result<Option<KeyStats>> {
        let (mean, median, p99): (Option<f64>, Option<f64>, Option<f64>) =
            (r.get(base)?, r.get(base + 1)?, r.get(base + 2)?);
        Ok(match (mean, median) {
            (Some(mean_ms), Some(median_ms)) => Some(KeyStats { mean_ms, median_ms, p99_ms: p99 }),
            _ => None,
        })
    };
    let source_file: Option<String> = r.get(30)?;
    let source_line: Option<i64> = r.get(31)?;
    Ok(RunRow {
        id: r.get(0)?,
        uid: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
        kind,
        created_at: r.get(3)?,
        started_at: r.get(4)?,
        model: r.get(5)?,
        backend: r.get(6)?,
        target: r.get(7)?,
        labels: Vec::new(),
        num_prompts: count(8)?,
        completed: count(9)?.unwrap_or(0),
        failed: count(10)?,
        max_concurrency: count(11)?,
        request_rate: r.get(12)?,
        duration_s: r.get(13)?,
        request_throughput: r.get(14)?,
        output_throughput: r.get(15)?,
        total_token_throughput: r.get(16)?,
        stats: [stats(17)?, stats(20)?, stats(23)?, stats(26)?],
        interrupted: r.get(29)?,
        source: source_file.map(|file| Source { file, line: source_line.map(|l| l.max(0) as usize) }),
        num_requests: count(32)?.unwrap_or(0),
        chunk_times: r.get::<_, Option<String>>(33)?.as_deref().and_then(ChunkTimes::from_name),
        gpus: r.get::<_, Option<i64>>(34)?.and_then(|n| u32::try_from(n).ok()).filter(|&n| n >= 1),
        gpu_hour_cost: r.get::<_, Option<f64>>(35)?.filter(|&c| is_gpu_hour_cost(c)),
        input_sequence_throughput: r.get(36)?,
    })
}

#[cfg(test)]
mod tests;
