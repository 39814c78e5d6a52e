//! Segment format 2 (records are bodies: metadata then value) and format 1
//! (values) side by side: keys and headers round trip, bodies that do not
//! parse are refused, a file never mixes formats, the format 1 log checked
//! in under `tests/data/log-v1` opens, reads, recovers and takes new
//! records, torn format 2 tails are truncated, and positioning by time goes
//! by record time (create times out of order).

use std::os::unix::fs::FileExt;

use proptest::prelude::*;

use super::super::format::{
    encode_file_header, encode_record, escape_name, FORMAT_V1, FORMAT_VERSION, LOG_MAGIC,
};
use super::*;
use crate::meta::{self, Meta, TimeType};

fn body(create: u64, key: Option<&[u8]>, headers: &[(&str, &[u8])], value: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    meta::encode(&mut b, create, key, headers);
    b.extend_from_slice(value);
    b
}

fn wrapped(append: u64, value: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    meta::wrap(&mut b, Some(append), value);
    b
}

/// The record a plain value appended at `append` reads back as.
fn plain(offset: u64, append: u64, value: &[u8]) -> StoredRecord {
    StoredRecord {
        offset,
        timestamp: append,
        create_time: None,
        key: None,
        headers: Vec::new(),
        value: value.to_vec(),
    }
}

/// The format version in a segment or index file's header.
fn file_version(path: &Path) -> u32 {
    let b = fs::read(path).unwrap();
    u32::from_be_bytes(b[8..12].try_into().unwrap())
}

/// Writes a format 1 segment at `base` holding `(append time, value)`
/// records, as an older build did (no index: opening builds one).
fn write_v1_segment(dir: &Path, base: u64, records: &[(u64, &[u8])]) {
    fs::create_dir_all(dir).unwrap();
    let mut b = encode_file_header(&LOG_MAGIC, FORMAT_V1, base).to_vec();
    for (i, (ts, v)) in records.iter().enumerate() {
        encode_record(&mut b, base + i as u64, *ts, v);
    }
    fs::write(dir.join(format!("{base:020}.log")), b).unwrap();
}

/// `(offset, append time, body)` of every record, through `read_with`.
fn bodies_from(log: &Log, topic: &[u8], partition: &str, start: u64) -> Vec<(u64, u64, Vec<u8>)> {
    let mut out = Vec::new();
    log.read_with(
        topic,
        partition,
        start,
        usize::MAX,
        usize::MAX,
        |o, ts, b| out.push((o, ts, b.to_vec())),
    )
    .unwrap();
    out
}

