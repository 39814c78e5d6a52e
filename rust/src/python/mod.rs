//! PyO3 bindings: argument parsing, GIL release, conversion and one error
//! mapping. No protocol logic lives here.

mod cli;
mod defaults;
mod delivery;
mod discovery;
mod errors;
mod fetch;
mod log;
mod logbridge;
mod node;
mod record;
mod security;
mod store;
mod time;
mod wire;

use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::node::config::LONGEST;

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

/// A number of seconds >= 0 (capped at `LONGEST`, "forever" to anyone).
pub(crate) fn seconds(name: &str, v: f64) -> PyResult<Duration> {
    if v.is_finite() && v >= LONGEST.as_secs_f64() {
        return Ok(LONGEST);
    }
    Duration::try_from_secs_f64(v).map_err(|_| {
        PyValueError::new_err(format!(
            "{name} must be a finite number of seconds >= 0, got {v}"
        ))
    })
}

/// [`seconds`] for an optional argument.
pub(crate) fn opt_seconds(name: &str, v: Option<f64>) -> PyResult<Option<Duration>> {
    v.map(|v| seconds(name, v)).transpose()
}

/// A high-water mark: ZeroMQ takes an `int` (0 = unlimited).
pub(crate) fn hwm(name: &str, v: i128) -> PyResult<i32> {
    i32::try_from(v).ok().filter(|v| *v >= 0).ok_or_else(|| {
        PyValueError::new_err(format!(
            "{name} must be an integer from 0 (unlimited) to {}, got {v}",
            i32::MAX
        ))
    })
}

/// An hours option where `None` means "for good" and 0 is refused: the
/// `dafka-store` CLI and TOML read 0 as "for good", here it would `act` at
/// once; the message says to pass None to `keep`.
fn hours_none_for_good(
    name: &str,
    v: Option<i128>,
    act: &str,
    keep: &str,
) -> PyResult<Option<u64>> {
    if v == Some(0) {
        return Err(PyValueError::new_err(format!(
            "{name}=0 would {act}: pass None to {keep} (what 0 means to dafka-store's --{})",
            name.replace('_', "-")
        )));
    }
    opt_unsigned(name, v)
}

/// `retain_hours` (None keeps records forever; 0 refused).
pub(crate) fn retain_hours(v: Option<i128>) -> PyResult<Option<u64>> {
    let act = "delete every record at the next retention check";
    hours_none_for_good("retain_hours", v, act, "keep records forever")
}

/// `forget_parked_hours` (None keeps parked partitions for good; 0 refused).
pub(crate) fn forget_parked_hours(v: Option<i128>) -> PyResult<Option<u64>> {
    let act = "forget every parked partition at once";
    hours_none_for_good("forget_parked_hours", v, act, "keep them for good")
}

/// A list-of-str argument (`towers=`, `peers=`, `partitions=`, ...). PyO3
/// alone refuses a bare `str` with "Can't extract `str` to `Vec`"; this says
/// to wrap it in a list.
pub(crate) struct StrList(pub Vec<String>);

impl<'py> FromPyObject<'py> for StrList {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(s) = ob.downcast::<PyString>() {
            let s = s.to_cow()?;
            return Err(PyTypeError::new_err(format!(
                "expected a list of str, got the str {s:?}: wrap it in a list, [{s:?}]"
            )));
        }
        ob.extract::<Vec<String>>().map(StrList).map_err(|e| {
            let kind = ob
                .get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string());
            PyTypeError::new_err(format!("expected a list of str, got {kind} ({e})"))
        })
    }
}

/// An optional [`StrList`] argument as the `Vec` the Rust side takes.
pub(crate) fn str_list(v: Option<StrList>) -> Vec<String> {
    v.map(|l| l.0).unwrap_or_default()
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
    security::register(m)?;

    fetch::register(m)?;
    defaults::sign(m)
}
