//! Retention and parking: where the log deletes.
//!
//! Every `retention_check_ms` [`Log::tick`] runs a retention sweep
//! ([`Log::enforce_retention`] runs sweeps until nothing is left): each
//! partition deletes its oldest sealed segments past `retain_hours` or
//! `retain_bytes` (`Partition::enforce_retention` picks them), and a
//! partition left with no record, or whose every record expired, is parked:
//! its next offset goes into `ROOT/.parked` (synced), then its files and
//! directory are deleted ([`Log::park_empty`]). A sweep of [`Log::tick`]
//! parks at most [`PARK_BATCH`] partitions and deletes at most
//! [`RETAIN_BATCH`] other segments, leaving the rest to the next tick
//! ([`Log::retention_pending`]). Parked partitions are forgotten
//! `forget_parked_hours` after they were parked ([`Log::forget_parked`]).
//!
//! The registry file itself (its lines, loading, appending, rewriting) and
//! the compact map of parked partitions in memory are [`super::parked`];
//! this module decides when to write it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::config::LogConfig;
use super::damage::Damaged;
use super::error::{LogError, Result};
use super::partition::Partition;
use super::{io, list_dirty, parked, Log, PartKey};

/// Stale lines in `ROOT/.parked` (of partitions appended to again, parked
/// twice, or forgotten) tolerated before the file is rewritten: at least
/// this many, and at least as many as there are parked partitions.
const PARKED_STALE_MIN: usize = 1024;

/// The most partitions one retention sweep of [`Log::tick`] parks (about
/// 0.2 ms each here, mostly the file system's unlinks).
pub(super) const PARK_BATCH: usize = 256;

/// The most segments one retention sweep of [`Log::tick`] deletes otherwise
/// (two unlinks each): the sealed segments of many partitions can expire
/// together (producers that ran together, a store back after a long stop).
pub(super) const RETAIN_BATCH: usize = 256;

/// The parked partitions of the log at `root` (see [`parked`]) that have no
/// directory, and the registry's line count. A writable log drops the stale
/// lines (rewriting the file) and the empty directories a crash while
/// parking left.
pub(super) fn open_parked(
    cfg: &LogConfig,
    root: &Path,
    parts: &BTreeMap<PartKey, Box<Partition>>,
    damaged: &BTreeMap<PartKey, Damaged>,
    empty_dirs: &[(PartKey, PathBuf)],
) -> Result<(parked::Parked, usize)> {
    let now = cfg.now();
    let loaded = parked::load(root, now)?;
    let mut got = loaded.parked;
    for (t, p) in parts.keys().chain(damaged.keys()) {
        got.remove(t, p);
    }
    if let Some(before) = cfg.forget_parked_before(now) {
        got.forget(before);
    }
    if cfg.read_only {
        return Ok((got, loaded.lines));
    }
    // A partition directory without segments holds nothing: a parked
    // partition's next offset is in `.parked`, and one forgotten, or left
    // without a segment by a crash, has nothing to keep.
    for (_, dir) in empty_dirs {
        let _ = fs::remove_dir(dir);
    }
    // Lines without their parking time get it written.
    if loaded.lines == got.len() && loaded.untimed == 0 {
        return Ok((got, loaded.lines));
    }
    let n = parked::rewrite(cfg, root, &got, &[], now)?;
    Ok((got, n))
}

impl Log {
    /// Whether the last sweep of [`Log::tick`] left retention work for the
    /// next (it parks and deletes a batch at a time): call it again soon.
    pub fn retention_pending(&self) -> bool {
        self.park_more || self.retain_more
    }

    /// Partitions parked now (no record left; see [`parked`]).
    pub fn parked_count(&self) -> usize {
        self.parked.len()
    }

