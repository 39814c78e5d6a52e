//! The store's socket side (found by a review, session 21): a requester that
//! stops reading must not hold up answers to others.

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use _native::node::store::{Store, StoreConfig};
use _native::node::*;
use _native::wire::{Kind, Prefix, Subscription};

mod common;
use common::stores::*;
use common::wait_for;

/// A requester speaking raw ZeroMQ: it FETCHes through its own XPUB (the
/// store connects to it) and takes DIRECT-RECORDs to `address` on a SUB
/// with tiny queues, read only when the test says so.
struct RawRequester {
    xpub: zmq::Socket,
    sub: zmq::Socket,
    address: Vec<u8>,
}

impl RawRequester {
    fn new(ctx: &zmq::Context, s: &Store, address: &str) -> Self {
        Self::subscribed(ctx, s, address, &[])
    }

    /// Also subscribed to `extra` (e.g. `F`, as every store is).
    fn subscribed(ctx: &zmq::Context, s: &Store, address: &str, extra: &[&[u8]]) -> Self {
        let xpub = ctx.socket(zmq::XPUB).unwrap();
        xpub.set_linger(0).unwrap();
        xpub.bind("tcp://127.0.0.1:0").unwrap();
        let ep = xpub.get_last_endpoint().unwrap().unwrap();
        let sub = ctx.socket(zmq::SUB).unwrap();
        sub.set_linger(0).unwrap();
        sub.set_rcvhwm(1).unwrap();
        sub.set_rcvbuf(4096).unwrap();
        // DIRECT-RECORD first, then STORE-HELLO: the HELLO proves the store
        // took the first subscription too.
        sub.set_subscribe(&Prefix::of(Kind::DirectRecord, address.as_bytes()).to_bytes())
            .unwrap();
        for prefix in extra {
            sub.set_subscribe(prefix).unwrap();
        }
        sub.set_subscribe(&Prefix::of(Kind::StoreHello, address.as_bytes()).to_bytes())
            .unwrap();
        sub.connect(s.endpoint()).unwrap();
        s.connect(&ep).unwrap();
        // The store's catch-all FETCH subscription reached our XPUB.
        xpub.set_rcvtimeo(100).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            assert!(
                Instant::now() < deadline,
                "no FETCH subscription from the store"
            );
            if let Ok(f) = xpub.recv_bytes(0) {
                let every_fetch = Subscription {
                    subscribe: true,
                    prefix: Prefix::of(Kind::Fetch, b""),
                };
                if f == every_fetch.encode() {
                    break;
                }
            }
        }
        // The store's STORE-HELLO to us.
        sub.set_rcvtimeo(100).unwrap();
        loop {
            assert!(Instant::now() < deadline, "no STORE-HELLO from the store");
            if let Ok(f) = sub.recv_bytes(0) {
                let more = sub.get_rcvmore().unwrap();
                if f.first() == Some(&Kind::StoreHello.id()) {
                    while sub.get_rcvmore().unwrap() {
                        sub.recv_bytes(0).unwrap();
                    }
                    break;
                }
                if more {
                    while sub.get_rcvmore().unwrap() {
                        sub.recv_bytes(0).unwrap();
                    }
                }
            }
        }
        Self {
            xpub,
            sub,
            address: address.as_bytes().to_vec(),
        }
    }

    fn fetch(&self, partition: &str, sequence: u64, count: u32) {
        use _native::wire::{Dialect, Fetch, Message};
        let frames = Message::Fetch(Fetch {
            partition: partition.as_bytes(),
            requester: &self.address,
            topic: b"t",
            sequence,
            count,
        })
        .to_frames(Dialect::Rfc)
        .unwrap();
        self.xpub.send_multipart(frames, 0).unwrap();
    }

    /// The offsets of the DIRECT-RECORDs waiting now.
    fn take_records(&self) -> Vec<u64> {
        use _native::wire::{decode, Message};
        let mut got = Vec::new();
        while let Ok(frames) = self.sub.recv_multipart(zmq::DONTWAIT) {
            if let Ok((Message::DirectRecord(r), _)) = decode(&frames) {
                got.push(r.sequence);
            }
        }
        got
    }
}

