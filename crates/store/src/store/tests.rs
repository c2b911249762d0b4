//! Tests of the store: round trips, filters, removal, migration and concurrent writers.

use std::thread;

use serde_json::json;
use servebench_core::config::Metric;
use servebench_core::record::RunResult;

use super::*;
use crate::testutil::sample;

fn store_with(runs: &[NewRun]) -> (Store, Vec<RunId>) {
    let mut store = Store::open_in_memory().unwrap();
    let ids = runs.iter().map(|r| store.insert(r).unwrap()).collect();
    (store, ids)
}

fn imported(model: &str, labels: &[(&str, &str)]) -> NewRun {
    let mut run =
        NewRun::from_summary(RunKind::Import, Summary { completed: 5, duration_s: 1.0, ..Summary::default() });
    run.model = Some(model.to_string());
    for (k, v) in labels {
        run.set_label(k, v);
    }
    run
}

#[test]
fn a_measured_run_comes_back_whole() {
    let (run, summary) = sample();
    let env = json!({"client": {"host": "box"}, "metrics_before": "# HELP x\nx 1\n"});
    let new = NewRun::from_run(RunKind::Bench, &run, &summary).with_environment(env.clone()).with_label("tp", "2");
    let (store, ids) = store_with(&[new]);
    let got = store.get(&RunRef::Id(ids[0])).unwrap();

    assert_eq!(got.summary, summary);
    assert_eq!(got.run_config(), Some(run.config.clone()));
    assert_eq!(got.environment, Some(env));
    assert_eq!(got.notes, run.notes);
    let row = &got.row;
    assert_eq!(row.kind, RunKind::Bench);
    assert_eq!(row.labels, [("gpu".to_string(), "H100".to_string()), ("tp".to_string(), "2".to_string())]);
    assert_eq!(row.started_at.as_deref(), Some("2025-06-01T12:00:00+02:00"));
    assert_eq!((row.completed, row.failed, row.num_prompts, row.max_concurrency), (2, Some(1), Some(3), Some(2)));
    assert_eq!(row.request_rate, Some(f64::INFINITY));
    assert_eq!(row.target.as_deref(), Some("http://127.0.0.1:8000"));
    assert_eq!(row.num_requests, 3);
    let ttft = summary.metric(Metric::Ttft).unwrap();
    assert_eq!(row.key_stats(Metric::Ttft).unwrap().median_ms, ttft.median_ms);
    assert_eq!(row.key_stats(Metric::E2el).unwrap().p99_ms, summary.metric(Metric::E2el).unwrap().percentile(99.0));

    // Records come back as stored, without the generated text, and give the same summary.
    let records = got.records.unwrap();
    assert_eq!(records.chunk_times, ChunkTimes::All);
    let mut expected = run.records.clone();
    for r in &mut expected {
        r.text.clear();
    }
    assert_eq!(records.records, expected);
    let again = RunResult { records: records.records, ..run };
    assert_eq!(Summary::compute(&again), summary);

    // The short id names the same run.
    assert_eq!(store.resolve(&RunRef::Uid(row.uid.clone())).unwrap(), ids[0]);
}

#[test]
fn records_with_only_first_and_last_chunk_keep_those() {
    let (run, summary) = sample();
    let mut new = NewRun::from_run(RunKind::Bench, &run, &summary);
    let records = new.records.as_mut().unwrap();
    records.chunk_times = ChunkTimes::FirstLast;
    let (store, ids) = store_with(&[new]);
    let back = store.records(&RunRef::Id(ids[0])).unwrap().unwrap();
    assert_eq!(back.chunk_times, ChunkTimes::FirstLast);
    assert_eq!(back.records[0].chunks_us, [150_000, 211_000]);
    assert_eq!(back.records[2].chunks_us, Vec::<u32>::new());
}

#[test]
fn a_run_without_records_says_so() {
    let (store, ids) = store_with(&[imported("m", &[])]);
    assert_eq!(store.records(&RunRef::Id(ids[0])).unwrap(), None);
    assert_eq!(store.get(&RunRef::Id(ids[0])).unwrap().records, None);
}

