//! `dafka.Store`: a store node in-process, over the durable log. A thin PyO3
//! class (argument parsing, GIL release, conversion), and its options.

use std::sync::LazyLock;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use super::discovery::{Discovery, Hwm};
use super::errors::Exc;
use super::log::Retention;
use super::options::{options, Options};
use super::wait::stats_dict;
use crate::log::{FsyncPolicy, RecoveryPolicy};
use crate::node::{Store, StoreConfig};

/// The stores' defaults (`StoreConfig::default()`, the core's; a store's
/// log syncs sooner than a `dafka.Log`).
static STORE: LazyLock<StoreConfig> = LazyLock::new(StoreConfig::default);

options! {
    /// `dafka.Store`'s options.
    pub(crate) struct StoreOptions {
        ..discovery: Discovery,
        ..hwm: Hwm,
        /// When appends are synced: ``"interval"`` (a group commit once
        /// ``flush_interval_ms`` passed or ``flush_messages`` records are unsynced),
        /// ``"always"`` (a sync whenever records are unsynced and none is running) or
        /// ``"never"`` (only when the store closes).
        fsync: FsyncPolicy = STORE.log.fsync,
        /// With ``fsync="interval"``: sync once this many milliseconds passed since the last
        /// sync.
        flush_interval_ms: u64 = STORE.log.flush_interval_ms,
        /// With ``fsync="interval"``: sync once this many records are unsynced; must be >= 1.
        flush_messages: u64 = STORE.log.flush_messages,
        /// What opening does with damage at the end of a partition's last segment:
        /// ``"tolerate_tail_corruption"`` cuts it off if no valid record follows it,
        /// ``"absolute_consistency"`` cuts off only a torn last record. A partition whose
        /// damage recovery refuses is set aside (counted in ``stats()["damaged_partitions"]``).
        recovery: RecoveryPolicy = STORE.log.recovery,
        /// Longer records are dropped (67108864 is 64 MiB) and counted in
        /// ``stats()["dropped_oversize"]``; must be >= 1. Keep it at least the producers'
        /// ``max_record_bytes``.
        max_record_bytes: usize = STORE.state.max_record_bytes,
        /// Seconds after which an unanswered FETCH for a gap is sent again; at least 0.001.
        /// After 6 unanswered tries the interval doubles per retry, up to 16 times this.
        fetch_retry: Duration = STORE.state.fetch_retry,
        /// Most segment files kept open; the others are reopened on use. None: half the
        /// process's open-files limit (whose soft value is raised to the hard one), at least
        /// 64. All stores in a process together keep within that half. 0 is refused.
        max_open_files: Option<usize> = STORE.log.max_open_files,
        ..retention: Retention,
    }
}

