//! The consumer's protocol decisions as a pure state machine, no sockets:
//! [`ConsumerState`] tracks each partition (next offset to deliver,
//! out-of-order records held past a gap, the FETCH in flight and its retry
//! deadline) and decides what to deliver and what to send.
//!
//! Where each decision is made:
//! - what each message and subscription that arrives is, and what to do
//!   with it: `state/receive.rs` ([`ConsumerState::on_message`],
//!   [`ConsumerState::on_subscription`]);
//! - a record in order, a duplicate, or past a gap (held, the gap
//!   FETCHed): [`ConsumerState::on_record`];
//! - the FETCH of a gap: `ConsumerState::maybe_fetch` (called by
//!   [`ConsumerState::on_record`] and [`ConsumerState::on_head`] when they
//!   see the partition is behind what exists);
//! - its retry, back-off and giving it up (records lost, partition stalled):
//!   [`ConsumerState::on_timer`], through `Part::retry_or_skip`;
//! - where a partition starts (`offset_reset`, `start_offsets`, a HEAD):
//!   [`ConsumerState::on_head`] and [`ConsumerState::seek`];
//! - idle partitions kept only by position, then forgotten:
//!   [`ConsumerState::sweep_idle`] and [`ConsumerState::forget_idle`];
//! - a group member's partitions (only those its group gave it):
//!   `state/gate.rs` ([`ConsumerState::start_owned`],
//!   [`ConsumerState::release`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

use crate::node::config::{ConsumerConfig, OffsetReset};
use crate::node::held::Held;
use crate::node::out::{Backoff, Out};
use crate::wire::{Head, Record};

/// One record handed to the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub topic: Arc<str>,
    pub partition: Arc<str>,
    pub offset: u64,
    /// The record's body: its metadata, then its value ([`crate::meta`]).
    pub body: Vec<u8>,
    /// Seek generation of the partition when delivered (stale ones are skipped).
    pub epoch: u64,
}

impl Delivery {
    /// The record's metadata and value (a body the consumer checked or
    /// made: it parses).
    pub fn parts(&self) -> (crate::meta::MetaRef<'_>, &[u8]) {
        match crate::meta::split(&self.body) {
            Ok(p) => p,
            Err(e) => unreachable!("a delivered body does not parse: {e}"),
        }
    }

    /// The record's value.
    pub fn value(&self) -> &[u8] {
        self.parts().1
    }
}

#[derive(Debug)]
struct Part {
    /// The partition's name as it keys [`ConsumerState::parts`] (shared with
    /// the retry timers).
    key: Arc<[u8]>,
    topic: Arc<str>,
    /// Its topic's place in [`ConsumerState::topics`].
    topic_ix: u32,
    name: Arc<str>,
    next: u64,
    /// Highest offset known to exist + 1 (from RECORDs and HEADs).
    known: u64,
    /// FETCHes cover [next, requested) until `retry_at`.
    requested: u64,
    retry_at: Option<Instant>,
    /// Records past a gap (at most `max_pending` and [`MAX_HELD_BYTES`],
    /// or one record's bytes if larger).
    held: Held,
    epoch: u64,
    /// A DIRECT-RECORD beyond `next` arrived in this FETCH round (since the
    /// last retry): a store (or the producer) answered from past the gap, so
    /// it lacks the records before (retention deleted them?).
    answered_beyond: bool,
    /// FETCH rounds in a row, up to the last retry, in which a node answered
    /// from past the gap. Evidence must come afresh in every round: a late
    /// answer to a FETCH from before a seek, or the tail of an answer whose
    /// start a full queue dropped, counts for one round only.
    beyond_rounds: u32,
    /// FETCH retries since `next` last moved, and `next` then.
    stalled: u32,
    stall_mark: u64,
    /// A partition that no node answered in `give_up_fetches` tries is asked
    /// less and less often (a consumer of many partitions whose stores are
    /// away would otherwise send each partition's FETCH every `fetch_retry`,
    /// forever), until a store says hello or records arrive.
    backoff: Backoff,
    /// When a RECORD, HEAD or seek last concerned it.
    touched: Instant,
    /// When a record of it last arrived live (from its producer).
    live_at: Option<Instant>,
    /// A DIRECT-HEAD showed records past `next` while they were arriving
    /// live: no FETCH until the live stream stops bringing them
    /// ([`ConsumerState::on_head`]); `next` when the wait began.
    defer: Option<u64>,
}

