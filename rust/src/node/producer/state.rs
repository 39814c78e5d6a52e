//! The producer's protocol decisions as a pure state machine, no sockets:
//! the offsets it gives, the records it holds for retransmission until
//! `min_acks` stores ACKed them ([`ProducerState::on_ack`]), its answers to
//! FETCH ([`ProducerState::on_fetch`]) and GET-HEADS, when it sends a HEAD,
//! and what the subscriptions on its XPUB say: the stores and consumers
//! connected, who hears its records live and in which messages ([`Routes`]),
//! and in which form each requester takes FETCH answers ([`AnswerForms`]).
//! The loop (`run.rs`) hands it each message ([`ProducerState::on_message`])
//! and subscription ([`ProducerState::on_subscription`]) and sends what it
//! returns.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::node::answers::{AnswerForms, Dest, Reply};
use crate::node::batch::Batch;
use crate::node::config::MAX_ACKERS;
use crate::node::out::{Fate, Out};
use crate::node::secure::Sender;
use crate::wire::{Ack, Fetch, GetHeads, Kind, Message, Subscription};

use super::routes::Routes;

/// Pure producer protocol state.
#[derive(Debug)]
pub struct ProducerState {
    pub(super) topic: Vec<u8>,
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
    /// Highest offset each store ACKed (cumulative), by [`Acker`]: its key
    /// in secure mode, else its address (`b""` = an address-less zproto
    /// ACK, counted as one anonymous store).
    acks: HashMap<Vec<u8>, u64>,
    /// Consumers connected now (their `L<address>` subscriptions), with how
    /// many connections each has.
    consumers: HashMap<Vec<u8>, u32>,
    /// Stores connected now: every one subscribes every RECORD (`M`); this
    /// project's also every RECORD-BATCH (`R`), and ACK with their address.
    stores_all: usize,
    stores_ours: usize,
    /// Secure mode: the distinct store keys subscribed (what the XPUB's
    /// connections say), which replace the counts above.
    stores_keyed: Option<usize>,
    /// Whether the address-less ACKs' shortfall was logged.
    warned_uncountable: bool,
    /// Who hears our records live, and in which messages.
    routes: Routes,
    /// How each requester's FETCHes are answered.
    forms: AnswerForms,
    /// Bytes released by ACKs since [`ProducerState::take_freed`].
    freed: usize,
    /// ACKs past the last offset sent (an earlier producer of this
    /// partition wrote there), and address-less ACKs while `min_acks` is out
    /// of their reach ([`AckReach::Unreachable`]): counted for the stats.
    pub acks_ahead: u64,
    pub min_acks_unreachable: u64,
}

/// What the loop does with a message after [`ProducerState::on_message`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step<'m> {
    /// Nothing more: it was this.
    Done(Fate),
    /// A FETCH: read the subscriptions waiting on the XPUB (the requester's
    /// may be among them), then send [`ProducerState::on_fetch`]'s answer.
    Answer(Fetch<'m>),
}

/// What a subscription on the XPUB changed ([`ProducerState::on_subscription`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Heard {
    /// A HEAD for a store that connected, or a DIRECT-HEAD for a consumer
    /// that did, once we have published.
    pub send: Option<Out>,
    /// The stores connected changed ([`ProducerState::countable_stores`]).
    pub stores_changed: bool,
}

