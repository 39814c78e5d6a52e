//! Reads by the bounded fetcher from a store, and retention: ranges deleted
//! entirely, partitions parked once retention emptied them.

use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use _native::node::store::{Store, StoreConfig};
use _native::node::*;

mod common;
use common::stores::*;
use common::{consume, wait_for};

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
