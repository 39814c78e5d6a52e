//! The Dafka wire codec: a pure codec, no sockets, no files.
//!
//! It owns the nine messages of RFC 46/DAFKA, this project's four extensions
//! (PROTOCOL.md, "Extensions", summed up below), the tower beacons and
//! welcome, and the XPUB subscription frames, in the two dialects of
//! `PROTOCOL.md`:
//!
//! ```text
//!            rfc (default)                         zproto (C reference)
//! frame 0    ID + key                              ID + key + 00 + 01 + fields
//! frame 1    AA A5 + ID + 01 + fields              content (RECORD, DIRECT-RECORD; batches: values)
//! frame 2    content (RECORD, DIRECT-RECORD;       -
//!            batches: values)
//! ```
//!
//! Fields: `string` = 1-octet length + bytes; `longstr` = 4-octet length + bytes;
//! `strings` = 4-octet count + that many `longstr`; numbers are unsigned and
//! big-endian; `sequence` has 8 octets and `count` 4.
//!
//! | message        | ID  | key (after ID)      | fields                                  |
//! |----------------|-----|---------------------|-----------------------------------------|
//! | RECORD         | `M` | topic               | address, subject, sequence, [content]   |
//! | DIRECT-RECORD  | `D` | requester address   | address, subject, sequence, [content]   |
//! | FETCH          | `F` | partition           | address, subject, sequence, count ([`Fetch`]: requester, topic, ...) |
//! | ACK            | `K` | partition           | [address (rfc)], subject, sequence      |
//! | HEAD           | `H` | topic               | address, subject, sequence              |
//! | DIRECT-HEAD    | `E` | requester address   | address, subject, sequence              |
//! | GET-HEADS      | `G` | topic (extension: empty) | address                            |
//! | CONSUMER-HELLO | `W` | store address       | address, subjects                       |
//! | STORE-HELLO    | `L` | consumer address    | address                                 |
//! | RECORD-BATCH   | `R` | topic               | address, subject, sequence, count, [values] |
//! | DIRECT-RECORD-BATCH | `Q` | requester address | address, subject, sequence, count, [values] |
//! | ADDRESSED-ACK  | `A` | partition           | address, subject, sequence              |
//! | META-RECORD-BATCH | `X` | topic            | as RECORD-BATCH; values are bodies      |
//! | DIRECT-META-RECORD-BATCH | `Y` | requester address | as DIRECT-RECORD-BATCH, bodies  |
//! | TIME-QUERY     | `T` | topic               | address (requester), subject, sequence (time) |
//! | TIME-OFFSET    | `O` | requester address   | address (partition), subject, sequence (offset) |
//!
//! A receiver accepts both dialects, told apart by frame count ([`decode`]).
//! The first nine rows are RFC 46; a C-reference node never receives the
//! three extensions with IDs of their own (nodes get them only by subscribing
//! to them) and answers an empty-topic GET-HEADS with nothing, so it sees
//! RFC 46 byte for byte.
//!
//! GET-HEADS with an empty topic is asked by a store of the other stores
//! (which subscribe `G`), who answer a DIRECT-HEAD for every partition they
//! hold: how stores replicate partitions whose producers are gone.
//!
//! RECORD-BATCH is `count` RECORDs of one partition, offsets
//! `sequence` to `sequence + count - 1`, in one message, framed as RECORD is (its
//! content frame holds the values, each a `longstr`, back to back, and nothing
//! else). A producer sends it only when asked to (`record_batches`); this
//! project's stores subscribe `R` and its consumers `R` + topic, beside `M`, so
//! nodes that know nothing of it (the C reference) never receive it: they see
//! the producer's HEADs and FETCH the records, which are answered as
//! DIRECT-RECORDs. One message instead of one per record is what lets a
//! producer and a store move records at disk speed (`benches/RESULTS.md`,
//! "Spark"); it carries at least one record, and its last offset is below
//! 2^64 - 1, as any record's. DIRECT-RECORD-BATCH is the same as a FETCH
//! answer (DIRECT-RECORDs), keyed by the requester's address: this project's
//! consumers, stores and read clients subscribe `Q` + their own address beside
//! `D`, and a producer or store that saw that subscription on its XPUB answers
//! their FETCHes in batches; everyone else gets DIRECT-RECORDs.
//!
//! META-RECORD-BATCH and DIRECT-META-RECORD-BATCH are the two batches whose
//! values are *bodies*: each record's key, headers and timestamp
//! ([`crate::meta`]) in front of its value. Only this project's nodes
//! subscribe `X` (stores), `X` + topic (consumers) and `Y` + their address;
//! everyone else gets the plain values in the RFC messages. TIME-QUERY asks
//! the stores (which subscribe `T`) for each partition's first offset at or
//! after a time; each answers one TIME-OFFSET per partition it holds, keyed by
//! the requester's address (`O` + address).
//!
//! ADDRESSED-ACK is an ACK that names its store in both dialects (a zproto
//! ACK has no address field, so a producer could not tell two stores'
//! ACKs apart and `min_acks >= 2` never completed). This project's
//! producers subscribe `A` + their address beside `K` + their address; a
//! store that saw that subscription on its XPUB ACKs the partition with
//! ADDRESSED-ACKs, and everyone else (the C reference's producer) with
//! plain ACKs. A partition has one producer, so its ACKs go one way only.
//!
//! The consumer-group extension (docs/groups.md) has four messages of its
//! own, decoded apart by [`group::decode`] (a receiver tries it when the
//! first octet is one of their IDs, [`group::GroupKind::from_id`]):
//!
//! | message        | ID  | key (after ID)      | fields                                  |
//! |----------------|-----|---------------------|-----------------------------------------|
//! | GROUP-MEMBER   | `J` | group               | address, flags, timeout, topics, claims |
//! | COMMIT         | `C` | group               | address, sequence, entries              |
//! | COMMIT-QUERY   | `U` | group (empty: all)  | address, sequence, topics               |
//! | COMMIT-OFFSETS | `N` | requester address   | address, group, sequence, flags, entries |
//!
//! The kind announcement ([`Announcement`], `V` + kind + address) is no
//! message but a subscription a node makes on a tower's XPUB, where nothing
//! can match it: how a tower tells nodes apart by kind.

