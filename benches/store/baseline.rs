//! Baselines: raw `zmq` PUB→SUB of the store's RECORD frames, and the disk's
//! `write` + `fdatasync` (throughput and latency); raw RECORD and HEAD senders.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use _native::wire::{Dialect, FrameBuf, Head, Message, Record};

use crate::util::*;

/// Publishes a RECORD of topic `t` as its three `rfc` frames on a raw socket.
pub(crate) fn send_raw_record(
    publ: &zmq::Socket,
    buf: &mut FrameBuf,
    address: &[u8],
    sequence: u64,
    content: &[u8],
) {
    send_raw_record_of(publ, buf, b"t", address, sequence, content);
}

/// [`send_raw_record`] of `topic`.
pub(crate) fn send_raw_record_of(
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

/// Publishes a HEAD of `topic` (the partition's last offset) on a raw
/// socket, as a live producer does every second.
pub(crate) fn send_raw_head(
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

/// Raw zmq PUB→SUB of `n` RECORDs of `size` bytes in the rfc framing.
pub(crate) fn baseline_zmq(n: u64, size: usize) -> Rate {
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
pub(crate) fn baseline_disk(dir: &Path, n: u64, size: usize) -> f64 {
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
pub(crate) fn baseline_durable_latency(dir: &Path, rate: u64, secs: u64, size: usize) -> [f64; 4] {
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
