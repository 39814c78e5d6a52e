//! A late consumer served by the store alone, and the store's RSS while it
//! holds many records.

use std::path::Path;
use std::time::{Duration, Instant};

use _native::log::{Log, LogConfig};
use _native::node::{Consumer, ConsumerConfig, OffsetReset, Store, StoreConfig};

use crate::{throughput::*, util::*};

/// A late consumer served by the store alone: records/s.
pub(crate) fn replay(dir: &Path, n: u64, size: usize) -> f64 {
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

/// In a child process (so nothing else inflates its RSS): writes `n` 100 B
/// records through the log, then opens a store on them, lets it serve a late
/// consumer's FETCH of the first 100k, and prints its RSS and peak RSS.
pub(crate) fn rss_child(dir: &Path, n: u64) {
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
pub(crate) fn store_rss(dir: &Path, n: u64) -> (f64, f64, u64, usize) {
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
