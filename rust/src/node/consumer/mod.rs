//! The consumer. The pure [`ConsumerState`] tracks each partition (next offset
//! to deliver, out-of-order records, the FETCH in flight and its retry
//! deadline) and decides what to deliver and what to send; [`Consumer`] is the
//! handle, receiving delivered records over a channel.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

use crossbeam_utils::CachePadded;

use crate::error::{Error, Result};
use crate::node::actor::{Actor, Inbox, Ready};
use crate::node::config::{check_name, ConsumerConfig, OffsetReset};
use crate::node::held::Held;
use crate::node::out::{poll_timeout, Backoff, Out};
use crate::node::socket::{new_address, Core, Frames};
use crate::node::stats::Stats;
use crate::wire::{decode, Head, Message, NodeType, Record, StoreHello, Subscription};

/// One record handed to the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub topic: Arc<str>,
    pub partition: Arc<str>,
    pub offset: u64,
    pub value: Vec<u8>,
    /// Seek generation of the partition when delivered (stale ones are skipped).
    pub epoch: u64,
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
    /// Records past a gap (at most `max_pending` and [`MAX_PENDING_BYTES`],
    /// or one record's bytes if larger).
    pending: Held,
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
    max_pending: usize,
    give_up_fetches: u32,
    idle_after: Duration,
    forget_after: Option<Duration>,
    parts: FxHashMap<Vec<u8>, Part>,
    /// Bytes of records held past gaps, every partition's (bounded by
    /// [`MAX_PENDING_TOTAL_BYTES`]).
    pending_total: Arc<std::sync::atomic::AtomicUsize>,
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
}

/// Bytes of out-of-order records a consumer holds per partition while it
/// fetches a gap (as a store's `max_held_bytes`); past it, and past
/// `max_pending` records, they are fetched again once the gap is filled.
pub const MAX_PENDING_BYTES: usize = 64 << 20;

/// Bytes of out-of-order records a consumer holds over all its partitions:
/// many partitions with a gap each would otherwise hold `MAX_PENDING_BYTES`
/// apiece. Past it, each partition still holds the one record nearest its gap.
pub const MAX_PENDING_TOTAL_BYTES: usize = 1 << 30;

fn lossy(b: &[u8]) -> Arc<str> {
    Arc::from(String::from_utf8_lossy(b).as_ref())
}

