//! What a store does for consumer groups (docs/groups.md, "Commits"): it
//! hears every member's announcement (a [`Registry`], expired on a timer),
//! takes the COMMITs of live members heard holding what they commit
//! (bounded: no epoch past the row's, no offset past the partition's next
//! one in this store, in a secure cluster only from a certificate that
//! covers the group's topics), keeps the greatest commit per
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
//! answered, and merged into the table only once written: an append that
//! fails (a full disk) is cut back off the file, so the records after it
//! are never behind a torn one. At start-up it is read up to its first bad
//! record (a torn tail is cut off there) and merged; when it grows past
//! four times the table (and past 1 MiB) it is rewritten from the table
//! through a synced temporary file renamed over it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::group::commits::{read_log, CommitRecord, CommitTable};
use crate::group::registry::{entry_records, CommitRefused, Registry};
use crate::node::out::Fate;
use crate::node::store::state::heads::PeerHeads;
use crate::security::TopicPatterns;
use crate::wire::group::{
    CommitOffsets, CommitQuery, Entry, GroupMessage, OFFSETS_GROUP_KNOWN, OFFSETS_LAST,
};

/// The commit log's name in a store's directory.
pub const COMMITS_FILE: &str = "commits.log";
/// The log is compacted past this size, and past four times the table's.
const COMPACT_AFTER: u64 = 1 << 20;
/// How often the registry forgets members silent past their timeout.
const EXPIRE_EVERY: Duration = Duration::from_secs(1);
/// How long a commit past a partition's head waits for the store to hold
/// what it names (a member may read a record from its producer a moment
/// before the store has it).
const PENDING_FOR: Duration = Duration::from_secs(3);
/// Commits waiting so at most (more are taken at the head only).
const MAX_PENDING: usize = 1024;

/// A commit entry taken at its partition's head, to be taken at the offset
/// it named once the store holds that much, and answered again then.
#[derive(Debug)]
struct Pending {
    record: CommitRecord,
    to: Vec<u8>,
    sequence: u64,
    until: Instant,
}

/// The commit log on disk (opened at the first commit to append).
#[derive(Debug)]
struct CommitsFile {
    path: PathBuf,
    file: Option<File>,
    /// Its length up to the last record written and synced.
    len: u64,
    /// A failed append may have left bytes past `len`: cut them off
    /// before the next append.
    torn: bool,
    /// Tests: the next append writes this many bytes, then fails.
    #[cfg(test)]
    fail_next: Option<usize>,
}

impl CommitsFile {
    fn new(path: &Path, len: u64) -> Self {
        Self {
            path: path.to_path_buf(),
            file: None,
            len,
            torn: false,
            #[cfg(test)]
            fail_next: None,
        }
    }

    /// Appends `buf` and syncs it. On failure the file is cut back to what
    /// it held before (now, or at the next append if that fails too), so
    /// the records appended later never follow a torn one.
    fn append(&mut self, buf: &[u8]) -> Result<()> {
        let written = self.cut_if_torn().and_then(|()| self.write(buf));
        if let Err(e) = written {
            self.torn = true;
            // A file handle in an unknown state: opened again next time.
            self.file = None;
            if let Err(cut) = self.cut_if_torn() {
                tracing::warn!(
                    "{}: could not cut a failed append off ({cut}); retried at the next one",
                    self.path.display()
                );
            }
            return Err(io_error("append to the commit log", &self.path, e));
        }
        self.len += buf.len() as u64;
        Ok(())
    }

    fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let mut file = match self.file.take() {
            Some(f) => f,
            None => OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?,
        };
        #[cfg(test)]
        if let Some(n) = self.fail_next.take() {
            file.write_all(&buf[..n.min(buf.len())])?;
            return Err(std::io::Error::other("injected: no space left on device"));
        }
        file.write_all(buf)?;
        file.sync_data()?;
        self.file = Some(file);
        Ok(())
    }

    fn cut_if_torn(&mut self) -> std::io::Result<()> {
        if self.torn {
            let f = OpenOptions::new().write(true).open(&self.path)?;
            f.set_len(self.len)?;
            f.sync_all()?;
            self.torn = false;
        }
        Ok(())
    }
}

/// A partition's next offset (head + 1) in a store's log, `None` if it
/// holds none of it.
pub type NextOffset<'a> = &'a dyn Fn(&[u8], &[u8]) -> Option<u64>;

/// What a store checks a COMMIT against besides its registry and table.
#[derive(Clone, Copy)]
pub struct Checks<'a> {
    /// A partition's next offset (head + 1) in this store's log, `None` if
    /// it holds none of it: a commit is capped there.
    pub next_offset: NextOffset<'a>,
    /// In a secure cluster, the topics the sender's certificate allows (it
    /// must cover every topic of the group); `None` in an insecure one.
    pub sender_topics: Option<&'a TopicPatterns>,
}

