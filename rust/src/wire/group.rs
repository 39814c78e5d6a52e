//! The group extension's four messages (docs/groups.md, "Wire"), framed as
//! every Dafka message is in each dialect:
//!
//! ```text
//! rfc     frame 0: ID + key          frame 1: AA A5 + ID + 01 + fields
//! zproto  frame 0: ID + key + 00 + 01 + fields
//! ```
//!
//! | message        | ID  | key                  | fields after version |
//! |----------------|-----|----------------------|----------------------|
//! | GROUP-MEMBER   | `J` | group                | address, flags, timeout (4), topics (`strings`), claims |
//! | COMMIT         | `C` | group                | address, sequence, entries |
//! | COMMIT-QUERY   | `U` | group (empty: all)   | address, sequence, topics (`strings`) |
//! | COMMIT-OFFSETS | `N` | requester address    | address (store), group (`string`), sequence, flags, entries |
//! | PARTITIONS-QUERY | `I` | topic (empty: all) | address, sequence |
//! | PARTITIONS     | `P` | requester address    | address (store), sequence, flags, parts |
//!
//! `claims` = count (4) + that many: topic (`string`), partition (`string`),
//! state (1: 0 held, 1 released), offset (8).
//! `entries` = count (4) + that many: topic, partition (`string`s), epoch (8),
//! offset (8).
//! `parts` = count (4) + that many: topic, partition (`string`s), first (8),
//! next (8), bytes (8).
//! The last two are the cluster view's (PROTOCOL.md, "Extensions"): a read
//! client asks the stores what they hold, and each answers its partitions'
//! first and next offsets and bytes; they share the group messages' framing
//! and receive path.
//! Only this project's nodes subscribe to these IDs, so a C-reference node
//! never receives one. Decoding is strict (unknown flag bits, a claim state
//! other than 0 or 1, an empty group where one is needed, the same
//! partition twice, trailing bytes, a count larger than the frame could
//! hold: all malformed) and never allocates more than the frame describes.

use std::collections::BTreeSet;

use super::codec::Reader;
use super::{Dialect, WireError, SIGNATURE, VERSION};

/// The IDs of the group messages; none is a Dafka or extension ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupKind {
    Member,
    Commit,
    CommitQuery,
    CommitOffsets,
    PartitionsQuery,
    Partitions,
}

impl GroupKind {
    pub const ALL: [GroupKind; 6] = [
        GroupKind::Member,
        GroupKind::Commit,
        GroupKind::CommitQuery,
        GroupKind::CommitOffsets,
        GroupKind::PartitionsQuery,
        GroupKind::Partitions,
    ];

    pub const fn id(self) -> u8 {
        match self {
            GroupKind::Member => b'J',
            GroupKind::Commit => b'C',
            GroupKind::CommitQuery => b'U',
            GroupKind::CommitOffsets => b'N',
            GroupKind::PartitionsQuery => b'I',
            GroupKind::Partitions => b'P',
        }
    }

    pub const fn from_id(id: u8) -> Option<GroupKind> {
        Some(match id {
            b'J' => GroupKind::Member,
            b'C' => GroupKind::Commit,
            b'U' => GroupKind::CommitQuery,
            b'N' => GroupKind::CommitOffsets,
            b'I' => GroupKind::PartitionsQuery,
            b'P' => GroupKind::Partitions,
            _ => return None,
        })
    }

    pub const fn name(self) -> &'static str {
        match self {
            GroupKind::Member => "GROUP-MEMBER",
            GroupKind::Commit => "COMMIT",
            GroupKind::CommitQuery => "COMMIT-QUERY",
            GroupKind::CommitOffsets => "COMMIT-OFFSETS",
            GroupKind::PartitionsQuery => "PARTITIONS-QUERY",
            GroupKind::Partitions => "PARTITIONS",
        }
    }
}

