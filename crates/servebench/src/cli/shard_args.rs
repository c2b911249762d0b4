//! `bench serve`'s flags for sharded runs: which share of the plan this worker sends, how the
//! workers agree on their start, and `--workers` to run several locally.

use clap::Args;

/// Sharding: one plan sent by many workers, merged afterwards with `servebench merge`.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Sharded runs")]
pub struct ShardArgs {
    /// This worker's share of the plan: RANK/WORLD (0/4); `auto` reads SLURM_PROCID and
    /// SLURM_NTASKS, or a Kubernetes Indexed Job's JOB_COMPLETION_INDEX with the world size
    /// in SERVEBENCH_WORLD or as auto/WORLD. Implies --save-result --save-detailed (the merge
    /// needs every record) and --no-store (the merged run is stored).
    #[arg(long, value_name = "RANK/WORLD", env = "SERVEBENCH_SHARD")]
    pub shard: Option<String>,
    /// Rank 0's rendezvous, HOST:PORT: rank 0 serves it, the others join it; every worker
    /// measures its clock against rank 0's and all start together.
    #[arg(long, value_name = "HOST:PORT", env = "SERVEBENCH_COORDINATOR")]
    pub coordinator: Option<String>,
    /// Start the timed run at this instant (RFC 3339, or seconds since the Unix epoch),
    /// with clocks kept in step by NTP or PTP, instead of a rendezvous.
    #[arg(long, value_name = "TIME", conflicts_with = "coordinator")]
    pub start_at: Option<String>,
    /// How long rank 0 waits for every worker to join, and a worker for rank 0, in seconds.
    #[arg(long, default_value_t = 600.0, value_name = "SECONDS")]
    pub rendezvous_timeout: f64,
    /// Run N worker processes of this binary on this machine, each sending its share, and
    /// merge their results into this run's report.
    #[arg(long, value_name = "N", conflicts_with_all = ["shard", "coordinator", "start_at"],
          value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: Option<u32>,
    /// Set by `--workers` for its worker processes: where they write their results.
    #[arg(long, hide = true, env = "SERVEBENCH_WORKER_DIR")]
    pub worker_dir: Option<String>,
    /// Set by `--workers` for its worker processes: the simulator the parent started.
    #[arg(long, hide = true, env = "SERVEBENCH_SIM_URL")]
    pub sim_url: Option<String>,
}
