use super::*;

/// A hand-made tower (XSUB and XPUB with the welcome) and a node's
/// Discovery (beacon every 60 s) pointed at it.
fn hand_made_tower(ctx: &zmq::Context) -> (zmq::Socket, zmq::Socket, Discovery) {
    let xsub = ctx.socket(zmq::XSUB).unwrap();
    let xpub = ctx.socket(zmq::XPUB).unwrap();
    for s in [&xsub, &xpub] {
        s.set_linger(0).unwrap();
        s.set_rcvtimeo(100).unwrap();
    }
    xpub.set_xpub_welcome_msg(Some("W")).unwrap();
    xpub.set_sndhwm(0).unwrap(); // a flood is queued, never dropped
    xsub.bind("tcp://127.0.0.1:*").unwrap();
    xpub.bind("tcp://127.0.0.1:*").unwrap();
    let port = |s: &zmq::Socket| {
        let e = s.get_last_endpoint().unwrap().unwrap();
        e.rsplit(':').next().unwrap().to_string()
    };
    let towers = [format!("tcp://127.0.0.1:{},{}", port(&xsub), port(&xpub))];
    let (interval, timeout) = (Duration::from_secs(60), Duration::from_secs(180));
    let d = Discovery::new(
        ctx,
        &towers,
        NodeType::Store,
        UUID,
        "127.0.0.1",
        4242,
        interval,
        timeout,
        Instant::now(),
        None,
    )
    .unwrap();
    (xsub, xpub, d)
}

const UUID: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";

/// One turn of a node's loop over its beacon sockets and timers.
fn step(d: &mut Discovery, wait_ms: i64) {
    let mut items = d.poll_items();
    zmq::poll(&mut items, wait_ms).unwrap();
    let readable = items.iter().any(|i| i.is_readable());
    drop(items);
    if readable {
        d.on_readable(Instant::now()).unwrap();
    }
    d.on_timer(Instant::now()).unwrap();
}

/// Steps `d` until the hand-made tower's XPUB sees it subscribe to beacons.
fn subscribed(xpub: &zmq::Socket, d: &mut Discovery, end: Instant) {
    while !xpub.recv_bytes(zmq::DONTWAIT).is_ok_and(|m| m == b"\x01B") {
        assert!(Instant::now() < end, "the node did not subscribe");
        step(d, 5);
    }
}

/// A node is heard by a tower as soon as the tower can hear it, not a
/// `beacon_interval` later (60 s here): a beacon sent before the tower's
/// subscription reached the node is dropped by ZeroMQ. A hand-made tower
/// holds its subscription back until well after its welcome, so the
/// beacons at start-up and on the welcome are both lost.
/// A node that hears no tower warns once per silence, after
/// `SILENT_AFTER` (or `beacon_timeout` if longer), and a read client can
/// tell its towers are silent; anything heard ends the silence.
#[test]
fn a_node_that_hears_no_tower_warns_once_per_silence() {
    let ctx = zmq::Context::new();
    let t0 = Instant::now();
    let timeout = Duration::from_secs(4);
    let node = |towers: &[String]| {
        let interval = Duration::from_secs(1);
        Discovery::new(
            &ctx,
            towers,
            NodeType::Consumer,
            b"ME",
            "127.0.0.1",
            9,
            interval,
            timeout,
            t0,
            None,
        )
        .unwrap()
    };
    let mut d = node(&["tcp://127.0.0.1:1,2".to_string()]);
    d.on_timer(t0 + Duration::from_secs(3)).unwrap();
    assert_eq!(d.silences, 0, "not before beacon_timeout");
    assert!(d.towers_silent(t0 + Duration::from_secs(3)).is_some());
    d.on_timer(t0 + timeout).unwrap();
    d.on_timer(t0 + 3 * timeout).unwrap();
    assert_eq!(d.silences, 1, "once per silence");
    d.heard_tower(t0 + 3 * timeout);
    assert!(d.towers_silent(t0 + 3 * timeout).is_none());
    d.on_timer(t0 + 5 * timeout).unwrap();
    assert_eq!(d.silences, 2, "a new silence");
    // No tower, no silence to tell.
    let mut none = node(&[]);
    none.on_timer(t0 + 10 * timeout).unwrap();
    assert_eq!(none.silences, 0);
    assert!(none.towers_silent(t0 + 10 * timeout).is_none());
}

