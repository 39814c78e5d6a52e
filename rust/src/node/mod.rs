//! Dafka nodes, each one OS thread owning its sockets ([`actor`]): the
//! [`tower`], the [`producer`], the [`consumer`] and the [`store`], and the
//! read clients of batch jobs ([`fetcher`]).
//!
//! Every node kind is a folder of the same shape:
//!
//! | file | holds |
//! |---|---|
//! | `mod.rs` | the handle the application holds ([`Producer`], [`Consumer`], [`Store`]) and its public types |
//! | `state.rs` | the protocol decisions as a pure state machine, no sockets, unit-tested beside it ([`ProducerState`], [`ConsumerState`], [`StoreState`](store::StoreState)) |
//! | `run.rs` | the event loop: receives, calls the state, sends what it returns; no decisions |
//! | `durable.rs` | the store only: [`DurableLog`](store::DurableLog), the storage under it (group commit, recovery) |
//!
//! Where to look:
//! - the consumer decides to FETCH a gap, retries it or gives it up:
//!   [`consumer::state`];
//! - the store decides what is durable and may be ACKed, which records to
//!   append or hold, which gaps to FETCH: [`store::state`] (the durable log's
//!   group commit itself: [`store::durable`]);
//! - the producer counts ACKs against `min_acks`, answers FETCHes and sends
//!   HEADs: [`producer::state`].
//!
//! What every node shares: [`out`] (the pure [`Out`](out::Out) messages a
//! state returns, FETCH back-off, poll deadlines), [`socket`] (the XPUB/XSUB
//! [`Core`](socket::Core) that sends them, receive buffers, the zmq FFI),
//! [`stats`] (counters), [`beacon`] (discovery) and [`config`] (typed
//! settings with documented defaults, and the limits they are checked
//! against). `state.rs` files import from these, never from a `run.rs` or
//! a handle. The tests that start real nodes are in `rust/tests/`.

pub mod actor;
pub mod answers;
pub mod batch;
pub mod beacon;
pub mod config;
pub mod consumer;
pub mod fetcher;
mod held;
pub mod monitor;
pub mod out;
pub mod producer;
pub mod receive;
pub mod secure;
pub mod socket;
pub mod stats;
pub mod store;
pub mod tower;

pub use batch::Batch;
pub use config::{ConsumerConfig, NodeConfig, OffsetReset, ProducerConfig, TowerConfig};
pub use consumer::{Consumer, ConsumerState, Delivery};
pub use producer::{Producer, ProducerState};
pub use store::{Store, StoreConfig};
pub use tower::Tower;