#[test]
fn keys_headers_and_create_times_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000);
    let big = vec![b'y'; 700]; // past the copy threshold: written in place
    let metas = [
        (
            Meta {
                create_time: 10,
                key: Some(b"k".to_vec()),
                headers: vec![],
            },
            b"v0".to_vec(),
        ),
        (
            Meta {
                create_time: 11,
                key: Some(Vec::new()),
                headers: vec![
                    (String::new(), Vec::new()),
                    ("trace".into(), b"a".to_vec()),
                    ("trace".into(), b"b".to_vec()),
                    ("naïve-名前".into(), vec![0, 255]),
                ],
            },
            Vec::new(),
        ),
        (
            Meta {
                create_time: 12,
                key: None,
                headers: vec![("h".into(), vec![b'x'; 600])],
            },
            big.clone(),
        ),
    ];
    let bodies: Vec<Vec<u8>> = metas
        .iter()
        .map(|(m, v)| {
            let mut b = Vec::new();
            m.encode(&mut b);
            b.extend_from_slice(v);
            b
        })
        .collect();
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    log.append_bodies(T, P, 0, &bodies).unwrap();
    clock.set(2_000);
    log.append_batch(T, P, 3, &[b"plain".as_slice(), b""])
        .unwrap();
    log.append(T, P, 5, &big).unwrap();
    let check = |log: &Log| {
        let got = log.read(T, P, 0, 100, usize::MAX).unwrap();
        let mut want: Vec<StoredRecord> = metas
            .iter()
            .enumerate()
            .map(|(i, (m, v))| StoredRecord {
                offset: i as u64,
                timestamp: 1_000,
                create_time: Some(m.create_time),
                key: m.key.clone(),
                headers: m.headers.clone(),
                value: v.clone(),
            })
            .collect();
        want.push(plain(3, 2_000, b"plain"));
        want.push(plain(4, 2_000, b""));
        want.push(plain(5, 2_000, &big));
        assert_eq!(got, want);
        // read_with hands over bodies: as appended, or plain values wrapped
        // with their append time (no create time).
        let seen = bodies_from(log, T, P, 0);
        let mut want_bodies: Vec<(u64, u64, Vec<u8>)> = bodies
            .iter()
            .enumerate()
            .map(|(i, b)| (i as u64, 1_000, b.clone()))
            .collect();
        want_bodies.push((3, 2_000, wrapped(2_000, b"plain")));
        want_bodies.push((4, 2_000, wrapped(2_000, b"")));
        want_bodies.push((5, 2_000, wrapped(2_000, &big)));
        assert_eq!(seen, want_bodies);
        let (m, v) = meta::split(&seen[3].2).unwrap();
        assert_eq!(
            (m.timestamp(), v),
            (Some((2_000, TimeType::LogAppend)), &b"plain"[..])
        );
        assert_eq!(log.verify(T, P).unwrap(), 6);
        // Byte budgets count bodies.
        let two = log.read(T, P, 3, 100, 2 * W + 5).unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(log.read(T, P, 3, 100, 2 * W + 4).unwrap().len(), 1);
    };
    check(&log);
    for f in seg_files(&pdir(dir.path()), "log") {
        assert_eq!(file_version(&f), FORMAT_VERSION, "{}", f.display());
    }
    log.close().unwrap();
    check(&Log::open(dir.path(), small(&clock)).unwrap());
    check(&Log::open(dir.path(), read_only(&clock)).unwrap());
}

#[test]
fn append_bodies_refuses_a_body_that_does_not_parse() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(1_000);
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    log.append_bodies(T, P, 0, &[body(1, None, &[], b"ok")])
        .unwrap();
    let mut runaway_key = vec![meta::FLAG_KEY, 0, 0, 0, 0, 0, 0, 0, 0];
    runaway_key.push(9); // a varint length past the end
    runaway_key.push(b'k');
    let bad_bodies: Vec<Vec<u8>> = vec![
        Vec::new(),
        vec![0; 8],                       // shorter than flags and timestamp
        vec![16, 0, 0, 0, 0, 0, 0, 0, 0], // an unknown flag
        vec![8, 0, 0, 0, 0, 0, 0, 0, 1],  // no time, yet a time
        runaway_key,                      // a key longer than the body
        vec![meta::FLAG_HEADERS, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], // no header
    ];
    for bad in bad_bodies {
        let batch = vec![body(2, Some(b"k"), &[], b"fine"), bad.clone()];
        let err = log.append_bodies(T, P, 1, &batch).unwrap_err();
        assert!(matches!(err, LogError::Invalid(_)), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("record 1 of the batch (offset 2)") && msg.contains("malformed"),
            "{msg}"
        );
        assert_eq!(
            log.next_offset(T, P),
            Some(1),
            "nothing of the batch stored"
        );
        // Nor is a partition created for it.
        assert!(log.append_bodies(T, "0000", 0, &[bad]).is_err());
        assert_eq!(log.next_offset(T, "0000"), None);
    }
    assert_eq!(log.read(T, P, 0, 10, 1 << 20).unwrap().len(), 1);
}