/// Where a partition not (or no longer) followed starts when it is heard of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Start {
    next: u64,
    /// Its seek epoch: > 0 once the application seeked it.
    epoch: u64,
    /// Its topic's place in [`ConsumerState::topics`], for a partition that
    /// went idle (a seek brings it back); unknown for `start_offsets`.
    topic: Option<u32>,
    /// Since when it has not been heard of.
    since: Instant,
}

/// Pure consumer protocol state.
#[derive(Debug)]
pub struct ConsumerState {
    address: Vec<u8>,
    topics: Vec<Vec<u8>>,
    reset: OffsetReset,
    retry: Duration,
    max_fetch: u32,
    max_held: usize,
    give_up_fetches: u32,
    idle_after: Duration,
    forget_after: Option<Duration>,
    parts: FxHashMap<Vec<u8>, Part>,
    /// Bytes of records held past gaps, every partition's (bounded by
    /// [`MAX_HELD_TOTAL_BYTES`]).
    held_total: Arc<std::sync::atomic::AtomicUsize>,
    /// FETCH retry deadlines, earliest first. An entry whose partition's
    /// `retry_at` is no longer its time is stale and dropped when it comes
    /// up, so neither the loop's deadline nor a timer visits every partition.
    timers: BinaryHeap<Reverse<(Instant, Arc<[u8]>)>>,
    /// Partitions that reached `give_up_fetches` retries: the only ones
    /// [`ConsumerState::count_stalled`] and a STORE-HELLO look at.
    stall_watch: FxHashSet<Arc<[u8]>>,
    /// Where partitions not seen yet start, and their seek epoch: from
    /// [`ConsumerConfig::start_offsets`], seeks that came before the
    /// partition's first RECORD or HEAD, and partitions idle for
    /// `idle_after` (they go on from there when heard of again). Entries
    /// never seeked are forgotten after `forget_after`.
    starts: FxHashMap<Vec<u8>, Start>,
    /// When to look for idle partitions (or positions to forget) next.
    next_sweep: Option<Instant>,
    /// Counters: duplicates dropped, gaps seen, FETCHes sent, offsets skipped
    /// because no node holds them any more.
    pub duplicates: u64,
    pub gaps: u64,
    pub fetches: u64,
    pub lost: u64,
    /// Positions forgotten: not heard of for `forget_after`.
    pub forgotten: u64,
    /// Partitions whose gap no node answered in `give_up_fetches` tries: they
    /// wait for a store that holds the records (as of the last timer).
    pub stalled: u64,
    /// A body made for a record that came without metadata, reused.
    body: Vec<u8>,
    /// A group member's: the partitions its group gave it (`state/gate.rs`).
    gate: Option<gate::Gate>,
    /// Partitions the application paused: nothing of them is taken until
    /// it resumes them (`state/gate.rs`).
    paused: FxHashSet<Vec<u8>>,
}

/// Bytes of out-of-order records a consumer holds per partition while it
/// fetches a gap (as a store's `max_held_bytes`); past it, and past
/// `max_pending` records, they are fetched again once the gap is filled.
pub const MAX_HELD_BYTES: usize = 64 << 20;

/// Bytes of out-of-order records a consumer holds over all its partitions:
/// many partitions with a gap each would otherwise hold `MAX_HELD_BYTES`
/// apiece. Past it, each partition still holds the one record nearest its gap.
pub const MAX_HELD_TOTAL_BYTES: usize = 1 << 30;

pub(super) fn lossy(b: &[u8]) -> Arc<str> {
    Arc::from(String::from_utf8_lossy(b).as_ref())
}

impl Part {
    /// Delivers the held records that follow `next` in order; `next` moved.
    fn deliver_held(&mut self, deliver: &mut Vec<Delivery>) {
        while let Some(v) = self.held.remove(self.next) {
            deliver.push(Delivery {
                topic: self.topic.clone(),
                partition: self.name.clone(),
                offset: self.next,
                body: v,
                epoch: self.epoch,
            });
            self.next += 1;
        }
        self.forget_stall();
    }

    /// `next` moved (or was set): no FETCH retries or evidence count yet.
    fn forget_stall(&mut self) {
        self.answered_beyond = false;
        self.beyond_rounds = 0;
        self.stalled = 0;
        self.backoff = Backoff::default();
        self.stall_mark = self.next;
    }