/// A GROUP-MEMBER's flag: the member leaves (its claims are all released).
pub const MEMBER_LEAVING: u8 = 0x01;
/// A COMMIT-OFFSETS flag: this store holds at least one commit of the group.
pub const OFFSETS_GROUP_KNOWN: u8 = 0x01;
/// A COMMIT-OFFSETS flag: the last message of this answer.
pub const OFFSETS_LAST: u8 = 0x02;
/// A PARTITIONS flag: the last message of this answer.
pub const PARTITIONS_LAST: u8 = 0x01;

/// What a member says of one partition it claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClaimState {
    /// It reads the partition; `offset` is its last commit.
    Held = 0,
    /// It stopped reading it; `offset` is where the next owner starts.
    Released = 1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim<'a> {
    pub topic: &'a [u8],
    pub partition: &'a [u8],
    pub state: ClaimState,
    pub offset: u64,
}

/// One partition's commit: `offset` is the next offset to read, `epoch`
/// orders resets (docs/groups.md, "Commits").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    pub topic: &'a [u8],
    pub partition: &'a [u8],
    pub epoch: u64,
    pub offset: u64,
}

/// GROUP-MEMBER: a member's announcement, sent at once on any change and
/// every heartbeat; it counts as live for `timeout_ms` after each one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member<'a> {
    pub group: &'a [u8],
    pub address: &'a [u8],
    pub flags: u8,
    pub timeout_ms: u32,
    pub topics: Vec<&'a [u8]>,
    pub claims: Vec<Claim<'a>>,
}

/// COMMIT: a member's commits, to every store (`sequence` is echoed in
/// the stores' COMMIT-OFFSETS answers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit<'a> {
    pub group: &'a [u8],
    pub address: &'a [u8],
    pub sequence: u64,
    pub entries: Vec<Entry<'a>>,
}

/// COMMIT-QUERY: "your commits of `group` for `topics`" (no topics: every
/// one; the empty group: every group, asked by stores of each other).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitQuery<'a> {
    pub group: &'a [u8],
    pub address: &'a [u8],
    pub sequence: u64,
    pub topics: Vec<&'a [u8]>,
}

/// COMMIT-OFFSETS: a store's commits, to the requester (`to`), answering a
/// COMMIT-QUERY or a COMMIT of the same `sequence`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitOffsets<'a> {
    pub to: &'a [u8],
    pub address: &'a [u8],
    pub group: &'a [u8],
    pub sequence: u64,
    pub flags: u8,
    pub entries: Vec<Entry<'a>>,
}

/// PARTITIONS-QUERY: "the partitions of `topic` you hold" (the empty
/// topic: every one), asked by a read client (`dafka topics`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionsQuery<'a> {
    pub topic: &'a [u8],
    pub address: &'a [u8],
    pub sequence: u64,
}

/// One partition a store holds: its first offset still held, its next
/// offset, and the bytes of its records on the store's disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartInfo<'a> {
    pub topic: &'a [u8],
    pub partition: &'a [u8],
    pub first: u64,
    pub next: u64,
    pub bytes: u64,
}

