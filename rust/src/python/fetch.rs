//! The bounded read clients (`crate::node::fetcher`) for batch jobs, GIL
//! released while waiting: `heads`, `offsets`, `offsets_for_times`,
//! `topics`, `fetch_range`, `fetch_ranges`, `HeadsWatch`, and `check_node`.
//! Each takes its per-call arguments and the [`Discovery`] options.

use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use super::args::{seconds, str_list, unsigned, StrList};
use super::discovery::{CheckNodeOptions, Discovery};
use super::options::{options, Options};
use super::record::PyRecord;
use super::time::time_ms;
use super::wait::check_signals;
use crate::node::fetcher;

options! {
    /// `HeadsWatch`'s options.
    pub(crate) struct HeadsWatchOptions {
        ..discovery: Discovery,
        /// Seconds after which a partition no store announces leaves the answers; None
        /// (the default): never (stores announce every partition they hold records of).
        forget_after: Option<Duration> = None,
    }
}

/// The partitions of ``topic`` held by stores (and live producers), each with
/// its next offset: ``{partition: last_offset + 1}``.
#[pyfunction]
#[pyo3(signature = (topic, *, timeout = 10.0, settle = 0.5, **options))]
fn heads(
    py: Python<'_>,
    topic: String,
    timeout: f64,
    settle: f64,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<std::collections::BTreeMap<String, u64>> {
    let cfg = Discovery::parse("heads", options)?.read_config()?;
    let (t, s) = (seconds("timeout", timeout)?, seconds("settle", settle)?);
    py.detach(|| fetcher::heads::<PyErr>(&cfg, &topic, t, s, check_signals))
}

/// The partitions of ``topic`` held by stores (and live producers), each with
/// ``(first, next)``: the lowest offset still held (where "earliest" begins
/// once retention deleted older records; 0 when nobody answered) and the next
/// offset. The first-offset probe (one FETCH each) covers ``partitions`` (all
/// when None) except those in ``exclude``; the others report 0. It ends as
/// soon as every partition it covers answered 0, else ``settle`` after the
/// last answer (a lower one may still come from another store).
#[pyfunction]
#[pyo3(signature = (topic, *, partitions = None, exclude = None, timeout = 10.0, settle = 0.5, **options))]
fn offsets(
    py: Python<'_>,
    topic: String,
    partitions: Option<StrList>,
    exclude: Option<StrList>,
    timeout: f64,
    settle: f64,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<std::collections::BTreeMap<String, (u64, u64)>> {
    let cfg = Discovery::parse("offsets", options)?.read_config()?;
    let (t, s) = (seconds("timeout", timeout)?, seconds("settle", settle)?);
    let (partitions, exclude) = (partitions.map(|l| l.0), str_list(exclude));
    let got = py.detach(|| {
        fetcher::offsets::<PyErr>(
            &cfg,
            &topic,
            partitions.as_deref(),
            &exclude,
            t,
            s,
            check_signals,
        )
    })?;
    Ok(got
        .into_iter()
        .map(|(p, o)| (p, (o.first, o.next)))
        .collect())
}

/// Reads exactly ``[start, end)`` of one partition from stores; returns
/// ``(records, lost)`` with ``records`` a list of ``(offset, value)`` in order
/// (with ``with_meta``, of ``Record``s, with keys, headers and timestamps)
/// and ``lost`` the ``(from, to)`` ranges retention removed (raises
/// DataLossError instead when ``fail_on_loss``).
#[pyfunction]
#[pyo3(signature = (topic, partition, start, end, *, timeout = 60.0, fail_on_loss = true, with_meta = false, **options))]
#[allow(clippy::too_many_arguments)]
fn fetch_range<'py>(
    py: Python<'py>,
    topic: String,
    partition: String,
    start: i128,
    end: i128,
    timeout: f64,
    fail_on_loss: bool,
    with_meta: bool,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyFetched<'py>> {
    let cfg = Discovery::parse("fetch_range", options)?.read_config()?;
    let t = seconds("timeout", timeout)?;
    let (start, end): (u64, u64) = (unsigned("start", start)?, unsigned("end", end)?);
    let got = py.detach(|| {
        fetcher::fetch_range::<PyErr>(
            &cfg,
            &topic,
            &partition,
            start,
            end,
            t,
            fail_on_loss,
            check_signals,
        )
    })?;
    to_py(
        py,
        got,
        with_meta.then_some((topic.as_str(), partition.as_str())),
    )
}

/// What one range read gave Python: ``(records, lost)``.
type PyFetched<'py> = (Vec<Bound<'py, PyAny>>, Vec<(u64, u64)>);

