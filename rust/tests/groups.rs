//! Consumer groups between real nodes on 127.0.0.1 (docs/groups.md):
//! members that find each other through a tower share a topic's
//! partitions, another group and a consumer without a group each read
//! every record, a member leaving cleanly hands its partitions over where
//! it stopped, a dead member's partition continues at a live member from
//! its last commit, a group whose members and store all restarted resumes
//! from the commits the store kept in `commits.log`, a store started later
//! takes the commits of another (anti-entropy) and serves them once that
//! one is gone, and forged or malformed group messages are dropped and
//! counted.

use std::collections::BTreeSet;
use std::time::Duration;

use _native::group::commits::read_log;
use _native::node::store::groups::COMMITS_FILE;
use _native::node::*;

mod common;
use common::stores::{discovering_producer, discovering_store, tower_and_node};
use common::wait_for;

const LONG: Duration = Duration::from_secs(60);

/// A member of `group` for topic `t`, from the first record when the group
/// never committed, committing every 200 ms.
fn member(node: &NodeConfig, group: &str) -> Consumer {
    member_from(node, group, OffsetReset::Earliest)
}

/// [`member`], starting partitions the group never committed by `reset`.
fn member_from(node: &NodeConfig, group: &str, reset: OffsetReset) -> Consumer {
    let cfg = ConsumerConfig {
        node: node.clone(),
        offset_reset: reset,
        group: Some(group.to_string()),
        auto_commit_interval: Some(Duration::from_millis(200)),
        ..Default::default()
    };
    Consumer::new(&["t".to_string()], cfg).unwrap()
}

/// Drains `c` until as many records as `want` came; asserts they are
/// `want` (sorted), each once.
fn expect(c: &Consumer, want: &[Vec<u8>], what: &str) {
    let mut got = Got::new();
    wait_for(what, LONG, || {
        drain(c, &mut got);
        got.len() >= want.len()
    });
    drain(c, &mut got);
    assert_eq!(values(&[&got]), want, "{what}: each once, nothing else");
}

/// A producer's first 50 records read by a member of group `g` that then
/// leaves, committing 50 to the store in `dir`; returns the producer once
/// `dir`'s commit log has it.
fn fifty_read_and_committed(node: &NodeConfig, dir: &std::path::Path) -> Producer {
    let p = discovering_producer(node);
    let first = produce(std::slice::from_ref(&p), 0, 50);
    let a = member(node, "g");
    expect(&a, &first, "the first 50 records");
    // Leaving, it commits where it stopped; the store keeps it on disk.
    a.close().unwrap();
    wait_for("the final commit in commits.log", LONG, || {
        logged(dir, p.address(), 50)
    });
    p
}

/// What a consumer was given: (partition, value).
type Got = Vec<(String, Vec<u8>)>;

fn drain(c: &Consumer, got: &mut Got) {
    for d in c.poll_many(10_000, Duration::from_millis(20)).unwrap() {
        got.push((d.partition.to_string(), d.value().to_vec()));
    }
}

fn values(got: &[&Got]) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = got
        .iter()
        .flat_map(|g| g.iter().map(|x| x.1.clone()))
        .collect();
    v.sort();
    v
}

fn partitions(got: &Got) -> BTreeSet<String> {
    got.iter().map(|x| x.0.clone()).collect()
}

fn assigned(c: &Consumer) -> BTreeSet<String> {
    c.assignment().into_iter().map(|(_, p)| p).collect()
}

/// `n` records of each producer, `i-j` for producer `i`, from `j = from`.
fn produce(producers: &[Producer], from: usize, n: usize) -> Vec<Vec<u8>> {
    let mut sent = Vec::new();
    for (i, p) in producers.iter().enumerate() {
        let batch: Vec<Vec<u8>> = (from..from + n)
            .map(|j| format!("{i}-{j}").into_bytes())
            .collect();
        sent.extend(batch.iter().cloned());
        p.send_many(batch, None).unwrap();
    }
    for p in producers {
        assert_eq!(p.flush(LONG).unwrap(), 0);
    }
    sent.sort();
    sent
}

