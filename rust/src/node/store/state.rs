//! The store's protocol decisions as a pure state machine: no sockets, no files.
//!
//! The event loop (`run.rs`) decodes what arrives, calls one `on_*` method, and
//! sends every [`Out`] it returns; it calls [`StoreState::tick`] at each deadline.
//! Storage is behind [`StoreLog`], implemented by the durable segment log (and by
//! an in-memory model in tests), so every rule below is unit-tested in isolation:
//!
//! - Records of a partition are appended strictly in order. A record beyond the
//!   next expected offset is held (bounded) and the gap is FETCHed from the
//!   producer and the other stores; a duplicate is dropped.
//! - A partition the store has never seen starts at offset 0: the store FETCHes
//!   from 0 first, and only if nobody answers after `give_up_fetches` retries does
//!   it start the partition at the earliest offset it holds (its history is gone).
//! - A partition the store knows but whose records its retention deleted (it
//!   was away longer than retention) gives up a gap only on evidence: peers
//!   answered its FETCH from past the gap `give_up_fetches` times in a row
//!   (retention deleted it everywhere). It then continues past the gap. One
//!   that still holds records keeps waiting: a peer holding the gap may be away.
//! - ACKs are cumulative per partition and never run ahead of what the log reports
//!   durable.
//! - FETCHes are answered from the log in ascending order, in bounded slices
//!   ([`StoreState::next_reply_slice`]) so a large FETCH never buffers unboundedly.
//!
//! Where each decision is made:
//! - what is durable and may be ACKed, and which partitions a turn looks at:
//!   `state/acks.rs` ([`StoreState::on_durable`] turns what a sync made
//!   durable into ACKs; [`StoreState::tick`] visits the partitions touched
//!   since the last turn and those whose timer is due, never every one; the
//!   group commit is the log's, run by [`durable`](super::durable));
//! - whether a record is appended, held or dropped: [`StoreState::on_record`];
//! - which gap to FETCH, when to retry or give it up: `StoreState::fetch_gap`;
//! - how a FETCH is answered: [`StoreState::on_fetch`] and
//!   [`StoreState::next_reply_slice`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rustc_hash::FxBuildHasher;

use crate::log::format::name_fits;
use crate::node::batch::Batch;
use crate::node::held::Held;
use crate::node::out::{Backoff, Out};
use crate::wire::{ConsumerHello, Fetch, GetHeads, Head, RecordBatch};

/// A map looked up by borrowed key with one probe ([`hashbrown::HashMap::entry_ref`]).
type FxMap<K, V> = hashbrown::HashMap<K, V, FxBuildHasher>;

/// A partition key: (topic name, partition = producer address).
pub type PartKey = (Vec<u8>, Vec<u8>);

