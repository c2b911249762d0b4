//! `servebench bench sweep serve`, a drop-in `vllm bench sweep serve`: for each combination of
//! `--serve-params` a server is started from `--serve-cmd`; against it each combination of
//! `--bench-params` that agrees with it on `--link-vars` is benchmarked `--num-runs` times,
//! the caches reset after each run; results are laid out as vLLM lays them out
//! (`EXPERIMENT/SERVE--NAME-BENCH--NAME/run=N.json` with the run's number and parameters,
//! `summary.json` per combination, `summary.csv` over all). A `vllm bench serve` (or
//! `servebench bench serve`) benchmark command runs as this program's own `bench serve`, in
//! this process, so every run is also kept in the run store; any other command runs as it is.
//! `serve_workload` explores each combination's load in levels (`workload.rs`); `plot` and
//! `plot_pareto` chart the results (`plot.rs`, `pareto.rs`).

mod params;
mod pareto;
mod plot;
mod server;
mod workload;

pub use pareto::plot as plot_pareto;
pub use plot::plot;
pub use workload::Workload;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::{Map, Value};

use crate::cli::sweep_serve_args::SweepServeArgs;
use crate::output::Sink;
use params::Item;
use server::ServerProcess;

/// The flags vLLM adds to every benchmark command of a sweep.
const PERCENTILES: [&str; 2] = ["--percentile-metrics", "ttft,tpot,itl,e2el"];

/// One benchmark run of a combination: its server (none in a dry run), both combinations,
/// its number (-1 for the warm-up) and its result file.
#[derive(Clone, Copy)]
struct Run<'a> {
    server: Option<&'a ServerProcess>,
    serve: &'a Item,
    bench: &'a Item,
    number: i64,
    path: &'a Path,
}

/// What a sweep runs, read from its flags.
struct Sweep {
    serve_cmd: Vec<String>,
    bench_cmd: Vec<String>,
    after_bench_cmd: Vec<String>,
    serve_params: Vec<Item>,
    bench_params: Vec<Item>,
    links: Vec<(String, String)>,
    dir: PathBuf,
    args: SweepServeArgs,
    /// `serve_workload`: the levels of the workload explored for each combination.
    workload: Option<workload::Workload>,
}

/// Runs the sweep (`serve`, or `serve_workload` with `workload`); its lines go to `out`.
pub async fn run(args: SweepServeArgs, workload: Option<workload::Workload>, out: &Sink) -> anyhow::Result<ExitCode> {
    let sweep = Sweep::read(args, workload)?;
    let result = sweep.run_combs(out).await;
    match (&result, sweep.args.dry_run) {
        (Ok(()), true) => out.line(format!("Experiment will be saved at: {}", sweep.dir.display()))?,
        (Ok(()), false) => out.line(format!("Experiment has been saved at: {}", sweep.dir.display()))?,
        (Err(_), _) => out.line("The sweep ended early. Run it again with --resume to go on from its last result.")?,
    }
    result.map(|()| ExitCode::SUCCESS)
}

fn split(flag: &str, cmd: &str) -> anyhow::Result<Vec<String>> {
    let tokens = shlex::split(cmd).with_context(|| format!("{flag} has an unclosed quote: {cmd:?}"))?;
    if tokens.is_empty() {
        bail!("{flag} is empty: give the command to run");
    }
    Ok(tokens)
}

/// A string quoted as vLLM's printed lists and dicts show it: in single quotes, its
/// backslashes and single quotes escaped.
fn py_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// Python's repr of a list of strings, as vLLM prints commands.
fn py_list(cmd: &[String]) -> String {
    format!("[{}]", cmd.iter().map(|t| py_quoted(t)).collect::<Vec<_>>().join(", "))
}

/// Python's repr of a parameter combination, as vLLM prints overrides.
fn py_dict(item: &Item) -> String {
    let repr = |v: &Value| match v {
        Value::String(s) => py_quoted(s),
        other => params::py_str(other),
    };
    let pairs: Vec<String> = item.0.iter().map(|(k, v)| format!("{}: {}", py_quoted(k), repr(v))).collect();
    format!("{{{}}}", pairs.join(", "))
}

/// Writes `value` as Python's `json.dump(value, f, indent=indent)` writes it.
fn write_json(path: &Path, value: &Value, indent: usize) -> anyhow::Result<()> {
    let text =
        servebench_core::pyjson::dumps_with(value, &servebench_core::pyjson::Style::with_indent(Some(indent), true));
    super::write_file(path, &text)
}