#[test]
fn members_share_partitions_and_hand_them_over_on_a_clean_leave() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, node) = tower_and_node();
    let _store = discovering_store(dir.path(), &node);
    let (a, b) = (member(&node, "g"), member(&node, "g"));
    let other = member(&node, "h");
    let plain = Consumer::new(
        &["t".to_string()],
        ConsumerConfig {
            node: node.clone(),
            offset_reset: OffsetReset::Earliest,
            ..Default::default()
        },
    )
    .unwrap();
    wait_for("the members to count each other", LONG, || {
        a.group_members() == 2 && b.group_members() == 2 && other.group_members() == 1
    });
    let producers: Vec<Producer> = (0..12).map(|_| discovering_producer(&node)).collect();
    let all: BTreeSet<String> = producers.iter().map(|p| p.address().to_string()).collect();
    let sent = produce(&producers, 0, 10);

    let (mut ga, mut gb, mut go, mut gp) = (Got::new(), Got::new(), Got::new(), Got::new());
    wait_for(
        "every record in each group and at the plain consumer",
        LONG,
        || {
            drain(&a, &mut ga);
            drain(&b, &mut gb);
            drain(&other, &mut go);
            drain(&plain, &mut gp);
            ga.len() + gb.len() >= sent.len() && go.len() >= sent.len() && gp.len() >= sent.len()
        },
    );
    wait_for("the partitions all assigned", LONG, || {
        assigned(&a).len() + assigned(&b).len() == all.len()
    });
    // Stable membership: each record at exactly one member of the group.
    assert_eq!(values(&[&ga, &gb]), sent, "the group's union, once each");
    assert_eq!(values(&[&go]), sent, "another group reads every record");
    assert_eq!(values(&[&gp]), sent, "a consumer without a group too");
    let (pa, pb) = (assigned(&a), assigned(&b));
    assert!(pa.is_disjoint(&pb), "{pa:?} {pb:?}");
    assert_eq!(pa.union(&pb).cloned().collect::<BTreeSet<_>>(), all);
    assert!(partitions(&ga).is_subset(&pa) && partitions(&gb).is_subset(&pb));

    // B leaves cleanly after polling all it was given: A takes its
    // partitions where B stopped, and reads the new records only.
    b.close().unwrap();
    wait_for("A to hold every partition", LONG, || {
        drain(&a, &mut ga);
        assigned(&a) == all && a.group_members() == 1
    });
    let more = produce(&producers, 10, 10);
    let mut whole = sent.clone();
    whole.extend(more);
    whole.sort();
    wait_for("the new records at A", LONG, || {
        drain(&a, &mut ga);
        ga.len() + gb.len() >= whole.len()
    });
    // Anything delivered twice would have come with them.
    drain(&a, &mut ga);
    assert_eq!(values(&[&ga, &gb]), whole, "nothing lost, nothing twice");
    a.close().unwrap();
}

#[test]
fn a_restarted_group_resumes_from_the_commits_its_restarted_store_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, node) = tower_and_node();
    let store = discovering_store(dir.path(), &node);
    let p = fifty_read_and_committed(&node, dir.path());
    assert!(
        store
            .shared()
            .commits_refused
            .load(std::sync::atomic::Ordering::SeqCst)
            == 0
    );
    store.close().unwrap();
    drop(store);

    let store = discovering_store(dir.path(), &node);
    let later = produce(std::slice::from_ref(&p), 50, 30);
    let a = member(&node, "g");
    expect(&a, &later, "the records after the commit");
    a.close().unwrap();
    store.close().unwrap();
}

