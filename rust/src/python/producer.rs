//! `dafka.Producer`: a thin PyO3 class over [`Producer`], and its options.
//! `send` is the hot path: a call with the value alone goes straight to
//! [`Producer::try_send`].

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use super::args::{opt_seconds, seconds, unsigned, Callback, Seed};
use super::arrow::{ArrowKeys, ArrowValues};
use super::buffer::{key_arg, value_bytes, with_value};
use super::delivery::Reports;
use super::discovery::{Discovery, Hwm};
use super::errors::Exc;
use super::options::{options, Options};
use super::record::headers_arg;
use super::time::record_time_ms;
use super::wait::{check_signals, stats_dict, SLICE};
use crate::node::producer::Extra;
use crate::node::{Batch, Producer, ProducerConfig};

/// The producers' defaults (`ProducerConfig::default()`, the core's).
static PRODUCER: LazyLock<ProducerConfig> = LazyLock::new(ProducerConfig::default);

options! {
    /// `dafka.Producer`'s options.
    pub(crate) struct ProducerOptions {
        ..discovery: Discovery,
        ..hwm: Hwm,
        /// Distinct stores that must ACK a record before it leaves the buffer, 0 to 1,024.
        /// With 0 a record is released as soon as it is sent.
        min_acks: usize = PRODUCER.min_acks,
        /// Seconds between HEADs once something was published; must be > 0.
        head_interval: Duration = PRODUCER.head_interval,
        /// Bytes of records not yet released (268435456 is 256 MiB); must be > 0. ``send``
        /// blocks while a record would pass it, until ACKs free room or its timeout passes.
        /// An empty buffer takes any record.
        max_unacked_bytes: usize = PRODUCER.max_unacked_bytes,
        /// Seconds ``send``, ``send_many`` and ``send_buffers`` wait for room when called
        /// without ``timeout``, before they raise ``BufferFullError``. None waits for good.
        send_timeout: Option<Duration> = None,
        /// Delivery reports, called by ``poll()``, ``flush()`` and ``close()`` in the calling
        /// thread. A callable of two arguments is called as ``on_delivery(err, record)``, as
        /// confluent-kafka calls it: once per record, in offset order, ``err`` None once
        /// ``min_acks`` stores ACKed it, or a ``DeliveryError`` for a record the producer
        /// closed without (``record`` is a ``Record``: topic, partition, offset, value, key,
        /// headers, timestamp). Each record sent is then kept until reported. A callable of
        /// one argument is called as ``on_delivery(acked_offset)`` when the acknowledged
        /// offset has advanced. Another is refused with ``TypeError``.
        on_delivery: Option<Callback> = None,
        /// A longer value raises ``RecordTooLargeError`` and nothing is sent (67108864 is 64
        /// MiB); must be > 0. Stores drop records over their own ``max_record_bytes`` (the
        /// same default): raise both together.
        max_record_bytes: usize = PRODUCER.max_record_bytes,
        /// Whether nodes that know no metadata (the C reference) get no RECORDs: stores and
        /// consumers of this project always get records in batches of up to 64 KiB
        /// (META-RECORD-BATCH, with keys, headers and timestamps). For a node that does not
        /// know it, False sends one RECORD per record, True none, and such a node gets the
        /// records by fetching them. The XPUB holds ``sndhwm / 64`` messages per subscriber
        /// (at least 1,000).
        record_batches: bool = PRODUCER.record_batches,
        /// The seed the partition's address comes from: the same seed (and, in secure mode,
        /// the same certificate) gives the same address, for a writer that runs again and
        /// goes on with its partition (per-key order across restarts) or rewrites it (a
        /// retried Spark task). None: a new address.
        address_seed: Option<Seed> = None,
        /// The offset of the first record sent. None: 0 for a new address; with
        /// ``address_seed``, where the partition ends, which the constructor asks the stores
        /// (up to 10 s, then ``FetchTimeoutError``), so the records follow the ones stored
        /// instead of being dropped as duplicates of them. Give it to rewrite offsets (what
        /// the Spark sink does on a retry), and in secure mode, where a producer may not ask.
        first_offset: Option<u64> = None,
        /// Seconds ``close()`` and leaving a ``with`` block wait for the stores' ACKs of what
        /// was sent; 0 closes at once. Leaving a ``with`` block with records still
        /// unacknowledged raises ``DeliveryError`` (unless 0).
        close_timeout: Duration = PRODUCER.close_timeout,
    }
}