impl Sweep {
    fn read(args: SweepServeArgs, workload: Option<workload::Workload>) -> anyhow::Result<Self> {
        if args.num_runs < 1 {
            bail!("--num-runs must be at least 1");
        }
        let name = match &args.experiment_name {
            Some(n) => n.clone(),
            None => jiff::Zoned::now().strftime("%Y%m%d_%H%M%S").to_string(),
        };
        let dir = args.output_dir.join(name);
        if args.resume && !dir.exists() {
            bail!("cannot resume {}: it does not exist (leave out --resume to start it)", dir.display());
        }
        if !args.resume && dir.exists() {
            bail!("{} exists already: pass --resume to go on with it, or another --experiment-name", dir.display());
        }
        let bench_params = params::read(args.bench_params.as_deref())?;
        if let Some(w) = &workload {
            w.check(&bench_params)?;
        }
        Ok(Self {
            serve_cmd: split("--serve-cmd", &args.serve_cmd)?,
            bench_cmd: split("--bench-cmd", &args.bench_cmd)?,
            after_bench_cmd: match &args.after_bench_cmd {
                Some(c) => split("--after-bench-cmd", c)?,
                None => Vec::new(),
            },
            serve_params: params::read(args.serve_params.as_deref())?,
            bench_params,
            links: params::parse_link_vars(&args.link_vars)?,
            dir,
            args,
            workload,
        })
    }

    /// The folder of one combination's results (`extra`: a workload level's parts).
    fn comb_dir(&self, serve: &Item, bench: &Item, extra: &[String]) -> PathBuf {
        let mut parts = Vec::new();
        if !serve.is_empty() {
            parts.extend(["SERVE-".to_string(), serve.name()]);
        }
        if !bench.is_empty() {
            parts.extend(["BENCH-".to_string(), bench.name()]);
        }
        parts.extend_from_slice(extra);
        self.dir.join(params::sanitize(&parts.join("-")))
    }

    async fn run_combs(&self, out: &Sink) -> anyhow::Result<()> {
        let mut all = Vec::new();
        for serve in &self.serve_params {
            if let Err(e) = self.run_server(serve, &mut all, out).await {
                if !self.args.continue_on_error {
                    return Err(e);
                }
                let name = if serve.name().is_empty() { "default".to_string() } else { serve.name() };
                let path = self.dir.join(params::sanitize(&format!("SERVE-{name}-failure.json")));
                let record =
                    serde_json::json!({"error_type": "Error", "error": format!("{e:#}"), "serve_overrides": serve.0});
                write_json(&path, &record, 2)?;
                out.line(format!("[FAILED SERVER COMBINATION] {name}: {e:#}"))?;
                out.line(format!("Failure details: {}", path.display()))?;
            }
        }
        if !self.args.dry_run {
            super::write_file(&self.dir.join("summary.csv"), &summary_csv(&all))?;
        }
        Ok(())
    }

    /// One server combination: its server started (unless every linked benchmark of it has
    /// its summary already), its linked benchmark combinations run.
    async fn run_server(&self, serve: &Item, all: &mut Vec<Map<String, Value>>, out: &Sink) -> anyhow::Result<()> {
        // vLLM also starts a server whose only missing summaries are of unlinked combinations,
        // which never run; this does not.
        // A workload's levels are found as it runs, so its server is always started.
        let needed = self.bench_params.iter().any(|b| {
            params::linked(serve, b, &self.links)
                && (self.workload.is_some() || !self.comb_dir(serve, b, &[]).join("summary.json").exists())
        });
        if !needed {
            return Ok(());
        }
        let cmd = serve.apply_to_cmd(&self.serve_cmd);
        out.line("[BEGIN SERVER]")?;
        out.line(format!("Server overrides: {}", py_dict(serve)))?;
        out.line(format!("Server command: {}", py_list(&cmd)))?;
        let mut server = None;
        if !self.args.dry_run {
            let mut s = ServerProcess::start(cmd, self.after_bench_cmd.clone(), self.args.show_stdout)?;
            s.wait_until_ready(Duration::from_secs(self.args.server_ready_timeout)).await?;
            server = Some(s);
        }
        for bench in &self.bench_params {
            if !params::linked(serve, bench, &self.links) {
                continue;
            }
            match &self.workload {
                Some(w) => all.extend(w.explore(self, server.as_ref(), serve, bench, out).await?),
                None => all.extend(
                    self.run_comb(server.as_ref(), serve, bench, &self.comb_dir(serve, bench, &[]), out).await?,
                ),
            }
        }
        drop(server);
        out.line("[END SERVER]")?;
        Ok(())
    }

