//! Retention and parking (`retention.rs`, `parked.rs`): segments deleted by
//! age and size, partitions parked and forgotten, interrupted parkings, and
//! sweeps a batch at a time.

use std::os::unix::fs::FileExt;
use std::sync::atomic::AtomicBool;

use super::*;
use crate::log::retention::{PARK_BATCH, RETAIN_BATCH};

#[test]
fn retention_by_age_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000_000);
    let hour = 3_600_000;
    let cfg = || LogConfig {
        retain_hours: Some(2),
        retention_check_ms: 1_000,
        ..small(&clock)
    };
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    let vals: Vec<Vec<u8>> = (0..30).map(value).collect();
    log.append_batch(T, P, 0, &vals).unwrap();
    clock.set(1_000_000 + hour);
    let vals: Vec<Vec<u8>> = (30..60).map(value).collect();
    log.append_batch(T, P, 30, &vals).unwrap();
    let segs_before = log.partition(T, P).unwrap().segments;
    assert_eq!(
        log.enforce_retention().unwrap(),
        0,
        "nothing older than 2 h yet"
    );
    clock.set(1_000_000 + 2 * hour + 1);
    log.tick().unwrap();
    let info = log.partition(T, P).unwrap();
    assert!(info.first_offset > 0 && info.first_offset <= 30, "{info:?}");
    assert!(info.segments < segs_before);
    assert_eq!(read_all(&log)[0].0, info.first_offset);
    // Everything old: every segment goes, the active one rolled first (a
    // partition whose producer is gone would otherwise keep it forever); the
    // partition keeps its next offset, parked: no file, no directory.
    clock.set(1_000_000 + 10 * hour);
    log.enforce_retention().unwrap();
    let info = log.partition(T, P).unwrap();
    assert_eq!(info.segments, 0);
    assert_eq!(info.next_offset, 60);
    assert_eq!(info.first_offset, 60);
    assert_eq!(info.bytes, 0);
    assert!(read_all(&log).is_empty());
    assert!(!pdir(dir.path()).exists());
    assert_eq!(log.parked_count(), 1);
    assert!(matches!(
        log.read(T, P, 0, 1, 1),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    log.close().unwrap();
    let log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(log.partition(T, P).unwrap(), info);

    // By size.
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retain_bytes: Some(1_000),
        retain_hours: None,
        ..small(&clock)
    };
    let mut log = Log::open(dir.path(), cfg).unwrap();
    let vals: Vec<Vec<u8>> = (0..100).map(value).collect();
    log.append_batch(T, P, 0, &vals).unwrap();
    assert!(log.partition(T, P).unwrap().bytes > 1_000);
    assert!(log.enforce_retention().unwrap() > 0);
    let info = log.partition(T, P).unwrap();
    assert!(info.bytes <= 1_000, "{info:?}");
    assert_eq!(read_all(&log).len() as u64, 100 - info.first_offset);
}

/// A log of `names` in topic `T` (one record each at `at`) and one partition
/// of topic `other`, with 1 h retention.
fn aged_log(dir: &Path, clock: &Clock, names: &[&str], fp: Option<Failpoint>) -> Log {
    let cfg = LogConfig {
        retain_hours: Some(1),
        failpoint: fp,
        ..small(clock)
    };
    let mut log = Log::open(dir, cfg).unwrap();
    for (i, n) in names.iter().enumerate() {
        let vals: Vec<Vec<u8>> = (0..=i as u64).map(value).collect();
        log.append_batch(T, n, 10, &vals).unwrap();
    }
    log.append(b"other", "Z", 0, b"z").unwrap();
    log
}

fn parked_lines(root: &Path) -> usize {
    fs::read_to_string(root.join(PARKED_FILE)).map_or(0, |s| s.lines().count())
}