#[test]
fn format1_segments_read_as_bodies_and_roll_before_the_first_append() {
    let dir = tempfile::tempdir().unwrap();
    let pd = pdir(dir.path());
    write_v1_segment(&pd, 0, &[(100, b"a"), (110, b""), (120, b"c")]);
    write_v1_segment(&pd, 3, &[(130, b"d"), (140, b"e")]);
    let v1_active = fs::read(pd.join(format!("{:020}.log", 3))).unwrap();
    let clock = Clock::new(200);
    let old_rows: [(u64, &[u8]); 5] = [
        (100, b"a"),
        (110, b""),
        (120, b"c"),
        (130, b"d"),
        (140, b"e"),
    ];
    let old = old_rows
        .iter()
        .enumerate()
        .map(|(i, (ts, v))| plain(i as u64, *ts, v))
        .collect::<Vec<_>>();
    {
        let log = Log::open(dir.path(), read_only(&clock)).unwrap();
        assert_eq!(log.read(T, P, 0, 100, usize::MAX).unwrap(), old);
    }
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    assert_eq!(log.read(T, P, 0, 100, usize::MAX).unwrap(), old);
    let seen = bodies_from(&log, T, P, 0);
    for (r, (o, ts, b)) in old.iter().zip(&seen) {
        assert_eq!((*o, *ts), (r.offset, r.timestamp));
        assert_eq!(
            *b,
            wrapped(r.timestamp, &r.value),
            "format 1 records wrapped"
        );
    }
    // Budgets count the wrapped bodies: W + 1, then W (fits 2W + 1).
    assert_eq!(log.read(T, P, 0, 100, 2 * W + 1).unwrap().len(), 2);
    assert_eq!(log.read(T, P, 0, 100, 2 * W).unwrap().len(), 1);
    assert_eq!(log.offset_for_time(T, P, 115).unwrap(), Some(2));
    assert_eq!(log.offset_for_time(T, P, 141).unwrap(), None);

    // The first append goes to a new segment of format 2; the format 1 one
    // is left as it was.
    log.append_bodies(T, P, 5, &[body(50, Some(b"k"), &[("h", b"1")], b"f")])
        .unwrap();
    log.append_batch(T, P, 6, &[b"g"]).unwrap();
    let segs = seg_files(&pd, "log");
    assert_eq!(
        segs.iter().map(|s| seg_base(s)).collect::<Vec<_>>(),
        [0, 3, 5]
    );
    assert_eq!(
        segs.iter().map(|s| file_version(s)).collect::<Vec<_>>(),
        [FORMAT_V1, FORMAT_V1, FORMAT_VERSION]
    );
    assert_eq!(fs::read(&segs[1]).unwrap(), v1_active);
    let check = |log: &Log| {
        let mut want = old.clone();
        want.push(StoredRecord {
            offset: 5,
            timestamp: 200,
            create_time: Some(50),
            key: Some(b"k".to_vec()),
            headers: vec![("h".into(), b"1".to_vec())],
            value: b"f".to_vec(),
        });
        want.push(plain(6, 200, b"g"));
        assert_eq!(log.read(T, P, 0, 100, usize::MAX).unwrap(), want);
        // One read across the roll.
        let seen = bodies_from(log, T, P, 2);
        assert_eq!(seen.len(), 5);
        assert_eq!(seen[2].2, wrapped(140, b"e"));
        assert_eq!(seen[3].2, body(50, Some(b"k"), &[("h", b"1")], b"f"));
        assert_eq!(seen[4].2, wrapped(200, b"g"));
        // Record times: 100..140 (append times), then 50 (a create time), 200.
        assert_eq!(log.offset_for_time(T, P, 45).unwrap(), Some(0));
        assert_eq!(log.offset_for_time(T, P, 141).unwrap(), Some(6));
        assert_eq!(log.offset_for_time(T, P, 201).unwrap(), None);
        assert_eq!(log.verify(T, P).unwrap(), 7);
    };
    check(&log);
    log.close().unwrap();
    for idx in seg_files(&pd, "index") {
        let want = if seg_base(&idx) < 5 {
            FORMAT_V1
        } else {
            FORMAT_VERSION
        };
        assert_eq!(
            file_version(&idx),
            want,
            "an index has its segment's version"
        );
    }
    let log = Log::open(dir.path(), small(&clock)).unwrap();
    check(&log);
    drop(log);
    check(&Log::open(dir.path(), read_only(&clock)).unwrap());
}