    /// Applies retention to every partition now, parking every partition
    /// left with no record; returns segments deleted.
    pub fn enforce_retention(&mut self) -> Result<usize> {
        let mut n = self.retention_sweep(false)?;
        while self.park_more || self.retain_more {
            n += self.retention_sweep(false)?;
        }
        Ok(n)
    }

    /// One retention sweep; a `sliced` one parks at most [`PARK_BATCH`]
    /// partitions and deletes at most [`RETAIN_BATCH`] other segments (the
    /// rest at the next sweep: `park_more`, `retain_more`).
    pub(super) fn retention_sweep(&mut self, sliced: bool) -> Result<usize> {
        if self.cfg.read_only {
            return Err(LogError::ReadOnly(self.root.clone()));
        }
        let now = self.cfg.now();
        let mut first_err = None;
        // An active segment all past the age limit is left for parking below
        // (its files simply go), unless something keeps the partition from
        // it (a sync batch holds it, it failed): then it rolls to an empty
        // one as before.
        let (park_at_most, mut budget) = if sliced {
            (Some(PARK_BATCH), RETAIN_BATCH)
        } else {
            (None, usize::MAX)
        };
        self.forget_parked(now);
        let mut n = self.retain_each(now, |p| !p.may_park(), &mut budget, &mut first_err);
        match self.park_empty(now, park_at_most) {
            Ok(k) => n += k,
            Err(e) => {
                // Not an error of the log: a partition not parked (or parked
                // with files left behind) is the same partition. Expired
                // records still go, the way they did before parking.
                tracing::warn!("parking partitions with no record left: {e}");
                n += self.retain_each(now, |_| true, &mut budget, &mut first_err);
            }
        }
        self.close_idle_files();
        first_err.map_or(Ok(n), Err)
    }

    /// [`Partition::enforce_retention`] on every partition, rolling an
    /// expired active segment where `roll` says so; returns the segments
    /// deleted, and keeps the first error (one partition's failure does not
    /// keep retention from the others). Stops once it deleted `budget`
    /// segments (`retain_more`: the next sweep goes on).
    fn retain_each(
        &mut self,
        now: u64,
        roll: impl Fn(&Partition) -> bool,
        budget: &mut usize,
        first_err: &mut Option<LogError>,
    ) -> usize {
        let mut n = 0;
        let keys: Vec<PartKey> = self.parts.keys().cloned().collect();
        for key in keys {
            if *budget == 0 {
                break;
            }
            let Some(p) = self.parts.get_mut(&key) else {
                continue;
            };
            let rolls = roll(p);
            match p.enforce_retention(now, rolls, budget) {
                Ok(0) => {}
                Ok(deleted) => {
                    list_dirty(&mut self.dirty, &key, p);
                    n += deleted;
                    // Rolling an expired active segment opened a new file:
                    // when many partitions expire at once (producers that
                    // ended together, a store back after a long stop), the
                    // budget must hold during the sweep, not only after it.
                    self.close_idle_files();
                }
                Err(e) => {
                    list_dirty(&mut self.dirty, &key, p);
                    first_err.get_or_insert(e);
                }
            }
        }
        // Spent: there may be more (if not, the next sweep finds nothing).
        self.retain_more = *budget == 0;
        n
    }

    /// Records `entries` (partition → next offset, parked `at`) in
    /// `ROOT/.parked`, synced: appended, or the whole file rewritten once
    /// stale lines outnumber the parked partitions or an earlier append may
    /// have left a torn line. On an error the next write rewrites it.
    pub(super) fn write_parked(&mut self, entries: &[(PartKey, u64)], at: u64) -> Result<()> {
        let r = if self.parked_rewrite || self.parked_stale() {
            parked::rewrite(&self.cfg, &self.root, &self.parked, entries, at)
                .map(|n| self.parked_lines = n)
        } else {
            let mut lines = String::new();
            for ((t, p), next) in entries {
                lines.push_str(&parked::encode(t, p, parked::Spot { next: *next, at })?);
            }
            parked::append(&self.cfg, &self.root, &lines)
                .map(|()| self.parked_lines += entries.len())
        };
        self.parked_rewrite = r.is_err();
        r
    }