#[test]
fn a_partition_retention_emptied_is_parked_without_files_and_keeps_its_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000_000);
    let mut log = aged_log(dir.path(), &clock, &["A", "B", "C"], None);
    let before = log.partitions(None);
    clock.set(1_000_000 + 2 * 3_600_000);
    assert!(log.enforce_retention().unwrap() >= 4);
    assert_eq!(log.parked_count(), 4);
    assert_eq!(parked_lines(dir.path()), 4);
    for n in ["A", "B", "C"] {
        assert!(!dir.path().join("weather").join(n).exists(), "{n}");
    }
    // Everything answers as for an empty partition at the same next offset.
    let got = log.partitions(None);
    assert_eq!(got.len(), 4);
    for (b, g) in before.iter().zip(&got) {
        assert_eq!((&g.topic, &g.partition), (&b.topic, &b.partition));
        assert_eq!(
            (g.first_offset, g.next_offset, g.durable_next),
            (b.next_offset, b.next_offset, b.next_offset)
        );
        assert_eq!((g.bytes, g.segments), (0, 0));
    }
    assert_eq!(log.partitions(Some(b"other")).len(), 1);
    assert_eq!(log.topics(), vec![b"other".to_vec(), T.to_vec()]);
    assert_eq!(log.next_offset(T, "B"), Some(12));
    assert_eq!(log.first_offset(T, "B"), Some(12));
    assert_eq!(log.durable_next(T, "B"), Some(12));
    assert!(log.read(T, "B", 12, 10, 1000).unwrap().is_empty());
    assert_eq!(
        log.read_with(T, "B", 12, 10, 1000, |_, _, _| {}).unwrap(),
        0
    );
    assert!(matches!(
        log.read(T, "B", 11, 1, 1),
        Err(LogError::OffsetOutOfRange {
            first: 12,
            next: 12,
            ..
        })
    ));
    assert_eq!(log.offset_for_time(T, "B", 0).unwrap(), None);
    log.sync_partition(T, "B").unwrap();
    assert!(matches!(
        log.read(T, "Q", 0, 1, 1),
        Err(LogError::UnknownPartition { .. })
    ));

    // Appending where it stood makes it a partition again; anywhere else is
    // refused as for an open one.
    assert!(matches!(
        log.append(T, "A", 12, b"a"),
        Err(LogError::OffsetMismatch {
            expected: 11,
            got: 12,
            ..
        })
    ));
    log.append(T, "A", 11, b"a").unwrap();
    assert_eq!(log.parked_count(), 3);
    assert_eq!(log.partition(T, "A").unwrap().segments, 1);
    assert_eq!(log.read(T, "A", 11, 10, 1000).unwrap()[0].value, b"a");
    // Skipping moves a parked partition's offset.
    assert!(log.skip_to(T, "B", 12).is_err());
    log.skip_to(T, "B", 50).unwrap();
    assert_eq!(log.next_offset(T, "B"), Some(50));
    assert_eq!(log.parked_count(), 3);
    log.close().unwrap();

    // Reopened: the directory of A wins over its line, B stands at 50, and
    // the registry is rewritten without stale lines.
    assert_eq!(parked_lines(dir.path()), 5);
    let log = Log::open(dir.path(), small(&clock)).unwrap();
    assert_eq!(log.parked_count(), 3);
    assert_eq!(parked_lines(dir.path()), 3);
    assert_eq!(log.next_offset(T, "A"), Some(12));
    assert_eq!(log.next_offset(T, "B"), Some(50));
    assert_eq!(log.next_offset(T, "C"), Some(13));
    assert_eq!(log.next_offset(b"other", "Z"), Some(1));
    log.close().unwrap();

    // A read-only open sees them and rewrites nothing.
    fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join(PARKED_FILE))
        .unwrap()
        .write_all_at(b"torn", 0)
        .unwrap();
    let bytes = fs::read(dir.path().join(PARKED_FILE)).unwrap();
    let ro = Log::open(dir.path(), read_only(&clock)).unwrap();
    assert_eq!(ro.parked_count(), 3);
    assert_eq!(ro.next_offset(T, "B"), Some(50));
    drop(ro);
    assert_eq!(fs::read(dir.path().join(PARKED_FILE)).unwrap(), bytes);
    // A writable one leaves the torn line out and rewrites the file.
    let log = Log::open(dir.path(), small(&clock)).unwrap();
    assert_eq!(log.parked_count(), 3);
    assert_eq!(parked_lines(dir.path()), 3);
    assert!(fs::read_to_string(dir.path().join(PARKED_FILE))
        .unwrap()
        .ends_with('\n'));
}

