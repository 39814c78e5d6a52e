//! The consumer. [`Consumer`] is the handle, receiving delivered records
//! over a channel and noting the application's positions. What the consumer
//! decides is the pure [`ConsumerState`] in [`state`]: each partition's next
//! offset to deliver, records held past a gap, the FETCH of a gap and its
//! retry deadline, when to give a gap up. `run.rs` is the event loop over its
//! sockets.

pub mod group;
mod run;
pub mod state;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::error::{Error, Result};
use crate::group::view::Part;
use crate::node::actor::Actor;
use crate::node::config::{check_name, ConsumerConfig};
use crate::node::stats::Stats;

pub use group::Commits;
pub use state::{ConsumerState, Delivery, MAX_HELD_BYTES, MAX_HELD_TOTAL_BYTES};

enum Cmd {
    Seek(Vec<u8>, u64),
    Connect(String),
    /// A group member commits: these offsets, or what `poll` returned;
    /// with a sender, the stores' confirmation is told there.
    Commit(Option<Vec<(Part, u64)>>, Option<mpsc::Sender<Result<()>>>),
    /// A group member asks the stores for the group's commits of its topics.
    Committed(mpsc::Sender<Commits>),
    /// The application pauses a partition; resumes it from an offset.
    Pause(Vec<u8>),
    Resume(Vec<u8>, u64),
}

/// A change of a group member's partitions, as `(topic, partition)`, in
/// the order they happened (for `on_assign` and `on_revoke`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEvent {
    Assigned(Vec<(String, String)>),
    Revoked(Vec<(String, String)>),
}

/// The counters (`stats`, written by the node thread at every turn) have
/// cache lines of their own, apart from the queue's counts that the
/// application updates at every poll.
#[derive(Debug, Default)]
pub(super) struct ConsumerShared {
    stats: CachePadded<Stats>,
    /// Deliveries in the channel not yet taken by the application.
    buffered: AtomicUsize,
    /// Bytes of their values.
    buffered_bytes: AtomicUsize,
    /// The thread stopped reading because the channel is full.
    paused: AtomicBool,
    epochs: Mutex<HashMap<Arc<str>, u64>>,
    seeks: AtomicU64,
    /// Partitions the node thread forgot (`forget_after`), for the handle
    /// to drop from its positions.
    forgotten: Mutex<Vec<Arc<str>>>,
    /// The next offset of each partition the application has been given
    /// records of (or seeked, or started at): where a new consumer resumes,
    /// and what a group member commits. Taken before `epochs`.
    positions: Mutex<HashMap<Arc<str>, u64>>,
    /// A group member's partitions, `(topic, partition)`, as of the node
    /// thread's last turn; and the live members it counts.
    assignment: Mutex<Vec<(String, String)>>,
    members: AtomicUsize,
    /// A group member's changes of partitions not yet taken by the handle.
    events: Mutex<Vec<GroupEvent>>,
}

impl crate::metrics::HasStats for ConsumerShared {
    fn stats(&self) -> &Stats {
        &self.stats
    }
}

impl ConsumerShared {
    /// Hands the records the state delivered to the application (one
    /// channel message per batch), counting them as buffered.
    fn deliver(&self, tx: &Sender<Vec<Delivery>>, dels: &mut Vec<Delivery>) {
        let n = dels.len();
        if n == 0 {
            return;
        }
        let bytes = dels.iter().map(|d| d.body.len()).sum();
        self.buffered_bytes.fetch_add(bytes, SeqCst);
        self.buffered.fetch_add(n, SeqCst);
        Stats::add(&self.stats.delivered, n as u64);
        // The handle owns the receiver, and if it is gone we are closing
        // anyway.
        let _ = tx.send(std::mem::replace(dels, Vec::with_capacity(n)));
    }

    /// The application has `max` records or `max_bytes` bytes waiting: stop
    /// reading until it takes some.
    fn full(&self, max: usize, max_bytes: usize) -> bool {
        self.buffered.load(SeqCst) >= max || self.buffered_bytes.load(SeqCst) >= max_bytes
    }
}

