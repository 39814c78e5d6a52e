//! A store's groups without sockets: commits checked against the
//! announcements, kept, answered, and read back from `commits.log`.

use std::time::Duration;

use super::*;
use crate::group::commits::Position;
use crate::security::TopicPatterns;
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
    run_with(g, msg, now, Checks::NONE)
}

/// [`run`], with what the store's log and the sender's certificate say.
fn run_with(
    g: &mut StoreGroups,
    msg: &GroupMessage<'_>,
    now: Instant,
    checks: Checks<'_>,
) -> (Fate, Vec<Answer>) {
    let mut frames = Vec::new();
    let fate = g
        .on_group(msg, (now, 1_000), checks, &mut |m: &GroupMessage<'_>| {
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
    assert!(g.compactions > 0);
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
            g.on_group(m, (now, 2_000), Checks::NONE, &mut send)
                .unwrap();
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
        (now, 2_000),
        Checks::NONE,
        &mut |_| Ok(()),
    );
    assert_eq!(fate.unwrap(), Fate::Ignored);
    // Its own answers (a loop) neither.
    let mut own = o.clone();
    own.address = OTHER;
    let fate = b.on_group(
        &GroupMessage::CommitOffsets(own),
        (now, 2_000),
        Checks::NONE,
        &mut |_| Ok(()),
    );
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

/// A COMMIT of `entries` of group g by M.
fn commit_of<'a>(sequence: u64, entries: Vec<Entry<'a>>) -> GroupMessage<'a> {
    GroupMessage::Commit(Commit {
        group: b"g",
        address: M,
        sequence,
        entries,
    })
}

fn entry(partition: &[u8], epoch: u64, offset: u64) -> Entry<'_> {
    Entry {
        topic: b"t",
        partition,
        epoch,
        offset,
    }
}

/// Finding A: a member cannot raise an epoch (an epoch-1 commit would make
/// every epoch-0 commit of the running owner lose, u64::MAX forever), nor
/// commit past the partition's next offset in this store (10^12 would make
/// the next owner skip everything), nor commit a partition this store holds
/// nothing of (it could not bound it). Refusals are counted; the rest of
/// the commit is taken.
#[test]
fn commits_are_bounded_by_the_row_epoch_and_the_partitions_head() {
    const Q: &[u8] = b"0123456789ABCDEF0123456789ABCDEF";
    let now = Instant::now();
    let mut g = StoreGroups::open(STORE, None, now).unwrap();
    let next = |_: &[u8], p: &[u8]| (p == P).then_some(100);
    let checks = Checks {
        next_offset: &next,
        sender_topics: None,
    };
    run_with(&mut g, &announce(vec![held(P), held(Q)]), now, checks);
    run_with(&mut g, &commit_of(1, vec![entry(P, 0, 40)]), now, checks);
    // Epochs 1 and u64::MAX: refused.
    for (i, epoch) in [1, u64::MAX].into_iter().enumerate() {
        let (fate, answers) = run_with(
            &mut g,
            &commit_of(2 + i as u64, vec![entry(P, epoch, 0)]),
            now,
            checks,
        );
        assert_eq!(fate, Fate::Taken(0));
        assert_eq!(answers[0].4, vec![(P.to_vec(), 40)]);
    }
    assert_eq!(g.commits_refused, 2);
    let row = g.table().get(b"g", b"t", P).unwrap();
    assert_eq!((row.epoch, row.offset), (0, 40));
    // 10^12: taken at the partition's next offset, 100.
    run_with(
        &mut g,
        &commit_of(4, vec![entry(P, 0, 1_000_000_000_000)]),
        now,
        checks,
    );
    assert_eq!(g.table().get(b"g", b"t", P).unwrap().offset, 100);
    assert_eq!(g.commits_capped, 1);
    // A partition this store holds nothing of: refused, the other entry taken.
    run_with(
        &mut g,
        &commit_of(5, vec![entry(Q, 0, 7), entry(P, 0, 100)]),
        now,
        checks,
    );
    assert_eq!(g.table().get(b"g", b"t", Q), None);
    assert_eq!(g.commits_refused, 3);
}

