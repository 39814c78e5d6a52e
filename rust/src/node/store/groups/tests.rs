//! A store's groups without sockets: commits checked against the
//! announcements, kept, answered, and read back from `commits.log`.

use std::time::Duration;

use super::*;
use crate::group::commits::Position;
use crate::wire::group::{decode, Claim, ClaimState, Commit, CommitQuery, Member};
use crate::wire::Dialect;

const STORE: &[u8] = b"5D5B5C63E2C54B6A8C2BDA2B5D1F0A11";
const M: &[u8] = b"9E51FBAE55A649C1A50C0B360F3FF7AE";
const P: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";

fn announce<'a>(claims: Vec<Claim<'a>>) -> GroupMessage<'a> {
    GroupMessage::Member(Member {
        group: b"g",
        address: M,
        flags: 0,
        timeout_ms: 1000,
        topics: vec![b"t"],
        claims,
    })
}

fn held(partition: &[u8]) -> Claim<'_> {
    Claim {
        topic: b"t",
        partition,
        state: ClaimState::Held,
        offset: 0,
    }
}

fn commit(address: &[u8], sequence: u64, offset: u64) -> GroupMessage<'_> {
    GroupMessage::Commit(Commit {
        group: b"g",
        address,
        sequence,
        entries: vec![Entry {
            topic: b"t",
            partition: P,
            epoch: 0,
            offset,
        }],
    })
}

fn query(group: &[u8]) -> GroupMessage<'_> {
    GroupMessage::CommitQuery(CommitQuery {
        group,
        address: M,
        sequence: 9,
        topics: vec![],
    })
}

/// The store's answers, encoded and decoded back: (to, group, sequence,
/// flags, entries as (partition, offset)).
type Answer = (Vec<u8>, Vec<u8>, u64, u8, Vec<(Vec<u8>, u64)>);

fn run(g: &mut StoreGroups, msg: &GroupMessage<'_>, now: Instant) -> (Fate, Vec<Answer>) {
    let mut frames = Vec::new();
    let fate = g
        .on_group(msg, now, 1_000, &mut |m: &GroupMessage<'_>| {
            frames.push(m.encode(Dialect::Zproto).unwrap());
            Ok(())
        })
        .unwrap();
    let answers = frames
        .iter()
        .map(|f| match decode(f).unwrap().0 {
            GroupMessage::CommitOffsets(o) => (
                o.to.to_vec(),
                o.group.to_vec(),
                o.sequence,
                o.flags,
                o.entries
                    .iter()
                    .map(|e| (e.partition.to_vec(), e.offset))
                    .collect(),
            ),
            other => panic!("a store answered {other:?}"),
        })
        .collect();
    (fate, answers)
}

/// A COMMIT from no member, or for a partition its member does not claim,
/// is refused and counted; a member's is kept and answered.
#[test]
fn only_members_commit_what_they_claim() {
    let now = Instant::now();
    let mut g = StoreGroups::open(STORE, None, now).unwrap();
    let (fate, answers) = run(&mut g, &commit(M, 1, 10), now);
    assert_eq!((fate, answers.len()), (Fate::Ignored, 0));
    run(&mut g, &announce(vec![held(b"another")]), now);
    let (fate, _) = run(&mut g, &commit(M, 2, 10), now);
    assert_eq!(fate, Fate::Ignored);
    assert_eq!(g.commits_refused, 2);
    assert!(g.table().is_empty());
    run(&mut g, &announce(vec![held(P)]), now);
    let (fate, answers) = run(&mut g, &commit(M, 3, 10), now);
    assert_eq!(fate, Fate::Taken(0));
    let known_last = OFFSETS_GROUP_KNOWN | OFFSETS_LAST;
    assert_eq!(
        answers,
        vec![(
            M.to_vec(),
            b"g".to_vec(),
            3,
            known_last,
            vec![(P.to_vec(), 10)]
        )]
    );
    // An older commit does not move it back; the answer says where it is.
    let (_, answers) = run(&mut g, &commit(M, 4, 7), now);
    assert_eq!(answers[0].4, vec![(P.to_vec(), 10)]);
    assert_eq!(g.commits_taken, 1);
    // A member silent past its timeout commits no more.
    let later = now + Duration::from_millis(1500);
    let (fate, _) = run(&mut g, &commit(M, 5, 20), later);
    assert_eq!(fate, Fate::Ignored);
}

