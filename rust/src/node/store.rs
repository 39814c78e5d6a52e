//! The store node: one thread owning its XPUB, SUB, discovery and its log.
//!
//! It subscribes as RFC 46 says for stores (every RECORD, HEAD, FETCH and
//! GET-HEADS; DIRECT-RECORD and CONSUMER-HELLO addressed to itself), feeds each
//! message to [`StoreLogic`], and sends what that returns. At every loop turn
//! it lets the log group-commit (`sync_if_due`) and then ACKs what became
//! durable, so an ACK never covers a record that could be lost.
//!
//! FETCH answers go out slice by slice between receives. The XPUB is set to
//! not drop (`ZMQ_XPUB_NODROP`): when a requester's queue is full the send
//! fails with EAGAIN, the unsent slice is requeued and retried a little later,
//! so a slow consumer makes the store wait, never buffer without bound.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{channel, sync_channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::error::{Error, Result};
use crate::log::{FsyncPolicy, Log, LogConfig, LogError, SyncBatch, SyncDone};
use crate::node::actor::{Actor, Inbox, Ready, Waker};
use crate::node::batch::Batch;
use crate::node::config::NodeConfig;
use crate::node::out::{poll_timeout, Out};
use crate::node::socket::{new_address, set_int_option, Core, Dest, Frames, Takers};
use crate::node::stats::Stats;
use crate::node::store_logic::{
    PartKey, ReplySlice, StoreCounters, StoreLog, StoreLogic, StoreLogicConfig,
};
use crate::wire::{decode, topic_matches, Message, NodeType, Subscription};

/// Messages handled per loop turn before the loop syncs, ACKs and answers.
const BATCH: usize = 4096;
/// FETCH answer slices sent per turn at most (each is one read of the log).
const REPLY_SLICES: usize = 256;
/// After a storage error, try to recover the log this often.
const RECOVER_EVERY: Duration = Duration::from_secs(1);
/// Asking other stores for their heads: after start-up, shortly after a
/// store connected to us, once more a little later, then this often.
const PEER_HEADS_FIRST: Duration = Duration::from_secs(1);
const PEER_HEADS_JOINED: Duration = Duration::from_millis(100);
const PEER_HEADS_AGAIN: Duration = Duration::from_secs(2);
const PEER_HEADS_EVERY: Duration = Duration::from_secs(60);

/// When the store next asks the other stores for every head they hold
/// (GET-HEADS with an empty topic), so it replicates partitions whose
/// producers are gone: HEADs only come from live producers. Another store
/// connecting to us shows as its catch-all `G` subscription on our XPUB; our
/// own `E<address>` subscription may reach it a moment later than its
/// answer, hence the second ask.
struct PeerHeads {
    next: Instant,
    again: bool,
}

impl PeerHeads {
    fn new(now: Instant) -> Self {
        Self {
            next: now + PEER_HEADS_FIRST,
            again: true,
        }
    }
    fn store_joined(&mut self, now: Instant) {
        self.next = self.next.min(now + PEER_HEADS_JOINED);
        self.again = true;
    }
    /// True (and the next time set) when an ask is due.
    fn due(&mut self, now: Instant) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now
            + if self.again {
                PEER_HEADS_AGAIN
            } else {
                PEER_HEADS_EVERY
            };
        self.again = false;
        true
    }
}

enum Cmd<L: StoreLog> {
    Connect(String),
    /// Runs a read-only query against the log on the node thread.
    Query(Box<dyn FnOnce(&L) + Send>),
}

/// What the handle can read while the node runs.
#[derive(Default)]
pub struct StoreShared {
    pub stats: Stats,
    pub counters: Mutex<StoreCounters>,
    pub last_error: Mutex<Option<String>>,
    /// Storage errors seen (appends or syncs that failed).
    pub storage_errors: AtomicU64,
    /// How long group commits take, when the storage syncs (the durable log).
    pub sync_times: Option<Arc<SyncTimes>>,
    /// Segment files the log holds open.
    pub open_files: AtomicU64,
    /// Partitions the log set aside because they could not be opened.
    pub damaged_partitions: AtomicU64,
    /// Partitions the log parked (no record left; `crate::log::parked`).
    pub parked_partitions: AtomicU64,
    /// Partitions with protocol state beside the log's: those with work
    /// left or a producer heard lately (the others are forgotten).
    pub active_partitions: AtomicU64,
}

/// A running store node over any [`StoreLog`].
pub struct StoreNode<L: StoreLog + Send + 'static> {
    actor: Actor<Cmd<L>>,
    shared: Arc<StoreShared>,
    address: String,
    endpoint: String,
}