#[test]
fn an_empty_format1_active_segment_is_rewritten_not_rolled() {
    let dir = tempfile::tempdir().unwrap();
    let pd = pdir(dir.path());
    write_v1_segment(&pd, 0, &[(100, b"a")]);
    write_v1_segment(&pd, 1, &[]);
    let clock = Clock::new(200);
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    log.append_batch(T, P, 1, &[b"b"]).unwrap();
    let segs = seg_files(&pd, "log");
    assert_eq!(
        segs.iter()
            .map(|s| (seg_base(s), file_version(s)))
            .collect::<Vec<_>>(),
        [(0, FORMAT_V1), (1, FORMAT_VERSION)]
    );
    let want = vec![plain(0, 100, b"a"), plain(1, 200, b"b")];
    assert_eq!(log.read(T, P, 0, 10, usize::MAX).unwrap(), want);
    log.close().unwrap();
    let log = Log::open(dir.path(), small(&clock)).unwrap();
    assert_eq!(log.read(T, P, 0, 10, usize::MAX).unwrap(), want);
}

/// A record of the manifest: topic, partition, offset, append time, value.
type V1Record = (Vec<u8>, String, u64, u64, Vec<u8>);

/// `tests/data/log-v1`: written by the code before format 2 (see its
/// manifest, `tests/data/log-v1.json`).
fn checked_in_v1() -> (PathBuf, Vec<V1Record>) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(data.join("log-v1.json")).unwrap()).unwrap();
    let records = manifest["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap().as_bytes().to_vec(),
                r[1].as_str().unwrap().to_owned(),
                r[2].as_u64().unwrap(),
                r[3].as_u64().unwrap(),
                hex::decode(r[4].as_str().unwrap()).unwrap(),
            )
        })
        .collect();
    (data.join("log-v1"), records)
}

fn v1_cfg(clock: &Clock) -> LogConfig {
    LogConfig {
        retain_hours: None,
        clock: clock.get(),
        ..LogConfig::default()
    }
}

