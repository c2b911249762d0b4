//! A `bench serve` worker of a sharded run: takes its share of the plan and of
//! `--max-concurrency`, agrees on the start with the other workers (`--coordinator` or
//! `--start-at`), and records its shard in its result, which it always saves with every
//! per-request record for `servebench merge`.
//!
//! The flags resolve into a [`ShardRun`], part of the [`Resolved`](super::resolve::Resolved)
//! run; [`execute`](super::execute::execute) takes the share after the plan is built and
//! aligned, waits for the common start and stamps the result.

use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use serde::Serialize;
use servebench_client::rendezvous;
use servebench_core::config::RunConfig;
use servebench_core::plan::Plan;
use servebench_core::record::RunResult;
use servebench_core::shard::{Shard, ShardSpec, Sharding, WorkerShard, plan_hash, select, split_concurrency};

use crate::cli::shard_args::ShardArgs;
use crate::commands::finish::Keep;
use crate::output::Sink;

/// One worker's part in a sharded run, resolved from its flags.
#[derive(Clone, Debug, Serialize)]
pub struct ShardRun {
    /// Its share of the plan.
    pub shard: Shard,
    /// `--coordinator HOST:PORT`: rank 0's rendezvous.
    pub coordinator: Option<String>,
    /// `--start-at`: the common start, as given.
    pub start_at: Option<String>,
    /// `--rendezvous-timeout`, seconds.
    pub rendezvous_timeout: f64,
    /// `--start-at` read, ns since the Unix epoch (the config saves it as given).
    #[serde(skip)]
    start_unix_ns: Option<i64>,
    /// `--rendezvous-timeout` read.
    #[serde(skip)]
    timeout: Duration,
    /// Where rank 0 serves the rendezvous, read from `--coordinator` ([`coordinator_address`]).
    #[serde(skip)]
    bind: Option<String>,
    /// Where a `--workers` worker writes its result.
    pub worker_dir: Option<String>,
    /// The simulator a `--workers` parent started, which this worker benchmarks.
    pub sim_url: Option<String>,
}

/// How far ahead of the last join rank 0 sets the start: time for every worker to hear it.
const START_LEAD: Duration = Duration::from_secs(1);

/// The sharding flags, resolved; `None` for a run of its own.
pub fn shard_run(args: &ShardArgs) -> anyhow::Result<Option<ShardRun>> {
    // Checked here, before a plan is built or a server asked: the rendezvous reads them late.
    let (coordinator, bind) = args.coordinator.as_deref().map(coordinator_address).transpose()?.unzip();
    let start_unix_ns = args.start_at.as_deref().map(parse_start_at).transpose()?;
    let timeout =
        Duration::try_from_secs_f64(args.rendezvous_timeout).ok().filter(|t| !t.is_zero()).with_context(|| {
            format!("--rendezvous-timeout {} is not a number of seconds above 0", args.rendezvous_timeout)
        })?;
    Ok(shard_of(args)?.map(|shard| ShardRun {
        shard,
        coordinator,
        start_at: args.start_at.clone(),
        rendezvous_timeout: args.rendezvous_timeout,
        start_unix_ns,
        timeout,
        bind,
        worker_dir: args.worker_dir.clone(),
        sim_url: args.sim_url.clone(),
    }))
}

/// `--coordinator HOST:PORT`, checked before anything runs: a host and a port from 1 to 65535.
/// Returns the address and where rank 0 serves it: the port on every interface, reachable from
/// other machines, unless the coordinator is this machine's loopback.
fn coordinator_address(addr: &str) -> anyhow::Result<(String, String)> {
    let addr = addr.trim();
    let usage = "give rank 0's HOST:PORT, e.g. --coordinator rank0.bench:29500";
    let Some((host, port)) = addr.rsplit_once(':') else {
        anyhow::bail!("--coordinator {addr:?} has no port; {usage}");
    };
    if host.is_empty() {
        anyhow::bail!("--coordinator {addr:?} has no host; {usage}");
    }
    if host.contains('/') {
        anyhow::bail!("--coordinator {addr:?} takes no scheme or path; {usage}");
    }
    if !port.parse::<u16>().is_ok_and(|p| p > 0) {
        anyhow::bail!("--coordinator {addr:?}: {port:?} is not a port number (1 to 65535); {usage}");
    }
    let bind =
        if matches!(host, "127.0.0.1" | "localhost") { format!("127.0.0.1:{port}") } else { format!("0.0.0.0:{port}") };
    Ok((addr.to_string(), bind))
}

