//! The durable log: an append-only segment store for Dafka stores, with no
//! sockets in it. One log per (topic, partition), each a sequence of segments.
//!
//! # Layout
//!
//! ```text
//! ROOT/
//!   <escaped topic>/            bytes [A-Za-z0-9_-] and non-leading '.' as they are,
//!     <partition>/              every other byte %XX; the empty topic is "%"
//!       00000000000000000000.log      segment, named by the offset of its first record
//!       00000000000000000000.index    its sparse index
//!       00000000000000004711.log      ...
//!   .lock                       flock'ed by the one writable Log (read-only opens
//!                               take no lock)
//!   .parked                     partitions with no record left: their next offsets
//!                               and parking times (see [`parked`]); they have no
//!                               directory, and are forgotten `forget_parked_hours` on
//!   .clean                      left by a clean close (everything was synced); the
//!                               next writable open removes it and syncs nothing
//! ```
//!
//! # Segment file (`.log`), all integers big-endian
//!
//! ```text
//! +----------+-------------+--------------+-------------+
//! | "DAFKALOG" | version u32 | reserved u32 | base u64  |   file header, 24 bytes
//! +----------+-------------+--------------+-------------+
//! | offset u64 | length u32 | crc32c u32 | timestamp u64 | value (length bytes) |
//! +------------+------------+------------+---------------+----------------------+
//! | ...next record                                                              |
//! ```
//!
//! The CRC32C (Castagnoli, as Kafka's RecordBatch) covers what follows it:
//! timestamp and value. The timestamp is the store's append time in ms since the
//! epoch. Offsets are contiguous within a partition.
//!
//! # Index file (`.index`)
//!
//! A file header with magic `"DAFKAIDX"`, then fixed-width 16-byte entries
//! `relative offset u32 | position u32 | newest timestamp so far u64`, one each
//! `index_interval_bytes` of records and one for the last record of a sealed
//! segment. Reads binary-search it and scan a little; `offset_for_time` uses the
//! monotonic "newest so far" timestamps the same way. It is a cache: recovery
//! rebuilds it from the segment when it is missing or does not match.
//!
//! # Offsets
//!
//! An append must carry the partition's next offset: a gap or a duplicate is
//! [`LogError::OffsetMismatch`]. A partition that does not exist yet starts at
//! whatever offset its first append carries (a store may join mid-stream), so its
//! first offset need not be 0.
//!
//! # Durability
//!
//! Appends are written to the file (visible to readers) before the call returns;
//! they become durable at fdatasync. [`Log::durable_next`] is the durable
//! high-water mark: every offset below it has reached fdatasync, so a store
//! acknowledges only below it. One sync covers every append since the last (group
//! commit). With [`FsyncPolicy::Interval`] the log syncs a partition when
//! `flush_messages` records are unsynced or `flush_interval_ms` passed since its
//! last sync; this is checked on append and on [`Log::tick`], which the owner's
//! event loop calls (no background thread), ideally at [`Log::next_deadline`].
//!
//! # Recovery
//!
//! See [`recovery`]: torn tails are truncated, damage followed by valid data is an
//! error naming path and offset, indexes are rebuilt.
//!
//! # Memory
//!
//! Per partition: one open file (the active segment), a few hundred pending index
//! entries at most, and per sealed segment two paths and a few integers. No
//! per-record state is kept; sealed segments are opened on demand. A parked
//! partition (no record left, see [`parked`]) is one map entry: its name,
//! next offset and parking time.
//!
//! # API
//!
//! [`Log::open`], [`Log::append`], [`Log::append_batch`], [`Log::read`],
//! [`Log::sync`], [`Log::tick`], [`Log::next_deadline`], [`Log::durable_next`],
//! [`Log::next_offset`], [`Log::first_offset`], [`Log::offset_for_time`],
//! [`Log::enforce_retention`], [`Log::partitions`], [`Log::topics`],
//! [`Log::close`]. Appends take `&mut self`, reads `&self`.
//!
//! ```no_run
//! use _native::log::{FsyncPolicy, Log, LogConfig};
//!
//! let p = "85E3C6EBDC7B4156AD9C43611EBC09CE";
//! let mut log = Log::open("data/store", LogConfig { fsync: FsyncPolicy::Interval, ..LogConfig::default() })?;
//! log.append_batch(b"weather", p, 0, &[b"21.5".as_slice(), b"22.0"])?;
//! // In the event loop: poll with a timeout until `log.next_deadline()`, then
//! log.tick()?;
//! let ack_below = log.durable_next(b"weather", p); // ACK only offsets below this
//! let records = log.read(b"weather", p, 0, 100, 1 << 20)?;
//! # Ok::<(), _native::log::LogError>(())
//! ```

