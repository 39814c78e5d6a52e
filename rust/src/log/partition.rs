//! One partition's log: a directory holding one active segment and a `BTreeMap` of
//! sealed ones by base offset. Owns the offset rule (appends must equal the next
//! offset), rolling (never mixing segment formats in one file), group commit and
//! the durable high-water offset, reads across segments, lookup by time and
//! retention.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::{FsyncPolicy, LogConfig};
use super::error::{LogError, Result};
use super::format::{
    parse_segment_file_name, record_time, FILE_HEADER_LEN, FORMAT_V1, FORMAT_VERSION, INDEX_EXT,
    LOG_EXT, MAX_VALUE_LEN, RECORD_HEADER_LEN,
};
use super::index::IndexEntry;
use super::io::{self, Gauge};
use super::recovery::{self, Sealed};
use super::segment::{finish_index, paths, Active, Next, Records, Segment, SegmentReader};
use crate::meta::{self, MetaError, TimeType};

/// One record read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// Offset in the partition.
    pub offset: u64,
    /// Append time: when the log appended it, ms since the Unix epoch.
    pub timestamp: u64,
    /// The producer's create time, ms since the Unix epoch; None for a record
    /// that has none (a plain value: appended by [`crate::log::Log::append_batch`],
    /// or stored in format 1).
    pub create_time: Option<u64>,
    /// The record's key, if it has one (it may be empty).
    pub key: Option<Vec<u8>>,
    /// The record's headers in order (repeats allowed).
    pub headers: Vec<(String, Vec<u8>)>,
    /// The record's content.
    pub value: Vec<u8>,
}