impl Part {
    /// Delivers the held records that follow `next` in order; `next` moved.
    fn deliver_pending(&mut self, deliver: &mut Vec<Delivery>) {
        while let Some(v) = self.pending.remove(self.next) {
            deliver.push(Delivery {
                topic: self.topic.clone(),
                partition: self.name.clone(),
                offset: self.next,
                value: v,
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
        let Some(first) = self.pending.first() else {
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
        self.deliver_pending(deliver);
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
            reset: cfg.offset_reset,
            retry: cfg.fetch_retry,
            max_fetch: cfg.max_fetch,
            max_pending: cfg.max_pending,
            give_up_fetches: cfg.give_up_fetches,
            idle_after: cfg.idle_after,
            forget_after: cfg.forget_after,
            parts: FxHashMap::default(),
            pending_total: Arc::default(),
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
        }
    }

    fn subscribed(&self, topic: &[u8]) -> bool {
        self.topics.iter().any(|t| t == topic)
    }

    /// GET-HEADS for every topic (on subscribe, and whenever a new peer that
    /// answers GET-HEADS for a topic subscribes to us).
    pub fn get_heads(&self) -> Vec<Out> {
        self.topics
            .iter()
            .map(|t| Out::GetHeads { topic: t.clone() })
            .collect()
    }

    /// GET-HEADS for one topic if it is ours; for every topic when `topic` is
    /// empty (a store subscribes to all GET-HEADS with the bare `G` prefix).
    pub fn get_heads_for(&self, topic: &[u8]) -> Vec<Out> {
        if topic.is_empty() {
            self.get_heads()
        } else if self.subscribed(topic) {
            vec![Out::GetHeads {
                topic: topic.to_vec(),
            }]
        } else {
            Vec::new()
        }
    }

    /// STORE-HELLO addressed to us: answer CONSUMER-HELLO with our topics. A
    /// store (re)appeared: stalled partitions that backed off FETCH again now.
    pub fn on_store_hello(&mut self, s: &StoreHello<'_>, now: Instant) -> Vec<Out> {
        if s.topic != self.address.as_slice() {
            return Vec::new();
        }
        for k in &self.stall_watch {
            if let Some(p) = self.parts.get_mut(&**k) {
                if p.backoff.is_on() && p.retry_at.is_some() {
                    p.backoff = Backoff::default();
                    p.retry_at = Some(now);
                    self.timers.push(Reverse((now, k.clone())));
                }
            }
        }
        vec![Out::ConsumerHello {
            to: s.address.to_vec(),
            subjects: self.topics.clone(),
        }]
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
        let pending_total = self.pending_total.clone();
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
                pending: Held::counted(pending_total),
                epoch,
                answered_beyond: false,
                beyond_rounds: 0,
                stalled: 0,
                stall_mark: next,
                backoff: Backoff::default(),
                touched: now,
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
                && p.pending.is_empty()
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
        if direct && !self.parts.contains_key(r.address) && self.reset == OffsetReset::Latest {
            // A DIRECT-RECORD for a partition we never asked for.
            return;
        }
        let (max_pending, seq) = (self.max_pending, r.sequence);
        let p = self.part(r.address, r.subject, Some(seq), now);
        p.known = p.known.max(seq.saturating_add(1));
        if direct && seq > p.next && !p.answered_beyond {
            // An answer from past the gap, in this round (a record already
            // held too: a store answers each retry from the same place).
            p.answered_beyond = true;
            if p.beyond_rounds == 0 {
                // Retries go at `fetch_retry` again.
                p.backoff = Backoff::default();
            }
        }
        if seq < p.next || p.pending.contains(seq) {
            self.duplicates += 1;
            return;
        }
        if seq == p.next {
            deliver.push(Delivery {
                topic: p.topic.clone(),
                partition: p.name.clone(),
                offset: seq,
                value: r.content.to_vec(),
                epoch: p.epoch,
            });
            p.next += 1;
            p.deliver_pending(deliver);
        } else {
            let new_gap = p.pending.is_empty() && p.requested <= p.next;
            // Past a bound, those farthest from the gap are fetched again
            // later (`retry_or_skip` skips to the first held). One is always
            // taken, however large: it may be all that follows the gap.
            let bounds = (max_pending, MAX_PENDING_BYTES, MAX_PENDING_TOTAL_BYTES);
            p.pending.hold_bounded(seq, r.content, bounds, true);
            self.gaps += u64::from(new_gap);
        }
        self.maybe_fetch(r.address, now, out);
    }

    /// HEAD or DIRECT-HEAD: learn the partition's last offset; FETCH a gap.
    pub fn on_head(&mut self, h: &Head<'_>, direct: bool, now: Instant, out: &mut Vec<Out>) {
        let ok_key = if direct {
            h.topic == self.address.as_slice()
        } else {
            h.topic == h.subject
        };
        if !ok_key || !self.subscribed(h.subject) {
            return;
        }
        let seq = h.sequence;
        let p = self.part(h.address, h.subject, Some(seq.saturating_add(1)), now);
        let known = seq.saturating_add(1);
        let mut new_gap = false;
        if known > p.known {
            new_gap = p.pending.is_empty() && p.requested <= p.next && p.known <= p.next;
            p.known = known;
        }
        self.gaps += u64::from(new_gap);
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
            .pending
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
            subject: p.topic.as_bytes().to_vec(),
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
        p.pending.clear();
        p.retry_at = None;
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

enum Cmd {
    Seek(Vec<u8>, u64),
    Connect(String),
}

/// The counters (`stats`, written by the node thread at every turn) have
/// cache lines of their own, apart from the queue's counts that the
/// application updates at every poll.
#[derive(Debug, Default)]
struct ConsumerShared {
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
}

impl ConsumerShared {
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
    /// The next offset of each partition the application has been given
    /// records of (or seeked, or started at): where a new consumer resumes.
    positions: Mutex<HashMap<Arc<str>, u64>>,
}

impl Consumer {
    /// Starts the node thread; returns once the XPUB is bound.
    pub fn new(topics: &[String], cfg: ConsumerConfig) -> Result<Self> {
        cfg.validate()?;
        for t in topics {
            check_name(&format!("topic {t:?}"), t)?;
        }
        let address = new_address();
        let shared = Arc::new(ConsumerShared::default());
        let (tx, rx) = mpsc::channel();
        let ctx = zmq::Context::new();
        let (a, sh, ts) = (address.clone(), shared.clone(), topics.to_vec());
        let (max_buffered, max_buffered_bytes) = (cfg.max_buffered, cfg.max_buffered_bytes);
        let positions = cfg
            .start_offsets
            .iter()
            .map(|(p, off)| (Arc::from(p.as_str()), *off))
            .collect();
        let (actor, endpoint) =
            Actor::spawn("dafka-consumer", &ctx.clone(), move |inbox, ready| {
                run(inbox, ready, &ctx, cfg, &ts, &a, &sh, tx)
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
            positions: Mutex::new(positions),
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
        // The channel's lock is held until the positions are noted: another
        // thread polling meanwhile would take later records, note their
        // positions first, and have them moved back by these.
        let got = into.len() - start;
        if got > 0 {
            let bytes = into[start..].iter().map(|d| d.value.len()).sum();
            self.shared.buffered_bytes.fetch_sub(bytes, SeqCst);
            self.shared.buffered.fetch_sub(got, SeqCst);
            // Held across the epoch check, as `seek` holds it: a seek lands
            // either before this batch is checked or after its positions.
            let mut positions = self.positions.lock().unwrap_or_else(|p| p.into_inner());
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
            self.drop_forgotten(&mut self.positions.lock().unwrap_or_else(|p| p.into_inner()));
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
        let mut positions = self.positions.lock().unwrap_or_else(|p| p.into_inner());
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
            if !v.is_empty() || left.is_zero() {
                return Ok(v);
            }
        }
    }

    /// Restarts `partition` (a producer address) at `offset`. Records of it
    /// not yet polled are discarded. A partition not seen yet starts there.
    pub fn seek(&self, partition: &str, offset: u64) -> Result<()> {
        check_name(
            &format!("seek: partition {partition:?} (a producer's address)"),
            partition,
        )?;
        // A closed (or dead) consumer records no position.
        self.actor.check()?;
        {
            let mut positions = self.positions.lock().unwrap_or_else(|p| p.into_inner());
            self.shared.seeks.fetch_add(1, SeqCst);
            let mut e = self.shared.epochs.lock().unwrap_or_else(|p| p.into_inner());
            *e.entry(Arc::from(partition)).or_insert(0) += 1;
            positions.insert(Arc::from(partition), offset);
        }
        self.actor
            .send(Cmd::Seek(partition.as_bytes().to_vec(), offset))
    }

    pub fn check(&self) -> Result<()> {
        self.actor.check()
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

const BATCH: usize = 4096;

#[allow(clippy::too_many_arguments)]
fn run(
    inbox: &mut Inbox<Cmd>,
    ready: &mut Ready<String>,
    ctx: &zmq::Context,
    cfg: ConsumerConfig,
    topics: &[String],
    address: &str,
    shared: &ConsumerShared,
    tx: Sender<Vec<Delivery>>,
) -> Result<()> {
    let tb: Vec<&[u8]> = topics.iter().map(|t| t.as_bytes()).collect();
    let mut core = Core::open(ctx, &cfg.node, NodeType::Consumer, address, &tb)?;
    ready.send(core.endpoint.clone());
    let mut st = ConsumerState::new(address.as_bytes(), &tb, &cfg);
    let stats = &shared.stats;
    let mut frames = Frames::default();
    let mut outs = Vec::new();
    let mut dels = Vec::new();
    // Whether the application was behind at the last turn (for `pauses`).
    let mut was_full = false;
    core.emit_all(&st.get_heads())?;
    loop {
        if inbox.terminated() {
            return Ok(());
        }
        while let Some(cmd) = inbox.try_recv() {
            match cmd {
                Cmd::Seek(p, off) => {
                    outs.clear();
                    st.seek(&p, off, Instant::now(), &mut outs);
                    core.emit_all(&outs)?;
                }
                Cmd::Connect(ep) => core.connect(&ep),
            }
        }
        // Paused is published before buffered is read, so a handle that drains
        // concurrently either is seen here or sees `paused` and wakes us.
        shared.paused.store(true, SeqCst);
        let full = shared.full(cfg.max_buffered, cfg.max_buffered_bytes);
        if !full {
            shared.paused.store(false, SeqCst);
        } else if !was_full {
            Stats::add(&stats.pauses, 1);
        }
        was_full = full;
        core.count_unsendable(stats);
        let now = Instant::now();
        let timeout = poll_timeout(
            now,
            [
                st.next_deadline(),
                st.next_sweep(),
                core.disc.next_deadline(),
            ],
        );
        let r = core.poll(inbox, timeout, !full)?;
        let (xpub_in, sub_in, beacon_in) = (r.xpub, r.sub, r.beacon);

        if xpub_in {
            // A peer that answers GET-HEADS for our topic just subscribed: ask now.
            // Bounded per turn, as the SUB: a flood of subscriptions must not
            // keep the loop from everything else.
            for _ in 0..BATCH {
                if !frames.recv(&core.xpub)? {
                    break;
                }
                let (s, n) = frames.slices();
                if n != 1 {
                    continue;
                }
                if let Ok(sub) = Subscription::decode(s[0]) {
                    if let (true, Some((crate::wire::Kind::GetHeads, t))) =
                        (sub.subscribe, sub.target())
                    {
                        outs.clear();
                        outs.extend(st.get_heads_for(t));
                        core.emit_all(&outs)?;
                    }
                }
            }
        }
        if sub_in {
            outs.clear();
            dels.clear();
            let now = Instant::now();
            for _ in 0..BATCH {
                if !frames.recv(&core.sub)? {
                    break;
                }
                if frames.too_long() {
                    Stats::add(&stats.malformed, 1);
                    continue;
                }
                let (s, n) = frames.slices();
                match decode(&s[..n]) {
                    // No record can stand at the last offset: the partition's
                    // next one would overflow.
                    Ok((
                        Message::Record(Record { sequence, .. })
                        | Message::DirectRecord(Record { sequence, .. })
                        | Message::Head(Head { sequence, .. })
                        | Message::DirectHead(Head { sequence, .. }),
                        _,
                    )) if sequence == u64::MAX => Stats::add(&stats.malformed, 1),
                    Ok((Message::Record(r), _)) => {
                        Stats::add(&stats.records_received, 1);
                        st.on_record(&r, false, now, &mut dels, &mut outs);
                    }
                    Ok((Message::DirectRecord(r), _)) => {
                        Stats::add(&stats.records_received, 1);
                        st.on_record(&r, true, now, &mut dels, &mut outs);
                    }
                    Ok((m @ (Message::RecordBatch(b) | Message::DirectRecordBatch(b)), _)) => {
                        let direct = matches!(m, Message::DirectRecordBatch(_));
                        Stats::add(&stats.records_received, u64::from(b.count));
                        for r in b.records() {
                            st.on_record(&r, direct, now, &mut dels, &mut outs);
                        }
                    }
                    Ok((Message::Head(h), _)) => st.on_head(&h, false, now, &mut outs),
                    Ok((Message::DirectHead(h), _)) => st.on_head(&h, true, now, &mut outs),
                    Ok((Message::StoreHello(s), _)) => outs.extend(st.on_store_hello(&s, now)),
                    Ok(_) => Stats::add(&stats.ignored, 1),
                    Err(_) => Stats::add(&stats.malformed, 1),
                }
            }
            core.emit_all(&outs)?;
            // Before the records go out, as `records_lost` below: a reader
            // that got them sees the stats that go with them.
            if st.stalled > 0 {
                st.count_stalled();
                stats.stalled_partitions.store(st.stalled, SeqCst);
            }
            deliver(&tx, shared, &mut dels);
        }
        if beacon_in {
            core.on_beacons(stats)?;
        }
        let now = Instant::now();
        if st.next_deadline().is_some_and(|d| d <= now) {
            outs.clear();
            dels.clear();
            st.on_timer(now, &mut dels, &mut outs);
            core.emit_all(&outs)?;
            // Counted before the records that follow the skip are delivered.
            stats.records_lost.store(st.lost, SeqCst);
            stats.stalled_partitions.store(st.stalled, SeqCst);
            deliver(&tx, shared, &mut dels);
        }
        if st.next_sweep().is_some_and(|d| d <= now) {
            st.sweep_idle(now);
            let gone = st.forget_idle(now);
            if !gone.is_empty() {
                let mut f = shared.forgotten.lock().unwrap_or_else(|p| p.into_inner());
                f.extend(gone.iter().map(|k| lossy(k)));
                stats.partitions_forgotten.store(st.forgotten, SeqCst);
            }
        }
        if core.disc.next_deadline().is_some_and(|d| d <= now) {
            core.on_timer(now, stats)?;
        }
        stats.duplicates.store(st.duplicates, SeqCst);
        stats
            .partitions_active
            .store(st.active_partitions() as u64, SeqCst);
        stats.gaps.store(st.gaps, SeqCst);
        stats.fetches_sent.store(st.fetches, SeqCst);
    }
}

fn deliver(tx: &Sender<Vec<Delivery>>, shared: &ConsumerShared, dels: &mut Vec<Delivery>) {
    let n = dels.len();
    if n == 0 {
        return;
    }
    let bytes = dels.iter().map(|d| d.value.len()).sum();
    shared.buffered_bytes.fetch_add(bytes, SeqCst);
    shared.buffered.fetch_add(n, SeqCst);
    Stats::add(&shared.stats.delivered, n as u64);
    // One channel message per batch; the handle owns the receiver, and if it
    // is gone we are closing anyway.
    let _ = tx.send(std::mem::replace(dels, Vec::with_capacity(n)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::config::IDLE_AFTER;

    const P: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";
    const ME: &[u8] = b"9E51FBAE55A649C1A50C0B360F3FF7AE";
    const S: &[u8] = b"5D5B5C63E2C54B6A8C2BDA2B5D1F0A11";

    fn state(reset: OffsetReset, topics: &[&[u8]]) -> ConsumerState {
        let cfg = ConsumerConfig {
            offset_reset: reset,
            ..Default::default()
        };
        ConsumerState::new(ME, topics, &cfg)
    }

    fn rec(seq: u64, content: &'static [u8]) -> Record<'static> {
        Record {
            topic: b"hello",
            address: P,
            subject: b"hello",
            sequence: seq,
            content,
        }
    }

    fn offsets(d: &[Delivery]) -> Vec<u64> {
        d.iter().map(|d| d.offset).collect()
    }

    /// Values of 20 MiB: three fill the bound on held records.
    static BIG: [u8; 20 << 20] = [0; 20 << 20];

    fn at(seq: u64) -> Record<'static> {
        Record {
            content: &BIG,
            ..rec(seq, b"")
        }
    }

    /// A consumer that delivered offset 0 and received `seqs` (of `BIG`
    /// values) past the gap after it.
    fn past_a_gap(
        seqs: impl IntoIterator<Item = u64>,
    ) -> (ConsumerState, Instant, Vec<Delivery>, Vec<Out>) {
        let mut st = state(OffsetReset::Latest, &[b"hello"]);
        let t0 = Instant::now();
        let (mut d, mut o) = (Vec::new(), Vec::new());
        st.on_record(&rec(0, b"a"), false, t0, &mut d, &mut o);
        for seq in seqs {
            st.on_record(&at(seq), false, t0, &mut d, &mut o);
        }
        (st, t0, d, o)
    }

    /// Out-of-order records held past a gap are bounded in bytes too: one more
    /// is fetched again later instead (a producer of large records would
    /// otherwise fill a consumer's memory while it fetches the gap).
    #[test]
    fn held_records_are_bounded_in_bytes_and_fetched_again() {
        let (mut st, t0, mut d, mut o) = past_a_gap(2..=5);
        let p = &st.parts[P];
        assert_eq!(p.pending.offsets().collect::<Vec<_>>(), vec![2, 3, 4]);
        assert_eq!(p.pending.bytes(), 3 * BIG.len());
        // The gap filled: the held ones go out, and 5 is fetched again.
        d.clear();
        o.clear();
        st.on_record(&rec(1, b"b"), false, t0, &mut d, &mut o);
        assert_eq!(offsets(&d), vec![1, 2, 3, 4]);
        assert_eq!(st.parts[P].pending.bytes(), 0);
        st.on_record(&at(5), false, t0, &mut d, &mut o);
        assert_eq!(offsets(&d), vec![1, 2, 3, 4, 5]);
        // One record is always held, however large.
        let huge = vec![1u8; MAX_PENDING_BYTES + 1];
        st.on_record(
            &Record {
                content: &huge,
                ..rec(9, b"")
            },
            false,
            t0,
            &mut d,
            &mut o,
        );
        assert_eq!(st.parts[P].pending.len(), 1);
        st.seek(P, 20, t0, &mut o);
        assert_eq!(st.parts[P].pending.bytes(), 0, "a seek drops what is held");
    }

    /// Past the bound, a record nearer the gap displaces the farthest held
    /// one: a store's answer to the FETCH is kept, so that a skip to the first
    /// held record (the start of the gap deleted everywhere) never jumps over
    /// records a store still holds.
    #[test]
    fn a_record_nearer_the_gap_displaces_the_farthest_held_one() {
        let (mut st, t0, mut d, mut o) = past_a_gap(10..=12);
        // The FETCH's answers (DIRECT-RECORDs).
        for seq in [5, 6] {
            let direct = Record {
                topic: ME,
                ..at(seq)
            };
            st.on_record(&direct, true, t0, &mut d, &mut o);
        }
        let p = &st.parts[P];
        assert_eq!(p.pending.offsets().collect::<Vec<_>>(), vec![5, 6, 10]);
        assert_eq!(p.pending.bytes(), 3 * BIG.len());
        // A farther one than all held is the one let go.
        st.on_record(&at(13), false, t0, &mut d, &mut o);
        assert_eq!(st.parts[P].pending.len(), 3);
        assert!(!st.parts[P].pending.contains(13));
    }

    /// A partition caught up and unheard of for `IDLE_AFTER` keeps only its
    /// position and seek epoch; heard of again, it goes on from there (not
    /// from `offset_reset`). One with a gap in flight is kept whole.
    #[test]
    fn an_idle_partition_keeps_only_its_position_and_goes_on_from_it() {
        let mut st = state(OffsetReset::Latest, &[b"hello"]);
        let t0 = Instant::now();
        let (mut d, mut o) = (Vec::new(), Vec::new());
        st.on_record(&rec(3, b"a"), false, t0, &mut d, &mut o);
        st.on_record(&rec(4, b"b"), false, t0, &mut d, &mut o);
        assert_eq!(offsets(&d), vec![3, 4]);
        assert_eq!(st.seek(P, 5, t0, &mut o), 1);
        assert_eq!(st.next_sweep(), Some(t0 + IDLE_AFTER));
        // Heard of within the time: kept.
        let t1 = t0 + IDLE_AFTER / 2;
        st.on_head(
            &Head {
                topic: b"hello",
                address: P,
                subject: b"hello",
                sequence: 4,
            },
            false,
            t1,
            &mut o,
        );
        assert_eq!(st.sweep_idle(t0 + IDLE_AFTER), 0);
        assert_eq!(st.parts.len(), 1);
        // A second partition with a gap in flight is never idle.
        let other = |seq| Record {
            address: S,
            ..rec(seq, b"x")
        };
        st.on_record(&other(0), false, t0, &mut d, &mut o);
        o.clear();
        st.on_record(&other(5), false, t0, &mut d, &mut o);
        assert!(matches!(o[..], [Out::Fetch { sequence: 1, .. }]));
        let late = t1 + IDLE_AFTER;
        assert_eq!(st.sweep_idle(late), 1);
        assert!(!st.parts.contains_key(P) && st.parts.contains_key(S));
        assert_eq!(st.starts.get(P).map(|s| (s.next, s.epoch)), Some((5, 1)));
        // Back: from offset 5 with its epoch, a duplicate dropped, a gap fetched.
        d.clear();
        o.clear();
        st.on_record(&rec(4, b"b"), false, late, &mut d, &mut o);
        st.on_record(&rec(5, b"c"), false, late, &mut d, &mut o);
        st.on_record(&rec(7, b"e"), false, late, &mut d, &mut o);
        assert_eq!(offsets(&d), vec![5]);
        assert_eq!(d[0].epoch, 1);
        assert!(matches!(
            o[..],
            [Out::Fetch {
                sequence: 6,
                count: 1,
                ..
            }]
        ));
        assert!(st.starts.is_empty());
        // Nothing known: no sweep due; one idle position: sweeps go on, to
        // forget it in time; none when positions are kept for good.
        let mut empty = state(OffsetReset::Latest, &[b"hello"]);
        assert_eq!(empty.next_sweep(), None);
        empty.on_record(&rec(0, b"a"), false, t0, &mut d, &mut o);
        assert_eq!(empty.sweep_idle(t0 + IDLE_AFTER), 1);
        assert_eq!(empty.next_sweep(), Some(t0 + IDLE_AFTER + IDLE_AFTER / 2));
        empty.forget_after = None;
        empty.sweep_idle(t0 + IDLE_AFTER);
        assert_eq!(empty.next_sweep(), None);
    }

    #[test]
    fn positions_not_heard_of_for_forget_after_are_forgotten_unless_seeked() {
        const FORGET: Duration = Duration::from_secs(3600);
        let t0 = Instant::now();
        let cfg = ConsumerConfig {
            offset_reset: OffsetReset::Latest,
            start_offsets: vec![("GIVEN".into(), 9)],
            forget_after: Some(FORGET),
            ..Default::default()
        };
        let mut st = ConsumerState::new(ME, &[b"hello"], &cfg);
        // Given start offsets alone make sweeps due (to forget them).
        assert!(st.next_sweep().is_some());
        let (mut d, mut o) = (Vec::new(), Vec::new());
        st.on_record(&rec(3, b"a"), false, t0, &mut d, &mut o);
        let seeked = b"SEEKED";
        st.seek(seeked, 4, t0, &mut o);
        assert_eq!(st.sweep_idle(t0 + IDLE_AFTER), 1);
        assert!(st.forget_idle(t0 + IDLE_AFTER).is_empty());
        // P was last heard of at t0, GIVEN never (since the start).
        let mut gone = st.forget_idle(t0 + FORGET + Duration::from_secs(1));
        gone.sort();
        let mut want = vec![b"GIVEN".to_vec(), P.to_vec()];
        want.sort();
        assert_eq!(gone, want);
        assert_eq!(st.forgotten, 2);
        assert_eq!(
            st.starts.keys().cloned().collect::<Vec<_>>(),
            vec![seeked.to_vec()]
        );
        // Heard of again, P starts as a new partition (`latest`: here).
        d.clear();
        st.on_record(&rec(10, b"k"), false, t0, &mut d, &mut o);
        assert_eq!(offsets(&d), vec![10]);
        assert_eq!(d[0].epoch, 0);
        // Kept for good without forget_after.
        let mut keep = state(OffsetReset::Latest, &[b"hello"]);
        keep.forget_after = None;
        keep.on_record(&rec(3, b"a"), false, t0, &mut d, &mut o);
        keep.sweep_idle(t0 + IDLE_AFTER);
        assert!(keep.forget_idle(t0 + 100 * FORGET).is_empty());
        assert_eq!(keep.starts.len(), 1);
    }

    // C reference feature: STORE-HELLO → CONSUMER-HELLO, with 0 and 1 topics.
    #[test]
    fn store_hello_answered_with_consumer_hello() {
        for topics in [&[][..], &[&b"hello"[..]][..]] {
            let mut st = state(OffsetReset::Latest, topics);
            let out = st.on_store_hello(
                &StoreHello {
                    topic: ME,
                    address: S,
                },
                Instant::now(),
            );
            assert_eq!(
                out,
                vec![Out::ConsumerHello {
                    to: S.to_vec(),
                    subjects: topics.iter().map(|t| t.to_vec()).collect()
                }]
            );
            assert!(st
                .on_store_hello(
                    &StoreHello {
                        topic: P,
                        address: S
                    },
                    Instant::now()
                )
                .is_empty());
        }
    }

    // C reference feature: GET-HEADS on subscribe.
    #[test]
    fn get_heads_on_subscribe() {
        let st = state(OffsetReset::Latest, &[b"hello", b"world"]);
        assert_eq!(
            st.get_heads(),
            vec![
                Out::GetHeads {
                    topic: b"hello".to_vec()
                },
                Out::GetHeads {
                    topic: b"world".to_vec()
                }
            ]
        );
        assert_eq!(st.get_heads_for(b"world").len(), 1);
        assert!(st.get_heads_for(b"worl").is_empty());
    }

    // C reference feature: earliest, RECORD 1 → FETCH 0.
    #[test]
    fn earliest_record_one_fetches_zero() {
        let mut st = state(OffsetReset::Earliest, &[b"hello"]);
        let (mut d, mut o) = (Vec::new(), Vec::new());
        let t0 = Instant::now();
        st.on_record(&rec(1, b"B"), false, t0, &mut d, &mut o);
        assert!(d.is_empty());
        assert_eq!(
            o,
            vec![Out::Fetch {
                partition: P.to_vec(),
                subject: b"hello".to_vec(),
                sequence: 0,
                count: 1
            }]
        );
        // The answer fills the gap; both come out in order.
        o.clear();
        let mut dr = rec(0, b"A");
        dr.topic = ME;
        st.on_record(&dr, true, t0, &mut d, &mut o);
        assert_eq!(offsets(&d), vec![0, 1]);
        assert_eq!(d[0].value, b"A");
        assert!(o.is_empty());
        // Replays are duplicates.
        st.on_record(&rec(1, b"B"), false, t0, &mut d, &mut o);
        assert_eq!(d.len(), 2);
        assert_eq!(st.duplicates, 1);
    }

    // C reference feature: latest, RECORD 2 delivered.
    #[test]
    fn latest_record_two_delivered() {
        let mut st = state(OffsetReset::Latest, &[b"hello"]);
        let (mut d, mut o) = (Vec::new(), Vec::new());
        st.on_record(&rec(2, b"C"), false, Instant::now(), &mut d, &mut o);
        assert_eq!(offsets(&d), vec![2]);
        assert_eq!(&*d[0].topic, "hello");
        assert_eq!(d[0].partition.as_bytes(), P);
        assert!(o.is_empty());
    }

    #[test]
    fn exact_topic_check_after_prefix_match() {
        let mut st = state(OffsetReset::Latest, &[b"hello"]);
        let (mut d, mut o) = (Vec::new(), Vec::new());
        let mut r = rec(0, b"x");
        r.topic = b"hello2";
        r.subject = b"hello2";
        st.on_record(&r, false, Instant::now(), &mut d, &mut o);
        assert!(d.is_empty() && o.is_empty());
    }

    #[test]
    fn long_catch_up_pipelines_fetch_windows() {
        let mut st = state(OffsetReset::Earliest, &[b"hello"]);
        let (mut d, mut o) = (Vec::new(), Vec::new());
        let t0 = Instant::now();
        let h = Head {
            topic: b"hello",
            address: P,
            subject: b"hello",
            sequence: 24_999,
        };
        st.on_head(&h, false, t0, &mut o);
        let fetches = |o: &[Out]| -> Vec<(u64, u32)> {
            o.iter()
                .filter_map(|m| match m {
                    Out::Fetch {
                        sequence, count, ..
                    } => Some((*sequence, *count)),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(fetches(&o), vec![(0, 10_000)]);
        o.clear();
        let mut answers = Vec::new();
        for seq in 0..25_000u64 {
            let mut dr = rec(seq, b"v");
            dr.topic = ME;
            st.on_record(&dr, true, t0, &mut d, &mut o);
            answers.extend(fetches(&o).into_iter().map(|f| (seq, f)));
            o.clear();
        }
        // The next window is asked for once half of the one in flight
        // arrived, never more than one extra window, and the tail is exact.
        assert_eq!(
            answers,
            vec![(4_999, (10_000, 10_000)), (14_999, (20_000, 5_000))]
        );
        assert_eq!(d.len(), 25_000);
        assert_eq!(st.fetches, 3);
    }

    /// A DIRECT-HEAD of `P` for us, as a store answers CONSUMER-HELLO.
    fn direct_head(sequence: u64) -> Head<'static> {
        Head {
            topic: ME,
            address: P,
            subject: b"hello",
            sequence,
        }
    }

    /// A DIRECT-RECORD of `P`, as a store answers a FETCH.
    fn direct(seq: u64, content: &'static [u8]) -> Record<'static> {
        Record {
            topic: ME,
            ..rec(seq, content)
        }
    }

    /// Runs the FETCH retry timer `n` times.
    fn retries(st: &mut ConsumerState, n: u32, d: &mut Vec<Delivery>) -> Vec<Out> {
        let mut o = Vec::new();
        for _ in 0..n {
            let due = st.next_deadline().expect("a FETCH in flight");
            st.on_timer(due, d, &mut o);
        }
        o
    }

    /// Stores answer every retry from past the gap: after `give_up_fetches`
    /// rounds in a row, the gap is given up.
    #[test]
    fn a_gap_that_stores_answered_from_past_is_skipped_after_give_up_fetches() {
        let mut st = state(OffsetReset::Earliest, &[b"hello"]);
        let (mut d, mut o) = (Vec::new(), Vec::new());
        let t0 = Instant::now();
        st.on_head(&direct_head(9), true, t0, &mut o);
        assert!(matches!(
            o[..],
            [Out::Fetch {
                sequence: 0,
                count: 10,
                ..
            }]
        ));
        // The store's retention deleted 0..7: it answers from 7 on, and
        // answers each retry (FETCH 0..7) from 7 again.
        for seq in 7..10 {
            st.on_record(&direct(seq, b"v"), true, t0, &mut d, &mut o);
        }
        assert!(d.is_empty());
        let give_up = ConsumerConfig::default().give_up_fetches;
        let mut o = Vec::new();
        for _ in 0..give_up - 1 {
            o.extend(retries(&mut st, 1, &mut d));
            st.on_record(&direct(7, b"v"), true, t0, &mut d, &mut Vec::new());
        }
        assert!(d.is_empty(), "not before give_up_fetches retries");
        assert_eq!(
            o.len() as u32,
            give_up - 1,
            "each retry FETCHes 0..7 again: {o:?}"
        );
        assert_eq!(st.lost, 0);
        retries(&mut st, 1, &mut d);
        assert_eq!(offsets(&d), vec![7, 8, 9]);
        assert_eq!(st.lost, 7);
        assert_eq!(st.next_deadline(), None, "nothing left to fetch");
    }

    #[test]
    fn a_seek_forgets_that_a_gap_was_answered_from_past_it() {
        let mut st = state(OffsetReset::Earliest, &[b"hello"]);
        let (mut d, mut o) = (Vec::new(), Vec::new());
        let t0 = Instant::now();
        st.on_head(&direct_head(9), true, t0, &mut o);
        for seq in 7..10 {
            st.on_record(&direct(seq, b"v"), true, t0, &mut d, &mut o);
        }
        assert_eq!(st.seek(P, 0, t0, &mut o), 1);
        // From the new position only a live record beyond the gap: no evidence.
        st.on_record(&rec(8, b"v"), false, t0, &mut d, &mut o);
        let give_up = ConsumerConfig::default().give_up_fetches;
        retries(&mut st, 2 * give_up, &mut d);
        assert!(d.is_empty(), "{:?}", offsets(&d));
        assert_eq!(st.lost, 0);
    }

    #[test]
    fn a_gap_is_not_skipped_without_an_answer_from_past_it_or_while_it_fills() {
        let mut st = state(OffsetReset::Latest, &[b"hello"]);
        let (mut d, mut o) = (Vec::new(), Vec::new());
        let t0 = Instant::now();
        // Live records only: nobody said the gap is gone (stores may be down).
        st.on_record(&rec(10, b"a"), false, t0, &mut d, &mut o);
        st.on_record(&rec(13, b"d"), false, t0, &mut d, &mut o);
        retries(&mut st, 20, &mut d);
        assert_eq!(offsets(&d), vec![10]);
        assert_eq!(st.lost, 0);
        // Progress resets the count: a slow answer filling the gap one record
        // per retry is never skipped, even with an answer from past it.
        st.on_record(&direct(15, b"f"), true, t0, &mut d, &mut o);
        let give_up = ConsumerConfig::default().give_up_fetches;
        for missing in [11, 12, 14] {
            retries(&mut st, give_up - 1, &mut d);
            st.on_record(&direct(missing, b"x"), true, t0, &mut d, &mut o);
        }
        assert_eq!(offsets(&d), (10..=15).collect::<Vec<_>>());
        assert_eq!(st.lost, 0);
    }

    #[test]
    fn a_stalled_partition_backs_off_until_a_store_says_hello() {
        let mut st = state(OffsetReset::Earliest, &[b"hello"]);
        let (mut d, mut o) = (Vec::new(), Vec::new());
        let t0 = Instant::now();
        st.on_head(&direct_head(9), true, t0, &mut o);
        let cfg = ConsumerConfig::default();
        // A minute with nobody answering: after give_up_fetches tries at
        // fetch_retry, the interval doubles up to 16 x fetch_retry.
        let mut fetch_times = vec![t0];
        while let Some(due) = st
            .next_deadline()
            .filter(|&t| t < t0 + Duration::from_secs(60))
        {
            o.clear();
            st.on_timer(due, &mut d, &mut o);
            assert_eq!(o.len(), 1, "one FETCH per retry: {o:?}");
            fetch_times.push(due);
        }
        let gaps: Vec<Duration> = fetch_times.windows(2).map(|w| w[1] - w[0]).collect();
        let r = cfg.fetch_retry;
        let give_up = cfg.give_up_fetches as usize;
        assert!(gaps[..give_up].iter().all(|&g| g == r), "{gaps:?}");
        assert_eq!(
            gaps[give_up..give_up + 5],
            [2 * r, 4 * r, 8 * r, 16 * r, 16 * r]
        );
        assert!(
            fetch_times.len() < 20,
            "{} FETCHes in a minute",
            fetch_times.len()
        );
        assert_eq!(st.stalled, 1);
        assert!(d.is_empty());
        // A store (re)appears: FETCH at once, and back off from the start.
        let now = *fetch_times.last().unwrap() + Duration::from_secs(1);
        st.on_store_hello(
            &StoreHello {
                topic: ME,
                address: S,
            },
            now,
        );
        assert_eq!(st.next_deadline(), Some(now));
        o.clear();
        st.on_timer(now, &mut d, &mut o);
        assert!(matches!(o[..], [Out::Fetch { sequence: 0, .. }]), "{o:?}");
        assert_eq!(st.next_deadline(), Some(now + 2 * r));
        // Its answer ends the stall and the backoff.
        for seq in 0..10 {
            st.on_record(&direct(seq, b"v"), true, now, &mut d, &mut o);
        }
        assert_eq!(offsets(&d), (0..10).collect::<Vec<_>>());
        st.count_stalled();
        assert_eq!((st.stalled, st.next_deadline()), (0, None));
    }

    #[test]
    fn gap_fetch_retry_and_head() {
        let mut st = state(OffsetReset::Latest, &[b"hello"]);
        let (mut d, mut o) = (Vec::new(), Vec::new());
        let t0 = Instant::now();
        st.on_record(&rec(10, b"a"), false, t0, &mut d, &mut o);
        st.on_record(&rec(13, b"d"), false, t0, &mut d, &mut o);
        assert_eq!(offsets(&d), vec![10]);
        assert_eq!(
            o,
            vec![Out::Fetch {
                partition: P.to_vec(),
                subject: b"hello".to_vec(),
                sequence: 11,
                count: 2
            }]
        );
        // In flight: a further record does not FETCH again.
        o.clear();
        st.on_record(&rec(14, b"e"), false, t0, &mut d, &mut o);
        assert!(o.is_empty());
        // No answer: retried after fetch_retry.
        let later = t0 + Duration::from_millis(500);
        assert_eq!(st.next_deadline(), Some(later));
        st.on_timer(later, &mut d, &mut o);
        assert!(matches!(
            o[..],
            [Out::Fetch {
                sequence: 11,
                count: 2,
                ..
            }]
        ));
        // Gap filled out of order; HEAD beyond → a new FETCH for 15..=20.
        o.clear();
        st.on_record(&rec(12, b"c"), false, later, &mut d, &mut o);
        st.on_record(&rec(11, b"b"), false, later, &mut d, &mut o);
        assert_eq!(offsets(&d), vec![10, 11, 12, 13, 14]);
        let h = Head {
            topic: b"hello",
            address: P,
            subject: b"hello",
            sequence: 20,
        };
        st.on_head(&h, false, later, &mut o);
        assert!(matches!(
            o[..],
            [Out::Fetch {
                sequence: 15,
                count: 6,
                ..
            }]
        ));
    }

    #[test]
    fn earliest_head_fetches_history_and_seek_restarts() {
        let mut st = state(OffsetReset::Earliest, &[b"hello"]);
        let mut o = Vec::new();
        let t0 = Instant::now();
        st.on_head(&direct_head(4), true, t0, &mut o);
        assert!(matches!(
            o[..],
            [Out::Fetch {
                sequence: 0,
                count: 5,
                ..
            }]
        ));
        let mut d = Vec::new();
        for i in 0..5 {
            st.on_record(&rec(i, b"v"), false, t0, &mut d, &mut o);
        }
        assert_eq!(offsets(&d), vec![0, 1, 2, 3, 4]);
        o.clear();
        let partition = std::str::from_utf8(P).unwrap();
        assert_eq!(st.seek(P, 2, t0, &mut o), 1);
        assert!(matches!(
            o[..],
            [Out::Fetch {
                sequence: 2,
                count: 3,
                ..
            }]
        ));
        assert_eq!(st.positions(), vec![(Arc::from(partition), 2)]);
        // A partition not seen yet starts where the last seek said, in step
        // with the handle's count of seeks.
        assert_eq!(st.seek(b"unknown", 0, t0, &mut o), 1);
        assert_eq!(st.seek(b"unknown", 7, t0, &mut o), 2);
        st.on_head(
            &Head {
                topic: b"hello",
                address: b"unknown",
                subject: b"hello",
                sequence: 9,
            },
            false,
            t0,
            &mut o,
        );
        assert!(st.positions().contains(&(Arc::from("unknown"), 7)));
        let mut d = Vec::new();
        st.on_record(
            &Record {
                topic: b"hello",
                address: b"unknown",
                subject: b"hello",
                sequence: 7,
                content: b"v",
            },
            false,
            t0,
            &mut d,
            &mut o,
        );
        assert_eq!((d[0].offset, d[0].epoch), (7, 2));
    }

    #[test]
    fn latest_head_starts_after_it() {
        let mut st = state(OffsetReset::Latest, &[b"hello"]);
        let mut o = Vec::new();
        let h = Head {
            topic: b"hello",
            address: P,
            subject: b"hello",
            sequence: 7,
        };
        st.on_head(&h, false, Instant::now(), &mut o);
        assert!(o.is_empty());
        let mut d = Vec::new();
        st.on_record(&rec(8, b"x"), false, Instant::now(), &mut d, &mut o);
        assert_eq!(offsets(&d), vec![8]);
    }

    /// A backward seek while a FETCH is in flight: the late answers to the
    /// FETCH from before the seek (DIRECT-RECORDs past the new position) are
    /// evidence for one round only. They used to count as a store having
    /// answered the new FETCH from past the gap for good, so when no node
    /// answered the new one (stores restarting, a producer with `min_acks >=
    /// 1`) the consumer skipped the history after `give_up_fetches` retries
    /// (records_lost) instead of waiting for it.
    #[test]
    fn late_answers_to_a_fetch_from_before_a_seek_are_no_evidence_of_a_deleted_gap() {
        let mut st = state(OffsetReset::Latest, &[b"hello"]);
        let (mut d, mut o) = (Vec::new(), Vec::new());
        let t0 = Instant::now();
        st.on_record(&rec(10, b"a"), false, t0, &mut d, &mut o);
        st.on_record(&rec(13, b"d"), false, t0, &mut d, &mut o);
        assert!(matches!(o[..], [Out::Fetch { sequence: 11, .. }]));
        d.clear();
        assert_eq!(st.seek(P, 0, t0, &mut o), 1);
        // The producer's answers to FETCH 11..13, sent before it saw the seek.
        st.on_record(&direct(11, b"b"), true, t0, &mut d, &mut o);
        st.on_record(&direct(12, b"c"), true, t0, &mut d, &mut o);
        // Nobody answers FETCH 0.. (the stores holding it are restarting).
        let give_up = ConsumerConfig::default().give_up_fetches;
        retries(&mut st, 2 * give_up, &mut d);
        assert!(d.is_empty(), "skipped to {:?}", offsets(&d));
        assert_eq!(st.lost, 0);
    }

    /// Stores that answer a gap from past it keep doing so at each retry, and
    /// once `next` moved after their first answer, their answers are records
    /// already held. Those count as answers from past the gap too: they used
    /// to be dropped as duplicates first, so the partition never gave the gap
    /// up and stalled (FETCHing with backoff) forever.
    #[test]
    fn a_gap_answered_from_past_it_at_every_retry_is_given_up_after_progress() {
        let mut st = state(OffsetReset::Earliest, &[b"hello"]);
        let (mut d, mut o) = (Vec::new(), Vec::new());
        let t0 = Instant::now();
        st.on_head(&direct_head(9), true, t0, &mut o);
        // One store's retention deleted 0..5: it answers from 5.
        for seq in 5..10 {
            st.on_record(&direct(seq, b"v"), true, t0, &mut d, &mut o);
        }
        // Another node still had offset 0 (and nothing of 1..5).
        st.on_record(&direct(0, b"z"), true, t0, &mut d, &mut o);
        assert_eq!(offsets(&d), vec![0]);
        // Every retry (FETCH 1..5) is answered from 5 again.
        let give_up = ConsumerConfig::default().give_up_fetches;
        for _ in 0..2 * give_up {
            if st.next_deadline().is_none() {
                break;
            }
            retries(&mut st, 1, &mut d);
            for seq in 5..10 {
                st.on_record(&direct(seq, b"v"), true, t0, &mut d, &mut o);
            }
        }
        assert_eq!(offsets(&d), vec![0, 5, 6, 7, 8, 9]);
        assert_eq!(st.lost, 4);
    }

    /// A seek of a partition gone idle (its producer finished: no HEADs come
    /// any more) brings it back and FETCHes from the offset. It used to only
    /// move the kept position: nothing was FETCHed, so the records the stores
    /// hold never came.
    #[test]
    fn a_seek_of_an_idle_partition_fetches_from_there() {
        let mut st = state(OffsetReset::Latest, &[b"hello"]);
        let (mut d, mut o) = (Vec::new(), Vec::new());
        let t0 = Instant::now();
        for seq in 0..5 {
            st.on_record(&rec(seq, b"v"), false, t0, &mut d, &mut o);
        }
        assert_eq!(st.sweep_idle(t0 + IDLE_AFTER), 1);
        o.clear();
        st.seek(P, 0, t0 + IDLE_AFTER, &mut o);
        assert!(
            o.iter()
                .any(|m| matches!(m, Out::Fetch { sequence: 0, .. } | Out::GetHeads { .. })),
            "nothing asked for: {o:?}"
        );
    }
}

/// Review tests of the handle across threads (real nodes on 127.0.0.1).
#[cfg(test)]
mod handle_tests {
    use super::*;
    use crate::node::{Producer, ProducerConfig};
    use std::sync::atomic::AtomicI32;

    fn wait_for(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + within;
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    static IN_HANDLER: AtomicBool = AtomicBool::new(false);
    static RELEASE: AtomicBool = AtomicBool::new(false);

    /// Holds the thread it lands on until `RELEASE` (async-signal-safe:
    /// atomics and nanosleep only).
    extern "C" fn hold(_: libc::c_int) {
        IN_HANDLER.store(true, SeqCst);
        while !RELEASE.load(SeqCst) {
            let ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 1_000_000,
            };
            // SAFETY: nanosleep is async-signal-safe.
            unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
        }
    }

    /// Sets `RELEASE` however the test ends, so no thread stays held.
    struct Release;
    impl Drop for Release {
        fn drop(&mut self) {
            RELEASE.store(true, SeqCst);
        }
    }

    /// Two threads poll one consumer (Python releases the GIL in `poll`).
    /// Thread A takes offset 0, thread B then offset 1; A was preempted
    /// between taking its record from the channel and noting its position
    /// (here: a signal handler holds it there). The application was given
    /// offsets 0 and 1, so `positions()` must say 2; it said 1, and a
    /// consumer resumed from it got offset 1 twice.
    #[test]
    fn positions_never_go_back_when_two_threads_poll() {
        let _release = Release;
        let p = Producer::new("t", ProducerConfig::default()).unwrap();
        for i in 0..10u32 {
            p.send(i.to_be_bytes(), None).unwrap();
        }
        let c = Consumer::new(
            &["t".to_string()],
            ConsumerConfig {
                offset_reset: OffsetReset::Earliest,
                node: crate::node::NodeConfig {
                    peers: vec![p.endpoint().to_string()],
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .unwrap();
        p.connect(c.endpoint()).unwrap();
        let buffered = || c.shared.buffered.load(SeqCst);
        wait_for("10 records delivered", Duration::from_secs(30), || {
            buffered() == 10
        });
        // SAFETY: installs a handler for SIGUSR1 (used by no other test).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = hold as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
        }
        let tid_a = AtomicI32::new(0);
        let (a_got, b_got, positions) = std::thread::scope(|s| {
            let held = c.positions.lock().unwrap();
            let a = s.spawn(|| {
                // SAFETY: gettid has no preconditions.
                tid_a.store(unsafe { libc::syscall(libc::SYS_gettid) } as i32, SeqCst);
                let mut v = Vec::new();
                c.poll_slice(1, Duration::from_secs(10), &mut v).unwrap();
                v
            });
            wait_for("A took a record", Duration::from_secs(10), || {
                buffered() == 9
            });
            let b = s.spawn(|| {
                let mut v = Vec::new();
                c.poll_slice(1, Duration::from_secs(10), &mut v).unwrap();
                v
            });
            // Before the fix B took its record while A waited to note its
            // position; now B waits for A (the channel's lock is held until
            // the positions are noted), and nothing more happens here.
            let deadline = Instant::now() + Duration::from_secs(2);
            while buffered() != 8 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if buffered() == 8 {
                // A is preempted where it waits to note its position.
                // SAFETY: signals one thread of this process.
                unsafe {
                    libc::syscall(
                        libc::SYS_tgkill,
                        libc::getpid(),
                        tid_a.load(SeqCst),
                        libc::SIGUSR1,
                    );
                }
                wait_for("A preempted", Duration::from_secs(10), || {
                    IN_HANDLER.load(SeqCst)
                });
            }
            drop(held);
            let b_got = b.join().unwrap();
            RELEASE.store(true, SeqCst);
            let a_got = a.join().unwrap();
            (a_got, b_got, c.positions())
        });
        let offsets = |v: &[Delivery]| v.iter().map(|d| d.offset).collect::<Vec<_>>();
        assert_eq!((offsets(&a_got), offsets(&b_got)), (vec![0], vec![1]));
        assert_eq!(
            positions,
            vec![(p.address().to_string(), 2)],
            "offsets 0 and 1 were given to the application"
        );
        c.close().unwrap();
        p.close().unwrap();
    }

    /// `validate` took any `idle_after` (> 0), and `Duration::MAX` reads as
    /// "never idle" (as `forget_after: None` is "never forget"). The node
    /// thread adds it to `Instant::now()` when it first hears of a
    /// partition, and died of the overflow: a config the constructor
    /// accepted killed the consumer at its first record. Such a config is
    /// refused now, and the longest one taken (about 95 years) works.
    #[test]
    fn a_consumer_that_never_goes_idle_survives_its_first_record() {
        let p = Producer::new("t", ProducerConfig::default()).unwrap();
        let cfg = |idle_after: Duration| ConsumerConfig {
            offset_reset: OffsetReset::Earliest,
            idle_after,
            forget_after: None,
            node: crate::node::NodeConfig {
                peers: vec![p.endpoint().to_string()],
                ..Default::default()
            },
            ..Default::default()
        };
        let refused = Consumer::new(&["t".to_string()], cfg(Duration::MAX));
        assert!(matches!(refused, Err(Error::Config(_))));
        let retry_forever = ConsumerConfig {
            fetch_retry: Duration::MAX,
            ..cfg(Duration::from_secs(60))
        };
        let refused = Consumer::new(&["t".to_string()], retry_forever);
        assert!(matches!(refused, Err(Error::Config(_))));
        let cfg = cfg(crate::node::config::LONGEST);
        let c = Consumer::new(&["t".to_string()], cfg).unwrap();
        p.connect(c.endpoint()).unwrap();
        for i in 0..5u32 {
            p.send(i.to_be_bytes(), None).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut got = Vec::new();
        while got.len() < 5 && Instant::now() < deadline {
            match c.poll_many(100, Duration::from_millis(100)) {
                Ok(v) => got.extend(v),
                Err(e) => panic!("the consumer died: {e}"),
            }
        }
        assert_eq!(got.len(), 5);
        c.close().unwrap();
        p.close().unwrap();
    }
}