#[test]
fn a_node_beacons_when_the_tower_can_hear_it() {
    let ctx = zmq::Context::new();
    let (xsub, xpub, mut d) = hand_made_tower(&ctx);
    let step = |d: &mut Discovery| step(d, 20);
    // The node subscribes to beacons: it has been sent the welcome.
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < end, "the node did not subscribe");
        step(&mut d);
        if xpub.recv_bytes(zmq::DONTWAIT).is_ok_and(|m| m == b"\x01B") {
            break;
        }
    }
    let welcomed = Instant::now();
    while welcomed.elapsed() < Duration::from_millis(300) {
        step(&mut d);
    }
    // Only now can the tower hear the node.
    xsub.send(&b"\x01B"[..], 0).unwrap();
    let got = loop {
        assert!(Instant::now() < end, "the node was not heard within 10 s");
        step(&mut d);
        if let Ok(m) = xsub.recv_multipart(zmq::DONTWAIT) {
            break m;
        }
    };
    assert_eq!(
        got,
        vec![
            b"B".to_vec(),
            UUID.to_vec(),
            b"127.0.0.1".to_vec(),
            b"4242".to_vec()
        ]
    );
}

/// A node announces its kind to its towers with a subscription beside `B`
/// and `W` ([`Announcement`]), and only a subscription that can match a
/// beacon makes it beacon: a tower that relays every subscription upstream
/// (the C reference's) relays each node's announcement too.
#[test]
fn a_node_announces_its_kind_and_beacons_only_for_beacon_subscriptions() {
    let ctx = zmq::Context::new();
    let (_xsub, xpub, mut d) = hand_made_tower(&ctx);
    let end = Instant::now() + Duration::from_secs(10);
    let want = [b"\x01Vs".as_slice(), UUID].concat();
    let mut subs = Vec::new();
    while !subs.contains(&want) {
        assert!(Instant::now() < end, "no announcement: {subs:?}");
        step(&mut d, 5);
        subs.extend(xpub.recv_bytes(zmq::DONTWAIT));
    }
    assert!(asks_for_beacons(b"\x01B") && asks_for_beacons(b"\x01"));
    assert!(asks_for_beacons(b"\x01B123"));
    assert!(!asks_for_beacons(&want), "an announcement relayed");
    assert!(!asks_for_beacons(b"\x00B"), "an unsubscription");
    assert!(!asks_for_beacons(b"\x01W") && !asks_for_beacons(b""));
}

/// A tower that relays every join's subscription (not ours) makes a node
/// beacon at most once per SUBSCRIBED_BEACON_GAP.
#[test]
fn beacons_on_subscriptions_are_spaced() {
    let ctx = zmq::Context::new();
    let (xsub, xpub, mut d) = hand_made_tower(&ctx);
    let end = Instant::now() + Duration::from_secs(10);
    // Joined: the node subscribed and beacons once the tower subscribes.
    subscribed(&xpub, &mut d, end);
    xsub.send(&b"\x01B"[..], 0).unwrap();
    while xsub.recv_multipart(zmq::DONTWAIT).is_err() {
        assert!(Instant::now() < end, "the node was not heard");
        step(&mut d, 5);
    }
    // 50 more joins relayed 2 ms apart, over about 100 ms.
    let t0 = Instant::now();
    for _ in 0..50 {
        xsub.send(&b"\x01B"[..], 0).unwrap();
        let until = Instant::now() + Duration::from_millis(2);
        while Instant::now() < until {
            step(&mut d, 1);
        }
    }
    while t0.elapsed() < Duration::from_millis(300) {
        step(&mut d, 5);
    }
    let mut beacons = 0;
    while xsub.recv_multipart(zmq::DONTWAIT).is_ok() {
        beacons += 1;
    }
    let bound = t0.elapsed().as_millis() / SUBSCRIBED_BEACON_GAP.as_millis() + 2;
    assert!(
        (1..=bound as usize).contains(&beacons),
        "{beacons} beacons for 50 joins (at most {bound})"
    );
}

