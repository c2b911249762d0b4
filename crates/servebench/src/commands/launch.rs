//! `servebench launch k8s|slurm`: prints what runs a sharded `bench serve` (or grid `sweep`)
//! on an existing engine, for the user to apply (`kubectl apply -f -`, `sbatch`). Nothing is
//! submitted.
//!
//! Every worker runs `bench serve --shard auto ... --coordinator RANK0:PORT --result-dir DIR`
//! with the user's flags: the rank comes from the engine (`JOB_COMPLETION_INDEX`,
//! `SLURM_PROCID`), rank 0 hosts the rendezvous, and the results land in one folder for
//! `servebench merge` (`merge --per-run` for a sweep: one run per point).

use std::process::ExitCode;

use crate::cli::launch_args::{K8sArgs, LaunchCommand, LaunchCommon, SlurmArgs};
use crate::output::Sink;

/// Flags the launcher sets itself.
const RESERVED: [&str; 5] = ["--shard", "--coordinator", "--start-at", "--workers", "--result-dir"];

pub fn execute(command: LaunchCommand, out: &Sink) -> anyhow::Result<ExitCode> {
    let text = match command {
        LaunchCommand::K8s(args) => k8s_manifest(&args)?,
        LaunchCommand::Slurm(args) => sbatch_script(&args)?,
    };
    out.out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// Refuses a value the launcher writes into a script or manifest line that is empty or holds
/// a control character (a newline would end the line and start a command), or, where `word`,
/// any white space.
fn check_field(flag: &str, value: &str, word: bool) -> anyhow::Result<()> {
    if value.trim().is_empty() {
        anyhow::bail!("{flag} is empty; give it a value");
    }
    if let Some(c) = value.chars().find(|c| c.is_control() || (word && c.is_whitespace())) {
        anyhow::bail!(
            "{flag} {value:?} holds {}: it is written into the script as one {}",
            if c.is_control() { format!("the control character {c:?}") } else { "a space".to_string() },
            if word { "word" } else { "line" }
        );
    }
    Ok(())
}

/// A Kubernetes CPU quantity: a number of cores, or of millicores with `m`, from 1m (the
/// finest Kubernetes takes) up.
fn check_cpu(cpu: &str) -> anyhow::Result<()> {
    let (number, per_core) = match cpu.strip_suffix('m') {
        Some(millicores) => (millicores, 1.0),
        None => (cpu, 1000.0),
    };
    let Some(millicores) = number.parse::<f64>().ok().filter(|v| v.is_finite() && !number.starts_with('+')) else {
        anyhow::bail!("--cpu {cpu:?} is not a CPU request; write cores (2, 0.5) or millicores (500m)");
    };
    let millicores = millicores * per_core;
    if millicores < 1.0 {
        anyhow::bail!(
            "--cpu {cpu:?} is below 1m: the smallest CPU request Kubernetes takes is 1m (0.001 cores); give 1m or more"
        );
    }
    // Kubernetes keeps no finer precision than 1m: it would round such a request up unasked.
    if (millicores - millicores.round()).abs() > 1e-6 {
        anyhow::bail!(
            "--cpu {cpu:?} is finer than 1m: Kubernetes takes CPU in whole millicores (1m = 0.001 cores); give {}m",
            millicores.ceil()
        );
    }
    Ok(())
}

/// Refuses user flags that the launcher sets or that cannot work sharded.
fn check_args(common: &LaunchCommon) -> anyhow::Result<()> {
    if common.port == 0 {
        anyhow::bail!("--port 0 is not a port the workers can meet on; give one such as 29500");
    }
    for arg in &common.args {
        let flag = flag_name(arg);
        if RESERVED.contains(&flag) {
            anyhow::bail!("leave out {flag}: the launcher sets it for every worker");
        }
        if common.sweep && ["--search", "--predict"].contains(&flag) {
            anyhow::bail!(
                "leave out {flag}: sharded sweeps are grids measured in real time (an SLO search runs sharded \
                 only with --workers on one machine)"
            );
        }
        if flag == "--sim" {
            anyhow::bail!(
                "--sim would start a simulator inside every worker; point the workers at one server with --base-url \
                 (for example a `servebench sim serve` pod)"
            );
        }
    }
    // The workers' command line as they will run it (the launcher's own flags given sample
    // values): a misspelt or missing flag fails here, not once the pods or tasks start.
    let (words, _) = command(common);
    let argv = ["servebench"]
        .iter()
        .chain(words)
        .map(|w| w.to_string())
        .chain(["--shard", "0/2", "--coordinator", "rank0:29500", "--result-dir", "results"].map(String::from));
    let cli = match <crate::cli::Cli as clap::Parser>::try_parse_from(argv.chain(common.args.iter().cloned())) {
        Ok(cli) => cli,
        Err(e) => {
            let first = e.to_string().lines().next().unwrap_or_default().trim_start_matches("error: ").to_string();
            anyhow::bail!("the workers' `{}` flags after -- do not parse: {first}", words.join(" "));
        }
    };
    // A sweep's own flags (its grid, --by, --slo) are checked as `sweep` checks them before
    // its first run, so a mistake is refused here rather than in every worker.
    if let crate::cli::Command::Sweep(args) = cli.command {
        crate::commands::sweep::check(*args)
            .map_err(|e| anyhow::anyhow!("the workers' `sweep` flags after --: {e}"))?;
    }
    Ok(())
}

/// What every worker runs (`bench serve` or `sweep`), and the merge's extra flag.
fn command(common: &LaunchCommon) -> (&'static [&'static str], &'static str) {
    if common.sweep { (&["sweep"], " --per-run") } else { (&["bench", "serve"], "") }
}

