//! Durability: where the log decides what is durable, and the one group
//! commit.
//!
//! Appends are written to the segment files (visible to readers) before
//! [`Log::append_batch`] returns (buffered ones at the next flush, see
//! `buffer.rs`); an offset becomes durable once an fdatasync covered it, and
//! [`Log::durable_next`] says how far that is (a store acknowledges only
//! below it). One sync covers every append since the last (group commit):
//! [`Log::sync`] on the writer's thread, or [`Log::begin_sync`] →
//! [`SyncBatch::run`] on any thread → [`Log::finish_sync_into`] while
//! appends go on, which tells exactly which partitions reached which durable
//! offset ([`Durable`]): what a store turns into ACKs, without looking at
//! the partitions the sync did not cover. Which partitions a sync looks at is
//! the log's `dirty` list; when the fsync policy wants a sync is decided
//! here too: by the log itself after appends and in [`Log::tick`], or, once
//! the owner runs the syncs ([`Log::sync_elsewhere`]), for the owner by
//! [`Log::sync_due`] and [`Log::next_sync_at`].
//!
//! Opening makes what the log found durable ([`sync_opened`], one syncfs for
//! a large log); a clean [`Log::close`] leaves [`CLEAN_FILE`] so that the next
//! open need not.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::config::{FsyncPolicy, LogConfig};
use super::damage::{set_aside_at_open, Damaged};
use super::error::{LogError, Result};
use super::partition::{self, Partition};
use super::{io, unknown_partition, Found, Log, PartKey};

/// What [`Log::begin_sync`] took: run it anywhere, then [`Log::finish_sync`].
#[derive(Debug)]
pub struct SyncBatch {
    cfg: Arc<LogConfig>,
    pub(super) parts: Vec<(PartKey, partition::PartitionSync)>,
    failed: Vec<(PartKey, LogError)>,
    /// Writing the buffered appends first failed (see `buffer.rs`).
    flush_error: Option<LogError>,
}

/// The outcome of a [`SyncBatch`], per partition.
#[derive(Debug)]
pub struct SyncDone {
    results: Vec<(PartKey, u64, Result<()>)>,
    flush_error: Option<LogError>,
}

/// A partition a sync made durable further: every offset below `next`
/// reached fdatasync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durable {
    pub topic: Vec<u8>,
    pub partition: String,
    pub next: u64,
}

impl SyncBatch {
    /// True if nothing needs syncing.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty() && self.failed.is_empty() && self.flush_error.is_none()
    }

    /// Step 2: the fdatasyncs; call it on any thread.
    pub fn run(self) -> SyncDone {
        // Directories shared by the batch's partitions (their topic's, the
        // root) are fsynced once for all of them.
        let mut synced_dirs = rustc_hash::FxHashSet::default();
        let mut results: Vec<_> = self
            .parts
            .into_iter()
            .map(|(key, job)| {
                let r = job.run_sharing(&self.cfg, &mut synced_dirs);
                (key, job.target, r)
            })
            .collect();
        results.extend(self.failed.into_iter().map(|(key, e)| (key, 0, Err(e))));
        SyncDone {
            results,
            flush_error: self.flush_error,
        }
    }
}

/// From this many partitions on, opening a log makes them durable with one
/// syncfs instead of an fdatasync and a directory fsync each (about 0.35 ms
/// per partition here, even when nothing is dirty: a store that has held
/// 100k partitions, one per Spark task, would take half a minute to start).
/// Below it the partitions' own syncs are cheaper than a syncfs, which also
/// writes back whatever else is dirty on the filesystem.
pub(crate) const SYNCFS_FROM_PARTITIONS: usize = 1000;

