//! Opening, appending and reading: the offset rule, names on disk, skips,
//! time lookup, read-only opens, options, large values, the writer's lock,
//! and what a log holds open (descriptors, index buffers).

use super::*;

#[test]
fn append_read_reopen_and_offset_rules() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000);
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    assert!(log.read(T, P, 0, 10, 100).is_err(), "unknown partition");
    // A partition may start mid-stream.
    log.append(T, P, 100, b"first").unwrap();
    let vals: Vec<Vec<u8>> = (101..160).map(value).collect();
    log.append_batch(T, P, 101, &vals).unwrap();
    assert_eq!(log.next_offset(T, P), Some(160));
    assert_eq!(log.first_offset(T, P), Some(100));
    let gap = log.append(T, P, 161, b"gap").unwrap_err();
    assert!(
        matches!(
            gap,
            LogError::OffsetMismatch {
                expected: 160,
                got: 161,
                ..
            }
        ),
        "{gap}"
    );
    assert!(gap.to_string().contains("a gap"));
    let huge = log
        .append_batch(b"big", P, u64::MAX, &[b"a", b"b"])
        .unwrap_err();
    assert!(huge.to_string().contains("overflow"), "{huge}");
    let dup = log.append(T, P, 159, b"dup").unwrap_err();
    assert!(dup.to_string().contains("already stored"), "{dup}");
    assert!(matches!(
        log.read(T, P, 99, 1, 1),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert!(matches!(
        log.read(T, P, 161, 1, 1),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert!(log.read(T, P, 160, 10, 10).unwrap().is_empty());
    // Byte budget: always one record, then whole records within the budget.
    let one = log.read(T, P, 100, 100, 1).unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].value, b"first");
    assert_eq!(one[0].timestamp, 1_000);
    let some = log.read(T, P, 120, 100, 60).unwrap();
    let total: usize = some.iter().map(|r| r.value.len()).sum();
    assert!(total <= 60 && !some.is_empty());
    assert_eq!(some[0].offset, 120);
    let info = log.partition(T, P).unwrap();
    assert!(info.segments > 3, "segments roll at 400 bytes: {info:?}");
    let before = read_all(&log);
    assert_eq!(before.len(), 60);
    log.close().unwrap();

    let log = Log::open(dir.path(), small(&clock)).unwrap();
    assert_eq!(read_all(&log), before);
    assert_eq!(
        log.partition(T, P).unwrap(),
        PartitionInfo {
            durable_next: 160,
            ..info
        }
    );
    assert_eq!(log.durable_next(T, P), Some(160));
    assert_eq!(log.topics(), vec![T.to_vec()]);
}

#[test]
fn odd_topic_names_round_trip_through_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1);
    let names: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"..".to_vec(),
        b"a/b".to_vec(),
        vec![0, 255, 37],
    ];
    {
        let mut log = Log::open(dir.path(), small(&clock)).unwrap();
        for n in &names {
            log.append(n, P, 0, n).unwrap();
        }
        assert!(log.append(b"x", "../../etc", 0, b"v").is_err());
        log.close().unwrap();
    }
    let log = Log::open(dir.path(), small(&clock)).unwrap();
    let mut want = names.clone();
    want.sort();
    assert_eq!(log.topics(), want);
    for n in &names {
        assert_eq!(log.read(n, P, 0, 1, 100).unwrap()[0].value, *n);
    }
}