mod announce;
mod beacon;
mod codec;
mod error;
pub mod group;
mod subscription;

pub use announce::{Announcement, KIND_ANNOUNCEMENT};
pub use beacon::{decode_beacon, Beacon, BEACON, WELCOME};
pub use codec::{decode, FrameBuf};
pub use error::WireError;
pub use subscription::{subscriptions, topic_matches, NodeType, Prefix, Subscription};

/// The protocol signature that starts every `rfc` body frame.
pub const SIGNATURE: [u8; 2] = [0xAA, 0xA5];
/// The only protocol version.
pub const VERSION: u8 = 0x01;

/// Which framing a message is sent in (PROTOCOL.md, "Two dialects").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Dialect {
    /// As RFC 46 is written: topic frame, then a signed body frame.
    #[default]
    Rfc,
    /// Byte-compatible with the C reference implementation (zproto).
    Zproto,
}

impl Dialect {
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Rfc => "rfc",
            Dialect::Zproto => "zproto",
        }
    }
}

impl std::str::FromStr for Dialect {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "rfc" => Ok(Dialect::Rfc),
            "zproto" => Ok(Dialect::Zproto),
            other => Err(format!(
                "unknown wire dialect {other:?}: use \"rfc\" or \"zproto\""
            )),
        }
    }
}

/// The message kinds, with their one-octet IDs: the nine of RFC 46, then
/// this project's extensions (PROTOCOL.md, "Extensions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Record,
    DirectRecord,
    Fetch,
    Ack,
    Head,
    DirectHead,
    GetHeads,
    ConsumerHello,
    StoreHello,
    /// This project's extension: several RECORDs of one partition.
    RecordBatch,
    /// This project's extension: several DIRECT-RECORDs of one partition.
    DirectRecordBatch,
    /// This project's extension: an ACK that names its store in both dialects.
    AddressedAck,
    /// This project's extension: a RECORD-BATCH whose values are bodies
    /// (metadata + value, [`crate::meta`]).
    MetaRecordBatch,
    /// This project's extension: a DIRECT-RECORD-BATCH of bodies.
    DirectMetaRecordBatch,
    /// This project's extension: "the first offset at or after this time",
    /// asked of the stores for a topic.
    TimeQuery,
    /// This project's extension: a store's answer to a TIME-QUERY, per partition.
    TimeOffset,
}

