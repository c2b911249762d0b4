//! Tests of the HTML report: the page's outline for a sweep and for two runs, the embedded
//! data, escaping and the choice of the timeline run; `browser` renders pages in Chromium.

use servebench_core::metrics::Summary;

use super::*;
use crate::pareto::Trade;
use crate::testutil::*;

mod browser;

fn options() -> HtmlOptions {
    HtmlOptions {
        title: "Test report".into(),
        generator: format!("servebench {}", env!("CARGO_PKG_VERSION")),
        generated_at: Some("2026-01-02 03:04".into()),
        ..HtmlOptions::default()
    }
}

/// Two measured runs, the second slower, both with records.
pub(super) fn measured_pair() -> Vec<StoredRun> {
    let a = Synth { requests: 80, fail_every: Some(40), ..Synth::new("org/model", 1) };
    let b = Synth { requests: 80, ttft_ms: 140.0, itl_ms: 25.0, ..Synth::new("org/model", 2) };
    stored(&[a.new_run().with_label("build", "old"), b.new_run().with_label("build", "new")])
}

/// The page's outline: its elements by depth with their id and class, the text of headings,
/// list items and captions, tables by their size, and charts by what they draw.
fn outline(html: &str) -> String {
    let mut out = String::new();
    let mut depth = 0usize;
    let mut rest = html;
    let mut skip_until: Option<&str> = None;
    while let Some(open) = rest.find('<') {
        let close = rest[open..].find('>').map(|c| open + c).expect("a tag ends");
        let tag = &rest[open + 1..close];
        let after = &rest[close + 1..];
        let text_end = after.find('<').unwrap_or(after.len());
        let text = after[..text_end].trim();
        rest = after;
        if let Some(end) = skip_until {
            if tag == end {
                skip_until = None;
                depth -= 1;
            }
            continue;
        }
        if tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            if !matches!(name, "td" | "th" | "tr" | "thead" | "tbody" | "caption" | "li" | "title" | "figcaption") {
                depth = depth.saturating_sub(1);
            }
            continue;
        }
        let name = tag.split_whitespace().next().unwrap_or("").trim_end_matches('/');
        let attr = |key: &str| {
            let pat = format!("{key}=\"");
            tag.find(&pat).map(|i| {
                let v = &tag[i + pat.len()..];
                v[..v.find('"').unwrap_or(v.len())].to_string()
            })
        };
        let mut line = name.to_string();
        if let Some(id) = attr("id") {
            line.push_str(&format!("#{id}"));
        }
        if let Some(class) = attr("class") {
            line.push_str(&format!(".{}", class.replace(' ', ".")));
        }
        if let Some(t) = attr("type") {
            line.push_str(&format!(" type={t}"));
        }
        let void = matches!(name, "meta" | "br") || tag.ends_with('/');
        match name {
            "svg" => {
                let end = rest.find("</svg>").expect("svg ends");
                let inner = &rest[..end];
                let count = |p: &str| inner.matches(p).count();
                line.push_str(&format!(
                    " [{} series, {} legend entries, {} markers, {} bars, {} requests, {} axis labels]",
                    count("<g class=\"series\""),
                    count("class=\"legend-item\""),
                    count("<circle"),
                    count("<g class=\"bar\""),
                    count("<g class=\"request\""),
                    count("class=\"axis-label\"")
                ));
                skip_until = Some("/svg");
            }
            "table" => {
                let end = rest.find("</table>").expect("table ends");
                let inner = &rest[..end];
                let caption = inner
                    .find("<caption>")
                    .map(|i| inner[i + 9..i + inner[i..].find("</caption>").unwrap_or(9)].to_string());
                line.push_str(&format!(
                    " [{} columns, {} rows{}]",
                    inner.find("</tr>").map_or(0, |e| inner[..e].matches("<th").count()),
                    inner.matches("<tr>").count().saturating_sub(1),
                    caption.map_or(String::new(), |c| format!(", caption {c:?}"))
                ));
                skip_until = Some("/table");
            }
            "style" | "script" => {
                let end = format!("</{name}>");
                let at = rest.find(&end).expect("the element ends");
                line.push_str(&format!(" [{} bytes]", at));
                skip_until = Some(if name == "style" { "/style" } else { "/script" });
            }
            "td" | "th" | "tr" | "thead" | "tbody" | "caption" => continue,
            _ => {
                if !text.is_empty() && matches!(name, "h1" | "h2" | "li" | "p" | "figcaption" | "title" | "a") {
                    line.push_str(&format!(": {text}"));
                }
            }
        }
        out.push_str(&"  ".repeat(depth));
        out.push_str(&line);
        out.push('\n');
        let closes_itself = void || matches!(name, "li" | "title" | "figcaption");
        if !closes_itself {
            depth += 1;
        }
    }
    out
}