/// `n` records of `size` bytes in partition `part` of topic `t`, written
/// straight into the store's log directory before the store opens.
fn prefill(dir: &std::path::Path, part: &str, n: usize, size: usize) {
    let mut log = _native::log::Log::open(
        dir.join(_native::node::store::LOG_DIR),
        _native::log::LogConfig::default(),
    )
    .unwrap();
    let vals: Vec<Vec<u8>> = (0..n).map(|i| vec![i as u8; size]).collect();
    log.append_batch(b"t", part, 0, &vals).unwrap();
    log.close().unwrap();
}

/// A store over `n` records of 16 KiB of `part`, whose XPUB queues hold 4
/// messages (a requester that stops reading fills its queue at once).
fn prefilled_store_with_small_queues(dir: &std::path::Path, part: &str, n: usize) -> Store {
    prefill(dir, part, n, 16 << 10);
    Store::open(
        dir,
        StoreConfig {
            node: NodeConfig {
                sndhwm: 4,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .unwrap()
}

/// One requester that stopped reading (a consumer whose application is
/// behind stops reading its SUB) must not keep the store from answering
/// everybody else's FETCHes.
#[test]
fn a_requester_that_stopped_reading_does_not_hold_up_answers_to_others() {
    let (dir, part, n) = (tempfile::tempdir().unwrap(), "A".repeat(32), 1000);
    let s = prefilled_store_with_small_queues(dir.path(), &part, n);
    let ctx = zmq::Context::new();
    let stalled = RawRequester::new(&ctx, &s, &"1".repeat(32));
    let reader = RawRequester::new(&ctx, &s, &"2".repeat(32));

    // The stalled requester asks for everything and never reads.
    stalled.fetch(&part, 0, n as u32);
    wait_until_stalled(&s, n as u64);

    // Another requester asks for ten records, again and again as a
    // consumer does, and reads what comes.
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < 10 && Instant::now() < deadline {
        reader.fetch(&part, got.len() as u64, 10 - got.len() as u32);
        for _ in 0..25 {
            std::thread::sleep(Duration::from_millis(20));
            got.extend(reader.take_records());
        }
    }
    let counters = s.shared().counters.snapshot();
    assert_eq!(
        got,
        (0..10).collect::<Vec<u64>>(),
        "the reader got {} of 10 records in 20 s while another requester's queue was full \
         (store: {counters:?})",
        got.len()
    );
    drop((stalled, reader));
    s.close().unwrap();
}

/// Waits until `s` has served what it can to a requester that stopped
/// reading: its records served stop growing, short of `n`.
fn wait_until_stalled(s: &Store, n: u64) {
    let served = || s.shared().counters.snapshot().records_served;
    let mut last = (served(), Instant::now());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "the stalled requester's queue never filled"
        );
        std::thread::sleep(Duration::from_millis(100));
        let now = served();
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() >= Duration::from_secs(1) {
            break;
        }
    }
    assert!(
        last.0 < n,
        "everything went out ({}): the test needs a full queue",
        last.0
    );
}

/// A FETCH goes to the partition's producer and to every store (each
/// subscribes to all FETCHes). Another store catching up from this one, whose
/// queue the FETCH answers keep full, must not keep this store from FETCHing
/// its own gaps from a producer.
#[test]
fn a_store_catching_up_from_us_does_not_keep_us_from_fetching_a_gap() {
    use _native::wire::{Dialect, Head, Message};
    let (dir, part, n) = (tempfile::tempdir().unwrap(), "A".repeat(32), 1000);
    let s = prefilled_store_with_small_queues(dir.path(), &part, n);
    let ctx = zmq::Context::new();
    // The other store: subscribed to every FETCH, catching up on `part`,
    // reading slower than we answer (here: not at all).
    let every_fetch = Prefix::of(Kind::Fetch, b"").to_bytes();
    let peer = RawRequester::subscribed(&ctx, &s, &"1".repeat(32), &[&every_fetch]);
    peer.fetch(&part, 0, n as u32);
    wait_until_stalled(&s, n as u64);

    // A producer of partition X whose first records we missed: its HEAD
    // tells us, and we must FETCH them from it.
    let x = "B".repeat(32);
    let fetch_key = Prefix::of(Kind::Fetch, x.as_bytes()).to_bytes();
    let producer = RawRequester::subscribed(&ctx, &s, &x, &[&fetch_key]);
    let head = Message::Head(Head {
        topic: b"t",
        address: x.as_bytes(),
        subject: b"t",
        sequence: 5,
    })
    .to_frames(Dialect::Rfc)
    .unwrap();
    let mut fetched = false;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !fetched && Instant::now() < deadline {
        producer.xpub.send_multipart(head.clone(), 0).unwrap();
        for _ in 0..25 {
            std::thread::sleep(Duration::from_millis(20));
            while let Ok(frames) = producer.sub.recv_multipart(zmq::DONTWAIT) {
                fetched |= frames[0] == fetch_key;
            }
        }
    }
    let counters = s.shared().counters.snapshot();
    assert!(
        fetched,
        "no FETCH reached the producer in 20 s while another store's queue was full \
         (store: {counters:?})"
    );
    drop((peer, producer));
    s.close().unwrap();
}

/// The sync thread ending (a panic in a sync) was not noticed: its sync
/// stayed "in flight" for good, so nothing more became durable or ACKed, and
/// the store reported no error. It is reported now.
#[test]
fn a_sync_thread_that_died_is_reported() {
    use _native::log::IoOp;
    use std::sync::atomic::AtomicBool;
    let dir = tempfile::tempdir().unwrap();
    let armed = std::sync::Arc::new(AtomicBool::new(false));
    let a = armed.clone();
    let mut cfg = StoreConfig::default();
    cfg.log.failpoint = Some(std::sync::Arc::new(move |op, _| {
        let on_syncer = std::thread::current().name() == Some("dafka-store-sync");
        if op == IoOp::Sync && on_syncer && a.load(SeqCst) {
            panic!("injected: the sync thread dies");
        }
        Ok(())
    }));
    let s = Store::open(dir.path(), cfg).unwrap();
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send(value(0), None).unwrap();
    assert_eq!(
        p.flush(Duration::from_secs(30)).unwrap(),
        0,
        "synced before"
    );
    armed.store(true, SeqCst);
    p.send(value(1), None).unwrap();
    wait_for(
        "the dead sync thread reported",
        Duration::from_secs(30),
        || {
            s.shared()
                .last_error
                .lock()
                .unwrap()
                .as_deref()
                .is_some_and(|e| e.contains("sync thread stopped"))
        },
    );
    assert_eq!(p.acked_offset(), Some(0), "nothing more is acknowledged");
    p.close().unwrap();
}

/// `close_after` waits for the store's ACKs of what was sent (no `flush`
/// first), and says what it leaves when no store ACKs; a producer of the
/// same seed learns where the partition ends ([`producer::partition_next`])
/// and goes on from there, so the store holds both runs' records in order.
#[test]
fn closing_waits_for_acks_and_a_seeded_producer_goes_on_where_its_partition_ends() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, node) = tower_and_node();
    let s = discovering_store(dir.path(), &node);
    let check = || Ok::<(), _native::error::Error>(());
    let seeded = |first_offset| ProducerConfig {
        node: node.clone(),
        address_seed: Some(b"svc".to_vec()),
        first_offset,
        ..Default::default()
    };
    let first = producer::partition_next(&node, "t", b"svc", Duration::from_secs(60), check);
    assert_eq!(first.unwrap(), 0, "a new partition");
    let p = Producer::new("t", seeded(0)).unwrap();
    for i in 0..100 {
        p.send(value(i), None).unwrap();
    }
    assert_eq!(p.close_after(Duration::from_secs(60), check).unwrap(), 0);
    let next = producer::partition_next(&node, "t", b"svc", Duration::from_secs(60), check);
    assert_eq!(next.unwrap(), 100);
    let again = Producer::new("t", seeded(100)).unwrap();
    assert_eq!(again.address(), p.address());
    for i in 100..150 {
        again.send(value(i), None).unwrap();
    }
    assert_eq!(
        again.close_after(Duration::from_secs(60), check).unwrap(),
        0
    );
    assert_holds_values(&s, 150);
    s.close().unwrap();
    // No store: what is left is returned, after the wait.
    let lonely = producer(1, &[]);
    lonely.send(value(0), None).unwrap();
    assert_eq!(
        lonely
            .close_after(Duration::from_millis(100), check)
            .unwrap(),
        1
    );
}
