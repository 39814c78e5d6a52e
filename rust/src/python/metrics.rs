//! `dafka.serve_metrics`: Prometheus metrics of every node of the process
//! (`crate::metrics`), served on a thread of their own.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::errors::Exc;
use crate::metrics::{MetricsServer, Sources};

/// A running metrics server (``dafka.serve_metrics``): ``host``, ``port`` (the one bound,
/// when 0 was asked), ``url``; ``close()`` stops it (also on leaving a ``with`` block).
#[pyclass(module = "dafka._native", name = "MetricsServer", frozen)]
struct PyMetricsServer {
    inner: Mutex<Option<MetricsServer>>,
    host: String,
    port: u16,
}

#[pymethods]
impl PyMetricsServer {
    /// The host it listens on.
    #[getter]
    fn host(&self) -> &str {
        &self.host
    }
    /// The port it listens on.
    #[getter]
    fn port(&self) -> u16 {
        self.port
    }
    /// ``http://HOST:PORT/metrics``.
    #[getter]
    fn url(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("http://{host}:{}/metrics", self.port)
    }
    /// Stops serving (idempotent).
    fn close(&self, py: Python<'_>) {
        let server = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        py.detach(move || drop(server));
    }
    /// Returns the server, for ``with dafka.serve_metrics(...) as server:``.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    /// Closes the server on leaving the ``with`` block; an exception propagates.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }
    /// ``MetricsServer(url=...)``.
    fn __repr__(&self) -> String {
        format!("MetricsServer(url={:?})", self.url())
    }
}

/// Serves Prometheus metrics of every node of this process (each ``Producer``,
/// ``Consumer``, ``Store`` and ``Tower`` from its creation until it is closed) at
/// ``http://HOST:PORT/metrics``, on threads of their own; returns the running
/// ``MetricsServer``. ``port=0`` takes any free port (``server.port`` says which).
///
/// Raises
/// ------
/// ConfigError
///     ``host`` or ``port`` name no address to listen on, or it cannot be bound (in use).
#[pyfunction]
#[pyo3(signature = (host = "127.0.0.1", port = 0))]
fn serve_metrics(py: Python<'_>, host: &str, port: u16) -> PyResult<PyMetricsServer> {
    if host.is_empty() {
        return Err(Exc::Config.err("serve_metrics: host is empty; give e.g. \"127.0.0.1\""));
    }
    let listen = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let server = py.detach(|| MetricsServer::start(&listen, Sources::Process))?;
    let addr = server.local_addr();
    Ok(PyMetricsServer {
        inner: Mutex::new(Some(server)),
        host: addr.ip().to_string(),
        port: addr.port(),
    })
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMetricsServer>()?;
    m.add_function(wrap_pyfunction!(serve_metrics, m)?)
}
