//! dafka: a Rust core for Dafka (ZeroMQ RFC 46/DAFKA), the decentralized
//! streaming platform, exposed to Python through PyO3.
//!
//! Modules:
//! - [`wire`]: the pure codec (both dialects, beacons, subscriptions, the
//!   consumer-group extension).
//! - [`log`]: the durable segment store (no sockets).
//! - [`meta`]: a record's key, headers and create time, encoded (wire and log).
//! - [`node`]: towers, producers, consumers and stores, one thread each.
//! - [`security`]: CURVE certificates, trust directories, the ZAP handler,
//!   roles and topic patterns (secure clusters).
//! - [`error`]: the crate error type.
//! - [`group`]: consumer groups without a coordinator (docs/groups.md):
//!   assignment, a member's view, commit records (pure; the messages are in
//!   [`wire::group`], the nodes' use of them in `node/`).
//! - [`cli`]: the `dafka-store` / `dafka-tower` command lines and config file,
//!   shared by the binaries and the Python `dafka store` / `dafka tower`.
//! - `python` (feature `python`): the PyO3 bindings, nothing else.

pub mod cli;
pub mod error;
pub mod group;
pub mod log;
pub mod meta;
pub mod metrics;
pub mod node;
pub mod security;
pub mod wire;

#[cfg(feature = "python")]
mod python;
