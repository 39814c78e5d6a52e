//! Recovery at open (`recovery.rs`): torn tails truncated at every byte,
//! damage refused rather than cut off, indexes rebuilt or read past.
//!
//! Tests whose comment tells of a bug were found by a correctness review
//! (session 21): each failed before its fix, for the reason its comment gives.

use std::os::unix::fs::FileExt;

use super::*;

#[test]
fn torn_tail_at_every_byte_of_the_last_record_is_truncated() {
    let golden = tempfile::tempdir().unwrap();
    let (seg, last, all) = build(golden.path(), 40);
    let len = fs::metadata(&seg).unwrap().len();
    let clock = Clock::new(5);
    for policy in [
        RecoveryPolicy::TolerateTailCorruption,
        RecoveryPolicy::AbsoluteConsistency,
    ] {
        for cut in last..len {
            let dir = tempfile::tempdir().unwrap();
            copy_dir(golden.path(), dir.path());
            let seg = pdir(dir.path()).join(seg.file_name().unwrap());
            OpenOptions::new()
                .write(true)
                .open(&seg)
                .unwrap()
                .set_len(cut)
                .unwrap();
            let cfg = LogConfig {
                recovery: policy,
                ..small(&clock)
            }
            .with_segment(1 << 20);
            let mut log = Log::open(dir.path(), cfg).unwrap();
            assert_eq!(read_all(&log), all[..39], "cut at {cut}");
            assert_eq!(
                fs::metadata(&seg).unwrap().len(),
                last,
                "truncated to the last good record"
            );
            // The log goes on from there.
            log.append(T, P, 39, b"again").unwrap();
            assert_eq!(log.read(T, P, 39, 1, 10).unwrap()[0].value, b"again");
        }
    }
}

#[test]
fn flipped_bytes_in_the_last_record() {
    let golden = tempfile::tempdir().unwrap();
    let (seg, last, all) = build(golden.path(), 40);
    let len = fs::metadata(&seg).unwrap().len();
    let clock = Clock::new(5);
    for pos in last..len {
        for policy in [
            RecoveryPolicy::TolerateTailCorruption,
            RecoveryPolicy::AbsoluteConsistency,
        ] {
            let dir = tempfile::tempdir().unwrap();
            copy_dir(golden.path(), dir.path());
            let seg = pdir(dir.path()).join(seg.file_name().unwrap());
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&seg)
                .unwrap();
            let mut b = [0u8];
            f.read_exact_at(&mut b, pos).unwrap();
            f.write_all_at(&[b[0] ^ 0x5a], pos).unwrap();
            drop(f);
            let cfg = LogConfig {
                recovery: policy,
                ..small(&clock)
            }
            .with_segment(1 << 20);
            match policy {
                RecoveryPolicy::TolerateTailCorruption => {
                    let log = Log::open(dir.path(), cfg).unwrap();
                    assert_eq!(read_all(&log), all[..39], "flip at {pos}");
                }
                RecoveryPolicy::AbsoluteConsistency => match Log::open(dir.path(), cfg) {
                    // A flip in the length field can make the record look cut short.
                    Ok(log) => assert_eq!(read_all(&log), all[..39], "flip at {pos}"),
                    Err(e) => {
                        let msg = e.to_string();
                        assert!(msg.contains(&seg.display().to_string()), "{msg}");
                        assert!(msg.contains("offset 39"), "{msg}");
                        assert_eq!(fs::metadata(&seg).unwrap().len(), len, "untouched");
                    }
                },
            }
        }
    }
}

#[test]
fn damage_followed_by_valid_records_is_an_error_not_a_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, _, _) = build(dir.path(), 40);
    let len = fs::metadata(&seg).unwrap().len();
    // Damage the value of record 20 (far before the end).
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&seg)
        .unwrap();
    let mut pos = FILE_HEADER_LEN as u64;
    for i in 0..20 {
        pos += (RECORD_HEADER_LEN + W + value(i).len()) as u64;
    }
    f.write_all_at(b"#", pos + RECORD_HEADER_LEN as u64 + 2)
        .unwrap();
    drop(f);
    // Force a full scan of the active segment.
    fs::remove_file(seg.with_extension("index")).unwrap();
    let clock = Clock::new(5);
    let err = Log::open(dir.path(), small(&clock).with_segment(1 << 20)).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, LogError::Corruption { offset: 20, position, .. } if position == pos),
        "{msg}"
    );
    assert!(
        msg.contains(&seg.display().to_string()) && msg.contains("valid record"),
        "{msg}"
    );
    assert_eq!(
        fs::metadata(&seg).unwrap().len(),
        len,
        "nothing was cut off"
    );
}

