//! The one mapping from Rust errors to the exception classes of
//! `dafka.exceptions` (defined in Python so users can subclass and import
//! them): [`Exc`] names each class once, and every `From<_> for PyErr` of the
//! crate's error types is here.

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

use crate::error::Error;
use crate::log::LogError;
use crate::security::SecurityError;
use crate::wire::WireError;

static EXCEPTIONS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The exception classes of `dafka.exceptions` that Rust raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exc {
    Wire,
    Config,
    Node,
    Closed,
    BufferFull,
    TooLarge,
    DataLoss,
    FetchTimeout,
    Log,
    LogIo,
    LogFileNotFound,
    LogPermission,
    Corruption,
    Offset,
    UnknownPartition,
    LogValue,
    Security,
    Delivery,
    CommitTimeout,
}

impl Exc {
    /// The class's name in `dafka.exceptions`: the one place that spells it.
    fn class_name(self) -> &'static str {
        match self {
            Exc::Wire => "WireError",
            Exc::Config => "ConfigError",
            Exc::Node => "NodeError",
            Exc::Closed => "ClosedError",
            Exc::BufferFull => "BufferFullError",
            Exc::TooLarge => "RecordTooLargeError",
            Exc::DataLoss => "DataLossError",
            Exc::FetchTimeout => "FetchTimeoutError",
            Exc::Log => "LogError",
            Exc::LogIo => "LogIOError",
            Exc::LogFileNotFound => "LogFileNotFoundError",
            Exc::LogPermission => "LogPermissionError",
            Exc::Corruption => "CorruptionError",
            Exc::Offset => "OffsetError",
            Exc::UnknownPartition => "UnknownPartitionError",
            Exc::LogValue => "LogValueError",
            Exc::Security => "SecurityError",
            Exc::Delivery => "DeliveryError",
            Exc::CommitTimeout => "CommitTimeoutError",
        }
    }

    /// An instance of the class carrying `msg`.
    pub(crate) fn err(self, msg: impl Into<String>) -> PyErr {
        let msg = msg.into();
        Python::attach(|py| {
            let made = EXCEPTIONS
                .get_or_try_init(py, || py.import("dafka.exceptions").map(|m| m.unbind()))
                .and_then(|m| m.bind(py).getattr(self.class_name()))
                .and_then(|cls| cls.call1((msg,)));
            match made {
                Ok(obj) => PyErr::from_value(obj),
                Err(e) => e,
            }
        })
    }

    /// Whether `e` is an instance of this class.
    pub(crate) fn is(self, py: Python<'_>, e: &PyErr) -> bool {
        EXCEPTIONS
            .get_or_try_init(py, || py.import("dafka.exceptions").map(|m| m.unbind()))
            .and_then(|m| m.bind(py).getattr(self.class_name()))
            .is_ok_and(|cls| e.is_instance(py, &cls))
    }

    /// For `map_err` of a parse that fails with a message (`"zproto".parse()`).
    pub(crate) fn with(self) -> impl Fn(String) -> PyErr {
        move |msg| self.err(msg)
    }
}

/// An `OSError` of the class Python gives `kind` (`FileNotFoundError`,
/// `PermissionError`, ...), as `open()` would raise it, carrying `msg` (which
/// names the path) and the OS's `errno`.
fn os_error(source: &std::io::Error, msg: String) -> PyErr {
    use pyo3::exceptions::{
        PyFileExistsError, PyFileNotFoundError, PyIsADirectoryError, PyNotADirectoryError,
        PyOSError, PyPermissionError,
    };
    use std::io::ErrorKind;
    let err = match source.kind() {
        ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
        ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
        ErrorKind::AlreadyExists => PyFileExistsError::new_err(msg),
        ErrorKind::IsADirectory => PyIsADirectoryError::new_err(msg),
        ErrorKind::NotADirectory => PyNotADirectoryError::new_err(msg),
        _ => PyOSError::new_err(msg),
    };
    with_errno(err, source)
}