/// PARTITIONS: a store's answer to a PARTITIONS-QUERY of the same
/// `sequence`, to the requester (`to`), in chunks (the last one flagged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partitions<'a> {
    pub to: &'a [u8],
    pub address: &'a [u8],
    pub sequence: u64,
    pub flags: u8,
    pub parts: Vec<PartInfo<'a>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupMessage<'a> {
    Member(Member<'a>),
    Commit(Commit<'a>),
    CommitQuery(CommitQuery<'a>),
    CommitOffsets(CommitOffsets<'a>),
    PartitionsQuery(PartitionsQuery<'a>),
    Partitions(Partitions<'a>),
}

impl<'a> GroupMessage<'a> {
    pub fn kind(&self) -> GroupKind {
        match self {
            GroupMessage::Member(_) => GroupKind::Member,
            GroupMessage::Commit(_) => GroupKind::Commit,
            GroupMessage::CommitQuery(_) => GroupKind::CommitQuery,
            GroupMessage::CommitOffsets(_) => GroupKind::CommitOffsets,
            GroupMessage::PartitionsQuery(_) => GroupKind::PartitionsQuery,
            GroupMessage::Partitions(_) => GroupKind::Partitions,
        }
    }

    /// The key after the ID in frame 0 (what subscriptions match).
    pub fn key(&self) -> &'a [u8] {
        match self {
            GroupMessage::Member(m) => m.group,
            GroupMessage::Commit(c) => c.group,
            GroupMessage::CommitQuery(q) => q.group,
            GroupMessage::CommitOffsets(o) => o.to,
            GroupMessage::PartitionsQuery(q) => q.topic,
            GroupMessage::Partitions(p) => p.to,
        }
    }

    /// The frames of this message in `dialect`, checked as a decoder would.
    pub fn encode(&self, dialect: Dialect) -> Result<Vec<Vec<u8>>, WireError> {
        let body_frame = usize::from(dialect == Dialect::Rfc);
        self.check(body_frame)?;
        let id = self.kind().id();
        let key = self.key();
        let mut f0 = vec![id];
        f0.extend_from_slice(key);
        let mut body = Vec::new();
        match dialect {
            Dialect::Rfc => {
                body.extend_from_slice(&SIGNATURE);
                body.push(id);
                body.push(VERSION);
            }
            Dialect::Zproto => {
                if key.contains(&0) {
                    return Err(WireError::NulInTopic);
                }
                f0.push(0);
                f0.push(VERSION);
            }
        }
        let out = match dialect {
            Dialect::Rfc => &mut body,
            Dialect::Zproto => &mut f0,
        };
        match self {
            GroupMessage::Member(m) => {
                put_string(out, "address", m.address)?;
                out.push(m.flags);
                out.extend_from_slice(&m.timeout_ms.to_be_bytes());
                put_strings(out, &m.topics)?;
                put_count(out, "claims", m.claims.len())?;
                for c in &m.claims {
                    put_string(out, "topic", c.topic)?;
                    put_string(out, "partition", c.partition)?;
                    out.push(c.state as u8);
                    out.extend_from_slice(&c.offset.to_be_bytes());
                }
            }
            GroupMessage::Commit(c) => {
                put_string(out, "address", c.address)?;
                out.extend_from_slice(&c.sequence.to_be_bytes());
                put_entries(out, &c.entries)?;
            }
            GroupMessage::CommitQuery(q) => {
                put_string(out, "address", q.address)?;
                out.extend_from_slice(&q.sequence.to_be_bytes());
                put_strings(out, &q.topics)?;
            }
            GroupMessage::CommitOffsets(o) => {
                put_string(out, "address", o.address)?;
                put_string(out, "group", o.group)?;
                out.extend_from_slice(&o.sequence.to_be_bytes());
                out.push(o.flags);
                put_entries(out, &o.entries)?;
            }
            GroupMessage::PartitionsQuery(q) => {
                put_string(out, "address", q.address)?;
                out.extend_from_slice(&q.sequence.to_be_bytes());
            }
            GroupMessage::Partitions(p) => {
                put_string(out, "address", p.address)?;
                out.extend_from_slice(&p.sequence.to_be_bytes());
                out.push(p.flags);
                put_parts(out, &p.parts)?;
            }
        }
        Ok(match dialect {
            Dialect::Rfc => vec![f0, body],
            Dialect::Zproto => vec![f0],
        })
    }

    /// The rules a decoded message must meet beyond its framing.
    fn check(&self, frame: usize) -> Result<(), WireError> {
        let bad = |field, reason| {
            Err(WireError::BadField {
                field,
                frame,
                reason,
            })
        };
        match self {
            GroupMessage::Member(m) => {
                if m.group.is_empty() {
                    return bad("group", "a GROUP-MEMBER names its group");
                }
                if m.flags & !MEMBER_LEAVING != 0 {
                    return bad("flags", "unknown GROUP-MEMBER flag");
                }
                if m.timeout_ms == 0 {
                    return bad("timeout", "a member is live for at least 1 ms");
                }
                if m.topics.is_empty() {
                    return bad("topics", "a member consumes at least one topic");
                }
                if m.flags & MEMBER_LEAVING != 0
                    && m.claims.iter().any(|c| c.state == ClaimState::Held)
                {
                    return bad("claims", "a leaving member holds nothing");
                }
                unique(m.claims.iter().map(|c| (c.topic, c.partition)), frame)
            }
            GroupMessage::Commit(c) => {
                if c.group.is_empty() {
                    return bad("group", "a COMMIT names its group");
                }
                unique(c.entries.iter().map(|e| (e.topic, e.partition)), frame)
            }
            GroupMessage::CommitQuery(_) => Ok(()),
            GroupMessage::CommitOffsets(o) => {
                if o.group.is_empty() {
                    return bad("group", "COMMIT-OFFSETS names its group");
                }
                if o.flags & !(OFFSETS_GROUP_KNOWN | OFFSETS_LAST) != 0 {
                    return bad("flags", "unknown COMMIT-OFFSETS flag");
                }
                if !o.entries.is_empty() && o.flags & OFFSETS_GROUP_KNOWN == 0 {
                    return bad("flags", "commits of a group the store does not know");
                }
                unique(o.entries.iter().map(|e| (e.topic, e.partition)), frame)
            }
            GroupMessage::PartitionsQuery(q) => {
                if q.address.is_empty() {
                    return bad("address", "a PARTITIONS-QUERY names its requester");
                }
                Ok(())
            }
            GroupMessage::Partitions(p) => {
                if p.address.is_empty() {
                    return bad("address", "PARTITIONS names its store");
                }
                if p.flags & !PARTITIONS_LAST != 0 {
                    return bad("flags", "unknown PARTITIONS flag");
                }
                if p.parts
                    .iter()
                    .any(|i| i.topic.is_empty() || i.partition.is_empty())
                {
                    return bad("parts", "a partition has a topic and a name");
                }
                if p.parts.iter().any(|i| i.first > i.next) {
                    return bad("parts", "a partition's first offset is past its next");
                }
                unique(p.parts.iter().map(|i| (i.topic, i.partition)), frame)
            }
        }
    }
}

fn unique<'a>(
    keys: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    frame: usize,
) -> Result<(), WireError> {
    let mut seen = BTreeSet::new();
    for k in keys {
        if !seen.insert(k) {
            return Err(WireError::BadField {
                field: "partition",
                frame,
                reason: "the same partition twice",
            });
        }
    }
    Ok(())
}

fn put_string(out: &mut Vec<u8>, field: &'static str, s: &[u8]) -> Result<(), WireError> {
    let len = u8::try_from(s.len()).map_err(|_| WireError::StringTooLong {
        field,
        len: s.len(),
    })?;
    out.push(len);
    out.extend_from_slice(s);
    Ok(())
}

fn put_count(out: &mut Vec<u8>, field: &'static str, n: usize) -> Result<(), WireError> {
    let n = u32::try_from(n).map_err(|_| WireError::TooLong { field, len: n })?;
    out.extend_from_slice(&n.to_be_bytes());
    Ok(())
}

fn put_strings(out: &mut Vec<u8>, list: &[&[u8]]) -> Result<(), WireError> {
    put_count(out, "topics", list.len())?;
    for s in list {
        put_count(out, "topics[]", s.len())?;
        out.extend_from_slice(s);
    }
    Ok(())
}

fn put_entries(out: &mut Vec<u8>, entries: &[Entry<'_>]) -> Result<(), WireError> {
    put_count(out, "entries", entries.len())?;
    for e in entries {
        put_string(out, "topic", e.topic)?;
        put_string(out, "partition", e.partition)?;
        out.extend_from_slice(&e.epoch.to_be_bytes());
        out.extend_from_slice(&e.offset.to_be_bytes());
    }
    Ok(())
}

fn put_parts(out: &mut Vec<u8>, parts: &[PartInfo<'_>]) -> Result<(), WireError> {
    put_count(out, "parts", parts.len())?;
    for p in parts {
        put_string(out, "topic", p.topic)?;
        put_string(out, "partition", p.partition)?;
        for n in [p.first, p.next, p.bytes] {
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
    Ok(())
}

/// The group messages' fields on the codec's reader.
impl<'a> Reader<'a> {
    /// A 4-octet count of items of at least `min` bytes each: refused when
    /// the rest of the frame could not hold them (no allocation for lies).
    fn count(&mut self, field: &'static str, min: usize) -> Result<usize, WireError> {
        let offset = self.pos;
        let n = self.u32(field)? as usize;
        let have = self.buf.len() - self.pos;
        if n > have / min {
            return Err(WireError::Truncated {
                field,
                frame: self.frame,
                offset,
                need: n.saturating_mul(min),
                have,
            });
        }
        Ok(n)
    }

    fn strings(&mut self, field: &'static str) -> Result<Vec<&'a [u8]>, WireError> {
        let n = self.count(field, 4)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.longstr(field)?);
        }
        Ok(v)
    }

    fn entries(&mut self) -> Result<Vec<Entry<'a>>, WireError> {
        let n = self.count("entries", 18)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(Entry {
                topic: self.string("topic")?,
                partition: self.string("partition")?,
                epoch: self.u64("epoch")?,
                offset: self.u64("offset")?,
            });
        }
        Ok(v)
    }

    fn parts(&mut self) -> Result<Vec<PartInfo<'a>>, WireError> {
        let n = self.count("parts", 26)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(PartInfo {
                topic: self.string("topic")?,
                partition: self.string("partition")?,
                first: self.u64("first")?,
                next: self.u64("next")?,
                bytes: self.u64("bytes")?,
            });
        }
        Ok(v)
    }

    fn claims(&mut self) -> Result<Vec<Claim<'a>>, WireError> {
        let n = self.count("claims", 11)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let topic = self.string("topic")?;
            let partition = self.string("partition")?;
            let state = match self.u8("state")? {
                0 => ClaimState::Held,
                1 => ClaimState::Released,
                _ => {
                    return Err(WireError::BadField {
                        field: "state",
                        frame: self.frame,
                        reason: "a claim is 0 (held) or 1 (released)",
                    })
                }
            };
            v.push(Claim {
                topic,
                partition,
                state,
                offset: self.u64("offset")?,
            });
        }
        Ok(v)
    }
}

/// Decodes one group message, telling the dialect by frame count (2 in
/// `rfc`, 1 in `zproto`). A frame list that is not exactly one well-formed
/// group message is an error, never a panic.
pub fn decode<F: AsRef<[u8]>>(frames: &[F]) -> Result<(GroupMessage<'_>, Dialect), WireError> {
    let f0 = frames
        .first()
        .ok_or(WireError::FrameCount {
            what: "a group message",
            got: 0,
            expected: "1 or 2",
        })?
        .as_ref();
    let id = *f0.first().ok_or(WireError::Truncated {
        field: "id",
        frame: 0,
        offset: 0,
        need: 1,
        have: 0,
    })?;
    let kind = GroupKind::from_id(id).ok_or(WireError::UnknownId {
        frame: 0,
        offset: 0,
        id,
    })?;
    let (dialect, key, mut r) = match frames.len() {
        2 => {
            let body = frames[1].as_ref();
            let mut r = Reader::new(body, 0, 1);
            let sig = r.take("signature", 2)?;
            if sig != SIGNATURE {
                return Err(WireError::BadSignature {
                    frame: 1,
                    found: sig.to_vec(),
                });
            }
            let body_id = r.u8("id")?;
            if body_id != id {
                return Err(WireError::IdMismatch {
                    topic: id,
                    body: body_id,
                });
            }
            (Dialect::Rfc, &f0[1..], r)
        }
        1 => {
            let nul = f0[1..]
                .iter()
                .position(|&b| b == 0)
                .ok_or(WireError::Truncated {
                    field: "key terminator",
                    frame: 0,
                    offset: f0.len(),
                    need: 1,
                    have: 0,
                })?;
            let r = Reader::new(f0, 2 + nul, 0);
            (Dialect::Zproto, &f0[1..1 + nul], r)
        }
        got => {
            return Err(WireError::FrameCount {
                what: kind.name(),
                got,
                expected: "1 or 2",
            })
        }
    };
    r.version()?;
    let msg = match kind {
        GroupKind::Member => GroupMessage::Member(Member {
            group: key,
            address: r.string("address")?,
            flags: r.u8("flags")?,
            timeout_ms: r.u32("timeout")?,
            topics: r.strings("topics")?,
            claims: r.claims()?,
        }),
        GroupKind::Commit => GroupMessage::Commit(Commit {
            group: key,
            address: r.string("address")?,
            sequence: r.u64("sequence")?,
            entries: r.entries()?,
        }),
        GroupKind::CommitQuery => GroupMessage::CommitQuery(CommitQuery {
            group: key,
            address: r.string("address")?,
            sequence: r.u64("sequence")?,
            topics: r.strings("topics")?,
        }),
        GroupKind::CommitOffsets => GroupMessage::CommitOffsets(CommitOffsets {
            to: key,
            address: r.string("address")?,
            group: r.string("group")?,
            sequence: r.u64("sequence")?,
            flags: r.u8("flags")?,
            entries: r.entries()?,
        }),
        GroupKind::PartitionsQuery => GroupMessage::PartitionsQuery(PartitionsQuery {
            topic: key,
            address: r.string("address")?,
            sequence: r.u64("sequence")?,
        }),
        GroupKind::Partitions => GroupMessage::Partitions(Partitions {
            to: key,
            address: r.string("address")?,
            sequence: r.u64("sequence")?,
            flags: r.u8("flags")?,
            parts: r.parts()?,
        }),
    };
    r.finish()?;
    msg.check(r.frame)?;
    Ok((msg, dialect))
}

/// Who subscribes to what (docs/groups.md, "Wire"): the SUB prefixes a
/// group member and a store add for the group extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subscriber {
    /// A member of `groups`: their announcements, and answers to itself.
    Member,
    /// A store: every announcement (for `dafka groups`), commit and query,
    /// every PARTITIONS-QUERY, and answers to itself (replication between
    /// stores).
    Store,
    /// A read client of the cluster view: PARTITIONS answers to itself.
    Viewer,
}

pub fn subscriptions(who: Subscriber, address: &[u8], groups: &[&[u8]]) -> Vec<Vec<u8>> {
    let prefix = |kind: GroupKind, key: &[u8]| {
        let mut v = vec![kind.id()];
        v.extend_from_slice(key);
        v
    };
    match who {
        Subscriber::Member => {
            let mut v = vec![prefix(GroupKind::CommitOffsets, address)];
            v.extend(groups.iter().map(|g| prefix(GroupKind::Member, g)));
            v
        }
        Subscriber::Store => vec![
            prefix(GroupKind::Member, b""),
            prefix(GroupKind::Commit, b""),
            prefix(GroupKind::CommitQuery, b""),
            prefix(GroupKind::CommitOffsets, address),
            prefix(GroupKind::PartitionsQuery, b""),
        ],
        Subscriber::Viewer => vec![prefix(GroupKind::Partitions, address)],
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod parts_tests;
