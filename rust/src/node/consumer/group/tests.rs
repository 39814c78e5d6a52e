//! [`Membership`] alone, its messages captured (decoded back from the
//! frames the group codec makes, as a peer would read them).

use super::*;
use crate::wire::group::{decode, Claim, ClaimState, Member, MEMBER_LEAVING};
use crate::wire::Dialect;

const ME: &[u8] = b"9E51FBAE55A649C1A50C0B360F3FF7AE";
const STORE: &[u8] = b"5D5B5C63E2C54B6A8C2BDA2B5D1F0A11";
const HEARTBEAT: Duration = Duration::from_millis(100);

fn part(i: usize) -> Part {
    (
        b"t".to_vec(),
        format!("{:032X}", 0xB000_0000u64 + i as u64).into_bytes(),
    )
}

fn member(t0: Instant, auto_commit: Option<Duration>) -> Membership {
    let timeout = Duration::from_millis(1000);
    Membership::new(b"g", ME, &[b"t"], timeout, HEARTBEAT, auto_commit, t0)
}

/// What a member sends, as encoded frames (decoded again to look at).
#[derive(Default)]
struct Wire(Vec<Vec<Vec<u8>>>);

impl Wire {
    fn send(&mut self) -> impl FnMut(&GroupMessage<'_>) -> Result<()> + '_ {
        move |m: &GroupMessage<'_>| {
            self.0.push(m.encode(Dialect::Rfc).unwrap());
            Ok(())
        }
    }

    /// The messages sent since the last call, by ID.
    fn take_ids(&mut self) -> Vec<u8> {
        self.0.drain(..).map(|f| f[0][0]).collect()
    }

    fn last_of(&self, id: u8) -> Option<GroupMessage<'_>> {
        let f = self.0.iter().rev().find(|f| f[0][0] == id)?;
        Some(decode(f).unwrap().0)
    }
}

fn offsets<'a>(to: &'a [u8], sequence: u64, entries: Vec<Entry<'a>>) -> GroupMessage<'a> {
    let flags = if entries.is_empty() {
        OFFSETS_LAST
    } else {
        OFFSETS_GROUP_KNOWN | OFFSETS_LAST
    };
    GroupMessage::CommitOffsets(CommitOffsets {
        to,
        address: STORE,
        group: b"g",
        sequence,
        flags,
        entries,
    })
}

/// A commit of `p`, as a store's answer carries it.
fn entry(p: &Part, epoch: u64, offset: u64) -> Entry<'_> {
    Entry {
        topic: &p.0,
        partition: &p.1,
        epoch,
        offset,
    }
}

fn query_sequence(w: &Wire) -> u64 {
    match w.last_of(b'U') {
        Some(GroupMessage::CommitQuery(q)) => q.sequence,
        other => panic!("no COMMIT-QUERY: {other:?}"),
    }
}

/// A member alone: after `settle` it looks its partition up, and starts it
/// at the stores' commit once their answers settled.
#[test]
fn a_lone_member_starts_its_partition_at_the_stores_commit() {
    let t0 = Instant::now();
    let mut m = member(t0, None);
    let mut w = Wire::default();
    let p = part(0);
    m.partition_seen(&p.0, &p.1);
    assert_eq!(m.decide(t0), vec![]);
    m.due(t0, &mut w.send()).unwrap();
    assert_eq!(
        w.take_ids(),
        vec![b'J'],
        "announced at once, nothing looked up"
    );
    let settled = t0 + HEARTBEAT * 3 / 2;
    assert_eq!(m.decide(settled), vec![]);
    m.due(settled, &mut w.send()).unwrap();
    assert_eq!(w.take_ids(), vec![b'U', b'J']);
    let seq = query_sequence(&{
        let mut w2 = Wire::default();
        m.due(settled + LOOKUP_RETRY, &mut w2.send()).unwrap();
        w2
    });
    // Unanswered, it was asked again; the answer to that one counts.
    let entry = entry(&p, 2, 40);
    let t1 = settled + LOOKUP_RETRY;
    assert_eq!(
        m.on_group(&offsets(ME, seq, vec![entry]), t1),
        Fate::Taken(0)
    );
    assert_eq!(m.decide(t1), vec![], "waits for the other stores");
    let acts = m.decide(t1 + LOOKUP_SETTLE);
    assert_eq!(acts, vec![Act::Start(p.clone(), StartAt::Offset(40))]);
    assert_eq!(m.assignment(), vec![p]);
}

