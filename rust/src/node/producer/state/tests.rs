use super::*;
use crate::node::answers::Form;
use crate::node::producer::COALESCE;
use crate::wire::Prefix;

const P: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";
const C: &[u8] = b"9E51FBAE55A649C1A50C0B360F3FF7AE";

fn fetch(seq: u64, count: u32) -> Fetch<'static> {
    Fetch {
        partition: P,
        requester: C,
        topic: b"hello",
        sequence: seq,
        count,
    }
}

fn ack(store: Option<&'static [u8]>, seq: u64) -> Ack<'static> {
    Ack {
        topic: P,
        address: store,
        subject: b"hello",
        sequence: seq,
    }
}

fn sub(kind: Kind, key: &[u8], subscribe: bool) -> Subscription<'_> {
    Subscription {
        subscribe,
        prefix: Prefix::of(kind, key),
    }
}

/// The records a FETCH is answered with (read in place through its
/// [`Reply`]), once the requester's DIRECT-RECORD subscription was read.
fn answer(st: &mut ProducerState, f: &Fetch<'_>) -> Vec<(u64, Vec<u8>)> {
    st.on_subscription(&sub(Kind::DirectRecord, f.requester, true));
    let Some(r) = st.on_fetch(f) else {
        panic!("a requester known by its `D` subscription is answered");
    };
    let Dest::Direct { to, partition, .. } = r.dest else {
        panic!("a FETCH answer goes to its requester");
    };
    assert_eq!((to, partition), (f.requester, P));
    // Counted from the bodies: `r.first..` would step past u64::MAX for an
    // empty answer there.
    let first = r.first;
    r.bodies
        .enumerate()
        .map(|(i, b)| (first + i as u64, b.to_vec()))
        .collect()
}

// C reference feature: "FETCH 0 → DIRECT-RECORD".
#[test]
fn fetch_zero_answers_direct_record() {
    let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
    st.append(b"CONTENT");
    assert!(
        st.on_fetch(&fetch(0, 1)).is_none(),
        "a requester whose subscriptions were not read yet FETCHes again"
    );
    assert_eq!(
        answer(&mut st, &fetch(0, 1)),
        vec![(0, b"CONTENT".to_vec())]
    );
    // In the form the requester takes: bodies once it subscribed `Y`.
    let form = |st: &ProducerState| st.on_fetch(&fetch(0, 1)).map(|r| r.form);
    assert_eq!(form(&st), Some(Form::Records));
    st.on_subscription(&sub(Kind::DirectMetaRecordBatch, C, true));
    assert_eq!(form(&st), Some(Form::Bodies));
    // Another partition or topic: not ours.
    let mut other = fetch(0, 1);
    other.topic = b"hello2";
    assert!(answer(&mut st, &other).is_empty());
    other = Fetch {
        partition: C,
        ..fetch(0, 1)
    };
    assert!(answer(&mut st, &other).is_empty());
}

#[test]
fn fetch_returns_exactly_the_range_after_partial_ack() {
    let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
    for i in 0..10u8 {
        st.append(&vec![i; usize::from(i) + 1]);
    }
    assert_eq!(
        st.on_ack(&ack(Some(b"S1"), 3), Acker::Address),
        1 + 2 + 3 + 4
    );
    assert_eq!(st.released_upto(), 4);
    let got = answer(&mut st, &fetch(5, 3));
    assert_eq!(
        got,
        (5..8u8)
            .map(|i| (u64::from(i), vec![i; usize::from(i) + 1]))
            .collect::<Vec<_>>()
    );
    // Released offsets are not served; the range is clipped to what exists.
    let got = answer(&mut st, &fetch(2, 100));
    assert_eq!(got.first().map(|g| g.0), Some(4));
    assert_eq!(got.last().map(|g| g.0), Some(9));
    assert!(answer(&mut st, &fetch(10, 5)).is_empty());
    assert!(answer(&mut st, &fetch(u64::MAX, u32::MAX)).is_empty());
}

