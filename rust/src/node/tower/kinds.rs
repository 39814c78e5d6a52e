//! The nodes a tower knows, by kind (PROTOCOL.md, "Extensions", kind
//! announcements; docs/metrics.md, `dafka_tower_nodes`).
//!
//! RFC 46 beacons say nothing of a node's kind, and stay as they are. This
//! project's nodes subscribe, on the tower's XPUB, to a topic that names
//! their kind and address ([`Announcement`]); the tower reads it there (its
//! XPUB is verbose), and reads the topic's unsubscription when the node's
//! connection ends (libzmq sends it then: the topic is the node's alone).
//! [`Kinds`] keeps the announced kind by address, apart from [`Known`]: a
//! node whose beacon connection was cut and came back keeps its kind,
//! though its subscription was not made again. The counts are of the nodes
//! [`Known`] knows, each by its announced kind, else `unknown` (a
//! C-reference node, which announces nothing); they move as nodes are
//! heard, forgotten, announced and withdrawn, never by a walk of every node.
//!
//! A secure tower takes an announcement, or its withdrawal, only from the
//! key the address belongs to ([`crate::security::address_matches_key`],
//! as beacons): an insider cannot make another node look like another
//! kind. The unsubscription libzmq makes when a subscriber leaves carries
//! no `User-Id` (every message of a peer of a secure tower does): it is
//! taken, since only the node's own subscription could make it.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use rustc_hash::FxHashMap;

use super::Known;
use crate::node::beacon::MAX_PEERS;
use crate::security::cert::parse_key_z85;
use crate::wire::{Announcement, NodeType};

/// The kinds counted, in the order of [`NodeCounts::snapshot`]: the three
/// node types, then the nodes that announced none.
pub const KIND_NAMES: [&str; 4] = ["producer", "consumer", "store", "unknown"];

fn slot(kind: Option<NodeType>) -> usize {
    match kind {
        Some(NodeType::Producer) => 0,
        Some(NodeType::Consumer) => 1,
        Some(NodeType::Store) => 2,
        None => 3,
    }
}

/// The kind each address announced (at most `cap`), and the known nodes
/// counted by kind.
#[derive(Debug)]
pub struct Kinds {
    by_address: FxHashMap<Vec<u8>, NodeType>,
    /// Known nodes by [`slot`].
    counts: [u64; 4],
    cap: usize,
    /// Announcements of new addresses not kept because `cap` were held.
    pub refused: u64,
}

impl Default for Kinds {
    fn default() -> Self {
        Self {
            by_address: FxHashMap::default(),
            counts: [0; 4],
            cap: MAX_PEERS,
            refused: 0,
        }
    }
}

impl Kinds {
    fn kind_of(&self, address: &[u8]) -> Option<NodeType> {
        self.by_address.get(address).copied()
    }

    /// A known node changed kind (announced, or withdrew its kind).
    fn moved(&mut self, from: Option<NodeType>, to: Option<NodeType>) {
        let c = &mut self.counts[slot(from)];
        *c = c.saturating_sub(1);
        self.counts[slot(to)] += 1;
    }

    /// [`Known`] heard the node `address` for the first time.
    pub(super) fn joined(&mut self, address: &[u8]) {
        self.counts[slot(self.kind_of(address))] += 1;
    }

    /// [`Known`] forgot the node `address`.
    pub(super) fn left(&mut self, address: &[u8]) {
        let c = &mut self.counts[slot(self.kind_of(address))];
        *c = c.saturating_sub(1);
    }

    /// `a` was announced; `known`: whether [`Known`] knows its node.
    fn announce(&mut self, a: Announcement<'_>, known: bool) -> Announced {
        let before = self.kind_of(a.address);
        if before.is_none() && self.by_address.len() >= self.cap {
            self.refused += 1;
            if self.refused.is_power_of_two() {
                tracing::warn!(
                    "{} node kinds held: kinds of new nodes are not kept, they count as \
                     unknown ({} announcements so far)",
                    self.cap,
                    self.refused
                );
            }
            return Announced::Full;
        }
        self.by_address.insert(a.address.to_vec(), a.kind);
        if known && before != Some(a.kind) {
            self.moved(before, Some(a.kind));
        }
        Announced::Taken
    }

