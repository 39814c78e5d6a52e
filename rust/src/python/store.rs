//! `dafka.Store`: a store node in-process, over the durable log. A thin PyO3
//! class: argument parsing, GIL release, conversion.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

use super::defaults::DEFAULT;
use super::discovery::Discovery;
use super::errors::Exc;
use super::node::stats_dict;
use crate::log::{FsyncPolicy, RecoveryPolicy};
use crate::node::{Store, StoreConfig};
use crate::python::{opt_unsigned, seconds, unsigned, StrList};

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
/// towers : list of str or None, default None
///     Towers to find peers through, each ``tcp://HOST:IN_PORT,OUT_PORT`` (what ``Tower.endpoint``
///     gives) or ``tcp://HOST:IN_PORT`` (OUT_PORT = IN_PORT + 1). None: no tower.
/// peers : list of str or None, default None
///     Static peers: XPUB endpoints ``tcp://HOST:PORT`` (the port the peer is bound to) to connect
///     to, no tower needed. ``connect(endpoint)`` adds one later.
/// wire : str, default "rfc"
///     The dialect the node sends in: ``"rfc"`` or ``"zproto"`` (the C reference's framing). A
///     node receives both.
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
/// fsync : str, default "interval"
///     When appends are synced: ``"interval"`` (a group commit once ``flush_interval_ms`` passed
///     or ``flush_messages`` records are unsynced), ``"always"`` (a sync whenever records are
///     unsynced and none is running) or ``"never"`` (only when the store closes).
/// flush_interval_ms : int, default 1
///     With ``fsync="interval"``: sync once this many milliseconds passed since the last sync.
/// flush_messages : int, default 100000
///     With ``fsync="interval"``: sync once this many records are unsynced; must be >= 1.
/// segment_bytes : int, default 536870912 (512 MiB)
///     Roll a partition to a new segment file when the active one would pass this size; 48 to
///     2147483648.
/// retain_hours : int or None, default 168
///     Delete segments whose newest record is older than this many hours, the active one too,
///     checked every 60 s; an emptied partition keeps its next offset, parked. None keeps records
///     for good; 0 is refused.
/// retain_bytes : int or None, default None
///     Delete a partition's oldest sealed segments while it holds more bytes than this. None sets
///     no limit.
/// recovery : str, default "tolerate_tail_corruption"
///     What opening does with damage at the end of a partition's last segment:
///     ``"tolerate_tail_corruption"`` cuts it off if no valid record follows it,
///     ``"absolute_consistency"`` cuts off only a torn last record. A partition whose damage
///     recovery refuses is set aside (counted in ``stats()["damaged_partitions"]``).
/// max_record_bytes : int, default 67108864 (64 MiB)
///     Longer records are dropped and counted in ``stats()["dropped_oversize"]``; must be >= 1.
///     Keep it at least the producers' ``max_record_bytes``.
/// fetch_retry : float, default 0.5
///     Seconds after which an unanswered FETCH for a gap is sent again; at least 0.001. After 6
///     unanswered tries the interval doubles per retry, up to 16 times this.
/// max_open_files : int or None, default None
///     Most segment files kept open; the others are reopened on use. None: half the process's
///     open-files limit (whose soft value is raised to the hard one), at least 64. All stores in a
///     process together keep within that half. 0 is refused.
/// forget_parked_hours : int or None, default 720
///     Forget a parked partition (one that retention emptied, kept as its next offset) this many
///     hours after it was parked. None keeps them for good; 0 is refused.
/// advertise_host : str or None, default None
///     Host put in beacons, for a node behind NAT or in a container: peers connect to
///     ``tcp://HOST:PORT``. ``""`` lets the tower use the TCP peer address. None: the bound host,
///     or ``""`` when bound to a wildcard.
/// cert : str or os.PathLike or None, default None
///     Secure mode (CURVE encryption and authentication, docs/security.md): the path of the
///     node's secret certificate, ``NAME.key_secret`` as ``dafka keygen`` writes it, of role
///     ``"store"``. Needs ``trust``. None: plaintext, anyone who reaches the node joins.
/// trust : str or os.PathLike or None, default None
///     Secure mode: the directory of trusted public certificates (``NAME.key``), read again when
///     it changes. Needs ``cert``. A secure node takes only keyed tower and peer endpoints
///     (``...;curve=KEY``, as a secure ``Tower.endpoint`` gives), an insecure one only keyless.
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
///     ``cert`` or ``trust`` cannot be read, e.g. does not exist (the error names the path).
/// SecurityError
///     ``cert`` is malformed or holds no secret key (``NAME.key`` given for ``NAME.key_secret``).
/// NodeError
///     The node cannot start, e.g. its ``bind`` endpoint is in use.
#[pyclass(module = "dafka._native", name = "Store", frozen)]
struct PyStore {
    inner: Store,
    /// As given (a name that is not UTF-8 comes back with surrogate escapes,
    /// as `os.fsdecode` gives it).
    path: std::ffi::OsString,
}

