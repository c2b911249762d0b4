//! The report rendered by headless Chromium: no script error, charts and tables in the DOM
//! after load, and a screenshot that is not blank.
//!
//! Without a Chromium on this machine the test prints a note and passes, unless
//! `SERVEBENCH_REQUIRE_CHROMIUM` is set (as CI sets it), when it fails. `SERVEBENCH_CHROMIUM`
//! names the browser binary when it is not `chromium`, `chromium-browser` or
//! `google-chrome` on the PATH.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::*;

/// How long one browser run may take.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The screenshot's size in pixels.
const WINDOW: (u32, u32) = (1280, 2400);

fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SERVEBENCH_CHROMIUM").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/bin")]) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// Runs Chromium headless on `page` with `args`; returns its stdout. Its output goes to files
/// (a pipe could fill up and stall it while this waits).
fn chromium(browser: &Path, dir: &Path, page: &Path, args: &[String]) -> Result<String, String> {
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let (out_path, err_path) = (dir.join(format!("stdout-{n}")), dir.join(format!("stderr-{n}")));
    let file = |p: &Path| std::fs::File::create(p).map_err(|e| e.to_string());
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", dir.join(format!("profile-{n}")).display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(file(&out_path)?)
        .stderr(file(&err_path)?)
        .spawn()
        .map_err(|e| format!("could not start {}: {e}", browser.display()))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{} took more than {TIMEOUT:?}", browser.display()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(e.to_string()),
        }
    };
    let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    if !status.success() {
        return Err(format!("{} exited with {status}: {}", browser.display(), read(&err_path)));
    }
    Ok(read(&out_path))
}

/// The attributes of the dumped DOM's root element.
fn root_tag(dom: &str) -> Option<&str> {
    let start = dom.find("<html")?;
    let end = dom[start..].find('>')?;
    Some(&dom[start..start + end + 1])
}

/// Width and height from a PNG's header, after checking its signature.
fn png_size(png: &[u8]) -> Option<(u32, u32)> {
    const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];
    if png.len() < 24 || png[..8] != SIGNATURE || &png[12..16] != b"IHDR" {
        return None;
    }
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some((be(&png[16..20]), be(&png[20..24])))
}

/// Renders `html` in Chromium and checks that it ran cleanly and drew something; returns
/// what is wrong otherwise.
fn check(browser: &Path, dir: &Path, name: &str, html: &str, blank_png_len: usize) -> Result<(), String> {
    check_with(browser, dir, name, html, blank_png_len, &["<table>", "<svg", "class=\"series\"", "Findings"])
}

/// [`check`], with the texts the dumped DOM must hold.
fn check_with(
    browser: &Path,
    dir: &Path,
    name: &str,
    html: &str,
    blank_png_len: usize,
    needles: &[&str],
) -> Result<(), String> {
    let page = dir.join(format!("{name}.html"));
    std::fs::write(&page, html).map_err(|e| e.to_string())?;
    let dom = chromium(browser, dir, &page, &["--virtual-time-budget=3000".into(), "--dump-dom".into()])?;
    let root = root_tag(&dom).ok_or_else(|| format!("the dumped DOM has no <html>: {:.200}", dom))?;
    if let Some(at) = root.find("data-script-error=") {
        return Err(format!("the page's script failed: {}", &root[at..]));
    }
    if !root.contains("data-ready=\"1\"") {
        return Err(format!("the page's script did not finish: {root}"));
    }
    let charts = html.matches("<figure>\n<svg").count();
    if charts == 0 || !root.contains(&format!("data-charts=\"{charts}\"")) {
        return Err(format!("the DOM does not hold the {charts} charts of the page: {root}"));
    }
    for needle in needles {
        if !dom.contains(needle) {
            return Err(format!("the DOM lacks {needle:?}"));
        }
    }
    let shot = dir.join(format!("{name}.png"));
    chromium(
        browser,
        dir,
        &page,
        &[format!("--screenshot={}", shot.display()), format!("--window-size={},{}", WINDOW.0, WINDOW.1)],
    )?;
    let png = std::fs::read(&shot).map_err(|e| format!("no screenshot: {e}"))?;
    if png_size(&png) != Some(WINDOW) {
        return Err(format!("the screenshot is not a {}×{} PNG", WINDOW.0, WINDOW.1));
    }
    // A page of one colour compresses to almost nothing; text and charts do not.
    if png.len() < 4 * blank_png_len {
        return Err(format!(
            "the screenshot looks blank: {} bytes against {blank_png_len} for a blank page",
            png.len()
        ));
    }
    Ok(())
}

#[test]
fn the_report_renders_in_chromium() {
    let Some(browser) = find_chromium() else {
        if std::env::var_os("SERVEBENCH_REQUIRE_CHROMIUM").is_some() {
            panic!(
                "SERVEBENCH_REQUIRE_CHROMIUM is set but no Chromium was found (set SERVEBENCH_CHROMIUM to its path)"
            );
        }
        eprintln!("note: no Chromium found; the browser test of the HTML report did not run");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let blank = dir.path().join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let blank_png = dir.path().join("blank.png");
    chromium(
        &browser,
        dir.path(),
        &blank,
        &[format!("--screenshot={}", blank_png.display()), format!("--window-size={},{}", WINDOW.0, WINDOW.1)],
    )
    .unwrap();
    let blank_len = std::fs::read(&blank_png).unwrap().len();
    assert!(blank_len > 0);

    let mut runs = reference_001();
    runs.truncate(12);
    runs.extend(measured_pair());
    let reports = [
        ("sweep", render(&reference_001(), &options()).unwrap()),
        ("pair", render(&measured_pair(), &options()).unwrap()),
        ("mixed", render(&runs, &options()).unwrap()),
    ];
    for (name, html) in &reports {
        if let Err(e) = check(&browser, dir.path(), name, html, blank_len) {
            panic!("the {name} report: {e}");
        }
    }

    // The page of `--plot-timeline`: a run of requests whose token gaps fall in all three classes.
    let run = Synth { requests: 300, concurrency: 32, itl_ms: 30.0, tokens: 40, ..Synth::new("org/model", 3) }.run();
    let page = timeline_page(&TimelinePage {
        title: "Requests of org/model",
        meta: "300 requests",
        records: &run.records,
        thresholds_ms: [25.0, 50.0],
    });
    let needles = ["<svg", "class=\"series\"", "ITL \u{2265} 50 ms"];
    if let Err(e) = check_with(&browser, dir.path(), "timeline", &page, blank_len, &needles) {
        panic!("the timeline page: {e}");
    }

    // The checks catch what they are for: a script error, and a page without its charts.
    let (_, good) = &reports[1];
    let broken = good.replace("</body>", "<script>no_such_function();</script>\n</body>");
    let err = check(&browser, dir.path(), "broken", &broken, blank_len).unwrap_err();
    assert!(err.contains("the page's script failed: data-script-error=") && err.contains("no_such_function"), "{err}");
    let chartless = good.replacen(
        "<script>(function",
        "<script>document.querySelectorAll('figure').forEach(function (f) { f.remove(); });\n(function",
        1,
    );
    let err = check(&browser, dir.path(), "chartless", &chartless, blank_len).unwrap_err();
    assert!(err.contains("does not hold the"), "{err}");
    let invisible = good.replacen("<style>", "<style>body { visibility: hidden; }", 1);
    let err = check(&browser, dir.path(), "invisible", &invisible, blank_len).unwrap_err();
    assert!(err.contains("looks blank"), "{err}");
}