/// A flood of beacons is read a bounded number per turn, and none is lost
/// to the bound: the poll reports the rest on the next turn.
#[test]
fn a_flood_of_beacons_is_read_a_batch_per_turn() {
    let ctx = zmq::Context::new();
    let (_xsub, xpub, mut d) = hand_made_tower(&ctx);
    let end = Instant::now() + Duration::from_secs(20);
    subscribed(&xpub, &mut d, end);
    let sent = 3000;
    for i in 0..sent {
        xpub.send(format!("B-not-a-beacon-{i}").as_bytes(), 0)
            .unwrap();
    }
    let (mut most, mut turns) = (0, 0);
    while d.malformed < sent {
        assert!(Instant::now() < end, "{} of {sent} read", d.malformed);
        std::thread::sleep(Duration::from_millis(50));
        let before = d.malformed;
        d.on_readable(Instant::now()).unwrap();
        most = most.max(d.malformed - before);
        turns += 1;
    }
    assert_eq!(d.malformed, sent, "every beacon read once");
    assert_eq!(most, BEACON_BATCH as u64, "at most a batch per turn");
    assert!(turns >= sent as usize / BEACON_BATCH);
}

/// A tower beacon whose endpoint no peer can be connected to (another
/// transport, no port, port 0) is malformed: dropped and counted, not
/// taken for a peer (counted in `peers`, connected to, and occupying a
/// place in the table until it expires).
#[test]
fn a_tower_beacon_with_an_unusable_endpoint_is_dropped_and_counted() {
    let ctx = zmq::Context::new();
    let (_xsub, xpub, mut d) = hand_made_tower(&ctx);
    let end = Instant::now() + Duration::from_secs(20);
    subscribed(&xpub, &mut d, end);
    let bad: [&[u8]; 3] = [
        b"udp://127.0.0.1:5",
        b"tcp://127.0.0.1",
        b"tcp://127.0.0.1:0",
    ];
    for (i, ep) in bad.iter().enumerate() {
        let uuid = format!("{i:032X}");
        let frames: [&[u8]; 3] = [b"B", uuid.as_bytes(), ep];
        xpub.send_multipart(frames, 0).unwrap();
    }
    let mut events = Vec::new();
    // The three beacons are in once nothing came for 300 ms.
    let mut quiet = Instant::now();
    while quiet.elapsed() < Duration::from_millis(300) {
        assert!(Instant::now() < end, "beacons not read");
        let mut items = d.poll_items();
        zmq::poll(&mut items, 20).unwrap();
        drop(items);
        let got = d.on_readable(Instant::now()).unwrap();
        if !got.is_empty() {
            quiet = Instant::now();
        }
        events.extend(got);
    }
    assert_eq!(
        (d.malformed, d.table.len()),
        (3, 0),
        "taken for peers: {events:?}"
    );
}

/// A node that ended and a new one given its port: one connection, kept
/// while either is known, dropped when neither is.
#[test]
fn an_endpoint_two_peers_name_is_connected_once_and_kept_for_the_live_one() {
    let t0 = Instant::now();
    let mut t = PeerTable::new(b"ME", Duration::from_secs(4));
    let ep = "tcp://127.0.0.1:5000";
    assert_eq!(
        t.on_beacon(b"OLD", ep, t0),
        vec![PeerEvent::Connect(ep.into())]
    );
    let t1 = t0 + Duration::from_secs(3);
    assert!(t.on_beacon(b"NEW", ep, t1).is_empty(), "connected already");
    // OLD expires; NEW, still beaconing, keeps the connection.
    let t5 = t0 + Duration::from_secs(5);
    assert!(t.on_beacon(b"NEW", ep, t5).is_empty());
    assert!(t.expire(t5).is_empty(), "NEW still uses the endpoint");
    assert_eq!(t.len(), 1);
    // NEW moves away: now the endpoint goes.
    assert_eq!(
        t.on_beacon(b"NEW", "tcp://127.0.0.1:5001", t5),
        vec![
            PeerEvent::Disconnect(ep.into()),
            PeerEvent::Connect("tcp://127.0.0.1:5001".into())
        ]
    );
    assert_eq!(
        t.expire(t5 + Duration::from_secs(4)),
        vec![PeerEvent::Disconnect("tcp://127.0.0.1:5001".into())]
    );
    assert!(t.is_empty());
}

