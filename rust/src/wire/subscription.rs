//! XPUB subscription frames, parsed once into what they ask for
//! ([`Prefix`]), and the subscriptions each node type makes (RFC 46,
//! "ZeroMQ Subscriptions").
//!
//! A subscription prefix is read here and nowhere else: a node's routing,
//! the forms of its FETCH answers and ACKs, its handling of consumers,
//! stores and producers joining, and the checks of a secure cluster all
//! take a [`Prefix`], never its bytes.

use super::beacon::BEACON;
use super::error::WireError;
use super::group::GroupKind;
use super::Kind;

/// A subscription frame as an XPUB sees it: `01` (subscribe) or `00`
/// (unsubscribe), then the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subscription<'a> {
    pub subscribe: bool,
    pub prefix: Prefix<'a>,
}

/// What a subscription prefix lets through. ZeroMQ matches prefixes: a key
/// is the start of the keys it matches (`Mlo` matches topic `logs` too), and
/// an empty key matches every key of its message kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefix<'a> {
    /// The empty prefix: every message.
    Everything,
    /// Messages of `kind` whose key (topic, partition or address, as the
    /// kind has it) starts with `key`.
    Messages { kind: Kind, key: &'a [u8] },
    /// Messages of the group extension ([`super::group`]) of `kind` whose
    /// key (group, or address for COMMIT-OFFSETS) starts with `key`.
    Group { kind: GroupKind, key: &'a [u8] },
    /// Beacons (`B`, then the start of a beacon's next frame's bytes): what a
    /// node subscribes on a tower's XPUB.
    Beacons { rest: &'a [u8] },
    /// A first octet that names no message (kept whole, to be shown).
    Unknown(&'a [u8]),
}

impl<'a> Prefix<'a> {
    /// The prefix `bytes` (after the subscribe octet).
    pub fn parse(bytes: &'a [u8]) -> Self {
        let Some((&id, key)) = bytes.split_first() else {
            return Prefix::Everything;
        };
        match Kind::from_id(id) {
            Some(kind) => Prefix::Messages { kind, key },
            None if id == BEACON[0] => Prefix::Beacons { rest: key },
            None => match GroupKind::from_id(id) {
                Some(kind) => Prefix::Group { kind, key },
                None => Prefix::Unknown(bytes),
            },
        }
    }

    /// `kind` + `key`.
    pub fn of(kind: Kind, key: &'a [u8]) -> Self {
        Prefix::Messages { kind, key }
    }

    /// Appends the prefix's bytes to `out`.
    pub fn put(&self, out: &mut Vec<u8>) {
        match *self {
            Prefix::Everything => {}
            Prefix::Messages { kind, key } => {
                out.push(kind.id());
                out.extend_from_slice(key);
            }
            Prefix::Group { kind, key } => {
                out.push(kind.id());
                out.extend_from_slice(key);
            }
            Prefix::Beacons { rest } => {
                out.extend_from_slice(BEACON);
                out.extend_from_slice(rest);
            }
            Prefix::Unknown(bytes) => out.extend_from_slice(bytes),
        }
    }

    /// The prefix's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.put(&mut v);
        v
    }

    /// Whether it is `kind` with an empty key: every message of that kind
    /// (a store's subscriptions: every RECORD, every FETCH, ...).
    pub fn every(&self, kind: Kind) -> bool {
        matches!(*self, Prefix::Messages { kind: k, key: [] } if k == kind)
    }

    /// The key of a subscription to the `kind` messages of one key (a
    /// non-empty one): the address after `L`, `D`, `Q`, `Y`, the partition
    /// after `A`, `F`, the topic after `G`.
    pub fn keyed(&self, kind: Kind) -> Option<&'a [u8]> {
        match *self {
            Prefix::Messages { kind: k, key } if k == kind && !key.is_empty() => Some(key),
            _ => None,
        }
    }

    /// The key of a `kind` subscription, empty or not.
    pub fn key_of(&self, kind: Kind) -> Option<&'a [u8]> {
        match *self {
            Prefix::Messages { kind: k, key } if k == kind => Some(key),
            _ => None,
        }
    }

    /// Whether a `kind` message keyed `key` gets through (as ZeroMQ
    /// matches: the prefix's key starts the message's). The empty prefix
    /// is not counted here: no node of this project subscribes it.
    pub fn lets_through(&self, kind: Kind, key: &[u8]) -> bool {
        self.key_of(kind).is_some_and(|k| key.starts_with(k))
    }
}