/// Whether the user chose the request-id prefix; else the launcher gives every worker one.
fn has_prefix(common: &LaunchCommon) -> bool {
    common.args.iter().any(|a| flag_name(a) == "--request-id-prefix")
}

/// `--flag` of `--flag` or `--flag=VALUE`.
fn flag_name(arg: &str) -> &str {
    arg.split('=').next().unwrap_or(arg)
}

/// The Kubernetes names the launcher writes, each kind with its own rule.
#[derive(Clone, Copy, Debug, PartialEq)]
enum K8sName {
    /// A Service's (a DNS-1035 label), which the Job and its pods' host names share.
    Service,
    /// A namespace's (a DNS-1123 label).
    Namespace,
    /// A PersistentVolumeClaim's (a DNS-1123 subdomain: labels joined by '.').
    Claim,
}

/// Refuses `name` unless Kubernetes takes it as a `kind` name of at most `most` characters:
/// lowercase letters, digits and '-' (and '.' between the labels of a claim's name), each
/// label from a letter or digit (a Service's from a letter) to a letter or digit.
fn k8s_name(flag: &str, name: &str, kind: K8sName, most: usize) -> anyhow::Result<()> {
    let letter_first = kind == K8sName::Service;
    let label = |l: &str| {
        let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && l.starts_with(|c: char| if letter_first { c.is_ascii_lowercase() } else { alphanumeric(c) })
            && l.ends_with(alphanumeric)
    };
    let fits = match kind {
        K8sName::Claim => name.split('.').all(label),
        K8sName::Service | K8sName::Namespace => label(name),
    };
    if fits && name.len() <= most {
        return Ok(());
    }
    let (what, chars, ends, example) = match kind {
        K8sName::Service => (
            "the Job's and Service's name",
            "lowercase letters, digits and '-'",
            "begins with a letter and ends with a letter or digit",
            "servebench",
        ),
        K8sName::Namespace => {
            ("a namespace", "lowercase letters, digits and '-'", "begins and ends with a letter or digit", "benchmarks")
        }
        K8sName::Claim => (
            "a PersistentVolumeClaim's name",
            "lowercase letters, digits, '-' and '.'",
            "each part between dots begins and ends with a letter or digit",
            "servebench-results",
        ),
    };
    anyhow::bail!(
        "{flag} {name:?}: in Kubernetes {what} is {chars}, {ends}, and here takes at most {most} characters; \
         give one such as {example}"
    )
}

/// A YAML (and JSON) double-quoted string.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// A word for a POSIX shell: as is when plain, else single-quoted.
pub(crate) fn shell_word(s: &str) -> String {
    let plain = !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:=@,+%".contains(&b));
    if plain { s.to_string() } else { format!("'{}'", s.replace('\'', r"'\''")) }
}

/// The Indexed Job and its headless Service.
/// The most completions (and pods) Kubernetes allows an Indexed Job.
const MAX_INDEXED_COMPLETIONS: u32 = 100_000;