    /// One combination's warm-up and runs in `base`; the runs' data, also written as its
    /// `summary.json` (none in a dry run).
    async fn run_comb(
        &self,
        server: Option<&ServerProcess>,
        serve: &Item,
        bench: &Item,
        base: &Path,
        out: &Sink,
    ) -> anyhow::Result<Vec<Map<String, Value>>> {
        if self.args.warmup_num_prompts > 0 {
            let mut warm = bench.clone();
            warm.0.insert("num_prompts".into(), Value::from(self.args.warmup_num_prompts));
            let path = base.join("warmup.json");
            self.run_one(&Run { server, serve, bench: &warm, number: -1, path: &path }, out).await?;
        }
        let mut data = Vec::new();
        for n in 0..self.args.num_runs {
            let path = base.join(format!("run={n}.json"));
            data.extend(self.run_one(&Run { server, serve, bench, number: i64::from(n), path: &path }, out).await?);
        }
        if self.args.dry_run {
            return Ok(Vec::new());
        }
        if data.is_empty() {
            out.line("[NO SUCCESSFUL MEASURED RUNS] leaving combination retryable")?;
            return Ok(data);
        }
        let list = Value::Array(data.iter().cloned().map(Value::Object).collect());
        write_json(&base.join("summary.json"), &list, 4)?;
        Ok(data)
    }