#[test]
fn the_checked_in_format1_log_opens_reads_recovers_and_takes_new_records() {
    let (golden, manifest) = checked_in_v1();
    let clock = Clock::new(1_900_000_000_000);
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&golden, dir.path());
    let mut keys: Vec<(Vec<u8>, String)> = manifest
        .iter()
        .map(|r| (r.0.clone(), r.1.clone()))
        .collect();
    keys.dedup();
    assert_eq!(keys.len(), 3);

    let check_old = |log: &Log, upto: &dyn Fn(&[u8], &str) -> u64| {
        for (t, p) in &keys {
            let rows: Vec<_> = manifest
                .iter()
                .filter(|r| (&r.0, &r.1) == (t, p) && r.2 < upto(t, p))
                .collect();
            let first = rows[0].2;
            assert_eq!(log.first_offset(t, p), Some(first));
            let got = log.read(t, p, first, 1000, usize::MAX).unwrap();
            let want: Vec<StoredRecord> = rows.iter().map(|r| plain(r.2, r.3, &r.4)).collect();
            assert_eq!(got[..want.len()], want[..]);
            let seen = bodies_from(log, t, p, first);
            for (r, (o, ts, b)) in rows.iter().zip(&seen) {
                assert_eq!((*o, *ts, b), (r.2, r.3, &wrapped(r.3, &r.4)));
            }
            for r in &rows {
                // Append times rise: each record is the first at its time.
                assert_eq!(log.offset_for_time(t, p, r.3).unwrap(), Some(r.2));
            }
        }
    };
    let all = |_: &[u8], _: &str| u64::MAX;
    {
        let log = Log::open(
            dir.path(),
            LogConfig {
                read_only: true,
                ..v1_cfg(&clock)
            },
        )
        .unwrap();
        let mut parts: Vec<_> = log
            .partitions(None)
            .into_iter()
            .map(|i| (i.topic, i.partition))
            .collect();
        parts.sort();
        let mut want = keys.clone();
        want.sort();
        assert_eq!(parts, want);
        check_old(&log, &all);
        for (t, p) in &keys {
            let n = manifest.iter().filter(|r| (&r.0, &r.1) == (t, p)).count();
            assert_eq!(log.verify(t, p).unwrap(), n as u64);
        }
    }

    // Recovery: every index gone, and the last record of the first
    // partition torn (cut short by a power loss).
    let (t0, p0) = keys[0].clone();
    let tdir = dir.path().join(escape_name(&t0).unwrap()).join(&p0);
    for (t, p) in &keys {
        let d = dir.path().join(escape_name(t).unwrap()).join(p);
        for idx in seg_files(&d, "index") {
            fs::remove_file(idx).unwrap();
        }
    }
    let last_seg = seg_files(&tdir, "log").pop().unwrap();
    let len = fs::metadata(&last_seg).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&last_seg)
        .unwrap()
        .set_len(len - 2)
        .unwrap();
    let torn_at = manifest
        .iter()
        .filter(|r| (&r.0, &r.1) == (&t0, &p0))
        .map(|r| r.2)
        .max()
        .unwrap();
    let upto = |t: &[u8], p: &str| {
        if (t, p) == (t0.as_slice(), p0.as_str()) {
            torn_at
        } else {
            u64::MAX
        }
    };
    let mut log = Log::open(dir.path(), v1_cfg(&clock)).unwrap();
    assert_eq!(log.next_offset(&t0, &p0), Some(torn_at));
    check_old(&log, &upto);
    for idx in seg_files(&tdir, "index") {
        assert_eq!(
            file_version(&idx),
            FORMAT_V1,
            "rebuilt in its segment's format"
        );
    }

    // New records, with keys and headers, go to new segments of format 2.
    let new_body = |i: u64| {
        body(
            1_700_000_000_000 + i,
            Some(format!("key-{i}").as_bytes()),
            &[("trace", b"t"), ("naïve", &[0, 255]), ("trace", b"")],
            format!("new-{i}").as_bytes(),
        )
    };
    let mut added = Vec::new();
    for (t, p) in &keys {
        let next = log.next_offset(t, p).unwrap();
        let v1_segments = seg_files(&dir.path().join(escape_name(t).unwrap()).join(p), "log");
        log.append_bodies(t, p, next, &[new_body(next), new_body(next + 1)])
            .unwrap();
        log.append(t, p, next + 2, b"").unwrap();
        let d = dir.path().join(escape_name(t).unwrap()).join(p);
        let segs = seg_files(&d, "log");
        assert_eq!(segs.len(), v1_segments.len() + 1);
        assert_eq!(seg_base(segs.last().unwrap()), next);
        assert_eq!(file_version(segs.last().unwrap()), FORMAT_VERSION);
        added.push((t.clone(), p.clone(), next));
    }
    let check_new = |log: &Log| {
        check_old(log, &upto);
        for (t, p, next) in &added {
            let got = log.read(t, p, *next, 10, usize::MAX).unwrap();
            assert_eq!(got.len(), 3);
            for (i, r) in got[..2].iter().enumerate() {
                let at = next + i as u64;
                assert_eq!(
                    r,
                    &StoredRecord {
                        offset: at,
                        timestamp: 1_900_000_000_000,
                        create_time: Some(1_700_000_000_000 + at),
                        key: Some(format!("key-{at}").into_bytes()),
                        headers: vec![
                            ("trace".into(), b"t".to_vec()),
                            ("naïve".into(), vec![0, 255]),
                            ("trace".into(), Vec::new()),
                        ],
                        value: format!("new-{at}").into_bytes(),
                    }
                );
            }
            assert_eq!(got[2], plain(next + 2, 1_900_000_000_000, b""));
            // The new records' create times are older than every append
            // time of the old ones: positioning goes by record time.
            assert_eq!(
                log.offset_for_time(t, p, 1_700_000_000_000).unwrap(),
                log.first_offset(t, p)
            );
            assert_eq!(
                log.offset_for_time(t, p, 1_899_000_000_000).unwrap(),
                Some(next + 2)
            );
            let held = log.next_offset(t, p).unwrap() - log.first_offset(t, p).unwrap();
            assert_eq!(log.verify(t, p).unwrap(), held);
        }
    };
    check_new(&log);
    log.close().unwrap();
    check_new(&Log::open(dir.path(), v1_cfg(&clock)).unwrap());
    // The checked-in files are untouched (the test worked on a copy).
    let (again, _) = checked_in_v1();
    assert!(seg_files(&again.join("weather").join(&p0), "log")
        .iter()
        .all(|s| file_version(s) == FORMAT_V1));
}