/// No store answers: the lookup is asked again every `LOOKUP_RETRY`, and
/// nothing starts.
#[test]
fn nothing_starts_while_no_store_answers() {
    let t0 = Instant::now();
    let mut m = member(t0, None);
    let mut w = Wire::default();
    let p = part(0);
    m.partition_seen(&p.0, &p.1);
    let mut t = t0;
    let mut queries = 0;
    for _ in 0..50 {
        assert_eq!(m.decide(t), vec![]);
        m.due(t, &mut w.send()).unwrap();
        queries += w.take_ids().iter().filter(|&&id| id == b'U').count();
        t += Duration::from_millis(100);
    }
    assert!((4..=6).contains(&queries), "{queries} queries in 5 s");
    assert!(m.assignment().is_empty());
}

/// Answers for another member, another group or another sequence are not
/// taken as the lookup's.
#[test]
fn answers_to_others_are_not_taken() {
    let (mut m, settled, seq) = asking(Instant::now(), None, &part(0));
    let other = b"0123456789ABCDEF0123456789ABCDEF";
    assert_eq!(
        m.on_group(&offsets(other, seq, vec![]), settled),
        Fate::Ignored
    );
    let mut wrong_group = offsets(ME, seq, vec![]);
    if let GroupMessage::CommitOffsets(o) = &mut wrong_group {
        o.group = &b"h"[..];
    }
    assert_eq!(m.on_group(&wrong_group, settled), Fate::Ignored);
    // Another sequence: no answer to this lookup.
    m.on_group(&offsets(ME, seq + 7, vec![]), settled);
    assert_eq!(m.decide(settled + LOOKUP_SETTLE * 2), vec![]);
}

/// A member of the same group announcing a partition held: this one does
/// not start it, even where the assignment gives it to this one.
#[test]
fn a_partition_another_member_holds_is_not_started() {
    let t0 = Instant::now();
    let mut m = member(t0, None);
    let mut w = Wire::default();
    let p = part(0);
    m.partition_seen(&p.0, &p.1);
    let other = b"0123456789ABCDEF0123456789ABCDEF";
    let ann = GroupMessage::Member(Member {
        group: b"g",
        address: other,
        flags: 0,
        timeout_ms: 1000,
        topics: vec![b"t"],
        claims: vec![Claim {
            topic: &p.0,
            partition: &p.1,
            state: ClaimState::Held,
            offset: 0,
        }],
    });
    let mut t = t0;
    for _ in 0..10 {
        assert_eq!(m.on_group(&ann, t), Fate::Taken(0));
        assert_eq!(m.decide(t), vec![]);
        m.due(t, &mut w.send()).unwrap();
        t += HEARTBEAT;
    }
    assert!(!w.take_ids().contains(&b'U'));
    assert_eq!(m.members(), 2);
}

/// Runs a member alone until it delivers `p` from offset 0 (no commit).
/// A member that has seen `p`, settled, and asked the stores: the time and
/// the COMMIT-QUERY's sequence.
fn asking(t0: Instant, auto_commit: Option<Duration>, p: &Part) -> (Membership, Instant, u64) {
    let mut m = member(t0, auto_commit);
    let mut w = Wire::default();
    m.partition_seen(&p.0, &p.1);
    let t = t0 + HEARTBEAT * 2;
    m.decide(t);
    m.due(t, &mut w.send()).unwrap();
    let seq = query_sequence(&w);
    (m, t, seq)
}

fn running(t0: Instant, auto_commit: Option<Duration>, p: &Part) -> (Membership, Instant) {
    let (mut m, t, seq) = asking(t0, auto_commit, p);
    m.on_group(&offsets(ME, seq, vec![]), t);
    let t = t + LOOKUP_SETTLE;
    assert_eq!(m.decide(t), vec![Act::Start(p.clone(), StartAt::Reset)]);
    (m, t)
}

/// The auto-commit interval of the commit tests.
const EVERY: Duration = Duration::from_millis(500);

/// The position `poll` stands at, `o` for every partition.
fn at(o: u64) -> impl Fn(&Part) -> Option<u64> {
    move |_: &Part| Some(o)
}