/// A running consumer.
pub struct Consumer {
    actor: Actor<Cmd>,
    shared: Arc<ConsumerShared>,
    /// Batches from the node thread, and what is left of the last one.
    rx: Mutex<(Receiver<Vec<Delivery>>, VecDeque<Delivery>)>,
    address: String,
    endpoint: String,
    topics: Vec<String>,
    max_buffered: usize,
    max_buffered_bytes: usize,
    group: Option<String>,
    /// The partitions the application paused.
    paused: Mutex<BTreeSet<String>>,
}

impl Consumer {
    /// Starts the node thread; returns once the XPUB is bound.
    pub fn new(topics: &[String], cfg: ConsumerConfig) -> Result<Self> {
        cfg.validate()?;
        for t in topics {
            check_name(&format!("topic {t:?}"), t)?;
        }
        let address = cfg.node.new_address()?;
        let (tx, rx) = mpsc::channel();
        let ctx = zmq::Context::new();
        let (max_buffered, max_buffered_bytes) = (cfg.max_buffered, cfg.max_buffered_bytes);
        let positions = cfg
            .start_offsets
            .iter()
            .map(|(p, off)| (Arc::from(p.as_str()), *off))
            .collect();
        let shared = Arc::new(ConsumerShared {
            positions: Mutex::new(positions),
            ..Default::default()
        });
        let (a, sh, ts) = (address.clone(), shared.clone(), topics.to_vec());
        let group = cfg.group.clone();
        let (actor, endpoint) =
            Actor::spawn("dafka-consumer", &ctx.clone(), move |inbox, ready| {
                run::run(inbox, ready, &ctx, cfg, &ts, &a, &sh, tx)
            })?;
        Ok(Self {
            actor,
            shared,
            rx: Mutex::new((rx, VecDeque::new())),
            address,
            endpoint,
            topics: topics.to_vec(),
            max_buffered,
            max_buffered_bytes,
            group,
            paused: Mutex::new(BTreeSet::new()),
        })
    }