impl<L: StoreLog + Send + 'static> StoreNode<L> {
    /// Starts the node thread with `log`; returns once the XPUB is bound.
    pub fn start(address: &str, log: L, node: NodeConfig, logic: StoreLogicConfig) -> Result<Self> {
        node.validate()?;
        let shared = Arc::new(StoreShared {
            sync_times: log.sync_times(),
            ..Default::default()
        });
        let ctx = zmq::Context::new();
        let (a, sh) = (address.to_string(), shared.clone());
        let (actor, endpoint) = Actor::spawn("dafka-store", &ctx.clone(), move |inbox, ready| {
            run(inbox, ready, &ctx, node, logic, &a, log, &sh)
        })?;
        Ok(Self {
            actor,
            shared,
            address: address.to_string(),
            endpoint,
        })
    }

    pub fn address(&self) -> &str {
        &self.address
    }
    /// The XPUB endpoint (what `peers=[...]` of other nodes names).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
    pub fn shared(&self) -> &StoreShared {
        &self.shared
    }
    /// `Ok` while the node thread runs.
    pub fn check(&self) -> Result<()> {
        self.actor.check()
    }
    /// Connects to one more static peer.
    pub fn connect(&self, endpoint: &str) -> Result<()> {
        crate::node::config::check_peer(endpoint)?;
        self.actor.send(Cmd::Connect(endpoint.to_string()))
    }

    /// Runs `f` on the node thread against the log and returns its result.
    pub fn query<T: Send + 'static>(&self, f: impl FnOnce(&L) -> T + Send + 'static) -> Result<T> {
        let (tx, rx) = sync_channel(1);
        self.actor.send(Cmd::Query(Box::new(move |log: &L| {
            let _ = tx.send(f(log));
        })))?;
        rx.recv_timeout(Duration::from_secs(30))
            .map_err(|_| self.actor.check().err().unwrap_or(Error::Closed))
    }

    /// Every (topic, partition) held, with its next offset (parked ones,
    /// with no record left, are not listed; see `crate::log::parked`).
    pub fn heads(&self, topic: Option<Vec<u8>>) -> Result<Vec<(PartKey, u64)>> {
        self.query(move |log| {
            log.partitions(topic.as_deref())
                .into_iter()
                .map(|(t, p)| {
                    let next = log.next_offset(&t, &p).unwrap_or(0);
                    ((t, p), next)
                })
                .collect()
        })
    }

    /// Stops the node: it syncs the log, then the thread exits.
    pub fn close(&self) -> Result<()> {
        self.actor.close()
    }
}

/// Copies the counters and the current storage error (a failing sync wins
/// over an append error) for the handle to read.
fn publish(shared: &StoreShared, logic: &StoreLogic<impl StoreLog>, sync_error: Option<&str>) {
    *shared.counters.lock().unwrap_or_else(|p| p.into_inner()) = logic.counters().clone();
    *shared.last_error.lock().unwrap_or_else(|p| p.into_inner()) =
        sync_error.or(logic.last_error()).map(str::to_string);
    let (files, damaged) = logic.log().files_and_damaged();
    shared.open_files.store(files as u64, Relaxed);
    shared.damaged_partitions.store(damaged as u64, Relaxed);
    shared
        .parked_partitions
        .store(logic.log().parked() as u64, Relaxed);
    shared
        .active_partitions
        .store(logic.partition_states() as u64, Relaxed);
}

/// Sends `outs` (ACKs, FETCHes, GET-HEADS, DIRECT-HEADs, STORE-HELLOs)
/// lossy: one goes to every subscriber with room, and a subscriber whose
/// queue is full (a store catching up from us, reading our FETCH answers
/// slower than we send them) misses it. They are repeated by their own
/// timers or requests. Without this, the no-drop XPUB refused a FETCH to
/// every producer and store while any one store's queue was full, and the
/// store never fetched its own gaps. FETCH answers go through `send_slice`,
/// no-drop.
fn send_all(core: &mut Core, outs: &[Out]) -> Result<()> {
    if outs.is_empty() {
        return Ok(());
    }
    set_int_option(&mut core.xpub, zmq_sys::ZMQ_XPUB_NODROP, 0)?;
    let mut sent = Ok(());
    for o in outs {
        match core.emit(o) {
            Ok(()) => {}
            Err(Error::Zmq(zmq::Error::EAGAIN)) => {}
            Err(e) => {
                sent = Err(e);
                break;
            }
        }
    }
    set_int_option(&mut core.xpub, zmq_sys::ZMQ_XPUB_NODROP, 1)?;
    sent
}

/// Sends a slice of FETCH answers until the requester's queue is full:
/// how many went out. In DIRECT-RECORD-BATCHes to a requester that takes
/// them.
fn send_slice(core: &mut Core, slice: &ReplySlice, takers: &Takers) -> Result<usize> {
    let dest = Dest::Direct {
        to: &slice.to,
        partition: &slice.partition,
        topic: &slice.topic,
    };
    core.send_records(dest, slice.first, slice.contents(), takers.takes(&slice.to))
}

