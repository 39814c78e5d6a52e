use super::*;

const U: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";

#[test]
fn rewrites_node_beacons() {
    let out = rewrite(
        &[b"B", U, b"10.0.0.7", b"4242"],
        Some("127.0.0.1"),
        None,
        false,
    )
    .unwrap();
    assert_eq!(
        out,
        vec![b"B".to_vec(), U.to_vec(), b"tcp://10.0.0.7:4242".to_vec()]
    );
    let out = rewrite(&[b"B", U, b"", b"4242"], Some("192.168.1.2"), None, false).unwrap();
    assert_eq!(out[2], b"tcp://192.168.1.2:4242");
    assert!(rewrite(&[b"B", U, b"", b"4242"], None, None, false).is_err());
    assert!(rewrite(&[b"B", U, b"tcp://x:1"], Some("h"), None, false).is_err());
    assert!(rewrite(&[b"B", U, b"h", b"0"], Some("h"), None, false).is_err());
    assert!(rewrite(&[b"X"], Some("h"), None, false).is_err());
}

/// A secure tower relays a beacon only with the key that authenticated
/// its connection, and puts it in the endpoint; an insecure one relays
/// none with a key. The UUID must be the key's (issue 35: a trusted
/// insider beaconing another node's UUID took its place at every node).
#[test]
fn a_secure_tower_relays_only_the_sender_s_own_key_and_uuids() {
    let k: &[u8] = b"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
    let other = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6";
    let user = std::str::from_utf8(k).unwrap();
    let public = crate::security::cert::parse_key_z85(user).unwrap();
    let own = crate::security::address_for_key(&public);
    let beacon: [&[u8]; 5] = [b"B", own.as_bytes(), b"10.0.0.7", b"4242", k];
    let out = rewrite(&beacon, None, Some(user), true).unwrap();
    assert_eq!(
        out[2],
        format!("tcp://10.0.0.7:4242;curve={user}").into_bytes()
    );
    assert_eq!(
        rewrite(&beacon, None, Some(other), true),
        Err(Refused::Malformed),
        "another's key"
    );
    assert!(rewrite(&beacon, None, None, true).is_err());
    assert!(
        rewrite(&beacon[..4], None, Some(user), true).is_err(),
        "no key"
    );
    assert!(
        rewrite(&beacon, None, Some(user), false).is_err(),
        "insecure tower"
    );
    // Another node's UUID (U), or one sharing only 7 of the key's 8
    // bytes: refused as an identity theft.
    let stolen: [&[u8]; 5] = [b"B", U, b"10.0.0.7", b"4242", k];
    assert_eq!(
        rewrite(&stolen, None, Some(user), true),
        Err(Refused::Identity)
    );
    let mut near = own.clone().into_bytes();
    near[13] = if near[13] == b'0' { b'1' } else { b'0' };
    let close: [&[u8]; 5] = [b"B", &near, b"10.0.0.7", b"4242", k];
    assert_eq!(
        rewrite(&close, None, Some(user), true),
        Err(Refused::Identity)
    );
}

/// A tower on ephemeral ports of 127.0.0.1.
fn local_tower() -> Tower {
    Tower::new(TowerConfig {
        beacon_in: "tcp://127.0.0.1:0".into(),
        beacon_out: "tcp://127.0.0.1:0".into(),
        security: None,
    })
    .unwrap()
}

fn beacon(uuid: &[u8], port: u16) -> Vec<Vec<u8>> {
    let ep = format!("tcp://127.0.0.1:{port}");
    vec![b"B".to_vec(), uuid.to_vec(), ep.into_bytes()]
}

