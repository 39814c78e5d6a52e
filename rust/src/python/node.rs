//! `dafka.Tower`, `dafka.Producer` and `dafka.Consumer`: thin PyO3 classes over
//! the Rust nodes. Every blocking call releases the GIL and waits in 100 ms
//! slices, checking for signals in between, so Ctrl-C works.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyStopIteration, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use crate::error::Error;
use crate::node::producer::Extra;
use crate::node::stats::Stats;
use crate::node::{
    Batch, Consumer, ConsumerConfig, Delivery, Producer, ProducerConfig, Tower, TowerConfig,
};
use crate::python::defaults::DEFAULT;
use crate::python::delivery::Reports;
use crate::python::discovery::Discovery;
use crate::python::errors::Exc;
use crate::python::record::{headers_arg, PartitionNames, PyRecord};
use crate::python::time::{check_ms, record_time_ms};
use crate::python::{opt_seconds, opt_unsigned, seconds, unsigned, StrList};

const SLICE: Duration = Duration::from_millis(100);

/// Between two slices of a wait: Ctrl-C raises, and what the core logged
/// meanwhile goes to the `dafka` logger ([`crate::python::logbridge`]).
pub(super) fn check_signals() -> PyResult<()> {
    Python::attach(|py| {
        crate::python::logbridge::drain(py)?;
        py.check_signals()
    })
}

