//! `LogConfig`: the typed options of a [`Log`](super::Log) with their documented
//! defaults (ZPER's), the injectable clock and the I/O failpoint hook.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::error::{LogError, Result};
use super::format::{FILE_HEADER_LEN, MAX_SEGMENT_BYTES, RECORD_HEADER_LEN};
use super::recovery::RecoveryPolicy;

/// When appended data is handed to `fdatasync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// After every append call (one fdatasync per record or per batch).
    Always,
    /// When `flush_messages` records are unsynced or `flush_interval_ms` has passed
    /// since the last sync, checked on append and on [`Log::tick`](super::Log::tick).
    #[default]
    Interval,
    /// Only on an explicit [`Log::sync`](super::Log::sync) or on close.
    Never,
}

impl std::str::FromStr for FsyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "always" => Ok(FsyncPolicy::Always),
            "interval" => Ok(FsyncPolicy::Interval),
            "never" => Ok(FsyncPolicy::Never),
            _ => Err(format!(
                "fsync policy {s:?}: expected \"always\", \"interval\" or \"never\""
            )),
        }
    }
}

/// An I/O operation a failpoint can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoOp {
    /// Creating a file or directory.
    Create,
    /// Writing to a segment or index file. A failing write first writes half of its
    /// bytes, like a disk that fills up mid-write.
    Write,
    /// fdatasync of a file or fsync of a directory.
    Sync,
    /// Truncating a file.
    Truncate,
    /// Deleting a file.
    Remove,
}

/// Clock returning ms since the Unix epoch.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;
/// Failpoint hook: called before each I/O operation; an `Err` makes it fail.
pub type Failpoint = Arc<dyn Fn(IoOp, &Path) -> std::io::Result<()> + Send + Sync>;

/// The system clock in ms since the Unix epoch.
pub fn system_clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Options of a [`Log`](super::Log). Defaults follow ZPER.
#[derive(Clone)]
pub struct LogConfig {
    /// Roll to a new segment when the active one would exceed this (512 MiB).
    pub segment_bytes: u64,
    /// Bytes of records between two index entries (4096).
    pub index_interval_bytes: u32,
    /// Delete segments whose newest record is older than this (168 h); an
    /// active segment that old is rolled first (the partition keeps its next
    /// offset). `None` keeps them forever.
    pub retain_hours: Option<u64>,
    /// Forget a parked partition (one retention emptied, kept as its next
    /// offset in `.parked`) this long after it was parked (720 h); `None`
    /// keeps them for good. Every producer run and Spark task leaves one, so
    /// without a limit the registry grows with every task ever run. A store
    /// that forgot a partition treats a record of it as one of a new
    /// partition: it FETCHes what comes before from its peers and, when none
    /// holds any of it, starts the partition at the first record it gets.
    pub forget_parked_hours: Option<u64>,
    /// Delete the oldest sealed segments while a partition holds more bytes than
    /// this; `None` (the default) sets no limit.
    pub retain_bytes: Option<u64>,
    /// With `fsync = Interval`: sync once this many records are unsynced (10,000).
    pub flush_messages: u64,
    /// With `fsync = Interval`: sync once this many ms passed since the last (1,000).
    pub flush_interval_ms: u64,
    /// When to fdatasync (`Interval`).
    pub fsync: FsyncPolicy,
    /// What recovery does with damage at open (`TolerateTailCorruption`).
    pub recovery: RecoveryPolicy,
    /// Open without modifying anything: recovery keeps damaged tails on disk and
    /// hides them, appends fail. For inspection tools.
    pub read_only: bool,
    /// How often [`Log::tick`](super::Log::tick) applies retention (60,000 ms).
    pub retention_check_ms: u64,
    /// Keep at most about this many segment files open. A partition holds its
    /// active segment's file open; past this, the files of the partitions
    /// appended to least recently are closed, to be reopened on their next
    /// append or read (a sync opens files by path, so unsynced appends lose
    /// nothing). `None` (the default): half of the process's open-files limit
    /// (after raising the soft limit to the hard one), at least 64. Whatever
    /// it says, all the logs of a process together keep within that half.
    pub max_open_files: Option<usize>,
    /// A partition that cannot be opened (recovery refuses its damage, an I/O
    /// error) is set aside instead of failing the whole open: listed by
    /// [`Log::damaged`](super::Log::damaged), refusing appends and reads, and
    /// opened again by [`Log::reopen_failed`](super::Log::reopen_failed).
    /// Off by default (open fails, naming the damage); a store turns it on,
    /// so one damaged partition does not take every other one offline.
    pub isolate_damaged: bool,
    /// Time source for record timestamps, flush intervals and retention.
    pub clock: Clock,
    /// Optional I/O failure injection, for tests.
    pub failpoint: Option<Failpoint>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 512 * 1024 * 1024,
            index_interval_bytes: 4096,
            retain_hours: Some(168),
            forget_parked_hours: Some(720),
            retain_bytes: None,
            flush_messages: 10_000,
            flush_interval_ms: 1_000,
            fsync: FsyncPolicy::Interval,
            recovery: RecoveryPolicy::TolerateTailCorruption,
            read_only: false,
            retention_check_ms: 60_000,
            max_open_files: None,
            isolate_damaged: false,
            clock: Arc::new(system_clock_ms),
            failpoint: None,
        }
    }
}

