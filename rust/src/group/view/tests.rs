//! A member's view alone, then several views exchanging their
//! announcements (encoded and decoded by the group codec) over a simulated
//! bus, with a simulated store: the hand-over rules checked step by step.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::*;
use crate::group::commits::{CommitRecord, CommitTable, Position};
use crate::group::wire::{decode, GroupMessage};
use crate::wire::Dialect;

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

// ------------------------------------------------------------ simulation

struct Node {
    view: View,
    delivering: BTreeMap<Part, u64>,
    lookups: Vec<Part>,
}

/// Members, a bus carrying encoded announcements with a delay, a store's
/// commit table, producers whose partitions grow, and every delivery.
struct Sim {
    now: u64,
    nodes: BTreeMap<usize, Node>,
    bus: VecDeque<(u64, usize, Vec<Vec<u8>>)>,
    delay: u64,
    store: CommitTable,
    heads: BTreeMap<Part, u64>,
    producing: bool,
    delivered: BTreeMap<Part, Vec<(usize, u64)>>,
    /// Each killed member's commit per partition at its death.
    killed_commits: Vec<BTreeMap<Part, u64>>,
    step: u64,
}

impl Sim {
    fn new(parts: usize, delay: u64) -> Sim {
        Sim {
            now: 0,
            nodes: BTreeMap::new(),
            bus: VecDeque::new(),
            delay,
            store: CommitTable::new(),
            heads: (0..parts).map(|i| (part(i), 0)).collect(),
            producing: true,
            delivered: BTreeMap::new(),
            killed_commits: Vec::new(),
            step: 0,
        }
    }

    fn join(&mut self, i: usize) {
        let mut v = view(i, self.now);
        for p in self.heads.keys() {
            v.partition_seen(&p.0, &p.1);
        }
        self.nodes.insert(
            i,
            Node {
                view: v,
                delivering: BTreeMap::new(),
                lookups: Vec::new(),
            },
        );
        self.broadcast(i);
    }

    fn broadcast(&mut self, from: usize) {
        let frames = GroupMessage::Member(self.nodes[&from].view.announce())
            .encode(Dialect::Zproto)
            .unwrap();
        for &to in self.nodes.keys() {
            if to != from {
                self.bus
                    .push_back((self.now + self.delay, to, frames.clone()));
            }
        }
    }

    fn commit(&mut self, i: usize, p: &Part, offset: u64) {
        self.store.merge(&CommitRecord {
            group: b"billing".to_vec(),
            topic: p.0.clone(),
            partition: p.1.clone(),
            position: Position {
                epoch: 0,
                offset,
                time_ms: self.now,
            },
        });
        self.nodes.get_mut(&i).unwrap().view.committed(p, offset);
    }

    fn kill(&mut self, i: usize) {
        let node = self.nodes.remove(&i).unwrap();
        let commits = node
            .delivering
            .keys()
            .map(|p| {
                (
                    p.clone(),
                    self.store
                        .get(b"billing", &p.0, &p.1)
                        .map_or(0, |c| c.offset),
                )
            })
            .collect();
        self.killed_commits.push(commits);
        self.bus.retain(|(_, to, _)| *to != i);
    }

    /// A clean leave: stop, commit, announce the leave, go.
    fn leave(&mut self, i: usize) {
        self.nodes.get_mut(&i).unwrap().view.leave();
        self.tick_node(i);
        assert!(self.nodes[&i].view.left());
        self.broadcast(i);
        self.nodes.remove(&i);
    }

