//! `dafka.Tower`: a thin PyO3 class over [`Tower`], and its options.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::LazyLock;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use super::discovery::{tower_config, Secure};
use super::options::{options, Options};
use super::wait::stats_dict;
use crate::node::{Tower, TowerConfig};

/// The tower's defaults (`TowerConfig::default()`, the core's).
static TOWER: LazyLock<TowerConfig> = LazyLock::new(TowerConfig::default);

options! {
    /// `dafka.Tower`'s options.
    pub(crate) struct TowerOptions {
        /// Endpoint the XSUB socket binds, where nodes send beacons (5556 as in the C
        /// reference). Port 0 or ``*`` picks a free port. A wildcard host shows as 127.0.0.1
        /// in ``endpoint``.
        beacon_in: String = TOWER.beacon_in.clone(),
        /// Endpoint the XPUB socket binds, where nodes receive beacons (5557 as in the C
        /// reference). Port 0 or ``*`` picks a free port.
        beacon_out: String = TOWER.beacon_out.clone(),
        ..secure: Secure,
    }
}

/// A tower: relays beacons so nodes find each other.
///
/// Nodes send their beacons to the tower's XSUB socket (``beacon_in``), and it relays them to
/// every node through its XPUB socket (``beacon_out``). It carries no records. Nodes name it
/// in ``towers=[tower.endpoint]``. When a node joins, the tower repeats the last beacons of
/// the live nodes it knows, so the new node finds its peers at once. It remembers at most
/// 16,384 nodes; beacons of more are still relayed. It runs on its own thread until ``close()``.
///
/// Raises
/// ------
/// ConfigError
///     An endpoint is malformed: not ``tcp://HOST:PORT``, ``ipc://PATH`` or ``inproc://NAME``.
///     Secure mode: ``cert`` without ``trust`` (or the reverse), or a certificate of another
///     role.
/// OSError
///     ``cert`` or ``trust`` cannot be read: ``FileNotFoundError``, ``PermissionError``, ...
///     (the error names the path).
/// SecurityError
///     ``cert`` is malformed or holds no secret key (``NAME.key`` given for ``NAME.key_secret``).
/// NodeError
///     A socket cannot bind, e.g. the port is in use.
#[pyclass(module = "dafka._native", name = "Tower", frozen)]
struct PyTower {
    inner: Tower,
    /// Shown by `dafka.serve_metrics` until closed.
    metrics: crate::metrics::Registration,
}

#[pymethods]
impl PyTower {
    #[new]
    #[pyo3(signature = (**options))]
    fn new(py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let o = TowerOptions::parse("Tower", options)?;
        let cfg = tower_config(o.beacon_in, o.beacon_out, o.secure)?;
        let inner = py.detach(|| Tower::new(cfg))?;
        let metrics = crate::metrics::register(inner.metrics_source());
        Ok(Self { inner, metrics })
    }

    /// What nodes pass in ``towers=[...]``: ``tcp://HOST:IN_PORT,OUT_PORT``, with
    /// ``;curve=KEY`` (the tower's public key) after it for a secure tower.
    #[getter]
    fn endpoint(&self) -> String {
        self.inner.endpoint()
    }
    /// The bound endpoint of the XSUB that receives beacons (a wildcard host shows as
    /// 127.0.0.1).
    #[getter]
    fn beacon_in(&self) -> String {
        self.inner.beacon_in().to_string()
    }
    /// The bound endpoint of the XPUB that sends beacons (a wildcard host shows as
    /// 127.0.0.1).
    #[getter]
    fn beacon_out(&self) -> String {
        self.inner.beacon_out().to_string()
    }
    /// Counters: ``beacons`` relayed, ``malformed`` dropped, ``peers`` (the nodes it
    /// knows now), ``beacons_refused`` (beacons of new nodes past the 16,384 it remembers);
    /// the nodes it knows by the kind they announced: ``nodes_producer``,
    /// ``nodes_consumer``, ``nodes_store``, ``nodes_unknown`` (none announced: a
    /// C-reference node), and ``announcements_refused`` (kinds of new nodes not kept past
    /// 16,384); in secure mode ``auth_refused`` (connections refused at the handshake) and
    /// ``identity_refused`` (beacons or kind announcements for a node that is not the
    /// sender key's).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = stats_dict(py, self.inner.stats())?;
        let nodes = self.inner.nodes();
        for (kind, n) in nodes.snapshot() {
            d.set_item(format!("nodes_{kind}"), n)?;
        }
        let refused = nodes.announcements_refused.load(Relaxed);
        d.set_item("announcements_refused", refused)?;
        Ok(d)
    }
    /// Stops the tower (idempotent).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.metrics.end();
        let closed = py.detach(|| self.inner.close());
        crate::python::logbridge::drain(py)?;
        Ok(closed?)
    }
    /// Returns the tower, for ``with Tower(...) as tower:``.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    /// Closes the tower on leaving the ``with`` block; an exception propagates.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTower>()
}