#[test]
fn damage_in_a_sealed_segment_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    let vals: Vec<Vec<u8>> = (0..50).map(value).collect();
    log.append_batch(T, P, 0, &vals).unwrap();
    log.close().unwrap();
    let segs = seg_files(&pdir(dir.path()), "log");
    assert!(segs.len() > 2);
    let f = OpenOptions::new().write(true).open(&segs[0]).unwrap();
    f.write_all_at(b"\xff\xff", FILE_HEADER_LEN as u64 + 30)
        .unwrap();
    drop(f);
    // The cheap open-time check (last index entry) passes; a read finds the damage.
    let log = Log::open(dir.path(), small(&clock)).unwrap();
    let err = log.read(T, P, 0, 10, 1000).unwrap_err();
    assert!(
        matches!(err, LogError::Corruption { offset: 0, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains(&segs[0].display().to_string()),
        "{err}"
    );
    assert_eq!(
        log.read(T, P, 20, 1, 1).unwrap()[0].offset,
        20,
        "other segments read fine"
    );
    drop(log);
    // Without its index the segment is scanned in full, and open refuses.
    fs::remove_file(segs[0].with_extension("index")).unwrap();
    let err = Log::open(dir.path(), small(&clock)).unwrap_err();
    assert!(err.to_string().contains("sealed segment"), "{err}");
    assert!(
        err.to_string().contains(&segs[0].display().to_string()),
        "{err}"
    );
}

#[test]
fn index_is_rebuilt_when_missing_or_damaged() {
    let clock = Clock::new(5);
    for damage in ["remove", "garbage", "truncate", "stale"] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(dir.path(), small(&clock)).unwrap();
        for i in 0..80 {
            clock.set(1_000 + i * 10);
            log.append(T, P, i, &value(i)).unwrap();
        }
        let all = read_all(&log);
        log.close().unwrap();
        let indexes = seg_files(&pdir(dir.path()), "index");
        let orig: Vec<Vec<u8>> = indexes.iter().map(|p| fs::read(p).unwrap()).collect();
        for idx in &indexes {
            match damage {
                "remove" => fs::remove_file(idx).unwrap(),
                "garbage" => fs::write(idx, b"not an index at all").unwrap(),
                "truncate" => {
                    let l = fs::metadata(idx).unwrap().len();
                    OpenOptions::new()
                        .write(true)
                        .open(idx)
                        .unwrap()
                        .set_len(l - 3)
                        .unwrap();
                }
                _ => {
                    // Keep only the header and first entry: a stale index.
                    let l = (FILE_HEADER_LEN + 16) as u64;
                    OpenOptions::new()
                        .write(true)
                        .open(idx)
                        .unwrap()
                        .set_len(l)
                        .unwrap();
                }
            }
        }
        let log = Log::open(dir.path(), small(&clock)).unwrap();
        assert_eq!(read_all(&log), all, "{damage}");
        for s in [0, 17, 43, 79] {
            assert_eq!(log.read(T, P, s, 1, 1).unwrap()[0].offset, s);
        }
        assert_eq!(log.offset_for_time(T, P, 1_000 + 555).unwrap(), Some(56));
        drop(log);
        let rebuilt: Vec<Vec<u8>> = indexes.iter().map(|p| fs::read(p).unwrap()).collect();
        assert_eq!(
            rebuilt, orig,
            "{damage}: the rebuilt index equals the original"
        );
    }
}

// A crash after skip_to created its new segment but before it deleted the
// old ones: recovery drops the empty segment beyond the hole and the
// partition is as it was (the store then skips again).
#[test]
fn an_interrupted_skip_recovers_the_partition_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000);
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    for i in 0..40 {
        log.append(T, P, i, &value(i)).unwrap();
    }
    let before = read_all(&log);
    log.close().unwrap();
    let keep = tempfile::tempdir().unwrap();
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    copy_dir(&pdir(dir.path()), keep.path());
    log.skip_to(T, P, 100).unwrap();
    log.close().unwrap();
    let new_seg = segment::paths(&pdir(dir.path()), 100).0;
    let empty = fs::read(&new_seg).unwrap();
    // Put the old segments back next to the new (empty) one.
    fs::remove_dir_all(pdir(dir.path())).unwrap();
    fs::create_dir_all(pdir(dir.path())).unwrap();
    copy_dir(keep.path(), &pdir(dir.path()));
    fs::write(&new_seg, empty).unwrap();
    let log = Log::open(dir.path(), small(&clock)).unwrap();
    assert_eq!(read_all(&log), before);
    assert!(!new_seg.exists());
    log.close().unwrap();
}

