//! Store logic scenarios against an in-memory log with an explicit durable mark.

use super::*;
use crate::node::out::Out;
use crate::wire::{ConsumerHello, Fetch, GetHeads, Head, Kind, Message, Prefix, Subscription};
use std::collections::BTreeMap;

pub(crate) const ME: &[u8] = b"STORE000000000000000000000000001";
pub(crate) const P: &[u8] = b"PRODUCER00000000000000000000000A";
const C: &[u8] = b"CONSUMER00000000000000000000000C";
pub(crate) const T: &[u8] = b"weather";

#[derive(Default)]
struct MemLog {
    parts: BTreeMap<PartKey, (u64, Vec<Vec<u8>>, u64)>, // first, records, durable_next
    fail: bool,
    /// `sync_if_due` fails.
    fail_sync: bool,
    /// Appends at this offset or past it fail.
    fail_from: Option<u64>,
    /// Partitions set aside as damaged.
    aside: Vec<PartKey>,
    /// What `sync` made durable, until the store takes it.
    synced: Vec<(PartKey, u64)>,
    /// Calls of `durable_next`: what a turn looks at.
    durable_asked: std::cell::Cell<u64>,
}

impl MemLog {
    /// A group commit: everything appended is durable, and reported so.
    fn sync(&mut self) {
        for (key, (first, recs, durable)) in self.parts.iter_mut() {
            let next = *first + recs.len() as u64;
            if *durable != next {
                *durable = next;
                self.synced.push((key.clone(), next));
            }
        }
    }
    fn contents(&self, t: &[u8], p: &[u8]) -> Vec<(u64, Vec<u8>)> {
        self.read(t, p, 0, usize::MAX, usize::MAX).unwrap()
    }
}

impl StoreLog for MemLog {
    type Error = String;
    fn next_offset(&self, t: &[u8], p: &[u8]) -> Option<u64> {
        self.parts
            .get(&(t.to_vec(), p.to_vec()))
            .map(|(f, r, _)| f + r.len() as u64)
    }
    fn first_offset(&self, t: &[u8], p: &[u8]) -> Option<u64> {
        self.parts
            .get(&(t.to_vec(), p.to_vec()))
            .map(|(f, _, _)| *f)
    }
    fn append(&mut self, t: &[u8], p: &[u8], offset: u64, c: &[u8]) -> Result<(), String> {
        if self.fail || self.fail_from.is_some_and(|f| offset >= f) {
            return Err("disk full".into());
        }
        let e = self
            .parts
            .entry((t.to_vec(), p.to_vec()))
            .or_insert((offset, Vec::new(), offset));
        assert_eq!(e.0 + e.1.len() as u64, offset, "append must be contiguous");
        e.1.push(c.to_vec());
        Ok(())
    }
    fn read_into(
        &self,
        t: &[u8],
        p: &[u8],
        start: u64,
        max_records: usize,
        max_bytes: usize,
        out: &mut Batch,
    ) -> Result<Option<u64>, String> {
        out.clear();
        let Some((first, recs, _)) = self.parts.get(&(t.to_vec(), p.to_vec())) else {
            return Ok(None);
        };
        let from = start.max(*first);
        let mut o = from;
        while let Some(r) = recs.get((o - first) as usize) {
            if out.len() >= max_records || (!out.is_empty() && out.bytes() + r.len() > max_bytes) {
                break;
            }
            out.push(r);
            o += 1;
        }
        Ok((!out.is_empty()).then_some(from))
    }
    fn offset_for_time(&mut self, t: &[u8], p: &[u8], ts: u64) -> Result<Option<u64>, String> {
        let Some((first, recs, _)) = self.parts.get(&(t.to_vec(), p.to_vec())) else {
            return Ok(None);
        };
        let mut max = 0;
        for (i, body) in recs.iter().enumerate() {
            let (m, _) = crate::meta::split(body).map_err(|e| e.to_string())?;
            max = max.max(m.time_or(0));
            if max >= ts {
                return Ok(Some(first + i as u64));
            }
        }
        Ok(None)
    }
    fn skip_to(&mut self, t: &[u8], p: &[u8], offset: u64) -> Result<(), String> {
        let e = self.parts.get_mut(&(t.to_vec(), p.to_vec())).expect("held");
        assert!(offset > e.0 + e.1.len() as u64, "skips forward");
        *e = (offset, Vec::new(), e.2);
        Ok(())
    }
    fn take_durable(&mut self, out: &mut Vec<(PartKey, u64)>) {
        out.append(&mut self.synced);
    }
    fn durable_next(&self, t: &[u8], p: &[u8]) -> Option<u64> {
        self.durable_asked.set(self.durable_asked.get() + 1);
        self.parts
            .get(&(t.to_vec(), p.to_vec()))
            .map(|(_, _, d)| *d)
    }
    fn sync_if_due(&mut self) -> Result<(), String> {
        if self.fail_sync {
            return Err("sync failed".into());
        }
        Ok(())
    }
    fn sync_all(&mut self) -> Result<(), String> {
        self.sync();
        Ok(())
    }
    fn next_sync(&self) -> Option<Instant> {
        None
    }
    fn recover(&mut self) -> Result<(), String> {
        Ok(())
    }
    fn set_aside(&self, t: &[u8], p: &[u8]) -> bool {
        self.aside.contains(&(t.to_vec(), p.to_vec()))
    }
    fn partitions(&self, topic: Option<&[u8]>) -> Vec<PartKey> {
        self.parts
            .keys()
            .filter(|(t, _)| topic.is_none_or(|x| x == t.as_slice()))
            .cloned()
            .collect()
    }
}

fn store() -> StoreState<MemLog> {
    store_with(StoreStateConfig::default())
}

fn store_with(cfg: StoreStateConfig) -> StoreState<MemLog> {
    StoreState::new(ME.to_vec(), MemLog::default(), cfg)
}

fn rec(s: &mut StoreState<MemLog>, seq: u64, now: Instant) -> Vec<Out> {
    s.on_record(T, P, seq, format!("r{seq}").as_bytes(), now)
}

/// One record of a FETCH answer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answered {
    to: Vec<u8>,
    partition: Vec<u8>,
    topic: Vec<u8>,
    sequence: u64,
    content: Vec<u8>,
}

/// The next slice of FETCH answers, record by record.
fn replies(s: &mut StoreState<MemLog>) -> Vec<Answered> {
    let mut slice = ReplySlice::default();
    if !s.next_reply_slice(&mut slice, Instant::now()) {
        return Vec::new();
    }
    slice
        .contents()
        .enumerate()
        .map(|(i, content)| Answered {
            to: slice.to.clone(),
            partition: slice.partition.clone(),
            topic: slice.topic.clone(),
            sequence: slice.first + i as u64,
            content: content.to_vec(),
        })
        .collect()
}

pub(crate) fn fetch_of(out: &[Out]) -> Vec<(u64, u32)> {
    out.iter()
        .filter_map(|o| match o {
            Out::Fetch {
                sequence, count, ..
            } => Some((*sequence, *count)),
            _ => None,
        })
        .collect()
}

