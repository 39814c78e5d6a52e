//! Waiting with the GIL released: a blocking call waits in [`SLICE`]s and
//! calls [`check_signals`] between them, so Ctrl-C works and what the core
//! logged meanwhile reaches Python's `logging`. Also the counters every node
//! class returns from `stats()`.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::node::stats::Stats;

/// The longest a blocking call waits between two signal checks.
pub(super) const SLICE: Duration = Duration::from_millis(100);

/// Between two slices of a wait: Ctrl-C raises, and what the core logged
/// meanwhile goes to the `dafka` logger ([`crate::python::logbridge`]).
pub(super) fn check_signals() -> PyResult<()> {
    Python::attach(|py| {
        crate::python::logbridge::drain(py)?;
        py.check_signals()
    })
}

/// A node's counters as ``{name: count}``.
pub(super) fn stats_dict<'py>(py: Python<'py>, s: &Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in s.snapshot() {
        d.set_item(k, v)?;
    }
    Ok(d)
}