/// Auto-commit commits what `poll` returned, only when it moved; a stop
/// commits the last position before the release says where it stopped.
#[test]
fn commits_follow_the_positions_and_a_stop_commits_before_it_releases() {
    let (p, every) = (part(0), EVERY);
    let (mut m, t) = running(Instant::now(), Some(every), &p);
    let mut w = Wire::default();
    m.auto_commit(t, &at(0), &mut w.send()).unwrap();
    m.auto_commit(t + every, &at(0), &mut w.send()).unwrap();
    assert_eq!(
        w.take_ids(),
        Vec::<u8>::new(),
        "nothing returned, nothing committed"
    );
    m.auto_commit(t + every, &at(12), &mut w.send()).unwrap();
    assert_eq!(w.take_ids(), Vec::<u8>::new(), "not due yet");
    m.auto_commit(t + every * 2, &at(12), &mut w.send())
        .unwrap();
    match w.last_of(b'C') {
        Some(GroupMessage::Commit(c)) => {
            assert_eq!(c.entries.len(), 1);
            assert_eq!(
                (c.entries[0].partition, c.entries[0].offset),
                (&p.1[..], 12)
            );
        }
        other => panic!("no COMMIT: {other:?}"),
    }
    w.take_ids();
    // Leaving: the stop commits 15, then the announcement releases at 15.
    m.leave();
    let t = t + every * 3;
    assert_eq!(m.decide(t), vec![Act::Stop(p.clone())]);
    m.stopped(&p, 15, t, &mut w.send()).unwrap();
    m.due(t, &mut w.send()).unwrap();
    assert!(m.left());
    let commit = match w.last_of(b'C') {
        Some(GroupMessage::Commit(c)) => c.entries[0].offset,
        other => panic!("no COMMIT: {other:?}"),
    };
    assert_eq!(commit, 15);
    match w.last_of(b'J') {
        Some(GroupMessage::Member(a)) => {
            assert_eq!(a.flags, MEMBER_LEAVING);
            assert_eq!(a.claims.len(), 1);
            assert_eq!(
                (a.claims[0].state, a.claims[0].offset),
                (ClaimState::Released, 15)
            );
        }
        other => panic!("no announcement: {other:?}"),
    }
    assert_eq!(w.take_ids(), vec![b'C', b'J'], "the commit goes first");
}

/// A member that joins and wins the partition: the holder stops it.
#[test]
fn a_member_that_wins_a_partition_takes_it_from_its_holder() {
    let t0 = Instant::now();
    // Find a partition the other member wins.
    let other = b"0123456789ABCDEF0123456789ABCDEF";
    let p = (0..64)
        .map(part)
        .find(|p| {
            let members = [other.as_slice(), ME];
            crate::group::assign::owner(b"g", &p.0, &p.1, members) == Some(other.as_slice())
        })
        .unwrap();
    let (mut m, t) = running(t0, None, &p);
    let ann = GroupMessage::Member(Member {
        group: b"g",
        address: other,
        flags: 0,
        timeout_ms: 1000,
        topics: vec![b"t"],
        claims: vec![],
    });
    m.on_group(&ann, t);
    assert_eq!(m.decide(t), vec![Act::Stop(p.clone())]);
    let mut w = Wire::default();
    m.stopped(&p, 0, t, &mut w.send()).unwrap();
    assert!(m.assignment().is_empty());
    m.due(t, &mut w.send()).unwrap();
    assert_eq!(
        w.take_ids(),
        vec![b'J'],
        "nothing returned: nothing to commit"
    );
}

/// While the node does not read its peers (its application is behind), a
/// silent peer is not expired: only a turn that decides expires it.
#[test]
fn a_turn_held_expires_nobody() {
    let t0 = Instant::now();
    let mut m = member(t0, None);
    let other = b"0123456789ABCDEF0123456789ABCDEF";
    let ann = GroupMessage::Member(Member {
        group: b"g",
        address: other,
        flags: 0,
        timeout_ms: 1000,
        topics: vec![b"t"],
        claims: vec![],
    });
    m.on_group(&ann, t0);
    m.decide(t0);
    assert_eq!(m.members(), 2);
    let later = t0 + Duration::from_secs(5);
    m.hold(later);
    assert_eq!(m.members(), 2, "held: not expired");
    m.decide(later);
    assert_eq!(m.members(), 1);
}

/// A COMMIT-OFFSETS from store `store` answering `sequence`, the last of
/// its answer.
fn answer<'a>(store: &'a [u8], sequence: u64, entries: Vec<Entry<'a>>) -> GroupMessage<'a> {
    GroupMessage::CommitOffsets(CommitOffsets {
        to: ME,
        address: store,
        group: b"g",
        sequence,
        flags: OFFSETS_GROUP_KNOWN | OFFSETS_LAST,
        entries,
    })
}

