//! Unit tests of `parked.rs`.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

const AT: u64 = 1_700_000_000_000;

fn spot(next: u64) -> Spot {
    Spot { next, at: AT }
}

#[test]
fn a_line_round_trips_and_a_damaged_one_is_refused() {
    let line = encode(b"wea ther", "A1", Spot { next: 42, at: 7 }).unwrap();
    assert!(line.starts_with("wea%20ther A1 42 7 ") && line.ends_with('\n'));
    let body = line.trim_end_matches('\n');
    assert_eq!(
        decode(body),
        Some((b"wea ther".to_vec(), "A1", 42, Some(7)))
    );
    assert_eq!(decode(&body.replace("42", "43")), None, "CRC");
    assert_eq!(decode(&body[..body.len() - 1]), None, "torn");
    assert_eq!(decode(""), None);
    let bad_name = format!("t a/b 1 2 {:08x}", line_crc("t a/b 1 2"));
    assert_eq!(decode(&bad_name), None, "not a partition name");
    let five = format!("t A 1 2 3 {:08x}", line_crc("t A 1 2 3"));
    assert_eq!(decode(&five), None, "a field too many");
    let bad_time = format!("t A 1 x {:08x}", line_crc("t A 1 x"));
    assert_eq!(decode(&bad_time), None, "not a time");
    // The form without the time, as written before parked partitions
    // were forgotten.
    let old = format!("t A 1 {:08x}", line_crc("t A 1"));
    assert_eq!(decode(&old), Some((b"t".to_vec(), "A", 1, None)));
}

#[test]
fn load_keeps_the_last_line_and_leaves_out_a_torn_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig::default();
    let mut text = encode(b"t", "A", spot(5)).unwrap();
    text += &encode(b"t", "A", spot(9)).unwrap();
    text += &encode(b"t", "A", spot(7)).unwrap();
    // Without a time: parked when read.
    text += &format!("u B 3 {:08x}\n", line_crc("u B 3"));
    append(&cfg, dir.path(), &text).unwrap();
    let torn = encode(b"u", "C", spot(1)).unwrap();
    append(&cfg, dir.path(), torn.trim_end_matches('\n')).unwrap();
    let got = load(dir.path(), AT + 5).unwrap();
    assert_eq!(got.lines, 5);
    assert_eq!(got.bad, 1, "the last line has no newline");
    let mut want = parked(&[("t", "A", 7)]);
    want.insert(
        b"u",
        "B",
        Spot {
            next: 3,
            at: AT + 5,
        },
    );
    assert_eq!(got.parked, want);
    assert_eq!(rewrite(&cfg, dir.path(), &want, &[], 0).unwrap(), 2);
    let again = load(dir.path(), AT + 9).unwrap();
    assert_eq!((again.parked, again.lines, again.bad), (want.clone(), 2, 0));
    // Extra entries go after the parked ones and win over them.
    let extra = [
        ((b"u".to_vec(), "B".to_owned()), 8),
        ((b"v".to_vec(), "C".to_owned()), 1),
    ];
    assert_eq!(rewrite(&cfg, dir.path(), &want, &extra, AT).unwrap(), 4);
    let with_extra = load(dir.path(), 0).unwrap();
    let want_extra = parked(&[("t", "A", 7), ("u", "B", 8), ("v", "C", 1)]);
    assert_eq!((with_extra.parked, with_extra.lines), (want_extra, 4));
    assert_eq!(
        rewrite(&cfg, dir.path(), &Parked::default(), &[], 0).unwrap(),
        0
    );
    assert!(!path(dir.path()).exists());
}

#[test]
fn forget_drops_what_was_parked_by_then_and_walks_only_when_due() {
    let mut p = Parked::default();
    assert_eq!(p.forget(u64::MAX), 0, "empty");
    p.insert(
        b"t",
        "ABCDEF0123456789ABCDEF0123456789",
        Spot { next: 5, at: 10 },
    );
    p.insert(
        b"t",
        "abcdef0123456789abcdef0123456789",
        Spot { next: 6, at: 20 },
    );
    p.insert(b"u", "name", Spot { next: 7, at: 30 });
    p.insert(b"u", "late", Spot { next: 8, at: 40 });
    assert_eq!(p.forget(9), 0);
    assert_eq!(p.forget(20), 2, "at or before");
    assert_eq!(p.len(), 2);
    assert_eq!(p.get(b"t", "ABCDEF0123456789ABCDEF0123456789"), None);
    assert_eq!(p.get(b"u", "name"), Some(7));
    assert_eq!(p.oldest, 30, "the oldest left");
    // Parked again later: it stays.
    p.insert(b"u", "name", Spot { next: 9, at: 50 });
    assert_eq!(p.forget(45), 1);
    assert_eq!(
        p.sorted(),
        [(b"u".to_vec(), "name".to_owned(), Spot { next: 9, at: 50 })]
    );
    assert_eq!(p.topics().collect::<Vec<_>>(), [b"u".as_slice()]);
    assert_eq!(p.forget(50), 1);
    assert!(p.is_empty());
    assert_eq!(p.oldest, u64::MAX);
}

fn parked(entries: &[(&str, &str, u64)]) -> Parked {
    let mut p = Parked::default();
    for (t, n, next) in entries {
        p.insert(t.as_bytes(), n, spot(*next));
    }
    p
}

