//! `dafka.Record`, the immutable record a consumer delivers and `dafka.Log`
//! reads, and [`PartitionNames`], which turns a consumer's deliveries into
//! records. Native so that `Consumer.poll_many` makes each record with one
//! allocation (plus its `bytes` value) and no Python call; it behaves like the
//! frozen dataclass it replaced (equality, hash, repr, pickling).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pyo3::basic::CompareOp;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use super::args::{opt_unsigned, unsigned};
use crate::meta::{self, MetaRef, TimeType};
use crate::node::Delivery;

/// One record of a partition.
///
/// ``topic`` is the topic name (bytes that are not UTF-8 are kept as surrogate
/// escapes, so ``topic.encode("utf-8", "surrogateescape")`` gives them back),
/// ``partition`` the partition's name (the producer's address), ``offset`` its
/// position in the partition, ``value`` its content, ``key`` its key (None
/// without one), ``headers`` its headers (a list of ``(name, value)`` pairs, in
/// order, repeats allowed), ``timestamp`` its time in ms since the epoch (None
/// when not known) and ``timestamp_type`` what that time is:
/// ``TIMESTAMP_CREATE`` (0, set by the producer) or ``TIMESTAMP_LOG_APPEND``
/// (1, a store's append time, for a record that came without one).
#[pyclass(module = "dafka", name = "Record", frozen)]
pub(super) struct PyRecord {
    /// The topic name (surrogate escapes for bytes that are not UTF-8).
    #[pyo3(get)]
    topic: Py<PyString>,
    /// The partition's name: its producer's address.
    #[pyo3(get)]
    partition: Py<PyString>,
    /// The record's position in its partition, from 0.
    #[pyo3(get)]
    offset: u64,
    /// The record's content.
    #[pyo3(get)]
    value: Py<PyBytes>,
    /// The record's time in ms since the epoch (None when not known).
    #[pyo3(get)]
    timestamp: Option<u64>,
    /// 0 (create time, set by the producer), 1 (a store's append time), or
    /// None without a timestamp.
    #[pyo3(get)]
    timestamp_type: Option<i32>,
    /// The encoded key and headers ([`crate::meta`]), when it has either.
    extra: Option<Box<[u8]>>,
}

impl PyRecord {
    /// A record from its parts: the consumer shares one `topic` and one
    /// `partition` object between all records of a partition.
    fn from_parts(
        topic: Py<PyString>,
        partition: Py<PyString>,
        offset: u64,
        value: Py<PyBytes>,
    ) -> Self {
        Self {
            topic,
            partition,
            offset,
            value,
            timestamp: None,
            timestamp_type: None,
            extra: None,
        }
    }

    /// A record of a body's value with its metadata.
    pub(super) fn from_body(
        py: Python<'_>,
        topic: Py<PyString>,
        partition: Py<PyString>,
        offset: u64,
        m: &MetaRef<'_>,
        value: &[u8],
    ) -> Self {
        let value = PyBytes::new(py, value).unbind();
        let mut r = Self::from_parts(topic, partition, offset, value);
        r.set_meta(m);
        r
    }

    fn set_meta(&mut self, m: &MetaRef<'_>) {
        if let Some((t, kind)) = m.timestamp() {
            self.timestamp = Some(t);
            self.timestamp_type = Some(kind.code());
        }
        if m.key.is_some() || m.header_count > 0 {
            self.extra = Some(m.raw.into());
        }
    }

    fn meta(&self) -> Option<MetaRef<'_>> {
        self.extra
            .as_deref()
            .and_then(|raw| meta::parse(raw).ok())
            .map(|(m, _)| m)
    }

    /// Every field, in the constructor's order.
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<[Bound<'py, PyAny>; 8]> {
        let headers = PyTuple::new(py, self.header_tuples(py)?)?;
        Ok([
            self.topic.bind(py).clone().into_any(),
            self.partition.bind(py).clone().into_any(),
            self.offset.into_pyobject(py)?.into_any(),
            self.value.bind(py).clone().into_any(),
            self.timestamp.into_pyobject(py)?.into_any(),
            self.key(py).into_bound(py),
            headers.into_any(),
            self.timestamp_type.into_pyobject(py)?.into_any(),
        ])
    }

    fn header_tuples<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let Some(m) = self.meta() else {
            return Ok(Vec::new());
        };
        m.headers()
            .map(|(n, v)| {
                PyTuple::new(
                    py,
                    [
                        PyString::new(py, n).into_any(),
                        PyBytes::new(py, v).into_any(),
                    ],
                )
            })
            .collect()
    }

    fn same(&self, py: Python<'_>, o: &Self) -> PyResult<bool> {
        let text_eq = |a: &Py<PyString>, b: &Py<PyString>| -> PyResult<bool> {
            Ok(a.is(b) || a.bind(py).as_any().eq(b.bind(py))?)
        };
        Ok(self.offset == o.offset
            && self.timestamp == o.timestamp
            && self.timestamp_type == o.timestamp_type
            && self.extra == o.extra
            && self.value.bind(py).as_bytes() == o.value.bind(py).as_bytes()
            && text_eq(&self.partition, &o.partition)?
            && text_eq(&self.topic, &o.topic)?)
    }
}

