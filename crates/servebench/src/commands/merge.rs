//! `servebench merge FILE...|DIR`: the result files of a sharded run's workers become the one
//! run a single process would have measured: vLLM's report, the result JSON and a run in
//! the store, from every worker's raw records (see `servebench_store::merge`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use servebench_core::metrics::Verdict;
use servebench_core::record::RunResult;
use servebench_core::shard::{MergedShards, Sharding};
use servebench_store::RunKind;
use servebench_store::merge::{MergeError, ShardResult, merge_shards, read_shard_result};

use crate::cli::merge_args::MergeArgs;
use crate::commands::finish::{Keep, StoreChoice, finish_and_keep};
use crate::commands::inputs::files_of;
use crate::output::Sink;

pub fn execute(args: &MergeArgs, out: &Sink) -> anyhow::Result<ExitCode> {
    let parts = read_inputs(&args.inputs)?;
    if !args.per_run {
        merge_one(parts, args.result_filename.clone(), args, out)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.result_filename.is_some() {
        anyhow::bail!("--per-run saves each run under its own name; leave out --result-filename");
    }
    let runs = by_run(parts);
    let mut failed = Vec::new();
    for (name, parts) in runs.iter() {
        out.out(&format!("Run {name}:\n"))?;
        if let Err(e) = merge_one(parts.clone(), Some(format!("{name}.json")), args, out) {
            crate::output::note(format_args!("Could not merge {name}: {e:#}"));
            failed.push(name.as_str());
        }
    }
    if !failed.is_empty() {
        anyhow::bail!("{} of {} runs could not be merged: {}", failed.len(), runs.len(), failed.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

/// Merges one run's worker results, prints it and keeps it.
fn merge_one(parts: Vec<ShardResult>, filename: Option<String>, args: &MergeArgs, out: &Sink) -> anyhow::Result<()> {
    let mut merged = merge_shards(parts, args.partial)?;
    let options = &mut merged.config.output;
    options.save_result = true;
    options.save_detailed = true;
    options.append_result = false;
    options.result_dir.clone_from(&args.result_dir);
    options.result_filename = filename;
    let shards = print_merged(&merged, out)?;
    let mut keep = Keep::new(RunKind::Bench);
    keep.labels.push(("shards".into(), shards.world.to_string()));
    if shards.partial() {
        keep.labels.push(("partial".into(), "true".into()));
    }
    let choice = StoreChoice { db: args.db.clone(), no_store: args.no_store };
    choice.check()?;
    finish_and_keep(merged, None, None, &keep, &choice, out)?;
    Ok(())
}

/// Worker results grouped by the run they belong to: the same plan (its hash) and number of
/// workers, and the same file name less `.json`, the `-shardRofW` every worker adds and the
/// date and time each stamped on its own (a sweep point's files share the rest). Each run is
/// named by its lowest rank's file.
fn by_run(parts: Vec<ShardResult>) -> BTreeMap<String, Vec<ShardResult>> {
    let mut groups: BTreeMap<(String, String, u32), Vec<ShardResult>> = BTreeMap::new();
    for part in parts {
        let key = (super::shard::run_key(&part.source), part.worker.plan_hash.clone(), part.worker.world);
        groups.entry(key).or_default().push(part);
    }
    let mut runs: BTreeMap<String, Vec<ShardResult>> = BTreeMap::new();
    for ((_, plan, _), parts) in groups {
        let first = parts.iter().min_by_key(|p| p.worker.rank).map(|p| super::shard::run_name(&p.source));
        let mut name = first.unwrap_or_default();
        if runs.contains_key(&name) {
            name = format!("{name}-{plan}");
        }
        runs.insert(name, parts);
    }
    runs
}

/// Every worker result named, or found in a named folder.
pub(crate) fn read_inputs(inputs: &[PathBuf]) -> anyhow::Result<Vec<ShardResult>> {
    let mut parts = Vec::new();
    for input in inputs {
        let named = files_of(input, |p| p.extension().is_some_and(|x| x == "json"), "worker results (*.json)")?;
        if !named.folder {
            parts.push(read_one(input)?);
            continue;
        }
        let before = parts.len();
        for file in named.files {
            match read_one(&file) {
                Ok(part) => parts.push(part),
                // A folder may hold other results (an earlier merge): only workers count.
                Err(e) if matches!(e.downcast_ref::<MergeError>(), Some(MergeError::NotAWorker { .. })) => {}
                Err(e) => return Err(e),
            }
        }
        if parts.len() == before {
            anyhow::bail!(
                "{} holds no worker results of a sharded run (the *.json files `bench serve --shard` writes)",
                input.display()
            );
        }
    }
    Ok(parts)
}

fn read_one(path: &Path) -> anyhow::Result<ShardResult> {
    let text = std::fs::read_to_string(path).with_context(|| format!("could not read {}", path.display()))?;
    Ok(read_shard_result(&text, &path.display().to_string())?)
}

/// Prints what a merged run came from; returns its shards.
pub(crate) fn print_merged(merged: &RunResult, out: &Sink) -> anyhow::Result<MergedShards> {
    let Some(Sharding::Merged(shards)) = &merged.shard else {
        anyhow::bail!("the merge did not record its shards");
    };
    out.out(&describe(shards, merged.records.len()))?;
    Ok(shards.clone())
}

/// What was merged: one line for the set, one per rank with its clock and client health.
fn describe(m: &MergedShards, requests: usize) -> String {
    let mut text = format!(
        "Merged {} of {} workers (plan {}): {requests} requests{}.\n",
        m.ranks.len(),
        m.world,
        m.plan_hash,
        match (&m.max_concurrency, m.concurrency_split.is_empty()) {
            (Some(c), false) => format!(
                ", max concurrency {c} split {}",
                m.concurrency_split.iter().map(usize::to_string).collect::<Vec<_>>().join("+")
            ),
            _ => String::new(),
        }
    );
    for r in &m.ranks {
        let clock = r.clock.map_or_else(
            || "clock of reference".to_string(),
            |c| format!("clock offset {:+.3} ms (RTT {:.3} ms)", c.offset_ns as f64 * 1e-6, c.rtt_ns as f64 * 1e-6),
        );
        let lag = r.dispatch_lag_p99_ms.map_or_else(String::new, |p| format!(", dispatch lag p99 {p:.2} ms"));
        let health = match r.health {
            Some(Verdict::Ok) => ", client health ok".to_string(),
            Some(Verdict::ClientBound { from_s }) => format!(", client-bound from t = {from_s:.1} s"),
            None => String::new(),
        };
        text.push_str(&format!(
            "  rank {}: {} requests, {clock}, started {:.3} ms after the first{lag}{health}\n",
            r.rank,
            r.requests,
            r.rebased_ns as f64 * 1e-6
        ));
    }
    if m.partial() {
        let missing: Vec<String> = m.missing.iter().map(u32::to_string).collect();
        text.push_str(&format!(
            "PARTIAL: ranks missing: {}; the report covers the ranks present.\n",
            missing.join(", ")
        ));
    }
    text
}