/// What the store needs from its storage.
pub trait StoreLog {
    type Error: std::fmt::Display;
    /// The offset the partition expects next, or `None` if it holds nothing.
    fn next_offset(&self, topic: &[u8], partition: &[u8]) -> Option<u64>;
    /// The first offset still held (after retention), or `None`.
    fn first_offset(&self, topic: &[u8], partition: &[u8]) -> Option<u64>;
    /// Appends `offset` (== `next_offset`, or any offset for a new partition).
    fn append(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        offset: u64,
        content: &[u8],
    ) -> Result<(), Self::Error>;
    /// Appends `values` at `first`, `first + 1`, ..., each as
    /// [`StoreLog::append`] would, until one fails: how many were appended,
    /// and the error of the one after them (taken from `values`, which
    /// yields the rest). A store appends a RECORD-BATCH with one call.
    fn append_run(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        first: u64,
        values: &mut dyn Iterator<Item = &[u8]>,
    ) -> (u64, Option<Self::Error>) {
        let mut n = 0;
        for v in values {
            if let Err(e) = self.append(topic, partition, first + n, v) {
                return (n, Some(e));
            }
            n += 1;
        }
        (n, None)
    }
    /// Reads up to `max_records` contiguous records from `start`, within about
    /// `max_bytes` (at least one record if any exists at `start`), into `out`
    /// (cleared first; its buffers are reused, so a FETCH answer allocates
    /// nothing per record). Returns the offset of the first record read
    /// (`None` if none); the rest follow it contiguously.
    fn read_into(
        &self,
        topic: &[u8],
        partition: &[u8],
        start: u64,
        max_records: usize,
        max_bytes: usize,
        out: &mut Batch,
    ) -> Result<Option<u64>, Self::Error>;
    /// `read_into` as (offset, content) pairs.
    #[allow(clippy::type_complexity)]
    fn read(
        &self,
        topic: &[u8],
        partition: &[u8],
        start: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, Self::Error> {
        let mut out = Batch::new();
        let read = self.read_into(topic, partition, start, max_records, max_bytes, &mut out)?;
        let Some(first) = read else {
            return Ok(Vec::new());
        };
        Ok(out
            .iter()
            .enumerate()
            .map(|(i, content)| (first + i as u64, content.to_vec()))
            .collect())
    }
    /// The offset after the last record that reached stable storage.
    fn durable_next(&self, topic: &[u8], partition: &[u8]) -> Option<u64>;
    /// Adds to `out` what the syncs finished since the last call made
    /// durable: each (topic, partition) whose durable offset moved, with
    /// that offset (exactly the partitions those syncs covered). What the
    /// store ACKs ([`StoreState::tick`]) without looking at the others.
    fn take_durable(&mut self, out: &mut Vec<(PartKey, u64)>);
    /// Every (topic, partition) held, optionally for one topic (partitions
    /// with no record left may be left out: they have no head to tell).
    fn partitions(&self, topic: Option<&[u8]>) -> Vec<PartKey>;
    /// The first offset of the partition whose record time (its timestamp,
    /// else its append time) is at or after `ts` (ms), considering the
    /// highest time so far at each offset (Kafka's rule for out-of-order
    /// create times); `None` if no record is that late.
    fn offset_for_time(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        ts: u64,
    ) -> Result<Option<u64>, Self::Error>;
    /// Drops every record of a partition and continues it at `offset`, past
    /// its next offset: the records between are gone from every peer.
    fn skip_to(&mut self, topic: &[u8], partition: &[u8], offset: u64) -> Result<(), Self::Error>;
    /// Group commit: writes the turn's appends, takes in a finished sync
    /// (see [`StoreLog::take_durable`]) and starts one if the fsync policy
    /// says it is due. Called at every loop turn.
    fn sync_if_due(&mut self) -> Result<(), Self::Error>;
    /// Syncs everything now (shutdown).
    fn sync_all(&mut self) -> Result<(), Self::Error>;
    /// Closes the storage after a [`StoreLog::sync_all`] that succeeded
    /// (shutdown): a clean close spares the next open its syncs.
    fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// When `sync_if_due` next has work: a sync, if anything is unsynced, or
    /// retention the log left for its next turn.
    fn next_sync(&self) -> Option<Instant>;
    /// After an I/O error: bring the storage back to a consistent, durable
    /// state from what is really stored (the log reopens and recovers).
    fn recover(&mut self) -> Result<(), Self::Error>;
    /// Given the node's waker once its loop runs: storage that syncs on
    /// another thread wakes the loop when a sync ends, so ACKs follow at once.
    fn set_waker(&mut self, _waker: std::sync::Arc<crate::node::actor::Waker>) {}
    /// Timings of the storage's syncs, if it keeps them (read by the handle).
    fn sync_times(&self) -> Option<std::sync::Arc<crate::node::stats::SyncTimes>> {
        None
    }
    /// True for a partition set aside as damaged: it takes no records, so the
    /// store neither appends nor fetches for it.
    fn set_aside(&self, _topic: &[u8], _partition: &[u8]) -> bool {
        false
    }
    /// Partitions set aside as damaged: try them again if their files
    /// changed (called every second while there are any).
    fn retry_set_aside(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Files the storage holds open, and partitions it set aside because
    /// they could not be opened (for the handle's stats).
    fn files_and_damaged(&self) -> (usize, usize) {
        (0, 0)
    }
    /// Partitions parked: no record left, kept as their next offset.
    fn parked(&self) -> usize {
        0
    }
}

/// Tunables of the store logic, with their defaults.
#[derive(Debug, Clone)]
pub struct StoreStateConfig {
    /// Re-send an unanswered FETCH after this long (default 500 ms).
    pub fetch_retry: Duration,
    /// Unanswered FETCHes from 0 before a new partition starts at the earliest
    /// offset held instead (default 6).
    pub give_up_fetches: u32,
    /// At most this many records asked per FETCH (default 100 000).
    pub max_fetch_count: u32,
    /// Out-of-order records held per partition while a gap is fetched
    /// (default 100 000); beyond, records are dropped and re-fetched later.
    pub max_held_records: usize,
    /// Bytes of out-of-order records held per partition (default 64 MiB).
    pub max_held_bytes: usize,
    /// ... and over all partitions (default 1 GiB): many partitions with a
    /// gap each (a store back after a while, many producers live) would
    /// otherwise hold `max_held_bytes` apiece. Past it, each partition still
    /// holds the one record nearest its gap.
    pub max_held_total_bytes: usize,
    /// Records longer than this are dropped and counted (default 64 MiB).
    pub max_record_bytes: usize,
    /// FETCH answers go out in slices of at most this many records (default 1024)
    pub reply_batch_records: usize,
    /// ... and about this many bytes (default 4 MiB).
    pub reply_batch_bytes: usize,
    /// Concurrent FETCH answers in progress (one per requester and
    /// partition); beyond, the oldest is dropped and its requester FETCHes
    /// again (default 65,536: a consumer catching up on many partitions asks
    /// for all of them at once; a job takes a few hundred bytes).
    pub max_reply_jobs: usize,
    /// The last ACK of a partition whose producer was heard from within
    /// `ack_refresh_window` is repeated this often, so a producer that missed
    /// it (connected late, HWM) still learns it (default 1 s).
    pub ack_refresh: Duration,
    pub ack_refresh_window: Duration,
}

impl Default for StoreStateConfig {
    fn default() -> Self {
        Self {
            fetch_retry: Duration::from_millis(500),
            give_up_fetches: 6,
            max_fetch_count: 100_000,
            max_held_records: 100_000,
            max_held_bytes: 64 << 20,
            max_held_total_bytes: 1 << 30,
            max_record_bytes: crate::node::config::DEFAULT_MAX_RECORD_BYTES,
            reply_batch_records: 1024,
            reply_batch_bytes: 4 << 20,
            max_reply_jobs: 65_536,
            ack_refresh: Duration::from_secs(1),
            ack_refresh_window: Duration::from_secs(5),
        }
    }
}

/// Counters the store exposes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreCounters {
    pub appended: u64,
    pub duplicates: u64,
    pub held: u64,
    pub dropped_oversize: u64,
    /// RECORDs and HEADs no store could hold: a partition name that is not
    /// 1-64 bytes of ASCII letters, digits, '-' and '_', the offset 2^64-1
    /// (no next offset could follow it), or a new partition's topic too long
    /// to name a directory (over 255 bytes escaped).
    pub dropped_invalid: u64,
    pub dropped_held_full: u64,
    pub fetches_sent: u64,
    pub fetches_answered: u64,
    pub fetches_unknown: u64,
    pub records_served: u64,
    pub acks_sent: u64,
    pub append_errors: u64,
    /// Records for partitions the storage set aside as damaged: dropped,
    /// neither held nor fetched (see [`StoreLog::set_aside`]).
    pub dropped_set_aside: u64,
    /// Offsets of partitions known already (their records all deleted by
    /// retention) that the store skipped, because every peer answered its
    /// FETCH from past them: retention deleted them everywhere.
    pub records_skipped: u64,
}

/// Per-partition progress beyond what the log itself knows.
#[derive(Debug, Default)]
struct PartState {
    /// Out-of-order records waiting for the gap before them.
    held: Held,
    /// The highest offset known to exist (from RECORD, HEAD, DIRECT-RECORD).
    known_head: Option<u64>,
    /// The last FETCH sent.
    fetch: Option<InFlight>,
    /// Last offset ACKed, and when.
    acked: Option<u64>,
    ack_sent: Option<Instant>,
    /// When the producer was last heard from (RECORD or HEAD).
    last_seen: Option<Instant>,
    /// Listed in `StoreState::touched` (visited by the next `tick`).
    touched: bool,
    /// When `tick` visits it next without being touched, if ever (a FETCH
    /// retry, an ACK repeat): its entry in `StoreState::wakes`.
    wake: Option<Instant>,
}

/// The most topics of one CONSUMER-HELLO a store answers for.
pub const MAX_HELLO_TOPICS: usize = 1024;

/// A partition name a store can hold: a Dafka address is 32 hex digits; any
/// 1-64 ASCII letters, digits, '-' and '_' are accepted (the log's rule), so a
/// hostile name can never reach the file system.
pub fn valid_partition(p: &[u8]) -> bool {
    (1..=64).contains(&p.len())
        && p.iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
}

/// The FETCH a partition has in flight: `[from, end)`, sent `at`, after
/// `tries` unanswered ones from the same offset.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    from: u64,
    end: u64,
    at: Instant,
    tries: u32,
    /// A peer answered it with records past `from` (it holds none of the gap)
    /// while the store held no record of the partition (see `on_direct_record`).
    answered_beyond: bool,
    /// A gap unanswered for `give_up_fetches` tries that the store keeps
    /// waiting for (its peers are away) is asked for less and less often,
    /// until another store connects ([`StoreState::store_joined`]).
    backoff: Backoff,
}

