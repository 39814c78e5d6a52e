use _native::log::{FsyncPolicy, Log, LogConfig};
use std::time::Instant;
fn main() {
    let d = std::env::temp_dir().join("probe-log");
    let _ = std::fs::remove_dir_all(&d);
    let mut log = Log::open(
        &d,
        LogConfig {
            fsync: FsyncPolicy::Interval,
            flush_interval_ms: std::env::var("FI").unwrap().parse().unwrap(),
            flush_messages: 100_000,
            ..Default::default()
        },
    )
    .unwrap();
    let v = vec![1u8; 100];
    let t = Instant::now();
    for i in 0..100_000u64 {
        log.append(b"t", "85E3C6EBDC7B4156AD9C43611EBC09CE", i, &v)
            .unwrap();
        log.tick().unwrap();
    }
    println!("100k single appends+tick: {:?}", t.elapsed());
}