impl StoredRecord {
    /// The record at `offset` appended at `timestamp` whose body is `body`.
    pub fn from_body(
        offset: u64,
        timestamp: u64,
        body: &[u8],
    ) -> std::result::Result<StoredRecord, MetaError> {
        let (m, value) = meta::split(body)?;
        Ok(StoredRecord {
            offset,
            timestamp,
            create_time: match m.timestamp() {
                Some((t, TimeType::Create)) => Some(t),
                _ => None,
            },
            key: m.key.map(<[u8]>::to_vec),
            headers: m
                .headers()
                .map(|(n, v)| (n.to_owned(), v.to_vec()))
                .collect(),
            value: value.to_vec(),
        })
    }
}

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
        for path in &self.files {
            io::sync_path(cfg, path)?;
        }
        for d in &self.dirs {
            io::sync_dir(cfg, d)?;
        }
        Ok(())
    }
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

    /// What the fsync policy says after an append, for a log that syncs on
    /// its writer's thread: `always` syncs now, `interval` if due.
    pub(crate) fn sync_after_append(&mut self, now: u64) -> Result<()> {
        match self.cfg.fsync {
            FsyncPolicy::Always => self.sync(now),
            FsyncPolicy::Interval => self.maybe_sync(now),
            FsyncPolicy::Never => Ok(()),
        }
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

    fn roll(&mut self) -> Result<()> {
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

    fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.sealed
            .values()
            .chain(std::iter::once(&self.active.seg))
    }

    /// The file to read `seg` from: the active segment's own handle while it
    /// is open, else a handle opened into `owned` for this read.
    fn segment_file<'a>(&'a self, seg: &Segment, owned: &'a mut Option<File>) -> Result<&'a File> {
        if seg.base == self.active.seg.base {
            if let Some(f) = self.active.open_file() {
                return Ok(f);
            }
        }
        Ok(owned.insert(io::open(&seg.log_path, true)?))
    }

    /// The partition's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Why the partition is unusable, after an I/O error it could not undo.
    pub(crate) fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
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

    /// Whether the partition holds a record.
    pub(crate) fn has_records(&self) -> bool {
        self.active.seg.tail.next > self.first_offset()
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

    /// Reads records from `start` on: at most `max_records`, and no more than
    /// `max_bytes` of bodies except that one record is always returned if any is
    /// available. `start` equal to the next offset returns nothing. A body
    /// that does not parse (never appended by this log) is a
    /// [`LogError::Corruption`].
    pub fn read(
        &self,
        start: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<StoredRecord>> {
        let mut out = Vec::new();
        let mut bad = None;
        self.read_located(
            start,
            max_records,
            max_bytes,
            |seg, pos, offset, timestamp, body| {
                if bad.is_some() {
                    return;
                }
                match StoredRecord::from_body(offset, timestamp, body) {
                    Ok(r) => out.push(r),
                    Err(e) => bad = Some(malformed(seg, pos, offset, e)),
                }
            },
        )?;
        bad.map_or(Ok(out), Err)
    }

    /// Reads every record held, checking each one's CRC, offset and (format
    /// 2) metadata; returns how many there are. Opening checks only each
    /// segment's tail, so this is what finds damage in the middle of a segment.
    pub fn verify(&self) -> Result<u64> {
        let (mut at, next) = (self.first_offset(), self.next_offset());
        while at < next {
            let mut bad = None;
            let n = self.read_located(at, 1 << 16, 8 << 20, |seg, pos, offset, _, body| {
                if bad.is_none() && seg.version != FORMAT_V1 {
                    if let Err(e) = meta::parse(body) {
                        bad = Some(malformed(seg, pos, offset, e));
                    }
                }
            })?;
            if let Some(e) = bad {
                return Err(e);
            }
            if n == 0 {
                // Every segment is walked until its end: not reached.
                return Err(LogError::Corruption {
                    path: self.dir.to_path_buf(),
                    position: 0,
                    offset: at,
                    reason: format!("no record of offset {at} (the partition ends at {next})"),
                });
            }
            at += n as u64;
        }
        Ok(at - self.first_offset())
    }

    /// [`Partition::read`] without building records: `f(offset, append time,
    /// body)` sees each record in order, its body (metadata and value, see
    /// [`crate::meta`]) borrowed from the read buffer. A record of a format 1
    /// segment (a value alone) is handed over as the body
    /// `meta::wrap(Some(append time), value)`, made in a buffer of this call.
    /// `max_bytes` counts bodies. Returns how many records it saw.
    pub fn read_with(
        &self,
        start: u64,
        max_records: usize,
        max_bytes: usize,
        mut f: impl FnMut(u64, u64, &[u8]),
    ) -> Result<usize> {
        self.read_located(start, max_records, max_bytes, |_, _, offset, ts, body| {
            f(offset, ts, body)
        })
    }

    /// [`Partition::read_with`] telling `f` also the segment and the byte
    /// position of each record: `f(segment, position, offset, append time, body)`.
    fn read_located(
        &self,
        start: u64,
        max_records: usize,
        max_bytes: usize,
        mut f: impl FnMut(&Segment, u64, u64, u64, &[u8]),
    ) -> Result<usize> {
        let (first, next) = (self.first_offset(), self.next_offset());
        if start < first || start > next {
            return Err(LogError::OffsetOutOfRange {
                topic: self.topic_lossy(),
                partition: self.name.clone(),
                requested: start,
                first,
                next,
            });
        }
        let mut count = 0usize;
        if start == next || max_records == 0 {
            return Ok(count);
        }
        let seg_start = self
            .sealed
            .range(..=start)
            .next_back()
            .map_or(self.active.seg.base, |(b, _)| *b);
        let chunk = max_bytes
            .saturating_add(self.cfg.index_interval_bytes as usize)
            .saturating_add(2 * RECORD_HEADER_LEN);
        let mut cur = start;
        let mut bytes = 0usize;
        // Format 1 records are wrapped here (allocated at the first one).
        let mut wrapped = Vec::new();
        for seg in self.segments().filter(|s| s.base >= seg_start) {
            if seg.tail.next <= cur {
                continue;
            }
            let v1 = seg.version == FORMAT_V1;
            let hint = seg.index.lookup_offset(cur - seg.base)?;
            let stop = self.walk_segment(seg, hint, chunk, |pos, offset, timestamp, stored| {
                if offset < cur {
                    return ControlFlow::Continue(());
                }
                let body: &[u8] = if v1 {
                    wrapped.clear();
                    meta::wrap(&mut wrapped, Some(timestamp), stored);
                    &wrapped
                } else {
                    stored
                };
                if count > 0 && bytes + body.len() > max_bytes {
                    return ControlFlow::Break(());
                }
                bytes += body.len();
                f(seg, pos, offset, timestamp, body);
                count += 1;
                cur += 1;
                // Done without reading (and checking) the record after.
                if count >= max_records {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })?;
            if stop.is_some() {
                break;
            }
        }
        Ok(count)
    }

    /// Reads `seg`'s records in order, from `hint`'s position (the segment's
    /// start for None), handing each `(position, offset, append time, bytes as
    /// stored)` to `visit` until it breaks; returns what it broke with (None:
    /// the segment ended).
    ///
    /// An index is a cache, never synced: an entry damaged in the middle (a
    /// page not written back before a power loss) passes the checks at open.
    /// Where the entry's position holds no record of its offset, the segment
    /// is read from its start instead.
    fn walk_segment<R>(
        &self,
        seg: &Segment,
        mut hint: Option<IndexEntry>,
        chunk: usize,
        mut visit: impl FnMut(u64, u64, u64, &[u8]) -> ControlFlow<R>,
    ) -> Result<Option<R>> {
        let mut owned = None;
        let file = self.segment_file(seg, &mut owned)?;
        'attempt: loop {
            let (pos, mut expected) = match hint {
                Some(e) => (u64::from(e.pos), seg.base.saturating_add(u64::from(e.rel))),
                None => (FILE_HEADER_LEN as u64, seg.base),
            };
            let mut reader =
                SegmentReader::new(file, &seg.log_path, pos, seg.tail.size).with_chunk(chunk);
            let mut first = true;
            loop {
                let (pos, reason) = match reader.next()? {
                    Next::Record { pos, header, bytes } if header.offset == expected => {
                        first = false;
                        expected += 1;
                        if let ControlFlow::Break(r) =
                            visit(pos, header.offset, header.timestamp, bytes)
                        {
                            return Ok(Some(r));
                        }
                        continue;
                    }
                    Next::Record { pos, header, .. } => (
                        pos,
                        format!(
                            "record has offset {} where {expected} belongs",
                            header.offset
                        ),
                    ),
                    Next::End => return Ok(None),
                    Next::Torn { pos, reason } | Next::Bad { pos, reason } => (pos, reason),
                };
                if first && hint.is_some() {
                    tracing::warn!(
                        "{}: the index entry for offset {expected} points at byte {pos}, \
                         where {reason}; reading the segment from its start",
                        seg.log_path.display()
                    );
                    hint = None;
                    continue 'attempt;
                }
                return Err(LogError::Corruption {
                    path: seg.log_path.to_path_buf(),
                    position: pos,
                    offset: expected,
                    reason,
                });
            }
        }
    }

    /// The first offset whose record time (the create time, else the append
    /// time: [`record_time`]) is at or after `ts`, if any: the first whose
    /// newest record time so far is, as Kafka's `offsetsForTimes` answers
    /// with create times out of order.
    pub fn offset_for_time(&self, ts: u64) -> Result<Option<u64>> {
        for seg in self.segments() {
            if seg.records() == 0 || seg.tail.max_ts < ts {
                continue;
            }
            let hint = seg.index.lookup_time(ts)?;
            let version = seg.version;
            let found = self.walk_segment(seg, hint, 64 * 1024, |_, offset, append, bytes| {
                if record_time(version, append, bytes) >= ts {
                    ControlFlow::Break(offset)
                } else {
                    ControlFlow::Continue(())
                }
            })?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

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

    /// Writes the index out and syncs everything: a clean close.
    pub(crate) fn close(&mut self) -> Result<()> {
        if self.cfg.read_only {
            return Ok(());
        }
        finish_index(&self.cfg, &mut self.active.seg);
        self.sync(self.cfg.now())
    }
}

/// The error for a record whose body does not parse (its CRC is good: the
/// writer was at fault, not the disk).
fn malformed(seg: &Segment, pos: u64, offset: u64, e: MetaError) -> LogError {
    LogError::Corruption {
        path: seg.log_path.to_path_buf(),
        position: pos,
        offset,
        reason: format!("{e}, in a record whose CRC is good"),
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        if !self.cfg.read_only && self.failed.is_none() {
            finish_index(&self.cfg, &mut self.active.seg);
        }
    }
}