#[test]
fn in_order_records_append_and_ack_only_when_durable() {
    let mut s = store();
    let now = Instant::now();
    for i in 0..3 {
        assert!(rec(&mut s, i, now).is_empty());
    }
    assert_eq!(s.log().contents(T, P).len(), 3);
    // Nothing durable yet: no ACK.
    assert!(s.tick(now).is_empty());
    s.log_mut().sync();
    let out = s.tick(now);
    assert_eq!(
        out,
        vec![Out::Ack {
            partition: P.to_vec(),
            subject: T.to_vec(),
            sequence: 2
        }]
    );
    // No repeat ACK until more is durable, or a second passed while the
    // producer is alive (it may have missed the first).
    assert!(s.tick(now).is_empty());
    assert_eq!(s.next_deadline(now), Some(now + Duration::from_secs(1)));
    let later = now + Duration::from_millis(1100);
    assert_eq!(s.tick(later), out);
    assert_eq!(s.next_deadline(later), Some(later + Duration::from_secs(1)));
    let gone = now + Duration::from_secs(30);
    assert!(s.tick(gone).is_empty(), "producer gone");
    // ... and no deadline is left that the loop would wake for (a past one
    // made the store thread spin once its producer had gone).
    assert_eq!(s.next_deadline(gone), None);
    let Message::Ack(a) = out[0].as_message(ME) else {
        panic!()
    };
    assert_eq!((a.topic, a.address, a.subject), (P, Some(ME), T));
}

#[test]
fn tick_visits_only_partitions_with_work_left() {
    let mut s = store();
    let t0 = Instant::now();
    // A thousand producers (Spark tasks) that each sent one record and left.
    let names: Vec<Vec<u8>> = (0..1000)
        .map(|i| format!("P{i:031}").into_bytes())
        .collect();
    for p in &names {
        s.on_record(T, p, 0, b"x", t0);
    }
    assert_eq!(s.active_partitions(), 1000);
    // Not durable yet: every one stays (its ACK is still to come).
    assert!(s.tick(t0).is_empty());
    assert_eq!(s.active_partitions(), 1000);
    s.log_mut().sync();
    assert_eq!(s.tick(t0).len(), 1000, "one ACK each");
    // Producers still heard within the window: kept for ACK repeats.
    assert_eq!(s.active_partitions(), 1000);
    let gone = t0 + Duration::from_secs(30);
    assert!(s.tick(gone).is_empty());
    assert_eq!(s.active_partitions(), 0);
    assert_eq!(s.next_deadline(gone), None);
    // Nor is their state kept: the log says all there is.
    assert_eq!(s.partition_states(), 0);
    assert_eq!(s.log().partitions(None).len(), 1000);
    // One live producer: only its partition is visited.
    s.on_record(T, P, 0, b"a", gone);
    s.on_record(T, P, 1, b"b", gone);
    assert_eq!(s.active_partitions(), 1);
    s.log_mut().sync();
    assert_eq!(s.tick(gone).len(), 1);
    // A partition that went quiet comes back with a gap: it is visited
    // again, and its FETCH is retried from `tick`.
    let back = gone + Duration::from_secs(1);
    let out = s.on_record(T, &names[7], 5, b"y", back);
    assert_eq!(fetch_of(&out), vec![(1, 4)]);
    assert_eq!(s.active_partitions(), 2);
    let retry = back + Duration::from_secs(1);
    assert_eq!(fetch_of(&s.tick(retry)), vec![(1, 4)]);
    assert_eq!(s.active_partitions(), 2);
    // One that speaks again in order starts from the log: its record is
    // appended and ACKed.
    assert!(s.on_record(T, &names[3], 1, b"z", retry).is_empty());
    s.log_mut().sync();
    let acks: Vec<_> = s
        .tick(retry)
        .into_iter()
        .filter(|o| matches!(o, Out::Ack { .. }))
        .collect();
    assert_eq!(acks.len(), 1);
    let Message::Ack(a) = acks[0].as_message(ME) else {
        panic!()
    };
    assert_eq!((a.topic, a.sequence), (&names[3][..], 1));
    assert_eq!(s.log().next_offset(T, &names[3]), Some(2));
    assert_eq!((s.active_partitions(), s.partition_states()), (3, 3));
}

#[test]
fn gap_is_fetched_held_records_drained_duplicates_dropped() {
    let mut s = store();
    let now = Instant::now();
    rec(&mut s, 0, now);
    let out = rec(&mut s, 3, now);
    assert_eq!(fetch_of(&out), vec![(1, 2)]);
    // Record 4 arrives while the FETCH is in flight: held, no second FETCH.
    assert!(fetch_of(&rec(&mut s, 4, now)).is_empty());
    // The answers come as DIRECT-RECORDs.
    s.on_record(T, P, 1, b"r1", now);
    s.on_record(T, P, 2, b"r2", now);
    let got: Vec<u64> = s.log().contents(T, P).iter().map(|r| r.0).collect();
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
    rec(&mut s, 2, now);
    assert_eq!(s.counters().duplicates, 1);
    assert_eq!(s.log().contents(T, P)[3].1, b"r3");
}

#[test]
fn unanswered_fetch_is_retried_after_the_retry_interval() {
    let mut s = store();
    let t0 = Instant::now();
    rec(&mut s, 0, t0);
    assert_eq!(fetch_of(&rec(&mut s, 5, t0)), vec![(1, 4)]);
    assert!(fetch_of(&s.tick(t0 + Duration::from_millis(10))).is_empty());
    let later = t0 + Duration::from_millis(600);
    assert_eq!(fetch_of(&s.tick(later)), vec![(1, 4)]);
    assert_eq!(
        s.next_deadline(later),
        Some(later + Duration::from_millis(500))
    );
}

#[test]
fn an_unanswered_gap_backs_off_until_another_store_connects() {
    let mut s = store();
    let t0 = Instant::now();
    rec(&mut s, 0, t0);
    // Records 1..5 are held by a store that is away; 5 came live.
    assert_eq!(fetch_of(&rec(&mut s, 5, t0)), vec![(1, 4)]);
    let mut fetched = vec![t0];
    let mut t = t0;
    while let Some(due) = s
        .next_deadline(t)
        .filter(|&d| d < t0 + Duration::from_secs(60))
    {
        t = due;
        let f = fetch_of(&s.tick(t));
        if !f.is_empty() {
            assert_eq!(f, vec![(1, 4)]);
            fetched.push(t);
        }
    }
    let gaps: Vec<Duration> = fetched.windows(2).map(|w| w[1] - w[0]).collect();
    let (r, give_up) = {
        let c = StoreStateConfig::default();
        (c.fetch_retry, c.give_up_fetches as usize)
    };
    assert!(gaps[..give_up].iter().all(|&g| g == r), "{gaps:?}");
    assert_eq!(
        gaps[give_up..give_up + 5],
        [2 * r, 4 * r, 8 * r, 16 * r, 16 * r],
        "{gaps:?}"
    );
    assert!(fetched.len() < 20, "{} FETCHes in a minute", fetched.len());
    // Another store connects: the gap is asked for at once.
    let now = t + Duration::from_secs(1);
    s.store_joined();
    assert_eq!(s.next_deadline(now).map(|d| d <= now), Some(true));
    assert_eq!(fetch_of(&s.tick(now)), vec![(1, 4)]);
    assert_eq!(s.next_deadline(now), Some(now + 2 * r));
}