    /// One run, its failure recorded (and `None`) under --continue-on-error.
    async fn run_one(&self, r: &Run<'_>, out: &Sink) -> anyhow::Result<Option<Map<String, Value>>> {
        let Run { server, serve, bench, number: run, path } = *r;
        match self.run_benchmark(r, out).await {
            Ok(data) => Ok(data),
            Err(e) if self.args.continue_on_error => {
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("run");
                let failure = path.with_file_name(format!("{stem}.failure.json"));
                let record = serde_json::json!({"run_number": run, "error_type": "Error", "error": format!("{e:#}"),
                    "serve_overrides": serve.0, "bench_overrides": bench.0});
                write_json(&failure, &record, 2)?;
                out.line(format!("[FAILED BENCHMARK] run={run}: {e:#}"))?;
                out.line(format!("Failure details: {}", failure.display()))?;
                if let Some(s) = server {
                    let _ = s.after_bench(out).await;
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    async fn run_benchmark(&self, r: &Run<'_>, out: &Sink) -> anyhow::Result<Option<Map<String, Value>>> {
        let Run { server, serve, bench, number: run, path } = *r;
        let dir = path.parent().unwrap_or(Path::new("."));
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or_default();
        let mut cmd = bench.apply_to_cmd(&self.bench_cmd);
        cmd.extend(PERCENTILES.map(String::from));
        cmd.extend(["--save-result".into(), "--result-dir".into(), dir.display().to_string()]);
        cmd.extend(["--result-filename".into(), file.to_string()]);
        out.line("[BEGIN BENCHMARK]")?;
        out.line(format!("Benchmark overrides: {}", py_dict(bench)))?;
        out.line(format!("Run Number: {run}"))?;
        out.line(format!("Benchmark command: {}", py_list(&cmd)))?;
        out.line(format!("Output file: {}", path.display()))?;
        if path.exists() {
            out.line("Found existing results.")?;
            out.line("[SKIPPED BENCHMARK]")?;
            return Ok(Some(with_overrides(read_result(path)?, serve, bench, run)));
        }
        let Some(server) = server else {
            if !self.args.dry_run {
                bail!("cannot find results at {}", path.display());
            }
            out.line("[END BENCHMARK]")?;
            return Ok(None);
        };
        std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
        if let Err(e) = run_bench_cmd(&cmd, self.args.show_stdout).await {
            // What a failed run measured is kept, under a name --resume does not take for a
            // finished run's.
            if path.exists() {
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("run");
                let partial = path.with_file_name(format!("{stem}.partial.json"));
                std::fs::rename(path, &partial).with_context(|| format!("could not move {}", path.display()))?;
                return Err(e.context(format!("what it measured is in {}", partial.display())));
            }
            return Err(e);
        }
        server.after_bench(out).await?;
        let data = with_overrides(read_result(path)?, serve, bench, run);
        write_json(path, &Value::Object(data.clone()), 4)?;
        out.line("[END BENCHMARK]")?;
        Ok(Some(data))
    }
}

/// A run's result JSON.
fn read_result(path: &Path) -> anyhow::Result<Map<String, Value>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("the benchmark wrote no result at {}", path.display()))?;
    match serde_json::from_str(&text).with_context(|| format!("{} is not a result JSON", path.display()))? {
        Value::Object(m) => Ok(m),
        _ => bail!("{} is not a result JSON object", path.display()),
    }
}

/// A run's data with its number and both combinations' parameters, as vLLM adds them.
fn with_overrides(mut data: Map<String, Value>, serve: &Item, bench: &Item, run: i64) -> Map<String, Value> {
    data.insert("run_number".into(), Value::from(run));
    data.extend(serve.0.clone());
    data.extend(bench.0.clone());
    data
}

/// Runs a benchmark command: `vllm bench serve` and `servebench bench serve` as this
/// program's `bench serve` in this process (its report shown with --show-stdout, its last
/// lines in the error when it fails); anything else as a process.
async fn run_bench_cmd(cmd: &[String], show_stdout: bool) -> anyhow::Result<()> {
    let program = cmd[0].rsplit('/').next().unwrap_or(&cmd[0]);
    let ours = matches!(program, "vllm" | "servebench") && cmd.get(1..3) == Some(&["bench".into(), "serve".into()]);
    if !ours {
        return server::run_subcommand(cmd, show_stdout);
    }
    let argv = ["servebench".to_string()].into_iter().chain(cmd[1..].iter().cloned()).map(Into::into);
    let argv = crate::cli::compat::prepare_argv(argv).map_err(|e| anyhow::anyhow!("--bench-cmd: {e}"))?;
    let parsed =
        <crate::cli::Cli as clap::Parser>::try_parse_from(argv).map_err(|e| anyhow::anyhow!("--bench-cmd: {e}"))?;
    let crate::cli::Command::Bench(crate::cli::BenchCommand::Serve(args)) = parsed.command else {
        bail!("--bench-cmd is not a `bench serve` command");
    };
    let sink = if show_stdout { Sink::Stdout } else { Sink::memory() };
    let code = Box::pin(super::bench::serve(*args, &sink)).await?;
    if code != ExitCode::SUCCESS {
        let text = sink.text();
        let tail: Vec<&str> = text.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
        bail!("the benchmark failed: {}", tail.join(" / "));
    }
    Ok(())
}

/// The runs as one table, as pandas writes a frame of them: an unnamed index column, then
/// every key in the order first seen; `True`/`False`, empty for none, lists and objects as
/// their JSON, a field with a comma or a quote quoted.
fn summary_csv(rows: &[Map<String, Value>]) -> String {
    let mut columns: Vec<&String> = Vec::new();
    for k in rows.iter().flat_map(Map::keys) {
        if !columns.contains(&k) {
            columns.push(k);
        }
    }
    let field = |s: String| {
        if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s }
    };
    let mut out = String::new();
    out.push_str(
        &std::iter::once(String::new())
            .chain(columns.iter().map(|c| field((*c).clone())))
            .collect::<Vec<_>>()
            .join(","),
    );
    out.push('\n');
    for (i, row) in rows.iter().enumerate() {
        let cells = columns.iter().map(|c| match row.get(*c) {
            None | Some(Value::Null) => String::new(),
            Some(v) => field(params::py_str(v)),
        });
        out.push_str(&std::iter::once(i.to_string()).chain(cells).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_summary_table_has_every_key_in_the_order_first_seen() {
        let rows: Vec<Map<String, Value>> = [
            json!({"completed": 10, "mean_ttft_ms": 12.5, "label": "a,b", "run_number": 0}),
            json!({"completed": 9, "ok": true, "run_number": 1, "label": null, "x": [1, 2]}),
        ]
        .into_iter()
        .map(|v| v.as_object().unwrap().clone())
        .collect();
        assert_eq!(
            summary_csv(&rows),
            ",completed,mean_ttft_ms,label,run_number,ok,x\n0,10,12.5,\"a,b\",0,,\n1,9,,,1,True,\"[1, 2]\"\n"
        );
    }

    #[test]
    fn commands_and_overrides_print_as_python_prints_them() {
        assert_eq!(py_list(&["vllm".into(), "it's".into()]), r"['vllm', 'it\'s']");
        let item = Item(json!({"a": 1, "b": "x", "c": false}).as_object().unwrap().clone());
        assert_eq!(py_dict(&item), "{'a': 1, 'b': 'x', 'c': False}");
        // Keys and string values quoted as the command's words are.
        let quoted = Item([("it's".to_string(), Value::from("a\\b"))].into_iter().collect());
        assert_eq!(py_dict(&quoted), r"{'it\'s': 'a\\b'}");
        assert!(split("--serve-cmd", "vllm 'serve").unwrap_err().to_string().contains("unclosed quote"));
        assert_eq!(split("--bench-cmd", "vllm bench serve --model 'a b'").unwrap()[4], "a b");
    }
}
