//! `dafka.Consumer`: a thin PyO3 class over [`Consumer`], and its options.

use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyStopIteration, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use super::args::{opt_seconds, seconds, unsigned, PartitionsCallback, StartOffsets, TimeMs};
use super::discovery::{Discovery, Hwm};
use super::options::{options, Options};
use super::record::{PartitionNames, PyRecord};
use super::wait::{check_signals, stats_dict, SLICE};
use crate::error::Error;
use crate::node::consumer::GroupEvent;
use crate::node::{Consumer, ConsumerConfig, Delivery, OffsetReset};

/// The consumers' defaults (`ConsumerConfig::default()`, the core's).
static CONSUMER: LazyLock<ConsumerConfig> = LazyLock::new(ConsumerConfig::default);

options! {
    /// `dafka.Consumer`'s options.
    pub(crate) struct ConsumerOptions {
        ..discovery: Discovery,
        ..hwm: Hwm,
        /// Where a partition seen for the first time starts, ``"earliest"`` or ``"latest"``,
        /// unless ``start_offsets`` lists it: ``"earliest"`` at offset 0, fetching
        /// everything the producer and stores still hold; ``"latest"`` at the first record
        /// seen (or after the first HEAD seen). Every producer run is a new partition, found
        /// only once discovery connects to it, so ``"latest"`` skips the first records of
        /// partitions born while the consumer runs. With ``start_offsets`` given, every
        /// partition it does not name starts at ``"earliest"``, whatever this says.
        offset_reset: OffsetReset = CONSUMER.offset_reset,
        /// Seconds after which an unanswered FETCH is sent again; must be > 0. After
        /// ``give_up_fetches`` unanswered tries the interval doubles per retry, up to 16
        /// times this.
        fetch_retry: Duration = CONSUMER.fetch_retry,
        /// Most records one FETCH asks for; must be > 0.
        max_fetch: u32 = CONSUMER.max_fetch,
        /// Out-of-order records held per partition while a gap is fetched (and at most 64
        /// MiB); must be > 0. Records past the bound are fetched again once the gap fills.
        max_pending: usize = CONSUMER.max_pending,
        /// Records received but not yet returned to the application; must be > 0. While it
        /// is full, the node stops reading (counted in ``stats()["pauses"]``); what the
        /// producers drop meanwhile is fetched once it reads again.
        max_buffered: usize = CONSUMER.max_buffered,
        /// The same bound in bytes of values (67108864 is 64 MiB); must be > 0. One record
        /// is taken however large.
        max_buffered_bytes: usize = CONSUMER.max_buffered_bytes,
        /// FETCH rounds in a row, each answered from past a gap and none with any of it,
        /// before the gap is skipped (retention deleted it). Skipped records count in
        /// ``stats()["records_lost"]``. Must be > 0.
        give_up_fetches: u32 = CONSUMER.give_up_fetches,
        /// ``{partition: next offset}`` to start at, e.g. a saved ``positions()``. It
        /// overrides ``offset_reset`` for the partitions listed; given (even empty), the
        /// partitions it does not name (born while the consumer was away) start at their
        /// first record held, whatever ``offset_reset`` says.
        start_offsets: Option<StartOffsets> = None,
        /// Seconds after which a partition caught up and not heard of keeps only its
        /// position, not its protocol state; must be > 0.
        idle_after: Duration = CONSUMER.idle_after,
        /// Seconds (691200.0 is 8 days) after which the position of a partition not heard of
        /// is forgotten, unless it was seeked; heard of again, it starts by
        /// ``offset_reset``. Keep it above the stores' retention (168 hours by default).
        /// None keeps every position; 0 is refused.
        forget_after: Option<Duration> = CONSUMER.forget_after,
        /// Where every partition the stores hold starts: at its first record at or after
        /// this time (ms since the epoch, a ``datetime``, or an ISO 8601 str such as
        /// ``"2026-11-27T09:00"``, naive times being local), as ``offsets_for_times`` finds
        /// it (the constructor waits for it), and every other partition at its start
        /// (``offset_reset`` is then ``"earliest"``); ``start_offsets`` still wins for the
        /// partitions it lists. Raises ``FetchTimeoutError`` when no store answers within 10
        /// seconds.
        start_time: Option<TimeMs> = None,
        /// The consumer group to join (1 to 255 bytes, docs/groups.md): the consumers of one
        /// group share the topics' partitions, each read by one live member, found by the
        /// same discovery as every node (no coordinator), and commit their positions to the
        /// stores. A member starts a partition at the group's last commit, one the group
        /// never committed by ``offset_reset``. None reads every partition. In a secure
        /// cluster the certificate must allow every topic (docs/groups.md, "Security").
        group: Option<String> = None,
        /// In a group, whether what ``poll`` returned is committed every
        /// ``auto_commit_interval``; False commits only on ``commit()`` (and where a
        /// partition moves to another member, or the consumer closes).
        enable_auto_commit: bool = true,
        /// In a group, seconds between commits of what ``poll`` returned; None commits only
        /// when a partition moves to another member and on ``commit()``. Must be > 0.
        auto_commit_interval: Option<Duration> = CONSUMER.auto_commit_interval,
        /// In a group, seconds ``commit(asynchronous=False)`` and ``committed()`` wait for the
        /// stores before raising ``CommitTimeoutError``; must be > 0.
        commit_timeout: Duration = Duration::from_secs(10),
        /// In a group, called as ``on_assign(partitions)`` with the list of ``(topic,
        /// partition)`` this member starts reading, from ``poll`` (and ``poll_many``,
        /// iteration) in the application's thread, before it returns records of them. An
        /// exception it raises propagates out of ``poll``, which then returned no record
        /// (none is committed past what it returned before); the changes after it are
        /// called by the next ``poll``.
        on_assign: Option<PartitionsCallback> = None,
        /// In a group, called as ``on_revoke(partitions)`` with the ``(topic, partition)``
        /// given to other members, from ``poll`` in the application's thread, before any
        /// ``on_assign`` that came after. They were already stopped and their positions
        /// committed (where the next owner starts): ``poll`` returns none of their records
        /// after this.
        on_revoke: Option<PartitionsCallback> = None,
    }
}

