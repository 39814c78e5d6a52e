//! Appends: the offset rule (an append must start at the next offset),
//! writing a batch in chunks that fit the active segment, rolling (never
//! mixing segment formats in one file), and skipping ahead.

use crate::log::error::{LogError, Result};
use crate::log::format::{FORMAT_VERSION, MAX_VALUE_LEN, RECORD_HEADER_LEN};
use crate::log::io;
use crate::log::segment::{Active, Records};

use super::Partition;

impl Partition {
    /// Appends `records` at offsets `first, first + 1, ...`, rolling segments as
    /// needed (the log then applies the fsync policy). On an error a prefix of the
    /// batch may be stored (see [`Partition::next_offset`]); no partial record is.
    ///
    /// A segment holds records of one format: the first append after opening
    /// a partition whose last segment an older build wrote (format 1) rolls a
    /// new segment (or, when that one holds no record, rewrites its header).
    pub(crate) fn append(
        &mut self,
        scratch: &mut Vec<u8>,
        first: u64,
        records: Records<'_>,
        now: u64,
    ) -> Result<()> {
        self.check_usable()?;
        let expected = self.next_offset();
        if first != expected {
            return Err(LogError::OffsetMismatch {
                topic: self.topic_lossy(),
                partition: self.name.clone(),
                expected,
                got: first,
            });
        }
        if let Some(len) = (0..records.len())
            .map(|i| records.stored_len(i))
            .find(|&len| len > MAX_VALUE_LEN)
        {
            return Err(LogError::Invalid(format!(
                "record of {len} bytes is over the {MAX_VALUE_LEN}-byte limit"
            )));
        }
        if !records.is_empty() && self.active.seg.version != FORMAT_VERSION {
            self.upgrade_active()?;
        }
        let limit = self.cfg.segment_bytes;
        let mut i = 0;
        while i < records.len() {
            let mut size = self.active.seg.tail.size;
            let mut j = i;
            while j < records.len() {
                let rl = (RECORD_HEADER_LEN + records.stored_len(j)) as u64;
                if (self.active.seg.records() > 0 || j > i) && size + rl > limit {
                    break;
                }
                size += rl;
                j += 1;
            }
            if j == i {
                self.roll()?;
                continue;
            }
            self.write_chunk(scratch, first + i as u64, now, records.slice(i, j))?;
            i = j;
        }
        Ok(())
    }

    /// Makes the active segment one of the current format, before the first
    /// append to a partition whose last segment is of format 1: a new segment
    /// after it, or, when it holds no record, its header rewritten. A failure
    /// leaves the partition unusable until reopen (the header may be half
    /// written, or not synced).
    fn upgrade_active(&mut self) -> Result<()> {
        let r = if self.active.seg.records() > 0 {
            self.roll()
        } else {
            let r = self.active.upgrade_empty(&self.cfg);
            if let Err(e) = &r {
                self.failed = Some(format!(
                    "rewriting the empty segment {} in format {FORMAT_VERSION}: {e}",
                    self.active.seg.log_path.display()
                ));
            }
            r
        };
        if r.is_ok() {
            tracing::info!(
                "{}/{}: appending in segment format {FORMAT_VERSION} from offset {}",
                self.topic_lossy(),
                self.name,
                self.next_offset()
            );
        }
        r
    }

    fn write_chunk(
        &mut self,
        scratch: &mut Vec<u8>,
        first: u64,
        now: u64,
        records: Records<'_>,
    ) -> Result<()> {
        let old = self.active.seg.tail.size;
        // Reopened first if it was closed: failing here wrote nothing.
        self.active.file(self.cfg.read_only)?;
        if let Err(e) = self.active.write(&self.cfg, scratch, first, now, records) {
            let path = self.active.seg.log_path.clone();
            let undo = self
                .active
                .file(self.cfg.read_only)
                .and_then(|f| io::set_len(&self.cfg, f, &path, old));
            if let Err(e2) = undo {
                self.failed = Some(format!("{e}; removing the partial write failed: {e2}"));
            }
            return Err(e);
        }
        self.unsynced_messages += records.len() as u64;
        Ok(())
    }

    pub(super) fn roll(&mut self) -> Result<()> {
        let next = self.next_offset();
        // On failure appends go on into the current segment (`create` leaves
        // no stray segment file inside its offset range).
        let new = Active::create(&self.cfg, &self.dir, next, &self.gauge)?;
        let old = std::mem::replace(&mut self.active, new);
        let seg = old.seal(&self.cfg);
        if self.durable_next < seg.tail.next {
            self.unsynced.push(seg.base);
        }
        self.sealed.insert(seg.base, seg);
        self.dir_changed();
        Ok(())
    }

    /// Drops every record and continues at `offset` (past the next offset):
    /// what a store does once the records between are gone from every peer
    /// (as a Kafka follower truncates fully and starts at the leader's log
    /// start). A new empty segment at `offset` comes first, then every older
    /// one is deleted; a crash in between leaves the old segments and an empty
    /// one beyond them, which recovery drops as a torn roll (the partition is
    /// as before, and the store skips again).
    pub(crate) fn skip_to(&mut self, offset: u64) -> Result<()> {
        self.check_usable()?;
        let next = self.next_offset();
        if offset <= next {
            return Err(LogError::Invalid(format!(
                "skip to offset {offset}: the partition already reaches {next}"
            )));
        }
        let new = Active::create(&self.cfg, &self.dir, offset, &self.gauge)?;
        let old = std::mem::replace(&mut self.active, new);
        let old = old.seal(&self.cfg);
        self.sealed.insert(old.base, old);
        self.dir_changed();
        while let Some((base, seg)) = self.sealed.pop_first() {
            self.unsynced.retain(|b| *b != base);
            let r = io::remove(&self.cfg, &seg.log_path)
                .and_then(|()| io::remove(&self.cfg, seg.index.path()));
            if let Err(e) = r {
                // The files no longer match what is in memory: unusable
                // until a reopen recovers it from the files.
                self.failed = Some(format!("skipping to offset {offset}: {e}"));
                return Err(e);
            }
        }
        Ok(())
    }
}
