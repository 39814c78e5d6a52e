//! Roles and topic patterns, as a certificate's metadata states them, and the
//! binding of a node's address to its key.

use std::fmt;
use std::str::FromStr;

use super::error::SecurityError;
use crate::wire::group::{GroupKind, GroupMessage};
use crate::wire::{Kind, Prefix};

/// What a node may do in a secure cluster; a certificate's `role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Appends records, ACKs them, serves FETCHes and replicates.
    Store,
    /// Publishes records of its own partition; its ACKs come from stores only.
    Producer,
    /// Reads: subscribes, FETCHes, asks for heads. Never ACKs or injects records.
    Consumer,
    /// Relays beacons.
    Tower,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Store, Role::Producer, Role::Consumer, Role::Tower];

    pub fn name(self) -> &'static str {
        match self {
            Role::Store => "store",
            Role::Producer => "producer",
            Role::Consumer => "consumer",
            Role::Tower => "tower",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Role {
    type Err = SecurityError;
    fn from_str(s: &str) -> Result<Self, SecurityError> {
        Role::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| SecurityError::BadRole {
                found: s.to_string(),
            })
    }
}

/// The topics a certificate's holder may read and write: comma-separated
/// patterns where `*` stands for any run of characters (`weather.*`,
/// `logs`, `*`). No `topics` in a certificate means every topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPatterns(Vec<String>);

impl TopicPatterns {
    /// Every topic.
    pub fn all() -> Self {
        TopicPatterns(vec!["*".to_string()])
    }

    /// No topic (a key no longer trusted, and what it may learn of).
    pub fn none() -> Self {
        TopicPatterns(Vec::new())
    }

    pub fn patterns(&self) -> &[String] {
        &self.0
    }

    /// Whether `topic` matches one of the patterns.
    pub fn allows(&self, topic: &[u8]) -> bool {
        self.0.iter().any(|p| glob(p.as_bytes(), topic))
    }

    /// Whether every topic matches (a store's or tower's usual patterns).
    pub fn is_all(&self) -> bool {
        self.0.iter().any(|p| p.bytes().all(|b| b == b'*'))
    }
}

impl FromStr for TopicPatterns {
    type Err = SecurityError;
    fn from_str(s: &str) -> Result<Self, SecurityError> {
        let mut v = Vec::new();
        for p in s.split(',').map(str::trim) {
            let bad = p.is_empty()
                || p.len() > 255
                || p.chars().any(|c| c.is_control() || c == '"' || c == ',');
            if bad {
                return Err(SecurityError::BadPattern {
                    pattern: p.to_string(),
                });
            }
            v.push(p.to_string());
        }
        Ok(TopicPatterns(v))
    }
}

impl fmt::Display for TopicPatterns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(","))
    }
}