/// A producer: one partition of one topic.
///
/// Publishes records to ``topic``. The partition is named by the producer's ``address`` (32 hex
/// characters, new for each producer unless ``address_seed`` names it), and its offsets count
/// from 0 (or ``first_offset``). Each record stays in memory
/// until ``min_acks`` distinct stores have ACKed it, and FETCHes for it are answered from there.
/// Once it has published, the producer sends a HEAD every ``head_interval`` seconds. The node runs
/// on its own thread; calls that wait release the GIL and can be interrupted with Ctrl-C.
///
/// Parameters
/// ----------
/// topic : str
///     The topic, 1 to 255 bytes.
///
/// Raises
/// ------
/// ConfigError
///     An option is out of range or malformed: an endpoint, ``wire``, ``topic``, a zero interval
///     or bound, ``min_acks`` over 1,024.
///     Secure mode: ``cert`` without ``trust`` (or the reverse), a certificate of another role,
///     or a tower or peer endpoint keyed (``;curve=KEY``) without ``cert``, or keyless with it.
/// ValueError
///     A negative or too large integer, or a number of seconds that is negative or not finite.
/// TypeError
///     ``towers`` or ``peers`` is a ``str`` instead of a list, or ``on_delivery`` is not callable
///     with one or two arguments.
/// FetchTimeoutError
///     ``address_seed`` without ``first_offset``, and no store said where the partition ends
///     within 10 seconds.
/// OSError
///     ``cert`` or ``trust`` cannot be read: ``FileNotFoundError``, ``PermissionError``, ...
///     (the error names the path).
/// SecurityError
///     ``cert`` is malformed or holds no secret key (``NAME.key`` given for ``NAME.key_secret``).
/// NodeError
///     The node cannot start, e.g. its ``bind`` endpoint is in use.
#[pyclass(module = "dafka._native", name = "Producer", frozen)]
struct PyProducer {
    inner: Producer,
    /// Shown by `dafka.serve_metrics` until closed.
    metrics: crate::metrics::Registration,
    send_timeout: Option<Duration>,
    /// What `close()` and leaving a `with` block wait for ACKs by default.
    close_timeout: Duration,
    min_acks: usize,
    /// `on_delivery` and what it was told.
    reports: Reports,
    /// Whether closing reported what it left unacknowledged (once).
    close_told: AtomicBool,
}

impl PyProducer {
    fn serve_delivery(&self, py: Python<'_>) -> PyResult<u64> {
        let (topic, address) = (self.inner.topic(), self.inner.address());
        self.reports
            .serve(py, self.inner.acked_offset(), topic, address)
    }

    /// Publishes `batch` ([`Producer::send_pieces_with`], GIL released),
    /// keeping its records for their reports when `on_delivery` takes one
    /// per record; returns where each piece went.
    fn send_reported(
        &self,
        py: Python<'_>,
        batch: Batch,
        timeout: Option<Duration>,
    ) -> PyResult<Vec<(u64, usize)>> {
        let kept = self.reports.per_record().then(|| batch.clone());
        let pieces = py.detach(|| self.inner.send_pieces_with(batch, timeout, check_signals))?;
        if let Some(kept) = kept {
            let mut bodies = kept.iter();
            for &(first, n) in &pieces {
                self.reports.keep(first, bodies.by_ref().take(n));
            }
        }
        Ok(pieces)
    }

    /// Once closed: the records left unacknowledged are logged with their
    /// offsets, and reported to `on_delivery(err, record)` with a
    /// `DeliveryError`.
    fn tell_undelivered(&self, py: Python<'_>, left: u64) -> PyResult<()> {
        if left == 0 {
            return Ok(());
        }
        let next = self.inner.next_offset();
        let msg = format!(
            "producer {} of topic {:?} closed with {left} of the records sent (offsets {} to \
             {}) not acknowledged by min_acks={} store(s): stores may not hold them, and no \
             node can fetch them from this producer any more. Is a store running and reachable \
             through the towers? Call flush() before closing and check what it returns, or \
             close with a longer timeout (close_timeout=)",
            self.inner.address(),
            self.inner.topic(),
            next - left,
            next - 1,
            self.min_acks,
        );
        warn(py, &msg)?;
        let err = Exc::Delivery.err(msg);
        let (topic, address) = (self.inner.topic(), self.inner.address());
        self.reports
            .fail_rest(py, err.value(py).as_any(), topic, address)
    }
}

