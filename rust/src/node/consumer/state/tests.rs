//! Unit tests of [`ConsumerState`], without sockets.

use super::*;
use crate::node::config::IDLE_AFTER;
use crate::wire::StoreHello;

const P: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";
const ME: &[u8] = b"9E51FBAE55A649C1A50C0B360F3FF7AE";
const S: &[u8] = b"5D5B5C63E2C54B6A8C2BDA2B5D1F0A11";

fn state(reset: OffsetReset, topics: &[&[u8]]) -> ConsumerState {
    let cfg = ConsumerConfig {
        offset_reset: reset,
        ..Default::default()
    };
    ConsumerState::new(ME, topics, &cfg)
}

fn rec(seq: u64, content: &'static [u8]) -> Record<'static> {
    Record {
        topic: b"hello",
        address: P,
        subject: b"hello",
        sequence: seq,
        content,
    }
}

/// A HEAD of partition `P` at `sequence`, published on the topic.
fn head(sequence: u64) -> Head<'static> {
    Head {
        topic: b"hello",
        address: P,
        subject: b"hello",
        sequence,
    }
}

fn offsets(d: &[Delivery]) -> Vec<u64> {
    d.iter().map(|d| d.offset).collect()
}

/// Values of 20 MiB: three fill the bound on held records.
static BIG: [u8; 20 << 20] = [0; 20 << 20];

fn at(seq: u64) -> Record<'static> {
    Record {
        content: &BIG,
        ..rec(seq, b"")
    }
}

/// A consumer that delivered offset 0 and received `seqs` (of `BIG`
/// values) past the gap after it.
fn past_a_gap(
    seqs: impl IntoIterator<Item = u64>,
) -> (ConsumerState, Instant, Vec<Delivery>, Vec<Out>) {
    let mut st = state(OffsetReset::Latest, &[b"hello"]);
    let t0 = Instant::now();
    let (mut d, mut o) = (Vec::new(), Vec::new());
    st.on_record(&rec(0, b"a"), false, t0, &mut d, &mut o);
    for seq in seqs {
        st.on_record(&at(seq), false, t0, &mut d, &mut o);
    }
    (st, t0, d, o)
}

/// Out-of-order records held past a gap are bounded in bytes too: one more
/// is fetched again later instead (a producer of large records would
/// otherwise fill a consumer's memory while it fetches the gap).
#[test]
fn held_records_are_bounded_in_bytes_and_fetched_again() {
    let (mut st, t0, mut d, mut o) = past_a_gap(2..=5);
    let p = &st.parts[P];
    assert_eq!(p.held.offsets().collect::<Vec<_>>(), vec![2, 3, 4]);
    assert_eq!(p.held.bytes(), 3 * BIG.len());
    // The gap filled: the held ones go out, and 5 is fetched again.
    d.clear();
    o.clear();
    st.on_record(&rec(1, b"b"), false, t0, &mut d, &mut o);
    assert_eq!(offsets(&d), vec![1, 2, 3, 4]);
    assert_eq!(st.parts[P].held.bytes(), 0);
    st.on_record(&at(5), false, t0, &mut d, &mut o);
    assert_eq!(offsets(&d), vec![1, 2, 3, 4, 5]);
    // One record is always held, however large.
    let huge = vec![1u8; MAX_HELD_BYTES + 1];
    st.on_record(
        &Record {
            content: &huge,
            ..rec(9, b"")
        },
        false,
        t0,
        &mut d,
        &mut o,
    );
    assert_eq!(st.parts[P].held.len(), 1);
    st.seek(P, 20, t0, &mut o);
    assert_eq!(st.parts[P].held.bytes(), 0, "a seek drops what is held");
}

/// Past the bound, a record nearer the gap displaces the farthest held
/// one: a store's answer to the FETCH is kept, so that a skip to the first
/// held record (the start of the gap deleted everywhere) never jumps over
/// records a store still holds.
#[test]
fn a_record_nearer_the_gap_displaces_the_farthest_held_one() {
    let (mut st, t0, mut d, mut o) = past_a_gap(10..=12);
    // The FETCH's answers (DIRECT-RECORDs).
    for seq in [5, 6] {
        let direct = Record {
            topic: ME,
            ..at(seq)
        };
        st.on_record(&direct, true, t0, &mut d, &mut o);
    }
    let p = &st.parts[P];
    assert_eq!(p.held.offsets().collect::<Vec<_>>(), vec![5, 6, 10]);
    assert_eq!(p.held.bytes(), 3 * BIG.len());
    // A farther one than all held is the one let go.
    st.on_record(&at(13), false, t0, &mut d, &mut o);
    assert_eq!(st.parts[P].held.len(), 3);
    assert!(!st.parts[P].held.contains(13));
}