impl Kind {
    /// The nine RFC 46 messages, then the extensions.
    pub const ALL: [Kind; 16] = [
        Kind::Record,
        Kind::DirectRecord,
        Kind::Fetch,
        Kind::Ack,
        Kind::Head,
        Kind::DirectHead,
        Kind::GetHeads,
        Kind::ConsumerHello,
        Kind::StoreHello,
        Kind::RecordBatch,
        Kind::DirectRecordBatch,
        Kind::AddressedAck,
        Kind::MetaRecordBatch,
        Kind::DirectMetaRecordBatch,
        Kind::TimeQuery,
        Kind::TimeOffset,
    ];

    pub const fn id(self) -> u8 {
        match self {
            Kind::Record => b'M',
            Kind::DirectRecord => b'D',
            Kind::Fetch => b'F',
            Kind::Ack => b'K',
            Kind::Head => b'H',
            Kind::DirectHead => b'E',
            Kind::GetHeads => b'G',
            Kind::ConsumerHello => b'W',
            Kind::StoreHello => b'L',
            Kind::RecordBatch => b'R',
            Kind::DirectRecordBatch => b'Q',
            Kind::AddressedAck => b'A',
            Kind::MetaRecordBatch => b'X',
            Kind::DirectMetaRecordBatch => b'Y',
            Kind::TimeQuery => b'T',
            Kind::TimeOffset => b'O',
        }
    }

    pub const fn from_id(id: u8) -> Option<Kind> {
        Some(match id {
            b'M' => Kind::Record,
            b'D' => Kind::DirectRecord,
            b'F' => Kind::Fetch,
            b'K' => Kind::Ack,
            b'H' => Kind::Head,
            b'E' => Kind::DirectHead,
            b'G' => Kind::GetHeads,
            b'W' => Kind::ConsumerHello,
            b'L' => Kind::StoreHello,
            b'R' => Kind::RecordBatch,
            b'Q' => Kind::DirectRecordBatch,
            b'A' => Kind::AddressedAck,
            b'X' => Kind::MetaRecordBatch,
            b'Y' => Kind::DirectMetaRecordBatch,
            b'T' => Kind::TimeQuery,
            b'O' => Kind::TimeOffset,
            _ => return None,
        })
    }

    /// The RFC name, e.g. `"DIRECT-RECORD"`.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Record => "RECORD",
            Kind::DirectRecord => "DIRECT-RECORD",
            Kind::Fetch => "FETCH",
            Kind::Ack => "ACK",
            Kind::Head => "HEAD",
            Kind::DirectHead => "DIRECT-HEAD",
            Kind::GetHeads => "GET-HEADS",
            Kind::ConsumerHello => "CONSUMER-HELLO",
            Kind::StoreHello => "STORE-HELLO",
            Kind::RecordBatch => "RECORD-BATCH",
            Kind::DirectRecordBatch => "DIRECT-RECORD-BATCH",
            Kind::AddressedAck => "ADDRESSED-ACK",
            Kind::MetaRecordBatch => "META-RECORD-BATCH",
            Kind::DirectMetaRecordBatch => "DIRECT-META-RECORD-BATCH",
            Kind::TimeQuery => "TIME-QUERY",
            Kind::TimeOffset => "TIME-OFFSET",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// RECORD, DIRECT-RECORD and the four batches carry a content frame.
    pub const fn has_content(self) -> bool {
        matches!(
            self,
            Kind::Record
                | Kind::DirectRecord
                | Kind::RecordBatch
                | Kind::DirectRecordBatch
                | Kind::MetaRecordBatch
                | Kind::DirectMetaRecordBatch
        )
    }

    /// The two batches whose values are bodies (metadata + value).
    pub const fn has_meta(self) -> bool {
        matches!(self, Kind::MetaRecordBatch | Kind::DirectMetaRecordBatch)
    }
}

