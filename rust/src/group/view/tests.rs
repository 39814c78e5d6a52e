//! A member's view alone; then, in `sim`, several views exchanging their
//! announcements (encoded and decoded by the group codec) over a simulated
//! bus, with a simulated store: the hand-over rules checked step by step.

use super::*;

mod sim;

const TIMING: Timing = Timing {
    timeout_ms: 4000,
    settle_ms: 1500,
};

fn addr(i: usize) -> Vec<u8> {
    format!("{:032X}", 0xA000_0000u64 + i as u64).into_bytes()
}

fn part(i: usize) -> Part {
    (
        b"orders".to_vec(),
        format!("{:032X}", 0xB000_0000u64 + i as u64).into_bytes(),
    )
}

fn view(i: usize, now: u64) -> View {
    View::new(b"billing", &addr(i), &[b"orders"], TIMING, now)
}

/// A peer's announcement, built by hand.
fn announcement<'a>(address: &'a [u8], claims: Vec<Claim<'a>>, flags: u8) -> Member<'a> {
    Member {
        group: b"billing",
        address,
        flags,
        timeout_ms: 4000,
        topics: vec![b"orders"],
        claims,
    }
}

fn held(p: &Part, offset: u64) -> Claim<'_> {
    Claim {
        topic: &p.0,
        partition: &p.1,
        state: ClaimState::Held,
        offset,
    }
}

fn released(p: &Part, offset: u64) -> Claim<'_> {
    Claim {
        topic: &p.0,
        partition: &p.1,
        state: ClaimState::Released,
        offset,
    }
}

const NONE: LookupResult = LookupResult {
    committed: None,
    group_known: false,
};

#[test]
fn nothing_starts_before_the_member_settled() {
    let mut v = view(0, 1000);
    v.partition_seen(&part(0).0, &part(0).1);
    assert_eq!(v.decide(1000), vec![]);
    assert_eq!(v.decide(2499), vec![]);
    assert_eq!(v.decide(2500), vec![Decision::Lookup(part(0))]);
    // Asked once; the answer starts it.
    assert_eq!(v.decide(2600), vec![]);
    v.looked_up(&part(0), NONE);
    assert_eq!(
        v.decide(2700),
        vec![Decision::Start(part(0), StartAt::Reset)]
    );
    assert_eq!(v.assignment(), vec![(&part(0), 0)]);
    assert_eq!(v.decide(2800), vec![]);
}

#[test]
fn where_a_partition_starts() {
    let cases = [
        (NONE, None, StartAt::Reset),
        (
            LookupResult {
                committed: None,
                group_known: true,
            },
            None,
            StartAt::Earliest,
        ),
        (
            LookupResult {
                committed: Some(40),
                group_known: true,
            },
            None,
            StartAt::Offset(40),
        ),
        (
            LookupResult {
                committed: Some(40),
                group_known: true,
            },
            Some(55),
            StartAt::Offset(55),
        ),
        (
            LookupResult {
                committed: Some(70),
                group_known: true,
            },
            Some(55),
            StartAt::Offset(70),
        ),
        (NONE, Some(55), StartAt::Offset(55)),
    ];
    for (result, release, want) in cases {
        let mut v = view(0, 0);
        let p = part(0);
        v.partition_seen(&p.0, &p.1);
        if let Some(off) = release {
            // A peer seen holding it, then releasing it at `off`, then
            // leaving: the partition is ours, from `off` at least.
            let other = addr(1);
            v.announcement(0, &announcement(&other, vec![held(&p, 10)], 0))
                .unwrap();
            v.announcement(
                1,
                &announcement(&other, vec![released(&p, off)], MEMBER_LEAVING),
            )
            .unwrap();
        }
        assert_eq!(v.decide(2000), vec![Decision::Lookup(p.clone())]);
        v.looked_up(&p, result);
        assert_eq!(v.decide(2001), vec![Decision::Start(p, want)]);
    }
}

#[test]
fn announcements_of_other_groups_and_of_itself_are_refused() {
    let mut v = view(0, 0);
    let me = addr(0);
    let mut m = announcement(&me, vec![], 0);
    assert_eq!(v.announcement(0, &m), Err(Refused::OwnAddress));
    let other = addr(1);
    m.address = &other;
    m.group = b"audit";
    assert_eq!(v.announcement(0, &m), Err(Refused::OtherGroup));
    assert_eq!(v.members(), vec![me.as_slice()]);
}

