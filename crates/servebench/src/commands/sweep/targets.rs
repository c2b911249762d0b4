//! The targets of a sweep: the simulator deployments (`--sim`, each serving option given as a
//! list swept over: `--sim-option tp=1,2,8`) or the servers (`--base-url`, with `--model`) that
//! each series of points goes to.

use servebench_core::config::SimTarget;
use servebench_sim::options::{canonical_key, value_holds_commas};

use super::grid::{GridError, err};
use crate::cli::bench_args::SimTargetArgs;
use crate::cli::resolve::{parse_kv_list, parse_sim_target};
use crate::cli::sweep_args::SweepArgs;

/// Where one series of points goes.
#[derive(Clone, Debug, PartialEq)]
pub enum TargetKind {
    /// The simulator, `MODEL@HARDWARE` as given, and its parsed form (its serving options this
    /// target's values of them).
    Sim { spec: String, target: SimTarget },
    /// A server: `--base-url`, or `--host`/`--port` when `None`.
    Server { base_url: Option<String> },
}

/// One target of the grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub kind: TargetKind,
    /// The `--model` for this target; `None`: the server is asked (or the simulator's model).
    pub model: Option<String>,
}

impl Target {
    pub fn sim(&self) -> Option<&SimTarget> {
        match &self.kind {
            TargetKind::Sim { target, .. } => Some(target),
            TargetKind::Server { .. } => None,
        }
    }

    /// The model as far as it is known before the run.
    pub fn known_model(&self) -> Option<&str> {
        self.model.as_deref().or_else(|| self.sim().map(|s| s.model.as_str()))
    }
}

/// The targets: several `--sim` (each once for every combination of the serving options given
/// several values), or several `--base-url` (or `--host`/`--port`) with `--model` given once,
/// once per URL, or as several models of one server.
pub fn targets(args: &SweepArgs) -> Result<Vec<Target>, GridError> {
    let lists = &args.lists;
    let bench = &args.bench;
    let sims: Vec<String> =
        if lists.sim.is_empty() { bench.sim.sim.iter().cloned().collect() } else { lists.sim.clone() };
    let urls = &lists.base_url;
    let models = &lists.model;
    if !sims.is_empty() {
        if !urls.is_empty() {
            return err("--sim starts the simulator on a loopback port and benchmarks it; leave out --base-url");
        }
        if models.len() > 1 && models.len() != sims.len() || models.len() == 1 && sims.len() > 1 {
            return err(format!(
                "{} --sim targets and {} --model names: leave out --model (each simulator serves its model's id), \
                 or give one served name per target",
                sims.len(),
                models.len()
            ));
        }
        let deployments = option_combinations(&bench.sim.sim_options)?;
        let mut out = Vec::new();
        for (i, spec) in sims.iter().enumerate() {
            for options in &deployments {
                let parsed = parse_sim_target(&SimTargetArgs {
                    sim: Some(spec.clone()),
                    sim_options: options.clone(),
                    sim_profile: bench.sim.sim_profile.clone(),
                })
                .map_err(|e| GridError(e.to_string()))?
                .ok_or_else(|| GridError(format!("invalid --sim {spec:?}")))?;
                out.push(Target {
                    kind: TargetKind::Sim { spec: spec.clone(), target: parsed },
                    model: models.get(i).cloned(),
                });
            }
        }
        return Ok(out);
    }
    if args.sweep.predict {
        return err("--predict runs --sim targets in virtual time; servers need real runs (leave out --predict)");
    }
    let servers: Vec<Option<String>> =
        if urls.is_empty() { vec![None] } else { urls.iter().cloned().map(Some).collect() };
    let pairs: Vec<(Option<String>, Option<String>)> = match (servers.len(), models.len()) {
        (_, 0) => servers.into_iter().map(|s| (s, None)).collect(),
        (_, 1) => servers.into_iter().map(|s| (s, Some(models[0].clone()))).collect(),
        (1, _) => models.iter().map(|m| (servers[0].clone(), Some(m.clone()))).collect(),
        (n, m) if n == m => servers.into_iter().zip(models.iter().cloned().map(Some)).collect(),
        (n, m) => {
            return err(format!(
                "{n} --base-url values and {m} --model names: give one --model for all, one per URL, or none to \
                 ask each server"
            ));
        }
    };
    Ok(pairs.into_iter().map(|(base_url, model)| Target { kind: TargetKind::Server { base_url }, model }).collect())
}