/// RECORD (`topic` = topic name) and DIRECT-RECORD (`topic` = requester address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    pub topic: &'a [u8],
    /// The partition: the producer's address.
    pub address: &'a [u8],
    /// The topic name.
    pub subject: &'a [u8],
    /// The record's offset in its partition.
    pub sequence: u64,
    pub content: &'a [u8],
}

/// RECORD-BATCH (`topic` = topic name) and DIRECT-RECORD-BATCH (`topic` =
/// requester address), this project's extensions (see the module docs):
/// `count` records of partition `address`, offsets `sequence..sequence + count`.
/// `values` is the content frame: `count` `longstr` values back to back,
/// checked whole when decoded or encoded ([`RecordBatch::values`] reads them in
/// place). Build one with [`RecordBatch::put_values`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordBatch<'a> {
    /// The key after `R` (the topic name) or `Q` (the requester's address).
    pub topic: &'a [u8],
    /// The partition: the producer's address.
    pub address: &'a [u8],
    /// The topic name.
    pub subject: &'a [u8],
    /// The first record's offset.
    pub sequence: u64,
    pub count: u32,
    pub values: &'a [u8],
}

impl<'a> RecordBatch<'a> {
    /// Appends `value` to a content frame as a `longstr`; see
    /// [`RecordBatch::values`]. A value of 4 GiB or more cannot travel.
    pub fn put_value(out: &mut Vec<u8>, value: &[u8]) -> Result<(), WireError> {
        let n = u32::try_from(value.len()).map_err(|_| WireError::TooLong {
            field: "values[]",
            len: value.len(),
        })?;
        out.extend_from_slice(&n.to_be_bytes());
        out.extend_from_slice(value);
        Ok(())
    }

    /// A content frame holding `values`, and their count.
    pub fn put_values<'v>(
        out: &mut Vec<u8>,
        values: impl IntoIterator<Item = &'v [u8]>,
    ) -> Result<u32, WireError> {
        let mut n = 0u32;
        for v in values {
            Self::put_value(out, v)?;
            n = n.checked_add(1).ok_or(WireError::TooLong {
                field: "count",
                len: n as usize + 1,
            })?;
        }
        Ok(n)
    }

    /// The records' values in offset order, read in place.
    pub fn values(&self) -> Values<'a> {
        Values {
            left: self.count,
            raw: self.values,
        }
    }

    /// Its records one by one, as the RECORDs (or DIRECT-RECORDs) they
    /// stand for: same key, partition and topic, offsets from `sequence` on.
    pub fn records(&self) -> impl Iterator<Item = Record<'a>> + 'a {
        let (topic, address, subject) = (self.topic, self.address, self.subject);
        (self.sequence..)
            .zip(self.values())
            .map(move |(sequence, content)| Record {
                topic,
                address,
                subject,
                sequence,
                content,
            })
    }

    /// Bytes of its values together: the content frame less the 4-octet
    /// length in front of each.
    pub fn value_bytes(&self) -> u64 {
        (self.values.len() as u64).saturating_sub(4 * u64::from(self.count))
    }

    /// The last record's offset.
    pub fn last(&self) -> u64 {
        self.sequence
            .saturating_add(u64::from(self.count.saturating_sub(1)))
    }
}

/// The first `longstr` of `raw` (None if it is not whole); `raw` goes past it.
fn split_longstr<'a>(raw: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (len, rest) = raw.split_first_chunk::<4>()?;
    let (v, rest) = rest.split_at_checked(u32::from_be_bytes(*len) as usize)?;
    *raw = rest;
    Some(v)
}

/// The values of a [`RecordBatch`], in order.
#[derive(Debug, Clone)]
pub struct Values<'a> {
    left: u32,
    raw: &'a [u8],
}

impl<'a> Iterator for Values<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        // Checked at decoding and encoding: every entry is whole.
        let v = split_longstr(&mut self.raw)?;
        self.left -= 1;
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Values<'_> {}

/// FETCH, its fields named for what they hold. On the wire (RFC 46) the
/// partition is the topic key, the requester the `address` field and the
/// topic the `subject` field: only the codec knows those names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetch<'a> {
    /// The partition asked for: its producer's address (the topic key).
    pub partition: &'a [u8],
    /// Who asks, and gets the answers (`address`).
    pub requester: &'a [u8],
    /// The partition's topic (`subject`).
    pub topic: &'a [u8],
    /// The first offset asked for.
    pub sequence: u64,
    /// How many records from there.
    pub count: u32,
}

