//! The server of one `bench sweep serve` combination, as vLLM's `ServerProcess` runs it: its
//! command started in a process group of its own (`VLLM_SERVER_DEV_MODE=1`, which opens vLLM's
//! cache-reset endpoints), ready once `GET /health` answers 200, its caches reset after every
//! benchmark (or `--after-bench-cmd` run), and the whole group killed when it is done.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use servebench_client::{fetch_text, post_empty};

use crate::output::Sink;

/// vLLM's endpoints that empty a server's caches between benchmarks.
const RESET_ENDPOINTS: [&str; 3] = ["/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache"];

/// A started server.
pub struct ServerProcess {
    child: Child,
    cmd: Vec<String>,
    after_bench_cmd: Vec<String>,
    show_stdout: bool,
}

/// Where a server command listens: its `--host` (localhost) and `-p`/`--port` (8000), each
/// given as the next word or after `=`.
pub fn address(cmd: &[String]) -> String {
    let after = |keys: &[&str]| super::params::flag_value(cmd, keys);
    let host = after(&["--host"]).unwrap_or("localhost");
    let port = after(&["-p", "--port"]).unwrap_or("8000");
    if host.contains(':') { format!("http://[{host}]:{port}") } else { format!("http://{host}:{port}") }
}

/// Whether `cmd` starts a server that answers vLLM's cache resets: vLLM's own, or this
/// program's simulator.
fn resets_caches(cmd: &[String]) -> bool {
    let program = cmd.first().map_or("", |p| p.rsplit('/').next().unwrap_or(p));
    program == "vllm" || (program == "servebench" && cmd.get(1..3) == Some(&["sim".into(), "serve".into()]))
}

/// Runs `cmd` to its end; an error unless it succeeds.
pub fn run_subcommand(cmd: &[String], show_stdout: bool) -> anyhow::Result<()> {
    let (program, args) = cmd.split_first().context("an empty command")?;
    let status = Command::new(program)
        .args(args)
        .stdout(if show_stdout { Stdio::inherit() } else { Stdio::null() })
        .status()
        .with_context(|| format!("could not run {program:?}"))?;
    if !status.success() {
        bail!("{} exited with {status}", super::py_list(cmd));
    }
    Ok(())
}

impl ServerProcess {
    /// Starts the server command.
    pub fn start(cmd: Vec<String>, after_bench_cmd: Vec<String>, show_stdout: bool) -> anyhow::Result<Self> {
        use std::os::unix::process::CommandExt as _;
        let (program, args) = cmd.split_first().context("--serve-cmd is empty")?;
        let child = Command::new(program)
            .args(args)
            .process_group(0)
            .env("VLLM_SERVER_DEV_MODE", "1")
            .stdout(if show_stdout { Stdio::inherit() } else { Stdio::null() })
            .spawn()
            .with_context(|| format!("could not start the server {program:?}"))?;
        Ok(Self { child, cmd, after_bench_cmd, show_stdout })
    }

    /// The server's base URL.
    pub fn base_url(&self) -> String {
        address(&self.cmd)
    }

    /// Waits until `GET /health` answers 200, polling each second; an error if the process
    /// ends first or `timeout` passes.
    pub async fn wait_until_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let start = Instant::now();
        let base = self.base_url();
        loop {
            if fetch_text(&base, "/health", &[], None, false).await.is_ok() {
                // A server that could not listen (the port taken) ends; what answered is
                // another one, which must not be benchmarked in its stead.
                tokio::time::sleep(Duration::from_millis(200)).await;
                if let Some(status) = self.child.try_wait()? {
                    bail!(
                        "the server process ended ({status}) though {base}/health answers: is another server listening there?"
                    );
                }
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("the server process ended ({status}) before {base}/health answered");
            }
            if start.elapsed() > timeout {
                bail!(
                    "the server did not become ready within {} s ({base}/health); raise --server-ready-timeout",
                    timeout.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_secs(1).min(timeout.saturating_sub(start.elapsed()))).await;
        }
    }

    /// After a benchmark: `--after-bench-cmd`, else the server's caches reset.
    pub async fn after_bench(&self, out: &Sink) -> anyhow::Result<()> {
        if !self.after_bench_cmd.is_empty() {
            return run_subcommand(&self.after_bench_cmd, self.show_stdout);
        }
        if !resets_caches(&self.cmd) {
            bail!(
                "no way to reset the caches of a {:?} server is known; give --after-bench-cmd (a command run after \
                 each benchmark, `true` for none)",
                self.cmd.first().map_or("", String::as_str)
            );
        }
        let base = self.base_url();
        out.line(format!("Resetting caches at {base}"))?;
        for path in RESET_ENDPOINTS {
            post_empty(&base, path, &[], None, false, Duration::from_secs(60)).await?;
        }
        Ok(())
    }
}

impl Drop for ServerProcess {
    /// Kills the server's whole process group (vLLM's API server and its engine processes).
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // The group this child leads, by `kill` (this crate has no unsafe code to call
            // killpg with); the child itself in any case.
            let group = format!("-{}", self.child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn the_address_and_the_reset_follow_the_server_command() {
        assert_eq!(address(&cmd("vllm serve m")), "http://localhost:8000");
        assert_eq!(address(&cmd("vllm serve m --host 10.0.0.2 -p 9000")), "http://10.0.0.2:9000");
        assert_eq!(address(&cmd("servebench sim serve --model m --port 8123")), "http://localhost:8123");
        assert_eq!(address(&cmd("vllm serve m --port=9001 --host=::1")), "http://[::1]:9001");
        assert_eq!(address(&cmd("vllm serve m --port-offset 3")), "http://localhost:8000");
        assert!(resets_caches(&cmd("/usr/bin/vllm serve m")));
        assert!(resets_caches(&cmd("./target/release/servebench sim serve --model m")));
        assert!(!resets_caches(&cmd("servebench bench serve")));
        assert!(!resets_caches(&cmd("python -m sglang.launch_server")));
    }
}