/// Who an ACK counts as toward `min_acks` ([`ProducerState::on_ack`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acker<'a> {
    /// Secure mode: the key that authenticated the store that sent it.
    Key(&'a [u8; 32]),
    /// Insecure mode: the store its address names (ADDRESSED-ACK), or, for
    /// address-less ACKs (C-reference stores), all of those together. Anyone
    /// can send any address here: an open cluster trusts its peers.
    Address,
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
            stores_keyed: None,
            warned_uncountable: false,
            routes: Routes::new(topic),
            forms: AnswerForms::default(),
            freed: 0,
            acks_ahead: 0,
            min_acks_unreachable: 0,
        }
    }

    /// A subscription or unsubscription on the XPUB: it tells who hears our
    /// records ([`Routes`]), the stores connected (each subscribes every
    /// RECORD; a store connecting is told our head at once: what we
    /// published before its subscription arrived never reached it, and
    /// stores' GET-HEADS never reach producers), the consumers connected
    /// (`L` + address, see [`ProducerState::on_consumer`]) and the form of
    /// each requester's FETCH answers ([`AnswerForms`]).
    pub fn on_subscription(&mut self, sub: &Subscription<'_>) -> Heard {
        self.routes.on_subscription(sub);
        if self.on_store_subscription(sub) {
            let joined = sub.subscribe && sub.prefix.every(Kind::Record);
            return Heard {
                send: if joined { self.head() } else { None },
                stores_changed: true,
            };
        }
        self.forms.on_subscription(sub);
        Heard {
            send: self.on_consumer(sub),
            stores_changed: false,
        }
    }

    /// A store's subscription to every RECORD (`M`) or every RECORD-BATCH
    /// (`R`, this project's stores alone) came or went; false for any other.
    fn on_store_subscription(&mut self, sub: &Subscription<'_>) -> bool {
        let n = if sub.prefix.every(Kind::Record) {
            &mut self.stores_all
        } else if sub.prefix.every(Kind::RecordBatch) {
            &mut self.stores_ours
        } else {
            return false;
        };
        *n = if sub.subscribe {
            n.saturating_add(1)
        } else {
            n.saturating_sub(1)
        };
        true
    }

    /// Who hears our records live.
    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    /// Secure mode: `n` distinct store keys are subscribed now.
    pub fn set_keyed_stores(&mut self, n: usize) {
        self.stores_keyed = Some(n);
    }

    /// The stores connected now whose ACKs this producer can count apart.
    /// Secure mode: the distinct store keys (ACKs count by key). Insecure:
    /// this project's stores (their ACKs name them), plus at most one for
    /// all the others (C-reference stores, whose zproto ACKs carry no
    /// address and so count as one store together).
    pub fn countable_stores(&self) -> usize {
        if let Some(n) = self.stores_keyed {
            return n;
        }
        let ours = self.stores_ours.min(self.stores_all);
        ours + usize::from(self.stores_all > ours)
    }

    /// Whether an ACK could help reach `min_acks`: an address-less one
    /// (from C-reference stores) counts as one store at most, so with
    /// `min_acks` above [`ProducerState::countable_stores`] nothing is
    /// released however many such stores hold the records.
    pub fn ack_reach(&mut self, ack: &Ack<'_>) -> AckReach {
        let keyed = self.stores_keyed.is_some();
        if keyed || ack.address.is_some() || self.min_acks <= self.countable_stores().max(1) {
            return AckReach::Counted;
        }
        let first = !self.warned_uncountable;
        self.warned_uncountable = true;
        AckReach::Unreachable { first }
    }

    pub fn min_acks(&self) -> usize {
        self.min_acks
    }

    /// A consumer's subscription (`L` + its address, made on every peer)
    /// came or went. A consumer that connects once we have published is told
    /// our head (a DIRECT-HEAD): records published before its subscriptions
    /// arrived never reached it, and its GET-HEADS may have come before our
    /// first record (then unanswered) or before our own connection to it;
    /// with HEADs far apart it would not hear of them for a `head_interval`.
    fn on_consumer(&mut self, sub: &Subscription<'_>) -> Option<Out> {
        let consumer = sub.prefix.keyed(Kind::StoreHello)?;
        if sub.subscribe {
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

    /// Starts the partition at `first` (nothing held, everything below it
    /// released): a producer going on where an earlier one of the same
    /// address stopped.
    pub fn start_at(&mut self, first: u64) {
        debug_assert!(self.held.is_empty());
        self.base = first;
        self.next = first;
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

    /// An ACK from `from`: returns the bytes released (0 if nothing moved or
    /// it was not for us). ACKs count once per [`Acker`]: in secure mode per
    /// store key, whatever addresses they name, so one store cannot make up
    /// the others `min_acks` waits for.
    pub fn on_ack(&mut self, ack: &Ack<'_>, from: Acker<'_>) -> usize {
        if ack.topic != self.address.as_slice() || ack.subject != self.topic.as_slice() {
            return 0;
        }
        let Some(last) = self.last() else { return 0 };
        let seq = ack.sequence.min(last);
        let who = match from {
            Acker::Key(k) => &k[..],
            Acker::Address => ack.address.unwrap_or_default(),
        };
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
        if f.partition != self.address.as_slice() || f.topic != self.topic.as_slice() {
            return 0..0;
        }
        let consumer = self.consumers.contains_key(f.requester);
        if f.sequence < self.base && self.min_acks > 0 && consumer {
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

    /// Bytes of the held records `range` together (those held: a FETCH
    /// answer's, [`ProducerState::get`] of each), a batch's span at a time.
    pub fn body_bytes(&self, range: std::ops::Range<u64>) -> u64 {
        let start = range.start.max(self.base);
        let i = self.held.partition_point(|(first, _)| *first <= start);
        let mut total = 0;
        for (first, b) in self.held.iter().skip(i.saturating_sub(1)) {
            if *first >= range.end {
                break;
            }
            let at = |o: u64| {
                usize::try_from(o.saturating_sub(*first)).map_or(b.len(), |i| i.min(b.len()))
            };
            total += b.span(at(start), at(range.end));
        }
        total as u64
    }

    pub fn topic(&self) -> &[u8] {
        &self.topic
    }

    /// The answer to a FETCH: exactly the requested records we still hold
    /// ([`ProducerState::fetch_range`]), byte-identical, ascending, read in
    /// place, to the requester, in the form it takes; None while its
    /// subscriptions are not read yet (it FETCHes again, [`AnswerForms`]).
    pub fn on_fetch<'a>(
        &'a self,
        f: &Fetch<'a>,
    ) -> Option<Reply<'a, impl Iterator<Item = &'a [u8]> + 'a>> {
        let form = self.forms.form(f.requester)?;
        let range = self.fetch_range(f);
        Some(Reply {
            dest: Dest::Direct {
                to: f.requester,
                partition: &self.address,
                topic: &self.topic,
            },
            first: range.start,
            bodies: range.map_while(|off| self.get(off)),
            form,
        })
    }

    /// One message from a peer (the one receive path hands each over): an
    /// ACK of our partition, a FETCH to answer, a GET-HEADS of our topic;
    /// anything else is not for a producer. Answers go to `out`.
    pub fn on_message<'m>(
        &mut self,
        msg: Message<'m>,
        from: Sender,
        out: &mut Vec<Out>,
    ) -> Step<'m> {
        match msg {
            Message::Ack(a) | Message::AddressedAck(a) => Step::Done(self.on_ack_from(&a, from)),
            Message::Fetch(f) => Step::Answer(f),
            Message::GetHeads(g) if g.topic == self.topic.as_slice() => {
                out.extend(self.on_get_heads(&g));
                Step::Done(Fate::Taken(0))
            }
            _ => Step::Done(Fate::Ignored),
        }
    }

    /// An ACK as it arrived from `from`: counted toward `min_acks` if it is
    /// of our partition; a `min_acks` it cannot help reach, and an ACK past
    /// what we sent, are said once and counted.
    fn on_ack_from(&mut self, a: &Ack<'_>, from: Sender) -> Fate {
        if a.topic != self.address.as_slice() || a.subject != self.topic.as_slice() {
            return Fate::Ignored;
        }
        if let AckReach::Unreachable { first } = self.ack_reach(a) {
            self.min_acks_unreachable += 1;
            if first {
                tracing::warn!(
                    "producer {} of topic {:?}: min_acks={} cannot be reached by the stores \
                     whose ACKs it can count ({}): C-reference stores' ACKs carry no address \
                     and count as one store together; records are not released until more of \
                     dafka's stores ACK, or lower min_acks (PROTOCOL.md, ADDRESSED-ACK)",
                    String::from_utf8_lossy(&self.address),
                    String::from_utf8_lossy(&self.topic),
                    self.min_acks,
                    self.countable_stores(),
                );
            }
        }
        if self.last().is_none_or(|last| a.sequence > last) {
            self.ack_ahead(a.sequence);
        }
        let acker = match &from {
            Sender::Key(k) => Acker::Key(k),
            Sender::Anyone => Acker::Address,
        };
        self.freed += self.on_ack(a, acker);
        Fate::Taken(0)
    }

    /// A store ACKed `acked`, past the last offset this producer sent: it
    /// holds records of this partition that this producer did not write (an
    /// earlier producer of the same `address_seed`), and drops this one's
    /// records at those offsets as duplicates, whatever they hold. Counted,
    /// and logged the first time.
    fn ack_ahead(&mut self, acked: u64) {
        self.acks_ahead += 1;
        if self.acks_ahead > 1 {
            return;
        }
        let sent = self
            .last()
            .map_or("none yet".to_string(), |l| format!("up to {l}"));
        tracing::warn!(
            "producer {} of topic {:?}: a store ACKed offset {acked}, past what this producer \
             sent ({sent}): the stores hold records of this partition that it did not write, \
             and drop its records at offsets up to {acked} as duplicates (counted in \
             stats()[\"acks_ahead\"]). An earlier producer of the same address_seed wrote them: \
             leave first_offset unset to go on where the partition ends (harmless when \
             rewriting the same records, as a retried Spark task does)",
            String::from_utf8_lossy(&self.address),
            String::from_utf8_lossy(&self.topic),
        );
    }

    /// The bytes ACKs released since the last call.
    pub fn take_freed(&mut self) -> usize {
        std::mem::take(&mut self.freed)
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

#[cfg(test)]
mod tests;
