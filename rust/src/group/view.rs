//! One member's view of its group (docs/groups.md, "Membership" and
//! "Hand-over"): the other members' announcements in, decisions out. No
//! sockets and no clocks: every input that depends on time takes `now`
//! (ms, from any monotonic clock the caller keeps).
//!
//! The decisions, and the order that makes a hand-over safe:
//!
//! - `Stop(p)`: the assignment gave `p` to someone else (or the member
//!   leaves). The node stops delivering `p` at once, then reports the
//!   offset it stopped at ([`View::stopped`]); only then does the view
//!   announce `p` released at that offset. Until then it still claims it.
//! - `Lookup(p)`: `p` is this member's, and no live member claims it held:
//!   the node asks the stores for its commit ([`View::looked_up`]).
//! - `Start(p, at)`: the lookup is in, `p` is still this member's and
//!   still unclaimed: deliver from `at`, the greater of the commit and the
//!   offset its last holder released it at.
//!
//! A member starts nothing before `settle_ms` after it joined, so that it
//! has heard every live member's announcement (they come every heartbeat)
//! before it trusts that a partition is unclaimed.

use std::collections::{BTreeMap, BTreeSet};

use super::assign;
use crate::wire::group::{Claim, ClaimState, Member, MEMBER_LEAVING};

/// A partition: `(topic, partition)`.
pub type Part = (Vec<u8>, Vec<u8>);

/// How long others keep this member live, and how long it waits at join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Announced: the member is live this long after each announcement
    /// (the node's `beacon_timeout`).
    pub timeout_ms: u32,
    /// Wait this long after joining before starting any partition (at
    /// least one heartbeat and a margin).
    pub settle_ms: u64,
}

/// Where a started partition begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// This offset: the group's commit, or where the last holder released it.
    Offset(u64),
    /// The group never committed: the consumer's `offset_reset`.
    Reset,
    /// The group committed, but never for this partition (born while it was
    /// down): its first record held, so nothing is skipped.
    Earliest,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Stop(Part),
    Lookup(Part),
    Start(Part, StartAt),
}

/// The stores' answer to a lookup: the partition's commit, and whether the
/// group has committed anything at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupResult {
    pub committed: Option<u64>,
    pub group_known: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Own {
    /// Lookup asked; its answer once in.
    Looking(Option<LookupResult>),
    /// Delivering; the offset is its last commit (announced).
    Running(u64),
    /// `Stop` given; the node has not said where it stopped yet.
    Stopping(u64),
}

#[derive(Debug, Clone)]
struct Peer {
    expires_at: u64,
    topics: Vec<Vec<u8>>,
    claims: BTreeMap<Part, (ClaimState, u64)>,
}

/// Why an announcement was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("announcement for another group")]
    OtherGroup,
    #[error("announcement in this member's own name")]
    OwnAddress,
    #[error("announcement of a member that consumes other topics than this group's")]
    OtherTopics,
}

/// Whether `a` and `b` name the same set of topics (in any order).
pub fn same_topics<A: AsRef<[u8]>, B: AsRef<[u8]>>(a: &[A], b: &[B]) -> bool {
    let a: BTreeSet<&[u8]> = a.iter().map(|t| t.as_ref()).collect();
    let b: BTreeSet<&[u8]> = b.iter().map(|t| t.as_ref()).collect();
    a == b
}

#[derive(Debug, Clone)]
pub struct View {
    group: Vec<u8>,
    address: Vec<u8>,
    topics: Vec<Vec<u8>>,
    timing: Timing,
    joined_at: u64,
    leaving: bool,
    peers: BTreeMap<Vec<u8>, Peer>,
    partitions: BTreeSet<Part>,
    own: BTreeMap<Part, Own>,
    /// Partitions this member released: offset and when, announced until
    /// the new owner claims them or `timeout_ms` passed.
    released: BTreeMap<Part, (u64, u64)>,
    /// Where each partition was last released by a member seen holding it.
    handoff: BTreeMap<Part, u64>,
}

impl View {
    pub fn new(group: &[u8], address: &[u8], topics: &[&[u8]], timing: Timing, now: u64) -> View {
        View {
            group: group.to_vec(),
            address: address.to_vec(),
            topics: topics.iter().map(|t| t.to_vec()).collect(),
            timing,
            joined_at: now,
            leaving: false,
            peers: BTreeMap::new(),
            partitions: BTreeSet::new(),
            own: BTreeMap::new(),
            released: BTreeMap::new(),
            handoff: BTreeMap::new(),
        }
    }