/// A partition directory without segments and without a `.parked` line (its
/// line forgotten at open, or a crash left it without a segment) holds
/// nothing: a writable open removes it, a read-only one leaves it.
#[test]
fn an_empty_partition_directory_nothing_names_is_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000);
    fs::create_dir_all(pdir(dir.path())).unwrap();
    Log::open(dir.path(), read_only(&clock)).unwrap();
    assert!(pdir(dir.path()).exists());
    let log = Log::open(dir.path(), small(&clock)).unwrap();
    assert!(!pdir(dir.path()).exists());
    assert_eq!(log.next_offset(T, P), None);
    assert!(log.partitions(None).is_empty());
}

#[test]
fn a_parked_partition_is_forgotten_forget_parked_hours_after_it_was_parked() {
    const H: u64 = 3_600_000;
    let dir = tempfile::tempdir().unwrap();
    let t0 = 100 * H;
    let clock = Clock::new(t0);
    let cfg = LogConfig {
        retain_hours: Some(1),
        forget_parked_hours: Some(3),
        ..small(&clock)
    };
    let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
    log.append_batch(T, "A", 10, &[value(0)]).unwrap();
    log.append_batch(T, "B", 20, &[value(1)]).unwrap();
    log.append(b"other", "Z", 0, b"z").unwrap();
    // Parked at t1; B is written again at once (a directory again).
    let t1 = t0 + 2 * H;
    clock.set(t1);
    log.enforce_retention().unwrap();
    assert_eq!(log.parked_count(), 3);
    log.append(T, "B", 21, b"b").unwrap();
    assert_eq!(log.parked_count(), 2);
    // Two hours on: nothing is forgotten yet; B is parked now.
    clock.set(t1 + 2 * H);
    log.tick().unwrap();
    assert_eq!(log.parked_count(), 3);
    // Three hours after A and Z were parked, the periodic check forgets them.
    clock.set(t1 + 3 * H);
    log.tick().unwrap();
    assert_eq!(log.parked_count(), 1);
    assert_eq!(log.next_offset(T, "A"), None);
    assert_eq!(log.next_offset(b"other", "Z"), None);
    assert_eq!(log.next_offset(T, "B"), Some(22));
    let listed: Vec<String> = log
        .partitions(None)
        .into_iter()
        .map(|i| i.partition)
        .collect();
    assert_eq!(listed, ["B"]);
    assert_eq!(log.topics(), vec![T.to_vec()]);
    // Their lines stay until stale ones outnumber the rest.
    assert_eq!(parked_lines(dir.path()), 4);
    // A forgotten partition is a new one: it may start anywhere.
    log.append(T, "A", 0, b"a").unwrap();
    assert_eq!(log.next_offset(T, "A"), Some(1));
    // Parked again, lower than its forgotten line (the last line wins, see
    // below); B, parked at t1 + 2 h, is forgotten.
    clock.set(t1 + 5 * H);
    log.tick().unwrap();
    assert_eq!(log.parked_count(), 1);
    assert_eq!(log.next_offset(T, "B"), None);
    log.close().unwrap();
    assert_eq!(parked_lines(dir.path()), 5);
    let log = Log::open(dir.path(), cfg.clone()).unwrap();
    assert_eq!(log.next_offset(T, "A"), Some(1));
    assert_eq!(log.next_offset(T, "B"), None);
    assert_eq!(log.next_offset(b"other", "Z"), None);
    assert_eq!(
        parked_lines(dir.path()),
        1,
        "rewritten without the forgotten lines"
    );
    log.close().unwrap();

    // A line of the older form (no parking time) counts as parked when the
    // log opens, and gets its time written.
    let body = "other Q 5";
    let line = format!("{body} {:08x}\n", crc32c::crc32c(body.as_bytes()));
    OpenOptions::new()
        .append(true)
        .open(dir.path().join(PARKED_FILE))
        .unwrap()
        .write_all_at(line.as_bytes(), 0)
        .unwrap();
    let t2 = t1 + 6 * H;
    clock.set(t2);
    let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
    assert_eq!(log.next_offset(b"other", "Q"), Some(5));
    let text = fs::read_to_string(dir.path().join(PARKED_FILE)).unwrap();
    assert_eq!(text.lines().count(), 2);
    assert!(text.lines().all(|l| l.split(' ').count() == 5), "{text}");
    // A is due (parked at t1 + 5 h), Q is not yet.
    clock.set(t2 + 2 * H);
    log.tick().unwrap();
    assert_eq!(log.next_offset(T, "A"), None);
    assert_eq!(log.next_offset(b"other", "Q"), Some(5));
    clock.set(t2 + 3 * H);
    log.tick().unwrap();
    assert_eq!(log.parked_count(), 0);
    log.close().unwrap();

    // None keeps them for good.
    let keep = LogConfig {
        forget_parked_hours: None,
        ..cfg
    };
    let dir = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), keep).unwrap();
    log.append(T, "C", 0, b"c").unwrap();
    clock.set(t2 + 5 * H);
    log.tick().unwrap();
    assert_eq!(log.parked_count(), 1);
    clock.set(t2 + 5000 * H);
    log.tick().unwrap();
    assert_eq!(log.next_offset(T, "C"), Some(1));
}