    pub fn address(&self) -> &str {
        &self.address
    }
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
    pub fn topics(&self) -> &[String] {
        &self.topics
    }
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }
    /// What a metrics scrape reads of this consumer.
    pub fn metrics_source(&self) -> crate::metrics::Source {
        let kind = crate::metrics::Kind::Consumer;
        crate::metrics::Source::new(kind, &self.address, None, self.shared.clone())
    }

    /// Takes up to `max` records, waiting up to `slice` for the first one.
    /// Never blocks longer than `slice`: callers loop for longer timeouts.
    pub fn poll_slice(&self, max: usize, slice: Duration, into: &mut Vec<Delivery>) -> Result<()> {
        let guard = self.rx.lock().unwrap_or_else(|p| p.into_inner());
        self.take_locked(guard, max, Some(slice), into)
    }

    /// Takes up to `max` records already here, without waiting: neither for
    /// records nor for another thread waiting for them (then it takes none).
    /// For an event loop's own thread, which must not block.
    pub fn try_poll(&self, max: usize, into: &mut Vec<Delivery>) -> Result<()> {
        let guard = match self.rx.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return self.actor.check(),
        };
        self.take_locked(guard, max, None, into)
    }

    /// Waits up to `slice` until a record is here to take; takes none, so a
    /// caller that gives up (an asyncio task cancelled while a worker thread
    /// waits) loses nothing. `Err(Closed)` once the consumer is closed.
    pub fn wait_ready(&self, slice: Duration) -> Result<bool> {
        let mut guard = self.rx.lock().unwrap_or_else(|p| p.into_inner());
        let (rx, left) = &mut *guard;
        if !left.is_empty() {
            return Ok(true);
        }
        match rx.recv_timeout(slice) {
            Ok(batch) => {
                left.extend(batch);
                Ok(!left.is_empty())
            }
            Err(RecvTimeoutError::Timeout) => {
                drop(guard);
                self.actor.check()?;
                Ok(false)
            }
            Err(RecvTimeoutError::Disconnected) => {
                drop(guard);
                self.actor.check()?;
                Err(Error::Closed)
            }
        }
    }

    /// [`Consumer::poll_slice`] with the lock held: waits up to `slice` for
    /// the first record (`None`: not at all).
    fn take_locked(
        &self,
        mut guard: std::sync::MutexGuard<'_, (Receiver<Vec<Delivery>>, VecDeque<Delivery>)>,
        max: usize,
        slice: Option<Duration>,
        into: &mut Vec<Delivery>,
    ) -> Result<()> {
        let (rx, left) = &mut *guard;
        let start = into.len();
        let take = |left: &mut VecDeque<Delivery>, into: &mut Vec<Delivery>| {
            let n = left.len().min(max - (into.len() - start));
            into.extend(left.drain(..n));
        };
        if left.is_empty() {
            let got = match slice {
                Some(slice) => rx.recv_timeout(slice),
                None => rx.try_recv().map_err(|e| match e {
                    std::sync::mpsc::TryRecvError::Empty => RecvTimeoutError::Timeout,
                    std::sync::mpsc::TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
                }),
            };
            match got {
                Ok(batch) => left.extend(batch),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    drop(guard);
                    self.actor.check()?;
                    return Err(Error::Closed);
                }
            }
        }
        take(left, into);
        while into.len() - start < max {
            match rx.try_recv() {
                Ok(batch) => {
                    left.extend(batch);
                    take(left, into);
                }
                Err(_) => break,
            }
        }
        // A group member's `on_assign`/`on_revoke` run before records are
        // returned: with group changes not yet taken by the handle
        // ([`Consumer::take_group_events`]), the records go back to the
        // front of the channel, untaken, their positions unmoved. So a
        // callback that raises loses none: a commit or a hand-over meanwhile
        // names only what `poll` returned (the node thread queues a
        // partition's start before it delivers its records).
        if self.group.is_some() && into.len() > start && self.has_group_events() {
            for d in into.drain(start..).rev() {
                left.push_front(d);
            }
            return Ok(());
        }
        // The channel's lock is held until the positions are noted: another
        // thread polling meanwhile would take later records, note their
        // positions first, and have them moved back by these.
        let got = into.len() - start;
        if got > 0 {
            let bytes = into[start..].iter().map(|d| d.body.len()).sum();
            self.shared.buffered_bytes.fetch_sub(bytes, SeqCst);
            self.shared.buffered.fetch_sub(got, SeqCst);
            // Held across the epoch check, as `seek` holds it: a seek lands
            // either before this batch is checked or after its positions.
            let mut positions = self
                .shared
                .positions
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if self.shared.seeks.load(SeqCst) > 0 {
                let epochs = self.shared.epochs.lock().unwrap_or_else(|p| p.into_inner());
                let mut i = 0usize;
                into.retain(|d| {
                    i += 1;
                    i <= start || d.epoch >= epochs.get(&d.partition).copied().unwrap_or(0)
                });
            }
            self.drop_forgotten(&mut positions);
            advance_positions(&mut positions, &into[start..]);
            drop(positions);
            drop(guard);
        } else {
            drop(guard);
            // An application that only polls an idle topic lets the names pile up.
            self.drop_forgotten(
                &mut self
                    .shared
                    .positions
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            );
            self.actor.check()?;
        }
        // The thread stopped reading while the channel was full: there is room
        // again. Always wake (not only if asleep): it may be about to sleep.
        if self.shared.paused.load(SeqCst)
            && !self.shared.full(self.max_buffered, self.max_buffered_bytes)
        {
            self.actor.wake();
        }
        Ok(())
    }

    /// The next offset to deliver of each partition the application has
    /// been given records of, seeked or started at (sorted by partition):
    /// save them and pass them as [`ConsumerConfig::start_offsets`] to
    /// resume where this consumer left off.
    pub fn positions(&self) -> Vec<(String, u64)> {
        let mut positions = self
            .shared
            .positions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.drop_forgotten(&mut positions);
        let mut v: Vec<(String, u64)> =
            positions.iter().map(|(p, o)| (p.to_string(), *o)).collect();
        v.sort();
        v
    }

    /// Drops the positions the node thread forgot (not heard of for
    /// `forget_after`), except those of partitions this handle seeked: a
    /// seek racing the forgetting keeps its epoch and position. (Records of
    /// a forgotten partition still unpolled then, `forget_after` after they
    /// arrived, put its position back when polled, for good.)
    fn drop_forgotten(&self, positions: &mut HashMap<Arc<str>, u64>) {
        let mut gone = self
            .shared
            .forgotten
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if gone.is_empty() {
            return;
        }
        let epochs = self.shared.epochs.lock().unwrap_or_else(|p| p.into_inner());
        for p in gone.drain(..) {
            if !epochs.contains_key(&p) {
                positions.remove(&p);
            }
        }
    }

    /// Waits up to `timeout` for up to `max` records.
    pub fn poll_many(&self, max: usize, timeout: Duration) -> Result<Vec<Delivery>> {
        let deadline = Instant::now() + timeout;
        let mut v = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            self.poll_slice(max, left.min(Duration::from_millis(100)), &mut v)?;
            if v.is_empty() && self.group.is_some() && self.has_group_events() {
                // No callbacks here: the changes are let go (the records
                // they hold back come next; `poll_slice` and
                // `take_group_events` are the way to see them).
                self.take_group_events();
                continue;
            }
            if !v.is_empty() || left.is_zero() {
                return Ok(v);
            }
        }
    }

    /// Restarts `partition` (a producer address) at `offset`. Records of it
    /// not yet polled are discarded. A partition not seen yet starts there.
    pub fn seek(&self, partition: &str, offset: u64) -> Result<()> {
        // A closed (or dead) consumer records no position: that is said before
        // a name that is no address (as before groups), after one that cannot
        // be a name at all.
        check_name(
            &format!("seek: partition {partition:?} (a producer's address)"),
            partition,
        )?;
        self.actor.check()?;
        check_partition("seek", partition)?;
        self.new_epoch(partition, Some(offset));
        self.actor
            .send(Cmd::Seek(partition.as_bytes().to_vec(), offset))
    }

    /// A new seek epoch of `partition` (what `poll` has not returned of it
    /// is dropped), and its position moved to `offset` if given.
    fn new_epoch(&self, partition: &str, offset: Option<u64>) {
        let mut positions = self
            .shared
            .positions
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.shared.seeks.fetch_add(1, SeqCst);
        let mut e = self.shared.epochs.lock().unwrap_or_else(|p| p.into_inner());
        *e.entry(Arc::from(partition)).or_insert(0) += 1;
        if let Some(offset) = offset {
            positions.insert(Arc::from(partition), offset);
        }
    }

    pub fn check(&self) -> Result<()> {
        self.actor.check()
    }

    /// The group it is a member of (`ConsumerConfig::group`).
    pub fn group(&self) -> Option<&str> {
        self.group.as_deref()
    }

    /// A group member's partitions, `(topic, partition)` sorted, as of the
    /// node thread's last turn; empty without a group.
    pub fn assignment(&self) -> Vec<(String, String)> {
        let a = self.shared.assignment.lock();
        a.unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The live members of its group it counts, itself too (0 without a
    /// group).
    pub fn group_members(&self) -> usize {
        self.shared.members.load(SeqCst)
    }

    /// A group member commits, without waiting, the position of each of its
    /// partitions that `poll` moved since the last commit. Without a group
    /// it is an error.
    pub fn commit(&self) -> Result<()> {
        self.commit_async(None)
    }

    fn member(&self, what: &str) -> Result<()> {
        if self.group.is_none() {
            return Err(Error::Config(format!(
                "{what}: this consumer is in no group (ConsumerConfig::group, Python's group=)"
            )));
        }
        Ok(())
    }

    /// `offsets` (`(partition, next offset to read)`) as the member's
    /// partitions `(topic, partition)`: each must be one it reads.
    fn owned(&self, offsets: &[(String, u64)]) -> Result<Vec<(Part, u64)>> {
        let mine = self.assignment();
        let mut v = Vec::with_capacity(offsets.len());
        for (p, off) in offsets {
            check_partition("commit", p)?;
            let Some((t, _)) = mine.iter().find(|(_, q)| q == p) else {
                return Err(Error::Config(format!(
                    "commit: partition {p:?} is not one this member reads; it may commit only \
                     those assignment() lists (currently {})",
                    mine.len()
                )));
            };
            v.push(((t.as_bytes().to_vec(), p.as_bytes().to_vec()), *off));
        }
        Ok(v)
    }

    /// Commits `offsets` (`(partition, next offset to read)`, each of a
    /// partition this member reads), or with None what `poll` returned,
    /// without waiting.
    pub fn commit_async(&self, offsets: Option<&[(String, u64)]>) -> Result<()> {
        self.member("commit")?;
        let offsets = offsets.map(|o| self.owned(o)).transpose()?;
        self.actor.send(Cmd::Commit(offsets, None))
    }

    /// As [`Consumer::commit_async`] (with None, the position of every
    /// partition it reads), and waits until the stores confirm it: every
    /// store that said hello, or any 200 ms after the first. Fails with
    /// [`Error::CommitTimeout`] after `timeout`; `check` runs every 100 ms
    /// (Python's signal check).
    pub fn commit_sync<E: From<Error>>(
        &self,
        offsets: Option<&[(String, u64)]>,
        timeout: Duration,
        check: impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        self.member("commit")?;
        let offsets = offsets.map(|o| self.owned(o)).transpose()?;
        let (tx, rx) = mpsc::channel();
        self.actor.send(Cmd::Commit(offsets, Some(tx)))?;
        self.await_answer(&rx, "commit", timeout, check)?
            .map_err(E::from)
    }

    /// The group's last commits of `partitions`, as the stores answer
    /// (`None`: never committed). Fails with [`Error::CommitTimeout`]
    /// when no store answers within `timeout`.
    pub fn committed<E: From<Error>>(
        &self,
        partitions: &[String],
        timeout: Duration,
        check: impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<Vec<(String, Option<u64>)>, E> {
        self.member("committed")?;
        for p in partitions {
            check_partition("committed", p)?;
        }
        let (tx, rx) = mpsc::channel();
        self.actor.send(Cmd::Committed(tx))?;
        let found = self.await_answer(&rx, "committed", timeout, check)?;
        Ok(partitions
            .iter()
            .map(|p| {
                let hit = found
                    .iter()
                    .filter(|((_, q), _)| q.as_slice() == p.as_bytes())
                    .map(|(_, (_, off))| *off)
                    .max();
                (p.clone(), hit)
            })
            .collect())
    }

    /// Waits for the node thread's answer on `rx` up to `timeout`.
    fn await_answer<T, E: From<Error>>(
        &self,
        rx: &mpsc::Receiver<T>,
        what: &'static str,
        timeout: Duration,
        mut check: impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<T, E> {
        let start = Instant::now();
        loop {
            let left = timeout.saturating_sub(start.elapsed());
            match rx.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok(v) => return Ok(v),
                Err(RecvTimeoutError::Disconnected) => {
                    self.actor.check()?;
                    return Err(Error::Closed.into());
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            self.actor.check()?;
            if left.is_zero() {
                return Err(Error::CommitTimeout {
                    what,
                    waited: start.elapsed(),
                }
                .into());
            }
            check()?;
        }
    }

    /// Stops delivering `partitions` until [`Consumer::resume`]: what
    /// `poll` has not returned of them is dropped, and they resume where
    /// it stopped. Each must be one it reads: in a group, one of its
    /// assignment; else one it has a position of (records returned, a
    /// seek, `start_offsets`).
    pub fn pause(&self, partitions: &[String]) -> Result<()> {
        self.actor.check()?;
        let mine = self.assignment();
        let positions = self.positions();
        for p in partitions {
            check_partition("pause", p)?;
            let known = match self.group {
                Some(_) => mine.iter().any(|(_, q)| q == p),
                None => positions.iter().any(|(q, _)| q == p),
            };
            if !known {
                return Err(Error::Config(format!(
                    "pause: partition {p:?} is not one this consumer reads yet: {}",
                    if self.group.is_some() {
                        "a group member pauses what assignment() lists"
                    } else {
                        "pause what positions() lists (records returned, seeked or started at)"
                    }
                )));
            }
        }
        let mut paused = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        for p in partitions {
            if paused.insert(p.clone()) {
                self.new_epoch(p, None);
                self.actor.send(Cmd::Pause(p.as_bytes().to_vec()))?;
            }
        }
        Ok(())
    }

    /// Delivers `partitions` again from where `poll` stopped; those not
    /// paused (or no longer this member's) are left as they are.
    pub fn resume(&self, partitions: &[String]) -> Result<()> {
        self.actor.check()?;
        for p in partitions {
            check_partition("resume", p)?;
        }
        let mine = self.assignment();
        let mut paused = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        for p in partitions {
            if !paused.remove(p) {
                continue;
            }
            if self.group.is_some() && !mine.iter().any(|(_, q)| q == p) {
                // Given to another member meanwhile: nothing to resume.
                continue;
            }
            let at = self.positions().into_iter().find(|(q, _)| q == p);
            if let Some((_, offset)) = at {
                self.new_epoch(p, Some(offset));
                self.actor
                    .send(Cmd::Resume(p.as_bytes().to_vec(), offset))?;
            }
        }
        Ok(())
    }

    /// The partitions paused, sorted.
    pub fn paused(&self) -> Vec<String> {
        let paused = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        paused.iter().cloned().collect()
    }

    /// Whether a group member has changes of partitions the handle has not
    /// taken ([`Consumer::take_group_events`]): `poll` returns no record
    /// until it has (their callbacks come first).
    pub fn has_group_events(&self) -> bool {
        !self
            .shared
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// Puts back, first in line, the changes taken by
    /// [`Consumer::take_group_events`] whose callbacks did not run (one
    /// before them raised): the next `poll` calls them.
    pub fn requeue_group_events(&self, rest: Vec<GroupEvent>) {
        if rest.is_empty() {
            return;
        }
        let mut events = self.shared.events.lock().unwrap_or_else(|p| p.into_inner());
        let later = std::mem::replace(&mut *events, rest);
        events.extend(later);
    }

    /// A group member's changes of partitions since the last call, in
    /// order (revoked ones also leave the paused set).
    pub fn take_group_events(&self) -> Vec<GroupEvent> {
        let events =
            std::mem::take(&mut *self.shared.events.lock().unwrap_or_else(|p| p.into_inner()));
        let mut paused = self.paused.lock().unwrap_or_else(|p| p.into_inner());
        for e in &events {
            if let GroupEvent::Revoked(parts) = e {
                for (_, p) in parts {
                    paused.remove(p);
                }
            }
        }
        events
    }

    /// Test hook: records the node thread handed over that the application
    /// has not taken yet.
    #[doc(hidden)]
    pub fn buffered(&self) -> usize {
        self.shared.buffered.load(SeqCst)
    }

    /// Test hook: holds the lock over the positions (a poll that took
    /// records waits for it before it notes them), until the guard drops.
    #[doc(hidden)]
    pub fn hold_positions(&self) -> impl Drop + '_ {
        self.shared
            .positions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Connects to one more peer's XPUB endpoint (static peers added later).
    pub fn connect(&self, endpoint: &str) -> Result<()> {
        crate::node::config::check_peer(endpoint)?;
        self.actor.send(Cmd::Connect(endpoint.to_string()))
    }

    pub fn close(&self) -> Result<()> {
        self.actor.close()
    }
}

/// Refuses, for call `what`, a name that is no partition (a producer's
/// address).
fn check_partition(what: &str, partition: &str) -> Result<()> {
    check_name(
        &format!("{what}: partition {partition:?} (a producer's address)"),
        partition,
    )?;
    if !is_address(partition) {
        return Err(Error::Config(format!(
            "{what}: {partition:?} is not a partition: a dafka partition is named by its \
             producer's address, 32 hex characters (a record's partition, positions(), \
             `dafka offsets TOPIC`); there are no numbered partitions"
        )));
    }
    Ok(())
}

/// Whether `name` can be a partition: a producer's address, 32 hex digits
/// (this project's, seeded ones and the C reference's alike).
pub fn is_address(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Notes where `given` leaves each partition (records of a partition
/// come in runs: one map update per run).
fn advance_positions(positions: &mut HashMap<Arc<str>, u64>, given: &[Delivery]) {
    let mut run: Option<(&Arc<str>, u64)> = None;
    for d in given {
        match &mut run {
            Some((p, next)) if Arc::ptr_eq(p, &d.partition) => *next = d.offset + 1,
            _ => {
                if let Some((p, next)) = run {
                    positions.insert(p.clone(), next);
                }
                run = Some((&d.partition, d.offset + 1));
            }
        }
    }
    if let Some((p, next)) = run {
        positions.insert(p.clone(), next);
    }
}
