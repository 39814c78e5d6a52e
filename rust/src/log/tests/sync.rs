//! Durability (`sync.rs`): fsync policies and the durable offset, group
//! commit over the partitions written, syncs at open and the clean mark.

use super::*;
use crate::log::format::escape_name;
use crate::log::sync::SYNCFS_FROM_PARTITIONS;
use std::time::{Duration, Instant};

#[test]
fn fsync_policies_and_the_durable_offset() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(0);
    let syncs = Arc::new(AtomicU64::new(0));
    let s = syncs.clone();
    let fp: Failpoint = Arc::new(move |op, _| {
        if op == IoOp::Sync {
            s.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    });
    let cfg = LogConfig {
        fsync: FsyncPolicy::Interval,
        flush_messages: 5,
        flush_interval_ms: 100,
        failpoint: Some(fp),
        ..small(&clock)
    };
    let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
    clock.set(10);
    log.append(T, P, 0, b"a").unwrap();
    let base = syncs.load(Ordering::SeqCst);
    log.append(T, P, 1, b"b").unwrap();
    assert_eq!(log.durable_next(T, P), Some(0));
    assert_eq!(log.next_deadline(), 10 + 100);
    clock.set(109);
    log.tick().unwrap();
    assert_eq!(log.durable_next(T, P), Some(0), "interval not elapsed");
    assert_eq!(syncs.load(Ordering::SeqCst), base);
    clock.set(110);
    log.tick().unwrap();
    assert_eq!(log.durable_next(T, P), Some(2), "interval elapsed");
    assert!(syncs.load(Ordering::SeqCst) > base);
    let vals: Vec<&[u8]> = vec![b"x"; 5];
    log.append_batch(T, P, 2, &vals).unwrap();
    assert_eq!(
        log.durable_next(T, P),
        Some(7),
        "flush_messages reached: group commit"
    );
    log.close().unwrap();

    let mut log = Log::open(
        dir.path(),
        LogConfig {
            fsync: FsyncPolicy::Always,
            ..cfg.clone()
        },
    )
    .unwrap();
    log.append(T, P, 7, b"y").unwrap();
    assert_eq!(log.durable_next(T, P), Some(8));
    drop(log);
    let mut log = Log::open(
        dir.path(),
        LogConfig {
            fsync: FsyncPolicy::Never,
            ..cfg
        },
    )
    .unwrap();
    clock.set(1_000_000);
    log.append(T, P, 8, b"z").unwrap();
    log.tick().unwrap();
    assert_eq!(
        log.durable_next(T, P),
        Some(8),
        "never: only explicit syncs"
    );
    log.sync().unwrap();
    assert_eq!(log.durable_next(T, P), Some(9));
}

#[test]
fn group_commit_looks_only_at_partitions_written_since_the_last_sync() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000_000);
    let cfg = || LogConfig {
        fsync: FsyncPolicy::Never,
        retain_hours: Some(1),
        ..small(&clock)
    };
    let names: Vec<String> = (0..50).map(|i| format!("{i:032X}")).collect();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    for n in &names {
        log.append(T, n, 0, b"x").unwrap();
    }
    assert_eq!(log.dirty.len(), 50);
    assert!(log.has_unsynced());
    let batch = log.begin_sync();
    assert_eq!(batch.parts.len(), 50);
    // Taken: nothing left to look at while the batch runs.
    assert!(log.dirty.is_empty() && !log.has_unsynced());
    log.finish_sync(batch.run()).unwrap();
    assert!(log.begin_sync().is_empty());
    // One partition written: one listed, one synced.
    log.append(T, &names[7], 1, b"y").unwrap();
    log.append(T, &names[7], 2, b"z").unwrap();
    assert_eq!(log.dirty.len(), 1);
    assert!(log.has_unsynced());
    let batch = log.begin_sync();
    assert_eq!(batch.parts.len(), 1);
    log.finish_sync(batch.run()).unwrap();
    assert_eq!(log.durable_next(T, &names[7]), Some(3));
    assert_eq!(log.durable_next(T, &names[8]), Some(1));
    // A partition with segments older than the others.
    let old: Vec<Vec<u8>> = (0..40).map(value).collect();
    log.append_batch(T, P, 0, &old).unwrap();
    let done = log.begin_sync().run();
    log.finish_sync(done).unwrap();
    drop(log);
    // After a reopen every partition is listed once (recovery syncs what it
    // keeps, so the first group commit finds nothing) and then none.
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(log.dirty.len(), 51);
    assert!(log.begin_sync().is_empty());
    assert!(log.dirty.is_empty());
    // Retention that deletes segments but keeps records lists the partition
    // (a directory to sync); one that empties a partition parks it (its next
    // offset synced in `.parked`), with nothing left to sync.
    clock.set(1_000_000 + 2 * 3_600_000);
    log.append(T, P, 40, b"new").unwrap();
    let done = log.begin_sync().run();
    log.finish_sync(done).unwrap();
    assert!(log.enforce_retention().unwrap() > 50);
    assert_eq!(log.parked_count(), 50);
    assert_eq!(log.dirty, vec![(T.to_vec(), P.to_string())]);
    assert_eq!(log.begin_sync().parts.len(), 1);
    // One appended to again is a partition again: listed, synced.
    log.append(T, &names[3], 1, b"w").unwrap();
    assert_eq!(log.begin_sync().parts.len(), 1);
}