pub fn k8s_manifest(a: &K8sArgs) -> anyhow::Result<String> {
    check_args(&a.common)?;
    check_field("--image", &a.image, true)?;
    check_cpu(&a.cpu)?;
    check_field("--results-claim", &a.results_claim, true)?;
    k8s_name("--results-claim", &a.results_claim, K8sName::Claim, 253)?;
    check_field("--results-dir", &a.results_dir, false)?;
    if !a.results_dir.starts_with('/') {
        anyhow::bail!(
            "--results-dir {:?}: a volume's mount path is absolute; give one such as /results",
            a.results_dir
        );
    }
    if let Some(n) = &a.namespace {
        check_field("--namespace", n, true)?;
        k8s_name("--namespace", n, K8sName::Namespace, 63)?;
    }
    let (name, world, port) = (&a.name, a.common.workers, a.common.port);
    if world > MAX_INDEXED_COMPLETIONS {
        anyhow::bail!(
            "--workers {world}: Kubernetes runs at most {MAX_INDEXED_COMPLETIONS} pods in an Indexed Job; give fewer"
        );
    }
    // Each worker's host name is NAME-INDEX, itself a label of at most 63 characters.
    k8s_name("--name", name, K8sName::Service, 63 - 1 - (world.max(1) - 1).to_string().len())?;
    let results = format!("{}/{name}", a.results_dir.trim_end_matches('/'));
    let (words, per_run) = command(&a.common);
    let mut args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    args.extend([
        "--shard".into(),
        format!("auto/{world}"),
        "--coordinator".into(),
        format!("{name}-0.{name}:{port}"),
        "--result-dir".into(),
        results,
    ]);
    if !has_prefix(&a.common) {
        args.extend(["--request-id-prefix".to_string(), format!("{name}-")]);
    }
    args.extend(a.common.args.iter().cloned());
    let namespace = a.namespace.as_ref().map(|n| format!("\n  namespace: {}", quoted(n))).unwrap_or_default();
    let args_yaml: String = args.iter().map(|x| format!("\n            - {}", quoted(x))).collect();
    Ok(format!(
        r#"# servebench: {world} workers of one sharded `{what}`, ranks from the Job's completion index.
# Apply with `kubectl apply -f -`; when the Job completes, merge the results on the volume
# with `servebench merge{per_run} {results_dir}/{name}` (see the README).
apiVersion: v1
kind: Service
metadata:
  name: {name}{namespace}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector:
    batch.kubernetes.io/job-name: {name}
  ports:
    - name: rendezvous
      port: {port}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}{namespace}
spec:
  completionMode: Indexed
  completions: {world}
  parallelism: {world}
  backoffLimit: 0
  template:
    spec:
      subdomain: {name}
      restartPolicy: Never
      containers:
        - name: servebench
          image: {image}
          args:{args_yaml}
          env:
            - name: JOB_COMPLETION_INDEX
              valueFrom:
                fieldRef:
                  fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
            - name: SERVEBENCH_WORLD
              value: "{world}"
          ports:
            - containerPort: {port}
              name: rendezvous
          resources:
            requests:
              cpu: {cpu}
          volumeMounts:
            - name: results
              mountPath: {results_dir}
      volumes:
        - name: results
          persistentVolumeClaim:
            claimName: {claim}
"#,
        what = words.join(" "),
        image = quoted(&a.image),
        cpu = quoted(&a.cpu),
        results_dir = a.results_dir.trim_end_matches('/'),
        claim = quoted(&a.results_claim),
    ))
}

/// The sbatch script.
pub fn sbatch_script(a: &SlurmArgs) -> anyhow::Result<String> {
    check_args(&a.common)?;
    check_field("--job-name", &a.job_name, true)?;
    for (flag, value) in [("--time", &a.time), ("--partition", &a.partition)] {
        if let Some(v) = value {
            check_field(flag, v, true)?;
        }
    }
    check_field("--results-dir", &a.results_dir, false)?;
    check_field("--binary", &a.binary, false)?;
    let (world, port) = (a.common.workers, a.common.port);
    match a.nodes {
        Some(0) => anyhow::bail!("--nodes 0: a job needs at least one node"),
        Some(n) if n > world => {
            anyhow::bail!(
                "--nodes {n} is more than --workers {world}: a node would run no worker; give at most {world}"
            )
        }
        _ => {}
    }
    let mut directives = vec![format!("--job-name={}", a.job_name), format!("--ntasks={world}")];
    directives.extend(a.nodes.map(|n| format!("--nodes={n}")));
    directives.extend(a.time.as_ref().map(|t| format!("--time={t}")));
    directives.extend(a.partition.as_ref().map(|p| format!("--partition={p}")));
    let directives: String = directives.iter().map(|d| format!("#SBATCH {d}\n")).collect();
    let user: String = a.common.args.iter().map(|x| format!(" {}", shell_word(x))).collect();
    let bin = shell_word(&a.binary);
    let results = shell_word(a.results_dir.trim_end_matches('/'));
    let (words, per_run) = command(&a.common);
    let what = words.join(" ");
    let prefix = if has_prefix(&a.common) { "" } else { r#" --request-id-prefix "bench-$SLURM_JOB_ID-""# };
    Ok(format!(
        r#"#!/bin/bash
# servebench: {world} workers of one sharded `{what}`, ranks from SLURM_PROCID; submit with sbatch.
{directives}set -euo pipefail

RESULTS={results}/"$SLURM_JOB_ID"
mkdir -p "$RESULTS"
# Task 0 runs on the first node of the allocation and hosts the rendezvous.
COORDINATOR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1):{port}"

srun --ntasks={world} {bin} {what} --shard auto --coordinator "$COORDINATOR" --result-dir "$RESULTS"{prefix}{user}

{bin} merge{per_run} "$RESULTS" --result-dir "$RESULTS"
"#
    ))
}

#[cfg(test)]
mod tests;