#[test]
fn skip_to_drops_every_record_and_continues_at_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000);
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    for i in 0..40 {
        log.append(T, P, i, &value(i)).unwrap();
    }
    assert!(seg_files(&pdir(dir.path()), "log").len() > 2);
    for bad in [39, 40] {
        let err = log.skip_to(T, P, bad).unwrap_err();
        assert!(matches!(err, LogError::Invalid(_)), "{err}");
    }
    assert!(matches!(
        log.skip_to(T, "0000", 100),
        Err(LogError::UnknownPartition { .. })
    ));
    log.skip_to(T, P, 100).unwrap();
    assert_eq!(log.first_offset(T, P), Some(100));
    assert_eq!(log.next_offset(T, P), Some(100));
    assert!(log.append(T, P, 40, b"x").is_err());
    log.append_batch(T, P, 100, &[value(100), value(101)])
        .unwrap();
    log.sync().unwrap();
    assert_eq!(log.durable_next(T, P), Some(102));
    assert_eq!(read_all(&log), vec![(100, value(100)), (101, value(101))]);
    log.close().unwrap();
    // One segment is left, at 100, and a reopen finds the same.
    let segs = seg_files(&pdir(dir.path()), "log");
    assert_eq!(segs, vec![segment::paths(&pdir(dir.path()), 100).0]);
    let log = Log::open(dir.path(), small(&clock)).unwrap();
    assert_eq!(read_all(&log), vec![(100, value(100)), (101, value(101))]);
    log.close().unwrap();
}

#[test]
fn offset_for_time_with_a_clock_going_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(0);
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    let times = [100u64, 200, 150, 300, 300, 250, 400, 500];
    for (i, t) in times.iter().enumerate() {
        clock.set(*t);
        let vals: Vec<Vec<u8>> = (0..7).map(|j| value(i as u64 * 7 + j)).collect();
        log.append_batch(T, P, i as u64 * 7, &vals).unwrap();
    }
    for ts in [
        0u64, 100, 101, 150, 199, 200, 201, 260, 300, 301, 450, 500, 501,
    ] {
        let want = times.iter().position(|t| *t >= ts).map(|i| i as u64 * 7);
        assert_eq!(log.offset_for_time(T, P, ts).unwrap(), want, "ts {ts}");
    }
}

#[test]
fn read_only_open_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, last, all) = build(dir.path(), 10);
    OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(last + 5)
        .unwrap();
    fs::remove_file(seg.with_extension("index")).unwrap();
    let clock = Clock::new(5);
    let mut log = Log::open(dir.path(), read_only(&clock)).unwrap();
    assert_eq!(read_all(&log), all[..9]);
    assert!(matches!(
        log.append(T, P, 9, b"x"),
        Err(LogError::ReadOnly(_))
    ));
    assert_eq!(fs::metadata(&seg).unwrap().len(), last + 5);
    assert!(!seg.with_extension("index").exists());
}

#[test]
fn config_is_validated() {
    let bad = LogConfig {
        segment_bytes: 10,
        ..LogConfig::default()
    };
    let err = Log::open(tempfile::tempdir().unwrap().path(), bad).unwrap_err();
    assert!(err.to_string().contains("segment_bytes"), "{err}");
    let bad = LogConfig {
        max_open_files: Some(0),
        ..LogConfig::default()
    };
    let err = Log::open(tempfile::tempdir().unwrap().path(), bad).unwrap_err();
    assert!(err.to_string().contains("max_open_files"), "{err}");
    // A deadline past any clock (it would overflow one).
    let bad = LogConfig {
        flush_interval_ms: u64::MAX,
        ..LogConfig::default()
    };
    let err = Log::open(tempfile::tempdir().unwrap().path(), bad).unwrap_err();
    assert!(err.to_string().contains("flush_interval_ms"), "{err}");
    // Forgetting every parked partition at once (None keeps them).
    let bad = LogConfig {
        forget_parked_hours: Some(0),
        ..LogConfig::default()
    };
    let err = Log::open(tempfile::tempdir().unwrap().path(), bad).unwrap_err();
    assert!(err.to_string().contains("forget_parked_hours"), "{err}");
    let err = Log::open("", LogConfig::default()).unwrap_err();
    assert!(err.to_string().contains("path is empty"), "{err}");
}

