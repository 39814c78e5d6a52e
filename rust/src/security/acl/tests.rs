//! The rules of `check_message` and `check_subscription`, and address binding.

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
    use crate::wire::{Ack, Fetch, GetHeads, Head, Message, Record, TimeQuery};

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
                    partition: b"P",
                    requester: &address.to_vec().leak()[..],
                    topic: subject,
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
        // Answered with the topics it may read only (the store's part).
        assert_eq!(check_message(&consumer, &all_heads), Ok(()));
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
        fn with(kind: Kind, key: &str) -> Prefix<'_> {
            Prefix::of(kind, key.as_bytes())
        }
        assert_eq!(
            check_subscription(&consumer, &Prefix::of(Kind::Record, b"logs")),
            Ok(())
        );
        assert!(check_subscription(&consumer, &Prefix::of(Kind::Record, b"secrets")).is_err());
        assert!(
            check_subscription(&consumer, &Prefix::of(Kind::Record, b"")).is_err(),
            "every topic"
        );
        assert_eq!(
            check_subscription(&store, &Prefix::of(Kind::Record, b"")),
            Ok(())
        );
        let cme = address_for_key(&c);
        assert_eq!(
            check_subscription(&consumer, &with(Kind::DirectRecord, &cme)),
            Ok(())
        );
        let sme = address_for_key(&s);
        assert!(
            check_subscription(&consumer, &with(Kind::DirectRecord, &sme)).is_err(),
            "another's"
        );
        // Only the partition's producer hears its ACKs.
        let pme = address_for_key(&p);
        assert_eq!(
            check_subscription(&producer, &with(Kind::Ack, &pme)),
            Ok(())
        );
        assert_eq!(
            check_subscription(&producer, &with(Kind::AddressedAck, &pme)),
            Ok(())
        );
        assert!(check_subscription(&consumer, &with(Kind::Ack, &pme)).is_err());
        assert!(check_subscription(&store, &with(Kind::Ack, &pme)).is_err());
        assert_eq!(
            check_subscription(&store, &Prefix::of(Kind::Fetch, b"")),
            Ok(())
        );
        assert!(check_subscription(&consumer, &Prefix::of(Kind::Fetch, b"")).is_err());
        assert!(check_subscription(&consumer, &Prefix::Everything).is_err());
        assert!(check_subscription(&consumer, &Prefix::parse(b"Zx")).is_err());
        assert_eq!(
            check_subscription(&consumer, &Prefix::Beacons { rest: b"" }),
            Ok(())
        );
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
            Message::TimeQuery(TimeQuery {
                topic: subject,
                requester: &address.as_bytes().to_vec().leak()[..],
                subject,
                time: 5,
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
        fn with(kind: Kind, key: &str) -> Prefix<'_> {
            Prefix::of(kind, key.as_bytes())
        }
        assert_eq!(
            check_subscription(&consumer, &Prefix::of(Kind::MetaRecordBatch, b"logs")),
            Ok(())
        );
        assert!(
            check_subscription(&consumer, &Prefix::of(Kind::MetaRecordBatch, b"secrets")).is_err()
        );
        assert!(check_subscription(&consumer, &Prefix::of(Kind::MetaRecordBatch, b"")).is_err());
        assert_eq!(
            check_subscription(&store, &Prefix::of(Kind::MetaRecordBatch, b"")),
            Ok(())
        );
        assert_eq!(
            check_subscription(&store, &Prefix::of(Kind::TimeQuery, b"")),
            Ok(())
        );
        assert!(
            check_subscription(&consumer, &Prefix::of(Kind::TimeQuery, b"")).is_err(),
            "stores answer"
        );
        assert!(check_subscription(&consumer, &Prefix::of(Kind::TimeQuery, b"logs")).is_err());
        for id in [Kind::DirectMetaRecordBatch, Kind::TimeOffset] {
            assert_eq!(check_subscription(&consumer, &with(id, &cme)), Ok(()));
            assert!(check_subscription(&consumer, &with(id, &sme)).is_err());
        }
    }
}