mod config;
mod error;
pub mod format;
mod index;
mod io;
pub mod parked;
mod partition;
pub mod recovery;
mod segment;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use config::{system_clock_ms, Clock, Failpoint, FsyncPolicy, IoOp, LogConfig};
pub use error::{LogError, Result};
pub use parked::PARKED_FILE;
pub use partition::{PartitionInfo, PartitionSync, StoredRecord};
pub use recovery::RecoveryPolicy;

use format::{check_partition_name, escape_name, unescape_name};
use partition::Partition;

/// A scratch buffer larger than this is released after an append.
const SCRATCH_KEEP: usize = 4 << 20;

/// (topic, partition name).
type PartKey = (Vec<u8>, String);

/// What [`Log::begin_sync`] took: run it anywhere, then [`Log::finish_sync`].
#[derive(Debug)]
pub struct SyncBatch {
    cfg: Arc<LogConfig>,
    parts: Vec<(PartKey, partition::PartitionSync)>,
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

/// A directory of topics and partitions.
#[derive(Debug)]
pub struct Log {
    root: PathBuf,
    cfg: Arc<LogConfig>,
    parts: BTreeMap<(Vec<u8>, String), Box<Partition>>,
    /// The partitions that may need a sync: appended to, rolled or trimmed
    /// since their last [`Log::begin_sync`] (each listed once, by its
    /// `listed` flag). Group commit and its checks look at these only, so
    /// their cost follows the partitions written, not the partitions held
    /// (a store keeps every partition it ever saw).
    dirty: Vec<PartKey>,
    scratch: Vec<u8>,
    last_retention_ms: u64,
    /// Partitions that could not be opened ([`LogConfig::isolate_damaged`]).
    damaged: BTreeMap<PartKey, Damaged>,
    /// Active segment files open now.
    gauge: io::Gauge,
    /// [`LogConfig::max_open_files`] resolved.
    max_open: usize,
    /// Half the process's open-files limit: what every log of the process
    /// keeps open at most, together ([`io::process_open_files`]).
    process_max: usize,
    _counted: io::LogCount,
    /// Counts appends, to stamp [`Partition::last_used`].
    uses: u64,
    /// [`Log::uses`] at the last periodic retention check: a partition
    /// stamped no later has not been appended to since (see
    /// [`Log::settle_idle`]).
    uses_at_check: u64,
    /// `ROOT/.lock`, held with an exclusive `flock` by a writable log.
    _lock: Option<fs::File>,
    /// Partitions with no record left, parked (see [`parked`]): next offsets.
    parked: parked::Parked,
    /// Lines in `ROOT/.parked`, stale ones included.
    parked_lines: usize,
    /// An append to `ROOT/.parked` failed (it may end in a torn line): the
    /// next parking rewrites it.
    parked_rewrite: bool,
    /// The last retention sweep by [`Log::tick`] left partitions to park
    /// (at most [`PARK_BATCH`] per sweep): the next tick sweeps again.
    park_more: bool,
    /// The same for expired segments of partitions that keep records (at
    /// most [`RETAIN_BATCH`] deleted per sweep).
    retain_more: bool,
}

/// Name of the lock file in the log's root (not a valid escaped topic name).
pub const LOCK_FILE: &str = ".lock";

/// Takes the exclusive lock that keeps two writers out of one log directory.
fn lock(root: &Path) -> Result<fs::File> {
    use std::os::unix::io::AsRawFd;
    let path = root.join(LOCK_FILE);
    let f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| LogError::io("create", &path, e))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::WouldBlock {
            return Err(LogError::Locked(root.to_path_buf()));
        }
        return Err(LogError::io("lock", &path, e));
    }
    Ok(f)
}

fn lossy(topic: &[u8]) -> String {
    String::from_utf8_lossy(topic).into_owned()
}

/// A partition set aside because it could not be opened.
#[derive(Debug)]
struct Damaged {
    dir: PathBuf,
    why: String,
    /// For damage recovery refused: the directory's files when it did. Damage
    /// does not heal by itself, so [`Log::reopen_failed`] tries again only once
    /// they changed (repaired, moved away) rather than rescanning every time.
    files: Option<Vec<FileStamp>>,
    /// Open attempts so far.
    tries: u32,
}

