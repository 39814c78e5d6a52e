//! Tests of the segment store: a model-based property test, crash recovery at
//! every byte of the last record, index rebuild, retention, time lookup, fsync
//! policies and injected I/O errors.

use std::collections::VecDeque;
use std::fs::{self, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use proptest::prelude::*;

use super::format::{FILE_HEADER_LEN, RECORD_HEADER_LEN};
use super::*;

const T: &[u8] = b"weather";
const P: &str = "85E3C6EBDC7B4156AD9C43611EBC09CE";

struct Clock(Arc<AtomicU64>);

impl Clock {
    fn new(start: u64) -> Clock {
        Clock(Arc::new(AtomicU64::new(start)))
    }
    fn get(&self) -> crate::log::Clock {
        let c = self.0.clone();
        Arc::new(move || c.load(Ordering::SeqCst))
    }
    fn set(&self, v: u64) {
        self.0.store(v, Ordering::SeqCst);
    }
}

fn small(clock: &Clock) -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        index_interval_bytes: 64,
        clock: clock.get(),
        ..LogConfig::default()
    }
}

/// [`small`], opened read-only.
fn read_only(clock: &Clock) -> LogConfig {
    LogConfig {
        read_only: true,
        ..small(clock)
    }
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 13) as usize)).into_bytes()
}

fn seg_files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn pdir(root: &Path) -> PathBuf {
    root.join("weather").join(P)
}

fn read_all(log: &Log) -> Vec<(u64, Vec<u8>)> {
    let first = log.first_offset(T, P).unwrap();
    log.read(T, P, first, usize::MAX, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|r| (r.offset, r.value))
        .collect()
}

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

/// In-memory model of one partition, mirroring the rolling rule exactly.
#[derive(Default, Debug)]
struct Model {
    segments: VecDeque<Vec<(u64, u64, Vec<u8>)>>,
    next: Option<u64>,
}