impl InFlight {
    fn retry_at(&self, retry: Duration) -> Instant {
        self.at + self.backoff.interval(retry)
    }
}

/// One slice of a FETCH answer: records `first..first + len()` of a
/// partition for one requester, contents back to back. The store loop reuses
/// one, so answering allocates nothing per record.
#[derive(Debug, Default)]
pub struct ReplySlice {
    pub to: Vec<u8>,
    pub topic: Vec<u8>,
    pub partition: Vec<u8>,
    pub first: u64,
    records: Batch,
}

impl ReplySlice {
    pub fn len(&self) -> usize {
        self.records.len()
    }
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
    /// The records' contents in order (offsets `first`, `first + 1`, ...).
    pub fn contents(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.records.iter()
    }
}

/// Whom a FETCH answer goes to, and of which partition: one job each.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ReplyKey {
    to: Vec<u8>,
    topic: Vec<u8>,
    partition: Vec<u8>,
}

/// A FETCH being answered slice by slice: `[next, end)` left to send.
#[derive(Debug)]
struct ReplyJob {
    next: u64,
    end: u64,
}

/// The FETCH answers in progress: found by key in O(1) (a consumer catching
/// up on thousands of partitions sends a FETCH for each at once, and retries
/// them), served round robin in `order`, where each job's key is exactly once.
#[derive(Debug, Default)]
struct Replies {
    jobs: FxMap<ReplyKey, ReplyJob>,
    order: VecDeque<ReplyKey>,
    /// Requesters whose queue was full (they stopped reading): their jobs
    /// wait here, out of `order`, so that they hold up no one else's answers
    /// and are not read from the log again at every turn.
    blocked: FxMap<Vec<u8>, Blocked>,
}

/// A requester whose queue was full: its jobs wait until `until`; `wait`
/// doubles at each full queue in a row (up to [`MAX_REPLY_BACKOFF`]).
#[derive(Debug)]
struct Blocked {
    until: Instant,
    wait: Duration,
    keys: Vec<ReplyKey>,
}

/// The first wait of a requester whose queue was full, and the longest.
pub const REPLY_BACKOFF: Duration = Duration::from_millis(2);
pub const MAX_REPLY_BACKOFF: Duration = Duration::from_millis(256);

impl Replies {
    /// Jobs of requesters whose wait is over go back to the front of `order`.
    fn unblock(&mut self, now: Instant) {
        if self.blocked.is_empty() {
            return;
        }
        for b in self.blocked.values_mut() {
            if b.until <= now {
                for k in b.keys.drain(..).rev() {
                    self.order.push_front(k);
                }
            }
        }
        // A requester that went away (or read again, its last slice not
        // whole) is forgotten a while after its wait ended.
        self.blocked
            .retain(|_, b| !b.keys.is_empty() || now < b.until + MAX_REPLY_BACKOFF);
    }