#[test]
fn a_torn_last_sealed_segment_is_recovered_as_the_active_one() {
    let clock = Clock::new(5);
    let golden = tempfile::tempdir().unwrap();
    let mut log = Log::open(golden.path(), small(&clock)).unwrap();
    let vals: Vec<Vec<u8>> = (0..30).map(value).collect();
    log.append_batch(T, P, 0, &vals).unwrap();
    log.close().unwrap();
    let segs = seg_files(&pdir(golden.path()), "log");
    assert!(segs.len() >= 3);
    let victim = &segs[segs.len() - 2];
    let len = fs::metadata(victim).unwrap().len();
    let base_after: u64 = segs[segs.len() - 1]
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    // Power loss soon after a roll: the sealed segment lost its last bytes.
    for cut in [
        len - 1,
        len - 10,
        len - ((RECORD_HEADER_LEN + W) as u64 + value(base_after - 1).len() as u64),
    ] {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(golden.path(), dir.path());
        let seg = pdir(dir.path()).join(victim.file_name().unwrap());
        OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(cut)
            .unwrap();
        fs::remove_file(seg.with_extension("index")).unwrap();
        // A read-only open reports it and changes nothing.
        let ro = read_only(&clock);
        assert!(matches!(
            Log::open(dir.path(), ro),
            Err(LogError::Corruption { .. })
        ));
        let mut log = Log::open(dir.path(), small(&clock)).unwrap();
        let got = read_all(&log);
        assert_eq!(got.len() as u64, base_after - 1, "cut {cut}");
        assert_eq!(got[..], read_all_from(golden.path())[..got.len()]);
        assert_eq!(seg_files(&pdir(dir.path()), "log").len(), segs.len() - 1);
        log.append(T, P, base_after - 1, b"again").unwrap();
    }
}

/// A length field damaged in the middle of the last sealed segment (valid
/// records follow it in that segment) looks "cut short by the end of the file"
/// to the scan, so `open_sealed` calls it a torn tail. `Partition::open` then
/// deletes the active segment (synced, acknowledged records) before
/// `open_active` finds the valid records after the damage and refuses to open:
/// the open fails AND the newest records are gone from disk.
#[test]
fn damaged_length_in_last_sealed_segment_does_not_delete_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    let vals: Vec<Vec<u8>> = (0..30).map(value).collect();
    log.append_batch(T, P, 0, &vals).unwrap();
    log.close().unwrap(); // everything synced: all 30 records are durable
    let segs = seg_files(&pdir(dir.path()), "log");
    assert!(segs.len() >= 3);
    let victim = &segs[segs.len() - 2];
    let active = segs.last().unwrap().clone();
    let active_len = fs::metadata(&active).unwrap().len();
    // Bit rot in the length field of the first record of the last sealed
    // segment (several valid records follow it), and its index (a cache) gone.
    let f = OpenOptions::new().write(true).open(victim).unwrap();
    f.write_all_at(&0x00ff_ffffu32.to_be_bytes(), FILE_HEADER_LEN as u64 + 8)
        .unwrap();
    drop(f);
    fs::remove_file(victim.with_extension("index")).unwrap();
    let r = Log::open(dir.path(), small(&clock));
    // Refusing to open is fine (the damage is not a torn tail); deleting the
    // segment that holds the newest durable records is not.
    assert!(
        active.exists(),
        "open ({:?}) deleted the active segment {} holding durable records {}..30",
        r.as_ref().err().map(|e| e.to_string()),
        active.display(),
        seg_base(&active)
    );
    assert_eq!(fs::metadata(&active).unwrap().len(), active_len);
}