    /// `a`'s topic was unsubscribed: the kind goes if it is the one held
    /// (a withdrawal of another kind changes nothing).
    fn withdraw(&mut self, a: Announcement<'_>, known: bool) {
        if self.kind_of(a.address) == Some(a.kind) {
            self.by_address.remove(a.address);
            if known {
                self.moved(Some(a.kind), None);
            }
        }
    }

    /// Known nodes by kind, in the order of [`KIND_NAMES`].
    pub fn counts(&self) -> [u64; 4] {
        self.counts
    }

    /// Addresses whose kind is held.
    pub fn len(&self) -> usize {
        self.by_address.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_address.is_empty()
    }
}

/// Who sent a subscription message read on the tower's XPUB.
#[derive(Debug, Clone, Copy)]
pub enum Sender<'a> {
    /// An insecure tower: anyone (unchecked, as its beacons).
    Anyone,
    /// A secure tower: the `User-Id` of the message (its peer's key, Z85);
    /// none on libzmq's own unsubscription when a subscriber left.
    Secure(Option<&'a str>),
}

/// What a subscription message did to the kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Announced {
    /// It was no kind announcement (nor a malformed one).
    No,
    /// An announcement or a withdrawal, taken.
    Taken,
    /// An announcement that does not parse: dropped (to be counted).
    Malformed,
    /// A secure peer announced, or withdrew, an address not its key's.
    Identity,
    /// An announcement of a new address while `MAX_PEERS` kinds were held.
    Full,
}

impl Known {
    /// A subscription message (`01` or `00`, then the topic) read on the
    /// tower's XPUB: a kind announcement or its withdrawal is taken if the
    /// sender may make it. The unsubscription of a malformed announcement
    /// (it comes when its sender leaves) is no news: `No`.
    pub fn on_subscription(&mut self, msg: &[u8], sender: Sender<'_>) -> Announced {
        let (subscribe, topic) = match msg.split_first() {
            Some((1, topic)) => (true, topic),
            Some((0, topic)) => (false, topic),
            _ => return Announced::No,
        };
        let a = match Announcement::parse(topic) {
            Ok(Some(a)) => a,
            Ok(None) => return Announced::No,
            Err(_) if subscribe => return Announced::Malformed,
            Err(_) => return Announced::No,
        };
        let allowed = match sender {
            Sender::Anyone => true,
            Sender::Secure(None) => !subscribe,
            Sender::Secure(Some(user)) => parse_key_z85(user)
                .is_some_and(|key| crate::security::address_matches_key(a.address, &key)),
        };
        if !allowed {
            return Announced::Identity;
        }
        let known = self.nodes.contains_key(a.address);
        if subscribe {
            self.kinds.announce(a, known)
        } else {
            self.kinds.withdraw(a, known);
            Announced::Taken
        }
    }

    /// The known nodes by kind, in the order of [`KIND_NAMES`].
    pub fn by_kind(&self) -> [u64; 4] {
        self.kinds.counts()
    }
}

/// A tower's nodes by kind, for `stats()` and metrics: relaxed atomics the
/// tower's thread writes, anyone reads.
#[derive(Debug, Default)]
pub struct NodeCounts {
    /// Known nodes, in the order of [`KIND_NAMES`].
    by_kind: [AtomicU64; 4],
    /// Kind announcements of new nodes not kept: `MAX_PEERS` kinds were
    /// held (those nodes count as unknown).
    pub announcements_refused: AtomicU64,
}

impl NodeCounts {
    /// Publishes `known`'s counts.
    pub fn publish(&self, known: &Known) {
        for (a, n) in self.by_kind.iter().zip(known.by_kind()) {
            a.store(n, Relaxed);
        }
    }

    /// (kind, known nodes of it), in the order of [`KIND_NAMES`].
    pub fn snapshot(&self) -> [(&'static str, u64); 4] {
        std::array::from_fn(|i| (KIND_NAMES[i], self.by_kind[i].load(Relaxed)))
    }
}

#[cfg(test)]
mod tests;
