//! The log's write buffer: appends gathered with [`Log::append_buffered`],
//! one batch per partition, each written with one write call when the owner
//! flushes ([`Log::flush_writes`]), before any sync, tick, skip or close, and
//! once [`WRITE_BUFFER_BYTES`] are gathered. Records of several producers
//! arriving interleaved still make one write per partition.
//!
//! A buffered record counts at once: [`Log::next_offset`] and
//! [`Log::first_offset`] include it. Reads see it once it is written. It is
//! the log's only write buffer (the segment's own `scratch` lives for one
//! write call).

use std::cell::Cell;

use rustc_hash::FxHashMap;

use super::error::{LogError, Result};
use super::{Found, Log, PartKey};

/// Buffered appends are written once they hold this many bytes. Small enough
/// that the buffered bodies and the segment's encoding of them stay in the
/// CPU's caches: with RECORD-BATCHes of 100 B records a store took twice the
/// CPU per record at 4 MiB (`benches/RESULTS.md`, "Store", session 22).
pub const WRITE_BUFFER_BYTES: usize = 256 << 10;

/// The buffered appends of every partition.
#[derive(Debug, Default)]
pub(super) struct WriteBuffer {
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

/// The bodies buffered for one partition: offsets `first, first + 1, ...`,
/// back to back in `data`, each ending at its entry of `ends`.
#[derive(Debug, Default)]
struct PartBatch {
    topic: Vec<u8>,
    partition: String,
    first: u64,
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl PartBatch {
    fn next(&self) -> u64 {
        self.first.saturating_add(self.ends.len() as u64)
    }
    fn bodies(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(a, &b)| &self.data[a..b])
    }
}

impl WriteBuffer {
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
    fn in_use(&self) -> &[PartBatch] {
        &self.batches[..self.live]
    }
    pub(super) fn is_empty(&self) -> bool {
        self.live == 0
    }
    /// (next offset, first offset) of what is buffered for the partition.
    pub(super) fn span(&self, topic: &[u8], partition: &str) -> Option<(u64, u64)> {
        let b = &self.batches[self.find(topic, partition)?];
        Some((b.next(), b.first))
    }
    /// (topic, partition) of every partition with buffered appends.
    pub(super) fn keys(&self) -> impl Iterator<Item = (&[u8], &str)> {
        self.in_use()
            .iter()
            .map(|b| (b.topic.as_slice(), b.partition.as_str()))
    }
    /// A new batch for a partition that has none.
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
    fn push(&mut self, i: usize, body: &[u8]) {
        let b = &mut self.batches[i];
        b.data.extend_from_slice(body);
        b.ends.push(b.data.len());
        self.bytes += body.len();
    }
    /// Forgets what is buffered, keeping the buffers' capacity.
    pub(super) fn clear(&mut self) {
        for b in &mut self.batches[..self.live] {
            b.data.clear();
            b.ends.clear();
        }
        self.index.clear();
        self.live = 0;
        self.bytes = 0;
    }
}

impl Log {
    /// Appends a body (metadata then value, see [`crate::meta`], checked by
    /// the caller as for [`Log::append_checked_bodies`]) at `offset`, the
    /// partition's next offset (any offset for a partition the log does not
    /// hold), into the write buffer: written at the next
    /// [`Log::flush_writes`], sync, [`Log::tick`], skip or close, or once
    /// [`WRITE_BUFFER_BYTES`] are buffered. [`Log::next_offset`] counts it
    /// at once; reads see it once written. An error writing the buffer may
    /// come from another partition's appends: [`Log::next_offset`] says
    /// where each partition stands.
    pub fn append_buffered(
        &mut self,
        topic: &[u8],
        partition: &str,
        offset: u64,
        body: &[u8],
    ) -> Result<()> {
        let (n, e) = self.append_buffered_run(topic, partition, offset, &mut std::iter::once(body));
        match e {
            Some(e) => Err(e),
            None if n == 1 => Ok(()),
            None => Err(LogError::Invalid("nothing was appended".into())),
        }
    }

