//! `dafka._native.NativeLog`: the segment store behind `dafka.Log`. Converts
//! arguments, releases the GIL around every disk operation, maps errors.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::defaults::DEFAULT;
use super::errors::Exc;
use crate::log::{FsyncPolicy, Log, LogConfig, PartitionInfo, RecoveryPolicy};
use crate::meta;
use crate::python::{opt_unsigned, unsigned};

type InfoTuple = (Vec<u8>, String, u64, u64, u64, u64, usize);

/// Headers as Python passes them: `(name, value)` pairs.
type Headers = Vec<(String, Vec<u8>)>;

/// What `read` returns per record: offset, append time, value, key, headers,
/// create time.
type ReadRow<'py> = (
    u64,
    u64,
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
    Vec<(String, Bound<'py, PyBytes>)>,
    Option<u64>,
);

/// Appends the body of a record to `out`: its metadata (the create time
/// `create`; without one, the time `now` flagged as the log's append time,
/// as a plain value gets) then `value`.
fn put_body(
    out: &mut Vec<u8>,
    now: u64,
    create: Option<u64>,
    key: Option<&[u8]>,
    headers: &[(String, Vec<u8>)],
    value: &[u8],
) {
    match create {
        Some(t) => meta::encode(out, t, key, headers),
        None => {
            let at = out.len();
            meta::encode(out, now, key, headers);
            out[at] |= meta::FLAG_LOG_APPEND;
        }
    }
    out.extend_from_slice(value);
}

/// `v`, checked to hold one entry per value.
fn per_value<T>(name: &str, v: Option<Vec<T>>, n: usize) -> PyResult<Option<Vec<T>>> {
    match v {
        Some(v) if v.len() != n => Err(Exc::LogValue.err(format!(
            "{name} has {} entries for {n} values: give one per value (None for none)",
            v.len()
        ))),
        v => Ok(v),
    }
}

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