/// `--shard`, resolved against this process's environment; `None` for a run of its own.
fn shard_of(args: &ShardArgs) -> anyhow::Result<Option<Shard>> {
    let Some(spec) = &args.shard else {
        if args.coordinator.is_some() || args.start_at.is_some() {
            anyhow::bail!(
                "--coordinator and --start-at are for sharded runs; add --shard RANK/WORLD (or --shard auto)"
            );
        }
        return Ok(None);
    };
    let spec: ShardSpec = spec.parse()?;
    Ok(Some(spec.resolve(|k| std::env::var(k).ok())?))
}

/// Keeps `shard`'s share of `plan` and of the global `--max-concurrency` in `config` (and the
/// probes, if any, for rank 0 alone), and makes the run save every record (the merge needs
/// them). The plan hash is of the whole plan.
pub fn take_share(run: &ShardRun, config: &mut RunConfig, plan: &mut Plan, out: &Sink) -> anyhow::Result<WorkerShard> {
    let shard = run.shard;
    let hash = plan_hash(plan);
    let global = config.traffic.max_concurrency;
    let split = match global {
        Some(c) => split_concurrency(c, shard.world)?,
        None => Vec::new(),
    };
    let whole = plan.len();
    *plan = select(plan, shard);
    if plan.is_empty() {
        anyhow::bail!(
            "shard {shard} has no request: the plan has {whole} requests (or conversations) for {} workers; \
             run fewer workers or plan more requests",
            shard.world
        );
    }
    config.traffic.max_concurrency = split.get(shard.rank as usize).copied();
    // One stream of probes for the whole run, at the rate asked: rank 0's.
    if shard.rank != 0 {
        config.traffic.probe_request_rate = None;
    }
    let options = &mut config.output;
    options.save_result = true;
    options.save_detailed = true;
    options.append_result = false;
    if let Some(dir) = &run.worker_dir {
        options.result_dir = Some(dir.clone());
    }
    out.line(format!(
        "Shard {shard}: {} of the plan's {whole} requests (plan {hash}){}.",
        plan.len(),
        match global {
            Some(c) => format!(", max concurrency {} of {c}", split[shard.rank as usize]),
            None => String::new(),
        }
    ))?;
    Ok(WorkerShard {
        rank: shard.rank,
        world: shard.world,
        plan_hash: hash,
        plan_requests: whole,
        max_concurrency: global,
        concurrency_split: split,
        start_unix_ns: None,
        clock: None,
        t0_unix_ns: 0,
    })
}

/// The common start on this worker's clock, from `--start-at` or the rendezvous at
/// `--coordinator` (rank 0 hosts it); `None` when neither is given (each worker starts when
/// ready, and the merge aligns their starts as they were).
pub async fn common_start(args: &ShardRun, worker: &mut WorkerShard, out: &Sink) -> anyhow::Result<Option<SystemTime>> {
    if let Some(ns) = args.start_unix_ns {
        let now_ns = i64::try_from(jiff::Timestamp::now().as_nanosecond()).unwrap_or(i64::MAX);
        check_start_ahead(ns, now_ns)?;
        worker.start_unix_ns = Some(ns);
        return Ok(Some(rendezvous::from_unix_ns(ns)));
    }
    let (Some(addr), Some(bind)) = (&args.coordinator, &args.bind) else { return Ok(None) };
    let timeout = args.timeout;
    let shard = worker.shard();
    let met = if shard.rank == 0 {
        let listener = rendezvous::bind(bind).await?;
        out.line(format!("Rank 0: waiting for {} workers to join at {bind}...", shard.world - 1))?;
        rendezvous::host(listener, shard, &worker.plan_hash, START_LEAD, timeout).await?
    } else {
        out.line(format!("Rank {}: joining rank 0 at {addr}...", shard.rank))?;
        rendezvous::join(addr, shard, &worker.plan_hash, timeout).await?
    };
    if let Some(c) = met.clock {
        out.line(format!(
            "Clock offset to rank 0: {:+.3} ms (best round trip {:.3} ms of {}).",
            c.offset_ns as f64 * 1e-6,
            c.rtt_ns as f64 * 1e-6,
            c.samples
        ))?;
    }
    worker.start_unix_ns = Some(met.start_unix_ns);
    worker.clock = met.clock;
    Ok(Some(met.start))
}

