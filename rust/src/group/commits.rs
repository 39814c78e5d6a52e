//! The commits the stores keep (docs/groups.md, "Commits"): the record a
//! store appends to its commit log, with a strict codec, and the table those
//! records build.
//!
//! A record, as a store's commit log holds it (numbers big-endian):
//!
//! ```text
//! length     4   octets after this field, up to and including crc
//! version    1   0x01
//! group      string (1-octet length, 1..=255 bytes)
//! topic      string (1..=255 bytes)
//! partition  string (1..=255 bytes)
//! epoch      8
//! offset     8   the next offset to read
//! time       8   ms since the epoch, when the store took the commit
//! crc        4   CRC-32C of version .. time
//! ```
//!
//! The table keeps, per (group, topic, partition), the greatest
//! `(epoch, offset, time)`: merging is a join (commutative, associative,
//! idempotent), so stores that exchange their commits in any order, any
//! number of times, hold the same table, and a stale or repeated commit can
//! never move a partition back. Only a reset (a higher epoch) moves one back.

use std::collections::BTreeMap;

/// The version octet of a commit record.
pub const RECORD_VERSION: u8 = 0x01;
/// The smallest record: length, version, three 1-byte strings, 3 numbers, crc.
pub const MIN_RECORD: usize = 4 + 1 + 3 * 2 + 24 + 4;
/// The largest record: three 255-byte strings.
pub const MAX_RECORD: usize = 4 + 1 + 3 * 256 + 24 + 4;

/// Why bytes are not a commit record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitError {
    #[error("truncated commit record: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("commit record length {0} is out of range")]
    BadLength(u32),
    #[error("unknown commit record version {0:#04x}")]
    BadVersion(u8),
    #[error("commit record field {0} is empty")]
    Empty(&'static str),
    #[error("commit record field {0} is over 255 bytes")]
    TooLong(&'static str),
    #[error("commit record checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    #[error("{0} bytes left over inside a commit record")]
    TrailingBytes(usize),
}

/// Where a partition's commit stands; ordered as the table merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub epoch: u64,
    pub offset: u64,
    pub time_ms: u64,
}

/// One commit: a partition of a group and where the group stands in it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommitRecord {
    pub group: Vec<u8>,
    pub topic: Vec<u8>,
    pub partition: Vec<u8>,
    pub position: Position,
}

fn check_name(field: &'static str, v: &[u8]) -> Result<u8, CommitError> {
    if v.is_empty() {
        return Err(CommitError::Empty(field));
    }
    u8::try_from(v.len()).map_err(|_| CommitError::TooLong(field))
}