#[test]
fn addresses_of_one_case_pack_and_anything_else_stays_a_name() {
    let upper = "0123456789ABCDEF0123456789ABCDEF";
    let lower = "0123456789abcdef0123456789abcdef";
    let digits = "01234567890123456789012345678901";
    for (name, case) in [
        (upper, Some(false)),
        (lower, Some(true)),
        (digits, Some(false)),
    ] {
        let (l, bits) = pack(name).expect(name);
        assert_eq!(Some(l), case, "{name}");
        assert_eq!(unpack(l, bits), name);
    }
    for name in [
        "0123456789ABCDEF0123456789abcdef", // both cases
        "0123456789ABCDEF0123456789ABCDE",  // 31 digits
        "0123456789ABCDEF0123456789ABCDEF0",
        "+123456789ABCDEF0123456789ABCDEF",
        "0123456789ABCDEF0123456789ABCDEG",
        "A",
        "",
    ] {
        assert_eq!(pack(name), None, "{name}");
    }
}

#[test]
fn one_address_in_two_cases_is_two_partitions() {
    let mut p = Parked::default();
    p.insert(b"t", "ABCDEF0123456789ABCDEF0123456789", spot(5));
    p.insert(b"t", "abcdef0123456789abcdef0123456789", spot(7));
    p.insert(b"u", "ABCDEF0123456789ABCDEF0123456789", spot(9));
    assert_eq!(p.len(), 3);
    assert_eq!(p.get(b"t", "ABCDEF0123456789ABCDEF0123456789"), Some(5));
    assert_eq!(p.get(b"t", "abcdef0123456789abcdef0123456789"), Some(7));
    assert_eq!(p.get(b"u", "ABCDEF0123456789ABCDEF0123456789"), Some(9));
    assert_eq!(p.get(b"t", "AbCdEf0123456789ABCDEF0123456789"), None);
    assert_eq!(p.get(b"v", "ABCDEF0123456789ABCDEF0123456789"), None);
    assert_eq!(p.remove(b"t", "abcdef0123456789abcdef0123456789"), Some(7));
    assert_eq!(p.remove(b"t", "abcdef0123456789abcdef0123456789"), None);
    assert_eq!(p.len(), 2);
    assert_eq!(p.remove(b"t", "ABCDEF0123456789ABCDEF0123456789"), Some(5));
    let topics: Vec<&[u8]> = p.topics().collect();
    assert_eq!(
        topics,
        [b"u".as_slice()],
        "a topic with nothing parked is not listed"
    );
}

/// A name the property test draws: an address of either case, a mixed
/// one, or a short name, from a small pool so that keys repeat.
fn any_name() -> impl Strategy<Value = String> {
    (0u8..4, 0u128..6).prop_map(|(kind, n)| {
        let hex = format!(
            "{:032X}",
            n.wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835)
        );
        match kind {
            0 => hex,
            1 => hex.to_lowercase(),
            2 => format!("{}{}", &hex[..16], hex[16..].to_lowercase()),
            _ => format!("p{n}"),
        }
    })
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u8, String, Spot),
    Remove(u8, String),
    Forget(u64),
}

fn any_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..3, any_name(), 0u64..1000, 0u64..100)
            .prop_map(|(t, n, next, at)| Op::Insert(t, n, Spot { next, at })),
        2 => (0u8..3, any_name()).prop_map(|(t, n)| Op::Remove(t, n)),
        1 => (0u64..100).prop_map(Op::Forget),
    ]
}

proptest! {
    /// The compact map answers as a plain ordered map of the same
    /// operations does, names and spots back exactly as given.
    #[test]
    fn parked_behaves_as_a_plain_map(ops in proptest::collection::vec(any_op(), 0..200)) {
        let mut model: BTreeMap<(Vec<u8>, String), Spot> = BTreeMap::new();
        let mut p = Parked::default();
        for op in ops {
            match op {
                Op::Insert(t, n, x) => {
                    p.insert(&[t], &n, x);
                    model.insert((vec![t], n), x);
                }
                Op::Remove(t, n) => {
                    let got = p.remove(&[t], &n);
                    prop_assert_eq!(got, model.remove(&(vec![t], n)).map(|s| s.next));
                }
                Op::Forget(before) => {
                    let n = model.len();
                    model.retain(|_, s| s.at > before);
                    prop_assert_eq!(p.forget(before), n - model.len());
                }
            }
            prop_assert_eq!(p.len(), model.len());
        }
        let want: Vec<(Vec<u8>, String, Spot)> =
            model.iter().map(|((t, n), x)| (t.clone(), n.clone(), *x)).collect();
        prop_assert_eq!(p.sorted(), want);
        for ((t, n), x) in &model {
            prop_assert_eq!(p.spot(t, n), Some(*x));
        }
        let mut topics: Vec<Vec<u8>> = p.topics().map(<[u8]>::to_vec).collect();
        topics.sort();
        let mut want_topics: Vec<Vec<u8>> = model.keys().map(|(t, _)| t.clone()).collect();
        want_topics.dedup();
        prop_assert_eq!(topics, want_topics);
        let one: Vec<_> = p.iter(Some(&[1])).map(|(t, _, _)| t.to_vec()).collect();
        prop_assert!(one.iter().all(|t| t == &[1]));
        prop_assert_eq!(one.len(), model.keys().filter(|(t, _)| t == &[1]).count());
    }
}