static PARTITION_INFO: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// A store: persists the partitions it hears, ACKs what is durable, answers FETCHes.
///
/// Runs a store node in this process over the durable log in ``PATH/log``. Its address is kept in
/// ``PATH/store.id`` and reused after a restart. It ACKs, cumulatively per partition, only what
/// reached fdatasync (with ``fsync="never"``, what was appended). It fetches its own gaps from
/// producers and other stores, and serves FETCHes of late consumers and other stores from the
/// log. On a storage error (disk full) it stops ACKing, reports the error in ``stats()["error"]``,
/// reopens the failed partitions every second and resumes. The node runs on its own thread.
///
/// Parameters
/// ----------
/// path : str or os.PathLike
///     The store's directory, created if missing. It must not be empty (``"."`` names the
///     current directory).
///
/// Raises
/// ------
/// ConfigError
///     An option is out of range or malformed: an endpoint, ``wire``, ``fsync``, ``recovery``,
///     ``fetch_retry``, a zero count, an empty ``path`` or a bad ``PATH/store.id``.
///     Secure mode: ``cert`` without ``trust`` (or the reverse), a certificate of another role,
///     or a tower or peer endpoint keyed (``;curve=KEY``) without ``cert``, or keyless with it.
/// ValueError
///     A negative or too large integer, ``retain_hours=0`` or ``forget_parked_hours=0``, or a
///     number of seconds that is negative or not finite.
/// TypeError
///     ``towers`` or ``peers`` is a ``str`` instead of a list.
/// LogError
///     The log cannot be opened, e.g. another ``Store`` or ``Log`` holds it; ``LogValueError`` for
///     ``segment_bytes`` out of range or ``max_open_files=0``.
/// OSError
///     ``cert`` or ``trust`` cannot be read: ``FileNotFoundError``, ``PermissionError``, ...
///     (the error names the path).
/// SecurityError
///     ``cert`` is malformed or holds no secret key (``NAME.key`` given for ``NAME.key_secret``).
/// NodeError
///     The node cannot start, e.g. its ``bind`` endpoint is in use.
#[pyclass(module = "dafka._native", name = "Store", frozen)]
struct PyStore {
    inner: Store,
    /// Shown by `dafka.serve_metrics` until closed.
    metrics: crate::metrics::Registration,
    /// As given (a name that is not UTF-8 comes back with surrogate escapes,
    /// as `os.fsdecode` gives it).
    path: std::ffi::OsString,
}