    /// The next job to answer: the first in `order` whose requester is not
    /// waiting (those met on the way are set aside with their requester).
    fn pop_ready(&mut self, now: Instant) -> Option<ReplyKey> {
        self.unblock(now);
        while let Some(key) = self.order.pop_front() {
            match self.blocked.get_mut(&key.to) {
                Some(b) if b.until > now => b.keys.push(key),
                _ => return Some(key),
            }
        }
        None
    }

    /// Drops the oldest job (its requester FETCHes again): one in `order`,
    /// else one set aside.
    fn evict_one(&mut self) {
        let old = self.order.pop_front().or_else(|| {
            self.blocked
                .values_mut()
                .find_map(|b| (!b.keys.is_empty()).then(|| b.keys.remove(0)))
        });
        if let Some(old) = old {
            self.jobs.remove(&old);
        }
    }

    /// When a job may be answered next: `now` if one is ready, else when the
    /// first waiting requester's wait ends; None without jobs.
    fn next_at(&self, now: Instant) -> Option<Instant> {
        if !self.order.is_empty() {
            return Some(now);
        }
        self.blocked
            .values()
            .filter(|b| !b.keys.is_empty())
            .map(|b| b.until)
            .min()
    }
}

/// The store's protocol state.
pub struct StoreState<L: StoreLog> {
    address: Vec<u8>,
    log: L,
    cfg: StoreStateConfig,
    /// topic → partition → state (Fx hashing: keys are short and ours), for
    /// the partitions with something left to do only: one with nothing left
    /// has nothing here that the log does not say, and is forgotten.
    parts: FxMap<Vec<u8>, FxMap<Vec<u8>, PartState>>,
    /// Bytes held past gaps over every partition (each `PartState::held`
    /// counts its own here; bounded by `max_held_total_bytes`).
    held_total: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The partitions the next `tick` visits: those touched since the last
    /// (a record, a HEAD, a sync that made them durable). With `wakes`, all
    /// that a turn looks at: a store keeps every partition it ever saw (each
    /// Spark task makes one), and thousands may have live producers that send
    /// nothing new; the loop's work per turn must not grow with them.
    touched: Vec<PartKey>,
    /// The partitions' timers (`PartState::wake`), earliest first.
    wakes: std::collections::BTreeSet<(Instant, PartKey)>,
    /// What the storage reported durable, taken at each `tick` (kept for
    /// its buffer).
    marks: Vec<(PartKey, u64)>,
    replies: Replies,
    counters: StoreCounters,
    /// The last storage error, kept until an append succeeds again.
    last_error: Option<String>,
}

impl<L: StoreLog> StoreState<L> {
    pub fn new(address: Vec<u8>, log: L, cfg: StoreStateConfig) -> Self {
        Self {
            address,
            log,
            cfg,
            parts: FxMap::default(),
            held_total: Default::default(),
            touched: Vec::new(),
            wakes: Default::default(),
            marks: Vec::new(),
            replies: Replies::default(),
            counters: StoreCounters::default(),
            last_error: None,
        }
    }

    pub fn address(&self) -> &[u8] {
        &self.address
    }
    pub fn log(&self) -> &L {
        &self.log
    }
    pub fn log_mut(&mut self) -> &mut L {
        &mut self.log
    }
    pub fn counters(&self) -> &StoreCounters {
        &self.counters
    }
    /// The last storage error, while appends keep failing.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
    /// Forgets the last storage error (the storage recovered).
    pub fn clear_error(&mut self) {
        self.last_error = None;
    }
    /// How many partitions have something left to do (of all the store
    /// knows): visited when touched or when their timer is due.
    pub fn active_partitions(&self) -> usize {
        self.partition_states()
    }
    /// How many partitions have state beside the log's (the active ones).
    pub fn partition_states(&self) -> usize {
        self.parts.values().map(|m| m.len()).sum()
    }
    /// True while FETCH answers are waiting to be sent.
    pub fn has_replies(&self) -> bool {
        !self.replies.jobs.is_empty()
    }

    /// The partition's state; looks up by borrowed slices and allocates keys
    /// only for a partition seen for the first time (this runs per record).
    fn part(&mut self, topic: &[u8], partition: &[u8]) -> &mut PartState {
        let total = &self.held_total;
        let st = self
            .parts
            .entry_ref(topic)
            .or_default()
            .entry_ref(partition)
            .or_insert_with(|| PartState {
                held: Held::counted(total.clone()),
                ..PartState::default()
            });
        if !st.touched {
            st.touched = true;
            self.touched.push((topic.to_vec(), partition.to_vec()));
        }
        st
    }

    /// DIRECT-RECORD (an answer to the store's FETCH): a record past the
    /// offset fetched shows that the peer holds none of the gap. For a
    /// partition the store knows but whose records its own retention deleted
    /// too, that is evidence that lets it skip a gap deleted everywhere (a
    /// store still holding records waits: a peer holding the gap may be away).
    pub fn on_direct_record(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        sequence: u64,
        content: &[u8],
        now: Instant,
    ) -> Vec<Out> {
        if let Some(f) = self
            .parts
            .get_mut(topic)
            .and_then(|t| t.get_mut(partition))
            .and_then(|st| st.fetch.as_mut())
        {
            // Looked up only for an answer from past the gap, not per record.
            if sequence > f.from
                && !f.answered_beyond
                && self.log.next_offset(topic, partition) == Some(f.from)
                && self.log.first_offset(topic, partition) == Some(f.from)
            {
                f.answered_beyond = true;
            }
        }
        self.on_record(topic, partition, sequence, content, now)
    }