impl<'a> Subscription<'a> {
    pub fn decode(frame: &'a [u8]) -> Result<Self, WireError> {
        let (subscribe, prefix) = match frame.split_first() {
            Some((1, prefix)) => (true, prefix),
            Some((0, prefix)) => (false, prefix),
            Some(_) => {
                return Err(WireError::BadField {
                    field: "subscription",
                    frame: 0,
                    reason: "must start with 0x01 (subscribe) or 0x00 (unsubscribe)",
                })
            }
            None => {
                return Err(WireError::Truncated {
                    field: "subscription",
                    frame: 0,
                    offset: 0,
                    need: 1,
                    have: 0,
                })
            }
        };
        Ok(Self {
            subscribe,
            prefix: Prefix::parse(prefix),
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![u8::from(self.subscribe)];
        self.prefix.put(&mut v);
        v
    }
}

/// The three Dafka node types that subscribe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    Producer,
    Consumer,
    Store,
}

fn prefix(kind: Kind, key: &[u8]) -> Vec<u8> {
    Prefix::of(kind, key).to_bytes()
}

/// The SUB prefixes a node of `node` type with `address` sets, for `topics`
/// (a producer passes its one topic, a store none).
///
/// - Producer: ACK and FETCH for its partition, and GET-HEADS for its topic
///   (producers answer GET-HEADS for their topic with DIRECT-HEAD); this
///   project's extension: ADDRESSED-ACK for its partition, first, so a store
///   knows it before the plain ACK subscription.
/// - Consumer: DIRECT-RECORD, DIRECT-HEAD and STORE-HELLO to itself; RECORD and
///   HEAD per topic; this project's extensions: RECORD-BATCH and
///   META-RECORD-BATCH per topic (the latter before RECORD, so that a
///   producer counts it first), DIRECT-RECORD-BATCH,
///   DIRECT-META-RECORD-BATCH and TIME-OFFSET to itself.
/// - Store: every RECORD, HEAD, FETCH and GET-HEADS; DIRECT-RECORD and
///   CONSUMER-HELLO addressed to itself; this project's extensions: every
///   META-RECORD-BATCH (first), RECORD-BATCH and TIME-QUERY;
///   DIRECT-RECORD-BATCH and DIRECT-META-RECORD-BATCH to itself.
pub fn subscriptions(node: NodeType, address: &[u8], topics: &[&[u8]]) -> Vec<Vec<u8>> {
    match node {
        NodeType::Producer => {
            let mut v = vec![
                prefix(Kind::AddressedAck, address),
                prefix(Kind::Ack, address),
                prefix(Kind::Fetch, address),
            ];
            v.extend(topics.iter().map(|t| prefix(Kind::GetHeads, t)));
            v
        }
        NodeType::Consumer => {
            // The forms of FETCH answers before DIRECT-RECORD: a node that
            // sees `D` + address has seen these first.
            let mut v = vec![
                prefix(Kind::DirectMetaRecordBatch, address),
                prefix(Kind::DirectRecordBatch, address),
                prefix(Kind::DirectRecord, address),
                prefix(Kind::DirectHead, address),
                prefix(Kind::StoreHello, address),
                prefix(Kind::TimeOffset, address),
            ];
            for t in topics {
                v.push(prefix(Kind::MetaRecordBatch, t));
                v.push(prefix(Kind::Record, t));
                v.push(prefix(Kind::Head, t));
                v.push(prefix(Kind::RecordBatch, t));
            }
            v
        }
        // DIRECT-HEAD to itself: other stores' answers to its GET-HEADS
        // (stores compare heads to replicate what no producer offers any more).
        NodeType::Store => vec![
            prefix(Kind::MetaRecordBatch, b""),
            prefix(Kind::Record, b""),
            prefix(Kind::Head, b""),
            prefix(Kind::DirectMetaRecordBatch, address),
            prefix(Kind::DirectRecordBatch, address),
            prefix(Kind::DirectRecord, address),
            prefix(Kind::Fetch, b""),
            prefix(Kind::GetHeads, b""),
            prefix(Kind::ConsumerHello, address),
            prefix(Kind::DirectHead, address),
            prefix(Kind::RecordBatch, b""),
            prefix(Kind::TimeQuery, b""),
        ],
    }
}

/// ZeroMQ matches prefixes, so `Mhello` also delivers topic `hello2`: after a
/// prefix match a receiver checks the decoded key exactly. `subscribed` is the
/// key the node subscribed with (empty for a store's catch-all subscriptions).
pub fn topic_matches(subscribed: &[u8], key: &[u8]) -> bool {
    subscribed.is_empty() || subscribed == key
}
