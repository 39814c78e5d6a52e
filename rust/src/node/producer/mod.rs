//! The producer: one partition (its address) of one topic. The pure
//! [`ProducerState`] decides (offsets, the retransmit buffer, ACK accounting,
//! FETCH and GET-HEADS answers, HEAD timing); [`Producer`] is the handle, whose
//! `send` is an enqueue onto the node thread, which publishes RECORDs.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::error::{Error, Result};
use crate::node::actor::{Actor, Inbox, Ready};
use crate::node::batch::Batch;
use crate::node::config::{ProducerConfig, MAX_ACKERS};
use crate::node::out::{poll_timeout, Out};
use crate::node::socket::{new_address, set_int_option, Core, Dest, Frames, Takers};
use crate::node::stats::Stats;
use crate::wire::{decode, topic_matches, Ack, Fetch, GetHeads, Message, NodeType, Subscription};

/// Pure producer protocol state.
#[derive(Debug)]
pub struct ProducerState {
    topic: Vec<u8>,
    address: Vec<u8>,
    min_acks: usize,
    head_interval: Duration,
    next_head: Option<Instant>,
    /// The first offset not released.
    base: u64,
    /// Records not released, in batches: each with its first offset. The
    /// first `front` values of `held[0]` are released already.
    held: VecDeque<(u64, Batch)>,
    front: usize,
    bytes: usize,
    next: u64,
    /// Highest offset each store ACKed (cumulative); `b""` = an address-less
    /// (zproto) ACK, counted as one anonymous store.
    acks: HashMap<Vec<u8>, u64>,
    /// Consumers connected now (their `L<address>` subscriptions), with how
    /// many connections each has.
    consumers: HashMap<Vec<u8>, u32>,
    /// Stores connected now: every one subscribes every RECORD (`M`); this
    /// project's also every RECORD-BATCH (`R`), and ACK with their address.
    stores_all: usize,
    stores_ours: usize,
    /// Whether the address-less ACKs' shortfall was logged.
    warned_uncountable: bool,
}

/// What an ACK says of `min_acks` ([`ProducerState::ack_reach`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckReach {
    /// Counted, or not ours to judge.
    Counted,
    /// An address-less ACK (a C-reference store's) while `min_acks` is more
    /// than the stores this producer can tell apart: `first` the first time.
    Unreachable { first: bool },
}

impl ProducerState {
    pub fn new(topic: &[u8], address: &[u8], min_acks: usize, head_interval: Duration) -> Self {
        Self {
            topic: topic.to_vec(),
            address: address.to_vec(),
            min_acks,
            head_interval,
            next_head: None,
            base: 0,
            held: VecDeque::new(),
            front: 0,
            bytes: 0,
            next: 0,
            acks: HashMap::new(),
            consumers: HashMap::new(),
            stores_all: 0,
            stores_ours: 0,
            warned_uncountable: false,
        }
    }

    /// A store's subscription to every RECORD (`M`) or every RECORD-BATCH
    /// (`R`, this project's stores alone) came or went; false for any other
    /// prefix.
    pub fn on_store_subscription(&mut self, prefix: &[u8], subscribe: bool) -> bool {
        let n = match prefix {
            b"M" => &mut self.stores_all,
            b"R" => &mut self.stores_ours,
            _ => return false,
        };
        *n = if subscribe {
            n.saturating_add(1)
        } else {
            n.saturating_sub(1)
        };
        true
    }

    /// The stores connected now whose ACKs this producer can count apart:
    /// this project's stores (their ACKs name them), plus at most one for
    /// all the others (C-reference stores, whose zproto ACKs carry no
    /// address and so count as one store together).
    pub fn countable_stores(&self) -> usize {
        let ours = self.stores_ours.min(self.stores_all);
        ours + usize::from(self.stores_all > ours)
    }

    /// Whether an ACK could help reach `min_acks`: an address-less one
    /// (from C-reference stores) counts as one store at most, so with
    /// `min_acks` above [`ProducerState::countable_stores`] nothing is
    /// released however many such stores hold the records.
    pub fn ack_reach(&mut self, ack: &Ack<'_>) -> AckReach {
        if ack.address.is_some() || self.min_acks <= self.countable_stores().max(1) {
            return AckReach::Counted;
        }
        let first = !self.warned_uncountable;
        self.warned_uncountable = true;
        AckReach::Unreachable { first }
    }

    pub fn min_acks(&self) -> usize {
        self.min_acks
    }

    /// A subscription or unsubscription arrived on the XPUB: a consumer
    /// subscribes `L` + its address on every peer. A consumer that connects
    /// once we have published is told our head (a DIRECT-HEAD): records
    /// published before its subscriptions arrived never reached it, and its
    /// GET-HEADS may have come before our first record (then unanswered) or
    /// before our own connection to it; with HEADs far apart it would not
    /// hear of them for a `head_interval`.
    pub fn on_subscription(&mut self, prefix: &[u8], subscribe: bool) -> Option<Out> {
        let Some((b'L', consumer)) = prefix.split_first() else {
            return None;
        };
        if consumer.is_empty() {
            return None;
        }
        if subscribe {
            *self.consumers.entry(consumer.to_vec()).or_insert(0) += 1;
            return Some(Out::DirectHead {
                to: consumer.to_vec(),
                partition: self.address.clone(),
                subject: self.topic.clone(),
                sequence: self.last()?,
            });
        } else if let Some(n) = self.consumers.get_mut(consumer) {
            *n -= 1;
            if *n == 0 {
                self.consumers.remove(consumer);
            }
        }
        None
    }

    /// The offset the next record gets.
    pub fn next_offset(&self) -> u64 {
        self.next
    }

    /// The last offset published, if any.
    pub fn last(&self) -> Option<u64> {
        self.next.checked_sub(1)
    }

    /// Every offset below this one is released (ACKed by `min_acks` stores).
    pub fn released_upto(&self) -> u64 {
        self.base
    }

    /// Bytes of records still held.
    pub fn held_bytes(&self) -> usize {
        self.bytes
    }

