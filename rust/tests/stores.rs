//! Socket-level store tests on 127.0.0.1 ephemeral ports: durable ACKs, a late
//! consumer served by the store alone, restart with the same identity, and a
//! second store catching up from the first.

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use _native::node::store::{Store, StoreConfig};
use _native::node::*;

mod common;
use common::{consume, tower, wait_for};

fn peers(eps: &[&str]) -> NodeConfig {
    NodeConfig {
        peers: eps.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn store(dir: &std::path::Path, eps: &[&str]) -> Store {
    Store::open(
        dir,
        StoreConfig {
            node: peers(eps),
            ..Default::default()
        },
    )
    .unwrap()
}

/// A store whose log fails an I/O operation with `errno` while `fails(op,
/// path)` says so.
fn failing_store(
    dir: &std::path::Path,
    errno: i32,
    fails: impl Fn(_native::log::IoOp, &std::path::Path) -> bool + Send + Sync + 'static,
) -> Store {
    let mut cfg = StoreConfig::default();
    cfg.log.failpoint = Some(std::sync::Arc::new(move |op, path: &std::path::Path| {
        if fails(op, path) {
            Err(std::io::Error::from_raw_os_error(errno))
        } else {
            Ok(())
        }
    }));
    Store::open(dir, cfg).unwrap()
}

/// A store whose log fails `ops` with `errno` while the flag is set, and
/// the flag.
fn store_failing_when(
    dir: &std::path::Path,
    errno: i32,
    ops: &'static [_native::log::IoOp],
) -> (Store, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let on = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let f = on.clone();
    let s = failing_store(dir, errno, move |op, _| f.load(SeqCst) && ops.contains(&op));
    (s, on)
}

/// Checks that the store's one partition holds `value(0..n)`.
fn assert_holds_values(s: &Store, n: usize) {
    let recs = s
        .query(move |log| {
            let log = log.log().unwrap();
            log.read(b"t", &log.partitions(None)[0].partition, 0, n + 1, 1 << 30)
        })
        .unwrap()
        .unwrap();
    assert_eq!(recs.len(), n);
    assert!(recs
        .iter()
        .enumerate()
        .all(|(i, r)| r.value == value(i as u32)));
}

/// Calls `each` (it keeps records coming) about every millisecond for
/// `secs`, checking that the store reports its error at every sample.
fn assert_error_stays(s: &Store, secs: u64, mut each: impl FnMut()) {
    let (mut samples, mut clear) = (0, 0);
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        each();
        samples += 1;
        if s.shared().last_error.lock().unwrap().is_none() {
            clear += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        clear, 0,
        "the error cleared at {clear} of {samples} samples"
    );
}

/// Once storage works again: everything ACKed, the error cleared, the
/// store's partition holding `value(0..n)`.
fn assert_resumes(s: &Store, p: &Producer, n: usize) {
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0, "resumed");
    wait_for("the error to clear", Duration::from_secs(20), || {
        s.shared().last_error.lock().unwrap().is_none()
    });
    assert_holds_values(s, n);
}

fn producer(min_acks: usize, eps: &[&str]) -> Producer {
    Producer::new(
        "t",
        ProducerConfig {
            node: peers(eps),
            min_acks,
            head_interval: Duration::from_millis(100),
            ..Default::default()
        },
    )
    .unwrap()
}

/// A consumer of topic `t` from the earliest offset, with `s` as its only
/// peer (and connected to by it).
fn late_consumer(s: &Store) -> Consumer {
    let c = Consumer::new(
        &["t".to_string()],
        ConsumerConfig {
            offset_reset: OffsetReset::Earliest,
            node: peers(&[s.endpoint()]),
            ..Default::default()
        },
    )
    .unwrap();
    s.connect(c.endpoint()).unwrap();
    c
}

fn value(i: u32) -> Vec<u8> {
    format!("record-{i}").into_bytes()
}

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
        s.shared().counters.lock().unwrap(),
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
    let skipped = a.shared().counters.lock().unwrap().records_skipped;
    assert_eq!(skipped, first - 500);
    let read = |s: &Store| {
        let part = part.clone();
        s.query(move |l| l.log().unwrap().read(b"t", &part, first, 5000, 1 << 30))
            .unwrap()
            .unwrap()
    };
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
fn disk_full_stops_acks_loses_nothing_and_resumes() {
    use _native::log::IoOp;

    let dir = tempfile::tempdir().unwrap();
    // ENOSPC
    let (s, full) = store_failing_when(dir.path(), 28, &[IoOp::Write, IoOp::Sync, IoOp::Create]);
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send_many((0..1000).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);

    full.store(true, SeqCst);
    p.send_many((1000..2000).map(value).collect(), None)
        .unwrap();
    wait_for(
        "the store to report the error",
        Duration::from_secs(20),
        || s.shared().last_error.lock().unwrap().is_some(),
    );
    let err = s.shared().last_error.lock().unwrap().clone().unwrap();
    assert!(
        err.contains("No space left") || err.contains("os error 28"),
        "{err}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        p.acked_offset(),
        Some(999),
        "nothing ACKed while the disk is full"
    );

    full.store(false, SeqCst);
    // The error clears a recovery period after the last failure.
    assert_resumes(&s, &p, 2000);
    p.close().unwrap();
    s.close().unwrap();
}

#[test]
fn a_failing_sync_stays_reported_until_a_sync_succeeds() {
    use _native::log::IoOp;

    // Writes succeed but every fdatasync fails (EIO: a dying disk). Records
    // reach the page cache all along; that is no reason to report the store
    // healthy, or to ACK, while nothing becomes durable.
    let dir = tempfile::tempdir().unwrap();
    let (s, failing) = store_failing_when(dir.path(), 5, &[IoOp::Sync]);
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send_many((0..100).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);

    failing.store(true, SeqCst);
    let mut sent = 100;
    p.send(value(sent), None).unwrap();
    sent += 1;
    wait_for("the sync error", Duration::from_secs(20), || {
        s.shared().last_error.lock().unwrap().is_some()
    });
    // Records keep coming through two recoveries (one a second).
    assert_error_stays(&s, 2, || {
        p.send(value(sent), None).unwrap();
        sent += 1;
    });
    assert!(
        p.acked_offset() < Some(100),
        "nothing ACKed past the failing syncs"
    );

    failing.store(false, SeqCst);
    assert_resumes(&s, &p, sent as usize);
    p.close().unwrap();
    s.close().unwrap();
}

#[test]
fn a_nearly_full_disk_stays_reported_though_some_appends_fit() {
    use _native::log::IoOp;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::sync::Arc;

    // ENOSPC on two writes of three: a disk with a little room now and then
    // (each recovery frees a torn tail). Appends that fit are no reason to
    // report the store healthy, even for a moment.
    let dir = tempfile::tempdir().unwrap();
    let full = Arc::new(AtomicBool::new(false));
    let (f, w) = (full.clone(), AtomicU64::new(0));
    let s = failing_store(dir.path(), 28, move |op, _| {
        f.load(SeqCst) && op == IoOp::Write && w.fetch_add(1, SeqCst) % 3 != 0
    });
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send_many((0..100).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);

    full.store(true, SeqCst);
    let mut sent = 100;
    let mut send = || {
        p.send_many((sent..sent + 10).map(value).collect(), None)
            .unwrap();
        sent += 10;
    };
    wait_for("the disk-full error", Duration::from_secs(20), || {
        send();
        std::thread::sleep(Duration::from_millis(1));
        s.shared().last_error.lock().unwrap().is_some()
    });
    assert_error_stays(&s, 3, send);

    full.store(false, SeqCst);
    assert_resumes(&s, &p, sent as usize);
    p.close().unwrap();
    s.close().unwrap();
}

#[test]
fn a_damaged_partition_does_not_keep_a_store_from_recovering_from_a_full_disk() {
    use _native::log::{IoOp, Log, LogConfig};
    use std::os::unix::fs::FileExt;

    let dir = tempfile::tempdir().unwrap();
    // A partition whose damage recovery refuses: a bad record, valid ones after.
    let logdir = dir.path().join(_native::node::store::LOG_DIR);
    let bad = "D".repeat(32);
    let mut log = Log::open(&logdir, LogConfig::default()).unwrap();
    let vals: Vec<Vec<u8>> = (0..50).map(value).collect();
    log.append_batch(b"t", &bad, 0, &vals).unwrap();
    log.close().unwrap();
    let pdir = logdir.join("t").join(&bad);
    let seg = pdir.join(format!("{:020}.log", 0));
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.write_all_at(b"\xff\xff", 200).unwrap();
    drop(f);
    std::fs::remove_file(seg.with_extension("index")).unwrap();

    // ENOSPC
    let (s, full) = store_failing_when(dir.path(), 28, &[IoOp::Write, IoOp::Sync, IoOp::Create]);
    wait_for(
        "the damaged partition in stats",
        Duration::from_secs(10),
        || s.shared().damaged_partitions.load(SeqCst) == 1,
    );
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send_many((0..1000).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
    full.store(true, SeqCst);
    p.send_many((1000..2000).map(value).collect(), None)
        .unwrap();
    wait_for(
        "the store to report the error",
        Duration::from_secs(20),
        || s.shared().last_error.lock().unwrap().is_some(),
    );
    full.store(false, SeqCst);
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0, "resumed");
    wait_for("the error to clear", Duration::from_secs(10), || {
        s.shared().last_error.lock().unwrap().is_none()
    });
    assert_eq!(
        s.shared().damaged_partitions.load(SeqCst),
        1,
        "still set aside"
    );
    p.close().unwrap();
    s.close().unwrap();
}

#[test]
fn a_partition_failing_to_append_does_not_hold_back_the_others() {
    use _native::log::IoOp;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let bad = producer(1, &[]);
    let bad_addr = bad.address().to_string();
    // EIO on the writes of `bad`'s partition only.
    let s = failing_store(dir.path(), 5, move |op, path| {
        op == IoOp::Write && path.to_string_lossy().contains(&bad_addr)
    });
    let good = producer(1, &[s.endpoint()]);
    bad.connect(s.endpoint()).unwrap();
    s.connect(bad.endpoint()).unwrap();
    s.connect(good.endpoint()).unwrap();
    // The failing partition's records arrive at nearly every turn.
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let streamer = std::thread::spawn(move || {
        let mut i = 0;
        while !stop2.load(SeqCst) {
            bad.send_many((i..i + 50).map(value).collect(), None)
                .unwrap();
            i += 50;
            std::thread::sleep(Duration::from_millis(1));
        }
        bad
    });
    std::thread::sleep(Duration::from_millis(300));
    good.send_many((0..5000).map(value).collect(), None)
        .unwrap();
    let left = good.flush(Duration::from_secs(20)).unwrap();
    stop.store(true, SeqCst);
    let bad = streamer.join().unwrap();
    assert_eq!(
        left,
        0,
        "the healthy partition is ACKed: {:?}",
        s.shared().counters
    );
    assert_eq!(good.acked_offset(), Some(4999));
    bad.close().unwrap();
    good.close().unwrap();
    s.close().unwrap();
}

#[test]
fn live_records_reach_the_store_in_order_without_fetching() {
    let dir = tempfile::tempdir().unwrap();
    let s = store(dir.path(), &[]);
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send(value(0), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
    let before = s.shared().counters.lock().unwrap().clone();
    p.send_many((1..2001).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
    let after = s.shared().counters.lock().unwrap().clone();
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
    let c = s.shared().counters.lock().unwrap().clone();
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
        s.shared().counters.lock().unwrap()
    );
    assert_holds_values(&s, 10);
    p.close().unwrap();
    s.close().unwrap();
}

// The bounded read client: heads from the store, an exact range spanning
// several FETCH windows, and a timeout when nothing answers.
#[test]
fn fetcher_reads_heads_and_exact_ranges_from_a_store() {
    use _native::error::Error;
    use _native::node::fetcher::{fetch_range, heads, offsets, Offsets};
    let dir = tempfile::tempdir().unwrap();
    let (t, node) = tower_and_node();
    let s = discovering_store(dir.path(), &node);
    let p = discovering_producer(&node);
    p.send_many((0..25_000).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(60)).unwrap(), 0);
    let part = p.address().to_string();
    p.close().unwrap();

    let secs = Duration::from_secs;
    let ok = || Ok::<(), Error>(());
    let h = heads(&node, "t", secs(20), Duration::from_millis(300), ok).unwrap();
    assert_eq!(
        h.into_iter().collect::<Vec<_>>(),
        vec![(part.clone(), 25_000)]
    );
    let o = offsets(
        &node,
        "t",
        None,
        &[],
        secs(20),
        Duration::from_millis(300),
        ok,
    )
    .unwrap();
    let all = Offsets {
        first: 0,
        next: 25_000,
    };
    assert_eq!(o.into_iter().collect::<Vec<_>>(), vec![(part.clone(), all)]);
    let got = fetch_range(&node, "t", &part, 100, 20_100, secs(30), true, ok).unwrap();
    assert!(got.lost.is_empty());
    assert_eq!(got.records.len(), 20_000);
    assert!(got
        .records
        .iter()
        .enumerate()
        .all(|(i, (o, b))| *o == 100 + i as u64
            && _native::meta::value_of(b).unwrap() == value(100 + i as u32)));
    let empty = fetch_range(&node, "t", &part, 7, 7, secs(1), true, ok).unwrap();
    assert!(empty.records.is_empty());
    s.close().unwrap();

    let err = fetch_range(
        &node,
        "t",
        &part,
        0,
        10,
        Duration::from_millis(700),
        true,
        ok,
    )
    .expect_err("no store left to answer");
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    let err = heads(&node, "t", Duration::from_millis(700), secs(1), ok)
        .expect_err("no store left to answer");
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    t.close().unwrap();
}

/// Retention of 8 KiB per partition applied to the log of the (closed) store
/// in `dir` with `cfg`: deletes the oldest segments of `part` of topic `t`;
/// returns its first offset held.
fn retain_8_kib(dir: &std::path::Path, cfg: &_native::log::LogConfig, part: &str) -> u64 {
    let mut log = _native::log::Log::open(
        dir.join("log"),
        _native::log::LogConfig {
            retain_bytes: Some(8192),
            ..cfg.clone()
        },
    )
    .unwrap();
    assert!(log.enforce_retention().unwrap() > 0);
    let first = log.first_offset(b"t", part).unwrap();
    log.close().unwrap();
    first
}

/// A producer of topic `t` that finds stores through `node`'s towers.
fn discovering_producer(node: &NodeConfig) -> Producer {
    Producer::new(
        "t",
        ProducerConfig {
            node: node.clone(),
            ..Default::default()
        },
    )
    .unwrap()
}

/// A store in `dir` that discovers through `node`'s towers.
fn discovering_store(dir: &std::path::Path, node: &NodeConfig) -> Store {
    Store::open(
        dir,
        StoreConfig {
            node: node.clone(),
            ..Default::default()
        },
    )
    .unwrap()
}

/// A tower on ephemeral ports and a node config that discovers through it
/// (reads with the fetcher need discovery: stores connect to the client).
fn tower_and_node() -> (Tower, NodeConfig) {
    let t = tower();
    let node = NodeConfig {
        towers: vec![t.endpoint()],
        beacon_interval: Duration::from_millis(100),
        beacon_timeout: Duration::from_millis(2000),
        ..Default::default()
    };
    (t, node)
}

#[test]
fn fetcher_reports_a_range_that_retention_deleted_entirely() {
    use _native::error::Error;
    use _native::log::LogConfig;
    use _native::node::fetcher::{fetch_range, offsets, Offsets};
    let dir = tempfile::tempdir().unwrap();
    let (t, node) = tower_and_node();
    let small = LogConfig {
        segment_bytes: 4096,
        ..StoreConfig::default().log
    };
    let store = |node: &NodeConfig| {
        Store::open(
            dir.path(),
            StoreConfig {
                node: node.clone(),
                log: small.clone(),
                ..Default::default()
            },
        )
        .unwrap()
    };
    let s = store(&node);
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send_many((0..2000).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(60)).unwrap(), 0);
    let part = p.address().to_string();
    p.close().unwrap();
    s.close().unwrap();
    // Retention deletes the oldest segments while the store is down.
    let first = retain_8_kib(dir.path(), &small, &part);
    assert!(first > 50, "{first}");
    let s = store(&node);

    // Every record of [0, 50) is gone: the store answers from `first`, past
    // the range, so the reader knows instead of timing out.
    let secs = Duration::from_secs;
    let ok = || Ok::<(), Error>(());
    // Where "earliest" now begins.
    let settle = Duration::from_millis(300);
    let o = offsets(&node, "t", None, &[], secs(20), settle, ok).unwrap();
    assert_eq!(o[&part], Offsets { first, next: 2000 });
    let (x, me) = (["x".to_string()], [part.clone()]);
    for (only, exclude) in [(Some(&x[..]), &[][..]), (None, &me[..])] {
        let o = offsets(&node, "t", only, exclude, secs(20), settle, ok).unwrap();
        let unprobed = Offsets {
            first: 0,
            next: 2000,
        };
        assert_eq!(o[&part], unprobed);
    }
    let err = fetch_range(&node, "t", &part, 0, 50, secs(30), true, ok).unwrap_err();
    assert!(matches!(err, Error::DataLoss { .. }), "{err}");
    let got = fetch_range(&node, "t", &part, 0, 50, secs(30), false, ok).unwrap();
    assert_eq!((got.lost, got.records.len()), (vec![(0, 50)], 0));
    // A range reaching past `first`: the rest is read.
    let got = fetch_range(&node, "t", &part, 0, first + 10, secs(30), false, ok).unwrap();
    assert_eq!(got.lost, vec![(0, first)]);
    assert_eq!(got.records.len(), 10);
    s.close().unwrap();
    t.close().unwrap();
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

/// A store whose partition retention emptied parks it (no directory left),
/// keeps ACKing and serving from where it stood when its producer writes
/// again, and after a restart still knows where that was.
#[test]
fn a_store_parks_a_partition_retention_emptied_and_goes_on_from_its_offset() {
    use std::sync::atomic::AtomicU64;
    let dir = tempfile::tempdir().unwrap();
    let now = std::sync::Arc::new(AtomicU64::new(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64,
    ));
    let open = |now: &std::sync::Arc<AtomicU64>| {
        let c = now.clone();
        let mut cfg = StoreConfig::default();
        cfg.log.retain_hours = Some(1);
        cfg.log.retention_check_ms = 20;
        cfg.log.clock = std::sync::Arc::new(move || c.load(SeqCst));
        Store::open(dir.path(), cfg).unwrap()
    };
    let s = open(&now);
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send_many((0..100).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
    let part = p.address().to_string();
    let pdir = dir.path().join("log").join("t").join(&part);
    assert!(pdir.exists());
    // Two hours later every record is past retention: parked.
    now.fetch_add(2 * 3_600_000, SeqCst);
    wait_for(
        "the partition to be parked",
        Duration::from_secs(30),
        || !pdir.exists(),
    );
    let held = |s: &Store| {
        let part = part.clone();
        s.query(move |l| {
            let log = l.log().unwrap();
            (
                log.first_offset(b"t", &part),
                log.next_offset(b"t", &part),
                log.parked_count(),
            )
        })
        .unwrap()
    };
    assert_eq!(held(&s), (Some(100), Some(100), 1));
    // No head to tell for it (GET-HEADS answers walk held partitions only).
    assert!(s.heads(None).unwrap().is_empty());
    wait_for("the stats to count it", Duration::from_secs(10), || {
        s.shared().parked_partitions.load(SeqCst) == 1
    });
    // The producer writes again: the store goes on from 100 and ACKs.
    p.send_many((100..110).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
    assert_eq!(p.acked_offset(), Some(109));
    assert_eq!(held(&s), (Some(100), Some(110), 0));
    assert!(pdir.exists());
    assert_eq!(s.heads(None).unwrap().len(), 1);
    p.close().unwrap();
    drop(p);
    // A late consumer gets what is left, from the store alone.
    let c = late_consumer(&s);
    let got = consume(&c, 10, Duration::from_secs(60));
    let offsets: Vec<u64> = got.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, (100..110).collect::<Vec<u64>>());
    c.close().unwrap();
    // Parked again, then restarted: it still stands at 110.
    now.fetch_add(2 * 3_600_000, SeqCst);
    wait_for(
        "the partition to be parked again",
        Duration::from_secs(30),
        || !pdir.exists(),
    );
    s.close().unwrap();
    let s = open(&now);
    assert_eq!(held(&s), (Some(110), Some(110), 1));
    s.close().unwrap();
}

#[test]
fn an_idle_store_without_peers_parks_many_expired_partitions_without_waiting_for_traffic() {
    use std::sync::atomic::AtomicU64;
    let dir = tempfile::tempdir().unwrap();
    // The log's clock: the real one plus `ahead` ms.
    let ahead = std::sync::Arc::new(AtomicU64::new(0));
    let a = ahead.clone();
    let mut cfg = StoreConfig::default();
    cfg.log.retain_hours = Some(1);
    cfg.log.retention_check_ms = 20;
    cfg.log.clock = std::sync::Arc::new(move || {
        let real = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        real + a.load(SeqCst)
    });
    // More partitions than one turn of the loop parks (256).
    let n = 600;
    let root = dir.path().join("log");
    let mut log = _native::log::Log::open(&root, cfg.log.clone()).unwrap();
    for i in 0..n {
        log.append(b"t", &format!("{i:032X}"), 0, b"x").unwrap();
    }
    log.close().unwrap();
    let s = Store::open(dir.path(), cfg).unwrap();
    let dirs = || std::fs::read_dir(root.join("t")).map_or(0, |d| d.count());
    // Past its start-up asks for heads (at 1 and 3 s) the store, with no
    // tower and no peer, wakes by itself once a minute only.
    std::thread::sleep(Duration::from_millis(3_500));
    assert_eq!(dirs(), n, "nothing expired yet");
    // Two hours later, one wake-up (a query is a command to its loop): it
    // parks a batch, and goes on by itself until every partition is parked.
    ahead.store(2 * 3_600_000, SeqCst);
    s.query(|_| ()).unwrap();
    wait_for(
        "every partition to be parked",
        Duration::from_secs(20),
        || dirs() == 0,
    );
    let parked = s.query(|l| l.log().unwrap().parked_count()).unwrap();
    assert_eq!(parked, n);
}

// ------------- the store's socket side (found by a review, session 21)

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
        sub.set_subscribe(&[b"D", address.as_bytes()].concat())
            .unwrap();
        for prefix in extra {
            sub.set_subscribe(prefix).unwrap();
        }
        sub.set_subscribe(&[b"L", address.as_bytes()].concat())
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
                if f == b"\x01F" {
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
                if f.first() == Some(&b'L') {
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
    let counters = s.shared().counters.lock().unwrap().clone();
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
    let served = || s.shared().counters.lock().unwrap().records_served;
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
    let peer = RawRequester::subscribed(&ctx, &s, &"1".repeat(32), &[b"F"]);
    peer.fetch(&part, 0, n as u32);
    wait_until_stalled(&s, n as u64);

    // A producer of partition X whose first records we missed: its HEAD
    // tells us, and we must FETCH them from it.
    let x = "B".repeat(32);
    let fetch_key = [b"F", x.as_bytes()].concat();
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
    let counters = s.shared().counters.lock().unwrap().clone();
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