fn last_commit_sequence(w: &Wire) -> u64 {
    match w.last_of(b'C') {
        Some(GroupMessage::Commit(c)) => c.sequence,
        other => panic!("no COMMIT: {other:?}"),
    }
}

/// A synchronous commit is confirmed once every store that said hello
/// showed it at or past what was committed (an answer behind it does not
/// count), or 200 ms after the first that did; with nothing to commit at
/// once; a partition not read here is refused.
#[test]
fn a_synchronous_commit_is_confirmed_by_the_stores() {
    const OTHER: &[u8] = b"0F0E0D0C0B0A09080706050403020100";
    let t0 = Instant::now();
    let p = part(0);
    let (mut m, t) = running(t0, None, &p);
    m.store_seen(STORE);
    m.store_seen(OTHER);
    let mut w = Wire::default();
    let (tx, rx) = std::sync::mpsc::channel();
    let at = |_: &Part| Some(30u64);
    m.commit_request(None, Some(tx.clone()), (t, &at), &mut w.send())
        .unwrap();
    let seq = last_commit_sequence(&w);
    let entry = |offset| Entry {
        topic: &p.0,
        partition: &p.1,
        epoch: 0,
        offset,
    };
    m.on_group(&answer(STORE, seq, vec![entry(30)]), t);
    m.on_group(&answer(OTHER, seq, vec![entry(29)]), t);
    m.due(t, &mut w.send()).unwrap();
    assert!(rx.try_recv().is_err(), "one store is behind it");
    m.on_group(&answer(OTHER, seq, vec![entry(31)]), t);
    m.due(t, &mut w.send()).unwrap();
    assert!(rx.try_recv().unwrap().is_ok(), "both stores have it");

    // A third store that never answers: confirmed 200 ms after the first.
    m.store_seen(b"11111111111111111111111111111111");
    m.commit_request(None, Some(tx.clone()), (t, &at), &mut w.send())
        .unwrap();
    let seq = last_commit_sequence(&w);
    m.on_group(&answer(STORE, seq, vec![entry(30)]), t);
    m.due(t, &mut w.send()).unwrap();
    assert!(rx.try_recv().is_err());
    m.due(t + LOOKUP_SETTLE, &mut w.send()).unwrap();
    assert!(rx.try_recv().unwrap().is_ok());

    // Nothing to commit: at once. A partition not read here: refused.
    let none = |_: &Part| None::<u64>;
    m.commit_request(None, Some(tx.clone()), (t, &none), &mut w.send())
        .unwrap();
    assert!(rx.try_recv().unwrap().is_ok());
    let other = vec![(part(9), 5)];
    m.commit_request(Some(other), Some(tx.clone()), (t, &at), &mut w.send())
        .unwrap();
    let refused = rx.try_recv().unwrap().unwrap_err().to_string();
    assert!(refused.contains("not read by this member"), "{refused}");
    // Explicit offsets are committed as given.
    w.take_ids();
    m.commit_request(Some(vec![(p.clone(), 7)]), None, (t, &at), &mut w.send())
        .unwrap();
    match w.last_of(b'C') {
        Some(GroupMessage::Commit(c)) => assert_eq!(c.entries[0].offset, 7),
        other => panic!("no COMMIT: {other:?}"),
    }
}

/// `committed()`: a COMMIT-QUERY of the member's topics, answered with the
/// greatest commit over the stores once every known store answered.
#[test]
fn committed_asks_the_stores() {
    let t0 = Instant::now();
    let p = part(0);
    let mut m = member(t0, None);
    m.store_seen(STORE);
    let mut w = Wire::default();
    let (tx, rx) = std::sync::mpsc::channel();
    m.ask_committed(&[b"t"], t0, tx, &mut w.send()).unwrap();
    let seq = query_sequence(&w);
    m.due(t0, &mut w.send()).unwrap();
    assert!(rx.try_recv().is_err(), "no answer yet");
    let entry = entry(&p, 1, 12);
    m.on_group(&answer(STORE, seq, vec![entry]), t0);
    m.due(t0, &mut w.send()).unwrap();
    let got = rx.try_recv().unwrap();
    assert_eq!(got.get(&p), Some(&(1, 12)));
}

