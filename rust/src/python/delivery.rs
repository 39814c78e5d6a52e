//! A producer's delivery reports (``on_delivery``), in one of two shapes
//! told apart by the callback's arity when the producer is made:
//!
//! - ``on_delivery(err, record)``, confluent-kafka's: once per record, in
//!   offset order, with ``err`` None once ``min_acks`` stores ACKed it, or a
//!   `DeliveryError` when the producer closed without those ACKs. Each
//!   record sent is kept (its body) until reported: only then does a send
//!   do more than enqueue.
//! - ``on_delivery(acked_offset)``: the highest offset acknowledged, when
//!   it advanced.
//!
//! Both are called by ``poll()``, ``flush()`` and ``close()``, in the
//! calling thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering::SeqCst};
use std::sync::Mutex;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::python::record::PyRecord;

/// How the callback is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `on_delivery(acked_offset)`.
    Offset,
    /// `on_delivery(err, record)`, once per record.
    Record,
}

/// The callback, what it was told, and (shape [`Shape::Record`]) the
/// records sent and not yet reported.
pub(super) struct Reports {
    /// In a lock so that the garbage collector can clear it (`__clear__`):
    /// `self.p = Producer(..., on_delivery=self.cb)` makes a cycle.
    cb: Mutex<Option<Py<PyAny>>>,
    shape: Shape,
    /// The highest offset reported as acknowledged, -1 for none.
    reported: AtomicI64,
    /// Records sent and not reported, by offset: their bodies.
    waiting: Mutex<BTreeMap<u64, Vec<u8>>>,
    /// A callback of shape [`Shape::Record`] was given.
    per_record: bool,
}

/// The shapes a callback must have, for the error that refuses another.
const SHAPES: &str = "on_delivery must be callable as on_delivery(err, record), as \
    confluent-kafka's (called once per record: err is None once stores acknowledged it, \
    a DeliveryError if the producer closed first), or as on_delivery(acked_offset)";

/// Whether `sig` (an `inspect.Signature`) binds `n` positional arguments.
fn binds(sig: &Bound<'_, PyAny>, n: usize) -> bool {
    let py = sig.py();
    let args = PyTuple::new(py, (0..n).map(|_| py.None()));
    args.is_ok_and(|a| sig.call_method1("bind", a).is_ok())
}

impl Reports {
    /// Reports to `cb`, whose shape its signature tells: one that takes two
    /// positional arguments gets one report per record, one that takes
    /// exactly one the acknowledged offset. Another is refused
    /// (`TypeError`), saying what it must take.
    pub(super) fn new(py: Python<'_>, cb: Option<Py<PyAny>>) -> PyResult<Self> {
        let shape = match &cb {
            None => Shape::Offset,
            Some(f) => {
                let f = f.bind(py);
                if !f.is_callable() {
                    return Err(PyTypeError::new_err(format!(
                        "{SHAPES}; got {}, which is not callable",
                        f.repr()?
                    )));
                }
                let sig = py
                    .import("inspect")?
                    .call_method1("signature", (f,))
                    .map_err(|_| {
                        PyTypeError::new_err(format!(
                            "{SHAPES}; cannot tell which {} takes: wrap it in a function \
                             of (err, record)",
                            f.repr().map_or_else(|_| "?".to_string(), |r| r.to_string())
                        ))
                    })?;
                if binds(&sig, 2) {
                    Shape::Record
                } else if binds(&sig, 1) {
                    Shape::Offset
                } else {
                    return Err(PyTypeError::new_err(format!(
                        "{SHAPES}; got {} taking {}",
                        f.repr()?,
                        sig.str()?
                    )));
                }
            }
        };
        Ok(Self {
            per_record: shape == Shape::Record && cb.is_some(),
            cb: Mutex::new(cb),
            shape,
            reported: AtomicI64::new(-1),
            waiting: Mutex::new(BTreeMap::new()),
        })
    }

    /// Whether each record sent must be kept for its report ([`Reports::keep`]).
    pub(super) fn per_record(&self) -> bool {
        self.per_record
    }