#[test]
fn a_set_aside_partition_takes_no_records_and_fetches_nothing() {
    let mut s = store();
    s.log_mut().aside.push((T.to_vec(), P.to_vec()));
    let now = Instant::now();
    for seq in [0, 5] {
        assert!(rec(&mut s, seq, now).is_empty(), "no FETCH for a gap");
    }
    let h = Head {
        topic: T,
        address: P,
        subject: T,
        sequence: 9,
    };
    assert!(fetch_of(&s.on_head(&h, now)).is_empty());
    assert!(fetch_of(&s.tick(now + Duration::from_secs(5))).is_empty());
    assert_eq!(s.counters().dropped_set_aside, 2);
    assert_eq!(s.counters().appended, 0);
    assert_eq!(s.log().next_offset(T, P), None);
    // Other partitions go on as usual.
    s.on_record(T, b"OTHER", 0, b"x", now);
    assert_eq!(s.counters().appended, 1);
}

#[test]
fn head_beyond_what_is_stored_triggers_fetch() {
    let mut s = store();
    let now = Instant::now();
    rec(&mut s, 0, now);
    let h = Head {
        topic: T,
        address: P,
        subject: T,
        sequence: 9,
    };
    assert_eq!(fetch_of(&s.on_head(&h, now)), vec![(1, 9)]);
    // A HEAD for a partition never seen fetches from 0.
    let h2 = Head {
        topic: T,
        address: b"OTHER",
        subject: T,
        sequence: 4,
    };
    let out = s.on_head(&h2, now);
    assert_eq!(fetch_of(&out), vec![(0, 5)]);
    let Message::Fetch(f) = out[0].as_message(ME) else {
        panic!()
    };
    assert_eq!((f.partition, f.requester, f.topic), (&b"OTHER"[..], ME, T));
}

#[test]
fn late_joining_store_fetches_from_zero_then_gives_up_on_lost_history() {
    let mut s = store();
    let t0 = Instant::now();
    assert_eq!(fetch_of(&rec(&mut s, 10, t0)), vec![(0, 10)]);
    rec(&mut s, 11, t0);
    assert!(s.log().contents(T, P).is_empty(), "waits for history");
    let mut t = t0;
    for _ in 0..10 {
        t += Duration::from_millis(600);
        s.tick(t);
    }
    let got: Vec<u64> = s.log().contents(T, P).iter().map(|r| r.0).collect();
    assert_eq!(got, vec![10, 11], "started at the earliest offset held");
}

/// A store that took 0..5 of a partition (then deleted by its retention if
/// `expired`) hears record 20: the gap 5..20 is FETCHed; `direct` says whether
/// peers answer it (from 20 on, all they hold).
fn known_partition_with_a_gap(expired: bool, direct: bool) -> StoreState<MemLog> {
    let mut s = store();
    let t0 = Instant::now();
    for i in 0..5 {
        rec(&mut s, i, t0);
    }
    if expired {
        let e = s
            .log_mut()
            .parts
            .get_mut(&(T.to_vec(), P.to_vec()))
            .unwrap();
        *e = (5, Vec::new(), 5);
    }
    assert_eq!(fetch_of(&rec(&mut s, 20, t0)), vec![(5, 15)]);
    for i in 20..25 {
        if direct {
            s.on_direct_record(T, P, i, format!("r{i}").as_bytes(), t0);
        } else {
            rec(&mut s, i, t0);
        }
    }
    let mut t = t0;
    for _ in 0..10 {
        t += Duration::from_millis(600);
        s.tick(t);
    }
    s
}

#[test]
fn an_expired_partition_skips_a_gap_that_peers_answer_only_from_past_it() {
    let s = known_partition_with_a_gap(true, true);
    let got: Vec<u64> = s.log().contents(T, P).iter().map(|r| r.0).collect();
    assert_eq!(got, (20..25).collect::<Vec<_>>());
    assert_eq!(s.counters().records_skipped, 15);
}

#[test]
fn a_gap_is_kept_while_records_are_held_or_without_answers_from_past_it() {
    // Records held: a peer holding the gap may only be away (skipping would
    // delete them). Live records past the gap prove nothing either.
    for (expired, direct, held) in [(false, true, 0..5), (true, false, 5..5)] {
        let s = known_partition_with_a_gap(expired, direct);
        let got: Vec<u64> = s.log().contents(T, P).iter().map(|r| r.0).collect();
        assert_eq!(
            got,
            held.collect::<Vec<_>>(),
            "expired {expired}, direct {direct}"
        );
        assert_eq!(s.counters().records_skipped, 0);
        assert_eq!(
            s.log().first_offset(T, P),
            Some(if expired { 5 } else { 0 })
        );
    }
}

#[test]
fn pipelined_fetch_continues_the_answer_in_progress() {
    let mut s = store_with(StoreStateConfig {
        reply_batch_records: 3,
        ..Default::default()
    });
    let now = Instant::now();
    for i in 0..20 {
        rec(&mut s, i, now);
    }
    let f = Fetch {
        partition: P,
        requester: C,
        topic: T,
        sequence: 0,
        count: 6,
    };
    let mut sent = Vec::new();
    let mut take_slice = |s: &mut StoreState<MemLog>| {
        for o in replies(s) {
            sent.push(o.sequence);
        }
    };
    s.on_fetch(&f);
    take_slice(&mut s);
    // The consumer asks for the next window before this one is answered:
    // the rest of the first window still goes out, then the second.
    s.on_fetch(&Fetch {
        sequence: 6,
        count: 6,
        ..f
    });
    take_slice(&mut s);
    // A retry from an earlier offset rewinds the same answer.
    s.on_fetch(&Fetch {
        sequence: 4,
        count: 2,
        ..f
    });
    while s.has_replies() {
        take_slice(&mut s);
    }
    assert_eq!(sent, [0, 1, 2, 3, 4, 5, 4, 5, 6, 7, 8, 9, 10, 11]);
    assert_eq!(s.counters().fetches_answered, 3);
}

#[test]
fn a_fetch_below_the_first_record_held_is_answered_from_it() {
    let mut s = store();
    let now = Instant::now();
    for i in 0..10 {
        rec(&mut s, i, now);
    }
    // Retention deleted 0..6.
    let part = s
        .log_mut()
        .parts
        .get_mut(&(T.to_vec(), P.to_vec()))
        .unwrap();
    part.1.drain(..6);
    part.0 = 6;
    let f = Fetch {
        partition: P,
        requester: C,
        topic: T,
        sequence: 0,
        count: 3,
    };
    // All of 0..3 is gone: 3 records from the first held, not nothing.
    s.on_fetch(&f);
    let mut seqs = Vec::new();
    while s.has_replies() {
        for o in replies(&mut s) {
            seqs.push(o.sequence);
        }
    }
    assert_eq!(seqs, vec![6, 7, 8]);
}

