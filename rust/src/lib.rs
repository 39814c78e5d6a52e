//! dafka: a Rust core for Dafka (ZeroMQ RFC 46/DAFKA), the decentralized
//! streaming platform, exposed to Python through PyO3.
//!
//! Modules:
//! - [`wire`]: the pure codec (both dialects, beacons, subscriptions).
//! - [`node`]: towers, producers and consumers, one thread each.
//! - [`error`]: the crate error type.
//! - `python` (feature `python`): the PyO3 bindings, nothing else.

pub mod error;
pub mod node;
pub mod wire;

#[cfg(feature = "python")]
mod python;
