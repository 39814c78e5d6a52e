//! Codec tests: golden vectors from the C reference, hand-built RFC bytes,
//! property round trips and never-panic fuzzing.

use super::*;
use proptest::prelude::*;
use serde_json::Value;

const VECTORS: &str = include_str!("../../../tests/data/zproto-vectors.json");

fn vectors() -> Vec<Value> {
    serde_json::from_str(VECTORS).expect("vectors parse")
}

fn frames_of(v: &Value) -> Vec<Vec<u8>> {
    v["frames_hex"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| hex::decode(h.as_str().unwrap()).unwrap())
        .collect()
}

fn text(v: &Value, key: &str) -> Vec<u8> {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} missing"))
        .as_bytes()
        .to_vec()
}

#[test]
fn meta_batches_carry_bodies_and_refuse_values_that_are_not() {
    let mut body = Vec::new();
    crate::meta::encode(&mut body, 7, Some(b"k"), &[("h", b"v")]);
    body.extend_from_slice(b"value");
    let mut values = Vec::new();
    let count = RecordBatch::put_values(&mut values, [body.as_slice()]).unwrap();
    for dialect in [Dialect::Rfc, Dialect::Zproto] {
        let b = RecordBatch {
            topic: b"logs",
            address: b"P",
            subject: b"logs",
            sequence: 3,
            count,
            values: &values,
        };
        let frames = Message::MetaRecordBatch(b).to_frames(dialect).unwrap();
        assert_eq!(frames[0][0], b'X');
        let (back, _) = decode(&frames).unwrap();
        let Message::MetaRecordBatch(got) = back else {
            panic!("{back:?}")
        };
        let (m, v) = crate::meta::split(got.values().next().unwrap()).unwrap();
        assert_eq!((m.key, v), (Some(&b"k"[..]), &b"value"[..]));
        // Its records' bytes: the bodies as they came, metadata included.
        assert_eq!(back.body_bytes(), body.len() as u64);
        // A plain value where a body must be: malformed, both ways.
        let mut plain = Vec::new();
        RecordBatch::put_values(&mut plain, [&b"\xff\x00"[..]]).unwrap();
        let bad = RecordBatch {
            values: &plain,
            ..b
        };
        assert!(Message::MetaRecordBatch(bad).to_frames(dialect).is_err());
        let mut frames = frames.clone();
        *frames.last_mut().unwrap() = plain.clone();
        assert!(decode(&frames).is_err());
        // The same values as a RECORD-BATCH are fine: values are anything.
        frames[0][0] = b'R';
        if dialect == Dialect::Rfc {
            frames[1][2] = b'R';
        }
        assert!(matches!(decode(&frames), Ok((Message::RecordBatch(_), _))));
    }
    // TIME-QUERY and TIME-OFFSET round trip.
    let q = Message::TimeQuery(TimeQuery {
        topic: b"logs",
        requester: b"C",
        subject: b"logs",
        time: 1_700_000_000_000,
    });
    let o = Message::TimeOffset(Head {
        topic: b"C",
        address: b"P",
        subject: b"logs",
        sequence: 42,
    });
    for m in [q, o] {
        for dialect in [Dialect::Rfc, Dialect::Zproto] {
            assert_eq!(decode(&m.to_frames(dialect).unwrap()).unwrap().0, m);
        }
    }
}

#[test]
fn golden_messages_decode_and_reencode_byte_exact() {
    let mut checked = 0;
    for v in vectors() {
        let ty = v["type"].as_str().unwrap();
        let Some(kind) = Kind::from_name(ty) else {
            continue;
        };
        let frames = frames_of(&v);
        let d = &v["decoded"];
        let (msg, dialect) = decode(&frames).unwrap_or_else(|e| panic!("{ty}: {e}"));
        assert_eq!(dialect, Dialect::Zproto, "{ty}");
        assert_eq!(msg.kind(), kind);
        assert_eq!(msg.topic(), text(d, "topic").as_slice(), "{ty} topic");
        assert_eq!(d["version"], 1);
        assert_eq!(d["frame_count"].as_u64().unwrap() as usize, frames.len());
        let seq = d["sequence"].as_u64();
        match &msg {
            Message::Record(r) | Message::DirectRecord(r) => {
                assert_eq!(r.address, text(d, "address"));
                assert_eq!(r.subject, text(d, "subject"));
                assert_eq!(Some(r.sequence), seq);
                assert_eq!(hex::encode(r.content), d["content_hex"].as_str().unwrap());
            }
            Message::Fetch(f) => {
                // RFC names: the requester is `address`, the topic `subject`.
                assert_eq!(f.requester, text(d, "address"));
                assert_eq!(f.topic, text(d, "subject"));
                assert_eq!(Some(f.sequence), seq);
                assert_eq!(Some(u64::from(f.count)), d["count"].as_u64());
            }
            Message::Ack(a) => {
                assert_eq!(a.address, None, "zproto ACK has no address");
                assert!(d.get("address").is_none());
                assert_eq!(a.subject, text(d, "subject"));
                assert_eq!(Some(a.sequence), seq);
            }
            Message::Head(h) | Message::DirectHead(h) => {
                assert_eq!(h.address, text(d, "address"));
                assert_eq!(h.subject, text(d, "subject"));
                assert_eq!(Some(h.sequence), seq);
            }
            Message::MetaRecordBatch(_)
            | Message::DirectMetaRecordBatch(_)
            | Message::TimeQuery(_)
            | Message::TimeOffset(_) => panic!("{ty}: no golden vector of an extension"),
            Message::GetHeads(g) => assert_eq!(g.address, text(d, "address")),
            Message::StoreHello(s) => assert_eq!(s.address, text(d, "address")),
            Message::ConsumerHello(c) => {
                assert_eq!(c.address, text(d, "address"));
                let want: Vec<Vec<u8>> = d["subjects"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap().as_bytes().to_vec())
                    .collect();
                let got: Vec<Vec<u8>> = c.subjects.iter().map(|s| s.to_vec()).collect();
                assert_eq!(got, want);
            }
            Message::RecordBatch(_) | Message::DirectRecordBatch(_) | Message::AddressedAck(_) => {
                panic!("the C reference has none of this project's extensions")
            }
        }
        assert_eq!(
            msg.to_frames(Dialect::Zproto).unwrap(),
            frames,
            "{ty} re-encode"
        );
        checked += 1;
    }
    assert_eq!(checked, 79, "every message vector was checked");
}