#[test]
fn a_consumer_is_not_answered_from_past_what_stores_hold_for_it() {
    let lsub = |subscribe| sub(Kind::StoreHello, C, subscribe);
    let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
    for i in 0..10u8 {
        st.append(&[i]);
    }
    st.on_ack(&ack(Some(b"S1"), 3), Acker::Address);
    assert_eq!(st.released_upto(), 4);
    // A store (no `L` subscription) new to the partition starts at our base.
    assert_eq!(answer(&mut st, &fetch(0, 100))[0].0, 4);
    // A consumer below the base: stores hold 0..4; nothing from us, or the
    // consumer would skip them while the stores are away.
    st.on_subscription(&lsub(true));
    st.on_subscription(&lsub(true)); // a second connection of the same consumer
    assert!(answer(&mut st, &fetch(0, 100)).is_empty());
    assert!(answer(&mut st, &fetch(3, 2)).is_empty());
    // From the base on, the consumer is answered as before.
    assert_eq!(answer(&mut st, &fetch(4, 2)).len(), 2);
    st.on_subscription(&lsub(false));
    assert!(
        answer(&mut st, &fetch(0, 100)).is_empty(),
        "still connected once"
    );
    st.on_subscription(&lsub(false));
    assert_eq!(
        answer(&mut st, &fetch(0, 100)).len(),
        6,
        "gone: unknown again"
    );
    // Other prefixes say nothing about consumers.
    st.on_subscription(&sub(Kind::DirectRecord, C, true));
    st.on_subscription(&sub(Kind::StoreHello, b"", true));
    assert_eq!(answer(&mut st, &fetch(0, 100)).len(), 6);
}

/// `send` starts an unsent batch with room for 64 KiB; the node thread
/// takes it at once when idle. Held until stores ACK, each such batch
/// must cost what its records use, not 64 KiB each (a producer sending a
/// record a second with no store up would hold 64 KiB per record).
#[test]
fn batches_held_cost_what_their_records_use() {
    let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
    for i in 0..100u8 {
        let mut b = Batch::with_capacity(0, COALESCE);
        b.push(&[i; 100]);
        st.append_batch(b);
    }
    assert_eq!(st.held_bytes(), 100 * 100);
    assert!(
        st.held_allocated() <= 100 * (100 + 8),
        "{}",
        st.held_allocated()
    );
    assert_eq!(st.get(42), Some(&[42u8; 100][..]));
}

#[test]
fn min_acks_counts_distinct_stores() {
    let mut st = ProducerState::new(b"hello", P, 2, Duration::from_secs(1));
    for _ in 0..5 {
        st.append(&[0; 10]);
    }
    assert_eq!(st.on_ack(&ack(Some(b"S1"), 4), Acker::Address), 0);
    assert_eq!(
        st.on_ack(&ack(Some(b"S1"), 4), Acker::Address),
        0,
        "same store twice"
    );
    assert_eq!(
        st.on_ack(&ack(None, 1), Acker::Address),
        20,
        "anonymous store is a second one"
    );
    assert_eq!(st.released_upto(), 2);
    assert_eq!(
        st.on_ack(&ack(Some(b"S2"), 9), Acker::Address),
        30,
        "clamped to the last offset"
    );
    assert_eq!(st.held_bytes(), 0);
    let mut zero = ProducerState::new(b"hello", P, 0, Duration::from_secs(1));
    assert_eq!(zero.append(&[1, 2, 3]), (0, 3));
    assert_eq!(zero.released_upto(), 1);
}

/// Address-less ACKs (C-reference stores in zproto) count as one store
/// together; this project's stores are known by their `R` subscription
/// and counted apart. A `min_acks` above what can be counted is said.
#[test]
fn countable_stores_are_ours_plus_one_for_every_c_store() {
    let mut st = ProducerState::new(b"hello", P, 2, Duration::from_secs(1));
    // A store's subscription (every RECORD `M`, every RECORD-BATCH `R`)
    // came or went: whether it counted as one.
    let store = |st: &mut ProducerState, kind, key: &[u8], subscribe| {
        st.on_subscription(&sub(kind, key, subscribe))
            .stores_changed
    };
    use Kind::{Record as M, RecordBatch as R};
    assert_eq!(st.countable_stores(), 0);
    assert!(!store(&mut st, M, b"hello", true), "a consumer's");
    assert!(!store(&mut st, R, b"hello", true), "a consumer's");
    // Two C stores: every RECORD, no RECORD-BATCH.
    assert!(store(&mut st, M, b"", true));
    assert!(store(&mut st, M, b"", true));
    assert_eq!(st.countable_stores(), 1);
    st.append(&[0; 10]);
    assert_eq!(
        st.ack_reach(&ack(None, 0)),
        AckReach::Unreachable { first: true }
    );
    assert_eq!(
        st.ack_reach(&ack(None, 0)),
        AckReach::Unreachable { first: false },
        "warned once"
    );
    assert_eq!(st.ack_reach(&ack(Some(b"S1"), 0)), AckReach::Counted);
    // One of ours joins: two can be counted, min_acks=2 is in reach.
    store(&mut st, M, b"", true);
    store(&mut st, R, b"", true);
    assert_eq!(st.countable_stores(), 2);
    assert_eq!(st.ack_reach(&ack(None, 0)), AckReach::Counted);
    // Both C stores leave: only ours remains.
    store(&mut st, M, b"", false);
    store(&mut st, M, b"", false);
    assert_eq!(st.countable_stores(), 1);
    store(&mut st, R, b"", false);
    store(&mut st, M, b"", false);
    assert_eq!(st.countable_stores(), 0);
    store(&mut st, M, b"", false);
    assert_eq!(st.countable_stores(), 0, "never below zero");
    let mut one = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
    store(&mut one, M, b"", true);
    assert_eq!(one.ack_reach(&ack(None, 0)), AckReach::Counted);
}