/// `find_valid_after` computes `expected + (end - from) / 24 + 1`, which
/// overflows for a partition whose offsets are near `u64::MAX` (a store starts
/// a partition at whatever offset its first record carries). Debug builds
/// panic while opening the log; release builds wrap, so no later record
/// qualifies as "valid", and damage followed by valid records is silently
/// truncated (the valid records are lost) instead of being refused.
#[test]
fn damage_before_valid_records_near_u64_max_is_refused_not_panicked_or_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let cfg = || small(&clock).with_segment(1 << 20);
    let first = u64::MAX - 100;
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    let vals: Vec<Vec<u8>> = (0..10).map(|i| vec![b'a' + i as u8; 2000]).collect();
    log.append_batch(T, P, first, &vals).unwrap();
    log.close().unwrap();
    let seg = seg_files(&pdir(dir.path()), "log").pop().unwrap();
    let len = fs::metadata(&seg).unwrap().len();
    // Damage the value of the 5th record; records 5..10 stay valid.
    let pos = FILE_HEADER_LEN as u64 + 4 * ((RECORD_HEADER_LEN + W) as u64 + 2000);
    let f = OpenOptions::new().write(true).open(&seg).unwrap();
    f.write_all_at(b"#", pos + RECORD_HEADER_LEN as u64 + 7)
        .unwrap();
    drop(f);
    fs::remove_file(seg.with_extension("index")).unwrap(); // force a full scan
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Log::open(dir.path(), cfg()).map(drop)
    }));
    let r = r.unwrap_or_else(|p| {
        panic!(
            "Log::open panicked: {:?}",
            p.downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
        )
    });
    assert!(
        matches!(r, Err(LogError::Corruption { position, .. }) if position == pos),
        "{r:?}"
    );
    assert_eq!(
        fs::metadata(&seg).unwrap().len(),
        len,
        "nothing was cut off"
    );
}

/// `Index::load` checks only the header, the size and the last two entries.
/// An index damaged in the middle (index files are never fdatasynced, so a
/// power loss can leave any of their pages stale) is accepted at every open;
/// lookups binary-search through the bad entry and started reading at a wrong
/// position, so reads of valid records failed with a `Corruption` error that
/// said "reopening rebuilds the index", which it did not. A read now goes
/// from the segment's start where an entry points at no record of its offset.
#[test]
fn reads_go_past_an_index_damaged_in_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000);
    let cfg = index_zeroed_at_20(dir.path(), &clock);
    for _ in 0..2 {
        let log = Log::open(dir.path(), cfg.clone()).unwrap();
        for start in [0, 10, 19, 20, 21, 30, 39] {
            let r = log.read(T, P, start, 1, 1);
            assert!(
                r.as_ref().is_ok_and(|v| v[0].offset == start),
                "read from {start}: {r:?}"
            );
        }
    }
}

/// As above, for `offset_for_time`: it searched the index by time and read
/// from the entry it found without checking that a record of the entry's
/// offset is there, so an entry zeroed in the middle failed the lookup with a
/// `Corruption` error. It now reads from the segment's start too.
#[test]
fn offset_for_time_goes_past_an_index_damaged_in_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000);
    let cfg = index_zeroed_at_20(dir.path(), &clock);
    let log = Log::open(dir.path(), cfg).unwrap();
    for (ts, want) in [(0, 0), (1_195, 20), (1_200, 20), (1_201, 21), (1_390, 39)] {
        let r = log.offset_for_time(T, P, ts);
        assert!(
            r.as_ref().is_ok_and(|o| *o == Some(want)),
            "time {ts}: {r:?}"
        );
    }
    assert_eq!(log.offset_for_time(T, P, 1_391).unwrap(), None);
}

/// A closed log of 40 records with an index entry per record (record i
/// appended at time 1_000 + 10 * i), its entry 20 then zeroed (a page of the
/// index never written back); the config to open it with.
fn index_zeroed_at_20(dir: &Path, clock: &Clock) -> LogConfig {
    let cfg = LogConfig {
        index_interval_bytes: 1,
        ..small(clock).with_segment(1 << 20)
    };
    let mut log = Log::open(dir, cfg.clone()).unwrap();
    for i in 0..40 {
        clock.set(1_000 + 10 * i);
        log.append(T, P, i, &value(i)).unwrap();
    }
    log.close().unwrap();
    let idx = seg_files(&pdir(dir), "index").pop().unwrap();
    let f = OpenOptions::new().write(true).open(&idx).unwrap();
    f.write_all_at(&[0u8; 16], FILE_HEADER_LEN as u64 + 20 * 16)
        .unwrap();
    cfg
}