/// Every rule of [`check_message`] and [`check_subscription`], each by a
/// case that breaks that rule alone (a peer whose every other check
/// passes): removing any one rule fails its case. Issue 35 removed rules one
/// at a time and found one that no test caught (a consumer-role peer
/// subscribing to the empty prefix).
mod every_rule {
    use super::*;
    use crate::wire::{
        Ack, ConsumerHello, Fetch, GetHeads, Head, Message, Record, RecordBatch, StoreHello,
        TimeQuery,
    };

    /// What a check gave, by kind.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum V {
        Ok,
        NoRole,
        Role,
        Address,
        Topic,
        Unknown,
    }

    fn kind(r: Result<(), Denied>) -> V {
        match r {
            Ok(()) => V::Ok,
            Err(Denied::NoRole) => V::NoRole,
            Err(Denied::Role { .. }) => V::Role,
            Err(Denied::Address { .. }) => V::Address,
            Err(Denied::Topic { .. }) => V::Topic,
            Err(Denied::Subscription { .. }) => V::Unknown,
        }
    }

    /// A peer of `role` whose certificate allows `topics`, with its key.
    struct Who {
        key: [u8; 32],
        role: Option<Role>,
        topics: TopicPatterns,
    }

    impl Who {
        fn new(b: u8, role: Option<Role>, topics: &str) -> Self {
            Who {
                key: [b; 32],
                role,
                topics: topics.parse().unwrap(),
            }
        }
        fn peer(&self) -> Peer<'_> {
            Peer {
                key: &self.key,
                role: self.role,
                topics: &self.topics,
            }
        }
        /// An address of its own.
        fn me(&self) -> &'static [u8] {
            address_for_key(&self.key).into_bytes().leak()
        }
    }

    const OTHER: &[u8] = b"00112233445566778899AABBCCDDEEFF";

    fn rec(address: &'static [u8], subject: &'static [u8]) -> Record<'static> {
        Record {
            topic: subject,
            address,
            subject,
            sequence: 0,
            content: b"x",
        }
    }

    fn batch(address: &'static [u8], subject: &'static [u8]) -> RecordBatch<'static> {
        RecordBatch {
            topic: subject,
            address,
            subject,
            sequence: 0,
            count: 1,
            values: b"",
        }
    }

    fn head(address: &'static [u8], subject: &'static [u8]) -> Head<'static> {
        Head {
            topic: subject,
            address,
            subject,
            sequence: 0,
        }
    }

    /// Messages a producer publishes of its own partition (`address`).
    fn partition_messages(address: &'static [u8], subject: &'static [u8]) -> Vec<Message<'static>> {
        vec![
            Message::Record(rec(address, subject)),
            Message::RecordBatch(batch(address, subject)),
            Message::MetaRecordBatch(batch(address, subject)),
            Message::Head(head(address, subject)),
        ]
    }

    /// FETCH and GET-HEADS answers of the partition `address`.
    fn answers(address: &'static [u8], subject: &'static [u8]) -> Vec<Message<'static>> {
        vec![
            Message::DirectRecord(rec(address, subject)),
            Message::DirectRecordBatch(batch(address, subject)),
            Message::DirectMetaRecordBatch(batch(address, subject)),
            Message::DirectHead(head(address, subject)),
        ]
    }

    /// Requests asked as `address` (answers go there), for `subject`.
    fn requests(address: &'static [u8], subject: &'static [u8]) -> Vec<Message<'static>> {
        vec![
            Message::Fetch(Fetch {
                partition: OTHER,
                requester: address,
                topic: subject,
                sequence: 0,
                count: 1,
            }),
            Message::GetHeads(GetHeads {
                topic: subject,
                address,
            }),
            Message::TimeQuery(TimeQuery {
                topic: subject,
                requester: address,
                subject,
                time: 0,
            }),
            Message::ConsumerHello(ConsumerHello {
                topic: OTHER,
                address,
                subjects: vec![subject].into(),
            }),
        ]
    }

    fn ack(store: Option<&'static [u8]>) -> Message<'static> {
        Message::AddressedAck(Ack {
            topic: OTHER,
            address: store,
            subject: b"logs",
            sequence: 0,
        })
    }

    fn all(who: &Who, msgs: &[Message<'_>], want: V) {
        for m in msgs {
            assert_eq!(
                kind(check_message(&who.peer(), m)),
                want,
                "{m:?} from {:?}",
                who.role
            );
        }
    }

    #[test]
    fn check_message_pins_every_rule() {
        let producer = Who::new(1, Some(Role::Producer), "logs");
        let consumer = Who::new(2, Some(Role::Consumer), "logs");
        let store = Who::new(3, Some(Role::Store), "logs");
        let tower = Who::new(4, Some(Role::Tower), "*");
        let nobody = Who::new(5, None, "*");
        let any = |r| Who::new(6, Some(r), "*");

        // RECORD, RECORD-BATCH, META-RECORD-BATCH, HEAD: the producer of its
        // own partition, in its topics.
        all(
            &producer,
            &partition_messages(producer.me(), b"logs"),
            V::Ok,
        );
        all(&producer, &partition_messages(OTHER, b"logs"), V::Address);
        all(
            &producer,
            &partition_messages(producer.me(), b"secrets"),
            V::Topic,
        );
        for r in [Role::Consumer, Role::Store, Role::Tower] {
            let w = any(r);
            all(&w, &partition_messages(w.me(), b"logs"), V::Role);
        }
        all(
            &nobody,
            &partition_messages(nobody.me(), b"logs"),
            V::NoRole,
        );

        // FETCH answers: a store (any partition) or the partition's producer,
        // in a topic it may use.
        all(&store, &answers(OTHER, b"logs"), V::Ok);
        all(&store, &answers(OTHER, b"secrets"), V::Topic);
        all(&producer, &answers(producer.me(), b"logs"), V::Ok);
        all(&producer, &answers(OTHER, b"logs"), V::Address);
        all(&producer, &answers(producer.me(), b"secrets"), V::Topic);
        for w in [any(Role::Consumer), any(Role::Tower)] {
            all(&w, &answers(w.me(), b"logs"), V::Role);
        }
        all(&nobody, &answers(OTHER, b"logs"), V::NoRole);

        // ACKs: a store, naming itself if it names anyone.
        all(&store, &[ack(None), ack(Some(store.me()))], V::Ok);
        all(&store, &[ack(Some(OTHER))], V::Address);
        for w in [any(Role::Producer), any(Role::Consumer), any(Role::Tower)] {
            let me = w.me();
            all(&w, &[ack(None), ack(Some(me))], V::Role);
        }

        // Requests: a consumer or a store asking as itself, for its topics.
        for w in [&consumer, &store] {
            all(w, &requests(w.me(), b"logs"), V::Ok);
            all(w, &requests(OTHER, b"logs"), V::Address);
            all(w, &requests(w.me(), b"secrets"), V::Topic);
        }
        for w in [any(Role::Producer), any(Role::Tower)] {
            all(&w, &requests(w.me(), b"logs"), V::Role);
        }
        all(&nobody, &requests(nobody.me(), b"logs"), V::NoRole);
        // GET-HEADS for every topic: a store, or a consumer (answered with
        // its topics only); never a producer.
        let every = |a| {
            Message::GetHeads(GetHeads {
                topic: b"",
                address: a,
            })
        };
        all(&store, &[every(store.me())], V::Ok);
        let reader = any(Role::Consumer);
        all(&reader, &[every(reader.me())], V::Ok);
        all(&reader, &[every(OTHER)], V::Address);
        let p = any(Role::Producer);
        all(&p, &[every(p.me())], V::Role);
        // A CONSUMER-HELLO needs every subject allowed, not only one.
        let hello = Message::ConsumerHello(ConsumerHello {
            topic: OTHER,
            address: consumer.me(),
            subjects: vec![&b"logs"[..], b"secrets"].into(),
        });
        all(&consumer, &[hello], V::Topic);

        // STORE-HELLO: a store, as itself.
        let sh = |a| {
            Message::StoreHello(StoreHello {
                topic: OTHER,
                address: a,
            })
        };
        all(&store, &[sh(store.me())], V::Ok);
        all(&store, &[sh(OTHER)], V::Address);
        let c = any(Role::Consumer);
        all(&c, &[sh(c.me())], V::Role);

        // TIME-OFFSET: a store's answer, in its topics.
        let to = |s| Message::TimeOffset(head(OTHER, s));
        all(&store, &[to(b"logs")], V::Ok);
        all(&store, &[to(b"secrets")], V::Topic);
        for w in [any(Role::Producer), any(Role::Consumer), any(Role::Tower)] {
            all(&w, &[to(b"logs")], V::Role);
        }
        let _ = tower;
    }

    #[test]
    fn check_subscription_pins_every_rule() {
        let producer = Who::new(1, Some(Role::Producer), "logs");
        let consumer = Who::new(2, Some(Role::Consumer), "logs");
        let store = Who::new(3, Some(Role::Store), "*");
        let narrow_store = Who::new(4, Some(Role::Store), "logs");
        let nobody = Who::new(5, None, "*");
        let any = |r| Who::new(6, Some(r), "*");
        let sub = |w: &Who, prefix: Prefix<'_>| kind(check_subscription(&w.peer(), &prefix));
        let with = Prefix::of;

        // The empty prefix (everything): a store of every topic only. A
        // consumer of every topic would hear ACKs and FETCH answers meant
        // for others: the rule issue 35 found unpinned.
        assert_eq!(sub(&store, Prefix::Everything), V::Ok);
        assert_eq!(sub(&any(Role::Consumer), Prefix::Everything), V::Role);
        assert_eq!(sub(&any(Role::Producer), Prefix::Everything), V::Role);
        assert_eq!(sub(&narrow_store, Prefix::Everything), V::Topic);
        assert_eq!(sub(&nobody, Prefix::Everything), V::NoRole);

        // Records and heads by topic: readers, of a topic they may read;
        // every topic (the bare ID) a store of every topic.
        for id in [
            Kind::Record,
            Kind::Head,
            Kind::RecordBatch,
            Kind::MetaRecordBatch,
        ] {
            assert_eq!(sub(&consumer, with(id, b"logs")), V::Ok);
            assert_eq!(sub(&store, with(id, b"logs")), V::Ok);
            assert_eq!(sub(&consumer, with(id, b"secrets")), V::Topic);
            assert_eq!(sub(&any(Role::Producer), with(id, b"logs")), V::Role);
            assert_eq!(sub(&any(Role::Tower), with(id, b"logs")), V::Role);
            assert_eq!(sub(&store, with(id, b"")), V::Ok);
            assert_eq!(sub(&any(Role::Consumer), with(id, b"")), V::Role);
            assert_eq!(sub(&narrow_store, with(id, b"")), V::Topic);
        }
        // TIME-QUERYs: stores, of topics they may read.
        assert_eq!(sub(&store, with(Kind::TimeQuery, b"")), V::Ok);
        assert_eq!(sub(&store, with(Kind::TimeQuery, b"logs")), V::Ok);
        assert_eq!(
            sub(&narrow_store, with(Kind::TimeQuery, b"secrets")),
            V::Topic
        );
        assert_eq!(
            sub(&any(Role::Consumer), with(Kind::TimeQuery, b"")),
            V::Role
        );
        // GET-HEADS: producers and stores answer them, of their topics;
        // every GET-HEADS a store.
        assert_eq!(sub(&producer, with(Kind::GetHeads, b"logs")), V::Ok);
        assert_eq!(sub(&producer, with(Kind::GetHeads, b"secrets")), V::Topic);
        assert_eq!(sub(&store, with(Kind::GetHeads, b"")), V::Ok);
        assert_eq!(
            sub(&any(Role::Producer), with(Kind::GetHeads, b"")),
            V::Role
        );
        assert_eq!(
            sub(&any(Role::Consumer), with(Kind::GetHeads, b"logs")),
            V::Role
        );
        // Addressed answers and hellos: one's own address.
        for id in [
            Kind::DirectRecord,
            Kind::DirectHead,
            Kind::StoreHello,
            Kind::DirectRecordBatch,
            Kind::ConsumerHello,
            Kind::DirectMetaRecordBatch,
            Kind::TimeOffset,
        ] {
            for w in [&producer, &consumer, &store] {
                assert_eq!(sub(w, with(id, w.me())), V::Ok);
                assert_eq!(sub(w, with(id, OTHER)), V::Address);
            }
            let t = any(Role::Tower);
            assert_eq!(sub(&t, with(id, t.me())), V::Role);
        }
        // ACKs of a partition: its producer's.
        for id in [Kind::AddressedAck, Kind::Ack] {
            assert_eq!(sub(&producer, with(id, producer.me())), V::Ok);
            assert_eq!(sub(&producer, with(id, OTHER)), V::Address);
            let s = any(Role::Store);
            assert_eq!(sub(&s, with(id, s.me())), V::Role);
            let c = any(Role::Consumer);
            assert_eq!(sub(&c, with(id, c.me())), V::Role);
        }
        // FETCHes: of its own partition (a producer; a store too), every one
        // a store.
        assert_eq!(sub(&producer, with(Kind::Fetch, producer.me())), V::Ok);
        assert_eq!(sub(&producer, with(Kind::Fetch, OTHER)), V::Address);
        assert_eq!(sub(&store, with(Kind::Fetch, b"")), V::Ok);
        assert_eq!(sub(&any(Role::Producer), with(Kind::Fetch, b"")), V::Role);
        let c = any(Role::Consumer);
        assert_eq!(sub(&c, with(Kind::Fetch, c.me())), V::Role);
        // Beacons: any role; a certificate without one gets nothing.
        for r in Role::ALL {
            assert_eq!(sub(&any(r), Prefix::Beacons { rest: b"" }), V::Ok);
        }
        assert_eq!(sub(&nobody, Prefix::Beacons { rest: b"" }), V::NoRole);
        // Anything else.
        assert_eq!(sub(&store, Prefix::parse(b"Zx")), V::Unknown);
        // Consumer groups: a group's announcements to its members and
        // the stores, every group's and every COMMIT and COMMIT-QUERY to a
        // store, COMMIT-OFFSETS to their requester.
        let c = any(Role::Consumer);
        assert_eq!(sub(&c, Prefix::parse(b"Jg")), V::Ok);
        assert_eq!(sub(&store, Prefix::parse(b"Jg")), V::Ok);
        assert_eq!(sub(&any(Role::Producer), Prefix::parse(b"Jg")), V::Role);
        assert_eq!(sub(&nobody, Prefix::parse(b"Jg")), V::NoRole);
        for every in [&b"J"[..], b"C", b"U", b"Cg", b"Ug"] {
            assert_eq!(sub(&store, Prefix::parse(every)), V::Ok);
            assert_eq!(sub(&c, Prefix::parse(every)), V::Role);
        }
        let own = [&b"N"[..], c.me()].concat();
        assert_eq!(sub(&c, Prefix::parse(&own)), V::Ok);
        let others = [&b"N"[..], OTHER].concat();
        assert_eq!(sub(&c, Prefix::parse(&others)), V::Address);
        assert_eq!(sub(&any(Role::Producer), Prefix::parse(&own)), V::Role);

        // A member's own announcements (`check_member_subscription`, on
        // the XPUB of a member of group "billing" reading "logs" and
        // "payments"): a store; a consumer naming the group exactly whose
        // certificate covers both topics. A consumer of "logs" alone, or
        // one naming a prefix of the group ("J" + "b"), hears nothing; a
        // key that is no prefix of the group gets nothing from this node
        // anyway, and a node of no group announces nothing.
        let topics = [b"logs".to_vec(), b"payments".to_vec()];
        let billing = Some((&b"billing"[..], &topics[..]));
        let reader = Who::new(7, Some(Role::Consumer), "logs,payments");
        let member_sub =
            |w: &Who, key: &[u8], own| kind(check_member_subscription(&w.peer(), key, own));
        assert_eq!(member_sub(&reader, b"billing", billing), V::Ok);
        assert_eq!(member_sub(&store, b"billing", billing), V::Ok);
        assert_eq!(member_sub(&narrow_store, b"b", billing), V::Ok);
        assert_eq!(member_sub(&consumer, b"billing", billing), V::Topic);
        assert_eq!(member_sub(&reader, b"b", billing), V::Unknown);
        assert_eq!(member_sub(&reader, b"bill", billing), V::Unknown);
        assert_eq!(member_sub(&consumer, b"audit", billing), V::Ok);
        assert_eq!(member_sub(&consumer, b"billing", None), V::Ok);
        assert_eq!(member_sub(&any(Role::Producer), b"billing", None), V::Role);

        // The cluster view: every PARTITIONS-QUERY to a store, PARTITIONS
        // to their requester.
        assert_eq!(sub(&store, Prefix::parse(b"I")), V::Ok);
        assert_eq!(sub(&c, Prefix::parse(b"I")), V::Role);
        assert_eq!(sub(&c, Prefix::parse(b"Ilogs")), V::Role);
        let own = [&b"P"[..], c.me()].concat();
        assert_eq!(sub(&c, Prefix::parse(&own)), V::Ok);
        let others = [&b"P"[..], OTHER].concat();
        assert_eq!(sub(&c, Prefix::parse(&others)), V::Address);
        assert_eq!(sub(&any(Role::Producer), Prefix::parse(&own)), V::Role);
    }

    /// The consumer-group messages: members are consumers as themselves, in
    /// their topics; stores answer as themselves and ask of every group; a
    /// producer-role insider can send none of them.
    #[test]
    fn check_group_pins_every_rule() {
        use crate::wire::group::{
            Claim, ClaimState, Commit, CommitOffsets, CommitQuery, Entry, Member,
        };
        let consumer = Who::new(2, Some(Role::Consumer), "logs");
        let store = Who::new(3, Some(Role::Store), "*");
        let producer = Who::new(1, Some(Role::Producer), "*");
        let nobody = Who::new(5, None, "*");
        let check = |w: &Who, m: &GroupMessage<'_>| kind(check_group(&w.peer(), m));
        let me = consumer.me();
        let member = |address, topic: &'static [u8], claim: &'static [u8]| {
            GroupMessage::Member(Member {
                group: b"g",
                address,
                flags: 0,
                timeout_ms: 1000,
                topics: vec![topic],
                claims: vec![Claim {
                    topic: claim,
                    partition: OTHER,
                    state: ClaimState::Held,
                    offset: 0,
                }],
            })
        };
        assert_eq!(check(&consumer, &member(me, b"logs", b"logs")), V::Ok);
        assert_eq!(
            check(&consumer, &member(OTHER, b"logs", b"logs")),
            V::Address
        );
        assert_eq!(check(&consumer, &member(me, b"secrets", b"logs")), V::Topic);
        assert_eq!(check(&consumer, &member(me, b"logs", b"secrets")), V::Topic);
        for w in [&producer, &store] {
            assert_eq!(check(w, &member(w.me(), b"logs", b"logs")), V::Role);
        }
        assert_eq!(check(&nobody, &member(me, b"logs", b"logs")), V::NoRole);

        let commit = |address, topic| {
            GroupMessage::Commit(Commit {
                group: b"g",
                address,
                sequence: 1,
                entries: vec![Entry {
                    topic,
                    partition: OTHER,
                    epoch: 0,
                    offset: 5,
                }],
            })
        };
        assert_eq!(check(&consumer, &commit(me, &b"logs"[..])), V::Ok);
        assert_eq!(check(&consumer, &commit(OTHER, &b"logs"[..])), V::Address);
        assert_eq!(check(&consumer, &commit(me, &b"secrets"[..])), V::Topic);
        assert_eq!(
            check(&producer, &commit(producer.me(), &b"logs"[..])),
            V::Role
        );

        let query = |address, group: &'static [u8], topics: Vec<&'static [u8]>| {
            GroupMessage::CommitQuery(CommitQuery {
                group,
                address,
                sequence: 1,
                topics,
            })
        };
        assert_eq!(check(&consumer, &query(me, b"g", vec![b"logs"])), V::Ok);
        assert_eq!(
            check(&consumer, &query(OTHER, b"g", vec![b"logs"])),
            V::Address
        );
        assert_eq!(
            check(&consumer, &query(me, b"g", vec![b"secrets"])),
            V::Topic
        );
        // Every group, every topic: answered with its topics only.
        assert_eq!(check(&consumer, &query(me, b"", vec![b"logs"])), V::Ok);
        assert_eq!(check(&consumer, &query(me, b"g", vec![])), V::Ok);
        assert_eq!(check(&consumer, &query(me, b"", vec![])), V::Ok);
        assert_eq!(
            check(&consumer, &query(me, b"", vec![b"secrets"])),
            V::Topic
        );
        assert_eq!(check(&consumer, &query(OTHER, b"", vec![])), V::Address);
        assert_eq!(
            check(&producer, &query(producer.me(), b"", vec![])),
            V::Role
        );
        assert_eq!(check(&nobody, &query(me, b"", vec![])), V::NoRole);
        assert_eq!(check(&store, &query(store.me(), b"", vec![])), V::Ok);
        assert_eq!(
            check(&producer, &query(producer.me(), b"g", vec![b"logs"])),
            V::Role
        );

        let offsets = |address| {
            GroupMessage::CommitOffsets(CommitOffsets {
                to: OTHER,
                address,
                group: b"g",
                sequence: 1,
                flags: 0,
                entries: vec![],
            })
        };
        assert_eq!(check(&store, &offsets(store.me())), V::Ok);
        assert_eq!(check(&store, &offsets(OTHER)), V::Address);
        assert_eq!(check(&consumer, &offsets(me)), V::Role);
        assert_eq!(check(&producer, &offsets(producer.me())), V::Role);

        // The cluster view: a consumer or store asks as itself, of a topic
        // it may read or of every one; only a store answers, as itself.
        let pq = |address, topic: &'static [u8]| {
            GroupMessage::PartitionsQuery(crate::wire::group::PartitionsQuery {
                topic,
                address,
                sequence: 1,
            })
        };
        assert_eq!(check(&consumer, &pq(me, b"logs")), V::Ok);
        assert_eq!(check(&consumer, &pq(me, b"")), V::Ok);
        assert_eq!(check(&consumer, &pq(me, b"secrets")), V::Topic);
        assert_eq!(check(&consumer, &pq(OTHER, b"")), V::Address);
        assert_eq!(check(&store, &pq(store.me(), b"")), V::Ok);
        assert_eq!(check(&producer, &pq(producer.me(), b"")), V::Role);
        assert_eq!(check(&nobody, &pq(me, b"")), V::NoRole);
        let parts = |address| {
            GroupMessage::Partitions(crate::wire::group::Partitions {
                to: OTHER,
                address,
                sequence: 1,
                flags: 0,
                parts: vec![],
            })
        };
        assert_eq!(check(&store, &parts(store.me())), V::Ok);
        assert_eq!(check(&store, &parts(OTHER)), V::Address);
        assert_eq!(check(&consumer, &parts(me)), V::Role);
        assert_eq!(check(&producer, &parts(producer.me())), V::Role);
    }
}
