//! `dafka._native.NativeLog`: the segment store behind `dafka.Log`. Converts
//! arguments, releases the GIL around every disk operation, maps errors.

use std::sync::Mutex;

use std::sync::LazyLock;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::args::{forget_parked_hours, log_choice, opt_unsigned, retain_hours, unsigned};
use super::errors::Exc;
use super::options::{options, Options};
use crate::log::{FsyncPolicy, Log, LogConfig, PartitionInfo, RecoveryPolicy};
use crate::meta;

/// `dafka.Log`'s defaults (`LogConfig::default()`, the core's).
static LOG: LazyLock<LogConfig> = LazyLock::new(LogConfig::default);

options! {
    /// How much a log keeps, `dafka.Log`'s and a `dafka.Store`'s. The defaults
    /// are `LogConfig::default()`'s, which a store's log keeps too
    /// (`StoreConfig::default()` changes only how it syncs).
    pub(crate) struct Retention {
        /// Roll a partition to a new segment file when the active one would pass this size
        /// (536870912 is 512 MiB); 48 to 2147483648.
        segment_bytes: u64 = LOG.segment_bytes,
        /// Delete segments whose newest record is older than this many hours, the active one
        /// too, checked every 60 s; an emptied partition keeps its next offset, parked. None
        /// keeps records for good; 0 is refused.
        retain_hours: Option<u64> = LOG.retain_hours => retain_hours,
        /// Delete a partition's oldest sealed segments while it holds more bytes than this.
        /// None sets no limit.
        retain_bytes: Option<u64> = LOG.retain_bytes,
        /// Forget a parked partition (one that retention emptied, kept as its next offset)
        /// this many hours after it was parked. None keeps them for good; 0 is refused.
        forget_parked_hours: Option<u64> = LOG.forget_parked_hours => forget_parked_hours,
    }
}

impl Retention {
    /// Sets these in `log`.
    pub(crate) fn apply(self, log: &mut LogConfig) {
        log.segment_bytes = self.segment_bytes;
        log.retain_hours = self.retain_hours;
        log.retain_bytes = self.retain_bytes;
        log.forget_parked_hours = self.forget_parked_hours;
    }
}

options! {
    /// `dafka.Log`'s options (its `NativeLog`'s).
    pub(crate) struct LogOptions {
        ..retention: Retention,
        /// Bytes of records between two index entries.
        index_interval_bytes: u32 = LOG.index_interval_bytes,
        /// With ``fsync="interval"``: sync once this many records are unsynced.
        flush_messages: u64 = LOG.flush_messages,
        /// With ``fsync="interval"``: sync once this many milliseconds passed since the last
        /// sync.
        flush_interval_ms: u64 = LOG.flush_interval_ms,
        /// When appends are synced: ``"always"`` (every append call), ``"interval"`` (once
        /// ``flush_messages`` records are unsynced or ``flush_interval_ms`` passed, checked on
        /// append and ``tick()``) or ``"never"`` (only ``flush()``).
        fsync: FsyncPolicy = LOG.fsync => log_choice,
        /// What opening does with damage at the end of a partition's last segment:
        /// ``"tolerate_tail_corruption"`` cuts it off if no valid record follows it,
        /// ``"absolute_consistency"`` cuts off only a torn last record.
        recovery: RecoveryPolicy = LOG.recovery => log_choice,
        /// Open without changing anything (no recovery truncation, no appends).
        read_only: bool = LOG.read_only,
        /// Set aside a partition whose damage recovery refuses (see ``damaged()``) instead of
        /// failing the open, as a store does.
        isolate_damaged: bool = LOG.isolate_damaged,
    }
}

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
    #[pyo3(signature = (path, **options))]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<NativeLog> {
        let o = LogOptions::parse("Log", options)?;
        let mut cfg = LogConfig {
            index_interval_bytes: o.index_interval_bytes,
            flush_messages: o.flush_messages,
            flush_interval_ms: o.flush_interval_ms,
            fsync: o.fsync,
            recovery: o.recovery,
            read_only: o.read_only,
            isolate_damaged: o.isolate_damaged,
            ..LogConfig::default()
        };
        o.retention.apply(&mut cfg);
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