/// COMMIT-QUERY: the group's commits, flagged known; an unknown group gets
/// one empty last answer; the empty group asks for every group.
#[test]
fn queries_are_answered_from_the_table() {
    let now = Instant::now();
    let mut g = StoreGroups::open(STORE, None, now).unwrap();
    let (_, answers) = run(&mut g, &query(b"g"), now);
    assert_eq!(
        answers,
        vec![(M.to_vec(), b"g".to_vec(), 9, OFFSETS_LAST, vec![])]
    );
    run(&mut g, &announce(vec![held(P)]), now);
    run(&mut g, &commit(M, 1, 42), now);
    let (_, answers) = run(&mut g, &query(b"g"), now);
    let known_last = OFFSETS_GROUP_KNOWN | OFFSETS_LAST;
    assert_eq!(
        answers,
        vec![(
            M.to_vec(),
            b"g".to_vec(),
            9,
            known_last,
            vec![(P.to_vec(), 42)]
        )]
    );
    let (_, every) = run(&mut g, &query(b""), now);
    assert_eq!(every, answers);
    let (_, none) = run(&mut g, &query(b"h"), now);
    assert_eq!(none[0].3, OFFSETS_LAST);
}

/// Commits survive a restart: `commits.log` is read back, a torn tail is
/// cut off, and appending goes on after it.
#[test]
fn commits_are_read_back_and_a_torn_tail_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(COMMITS_FILE);
    let now = Instant::now();
    {
        let mut g = StoreGroups::open(STORE, Some(&path), now).unwrap();
        run(&mut g, &announce(vec![held(P)]), now);
        run(&mut g, &commit(M, 1, 42), now);
        run(&mut g, &commit(M, 2, 43), now);
    }
    let whole = std::fs::metadata(&path).unwrap().len();
    // Half a record more: a write torn by a crash.
    let mut torn = std::fs::read(&path).unwrap();
    let half = torn[..(whole / 2) as usize].to_vec();
    torn.extend_from_slice(&half[..10]);
    std::fs::write(&path, &torn).unwrap();
    let mut g = StoreGroups::open(STORE, Some(&path), now).unwrap();
    assert!(g.log_damaged);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), whole);
    let row = g.table().get(b"g", b"t", P).unwrap();
    assert_eq!(
        row,
        Position {
            epoch: 0,
            offset: 43,
            time_ms: 1_000
        }
    );
    run(&mut g, &announce(vec![held(P)]), now);
    run(&mut g, &commit(M, 3, 44), now);
    drop(g);
    let g = StoreGroups::open(STORE, Some(&path), now).unwrap();
    assert!(!g.log_damaged);
    assert_eq!(g.table().get(b"g", b"t", P).unwrap().offset, 44);
}

/// Past its bound the log is rewritten from the table: one record per row.
#[test]
fn a_long_log_is_compacted_to_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(COMMITS_FILE);
    let now = Instant::now();
    let mut g = StoreGroups::open(STORE, Some(&path), now).unwrap();
    g.compact_after = 4096;
    run(&mut g, &announce(vec![held(P)]), now);
    // 200 records of about 70 bytes: 14 KB without compaction.
    for offset in 1..=200 {
        run(&mut g, &commit(M, offset, offset), now);
    }
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len <= 4096, "{len} bytes");
    drop(g);
    let g = StoreGroups::open(STORE, Some(&path), now).unwrap();
    assert_eq!(g.table().get(b"g", b"t", P).unwrap().offset, 200);
    assert_eq!(g.table().len(), 1);
}

/// A commit naming an empty partition cannot be logged: refused, not kept.
#[test]
fn a_commit_that_cannot_be_logged_is_refused() {
    let now = Instant::now();
    let mut g = StoreGroups::open(STORE, None, now).unwrap();
    run(&mut g, &announce(vec![held(b"")]), now);
    let empty = GroupMessage::Commit(Commit {
        group: b"g",
        address: M,
        sequence: 1,
        entries: vec![Entry {
            topic: b"t",
            partition: b"",
            epoch: 0,
            offset: 5,
        }],
    });
    run(&mut g, &empty, now);
    assert_eq!((g.commits_refused, g.table().len()), (1, 0));
}

/// What `g` sends when handed `msg` (or asked, with `msg` None), encoded.
fn sent(g: &mut StoreGroups, msg: Option<&GroupMessage<'_>>, now: Instant) -> Vec<Vec<Vec<u8>>> {
    let mut frames = Vec::new();
    let mut send = |m: &GroupMessage<'_>| {
        frames.push(m.encode(Dialect::Rfc).unwrap());
        Ok(())
    };
    match msg {
        Some(m) => {
            g.on_group(m, now, 2_000, &mut send).unwrap();
        }
        None => g.ask_if_due(now, &mut send).unwrap(),
    }
    frames
}