/// A member of the group announcing other topics than this member's (in a
/// secure cluster: a certificate covering only `orders` joining group
/// `billing` of `orders` and `payments`) is not counted: it is given no
/// partition, and its claims hold back none; the same topics in another
/// order are the same set.
#[test]
fn a_member_announcing_other_topics_is_not_counted() {
    let mut v = View::new(b"billing", &addr(0), &[b"orders", b"payments"], TIMING, 0);
    let intruder = addr(1);
    let p = part(0);
    v.partition_seen(&p.0, &p.1);
    let m = announcement(&intruder, vec![held(&p, 1_000_000)], 0);
    assert_eq!(v.announcement(0, &m), Err(Refused::OtherTopics));
    assert_eq!(v.members(), vec![addr(0).as_slice()]);
    // Its claim does not hold the partition back.
    assert_eq!(v.decide(2000), vec![Decision::Lookup(p.clone())]);
    let mut same = announcement(&intruder, vec![], 0);
    same.topics = vec![&b"payments"[..], &b"orders"[..]];
    assert_eq!(v.announcement(0, &same), Ok(()));
}

/// A timeout announced as 49.7 days keeps a member live a minute at most.
#[test]
fn an_announced_timeout_is_capped_at_a_minute() {
    let mut v = view(0, 0);
    let other = addr(1);
    let mut m = announcement(&other, vec![], 0);
    m.timeout_ms = u32::MAX;
    v.announcement(0, &m).unwrap();
    v.decide(1);
    assert_eq!(v.members().len(), 2);
    v.decide(u64::from(crate::group::MAX_TIMEOUT_MS) + 1);
    assert_eq!(v.members(), vec![addr(0).as_slice()]);
}

#[test]
fn a_partition_of_another_topic_is_not_taken() {
    let mut v = view(0, 0);
    v.partition_seen(b"payments", b"P");
    assert_eq!(v.decide(5000), vec![]);
}

/// Two members, partitions of which `b` wins some: returns the view of
/// `a`, the address of `b` and the partitions `b` wins with both live.
fn two() -> (View, Vec<u8>, Vec<Part>) {
    let mut a = view(0, 0);
    let b = addr(1);
    let parts: Vec<Part> = (0..16).map(part).collect();
    for p in &parts {
        a.partition_seen(&p.0, &p.1);
    }
    let members = [
        assign::Member {
            address: &addr(0),
            topics: &[b"orders".to_vec()],
        },
        assign::Member {
            address: &b,
            topics: &[b"orders".to_vec()],
        },
    ];
    let got = assign::assign(b"billing", &members, &parts);
    let of_b: Vec<Part> = parts
        .iter()
        .filter(|p| got[*p] == b.as_slice())
        .cloned()
        .collect();
    assert!(!of_b.is_empty() && of_b.len() < parts.len());
    (a, b, of_b)
}

fn start_all(v: &mut View, now: u64) {
    let ds = v.decide(now);
    for d in &ds {
        if let Decision::Lookup(p) = d {
            v.looked_up(p, NONE);
        }
    }
    v.decide(now);
}

#[test]
fn a_giver_stops_and_announces_where_it_stopped() {
    let (mut a, b, of_b) = two();
    start_all(&mut a, 2000);
    assert_eq!(a.assignment().len(), 16);
    // b joins: a must stop b's partitions, and still claims them until the
    // node says where it stopped.
    a.announcement(2100, &announcement(&b, vec![], 0)).unwrap();
    let ds = a.decide(2100);
    let stops: Vec<Decision> = of_b.iter().map(|p| Decision::Stop(p.clone())).collect();
    assert_eq!(ds, stops);
    assert_eq!(a.assignment().len(), 16 - of_b.len());
    let held_now = a
        .announce()
        .claims
        .iter()
        .filter(|c| c.state == ClaimState::Held)
        .count();
    assert_eq!(held_now, 16);
    for (i, p) in of_b.iter().enumerate() {
        a.committed(p, 100 + i as u64);
        a.stopped(p, 100 + i as u64, 2200);
    }
    let ann = a.announce();
    let rel: Vec<(Vec<u8>, u64)> = ann
        .claims
        .iter()
        .filter(|c| c.state == ClaimState::Released)
        .map(|c| (c.partition.to_vec(), c.offset))
        .collect();
    let want: Vec<(Vec<u8>, u64)> = of_b
        .iter()
        .enumerate()
        .map(|(i, p)| (p.1.clone(), 100 + i as u64))
        .collect();
    assert_eq!(rel, want);
    // Once b holds the first, a stops saying it released it; the rest are
    // dropped after the timeout.
    let b_holds = vec![held(&of_b[0], 100)];
    a.announcement(2300, &announcement(&b, b_holds, 0)).unwrap();
    assert_eq!(
        a.announce()
            .claims
            .iter()
            .filter(|c| c.state == ClaimState::Released)
            .count(),
        of_b.len() - 1
    );
    // b stays live (announcing), and the releases expire.
    a.announcement(6000, &announcement(&b, vec![held(&of_b[0], 100)], 0))
        .unwrap();
    a.decide(6200);
    assert!(a
        .announce()
        .claims
        .iter()
        .all(|c| c.state == ClaimState::Held));
    // A second `stopped` for a partition not stopping changes nothing.
    a.stopped(&of_b[0], 5, 6300);
    assert!(a
        .announce()
        .claims
        .iter()
        .all(|c| c.state == ClaimState::Held));
}

