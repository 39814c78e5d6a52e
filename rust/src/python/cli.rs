//! `run_store_cli` / `run_tower_cli`: the `dafka-store` and `dafka-tower`
//! command lines (`crate::cli`) for the Python `dafka store` / `dafka tower`.
//! The GIL is released while the node runs; Python's signal handlers are
//! checked every few tens of ms, so Ctrl-C (and a SIGTERM handler that raises
//! `KeyboardInterrupt`) stops the node cleanly and the call returns 0.

use std::ffi::OsString;

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;

use super::wait::check_signals;

type Entry = fn(&str, Vec<OsString>, &mut dyn FnMut() -> bool) -> i32;

/// Runs `entry` until a Python signal handler raises. `KeyboardInterrupt` is
/// the asked-for stop (exit code 0 after the clean close); any other exception
/// a handler raised is re-raised once the node is closed.
fn run(py: Python<'_>, entry: Entry, bin_name: &str, argv: Vec<String>) -> PyResult<i32> {
    let args = argv.into_iter().map(OsString::from).collect();
    let mut raised: Option<PyErr> = None;
    let code = py.detach(|| {
        entry(bin_name, args, &mut || match check_signals() {
            Ok(()) => false,
            Err(e) => {
                raised = Some(e);
                true
            }
        })
    });
    match raised {
        Some(e) if !e.is_instance_of::<PyKeyboardInterrupt>(py) => Err(e),
        _ => Ok(code),
    }
}

/// Runs ``dafka-store`` with ``argv`` (the arguments after the program name)
/// until Ctrl-C; returns the exit code.
#[pyfunction]
fn run_store_cli(py: Python<'_>, argv: Vec<String>) -> PyResult<i32> {
    run(py, crate::cli::store_main, "dafka store", argv)
}

/// Runs ``dafka-tower`` with ``argv`` (the arguments after the program name)
/// until Ctrl-C; returns the exit code.
#[pyfunction]
fn run_tower_cli(py: Python<'_>, argv: Vec<String>) -> PyResult<i32> {
    run(py, crate::cli::tower_main, "dafka tower", argv)
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_store_cli, m)?)?;
    m.add_function(wrap_pyfunction!(run_tower_cli, m)?)?;
    Ok(())
}
