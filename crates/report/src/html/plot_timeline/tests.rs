use super::*;
use crate::testutil::Synth;
use servebench_core::record::{Failure, FailureKind, Usage};

/// A request sent at `start_ms` whose token chunks came at these times, ms after it was sent.
fn record(index: u32, start_ms: u64, chunks_ms: &[f64]) -> RequestRecord {
    let chunks_us: Vec<u32> = chunks_ms.iter().map(|ms| (ms * 1000.0).round() as u32).collect();
    RequestRecord {
        index,
        start_ns: start_ms * 1_000_000,
        arrival_ns: 0,
        end_us: chunks_us.last().copied().unwrap_or(0) + 100,
        usage: Usage { prompt_tokens: Some(64), completion_tokens: Some(chunks_us.len() as u32) },
        chunks_us,
        status: 200,
        ..RequestRecord::default()
    }
}

fn page_of(records: &[RequestRecord]) -> String {
    timeline_page(&TimelinePage {
        title: "Qwen/Qwen3-8B <sim>",
        meta: "20 requests",
        records,
        thresholds_ms: [25.0, 50.0],
    })
}

/// The `<g class="request">` rows of the page's timeline.
fn rows(html: &str) -> Vec<&str> {
    html.split("<g class=\"request\"").skip(1).map(|g| &g[..g.find("</g>").unwrap()]).collect()
}

#[test]
fn token_gaps_are_classed_by_the_thresholds_and_runs_of_a_class_are_one_segment() {
    // First token at 100 ms, then gaps of 10, 10, 30, 60, 49.9, 50 and 10 ms.
    let r = record(3, 1000, &[100.0, 110.0, 120.0, 150.0, 210.0, 259.9, 309.9, 319.9]);
    let s = itl_span(&r, [25.0, 50.0]);
    let at = |ms: f64| 1.0 + ms * 1e-3;
    let want = [(at(120.0), 2), (at(150.0), 3), (at(210.0), 4), (at(259.9), 3), (at(309.9), 4), (at(319.9), 2)];
    assert_eq!(s.decode.len(), want.len(), "{:?}", s.decode);
    for ((got, phase), (until, class)) in s.decode.iter().zip(want) {
        assert!((got - until).abs() < 1e-9 && *phase == class, "{:?}", s.decode);
    }
    assert_eq!(s.first, Some(at(100.0)));
    assert!(s.tip.contains("64 prompt tokens, 8 output tokens"), "{}", s.tip);
    assert!(s.tip.contains("2 of 7 token gaps at or above 50 ms"), "{}", s.tip);
    // Other thresholds, other classes: all seven gaps below 100 ms are one segment.
    assert_eq!(itl_span(&r, [100.0, 200.0]).decode, vec![(at(319.9), 2)]);
}

#[test]
fn the_page_draws_every_sent_request_with_the_legend_of_its_thresholds() {
    let mut records = vec![record(0, 0, &[100.0, 110.0, 170.0]), record(1, 5, &[90.0, 120.0])];
    let mut failed = record(2, 10, &[]);
    failed.failure = Some(Failure { kind: FailureKind::HttpStatus, message: "500".into() });
    records.push(failed);
    let mut not_sent = record(3, 0, &[]);
    not_sent.failure = Some(Failure { kind: FailureKind::NotSent, message: "interrupted".into() });
    records.push(not_sent);
    let html = page_of(&records);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<title>Qwen/Qwen3-8B &lt;sim&gt;</title>"), "the title is escaped");
    for label in ["ITL &lt; 25 ms", "25 ms \u{2264} ITL &lt; 50 ms", "ITL \u{2265} 50 ms", "time to first token"] {
        assert!(html.contains(label), "{label}");
    }
    let rows = rows(&html);
    assert_eq!(rows.len(), 3, "the request never sent has no row");
    // Request 0: TTFT, a green gap (10 ms), a red one (60 ms); request 1 waited 5 ms for a
    // slot, then TTFT and an orange gap; request 2 waited 10 ms and failed.
    let fills = |row: &str| -> Vec<String> {
        row.split("fill=\"").skip(1).map(|f| f[..f.find('"').unwrap()].to_string()).collect()
    };
    assert_eq!(fills(rows[0]), [TTFT_COLOUR, ITL_COLOURS[0], ITL_COLOURS[2]]);
    assert_eq!(fills(rows[1]), ["#bbbbbb", TTFT_COLOUR, ITL_COLOURS[1]]);
    assert_eq!(fills(rows[2]), ["#bbbbbb", "#222222"]);
    assert!(rows[2].contains("request 2: failed after"));
    assert!(html.contains("all 3 requests"));
}

#[test]
fn token_gaps_narrower_than_a_pixel_are_drawn_together_in_the_worst_class() {
    // One request of 2,000 gaps alternating 10 and 60 ms over two minutes, beside a short one:
    // each gap is far narrower than a pixel.
    let mut chunks = vec![100.0];
    for k in 0..2000 {
        chunks.push(chunks.last().unwrap() + if k % 2 == 0 { 10.0 } else { 60.0 });
    }
    let long = record(0, 0, &chunks);
    assert_eq!(itl_span(&long, [25.0, 50.0]).decode.len(), 2000, "every gap changes class");
    let html = page_of(&[long, record(1, 0, &[100.0, 110.0])]);
    let row = rows(&html)[0];
    let shapes = row.matches("<rect").count();
    assert!(shapes < 700, "{shapes} shapes for one row of 2,000 gaps");
    assert!(row.contains(ITL_COLOURS[2]) && !row.contains(ITL_COLOURS[0]), "the slow gaps show");
}

#[test]
fn a_long_run_is_thinned_to_the_most_rows_and_says_so() {
    let requests = MAX_PLOT_TIMELINE + 1;
    let run = Synth { requests, concurrency: 64, tokens: 3, ..Synth::new("m", 1) }.run();
    let html = page_of(&run.records);
    let shown = requests.div_ceil(2);
    assert_eq!(rows(&html).len(), shown);
    assert!(html.contains(&format!("{shown} of its {requests} requests (one in 2, by send time)")), "{html}");
    let all = page_of(&run.records[..MAX_PLOT_TIMELINE]);
    assert_eq!(rows(&all).len(), MAX_PLOT_TIMELINE);
}