/// Finding A, secure clusters: a committer whose certificate covers only
/// some of the group's topics (as its live members announce them, or as
/// its commits here name them) is refused; one covering them all is taken.
#[test]
fn a_certificate_must_cover_every_topic_of_the_group_to_commit() {
    const OTHER: &[u8] = b"A1B2C3D4E5F60718293A4B5C6D7E8F90";
    let now = Instant::now();
    let mut g = StoreGroups::open(STORE, None, now).unwrap();
    let only_t: TopicPatterns = "t".parse().unwrap();
    let every: TopicPatterns = "*".parse().unwrap();
    // An honest member of g reads t and u.
    let honest = GroupMessage::Member(Member {
        group: b"g",
        address: OTHER,
        flags: 0,
        timeout_ms: 1000,
        topics: vec![b"t", b"u"],
        claims: vec![],
    });
    run(&mut g, &honest, now);
    // The intruder announces t alone, holding P, and commits it.
    run(&mut g, &announce(vec![held(P)]), now);
    let (fate, _) = run_with(&mut g, &commit(M, 1, 10), now, as_sender(&only_t));
    assert_eq!(fate, Fate::Ignored);
    assert_eq!(g.commits_refused, 1);
    // The honest member gone, the group's commits still name u.
    let u_row = commit_of(
        2,
        vec![Entry {
            topic: b"u",
            partition: P,
            epoch: 0,
            offset: 3,
        }],
    );
    let held_u = Claim {
        topic: b"u",
        partition: P,
        state: ClaimState::Held,
        offset: 0,
    };
    run(&mut g, &announce(vec![held(P), held_u]), now);
    run_with(&mut g, &u_row, now, as_sender(&every));
    assert_eq!(g.commits_taken, 1);
    let later = now + Duration::from_millis(1500);
    g.maintain(later);
    run(&mut g, &announce(vec![held(P)]), later);
    let (fate, _) = run_with(&mut g, &commit(M, 3, 10), later, as_sender(&only_t));
    assert_eq!(fate, Fate::Ignored);
    // Covering every topic: taken.
    let (fate, _) = run_with(&mut g, &commit(M, 4, 10), later, as_sender(&every));
    assert_eq!(fate, Fate::Taken(0));
    assert_eq!(g.commits_taken, 2);
}

/// Checks of a sender whose certificate allows `topics`.
fn as_sender(topics: &TopicPatterns) -> Checks<'_> {
    Checks {
        sender_topics: Some(topics),
        ..Checks::NONE
    }
}

/// Finding B: the registry forgets silent members on the store's timer,
/// with no COMMIT arriving; an announced timeout counts a minute at most.
#[test]
fn the_registry_expires_on_the_timer() {
    let now = Instant::now();
    let mut g = StoreGroups::open(STORE, None, now).unwrap();
    let mut m = announce(vec![held(P)]);
    if let GroupMessage::Member(m) = &mut m {
        m.timeout_ms = u32::MAX;
    }
    run(&mut g, &m, now);
    assert_eq!(g.registry().members(), 1);
    assert!(g.next_maintain_at() <= now + EXPIRE_EVERY);
    g.maintain(now + Duration::from_secs(30));
    assert_eq!(g.registry().members(), 1);
    let later = now + Duration::from_millis(u64::from(crate::group::MAX_TIMEOUT_MS) + 1);
    g.maintain(later);
    assert_eq!(g.registry().members(), 0);
}

/// Finding B: an announcement past the registry's caps is refused and
/// counted.
#[test]
fn announcements_past_the_caps_are_refused_and_counted() {
    use crate::group::registry::MAX_CLAIMS_PER_MEMBER;
    let now = Instant::now();
    let mut g = StoreGroups::open(STORE, None, now).unwrap();
    let names: Vec<Vec<u8>> = (0..=MAX_CLAIMS_PER_MEMBER)
        .map(|i| format!("{i:08X}").into_bytes())
        .collect();
    let (fate, _) = run(
        &mut g,
        &announce(names.iter().map(|n| held(n)).collect()),
        now,
    );
    assert_eq!(fate, Fate::Ignored);
    assert_eq!((g.announcements_refused, g.registry().members()), (1, 0));
}

