//! Live-path benchmark (no criterion: one timed run per case, printed as a
//! table). In the same run: the raw baseline (the `zmq` crate, PUB → SUB over
//! tcp://127.0.0.1 with the rfc frame layout: topic frame, body frame, content)
//! and a dafka Producer → Consumer (static peers, `min_acks=0`), for 100 B and
//! 1 KiB records; then produce→consume latency p50/p99 at a fixed offered rate.
//!
//! `cargo bench --bench live` (env `DAFKA_BENCH_N` overrides the record count).
//! Results: benches/RESULTS.md, "Live path".

use std::time::{Duration, Instant};

use _native::node::{Consumer, ConsumerConfig, NodeConfig, OffsetReset, Producer, ProducerConfig};
use _native::wire::{Dialect, FrameBuf, Message, Record};

const ADDR: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";

/// Raw PUB→SUB; `two_contexts`: the subscriber has its own context (its own
/// I/O thread), as a consumer in another process has.
fn raw_baseline(n: usize, size: usize, two_contexts: bool) -> f64 {
    let ctx = zmq::Context::new();
    let publ = ctx.socket(zmq::PUB).unwrap();
    publ.set_sndhwm(0).unwrap();
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
    let rx = std::thread::spawn({
        let ctx = if two_contexts {
            zmq::Context::new()
        } else {
            ctx.clone()
        };
        move || {
            let sub = ctx.socket(zmq::SUB).unwrap();
            sub.set_rcvhwm(0).unwrap();
            sub.set_subscribe(b"Mbench").unwrap();
            sub.connect(&ep).unwrap();
            let mut m = zmq::Message::new();
            // Sync: wait for the first sync message.
            loop {
                sub.recv(&mut m, 0).unwrap();
                if !m.get_more() && &*m == b"go" {
                    break;
                }
            }
            let mut got = 0usize;
            let mut start = None;
            while got < n {
                sub.recv(&mut m, 0).unwrap();
                if !m.get_more() {
                    start.get_or_insert_with(Instant::now);
                    got += 1;
                }
            }
            start.unwrap_or_else(Instant::now)
        }
    });
    // Slow joiner: repeat the sync message until the subscriber got it.
    let t_sync = Instant::now();
    while !rx.is_finished() && t_sync.elapsed() < Duration::from_millis(300) {
        publ.send(&b"Mbench"[..], zmq::SNDMORE).unwrap();
        publ.send(&b"go"[..], 0).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let start = Instant::now();
    for _ in 0..n {
        publ.send(&topic[..], zmq::SNDMORE).unwrap();
        publ.send(&body[..], zmq::SNDMORE).unwrap();
        publ.send(&content[..], 0).unwrap();
    }
    let _first = rx.join().unwrap();
    n as f64 / start.elapsed().as_secs_f64()
}

fn pair() -> (Producer, Consumer) {
    let p = Producer::new(
        "bench",
        ProducerConfig {
            min_acks: 0,
            node: NodeConfig {
                sndhwm: 0,
                rcvhwm: 0,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .unwrap();
    let c = Consumer::new(
        &["bench".to_string()],
        ConsumerConfig {
            offset_reset: OffsetReset::Latest,
            max_buffered: 1 << 30,
            node: NodeConfig {
                peers: vec![p.endpoint().to_string()],
                sndhwm: 0,
                rcvhwm: 0,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .unwrap();
    p.connect(c.endpoint()).unwrap();
    // Slow joiner: send until the consumer sees a record.
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
    (p, c)
}

/// The key and headers of a keyed record (issue 31's bench): a 16 B key and
/// two small headers.
const KEY: &[u8; 16] = b"customer-0000042";
const HEADERS: [(&str, &[u8]); 2] = [("trace", b"0af7651916cd43dd"), ("src", b"web")];

fn live(n: usize, size: usize, batched: bool, keyed: bool) -> f64 {
    let (p, c) = pair();
    let content = vec![0x5Au8; size];
    let start = Instant::now();
    let tx = std::thread::spawn(move || {
        let extra = _native::node::producer::Extra {
            key: Some(KEY),
            headers: &HEADERS,
            timestamp: None,
        };
        let ok = || Ok::<(), _native::error::Error>(());
        match (batched, keyed) {
            (true, false) => {
                for _ in 0..n / 1000 {
                    p.send_many(vec![content.clone(); 1000], None).unwrap();
                }
            }
            (true, true) => {
                for _ in 0..n / 1000 {
                    let mut b = _native::node::Batch::with_capacity(1000, 1000 * (size + 64));
                    let now = _native::meta::now_ms();
                    for _ in 0..1000 {
                        b.push_body(now, Some(KEY), &HEADERS, &content);
                    }
                    p.send_batch_with(b, None, ok).unwrap();
                }
            }
            (false, false) => {
                for _ in 0..n {
                    p.send(content.clone(), None).unwrap();
                }
            }
            (false, true) => {
                for _ in 0..n {
                    p.send_record_with(&content, &extra, None, ok).unwrap();
                }
            }
        }
        p
    });
    let mut got = 0usize;
    let mut v = Vec::new();
    while got < n {
        v.clear();
        c.poll_slice(1 << 16, Duration::from_millis(100), &mut v)
            .unwrap();
        got += v.len();
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let p = tx.join().unwrap();
    p.close().unwrap();
    c.close().unwrap();
    rate
}

fn latency(rate: f64, secs: f64) -> (f64, f64, f64) {
    let (p, c) = pair();
    let n = (rate * secs) as usize;
    let epoch = Instant::now();
    let tx = std::thread::spawn(move || {
        let gap = Duration::from_secs_f64(1.0 / rate);
        let mut due = Instant::now();
        for _ in 0..n {
            // Sleep (not spin) until due: a spinning sender would take one of
            // the two cores from the threads being measured.
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            let mut v = vec![0u8; 100];
            let t = epoch.elapsed().as_nanos() as u64;
            v[..8].copy_from_slice(&t.to_be_bytes());
            p.send(v, None).unwrap();
            due += gap;
        }
        p
    });
    let mut lat = Vec::with_capacity(n);
    let mut v = Vec::new();
    while lat.len() < n {
        v.clear();
        c.poll_slice(1 << 16, Duration::from_millis(100), &mut v)
            .unwrap();
        let now = epoch.elapsed().as_nanos() as u64;
        for d in &v {
            let t = u64::from_be_bytes(d.value()[..8].try_into().unwrap());
            lat.push(now.saturating_sub(t));
        }
    }
    let p = tx.join().unwrap();
    p.close().unwrap();
    c.close().unwrap();
    lat.sort_unstable();
    let q = |f: f64| lat[((lat.len() - 1) as f64 * f) as usize] as f64 / 1000.0;
    (q(0.5), q(0.99), q(0.999))
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --all-targets` does not, and a
    // benchmark must not run inside the test suite.
    if !std::env::args().any(|a| a == "--bench") {
        println!("live benchmark: skipped (run `cargo bench --bench live`)");
        return;
    }
    let n: usize = std::env::var("DAFKA_BENCH_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    println!("| case | size | records | rec/s | vs raw |");
    println!("|---|---|---|---|---|");
    for size in [100usize, 1024] {
        let n = if size > 100 { n / 2 } else { n };
        let raw1 = raw_baseline(n, size, false);
        let raw = raw_baseline(n, size, true);
        println!(
            "| raw zmq PUB→SUB (3 frames), one context | {size} B | {n} | {raw1:.0} | {:.0}% |",
            100.0 * raw1 / raw
        );
        println!("| raw zmq PUB→SUB (3 frames), two contexts | {size} B | {n} | {raw:.0} | 100% |");
        for (name, batched, keyed) in [
            ("live send_many(1000)", true, false),
            ("live send", false, false),
            ("live send_many(1000), keyed", true, true),
            ("live send, keyed", false, true),
        ] {
            if keyed && size > 100 {
                continue;
            }
            let r = live(n, size, batched, keyed);
            println!(
                "| {name} → poll | {size} B | {n} | {r:.0} | {:.0}% ({:.0}% of one context) |",
                100.0 * r / raw,
                100.0 * r / raw1
            );
        }
    }
    for rate in [10_000.0, 100_000.0] {
        let (p50, p99, p999) = latency(rate, 2.0);
        println!(
            "latency at {rate:.0} rec/s offered, 100 B: p50 {p50:.1} µs, p99 {p99:.1} µs, p99.9 {p999:.1} µs"
        );
    }
}
