//! Measuring: CPU and RSS of the process and its threads, rates, quantiles,
//! the benches' directories and node settings.

use std::path::PathBuf;
use std::time::Instant;

use _native::node::{NodeConfig, StoreConfig};
use _native::wire::Dialect;

pub(crate) fn bench_dir(name: &str) -> PathBuf {
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
pub(crate) fn usage() -> (f64, f64) {
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
pub(crate) fn own_cpu() -> f64 {
    // SAFETY: clock_gettime only writes the struct it is given.
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts
    };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// CPU seconds per thread of this process, by thread id: (name, seconds).
pub(crate) fn thread_cpu() -> std::collections::BTreeMap<u64, (String, f64, f64)> {
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
pub(crate) fn print_thread_cpu(
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
pub(crate) struct Rate {
    pub(crate) per_sec: f64,
    pub(crate) cpu_us: f64,
    /// Context switches per 1000 records (voluntary + involuntary).
    pub(crate) switches_k: f64,
}

impl Rate {
    pub(crate) fn measure(n: u64, run: impl FnOnce()) -> Self {
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

/// p50, p99, p99.9 and max of `lat` (ms).
pub(crate) fn quantiles(mut lat: Vec<f64>) -> [f64; 4] {
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let q = |x: f64| lat[((lat.len() as f64 - 1.0) * x) as usize];
    [q(0.5), q(0.99), q(0.999), q(1.0)]
}

pub(crate) fn status_kib(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn peers(eps: &[&str]) -> NodeConfig {
    NodeConfig {
        peers: eps.iter().map(|s| s.to_string()).collect(),
        wire: match std::env::var("DAFKA_BENCH_WIRE").as_deref() {
            Ok("zproto") => Dialect::Zproto,
            _ => Dialect::Rfc,
        },
        ..Default::default()
    }
}

/// The store's group-commit interval in this run (its default, or
/// `DAFKA_BENCH_FLUSH_MS`); the raw-disk baselines fdatasync as often.
pub(crate) fn flush_ms() -> u64 {
    std::env::var("DAFKA_BENCH_FLUSH_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(StoreConfig::default().log.flush_interval_ms)
}