/// A requester whose queue is full waits, with all its jobs, and backs off
/// (doubling while its queue stays full); the other requesters' answers go
/// on meanwhile. Before, the refused slice went back to the front of the one
/// queue and every answer waited behind it.
#[test]
fn a_requester_with_a_full_queue_waits_alone_and_backs_off() {
    let mut s = store_with(StoreStateConfig {
        reply_batch_records: 2,
        ..Default::default()
    });
    let t0 = Instant::now();
    for i in 0..10 {
        rec(&mut s, i, t0);
    }
    let (a, b) = (&b"AAAA"[..], &b"BBBB"[..]);
    for to in [a, b] {
        s.on_fetch(&Fetch {
            partition: P,
            requester: to,
            topic: T,
            sequence: 0,
            count: 10,
        });
    }
    let mut slice = ReplySlice::default();
    assert!(s.next_reply_slice(&mut slice, t0));
    assert_eq!(slice.to, a);
    s.requeue_slice(&slice, 0, t0); // A's queue is full
                                    // B is answered to the end while A waits.
    let mut got = Vec::new();
    while s.next_reply_slice(&mut slice, t0) {
        got.push((slice.to.clone(), slice.first));
        s.reply_sent(&slice);
    }
    let b_firsts: Vec<u64> = got
        .iter()
        .map(|(to, f)| {
            assert_eq!(to, b, "only B while A waits");
            *f
        })
        .collect();
    assert_eq!(b_firsts, vec![0, 2, 4, 6, 8]);
    assert_eq!(s.next_reply_at(t0), Some(t0 + REPLY_BACKOFF));
    // Its wait over, A is answered from where it stood; full again, it waits
    // twice as long.
    let t1 = t0 + REPLY_BACKOFF;
    assert!(s.next_reply_slice(&mut slice, t1));
    assert_eq!((slice.to.as_slice(), slice.first), (a, 0));
    s.requeue_slice(&slice, 1, t1);
    assert_eq!(s.next_reply_at(t1), Some(t1 + 2 * REPLY_BACKOFF));
    let t2 = t1 + 2 * REPLY_BACKOFF;
    assert!(s.next_reply_slice(&mut slice, t2));
    assert_eq!((slice.to.as_slice(), slice.first), (a, 1));
    s.reply_sent(&slice);
    let mut rest = vec![slice.first];
    while s.next_reply_slice(&mut slice, t2) {
        rest.push(slice.first);
    }
    assert_eq!(rest, vec![1, 3, 5, 7, 9]);
    assert_eq!(s.next_reply_at(t2), None, "every job done");
}

#[test]
fn fetch_is_answered_exactly_in_ascending_slices() {
    let mut s = store_with(StoreStateConfig {
        reply_batch_records: 3,
        ..Default::default()
    });
    let now = Instant::now();
    for i in 0..10 {
        rec(&mut s, i, now);
    }
    let f = Fetch {
        partition: P,
        requester: C,
        topic: T,
        sequence: 2,
        count: 7,
    };
    assert!(s.on_fetch(&f).is_empty());
    let mut seqs = Vec::new();
    while s.has_replies() {
        for o in replies(&mut s) {
            assert_eq!((&o.to[..], &o.partition[..], &o.topic[..]), (C, P, T));
            assert_eq!(o.content, format!("r{}", o.sequence).as_bytes());
            seqs.push(o.sequence);
        }
    }
    assert_eq!(seqs, (2..9).collect::<Vec<_>>(), "exactly count records");
    // A slice that could not go out (full queue) is sent again, in order.
    s.on_fetch(&Fetch { count: 5, ..f });
    let mut first = ReplySlice::default();
    assert!(s.next_reply_slice(&mut first, Instant::now()));
    s.requeue_slice(&first, 1, Instant::now());
    let mut again: Vec<u64> = Vec::new();
    while s.has_replies() {
        for o in replies(&mut s) {
            again.push(o.sequence);
        }
    }
    assert_eq!(again, vec![3, 4, 5, 6]);
    // Beyond the head: only what exists; unknown partition: nothing, counted.
    s.on_fetch(&Fetch {
        sequence: 8,
        count: 100,
        ..f
    });
    let n: usize = std::iter::from_fn(|| s.has_replies().then(|| replies(&mut s).len())).sum();
    assert_eq!(n, 2);
    s.on_fetch(&Fetch {
        partition: b"NOPE",
        ..f
    });
    assert!(!s.has_replies());
    assert_eq!(s.counters().fetches_unknown, 1);
    // Absurd counts are bounded by what is stored.
    s.on_fetch(&Fetch {
        sequence: u64::MAX - 1,
        count: u32::MAX,
        ..f
    });
    assert!(!s.has_replies());
}

#[test]
fn get_heads_and_consumer_hello_answer_direct_heads() {
    let mut s = store();
    let now = Instant::now();
    for i in 0..3 {
        rec(&mut s, i, now);
    }
    s.on_record(b"other", P, 0, b"x", now);
    // A partition whose records retention deleted, all of them: nothing to
    // read, so no head (a consumer would FETCH it in vain, forever).
    const GONE: &[u8] = b"PRODUCER00000000000000000000000B";
    s.log_mut()
        .parts
        .insert((T.to_vec(), GONE.to_vec()), (5, Vec::new(), 5));
    let out = s.on_get_heads(&GetHeads {
        topic: T,
        address: C,
    });
    assert_eq!(
        out,
        vec![Out::DirectHead {
            to: C.to_vec(),
            partition: P.to_vec(),
            subject: T.to_vec(),
            sequence: 2
        }]
    );
    // CONSUMER-HELLO with no topics: nothing; with one topic: its heads.
    fn hello(subjects: Vec<&[u8]>) -> ConsumerHello<'_> {
        ConsumerHello {
            topic: ME,
            address: C,
            subjects: subjects.into(),
        }
    }
    assert!(s.on_consumer_hello(&hello(vec![])).is_empty());
    assert_eq!(s.on_consumer_hello(&hello(vec![T])), out);
    // Addressed to another store: ignored.
    let mut other = hello(vec![T]);
    other.topic = b"SOMEONE-ELSE";
    assert!(s.on_consumer_hello(&other).is_empty());
    // One topic named 100,000 times: answered once, not 100,000 times.
    assert_eq!(s.on_consumer_hello(&hello(vec![T; 100_000])), out);
    // At most MAX_HELLO_TOPICS distinct topics are answered for.
    let names: Vec<Vec<u8>> = (0..MAX_HELLO_TOPICS)
        .map(|i| format!("n{i}").into_bytes())
        .collect();
    let mut many: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    many.push(T);
    assert!(
        s.on_consumer_hello(&hello(many)).is_empty(),
        "T is past the cap"
    );
}