#[test]
fn filters_combine_and_every_label_must_match() {
    let runs = [
        imported("Qwen/Qwen3-8B", &[("gpu", "H100"), ("tp", "1")]),
        imported("Qwen/Qwen3-4B", &[("gpu", "H100"), ("tp", "2")]),
        imported("meta-llama/Llama-3.2-1B", &[("gpu", "A100")]),
        NewRun::from_summary(RunKind::Predict, Summary::default()),
    ];
    let (store, ids) = store_with(&runs);
    let list = |f: RunFilter| store.list(&f).unwrap().iter().map(|r| r.id).collect::<Vec<_>>();
    let label = |k: &str, v: Option<&str>| (k.to_string(), v.map(str::to_string));

    assert_eq!(list(RunFilter::default()), ids);
    assert_eq!(list(RunFilter { labels: vec![label("gpu", Some("H100"))], ..Default::default() }), ids[..2]);
    assert_eq!(
        list(RunFilter { labels: vec![label("gpu", Some("H100")), label("tp", Some("2"))], ..Default::default() }),
        [ids[1]]
    );
    assert_eq!(list(RunFilter { labels: vec![label("tp", None)], ..Default::default() }), ids[..2]);
    assert_eq!(list(RunFilter { model: Some("qwen3".into()), ..Default::default() }), ids[..2]);
    assert_eq!(list(RunFilter { kind: Some(RunKind::Predict), ..Default::default() }), [ids[3]]);
    // The limit keeps the most recent runs, listed in order.
    assert_eq!(list(RunFilter { limit: Some(2), ..Default::default() }), ids[2..]);
    assert_eq!(list(RunFilter { limit: Some(0), ..Default::default() }), Vec::<RunId>::new());
}

#[test]
fn since_and_until_use_the_start_of_the_run_when_known() {
    let mut old = imported("m", &[]);
    old.started_at = Some("2024-01-01T00:00:00Z".into());
    let mut newer = imported("m", &[]);
    newer.started_at = Some("2025-01-01T00:00:00+01:00".into());
    let unknown = imported("m", &[]);
    let (store, ids) = store_with(&[old, newer, unknown]);
    let at = |s: &str| Some(s.parse::<jiff::Timestamp>().unwrap());
    let list = |f: RunFilter| store.list(&f).unwrap().iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(list(RunFilter { since: at("2024-06-01T00:00:00Z"), ..Default::default() }), ids[1..]);
    assert_eq!(list(RunFilter { until: at("2024-12-31T23:00:00Z"), ..Default::default() }), ids[..1]);
    assert_eq!(list(RunFilter { until: at("2024-12-31T23:00:01Z"), ..Default::default() }), ids[..2]);
}

#[test]
fn removal_takes_labels_and_requests_and_is_all_or_nothing() {
    let (run, summary) = sample();
    let (mut store, ids) = store_with(&[NewRun::from_run(RunKind::Bench, &run, &summary), imported("m", &[])]);
    let err = store.remove(&[RunRef::Id(ids[0]).into(), RunRef::Id(99).into()]).unwrap_err();
    assert!(matches!(err, StoreError::NotFound(RunRef::Id(99))), "{err}");
    assert_eq!(store.list(&RunFilter::default()).unwrap().len(), 2);

    let twice: Vec<RunSpec> = vec![RunRef::Id(ids[0]).into(), RunRef::Id(ids[0]).into()];
    assert_eq!(store.remove(&twice).unwrap(), [ids[0]], "a run named twice is removed once");
    let count = |table: &str| -> i64 {
        store.conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0)).unwrap()
    };
    assert_eq!((count("runs"), count("run_labels"), count("requests")), (1, 0, 0));
    assert!(matches!(store.get(&RunRef::Id(ids[0])), Err(StoreError::NotFound(_))));
    // Numbers are not reused.
    let next = store.insert(&imported("m", &[])).unwrap();
    assert!(next > ids[1]);
}

#[test]
fn a_range_names_the_runs_it_holds_and_an_empty_one_is_an_error() {
    let (mut store, ids) =
        store_with(&[imported("a", &[]), imported("b", &[]), imported("c", &[]), imported("d", &[])]);
    store.remove(&[RunRef::Id(ids[1]).into()]).unwrap();
    let specs = [RunSpec::One(RunRef::Id(ids[3])), RunSpec::Range(ids[0], ids[2])];
    assert_eq!(store.resolve_all(&specs).unwrap(), [ids[3], ids[0], ids[2]], "the gap left by rm is skipped");
    let err = store.resolve_all(&[RunSpec::Range(ids[1], ids[1])]).unwrap_err();
    assert!(matches!(err, StoreError::EmptyRange(a, b) if a == ids[1] && b == ids[1]), "{err}");
    assert!(err.to_string().contains("servebench runs list"), "{err}");
    assert_eq!(store.remove(&[RunSpec::Range(ids[0], ids[3])]).unwrap(), [ids[0], ids[2], ids[3]]);
    assert!(store.list(&RunFilter::default()).unwrap().is_empty());
}

