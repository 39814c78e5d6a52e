//! Store benchmarks (a plain main; `cargo bench --bench store`). In one run:
//!
//! - baselines: raw `zmq` PUB→SUB of the same RECORD frames (tcp loopback), and
//!   sequential `write` + `fdatasync` of the same bytes, as often as the store
//!   syncs (`flush_interval_ms`);
//! - producer → store throughput until every record is durably ACKed, 100 B and
//!   1 KiB records, one RECORD each and in RECORD-BATCHes (`record_batches`);
//! - ACK latency p50/p99 at fixed offered rates (100k and 500k records/s,
//!   after one second at that rate to warm up), next to the raw disk's: the
//!   same bytes written every 1 ms and fdatasynced as often as the store syncs,
//!   timed until a sync covers them; and, as a diagnostic of our own path
//!   apart from the disk, the store with `fsync = never` (ACK once written);
//! - the same with 10k idle partitions known to the store (`parts`), and
//!   with 10k idle partitions whose producers are alive, a HEAD each per
//!   second, beside one busy one: CPU per record of the busy one (`idle`);
//! - replay: a late consumer served by the store alone;
//! - store RSS while holding many records (`DAFKA_BENCH_RSS_RECORDS`, default 50M);
//! - the store's own per-record code without sockets (`logic`): decoded RECORDs
//!   into `StoreState` over the durable log, as its loop does, CPU per record.
//!
//! Data goes under `target/bench-store/` (or `DAFKA_BENCH_DIR`) and is removed.
//! `DAFKA_BENCH_FLUSH_MS` overrides the store's group-commit interval
//! (`flush_interval_ms`) for the throughput and latency parts.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use _native::log::{FsyncPolicy, Log, LogConfig};
use _native::node::stats::SyncTimes;
use _native::node::store::{DurableLog, StoreLog, StoreState, StoreStateConfig};
use _native::node::{
    Consumer, ConsumerConfig, NodeConfig, OffsetReset, Producer, ProducerConfig, Store, StoreConfig,
};
use _native::wire::{Dialect, FrameBuf, Head, Message, Record};

fn bench_dir(name: &str) -> PathBuf {
    let root = std::env::var_os("DAFKA_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/bench-store"));
    let d = root.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// CPU seconds (user + system) used by this process so far, and its context
/// switches: with the wall rate, CPU time per record shows cost even when other
/// work shares the cores.
fn usage() -> (f64, f64) {
    // SAFETY: getrusage only writes the struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        tv(ru.ru_utime) + tv(ru.ru_stime),
        (ru.ru_nvcsw + ru.ru_nivcsw) as f64,
    )
}

/// CPU seconds the calling thread has used.
fn own_cpu() -> f64 {
    // SAFETY: clock_gettime only writes the struct it is given.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts
    };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// CPU seconds per thread of this process, by thread id: (name, seconds).
