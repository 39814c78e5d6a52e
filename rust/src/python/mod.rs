//! PyO3 bindings: argument parsing, GIL release, conversion and one error
//! mapping. No protocol logic lives here.

mod cli;
mod errors;
mod fetch;
mod log;
mod node;
mod record;
mod store;
mod wire;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    wire::register(m)?;
    record::register(m)?;
    log::register(m)?;
    node::register(m)?;
    store::register(m)?;
    cli::register(m)?;

    fetch::register(m)?;
    Ok(())
}