/// `err` with the `errno` of `source` (its message stays `msg`: no
/// `strerror` or `filename` is set, which would reword it).
fn with_errno(err: PyErr, source: &std::io::Error) -> PyErr {
    // An error made by the core rather than the OS (a directory found
    // missing) gets the errno of its kind, as `open()`'s would have.
    let by_kind = || match source.kind() {
        std::io::ErrorKind::NotFound => Some(libc::ENOENT),
        std::io::ErrorKind::PermissionDenied => Some(libc::EACCES),
        _ => None,
    };
    if let Some(n) = source.raw_os_error().or_else(by_kind) {
        Python::attach(|py| {
            // An exception whose attribute cannot be set keeps its errno None.
            let _ = err.value(py).setattr("errno", n);
        });
    }
    err
}

fn security_err(e: &SecurityError, msg: String) -> PyErr {
    match e {
        SecurityError::Exists { .. } => pyo3::exceptions::PyFileExistsError::new_err(msg),
        SecurityError::Io { source, .. } => os_error(source, msg),
        SecurityError::BadRole { .. }
        | SecurityError::WrongRole { .. }
        | SecurityError::BadPattern { .. }
        | SecurityError::BadName { .. } => Exc::Config.err(msg),
        SecurityError::BadCertificate { .. }
        | SecurityError::BadKey { .. }
        | SecurityError::NoSecret { .. }
        | SecurityError::NoCurve(_) => Exc::Security.err(msg),
    }
}

fn log_err(e: &LogError, msg: String) -> PyErr {
    use std::io::ErrorKind;
    let exc = match e {
        LogError::Io { source, .. } => {
            let exc = match source.kind() {
                ErrorKind::NotFound => Exc::LogFileNotFound,
                ErrorKind::PermissionDenied => Exc::LogPermission,
                _ => Exc::LogIo,
            };
            return with_errno(exc.err(msg), source);
        }
        LogError::Corruption { .. } => Exc::Corruption,
        LogError::OffsetMismatch { .. } | LogError::OffsetOutOfRange { .. } => Exc::Offset,
        LogError::UnknownPartition { .. } => Exc::UnknownPartition,
        LogError::Invalid { .. } => Exc::LogValue,
        LogError::Failed { .. } | LogError::ReadOnly { .. } | LogError::Locked { .. } => Exc::Log,
    };
    exc.err(msg)
}

/// The exception of `e` (the class of what a node thread stopped with, for
/// [`Error::Thread`]), carrying `msg`.
fn node_err(e: &Error, msg: String) -> PyErr {
    let exc = match e.cause() {
        Error::Log(log) => return log_err(log, msg),
        Error::Security(sec) => return security_err(sec, msg),
        Error::Interrupted => return PyKeyboardInterrupt::new_err(msg),
        Error::Config { .. } => Exc::Config,
        Error::BufferFull { .. } => Exc::BufferFull,
        Error::TooLarge { .. } => Exc::TooLarge,
        Error::Closed => Exc::Closed,
        Error::DataLoss { .. } => Exc::DataLoss,
        Error::Timeout { .. } => Exc::FetchTimeout,
        Error::CommitTimeout { .. } => Exc::CommitTimeout,
        Error::Socket { .. } | Error::Zmq { .. } | Error::Died { .. } | Error::Thread(_) => {
            Exc::Node
        }
    };
    exc.err(msg)
}

impl From<SecurityError> for PyErr {
    fn from(e: SecurityError) -> PyErr {
        let msg = e.to_string();
        security_err(&e, msg)
    }
}

impl From<WireError> for PyErr {
    fn from(e: WireError) -> PyErr {
        Exc::Wire.err(e.to_string())
    }
}

impl From<LogError> for PyErr {
    fn from(e: LogError) -> PyErr {
        let msg = e.to_string();
        log_err(&e, msg)
    }
}

/// The class is that of the error itself, wherever it happened: a node
/// thread's (inside [`Error::Thread`]) is raised as if the caller's thread
/// had met it, its message saying the node stopped.
impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        let msg = e.to_string();
        node_err(&e, msg)
    }
}