/// `--start-at`: RFC 3339, or seconds since the Unix epoch; ns since the epoch.
fn parse_start_at(text: &str) -> anyhow::Result<i64> {
    if let Ok(secs) = text.trim().parse::<f64>() {
        if !(secs.is_finite() && secs > 0.0 && secs < 1e10) {
            anyhow::bail!(
                "--start-at {text:?} is not a time after 1970 and before 2286; write seconds since the Unix epoch \
                 (such as 1750000000) or a time such as 2025-06-01T12:00:00Z"
            );
        }
        return Ok((secs * 1e9).round() as i64);
    }
    let t: jiff::Timestamp = text.trim().parse().map_err(|e| {
        anyhow::anyhow!(
            "--start-at {text:?} is not a time ({e}); write 2025-06-01T12:00:00Z or seconds since the Unix epoch"
        )
    })?;
    i64::try_from(t.as_nanosecond()).context("--start-at is out of range")
}

/// The longest wait for a common start a worker accepts: the longest arrival schedule.
const MAX_START_AHEAD_NS: i64 = servebench_core::plan::MAX_SCHEDULE_NS as i64;

/// Refuses a common start further ahead of `now_ns` than [`MAX_START_AHEAD_NS`]: a time that
/// far off is a typo, and the worker would sit waiting for it.
fn check_start_ahead(start_ns: i64, now_ns: i64) -> anyhow::Result<()> {
    let ahead = start_ns.saturating_sub(now_ns);
    if ahead > MAX_START_AHEAD_NS {
        anyhow::bail!(
            "--start-at is {:.1} days from now; a common start more than {} days ahead is refused: check the time",
            ahead as f64 / 86_400e9,
            MAX_START_AHEAD_NS / 86_400_000_000_000
        );
    }
    Ok(())
}

/// Records the worker's shard in its result, with when its timed run began on its own clock.
pub fn stamp(result: &mut RunResult, mut worker: WorkerShard) {
    worker.t0_unix_ns = result
        .started_at
        .parse::<jiff::Timestamp>()
        .ok()
        .and_then(|t| i64::try_from(t.as_nanosecond()).ok())
        .unwrap_or(0);
    result.shard = Some(Sharding::Worker(worker));
}

/// What a worker's result file name carries before its `RANKofWORLD`.
const SHARD_TAG: &str = "shard";

/// The run a worker's result file belongs to: its name less `.json` and the `-shardRofW`
/// [`keep`] added (`.../sweep-c8-r1-shard2of4.json` → `sweep-c8-r1`).
pub fn run_name(path: &str) -> String {
    let file = std::path::Path::new(path).file_name().and_then(|f| f.to_str()).unwrap_or(path);
    let stem = file.strip_suffix(".json").unwrap_or(file);
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match stem.rsplit_once(&format!("-{SHARD_TAG}")) {
        Some((run, tail)) if tail.split_once("of").is_some_and(|(r, w)| number(r) && number(w)) => run.into(),
        _ => stem.into(),
    }
}

/// What the workers of one run share in their file names: [`run_name`] less the date and time
/// each worker stamped on its own (`-20261125-165334`), which differ between machines and
/// between workers started in different seconds.
pub fn run_key(path: &str) -> String {
    let name = run_name(path);
    let parts: Vec<&str> = name.split('-').collect();
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let mut kept = Vec::with_capacity(parts.len());
    let mut i = 0;
    while i < parts.len() {
        if i + 1 < parts.len() && digits(parts[i], 8) && digits(parts[i + 1], 6) {
            i += 2;
            continue;
        }
        kept.push(parts[i]);
        i += 1;
    }
    kept.join("-")
}