#[test]
fn golden_beacons_welcome_and_subscriptions() {
    let (mut beacons, mut subs) = (0, 0);
    for v in vectors() {
        let ty = v["type"].as_str().unwrap();
        let frames = frames_of(&v);
        let d = &v["decoded"];
        if ty.starts_with("BEACON") || ty == "WELCOME" {
            let b = decode_beacon(&frames).unwrap_or_else(|e| panic!("{ty}: {e}"));
            match &b {
                Beacon::Node {
                    uuid,
                    host,
                    port,
                    key,
                } => {
                    assert_eq!(*key, None, "the C reference has no keys");
                    assert_eq!(ty, "BEACON(node->tower)");
                    assert_eq!(*uuid, text(d, "sender"));
                    assert_eq!(*host, text(d, "host"));
                    assert_eq!(port.to_string(), d["port"].as_str().unwrap());
                }
                Beacon::Tower { uuid, endpoint } => {
                    assert_eq!(ty, "BEACON(tower->node)");
                    assert_eq!(*uuid, text(d, "sender"));
                    assert_eq!(*endpoint, text(d, "endpoint"));
                }
                Beacon::Welcome => assert_eq!(ty, "WELCOME"),
            }
            assert_eq!(b.to_frames(), frames);
            beacons += 1;
        } else if ty.starts_with("SUBSCRIPTION") {
            assert_eq!(frames.len(), 1);
            let s = Subscription::decode(&frames[0]).unwrap();
            assert_eq!(u64::from(s.subscribe), d["subscribe"].as_u64().unwrap());
            assert_eq!(s.prefix.to_bytes(), text(d, "prefix_text"));
            if let Some(name) = d.get("msg_type").and_then(Value::as_str) {
                if let Prefix::Messages { kind, key } = s.prefix {
                    assert_eq!(kind.name(), name);
                    assert_eq!(key, text(d, "topic_part"));
                }
            }
            assert_eq!(s.encode(), frames[0]);
            subs += 1;
        }
    }
    assert_eq!((beacons, subs), (19, 60));
}

// ------------------------------------------------ RFC dialect, by hand

const ADDR: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";

fn rfc_body(id: u8, fields: &[&[u8]]) -> Vec<u8> {
    let mut b = vec![0xAA, 0xA5, id, 0x01];
    for f in fields {
        b.extend_from_slice(f);
    }
    b
}

fn s(x: &[u8]) -> Vec<u8> {
    let mut v = vec![x.len() as u8];
    v.extend_from_slice(x);
    v
}

#[test]
fn rfc_record_bytes_by_hand() {
    let m = Message::Record(Record {
        topic: b"hello",
        address: ADDR,
        subject: b"hello",
        sequence: 0x0102,
        content: b"one",
    });
    let frames = m.to_frames(Dialect::Rfc).unwrap();
    assert_eq!(frames[0], b"Mhello");
    let body = rfc_body(
        b'M',
        &[&s(ADDR), &s(b"hello"), &[0, 0, 0, 0, 0, 0, 0x01, 0x02]],
    );
    assert_eq!(frames[1], body);
    assert_eq!(frames[2], b"one");
    assert_eq!(frames.len(), 3);
    let (back, dialect) = decode(&frames).unwrap();
    assert_eq!((back, dialect), (m, Dialect::Rfc));
}