    /// RECORD-BATCH: its records, in order, as RECORDs. The live case (the
    /// batch goes on where the partition stands, nothing held or fetched,
    /// nothing known beyond it) is one partition lookup and one append for
    /// the whole batch; any other, record by record.
    pub fn on_record_batch(&mut self, b: &RecordBatch<'_>, now: Instant) -> Vec<Out> {
        if let Some(out) = self.append_live_batch(b, now) {
            return out;
        }
        let mut out = Vec::new();
        for r in b.records() {
            out.extend(self.on_record(r.subject, r.address, r.sequence, r.content, now));
        }
        out
    }

    /// [`StoreState::on_record_batch`]'s live case, with the same outcome as
    /// [`StoreState::on_record`] of each record; `None` if the batch is not
    /// one (a partition new to the store, a value over `max_record_bytes`, a
    /// gap before or in it).
    fn append_live_batch(&mut self, b: &RecordBatch<'_>, now: Instant) -> Option<Vec<Out>> {
        let (topic, partition) = (b.subject, b.address);
        let max = self.cfg.max_record_bytes;
        let size = crate::node::producer::record_size;
        if !valid_partition(partition) || b.values().any(|v| size(v.len()) > max) {
            return None;
        }
        if self.log.next_offset(topic, partition) != Some(b.sequence) {
            return None;
        }
        let st = self.part(topic, partition);
        let live = st.held.is_empty()
            && st.fetch.is_none()
            && st.known_head.is_none_or(|h| h <= b.sequence);
        if !live {
            return None;
        }
        st.known_head = Some(b.last());
        st.last_seen = Some(now);
        let mut values = b.values();
        let (appended, failed) = self
            .log
            .append_run(topic, partition, b.sequence, &mut values);
        self.counters.appended += appended;
        let mut out = Vec::new();
        match failed {
            None => self.last_error = None,
            Some(e) => {
                // As record by record: the gap is fetched up to the record
                // that failed (the newest seen so far), and what follows it
                // is held past it.
                let failed_at = b.sequence + appended;
                self.part(topic, partition).known_head = Some(failed_at);
                self.append_failed(e);
                self.fetch_gap(topic, partition, now, &mut out);
                for (sequence, content) in (failed_at + 1..).zip(values) {
                    out.extend(self.on_record(topic, partition, sequence, content, now));
                }
            }
        }
        Some(out)
    }

    /// RECORD or DIRECT-RECORD: `partition` is the producer's address.
    pub fn on_record(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        sequence: u64,
        content: &[u8],
        now: Instant,
    ) -> Vec<Out> {
        let mut out = Vec::new();
        // Bodies: the value, key and headers count, not the fixed metadata.
        if crate::node::producer::record_size(content.len()) > self.cfg.max_record_bytes {
            self.counters.dropped_oversize += 1;
            // The partition cannot go on past it here: say so, a few times.
            if self.counters.dropped_oversize.is_power_of_two() {
                tracing::warn!(
                    "store: dropped record {sequence} of {}/{}: {} bytes, over \
                     max_record_bytes={} (dropped_oversize = {}); the partition cannot go on \
                     past it in this store: raise max_record_bytes",
                    String::from_utf8_lossy(topic),
                    String::from_utf8_lossy(partition),
                    content.len(),
                    self.cfg.max_record_bytes,
                    self.counters.dropped_oversize
                );
            }
            return out;
        }
        // No record can stand at the last offset (the next one would
        // overflow), and a topic the log cannot name would fail every sync.
        if !valid_partition(partition) || sequence == u64::MAX {
            self.counters.dropped_invalid += 1;
            return out;
        }
        let next = self.log.next_offset(topic, partition);
        if next.is_none() && !name_fits(topic) {
            self.counters.dropped_invalid += 1;
            return out;
        }
        if next.is_none() && self.log.set_aside(topic, partition) {
            self.counters.dropped_set_aside += 1;
            return out;
        }
        let st = self.part(topic, partition);
        st.known_head = Some(st.known_head.map_or(sequence, |h| h.max(sequence)));
        st.last_seen = Some(now);
        // The live case: the next record in order, nothing held, nothing
        // fetched, nothing known beyond it. Same outcome as the general path
        // below, with one partition lookup instead of several.
        let in_order = next.map_or(sequence == 0, |n| n == sequence);
        if in_order && st.held.is_empty() && st.fetch.is_none() && st.known_head == Some(sequence) {
            match self.log.append(topic, partition, sequence, content) {
                Ok(()) => {
                    self.last_error = None;
                    self.counters.appended += 1;
                }
                Err(e) => {
                    self.append_failed(e);
                    self.fetch_gap(topic, partition, now, &mut out);
                }
            }
            return out;
        }
        match next {
            Some(n) if sequence < n => {
                self.counters.duplicates += 1;
                return out;
            }
            Some(n) if sequence == n => {
                self.append_run(topic, partition, sequence, content);
            }
            None if sequence == 0 => {
                self.append_run(topic, partition, sequence, content);
            }
            _ => {
                self.hold(topic, partition, sequence, content);
            }
        }
        self.fetch_gap(topic, partition, now, &mut out);
        out
    }

    fn hold(&mut self, topic: &[u8], partition: &[u8], sequence: u64, content: &[u8]) {
        let c = &self.cfg;
        let bounds = (c.max_held_records, c.max_held_bytes, c.max_held_total_bytes);
        let st = self.part(topic, partition);
        if st.held.contains(sequence) {
            self.counters.duplicates += 1;
            return;
        }
        // Past a bound, those farthest from the gap are fetched again once
        // the gap before them closes. One is always held, however large (up
        // to `max_record_bytes`): `fetch_gap` skips an expired partition's
        // gap to the first held record, so that must be where peers answer
        // from, not one past it.
        let (held, let_go) = st.held.hold_bounded(sequence, content, bounds, true);
        self.counters.dropped_held_full += let_go + u64::from(!held);
        self.counters.held += u64::from(held);
    }