#[pymethods]
impl PyRecord {
    #[new]
    #[pyo3(signature = (topic, partition, offset, value, *, timestamp = None, key = None, headers = None, timestamp_type = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        topic: Py<PyString>,
        partition: Py<PyString>,
        offset: i128,
        value: Py<PyBytes>,
        timestamp: Option<i128>,
        key: Option<Vec<u8>>,
        headers: Option<&Bound<'_, PyAny>>,
        timestamp_type: Option<i32>,
    ) -> PyResult<Self> {
        let timestamp = opt_unsigned("timestamp", timestamp)?;
        let timestamp_type = match (timestamp, timestamp_type) {
            (None, None) => None,
            (None, Some(_)) => {
                return Err(PyValueError::new_err(
                    "timestamp_type without a timestamp: give both, or neither",
                ))
            }
            (Some(_), None) => Some(TimeType::Create.code()),
            (Some(_), Some(t @ (0 | 1))) => Some(t),
            (Some(_), Some(t)) => {
                return Err(PyValueError::new_err(format!(
                    "timestamp_type must be 0 (create time) or 1 (log-append time), got {t}"
                )))
            }
        };
        let headers = match headers {
            Some(h) => headers_arg(h)?,
            None => Vec::new(),
        };
        let extra = (key.is_some() || !headers.is_empty()).then(|| {
            let mut raw = Vec::new();
            meta::encode(&mut raw, 0, key.as_deref(), &headers);
            raw.into_boxed_slice()
        });
        Ok(Self {
            timestamp,
            timestamp_type,
            extra,
            ..Self::from_parts(topic, partition, unsigned("offset", offset)?, value)
        })
    }

    /// The record's key (None without one).
    #[getter]
    fn key(&self, py: Python<'_>) -> Py<PyAny> {
        match self.meta().and_then(|m| m.key) {
            Some(k) => PyBytes::new(py, k).into_any().unbind(),
            None => py.None(),
        }
    }

    /// The record's headers: ``(name, value)`` pairs in order (a new list each time).
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, self.header_tuples(py)?)
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str, &'static str, &'static str) {
        ("topic", "partition", "offset", "value")
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut s = format!(
            "Record(topic={}, partition={}, offset={}, value={}, timestamp={}",
            self.topic.bind(py).repr()?,
            self.partition.bind(py).repr()?,
            self.offset,
            self.value.bind(py).repr()?,
            self.timestamp
                .map_or_else(|| "None".to_string(), |t| t.to_string()),
        );
        if let Some(t) = self.timestamp_type {
            s.push_str(&format!(", timestamp_type={t}"));
        }
        if self.extra.is_some() {
            s.push_str(&format!(
                ", key={}, headers={}",
                self.key(py).bind(py).repr()?,
                self.headers(py)?.repr()?
            ));
        }
        s.push(')');
        Ok(s)
    }

    /// Equal when every field is equal; other types are not comparable.
    fn __richcmp__(
        &self,
        py: Python<'_>,
        other: &Bound<'_, PyAny>,
        op: CompareOp,
    ) -> PyResult<Py<PyAny>> {
        let Ok(other) = other.cast::<Self>() else {
            return Ok(py.NotImplemented());
        };
        let same = self.same(py, other.get())?;
        Ok(match op {
            CompareOp::Eq => same.into_pyobject(py)?.to_owned().into_any().unbind(),
            CompareOp::Ne => (!same).into_pyobject(py)?.to_owned().into_any().unbind(),
            _ => py.NotImplemented(),
        })
    }

    /// The hash of the tuple of all fields, as the dataclass had.
    fn __hash__(&self, py: Python<'_>) -> PyResult<isize> {
        PyTuple::new(py, self.fields(py)?)?.hash()
    }

    /// Pickles as a constructor call (every protocol): `Record(*args)`, or
    /// `copyreg.__newobj_ex__(Record, args, kwargs)` with a timestamp, key or headers.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let me = slf.get();
        let cls = slf.get_type().into_any();
        let [topic, partition, offset, value, timestamp, key, headers, timestamp_type] =
            me.fields(py)?;
        let args = PyTuple::new(py, [topic, partition, offset, value])?.into_any();
        if me.timestamp.is_none() && me.extra.is_none() {
            return PyTuple::new(py, [cls, args]);
        }
        let kwargs = PyDict::new(py);
        kwargs.set_item(intern!(py, "timestamp"), timestamp)?;
        kwargs.set_item(intern!(py, "timestamp_type"), timestamp_type)?;
        kwargs.set_item(intern!(py, "key"), key)?;
        kwargs.set_item(intern!(py, "headers"), headers)?;
        let newobj = py
            .import(intern!(py, "copyreg"))?
            .getattr(intern!(py, "__newobj_ex__"))?;
        let call = PyTuple::new(py, [cls, args, kwargs.into_any()])?;
        PyTuple::new(py, [newobj, call.into_any()])
    }
}