/// Where the partition of a producer with `address_seed` and no
/// `first_offset` ends, as the stores say (0 for a new one): it goes on
/// from there instead of having its records dropped as duplicates of the
/// ones stored. No store answering within [`RESUME_TIMEOUT`] is a
/// `FetchTimeoutError` saying what to do.
fn resume_offset(py: Python<'_>, cfg: &ProducerConfig, topic: &str, seed: &[u8]) -> PyResult<u64> {
    let asked = py.detach(|| {
        crate::node::producer::partition_next::<PyErr>(
            &cfg.node,
            topic,
            seed,
            RESUME_TIMEOUT,
            check_signals,
        )
    });
    asked.map_err(|e| {
        if Exc::FetchTimeout.is(py, &e) {
            Exc::FetchTimeout.err(format!(
                "{e}. A producer with address_seed and no first_offset goes on where its \
                 partition ends, which it asks the stores before it starts: start a store \
                 (or check towers=; a store listed only in peers= cannot answer), or pass \
                 first_offset= (0 for a new partition)"
            ))
        } else {
            e
        }
    })
}

/// How long a producer with `address_seed` and no `first_offset` waits for
/// the stores to say where its partition ends (as `Consumer(start_time=)`).
const RESUME_TIMEOUT: Duration = Duration::from_secs(10);

/// A producer the program dropped without closing it: what it leaves
/// unacknowledged is said (through the core's log, as no GIL may be held
/// here), never dropped in silence.
impl Drop for PyProducer {
    fn drop(&mut self) {
        let left = self.inner.outstanding();
        if left > 0 && !self.close_told.load(SeqCst) {
            tracing::warn!(
                "producer {} of topic {:?} was dropped without close() while {left} of the \
                 records sent were not acknowledged by min_acks={} store(s): stores may not \
                 hold them; close it (or use `with`), which waits for them",
                self.inner.address(),
                self.inner.topic(),
                self.min_acks,
            );
        }
    }
}

/// Logs `msg` as a warning of the ``dafka`` Python logger.
fn warn(py: Python<'_>, msg: &str) -> PyResult<()> {
    py.import("logging")?
        .call_method1("getLogger", ("dafka",))?
        .call_method1("warning", (msg,))?;
    Ok(())
}

#[pymethods]
impl PyProducer {
    #[new]
    #[pyo3(signature = (topic, **options))]
    fn new(py: Python<'_>, topic: String, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let o = ProducerOptions::parse("Producer", options)?;
        let reports = Reports::new(py, o.on_delivery.map(|c| c.0))?;
        let mut cfg = ProducerConfig {
            node: o.discovery.node_config(o.hwm)?,
            head_interval: o.head_interval,
            min_acks: o.min_acks,
            max_unacked_bytes: o.max_unacked_bytes,
            max_record_bytes: o.max_record_bytes,
            record_batches: o.record_batches,
            address_seed: o.address_seed.map(|s| s.0),
            first_offset: o.first_offset.unwrap_or(0),
            close_timeout: o.close_timeout,
        };
        cfg.validate()?;
        if let (Some(seed), None) = (&cfg.address_seed, o.first_offset) {
            cfg.first_offset = resume_offset(py, &cfg, &topic, seed)?;
        }
        let (close_timeout, min_acks) = (cfg.close_timeout, cfg.min_acks);
        let inner = py.detach(|| Producer::new(&topic, cfg))?;
        Ok(Self {
            metrics: crate::metrics::register(inner.metrics_source()),
            inner,
            send_timeout: o.send_timeout,
            close_timeout,
            min_acks,
            reports,
            close_told: AtomicBool::new(false),
        })
    }