/// `small(clock)` with a failpoint that records the path of every sync and
/// fails those `fail` picks (EIO).
fn counting_syncs(
    clock: &Clock,
    fail: impl Fn(&Path) -> bool + Send + Sync + 'static,
) -> (LogConfig, Arc<std::sync::Mutex<Vec<PathBuf>>>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let fp: Failpoint = Arc::new(move |op, path: &Path| {
        if op != IoOp::Sync {
            return Ok(());
        }
        s.lock().unwrap().push(path.to_path_buf());
        if fail(path) {
            Err(std::io::Error::from_raw_os_error(5))
        } else {
            Ok(())
        }
    });
    let cfg = LogConfig {
        failpoint: Some(fp),
        ..small(clock)
    };
    (cfg, seen)
}

/// A log with `n` partitions named by number, two records each.
fn log_of_partitions(dir: &Path, clock: &Clock, n: usize) -> Vec<String> {
    let names: Vec<String> = (0..n).map(|i| format!("{i:032X}")).collect();
    let mut log = Log::open(dir, small(clock)).unwrap();
    for p in &names {
        log.append_batch(T, p, 0, &[value(1), value(2)]).unwrap();
    }
    // Not closed: no clean mark, as after a crash.
    drop(log);
    names
}

#[test]
fn opening_a_log_makes_what_it_holds_durable() {
    let clock = Clock::new(5);
    // A small log: each partition's own fdatasync and directory fsync.
    let dir = tempfile::tempdir().unwrap();
    let names = log_of_partitions(dir.path(), &clock, 3);
    let (cfg, seen) = counting_syncs(&clock, |_| false);
    let log = Log::open(dir.path(), cfg).unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2 * names.len(), "{seen:?}");
    for p in &names {
        assert!(
            seen.iter().any(|s| s.ends_with(p)),
            "{p}'s directory: {seen:?}"
        );
        assert_eq!(log.durable_next(T, p), Some(2));
    }
    log.close().unwrap();

    // A large one: one syncfs of the log's filesystem covers them all.
    let dir = tempfile::tempdir().unwrap();
    let names = log_of_partitions(dir.path(), &clock, SYNCFS_FROM_PARTITIONS);
    let (cfg, seen) = counting_syncs(&clock, |_| false);
    let log = Log::open(dir.path(), cfg).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![dir.path().to_path_buf()]);
    for p in &names {
        assert_eq!(log.durable_next(T, p), Some(2), "{p}");
    }
    log.close().unwrap();
}