    /// A FETCH retry is due. After `give_up` rounds in a row answered from
    /// past the gap and without progress, the records of the gap are gone
    /// from every node that answers (retention deleted them): skip to the
    /// first record held, as Kafka's `earliest` reset starts at the log's
    /// start. Returns the offsets skipped.
    fn retry_or_skip(&mut self, give_up: u32, deliver: &mut Vec<Delivery>) -> u64 {
        if self.next != self.stall_mark {
            self.stall_mark = self.next;
            self.stalled = 0;
            self.beyond_rounds = 0;
        }
        self.stalled += 1;
        if std::mem::take(&mut self.answered_beyond) {
            self.beyond_rounds += 1;
        } else {
            self.beyond_rounds = 0;
        }
        let answered_beyond = self.beyond_rounds > 0;
        if self.stalled == give_up && !answered_beyond {
            tracing::warn!(
                "partition {} of {}: no node answered a FETCH for offsets {}.. in {give_up} \
                 tries; waiting for a store that holds them (are the stores reachable through \
                 the towers or peers?)",
                self.name,
                self.topic,
                self.next
            );
        }
        if self.stalled >= give_up && !answered_beyond {
            self.backoff = self.backoff.doubled();
        }
        if self.beyond_rounds < give_up {
            return 0;
        }
        let Some(first) = self.held.first() else {
            return 0;
        };
        let lost = first - self.next;
        tracing::warn!(
            "partition {} of {}: offsets {}..{} are held by no node that answers (deleted by \
             retention?); skipping to {first}",
            self.name,
            self.topic,
            self.next,
            first
        );
        self.next = first;
        self.deliver_held(deliver);
        lost
    }
}

impl ConsumerState {
    pub fn new(address: &[u8], topics: &[&[u8]], cfg: &ConsumerConfig) -> Self {
        let now = Instant::now();
        let starts: FxHashMap<Vec<u8>, Start> = cfg
            .start_offsets
            .iter()
            .map(|(p, off)| {
                let start = Start {
                    next: *off,
                    epoch: 0,
                    topic: None,
                    since: now,
                };
                (p.as_bytes().to_vec(), start)
            })
            .collect();
        let forgets = cfg.forget_after.is_some() && !starts.is_empty();
        Self {
            address: address.to_vec(),
            topics: topics.iter().map(|t| t.to_vec()).collect(),
            // Resuming from saved positions: a partition they do not name
            // was born while the consumer was away, and starts at its first
            // record whatever `offset_reset` says.
            reset: if cfg.start_offsets.is_empty() {
                cfg.offset_reset
            } else {
                OffsetReset::Earliest
            },
            retry: cfg.fetch_retry,
            max_fetch: cfg.max_fetch,
            max_held: cfg.max_pending,
            give_up_fetches: cfg.give_up_fetches,
            idle_after: cfg.idle_after,
            forget_after: cfg.forget_after,
            parts: FxHashMap::default(),
            held_total: Arc::default(),
            timers: BinaryHeap::new(),
            stall_watch: FxHashSet::default(),
            starts,
            next_sweep: forgets.then(|| now + cfg.idle_after),
            duplicates: 0,
            gaps: 0,
            fetches: 0,
            lost: 0,
            forgotten: 0,
            stalled: 0,
            body: Vec::new(),
            gate: cfg.group.as_ref().map(|_| gate::Gate::default()),
            paused: FxHashSet::default(),
        }
    }

    fn subscribed(&self, topic: &[u8]) -> bool {
        self.topics.iter().any(|t| t == topic)
    }

    fn part(
        &mut self,
        partition: &[u8],
        subject: &[u8],
        first: Option<u64>,
        now: Instant,
    ) -> &mut Part {
        let reset = self.reset;
        // Look up without building a key: a key is made once per partition.
        if !self.parts.contains_key(partition) {
            self.add_part(partition, subject, first, reset, now);
        }
        let p = self.parts.get_mut(partition).expect("added above");
        p.touched = now;
        p
    }