    /// [`ProducerState::append_batch`] of one record.
    #[cfg(test)]
    pub fn append(&mut self, content: &[u8]) -> (u64, usize) {
        self.append_batch(Batch::from(content.to_vec()))
    }

    /// Records a published batch; returns its first offset and the bytes
    /// released at once (all of them when `min_acks == 0`).
    /// A batch held is shrunk to what its values use: one that `send`
    /// started for 64 KiB may hold a single record until stores ACK.
    pub fn append_batch(&mut self, mut batch: Batch) -> (u64, usize) {
        let off = self.next;
        self.next += batch.len() as u64;
        if self.min_acks == 0 {
            self.base = self.next;
            return (off, batch.bytes());
        }
        if !batch.is_empty() {
            batch.shrink();
            self.bytes += batch.bytes();
            self.held.push_back((off, batch));
        }
        (off, 0)
    }

    /// Bytes allocated for the records held (their values, plus what keeps
    /// them apart).
    #[cfg(test)]
    pub fn held_allocated(&self) -> usize {
        self.held.iter().map(|(_, b)| b.allocated()).sum()
    }

    /// Starts the HEAD timer once something was published.
    pub fn arm_head(&mut self, now: Instant) {
        if self.next_head.is_none() && self.next > 0 {
            self.next_head = Some(now + self.head_interval);
        }
    }

    pub fn next_head(&self) -> Option<Instant> {
        self.next_head
    }

    /// The HEAD due at `now`, if any (then re-armed one interval later).
    pub fn on_timer(&mut self, now: Instant) -> Option<Out> {
        self.next_head.filter(|&t| t <= now)?;
        self.next_head = Some(now + self.head_interval);
        self.head()
    }

    /// A HEAD with our last offset, once we have published.
    pub fn head(&self) -> Option<Out> {
        Some(Out::Head {
            topic: self.topic.clone(),
            partition: self.address.clone(),
            sequence: self.last()?,
        })
    }

    /// An ACK: returns the bytes released (0 if nothing moved or it was not
    /// for us).
    pub fn on_ack(&mut self, ack: &Ack<'_>) -> usize {
        if ack.topic != self.address.as_slice() || ack.subject != self.topic.as_slice() {
            return 0;
        }
        let Some(last) = self.last() else { return 0 };
        let seq = ack.sequence.min(last);
        let who = ack.address.unwrap_or_default();
        if self.acks.len() >= MAX_ACKERS && !self.acks.contains_key(who) {
            // Every ACK address stays until here (each ACK sorts them all):
            // drop those below what is released, which can release nothing
            // more (a store's next ACK brings it back), then refuse new ones.
            let base = self.base;
            self.acks.retain(|_, s| *s >= base);
            if self.acks.len() >= MAX_ACKERS {
                return 0;
            }
        }
        let e = self.acks.entry(who.to_vec()).or_insert(seq);
        *e = (*e).max(seq);
        if self.min_acks == 0 || self.acks.len() < self.min_acks {
            return 0;
        }
        let mut v: Vec<u64> = self.acks.values().copied().collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        let upto = v[self.min_acks - 1];
        let mut freed = 0;
        while self.base <= upto {
            let Some((_, b)) = self.held.front() else {
                break;
            };
            let want = usize::try_from(upto - self.base + 1).unwrap_or(usize::MAX);
            let take = want.min(b.len() - self.front);
            freed += b.span(self.front, self.front + take);
            self.front += take;
            self.base += take as u64;
            if self.front == b.len() {
                self.held.pop_front();
                self.front = 0;
            }
        }
        self.bytes -= freed;
        freed
    }

    /// The offsets of a FETCH that we answer: the requested ones we still
    /// hold (empty if the FETCH is not for our partition and topic). A FETCH
    /// from below what we hold (released: ACKed by stores) gets the rest of
    /// its range. A store new to the partition, whose live records were all
    /// missed, needs those to start at our oldest unreleased record when
    /// nobody answers the history (else it never ACKs, and we stall). The
    /// price: an answer from past a gap is no proof that the gap is deleted
    /// everywhere (a store holding it may be away), so the store's gap
    /// skipping also requires its own copy to be gone.
    ///
    /// A consumer gets no such answer when `min_acks >= 1`: what we released
    /// was ACKed by stores, so they hold it (or their retention deleted it,
    /// which they show by answering from past it). A consumer takes an answer
    /// from past its gap as evidence that the gap is gone and skips it; from
    /// us, while every store holding it is away (restarting), that would skip
    /// records that still exist. It waits for a store instead.
    pub fn fetch_range(&self, f: &Fetch<'_>) -> std::ops::Range<u64> {
        if f.topic != self.address.as_slice() || f.subject != self.topic.as_slice() {
            return 0..0;
        }
        if f.sequence < self.base && self.min_acks > 0 && self.consumers.contains_key(f.address) {
            return 0..0;
        }
        let from = f.sequence.max(self.base);
        let to = f.sequence.saturating_add(u64::from(f.count)).min(self.next);
        from..to.max(from)
    }

    /// The content of a held record.
    pub fn get(&self, offset: u64) -> Option<&[u8]> {
        if offset < self.base {
            return None;
        }
        let i = self.held.partition_point(|(first, _)| *first <= offset);
        let (first, b) = self.held.get(i.checked_sub(1)?)?;
        b.get(usize::try_from(offset - first).ok()?)
    }

    pub fn topic(&self) -> &[u8] {
        &self.topic
    }

    /// A FETCH for our partition: exactly the requested records we still hold,
    /// byte-identical, ascending, as DIRECT-RECORDs to the requester. (The node
    /// thread sends the same thing straight from the buffer, via
    /// [`ProducerState::fetch_range`] and [`ProducerState::get`], without copies.)
    pub fn on_fetch(&self, f: &Fetch<'_>) -> Vec<Out> {
        self.fetch_range(f)
            .filter_map(|off| {
                Some(Out::DirectRecord {
                    to: f.address.to_vec(),
                    partition: self.address.clone(),
                    subject: self.topic.clone(),
                    sequence: off,
                    content: self.get(off)?.to_vec(),
                })
            })
            .collect()
    }

