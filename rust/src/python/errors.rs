//! The one mapping from Rust errors to the exception classes of
//! `dafka.exceptions` (defined in Python so users can subclass and import them).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

static EXCEPTIONS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// Builds an instance of `dafka.exceptions.<name>` carrying `msg`.
pub(crate) fn dafka_error(name: &str, msg: impl Into<String>) -> PyErr {
    let msg = msg.into();
    Python::attach(|py| {
        let made = EXCEPTIONS
            .get_or_try_init(py, || py.import("dafka.exceptions").map(|m| m.unbind()))
            .and_then(|m| m.bind(py).getattr(name))
            .and_then(|cls| cls.call1((msg.clone(),)));
        match made {
            Ok(obj) => PyErr::from_value(obj),
            Err(e) => e,
        }
    })
}

impl From<crate::wire::WireError> for PyErr {
    fn from(e: crate::wire::WireError) -> PyErr {
        dafka_error("WireError", e.to_string())
    }
}

impl From<crate::log::LogError> for PyErr {
    fn from(e: crate::log::LogError) -> PyErr {
        use crate::log::LogError as E;
        let name = match &e {
            E::Io { .. } => "LogIOError",
            E::Corruption { .. } => "CorruptionError",
            E::OffsetMismatch { .. } | E::OffsetOutOfRange { .. } => "OffsetError",
            E::UnknownPartition { .. } => "UnknownPartitionError",
            E::Invalid(_) => "LogValueError",
            E::Failed { .. } | E::ReadOnly(_) | E::Locked(_) => "LogError",
        };
        dafka_error(name, e.to_string())
    }
}
