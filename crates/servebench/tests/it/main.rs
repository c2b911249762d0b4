//! Integration tests of the servebench commands, run in-process.

mod bench_cli;
mod report;
mod sim_http;
mod store;