    /// GET-HEADS for our topic: a DIRECT-HEAD once we have published.
    pub fn on_get_heads(&self, g: &GetHeads<'_>) -> Vec<Out> {
        match self.last() {
            Some(last) if g.topic == self.topic.as_slice() => vec![Out::DirectHead {
                to: g.address.to_vec(),
                partition: self.address.clone(),
                subject: self.topic.clone(),
                sequence: last,
            }],
            _ => Vec::new(),
        }
    }
}

/// Records sent one at a time gather in batches of up to this many bytes
/// before the node thread takes them (sooner if it is idle).
const COALESCE: usize = 64 << 10;

enum Cmd {
    /// Take [`Pending::batch`] if its generation is still this one.
    Take(u64),
    Many(Batch),
    Connect(String),
}

/// Records sent one at a time and not yet taken by the node thread: `send`
/// copies a value here instead of allocating it and queueing a command.
/// Every hand-over happens under this lock, so the node thread receives the
/// records in offset order.
#[derive(Debug, Default)]
struct Pending {
    /// The offset the next record sent gets.
    next: u64,
    batch: Batch,
    /// Bumped at every hand-over of `batch`: a [`Cmd::Take`] of an older
    /// generation (its records went with a later command) takes nothing.
    gen: u64,
    /// Set by `close` before it stops the node thread: no record is taken
    /// from then on, so the thread's last drain is bounded and takes every
    /// record a `send` returned an offset for.
    closed: bool,
}

impl Pending {
    /// Hands `batch` over: the caller sends it as [`Cmd::Many`].
    fn hand_over(&mut self) -> Batch {
        self.gen += 1;
        std::mem::take(&mut self.batch)
    }
}

/// What the handle and the node thread share. The counters (`stats`,
/// written by the node thread at every turn) and the lock over the records
/// `send` copies (`pending`, taken by `send` and by the node thread) each
/// have cache lines of their own, apart from the release state both threads
/// touch. The records' bytes are on the heap either way.
#[derive(Debug, Default)]
pub struct ProducerShared {
    unacked_bytes: AtomicUsize,
    /// Highest released offset, -1 for none.
    acked: AtomicI64,
    lock: Mutex<()>,
    cv: Condvar,
    pub stats: CachePadded<Stats>,
    /// [`ProducerState::countable_stores`]: the stores connected now whose
    /// ACKs can be counted apart.
    stores_seen: AtomicUsize,
    pending: CachePadded<Mutex<Pending>>,
}

impl ProducerShared {
    fn notify(&self) {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.cv.notify_all();
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait(&self, slice: Duration) {
        let g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self.cv.wait_timeout(g, slice);
    }
}

/// A running producer. `send` never blocks while the buffer has room.
pub struct Producer {
    actor: Actor<Cmd>,
    shared: Arc<ProducerShared>,
    max_bytes: usize,
    /// `max_record_bytes`: larger values are refused.
    max_record: usize,
    address: String,
    topic: String,
    endpoint: String,
}

const SLICE: Duration = Duration::from_millis(100);

impl Producer {
    /// Starts the node thread; returns once the XPUB is bound.
    pub fn new(topic: &str, cfg: ProducerConfig) -> Result<Self> {
        cfg.validate()?;
        crate::node::config::check_name("topic", topic)?;
        let address = new_address();
        let shared = Arc::new(ProducerShared {
            acked: AtomicI64::new(-1),
            ..Default::default()
        });
        let ctx = zmq::Context::new();
        let (t, a, sh) = (topic.to_string(), address.clone(), shared.clone());
        let (max_bytes, max_record) = (cfg.max_unacked_bytes, cfg.max_record_bytes);
        let (actor, endpoint) =
            Actor::spawn("dafka-producer", &ctx.clone(), move |inbox, ready| {
                run(inbox, ready, &ctx, cfg, &t, &a, &sh)
            })?;
        Ok(Self {
            actor,
            shared,
            max_bytes,
            max_record,
            address,
            topic: topic.to_string(),
            endpoint,
        })
    }

    pub fn address(&self) -> &str {
        &self.address
    }
    pub fn topic(&self) -> &str {
        &self.topic
    }
    /// The XPUB endpoint (what `peers=[...]` of other nodes names).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }

    /// Stores connected now whose ACKs this producer can count apart
    /// ([`ProducerState::countable_stores`]): each of this project's stores
    /// (known by its subscription to every RECORD-BATCH), plus one for all
    /// the other stores together (C-reference ones, whose ACKs carry no
    /// address), seen on the XPUB, less those that left.
    pub fn stores_seen(&self) -> usize {
        self.shared.stores_seen.load(SeqCst)
    }

