//! What a store does for consumer groups (docs/groups.md, "Commits"): it
//! hears every member's announcement (a [`Registry`]), takes the COMMITs of
//! live members that claim what they commit, keeps the greatest commit per
//! (group, topic, partition) (a [`CommitTable`]) durably in `commits.log`,
//! and answers COMMIT-QUERY and COMMIT with COMMIT-OFFSETS. No sockets: the
//! event loop (`run.rs`) hands it the group messages and sends what it
//! answers.
//!
//! Stores replicate commits by anti-entropy: each asks the others for every
//! commit they hold (a COMMIT-QUERY of the empty group) after start-up,
//! when another store connects, then every minute (the timer of
//! [`PeerHeads`], as for their heads), and merges the COMMIT-OFFSETS that
//! answer its last two asks ([`CommitTable::merge_replica`]: a join over
//! `(epoch, offset)`), logging the rows they moved. A store that was down
//! or missed a COMMIT thus catches up, whatever order the answers come in.
//!
//! `commits.log` is a sequence of commit records ([`CommitRecord`]), one
//! per row a commit moved, written and synced before the COMMIT is
//! answered. At start-up it is read up to its first bad record (a torn
//! tail is cut off there) and merged; when it grows past four times the
//! table (and past 1 MiB) it is rewritten from the table through a synced
//! temporary file renamed over it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::group::commits::{read_log, CommitRecord, CommitTable};
use crate::group::registry::{entry_records, Registry};
use crate::node::out::Fate;
use crate::node::store::state::heads::PeerHeads;
use crate::wire::group::{
    CommitOffsets, CommitQuery, Entry, GroupMessage, OFFSETS_GROUP_KNOWN, OFFSETS_LAST,
};

/// The commit log's name in a store's directory.
pub const COMMITS_FILE: &str = "commits.log";
/// Entries per COMMIT-OFFSETS (each at most 530 octets: under 64 KiB).
const ANSWER_CHUNK: usize = 100;
/// The log is compacted past this size, and past four times the table's.
const COMPACT_AFTER: u64 = 1 << 20;

/// The commit log on disk (opened at the first commit to append).
#[derive(Debug)]
struct CommitsFile {
    path: PathBuf,
    file: Option<File>,
    len: u64,
}

impl CommitsFile {
    fn append(&mut self, buf: &[u8]) -> Result<()> {
        let path = &self.path;
        let err = |e| io_error("append to the commit log", path, e);
        let mut file = match self.file.take() {
            Some(f) => f,
            None => OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(err)?,
        };
        let written = file.write_all(buf).and_then(|()| file.sync_data());
        self.file = Some(file);
        written.map_err(err)?;
        self.len += buf.len() as u64;
        Ok(())
    }
}

fn io_error(what: &'static str, path: &Path, e: std::io::Error) -> Error {
    Error::Log(crate::log::LogError::io(what, path, e))
}

/// A store's groups: members heard, commits kept.
#[derive(Debug)]
pub struct StoreGroups {
    address: Vec<u8>,
    registry: Registry,
    table: CommitTable,
    file: Option<CommitsFile>,
    base: Instant,
    /// The log is compacted past this size ([`COMPACT_AFTER`]).
    compact_after: u64,
    /// COMMITs refused: from no live member of the group, or for a
    /// partition the committer does not claim.
    pub commits_refused: u64,
    /// Rows a COMMIT moved.
    pub commits_taken: u64,
    /// Records of the commit log cut off at start-up (a torn tail).
    pub log_damaged: bool,
    /// Appends to the commit log that failed (the COMMIT went unanswered).
    pub log_errors: u64,
    /// Rows another store's answer moved (anti-entropy).
    pub commits_replicated: u64,
    /// When to ask the other stores for their commits.
    peers: PeerHeads,
    /// The sequences of the last two asks: only their answers are merged.
    asks: [u64; 2],
}