#[pymethods]
impl PyStore {
    #[new]
    #[pyo3(signature = (
        path, *, towers = None, peers = None, wire = DEFAULT.node.wire,
        bind = DEFAULT.node.bind.clone(), beacon_interval = DEFAULT.node.beacon_interval,
        beacon_timeout = DEFAULT.node.beacon_timeout, sndhwm = DEFAULT.node.sndhwm,
        rcvhwm = DEFAULT.node.rcvhwm, fsync = DEFAULT.store.fsync,
        flush_interval_ms = DEFAULT.store.flush_interval_ms,
        flush_messages = DEFAULT.store.flush_messages, segment_bytes = DEFAULT.store.segment_bytes,
        retain_hours = DEFAULT.store.retain_hours, retain_bytes = DEFAULT.store.retain_bytes,
        recovery = DEFAULT.store.recovery, max_record_bytes = DEFAULT.store.max_record_bytes,
        fetch_retry = DEFAULT.store.fetch_retry, max_open_files = DEFAULT.store.max_open_files,
        forget_parked_hours = DEFAULT.store.forget_parked_hours, advertise_host = None,
        cert = None, trust = None
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
        cert: Option<std::path::PathBuf>,
        trust: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        let mut cfg = StoreConfig {
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
            .node_config(crate::security::Role::Store, sndhwm, rcvhwm)?,
            ..StoreConfig::default()
        };
        cfg.log.fsync = fsync.parse::<FsyncPolicy>().map_err(Exc::Config.with())?;
        cfg.log.recovery = recovery
            .parse::<RecoveryPolicy>()
            .map_err(Exc::Config.with())?;
        cfg.log.flush_interval_ms = unsigned("flush_interval_ms", flush_interval_ms)?;
        cfg.log.flush_messages = unsigned("flush_messages", flush_messages)?;
        cfg.log.segment_bytes = unsigned("segment_bytes", segment_bytes)?;
        cfg.log.retain_hours = crate::python::retain_hours(retain_hours)?;
        cfg.log.retain_bytes = opt_unsigned("retain_bytes", retain_bytes)?;
        cfg.log.forget_parked_hours = crate::python::forget_parked_hours(forget_parked_hours)?;
        cfg.log.max_open_files = opt_unsigned("max_open_files", max_open_files)?;
        cfg.state.max_record_bytes = unsigned("max_record_bytes", max_record_bytes)?;
        cfg.state.fetch_retry = seconds("fetch_retry", fetch_retry)?;
        if cfg.state.fetch_retry < Duration::from_millis(1) {
            return Err(Exc::Config.err("fetch_retry must be at least 0.001 s"));
        }
        let inner = py.detach(|| Store::open(&path, cfg))?;
        Ok(Self {
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
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
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