#[test]
fn rfc_every_message_by_hand() {
    let seq = [0u8, 0, 0, 0, 0, 0, 0, 7];
    let cases: Vec<(Message, Vec<u8>, Vec<u8>)> = vec![
        (
            Message::Fetch(Fetch {
                partition: ADDR,
                requester: b"C1",
                topic: b"t",
                sequence: 7,
                count: 0x0A0B,
            }),
            [b"F".as_slice(), ADDR].concat(),
            rfc_body(b'F', &[&s(b"C1"), &s(b"t"), &seq, &[0, 0, 0x0A, 0x0B]]),
        ),
        (
            Message::Ack(Ack {
                topic: ADDR,
                address: Some(b"S1"),
                subject: b"t",
                sequence: 7,
            }),
            [b"K".as_slice(), ADDR].concat(),
            rfc_body(b'K', &[&s(b"S1"), &s(b"t"), &seq]),
        ),
        (
            Message::Head(Head {
                topic: b"t",
                address: ADDR,
                subject: b"t",
                sequence: 7,
            }),
            b"Ht".to_vec(),
            rfc_body(b'H', &[&s(ADDR), &s(b"t"), &seq]),
        ),
        (
            Message::DirectHead(Head {
                topic: b"C1",
                address: ADDR,
                subject: b"t",
                sequence: 7,
            }),
            b"EC1".to_vec(),
            rfc_body(b'E', &[&s(ADDR), &s(b"t"), &seq]),
        ),
        (
            Message::GetHeads(GetHeads {
                topic: b"t",
                address: b"C1",
            }),
            b"Gt".to_vec(),
            rfc_body(b'G', &[&s(b"C1")]),
        ),
        (
            Message::ConsumerHello(ConsumerHello {
                topic: b"S1",
                address: b"C1",
                subjects: vec![&b"a"[..], b"bc"].into(),
            }),
            b"WS1".to_vec(),
            rfc_body(
                b'W',
                &[
                    &s(b"C1"),
                    &[0, 0, 0, 2],
                    &[0, 0, 0, 1, b'a'],
                    &[0, 0, 0, 2, b'b', b'c'],
                ],
            ),
        ),
        (
            Message::StoreHello(StoreHello {
                topic: b"C1",
                address: b"S1",
            }),
            b"LC1".to_vec(),
            rfc_body(b'L', &[&s(b"S1")]),
        ),
    ];
    for (m, f0, f1) in cases {
        let frames = m.to_frames(Dialect::Rfc).unwrap();
        assert_eq!(frames, vec![f0, f1], "{}", m.kind().name());
        let (back, dialect) = decode(&frames).unwrap();
        assert_eq!(dialect, Dialect::Rfc);
        assert_eq!(back, m);
    }
}

#[test]
fn ack_with_and_without_address() {
    let with = vec![
        [b"K".as_slice(), ADDR].concat(),
        rfc_body(b'K', &[&s(b"S1"), &s(b"t"), &[0, 0, 0, 0, 0, 0, 0, 9]]),
    ];
    let without = vec![
        [b"K".as_slice(), ADDR].concat(),
        rfc_body(b'K', &[&s(b"t"), &[0, 0, 0, 0, 0, 0, 0, 9]]),
    ];
    let Message::Ack(a) = decode(&with).unwrap().0 else {
        panic!()
    };
    assert_eq!(
        (a.address, a.subject, a.sequence),
        (Some(&b"S1"[..]), &b"t"[..], 9)
    );
    let Message::Ack(b) = decode(&without).unwrap().0 else {
        panic!()
    };
    assert_eq!((b.address, b.subject, b.sequence), (None, &b"t"[..], 9));
    // The zproto dialect drops the address on encode.
    let z = Message::Ack(a).to_frames(Dialect::Zproto).unwrap();
    let Message::Ack(c) = decode(&z).unwrap().0 else {
        panic!()
    };
    assert_eq!(c.address, None);
}