#[allow(clippy::too_many_arguments)]
fn run<L: StoreLog>(
    inbox: &mut Inbox<Cmd<L>>,
    ready: &mut Ready<String>,
    ctx: &zmq::Context,
    node: NodeConfig,
    logic_cfg: StoreLogicConfig,
    address: &str,
    log: L,
    shared: &StoreShared,
) -> Result<()> {
    let mut core = Core::open(ctx, &node, NodeType::Store, address, &[])?;
    // A full subscriber queue makes `send` fail with EAGAIN instead of
    // silently dropping.
    set_int_option(&mut core.xpub, zmq_sys::ZMQ_XPUB_NODROP, 1)?;
    ready.send(core.endpoint.clone());
    let own = address.as_bytes().to_vec();
    let mut logic = StoreLogic::new(own.clone(), log, logic_cfg);
    logic.log_mut().set_waker(inbox.waker());
    let stats = &shared.stats;
    let mut frames = Frames::default();
    // Requesters whose FETCHes we answer in DIRECT-RECORD-BATCHes.
    let mut takers = Takers::batches();
    let mut slice = ReplySlice::default();
    let mut sync_error: Option<String> = None;
    let mut error_mark = 0u64;
    // The last storage failure seen: the error is reported until appends
    // after it were synced *and* a whole recovery period went by without
    // another (a nearly full disk lets a few appends through after each
    // recovery; that is no reason to report it healthy for a moment).
    let mut last_failure = Instant::now();
    let mut last_recover = Instant::now();
    let mut peer_heads = PeerHeads::new(Instant::now());
    loop {
        if inbox.terminated() {
            let r = logic.log_mut().sync_all();
            publish(shared, &logic, None);
            let r = r.and_then(|()| logic.log_mut().close());
            return r.map_err(|e| Error::Died(format!("final sync failed: {e}")));
        }
        while let Some(cmd) = inbox.try_recv() {
            match cmd {
                Cmd::Connect(ep) => core.connect(&ep),
                Cmd::Query(f) => f(logic.log()),
            }
        }

        core.count_unsendable(stats);
        let now = Instant::now();
        let replies_at = logic.next_reply_at(now);
        let replies_ready = replies_at.is_some_and(|t| t <= now);
        let timeout = if replies_ready {
            0
        } else {
            poll_timeout(
                now,
                [
                    logic.next_deadline(now),
                    core.disc.next_deadline(),
                    replies_at,
                    Some(peer_heads.next),
                ],
            )
        };
        let r = core.poll(inbox, timeout, true)?;
        let (xpub_in, sub_in, beacon_in) = (r.xpub, r.sub, r.beacon);
        let now = Instant::now();

        if xpub_in {
            // Bounded per turn, as the SUB: a flood of subscriptions must not
            // keep the loop from everything else.
            for _ in 0..BATCH {
                if !frames.recv(&core.xpub)? {
                    break;
                }
                let (s, n) = frames.slices();
                match Subscription::decode(s[0]) {
                    Ok(sub) if n == 1 => {
                        takers.on_subscription(sub.prefix, sub.subscribe);
                        core.addressed_acks
                            .on_subscription(sub.prefix, sub.subscribe);
                        if !sub.subscribe {
                            continue;
                        }
                        if sub.prefix == b"G" {
                            peer_heads.store_joined(now);
                            logic.store_joined();
                        }
                        let outs = logic.on_subscribe(sub.prefix);
                        send_all(&mut core, &outs)?;
                    }
                    Ok(_) => {}
                    Err(_) => Stats::add(&stats.malformed, 1),
                }
            }
        }
        if sub_in {
            for _ in 0..BATCH {
                if !frames.recv(&core.sub)? {
                    break;
                }
                if frames.too_long() {
                    Stats::add(&stats.malformed, 1);
                    continue;
                }
                let (s, n) = frames.slices();
                let outs = match decode(&s[..n]) {
                    Ok((Message::Record(r), _)) if r.topic == r.subject => {
                        Stats::add(&stats.records_received, 1);
                        logic.on_record(r.subject, r.address, r.sequence, r.content, now)
                    }
                    Ok((Message::RecordBatch(b), _)) if b.topic == b.subject => {
                        Stats::add(&stats.records_received, u64::from(b.count));
                        logic.on_record_batch(&b, now)
                    }
                    Ok((Message::DirectRecordBatch(b), _)) if topic_matches(&own, b.topic) => {
                        Stats::add(&stats.records_received, u64::from(b.count));
                        let mut outs = Vec::new();
                        for r in b.records() {
                            outs.extend(logic.on_direct_record(
                                r.subject, r.address, r.sequence, r.content, now,
                            ));
                        }
                        outs
                    }
                    Ok((Message::DirectRecord(r), _)) if topic_matches(&own, r.topic) => {
                        Stats::add(&stats.records_received, 1);
                        logic.on_direct_record(r.subject, r.address, r.sequence, r.content, now)
                    }
                    Ok((Message::Head(h), _)) if h.topic == h.subject => logic.on_head(&h, now),
                    Ok((Message::Fetch(f), _)) => {
                        Stats::add(&stats.fetches_received, 1);
                        logic.on_fetch(&f)
                    }
                    Ok((Message::GetHeads(g), _)) => logic.on_get_heads(&g),
                    Ok((Message::DirectHead(h), _)) if h.topic == own.as_slice() => {
                        logic.on_peer_head(&h, now)
                    }
                    Ok((Message::ConsumerHello(c), _)) if topic_matches(&own, c.topic) => {
                        logic.on_consumer_hello(&c)
                    }
                    Ok(_) => {
                        Stats::add(&stats.ignored, 1);
                        Vec::new()
                    }
                    Err(_) => {
                        Stats::add(&stats.malformed, 1);
                        Vec::new()
                    }
                };
                send_all(&mut core, &outs)?;
            }
        }
        if beacon_in {
            core.on_beacons(stats)?;
        }

        // Group commit, then ACK what is durable, retry FETCHes. A storage
        // error stays reported until records appended after it were written.
        match logic.log_mut().sync_if_due() {
            Ok(()) => {
                if sync_error.is_some()
                    && logic.counters().appended > error_mark
                    && now.duration_since(last_failure) >= RECOVER_EVERY
                {
                    tracing::info!("store writes succeed again");
                    sync_error = None;
                }
            }
            Err(e) => {
                if sync_error.is_none() {
                    tracing::error!("store sync failed: {e}");
                }
                shared.storage_errors.fetch_add(1, Relaxed);
                sync_error = Some(format!("sync failed: {e}"));
                error_mark = logic.counters().appended;
                last_failure = now;
            }
        }
        // After a storage error (disk full, I/O): stop ACKing (nothing new is
        // durable) and try to recover the log every second; once it works the
        // gaps are fetched again from producers and stores.
        if (sync_error.is_some() || logic.last_error().is_some())
            && now.duration_since(last_recover) >= RECOVER_EVERY
        {
            last_recover = now;
            // An append failed since the last look: a failure now. (A
            // recovery for a sync error alone is not one.)
            let failed = logic.last_error().is_some();
            if failed {
                last_failure = now;
            }
            match logic.log_mut().recover() {
                Ok(()) => {
                    if let Some(e) = logic.last_error() {
                        sync_error.get_or_insert_with(|| e.to_string());
                    }
                    logic.clear_error();
                    if failed {
                        error_mark = logic.counters().appended;
                    }
                }
                Err(e) => {
                    sync_error = Some(format!("recovery failed: {e}"));
                    error_mark = logic.counters().appended;
                    last_failure = now;
                }
            }
        } else if now.duration_since(last_recover) >= RECOVER_EVERY {
            // Partitions set aside as damaged come back (or are forgotten)
            // once repaired or moved away; still damaged, they stay counted.
            last_recover = now;
            let _ = logic.log_mut().retry_set_aside();
        }
        let outs = logic.tick(now);
        send_all(&mut core, &outs)?;
        if peer_heads.due(now) {
            send_all(&mut core, &[logic.ask_peer_heads()])?;
        }

        // FETCH answers between receives: about as many records per turn as
        // a turn may receive, in up to REPLY_SLICES slices (many small jobs,
        // a consumer catching up on thousands of partitions, must not wait
        // behind the FETCHes that keep coming in).
        // A requester whose queue is full waits (backing off) with its jobs,
        // and the others' answers go on.
        if logic.next_reply_at(now).is_some_and(|t| t <= now) {
            let mut records = 0;
            for _ in 0..REPLY_SLICES {
                if records >= BATCH || !logic.next_reply_slice(&mut slice, now) {
                    break;
                }
                let sent = send_slice(&mut core, &slice, &takers)?;
                records += sent;
                if sent < slice.len() {
                    logic.requeue_slice(&slice, sent, now);
                } else {
                    logic.reply_sent(&slice);
                }
            }
        }
        if core.disc.next_deadline().is_some_and(|d| d <= now) {
            core.on_timer(now, stats)?;
        }
        publish(shared, &logic, sync_error.as_deref());
    }
}

