//! `servebench import` and `servebench runs ...` against a store in a temporary folder.

use std::path::Path;
use std::process::ExitCode;

use serde_json::Value;
use tempfile::TempDir;

use crate::common::{report_file, run, try_run};

const REPORTS: [(&str, usize); 4] = [
    ("000-dense-models.txt", 11),
    ("001-prompt-sweep.txt", 23),
    ("003-sharegpt-percentiles.txt", 1),
    ("004-prefill-decode.txt", 2),
];

/// The run store's path in `dir`.
fn db_of(dir: &TempDir) -> String {
    dir.path().join("runs.db").to_string_lossy().into_owned()
}

fn json_lines(out: &str) -> Vec<Value> {
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

/// A store holding the four reference reports.
fn imported() -> (TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let db = db_of(&dir);
    let files: Vec<String> = REPORTS.iter().map(|(f, _)| report_file(f).to_string_lossy().into_owned()).collect();
    let mut args = vec!["import", "--db", &db];
    args.extend(files.iter().map(String::as_str));
    let out = run(&args);
    assert!(out.contains("000-dense-models.txt: added 11 runs (1-11)\n"), "{out}");
    assert!(out.contains("001-prompt-sweep.txt: added 23 runs (12-34)\n"), "{out}");
    assert!(out.contains("003-sharegpt-percentiles.txt: added 1 run (35)\n"), "{out}");
    assert!(out.contains("004-prefill-decode.txt: added 2 runs (36-37)\n"), "{out}");
    assert!(out.ends_with(&format!("Added 37 runs to {db}.\n")), "{out}");
    (dir, db)
}

fn label<'a>(run: &'a Value, key: &str) -> Option<&'a str> {
    run["labels"][key].as_str()
}

#[test]
fn importing_the_reference_reports_gives_one_run_per_block_with_their_labels() {
    let (_dir, db) = imported();
    let runs = json_lines(&run(&["runs", "list", "--db", &db, "--json"]));
    assert_eq!(runs.len(), 37);
    let ids: Vec<i64> = runs.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(ids, (1..=37).collect::<Vec<_>>());
    assert!(runs.iter().all(|r| r["kind"] == "import" && r["uid"].as_str().unwrap().len() == 8));

    let models: Vec<&str> = runs[..11].iter().map(|r| label(r, "model").unwrap()).collect();
    assert_eq!(models[0], "Qwen/Qwen3-8B");
    assert_eq!(models[10], "microsoft/Phi-4-mini-instruct");
    assert!(runs[..11].iter().all(|r| r["model"] == r["labels"]["model"] && r["max_concurrency"] == 4));
    assert_eq!(runs[0]["source_line"], 3);
    assert!(runs[0]["source_file"].as_str().unwrap().ends_with("000-dense-models.txt"));

    let sweep = &runs[11..34];
    let prompts: Vec<Option<&str>> = sweep.iter().map(|r| label(r, "num_prompts")).collect();
    let expected: Vec<Option<&str>> = ["1", "2", "4", "8", "16", "32", "64", "128", "256", "512", "1024", "2048"]
        .into_iter()
        .chain(["1", "2", "4", "8", "16", "32", "64"])
        .map(Some)
        .chain([None; 4])
        .collect();
    assert_eq!(prompts, expected);
    let seq: Vec<&str> = sweep.iter().map(|r| label(r, "seq_length").unwrap()).collect();
    assert_eq!(seq, [vec!["80"; 12], vec!["10000"; 11]].concat());
    assert!(sweep[19..].iter().all(|r| label(r, "num_prompt") == Some("1")));
    assert!(sweep.iter().all(|r| label(r, "heading") == Some("vllm")));

    assert_eq!(runs[34]["labels"], serde_json::json!({}));
    assert_eq!(runs[34]["p99_e2el_ms"], 73790.91);
    assert_eq!(label(&runs[35], "section"), Some("Prefill"));
    assert_eq!(label(&runs[36], "section"), Some("Decode"));
}

#[test]
fn imported_runs_given_their_gpus_compare_per_gpu_and_name_their_pareto_frontier() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_of(&dir);
    let file = report_file("000-dense-models.txt").to_string_lossy().into_owned();
    run(&["import", "--db", &db, "--gpus", "1", &file]);
    let out = run(&["compare", "--db", &db, "1-4", "--findings"]);
    // Run 4 (Qwen3-0.6B) gives 124.81 output tok/s on its one GPU.
    let row = out.lines().find(|l| l.starts_with("Output throughput per GPU (tok/s/GPU)")).expect(&out);
    assert!(row.contains("124.81"), "{row}");
    assert!(out.contains("- Pareto frontier of output tok/s per GPU against tok/s per user"), "{out}");
    let err = try_run(&["import", "--db", &db, "--gpus", "0", &file]).unwrap_err().to_string();
    assert!(err.contains("--gpus") && err.contains("0 is not in 1.."), "{err}");
}