#[test]
fn hostile_offsets_and_topics_are_dropped_not_stored() {
    let mut s = store();
    let now = Instant::now();
    // No record can stand at the last offset: its next would overflow.
    assert!(rec(&mut s, u64::MAX, now).is_empty());
    let head = |sequence, subject| Head {
        topic: subject,
        address: P,
        subject,
        sequence,
    };
    assert!(s.on_head(&head(u64::MAX, T), now).is_empty());
    assert!(s.on_peer_head(&head(u64::MAX, T), now).is_empty());
    // A topic the log could not name as a directory (each '/' escapes to 3
    // bytes) would fail every sync of the store.
    let long = vec![b'/'; 100];
    assert!(s.on_record(&long, P, 0, b"x", now).is_empty());
    assert!(s.on_head(&head(5, &long), now).is_empty());
    assert_eq!(s.counters().dropped_invalid, 5);
    assert_eq!(s.counters().appended, 0);
    assert!(s.log().parts.is_empty());
    // An ordinary record is stored as before.
    rec(&mut s, 0, now);
    assert_eq!(s.counters().appended, 1);
}

#[test]
fn stores_exchange_every_head_and_fetch_what_they_miss() {
    const S2: &[u8] = b"STORE000000000000000000000000002";
    let mut a = store();
    let now = Instant::now();
    for i in 0..3 {
        rec(&mut a, i, now);
    }
    a.on_record(b"other", P, 0, b"x", now);
    // Another store asks with an empty topic: every partition held.
    let mut out = a.on_get_heads(&GetHeads {
        topic: b"",
        address: S2,
    });
    out.sort_by_key(|o| match o {
        Out::DirectHead { subject, .. } => subject.clone(),
        _ => Vec::new(),
    });
    let head = |subject: &[u8], sequence| Out::DirectHead {
        to: S2.to_vec(),
        partition: P.to_vec(),
        subject: subject.to_vec(),
        sequence,
    };
    assert_eq!(out, vec![head(b"other", 0), head(T, 2)]);
    // Our own ask (we hear nothing we publish, but a peer could echo it).
    let mine = a.ask_peer_heads();
    let Message::GetHeads(g) = mine.as_message(ME) else {
        panic!()
    };
    assert_eq!((g.topic, g.address), (&b""[..], ME));
    assert!(a.on_get_heads(&g).is_empty());

    // The asking store holds one record of T: it fetches the rest, and the
    // peer's head does not count as its producer being heard (no ACK repeats).
    let mut b = store_with(StoreStateConfig::default());
    b.on_record(T, P, 0, b"r0", now);
    b.log_mut().sync();
    b.tick(now);
    let h = |subject, sequence| Head {
        topic: ME,
        address: P,
        subject,
        sequence,
    };
    assert_eq!(fetch_of(&b.on_peer_head(&h(T, 2), now)), vec![(1, 2)]);
    assert_eq!(
        fetch_of(&b.on_peer_head(&h(b"other", 0), now)),
        vec![(0, 1)]
    );
    // Nothing new: no FETCH, and the partition is not listed for `tick`.
    let gone = now + Duration::from_secs(30);
    b.on_record(T, P, 1, b"r1", gone);
    b.on_record(T, P, 2, b"r2", gone);
    b.on_record(b"other", P, 0, b"x", gone);
    b.log_mut().sync();
    b.tick(gone + Duration::from_secs(30));
    assert_eq!(b.active_partitions(), 0);
    assert!(b.on_peer_head(&h(T, 2), gone).is_empty());
    assert_eq!(b.active_partitions(), 0);
    // An invalid partition name is counted, not stored.
    let bad = Head {
        topic: ME,
        address: b"../x",
        subject: T,
        sequence: 1,
    };
    assert!(b.on_peer_head(&bad, now).is_empty());
    assert_eq!(b.counters().dropped_invalid, 1);
}

/// A subscription on the XPUB, as the one receive path hands it over.
pub(crate) fn sub(kind: Kind, key: &[u8], subscribe: bool) -> Subscription<'_> {
    Subscription {
        subscribe,
        prefix: Prefix::of(kind, key),
    }
}

#[test]
fn store_hello_on_consumer_subscription() {
    let mut s = store();
    let now = Instant::now();
    let out = s.on_subscription(&sub(Kind::StoreHello, C, true), now);
    let Message::StoreHello(h) = out[0].as_message(ME) else {
        panic!()
    };
    assert_eq!((h.topic, h.address), (C, ME));
    assert!(s
        .on_subscription(&sub(Kind::StoreHello, C, false), now)
        .is_empty());
    assert!(s
        .on_subscription(&sub(Kind::StoreHello, b"", true), now)
        .is_empty());
    assert!(s
        .on_subscription(&sub(Kind::Record, T, true), now)
        .is_empty());
}

#[test]
fn append_failure_stops_progress_reports_and_resumes() {
    let mut s = store();
    let now = Instant::now();
    rec(&mut s, 0, now);
    s.log_mut().fail = true;
    rec(&mut s, 1, now);
    assert_eq!(s.last_error(), Some("disk full"));
    assert_eq!(s.counters().append_errors, 1);
    s.log_mut().sync();
    let acks: Vec<_> = s
        .tick(now)
        .into_iter()
        .filter(|o| matches!(o, Out::Ack { .. }))
        .collect();
    assert_eq!(acks.len(), 1, "ACKs only what was stored: offset 0");
    s.log_mut().fail = false;
    // The producer (or another store) answers the FETCH the store keeps sending.
    let later = now + Duration::from_secs(1);
    assert_eq!(fetch_of(&s.tick(later)), vec![(1, 1)]);
    s.on_record(T, P, 1, b"r1", later);
    assert_eq!(s.last_error(), None);
    assert_eq!(s.log().contents(T, P).len(), 2);
}

/// A failed append is reported until writes succeed for a whole
/// `RECOVER_EVERY`, even when a later append of the same turn succeeded (a
/// nearly full disk, a buffered append): the error never flickers off
/// while the disk is still full.
#[test]
fn an_append_error_stays_reported_until_writes_succeed_for_a_while() {
    let mut s = store();
    let now = Instant::now();
    rec(&mut s, 0, now);
    s.log_mut().fail = true;
    rec(&mut s, 1, now);
    s.log_mut().fail = false;
    rec(&mut s, 1, now);
    assert_eq!(s.last_error(), None, "the append of 1 succeeded");
    s.maintain(now);
    assert_eq!(s.storage_error(), Some("disk full"), "seen by the turn");
    let ms = Duration::from_millis;
    rec(&mut s, 2, now + ms(500));
    s.maintain(now + ms(500));
    assert_eq!(
        s.storage_error(),
        Some("disk full"),
        "not a whole second yet"
    );
    // Another failure (then a success) in the same turn: the wait starts over.
    s.log_mut().fail = true;
    rec(&mut s, 3, now + ms(900));
    s.log_mut().fail = false;
    rec(&mut s, 3, now + ms(900));
    s.maintain(now + ms(900));
    rec(&mut s, 4, now + ms(1500));
    s.maintain(now + ms(1500));
    assert_eq!(
        s.storage_error(),
        Some("disk full"),
        "0.6 s since the last failure"
    );
    s.maintain(now + ms(1900));
    assert_eq!(
        s.storage_error(),
        None,
        "a whole second of appends that worked"
    );
    assert_eq!(s.counters().append_errors, 2);
}