    fn tick_node(&mut self, i: usize) {
        let now = self.now;
        let node = self.nodes.get_mut(&i).unwrap();
        // Lookups asked at the last step are answered now.
        for p in std::mem::take(&mut node.lookups) {
            let r = LookupResult {
                committed: self.store.get(b"billing", &p.0, &p.1).map(|c| c.offset),
                group_known: self.store.group_known(b"billing"),
            };
            node.view.looked_up(&p, r);
        }
        let ds = node.view.decide(now);
        let changed = !ds.is_empty();
        let mut finals = Vec::new();
        for d in ds {
            match d {
                Decision::Stop(p) => {
                    let next = node.delivering.remove(&p).unwrap();
                    finals.push((p, next));
                }
                Decision::Lookup(p) => node.lookups.push(p),
                Decision::Start(p, at) => {
                    let from = match at {
                        StartAt::Offset(o) => o,
                        StartAt::Reset | StartAt::Earliest => 0,
                    };
                    assert!(node.delivering.insert(p, from).is_none());
                }
            }
        }
        for (p, next) in finals {
            self.commit(i, &p, next);
            self.nodes.get_mut(&i).unwrap().view.stopped(&p, next, now);
        }
        if changed {
            self.broadcast(i);
        }
    }

    fn step(&mut self) {
        self.now += 100;
        self.step += 1;
        if self.producing {
            for h in self.heads.values_mut() {
                *h += 2;
            }
        }
        // Deliver the bus.
        while let Some((at, _, _)) = self.bus.front() {
            if *at > self.now {
                break;
            }
            let (_, to, frames) = self.bus.pop_front().unwrap();
            if let Some(node) = self.nodes.get_mut(&to) {
                let (GroupMessage::Member(m), _) = decode(&frames).unwrap() else {
                    unreachable!()
                };
                node.view.announcement(self.now, &m).unwrap();
            }
        }
        let ids: Vec<usize> = self.nodes.keys().copied().collect();
        for &i in &ids {
            self.tick_node(i);
            if self.now % 1000 == 0 {
                self.broadcast(i);
            }
        }
        // Deliver up to 3 records per partition, commit every 500 ms.
        for &i in &ids {
            let node = self.nodes.get_mut(&i).unwrap();
            for (p, next) in node.delivering.iter_mut() {
                let end = (*next + 3).min(self.heads[p]);
                for o in *next..end {
                    self.delivered.entry(p.clone()).or_default().push((i, o));
                }
                *next = end;
            }
            if self.now % 500 == 0 {
                let list: Vec<(Part, u64)> = node
                    .delivering
                    .iter()
                    .map(|(p, n)| (p.clone(), *n))
                    .collect();
                for (p, n) in list {
                    self.commit(i, &p, n);
                }
            }
        }
        self.check_one_owner();
    }

    fn check_one_owner(&self) {
        let mut owners: BTreeMap<&Part, usize> = BTreeMap::new();
        for n in self.nodes.values() {
            for p in n.delivering.keys() {
                *owners.entry(p).or_default() += 1;
            }
        }
        for (p, n) in owners {
            assert!(n <= 1, "step {}: {n} members deliver {p:?}", self.step);
        }
    }

    fn run(&mut self, steps: usize) {
        for _ in 0..steps {
            self.step();
        }
    }

    /// Stop producing and let everything be delivered.
    fn drain(&mut self) {
        self.producing = false;
        self.run(300);
    }

    /// Every record delivered at least once; returns the duplicates.
    fn check_all_delivered(&self) -> BTreeMap<Part, Vec<u64>> {
        let mut dups = BTreeMap::new();
        for (p, head) in &self.heads {
            let mut seen = BTreeSet::new();
            for (_, o) in self.delivered.get(p).into_iter().flatten() {
                if !seen.insert(*o) {
                    dups.entry(p.clone()).or_insert_with(Vec::new).push(*o);
                }
            }
            let want: BTreeSet<u64> = (0..*head).collect();
            assert_eq!(seen, want, "{p:?}: lost records");
        }
        dups
    }

    fn owners(&self) -> BTreeMap<Part, usize> {
        let mut v = BTreeMap::new();
        for (i, n) in &self.nodes {
            for p in n.delivering.keys() {
                v.insert(p.clone(), *i);
            }
        }
        v
    }
}

#[test]
fn three_stable_members_share_twelve_partitions_exactly_once() {
    for delay in [0, 100, 300] {
        let mut s = Sim::new(12, delay);
        for i in 0..3 {
            s.join(i);
        }
        s.run(100);
        let owners = s.owners();
        assert_eq!(owners.len(), 12);
        assert_eq!(owners.values().collect::<BTreeSet<_>>().len(), 3);
        s.drain();
        assert_eq!(s.check_all_delivered(), BTreeMap::new(), "delay {delay}");
    }
}

