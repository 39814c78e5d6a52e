//! Benchmarks of the durable log (a plain main, no criterion):
//!
//! - append: 100 B and 1 KiB records in batches of 1,000 with `fsync=interval`,
//!   against a raw baseline measured in the same run: the same bytes written
//!   sequentially in the same chunks with fdatasync at the same cadence (every
//!   `flush_messages` = 10,000 records, and at the end).
//! - read: a 1 GB partition read front to back after a cold open (the segment
//!   files evicted from the page cache with `posix_fadvise(DONTNEED)`).
//! - rss: 50M 100 B records across 1,000 partitions, in a child process that
//!   reports its own peak RSS (VmHWM).
//! - open: `Log::open` of 5,000 partitions (a store after thousands of Spark
//!   tasks), with 1 GiB of another program's writes pending in the same
//!   filesystem, after a clean close and after a crash (dropped unclosed), against
//!   the same run's fdatasync of each active segment plus an fsync of each
//!   partition directory (what opening cost per partition before one syncfs
//!   covered a large log).
//! - parked: 20,000 partitions whose records retention deleted (each finished
//!   Spark task's), parked in `.parked`, against the same partitions each still
//!   holding its records in a directory of its own (what an emptied partition
//!   kept before parking: a directory, a segment and an index): the sweep that
//!   parks them, then `Log::open` and RSS of each log in a child process, and
//!   the files and directories each uses.
//! - forget: 20,000 parked partitions and one parked earlier: the periodic
//!   check (`Log::tick`) at which that one is due to be forgotten, which walks
//!   every parked entry, against the next check, at which none is due (no
//!   walk).
//! - expire: 2,000 partitions whose older segments (about 10,000) expire at
//!   once while each keeps a fresh record: the longest `Log::tick` (what a
//!   store's loop waits on) as `tick` deletes them a batch at a time, against
//!   the same run's one sweep deleting all (what `tick` did before).
//! - live: 1,000 partitions of 1.2 MB of 100 B records each (a Spark task's
//!   partition, written live as a store writes it), RSS and heap in use per
//!   partition in the log that wrote them, then after two periodic checks
//!   with no append (the tasks done), against the same log reopened (what a
//!   store restarted holds for them), each in a child process.
//!
//! `cargo bench --bench log [-- append|read|rss|open|parked|forget|expire|live]` (nothing runs without
//! `--bench`, so `cargo test --all-targets` skips them). `DAFKA_BENCH_DIR` picks
//! the directory (default: `target/bench-log`), `DAFKA_BENCH_SCALE` scales the
//! data sizes (e.g. 0.1 for a quick run).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use _native::log::format::encode_record;
use _native::log::{FsyncPolicy, Log, LogConfig};

const P: &str = "85E3C6EBDC7B4156AD9C43611EBC09CE";
const BATCH: usize = 1000;
const FLUSH_MESSAGES: usize = 10_000;
/// Alternating baseline/log repetitions of the append benchmark; medians reported.
const REPS: usize = 5;

fn scale() -> f64 {
    std::env::var("DAFKA_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0)
}

fn bench_dir(name: &str) -> PathBuf {
    let base = std::env::var("DAFKA_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-log"));
    let d = base.join(name);
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).expect("create bench dir");
    d
}

fn evict(dir: &Path) {
    for e in fs::read_dir(dir).expect("list") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            evict(&p);
        } else {
            let f = File::open(&p).expect("open");
            // SAFETY: a plain syscall on an fd we own.
            unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
    }
}

fn values(size: usize, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut v = vec![(i % 251) as u8; size];
            v[..8].copy_from_slice(&(i as u64).to_be_bytes());
            v
        })
        .collect()
}

/// Sequential write + fdatasync of the same bytes in the same chunks.
fn baseline(dir: &Path, chunks: &[Vec<u8>], rounds: usize) -> f64 {
    let path = dir.join("baseline.bin");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("create");
    let t = Instant::now();
    let mut bytes = 0usize;
    for r in 0..rounds {
        let c = &chunks[r % chunks.len()];
        f.write_all(c).expect("write");
        bytes += c.len();
        if (r + 1) * BATCH % FLUSH_MESSAGES == 0 {
            f.sync_data().expect("fdatasync");
        }
    }
    f.sync_data().expect("fdatasync");
    let secs = t.elapsed().as_secs_f64();
    drop(f);
    fs::remove_file(&path).expect("remove");
    bytes as f64 / secs
}