    /// Waits until `n` stores have connected ([`Producer::stores_seen`]) or
    /// `timeout` passes; returns how many have. Records sent before a store
    /// connects are not lost (it fetches them from this producer's buffer),
    /// but cost a second transfer: a producer about to send a burst waits here.
    pub fn wait_for_stores(&self, n: usize, timeout: Duration) -> Result<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            self.actor.check()?;
            let seen = self.stores_seen();
            let left = deadline.saturating_duration_since(Instant::now());
            if seen >= n || left.is_zero() {
                return Ok(seen);
            }
            self.shared.wait(SLICE.min(left));
        }
    }

    /// Highest offset released by ACKs (or sent, with `min_acks = 0`).
    pub fn acked_offset(&self) -> Option<u64> {
        u64::try_from(self.shared.acked.load(SeqCst)).ok()
    }

    /// Offsets handed out so far (the next `send` gets this one).
    pub fn next_offset(&self) -> u64 {
        self.shared.pending().next
    }

    pub fn unacked_bytes(&self) -> usize {
        self.shared.unacked_bytes.load(SeqCst)
    }

    /// Reserves buffer room for `n` bytes if it fits (an empty buffer always
    /// takes one batch, however large).
    fn try_reserve(&self, n: usize) -> bool {
        let u = &self.shared.unacked_bytes;
        let mut cur = u.load(SeqCst);
        loop {
            if cur != 0 && cur.saturating_add(n) > self.max_bytes {
                return false;
            }
            match u.compare_exchange_weak(cur, cur + n, SeqCst, SeqCst) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    fn reserve<E: From<Error>>(
        &self,
        n: usize,
        timeout: Option<Duration>,
        check: &mut impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            self.actor.check()?;
            if self.try_reserve(n) {
                return Ok(());
            }
            let now = Instant::now();
            if let Some(d) = deadline {
                if now >= d {
                    return Err(Error::BufferFull(format!(
                        "producer buffer full: {} unacknowledged bytes (max_unacked_bytes={}) \
                         after waiting {:.1}s; start a store, lower min_acks or raise \
                         max_unacked_bytes",
                        self.unacked_bytes(),
                        self.max_bytes,
                        timeout.unwrap_or_default().as_secs_f64()
                    ))
                    .into());
                }
                self.shared.wait(SLICE.min(d - now));
            } else {
                self.shared.wait(SLICE);
            }
            check()?;
        }
    }

    /// Publishes one record; returns its offset. Blocks while the buffer is
    /// full, up to `timeout` (None = forever), calling `check` every 100 ms.
    pub fn send_with<E: From<Error>>(
        &self,
        value: &[u8],
        timeout: Option<Duration>,
        mut check: impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<u64, E> {
        self.check_size(value.len())?;
        self.reserve(value.len(), timeout, &mut check)?;
        Ok(self.push(value)?)
    }

    /// Refuses a value over `max_record_bytes`, saying what to do.
    fn check_size(&self, n: usize) -> Result<()> {
        if n <= self.max_record {
            return Ok(());
        }
        Err(Error::TooLarge(format!(
            "a value of {n} bytes is over max_record_bytes={}: stores drop larger records \
             (their own max_record_bytes, 64 MiB by default), and the partition could not go \
             on past it; split the value, or raise max_record_bytes on the producer and on \
             every store",
            self.max_record
        )))
    }

    /// Publishes one record if the buffer has room: `Ok(None)` when it is
    /// full (then wait with [`Producer::send_with`]).
    pub fn try_send(&self, value: &[u8]) -> Result<Option<u64>> {
        self.check_size(value.len())?;
        if !self.try_reserve(value.len()) {
            self.actor.check()?;
            return Ok(None);
        }
        self.push(value).map(Some)
    }

    /// Adds a reserved record to the pending batch: hands the batch over
    /// first if the value does not fit in it, starts a new one (and wakes
    /// the node thread to take it) if it is empty. A batch never grows past
    /// the room it started with, unless for one larger value.
    fn push(&self, value: &[u8]) -> Result<u64> {
        let mut p = self.shared.pending();
        if p.closed {
            return Err(Error::Closed);
        }
        let off = p.next;
        if !p.batch.is_empty() && p.batch.bytes() + value.len() > COALESCE {
            let b = p.hand_over();
            self.actor.send(Cmd::Many(b))?;
        }
        if p.batch.is_empty() {
            p.batch = Batch::with_capacity(0, COALESCE.max(value.len()));
            self.actor.send(Cmd::Take(p.gen))?;
        }
        p.batch.push(value);
        p.next += 1;
        Ok(off)
    }

    /// [`Producer::send_with`] without interruption.
    pub fn send(&self, value: impl AsRef<[u8]>, timeout: Option<Duration>) -> Result<u64> {
        self.send_with(value.as_ref(), timeout, || Ok::<(), Error>(()))
    }

    /// Publishes a batch; returns the offsets of its first and last records
    /// (None for an empty batch). A batch larger than the buffer
    /// (`max_unacked_bytes`) goes in buffer-sized pieces, each reserved in
    /// turn: records another thread sends meanwhile may take offsets between
    /// two pieces, so only then are the batch's offsets not contiguous.
    pub fn send_batch_with<E: From<Error>>(
        &self,
        batch: Batch,
        timeout: Option<Duration>,
        mut check: impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<Option<(u64, u64)>, E> {
        // All or nothing: no record of a batch is sent if one is too large.
        self.check_size(batch.iter().map(<[u8]>::len).max().unwrap_or(0))?;
        let mut range: Option<(u64, u64)> = None;
        for piece in batch.split(self.max_bytes) {
            if piece.is_empty() {
                continue;
            }
            self.reserve(piece.bytes(), timeout, &mut check)?;
            let mut p = self.shared.pending();
            if p.closed {
                return Err(Error::Closed.into());
            }
            if !p.batch.is_empty() {
                let b = p.hand_over();
                self.actor.send(Cmd::Many(b))?;
            }
            let (first, n) = (p.next, piece.len() as u64);
            self.actor.send(Cmd::Many(piece))?;
            p.next += n;
            range = Some((range.map_or(first, |r| r.0), p.next - 1));
        }
        Ok(range)
    }

    /// Publishes a batch of values; returns the last offset (None for an
    /// empty batch).
    pub fn send_many(
        &self,
        values: Vec<Vec<u8>>,
        timeout: Option<Duration>,
    ) -> Result<Option<u64>> {
        let batch = values.iter().collect();
        let range = self.send_batch_with(batch, timeout, || Ok::<(), Error>(()))?;
        Ok(range.map(|(_, last)| last))
    }

    /// Records sent but not yet released.
    pub fn outstanding(&self) -> u64 {
        let next = self.next_offset();
        let acked = self.shared.acked.load(SeqCst);
        next.saturating_sub(u64::try_from(acked + 1).unwrap_or(0))
    }

    /// Waits up to `slice` for progress; returns the records still outstanding.
    pub fn wait_flush(&self, slice: Duration) -> Result<u64> {
        self.actor.check()?;
        let n = self.outstanding();
        if n > 0 {
            self.shared.wait(slice);
        }
        Ok(self.outstanding())
    }

    /// Waits until everything sent is released or `timeout` passes; returns
    /// the records still outstanding (0 = all delivered). A record is
    /// released once `min_acks` stores ACKed it, counted apart: this
    /// project's stores by their ADDRESSED-ACKs (or `rfc` ACKs), and all
    /// C-reference stores together as one (their zproto ACKs carry no
    /// address). With `min_acks` above that count nothing is released;
    /// the producer logs a warning once and counts such ACKs in
    /// `stats.min_acks_unreachable`.
    pub fn flush(&self, timeout: Duration) -> Result<u64> {
        let deadline = Instant::now() + timeout;
        loop {
            let n =
                self.wait_flush(SLICE.min(deadline.saturating_duration_since(Instant::now())))?;
            if n == 0 || Instant::now() >= deadline {
                return Ok(n);
            }
        }
    }

    /// `Ok` while the node thread runs.
    pub fn check(&self) -> Result<()> {
        self.actor.check()
    }

    /// Connects to one more peer's XPUB endpoint (static peers added later).
    pub fn connect(&self, endpoint: &str) -> Result<()> {
        crate::node::config::check_peer(endpoint)?;
        self.actor.send(Cmd::Connect(endpoint.to_string()))
    }

    /// Publishes what was sent and stops the node thread. A `send` from
    /// another thread is refused (`Error::Closed`) from now on: the thread
    /// takes only what was sent before, and every offset `send` returned is
    /// published.
    pub fn close(&self) -> Result<()> {
        self.shared.pending().closed = true;
        let r = self.actor.close();
        self.shared.notify();
        r
    }
}

const BATCH: usize = 4096;

fn run(
    inbox: &mut Inbox<Cmd>,
    ready: &mut Ready<String>,
    ctx: &zmq::Context,
    cfg: ProducerConfig,
    topic: &str,
    address: &str,
    shared: &ProducerShared,
) -> Result<()> {
    let tb = topic.as_bytes();
    let node = cfg.socket_config();
    let mut core = Core::open(ctx, &node, NodeType::Producer, address, &[tb])?;
    // Requesters whose FETCHes we answer in DIRECT-RECORD-BATCHes.
    let mut takers = Takers::batches();
    // Every unsubscription too, also when one of several stores leaves: the
    // count of stores connected goes down again.
    set_int_option(&mut core.xpub, zmq_sys::ZMQ_XPUB_VERBOSER, 1)?;
    ready.send(core.endpoint.clone());
    let mut st = ProducerState::new(tb, address.as_bytes(), cfg.min_acks, cfg.head_interval);
    let stats = &shared.stats;
    let mut frames = Frames::default();
    let mut outs = Vec::new();
    loop {
        if inbox.terminated() {
            // Closing: what was sent goes out (the XPUB lingers for it);
            // waiting for stores' ACKs is `flush`'s business.
            let mut sent = 0usize;
            while let Some(cmd) = inbox.try_recv() {
                if let Some(b) = command_batch(cmd, shared) {
                    sent += b.len();
                    publish(&mut core, &mut st, cfg.record_batches, b)?;
                }
            }
            Stats::add(&stats.records_sent, sent as u64);
            return Ok(());
        }
        // Commands: publish up to BATCH records.
        let mut sent = 0usize;
        let mut freed = 0usize;
        // Released offsets, not freed bytes, tell whether to report: empty
        // records free none.
        let released = st.released_upto();
        while sent < BATCH {
            match inbox.try_recv() {
                Some(Cmd::Connect(ep)) => core.connect(&ep),
                Some(cmd) => {
                    if let Some(b) = command_batch(cmd, shared) {
                        sent += b.len();
                        freed += publish(&mut core, &mut st, cfg.record_batches, b)?;
                    }
                }
                None => break,
            }
        }
        if sent > 0 {
            Stats::add(&stats.records_sent, sent as u64);
            st.arm_head(Instant::now());
            if st.released_upto() != released {
                release(shared, &st, freed);
            }
        }

        core.count_unsendable(stats);
        let now = Instant::now();
        let timeout = if inbox.pending() > 0 {
            0
        } else {
            poll_timeout(now, [st.next_head(), core.disc.next_deadline()])
        };
        let r = core.poll(inbox, timeout, true)?;
        let (xpub_in, sub_in, beacon_in) = (r.xpub, r.sub, r.beacon);

        if xpub_in {
            // Subscriptions: count the stores' (every RECORD, `M`) and know
            // the consumers (`L` + address); who leaves unsubscribes.
            // Bounded per turn, as the SUB: a flood of subscriptions must not
            // keep the loop from everything else.
            for _ in 0..BATCH {
                if !frames.recv(&core.xpub)? {
                    break;
                }
                let (s, n) = frames.slices();
                match Subscription::decode(s[0]) {
                    Ok(sub) if n == 1 && st.on_store_subscription(sub.prefix, sub.subscribe) => {
                        // A store connecting: what we published before its
                        // subscription arrived never reached it, and stores'
                        // GET-HEADS never reach producers. Tell it now, not
                        // a `head_interval` later.
                        if sub.subscribe && sub.prefix == b"M" {
                            if let Some(h) = st.head() {
                                Stats::add(&stats.heads_sent, 1);
                                core.emit(&h)?;
                            }
                        }
                        shared.stores_seen.store(st.countable_stores(), SeqCst);
                        shared.notify();
                    }
                    Ok(sub) if n == 1 => {
                        takers.on_subscription(sub.prefix, sub.subscribe);
                        if let Some(h) = st.on_subscription(sub.prefix, sub.subscribe) {
                            core.emit(&h)?;
                        }
                    }
                    _ => {}
                }
            }
        }
        if sub_in {
            let mut freed = 0;
            let released = st.released_upto();
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
                    Ok((Message::Ack(a) | Message::AddressedAck(a), _)) => {
                        if a.topic == address.as_bytes() && a.subject == tb {
                            Stats::add(&stats.acks_received, 1);
                            if let AckReach::Unreachable { first } = st.ack_reach(&a) {
                                Stats::add(&stats.min_acks_unreachable, 1);
                                if first {
                                    tracing::warn!(
                                        "producer {address} of topic {topic:?}: min_acks={} \
                                         cannot be reached by the stores whose ACKs it can \
                                         count ({}): C-reference stores' ACKs carry no \
                                         address and count as one store together; records \
                                         are not released until more of dafka's stores ACK \
                                         (PROTOCOL.md, ADDRESSED-ACK)",
                                        st.min_acks(),
                                        st.countable_stores(),
                                    );
                                }
                            }
                            freed += st.on_ack(&a);
                        } else {
                            Stats::add(&stats.ignored, 1);
                        }
                    }
                    Ok((Message::Fetch(f), _)) => {
                        Stats::add(&stats.fetches_received, 1);
                        let range = st.fetch_range(&f);
                        let values = range.clone().map_while(|off| st.get(off));
                        let dest = Dest::Direct {
                            to: f.address,
                            partition: address.as_bytes(),
                            topic: tb,
                        };
                        let batches = takers.takes(f.address);
                        let sent = core.send_records(dest, range.start, values, batches)?;
                        Stats::add(&stats.direct_records_sent, sent as u64);
                    }
                    Ok((Message::GetHeads(g), _)) if topic_matches(tb, g.topic) => {
                        outs.clear();
                        outs.extend(st.on_get_heads(&g));
                        core.emit_all(&outs)?;
                    }
                    Ok(_) => Stats::add(&stats.ignored, 1),
                    Err(_) => Stats::add(&stats.malformed, 1),
                }
            }
            if st.released_upto() != released {
                release(shared, &st, freed);
            }
        }
        if beacon_in {
            core.on_beacons(stats)?;
        }
        let now = Instant::now();
        if let Some(h) = st.on_timer(now) {
            Stats::add(&stats.heads_sent, 1);
            core.emit(&h)?;
        }
        if core.disc.next_deadline().is_some_and(|d| d <= now) {
            core.on_timer(now, stats)?;
        }
    }
}

