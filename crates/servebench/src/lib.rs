//! servebench: measure, predict and compare the performance of LLM serving engines.
//!
//! This crate is the command layer: flags parse into clap structs ([`cli`]), resolve once into a
//! validated config, and each subcommand in [`commands`] drives the library crates. `main.rs`
//! only calls [`run`].

pub mod cli;
