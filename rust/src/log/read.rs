//! Reading and looking up: records, offsets, time look-up and the
//! listing of topics and partitions, open or parked.

use super::damage::damaged_error;
use super::error::{LogError, Result};
use super::partition::{PartitionInfo, StoredRecord};
use super::{lossy, unknown_partition, Found};
use super::{Log, PartKey};

/// A read of a parked partition (no record, at `next`): nothing from `next`,
/// out of range from anywhere else, as for an open one.
fn parked_read(topic: &[u8], partition: &str, start: u64, next: u64) -> Result<()> {
    if start == next {
        return Ok(());
    }
    Err(LogError::OffsetOutOfRange {
        topic: lossy(topic),
        partition: partition.to_owned(),
        requested: start,
        first: next,
        next,
    })
}

fn parked_info(topic: &[u8], partition: &str, next: u64) -> PartitionInfo {
    PartitionInfo {
        topic: topic.to_vec(),
        partition: partition.to_owned(),
        first_offset: next,
        next_offset: next,
        durable_next: next,
        bytes: 0,
        segments: 0,
    }
}

impl Log {
    pub(super) fn find(&self, topic: &[u8], partition: &str) -> Result<Found<'_>> {
        let key = (topic.to_vec(), partition.to_owned());
        if let Some(p) = self.parts.get(&key) {
            return Ok(Found::Open(p));
        }
        if let Some(next) = self.parked.get(topic, partition) {
            return Ok(Found::Parked(next));
        }
        Err(match self.damaged.get(&key) {
            Some(d) => damaged_error(&key, &d.why),
            None => unknown_partition(topic, partition),
        })
    }

    /// Reads from `start`: at most `max_records` records and `max_bytes` of
    /// bodies (but always one record if one is available), each with its
    /// metadata ([`StoredRecord`]).
    pub fn read(
        &self,
        topic: &[u8],
        partition: &str,
        start: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<StoredRecord>> {
        match self.find(topic, partition)? {
            Found::Open(p) => p.read(start, max_records, max_bytes),
            Found::Parked(next) => parked_read(topic, partition, start, next).map(|()| Vec::new()),
        }
    }

    /// [`Log::read`] without building records: `f(offset, append time, body)`
    /// sees each record in order, its body (metadata then value, see
    /// [`crate::meta`]; `meta::value_of` gives the value) borrowed from the
    /// read buffer, with no allocation per record. A record of a format 1
    /// segment is handed over as the body `meta::wrap(Some(append time),
    /// value)`, made in a scratch buffer. `max_bytes` counts bodies. Returns
    /// how many records `f` saw.
    pub fn read_with(
        &self,
        topic: &[u8],
        partition: &str,
        start: u64,
        max_records: usize,
        max_bytes: usize,
        f: impl FnMut(u64, u64, &[u8]),
    ) -> Result<usize> {
        match self.find(topic, partition)? {
            Found::Open(p) => p.read_with(start, max_records, max_bytes, f),
            Found::Parked(next) => parked_read(topic, partition, start, next).map(|()| 0),
        }
    }

    /// The offset the next append to this partition must carry, if it
    /// exists (buffered appends count).
    pub fn next_offset(&self, topic: &[u8], partition: &str) -> Option<u64> {
        if let Some((next, _)) = self.buffer.span(topic, partition) {
            return Some(next);
        }
        match self.find(topic, partition).ok()? {
            Found::Open(p) => Some(p.next_offset()),
            Found::Parked(next) => Some(next),
        }
    }

    /// Reads every record of a partition, checking each one's CRC and offset,
    /// and returns how many it holds (0 for a parked one). Opening checks
    /// only each segment's tail, so this is what finds damage in the middle
    /// of a segment (`dafka log inspect --verify`).
    pub fn verify(&self, topic: &[u8], partition: &str) -> Result<u64> {
        match self.find(topic, partition)? {
            Found::Open(p) => p.verify(),
            Found::Parked(_) => Ok(0),
        }
    }

    /// The first available offset, if the partition exists (or has
    /// buffered appends).
    pub fn first_offset(&self, topic: &[u8], partition: &str) -> Option<u64> {
        match self.find(topic, partition) {
            Ok(Found::Open(p)) => Some(p.first_offset()),
            Ok(Found::Parked(next)) => Some(next),
            Err(_) => self.buffer.span(topic, partition).map(|(_, first)| first),
        }
    }

    /// The first offset whose record time (its create time, else its append
    /// time) is at or after `ts` (ms since the epoch), if any: with create
    /// times out of order, the first offset whose newest record time so far
    /// reaches `ts`, as Kafka's `offsetsForTimes`.
    pub fn offset_for_time(&self, topic: &[u8], partition: &str, ts: u64) -> Result<Option<u64>> {
        match self.find(topic, partition)? {
            Found::Open(p) => p.offset_for_time(ts),
            Found::Parked(_) => Ok(None),
        }
    }

    /// Every topic, sorted.
    pub fn topics(&self) -> Vec<Vec<u8>> {
        let mut t: Vec<Vec<u8>> = self.parts.keys().map(|(t, _)| t.clone()).collect();
        t.extend(self.parked.topics().map(<[u8]>::to_vec));
        t.sort_unstable();
        t.dedup();
        t
    }

    /// The listing of every partition, or of one topic's, sorted (parked
    /// ones included: no record, no segment).
    pub fn partitions(&self, topic: Option<&[u8]>) -> Vec<PartitionInfo> {
        let want = |t: &Vec<u8>| topic.is_none_or(|w| w == t.as_slice());
        let mut out: Vec<PartitionInfo> = self
            .parts
            .iter()
            .filter(|((t, _), _)| want(t))
            .map(|(_, p)| p.info())
            .collect();
        if self.parked.is_empty() {
            return out;
        }
        out.extend(
            self.parked
                .iter(topic)
                .map(|(t, p, s)| parked_info(t, &p, s.next)),
        );
        out.sort_unstable_by(|a, b| (&a.topic, &a.partition).cmp(&(&b.topic, &b.partition)));
        out
    }

    /// (topic, partition) of every partition that is not parked (each in a
    /// directory of its own; it may be empty), or of one topic's, sorted;
    /// then those that have only buffered appends so far.
    pub fn open_partitions(&self, topic: Option<&[u8]>) -> Vec<PartKey> {
        let mut keys: Vec<PartKey> = self
            .parts
            .keys()
            .filter(|(t, _)| topic.is_none_or(|w| w == t.as_slice()))
            .cloned()
            .collect();
        if !self.buffer.is_empty() {
            keys.extend(self.buffered_new(topic));
        }
        keys
    }

    /// The listing entry of one partition.
    pub fn partition(&self, topic: &[u8], partition: &str) -> Option<PartitionInfo> {
        match self.find(topic, partition).ok()? {
            Found::Open(p) => Some(p.info()),
            Found::Parked(next) => Some(parked_info(topic, partition, next)),
        }
    }
}
