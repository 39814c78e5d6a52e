//! Socket-level store tests on 127.0.0.1 ephemeral ports: durable ACKs, a late
//! consumer served by the store alone, restart with the same identity, a
//! second store catching up from the first, and live records reaching a store
//! in order. Storage faults: `store_faults.rs`; reads by the fetcher and
//! retention: `store_retention.rs`; the socket side: `store_sockets.rs`.

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use _native::node::store::{Store, StoreConfig};
use _native::node::*;

mod common;
use common::stores::*;
use common::{consume, wait_for};

/// A setting refused at open leaves nothing on disk: the node's settings are
/// checked before the store's directory, `store.id` and log are made.
#[test]
fn a_refused_node_setting_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s");
    let cfg = StoreConfig {
        node: NodeConfig {
            advertise_host: Some("tcp://10.0.0.5".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let e = Store::open(&path, cfg).err().expect("refused");
    assert!(e.to_string().contains("advertise_host"), "{e}");
    assert!(!path.exists());
}

#[test]
fn store_acks_durably_and_serves_a_late_consumer_alone() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), &[]);
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    let n = 20_000u32;
    p.send_many((0..n).map(value).collect(), None).unwrap();
    let left = p.flush(Duration::from_secs(30)).unwrap();
    assert_eq!(
        (left, p.acked_offset()),
        (0, Some(u64::from(n) - 1)),
        "store {:?} {:?} {:?}; producer {:?}",
        s.shared().counters.snapshot(),
        s.shared().stats.snapshot(),
        s.shared().last_error.lock().unwrap(),
        p.stats().snapshot()
    );
    // The ACKs waited for group commits, and the handle sees their timings.
    let syncs = s.shared().sync_times.as_ref().unwrap().snapshot();
    assert!(syncs.count >= 1, "{syncs:?}");
    assert_eq!(syncs.buckets.iter().sum::<u64>(), syncs.count, "{syncs:?}");
    assert!(syncs.max_micros <= syncs.micros, "{syncs:?}");
    let heads = s.heads(Some(b"t".to_vec())).unwrap();
    assert_eq!(heads.len(), 1);
    assert_eq!(heads[0].0 .1, p.address().as_bytes());
    assert_eq!(heads[0].1, u64::from(n));
    p.close().unwrap();
    drop(p);

    let c = late_consumer(&s);
    let got = consume(&c, n as usize, Duration::from_secs(60));
    assert_eq!(
        got.len(),
        n as usize,
        "consumer stats {:?}",
        c.stats().snapshot()
    );
    for (i, d) in got.iter().enumerate() {
        assert_eq!(d.offset, i as u64);
        assert_eq!(d.value(), value(i as u32));
    }
    // Its producer gone (silent past the ACK-repeat window), the partition
    // keeps no protocol state in the store: the log holds all there is.
    wait_for(
        "the store to forget the partition",
        Duration::from_secs(30),
        || s.shared().active_partitions.load(SeqCst) == 0,
    );
    c.close().unwrap();
    s.close().unwrap();
}

#[test]
fn restarted_store_keeps_its_identity_and_records() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), &[]);
    let address = s.address().to_string();
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send_many((0..500).map(value).collect(), None).unwrap();
    p.flush(Duration::from_secs(30)).unwrap();
    s.close().unwrap();
    drop(s);
    // Closed cleanly: the next open need not sync its log.
    let mark = dir.path().join("log").join(_native::log::CLEAN_FILE);
    assert!(mark.exists());

    let s = store(dir.path(), &[p.endpoint()]);
    assert!(!mark.exists());
    assert_eq!(s.address(), address);
    assert_eq!(s.heads(None).unwrap()[0].1, 500);
    // The producer reconnects to the new endpoint and carries on.
    p.connect(s.endpoint()).unwrap();
    p.send_many((500..600).map(value).collect(), None).unwrap();
    p.flush(Duration::from_secs(30)).unwrap();
    assert_eq!(s.heads(None).unwrap()[0].1, 600);
    p.close().unwrap();
    s.close().unwrap();
}

