//! What a store (or `dafka groups describe`) knows of the groups from their
//! announcements, without being a member (docs/groups.md, "Security" and
//! "Lag"): who is live in each group and what it claims; whether a COMMIT
//! comes from a member heard holding every partition it commits; and the
//! description of a group, with lag, from announcements, commits and heads.
//! Time is passed in (`now`, ms), as in [`super::view`].

use std::collections::{BTreeMap, BTreeSet};

use super::commits::{lag, CommitRecord, CommitTable, Position};
use super::view::{claims_of, Part};
use crate::wire::group::{ClaimState, Commit, Entry, Member, MEMBER_LEAVING};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Known {
    expires_at: u64,
    topics: Vec<Vec<u8>>,
    claims: BTreeMap<Part, (ClaimState, u64)>,
    /// The partitions this registry heard the member hold, and still
    /// claims (held, or released after it was heard holding them): what
    /// it may commit.
    held: BTreeSet<Part>,
}

/// Members of one group a registry keeps at most (more are refused).
pub const MAX_MEMBERS_PER_GROUP: usize = 1024;
/// Claims of one announcement a registry keeps at most (more: refused).
pub const MAX_CLAIMS_PER_MEMBER: usize = 65_536;
/// Groups one peer may be a member of at once, as a registry counts them
/// (a peer: the first 16 characters of a member's address, which in a
/// secure cluster are its key's).
pub const MAX_GROUPS_PER_PEER: usize = 64;

/// The peer a member address belongs to (see [`MAX_GROUPS_PER_PEER`]).
fn peer_of(address: &[u8]) -> &[u8] {
    &address[..address.len().min(16)]
}

/// Why a store refuses a COMMIT (dropped and counted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitRefused {
    #[error("the committer is no live member of the group")]
    NotAMember,
    #[error("the committer was not heard holding a partition it commits")]
    NotClaimed,
    #[error("the committer's certificate does not cover every topic of the group")]
    Topics,
}

/// Why a registry refuses an announcement (dropped and counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AnnounceRefused {
    #[error("the announcement claims more partitions than a registry keeps")]
    Claims,
    #[error("the group has as many members as a registry keeps")]
    Members,
    #[error("the peer is a member of as many groups as a registry keeps")]
    Groups,
}

/// The live members of every group heard, with their claims.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    groups: BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, Known>>,
    /// Per peer ([`peer_of`]), in how many groups it has a member.
    memberships: BTreeMap<Vec<u8>, usize>,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// A GROUP-MEMBER heard: the member is live for its timeout (at most
    /// [`crate::group::MAX_TIMEOUT_MS`]), with these claims; a leaving one
    /// is gone. Refused past the caps above (a new member of a full group,
    /// a peer in too many groups, too many claims).
    pub fn announcement(&mut self, now: u64, m: &Member<'_>) -> Result<(), AnnounceRefused> {
        if m.flags & MEMBER_LEAVING != 0 {
            self.remove(m.group, m.address);
            return Ok(());
        }
        if m.claims.len() > MAX_CLAIMS_PER_MEMBER {
            return Err(AnnounceRefused::Claims);
        }
        let old = self.groups.get(m.group).and_then(|g| g.get(m.address));
        if old.is_none() {
            let members = self.groups.get(m.group).map_or(0, BTreeMap::len);
            if members >= MAX_MEMBERS_PER_GROUP {
                return Err(AnnounceRefused::Members);
            }
            let peer = peer_of(m.address);
            if self.memberships.get(peer).copied().unwrap_or(0) >= MAX_GROUPS_PER_PEER {
                return Err(AnnounceRefused::Groups);
            }
        }
        let claims = claims_of(m);
        // Held now, or released after it was heard held.
        let held = claims
            .iter()
            .filter(|(p, (s, _))| {
                *s == ClaimState::Held || old.is_some_and(|o| o.held.contains(*p))
            })
            .map(|(p, _)| p.clone())
            .collect();
        let known = Known {
            expires_at: now.saturating_add(super::live_ms(m.timeout_ms)),
            topics: m.topics.iter().map(|t| t.to_vec()).collect(),
            claims,
            held,
        };
        let group = self.groups.entry(m.group.to_vec()).or_default();
        if group.insert(m.address.to_vec(), known).is_none() {
            *self
                .memberships
                .entry(peer_of(m.address).to_vec())
                .or_default() += 1;
        }
        Ok(())
    }

    fn remove(&mut self, group: &[u8], address: &[u8]) {
        let Some(members) = self.groups.get_mut(group) else {
            return;
        };
        let removed = members.remove(address).is_some();
        if members.is_empty() {
            self.groups.remove(group);
        }
        if removed {
            self.left(address);
        }
    }

    /// One membership of `address`'s peer less.
    fn left(&mut self, address: &[u8]) {
        let peer = peer_of(address);
        if let Some(n) = self.memberships.get_mut(peer) {
            *n -= 1;
            if *n == 0 {
                self.memberships.remove(peer);
            }
        }
    }

    /// Forgets members silent past their timeout, and groups left empty.
    pub fn expire(&mut self, now: u64) {
        let mut gone = Vec::new();
        for members in self.groups.values_mut() {
            members.retain(|address, k| {
                let live = k.expires_at > now;
                if !live {
                    gone.push(address.clone());
                }
                live
            });
        }
        self.groups.retain(|_, m| !m.is_empty());
        for address in gone {
            self.left(&address);
        }
    }

    /// The groups with a live member.
    pub fn groups(&self) -> Vec<&[u8]> {
        self.groups.keys().map(Vec::as_slice).collect()
    }

    /// How many members the registry keeps, over every group.
    pub fn members(&self) -> usize {
        self.groups.values().map(BTreeMap::len).sum()
    }

    /// The topics the live members of `group` announce (in a secure
    /// cluster, with the table's, what a committer's certificate must
    /// cover).
    pub fn topics(&self, group: &[u8]) -> BTreeSet<&[u8]> {
        self.groups
            .get(group)
            .into_iter()
            .flat_map(|g| g.values())
            .flat_map(|k| k.topics.iter().map(Vec::as_slice))
            .collect()
    }

    /// Whether a store takes `c`: its committer is a live member of the
    /// group that this registry heard holding every partition it commits
    /// (and that still claims it, held or released). An honest member
    /// announces a claim held before it commits it, on the same
    /// connection, so only forgeries are refused.
    pub fn check_commit(&self, now: u64, c: &Commit<'_>) -> Result<(), CommitRefused> {
        let known = self
            .groups
            .get(c.group)
            .and_then(|g| g.get(c.address))
            .filter(|k| k.expires_at > now)
            .ok_or(CommitRefused::NotAMember)?;
        for e in &c.entries {
            if !known
                .held
                .contains(&(e.topic.to_vec(), e.partition.to_vec()))
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
