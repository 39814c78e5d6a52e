//! What a store (or `dafka groups describe`) knows of the groups from their
//! announcements, without being a member (docs/groups.md, "Security" and
//! "Lag"): who is live in each group and what it claims; whether a COMMIT
//! comes from a member that claims every partition it commits; and the
//! description of a group, with lag, from announcements, commits and heads.
//! Time is passed in (`now`, ms), as in [`super::view`].

use std::collections::{BTreeMap, BTreeSet};

use super::commits::{lag, CommitRecord, CommitTable, Position};
use super::view::Part;
use crate::wire::group::{ClaimState, Commit, Entry, Member, MEMBER_LEAVING};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Known {
    expires_at: u64,
    topics: Vec<Vec<u8>>,
    claims: BTreeMap<Part, (ClaimState, u64)>,
}

/// Why a store refuses a COMMIT (dropped and counted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitRefused {
    #[error("the committer is no live member of the group")]
    NotAMember,
    #[error("the committer does not claim a partition it commits")]
    NotClaimed,
}

/// The live members of every group heard, with their claims.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    groups: BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, Known>>,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// A GROUP-MEMBER heard: the member is live for its timeout, with these
    /// claims; a leaving one is gone.
    pub fn announcement(&mut self, now: u64, m: &Member<'_>) {
        let group = self.groups.entry(m.group.to_vec()).or_default();
        if m.flags & MEMBER_LEAVING != 0 {
            group.remove(m.address);
        } else {
            let known = Known {
                expires_at: now.saturating_add(u64::from(m.timeout_ms)),
                topics: m.topics.iter().map(|t| t.to_vec()).collect(),
                claims: m
                    .claims
                    .iter()
                    .map(|c| {
                        (
                            (c.topic.to_vec(), c.partition.to_vec()),
                            (c.state, c.offset),
                        )
                    })
                    .collect(),
            };
            group.insert(m.address.to_vec(), known);
        }
        if group.is_empty() {
            self.groups.remove(m.group);
        }
    }

    /// Forgets members silent past their timeout, and groups left empty.
    pub fn expire(&mut self, now: u64) {
        for members in self.groups.values_mut() {
            members.retain(|_, k| k.expires_at > now);
        }
        self.groups.retain(|_, m| !m.is_empty());
    }

    /// The groups with a live member.
    pub fn groups(&self) -> Vec<&[u8]> {
        self.groups.keys().map(Vec::as_slice).collect()
    }

    /// Whether a store takes `c`: its committer is a live member of the
    /// group that claims (held or released) every partition it commits.
    /// An honest member announces a claim before it commits it, on the
    /// same connection, so only forgeries are refused.
    pub fn check_commit(&self, now: u64, c: &Commit<'_>) -> Result<(), CommitRefused> {
        let known = self
            .groups
            .get(c.group)
            .and_then(|g| g.get(c.address))
            .filter(|k| k.expires_at > now)
            .ok_or(CommitRefused::NotAMember)?;
        for e in &c.entries {
            if !known
                .claims
                .contains_key(&(e.topic.to_vec(), e.partition.to_vec()))
            {
                return Err(CommitRefused::NotClaimed);
            }
        }
        Ok(())
    }

    /// The records a store merges for an accepted COMMIT, stamped `now`
    /// (wall-clock ms: the `time` of the commit record).
    pub fn records(c: &Commit<'_>, now_ms: u64) -> Vec<CommitRecord> {
        entry_records(c.group, &c.entries, now_ms)
    }

    /// `dafka groups describe GROUP`: live members and what they hold, and
    /// per partition (of a topic a member consumes or the group committed)
    /// its owner, commit, next offset and lag. `heads` maps a partition to
    /// its next offset (head + 1) as the stores and producers say.
    pub fn describe(
        &self,
        group: &[u8],
        commits: &CommitTable,
        heads: &BTreeMap<Part, u64>,
    ) -> Description {
        let none = BTreeMap::new();
        let members = self.groups.get(group).unwrap_or(&none);
        let mut topics: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut owners: BTreeMap<Part, Vec<u8>> = BTreeMap::new();
        let mut rows_m = Vec::new();
        for (address, k) in members {
            topics.extend(k.topics.iter().cloned());
            let held: Vec<Part> = k
                .claims
                .iter()
                .filter(|(_, (s, _))| *s == ClaimState::Held)
                .map(|(p, _)| p.clone())
                .collect();
            for p in &held {
                owners.insert(p.clone(), address.clone());
            }
            rows_m.push(MemberRow {
                address: address.clone(),
                topics: k.topics.clone(),
                partitions: held,
            });
        }
        let committed: BTreeMap<Part, u64> = commits
            .commits(group, &[])
            .into_iter()
            .map(|r| ((r.topic, r.partition), r.position.offset))
            .collect();
        topics.extend(committed.keys().map(|(t, _)| t.clone()));
        let mut parts: BTreeSet<Part> = committed.keys().cloned().collect();
        parts.extend(owners.keys().cloned());
        parts.extend(heads.keys().filter(|(t, _)| topics.contains(t)).cloned());
        let partitions: Vec<PartitionRow> = parts
            .into_iter()
            .map(|p| {
                let committed = committed.get(&p).copied();
                let next = heads.get(&p).copied();
                // Never committed: lag counted from offset 0.
                let lag = next.map(|n| lag(committed.unwrap_or(0), n));
                PartitionRow {
                    owner: owners.get(&p).cloned(),
                    committed,
                    next,
                    lag,
                    topic: p.0,
                    partition: p.1,
                }
            })
            .collect();
        let total_lag = partitions
            .iter()
            .filter_map(|r| r.lag)
            .fold(0u64, u64::saturating_add);
        Description {
            group: group.to_vec(),
            members: rows_m,
            partitions,
            total_lag,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRow {
    pub address: Vec<u8>,
    pub topics: Vec<Vec<u8>>,
    /// The partitions it holds.
    pub partitions: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRow {
    pub topic: Vec<u8>,
    pub partition: Vec<u8>,
    /// The member holding it, if any.
    pub owner: Option<Vec<u8>>,
    /// The group's commit (the next offset to read), if any.
    pub committed: Option<u64>,
    /// The partition's next offset (head + 1), if known.
    pub next: Option<u64>,
    /// `next - committed` (0 when the commit is ahead); unknown without a head.
    pub lag: Option<u64>,
}

/// What `dafka groups describe` prints (and `--json` serializes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    pub group: Vec<u8>,
    pub members: Vec<MemberRow>,
    pub partitions: Vec<PartitionRow>,
    pub total_lag: u64,
}

/// `entries` of `group` (a COMMIT's, another store's COMMIT-OFFSETS') as
/// the records a store merges, stamped `now_ms` (wall-clock ms).
pub fn entry_records(group: &[u8], entries: &[Entry<'_>], now_ms: u64) -> Vec<CommitRecord> {
    entries
        .iter()
        .map(|e| CommitRecord {
            group: group.to_vec(),
            topic: e.topic.to_vec(),
            partition: e.partition.to_vec(),
            position: Position {
                epoch: e.epoch,
                offset: e.offset,
                time_ms: now_ms,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests;