/// The native handle of a log directory; ``dafka.Log`` is its typed Python face
/// (use that: it documents every option and method). Every call releases the GIL
/// around the disk work; after :meth:`close`, calls raise ``LogError``.
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

    /// Appends one record at ``offset``, the partition's next one, with its key,
    /// headers (``(name, value)`` pairs) and create time (ms since the epoch);
    /// without any of them, a plain value.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (topic, partition, offset, value, *, key=None, headers=None, timestamp=None))]
    fn append(
        &self,
        py: Python<'_>,
        topic: &[u8],
        partition: &str,
        offset: i128,
        value: &[u8],
        key: Option<&[u8]>,
        headers: Option<Headers>,
        timestamp: Option<i128>,
    ) -> PyResult<()> {
        let offset = unsigned("offset", offset)?;
        let create = opt_unsigned("timestamp", timestamp)?;
        let headers = headers.unwrap_or_default();
        if key.is_none() && headers.is_empty() && create.is_none() {
            return self.with(py, |l| l.append(topic, partition, offset, value));
        }
        self.with(py, |l| {
            let mut body = Vec::new();
            put_body(&mut body, l.now(), create, key, &headers, value);
            l.append_bodies(topic, partition, offset, &[body])
        })
    }

    /// Appends records at ``first_offset``, ``first_offset + 1``, ... in one write;
    /// ``keys``, ``headers`` and ``timestamps``, when given, hold one entry per value
    /// (None for none).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (topic, partition, first_offset, values, *, keys=None, headers=None, timestamps=None))]
    fn append_many(
        &self,
        py: Python<'_>,
        topic: &[u8],
        partition: &str,
        first_offset: i128,
        values: Vec<Bound<'_, PyBytes>>,
        keys: Option<Vec<Option<Vec<u8>>>>,
        headers: Option<Vec<Option<Headers>>>,
        timestamps: Option<Vec<Option<i128>>>,
    ) -> PyResult<()> {
        let first_offset = unsigned("first_offset", first_offset)?;
        let n = values.len();
        let keys = per_value("keys", keys, n)?;
        let headers = per_value("headers", headers, n)?;
        let timestamps = per_value("timestamps", timestamps, n)?
            .map(|ts| {
                ts.into_iter()
                    .map(|t| opt_unsigned::<u64>("timestamps", t))
                    .collect::<PyResult<Vec<_>>>()
            })
            .transpose()?;
        let slices: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
        if keys.is_none() && headers.is_none() && timestamps.is_none() {
            return self.with(py, |l| {
                l.append_batch(topic, partition, first_offset, &slices)
            });
        }
        self.with(py, |l| {
            let now = l.now();
            let bodies: Vec<Vec<u8>> = slices
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let mut body = Vec::new();
                    let key = keys.as_ref().and_then(|k| k[i].as_deref());
                    let hs = headers
                        .as_ref()
                        .and_then(|h| h[i].as_deref())
                        .unwrap_or(&[]);
                    let create = timestamps.as_ref().and_then(|t| t[i]);
                    put_body(&mut body, now, create, key, hs, v);
                    body
                })
                .collect();
            l.append_bodies(topic, partition, first_offset, &bodies)
        })
    }

    /// ``(offset, append_time, value, key, headers, create_time)`` of the records
    /// from ``start`` on, at most ``max_records`` and ``max_bytes`` of bodies (at
    /// least one record); ``create_time`` is None for a plain value.
    fn read<'py>(
        &self,
        py: Python<'py>,
        topic: &[u8],
        partition: &str,
        start: i128,
        max_records: i128,
        max_bytes: i128,
    ) -> PyResult<Vec<ReadRow<'py>>> {
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
            .map(|r| {
                (
                    r.offset,
                    r.timestamp,
                    PyBytes::new(py, &r.value),
                    r.key.map(|k| PyBytes::new(py, &k)),
                    r.headers
                        .into_iter()
                        .map(|(n, v)| (n, PyBytes::new(py, &v)))
                        .collect(),
                    r.create_time,
                )
            })
            .collect())
    }

    /// The partitions held (of ``topic``, or all) as the fields of
    /// ``dafka.log.PartitionInfo``.
    #[pyo3(signature = (topic=None))]
    fn partitions(&self, py: Python<'_>, topic: Option<&[u8]>) -> PyResult<Vec<InfoTuple>> {
        self.with(py, |l| {
            Ok(l.partitions(topic).into_iter().map(info_tuple).collect())
        })
    }

    /// ``(topic, partition, why)`` of each partition set aside because it could not
    /// be opened (``isolate_damaged``).
    fn damaged(&self, py: Python<'_>) -> PyResult<Vec<(Vec<u8>, String, String)>> {
        self.with(py, |l| Ok(l.damaged()))
    }

    /// The topics held.
    fn topics(&self, py: Python<'_>) -> PyResult<Vec<Vec<u8>>> {
        self.with(py, |l| Ok(l.topics()))
    }

    /// The first offset whose time (its create time, else its append time) is at or
    /// after ``timestamp`` (ms since the epoch).
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

    /// Reads every record of the partition checking its CRC, offset and metadata;
    /// returns how many it holds (0 for a parked one).
    fn verify(&self, py: Python<'_>, topic: &[u8], partition: &str) -> PyResult<u64> {
        self.with(py, |l| l.verify(topic, partition))
    }

    /// The partition's next offset (None for a partition not held).
    fn next_offset(&self, py: Python<'_>, topic: &[u8], partition: &str) -> PyResult<Option<u64>> {
        self.with(py, |l| Ok(l.next_offset(topic, partition)))
    }

    /// The lowest offset the partition still holds (None when not held).
    fn first_offset(&self, py: Python<'_>, topic: &[u8], partition: &str) -> PyResult<Option<u64>> {
        self.with(py, |l| Ok(l.first_offset(topic, partition)))
    }

    /// The offset below which records are synced to disk (None when not held).
    fn durable_next(&self, py: Python<'_>, topic: &[u8], partition: &str) -> PyResult<Option<u64>> {
        self.with(py, |l| Ok(l.durable_next(topic, partition)))
    }

    /// Syncs every partition's unsynced appends to disk.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, Log::sync)
    }

    /// Periodic work: the interval syncs that fell due and, once a minute, retention.
    /// Cheap when nothing is due.
    fn tick(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, Log::tick)
    }

    /// Applies retention to every partition now, parking those left with no record;
    /// returns how many segments it deleted.
    fn enforce_retention(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, Log::enforce_retention)
    }

    /// Syncs and closes the log (idempotent).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| {
            let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
            match taken {
                Some(log) => log.close().map_err(PyErr::from),
                None => Ok(()),
            }
        })
    }

    /// Whether :meth:`close` was called.
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
