use super::*;
use crate::wire::group::{Claim, Entry};

const A: &[u8] = b"A0000000000000000000000000000000";
const B: &[u8] = b"B0000000000000000000000000000000";

fn p(i: u8) -> Part {
    (b"orders".to_vec(), vec![b'P', b'0' + i])
}

fn member<'a>(address: &'a [u8], claims: Vec<Claim<'a>>, flags: u8) -> Member<'a> {
    Member {
        group: b"billing",
        address,
        flags,
        timeout_ms: 4000,
        topics: vec![b"orders"],
        claims,
    }
}

fn claim(part: &Part, state: ClaimState, offset: u64) -> Claim<'_> {
    Claim {
        topic: &part.0,
        partition: &part.1,
        state,
        offset,
    }
}

fn commit<'a>(address: &'a [u8], parts: &'a [Part], offset: u64) -> Commit<'a> {
    Commit {
        group: b"billing",
        address,
        sequence: 1,
        entries: parts
            .iter()
            .map(|q| Entry {
                topic: &q.0,
                partition: &q.1,
                epoch: 0,
                offset,
            })
            .collect(),
    }
}

#[test]
fn a_commit_is_taken_only_from_a_live_member_claiming_its_partitions() {
    let mut r = Registry::new();
    let (p0, p1, p2) = (p(0), p(1), p(2));
    let both = [p0.clone(), p1.clone()];
    // Nobody announced: an outsider's commit is refused.
    assert_eq!(
        r.check_commit(0, &commit(A, &both, 5)),
        Err(CommitRefused::NotAMember)
    );
    r.announcement(
        900,
        &member(
            A,
            vec![
                claim(&p0, ClaimState::Held, 0),
                claim(&p1, ClaimState::Held, 0),
            ],
            0,
        ),
    )
    .unwrap();
    r.announcement(
        1000,
        &member(
            A,
            vec![
                claim(&p0, ClaimState::Held, 0),
                claim(&p1, ClaimState::Released, 9),
            ],
            0,
        ),
    )
    .unwrap();
    // Held, and released after it was heard held, both count (a giver's
    // final commit may come after its release was heard).
    assert_eq!(r.check_commit(1000, &commit(A, &both, 5)), Ok(()));
    assert_eq!(
        r.check_commit(1000, &commit(A, &[p0.clone(), p2.clone()], 5)),
        Err(CommitRefused::NotClaimed)
    );
    // Another address, another group: refused.
    assert_eq!(
        r.check_commit(1000, &commit(B, &both, 5)),
        Err(CommitRefused::NotAMember)
    );
    let mut other = commit(A, &both, 5);
    other.group = b"audit";
    assert_eq!(r.check_commit(1000, &other), Err(CommitRefused::NotAMember));
    // Silent past its timeout: refused, then forgotten.
    assert_eq!(
        r.check_commit(5000, &commit(A, &both, 5)),
        Err(CommitRefused::NotAMember)
    );
    assert_eq!(r.groups(), vec![&b"billing"[..]]);
    r.expire(5000);
    assert_eq!(r.groups(), Vec::<&[u8]>::new());
}

#[test]
fn a_leaving_member_is_gone_at_once() {
    let mut r = Registry::new();
    let p0 = p(0);
    r.announcement(0, &member(A, vec![claim(&p0, ClaimState::Held, 0)], 0))
        .unwrap();
    r.announcement(
        10,
        &member(A, vec![claim(&p0, ClaimState::Released, 3)], MEMBER_LEAVING),
    )
    .unwrap();
    assert_eq!(r.groups(), Vec::<&[u8]>::new());
    assert_eq!(
        r.check_commit(10, &commit(A, std::slice::from_ref(&p0), 3)),
        Err(CommitRefused::NotAMember)
    );
}

#[test]
fn records_of_a_commit_are_stamped_with_the_store_time() {
    let parts = [p(0), p(1)];
    let recs = Registry::records(&commit(A, &parts, 42), 1_700_000_000_000);
    assert_eq!(recs.len(), 2);
    for (rec, part) in recs.iter().zip(&parts) {
        assert_eq!(rec.group, b"billing");
        assert_eq!((&rec.topic, &rec.partition), (&part.0, &part.1));
        assert_eq!(rec.position.offset, 42);
        assert_eq!(rec.position.time_ms, 1_700_000_000_000);
    }
}

/// A description row: partition, owner, commit, next offset, lag.
type Row<'a> = (
    Part,
    Option<&'a [u8]>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
);