#[test]
fn malformed_inputs_name_what_and_where() {
    let good = Message::Head(Head {
        topic: b"t",
        address: ADDR,
        subject: b"t",
        sequence: 1,
    })
    .to_frames(Dialect::Rfc)
    .unwrap();

    let empty: [&[u8]; 0] = [];
    assert!(matches!(
        decode(&empty),
        Err(WireError::FrameCount { got: 0, .. })
    ));
    assert!(matches!(
        decode(&[b"".as_slice()]),
        Err(WireError::Truncated { field: "id", .. })
    ));
    assert!(matches!(
        decode(&[b"Zt".as_slice(), b"".as_slice()]),
        Err(WireError::UnknownId { id: b'Z', .. })
    ));

    let mut sig = good.clone();
    sig[1][1] = 0xA0;
    assert!(matches!(
        decode(&sig),
        Err(WireError::BadSignature { frame: 1, .. })
    ));

    let mut ver = good.clone();
    ver[1][3] = 0x30;
    assert!(matches!(
        decode(&ver),
        Err(WireError::BadVersion {
            found: 0x30,
            offset: 3,
            ..
        })
    ));

    let mut idm = good.clone();
    idm[1][2] = b'M';
    assert!(matches!(decode(&idm), Err(WireError::IdMismatch { .. })));

    let mut trailing = good.clone();
    trailing[1].push(0);
    assert!(matches!(
        decode(&trailing),
        Err(WireError::TrailingBytes { count: 1, .. })
    ));

    let mut short = good.clone();
    short[1].pop();
    assert!(matches!(
        decode(&short),
        Err(WireError::Truncated {
            field: "sequence",
            need: 8,
            have: 7,
            ..
        })
    ));

    let mut four = good.clone();
    four.push(vec![]);
    four.push(vec![]);
    assert!(matches!(
        decode(&four),
        Err(WireError::FrameCount { got: 4, .. })
    ));

    // zproto frame 0 with no NUL terminator after the key.
    assert!(matches!(
        decode(&[b"Hhello".as_slice()]),
        Err(WireError::Truncated {
            field: "topic terminator",
            ..
        })
    ));

    // A CONSUMER-HELLO's subjects are read in place: 100,000 empty ones (4
    // bytes each on the wire) take no memory of their own once decoded (a
    // list of slices took 16 bytes each, four times the frame).
    let mut many = rfc_body(b'W', &[&s(b"C1"), &100_001u32.to_be_bytes()]);
    many.extend(std::iter::repeat_n(0u8, 4 * 100_000));
    many.extend_from_slice(&[0, 0, 0, 2, b'h', b'i']);
    let frames = [b"WS".to_vec(), many];
    let Ok((Message::ConsumerHello(c), _)) = decode(&frames) else {
        panic!("a well-formed CONSUMER-HELLO")
    };
    let Subjects::Wire { count, raw } = &c.subjects else {
        panic!("decoded subjects are read in place, not listed")
    };
    assert_eq!(*count, 100_001);
    assert!(std::ptr::eq(raw.last().unwrap(), frames[1].last().unwrap()));
    assert_eq!(c.subjects.len(), 100_001);
    assert_eq!(c.subjects.iter().filter(|s| s.is_empty()).count(), 100_000);
    assert_eq!(c.subjects.iter().last(), Some(&b"hi"[..]));
    assert_eq!(c.subjects.iter().size_hint(), (100_001, Some(100_001)));

    // A CONSUMER-HELLO claiming 4 billion subjects fails without reserving them.
    let mut huge = rfc_body(b'W', &[&s(b"C1"), &[0xFF, 0xFF, 0xFF, 0xFF]]);
    huge.extend_from_slice(&[0, 0, 0, 0]);
    assert!(matches!(
        decode(&[b"WS".to_vec(), huge]),
        Err(WireError::Truncated {
            field: "subjects[]",
            ..
        })
    ));
}

#[test]
fn encode_rejects_what_cannot_travel() {
    let long = vec![b'a'; 256];
    let m = Message::GetHeads(GetHeads {
        topic: b"t",
        address: &long,
    });
    assert_eq!(
        m.to_frames(Dialect::Rfc),
        Err(WireError::StringTooLong {
            field: "address",
            len: 256
        })
    );
    let ok = vec![b'a'; 255];
    let m = Message::GetHeads(GetHeads {
        topic: b"t",
        address: &ok,
    });
    assert!(m.to_frames(Dialect::Rfc).is_ok());
    let nul = Message::GetHeads(GetHeads {
        topic: b"a\0b",
        address: b"C",
    });
    assert_eq!(nul.to_frames(Dialect::Zproto), Err(WireError::NulInTopic));
    assert!(nul.to_frames(Dialect::Rfc).is_ok(), "rfc carries any key");
}

#[test]
fn subscriptions_per_node_type() {
    let subs = subscriptions(NodeType::Consumer, b"C1", &[b"hello"]);
    assert_eq!(
        subs,
        vec![
            b"YC1".to_vec(),
            b"QC1".to_vec(),
            b"DC1".to_vec(),
            b"EC1".to_vec(),
            b"LC1".to_vec(),
            b"OC1".to_vec(),
            b"Xhello".to_vec(),
            b"Mhello".to_vec(),
            b"Hhello".to_vec(),
            b"Rhello".to_vec()
        ]
    );
    let subs = subscriptions(NodeType::Producer, b"P1", &[b"hello"]);
    assert_eq!(
        subs,
        vec![
            b"AP1".to_vec(),
            b"KP1".to_vec(),
            b"FP1".to_vec(),
            b"Ghello".to_vec()
        ]
    );
    let subs = subscriptions(NodeType::Store, b"S1", &[]);
    assert_eq!(
        subs,
        vec![
            b"X".to_vec(),
            b"M".to_vec(),
            b"H".to_vec(),
            b"YS1".to_vec(),
            b"QS1".to_vec(),
            b"DS1".to_vec(),
            b"F".to_vec(),
            b"G".to_vec(),
            b"WS1".to_vec(),
            b"ES1".to_vec(),
            b"R".to_vec(),
            b"T".to_vec()
        ]
    );
    assert!(topic_matches(b"hello", b"hello"));
    assert!(!topic_matches(b"hello", b"hello2"));
    assert!(topic_matches(b"", b"anything"));
}