impl fmt::Debug for LogConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogConfig")
            .field("segment_bytes", &self.segment_bytes)
            .field("index_interval_bytes", &self.index_interval_bytes)
            .field("retain_hours", &self.retain_hours)
            .field("forget_parked_hours", &self.forget_parked_hours)
            .field("retain_bytes", &self.retain_bytes)
            .field("flush_messages", &self.flush_messages)
            .field("flush_interval_ms", &self.flush_interval_ms)
            .field("fsync", &self.fsync)
            .field("recovery", &self.recovery)
            .field("read_only", &self.read_only)
            .field("retention_check_ms", &self.retention_check_ms)
            .field("max_open_files", &self.max_open_files)
            .field("isolate_damaged", &self.isolate_damaged)
            .field("failpoint", &self.failpoint.is_some())
            .finish()
    }
}

impl LogConfig {
    /// Checks the options, saying which one is out of range.
    pub fn validate(&self) -> Result<()> {
        let min = (FILE_HEADER_LEN + RECORD_HEADER_LEN) as u64;
        if self.segment_bytes < min || self.segment_bytes > MAX_SEGMENT_BYTES {
            return Err(LogError::Invalid(format!(
                "segment_bytes = {}: must be between {min} and {MAX_SEGMENT_BYTES}",
                self.segment_bytes
            )));
        }
        if self.index_interval_bytes == 0 {
            return Err(LogError::Invalid(
                "index_interval_bytes must be at least 1".into(),
            ));
        }
        if self.max_open_files == Some(0) {
            return Err(LogError::Invalid(
                "max_open_files must be at least 1 (leave it unset for half the open-files limit)"
                    .into(),
            ));
        }
        // A deadline that far out is "never", and further would overflow a clock.
        const LONGEST_MS: u64 = 3_000_000_000_000; // about 95 years
        if self.flush_interval_ms > LONGEST_MS || self.retention_check_ms > LONGEST_MS {
            return Err(LogError::Invalid(format!(
                "flush_interval_ms and retention_check_ms must be at most {LONGEST_MS} (about \
                 95 years)"
            )));
        }
        if self.forget_parked_hours == Some(0) {
            return Err(LogError::Invalid(
                "forget_parked_hours must be at least 1 (None keeps parked partitions for \
                 good, what 0 means to dafka-store's --forget-parked-hours)"
                    .into(),
            ));
        }
        if self.fsync == FsyncPolicy::Interval && self.flush_messages == 0 {
            return Err(LogError::Invalid(
                "flush_messages must be at least 1 (use fsync=always to sync every append)".into(),
            ));
        }
        Ok(())
    }

    pub(crate) fn retain_ms(&self) -> Option<u64> {
        self.retain_hours.map(|h| h.saturating_mul(3_600_000))
    }

    /// Parked partitions parked at or before this are forgotten `now`.
    pub(crate) fn forget_parked_before(&self, now: u64) -> Option<u64> {
        let h = self.forget_parked_hours?;
        now.checked_sub(h.saturating_mul(3_600_000))
    }

    pub(crate) fn now(&self) -> u64 {
        (self.clock)()
    }

    /// Runs the failpoint for `op` on `path`, if one is set.
    pub(crate) fn fail(&self, op: IoOp, path: &Path) -> std::io::Result<()> {
        match &self.failpoint {
            Some(f) => f(op, path),
            None => Ok(()),
        }
    }
}
