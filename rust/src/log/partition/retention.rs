//! Retention: deleting expired segments, and whether a partition with no
//! record left may be parked.

use std::fs;

use crate::log::error::{LogError, Result};
use crate::log::io;

use super::Partition;

impl Partition {
    /// Deletes the oldest sealed segments while they are older than `retain_hours`
    /// (by their newest record) or the partition is over `retain_bytes`. With
    /// `roll_expired`, an active segment all past the age limit too (rolled
    /// first); without, it is left for the log to park the partition
    /// ([`Partition::parkable`]). Deletes at most `budget` segments, taking
    /// each from it. Returns how many segments went.
    pub(crate) fn enforce_retention(
        &mut self,
        now: u64,
        roll_expired: bool,
        budget: &mut usize,
    ) -> Result<usize> {
        let retain_ms = self.cfg.retain_ms();
        let retain_bytes = self.cfg.retain_bytes;
        let mut total = self.bytes();
        let mut n = 0;
        while let Some((&base, seg)) = self.sealed.first_key_value() {
            if *budget == 0 {
                return Ok(n);
            }
            let old = retain_ms.is_some_and(|r| now.saturating_sub(seg.tail.max_append) > r);
            let big = retain_bytes.is_some_and(|b| total > b);
            if !old && !big {
                break;
            }
            let size = seg.tail.size;
            let (log_path, index_path) = (seg.log_path.clone(), seg.index.path().to_path_buf());
            io::remove(&self.cfg, &log_path)?;
            self.sealed.remove(&base);
            self.unsynced.retain(|b| *b != base);
            self.dir_changed();
            total -= size;
            n += 1;
            *budget -= 1;
            io::remove(&self.cfg, &index_path)?;
        }
        // The active segment too, once all of it is past the age limit (as
        // Kafka does): a partition whose producer is gone (every finished
        // Spark task's) never fills its segment, so it never rolled and was
        // kept forever. Roll to an empty segment at the same next offset (the
        // partition keeps its place: no store fetches it again) and delete
        // the old one. Size retention leaves the active segment alone.
        let tail = &self.active.seg.tail;
        let expired = retain_ms.is_some_and(|r| now.saturating_sub(tail.max_append) > r);
        let due = self.sealed.is_empty() && tail.next > self.active.seg.base && expired;
        if roll_expired && due && *budget > 0 {
            self.roll()?;
            n += self.enforce_retention(now, true, budget)?;
        }
        Ok(n)
    }

    /// Whether the partition can be parked (see [`crate::log::parked`]): it
    /// holds no record, or only records all past the age limit at `now` (in
    /// one segment), and nothing is in flight. Only its next offset matters.
    pub(crate) fn parkable(&self, now: u64) -> bool {
        if !self.sealed.is_empty() || !self.may_park() {
            return false;
        }
        !self.has_records()
            || self
                .cfg
                .retain_ms()
                .is_some_and(|r| now.saturating_sub(self.active.seg.tail.max_append) > r)
    }

    /// Whether nothing keeps the partition from being parked once it holds
    /// no record: not failed, not in a sync batch, a writable log.
    pub(crate) fn may_park(&self) -> bool {
        self.failed.is_none() && !self.syncing && !self.cfg.read_only
    }

    /// Deletes the files and the directory of a [`Partition::parkable`]
    /// partition, index first (a crash in between leaves the segment, which
    /// opens as the same partition, and the next sweep parks it).
    pub(crate) fn remove_parked(mut self) -> Result<()> {
        self.close_file();
        // Nothing left for `Drop` to write.
        self.failed = Some("parked".to_owned());
        io::remove(&self.cfg, self.active.seg.index.path())?;
        io::remove(&self.cfg, &self.active.seg.log_path)?;
        fs::remove_dir(&self.dir).map_err(|e| LogError::io("remove directory", &*self.dir, e))
    }
}
