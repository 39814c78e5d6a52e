use crate::node::socket::set_int_option;

/// An XPUB that applies subscriptions itself, as a secure node's, and two
/// raw peers on inproc: everything the peers send is queued before the
/// XPUB reads any of it, in this order: the first peer's data frame and
/// subscription, then the second's subscription.
fn xpub_with_two_peers(ctx: &zmq::Context, ep: &str) -> (zmq::Socket, zmq::Socket, zmq::Socket) {
    let mut xpub = ctx.socket(zmq::XPUB).unwrap();
    set_int_option(&mut xpub, zmq_sys::ZMQ_XPUB_MANUAL, 1).unwrap();
    xpub.bind(ep).unwrap();
    let (x, v) = (
        ctx.socket(zmq::XSUB).unwrap(),
        ctx.socket(zmq::XSUB).unwrap(),
    );
    for s in [&xpub, &x, &v] {
        s.set_linger(0).unwrap();
        s.set_rcvtimeo(10_000).unwrap();
    }
    x.connect(ep).unwrap();
    x.send(&b"junk"[..], 0).unwrap();
    x.send(&b"\x01Ax"[..], 0).unwrap();
    v.connect(ep).unwrap();
    v.send(&b"\x01Bv"[..], 0).unwrap();
    (xpub, x, v)
}

/// Reads what the XPUB holds and applies every subscription, as
/// `Core::drain_subscriptions` does (to the pipe of the message read).
fn apply(xpub: &zmq::Socket, n: usize) -> Vec<Vec<u8>> {
    let mut read = Vec::new();
    for _ in 0..n {
        let m = xpub.recv_bytes(0).unwrap();
        if let Some((1, prefix)) = m.split_first() {
            xpub.set_subscribe(prefix).unwrap();
        }
        read.push(m);
    }
    read
}

/// libzmq 4.3.4 keeps the pipes of pending subscriptions in a queue that
/// every message read pops, also a data frame: a peer's data frame read
/// before its subscription made the XPUB apply that subscription to the
/// next peer's pipe (third_party/zeromq-src/README.dafka.md). Patched,
/// each peer gets what it subscribed, and only that.
#[test]
fn manual_subscriptions_reach_the_peer_that_sent_them() {
    let ctx = zmq::Context::new();
    let (xpub, x, v) = xpub_with_two_peers(&ctx, "inproc://manual-junk");
    let read = apply(&xpub, 3);
    assert_eq!(read, [&b"junk"[..], b"\x01Ax", b"\x01Bv"]);
    xpub.send(&b"Ax-1"[..], 0).unwrap();
    xpub.send(&b"Bv-1"[..], 0).unwrap();
    assert_eq!(x.recv_bytes(0).unwrap(), b"Ax-1", "the first peer's own");
    assert_eq!(v.recv_bytes(0).unwrap(), b"Bv-1", "not the first peer's");
}

/// Data frames and subscriptions interleaved in bursts, from both peers:
/// each subscription still reaches its own sender.
#[test]
fn bursts_of_junk_and_subscriptions_stay_with_their_senders() {
    let ctx = zmq::Context::new();
    let (xpub, x, v) = xpub_with_two_peers(&ctx, "inproc://manual-burst");
    for i in 0..50u8 {
        x.send(&[b'j', i][..], 0).unwrap();
        x.send(&[1, b'A', i][..], 0).unwrap();
        v.send(&[1, b'B', i][..], 0).unwrap();
        v.send(&[b'j', i][..], 0).unwrap();
    }
    apply(&xpub, 3 + 200);
    for i in 0..50u8 {
        xpub.send(&[b'A', i, 0][..], 0).unwrap();
        xpub.send(&[b'B', i, 0][..], 0).unwrap();
    }
    xpub.send(&b"Ax-end"[..], 0).unwrap();
    xpub.send(&b"Bv-end"[..], 0).unwrap();
    for i in 0..50u8 {
        assert_eq!(x.recv_bytes(0).unwrap(), [b'A', i, 0]);
        assert_eq!(v.recv_bytes(0).unwrap(), [b'B', i, 0]);
    }
    assert_eq!(x.recv_bytes(0).unwrap(), b"Ax-end");
    assert_eq!(v.recv_bytes(0).unwrap(), b"Bv-end");
}

/// A subscription read after its peer left applies to no pipe (libzmq
/// 4.3.4 kept the freed pipe as the one to apply it to).
#[test]
fn a_subscription_of_a_peer_that_left_applies_to_nobody() {
    let ctx = zmq::Context::new();
    let (xpub, x, v) = xpub_with_two_peers(&ctx, "inproc://manual-gone");
    // Its data and subscription are read although it left.
    x.set_linger(-1).unwrap();
    drop(x);
    // The junk, `Ax` (its pipe gone or going) and `Bv`, in that order;
    // then libzmq's unsubscription of `Ax` as the pipe ends.
    let read = apply(&xpub, 3);
    assert_eq!(read[2], b"\x01Bv", "{read:?}");
    xpub.send(&b"Ax-1"[..], 0).unwrap();
    xpub.send(&b"Bv-1"[..], 0).unwrap();
    assert_eq!(v.recv_bytes(0).unwrap(), b"Bv-1");
}
