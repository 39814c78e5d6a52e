//! Secure mode (CURVE + ZAP) against insecure, in the same run (no
//! criterion: one timed run per case, printed as a table):
//! - raw libzmq PUB → SUB (two contexts, tcp://127.0.0.1), plaintext and
//!   CURVE, the same rfc RECORD frames: the physical limit of each;
//! - live: a producer → consumer, 100 B records sent one at a time
//!   (`min_acks = 0`), insecure and secure;
//! - durable + ACKed: a producer with `record_batches` → a store, 100 B
//!   records, until every one is ACKed, insecure and secure;
//! - replay: a late consumer reads those records from the store alone.
//!
//! `cargo bench --bench secure` (`DAFKA_BENCH_N` sets the live record count,
//! default 1,000,000; the durable cases use twice as many).
//! Targets (issue 30): secure live >= 80% of raw CURVE; secure durable in
//! RECORD-BATCHes >= 60% of insecure. Results: benches/RESULTS.md.

use std::path::Path;
use std::time::{Duration, Instant};

use _native::node::{
    Consumer, ConsumerConfig, NodeConfig, OffsetReset, Producer, ProducerConfig, Store, StoreConfig,
};
use _native::security::{keygen, Role, SecurityConfig};
use _native::wire::{Dialect, FrameBuf, Message, Record};

const ADDR: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";

/// Raw PUB → SUB of `n` rfc RECORD frames of `size` bytes; with CURVE if
/// `curve` (keys made here; no ZAP: the cost of the crypto alone).
fn raw(n: usize, size: usize, curve: bool) -> f64 {
    let server = zmq::CurveKeyPair::new().unwrap();
    let client = zmq::CurveKeyPair::new().unwrap();
    let ctx = zmq::Context::new();
    let publ = ctx.socket(zmq::PUB).unwrap();
    publ.set_sndhwm(0).unwrap();
    // Nothing left to send once the subscriber has all: the context ends.
    publ.set_linger(0).unwrap();
    if curve {
        publ.set_curve_server(true).unwrap();
        publ.set_curve_secretkey(&server.secret_key).unwrap();
    }
    publ.bind("tcp://127.0.0.1:*").unwrap();
    let ep = publ.get_last_endpoint().unwrap().unwrap();
    let content = vec![0x5Au8; size];
    let mut buf = FrameBuf::new();
    Message::Record(Record {
        topic: b"bench",
        address: ADDR,
        subject: b"bench",
        sequence: 0,
        content: &content,
    })
    .encode_into(Dialect::Rfc, &mut buf)
    .unwrap();
    let (topic, body) = (buf.topic.clone(), buf.body.clone());
    let server_public = server.public_key;
    let (connected_tx, connected) = std::sync::mpsc::channel();
    let rx = std::thread::spawn(move || {
        let ctx = zmq::Context::new();
        let sub = ctx.socket(zmq::SUB).unwrap();
        sub.set_rcvhwm(0).unwrap();
        if curve {
            sub.set_curve_serverkey(&server_public).unwrap();
            sub.set_curve_publickey(&client.public_key).unwrap();
            sub.set_curve_secretkey(&client.secret_key).unwrap();
        }
        sub.set_subscribe(b"Mbench").unwrap();
        sub.connect(&ep).unwrap();
        let mut m = zmq::Message::new();
        loop {
            sub.recv(&mut m, 0).unwrap();
            if !m.get_more() && &*m == b"go" {
                break;
            }
        }
        let _ = connected_tx.send(());
        let (mut got, mut start) = (0usize, None);
        while got < n {
            sub.recv(&mut m, 0).unwrap();
            if !m.get_more() {
                start.get_or_insert_with(Instant::now);
                got += 1;
            }
        }
        start.unwrap()
    });
    // Until the subscriber is connected: "go" in a message of its own (a
    // busy machine can take longer than any fixed wait for the handshake).
    while connected.recv_timeout(Duration::from_millis(10)).is_err() {
        publ.send_multipart([topic.as_slice(), b"go"], 0).unwrap();
    }
    let start = Instant::now();
    for _ in 0..n {
        publ.send(topic.as_slice(), zmq::SNDMORE).unwrap();
        publ.send(body.as_slice(), zmq::SNDMORE).unwrap();
        publ.send(content.as_slice(), 0).unwrap();
    }
    let _first = rx.join().unwrap();
    n as f64 / start.elapsed().as_secs_f64()
}

/// Keys for a producer, a consumer and a store in one trust directory.
struct Keys {
    _dir: tempfile::TempDir,
    trust: std::path::PathBuf,
    secret: std::path::PathBuf,
}

impl Keys {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (trust, secret) = (dir.path().join("trust"), dir.path().join("secret"));
        std::fs::create_dir_all(&trust).unwrap();
        for (name, role) in [
            ("p", Role::Producer),
            ("c", Role::Consumer),
            ("s", Role::Store),
        ] {
            let (public, _) = keygen(&secret, name, role, None).unwrap();
            std::fs::rename(&public, trust.join(public.file_name().unwrap())).unwrap();
        }
        Self {
            _dir: dir,
            trust,
            secret,
        }
    }

    fn of(&self, name: &str) -> Option<SecurityConfig> {
        Some(SecurityConfig {
            cert: self.secret.join(format!("{name}.key_secret")),
            trust: self.trust.clone(),
        })
    }
}