impl CommitRecord {
    /// Appends the record to `out`; a name that is empty or over 255 bytes
    /// cannot be encoded (and `out` is left as it was).
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), CommitError> {
        let lens = [
            check_name("group", &self.group)?,
            check_name("topic", &self.topic)?,
            check_name("partition", &self.partition)?,
        ];
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        out.push(RECORD_VERSION);
        for (len, v) in lens.iter().zip([&self.group, &self.topic, &self.partition]) {
            out.push(*len);
            out.extend_from_slice(v);
        }
        let p = self.position;
        for n in [p.epoch, p.offset, p.time_ms] {
            out.extend_from_slice(&n.to_be_bytes());
        }
        let crc = crc32c::crc32c(&out[start + 4..]);
        out.extend_from_slice(&crc.to_be_bytes());
        let length = (out.len() - start - 4) as u32;
        out[start..start + 4].copy_from_slice(&length.to_be_bytes());
        Ok(())
    }

    /// The record at the front of `buf` and the bytes it took.
    pub fn decode(buf: &[u8]) -> Result<(CommitRecord, usize), CommitError> {
        let head = buf.get(..4).ok_or(CommitError::Truncated {
            need: 4,
            have: buf.len(),
        })?;
        let length = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let n = length as usize;
        if !(MIN_RECORD - 4..=MAX_RECORD - 4).contains(&n) {
            return Err(CommitError::BadLength(length));
        }
        let body = buf.get(4..4 + n).ok_or(CommitError::Truncated {
            need: 4 + n,
            have: buf.len(),
        })?;
        let (data, crc) = body.split_at(n - 4);
        let stored = u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]);
        let computed = crc32c::crc32c(data);
        if stored != computed {
            return Err(CommitError::BadCrc { stored, computed });
        }
        let mut r = data;
        let version = take(&mut r, 1)?[0];
        if version != RECORD_VERSION {
            return Err(CommitError::BadVersion(version));
        }
        let mut names = [Vec::new(), Vec::new(), Vec::new()];
        for (slot, field) in names.iter_mut().zip(["group", "topic", "partition"]) {
            let len = take(&mut r, 1)?[0] as usize;
            if len == 0 {
                return Err(CommitError::Empty(field));
            }
            *slot = take(&mut r, len)?.to_vec();
        }
        let mut nums = [0u64; 3];
        for v in &mut nums {
            let mut a = [0u8; 8];
            a.copy_from_slice(take(&mut r, 8)?);
            *v = u64::from_be_bytes(a);
        }
        if !r.is_empty() {
            return Err(CommitError::TrailingBytes(r.len()));
        }
        let [group, topic, partition] = names;
        let record = CommitRecord {
            group,
            topic,
            partition,
            position: Position {
                epoch: nums[0],
                offset: nums[1],
                time_ms: nums[2],
            },
        };
        Ok((record, 4 + n))
    }
}

fn take<'a>(r: &mut &'a [u8], n: usize) -> Result<&'a [u8], CommitError> {
    if r.len() < n {
        return Err(CommitError::Truncated {
            need: n,
            have: r.len(),
        });
    }
    let (a, b) = r.split_at(n);
    *r = b;
    Ok(a)
}

/// What a commit log holds: its records up to the first one that does not
/// decode, the length of that clean prefix (where a store truncates a torn
/// tail before appending again), and why the rest was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogContents {
    pub records: Vec<CommitRecord>,
    pub clean_len: usize,
    pub damage: Option<CommitError>,
}

/// Reads a whole commit log.
pub fn read_log(mut buf: &[u8]) -> LogContents {
    let mut records = Vec::new();
    let mut clean_len = 0;
    while !buf.is_empty() {
        match CommitRecord::decode(buf) {
            Ok((rec, used)) => {
                records.push(rec);
                clean_len += used;
                buf = &buf[used..];
            }
            Err(e) => {
                return LogContents {
                    records,
                    clean_len,
                    damage: Some(e),
                }
            }
        }
    }
    LogContents {
        records,
        clean_len,
        damage: None,
    }
}

type Key = (Vec<u8>, Vec<u8>, Vec<u8>);

/// A store's commits: the greatest position per (group, topic, partition).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitTable {
    entries: BTreeMap<Key, Position>,
    /// What [`CommitTable::snapshot`] encodes to, in octets (kept as rows
    /// are added: a store compares its log's size with it on every append).
    encoded: u64,
}

/// The octets of a commit record naming `group`, `topic` and `partition`.
pub fn record_len(group: &[u8], topic: &[u8], partition: &[u8]) -> u64 {
    (MIN_RECORD - 3 + group.len() + topic.len() + partition.len()) as u64
}

