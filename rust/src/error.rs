//! The crate's error type for everything that is not a wire decode error: node
//! start-up, configuration, a node thread that died, a full producer buffer.

use thiserror::Error;

/// What a node operation can fail with. Python maps each variant to one
/// `dafka.exceptions` class (`rust/src/python/errors.rs`).
#[derive(Debug, Error)]
pub enum Error {
    /// A configuration value is out of range or malformed (Python: `ValueError`).
    #[error("{0}")]
    Config(String),
    /// A socket could not bind or connect.
    #[error("cannot {op} {endpoint}: {source}")]
    Socket {
        op: &'static str,
        endpoint: String,
        source: zmq::Error,
    },
    /// Any other ZeroMQ failure.
    #[error("zmq: {0}")]
    Zmq(#[from] zmq::Error),
    /// The node thread stopped with an error or a panic.
    #[error("node thread stopped: {0}")]
    Died(String),
    /// The node was closed; create a new one.
    #[error("the node is closed")]
    Closed,
    /// The producer's unacknowledged buffer stayed full until the timeout.
    #[error("{0}")]
    BufferFull(String),
    /// A value over the producer's `max_record_bytes` (Python: `ValueError`).
    #[error("{0}")]
    TooLarge(String),
    /// The durable log failed (I/O, corruption, a bad offset).
    #[error(transparent)]
    Log(#[from] crate::log::LogError),
    /// Records a bounded read needed are gone from every store (retention).
    #[error("{0}")]
    DataLoss(String),
    /// A bounded read or a heads query got no (complete) answer in time.
    #[error("{0}")]
    Timeout(String),
    /// A blocking call was interrupted by the caller's check (Ctrl-C from Python).
    #[error("interrupted")]
    Interrupted,
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