/// What a log found at open is what counts from now on: makes it durable,
/// with one syncfs for a large log ([`SYNCFS_FROM_PARTITIONS`]). A partition
/// that cannot sync is set aside ([`LogConfig::isolate_damaged`]) or fails the
/// open; if syncfs itself fails, each partition syncs on its own.
pub(super) fn sync_opened(
    cfg: &LogConfig,
    root: &Path,
    parts: &mut BTreeMap<PartKey, Box<Partition>>,
    damaged: &mut BTreeMap<PartKey, Damaged>,
    now: u64,
) -> Result<()> {
    if parts.len() >= SYNCFS_FROM_PARTITIONS {
        match io::sync_fs(cfg, root) {
            Ok(()) => {
                parts.values_mut().for_each(|p| p.mark_synced(now));
                return Ok(());
            }
            Err(e) => tracing::warn!("{e}; syncing each partition instead"),
        }
    }
    let mut failed = Vec::new();
    for (key, p) in parts.iter_mut() {
        if let Err(e) = p.sync(now) {
            if !cfg.isolate_damaged {
                return Err(e);
            }
            failed.push((key.clone(), e));
        }
    }
    for (key, e) in failed {
        if let Some(p) = parts.remove(&key) {
            set_aside_at_open(damaged, key, p.dir().to_path_buf(), &e);
        }
    }
    Ok(())
}

/// Left in the root by a [`Log::close`] that synced everything (empty, not a
/// valid escaped topic name). The next writable open removes it (durably)
/// before anything is written, and need not make what the log holds durable:
/// it was. An open after a crash finds none and syncs all (see
/// [`SYNCFS_FROM_PARTITIONS`]); a store restarted cleanly on a busy machine
/// does not write back other programs' data with a syncfs.
pub const CLEAN_FILE: &str = ".clean";

/// Removes the log's clean mark, durably; whether there was one.
pub(super) fn take_clean_mark(cfg: &LogConfig, root: &Path) -> Result<bool> {
    let path = root.join(CLEAN_FILE);
    if !path.exists() {
        return Ok(false);
    }
    io::remove(cfg, &path)?;
    io::sync_dir(cfg, root)?;
    Ok(true)
}

/// Leaves the log's clean mark, durably.
pub(super) fn leave_clean_mark(cfg: &LogConfig, root: &Path) -> Result<()> {
    let path = root.join(CLEAN_FILE);
    let f = io::create(cfg, &path)?;
    io::sync_data(cfg, &f, &path)?;
    io::sync_dir(cfg, root)
}

impl Log {
    /// From now on the owner runs the group commits the fsync policy calls
    /// for: appends and [`Log::tick`] no longer fdatasync, and the owner asks
    /// [`Log::sync_due`] / [`Log::next_sync_at`] and runs
    /// [`Log::begin_sync`] → [`SyncBatch::run`] (on a thread of its own) →
    /// [`Log::finish_sync_into`]. What a store does, so that its thread
    /// keeps appending while the last batch is fdatasynced.
    pub fn sync_elsewhere(&mut self) {
        self.sync_elsewhere = true;
    }

    /// The durable high-water mark: every offset below it has reached fdatasync.
    pub fn durable_next(&self, topic: &[u8], partition: &str) -> Option<u64> {
        match self.find(topic, partition).ok()? {
            Found::Open(p) => Some(p.durable_next()),
            Found::Parked(next) => Some(next),
        }
    }

    /// fdatasyncs every partition with unsynced appends (group commit),
    /// buffered ones written first.
    pub fn sync(&mut self) -> Result<()> {
        self.sync_into(&mut Vec::new())
    }