/// A group restarted after all its members were down resumes from its
/// commits, and a partition born while it was down (a producer that
/// started meanwhile) is read from its first record, though the members
/// start partitions the group never committed at the latest (`offset_reset`
/// only applies to a group that never committed).
#[test]
fn a_restarted_group_reads_partitions_born_while_it_was_down_from_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, node) = tower_and_node();
    let store = discovering_store(dir.path(), &node);
    let old = discovering_producer(&node);
    let a = member_from(&node, "g", OffsetReset::Latest);
    // Its first record makes the partition known; the member starts after it.
    produce(std::slice::from_ref(&old), 0, 1);
    wait_for("the member to hold the old partition", LONG, || {
        assigned(&a).contains(old.address())
    });
    let first = produce(std::slice::from_ref(&old), 1, 20);
    expect(&a, &first, "the first records");
    a.close().unwrap();
    wait_for("the final commit", LONG, || {
        logged(dir.path(), old.address(), 21)
    });

    // Down: a new producer starts and sends; the old one sends more.
    let born = Producer::new(
        "t",
        ProducerConfig {
            node: node.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    let mut later = produce(std::slice::from_ref(&old), 21, 10);
    let fresh: Vec<Vec<u8>> = (0..15).map(|j| format!("n-{j}").into_bytes()).collect();
    born.send_many(fresh.clone(), None).unwrap();
    assert_eq!(born.flush(LONG).unwrap(), 0);
    later.extend(fresh);
    later.sort();

    let b = member_from(&node, "g", OffsetReset::Latest);
    let what = "the old partition from its commit, the new from its start";
    expect(&b, &later, what);
    b.close().unwrap();
    store.close().unwrap();
}

/// The rows of commit log `dir/commits.log` of group `g`, partition `part`,
/// at `offset`.
fn logged(dir: &std::path::Path, part: &str, offset: u64) -> bool {
    let bytes = std::fs::read(dir.join(COMMITS_FILE)).unwrap_or_default();
    read_log(&bytes)
        .records
        .iter()
        .any(|r| r.group == b"g" && r.partition == part.as_bytes() && r.position.offset == offset)
}

/// Anti-entropy between stores: a commit taken while only store A ran
/// reaches store B when B starts (B asks every store for every commit);
/// with A gone, a new member of the group resumes from it through B.
#[test]
fn a_store_started_later_takes_the_commits_from_another_and_serves_them() {
    use std::sync::atomic::Ordering::SeqCst;

    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (_t, node) = tower_and_node();
    let store_a = discovering_store(dir_a.path(), &node);
    let p = fifty_read_and_committed(&node, dir_a.path());

    let store_b = discovering_store(dir_b.path(), &node);
    // The counter is published after the turn that logged the row.
    wait_for("store B to take A's commit", LONG, || {
        logged(dir_b.path(), p.address(), 50)
            && store_b.shared().commits_replicated.load(SeqCst) >= 1
    });
    assert_eq!(store_b.shared().commits_taken.load(SeqCst), 0);
    store_a.close().unwrap();
    drop(store_a);

    let later = produce(std::slice::from_ref(&p), 50, 30);
    let a = member(&node, "g");
    expect(&a, &later, "the records after the commit, through store B");
    a.close().unwrap();
    store_b.close().unwrap();
}

/// An outsider speaking raw ZeroMQ: a COMMIT in the name of no member is
/// refused and counted, a malformed group message is dropped and counted,
/// and neither stops the store taking a member's commit. The outsider
/// announcing itself as a member cannot make the group lose records
/// (review of issue 38, finding A): a partition claimed released that it
/// was never heard holding gives it no right to commit; holding it, its
/// epoch-1 and epoch-u64::MAX commits are refused, and its offset 10^12 is
/// taken at the partition's next offset in the store (nothing past what
/// the store holds is skipped).
#[test]
fn forged_and_malformed_group_messages_are_dropped_and_counted() {
    use std::sync::atomic::Ordering::SeqCst;
    use std::time::Instant;

    use _native::wire::group::{Claim, ClaimState, Commit, Entry, GroupMessage, Member};
    use _native::wire::{Dialect, Prefix, Subscription};

    let dir = tempfile::tempdir().unwrap();
    let store = common::stores::store(dir.path(), &[]);
    // The partition: a producer's, 20 records in the store.
    let p = common::stores::producer(1, &[store.endpoint()]);
    store.connect(p.endpoint()).unwrap();
    p.send_many((0..20).map(common::stores::value).collect(), None)
        .unwrap();
    assert_eq!(p.flush(LONG).unwrap(), 0);
    let ctx = zmq::Context::new();
    let xpub = ctx.socket(zmq::XPUB).unwrap();
    xpub.set_linger(0).unwrap();
    xpub.bind("tcp://127.0.0.1:0").unwrap();
    store
        .connect(&xpub.get_last_endpoint().unwrap().unwrap())
        .unwrap();
    // The store's subscription to every COMMIT reached us.
    let every_commit = Subscription {
        subscribe: true,
        prefix: Prefix::parse(b"C"),
    }
    .encode();
    xpub.set_rcvtimeo(100).unwrap();
    let deadline = Instant::now() + LONG;
    while xpub.recv_bytes(0).ok() != Some(every_commit.clone()) {
        assert!(
            Instant::now() < deadline,
            "no COMMIT subscription from the store"
        );
    }
    let me = b"9E51FBAE55A649C1A50C0B360F3FF7AE";
    let part = p.address().as_bytes();
    let commit = |sequence, epoch, offset| {
        GroupMessage::Commit(Commit {
            group: b"g",
            address: me,
            sequence,
            entries: vec![Entry {
                topic: b"t",
                partition: part,
                epoch,
                offset,
            }],
        })
        .encode(Dialect::Rfc)
        .unwrap()
    };
    let shared = store.shared();
    let refused = |n| {
        wait_for(&format!("{n} COMMITs refused"), LONG, || {
            shared.commits_refused.load(SeqCst) == n
        })
    };
    xpub.send_multipart(commit(1, 0, 10), 0).unwrap();
    refused(1);
    let malformed = shared.stats.malformed.load(SeqCst);
    assert_eq!(shared.stats.group_malformed.load(SeqCst), 0);
    xpub.send_multipart([&b"Jg"[..], &[0xAA, 0xA5, b'J', 1, 0xFF][..]], 0)
        .unwrap();
    wait_for("the malformed GROUP-MEMBER counted", LONG, || {
        shared.stats.group_malformed.load(SeqCst) == 1
    });
    assert!(shared.stats.malformed.load(SeqCst) > malformed);
    let announce = |state| {
        GroupMessage::Member(Member {
            group: b"g",
            address: me,
            flags: 0,
            timeout_ms: 60_000,
            topics: vec![b"t"],
            claims: vec![Claim {
                topic: b"t",
                partition: part,
                state,
                offset: 0,
            }],
        })
        .encode(Dialect::Rfc)
        .unwrap()
    };
    // Released, never heard held: its commit is refused.
    xpub.send_multipart(announce(ClaimState::Released), 0)
        .unwrap();
    xpub.send_multipart(commit(2, 0, 10), 0).unwrap();
    refused(2);
    // Held, then committed: taken.
    xpub.send_multipart(announce(ClaimState::Held), 0).unwrap();
    xpub.send_multipart(commit(3, 0, 11), 0).unwrap();
    wait_for("the member's COMMIT taken", LONG, || {
        shared.commits_taken.load(SeqCst) == 1
    });
    // Epochs past the row's: refused.
    xpub.send_multipart(commit(4, 1, 0), 0).unwrap();
    xpub.send_multipart(commit(5, u64::MAX, 0), 0).unwrap();
    refused(4);
    // Past the head: taken at the store's next offset, 20.
    xpub.send_multipart(commit(6, 0, 1_000_000_000_000), 0)
        .unwrap();
    wait_for("the commit capped", LONG, || {
        shared.commits_capped.load(SeqCst) == 1
    });
    assert_eq!(shared.commits_taken.load(SeqCst), 2);
    store.close().unwrap();
    drop(store);
    let log = std::fs::read(dir.path().join(COMMITS_FILE)).unwrap();
    let rows = read_log(&log).records;
    let last = rows.last().unwrap();
    assert_eq!((last.position.epoch, last.position.offset), (0, 20));
    assert!(rows.iter().all(|r| r.position.epoch == 0));
}

/// A member that dies (here a raw one that stops announcing, never
/// leaving): once its announcement is older than the timeout it gave, the
/// partition it held goes to a live member, which starts at its last
/// commit: nothing before it is delivered again, nothing after it lost.
#[test]
fn a_dead_members_partition_continues_at_a_live_member_from_its_commit() {
    use std::sync::atomic::Ordering::SeqCst;
    use std::time::Instant;

    use _native::group::assign::owner;
    use _native::wire::group::{Claim, ClaimState, Commit, Entry, GroupMessage, Member};
    use _native::wire::{Dialect, Prefix, Subscription};

    let dir = tempfile::tempdir().unwrap();
    let (_t, node) = tower_and_node();
    let store = discovering_store(dir.path(), &node);
    let p = discovering_producer(&node);
    produce(std::slice::from_ref(&p), 0, 20);
    let a = member(&node, "g");
    // A raw member that wins the producer's partition against A.
    let part = p.address().as_bytes().to_vec();
    let dead = (0u64..)
        .map(|i| format!("{i:032X}").into_bytes())
        .find(|d| owner(b"g", b"t", &part, [d.as_slice(), a.address().as_bytes()]) == Some(d))
        .unwrap();
    let ctx = zmq::Context::new();
    let xpub = ctx.socket(zmq::XPUB).unwrap();
    xpub.set_linger(0).unwrap();
    xpub.bind("tcp://127.0.0.1:0").unwrap();
    let ep = xpub.get_last_endpoint().unwrap().unwrap();
    store.connect(&ep).unwrap();
    a.connect(&ep).unwrap();
    // Both subscribed to the group's announcements (the store to every one).
    let wanted = [
        Subscription {
            subscribe: true,
            prefix: Prefix::parse(b"Jg"),
        }
        .encode(),
        Subscription {
            subscribe: true,
            prefix: Prefix::parse(b"J"),
        }
        .encode(),
    ];
    let mut seen = [false, false];
    xpub.set_rcvtimeo(100).unwrap();
    let deadline = Instant::now() + LONG;
    while seen != [true, true] {
        assert!(Instant::now() < deadline, "no J subscriptions");
        if let Ok(f) = xpub.recv_bytes(0) {
            for (s, w) in seen.iter_mut().zip(&wanted) {
                *s |= f == *w;
            }
        }
    }
    let announce = |xpub: &zmq::Socket| {
        let m = GroupMessage::Member(Member {
            group: b"g",
            address: &dead,
            flags: 0,
            timeout_ms: 1000,
            topics: vec![b"t"],
            claims: vec![Claim {
                topic: b"t",
                partition: &part,
                state: ClaimState::Held,
                offset: 7,
            }],
        });
        xpub.send_multipart(m.encode(Dialect::Rfc).unwrap(), 0)
            .unwrap();
    };
    // Alive: announcing, it commits 7; A does not touch the partition.
    announce(&xpub);
    let commit = GroupMessage::Commit(Commit {
        group: b"g",
        address: &dead,
        sequence: 1,
        entries: vec![Entry {
            topic: b"t",
            partition: &part,
            epoch: 0,
            offset: 7,
        }],
    });
    xpub.send_multipart(commit.encode(Dialect::Rfc).unwrap(), 0)
        .unwrap();
    wait_for("the store to take the commit", LONG, || {
        announce(&xpub);
        std::thread::sleep(Duration::from_millis(50));
        store.shared().commits_taken.load(SeqCst) == 1
    });
    let mut got = Got::new();
    for _ in 0..20 {
        announce(&xpub);
        drain(&a, &mut got);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(a.group_members(), 2);
    assert!(got.is_empty() && a.assignment().is_empty(), "{got:?}");
    // Dead: silent. A takes the partition at the commit.
    wait_for("A to deliver from the commit", LONG, || {
        drain(&a, &mut got);
        got.len() >= 13
    });
    drain(&a, &mut got);
    let want: Vec<Vec<u8>> = {
        let mut v: Vec<Vec<u8>> = (7..20).map(|j| format!("0-{j}").into_bytes()).collect();
        v.sort();
        v
    };
    assert_eq!(values(&[&got]), want, "from the commit on, once each");
    assert_eq!(a.group_members(), 1);
    a.close().unwrap();
}
