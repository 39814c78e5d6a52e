use std::time::{Duration, Instant};

use super::*;
use crate::node::tower::FORGET_AFTER;

const U: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";
const V: &[u8] = b"9E51FBAE55A649C1A50C0B360F3FF7AE";

fn heard(k: &mut Known, uuid: &[u8], now: Instant, fd: i32) {
    let frames = vec![b"B".to_vec(), uuid.to_vec(), b"tcp://127.0.0.1:1".to_vec()];
    k.heard(&frames, now, Some(fd));
}

/// The subscription (or, `subscribe` false, unsubscription) message of
/// `kind` for `address`, as the tower's XPUB reads it.
fn sub(subscribe: bool, kind: NodeType, address: &[u8]) -> Vec<u8> {
    let topic = Announcement { kind, address }.topic();
    [&[u8::from(subscribe)][..], topic.as_slice()].concat()
}

/// (producers, consumers, stores, unknown) known.
fn counts(k: &Known) -> [u64; 4] {
    let c = k.by_kind();
    assert_eq!(
        c.iter().sum::<u64>(),
        k.len() as u64,
        "every known node once"
    );
    c
}

#[test]
fn nodes_are_counted_by_the_kind_they_announce_before_or_after_their_beacon() {
    let t = Instant::now();
    let mut k = Known::default();
    let any = Sender::Anyone;
    // U announces before its first beacon, V after.
    assert_eq!(
        k.on_subscription(&sub(true, NodeType::Store, U), any),
        Announced::Taken
    );
    assert_eq!(counts(&k), [0, 0, 0, 0], "not known yet");
    heard(&mut k, U, t, 5);
    heard(&mut k, V, t, 6);
    assert_eq!(counts(&k), [0, 0, 1, 1]);
    assert_eq!(
        k.on_subscription(&sub(true, NodeType::Producer, V), any),
        Announced::Taken
    );
    assert_eq!(counts(&k), [1, 0, 1, 0]);
    // Announced again (a reconnect): nothing moves; as another kind: moves.
    k.on_subscription(&sub(true, NodeType::Producer, V), any);
    heard(&mut k, V, t, 6);
    assert_eq!(counts(&k), [1, 0, 1, 0]);
    k.on_subscription(&sub(true, NodeType::Consumer, V), any);
    assert_eq!(counts(&k), [0, 1, 1, 0]);
    // The unsubscription of a kind V does not hold now changes nothing;
    // of the one it holds (V left the XPUB), V is unknown.
    assert_eq!(
        k.on_subscription(&sub(false, NodeType::Producer, V), any),
        Announced::Taken
    );
    assert_eq!(counts(&k), [0, 1, 1, 0]);
    k.on_subscription(&sub(false, NodeType::Consumer, V), any);
    assert_eq!(counts(&k), [0, 0, 1, 1]);
    assert_eq!(k.kinds.len(), 1);
    // Other subscriptions are no announcements.
    for m in [
        b"\x01B".as_slice(),
        b"\x01W",
        b"\x01",
        b"\x00B",
        b"",
        b"\x02Vs",
    ] {
        assert_eq!(k.on_subscription(m, any), Announced::No, "{m:?}");
    }
    let published = NodeCounts::default();
    published.publish(&k);
    assert_eq!(
        published.snapshot(),
        [
            ("producer", 0),
            ("consumer", 0),
            ("store", 1),
            ("unknown", 1)
        ]
    );
}

/// A node forgotten (its beacon connection closed, or silent for ten
/// minutes) is counted no more; its kind is kept while its subscription
/// lasts, so that a node whose beacon connection came back is counted as
/// its kind again.
#[test]
fn a_forgotten_node_is_not_counted_and_keeps_its_kind_if_it_comes_back() {
    let t = Instant::now();
    let mut k = Known::default();
    let any = Sender::Anyone;
    heard(&mut k, U, t, 5);
    heard(&mut k, V, t, 6);
    k.on_subscription(&sub(true, NodeType::Store, U), any);
    k.on_subscription(&sub(true, NodeType::Consumer, V), any);
    assert_eq!(counts(&k), [0, 1, 1, 0]);
    k.disconnected(5);
    assert_eq!(counts(&k), [0, 1, 0, 0]);
    heard(&mut k, U, t, 7);
    assert_eq!(counts(&k), [0, 1, 1, 0], "back, a store still");
    // V falls silent for ten minutes; U beacons on.
    let late = t + FORGET_AFTER + Duration::from_secs(1);
    heard(&mut k, U, late, 7);
    k.joined(late);
    k.replay(late);
    assert_eq!(counts(&k), [0, 0, 1, 0]);
    // Withdrawn while forgotten: it comes back unknown.
    k.on_subscription(&sub(false, NodeType::Consumer, V), any);
    heard(&mut k, V, late, 8);
    assert_eq!(counts(&k), [0, 0, 1, 1]);
}

