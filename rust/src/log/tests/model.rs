//! A model-based property test: random appends, reads, reopens, syncs,
//! clock jumps, retention and time lookups agree with an in-memory model of
//! one partition.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;

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
                .map(|r| (RECORD_HEADER_LEN + W + r.2.len()) as u64)
                .sum::<u64>()
    }
    fn append(&mut self, first: u64, ts: u64, vals: &[Vec<u8>], seg_bytes: u64) {
        if self.segments.is_empty() {
            self.segments.push_back(Vec::new());
        }
        for (i, v) in vals.iter().enumerate() {
            let last = self.segments.back().unwrap();
            let rl = (RECORD_HEADER_LEN + W + v.len()) as u64;
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
                        // Budgets count bodies: a plain value's is W bytes longer.
                        if want.len() >= usize::from(n) || (!want.is_empty() && b + W + r.2.len() > usize::from(bytes)) {
                            break;
                        }
                        b += W + r.2.len();
                        want.push(StoredRecord {
                            offset: r.0,
                            timestamp: r.1,
                            create_time: None,
                            key: None,
                            headers: Vec::new(),
                            value: r.2.clone(),
                        });
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
