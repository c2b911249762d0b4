//! Integration tests of the servebench commands, run in-process.

mod bench_cli;
mod capacity;
mod common;
mod dialects;
mod file_datasets;
mod pipeline;
mod pooling;
mod probes;
mod real_server;
mod report;
mod selftest;
mod shards;
mod sim_cli;
mod sim_fit_cli;
mod sim_http;
mod sim_step_memory;
mod sim_validate_cli;
mod spec_decode;
mod stop_rules;
mod store;
mod sweep;
mod sweep_plot;
mod sweep_serve;
