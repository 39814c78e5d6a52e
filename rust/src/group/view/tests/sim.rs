//! Members exchanging their announcements, encoded and decoded, over a
//! bus with delays (and cuts), a store's commit table, producers whose
//! partitions grow, and every delivery recorded: safety checked at every
//! step, loss and duplicates at the end.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use proptest::prelude::*;

use super::{part, view, TIMING};
use crate::group::commits::{CommitRecord, CommitTable, Position};
use crate::group::view::*;
use crate::wire::group::{decode, GroupMessage};
use crate::wire::Dialect;

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
    /// (from, to): announcements from one member to another that are lost.
    cut: BTreeSet<(usize, usize)>,
    /// Whether "one member per partition" is checked at every step.
    check: bool,
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
            cut: BTreeSet::new(),
            check: true,
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
            if to != from && !self.cut.contains(&(from, to)) {
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
        if self.check {
            self.check_one_owner();
        }
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

#[test]
fn members_that_cannot_hear_each_other_duplicate_only_while_cut() {
    let mut s = Sim::new(12, 100);
    for i in 0..3 {
        s.join(i);
    }
    s.run(50);
    let before = s.owners();
    // 0 and 1 lose each other's announcements for 8 s (> the timeout):
    // each counts the other dead and takes its partitions.
    s.check = false;
    s.cut.insert((0, 1));
    s.cut.insert((1, 0));
    let cut_at = s.now;
    s.run(80);
    let both: usize = {
        let mut n = 0;
        for p in before.keys() {
            let holders = s
                .nodes
                .values()
                .filter(|node| node.delivering.contains_key(p))
                .count();
            n += usize::from(holders > 1);
        }
        n
    };
    assert!(both > 0, "a cut longer than the timeout makes both read");
    s.cut.clear();
    let healed_at = s.now;
    // Within a heartbeat and a delay of the heal, one owner again.
    s.run(12);
    s.check = true;
    s.check_one_owner();
    assert_eq!(s.owners(), before, "the same assignment once healed");
    s.drain();
    let dups = s.check_all_delivered();
    // Duplicates only of records produced while cut (2 per 100 ms step
    // per partition) and the heal's heartbeat.
    let window = (healed_at + 1200 - cut_at) / 100 * 2;
    for (p, offs) in &dups {
        assert!(offs.len() as u64 <= window + 6, "{p:?}: {}", offs.len());
    }
}

#[derive(Debug, Clone)]
enum Event {
    Join,
    Leave(prop::sample::Index),
    Kill(prop::sample::Index),
    Wait(u8),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        2 => Just(Event::Join),
        1 => any::<prop::sample::Index>().prop_map(Event::Leave),
        1 => any::<prop::sample::Index>().prop_map(Event::Kill),
        3 => (1u8..60).prop_map(Event::Wait),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Any run of joins, clean leaves and kills, with announcements
    /// delayed up to 300 ms: never two members on one partition, nothing
    /// lost, and without kills no duplicate.
    #[test]
    fn any_membership_history_is_safe_and_loses_nothing(
        events in prop::collection::vec(event(), 1..12),
        delay in 0u64..4,
        parts in 1usize..16,
    ) {
        let mut s = Sim::new(parts, delay * 100);
        let mut next = 0;
        s.join(next);
        next += 1;
        for e in events {
            match e {
                Event::Join => {
                    s.join(next);
                    next += 1;
                }
                Event::Leave(i) | Event::Kill(i) if s.nodes.len() > 1 => {
                    let ids: Vec<usize> = s.nodes.keys().copied().collect();
                    let who = ids[i.index(ids.len())];
                    if matches!(e, Event::Leave(_)) {
                        s.leave(who);
                    } else {
                        s.kill(who);
                    }
                }
                Event::Leave(_) | Event::Kill(_) => {}
                Event::Wait(n) => s.run(usize::from(n)),
            }
            s.run(1);
        }
        s.drain();
        let dups = s.check_all_delivered();
        if s.killed_commits.is_empty() {
            prop_assert!(dups.is_empty(), "{dups:?}");
        }
        prop_assert_eq!(s.owners().len(), parts);
    }
}

#[test]
fn a_member_that_is_not_heard_waits_instead_of_reading_twice() {
    // 3 joins, but 0 and 1 never hear it, while it hears them: it owns
    // partitions in its view that they still hold, and must wait.
    let mut s = Sim::new(12, 100);
    s.join(0);
    s.join(1);
    s.run(30);
    s.cut.insert((2, 0));
    s.cut.insert((2, 1));
    s.join(2);
    s.run(60);
    assert!(
        s.nodes[&2].delivering.is_empty(),
        "every partition it owns is claimed by 0 or 1"
    );
    assert_eq!(s.owners().len(), 12, "and they keep reading them");
    // Once heard, they release to it, and nothing is read twice.
    s.cut.clear();
    s.run(30);
    assert!(!s.nodes[&2].delivering.is_empty());
    s.drain();
    assert_eq!(s.check_all_delivered(), BTreeMap::new());
}
