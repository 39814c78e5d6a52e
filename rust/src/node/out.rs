//! What a node's pure protocol state returns and waits on, shared by every
//! node kind and free of sockets: the owned outgoing message [`Out`], the
//! FETCH retry [`Backoff`], and [`poll_timeout`] (the loop's wait to the
//! earliest deadline). The sockets that send an [`Out`] are in
//! [`socket`](crate::node::socket).

use std::time::{Duration, Instant};

use crate::wire::{
    Ack, ConsumerHello, Fetch, GetHeads, Head, Message, StoreHello, Subjects, TimeQuery,
};

/// One message a node should send, owned; the sender's own address is filled
/// in by [`Core::emit`](crate::node::socket::Core::emit) where the message carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    Head {
        topic: Vec<u8>,
        partition: Vec<u8>,
        sequence: u64,
    },
    DirectHead {
        to: Vec<u8>,
        partition: Vec<u8>,
        subject: Vec<u8>,
        sequence: u64,
    },
    /// FETCH from `partition` of `topic` (its producer and every store), as
    /// ourselves.
    Fetch {
        partition: Vec<u8>,
        topic: Vec<u8>,
        sequence: u64,
        count: u32,
    },
    /// ACK to `partition`'s producer, from ourselves: the address is sent in
    /// the `rfc` dialect only.
    Ack {
        partition: Vec<u8>,
        subject: Vec<u8>,
        sequence: u64,
    },
    /// ADDRESSED-ACK: an ACK that names us in both dialects, to a producer
    /// that subscribed `A` + its partition.
    AddressedAck {
        partition: Vec<u8>,
        subject: Vec<u8>,
        sequence: u64,
    },
    GetHeads {
        topic: Vec<u8>,
    },
    ConsumerHello {
        to: Vec<u8>,
        subjects: Vec<Vec<u8>>,
    },
    StoreHello {
        to: Vec<u8>,
    },
    /// A store's answer to a TIME-QUERY: `sequence` is the offset.
    TimeOffset {
        to: Vec<u8>,
        partition: Vec<u8>,
        subject: Vec<u8>,
        sequence: u64,
    },
    /// A TIME-QUERY for `topic` at `time` (ms), as ourselves.
    TimeQuery {
        topic: Vec<u8>,
        time: u64,
    },
}

impl Out {
    /// The wire message, borrowing from `self`; `own` is the sender's address
    /// for the messages that carry it.
    pub fn as_message<'a>(&'a self, own: &'a [u8]) -> Message<'a> {
        match self {
            Out::Head {
                topic,
                partition,
                sequence,
            } => Message::Head(Head {
                topic,
                address: partition,
                subject: topic,
                sequence: *sequence,
            }),
            Out::DirectHead {
                to,
                partition,
                subject,
                sequence,
            } => Message::DirectHead(Head {
                topic: to,
                address: partition,
                subject,
                sequence: *sequence,
            }),
            Out::Fetch {
                partition,
                topic,
                sequence,
                count,
            } => Message::Fetch(Fetch {
                partition,
                requester: own,
                topic,
                sequence: *sequence,
                count: *count,
            }),
            Out::Ack {
                partition,
                subject,
                sequence,
            } => Message::Ack(Ack {
                topic: partition,
                address: Some(own),
                subject,
                sequence: *sequence,
            }),
            Out::AddressedAck {
                partition,
                subject,
                sequence,
            } => Message::AddressedAck(Ack {
                topic: partition,
                address: Some(own),
                subject,
                sequence: *sequence,
            }),
            Out::GetHeads { topic } => Message::GetHeads(GetHeads {
                topic,
                address: own,
            }),
            Out::ConsumerHello { to, subjects } => Message::ConsumerHello(ConsumerHello {
                topic: to,
                address: own,
                subjects: Subjects::List(subjects.iter().map(|s| s.as_slice()).collect()),
            }),
            Out::StoreHello { to } => Message::StoreHello(StoreHello {
                topic: to,
                address: own,
            }),
            Out::TimeOffset {
                to,
                partition,
                subject,
                sequence,
            } => Message::TimeOffset(Head {
                topic: to,
                address: partition,
                subject,
                sequence: *sequence,
            }),
            Out::TimeQuery { topic, time } => Message::TimeQuery(TimeQuery {
                topic,
                requester: own,
                subject: topic,
                time: *time,
            }),
        }
    }
}

/// What became of one message a node received, as its state's dispatch
/// says; the one receive path ([`Core::receive`](crate::node::socket::Core::receive))
/// counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Handled, carrying this many records (`records_received`; a FETCH
    /// or an ACK taken counts in `fetches_received`, `acks_received`).
    Taken(u64),
    /// Not for this node (`ignored`): another topic, partition or address,
    /// or a message its kind does not take.
    Ignored,
    /// Well-formed on the wire, but no node could take it (`malformed`):
    /// a record at offset 2^64 - 1, a value too long to be given a body.
    Malformed,
}

/// How far the FETCH retry interval of a gap that nobody answers has backed
/// off, for consumers and stores alike: after `give_up_fetches` unanswered
/// tries it doubles with each retry, up to 16 x `fetch_retry` (8 s by
/// default), and starts over when records arrive or a store (re)appears.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backoff(u32);

impl Backoff {
    /// Doublings at most: 2^4 = 16 x `fetch_retry`.
    const MAX: u32 = 4;

    /// One more unanswered retry past `give_up_fetches`.
    pub fn doubled(self) -> Self {
        Self((self.0 + 1).min(Self::MAX))
    }

    /// Whether the interval is longer than `fetch_retry`.
    pub fn is_on(self) -> bool {
        self.0 > 0
    }

    /// The retry interval, `retry` backed off.
    pub fn interval(self, retry: Duration) -> Duration {
        retry * (1 << self.0)
    }
}

/// Milliseconds from `now` to the earliest deadline (for `zmq::poll`); -1 if none.
pub fn poll_timeout(now: Instant, deadlines: impl IntoIterator<Item = Option<Instant>>) -> i64 {
    match deadlines.into_iter().flatten().min() {
        None => -1,
        Some(d) if d <= now => 0,
        Some(d) => {
            // Round up so we do not wake just before the deadline and spin.
            let ms = (d - now).as_micros().div_ceil(1000);
            i64::try_from(ms).unwrap_or(i64::MAX)
        }
    }
}