impl Model {
    fn seg_size(s: &[(u64, u64, Vec<u8>)]) -> u64 {
        FILE_HEADER_LEN as u64
            + s.iter()
                .map(|r| (RECORD_HEADER_LEN + r.2.len()) as u64)
                .sum::<u64>()
    }
    fn append(&mut self, first: u64, ts: u64, vals: &[Vec<u8>], seg_bytes: u64) {
        if self.segments.is_empty() {
            self.segments.push_back(Vec::new());
        }
        for (i, v) in vals.iter().enumerate() {
            let last = self.segments.back().unwrap();
            let rl = (RECORD_HEADER_LEN + v.len()) as u64;
            if !last.is_empty() && Self::seg_size(last) + rl > seg_bytes {
                self.segments.push_back(Vec::new());
            }
            self.segments
                .back_mut()
                .unwrap()
                .push((first + i as u64, ts, v.clone()));
        }
        self.next = Some(first + vals.len() as u64);
    }
    fn records(&self) -> Vec<(u64, u64, Vec<u8>)> {
        self.segments.iter().flatten().cloned().collect()
    }
    fn first(&self) -> Option<u64> {
        match self.segments.front() {
            Some(f) => Some(f.first().map_or(self.next.unwrap(), |r| r.0)),
            None => self.next,
        }
    }
    fn retention(&mut self, now: u64, retain_ms: u64, retain_bytes: u64) {
        let max_ts = |s: &Vec<(u64, u64, Vec<u8>)>| s.iter().map(|r| r.1).max().unwrap_or(0);
        while self.segments.len() > 1 {
            let s = &self.segments[0];
            let total: u64 = self.segments.iter().map(|s| Self::seg_size(s)).sum();
            if now.saturating_sub(max_ts(s)) > retain_ms || total > retain_bytes {
                self.segments.pop_front();
            } else {
                break;
            }
        }
        // An active segment entirely past the age limit rolls and goes; the
        // partition, with no record left, is parked: no segment at all.
        if let [only] = self.segments.make_contiguous() {
            if !only.is_empty() && now.saturating_sub(max_ts(only)) > retain_ms {
                self.segments.clear();
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<Vec<u8>>),
    BadAppend(i8),
    Read(u16, u8, u16),
    Reopen,
    Sync,
    Advance(u32),
    Retention,
    ForTime(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..90), 1..12).prop_map(Op::Append),
        1 => prop_oneof![Just(-1i8), Just(1i8), Just(5i8)].prop_map(Op::BadAppend),
        4 => (any::<u16>(), 0u8..20, 0u16..400).prop_map(|(a, b, c)| Op::Read(a, b, c)),
        1 => Just(Op::Reopen),
        1 => Just(Op::Sync),
        2 => (0u32..4_000_000).prop_map(Op::Advance),
        1 => Just(Op::Retention),
        1 => any::<u16>().prop_map(Op::ForTime),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn log_agrees_with_a_model(start in 0u64..1_000_000, ops in proptest::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::new(10_000_000);
        let cfg = || LogConfig {
            segment_bytes: 300,
            index_interval_bytes: 50,
            retain_hours: Some(1),
            retain_bytes: Some(1_500),
            fsync: FsyncPolicy::Never,
            // Half the cases close the active file after every sync.
            max_open_files: (start % 2 == 0).then_some(1),
            clock: clock.get(),
            ..LogConfig::default()
        };
        let mut log = Some(Log::open(dir.path(), cfg()).unwrap());
        let mut m = Model::default();
        for op in ops {
            let l = log.as_mut().unwrap();
            match op {
                Op::Append(vals) => {
                    let first = m.next.unwrap_or(start);
                    l.append_batch(T, P, first, &vals).unwrap();
                    m.append(first, clock.0.load(Ordering::SeqCst), &vals, 300);
                }
                Op::BadAppend(d) => {
                    if let Some(next) = m.next {
                        let off = next.wrapping_add_signed(i64::from(d));
                        prop_assert!(l.append(T, P, off, b"bad").is_err());
                    }
                }
                Op::Read(s, n, bytes) => {
                    let recs = m.records();
                    let Some(next) = m.next else { continue };
                    let first = m.first().unwrap();
                    let start = first + u64::from(s) % (next - first + 1);
                    let got = l.read(T, P, start, usize::from(n), usize::from(bytes)).unwrap();
                    let mut want = Vec::new();
                    let mut b = 0;
                    for r in recs.iter().filter(|r| r.0 >= start) {
                        if want.len() >= usize::from(n) || (!want.is_empty() && b + r.2.len() > usize::from(bytes)) {
                            break;
                        }
                        b += r.2.len();
                        want.push(StoredRecord { offset: r.0, timestamp: r.1, value: r.2.clone() });
                    }
                    prop_assert_eq!(got, want);
                    let early = l.read(T, P, first.wrapping_sub(1), 1, 1);
                    prop_assert!(first == 0 || early.is_err());
                }
                Op::Reopen => {
                    log.take().unwrap().close().unwrap();
                    log = Some(Log::open(dir.path(), cfg()).unwrap());
                }
                Op::Sync => {
                    l.sync().unwrap();
                    prop_assert_eq!(l.durable_next(T, P), m.next);
                }
                Op::Advance(ms) => clock.set(clock.0.load(Ordering::SeqCst) + u64::from(ms)),
                Op::Retention => {
                    l.enforce_retention().unwrap();
                    m.retention(clock.0.load(Ordering::SeqCst), 3_600_000, 1_500);
                }
                Op::ForTime(t) => {
                    if m.next.is_some() {
                        let ts = 10_000_000 + u64::from(t) * 1_000;
                        let want = m.records().iter().find(|r| r.1 >= ts).map(|r| r.0);
                        prop_assert_eq!(l.offset_for_time(T, P, ts).unwrap(), want);
                    }
                }
            }
            let l = log.as_ref().unwrap();
            prop_assert_eq!(l.next_offset(T, P), m.next);
            if m.next.is_some() {
                let info = l.partition(T, P).unwrap();
                prop_assert_eq!(info.first_offset, m.first().unwrap());
                prop_assert_eq!(info.segments, m.segments.len());
                let bytes: u64 = m.segments.iter().map(|s| Model::seg_size(s)).sum();
                prop_assert_eq!(info.bytes, bytes);
            }
        }
        let l = log.take().unwrap();
        if m.next.is_some() {
            let got: Vec<(u64, u64, Vec<u8>)> = l
                .read(T, P, m.first().unwrap(), usize::MAX, usize::MAX)
                .unwrap()
                .into_iter()
                .map(|r| (r.offset, r.timestamp, r.value))
                .collect();
            prop_assert_eq!(got, m.records());
        }
    }
}

/// Writes `n` records into one segment (big segments), closes, returns the
/// segment path and the byte position where the last record starts.
fn build(dir: &Path, n: u64) -> (PathBuf, u64, Vec<(u64, Vec<u8>)>) {
    let clock = Clock::new(5);
    let mut log = Log::open(
        dir,
        LogConfig {
            index_interval_bytes: 64,
            ..small(&clock)
        }
        .with_segment(1 << 20),
    )
    .unwrap();
    for i in 0..n {
        log.append(T, P, i, &value(i)).unwrap();
    }
    let all = read_all(&log);
    log.close().unwrap();
    let seg = seg_files(&pdir(dir), "log").pop().unwrap();
    let len = fs::metadata(&seg).unwrap().len();
    let last = len - (RECORD_HEADER_LEN + value(n - 1).len()) as u64;
    (seg, last, all)
}

impl LogConfig {
    fn with_segment(mut self, bytes: u64) -> Self {
        self.segment_bytes = bytes;
        self
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            fs::create_dir_all(&dst).unwrap();
            copy_dir(&e.path(), &dst);
        } else {
            fs::copy(e.path(), dst).unwrap();
        }
    }
}

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
        pos += (RECORD_HEADER_LEN + value(i).len()) as u64;
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
fn injected_write_error_leaves_no_partial_record_and_reopen_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let fail_write = Arc::new(AtomicBool::new(false));
    let fail_truncate = Arc::new(AtomicBool::new(false));
    let (fw, ft) = (fail_write.clone(), fail_truncate.clone());
    let fp: Failpoint = Arc::new(move |op, path| {
        let log_file = path.extension().is_some_and(|e| e == "log");
        if (op == IoOp::Write && log_file && fw.load(Ordering::SeqCst))
            || (op == IoOp::Truncate && ft.load(Ordering::SeqCst))
        {
            return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
        }
        Ok(())
    });
    let cfg = LogConfig {
        failpoint: Some(fp),
        ..small(&clock)
    }
    .with_segment(1 << 20);
    let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
    let vals: Vec<Vec<u8>> = (0..10).map(value).collect();
    log.append_batch(T, P, 0, &vals).unwrap();
    let seg = seg_files(&pdir(dir.path()), "log").pop().unwrap();
    let len = fs::metadata(&seg).unwrap().len();

    fail_write.store(true, Ordering::SeqCst);
    let vals: Vec<Vec<u8>> = (10..20).map(value).collect();
    let err = log.append_batch(T, P, 10, &vals).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(&seg.display().to_string()) && msg.contains("write"),
        "{msg}"
    );
    assert_eq!(log.next_offset(T, P), Some(10));
    assert_eq!(
        fs::metadata(&seg).unwrap().len(),
        len,
        "the half-written batch was removed"
    );
    assert_eq!(read_all(&log).len(), 10);
    fail_write.store(false, Ordering::SeqCst);
    log.append_batch(T, P, 10, &vals).unwrap();
    assert_eq!(read_all(&log).len(), 20);

    // Now the rollback fails too: the partition refuses writes until reopen, and
    // readers still never see the partial bytes.
    let len = fs::metadata(&seg).unwrap().len();
    fail_write.store(true, Ordering::SeqCst);
    fail_truncate.store(true, Ordering::SeqCst);
    let vals: Vec<Vec<u8>> = (20..30).map(value).collect();
    log.append_batch(T, P, 20, &vals).unwrap_err();
    assert!(
        fs::metadata(&seg).unwrap().len() > len,
        "partial bytes are on disk"
    );
    assert_eq!(read_all(&log).len(), 20);
    fail_write.store(false, Ordering::SeqCst);
    fail_truncate.store(false, Ordering::SeqCst);
    let err = log.append_batch(T, P, 20, &vals).unwrap_err();
    assert!(
        matches!(err, LogError::Failed { .. }) && err.to_string().contains("reopen"),
        "{err}"
    );
    drop(log);
    // Recovery keeps the complete records of the half-written batch (they are
    // valid, contiguous and were never reported durable) and drops the torn one.
    let mut log = Log::open(dir.path(), cfg).unwrap();
    let n = log.next_offset(T, P).unwrap();
    assert!((20..30).contains(&n), "{n}");
    let got = read_all(&log);
    assert_eq!(got.len() as u64, n);
    for (off, v) in &got[20..] {
        assert_eq!(*v, value(*off));
    }
    let rest: Vec<Vec<u8>> = (n..30).map(value).collect();
    log.append_batch(T, P, n, &rest).unwrap();
    assert_eq!(read_all(&log).len(), 30);
}

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