    /// A partition of one of this member's topics exists (a HEAD, a record,
    /// a store's DIRECT-HEAD); others are ignored.
    pub fn partition_seen(&mut self, topic: &[u8], partition: &[u8]) {
        if self.topics.iter().any(|t| t == topic) {
            self.partitions.insert((topic.to_vec(), partition.to_vec()));
        }
    }

    /// Another member's GROUP-MEMBER. A leaving member is gone at once;
    /// its releases (as those of any member that was seen holding the
    /// partition) say where the next owner starts.
    pub fn announcement(&mut self, now: u64, m: &Member<'_>) -> Result<(), Refused> {
        if m.group != self.group.as_slice() {
            return Err(Refused::OtherGroup);
        }
        if m.address == self.address.as_slice() {
            return Err(Refused::OwnAddress);
        }
        // Members of one group consume the same topics. A member announcing
        // fewer (in a secure cluster: one whose certificate covers only
        // some of the group's topics) is not counted, so it is given no
        // partition and its claims hold none back (docs/groups.md,
        // "Security").
        if !same_topics(&m.topics, &self.topics) {
            return Err(Refused::OtherTopics);
        }
        let old = self.peers.remove(m.address);
        let claims = claims_of(m);
        if let Some(old) = &old {
            for (part, (state, offset)) in &claims {
                let was_held = matches!(old.claims.get(part), Some((ClaimState::Held, _)));
                if *state == ClaimState::Released && was_held {
                    let h = self.handoff.entry(part.clone()).or_insert(*offset);
                    *h = (*h).max(*offset);
                }
            }
        }
        // Our releases that their new owner now holds need no more saying.
        for (part, (state, _)) in &claims {
            if *state == ClaimState::Held {
                self.released.remove(part);
            }
        }
        if m.flags & MEMBER_LEAVING == 0 {
            let peer = Peer {
                expires_at: now.saturating_add(super::live_ms(m.timeout_ms)),
                topics: m.topics.iter().map(|t| t.to_vec()).collect(),
                claims,
            };
            self.peers.insert(m.address.to_vec(), peer);
        }
        Ok(())
    }

    /// The stores' answer to `Lookup(p)` (ignored if `p` is not looked up).
    pub fn looked_up(&mut self, part: &Part, result: LookupResult) {
        if let Some(Own::Looking(r)) = self.own.get_mut(part) {
            *r = Some(result);
        }
    }

    /// The node committed `offset` for a partition it delivers (announced
    /// in its claim).
    pub fn committed(&mut self, part: &Part, offset: u64) {
        if let Some(Own::Running(o) | Own::Stopping(o)) = self.own.get_mut(part) {
            *o = (*o).max(offset);
        }
    }

    /// The node stopped delivering `p` after `Stop(p)`; `offset` is the
    /// next one it would have delivered (its final commit).
    pub fn stopped(&mut self, part: &Part, offset: u64, now: u64) {
        if let Some(Own::Stopping(_)) = self.own.get(part) {
            self.own.remove(part);
            self.released.insert(part.clone(), (offset, now));
            let h = self.handoff.entry(part.clone()).or_insert(offset);
            *h = (*h).max(offset);
        }
    }

    /// Leave the group: stop everything, start nothing.
    pub fn leave(&mut self) {
        self.leaving = true;
    }

    /// Whether a leaving member has stopped everything (its last
    /// announcement, with every claim released, can go).
    pub fn left(&self) -> bool {
        self.leaving && self.own.is_empty()
    }

    /// The live members (this one too), in address order.
    pub fn members(&self) -> Vec<&[u8]> {
        let mut v: Vec<&[u8]> = self.peers.keys().map(Vec::as_slice).collect();
        if !self.leaving {
            v.push(&self.address);
        }
        v.sort();
        v
    }

    /// The partitions being delivered, with their last commit.
    pub fn assignment(&self) -> Vec<(&Part, u64)> {
        self.own
            .iter()
            .filter_map(|(p, s)| match s {
                Own::Running(o) => Some((p, *o)),
                _ => None,
            })
            .collect()
    }

    /// The partitions whose commit is being looked up, answer not in yet.
    pub fn looking(&self) -> Vec<&Part> {
        self.own
            .iter()
            .filter(|(_, s)| matches!(s, Own::Looking(None)))
            .map(|(p, _)| p)
            .collect()
    }

    fn expire(&mut self, now: u64) {
        self.peers.retain(|_, p| p.expires_at > now);
        let timeout = u64::from(self.timing.timeout_ms);
        self.released
            .retain(|_, (_, at)| now < at.saturating_add(timeout));
    }