#[test]
fn beacon_rejects_garbage() {
    assert!(decode_beacon(&[b"X".as_slice()]).is_err());
    assert!(decode_beacon(&[b"B".as_slice(), b"U", b"h", b"0"]).is_err());
    assert!(decode_beacon(&[b"B".as_slice(), b"U", b"h", b"70000"]).is_err());
    assert!(decode_beacon(&[b"B".as_slice(), b"U", b"h", b"+1"]).is_err());
    assert!(decode_beacon(&[b"Q".as_slice(), b"U", b"tcp://x:1"]).is_err());
    assert!(decode_beacon(&[b"B".as_slice(), b"U"]).is_err());
    // A NUL byte in a host or an endpoint (a C string to ZeroMQ).
    assert!(decode_beacon(&[b"B".as_slice(), b"U", b"tcp://h\0:1"]).is_err());
    assert!(decode_beacon(&[b"B".as_slice(), b"U", b"h\0", b"5"]).is_err());
    assert_eq!(
        decode_beacon(&[b"B".as_slice(), b"U", b"", b"5"]).unwrap(),
        Beacon::Node {
            uuid: b"U",
            host: b"",
            port: 5,
            key: None
        }
    );
}

#[test]
fn a_secure_node_beacon_carries_its_key() {
    let key = b"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
    let b = Beacon::Node {
        uuid: b"U",
        host: b"h",
        port: 5,
        key: Some(key),
    };
    let frames = b.to_frames();
    assert_eq!(frames.len(), 5);
    assert_eq!(decode_beacon(&frames).unwrap(), b);
    // Not a Z85 key of 40 characters: malformed.
    for bad in [
        &key[..39],
        b"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf ",
        b"~".repeat(40).as_slice(),
    ] {
        let mut f = frames.clone();
        f[4] = bad.to_vec();
        assert!(decode_beacon(&f).is_err(), "{bad:?}");
    }
}

// ------------------------------------------------ properties

#[derive(Debug, Clone)]
struct Owned {
    kind: Kind,
    topic: Vec<u8>,
    address: Vec<u8>,
    subject: Vec<u8>,
    sequence: u64,
    count: u32,
    content: Vec<u8>,
    subjects: Vec<Vec<u8>>,
    ack_address: bool,
    /// A RECORD-BATCH's content frame: `subjects` as values.
    values: Vec<u8>,
}

impl Owned {
    fn msg(&self) -> Message<'_> {
        let rec = Record {
            topic: &self.topic,
            address: &self.address,
            subject: &self.subject,
            sequence: self.sequence,
            content: &self.content,
        };
        let head = Head {
            topic: &self.topic,
            address: &self.address,
            subject: &self.subject,
            sequence: self.sequence,
        };
        match self.kind {
            Kind::Record => Message::Record(rec),
            Kind::DirectRecord => Message::DirectRecord(rec),
            Kind::Fetch => Message::Fetch(Fetch {
                partition: &self.topic,
                requester: &self.address,
                topic: &self.subject,
                sequence: self.sequence,
                count: self.count,
            }),
            Kind::Ack => Message::Ack(Ack {
                topic: &self.topic,
                address: self.ack_address.then_some(self.address.as_slice()),
                subject: &self.subject,
                sequence: self.sequence,
            }),
            Kind::AddressedAck => Message::AddressedAck(Ack {
                topic: &self.topic,
                address: Some(&self.address),
                subject: &self.subject,
                sequence: self.sequence,
            }),
            Kind::Head => Message::Head(head),
            Kind::DirectHead => Message::DirectHead(head),
            Kind::TimeQuery => Message::TimeQuery(TimeQuery {
                topic: &self.topic,
                requester: &self.address,
                subject: &self.subject,
                time: self.sequence,
            }),
            Kind::TimeOffset => Message::TimeOffset(head),
            Kind::GetHeads => Message::GetHeads(GetHeads {
                topic: &self.topic,
                address: &self.address,
            }),
            Kind::ConsumerHello => Message::ConsumerHello(ConsumerHello {
                topic: &self.topic,
                address: &self.address,
                subjects: Subjects::List(self.subjects.iter().map(Vec::as_slice).collect()),
            }),
            Kind::StoreHello => Message::StoreHello(StoreHello {
                topic: &self.topic,
                address: &self.address,
            }),
            Kind::RecordBatch
            | Kind::DirectRecordBatch
            | Kind::MetaRecordBatch
            | Kind::DirectMetaRecordBatch => {
                let b = RecordBatch {
                    topic: &self.topic,
                    address: &self.address,
                    subject: &self.subject,
                    sequence: self.sequence,
                    count: self.count,
                    values: &self.values,
                };
                match self.kind {
                    Kind::RecordBatch => Message::RecordBatch(b),
                    Kind::DirectRecordBatch => Message::DirectRecordBatch(b),
                    Kind::MetaRecordBatch => Message::MetaRecordBatch(b),
                    _ => Message::DirectMetaRecordBatch(b),
                }
            }
        }
    }
}

