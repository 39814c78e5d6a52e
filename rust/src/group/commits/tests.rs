use proptest::prelude::*;

use super::*;

fn rec(
    group: &[u8],
    topic: &[u8],
    partition: &[u8],
    epoch: u64,
    offset: u64,
    time_ms: u64,
) -> CommitRecord {
    CommitRecord {
        group: group.to_vec(),
        topic: topic.to_vec(),
        partition: partition.to_vec(),
        position: Position {
            epoch,
            offset,
            time_ms,
        },
    }
}

fn bytes(r: &CommitRecord) -> Vec<u8> {
    let mut v = Vec::new();
    r.encode(&mut v).unwrap();
    v
}

#[test]
fn a_record_is_byte_exact_as_documented() {
    let r = rec(b"g", b"t", b"p", 1, 2, 3);
    let v = bytes(&r);
    assert_eq!(v.len(), MIN_RECORD);
    let mut want = vec![
        0,
        0,
        0,
        (MIN_RECORD - 4) as u8,
        0x01,
        1,
        b'g',
        1,
        b't',
        1,
        b'p',
    ];
    for n in [1u64, 2, 3] {
        want.extend_from_slice(&n.to_be_bytes());
    }
    let crc = crc32c::crc32c(&want[4..]);
    want.extend_from_slice(&crc.to_be_bytes());
    assert_eq!(v, want);
    assert_eq!(CommitRecord::decode(&v), Ok((r, MIN_RECORD)));
    let long = vec![b'x'; 255];
    let big = CommitRecord {
        group: long.clone(),
        topic: long.clone(),
        partition: long,
        position: Position {
            epoch: 0,
            offset: 0,
            time_ms: 0,
        },
    };
    assert_eq!(bytes(&big).len(), MAX_RECORD);
}

#[test]
fn names_must_be_one_to_255_bytes() {
    let mut out = vec![9];
    assert_eq!(
        rec(b"", b"t", b"p", 0, 0, 0).encode(&mut out),
        Err(CommitError::Empty("group"))
    );
    assert_eq!(
        rec(b"g", &[b'x'; 256], b"p", 0, 0, 0).encode(&mut out),
        Err(CommitError::TooLong("topic"))
    );
    assert_eq!(out, vec![9], "a refused record leaves the buffer alone");
    // An empty name with a valid CRC (forged past the encoder) is refused.
    let mut v = bytes(&rec(b"g", b"t", b"p", 0, 0, 0));
    // Make the partition empty: its length octet 0, drop its byte, fix up.
    v.remove(10);
    v[9] = 0;
    let n = v.len() - 4;
    let crc = crc32c::crc32c(&v[4..n]);
    v[n..].copy_from_slice(&crc.to_be_bytes());
    let len = (v.len() - 4) as u32;
    v[..4].copy_from_slice(&len.to_be_bytes());
    assert_eq!(CommitRecord::decode(&v), Err(CommitError::BadLength(len)));
}

#[test]
fn every_damage_is_an_error() {
    let v = bytes(&rec(b"billing", b"orders", b"P1", 0, 1000, 5));
    assert!(matches!(
        CommitRecord::decode(&v[..3]),
        Err(CommitError::Truncated { .. })
    ));
    assert!(matches!(
        CommitRecord::decode(&v[..v.len() - 1]),
        Err(CommitError::Truncated { .. })
    ));
    let mut w = v.clone();
    w[20] ^= 1;
    assert!(matches!(
        CommitRecord::decode(&w),
        Err(CommitError::BadCrc { .. })
    ));
    let mut w = v.clone();
    w[..4].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(
        CommitRecord::decode(&w),
        Err(CommitError::BadLength(u32::MAX))
    );
    // A wrong version, with a CRC that matches it.
    let mut w = v.clone();
    w[4] = 2;
    let n = w.len() - 4;
    let crc = crc32c::crc32c(&w[4..n]);
    w[n..].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(CommitRecord::decode(&w), Err(CommitError::BadVersion(2)));
    // A length that includes one byte too many inside the CRC.
    let mut w = v[..v.len() - 4].to_vec();
    w.push(0);
    let crc = crc32c::crc32c(&w[4..]);
    w.extend_from_slice(&crc.to_be_bytes());
    let len = (w.len() - 4) as u32;
    w[..4].copy_from_slice(&len.to_be_bytes());
    assert_eq!(CommitRecord::decode(&w), Err(CommitError::TrailingBytes(1)));
    // A group length that runs past the fields.
    let mut w = v.clone();
    w[5] = 200;
    let n = w.len() - 4;
    let crc = crc32c::crc32c(&w[4..n]);
    w[n..].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(
        CommitRecord::decode(&w),
        Err(CommitError::Truncated { .. })
    ));
}

