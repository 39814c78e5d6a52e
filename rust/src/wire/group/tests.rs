use proptest::prelude::*;

use super::*;
use crate::wire::Kind;

const A: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";
const S: &[u8] = b"0123456789ABCDEF0123456789ABCDEF";

fn member() -> GroupMessage<'static> {
    GroupMessage::Member(Member {
        group: b"billing",
        address: A,
        flags: 0,
        timeout_ms: 4000,
        topics: vec![b"orders"],
        claims: vec![
            Claim {
                topic: b"orders",
                partition: S,
                state: ClaimState::Held,
                offset: 7,
            },
            Claim {
                topic: b"orders",
                partition: A,
                state: ClaimState::Released,
                offset: 9,
            },
        ],
    })
}

fn commit() -> GroupMessage<'static> {
    GroupMessage::Commit(Commit {
        group: b"billing",
        address: A,
        sequence: 3,
        entries: vec![Entry {
            topic: b"orders",
            partition: S,
            epoch: 0,
            offset: 1000,
        }],
    })
}

fn query() -> GroupMessage<'static> {
    GroupMessage::CommitQuery(CommitQuery {
        group: b"billing",
        address: A,
        sequence: 4,
        topics: vec![b"orders", b"refunds"],
    })
}

fn offsets() -> GroupMessage<'static> {
    GroupMessage::CommitOffsets(CommitOffsets {
        to: A,
        address: S,
        group: b"billing",
        sequence: 4,
        flags: OFFSETS_GROUP_KNOWN | OFFSETS_LAST,
        entries: vec![Entry {
            topic: b"orders",
            partition: S,
            epoch: 1,
            offset: 1000,
        }],
    })
}

fn all() -> Vec<GroupMessage<'static>> {
    vec![member(), commit(), query(), offsets()]
}

pub(super) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

#[test]
fn group_ids_are_no_dafka_ids() {
    for k in GroupKind::ALL {
        assert_eq!(Kind::from_id(k.id()), None, "{}", k.name());
        assert_eq!(GroupKind::from_id(k.id()), Some(k));
        // Beacons and the tower's welcome.
        assert!(k.id() != b'B' && k.id() != b'W');
    }
    assert_eq!(GroupKind::from_id(b'M'), None);
}

#[test]
fn every_message_round_trips_in_both_dialects() {
    for m in all() {
        for d in [Dialect::Rfc, Dialect::Zproto] {
            let frames = m.encode(d).unwrap();
            assert_eq!(frames.len(), if d == Dialect::Rfc { 2 } else { 1 });
            let (back, dialect) = decode(&frames).unwrap();
            assert_eq!(back, m, "{}", m.kind().name());
            assert_eq!(dialect, d);
            assert_eq!(back.key(), m.key());
        }
    }
}

#[test]
fn frames_are_byte_exact_as_documented() {
    // docs/groups.md, "Wire": these bytes, in hex.
    let c = commit().encode(Dialect::Rfc).unwrap();
    assert_eq!(hex(&c[0]), "4362696C6C696E67");
    let body = [
        "AAA54301".to_string(),
        format!("20{}", hex(A)),
        "0000000000000003".to_string(),
        "00000001".to_string(),
        "066F7264657273".to_string(),
        format!("20{}", hex(S)),
        "0000000000000000".to_string(),
        "00000000000003E8".to_string(),
    ]
    .concat();
    assert_eq!(hex(&c[1]), body);
    let z = commit().encode(Dialect::Zproto).unwrap();
    assert_eq!(
        hex(&z[0]),
        format!("4362696C6C696E670001{}", &hex(&c[1])[8..])
    );
    let q = GroupMessage::CommitQuery(CommitQuery {
        group: b"",
        address: S,
        sequence: 1,
        topics: vec![],
    });
    let f = q.encode(Dialect::Zproto).unwrap();
    assert_eq!(
        hex(&f[0]),
        format!("550001 20{}000000000000000100000000", hex(S)).replace(' ', "")
    );
    let m = GroupMessage::Member(Member {
        group: b"g",
        address: A,
        flags: MEMBER_LEAVING,
        timeout_ms: 4000,
        topics: vec![b"t"],
        claims: vec![Claim {
            topic: b"t",
            partition: b"p",
            state: ClaimState::Released,
            offset: 5,
        }],
    });
    let f = m.encode(Dialect::Rfc).unwrap();
    assert_eq!(hex(&f[0]), "4A67");
    assert_eq!(
        hex(&f[1]),
        format!(
            "AAA54A0120{}0100000FA0000000010000000174000000010174017001{}",
            hex(A),
            "0000000000000005"
        )
    );
}