#[test]
fn when_syncfs_fails_each_partition_syncs_and_a_failing_one_is_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let names = log_of_partitions(dir.path(), &clock, SYNCFS_FROM_PARTITIONS);
    let root = dir.path().to_path_buf();
    let bad = names[1].clone();
    let failing = move |p: &Path| p == root || p.to_string_lossy().contains(&bad);

    // Strict (a plain log): the partition's own sync error fails the open.
    let (strict, _) = counting_syncs(&clock, failing.clone());
    let err = Log::open(dir.path(), strict).unwrap_err();
    assert!(err.to_string().contains(&names[1]), "{err}");

    let (cfg, seen) = counting_syncs(&clock, failing);
    let cfg = LogConfig {
        isolate_damaged: true,
        ..cfg
    };
    let log = Log::open(dir.path(), cfg).unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[0], dir.path(), "syncfs first");
    for n in [&names[0], &names[2]] {
        assert!(seen.iter().any(|p| p.ends_with(n)), "{n} synced on its own");
        assert_eq!(log.durable_next(T, n), Some(2));
    }
    let damaged = log.damaged();
    assert_eq!(damaged.len(), 1, "{damaged:?}");
    assert_eq!(damaged[0].1, names[1]);
    log.close().unwrap();
    assert!(
        !dir.path().join(CLEAN_FILE).exists(),
        "a partition set aside was never made durable: no clean mark"
    );
}

#[test]
fn a_clean_close_spares_the_next_open_its_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let mark = dir.path().join(CLEAN_FILE);
    let names: Vec<String> = (0..3).map(|i| format!("{i:032X}")).collect();
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    for p in &names {
        log.append_batch(T, p, 0, &[value(1), value(2)]).unwrap();
    }
    log.close().unwrap();
    assert!(mark.exists());
    // A read-only open leaves it.
    drop(Log::open(dir.path(), read_only(&clock)).unwrap());
    assert!(mark.exists());
    // The next writable open syncs nothing but the root (the mark's removal),
    // and every record counts as durable.
    let (cfg, seen) = counting_syncs(&clock, |_| false);
    let mut log = Log::open(dir.path(), cfg).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![dir.path().to_path_buf()]);
    assert!(!mark.exists(), "removed before anything is written");
    for p in &names {
        assert_eq!(log.durable_next(T, p), Some(2), "{p}");
    }
    // Appended to and never closed (a crash): the next open syncs each.
    log.append(T, &names[0], 2, b"x").unwrap();
    drop(log);
    assert!(!mark.exists());
    let (cfg, seen) = counting_syncs(&clock, |_| false);
    let log = Log::open(dir.path(), cfg).unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2 * names.len());
    assert_eq!(log.durable_next(T, &names[0]), Some(3));
    log.close().unwrap();
    // A close that could not sync everything leaves no mark.
    let (cfg, _) = counting_syncs(&clock, |_| false);
    let mut log = Log::open(dir.path(), cfg).unwrap();
    log.append(T, &names[1], 2, b"y").unwrap();
    drop(log);
    let failing_dir = names[1].clone();
    let (cfg, _) = counting_syncs(&clock, move |p| p.to_string_lossy().contains(&failing_dir));
    let cfg = LogConfig {
        isolate_damaged: true,
        ..cfg
    };
    let log = Log::open(dir.path(), cfg).unwrap();
    assert_eq!(log.damaged().len(), 1);
    log.close().unwrap();
    assert!(!mark.exists());
}