/// Announcements of made-up addresses cannot grow the tower without
/// bound: past MAX_PEERS a new address's kind is not kept (its node counts
/// as unknown); the kinds held stay, a held one may change, and a
/// withdrawal makes room.
#[test]
fn kinds_held_are_bounded() {
    let t = Instant::now();
    let mut k = Known::default();
    let any = Sender::Anyone;
    let address = |i: usize| format!("{i:032X}").into_bytes();
    for i in 0..MAX_PEERS {
        let m = sub(true, NodeType::Producer, &address(i));
        assert_eq!(k.on_subscription(&m, any), Announced::Taken);
    }
    let m = sub(true, NodeType::Store, U);
    assert_eq!(k.on_subscription(&m, any), Announced::Full);
    assert_eq!((k.kinds.len(), k.kinds.refused), (MAX_PEERS, 1));
    heard(&mut k, U, t, 5);
    heard(&mut k, &address(0), t, 5);
    assert_eq!(counts(&k), [1, 0, 0, 1]);
    let m = sub(true, NodeType::Store, &address(0));
    assert_eq!(k.on_subscription(&m, any), Announced::Taken, "held already");
    assert_eq!(counts(&k), [0, 0, 1, 1]);
    k.on_subscription(&sub(false, NodeType::Producer, &address(1)), any);
    let m = sub(true, NodeType::Store, U);
    assert_eq!(k.on_subscription(&m, any), Announced::Taken, "room again");
    assert_eq!(counts(&k), [0, 0, 2, 0]);
}

#[test]
fn malformed_announcements_are_dropped_and_change_nothing() {
    let t = Instant::now();
    let mut k = Known::default();
    heard(&mut k, U, t, 5);
    let bad: [&[u8]; 5] = [
        b"\x01V",
        b"\x01Vs",
        b"\x01Vx85E3C6EBDC7B4156AD9C43611EBC09CE",
        b"\x01Vs85E3C6EBDC7B4156AD9C43611EBC09C",
        b"\x01Vs85E3C6EBDC7B4156AD9C43611EBC09CEFF",
    ];
    for m in bad {
        assert_eq!(k.on_subscription(m, Sender::Anyone), Announced::Malformed);
        // Its unsubscription, when the sender leaves, is no news.
        let mut un = m.to_vec();
        un[0] = 0;
        assert_eq!(k.on_subscription(&un, Sender::Anyone), Announced::No);
    }
    assert!(k.kinds.is_empty());
    assert_eq!(counts(&k), [0, 0, 0, 1]);
}

/// A secure tower takes an announcement, or its withdrawal, only from the
/// key the address belongs to: a trusted insider cannot make another node
/// look like another kind, nor take its kind away. The unsubscription
/// libzmq makes when a subscriber leaves has no User-Id, and is taken.
#[test]
fn a_secure_tower_takes_announcements_only_of_the_sender_s_own_address() {
    let t = Instant::now();
    let user = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
    let other = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6";
    let own = crate::security::address_for_key(&parse_key_z85(user).unwrap());
    let own = own.as_bytes();
    let mut k = Known::default();
    heard(&mut k, own, t, 5);
    let me = Sender::Secure(Some(user));
    let insider = Sender::Secure(Some(other));
    let store = sub(true, NodeType::Store, own);
    assert_eq!(k.on_subscription(&store, insider), Announced::Identity);
    assert_eq!(
        k.on_subscription(&store, Sender::Secure(None)),
        Announced::Identity
    );
    let junk = Sender::Secure(Some("not a key"));
    assert_eq!(k.on_subscription(&store, junk), Announced::Identity);
    assert_eq!(counts(&k), [0, 0, 0, 1]);
    assert_eq!(k.on_subscription(&store, me), Announced::Taken);
    assert_eq!(counts(&k), [0, 0, 1, 0]);
    // The insider withdraws it, or announces another kind: refused.
    let gone = sub(false, NodeType::Store, own);
    assert_eq!(k.on_subscription(&gone, insider), Announced::Identity);
    let producer = sub(true, NodeType::Producer, own);
    assert_eq!(k.on_subscription(&producer, insider), Announced::Identity);
    assert_eq!(counts(&k), [0, 0, 1, 0]);
    // Another node's address, from a key of its own.
    assert_eq!(
        k.on_subscription(&sub(true, NodeType::Store, U), me),
        Announced::Identity
    );
    // libzmq's unsubscription when the node left.
    assert_eq!(
        k.on_subscription(&gone, Sender::Secure(None)),
        Announced::Taken
    );
    assert_eq!(counts(&k), [0, 0, 0, 1]);
}