#[test]
fn malformed_messages_are_errors() {
    let rfc = |m: &GroupMessage<'_>| m.encode(Dialect::Rfc).unwrap();
    let mut cases: Vec<(Vec<Vec<u8>>, &str)> = Vec::new();
    // Trailing byte, in each dialect.
    let mut f = rfc(&commit());
    f[1].push(0);
    cases.push((f, "trailing"));
    let mut f = commit().encode(Dialect::Zproto).unwrap();
    f[0].push(0);
    cases.push((f, "trailing zproto"));
    // Truncated.
    let mut f = rfc(&member());
    f[1].pop();
    cases.push((f, "truncated"));
    // Signature, version, ID mismatch, unknown ID.
    let mut f = rfc(&query());
    f[1][1] = 0xA0;
    cases.push((f, "signature"));
    let mut f = rfc(&query());
    f[1][3] = 0x30;
    cases.push((f, "version"));
    let mut f = rfc(&query());
    f[1][2] = b'C';
    cases.push((f, "id mismatch"));
    let mut f = rfc(&query());
    f[0][0] = b'M';
    cases.push((f, "unknown id"));
    // Frame counts.
    cases.push((vec![], "no frames"));
    cases.push((vec![vec![]], "empty frame"));
    let mut f = rfc(&query());
    f.push(vec![]);
    cases.push((f, "three frames"));
    // zproto key without terminator.
    cases.push((vec![b"Cbilling".to_vec()], "no NUL"));
    // A count larger than the frame could hold (claims: 0xFFFFFFFF).
    let mut f = rfc(&member());
    let at = 4 + 1 + A.len() + 1 + 4 + 4 + 4 + 6;
    f[1][at..at + 4].copy_from_slice(&[0xFF; 4]);
    cases.push((f, "count lie"));
    for (frames, what) in cases {
        assert!(decode(&frames).is_err(), "{what}");
    }
}

#[test]
fn semantic_rules_refuse_at_encoding_and_decoding() {
    let bad: Vec<(GroupMessage<'static>, &str)> = vec![
        (
            {
                let GroupMessage::Member(mut m) = member() else {
                    unreachable!()
                };
                m.flags = 0x80;
                GroupMessage::Member(m)
            },
            "unknown member flag",
        ),
        (
            {
                let GroupMessage::Member(mut m) = member() else {
                    unreachable!()
                };
                m.flags = MEMBER_LEAVING;
                GroupMessage::Member(m)
            },
            "leaving but holding",
        ),
        (
            {
                let GroupMessage::Member(mut m) = member() else {
                    unreachable!()
                };
                m.timeout_ms = 0;
                GroupMessage::Member(m)
            },
            "zero timeout",
        ),
        (
            {
                let GroupMessage::Member(mut m) = member() else {
                    unreachable!()
                };
                m.topics.clear();
                GroupMessage::Member(m)
            },
            "no topics",
        ),
        (
            {
                let GroupMessage::Member(mut m) = member() else {
                    unreachable!()
                };
                m.group = b"";
                GroupMessage::Member(m)
            },
            "no group",
        ),
        (
            {
                let GroupMessage::Member(mut m) = member() else {
                    unreachable!()
                };
                m.claims[1].partition = S;
                GroupMessage::Member(m)
            },
            "same partition twice",
        ),
        (
            {
                let GroupMessage::Commit(mut c) = commit() else {
                    unreachable!()
                };
                c.entries.push(c.entries[0]);
                GroupMessage::Commit(c)
            },
            "commit twice",
        ),
        (
            {
                let GroupMessage::Commit(mut c) = commit() else {
                    unreachable!()
                };
                c.group = b"";
                GroupMessage::Commit(c)
            },
            "commit without group",
        ),
        (
            {
                let GroupMessage::CommitOffsets(mut o) = offsets() else {
                    unreachable!()
                };
                o.flags = OFFSETS_LAST;
                GroupMessage::CommitOffsets(o)
            },
            "entries of an unknown group",
        ),
        (
            {
                let GroupMessage::CommitOffsets(mut o) = offsets() else {
                    unreachable!()
                };
                o.flags = 0x04 | OFFSETS_GROUP_KNOWN;
                GroupMessage::CommitOffsets(o)
            },
            "unknown offsets flag",
        ),
        (
            {
                let GroupMessage::CommitOffsets(mut o) = offsets() else {
                    unreachable!()
                };
                o.group = b"";
                GroupMessage::CommitOffsets(o)
            },
            "offsets without group",
        ),
    ];
    for (m, what) in bad {
        assert!(m.encode(Dialect::Rfc).is_err(), "{what}");
        // The same bytes, built by hand past the encoder's check, decode
        // to an error too.
        let frames = forge(&m);
        assert!(decode(&frames).is_err(), "{what} (decode)");
    }
}

