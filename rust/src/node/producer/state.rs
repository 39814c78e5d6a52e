//! The producer's protocol decisions as a pure state machine, no sockets:
//! the offsets it gives, the records it holds for retransmission until
//! `min_acks` stores ACKed them ([`ProducerState::on_ack`]), its answers to
//! FETCH ([`ProducerState::on_fetch`]) and GET-HEADS, and when it sends a
//! HEAD. The loop (`run.rs`) feeds it and sends what it returns.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use crate::node::batch::Batch;
use crate::node::config::MAX_ACKERS;
use crate::node::out::Out;
use crate::wire::{Ack, Fetch, GetHeads};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::producer::COALESCE;

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
        assert_eq!(
            st.on_ack(&ack(Some(b"S1"), 3), Acker::Address),
            1 + 2 + 3 + 4
        );
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
        st.on_ack(&ack(Some(b"S1"), 3), Acker::Address);
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
        assert_eq!(st.on_ack(&ack(Some(b"S1"), 4), Acker::Address), 0);
        assert_eq!(
            st.on_ack(&ack(Some(b"S1"), 4), Acker::Address),
            0,
            "same store twice"
        );
        assert_eq!(
            st.on_ack(&ack(None, 1), Acker::Address),
            20,
            "anonymous store is a second one"
        );
        assert_eq!(st.released_upto(), 2);
        assert_eq!(
            st.on_ack(&ack(Some(b"S2"), 9), Acker::Address),
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
            st.on_ack(
                &Ack {
                    topic: P,
                    address: Some(n),
                    subject: b"hello",
                    sequence: seq,
                },
                Acker::Address,
            )
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
        assert_eq!(st.on_ack(&ack(Some(b"S1"), 9), Acker::Address), 0);
        assert_eq!(st.on_ack(&ack(Some(b"S2"), 9), Acker::Address), 90);
        assert_eq!(st.held_bytes(), 0);
        assert!(st.acks.len() <= MAX_ACKERS);
    }

    /// Secure mode (issue 35): ACKs count per store key. One store-role
    /// peer naming two addresses, or one address and none, is one store:
    /// with `min_acks=2` it releases nothing alone; a second key does.
    #[test]
    fn min_acks_counts_keys_not_addresses_in_secure_mode() {
        let mut st = ProducerState::new(b"hello", P, 2, Duration::from_secs(1));
        st.set_keyed_stores(1);
        for _ in 0..10 {
            st.append(&[0; 10]);
        }
        let (mallory, honest) = ([0xAA; 32], [0xBB; 32]);
        for addr in [Some(&b"S1"[..]), Some(&b"S2"[..]), None, Some(&b"S3"[..])] {
            assert_eq!(st.on_ack(&ack(addr, 9), Acker::Key(&mallory)), 0);
        }
        assert_eq!(st.released_upto(), 0, "one key, however many addresses");
        assert_eq!(
            st.ack_reach(&ack(None, 9)),
            AckReach::Counted,
            "no C stores here"
        );
        assert_eq!(st.on_ack(&ack(Some(b"S1"), 4), Acker::Key(&honest)), 50);
        assert_eq!(st.released_upto(), 5, "the lower of the two keys' ACKs");
        st.set_keyed_stores(2);
        assert_eq!(st.countable_stores(), 2);
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
                            let freed = st.on_ack(&ack(Some(b"S1"), upto), Acker::Address);
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