pub(super) fn stats_dict<'py>(py: Python<'py>, s: &Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in s.snapshot() {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// A tower: relays beacons so nodes find each other.
///
/// Nodes send their beacons to the tower's XSUB socket (``beacon_in``), and it relays them to
/// every node through its XPUB socket (``beacon_out``). It carries no records. Nodes name it
/// in ``towers=[tower.endpoint]``. When a node joins, the tower repeats the last beacons of
/// the live nodes it knows, so the new node finds its peers at once. It remembers at most
/// 16,384 nodes; beacons of more are still relayed. It runs on its own thread until ``close()``.
///
/// Parameters
/// ----------
/// beacon_in : str, default "tcp://*:5556"
///     Endpoint the XSUB socket binds, where nodes send beacons (5556 as in the C reference).
///     Port 0 or ``*`` picks a free port. A wildcard host shows as 127.0.0.1 in ``endpoint``.
/// beacon_out : str, default "tcp://*:5557"
///     Endpoint the XPUB socket binds, where nodes receive beacons (5557 as in the C
///     reference). Port 0 or ``*`` picks a free port.
/// cert : str or os.PathLike or None, default None
///     Secure mode (CURVE encryption and authentication, docs/security.md): the path of the
///     tower's secret certificate, ``NAME.key_secret`` as ``dafka keygen`` writes it, of role
///     ``"tower"``. Needs ``trust``. None: plaintext, anyone who reaches the tower joins.
/// trust : str or os.PathLike or None, default None
///     Secure mode: the directory of trusted public certificates (``NAME.key``), read again when
///     it changes. Needs ``cert``. A secure tower's ``endpoint`` carries its public key
///     (``tcp://HOST:IN,OUT;curve=KEY``), what secure nodes pass in ``towers=[...]``.
///
/// Raises
/// ------
/// ConfigError
///     An endpoint is malformed: not ``tcp://HOST:PORT``, ``ipc://PATH`` or ``inproc://NAME``.
///     Secure mode: ``cert`` without ``trust`` (or the reverse), or a certificate of another
///     role.
/// OSError
///     ``cert`` or ``trust`` cannot be read, e.g. does not exist (the error names the path).
/// SecurityError
///     ``cert`` is malformed or holds no secret key (``NAME.key`` given for ``NAME.key_secret``).
/// NodeError
///     A socket cannot bind, e.g. the port is in use.
#[pyclass(module = "dafka._native", name = "Tower", frozen)]
struct PyTower {
    inner: Tower,
}

#[pymethods]
impl PyTower {
    #[new]
    #[pyo3(signature = (
        *, beacon_in = DEFAULT.tower.beacon_in.clone(),
        beacon_out = DEFAULT.tower.beacon_out.clone(), cert = None, trust = None
    ))]
    fn new(
        py: Python<'_>,
        beacon_in: String,
        beacon_out: String,
        cert: Option<std::path::PathBuf>,
        trust: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        crate::python::logbridge::install();
        let cfg = TowerConfig {
            beacon_in,
            beacon_out,
            security: crate::python::discovery::security(cert, trust)?,
        };
        crate::node::config::check_endpoint("beacon_in", &cfg.beacon_in)?;
        crate::node::config::check_endpoint("beacon_out", &cfg.beacon_out)?;
        crate::python::discovery::load_security(
            cfg.security.as_ref(),
            crate::security::Role::Tower,
        )?;
        let inner = py.detach(|| Tower::new(cfg))?;
        Ok(Self { inner })
    }

    /// What nodes pass in ``towers=[...]``: ``tcp://HOST:IN_PORT,OUT_PORT``, with
    /// ``;curve=KEY`` (the tower's public key) after it for a secure tower.
    #[getter]
    fn endpoint(&self) -> String {
        self.inner.endpoint()
    }
    /// The bound endpoint of the XSUB that receives beacons (a wildcard host shows as
    /// 127.0.0.1).
    #[getter]
    fn beacon_in(&self) -> String {
        self.inner.beacon_in().to_string()
    }
    /// The bound endpoint of the XPUB that sends beacons (a wildcard host shows as
    /// 127.0.0.1).
    #[getter]
    fn beacon_out(&self) -> String {
        self.inner.beacon_out().to_string()
    }
    /// Counters: ``beacons`` relayed, ``malformed`` dropped, ``peers`` (the nodes it
    /// knows now), ``beacons_refused`` (beacons of new nodes past the 16,384 it remembers);
    /// in secure mode ``auth_refused`` (connections refused at the handshake) and
    /// ``identity_refused`` (beacons for a node that is not the sender key's).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, self.inner.stats())
    }
    /// Stops the tower (idempotent).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let closed = py.detach(|| self.inner.close());
        crate::python::logbridge::drain(py)?;
        Ok(closed?)
    }
    /// Returns the tower, for ``with Tower(...) as tower:``.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    /// Closes the tower on leaving the ``with`` block; an exception propagates.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
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
/// towers : list of str or None, default None
///     Towers to find peers through, each ``tcp://HOST:IN_PORT,OUT_PORT`` (what ``Tower.endpoint``
///     gives) or ``tcp://HOST:IN_PORT`` (OUT_PORT = IN_PORT + 1). None: no tower.
/// peers : list of str or None, default None
///     Static peers: XPUB endpoints ``tcp://HOST:PORT`` (the port the peer is bound to) to connect
///     to, no tower needed. ``connect(endpoint)`` adds one later.
/// wire : str, default "rfc"
///     The dialect the node sends in: ``"rfc"`` or ``"zproto"`` (the C reference's framing). A
///     node receives both.
/// min_acks : int, default 1
///     Distinct stores that must ACK a record before it leaves the buffer, 0 to 1,024. With 0 a
///     record is released as soon as it is sent.
/// head_interval : float, default 1.0
///     Seconds between HEADs once something was published; must be > 0.
/// max_unacked_bytes : int, default 268435456 (256 MiB)
///     Bound on the bytes of records not yet released; must be > 0. ``send`` blocks while a record
///     would pass it, until ACKs free room or its timeout passes. An empty buffer takes any record.
/// send_timeout : float or None, default None
///     Seconds ``send``, ``send_many`` and ``send_buffers`` wait for room when called without
///     ``timeout``, before they raise ``BufferFullError``. None waits for good.
/// on_delivery : callable or None, default None
///     Delivery reports, called by ``poll()``, ``flush()`` and ``close()`` in the calling thread.
///     A callable of two arguments is called as ``on_delivery(err, record)``, as confluent-kafka
///     calls it: once per record, in offset order, ``err`` None once ``min_acks`` stores ACKed
///     it, or a ``DeliveryError`` for a record the producer closed without (``record`` is a
///     ``Record``: topic, partition, offset, value, key, headers, timestamp). Each record sent is
///     then kept until reported. A callable of one argument is called as
///     ``on_delivery(acked_offset)`` when the acknowledged offset has advanced. Another is refused
///     with ``TypeError``.
/// bind : str, default "tcp://127.0.0.1:*"
///     Endpoint the node's XPUB binds; port 0 or ``*`` picks a free port. The default is reachable
///     from this host only: bind ``tcp://*:0`` to be reachable from other hosts.
/// beacon_interval : float, default 1.0
///     Seconds between the node's beacons; must be > 0.
/// beacon_timeout : float, default 4.0
///     A peer silent for this many seconds is forgotten; must be longer than ``beacon_interval``.
/// sndhwm : int, default 1000000
///     Send high-water mark of the XPUB, in messages per subscriber; 0 = unlimited. At most
///     2,147,483,647.
/// rcvhwm : int, default 1000000
///     Receive high-water mark of the SUB, in messages per peer; 0 = unlimited. At most
///     2,147,483,647.
/// max_record_bytes : int, default 67108864 (64 MiB)
///     A longer value raises ``RecordTooLargeError`` and nothing is sent; must be > 0. Stores drop
///     records over their own ``max_record_bytes`` (the same default): raise both together.
/// advertise_host : str or None, default None
///     Host put in beacons, for a node behind NAT or in a container: peers connect to
///     ``tcp://HOST:PORT``. ``""`` lets the tower use the TCP peer address. None: the bound host,
///     or ``""`` when bound to a wildcard.
/// record_batches : bool, default False
///     Stores and consumers of this project always get records in batches of up to 64 KiB
///     (META-RECORD-BATCH, this project's extension of the wire, with keys, headers and
///     timestamps). For a node that does not know it (the C reference): False sends one RECORD
///     per record, True none, and such a node gets the records by fetching them. The XPUB holds
///     ``sndhwm / 64`` messages per subscriber (at least 1,000).
/// address_seed : str or bytes or None, default None
///     The partition's address comes from this seed: the same seed (and, in secure mode, the
///     same certificate) gives the same address, for a writer that runs again and goes on with
///     its partition (per-key order across restarts) or rewrites it (a retried Spark task).
///     None: a new address.
/// first_offset : int or None, default None
///     The offset of the first record sent. None: 0 for a new address; with ``address_seed``,
///     where the partition ends, which the constructor asks the stores (up to 10 s, then
///     ``FetchTimeoutError``), so the records follow the ones stored instead of being dropped as
///     duplicates of them. Give it to rewrite offsets (what the Spark sink does on a retry), and
///     in secure mode, where a producer may not ask.
/// close_timeout : float, default 10.0
///     Seconds ``close()`` and leaving a ``with`` block wait for the stores' ACKs of what was
///     sent; 0 closes at once. Leaving a ``with`` block with records still unacknowledged raises
///     ``DeliveryError`` (unless 0).
/// cert : str or os.PathLike or None, default None
///     Secure mode (CURVE encryption and authentication, docs/security.md): the path of the
///     node's secret certificate, ``NAME.key_secret`` as ``dafka keygen`` writes it, of role
///     ``"producer"``. Needs ``trust``. None: plaintext, anyone who reaches the node joins.
/// trust : str or os.PathLike or None, default None
///     Secure mode: the directory of trusted public certificates (``NAME.key``), read again when
///     it changes. Needs ``cert``. A secure node takes only keyed tower and peer endpoints
///     (``...;curve=KEY``, as a secure ``Tower.endpoint`` gives), an insecure one only keyless.
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
///     ``cert`` or ``trust`` cannot be read, e.g. does not exist (the error names the path).
/// SecurityError
///     ``cert`` is malformed or holds no secret key (``NAME.key`` given for ``NAME.key_secret``).
/// NodeError
///     The node cannot start, e.g. its ``bind`` endpoint is in use.
#[pyclass(module = "dafka._native", name = "Producer", frozen)]
struct PyProducer {
    inner: Producer,
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
    #[pyo3(signature = (
        topic, *, towers = None, peers = None, wire = DEFAULT.node.wire,
        min_acks = DEFAULT.producer.min_acks, head_interval = DEFAULT.producer.head_interval,
        max_unacked_bytes = DEFAULT.producer.max_unacked_bytes, send_timeout = None,
        on_delivery = None, bind = DEFAULT.node.bind.clone(),
        beacon_interval = DEFAULT.node.beacon_interval,
        beacon_timeout = DEFAULT.node.beacon_timeout, sndhwm = DEFAULT.node.sndhwm,
        rcvhwm = DEFAULT.node.rcvhwm, max_record_bytes = DEFAULT.producer.max_record_bytes,
        advertise_host = None, record_batches = DEFAULT.producer.record_batches,
        cert = None, trust = None, address_seed = None, first_offset = None,
        close_timeout = DEFAULT.producer.close_timeout
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        topic: String,
        towers: Option<StrList>,
        peers: Option<StrList>,
        wire: &str,
        min_acks: i128,
        head_interval: f64,
        max_unacked_bytes: i128,
        send_timeout: Option<f64>,
        on_delivery: Option<Py<PyAny>>,
        bind: String,
        beacon_interval: f64,
        beacon_timeout: f64,
        sndhwm: i128,
        rcvhwm: i128,
        max_record_bytes: i128,
        advertise_host: Option<String>,
        record_batches: bool,
        cert: Option<std::path::PathBuf>,
        trust: Option<std::path::PathBuf>,
        address_seed: Option<&Bound<'_, PyAny>>,
        first_offset: Option<i128>,
        close_timeout: f64,
    ) -> PyResult<Self> {
        let address_seed = match address_seed {
            None => None,
            Some(s) => Some(if let Ok(t) = s.cast::<PyString>() {
                t.to_str()?.as_bytes().to_vec()
            } else if let Ok(b) = s.cast::<PyBytes>() {
                b.as_bytes().to_vec()
            } else {
                return Err(PyTypeError::new_err(
                    "address_seed must be a str or bytes (e.g. a write's id and a task's partition)",
                ));
            }),
        };
        let reports = Reports::new(py, on_delivery)?;
        let mut cfg = ProducerConfig {
            node: Discovery {
                towers,
                peers,
                wire,
                bind,
                beacon_interval,
                beacon_timeout,
                advertise_host,
                cert,
                trust,
            }
            .node_config(crate::security::Role::Producer, sndhwm, rcvhwm)?,
            head_interval: seconds("head_interval", head_interval)?,
            min_acks: unsigned("min_acks", min_acks)?,
            max_unacked_bytes: unsigned("max_unacked_bytes", max_unacked_bytes)?,
            max_record_bytes: unsigned("max_record_bytes", max_record_bytes)?,
            record_batches,
            address_seed,
            first_offset: opt_unsigned("first_offset", first_offset)?.unwrap_or(0),
            close_timeout: seconds("close_timeout", close_timeout)?,
        };
        let send_timeout = opt_seconds("send_timeout", send_timeout)?;
        cfg.validate()?;
        if let (Some(seed), None) = (&cfg.address_seed, first_offset) {
            cfg.first_offset = resume_offset(py, &cfg, &topic, seed)?;
        }
        let (close_timeout, min_acks) = (cfg.close_timeout, cfg.min_acks);
        let inner = py.detach(|| Producer::new(&topic, cfg))?;
        Ok(Self {
            inner,
            send_timeout,
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
    /// BufferFullError.
    #[pyo3(signature = (value, *, key = None, headers = None, timestamp = None, timeout = None))]
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
        let key = key_arg(py, key)?;
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
            key: key.as_deref(),
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
        let data = ByteView::get(py, data, "data")?;
        let offs = ByteView::get(py, offsets, "offsets")?;
        let bounds = arrow_offsets(offs.bytes(), large, "offsets")?;
        let n = bounds.len().saturating_sub(1);
        let keys = match (key_data, key_offsets) {
            (None, None) => None,
            (Some(d), Some(o)) => {
                let d = ByteView::get(py, d, "key_data")?;
                let o = ByteView::get(py, o, "key_offsets")?;
                let kb = arrow_offsets(o.bytes(), key_large, "key_offsets")?;
                if kb.len() != bounds.len() {
                    return Err(PyValueError::new_err(format!(
                        "key_offsets holds {} offsets, offsets {}: one key per value",
                        kb.len(),
                        bounds.len()
                    )));
                }
                let valid = key_validity
                    .map(|v| ByteView::get(py, v, "key_validity"))
                    .transpose()?;
                Some((d, kb, valid))
            }
            _ => {
                return Err(PyValueError::new_err(
                    "key_data and key_offsets go together: give both or neither",
                ))
            }
        };
        let times = match timestamps {
            None => None,
            Some(t) => {
                let t = ByteView::get(py, t, "timestamps")?;
                if t.bytes().len() != n * 8 {
                    return Err(PyValueError::new_err(format!(
                        "timestamps holds {} bytes; {n} values need {} (int64 each)",
                        t.bytes().len(),
                        n * 8
                    )));
                }
                Some(t)
            }
        };
        let values = data.bytes();
        let span = |b: &[i64], i: usize, buf: &[u8], what: &str| -> PyResult<(usize, usize)> {
            let (a, z) = (b[i], b[i + 1]);
            match (usize::try_from(a), usize::try_from(z)) {
                (Ok(a), Ok(z)) if a <= z && z <= buf.len() => Ok((a, z)),
                _ => Err(PyValueError::new_err(format!(
                    "{what} must be non-decreasing and within the {}-byte data buffer, \
                     got [{a}, {z})",
                    buf.len()
                ))),
            }
        };
        let now = crate::meta::now_ms();
        let none: &[(&str, &[u8])] = &[];
        let mut batch = Batch::with_capacity(n, values.len() + n * crate::meta::PLAIN_LEN);
        for i in 0..n {
            let (a, z) = span(&bounds, i, values, "offsets")?;
            let ts = match &times {
                Some(t) => {
                    let raw: [u8; 8] = t.bytes()[i * 8..i * 8 + 8].try_into().expect("8 bytes");
                    let v = i64::from_ne_bytes(raw);
                    let ms = u64::try_from(v).map_err(|_| {
                        PyValueError::new_err(format!("timestamps[{i}] is negative ({v})"))
                    })?;
                    check_ms(ms, &format!("timestamps[{i}]"))?
                }
                None => now,
            };
            let key = match &keys {
                None => None,
                Some((kd, kb, valid)) => {
                    let has = valid.as_ref().is_none_or(|v| {
                        let bit = key_bit_offset + i;
                        v.bytes()
                            .get(bit / 8)
                            .is_some_and(|b| b & (1 << (bit % 8)) != 0)
                    });
                    if has {
                        let (ka, kz) = span(kb, i, kd.bytes(), "key_offsets")?;
                        Some(&kd.bytes()[ka..kz])
                    } else {
                        None
                    }
                }
            };
            batch.push_body(ts, key, none, &values[a..z]);
        }
        drop((data, offs, keys, times));
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
    /// The node's counters as ``{name: count}``. A producer counts ``records_sent``,
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
    fn __exit__(&self, py: Python<'_>, exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
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

/// A consumer of one or more topics.
///
/// Receives the records of every partition (producer) of ``topics`` that it finds through its
/// towers and peers. It returns them in offset order per partition and drops duplicates. Gaps are
/// fetched from the producer and the stores. Dafka keeps no consumer offsets on the network: to
/// resume after a restart, save ``positions()`` and pass them as ``start_offsets``. The node runs
/// on its own thread; calls that wait release the GIL and can be interrupted with Ctrl-C.
///
/// Parameters
/// ----------
/// topics : list of str
///     The topics to read, at least one, each 1 to 255 bytes.
/// towers : list of str or None, default None
///     Towers to find peers through, each ``tcp://HOST:IN_PORT,OUT_PORT`` (what ``Tower.endpoint``
///     gives) or ``tcp://HOST:IN_PORT`` (OUT_PORT = IN_PORT + 1). None: no tower.
/// peers : list of str or None, default None
///     Static peers: XPUB endpoints ``tcp://HOST:PORT`` (the port the peer is bound to) to connect
///     to, no tower needed. ``connect(endpoint)`` adds one later.
/// wire : str, default "rfc"
///     The dialect the node sends in: ``"rfc"`` or ``"zproto"`` (the C reference's framing). A
///     node receives both.
/// offset_reset : str, default "earliest"
///     Where a partition seen for the first time starts, unless ``start_offsets`` lists it:
///     ``"earliest"`` at offset 0, fetching everything the producer and stores still hold;
///     ``"latest"`` at the first record seen (or after the first HEAD seen). Every producer run is
///     a new partition, found only once discovery connects to it, so ``"latest"`` skips the first
///     records of partitions born while the consumer runs. With ``start_offsets`` given, every
///     partition it does not name starts at ``"earliest"``, whatever this says.
/// fetch_retry : float, default 0.5
///     Seconds after which an unanswered FETCH is sent again; must be > 0. After
///     ``give_up_fetches`` unanswered tries the interval doubles per retry, up to 16 times this.
/// max_fetch : int, default 10000
///     Most records one FETCH asks for; must be > 0.
/// max_pending : int, default 100000
///     Out-of-order records held per partition while a gap is fetched (and at most 64 MiB); must
///     be > 0. Records past the bound are fetched again once the gap fills.
/// max_buffered : int, default 100000
///     Records received but not yet returned to the application; must be > 0. While it is full,
///     the node stops reading (counted in ``stats()["pauses"]``); what the producers drop
///     meanwhile is fetched once it reads again.
/// max_buffered_bytes : int, default 67108864 (64 MiB)
///     The same bound in bytes of values; must be > 0. One record is taken however large.
/// give_up_fetches : int, default 6
///     FETCH rounds in a row, each answered from past the gap and none with any of it, before
///     the gap is skipped (retention deleted it). Skipped records count in
///     ``stats()["records_lost"]``. Must be > 0.
/// start_offsets : dict of str to int, or None, default None
///     ``{partition: next offset}`` to start at, e.g. a saved ``positions()``. It overrides
///     ``offset_reset`` for the partitions listed; given (even empty), the partitions it does not
///     name (born while the consumer was away) start at their first record held, whatever
///     ``offset_reset`` says.
/// idle_after : float, default 60.0
///     A partition caught up and not heard of for this many seconds keeps only its position, not
///     its protocol state; must be > 0.
/// forget_after : float or None, default 691200.0 (8 days)
///     The position of a partition not heard of for this many seconds is forgotten, unless it was
///     seeked; heard of again, it starts by ``offset_reset``. Keep it above the stores' retention
///     (168 hours by default). None keeps every position; 0 is refused.
/// bind : str, default "tcp://127.0.0.1:*"
///     Endpoint the node's XPUB binds; port 0 or ``*`` picks a free port. The default is reachable
///     from this host only: bind ``tcp://*:0`` to be reachable from other hosts.
/// beacon_interval : float, default 1.0
///     Seconds between the node's beacons; must be > 0.
/// beacon_timeout : float, default 4.0
///     A peer silent for this many seconds is forgotten; must be longer than ``beacon_interval``.
/// sndhwm : int, default 1000000
///     Send high-water mark of the XPUB, in messages per subscriber; 0 = unlimited. At most
///     2,147,483,647.
/// rcvhwm : int, default 1000000
///     Receive high-water mark of the SUB, in messages per peer; 0 = unlimited. At most
///     2,147,483,647.
/// advertise_host : str or None, default None
///     Host put in beacons, for a node behind NAT or in a container: peers connect to
///     ``tcp://HOST:PORT``. ``""`` lets the tower use the TCP peer address. None: the bound host,
///     or ``""`` when bound to a wildcard.
/// cert : str or os.PathLike or None, default None
///     Secure mode (CURVE encryption and authentication, docs/security.md): the path of the
///     node's secret certificate, ``NAME.key_secret`` as ``dafka keygen`` writes it, of role
///     ``"consumer"``. Needs ``trust``. None: plaintext, anyone who reaches the node joins.
/// trust : str or os.PathLike or None, default None
///     Secure mode: the directory of trusted public certificates (``NAME.key``), read again when
///     it changes. Needs ``cert``. A secure node takes only keyed tower and peer endpoints
///     (``...;curve=KEY``, as a secure ``Tower.endpoint`` gives), an insecure one only keyless.
/// start_time : int or datetime or str or None, default None
///     Start every partition the stores hold at its first record at or after this time (ms
///     since the epoch, a ``datetime``, or an ISO 8601 str such as ``"2026-11-27T09:00"``, naive
///     times being local), as ``offsets_for_times`` finds it (the constructor waits for it), and
///     every other partition at its start (``offset_reset`` is then ``"earliest"``);
///     ``start_offsets`` still wins for the partitions it lists. Raises ``FetchTimeoutError``
///     when no store answers within 10 seconds.
///
/// Raises
/// ------
/// ConfigError
///     An option is out of range or malformed: an endpoint, ``wire``, ``offset_reset``, a topic or
///     partition name, a zero interval or bound.
///     Secure mode: ``cert`` without ``trust`` (or the reverse), a certificate of another role,
///     or a tower or peer endpoint keyed (``;curve=KEY``) without ``cert``, or keyless with it.
/// ValueError
///     ``topics`` is empty, an integer or offset is negative or too large, or a number of seconds
///     is negative or not finite.
/// TypeError
///     ``topics``, ``towers`` or ``peers`` is a ``str`` instead of a list of str.
/// OSError
///     ``cert`` or ``trust`` cannot be read, e.g. does not exist (the error names the path).
/// SecurityError
///     ``cert`` is malformed or holds no secret key (``NAME.key`` given for ``NAME.key_secret``).
/// NodeError
///     The node cannot start, e.g. its ``bind`` endpoint is in use.
#[pyclass(module = "dafka._native", name = "Consumer", frozen)]
struct PyConsumer {
    inner: Consumer,
    names: PartitionNames,
    /// The node settings, for the time queries of `seek_to_time`.
    node: crate::node::NodeConfig,
}

impl PyConsumer {
    fn take(&self, py: Python<'_>, max: usize, timeout: Option<f64>) -> PyResult<Vec<Delivery>> {
        if max == 0 {
            return Err(PyValueError::new_err("max_records must be >= 1"));
        }
        let deadline = opt_seconds("timeout", timeout)?.map(|t| Instant::now() + t);
        // Before any record is taken: a Ctrl-C raised while logging loses none.
        crate::python::logbridge::drain(py)?;
        py.detach(|| -> PyResult<Vec<Delivery>> {
            let mut v = Vec::new();
            loop {
                let slice = match deadline {
                    Some(d) => SLICE.min(d.saturating_duration_since(Instant::now())),
                    None => SLICE,
                };
                self.inner.poll_slice(max, slice, &mut v)?;
                if !v.is_empty() || deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(v);
                }
                check_signals()?;
            }
        })
    }
}

#[pymethods]
impl PyConsumer {
    #[new]
    #[pyo3(signature = (
        topics, *, towers = None, peers = None, wire = DEFAULT.node.wire,
        offset_reset = DEFAULT.consumer.offset_reset, fetch_retry = DEFAULT.consumer.fetch_retry,
        max_fetch = DEFAULT.consumer.max_fetch, max_pending = DEFAULT.consumer.max_pending,
        max_buffered = DEFAULT.consumer.max_buffered,
        max_buffered_bytes = DEFAULT.consumer.max_buffered_bytes,
        give_up_fetches = DEFAULT.consumer.give_up_fetches, start_offsets = None,
        idle_after = DEFAULT.consumer.idle_after, forget_after = DEFAULT.consumer.forget_after,
        bind = DEFAULT.node.bind.clone(), beacon_interval = DEFAULT.node.beacon_interval,
        beacon_timeout = DEFAULT.node.beacon_timeout, sndhwm = DEFAULT.node.sndhwm,
        rcvhwm = DEFAULT.node.rcvhwm, advertise_host = None,
        cert = None, trust = None, start_time = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        topics: &Bound<'_, PyAny>,
        towers: Option<StrList>,
        peers: Option<StrList>,
        wire: &str,
        offset_reset: &str,
        fetch_retry: f64,
        max_fetch: i128,
        max_pending: i128,
        max_buffered: i128,
        max_buffered_bytes: i128,
        give_up_fetches: i128,
        start_offsets: Option<HashMap<String, i128>>,
        idle_after: f64,
        forget_after: Option<f64>,
        bind: String,
        beacon_interval: f64,
        beacon_timeout: f64,
        sndhwm: i128,
        rcvhwm: i128,
        advertise_host: Option<String>,
        cert: Option<std::path::PathBuf>,
        trust: Option<std::path::PathBuf>,
        start_time: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let start_time = start_time
            .map(|t| crate::python::time::time_ms(py, t, "start_time"))
            .transpose()?;
        // Resuming: the partitions the saved positions do not name were born
        // while this consumer was away (every producer run is a partition),
        // so they start at their first record, whatever `offset_reset` says.
        let resuming = start_offsets.is_some();
        let mut starts = Vec::new();
        for (p, off) in start_offsets.unwrap_or_default() {
            let off = unsigned(&format!("start_offsets[{p:?}]"), off)?;
            starts.push((p, off));
        }
        if topics.is_instance_of::<PyString>() || topics.is_instance_of::<PyBytes>() {
            return Err(PyTypeError::new_err(
                "topics must be a list of str, e.g. Consumer([\"weather\"])",
            ));
        }
        let topics: Vec<String> = topics.extract()?;
        if topics.is_empty() {
            return Err(PyValueError::new_err("topics must name at least one topic"));
        }
        let cfg = ConsumerConfig {
            node: Discovery {
                towers,
                peers,
                wire,
                bind,
                beacon_interval,
                beacon_timeout,
                advertise_host,
                cert,
                trust,
            }
            .node_config(crate::security::Role::Consumer, sndhwm, rcvhwm)?,
            offset_reset: offset_reset.parse()?,
            fetch_retry: seconds("fetch_retry", fetch_retry)?,
            max_fetch: unsigned("max_fetch", max_fetch)?,
            max_pending: unsigned("max_pending", max_pending)?,
            max_buffered: unsigned("max_buffered", max_buffered)?,
            max_buffered_bytes: unsigned("max_buffered_bytes", max_buffered_bytes)?,
            give_up_fetches: unsigned("give_up_fetches", give_up_fetches)?,
            start_offsets: starts,
            idle_after: seconds("idle_after", idle_after)?,
            forget_after: opt_seconds("forget_after", forget_after)?,
        };
        let mut cfg = cfg;
        if resuming {
            cfg.offset_reset = crate::node::OffsetReset::Earliest;
        }
        if let Some(t) = start_time {
            // Where each partition the stores hold reaches the time; the
            // others (none of their records stored yet) from their start.
            let given: std::collections::HashSet<String> =
                cfg.start_offsets.iter().map(|(p, _)| p.clone()).collect();
            for topic in &topics {
                let got = py.detach(|| time_offsets(&cfg.node, topic, t))?;
                cfg.start_offsets
                    .extend(got.into_iter().filter(|(p, _)| !given.contains(p)));
            }
            cfg.offset_reset = crate::node::OffsetReset::Earliest;
        }
        let node = cfg.node.clone();
        let inner = py.detach(|| Consumer::new(&topics, cfg))?;
        Ok(Self {
            inner,
            names: PartitionNames::default(),
            node,
        })
    }

    /// Moves ``partition`` (every partition of this consumer's topics the
    /// stores hold, when None) to the first offset at or after
    /// ``timestamp`` (ms since the epoch, a ``datetime`` or an ISO 8601 str):
    /// asks the stores as :func:`offsets_for_times` does, then seeks. Returns
    /// ``{partition: offset}`` as sought; raises FetchTimeoutError when no
    /// store answers within 10 seconds, and UnknownPartitionError (a
    /// LookupError) when ``partition`` is not among what the stores hold.
    #[pyo3(signature = (partition, timestamp))]
    fn seek_to_time(
        &self,
        py: Python<'_>,
        partition: Option<&str>,
        timestamp: &Bound<'_, PyAny>,
    ) -> PyResult<HashMap<String, u64>> {
        let t = crate::python::time::time_ms(py, timestamp, "timestamp")?;
        let mut found = Vec::new();
        for topic in self.inner.topics() {
            found.extend(py.detach(|| time_offsets(&self.node, topic, t))?);
        }
        let chosen: Vec<(String, u64)> = match partition {
            None => found,
            Some(p) => {
                let hit: Vec<_> = found.into_iter().filter(|(q, _)| q == p).collect();
                if hit.is_empty() {
                    return Err(crate::python::errors::Exc::UnknownPartition.err(format!(
                        "no store of topics {:?} holds partition {p:?}: seek_to_time needs \
                         a partition the stores hold (or None for all)",
                        self.inner.topics()
                    )));
                }
                hit
            }
        };
        for (p, off) in &chosen {
            self.inner.seek(p, *off)?;
        }
        Ok(chosen.into_iter().collect())
    }

    /// The next record, waiting up to ``timeout`` seconds (None = until one
    /// arrives); None on timeout.
    #[pyo3(signature = (timeout = None))]
    fn poll(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Py<PyRecord>>> {
        let ds = self.take(py, 1, timeout)?;
        Ok(self.names.records(py, ds)?.into_iter().next())
    }

    /// Up to ``max_records`` records in one call, waiting up to ``timeout``
    /// seconds (None = until at least one arrives) for the first.
    #[pyo3(signature = (max_records = 10000, timeout = None))]
    fn poll_many(
        &self,
        py: Python<'_>,
        max_records: i128,
        timeout: Option<f64>,
    ) -> PyResult<Vec<Py<PyRecord>>> {
        let ds = self.take(py, unsigned("max_records", max_records)?, timeout)?;
        self.names.records(py, ds)
    }

    /// For ``dafka.aio``: the records already here, up to ``max_records``,
    /// never waiting (for records, or for a thread waiting for them: then
    /// none). Safe on an event loop's thread.
    fn _take(&self, py: Python<'_>, max_records: i128) -> PyResult<Vec<Py<PyRecord>>> {
        let max = unsigned("max_records", max_records)?;
        if max == 0 {
            return Err(PyValueError::new_err("max_records must be >= 1"));
        }
        let mut ds = Vec::new();
        self.inner.try_poll(max, &mut ds)?;
        self.names.records(py, ds)
    }

    /// For ``dafka.aio``: waits (GIL released) up to ``timeout`` seconds until
    /// a record is here to take, and takes none: a caller that gives up
    /// loses nothing. Raises ``ClosedError`` once the consumer is closed.
    fn _ready(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let deadline = Instant::now() + seconds("timeout", timeout)?;
        py.detach(|| -> PyResult<bool> {
            loop {
                let slice = SLICE.min(deadline.saturating_duration_since(Instant::now()));
                if self.inner.wait_ready(slice)? {
                    return Ok(true);
                }
                if Instant::now() >= deadline {
                    return Ok(false);
                }
                check_signals()?;
            }
        })
    }

    /// Restarts ``partition`` (a producer address) at ``offset``, fetching
    /// from there (a partition gone idle too); a partition not seen yet
    /// starts there when it is. A name that is no producer address (32 hex
    /// characters, e.g. Kafka's ``"0"``) raises ``ConfigError``.
    fn seek(&self, partition: &str, offset: i128) -> PyResult<()> {
        Ok(self.inner.seek(partition, unsigned("offset", offset)?)?)
    }
    /// The next offset of each partition this consumer has returned records
    /// of (or seeked, or started at): ``{partition: offset}``. Save it and pass
    /// it as ``start_offsets=`` to resume where this consumer left off.
    fn positions(&self) -> HashMap<String, u64> {
        self.inner.positions().into_iter().collect()
    }
    /// Connects to one more peer (an XPUB endpoint), like ``peers=[...]``.
    fn connect(&self, endpoint: &str) -> PyResult<()> {
        Ok(self.inner.connect(endpoint)?)
    }
    /// The topics this consumer reads.
    #[getter]
    fn topics(&self) -> Vec<String> {
        self.inner.topics().to_vec()
    }
    /// This consumer's address (32 hex characters).
    #[getter]
    fn address(&self) -> &str {
        self.inner.address()
    }
    /// The XPUB endpoint other nodes list in ``peers=[...]``.
    #[getter]
    fn endpoint(&self) -> &str {
        self.inner.endpoint()
    }
    /// The node's counters as ``{name: count}``, e.g. ``delivered``, ``gaps``, ``fetches_sent``,
    /// ``duplicates``, ``records_lost``, ``stalled_partitions``, ``pauses``, ``malformed``.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, self.inner.stats())
    }
    /// Stops the node (idempotent).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let closed = py.detach(|| self.inner.close());
        crate::python::logbridge::drain(py)?;
        Ok(closed?)
    }
    /// Returns the consumer: ``for record in consumer`` waits for each record and ends when
    /// the consumer is closed.
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    /// Blocks until the next record; stops when the consumer is closed.
    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyRecord>> {
        match self.take(py, 1, None) {
            Ok(ds) => self
                .names
                .records(py, ds)?
                .into_iter()
                .next()
                .ok_or_else(|| PyStopIteration::new_err(())),
            // A clean close ends the loop; a node thread that failed raises its
            // NodeError (it must not look like the end of the stream).
            Err(e) if matches!(self.inner.check(), Err(Error::Closed)) => {
                drop(e);
                Err(PyStopIteration::new_err(()))
            }
            Err(e) => Err(e),
        }
    }
    /// Returns the consumer, for ``with Consumer(...) as consumer:``.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    /// Closes the consumer on leaving the ``with`` block; an exception propagates.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}

/// A record value: ``bytes`` (the fast path), or any bytes-like object
/// (``bytearray``, ``memoryview``, ``pyarrow.Buffer``...). A ``str`` gets a
/// TypeError that says to encode it.
/// The `n + 1` offsets of an Arrow binary array from their raw buffer.
fn arrow_offsets(raw: &[u8], large: bool, what: &str) -> PyResult<Vec<i64>> {
    let width = if large { 8 } else { 4 };
    if raw.len() % width != 0 {
        return Err(PyValueError::new_err(format!(
            "{what} holds {} bytes, not a whole number of {width}-byte offsets \
             (large={large})",
            raw.len()
        )));
    }
    Ok(raw
        .chunks_exact(width)
        .map(|c| match c.try_into() {
            Ok(b) => i64::from_ne_bytes(b),
            Err(_) => i64::from(i32::from_ne_bytes(c.try_into().expect("width is 4"))),
        })
        .collect())
}

/// The offsets of `topic`'s partitions at time `t` (ms), as the stores
/// answer a TIME-QUERY (10 s to find one, 0.5 s to settle).
fn time_offsets(
    node: &crate::node::NodeConfig,
    topic: &str,
    t: u64,
) -> PyResult<Vec<(String, u64)>> {
    let got = crate::node::fetcher::offsets_for_time::<PyErr>(
        node,
        topic,
        t,
        Duration::from_secs(10),
        Duration::from_millis(500),
        check_signals,
    )?;
    Ok(got.into_iter().collect())
}

/// A record's key as Python gives it: None, or bytes (any bytes-like object).
fn key_arg(py: Python<'_>, key: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<u8>>> {
    match key {
        None => Ok(None),
        Some(k) if k.is_none() => Ok(None),
        Some(k) => value_bytes(py, k, "key").map(Some),
    }
}

fn value_bytes(py: Python<'_>, v: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    with_value(py, v, what, <[u8]>::to_vec)
}

/// Calls `f` with the bytes of a value (`bytes` or any bytes-like object).
fn with_value<R>(
    py: Python<'_>,
    v: &Bound<'_, PyAny>,
    what: &str,
    f: impl FnOnce(&[u8]) -> R,
) -> PyResult<R> {
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(f(b.as_bytes()));
    }
    if v.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} takes bytes, got a str: encode it first, e.g. value.encode()"
        )));
    }
    let type_name = || {
        v.get_type()
            .name()
            .map_or_else(|_| "?".into(), |n| n.to_string())
    };
    match ByteView::get(py, v, what) {
        Ok(view) => Ok(f(view.bytes())),
        Err(e) if e.is_instance_of::<PyTypeError>(py) => Err(PyTypeError::new_err(format!(
            "{what} takes bytes or a bytes-like object (bytearray, memoryview), got {}",
            type_name()
        ))),
        Err(e) => Err(e),
    }
}

