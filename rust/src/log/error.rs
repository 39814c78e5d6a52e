//! `LogError`: every failure of the segment store, each naming the path, topic,
//! partition or offset it concerns and what to do about it.

use std::io;
use std::path::PathBuf;

/// Result of log operations.
pub type Result<T> = std::result::Result<T, LogError>;

/// Errors of the segment store.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An operating-system I/O call failed (disk full, permission, ...).
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done ("write", "fdatasync", ...).
        op: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Damaged data that recovery will not silently cut off.
    #[error(
        "corrupt log {path} at byte {position} (offset {offset}): {reason}; \
         the data after it is not a torn tail, so it was left untouched: \
         inspect the file, or move it away to accept the loss"
    )]
    Corruption {
        /// The segment or index file.
        path: PathBuf,
        /// Byte position of the damage.
        position: u64,
        /// The offset expected at that position.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// An append whose offset is not the partition's next offset.
    #[error(
        "append to {topic}/{partition}: offset {got} is not the next offset {expected} \
         ({})", if got > expected { "a gap" } else { "already stored" }
    )]
    OffsetMismatch {
        /// Topic (lossy UTF-8).
        topic: String,
        /// Partition name.
        partition: String,
        /// The offset the partition expects next.
        expected: u64,
        /// The offset the caller gave.
        got: u64,
    },
    /// A read outside `[first, next]`.
    #[error(
        "read {topic}/{partition} from offset {requested}: out of range, \
         the partition holds [{first}, {next})"
    )]
    OffsetOutOfRange {
        /// Topic (lossy UTF-8).
        topic: String,
        /// Partition name.
        partition: String,
        /// The offset asked for.
        requested: u64,
        /// First available offset.
        first: u64,
        /// Next offset to be appended.
        next: u64,
    },
    /// A topic or partition this log does not hold.
    #[error("no partition {topic}/{partition} in this log")]
    UnknownPartition {
        /// Topic (lossy UTF-8).
        topic: String,
        /// Partition name.
        partition: String,
    },
    /// Bad names, options or arguments.
    #[error("{0}")]
    Invalid(String),
    /// The partition hit an I/O error it could not roll back from.
    #[error("partition {topic}/{partition} is unusable after an earlier error ({reason}); reopen the log to recover")]
    Failed {
        /// Topic (lossy UTF-8).
        topic: String,
        /// Partition name.
        partition: String,
        /// The earlier error.
        reason: String,
    },
    /// Another writable `Log` (in this or another process) has the directory.
    #[error(
        "the log at {0} is open for writing elsewhere (another process or Log holds its \
         .lock); close that one first, or open this one read-only"
    )]
    Locked(PathBuf),
    /// A write on a log opened read-only.
    #[error("the log at {0} is open read-only")]
    ReadOnly(PathBuf),
}

impl LogError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> LogError {
        LogError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}