/// The serving options of each deployment a sweep runs, as `KEY=VALUE` items: every combination
/// of the values of the options given several (`tp=1,2,8`, or a key given more than once), the
/// first option outermost. An option whose one value holds commas (`cudagraph-capture-sizes`,
/// `speculative-config`) is swept only by giving it again.
fn option_combinations(items: &[String]) -> Result<Vec<Vec<String>>, GridError> {
    // (the key as first given, its canonical name, its values)
    let mut axes: Vec<(String, String, Vec<String>)> = Vec::new();
    for (key, value) in parse_kv_list(items, "--sim-option").map_err(|e| GridError(e.to_string()))? {
        let item = format!("{key}={value}");
        let values: Vec<String> = if value_holds_commas(&key) {
            vec![value.to_string()]
        } else {
            let parts: Vec<String> = value.split(',').map(|v| v.trim().to_string()).collect();
            if parts.len() > 1 && parts.iter().any(String::is_empty) {
                return err(format!("--sim-option {item:?} has an empty item; list values as {key}=1,2,8"));
            }
            parts
        };
        let canonical = canonical_key(&key);
        match axes.iter_mut().find(|(_, c, _)| *c == canonical) {
            Some((_, _, list)) => list.extend(values),
            None => axes.push((key, canonical, values)),
        }
    }
    for (key, _, values) in &axes {
        if let Some(v) = values.iter().enumerate().find_map(|(i, v)| values[..i].contains(v).then_some(v)) {
            return err(format!("--sim-option {key}={v} is given twice; list each value once"));
        }
    }
    let mut out: Vec<Vec<String>> = vec![Vec::new()];
    for (key, _, values) in &axes {
        out = out
            .iter()
            .flat_map(|prefix| {
                values.iter().map(move |v| {
                    let mut items = prefix.clone();
                    items.push(format!("{key}={v}"));
                    items
                })
            })
            .collect();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::sweep::grid::Grid;
    use crate::commands::sweep::grid::tests::sweep;

    #[test]
    fn servers_pair_with_models() {
        let a = sweep(&["--base-url", "http://a,http://b", "--model", "m1,m2", "--num-prompts", "5"]);
        let t = Grid::new(&a).unwrap().targets;
        assert_eq!(
            t[1],
            Target { kind: TargetKind::Server { base_url: Some("http://b".into()) }, model: Some("m2".into()) }
        );
        let one_server = Grid::new(&sweep(&["--base-url", "http://a", "--model", "m1,m2,m3"])).unwrap();
        assert_eq!(one_server.targets.len(), 3);
        let err = Grid::new(&sweep(&["--base-url", "http://a,http://b", "--model", "m1,m2,m3"])).unwrap_err();
        assert!(err.to_string().contains("one per URL"), "{err}");
        let default = Grid::new(&sweep(&["--num-prompts", "1,2"])).unwrap();
        assert_eq!(default.targets[0].kind, TargetKind::Server { base_url: None });
    }

    fn options(t: &Target) -> Vec<(String, String)> {
        t.sim().unwrap().options.clone()
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn serving_options_given_several_values_are_deployments_to_sweep() {
        let a = sweep(&[
            "--sim",
            "openai/gpt-oss-120b@h100-sxm,Qwen/Qwen3-8B@h100-sxm",
            "--sim-option",
            "tp=1,2",
            "--sim-option",
            "max-num-seqs=64",
            "--sim-option",
            "cudagraph-capture-sizes=1,2,4",
            "--sim-option",
            "tensor-parallel-size=8",
        ]);
        let t = Grid::new(&a).unwrap().targets;
        // Two models, each at tp 1, 2 and 8 (the long name joins the short one's list).
        assert_eq!(t.len(), 6);
        assert_eq!(t[0].known_model(), Some("openai/gpt-oss-120b"));
        assert_eq!(t[3].known_model(), Some("Qwen/Qwen3-8B"));
        assert_eq!(options(&t[2]), pairs(&[("tp", "8"), ("max-num-seqs", "64"), ("cudagraph-capture-sizes", "1,2,4")]));
        assert_eq!(options(&t[4])[0], ("tp".to_string(), "2".to_string()));
        // Options whose one value is a list are swept by repeating the key; two axes multiply.
        let b = sweep(&[
            "--sim",
            "Qwen/Qwen3-8B@h100-sxm",
            "--sim-option",
            "cudagraph-capture-sizes=1,2",
            "--sim-option",
            "cudagraph-capture-sizes=1,2,4,8",
            "--sim-option",
            "max-num-seqs=32,64",
        ]);
        let t = Grid::new(&b).unwrap().targets;
        let got: Vec<Vec<(String, String)>> = t.iter().map(options).collect();
        assert_eq!(
            got,
            [
                pairs(&[("cudagraph-capture-sizes", "1,2"), ("max-num-seqs", "32")]),
                pairs(&[("cudagraph-capture-sizes", "1,2"), ("max-num-seqs", "64")]),
                pairs(&[("cudagraph-capture-sizes", "1,2,4,8"), ("max-num-seqs", "32")]),
                pairs(&[("cudagraph-capture-sizes", "1,2,4,8"), ("max-num-seqs", "64")]),
            ]
        );
    }

    #[test]
    fn option_lists_that_cannot_be_swept_are_usage_errors() {
        for (option, says) in
            [("tp=1,,2", "has an empty item"), ("tp=2,2", "tp=2 is given twice"), ("tp", "use KEY=VALUE")]
        {
            let a = sweep(&["--sim", "Qwen/Qwen3-8B@h100-sxm", "--sim-option", option]);
            let e = Grid::new(&a).unwrap_err().to_string();
            assert!(e.contains(says), "{option}: {e}");
        }
    }
}