impl StoreGroups {
    /// A store `address`'s groups, its commits kept in `path` (read back
    /// first) or in memory only (`None`: a store with no directory).
    pub fn open(address: &[u8], path: Option<&Path>, now: Instant) -> Result<Self> {
        let mut table = CommitTable::new();
        let mut log_damaged = false;
        let file = match path {
            None => None,
            Some(path) => {
                let bytes = match std::fs::read(path) {
                    Ok(b) => b,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                    Err(e) => return Err(io_error("read the commit log", path, e)),
                };
                let got = read_log(&bytes);
                for r in &got.records {
                    table.merge(r);
                }
                if let Some(damage) = &got.damage {
                    log_damaged = true;
                    tracing::warn!(
                        "{}: cut at byte {} ({damage}); the commits before it are kept",
                        path.display(),
                        got.clean_len
                    );
                }
                let len = got.clean_len as u64;
                if len < bytes.len() as u64 {
                    let cut = OpenOptions::new()
                        .write(true)
                        .open(path)
                        .and_then(|f| f.set_len(len).and_then(|()| f.sync_all()));
                    cut.map_err(|e| io_error("cut the commit log's torn tail", path, e))?;
                }
                Some(CommitsFile {
                    path: path.to_path_buf(),
                    file: None,
                    len,
                })
            }
        };
        Ok(Self {
            address: address.to_vec(),
            registry: Registry::new(),
            table,
            file,
            base: now,
            compact_after: COMPACT_AFTER,
            commits_refused: 0,
            commits_taken: 0,
            log_damaged,
            log_errors: 0,
            commits_replicated: 0,
            peers: PeerHeads::new(now),
            // Unguessable: an answer to no ask of ours is not merged.
            asks: [uuid::Uuid::new_v4().as_u64_pair().0; 2],
        })
    }

