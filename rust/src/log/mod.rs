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
//! | offset u64 | length u32 | crc32c u32 | timestamp u64 | body (length bytes)  |
//! +------------+------------+------------+---------------+----------------------+
//! | ...next record                                                              |
//! ```
//!
//! The CRC32C (Castagnoli, as Kafka's RecordBatch) covers what follows it:
//! timestamp and body. The timestamp is the store's append time in ms since the
//! epoch. Offsets are contiguous within a partition.
//!
//! Format version 2 (written now): a record's bytes are its *body*, the
//! record's metadata then its value ([`crate::meta`]: flags, an 8-byte
//! timestamp, an optional key, optional headers; 9 bytes for a record with
//! neither key nor headers). A plain value ([`Log::append_batch`]) is stored
//! as `meta::wrap(Some(append time), value)`: flagged as having no create
//! time. Version 1 (older builds): a record's bytes are its value alone.
//! Version 1 segments are still opened, read and recovered (readers get each
//! record as the body a plain value would have); a file never mixes the two:
//! the first append after opening a partition whose last segment is of
//! version 1 rolls a new segment (an empty one has its header rewritten).
//!
//! A record's *time*, what positioning by time goes by, is its metadata's
//! timestamp (the producer's create time, or the append time a plain value
//! was wrapped with), else its append time.
//!
//! # Index file (`.index`)
//!
//! A file header with magic `"DAFKAIDX"`, then fixed-width 16-byte entries
//! `relative offset u32 | position u32 | newest record time so far u64`, one each
//! `index_interval_bytes` of records and one for the last record of a sealed
//! segment; its header's version is its segment's (both are read, the entries
//! are alike). Reads binary-search it and scan a little; `offset_for_time` uses
//! the monotonic "newest so far" times the same way (create times may come out
//! of order: the answer is the first record whose time is at or after the one
//! asked, as Kafka's). It is a cache: recovery rebuilds it from the segment
//! when it is missing or does not match.
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
//! last sync started; this is checked on append and on [`Log::tick`], which the
//! owner's event loop calls (no background thread), ideally at
//! [`Log::next_deadline`]. An owner that runs the fdatasyncs on a thread of its
//! own (a store) calls [`Log::sync_elsewhere`]: the same policy then only says
//! when ([`Log::sync_due`], [`Log::next_sync_at`]), and each finished sync
//! reports which partitions reached which durable offset
//! ([`Log::finish_sync_into`]). Appends may be buffered
//! ([`Log::append_buffered`]): one write per partition per flush, counted by
//! [`Log::next_offset`] at once. The code is `sync.rs` and `buffer.rs`.
//!
//! # Retention
//!
//! Every `retention_check_ms`, [`Log::tick`] deletes the sealed segments past
//! `retain_hours` (by their newest append time, never by producers' create
//! times) or `retain_bytes` and parks the partitions left without a
//! record (see [`parked`]), a batch at a time. The code is `retention.rs`.
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
//! # Where things are
//!
//! | file | what it decides |
//! |------|-----------------|
//! | `mod.rs` | the [`Log`] itself: open, close, its settings |
//! | `append.rs` | the append forms, the offset rule's entry, skipping ahead; the open-files budget |
//! | `read.rs` | finding a partition (open or parked), reads, offsets, time look-up, listings |
//! | `periodic.rs` | [`Log::tick`], the owner's periodic call: interval syncs, retention, idle partitions settled |
//! | `sync.rs` | what is durable: group commit ([`Log::sync`], [`SyncBatch`], what a finished sync reports), when the policy wants one, [`Log::durable_next`], syncs at open, the clean mark |
//! | `buffer.rs` | the write buffer: appends gathered per partition, written with one call each |
//! | `retention.rs` | what retention deletes, and parking the partitions it empties |
//! | [`parked`] | the registry of parked partitions (`ROOT/.parked`): its lines and its map in memory |
//! | `damage.rs` | partitions set aside (could not be opened) or failed, and opening them again |
//! | `partition/` | one partition: `append.rs` the offset rule and rolling, `sync.rs` when it is due a sync and its durable offset, `read.rs` reads and time look-up, `retention.rs` which of its segments expired |
//! | [`recovery`] | what opening a segment repairs (torn tails, indexes) and what it refuses (damage) |
//! | `segment.rs`, `index.rs` | one segment file and its sparse index |
//! | [`format`], `io.rs` | the bytes on disk; every file operation, through the failpoint hook |
//! | `config.rs`, `error.rs` | [`LogConfig`] with its defaults; [`LogError`] |
//!
//! # API
//!
//! [`Log::open`], [`Log::append`], [`Log::append_batch`], [`Log::append_bodies`],
//! [`Log::append_buffered`], [`Log::flush_writes`],
//! [`Log::read`], [`Log::read_with`], [`Log::sync`], [`Log::tick`], [`Log::next_deadline`], [`Log::durable_next`],
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

mod append;
mod buffer;
mod config;
mod damage;
mod error;
pub mod format;
mod index;
mod io;
pub mod parked;
mod partition;
mod periodic;
mod read;
pub mod recovery;
mod retention;
mod segment;
mod sync;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use buffer::WRITE_BUFFER_BYTES;
pub use config::{system_clock_ms, Clock, Failpoint, FsyncPolicy, IoOp, LogConfig};
pub use error::{LogError, Result};
pub use parked::PARKED_FILE;
pub use partition::{PartitionInfo, PartitionSync, StoredRecord};
pub use recovery::RecoveryPolicy;
pub use sync::{Durable, SyncBatch, SyncDone, CLEAN_FILE};

use damage::{set_aside_at_open, Damaged};
use format::{check_partition_name, unescape_name};
use partition::Partition;
use retention::open_parked;
use sync::{leave_clean_mark, sync_opened, take_clean_mark};

/// (topic, partition name).
type PartKey = (Vec<u8>, String);

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
    /// (at most [`retention::PARK_BATCH`] per sweep): the next tick sweeps
    /// again.
    park_more: bool,
    /// The same for expired segments of partitions that keep records (at
    /// most [`retention::RETAIN_BATCH`] deleted per sweep).
    retain_more: bool,
    /// Appends not yet written ([`Log::append_buffered`]).
    buffer: buffer::WriteBuffer,
    /// The owner runs the group commits ([`Log::sync_elsewhere`]).
    sync_elsewhere: bool,
    /// When the last [`Log::begin_sync`] started (see [`Log::next_sync_at`]).
    last_commit: Option<std::time::Instant>,
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

/// Lists `p` (under `key`) in the log's `dirty` list, once.
fn list_dirty(dirty: &mut Vec<PartKey>, key: &PartKey, p: &mut Partition) {
    if !p.listed {
        p.listed = true;
        dirty.push(key.clone());
    }
}

/// A partition the log holds: open, or parked at its next offset.
enum Found<'a> {
    Open(&'a Partition),
    Parked(u64),
}

fn unknown_partition(topic: &[u8], partition: &str) -> LogError {
    LogError::UnknownPartition {
        topic: lossy(topic),
        partition: partition.to_owned(),
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
            buffer: buffer::WriteBuffer::default(),
            sync_elsewhere: false,
            last_commit: None,
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

    /// Closes cleanly: indexes written out, everything synced. When all of
    /// it was (and no partition is set aside), leaves [`CLEAN_FILE`], so the
    /// next open syncs nothing.
    pub fn close(mut self) -> Result<()> {
        let mut first_err = self.flush_writes().err();
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