// ------------------------------------------------------- the durable store

/// The durable log as the store's storage.
///
/// Group commit runs on a syncer thread: the store thread keeps appending
/// (into the page cache) while the previous batch is fdatasynced, so ACK
/// throughput is not bounded by fsync latency; `durable_next` advances only
/// once a sync of those bytes returned. After an I/O error the log is reopened
/// in place: it refuses a partition after a failed write or fdatasync (the
/// kernel may have dropped dirty pages), and a reopen recovers it from what is
/// really on disk, then syncs, so nothing is reported durable that is not.
pub struct DurableLog {
    root: PathBuf,
    /// The log's own config, with `fsync = never`: syncing is done here.
    cfg: LogConfig,
    /// The store's fsync policy: `interval` (group commit every
    /// `flush_interval_ms` or `flush_messages`), `always` (after every loop
    /// turn that appended), `never` (ACK what is written, no fdatasync).
    policy: FsyncPolicy,
    log: Option<Log>,
    /// Why the last reopen failed, while the log is closed.
    reopen_error: Option<String>,
    syncer: Syncer,
    in_flight: bool,
    /// When the last sync started: `interval` syncs start at most every
    /// `flush_interval_ms`, counted from one start to the next, so a record
    /// waits at most one interval plus one fdatasync.
    last_sync_start: Option<Instant>,
    pending: Pending,
}

/// Appends gathered during a loop turn, one batch per partition, each
/// written with one `append_batch` (one write call instead of one per record)
/// before the turn syncs, ACKs or reads. Per partition, so records of
/// several producers arriving interleaved still make one write each.
#[derive(Default)]
struct Pending {
    /// topic → partition → index into `batches`.
    index: FxHashMap<Vec<u8>, FxHashMap<String, usize>>,
    /// `batches[..live]` are in use; the rest keep their buffers.
    batches: Vec<PartBatch>,
    live: usize,
    bytes: usize,
    /// The batch `find` returned last: live records come in runs of one
    /// partition, so most lookups are one comparison instead of two hashes.
    hint: Cell<usize>,
}

/// The records gathered for one partition: offsets `first, first + 1, ...`.
#[derive(Default)]
struct PartBatch {
    topic: Vec<u8>,
    partition: String,
    first: u64,
    values: Batch,
}

/// Pending appends are written once they hold this many bytes. Small enough
/// that the pending values and the log's write buffer stay in the CPU's
/// caches: with RECORD-BATCHes of 100 B records the store took twice the CPU
/// per record at 4 MiB (`benches/RESULTS.md`, "Store", session 22).
const PENDING_BYTES: usize = 256 << 10;

impl PartBatch {
    fn next(&self) -> u64 {
        self.first + self.values.len() as u64
    }
}

