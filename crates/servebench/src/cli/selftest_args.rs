//! `servebench selftest`'s flags.

use clap::Args;

/// `servebench selftest`: the client against the built-in scripted server at rising concurrency.
#[derive(Args, Debug, Clone)]
pub struct SelftestArgs {
    /// Concurrent streams, one level each, comma-separated.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "1,100,1000,2048,4096")]
    pub levels: Vec<usize>,
    /// The server's time to the first token, ms.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    pub ttft_ms: u64,
    /// The server's gap between tokens, ms.
    #[arg(long, value_name = "MS", default_value_t = 10)]
    pub itl_ms: u64,
    /// Tokens per answer (one per streamed chunk).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub output_tokens: u32,
    /// Requests per level, as a multiple of its streams (at least 50 requests).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub requests_per_stream: usize,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The run store (SQLite); default in the user's data directory, or $SERVEBENCH_DB.
    #[arg(long, value_name = "PATH")]
    pub db: Option<String>,
    /// Do not save the levels' runs to the run store.
    #[arg(long)]
    pub no_store: bool,
}
