//! Flags of `servebench launch k8s` and `servebench launch slurm`: how many workers, where
//! their results go, and the `bench serve` (or `sweep`) flags every worker runs with.

use clap::{Args, Subcommand};

/// `servebench launch ...`
#[derive(Subcommand, Debug, Clone)]
pub enum LaunchCommand {
    /// Print a Kubernetes manifest: an Indexed Job of WORKERS pods and a headless Service for
    /// rank 0's rendezvous; results on a shared volume.
    K8s(K8sArgs),
    /// Print an sbatch script: `srun` over WORKERS tasks, results on the shared file system,
    /// `servebench merge` as the last step.
    Slurm(SlurmArgs),
}

/// What every launcher takes.
#[derive(Args, Debug, Clone)]
pub struct LaunchCommon {
    /// Worker processes in all (the world size).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: u32,
    /// The port rank 0 serves the rendezvous on.
    #[arg(long, default_value_t = 29500)]
    pub port: u16,
    /// The workers run a grid `sweep` (every point sharded, the workers meeting before each)
    /// instead of one `bench serve`; the merge makes one run per point (`merge --per-run`).
    #[arg(long)]
    pub sweep: bool,
    /// The `bench serve` (or `sweep`) flags every worker runs with, after `--` (the launcher
    /// adds --shard, --coordinator and --result-dir).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

/// `servebench launch k8s`
#[derive(Args, Debug, Clone)]
pub struct K8sArgs {
    #[command(flatten)]
    pub common: LaunchCommon,
    /// The container image holding the `servebench` binary (its entrypoint or on its PATH).
    #[arg(long)]
    pub image: String,
    /// The Job's and the Service's name.
    #[arg(long, default_value = "servebench")]
    pub name: String,
    /// The namespace (the current one when left out).
    #[arg(long)]
    pub namespace: Option<String>,
    /// The PersistentVolumeClaim (ReadWriteMany) the workers write their results to.
    #[arg(long, default_value = "servebench-results")]
    pub results_claim: String,
    /// Where the claim is mounted in each pod; results go to a folder named after the Job.
    #[arg(long, default_value = "/results")]
    pub results_dir: String,
    /// CPU cores requested per worker.
    #[arg(long, default_value = "1")]
    pub cpu: String,
}

/// `servebench launch slurm`
#[derive(Args, Debug, Clone)]
pub struct SlurmArgs {
    #[command(flatten)]
    pub common: LaunchCommon,
    /// Nodes to spread the tasks over (Slurm decides when left out).
    #[arg(long)]
    pub nodes: Option<u32>,
    #[arg(long, default_value = "servebench")]
    pub job_name: String,
    /// The time limit (`--time`), e.g. 01:00:00.
    #[arg(long)]
    pub time: Option<String>,
    #[arg(long)]
    pub partition: Option<String>,
    /// A folder on the shared file system; each job writes to a subfolder named by its id.
    #[arg(long, default_value = "servebench-results")]
    pub results_dir: String,
    /// The servebench binary as the compute nodes see it.
    #[arg(long, default_value = "servebench")]
    pub binary: String,
}