#[test]
fn parking_interrupted_leaves_the_same_partition_and_a_sync_in_flight_delays_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000_000);
    let fail_remove = Arc::new(AtomicBool::new(true));
    let fr = fail_remove.clone();
    let fp: Failpoint = Arc::new(move |op, path| {
        // The index of A's segment (at 10), which parking deletes.
        let index = path.ends_with("A/00000000000000000010.index");
        if op == IoOp::Remove && index && fr.load(Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(5)); // EIO
        }
        Ok(())
    });
    let mut log = aged_log(dir.path(), &clock, &["A", "B"], Some(fp));
    // B's append is taken by a sync batch that has not finished.
    log.sync().unwrap();
    log.append(T, "B", 12, b"b").unwrap();
    let batch = log.begin_sync();
    assert!(!batch.is_empty());
    clock.set(1_000_000 + 2 * 3_600_000);
    // Retention deletes every record. Parking A fails to delete its index
    // (it is parked all the same, its files left behind: the same partition,
    // its records past the age limit); B, in the batch, is not parked: its
    // expired segment rolls to an empty one as before parking.
    log.enforce_retention().unwrap();
    assert_eq!(log.next_offset(T, "B"), Some(13));
    assert_eq!(log.first_offset(T, "B"), Some(13));
    assert_eq!(
        log.partition(T, "B").unwrap().segments,
        1,
        "not parked while syncing"
    );
    assert_eq!(log.partition(T, "A").unwrap().segments, 0);
    assert!(dir.path().join("weather").join("A").exists(), "files left");
    log.finish_sync(batch.run()).unwrap();
    fail_remove.store(false, Ordering::SeqCst);
    log.enforce_retention().unwrap();
    assert_eq!(log.partition(T, "B").unwrap().segments, 0);
    assert!(!dir.path().join("weather").join("B").exists());
    drop(log);
    // Reopened: A's leftover directory wins over its line, as the same
    // partition at the same offset, and the next sweep parks it.
    let clock2 = Clock::new(1_000_000 + 3 * 3_600_000);
    let mut log = Log::open(
        dir.path(),
        LogConfig {
            retain_hours: Some(1),
            ..small(&clock2)
        },
    )
    .unwrap();
    assert_eq!(log.partition(T, "A").unwrap().segments, 1);
    assert_eq!(log.next_offset(T, "A"), Some(11));
    assert_eq!(log.parked_count(), 2, "B and Z");
    log.enforce_retention().unwrap();
    assert_eq!(log.parked_count(), 3);
    assert!(!dir.path().join("weather").join("A").exists());
    assert_eq!(log.next_offset(T, "A"), Some(11));
}