#[test]
fn a_torn_format2_tail_is_truncated_at_every_byte() {
    let golden = tempfile::tempdir().unwrap();
    let clock = Clock::new(5);
    let bodies: Vec<Vec<u8>> = (0..10u64)
        .map(|i| {
            body(
                1_000 + i,
                Some(format!("k{i}").as_bytes()),
                &[("h", format!("v{i}").as_bytes()), ("名", b"")],
                &value(i),
            )
        })
        .collect();
    {
        let mut log = Log::open(golden.path(), small(&clock).with_segment(1 << 20)).unwrap();
        log.append_bodies(T, P, 0, &bodies).unwrap();
        log.close().unwrap();
    }
    let seg = seg_files(&pdir(golden.path()), "log").pop().unwrap();
    let len = fs::metadata(&seg).unwrap().len();
    let last = len - (RECORD_HEADER_LEN + bodies[9].len()) as u64;
    let want: Vec<StoredRecord> = (0..9)
        .map(|i| StoredRecord::from_body(i, 5, &bodies[i as usize]).unwrap())
        .collect();
    for cut in last..len {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(golden.path(), dir.path());
        let seg = pdir(dir.path()).join(seg.file_name().unwrap());
        let f = OpenOptions::new().write(true).open(&seg).unwrap();
        f.set_len(cut).unwrap();
        if cut % 2 == 0 {
            // Zeros where the tail was, as a preallocated file holds.
            f.write_all_at(&vec![0; (len - cut) as usize], cut).unwrap();
        }
        drop(f);
        if cut % 3 == 0 {
            fs::remove_file(seg.with_extension("index")).unwrap();
        }
        let mut log = Log::open(dir.path(), small(&clock).with_segment(1 << 20)).unwrap();
        assert_eq!(
            log.read(T, P, 0, 100, usize::MAX).unwrap(),
            want,
            "cut {cut}"
        );
        assert_eq!(log.next_offset(T, P), Some(9));
        log.append_bodies(T, P, 9, &bodies[9..]).unwrap();
        assert_eq!(
            log.read(T, P, 9, 1, usize::MAX).unwrap()[0],
            StoredRecord::from_body(9, 5, &bodies[9]).unwrap()
        );
        assert_eq!(log.offset_for_time(T, P, 1_009).unwrap(), Some(9));
    }
}

#[test]
fn offset_for_time_goes_by_create_time_out_of_order() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(10_000);
    let times = [100u64, 300, 200, 400, 250, 500, 450, 600];
    let bodies: Vec<Vec<u8>> = times
        .iter()
        .map(|t| body(*t, None, &[], &[b'v'; 100]))
        .collect();
    let mut log = Log::open(dir.path(), small(&clock)).unwrap();
    for (i, b) in bodies.iter().enumerate() {
        log.append_bodies(T, P, i as u64, std::slice::from_ref(b))
            .unwrap();
    }
    assert!(seg_files(&pdir(dir.path()), "log").len() > 2);
    // The first record whose time is at or after T (the first whose newest
    // time so far reaches it).
    let want = |t: u64| times.iter().position(|&x| x >= t).map(|i| i as u64);
    let queries = [
        0, 99, 100, 101, 200, 250, 300, 301, 400, 401, 449, 450, 451, 500, 501, 600, 601, 10_000,
    ];
    let check = |log: &Log| {
        for q in queries {
            assert_eq!(log.offset_for_time(T, P, q).unwrap(), want(q), "T={q}");
        }
    };
    check(&log);
    assert_eq!(log.offset_for_time(T, P, 301).unwrap(), Some(3));
    assert_eq!(log.offset_for_time(T, P, 250).unwrap(), Some(1));
    log.close().unwrap();
    check(&Log::open(dir.path(), small(&clock)).unwrap());
    for idx in seg_files(&pdir(dir.path()), "index") {
        fs::remove_file(idx).unwrap();
    }
    check(&Log::open(dir.path(), read_only(&clock)).unwrap());
    check(&Log::open(dir.path(), small(&clock)).unwrap());
}

#[test]
fn retention_goes_by_append_time_not_create_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Clock::new(10 * 3_600_000);
    let cfg = || LogConfig {
        retain_hours: Some(1),
        ..small(&clock)
    };
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    // Created long ago (a store fetching old records late): kept for an
    // hour from when they were appended.
    let old: Vec<Vec<u8>> = (0..20).map(|i| body(i, None, &[], &value(i))).collect();
    log.append_bodies(T, P, 0, &old).unwrap();
    assert!(seg_files(&pdir(dir.path()), "log").len() > 2);
    assert_eq!(log.enforce_retention().unwrap(), 0);
    log.close().unwrap();
    let mut log = Log::open(dir.path(), cfg()).unwrap();
    assert_eq!(log.enforce_retention().unwrap(), 0, "after a reopen too");
    clock.set(11 * 3_600_000 + 1);
    assert!(log.enforce_retention().unwrap() > 0);
}

