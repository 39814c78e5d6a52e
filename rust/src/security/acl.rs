//! Roles and topic patterns, as a certificate's metadata states them, and the
//! binding of a node's address to its key.

use std::fmt;
use std::str::FromStr;

use super::error::SecurityError;

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
///   nothing.
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
            from.own(f.address, "a FETCH's requester")?;
            from.topic(f.subject)
        }
        M::GetHeads(g) => {
            from.roles(&[Consumer, Store], "GET-HEADS")?;
            from.own(g.address, "a GET-HEADS's requester")?;
            // The empty topic (store to store: every partition held).
            if g.topic.is_empty() {
                from.roles(&[Store], "GET-HEADS for every topic")?;
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
            from.own(q.address, "a TIME-QUERY's requester")?;
            from.topic(q.subject)
        }
        M::TimeOffset(o) => {
            from.roles(&[Store], "TIME-OFFSET")?;
            from.topic(o.subject)
        }
    }
}

/// Whether the peer `from` may subscribe `prefix` on our XPUB (applied only
/// then, with `ZMQ_XPUB_MANUAL`): what a subscription lets through is what
/// the peer may read. Topic keys need a topic it may read (the empty one,
/// every topic, needs every topic); address keys need its own address; the
/// partition keys of ACK and FETCH (`A`, `K`, `F` + partition: what a
/// producer hears) need the partition to be its own, and every FETCH (`F`)
/// a store.
pub fn check_subscription(from: &Peer<'_>, prefix: &[u8]) -> Result<(), Denied> {
    use Role::{Consumer, Producer, Store, Tower};
    let Some((&id, key)) = prefix.split_first() else {
        // The empty prefix: everything.
        from.roles(&[Store], "a subscription to everything")?;
        return if from.topics.is_all() {
            Ok(())
        } else {
            Err(Denied::Topic { topic: "*".into() })
        };
    };
    let read = |what| -> Result<(), Denied> {
        from.roles(&[Consumer, Store], what)?;
        if key.is_empty() {
            // Every topic: a store's subscription (producers count stores by it).
            from.roles(&[Store], "a subscription to every topic")?;
            if from.topics.is_all() {
                Ok(())
            } else {
                Err(Denied::Topic { topic: "*".into() })
            }
        } else {
            from.topic(key)
        }
    };
    match id {
        // RECORD, HEAD, RECORD-BATCH by topic: a reader's.
        b'M' => read("a subscription to RECORDs"),
        b'H' => read("a subscription to HEADs"),
        b'R' => read("a subscription to RECORD-BATCHes"),
        b'X' => read("a subscription to META-RECORD-BATCHes"),
        // TIME-QUERYs (every topic): what stores answer.
        b'T' => {
            from.roles(&[Store], "a subscription to TIME-QUERYs")?;
            if key.is_empty() {
                Ok(())
            } else {
                from.topic(key)
            }
        }
        // GET-HEADS by topic: what producers and stores answer.
        b'G' => {
            from.roles(&[Producer, Store], "a subscription to GET-HEADS")?;
            if key.is_empty() {
                from.roles(&[Store], "a subscription to every GET-HEADS")?;
                Ok(())
            } else {
                from.topic(key)
            }
        }
        // Answers and hellos addressed to a node: its own.
        b'D' | b'E' | b'L' | b'Q' | b'W' | b'Y' | b'O' => {
            from.roles(&[Producer, Consumer, Store], "an addressed subscription")?;
            from.own(key, "an addressed subscription")
        }
        // ACKs of a partition: its producer's.
        b'A' | b'K' => {
            from.roles(&[Producer], "a subscription to ACKs")?;
            from.own(key, "a subscription to ACKs")
        }
        // FETCHes: of its own partition (a producer), or every one (a store).
        b'F' => {
            if key.is_empty() {
                from.roles(&[Store], "a subscription to every FETCH")?;
                Ok(())
            } else {
                from.roles(&[Producer, Store], "a subscription to FETCHes")?;
                from.own(key, "a subscription to FETCHes")
            }
        }
        // Beacons (a tower's XPUB): every trusted node hears them.
        b'B' => {
            from.roles(
                &[Producer, Consumer, Store, Tower],
                "a subscription to beacons",
            )?;
            Ok(())
        }
        _ => Err(Denied::Subscription {
            what: "an unknown ID",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_parse_and_print() {
        for r in Role::ALL {
            assert_eq!(r.name().parse::<Role>().unwrap(), r);
        }
        let e = "admin".parse::<Role>().unwrap_err().to_string();
        assert!(e.contains("store, producer, consumer or tower"), "{e}");
    }

    #[test]
    fn topic_patterns_match_as_globs() {
        let p: TopicPatterns = "weather.*, logs,*-eu".parse().unwrap();
        assert!(p.allows(b"weather.paris"));
        assert!(p.allows(b"weather."));
        assert!(!p.allows(b"weather"));
        assert!(p.allows(b"logs"));
        assert!(!p.allows(b"logs2"));
        assert!(p.allows(b"sales-eu"));
        assert!(!p.allows(b"sales-us"));
        assert!(!p.is_all());
        assert!(TopicPatterns::all().allows(b""));
        assert!(TopicPatterns::all().is_all());
        let mid: TopicPatterns = "a*b*c".parse().unwrap();
        assert!(mid.allows(b"abc") && mid.allows(b"aXXbYYc") && !mid.allows(b"aXXbYY"));
        assert_eq!(p.to_string(), "weather.*,logs,*-eu");
        for bad in ["", "a,,b", "a\"b", "x\ny"] {
            assert!(bad.parse::<TopicPatterns>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_pathological_pattern_stays_linear() {
        let p: TopicPatterns = "*a*a*a*a*a*a*a*a*b".parse().unwrap();
        assert!(!p.allows(&[b'a'; 200]));
    }

    #[test]
    fn addresses_bind_to_their_key() {
        let key = [0xABu8; 32];
        let mut other = key;
        other[3] = 0;
        let a = address_for_key(&key);
        assert_eq!(a.len(), 32);
        assert!(a.starts_with("ABABABABABABABAB"));
        assert!(a
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_lowercase()));
        assert_ne!(
            a,
            address_for_key(&key),
            "two nodes, one key: two addresses"
        );
        assert!(address_matches_key(a.as_bytes(), &key));
        assert!(!address_matches_key(a.as_bytes(), &other));
        assert!(!address_matches_key(&a.as_bytes()[..31], &key));
        assert!(!address_matches_key(a.to_lowercase().as_bytes(), &key));
    }

    mod policy {
        use super::super::*;
        use crate::wire::{Ack, Fetch, GetHeads, Head, Message, Record};

        fn key(b: u8) -> [u8; 32] {
            [b; 32]
        }

        #[test]
        fn only_a_store_acks_and_only_as_itself() {
            let all = TopicPatterns::all();
            let (s, c) = (key(1), key(2));
            let store = Peer {
                key: &s,
                role: Some(Role::Store),
                topics: &all,
            };
            let consumer = Peer {
                key: &c,
                role: Some(Role::Consumer),
                topics: &all,
            };
            let me = address_for_key(&s);
            let other = address_for_key(&c);
            let ack = |addr: Option<&'static [u8]>| Ack {
                topic: b"P",
                address: addr,
                subject: b"t",
                sequence: 9,
            };
            let mine: &'static [u8] = Box::leak(me.into_bytes().into_boxed_slice());
            let theirs: &'static [u8] = Box::leak(other.into_bytes().into_boxed_slice());
            assert_eq!(
                check_message(&store, &Message::AddressedAck(ack(Some(mine)))),
                Ok(())
            );
            assert_eq!(check_message(&store, &Message::Ack(ack(None))), Ok(()));
            assert!(matches!(
                check_message(&store, &Message::AddressedAck(ack(Some(theirs)))),
                Err(Denied::Address { .. })
            ));
            // The forged ACK of issue 30: a consumer-role insider's.
            assert_eq!(
                check_message(&consumer, &Message::Ack(ack(None))),
                Err(Denied::Role {
                    role: Role::Consumer,
                    what: "ACK"
                })
            );
            let none = Peer {
                key: &s,
                role: None,
                topics: &all,
            };
            assert_eq!(
                check_message(&none, &Message::Ack(ack(None))),
                Err(Denied::NoRole)
            );
        }

        #[test]
        fn records_come_from_their_own_producer_in_its_topics() {
            let weather: TopicPatterns = "weather.*".parse().unwrap();
            let (p, c) = (key(3), key(4));
            let producer = Peer {
                key: &p,
                role: Some(Role::Producer),
                topics: &weather,
            };
            let consumer = Peer {
                key: &c,
                role: Some(Role::Consumer),
                topics: &weather,
            };
            let own = address_for_key(&p);
            let rec = |address: &[u8], subject: &'static [u8]| {
                check_message(
                    &producer,
                    &Message::Record(Record {
                        topic: subject,
                        address: &address.to_vec().leak()[..],
                        subject,
                        sequence: 0,
                        content: b"x",
                    }),
                )
            };
            assert_eq!(rec(own.as_bytes(), b"weather.paris"), Ok(()));
            assert!(matches!(
                rec(own.as_bytes(), b"sales"),
                Err(Denied::Topic { .. })
            ));
            let other = address_for_key(&c);
            assert!(matches!(
                rec(other.as_bytes(), b"weather.x"),
                Err(Denied::Address { .. })
            ));
            let injected = Message::Record(Record {
                topic: b"weather.x",
                address: b"C",
                subject: b"weather.x",
                sequence: 0,
                content: b"x",
            });
            assert!(matches!(
                check_message(&consumer, &injected),
                Err(Denied::Role {
                    role: Role::Consumer,
                    ..
                })
            ));
            let head = Message::Head(Head {
                topic: b"weather.x",
                address: own.as_bytes(),
                subject: b"weather.x",
                sequence: 3,
            });
            assert_eq!(check_message(&producer, &head), Ok(()));
            assert!(check_message(&consumer, &head).is_err());
        }

        #[test]
        fn requests_are_asked_as_oneself_for_readable_topics() {
            let logs: TopicPatterns = "logs".parse().unwrap();
            let c = key(5);
            let consumer = Peer {
                key: &c,
                role: Some(Role::Consumer),
                topics: &logs,
            };
            let me = address_for_key(&c);
            let fetch = |subject: &'static [u8], address: &[u8]| {
                check_message(
                    &consumer,
                    &Message::Fetch(Fetch {
                        topic: b"P",
                        address: &address.to_vec().leak()[..],
                        subject,
                        sequence: 0,
                        count: 10,
                    }),
                )
            };
            assert_eq!(fetch(b"logs", me.as_bytes()), Ok(()));
            assert!(matches!(
                fetch(b"secrets", me.as_bytes()),
                Err(Denied::Topic { .. })
            ));
            let victim = address_for_key(&key(6));
            assert!(matches!(
                fetch(b"logs", victim.as_bytes()),
                Err(Denied::Address { .. })
            ));
            let all_heads = Message::GetHeads(GetHeads {
                topic: b"",
                address: me.as_bytes(),
            });
            assert!(check_message(&consumer, &all_heads).is_err(), "stores only");
        }

        #[test]
        fn subscriptions_let_through_only_what_the_peer_may_read() {
            let logs: TopicPatterns = "logs".parse().unwrap();
            let all = TopicPatterns::all();
            let (c, s, p) = (key(7), key(8), key(9));
            let consumer = Peer {
                key: &c,
                role: Some(Role::Consumer),
                topics: &logs,
            };
            let store = Peer {
                key: &s,
                role: Some(Role::Store),
                topics: &all,
            };
            let producer = Peer {
                key: &p,
                role: Some(Role::Producer),
                topics: &all,
            };
            let with = |id: u8, key: &str| [&[id], key.as_bytes()].concat();
            assert_eq!(check_subscription(&consumer, b"Mlogs"), Ok(()));
            assert!(check_subscription(&consumer, b"Msecrets").is_err());
            assert!(check_subscription(&consumer, b"M").is_err(), "every topic");
            assert_eq!(check_subscription(&store, b"M"), Ok(()));
            let cme = address_for_key(&c);
            assert_eq!(check_subscription(&consumer, &with(b'D', &cme)), Ok(()));
            let sme = address_for_key(&s);
            assert!(
                check_subscription(&consumer, &with(b'D', &sme)).is_err(),
                "another's"
            );
            // Only the partition's producer hears its ACKs.
            let pme = address_for_key(&p);
            assert_eq!(check_subscription(&producer, &with(b'K', &pme)), Ok(()));
            assert_eq!(check_subscription(&producer, &with(b'A', &pme)), Ok(()));
            assert!(check_subscription(&consumer, &with(b'K', &pme)).is_err());
            assert!(check_subscription(&store, &with(b'K', &pme)).is_err());
            assert_eq!(check_subscription(&store, b"F"), Ok(()));
            assert!(check_subscription(&consumer, b"F").is_err());
            assert!(check_subscription(&consumer, b"").is_err());
            assert!(check_subscription(&consumer, b"Zx").is_err());
            assert_eq!(check_subscription(&consumer, b"B"), Ok(()));
        }

        /// Issue 31's messages, as an attacker would send them.
        #[test]
        fn record_metadata_and_time_queries_keep_their_roles() {
            use crate::wire::RecordBatch;
            let logs: TopicPatterns = "logs".parse().unwrap();
            let all = TopicPatterns::all();
            let (c, s, p) = (key(10), key(11), key(12));
            let consumer = Peer {
                key: &c,
                role: Some(Role::Consumer),
                topics: &logs,
            };
            let store = Peer {
                key: &s,
                role: Some(Role::Store),
                topics: &all,
            };
            let producer = Peer {
                key: &p,
                role: Some(Role::Producer),
                topics: &logs,
            };
            let (cme, sme, pme) = (
                address_for_key(&c),
                address_for_key(&s),
                address_for_key(&p),
            );
            let batch = |address: &str, subject: &'static [u8]| RecordBatch {
                topic: subject,
                address: &address.as_bytes().to_vec().leak()[..],
                subject,
                sequence: 0,
                count: 1,
                values: b"",
            };
            // Records with metadata: the partition's own producer, its topics.
            let own = Message::MetaRecordBatch(batch(&pme, b"logs"));
            assert_eq!(check_message(&producer, &own), Ok(()));
            let forged = Message::MetaRecordBatch(batch(&pme, b"logs"));
            assert!(matches!(
                check_message(&consumer, &forged),
                Err(Denied::Role { .. })
            ));
            assert!(matches!(
                check_message(&producer, &Message::MetaRecordBatch(batch(&sme, b"logs"))),
                Err(Denied::Address { .. })
            ));
            assert!(matches!(
                check_message(
                    &producer,
                    &Message::MetaRecordBatch(batch(&pme, b"secrets"))
                ),
                Err(Denied::Topic { .. })
            ));
            // FETCH answers with metadata: a store, or the partition's producer.
            let answer = Message::DirectMetaRecordBatch(batch(&pme, b"logs"));
            assert_eq!(check_message(&store, &answer), Ok(()));
            assert_eq!(check_message(&producer, &answer), Ok(()));
            assert!(check_message(&consumer, &answer).is_err());
            // TIME-QUERY: a reader, as itself, for a topic it may read.
            let query = |address: &str, subject: &'static [u8]| {
                Message::TimeQuery(Head {
                    topic: subject,
                    address: &address.as_bytes().to_vec().leak()[..],
                    subject,
                    sequence: 5,
                })
            };
            assert_eq!(check_message(&consumer, &query(&cme, b"logs")), Ok(()));
            assert!(matches!(
                check_message(&consumer, &query(&sme, b"logs")),
                Err(Denied::Address { .. })
            ));
            assert!(matches!(
                check_message(&consumer, &query(&cme, b"secrets")),
                Err(Denied::Topic { .. })
            ));
            assert!(check_message(&producer, &query(&pme, b"logs")).is_err());
            // TIME-OFFSET: a store's answer; a consumer or producer forging one
            // (to move a reader's start) is refused.
            let offset = Message::TimeOffset(Head {
                topic: b"C",
                address: b"P",
                subject: b"logs",
                sequence: 0,
            });
            assert_eq!(check_message(&store, &offset), Ok(()));
            assert!(matches!(
                check_message(&consumer, &offset),
                Err(Denied::Role { .. })
            ));
            assert!(check_message(&producer, &offset).is_err());
            // Subscriptions: `X` + a readable topic; `X` and `T` (every topic)
            // stores only; `Y` and `O` + one's own address.
            let with = |id: u8, key: &str| [&[id], key.as_bytes()].concat();
            assert_eq!(check_subscription(&consumer, b"Xlogs"), Ok(()));
            assert!(check_subscription(&consumer, b"Xsecrets").is_err());
            assert!(check_subscription(&consumer, b"X").is_err());
            assert_eq!(check_subscription(&store, b"X"), Ok(()));
            assert_eq!(check_subscription(&store, b"T"), Ok(()));
            assert!(
                check_subscription(&consumer, b"T").is_err(),
                "stores answer"
            );
            assert!(check_subscription(&consumer, b"Tlogs").is_err());
            for id in [b'Y', b'O'] {
                assert_eq!(check_subscription(&consumer, &with(id, &cme)), Ok(()));
                assert!(check_subscription(&consumer, &with(id, &sme)).is_err());
            }
        }
    }
}