#[test]
fn members_joining_one_by_one_hand_over_without_duplicates() {
    for delay in [0, 200] {
        let mut s = Sim::new(12, delay);
        s.join(0);
        s.run(30);
        assert_eq!(s.owners().len(), 12);
        s.join(1);
        s.run(40);
        s.join(2);
        s.run(40);
        assert_eq!(s.owners().values().collect::<BTreeSet<_>>().len(), 3);
        s.drain();
        assert_eq!(s.check_all_delivered(), BTreeMap::new(), "delay {delay}");
    }
}

#[test]
fn a_clean_leave_moves_partitions_without_duplicates_or_interruption() {
    let mut s = Sim::new(12, 100);
    for i in 0..3 {
        s.join(i);
    }
    s.run(60);
    let before = s.owners();
    s.leave(1);
    s.run(40);
    let after = s.owners();
    assert_eq!(after.len(), 12);
    for (p, o) in &before {
        if *o != 1 {
            assert_eq!(after[p], *o, "a partition that did not move moved");
        }
    }
    s.drain();
    assert_eq!(s.check_all_delivered(), BTreeMap::new());
}

#[test]
fn a_killed_members_partitions_continue_from_its_commits_within_the_bound() {
    let mut s = Sim::new(12, 100);
    for i in 0..3 {
        s.join(i);
    }
    s.run(63);
    let before = s.owners();
    let victims: Vec<Part> = before
        .iter()
        .filter(|(_, o)| **o == 2)
        .map(|(p, _)| p.clone())
        .collect();
    assert!(!victims.is_empty());
    let killed_at = s.now;
    s.kill(2);
    // Within timeout + settle-free lookup (two steps) + one heartbeat of
    // slack, every partition of the dead member has a new owner.
    let mut moved_at = None;
    for _ in 0..100 {
        s.step();
        let o = s.owners();
        if victims.iter().all(|p| o.contains_key(p)) {
            moved_at = Some(s.now);
            break;
        }
    }
    let moved_at = moved_at.expect("the dead member's partitions never moved");
    let bound = u64::from(TIMING.timeout_ms) + 1000 + 3 * 100;
    assert!(moved_at - killed_at <= bound, "{} ms", moved_at - killed_at);
    assert!(moved_at - killed_at >= u64::from(TIMING.timeout_ms) - 1000);
    // Partitions that were not the victim's were not interrupted.
    let after = s.owners();
    for (p, o) in &before {
        if *o != 2 {
            assert_eq!(after[p], *o);
        }
    }
    s.drain();
    let dups = s.check_all_delivered();
    // Duplicates only after the dead member's last commit, only its
    // partitions, and each at most twice.
    let commits = &s.killed_commits[0];
    for (p, offs) in &dups {
        let c = commits[p];
        assert!(offs.iter().all(|o| *o >= c), "{p:?}: {offs:?} before {c}");
        let uniq: BTreeSet<&u64> = offs.iter().collect();
        assert_eq!(uniq.len(), offs.len());
    }
}

#[test]
fn a_group_restarted_after_all_members_died_resumes_from_its_commits() {
    let mut s = Sim::new(6, 100);
    for i in 0..2 {
        s.join(i);
    }
    s.run(50);
    s.kill(0);
    s.kill(1);
    // While the group is down, producers go on and a new one appears.
    s.heads.insert(part(6), 0);
    s.run(50);
    // The stores still know the group: the new partition starts at its
    // first record (Earliest), the others at their commits.
    for i in 3..5 {
        s.join(i);
    }
    s.drain();
    let dups = s.check_all_delivered();
    assert!(!dups.contains_key(&part(6)));
    for (n, commits) in s.killed_commits.iter().enumerate() {
        for (p, offs) in &dups {
            if let Some(c) = commits.get(p) {
                assert!(offs.iter().all(|o| o >= c), "member {n} {p:?}");
            }
        }
    }
}