#[test]
fn a_log_reads_up_to_its_torn_tail() {
    let a = rec(b"g", b"t", b"p1", 0, 10, 1);
    let b = rec(b"g", b"t", b"p2", 0, 20, 2);
    let mut log = bytes(&a);
    log.extend(bytes(&b));
    let whole = log.len();
    assert_eq!(
        read_log(&log),
        LogContents {
            records: vec![a.clone(), b.clone()],
            clean_len: whole,
            damage: None
        }
    );
    log.extend_from_slice(&bytes(&a)[..10]);
    let got = read_log(&log);
    assert_eq!(got.records, vec![a, b]);
    assert_eq!(got.clean_len, whole);
    assert!(matches!(got.damage, Some(CommitError::Truncated { .. })));
    assert_eq!(read_log(&[]).records, vec![]);
}

#[test]
fn the_table_keeps_the_greatest_position() {
    let mut t = CommitTable::new();
    assert!(t.is_empty());
    assert!(!t.group_known(b"billing"));
    assert!(t.merge(&rec(b"billing", b"orders", b"P1", 0, 100, 1)));
    // A stale commit (a former owner's, late) does not move it back.
    assert!(!t.merge(&rec(b"billing", b"orders", b"P1", 0, 90, 2)));
    // The same again: nothing new to log or pass on.
    assert!(!t.merge(&rec(b"billing", b"orders", b"P1", 0, 100, 1)));
    assert!(t.merge(&rec(b"billing", b"orders", b"P1", 0, 150, 3)));
    // A reset (higher epoch) moves it back.
    assert!(t.merge(&rec(b"billing", b"orders", b"P1", 1, 0, 4)));
    assert_eq!(
        t.get(b"billing", b"orders", b"P1"),
        Some(Position {
            epoch: 1,
            offset: 0,
            time_ms: 4
        })
    );
    assert!(t.merge(&rec(b"billing", b"refunds", b"P2", 0, 7, 5)));
    assert!(t.merge(&rec(b"audit", b"orders", b"P1", 0, 3, 6)));
    assert!(t.merge(&rec(b"billing2", b"orders", b"P1", 0, 3, 6)));
    assert_eq!(t.len(), 4);
    assert!(t.group_known(b"billing"));
    assert!(!t.group_known(b"bill"));
    assert_eq!(t.groups(), vec![&b"audit"[..], b"billing", b"billing2"]);
    assert_eq!(t.commits(b"billing", &[]).len(), 2);
    let orders = t.commits(b"billing", &[b"orders"]);
    assert_eq!(orders.len(), 1);
    assert_eq!(orders[0].partition, b"P1");
    assert_eq!(t.get(b"billing", b"orders", b"P9"), None);
}

/// Another store's commit moves a row only past its `(epoch, offset)`:
/// the same commit taken at another time is nothing new (else two stores
/// would pass it back and forth at every exchange).
#[test]
fn a_replica_moves_a_row_only_past_its_epoch_and_offset() {
    let mut t = CommitTable::new();
    assert!(t.merge_replica(&rec(b"g", b"t", b"P", 0, 10, 5)));
    assert!(!t.merge_replica(&rec(b"g", b"t", b"P", 0, 10, 9)));
    assert!(!t.merge_replica(&rec(b"g", b"t", b"P", 0, 9, 99)));
    assert_eq!(t.get(b"g", b"t", b"P").map(|p| p.time_ms), Some(5));
    assert!(t.merge_replica(&rec(b"g", b"t", b"P", 0, 11, 1)));
    assert!(t.merge_replica(&rec(b"g", b"t", b"P", 1, 0, 1)));
    assert_eq!(
        t.get(b"g", b"t", b"P"),
        Some(Position {
            epoch: 1,
            offset: 0,
            time_ms: 1
        })
    );
}