    /// [`Log::append_buffered`] of `bodies` at `first`, `first + 1`, ...,
    /// until one fails: how many were appended, and the error of the one
    /// after them (taken from `bodies`, which yields the rest).
    pub fn append_buffered_run(
        &mut self,
        topic: &[u8],
        partition: &str,
        first: u64,
        bodies: &mut dyn Iterator<Item = &[u8]>,
    ) -> (u64, Option<LogError>) {
        if self.cfg.read_only {
            let e = LogError::ReadOnly(self.root.clone());
            return (0, bodies.next().map(|_| e));
        }
        let mut n = 0;
        let mut at = None;
        while let Some(body) = bodies.next() {
            let offset = first.saturating_add(n);
            if offset == u64::MAX {
                // No next offset could follow it.
                let e = LogError::Invalid(format!("offset {offset} is past the last one"));
                return (n, Some(e));
            }
            let i = match at {
                Some(i) => i,
                None => match self.buffer_slot(topic, partition, offset) {
                    Ok(i) => i,
                    Err(e) => return (n, Some(e)),
                },
            };
            self.buffer.push(i, body);
            at = Some(i);
            n += 1;
            if self.buffer.bytes >= WRITE_BUFFER_BYTES {
                at = None;
                if let Err(e) = self.flush_writes() {
                    // The error is the next body's, as for every error here:
                    // it is taken from `bodies` unappended, so the caller's
                    // count of what follows (from `first + n + 1`) stays
                    // true. Without this the caller labelled every later
                    // body one offset too high (a disk-full store stored
                    // records at the wrong offsets). What the failed write
                    // dropped, `next_offset` shows.
                    bodies.next();
                    return (n, Some(e));
                }
            }
        }
        (n, None)
    }

    /// The buffer's batch for the partition that `offset` continues: its
    /// own, or a new one after what the log holds (checked: the offset rule).
    fn buffer_slot(&mut self, topic: &[u8], partition: &str, offset: u64) -> Result<usize> {
        if let Some(i) = self.buffer.find(topic, partition) {
            if self.buffer.batches[i].next() == offset {
                return Ok(i);
            }
            // Not the next of the batch: write what is gathered, then the
            // log says what it expects.
            self.flush_writes()?;
        }
        if let Some(expected) = self.next_offset(topic, partition).filter(|&e| e != offset) {
            return Err(LogError::OffsetMismatch {
                topic: super::lossy(topic),
                partition: partition.to_string(),
                expected,
                got: offset,
            });
        }
        Ok(self.buffer.start(topic, partition, offset))
    }

    /// Writes the buffered appends, one write per partition. On error the
    /// others are written all the same, and a prefix of the failing one may
    /// be ([`Log::next_offset`] says where it stands); the first error is
    /// returned, and the buffer is empty either way.
    pub fn flush_writes(&mut self) -> Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        // Taken out while written (an append flushes the buffer first).
        let mut buffer = std::mem::take(&mut self.buffer);
        let mut first_err = None;
        let mut bodies: Vec<&[u8]> = Vec::new();
        for b in buffer.in_use() {
            bodies.clear();
            bodies.extend(b.bodies());
            if let Err(e) = self.append_checked_bodies(&b.topic, &b.partition, b.first, &bodies) {
                first_err.get_or_insert(e);
            }
        }
        drop(bodies);
        buffer.clear();
        self.buffer = buffer;
        first_err.map_or(Ok(()), Err)
    }

    /// The offset after the last record written to the partition's files,
    /// if it exists: [`Log::next_offset`] without the buffered appends.
    pub fn written_next(&self, topic: &[u8], partition: &str) -> Option<u64> {
        match self.find(topic, partition).ok()? {
            Found::Open(p) => Some(p.next_offset()),
            Found::Parked(next) => Some(next),
        }
    }

    /// Drops the buffered appends unwritten (after an I/O error the owner
    /// recovers from what is on disk, and fetches the rest again).
    pub fn discard_writes(&mut self) {
        self.buffer.clear();
    }

    /// The partitions with buffered appends that the log holds nothing of yet.
    pub(super) fn buffered_new(&self, topic: Option<&[u8]>) -> Vec<PartKey> {
        self.buffer
            .keys()
            .filter(|(t, p)| topic.is_none_or(|w| w == *t) && self.find(t, p).is_err())
            .map(|(t, p)| (t.to_vec(), p.to_string()))
            .collect()
    }
}