    fn add_part(
        &mut self,
        partition: &[u8],
        subject: &[u8],
        first: Option<u64>,
        reset: OffsetReset,
        now: Instant,
    ) {
        let start = self.starts.remove(partition);
        self.next_sweep.get_or_insert(now + self.idle_after);
        let topic_ix = self.topics.iter().position(|t| t == subject).unwrap_or(0) as u32;
        let held_total = self.held_total.clone();
        self.parts.entry(partition.to_vec()).or_insert_with(|| {
            let (next, epoch) = match (start, reset, first) {
                (Some(start), _, _) => (start.next, start.epoch),
                (None, OffsetReset::Earliest, _) => (0, 0),
                (None, OffsetReset::Latest, Some(seq)) => (seq, 0),
                (None, OffsetReset::Latest, None) => (0, 0),
            };
            Part {
                key: Arc::from(partition),
                topic: lossy(subject),
                topic_ix,
                name: lossy(partition),
                next,
                known: next,
                requested: next,
                retry_at: None,
                held: Held::counted(held_total),
                epoch,
                answered_beyond: false,
                beyond_rounds: 0,
                stalled: 0,
                stall_mark: next,
                backoff: Backoff::default(),
                touched: now,
                live_at: None,
                defer: None,
            }
        });
    }

    /// When [`ConsumerState::sweep_idle`] is due.
    pub fn next_sweep(&self) -> Option<Instant> {
        self.next_sweep
    }

    /// Keeps only the position of each partition caught up (nothing missing,
    /// held or in flight) and not heard of for `idle_after`; returns how
    /// many. A RECORD or HEAD of one brings it back where it was.
    pub fn sweep_idle(&mut self, now: Instant) -> usize {
        let before = self.parts.len();
        let idle_after = self.idle_after;
        let (starts, watch) = (&mut self.starts, &self.stall_watch);
        self.parts.retain(|k, p| {
            let idle = p.next >= p.known
                && p.held.is_empty()
                && p.retry_at.is_none()
                && p.requested <= p.next
                && !watch.contains(&*p.key)
                && now.saturating_duration_since(p.touched) >= idle_after;
            if idle {
                let start = Start {
                    next: p.next,
                    epoch: p.epoch,
                    topic: Some(p.topic_ix),
                    since: p.touched,
                };
                starts.insert(k.clone(), start);
            }
            !idle
        });
        let forgets = self.forget_after.is_some() && !self.starts.is_empty();
        self.next_sweep = (!self.parts.is_empty() || forgets).then(|| now + idle_after / 2);
        before - self.parts.len()
    }

    /// Forgets the positions of partitions not heard of for `forget_after`
    /// (idle ones, and `start_offsets` never heard of), unless the
    /// application seeked them: heard of again, they start as new ones
    /// (`offset_reset`). Returns their names. Called with the idle sweep.
    pub fn forget_idle(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let Some(after) = self.forget_after else {
            return Vec::new();
        };
        let mut gone = Vec::new();
        self.starts.retain(|k, s| {
            let keep = s.epoch > 0 || now.saturating_duration_since(s.since) < after;
            if !keep {
                gone.push(k.clone());
            }
            keep
        });
        self.forgotten += gone.len() as u64;
        gone
    }

    /// Partitions whose protocol state is kept (not idle).
    pub fn active_partitions(&self) -> usize {
        self.parts.len()
    }

    /// A RECORD (or DIRECT-RECORD, `direct`): delivers what is now in order,
    /// buffers what is ahead, and FETCHes a gap.
    pub fn on_record(
        &mut self,
        r: &Record<'_>,
        direct: bool,
        now: Instant,
        deliver: &mut Vec<Delivery>,
        out: &mut Vec<Out>,
    ) {
        let ok_key = if direct {
            r.topic == self.address.as_slice()
        } else {
            r.topic == r.subject
        };
        if !ok_key || !self.subscribed(r.subject) {
            return;
        }
        if !self.admits(r.address, r.subject, r.sequence.saturating_add(1)) {
            return;
        }
        if direct && !self.parts.contains_key(r.address) && self.reset == OffsetReset::Latest {
            // A DIRECT-RECORD for a partition we never asked for.
            return;
        }
        let (max_held, seq) = (self.max_held, r.sequence);
        let p = self.part(r.address, r.subject, Some(seq), now);
        p.known = p.known.max(seq.saturating_add(1));
        if !direct {
            p.live_at = Some(now);
        }
        if direct && seq > p.next && !p.answered_beyond {
            // An answer from past the gap, in this round (a record already
            // held too: a store answers each retry from the same place).
            p.answered_beyond = true;
            if p.beyond_rounds == 0 {
                // Retries go at `fetch_retry` again.
                p.backoff = Backoff::default();
            }
        }
        if seq < p.next || p.held.contains(seq) {
            self.duplicates += 1;
            return;
        }
        if seq == p.next {
            deliver.push(Delivery {
                topic: p.topic.clone(),
                partition: p.name.clone(),
                offset: seq,
                body: r.content.to_vec(),
                epoch: p.epoch,
            });
            p.next += 1;
            p.deliver_held(deliver);
        } else {
            let new_gap = p.held.is_empty() && p.requested <= p.next;
            // Past a bound, those farthest from the gap are fetched again
            // later (`retry_or_skip` skips to the first held). One is always
            // taken, however large: it may be all that follows the gap.
            let bounds = (max_held, MAX_HELD_BYTES, MAX_HELD_TOTAL_BYTES);
            p.held.hold_bounded(seq, r.content, bounds, true);
            self.gaps += u64::from(new_gap);
        }
        self.maybe_fetch(r.address, now, out);
    }

