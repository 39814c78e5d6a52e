//! The counters every node exposes (`stats()` in Python), and a store's
//! [`SyncTimes`]: written by the node (or syncer) thread, read by anyone.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Counters a node exposes (`stats()` in Python). Relaxed atomics: the node
/// thread writes, anyone reads.
#[derive(Debug, Default)]
pub struct Stats {
    /// Messages (and beacons) dropped because they were malformed.
    pub malformed: AtomicU64,
    /// Of `malformed`: frames of the consumer-group extension (GROUP-MEMBER,
    /// COMMIT, COMMIT-QUERY, COMMIT-OFFSETS) that did not decode.
    pub group_malformed: AtomicU64,
    /// Well-formed messages that were not for this node (exact key mismatch).
    pub ignored: AtomicU64,
    pub records_sent: AtomicU64,
    /// Bytes of the bodies of `records_sent` (metadata and value, as the
    /// producer holds them: [`crate::meta`]), counted per batch.
    pub bytes_sent: AtomicU64,
    pub records_received: AtomicU64,
    /// Bytes of the bodies of `records_received` (a record that came
    /// without metadata: its value and the 9 bytes of the body it is
    /// given), counted per message ([`crate::wire::Message::body_bytes`]).
    pub bytes_received: AtomicU64,
    pub delivered: AtomicU64,
    pub duplicates: AtomicU64,
    pub gaps: AtomicU64,
    pub fetches_sent: AtomicU64,
    /// Offsets a consumer skipped: no node that answers holds them any more.
    pub records_lost: AtomicU64,
    /// Partitions a consumer waits on: no node answered its FETCH for the gap
    /// in `give_up_fetches` tries (the stores that hold it are away, or not
    /// reachable).
    pub stalled_partitions: AtomicU64,
    /// Partitions a consumer keeps the protocol state of (the others it knows,
    /// idle, only by their position).
    pub partitions_active: AtomicU64,
    /// Partition positions a consumer forgot (not heard of for `forget_after`).
    pub partitions_forgotten: AtomicU64,
    /// Times a consumer kept only the position of a partition caught up and
    /// not heard of for `idle_after`.
    pub partitions_idled: AtomicU64,
    pub fetches_received: AtomicU64,
    pub direct_records_sent: AtomicU64,
    /// Bytes of the bodies of `direct_records_sent`.
    pub direct_bytes_sent: AtomicU64,
    pub acks_received: AtomicU64,
    pub heads_sent: AtomicU64,
    /// Beacons relayed (towers).
    pub beacons: AtomicU64,
    pub peers: AtomicU64,
    /// Beacons of new nodes not remembered because
    /// [`crate::node::beacon::MAX_PEERS`] were known (nodes and towers): a
    /// node refused beacons again every interval, so this counts beacons, not
    /// nodes.
    pub beacons_refused: AtomicU64,
    /// Times a consumer stopped reading because the application had
    /// `max_buffered` records or `max_buffered_bytes` waiting.
    pub pauses: AtomicU64,
    /// ACKs without a store address (C-reference stores) a producer
    /// received while its `min_acks` was more than the stores it can count
    /// apart: records wait for stores that can never be told apart.
    pub min_acks_unreachable: AtomicU64,
    /// Secure mode: messages and subscriptions of authenticated peers that
    /// their role or topics do not allow, dropped.
    pub denied: AtomicU64,
    /// Secure mode: connections refused at the handshake: a key not in the
    /// trust directory (ZAP), another mechanism (a plaintext peer), a CURVE
    /// handshake that failed or that the peer broke off.
    pub auth_refused: AtomicU64,
    /// Secure mode: beacons naming a node (UUID) that does not belong to the
    /// key that sent them, refused: an insider taking over another node's
    /// identity in discovery (towers and nodes).
    pub identity_refused: AtomicU64,
    /// Times the node warned that it heard no tower for a few seconds
    /// ([`crate::node::beacon::SILENT_AFTER`]).
    pub towers_silent: AtomicU64,
    /// ACKs a producer received for an offset past the last it sent: the
    /// stores hold records of its partition it did not write (an earlier
    /// producer of the same `address_seed`), and drop its records at those
    /// offsets as duplicates.
    pub acks_ahead: AtomicU64,
}

impl Stats {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    /// Sets a counter a node's state keeps (it only grows there).
    pub fn set(c: &AtomicU64, n: u64) {
        c.store(n, Relaxed);
    }

    /// Name/value pairs, for display and Python dicts.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let g = |c: &AtomicU64| c.load(Relaxed);
        vec![
            ("malformed", g(&self.malformed)),
            ("group_malformed", g(&self.group_malformed)),
            ("ignored", g(&self.ignored)),
            ("records_sent", g(&self.records_sent)),
            ("bytes_sent", g(&self.bytes_sent)),
            ("records_received", g(&self.records_received)),
            ("bytes_received", g(&self.bytes_received)),
            ("delivered", g(&self.delivered)),
            ("duplicates", g(&self.duplicates)),
            ("gaps", g(&self.gaps)),
            ("fetches_sent", g(&self.fetches_sent)),
            ("records_lost", g(&self.records_lost)),
            ("stalled_partitions", g(&self.stalled_partitions)),
            ("partitions_active", g(&self.partitions_active)),
            ("partitions_forgotten", g(&self.partitions_forgotten)),
            ("partitions_idled", g(&self.partitions_idled)),
            ("fetches_received", g(&self.fetches_received)),
            ("direct_records_sent", g(&self.direct_records_sent)),
            ("direct_bytes_sent", g(&self.direct_bytes_sent)),
            ("acks_received", g(&self.acks_received)),
            ("heads_sent", g(&self.heads_sent)),
            ("beacons", g(&self.beacons)),
            ("peers", g(&self.peers)),
            ("beacons_refused", g(&self.beacons_refused)),
            ("pauses", g(&self.pauses)),
            ("min_acks_unreachable", g(&self.min_acks_unreachable)),
            ("denied", g(&self.denied)),
            ("auth_refused", g(&self.auth_refused)),
            ("identity_refused", g(&self.identity_refused)),
            ("towers_silent", g(&self.towers_silent)),
            ("acks_ahead", g(&self.acks_ahead)),
        ]
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

    pub(crate) fn record(&self, took: Duration) {
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

#[cfg(test)]
mod tests;
