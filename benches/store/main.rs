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

use std::path::Path;

use _native::log::FsyncPolicy;

mod baseline;
mod idle;
mod latency;
mod replay;
mod throughput;
mod util;

use baseline::*;
use idle::*;
use latency::*;
use replay::*;
use throughput::*;
use util::*;

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