impl Pending {
    fn find(&self, topic: &[u8], partition: &str) -> Option<usize> {
        let h = self.hint.get();
        if let Some(b) = self.in_use().get(h) {
            if b.partition == partition && b.topic == topic {
                return Some(h);
            }
        }
        let i = self.index.get(topic)?.get(partition).copied()?;
        self.hint.set(i);
        Some(i)
    }
    fn get(&self, topic: &[u8], partition: &str) -> Option<&PartBatch> {
        self.find(topic, partition).map(|i| &self.batches[i])
    }
    fn in_use(&self) -> &[PartBatch] {
        &self.batches[..self.live]
    }
    /// A new batch for a partition that has none this turn.
    fn start(&mut self, topic: &[u8], partition: &str, first: u64) -> usize {
        if self.live == self.batches.len() {
            self.batches.push(PartBatch::default());
        }
        let i = self.live;
        self.live += 1;
        let b = &mut self.batches[i];
        b.topic.clear();
        b.topic.extend_from_slice(topic);
        b.partition.clear();
        b.partition.push_str(partition);
        b.first = first;
        self.index
            .entry(topic.to_vec())
            .or_default()
            .insert(partition.to_string(), i);
        self.hint.set(i);
        i
    }
    fn push(&mut self, i: usize, content: &[u8]) {
        self.batches[i].values.push(content);
        self.bytes += content.len();
    }
    fn clear(&mut self) {
        for b in &mut self.batches[..self.live] {
            b.values.clear();
        }
        self.index.clear();
        self.live = 0;
        self.bytes = 0;
    }
}

/// How long the syncer's group commits took (each one every partition's
/// fdatasyncs), counted on the syncer thread: what an operator looks at when
/// ACKs are slow.
#[derive(Default)]
pub struct SyncTimes {
    count: AtomicU64,
    micros: AtomicU64,
    max_micros: AtomicU64,
    /// Counts per [`SyncTimes::BOUNDS_MS`] bucket (the last: longer).
    buckets: [AtomicU64; 8],
}

/// A copy of [`SyncTimes`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncTimesSnapshot {
    pub count: u64,
    pub micros: u64,
    pub max_micros: u64,
    /// `buckets[i]` counts syncs shorter than `BOUNDS_MS[i]` (and not
    /// shorter than the bound before); the last counts the rest.
    pub buckets: [u64; 8],
}

impl SyncTimes {
    /// Upper bounds of the buckets, in milliseconds.
    pub const BOUNDS_MS: [f64; 7] = [0.5, 1.0, 2.0, 5.0, 10.0, 50.0, 200.0];

    fn record(&self, took: Duration) {
        let us = took.as_micros().min(u64::MAX as u128) as u64;
        self.count.fetch_add(1, Relaxed);
        self.micros.fetch_add(us, Relaxed);
        self.max_micros.fetch_max(us, Relaxed);
        let ms = took.as_secs_f64() * 1e3;
        let i = Self::BOUNDS_MS
            .iter()
            .position(|&b| ms < b)
            .unwrap_or(Self::BOUNDS_MS.len());
        self.buckets[i].fetch_add(1, Relaxed);
    }

    pub fn snapshot(&self) -> SyncTimesSnapshot {
        SyncTimesSnapshot {
            count: self.count.load(Relaxed),
            micros: self.micros.load(Relaxed),
            max_micros: self.max_micros.load(Relaxed),
            buckets: std::array::from_fn(|i| self.buckets[i].load(Relaxed)),
        }
    }
}

/// The syncer thread: runs [`SyncBatch`]es, returns [`SyncDone`]s and wakes
/// the store loop (once it gave its waker) after each.
struct Syncer {
    tx: Option<Sender<SyncBatch>>,
    rx: Receiver<SyncDone>,
    waker: Arc<OnceLock<Arc<Waker>>>,
    times: Arc<SyncTimes>,
    join: Option<std::thread::JoinHandle<()>>,
}

impl Syncer {
    fn start() -> Result<Self> {
        let (tx, jobs) = channel::<SyncBatch>();
        let (done, rx) = channel::<SyncDone>();
        let waker = Arc::new(OnceLock::<Arc<Waker>>::new());
        let wake = waker.clone();
        let times = Arc::new(SyncTimes::default());
        let timed = times.clone();
        let join = std::thread::Builder::new()
            .name("dafka-store-sync".into())
            .spawn(move || {
                for batch in jobs {
                    let start = Instant::now();
                    let result = batch.run();
                    timed.record(start.elapsed());
                    if done.send(result).is_err() {
                        return;
                    }
                    if let Some(w) = wake.get() {
                        w.wake();
                    }
                }
            })
            .map_err(|e| Error::Died(format!("cannot start the sync thread: {e}")))?;
        Ok(Self {
            tx: Some(tx),
            rx,
            waker,
            times,
            join: Some(join),
        })
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }
}

impl DurableLog {
    /// When the next group commit is due, if anything is unsynced.
    fn next_group_commit(&self, log: &Log) -> Option<Instant> {
        if self.in_flight {
            // The syncer wakes the loop when it is done; without a waker
            // (a loop that never gave one) look again shortly.
            return match self.syncer.waker.get() {
                Some(_) => None,
                None => Some(Instant::now() + Duration::from_millis(1)),
            };
        }
        if self.policy == FsyncPolicy::Never || !log.has_unsynced() {
            return None;
        }
        match (self.policy, self.last_sync_start) {
            (FsyncPolicy::Interval, Some(t)) => Some(t + self.interval()),
            _ => Some(Instant::now()),
        }
    }

    pub fn open(root: impl Into<PathBuf>, cfg: LogConfig) -> Result<Self> {
        let root = root.into();
        let policy = cfg.fsync;
        let cfg = LogConfig {
            fsync: FsyncPolicy::Never,
            ..cfg
        };
        let log = Log::open(&root, cfg.clone())?;
        Ok(Self {
            root,
            cfg,
            policy,
            log: Some(log),
            reopen_error: None,
            syncer: Syncer::start()?,
            in_flight: false,
            last_sync_start: None,
            pending: Pending::default(),
        })
    }

