//! `bench serve --workers N`: N worker processes of this binary on this machine, each sending
//! its share of the plan (`--shard i/N`, a rendezvous on a loopback port), then one merged
//! report, result file and stored run, as if one process had sent everything.
//!
//! The workers get this process's flags (less `--workers` and `--fail-on`, whose rules are
//! checked here, on the merged run) and their role in the environment
//! (`SERVEBENCH_SHARD`, `SERVEBENCH_COORDINATOR`, `SERVEBENCH_WORKER_DIR`, and with `--sim`
//! `SERVEBENCH_SIM_URL`: the simulator is started once, here, and shared). Their output goes
//! to a log file each, kept with their results when one fails.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context as _;
use servebench_core::config::OutputOptions;
use servebench_core::record::RunResult;
use servebench_store::RunKind;
use servebench_store::merge::merge_shards;

use crate::cli::BenchServeArgs;
use crate::commands::execute::start_loopback;
use crate::commands::finish::{Keep, PointOutcome, finish_and_keep};
use crate::commands::resolve::{Resolved, Resolver};
use crate::output::Sink;

/// Runs the workers and merges their results into one reported and kept run.
pub async fn run(args: &BenchServeArgs, workers: u32, out: &Sink) -> anyhow::Result<PointOutcome> {
    // Resolved here too, so bad flags fail once, and `--sim` starts one simulator for all.
    let resolved = Resolver::default().resolve(&args.flags(false), out).await?;
    send_by_workers(&resolved, workers, &[], &Keep::new(RunKind::Bench), out).await
}

/// One run sent by `workers` worker processes of this command and merged: the run's simulator,
/// if it has one, started once here and shared; every worker told the run's request-id prefix
/// and `env` besides; their shares merged, printed and kept as `keep` says. The workers' folder
/// is removed once merged, and kept (with their logs) when a worker or the merge failed.
pub async fn send_by_workers(
    resolved: &Resolved,
    workers: u32,
    env: &[(&str, String)],
    keep: &Keep,
    out: &Sink,
) -> anyhow::Result<PointOutcome> {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("servebench-workers-{}-{run}", std::process::id()));
    let mut env = env.to_vec();
    env.push((PREFIX_ENV, resolved.config.target.request_id_prefix.clone()));
    let sim = start_loopback(resolved, out).await?;
    let sent = spawn_and_wait(workers, &dir, sim.as_ref().map(|s| s.base_url()), &env, out).await;
    if let Some(server) = sim {
        server.shutdown().await;
    }
    let merged = sent.and_then(|()| merge_files(&dir, &resolved.config.output))?;
    let _ = std::fs::remove_dir_all(&dir);
    super::merge::print_merged(&merged, out)?;
    finish_and_keep(merged, None, None, keep, &resolved.store, out)
}

/// Tells a worker the request-id prefix of the run, so that every rank's ids share it.
const PREFIX_ENV: &str = "SERVEBENCH_REQUEST_ID_PREFIX";

/// Starts `workers` processes of this command (its flags less `--workers` and `--fail-on`),
/// each told its shard, the loopback rendezvous and `dir` for its results (and the simulator
/// to share, if any, and `env` besides), and waits for all of them. A failed worker is an
/// error naming it, with the end of its output.
async fn spawn_and_wait(
    workers: u32,
    dir: &Path,
    sim_url: Option<&str>,
    env: &[(&str, String)],
    out: &Sink,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    let port = free_port()?;
    let exe = std::env::current_exe().context("could not find this program's path to start its workers")?;
    let argv = worker_argv(std::env::args_os().skip(1));
    out.line(format!("Starting {workers} worker processes (results in {})...", dir.display()))?;
    // Ctrl-C reaches the workers too: they save what they measured, and this process merges it.
    let absorb_interrupt = tokio::spawn(async {
        let _ = tokio::signal::ctrl_c().await;
    });
    let mut children = Vec::new();
    for rank in 0..workers {
        let log = dir.join(format!("worker-{rank}.log"));
        let file = std::fs::File::create(&log).with_context(|| format!("could not create {}", log.display()))?;
        let mut cmd = Command::new(&exe);
        cmd.args(&argv)
            .env("SERVEBENCH_SHARD", format!("{rank}/{workers}"))
            .env("SERVEBENCH_COORDINATOR", format!("127.0.0.1:{port}"))
            .env("SERVEBENCH_WORKER_DIR", dir)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::from(file.try_clone()?))
            .stderr(Stdio::from(file));
        match sim_url {
            Some(url) => cmd.env("SERVEBENCH_SIM_URL", url),
            None => cmd.env_remove("SERVEBENCH_SIM_URL"),
        };
        let child = cmd.spawn().with_context(|| format!("could not start worker {rank}"))?;
        children.push((rank, log, child));
    }
    let failed = tokio::task::spawn_blocking(move || wait_all(children)).await??;
    absorb_interrupt.abort();
    if let Some((rank, log, status)) = failed {
        anyhow::bail!("worker {rank} failed ({status}); its output is in {}:\n{}", log.display(), tail(&log, 20));
    }
    Ok(())
}

