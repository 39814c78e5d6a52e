//! The producer: one partition (its address) of one topic. [`Producer`] is
//! the handle, whose `send` is an enqueue onto the node thread. What the
//! producer decides (offsets, the retransmit buffer, ACK accounting and
//! `min_acks`, FETCH and GET-HEADS answers, HEAD timing) is the pure
//! [`ProducerState`] in [`state`]; `run.rs` is the event loop over its sockets,
//! which publishes RECORDs.

mod routes;
mod run;
pub mod state;

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::error::{Error, Result};
use crate::node::actor::Actor;
use crate::node::batch::Batch;
use crate::node::config::ProducerConfig;
use crate::node::stats::Stats;

pub use state::{AckReach, ProducerState};

/// The next offset of the partition a producer of `seed` writes
/// ([`ProducerConfig::address_seed`]), as the stores (and a live producer of
/// it) report it: 0 for a partition none holds. This is where a producer
/// that goes on with the partition starts (`first_offset`), so that its
/// records follow the ones stored instead of being dropped as duplicates of
/// them. Asks as a read client does ([`crate::node::fetcher::heads`]): a
/// [`Error::Timeout`] when no store answers within `timeout`. Not in secure
/// mode, where a producer's role reads nothing ([`Error::Config`]).
pub fn partition_next<E: From<Error>>(
    node: &crate::node::NodeConfig,
    topic: &str,
    seed: &[u8],
    timeout: Duration,
    check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<u64, E> {
    crate::node::config::check_name("topic", topic)?;
    if node.security.is_some() {
        return Err(Error::Config(
            "a secure producer with address_seed needs first_offset: its certificate's role \
             (producer) may not ask the stores where its partition ends; ask with a \
             consumer-role certificate (dafka.heads(topic, cert=..., trust=...)[address]) \
             and pass that, or 0 for a new partition"
                .into(),
        )
        .into());
    }
    let address = node.seeded_address(seed)?;
    let heads = crate::node::fetcher::heads(node, topic, timeout, HEADS_SETTLE, check)?;
    Ok(heads.get(&address).copied().unwrap_or(0))
}

/// How long [`partition_next`] waits for more answers after the first peer
/// that answers connected (as the read clients' default `settle`).
const HEADS_SETTLE: Duration = Duration::from_millis(500);

/// Records sent one at a time gather in batches of up to this many bytes
/// before the node thread takes them (sooner if it is idle).
pub(crate) const COALESCE: usize = 64 << 10;

/// How long the node thread naps, when nobody listens live and records wait
/// in [`Unsent`], before it takes them without being woken
/// ([`Unsent::napping`]).
pub(crate) const NAP: Duration = Duration::from_millis(2);

pub(super) enum Cmd {
    /// Take [`Unsent::batch`] if its generation is still this one.
    Take(u64),
    Many(Batch),
    Connect(String),
}

/// Records sent one at a time and not yet taken by the node thread: `send`
/// copies a value here instead of allocating it and queueing a command.
/// Every hand-over happens under this lock, so the node thread receives the
/// records in offset order.
#[derive(Debug, Default)]
struct Unsent {
    /// The offset the next record sent gets.
    next: u64,
    batch: Batch,
    /// Bumped at every hand-over of `batch`: a [`Cmd::Take`] of an older
    /// generation (its records went with a later command) takes nothing.
    gen: u64,
    /// Set by `close` before it stops the node thread: no record is taken
    /// from then on, so the thread's last drain is bounded and takes every
    /// record a `send` returned an offset for.
    closed: bool,
    /// Set by the node thread before each poll (under this lock): nobody
    /// listens live and records flow (it took some this turn, or some wait
    /// here), so the thread polls for at most
    /// [`NAP`] and then takes them ([`Unsent::take`]) unwoken. Meanwhile
    /// `send` queues no [`Cmd::Take`] and wakes nothing: a record nobody
    /// waits for costs no syscall and no context switch (without this, the
    /// idle thread took each batch as soon as it began, and every few
    /// records paid a wake: issue 37, where `send`'s rate went).
    napping: bool,
}

impl Unsent {
    /// Hands `batch` over: the caller sends it as [`Cmd::Many`].
    fn hand_over(&mut self) -> Batch {
        self.gen += 1;
        std::mem::take(&mut self.batch)
    }

    /// The node thread's take of the records waiting, if any (whether or
    /// not a [`Cmd::Take`] is on its way for them).
    fn take(&mut self) -> Option<Batch> {
        (!self.batch.is_empty()).then(|| self.hand_over())
    }
}

/// What the handle and the node thread share. The counters (`stats`,
/// written by the node thread at every turn) and the lock over the records
/// `send` copies (`unsent`, taken by `send` and by the node thread) each
/// have cache lines of their own, apart from the release state both threads
/// touch. The records' bytes are on the heap either way.
#[derive(Debug, Default)]
pub struct ProducerShared {
    unacked_bytes: AtomicUsize,
    /// Highest released offset, -1 for none.
    acked: AtomicI64,
    lock: Mutex<()>,
    cv: Condvar,
    pub stats: CachePadded<Stats>,
    /// [`ProducerState::countable_stores`]: the stores connected now whose
    /// ACKs can be counted apart.
    stores_seen: AtomicUsize,
    unsent: CachePadded<Mutex<Unsent>>,
}

impl crate::metrics::HasStats for ProducerShared {
    fn stats(&self) -> &Stats {
        &self.stats
    }
}

impl ProducerShared {
    fn notify(&self) {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.cv.notify_all();
    }

    fn unsent(&self) -> std::sync::MutexGuard<'_, Unsent> {
        self.unsent.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait(&self, slice: Duration) {
        let g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self.cv.wait_timeout(g, slice);
    }
}

/// A running producer. `send` never blocks while the buffer has room.
pub struct Producer {
    actor: Actor<Cmd>,
    shared: Arc<ProducerShared>,
    max_bytes: usize,
    /// `max_record_bytes`: larger values are refused.
    max_record: usize,
    address: String,
    topic: String,
    endpoint: String,
}

const SLICE: Duration = Duration::from_millis(100);

/// What a record carries beside its value: a key, headers (in order,
/// repeats allowed) and its create time (ms since the Unix epoch; None: the
/// time it is sent).
#[derive(Debug, Clone, Copy, Default)]
pub struct Extra<'a> {
    pub key: Option<&'a [u8]>,
    pub headers: &'a [(&'a str, &'a [u8])],
    pub timestamp: Option<u64>,
}