#[test]
fn known_beacons_repeat_for_joiners_coalesced_and_only_live_ones() {
    const V: &[u8] = b"9E51FBAE55A649C1A50C0B360F3FF7AE";
    const Q: &[u8] = b"5D5B5C63E2C54B6A8C2BDA2B5D1F0A11";
    let t0 = Instant::now();
    let mut k = Known::default();
    assert!(k.replay(t0).is_empty(), "nothing due before a node joins");
    k.heard(&beacon(U, 1), t0, Some(5));
    // Q beacons every 10 s: it stays live for three of its intervals.
    k.heard(&beacon(Q, 3), t0, Some(6));
    k.heard(&beacon(Q, 3), t0 + Duration::from_secs(10), Some(6));
    k.heard(&beacon(V, 2), t0 + Duration::from_secs(10), None);
    let t = t0 + Duration::from_secs(11);
    k.joined(t);
    let mut got = k.replay(t);
    got.sort();
    // U's last beacon is 11 s old (it stopped): not repeated.
    assert_eq!(got, vec![beacon(Q, 3), beacon(V, 2)]);
    // Three joins right after: one repeat, REPLAY_EVERY after the last.
    for _ in 0..3 {
        k.joined(t);
    }
    assert_eq!(k.deadline(), Some(t + REPLAY_EVERY));
    assert!(k.replay(t).is_empty());
    assert_eq!(k.replay(t + REPLAY_EVERY).len(), 2);
    assert!(k.replay(t + 2 * REPLAY_EVERY).is_empty(), "no join since");
    // Past three intervals (30 s) Q is no longer repeated either.
    let late = t0 + Duration::from_secs(41);
    k.joined(late);
    assert!(k.replay(late).is_empty());
}

/// Beacons of made-up UUIDs cannot grow the tower without bound: past
/// MAX_PEERS a new node is not remembered (its beacons are still
/// relayed), while the nodes known stay known.
#[test]
fn known_nodes_are_bounded() {
    let t = Instant::now();
    let mut k = Known::default();
    let uuid = |i: usize| format!("{i:032X}").into_bytes();
    for i in 0..MAX_PEERS + 10 {
        k.heard(&beacon(&uuid(i), 1), t, Some(5));
    }
    assert_eq!(k.len(), MAX_PEERS);
    assert_eq!(k.refused, 10);
    // A known node's next beacon is no new node.
    k.heard(&beacon(&uuid(0), 2), t, Some(5));
    assert_eq!(k.refused, 10);
    // Room again once some go.
    k.disconnected(5);
    k.heard(&beacon(&uuid(MAX_PEERS + 20), 1), t, Some(6));
    assert_eq!((k.len(), k.refused), (1, 10));
}

#[test]
fn subscriptions_go_upstream_once_only_if_they_can_match_a_beacon_and_bounded() {
    let mut r = Relayed::default();
    assert!(r.forward(b"\x01B"));
    assert!(!r.forward(b"\x01B"), "once");
    assert!(r.forward(b"\x01"), "everything matches beacons too");
    assert!(!r.forward(b"\x01W"), "the welcome is no beacon");
    assert!(!r.forward(b"\x01Mtopic"), "nothing upstream publishes it");
    assert!(
        !r.forward(b"\x00Mtopic"),
        "not relayed, so not unsubscribed"
    );
    assert!(!r.forward(b"not a subscription"));
    let long = [b"\x01B".as_slice(), &[b'x'; RELAYED_TOPIC_MAX]].concat();
    assert!(!r.forward(&long), "too long to keep");
    assert!(
        r.forward(&long[..RELAYED_TOPIC_MAX + 1]),
        "just short enough"
    );
    assert!(r.forward(&[b"\x00".as_slice(), &long[1..RELAYED_TOPIC_MAX + 1]].concat()));
    assert!(!r.forward(b""));
    for i in 0..RELAYED_MAX {
        let m = format!("\x01B{i}");
        let fresh = r.forward(m.as_bytes());
        assert_eq!(
            fresh,
            i < RELAYED_MAX - 2,
            "{i}: two taken by B and the empty one"
        );
    }
    assert!(!r.forward(b"\x01Bmore"), "full");
    // Unsubscribing the last subscriber makes room, and B always passes.
    assert!(r.forward(b"\x00B"));
    assert!(r.forward(b"\x01B"));
    assert!(r.forward(b"\x00B0"));
    assert!(r.forward(b"\x01Bmore"));
}

#[test]
fn a_node_whose_connection_closed_is_not_repeated() {
    const V: &[u8] = b"9E51FBAE55A649C1A50C0B360F3FF7AE";
    let t = Instant::now();
    let mut k = Known::default();
    k.heard(&beacon(U, 1), t, Some(5));
    k.heard(&beacon(V, 2), t, Some(6));
    k.disconnected(5);
    k.disconnected(99);
    assert_eq!(k.len(), 1);
    k.joined(t);
    assert_eq!(k.replay(t), vec![beacon(V, 2)]);
    // V reconnected (a new connection): its old one closing is no news.
    k.heard(&beacon(V, 2), t, Some(8));
    k.disconnected(6);
    assert_eq!(k.len(), 1);
    k.disconnected(8);
    assert!(k.is_empty());
}