#[test]
fn runs_imported_without_their_gpus_are_given_them_afterwards() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_of(&dir);
    let file = report_file("000-dense-models.txt").to_string_lossy().into_owned();
    run(&["import", "--db", &db, &file]);
    let out = run(&["compare", "--db", &db, "3", "4"]);
    assert!(!out.contains("per GPU"), "{out}");
    // Re-importing with --gpus adds nothing (the store holds those blocks): a label sets it.
    assert!(run(&["import", "--db", &db, "--gpus", "1", &file]).contains("added 0 runs"));
    let said = run(&["runs", "label", "--db", &db, "3-4", "--set", "gpus=1", "--set", "box=spark-1"]);
    assert_eq!(said, "Labelled runs 3, 4: set gpus=1, box=spark-1.\n");
    let out = run(&["compare", "--db", &db, "3", "4"]);
    let row = out.lines().find(|l| l.starts_with("Output throughput per GPU (tok/s/GPU)")).expect(&out);
    assert!(row.contains("124.81"), "{row}");
    let listed = json_lines(&run(&["runs", "list", "--db", &db, "--json", "--label", "box=spark-1"]));
    let per_gpu: Vec<(i64, &Value)> =
        listed.iter().map(|r| (r["gpus"].as_i64().unwrap(), &r["output_throughput_per_gpu"])).collect();
    assert_eq!(per_gpu.len(), 2);
    assert!(per_gpu.iter().all(|(n, v)| *n == 1 && v.as_f64().is_some()), "{per_gpu:?}");
    // With their price an hour, the runs cost per million output tokens: 5 an hour over
    // 124.81 tok/s (0.449 million tokens an hour) is 11.13.
    run(&["runs", "label", "--db", &db, "4", "--set", "gpu_hour_cost=5"]);
    let out = run(&["compare", "--db", &db, "3", "4"]);
    let row = out.lines().find(|l| l.starts_with("Cost per million output tokens ($/Mtok)")).expect(&out);
    assert!(row.contains("11.13"), "{row}");
    let err = try_run(&["compare", "--db", &db, "3", "4", "--fail-on", "cost_per_million_output_tokens>+1%"]);
    assert!(err.is_ok(), "run 3 has no price, so the rule has nothing to judge: {err:?}");
    // Removing the label forgets the count; a gpus that is no count, or no change, is refused.
    assert_eq!(run(&["runs", "label", "--db", &db, "4", "--unset", "gpus"]), "Labelled run 4: removed gpus.\n");
    assert!(!run(&["compare", "--db", &db, "4", "5"]).contains("per GPU"));
    let err = try_run(&["runs", "label", "--db", &db, "4", "--set", "gpus=H100"]).unwrap_err().to_string();
    assert!(err.contains("such as gpu=H100"), "{err}");
    let err = try_run(&["runs", "label", "--db", &db, "4"]).unwrap_err().to_string();
    assert!(err.contains("--set") && err.contains("--unset"), "{err}");
    let err = try_run(&["runs", "label", "--db", &db, "4", "--set", "gpus"]).unwrap_err().to_string();
    assert!(err.contains("use KEY=VALUE"), "{err}");
}

#[test]
fn importing_a_file_again_adds_nothing() {
    let (_dir, db) = imported();
    let out = run(&["import", "--db", &db, &report_file("004-prefill-decode.txt").to_string_lossy()]);
    assert!(out.contains("added 0 runs, skipped 2\n"), "{out}");
    assert!(out.contains("  skipped line 3: already in the store as run 36\n"), "{out}");
    assert!(out.contains("  skipped line 31: already in the store as run 37\n"), "{out}");
}

#[test]
fn a_missing_file_or_one_without_results_fails_the_command_but_not_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_of(&dir);
    let (code, out) = try_run(&[
        "import",
        "--db",
        &db,
        "/nonexistent/x.json",
        &report_file("003-sharegpt-percentiles.txt").to_string_lossy(),
    ])
    .unwrap();
    assert_eq!(code, ExitCode::FAILURE);
    assert!(out.contains("added 1 run (1)"), "{out}");
    // A file that holds no result at all fails the command too (importing one again, as
    // above, does not: its results are in the store already).
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "just some notes\n").unwrap();
    let (code, out) = try_run(&["import", "--db", &db, &notes.to_string_lossy()]).unwrap();
    assert_eq!(code, ExitCode::FAILURE, "{out}");
    assert!(out.contains("added 0 runs, skipped 1") && out.contains("no vLLM result block"), "{out}");
}