/// A finished sync reports exactly the partitions it made durable, each with
/// its durable offset: what a store ACKs without asking every partition it
/// holds. Appends after the sync began are not in it (the next sync's).
#[test]
fn a_finished_sync_reports_exactly_the_partitions_it_made_durable() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000_000);
    let names: Vec<String> = (0..4).map(|i| format!("{i:032X}")).collect();
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    log.sync_elsewhere();
    for n in &names {
        log.append(T, n, 0, b"x").unwrap();
    }
    let done = log.begin_sync().run();
    let mut durable = Vec::new();
    log.finish_sync_into(done, &mut durable).unwrap();
    assert_eq!(durable.len(), 4);
    // Two partitions written; a third after the sync began.
    log.append_batch(T, &names[1], 1, &[b"a", b"b"]).unwrap();
    log.append(T, &names[2], 1, b"c").unwrap();
    let batch = log.begin_sync();
    log.append(T, &names[3], 1, b"d").unwrap();
    let mut durable = Vec::new();
    log.finish_sync_into(batch.run(), &mut durable).unwrap();
    let got: Vec<(String, u64)> = durable
        .iter()
        .map(|d| {
            assert_eq!(d.topic, T);
            (d.partition.clone(), d.next)
        })
        .collect();
    assert_eq!(got, vec![(names[1].clone(), 3), (names[2].clone(), 2)]);
    assert_eq!(log.durable_next(T, &names[3]), Some(1), "not in that sync");
    // The next sync reports the one written meanwhile, and only it.
    let mut durable = Vec::new();
    let batch = log.begin_sync();
    log.finish_sync_into(batch.run(), &mut durable).unwrap();
    let got: Vec<&str> = durable.iter().map(|d| d.partition.as_str()).collect();
    assert_eq!(got, vec![names[3].as_str()]);
    // Nothing written: nothing to sync, nothing reported.
    assert!(log.begin_sync().is_empty());
}

/// One group commit of many new partitions of one topic fsyncs their
/// topic's directory and the root once, not once per partition (a store
/// hearing 10,000 new producers at once made 20,000 such fsyncs, and a
/// producer joining then waited tens of seconds for its first ACK). Each
/// partition's own files and directory are still synced.
#[test]
fn one_group_commit_fsyncs_a_shared_directory_once() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000_000);
    let (cfg, seen) = counting_syncs(&clock, |_| false);
    let mut log = Log::open(dir.path(), cfg).unwrap();
    log.sync_elsewhere();
    let names: Vec<String> = (0..20).map(|i| format!("{i:032X}")).collect();
    for n in &names {
        log.append(T, n, 0, b"x").unwrap();
    }
    seen.lock().unwrap().clear();
    let mut durable = Vec::new();
    let done = log.begin_sync().run();
    log.finish_sync_into(done, &mut durable).unwrap();
    assert_eq!(durable.len(), names.len(), "every partition durable");
    let seen = seen.lock().unwrap().clone();
    let count = |p: &Path| seen.iter().filter(|s| s.as_path() == p).count();
    let topic_dir = dir.path().join(escape_name(T).unwrap());
    assert_eq!(count(dir.path()), 1, "the root once: {seen:?}");
    assert_eq!(count(&topic_dir), 1, "the topic's directory once");
    for n in &names {
        assert_eq!(count(&topic_dir.join(n)), 1, "each partition's directory");
    }
    // Nothing synced twice (each partition's segment and directory once).
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "{seen:?}");
}

/// A log whose owner runs the syncs (`sync_elsewhere`) never fdatasyncs on
/// its own: its fsync policy only says when the owner should, timed from
/// one group commit's start to the next on the monotonic clock (the log's
/// clock, frozen here, does not hold it up).
#[test]
fn a_log_synced_elsewhere_says_when_a_sync_is_due_and_does_none() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(10);
    let (cfg, seen) = counting_syncs(&clock, |_| false);
    let syncs = || seen.lock().unwrap().len();
    let cfg = LogConfig {
        fsync: FsyncPolicy::Interval,
        flush_messages: 5,
        flush_interval_ms: 3_600_000,
        ..cfg
    };
    let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
    log.sync_elsewhere();
    log.begin_sync();
    assert_eq!((log.next_sync_at(), log.sync_due()), (None, false));
    let base = syncs();
    log.append(T, P, 0, b"a").unwrap();
    // An hour after the last group commit started.
    let at = log.next_sync_at().expect("something unsynced");
    assert!(at > Instant::now() + Duration::from_secs(3000), "{at:?}");
    assert!(!log.sync_due());
    log.tick().unwrap();
    let vals: Vec<&[u8]> = vec![b"x"; 4];
    log.append_batch(T, P, 1, &vals).unwrap();
    assert_eq!(
        log.durable_next(T, P),
        Some(0),
        "the owner syncs, not the log"
    );
    assert_eq!(syncs(), base);
    // `flush_messages` unsynced: due at once.
    assert!(log.sync_due());
    let batch = log.begin_sync();
    assert_eq!(log.next_sync_at(), None, "all taken");
    log.finish_sync(batch.run()).unwrap();
    assert_eq!(log.durable_next(T, P), Some(5));
    assert!(syncs() > base);
    drop(log);
    // `always`: due as soon as anything is unsynced; `never`: never.
    for (fsync, due) in [(FsyncPolicy::Always, true), (FsyncPolicy::Never, false)] {
        let mut log = Log::open(
            dir.path(),
            LogConfig {
                fsync,
                ..cfg.clone()
            },
        )
        .unwrap();
        log.sync_elsewhere();
        log.begin_sync();
        let next = log.next_offset(T, P).unwrap();
        log.append(T, P, next, b"z").unwrap();
        assert_eq!(log.sync_due(), due, "{fsync:?}");
        assert_eq!(log.durable_next(T, P), Some(next));
    }
}

