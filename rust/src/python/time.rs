//! Points in time as Python callers give them: ms since the epoch (`int`),
//! a `datetime` (naive: local time, as `datetime.timestamp` reads it), or a
//! `str`: digits (ms) or ISO 8601 (`2026-11-27T09:00`, `...+01:00`).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};

/// `v` in ms since the Unix epoch; `what` names the argument in errors.
pub(super) fn time_ms(py: Python<'_>, v: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    let from_ms = |ms: i128| {
        u64::try_from(ms).map_err(|_| {
            PyValueError::new_err(format!(
                "{what} must be ms since the epoch, 0 or more, got {ms}"
            ))
        })
    };
    if v.is_instance_of::<PyBool>() || v.is_instance_of::<PyFloat>() {
        return Err(PyTypeError::new_err(format!(
            "{what} takes ms since the epoch as an int, a datetime or an ISO 8601 str \
             (e.g. \"2026-11-27T09:00\"), got {}: for time.time() seconds use \
             int(t * 1000)",
            v.get_type().name()?
        )));
    }
    if v.is_instance_of::<PyInt>() {
        return from_ms(v.extract()?);
    }
    let dt = py.import("datetime")?.getattr("datetime")?;
    let stamp = if let Ok(s) = v.cast::<PyString>() {
        let s = s.to_str()?.trim();
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
            return from_ms(
                s.parse::<i128>()
                    .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))?,
            );
        }
        let parsed = dt.call_method1("fromisoformat", (s,)).map_err(|_| {
            PyValueError::new_err(format!(
                "{what} {s:?} is neither ms since the epoch nor an ISO 8601 time such as \
                 2026-11-27T09:00 or 2026-11-27T09:00:00+00:00"
            ))
        })?;
        parsed.call_method0("timestamp")?
    } else if v.is_instance(&dt)? {
        v.call_method0("timestamp")?
    } else {
        return Err(PyTypeError::new_err(format!(
            "{what} takes ms since the epoch as an int, a datetime or an ISO 8601 str, got {}",
            v.get_type().name()?
        )));
    };
    let secs: f64 = stamp.extract()?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(PyValueError::new_err(format!(
            "{what} is before the epoch (1970-01-01)"
        )));
    }
    Ok((secs * 1000.0).round() as u64)
}

/// Record times a producer refuses: read as ms they fall in 1970-01-12 to
/// 1973-03-03, read as seconds in 2001 to 5138. `int(time.time())` is one.
const SECONDS_LIKE: std::ops::Range<u64> = 1_000_000_000..100_000_000_000;

/// `ms` as a record's create time, unless it reads as seconds since the
/// epoch ([`SECONDS_LIKE`]): then a `ValueError` that says milliseconds.
pub(super) fn check_ms(ms: u64, what: &str) -> PyResult<u64> {
    if !SECONDS_LIKE.contains(&ms) {
        return Ok(ms);
    }
    Err(PyValueError::new_err(format!(
        "{what}={ms} reads as seconds since the epoch (as milliseconds it is in January \
         1970): record times are milliseconds since the epoch, so multiply by 1000 \
         (int(time.time() * 1000)), or pass a datetime"
    )))
}

/// A record's create time as a producer takes it: ms since the epoch (an
/// `int`, not one that reads as seconds: [`check_ms`]) or a `datetime`
/// (naive: local time). A float or a bool is a `TypeError` that says ms.
pub(super) fn record_time_ms(py: Python<'_>, v: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    if v.is_instance_of::<PyBool>() || v.is_instance_of::<PyFloat>() {
        return Err(PyTypeError::new_err(format!(
            "{what} takes milliseconds since the epoch as an int, or a datetime, got {} {}: \
             for time.time() seconds use int(t * 1000)",
            v.get_type().name()?,
            v.repr()?
        )));
    }
    if v.is_instance_of::<PyInt>() {
        let ms = super::args::unsigned::<u64>(what, v.extract()?)?;
        return check_ms(ms, what);
    }
    let dt = py.import("datetime")?.getattr("datetime")?;
    if !v.is_instance(&dt)? {
        return Err(PyTypeError::new_err(format!(
            "{what} takes milliseconds since the epoch as an int, or a datetime, got {}",
            v.get_type().name()?
        )));
    }
    time_ms(py, v, what)
}