    /// The live members as the assignment sees them, this one included.
    fn assignees(&self) -> Vec<assign::Member<'_>> {
        let mut members: Vec<assign::Member<'_>> = self
            .peers
            .iter()
            .map(|(a, p)| assign::Member {
                address: a,
                topics: &p.topics,
            })
            .collect();
        members.push(assign::Member {
            address: &self.address,
            topics: &self.topics,
        });
        members
    }

    /// Whether `part` belongs to this member in the current view
    /// (`ranked`: [`View::assignees`]).
    fn mine(&self, ranked: &assign::Ranked<'_>, part: &Part) -> bool {
        if self.leaving || !self.topics.contains(&part.0) {
            return false;
        }
        ranked.owner(&self.group, &part.0, &part.1) == Some(self.address.as_slice())
    }

    fn claimed_by_other(&self, part: &Part) -> bool {
        self.peers
            .values()
            .any(|p| matches!(p.claims.get(part), Some((ClaimState::Held, _))))
    }

    /// Expires silent members, then decides, stops first. Call it after
    /// inputs and on a timer (a heartbeat is plenty).
    pub fn decide(&mut self, now: u64) -> Vec<Decision> {
        self.expire(now);
        let (mut stops, mut lookups, mut starts) = (Vec::new(), Vec::new(), Vec::new());
        // Who owns what is decided once per call, from the members as they
        // are now (deciding changes only this member's own states).
        let members = self.assignees();
        let ranked = assign::Ranked::new(&members);
        let owned: Vec<(Part, bool)> = self
            .own
            .keys()
            .map(|p| (p.clone(), self.mine(&ranked, p)))
            .collect();
        let candidates: Vec<Part> = if now >= self.joined_at.saturating_add(self.timing.settle_ms) {
            self.partitions
                .iter()
                .filter(|p| !self.own.contains_key(*p))
                .filter(|p| self.mine(&ranked, p) && !self.claimed_by_other(p))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        for (part, mine) in owned {
            match self.own[&part] {
                Own::Running(o) if !mine => {
                    self.own.insert(part.clone(), Own::Stopping(o));
                    stops.push(Decision::Stop(part));
                }
                Own::Looking(_) if !mine || self.claimed_by_other(&part) => {
                    self.own.remove(&part);
                }
                Own::Looking(Some(r)) => {
                    let at = self.start_at(&part, r);
                    self.handoff.remove(&part);
                    let o = match at {
                        StartAt::Offset(o) => o,
                        StartAt::Reset | StartAt::Earliest => 0,
                    };
                    self.own.insert(part.clone(), Own::Running(o));
                    starts.push(Decision::Start(part, at));
                }
                _ => {}
            }
        }
        for part in candidates {
            self.released.remove(&part);
            self.own.insert(part.clone(), Own::Looking(None));
            lookups.push(Decision::Lookup(part));
        }
        stops.extend(lookups);
        stops.extend(starts);
        stops
    }

    fn start_at(&self, part: &Part, r: LookupResult) -> StartAt {
        match (r.committed, self.handoff.get(part)) {
            (Some(c), Some(h)) => StartAt::Offset(c.max(*h)),
            (Some(c), None) => StartAt::Offset(c),
            (None, Some(h)) => StartAt::Offset(*h),
            (None, None) if r.group_known => StartAt::Earliest,
            (None, None) => StartAt::Reset,
        }
    }

    /// This member's GROUP-MEMBER, to send now and every heartbeat: what
    /// it delivers, is about to start or has not finished stopping (held),
    /// and what it released (with where the next owner starts).
    pub fn announce(&self) -> Member<'_> {
        let mut claims: Vec<Claim<'_>> = Vec::new();
        for (part, s) in &self.own {
            let offset = match s {
                Own::Running(o) | Own::Stopping(o) => *o,
                Own::Looking(_) => 0,
            };
            claims.push(Claim {
                topic: &part.0,
                partition: &part.1,
                state: ClaimState::Held,
                offset,
            });
        }
        for (part, (offset, _)) in &self.released {
            claims.push(Claim {
                topic: &part.0,
                partition: &part.1,
                state: ClaimState::Released,
                offset: *offset,
            });
        }
        Member {
            group: &self.group,
            address: &self.address,
            flags: if self.left() { MEMBER_LEAVING } else { 0 },
            timeout_ms: self.timing.timeout_ms,
            topics: self.topics.iter().map(Vec::as_slice).collect(),
            claims,
        }
    }
}

/// A GROUP-MEMBER's claims by partition: (state, offset).
pub(crate) fn claims_of(m: &Member<'_>) -> BTreeMap<Part, (ClaimState, u64)> {
    m.claims
        .iter()
        .map(|c| {
            (
                (c.topic.to_vec(), c.partition.to_vec()),
                (c.state, c.offset),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests;