impl Checks<'_> {
    /// No log, no security (tests, and the describing tool's table).
    pub const NONE: Checks<'static> = Checks {
        next_offset: &|_, _| Some(u64::MAX),
        sender_topics: None,
    };
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
    /// COMMITs refused: from no live member of the group, for a partition
    /// the committer was not heard holding, from a certificate that does
    /// not cover the group's topics; and entries refused: an epoch past the
    /// row's, a partition this store holds nothing of.
    pub commits_refused: u64,
    /// Entries whose offset was past the partition's next offset here,
    /// taken at that next offset.
    pub commits_capped: u64,
    /// GROUP-MEMBERs the registry refused (past its caps).
    pub announcements_refused: u64,
    /// Times the log was rewritten from the table.
    pub compactions: u64,
    /// When the registry next forgets silent members.
    next_expire: Instant,
    /// Commits past a partition's head, waiting for it.
    pending: Vec<Pending>,
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
                Some(CommitsFile::new(path, len))
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
            commits_capped: 0,
            announcements_refused: 0,
            compactions: 0,
            next_expire: now + EXPIRE_EVERY,
            pending: Vec::new(),
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

    /// The registry (what the tests read).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// One group message: an announcement is noted, a COMMIT checked,
    /// bounded, merged, made durable and answered, a COMMIT-QUERY
    /// answered. `wall_ms` is the time stamped on commits taken; `checks`
    /// what the store's log and the sender's certificate say. Answers go
    /// to `send`.
    pub fn on_group(
        &mut self,
        msg: &GroupMessage<'_>,
        (now, wall_ms): (Instant, u64),
        checks: Checks<'_>,
        send: &mut dyn FnMut(&GroupMessage<'_>) -> Result<()>,
    ) -> Result<Fate> {
        let t = self.ms(now);
        match msg {
            GroupMessage::Member(m) => match self.registry.announcement(t, m) {
                Ok(()) => Ok(Fate::Taken(0)),
                Err(why) => {
                    self.announcements_refused += 1;
                    tracing::debug!("refused a GROUP-MEMBER of {:?}: {why}", lossy(m.group));
                    Ok(Fate::Ignored)
                }
            },
            GroupMessage::Commit(c) => {
                self.registry.expire(t);
                if let Err(why) = self.check_commit(t, c, checks.sender_topics) {
                    self.commits_refused += 1;
                    tracing::debug!("refused a COMMIT of group {:?}: {why}", lossy(c.group));
                    return Ok(Fate::Ignored);
                }
                let records = self.bounded(c, (now, wall_ms), checks.next_offset);
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
            GroupMessage::CommitOffsets(o) => Ok(self.on_replica(o, wall_ms, checks.next_offset)),
            // The cluster view's (`node/store/view.rs`).
            GroupMessage::PartitionsQuery(_) | GroupMessage::Partitions(_) => Ok(Fate::Ignored),
        }
    }

    /// Whether `c`'s committer may commit for its group at all: a live
    /// member heard holding each partition; in a secure cluster also a
    /// certificate covering every topic of the group (as its live members
    /// announce them and its commits here name them).
    fn check_commit(
        &self,
        t: u64,
        c: &crate::wire::group::Commit<'_>,
        sender_topics: Option<&TopicPatterns>,
    ) -> std::result::Result<(), CommitRefused> {
        self.registry.check_commit(t, c)?;
        if let Some(allowed) = sender_topics {
            let mut topics = self.registry.topics(c.group);
            topics.extend(self.table.topics(c.group));
            if !topics.iter().all(|topic| allowed.allows(topic)) {
                return Err(CommitRefused::Topics);
            }
        }
        Ok(())
    }

    /// `c`'s entries as records to merge, bounded: an entry whose epoch is
    /// past its row's (only a reset raises an epoch, and members never
    /// reset) or for a partition this store holds nothing of is refused
    /// (counted); an offset past the partition's next one here is taken
    /// at that next one (counted in `commits_capped`), and at the offset
    /// it named if the store holds that within [`PENDING_FOR`]
    /// ([`StoreGroups::settle_pending`]).
    fn bounded(
        &mut self,
        c: &crate::wire::group::Commit<'_>,
        (now, wall_ms): (Instant, u64),
        next_offset: NextOffset<'_>,
    ) -> Vec<CommitRecord> {
        let mut records = Registry::records(c, wall_ms);
        let mut waiting = Vec::new();
        records.retain_mut(|r| {
            let row = self.table.get(&r.group, &r.topic, &r.partition);
            if r.position.epoch > row.map_or(0, |p| p.epoch) {
                self.commits_refused += 1;
                return false;
            }
            let Some(next) = next_offset(&r.topic, &r.partition) else {
                self.commits_refused += 1;
                return false;
            };
            if r.position.offset > next {
                waiting.push(Pending {
                    record: r.clone(),
                    to: c.address.to_vec(),
                    sequence: c.sequence,
                    until: now + PENDING_FOR,
                });
                r.position.offset = next;
                self.commits_capped += 1;
            }
            true
        });
        let room = MAX_PENDING.saturating_sub(self.pending.len());
        self.pending.extend(waiting.into_iter().take(room));
        records
    }

    /// Takes the commits that named an offset past their partition's head
    /// ([`StoreGroups::bounded`]) at that offset once this store holds it,
    /// and answers their member again (a synchronous commit is confirmed
    /// then); after [`PENDING_FOR`] they are forgotten, taken at the head.
    pub fn settle_pending(
        &mut self,
        now: Instant,
        next_offset: NextOffset<'_>,
        send: &mut dyn FnMut(&GroupMessage<'_>) -> Result<()>,
    ) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        for p in std::mem::take(&mut self.pending) {
            let r = &p.record;
            if now >= p.until {
                continue;
            }
            let held = next_offset(&r.topic, &r.partition);
            if held.is_none_or(|n| n < r.position.offset) {
                self.pending.push(p);
                continue;
            }
            if self.take(std::slice::from_ref(r), false) {
                let rows: Vec<CommitRecord> = self
                    .table
                    .commits(&r.group, &[r.topic.as_slice()])
                    .into_iter()
                    .filter(|row| row.partition == r.partition)
                    .collect();
                self.answer(&p.to, &r.group, p.sequence, &rows, send)?;
            }
        }
        Ok(())
    }

    /// Whether commits wait for their partition's head to reach them.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Forgets the members silent past their timeout, when it is time
    /// ([`StoreGroups::next_maintain_at`]): the registry does not wait for
    /// a COMMIT to shrink.
    pub fn maintain(&mut self, now: Instant) {
        if now >= self.next_expire {
            self.registry.expire(self.ms(now));
            self.next_expire = now + EXPIRE_EVERY;
        }
    }

    /// When [`StoreGroups::maintain`] has work next.
    pub fn next_maintain_at(&self) -> Instant {
        self.next_expire
    }

    /// Another store's COMMIT-OFFSETS answering one of this store's last two
    /// asks: its rows merged as replicas and logged. An answer to nothing
    /// asked (late, or forged) is ignored.
    /// Its offsets are capped at the partitions' next offsets here, as a
    /// member's are (a store that holds nothing of a partition takes the
    /// other's row as it is: that store capped it).
    fn on_replica(
        &mut self,
        o: &CommitOffsets<'_>,
        wall_ms: u64,
        next_offset: NextOffset<'_>,
    ) -> Fate {
        let mine = self.address.as_slice();
        if o.to != mine || o.address == mine || !self.asks.contains(&o.sequence) {
            return Fate::Ignored;
        }
        let mut records = entry_records(o.group, &o.entries, wall_ms);
        for r in &mut records {
            if let Some(next) = next_offset(&r.topic, &r.partition) {
                r.position.offset = r.position.offset.min(next);
            }
        }
        self.take(&records, true);
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

    /// Logs the records that move a row (written and synced first), then
    /// merges them: a failed append leaves the table as it was.
    fn merge_and_log(&mut self, records: &[CommitRecord], replica: bool) -> Result<()> {
        let mut buf = Vec::new();
        let mut moving = Vec::new();
        for r in records {
            let at = buf.len();
            if r.encode(&mut buf).is_err() {
                // An empty topic or partition: no record names one.
                self.commits_refused += 1;
                continue;
            }
            if self.table.moves(r, replica) {
                moving.push(r);
            } else {
                buf.truncate(at);
            }
        }
        if moving.is_empty() {
            return Ok(());
        }
        if let Some(f) = &mut self.file {
            f.append(&buf)?;
        }
        for r in moving {
            if replica && self.table.merge_replica(r) {
                self.commits_replicated += 1;
            } else if !replica && self.table.merge(r) {
                self.commits_taken += 1;
            }
        }
        // The records are durable: a failed compaction (tried again at
        // the next append) does not make them fail.
        if let Err(e) = self.compact_if_due() {
            tracing::warn!("{e}");
        }
        Ok(())
    }

    /// Rewrites the log from the table once it is past [`COMPACT_AFTER`]
    /// and four times the table's size (kept by the table as it grows: the
    /// table is encoded only when it is rewritten).
    fn compact_if_due(&mut self) -> Result<()> {
        let Some(f) = &mut self.file else {
            return Ok(());
        };
        if f.len <= self.compact_after || f.len <= 4 * self.table.encoded_len() {
            return Ok(());
        }
        let mut buf = Vec::new();
        for r in self.table.snapshot() {
            if let Err(e) = r.encode(&mut buf) {
                tracing::warn!("a commit that cannot be logged: {e}");
            }
        }
        self.compactions += 1;
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
        f.torn = false;
        f.len = buf.len() as u64;
        Ok(())
    }

    /// COMMIT-OFFSETS to `to`: `rows` of `group` in one message, flagged
    /// *last*; *group known* when this store holds a commit of the group.
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
        // One message, whatever its size: a subscriber's queue takes or
        // drops it whole, so a member never settles a lookup on part of an
        // answer (rows it did not get would start their partitions without
        // their commits). Nothing bounds what a SUB receives.
        let entries = rows
            .iter()
            .map(|r| Entry {
                topic: &r.topic,
                partition: &r.partition,
                epoch: r.position.epoch,
                offset: r.position.offset,
            })
            .collect();
        send(&GroupMessage::CommitOffsets(CommitOffsets {
            to,
            address: &self.address,
            group,
            sequence,
            flags: known | OFFSETS_LAST,
            entries,
        }))?;
        Ok(())
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[cfg(test)]
mod tests;
