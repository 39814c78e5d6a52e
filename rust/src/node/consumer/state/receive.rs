//! What a consumer does with each message and subscription that reaches it
//! ([`ConsumerState::on_message`], [`ConsumerState::on_subscription`]): the
//! dispatch the one receive path (`node::receive`) calls, and the answers to
//! stores and producers joining.

use std::cmp::Reverse;
use std::time::Instant;

use super::{ConsumerState, Delivery};
use crate::meta;
use crate::node::out::{Backoff, Fate, Out};
use crate::wire::{Head, Kind, Message, Record, RecordBatch, StoreHello, Subscription};

impl ConsumerState {
    /// One message from a peer: records (live or FETCH answers, with their
    /// metadata or given a body with no timestamp), HEADs, DIRECT-HEADs and
    /// STORE-HELLOs; records to deliver go to `deliver`, messages to send
    /// to `out`. Anything else is not for a consumer.
    pub fn on_message(
        &mut self,
        msg: Message<'_>,
        now: Instant,
        deliver: &mut Vec<Delivery>,
        out: &mut Vec<Out>,
    ) -> Fate {
        match msg {
            // No record can stand at the last offset: the partition's next
            // one would overflow.
            Message::Record(Record { sequence, .. })
            | Message::DirectRecord(Record { sequence, .. })
            | Message::Head(Head { sequence, .. })
            | Message::DirectHead(Head { sequence, .. })
                if sequence == u64::MAX =>
            {
                Fate::Malformed
            }
            // Records with metadata: their bodies as they came.
            Message::MetaRecordBatch(b) => self.on_batch(&b, false, true, now, deliver, out),
            Message::DirectMetaRecordBatch(b) => self.on_batch(&b, true, true, now, deliver, out),
            // Records without (from a node that knows no metadata): bodies
            // with no timestamp.
            Message::RecordBatch(b) => self.on_batch(&b, false, false, now, deliver, out),
            Message::DirectRecordBatch(b) => self.on_batch(&b, true, false, now, deliver, out),
            Message::Record(r) => self.on_plain(&r, false, now, deliver, out),
            Message::DirectRecord(r) => self.on_plain(&r, true, now, deliver, out),
            Message::Head(h) => {
                self.on_head(&h, false, now, out);
                Fate::Taken(0)
            }
            Message::DirectHead(h) => {
                self.on_head(&h, true, now, out);
                Fate::Taken(0)
            }
            Message::StoreHello(s) => {
                out.extend(self.on_store_hello(&s, now));
                Fate::Taken(0)
            }
            _ => Fate::Ignored,
        }
    }

    /// The records of a batch (`direct`: a FETCH answer), as bodies if
    /// `bodies`, else values given a body with no timestamp.
    fn on_batch(
        &mut self,
        b: &RecordBatch<'_>,
        direct: bool,
        bodies: bool,
        now: Instant,
        deliver: &mut Vec<Delivery>,
        out: &mut Vec<Out>,
    ) -> Fate {
        for r in b.records() {
            if bodies {
                self.on_record(&r, direct, now, deliver, out);
            } else {
                self.on_plain(&r, direct, now, deliver, out);
            }
        }
        Fate::Taken(u64::from(b.count))
    }

    /// A record without metadata: delivered with a body that has no
    /// timestamp ([`meta::wrap`]).
    fn on_plain(
        &mut self,
        r: &Record<'_>,
        direct: bool,
        now: Instant,
        deliver: &mut Vec<Delivery>,
        out: &mut Vec<Out>,
    ) -> Fate {
        let mut body = std::mem::take(&mut self.body);
        body.clear();
        meta::wrap(&mut body, None, r.content);
        let r = Record {
            content: &body,
            ..*r
        };
        self.on_record(&r, direct, now, deliver, out);
        self.body = body;
        Fate::Taken(1)
    }

    /// A subscription on our XPUB: a peer that answers GET-HEADS for our
    /// topics (`G` + topic; a store's catch-all `G`: every topic) is asked
    /// now; a node that answers FETCHes of a partition (its producer: `F` +
    /// partition) is FETCHed again now ([`ConsumerState::on_fetcher`]).
    pub fn on_subscription(&mut self, sub: &Subscription<'_>, now: Instant, out: &mut Vec<Out>) {
        if !sub.subscribe {
            return;
        }
        if let Some(topic) = sub.prefix.key_of(Kind::GetHeads) {
            out.extend(self.get_heads_for(topic));
        } else if let Some(partition) = sub.prefix.key_of(Kind::Fetch) {
            self.on_fetcher(partition, now);
        }
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

    /// A node that answers FETCHes of `partition` (its producer: `F` +
    /// partition) subscribed to us: a FETCH of it still unanswered may have
    /// gone out before that node could hear it, so it goes again now, not
    /// after a retry interval that may have grown to seconds.
    pub fn on_fetcher(&mut self, partition: &[u8], now: Instant) {
        let Some(p) = self.parts.get_mut(partition) else {
            return;
        };
        if p.defer.is_none() && p.retry_at.is_some() && p.requested > p.next {
            // The tries so far went to nobody who could answer.
            p.stalled = 0;
            p.backoff = Backoff::default();
            p.retry_at = Some(now);
            self.timers.push(Reverse((now, p.key.clone())));
        }
    }
}