#[test]
fn large_values_many_parts_and_oversized_records() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let cfg = || LogConfig {
        segment_bytes: 1 << 20,
        ..small(&clock)
    };
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    // 1,500 values mixing copied (< 512 B) and in-place ones: over 1,024 iovecs.
    let vals: Vec<Vec<u8>> = (0..1500u64)
        .map(|i| vec![(i % 251) as u8; if i % 2 == 0 { 600 } else { 3 }])
        .collect();
    log.append_batch(T, P, 0, &vals).unwrap();
    // A record larger than a segment and than the read buffer gets a segment of its own.
    let big = vec![7u8; 3 << 20];
    log.append(T, P, 1500, &big).unwrap();
    log.append(T, P, 1501, b"after").unwrap();
    let check = |log: &Log| {
        let got = read_all(log);
        assert_eq!(got.len(), 1502);
        for (i, (off, v)) in got.iter().enumerate().take(1500) {
            assert_eq!((*off, v), (i as u64, &vals[i]));
        }
        assert_eq!(got[1500].1, big);
        assert_eq!(got[1501].1, b"after");
        assert_eq!(
            log.read(T, P, 1500, 10, 10).unwrap().len(),
            1,
            "one record over budget"
        );
    };
    check(&log);
    let segs = log.partition(T, P).unwrap().segments;
    assert!(segs >= 3, "{segs}");
    log.close().unwrap();
    let log = Log::open(dir.path(), cfg()).unwrap();
    check(&log);
}

#[test]
fn one_writer_per_directory() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    log.append(T, P, 0, b"a").unwrap();
    let err = Log::open(dir.path(), small(&clock)).unwrap_err();
    assert!(
        err.to_string().contains("open for writing elsewhere"),
        "{err}"
    );
    let ro = Log::open(dir.path(), read_only(&clock)).unwrap();
    assert_eq!(ro.next_offset(T, P), Some(1));
    drop(log);
    Log::open(dir.path(), small(&clock)).unwrap();
}

/// Descriptors this process holds on files under `root`.
fn fds_under(root: &Path) -> usize {
    fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(root))
        .count()
}

#[test]
fn open_files_stay_within_max_open_files() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000_000);
    let max = 8;
    let cfg = || LogConfig {
        fsync: FsyncPolicy::Never,
        retain_hours: Some(1),
        max_open_files: Some(max),
        ..small(&clock)
    };
    let names: Vec<String> = (0..40).map(|i| format!("{i:032X}")).collect();
    let held = |log: &Log| -> Vec<Vec<u64>> {
        names
            .iter()
            .map(|n| {
                let first = log.first_offset(T, n).unwrap();
                let recs = log.read(T, n, first, usize::MAX, usize::MAX).unwrap();
                recs.iter().map(|r| r.offset).collect()
            })
            .collect()
    };
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    for n in &names {
        log.append_batch(T, n, 0, &[value(0), value(1), value(2)])
            .unwrap();
    }
    // Closed before they were synced: a sync opens each file by path, one at
    // a time, and loses nothing.
    assert!(log.open_files() <= max, "{} open", log.open_files());
    assert!(
        fds_under(dir.path()) <= max + 1,
        "{} descriptors",
        fds_under(dir.path())
    );
    let batch = log.begin_sync();
    log.finish_sync(batch.run()).unwrap();
    for n in &names {
        assert_eq!(log.durable_next(T, n), Some(3));
    }
    // Appends reopen a closed file and keep the count within the budget;
    // reads of closed partitions open a handle for the read only.
    for (i, n) in names.iter().enumerate() {
        log.append(T, n, 3, &value(3)).unwrap();
        if i % 5 == 4 {
            let batch = log.begin_sync();
            log.finish_sync(batch.run()).unwrap();
        }
    }
    log.sync().unwrap();
    let want: Vec<Vec<u64>> = names.iter().map(|_| (0..4).collect()).collect();
    assert_eq!(held(&log), want);
    assert!(log.open_files() <= max, "{} open", log.open_files());
    assert!(
        fds_under(dir.path()) <= max + 1,
        "{} descriptors",
        fds_under(dir.path())
    );
    for n in &names {
        assert_eq!(log.durable_next(T, n), Some(4));
    }
    // Retention rolls every expired active segment (a new file each): the
    // budget holds during the sweep too, not only once it is done (40
    // partitions expiring at once would otherwise hold 40 files at the end of
    // it; many thousands, more than the process may open).
    assert!(
        log.open_files_peak() <= max + 1,
        "peak {}",
        log.open_files_peak()
    );
    clock.set(1_000_000 + 2 * 3_600_000);
    log.enforce_retention().unwrap();
    assert!(
        log.open_files_peak() <= max + 1,
        "peak {}",
        log.open_files_peak()
    );
    log.sync().unwrap();
    assert!(log.open_files() <= max, "{} open", log.open_files());
    for n in &names {
        log.append(T, n, 4, &value(4)).unwrap();
    }
    log.sync().unwrap();
    drop(log);
    // Reopening 40 partitions keeps at most the budget open.
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    assert!(log.open_files() <= max, "{} open", log.open_files());
    assert!(
        fds_under(dir.path()) <= max + 1,
        "{} descriptors",
        fds_under(dir.path())
    );
    let want: Vec<Vec<u64>> = names.iter().map(|_| vec![4]).collect();
    assert_eq!(held(&log), want);
    log.append(T, &names[0], 5, &value(5)).unwrap();
    log.sync().unwrap();
    assert_eq!(log.next_offset(T, &names[0]), Some(6));
    assert_eq!(log.durable_next(T, &names[0]), Some(6));
}