    /// Appends `sequence` then every held record that now follows contiguously.
    fn append_run(&mut self, topic: &[u8], partition: &[u8], sequence: u64, content: &[u8]) {
        if let Err(e) = self.log.append(topic, partition, sequence, content) {
            self.append_failed(e);
            // Keep it: it is retried when the gap logic fetches it again.
            return;
        }
        self.last_error = None;
        self.counters.appended += 1;
        self.drain_held(topic, partition, sequence + 1);
    }

    fn drain_held(&mut self, topic: &[u8], partition: &[u8], mut next: u64) {
        loop {
            let st = self.part(topic, partition);
            // Drop anything held below `next` (duplicates of what is stored).
            st.held.drop_below(next);
            let Some(content) = st.held.remove(next) else {
                return;
            };
            if let Err(e) = self.log.append(topic, partition, next, &content) {
                self.part(topic, partition).held.insert(next, content);
                self.append_failed(e);
                return;
            }
            self.counters.appended += 1;
            next += 1;
        }
    }

    fn append_failed(&mut self, e: L::Error) {
        self.counters.append_errors += 1;
        self.last_error = Some(e.to_string());
    }

    /// Sends (or re-sends, after `fetch_retry`) a FETCH for the partition's gap.
    fn fetch_gap(&mut self, topic: &[u8], partition: &[u8], now: Instant, out: &mut Vec<Out>) {
        let next = self.log.next_offset(topic, partition);
        if next.is_none() && self.log.set_aside(topic, partition) {
            // Nothing is fetched for it: no retry deadline may stay behind
            // (one `tick` does not act on makes the loop spin).
            let st = self.part(topic, partition);
            st.fetch = None;
            st.held.clear();
            // `tick` repeats no ACK of it (the log gives no durable mark).
            st.ack_sent = None;
            return;
        }
        let cfg = self.cfg.clone();
        let st = self.part(topic, partition);
        let want_from = next.unwrap_or(0);
        // Held records below what is stored are duplicates (an append error
        // of another partition's batch can leave one re-held here).
        st.held.drop_below(want_from);
        let Some(head) = st.known_head.filter(|&h| h >= want_from) else {
            st.fetch = None;
            return;
        };
        // Nothing missing between what is stored and what is held?
        let first_held = st.held.first();
        let gap_end = match first_held {
            Some(f) if f > want_from => f - 1,
            Some(_) => return, // drain_held will make progress
            None => head,
        };
        if gap_end < want_from {
            return;
        }
        let count = (gap_end - want_from + 1).min(u64::from(cfg.max_fetch_count));
        let mut tries = 0;
        let mut answered_beyond = false;
        let mut backoff = Backoff::default();
        if let Some(f) = st.fetch {
            let fresh = now < f.retry_at(cfg.fetch_retry);
            // The FETCH in flight still covers what is missing: its answers are
            // on their way (asking again would only make the peers resend).
            if fresh && f.from <= want_from && want_from < f.end {
                return;
            }
            if !fresh && f.from == want_from {
                // Unanswered: count it. A new partition whose history nobody
                // holds any more starts at the earliest offset held.
                tries = f.tries + 1;
                answered_beyond = f.answered_beyond;
                if tries >= cfg.give_up_fetches {
                    backoff = f.backoff.doubled();
                }
                if next.is_none() && tries >= cfg.give_up_fetches {
                    if let Some(first) = first_held {
                        st.fetch = None;
                        let content = st.held.remove(first).expect("held");
                        self.append_run(topic, partition, first, &content);
                        return self.fetch_gap(topic, partition, now, out);
                    }
                }
                // A partition known already gives the gap up only when its
                // own records are all gone too (its retention deleted them:
                // the store was away longer than retention), so skipping
                // destroys nothing, and only when peers answered from past
                // the gap (live records past it prove nothing); both are in
                // `answered_beyond` (set by `on_direct_record`). A store that
                // still holds records of it waits: a peer that holds the gap
                // may only be away for now.
                if let (Some(n), Some(first), true) = (next, first_held, answered_beyond) {
                    if tries >= cfg.give_up_fetches {
                        st.fetch = None;
                        if let Err(e) = self.log.skip_to(topic, partition, first) {
                            self.append_failed(e);
                            return;
                        }
                        tracing::warn!(
                            "store: offsets {n}..{first} of {}/{} are gone from every peer \
                             (retention), as they are here; the partition continues at \
                             {first}",
                            String::from_utf8_lossy(topic),
                            String::from_utf8_lossy(partition)
                        );
                        self.counters.records_skipped += first - n;
                        self.drain_held(topic, partition, first);
                        return self.fetch_gap(topic, partition, now, out);
                    }
                }
            }
        }
        st.fetch = Some(InFlight {
            from: want_from,
            end: want_from + count,
            at: now,
            tries,
            answered_beyond,
            backoff,
        });
        let count = count as u32;
        self.counters.fetches_sent += 1;
        out.push(Out::Fetch {
            partition: partition.to_vec(),
            subject: topic.to_vec(),
            sequence: want_from,
            count,
        });
    }

    /// HEAD: the producer's last offset. Fetches anything the store lacks.
    pub fn on_head(&mut self, h: &Head<'_>, now: Instant) -> Vec<Out> {
        self.learn_head(h, now, true)
    }

