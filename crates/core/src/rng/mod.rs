//! Bit-exact ports of the random generators vLLM's benchmark uses, so servebench draws the same
//! lengths, token ids, shuffles and arrival gaps as `vllm bench serve` for the same seed:
//!
//! - [`RandomState`]: numpy's legacy `np.random` (MT19937, gamma, randint): arrival gaps and
//!   the `prefix_repetition` dataset.
//! - [`PyRandom`]: CPython's `random.Random`: dataset shuffles and oversampling.
//! - [`Generator`]: numpy's `default_rng` (SeedSequence + PCG64, Lemire `integers`): the
//!   `random` dataset.
//!
//! Each is checked against draws recorded from numpy and CPython (`vectors/`).

pub mod bounded;
mod legacy;
pub mod mt19937;
mod pcg64;
mod pyrandom;

pub use legacy::RandomState;
pub use pcg64::{Generator, Pcg64, SeedSequence};
pub use pyrandom::PyRandom;