    /// Publishes one record; returns its offset. ``key`` (bytes) and
    /// ``headers`` (a list of ``(str, bytes)`` pairs, in order, repeats allowed)
    /// travel with it and count against ``max_record_bytes``; ``timestamp`` is
    /// its create time, ms since the epoch (an int) or a ``datetime`` (default:
    /// now; a float, or an int that reads as seconds, is refused). Blocks (GIL
    /// released) while the unacknowledged buffer is full, up to ``timeout``
    /// (default the producer's ``send_timeout``, None = forever), then raises
    /// BufferFullError. ``key`` may be given by position too (``send(value,
    /// key)``), which a hot loop calls about 40 ns faster than ``key=key``.
    #[pyo3(signature = (value, key = None, *, headers = None, timestamp = None, timeout = None))]
    fn send(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
        timestamp: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<u64> {
        let t = opt_seconds("timeout", timeout)?.or(self.send_timeout);
        let reported = self.reports.per_record();
        if key.is_none() && headers.is_none() && timestamp.is_none() && !reported {
            if let Some(off) = with_value(py, value, "send", |v| self.inner.try_send(v))?? {
                return Ok(off);
            }
            let v = value_bytes(py, value, "send")?;
            return py.detach(|| self.inner.send_with(&v, t, check_signals));
        }
        // A `bytes` key is borrowed, not copied (the keyed hot path).
        let owned_key;
        let key: Option<&[u8]> = match key {
            None => None,
            Some(k) if k.is_none() => None,
            Some(k) => match k.cast::<PyBytes>() {
                Ok(b) => Some(b.as_bytes()),
                Err(_) => {
                    owned_key = key_arg(py, Some(k))?;
                    owned_key.as_deref()
                }
            },
        };
        let headers = match headers {
            Some(h) => headers_arg(h)?,
            None => Vec::new(),
        };
        let hs: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        let mut ts = timestamp
            .map(|ts| record_time_ms(py, ts, "timestamp"))
            .transpose()?;
        if reported {
            // The report carries the record as sent: its time too.
            ts = ts.or_else(|| Some(crate::meta::now_ms()));
        }
        let extra = Extra {
            key,
            headers: &hs,
            timestamp: ts,
        };
        let off = match with_value(py, value, "send", |v| self.inner.try_send_record(v, &extra))?? {
            Some(off) => off,
            None => {
                let v = value_bytes(py, value, "send")?;
                py.detach(|| self.inner.send_record_with(&v, &extra, t, check_signals))?
            }
        };
        if reported {
            with_value(py, value, "send", |v| {
                let mut body = Vec::with_capacity(extra.body_len(v));
                crate::meta::encode(&mut body, ts.unwrap_or(0), extra.key, extra.headers);
                body.extend_from_slice(v);
                self.reports.keep(off, [body.as_slice()]);
            })?;
        }
        Ok(off)
    }

    /// Publishes a batch of values (``bytes`` or bytes-like) in one call;
    /// returns the last offset (None for an empty batch). ``keys``,
    /// ``headers`` and ``timestamps``, when given, are sequences as long as
    /// ``values`` (an entry may be None): each record's key, headers and
    /// create time, as ``send`` takes them.
    #[pyo3(signature = (values, *, keys = None, headers = None, timestamps = None, timeout = None))]
    fn send_many(
        &self,
        py: Python<'_>,
        values: &Bound<'_, PyAny>,
        keys: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
        timestamps: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Option<u64>> {
        // `len()` is a hint (an object may claim 10**12 values): capped.
        let mut batch = Batch::with_capacity(values.len().unwrap_or(0).min(1 << 16), 0);
        if values.is_instance_of::<PyBytes>() || values.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "send_many takes an iterable of values, e.g. [b\"a\", b\"b\"]: for one value \
                 use send()",
            ));
        }
        let now = crate::meta::now_ms();
        fn column<'py>(
            c: Option<&Bound<'py, PyAny>>,
            name: &str,
        ) -> PyResult<Option<Vec<Bound<'py, PyAny>>>> {
            let Some(c) = c else { return Ok(None) };
            if c.is_instance_of::<PyBytes>() || c.is_instance_of::<PyString>() {
                return Err(PyTypeError::new_err(format!(
                    "send_many's {name} must be a sequence with one entry per value"
                )));
            }
            let v: Vec<Bound<'py, PyAny>> = c.try_iter()?.collect::<PyResult<_>>()?;
            Ok(Some(v))
        }
        let (keys, headers, timestamps) = (
            column(keys, "keys")?,
            column(headers, "headers")?,
            column(timestamps, "timestamps")?,
        );
        if keys.is_none() && headers.is_none() && timestamps.is_none() {
            for item in values.try_iter()? {
                with_value(py, &item?, "send_many", |v| batch.push_plain(now, v))?;
            }
        } else {
            let values: Vec<Bound<'_, PyAny>> = values.try_iter()?.collect::<PyResult<_>>()?;
            for (name, c) in [
                ("keys", &keys),
                ("headers", &headers),
                ("timestamps", &timestamps),
            ] {
                if let Some(c) = c {
                    if c.len() != values.len() {
                        return Err(PyValueError::new_err(format!(
                            "send_many got {} values but {} {name}: give one per value (None for none)",
                            values.len(),
                            c.len()
                        )));
                    }
                }
            }
            for (i, v) in values.iter().enumerate() {
                let key = match &keys {
                    Some(k) => key_arg(py, Some(&k[i]))?,
                    None => None,
                };
                let hs = match &headers {
                    Some(h) if !h[i].is_none() => headers_arg(&h[i])?,
                    _ => Vec::new(),
                };
                let ts = match &timestamps {
                    Some(t) if !t[i].is_none() => Some(record_time_ms(py, &t[i], "timestamps[]")?),
                    _ => None,
                };
                with_value(py, v, "send_many", |v| {
                    batch.push_body(ts.unwrap_or(now), key.as_deref(), &hs, v)
                })?;
            }
        }
        let t = opt_seconds("timeout", timeout)?.or(self.send_timeout);
        let pieces = self.send_reported(py, batch, t)?;
        Ok(pieces.last().map(|&(first, n)| first + n as u64 - 1))
    }

    /// Publishes the values of an Arrow ``binary``/``string`` array straight
    /// from its buffers: ``data`` is the value buffer, ``offsets`` the raw bytes
    /// of its ``n + 1`` value offsets (native-endian int32, or int64 with
    /// ``large=True`` for ``large_binary``/``large_string``); both any object with
    /// the buffer protocol, e.g. ``pyarrow.Buffer``. No Python call per value.
    /// Keys, optional, come the same way: ``key_data`` and ``key_offsets`` (of
    /// the same width, ``key_large``), with ``key_validity`` the Arrow validity
    /// bitmap (bit ``key_bit_offset + i`` clear: record ``i`` has no key; None:
    /// every record has one). ``timestamps``, optional, is a buffer of ``n``
    /// native-endian int64 create times in ms (default: now). Headers go
    /// through ``send_many``. Returns ``(first_offset, last_offset)``, or None
    /// when there are no values. The offsets are contiguous unless the values
    /// exceed ``max_unacked_bytes`` (they then go in pieces) and another thread
    /// sends meanwhile.
    #[pyo3(signature = (
        data, offsets, *, large = false, timeout = None, key_data = None, key_offsets = None,
        key_large = false, key_validity = None, key_bit_offset = 0, timestamps = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn send_buffers(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        offsets: &Bound<'_, PyAny>,
        large: bool,
        timeout: Option<f64>,
        key_data: Option<&Bound<'_, PyAny>>,
        key_offsets: Option<&Bound<'_, PyAny>>,
        key_large: bool,
        key_validity: Option<&Bound<'_, PyAny>>,
        key_bit_offset: usize,
        timestamps: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<(u64, u64)>> {
        let keys = match (key_data, key_offsets) {
            (None, None) => None,
            (Some(data), Some(offsets)) => Some(ArrowKeys {
                data,
                offsets,
                large: key_large,
                validity: key_validity,
                bit_offset: key_bit_offset,
            }),
            _ => {
                return Err(PyValueError::new_err(
                    "key_data and key_offsets go together: give both or neither",
                ))
            }
        };
        let values = ArrowValues {
            data,
            offsets,
            large,
            keys,
            timestamps,
        };
        let batch = values.batch(py, crate::meta::now_ms())?;
        let t = opt_seconds("timeout", timeout)?.or(self.send_timeout);
        let pieces = self.send_reported(py, batch, t)?;
        Ok(match (pieces.first(), pieces.last()) {
            (Some(&(first, _)), Some(&(start, n))) => Some((first, start + n as u64 - 1)),
            _ => None,
        })
    }

    /// Waits (GIL released) until every record sent is acknowledged by
    /// ``min_acks`` stores (or sent, with ``min_acks=0``), up to ``timeout``
    /// seconds (None = forever). Returns how many are still outstanding (0 = all
    /// delivered) and calls ``on_delivery``.
    ///
    /// Stores are counted apart by the address their ACKs carry: every dafka
    /// store's does, in both dialects (ADDRESSED-ACK), but a C-reference store's
    /// zproto ACK has none, so all C-reference stores together count as one. A
    /// ``min_acks`` above what can be counted is never reached: such ACKs are
    /// counted in ``stats()["min_acks_unreachable"]``, and the producer logs a
    /// warning once to the ``dafka`` logger.
    #[pyo3(signature = (timeout = None))]
    fn flush(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<u64> {
        let deadline = opt_seconds("timeout", timeout)?.map(|t| Instant::now() + t);
        let left = py.detach(|| -> PyResult<u64> {
            loop {
                let slice = match deadline {
                    Some(d) => SLICE.min(d.saturating_duration_since(Instant::now())),
                    None => SLICE,
                };
                let n = self.inner.wait_flush(slice)?;
                if n == 0 || deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(n);
                }
                check_signals()?;
            }
        })?;
        self.serve_delivery(py)?;
        crate::python::logbridge::drain(py)?;
        Ok(left)
    }

    /// Waits (GIL released) until ``n`` stores have connected to this producer
    /// (subscribed to its records), up to ``timeout`` seconds; returns how many
    /// have, counted as ``min_acks`` counts them (``stores_seen``): each dafka
    /// store, plus one for all C-reference stores together; in a secure cluster
    /// each store key once. Records sent before
    /// a store connects are not lost (it fetches them from this producer's
    /// buffer) but cross the wire twice: wait before a burst.
    #[pyo3(signature = (n = 1, timeout = 10.0))]
    fn wait_for_stores(&self, py: Python<'_>, n: i128, timeout: f64) -> PyResult<usize> {
        let n: usize = unsigned("n", n)?;
        let deadline = Instant::now() + seconds("timeout", timeout)?;
        py.detach(|| loop {
            let slice = SLICE.min(deadline.saturating_duration_since(Instant::now()));
            let seen = self.inner.wait_for_stores(n, slice)?;
            if seen >= n || Instant::now() >= deadline {
                return Ok(seen);
            }
            check_signals()?;
        })
    }

    /// Stores connected now whose ACKs can be counted apart (one that left no
    /// longer counts): each dafka store, plus one for all C-reference stores
    /// together (their zproto ACKs carry no address). In a secure cluster,
    /// each store key once (ACKs count by key there).
    #[getter]
    fn stores_seen(&self) -> usize {
        self.inner.stores_seen()
    }

    /// Waits up to ``timeout`` seconds for delivery progress and serves
    /// ``on_delivery``: ``on_delivery(None, record)`` for each record newly
    /// acknowledged, or ``on_delivery(acked_offset)`` if it advanced. Returns
    /// how many records were newly acknowledged.
    #[pyo3(signature = (timeout = 0.0))]
    fn poll(&self, py: Python<'_>, timeout: f64) -> PyResult<u64> {
        let t = seconds("timeout", timeout)?;
        // Closed (or failed) is said at once, whatever the timeout.
        self.inner.check()?;
        if !t.is_zero() {
            let deadline = Instant::now() + t;
            // Progress is past what `on_delivery` was last told, not past the
            // acked offset at this call: an ACK that came before it is
            // reported at once.
            let reported = self.reports.reported();
            let progressed = || self.inner.acked_offset().map_or(-1, |a| a as i64) > reported;
            py.detach(|| -> PyResult<()> {
                while Instant::now() < deadline && !progressed() {
                    let n = self
                        .inner
                        .wait_flush(SLICE.min(deadline - Instant::now().min(deadline)))?;
                    if n == 0 {
                        break;
                    }
                    check_signals()?;
                }
                Ok(())
            })?;
        }
        self.serve_delivery(py)
    }

    /// Seconds ``close()`` and leaving a ``with`` block wait for the stores'
    /// ACKs by default (the ``close_timeout`` it was made with).
    #[getter]
    fn close_timeout(&self) -> f64 {
        self.close_timeout.as_secs_f64()
    }
    /// Highest offset acknowledged by ``min_acks`` stores (None before any).
    #[getter]
    fn acked_offset(&self) -> Option<u64> {
        self.inner.acked_offset()
    }
    /// The offset the next ``send`` gets.
    #[getter]
    fn next_offset(&self) -> u64 {
        self.inner.next_offset()
    }
    /// Bytes of the records held until ``min_acks`` stores ACK them (bounded by
    /// ``max_unacked_bytes``).
    #[getter]
    fn unacked_bytes(&self) -> usize {
        self.inner.unacked_bytes()
    }
    /// The topic this producer publishes to.
    #[getter]
    fn topic(&self) -> &str {
        self.inner.topic()
    }
    /// The partition name: this producer's address (32 hex characters).
    #[getter]
    fn address(&self) -> &str {
        self.inner.address()
    }
    /// The XPUB endpoint other nodes list in ``peers=[...]``.
    #[getter]
    fn endpoint(&self) -> &str {
        self.inner.endpoint()
    }
    /// Connects to one more peer (an XPUB endpoint), like ``peers=[...]``.
    fn connect(&self, endpoint: &str) -> PyResult<()> {
        Ok(self.inner.connect(endpoint)?)
    }
    /// The node's counters as ``{name: count}``. A producer counts ``records_sent`` and
    /// ``bytes_sent`` (the bytes of their bodies: metadata and value), the same of its
    /// answers to FETCHes (``direct_records_sent``, ``direct_bytes_sent``),
    /// ``acks_received``, ``fetches_received``, ``heads_sent``, ``malformed``, ``peers``,
    /// ``min_acks_unreachable`` (address-less ACKs received while ``min_acks``
    /// was more than the stores it can count apart; see ``flush``), ``acks_ahead``
    /// (ACKs for offsets past the last it sent: the stores hold records of its
    /// partition it did not write, and drop its own at those offsets as
    /// duplicates; logged the first time) and, as every node, ``towers_silent``
    /// (times it warned that it heard no tower for a few seconds).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, self.inner.stats())
    }
    /// Waits until stores acknowledged what was sent (``min_acks`` of them, as
    /// ``flush``), up to ``timeout`` seconds (None: the producer's
    /// ``close_timeout``, 10 by default; 0 does not wait), then publishes what
    /// is left and stops the node. Returns how many records are still not
    /// acknowledged: those are logged (a warning of the ``dafka`` logger,
    /// with their offsets) and reported to ``on_delivery(err, record)`` with a
    /// ``DeliveryError``, as no node can fetch them from this producer any
    /// more. Idempotent: a second call returns the same count. Ctrl-C during
    /// the wait still closes the producer.
    #[pyo3(signature = (timeout = None))]
    fn close(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<u64> {
        let wait = match timeout {
            Some(t) => seconds("timeout", t)?,
            None => self.close_timeout,
        };
        let closed = py.detach(|| self.inner.close_after(wait, check_signals));
        self.metrics.end();
        let left = self.inner.outstanding();
        if !self.close_told.swap(true, SeqCst) {
            self.serve_delivery(py)?;
            self.tell_undelivered(py, left)?;
        }
        crate::python::logbridge::drain(py)?;
        closed?;
        Ok(left)
    }
    /// Returns the producer, for ``with Producer(...) as producer:``.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    /// Closes the producer on leaving the ``with`` block, waiting up to
    /// ``close_timeout`` for the stores' ACKs of what was sent (``close()``).
    /// Records still unacknowledged then raise ``DeliveryError`` (unless
    /// ``close_timeout`` is 0, or the block called ``close()``, which returned
    /// their count). An exception leaving the block closes at once
    /// (``close(timeout=0)``, what is left logged) and propagates.
    #[pyo3(signature = (*exc))]
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let failing = exc.get_item(0).is_ok_and(|t| !t.is_none());
        if failing {
            self.close(py, Some(0.0))?;
            return Ok(false);
        }
        // A `close()` in the block returned the count already: not again.
        let first = !self.close_told.load(SeqCst);
        let left = self.close(py, None)?;
        if first && left > 0 && !self.close_timeout.is_zero() {
            return Err(Exc::Delivery.err(format!(
                "{left} record(s) sent by producer {} of topic {:?} were not acknowledged by \
                 min_acks={} store(s) within close_timeout={:.1}s of leaving the with block: \
                 the producer is closed and stores may not hold them. Is a store running and \
                 reachable through the towers? (close_timeout=0 closes without waiting)",
                self.inner.address(),
                self.inner.topic(),
                self.min_acks,
                self.close_timeout.as_secs_f64(),
            )));
        }
        Ok(false)
    }
    /// The garbage collector sees `on_delivery`, so that a cycle through it
    /// (an object holding the producer and passing its own bound method) is
    /// collected, and the node with it.
    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        self.reports.traverse(&visit)
    }
    fn __clear__(&self) {
        self.reports.clear();
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProducer>()
}
