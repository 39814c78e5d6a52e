//! Unit tests of `durable.rs`.

use super::*;
use crate::node::out::Out;
use crate::node::store::state::tests::{fetch_of, ME, P, T};
use crate::node::store::state::{StoreState, StoreStateConfig};
use crate::wire::Head;

/// Takes what the syncs reported durable, turning the store's loop
/// (`sync_if_due`) until something is reported (a generous bound: the
/// syncer thread may be slow on a busy machine).
fn wait_durable(log: &mut DurableLog) -> Vec<(PartKey, u64)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.is_empty() {
        assert!(Instant::now() < deadline, "no sync was reported");
        log.sync_if_due().unwrap();
        log.take_durable(&mut got);
        std::thread::sleep(Duration::from_millis(1));
    }
    got
}

/// The store's storage reports, after each sync on its syncer thread,
/// exactly the partitions that sync made durable with their durable
/// offsets; nothing before the fdatasync returned, nothing for a
/// partition not written since.
#[test]
fn a_finished_sync_reports_the_partitions_it_made_durable() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        flush_interval_ms: 1,
        ..LogConfig::default()
    };
    let mut log = DurableLog::open(dir.path().join("log"), cfg).unwrap();
    let body = |v: &[u8]| {
        let mut b = Vec::new();
        crate::meta::wrap(&mut b, Some(1), v);
        b
    };
    let (a, b, c): (&[u8], &[u8], &[u8]) = (b"A0", b"B0", b"C0");
    log.append(T, c, 0, &body(b"c")).unwrap();
    let mut got = wait_durable(&mut log);
    assert_eq!(got, vec![((T.to_vec(), c.to_vec()), 1)]);
    // Buffered appends count at once, and are not durable before a sync.
    log.append(T, a, 0, &body(b"a0")).unwrap();
    let bodies = [body(b"b0"), body(b"b1"), body(b"b2")];
    let (n, e) = log.append_run(T, b, 0, &mut bodies.iter().map(|v| v.as_slice()));
    assert_eq!((n, e.is_none()), (3, true));
    assert_eq!(log.next_offset(T, b), Some(3));
    assert_eq!(log.durable_next(T, b), None, "not even written yet");
    got.clear();
    log.take_durable(&mut got);
    assert!(got.is_empty());
    let mut got = wait_durable(&mut log);
    // Both may take more than one sync: gather until both are in.
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < 2 {
        assert!(Instant::now() < deadline, "{got:?}");
        got.extend(wait_durable(&mut log));
    }
    got.sort();
    assert_eq!(
        got,
        vec![((T.to_vec(), a.to_vec()), 1), ((T.to_vec(), b.to_vec()), 3)]
    );
    assert_eq!(log.durable_next(T, b), Some(3));
    // `fsync = never`: what is written is reported, each turn.
    let mut never = DurableLog::open(
        dir.path().join("never"),
        LogConfig {
            fsync: FsyncPolicy::Never,
            ..LogConfig::default()
        },
    )
    .unwrap();
    never.append(T, a, 0, &body(b"a0")).unwrap();
    never.append(T, a, 1, &body(b"a1")).unwrap();
    assert_eq!(
        wait_durable(&mut never),
        vec![((T.to_vec(), a.to_vec()), 2)]
    );
    never.sync_if_due().unwrap();
    let mut none = Vec::new();
    never.take_durable(&mut none);
    assert!(none.is_empty(), "nothing written since: {none:?}");
}

/// A record the durable log wrote although `append` reported an error (the
/// error came from another partition's batch, written in the same flush of
/// pending appends) is put back among the held records, below the
/// partition's next offset. `fetch_gap` used to see a held record at or
/// below the next offset ("drain_held will make progress") and return, and
/// `tick` drains only when the next offset itself is held: the gap after it
/// was never FETCHed again, and the store stalled although the producer held
/// it. Now `fetch_gap` drops held records below the next offset first.
#[test]
fn a_gap_is_fetched_after_an_append_error_from_another_partitions_batch() {
    use crate::log::{IoOp, LogConfig};
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;
    const B: &[u8] = b"PRODUCER00000000000000000000000B";
    let dir = tempfile::tempdir().unwrap();
    let failing = Arc::new(AtomicBool::new(false));
    let f = failing.clone();
    let cfg = LogConfig {
        failpoint: Some(Arc::new(move |op, path: &std::path::Path| {
            let b = std::str::from_utf8(B).unwrap();
            if f.load(SeqCst) && op == IoOp::Write && path.to_string_lossy().contains(b) {
                Err(std::io::Error::from_raw_os_error(28)) // ENOSPC
            } else {
                Ok(())
            }
        })),
        ..LogConfig::default()
    };
    let log = DurableLog::open(dir.path().join("log"), cfg).unwrap();
    let mut s = StoreState::new(ME.to_vec(), log, StoreStateConfig::default());
    let t0 = Instant::now();
    // The store holds bodies (metadata, value).
    let body = |v: &[u8]| {
        let mut b = Vec::new();
        crate::meta::wrap(&mut b, Some(1), v);
        b
    };
    s.on_record(T, B, 0, &body(b"b0"), t0);
    s.on_record(T, P, 0, &body(b"r0"), t0);
    // 2 and 4 arrive before 1 and 3: held, 1 fetched.
    let big = body(&vec![7u8; 4 << 20]);
    assert_eq!(fetch_of(&s.on_record(T, P, 2, &big, t0)), vec![(1, 1)]);
    s.on_record(T, P, 4, &body(b"r4"), t0);
    // B's disk fails; the answer 1 comes: 1 and the held 2 are appended, and
    // 2's append flushes the pending appends, where B's fails.
    failing.store(true, SeqCst);
    s.on_direct_record(T, P, 1, &body(b"r1"), t0);
    failing.store(false, SeqCst);
    assert!(s.last_error().is_some());
    assert_eq!(s.log().next_offset(T, P), Some(3), "0..=2 were written");
    // What the store loop does: recover, then tick on.
    s.log_mut().recover().unwrap();
    s.clear_error();
    let mut fetched = Vec::new();
    let mut t = t0;
    for _ in 0..20 {
        t += Duration::from_millis(600);
        s.log_mut().sync_if_due().unwrap();
        // The producer, alive, tells its head every second.
        let head = Head {
            topic: T,
            address: P,
            subject: T,
            sequence: 4,
        };
        let mut outs = s.on_head(&head, t);
        outs.extend(s.tick(t));
        for o in outs {
            if let Out::Fetch {
                partition,
                sequence,
                count,
                ..
            } = o
            {
                if partition == P {
                    fetched.push((sequence, count));
                }
            }
        }
    }
    assert!(
        fetched.iter().any(|&(seq, _)| seq == 3),
        "record 3 (the gap before the held 4) was never fetched: {fetched:?}"
    );
}
