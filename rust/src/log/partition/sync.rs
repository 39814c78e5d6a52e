//! Durability of one partition: group commit (one fdatasync per file for
//! every append since the last), the durable high-water offset, and the
//! split sync ([`PartitionSync`]) a log runs off its writer's thread.

use std::path::PathBuf;

use rustc_hash::FxHashSet;

use crate::log::config::{FsyncPolicy, LogConfig};
use crate::log::error::Result;
use crate::log::io;
use crate::log::segment::paths;

use super::Partition;

/// What one partition needs synced, taken by [`Partition::begin_sync`].
#[derive(Debug)]
pub struct PartitionSync {
    /// Segment files to fdatasync, opened one at a time by [`PartitionSync::run`].
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
    /// Every offset below this is durable once [`PartitionSync::run`] succeeds.
    pub target: u64,
}

impl PartitionSync {
    /// Step 2, on any thread: the fdatasyncs and directory fsyncs.
    pub fn run(&self, cfg: &LogConfig) -> Result<()> {
        self.run_sharing(cfg, &mut FxHashSet::default())
    }

    /// [`PartitionSync::run`] as one of a batch: a directory in `synced`
    /// (fsynced earlier in the same batch) is not fsynced again. Every entry
    /// a batch's partitions made was made before the batch was taken, so one
    /// fsync of their topic's directory and of the root covers them all; a
    /// batch of 10,000 new partitions of one topic made 20,000 more fsyncs
    /// before, and a producer's first ACK waited for them.
    pub(crate) fn run_sharing(
        &self,
        cfg: &LogConfig,
        synced: &mut FxHashSet<PathBuf>,
    ) -> Result<()> {
        for path in &self.files {
            io::sync_path(cfg, path)?;
        }
        for d in &self.dirs {
            if synced.contains(d) {
                continue;
            }
            io::sync_dir(cfg, d)?;
            synced.insert(d.clone());
        }
        Ok(())
    }
}

impl Partition {
    /// What the fsync policy says after an append, for a log that syncs on
    /// its writer's thread: `always` syncs now, `interval` if due.
    pub(crate) fn sync_after_append(&mut self, now: u64) -> Result<()> {
        match self.cfg.fsync {
            FsyncPolicy::Always => self.sync(now),
            FsyncPolicy::Interval => self.maybe_sync(now),
            FsyncPolicy::Never => Ok(()),
        }
    }

    /// Group commit: one fdatasync per file covers every append since the last
    /// sync. A failed fdatasync leaves the partition unusable until reopen (the
    /// kernel may have dropped the dirty pages, so retrying could lie).
    pub(crate) fn sync(&mut self, now: u64) -> Result<()> {
        self.check_usable()?;
        let next = self.next_offset();
        if self.durable_next < next || !self.unsynced.is_empty() || !self.dirty_dirs.is_empty() {
            let r = (|| -> Result<()> {
                for base in &self.unsynced {
                    io::sync_path(&self.cfg, &paths(&self.dir, *base).0)?;
                }
                if self.durable_next < next {
                    let path = &self.active.seg.log_path;
                    match self.active.open_file() {
                        Some(f) => io::sync_data(&self.cfg, f, path)?,
                        None => io::sync_path(&self.cfg, path)?,
                    }
                }
                for d in &self.dirty_dirs {
                    io::sync_dir(&self.cfg, d)?;
                }
                Ok(())
            })();
            if let Err(e) = r {
                self.failed = Some(e.to_string());
                return Err(e);
            }
        }
        self.mark_synced(now);
        Ok(())
    }

    /// Records that everything written so far is durable: after
    /// [`Partition::sync`]'s own fdatasyncs, or a syncfs of the whole
    /// filesystem done by the caller.
    pub(crate) fn mark_synced(&mut self, now: u64) {
        self.unsynced.clear();
        self.dirty_dirs.clear();
        self.durable_next = self.next_offset();
        self.unsynced_messages = 0;
        self.last_sync_ms = now;
    }

    /// Group commit off the writer's thread, step 1: takes what needs an
    /// fdatasync (the paths of the active segment and of sealed ones not yet
    /// synced, directories with new entries) and the offset it makes
    /// durable. Appends may go on while [`PartitionSync::run`] works elsewhere.
    pub(crate) fn begin_sync(&mut self) -> Result<Option<PartitionSync>> {
        self.check_usable()?;
        let next = self.next_offset();
        if self.durable_next >= next && self.unsynced.is_empty() && self.dirty_dirs.is_empty() {
            return Ok(None);
        }
        let mut files: Vec<PathBuf> = self
            .unsynced
            .drain(..)
            .map(|base| paths(&self.dir, base).0)
            .collect();
        if self.durable_next < next {
            files.push(self.active.seg.log_path.to_path_buf());
        }
        self.unsynced_messages = 0;
        Ok(Some(PartitionSync {
            files,
            dirs: std::mem::take(&mut self.dirty_dirs),
            target: next,
        }))
    }

    /// Step 3: records the outcome of [`PartitionSync::run`]. A failure leaves
    /// the partition unusable until reopen, as an inline sync failure does.
    pub(crate) fn finish_sync(&mut self, target: u64, result: Result<()>, now: u64) -> Result<()> {
        match result {
            Ok(()) => {
                self.durable_next = self.durable_next.max(target);
                self.last_sync_ms = now;
                Ok(())
            }
            Err(e) => {
                self.failed = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// True if `flush_messages` records are unsynced (and not yet taken by
    /// a sync).
    pub(crate) fn over_flush_messages(&self) -> bool {
        self.unsynced_messages >= self.cfg.flush_messages
    }

    /// True if appends (or rolled segments) are not yet durable and the
    /// partition is usable (a failed one waits for recovery).
    pub(crate) fn needs_sync(&self) -> bool {
        self.failed.is_none()
            && (self.durable_next < self.next_offset() || !self.unsynced.is_empty())
    }

    /// Syncs if `flush_messages` records are unsynced or `flush_interval_ms` passed.
    pub(crate) fn maybe_sync(&mut self, now: u64) -> Result<()> {
        if self.durable_next == self.next_offset() && self.unsynced_messages == 0 {
            return Ok(());
        }
        if self.unsynced_messages >= self.cfg.flush_messages
            || now.saturating_sub(self.last_sync_ms) >= self.cfg.flush_interval_ms
        {
            self.sync(now)?;
        }
        Ok(())
    }

    /// When an interval sync falls due, if anything is unsynced.
    pub(crate) fn sync_deadline(&self) -> Option<u64> {
        (self.cfg.fsync == FsyncPolicy::Interval
            && self.durable_next < self.next_offset()
            && self.failed.is_none())
        .then(|| self.last_sync_ms.saturating_add(self.cfg.flush_interval_ms))
    }
}
