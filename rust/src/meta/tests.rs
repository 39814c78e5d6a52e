//! Unit tests of `meta.rs`.

use super::*;
use proptest::prelude::*;

#[test]
fn plain_costs_nine_bytes() {
    let mut b = Vec::new();
    encode_plain(&mut b, 1234);
    assert_eq!(b.len(), PLAIN_LEN);
    let (m, rest) = parse(&b).unwrap();
    assert!(rest.is_empty());
    assert_eq!((m.create_time, m.key, m.header_count), (1234, None, 0));
    let none: &[(&str, &[u8])] = &[];
    let mut e = Vec::new();
    encode(&mut e, 1234, None, none);
    assert_eq!(e, b, "encode without key or headers is the plain form");
}

#[test]
fn round_trip_with_empty_repeated_and_non_ascii_headers() {
    let headers = vec![
        ("".to_string(), b"".to_vec()),
        ("trace".to_string(), b"a".to_vec()),
        ("trace".to_string(), b"b".to_vec()),
        ("naïve-名前".to_string(), vec![0, 255]),
    ];
    let m = Meta {
        create_time: 1_700_000_000_000,
        key: Some(b"".to_vec()),
        headers,
    };
    let mut b = Vec::new();
    m.encode(&mut b);
    assert_eq!(b.len(), encoded_len(m.key.as_deref(), &m.headers));
    b.extend_from_slice(b"value");
    let (r, rest) = parse(&b).unwrap();
    assert_eq!(rest, b"value");
    assert_eq!(r.to_owned(), m);
    assert_eq!(r.raw.len(), b.len() - 5);
}

#[test]
fn malformed_is_an_error_not_a_panic() {
    assert!(parse(&[]).is_err());
    assert!(
        parse(&[16, 0, 0, 0, 0, 0, 0, 0, 0]).is_err(),
        "unknown flag"
    );
    assert!(
        parse(&[8, 0, 0, 0, 0, 0, 0, 0, 1]).is_err(),
        "no time, but a time"
    );
    assert!(
        parse(&[12, 0, 0, 0, 0, 0, 0, 0, 0]).is_err(),
        "no time and append time"
    );
    assert!(
        parse(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 9]).is_err(),
        "key runs past"
    );
    let truncated = [1, 0, 0, 0, 0, 0, 0, 0, 0, 0x80];
    assert!(parse(&truncated).is_err(), "truncated length");
    let six = [
        1, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
    ];
    assert!(parse(&six).is_err(), "a varint of 6 octets");
    let big = [1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x7f];
    assert!(parse(&big).is_err(), "over 2^32 - 1");
    let none = [2, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert!(parse(&none).is_err(), "headers flag with none");
    let huge = [
        2, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0,
    ];
    assert!(parse(&huge).is_err(), "a huge count");
    let not_utf8 = [2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0xff, 0];
    assert!(parse(&not_utf8).is_err(), "a name that is not UTF-8");
    assert!(parse(&[2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, b'a', 0]).is_ok());
    let mut two = Vec::new();
    encode_plain(&mut two, 1);
    encode_plain(&mut two, 2);
    assert!(parse_all(&two, 2, |_| {}).is_ok());
    assert!(parse_all(&two, 1, |_| {}).is_err(), "left over");
    assert!(parse_all(&two, 3, |_| {}).is_err(), "too few");
}

#[test]
fn lengths_are_varints() {
    for n in [
        0usize,
        1,
        127,
        128,
        16_383,
        16_384,
        1 << 21,
        (1 << 28) - 1,
        1 << 28,
        u32::MAX as usize,
    ] {
        let mut b = Vec::new();
        put_varint(&mut b, n);
        assert_eq!(b.len(), varint_len(n), "{n}");
        assert_eq!(take_varint(&b).unwrap(), (n, &[][..]), "{n}");
    }
    // A 16 B key and two small headers: 27 bytes of lengths fewer than longstrs.
    let hs = [("trace", &b"0af7651916cd43dd"[..]), ("src", b"web")];
    assert_eq!(
        encoded_len(Some(&[0u8; 16][..]), &hs),
        9 + 17 + 1 + 6 + 17 + 4 + 4
    );
}

#[test]
fn wrapped_values_say_what_their_time_is() {
    let mut b = Vec::new();
    wrap(&mut b, Some(77), b"v");
    let (m, v) = split(&b).unwrap();
    assert_eq!(
        (m.timestamp(), v),
        (Some((77, TimeType::LogAppend)), &b"v"[..])
    );
    b.clear();
    wrap(&mut b, None, b"v");
    let (m, v) = split(&b).unwrap();
    assert_eq!((m.timestamp(), m.time_or(5), v), (None, 5, &b"v"[..]));
    b.clear();
    encode_plain(&mut b, 9);
    assert_eq!(
        split(&b).unwrap().0.timestamp(),
        Some((9, TimeType::Create))
    );
}

proptest! {
    #[test]
    fn parse_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = parse(&b);
        let _ = parse_all(&b, 3, |m| { let _ = m.headers().count(); });
    }

    #[test]
    fn round_trips(ts in any::<u64>(), key in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
                   hs in proptest::collection::vec(("[a-zé]{0,4}", proptest::collection::vec(any::<u8>(), 0..4)), 0..4)) {
        let m = Meta { create_time: ts, key, headers: hs };
        let mut b = Vec::new();
        m.encode(&mut b);
        let (r, rest) = parse(&b).unwrap();
        prop_assert!(rest.is_empty());
        prop_assert_eq!(r.to_owned(), m);
    }
}