/// (name, length, modification time in ns, inode) of a file.
type FileStamp = (std::ffi::OsString, u64, i128, u64);

impl Damaged {
    fn new(dir: PathBuf, err: &LogError, tries: u32) -> Damaged {
        let files = matches!(err, LogError::Corruption { .. }).then(|| file_stamps(&dir));
        Damaged {
            why: err.to_string(),
            files,
            dir,
            tries,
        }
    }
}

/// The files in `dir`, sorted (empty if it cannot be listed).
fn file_stamps(dir: &Path) -> Vec<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let mut v: Vec<FileStamp> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let e = e.ok()?;
            let m = e.metadata().ok()?;
            let mtime = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
            Some((e.file_name(), m.len(), mtime, m.ino()))
        })
        .collect();
    v.sort();
    v
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
fn sync_opened(
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

/// A partition that could not be opened (or made durable) at open is set
/// aside ([`LogConfig::isolate_damaged`]): logged, listed in `damaged`.
fn set_aside_at_open(
    damaged: &mut BTreeMap<PartKey, Damaged>,
    key: PartKey,
    dir: PathBuf,
    e: &LogError,
) {
    tracing::error!(
        "partition {}/{} set aside, the rest of the log opens: {e}",
        lossy(&key.0),
        key.1
    );
    damaged.insert(key, Damaged::new(dir, e, 1));
}

/// Lists `p` (under `key`) in the log's `dirty` list, once.
fn list_dirty(dirty: &mut Vec<PartKey>, key: &PartKey, p: &mut Partition) {
    if !p.listed {
        p.listed = true;
        dirty.push(key.clone());
    }
}

fn unknown_partition(topic: &[u8], partition: &str) -> LogError {
    LogError::UnknownPartition {
        topic: lossy(topic),
        partition: partition.to_owned(),
    }
}

/// Left in the root by a [`Log::close`] that synced everything (empty, not a
/// valid escaped topic name). The next writable open removes it (durably)
/// before anything is written, and need not make what the log holds durable:
/// it was. An open after a crash finds none and syncs all (see
/// [`SYNCFS_FROM_PARTITIONS`]); a store restarted cleanly on a busy machine
/// does not write back other programs' data with a syncfs.
pub const CLEAN_FILE: &str = ".clean";

/// Removes the log's clean mark, durably; whether there was one.
fn take_clean_mark(cfg: &LogConfig, root: &Path) -> Result<bool> {
    let path = root.join(CLEAN_FILE);
    if !path.exists() {
        return Ok(false);
    }
    io::remove(cfg, &path)?;
    io::sync_dir(cfg, root)?;
    Ok(true)
}

/// Leaves the log's clean mark, durably.
fn leave_clean_mark(cfg: &LogConfig, root: &Path) -> Result<()> {
    let path = root.join(CLEAN_FILE);
    let f = io::create(cfg, &path)?;
    io::sync_data(cfg, &f, &path)?;
    io::sync_dir(cfg, root)
}

/// Stale lines in `ROOT/.parked` (of partitions appended to again, parked
/// twice, or forgotten) tolerated before the file is rewritten: at least
/// this many, and at least as many as there are parked partitions.
const PARKED_STALE_MIN: usize = 1024;

/// The most partitions one retention sweep of [`Log::tick`] parks (about
/// 0.2 ms each here, mostly the file system's unlinks).
const PARK_BATCH: usize = 256;

/// The most segments one retention sweep of [`Log::tick`] deletes otherwise
/// (two unlinks each): the sealed segments of many partitions can expire
/// together (producers that ran together, a store back after a long stop).
const RETAIN_BATCH: usize = 256;

/// A partition the log holds: open, or parked at its next offset.
enum Found<'a> {
    Open(&'a Partition),
    Parked(u64),
}

/// A read of a parked partition (no record, at `next`): nothing from `next`,
/// out of range from anywhere else, as for an open one.
fn parked_read(topic: &[u8], partition: &str, start: u64, next: u64) -> Result<()> {
    if start == next {
        return Ok(());
    }
    Err(LogError::OffsetOutOfRange {
        topic: lossy(topic),
        partition: partition.to_owned(),
        requested: start,
        first: next,
        next,
    })
}

fn parked_info(topic: &[u8], partition: &str, next: u64) -> PartitionInfo {
    PartitionInfo {
        topic: topic.to_vec(),
        partition: partition.to_owned(),
        first_offset: next,
        next_offset: next,
        durable_next: next,
        bytes: 0,
        segments: 0,
    }
}

/// The parked partitions of the log at `root` (see [`parked`]) that have no
/// directory, and the registry's line count. A writable log drops the stale
/// lines (rewriting the file) and the empty directories a crash while
/// parking left.
fn open_parked(
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

fn damaged_error((topic, partition): &PartKey, why: &str) -> LogError {
    LogError::Failed {
        topic: lossy(topic),
        partition: partition.clone(),
        reason: format!("it could not be opened: {why}"),
    }
}

impl Log {
    /// Opens (creating if needed) the log at `root`, recovering every partition.
    pub fn open(root: impl AsRef<Path>, cfg: LogConfig) -> Result<Log> {
        cfg.validate()?;
        // Partitions keep their active segment's file open, up to max_open,
        // and every log of the process together up to half the limit.
        let limit = io::raise_open_files_limit();
        let process_max = usize::try_from(limit / 2).unwrap_or(usize::MAX).max(64);
        let max_open = cfg.max_open_files.unwrap_or(process_max);
        let root = root.as_ref().to_path_buf();
        if root.as_os_str().is_empty() {
            // Not the current directory by accident.
            return Err(LogError::Invalid(
                "the log's path is empty: name its directory (\".\" for the current one)".into(),
            ));
        }
        if !root.exists() {
            if cfg.read_only {
                return Err(LogError::io(
                    "open",
                    &root,
                    std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
                ));
            }
            io::create_dir_all(&cfg, &root)?;
        }
        let lock = if cfg.read_only {
            None
        } else {
            Some(lock(&root)?)
        };
        let cfg = Arc::new(cfg);
        let gauge = io::Gauge::default();
        let mut parts = BTreeMap::new();
        let mut damaged = BTreeMap::new();
        // Partition directories without a segment (a crash while parking).
        let mut empty_dirs: Vec<(PartKey, PathBuf)> = Vec::new();
        for topic_entry in fs::read_dir(&root).map_err(|e| LogError::io("list", &root, e))? {
            let topic_entry = topic_entry.map_err(|e| LogError::io("list", &root, e))?;
            let tpath = topic_entry.path();
            let Some(topic) = topic_entry.file_name().to_str().and_then(unescape_name) else {
                continue;
            };
            if !tpath.is_dir() {
                continue;
            }
            for p_entry in fs::read_dir(&tpath).map_err(|e| LogError::io("list", &tpath, e))? {
                let p_entry = p_entry.map_err(|e| LogError::io("list", &tpath, e))?;
                let ppath = p_entry.path();
                let Some(name) = p_entry.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                if check_partition_name(&name).is_err() || !ppath.is_dir() {
                    continue;
                }
                let p = Partition::open(
                    cfg.clone(),
                    ppath.clone(),
                    topic.clone(),
                    name.clone(),
                    &gauge,
                    false,
                );
                match p {
                    Ok(Some(mut p)) => {
                        // Past the budget its file can go at once (a sync
                        // opens it again by path).
                        if gauge.get() > max_open || io::process_open_files() > process_max {
                            p.close_file();
                        }
                        parts.insert((topic.clone(), name), Box::new(p));
                    }
                    Ok(None) => empty_dirs.push(((topic.clone(), name), ppath.clone())),
                    Err(e) if cfg.isolate_damaged => {
                        set_aside_at_open(&mut damaged, (topic.clone(), name), ppath, &e);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        let (parked, parked_lines) = open_parked(&cfg, &root, &parts, &damaged, &empty_dirs)?;
        let now = cfg.now();
        if !cfg.read_only {
            if take_clean_mark(&cfg, &root)? {
                // Closed cleanly: all of it was synced then.
                parts.values_mut().for_each(|p| p.mark_synced(now));
            } else {
                sync_opened(&cfg, &root, &mut parts, &mut damaged, now)?;
            }
        }
        // Opening may have truncated or recreated files: the first sync covers all.
        let dirty = if cfg.read_only {
            Vec::new()
        } else {
            parts
                .iter_mut()
                .map(|(k, p)| {
                    p.listed = true;
                    k.clone()
                })
                .collect()
        };
        Ok(Log {
            root,
            cfg,
            parts,
            dirty,
            scratch: Vec::new(),
            last_retention_ms: now,
            damaged,
            gauge,
            max_open,
            process_max,
            _counted: io::LogCount::new(),
            uses: 0,
            uses_at_check: 0,
            _lock: lock,
            parked,
            parked_lines,
            parked_rewrite: false,
            park_more: false,
            retain_more: false,
        })
    }

    /// The log's directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The options it was opened with.
    pub fn config(&self) -> &LogConfig {
        &self.cfg
    }

    fn find(&self, topic: &[u8], partition: &str) -> Result<Found<'_>> {
        let key = (topic.to_vec(), partition.to_owned());
        if let Some(p) = self.parts.get(&key) {
            return Ok(Found::Open(p));
        }
        if let Some(next) = self.parked.get(topic, partition) {
            return Ok(Found::Parked(next));
        }
        Err(match self.damaged.get(&key) {
            Some(d) => damaged_error(&key, &d.why),
            None => unknown_partition(topic, partition),
        })
    }

    /// Whether the last sweep of [`Log::tick`] left retention work for the
    /// next (it parks and deletes a batch at a time): call it again soon.
    pub fn retention_pending(&self) -> bool {
        self.park_more || self.retain_more
    }

    /// Partitions parked now (no record left; see [`parked`]).
    pub fn parked_count(&self) -> usize {
        self.parked.len()
    }

    /// Partitions set aside because they could not be opened
    /// ([`LogConfig::isolate_damaged`]): (topic, partition, why).
    pub fn damaged(&self) -> Vec<(Vec<u8>, String, String)> {
        self.damaged
            .iter()
            .map(|((t, p), d)| (t.clone(), p.clone(), d.why.clone()))
            .collect()
    }

    /// Whether this partition is set aside ([`Log::damaged`]).
    pub fn is_set_aside(&self, topic: &[u8], partition: &str) -> bool {
        !self.damaged.is_empty()
            && self
                .damaged
                .contains_key(&(topic.to_vec(), partition.to_owned()))
    }

    /// How many partitions are set aside ([`Log::damaged`]).
    pub fn damaged_count(&self) -> usize {
        self.damaged.len()
    }

    /// Opens again, from their files, the partitions that failed (an I/O
    /// error they could not undo) or were set aside at open, leaving every
    /// other partition as it is. Those that still cannot be opened stay set
    /// aside; the first such error is returned. A partition set aside for
    /// damage is tried again only once its files changed; until then it is
    /// left out (it stays in [`Log::damaged`]) and is no error of this call,
    /// so an owner recovering from some other failure can succeed. Call it with no
    /// [`SyncBatch`] in flight (its results would apply to the new state).
    pub fn reopen_failed(&mut self) -> Result<()> {
        let mut keys: Vec<PartKey> = self
            .parts
            .iter()
            .filter(|(_, p)| p.failed().is_some())
            .map(|(k, _)| k.clone())
            .collect();
        keys.extend(self.damaged.keys().cloned());
        self.reopen(keys)
    }

    /// [`Log::reopen_failed`] for the partitions set aside only: safe with a
    /// [`SyncBatch`] in flight (they are in none), cheap while their files
    /// stay as they were. For a periodic retry.
    pub fn retry_set_aside(&mut self) -> Result<()> {
        if self.damaged.is_empty() {
            return Ok(());
        }
        let keys: Vec<PartKey> = self.damaged.keys().cloned().collect();
        self.reopen(keys)
    }

    fn reopen(&mut self, keys: Vec<PartKey>) -> Result<()> {
        let mut first_err = None;
        for key in keys {
            if let Some(d) = self.damaged.get(&key) {
                if !d.dir.exists() {
                    // Moved away or deleted: nothing left to open.
                    self.damaged.remove(&key);
                    continue;
                }
                if d.files.as_ref().is_some_and(|f| *f == file_stamps(&d.dir)) {
                    continue;
                }
            }
            let (dir, tries) = match (self.damaged.remove(&key), self.parts.remove(&key)) {
                (Some(d), _) => (d.dir, d.tries),
                (None, Some(p)) => (p.dir().to_path_buf(), 0),
                (None, None) => continue,
            };
            self.dirty.retain(|k| k != &key);
            let (topic, name) = key.clone();
            match Partition::open(
                self.cfg.clone(),
                dir.clone(),
                topic,
                name,
                &self.gauge,
                true,
            ) {
                Ok(Some(mut p)) => {
                    list_dirty(&mut self.dirty, &key, &mut p);
                    self.parts.insert(key, Box::new(p));
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::error!("partition {}/{} still set aside: {e}", lossy(&key.0), key.1);
                    self.damaged.insert(key, Damaged::new(dir, &e, tries + 1));
                    first_err.get_or_insert(e);
                }
            }
        }
        self.close_idle_files();
        first_err.map_or(Ok(()), Err)
    }

    /// Appends one record at `offset`, which must be the partition's next offset.
    pub fn append(
        &mut self,
        topic: &[u8],
        partition: &str,
        offset: u64,
        value: &[u8],
    ) -> Result<()> {
        self.append_batch(topic, partition, offset, &[value])
    }

    /// Appends records at `first_offset, first_offset + 1, ...` (one write per
    /// segment touched, one fdatasync at most). On error a prefix may be stored:
    /// [`Log::next_offset`] says where the partition stands.
    pub fn append_batch<V: AsRef<[u8]>>(
        &mut self,
        topic: &[u8],
        partition: &str,
        first_offset: u64,
        values: &[V],
    ) -> Result<()> {
        if self.cfg.read_only {
            return Err(LogError::ReadOnly(self.root.clone()));
        }
        if first_offset.checked_add(values.len() as u64).is_none() {
            return Err(LogError::Invalid(format!(
                "offsets {first_offset} + {} records overflow 64 bits",
                values.len()
            )));
        }
        let key = (topic.to_vec(), partition.to_owned());
        if !self.parts.contains_key(&key) {
            if let Some(d) = self.damaged.get(&key) {
                // Never create over a partition's damaged files.
                return Err(damaged_error(&key, &d.why));
            }
            if let Some(expected) = self.parked.get(topic, partition) {
                // It goes on where it stood: a directory again.
                if first_offset != expected {
                    return Err(LogError::OffsetMismatch {
                        topic: lossy(topic),
                        partition: partition.to_owned(),
                        expected,
                        got: first_offset,
                    });
                }
            }
            if values.is_empty() {
                return Ok(());
            }
            check_partition_name(partition).map_err(LogError::Invalid)?;
            let tdir = escape_name(topic)
                .map_err(|e| LogError::Invalid(format!("topic {:?}: {e}", lossy(topic))))?;
            let dir = self.root.join(tdir).join(partition);
            let p = Partition::create(
                self.cfg.clone(),
                &self.root,
                dir,
                topic.to_vec(),
                partition.to_owned(),
                first_offset,
                &self.gauge,
            )?;
            // Its registry line is stale now: the directory wins.
            self.parked.remove(topic, partition);
            self.parts.insert(key.clone(), Box::new(p));
        }
        let refs: Vec<&[u8]> = values.iter().map(AsRef::as_ref).collect();
        let now = self.cfg.now();
        self.uses += 1;
        let p = self.parts.get_mut(&key).expect("inserted above");
        p.last_used = self.uses;
        let r = p.append(&mut self.scratch, first_offset, &refs, now);
        list_dirty(&mut self.dirty, &key, p);
        if self.scratch.capacity() > SCRATCH_KEEP {
            self.scratch = Vec::new();
        }
        self.close_idle_files();
        r
    }

    /// Drops every record of a partition and continues it at `offset`, past
    /// its next offset (see [`Partition::skip_to`]): for a store whose peers
    /// no longer hold the records in between. Durable with the next sync.
    pub fn skip_to(&mut self, topic: &[u8], partition: &str, offset: u64) -> Result<()> {
        if self.cfg.read_only {
            return Err(LogError::ReadOnly(self.root.clone()));
        }
        let key = (topic.to_vec(), partition.to_owned());
        if let Some(next) = self.parked.get(topic, partition) {
            // No record to drop: it stands at `offset` from now on.
            if offset <= next {
                return Err(LogError::Invalid(format!(
                    "skip to offset {offset}: the partition already reaches {next}"
                )));
            }
            let at = self.cfg.now();
            self.write_parked(&[(key, offset)], at)?;
            self.parked
                .insert(topic, partition, parked::Spot { next: offset, at });
            return Ok(());
        }
        let p = self
            .parts
            .get_mut(&key)
            .ok_or_else(|| unknown_partition(topic, partition))?;
        let r = p.skip_to(offset);
        list_dirty(&mut self.dirty, &key, p);
        self.close_idle_files();
        r
    }

    /// Segment files this log holds open now.
    pub fn open_files(&self) -> usize {
        self.gauge.get()
    }

    /// The most segment files this log had open at once.
    pub fn open_files_peak(&self) -> usize {
        self.gauge.peak()
    }

    /// Past [`LogConfig::max_open_files`]: closes the active files of the
    /// partitions appended to least recently, down to three quarters of the
    /// budget (so the scan runs once per quarter budget of new files, not at
    /// every append). Appends not yet synced lose nothing: the written pages
    /// belong to the file, and a sync opens it by path.
    ///
    /// The same when all the logs of the process together are past half the
    /// open-files limit (two stores in one process). A log holding at least
    /// its fair share of the files closes its own least recent ones until the
    /// total is back to three quarters of that; a smaller one keeps only what
    /// the others leave of it. An idle log does this at its next
    /// [`Log::tick`].
    fn close_idle_files(&mut self) {
        let (open, all) = (self.gauge.get(), io::process_open_files());
        if open <= self.max_open && all <= self.process_max {
            return;
        }
        let own = if open > self.max_open {
            open - (self.max_open - self.max_open / 4)
        } else {
            0
        };
        let shared = if all > self.process_max {
            let target = self.process_max - self.process_max / 4;
            if open * io::process_logs() >= all {
                all - target
            } else {
                open.saturating_sub(target.saturating_sub(all - open))
            }
        } else {
            0
        };
        if own == 0 && shared == 0 {
            return;
        }
        let mut stamps: Vec<u64> = self
            .parts
            .values()
            .filter(|p| p.file_open())
            .map(|p| p.last_used)
            .collect();
        let excess = own.max(shared).min(stamps.len());
        if excess == 0 {
            return;
        }
        let (_, cutoff, _) = stamps.select_nth_unstable(excess - 1);
        let cutoff = *cutoff;
        for p in self.parts.values_mut() {
            if p.last_used <= cutoff && p.file_open() {
                p.close_file();
            }
        }
    }

    /// Reads from `start`: at most `max_records` records and `max_bytes` of values
    /// (but always one record if one is available).
    pub fn read(
        &self,
        topic: &[u8],
        partition: &str,
        start: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<StoredRecord>> {
        match self.find(topic, partition)? {
            Found::Open(p) => p.read(start, max_records, max_bytes),
            Found::Parked(next) => parked_read(topic, partition, start, next).map(|()| Vec::new()),
        }
    }

    /// [`Log::read`] without building records: `f(offset, timestamp, value)`
    /// sees each record in order, the value borrowed. Returns how many.
    pub fn read_with(
        &self,
        topic: &[u8],
        partition: &str,
        start: u64,
        max_records: usize,
        max_bytes: usize,
        f: impl FnMut(u64, u64, &[u8]),
    ) -> Result<usize> {
        match self.find(topic, partition)? {
            Found::Open(p) => p.read_with(start, max_records, max_bytes, f),
            Found::Parked(next) => parked_read(topic, partition, start, next).map(|()| 0),
        }
    }

    /// The offset the next append to this partition must carry, if it exists.
    pub fn next_offset(&self, topic: &[u8], partition: &str) -> Option<u64> {
        match self.find(topic, partition).ok()? {
            Found::Open(p) => Some(p.next_offset()),
            Found::Parked(next) => Some(next),
        }
    }

    /// Reads every record of a partition, checking each one's CRC and offset,
    /// and returns how many it holds (0 for a parked one). Opening checks
    /// only each segment's tail, so this is what finds damage in the middle
    /// of a segment (`dafka log inspect --verify`).
    pub fn verify(&self, topic: &[u8], partition: &str) -> Result<u64> {
        match self.find(topic, partition)? {
            Found::Open(p) => p.verify(),
            Found::Parked(_) => Ok(0),
        }
    }

    /// The first available offset, if the partition exists.
    pub fn first_offset(&self, topic: &[u8], partition: &str) -> Option<u64> {
        match self.find(topic, partition).ok()? {
            Found::Open(p) => Some(p.first_offset()),
            Found::Parked(next) => Some(next),
        }
    }

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

    /// Periodic work for the owner's event loop: interval syncs that fell due and,
    /// every `retention_check_ms`, retention. Cheap when nothing is due.
    pub fn tick(&mut self) -> Result<()> {
        // Other logs of the process may need descriptors this one holds.
        self.close_idle_files();
        let now = self.cfg.now();
        let mut first_err = None;
        if self.cfg.fsync == FsyncPolicy::Interval {
            for p in self.parts.values_mut() {
                if let Err(e) = p.maybe_sync(now) {
                    first_err.get_or_insert(e);
                }
            }
        }
        let more = self.park_more || self.retain_more;
        if !self.cfg.read_only
            && (more || now.saturating_sub(self.last_retention_ms) >= self.cfg.retention_check_ms)
        {
            if !more {
                self.last_retention_ms = now;
                self.settle_idle();
            }
            // Parks at most PARK_BATCH partitions and deletes at most
            // RETAIN_BATCH other segments: many expiring at once (every task
            // of a large Spark job) would hold up the owner's loop (a store's
            // ACKs) for seconds.
            if let Err(e) = self.retention_sweep(true) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Partitions not appended to since the last periodic check write out
    /// the index entries they hold in memory and drop the buffer (up to 4
    /// KiB each: a finished Spark task's partition would keep it for the
    /// whole of retention).
    fn settle_idle(&mut self) {
        let since = std::mem::replace(&mut self.uses_at_check, self.uses);
        for p in self.parts.values_mut() {
            if p.last_used <= since {
                p.settle_index();
            }
        }
    }

    /// When [`Log::tick`] next has work (ms since the epoch, by the log's clock).
    pub fn next_deadline(&self) -> u64 {
        let retention = if self.park_more || self.retain_more {
            self.last_retention_ms
        } else {
            self.last_retention_ms
                .saturating_add(self.cfg.retention_check_ms)
        };
        self.parts
            .values()
            .filter_map(|p| p.sync_deadline())
            .fold(retention, u64::min)
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
    fn retention_sweep(&mut self, sliced: bool) -> Result<usize> {
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
    fn write_parked(&mut self, entries: &[(PartKey, u64)], at: u64) -> Result<()> {
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

    /// The first offset appended at or after `ts` (ms since the epoch), if any.
    pub fn offset_for_time(&self, topic: &[u8], partition: &str, ts: u64) -> Result<Option<u64>> {
        match self.find(topic, partition)? {
            Found::Open(p) => p.offset_for_time(ts),
            Found::Parked(_) => Ok(None),
        }
    }

    /// Every topic, sorted.
    pub fn topics(&self) -> Vec<Vec<u8>> {
        let mut t: Vec<Vec<u8>> = self.parts.keys().map(|(t, _)| t.clone()).collect();
        t.extend(self.parked.topics().map(<[u8]>::to_vec));
        t.sort_unstable();
        t.dedup();
        t
    }

    /// The listing of every partition, or of one topic's, sorted (parked
    /// ones included: no record, no segment).
    pub fn partitions(&self, topic: Option<&[u8]>) -> Vec<PartitionInfo> {
        let want = |t: &Vec<u8>| topic.is_none_or(|w| w == t.as_slice());
        let mut out: Vec<PartitionInfo> = self
            .parts
            .iter()
            .filter(|((t, _), _)| want(t))
            .map(|(_, p)| p.info())
            .collect();
        if self.parked.is_empty() {
            return out;
        }
        out.extend(
            self.parked
                .iter(topic)
                .map(|(t, p, s)| parked_info(t, &p, s.next)),
        );
        out.sort_unstable_by(|a, b| (&a.topic, &a.partition).cmp(&(&b.topic, &b.partition)));
        out
    }

    /// (topic, partition) of every partition that is not parked (each in a
    /// directory of its own; it may be empty), or of one topic's, sorted.
    pub fn open_partitions(&self, topic: Option<&[u8]>) -> Vec<PartKey> {
        self.parts
            .keys()
            .filter(|(t, _)| topic.is_none_or(|w| w == t.as_slice()))
            .cloned()
            .collect()
    }

    /// The listing entry of one partition.
    pub fn partition(&self, topic: &[u8], partition: &str) -> Option<PartitionInfo> {
        match self.find(topic, partition).ok()? {
            Found::Open(p) => Some(p.info()),
            Found::Parked(next) => Some(parked_info(topic, partition, next)),
        }
    }

    /// Closes cleanly: indexes written out, everything synced. When all of
    /// it was (and no partition is set aside), leaves [`CLEAN_FILE`], so the
    /// next open syncs nothing.
    pub fn close(mut self) -> Result<()> {
        let mut first_err = None;
        for p in self.parts.values_mut() {
            if let Err(e) = p.close() {
                first_err.get_or_insert(e);
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        // Nothing is written after this (the partitions' drops find their
        // indexes finished).
        self.parts.clear();
        if !self.cfg.read_only && self.damaged.is_empty() {
            if let Err(e) = leave_clean_mark(&self.cfg, &self.root) {
                // Everything is synced all the same; the next open syncs again.
                tracing::warn!("cannot mark the log closed cleanly: {e}");
            }
        }
        Ok(())
    }
}