/// The write buffer: a buffered append counts at once (the offset rule, the
/// next offset), is written by the next flush, sync or tick, and is the one
/// place appends wait (no second buffer whose offsets the owner merges).
#[test]
fn buffered_appends_count_at_once_and_are_written_before_a_sync() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000_000);
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    log.sync_elsewhere();
    let q = "Q0000000000000000000000000000000";
    let body = |v: &[u8]| {
        let mut b = Vec::new();
        crate::meta::wrap(&mut b, Some(7), v);
        b
    };
    log.append_buffered(T, P, 5, &body(b"a")).unwrap();
    log.append_buffered(T, q, 0, &body(b"q")).unwrap();
    log.append_buffered(T, P, 6, &body(b"b")).unwrap();
    assert_eq!(log.next_offset(T, P), Some(7));
    assert_eq!(log.first_offset(T, P), Some(5));
    assert_eq!(log.written_next(T, P), None, "nothing written yet");
    assert_eq!(log.open_partitions(Some(T)).len(), 2);
    assert!(log.read(T, P, 5, 10, 1 << 20).is_err(), "not written yet");
    // The offset rule holds for buffered records too (what is buffered is
    // written, then the log says what it expects).
    let e = log.append_buffered(T, P, 9, &body(b"c")).unwrap_err();
    assert!(
        matches!(e, LogError::OffsetMismatch { expected: 7, .. }),
        "{e}"
    );
    // A sync writes what is buffered first, and covers it.
    let batch = log.begin_sync();
    assert_eq!(log.written_next(T, P), Some(7));
    let mut durable = Vec::new();
    log.finish_sync_into(batch.run(), &mut durable).unwrap();
    assert_eq!(durable.len(), 2);
    let got: Vec<Vec<u8>> = log
        .read(T, P, 5, 10, 1 << 20)
        .unwrap()
        .into_iter()
        .map(|r| r.value)
        .collect();
    assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec()]);
    // A plain append after buffered ones keeps the partition in order.
    log.append_buffered(T, P, 7, &body(b"c")).unwrap();
    log.append(T, P, 8, b"d").unwrap();
    assert_eq!(log.read(T, P, 5, 10, 1 << 20).unwrap().len(), 4);
    // A run stops at the first record it cannot take.
    let bodies = [body(b"e"), body(b"f")];
    let (n, e) = log.append_buffered_run(T, P, 9, &mut bodies.iter().map(|b| b.as_slice()));
    assert_eq!((n, e.is_none()), (2, true));
    let last = [body(b"g")];
    let (n, e) = log.append_buffered_run(T, q, u64::MAX, &mut last.iter().map(|b| b.as_slice()));
    assert_eq!(n, 0);
    assert!(e.is_some(), "an offset no next offset could follow");
    log.tick().unwrap();
    assert_eq!(log.written_next(T, P), Some(11));
    // Dropped unwritten: the log stands where its files do.
    log.append_buffered(T, P, 11, &body(b"h")).unwrap();
    log.discard_writes();
    assert_eq!(log.next_offset(T, P), Some(11));
    log.close().unwrap();
}