#[test]
fn an_imported_block_is_stored_once() {
    let mut run = imported("m", &[]);
    run.fingerprint = Some("00ff:3".into());
    let (mut store, ids) = store_with(&[run.clone()]);
    let err = store.insert(&run).unwrap_err();
    assert!(matches!(err, StoreError::Duplicate { existing } if existing == ids[0]));
    assert!(err.to_string().contains("servebench runs rm"), "{err}");
    // Its short id depends only on the fingerprint.
    let uid = store.list(&RunFilter::default()).unwrap()[0].uid.clone();
    assert_eq!(uid, crate::ids::short_id("import|00ff:3"));
}

#[test]
fn a_version_1_store_is_migrated_and_keeps_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(include_str!("../../testdata/schema-v1.sql")).unwrap();
        let v: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(v, 1);
    }
    let mut store = Store::open(&path).unwrap();
    let v: i64 = store.conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
    assert_eq!(v, crate::SCHEMA_VERSION);

    let rows = store.list(&RunFilter::default()).unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.uid.len() == 8), "{rows:?}");
    assert_ne!(rows[0].uid, rows[1].uid);
    assert_eq!(rows[0].labels, [("model".to_string(), "Qwen/Qwen3-8B".to_string())]);
    assert_eq!(rows[1].request_rate, Some(f64::INFINITY));
    let old = store.get(&RunRef::Id(2)).unwrap();
    assert_eq!(old.environment, None);
    assert!(old.row.interrupted);
    assert_eq!(old.summary.request_rate, Some(f64::INFINITY));
    assert_eq!(old.records.unwrap().records[0].chunks_us, [150_000, 180_000, 211_000]);
    assert_eq!(
        store.get(&RunRef::Id(1)).unwrap().summary.metric(Metric::Ttft).unwrap().percentile(99.0),
        Some(2761.99)
    );

    // New runs go in after the old ones, and a second open changes nothing.
    let id = store.insert(&imported("m", &[])).unwrap();
    assert_eq!(id, 3);
    drop(store);
    assert_eq!(Store::open(&path).unwrap().list(&RunFilter::default()).unwrap().len(), 3);
}

#[test]
fn concurrent_writers_each_with_a_connection_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("runs.db");
    let (run, summary) = sample();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let path = path.clone();
            let new = NewRun::from_run(RunKind::Bench, &run, &summary).with_label("writer", &w.to_string());
            thread::spawn(move || {
                let mut store = Store::open(&path).unwrap();
                (0..15).map(|_| store.insert(&new).unwrap()).collect::<Vec<_>>()
            })
        })
        .collect();
    let mut ids: Vec<RunId> = writers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 60);

    let store = Store::open(&path).unwrap();
    let check: String = store.conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    let mode: String = store.conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    let rows = store.list(&RunFilter::default()).unwrap();
    assert_eq!(rows.len(), 60);
    let mut uids: Vec<&str> = rows.iter().map(|r| r.uid.as_str()).collect();
    uids.sort_unstable();
    uids.dedup();
    assert_eq!(uids.len(), 60);
    for w in 0..4 {
        let f = RunFilter { labels: vec![("writer".into(), Some(w.to_string()))], ..Default::default() };
        assert_eq!(store.list(&f).unwrap().len(), 15);
    }
    let requests: i64 = store.conn.query_row("SELECT count(*) FROM requests", [], |r| r.get(0)).unwrap();
    assert_eq!(requests, 180);
}

#[test]
fn files_that_are_not_stores_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "this is not a database, it is a long enough text file to have a header ...........")
        .unwrap();
    let err = Store::open(&text).err().unwrap();
    assert!(matches!(err, StoreError::NotSqlite { .. }), "{err}");
    assert!(
        err.to_string().ends_with("is not a servebench run store (it is not an SQLite file at all); pass another --db")
    );

    let other = dir.path().join("other.db");
    Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);").unwrap();
    let err = Store::open(&other).err().unwrap();
    assert!(matches!(err, StoreError::NotAStore { .. }), "{err}");
    assert!(err.to_string().contains("an SQLite file with other tables"), "{err}");
}