/// `(offset, value)` pairs, or with `meta` (topic, partition) `Record`s
/// with their keys, headers and timestamps.
fn to_py<'py>(
    py: Python<'py>,
    got: fetcher::Fetched,
    meta: Option<(&str, &str)>,
) -> PyResult<PyFetched<'py>> {
    let names = meta.map(|(t, p)| (PyString::new(py, t).unbind(), PyString::new(py, p).unbind()));
    let mut records = Vec::with_capacity(got.records.len());
    for (o, body) in got.records {
        let (m, value) = crate::meta::split(&body)
            .map_err(|e| PyValueError::new_err(format!("record {o}: {e}")))?;
        records.push(match &names {
            None => (o, PyBytes::new(py, value)).into_pyobject(py)?.into_any(),
            Some((t, p)) => {
                let r = PyRecord::from_body(py, t.clone_ref(py), p.clone_ref(py), o, &m, value);
                Bound::new(py, r)?.into_any()
            }
        });
    }
    Ok((records, got.lost))
}

/// The topics the stores hold records of, sorted (names that are not UTF-8
/// with surrogate escapes). Asks every store that connects within
/// ``timeout`` for every partition it holds, and ends ``settle`` seconds after
/// the first one with no new store or topic since; raises FetchTimeoutError
/// when none connects. In a secure cluster, the topics the certificate may
/// read.
#[pyfunction]
#[pyo3(signature = (*, timeout = 10.0, settle = 0.5, **options))]
fn topics(
    py: Python<'_>,
    timeout: f64,
    settle: f64,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Vec<String>> {
    let cfg = Discovery::parse("topics", options)?.read_config()?;
    let (t, s) = (seconds("timeout", timeout)?, seconds("settle", settle)?);
    let got = py.detach(|| fetcher::topics::<PyErr>(&cfg, t, s, check_signals))?;
    Ok(got
        .into_iter()
        .map(|t| match String::from_utf8(t) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
        .collect())
}

/// For each partition of ``topic`` that stores hold, the first offset whose
/// time (its timestamp, else the time a store appended it) is at or after
/// ``timestamp``, or the partition's next offset when no record is that
/// late: ``{partition: offset}``, where a reader starting at that time
/// begins. ``timestamp`` is ms since the epoch (int), a ``datetime`` or an ISO
/// 8601 str. Asks the stores (TIME-QUERY) and ends ``settle`` seconds after
/// the first store connected with no lower answer since; raises
/// FetchTimeoutError when no store connects within ``timeout``.
#[pyfunction]
#[pyo3(signature = (topic, timestamp, *, timeout = 10.0, settle = 0.5, **options))]
fn offsets_for_times(
    py: Python<'_>,
    topic: String,
    timestamp: &Bound<'_, PyAny>,
    timeout: f64,
    settle: f64,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<std::collections::BTreeMap<String, u64>> {
    let time = time_ms(py, timestamp, "timestamp")?;
    let cfg = Discovery::parse("offsets_for_times", options)?.read_config()?;
    let (t, s) = (seconds("timeout", timeout)?, seconds("settle", settle)?);
    py.detach(|| fetcher::offsets_for_time::<PyErr>(&cfg, &topic, time, t, s, check_signals))
}

/// :func:`fetch_range` of several ``(topic, partition, start, end)`` ranges,
/// in turn, by one client (discovery and connections paid once); returns one
/// ``(records, lost)`` per range. ``timeout`` applies to each range.
#[pyfunction]
#[pyo3(signature = (ranges, *, timeout = 60.0, fail_on_loss = true, with_meta = false, **options))]
fn fetch_ranges<'py>(
    py: Python<'py>,
    ranges: Vec<(String, String, i128, i128)>,
    timeout: f64,
    fail_on_loss: bool,
    with_meta: bool,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Vec<PyFetched<'py>>> {
    let cfg = Discovery::parse("fetch_ranges", options)?.read_config()?;
    let t = seconds("timeout", timeout)?;
    let mut owned = Vec::with_capacity(ranges.len());
    for (topic, partition, start, end) in ranges {
        owned.push((
            topic,
            partition,
            unsigned("start", start)?,
            unsigned("end", end)?,
        ));
    }
    let refs: Vec<fetcher::Range<'_>> = owned
        .iter()
        .map(|(t, p, s, e)| (t.as_str(), p.as_str(), *s, *e))
        .collect();
    let got =
        py.detach(|| fetcher::fetch_ranges::<PyErr>(&cfg, &refs, t, fail_on_loss, check_signals))?;
    got.into_iter()
        .zip(&owned)
        .map(|(f, (t, p, _, _))| to_py(py, f, with_meta.then_some((t.as_str(), p.as_str()))))
        .collect()
}

/// A read client kept across :meth:`offsets` rounds of one topic, for a
/// streaming source that plans every micro-batch: after the first round, a
/// round asks once and ends as soon as as many answers came as in the round
/// before (every store answered again) instead of waiting ``settle``; heads
/// only rise. A store that connects makes a full round; one that went away
/// makes the round wait ``settle`` once. Between rounds a thread of its own
/// keeps the client known to the stores (beacons, every 0.1 s), so a round
/// after a long pause (a ``processingTime`` trigger of minutes) is still a
/// quick one. A partition no store has announced for ``forget_after``
/// seconds leaves the answers (None, the default: never; stores announce
/// every partition they hold records of). Close it (or use ``with``).
#[pyclass(module = "dafka._native")]
pub struct HeadsWatch {
    inner: std::sync::Mutex<Option<fetcher::HeadsWatch>>,
}

#[pymethods]
impl HeadsWatch {
    #[new]
    #[pyo3(signature = (topic, **options))]
    fn new(topic: String, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let o = HeadsWatchOptions::parse("HeadsWatch", options)?;
        let cfg = o.discovery.read_config()?;
        let forget_after = o.forget_after;
        let w = fetcher::HeadsWatch::open(&cfg, &topic, forget_after)?;
        Ok(Self {
            inner: std::sync::Mutex::new(Some(w)),
        })
    }

    /// :func:`offsets` through this client: ``{partition: (first, next)}``.
    #[pyo3(signature = (*, partitions = None, exclude = None, timeout = 10.0, settle = 0.5))]
    fn offsets(
        &self,
        py: Python<'_>,
        partitions: Option<StrList>,
        exclude: Option<StrList>,
        timeout: f64,
        settle: f64,
    ) -> PyResult<std::collections::BTreeMap<String, (u64, u64)>> {
        let (t, s) = (seconds("timeout", timeout)?, seconds("settle", settle)?);
        let (partitions, exclude) = (partitions.map(|l| l.0), str_list(exclude));
        let got = py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let w = guard.as_mut().ok_or(crate::error::Error::Closed)?;
            w.offsets::<PyErr>(partitions.as_deref(), &exclude, t, s, check_signals)
        })?;
        Ok(got
            .into_iter()
            .map(|(p, o)| (p, (o.first, o.next)))
            .collect())
    }

    /// ``{"rounds", "quick_rounds", "probes", "quick_probes"}``: rounds so
    /// far, and those that ended once every peer answered again instead of
    /// waiting ``settle``; rounds that probed first offsets, and those whose
    /// probe ended at once because every partition answered offset 0.
    /// (Waits for a round in progress in another thread, GIL released.)
    fn stats(&self, py: Python<'_>) -> PyResult<std::collections::BTreeMap<&'static str, u64>> {
        let s = py.detach(|| {
            let guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let w = guard.as_ref().ok_or(crate::error::Error::Closed)?;
            let st = w.stats();
            Ok::<_, crate::error::Error>([
                ("rounds", st.rounds),
                ("quick_rounds", st.quick_rounds),
                ("probes", st.probes),
                ("quick_probes", st.quick_probes),
            ])
        })?;
        Ok(s.into())
    }

    /// Closes the client's sockets; later rounds raise ClosedError.
    fn close(&self, py: Python<'_>) {
        let w = py.detach(|| self.inner.lock().unwrap_or_else(|e| e.into_inner()).take());
        drop(w);
    }

    /// Returns the client, for ``with HeadsWatch(...) as watch:``.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Closes the client on leaving the ``with`` block; an exception propagates.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }
}

/// Checks node settings as a node would at start-up, without starting one:
/// raises ``ConfigError`` (or ``ValueError``) saying what to fix. For a Spark
/// driver, so that a bad option is reported once there, not by every task.
/// With ``cert`` and ``trust`` it reads both, as a node of ``role``
/// (``"store"``, ``"producer"``, ``"consumer"``, the read clients' role, or
/// ``"tower"``) would: a missing file raises ``OSError``, a certificate of
/// another role ``ConfigError``.
#[pyfunction]
#[pyo3(signature = (**options))]
fn check_node(options: Option<&Bound<'_, PyDict>>) -> PyResult<()> {
    CheckNodeOptions::parse("check_node", options)?.check()
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<HeadsWatch>()?;
    m.add_function(wrap_pyfunction!(check_node, m)?)?;
    m.add_function(wrap_pyfunction!(heads, m)?)?;
    m.add_function(wrap_pyfunction!(offsets, m)?)?;
    m.add_function(wrap_pyfunction!(fetch_range, m)?)?;
    m.add_function(wrap_pyfunction!(offsets_for_times, m)?)?;
    m.add_function(wrap_pyfunction!(topics, m)?)?;
    m.add_function(wrap_pyfunction!(fetch_ranges, m)?)?;
    Ok(())
}