fn volatile() -> Vec<(&'static str, &'static str)> {
    vec![
        (r"servebench \d+\.\d+\.\d+(-[0-9A-Za-z.]+)?", "servebench [VERSION]"),
        (r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", "[DATE]"),
        (r"\[\d+ bytes\]", "[N bytes]"),
    ]
}

#[test]
fn the_page_of_the_001_sweep() {
    let html = render(&reference_001(), &options()).unwrap();
    insta::with_settings!({ filters => volatile() }, {
        insta::assert_snapshot!("001_outline", outline(&html));
    });
    // The throughput chart: two series along num_prompts, the 12 and 7 points of each.
    let chart = &html[html.find("id=\"chart-output\"").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert_eq!(chart.matches("<circle").count(), 19);
    assert!(chart.contains(">Output throughput (tok/s)</text>") && chart.contains(">num_prompts</text>"));
    for tick in ["1", "2", "64", "2048"] {
        assert!(chart.contains(&format!("text-anchor=\"middle\">{tick}</text>")), "tick {tick}");
    }
    assert!(chart.contains("data-value=\"seq_length=80: num_prompts=2048, 438.42 tok/s\""));
    // TTFT reaches 400 s, so it is charted in seconds on a log scale.
    let ttft = &html[html.find("id=\"chart-ttft\"").unwrap()..];
    assert!(ttft.contains(">Median TTFT (s)</text>"));
    assert!(ttft.contains(">1000</text>") && ttft.contains(">0.1</text>"));
    assert!(html.contains("None of these runs has per-request records"));
}

#[test]
fn runs_that_know_their_gpus_chart_throughput_per_gpu_against_interactivity() {
    assert!(!render(&reference_001(), &options()).unwrap().contains("chart-pareto"), "no GPU counts, no chart");
    let mut runs = reference_001();
    for run in &mut runs {
        run.summary.gpus = Some(2);
    }
    let html = render(&runs, &options()).unwrap();
    let chart = &html[html.find("id=\"chart-pareto\"").unwrap()..];
    let (chart, caption) = chart.split_at(chart.find("</svg>").unwrap());
    // A marker per run (the 12 and 7 of the two series and 4 outside them), a line per series
    // (or name outside them), and the frontier's line without markers.
    assert_eq!(chart.matches("<circle").count(), 23);
    let layout = Layout::new(&runs, None).unwrap();
    let mut owners: Vec<String> = (0..runs.len()).map(|i| crate::pareto::owner(&layout, i)).collect();
    owners.sort();
    owners.dedup();
    assert_eq!(chart.matches("<path").count(), owners.len() + 1);
    assert!(chart.contains(">Interactivity (tok/s/user)</text>"));
    assert!(chart.contains(">Output throughput per GPU (tok/s/GPU)</text>"));
    assert!(chart.contains("data-value=\"Pareto frontier\""));
    // The caption names the runs on the frontier: each is beaten by none of the others.
    let on = Trade::PerGpu.frontier(&Trade::PerGpu.points(&runs));
    assert!(!on.is_empty());
    let mut ids: Vec<i64> = on.iter().map(|p| runs[p.index].row.id).collect();
    ids.sort_unstable();
    let caption = &caption[..caption.find("</figcaption>").unwrap()];
    assert!(
        caption.contains(&format!("Runs {} are on the Pareto frontier", crate::compare::ranges(&ids))),
        "{caption}"
    );
}

#[test]
fn runs_that_know_their_price_chart_cost_against_interactivity() {
    let mut runs = reference_001();
    for run in &mut runs {
        run.summary.gpus = Some(2);
    }
    let html = render(&runs, &options()).unwrap();
    assert!(html.contains("chart-pareto") && !html.contains("chart-cost"), "GPU counts without a price: no cost chart");
    // Two prices: the cheaper GPUs win where they serve as much per GPU.
    for (i, run) in runs.iter_mut().enumerate() {
        run.summary.gpu_hour_cost = (i != 0).then_some(if i % 2 == 0 { 2.0 } else { 3.0 });
    }
    let html = render(&runs, &options()).unwrap();
    let chart = &html[html.find("id=\"chart-cost\"").unwrap()..];
    let (chart, caption) = chart.split_at(chart.find("</svg>").unwrap());
    // A marker for every run with a price (all but the first).
    assert_eq!(chart.matches("<circle").count(), runs.len() - 1);
    assert!(chart.contains(">Cost per million output tokens ($/Mtok)</text>"));
    assert!(chart.contains(">Interactivity (tok/s/user)</text>"));
    let on = Trade::Cost.frontier(&Trade::Cost.points(&runs));
    assert!(!on.is_empty() && on.iter().all(|p| p.index != 0));
    // Along the frontier, more tok/s per user costs more.
    assert!(on.windows(2).all(|w| w[0].user < w[1].user && w[0].y < w[1].y), "{on:?}");
    let mut ids: Vec<i64> = on.iter().map(|p| runs[p.index].row.id).collect();
    ids.sort_unstable();
    let caption = &caption[..caption.find("</figcaption>").unwrap()];
    assert!(caption.contains("down and to the right is better"), "{caption}");
    assert!(
        caption.contains(&format!("Runs {} are on the Pareto frontier", crate::compare::ranges(&ids))),
        "{caption}"
    );
}

#[test]
fn the_page_of_two_measured_runs() {
    let runs = measured_pair();
    let html = render(&runs, &options()).unwrap();
    insta::with_settings!({ filters => volatile() }, {
        insta::assert_snapshot!("pair_outline", outline(&html));
    });
    for id in ["cdf-ttft", "cdf-tpot", "cdf-itl", "cdf-e2el", "chart-timeline", "chart-tokens", "chart-inflight"] {
        assert!(html.contains(&format!("<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{id}\"")), "{id}");
    }
    // Every request of run 1 on its timeline; its two failures drawn as such.
    let timeline = &html[html.find("id=\"chart-timeline\"").unwrap()..];
    let timeline = &timeline[..timeline.find("</svg>").unwrap()];
    assert_eq!(timeline.matches("<g class=\"request\"").count(), 80);
    // Each in its tooltip and its `data-value`.
    assert_eq!(timeline.matches(": failed after").count(), 2 * 2);
    // The output tokens over time add up to the run's.
    let tokens = &html[html.find("id=\"chart-tokens\"").unwrap()..];
    assert!(tokens.contains(">Output throughput (tok/s)</text>"));
}

#[test]
fn the_page_embeds_every_summary_and_needs_no_network() {
    let runs = reference_000();
    let html = render(&runs, &options()).unwrap();
    let start = html.find("<script type=\"application/json\" id=\"servebench-runs\">").unwrap();
    let json = &html[html[start..].find('>').unwrap() + start + 1..];
    let json = &json[..json.find("</script>").unwrap()];
    let data: Vec<Value> = serde_json::from_str(json).unwrap();
    assert_eq!(data.len(), 11);
    for (d, run) in data.iter().zip(&runs) {
        assert_eq!(d["id"], run.row.id);
        assert_eq!(d["labels"]["model"], run.row.model.clone().unwrap());
        let summary: Summary = serde_json::from_value(d["summary"].clone()).unwrap();
        assert_eq!(summary, run.summary);
    }
    // Nothing is fetched: the only URL is the SVG namespace.
    let without_ns = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for needle in ["http:", "https:", "src=", "<link", "@import", "url(", "<img", "<iframe"] {
        assert!(!without_ns.contains(needle), "{needle}");
    }
    // No E2EL in these reports: bars for throughput, TTFT and TPOT per run.
    assert_eq!(html.matches("<g class=\"bar\"").count(), 33);
}

#[test]
fn text_from_the_store_is_escaped() {
    let mut runs = measured_pair();
    runs[0].row.labels.push(("note".into(), "</script><b>\"x\" & y".into()));
    let html = render(&runs, &options()).unwrap();
    assert!(!html.contains("<b>\"x\""));
    assert!(html.contains("&lt;/script&gt;&lt;b&gt;&quot;x&quot; &amp; y"));
    assert!(html.contains(r#""note":"\u003c/script\u003e\u003cb\u003e\"x\" \u0026 y""#));
}

#[test]
fn the_timeline_run_can_be_chosen() {
    let runs = measured_pair();
    let html = render(&runs, &HtmlOptions { timeline_run: Some(2), ..options() }).unwrap();
    assert!(html.contains("<title id=\"chart-timeline-title\">Requests of run 2</title>"));
    assert!(html.contains("<figcaption>Each row is a request of run 2 (build=new), all 80 requests: "));
    let err = render(&runs, &HtmlOptions { timeline_run: Some(9), ..options() }).unwrap_err();
    assert!(err.to_string().starts_with("--timeline 9: it is not among the runs of the report"), "{err}");
    let mut mixed = reference_000();
    mixed.truncate(1);
    mixed.push(runs[0].clone());
    let err = render(&mixed, &HtmlOptions { timeline_run: Some(1), ..options() }).unwrap_err();
    assert!(err.to_string().contains("it has no per-request records"), "{err}");
}

#[test]
fn predicted_points_carry_their_band_and_measured_ones_none() {
    // The 80-token sweep of 001, its first half marked as predicted on a device whose band is
    // -10 % .. +25 %: those points get a band bar, the measured ones none.
    let mut runs = reference_001_short();
    let uncertainty = serde_json::json!({
        "simulated": {"hardware": {"uncertainty": {
            "source": "test", "ttft": [-0.1, 0.25], "tpot": [-0.1, 0.25], "throughput": [-0.1, 0.25]
        }}}
    });
    for r in runs.iter_mut().take(6) {
        r.environment = Some(uncertainty.clone());
    }
    let html = render(&runs, &options()).unwrap();
    let chart = &html[html.find("id=\"chart-output\"").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert_eq!(chart.matches("class=\"band\"").count(), 6, "{chart}");
    // num_prompts=1 measured 10.7 tok/s (report 001): the band is 10.7/1.25 .. 10.7/0.9.
    let first = runs.iter().find(|r| r.row.label("num_prompts") == Some("1")).unwrap();
    let v = first.summary.output_throughput.unwrap();
    let text = format!("predicted range {:.2} to {:.2} tok/s", v / 1.25, v / 0.9);
    assert!(chart.contains(&text), "{text} not in {chart}");
    // A run kept with the band it was printed with (a fitted profile's, or one widened for
    // another model) is charted with that band, not its device's.
    for r in runs.iter_mut().take(6) {
        let env = r.environment.as_mut().unwrap();
        env["prediction_band"] = serde_json::json!({"throughput": [-0.3, 0.5]});
    }
    let html = render(&runs, &options()).unwrap();
    let chart = &html[html.find("id=\"chart-output\"").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    let text = format!("predicted range {:.2} to {:.2} tok/s", v / 1.5, v / 0.7);
    assert!(chart.contains(&text), "{text} not in {chart}");
}

#[test]
fn the_servers_telemetry_is_charted_on_the_runs_time_axis() {
    use servebench_core::telemetry::{ServerTelemetry, Source, read};
    use servebench_store::{NewRun, RunKind};
    let synth = Synth { requests: 20, ..Synth::new("org/model", 1) };
    let mut run = synth.run();
    let mut source = Source::new("http://127.0.0.1:8000/metrics");
    for (t, running, waiting, kv) in [(0.0, 0, 0, 0.0), (0.5, 4, 2, 0.25), (1.0, 1, 0, 0.5)] {
        let text = format!(
            "vllm:num_requests_running {running}\nvllm:num_requests_waiting {waiting}\nvllm:kv_cache_usage_perc {kv}\n"
        );
        source.record(t, &read(&text));
    }
    run.telemetry = Some(ServerTelemetry { interval_s: 0.5, sources: vec![source] });
    let summary = Summary::compute(&run);
    let runs = stored(&[NewRun::from_run(RunKind::Bench, &run, &summary)]);
    // Through the store and back.
    assert_eq!(runs[0].summary.server, run.telemetry);
    let html = render(&runs, &options()).unwrap();
    let inflight = &html[html.find("id=\"chart-inflight\"").unwrap()..];
    let inflight = &inflight[..inflight.find("</svg>").unwrap()];
    assert!(inflight.contains("server running") && inflight.contains("server waiting"), "{inflight}");
    let server = &html[html.find("id=\"chart-server\"").expect("a chart of the server's levels")..];
    let server = &server[..server.find("</svg>").unwrap()];
    assert!(server.contains("KV cache used"));
    assert!(!server.contains("GPU utilisation"), "no GPU series was scraped");
    // Without telemetry neither appears.
    let plain = render(&measured_pair(), &options()).unwrap();
    assert!(!plain.contains("server running") && !plain.contains("id=\"chart-server\""));
}

#[test]
fn time_slices_are_charted_when_the_run_has_them() {
    use servebench_store::{NewRun, RunKind};
    let synth = Synth { requests: 40, ..Synth::new("org/model", 1) };
    let mut run = synth.run();
    run.config.output.slice_seconds = Some(run.duration_s / 4.0);
    let summary = Summary::compute(&run);
    assert!(summary.slices.len() >= 4, "{:?}", summary.slices);
    let runs = stored(&[NewRun::from_run(RunKind::Bench, &run, &summary)]);
    assert_eq!(runs[0].summary.slices, summary.slices, "slices go through the store");
    let html = render(&runs, &options()).unwrap();
    let chart = &html[html.find("id=\"chart-slices\"").expect("a chart of the time slices")..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert!(chart.contains("TTFT p99") && chart.contains("ITL p50"), "{chart}");
    let plain = render(&measured_pair(), &options()).unwrap();
    assert!(!plain.contains("id=\"chart-slices\""), "no slices, no chart");
}