#[test]
fn create_error_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let fp: Failpoint = Arc::new(|op, _| {
        if op == IoOp::Create {
            return Err(std::io::Error::from_raw_os_error(13)); // EACCES
        }
        Ok(())
    });
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    log.append(T, P, 0, b"a").unwrap();
    drop(log);
    let mut log = Log::open(
        dir.path(),
        LogConfig {
            failpoint: Some(fp),
            ..small(&clock)
        },
    )
    .unwrap();
    let err = log.append(b"other", P, 0, b"a").unwrap_err();
    assert!(err.to_string().contains("other"), "{err}");
    // Rolling fails: the active segment keeps the records, nothing is lost.
    let vals: Vec<Vec<u8>> = (1..40).map(value).collect();
    assert!(log.append_batch(T, P, 1, &vals).is_err());
    let n = log.next_offset(T, P).unwrap();
    assert_eq!(read_all(&log).len() as u64, n);
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
        len - (RECORD_HEADER_LEN as u64 + value(base_after - 1).len() as u64),
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

fn read_all_from(root: &Path) -> Vec<(u64, Vec<u8>)> {
    let clock = Clock::new(5);
    let log = Log::open(root, read_only(&clock)).unwrap();
    read_all(&log)
}

#[test]
fn a_failed_roll_leaves_no_stray_segment() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let fail = Arc::new(AtomicBool::new(false));
    let f2 = fail.clone();
    let fp: Failpoint = Arc::new(move |op, path| {
        let index = path.extension().is_some_and(|e| e == "index");
        if op == IoOp::Write && index && f2.load(Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(28));
        }
        Ok(())
    });
    let cfg = LogConfig {
        failpoint: Some(fp),
        ..small(&clock)
    };
    let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
    log.append(T, P, 0, &value(0)).unwrap();
    fail.store(true, Ordering::SeqCst);
    let mut n = 1;
    while n < 40 {
        match log.append(T, P, n, &value(n)) {
            Ok(()) => n += 1,
            Err(e) => {
                assert!(e.to_string().contains(".index"), "{e}");
                break;
            }
        }
    }
    assert!(n < 40, "the roll failed");
    assert_eq!(
        seg_files(&pdir(dir.path()), "log").len(),
        1,
        "no stray segment"
    );
    fail.store(false, Ordering::SeqCst);
    log.append(T, P, n, &value(n)).unwrap();
    let all = read_all(&log);
    drop(log);
    let log = Log::open(dir.path(), cfg).unwrap();
    assert_eq!(read_all(&log), all);
    assert_eq!(all.len() as u64, n + 1);
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