    fn callback(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        let cb = self.cb.lock().unwrap_or_else(|p| p.into_inner());
        cb.as_ref().map(|c| c.clone_ref(py))
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Vec<u8>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps the records sent at `first`, `first + 1`, ... (their bodies)
    /// until they are reported.
    pub(super) fn keep<'a>(&self, first: u64, bodies: impl IntoIterator<Item = &'a [u8]>) {
        let mut w = self.waiting();
        for (i, b) in bodies.into_iter().enumerate() {
            w.insert(first + i as u64, b.to_vec());
        }
    }

    /// The highest offset reported as acknowledged (-1: none).
    pub(super) fn reported(&self) -> i64 {
        self.reported.load(SeqCst)
    }

    /// Reports what was acknowledged up to `acked` since the last call;
    /// returns how many records that is. Two threads serving at once report
    /// each record once.
    pub(super) fn serve(
        &self,
        py: Python<'_>,
        acked: Option<u64>,
        topic: &str,
        partition: &str,
    ) -> PyResult<u64> {
        let acked = acked.map_or(-1, |a| a as i64);
        let before = self.reported.fetch_max(acked, SeqCst);
        let newly = if acked > before {
            (acked - before) as u64
        } else {
            0
        };
        let Some(cb) = self.callback(py) else {
            return Ok(newly);
        };
        match self.shape {
            Shape::Offset if newly > 0 => {
                cb.call1(py, (acked,))?;
            }
            Shape::Offset => {}
            Shape::Record => {
                let upto = u64::try_from(acked).ok();
                self.report_each(py, &cb, None, topic, partition, |off| {
                    upto.is_some_and(|a| off <= a)
                })?;
            }
        }
        Ok(newly)
    }

    /// Reports every record still waiting as not delivered, with `err` (a
    /// `DeliveryError`): the producer closed before stores acknowledged
    /// them.
    pub(super) fn fail_rest(
        &self,
        py: Python<'_>,
        err: &Bound<'_, PyAny>,
        topic: &str,
        partition: &str,
    ) -> PyResult<()> {
        if let Some(cb) = self.callback(py) {
            self.report_each(py, &cb, Some(err), topic, partition, |_| true)?;
        }
        Ok(())
    }

    /// Calls `cb(err, record)` for each waiting record, in offset order,
    /// while `due(offset)`; each is taken before its call, so a callback
    /// that raises loses no other report.
    fn report_each(
        &self,
        py: Python<'_>,
        cb: &Py<PyAny>,
        err: Option<&Bound<'_, PyAny>>,
        topic: &str,
        partition: &str,
        due: impl Fn(u64) -> bool,
    ) -> PyResult<()> {
        let (t, p) = (
            PyString::new(py, topic).unbind(),
            PyString::new(py, partition).unbind(),
        );
        loop {
            let next = {
                let mut w = self.waiting();
                match w.first_key_value() {
                    Some((&off, _)) if due(off) => w.pop_first(),
                    _ => None,
                }
            };
            let Some((off, body)) = next else {
                return Ok(());
            };
            let (m, value) = crate::meta::split(&body).map_err(|e| {
                pyo3::exceptions::PyRuntimeError::new_err(format!(
                    "a kept record does not parse: {e}"
                ))
            })?;
            let record = PyRecord::from_body(py, t.clone_ref(py), p.clone_ref(py), off, &m, value);
            let err = err.map_or_else(|| py.None(), |e| e.clone().unbind());
            cb.call1(py, (err, Py::new(py, record)?))?;
        }
    }

    /// For the garbage collector (`__traverse__`): the callback, unless the
    /// lock is held right now (then it visits nothing this time).
    pub(super) fn traverse(&self, visit: &pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        if let Ok(cb) = self.cb.try_lock() {
            if let Some(cb) = cb.as_ref() {
                visit.call(cb)?;
            }
        }
        Ok(())
    }

    /// For the garbage collector (`__clear__`).
    pub(super) fn clear(&self) {
        let cb = self.cb.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(cb);
    }
}
