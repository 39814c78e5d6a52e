//! The crate's error type for everything that is not a wire decode error: node
//! start-up, configuration, a node thread that died, a full producer buffer,
//! a bounded read that timed out or found its records gone. Each variant
//! carries what it concerns as fields (as [`crate::wire::WireError`] and
//! [`crate::log::LogError`] do); the messages say what to do about it, in
//! the words of the core's API (the Spark layer words its own errors, with
//! its option names).
//!
//! A node thread's error crosses to the handle as itself
//! ([`Error::Thread`], shared by every later call), so Python raises the
//! same class for it as for the error raised in the caller's thread.

use std::sync::Arc;
use std::time::Duration;

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
    /// The node thread panicked, could not start, or stopped for a reason
    /// that is no [`Error`] of its own.
    #[error("node thread stopped: {reason}")]
    Died {
        /// Why: the panic message, or what could not be done.
        reason: String,
    },
    /// The node thread stopped with this error: every call on the handle
    /// from then on reports it (hence shared), and Python raises it as the
    /// class of the error inside (`rust/src/python/errors.rs`).
    #[error("node thread stopped: {0}")]
    Thread(Arc<Error>),
    /// The node was closed; create a new one.
    #[error("the node is closed")]
    Closed,
    /// The producer's unacknowledged buffer stayed full until the timeout.
    #[error(
        "producer buffer full: {unacked} unacknowledged bytes (max_unacked_bytes={max}) \
         after waiting {:.1}s; start a store, lower min_acks or raise max_unacked_bytes",
        .waited.as_secs_f64()
    )]
    BufferFull {
        /// Bytes sent and not yet acknowledged.
        unacked: usize,
        /// The producer's `max_unacked_bytes`.
        max: usize,
        /// How long the send waited for room.
        waited: Duration,
    },
    /// A value over the producer's `max_record_bytes` (Python: `ValueError`).
    #[error(
        "a value of {size} bytes is over max_record_bytes={max}: stores drop larger records \
         (their own max_record_bytes, 64 MiB by default), and the partition could not go \
         on past it; split the value, or raise max_record_bytes on the producer and on \
         every store"
    )]
    TooLarge {
        /// The value's size in bytes.
        size: usize,
        /// The producer's `max_record_bytes`.
        max: usize,
    },
    /// A certificate or trust directory of a secure node cannot be used.
    #[error(transparent)]
    Security(#[from] crate::security::SecurityError),
    /// The durable log failed (I/O, corruption, a bad offset).
    #[error(transparent)]
    Log(#[from] crate::log::LogError),
    /// Records a bounded read needed are gone from every store (retention).
    #[error(
        "records [{from}, {to}) of {topic}/{partition} are gone from every store \
         (retention); read from offset {to} on, or read with fail_on_loss off to skip them"
    )]
    DataLoss {
        topic: String,
        partition: String,
        /// The first offset gone.
        from: u64,
        /// The first offset held again after the loss.
        to: u64,
    },
    /// A bounded read or a heads query got no (complete) answer in time.
    #[error("{}", timeout_message(.topic, .unanswered, .waited, .towers_unheard))]
    Timeout {
        topic: String,
        /// What was left unanswered.
        unanswered: Unanswered,
        /// How long the call waited.
        waited: Duration,
        /// The towers it tried, when none was heard (no store could find
        /// the reader); empty otherwise.
        towers_unheard: Vec<String>,
    },
    /// A group member's synchronous commit, or its `committed` lookup, got
    /// no (complete) answer from the stores in time.
    #[error(
        "{what}: no store answered within {:.1}s; is a store running and reachable \
         (the member finds stores as it finds producers), or raise commit_timeout",
        .waited.as_secs_f64()
    )]
    CommitTimeout {
        /// What waited ("commit", "committed").
        what: &'static str,
        waited: Duration,
    },
    /// A blocking call was interrupted by the caller's check (Ctrl-C from Python).
    #[error("interrupted")]
    Interrupted,
}

/// What a bounded read or heads query ([`Error::Timeout`]) was left without.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unanswered {
    /// No store or producer of the topic answered at all.
    Topic,
    /// A range read of `partition`, `[start, end)`, got the records up to
    /// `next` and no store answered for the rest.
    Range {
        partition: String,
        start: u64,
        end: u64,
        next: u64,
    },
    /// The cluster view (`dafka cluster`, `dafka topics`): no tower was
    /// heard (`stores` false), or no store answered (`stores` true).
    View { stores: bool },
}

fn timeout_message(
    topic: &str,
    unanswered: &Unanswered,
    waited: &Duration,
    towers_unheard: &[String],
) -> String {
    let mut msg = what_timed_out(topic, unanswered, waited);
    if !towers_unheard.is_empty() {
        msg.push_str(&format!(
            "; no tower was heard at {}: is one running there and reachable?",
            towers_unheard.join(", ")
        ));
    }
    msg
}

fn what_timed_out(topic: &str, unanswered: &Unanswered, waited: &Duration) -> String {
    let secs = waited.as_secs_f64();
    match unanswered {
        Unanswered::Topic => format!(
            "no store or producer of topic {topic:?} answered within {secs:.1}s: check \
             `towers` (reads need discovery, so stores can reach this client)"
        ),
        Unanswered::Range {
            partition,
            start,
            end,
            next,
        } => format!(
            "reading {topic}/{partition} [{start}, {end}): got up to offset {next} in \
             {secs:.1}s; no store answered for the rest (check `towers`, that a store holds \
             the partition, or retention if fail_on_loss is off)"
        ),
        Unanswered::View { stores: false } => format!(
            "the cluster view heard no tower within {secs:.1}s: check `towers` (the view \
             is what the towers relay)"
        ),
        Unanswered::View { stores: true } => format!(
            "no store answered the cluster view within {secs:.1}s: check `towers` (reads \
             need discovery, so stores can reach this client) and that a store runs"
        ),
    }
}

impl Error {
    /// The error inside [`Error::Thread`] (itself for any other): what
    /// decides its Python class.
    pub fn cause(&self) -> &Error {
        match self {
            Error::Thread(inner) => inner.cause(),
            e => e,
        }
    }

    /// [`Error::Died`] for `reason`.
    pub fn died(reason: impl Into<String>) -> Self {
        Error::Died {
            reason: reason.into(),
        }
    }
}

/// `Result` with [`Error`](enum@Error).
pub type Result<T> = std::result::Result<T, Error>;