    /// The open log (None between a failed reopen and the next try).
    pub fn log(&self) -> Option<&Log> {
        self.log.as_ref()
    }

    fn closed(&self) -> LogError {
        LogError::Invalid(format!(
            "the log at {} could not be reopened after an I/O error ({}); retrying",
            self.root.display(),
            self.reopen_error.as_deref().unwrap_or("unknown")
        ))
    }

    fn get_mut(&mut self) -> std::result::Result<&mut Log, LogError> {
        let e = self.closed();
        self.log.as_mut().ok_or(e)
    }

    /// Writes the gathered appends. On error a prefix may be stored; the
    /// partition's `next_offset` says where it stands, and the store fetches
    /// the rest again.
    fn flush_pending(&mut self) -> std::result::Result<(), LogError> {
        if self.pending.live == 0 {
            return Ok(());
        }
        let mut first_err = None;
        let mut values: Vec<&[u8]> = Vec::new();
        for b in self.pending.in_use() {
            values.clear();
            values.extend(b.values.iter());
            let r = match self.log.as_mut() {
                Some(log) => log.append_batch(&b.topic, &b.partition, b.first, &values),
                None => Err(self.closed()),
            };
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        drop(values);
        // Keeps the buffers' capacity for the next turn.
        self.pending.clear();
        first_err.map_or(Ok(()), Err)
    }

    /// Applies a finished sync, waiting for it up to `wait`.
    fn collect(&mut self, wait: Duration) -> std::result::Result<(), LogError> {
        if !self.in_flight {
            return Ok(());
        }
        // Disconnected: the sync thread ended (a panic) without an answer.
        // Said as an error: before, the sync stayed "in flight" for good, and
        // the store stopped ACKing with no error reported.
        let got = if wait.is_zero() {
            self.syncer
                .rx
                .try_recv()
                .map_err(|e| e == TryRecvError::Disconnected)
        } else {
            self.syncer
                .rx
                .recv_timeout(wait)
                .map_err(|e| e == RecvTimeoutError::Disconnected)
        };
        let done = match got {
            Ok(done) => done,
            Err(false) => return Ok(()),
            Err(true) => {
                return Err(LogError::Invalid(
                    "the store's sync thread stopped (see the log for its panic): nothing \
                     more becomes durable or is acknowledged; restart the store"
                        .into(),
                ))
            }
        };
        self.in_flight = false;
        match self.log.as_mut() {
            Some(log) => log.finish_sync(done),
            None => Ok(()),
        }
    }

    fn interval(&self) -> Duration {
        Duration::from_millis(self.cfg.flush_interval_ms)
    }

    /// True if no sync started within the last `flush_interval_ms`.
    fn interval_passed(&self, now: Instant) -> bool {
        self.last_sync_start
            .is_none_or(|t| now.duration_since(t) >= self.interval())
    }

    /// Starts a sync of everything appended so far on the syncer thread.
    fn start_sync(&mut self) -> std::result::Result<(), LogError> {
        let batch = self.get_mut()?.begin_sync();
        if batch.is_empty() {
            return Ok(());
        }
        match self.syncer.tx.as_ref().map(|tx| tx.send(batch)) {
            Some(Ok(())) => {
                self.in_flight = true;
                self.last_sync_start = Some(Instant::now());
                Ok(())
            }
            _ => Err(LogError::Invalid("the sync thread stopped".into())),
        }
    }
}

fn part_name(partition: &[u8]) -> Option<&str> {
    std::str::from_utf8(partition).ok()
}

impl StoreLog for DurableLog {
    type Error = LogError;

