//! One partition's log: a directory holding one active segment and a `BTreeMap` of
//! sealed ones by base offset. Owns the offset rule (appends must equal the next
//! offset), rolling (never mixing segment formats in one file), group commit and
//! the durable high-water offset, reads across segments, lookup by time and
//! retention.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::LogConfig;
use super::error::{LogError, Result};
use super::format::{parse_segment_file_name, INDEX_EXT, LOG_EXT};
use super::io::{self, Gauge};
use super::recovery::{self, Sealed};
use super::segment::{finish_index, paths, Active, Segment};

mod append;
mod read;
mod retention;
mod sync;

pub use read::StoredRecord;
pub use sync::PartitionSync;

/// What the listing API reports about a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Topic name.
    pub topic: Vec<u8>,
    /// Partition name.
    pub partition: String,
    /// First available offset.
    pub first_offset: u64,
    /// Offset the next append must carry (one past the last record).
    pub next_offset: u64,
    /// Every offset below this has reached fdatasync.
    pub durable_next: u64,
    /// Bytes on disk in segment files.
    pub bytes: u64,
    /// Number of segments, the active one included.
    pub segments: usize,
}

/// One partition.
#[derive(Debug)]
pub struct Partition {
    cfg: Arc<LogConfig>,
    /// The log's count of open segment files.
    gauge: Gauge,
    topic: Vec<u8>,
    name: String,
    dir: Box<Path>,
    sealed: BTreeMap<u64, Segment>,
    active: Active,
    durable_next: u64,
    /// Sealed segments (base offsets) whose last writes have not reached fdatasync.
    unsynced: Vec<u64>,
    /// Directories whose entries changed since the last sync (innermost first).
    dirty_dirs: Vec<PathBuf>,
    unsynced_messages: u64,
    last_sync_ms: u64,
    failed: Option<String>,
    /// Listed in the log's `dirty` list (see [`crate::log::Log`]).
    pub(crate) listed: bool,
    /// When the log last appended here (its own counter), for closing the
    /// files of the partitions used least recently.
    pub(crate) last_used: u64,
    /// Taken by a [`crate::log::SyncBatch`] not yet finished: not parked
    /// meanwhile (the batch would sync files that are gone).
    pub(crate) syncing: bool,
}
impl Partition {
    /// Creates a partition in `dir` whose first record will be `first_offset`.
    pub(crate) fn create(
        cfg: Arc<LogConfig>,
        root: &Path,
        dir: PathBuf,
        topic: Vec<u8>,
        name: String,
        first_offset: u64,
        gauge: &Gauge,
    ) -> Result<Partition> {
        io::create_dir_all(&cfg, &dir)?;
        let active = Active::create(&cfg, &dir, first_offset, gauge)?;
        let topic_dir = dir.parent().unwrap_or(root).to_path_buf();
        let now = cfg.now();
        Ok(Partition {
            dirty_dirs: vec![dir.clone(), topic_dir, root.to_path_buf()],
            gauge: gauge.clone(),
            cfg,
            topic,
            name,
            dir: dir.into_boxed_path(),
            sealed: BTreeMap::new(),
            active,
            durable_next: first_offset,
            unsynced: Vec::new(),
            unsynced_messages: 0,
            last_sync_ms: now,
            failed: None,
            listed: false,
            last_used: 0,
            syncing: false,
        })
    }

