//! A busy producer beside 10,000 idle partitions (`parts`) or 10,000 idle
//! producers that are alive (`idle`).

use std::path::Path;
use std::time::{Duration, Instant};

use _native::node::store::StoreLog;
use _native::node::{Store, StoreConfig};
use _native::wire::FrameBuf;

use crate::{baseline::*, throughput::*, util::*};

/// A store that holds `idle` partitions of one record each (`size` bytes)
/// from raw producers (a PUB of this thread, left connected), until every
/// one is stored; and that PUB.
pub(crate) fn store_with_idle(
    dir: &Path,
    size: usize,
    idle: u64,
) -> (Store, zmq::Context, zmq::Socket) {
    let s = Store::open(dir, StoreConfig::default()).unwrap();
    let ctx = zmq::Context::new();
    let publ = ctx.socket(zmq::PUB).unwrap();
    publ.set_sndhwm(0).unwrap();
    publ.bind("tcp://127.0.0.1:*").unwrap();
    s.connect(&publ.get_last_endpoint().unwrap().unwrap())
        .unwrap();
    let mut buf = FrameBuf::new();
    let content = vec![1u8; size];
    let stored = || s.shared().counters.snapshot().appended;
    let deadline = Instant::now() + Duration::from_secs(120);
    // PUB drops what it sends before the store's SUB is connected: send
    // again (duplicates are ignored) until every partition is stored.
    while stored() < idle {
        assert!(
            Instant::now() < deadline,
            "the idle partitions were not stored"
        );
        for i in 0..idle {
            let addr = format!("{i:032X}");
            send_raw_record(&publ, &mut buf, addr.as_bytes(), 0, &content);
        }
        let wait = Instant::now() + Duration::from_secs(3);
        while stored() < idle && Instant::now() < wait {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // Until the group commit of the new partitions is over: the first sync of
    // ten thousand new partitions (a file, its index and three directories
    // each) takes seconds to tens of seconds on a busy disk, and a producer
    // added meanwhile waits for it (and for one more) before its first ACK:
    // what made its first `flush(30 s)` return 1 in most runs before. Not
    // what the benches measure (a busy partition beside idle ones).
    let durable_by = Instant::now() + Duration::from_secs(300);
    while !all_durable(&s) {
        assert!(
            Instant::now() < durable_by,
            "the idle partitions did not become durable"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (s, ctx, publ)
}

/// Whether every partition `s` holds is durable (its durable offset is its
/// next offset).
pub(crate) fn all_durable(s: &Store) -> bool {
    s.query(|l| {
        l.partitions(None)
            .iter()
            .all(|(t, p)| l.durable_next(t, p) == l.next_offset(t, p))
    })
    .unwrap()
}

/// One producer into a store that already knows `idle` other partitions
/// (producers that sent one record each and went quiet, as every finished
/// Spark task's does), until everything is durably ACKed.
pub(crate) fn durable_throughput_idle_parts(dir: &Path, n: u64, size: usize, idle: u64) -> Rate {
    let (s, _ctx, publ) = store_with_idle(dir, size, idle);
    drop(publ);
    // Past the ACK refresh window: the idle producers are silent.
    std::thread::sleep(Duration::from_secs(6));
    let p = add_producer(&s);
    let rate = Rate::measure(n, || {
        send_n(&p, n, size);
        assert_eq!(p.flush(Duration::from_secs(300)).unwrap(), 0);
    });
    p.close().unwrap();
    s.close().unwrap();
    rate
}

/// CPU seconds used so far by the store's threads (the loop and its syncer).
pub(crate) fn store_threads_cpu() -> f64 {
    thread_cpu()
        .values()
        .filter(|(name, _, _)| name.starts_with("dafka-store"))
        .map(|(_, secs, _)| secs)
        .sum()
}

/// One busy producer into a store that also hears `idle` other producers
/// that are alive but send nothing new: each partition holds one record,
/// ACKed, and its producer tells its HEAD every second (so the store repeats
/// its ACK and keeps its state). They write another topic (`u`): a producer
/// subscribes to its topic's ACKs, and ten thousand repeats a second on its
/// own would crowd out its ACKs (lossy sends to a full queue). Until
/// everything is durably ACKed; the rate, the process's CPU per record and
/// the store threads' own.
pub(crate) fn durable_throughput_live_idle(
    dir: &Path,
    n: u64,
    size: usize,
    idle: u64,
) -> (Rate, f64) {
    let (s, ctx, publ) = store_with_idle(dir, size, idle);
    drop(publ);
    // As `durable_throughput_idle_parts`: the busy producer joins a store
    // whose ACK repeats for the new partitions are over.
    std::thread::sleep(Duration::from_secs(6));
    let p = add_producer(&s);
    // The idle producers stay alive: a HEAD each per second, from a thread
    // of their own, for as long as the measurement runs.
    let publ = ctx.socket(zmq::PUB).unwrap();
    publ.set_sndhwm(0).unwrap();
    publ.bind("tcp://127.0.0.1:*").unwrap();
    s.connect(&publ.get_last_endpoint().unwrap().unwrap())
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopped = stop.clone();
    let heads = std::thread::spawn(move || {
        let mut buf = FrameBuf::new();
        let addrs: Vec<String> = (0..idle).map(|i| format!("{i:032X}")).collect();
        while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
            let next = Instant::now() + Duration::from_secs(1);
            for a in &addrs {
                send_raw_head(&publ, &mut buf, b"t", a.as_bytes(), 0);
            }
            while Instant::now() < next && !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    });
    // Two rounds of HEADs: every idle partition is known live to the store.
    std::thread::sleep(Duration::from_secs(2));
    let cpu0 = store_threads_cpu();
    let rate = Rate::measure(n, || {
        send_n(&p, n, size);
        assert_eq!(p.flush(Duration::from_secs(300)).unwrap(), 0);
    });
    let store_us = (store_threads_cpu() - cpu0) * 1e6 / n as f64;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    heads.join().unwrap();
    p.close().unwrap();
    s.close().unwrap();
    (rate, store_us)
}
