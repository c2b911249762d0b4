//! A search's answers as capacity: each deployment's highest load under the SLOs per GPU, and,
//! for a load to serve (`--demand`), the replicas, GPUs and GPU-hours' price that serve it. The
//! replicas are copies of the searched deployment behind a balancer that splits the load
//! evenly, each held at its search's answer; that is the plan's one assumption.

use servebench_core::metrics::Summary;
use servebench_report::Table;
use servebench_report::layout::number_text;

use crate::cli::sweep_args::SearchKey;

/// One search's answer, as the capacity plan reads it.
pub struct Answered<'a> {
    /// The deployment's settings (`tp=2`), empty for a search of its own.
    pub described: &'a str,
    /// The highest load that met every SLO; `None` where none did.
    pub best: Option<f64>,
    /// The finished runs of the answer's probe (for their GPU count and price).
    pub runs: Vec<&'a Summary>,
    /// Whether the search ended (an interrupted one answers "so far").
    pub finished: bool,
}

impl Answered<'_> {
    fn gpus(&self) -> Option<u32> {
        self.runs.iter().find_map(|s| s.gpus)
    }

    fn price(&self) -> Option<f64> {
        self.runs.iter().find_map(|s| s.gpu_hour_cost)
    }
}

/// What serves `demand`: replicas of `gpus` GPUs each carrying at most `per_replica`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    pub replicas: u64,
    pub gpus: u64,
}

/// The replicas and GPUs that serve `demand` at `per_replica` each; `None` where a replica
/// carries nothing.
pub fn plan(demand: f64, per_replica: f64, gpus: u32) -> Option<Plan> {
    if !(per_replica > 0.0 && demand > 0.0) {
        return None;
    }
    // A load a hair above a whole number of replicas (rounding of the answer) is not one more.
    let replicas = (demand / per_replica - 1e-9).ceil().max(1.0) as u64;
    Some(Plan { replicas, gpus: replicas * u64::from(gpus) })
}

/// The unit of the searched load, after a number.
fn unit(key: SearchKey) -> &'static str {
    match key {
        SearchKey::RequestRate => "req/s",
        SearchKey::MaxConcurrency => "concurrent requests",
    }
}

