use super::*;

#[test]
fn bytes_follow_every_change() {
    let mut h = Held::default();
    assert_eq!(
        h.hold_bounded(5, b"abc", (10, 100, usize::MAX), false),
        (true, 0)
    );
    h.insert(7, b"de".to_vec());
    h.insert(7, b"xyz1".to_vec());
    assert_eq!((h.len(), h.bytes()), (2, 7));
    assert_eq!((h.first(), h.first_from(6)), (Some(5), Some(7)));
    assert_eq!(h.remove(5), Some(b"abc".to_vec()));
    assert_eq!(h.bytes(), 4);
    h.insert(2, b"q".to_vec());
    h.drop_below(7);
    assert_eq!((h.offsets().collect::<Vec<_>>(), h.bytes()), (vec![7], 4));
    h.clear();
    assert_eq!((h.len(), h.bytes(), h.first()), (0, 0, None));
}

#[test]
fn a_shared_total_bounds_every_held_counted_with_it() {
    let total = Arc::new(AtomicUsize::new(0));
    let mut a = Held::counted(total.clone());
    let mut b = Held::counted(total.clone());
    let bounds = (100, 100, 8);
    assert_eq!(a.hold_bounded(1, b"abcd", bounds, true), (true, 0));
    assert_eq!(a.hold_bounded(2, b"efgh", bounds, true), (true, 0));
    assert_eq!(total.load(Relaxed), 8);
    // b holds nothing: one record is held past the total (keep_one)...
    assert_eq!(b.hold_bounded(5, b"ijkl", bounds, true), (true, 0));
    // ...and no more; nor without keep_one.
    assert_eq!(b.hold_bounded(6, b"mn", bounds, true), (false, 0));
    let mut c = Held::counted(total.clone());
    assert_eq!(c.hold_bounded(9, b"o", bounds, false), (false, 0));
    // Every change is counted: a remove, a drop_below, a clear, a drop.
    assert_eq!(a.remove(1).as_deref(), Some(&b"abcd"[..]));
    assert_eq!(total.load(Relaxed), 8);
    a.drop_below(3);
    assert_eq!(total.load(Relaxed), 4);
    assert_eq!(c.hold_bounded(9, b"o", bounds, false), (true, 0));
    b.clear();
    drop(c);
    assert_eq!(total.load(Relaxed), 0);
    drop(a);
}

#[test]
fn past_a_bound_the_farthest_make_room() {
    let mut h = Held::default();
    for o in [10, 11, 12] {
        assert_eq!(
            h.hold_bounded(o, b"12345", (3, 100, usize::MAX), false),
            (true, 0)
        );
    }
    assert_eq!(
        h.hold_bounded(13, b"12345", (3, 100, usize::MAX), false),
        (false, 0)
    );
    assert_eq!(
        h.hold_bounded(4, b"12345", (3, 100, usize::MAX), false),
        (true, 1)
    );
    assert_eq!(h.offsets().collect::<Vec<_>>(), vec![4, 10, 11]);
    // In bytes: 11 and 10 make room for the 10 bytes of 2.
    assert_eq!(
        h.hold_bounded(2, &[0; 10], (9, 16, usize::MAX), false),
        (true, 2)
    );
    assert_eq!(
        (h.offsets().collect::<Vec<_>>(), h.bytes()),
        (vec![2, 4], 15)
    );
    // Larger than the bound: held only when nothing is and `keep_one`.
    let mut h = Held::default();
    assert_eq!(
        h.hold_bounded(1, &[0; 50], (9, 16, usize::MAX), false),
        (false, 0)
    );
    assert_eq!(
        h.hold_bounded(1, &[0; 50], (9, 16, usize::MAX), true),
        (true, 0)
    );
    assert_eq!(
        h.hold_bounded(0, &[0; 50], (9, 16, usize::MAX), true),
        (true, 1)
    );
    assert_eq!(h.offsets().collect::<Vec<_>>(), vec![0]);
}