/// The records a command brings: a [`Cmd::Many`]'s batch, or the pending
/// batch for a [`Cmd::Take`] still of its generation (else its records went
/// with a later command).
fn command_batch(cmd: Cmd, shared: &ProducerShared) -> Option<Batch> {
    match cmd {
        Cmd::Many(b) => Some(b),
        Cmd::Take(gen) => {
            let mut p = shared.pending();
            (p.gen == gen).then(|| p.hand_over())
        }
        Cmd::Connect(_) => None,
    }
}

/// Publishes a batch from the next offset on and holds it; returns the
/// bytes released at once. In RECORD-BATCHes if `batches`
/// (`record_batches`), else as one RECORD per record.
fn publish(core: &mut Core, st: &mut ProducerState, batches: bool, b: Batch) -> Result<usize> {
    let dest = Dest::Live { topic: &st.topic };
    core.send_records(dest, st.next_offset(), b.iter(), batches)?;
    Ok(st.append_batch(b).1)
}

fn release(shared: &ProducerShared, st: &ProducerState, freed: usize) {
    shared.unacked_bytes.fetch_sub(freed, SeqCst);
    let acked = i64::try_from(st.released_upto()).unwrap_or(i64::MAX) - 1;
    shared.acked.store(acked, SeqCst);
    shared.notify();
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";
    const C: &[u8] = b"9E51FBAE55A649C1A50C0B360F3FF7AE";

    fn fetch(seq: u64, count: u32) -> Fetch<'static> {
        Fetch {
            topic: P,
            address: C,
            subject: b"hello",
            sequence: seq,
            count,
        }
    }

    fn ack(store: Option<&'static [u8]>, seq: u64) -> Ack<'static> {
        Ack {
            topic: P,
            address: store,
            subject: b"hello",
            sequence: seq,
        }
    }

    fn seqs(outs: &[Out]) -> Vec<(u64, Vec<u8>)> {
        outs.iter()
            .map(|o| match o {
                Out::DirectRecord {
                    sequence,
                    content,
                    to,
                    ..
                } => {
                    assert_eq!(to, C);
                    (*sequence, content.clone())
                }
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    // C reference feature: "FETCH 0 → DIRECT-RECORD".
    #[test]
    fn fetch_zero_answers_direct_record() {
        let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
        st.append(b"CONTENT");
        let out = st.on_fetch(&fetch(0, 1));
        assert_eq!(
            out,
            vec![Out::DirectRecord {
                to: C.to_vec(),
                partition: P.to_vec(),
                subject: b"hello".to_vec(),
                sequence: 0,
                content: b"CONTENT".to_vec()
            }]
        );
        // Another partition or topic: not ours.
        let mut other = fetch(0, 1);
        other.subject = b"hello2";
        assert!(st.on_fetch(&other).is_empty());
    }

    #[test]
    fn fetch_returns_exactly_the_range_after_partial_ack() {
        let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
        for i in 0..10u8 {
            st.append(&vec![i; usize::from(i) + 1]);
        }
        assert_eq!(st.on_ack(&ack(Some(b"S1"), 3)), 1 + 2 + 3 + 4);
        assert_eq!(st.released_upto(), 4);
        let got = seqs(&st.on_fetch(&fetch(5, 3)));
        assert_eq!(
            got,
            (5..8u8)
                .map(|i| (u64::from(i), vec![i; usize::from(i) + 1]))
                .collect::<Vec<_>>()
        );
        // Released offsets are not served; the range is clipped to what exists.
        let got = seqs(&st.on_fetch(&fetch(2, 100)));
        assert_eq!(got.first().map(|g| g.0), Some(4));
        assert_eq!(got.last().map(|g| g.0), Some(9));
        assert!(st.on_fetch(&fetch(10, 5)).is_empty());
        assert!(st.on_fetch(&fetch(u64::MAX, u32::MAX)).is_empty());
    }

    #[test]
    fn a_consumer_is_not_answered_from_past_what_stores_hold_for_it() {
        let lsub = [b"L".as_slice(), C].concat();
        let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
        for i in 0..10u8 {
            st.append(&[i]);
        }
        st.on_ack(&ack(Some(b"S1"), 3));
        assert_eq!(st.released_upto(), 4);
        // A store (no `L` subscription) new to the partition starts at our base.
        assert_eq!(seqs(&st.on_fetch(&fetch(0, 100)))[0].0, 4);
        // A consumer below the base: stores hold 0..4; nothing from us, or the
        // consumer would skip them while the stores are away.
        st.on_subscription(&lsub, true);
        st.on_subscription(&lsub, true); // a second connection of the same consumer
        assert!(st.on_fetch(&fetch(0, 100)).is_empty());
        assert!(st.on_fetch(&fetch(3, 2)).is_empty());
        // From the base on, the consumer is answered as before.
        assert_eq!(seqs(&st.on_fetch(&fetch(4, 2))).len(), 2);
        st.on_subscription(&lsub, false);
        assert!(
            st.on_fetch(&fetch(0, 100)).is_empty(),
            "still connected once"
        );
        st.on_subscription(&lsub, false);
        assert_eq!(
            seqs(&st.on_fetch(&fetch(0, 100))).len(),
            6,
            "gone: unknown again"
        );
        // Other prefixes say nothing about consumers.
        st.on_subscription(&[b"D".as_slice(), C].concat(), true);
        st.on_subscription(b"L", true);
        assert_eq!(seqs(&st.on_fetch(&fetch(0, 100))).len(), 6);
    }

    /// `send` starts a pending batch with room for 64 KiB; the node thread
    /// takes it at once when idle. Held until stores ACK, each such batch
    /// must cost what its records use, not 64 KiB each (a producer sending a
    /// record a second with no store up would hold 64 KiB per record).
    #[test]
    fn batches_held_cost_what_their_records_use() {
        let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
        for i in 0..100u8 {
            let mut b = Batch::with_capacity(0, COALESCE);
            b.push(&[i; 100]);
            st.append_batch(b);
        }
        assert_eq!(st.held_bytes(), 100 * 100);
        assert!(
            st.held_allocated() <= 100 * (100 + 8),
            "{}",
            st.held_allocated()
        );
        assert_eq!(st.get(42), Some(&[42u8; 100][..]));
    }

    #[test]
    fn min_acks_counts_distinct_stores() {
        let mut st = ProducerState::new(b"hello", P, 2, Duration::from_secs(1));
        for _ in 0..5 {
            st.append(&[0; 10]);
        }
        assert_eq!(st.on_ack(&ack(Some(b"S1"), 4)), 0);
        assert_eq!(st.on_ack(&ack(Some(b"S1"), 4)), 0, "same store twice");
        assert_eq!(
            st.on_ack(&ack(None, 1)),
            20,
            "anonymous store is a second one"
        );
        assert_eq!(st.released_upto(), 2);
        assert_eq!(
            st.on_ack(&ack(Some(b"S2"), 9)),
            30,
            "clamped to the last offset"
        );
        assert_eq!(st.held_bytes(), 0);
        let mut zero = ProducerState::new(b"hello", P, 0, Duration::from_secs(1));
        assert_eq!(zero.append(&[1, 2, 3]), (0, 3));
        assert_eq!(zero.released_upto(), 1);
    }

    /// Address-less ACKs (C-reference stores in zproto) count as one store
    /// together; this project's stores are known by their `R` subscription
    /// and counted apart. A `min_acks` above what can be counted is said.
    #[test]
    fn countable_stores_are_ours_plus_one_for_every_c_store() {
        let mut st = ProducerState::new(b"hello", P, 2, Duration::from_secs(1));
        assert_eq!(st.countable_stores(), 0);
        assert!(!st.on_store_subscription(b"Mhello", true), "a consumer's");
        assert!(!st.on_store_subscription(b"Rhello", true), "a consumer's");
        // Two C stores: every RECORD, no RECORD-BATCH.
        assert!(st.on_store_subscription(b"M", true));
        assert!(st.on_store_subscription(b"M", true));
        assert_eq!(st.countable_stores(), 1);
        st.append(&[0; 10]);
        assert_eq!(
            st.ack_reach(&ack(None, 0)),
            AckReach::Unreachable { first: true }
        );
        assert_eq!(
            st.ack_reach(&ack(None, 0)),
            AckReach::Unreachable { first: false },
            "warned once"
        );
        assert_eq!(st.ack_reach(&ack(Some(b"S1"), 0)), AckReach::Counted);
        // One of ours joins: two can be counted, min_acks=2 is in reach.
        st.on_store_subscription(b"M", true);
        st.on_store_subscription(b"R", true);
        assert_eq!(st.countable_stores(), 2);
        assert_eq!(st.ack_reach(&ack(None, 0)), AckReach::Counted);
        // Both C stores leave: only ours remains.
        st.on_store_subscription(b"M", false);
        st.on_store_subscription(b"M", false);
        assert_eq!(st.countable_stores(), 1);
        st.on_store_subscription(b"R", false);
        st.on_store_subscription(b"M", false);
        assert_eq!(st.countable_stores(), 0);
        st.on_store_subscription(b"M", false);
        assert_eq!(st.countable_stores(), 0, "never below zero");
        let mut one = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
        one.on_store_subscription(b"M", true);
        assert_eq!(one.ack_reach(&ack(None, 0)), AckReach::Counted);
    }

    #[test]
    fn acks_from_made_up_addresses_are_bounded() {
        let mut st = ProducerState::new(b"hello", P, 2, Duration::from_secs(1));
        for _ in 0..10 {
            st.append(&[0; 10]);
        }
        let names: Vec<Vec<u8>> = (0..3 * MAX_ACKERS)
            .map(|i| format!("F{i}").into_bytes())
            .collect();
        let fake = |st: &mut ProducerState, n: &[u8], seq| {
            st.on_ack(&Ack {
                topic: P,
                address: Some(n),
                subject: b"hello",
                sequence: seq,
            })
        };
        // Fakes at offset 0 release 0 (min_acks of them agree), then fill the
        // table; past it, new ones are refused.
        for n in &names {
            fake(&mut st, n, 0);
        }
        assert_eq!(st.acks.len(), MAX_ACKERS);
        assert_eq!(st.released_upto(), 1);
        // Those at 0 can release nothing more: they go to make room for real
        // stores, whose ACKs still count.
        assert_eq!(st.on_ack(&ack(Some(b"S1"), 9)), 0);
        assert_eq!(st.on_ack(&ack(Some(b"S2"), 9)), 90);
        assert_eq!(st.held_bytes(), 0);
        assert!(st.acks.len() <= MAX_ACKERS);
    }

    mod held {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Records sent one at a time and in batches, ACKed in any steps:
            /// every record not released reads back as sent, every released one
            /// is gone, and the bytes released and held add up, against a model
            /// that keeps one value per offset.
            #[test]
            fn held_batches_read_and_release_like_one_value_per_offset(
                ops in proptest::collection::vec(
                    proptest::prop_oneof![
                        proptest::collection::vec(proptest::num::u8::ANY, 0..300)
                            .prop_map(|v| (0u8, vec![v], 0u64)),
                        proptest::collection::vec(
                            proptest::collection::vec(proptest::num::u8::ANY, 0..50), 0..40)
                            .prop_map(|vs| (1u8, vs, 0u64)),
                        (0u64..2000).prop_map(|upto| (2u8, Vec::new(), upto)),
                    ],
                    1..60,
                ),
            ) {
                let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
                let mut model: Vec<Vec<u8>> = Vec::new();
                let mut released = 0usize;
                for (kind, values, upto) in ops {
                    match kind {
                        0 => {
                            let (off, freed) = st.append(&values[0]);
                            prop_assert_eq!((off, freed), (model.len() as u64, 0));
                            model.push(values[0].clone());
                        }
                        1 => {
                            let (off, freed) = st.append_batch(values.iter().collect());
                            prop_assert_eq!((off, freed), (model.len() as u64, 0));
                            model.extend(values);
                        }
                        _ => {
                            let freed = st.on_ack(&ack(Some(b"S1"), upto));
                            let now = usize::try_from(
                                upto.saturating_add(1).min(model.len() as u64)
                            ).unwrap().max(released);
                            let want: usize = model[released..now].iter().map(Vec::len).sum();
                            prop_assert_eq!(freed, want);
                            released = now;
                        }
                    }
                    prop_assert_eq!(st.released_upto(), released as u64);
                    let held: usize = model[released..].iter().map(Vec::len).sum();
                    prop_assert_eq!(st.held_bytes(), held);
                    for (off, v) in model.iter().enumerate() {
                        let got = st.get(off as u64);
                        if off < released {
                            prop_assert_eq!(got, None);
                        } else {
                            prop_assert_eq!(got, Some(v.as_slice()));
                        }
                    }
                    prop_assert_eq!(st.get(model.len() as u64), None);
                }
            }
        }
    }

    // C reference feature: producer answers GET-HEADS with DIRECT-HEAD.
    #[test]
    fn get_heads_answered_after_first_record() {
        let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
        let g = GetHeads {
            topic: b"hello",
            address: C,
        };
        assert!(st.on_get_heads(&g).is_empty());
        st.append(b"a");
        st.append(b"b");
        assert_eq!(
            st.on_get_heads(&g),
            vec![Out::DirectHead {
                to: C.to_vec(),
                partition: P.to_vec(),
                subject: b"hello".to_vec(),
                sequence: 1
            }]
        );
    }

    /// A consumer connecting (its `L<address>` subscription) once we have
    /// published is told our head: what we published before its
    /// subscriptions arrived never reached it.
    #[test]
    fn a_consumer_connecting_after_the_first_record_is_told_the_head() {
        let lsub = [b"L".as_slice(), C].concat();
        let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(600));
        assert_eq!(st.on_subscription(&lsub, true), None, "nothing published");
        st.on_subscription(&lsub, false);
        st.append(b"a");
        st.append(b"b");
        let head = Some(Out::DirectHead {
            to: C.to_vec(),
            partition: P.to_vec(),
            subject: b"hello".to_vec(),
            sequence: 1,
        });
        assert_eq!(st.on_subscription(&lsub, true), head);
        assert_eq!(st.on_subscription(&lsub, true), head, "a second connection");
        assert_eq!(st.on_subscription(&lsub, false), None);
        // Stores' subscriptions and the bare prefix are not consumers.
        assert_eq!(st.on_subscription(b"M", true), None);
        assert_eq!(
            st.on_subscription(&[b"D".as_slice(), C].concat(), true),
            None
        );
        assert_eq!(st.on_subscription(b"L", true), None);
    }

    /// Empty values are records too: released by an ACK (or at once with
    /// `min_acks = 0`), they must show in `acked_offset` and let `flush`
    /// return 0. The node thread used to publish a release only when it
    /// freed bytes, so a release of empty records only never reached
    /// `acked_offset`, and `flush` waited for them until it timed out.
    #[test]
    fn empty_records_released_are_reported_and_flushed() {
        let p = Producer::new(
            "t",
            ProducerConfig {
                min_acks: 0,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(p.send(b"", None).unwrap(), 0);
        assert_eq!(
            p.flush(Duration::from_secs(2)).unwrap(),
            0,
            "nothing outstanding"
        );
        assert_eq!(p.acked_offset(), Some(0));
        p.close().unwrap();
    }

    // C reference feature: "HEAD at intervals".
    #[test]
    fn head_at_intervals_after_first_record() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut st = ProducerState::new(b"hello", P, 1, s);
        st.arm_head(t0);
        assert_eq!(st.next_head(), None, "no HEAD before the first record");
        st.append(b"x");
        st.arm_head(t0);
        assert_eq!(st.on_timer(t0), None);
        let h = st.on_timer(t0 + s).expect("HEAD after one interval");
        assert_eq!(
            h,
            Out::Head {
                topic: b"hello".to_vec(),
                partition: P.to_vec(),
                sequence: 0
            }
        );
        st.append(b"y");
        assert_eq!(st.on_timer(t0 + s + s / 2), None);
        assert!(matches!(
            st.on_timer(t0 + 2 * s),
            Some(Out::Head { sequence: 1, .. })
        ));
    }
}