    /// DIRECT-HEAD from another store (its answer to our GET-HEADS): what it
    /// holds. Beyond what we hold is a gap, fetched like any other; unlike a
    /// HEAD it says nothing about the producer being alive.
    pub fn on_peer_head(&mut self, h: &Head<'_>, now: Instant) -> Vec<Out> {
        self.learn_head(h, now, false)
    }

    /// A partition's head from its producer (which is then alive) or from
    /// another store; FETCHes what lies beyond what we hold.
    fn learn_head(&mut self, h: &Head<'_>, now: Instant, from_producer: bool) -> Vec<Out> {
        let mut out = Vec::new();
        if !valid_partition(h.address) || h.sequence == u64::MAX || !name_fits(h.subject) {
            self.counters.dropped_invalid += 1;
            return out;
        }
        if !from_producer
            && self
                .log
                .next_offset(h.subject, h.address)
                .is_some_and(|n| n > h.sequence)
        {
            // Nothing new from a peer: do not even list the partition for `tick`.
            return out;
        }
        let st = self.part(h.subject, h.address);
        st.known_head = Some(st.known_head.map_or(h.sequence, |k| k.max(h.sequence)));
        if from_producer {
            st.last_seen = Some(now);
        }
        self.fetch_gap(h.subject, h.address, now, &mut out);
        out
    }

    /// The GET-HEADS a store sends to other stores: an empty topic asks for
    /// every partition they hold (see `on_get_heads`).
    pub fn ask_peer_heads(&self) -> Out {
        Out::GetHeads { topic: Vec::new() }
    }

    /// FETCH from a consumer or another store: queue an answer from the log.
    pub fn on_fetch(&mut self, f: &Fetch<'_>) -> Vec<Out> {
        if f.address == self.address.as_slice() || f.count == 0 {
            return Vec::new();
        }
        let Some(next) = self.log.next_offset(f.subject, f.topic) else {
            self.counters.fetches_unknown += 1;
            return Vec::new();
        };
        // From the first record held when retention deleted the start of the
        // range: `count` records from there, even if the whole range asked for
        // is gone. The requester sees the answer start past what it asked and
        // knows the records before are deleted here (a consumer skips them,
        // a reader reports the loss); an empty answer would leave it asking
        // forever. Receivers tolerate records beyond the range (PROTOCOL.md).
        let first = self.log.first_offset(f.subject, f.topic).unwrap_or(0);
        let start = f.sequence.max(first);
        let end = start.saturating_add(u64::from(f.count)).min(next);
        if start >= end {
            return Vec::new();
        }
        // One job per requester and partition. A FETCH that overlaps or
        // continues the job in progress (a consumer pipelining its windows,
        // or retrying from where it stands) widens it; any other replaces it.
        self.counters.fetches_answered += 1;
        let key = ReplyKey {
            to: f.address.to_vec(),
            topic: f.subject.to_vec(),
            partition: f.topic.to_vec(),
        };
        if let Some(j) = self.replies.jobs.get_mut(&key) {
            if start <= j.end && j.next <= end {
                j.next = j.next.min(start);
                j.end = j.end.max(end);
            } else {
                *j = ReplyJob { next: start, end };
            }
            return Vec::new();
        }
        if self.replies.jobs.len() >= self.cfg.max_reply_jobs {
            // Its requester FETCHes again.
            self.replies.evict_one();
        }
        self.replies.order.push_back(key.clone());
        self.replies.jobs.insert(key, ReplyJob { next: start, end });
        Vec::new()
    }

    /// Fills `slice` with the next slice of FETCH answers (round robin over
    /// jobs); false if there is nothing to send now. The loop calls it while
    /// its XPUB can take more, so a slow peer cannot make the store buffer.
    pub fn next_reply_slice(&mut self, slice: &mut ReplySlice, now: Instant) -> bool {
        let Some(key) = self.replies.pop_ready(now) else {
            return false;
        };
        let Some(mut job) = self.replies.jobs.remove(&key) else {
            return false;
        };
        let want = ((job.end - job.next) as usize).min(self.cfg.reply_batch_records);
        let first = match self.log.read_into(
            &key.topic,
            &key.partition,
            job.next,
            want,
            self.cfg.reply_batch_bytes,
            &mut slice.records,
        ) {
            Ok(first) => first,
            Err(e) => {
                self.last_error = Some(e.to_string());
                return false;
            }
        };
        if first != Some(job.next) || slice.records.is_empty() {
            // Nothing (left) at the job's offset: it is done.
            slice.records.clear();
            return false;
        }
        slice.records.truncate(want);
        let n = slice.records.len() as u64;
        slice.to.clone_from(&key.to);
        slice.topic.clone_from(&key.topic);
        slice.partition.clone_from(&key.partition);
        slice.first = job.next;
        job.next += n;
        self.counters.records_served += n;
        if job.next < job.end {
            self.replies.order.push_back(key.clone());
            self.replies.jobs.insert(key, job);
        }
        true
    }

