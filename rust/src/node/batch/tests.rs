use super::*;
use proptest::prelude::*;

#[test]
fn values_come_back_in_order_with_their_spans() {
    let b: Batch = [&b"ab"[..], b"", b"cde"].into_iter().collect();
    assert_eq!(b.len(), 3);
    assert_eq!(b.bytes(), 5);
    assert_eq!(b.iter().collect::<Vec<_>>(), vec![&b"ab"[..], b"", b"cde"]);
    assert_eq!(b.get(1), Some(&b""[..]));
    assert_eq!(b.get(3), None);
    assert_eq!((b.span(0, 3), b.span(1, 3), b.span(2, 2)), (5, 3, 0));
    let mut cut = b.clone();
    cut.truncate(2);
    assert_eq!(cut.iter().collect::<Vec<_>>(), vec![&b"ab"[..], b""]);
    assert_eq!(cut.bytes(), 2);
    cut.truncate(5);
    assert_eq!(cut.len(), 2);
    cut.truncate(0);
    assert!(cut.is_empty() && cut.bytes() == 0);
    cut.push(b"again");
    assert_eq!(cut.iter().collect::<Vec<_>>(), vec![&b"again"[..]]);
    cut.clear();
    assert!(cut.is_empty() && cut.bytes() == 0 && cut.allocated() > 0);
    let one = Batch::from(b"xyz".to_vec());
    assert_eq!(one.iter().collect::<Vec<_>>(), vec![&b"xyz"[..]]);
}

#[test]
fn shrink_gives_back_room_a_held_batch_does_not_use() {
    let mut b = Batch::with_capacity(1000, 64 << 10);
    b.push(b"one value");
    assert!(b.allocated() >= (64 << 10) + 8000);
    b.shrink();
    assert!(b.allocated() <= 9 + 8, "{}", b.allocated());
    assert_eq!(b.iter().collect::<Vec<_>>(), vec![&b"one value"[..]]);
    let mut full: Batch = (0..100).map(|_| [7u8; 100]).collect();
    let before = full.allocated();
    full.shrink();
    assert!(full.allocated() <= before);
    assert_eq!(full.len(), 100);
}

#[test]
fn arrow_offsets_are_checked_and_may_start_past_zero() {
    let values = b"..abcdef";
    let b = Batch::from_offsets(values, [2, 4, 4, 8]).unwrap();
    assert_eq!(b.iter().collect::<Vec<_>>(), vec![&b"ab"[..], b"", b"cdef"]);
    assert_eq!(b.bytes(), 6);
    assert!(Batch::from_offsets(values, [0]).unwrap().is_empty());
    assert!(Batch::from_offsets(values, []).unwrap().is_empty());
    let back = Batch::from_offsets(values, [0, 3, 2]).unwrap_err();
    assert!(back.contains("got [3, 2)"), "{back}");
    let past = Batch::from_offsets(values, [0, 9]).unwrap_err();
    assert!(past.contains("8-byte data buffer, got [0, 9)"), "{past}");
    assert!(Batch::from_offsets(values, [-1, 2]).is_err());
    assert!(
        Batch::from_offsets(values, [9]).unwrap().is_empty(),
        "no value, no check"
    );
}

proptest! {
    #[test]
    fn split_keeps_every_value_in_pieces_within_the_bound(
        values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..60),
        max in 1usize..200,
    ) {
        let b: Batch = values.iter().collect();
        let pieces = b.split(max);
        let mut back = Vec::new();
        for p in &pieces {
            prop_assert!(!p.is_empty() || values.is_empty());
            prop_assert!(p.bytes() <= max || p.len() == 1);
            back.extend(p.iter().map(<[u8]>::to_vec));
        }
        prop_assert_eq!(back, values);
    }
}
