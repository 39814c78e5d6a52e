//! What a member asks the stores on its application's behalf: the
//! confirmation of a synchronous commit ([`Confirm`]: every entry at or
//! past what it committed) and the group's commits for `committed()`
//! ([`Ask`]). Both settle as a lookup does: once every store that said
//! hello (STORE-HELLO) answered, or [`LOOKUP_SETTLE`] after the first
//! useful answer. The application waits on the other end of the channel
//! with its own timeout; one that gave up long ago is dropped
//! ([`ABANDONED`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use super::LOOKUP_SETTLE;
use crate::error::Result;
use crate::group::view::Part;
use crate::wire::group::{CommitOffsets, OFFSETS_LAST};

/// A question the application stopped waiting for is forgotten after this.
pub const ABANDONED: Duration = Duration::from_secs(600);

/// The group's commits, per partition: `(epoch, offset)`.
pub type Commits = BTreeMap<Part, (u64, u64)>;

/// Whether a question answered by `full` (stores whose answers are
/// complete; the first since `first`) is settled: every known store
/// answered, or [`LOOKUP_SETTLE`] passed since the first.
fn settled(
    known: &BTreeSet<Vec<u8>>,
    full: &BTreeSet<Vec<u8>>,
    first: Option<Instant>,
    now: Instant,
) -> bool {
    let Some(first) = first else {
        return false;
    };
    (!known.is_empty() && known.is_subset(full)) || now >= first + LOOKUP_SETTLE
}

/// A synchronous commit awaiting the stores.
#[derive(Debug)]
pub struct Confirm {
    pub sequence: u64,
    /// What was committed: `(epoch, offset)` per partition.
    pub wanted: Commits,
    /// Per store, the partitions it showed at or past what was committed.
    covered: BTreeMap<Vec<u8>, BTreeSet<Part>>,
    full: BTreeSet<Vec<u8>>,
    first: Option<Instant>,
    sent_at: Instant,
    done: Sender<Result<()>>,
}

impl Confirm {
    pub fn new(sequence: u64, wanted: Commits, now: Instant, done: Sender<Result<()>>) -> Self {
        Self {
            sequence,
            wanted,
            covered: BTreeMap::new(),
            full: BTreeSet::new(),
            first: None,
            sent_at: now,
            done,
        }
    }

    /// A store's answer to the COMMIT (its rows for what was committed).
    pub fn answer(&mut self, o: &CommitOffsets<'_>, now: Instant) {
        let covered = self.covered.entry(o.address.to_vec()).or_default();
        for e in &o.entries {
            let part = (e.topic.to_vec(), e.partition.to_vec());
            if self
                .wanted
                .get(&part)
                .is_some_and(|w| (e.epoch, e.offset) >= *w)
            {
                covered.insert(part);
            }
        }
        if covered.len() == self.wanted.len() && self.full.insert(o.address.to_vec()) {
            self.first.get_or_insert(now);
        }
    }

    /// Tells the application once settled; true when done with (settled,
    /// or abandoned).
    pub fn finish(&self, known: &BTreeSet<Vec<u8>>, now: Instant) -> bool {
        if settled(known, &self.full, self.first, now) {
            // An application that stopped waiting is not there to hear it.
            let _ = self.done.send(Ok(()));
            return true;
        }
        now >= self.sent_at + ABANDONED
    }
}

/// `committed()`: the group's commits of some topics.
#[derive(Debug)]
pub struct Ask {
    pub sequence: u64,
    found: Commits,
    full: BTreeSet<Vec<u8>>,
    first: Option<Instant>,
    sent_at: Instant,
    done: Sender<Commits>,
}

impl Ask {
    pub fn new(sequence: u64, now: Instant, done: Sender<Commits>) -> Self {
        Self {
            sequence,
            found: Commits::new(),
            full: BTreeSet::new(),
            first: None,
            sent_at: now,
            done,
        }
    }

    /// A store's COMMIT-OFFSETS (one of its answers; the last is flagged).
    pub fn answer(&mut self, o: &CommitOffsets<'_>, now: Instant) {
        for e in &o.entries {
            let part = (e.topic.to_vec(), e.partition.to_vec());
            let f = self.found.entry(part).or_insert((e.epoch, e.offset));
            *f = (*f).max((e.epoch, e.offset));
        }
        if o.flags & OFFSETS_LAST != 0 && self.full.insert(o.address.to_vec()) {
            self.first.get_or_insert(now);
        }
    }

    /// As [`Confirm::finish`], handing over what was found.
    pub fn finish(&mut self, known: &BTreeSet<Vec<u8>>, now: Instant) -> bool {
        if settled(known, &self.full, self.first, now) {
            let _ = self.done.send(std::mem::take(&mut self.found));
            return true;
        }
        now >= self.sent_at + ABANDONED
    }
}