    /// HEAD or DIRECT-HEAD: learn the partition's last offset; FETCH a gap.
    ///
    /// A DIRECT-HEAD comes from a store (or the producer) answering GET-HEADS
    /// on a connection of its own, and can overtake the records the producer
    /// is sending us live: a store that keeps up holds what a busy consumer
    /// has not read yet. While records of the partition arrive live, the gap
    /// it shows is not fetched; it is once the live stream stops bringing
    /// them for a `fetch_retry` (or at once when a record arrives past a gap).
    /// A HEAD from the producer travels with its records, after them: a gap
    /// it shows is real.
    pub fn on_head(&mut self, h: &Head<'_>, direct: bool, now: Instant, out: &mut Vec<Out>) {
        let ok_key = if direct {
            h.topic == self.address.as_slice()
        } else {
            h.topic == h.subject
        };
        if !ok_key || !self.subscribed(h.subject) {
            return;
        }
        if !self.admits(h.address, h.subject, h.sequence.saturating_add(1)) {
            return;
        }
        let (seq, retry) = (h.sequence, self.retry);
        let p = self.part(h.address, h.subject, Some(seq.saturating_add(1)), now);
        let known = seq.saturating_add(1);
        let mut new_gap = false;
        if known > p.known {
            new_gap = p.held.is_empty() && p.requested <= p.next && p.known <= p.next;
            p.known = known;
        }
        let live = p
            .live_at
            .is_some_and(|t| now.saturating_duration_since(t) < retry);
        let wait = direct && live && p.next < p.known && p.requested <= p.next;
        let timer = if wait && p.retry_at.is_none() {
            let at = now + retry;
            p.defer = Some(p.next);
            p.retry_at = Some(at);
            Some(Reverse((at, p.key.clone())))
        } else {
            None
        };
        self.gaps += u64::from(new_gap);
        if let Some(t) = timer {
            self.timers.push(t);
            return;
        }
        self.maybe_fetch(h.address, now, out);
    }

    /// Sends a FETCH for the first missing range beyond what is requested.
    /// FETCHes are pipelined: once half of the window in flight arrived, the
    /// next window is asked for, so a long catch-up does not wait a round
    /// trip per window. At most about 1.5 windows are outstanding.
    fn maybe_fetch(&mut self, partition: &[u8], now: Instant, out: &mut Vec<Out>) {
        let (retry, max_fetch) = (self.retry, self.max_fetch);
        let Some(p) = self.parts.get_mut(partition) else {
            return;
        };
        if p.defer.is_some() {
            if p.held.is_empty() && p.next < p.known {
                return; // waiting for the live records (`on_head`)
            }
            // Caught up, or a record came past a gap: the wait is over.
            p.defer = None;
            p.retry_at = None;
        }
        let from = if p.requested > p.next {
            // In flight; the retry timer covers it. Pipeline the next window?
            if p.requested - p.next > u64::from(max_fetch / 2) || p.requested >= p.known {
                return;
            }
            p.requested
        } else if p.next >= p.known {
            p.retry_at = None;
            return;
        } else {
            p.next
        };
        let end = p
            .held
            .first_from(from)
            .unwrap_or(p.known)
            .min(from.saturating_add(u64::from(max_fetch)));
        if end <= from {
            return; // held records follow what is in flight
        }
        let count = u32::try_from(end - from).unwrap_or(max_fetch);
        p.requested = end;
        let at = now + p.backoff.interval(retry);
        p.retry_at = Some(at);
        self.timers.push(Reverse((at, p.key.clone())));
        self.fetches += 1;
        out.push(Out::Fetch {
            partition: partition.to_vec(),
            topic: p.topic.as_bytes().to_vec(),
            sequence: from,
            count,
        });
    }

