//! What a store tells of the partitions it holds: DIRECT-HEADs to a
//! GET-HEADS or a CONSUMER-HELLO, TIME-OFFSETs to a TIME-QUERY; and when it
//! asks the other stores for theirs ([`PeerHeads`]), to replicate partitions
//! whose producers are gone.

use std::time::{Duration, Instant};

use super::{PartKey, StoreLog, StoreState, MAX_HELLO_TOPICS};
use crate::node::out::Out;
use crate::wire::{ConsumerHello, GetHeads, TimeQuery};

/// Asking other stores for their heads: after start-up, shortly after a
/// store connected to us, once more a little later, then this often.
const PEER_HEADS_FIRST: Duration = Duration::from_secs(1);
const PEER_HEADS_JOINED: Duration = Duration::from_millis(100);
const PEER_HEADS_AGAIN: Duration = Duration::from_secs(2);
const PEER_HEADS_EVERY: Duration = Duration::from_secs(60);

/// When the store next asks the other stores for every head they hold
/// (GET-HEADS with an empty topic), so it replicates partitions whose
/// producers are gone: HEADs only come from live producers; and, with a
/// timer of its own, for every commit they hold (COMMIT-QUERY of every
/// group, `node/store/groups.rs`). Another store
/// connecting to us shows as its catch-all `G` subscription on our XPUB; our
/// own `E<address>` subscription may reach it a moment later than its
/// answer, hence the second ask.
#[derive(Debug)]
pub(in crate::node::store) struct PeerHeads {
    pub(in crate::node::store) next: Instant,
    again: bool,
}

impl PeerHeads {
    pub(in crate::node::store) fn new(now: Instant) -> Self {
        Self {
            next: now + PEER_HEADS_FIRST,
            again: true,
        }
    }

    pub(in crate::node::store) fn store_joined(&mut self, now: Instant) {
        self.next = self.next.min(now + PEER_HEADS_JOINED);
        self.again = true;
    }

    /// True (and the next time set) when an ask is due.
    pub(in crate::node::store) fn due(&mut self, now: Instant) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now
            + if self.again {
                PEER_HEADS_AGAIN
            } else {
                PEER_HEADS_EVERY
            };
        self.again = false;
        true
    }
}

impl<L: StoreLog> StoreState<L> {
    /// The GET-HEADS a store sends to other stores: an empty topic asks for
    /// every partition they hold (see `on_get_heads`).
    pub fn ask_peer_heads(&self) -> Out {
        Out::GetHeads { topic: Vec::new() }
    }

    /// When the next GET-HEADS to the other stores is due ([`PeerHeads`]).
    pub fn peer_heads_at(&self) -> Instant {
        self.peer_heads.next
    }

    /// The GET-HEADS to other stores due at `now`, if one is ([`PeerHeads`]).
    pub fn peer_heads_due(&mut self, now: Instant) -> Option<Out> {
        self.peer_heads.due(now).then(|| self.ask_peer_heads())
    }

    /// GET-HEADS: a DIRECT-HEAD per partition of the topic. An empty topic
    /// (sent by other stores of ours; producers subscribe to their own topic
    /// only, so only stores see it) asks for every partition held.
    pub fn on_get_heads(&mut self, g: &GetHeads<'_>) -> Vec<Out> {
        if g.address == self.address.as_slice() {
            return Vec::new();
        }
        if g.topic.is_empty() {
            let mut out = Vec::new();
            self.heads_of(g.address, self.log.partitions(None), &mut out);
            return out;
        }
        self.heads_for(g.address, [g.topic])
    }

    /// CONSUMER-HELLO: DIRECT-HEADs for every partition of the consumer's topics.
    pub fn on_consumer_hello(&mut self, c: &ConsumerHello<'_>) -> Vec<Out> {
        if c.topic != self.address.as_slice() {
            return Vec::new();
        }
        self.heads_for(c.address, c.subjects.iter())
    }

    /// DIRECT-HEADs of every partition of `topics` to `to`. Each topic once,
    /// and at most [`MAX_HELLO_TOPICS`] of them: a CONSUMER-HELLO naming one
    /// topic a million times must not make a million answers per partition.
    fn heads_for<'t>(&self, to: &[u8], topics: impl IntoIterator<Item = &'t [u8]>) -> Vec<Out> {
        let mut out = Vec::new();
        let mut seen: rustc_hash::FxHashSet<&[u8]> = rustc_hash::FxHashSet::default();
        for topic in topics {
            if seen.len() == MAX_HELLO_TOPICS && !seen.contains(topic) {
                break;
            }
            if !seen.insert(topic) {
                continue;
            }
            self.heads_of(to, self.log.partitions(Some(topic)), &mut out);
        }
        out
    }

    /// A DIRECT-HEAD to `to` for each of `parts` that holds records. One whose
    /// records were all deleted (retention) is left out: nobody could FETCH
    /// anything of it from here, and a store that still holds them tells its
    /// own heads.
    fn heads_of(&self, to: &[u8], parts: Vec<PartKey>, out: &mut Vec<Out>) {
        for (t, p) in parts {
            let first = self.log.first_offset(&t, &p).unwrap_or(0);
            if let Some(next) = self.log.next_offset(&t, &p).filter(|&n| n > first) {
                out.push(Out::DirectHead {
                    to: to.to_vec(),
                    partition: p,
                    subject: t,
                    sequence: next - 1,
                });
            }
        }
    }

    /// TIME-QUERY: for each partition of the topic held here, a TIME-OFFSET
    /// to the requester: the first offset at or after the time asked, or the
    /// partition's next offset if no record is that late. A partition the
    /// log cannot answer for (an error) is left out; another store may.
    pub fn on_time_query(&mut self, q: &TimeQuery<'_>) -> Vec<Out> {
        let mut out = Vec::new();
        if q.topic != q.subject || q.requester == self.address.as_slice() {
            return out;
        }
        for (t, p) in self.log.partitions(Some(q.subject)) {
            let Some(next) = self.log.next_offset(&t, &p) else {
                continue;
            };
            match self.log.offset_for_time(&t, &p, q.time) {
                Ok(found) => out.push(Out::TimeOffset {
                    to: q.requester.to_vec(),
                    partition: p,
                    subject: t,
                    sequence: found.unwrap_or(next),
                }),
                Err(e) => tracing::warn!(
                    "store: TIME-QUERY of {}/{}: {e}",
                    String::from_utf8_lossy(&t),
                    String::from_utf8_lossy(&p)
                ),
            }
        }
        out
    }
}
