//! A store whose storage fails (disk full, failing syncs, a damaged or
//! failing partition): it stops ACKing what is not durable, loses nothing,
//! says so, and resumes.

use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use _native::node::store::{Store, StoreConfig};
use _native::node::*;

mod common;
use common::stores::*;
use common::wait_for;

/// A store whose log fails an I/O operation with `errno` while `fails(op,
/// path)` says so.
fn failing_store(
    dir: &std::path::Path,
    errno: i32,
    fails: impl Fn(_native::log::IoOp, &std::path::Path) -> bool + Send + Sync + 'static,
) -> Store {
    let mut cfg = StoreConfig::default();
    cfg.log.failpoint = Some(std::sync::Arc::new(move |op, path: &std::path::Path| {
        if fails(op, path) {
            Err(std::io::Error::from_raw_os_error(errno))
        } else {
            Ok(())
        }
    }));
    Store::open(dir, cfg).unwrap()
}

/// A store whose log fails `ops` with `errno` while the flag is set, and
/// the flag.
fn store_failing_when(
    dir: &std::path::Path,
    errno: i32,
    ops: &'static [_native::log::IoOp],
) -> (Store, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let on = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let f = on.clone();
    let s = failing_store(dir, errno, move |op, _| f.load(SeqCst) && ops.contains(&op));
    (s, on)
}

/// Calls `each` (it keeps records coming) about every millisecond for
/// `secs`, checking that the store reports its error at every sample.
fn assert_error_stays(s: &Store, secs: u64, mut each: impl FnMut()) {
    let (mut samples, mut clear) = (0, 0);
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        each();
        samples += 1;
        if s.shared().last_error.lock().unwrap().is_none() {
            clear += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        clear, 0,
        "the error cleared at {clear} of {samples} samples"
    );
}

/// Once storage works again: everything ACKed, the error cleared, the
/// store's partition holding `value(0..n)`.
fn assert_resumes(s: &Store, p: &Producer, n: usize) {
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0, "resumed");
    wait_for("the error to clear", Duration::from_secs(20), || {
        s.shared().last_error.lock().unwrap().is_none()
    });
    assert_holds_values(s, n);
}

#[test]
fn disk_full_stops_acks_loses_nothing_and_resumes() {
    use _native::log::IoOp;

    let dir = tempfile::tempdir().unwrap();
    // ENOSPC
    let (s, full) = store_failing_when(dir.path(), 28, &[IoOp::Write, IoOp::Sync, IoOp::Create]);
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send_many((0..1000).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);

    full.store(true, SeqCst);
    p.send_many((1000..2000).map(value).collect(), None)
        .unwrap();
    wait_for(
        "the store to report the error",
        Duration::from_secs(20),
        || s.shared().last_error.lock().unwrap().is_some(),
    );
    let err = s.shared().last_error.lock().unwrap().clone().unwrap();
    assert!(
        err.contains("No space left") || err.contains("os error 28"),
        "{err}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        p.acked_offset(),
        Some(999),
        "nothing ACKed while the disk is full"
    );

    full.store(false, SeqCst);
    // The error clears a recovery period after the last failure.
    assert_resumes(&s, &p, 2000);
    p.close().unwrap();
    s.close().unwrap();
}

#[test]
fn a_failing_sync_stays_reported_until_a_sync_succeeds() {
    use _native::log::IoOp;

    // Writes succeed but every fdatasync fails (EIO: a dying disk). Records
    // reach the page cache all along; that is no reason to report the store
    // healthy, or to ACK, while nothing becomes durable.
    let dir = tempfile::tempdir().unwrap();
    let (s, failing) = store_failing_when(dir.path(), 5, &[IoOp::Sync]);
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send_many((0..100).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);

    failing.store(true, SeqCst);
    let mut sent = 100;
    p.send(value(sent), None).unwrap();
    sent += 1;
    wait_for("the sync error", Duration::from_secs(20), || {
        s.shared().last_error.lock().unwrap().is_some()
    });
    // Records keep coming through two recoveries (one a second).
    assert_error_stays(&s, 2, || {
        p.send(value(sent), None).unwrap();
        sent += 1;
    });
    assert!(
        p.acked_offset() < Some(100),
        "nothing ACKed past the failing syncs"
    );

    failing.store(false, SeqCst);
    assert_resumes(&s, &p, sent as usize);
    p.close().unwrap();
    s.close().unwrap();
}

