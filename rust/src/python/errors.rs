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
    Corruption,
    Offset,
    UnknownPartition,
    LogValue,
    Security,
    Delivery,
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
            Exc::Corruption => "CorruptionError",
            Exc::Offset => "OffsetError",
            Exc::UnknownPartition => "UnknownPartitionError",
            Exc::LogValue => "LogValueError",
            Exc::Security => "SecurityError",
            Exc::Delivery => "DeliveryError",
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

impl From<SecurityError> for PyErr {
    fn from(e: SecurityError) -> PyErr {
        use pyo3::exceptions::{PyFileExistsError, PyOSError};
        let msg = e.to_string();
        match e {
            SecurityError::Exists { .. } => PyFileExistsError::new_err(msg),
            SecurityError::Io { .. } => PyOSError::new_err(msg),
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
}

impl From<WireError> for PyErr {
    fn from(e: WireError) -> PyErr {
        Exc::Wire.err(e.to_string())
    }
}

impl From<LogError> for PyErr {
    fn from(e: LogError) -> PyErr {
        let exc = match &e {
            LogError::Io { .. } => Exc::LogIo,
            LogError::Corruption { .. } => Exc::Corruption,
            LogError::OffsetMismatch { .. } | LogError::OffsetOutOfRange { .. } => Exc::Offset,
            LogError::UnknownPartition { .. } => Exc::UnknownPartition,
            LogError::Invalid { .. } => Exc::LogValue,
            LogError::Failed { .. } | LogError::ReadOnly { .. } | LogError::Locked { .. } => {
                Exc::Log
            }
        };
        exc.err(e.to_string())
    }
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        let exc = match e {
            Error::Log(log) => return log.into(),
            Error::Security(sec) => return sec.into(),
            Error::Interrupted => return PyKeyboardInterrupt::new_err(e.to_string()),
            Error::Config { .. } => Exc::Config,
            Error::BufferFull { .. } => Exc::BufferFull,
            Error::TooLarge { .. } => Exc::TooLarge,
            Error::Closed => Exc::Closed,
            Error::DataLoss { .. } => Exc::DataLoss,
            Error::Timeout { .. } => Exc::FetchTimeout,
            Error::Socket { .. } | Error::Zmq { .. } | Error::Died { .. } => Exc::Node,
        };
        exc.err(e.to_string())
    }
}