fn log_append(dir: &Path, vals: &[Vec<u8>], rounds: usize) -> f64 {
    let d = dir.join("log");
    let _ = fs::remove_dir_all(&d);
    let cfg = LogConfig {
        fsync: FsyncPolicy::Interval,
        flush_messages: FLUSH_MESSAGES as u64,
        ..LogConfig::default()
    };
    let mut log = Log::open(&d, cfg).expect("open");
    let t = Instant::now();
    let mut next = 0u64;
    for _ in 0..rounds {
        log.append_batch(b"bench", P, next, vals).expect("append");
        next += vals.len() as u64;
    }
    log.sync().expect("sync");
    let secs = t.elapsed().as_secs_f64();
    let bytes = log.partition(b"bench", P).expect("partition").bytes;
    log.close().expect("close");
    fs::remove_dir_all(&d).expect("remove");
    bytes as f64 / secs
}

fn append() {
    let dir = bench_dir("append");
    println!("## append, fsync=interval (flush_messages={FLUSH_MESSAGES}), batches of {BATCH}");
    for size in [100usize, 1024] {
        let total = (512.0 * 1024.0 * 1024.0 * scale()) as usize;
        let rounds = (total / (BATCH * (size + 24))).max(10);
        let vals = values(size, BATCH);
        let chunks: Vec<Vec<u8>> = (0..4)
            .map(|c| {
                let mut buf = Vec::new();
                for (i, v) in vals.iter().enumerate() {
                    encode_record(&mut buf, (c * BATCH + i) as u64, 1_700_000_000_000, v);
                }
                buf
            })
            .collect();
        let (mut base, mut log) = (Vec::new(), Vec::new());
        for _ in 0..REPS {
            base.push(baseline(&dir, &chunks, rounds));
            log.push(log_append(&dir, &vals, rounds));
        }
        base.sort_by(f64::total_cmp);
        log.sort_by(f64::total_cmp);
        let (b, l) = (base[REPS / 2], log[REPS / 2]);
        let recs = l / (size + 24) as f64;
        println!(
            "{size:>5} B records, {} MiB x{REPS} (median): baseline {:.0} MiB/s, log {:.0} MiB/s = {:.2} M records/s, ratio {:.0}%",
            (rounds * BATCH * (size + 24)) >> 20,
            b / 1048576.0,
            l / 1048576.0,
            recs / 1e6,
            100.0 * l / b
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

fn read() {
    let dir = bench_dir("read");
    let size = 100usize;
    let total = (1e9 * scale()) as usize;
    let rounds = total / (BATCH * (size + 24));
    let vals = values(size, BATCH);
    {
        let mut log = Log::open(&dir, LogConfig::default()).expect("open");
        for r in 0..rounds {
            log.append_batch(b"bench", P, (r * BATCH) as u64, &vals)
                .expect("append");
        }
        log.close().expect("close");
    }
    evict(&dir);
    let t = Instant::now();
    let log = Log::open(&dir, LogConfig::default()).expect("open");
    let opened = t.elapsed();
    let info = log.partition(b"bench", P).expect("partition");
    let mut next = 0u64;
    let mut n = 0u64;
    while next < info.next_offset {
        let recs = log
            .read(b"bench", P, next, usize::MAX, 1 << 20)
            .expect("read");
        n += recs.len() as u64;
        next = recs.last().expect("records").offset + 1;
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(n, info.next_offset);
    println!(
        "## read, cold open: {n} records of {size} B ({:.2} GB in {} segments), open {:.1} ms, \
         {:.2} M records/s, {:.0} MB/s",
        info.bytes as f64 / 1e9,
        info.segments,
        opened.as_secs_f64() * 1e3,
        n as f64 / secs / 1e6,
        info.bytes as f64 / secs / 1e6
    );
    drop(log);
    let _ = fs::remove_dir_all(&dir);
}

fn peak_rss_kib() -> u64 {
    let s = fs::read_to_string("/proc/self/status").expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// Runs in a child process: appends, then prints its peak RSS.
fn rss_child() {
    let dir = bench_dir("rss");
    let parts = 1000usize;
    let size = 100usize;
    let total = (50_000_000.0 * scale()) as usize;
    let rounds = (total / (parts * BATCH)).max(1);
    let vals = values(size, BATCH);
    let names: Vec<String> = (0..parts).map(|i| format!("{i:032X}")).collect();
    let t = Instant::now();
    let mut log = Log::open(&dir, LogConfig::default()).expect("open");
    for r in 0..rounds {
        for name in &names {
            log.append_batch(b"bench", name, (r * BATCH) as u64, &vals)
                .expect("append");
        }
        log.tick().expect("tick");
    }
    log.sync().expect("sync");
    let secs = t.elapsed().as_secs_f64();
    let bytes: u64 = log.partitions(None).iter().map(|p| p.bytes).sum();
    let after_append = peak_rss_kib();
    drop(log);
    println!(
        "## rss: {} records of {size} B across {parts} partitions ({:.2} GB) in {secs:.1} s; \
         peak RSS {:.1} MiB",
        rounds * parts * BATCH,
        bytes as f64 / 1e9,
        after_append as f64 / 1024.0
    );
    let _ = fs::remove_dir_all(&dir);
}

/// Opening a log of many partitions vs syncing each of its partitions.
fn open_many() {
    let n = ((5_000.0 * scale()) as usize).max(1);
    let dir = bench_dir("open");
    let names: Vec<String> = (0..n).map(|i| format!("{i:032X}")).collect();
    let cfg = LogConfig {
        fsync: FsyncPolicy::Never,
        ..LogConfig::default()
    };
    let mut log = Log::open(&dir, cfg.clone()).expect("open");
    for p in &names {
        log.append_batch(b"t", p, 0, &[vec![1u8; 100], vec![2u8; 100]])
            .expect("append");
    }
    log.close().expect("close");
    // Nothing dirty: both sides pay only what syncing costs when all is on disk.
    let root = File::open(&dir).expect("open dir");
    // SAFETY: syncfs only reads the descriptor, which `root` keeps open.
    assert_eq!(unsafe { libc::syncfs(root.as_raw_fd()) }, 0);
    let t0 = Instant::now();
    for p in &names {
        let pdir = dir.join("t").join(p);
        let seg = pdir.join(format!("{:020}.log", 0));
        File::open(&seg)
            .and_then(|f| f.sync_data())
            .expect("fdatasync");
        File::open(&pdir)
            .and_then(|d| d.sync_all())
            .expect("fsync dir");
    }
    let per_partition = t0.elapsed().as_secs_f64();
    // Another program's writes not yet on disk, in the same filesystem (a
    // busy machine): what a syncfs at open also writes back.
    let files = std::cell::Cell::new(0);
    let busy = |mib: usize| {
        // A new file each time (ext4 writes back a file truncated and
        // written again on its own, at close).
        files.set(files.get() + 1);
        let other = dir.join(format!("other-program-{}.dat", files.get()));
        let mut f = File::create(&other).expect("create");
        let chunk = vec![7u8; 1 << 20];
        for _ in 0..mib {
            f.write_all(&chunk).expect("write");
        }
    };
    let mib = ((1024.0 * scale()) as usize).max(1);
    // Timed with others' writes pending; dropped without a close, as after a
    // crash (no clean mark for the next open).
    let busy_open = || {
        // SAFETY: as above.
        assert_eq!(unsafe { libc::syncfs(root.as_raw_fd()) }, 0);
        busy(mib);
        let t0 = Instant::now();
        let log = Log::open(&dir, LogConfig::default()).expect("open");
        let secs = t0.elapsed().as_secs_f64();
        assert_eq!(log.partitions(None).len(), n);
        secs
    };
    // Closed cleanly above: this open finds the clean mark and syncs nothing;
    // the next one finds none and syncs it all.
    let clean = busy_open();
    let open = busy_open();
    println!(
        "open {n} partitions, {mib} MiB of another program's writes pending: Log::open \
         after a crash {open:.3} s, after a clean close {clean:.3} s | baseline: an \
         fdatasync and a directory fsync per partition {per_partition:.3} s (the sync alone)"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// Files and directories under `dir` (itself not counted).
fn entries(dir: &Path) -> usize {
    fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    1 + if e.file_type().is_ok_and(|t| t.is_dir()) {
                        entries(&e.path())
                    } else {
                        0
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Bytes the allocator has handed out and not had back (RSS keeps freed
/// memory the allocator holds for reuse).
fn heap_in_use() -> u64 {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let m = unsafe { libc::mallinfo2() };
    (m.uordblks + m.hblkhd) as u64
}

fn rss_kib() -> u64 {
    let s = fs::read_to_string("/proc/self/status").expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Runs in a child process: opens the log at `dir`, prints the seconds it
/// took, the RSS it added (KiB) and its partitions.
fn open_child(dir: &Path) {
    let before = rss_kib();
    let t0 = Instant::now();
    // The partitions `parked` parks are parked in 1970 by its clock: kept.
    let cfg = LogConfig {
        forget_parked_hours: None,
        ..LogConfig::default()
    };
    let log = Log::open(dir, cfg).expect("open");
    let secs = t0.elapsed().as_secs_f64();
    // What the open log holds, before a listing allocates its own.
    let rss = rss_kib().saturating_sub(before);
    let n = log.partitions(None).len();
    println!("{secs} {rss} {n}");
}

/// Runs this bench as `mode` on `dir` in a child process: the words it prints.
fn child_words(mode: &str, dir: &Path) -> Vec<String> {
    let out = Command::new(std::env::current_exe().expect("exe"))
        .arg(mode)
        .arg(dir)
        .output()
        .expect("run the child");
    assert!(
        out.status.success(),
        "{mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().map(str::to_owned).collect()
}

fn open_in_child(dir: &Path) -> (f64, u64, usize) {
    let root = File::open(dir).expect("open dir");
    // SAFETY: syncfs only reads the descriptor, which `root` keeps open.
    assert_eq!(unsafe { libc::syncfs(root.as_raw_fd()) }, 0);
    let w = child_words("open-child", dir);
    (
        w[0].parse().expect("secs"),
        w[1].parse().expect("rss"),
        w[2].parse().expect("count"),
    )
}

/// `n` (scaled) partition names, a clock at 1,000,000 ms to move by hand,
/// and a log config on that clock with one hour of retention and no syncs.
fn aging(n: f64) -> (Vec<String>, std::sync::Arc<AtomicU64>, LogConfig) {
    let (names, now, cfg) = clocked(n);
    let cfg = LogConfig {
        fsync: FsyncPolicy::Never,
        retain_hours: Some(1),
        ..cfg
    };
    (names, now, cfg)
}

/// `n` (scaled) partition names, and the default config on a clock the
/// caller moves (ms since the epoch, from 1,000,000).
fn clocked(n: f64) -> (Vec<String>, std::sync::Arc<AtomicU64>, LogConfig) {
    let n = ((n * scale()) as usize).max(1);
    let names: Vec<String> = (0..n).map(|i| format!("{i:032X}")).collect();
    let now = std::sync::Arc::new(AtomicU64::new(1_000_000));
    let c = now.clone();
    let cfg = LogConfig {
        clock: std::sync::Arc::new(move || c.load(std::sync::atomic::Ordering::SeqCst)),
        ..LogConfig::default()
    };
    (names, now, cfg)
}

/// Runs in a child process: writes `n` partitions live, then lets two
/// periodic checks pass with no append (the tasks that wrote them are done);
/// prints the RSS the open log holds after the writes and after the checks,
/// the heap in use at both, and `n`.
fn live_child(dir: &Path) {
    let (names, now, cfg) = clocked(1000.0);
    let n = names.len();
    let vals = values(100, BATCH);
    let check = cfg.retention_check_ms;
    let (before, heap_before) = (rss_kib(), heap_in_use());
    let mut log = Log::open(dir, cfg).expect("open");
    for name in &names {
        for r in 0..12 {
            log.append_batch(b"t", name, (r * BATCH) as u64, &vals)
                .expect("append");
        }
        log.tick().expect("tick");
    }
    log.sync().expect("sync");
    let written = rss_kib().saturating_sub(before);
    let heap_written = heap_in_use().saturating_sub(heap_before);
    for _ in 0..2 {
        now.fetch_add(check, std::sync::atomic::Ordering::SeqCst);
        log.tick().expect("tick");
    }
    let idle = rss_kib().saturating_sub(before);
    let heap_idle = heap_in_use().saturating_sub(heap_before);
    println!("{written} {idle} {heap_written} {heap_idle} {n}");
    log.close().expect("close");
}

/// Partitions written live against the same log reopened: RSS and heap in
/// use per partition.
fn live() {
    let dir = bench_dir("live");
    let w: Vec<u64> = child_words("live-child", &dir)
        .iter()
        .map(|x| x.parse().expect("number"))
        .collect();
    let (rss_written, rss_idle, n) = (w[0], w[1], w[4] as usize);
    let (heap_written, heap_idle) = (w[2], w[3]);
    let (_, rss_open, n_open) = open_in_child(&dir);
    assert_eq!(n_open, n);
    let per = |kib: u64| kib as f64 * 1024.0 / n as f64;
    println!(
        "live {n} partitions of 12,000 x 100 B, per partition, in the log that wrote them: \
         RSS {:.0} B, heap in use {} B; after two periodic checks with no append: RSS {:.0} B, \
         heap in use {} B | the same log reopened: RSS {:.0} B",
        per(rss_written),
        heap_written / n as u64,
        per(rss_idle),
        heap_idle / n as u64,
        per(rss_open)
    );
    let _ = fs::remove_dir_all(&dir);
}

/// Emptied partitions, parked, against the same partitions in directories.
fn parked() {
    let (names, now, cfg) = aging(20_000.0);
    let n = names.len();
    let (dir_a, dir_b) = (bench_dir("parked-dirs"), bench_dir("parked"));
    for d in [&dir_a, &dir_b] {
        let mut log = Log::open(d, cfg.clone()).expect("open");
        for p in &names {
            log.append_batch(b"t", p, 0, &[vec![1u8; 100], vec![2u8; 100]])
                .expect("append");
        }
        log.close().expect("close");
    }
    let mut log = Log::open(&dir_b, cfg.clone()).expect("open");
    now.store(1_000_000 + 7_200_000, std::sync::atomic::Ordering::SeqCst);
    let t0 = Instant::now();
    log.enforce_retention().expect("retention");
    let sweep = t0.elapsed().as_secs_f64();
    assert_eq!(log.parked_count(), n);
    drop(log);
    let (open_a, rss_a, n_a) = open_in_child(&dir_a);
    let (open_b, rss_b, n_b) = open_in_child(&dir_b);
    assert_eq!((n_a, n_b), (n, n));
    println!(
        "parked {n} partitions: the sweep that deleted their records and parked them {sweep:.2} s"
    );
    println!(
        "  Log::open: parked {open_b:.3} s, RSS +{:.1} MiB, {} files and directories | \
         in directories (before) {open_a:.3} s, RSS +{:.1} MiB, {} files and directories",
        rss_b as f64 / 1024.0,
        entries(&dir_b),
        rss_a as f64 / 1024.0,
        entries(&dir_a),
    );
    let _ = fs::remove_dir_all(&dir_a);
    let _ = fs::remove_dir_all(&dir_b);
}

/// The periodic check that forgets one parked partition walks every parked
/// entry; the next one, with none due, does not.
fn forget() {
    let (names, now, cfg) = aging(20_000.0);
    let n = names.len();
    let set = |ms: u64| now.store(ms, std::sync::atomic::Ordering::SeqCst);
    let hour = 3_600_000;
    let cfg = LogConfig {
        forget_parked_hours: Some(2),
        ..cfg
    };
    let dir = bench_dir("forget");
    let mut log = Log::open(&dir, cfg.clone()).expect("open");
    // The early one: written at 1 ms and parked alone at 1 h 1 s.
    set(1);
    log.append_batch(b"t", P, 0, &[vec![1u8; 100]])
        .expect("append");
    set(1_000_000);
    for p in &names {
        log.append_batch(b"t", p, 0, &[vec![1u8; 100]])
            .expect("append");
    }
    set(hour + 1_000);
    log.enforce_retention().expect("retention");
    assert_eq!(log.parked_count(), 1);
    // The others, parked at 2 h 16 min 40 s.
    set(1_000_000 + 2 * hour);
    log.enforce_retention().expect("retention");
    assert_eq!(log.parked_count(), n + 1);
    // The early one is due 2 h after it was parked (3 h 1 s); the others at
    // 4 h 16 min 40 s.
    set(3 * hour + 10_000);
    let t0 = Instant::now();
    log.tick().expect("tick");
    let walk = t0.elapsed();
    assert_eq!(log.parked_count(), n, "the early one forgotten");
    set(3 * hour + 10_000 + cfg.retention_check_ms);
    let t0 = Instant::now();
    log.tick().expect("tick");
    let idle = t0.elapsed();
    assert_eq!(log.parked_count(), n);
    println!(
        "forget: {} parked partitions, the periodic check that forgets one (walks all): \
         {:.0} us | the next check, none due: {:.0} us",
        n + 1,
        walk.as_secs_f64() * 1e6,
        idle.as_secs_f64() * 1e6
    );
    log.close().expect("close");
    let _ = fs::remove_dir_all(&dir);
}

/// Sealed segments of many partitions expiring at once: `tick` slices
/// against one whole sweep.
fn expire() {
    let (names, now, cfg) = aging(2_000.0);
    let n = names.len();
    let cfg = LogConfig {
        retention_check_ms: 1_000,
        segment_bytes: 4096,
        ..cfg
    };
    let old: Vec<Vec<u8>> = (0..150).map(|i| vec![i as u8; 100]).collect();
    let (dir_a, dir_b) = (bench_dir("expire-sliced"), bench_dir("expire-whole"));
    let mut logs = Vec::new();
    now.store(1_000_000, std::sync::atomic::Ordering::SeqCst);
    for d in [&dir_a, &dir_b] {
        let mut log = Log::open(d, cfg.clone()).expect("open");
        for p in &names {
            log.append_batch(b"t", p, 0, &old).expect("append");
        }
        logs.push(log);
    }
    now.store(1_000_000 + 7_200_000, std::sync::atomic::Ordering::SeqCst);
    for log in &mut logs {
        for p in &names {
            log.append(b"t", p, 150, b"fresh").expect("append");
        }
    }
    let segments = |log: &Log| -> usize { log.partitions(None).iter().map(|i| i.segments).sum() };
    // On disk, as a store's files are when they expire.
    let root = File::open(&dir_a).expect("open dir");
    // SAFETY: syncfs only reads the descriptor, which `root` keeps open.
    assert_eq!(unsafe { libc::syncfs(root.as_raw_fd()) }, 0);
    let (mut b, mut a) = (logs.pop().expect("b"), logs.pop().expect("a"));
    let expired = segments(&a) - n;
    let t0 = Instant::now();
    let (mut ticks, mut longest) = (0, 0.0f64);
    while segments(&a) > n {
        let t = Instant::now();
        a.tick().expect("tick");
        longest = longest.max(t.elapsed().as_secs_f64());
        ticks += 1;
    }
    let sliced = t0.elapsed().as_secs_f64();
    let t = Instant::now();
    let deleted = b.enforce_retention().expect("retention");
    let whole = t.elapsed().as_secs_f64();
    assert_eq!((deleted, segments(&b)), (expired, n));
    println!(
        "expire {expired} segments of {n} partitions: longest tick {:.1} ms ({ticks} ticks, \
         {sliced:.2} s in all) | one whole sweep (before) {:.1} ms",
        longest * 1e3,
        whole * 1e3
    );
    drop((a, b));
    let _ = fs::remove_dir_all(&dir_a);
    let _ = fs::remove_dir_all(&dir_b);
}

fn main() {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<String> = raw
        .iter()
        .filter(|a| !a.starts_with('-'))
        .cloned()
        .collect();
    if args.first().map(String::as_str) == Some("rss-child") {
        rss_child();
        return;
    }
    if args.first().map(String::as_str) == Some("live-child") {
        live_child(Path::new(&args[1]));
        return;
    }
    if args.first().map(String::as_str) == Some("open-child") {
        open_child(Path::new(&args[1]));
        return;
    }
    if !raw.iter().any(|a| a == "--bench") {
        // `cargo test --all-targets` runs bench targets without `--bench`: these
        // benchmarks write gigabytes, so they only run under `cargo bench`.
        println!("log benchmarks: run them with `cargo bench --bench log`");
        return;
    }
    let all = args.is_empty();
    let want = |n: &str| all || args.iter().any(|a| a == n);
    if want("append") {
        append();
    }
    if want("read") {
        read();
    }
    if want("open") {
        open_many();
    }
    if want("parked") {
        parked();
    }
    if want("forget") {
        forget();
    }
    if want("expire") {
        expire();
    }
    if want("live") {
        live();
    }
    if want("rss") {
        let out = Command::new(std::env::current_exe().expect("exe"))
            .arg("rss-child")
            .output()
            .expect("run the rss child");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "rss child failed");
    }
}