#[test]
fn acks_from_made_up_addresses_are_bounded() {
    let mut st = ProducerState::new(b"hello", P, 2, Duration::from_secs(1));
    for _ in 0..10 {
        st.append(&[0; 10]);
    }
    let names: Vec<Vec<u8>> = (0..3 * MAX_ACKERS)
        .map(|i| format!("F{i}").into_bytes())
        .collect();
    let fake = |st: &mut ProducerState, n: &[u8], seq| {
        st.on_ack(
            &Ack {
                topic: P,
                address: Some(n),
                subject: b"hello",
                sequence: seq,
            },
            Acker::Address,
        )
    };
    // Fakes at offset 0 release 0 (min_acks of them agree), then fill the
    // table; past it, new ones are refused.
    for n in &names {
        fake(&mut st, n, 0);
    }
    assert_eq!(st.acks.len(), MAX_ACKERS);
    assert_eq!(st.released_upto(), 1);
    // Those at 0 can release nothing more: they go to make room for real
    // stores, whose ACKs still count.
    assert_eq!(st.on_ack(&ack(Some(b"S1"), 9), Acker::Address), 0);
    assert_eq!(st.on_ack(&ack(Some(b"S2"), 9), Acker::Address), 90);
    assert_eq!(st.held_bytes(), 0);
    assert!(st.acks.len() <= MAX_ACKERS);
}

/// Secure mode (issue 35): ACKs count per store key. One store-role
/// peer naming two addresses, or one address and none, is one store:
/// with `min_acks=2` it releases nothing alone; a second key does.
#[test]
fn min_acks_counts_keys_not_addresses_in_secure_mode() {
    let mut st = ProducerState::new(b"hello", P, 2, Duration::from_secs(1));
    st.set_keyed_stores(1);
    for _ in 0..10 {
        st.append(&[0; 10]);
    }
    let (mallory, honest) = ([0xAA; 32], [0xBB; 32]);
    for addr in [Some(&b"S1"[..]), Some(&b"S2"[..]), None, Some(&b"S3"[..])] {
        assert_eq!(st.on_ack(&ack(addr, 9), Acker::Key(&mallory)), 0);
    }
    assert_eq!(st.released_upto(), 0, "one key, however many addresses");
    assert_eq!(
        st.ack_reach(&ack(None, 9)),
        AckReach::Counted,
        "no C stores here"
    );
    assert_eq!(st.on_ack(&ack(Some(b"S1"), 4), Acker::Key(&honest)), 50);
    assert_eq!(st.released_upto(), 5, "the lower of the two keys' ACKs");
    st.set_keyed_stores(2);
    assert_eq!(st.countable_stores(), 2);
}