/// The rfc frames of `m` without the encoder's semantic check.
pub(super) fn forge(m: &GroupMessage<'_>) -> Vec<Vec<u8>> {
    let mut ok = m.clone();
    // Encode a valid twin, then patch the fields the check refused.
    match &mut ok {
        GroupMessage::Member(x) => {
            x.flags = 0;
            x.timeout_ms = 1;
            x.group = b"g";
            x.topics = vec![b"t"];
            x.claims.clear();
        }
        GroupMessage::Commit(x) => {
            x.group = b"g";
            x.entries.clear();
        }
        GroupMessage::CommitOffsets(x) => {
            x.group = b"g";
            x.flags = OFFSETS_GROUP_KNOWN;
            x.entries.clear();
        }
        GroupMessage::Partitions(x) => {
            x.flags = 0;
            x.address = b"s";
            x.parts.clear();
        }
        GroupMessage::PartitionsQuery(x) => x.address = b"a",
        GroupMessage::CommitQuery(_) => {}
    }
    let mut f0 = vec![m.kind().id()];
    f0.extend_from_slice(m.key());
    let mut body = SIGNATURE.to_vec();
    body.push(m.kind().id());
    body.push(VERSION);
    match m {
        GroupMessage::Member(x) => {
            put_string(&mut body, "address", x.address).unwrap();
            body.push(x.flags);
            body.extend_from_slice(&x.timeout_ms.to_be_bytes());
            put_strings(&mut body, &x.topics).unwrap();
            put_count(&mut body, "claims", x.claims.len()).unwrap();
            for c in &x.claims {
                put_string(&mut body, "topic", c.topic).unwrap();
                put_string(&mut body, "partition", c.partition).unwrap();
                body.push(c.state as u8);
                body.extend_from_slice(&c.offset.to_be_bytes());
            }
        }
        GroupMessage::Commit(x) => {
            put_string(&mut body, "address", x.address).unwrap();
            body.extend_from_slice(&x.sequence.to_be_bytes());
            put_entries(&mut body, &x.entries).unwrap();
        }
        GroupMessage::CommitQuery(x) => {
            put_string(&mut body, "address", x.address).unwrap();
            body.extend_from_slice(&x.sequence.to_be_bytes());
            put_strings(&mut body, &x.topics).unwrap();
        }
        GroupMessage::CommitOffsets(x) => {
            put_string(&mut body, "address", x.address).unwrap();
            put_string(&mut body, "group", x.group).unwrap();
            body.extend_from_slice(&x.sequence.to_be_bytes());
            body.push(x.flags);
            put_entries(&mut body, &x.entries).unwrap();
        }
        GroupMessage::PartitionsQuery(x) => {
            put_string(&mut body, "address", x.address).unwrap();
            body.extend_from_slice(&x.sequence.to_be_bytes());
        }
        GroupMessage::Partitions(x) => {
            put_string(&mut body, "address", x.address).unwrap();
            body.extend_from_slice(&x.sequence.to_be_bytes());
            body.push(x.flags);
            put_parts(&mut body, &x.parts).unwrap();
        }
    }
    // The valid twin encodes: the forged bytes differ only in what the
    // check refuses.
    assert!(ok.encode(Dialect::Rfc).is_ok());
    vec![f0, body]
}

#[test]
fn a_claim_state_other_than_held_or_released_is_an_error() {
    let mut f = member().encode(Dialect::Rfc).unwrap();
    // The first claim's state octet: after the claim count, topic, partition.
    let at = 4 + 1 + A.len() + 1 + 4 + 4 + 4 + 6 + 4 + 7 + 1 + S.len();
    assert_eq!(f[1][at], 0);
    f[1][at] = 2;
    assert!(matches!(
        decode(&f),
        Err(WireError::BadField { field: "state", .. })
    ));
}

#[test]
fn strings_over_255_bytes_do_not_encode() {
    let long = vec![b'x'; 256];
    let m = GroupMessage::Commit(Commit {
        group: b"g",
        address: &long,
        sequence: 0,
        entries: vec![],
    });
    assert!(matches!(
        m.encode(Dialect::Rfc),
        Err(WireError::StringTooLong { .. })
    ));
    let m = GroupMessage::CommitQuery(CommitQuery {
        group: b"g\0",
        address: A,
        sequence: 0,
        topics: vec![],
    });
    assert_eq!(m.encode(Dialect::Zproto), Err(WireError::NulInTopic));
    assert!(m.encode(Dialect::Rfc).is_ok());
}

