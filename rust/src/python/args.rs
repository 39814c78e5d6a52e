//! Python arguments as Rust values: the range checks every entry point
//! shares (`unsigned`, `seconds`, ...) and [`Arg`], how a keyword option of a
//! given Rust type is read from Python, shown as its default, and annotated
//! (what [`super::options`] builds the option declarations on).

use std::path::PathBuf;
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyNone, PyString};

use super::errors::Exc;
use crate::log::{FsyncPolicy, RecoveryPolicy};
use crate::node::config::LONGEST;
use crate::node::OffsetReset;
use crate::security::Role;
use crate::wire::Dialect;

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
pub(crate) fn hwm(name: &str, ob: &Bound<'_, PyAny>) -> PyResult<i32> {
    let v: i128 = ob.extract()?;
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
    ob: &Bound<'_, PyAny>,
    act: &str,
    keep: &str,
) -> PyResult<Option<u64>> {
    let v: Option<i128> = ob.extract()?;
    if v == Some(0) {
        return Err(PyValueError::new_err(format!(
            "{name}=0 would {act}: pass None to {keep} (what 0 means to dafka-store's --{})",
            name.replace('_', "-")
        )));
    }
    opt_unsigned(name, v)
}

/// `retain_hours` (None keeps records forever; 0 refused).
pub(crate) fn retain_hours(name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    let act = "delete every record at the next retention check";
    hours_none_for_good(name, ob, act, "keep records forever")
}

/// `forget_parked_hours` (None keeps parked partitions for good; 0 refused).
pub(crate) fn forget_parked_hours(name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    let act = "forget every parked partition at once";
    hours_none_for_good(name, ob, act, "keep them for good")
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

/// How a keyword option of this Rust type is read from Python (with the
/// range checks of its kind), shown as a default, and annotated in the
/// stub and the docstrings. A value that is not of the type raises
/// `TypeError` (prefixed with the argument's name, as PyO3 does).
pub(crate) trait Arg: Sized {
    /// The Python annotation, as the stub and the docstring write it.
    fn annotation() -> String;
    /// The value of argument `name`.
    fn extract(name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self>;
    /// The value as Python shows it (a default in signatures and `DEFAULTS`).
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
}

/// [`Arg`] for a type that goes to and from Python as it is.
macro_rules! plain_arg {
    ($ty:ty, $annotation:literal) => {
        impl Arg for $ty {
            fn annotation() -> String {
                $annotation.into()
            }
            fn extract(_name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self> {
                ob.extract()
            }
            fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                Ok(self.clone().into_pyobject(py)?.into_any())
            }
        }
    };
}
plain_arg!(String, "str");
plain_arg!(PathBuf, "str | os.PathLike[str]");

impl Arg for bool {
    fn annotation() -> String {
        "bool".into()
    }
    fn extract(_name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self> {
        ob.extract()
    }
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(pyo3::types::PyBool::new(py, *self).to_owned().into_any())
    }
}

/// [`Arg`] for a count: an `int` from 0 to the type's largest.
macro_rules! count_arg {
    ($ty:ty) => {
        impl Arg for $ty {
            fn annotation() -> String {
                "int".into()
            }
            fn extract(name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self> {
                unsigned(name, ob.extract()?)
            }
            fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                Ok(self.into_pyobject(py)?.into_any())
            }
        }
    };
}
count_arg!(u32);
count_arg!(u64);
count_arg!(usize);

/// A high-water mark ([`hwm`] reads it).
impl Arg for i32 {
    fn annotation() -> String {
        "int".into()
    }
    fn extract(name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self> {
        hwm(name, ob)
    }
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.into_pyobject(py)?.into_any())
    }
}

/// Seconds as a `float` ([`seconds`] reads them).
impl Arg for Duration {
    fn annotation() -> String {
        "float".into()
    }
    fn extract(name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self> {
        seconds(name, ob.extract()?)
    }
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.as_secs_f64().into_pyobject(py)?.into_any())
    }
}

/// None, or the value.
impl<T: Arg> Arg for Option<T> {
    fn annotation() -> String {
        format!("{} | None", T::annotation())
    }
    fn extract(name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self> {
        if ob.is_none() {
            Ok(None)
        } else {
            T::extract(name, ob).map(Some)
        }
    }
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            None => Ok(PyNone::get(py).to_owned().into_any()),
            Some(v) => v.to_py(py),
        }
    }
}

impl Arg for StrList {
    fn annotation() -> String {
        "list[str]".into()
    }
    fn extract(_name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self> {
        ob.extract()
    }
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.0.clone().into_pyobject(py)?.into_any())
    }
}