/// A partition caught up and unheard of for `IDLE_AFTER` keeps only its
/// position and seek epoch; heard of again, it goes on from there (not
/// from `offset_reset`). One with a gap in flight is kept whole.
#[test]
fn an_idle_partition_keeps_only_its_position_and_goes_on_from_it() {
    let mut st = state(OffsetReset::Latest, &[b"hello"]);
    let t0 = Instant::now();
    let (mut d, mut o) = (Vec::new(), Vec::new());
    st.on_record(&rec(3, b"a"), false, t0, &mut d, &mut o);
    st.on_record(&rec(4, b"b"), false, t0, &mut d, &mut o);
    assert_eq!(offsets(&d), vec![3, 4]);
    assert_eq!(st.seek(P, 5, t0, &mut o), 1);
    assert_eq!(st.next_sweep(), Some(t0 + IDLE_AFTER));
    // Heard of within the time: kept.
    let t1 = t0 + IDLE_AFTER / 2;
    st.on_head(&head(4), false, t1, &mut o);
    assert_eq!(st.sweep_idle(t0 + IDLE_AFTER), 0);
    assert_eq!(st.parts.len(), 1);
    // A second partition with a gap in flight is never idle.
    let other = |seq| Record {
        address: S,
        ..rec(seq, b"x")
    };
    st.on_record(&other(0), false, t0, &mut d, &mut o);
    o.clear();
    st.on_record(&other(5), false, t0, &mut d, &mut o);
    assert!(matches!(o[..], [Out::Fetch { sequence: 1, .. }]));
    let late = t1 + IDLE_AFTER;
    assert_eq!(st.sweep_idle(late), 1);
    assert!(!st.parts.contains_key(P) && st.parts.contains_key(S));
    assert_eq!(st.starts.get(P).map(|s| (s.next, s.epoch)), Some((5, 1)));
    // Back: from offset 5 with its epoch, a duplicate dropped, a gap fetched.
    d.clear();
    o.clear();
    st.on_record(&rec(4, b"b"), false, late, &mut d, &mut o);
    st.on_record(&rec(5, b"c"), false, late, &mut d, &mut o);
    st.on_record(&rec(7, b"e"), false, late, &mut d, &mut o);
    assert_eq!(offsets(&d), vec![5]);
    assert_eq!(d[0].epoch, 1);
    assert!(matches!(
        o[..],
        [Out::Fetch {
            sequence: 6,
            count: 1,
            ..
        }]
    ));
    assert!(st.starts.is_empty());
    // Nothing known: no sweep due; one idle position: sweeps go on, to
    // forget it in time; none when positions are kept for good.
    let mut empty = state(OffsetReset::Latest, &[b"hello"]);
    assert_eq!(empty.next_sweep(), None);
    empty.on_record(&rec(0, b"a"), false, t0, &mut d, &mut o);
    assert_eq!(empty.sweep_idle(t0 + IDLE_AFTER), 1);
    assert_eq!(empty.next_sweep(), Some(t0 + IDLE_AFTER + IDLE_AFTER / 2));
    empty.forget_after = None;
    empty.sweep_idle(t0 + IDLE_AFTER);
    assert_eq!(empty.next_sweep(), None);
}

