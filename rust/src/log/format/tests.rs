//! Unit tests of `format.rs`.

use super::*;
use proptest::prelude::*;

#[test]
fn names_are_readable() {
    assert_eq!(escape_name(b"weather").unwrap(), "weather");
    assert_eq!(escape_name(b"a/b c").unwrap(), "a%2Fb%20c");
    assert_eq!(escape_name(b"..").unwrap(), "%2E.");
    assert_eq!(escape_name(b"").unwrap(), "%");
    assert_eq!(escape_name(b"%").unwrap(), "%25");
    assert!(escape_name(&[0xffu8; 100]).is_err());
    assert_eq!(unescape_name("%41"), None, "non-canonical escape");
    assert_eq!(unescape_name(".x"), None, "leading dot is escaped");
    assert_eq!(unescape_name("%2e"), None, "lower-case hex");
    assert_eq!(segment_file_name(42, LOG_EXT), "00000000000000000042.log");
    assert_eq!(
        parse_segment_file_name("00000000000000000042.index"),
        Some((42, INDEX_EXT))
    );
    assert_eq!(parse_segment_file_name("42.log"), None);
    assert!(check_partition_name("85E3C6EBDC7B4156AD9C43611EBC09CE").is_ok());
    assert!(check_partition_name("../x").is_err());
    assert!(check_partition_name("").is_err());
}

#[test]
fn headers_round_trip() {
    let h = encode_file_header(&LOG_MAGIC, FORMAT_VERSION, 7);
    assert_eq!(decode_file_header(&h, &LOG_MAGIC), Ok((7, FORMAT_VERSION)));
    assert!(decode_file_header(&h, &INDEX_MAGIC).is_err());
    let h = encode_file_header(&INDEX_MAGIC, FORMAT_V1, 7);
    assert_eq!(decode_file_header(&h, &INDEX_MAGIC), Ok((7, FORMAT_V1)));
    let h = encode_file_header(&LOG_MAGIC, 3, 7);
    let e = decode_file_header(&h, &LOG_MAGIC).unwrap_err();
    assert!(e.contains("format version 3"), "{e}");
    let mut buf = Vec::new();
    encode_record(&mut buf, 9, 1234, b"hello");
    let rh = RecordHeader::decode(&buf);
    assert_eq!((rh.offset, rh.len, rh.timestamp), (9, 5, 1234));
    assert_eq!(rh.crc, record_crc(1234, b"hello"));
    assert_eq!(rh.record_len() as usize, buf.len());
}

#[test]
fn record_time_is_the_metadata_s_else_the_append_time() {
    let mut body = Vec::new();
    crate::meta::encode_plain(&mut body, 1234);
    body.extend_from_slice(b"v");
    assert_eq!(record_time(FORMAT_VERSION, 99, &body), 1234);
    assert_eq!(record_time(FORMAT_V1, 99, &body), 99, "format 1: a value");
    body.clear();
    crate::meta::wrap(&mut body, Some(7), b"v");
    assert_eq!(record_time(FORMAT_VERSION, 99, &body), 7);
    body.clear();
    crate::meta::wrap(&mut body, None, b"v");
    assert_eq!(record_time(FORMAT_VERSION, 99, &body), 99, "no time");
    assert_eq!(record_time(FORMAT_VERSION, 99, b"short"), 99);
}

proptest! {
    #[test]
    fn escape_round_trips(name in proptest::collection::vec(any::<u8>(), 0..80)) {
        let s = escape_name(&name).unwrap();
        prop_assert!(s.bytes().all(|b| b.is_ascii_graphic() && b != b'/'));
        prop_assert!(s != "." && s != ".." && !s.starts_with('.'));
        prop_assert_eq!(unescape_name(&s), Some(name));
    }

    #[test]
    fn name_fits_says_what_escape_name_does(
        name in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'/')], 0..130)
    ) {
        let escaped = escape_name(&name);
        prop_assert_eq!(name_fits(&name), escaped.is_ok());
        if let Ok(s) = escaped {
            prop_assert_eq!(s.len(), escaped_len(&name));
        }
    }
}