/// One record of the property test: a plain value, or a body.
#[derive(Debug, Clone)]
enum Rec {
    Plain(Vec<u8>),
    Body(Meta, Vec<u8>),
}

fn rec() -> impl Strategy<Value = Rec> {
    let bytes = |n| proptest::collection::vec(any::<u8>(), 0..n);
    prop_oneof![
        bytes(40).prop_map(Rec::Plain),
        (
            0u64..2_000,
            proptest::option::of(bytes(6)),
            proptest::collection::vec(("[a-zé名]{0,3}", bytes(4)), 0..3),
            bytes(40)
        )
            .prop_map(|(t, key, headers, v)| Rec::Body(
                Meta {
                    create_time: t,
                    key,
                    headers
                },
                v
            )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Batches of plain values and bodies, at rising append times, in small
    /// segments: everything reads back as appended (before and after a
    /// reopen), and `offset_for_time` answers the first record whose time
    /// (create time, else append time) reaches T.
    #[test]
    fn bodies_and_values_round_trip_and_position_by_record_time(
        batches in proptest::collection::vec((1u64..300, proptest::collection::vec(rec(), 1..6)), 1..8),
        queries in proptest::collection::vec(0u64..4_000, 1..8),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::new(0);
        let mut log = Log::open(dir.path(), small(&clock)).unwrap();
        let mut want = Vec::new();
        let mut times = Vec::new();
        let mut now = 1_000;
        for (step, recs) in &batches {
            now += step;
            clock.set(now);
            let first = want.len() as u64;
            // A batch is all values or all bodies: split runs.
            let mut i = 0;
            while i < recs.len() {
                let plain_run = matches!(recs[i], Rec::Plain(_));
                let j = (i..recs.len())
                    .find(|&j| matches!(recs[j], Rec::Plain(_)) != plain_run)
                    .unwrap_or(recs.len());
                let at = first + i as u64;
                if plain_run {
                    let vals: Vec<&[u8]> = recs[i..j]
                        .iter()
                        .map(|r| match r { Rec::Plain(v) => v.as_slice(), Rec::Body(..) => unreachable!() })
                        .collect();
                    log.append_batch(T, P, at, &vals).unwrap();
                } else {
                    let bodies: Vec<Vec<u8>> = recs[i..j]
                        .iter()
                        .map(|r| match r {
                            Rec::Body(m, v) => { let mut b = Vec::new(); m.encode(&mut b); b.extend_from_slice(v); b }
                            Rec::Plain(_) => unreachable!(),
                        })
                        .collect();
                    log.append_bodies(T, P, at, &bodies).unwrap();
                }
                i = j;
            }
            for (i, r) in recs.iter().enumerate() {
                let offset = first + i as u64;
                match r {
                    Rec::Plain(v) => {
                        want.push(plain(offset, now, v));
                        times.push(now);
                    }
                    Rec::Body(m, v) => {
                        want.push(StoredRecord {
                            offset,
                            timestamp: now,
                            create_time: Some(m.create_time),
                            key: m.key.clone(),
                            headers: m.headers.clone(),
                            value: v.clone(),
                        });
                        times.push(m.create_time);
                    }
                }
            }
        }
        let check = |log: &Log| -> std::result::Result<(), TestCaseError> {
            prop_assert_eq!(&log.read(T, P, 0, usize::MAX, usize::MAX).unwrap(), &want);
            for &q in &queries {
                let expect = times.iter().position(|&t| t >= q).map(|i| i as u64);
                prop_assert_eq!(log.offset_for_time(T, P, q).unwrap(), expect, "T={}", q);
            }
            Ok(())
        };
        check(&log)?;
        log.close().unwrap();
        check(&Log::open(dir.path(), small(&clock)).unwrap())?;
    }
}