/// The `str` objects of one partition's topic and name, and the topic they
/// were made for.
struct Strs {
    topic_name: Arc<str>,
    topic: Py<PyString>,
    partition: Py<PyString>,
}

/// Each partition's [`Strs`], made once and shared by every record of the
/// partition. Bounded: cleared when it reaches `NAMES_MAX` partitions
/// (producers come and go, each with a new address). Locked only around map
/// operations, which run no Python code, so holding the lock never waits for
/// the GIL.
#[derive(Default)]
pub(super) struct PartitionNames(Mutex<HashMap<Arc<str>, Strs>>);

const NAMES_MAX: usize = 4096;

impl PartitionNames {
    /// The topic and partition `str`s of `d`'s partition.
    fn get(&self, py: Python<'_>, d: &Delivery) -> (Py<PyString>, Py<PyString>) {
        let lock = || self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = lock().get(&d.partition) {
            if Arc::ptr_eq(&s.topic_name, &d.topic) || s.topic_name == d.topic {
                return (s.topic.clone_ref(py), s.partition.clone_ref(py));
            }
        }
        let s = Strs {
            topic_name: d.topic.clone(),
            topic: PyString::new(py, &d.topic).unbind(),
            partition: PyString::new(py, &d.partition).unbind(),
        };
        let got = (s.topic.clone_ref(py), s.partition.clone_ref(py));
        let mut map = lock();
        if map.len() >= NAMES_MAX {
            map.clear();
        }
        map.insert(d.partition.clone(), s);
        got
    }

    /// `dafka.Record`s for `ds`, in order: per record, one `bytes` and one
    /// `Record` allocation.
    pub(super) fn records(&self, py: Python<'_>, ds: Vec<Delivery>) -> PyResult<Vec<Py<PyRecord>>> {
        let mut out = Vec::with_capacity(ds.len());
        let mut last: Option<(Arc<str>, Py<PyString>, Py<PyString>)> = None;
        for d in ds {
            let (topic, partition) = match &last {
                Some((k, t, p)) if Arc::ptr_eq(k, &d.partition) => {
                    (t.clone_ref(py), p.clone_ref(py))
                }
                _ => {
                    let (t, p) = self.get(py, &d);
                    last = Some((d.partition.clone(), t.clone_ref(py), p.clone_ref(py)));
                    (t, p)
                }
            };
            let (m, value) = d.parts();
            let rec = PyRecord::from_body(py, topic, partition, d.offset, &m, value);
            out.push(Py::new(py, rec)?);
        }
        Ok(out)
    }
}

/// `headers` as Python gives them: an iterable of `(str, bytes-like)` pairs.
pub(super) fn headers_arg(h: &Bound<'_, PyAny>) -> PyResult<Vec<(String, Vec<u8>)>> {
    if h.is_instance_of::<PyString>()
        || h.is_instance_of::<PyBytes>()
        || h.is_instance_of::<PyDict>()
    {
        return Err(PyTypeError::new_err(
            "headers must be a list of (name, value) pairs, e.g. [(\"trace\", b\"42\")] \
             (a dict cannot hold repeated names)",
        ));
    }
    let mut out = Vec::new();
    for item in h.try_iter()? {
        let item = item?;
        let pair: (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "each header must be a (name, value) pair of str and bytes, got {}",
                item.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            ))
        })?;
        let name: String = pair.0.extract().map_err(|_| {
            PyTypeError::new_err("a header name must be a str (Kafka's header keys are strings)")
        })?;
        let value: Vec<u8> = if pair.1.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(format!(
                "header {name:?}: the value must be bytes, not str (encode it)"
            )));
        } else {
            pair.1.extract().map_err(|_| {
                PyTypeError::new_err(format!("header {name:?}: the value must be bytes"))
            })?
        };
        out.push((name, value));
    }
    Ok(out)
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRecord>()?;
    m.add("TIMESTAMP_CREATE", TimeType::Create.code())?;
    m.add("TIMESTAMP_LOG_APPEND", TimeType::LogAppend.code())?;
    Ok(())
}