/// Whether a worker's exit `code` is that of a run that ended early with its result saved.
fn saved_partial(code: i32) -> bool {
    [super::bench::INTERRUPTED, super::bench::STOPPED].iter().any(|&c| code == i32::from(c))
}

/// Waits for every worker; when one fails, stops the others (they would wait for it at the
/// rendezvous) and returns it.
fn wait_all(
    mut children: Vec<(u32, PathBuf, std::process::Child)>,
) -> anyhow::Result<Option<(u32, PathBuf, std::process::ExitStatus)>> {
    let mut running = children.len();
    while running > 0 {
        running = 0;
        for i in 0..children.len() {
            let (rank, log, child) = &mut children[i];
            match child.try_wait().with_context(|| format!("worker {rank} could not be waited for"))? {
                // 130: interrupted with Ctrl-C, which reached every worker; 4: stopped by a stop
                // rule (each worker applies them to its own requests). Either way its result is saved.
                Some(status) if !status.success() && !status.code().is_some_and(saved_partial) => {
                    let failed = (*rank, log.clone(), status);
                    for (_, _, other) in &mut children {
                        let _ = other.kill();
                        let _ = other.wait();
                    }
                    return Ok(Some(failed));
                }
                Some(_) => {}
                None => running += 1,
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(None)
}

/// The worker results in `dir`, merged, saved as `output` says (the merged run's own
/// `--save-result`, `--result-dir`, ...).
fn merge_files(dir: &Path, output: &OutputOptions) -> anyhow::Result<RunResult> {
    let parts = super::merge::read_inputs(&[dir.to_path_buf()])?;
    let mut merged = merge_shards(parts, false)?;
    let out = &mut merged.config.output;
    out.save_result = output.save_result;
    out.save_detailed = output.save_detailed;
    out.append_result = output.append_result;
    out.result_dir.clone_from(&output.result_dir);
    out.result_filename.clone_from(&output.result_filename);
    Ok(merged)
}

/// This process's arguments without `--workers N` and `--fail-on RULE` (or `--flag=VALUE`):
/// the rules judge the merged run, not a worker's share.
fn worker_argv(args: impl Iterator<Item = OsString>) -> Vec<OsString> {
    const LEFT_OUT: [&str; 2] = ["--workers", "--fail-on"];
    let mut out = Vec::new();
    let mut skip_value = false;
    for a in args {
        if skip_value {
            skip_value = false;
            continue;
        }
        match a.to_str() {
            Some(s) if LEFT_OUT.contains(&s) => skip_value = true,
            Some(s) if LEFT_OUT.iter().any(|f| s.strip_prefix(f).is_some_and(|v| v.starts_with('='))) => {}
            _ => out.push(a),
        }
    }
    out
}

/// A loopback port free at the moment of asking (rank 0 binds it moments later).
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("could not find a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// The last `n` lines of a log file.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_get_every_flag_but_workers() {
        let argv = |s: &[&str]| s.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            worker_argv(
                argv(&[
                    "bench",
                    "serve",
                    "--workers",
                    "4",
                    "--num-prompts",
                    "8",
                    "--workers=2",
                    "--fail-on",
                    "ttft_p99>200",
                    "--sim",
                    "m@h",
                    "--fail-on=mean_tpot>9",
                ])
                .into_iter()
            ),
            argv(&["bench", "serve", "--num-prompts", "8", "--sim", "m@h"])
        );
    }
}