#[test]
fn positions_not_heard_of_for_forget_after_are_forgotten_unless_seeked() {
    const FORGET: Duration = Duration::from_secs(3600);
    let t0 = Instant::now();
    let cfg = ConsumerConfig {
        offset_reset: OffsetReset::Latest,
        start_offsets: vec![("GIVEN".into(), 9)],
        forget_after: Some(FORGET),
        ..Default::default()
    };
    let mut st = ConsumerState::new(ME, &[b"hello"], &cfg);
    // Given start offsets alone make sweeps due (to forget them).
    assert!(st.next_sweep().is_some());
    let (mut d, mut o) = (Vec::new(), Vec::new());
    st.on_record(&rec(0, b"a"), false, t0, &mut d, &mut o);
    let seeked = b"SEEKED";
    st.seek(seeked, 4, t0, &mut o);
    assert_eq!(st.sweep_idle(t0 + IDLE_AFTER), 1);
    assert!(st.forget_idle(t0 + IDLE_AFTER).is_empty());
    // P was last heard of at t0, GIVEN never (since the start).
    let mut gone = st.forget_idle(t0 + FORGET + Duration::from_secs(1));
    gone.sort();
    let mut want = vec![b"GIVEN".to_vec(), P.to_vec()];
    want.sort();
    assert_eq!(gone, want);
    assert_eq!(st.forgotten, 2);
    assert_eq!(
        st.starts.keys().cloned().collect::<Vec<_>>(),
        vec![seeked.to_vec()]
    );
    // Heard of again, P starts as a new partition: as the consumer was given
    // start offsets, from its first record (`latest` is not for resumes).
    d.clear();
    o.clear();
    st.on_record(&rec(10, b"k"), false, t0, &mut d, &mut o);
    assert!(d.is_empty());
    assert!(matches!(o[..], [Out::Fetch { sequence: 0, .. }]), "{o:?}");
    // Kept for good without forget_after.
    let mut keep = state(OffsetReset::Latest, &[b"hello"]);
    keep.forget_after = None;
    keep.on_record(&rec(3, b"a"), false, t0, &mut d, &mut o);
    keep.sweep_idle(t0 + IDLE_AFTER);
    assert!(keep.forget_idle(t0 + 100 * FORGET).is_empty());
    assert_eq!(keep.starts.len(), 1);
}

// C reference feature: STORE-HELLO → CONSUMER-HELLO, with 0 and 1 topics.
#[test]
fn store_hello_answered_with_consumer_hello() {
    for topics in [&[][..], &[&b"hello"[..]][..]] {
        let mut st = state(OffsetReset::Latest, topics);
        let out = st.on_store_hello(
            &StoreHello {
                topic: ME,
                address: S,
            },
            Instant::now(),
        );
        assert_eq!(
            out,
            vec![Out::ConsumerHello {
                to: S.to_vec(),
                subjects: topics.iter().map(|t| t.to_vec()).collect()
            }]
        );
        assert!(st
            .on_store_hello(
                &StoreHello {
                    topic: P,
                    address: S
                },
                Instant::now()
            )
            .is_empty());
    }
}

// C reference feature: GET-HEADS on subscribe.
#[test]
fn get_heads_on_subscribe() {
    let st = state(OffsetReset::Latest, &[b"hello", b"world"]);
    assert_eq!(
        st.get_heads(),
        vec![
            Out::GetHeads {
                topic: b"hello".to_vec()
            },
            Out::GetHeads {
                topic: b"world".to_vec()
            }
        ]
    );
    assert_eq!(st.get_heads_for(b"world").len(), 1);
    assert!(st.get_heads_for(b"worl").is_empty());
}