    /// [`Log::sync`], adding to `durable` each partition it made durable
    /// further.
    pub fn sync_into(&mut self, durable: &mut Vec<Durable>) -> Result<()> {
        let mut first_err = self.flush_writes().err();
        let now = self.cfg.now();
        for ((topic, partition), p) in self.parts.iter_mut() {
            let before = p.durable_next();
            match p.sync(now) {
                Ok(()) if p.durable_next() > before => durable.push(Durable {
                    topic: topic.clone(),
                    partition: partition.clone(),
                    next: p.durable_next(),
                }),
                Ok(()) => {}
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if first_err.is_none() {
            for key in self.dirty.drain(..) {
                if let Some(p) = self.parts.get_mut(&key) {
                    p.listed = false;
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Group commit off the writer's thread, step 1: takes from every
    /// partition with unsynced appends what needs syncing (file paths; the
    /// batch opens one file at a time). Run the batch on another thread
    /// ([`SyncBatch::run`]) while appends go on, then hand the result to
    /// [`Log::finish_sync`]. A partition that cannot be prepared fails its
    /// part of the batch.
    pub fn begin_sync(&mut self) -> SyncBatch {
        let flush_error = self.flush_writes().err();
        self.last_commit = Some(Instant::now());
        let mut parts = Vec::new();
        let mut failed = Vec::new();
        let mut keep = Vec::new();
        for key in std::mem::take(&mut self.dirty) {
            let Some(p) = self.parts.get_mut(&key) else {
                continue;
            };
            match p.begin_sync() {
                Ok(Some(job)) => {
                    p.listed = false;
                    p.syncing = true;
                    parts.push((key, job));
                }
                Ok(None) => p.listed = false,
                // Reported at every sync until the log is reopened.
                Err(e) => {
                    failed.push((key.clone(), e));
                    keep.push(key);
                }
            }
        }
        self.dirty = keep;
        SyncBatch {
            cfg: self.cfg.clone(),
            parts,
            failed,
            flush_error,
        }
    }

    /// Step 3: makes durable what the batch synced; returns the first error
    /// (those partitions stay unusable until reopen).
    pub fn finish_sync(&mut self, done: SyncDone) -> Result<()> {
        self.finish_sync_into(done, &mut Vec::new())
    }

    /// [`Log::finish_sync`], adding to `durable` each partition of the batch
    /// whose sync succeeded and moved its durable offset, with that offset: exactly what this
    /// sync made durable, and nothing about the partitions it did not cover.
    pub fn finish_sync_into(&mut self, done: SyncDone, durable: &mut Vec<Durable>) -> Result<()> {
        let now = self.cfg.now();
        let mut first_err = done.flush_error;
        for (key, target, result) in done.results {
            if let Some(p) = self.parts.get_mut(&key) {
                p.syncing = false;
                let before = p.durable_next();
                match p.finish_sync(target, result, now) {
                    // A sync of directory entries alone moves no offset.
                    Ok(()) if p.durable_next() == before => {}
                    Ok(()) => durable.push(Durable {
                        next: p.durable_next(),
                        topic: key.0,
                        partition: key.1,
                    }),
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// True if the fsync policy wants a group commit now (see
    /// [`Log::next_sync_at`]).
    pub fn sync_due(&self) -> bool {
        self.next_sync_at().is_some_and(|at| at <= Instant::now())
    }

    /// When the fsync policy wants the next group commit run by the owner
    /// ([`Log::sync_elsewhere`]), if anything is unsynced: `always` at once;
    /// `interval` at once if a partition has `flush_messages` records
    /// unsynced, else `flush_interval_ms` after the last group commit
    /// started (so a record waits at most one interval plus one sync);
    /// `never` not at all. Looks at the partitions written since the last
    /// sync only. Measured on the monotonic clock, not the log's (a store's
    /// syncs must not wait for a wall clock stepped back, or frozen by a
    /// test to drive retention); a log that syncs on its writer's thread
    /// times each partition by the log's clock instead ([`Log::tick`]).
    pub fn next_sync_at(&self) -> Option<Instant> {
        if self.cfg.fsync == FsyncPolicy::Never {
            return None;
        }
        let mut unsynced = false;
        for p in self.dirty_parts().filter(|p| p.needs_sync()) {
            if self.cfg.fsync == FsyncPolicy::Always || p.over_flush_messages() {
                return Some(Instant::now());
            }
            unsynced = true;
        }
        let interval = Duration::from_millis(self.cfg.flush_interval_ms);
        unsynced.then(|| match self.last_commit {
            Some(t) => t + interval,
            None => Instant::now(),
        })
    }

    /// True if any usable partition has appends that are not yet durable and
    /// not yet taken by a [`Log::begin_sync`].
    pub fn has_unsynced(&self) -> bool {
        self.dirty_parts().any(Partition::needs_sync)
    }

    fn dirty_parts(&self) -> impl Iterator<Item = &Partition> {
        self.dirty
            .iter()
            .filter_map(|k| self.parts.get(k).map(|p| &**p))
    }

    /// fdatasyncs one partition (buffered appends written first).
    pub fn sync_partition(&mut self, topic: &[u8], partition: &str) -> Result<()> {
        self.flush_writes()?;
        let now = self.cfg.now();
        let key = (topic.to_vec(), partition.to_owned());
        match self.parts.get_mut(&key) {
            Some(p) => p.sync(now),
            // Its registry line was synced when it was parked.
            None if self.parked.contains(topic, partition) => Ok(()),
            None => Err(unknown_partition(topic, partition)),
        }
    }
}
