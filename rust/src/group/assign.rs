//! The assignment of a group's partitions to its live members: rendezvous
//! (highest random weight) hashing, a pure function of the group, the
//! partition and the member set (docs/groups.md, "Assignment").
//!
//! Each member scores every partition; the partition goes to the member
//! with the highest score among the live members that consume its topic.
//! Nothing else enters the function, so members that agree on who is live
//! agree on every owner, whichever partitions each of them has heard of,
//! and in whichever order they learned them. Removing a member moves only
//! its own partitions; adding one moves only the partitions it now wins
//! (about 1/n of them).
//!
//! The score is specified byte for byte so that any implementation agrees:
//!
//! ```text
//! key(g, t, p) = FNV-1a-64 over  len(g) g len(t) t len(p) p
//!                (each len one octet: names are Dafka strings, <= 255)
//! id(m)        = mix(FNV-1a-64 over m)          (m: the member's address)
//! score(m)     = mix(key(g, t, p) XOR id(m))
//! mix(x)       = SplitMix64's finalizer: x ^= x >> 30; x *= 0xBF58476D1CE4E5B9;
//!                x ^= x >> 27; x *= 0x94D049BB133111EB; x ^= x >> 31
//! ```
//!
//! The highest score wins; equal scores (never seen in practice) go to the
//! member whose address is the lower in byte order.

use std::collections::BTreeMap;

const FNV_OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01B3;

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// SplitMix64's finalizer: a bijection of `u64` with full avalanche.
pub fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A partition's key: FNV-1a-64 over the length-prefixed group, topic and
/// partition. A name longer than 255 bytes cannot travel in any Dafka
/// message; its length octet is taken modulo 256 (still deterministic).
pub fn partition_key(group: &[u8], topic: &[u8], partition: &[u8]) -> u64 {
    let mut h = FNV_OFFSET;
    for part in [group, topic, partition] {
        h = fnv1a(h, &[part.len() as u8]);
        h = fnv1a(h, part);
    }
    h
}

/// A member's hashed identity.
pub fn member_id(member: &[u8]) -> u64 {
    mix(fnv1a(FNV_OFFSET, member))
}

/// The member's score for the partition whose key is `key`.
pub fn score(key: u64, member: &[u8]) -> u64 {
    mix(key ^ member_id(member))
}

/// The winner of one partition among `members` (any order, duplicates
/// harmless); `None` when there is no member.
pub fn owner<'m, I>(group: &[u8], topic: &[u8], partition: &[u8], members: I) -> Option<&'m [u8]>
where
    I: IntoIterator<Item = &'m [u8]>,
{
    let key = partition_key(group, topic, partition);
    let mut best: Option<(u64, &'m [u8])> = None;
    for m in members {
        let s = score(key, m);
        best = match best {
            Some((bs, bm)) if bs > s || (bs == s && bm <= m) => Some((bs, bm)),
            _ => Some((s, m)),
        };
    }
    best.map(|(_, m)| m)
}

/// A live member as the assignment sees it: its address and the topics it
/// consumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member<'a> {
    pub address: &'a [u8],
    pub topics: &'a [Vec<u8>],
}

impl Member<'_> {
    fn consumes(&self, topic: &[u8]) -> bool {
        self.topics.iter().any(|t| t == topic)
    }
}

/// The members with their hashed identities computed once: what the
/// owner of many partitions is decided from (a member's view does it for
/// every partition it knows, at every decision).
pub struct Ranked<'a> {
    members: Vec<(u64, Member<'a>)>,
}

impl<'a> Ranked<'a> {
    pub fn new(members: &[Member<'a>]) -> Self {
        Ranked {
            members: members
                .iter()
                .map(|m| (member_id(m.address), m.clone()))
                .collect(),
        }
    }

    /// [`owner`] of `(topic, partition)` among the members that consume
    /// `topic` (the same scores and the same tie-break).
    pub fn owner(&self, group: &[u8], topic: &[u8], partition: &[u8]) -> Option<&'a [u8]> {
        let key = partition_key(group, topic, partition);
        let mut best: Option<(u64, &'a [u8])> = None;
        for (id, m) in &self.members {
            if !m.consumes(topic) {
                continue;
            }
            let s = mix(key ^ id);
            best = match best {
                Some((bs, bm)) if bs > s || (bs == s && bm <= m.address) => Some((bs, bm)),
                _ => Some((s, m.address)),
            };
        }
        best.map(|(_, m)| m)
    }
}

/// The owner of every partition in `partitions` (`(topic, partition)`
/// pairs) among the members that consume its topic; a partition whose
/// topic no member consumes is left out.
pub fn assign<'a>(
    group: &[u8],
    members: &[Member<'a>],
    partitions: &[(Vec<u8>, Vec<u8>)],
) -> BTreeMap<(Vec<u8>, Vec<u8>), &'a [u8]> {
    let ranked = Ranked::new(members);
    let mut out = BTreeMap::new();
    for (topic, partition) in partitions {
        if let Some(m) = ranked.owner(group, topic, partition) {
            out.insert((topic.clone(), partition.clone()), m);
        }
    }
    out
}

#[cfg(test)]
mod tests;