/// A consumer of one or more topics.
///
/// Receives the records of every partition (producer) of ``topics`` that it finds through its
/// towers and peers. It returns them in offset order per partition and drops duplicates. Gaps are
/// fetched from the producer and the stores. With ``group=`` it is a member of a consumer group:
/// the members share the partitions and commit their positions to the stores. Without one,
/// Dafka keeps no consumer offsets on the network: to resume after a restart, save
/// ``positions()`` and pass them as ``start_offsets``. The node runs
/// on its own thread; calls that wait release the GIL and can be interrupted with Ctrl-C.
///
/// Parameters
/// ----------
/// topics : list of str
///     The topics to read, at least one, each 1 to 255 bytes.
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
///     ``cert`` or ``trust`` cannot be read: ``FileNotFoundError``, ``PermissionError``, ...
///     (the error names the path).
/// SecurityError
///     ``cert`` is malformed or holds no secret key (``NAME.key`` given for ``NAME.key_secret``).
/// NodeError
///     The node cannot start, e.g. its ``bind`` endpoint is in use.
#[pyclass(module = "dafka._native", name = "Consumer", frozen)]
struct PyConsumer {
    inner: Consumer,
    /// Shown by `dafka.serve_metrics` until closed.
    metrics: crate::metrics::Registration,
    names: PartitionNames,
    /// The node settings, for the time queries of `seek_to_time`.
    node: crate::node::NodeConfig,
    /// A group member's: how long to wait for the stores; its callbacks.
    commit_timeout: Duration,
    on_assign: Option<Py<PyAny>>,
    on_revoke: Option<Py<PyAny>>,
}

impl PyConsumer {
    fn take(&self, py: Python<'_>, max: usize, timeout: Option<f64>) -> PyResult<Vec<Delivery>> {
        if max == 0 {
            return Err(PyValueError::new_err("max_records must be >= 1"));
        }
        let deadline = opt_seconds("timeout", timeout)?.map(|t| Instant::now() + t);
        // Before any record is taken: a Ctrl-C raised while logging loses none.
        crate::python::logbridge::drain(py)?;
        loop {
            // A group's callbacks before its records: the consumer returns
            // none while changes wait for them, so one that raises loses none.
            self.group_callbacks(py)?;
            let v = py.detach(|| -> PyResult<Vec<Delivery>> {
                let mut v = Vec::new();
                loop {
                    let slice = match deadline {
                        Some(d) => SLICE.min(d.saturating_duration_since(Instant::now())),
                        None => SLICE,
                    };
                    self.inner.poll_slice(max, slice, &mut v)?;
                    if !v.is_empty()
                        || deadline.is_some_and(|d| Instant::now() >= d)
                        || self.inner.has_group_events()
                    {
                        return Ok(v);
                    }
                    check_signals()?;
                }
            })?;
            if !v.is_empty() || !self.inner.has_group_events() {
                return Ok(v);
            }
        }
    }
}

