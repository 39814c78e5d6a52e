//! XPUB subscription frames and the subscriptions each node type makes
//! (RFC 46, "ZeroMQ Subscriptions").

use super::error::WireError;
use super::Kind;

/// A subscription frame as an XPUB sees it: `01`/`00` + prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subscription<'a> {
    pub subscribe: bool,
    pub prefix: &'a [u8],
}

impl<'a> Subscription<'a> {
    pub fn decode(frame: &'a [u8]) -> Result<Self, WireError> {
        match frame.split_first() {
            Some((1, prefix)) => Ok(Self {
                subscribe: true,
                prefix,
            }),
            Some((0, prefix)) => Ok(Self {
                subscribe: false,
                prefix,
            }),
            Some(_) => Err(WireError::BadField {
                field: "subscription",
                frame: 0,
                reason: "must start with 0x01 (subscribe) or 0x00 (unsubscribe)",
            }),
            None => Err(WireError::Truncated {
                field: "subscription",
                frame: 0,
                offset: 0,
                need: 1,
                have: 0,
            }),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(1 + self.prefix.len());
        v.push(u8::from(self.subscribe));
        v.extend_from_slice(self.prefix);
        v
    }

    /// The message kind and key, if the prefix names one (`L` + address, ...).
    pub fn target(&self) -> Option<(Kind, &'a [u8])> {
        let (&id, key) = self.prefix.split_first()?;
        Some((Kind::from_id(id)?, key))
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
    let mut v = Vec::with_capacity(1 + key.len());
    v.push(kind.id());
    v.extend_from_slice(key);
    v
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
