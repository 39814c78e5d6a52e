//! ACK latency at fixed offered rates, and the store's sync times.

use std::path::Path;
use std::time::{Duration, Instant};

use _native::log::FsyncPolicy;
use _native::node::stats::SyncTimes;
use _native::node::Store;

use crate::{throughput::*, util::*};

/// Ticks (ms) sent at the offered rate before latencies count: a fresh store
/// and producer first grow their buffers, files and heaps.
pub(crate) const WARM_UP_TICKS: usize = 1000;

/// How often (µs) the sender looks at the ACKed offset between ticks: a
/// quarter-millisecond resolution, and rarely enough not to take the CPU the
/// nodes need (polling every 50 µs, the harness itself caused 30-140 ms
/// backlogs at 500k records/s on two cores).
pub(crate) const POLL_US: u64 = 250;

/// ACK latency at `rate` records/s offered for `secs` (after a warm-up of
/// [`WARM_UP_TICKS`] at the same rate): p50, p99, p99.9 and max in ms.
pub(crate) fn ack_latency(
    dir: &Path,
    rate: u64,
    secs: u64,
    size: usize,
    fsync: FsyncPolicy,
) -> [f64; 4] {
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
pub(crate) fn print_sync_times(s: &Store) {
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
