//! PARTITIONS-QUERY and PARTITIONS (the cluster view's extension).

use super::tests::{forge, hex};
use super::*;

const A: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";
const S: &[u8] = b"0123456789ABCDEF0123456789ABCDEF";

fn query() -> GroupMessage<'static> {
    GroupMessage::PartitionsQuery(PartitionsQuery {
        topic: b"orders",
        address: A,
        sequence: 7,
    })
}

fn answer() -> GroupMessage<'static> {
    GroupMessage::Partitions(Partitions {
        to: A,
        address: S,
        sequence: 7,
        flags: PARTITIONS_LAST,
        parts: vec![PartInfo {
            topic: b"orders",
            partition: S,
            first: 3,
            next: 10,
            bytes: 1234,
        }],
    })
}

#[test]
fn the_view_messages_round_trip_in_both_dialects() {
    for m in [query(), answer()] {
        for d in [Dialect::Rfc, Dialect::Zproto] {
            let frames = m.encode(d).unwrap();
            let (back, dialect) = decode(&frames).unwrap();
            assert_eq!(back, m);
            assert_eq!(dialect, d);
        }
    }
    let every = GroupMessage::PartitionsQuery(PartitionsQuery {
        topic: b"",
        address: A,
        sequence: 1,
    });
    assert_eq!(
        decode(&every.encode(Dialect::Zproto).unwrap()).unwrap().0,
        every
    );
}

#[test]
fn the_view_messages_are_byte_exact_as_documented() {
    let f = query().encode(Dialect::Rfc).unwrap();
    assert_eq!(hex(&f[0]), "496F7264657273");
    assert_eq!(hex(&f[1]), format!("AAA5490120{}0000000000000007", hex(A)));
    let f = answer().encode(Dialect::Rfc).unwrap();
    assert_eq!(hex(&f[0]), format!("50{}", hex(A)));
    assert_eq!(
        hex(&f[1]),
        format!(
            "AAA5500120{}000000000000000701000000010\
             66F726465727320{}0000000000000003000000000000000A00000000000004D2",
            hex(S),
            hex(S)
        )
    );
}

#[test]
fn malformed_view_messages_are_errors() {
    let bad = |f: fn(&mut Partitions<'static>)| {
        let GroupMessage::Partitions(mut p) = answer() else {
            unreachable!()
        };
        f(&mut p);
        GroupMessage::Partitions(p)
    };
    let cases = [
        (bad(|p| p.flags = 0x02), "unknown flag"),
        (bad(|p| p.parts[0].first = 11), "first past next"),
        (bad(|p| p.parts.push(p.parts[0])), "same partition twice"),
        (bad(|p| p.parts[0].topic = b""), "no topic"),
        (bad(|p| p.address = b""), "no store"),
        (
            GroupMessage::PartitionsQuery(PartitionsQuery {
                topic: b"t",
                address: b"",
                sequence: 0,
            }),
            "no requester",
        ),
    ];
    for (m, what) in cases {
        assert!(m.encode(Dialect::Rfc).is_err(), "{what}");
        assert!(decode(&forge(&m)).is_err(), "{what} (decode)");
    }
    // Trailing bytes, a truncated field, a count the frame cannot hold.
    let mut f = answer().encode(Dialect::Rfc).unwrap();
    f[1].push(0);
    assert!(decode(&f).is_err());
    let mut f = query().encode(Dialect::Rfc).unwrap();
    f[1].pop();
    assert!(decode(&f).is_err());
    let mut f = answer().encode(Dialect::Rfc).unwrap();
    let at = 4 + 1 + S.len() + 8 + 1;
    f[1][at..at + 4].copy_from_slice(&[0xFF; 4]);
    assert!(decode(&f).is_err());
}

#[test]
fn stores_take_queries_and_viewers_their_answers() {
    let store = subscriptions(Subscriber::Store, S, &[]);
    let viewer = subscriptions(Subscriber::Viewer, A, &[]);
    let q = &query().encode(Dialect::Rfc).unwrap()[0];
    let a = &answer().encode(Dialect::Rfc).unwrap()[0];
    assert!(store.iter().any(|p| q.starts_with(p)));
    assert!(!viewer.iter().any(|p| q.starts_with(p)));
    assert!(viewer.iter().any(|p| a.starts_with(p)));
    assert!(!store.iter().any(|p| a.starts_with(p)));
}

proptest::proptest! {
    #[test]
    fn mutated_view_messages_decode_strictly_or_not_at_all(
        which in 0usize..2,
        zproto in proptest::prelude::any::<bool>(),
        flips in proptest::collection::vec(
            (proptest::prelude::any::<proptest::sample::Index>(), proptest::prelude::any::<u8>()),
            1..4,
        ),
    ) {
        let d = if zproto { Dialect::Zproto } else { Dialect::Rfc };
        let mut frames = [query(), answer()][which].encode(d).unwrap();
        let last = frames.len() - 1;
        for (i, b) in &flips {
            let f = &mut frames[last];
            let at = i.index(f.len());
            f[at] = *b;
        }
        if let Ok((m, dialect)) = decode(&frames) {
            proptest::prop_assert_eq!(dialect, d);
            proptest::prop_assert_eq!(m.encode(d).unwrap(), frames.clone());
        }
    }
}