#[test]
fn a_folder_stands_for_its_files_and_fails_only_where_none_holds_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_of(&dir);
    let results = dir.path().join("results");
    std::fs::create_dir_all(results.join("older")).unwrap();
    for f in ["004-prefill-decode.txt", "003-sharegpt-percentiles.txt"] {
        std::fs::copy(report_file(f), results.join(f)).unwrap();
    }
    std::fs::copy(report_file("000-dense-models.txt"), results.join("older/000-dense-models.txt")).unwrap();
    std::fs::write(results.join("README.md"), "how these were run\n").unwrap();
    std::fs::write(results.join(".hidden.json"), "{}").unwrap();
    let (code, out) = try_run(&["import", "--db", &db, &results.to_string_lossy()]).unwrap();
    assert_eq!(code, ExitCode::SUCCESS, "{out}");
    // In path order, the subfolder's files too; the notes are named with their reason but fail
    // nothing; the hidden file is not read.
    let first = out.find("003-sharegpt-percentiles.txt: added 1 run (1)\n").expect(&out);
    let second = out.find("004-prefill-decode.txt: added 2 runs (2-3)\n").expect(&out);
    let third = out.find("older/000-dense-models.txt: added 11 runs (4-14)\n").expect(&out);
    assert!(first < second && second < third, "{out}");
    assert!(out.contains("README.md: added 0 runs, skipped 1"), "{out}");
    assert!(!out.contains(".hidden"), "{out}");
    assert!(out.ends_with(&format!("Added 14 runs to {db}.\n")), "{out}");
    // Again: every result is in the store already, which is no failure.
    let (code, out) = try_run(&["import", "--db", &db, &results.to_string_lossy()]).unwrap();
    assert_eq!(code, ExitCode::SUCCESS, "{out}");
    assert!(out.ends_with(&format!("Added 0 runs to {db}.\n")), "{out}");
    // A folder with no result in any file, or with no file at all, fails the command.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (code, _) = try_run(&["import", "--db", &db, &empty.to_string_lossy()]).unwrap();
    assert_eq!(code, ExitCode::FAILURE);
    std::fs::write(empty.join("notes.txt"), "just some notes\n").unwrap();
    let (code, out) = try_run(&["import", "--db", &db, &empty.to_string_lossy()]).unwrap();
    assert_eq!(code, ExitCode::FAILURE, "{out}");
    assert!(out.contains("notes.txt: added 0 runs, skipped 1"), "{out}");
    // A command whose files hold no run creates no store.
    let fresh = dir.path().join("fresh.db");
    let (code, out) = try_run(&["import", "--db", &fresh.to_string_lossy(), &empty.to_string_lossy()]).unwrap();
    assert_eq!(code, ExitCode::FAILURE, "{out}");
    assert!(out.ends_with(&format!("Added no run; {} was not opened.\n", fresh.display())), "{out}");
    assert!(!fresh.exists());
}

#[test]
fn list_filters_by_labels_model_kind_and_limit() {
    let (_dir, db) = imported();
    let ids = |args: &[&str]| -> Vec<i64> {
        let mut all = vec!["runs", "list", "--db", &db, "--json"];
        all.extend_from_slice(args);
        json_lines(&run(&all)).iter().map(|r| r["id"].as_i64().unwrap()).collect()
    };
    assert_eq!(ids(&["--label", "seq_length=80", "--label", "num_prompts=2048"]), [23]);
    assert_eq!(ids(&["--label", "num_prompt"]), [31, 32, 33, 34]);
    assert_eq!(ids(&["--model", "GEMMA"]), [7, 8, 9]);
    assert_eq!(ids(&["--limit", "2"]), [36, 37]);
    assert_eq!(ids(&["--kind", "bench"]), Vec::<i64>::new());
    assert_eq!(ids(&["--since", "1d"]).len(), 37);
    assert_eq!(ids(&["--until", "2000-01-01"]), Vec::<i64>::new());

    let table = run(&["runs", "list", "--db", &db, "--label", "section=Decode"]);
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(table.starts_with("ID  UID") && table.contains("section=Decode"), "{table}");
    assert!(try_run(&["runs", "list", "--db", &db, "--since", "soon"]).is_err());
    let err = try_run(&["runs", "list", "--db", &db, "--label", "=H100"]).unwrap_err();
    assert!(err.to_string().contains("--label \"=H100\": the label's key is empty"), "{err}");
    let err = try_run(&["runs", "list", "--db", &db, "--since", "2025-06-01", "--until", "2025-05-01"]).unwrap_err();
    assert!(err.to_string().contains("--since 2025-06-01 is not before --until 2025-05-01"), "{err}");
    let err = try_run(&["runs", "list", "--db", &db, "--limit", "0"]).unwrap_err();
    assert!(err.to_string().contains("0 is not in 1.."), "{err}");
}

