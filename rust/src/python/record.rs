//! `dafka.Record`, the immutable record a consumer delivers and `dafka.Log`
//! reads, and [`PartitionNames`], which turns a consumer's deliveries into
//! records. Native so that `Consumer.poll_many` makes each record with one
//! allocation (plus its `bytes` value) and no Python call; it behaves like the
//! frozen dataclass it replaced (equality, hash, repr, pickling).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pyo3::basic::CompareOp;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use crate::node::Delivery;
use crate::python::{opt_unsigned, unsigned};

/// One record of a partition.
///
/// ``topic`` is the topic name (bytes that are not UTF-8 are kept as surrogate
/// escapes, so ``topic.encode("utf-8", "surrogateescape")`` gives them back),
/// ``partition`` the partition's name (the producer's address), ``offset`` its
/// position in the partition, ``value`` its content, and ``timestamp`` the time
/// a store appended it, in ms since the epoch, when known.
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
    /// When a store appended the record, in ms since the epoch (None when not known).
    #[pyo3(get)]
    timestamp: Option<u64>,
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
        }
    }

    /// Every field, in the constructor's order.
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<[Bound<'py, PyAny>; 5]> {
        Ok([
            self.topic.bind(py).clone().into_any(),
            self.partition.bind(py).clone().into_any(),
            self.offset.into_pyobject(py)?.into_any(),
            self.value.bind(py).clone().into_any(),
            self.timestamp.into_pyobject(py)?.into_any(),
        ])
    }

    fn same(&self, py: Python<'_>, o: &Self) -> PyResult<bool> {
        let text_eq = |a: &Py<PyString>, b: &Py<PyString>| -> PyResult<bool> {
            Ok(a.is(b) || a.bind(py).as_any().eq(b.bind(py))?)
        };
        Ok(self.offset == o.offset
            && self.timestamp == o.timestamp
            && self.value.bind(py).as_bytes() == o.value.bind(py).as_bytes()
            && text_eq(&self.partition, &o.partition)?
            && text_eq(&self.topic, &o.topic)?)
    }
}

#[pymethods]
impl PyRecord {
    #[new]
    #[pyo3(signature = (topic, partition, offset, value, *, timestamp = None))]
    fn new(
        topic: Py<PyString>,
        partition: Py<PyString>,
        offset: i128,
        value: Py<PyBytes>,
        timestamp: Option<i128>,
    ) -> PyResult<Self> {
        Ok(Self {
            timestamp: opt_unsigned("timestamp", timestamp)?,
            ..Self::from_parts(topic, partition, unsigned("offset", offset)?, value)
        })
    }

    #[classattr]
    fn __match_args__() -> (&'static str, &'static str, &'static str, &'static str) {
        ("topic", "partition", "offset", "value")
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Record(topic={}, partition={}, offset={}, value={}, timestamp={})",
            self.topic.bind(py).repr()?,
            self.partition.bind(py).repr()?,
            self.offset,
            self.value.bind(py).repr()?,
            self.timestamp
                .map_or_else(|| "None".to_string(), |t| t.to_string()),
        ))
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
    /// `copyreg.__newobj_ex__(Record, args, {"timestamp": ...})` with a timestamp.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let me = slf.get();
        let cls = slf.get_type().into_any();
        let [topic, partition, offset, value, timestamp] = me.fields(py)?;
        let args = PyTuple::new(py, [topic, partition, offset, value])?.into_any();
        if me.timestamp.is_none() {
            return PyTuple::new(py, [cls, args]);
        }
        let kwargs = PyDict::new(py);
        kwargs.set_item(intern!(py, "timestamp"), timestamp)?;
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
            let value = PyBytes::new(py, &d.value).unbind();
            let rec = PyRecord::from_parts(topic, partition, d.offset, value);
            out.push(Py::new(py, rec)?);
        }
        Ok(out)
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRecord>()
}