#[test]
fn a_static_peer_also_discovered_is_connected_once_and_never_dropped() {
    let t0 = Instant::now();
    let mut t = PeerTable::new(b"ME", Duration::from_secs(4));
    let ep = "tcp://127.0.0.1:5000";
    assert_eq!(t.add_static(ep), vec![PeerEvent::Connect(ep.into())]);
    assert!(t.on_beacon(b"P1", ep, t0).is_empty(), "connected already");
    // The discovered entry expires; the static peer keeps the connection.
    assert!(t.expire(t0 + Duration::from_secs(5)).is_empty());
    assert!(t.is_empty());
    // Discovered first, then named as a static peer: still one connect.
    let other = "tcp://127.0.0.1:5001";
    assert_eq!(
        t.on_beacon(b"P2", other, t0),
        vec![PeerEvent::Connect(other.into())]
    );
    assert!(t.add_static(other).is_empty());
    assert!(t.expire(t0 + Duration::from_secs(5)).is_empty());
}

/// A tower relaying made-up UUIDs cannot make a node keep (and connect
/// to) every one: past the bound a new peer is ignored and counted,
/// known ones are still refreshed, and room comes back as peers expire.
#[test]
fn discovered_peers_are_bounded() {
    let t0 = Instant::now();
    let mut t = PeerTable::with_cap(b"ME", Duration::from_secs(4), 3);
    let ep = |i: u16| format!("tcp://127.0.0.1:{}", 5000 + i);
    for i in 0..3u16 {
        let at = t0 + Duration::from_secs(u64::from(i));
        assert_eq!(
            t.on_beacon(format!("P{i}").as_bytes(), &ep(i), at),
            vec![PeerEvent::Connect(ep(i))]
        );
    }
    assert!(t.on_beacon(b"P3", &ep(3), t0).is_empty(), "full");
    assert!(t.on_beacon(b"P4", &ep(4), t0).is_empty(), "full");
    assert_eq!((t.len(), t.refused), (3, 2));
    // A known peer moving is no new peer.
    assert_eq!(
        t.on_beacon(b"P1", &ep(9), t0 + Duration::from_secs(3)),
        vec![PeerEvent::Disconnect(ep(1)), PeerEvent::Connect(ep(9))]
    );
    assert_eq!(t.refused, 2);
    // P0 expires at 4 s: room for P3.
    assert_eq!(
        t.expire(t0 + Duration::from_secs(4)),
        vec![PeerEvent::Disconnect(ep(0))]
    );
    assert_eq!(
        t.on_beacon(b"P3", &ep(3), t0 + Duration::from_secs(4)),
        vec![PeerEvent::Connect(ep(3))]
    );
    assert_eq!((t.len(), t.refused), (3, 2));
    // Static peers do not count against the bound.
    assert_eq!(t.add_static(&ep(7)), vec![PeerEvent::Connect(ep(7))]);
    assert_eq!(t.len(), 3);
}

/// Expiry walks the peers only when one may be due: the bound it keeps
/// is never later than a real expiry, and is exact after a walk.
#[test]
fn expiry_is_never_late_and_exact_after_a_walk() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    let mut t = PeerTable::new(b"ME", s(4));
    assert_eq!(t.next_expiry(), None);
    t.on_beacon(b"P1", "tcp://127.0.0.1:1", t0);
    t.on_beacon(b"P2", "tcp://127.0.0.1:2", t0 + s(2));
    assert_eq!(t.next_expiry(), Some(t0 + s(4)));
    // P1 beacons again: the bound may stay early, never late.
    t.on_beacon(b"P1", "tcp://127.0.0.1:1", t0 + s(3));
    assert!(t.expire(t0 + s(3)).is_empty(), "not due yet");
    assert_eq!(t.next_expiry(), Some(t0 + s(4)));
    // Woken at the bound: nobody expires, and the bound is exact again.
    assert!(t.expire(t0 + s(4)).is_empty());
    assert_eq!(t.next_expiry(), Some(t0 + s(6)));
    assert_eq!(
        t.expire(t0 + s(6)),
        vec![PeerEvent::Disconnect("tcp://127.0.0.1:2".into())]
    );
    assert_eq!(t.next_expiry(), Some(t0 + s(7)));
    assert_eq!(t.expire(t0 + s(7)).len(), 1);
    assert_eq!(t.next_expiry(), None);
    assert!(t.is_empty());
}