fn arb_owned() -> impl Strategy<Value = Owned> {
    (
        proptest::sample::select(Kind::ALL.to_vec()),
        proptest::collection::vec(1u8..=255, 0..40),
        proptest::collection::vec(any::<u8>(), 0..=255),
        proptest::collection::vec(any::<u8>(), 0..=255),
        any::<u64>(),
        any::<u32>(),
        proptest::collection::vec(any::<u8>(), 0..2048),
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..5),
        any::<bool>(),
    )
        .prop_map(
            |(kind, topic, address, subject, sequence, count, content, subjects, ack_address)| {
                let (mut sequence, mut count, mut values) = (sequence, count, Vec::new());
                if matches!(kind, Kind::RecordBatch | Kind::DirectRecordBatch) {
                    // A valid batch: its values, at least one, ending below 2^64 - 1.
                    let mut vals: Vec<&[u8]> = subjects.iter().map(Vec::as_slice).collect();
                    vals.push(&content);
                    count = RecordBatch::put_values(&mut values, vals).unwrap();
                    sequence = sequence.min(u64::MAX - 1 - u64::from(count));
                }
                if kind.has_meta() {
                    // Bodies: metadata (some with a key and headers) + value.
                    let mut bodies = Vec::new();
                    for (i, v) in subjects.iter().chain([&content]).enumerate() {
                        let mut b = Vec::new();
                        let hs = [("h", &v[..v.len().min(3)])];
                        let key = (i % 2 == 1).then_some(&v[..v.len().min(5)]);
                        let headers: &[(&str, &[u8])] = if i % 3 == 0 { &hs } else { &[] };
                        crate::meta::encode(&mut b, sequence ^ i as u64, key, headers);
                        b.extend_from_slice(v);
                        bodies.push(b);
                    }
                    count = RecordBatch::put_values(&mut values, bodies.iter().map(Vec::as_slice))
                        .unwrap();
                    sequence = sequence.min(u64::MAX - 1 - u64::from(count));
                }
                Owned {
                    kind,
                    topic,
                    address,
                    subject,
                    sequence,
                    count,
                    content,
                    subjects,
                    ack_address,
                    values,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn roundtrip_both_dialects(o in arb_owned(), zproto in any::<bool>()) {
        let dialect = if zproto { Dialect::Zproto } else { Dialect::Rfc };
        let m = o.msg();
        let frames = m.to_frames(dialect).unwrap();
        let (back, d) = decode(&frames).unwrap();
        prop_assert_eq!(d, dialect);
        let mut want = m.clone();
        if let (Message::Ack(a), Dialect::Zproto) = (&mut want, dialect) {
            a.address = None;
        }
        prop_assert_eq!(back, want);
    }

    #[test]
    fn decoder_never_panics_on_bytes(frames in proptest::collection::vec(
        proptest::collection::vec(any::<u8>(), 0..80), 0..5)) {
        let _ = decode(&frames);
        let _ = decode_beacon(&frames);
        for f in &frames { let _ = Subscription::decode(f); }
    }

    #[test]
    fn decoder_never_panics_on_mutations(o in arb_owned(), zproto in any::<bool>(),
        pos in any::<usize>(), byte in any::<u8>(), cut in any::<usize>(), which in any::<usize>()) {
        let dialect = if zproto { Dialect::Zproto } else { Dialect::Rfc };
        let mut frames = o.msg().to_frames(dialect).unwrap();
        let i = which % frames.len();
        let f = &mut frames[i];
        if !f.is_empty() {
            let p = pos % f.len();
            f[p] = byte;
            let c = cut % (f.len() + 1);
            f.truncate(c);
        }
        let _ = decode(&frames);
    }
}

/// A mutation fuzzer over the decoder: valid frames in both dialects and every
/// golden vector, then random byte flips, inserts, deletes, truncations and
/// frame splits/drops. `DAFKA_FUZZ_CASES` sets the run length (CI runs long).
#[test]
fn fuzz_decoder_mutations() {
    use proptest::test_runner::{Config, TestRunner};
    let cases = std::env::var("DAFKA_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let golden: Vec<Vec<Vec<u8>>> = vectors().iter().map(frames_of).collect();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let ops = proptest::collection::vec((0u8..6, any::<usize>(), any::<u8>()), 1..8);
    let strategy = (arb_owned(), any::<bool>(), any::<usize>(), ops);
    runner
        .run(&strategy, |(o, zproto, pick, ops)| {
            let dialect = if zproto {
                Dialect::Zproto
            } else {
                Dialect::Rfc
            };
            let mut frames = if pick % 3 == 0 {
                golden[pick % golden.len()].clone()
            } else {
                o.msg().to_frames(dialect).unwrap()
            };
            for (op, at, byte) in ops {
                if frames.is_empty() {
                    frames.push(Vec::new());
                }
                let fi = at % frames.len();
                let f = &mut frames[fi];
                let p = if f.is_empty() { 0 } else { at % f.len() };
                match op {
                    0 if !f.is_empty() => f[p] ^= byte | 1,
                    1 => f.insert(p, byte),
                    2 if !f.is_empty() => {
                        f.remove(p);
                    }
                    3 => f.truncate(p),
                    4 => {
                        let tail = f.split_off(p);
                        frames.insert(fi + 1, tail);
                    }
                    _ => {
                        frames.remove(fi);
                    }
                }
            }
            let _ = decode(&frames);
            let _ = decode_beacon(&frames);
            Ok(())
        })
        .unwrap();
}

// ------------------------------------------- found by a review (session 21)

/// PROTOCOL.md:17: in the `zproto` dialect ACK's fields are "subject, sequence
/// (no address)"; only the `rfc` body "may come with or without the address"
/// (PROTOCOL.md:22-24). A zproto frame 0 that also carries an address has
/// trailing bytes after `subject, sequence` and must be dropped (PROTOCOL.md:27-29).
#[test]
fn a_zproto_ack_with_an_address_is_refused() {
    let f0 = [
        b"K".as_slice(),
        ADDR,
        &[0, 1],
        &s(ADDR),
        &s(b"t"),
        &[0, 0, 0, 0, 0, 0, 0, 9],
    ]
    .concat();
    let frames = [f0];
    let r = decode(&frames);
    assert!(
        r.is_err(),
        "a zproto ACK has no address field, yet this decoded: {r:?}"
    );
}

// ------------------------------------------------ RECORD-BATCH (extension)

fn batch_values(values: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    let n = RecordBatch::put_values(&mut out, values.iter().copied()).unwrap();
    assert_eq!(n as usize, values.len());
    out
}

#[test]
fn record_batch_bytes_by_hand_in_both_dialects() {
    let values = batch_values(&[b"one", b"", b"three"]);
    assert_eq!(
        values,
        [
            &[0, 0, 0, 3][..],
            b"one",
            &[0, 0, 0, 0],
            &[0, 0, 0, 5],
            b"three"
        ]
        .concat()
    );
    let m = Message::RecordBatch(RecordBatch {
        topic: b"hello",
        address: ADDR,
        subject: b"hello",
        sequence: 7,
        count: 3,
        values: &values,
    });
    let fields = [
        s(ADDR),
        s(b"hello"),
        vec![0, 0, 0, 0, 0, 0, 0, 7],
        vec![0, 0, 0, 3],
    ]
    .concat();
    let rfc = m.to_frames(Dialect::Rfc).unwrap();
    assert_eq!(
        rfc,
        vec![
            b"Rhello".to_vec(),
            rfc_body(b'R', &[&fields]),
            values.clone()
        ]
    );
    // The direct form: the requester's address after `Q`, the same body.
    let to = b"9E51FBAE55A649C1A50C0B360F3FF7AE";
    let Message::RecordBatch(b) = m else {
        unreachable!()
    };
    let direct = Message::DirectRecordBatch(RecordBatch { topic: to, ..b });
    let frames = direct.to_frames(Dialect::Rfc).unwrap();
    assert_eq!(frames[0], [b"Q".as_slice(), to].concat());
    assert_eq!(frames[1], rfc_body(b'Q', &[&fields]));
    assert_eq!(frames[2], values);
    assert_eq!(decode(&frames).unwrap(), (direct, Dialect::Rfc));
    let zproto = m.to_frames(Dialect::Zproto).unwrap();
    assert_eq!(
        zproto,
        vec![
            [b"Rhello".as_slice(), &[0, 1], &fields].concat(),
            values.clone()
        ]
    );
    for (frames, dialect) in [(rfc, Dialect::Rfc), (zproto, Dialect::Zproto)] {
        let (back, d) = decode(&frames).unwrap();
        assert_eq!((&back, d), (&m, dialect));
        let Message::RecordBatch(b) = back else {
            unreachable!()
        };
        let got: Vec<&[u8]> = b.values().collect();
        assert_eq!(got, vec![&b"one"[..], b"", b"three"]);
        assert_eq!(b.values().len(), 3);
        assert_eq!(b.last(), 9);
        // Values without metadata: each given a 9-byte body's metadata.
        assert_eq!(b.value_bytes(), 8);
        assert_eq!(back.body_bytes(), 8 + 3 * 9);
    }
    let record = Record {
        topic: b"hello",
        address: ADDR,
        subject: b"hello",
        sequence: 7,
        content: b"three",
    };
    assert_eq!(Message::DirectRecord(record).body_bytes(), 5 + 9);
    let head = Head {
        topic: b"hello",
        address: ADDR,
        subject: b"hello",
        sequence: 7,
    };
    assert_eq!(Message::Head(head).body_bytes(), 0, "no records");
}

#[test]
fn malformed_record_batches_are_refused() {
    let values = batch_values(&[b"ab", b"c"]);
    let frames_of = |count: u32, sequence: u64, values: &[u8]| {
        let body = rfc_body(
            b'R',
            &[
                &s(ADDR),
                &s(b"t"),
                &sequence.to_be_bytes(),
                &count.to_be_bytes(),
            ],
        );
        vec![b"Rt".to_vec(), body, values.to_vec()]
    };
    assert!(decode(&frames_of(2, 0, &values)).is_ok());
    // Fewer values than the count says, more, a value cut short, none at all.
    for (count, sequence, vals, want) in [
        (3, 0, values.clone(), "truncated values[] in frame 2"),
        (1, 0, values.clone(), "trailing bytes in frame 2"),
        (
            2,
            0,
            values[..values.len() - 1].to_vec(),
            "truncated values[]",
        ),
        (0, 0, Vec::new(), "bad count in frame 1"),
        // The last offset would be 2^64 - 1, or past it.
        (2, u64::MAX - 1, values.clone(), "bad sequence in frame 1"),
        (2, u64::MAX, values.clone(), "bad sequence"),
    ] {
        let err = decode(&frames_of(count, sequence, &vals)).unwrap_err();
        assert!(err.to_string().contains(want), "{count} {sequence}: {err}");
    }
    // The last offset at 2^64 - 2 is fine.
    assert!(decode(&frames_of(2, u64::MAX - 2, &values)).is_ok());
    // Encoding refuses the same.
    let bad = RecordBatch {
        topic: b"t",
        address: ADDR,
        subject: b"t",
        sequence: 0,
        count: 3,
        values: &values,
    };
    assert!(Message::RecordBatch(bad).to_frames(Dialect::Rfc).is_err());
    let empty = RecordBatch {
        count: 0,
        values: &[],
        ..bad
    };
    assert!(Message::RecordBatch(empty)
        .to_frames(Dialect::Zproto)
        .is_err());
}

#[test]
fn record_batches_travel_only_to_who_subscribes_r() {
    let subs = |n| subscriptions(n, ADDR, &[b"t"]);
    // A consumer subscribes R + each topic beside M, a store every R; a
    // producer none: nodes that do not know the extension never see it.
    assert!(subs(NodeType::Consumer).contains(&b"Rt".to_vec()));
    assert!(subs(NodeType::Store).contains(&b"R".to_vec()));
    assert!(!subs(NodeType::Producer).iter().any(|p| p[0] == b'R'));
    assert_eq!(Kind::from_id(b'R'), Some(Kind::RecordBatch));
    assert_eq!(Kind::from_name("RECORD-BATCH"), Some(Kind::RecordBatch));
    // FETCH answers in batches: to a consumer or store, by its own address.
    let me = [b"Q".as_slice(), ADDR].concat();
    assert!(subs(NodeType::Consumer).contains(&me));
    assert!(subs(NodeType::Store).contains(&me));
    assert!(!subs(NodeType::Producer).iter().any(|p| p[0] == b'Q'));
    assert_eq!(Kind::from_id(b'Q'), Some(Kind::DirectRecordBatch));
}

#[test]
fn addressed_acks_travel_only_to_producers_that_subscribe_a() {
    let subs = |n| subscriptions(n, ADDR, &[b"t"]);
    // A producer subscribes A + its partition beside K + its partition; a C
    // producer subscribes K alone, so a store knows whom to send which.
    let a = [b"A".as_slice(), ADDR].concat();
    let k = [b"K".as_slice(), ADDR].concat();
    assert!(subs(NodeType::Producer).contains(&a));
    assert!(subs(NodeType::Producer).contains(&k));
    assert!(!subs(NodeType::Store).iter().any(|p| p[0] == b'A'));
    assert!(!subs(NodeType::Consumer).iter().any(|p| p[0] == b'A'));
    assert_eq!(Kind::from_id(b'A'), Some(Kind::AddressedAck));
    assert_eq!(Kind::from_name("ADDRESSED-ACK"), Some(Kind::AddressedAck));
    // Both dialects carry the store's address; zproto in frame 0 alone.
    let ack = Ack {
        topic: ADDR,
        address: Some(b"S1"),
        subject: b"t",
        sequence: 7,
    };
    for dialect in [Dialect::Rfc, Dialect::Zproto] {
        let frames = Message::AddressedAck(ack).to_frames(dialect).unwrap();
        assert_eq!(frames.len(), if dialect == Dialect::Rfc { 2 } else { 1 });
        assert_eq!(
            decode(&frames).unwrap(),
            (Message::AddressedAck(ack), dialect)
        );
        // Without an address it cannot be encoded, nor decoded.
        let bare = Ack {
            address: None,
            ..ack
        };
        assert!(Message::AddressedAck(bare).to_frames(dialect).is_err());
        let mut plain = Message::Ack(bare).to_frames(dialect).unwrap();
        plain[0][0] = b'A';
        if dialect == Dialect::Rfc {
            plain[1][2] = b'A';
        }
        assert!(decode(&plain).is_err(), "{dialect:?}");
    }
}