/// ACK: `topic` is the partition; `address` (the store) travels in `rfc` only.
/// ADDRESSED-ACK: the same, and `address` is always there (an encoder
/// refuses one without it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack<'a> {
    pub topic: &'a [u8],
    pub address: Option<&'a [u8]>,
    pub subject: &'a [u8],
    pub sequence: u64,
}

/// HEAD (`topic` = topic name) and DIRECT-HEAD (`topic` = requester address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head<'a> {
    pub topic: &'a [u8],
    /// The partition: the producer's address.
    pub address: &'a [u8],
    pub subject: &'a [u8],
    /// The offset of the partition's last record.
    pub sequence: u64,
}

/// TIME-QUERY, this project's extension: "the first offset at or after
/// `time`" of every partition of a topic, asked of the stores. Framed as a
/// HEAD: the topic key, then `address` (the requester), `subject` (the
/// topic) and `sequence` (the time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeQuery<'a> {
    /// The topic key: the topic asked about.
    pub topic: &'a [u8],
    /// Who asks, and gets the TIME-OFFSETs (`address`).
    pub requester: &'a [u8],
    /// The topic again (`subject`): a store answers only when it is the key.
    pub subject: &'a [u8],
    /// Milliseconds since the epoch (`sequence`).
    pub time: u64,
}

/// GET-HEADS: `topic` is the topic name, `address` the consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetHeads<'a> {
    pub topic: &'a [u8],
    pub address: &'a [u8],
}

/// CONSUMER-HELLO: `topic` is the store's address, `address` the consumer's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerHello<'a> {
    pub topic: &'a [u8],
    pub address: &'a [u8],
    pub subjects: Subjects<'a>,
}

/// The subjects (topic names) of a CONSUMER-HELLO. A decoded one is read in
/// place from its frame, checked once at decoding, so decoding allocates
/// nothing for them: a list of slices would take 16 bytes for each 4-byte
/// empty entry, four times what the frame holds. One to encode is a list.
#[derive(Debug, Clone)]
pub enum Subjects<'a> {
    /// `count` well-formed `longstr` entries, back to back, in `raw`.
    Wire {
        count: usize,
        raw: &'a [u8],
    },
    List(Vec<&'a [u8]>),
}

impl<'a> Subjects<'a> {
    pub fn len(&self) -> usize {
        match self {
            Subjects::Wire { count, .. } => *count,
            Subjects::List(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> SubjectsIter<'a> {
        match self {
            Subjects::Wire { count, raw } => SubjectsIter::Wire { left: *count, raw },
            Subjects::List(v) => SubjectsIter::List(v.clone().into_iter()),
        }
    }
}

impl<'a> From<Vec<&'a [u8]>> for Subjects<'a> {
    fn from(v: Vec<&'a [u8]>) -> Self {
        Subjects::List(v)
    }
}

impl PartialEq for Subjects<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Subjects<'_> {}

/// The entries of [`Subjects`], in order.
pub enum SubjectsIter<'a> {
    Wire { left: usize, raw: &'a [u8] },
    List(std::vec::IntoIter<&'a [u8]>),
}

impl<'a> Iterator for SubjectsIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            SubjectsIter::Wire { left, raw } => {
                if *left == 0 {
                    return None;
                }
                // Checked at decoding: every entry is whole.
                let s = split_longstr(raw)?;
                *left -= 1;
                Some(s)
            }
            SubjectsIter::List(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = match self {
            SubjectsIter::Wire { left, .. } => *left,
            SubjectsIter::List(it) => it.len(),
        };
        (n, Some(n))
    }
}

/// STORE-HELLO: `topic` is the consumer's address, `address` the store's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreHello<'a> {
    pub topic: &'a [u8],
    pub address: &'a [u8],
}