#[test]
fn describe_shows_members_owners_commits_and_lag() {
    let mut r = Registry::new();
    let (p0, p1, p2, p3) = (p(0), p(1), p(2), p(3));
    r.announcement(0, &member(A, vec![claim(&p0, ClaimState::Held, 100)], 0))
        .unwrap();
    r.announcement(
        0,
        &member(
            B,
            vec![
                claim(&p1, ClaimState::Held, 50),
                claim(&p2, ClaimState::Released, 7),
            ],
            0,
        ),
    )
    .unwrap();
    let mut t = CommitTable::new();
    for rec in Registry::records(&commit(A, std::slice::from_ref(&p0), 100), 1) {
        t.merge(&rec);
    }
    for rec in Registry::records(&commit(B, &[p1.clone(), p2.clone()], 60), 1) {
        t.merge(&rec);
    }
    let mut heads = BTreeMap::new();
    heads.insert(p0.clone(), 150);
    heads.insert(p1.clone(), 55);
    heads.insert(p3.clone(), 10);
    // A head of a topic the group does not read is not shown.
    heads.insert((b"payments".to_vec(), b"X".to_vec()), 99);
    let d = r.describe(b"billing", &t, &heads);
    assert_eq!(d.group, b"billing");
    assert_eq!(d.members.len(), 2);
    assert_eq!(d.members[0].address, A);
    assert_eq!(d.members[0].partitions, vec![p0.clone()]);
    assert_eq!(d.members[1].partitions, vec![p1.clone()]);
    let rows: Vec<Row<'_>> = d
        .partitions
        .iter()
        .map(|row| {
            (
                (row.topic.clone(), row.partition.clone()),
                row.owner.as_deref(),
                row.committed,
                row.next,
                row.lag,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (p0, Some(A), Some(100), Some(150), Some(50)),
            // The store is behind the producer: no negative lag.
            (p1, Some(B), Some(60), Some(55), Some(0)),
            // Released, nobody holds it yet; no head known.
            (p2, None, Some(60), None, None),
            // Never committed: all of it behind.
            (p3, None, None, Some(10), Some(10)),
        ]
    );
    assert_eq!(d.total_lag, 60);
    // A group nobody announces and nobody committed: empty.
    let e = r.describe(b"audit", &t, &heads);
    assert!(e.members.is_empty() && e.partitions.is_empty());
    assert_eq!(e.total_lag, 0);
}

/// A partition claimed released by a member never heard holding it (an
/// outsider's forged "released" under its own address) gives no right to
/// commit it; one heard held, then released, does.
#[test]
fn only_a_partition_heard_held_may_be_committed() {
    let mut r = Registry::new();
    let p0 = p(0);
    let one = std::slice::from_ref(&p0);
    r.announcement(0, &member(A, vec![claim(&p0, ClaimState::Released, 0)], 0))
        .unwrap();
    assert_eq!(
        r.check_commit(0, &commit(A, one, 5)),
        Err(CommitRefused::NotClaimed)
    );
    r.announcement(1, &member(A, vec![claim(&p0, ClaimState::Held, 0)], 0))
        .unwrap();
    r.announcement(2, &member(A, vec![claim(&p0, ClaimState::Released, 4)], 0))
        .unwrap();
    assert_eq!(r.check_commit(2, &commit(A, one, 5)), Ok(()));
    // No longer claimed at all: refused again.
    r.announcement(3, &member(A, vec![], 0)).unwrap();
    assert_eq!(
        r.check_commit(3, &commit(A, one, 5)),
        Err(CommitRefused::NotClaimed)
    );
}

/// A timeout of 49.7 days counts as at most a minute.
#[test]
fn an_announced_timeout_is_capped() {
    let mut r = Registry::new();
    let mut m = member(A, vec![], 0);
    m.timeout_ms = u32::MAX;
    r.announcement(0, &m).unwrap();
    r.expire(u64::from(crate::group::MAX_TIMEOUT_MS) - 1);
    assert_eq!(r.members(), 1);
    r.expire(u64::from(crate::group::MAX_TIMEOUT_MS));
    assert_eq!(r.members(), 0);
}

/// Members per group, groups per peer and claims per member are capped;
/// a member already known is still heard, and the room comes back as
/// members leave or expire.
#[test]
fn the_registry_is_bounded() {
    let mut r = Registry::new();
    let addr = |peer: usize, i: usize| format!("{peer:016X}{i:016X}").into_bytes();
    let group = |i: usize| format!("g{i}").into_bytes();
    // One peer in MAX_GROUPS_PER_PEER groups, then no more.
    let names: Vec<Vec<u8>> = (0..=MAX_GROUPS_PER_PEER).map(group).collect();
    let addrs: Vec<Vec<u8>> = (0..=MAX_GROUPS_PER_PEER).map(|i| addr(7, i)).collect();
    for (i, (g, a)) in names.iter().zip(&addrs).enumerate() {
        let mut m = member(a, vec![], 0);
        m.group = g;
        let want = if i < MAX_GROUPS_PER_PEER {
            Ok(())
        } else {
            Err(AnnounceRefused::Groups)
        };
        assert_eq!(r.announcement(0, &m), want, "membership {i}");
    }
    // A known member's heartbeat is still taken.
    let mut m = member(&addrs[0], vec![], 0);
    m.group = &names[0];
    assert_eq!(r.announcement(1, &m), Ok(()));
    // Leaving frees a place.
    m.flags = MEMBER_LEAVING;
    r.announcement(2, &m).unwrap();
    let mut m = member(&addrs[MAX_GROUPS_PER_PEER], vec![], 0);
    m.group = &names[MAX_GROUPS_PER_PEER];
    assert_eq!(r.announcement(3, &m), Ok(()));
    // Expiry frees every place.
    r.expire(10_000);
    assert_eq!((r.members(), r.memberships.len()), (0, 0));

    // Members per group.
    let many: Vec<Vec<u8>> = (0..=MAX_MEMBERS_PER_GROUP).map(|i| addr(i, 0)).collect();
    for (i, a) in many.iter().enumerate() {
        let want = if i < MAX_MEMBERS_PER_GROUP {
            Ok(())
        } else {
            Err(AnnounceRefused::Members)
        };
        assert_eq!(r.announcement(0, &member(a, vec![], 0)), want, "member {i}");
    }
    assert_eq!(r.members(), MAX_MEMBERS_PER_GROUP);

    // Claims per member.
    let parts: Vec<Part> = (0..=MAX_CLAIMS_PER_MEMBER)
        .map(|i| (b"orders".to_vec(), format!("{i:08X}").into_bytes()))
        .collect();
    let claims: Vec<Claim<'_>> = parts
        .iter()
        .map(|q| claim(q, ClaimState::Held, 0))
        .collect();
    assert_eq!(
        r.announcement(0, &member(&many[0], claims, 0)),
        Err(AnnounceRefused::Claims)
    );
}