/// The capacity table and its sentence, when there is something to plan: a `demand`, or two
/// answered searches whose GPU counts are known (which serves more per GPU). `None` otherwise.
pub fn capacity(key: SearchKey, demand: Option<f64>, answers: &[Answered]) -> Option<(Table, String)> {
    let known = answers.iter().filter(|a| a.best.is_some() && a.gpus().is_some()).count();
    if demand.is_none() && known < 2 {
        return None;
    }
    let unit = unit(key);
    let mut header = vec!["DEPLOYMENT".to_string(), key.key().to_string(), "GPUS".into(), "PER GPU".into()];
    if demand.is_some() {
        header.extend(["REPLICAS", "TOTAL GPUS", "$/HOUR"].map(String::from));
    }
    let title = match demand {
        Some(d) => format!(
            "Capacity for {} {unit} under the SLOs (replicas split the load evenly, each at its search's answer)",
            number_text(d)
        ),
        None => "Capacity under the SLOs, per GPU".to_string(),
    };
    let mut t = Table::new(header).with_title(title);
    t.right = std::iter::once(false).chain(std::iter::repeat_n(true, if demand.is_some() { 6 } else { 3 })).collect();
    // (described, per GPU, plan, cost an hour) of each answered deployment.
    let mut ranked: Vec<(&str, f64, Option<Plan>, Option<f64>)> = Vec::new();
    for a in answers {
        let name = if a.described.is_empty() { "(this deployment)" } else { a.described };
        let mut row = vec![name.to_string()];
        let best = a.best.map_or_else(
            || "none".to_string(),
            |b| {
                if a.finished { number_text(b) } else { format!("{} (stopped)", number_text(b)) }
            },
        );
        row.push(best);
        row.push(a.gpus().map_or_else(|| "-".into(), |g| g.to_string()));
        let per_gpu = a.best.zip(a.gpus()).map(|(b, g)| b / f64::from(g));
        row.push(per_gpu.map_or_else(|| "-".into(), |p| format!("{p:.2}")));
        let planned = demand.zip(a.best).zip(a.gpus()).and_then(|((d, b), g)| plan(d, b, g));
        let cost = planned.zip(a.price()).map(|(p, price)| p.gpus as f64 * price);
        if demand.is_some() {
            row.push(planned.map_or_else(|| "-".into(), |p| p.replicas.to_string()));
            row.push(planned.map_or_else(|| "-".into(), |p| p.gpus.to_string()));
            row.push(cost.map_or_else(|| "-".into(), |c| format!("{c:.2}")));
        }
        t.rows.push(row);
        if let Some(p) = per_gpu {
            ranked.push((name, p, planned, cost));
        }
    }
    let sentence = match demand {
        Some(d) => {
            let fewest = ranked
                .iter()
                .filter_map(|&(name, _, plan, cost)| plan.map(|p| (name, p, cost)))
                .min_by(|a, b| a.1.gpus.cmp(&b.1.gpus).then(a.2.unwrap_or(0.0).total_cmp(&b.2.unwrap_or(0.0))));
            match fewest {
                None => format!(
                    "No deployment serves {} {unit} under the SLOs: none met them, or its GPU count is not known.",
                    number_text(d)
                ),
                Some((name, p, cost)) => {
                    let price = cost.map_or_else(String::new, |c| format!(", ${c:.2} an hour"));
                    let per = p.gpus / p.replicas;
                    format!(
                        "Fewest GPUs for {} {unit}: {name}, {} replica{} of {per} GPU{} ({} GPUs{price}).",
                        number_text(d),
                        p.replicas,
                        if p.replicas == 1 { "" } else { "s" },
                        if per == 1 { "" } else { "s" },
                        p.gpus
                    )
                }
            }
        }
        None => {
            let (name, per_gpu, ..) = ranked.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
            format!("Most {unit} a GPU under the SLOs: {name}, {per_gpu:.2}.")
        }
    };
    Some((t, sentence))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn run(gpus: u32, price: Option<f64>) -> Summary {
        Summary { gpus: Some(gpus), gpu_hour_cost: price, ..Summary::default() }
    }

    #[test]
    fn the_fewest_gpus_serve_the_demand_whatever_each_replica_serves() {
        let (tp2, tp8) = (run(2, Some(2.5)), run(8, Some(2.5)));
        let answers = [
            Answered { described: "tp=2", best: Some(46.0), runs: vec![&tp2], finished: true },
            Answered { described: "tp=8", best: Some(208.0), runs: vec![&tp8], finished: true },
        ];
        // 500 req/s: 11 replicas of TP2 (22 GPUs) against 3 of TP8 (24), though TP8 serves more
        // per GPU (26 against 23 req/s).
        let (t, sentence) = capacity(SearchKey::RequestRate, Some(500.0), &answers).unwrap();
        assert_eq!(sentence, "Fewest GPUs for 500 req/s: tp=2, 11 replicas of 2 GPUs (22 GPUs, $55.00 an hour).");
        assert_eq!(t.rows[0], ["tp=2", "46", "2", "23.00", "11", "22", "55.00"]);
        assert_eq!(t.rows[1], ["tp=8", "208", "8", "26.00", "3", "24", "60.00"]);
        // Without a demand, which serves more per GPU.
        let (t, sentence) = capacity(SearchKey::RequestRate, None, &answers).unwrap();
        assert_eq!(sentence, "Most req/s a GPU under the SLOs: tp=8, 26.00.");
        assert_eq!(t.rows[1], ["tp=8", "208", "8", "26.00"]);
        // One search and no demand: nothing to plan.
        assert!(capacity(SearchKey::RequestRate, None, &answers[..1]).is_none());
    }

    #[test]
    fn a_deployment_that_met_no_slo_serves_nothing() {
        let (tp1, tp2) = (run(1, None), run(2, None));
        let answers = [
            Answered { described: "tp=1", best: None, runs: vec![], finished: true },
            Answered { described: "tp=2", best: Some(12.0), runs: vec![&tp2], finished: false },
        ];
        let (t, sentence) = capacity(SearchKey::MaxConcurrency, Some(100.0), &answers).unwrap();
        assert_eq!(t.rows[0], ["tp=1", "none", "-", "-", "-", "-", "-"]);
        assert_eq!(t.rows[1], ["tp=2", "12 (stopped)", "2", "6.00", "9", "18", "-"]);
        assert_eq!(sentence, "Fewest GPUs for 100 concurrent requests: tp=2, 9 replicas of 2 GPUs (18 GPUs).");
        let none = [Answered { described: "", best: None, runs: vec![&tp1], finished: true }];
        let (_, sentence) = capacity(SearchKey::RequestRate, Some(5.0), &none).unwrap();
        assert!(sentence.starts_with("No deployment serves 5 req/s under the SLOs"), "{sentence}");
    }

    proptest! {
        /// The replicas carry the demand, and one fewer would not.
        #[test]
        fn the_replicas_are_the_fewest_that_carry_the_demand(demand in 0.1f64..1e5, per in 0.1f64..1e4, gpus in 1u32..16) {
            let p = plan(demand, per, gpus).unwrap();
            prop_assert!(p.replicas as f64 * per >= demand * (1.0 - 1e-9));
            prop_assert!(p.replicas == 1 || (p.replicas - 1) as f64 * per < demand);
            prop_assert_eq!(p.gpus, p.replicas * u64::from(gpus));
        }
    }
}
