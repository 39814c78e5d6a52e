//! Dafka nodes, each one OS thread owning its sockets ([`actor`]): the
//! [`tower`], the [`producer`], the [`consumer`] and the [`store`] (its
//! protocol decisions in [`store_logic`]), and the read clients of batch
//! jobs ([`fetcher`]). What every node shares lives in [`core`] (XPUB/XSUB,
//! [`Out`](core::Out), stats), [`beacon`] (discovery) and [`config`] (typed
//! settings with documented defaults). Protocol decisions are pure state
//! machines, unit-tested without sockets.

pub mod actor;
pub mod batch;
pub mod beacon;
pub mod config;
pub mod consumer;
pub mod fetcher;
mod held;
pub mod out;
pub mod producer;
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
