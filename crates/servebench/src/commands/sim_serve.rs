//! `servebench sim serve`: a simulated engine behind an OpenAI-compatible HTTP API.
//!
//! Resolves the deployment (unknown presets and deployments that do not fit fail here with the
//! simulator's own messages), prints what was resolved and where it listens, then serves until
//! Ctrl-C or SIGTERM and shuts down gracefully.

use servebench_sim::SimSetup;
use servebench_sim::server::{ServerOptions, start};
use std::process::ExitCode;

use crate::cli::sim_serve::SimServeArgs;
use crate::commands::bench::interrupted;
use crate::commands::resolve::load_tokenizer;
use crate::output::Sink;

/// Open files wanted: one per connection, for thousands of concurrent clients.
const WANTED_FILES: u64 = 65_536;

pub async fn run(args: SimServeArgs) -> anyhow::Result<ExitCode> {
    let out = Sink::Stdout;
    let d = &args.deployment;
    let setup = super::resolve::deployment_setup(d)?;
    let tokenizer = args.tokenizer.as_deref().map(load_tokenizer).transpose()?;
    if let Err(e) = servebench_client::raise_nofile_limit(WANTED_FILES) {
        out.line(format!("WARNING: could not raise the open-file limit ({e}); many concurrent clients may fail."))?;
    }
    for line in deployment_summary(&setup) {
        out.line(line)?;
    }
    let options = ServerOptions {
        host: args.host.clone(),
        port: args.port,
        served_model_name: args.served_model_name.clone(),
        tokenizer,
        seed: args.seed,
        dialect: args.dialect.parse()?,
    };
    let server = start(setup, options).await?;
    out.line(server.startup_line())?;
    out.line("Press Ctrl-C to stop.")?;
    interrupted().await;
    out.line("Shutting down...")?;
    server.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

/// What the deployment resolved to: the memory plan's notes, the KV capacity and the context.
fn deployment_summary(setup: &SimSetup) -> Vec<String> {
    let m = &setup.memory;
    let mut out: Vec<String> = setup.all_notes().cloned().collect();
    out.push(format!(
        "KV cache: {} tokens in blocks of {}, {:.1} KiB per token per GPU",
        m.kv_tokens,
        m.layout.block_size,
        m.kv_bytes_per_token / 1024.0
    ));
    out.push(format!("max_model_len: {}", setup.max_model_len));
    out
}
