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

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A Rust unsigned type an integer argument is converted to.
pub(crate) trait Unsigned: TryFrom<i128> {
    /// The largest value accepted.
    const MAX: u64;
}
impl Unsigned for u32 {
    const MAX: u64 = u32::MAX as u64;
}
impl Unsigned for u64 {
    const MAX: u64 = u64::MAX;
}
impl Unsigned for usize {
    const MAX: u64 = usize::MAX as u64;
}

/// An integer argument that must be >= 0: PyO3 alone would raise an
/// OverflowError that names neither the argument nor the range.
pub(crate) fn unsigned<T: Unsigned>(name: &str, v: i128) -> PyResult<T> {
    T::try_from(v).map_err(|_| {
        PyValueError::new_err(format!(
            "{name} must be an integer from 0 to {}, got {v}",
            T::MAX
        ))
    })
}

/// [`unsigned`] for an optional argument.
pub(crate) fn opt_unsigned<T: Unsigned>(name: &str, v: Option<i128>) -> PyResult<Option<T>> {
    v.map(|v| unsigned(name, v)).transpose()
}

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