impl Extra<'_> {
    /// The bytes a record of `value` with this takes (its body).
    pub fn body_len(&self, value: &[u8]) -> usize {
        crate::meta::encoded_len(self.key, self.headers) + value.len()
    }
}

/// The size `max_record_bytes` bounds: the value, the key and the headers
/// (as encoded), not the fixed flags and timestamp every record has.
pub fn record_size(body_len: usize) -> usize {
    body_len.saturating_sub(crate::meta::PLAIN_LEN)
}

impl Producer {
    /// Starts the node thread; returns once the XPUB is bound.
    pub fn new(topic: &str, cfg: ProducerConfig) -> Result<Self> {
        cfg.validate()?;
        crate::node::config::check_name("topic", topic)?;
        let address = match &cfg.address_seed {
            Some(seed) => cfg.node.seeded_address(seed)?,
            None => cfg.node.new_address()?,
        };
        let first = cfg.first_offset;
        let shared = Arc::new(ProducerShared {
            acked: AtomicI64::new(i64::try_from(first).unwrap_or(i64::MAX) - 1),
            ..Default::default()
        });
        shared.unsent().next = first;
        let ctx = zmq::Context::new();
        let (t, a, sh) = (topic.to_string(), address.clone(), shared.clone());
        let (max_bytes, max_record) = (cfg.max_unacked_bytes, cfg.max_record_bytes);
        let (actor, endpoint) =
            Actor::spawn("dafka-producer", &ctx.clone(), move |inbox, ready| {
                run::run(inbox, ready, &ctx, cfg, &t, &a, &sh)
            })?;
        Ok(Self {
            actor,
            shared,
            max_bytes,
            max_record,
            address,
            topic: topic.to_string(),
            endpoint,
        })
    }