#[pymethods]
impl PyStore {
    #[new]
    #[pyo3(signature = (path, **options))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let o = StoreOptions::parse("Store", options)?;
        if o.fetch_retry < Duration::from_millis(1) {
            return Err(Exc::Config.err("fetch_retry must be at least 0.001 s"));
        }
        let mut cfg = StoreConfig {
            node: o.discovery.node_config(o.hwm)?,
            ..StoreConfig::default()
        };
        cfg.log.fsync = o.fsync;
        cfg.log.recovery = o.recovery;
        cfg.log.flush_interval_ms = o.flush_interval_ms;
        cfg.log.flush_messages = o.flush_messages;
        o.retention.apply(&mut cfg.log);
        cfg.log.max_open_files = o.max_open_files;
        cfg.state.max_record_bytes = o.max_record_bytes;
        cfg.state.fetch_retry = o.fetch_retry;
        let inner = py.detach(|| Store::open(&path, cfg))?;
        Ok(Self {
            metrics: crate::metrics::register(inner.metrics_source()),
            inner,
            path: path.into_os_string(),
        })
    }

    /// The store's address (32 hex characters), kept in ``PATH/store.id``.
    #[getter]
    fn address(&self) -> &str {
        self.inner.address()
    }
    /// The XPUB endpoint other nodes list in ``peers=[...]``.
    #[getter]
    fn endpoint(&self) -> &str {
        self.inner.endpoint()
    }
    /// The store's directory, as given.
    #[getter]
    fn path(&self) -> &std::ffi::OsStr {
        &self.path
    }
    /// Connects to one more peer (an XPUB endpoint), like ``peers=[...]``.
    fn connect(&self, endpoint: &str) -> PyResult<()> {
        Ok(self.inner.connect(endpoint)?)
    }

    /// The partitions held (optionally of one topic), as
    /// ``dafka.log.PartitionInfo`` (topic, partition, first/next/durable
    /// offsets, bytes, segments).
    /// A topic is ``str`` (surrogate escapes for bytes that are not UTF-8, as
    /// ``dafka.Log`` and ``Record.topic`` give them) or ``bytes``.
    #[pyo3(signature = (topic = None))]
    fn partitions<'py>(
        &self,
        py: Python<'py>,
        topic: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let t = match topic {
            None => None,
            Some(t) if t.is_instance_of::<pyo3::types::PyBytes>() => Some(t.extract::<Vec<u8>>()?),
            Some(t) if t.is_instance_of::<pyo3::types::PyString>() => Some(
                t.call_method1("encode", ("utf-8", "surrogateescape"))?
                    .extract::<Vec<u8>>()?,
            ),
            Some(t) => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "topic must be str or bytes, got {}",
                    t.get_type().name()?
                )))
            }
        };
        let infos = py.detach(|| {
            self.inner.query(move |log| {
                log.log()
                    .map(|l| l.partitions(t.as_deref()))
                    .unwrap_or_default()
            })
        })?;
        let cls = PARTITION_INFO
            .get_or_try_init(py, || {
                py.import("dafka.log")?
                    .getattr("PartitionInfo")
                    .map(Bound::unbind)
            })?
            .bind(py);
        infos
            .into_iter()
            .map(|i| {
                // Surrogate escapes for bytes that are not UTF-8, as
                // `dafka.Log` gives them: two such topics stay apart.
                let topic = pyo3::types::PyBytes::new(py, &i.topic)
                    .call_method1("decode", ("utf-8", "surrogateescape"))?;
                cls.call1((
                    topic,
                    i.partition,
                    i.first_offset,
                    i.next_offset,
                    i.durable_next,
                    i.bytes,
                    i.segments,
                ))
            })
            .collect()
    }

    /// Counters of the node and the store logic, and ``error``: the current
    /// storage error (e.g. disk full) or None. ``appended`` and ``bytes_appended``
    /// count the records the log took and the bytes of their bodies (metadata and
    /// value), ``records_served`` and ``bytes_served`` those sent in answer to
    /// FETCHes. ``syncs``, ``sync_micros_total``
    /// and ``sync_micros_max`` time the group commits (fdatasyncs) that ACKs
    /// wait for: a high maximum means the disk stalls.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let shared = self.inner.shared();
        let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let d = stats_dict(py, &shared.stats)?;
        // The store logic's counters, each under its own name, or with
        // `store_` in front where the node's counters have that name
        // (`store_duplicates`, `store_fetches_sent`).
        for (k, _, v) in shared.counters.snapshot().named() {
            if d.contains(k)? {
                d.set_item(format!("store_{k}"), v)?;
            } else {
                d.set_item(k, v)?;
            }
        }
        for (k, v) in [
            ("storage_errors", &shared.storage_errors),
            ("open_files", &shared.open_files),
            ("damaged_partitions", &shared.damaged_partitions),
            ("parked_partitions", &shared.parked_partitions),
            ("active_partitions", &shared.active_partitions),
            // Consumer groups (docs/groups.md, "Security").
            ("commit_rows", &shared.commit_rows),
            ("commits_taken", &shared.commits_taken),
            ("commits_refused", &shared.commits_refused),
            ("commits_capped", &shared.commits_capped),
            ("commits_replicated", &shared.commits_replicated),
            ("group_announcements_refused", &shared.announcements_refused),
        ] {
            d.set_item(k, load(v))?;
        }
        if let Some(t) = &shared.sync_times {
            let t = t.snapshot();
            d.set_item("syncs", t.count)?;
            d.set_item("sync_micros_total", t.micros)?;
            d.set_item("sync_micros_max", t.max_micros)?;
        }
        let err = shared
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        d.set_item("error", err)?;
        Ok(d)
    }

    /// Raises the node thread's error if it stopped; otherwise returns.
    fn check(&self) -> PyResult<()> {
        Ok(self.inner.check()?)
    }

    /// Stops the store: syncs the log, joins the thread (idempotent).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.metrics.end();
        let closed = py.detach(|| self.inner.close());
        crate::python::logbridge::drain(py)?;
        Ok(closed?)
    }
    /// Returns the store, for ``with Store(...) as store:``.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    /// Closes the store on leaving the ``with`` block; an exception propagates.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
    /// ``Store(path=..., address=..., endpoint=...)``.
    fn __repr__(&self) -> String {
        format!(
            "Store(path={:?}, address={:?}, endpoint={:?})",
            self.path,
            self.inner.address(),
            self.inner.endpoint()
        )
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStore>()
}