/// The bytes of an object with the buffer protocol, whatever its item format
/// (`B`, `b` as pyarrow exports its buffers, `i` of an `array('i')`, a numpy
/// array's): a record value is its raw bytes. Taken as a simple (C-contiguous,
/// byte-addressed) buffer.
struct ByteView(Box<pyo3::ffi::Py_buffer>);

impl ByteView {
    fn get(py: Python<'_>, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Self> {
        // SAFETY: a zeroed Py_buffer is what PyObject_GetBuffer fills in.
        let mut view = Box::new(unsafe { std::mem::zeroed::<pyo3::ffi::Py_buffer>() });
        // SAFETY: `obj` is a live object (the GIL is held); on success the
        // buffer is released by `Drop`.
        let rc = unsafe {
            pyo3::ffi::PyObject_GetBuffer(obj.as_ptr(), &mut *view, pyo3::ffi::PyBUF_SIMPLE)
        };
        if rc != 0 {
            let err = PyErr::fetch(py);
            if err.is_instance_of::<pyo3::exceptions::PyBufferError>(py) {
                return Err(PyValueError::new_err(format!(
                    "{what} must be a contiguous buffer ({err}); copy it first, e.g. bytes(value)"
                )));
            }
            return Err(PyTypeError::new_err(format!(
                "{what} must be a bytes-like buffer (bytes, memoryview, pyarrow.Buffer)"
            )));
        }
        Ok(Self(view))
    }

    fn bytes(&self) -> &[u8] {
        let len = usize::try_from(self.0.len).unwrap_or(0);
        if len == 0 || self.0.buf.is_null() {
            return &[];
        }
        // SAFETY: a simple buffer is `len` contiguous bytes at `buf`, pinned
        // by the exporter until `Drop` releases it.
        unsafe { std::slice::from_raw_parts(self.0.buf.cast::<u8>(), len) }
    }
}

impl Drop for ByteView {
    fn drop(&mut self) {
        // SAFETY: the buffer was filled by a successful PyObject_GetBuffer and
        // is released once, with the GIL held.
        Python::attach(|_| unsafe { pyo3::ffi::PyBuffer_Release(&mut *self.0) });
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTower>()?;
    m.add_class::<PyProducer>()?;
    m.add_class::<PyConsumer>()?;
    Ok(())
}