/// Anti-entropy: a store asks the others for every commit after start-up
/// (and soon after another store connects), and merges their answers to
/// its asks into its table and log; the same answer again moves nothing,
/// an answer to no ask of its own (forged, or its own) is ignored.
#[test]
fn stores_merge_the_commits_they_ask_each_other_for() {
    const OTHER: &[u8] = b"0F0E0D0C0B0A09080706050403020100";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(COMMITS_FILE);
    let now = Instant::now();
    let mut a = StoreGroups::open(STORE, None, now).unwrap();
    run(&mut a, &announce(vec![held(P)]), now);
    run(&mut a, &commit(M, 1, 42), now);
    let mut b = StoreGroups::open(OTHER, Some(&path), now).unwrap();
    assert!(sent(&mut b, None, now).is_empty(), "not before a second");
    let due = b.next_ask_at();
    let asks = sent(&mut b, None, due);
    assert_eq!(asks.len(), 1);
    let (GroupMessage::CommitQuery(q), _) = decode(&asks[0]).unwrap() else {
        panic!("not a COMMIT-QUERY");
    };
    assert_eq!((q.group, q.address, q.topics.len()), (&b""[..], OTHER, 0));
    let answers = sent(&mut a, Some(&GroupMessage::CommitQuery(q.clone())), now);
    assert_eq!(answers.len(), 1);
    let answer = decode(&answers[0]).unwrap().0;
    let GroupMessage::CommitOffsets(o) = &answer else {
        panic!("not a COMMIT-OFFSETS");
    };
    // An answer to another sequence (forged, or to an ask long gone) is not merged.
    let mut forged = o.clone();
    forged.sequence = o.sequence.wrapping_add(7);
    let fate = b.on_group(
        &GroupMessage::CommitOffsets(forged),
        now,
        2_000,
        &mut |_| Ok(()),
    );
    assert_eq!(fate.unwrap(), Fate::Ignored);
    // Its own answers (a loop) neither.
    let mut own = o.clone();
    own.address = OTHER;
    let fate = b.on_group(&GroupMessage::CommitOffsets(own), now, 2_000, &mut |_| {
        Ok(())
    });
    assert_eq!(fate.unwrap(), Fate::Ignored);
    assert!(b.table().is_empty());
    assert!(sent(&mut b, Some(&answer), now).is_empty());
    assert_eq!(b.table().get(b"g", b"t", P).map(|p| p.offset), Some(42));
    assert_eq!(b.commits_replicated, 1);
    // Again: nothing moves (the times differ, the positions do not).
    sent(&mut b, Some(&answer), now);
    assert_eq!(b.commits_replicated, 1);
    drop(b);
    let b = StoreGroups::open(OTHER, Some(&path), now).unwrap();
    assert_eq!(b.table().get(b"g", b"t", P).map(|p| p.offset), Some(42));

    // The next ask comes 2 s later, then every minute; another store
    // connecting brings it forward to 100 ms.
    let mut b = b;
    let first = b.next_ask_at();
    sent(&mut b, None, first);
    let again = b.next_ask_at();
    assert_eq!(again - first, Duration::from_secs(2));
    sent(&mut b, None, again);
    assert_eq!(b.next_ask_at() - again, Duration::from_secs(60));
    b.store_joined(again);
    assert_eq!(b.next_ask_at() - again, Duration::from_millis(100));
}

/// An answer goes in one message whatever its size (here 250 rows, about
/// 20 KB): a member's queue takes or drops it whole, never a part.
#[test]
fn a_large_answer_is_one_message() {
    let now = Instant::now();
    let mut g = StoreGroups::open(STORE, None, now).unwrap();
    let parts: Vec<Vec<u8>> = (0..250u64)
        .map(|i| format!("{:032X}", 0xA000_0000u64 + i).into_bytes())
        .collect();
    run(
        &mut g,
        &announce(parts.iter().map(|p| held(p)).collect()),
        now,
    );
    let entries = parts
        .iter()
        .map(|p| Entry {
            topic: b"t",
            partition: p,
            epoch: 0,
            offset: 10,
        })
        .collect();
    let c = GroupMessage::Commit(Commit {
        group: b"g",
        address: M,
        sequence: 1,
        entries,
    });
    let (_, answers) = run(&mut g, &c, now);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].3, OFFSETS_GROUP_KNOWN | OFFSETS_LAST);
    assert_eq!(answers[0].4.len(), 250);
    let (_, answers) = run(&mut g, &query(b"g"), now);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].4.len(), 250);
}