#[test]
fn show_prints_the_block_and_the_labels() {
    let (_dir, db) = imported();
    let out = run(&["runs", "show", "--db", &db, "36"]);
    assert!(out.starts_with("Run 36 ("), "{out}");
    assert!(out.contains("Labels:      section=Prefill\n"), "{out}");
    assert!(out.contains("Total input tokens:                      4193792   \n"), "{out}");
    let uid = json_lines(&run(&["runs", "list", "--db", &db, "--json", "--limit", "1"]))[0]["uid"].clone();
    let shown: Value =
        serde_json::from_str(&run(&["runs", "show", "--db", &db, "--json", uid.as_str().unwrap()])).unwrap();
    assert_eq!(shown["id"], 37);
    assert_eq!(shown["summary"]["total_output_tokens"], 65536);
    let err = try_run(&["runs", "show", "--db", &db, "99"]).unwrap_err();
    assert!(err.to_string().contains("no run 99"), "{err}");
}

#[test]
fn rm_removes_all_named_runs_or_none() {
    let (_dir, db) = imported();
    assert!(try_run(&["runs", "rm", "--db", &db, "1", "99"]).is_err());
    assert_eq!(run(&["runs", "rm", "--db", &db, "1", "2"]), "Removed runs 1, 2.\n");
    let ids: Vec<i64> =
        json_lines(&run(&["runs", "list", "--db", &db, "--json"])).iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), 35);
    assert_eq!(ids[0], 3);
}

#[test]
fn export_writes_csv_and_json_lines() {
    let (dir, db) = imported();
    let csv = dir.path().join("runs.csv");
    let out = run(&["runs", "export", "--db", &db, "--label", "section", "-o", &csv.to_string_lossy()]);
    assert_eq!(out, format!("Wrote 2 runs to {}.\n", csv.display()));
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].starts_with("id,uid,kind,created_at,") && lines[0].ends_with(",label:section"), "{}", lines[0]);
    assert!(lines[1].ends_with(",Prefill") && lines[2].ends_with(",Decode"), "{text}");
    // Pasted reports scraped no GPU exporter: their energy columns are empty, in both formats.
    assert!(lines[0].contains(",gpu_energy_j,output_tokens_per_joule,label:"), "{}", lines[0]);
    assert!(lines[1].ends_with(",,,Prefill"), "{text}");

    let json = json_lines(&run(&["runs", "export", "--db", &db, "--format", "json", "--model", "phi-4"]));
    assert_eq!(json.len(), 2);
    assert_eq!(json[0]["summary"]["completed"], 20);

    let err = try_run(&["runs", "export", "--db", &db, "--requests", "1"]).unwrap_err();
    assert!(err.to_string().contains("no per-request records"), "{err}");
    assert!(try_run(&["runs", "export", "--db", &db, "--requests", "1", "--label", "a=b"]).is_err());
    // A failed export leaves no file behind.
    let none = dir.path().join("requests.csv");
    assert!(try_run(&["runs", "export", "--db", &db, "--requests", "1", "-o", &none.to_string_lossy()]).is_err());
    assert!(!none.exists());
}