fn node(keys: Option<&Keys>, name: &str, peers: Vec<String>) -> NodeConfig {
    NodeConfig {
        peers,
        sndhwm: 0,
        rcvhwm: 0,
        security: keys.and_then(|k| k.of(name)),
        ..Default::default()
    }
}

fn consumer(keys: Option<&Keys>, peers: Vec<String>, reset: OffsetReset) -> Consumer {
    Consumer::new(
        &["bench".to_string()],
        ConsumerConfig {
            offset_reset: reset,
            max_buffered: 1 << 30,
            node: node(keys, "c", peers),
            ..Default::default()
        },
    )
    .unwrap()
}

/// Live: `n` records of 100 B sent one at a time → a consumer.
fn live(keys: Option<&Keys>, n: usize) -> f64 {
    let p = Producer::new(
        "bench",
        ProducerConfig {
            min_acks: 0,
            node: node(keys, "p", vec![]),
            ..Default::default()
        },
    )
    .unwrap();
    let c = consumer(keys, vec![p.endpoint().to_string()], OffsetReset::Latest);
    p.connect(c.endpoint()).unwrap();
    loop {
        p.send(b"sync", None).unwrap();
        if !c
            .poll_many(1 << 20, Duration::from_millis(50))
            .unwrap()
            .is_empty()
        {
            break;
        }
    }
    while !c
        .poll_many(1 << 20, Duration::from_millis(100))
        .unwrap()
        .is_empty()
    {}
    let content = vec![0x5Au8; 100];
    let start = Instant::now();
    let tx = std::thread::spawn(move || {
        for _ in 0..n {
            p.send(content.as_slice(), None).unwrap();
        }
        p
    });
    let (mut got, mut v) = (0usize, Vec::new());
    while got < n {
        v.clear();
        c.poll_slice(1 << 16, Duration::from_millis(100), &mut v)
            .unwrap();
        got += v.len();
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    tx.join().unwrap().close().unwrap();
    c.close().unwrap();
    rate
}

/// Durable + ACKed in RECORD-BATCHes, then a replay from the store alone:
/// (ACKed rec/s, replayed rec/s).
fn durable(keys: Option<&Keys>, n: usize, dir: &Path) -> (f64, f64) {
    let s = Store::open(
        dir,
        StoreConfig {
            node: node(keys, "s", vec![]),
            ..Default::default()
        },
    )
    .unwrap();
    let p = Producer::new(
        "bench",
        ProducerConfig {
            min_acks: 1,
            record_batches: true,
            max_unacked_bytes: 1 << 30,
            node: node(keys, "p", vec![s.endpoint().to_string()]),
            ..Default::default()
        },
    )
    .unwrap();
    s.connect(p.endpoint()).unwrap();
    assert_eq!(p.wait_for_stores(1, Duration::from_secs(30)).unwrap(), 1);
    let batch: Vec<Vec<u8>> = vec![vec![0x5Au8; 100]; 1000];
    let start = Instant::now();
    for _ in 0..n / 1000 {
        p.send_many(batch.clone(), None).unwrap();
    }
    assert_eq!(p.flush(Duration::from_secs(600)).unwrap(), 0);
    let acked = n as f64 / start.elapsed().as_secs_f64();
    p.close().unwrap();
    let start = Instant::now();
    let c = consumer(keys, vec![s.endpoint().to_string()], OffsetReset::Earliest);
    s.connect(c.endpoint()).unwrap();
    let (mut got, mut v) = (0usize, Vec::new());
    while got < n {
        v.clear();
        c.poll_slice(1 << 16, Duration::from_millis(100), &mut v)
            .unwrap();
        got += v.len();
    }
    let replay = n as f64 / start.elapsed().as_secs_f64();
    c.close().unwrap();
    s.close().unwrap();
    (acked, replay)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("secure benchmark: skipped (run `cargo bench --bench secure`)");
        return;
    }
    assert!(_native::security::has_curve());
    let n: usize = std::env::var("DAFKA_BENCH_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let keys = Keys::new();
    println!("| case | records | insecure rec/s | secure rec/s | secure / insecure |");
    println!("|---|---|---|---|---|");
    let mut raw100 = (0.0, 0.0);
    for size in [100usize, 1024, 65536] {
        let m = (n * 100 / size).max(20_000);
        let (plain, curve) = (raw(m, size, false), raw(m, size, true));
        if size == 100 {
            raw100 = (plain, curve);
        }
        println!(
            "| raw zmq PUB→SUB, {size} B (CURVE: {:.2} GB/s) | {m} | {plain:.0} | {curve:.0} | {:.0}% |",
            curve * size as f64 / 1e9,
            100.0 * curve / plain
        );
    }
    let (li, ls) = (live(None, n), live(Some(&keys), n));
    println!(
        "| live send → poll, 100 B | {n} | {li:.0} | {ls:.0} | {:.0}% (target: secure >= 80% of raw CURVE: {:.0}%) |",
        100.0 * ls / li,
        100.0 * ls / raw100.1
    );
    let d = tempfile::tempdir().unwrap();
    let m = 2 * n;
    let (ai, ri) = durable(None, m, &d.path().join("insecure"));
    let (a_s, rs) = durable(Some(&keys), m, &d.path().join("secure"));
    println!(
        "| durable + ACKed, 100 B in RECORD-BATCHes | {m} | {ai:.0} | {a_s:.0} | {:.0}% (target >= 60%) |",
        100.0 * a_s / ai
    );
    println!(
        "| replay to a late consumer, 100 B | {m} | {ri:.0} | {rs:.0} | {:.0}% |",
        100.0 * rs / ri
    );
}