    pub fn address(&self) -> &str {
        &self.address
    }
    pub fn topic(&self) -> &str {
        &self.topic
    }
    /// The XPUB endpoint (what `peers=[...]` of other nodes names).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }
    /// What a metrics scrape reads of this producer.
    pub fn metrics_source(&self) -> crate::metrics::Source {
        let kind = crate::metrics::Kind::Producer;
        crate::metrics::Source::new(
            kind,
            &self.address,
            Some(self.topic.as_str()),
            self.shared.clone(),
        )
    }

    /// Stores connected now whose ACKs this producer can count apart
    /// ([`ProducerState::countable_stores`]): each of this project's stores
    /// (known by its subscription to every RECORD-BATCH), plus one for all
    /// the other stores together (C-reference ones, whose ACKs carry no
    /// address), seen on the XPUB, less those that left.
    pub fn stores_seen(&self) -> usize {
        self.shared.stores_seen.load(SeqCst)
    }

    /// Waits until `n` stores have connected ([`Producer::stores_seen`]) or
    /// `timeout` passes; returns how many have. Records sent before a store
    /// connects are not lost (it fetches them from this producer's buffer),
    /// but cost a second transfer: a producer about to send a burst waits here.
    pub fn wait_for_stores(&self, n: usize, timeout: Duration) -> Result<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            self.actor.check()?;
            let seen = self.stores_seen();
            let left = deadline.saturating_duration_since(Instant::now());
            if seen >= n || left.is_zero() {
                return Ok(seen);
            }
            self.shared.wait(SLICE.min(left));
        }
    }

    /// Highest offset released by ACKs (or sent, with `min_acks = 0`).
    pub fn acked_offset(&self) -> Option<u64> {
        u64::try_from(self.shared.acked.load(SeqCst)).ok()
    }

    /// Offsets handed out so far (the next `send` gets this one).
    pub fn next_offset(&self) -> u64 {
        self.shared.unsent().next
    }

    pub fn unacked_bytes(&self) -> usize {
        self.shared.unacked_bytes.load(SeqCst)
    }

    /// Reserves buffer room for `n` bytes if it fits (an empty buffer always
    /// takes one batch, however large).
    fn try_reserve(&self, n: usize) -> bool {
        let u = &self.shared.unacked_bytes;
        let mut cur = u.load(SeqCst);
        loop {
            if cur != 0 && cur.saturating_add(n) > self.max_bytes {
                return false;
            }
            match u.compare_exchange_weak(cur, cur + n, SeqCst, SeqCst) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    fn reserve<E: From<Error>>(
        &self,
        n: usize,
        timeout: Option<Duration>,
        check: &mut impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            self.actor.check()?;
            if self.try_reserve(n) {
                return Ok(());
            }
            let now = Instant::now();
            if let Some(d) = deadline {
                if now >= d {
                    return Err(Error::BufferFull {
                        unacked: self.unacked_bytes(),
                        max: self.max_bytes,
                        waited: timeout.unwrap_or_default(),
                    }
                    .into());
                }
                self.shared.wait(SLICE.min(d - now));
            } else {
                self.shared.wait(SLICE);
            }
            check()?;
        }
    }

    /// Publishes one record (neither key nor headers, created now); returns
    /// its offset. Blocks while the buffer is full, up to `timeout` (None =
    /// forever), calling `check` every 100 ms.
    pub fn send_with<E: From<Error>>(
        &self,
        value: &[u8],
        timeout: Option<Duration>,
        check: impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<u64, E> {
        self.send_record_with(value, &Extra::default(), timeout, check)
    }

    /// [`Producer::send_with`] of a record with a key, headers or a create
    /// time of its own ([`Extra`]). The key and headers count against
    /// `max_record_bytes` with the value.
    pub fn send_record_with<E: From<Error>>(
        &self,
        value: &[u8],
        extra: &Extra<'_>,
        timeout: Option<Duration>,
        mut check: impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<u64, E> {
        let n = extra.body_len(value);
        self.check_size(record_size(n))?;
        self.reserve(n, timeout, &mut check)?;
        Ok(self.push(value, extra, n)?)
    }

    /// Refuses a value over `max_record_bytes`, saying what to do.
    fn check_size(&self, n: usize) -> Result<()> {
        if n <= self.max_record {
            return Ok(());
        }
        Err(Error::TooLarge {
            size: n,
            max: self.max_record,
        })
    }

    /// Publishes one record if the buffer has room: `Ok(None)` when it is
    /// full (then wait with [`Producer::send_with`]).
    pub fn try_send(&self, value: &[u8]) -> Result<Option<u64>> {
        self.try_send_record(value, &Extra::default())
    }

    /// [`Producer::try_send`] of a record with [`Extra`] metadata.
    pub fn try_send_record(&self, value: &[u8], extra: &Extra<'_>) -> Result<Option<u64>> {
        let n = extra.body_len(value);
        self.check_size(record_size(n))?;
        if !self.try_reserve(n) {
            self.actor.check()?;
            return Ok(None);
        }
        self.push(value, extra, n).map(Some)
    }

    /// Adds a reserved record to the unsent batch: hands the batch over
    /// first if the value does not fit in it, starts a new one (and wakes
    /// the node thread to take it) if it is empty. A batch never grows past
    /// the room it started with, unless for one larger value.
    fn push(&self, value: &[u8], extra: &Extra<'_>, body_len: usize) -> Result<u64> {
        let create_time = extra.timestamp.unwrap_or_else(crate::meta::now_ms);
        let mut p = self.shared.unsent();
        if p.closed {
            return Err(Error::Closed);
        }
        let off = p.next;
        if p.napping {
            // No command tells whether the thread still runs.
            self.actor.check()?;
        }
        if !p.batch.is_empty() && p.batch.bytes() + body_len > COALESCE {
            let b = p.hand_over();
            if p.napping {
                self.actor.send_quiet(Cmd::Many(b))?;
            } else {
                self.actor.send(Cmd::Many(b))?;
            }
        }
        if p.batch.is_empty() {
            p.batch = Batch::with_capacity(0, COALESCE.max(body_len));
            if !p.napping {
                self.actor.send(Cmd::Take(p.gen))?;
            }
        }
        p.batch
            .push_body(create_time, extra.key, extra.headers, value);
        p.next += 1;
        Ok(off)
    }

    /// [`Producer::send_with`] without interruption.
    pub fn send(&self, value: impl AsRef<[u8]>, timeout: Option<Duration>) -> Result<u64> {
        self.send_with(value.as_ref(), timeout, || Ok::<(), Error>(()))
    }

    /// Publishes a batch of bodies ([`crate::meta`]: [`Batch::push_body`]);
    /// returns the offsets of its first and last records
    /// (None for an empty batch). A batch larger than the buffer
    /// (`max_unacked_bytes`) goes in buffer-sized pieces, each reserved in
    /// turn: records another thread sends meanwhile may take offsets between
    /// two pieces, so only then are the batch's offsets not contiguous.
    pub fn send_batch_with<E: From<Error>>(
        &self,
        batch: Batch,
        timeout: Option<Duration>,
        check: impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<Option<(u64, u64)>, E> {
        let pieces = self.send_pieces_with(batch, timeout, check)?;
        Ok(match (pieces.first(), pieces.last()) {
            (Some(&(first, _)), Some(&(start, n))) => Some((first, start + n as u64 - 1)),
            _ => None,
        })
    }

    /// [`Producer::send_batch_with`], returning where each piece of the
    /// batch went: `(first offset, records)`, in the batch's order (one
    /// piece unless the batch is larger than the buffer).
    pub fn send_pieces_with<E: From<Error>>(
        &self,
        batch: Batch,
        timeout: Option<Duration>,
        mut check: impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<Vec<(u64, usize)>, E> {
        // All or nothing: no record of a batch is sent if one is too large.
        self.check_size(record_size(
            batch.iter().map(<[u8]>::len).max().unwrap_or(0),
        ))?;
        let mut pieces = Vec::new();
        for piece in batch.split(self.max_bytes) {
            if piece.is_empty() {
                continue;
            }
            self.reserve(piece.bytes(), timeout, &mut check)?;
            let mut p = self.shared.unsent();
            if p.closed {
                return Err(Error::Closed.into());
            }
            if !p.batch.is_empty() {
                let b = p.hand_over();
                self.actor.send(Cmd::Many(b))?;
            }
            let (first, n) = (p.next, piece.len());
            self.actor.send(Cmd::Many(piece))?;
            p.next += n as u64;
            pieces.push((first, n));
        }
        Ok(pieces)
    }

    /// Publishes a batch of values; returns the last offset (None for an
    /// empty batch).
    pub fn send_many(
        &self,
        values: Vec<Vec<u8>>,
        timeout: Option<Duration>,
    ) -> Result<Option<u64>> {
        let batch = Batch::plain_bodies(&values, crate::meta::now_ms());
        let range = self.send_batch_with(batch, timeout, || Ok::<(), Error>(()))?;
        Ok(range.map(|(_, last)| last))
    }

    /// Records sent but not yet released.
    pub fn outstanding(&self) -> u64 {
        let next = self.next_offset();
        let acked = self.shared.acked.load(SeqCst);
        next.saturating_sub(u64::try_from(acked + 1).unwrap_or(0))
    }

    /// Waits up to `slice` for progress; returns the records still outstanding.
    pub fn wait_flush(&self, slice: Duration) -> Result<u64> {
        self.actor.check()?;
        let n = self.outstanding();
        if n > 0 {
            self.shared.wait(slice);
        }
        Ok(self.outstanding())
    }

    /// Waits until everything sent is released or `timeout` passes; returns
    /// the records still outstanding (0 = all delivered). A record is
    /// released once `min_acks` stores ACKed it, counted apart: this
    /// project's stores by their ADDRESSED-ACKs (or `rfc` ACKs), and all
    /// C-reference stores together as one (their zproto ACKs carry no
    /// address). With `min_acks` above that count nothing is released;
    /// the producer logs a warning once and counts such ACKs in
    /// `stats.min_acks_unreachable`.
    pub fn flush(&self, timeout: Duration) -> Result<u64> {
        let deadline = Instant::now() + timeout;
        loop {
            let n =
                self.wait_flush(SLICE.min(deadline.saturating_duration_since(Instant::now())))?;
            if n == 0 || Instant::now() >= deadline {
                return Ok(n);
            }
        }
    }

    /// Waits until stores ACKed everything sent (as [`Producer::flush`])
    /// or `timeout` passes, calling `check` every 100 ms, then closes
    /// ([`Producer::close`]); returns the records left unacknowledged,
    /// which no node can fetch from this producer any more. A `check` that
    /// fails (Ctrl-C) ends the wait: the producer is closed all the same,
    /// and the error returned.
    pub fn close_after<E: From<Error>>(
        &self,
        timeout: Duration,
        mut check: impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<u64, E> {
        let deadline = Instant::now() + timeout;
        let mut waited = Ok(());
        while self.actor.check().is_ok() && self.outstanding() > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.shared.wait(SLICE.min(left));
            if let Err(e) = check() {
                waited = Err(e);
                break;
            }
        }
        self.close()?;
        waited?;
        Ok(self.outstanding())
    }

    /// `Ok` while the node thread runs.
    pub fn check(&self) -> Result<()> {
        self.actor.check()
    }

    /// Connects to one more peer's XPUB endpoint (static peers added later).
    pub fn connect(&self, endpoint: &str) -> Result<()> {
        crate::node::config::check_peer(endpoint)?;
        self.actor.send(Cmd::Connect(endpoint.to_string()))
    }

    /// Publishes what was sent and stops the node thread. A `send` from
    /// another thread is refused (`Error::Closed`) from now on: the thread
    /// takes only what was sent before, and every offset `send` returned is
    /// published.
    pub fn close(&self) -> Result<()> {
        self.shared.unsent().closed = true;
        let r = self.actor.close();
        self.shared.notify();
        r
    }
}