    /// Repeats FETCHes whose answers did not (all) arrive in time; delivers
    /// what follows a gap that no node holds any more (`give_up_fetches`).
    pub fn on_timer(&mut self, now: Instant, deliver: &mut Vec<Delivery>, out: &mut Vec<Out>) {
        let give_up = self.give_up_fetches;
        let mut lost = 0;
        let mut due = Vec::new();
        while self.timers.peek().is_some_and(|Reverse((t, _))| *t <= now) {
            let Some(Reverse((t, k))) = self.timers.pop() else {
                break;
            };
            let Some(p) = self.parts.get_mut(&*k) else {
                continue;
            };
            if p.retry_at != Some(t) {
                continue; // stale: the FETCH was answered or re-sent since
            }
            p.retry_at = None;
            if let Some(mark) = p.defer.take() {
                // Waiting for live records (`on_head`): again while they
                // keep coming, else FETCH what is still missing.
                let flowing = p.next > mark
                    && p.live_at
                        .is_some_and(|l| now.saturating_duration_since(l) < self.retry);
                if flowing && p.next < p.known {
                    let at = now + self.retry;
                    p.defer = Some(p.next);
                    p.retry_at = Some(at);
                    self.timers.push(Reverse((at, k.clone())));
                } else {
                    due.push(k);
                }
                continue;
            }
            lost += p.retry_or_skip(give_up, deliver);
            p.requested = p.next;
            if p.stalled >= give_up {
                self.stall_watch.insert(k.clone());
            }
            due.push(k);
        }
        self.lost += lost;
        for k in due {
            self.maybe_fetch(&k, now, out);
        }
        self.count_stalled();
    }

    /// Recounts [`ConsumerState::stalled`] (the partitions that reached
    /// `give_up_fetches` retries: call it at timers, and after messages only
    /// while some partition is stalled).
    pub fn count_stalled(&mut self) {
        let (give_up, parts) = (self.give_up_fetches, &self.parts);
        self.stall_watch
            .retain(|k| parts.get(&**k).is_some_and(|p| p.stalled >= give_up));
        self.stalled = self
            .stall_watch
            .iter()
            .filter_map(|k| parts.get(&**k))
            .filter(|p| p.beyond_rounds == 0 && p.retry_at.is_some())
            .count() as u64;
    }

    /// The earliest FETCH retry deadline (drops the stale timers before it).
    pub fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(Reverse((t, k))) = self.timers.peek() {
            if self.parts.get(&**k).is_some_and(|p| p.retry_at == Some(*t)) {
                return Some(*t);
            }
            self.timers.pop();
        }
        None
    }

    /// Moves `partition` to `offset`: drops buffered records, FETCHes from
    /// there. A partition not seen yet starts there when it is. Returns the
    /// partition's new epoch (the handle counts seeks per partition alike).
    pub fn seek(&mut self, partition: &[u8], offset: u64, now: Instant, out: &mut Vec<Out>) -> u64 {
        let idle_topic = if self.parts.contains_key(partition) {
            None
        } else {
            self.starts.get(partition).and_then(|s| s.topic)
        };
        if let Some(ix) = idle_topic {
            // Gone idle: brought back where it was, so that what stores hold
            // from `offset` up to there is FETCHed (no HEAD may come again).
            let topic = self.topics[ix as usize].clone();
            self.add_part(partition, &topic, None, self.reset, now);
        }
        let Some(p) = self.parts.get_mut(partition) else {
            let start = self.starts.entry(partition.to_vec()).or_insert(Start {
                next: 0,
                epoch: 0,
                topic: None,
                since: now,
            });
            start.next = offset;
            start.epoch += 1;
            start.since = now;
            return start.epoch;
        };
        p.next = offset;
        p.requested = offset;
        p.touched = now;
        p.held.clear();
        p.retry_at = None;
        p.defer = None;
        p.epoch += 1;
        // Evidence of a deleted gap was about the old position.
        p.forget_stall();
        let epoch = p.epoch;
        self.maybe_fetch(partition, now, out);
        epoch
    }

    /// The next offset to deliver of each known partition.
    pub fn positions(&self) -> Vec<(Arc<str>, u64)> {
        self.parts
            .values()
            .map(|p| (p.name.clone(), p.next))
            .collect()
    }
}

mod gate;
mod receive;

#[cfg(test)]
mod tests;
