//! A group member's decisions beside the consumer's (docs/groups.md), pure:
//! no sockets. [`Membership`] wraps the member's [`View`] with what the node
//! needs around it: its clock (ms since it joined), when to announce, the
//! COMMIT-QUERY of the partitions the view looks up and the settling of the
//! stores' answers, and the COMMITs of what `poll` returned.
//!
//! The event loop (`run.rs`) feeds it the group messages that arrive
//! ([`Membership::on_group`]) and the partitions the consumer hears of
//! ([`Membership::partition_seen`]); at every turn it applies what
//! [`Membership::decide`] returns to the consumer's partitions (stops
//! first, then starts: [`Act`]), reports where each stop left its partition
//! ([`Membership::stopped`]), and sends what [`Membership::due`] and
//! [`Membership::auto_commit`] give it.
//!
//! Lookups: the partitions the view looks up go in one COMMIT-QUERY; the
//! answers (COMMIT-OFFSETS of that sequence, from every store) are merged,
//! the greatest `(epoch, offset)` per partition and *group known* if any
//! store says so, and handed to the view [`LOOKUP_SETTLE`] after the first
//! one. A query no store answers is asked again every [`LOOKUP_RETRY`], and
//! nothing starts meanwhile: starting without the stores could skip the
//! group's commits. A lookup settles at once when every store that said
//! hello (STORE-HELLO) answered.
//!
//! For the application: a synchronous commit is confirmed, and
//! `committed()` answered, by the stores (`group/asks.rs`).

mod asks;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

pub use asks::Commits;
use asks::{Ask, Confirm};

use crate::error::{Error, Result};
use crate::group::view::{Decision, LookupResult, Part, StartAt, Timing, View};
use crate::node::out::Fate;
use crate::wire::group::{
    Commit, CommitOffsets, CommitQuery, Entry, GroupKind, GroupMessage, OFFSETS_GROUP_KNOWN,
    OFFSETS_LAST,
};
use crate::wire::{Prefix, Subscription};

/// How long a lookup waits for more stores after the first answer.
pub const LOOKUP_SETTLE: Duration = Duration::from_millis(200);
/// A lookup no store answered is asked again after this long.
pub const LOOKUP_RETRY: Duration = Duration::from_secs(1);
/// The view decides at least this often (members expire, `settle` passes).
pub const TICK: Duration = Duration::from_millis(100);
/// Entries in one COMMIT message (each at most 530 octets: well under the
/// 64 KiB a store's answer is cut at).
const COMMIT_CHUNK: usize = 100;

/// The next offset `poll` returns of a partition (what a member commits).
pub type PositionOf<'a> = &'a dyn Fn(&Part) -> Option<u64>;

/// What the node does to the consumer's partitions, in this order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Act {
    /// Stop delivering it now (what `poll` has not returned is dropped),
    /// then report the next offset with [`Membership::stopped`].
    Stop(Part),
    /// Deliver it from there.
    Start(Part, StartAt),
}

#[derive(Debug)]
struct Query {
    sequence: u64,
    sent_at: Instant,
    parts: BTreeSet<Part>,
    first_answer: Option<Instant>,
    /// The greatest `(epoch, offset)` heard per partition.
    found: BTreeMap<Part, (u64, u64)>,
    group_known: bool,
    /// The stores whose answer is complete.
    full: BTreeSet<Vec<u8>>,
}