#[test]
fn a_nearly_full_disk_stays_reported_though_some_appends_fit() {
    use _native::log::IoOp;
    use std::sync::atomic::{AtomicBool, AtomicU64};
    use std::sync::Arc;

    // ENOSPC on two writes of three: a disk with a little room now and then
    // (each recovery frees a torn tail). Appends that fit are no reason to
    // report the store healthy, even for a moment.
    let dir = tempfile::tempdir().unwrap();
    let full = Arc::new(AtomicBool::new(false));
    let (f, w) = (full.clone(), AtomicU64::new(0));
    let s = failing_store(dir.path(), 28, move |op, _| {
        f.load(SeqCst) && op == IoOp::Write && w.fetch_add(1, SeqCst) % 3 != 0
    });
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send_many((0..100).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);

    full.store(true, SeqCst);
    let mut sent = 100;
    let mut send = || {
        p.send_many((sent..sent + 10).map(value).collect(), None)
            .unwrap();
        sent += 10;
    };
    wait_for("the disk-full error", Duration::from_secs(20), || {
        send();
        std::thread::sleep(Duration::from_millis(1));
        s.shared().last_error.lock().unwrap().is_some()
    });
    assert_error_stays(&s, 3, send);

    full.store(false, SeqCst);
    assert_resumes(&s, &p, sent as usize);
    p.close().unwrap();
    s.close().unwrap();
}

#[test]
fn a_damaged_partition_does_not_keep_a_store_from_recovering_from_a_full_disk() {
    use _native::log::{IoOp, Log, LogConfig};
    use std::os::unix::fs::FileExt;

    let dir = tempfile::tempdir().unwrap();
    // A partition whose damage recovery refuses: a bad record, valid ones after.
    let logdir = dir.path().join(_native::node::store::LOG_DIR);
    let bad = "D".repeat(32);
    let mut log = Log::open(&logdir, LogConfig::default()).unwrap();
    let vals: Vec<Vec<u8>> = (0..50).map(value).collect();
    log.append_batch(b"t", &bad, 0, &vals).unwrap();
    log.close().unwrap();
    let pdir = logdir.join("t").join(&bad);
    let seg = pdir.join(format!("{:020}.log", 0));
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.write_all_at(b"\xff\xff", 200).unwrap();
    drop(f);
    std::fs::remove_file(seg.with_extension("index")).unwrap();

    // ENOSPC
    let (s, full) = store_failing_when(dir.path(), 28, &[IoOp::Write, IoOp::Sync, IoOp::Create]);
    wait_for(
        "the damaged partition in stats",
        Duration::from_secs(10),
        || s.shared().damaged_partitions.load(SeqCst) == 1,
    );
    let p = producer(1, &[s.endpoint()]);
    s.connect(p.endpoint()).unwrap();
    p.send_many((0..1000).map(value).collect(), None).unwrap();
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0);
    full.store(true, SeqCst);
    p.send_many((1000..2000).map(value).collect(), None)
        .unwrap();
    wait_for(
        "the store to report the error",
        Duration::from_secs(20),
        || s.shared().last_error.lock().unwrap().is_some(),
    );
    full.store(false, SeqCst);
    assert_eq!(p.flush(Duration::from_secs(30)).unwrap(), 0, "resumed");
    wait_for("the error to clear", Duration::from_secs(10), || {
        s.shared().last_error.lock().unwrap().is_none()
    });
    assert_eq!(
        s.shared().damaged_partitions.load(SeqCst),
        1,
        "still set aside"
    );
    p.close().unwrap();
    s.close().unwrap();
}

#[test]
fn a_partition_failing_to_append_does_not_hold_back_the_others() {
    use _native::log::IoOp;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    let bad = producer(1, &[]);
    let bad_addr = bad.address().to_string();
    // EIO on the writes of `bad`'s partition only.
    let s = failing_store(dir.path(), 5, move |op, path| {
        op == IoOp::Write && path.to_string_lossy().contains(&bad_addr)
    });
    let good = producer(1, &[s.endpoint()]);
    bad.connect(s.endpoint()).unwrap();
    s.connect(bad.endpoint()).unwrap();
    s.connect(good.endpoint()).unwrap();
    // The failing partition's records arrive at nearly every turn.
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let streamer = std::thread::spawn(move || {
        let mut i = 0;
        while !stop2.load(SeqCst) {
            bad.send_many((i..i + 50).map(value).collect(), None)
                .unwrap();
            i += 50;
            std::thread::sleep(Duration::from_millis(1));
        }
        bad
    });
    std::thread::sleep(Duration::from_millis(300));
    good.send_many((0..5000).map(value).collect(), None)
        .unwrap();
    let left = good.flush(Duration::from_secs(20)).unwrap();
    stop.store(true, SeqCst);
    let bad = streamer.join().unwrap();
    assert_eq!(
        left,
        0,
        "the healthy partition is ACKed: {:?}",
        s.shared().counters
    );
    assert_eq!(good.acked_offset(), Some(4999));
    bad.close().unwrap();
    good.close().unwrap();
    s.close().unwrap();
}
