//! `servebench selftest` in-process at small levels: the table's columns, figures that are
//! finite and non-negative, `--json` that parses, the level runs in the run store, and the
//! table's format from fixed figures.

use std::process::ExitCode;

use clap::Parser;
use servebench::cli::{Cli, Command};
use servebench::commands::selftest::{render_table, run};
use servebench::output::Sink;
use servebench_client::selftest::{ErrorStats, LevelResult, SelftestReport};

/// `selftest ARGS` at levels 1 and 20, few tokens, short timings, run into a memory sink.
async fn selftest(extra: &[&str], db: &std::path::Path) -> String {
    let argv =
        ["servebench", "selftest", "--levels", "1,20", "--output-tokens", "5", "--ttft-ms", "5", "--itl-ms", "2"];
    let db = db.to_str().unwrap();
    let cli = Cli::try_parse_from(argv.iter().chain(&["--db", db]).chain(extra)).unwrap_or_else(|e| panic!("{e}"));
    let Command::Selftest(args) = cli.command else { panic!("not selftest") };
    let out = Sink::memory();
    let code = run(args, &out).await.unwrap();
    assert_eq!(code, ExitCode::SUCCESS);
    out.text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_levels_print_one_row_each_with_sane_figures() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let table = selftest(&[], &db).await;
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("Client self-test: scripted server TTFT 5 ms, ITL 2 ms, 5 tokens"), "{table}");
    let header: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "streams", "requests", "failed", "TTFT", "mean", "TTFT", "p99", "ITL", "mean", "ITL", "p99", "CPU",
            "us/ev", "lag", "p99", "ms", "health"
        ]
    );
    assert_eq!(lines.len(), 5, "{table}");
    for (row, streams) in lines[2..4].iter().zip([1, 20]) {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[0], streams.to_string(), "{row}");
        assert_eq!(cells[1], "50", "at least 50 requests a level: {row}");
        assert_eq!(cells[2], "0", "no request failed: {row}");
        for (i, cell) in cells[3..9].iter().enumerate() {
            let v: f64 = cell.parse().unwrap_or_else(|_| panic!("column {} of {row}", i + 3));
            assert!(v.is_finite() && v >= 0.0, "column {} of {row}", i + 3);
        }
        // A loaded debug build may lag, but the client cannot measure tens of ms of error here.
        let ttft_mean: f64 = cells[3].parse().unwrap();
        assert!(ttft_mean < 50.0, "{row}");
        assert!(cells[9] == "ok" || cells[9] == "client-bound", "{row}");
    }
    assert!(lines[4].contains("within 1 ms of mean TTFT error"), "{table}");
    // Each level's run went to the store, labelled with its streams.
    let store = servebench_store::Store::open(&db).unwrap();
    assert_eq!(store.list(&Default::default()).unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_parses_and_holds_every_level() {
    let dir = tempfile::tempdir().unwrap();
    let text = selftest(&["--json", "--no-store"], &dir.path().join("runs.db")).await;
    let report: SelftestReport = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(report.levels.iter().map(|l| l.streams).collect::<Vec<_>>(), [1, 20]);
    for l in &report.levels {
        assert_eq!((l.requests, l.succeeded), (50, 50));
        // 50 requests of 5 chunks, and a one-chunk warm-up per stream.
        assert_eq!(l.events, 250 + l.streams as u64);
        assert!(l.server_in_flight_max >= 1 && l.server_in_flight_max <= l.streams);
        for e in [l.ttft_error, l.itl_error] {
            assert!(e.mean_ms.is_finite() && e.mean_ms >= 0.0 && e.p99_ms >= 0.0);
        }
        assert!(l.cpu_us_per_event.is_some_and(|c| c.is_finite() && c > 0.0), "{l:?}");
        assert!(l.health.is_some() && l.dispatch_lag_p99_ms.is_some());
    }
    assert!(!dir.path().join("runs.db").exists(), "--no-store wrote the store");
}

#[test]
fn the_table_format_from_fixed_figures() {
    let level = |streams: usize, ttft: f64, failed: usize| LevelResult {
        streams,
        requests: 2 * streams,
        succeeded: 2 * streams - failed,
        server_in_flight_max: streams,
        events: 200 * streams as u64,
        ttft_error: ErrorStats { mean_ms: ttft, p99_ms: 3.0 * ttft },
        itl_error: ErrorStats { mean_ms: 0.05, p99_ms: 0.4 },
        cpu_us_per_event: (streams > 1).then_some(14.25),
        dispatch_lag_p99_ms: Some(0.12),
        health: None,
        wall_s: 2.0,
    };
    let report = SelftestReport {
        ttft_ms: 50.0,
        itl_ms: 10.0,
        output_tokens: 100,
        cores: 2,
        levels: vec![level(1, 0.2, 0), level(1000, 0.9, 0), level(4096, 31.5, 3)],
        within_1ms_streams: Some(1000),
    };
    insta::assert_snapshot!(render_table(&report));
}
