//! Durability: where the log decides what is durable.
//!
//! Appends are written to the segment files (visible to readers) before
//! [`Log::append_batch`] returns; an offset becomes durable once an
//! fdatasync covered it, and [`Log::durable_next`] says how far that is (a
//! store acknowledges only below it). One sync covers every append since the
//! last (group commit): [`Log::sync`] on the writer's thread, or
//! [`Log::begin_sync`] → [`SyncBatch::run`] on any thread →
//! [`Log::finish_sync`] while appends go on. Which partitions a sync looks at
//! is the log's `dirty` list; when a partition is due under
//! [`FsyncPolicy::Interval`](super::FsyncPolicy::Interval) is
//! `Partition::sync_due` / `maybe_sync` (checked by [`Log::tick`]).
//!
//! Opening makes what the log found durable ([`sync_opened`], one syncfs for
//! a large log); a clean [`Log::close`] leaves [`CLEAN_FILE`] so that the next
//! open need not.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::config::LogConfig;
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
}

/// The outcome of a [`SyncBatch`], per partition.
#[derive(Debug)]
pub struct SyncDone {
    results: Vec<(PartKey, u64, Result<()>)>,
}

impl SyncBatch {
    /// True if nothing needs syncing.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty() && self.failed.is_empty()
    }

    /// Step 2: the fdatasyncs; call it on any thread.
    pub fn run(self) -> SyncDone {
        let mut results: Vec<_> = self
            .parts
            .into_iter()
            .map(|(key, job)| {
                let r = job.run(&self.cfg);
                (key, job.target, r)
            })
            .collect();
        results.extend(self.failed.into_iter().map(|(key, e)| (key, 0, Err(e))));
        SyncDone { results }
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
    /// The durable high-water mark: every offset below it has reached fdatasync.
    pub fn durable_next(&self, topic: &[u8], partition: &str) -> Option<u64> {
        match self.find(topic, partition).ok()? {
            Found::Open(p) => Some(p.durable_next()),
            Found::Parked(next) => Some(next),
        }
    }

    /// fdatasyncs every partition with unsynced appends (group commit).
    pub fn sync(&mut self) -> Result<()> {
        let now = self.cfg.now();
        let mut first_err = None;
        for p in self.parts.values_mut() {
            if let Err(e) = p.sync(now) {
                first_err.get_or_insert(e);
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
        }
    }

    /// Step 3: makes durable what the batch synced; returns the first error
    /// (those partitions stay unusable until reopen).
    pub fn finish_sync(&mut self, done: SyncDone) -> Result<()> {
        let now = self.cfg.now();
        let mut first_err = None;
        for (key, target, result) in done.results {
            if let Some(p) = self.parts.get_mut(&key) {
                p.syncing = false;
                if let Err(e) = p.finish_sync(target, result, now) {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// True if some partition's `flush_messages` / `flush_interval_ms` says a
    /// sync is due (for owners that sync with [`Log::begin_sync`]).
    pub fn sync_due(&self) -> bool {
        let now = self.cfg.now();
        self.dirty_parts().any(|p| p.sync_due(now))
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

    /// fdatasyncs one partition.
    pub fn sync_partition(&mut self, topic: &[u8], partition: &str) -> Result<()> {
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
