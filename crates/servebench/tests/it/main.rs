//! Integration tests of the servebench commands, run in-process.

mod store;