    fn next_offset(&self, topic: &[u8], partition: &[u8]) -> Option<u64> {
        let p = part_name(partition)?;
        if let Some(b) = self.pending.get(topic, p) {
            return Some(b.next());
        }
        self.log.as_ref()?.next_offset(topic, p)
    }
    fn first_offset(&self, topic: &[u8], partition: &[u8]) -> Option<u64> {
        let p = part_name(partition)?;
        let held = self.log.as_ref()?.first_offset(topic, p);
        held.or_else(|| self.pending.get(topic, p).map(|b| b.first))
    }
    fn append(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        offset: u64,
        content: &[u8],
    ) -> std::result::Result<(), LogError> {
        let p = part_name(partition)
            .ok_or_else(|| LogError::Invalid("partition name is not UTF-8".into()))?;
        let mut at = self.pending.find(topic, p);
        if at.is_some_and(|i| self.pending.batches[i].next() != offset) {
            // Not the next of this partition's batch: write what is gathered,
            // then the log says what it expects.
            self.flush_pending()?;
            at = None;
        }
        if at.is_none() {
            let log = self.get_mut()?;
            if let Some(expected) = log.next_offset(topic, p).filter(|&e| e != offset) {
                return Err(LogError::OffsetMismatch {
                    topic: String::from_utf8_lossy(topic).into_owned(),
                    partition: p.to_string(),
                    expected,
                    got: offset,
                });
            }
            at = Some(self.pending.start(topic, p, offset));
        }
        self.pending.push(at.expect("set above"), content);
        if self.pending.bytes >= PENDING_BYTES {
            self.flush_pending()?;
        }
        Ok(())
    }
    fn append_run(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        first: u64,
        values: &mut dyn Iterator<Item = &[u8]>,
    ) -> (u64, Option<LogError>) {
        let Some(p) = part_name(partition) else {
            let e = LogError::Invalid("partition name is not UTF-8".into());
            return (0, values.next().map(|_| e));
        };
        // `append` finds (or starts) the partition's pending batch and checks
        // the offset; the values after it go straight into that batch, until
        // the pending bytes are written out.
        let mut n = 0;
        let mut at = None;
        for v in values {
            match at {
                Some(i) => {
                    self.pending.push(i, v);
                    if self.pending.bytes >= PENDING_BYTES {
                        at = None;
                        if let Err(e) = self.flush_pending() {
                            return (n, Some(e));
                        }
                    }
                }
                None => {
                    if let Err(e) = self.append(topic, partition, first + n, v) {
                        return (n, Some(e));
                    }
                    at = self.pending.find(topic, p);
                }
            }
            n += 1;
        }
        (n, None)
    }
    fn read_into(
        &self,
        topic: &[u8],
        partition: &[u8],
        start: u64,
        max_records: usize,
        max_bytes: usize,
        out: &mut Batch,
    ) -> std::result::Result<Option<u64>, LogError> {
        out.clear();
        let (Some(log), Some(p)) = (self.log.as_ref(), part_name(partition)) else {
            return Ok(None);
        };
        let mut first = None;
        let r = log.read_with(topic, p, start, max_records, max_bytes, |offset, _, v| {
            first.get_or_insert(offset);
            out.push(v);
        });
        match r {
            Ok(_) => Ok(first),
            // Retention removed it meanwhile, or it is past the end: nothing.
            Err(LogError::OffsetOutOfRange { .. } | LogError::UnknownPartition { .. }) => {
                out.clear();
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
    fn skip_to(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        offset: u64,
    ) -> std::result::Result<(), LogError> {
        let p = part_name(partition)
            .ok_or_else(|| LogError::Invalid("partition name is not UTF-8".into()))?;
        // What is gathered for it goes to the log first (in order), then goes.
        self.flush_pending()?;
        self.get_mut()?.skip_to(topic, p, offset)
    }
    fn durable_next(&self, topic: &[u8], partition: &[u8]) -> Option<u64> {
        let log = self.log.as_ref()?;
        let p = part_name(partition)?;
        if self.policy == FsyncPolicy::Never {
            log.next_offset(topic, p)
        } else {
            log.durable_next(topic, p)
        }
    }
    fn partitions(&self, topic: Option<&[u8]>) -> Vec<PartKey> {
        let Some(log) = self.log.as_ref() else {
            return Vec::new();
        };
        // Parked partitions hold no record: no head to tell (a store that
        // has seen a million partitions would walk them all at every ask).
        let mut keys: Vec<PartKey> = log
            .open_partitions(topic)
            .into_iter()
            .map(|(t, p)| (t, p.into_bytes()))
            .collect();
        for b in self.pending.in_use() {
            if topic.is_none_or(|t| t == b.topic.as_slice())
                && log.next_offset(&b.topic, &b.partition).is_none()
            {
                keys.push((b.topic.clone(), b.partition.clone().into_bytes()));
            }
        }
        keys
    }
    fn sync_if_due(&mut self) -> std::result::Result<(), LogError> {
        self.flush_pending()?;
        self.collect(Duration::ZERO)?;
        // Retention (the log's own fsync is off, so its tick never syncs).
        self.get_mut()?.tick()?;
        if self.in_flight {
            return Ok(());
        }
        let (policy, interval_passed) = (self.policy, self.interval_passed(Instant::now()));
        let log = self.get_mut()?;
        let due = match policy {
            FsyncPolicy::Always => log.has_unsynced(),
            // `sync_due` adds the `flush_messages` bound.
            FsyncPolicy::Interval => log.has_unsynced() && (interval_passed || log.sync_due()),
            FsyncPolicy::Never => false,
        };
        if due {
            self.start_sync()?;
        }
        Ok(())
    }
    fn sync_all(&mut self) -> std::result::Result<(), LogError> {
        self.flush_pending()?;
        self.collect(Duration::from_secs(60))?;
        self.get_mut()?.sync()
    }
    fn close(&mut self) -> std::result::Result<(), LogError> {
        match self.log.take() {
            Some(log) if !self.in_flight => log.close(),
            // A sync still running: dropped, and the next open syncs all.
            _ => Ok(()),
        }
    }
    fn next_sync(&self) -> Option<Instant> {
        let log = self.log.as_ref()?;
        // Retention goes on a batch at a time: at the next turn (1 ms on, so
        // a turn that cannot reach it does not spin), not the next wake-up
        // for something else (an idle store without a tower wakes once a
        // minute).
        let retention = log
            .retention_pending()
            .then(|| Instant::now() + Duration::from_millis(1));
        retention
            .into_iter()
            .chain(self.next_group_commit(log))
            .min()
    }
    fn set_waker(&mut self, waker: Arc<Waker>) {
        let _ = self.syncer.waker.set(waker);
    }
    fn sync_times(&self) -> Option<Arc<SyncTimes>> {
        Some(self.syncer.times.clone())
    }
    fn files_and_damaged(&self) -> (usize, usize) {
        self.log
            .as_ref()
            .map_or((0, 0), |l| (l.open_files(), l.damaged_count()))
    }
    fn parked(&self) -> usize {
        self.log.as_ref().map_or(0, Log::parked_count)
    }
    fn set_aside(&self, topic: &[u8], partition: &[u8]) -> bool {
        match (self.log.as_ref(), part_name(partition)) {
            (Some(log), Some(p)) => log.is_set_aside(topic, p),
            _ => false,
        }
    }
    fn retry_set_aside(&mut self) -> std::result::Result<(), LogError> {
        self.log.as_mut().map_or(Ok(()), Log::retry_set_aside)
    }
    fn recover(&mut self) -> std::result::Result<(), LogError> {
        // Let a sync in flight end, then recover from the files: the
        // partitions that failed (or were set aside at open) only, or the
        // whole log if it is closed.
        let _ = self.collect(Duration::from_secs(60));
        self.in_flight = false;
        self.pending.clear();
        if let Some(log) = self.log.as_mut() {
            return log.reopen_failed().and_then(|()| log.sync());
        }
        let reopened = Log::open(&self.root, self.cfg.clone()).and_then(|mut log| {
            log.sync()?;
            Ok(log)
        });
        match reopened {
            Ok(log) => {
                self.log = Some(log);
                self.reopen_error = None;
                Ok(())
            }
            Err(e) => {
                self.reopen_error = Some(e.to_string());
                Err(e)
            }
        }
    }
}

/// Everything a store is configured with.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub node: NodeConfig,
    /// The log's settings. The store's default differs from the log's own:
    /// group commit every `flush_interval_ms` = 1 ms (fdatasync at most ~1000
    /// times a second, never per record: at 500k records/s each covers ~500),
    /// so ACKs follow records within a few ms (p50 ~2 ms at 500k/s here;
    /// 2 ms gave ~2.8) and nothing ACKed is lost to a crash.
    pub log: LogConfig,
    pub logic: StoreLogicConfig,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            node: NodeConfig::default(),
            log: LogConfig {
                fsync: FsyncPolicy::Interval,
                flush_interval_ms: 1,
                flush_messages: 100_000,
                isolate_damaged: true,
                ..LogConfig::default()
            },
            logic: StoreLogicConfig::default(),
        }
    }
}

/// The file in a store's directory that keeps its address across restarts.
pub const IDENTITY_FILE: &str = "store.id";
/// The log lives in this subdirectory of the store's directory.
pub const LOG_DIR: &str = "log";

/// Reads the store's address from `dir/store.id`, creating it on first start.
pub fn store_identity(dir: &Path) -> Result<String> {
    let path = dir.join(IDENTITY_FILE);
    let io = |e: std::io::Error| {
        Error::Config(format!(
            "cannot read or create the store's address file {}: {e}; the store's path must \
             name a directory it can write in",
            path.display()
        ))
    };
    match std::fs::read_to_string(&path) {
        Ok(s) => {
            let id = s.trim();
            if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                Ok(id.to_ascii_uppercase())
            } else {
                Err(Error::Config(format!(
                    "{} does not hold a 32-hex-digit store address; fix or delete it",
                    path.display()
                )))
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(io)?;
            let id = new_address();
            let tmp = dir.join(format!("{IDENTITY_FILE}.tmp"));
            std::fs::write(&tmp, format!("{id}\n")).map_err(io)?;
            std::fs::File::open(&tmp)
                .and_then(|f| f.sync_all())
                .map_err(io)?;
            std::fs::rename(&tmp, &path).map_err(io)?;
            Ok(id)
        }
        Err(e) => Err(io(e)),
    }
}

/// A store node persisting to the durable log.
pub type Store = StoreNode<DurableLog>;

impl StoreNode<DurableLog> {
    /// Opens (recovering) the store in `dir` and starts its node thread. The
    /// address is kept in `dir/store.id` and reused after a restart.
    pub fn open(dir: impl AsRef<Path>, cfg: StoreConfig) -> Result<Self> {
        let dir = dir.as_ref();
        if dir.as_os_str().is_empty() {
            // Not the current directory by accident.
            return Err(Error::Config(
                "the store's path is empty: name its directory (\".\" for the current one)".into(),
            ));
        }
        if cfg.logic.max_record_bytes == 0 {
            return Err(Error::Config(
                "max_record_bytes must be at least 1 (stores drop larger records)".into(),
            ));
        }
        if cfg.log.flush_messages == 0 {
            return Err(Error::Config(
                "flush_messages must be at least 1 (use fsync=always to sync every append)".into(),
            ));
        }
        // Before anything is written: a refused setting leaves no directory.
        cfg.node.validate()?;
        let address = store_identity(dir)?;
        let log = DurableLog::open(dir.join(LOG_DIR), cfg.log)?;
        Self::start(&address, log, cfg.node, cfg.logic)
    }
}

#[cfg(test)]
mod sync_times_tests {
    use super::*;

    #[test]
    fn sync_times_bucket_by_duration_and_keep_the_maximum() {
        let t = SyncTimes::default();
        for us in [100, 499, 500, 1_500, 7_000, 250_000] {
            t.record(Duration::from_micros(us));
        }
        let s = t.snapshot();
        assert_eq!(s.count, 6);
        assert_eq!(s.micros, 100 + 499 + 500 + 1_500 + 7_000 + 250_000);
        assert_eq!(s.max_micros, 250_000);
        // [0,0.5) [0.5,1) [1,2) [2,5) [5,10) [10,50) [50,200) [200,-)
        assert_eq!(s.buckets, [2, 1, 1, 0, 1, 0, 0, 1]);
    }
}
