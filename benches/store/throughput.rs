//! Producer → store throughput until everything is durably ACKed, and the
//! store's per-record code alone (`logic`).

use std::path::Path;
use std::time::{Duration, Instant};

use _native::log::{FsyncPolicy, LogConfig};
use _native::node::store::{DurableLog, StoreLog, StoreState, StoreStateConfig};
use _native::node::{Producer, ProducerConfig, Store, StoreConfig};

use crate::util::*;

pub(crate) fn start_pair(dir: &Path) -> (Store, Producer) {
    start_pair_with(dir, FsyncPolicy::Interval)
}

/// [`start_pair`] with the store's fsync policy.
pub(crate) fn start_pair_with(dir: &Path, fsync: FsyncPolicy) -> (Store, Producer) {
    let mut cfg = StoreConfig::default();
    cfg.log.flush_interval_ms = flush_ms();
    cfg.log.fsync = fsync;
    let s = Store::open(dir, cfg).unwrap();
    let p = add_producer(&s);
    (s, p)
}

/// A producer of topic `t` the store has heard (its first record ACKed).
pub(crate) fn add_producer(s: &Store) -> Producer {
    add_producer_with(s, false)
}

/// [`add_producer`], publishing RECORD-BATCHes if `batches`.
pub(crate) fn add_producer_with(s: &Store, batches: bool) -> Producer {
    let p = Producer::new(
        "t",
        ProducerConfig {
            node: peers(&[s.endpoint()]),
            max_unacked_bytes: 1 << 30,
            record_batches: batches,
            ..Default::default()
        },
    )
    .unwrap();
    s.connect(p.endpoint()).unwrap();
    // Wait until the store hears the producer (first record ACKed).
    p.send(vec![0u8; 8], None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
    p
}

/// Two producers (two partitions) sending at once into one store, until
/// everything is durably ACKed: their records reach the store interleaved.
pub(crate) fn durable_throughput_two(dir: &Path, n: u64, size: usize) -> Rate {
    let s = Store::open(dir, StoreConfig::default()).unwrap();
    let ps = [add_producer(&s), add_producer(&s)];
    let rate = Rate::measure(n, || {
        std::thread::scope(|scope| {
            for p in &ps {
                scope.spawn(|| {
                    send_n(p, n / 2, size);
                    assert_eq!(p.flush(Duration::from_secs(300)).unwrap(), 0);
                });
            }
        });
    });
    for p in ps {
        p.close().unwrap();
    }
    s.close().unwrap();
    rate
}

/// Sends `n` keyed records of `size` bytes (a 16 B key, two small headers),
/// 1000 at a time.
pub(crate) fn send_n_keyed(p: &Producer, n: u64, size: usize) {
    let value = vec![9u8; size];
    let headers: [(&str, &[u8]); 2] = [("trace", b"0af7651916cd43dd"), ("src", b"web")];
    let mut sent = 0;
    while sent < n {
        let k = 1000.min(n - sent);
        let mut b = _native::node::Batch::with_capacity(k as usize, k as usize * (size + 64));
        let now = _native::meta::now_ms();
        for _ in 0..k {
            b.push_body(now, Some(b"customer-0000042"), &headers, &value);
        }
        p.send_batch_with(b, None, || Ok::<(), _native::error::Error>(()))
            .unwrap();
        sent += k;
    }
}

/// Sends `n` records of `size` bytes with `send_many` of 1000 at a time.
pub(crate) fn send_n(p: &Producer, n: u64, size: usize) {
    let value = vec![9u8; size];
    let mut sent = 0;
    while sent < n {
        let k = 1000.min(n - sent);
        p.send_many((0..k).map(|_| value.clone()).collect(), None)
            .unwrap();
        sent += k;
    }
}

/// Producer → store, until everything is durably ACKed; in RECORD-BATCHes
/// if `batches`.
pub(crate) fn durable_throughput(dir: &Path, n: u64, size: usize, batches: bool) -> Rate {
    durable_throughput_of(dir, n, size, batches, false)
}

/// [`durable_throughput`], of keyed records if `keyed`.
pub(crate) fn durable_throughput_of(
    dir: &Path,
    n: u64,
    size: usize,
    batches: bool,
    keyed: bool,
) -> Rate {
    let mut cfg = StoreConfig::default();
    cfg.log.flush_interval_ms = flush_ms();
    let s = Store::open(dir, cfg).unwrap();
    let p = add_producer_with(&s, batches);
    let before = thread_cpu();
    let rate = Rate::measure(n, || {
        if keyed {
            send_n_keyed(&p, n, size);
        } else {
            send_n(&p, n, size);
        }
        let left = p.flush(Duration::from_secs(300)).unwrap();
        assert_eq!(left, 0, "store stats {:?}", s.shared().stats.snapshot());
    });
    print_thread_cpu("store", n, &before);
    if std::env::var_os("DAFKA_BENCH_VERBOSE").is_some() {
        println!("  store counters: {:?}", s.shared().counters.snapshot());
        println!("  producer stats: {:?}", p.stats().snapshot());
    }
    p.close().unwrap();
    s.close().unwrap();
    rate
}

/// The store's per-record code alone: `n` RECORDs of `size` bytes (already
/// decoded) through `StoreState::on_record` into a `DurableLog`, with the
/// loop's group commit and tick every 4096 records, then a final sync. CPU µs
/// per record of this thread (writes included; the syncer's fdatasyncs not).
pub(crate) fn logic_alone(dir: &Path, n: u64, size: usize) -> f64 {
    let log = DurableLog::open(dir, LogConfig::default()).unwrap();
    let mut logic = StoreState::new(b"S".repeat(32), log, StoreStateConfig::default());
    let content = vec![5u8; size];
    let addr = b"85E3C6EBDC7B4156AD9C43611EBC09CE";
    let t0 = own_cpu();
    let now = Instant::now();
    for i in 0..n {
        let out = logic.on_record(b"t", addr, i, &content, now);
        assert!(out.is_empty());
        if i % 4096 == 4095 {
            logic.log_mut().sync_if_due().unwrap();
            logic.tick(now);
        }
    }
    logic.log_mut().sync_all().unwrap();
    let cpu = own_cpu() - t0;
    assert_eq!(logic.counters().appended, n);
    cpu * 1e6 / n as f64
}
