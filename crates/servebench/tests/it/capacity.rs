//! `sweep --search ... --demand`: each deployment's answer becomes the replicas, GPUs and price
//! that serve a load, planned from the probes the search ran.

use crate::common::*;

/// The answer of each search in the closing text: `tp=2` → the highest concurrency.
fn answers(end: &str) -> Vec<(String, u64)> {
    end.lines()
        .filter_map(|l| {
            let (who, rest) = l.split_once(": highest max_concurrency meeting ")?;
            let best = rest.split(": ").nth(1)?.split(' ').next()?.parse().ok()?;
            Some((who.rsplit(' ').next()?.to_string(), best))
        })
        .collect()
}

#[test]
fn a_demand_is_planned_as_replicas_of_each_deployment_s_answer() {
    let tail =
        ["p99_ttft_ms<=400", "--sim-option", "tp=1,2", "--no-store", "--gpu-hour-cost", "2.5", "--demand", "100"];
    let out = servebench_blocking(&args(&[&["sweep"][..], &SMALL_SEARCH, &tail].concat()));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{}", text(&out.stderr));
    let found = answers(&stdout);
    assert_eq!(found.iter().map(|(who, _)| who.as_str()).collect::<Vec<_>>(), ["tp=1", "tp=2"], "{stdout}");
    let table = &stdout[stdout.find("Capacity for 100 concurrent requests under the SLOs").expect("a plan")..];
    let mut plans = Vec::new();
    for (who, best) in &found {
        let tp: u64 = who.trim_start_matches("tp=").parse().unwrap();
        let row =
            table.lines().find(|l| l.contains(who.as_str())).unwrap_or_else(|| panic!("no row {who} in\n{table}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        // DEPLOYMENT (model=... tp=N), the answer, GPUs, per GPU, replicas, total GPUs, $/hour.
        let n = cells.len();
        let replicas = 100u64.div_ceil(*best);
        assert_eq!(cells[n - 6..n - 3], [best.to_string(), tp.to_string(), format!("{:.2}", *best as f64 / tp as f64)]);
        assert_eq!(
            cells[n - 3..],
            [replicas.to_string(), (replicas * tp).to_string(), format!("{:.2}", 2.5 * (replicas * tp) as f64)]
        );
        plans.push((replicas * tp, who.clone(), replicas));
    }
    let (gpus, who, replicas) = plans.iter().min().unwrap();
    assert!(
        table.contains(&format!(
            "Fewest GPUs for 100 concurrent requests: model=Qwen/Qwen3-8B {who}, {replicas} replica"
        )),
        "{table}"
    );
    assert!(table.contains(&format!("({gpus} GPUs, ${:.2} an hour).", 2.5 * *gpus as f64)), "{table}");
}

#[test]
fn a_demand_needs_a_search_and_a_load_above_zero() {
    let sim = ["sweep", "--sim", "Qwen/Qwen3-8B@h100-sxm", "--predict", "--no-store"];
    let out = servebench_blocking(&args(&[&sim[..], &["--demand", "10"]].concat()));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--search"), "{}", text(&out.stderr));
    let search = ["--search", "request-rate", "--slo", "p99_ttft_ms<=400", "--demand", "0"];
    let out = servebench_blocking(&args(&[&sim[..], &search[..]].concat()));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--demand 0: give the load to serve as a number above 0"),
        "{}",
        text(&out.stderr)
    );
}