/// One Dafka message, borrowing its fields from the frames it was decoded from
/// (or from the caller, for encoding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<'a> {
    Record(Record<'a>),
    DirectRecord(Record<'a>),
    Fetch(Fetch<'a>),
    Ack(Ack<'a>),
    Head(Head<'a>),
    DirectHead(Head<'a>),
    GetHeads(GetHeads<'a>),
    ConsumerHello(ConsumerHello<'a>),
    StoreHello(StoreHello<'a>),
    RecordBatch(RecordBatch<'a>),
    DirectRecordBatch(RecordBatch<'a>),
    AddressedAck(Ack<'a>),
    /// A RECORD-BATCH of bodies: `values` are [`crate::meta`] bodies.
    MetaRecordBatch(RecordBatch<'a>),
    /// A DIRECT-RECORD-BATCH of bodies.
    DirectMetaRecordBatch(RecordBatch<'a>),
    /// The first offsets at or after a time, asked of the stores.
    TimeQuery(TimeQuery<'a>),
    /// `topic` = the requester, `address` the partition, `sequence` the first
    /// offset at or after the time asked (the next offset if none).
    TimeOffset(Head<'a>),
}

impl<'a> Message<'a> {
    pub fn kind(&self) -> Kind {
        match self {
            Message::Record(_) => Kind::Record,
            Message::DirectRecord(_) => Kind::DirectRecord,
            Message::Fetch(_) => Kind::Fetch,
            Message::Ack(_) => Kind::Ack,
            Message::Head(_) => Kind::Head,
            Message::DirectHead(_) => Kind::DirectHead,
            Message::GetHeads(_) => Kind::GetHeads,
            Message::ConsumerHello(_) => Kind::ConsumerHello,
            Message::StoreHello(_) => Kind::StoreHello,
            Message::RecordBatch(_) => Kind::RecordBatch,
            Message::DirectRecordBatch(_) => Kind::DirectRecordBatch,
            Message::AddressedAck(_) => Kind::AddressedAck,
            Message::MetaRecordBatch(_) => Kind::MetaRecordBatch,
            Message::DirectMetaRecordBatch(_) => Kind::DirectMetaRecordBatch,
            Message::TimeQuery(_) => Kind::TimeQuery,
            Message::TimeOffset(_) => Kind::TimeOffset,
        }
    }

    /// The topic key: what follows the ID in frame 0.
    pub fn topic(&self) -> &'a [u8] {
        match self {
            Message::Record(m) | Message::DirectRecord(m) => m.topic,
            Message::Fetch(m) => m.partition,
            Message::Ack(m) | Message::AddressedAck(m) => m.topic,
            Message::Head(m) | Message::DirectHead(m) | Message::TimeOffset(m) => m.topic,
            Message::TimeQuery(m) => m.topic,
            Message::GetHeads(m) => m.topic,
            Message::ConsumerHello(m) => m.topic,
            Message::StoreHello(m) => m.topic,
            Message::RecordBatch(m)
            | Message::DirectRecordBatch(m)
            | Message::MetaRecordBatch(m)
            | Message::DirectMetaRecordBatch(m) => m.topic,
        }
    }

    /// The content frame of RECORD, DIRECT-RECORD and the two batches.
    pub fn content(&self) -> Option<&'a [u8]> {
        match self {
            Message::Record(m) | Message::DirectRecord(m) => Some(m.content),
            Message::RecordBatch(m)
            | Message::DirectRecordBatch(m)
            | Message::MetaRecordBatch(m)
            | Message::DirectMetaRecordBatch(m) => Some(m.values),
            _ => None,
        }
    }

    /// Bytes of the bodies ([`crate::meta`]: metadata, then value) of the
    /// records a message carries, as a node takes them: a META batch's
    /// values are bodies; a record that came without metadata is given a
    /// body of [`crate::meta::PLAIN_LEN`] bytes more than its value. Read
    /// off the content frame's length (its values are checked whole when
    /// decoded: a 4-octet length each), not record by record; 0 for a
    /// message that carries no records.
    pub fn body_bytes(&self) -> u64 {
        let plain = crate::meta::PLAIN_LEN as u64;
        match self {
            Message::Record(m) | Message::DirectRecord(m) => m.content.len() as u64 + plain,
            Message::RecordBatch(m) | Message::DirectRecordBatch(m) => {
                m.value_bytes() + plain * u64::from(m.count)
            }
            Message::MetaRecordBatch(m) | Message::DirectMetaRecordBatch(m) => m.value_bytes(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests;