/// `keep` with the worker's own result file name (`...-shard1of4.json`).
pub fn keep(keep: &Keep, worker: &WorkerShard) -> Keep {
    let suffix = format!("{SHARD_TAG}{}of{}", worker.rank, worker.world);
    Keep {
        file_suffix: Some(match &keep.file_suffix {
            Some(s) => format!("{s}-{suffix}"),
            None => suffix,
        }),
        ..keep.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_named_by_its_workers_file_less_the_shard() {
        assert_eq!(run_name("/r/sweep-c8-r1-shard2of4.json"), "sweep-c8-r1");
        assert_eq!(run_name("res-shard0of1.json"), "res");
        assert_eq!(run_name("/r/odd-shardXofY.json"), "odd-shardXofY");
        // Workers started in different seconds, or on other machines, stamp other times.
        let (a, b) =
            ("/r/openai-infqps-m-20261125-165334-m-n8-shard0of2.json", "m-20261125-165335-m-n8-shard1of2.json");
        assert_eq!((run_key(a), run_key(b)), ("openai-infqps-m-m-n8".into(), "m-m-n8".into()));
        assert_eq!(
            run_key("/r/openai-infqps-m-20261125-165334-m-n8-shard0of2.json"),
            run_key(&a.replace("165334", "010203"))
        );
        assert_eq!(run_key("sweep-c8-r1-shard2of4.json"), "sweep-c8-r1");
        assert_eq!(run_key("x-2026112-165334-y.json"), "x-2026112-165334-y");
        assert_eq!(run_name("plain.json"), "plain");
    }

    #[test]
    fn start_times_are_read_in_both_forms() {
        assert_eq!(parse_start_at("1750000000.5").unwrap(), 1_750_000_000_500_000_000);
        assert_eq!(parse_start_at("2025-06-15T15:06:40Z").unwrap(), 1_750_000_000_000_000_000);
        let e = parse_start_at("tomorrow").unwrap_err().to_string();
        assert!(e.starts_with("--start-at \"tomorrow\" is not a time"), "{e}");
        for bad in ["0", "-5", "1e30", "NaN", "inf"] {
            let e = parse_start_at(bad).unwrap_err().to_string();
            assert!(e.contains("is not a time after 1970"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_coordinator_is_a_host_and_a_port() {
        for (ok, bind) in [
            ("rank0:29500", "0.0.0.0:29500"),
            ("10.0.0.1:1", "0.0.0.0:1"),
            (" [::1]:29500 ", "0.0.0.0:29500"),
            ("bench-0.bench.default.svc:65535", "0.0.0.0:65535"),
            ("127.0.0.1:29500", "127.0.0.1:29500"),
            ("localhost:7", "127.0.0.1:7"),
        ] {
            assert_eq!(coordinator_address(ok).unwrap(), (ok.trim().to_string(), bind.to_string()));
        }
        for (bad, says) in [
            ("bogus", "has no port"),
            (":29500", "has no host"),
            ("http://rank0:29500", "takes no scheme or path"),
            ("rank0:0", "is not a port number (1 to 65535)"),
            ("rank0:99999", "is not a port number (1 to 65535)"),
            ("rank0:", "is not a port number"),
        ] {
            let e = coordinator_address(bad).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("HOST:PORT"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_start_and_the_timeout_are_read_once_with_the_flags() {
        let args = |start: Option<&str>, timeout: f64| ShardArgs {
            shard: Some("1/2".into()),
            start_at: start.map(str::to_string),
            rendezvous_timeout: timeout,
            ..ShardArgs::default()
        };
        let run = shard_run(&args(Some("1750000000"), 30.5)).unwrap().unwrap();
        assert_eq!((run.start_unix_ns, run.timeout), (Some(1_750_000_000_000_000_000), Duration::from_millis(30_500)));
        // Saved as given: the parsed forms stay out of the config.
        let saved = serde_json::to_value(&run).unwrap();
        assert_eq!(
            (saved["start_at"].as_str(), saved["rendezvous_timeout"].as_f64()),
            (Some("1750000000"), Some(30.5))
        );
        assert!(saved.get("timeout").is_none() && saved.get("start_unix_ns").is_none(), "{saved}");
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e300] {
            let e = shard_run(&args(None, bad)).unwrap_err().to_string();
            assert!(e.contains("is not a number of seconds above 0"), "{bad}: {e}");
        }
        assert!(shard_run(&args(Some("tomorrow"), 10.0)).unwrap_err().to_string().contains("is not a time"));
    }

    #[test]
    fn a_common_start_more_than_a_week_ahead_is_refused() {
        let now = 1_750_000_000_000_000_000;
        assert!(check_start_ahead(now + MAX_START_AHEAD_NS, now).is_ok());
        assert!(check_start_ahead(now - 1_000_000_000, now).is_ok());
        let e = check_start_ahead(now + MAX_START_AHEAD_NS + 86_400_000_000_000, now).unwrap_err().to_string();
        assert!(e.contains("8.0 days from now"), "{e}");
    }
}
