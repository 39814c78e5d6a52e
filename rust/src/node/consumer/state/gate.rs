//! A group member's consumer delivers only the partitions its group gave
//! it (docs/groups.md): the [`Gate`]. Records and HEADs of the others are
//! dropped, noting only that the partition exists (for the member's view)
//! and how far it is known to go (where `latest` starts it). The
//! membership ([`super::super::group`]) decides; these are the consumer's
//! ends of its decisions: [`ConsumerState::start_owned`] and
//! [`ConsumerState::release`].
//!
//! The application's own gate too, in or out of a group:
//! [`ConsumerState::pause`] stops taking a partition's records until
//! [`ConsumerState::resume`].

use std::time::Instant;

use rustc_hash::{FxHashMap, FxHashSet};

use super::{ConsumerState, Start};
use crate::group::view::StartAt;
use crate::node::config::OffsetReset;
use crate::node::out::Out;

/// The partitions a group member may deliver, and those it only heard of.
#[derive(Debug, Default)]
pub struct Gate {
    owned: FxHashSet<Vec<u8>>,
    /// Partitions heard of and not owned: the offset after the last one known.
    known: FxHashMap<Vec<u8>, u64>,
    /// Partitions heard of for the first time, `(topic, partition)`, until
    /// [`ConsumerState::take_seen`].
    fresh: Vec<(Vec<u8>, Vec<u8>)>,
}

impl ConsumerState {
    /// Whether records and HEADs of `partition` (of `topic`, known to go up
    /// to `known` - 1) are taken: always without a group; in a group only
    /// for the partitions it owns. One it does not own is noted.
    pub(super) fn admits(&mut self, partition: &[u8], topic: &[u8], known: u64) -> bool {
        if !self.paused.is_empty() && self.paused.contains(partition) {
            // How far it goes: fetched from there on resuming.
            if let Some(p) = self.parts.get_mut(partition) {
                p.known = p.known.max(known);
            }
            return false;
        }
        let Some(gate) = &mut self.gate else {
            return true;
        };
        if gate.owned.contains(partition) {
            return true;
        }
        match gate.known.get_mut(partition) {
            Some(k) => *k = (*k).max(known),
            None => {
                gate.known.insert(partition.to_vec(), known);
                gate.fresh.push((topic.to_vec(), partition.to_vec()));
            }
        }
        false
    }

    /// The partitions heard of for the first time since the last call,
    /// as `(topic, partition)`.
    pub fn take_seen(&mut self) -> Vec<(Vec<u8>, Vec<u8>)> {
        match &mut self.gate {
            Some(gate) => std::mem::take(&mut gate.fresh),
            None => Vec::new(),
        }
    }

    /// Whether partitions were heard of for the first time since the last
    /// [`ConsumerState::take_seen`].
    pub fn has_seen(&self) -> bool {
        self.gate.as_ref().is_some_and(|g| !g.fresh.is_empty())
    }

    /// Starts delivering `partition` of `topic` at `at`, with seek epoch
    /// `epoch` (the handle's, so that what it still holds of an earlier
    /// ownership is dropped). FETCHes what is known to exist from there,
    /// and asks the topic's heads (a partition's HEADs were dropped while
    /// it was not ours). Returns the offset it starts at.
    pub fn start_owned(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        at: StartAt,
        epoch: u64,
        now: Instant,
        out: &mut Vec<Out>,
    ) -> u64 {
        // A pause belongs to an ownership: a partition given back starts
        // unpaused, as the handle's revocation left it.
        self.paused.remove(partition);
        let known = match &mut self.gate {
            Some(gate) => {
                gate.owned.insert(partition.to_vec());
                gate.known.get(partition).copied().unwrap_or(0)
            }
            None => 0,
        };
        let next = match at {
            StartAt::Offset(o) => o,
            StartAt::Earliest => 0,
            StartAt::Reset => match self.reset {
                OffsetReset::Earliest => 0,
                OffsetReset::Latest => known,
            },
        };
        let topic_ix = self
            .topics
            .iter()
            .position(|t| t == topic)
            .map(|i| i as u32);
        self.parts.remove(partition);
        self.starts.insert(
            partition.to_vec(),
            Start {
                next,
                epoch,
                topic: topic_ix,
                since: now,
            },
        );
        let reset = self.reset;
        self.add_part(partition, topic, None, reset, now);
        if let Some(p) = self.parts.get_mut(partition) {
            p.known = p.known.max(known);
        }
        self.maybe_fetch(partition, now, out);
        out.push(Out::GetHeads {
            topic: topic.to_vec(),
        });
        next
    }

    /// Stops delivering `partition` (given to another member): its state
    /// and held records are dropped. Returns the next offset it would have
    /// delivered, if it was delivering it.
    pub fn release(&mut self, partition: &[u8]) -> Option<u64> {
        self.paused.remove(partition);
        self.stall_watch.retain(|k| &**k != partition);
        let idle = self.starts.remove(partition).map(|s| (s.next, s.next));
        let left = self.parts.remove(partition).map(|p| (p.next, p.known));
        let left = left.or(idle);
        if let Some(gate) = &mut self.gate {
            if gate.owned.remove(partition) {
                let known = left.map_or(0, |(_, known)| known);
                gate.known.insert(partition.to_vec(), known);
            }
        }
        left.map(|(next, _)| next)
    }

    /// The application paused `partition`: its records and HEADs are
    /// dropped, its FETCHes stop, and what it delivered and `poll` did not
    /// return is dropped by a new seek epoch (the handle bumped its own
    /// alike, as for a seek). [`ConsumerState::resume`] then seeks it to
    /// where `poll` stopped.
    pub fn pause(&mut self, partition: &[u8], now: Instant) {
        if !self.owns(partition) {
            // Given to another member since the application saw it in
            // `assignment()`: its revocation took it out of the handle's
            // paused set, and a start here later must not find it paused.
            return;
        }
        self.paused.insert(partition.to_vec());
        self.stall_watch.retain(|k| &**k != partition);
        match self.parts.get_mut(partition) {
            Some(p) => {
                p.held.clear();
                p.retry_at = None;
                p.defer = None;
                p.epoch += 1;
            }
            None => {
                let start = self.starts.entry(partition.to_vec()).or_insert(Start {
                    next: 0,
                    epoch: 0,
                    topic: None,
                    since: now,
                });
                start.epoch += 1;
            }
        }
    }

    /// Takes `partition`'s records again from `offset` (where `poll`
    /// stopped), as a seek there. Returns the new seek epoch.
    pub fn resume(
        &mut self,
        partition: &[u8],
        offset: u64,
        now: Instant,
        out: &mut Vec<Out>,
    ) -> u64 {
        self.paused.remove(partition);
        if !self.owns(partition) {
            // Given to another member meanwhile: nothing to take again.
            return 0;
        }
        self.seek(partition, offset, now, out)
    }

    /// Whether this consumer delivers only what its group gives it.
    pub fn in_group(&self) -> bool {
        self.gate.is_some()
    }

    /// Whether `partition` is this consumer's to deliver: any without a
    /// group, the owned ones in a group.
    fn owns(&self, partition: &[u8]) -> bool {
        self.gate
            .as_ref()
            .is_none_or(|g| g.owned.contains(partition))
    }
}

#[cfg(test)]
mod tests;