/// A sync failure's text wins over an append's, and with nothing appended
/// after it the error stays reported however long it has been.
#[test]
fn a_sync_error_is_reported_until_records_after_it_are_synced() {
    let mut s = store();
    let now = Instant::now();
    rec(&mut s, 0, now);
    s.log_mut().fail_sync = true;
    s.maintain(now);
    assert_eq!(s.storage_error(), Some("sync failed: sync failed"));
    s.log_mut().fail_sync = false;
    s.log_mut().fail = true;
    rec(&mut s, 1, now);
    s.maintain(now);
    assert_eq!(
        s.storage_error(),
        Some("sync failed: sync failed"),
        "the sync's wins"
    );
    s.log_mut().fail = false;
    let later = now + Duration::from_secs(5);
    s.maintain(later);
    assert!(
        s.storage_error().is_some(),
        "nothing appended since: still failing"
    );
    rec(&mut s, 1, later);
    s.maintain(later);
    // The recovery due at `later` found appends failing: a failure then.
    assert!(s.storage_error().is_some(), "0 s since the last failure");
    s.maintain(later + Duration::from_secs(1));
    assert_eq!(s.storage_error(), None);
    assert_eq!(s.sync_failures(), 1);
}

/// Records held past gaps are bounded over all partitions too
/// (`max_held_total_bytes`), not only per partition: a store back after a
/// while with many producers live held `max_held_bytes` per partition. Past
/// the total each partition still holds the one record nearest its gap, and
/// what a partition drains or drops leaves room for the others.
#[test]
fn records_held_past_gaps_are_bounded_over_all_partitions() {
    let mut s = store_with(StoreStateConfig {
        max_held_total_bytes: 10,
        ..Default::default()
    });
    let now = Instant::now();
    let (p1, p2) = (&b"P1"[..], &b"P2"[..]);
    // P1: a gap at 0, then 1..=5 (2 bytes each: "r1".."r5").
    for seq in 1..=5 {
        s.on_record(T, p1, seq, format!("r{seq}").as_bytes(), now);
    }
    assert_eq!(s.counters().held, 5, "10 bytes: the total is reached");
    // P2: a gap at 0; one record is held whatever the total, no more.
    for seq in 1..=3 {
        s.on_record(T, p2, seq, format!("r{seq}").as_bytes(), now);
    }
    assert_eq!(s.counters().held, 6);
    assert_eq!(s.counters().dropped_held_full, 2, "P2's 2 and 3");
    // P1's gap closes: its held records drain into the log, which frees the
    // total for P2.
    s.on_record(T, p1, 0, b"r0", now);
    assert_eq!(s.log().contents(T, p1).len(), 6);
    s.on_record(T, p2, 2, b"r2", now);
    s.on_record(T, p2, 3, b"r3", now);
    s.on_record(T, p2, 0, b"r0", now);
    assert_eq!(s.log().contents(T, p2).len(), 4, "0..=3 in order");
}

#[test]
fn oversized_records_and_full_hold_buffer_are_counted() {
    let mut s = StoreState::new(
        ME.to_vec(),
        MemLog::default(),
        StoreStateConfig {
            max_record_bytes: 4,
            max_held_records: 2,
            ..Default::default()
        },
    );
    let now = Instant::now();
    // Bodies: the fixed 9 bytes of metadata do not count, the rest does.
    s.on_record(T, P, 0, b"too long: over 4 + 9", now);
    assert_eq!(s.counters().dropped_oversize, 1);
    rec(&mut s, 5, now);
    rec(&mut s, 6, now);
    rec(&mut s, 7, now);
    assert_eq!(
        s.counters().dropped_held_full,
        1,
        "7, the farthest, dropped"
    );
    for bad in [&b"../../etc"[..], b"", &[b'A'; 65], b"a b"] {
        assert!(s.on_record(T, bad, 0, b"x", now).is_empty());
    }
    assert_eq!(s.counters().dropped_invalid, 4);
    assert!(s.log().partitions(None).is_empty());
    // A record nearer the gap displaces the farthest held one (6): the store
    // keeps what follows the gap, and 6 is fetched again later.
    rec(&mut s, 3, now);
    assert_eq!(s.counters().dropped_held_full, 2);
    for seq in 0..3 {
        rec(&mut s, seq, now);
    }
    let offsets = |s: &StoreState<MemLog>| s.log().contents(T, P).len();
    assert_eq!(offsets(&s), 4, "0-2 and the held 3 stored");
    rec(&mut s, 4, now);
    assert_eq!(offsets(&s), 6, "4 and the held 5 stored, 6 was let go");
}

/// A consumer catching up on many partitions FETCHes all of them at once and
/// retries the ones not answered yet: every partition is answered, once.
/// (With room for only 64 answers in progress, all but the last 64 were
/// dropped, and the consumer's retries kept the store busy with FETCHes: a
/// late consumer of 20,000 partitions took 56 s, with 47 FETCHes each.)
#[test]
fn thousands_of_fetches_at_once_are_each_answered_once() {
    let mut s = store();
    let now = Instant::now();
    let names: Vec<Vec<u8>> = (0..2000)
        .map(|i| format!("{i:032X}").into_bytes())
        .collect();
    for p in &names {
        for seq in 0..3 {
            s.on_record(T, p, seq, b"v", now);
        }
    }
    fn fetch(p: &[u8]) -> Fetch<'_> {
        Fetch {
            partition: p,
            requester: C,
            topic: T,
            sequence: 0,
            count: 100,
        }
    }
    for _round in 0..3 {
        for p in &names {
            s.on_fetch(&fetch(p));
        }
    }
    let mut got: std::collections::HashMap<Vec<u8>, Vec<u64>> = Default::default();
    while s.has_replies() {
        for o in replies(&mut s) {
            got.entry(o.partition).or_default().push(o.sequence);
        }
    }
    assert_eq!(got.len(), names.len());
    assert!(got.values().all(|v| v == &[0, 1, 2]), "answered once each");

    // Past `max_reply_jobs` the oldest answer is dropped (its requester asks again).
    let mut s = store_with(StoreStateConfig {
        max_reply_jobs: 10,
        ..Default::default()
    });
    for p in &names[..20] {
        s.on_record(T, p, 0, b"v", now);
    }
    for p in &names[..20] {
        s.on_fetch(&fetch(p));
    }
    let mut served = Vec::new();
    while s.has_replies() {
        for o in replies(&mut s) {
            served.push(o.partition);
        }
    }
    assert_eq!(served, names[10..20].to_vec());
}