    /// Stale lines in `ROOT/.parked` (of partitions appended to again,
    /// parked twice, or forgotten) outnumber the parked partitions: time to
    /// rewrite it.
    fn parked_stale(&self) -> bool {
        let stale = self.parked_lines.saturating_sub(self.parked.len());
        stale > self.parked.len().max(PARKED_STALE_MIN)
    }

    /// Forgets the parked partitions parked `forget_parked_hours` ago or
    /// more, rewriting `ROOT/.parked` once its stale lines outnumber the
    /// rest (until then a forgotten line is left out when the log opens).
    /// Cheap when none is due.
    fn forget_parked(&mut self, now: u64) {
        let Some(before) = self.cfg.forget_parked_before(now) else {
            return;
        };
        let n = self.parked.forget(before);
        if n == 0 {
            return;
        }
        tracing::debug!(
            "{}: forgot {n} partition(s) parked {}h ago or more",
            self.root.display(),
            self.cfg.forget_parked_hours.unwrap_or_default()
        );
        if self.parked_stale() {
            match parked::rewrite(&self.cfg, &self.root, &self.parked, &[], now) {
                Ok(lines) => self.parked_lines = lines,
                Err(e) => {
                    // The next parking rewrites it; the lines left meanwhile
                    // are forgotten again when the log opens.
                    tracing::warn!("rewriting the parked partitions' registry: {e}");
                    self.parked_rewrite = true;
                }
            }
        }
    }

    /// Parks every partition whose records retention deleted, or would
    /// delete now (see [`parked`]): its next offset goes into `ROOT/.parked`
    /// (synced first), then its files and directory are deleted. A crash in
    /// between leaves both, and the directory wins. Returns how many segments
    /// holding records went.
    fn park_empty(&mut self, now: u64, at_most: Option<usize>) -> Result<usize> {
        let mut with_records = 0;
        let cap = at_most.unwrap_or(usize::MAX);
        let keys: Vec<(PartKey, u64)> = self
            .parts
            .iter()
            .filter(|(_, p)| p.parkable(now))
            .take(cap)
            .map(|(k, p)| {
                with_records += usize::from(p.has_records());
                (k.clone(), p.next_offset())
            })
            .collect();
        // Without a cap every one is taken; with one, some may be left. Not
        // when the registry cannot be written (below): no sweep at every tick.
        self.park_more = false;
        if keys.is_empty() {
            return Ok(0);
        }
        self.write_parked(&keys, now)?;
        self.park_more = keys.len() == cap;
        let mut topic_dirs: Vec<PathBuf> = Vec::new();
        let mut first_err = None;
        for (key, next) in &keys {
            let p = self.parts.remove(key).expect("listed above");
            if let Some(d) = p.dir().parent() {
                if topic_dirs.last().is_none_or(|l| l.as_path() != d) {
                    topic_dirs.push(d.to_path_buf());
                }
            }
            // Files left behind (an error here) open as the same partition
            // (with its expired records, if it had any): the directory wins
            // over the registry line, and a later sweep parks it again.
            if let Err(e) = p.remove_parked() {
                first_err.get_or_insert(e);
            }
            let spot = parked::Spot {
                next: *next,
                at: now,
            };
            self.parked.insert(&key.0, &key.1, spot);
        }
        self.dirty.retain(|(t, p)| !self.parked.contains(t, p));
        for d in &topic_dirs {
            if let Err(e) = io::sync_dir(&self.cfg, d) {
                first_err.get_or_insert(e);
            }
        }
        if let Some(e) = first_err {
            // Parked all the same (the registry says so); what is left on
            // disk opens as the same partition.
            tracing::warn!("parking partitions: {e}");
        }
        Ok(with_records)
    }
}
