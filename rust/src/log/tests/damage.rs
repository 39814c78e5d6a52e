//! Set-aside damage (`damage.rs`): a partition failed by an I/O error until
//! it is opened again, and damaged partitions set aside at open.

use std::os::unix::fs::FileExt;
use std::sync::atomic::AtomicBool;

use super::*;

#[test]
fn injected_sync_error_fails_the_partition_until_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let fail = Arc::new(AtomicBool::new(false));
    let f2 = fail.clone();
    let fp: Failpoint = Arc::new(move |op, _| {
        if op == IoOp::Sync && f2.load(Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(5)); // EIO
        }
        Ok(())
    });
    let cfg = LogConfig {
        failpoint: Some(fp),
        fsync: FsyncPolicy::Always,
        ..small(&clock)
    };
    let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
    log.append(T, P, 0, b"a").unwrap();
    log.append(T, "other", 0, b"o").unwrap();
    fail.store(true, Ordering::SeqCst);
    let err = log.append(T, P, 1, b"b").unwrap_err();
    assert!(err.to_string().contains("fdatasync"), "{err}");
    assert_eq!(log.durable_next(T, P), Some(1), "b is not reported durable");
    // Reopening the failed partition fails while the disk does.
    assert!(log.reopen_failed().is_err());
    assert!(matches!(
        log.read(T, P, 0, 1, 1),
        Err(LogError::Failed { .. })
    ));
    fail.store(false, Ordering::SeqCst);
    assert!(matches!(
        log.append(T, P, 2, b"c"),
        Err(LogError::Failed { .. })
    ));
    // Reopening the failed partition alone recovers it from its files.
    log.reopen_failed().unwrap();
    assert!(log.damaged().is_empty());
    assert_eq!(log.durable_next(T, P), Some(2));
    assert_eq!(read_all(&log), vec![(0, b"a".to_vec()), (1, b"b".to_vec())]);
    log.append(T, P, 2, b"c").unwrap();
    log.append(T, "other", 1, b"p").unwrap();
    drop(log);
    let log = Log::open(dir.path(), cfg).unwrap();
    assert_eq!(log.durable_next(T, P), Some(3));
    assert_eq!(log.next_offset(T, "other"), Some(2));
}

#[test]
fn a_damaged_partition_is_set_aside_with_isolate_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let names = ["A", "B", "C"].map(|n| n.repeat(32));
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    let vals: Vec<Vec<u8>> = (0..50).map(value).collect();
    for n in &names {
        log.append_batch(T, n, 0, &vals).unwrap();
    }
    log.close().unwrap();
    // Damage in B's first sealed segment, found by the full scan at open.
    let bdir = dir.path().join("weather").join(&names[1]);
    let segs = seg_files(&bdir, "log");
    let original = fs::read(&segs[0]).unwrap();
    let f = OpenOptions::new().write(true).open(&segs[0]).unwrap();
    f.write_all_at(b"\xff\xff", FILE_HEADER_LEN as u64 + 30)
        .unwrap();
    drop(f);
    fs::remove_file(segs[0].with_extension("index")).unwrap();
    // The segments themselves (an open attempt may rebuild an index).
    let files = |d: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        let segs = seg_files(d, "log");
        segs.into_iter()
            .map(|p| (p.clone(), fs::read(&p).unwrap()))
            .collect()
    };
    let before = files(&bdir);

    let err = Log::open(dir.path(), small(&clock)).unwrap_err();
    assert!(
        err.to_string().contains("sealed segment"),
        "strict by default: {err}"
    );
    let cfg = || LogConfig {
        isolate_damaged: true,
        ..small(&clock)
    };
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    let damaged = log.damaged();
    assert_eq!(damaged.len(), 1, "{damaged:?}");
    assert_eq!(
        (damaged[0].0.as_slice(), damaged[0].1.as_str()),
        (T, names[1].as_str())
    );
    assert!(damaged[0].2.contains("sealed segment"), "{damaged:?}");
    for n in [&names[0], &names[2]] {
        let got = log.read(T, n, 0, usize::MAX, usize::MAX).unwrap();
        assert_eq!(got.len(), 50);
    }
    assert_eq!(log.partitions(Some(T)).len(), 2);
    // B refuses appends and reads, and its files are left alone.
    let err = log.append(T, &names[1], 0, b"x").unwrap_err();
    assert!(err.to_string().contains("could not be opened"), "{err}");
    assert!(matches!(
        log.append(T, &names[1], 50, b"x"),
        Err(LogError::Failed { .. })
    ));
    assert!(matches!(
        log.read(T, &names[1], 0, 1, 1),
        Err(LogError::Failed { .. })
    ));
    assert_eq!(log.next_offset(T, &names[1]), None);
    // Its files have not changed: not scanned again, still set aside, and no
    // error of the call (a store recovering from another failure succeeds).
    let key = (T.to_vec(), names[1].clone());
    log.reopen_failed().unwrap();
    assert_eq!(log.damaged[&key].tries, 1);
    assert_eq!(log.damaged().len(), 1);
    assert!(files(&bdir) == before, "B's segments are untouched");
    // Changed but still damaged: tried again, still set aside.
    let f = OpenOptions::new().append(true).open(&segs[0]).unwrap();
    f.write_all_at(b"junk", 0).unwrap();
    drop(f);
    assert!(log.reopen_failed().is_err());
    assert_eq!(log.damaged[&key].tries, 2);
    // Once repaired, B comes back without reopening the log.
    fs::write(&segs[0], &original).unwrap();
    log.reopen_failed().unwrap();
    assert!(log.damaged().is_empty());
    let got = log.read(T, &names[1], 0, usize::MAX, usize::MAX).unwrap();
    assert_eq!(got.len(), 50);
    log.append(T, &names[1], 50, b"x").unwrap();
    log.sync().unwrap();
    assert_eq!(log.durable_next(T, &names[1]), Some(51));
    drop(log);
    // A damaged partition moved away is forgotten.
    let f = OpenOptions::new().write(true).open(&segs[0]).unwrap();
    f.write_all_at(b"\xff\xff", FILE_HEADER_LEN as u64 + 30)
        .unwrap();
    drop(f);
    fs::remove_file(segs[0].with_extension("index")).unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(log.damaged().len(), 1);
    fs::rename(&bdir, dir.path().join("moved-away")).unwrap();
    log.reopen_failed().unwrap();
    assert!(log.damaged().is_empty());
    assert_eq!(log.partitions(Some(T)).len(), 2);
}