#[test]
fn unknown_runs_are_named_in_the_error() {
    let (store, _) = store_with(&[]);
    let err = store.get(&RunRef::Uid("abcdefgh".into())).unwrap_err();
    assert!(err.to_string().contains("\"abcdefgh\""), "{err}");
    assert!(matches!(store.get(&RunRef::Id(1)), Err(StoreError::NotFound(RunRef::Id(1)))));
}

#[test]
fn relabelling_sets_in_place_removes_and_keeps_the_gpu_count_with_its_label() {
    let (mut store, ids) =
        store_with(&[imported("m", &[("tp", "8"), ("note", "x")]), imported("m", &[]), imported("other", &[])]);
    let set = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let got = store
        .relabel(
            &[RunSpec::Range(ids[0], ids[1]), RunSpec::One(RunRef::Id(ids[0]))],
            &set(&[("note", "y"), ("gpus", "8")]),
            &["tp".to_string()],
        )
        .unwrap();
    assert_eq!(got, [ids[0], ids[1]]);
    let run = store.get_without_records(&RunRef::Id(ids[0])).unwrap();
    assert_eq!(run.row.labels, set(&[("note", "y"), ("gpus", "8")]));
    assert_eq!(run.summary.gpus, Some(8));
    assert_eq!(store.get_without_records(&RunRef::Id(ids[1])).unwrap().summary.gpus, Some(8));
    // The run not named is untouched; a filter finds the new label.
    assert_eq!(store.get_without_records(&RunRef::Id(ids[2])).unwrap().summary.gpus, None);
    let filter = RunFilter { labels: vec![("gpus".into(), Some("8".into()))], ..RunFilter::default() };
    assert_eq!(store.list(&filter).unwrap().len(), 2);

    // Removing the label forgets the count.
    store.relabel(&[RunSpec::One(RunRef::Id(ids[1]))], &[], &["gpus".to_string()]).unwrap();
    let run = store.get_without_records(&RunRef::Id(ids[1])).unwrap();
    assert_eq!((run.row.labels, run.summary.gpus), (set(&[("note", "y")]), None));

    // A gpus that is not a count, an empty key or an unknown run changes nothing.
    let e = store.relabel(&[RunSpec::One(RunRef::Id(ids[0]))], &set(&[("gpus", "H100")]), &[]).unwrap_err();
    assert!(e.to_string().contains("such as gpu=H100"), "{e}");
    assert!(matches!(
        store.relabel(&[RunSpec::One(RunRef::Id(ids[0]))], &set(&[(" ", "v")]), &[]),
        Err(StoreError::EmptyLabelKey(_))
    ));
    let missing =
        store.relabel(&[RunSpec::One(RunRef::Id(ids[0])), RunSpec::One(RunRef::Id(99))], &[], &["note".into()]);
    assert!(matches!(missing, Err(StoreError::NotFound(_))), "{missing:?}");
    let run = store.get_without_records(&RunRef::Id(ids[0])).unwrap();
    assert_eq!((run.row.label("note"), run.summary.gpus), (Some("y"), Some(8)));

    // The GPUs' price an hour is set and forgotten the same way; a price must be above 0.
    store.relabel(&[RunSpec::One(RunRef::Id(ids[0]))], &set(&[("gpu_hour_cost", "2.49")]), &[]).unwrap();
    let run = store.get_without_records(&RunRef::Id(ids[0])).unwrap();
    assert_eq!((run.summary.gpu_hour_cost, run.row.gpu_hour_cost, run.summary.gpus), (Some(2.49), Some(2.49), Some(8)));
    for bad in ["0", "-1", "inf", "cheap"] {
        let e = store.relabel(&[RunSpec::One(RunRef::Id(ids[0]))], &set(&[("gpu_hour_cost", bad)]), &[]).unwrap_err();
        assert!(matches!(e, StoreError::BadCost(_)), "{bad}: {e}");
    }
    store.relabel(&[RunSpec::One(RunRef::Id(ids[0]))], &[], &["gpu_hour_cost".to_string()]).unwrap();
    assert_eq!(store.get_without_records(&RunRef::Id(ids[0])).unwrap().summary.gpu_hour_cost, None);
}