/// A partition not appended to between two periodic checks writes its
/// pending index entries out and frees their buffer; one still written to
/// keeps them. The index written so stays valid: appends go on, and a
/// reopen (which checks the index's last entries) finds every record.
#[test]
fn idle_partitions_write_their_index_entries_out_at_the_periodic_check() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000_000);
    let cfg = || LogConfig {
        segment_bytes: 1 << 20,
        retention_check_ms: 1_000,
        fsync: FsyncPolicy::Never,
        ..small(&clock)
    };
    let (busy, idle) = ("B".repeat(32), "I".repeat(32));
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    let index_len = |p: &str| {
        let f = seg_files(&dir.path().join("weather").join(p), "index");
        fs::metadata(&f[0]).unwrap().len()
    };
    let mut next = 0;
    let write = |log: &mut Log, p: &str, from: u64| {
        let vals: Vec<Vec<u8>> = (from..from + 20).map(value).collect();
        log.append_batch(T, p, from, &vals).unwrap();
        from + 20
    };
    next = write(&mut log, &busy, next);
    write(&mut log, &idle, 0);
    let pending = |log: &Log, p: &str| log.parts[&(T.to_vec(), p.to_owned())].index_pending();
    assert!(pending(&log, &busy) && pending(&log, &idle));
    assert_eq!(index_len(&idle), FILE_HEADER_LEN as u64, "all in memory");
    // The first check: both were appended to since the log opened.
    clock.set(1_002_000);
    log.tick().unwrap();
    assert!(pending(&log, &busy) && pending(&log, &idle));
    next = write(&mut log, &busy, next);
    clock.set(1_004_000);
    log.tick().unwrap();
    assert!(pending(&log, &busy), "written to since the last check");
    assert!(!pending(&log, &idle), "idle since the last check");
    assert!(index_len(&idle) > FILE_HEADER_LEN as u64);
    // Appends after it index on from there, and the reopened log reads
    // everything.
    write(&mut log, &idle, 20);
    log.close().unwrap();
    let log = Log::open(dir.path(), cfg()).unwrap();
    for (p, n) in [(&busy, next), (&idle, 40)] {
        let got = log.read(T, p, 0, usize::MAX, usize::MAX).unwrap();
        assert_eq!(got.len() as u64, n);
        assert!(got.iter().all(|r| r.value == value(r.offset)));
    }
}
