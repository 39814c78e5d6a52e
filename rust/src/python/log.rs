//! `dafka._native.NativeLog`: the segment store behind `dafka.Log`. Converts
//! arguments, releases the GIL around every disk operation, maps errors.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::defaults::DEFAULT;
use super::errors::Exc;
use crate::log::{FsyncPolicy, Log, LogConfig, PartitionInfo, RecoveryPolicy};
use crate::python::{opt_unsigned, unsigned};

type InfoTuple = (Vec<u8>, String, u64, u64, u64, u64, usize);

fn info_tuple(i: PartitionInfo) -> InfoTuple {
    (
        i.topic,
        i.partition,
        i.first_offset,
        i.next_offset,
        i.durable_next,
        i.bytes,
        i.segments,
    )
}

/// The native handle; `dafka.Log` is the typed Python face of it.
#[pyclass(module = "dafka._native")]
struct NativeLog {
    inner: Mutex<Option<Log>>,
}

impl NativeLog {
    /// Runs `f` on the open log with the GIL released.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Log) -> crate::log::Result<T> + Send,
    ) -> PyResult<T> {
        py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            match guard.as_mut() {
                Some(log) => f(log).map_err(PyErr::from),
                None => Err(Exc::Log.err("the log is closed")),
            }
        })
    }
}

#[pymethods]
impl NativeLog {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (path, segment_bytes, index_interval_bytes, retain_hours, retain_bytes,
                        flush_messages, flush_interval_ms, fsync, recovery, read_only,
                        isolate_damaged = DEFAULT.log.isolate_damaged,
                        forget_parked_hours = DEFAULT.log.forget_parked_hours))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        segment_bytes: i128,
        index_interval_bytes: i128,
        retain_hours: Option<i128>,
        retain_bytes: Option<i128>,
        flush_messages: i128,
        flush_interval_ms: i128,
        fsync: &str,
        recovery: &str,
        read_only: bool,
        isolate_damaged: bool,
        forget_parked_hours: Option<i128>,
    ) -> PyResult<NativeLog> {
        let fsync: FsyncPolicy = fsync.parse().map_err(Exc::LogValue.with())?;
        let recovery: RecoveryPolicy = recovery.parse().map_err(Exc::LogValue.with())?;
        let cfg = LogConfig {
            segment_bytes: unsigned("segment_bytes", segment_bytes)?,
            index_interval_bytes: unsigned("index_interval_bytes", index_interval_bytes)?,
            retain_hours: crate::python::retain_hours(retain_hours)?,
            retain_bytes: opt_unsigned("retain_bytes", retain_bytes)?,
            forget_parked_hours: crate::python::forget_parked_hours(forget_parked_hours)?,
            flush_messages: unsigned("flush_messages", flush_messages)?,
            flush_interval_ms: unsigned("flush_interval_ms", flush_interval_ms)?,
            fsync,
            recovery,
            read_only,
            isolate_damaged,
            ..LogConfig::default()
        };
        let log = py.detach(|| Log::open(&path, cfg))?;
        Ok(NativeLog {
            inner: Mutex::new(Some(log)),
        })
    }

    fn append(
        &self,
        py: Python<'_>,
        topic: &[u8],
        partition: &str,
        offset: i128,
        value: &[u8],
    ) -> PyResult<()> {
        let offset = unsigned("offset", offset)?;
        self.with(py, |l| l.append(topic, partition, offset, value))
    }

    fn append_many(
        &self,
        py: Python<'_>,
        topic: &[u8],
        partition: &str,
        first_offset: i128,
        values: Vec<Bound<'_, PyBytes>>,
    ) -> PyResult<()> {
        let first_offset = unsigned("first_offset", first_offset)?;
        let slices: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
        self.with(py, |l| {
            l.append_batch(topic, partition, first_offset, &slices)
        })
    }

    fn read<'py>(
        &self,
        py: Python<'py>,
        topic: &[u8],
        partition: &str,
        start: i128,
        max_records: i128,
        max_bytes: i128,
    ) -> PyResult<Vec<(u64, u64, Bound<'py, PyBytes>)>> {
        let (start, max_records, max_bytes): (u64, usize, usize) = (
            unsigned("start", start)?,
            unsigned("max_records", max_records)?,
            unsigned("max_bytes", max_bytes)?,
        );
        let recs = self.with(py, |l| {
            l.read(topic, partition, start, max_records, max_bytes)
        })?;
        Ok(recs
            .into_iter()
            .map(|r| (r.offset, r.timestamp, PyBytes::new(py, &r.value)))
            .collect())
    }

    #[pyo3(signature = (topic=None))]
    fn partitions(&self, py: Python<'_>, topic: Option<&[u8]>) -> PyResult<Vec<InfoTuple>> {
        self.with(py, |l| {
            Ok(l.partitions(topic).into_iter().map(info_tuple).collect())
        })
    }

    fn damaged(&self, py: Python<'_>) -> PyResult<Vec<(Vec<u8>, String, String)>> {
        self.with(py, |l| Ok(l.damaged()))
    }

    fn topics(&self, py: Python<'_>) -> PyResult<Vec<Vec<u8>>> {
        self.with(py, |l| Ok(l.topics()))
    }

    fn offset_for_time(
        &self,
        py: Python<'_>,
        topic: &[u8],
        partition: &str,
        timestamp: i128,
    ) -> PyResult<Option<u64>> {
        let timestamp = unsigned("timestamp", timestamp)?;
        self.with(py, |l| l.offset_for_time(topic, partition, timestamp))
    }

    fn verify(&self, py: Python<'_>, topic: &[u8], partition: &str) -> PyResult<u64> {
        self.with(py, |l| l.verify(topic, partition))
    }

    fn next_offset(&self, py: Python<'_>, topic: &[u8], partition: &str) -> PyResult<Option<u64>> {
        self.with(py, |l| Ok(l.next_offset(topic, partition)))
    }

    fn first_offset(&self, py: Python<'_>, topic: &[u8], partition: &str) -> PyResult<Option<u64>> {
        self.with(py, |l| Ok(l.first_offset(topic, partition)))
    }

    fn durable_next(&self, py: Python<'_>, topic: &[u8], partition: &str) -> PyResult<Option<u64>> {
        self.with(py, |l| Ok(l.durable_next(topic, partition)))
    }

    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, Log::sync)
    }

    fn tick(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, Log::tick)
    }

    fn enforce_retention(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, Log::enforce_retention)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
            match taken {
                Some(log) => log.close().map_err(PyErr::from),
                None => Ok(()),
            }
        })
    }

    fn closed(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeLog>()?;
    Ok(())
}