#[test]
fn the_requests_of_an_imported_result_file_are_exported() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_of(&dir);
    let file = dir.path().join("vllm-result.json");
    let doc = serde_json::json!({
        "date": "20250601-120000", "backend": "vllm", "model_id": "m/x", "num_prompts": 2, "request_rate": "inf",
        "max_concurrency": null, "duration": 1.0, "completed": 1, "failed": 1, "total_input_tokens": 10,
        "total_output_tokens": 3, "request_throughput": 1.0,
        "input_lens": [10, 10], "output_lens": [3, 0], "ttfts": [0.1, 0.0], "itls": [[0.02, 0.03], []],
        "latencies": [0.15, 0.0], "start_times": [100.5, 100.25], "errors": ["", "Bad Request"],
        "mean_ttft_ms": 100.0, "median_ttft_ms": 100.0, "p99_ttft_ms": 100.0, "team": "perf"
    });
    // Two runs of the same requests (a file appended to twice holds one run once).
    let mut again = doc.clone();
    again["duration"] = serde_json::json!(1.5);
    std::fs::write(&file, format!("{doc}\n{again}")).unwrap();
    let out = run(&["import", "--db", &db, &file.to_string_lossy()]);
    assert!(out.contains("added 2 runs (1-2)"), "{out}");
    let csv = run(&["runs", "export", "--db", &db, "--requests", "2"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "{csv}");
    assert!(lines[0].starts_with("seq,index,planned_s,arrival_s,start_s,ttft_ms,e2el_ms,"), "{}", lines[0]);
    assert!(lines[1].starts_with("0,0,0.25,0.25,0.25,100.0,150.0,"), "{}", lines[1]);
    assert!(lines[1].ends_with(",100 120 150"), "{}", lines[1]);
    assert!(lines[2].contains(",http_status,Bad Request,"), "{}", lines[2]);
    let listed = json_lines(&run(&["runs", "list", "--db", &db, "--json", "--label", "team=perf"]));
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["num_requests"], 2);
    assert_eq!(listed[0]["chunk_times"], "all");
    assert_eq!(listed[0]["gpu_energy_j"], serde_json::Value::Null, "no GPU exporter was scraped");

    // The same requests as a trace for Perfetto: one JSON object, a slice per request.
    let trace: serde_json::Value =
        serde_json::from_str(&run(&["runs", "export", "--db", &db, "--requests", "2", "--format", "trace"])).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let named = |name: &str| events.iter().find(|e| e["name"] == name).unwrap_or_else(|| panic!("{name}: {trace}"));
    assert_eq!(named("process_name")["args"]["name"], "run 2: m/x");
    let ok = named("request 0");
    assert_eq!((ok["ts"].as_f64(), ok["dur"].as_f64()), (Some(250_000.0), Some(150_000.0)));
    assert_eq!(ok["args"]["ttft_ms"], 100.0);
    assert_eq!(named("request 1 failed")["args"]["failure"], "http_status: Bad Request");
    let err = try_run(&["runs", "export", "--db", &db, "--format", "trace"]).unwrap_err();
    assert!(err.to_string().contains("add --requests ID"), "{err}");
}

/// An export or a report written where the run store is would replace every run in it.
#[test]
fn an_output_path_that_is_the_store_is_refused_and_the_store_kept() {
    let (dir, db) = imported();
    for argv in [&["runs", "export", "--db", &db, "-o", &db][..], &["report", "--db", &db, "--all", "-o", &db][..]] {
        let err = try_run(argv).expect_err("refused");
        assert!(err.to_string().contains("choose another output path"), "{argv:?}: {err}");
    }
    assert_eq!(json_lines(&run(&["runs", "export", "--db", &db, "--format", "json"])).len(), 37);
    drop(dir);
}

#[test]
fn reading_commands_do_not_create_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_of(&dir);
    let listed = run(&["runs", "list", "--db", &db]);
    assert!(listed.starts_with("there is no run store at ") && listed.ends_with("(or pass --db PATH).\n"), "{listed}");
    assert_eq!(run(&["runs", "list", "--db", &db, "--json"]), "");
    let err = try_run(&["runs", "show", "--db", &db, "1"]).unwrap_err();
    assert!(err.to_string().contains("no run store at"), "{err}");
    assert!(!Path::new(&db).exists());
    // An empty file is left as it is, not turned into a store.
    std::fs::write(&db, "").unwrap();
    assert!(run(&["runs", "list", "--db", &db]).starts_with("there is no run store at "));
    assert_eq!(std::fs::metadata(&db).unwrap().len(), 0);
}

#[test]
fn main_entry_runs_the_store_commands() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_of(&dir);
    let file = report_file("003-sharegpt-percentiles.txt");
    let args = ["servebench", "import", "--db", &db, &file.to_string_lossy()].map(std::ffi::OsString::from);
    assert_eq!(servebench::main_entry(args), ExitCode::SUCCESS);
    let args = ["servebench", "runs", "show", "--db", &db, "1"].map(std::ffi::OsString::from);
    assert_eq!(servebench::main_entry(args), ExitCode::SUCCESS);
    let args = ["servebench", "runs", "rm", "--db", &db].map(std::ffi::OsString::from);
    assert_eq!(servebench::main_entry(args), ExitCode::from(2));
}