fn thread_cpu() -> std::collections::BTreeMap<u64, (String, f64, f64)> {
    let tick = 100.0; // USER_HZ
    let mut out = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let rest: Vec<&str> = stat[close + 2..].split(' ').collect();
        // Fields 14 and 15 (utime, stime) are 12 and 13 after the comm.
        let t = |i: usize| {
            rest.get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let tid = e.file_name().to_string_lossy().parse().unwrap_or(0);
        // Context switches, voluntary and not.
        let switches: f64 = std::fs::read_to_string(e.path().join("status"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .sum();
        out.insert(tid, (name, (t(11) + t(12)) / tick, switches));
    }
    out
}

/// With `DAFKA_BENCH_VERBOSE`, prints CPU µs per record of each thread that
/// used some since `before`.
fn print_thread_cpu(
    label: &str,
    n: u64,
    before: &std::collections::BTreeMap<u64, (String, f64, f64)>,
) {
    if std::env::var_os("DAFKA_BENCH_VERBOSE").is_none() {
        return;
    }
    let parts: Vec<String> = thread_cpu()
        .into_iter()
        .filter_map(|(tid, (name, secs, sw))| {
            let used = secs - before.get(&tid).map_or(0.0, |b| b.1);
            let switched = sw - before.get(&tid).map_or(0.0, |b| b.2);
            (used > 0.0).then(|| {
                format!(
                    "{name}/{tid} {:.2} ({:.0})",
                    used * 1e6 / n as f64,
                    switched * 1e3 / n as f64
                )
            })
        })
        .collect();
    println!(
        "  {label} cpu-µs/rec (context switches per 1k records) by thread: {}",
        parts.join(", ")
    );
}

/// A measured run: records/s and CPU µs per record.
#[derive(Clone, Copy)]
struct Rate {
    per_sec: f64,
    cpu_us: f64,
    /// Context switches per 1000 records (voluntary + involuntary).
    switches_k: f64,
}

impl Rate {
    fn measure(n: u64, run: impl FnOnce()) -> Self {
        let (t0, (c0, s0)) = (Instant::now(), usage());
        run();
        let (c1, s1) = usage();
        Rate {
            per_sec: n as f64 / t0.elapsed().as_secs_f64(),
            cpu_us: (c1 - c0) * 1e6 / n as f64,
            switches_k: (s1 - s0) * 1e3 / n as f64,
        }
    }
}

fn peers(eps: &[&str]) -> NodeConfig {
    NodeConfig {
        peers: eps.iter().map(|s| s.to_string()).collect(),
        wire: match std::env::var("DAFKA_BENCH_WIRE").as_deref() {
            Ok("zproto") => Dialect::Zproto,
            _ => Dialect::Rfc,
        },
        ..Default::default()
    }
}

/// Publishes a RECORD of topic `t` as its three `rfc` frames on a raw socket.
fn send_raw_record(
    publ: &zmq::Socket,
    buf: &mut FrameBuf,
    address: &[u8],
    sequence: u64,
    content: &[u8],
) {
    send_raw_record_of(publ, buf, b"t", address, sequence, content);
}

/// [`send_raw_record`] of `topic`.
fn send_raw_record_of(
    publ: &zmq::Socket,
    buf: &mut FrameBuf,
    topic: &[u8],
    address: &[u8],
    sequence: u64,
    content: &[u8],
) {
    Message::Record(Record {
        topic,
        address,
        subject: topic,
        sequence,
        content,
    })
    .encode_into(Dialect::Rfc, buf)
    .unwrap();
    let mut frames = buf.header_frames();
    publ.send(frames.next().unwrap(), zmq::SNDMORE).unwrap();
    publ.send(frames.next().unwrap(), zmq::SNDMORE).unwrap();
    publ.send(content, 0).unwrap();
}

/// Raw zmq PUB→SUB of `n` RECORDs of `size` bytes in the rfc framing.
fn baseline_zmq(n: u64, size: usize) -> Rate {
    // Two contexts (two I/O threads), as a producer and a store in separate
    // processes have; one shared context measures ~40% slower here.
    let ctx = zmq::Context::new();
    let publ = ctx.socket(zmq::PUB).unwrap();
    publ.set_sndhwm(0).unwrap();
    publ.bind("tcp://127.0.0.1:*").unwrap();
    let ep = publ.get_last_endpoint().unwrap().unwrap();
    let ctx2 = zmq::Context::new();
    let sub = ctx2.socket(zmq::SUB).unwrap();
    sub.set_rcvhwm(0).unwrap();
    sub.set_subscribe(b"Mt").unwrap();
    sub.connect(&ep).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let reader = std::thread::spawn(move || {
        let mut m = zmq::Message::new();
        let mut got = 0u64;
        while got < n {
            sub.recv(&mut m, 0).unwrap();
            if !m.get_more() {
                got += 1;
            }
        }
        own_cpu()
    });
    let content = vec![7u8; size];
    let addr = b"85E3C6EBDC7B4156AD9C43611EBC09CE";
    let mut buf = FrameBuf::new();
    let before = thread_cpu();
    let rate = Rate::measure(n, || {
        for i in 0..n {
            send_raw_record(&publ, &mut buf, addr, i, &content);
        }
        let cpu = reader.join().unwrap();
        if std::env::var_os("DAFKA_BENCH_VERBOSE").is_some() {
            println!(
                "  raw zmq reader thread {:.2} cpu-µs/rec",
                cpu * 1e6 / n as f64
            );
        }
    });
    print_thread_cpu("raw zmq", n, &before);
    rate
}

/// Sequential write of `n` records' bytes (`size` + 24 header) in 1 MiB chunks,
/// fdatasync every [`flush_ms`]: records/s.
fn baseline_disk(dir: &Path, n: u64, size: usize) -> f64 {
    let path = dir.join("raw");
    let mut f = std::fs::File::create(&path).unwrap();
    let total = n as usize * (size + 24);
    let chunk = vec![1u8; 1 << 20];
    let t0 = Instant::now();
    let mut last_sync = t0;
    let mut written = 0;
    while written < total {
        let k = chunk.len().min(total - written);
        f.write_all(&chunk[..k]).unwrap();
        written += k;
        if last_sync.elapsed() >= Duration::from_millis(flush_ms()) {
            f.sync_data().unwrap();
            last_sync = Instant::now();
        }
    }
    f.sync_data().unwrap();
    let r = n as f64 / t0.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&path);
    r
}

/// The latency baseline: the same bytes as `ack_latency` offers (`rate`
/// records/s of `size` + 24 B, written every 1 ms) appended to a file by one
/// thread while another fdatasyncs every [`flush_ms`] (start to start), as the
/// store's group commit does. Per 1 ms write: the time until a sync that
/// covers it returned. No network, no CPU work: the floor the disk sets for
/// ACK latency in this run.
fn baseline_durable_latency(dir: &Path, rate: u64, secs: u64, size: usize) -> [f64; 4] {
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

    let path = dir.join("raw-latency");
    let f = std::fs::File::create(&path).unwrap();
    let chunk = vec![1u8; (rate / 1000) as usize * (size + 24)];
    let ticks = secs * 1000;
    let written = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    // (when the write ended, bytes written after it), per write.
    let mut writes: Vec<(Instant, u64)> = Vec::with_capacity(ticks as usize);
    // (when the sync returned, bytes it covers), per sync.
    let mut syncs: Vec<(Instant, u64)> = Vec::new();
    std::thread::scope(|scope| {
        let syncer = scope.spawn(|| {
            let mut out = Vec::new();
            while !stop.load(SeqCst) {
                let start = Instant::now();
                let covers = written.load(SeqCst);
                f.sync_data().unwrap();
                out.push((Instant::now(), covers));
                let next = start + Duration::from_millis(flush_ms());
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
            out
        });
        let t0 = Instant::now();
        let mut pos = 0u64;
        for i in 0..ticks {
            let due = t0 + Duration::from_millis(i);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            f.write_all_at(&chunk, pos).unwrap();
            pos += chunk.len() as u64;
            written.store(pos, SeqCst);
            writes.push((Instant::now(), pos));
        }
        // Let the last writes be covered.
        std::thread::sleep(Duration::from_millis(50));
        stop.store(true, SeqCst);
        syncs = syncer.join().unwrap();
    });
    let _ = std::fs::remove_file(&path);
    let mut lat = Vec::with_capacity(writes.len());
    let mut j = 0;
    for (at, end) in writes {
        while j < syncs.len() && (syncs[j].1 < end || syncs[j].0 < at) {
            j += 1;
        }
        match syncs.get(j) {
            Some((done, _)) => lat.push(done.duration_since(at).as_secs_f64() * 1e3),
            None => break,
        }
    }
    quantiles(lat)
}

/// p50, p99, p99.9 and max of `lat` (ms).
fn quantiles(mut lat: Vec<f64>) -> [f64; 4] {
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let q = |x: f64| lat[((lat.len() as f64 - 1.0) * x) as usize];
    [q(0.5), q(0.99), q(0.999), q(1.0)]
}

/// The store's per-record code alone: `n` RECORDs of `size` bytes (already
/// decoded) through `StoreState::on_record` into a `DurableLog`, with the
/// loop's group commit and tick every 4096 records, then a final sync. CPU µs
/// per record of this thread (writes included; the syncer's fdatasyncs not).
fn logic_alone(dir: &Path, n: u64, size: usize) -> f64 {
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

/// The store's group-commit interval in this run (its default, or
/// `DAFKA_BENCH_FLUSH_MS`); the raw-disk baselines fdatasync as often.
fn flush_ms() -> u64 {
    std::env::var("DAFKA_BENCH_FLUSH_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(StoreConfig::default().log.flush_interval_ms)
}

fn start_pair(dir: &Path) -> (Store, Producer) {
    start_pair_with(dir, FsyncPolicy::Interval)
}

/// [`start_pair`] with the store's fsync policy.
fn start_pair_with(dir: &Path, fsync: FsyncPolicy) -> (Store, Producer) {
    let mut cfg = StoreConfig::default();
    cfg.log.flush_interval_ms = flush_ms();
    cfg.log.fsync = fsync;
    let s = Store::open(dir, cfg).unwrap();
    let p = add_producer(&s);
    (s, p)
}

/// A producer of topic `t` the store has heard (its first record ACKed).
fn add_producer(s: &Store) -> Producer {
    add_producer_with(s, false)
}

/// [`add_producer`], publishing RECORD-BATCHes if `batches`.
fn add_producer_with(s: &Store, batches: bool) -> Producer {
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

/// A store that holds `idle` partitions of one record each (`size` bytes)
/// from raw producers (a PUB of this thread, left connected), until every
/// one is stored; and that PUB.
fn store_with_idle(dir: &Path, size: usize, idle: u64) -> (Store, zmq::Context, zmq::Socket) {
    let s = Store::open(dir, StoreConfig::default()).unwrap();
    let ctx = zmq::Context::new();
    let publ = ctx.socket(zmq::PUB).unwrap();
    publ.set_sndhwm(0).unwrap();
    publ.bind("tcp://127.0.0.1:*").unwrap();
    s.connect(&publ.get_last_endpoint().unwrap().unwrap())
        .unwrap();
    let mut buf = FrameBuf::new();
    let content = vec![1u8; size];
    let stored = || s.shared().counters.lock().unwrap().appended;
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
    (s, ctx, publ)
}

/// One producer into a store that already knows `idle` other partitions
/// (producers that sent one record each and went quiet, as every finished
/// Spark task's does), until everything is durably ACKed.
fn durable_throughput_idle_parts(dir: &Path, n: u64, size: usize, idle: u64) -> Rate {
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

/// Publishes a HEAD of `topic` (the partition's last offset) on a raw
/// socket, as a live producer does every second.
fn send_raw_head(
    publ: &zmq::Socket,
    buf: &mut FrameBuf,
    topic: &[u8],
    address: &[u8],
    sequence: u64,
) {
    Message::Head(Head {
        topic,
        address,
        subject: topic,
        sequence,
    })
    .encode_into(Dialect::Rfc, buf)
    .unwrap();
    let mut frames = buf.header_frames();
    publ.send(frames.next().unwrap(), zmq::SNDMORE).unwrap();
    publ.send(frames.next().unwrap(), 0).unwrap();
}

/// CPU seconds used so far by the store's threads (the loop and its syncer).
fn store_threads_cpu() -> f64 {
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
fn durable_throughput_live_idle(dir: &Path, n: u64, size: usize, idle: u64) -> (Rate, f64) {
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

/// Two producers (two partitions) sending at once into one store, until
/// everything is durably ACKed: their records reach the store interleaved.
fn durable_throughput_two(dir: &Path, n: u64, size: usize) -> Rate {
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
fn send_n_keyed(p: &Producer, n: u64, size: usize) {
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
fn send_n(p: &Producer, n: u64, size: usize) {
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
fn durable_throughput(dir: &Path, n: u64, size: usize, batches: bool) -> Rate {
    durable_throughput_of(dir, n, size, batches, false)
}

/// [`durable_throughput`], of keyed records if `keyed`.
fn durable_throughput_of(dir: &Path, n: u64, size: usize, batches: bool, keyed: bool) -> Rate {
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
        println!(
            "  store counters: {:?}",
            s.shared().counters.lock().unwrap()
        );
        println!("  producer stats: {:?}", p.stats().snapshot());
    }
    p.close().unwrap();
    s.close().unwrap();
    rate
}

/// Ticks (ms) sent at the offered rate before latencies count: a fresh store
/// and producer first grow their buffers, files and heaps.
const WARM_UP_TICKS: usize = 1000;
/// How often (µs) the sender looks at the ACKed offset between ticks: a
/// quarter-millisecond resolution, and rarely enough not to take the CPU the
/// nodes need (polling every 50 µs, the harness itself caused 30-140 ms
/// backlogs at 500k records/s on two cores).
const POLL_US: u64 = 250;

/// ACK latency at `rate` records/s offered for `secs` (after a warm-up of
/// [`WARM_UP_TICKS`] at the same rate): p50, p99, p99.9 and max in ms.
fn ack_latency(dir: &Path, rate: u64, secs: u64, size: usize, fsync: FsyncPolicy) -> [f64; 4] {
    let (s, p) = start_pair_with(dir, fsync);
    let value = vec![9u8; size];
    let tick = Duration::from_millis(1);
    let per_tick = rate / 1000;
    let ticks = secs * 1000 + WARM_UP_TICKS as u64;
    let base = p.next_offset();
    let before = thread_cpu();
    let mut sent_at: Vec<Instant> = Vec::with_capacity(ticks as usize);
    let mut lat = Vec::with_capacity(ticks as usize);
    let t0 = Instant::now();
    let mut next_check = 0usize;
    for i in 0..ticks {
        let due = t0 + tick * i as u32;
        while Instant::now() < due {
            // Record ACK arrival times while waiting for the next tick.
            let acked = p.acked_offset().unwrap_or(0);
            while next_check < sent_at.len()
                && acked >= base + (next_check as u64 + 1) * per_tick - 1
            {
                lat.push(sent_at[next_check].elapsed().as_secs_f64() * 1e3);
                next_check += 1;
            }
            std::thread::sleep(Duration::from_micros(POLL_US));
        }
        p.send_many((0..per_tick).map(|_| value.clone()).collect(), None)
            .unwrap();
        sent_at.push(Instant::now());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while next_check < sent_at.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_micros(POLL_US));
        let acked = p.acked_offset().unwrap_or(0);
        while next_check < sent_at.len() && acked >= base + (next_check as u64 + 1) * per_tick - 1 {
            lat.push(sent_at[next_check].elapsed().as_secs_f64() * 1e3);
            next_check += 1;
        }
    }
    print_thread_cpu("latency", ticks * per_tick, &before);
    let acks = p
        .stats()
        .snapshot()
        .iter()
        .find(|(k, _)| *k == "acks_received")
        .map_or(0, |(_, v)| *v);
    p.close().unwrap();
    lat.drain(..WARM_UP_TICKS.min(lat.len()));
    if std::env::var_os("DAFKA_BENCH_VERBOSE").is_some() {
        // The worst latency per 100 ms of sending: are slow ACKs one stall or
        // a backlog that builds up?
        let line: Vec<String> = lat
            .chunks(100)
            .map(|w| format!("{:.0}", w.iter().copied().fold(0.0, f64::max)))
            .collect();
        println!("  worst ACK latency (ms) per 100 ms: {}", line.join(" "));
        println!(
            "  ACKs the producer received: {acks} ({:.1} per 1k records)",
            acks as f64 * 1e3 / (ticks * per_tick) as f64
        );
        println!("  store stats: {:?}", s.shared().stats.snapshot());
    }
    print_sync_times(&s);
    s.close().unwrap();
    quantiles(lat)
}

/// The store's group-commit durations so far (what ACK latency waits on).
fn print_sync_times(s: &Store) {
    let t = s
        .shared()
        .sync_times
        .as_ref()
        .expect("a durable store")
        .snapshot();
    let mut hist = String::new();
    let mut lo = 0.0;
    for (i, n) in t.buckets.iter().enumerate() {
        if *n > 0 {
            match SyncTimes::BOUNDS_MS.get(i) {
                Some(hi) => hist += &format!(" [{lo}-{hi} ms) {n}"),
                None => hist += &format!(" [{lo} ms-) {n}"),
            }
        }
        lo = SyncTimes::BOUNDS_MS.get(i).copied().unwrap_or(lo);
    }
    println!(
        "  store syncs: {}, mean {:.2} ms, max {:.2} ms;{hist}",
        t.count,
        t.micros as f64 / 1e3 / t.count.max(1) as f64,
        t.max_micros as f64 / 1e3
    );
}

/// A late consumer served by the store alone: records/s.
fn replay(dir: &Path, n: u64, size: usize) -> f64 {
    let (s, p) = start_pair(dir);
    send_n(&p, n, size);
    assert_eq!(p.flush(Duration::from_secs(300)).unwrap(), 0);
    p.close().unwrap();
    drop(p);
    let c = Consumer::new(
        &["t".to_string()],
        ConsumerConfig {
            offset_reset: OffsetReset::Earliest,
            node: peers(&[s.endpoint()]),
            max_fetch: 100_000,
            ..Default::default()
        },
    )
    .unwrap();
    s.connect(c.endpoint()).unwrap();
    let total = n + 1;
    let before = thread_cpu();
    let t0 = Instant::now();
    let mut got = 0u64;
    while got < total {
        got += c
            .poll_many(100_000, Duration::from_millis(100))
            .unwrap()
            .len() as u64;
        assert!(
            t0.elapsed() < Duration::from_secs(600),
            "replay stalled at {got}"
        );
    }
    let rate = total as f64 / t0.elapsed().as_secs_f64();
    print_thread_cpu("replay", total, &before);
    c.close().unwrap();
    s.close().unwrap();
    rate
}

fn status_kib(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// In a child process (so nothing else inflates its RSS): writes `n` 100 B
/// records through the log, then opens a store on them, lets it serve a late
/// consumer's FETCH of the first 100k, and prints its RSS and peak RSS.
fn rss_child(dir: &Path, n: u64) {
    let logdir = dir.join("log");
    {
        let mut log = Log::open(&logdir, LogConfig::default()).unwrap();
        let batch: Vec<Vec<u8>> = (0..10_000).map(|_| vec![5u8; 100]).collect();
        let partition = "85E3C6EBDC7B4156AD9C43611EBC09CE";
        let mut off = 0;
        while off < n {
            log.append_batch(b"t", partition, off, &batch).unwrap();
            off += batch.len() as u64;
        }
        log.close().unwrap();
    }
    let s = Store::open(dir, StoreConfig::default()).unwrap();
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
    let mut got = 0;
    let t0 = Instant::now();
    while got < 100_000 && t0.elapsed() < Duration::from_secs(120) {
        got += c
            .poll_many(100_000, Duration::from_millis(100))
            .unwrap()
            .len();
    }
    let heads = s.heads(None).unwrap();
    println!(
        "RSS {} {} {} {}",
        status_kib("VmRSS:"),
        status_kib("VmHWM:"),
        heads[0].1,
        got
    );
    c.close().unwrap();
    s.close().unwrap();
}

/// Store RSS while holding `n` records: (RSS MiB, records held, records served).
fn store_rss(dir: &Path, n: u64) -> (f64, f64, u64, usize) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--bench", "rss-child", &n.to_string()])
        .arg(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("RSS "))
        .unwrap_or_else(|| {
            panic!(
                "rss child failed: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let f: Vec<&str> = line.split_whitespace().collect();
    (
        f[1].parse::<f64>().unwrap() / 1024.0,
        f[2].parse::<f64>().unwrap() / 1024.0,
        f[3].parse().unwrap(),
        f[4].parse().unwrap(),
    )
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs bench targets without `--bench`.
        println!("store benchmarks: run them with `cargo bench --bench store`");
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "rss-child") {
        rss_child(Path::new(&args[i + 2]), args[i + 1].parse().unwrap());
        return;
    }
    let quick = std::env::var_os("DAFKA_BENCH_QUICK").is_some();
    // DAFKA_BENCH_ONLY=tput,logic,parts,idle,latency,replay,rss picks parts (default: all;
    // `nosync`, never by default, runs only the latency diagnostic without fdatasync).
    let only = std::env::var("DAFKA_BENCH_ONLY").unwrap_or_default();
    let part = |name: &str| only.is_empty() || only.split(',').any(|p| p.trim() == name);
    let scale = if quick { 10 } else { 1 };
    let dir = bench_dir("run");
    println!(
        "# store benchmarks ({})",
        if quick { "quick" } else { "full" }
    );
    let tput_cases = if part("tput") {
        vec![(100usize, 2_000_000u64 / scale), (1024, 500_000 / scale)]
    } else {
        Vec::new()
    };
    for (size, n) in tput_cases {
        let z = baseline_zmq(n, size);
        let d = baseline_disk(&dir, n, size);
        let base = z.per_sec.min(d);
        let st = durable_throughput(&bench_dir(&format!("tput{size}")), n, size, false);
        println!(
            "durable ACKed {size:>5} B: store {:.2}M rec/s ({:.2} cpu-µs/rec, {:.1} switches/1k) \
             | baseline zmq {:.2}M ({:.2} cpu-µs/rec, {:.1} switches/1k), disk {:.2}M rec/s \
             | ratio {:.0}% of min",
            st.per_sec / 1e6,
            st.cpu_us,
            st.switches_k,
            z.per_sec / 1e6,
            z.cpu_us,
            z.switches_k,
            d / 1e6,
            100.0 * st.per_sec / base
        );
        let st = durable_throughput(&bench_dir(&format!("batch{size}")), n, size, true);
        println!(
            "durable ACKed {size:>5} B in RECORD-BATCHes: store {:.2}M rec/s ({:.2} cpu-µs/rec) \
             | ratio {:.0}% of disk",
            st.per_sec / 1e6,
            st.cpu_us,
            100.0 * st.per_sec / d
        );
    }
    if part("keyed") {
        // Issue 31: keyed 100 B records (16 B key, two headers) next to
        // unkeyed ones, alternated, in one sitting; target >= 70%.
        let n = 2_000_000 / scale;
        for round in 0..2 {
            let plain =
                durable_throughput_of(&bench_dir(&format!("kp{round}")), n, 100, true, false);
            let keyed =
                durable_throughput_of(&bench_dir(&format!("kk{round}")), n, 100, true, true);
            println!(
                "durable ACKed   100 B, producer batches: unkeyed {:.2}M rec/s, keyed {:.2}M \
                 rec/s | keyed {:.0}% of unkeyed",
                plain.per_sec / 1e6,
                keyed.per_sec / 1e6,
                100.0 * keyed.per_sec / plain.per_sec
            );
        }
    }
    if part("tput") {
        let n = 2_000_000 / scale;
        let st = durable_throughput_two(&bench_dir("tput2"), n, 100);
        println!(
            "durable ACKed   100 B, two producers: store {:.2}M rec/s ({:.2} cpu-µs/rec, {:.1} \
             switches/1k)",
            st.per_sec / 1e6,
            st.cpu_us,
            st.switches_k
        );
    }
    if part("logic") {
        let n = 4_000_000 / scale;
        let us = logic_alone(&bench_dir("logic"), n, 100);
        println!("store logic alone, 100 B (no sockets): {us:.3} cpu-µs/rec");
    }
    if part("parts") {
        let (n, idle) = (2_000_000 / scale, 10_000);
        let st = durable_throughput_idle_parts(&bench_dir("parts"), n, 100, idle);
        println!(
            "durable ACKed   100 B, {idle} idle partitions known: store {:.2}M rec/s ({:.2} \
             cpu-µs/rec)",
            st.per_sec / 1e6,
            st.cpu_us
        );
    }
    if part("idle") {
        // Issue 37: 10,000 idle partitions whose producers are alive (a HEAD
        // each per second) beside one busy one: what the store spends per
        // record of the busy one.
        let (n, idle) = (2_000_000 / scale, 10_000);
        let (st, store_us) = durable_throughput_live_idle(&bench_dir("idle"), n, 100, idle);
        println!(
            "durable ACKed   100 B, {idle} idle partitions with live producers: store {:.2}M \
             rec/s ({:.2} cpu-µs/rec in all, {store_us:.2} in the store's threads)",
            st.per_sec / 1e6,
            st.cpu_us
        );
    }
    let rates = if part("latency") {
        vec![100_000, 500_000]
    } else {
        Vec::new()
    };
    for rate in rates {
        let secs = if quick { 2 } else { 5 };
        let [b50, b99, b999, bmax] =
            baseline_durable_latency(&bench_dir("lat-raw"), rate, secs, 100);
        let [p50, p99, p999, max] =
            ack_latency(&bench_dir("lat"), rate, secs, 100, FsyncPolicy::Interval);
        // The same path with the disk taken out (ACK once written to the page
        // cache): how much of the p99 is our code and how much is fdatasync.
        let [n50, n99, _, nmax] = ack_latency(
            &bench_dir("lat-nosync"),
            rate,
            secs,
            100,
            FsyncPolicy::Never,
        );
        println!(
            "ack latency at {}k rec/s offered (100 B): p50 {p50:.2} ms, p99 {p99:.2} ms, \
             p99.9 {p999:.2} ms, max {max:.2} ms | baseline disk (write, fdatasync every \
             {} ms) p50 {b50:.2}, p99 {b99:.2}, p99.9 {b999:.2}, max {bmax:.2} ms | \
             without fdatasync (fsync=never, not durable; diagnostic) p50 {n50:.2}, p99 \
             {n99:.2}, max {nmax:.2} ms",
            rate / 1000,
            flush_ms()
        );
    }
    if only.split(',').any(|p| p.trim() == "nosync") {
        // Only the diagnostic above, at 500k/s: our path's own hiccups.
        let secs = if quick { 2 } else { 5 };
        let [n50, n99, _, nmax] = ack_latency(
            &bench_dir("lat-nosync"),
            500_000,
            secs,
            100,
            FsyncPolicy::Never,
        );
        println!(
            "ack latency at 500k rec/s offered (100 B) without fdatasync (fsync=never, not \
             durable; diagnostic): p50 {n50:.2}, p99 {n99:.2}, max {nmax:.2} ms"
        );
    }
    if part("replay") {
        let r = replay(&bench_dir("replay"), 1_000_000 / scale, 100);
        println!("replay to a late consumer (100 B): {:.2}M rec/s", r / 1e6);
    }
    if !part("rss") {
        let _ = std::fs::remove_dir_all(dir.parent().unwrap());
        return;
    }
    let n_rss = std::env::var("DAFKA_BENCH_RSS_RECORDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50_000_000 / scale);
    let (rss, peak, held, served) = store_rss(&bench_dir("rss"), n_rss);
    println!(
        "store process holding {held} records (100 B), after serving {served} to a late \
         consumer: RSS {rss:.1} MiB, peak {peak:.1} MiB"
    );
    let root = dir.parent().unwrap().to_path_buf();
    let _ = std::fs::remove_dir_all(root);
}