/// [`Arg`] for a choice among names (a `str`, annotated `$annotation`):
/// `parse` reads it, an unknown one raising `$exc` with the parse's message.
macro_rules! named_arg {
    ($ty:ty, $annotation:literal, $name:expr, $exc:expr) => {
        impl Arg for $ty {
            fn annotation() -> String {
                $annotation.into()
            }
            fn extract(_name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self> {
                let s: &str = ob.extract()?;
                s.parse::<$ty>().map_err(|e| $exc.err(e.to_string()))
            }
            fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                let name: fn(&$ty) -> &'static str = $name;
                Ok(PyString::new(py, name(self)).into_any())
            }
        }
    };
}
named_arg!(Dialect, "str", |d| d.name(), Exc::Config);
named_arg!(Role, "str", |r| r.name(), Exc::Config);
named_arg!(
    OffsetReset,
    "str",
    |r| match r {
        OffsetReset::Earliest => "earliest",
        OffsetReset::Latest => "latest",
    },
    Exc::Config
);
named_arg!(
    FsyncPolicy,
    "Literal[\"always\", \"interval\", \"never\"]",
    |p| match p {
        FsyncPolicy::Always => "always",
        FsyncPolicy::Interval => "interval",
        FsyncPolicy::Never => "never",
    },
    Exc::Config
);
named_arg!(
    RecoveryPolicy,
    "Literal[\"tolerate_tail_corruption\", \"absolute_consistency\"]",
    |p| match p {
        RecoveryPolicy::TolerateTailCorruption => "tolerate_tail_corruption",
        RecoveryPolicy::AbsoluteConsistency => "absolute_consistency",
    },
    Exc::Config
);

/// A choice among names read as `dafka.Log` reads it (`fsync`,
/// `recovery`): an unknown one is a `LogValueError` (a store's, read by
/// [`Arg::extract`], a `ConfigError`).
pub(crate) fn log_choice<T: std::str::FromStr<Err = String>>(
    _name: &str,
    ob: &Bound<'_, PyAny>,
) -> PyResult<T> {
    let s: &str = ob.extract()?;
    s.parse().map_err(Exc::LogValue.with())
}

/// A partition's address seed: a `str` (its UTF-8) or `bytes`.
pub(crate) struct Seed(pub Vec<u8>);

impl Arg for Seed {
    fn annotation() -> String {
        "str | bytes".into()
    }
    fn extract(name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(t) = ob.cast::<PyString>() {
            Ok(Seed(t.to_str()?.as_bytes().to_vec()))
        } else if let Ok(b) = ob.cast::<PyBytes>() {
            Ok(Seed(b.as_bytes().to_vec()))
        } else {
            Err(PyTypeError::new_err(format!(
                "{name} must be a str or bytes (e.g. a write's id and a task's partition)"
            )))
        }
    }
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyBytes::new(py, &self.0).into_any())
    }
}

/// A callable, checked by its user (`on_delivery`: [`super::delivery`]).
pub(crate) struct Callback(pub Py<PyAny>);

impl Arg for Callback {
    fn annotation() -> String {
        "Callable[[int], object] | Callable[[DeliveryError | None, Record], object]".into()
    }
    fn extract(_name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(Callback(ob.clone().unbind()))
    }
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.0.bind(py).clone())
    }
}

/// A callable taking the list of `(topic, partition)` a group member was
/// given or gave up (`on_assign`, `on_revoke`).
pub(crate) struct PartitionsCallback(pub Py<PyAny>);

impl Arg for PartitionsCallback {
    fn annotation() -> String {
        "Callable[[list[tuple[str, str]]], object]".into()
    }
    fn extract(name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self> {
        if !ob.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "{name} must be callable: a function taking the list of (topic, partition) \
                 tuples, e.g. {name}=lambda partitions: print(partitions)"
            )));
        }
        Ok(PartitionsCallback(ob.clone().unbind()))
    }
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.0.bind(py).clone())
    }
}

/// `{partition: next offset}`, each offset an `int` >= 0.
pub(crate) struct StartOffsets(pub Vec<(String, u64)>);

impl Arg for StartOffsets {
    fn annotation() -> String {
        "dict[str, int]".into()
    }
    fn extract(_name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self> {
        let given: std::collections::HashMap<String, i128> = ob.extract()?;
        let mut starts = Vec::with_capacity(given.len());
        for (p, off) in given {
            let off = unsigned(&format!("start_offsets[{p:?}]"), off)?;
            starts.push((p, off));
        }
        Ok(StartOffsets(starts))
    }
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let d = pyo3::types::PyDict::new(py);
        for (p, off) in &self.0 {
            d.set_item(p, off)?;
        }
        Ok(d.into_any())
    }
}

/// A point in time ([`super::time::time_ms`]): ms since the epoch, a
/// `datetime` or an ISO 8601 `str`.
pub(crate) struct TimeMs(pub u64);

impl Arg for TimeMs {
    fn annotation() -> String {
        "int | datetime | str".into()
    }
    fn extract(name: &str, ob: &Bound<'_, PyAny>) -> PyResult<Self> {
        super::time::time_ms(ob.py(), ob, name).map(TimeMs)
    }
    fn to_py<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.0.into_pyobject(py)?.into_any())
    }
}