/// One consumer's membership of its group.
#[derive(Debug)]
pub struct Membership {
    view: View,
    group: Vec<u8>,
    address: Vec<u8>,
    base: Instant,
    heartbeat: Duration,
    auto_commit: Option<Duration>,
    next_announce: Instant,
    next_tick: Instant,
    next_commit: Instant,
    /// Its claims changed: announce at the next [`Membership::due`].
    changed: bool,
    /// COMMIT and COMMIT-QUERY sequences (the stores echo them).
    sequence: u64,
    query: Option<Query>,
    /// The epoch each running partition commits with (its commit's).
    epochs: BTreeMap<Part, u64>,
    /// The last offset committed (or started at) per running partition.
    committed: BTreeMap<Part, u64>,
    /// The greatest offset a store said it holds of each running partition
    /// (its answer to a COMMIT, or the commit it started from): what is
    /// committed past it is sent again until a store confirms it.
    acked: BTreeMap<Part, u64>,
    /// A store said hello for the first time: commit what it lacks now.
    recommit: bool,
    /// The stores that said hello (STORE-HELLO): who answers.
    stores: BTreeSet<Vec<u8>>,
    /// Synchronous commits awaiting the stores, and `committed()` asks.
    confirms: Vec<Confirm>,
    asks: Vec<Ask>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Membership {
    /// Joins `group` now: counted live by the others `timeout` after each
    /// announcement (the node's `beacon_timeout`), announcing every
    /// `heartbeat` (`beacon_interval`), starting nothing for 1.5 heartbeats.
    /// `auto_commit`: commit what `poll` returned this often (None: never).
    pub fn new(
        group: &[u8],
        address: &[u8],
        topics: &[&[u8]],
        timeout: Duration,
        heartbeat: Duration,
        auto_commit: Option<Duration>,
        now: Instant,
    ) -> Self {
        let timing = Timing {
            timeout_ms: u32::try_from(ms(timeout)).unwrap_or(u32::MAX).max(1),
            settle_ms: ms(heartbeat).saturating_mul(3) / 2,
        };
        Self {
            view: View::new(group, address, topics, timing, 0),
            group: group.to_vec(),
            address: address.to_vec(),
            base: now,
            heartbeat,
            auto_commit,
            next_announce: now,
            next_tick: now,
            next_commit: now + auto_commit.unwrap_or(heartbeat),
            changed: true,
            // Random, as a store's: an answer names the question it answers,
            // and a peer that did not see the question cannot guess it.
            sequence: uuid::Uuid::new_v4().as_u64_pair().0 >> 1,
            query: None,
            epochs: BTreeMap::new(),
            committed: BTreeMap::new(),
            acked: BTreeMap::new(),
            recommit: false,
            stores: BTreeSet::new(),
            confirms: Vec::new(),
            asks: Vec::new(),
        }
    }

    /// A store said hello to us (STORE-HELLO): it answers our questions.
    pub fn store_seen(&mut self, store: &[u8]) {
        if !self.stores.contains(store) {
            self.stores.insert(store.to_vec());
            self.recommit = true;
        }
    }

    /// A peer subscribed on our XPUB: to its group's announcements (a
    /// member, or a store, which takes COMMITs only from members it heard),
    /// announce now rather than a heartbeat later.
    pub fn on_subscription(&mut self, sub: &Subscription<'_>) {
        if let Prefix::Group {
            kind: GroupKind::Member,
            key,
        } = sub.prefix
        {
            if sub.subscribe && self.group.starts_with(key) {
                self.changed = true;
            }
        }
    }

    fn ms(&self, now: Instant) -> u64 {
        ms(now.saturating_duration_since(self.base))
    }

    /// A group message from a peer: another member's announcement, or a
    /// store's COMMIT-OFFSETS to us. Others (another group's, our own,
    /// answers to nothing we asked) are not for us.
    pub fn on_group(&mut self, msg: &GroupMessage<'_>, now: Instant) -> Fate {
        let t = self.ms(now);
        match msg {
            GroupMessage::Member(m) => match self.view.announcement(t, m) {
                Ok(()) => Fate::Taken(0),
                Err(_) => Fate::Ignored,
            },
            GroupMessage::CommitOffsets(o) => self.on_offsets(o, now),
            GroupMessage::Commit(_)
            | GroupMessage::CommitQuery(_)
            | GroupMessage::PartitionsQuery(_)
            | GroupMessage::Partitions(_) => Fate::Ignored,
        }
    }

    fn on_offsets(&mut self, o: &CommitOffsets<'_>, now: Instant) -> Fate {
        if o.to != self.address.as_slice() || o.group != self.group.as_slice() {
            return Fate::Ignored;
        }
        // Whatever it answers, a store holds these commits.
        for e in &o.entries {
            let part = (e.topic.to_vec(), e.partition.to_vec());
            if let Some(a) = self.acked.get_mut(&part) {
                *a = (*a).max(e.offset);
            }
        }
        if let Some(c) = self.confirms.iter_mut().find(|c| c.sequence == o.sequence) {
            c.answer(o, now);
            return Fate::Taken(0);
        }
        if let Some(a) = self.asks.iter_mut().find(|a| a.sequence == o.sequence) {
            a.answer(o, now);
            return Fate::Taken(0);
        }
        let Some(q) = self.query.as_mut().filter(|q| q.sequence == o.sequence) else {
            // The answer to a COMMIT, or to a lookup settled already.
            return Fate::Taken(0);
        };
        // A store's answer settles the lookup once whole (its last
        // message): stores answer in one message, an older one in several,
        // and a lost one must not make a partition start without its commit.
        q.group_known |= o.flags & OFFSETS_GROUP_KNOWN != 0;
        if o.flags & OFFSETS_LAST != 0 {
            q.first_answer.get_or_insert(now);
            q.full.insert(o.address.to_vec());
        }
        for e in &o.entries {
            let part = (e.topic.to_vec(), e.partition.to_vec());
            if q.parts.contains(&part) {
                let f = q.found.entry(part).or_insert((e.epoch, e.offset));
                *f = (*f).max((e.epoch, e.offset));
            }
        }
        Fate::Taken(0)
    }

    /// A partition of one of our topics exists (a HEAD, a record).
    pub fn partition_seen(&mut self, topic: &[u8], partition: &[u8]) {
        self.view.partition_seen(topic, partition);
    }

    /// Hands a settled lookup to the view.
    fn settle(&mut self, now: Instant) {
        let stores = &self.stores;
        let settled = self.query.as_ref().is_some_and(|q| {
            let all = !stores.is_empty() && stores.is_subset(&q.full);
            q.first_answer
                .is_some_and(|t| all || now >= t + LOOKUP_SETTLE)
        });
        if !settled {
            return;
        }
        let Some(q) = self.query.take() else {
            return;
        };
        for part in &q.parts {
            let found = q.found.get(part);
            let result = LookupResult {
                committed: found.map(|f| f.1),
                group_known: q.group_known,
            };
            self.view.looked_up(part, result);
            self.epochs.insert(part.clone(), found.map_or(0, |f| f.0));
        }
    }

    /// What to do to the partitions now, stops first.
    pub fn decide(&mut self, now: Instant) -> Vec<Act> {
        self.settle(now);
        self.next_tick = now + TICK;
        let mut acts = Vec::new();
        let t = self.ms(now);
        for d in self.view.decide(t) {
            self.changed = true;
            match d {
                Decision::Stop(p) => acts.push(Act::Stop(p)),
                // Asked by `due`, from the view's lookups.
                Decision::Lookup(_) => {}
                Decision::Start(p, at) => {
                    let from = match at {
                        StartAt::Offset(o) => o,
                        StartAt::Reset | StartAt::Earliest => 0,
                    };
                    self.committed.insert(p.clone(), from);
                    self.acked.insert(p.clone(), from);
                    acts.push(Act::Start(p, at));
                }
            }
        }
        acts
    }

    /// A turn without decisions, while the node does not read its peers
    /// (its application is behind: the channel is full): their
    /// announcements wait unread, so they must not seem silent and expire.
    /// It still announces itself ([`Membership::due`]); the next turn comes
    /// a [`TICK`] later.
    pub fn hold(&mut self, now: Instant) {
        self.next_tick = now + TICK;
    }

    /// The node stopped `part` after [`Act::Stop`]; `offset` is the next
    /// one `poll` would have returned. It is committed (if past the last
    /// commit) before the announcement releases it at `offset`.
    pub fn stopped(
        &mut self,
        part: &Part,
        offset: u64,
        now: Instant,
        send: &mut dyn FnMut(&GroupMessage<'_>) -> Result<()>,
    ) -> Result<()> {
        if self.acked.get(part).is_some_and(|c| offset > *c) {
            self.send_commit(&[(part.clone(), offset)], send)?;
        }
        let t = self.ms(now);
        self.view.stopped(part, offset, t);
        self.committed.remove(part);
        self.acked.remove(part);
        self.epochs.remove(part);
        self.changed = true;
        Ok(())
    }

    /// Sends what is due: the COMMIT-QUERY of the partitions looked up
    /// (when none is in flight, or again when none answered), then the
    /// announcement (on every change, and every heartbeat).
    pub fn due(
        &mut self,
        now: Instant,
        send: &mut dyn FnMut(&GroupMessage<'_>) -> Result<()>,
    ) -> Result<()> {
        let unanswered = self
            .query
            .as_ref()
            .is_some_and(|q| q.first_answer.is_none() && now >= q.sent_at + LOOKUP_RETRY);
        if self.query.is_none() || unanswered {
            let parts: BTreeSet<Part> = self.view.looking().into_iter().cloned().collect();
            if parts.is_empty() {
                self.query = None;
            } else {
                self.sequence += 1;
                let topics: BTreeSet<&[u8]> = parts.iter().map(|p| p.0.as_slice()).collect();
                send(&GroupMessage::CommitQuery(CommitQuery {
                    group: &self.group,
                    address: &self.address,
                    sequence: self.sequence,
                    topics: topics.into_iter().collect(),
                }))?;
                self.query = Some(Query {
                    sequence: self.sequence,
                    sent_at: now,
                    parts,
                    first_answer: None,
                    found: BTreeMap::new(),
                    group_known: false,
                    full: BTreeSet::new(),
                });
            }
        }
        let stores = &self.stores;
        self.confirms.retain(|c| !c.finish(stores, now));
        self.asks.retain_mut(|a| !a.finish(stores, now));
        if self.changed || now >= self.next_announce {
            self.changed = false;
            self.next_announce = now + self.heartbeat;
            send(&GroupMessage::Member(self.view.announce()))?;
        }
        Ok(())
    }

    /// Commits, when `auto_commit` is due, every running partition whose
    /// position (`position`: the next offset `poll` would return, what it
    /// returned before that) moved past its last commit.
    pub fn auto_commit(
        &mut self,
        now: Instant,
        position: &dyn Fn(&Part) -> Option<u64>,
        send: &mut dyn FnMut(&GroupMessage<'_>) -> Result<()>,
    ) -> Result<()> {
        let Some(every) = self.auto_commit else {
            return Ok(());
        };
        if now < self.next_commit && !std::mem::take(&mut self.recommit) {
            return Ok(());
        }
        self.next_commit = now + every;
        self.commit(position, send)
    }

    /// Commits every running partition whose position moved past what a
    /// store confirmed (an application's `commit()`, and auto-commit): a
    /// COMMIT no store took (none up, one that restarted and did not know
    /// us yet, a full queue) is sent again.
    pub fn commit(
        &mut self,
        position: &dyn Fn(&Part) -> Option<u64>,
        send: &mut dyn FnMut(&GroupMessage<'_>) -> Result<()>,
    ) -> Result<()> {
        let entries: Vec<(Part, u64)> = self
            .view
            .assignment()
            .into_iter()
            .filter_map(|(part, _)| {
                let pos = position(part)?;
                let moved = self.acked.get(part).is_some_and(|c| pos > *c);
                moved.then(|| (part.clone(), pos))
            })
            .collect();
        self.send_commit(&entries, send).map(|_| ())
    }

    /// Sends COMMITs of `entries`; returns their sequence (None: nothing
    /// to commit).
    fn send_commit(
        &mut self,
        entries: &[(Part, u64)],
        send: &mut dyn FnMut(&GroupMessage<'_>) -> Result<()>,
    ) -> Result<Option<u64>> {
        if entries.is_empty() {
            return Ok(None);
        }
        self.sequence += 1;
        for chunk in entries.chunks(COMMIT_CHUNK) {
            let entries = chunk
                .iter()
                .map(|(p, offset)| Entry {
                    topic: &p.0,
                    partition: &p.1,
                    epoch: self.epochs.get(p).copied().unwrap_or(0),
                    offset: *offset,
                })
                .collect();
            send(&GroupMessage::Commit(Commit {
                group: &self.group,
                address: &self.address,
                sequence: self.sequence,
                entries,
            }))?;
        }
        for (p, offset) in entries {
            self.committed.insert(p.clone(), *offset);
            self.view.committed(p, *offset);
        }
        Ok(Some(self.sequence))
    }

    /// The application's `commit`: `offsets` (each of a partition this
    /// member reads), or the position of every partition it reads that
    /// `poll` moved (with `confirm`, of every one it has a position of, so
    /// that the stores say where each stands). With `confirm`, the stores'
    /// confirmation is awaited ([`Confirm`]) and told there, at once when
    /// there is nothing to commit; a partition not read here any more is
    /// an error told there.
    pub fn commit_request(
        &mut self,
        offsets: Option<Vec<(Part, u64)>>,
        confirm: Option<Sender<Result<()>>>,
        (now, position): (Instant, PositionOf<'_>),
        send: &mut dyn FnMut(&GroupMessage<'_>) -> Result<()>,
    ) -> Result<()> {
        let mine: BTreeSet<Part> = self.assignment().into_iter().collect();
        let entries: Vec<(Part, u64)> = match offsets {
            Some(given) => {
                if let Some((p, _)) = given.iter().find(|(p, _)| !mine.contains(p)) {
                    let msg = format!(
                        "commit: partition {} of topic {} is not read by this member any more \
                         (assignment() lists those it may commit)",
                        String::from_utf8_lossy(&p.1),
                        String::from_utf8_lossy(&p.0)
                    );
                    if let Some(c) = confirm {
                        let _ = c.send(Err(Error::Config(msg)));
                    }
                    return Ok(());
                }
                given
            }
            None if confirm.is_some() => mine
                .iter()
                .filter_map(|p| position(p).map(|pos| (p.clone(), pos)))
                .collect(),
            None => return self.commit(position, send),
        };
        let wanted: Commits = entries
            .iter()
            .map(|(p, o)| (p.clone(), (self.epochs.get(p).copied().unwrap_or(0), *o)))
            .collect();
        let sequence = self.send_commit(&entries, send)?;
        match (confirm, sequence) {
            (Some(c), Some(sequence)) => {
                self.confirms.push(Confirm::new(sequence, wanted, now, c));
            }
            (Some(c), None) => {
                let _ = c.send(Ok(()));
            }
            (None, _) => {}
        }
        Ok(())
    }

    /// The application's `committed()`: the group's commits of `topics`,
    /// as the stores answer, told on `done` once settled ([`Ask`]).
    pub fn ask_committed(
        &mut self,
        topics: &[&[u8]],
        now: Instant,
        done: Sender<Commits>,
        send: &mut dyn FnMut(&GroupMessage<'_>) -> Result<()>,
    ) -> Result<()> {
        self.sequence += 1;
        send(&GroupMessage::CommitQuery(CommitQuery {
            group: &self.group,
            address: &self.address,
            sequence: self.sequence,
            topics: topics.to_vec(),
        }))?;
        self.asks.push(Ask::new(self.sequence, now, done));
        Ok(())
    }

    /// Leave the group: every partition is stopped (the next
    /// [`Membership::decide`]), then the last announcement says so.
    pub fn leave(&mut self) {
        self.view.leave();
        self.changed = true;
    }

    /// Whether a leaving member has stopped everything.
    pub fn left(&self) -> bool {
        self.view.left()
    }

    /// Whether the stores are to answer the application (a synchronous
    /// commit, `committed()`): the node reads its peers meanwhile, even
    /// while the application is behind.
    pub fn waiting(&self) -> bool {
        !self.confirms.is_empty() || !self.asks.is_empty()
    }

    /// The partitions it delivers.
    pub fn assignment(&self) -> Vec<Part> {
        self.view
            .assignment()
            .into_iter()
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The live members it counts, itself too.
    pub fn members(&self) -> usize {
        self.view.members().len()
    }

    /// When [`Membership::decide`] and [`Membership::due`] are next due.
    pub fn next_deadline(&self) -> Instant {
        self.next_tick.min(self.next_announce)
    }
}

#[cfg(test)]
mod tests;