#[test]
fn late_store_catches_up_from_the_other_store_with_min_acks_two() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = store(d1.path(), &[]);
    let p = producer(2, &[a.endpoint()]);
    a.connect(p.endpoint()).unwrap();
    p.send_many((0..3000).map(value).collect(), None).unwrap();
    // Only one store: nothing is released.
    wait_for(
        "store A to hold everything",
        Duration::from_secs(30),
        || a.heads(None).unwrap().first().map(|h| h.1) == Some(3000),
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(p.acked_offset(), None, "released before two stores ACKed");

    // Store B joins late, hears the producer's HEAD and fetches the history
    // from the producer and store A.
    let b = store(d2.path(), &[a.endpoint(), p.endpoint()]);
    a.connect(b.endpoint()).unwrap();
    p.connect(b.endpoint()).unwrap();
    p.flush(Duration::from_secs(60)).unwrap();
    assert_eq!(p.acked_offset(), Some(2999));
    assert_eq!(b.heads(None).unwrap()[0].1, 3000);
    for s in [&a, &b] {
        let recs = s
            .query(|log| {
                let log = log.log().unwrap();
                log.read(b"t", &log.partitions(None)[0].partition, 0, 5000, 1 << 30)
            })
            .unwrap()
            .unwrap();
        assert_eq!(recs.len(), 3000);
        assert!(recs
            .iter()
            .enumerate()
            .all(|(i, r)| r.value == value(i as u32)));
    }
    p.close().unwrap();
    a.close().unwrap();
    b.close().unwrap();
}

#[test]
fn store_replicates_from_another_store_after_the_producers_are_gone() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = store(d1.path(), &[]);
    // Two producers (two partitions) write to store A and exit.
    let mut names = Vec::new();
    for _ in 0..2 {
        let p = producer(1, &[a.endpoint()]);
        a.connect(p.endpoint()).unwrap();
        p.send_many((0..2000).map(value).collect(), None).unwrap();
        assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
        names.push(p.address().to_string());
        p.close().unwrap();
    }
    // A new, empty store B joins with no producer left: it learns the
    // partitions from store A's heads and fetches them from A.
    let b = store(d2.path(), &[a.endpoint()]);
    a.connect(b.endpoint()).unwrap();
    let heads = |s: &Store| {
        let mut h = s.heads(None).unwrap();
        h.sort();
        h
    };
    wait_for("store B to match store A", Duration::from_secs(60), || {
        heads(&b) == heads(&a)
    });
    assert_eq!(heads(&b).len(), 2);
    for name in &names {
        let read = |s: &Store| {
            let name = name.clone();
            s.query(move |log| log.log().unwrap().read(b"t", &name, 0, 5000, 1 << 30))
                .unwrap()
                .unwrap()
        };
        let (ra, rb) = (read(&a), read(&b));
        assert_eq!(rb.len(), 2000);
        assert!(ra
            .iter()
            .zip(&rb)
            .all(|(x, y)| x.offset == y.offset && x.value == y.value));
    }
    a.close().unwrap();
    b.close().unwrap();
}