    fn ms(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.base).as_millis()).unwrap_or(u64::MAX)
    }

    /// The table (what `describe` and the tests read).
    pub fn table(&self) -> &CommitTable {
        &self.table
    }

    /// One group message: an announcement is noted, a COMMIT checked,
    /// merged, made durable and answered, a COMMIT-QUERY answered. `wall_ms`
    /// is the time stamped on commits taken. Answers go to `send`.
    pub fn on_group(
        &mut self,
        msg: &GroupMessage<'_>,
        now: Instant,
        wall_ms: u64,
        send: &mut dyn FnMut(&GroupMessage<'_>) -> Result<()>,
    ) -> Result<Fate> {
        let t = self.ms(now);
        match msg {
            GroupMessage::Member(m) => {
                self.registry.announcement(t, m);
                Ok(Fate::Taken(0))
            }
            GroupMessage::Commit(c) => {
                self.registry.expire(t);
                if let Err(why) = self.registry.check_commit(t, c) {
                    self.commits_refused += 1;
                    tracing::debug!("refused a COMMIT of group {:?}: {why}", lossy(c.group));
                    return Ok(Fate::Ignored);
                }
                let records = Registry::records(c, wall_ms);
                if !self.take(&records, false) {
                    // Not answered: the member commits again (the next
                    // auto-commit), and the store goes on serving records.
                    return Ok(Fate::Taken(0));
                }
                let topics: Vec<&[u8]> = c.entries.iter().map(|e| e.topic).collect();
                let parts: Vec<(&[u8], &[u8])> =
                    c.entries.iter().map(|e| (e.topic, e.partition)).collect();
                let rows: Vec<CommitRecord> = self
                    .table
                    .commits(c.group, &topics)
                    .into_iter()
                    .filter(|r| parts.contains(&(r.topic.as_slice(), r.partition.as_slice())))
                    .collect();
                self.answer(c.address, c.group, c.sequence, &rows, send)?;
                Ok(Fate::Taken(0))
            }
            GroupMessage::CommitQuery(q) => {
                if q.group.is_empty() {
                    // Every group (another store's anti-entropy, `dafka groups`).
                    let groups: Vec<Vec<u8>> = self
                        .table
                        .groups()
                        .into_iter()
                        .map(<[u8]>::to_vec)
                        .collect();
                    for g in groups {
                        let rows = self.table.commits(&g, &q.topics);
                        self.answer(q.address, &g, q.sequence, &rows, send)?;
                    }
                } else {
                    let rows = self.table.commits(q.group, &q.topics);
                    self.answer(q.address, q.group, q.sequence, &rows, send)?;
                }
                Ok(Fate::Taken(0))
            }
            GroupMessage::CommitOffsets(o) => Ok(self.on_replica(o, wall_ms)),
            // The cluster view's (`node/store/view.rs`).
            GroupMessage::PartitionsQuery(_) | GroupMessage::Partitions(_) => Ok(Fate::Ignored),
        }
    }

    /// Another store's COMMIT-OFFSETS answering one of this store's last two
    /// asks: its rows merged as replicas and logged. An answer to nothing
    /// asked (late, or forged) is ignored.
    fn on_replica(&mut self, o: &CommitOffsets<'_>, wall_ms: u64) -> Fate {
        let mine = self.address.as_slice();
        if o.to != mine || o.address == mine || !self.asks.contains(&o.sequence) {
            return Fate::Ignored;
        }
        self.take(&entry_records(o.group, &o.entries, wall_ms), true);
        Fate::Taken(0)
    }

    /// When this store next asks the other stores for their commits.
    pub fn next_ask_at(&self) -> Instant {
        self.peers.next
    }

    /// Another store connected to us (its subscription to every
    /// COMMIT-QUERY): ask the stores soon, and once more a little later.
    pub fn store_joined(&mut self, now: Instant) {
        self.peers.store_joined(now);
    }

    /// Asks the other stores for every commit they hold, when it is time
    /// ([`StoreGroups::next_ask_at`]).
    pub fn ask_if_due(
        &mut self,
        now: Instant,
        send: &mut dyn FnMut(&GroupMessage<'_>) -> Result<()>,
    ) -> Result<()> {
        if !self.peers.due(now) {
            return Ok(());
        }
        let sequence = self.asks[1].wrapping_add(1);
        self.asks = [self.asks[1], sequence];
        send(&GroupMessage::CommitQuery(CommitQuery {
            group: b"",
            address: &self.address,
            sequence,
            topics: Vec::new(),
        }))
    }

    /// Merges `records` (a member's commit, or `replica`s: another store's
    /// rows), appends the rows they moved to the log and syncs it. False if
    /// the log could not take them (counted in `log_errors`).
    fn take(&mut self, records: &[CommitRecord], replica: bool) -> bool {
        match self.merge_and_log(records, replica) {
            Ok(()) => true,
            Err(e) => {
                self.log_errors += 1;
                if self.log_errors.is_power_of_two() {
                    tracing::warn!("commits not made durable ({} so far): {e}", self.log_errors);
                }
                false
            }
        }
    }

    fn merge_and_log(&mut self, records: &[CommitRecord], replica: bool) -> Result<()> {
        let mut buf = Vec::new();
        for r in records {
            let at = buf.len();
            if r.encode(&mut buf).is_err() {
                // An empty topic or partition: no record names one.
                self.commits_refused += 1;
                continue;
            }
            if replica && self.table.merge_replica(r) {
                self.commits_replicated += 1;
            } else if !replica && self.table.merge(r) {
                self.commits_taken += 1;
            } else {
                buf.truncate(at);
            }
        }
        let Some(f) = &mut self.file else {
            return Ok(());
        };
        if buf.is_empty() {
            return Ok(());
        }
        f.append(&buf)?;
        self.compact_if_due()
    }

    /// Rewrites the log from the table once it is past [`COMPACT_AFTER`]
    /// and four times the table's size.
    fn compact_if_due(&mut self) -> Result<()> {
        let Some(f) = &mut self.file else {
            return Ok(());
        };
        if f.len <= self.compact_after {
            return Ok(());
        }
        let mut buf = Vec::new();
        for r in self.table.snapshot() {
            if let Err(e) = r.encode(&mut buf) {
                tracing::warn!("a commit that cannot be logged: {e}");
            }
        }
        if f.len <= 4 * buf.len() as u64 {
            return Ok(());
        }
        let tmp = f.path.with_extension("log.tmp");
        let err = |e| io_error("compact the commit log", &f.path, e);
        std::fs::write(&tmp, &buf).map_err(err)?;
        File::open(&tmp).and_then(|t| t.sync_all()).map_err(err)?;
        std::fs::rename(&tmp, &f.path).map_err(err)?;
        if let Some(dir) = f.path.parent() {
            // The rename itself made durable (a directory fsync; not on
            // every platform, hence not fatal).
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
        // Opened again at the next append.
        f.file = None;
        f.len = buf.len() as u64;
        Ok(())
    }

    /// COMMIT-OFFSETS to `to`: `rows` of `group`, in chunks, the last one
    /// flagged; *group known* when this store holds a commit of the group.
    fn answer(
        &self,
        to: &[u8],
        group: &[u8],
        sequence: u64,
        rows: &[CommitRecord],
        send: &mut dyn FnMut(&GroupMessage<'_>) -> Result<()>,
    ) -> Result<()> {
        let known = if self.table.group_known(group) {
            OFFSETS_GROUP_KNOWN
        } else {
            0
        };
        let chunks: Vec<&[CommitRecord]> = if rows.is_empty() {
            vec![rows]
        } else {
            rows.chunks(ANSWER_CHUNK).collect()
        };
        let last = chunks.len() - 1;
        for (i, chunk) in chunks.into_iter().enumerate() {
            let entries = chunk
                .iter()
                .map(|r| Entry {
                    topic: &r.topic,
                    partition: &r.partition,
                    epoch: r.position.epoch,
                    offset: r.position.offset,
                })
                .collect();
            let flags = known | if i == last { OFFSETS_LAST } else { 0 };
            send(&GroupMessage::CommitOffsets(CommitOffsets {
                to,
                address: &self.address,
                group,
                sequence,
                flags,
                entries,
            }))?;
        }
        Ok(())
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[cfg(test)]
mod tests;
