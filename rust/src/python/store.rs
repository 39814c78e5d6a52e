//! `dafka.Store`: a store node in-process, over the durable log. A thin PyO3
//! class: argument parsing, GIL release, conversion.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

use super::errors::dafka_error;
use super::node::{node_config, seconds, stats_dict};
use crate::log::{FsyncPolicy, RecoveryPolicy};
use crate::node::store::{Store, StoreConfig};
use crate::python::{opt_unsigned, unsigned, StrList};

static PARTITION_INFO: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// A store: persists every partition it hears, ACKs what is durable, serves
/// FETCHes to late consumers and other stores.
#[pyclass(module = "dafka._native", name = "Store", frozen)]
struct PyStore {
    inner: Store,
    path: String,
}

#[pymethods]
impl PyStore {
    #[new]
    #[pyo3(signature = (
        path, *, towers = None, peers = None, wire = "rfc",
        bind = "tcp://127.0.0.1:*".to_string(), beacon_interval = 1.0, beacon_timeout = 4.0,
        sndhwm = 1000000, rcvhwm = 1000000, fsync = "interval", flush_interval_ms = 1,
        flush_messages = 100000, segment_bytes = 536870912, retain_hours = Some(168),
        retain_bytes = None, recovery = "tolerate_tail_corruption", max_record_bytes = 67108864,
        fetch_retry = 0.5, max_open_files = None, forget_parked_hours = Some(720),
        advertise_host = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        towers: Option<StrList>,
        peers: Option<StrList>,
        wire: &str,
        bind: String,
        beacon_interval: f64,
        beacon_timeout: f64,
        sndhwm: i128,
        rcvhwm: i128,
        fsync: &str,
        flush_interval_ms: i128,
        flush_messages: i128,
        segment_bytes: i128,
        retain_hours: Option<i128>,
        retain_bytes: Option<i128>,
        recovery: &str,
        max_record_bytes: i128,
        fetch_retry: f64,
        max_open_files: Option<i128>,
        forget_parked_hours: Option<i128>,
        advertise_host: Option<String>,
    ) -> PyResult<Self> {
        let mut cfg = StoreConfig {
            node: node_config(
                towers,
                peers,
                wire,
                bind,
                beacon_interval,
                beacon_timeout,
                sndhwm,
                rcvhwm,
                advertise_host,
            )?,
            ..StoreConfig::default()
        };
        let config_error = |e: String| dafka_error("ConfigError", e);
        cfg.log.fsync = fsync.parse::<FsyncPolicy>().map_err(config_error)?;
        cfg.log.recovery = recovery.parse::<RecoveryPolicy>().map_err(config_error)?;
        cfg.log.flush_interval_ms = unsigned("flush_interval_ms", flush_interval_ms)?;
        cfg.log.flush_messages = unsigned("flush_messages", flush_messages)?;
        cfg.log.segment_bytes = unsigned("segment_bytes", segment_bytes)?;
        cfg.log.retain_hours = crate::python::retain_hours(retain_hours)?;
        cfg.log.retain_bytes = opt_unsigned("retain_bytes", retain_bytes)?;
        cfg.log.forget_parked_hours = crate::python::forget_parked_hours(forget_parked_hours)?;
        cfg.log.max_open_files = opt_unsigned("max_open_files", max_open_files)?;
        cfg.logic.max_record_bytes = unsigned("max_record_bytes", max_record_bytes)?;
        cfg.logic.fetch_retry = seconds("fetch_retry", fetch_retry)?;
        if cfg.logic.fetch_retry < Duration::from_millis(1) {
            return Err(config_error("fetch_retry must be at least 0.001 s".into()));
        }
        let display = path.display().to_string();
        let inner = py.detach(|| Store::open(&path, cfg))?;
        Ok(Self {
            inner,
            path: display,
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
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }
    /// Connects to one more peer (an XPUB endpoint), like ``peers=[...]``.
    fn connect(&self, endpoint: &str) -> PyResult<()> {
        Ok(self.inner.connect(endpoint)?)
    }

    /// The partitions held (optionally of one topic), as
    /// ``dafka.log.PartitionInfo`` (topic, partition, first/next/durable
    /// offsets, bytes, segments).
    #[pyo3(signature = (topic = None))]
    fn partitions<'py>(
        &self,
        py: Python<'py>,
        topic: Option<String>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let t = topic.map(String::into_bytes);
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
                cls.call1((
                    String::from_utf8_lossy(&i.topic).into_owned(),
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
    /// storage error (e.g. disk full) or None. ``syncs``, ``sync_micros_total``
    /// and ``sync_micros_max`` time the group commits (fdatasyncs) that ACKs
    /// wait for: a high maximum means the disk stalls.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let shared = self.inner.shared();
        let d = stats_dict(py, &shared.stats)?;
        let c = shared
            .counters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for (k, v) in [
            ("appended", c.appended),
            ("store_duplicates", c.duplicates),
            ("held", c.held),
            ("dropped_oversize", c.dropped_oversize),
            ("dropped_invalid", c.dropped_invalid),
            ("dropped_held_full", c.dropped_held_full),
            ("store_fetches_sent", c.fetches_sent),
            ("fetches_answered", c.fetches_answered),
            ("fetches_unknown", c.fetches_unknown),
            ("records_served", c.records_served),
            ("acks_sent", c.acks_sent),
            ("append_errors", c.append_errors),
            ("dropped_set_aside", c.dropped_set_aside),
            ("records_skipped", c.records_skipped),
            (
                "storage_errors",
                shared
                    .storage_errors
                    .load(std::sync::atomic::Ordering::Relaxed),
            ),
            (
                "open_files",
                shared.open_files.load(std::sync::atomic::Ordering::Relaxed),
            ),
            (
                "damaged_partitions",
                shared
                    .damaged_partitions
                    .load(std::sync::atomic::Ordering::Relaxed),
            ),
            (
                "parked_partitions",
                shared
                    .parked_partitions
                    .load(std::sync::atomic::Ordering::Relaxed),
            ),
            (
                "active_partitions",
                shared
                    .active_partitions
                    .load(std::sync::atomic::Ordering::Relaxed),
            ),
        ] {
            d.set_item(k, v)?;
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
        py.detach(|| self.inner.close())?;
        Ok(())
    }
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
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