// A store away for longer than retention: its peer deleted the records it
// missed, and its own retention what it held. It skips the gap and catches
// up from the peer's first record, instead of fetching forever.
#[test]
fn a_store_back_after_its_peer_deleted_what_it_missed_skips_the_gap() {
    use _native::log::LogConfig;
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let small = LogConfig {
        segment_bytes: 4096,
        ..StoreConfig::default().log
    };
    // Discovery, so that each node finds whichever others are up.
    let (t, node) = tower_and_node();
    let open = |dir: &std::path::Path| {
        Store::open(
            dir,
            StoreConfig {
                node: node.clone(),
                log: small.clone(),
                ..Default::default()
            },
        )
        .unwrap()
    };
    let a = open(d1.path());
    let p = discovering_producer(&node);
    p.send_many((0..500).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
    let part = p.address().to_string();
    a.close().unwrap();
    // Store B takes the rest while A is away; then retention deletes all B
    // holds of what A missed.
    let b = open(d2.path());
    p.send_many((500..3000).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
    p.close().unwrap();
    b.close().unwrap();
    let first = retain_8_kib(d2.path(), &small, &part);
    assert!(first > 500, "{first}");
    // A was away longer than retention: what it held is past its age too.
    let later: _native::log::Clock = std::sync::Arc::new(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        now.unwrap().as_millis() as u64 + 2 * 3_600_000
    });
    let aged = LogConfig {
        retain_hours: Some(1),
        clock: later,
        ..small.clone()
    };
    let mut log = _native::log::Log::open(d1.path().join("log"), aged).unwrap();
    assert!(log.enforce_retention().unwrap() > 0);
    assert_eq!(log.first_offset(b"t", &part), Some(500));
    assert_eq!(log.next_offset(b"t", &part), Some(500));
    log.close().unwrap();

    let b = open(d2.path());
    let a = open(d1.path());
    let held = |s: &Store| {
        let part = part.clone();
        s.query(move |l| {
            let log = l.log().unwrap();
            (log.first_offset(b"t", &part), log.next_offset(b"t", &part))
        })
        .unwrap()
    };
    wait_for(
        "store A to skip to store B's records",
        Duration::from_secs(60),
        || held(&a) == (Some(first), Some(3000)),
    );
    // The handle's copy of the counters is refreshed after the turn that
    // skipped, which a query can see first.
    let skipped = || a.shared().counters.snapshot().records_skipped;
    wait_for("the skip to be counted", Duration::from_secs(60), || {
        skipped() != 0
    });
    assert_eq!(skipped(), first - 500);
    let read = |s: &Store| {
        let part = part.clone();
        s.query(move |l| l.log().unwrap().read(b"t", &part, first, 5000, 1 << 30))
            .unwrap()
            .unwrap()
    };
    // `next_offset` counts appends still in the log's write buffer, which
    // reads see only once written: wait for them (under load the buffer was
    // read empty right after `held` showed 3000).
    wait_for(
        "store A's records to be written",
        Duration::from_secs(60),
        || read(&a).len() as u64 == 3000 - first,
    );
    let (ra, rb) = (read(&a), read(&b));
    assert_eq!(ra.len() as u64, 3000 - first);
    assert!(ra
        .iter()
        .zip(&rb)
        .all(|(x, y)| x.offset == y.offset && x.value == y.value));
    a.close().unwrap();
    // After a restart it holds the same.
    let a = open(d1.path());
    assert_eq!(held(&a), (Some(first), Some(3000)));
    a.close().unwrap();
    b.close().unwrap();
    t.close().unwrap();
}

#[test]
fn live_records_reach_the_store_in_order_without_fetching() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), &[]);
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send(value(0), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
    let before = s.shared().counters.snapshot();
    p.send_many((1..2001).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
    let after = s.shared().counters.snapshot();
    assert_eq!(after.appended - before.appended, 2000);
    assert_eq!(
        (
            after.held - before.held,
            after.fetches_sent - before.fetches_sent
        ),
        (0, 0),
        "live records were held or fetched: {after:?}; producer {:?}",
        p.stats().snapshot()
    );
    p.close().unwrap();
    s.close().unwrap();
}

#[test]
fn a_producer_waits_for_a_store_and_its_first_records_need_no_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let p = producer(1, &[]);
    assert_eq!(p.stores_seen(), 0);
    assert_eq!(
        p.wait_for_stores(1, Duration::from_millis(300)).unwrap(),
        0,
        "no store yet: the wait times out"
    );
    let s = store(dir.path(), &[p.endpoint()]);
    p.connect(s.endpoint()).unwrap();
    assert_eq!(p.wait_for_stores(1, Duration::from_secs(10)).unwrap(), 1);
    // Subscribed before the first record: every record arrives live.
    p.send_many((0..2000).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
    let c = s.shared().counters.snapshot();
    assert_eq!((c.appended, c.fetches_sent), (2000, 0), "{c:?}");
    // A second store counts while it is connected, and not once it left.
    let dir2 = tempfile::tempdir().unwrap();
    let s2 = store(dir2.path(), &[p.endpoint()]);
    assert_eq!(p.wait_for_stores(2, Duration::from_secs(10)).unwrap(), 2);
    s2.close().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while p.stores_seen() != 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(p.stores_seen(), 1, "the store that closed is not counted");
    p.close().unwrap();
    s.close().unwrap();
}

/// Records published before a store's subscriptions reached the producer
/// never reach it; a store's GET-HEADS never reaches producers, and this
/// producer's HEADs are ten minutes apart: it tells a store its head as the
/// store connects, and the store fetches them.
#[test]
fn a_store_connecting_late_hears_of_records_published_before() {
    let dir = tempfile::tempdir().unwrap();
    let p = Producer::new(
        "t",
        ProducerConfig {
            min_acks: 1,
            head_interval: Duration::from_secs(600),
            ..Default::default()
        },
    )
    .unwrap();
    p.send_many((0..10).map(value).collect(), None).unwrap();
    let s = store(dir.path(), &[p.endpoint()]);
    p.connect(s.endpoint()).unwrap();
    assert_eq!(
        p.flush(Duration::from_secs(20)).unwrap(),
        0,
        "store {:?}",
        s.shared().counters.snapshot()
    );
    assert_holds_values(&s, 10);
    p.close().unwrap();
    s.close().unwrap();
}

// Records of several partitions arriving interleaved within one loop turn
// (two producers, fair-queued by the SUB socket) are gathered per partition
// and written in order; mid-turn offsets and partitions already count them.
#[test]
fn interleaved_partitions_are_gathered_per_partition() {
    use _native::node::store::DurableLog;
    use _native::node::store::StoreLog;
    let dir = tempfile::tempdir().unwrap();
    let mut log = DurableLog::open(dir.path(), StoreConfig::default().log).unwrap();
    let (a, b) = (
        b"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        b"BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
    );
    // The store's log holds bodies (metadata, value).
    let body = |v: String| {
        let mut out = Vec::new();
        _native::meta::wrap(&mut out, Some(1), v.as_bytes());
        out
    };
    for i in 0..100u64 {
        log.append(b"t", a, i, &body(format!("a{i}"))).unwrap();
        log.append(b"t", b, 7 + i, &body(format!("b{i}"))).unwrap();
        assert_eq!(log.next_offset(b"t", a), Some(i + 1));
        assert_eq!(log.next_offset(b"t", b), Some(8 + i));
    }
    assert_eq!(log.first_offset(b"t", b), Some(7));
    let mut parts = log.partitions(None);
    parts.sort();
    assert_eq!(
        parts,
        vec![(b"t".to_vec(), a.to_vec()), (b"t".to_vec(), b.to_vec())]
    );
    // Out of order for one partition: refused, nothing gathered is lost.
    assert!(log.append(b"t", a, 50, &body("x".into())).is_err());
    log.append(b"t", a, 100, &body("a100".into())).unwrap();
    log.sync_all().unwrap();
    let read = |p: &[u8], from| log.read(b"t", p, from, 1000, 1 << 20).unwrap();
    let ra = read(a, 0);
    assert_eq!(ra.len(), 101);
    assert!(ra
        .iter()
        .enumerate()
        .all(|(i, (o, v))| *o == i as u64 && *v == body(format!("a{i}"))));
    let rb = read(b, 7);
    assert_eq!(rb.len(), 100);
    assert!(rb
        .iter()
        .enumerate()
        .all(|(i, (o, v))| *o == 7 + i as u64 && *v == body(format!("b{i}"))));
    assert_eq!(log.durable_next(b"t", a), Some(101));
    assert_eq!(log.durable_next(b"t", b), Some(107));
}

/// The only store is away (restarting) while a consumer starts `earliest`: the
/// live producer holds only what the store has not ACKed yet, and must not
/// answer the consumer's FETCH for the history from past it, or the consumer
/// would give the history up as deleted. It waits, and gets every record once
/// the store is back.
#[test]
fn a_consumer_waits_for_a_store_that_is_away_instead_of_skipping_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), &[]);
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send_many((0..1000).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
    s.close().unwrap();
    drop(s);

    let retry = Duration::from_millis(100);
    let c = Consumer::new(
        &["t".to_string()],
        ConsumerConfig {
            offset_reset: OffsetReset::Earliest,
            node: peers(&[p.endpoint()]),
            fetch_retry: retry,
            ..Default::default()
        },
    )
    .unwrap();
    p.connect(c.endpoint()).unwrap();
    // Held by the producer (no store to ACK them): the consumer sees the
    // partition and FETCHes 0.. from the producer alone.
    p.send_many((1000..1010).map(value).collect(), None)
        .unwrap();
    wait_for("the consumer's FETCHes", Duration::from_secs(20), || {
        p.stats().fetches_received.load(SeqCst) >= 3
    });
    // Well past the point where the consumer gives a gap up (give_up_fetches
    // retries): nothing skipped, nothing delivered out of order.
    let give_up = retry * ConsumerConfig::default().give_up_fetches;
    let early = consume(&c, 1, give_up * 4);
    assert!(
        early.is_empty(),
        "delivered {:?} before the history; consumer {:?}",
        early.first().map(|d| d.offset),
        c.stats().snapshot()
    );
    // The wait shows in the stats.
    assert_eq!(c.stats().stalled_partitions.load(SeqCst), 1);

    let s = store(dir.path(), &[p.endpoint(), c.endpoint()]);
    p.connect(s.endpoint()).unwrap();
    c.connect(s.endpoint()).unwrap();
    let got = consume(&c, 1010, Duration::from_secs(60));
    let offsets: Vec<u64> = got.iter().map(|d| d.offset).collect();
    assert_eq!(
        offsets,
        (0..1010).collect::<Vec<u64>>(),
        "{:?}",
        c.stats().snapshot()
    );
    assert!(got.iter().all(|d| d.value() == value(d.offset as u32)));
    assert_eq!(c.stats().records_lost.load(SeqCst), 0);
    assert_eq!(c.stats().stalled_partitions.load(SeqCst), 0);
    c.close().unwrap();
    p.close().unwrap();
    s.close().unwrap();
}
