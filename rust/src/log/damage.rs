//! Set-aside damage: partitions the log could not open, or that failed.
//!
//! With [`LogConfig::isolate_damaged`](super::LogConfig::isolate_damaged) a
//! partition that cannot be opened (or made durable at open) is set aside
//! instead of failing the whole log: it is listed in [`Log::damaged`], reads
//! and appends of it fail with [`LogError::Failed`], and nothing is created
//! over its files. A partition that failed later (an I/O error it could not
//! undo) stays in the log, unusable, until [`Log::reopen_failed`] opens it
//! again from its files; [`Log::retry_set_aside`] is the periodic retry of
//! the set-aside ones. What counts as damage, and what recovery repairs, is
//! [`super::recovery`].

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::error::{LogError, Result};
use super::partition::Partition;
use super::{list_dirty, lossy, Log, PartKey};

/// A partition set aside because it could not be opened.
#[derive(Debug)]
pub(super) struct Damaged {
    dir: PathBuf,
    pub(super) why: String,
    /// For damage recovery refused: the directory's files when it did. Damage
    /// does not heal by itself, so [`Log::reopen_failed`] tries again only once
    /// they changed (repaired, moved away) rather than rescanning every time.
    files: Option<Vec<FileStamp>>,
    /// Open attempts so far.
    pub(super) tries: u32,
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

/// A partition that could not be opened (or made durable) at open is set
/// aside
/// ([`LogConfig::isolate_damaged`](super::LogConfig::isolate_damaged)):
/// logged, listed in `damaged`.
pub(super) fn set_aside_at_open(
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

pub(super) fn damaged_error((topic, partition): &PartKey, why: &str) -> LogError {
    LogError::Failed {
        topic: lossy(topic),
        partition: partition.clone(),
        reason: format!("it could not be opened: {why}"),
    }
}

impl Log {
    /// Partitions set aside because they could not be opened
    /// ([`LogConfig::isolate_damaged`](super::LogConfig::isolate_damaged)):
    /// (topic, partition, why).
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
    /// so an owner recovering from some other failure can succeed. Call it
    /// with no [`SyncBatch`](super::SyncBatch) in flight (its results would
    /// apply to the new state).
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
    /// [`SyncBatch`](super::SyncBatch) in flight (they are in none), cheap
    /// while their files stay as they were. For a periodic retry.
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
}