/// `*` matches any run of bytes (also none); everything else itself.
fn glob(pattern: &[u8], s: &[u8]) -> bool {
    // Iterative, with one backtrack point: linear in practice, no recursion.
    let (mut p, mut i) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, i));
            p += 1;
        } else if p < pattern.len() && pattern[p] == s[i] {
            p += 1;
            i += 1;
        } else if let Some((sp, si)) = star {
            p = sp + 1;
            i = si + 1;
            star = Some((sp, si + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// How many bytes of a node's public key its address starts with (in hex).
pub const KEY_PREFIX: usize = 8;

/// A secure node's address: the first [`KEY_PREFIX`] bytes of its public key
/// and 8 random bytes, as 32 upper-case hex characters (the form every Dafka
/// address has). Every peer can check an address against the key that
/// authenticated its sender ([`address_matches_key`]); nodes sharing a
/// certificate (a Spark job's tasks) still get addresses of their own.
pub fn address_for_key(public: &[u8; 32]) -> String {
    address_for_key_with(public, uuid::Uuid::new_v4().as_bytes())
}

/// [`address_for_key`] with its last 8 bytes taken from `rest` (a seeded
/// address: the same `rest`, the same address).
pub fn address_for_key_with(public: &[u8; 32], rest: &[u8; 16]) -> String {
    let mut raw = [0u8; 16];
    raw[..KEY_PREFIX].copy_from_slice(&public[..KEY_PREFIX]);
    raw[KEY_PREFIX..].copy_from_slice(&rest[..16 - KEY_PREFIX]);
    raw.iter().map(|b| format!("{b:02X}")).collect()
}

/// Whether `address` (32 hex characters) belongs to the holder of `public`.
pub fn address_matches_key(address: &[u8], public: &[u8; 32]) -> bool {
    if address.len() != 32 {
        return false;
    }
    public[..KEY_PREFIX]
        .iter()
        .zip(address.chunks(2))
        .all(|(b, hex)| hex == format!("{b:02X}").as_bytes())
}

/// Why a message or a subscription from an authenticated peer is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("its certificate names no role")]
    NoRole,
    #[error("a {role} may not send {what}")]
    Role { role: Role, what: &'static str },
    #[error("{what} names an address that is not its own")]
    Address { what: &'static str },
    #[error("its certificate does not allow topic {topic:?}")]
    Topic { topic: String },
    #[error("a subscription to {what} is not for a peer of its role")]
    Subscription { what: &'static str },
}

/// A peer as the trust directory knows it: its key, role and topics.
#[derive(Debug, Clone, Copy)]
pub struct Peer<'a> {
    pub key: &'a [u8; 32],
    pub role: Option<Role>,
    pub topics: &'a TopicPatterns,
}

impl Peer<'_> {
    fn role(&self) -> Result<Role, Denied> {
        self.role.ok_or(Denied::NoRole)
    }

    fn own(&self, address: &[u8], what: &'static str) -> Result<(), Denied> {
        if address_matches_key(address, self.key) {
            Ok(())
        } else {
            Err(Denied::Address { what })
        }
    }

    fn topic(&self, topic: &[u8]) -> Result<(), Denied> {
        if self.topics.allows(topic) {
            Ok(())
        } else {
            Err(Denied::Topic {
                topic: String::from_utf8_lossy(topic).into_owned(),
            })
        }
    }

    fn roles(&self, ok: &[Role], what: &'static str) -> Result<Role, Denied> {
        let role = self.role()?;
        if ok.contains(&role) {
            Ok(role)
        } else {
            Err(Denied::Role { role, what })
        }
    }
}

/// Whether `from` may have sent `msg`: the roles of secure clusters, per
/// message, with the sender known by the key that authenticated its
/// connection. Pure: the node loops call it on every message of a secure
/// peer and drop (and count) what it refuses.
///
/// - RECORD, RECORD-BATCH, HEAD: a producer, of its own partition (the
///   partition is the producer's address), in a topic it may write.
/// - DIRECT-RECORD(-BATCH), DIRECT-HEAD (FETCH and GET-HEADS answers): a
///   producer of its own partition, or a store; the topic one it may use.
/// - ACK, ADDRESSED-ACK: a store, naming itself if it names a store.
/// - FETCH, GET-HEADS: a consumer or a store asking as itself (answers go to
///   the requester's address), for a topic it may read; a producer asks
///   nothing. GET-HEADS of every topic (the empty one) too: a store answers
///   a consumer's with the partitions of the topics it may read only.
/// - META-RECORD-BATCH as RECORD-BATCH, DIRECT-META-RECORD-BATCH as
///   DIRECT-RECORD-BATCH.
/// - TIME-QUERY: a consumer or a store asking as itself, for a topic it may
///   read. TIME-OFFSET: a store, for a topic it may use.
/// - CONSUMER-HELLO: a consumer (or a store's read client) as itself, every
///   subject one it may read. STORE-HELLO: a store as itself.
pub fn check_message(from: &Peer<'_>, msg: &crate::wire::Message<'_>) -> Result<(), Denied> {
    use crate::wire::Message as M;
    use Role::{Consumer, Producer, Store};
    match msg {
        M::Record(r) => {
            from.roles(&[Producer], "RECORD")?;
            from.own(r.address, "a RECORD's partition")?;
            from.topic(r.subject)
        }
        M::RecordBatch(b) | M::MetaRecordBatch(b) => {
            from.roles(&[Producer], "RECORD-BATCH")?;
            from.own(b.address, "a RECORD-BATCH's partition")?;
            from.topic(b.subject)
        }
        M::Head(h) => {
            from.roles(&[Producer], "HEAD")?;
            from.own(h.address, "a HEAD's partition")?;
            from.topic(h.subject)
        }
        M::DirectRecord(r) => {
            if from.roles(&[Producer, Store], "DIRECT-RECORD")? == Producer {
                from.own(r.address, "a DIRECT-RECORD's partition")?;
            }
            from.topic(r.subject)
        }
        M::DirectRecordBatch(b) | M::DirectMetaRecordBatch(b) => {
            if from.roles(&[Producer, Store], "DIRECT-RECORD-BATCH")? == Producer {
                from.own(b.address, "a DIRECT-RECORD-BATCH's partition")?;
            }
            from.topic(b.subject)
        }
        M::DirectHead(h) => {
            if from.roles(&[Producer, Store], "DIRECT-HEAD")? == Producer {
                from.own(h.address, "a DIRECT-HEAD's partition")?;
            }
            from.topic(h.subject)
        }
        M::Ack(a) | M::AddressedAck(a) => {
            from.roles(&[Store], "ACK")?;
            match a.address {
                Some(store) => from.own(store, "an ACK's store"),
                None => Ok(()),
            }
        }
        M::Fetch(f) => {
            from.roles(&[Consumer, Store], "FETCH")?;
            from.own(f.requester, "a FETCH's requester")?;
            from.topic(f.topic)
        }
        M::GetHeads(g) => {
            from.roles(&[Consumer, Store], "GET-HEADS")?;
            from.own(g.address, "a GET-HEADS's requester")?;
            // The empty topic: every partition held. A store answers a
            // consumer's only with the topics its certificate allows
            // (`Core::reader_topics`).
            if g.topic.is_empty() {
                return Ok(());
            }
            from.topic(g.topic)
        }
        M::ConsumerHello(c) => {
            from.roles(&[Consumer, Store], "CONSUMER-HELLO")?;
            from.own(c.address, "a CONSUMER-HELLO's consumer")?;
            c.subjects.iter().try_for_each(|s| from.topic(s))
        }
        M::StoreHello(s) => {
            from.roles(&[Store], "STORE-HELLO")?;
            from.own(s.address, "a STORE-HELLO's store")
        }
        M::TimeQuery(q) => {
            from.roles(&[Consumer, Store], "TIME-QUERY")?;
            from.own(q.requester, "a TIME-QUERY's requester")?;
            from.topic(q.subject)
        }
        M::TimeOffset(o) => {
            from.roles(&[Store], "TIME-OFFSET")?;
            from.topic(o.subject)
        }
    }
}

/// Whether `from` may have sent the consumer-group message `msg`
/// (docs/groups.md, "Security"):
///
/// - GROUP-MEMBER, COMMIT: a consumer as itself, every topic it lists,
///   claims or commits one it may read.
/// - COMMIT-QUERY: a store as itself (every group: anti-entropy), or a
///   consumer as itself, each topic it names one it may read; a consumer's
///   question of every group or topic is answered with the commits of the
///   topics it may read only (`Core::reader_topics`).
/// - COMMIT-OFFSETS: a store as itself.
/// - PARTITIONS-QUERY (the cluster view): a consumer or a store as itself,
///   for a topic it may read or every topic (answered as above);
///   PARTITIONS: a store as itself.
///
/// So a producer-role insider can neither join, commit, ask nor answer, and
/// a consumer learns of the topics it may read only.
pub fn check_group(from: &Peer<'_>, msg: &GroupMessage<'_>) -> Result<(), Denied> {
    use Role::{Consumer, Store};
    match msg {
        GroupMessage::Member(m) => {
            from.roles(&[Consumer], "GROUP-MEMBER")?;
            from.own(m.address, "a GROUP-MEMBER's member")?;
            m.topics.iter().try_for_each(|t| from.topic(t))?;
            m.claims.iter().try_for_each(|c| from.topic(c.topic))
        }
        GroupMessage::Commit(c) => {
            from.roles(&[Consumer], "COMMIT")?;
            from.own(c.address, "a COMMIT's member")?;
            c.entries.iter().try_for_each(|e| from.topic(e.topic))
        }
        GroupMessage::CommitQuery(q) => {
            let role = from.roles(&[Consumer, Store], "COMMIT-QUERY")?;
            from.own(q.address, "a COMMIT-QUERY's requester")?;
            if role == Store {
                return Ok(());
            }
            // Every group or every topic: the store answers a consumer with
            // the commits of the topics it may read only.
            q.topics.iter().try_for_each(|t| from.topic(t))
        }
        GroupMessage::CommitOffsets(o) => {
            from.roles(&[Store], "COMMIT-OFFSETS")?;
            from.own(o.address, "a COMMIT-OFFSETS's store")
        }
        GroupMessage::PartitionsQuery(q) => {
            from.roles(&[Consumer, Store], "PARTITIONS-QUERY")?;
            from.own(q.address, "a PARTITIONS-QUERY's requester")?;
            if q.topic.is_empty() {
                return Ok(());
            }
            from.topic(q.topic)
        }
        GroupMessage::Partitions(p) => {
            from.roles(&[Store], "PARTITIONS")?;
            from.own(p.address, "a PARTITIONS's store")
        }
    }
}

/// Whether the peer `from` may subscribe `J` + `key` (a group's
/// announcements) on the XPUB of a node that is a member of group `own.0`
/// consuming topics `own.1` (`None`: a node of no group, which announces
/// nothing). Beside [`check_subscription`]'s rule (a consumer or a store;
/// `J` alone a store): what would reach a consumer of our announcements
/// (our group's name, topics, partitions and offsets) needs a certificate
/// covering every topic of our group, and a key that names our group
/// exactly (a prefix of it, `J` + `b` for `billing`, is refused: it would
/// be a way to hear every group starting with `b`). A store hears every
/// group. A key that is no prefix of our group gets nothing from us.
pub fn check_member_subscription(
    from: &Peer<'_>,
    key: &[u8],
    own: Option<(&[u8], &[Vec<u8>])>,
) -> Result<(), Denied> {
    if from.roles(&[Role::Consumer, Role::Store], "a subscription to a group")? == Role::Store {
        return Ok(());
    }
    let Some((group, topics)) = own else {
        return Ok(());
    };
    if !group.starts_with(key) {
        return Ok(());
    }
    if key != group {
        return Err(Denied::Subscription {
            what: "a prefix of a group's name",
        });
    }
    topics.iter().try_for_each(|t| from.topic(t))
}

/// Whether the peer `from` may subscribe `prefix` on our XPUB (applied only
/// then, with `ZMQ_XPUB_MANUAL`): what a subscription lets through is what
/// the peer may read. Topic keys need a topic it may read (the empty one,
/// every topic, needs every topic); address keys need its own address; the
/// partition keys of ACK and FETCH (`A`, `K`, `F` + partition: what a
/// producer hears) need the partition to be its own, and every FETCH (`F`)
/// a store.
pub fn check_subscription(from: &Peer<'_>, prefix: &Prefix<'_>) -> Result<(), Denied> {
    use Role::{Consumer, Producer, Store, Tower};
    let every_topic = |from: &Peer<'_>, what| -> Result<(), Denied> {
        from.roles(&[Store], what)?;
        if from.topics.is_all() {
            Ok(())
        } else {
            Err(Denied::Topic { topic: "*".into() })
        }
    };
    let (kind, key) = match *prefix {
        // The empty prefix: everything.
        Prefix::Everything => return every_topic(from, "a subscription to everything"),
        // Beacons (a tower's XPUB): every trusted node hears them.
        Prefix::Beacons { .. } => {
            from.roles(
                &[Producer, Consumer, Store, Tower],
                "a subscription to beacons",
            )?;
            return Ok(());
        }
        Prefix::Unknown(_) => {
            return Err(Denied::Subscription {
                what: "an unknown ID",
            })
        }
        // Consumer groups: announcements of a group to its members and
        // the stores (every group: a store), COMMITs and COMMIT-QUERYs to
        // the stores, COMMIT-OFFSETS to their own requester.
        Prefix::Group { kind, key } => {
            return match kind {
                GroupKind::Member if !key.is_empty() => from
                    .roles(&[Consumer, Store], "a subscription to a group")
                    .map(|_| ()),
                GroupKind::Member | GroupKind::Commit | GroupKind::CommitQuery => from
                    .roles(&[Store], "a subscription to every group's messages")
                    .map(|_| ()),
                GroupKind::CommitOffsets | GroupKind::Partitions => {
                    from.roles(&[Consumer, Store], "a subscription to answers")?;
                    from.own(key, "a subscription to answers")
                }
                GroupKind::PartitionsQuery => from
                    .roles(&[Store], "a subscription to PARTITIONS-QUERYs")
                    .map(|_| ()),
            };
        }
        Prefix::Messages { kind, key } => (kind, key),
    };
    let read = |what| -> Result<(), Denied> {
        from.roles(&[Consumer, Store], what)?;
        if key.is_empty() {
            // Every topic: a store's subscription (producers count stores by it).
            every_topic(from, "a subscription to every topic")
        } else {
            from.topic(key)
        }
    };
    match kind {
        // RECORD, HEAD, RECORD-BATCH by topic: a reader's.
        Kind::Record => read("a subscription to RECORDs"),
        Kind::Head => read("a subscription to HEADs"),
        Kind::RecordBatch => read("a subscription to RECORD-BATCHes"),
        Kind::MetaRecordBatch => read("a subscription to META-RECORD-BATCHes"),
        // TIME-QUERYs (every topic): what stores answer.
        Kind::TimeQuery => {
            from.roles(&[Store], "a subscription to TIME-QUERYs")?;
            if key.is_empty() {
                Ok(())
            } else {
                from.topic(key)
            }
        }
        // GET-HEADS by topic: what producers and stores answer.
        Kind::GetHeads => {
            from.roles(&[Producer, Store], "a subscription to GET-HEADS")?;
            if key.is_empty() {
                from.roles(&[Store], "a subscription to every GET-HEADS")?;
                Ok(())
            } else {
                from.topic(key)
            }
        }
        // Answers and hellos addressed to a node: its own.
        Kind::DirectRecord
        | Kind::DirectHead
        | Kind::StoreHello
        | Kind::DirectRecordBatch
        | Kind::ConsumerHello
        | Kind::DirectMetaRecordBatch
        | Kind::TimeOffset => {
            from.roles(&[Producer, Consumer, Store], "an addressed subscription")?;
            from.own(key, "an addressed subscription")
        }
        // ACKs of a partition: its producer's.
        Kind::AddressedAck | Kind::Ack => {
            from.roles(&[Producer], "a subscription to ACKs")?;
            from.own(key, "a subscription to ACKs")
        }
        // FETCHes: of its own partition (a producer), or every one (a store).
        Kind::Fetch => {
            if key.is_empty() {
                from.roles(&[Store], "a subscription to every FETCH")?;
                Ok(())
            } else {
                from.roles(&[Producer, Store], "a subscription to FETCHes")?;
                from.own(key, "a subscription to FETCHes")
            }
        }
    }
}

#[cfg(test)]
mod tests;