mod held {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Records sent one at a time and in batches, ACKed in any steps:
        /// every record not released reads back as sent, every released one
        /// is gone, and the bytes released and held add up, against a model
        /// that keeps one value per offset.
        #[test]
        fn held_batches_read_and_release_like_one_value_per_offset(
            ops in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::collection::vec(proptest::num::u8::ANY, 0..300)
                        .prop_map(|v| (0u8, vec![v], 0u64)),
                    proptest::collection::vec(
                        proptest::collection::vec(proptest::num::u8::ANY, 0..50), 0..40)
                        .prop_map(|vs| (1u8, vs, 0u64)),
                    (0u64..2000).prop_map(|upto| (2u8, Vec::new(), upto)),
                ],
                1..60,
            ),
        ) {
            let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
            let mut model: Vec<Vec<u8>> = Vec::new();
            let mut released = 0usize;
            for (kind, values, upto) in ops {
                match kind {
                    0 => {
                        let (off, freed) = st.append(&values[0]);
                        prop_assert_eq!((off, freed), (model.len() as u64, 0));
                        model.push(values[0].clone());
                    }
                    1 => {
                        let (off, freed) = st.append_batch(values.iter().collect());
                        prop_assert_eq!((off, freed), (model.len() as u64, 0));
                        model.extend(values);
                    }
                    _ => {
                        let freed = st.on_ack(&ack(Some(b"S1"), upto), Acker::Address);
                        let now = usize::try_from(
                            upto.saturating_add(1).min(model.len() as u64)
                        ).unwrap().max(released);
                        let want: usize = model[released..now].iter().map(Vec::len).sum();
                        prop_assert_eq!(freed, want);
                        released = now;
                    }
                }
                prop_assert_eq!(st.released_upto(), released as u64);
                let held: usize = model[released..].iter().map(Vec::len).sum();
                prop_assert_eq!(st.held_bytes(), held);
                for (off, v) in model.iter().enumerate() {
                    let got = st.get(off as u64);
                    if off < released {
                        prop_assert_eq!(got, None);
                    } else {
                        prop_assert_eq!(got, Some(v.as_slice()));
                    }
                }
                prop_assert_eq!(st.get(model.len() as u64), None);
                // A FETCH answer's bytes: those of the records held in range.
                let (len, mid) = (model.len(), (released + model.len()) / 2);
                for from in [0, released, mid, len] {
                    for to in [from, mid, len, len + 5] {
                        let held = from.max(released)..to.min(len);
                        let want: usize = model.get(held).map_or(0, |r| r.iter().map(Vec::len).sum());
                        prop_assert_eq!(st.body_bytes(from as u64..to as u64), want as u64);
                    }
                }
            }
        }
    }
}

// C reference feature: producer answers GET-HEADS with DIRECT-HEAD.
#[test]
fn get_heads_answered_after_first_record() {
    let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(1));
    let g = GetHeads {
        topic: b"hello",
        address: C,
    };
    assert!(st.on_get_heads(&g).is_empty());
    st.append(b"a");
    st.append(b"b");
    assert_eq!(
        st.on_get_heads(&g),
        vec![Out::DirectHead {
            to: C.to_vec(),
            partition: P.to_vec(),
            subject: b"hello".to_vec(),
            sequence: 1
        }]
    );
}

/// A consumer connecting (its `L<address>` subscription) once we have
/// published is told our head: what we published before its
/// subscriptions arrived never reached it.
#[test]
fn a_consumer_connecting_after_the_first_record_is_told_the_head() {
    let lsub = |subscribe| sub(Kind::StoreHello, C, subscribe);
    let mut st = ProducerState::new(b"hello", P, 1, Duration::from_secs(600));
    let told = |st: &mut ProducerState, s: Subscription<'_>| st.on_subscription(&s).send;
    assert_eq!(told(&mut st, lsub(true)), None, "nothing published");
    st.on_subscription(&lsub(false));
    st.append(b"a");
    st.append(b"b");
    let head = Some(Out::DirectHead {
        to: C.to_vec(),
        partition: P.to_vec(),
        subject: b"hello".to_vec(),
        sequence: 1,
    });
    assert_eq!(told(&mut st, lsub(true)), head);
    assert_eq!(told(&mut st, lsub(true)), head, "a second connection");
    assert_eq!(told(&mut st, lsub(false)), None);
    // Stores' subscriptions and the bare prefix are not consumers; a store
    // connecting is told our HEAD.
    let store_head = Some(Out::Head {
        topic: b"hello".to_vec(),
        partition: P.to_vec(),
        sequence: 1,
    });
    assert_eq!(told(&mut st, sub(Kind::Record, b"", true)), store_head);
    assert_eq!(told(&mut st, sub(Kind::DirectRecord, C, true)), None);
    assert_eq!(told(&mut st, sub(Kind::StoreHello, b"", true)), None);
}

// C reference feature: "HEAD at intervals".
#[test]
fn head_at_intervals_after_first_record() {
    let t0 = Instant::now();
    let s = Duration::from_secs(1);
    let mut st = ProducerState::new(b"hello", P, 1, s);
    st.arm_head(t0);
    assert_eq!(st.next_head(), None, "no HEAD before the first record");
    st.append(b"x");
    st.arm_head(t0);
    assert_eq!(st.on_timer(t0), None);
    let h = st.on_timer(t0 + s).expect("HEAD after one interval");
    assert_eq!(
        h,
        Out::Head {
            topic: b"hello".to_vec(),
            partition: P.to_vec(),
            sequence: 0
        }
    );
    st.append(b"y");
    assert_eq!(st.on_timer(t0 + s + s / 2), None);
    assert!(matches!(
        st.on_timer(t0 + 2 * s),
        Some(Out::Head { sequence: 1, .. })
    ));
}
