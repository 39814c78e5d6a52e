//! The store's protocol decisions as a pure state machine: no sockets, no files.
//!
//! The event loop (`run.rs`) hands it every message ([`StoreState::on_message`])
//! and subscription ([`StoreState::on_subscription`]) that arrives, and sends
//! every [`Out`] it returns; at each turn it calls [`StoreState::maintain`]
//! (group commit, storage errors, ACKs, timers). Storage is behind
//! [`StoreLog`], implemented by the durable segment log (and by an in-memory
//! model in tests), so every rule below is unit-tested in isolation:
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
//! Where each decision is made, one file each:
//!
//! | file | decides |
//! |---|---|
//! | `state/receive.rs` | what each message and subscription is to a store: records (stamped with their append time when they came without metadata), HEADs, FETCHes, hellos; who takes which form of answers and ACKs |
//! | `state/ingest.rs` | whether a record is appended, held or dropped: the one write path, a record's and a batch's ([`StoreState::on_record`], [`StoreState::on_record_batch`]) |
//! | `state/gaps.rs` | which gap to FETCH, when to retry it or give it up (`StoreState::fetch_gap`), what a HEAD shows missing |
//! | `state/acks.rs` | what is durable and ACKed, and which partitions a turn looks at ([`StoreState::on_durable`], [`StoreState::tick`]) |
//! | `state/replies.rs` | how a FETCH is answered ([`StoreState::on_fetch`], [`StoreState::next_reply_slice`]) |
//! | `state/heads.rs` | DIRECT-HEADs and TIME-OFFSETs, and when to ask other stores for their heads |
//! | `state/health.rs` | storage errors: what is reported, when the log recovers ([`StoreState::maintain`]) |
//!
//! The group commit itself is the log's, run by [`durable`](super::durable).

use std::time::{Duration, Instant};

use rustc_hash::FxBuildHasher;

use crate::node::answers::{AnswerForms, Takers};
use crate::node::batch::Batch;
use crate::node::held::Held;
use crate::node::out::Backoff;

mod acks;
mod gaps;
pub(super) mod heads;
mod health;
mod ingest;
mod receive;
mod replies;

pub use super::counters::StoreCounters;
use heads::PeerHeads;
use health::Health;
use replies::Replies;
pub use replies::{ReplySlice, MAX_REPLY_BACKOFF, REPLY_BACKOFF};

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
    /// Bytes of the partition's records on disk (its segment files; the
    /// write buffer not counted), for the cluster view. 0 for storage that
    /// does not say.
    fn bytes(&self, _topic: &[u8], _partition: &[u8]) -> u64 {
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
    /// How each requester's FETCHes are answered.
    forms: AnswerForms,
    /// Partitions whose producer takes ADDRESSED-ACKs.
    addressed_acks: Takers,
    /// When to ask the other stores for every head they hold.
    peer_heads: PeerHeads,
    /// Storage errors: which one is reported, when to recover.
    health: Health,
    counters: StoreCounters,
    /// The last storage error, kept until an append succeeds again.
    last_error: Option<String>,
    /// Bodies made for records that came without metadata, reused.
    bodies: Vec<u8>,
}

impl<L: StoreLog> StoreState<L> {
    pub fn new(address: Vec<u8>, log: L, cfg: StoreStateConfig) -> Self {
        let now = Instant::now();
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
            forms: AnswerForms::default(),
            addressed_acks: Takers::addressed_acks(),
            peer_heads: PeerHeads::new(now),
            health: Health::new(now),
            counters: StoreCounters::default(),
            last_error: None,
            bodies: Vec::new(),
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
}

#[cfg(test)]
pub(crate) mod tests;
