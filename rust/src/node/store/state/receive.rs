//! What each message and subscription that reaches a store is to it
//! ([`StoreState::on_message`], [`StoreState::on_subscription`]): the
//! dispatch the one receive path (`node::receive`) calls.
//!
//! Records keep their bodies as they came (metadata + value, log format
//! version 2); a record that came without metadata (a RECORD, a
//! RECORD-BATCH, their DIRECT- forms: from a node that knows none, e.g. a
//! C-reference producer) is given a body stamped with its append time
//! (PROTOCOL.md, "Extensions").

use std::time::Instant;

use super::{StoreLog, StoreState};
use crate::meta;
use crate::node::out::{Fate, Out};
use crate::wire::{topic_matches, Kind, Message, Record, RecordBatch, Subscription};

impl<L: StoreLog> StoreState<L> {
    /// One message from a peer: records (live, or FETCH answers addressed to
    /// us), HEADs, DIRECT-HEADs of other stores, FETCHes, GET-HEADS,
    /// CONSUMER-HELLOs and TIME-QUERYs. `stamp` is the time (ms since the
    /// epoch) a record without metadata is appended at. What to send goes
    /// to `out`.
    pub fn on_message(
        &mut self,
        msg: Message<'_>,
        now: Instant,
        stamp: u64,
        out: &mut Vec<Out>,
    ) -> Fate {
        let ours = |key: &[u8]| topic_matches(&self.address, key);
        match msg {
            Message::MetaRecordBatch(b) if b.topic == b.subject => {
                out.extend(self.on_record_batch(&b, now));
                Fate::Taken(u64::from(b.count))
            }
            Message::DirectMetaRecordBatch(b) if ours(b.topic) => {
                for r in b.records() {
                    out.extend(
                        self.on_direct_record(r.subject, r.address, r.sequence, r.content, now),
                    );
                }
                Fate::Taken(u64::from(b.count))
            }
            Message::Record(r) if r.topic == r.subject => {
                self.on_plain(&r, false, now, stamp, out);
                Fate::Taken(1)
            }
            Message::RecordBatch(b) if b.topic == b.subject => {
                let mut bodies = std::mem::take(&mut self.bodies);
                let fate = if stamped_values(&mut bodies, b.values(), stamp) {
                    let b = RecordBatch {
                        values: &bodies,
                        ..b
                    };
                    out.extend(self.on_record_batch(&b, now));
                    Fate::Taken(u64::from(b.count))
                } else {
                    Fate::Malformed
                };
                self.bodies = bodies;
                fate
            }
            Message::DirectRecordBatch(b) if ours(b.topic) => {
                for r in b.records() {
                    self.on_plain(&r, true, now, stamp, out);
                }
                Fate::Taken(u64::from(b.count))
            }
            Message::DirectRecord(r) if ours(r.topic) => {
                self.on_plain(&r, true, now, stamp, out);
                Fate::Taken(1)
            }
            Message::TimeQuery(q) => {
                out.extend(self.on_time_query(&q));
                Fate::Taken(0)
            }
            Message::Head(h) if h.topic == h.subject => {
                out.extend(self.on_head(&h, now));
                Fate::Taken(0)
            }
            Message::Fetch(f) => {
                out.extend(self.on_fetch(&f));
                Fate::Taken(0)
            }
            Message::GetHeads(g) => {
                out.extend(self.on_get_heads(&g));
                Fate::Taken(0)
            }
            Message::DirectHead(h) if h.topic == self.address.as_slice() => {
                out.extend(self.on_peer_head(&h, now));
                Fate::Taken(0)
            }
            Message::ConsumerHello(c) if ours(c.topic) => {
                out.extend(self.on_consumer_hello(&c));
                Fate::Taken(0)
            }
            _ => Fate::Ignored,
        }
    }

    /// A record that came without metadata (`direct`: a FETCH answer), with
    /// a body stamped `stamp`.
    fn on_plain(
        &mut self,
        r: &Record<'_>,
        direct: bool,
        now: Instant,
        stamp: u64,
        out: &mut Vec<Out>,
    ) {
        let mut body = std::mem::take(&mut self.bodies);
        body.clear();
        meta::wrap(&mut body, Some(stamp), r.content);
        let (t, p, seq) = (r.subject, r.address, r.sequence);
        out.extend(if direct {
            self.on_direct_record(t, p, seq, &body, now)
        } else {
            self.on_record(t, p, seq, &body, now)
        });
        self.bodies = body;
    }

    /// A subscription (or unsubscription) on our XPUB: who takes which form
    /// of FETCH answers, which producers take ADDRESSED-ACKs (`A` + their
    /// partition), another store connecting (its catch-all `G`: FETCHes
    /// that backed off go again, and the stores are asked for their heads
    /// soon), a consumer saying hello (`L` + its address: a STORE-HELLO).
    pub fn on_subscription(&mut self, sub: &Subscription<'_>, now: Instant) -> Vec<Out> {
        self.forms.on_subscription(sub);
        self.addressed_acks.on_subscription(sub);
        if !sub.subscribe {
            return Vec::new();
        }
        if sub.prefix.every(Kind::GetHeads) {
            self.peer_heads.store_joined(now);
            self.store_joined();
        }
        match sub.prefix.keyed(Kind::StoreHello) {
            Some(consumer) => vec![Out::StoreHello {
                to: consumer.to_vec(),
            }],
            None => Vec::new(),
        }
    }
}

/// The bodies of records that came without metadata, stamped with their
/// append time `stamp`, as a batch's values frame in `out`. False if one is
/// too long to be framed (a value of nearly 4 GiB: the message is
/// malformed).
fn stamped_values<'v>(
    out: &mut Vec<u8>,
    values: impl Iterator<Item = &'v [u8]>,
    stamp: u64,
) -> bool {
    out.clear();
    for v in values {
        let Ok(n) = u32::try_from(meta::PLAIN_LEN + v.len()) else {
            return false;
        };
        out.extend_from_slice(&n.to_be_bytes());
        meta::wrap(out, Some(stamp), v);
    }
    true
}