/// A node that closes is forgotten at once: `peers` counts it no more,
/// and a node joining is not told of it (its last beacon is seconds
/// fresh, and was repeated to joiners before).
#[test]
fn a_node_that_closes_is_forgotten_at_once() {
    const V: &[u8] = b"9E51FBAE55A649C1A50C0B360F3FF7AE";
    let tower = local_tower();
    let ctx = zmq::Context::new();
    let sub = || {
        let s = ctx.socket(zmq::SUB).unwrap();
        s.set_linger(0).unwrap();
        s.set_rcvtimeo(100).unwrap();
        s.set_subscribe(b"B").unwrap();
        s.connect(tower.beacon_out()).unwrap();
        s
    };
    let watcher = sub();
    let node = |uuid: &'static [u8], port: &'static [u8]| {
        let s = ctx.socket(zmq::PUB).unwrap();
        s.set_linger(0).unwrap();
        s.connect(tower.beacon_in()).unwrap();
        let frames: [&[u8]; 4] = [b"B", uuid, b"127.0.0.1", port];
        (s, frames)
    };
    let (a, beacon_a) = node(U, b"4242");
    let (b, beacon_b) = node(V, b"4343");
    let relayed = |uuid: &[u8], port: &str| {
        let ep = format!("tcp://127.0.0.1:{port}");
        vec![b"B".to_vec(), uuid.to_vec(), ep.into_bytes()]
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = (false, false);
    while !(seen.0 && seen.1) {
        assert!(Instant::now() < deadline, "beacons not relayed");
        a.send_multipart(beacon_a, 0).unwrap();
        b.send_multipart(beacon_b, 0).unwrap();
        while let Ok(m) = watcher.recv_multipart(0) {
            seen.0 |= m == relayed(U, "4242");
            seen.1 |= m == relayed(V, "4343");
        }
    }
    let peers = || tower.stats().peers.load(Relaxed);
    let wait_peers = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while peers() != n {
            assert!(Instant::now() < deadline, "peers {} != {n}", peers());
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait_peers(2);
    drop(a);
    wait_peers(1);
    // A joiner hears B (live or repeated), never A.
    let joiner = sub();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut got = Vec::new();
    while !got.contains(&relayed(V, "4343")) {
        assert!(Instant::now() < deadline, "B never reached the joiner");
        b.send_multipart(beacon_b, 0).unwrap();
        while let Ok(m) = joiner.recv_multipart(0) {
            got.push(m);
        }
    }
    assert!(!got.contains(&relayed(U, "4242")), "{got:?}");
    tower.close().unwrap();
}

/// Each node joining is seen (to repeat the known beacons), but its
/// subscription goes upstream only once: a duplicate would reach every
/// node's beacon socket, and every node would beacon at each join.
#[test]
fn subscriptions_go_upstream_once() {
    let tower = local_tower();
    let ctx = zmq::Context::new();
    let join = || {
        let s = ctx.socket(zmq::SUB).unwrap();
        s.set_linger(0).unwrap();
        s.set_rcvtimeo(10_000).unwrap();
        s.set_subscribe(b"B").unwrap();
        s.set_subscribe(b"W").unwrap();
        s.connect(tower.beacon_out()).unwrap();
        assert_eq!(s.recv_multipart(0).unwrap(), vec![b"W".to_vec()]);
        s
    };
    let _first = join();
    // A node's beacon socket, as Discovery makes it.
    let node = ctx.socket(zmq::XPUB).unwrap();
    node.set_linger(0).unwrap();
    node.set_xpub_verbose(true).unwrap();
    node.set_rcvtimeo(10_000).unwrap();
    node.connect(tower.beacon_in()).unwrap();
    let mut subs = vec![node.recv_bytes(0).unwrap()];
    let _more: Vec<zmq::Socket> = (0..3).map(|_| join()).collect();
    node.set_rcvtimeo(300).unwrap();
    while let Ok(m) = node.recv_bytes(0) {
        subs.push(m);
    }
    // `W` (the welcome) stays here: no beacon upstream can match it.
    assert_eq!(subs, vec![b"\x01B".to_vec()]);
    tower.close().unwrap();
}

/// A node that joins is told every live node known (up to MAX_PEERS),
/// not only as many as fit in one subscriber's send queue: with 3,000
/// nodes known, the repeat for a joiner must carry all of them.
#[test]
fn a_joiner_is_told_every_known_node_not_only_a_queue_full() {
    const N: usize = 3000;
    let tower = local_tower();
    let ctx = zmq::Context::new();
    let sub = || {
        let s = ctx.socket(zmq::SUB).unwrap();
        s.set_linger(0).unwrap();
        s.set_rcvhwm(0).unwrap();
        s.set_rcvtimeo(100).unwrap();
        s.set_subscribe(b"B").unwrap();
        s.connect(tower.beacon_out()).unwrap();
        s
    };
    let watcher = sub();
    // One connection beaconing for N nodes (the tower keys them by UUID).
    let nodes = ctx.socket(zmq::PUB).unwrap();
    nodes.set_linger(0).unwrap();
    nodes.set_sndhwm(0).unwrap();
    nodes.connect(tower.beacon_in()).unwrap();
    let uuid = |i: usize| format!("{i:032X}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "no beacon relayed");
        let first = uuid(0);
        let frames: [&[u8]; 4] = [b"B", first.as_bytes(), b"127.0.0.1", b"4242"];
        nodes.send_multipart(frames, 0).unwrap();
        if watcher.recv_multipart(0).is_ok() {
            break;
        }
    }
    for i in 1..N {
        let u = uuid(i);
        let frames: [&[u8]; 4] = [b"B", u.as_bytes(), b"127.0.0.1", b"4242"];
        nodes.send_multipart(frames, 0).unwrap();
    }
    while tower.stats().peers.load(Relaxed) < N as u64 {
        assert!(
            Instant::now() < deadline,
            "the tower knows {} nodes",
            tower.stats().peers.load(Relaxed)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // A node joins; nobody beacons any more: all it hears is the repeat.
    let joiner = sub();
    let mut told = std::collections::HashSet::new();
    let mut quiet = 0;
    while quiet < 10 && told.len() < N {
        match joiner.recv_multipart(0) {
            Ok(m) => {
                quiet = 0;
                told.insert(m.get(1).cloned().unwrap_or_default());
            }
            Err(_) => quiet += 1,
        }
    }
    assert_eq!(
        told.len(),
        N,
        "the joiner was told {} of {N} known nodes",
        told.len()
    );
    tower.close().unwrap();
}

#[test]
fn a_node_that_joins_learns_the_known_nodes_at_once() {
    let tower = local_tower();
    let ctx = zmq::Context::new();
    let sub = |ctx: &zmq::Context| {
        let s = ctx.socket(zmq::SUB).unwrap();
        s.set_linger(0).unwrap();
        s.set_rcvtimeo(100).unwrap();
        s.set_subscribe(b"B").unwrap();
        s.connect(tower.beacon_out()).unwrap();
        s
    };
    let first = sub(&ctx);
    let node = ctx.socket(zmq::PUB).unwrap();
    node.set_linger(0).unwrap();
    node.connect(tower.beacon_in()).unwrap();
    let relayed = vec![b"B".to_vec(), U.to_vec(), b"tcp://127.0.0.1:4242".to_vec()];
    // The node beacons until its beacon comes through (subscriptions
    // travel upstream first), then falls silent.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "no beacon relayed");
        let frames: [&[u8]; 4] = [b"B", U, b"127.0.0.1", b"4242"];
        node.send_multipart(frames, 0).unwrap();
        if first.recv_multipart(0).is_ok_and(|m| m == relayed) {
            break;
        }
    }
    // Beacons still in flight are through once the first SUB heard none
    // for 300 ms.
    let mut quiet = 0;
    while quiet < 3 {
        quiet = if first.recv_multipart(0).is_ok() {
            0
        } else {
            quiet + 1
        };
    }
    // A node that subscribes now hears it without another beacon.
    let second = sub(&ctx);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(
            Instant::now() < deadline,
            "the known node was not repeated to the new subscriber"
        );
        if second.recv_multipart(0).is_ok_and(|m| m == relayed) {
            break;
        }
    }
    tower.close().unwrap();
}