/// A partition the storage sets aside while a FETCH of its gap is in flight
/// (its reopen after an I/O error failed) must not leave a deadline in the
/// past: the store loop polls with timeout 0 while one is due. It used to:
/// `fetch_gap` returned early for a set-aside partition without clearing its
/// `fetch`, and `next_deadline` kept returning the stale retry time (the
/// store thread spun at 100% CPU until the partition was repaired).
#[test]
fn a_partition_set_aside_with_a_fetch_in_flight_leaves_no_past_deadline() {
    let mut s = store();
    let t0 = Instant::now();
    rec(&mut s, 0, t0);
    assert_eq!(fetch_of(&rec(&mut s, 5, t0)), vec![(1, 4)]);
    // Record 0 is ACKed: its ACK would be repeated while the producer is heard.
    s.log_mut().sync();
    let acked = s.tick(t0 + Duration::from_millis(1));
    assert!(
        acked
            .iter()
            .any(|o| matches!(o, Out::Ack { sequence: 0, .. })),
        "{acked:?}"
    );
    // The log fails to reopen the partition: set aside, it holds nothing.
    let key = (T.to_vec(), P.to_vec());
    s.log_mut().parts.remove(&key);
    s.log_mut().aside.push(key);
    let mut t = t0 + Duration::from_millis(600);
    for _ in 0..5 {
        assert!(fetch_of(&s.tick(t)).is_empty());
        let due = s.next_deadline(t);
        assert!(
            due.is_none_or(|d| d > t),
            "a deadline {:?} in the past: the loop spins",
            t - due.unwrap()
        );
        t += Duration::from_secs(1);
    }
}

/// An expired partition gives a gap up only up to where peers answer from.
/// Here peers answer from 20, and record 20 (within `max_record_bytes`) is
/// larger than the hold buffer (`max_held_bytes`; a store's
/// `max_record_bytes` may be raised past its 64 MiB). Were it not held, the
/// skip would go to the first record held, 21. Record 20, which every peer holds
/// and sends, is lost here and counted in `records_skipped` as gone from every
/// peer. That used to happen: `fetch_gap` skips to `held.first()`, and
/// `hold` did not keep one record past its bound. Now it does.
#[test]
fn an_expired_partition_skips_only_to_where_peers_answer_from() {
    let mut s = store_with(StoreStateConfig {
        max_record_bytes: 100,
        max_held_bytes: 50,
        ..Default::default()
    });
    let t0 = Instant::now();
    for i in 0..5 {
        rec(&mut s, i, t0);
    }
    // Retention deleted all it held.
    *s.log_mut()
        .parts
        .get_mut(&(T.to_vec(), P.to_vec()))
        .unwrap() = (5, Vec::new(), 5);
    // A peer holds 20..=25 (its retention deleted the rest).
    let content = |i: u64| {
        if i == 20 {
            vec![b'x'; 80]
        } else {
            format!("r{i}").into_bytes()
        }
    };
    let head = Head {
        topic: ME,
        address: P,
        subject: T,
        sequence: 25,
    };
    let mut pending = fetch_of(&s.on_peer_head(&head, t0));
    assert_eq!(pending, vec![(5, 21)]);
    let mut t = t0;
    for _ in 0..20 {
        for (seq, count) in std::mem::take(&mut pending) {
            for i in seq.max(20)..(seq + u64::from(count)).min(26) {
                s.on_direct_record(T, P, i, &content(i), t);
            }
        }
        t += Duration::from_millis(600);
        pending = fetch_of(&s.tick(t));
    }
    let got: Vec<u64> = s.log().contents(T, P).iter().map(|r| r.0).collect();
    assert_eq!(got, (20..26).collect::<Vec<_>>(), "record 20 is kept");
    assert_eq!(s.counters().records_skipped, 15, "5..20 skipped, not 20");
}

// ------------------------------------------------ RECORD-BATCH

mod record_batches {
    use super::*;
    use crate::wire::RecordBatch;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(600))]

        /// A RECORD-BATCH (its live case appended in one go) leaves the
        /// store exactly as its records one by one would: the log, the
        /// counters, every message sent, also with gaps, duplicates,
        /// oversize values and appends that fail part way.
        #[test]
        fn a_record_batch_does_what_its_records_one_by_one_would(
            // Each batch where the last ended (the live case), or a little
            // before or after it.
            chunks in proptest::collection::vec(
                (prop_oneof![4 => Just(0i64), 1 => -6i64..6], 1u64..12),
                1..12,
            ),
            fail_from in proptest::option::of(0u64..70),
            small_max in any::<bool>(),
            head in proptest::option::of(0u64..70),
        ) {
            let cfg = StoreStateConfig {
                // "r10" and later are over it: one by one again.
                max_record_bytes: if small_max { 2 } else { 1 << 20 },
                ..StoreStateConfig::default()
            };
            let (mut a, mut b) = (store_with(cfg.clone()), store_with(cfg));
            a.log_mut().fail_from = fail_from;
            b.log_mut().fail_from = fail_from;
            let now = Instant::now();
            if let Some(h) = head {
                let head = Head { topic: T, address: P, subject: T, sequence: h };
                prop_assert_eq!(a.on_head(&head, now), b.on_head(&head, now));
            }
            let mut end = 0u64;
            for (delta, len) in chunks {
                let start = end.saturating_add_signed(delta);
                end = start + len;
                let values: Vec<Vec<u8>> =
                    (start..start + len).map(|o| format!("r{o}").into_bytes()).collect();
                let mut raw = Vec::new();
                let count = RecordBatch::put_values(&mut raw, values.iter().map(Vec::as_slice))
                    .unwrap();
                let batch = RecordBatch {
                    topic: T,
                    address: P,
                    subject: T,
                    sequence: start,
                    count,
                    values: &raw,
                };
                let out_a = a.on_record_batch(&batch, now);
                let mut out_b = Vec::new();
                for (o, v) in (start..).zip(&values) {
                    out_b.extend(b.on_record(T, P, o, v, now));
                }
                prop_assert_eq!(out_a, out_b);
            }
            prop_assert_eq!(a.log().contents(T, P), b.log().contents(T, P));
            prop_assert_eq!(a.counters(), b.counters());
            prop_assert_eq!(a.last_error(), b.last_error());
            let later = now + Duration::from_secs(1);
            prop_assert_eq!(a.tick(later), b.tick(later));
        }
    }

    #[test]
    fn a_live_batch_appends_every_record_and_counts_them() {
        let mut s = store();
        let now = Instant::now();
        rec(&mut s, 0, now);
        let mut raw = Vec::new();
        let values: Vec<&[u8]> = vec![b"r1", b"", b"r3"];
        let count = RecordBatch::put_values(&mut raw, values).unwrap();
        let batch = RecordBatch {
            topic: T,
            address: P,
            subject: T,
            sequence: 1,
            count,
            values: &raw,
        };
        assert!(s.on_record_batch(&batch, now).is_empty());
        let got: Vec<(u64, Vec<u8>)> = s.log().contents(T, P);
        assert_eq!(
            got,
            vec![
                (0, b"r0".to_vec()),
                (1, b"r1".to_vec()),
                (2, Vec::new()),
                (3, b"r3".to_vec())
            ]
        );
        assert_eq!(s.counters().appended, 4);
        assert_eq!(s.log().next_offset(T, P), Some(4));
    }
}