#[test]
fn lag_is_what_exists_past_the_commit() {
    assert_eq!(lag(100, 150), 50);
    assert_eq!(lag(150, 150), 0);
    assert_eq!(lag(160, 150), 0);
    assert_eq!(lag(0, u64::MAX), u64::MAX);
}

fn arb_record() -> impl Strategy<Value = CommitRecord> {
    (
        prop::sample::select(vec![&b"g1"[..], b"g2"]),
        prop::sample::select(vec![&b"t1"[..], b"t2"]),
        prop::sample::select(vec![&b"p1"[..], b"p2", b"p3"]),
        0u64..3,
        0u64..50,
        0u64..5,
    )
        .prop_map(|(g, t, p, e, o, ms)| rec(g, t, p, e, o, ms))
}

proptest! {
    #[test]
    fn records_round_trip(
        group in prop::collection::vec(any::<u8>(), 1..256),
        topic in prop::collection::vec(any::<u8>(), 1..256),
        partition in prop::collection::vec(any::<u8>(), 1..256),
        epoch in any::<u64>(),
        offset in any::<u64>(),
        time_ms in any::<u64>(),
    ) {
        let r = CommitRecord { group, topic, partition, position: Position { epoch, offset, time_ms } };
        let v = bytes(&r);
        prop_assert!((MIN_RECORD..=MAX_RECORD).contains(&v.len()));
        prop_assert_eq!(CommitRecord::decode(&v), Ok((r, v.len())));
    }

    #[test]
    fn decoding_garbage_never_panics(buf in prop::collection::vec(any::<u8>(), 0..120)) {
        let _ = CommitRecord::decode(&buf);
        let got = read_log(&buf);
        prop_assert!(got.clean_len <= buf.len());
    }

    #[test]
    fn any_single_flipped_byte_is_caught(r in arb_record(), at in any::<prop::sample::Index>(), x in 1u8..) {
        let mut v = bytes(&r);
        let i = at.index(v.len());
        v[i] ^= x;
        // CRC-32C catches every single-byte change; a damaged length is
        // out of range, truncated, or leaves a CRC that cannot match.
        prop_assert!(CommitRecord::decode(&v).is_err());
    }

    #[test]
    fn merging_is_order_free_and_idempotent(
        records in prop::collection::vec(arb_record(), 0..40),
        seed in any::<u64>(),
    ) {
        // Two stores taking the same commits in different orders, one of
        // them twice, hold the same table: replication converges.
        let mut a = CommitTable::new();
        for r in &records {
            a.merge(r);
        }
        let mut shuffled = records.clone();
        let n = shuffled.len();
        if n > 1 {
            let mut s = seed;
            for i in (1..n).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                shuffled.swap(i, (s >> 33) as usize % (i + 1));
            }
        }
        let mut b = CommitTable::new();
        for r in shuffled.iter().chain(&records) {
            b.merge(r);
        }
        prop_assert_eq!(&a, &b);
        // A store that rebuilds from a snapshot (compaction) holds the same.
        let mut c = CommitTable::new();
        let mut log = Vec::new();
        for r in a.snapshot() {
            r.encode(&mut log).unwrap();
        }
        for r in read_log(&log).records {
            c.merge(&r);
        }
        prop_assert_eq!(&a, &c);
        // And every position held is the greatest one merged.
        for r in &records {
            let got = a.get(&r.group, &r.topic, &r.partition).unwrap();
            prop_assert!(got >= r.position);
        }
    }
}