#[test]
fn a_taker_waits_while_anyone_claims_the_partition() {
    let (mut a, b, of_b) = two();
    // b holds everything (it was alone before a joined).
    let everything: Vec<Part> = (0..16).map(part).collect();
    let claims: Vec<Claim<'_>> = everything.iter().map(|p| held(p, 5)).collect();
    a.announcement(100, &announcement(&b, claims, 0)).unwrap();
    assert_eq!(a.decide(2000), vec![], "all claimed by b");
    // b releases what it lost (the others, a's now): a looks them up.
    let mut claims: Vec<Claim<'_>> = Vec::new();
    for p in &everything {
        claims.push(if of_b.contains(p) {
            held(p, 5)
        } else {
            released(p, 77)
        });
    }
    a.announcement(2100, &announcement(&b, claims, 0)).unwrap();
    let ds = a.decide(2100);
    assert_eq!(ds.len(), 16 - of_b.len());
    for d in ds {
        let Decision::Lookup(p) = d else {
            panic!("{d:?}")
        };
        a.looked_up(
            &p,
            LookupResult {
                committed: Some(60),
                group_known: true,
            },
        );
    }
    for d in a.decide(2200) {
        assert!(
            matches!(d, Decision::Start(_, StartAt::Offset(77))),
            "{d:?}"
        );
    }
}

#[test]
fn a_lookup_is_dropped_when_someone_claims_the_partition_meanwhile() {
    let mut a = view(0, 0);
    let p = part(0);
    a.partition_seen(&p.0, &p.1);
    assert_eq!(a.decide(2000), vec![Decision::Lookup(p.clone())]);
    // A member a had not heard of claims it: b's view did not have a.
    let b = addr(1);
    a.announcement(2050, &announcement(&b, vec![held(&p, 3)], 0))
        .unwrap();
    a.looked_up(&p, NONE);
    let ds = a.decide(2100);
    assert!(
        !ds.iter().any(|d| matches!(d, Decision::Start(..))),
        "{ds:?}"
    );
}

#[test]
fn a_release_from_a_member_never_seen_holding_is_not_trusted() {
    let mut a = view(0, 0);
    let p = part(0);
    a.partition_seen(&p.0, &p.1);
    let forger = addr(9);
    a.announcement(10, &announcement(&forger, vec![], 0))
        .unwrap();
    a.announcement(20, &announcement(&forger, vec![released(&p, u64::MAX)], 0))
        .unwrap();
    a.announcement(
        30,
        &announcement(&forger, vec![released(&p, u64::MAX)], MEMBER_LEAVING),
    )
    .unwrap();
    assert_eq!(a.decide(2000), vec![Decision::Lookup(p.clone())]);
    a.looked_up(
        &p,
        LookupResult {
            committed: Some(12),
            group_known: true,
        },
    );
    assert_eq!(
        a.decide(2001),
        vec![Decision::Start(p, StartAt::Offset(12))]
    );
}

#[test]
fn a_silent_member_expires_after_its_timeout_and_a_leaving_one_at_once() {
    let mut a = view(0, 0);
    let (b, c) = (addr(1), addr(2));
    a.announcement(1000, &announcement(&b, vec![], 0)).unwrap();
    a.announcement(1000, &announcement(&c, vec![], 0)).unwrap();
    a.decide(4998);
    assert_eq!(a.members().len(), 3);
    // c leaves: gone at once; b, silent since 1000, is live until 5000.
    a.announcement(4999, &announcement(&c, vec![], MEMBER_LEAVING))
        .unwrap();
    a.decide(4999);
    assert_eq!(a.members(), vec![addr(0).as_slice(), b.as_slice()]);
    a.decide(5000);
    assert_eq!(a.members(), vec![addr(0).as_slice()]);
}

#[test]
fn leaving_stops_everything_then_says_so() {
    let mut a = view(0, 0);
    for i in 0..4 {
        a.partition_seen(&part(i).0, &part(i).1);
    }
    start_all(&mut a, 2000);
    a.leave();
    assert!(!a.left());
    let ds = a.decide(2100);
    assert_eq!(ds.len(), 4);
    assert_eq!(a.announce().flags, 0, "still holding until stopped");
    for (i, d) in ds.iter().enumerate() {
        let Decision::Stop(p) = d else {
            panic!("{d:?}")
        };
        a.stopped(p, 10 + i as u64, 2150);
    }
    assert!(a.left());
    let ann = a.announce();
    assert_eq!(ann.flags, MEMBER_LEAVING);
    assert_eq!(ann.claims.len(), 4);
    assert!(ann.claims.iter().all(|c| c.state == ClaimState::Released));
    assert_eq!(a.members(), Vec::<&[u8]>::new());
    assert_eq!(a.decide(9000), vec![]);
}