#[test]
fn members_and_stores_subscribe_to_what_they_need() {
    let m = subscriptions(Subscriber::Member, A, &[b"billing", b"audit"]);
    let want: Vec<Vec<u8>> = vec![
        [&b"N"[..], A].concat(),
        b"Jbilling".to_vec(),
        b"Jaudit".to_vec(),
    ];
    assert_eq!(m, want);
    let s = subscriptions(Subscriber::Store, S, &[]);
    assert_eq!(
        s,
        vec![
            b"J".to_vec(),
            b"C".to_vec(),
            b"U".to_vec(),
            [&b"N"[..], S].concat(),
            b"I".to_vec(),
        ]
    );
    // Every message reaches exactly the subscribers meant for it.
    for msg in all() {
        let f0 = &msg.encode(Dialect::Rfc).unwrap()[0];
        let to_store = s.iter().any(|p| f0.starts_with(p));
        let to_member = m.iter().any(|p| f0.starts_with(p));
        match msg.kind() {
            GroupKind::Member => assert!(to_store && to_member),
            GroupKind::Commit | GroupKind::CommitQuery => assert!(to_store && !to_member),
            GroupKind::CommitOffsets => assert!(to_member && !to_store),
            GroupKind::PartitionsQuery => assert!(to_store && !to_member),
            GroupKind::Partitions => assert!(!to_member && !to_store),
        }
    }
}

fn name() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(1u8..=255, 1..40)
}

fn entries() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>, u64, u64)>> {
    prop::collection::btree_map((name(), name()), (any::<u64>(), any::<u64>()), 0..8)
        .prop_map(|m| m.into_iter().map(|((t, p), (e, o))| (t, p, e, o)).collect())
}

proptest! {
    #[test]
    fn arbitrary_commits_round_trip(
        group in name(),
        address in name(),
        sequence in any::<u64>(),
        es in entries(),
        zproto in any::<bool>(),
    ) {
        let d = if zproto { Dialect::Zproto } else { Dialect::Rfc };
        let entries: Vec<Entry<'_>> = es
            .iter()
            .map(|(t, p, e, o)| Entry { topic: t, partition: p, epoch: *e, offset: *o })
            .collect();
        let m = GroupMessage::Commit(Commit { group: &group, address: &address, sequence, entries });
        let frames = m.encode(d).unwrap();
        let (back, dialect) = decode(&frames).unwrap();
        prop_assert_eq!(back, m);
        prop_assert_eq!(dialect, d);
    }

    #[test]
    fn arbitrary_members_round_trip(
        address in name(),
        leaving in any::<bool>(),
        timeout in 1u32..,
        topics in prop::collection::vec(name(), 1..4),
        es in entries(),
    ) {
        let claims: Vec<Claim<'_>> = es
            .iter()
            .map(|(t, p, e, o)| Claim {
                topic: t,
                partition: p,
                state: if leaving || e % 2 == 1 { ClaimState::Released } else { ClaimState::Held },
                offset: *o,
            })
            .collect();
        let m = GroupMessage::Member(Member {
            group: b"g",
            address: &address,
            flags: if leaving { MEMBER_LEAVING } else { 0 },
            timeout_ms: timeout,
            topics: topics.iter().map(Vec::as_slice).collect(),
            claims,
        });
        for d in [Dialect::Rfc, Dialect::Zproto] {
            let frames = m.encode(d).unwrap();
            prop_assert_eq!(decode(&frames).unwrap().0, m.clone());
        }
    }

    #[test]
    fn decoding_random_frames_never_panics(
        frames in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..4),
    ) {
        let _ = decode(&frames);
    }

    #[test]
    fn decoding_mutated_messages_never_panics_and_stays_strict(
        which in 0usize..4,
        zproto in any::<bool>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let d = if zproto { Dialect::Zproto } else { Dialect::Rfc };
        let mut frames = all()[which].encode(d).unwrap();
        let last = frames.len() - 1;
        for (i, b) in &flips {
            let f = &mut frames[last];
            let at = i.index(f.len());
            f[at] = *b;
        }
        if let Ok((m, dialect)) = decode(&frames) {
            // What decodes re-encodes to the same bytes: nothing is lost
            // or invented by a lenient reading.
            prop_assert_eq!(dialect, d);
            prop_assert_eq!(m.encode(d).unwrap(), frames.clone());
        }
        let f = &mut frames[last];
        let n = cut.index(f.len());
        f.truncate(n);
        let _ = decode(&frames);
    }
}

/// The group messages' subscriptions parse into typed prefixes (no byte of
/// them is read outside `wire/`), and back to the same bytes.
#[test]
fn group_subscriptions_parse_as_group_prefixes() {
    use crate::wire::Prefix;
    for who in [Subscriber::Member, Subscriber::Store] {
        for bytes in subscriptions(who, A, &[b"billing"]) {
            let p = Prefix::parse(&bytes);
            let Prefix::Group { kind, key } = p else {
                panic!("{bytes:?} parsed as {p:?}");
            };
            assert_eq!(kind.id(), bytes[0]);
            assert_eq!(key, &bytes[1..]);
            assert_eq!(p.to_bytes(), bytes);
        }
    }
    assert_eq!(
        Prefix::parse(b"Jbilling"),
        Prefix::Group {
            kind: GroupKind::Member,
            key: b"billing"
        }
    );
}