    /// Puts back the records of `slice` from its `sent`-th on (the
    /// requester's queue was full): they are answered again first, within the
    /// requester's job for the partition if it still has one.
    pub fn requeue_slice(&mut self, slice: &ReplySlice, sent: usize, now: Instant) {
        if sent >= slice.len() {
            return;
        }
        let from = slice.first + sent as u64;
        let end = slice.first + slice.len() as u64;
        let key = ReplyKey {
            to: slice.to.clone(),
            topic: slice.topic.clone(),
            partition: slice.partition.clone(),
        };
        if let Some(job) = self.replies.jobs.get_mut(&key) {
            job.next = job.next.min(from);
            // `next_reply_slice` put it at the back just now: search from there.
            if let Some(i) = self.replies.order.iter().rposition(|k| *k == key) {
                self.replies.order.remove(i);
            }
        } else {
            self.replies
                .jobs
                .insert(key.clone(), ReplyJob { next: from, end });
        }
        self.counters.records_served -= end - from;
        // The requester waits (its jobs with it), doubling while its queue
        // stays full; everyone else's answers go on meanwhile.
        let b = self
            .replies
            .blocked
            .entry(key.to.clone())
            .or_insert_with(|| Blocked {
                until: now,
                wait: Duration::ZERO,
                keys: Vec::new(),
            });
        b.wait = (b.wait * 2).clamp(REPLY_BACKOFF, MAX_REPLY_BACKOFF);
        b.until = now + b.wait;
        b.keys.insert(0, key);
    }

    /// A slice went out whole: its requester reads again, and waits no more
    /// next time its queue is full than the first time.
    pub fn reply_sent(&mut self, slice: &ReplySlice) {
        if !self.replies.blocked.is_empty() {
            if let Some(b) = self.replies.blocked.get(&slice.to) {
                if b.keys.is_empty() {
                    self.replies.blocked.remove(&slice.to);
                }
            }
        }
    }

    /// When FETCH answers may go out next (see [`StoreState::next_reply_slice`]):
    /// `now` if one can, None without any.
    pub fn next_reply_at(&self, now: Instant) -> Option<Instant> {
        self.replies.next_at(now)
    }

    /// GET-HEADS: a DIRECT-HEAD per partition of the topic. An empty topic
    /// (sent by other stores of ours; producers subscribe to their own topic
    /// only, so only stores see it) asks for every partition held.
    pub fn on_get_heads(&mut self, g: &GetHeads<'_>) -> Vec<Out> {
        if g.address == self.address.as_slice() {
            return Vec::new();
        }
        if g.topic.is_empty() {
            let mut out = Vec::new();
            self.heads_of(g.address, self.log.partitions(None), &mut out);
            return out;
        }
        self.heads_for(g.address, [g.topic])
    }

    /// CONSUMER-HELLO: DIRECT-HEADs for every partition of the consumer's topics.
    pub fn on_consumer_hello(&mut self, c: &ConsumerHello<'_>) -> Vec<Out> {
        if c.topic != self.address.as_slice() {
            return Vec::new();
        }
        self.heads_for(c.address, c.subjects.iter())
    }

    /// DIRECT-HEADs of every partition of `topics` to `to`. Each topic once,
    /// and at most [`MAX_HELLO_TOPICS`] of them: a CONSUMER-HELLO naming one
    /// topic a million times must not make a million answers per partition.
    fn heads_for<'t>(&self, to: &[u8], topics: impl IntoIterator<Item = &'t [u8]>) -> Vec<Out> {
        let mut out = Vec::new();
        let mut seen: rustc_hash::FxHashSet<&[u8]> = rustc_hash::FxHashSet::default();
        for topic in topics {
            if seen.len() == MAX_HELLO_TOPICS && !seen.contains(topic) {
                break;
            }
            if !seen.insert(topic) {
                continue;
            }
            self.heads_of(to, self.log.partitions(Some(topic)), &mut out);
        }
        out
    }

    /// A DIRECT-HEAD to `to` for each of `parts` that holds records. One whose
    /// records were all deleted (retention) is left out: nobody could FETCH
    /// anything of it from here, and a store that still holds them tells its
    /// own heads.
    fn heads_of(&self, to: &[u8], parts: Vec<PartKey>, out: &mut Vec<Out>) {
        for (t, p) in parts {
            let first = self.log.first_offset(&t, &p).unwrap_or(0);
            if let Some(next) = self.log.next_offset(&t, &p).filter(|&n| n > first) {
                out.push(Out::DirectHead {
                    to: to.to_vec(),
                    partition: p,
                    subject: t,
                    sequence: next - 1,
                });
            }
        }
    }

    /// TIME-QUERY: for each partition of the topic held here, a TIME-OFFSET
    /// to the requester: the first offset at or after the time asked, or the
    /// partition's next offset if no record is that late. A partition the
    /// log cannot answer for (an error) is left out; another store may.
    pub fn on_time_query(&mut self, q: &Head<'_>) -> Vec<Out> {
        let mut out = Vec::new();
        if q.topic != q.subject || q.address == self.address.as_slice() {
            return out;
        }
        for (t, p) in self.log.partitions(Some(q.subject)) {
            let Some(next) = self.log.next_offset(&t, &p) else {
                continue;
            };
            match self.log.offset_for_time(&t, &p, q.sequence) {
                Ok(found) => out.push(Out::TimeOffset {
                    to: q.address.to_vec(),
                    partition: p,
                    subject: t,
                    sequence: found.unwrap_or(next),
                }),
                Err(e) => tracing::warn!(
                    "store: TIME-QUERY of {}/{}: {e}",
                    String::from_utf8_lossy(&t),
                    String::from_utf8_lossy(&p)
                ),
            }
        }
        out
    }

    /// A subscription arrived on the XPUB: `L` + consumer address → STORE-HELLO.
    pub fn on_subscribe(&mut self, prefix: &[u8]) -> Vec<Out> {
        match prefix.split_first() {
            Some((b'L', consumer)) if !consumer.is_empty() => {
                vec![Out::StoreHello {
                    to: consumer.to_vec(),
                }]
            }
            _ => Vec::new(),
        }
    }
}

mod acks;

#[cfg(test)]
pub(crate) mod tests;