// C reference feature: earliest, RECORD 1 → FETCH 0.
#[test]
fn earliest_record_one_fetches_zero() {
    let mut st = state(OffsetReset::Earliest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    st.on_record(&rec(1, b"B"), false, t0, &mut d, &mut o);
    assert!(d.is_empty());
    assert_eq!(
        o,
        vec![Out::Fetch {
            partition: P.to_vec(),
            topic: b"hello".to_vec(),
            sequence: 0,
            count: 1
        }]
    );
    // The answer fills the gap; both come out in order.
    o.clear();
    let mut dr = rec(0, b"A");
    dr.topic = ME;
    st.on_record(&dr, true, t0, &mut d, &mut o);
    assert_eq!(offsets(&d), vec![0, 1]);
    assert_eq!(d[0].body, b"A");
    assert!(o.is_empty());
    // Replays are duplicates.
    st.on_record(&rec(1, b"B"), false, t0, &mut d, &mut o);
    assert_eq!(d.len(), 2);
    assert_eq!(st.duplicates, 1);
}

// C reference feature: latest, RECORD 2 delivered.
#[test]
fn latest_record_two_delivered() {
    let mut st = state(OffsetReset::Latest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    st.on_record(&rec(2, b"C"), false, Instant::now(), &mut d, &mut o);
    assert_eq!(offsets(&d), vec![2]);
    assert_eq!(&*d[0].topic, "hello");
    assert_eq!(d[0].partition.as_bytes(), P);
    assert!(o.is_empty());
}

#[test]
fn exact_topic_check_after_prefix_match() {
    let mut st = state(OffsetReset::Latest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let mut r = rec(0, b"x");
    r.topic = b"hello2";
    r.subject = b"hello2";
    st.on_record(&r, false, Instant::now(), &mut d, &mut o);
    assert!(d.is_empty() && o.is_empty());
}

#[test]
fn long_catch_up_pipelines_fetch_windows() {
    let mut st = state(OffsetReset::Earliest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    let h = head(24_999);
    st.on_head(&h, false, t0, &mut o);
    let fetches = |o: &[Out]| -> Vec<(u64, u32)> {
        o.iter()
            .filter_map(|m| match m {
                Out::Fetch {
                    sequence, count, ..
                } => Some((*sequence, *count)),
                _ => None,
            })
            .collect()
    };
    assert_eq!(fetches(&o), vec![(0, 10_000)]);
    o.clear();
    let mut answers = Vec::new();
    for seq in 0..25_000u64 {
        let mut dr = rec(seq, b"v");
        dr.topic = ME;
        st.on_record(&dr, true, t0, &mut d, &mut o);
        answers.extend(fetches(&o).into_iter().map(|f| (seq, f)));
        o.clear();
    }
    // The next window is asked for once half of the one in flight
    // arrived, never more than one extra window, and the tail is exact.
    assert_eq!(
        answers,
        vec![(4_999, (10_000, 10_000)), (14_999, (20_000, 5_000))]
    );
    assert_eq!(d.len(), 25_000);
    assert_eq!(st.fetches, 3);
}

/// A DIRECT-HEAD of `P` for us, as a store answers CONSUMER-HELLO.
fn direct_head(sequence: u64) -> Head<'static> {
    Head {
        topic: ME,
        address: P,
        subject: b"hello",
        sequence,
    }
}

/// A DIRECT-RECORD of `P`, as a store answers a FETCH.
fn direct(seq: u64, content: &'static [u8]) -> Record<'static> {
    Record {
        topic: ME,
        ..rec(seq, content)
    }
}

/// Runs the FETCH retry timer `n` times.
fn retries(st: &mut ConsumerState, n: u32, d: &mut Vec<Delivery>) -> Vec<Out> {
    let mut o = Vec::new();
    for _ in 0..n {
        let due = st.next_deadline().expect("a FETCH in flight");
        st.on_timer(due, d, &mut o);
    }
    o
}

/// Stores answer every retry from past the gap: after `give_up_fetches`
/// rounds in a row, the gap is given up.
#[test]
fn a_gap_that_stores_answered_from_past_is_skipped_after_give_up_fetches() {
    let mut st = state(OffsetReset::Earliest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    st.on_head(&direct_head(9), true, t0, &mut o);
    assert!(matches!(
        o[..],
        [Out::Fetch {
            sequence: 0,
            count: 10,
            ..
        }]
    ));
    // The store's retention deleted 0..7: it answers from 7 on, and
    // answers each retry (FETCH 0..7) from 7 again.
    for seq in 7..10 {
        st.on_record(&direct(seq, b"v"), true, t0, &mut d, &mut o);
    }
    assert!(d.is_empty());
    let give_up = ConsumerConfig::default().give_up_fetches;
    let mut o = Vec::new();
    for _ in 0..give_up - 1 {
        o.extend(retries(&mut st, 1, &mut d));
        st.on_record(&direct(7, b"v"), true, t0, &mut d, &mut Vec::new());
    }
    assert!(d.is_empty(), "not before give_up_fetches retries");
    assert_eq!(
        o.len() as u32,
        give_up - 1,
        "each retry FETCHes 0..7 again: {o:?}"
    );
    assert_eq!(st.lost, 0);
    retries(&mut st, 1, &mut d);
    assert_eq!(offsets(&d), vec![7, 8, 9]);
    assert_eq!(st.lost, 7);
    assert_eq!(st.next_deadline(), None, "nothing left to fetch");
}

#[test]
fn a_seek_forgets_that_a_gap_was_answered_from_past_it() {
    let mut st = state(OffsetReset::Earliest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    st.on_head(&direct_head(9), true, t0, &mut o);
    for seq in 7..10 {
        st.on_record(&direct(seq, b"v"), true, t0, &mut d, &mut o);
    }
    assert_eq!(st.seek(P, 0, t0, &mut o), 1);
    // From the new position only a live record beyond the gap: no evidence.
    st.on_record(&rec(8, b"v"), false, t0, &mut d, &mut o);
    let give_up = ConsumerConfig::default().give_up_fetches;
    retries(&mut st, 2 * give_up, &mut d);
    assert!(d.is_empty(), "{:?}", offsets(&d));
    assert_eq!(st.lost, 0);
}

#[test]
fn a_gap_is_not_skipped_without_an_answer_from_past_it_or_while_it_fills() {
    let mut st = state(OffsetReset::Latest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    // Live records only: nobody said the gap is gone (stores may be down).
    st.on_record(&rec(10, b"a"), false, t0, &mut d, &mut o);
    st.on_record(&rec(13, b"d"), false, t0, &mut d, &mut o);
    retries(&mut st, 20, &mut d);
    assert_eq!(offsets(&d), vec![10]);
    assert_eq!(st.lost, 0);
    // Progress resets the count: a slow answer filling the gap one record
    // per retry is never skipped, even with an answer from past it.
    st.on_record(&direct(15, b"f"), true, t0, &mut d, &mut o);
    let give_up = ConsumerConfig::default().give_up_fetches;
    for missing in [11, 12, 14] {
        retries(&mut st, give_up - 1, &mut d);
        st.on_record(&direct(missing, b"x"), true, t0, &mut d, &mut o);
    }
    assert_eq!(offsets(&d), (10..=15).collect::<Vec<_>>());
    assert_eq!(st.lost, 0);
}

#[test]
fn a_stalled_partition_backs_off_until_a_store_says_hello() {
    let mut st = state(OffsetReset::Earliest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    st.on_head(&direct_head(9), true, t0, &mut o);
    let cfg = ConsumerConfig::default();
    // A minute with nobody answering: after give_up_fetches tries at
    // fetch_retry, the interval doubles up to 16 x fetch_retry.
    let mut fetch_times = vec![t0];
    while let Some(due) = st
        .next_deadline()
        .filter(|&t| t < t0 + Duration::from_secs(60))
    {
        o.clear();
        st.on_timer(due, &mut d, &mut o);
        assert_eq!(o.len(), 1, "one FETCH per retry: {o:?}");
        fetch_times.push(due);
    }
    let gaps: Vec<Duration> = fetch_times.windows(2).map(|w| w[1] - w[0]).collect();
    let r = cfg.fetch_retry;
    let give_up = cfg.give_up_fetches as usize;
    assert!(gaps[..give_up].iter().all(|&g| g == r), "{gaps:?}");
    assert_eq!(
        gaps[give_up..give_up + 5],
        [2 * r, 4 * r, 8 * r, 16 * r, 16 * r]
    );
    assert!(
        fetch_times.len() < 20,
        "{} FETCHes in a minute",
        fetch_times.len()
    );
    assert_eq!(st.stalled, 1);
    assert!(d.is_empty());
    // A store (re)appears: FETCH at once, and back off from the start.
    let now = *fetch_times.last().unwrap() + Duration::from_secs(1);
    st.on_store_hello(
        &StoreHello {
            topic: ME,
            address: S,
        },
        now,
    );
    assert_eq!(st.next_deadline(), Some(now));
    o.clear();
    st.on_timer(now, &mut d, &mut o);
    assert!(matches!(o[..], [Out::Fetch { sequence: 0, .. }]), "{o:?}");
    assert_eq!(st.next_deadline(), Some(now + 2 * r));
    // Its answer ends the stall and the backoff.
    for seq in 0..10 {
        st.on_record(&direct(seq, b"v"), true, now, &mut d, &mut o);
    }
    assert_eq!(offsets(&d), (0..10).collect::<Vec<_>>());
    st.count_stalled();
    assert_eq!((st.stalled, st.next_deadline()), (0, None));
}

#[test]
fn gap_fetch_retry_and_head() {
    let mut st = state(OffsetReset::Latest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    st.on_record(&rec(10, b"a"), false, t0, &mut d, &mut o);
    st.on_record(&rec(13, b"d"), false, t0, &mut d, &mut o);
    assert_eq!(offsets(&d), vec![10]);
    assert_eq!(
        o,
        vec![Out::Fetch {
            partition: P.to_vec(),
            topic: b"hello".to_vec(),
            sequence: 11,
            count: 2
        }]
    );
    // In flight: a further record does not FETCH again.
    o.clear();
    st.on_record(&rec(14, b"e"), false, t0, &mut d, &mut o);
    assert!(o.is_empty());
    // No answer: retried after fetch_retry.
    let later = t0 + Duration::from_millis(500);
    assert_eq!(st.next_deadline(), Some(later));
    st.on_timer(later, &mut d, &mut o);
    assert!(matches!(
        o[..],
        [Out::Fetch {
            sequence: 11,
            count: 2,
            ..
        }]
    ));
    // Gap filled out of order; HEAD beyond → a new FETCH for 15..=20.
    o.clear();
    st.on_record(&rec(12, b"c"), false, later, &mut d, &mut o);
    st.on_record(&rec(11, b"b"), false, later, &mut d, &mut o);
    assert_eq!(offsets(&d), vec![10, 11, 12, 13, 14]);
    let h = head(20);
    st.on_head(&h, false, later, &mut o);
    assert!(matches!(
        o[..],
        [Out::Fetch {
            sequence: 15,
            count: 6,
            ..
        }]
    ));
}

#[test]
fn earliest_head_fetches_history_and_seek_restarts() {
    let mut st = state(OffsetReset::Earliest, &[b"hello"]);
    let mut o = Vec::new();
    let t0 = Instant::now();
    st.on_head(&direct_head(4), true, t0, &mut o);
    assert!(matches!(
        o[..],
        [Out::Fetch {
            sequence: 0,
            count: 5,
            ..
        }]
    ));
    let mut d = Vec::new();
    for i in 0..5 {
        st.on_record(&rec(i, b"v"), false, t0, &mut d, &mut o);
    }
    assert_eq!(offsets(&d), vec![0, 1, 2, 3, 4]);
    o.clear();
    let partition = std::str::from_utf8(P).unwrap();
    assert_eq!(st.seek(P, 2, t0, &mut o), 1);
    assert!(matches!(
        o[..],
        [Out::Fetch {
            sequence: 2,
            count: 3,
            ..
        }]
    ));
    assert_eq!(st.positions(), vec![(Arc::from(partition), 2)]);
    // A partition not seen yet starts where the last seek said, in step
    // with the handle's count of seeks.
    assert_eq!(st.seek(b"unknown", 0, t0, &mut o), 1);
    assert_eq!(st.seek(b"unknown", 7, t0, &mut o), 2);
    st.on_head(
        &Head {
            topic: b"hello",
            address: b"unknown",
            subject: b"hello",
            sequence: 9,
        },
        false,
        t0,
        &mut o,
    );
    assert!(st.positions().contains(&(Arc::from("unknown"), 7)));
    let mut d = Vec::new();
    st.on_record(
        &Record {
            topic: b"hello",
            address: b"unknown",
            subject: b"hello",
            sequence: 7,
            content: b"v",
        },
        false,
        t0,
        &mut d,
        &mut o,
    );
    assert_eq!((d[0].offset, d[0].epoch), (7, 2));
}

#[test]
fn latest_head_starts_after_it() {
    let mut st = state(OffsetReset::Latest, &[b"hello"]);
    let mut o = Vec::new();
    let h = head(7);
    st.on_head(&h, false, Instant::now(), &mut o);
    assert!(o.is_empty());
    let mut d = Vec::new();
    st.on_record(&rec(8, b"x"), false, Instant::now(), &mut d, &mut o);
    assert_eq!(offsets(&d), vec![8]);
}

/// A backward seek while a FETCH is in flight: the late answers to the
/// FETCH from before the seek (DIRECT-RECORDs past the new position) are
/// evidence for one round only. They used to count as a store having
/// answered the new FETCH from past the gap for good, so when no node
/// answered the new one (stores restarting, a producer with `min_acks >=
/// 1`) the consumer skipped the history after `give_up_fetches` retries
/// (records_lost) instead of waiting for it.
#[test]
fn late_answers_to_a_fetch_from_before_a_seek_are_no_evidence_of_a_deleted_gap() {
    let mut st = state(OffsetReset::Latest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    st.on_record(&rec(10, b"a"), false, t0, &mut d, &mut o);
    st.on_record(&rec(13, b"d"), false, t0, &mut d, &mut o);
    assert!(matches!(o[..], [Out::Fetch { sequence: 11, .. }]));
    d.clear();
    assert_eq!(st.seek(P, 0, t0, &mut o), 1);
    // The producer's answers to FETCH 11..13, sent before it saw the seek.
    st.on_record(&direct(11, b"b"), true, t0, &mut d, &mut o);
    st.on_record(&direct(12, b"c"), true, t0, &mut d, &mut o);
    // Nobody answers FETCH 0.. (the stores holding it are restarting).
    let give_up = ConsumerConfig::default().give_up_fetches;
    retries(&mut st, 2 * give_up, &mut d);
    assert!(d.is_empty(), "skipped to {:?}", offsets(&d));
    assert_eq!(st.lost, 0);
}

/// Stores that answer a gap from past it keep doing so at each retry, and
/// once `next` moved after their first answer, their answers are records
/// already held. Those count as answers from past the gap too: they used
/// to be dropped as duplicates first, so the partition never gave the gap
/// up and stalled (FETCHing with backoff) forever.
#[test]
fn a_gap_answered_from_past_it_at_every_retry_is_given_up_after_progress() {
    let mut st = state(OffsetReset::Earliest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    st.on_head(&direct_head(9), true, t0, &mut o);
    // One store's retention deleted 0..5: it answers from 5.
    for seq in 5..10 {
        st.on_record(&direct(seq, b"v"), true, t0, &mut d, &mut o);
    }
    // Another node still had offset 0 (and nothing of 1..5).
    st.on_record(&direct(0, b"z"), true, t0, &mut d, &mut o);
    assert_eq!(offsets(&d), vec![0]);
    // Every retry (FETCH 1..5) is answered from 5 again.
    let give_up = ConsumerConfig::default().give_up_fetches;
    for _ in 0..2 * give_up {
        if st.next_deadline().is_none() {
            break;
        }
        retries(&mut st, 1, &mut d);
        for seq in 5..10 {
            st.on_record(&direct(seq, b"v"), true, t0, &mut d, &mut o);
        }
    }
    assert_eq!(offsets(&d), vec![0, 5, 6, 7, 8, 9]);
    assert_eq!(st.lost, 4);
}

/// A seek of a partition gone idle (its producer finished: no HEADs come
/// any more) brings it back and FETCHes from the offset. It used to only
/// move the kept position: nothing was FETCHed, so the records the stores
/// hold never came.
#[test]
fn a_seek_of_an_idle_partition_fetches_from_there() {
    let mut st = state(OffsetReset::Latest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    for seq in 0..5 {
        st.on_record(&rec(seq, b"v"), false, t0, &mut d, &mut o);
    }
    assert_eq!(st.sweep_idle(t0 + IDLE_AFTER), 1);
    o.clear();
    st.seek(P, 0, t0 + IDLE_AFTER, &mut o);
    assert!(
        o.iter()
            .any(|m| matches!(m, Out::Fetch { sequence: 0, .. } | Out::GetHeads { .. })),
        "nothing asked for: {o:?}"
    );
}

/// A store's DIRECT-HEAD overtakes the records the producer is sending us
/// live (the store keeps up, we are behind): no FETCH while they keep
/// coming, none once they filled the gap (issue 37: a consumer fetched what
/// was on its way, and a test that counted FETCHes of a live stream failed
/// on a busy machine).
#[test]
fn a_store_s_head_ahead_of_live_records_fetches_nothing_while_they_come() {
    let mut st = state(OffsetReset::Latest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    st.on_record(&rec(0, b"a"), false, t0, &mut d, &mut o);
    st.on_head(&direct_head(9), true, t0, &mut o);
    assert!(o.is_empty(), "no FETCH: the records are coming live");
    // Live records keep coming, in order: still none.
    let step = Duration::from_millis(300);
    for (i, seq) in (1..=4).enumerate() {
        st.on_record(&rec(seq, b"x"), false, t0 + step * i as u32, &mut d, &mut o);
    }
    let due = st.next_deadline().expect("the wait's timer");
    st.on_timer(due, &mut d, &mut o);
    assert!(o.is_empty(), "they came since: wait again");
    for seq in 5..=9 {
        st.on_record(&rec(seq, b"x"), false, due, &mut d, &mut o);
    }
    assert_eq!(offsets(&d), (0..=9).collect::<Vec<_>>());
    assert!(o.is_empty());
    assert_eq!(st.next_deadline(), None, "caught up: no timer left");
    assert_eq!(st.fetches, 0);
}

/// The live stream stops short of the head: the rest is fetched after a
/// `fetch_retry`; a record past a gap fetches at once.
#[test]
fn a_store_s_head_ahead_of_a_stream_that_stops_is_fetched() {
    let mut st = state(OffsetReset::Latest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    st.on_record(&rec(0, b"a"), false, t0, &mut d, &mut o);
    st.on_head(&direct_head(9), true, t0, &mut o);
    st.on_record(&rec(1, b"b"), false, t0, &mut d, &mut o);
    assert!(o.is_empty());
    let due = st.next_deadline().expect("the wait's timer");
    assert_eq!(due, t0 + Duration::from_millis(500));
    st.on_timer(due, &mut d, &mut o);
    assert!(
        matches!(
            o[..],
            [Out::Fetch {
                sequence: 2,
                count: 8,
                ..
            }]
        ),
        "{o:?}"
    );
    // Another partition state: a record past a gap ends the wait at once.
    let mut st = state(OffsetReset::Latest, &[b"hello"]);
    let mut o = Vec::new();
    st.on_record(&rec(0, b"a"), false, t0, &mut d, &mut o);
    st.on_head(&direct_head(9), true, t0, &mut o);
    st.on_record(&rec(5, b"f"), false, t0, &mut d, &mut o);
    assert!(
        matches!(
            o[..],
            [Out::Fetch {
                sequence: 1,
                count: 4,
                ..
            }]
        ),
        "{o:?}"
    );
    // A HEAD from the producer travels after its records: a gap it shows is
    // fetched at once, as is a DIRECT-HEAD of a partition not heard live.
    let mut st = state(OffsetReset::Latest, &[b"hello"]);
    let mut o = Vec::new();
    st.on_record(&rec(0, b"a"), false, t0, &mut d, &mut o);
    let h = Head {
        topic: b"hello",
        address: P,
        subject: b"hello",
        sequence: 3,
    };
    st.on_head(&h, false, t0, &mut o);
    assert!(matches!(o[..], [Out::Fetch { sequence: 1, .. }]), "{o:?}");
    let mut st = state(OffsetReset::Earliest, &[b"hello"]);
    let mut o = Vec::new();
    st.on_head(&direct_head(3), true, t0, &mut o);
    assert!(matches!(o[..], [Out::Fetch { sequence: 0, .. }]), "{o:?}");
}

/// A FETCH that went out before its producer's connection to us was up is
/// asked again when that producer subscribes (`F` + partition), not after a
/// retry interval grown to seconds (a secure test's consumer waited past its
/// deadline).
#[test]
fn a_fetch_goes_again_when_its_producer_subscribes() {
    let mut st = state(OffsetReset::Earliest, &[b"hello"]);
    let (mut d, mut o) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    st.on_head(&direct_head(9), true, t0, &mut o);
    assert!(matches!(o[..], [Out::Fetch { sequence: 0, .. }]));
    // Unanswered until the back-off grew.
    retries(&mut st, 8, &mut d);
    let late = st.next_deadline().unwrap();
    assert!(late > t0 + Duration::from_secs(5), "backed off: {late:?}");
    let now = t0 + Duration::from_secs(5);
    st.on_fetcher(b"another partition", now);
    assert_eq!(st.next_deadline(), Some(late), "not ours");
    st.on_fetcher(P, now);
    assert_eq!(st.next_deadline(), Some(now));
    o.clear();
    st.on_timer(now, &mut d, &mut o);
    assert!(matches!(o[..], [Out::Fetch { sequence: 0, .. }]), "{o:?}");
    assert!(
        st.next_deadline().unwrap() <= now + Duration::from_millis(500),
        "back to fetch_retry"
    );
}

/// Resuming (given start offsets, as saved `positions()`) skips no partition:
/// one they do not name was born while the consumer was away, and starts at
/// its first record whatever `offset_reset` says. A fresh consumer with
/// `latest` starts where it first hears of the partition.
#[test]
fn a_resumed_consumer_starts_partitions_it_was_not_given_at_their_first_record() {
    let t0 = Instant::now();
    let head = head(999);
    let resumed = ConsumerConfig {
        offset_reset: OffsetReset::Latest,
        start_offsets: vec![(String::from_utf8(S.to_vec()).unwrap(), 5)],
        ..Default::default()
    };
    let mut st = ConsumerState::new(ME, &[b"hello"], &resumed);
    let mut o = Vec::new();
    st.on_head(&head, false, t0, &mut o);
    assert!(
        matches!(
            o[..],
            [Out::Fetch {
                sequence: 0,
                count: 1000,
                ..
            }]
        ),
        "{o:?}"
    );
    let mut fresh = state(OffsetReset::Latest, &[b"hello"]);
    o.clear();
    fresh.on_head(&head, false, t0, &mut o);
    assert!(o.is_empty(), "{o:?}");
}