#[test]
fn peers_connect_once_move_and_expire() {
    let t0 = Instant::now();
    let mut t = PeerTable::new(b"ME", Duration::from_secs(4));
    assert!(t.on_beacon(b"ME", "tcp://1.2.3.4:5", t0).is_empty());
    assert_eq!(
        t.on_beacon(b"P1", "tcp://1.2.3.4:5", t0),
        vec![PeerEvent::Connect("tcp://1.2.3.4:5".into())]
    );
    assert!(t.on_beacon(b"P1", "tcp://1.2.3.4:5", t0).is_empty());
    assert_eq!(
        t.on_beacon(b"P1", "tcp://1.2.3.4:6", t0 + Duration::from_secs(1)),
        vec![
            PeerEvent::Disconnect("tcp://1.2.3.4:5".into()),
            PeerEvent::Connect("tcp://1.2.3.4:6".into())
        ]
    );
    assert!(t.expire(t0 + Duration::from_secs(4)).is_empty());
    assert_eq!(t.next_expiry(), Some(t0 + Duration::from_secs(5)));
    assert_eq!(
        t.expire(t0 + Duration::from_secs(5)),
        vec![PeerEvent::Disconnect("tcp://1.2.3.4:6".into())]
    );
    assert!(t.is_empty());
    assert!(t.on_beacon(b"P2", "garbage", t0).is_empty());
}

/// Secure mode (issue 35): a trusted insider beaconed the producer's UUID
/// with its own endpoint and key, and every store dropped its
/// connection to the real producer. Now a UUID is taken only with the
/// key it was made from, and a known peer keeps its key.
#[test]
fn a_secure_peer_table_binds_uuids_to_keys() {
    let t0 = Instant::now();
    let (alice, mallory) = ([0xA1u8; 32], [0x3Au8; 32]);
    let at =
        |port: u16, key: &[u8; 32]| crate::security::keyed(&format!("tcp://10.0.0.1:{port}"), key);
    let uuid = crate::security::address_for_key(&alice);
    let mut t = PeerTable::new(b"ME", Duration::from_secs(4));
    t.bind_keys();
    assert_eq!(
        t.on_beacon(uuid.as_bytes(), &at(1, &alice), t0),
        vec![PeerEvent::Connect(at(1, &alice))]
    );
    // Mallory beacons Alice's UUID: nothing moves, and it is counted.
    assert!(t
        .on_beacon(uuid.as_bytes(), &at(2, &mallory), t0)
        .is_empty());
    assert_eq!(t.identity_refused, 1);
    // A UUID of its own key that Alice's node never had is Mallory's.
    let own = crate::security::address_for_key(&mallory);
    assert_eq!(t.on_beacon(own.as_bytes(), &at(2, &mallory), t0).len(), 1);
    // Alice's node on another port (it restarted): same key, it moves.
    assert_eq!(t.on_beacon(uuid.as_bytes(), &at(3, &alice), t0).len(), 2);
    // A UUID of nobody's key, and an endpoint without a key.
    assert!(t
        .on_beacon(b"85E3C6EBDC7B4156AD9C43611EBC09CE", &at(4, &alice), t0)
        .is_empty());
    assert!(t
        .on_beacon(uuid.as_bytes(), "tcp://10.0.0.1:5", t0)
        .is_empty());
    assert_eq!(t.identity_refused, 3);
    assert_eq!(t.len(), 2);
}