// ---------------------------------------------------------------------------
// Found by a correctness review (session 21): each failed before its fix, for
// the reason its comment gives.

/// A failpoint that refuses to create index files (ENOSPC) while the flag is set.
fn index_create_fails() -> (Arc<AtomicBool>, Failpoint) {
    let fail = Arc::new(AtomicBool::new(false));
    let f2 = fail.clone();
    let fp: Failpoint = Arc::new(move |op, path| {
        let index = path.extension().is_some_and(|e| e == "index");
        if op == IoOp::Create && index && f2.load(Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
        }
        Ok(())
    });
    (fail, fp)
}

/// The base offset of a segment file, from its name.
fn seg_base(p: &Path) -> u64 {
    p.file_stem().unwrap().to_str().unwrap().parse().unwrap()
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
    let pos = FILE_HEADER_LEN as u64 + 4 * (RECORD_HEADER_LEN as u64 + 2000);
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

/// `roll` removes the segment file it created when `Active::create` fails
/// half way ("leave no stray segment file inside its offset range");
/// `skip_to` does not. A skip whose index file cannot be created (disk full)
/// returns an error and leaves `{offset}.log` behind while the partition goes
/// on where it stood. Once appends pass that offset and roll, the stray file
/// sits between two real segments, and the next open refuses the partition:
/// every record of it is unreadable.
#[test]
fn a_failed_skip_leaves_no_stray_segment_that_breaks_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let (fail, fp) = index_create_fails();
    let cfg = LogConfig {
        failpoint: Some(fp),
        ..small(&clock)
    };
    let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
    for i in 0..2 {
        log.append(T, P, i, &value(i)).unwrap();
    }
    fail.store(true, Ordering::SeqCst);
    assert!(log.skip_to(T, P, 3).is_err(), "the skip fails");
    fail.store(false, Ordering::SeqCst);
    assert_eq!(
        log.next_offset(T, P),
        Some(2),
        "the partition stands where it was"
    );
    // The records in between turn up after all: the partition goes on, rolling.
    for i in 2..30 {
        log.append(T, P, i, &value(i)).unwrap();
    }
    let all = read_all(&log);
    assert_eq!(all.len(), 30);
    log.close().unwrap();
    let bases: Vec<u64> = seg_files(&pdir(dir.path()), "log")
        .iter()
        .map(|p| seg_base(p))
        .collect();
    let r = Log::open(dir.path(), cfg);
    assert!(
        r.is_ok(),
        "segments {bases:?}; reopen failed: {}",
        r.as_ref().err().unwrap()
    );
    assert_eq!(read_all(&r.unwrap()), all);
}

