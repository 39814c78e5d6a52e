//! Whether a record is appended, held past a gap or dropped: the one write
//! path of a store. A RECORD, a DIRECT-RECORD and a RECORD-BATCH each take
//! it: the live case (records that go on where their partition stands) is
//! appended in one call by [`StoreState::append_live`]; any other record
//! goes through [`StoreState::on_record`]'s general path.

use std::time::Instant;

use super::{valid_partition, StoreLog, StoreState};
use crate::log::format::name_fits;
use crate::node::out::Out;
use crate::wire::RecordBatch;

impl<L: StoreLog> StoreState<L> {
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

    /// RECORD-BATCH: its records, in order, as RECORDs ([`StoreState::on_record`]
    /// of each, in effect). One that goes on where the partition stands is
    /// appended whole ([`StoreState::append_live`]); a new partition, a value
    /// over `max_record_bytes`, a gap before or in it: record by record.
    pub fn on_record_batch(&mut self, b: &RecordBatch<'_>, now: Instant) -> Vec<Out> {
        let (topic, partition) = (b.subject, b.address);
        let max = self.cfg.max_record_bytes;
        let size = crate::node::producer::record_size;
        let whole = valid_partition(partition) && !b.values().any(|v| size(v.len()) > max);
        let next = self.log.next_offset(topic, partition);
        let mut out = Vec::new();
        if whole && next.is_some() {
            let mut values = b.values();
            let live = (b.sequence, b.last(), &mut values);
            if self.append_live(topic, partition, next, live, now, &mut out) {
                return out;
            }
        }
        for r in b.records() {
            out.extend(self.on_record(r.subject, r.address, r.sequence, r.content, now));
        }
        out
    }

    /// RECORD or DIRECT-RECORD: `partition` is the producer's address.
    /// Dropped if it cannot be held (too large, an invalid partition or
    /// offset, a topic the log cannot name, a partition set aside); appended
    /// if it goes on where the partition stands (then every held record that
    /// follows it too); held past a gap, which is FETCHed; or a duplicate.
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
        let run = (sequence, sequence, &mut std::iter::once(content));
        if self.append_live(topic, partition, next, run, now, &mut out) {
            return out;
        }
        let st = self.part(topic, partition);
        st.known_head = Some(st.known_head.map_or(sequence, |h| h.max(sequence)));
        st.last_seen = Some(now);
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

    /// The live case of every write (a RECORD, a DIRECT-RECORD, a
    /// RECORD-BATCH): records `first..=last`, whose values `values` yields,
    /// go on where the partition stands (`next`), with nothing held, nothing
    /// fetched and nothing known beyond `first`. Appended with one partition
    /// lookup and one call to the log; false (nothing done) if they are not
    /// live, and the caller takes them record by record through
    /// [`StoreState::on_record`]'s general path, whose outcome is the same
    /// (`a_batch_and_its_records_one_by_one_store_and_answer_alike`).
    ///
    /// An append that fails leaves the partition as the general path
    /// would: the gap is FETCHed up to the record that failed (the newest
    /// seen so far), and what follows it is held past it.
    fn append_live<'v>(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        next: Option<u64>,
        (first, last, values): (u64, u64, &mut impl Iterator<Item = &'v [u8]>),
        now: Instant,
        out: &mut Vec<Out>,
    ) -> bool {
        if !next.map_or(first == 0, |n| n == first) {
            return false;
        }
        let st = self.part(topic, partition);
        let live =
            st.held.is_empty() && st.fetch.is_none() && st.known_head.is_none_or(|h| h <= first);
        if !live {
            return false;
        }
        st.known_head = Some(last);
        st.last_seen = Some(now);
        let (appended, bytes, failed) = if first == last {
            // One record: the log's single append (no iterator to drive).
            let one = values.next().unwrap_or_default();
            match self.log.append(topic, partition, first, one) {
                Ok(()) => (1, one.len() as u64, None),
                Err(e) => (0, 0, Some(e)),
            }
        } else {
            // Measured here, where the iterator is known (no call through
            // a `dyn` more per record).
            let mut measured = Measured::new(&mut *values);
            let (n, failed) = self.log.append_run(topic, partition, first, &mut measured);
            (n, measured.bytes_of(n), failed)
        };
        self.counters.appended += appended;
        self.counters.bytes_appended += bytes;
        let Some(e) = failed else {
            self.last_error = None;
            return true;
        };
        let failed_at = first + appended;
        self.part(topic, partition).known_head = Some(failed_at);
        self.append_failed(e);
        self.fetch_gap(topic, partition, now, out);
        for (sequence, content) in (failed_at + 1..).zip(values) {
            out.extend(self.on_record(topic, partition, sequence, content, now));
        }
        true
    }

    pub(super) fn hold(&mut self, topic: &[u8], partition: &[u8], sequence: u64, content: &[u8]) {
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
    pub(super) fn append_run(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        sequence: u64,
        content: &[u8],
    ) {
        if let Err(e) = self.log.append(topic, partition, sequence, content) {
            self.append_failed(e);
            // Keep it: it is retried when the gap logic fetches it again.
            return;
        }
        self.last_error = None;
        self.counters.appended += 1;
        self.counters.bytes_appended += content.len() as u64;
        self.drain_held(topic, partition, sequence + 1);
    }

    pub(super) fn drain_held(&mut self, topic: &[u8], partition: &[u8], mut next: u64) {
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
            self.counters.bytes_appended += content.len() as u64;
            next += 1;
        }
    }

    pub(super) fn append_failed(&mut self, e: L::Error) {
        self.counters.append_errors += 1;
        self.note_failure(e.to_string());
    }
}

/// The values a run hands to [`StoreLog::append_run`], measured as the log
/// takes them: the bytes of those it appended, without another pass.
struct Measured<I> {
    values: I,
    taken: u64,
    bytes: u64,
    last: u64,
}

impl<I> Measured<I> {
    fn new(values: I) -> Self {
        Self {
            values,
            taken: 0,
            bytes: 0,
            last: 0,
        }
    }

    /// Bytes of the first `appended` values: all taken, or all but the last
    /// (the one whose error the log returned, taken from the run).
    fn bytes_of(&self, appended: u64) -> u64 {
        if self.taken > appended {
            self.bytes - self.last
        } else {
            self.bytes
        }
    }
}

impl<'v, I: Iterator<Item = &'v [u8]>> Iterator for Measured<I> {
    type Item = &'v [u8];

    fn next(&mut self) -> Option<&'v [u8]> {
        let v = self.values.next()?;
        self.taken += 1;
        self.last = v.len() as u64;
        self.bytes += self.last;
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.values.size_hint()
    }
}