impl PyConsumer {
    /// Calls `on_revoke` and `on_assign` for the group's changes since the
    /// last call, in order (revocations of a turn before its assignments).
    /// If one raises, the changes after it are put back for the next call.
    fn group_callbacks(&self, py: Python<'_>) -> PyResult<()> {
        if self.inner.group().is_none() {
            return Ok(());
        }
        let mut events = self.inner.take_group_events().into_iter();
        while let Some(e) = events.next() {
            let (cb, parts) = match e {
                GroupEvent::Assigned(p) => (&self.on_assign, p),
                GroupEvent::Revoked(p) => (&self.on_revoke, p),
            };
            if let Some(cb) = cb {
                if let Err(err) = cb.call1(py, (parts,)) {
                    self.inner.requeue_group_events(events.collect());
                    return Err(err);
                }
            }
        }
        Ok(())
    }

    /// `offsets` as `[(partition, offset)]`: a dict `{partition: offset}`.
    fn offsets_arg(offsets: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<(String, u64)>>> {
        let Some(o) = offsets.filter(|o| !o.is_none()) else {
            return Ok(None);
        };
        let Ok(d) = o.cast::<PyDict>() else {
            return Err(PyTypeError::new_err(
                "offsets must be a dict {partition: next offset to read}, e.g. positions(), \
                 or None for what poll returned",
            ));
        };
        let mut v = Vec::with_capacity(d.len());
        for (p, off) in d.iter() {
            let p: String = p.extract().map_err(|_| {
                PyTypeError::new_err("offsets: each key must be a partition name (str)")
            })?;
            let off: i128 = off.extract().map_err(|_| {
                PyTypeError::new_err(format!("offsets[{p:?}] must be an int offset"))
            })?;
            v.push((p.clone(), unsigned(&format!("offsets[{p:?}]"), off)?));
        }
        Ok(Some(v))
    }
}

#[pymethods]
impl PyConsumer {
    #[new]
    #[pyo3(signature = (topics, **options))]
    fn new(
        py: Python<'_>,
        topics: &Bound<'_, PyAny>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let o = ConsumerOptions::parse("Consumer", options)?;
        if o.group.is_none() {
            let given = [
                ("on_assign", o.on_assign.is_some()),
                ("on_revoke", o.on_revoke.is_some()),
                ("enable_auto_commit", !o.enable_auto_commit),
            ];
            if let Some((name, _)) = given.iter().find(|(_, g)| *g) {
                return Err(super::errors::Exc::Config.err(format!(
                    "{name} is for consumer groups: give group= too, or leave {name} out"
                )));
            }
        }
        if o.commit_timeout.is_zero() {
            return Err(super::errors::Exc::Config
                .err("commit_timeout must be > 0 seconds (how long a synchronous commit waits)"));
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
        // Resuming: the partitions the saved positions do not name were born
        // while this consumer was away (every producer run is a partition),
        // so they start at their first record, whatever `offset_reset` says.
        let resuming = o.start_offsets.is_some();
        let mut cfg = ConsumerConfig {
            node: o.discovery.node_config(o.hwm)?,
            offset_reset: o.offset_reset,
            fetch_retry: o.fetch_retry,
            max_fetch: o.max_fetch,
            max_pending: o.max_pending,
            max_buffered: o.max_buffered,
            max_buffered_bytes: o.max_buffered_bytes,
            give_up_fetches: o.give_up_fetches,
            start_offsets: o.start_offsets.map(|s| s.0).unwrap_or_default(),
            idle_after: o.idle_after,
            forget_after: o.forget_after,
            group: o.group,
            auto_commit_interval: o.auto_commit_interval.filter(|_| o.enable_auto_commit),
        };
        if resuming {
            cfg.offset_reset = OffsetReset::Earliest;
        }
        if let Some(TimeMs(t)) = o.start_time {
            // Where each partition the stores hold reaches the time; the
            // others (none of their records stored yet) from their start.
            let given: std::collections::HashSet<String> =
                cfg.start_offsets.iter().map(|(p, _)| p.clone()).collect();
            for topic in &topics {
                let got = py.detach(|| time_offsets(&cfg.node, topic, t))?;
                cfg.start_offsets
                    .extend(got.into_iter().filter(|(p, _)| !given.contains(p)));
            }
            cfg.offset_reset = OffsetReset::Earliest;
        }
        let node = cfg.node.clone();
        let inner = py.detach(|| Consumer::new(&topics, cfg))?;
        Ok(Self {
            metrics: crate::metrics::register(inner.metrics_source()),
            inner,
            names: PartitionNames::default(),
            node,
            commit_timeout: o.commit_timeout,
            on_assign: o.on_assign.map(|c| c.0),
            on_revoke: o.on_revoke.map(|c| c.0),
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
                    return Err(super::errors::Exc::UnknownPartition.err(format!(
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
        // Changes that came meanwhile keep the records back: their
        // callbacks first, then one more try.
        for _ in 0..2 {
            self.group_callbacks(py)?;
            self.inner.try_poll(max, &mut ds)?;
            if !ds.is_empty() {
                break;
            }
        }
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
    /// In a group: commits ``offsets`` (``{partition: next offset to read}``, each a partition
    /// ``assignment()`` lists), or with None the position of each partition it reads that
    /// ``poll`` moved since the last commit (auto-commit does the same every
    /// ``auto_commit_interval``). ``asynchronous=False`` waits until the stores confirm
    /// it (every store the member knows, or any for 200 ms), raising ``CommitTimeoutError``
    /// after ``commit_timeout``. ``ConfigError`` without a group or for a partition it does
    /// not read, ``TypeError`` for offsets that are no such dict, ``ValueError`` for a
    /// negative offset.
    #[pyo3(signature = (offsets = None, *, asynchronous = true))]
    fn commit(
        &self,
        py: Python<'_>,
        offsets: Option<&Bound<'_, PyAny>>,
        asynchronous: bool,
    ) -> PyResult<()> {
        let offsets = Self::offsets_arg(offsets)?;
        if asynchronous {
            return Ok(self.inner.commit_async(offsets.as_deref())?);
        }
        let timeout = self.commit_timeout;
        py.detach(|| {
            self.inner
                .commit_sync::<PyErr>(offsets.as_deref(), timeout, check_signals)
        })
    }
    /// In a group: the group's last commit of each of ``partitions`` (a list of partition
    /// names, None for ``assignment()``'s) as the stores answer: ``{partition: offset}``,
    /// None for one never committed. Raises ``CommitTimeoutError`` when no store answers
    /// within ``commit_timeout``, ``ConfigError`` without a group.
    #[pyo3(signature = (partitions = None))]
    fn committed(
        &self,
        py: Python<'_>,
        partitions: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<HashMap<String, Option<u64>>> {
        let parts = match partitions.filter(|p| !p.is_none()) {
            None => self
                .inner
                .assignment()
                .into_iter()
                .map(|(_, p)| p)
                .collect(),
            Some(p) => partition_list("committed", p)?,
        };
        let timeout = self.commit_timeout;
        let got = py.detach(|| {
            self.inner
                .committed::<PyErr>(&parts, timeout, check_signals)
        })?;
        Ok(got.into_iter().collect())
    }
    /// Stops returning records of ``partitions`` (a list of partition names) until
    /// ``resume``: what ``poll`` has not returned of them is dropped and fetched again on
    /// resuming, from where ``poll`` stopped. Each must be one it reads (a group member's
    /// ``assignment()``, else one of ``positions()``), else ``ConfigError``. A partition
    /// given to another member is no longer paused.
    fn pause(&self, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        Ok(self.inner.pause(&partition_list("pause", partitions)?)?)
    }
    /// Returns records of paused ``partitions`` again, from where ``poll`` stopped; others
    /// are left as they are.
    fn resume(&self, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        Ok(self.inner.resume(&partition_list("resume", partitions)?)?)
    }
    /// The partitions paused, sorted.
    fn paused(&self) -> Vec<String> {
        self.inner.paused()
    }
    /// In a group: the partitions this member reads, as ``[(topic, partition)]`` sorted (empty
    /// without a group, and until the group settled).
    fn assignment(&self) -> Vec<(String, String)> {
        self.inner.assignment()
    }
    /// In a group: the live members this one counts, itself included (0 without a group).
    fn group_members(&self) -> usize {
        self.inner.group_members()
    }
    /// The consumer group it is a member of, or None.
    #[getter]
    fn group(&self) -> Option<String> {
        self.inner.group().map(str::to_string)
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
    /// The node's counters as ``{name: count}``, e.g. ``delivered``, ``records_received``
    /// and ``bytes_received`` (the bytes of their bodies: metadata and value), ``gaps``,
    /// ``fetches_sent``, ``duplicates``, ``records_lost``, ``stalled_partitions``, ``pauses``,
    /// ``malformed``.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, self.inner.stats())
    }
    /// Stops the node (idempotent).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.metrics.end();
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
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}

/// A list of partition names given to `what`: a `str` alone is refused
/// (it would be read as its characters).
fn partition_list(what: &str, ob: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if ob.is_instance_of::<PyString>() || ob.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(format!(
            "{what} takes a list of partition names, e.g. {what}([record.partition])"
        )));
    }
    ob.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} takes a list of partition names (str), e.g. {what}([record.partition])"
        ))
    })
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

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyConsumer>()
}