/// Creating a new partition writes `{first}.log`, then its index; when the
/// index cannot be created (disk full) `Partition::create` fails but leaves
/// the header-only `{first}.log` behind. A later append that creates the
/// partition at a higher offset (the next record the store got) succeeds, and
/// its records are synced and acknowledged. At the next open the stray empty
/// segment sorts first, looks like a "torn last sealed segment", and recovery
/// DELETES the segment holding every real record: the partition silently
/// comes back empty, at the stray's offset.
#[test]
fn a_failed_partition_create_leaves_no_stray_segment_that_eats_the_real_one() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let (fail, fp) = index_create_fails();
    let cfg = LogConfig {
        failpoint: Some(fp),
        fsync: FsyncPolicy::Always,
        ..small(&clock)
    };
    let mut log = Log::open(dir.path(), cfg.clone()).unwrap();
    fail.store(true, Ordering::SeqCst);
    assert!(log.append(T, P, 5, &value(5)).is_err(), "the create fails");
    fail.store(false, Ordering::SeqCst);
    assert_eq!(log.next_offset(T, P), None, "no partition was made");
    // The next record the store gets starts the partition.
    for i in 6..9 {
        log.append(T, P, i, &value(i)).unwrap();
    }
    assert_eq!(log.durable_next(T, P), Some(9), "6..9 are durable");
    let all = read_all(&log);
    log.close().unwrap();
    let files = seg_files(&pdir(dir.path()), "log");
    let log = Log::open(dir.path(), cfg).unwrap();
    assert_eq!(
        read_all(&log),
        all,
        "segment files before the reopen: {files:?}, after: {:?}",
        seg_files(&pdir(dir.path()), "log")
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