    /// Opens and recovers the partition in `dir`; `None` if it holds no segment.
    pub(crate) fn open(
        cfg: Arc<LogConfig>,
        dir: PathBuf,
        topic: Vec<u8>,
        name: String,
        gauge: &Gauge,
        sync_now: bool,
    ) -> Result<Option<Partition>> {
        let mut logs = Vec::new();
        let mut indexes = Vec::new();
        let entries = fs::read_dir(&dir).map_err(|e| LogError::io("list", &dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| LogError::io("list", &dir, e))?;
            let fname = entry.file_name();
            match fname.to_str().and_then(parse_segment_file_name) {
                Some((base, LOG_EXT)) => logs.push(base),
                Some((base, INDEX_EXT)) => indexes.push(base),
                _ => {}
            }
        }
        logs.sort_unstable();
        if !cfg.read_only {
            for base in indexes.iter().filter(|b| logs.binary_search(b).is_err()) {
                io::remove(&cfg, &paths(&dir, *base).1)?;
            }
        }
        let Some((&last, rest)) = logs.split_last() else {
            return Ok(None);
        };
        let mut sealed = BTreeMap::new();
        let mut active_base = last;
        for (i, &base) in rest.iter().enumerate() {
            let next_base = logs[i + 1];
            match recovery::open_sealed(&cfg, &dir, base, next_base)? {
                Sealed::Whole(seg) => {
                    sealed.insert(base, seg);
                }
                Sealed::TornTail(e) if next_base == last && !cfg.read_only => {
                    tracing::warn!(
                        "{e}; the last sealed segment was torn before it was synced, so the segment \
                         after it is dropped and it is recovered as the active one"
                    );
                    let (log_path, index_path) = paths(&dir, last);
                    io::remove(&cfg, &log_path)?;
                    io::remove(&cfg, &index_path)?;
                    active_base = base;
                }
                Sealed::TornTail(e) => return Err(e),
            }
        }
        let active = recovery::open_active(&cfg, &dir, active_base, gauge)?;
        let next = active.seg.tail.next;
        let now = cfg.now();
        let cfg_read_only = cfg.read_only;
        let mut p = Partition {
            gauge: gauge.clone(),
            cfg,
            topic,
            name,
            dir: Box::from(dir.as_path()),
            sealed,
            active,
            durable_next: next,
            unsynced: Vec::new(),
            dirty_dirs: if cfg_read_only { Vec::new() } else { vec![dir] },
            unsynced_messages: 0,
            last_sync_ms: now,
            failed: None,
            listed: false,
            last_used: 0,
            syncing: false,
        };
        if !p.cfg.read_only {
            // What survived is what counts from now on: it must be made
            // durable, here or by the caller (`sync_now` false: one syncfs
            // for a whole log, then [`Partition::mark_synced`]).
            p.durable_next = p.first_offset();
            if sync_now {
                p.sync(now)?;
            }
        }
        Ok(Some(p))
    }

    fn topic_lossy(&self) -> String {
        String::from_utf8_lossy(&self.topic).into_owned()
    }

    fn check_usable(&self) -> Result<()> {
        if let Some(reason) = &self.failed {
            return Err(LogError::Failed {
                topic: self.topic_lossy(),
                partition: self.name.clone(),
                reason: reason.clone(),
            });
        }
        Ok(())
    }

    /// Offset the next append must carry.
    pub fn next_offset(&self) -> u64 {
        self.active.seg.tail.next
    }

    /// First available offset.
    pub fn first_offset(&self) -> u64 {
        self.sealed
            .first_key_value()
            .map_or(self.active.seg.base, |(b, _)| *b)
    }

    /// Every offset below this has reached fdatasync.
    pub fn durable_next(&self) -> u64 {
        self.durable_next
    }

    /// Bytes on disk in segment files.
    pub fn bytes(&self) -> u64 {
        self.sealed.values().map(|s| s.tail.size).sum::<u64>() + self.active.seg.tail.size
    }

    /// The listing entry of this partition.
    pub fn info(&self) -> PartitionInfo {
        PartitionInfo {
            topic: self.topic.clone(),
            partition: self.name.clone(),
            first_offset: self.first_offset(),
            next_offset: self.next_offset(),
            durable_next: self.durable_next,
            bytes: self.bytes(),
            segments: self.sealed.len() + 1,
        }
    }

    /// The partition's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Why the partition is unusable, after an I/O error it could not undo.
    pub(crate) fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Whether the partition holds a record.
    pub(crate) fn has_records(&self) -> bool {
        self.active.seg.tail.next > self.first_offset()
    }

    /// The partition's directory gained or lost an entry: the next sync
    /// fsyncs it.
    fn dir_changed(&mut self) {
        if !self.dirty_dirs.iter().any(|d| **d == *self.dir) {
            self.dirty_dirs.push(self.dir.to_path_buf());
        }
    }

    /// Writes the active segment's pending index entries out (with one for
    /// the last record, as a close does) and frees their buffer: for a
    /// partition that went idle. An index that fails to write is dropped
    /// for scans, as on any index write.
    pub(crate) fn settle_index(&mut self) {
        if !self.cfg.read_only && self.failed.is_none() && self.active.seg.index.has_pending() {
            finish_index(&self.cfg, &mut self.active.seg);
        }
    }

    /// Whether the index holds entries in memory, not yet on file.
    #[cfg(test)]
    pub(crate) fn index_pending(&self) -> bool {
        self.active.seg.index.has_pending()
    }

    /// Whether the active segment's file is open.
    pub(crate) fn file_open(&self) -> bool {
        self.active.open_file().is_some()
    }

    /// Closes the active segment's file to save a descriptor; the next append,
    /// sync or read opens it again.
    pub(crate) fn close_file(&mut self) {
        self.active.close_file();
    }

    /// Writes the index out and syncs everything: a clean close.
    pub(crate) fn close(&mut self) -> Result<()> {
        if self.cfg.read_only {
            return Ok(());
        }
        finish_index(&self.cfg, &mut self.active.seg);
        self.sync(self.cfg.now())
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        if !self.cfg.read_only && self.failed.is_none() {
            finish_index(&self.cfg, &mut self.active.seg);
        }
    }
}
