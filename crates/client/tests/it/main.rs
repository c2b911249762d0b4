//! Integration tests of the load engine against the scripted test server: measurements are
//! compared with the truth the server recorded on the same clock.

mod accuracy;
mod common;
mod concurrency;
mod failures;
mod health;
mod keepalive;
mod lifecycle;
mod multi_turn;
mod streams;
mod telemetry;
mod tls;