impl CommitTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes `record` in; true if it moved its partition (a store appends
    /// to its log, and passes on to other stores, only then).
    pub fn merge(&mut self, record: &CommitRecord) -> bool {
        let key = (
            record.group.clone(),
            record.topic.clone(),
            record.partition.clone(),
        );
        match self.entries.get_mut(&key) {
            Some(p) if *p >= record.position => false,
            Some(p) => {
                *p = record.position;
                true
            }
            None => {
                self.encoded += record_len(&key.0, &key.1, &key.2);
                self.entries.insert(key, record.position);
                true
            }
        }
    }

    /// Whether [`CommitTable::merge`] (or with `replica`,
    /// [`CommitTable::merge_replica`]) would move `record`'s row; nothing
    /// changes (a store logs a record before it merges it).
    pub fn moves(&self, record: &CommitRecord, replica: bool) -> bool {
        let at = |p: &Position| (p.epoch, p.offset);
        match self.get(&record.group, &record.topic, &record.partition) {
            None => true,
            Some(p) if replica => at(&p) < at(&record.position),
            Some(p) => p < record.position,
        }
    }

    /// Takes in a commit another store holds (anti-entropy): it moves its
    /// partition only past the `(epoch, offset)` held here, whatever the
    /// receipt times, so two stores that took one commit at different times
    /// do not pass it back and forth. Still a join over `(epoch, offset)`.
    pub fn merge_replica(&mut self, record: &CommitRecord) -> bool {
        let at = |p: &Position| (p.epoch, p.offset);
        let held = self.get(&record.group, &record.topic, &record.partition);
        if held.is_some_and(|p| at(&p) >= at(&record.position)) {
            return false;
        }
        self.merge(record)
    }

    pub fn get(&self, group: &[u8], topic: &[u8], partition: &[u8]) -> Option<Position> {
        self.entries
            .get(&(group.to_vec(), topic.to_vec(), partition.to_vec()))
            .copied()
    }

    fn range<'s>(&'s self, group: &'s [u8]) -> impl Iterator<Item = (&'s Key, &'s Position)> + 's {
        self.entries
            .range((group.to_vec(), Vec::new(), Vec::new())..)
            .take_while(move |((g, _, _), _)| g.as_slice() == group)
    }

    /// Whether the group ever committed here (decides `offset_reset`
    /// against "first record held" for a partition without a commit).
    pub fn group_known(&self, group: &[u8]) -> bool {
        self.range(group).next().is_some()
    }

    /// The topics `group` committed here.
    pub fn topics<'s>(&'s self, group: &'s [u8]) -> std::collections::BTreeSet<&'s [u8]> {
        self.range(group)
            .map(|((_, t, _), _)| t.as_slice())
            .collect()
    }

    /// The octets [`CommitTable::snapshot`] encodes to.
    pub fn encoded_len(&self) -> u64 {
        self.encoded
    }

    /// The groups that committed here, in order (`dafka groups`).
    pub fn groups(&self) -> Vec<&[u8]> {
        let mut v: Vec<&[u8]> = Vec::new();
        for (g, _, _) in self.entries.keys() {
            if v.last() != Some(&g.as_slice()) {
                v.push(g);
            }
        }
        v
    }

    /// The group's commits for `topics` (all of its topics if empty), as
    /// records: a COMMIT-QUERY's answer, and what `describe` shows.
    pub fn commits(&self, group: &[u8], topics: &[&[u8]]) -> Vec<CommitRecord> {
        self.range(group)
            .filter(|((_, t, _), _)| topics.is_empty() || topics.contains(&t.as_slice()))
            .map(|((g, t, p), pos)| CommitRecord {
                group: g.clone(),
                topic: t.clone(),
                partition: p.clone(),
                position: *pos,
            })
            .collect()
    }

    /// Every commit, one record per partition: what a store rewrites its
    /// log to when it compacts it, and sends to a store that asks for all.
    pub fn snapshot(&self) -> Vec<CommitRecord> {
        self.entries
            .iter()
            .map(|((g, t, p), pos)| CommitRecord {
                group: g.clone(),
                topic: t.clone(),
                partition: p.clone(),
                position: *pos,
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A partition's lag: how many records exist past the commit. `next` is
/// the partition's next offset (its head + 1); a commit past it (the store
/// has not caught up with the producer yet) is no lag.
pub fn lag(committed: u64, next: u64) -> u64 {
    next.saturating_sub(committed)
}

#[cfg(test)]
mod tests;