/// Finding C: while the log is past its size bound but not four times the
/// table's, an append does not encode the whole table (no compaction is
/// even considered by snapshot): the table's encoded size is kept.
#[test]
fn the_table_is_snapshotted_only_when_compacting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(COMMITS_FILE);
    let now = Instant::now();
    let mut g = StoreGroups::open(STORE, Some(&path), now).unwrap();
    g.compact_after = 1000;
    let names: Vec<Vec<u8>> = (0..100).map(|i| format!("{i:032X}").into_bytes()).collect();
    run(
        &mut g,
        &announce(names.iter().map(|n| held(n)).collect()),
        now,
    );
    let entries = |offset| names.iter().map(|n| entry(n, 0, offset)).collect();
    run(&mut g, &commit_of(1, entries(1)), now);
    let mut encoded = Vec::new();
    for r in g.table().snapshot() {
        r.encode(&mut encoded).unwrap();
    }
    assert_eq!(g.table().encoded_len(), encoded.len() as u64);
    // Past 1000 bytes, under 4 times the table: no compaction.
    for s in 2..=3 {
        run(&mut g, &commit_of(s, entries(s)), now);
    }
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len > 1000 && len <= 4 * encoded.len() as u64, "{len}");
    assert_eq!(g.compactions, 0);
    // Past 4 times: one.
    for s in 4..=5 {
        run(&mut g, &commit_of(s, entries(s)), now);
    }
    assert_eq!(g.compactions, 1);
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        encoded.len() as u64
    );
}

/// Finding D: an append that fails halfway (a full disk) leaves neither a
/// torn record in the file nor a row moved in the table; the COMMIT is
/// not answered; later commits are appended after the last whole record
/// and all of them are read back at a restart.
#[test]
fn a_failed_append_is_cut_off_and_not_merged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(COMMITS_FILE);
    let now = Instant::now();
    let mut g = StoreGroups::open(STORE, Some(&path), now).unwrap();
    run(&mut g, &announce(vec![held(P)]), now);
    run(&mut g, &commit(M, 1, 10), now);
    let whole = std::fs::metadata(&path).unwrap().len();
    g.file.as_mut().unwrap().fail_next = Some(20);
    let (fate, answers) = run(&mut g, &commit(M, 2, 20), now);
    assert_eq!((fate, answers.len()), (Fate::Taken(0), 0));
    assert_eq!(g.log_errors, 1);
    assert_eq!(g.table().get(b"g", b"t", P).unwrap().offset, 10);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), whole);
    let (_, answers) = run(&mut g, &commit(M, 3, 30), now);
    assert_eq!(answers[0].4, vec![(P.to_vec(), 30)]);
    drop(g);
    let g = StoreGroups::open(STORE, Some(&path), now).unwrap();
    assert!(!g.log_damaged);
    assert_eq!(g.table().get(b"g", b"t", P).unwrap().offset, 30);
}

/// A commit past the head (a member that read a record from its producer a
/// moment before the store had it) is taken at the head at once, and at
/// what it named once the store holds that much, answered again then (a
/// synchronous commit is confirmed); one whose head does not get there
/// within PENDING_FOR stays at the head.
#[test]
fn a_commit_past_the_head_is_taken_once_the_store_holds_it() {
    let now = Instant::now();
    let mut g = StoreGroups::open(STORE, None, now).unwrap();
    let head = std::cell::Cell::new(100u64);
    let next = |_: &[u8], _: &[u8]| Some(head.get());
    let checks = Checks {
        next_offset: &next,
        sender_topics: None,
    };
    run_with(&mut g, &announce(vec![held(P)]), now, checks);
    let (_, answers) = run_with(&mut g, &commit(M, 1, 150), now, checks);
    assert_eq!(answers[0].4, vec![(P.to_vec(), 100)]);
    let settle = |g: &mut StoreGroups, at: Instant| {
        let mut frames = Vec::new();
        g.settle_pending(at, &next, &mut |m: &GroupMessage<'_>| {
            frames.push(m.encode(Dialect::Rfc).unwrap());
            Ok(())
        })
        .unwrap();
        frames.len()
    };
    head.set(120);
    assert_eq!(settle(&mut g, now), 0);
    assert!(g.has_pending());
    head.set(150);
    assert_eq!(settle(&mut g, now), 1);
    assert_eq!(g.table().get(b"g", b"t", P).unwrap().offset, 150);
    assert!(!g.has_pending());
    // Never reached in time: stays at the head.
    run_with(&mut g, &commit(M, 2, 10_000), now, checks);
    head.set(10_000);
    assert_eq!(settle(&mut g, now + PENDING_FOR), 0);
    assert!(!g.has_pending());
    assert_eq!(g.table().get(b"g", b"t", P).unwrap().offset, 150);
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
    let entries = parts.iter().map(|p| entry(p, 0, 10)).collect();
    let (_, answers) = run(&mut g, &commit_of(1, entries), now);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].3, OFFSETS_GROUP_KNOWN | OFFSETS_LAST);
    assert_eq!(answers[0].4.len(), 250);
    let (_, answers) = run(&mut g, &query(b"g"), now);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].4.len(), 250);
}