/// The ACKs of a turn are those of what the syncs finished since the last
/// made durable: exactly its partitions, each at its durable offset, and
/// none for a partition appended to but not covered.
#[test]
fn a_sync_report_acks_exactly_its_partitions() {
    let mut s = store();
    let now = Instant::now();
    let names: Vec<Vec<u8>> = (0..3).map(|i| format!("P{i:031}").into_bytes()).collect();
    for (i, p) in names.iter().enumerate() {
        for seq in 0..=i as u64 {
            s.on_record(T, p, seq, b"x", now);
        }
    }
    assert!(s.tick(now).is_empty(), "nothing durable yet");
    // A sync covered the first two only (pure: no log asked).
    let marks = vec![
        ((T.to_vec(), names[0].clone()), 1),
        ((T.to_vec(), names[1].clone()), 2),
    ];
    let acks: Vec<(Vec<u8>, u64)> = s
        .on_durable(&marks, now)
        .into_iter()
        .map(|o| match o {
            Out::Ack {
                partition,
                sequence,
                ..
            } => (partition, sequence),
            o => panic!("{o:?}"),
        })
        .collect();
    assert_eq!(acks, vec![(names[0].clone(), 0), (names[1].clone(), 1)]);
    // Reported again (or less): nothing new to ACK.
    assert!(s.on_durable(&marks, now).is_empty());
    assert!(s
        .on_durable(&[((T.to_vec(), names[1].clone()), 1)], now)
        .is_empty());
    // A partition the store holds no state for: no ACK.
    assert!(s
        .on_durable(&[((T.to_vec(), b"NOBODY".to_vec()), 5)], now)
        .is_empty());
    // The log's own report, taken by `tick`: the third partition's ACK.
    s.log_mut().sync();
    let out = s.tick(now);
    assert_eq!(
        out,
        vec![Out::Ack {
            partition: names[2].clone(),
            subject: T.to_vec(),
            sequence: 2
        }]
    );
    assert_eq!(s.counters().acks_sent, 3);
}

/// A store that knows a thousand partitions whose producers are alive (a
/// HEAD each, nothing new) and one busy partition looks, at each turn, at the
/// busy one only: the ACKs come from the syncs' reports, and the quiet ones
/// are visited when their ACK repeat is due, not at every turn. `tick` used to
/// ask every such partition whether it became durable at every turn.
#[test]
fn a_turn_looks_only_at_partitions_touched_or_due() {
    let mut s = store();
    let t0 = Instant::now();
    let quiet: Vec<Vec<u8>> = (0..1000)
        .map(|i| format!("Q{i:031}").into_bytes())
        .collect();
    for p in &quiet {
        s.on_record(T, p, 0, b"x", t0);
    }
    s.log_mut().sync();
    assert_eq!(s.tick(t0).len(), 1000, "one ACK each");
    // Their producers are alive: a HEAD each, at the last offset.
    for p in &quiet {
        let h = Head {
            topic: T,
            address: p,
            subject: T,
            sequence: 0,
        };
        assert!(s.on_head(&h, t0).is_empty());
    }
    assert!(s.tick(t0).is_empty());
    assert_eq!(s.active_partitions(), 1000, "kept for their ACK repeats");
    // A hundred turns of a busy partition within the next half second.
    let asked = s.log().durable_asked.get();
    let mut acked = 0;
    for turn in 0..100u64 {
        let now = t0 + Duration::from_millis(5 * turn);
        for i in 0..10 {
            s.on_record(T, P, turn * 10 + i, b"y", now);
        }
        s.log_mut().sync();
        for o in s.tick(now) {
            match o {
                Out::Ack {
                    partition,
                    sequence,
                    ..
                } if partition == P => acked = sequence,
                o => panic!("only the busy partition has news: {o:?}"),
            }
        }
    }
    assert_eq!(acked, 999);
    let per_turn = (s.log().durable_asked.get() - asked) / 100;
    assert!(
        per_turn <= 4,
        "{per_turn} partitions asked per turn: the quiet ones were looked at"
    );
    // Their ACK repeats come when due, a second after their ACK.
    let t1 = t0 + Duration::from_millis(1000);
    assert_eq!(s.next_deadline(t0 + Duration::from_millis(500)), Some(t1));
    let repeats = s.tick(t1);
    assert_eq!(
        repeats.len(),
        1000,
        "each quiet producer hears its ACK again"
    );
}

/// `bytes_appended` counts the bodies the log took by every path (one
/// record, held records drained past a gap, a live batch, a batch whose
/// appends fail part way); `bytes_served` those of FETCH answers, less what
/// a full queue put back.
#[test]
fn bytes_appended_and_served_are_those_of_the_bodies_taken() {
    use crate::wire::RecordBatch;
    let mut s = store_with(StoreStateConfig {
        reply_batch_records: 3,
        ..Default::default()
    });
    let now = Instant::now();
    // "r0" alone; "r2" held past the gap, appended once "r1" fills it.
    for seq in [0, 2, 1] {
        rec(&mut s, seq, now);
    }
    assert_eq!((s.counters().appended, s.counters().bytes_appended), (3, 6));
    let mut raw = Vec::new();
    let mut batch = |s: &mut StoreState<MemLog>, sequence, values: &[&[u8]]| {
        raw.clear();
        let count = RecordBatch::put_values(&mut raw, values.iter().copied()).unwrap();
        let b = RecordBatch {
            topic: T,
            address: P,
            subject: T,
            sequence,
            count,
            values: &raw,
        };
        s.on_record_batch(&b, now);
    };
    batch(&mut s, 3, &[b"hello", b"", b"0123456789"]);
    assert_eq!(
        (s.counters().appended, s.counters().bytes_appended),
        (6, 21)
    );
    // The log refuses offset 8 on: the third value (100 bytes) is not counted.
    s.log_mut().fail_from = Some(8);
    batch(&mut s, 6, &[b"four", b"sevenb7", &[b'x'; 100]]);
    assert_eq!(
        (s.counters().appended, s.counters().bytes_appended),
        (8, 32)
    );
    assert_eq!(s.counters().append_errors, 1);
    s.log_mut().fail_from = None;
    // Answers in slices of 3; the first goes out only in part (one of three
    // records: the others are answered again).
    s.on_fetch(&Fetch {
        partition: P,
        requester: C,
        topic: T,
        sequence: 0,
        count: 8,
    });
    let mut slice = ReplySlice::default();
    assert!(s.next_reply_slice(&mut slice, now));
    assert_eq!(s.counters().bytes_served, 6);
    s.requeue_slice(&slice, 1, now);
    assert_eq!(
        (s.counters().records_served, s.counters().bytes_served),
        (1, 2)
    );
    let later = now + MAX_REPLY_BACKOFF;
    while s.next_reply_slice(&mut slice, later) {
        s.reply_sent(&slice);
    }
    assert_eq!(
        (s.counters().records_served, s.counters().bytes_served),
        (8, 32)
    );
}