/// A lookup settles only on a store's whole answer (its *last* message):
/// a part of an older store's answer in several, whose rest a full queue
/// dropped, does not start the partition without its commit.
#[test]
fn a_lookup_settles_only_on_a_whole_answer() {
    let p = part(0);
    let (mut m, t, seq) = asking(Instant::now(), None, &p);
    let other = part(1);
    let first_part = GroupMessage::CommitOffsets(CommitOffsets {
        to: ME,
        address: STORE,
        group: b"g",
        sequence: seq,
        flags: OFFSETS_GROUP_KNOWN,
        entries: vec![entry(&other, 0, 7)],
    });
    m.on_group(&first_part, t);
    assert_eq!(m.decide(t + LOOKUP_SETTLE * 5), vec![], "part of an answer");
    let t = t + LOOKUP_SETTLE * 5;
    let entry = entry(&p, 0, 40);
    m.on_group(&offsets(ME, seq, vec![entry]), t);
    assert_eq!(
        m.decide(t + LOOKUP_SETTLE),
        vec![Act::Start(p, StartAt::Offset(40))]
    );
}

/// A COMMIT no store confirmed is sent again at every auto-commit, also
/// for a partition that no longer moves, until a store's COMMIT-OFFSETS
/// shows it; a store saying hello for the first time gets it at once.
#[test]
fn a_commit_no_store_confirmed_is_sent_again_until_one_does() {
    let (p, every) = (part(0), EVERY);
    let (mut m, t) = running(Instant::now(), Some(every), &p);
    let mut w = Wire::default();
    m.auto_commit(t + every, &at(12), &mut w.send()).unwrap();
    assert_eq!(w.take_ids(), vec![b'C']);
    m.auto_commit(t + every * 2, &at(12), &mut w.send())
        .unwrap();
    assert_eq!(w.take_ids(), vec![b'C'], "unconfirmed: sent again");
    let seq = {
        m.auto_commit(t + every * 3, &at(12), &mut w.send())
            .unwrap();
        last_commit_sequence(&w)
    };
    w.take_ids();
    let entry = entry(&p, 0, 12);
    m.on_group(&answer(STORE, seq, vec![entry]), t + every * 3);
    m.auto_commit(t + every * 4, &at(12), &mut w.send())
        .unwrap();
    assert_eq!(w.take_ids(), Vec::<u8>::new(), "confirmed: not again");
    // Moved, not yet due; a new store says hello: committed at once.
    m.auto_commit(t + every * 4, &at(20), &mut w.send())
        .unwrap();
    assert_eq!(w.take_ids(), Vec::<u8>::new(), "not due yet");
    m.store_seen(b"0D5B5C63E2C54B6A8C2BDA2B5D1F0A11");
    m.auto_commit(t + every * 4, &at(20), &mut w.send())
        .unwrap();
    assert_eq!(w.take_ids(), vec![b'C'], "a new store: at once");
}

/// A subscription to its group's announcements (a store restarted, a
/// member joined) makes a member announce itself at once.
#[test]
fn a_subscription_to_its_group_makes_a_member_announce_at_once() {
    let t0 = Instant::now();
    let mut m = member(t0, None);
    let mut w = Wire::default();
    m.due(t0, &mut w.send()).unwrap();
    assert_eq!(w.take_ids(), vec![b'J']);
    let soon = t0 + HEARTBEAT / 10;
    m.due(soon, &mut w.send()).unwrap();
    assert_eq!(w.take_ids(), Vec::<u8>::new(), "not before its heartbeat");
    let other = Subscription {
        subscribe: true,
        prefix: Prefix::parse(b"Jh"),
    };
    m.on_subscription(&other);
    m.due(soon, &mut w.send()).unwrap();
    assert_eq!(w.take_ids(), Vec::<u8>::new(), "another group's");
    for key in [&b"Jg"[..], b"J"] {
        let sub = Subscription {
            subscribe: true,
            prefix: Prefix::parse(key),
        };
        m.on_subscription(&sub);
        m.due(soon, &mut w.send()).unwrap();
        assert_eq!(w.take_ids(), vec![b'J'], "{key:?}");
    }
}

/// A member's question sequences start at random, so that an answer to a
/// question it did not see cannot be made up in advance.
#[test]
fn question_sequences_start_at_random() {
    let p = part(0);
    let (_, _, a) = asking(Instant::now(), None, &p);
    let (_, _, b) = asking(Instant::now(), None, &p);
    assert_ne!(a, b);
    assert!(a > 1 && b > 1, "{a} {b}");
}