#[test]
fn tick_parks_many_expiring_partitions_a_batch_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000_000);
    let cfg = || LogConfig {
        retain_hours: Some(1),
        retention_check_ms: 1_000,
        fsync: FsyncPolicy::Never,
        ..small(&clock)
    };
    let n = 2 * PARK_BATCH + 88;
    let names: Vec<String> = (0..n).map(|i| format!("{i:032X}")).collect();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    for p in &names {
        log.append(T, p, 0, b"x").unwrap();
    }
    clock.set(1_000_000 + 2 * 3_600_000);
    // Each tick parks one batch, and the next tick is due at once until all are.
    for want in [PARK_BATCH, 2 * PARK_BATCH, n] {
        log.tick().unwrap();
        assert_eq!(log.parked_count(), want);
        assert_eq!(
            log.next_deadline() <= clock.0.load(Ordering::SeqCst),
            want < n
        );
    }
    log.tick().unwrap();
    assert_eq!(log.parked_count(), n);
    assert!(log
        .partitions(None)
        .iter()
        .all(|i| i.segments == 0 && i.next_offset == 1));
    drop(log);
    // `enforce_retention` itself parks every one at once.
    let dir = tempfile::tempdir().unwrap();
    clock.set(1_000_000);
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    for p in &names {
        log.append(T, p, 0, b"x").unwrap();
    }
    clock.set(1_000_000 + 2 * 3_600_000);
    assert_eq!(log.enforce_retention().unwrap(), n);
    assert_eq!(log.parked_count(), n);
}

#[test]
fn tick_deletes_many_expired_segments_a_batch_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000_000);
    let later = 1_000_000 + 2 * 3_600_000;
    let cfg = LogConfig {
        retain_hours: Some(1),
        retention_check_ms: 1_000,
        fsync: FsyncPolicy::Never,
        ..small(&clock)
    };
    let names: Vec<String> = (0..100).map(|i| format!("{i:032X}")).collect();
    let mut log = Log::open(dir.path(), cfg).unwrap();
    let old: Vec<Vec<u8>> = (0..60).map(value).collect();
    for p in &names {
        log.append_batch(T, p, 0, &old).unwrap();
    }
    // A fresh record each: the partitions keep their active segments, and
    // only their older, sealed ones expire.
    clock.set(later);
    for p in &names {
        log.append(T, p, 60, b"fresh").unwrap();
    }
    let segments = |log: &Log| -> usize { log.partitions(None).iter().map(|i| i.segments).sum() };
    let mut left = segments(&log) - names.len();
    assert!(left > 2 * RETAIN_BATCH, "{left} expired segments");
    while left > 0 {
        let before = segments(&log);
        log.tick().unwrap();
        let deleted = before - segments(&log);
        assert_eq!(deleted, left.min(RETAIN_BATCH), "one batch per tick");
        left -= deleted;
        if left > 0 {
            assert!(log.next_deadline() <= later, "more to delete: due at once");
            assert!(log.retention_pending());
        }
    }
    log.tick().unwrap();
    assert!(
        log.next_deadline() > later,
        "nothing left: due at the next check"
    );
    assert!(!log.retention_pending());
    assert_eq!(segments(&log), names.len());
    assert_eq!(log.parked_count(), 0);
    for p in &names {
        let first = log.first_offset(T, p).unwrap();
        let got = log.read(T, p, first, usize::MAX, usize::MAX).unwrap();
        assert_eq!(
            got.last().map(|r| (r.offset, r.value.as_slice())),
            Some((60, b"fresh".as_slice()))
        );
    }
}
