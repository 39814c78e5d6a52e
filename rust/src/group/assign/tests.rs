use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn addr(i: usize) -> Vec<u8> {
    format!(
        "{:032X}",
        (i as u128).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835)
    )
    .into_bytes()
}

fn parts(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| (b"orders".to_vec(), addr(1_000_000 + i)))
        .collect()
}

fn members<'a>(addrs: &'a [Vec<u8>], topics: &'a [Vec<u8>]) -> Vec<Member<'a>> {
    addrs
        .iter()
        .map(|a| Member { address: a, topics })
        .collect()
}

#[test]
fn fnv_and_mix_match_their_published_values() {
    // FNV-1a-64 test vectors (Fowler, Noll, Vo): "" and "a".
    assert_eq!(fnv1a(FNV_OFFSET, b""), 0xCBF2_9CE4_8422_2325);
    assert_eq!(fnv1a(FNV_OFFSET, b"a"), 0xAF63_DC4C_8601_EC8C);
    assert_eq!(fnv1a(FNV_OFFSET, b"foobar"), 0x8594_4171_F739_67E8);
    // SplitMix64 seeded 0: its first output is mix(0x9E3779B97F4A7C15).
    assert_eq!(mix(0x9E37_79B9_7F4A_7C15), 0xE220_A839_7B1D_CDAF);
    assert_eq!(mix(0), 0);
}

#[test]
fn the_score_is_pinned_byte_for_byte() {
    // docs/groups.md gives these: an implementation in another language
    // must reproduce them.
    let key = partition_key(b"billing", b"orders", b"85E3C6EBDC7B4156AD9C43611EBC09CE");
    let mut manual = FNV_OFFSET;
    for part in [
        &b"billing"[..],
        b"orders",
        b"85E3C6EBDC7B4156AD9C43611EBC09CE",
    ] {
        manual = fnv1a(manual, &[part.len() as u8]);
        manual = fnv1a(manual, part);
    }
    assert_eq!(key, manual);
    assert_eq!(key, 0x2040_37BD_35CC_B44E);
    assert_eq!(
        score(key, b"0123456789ABCDEF0123456789ABCDEF"),
        0x1954_ED07_02A7_10DE
    );
    assert_eq!(
        score(key, b"FEDCBA9876543210FEDCBA9876543210"),
        0x8B56_0FC3_1B77_878D
    );
    let both = [
        &b"0123456789ABCDEF0123456789ABCDEF"[..],
        b"FEDCBA9876543210FEDCBA9876543210",
    ];
    assert_eq!(
        owner(
            b"billing",
            b"orders",
            b"85E3C6EBDC7B4156AD9C43611EBC09CE",
            both
        ),
        Some(both[1])
    );
    let m = b"0123456789ABCDEF0123456789ABCDEF";
    assert_eq!(score(key, m), mix(key ^ mix(fnv1a(FNV_OFFSET, m))));
    // The length prefixes keep ("ab", "c") and ("a", "bc") apart.
    assert_ne!(
        partition_key(b"g", b"ab", b"c"),
        partition_key(b"g", b"a", b"bc")
    );
}

#[test]
fn no_member_no_owner_and_one_member_owns_all() {
    assert_eq!(owner(b"g", b"t", b"p", std::iter::empty()), None);
    let a = addr(1);
    let topics = vec![b"orders".to_vec()];
    let ms = members(std::slice::from_ref(&a), &topics);
    let got = assign(b"g", &ms, &parts(50));
    assert_eq!(got.len(), 50);
    assert!(got.values().all(|m| *m == a.as_slice()));
}

#[test]
fn a_partition_of_a_topic_nobody_consumes_is_left_out() {
    let a = addr(1);
    let topics = vec![b"payments".to_vec()];
    let ms = members(std::slice::from_ref(&a), &topics);
    assert!(assign(b"g", &ms, &parts(5)).is_empty());
}

#[test]
fn only_members_consuming_a_topic_get_its_partitions() {
    let (a, b) = (addr(1), addr(2));
    let (ta, tb) = (vec![b"orders".to_vec()], vec![b"payments".to_vec()]);
    let ms = vec![
        Member {
            address: &a,
            topics: &ta,
        },
        Member {
            address: &b,
            topics: &tb,
        },
    ];
    let mut ps = parts(20);
    ps.extend((0..20).map(|i| (b"payments".to_vec(), addr(2_000_000 + i))));
    let got = assign(b"g", &ms, &ps);
    assert_eq!(got.len(), 40);
    for ((t, _), m) in got {
        let want: &[u8] = if t == b"orders" { &a } else { &b };
        assert_eq!(m, want);
    }
}

#[test]
fn equal_scores_go_to_the_lower_address() {
    // The same address twice scores the same: the tie rule must keep the
    // result independent of order.
    let a = addr(7);
    let got1 = owner(b"g", b"t", b"p", [a.as_slice(), a.as_slice()]);
    assert_eq!(got1, Some(a.as_slice()));
}

#[test]
fn groups_are_independent_of_each_other() {
    // Two groups over the same members do not assign alike: a member that
    // is hot in one group is not hot in every group.
    let addrs: Vec<Vec<u8>> = (0..4).map(addr).collect();
    let topics = vec![b"orders".to_vec()];
    let ms = members(&addrs, &topics);
    let ps = parts(200);
    let g1 = assign(b"billing", &ms, &ps);
    let g2 = assign(b"audit", &ms, &ps);
    let same = g1.iter().filter(|(k, v)| g2[*k] == **v).count();
    // Independent groups agree on about a quarter of the partitions.
    assert!((20..=80).contains(&same), "{same} of 200 agree");
}

#[test]
fn load_is_spread_and_a_new_member_takes_about_one_nth() {
    // Fixed inputs (no randomness): 1,000 partitions over 10 members.
    let addrs: Vec<Vec<u8>> = (0..11).map(addr).collect();
    let topics = vec![b"orders".to_vec()];
    let ps = parts(1000);
    let before = assign(b"billing", &members(&addrs[..10], &topics), &ps);
    let mut load: BTreeMap<&[u8], usize> = BTreeMap::new();
    for m in before.values() {
        *load.entry(m).or_default() += 1;
    }
    assert_eq!(load.len(), 10);
    assert!(load.values().all(|&n| (60..=140).contains(&n)), "{load:?}");
    let after = assign(b"billing", &members(&addrs, &topics), &ps);
    let moved = ps.iter().filter(|k| before[*k] != after[*k]).count();
    // About 1000 / 11 = 91 move, all of them to the new member.
    assert!((50..=140).contains(&moved), "{moved} moved");
    for k in &ps {
        if before[k] != after[k] {
            assert_eq!(after[k], addrs[10].as_slice());
        }
    }
}

fn arb_members() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::btree_set(any::<u64>(), 1..12).prop_map(|s| {
        s.into_iter()
            .map(|x| format!("{x:032X}").into_bytes())
            .collect()
    })
}

fn arb_parts() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>)>> {
    prop::collection::btree_set((0u8..3, any::<u64>()), 0..60).prop_map(|s| {
        s.into_iter()
            .map(|(t, p)| (vec![b't', b'0' + t], format!("{p:032X}").into_bytes()))
            .collect()
    })
}

fn all_topics() -> Vec<Vec<u8>> {
    vec![b"t0".to_vec(), b"t1".to_vec(), b"t2".to_vec()]
}

proptest! {
    /// `Ranked` (ids hashed once, what views and `assign` use) picks the
    /// owner `owner` picks from the members consuming the topic.
    #[test]
    fn ranked_owners_are_the_owners(addrs in arb_members(), ps in arb_parts()) {
        let topics = all_topics();
        let ms = members(&addrs, &topics);
        let ranked = Ranked::new(&ms);
        for (t, p) in &ps {
            let by_owner = owner(b"g", t, p, addrs.iter().map(Vec::as_slice));
            prop_assert_eq!(ranked.owner(b"g", t, p), by_owner);
        }
    }

    #[test]
    fn every_partition_has_exactly_one_live_owner(addrs in arb_members(), ps in arb_parts()) {
        let topics = all_topics();
        let got = assign(b"g", &members(&addrs, &topics), &ps);
        prop_assert_eq!(got.len(), ps.len());
        for p in &ps {
            prop_assert!(addrs.iter().any(|a| a.as_slice() == got[p]));
        }
    }

    #[test]
    fn the_result_does_not_depend_on_input_order(
        addrs in arb_members(),
        ps in arb_parts(),
        seed in any::<u64>(),
    ) {
        let topics = all_topics();
        let a = assign(b"g", &members(&addrs, &topics), &ps);
        let mut addrs2 = addrs.clone();
        let mut ps2 = ps.clone();
        let rot = (seed as usize) % addrs2.len();
        addrs2.rotate_left(rot);
        addrs2.reverse();
        ps2.reverse();
        let b = assign(b"g", &members(&addrs2, &topics), &ps2);
        prop_assert_eq!(a, b);
    }

    #[test]
    fn a_partition_owner_does_not_depend_on_the_other_partitions(
        addrs in arb_members(),
        ps in arb_parts(),
    ) {
        let topics = all_topics();
        let ms = members(&addrs, &topics);
        let whole = assign(b"g", &ms, &ps);
        for p in &ps {
            let alone = assign(b"g", &ms, std::slice::from_ref(p));
            prop_assert_eq!(alone[p], whole[p]);
        }
    }

    #[test]
    fn removing_a_member_moves_only_its_partitions(
        addrs in arb_members(),
        ps in arb_parts(),
        which in any::<prop::sample::Index>(),
    ) {
        prop_assume!(addrs.len() >= 2);
        let topics = all_topics();
        let gone = which.index(addrs.len());
        let before = assign(b"g", &members(&addrs, &topics), &ps);
        let mut rest = addrs.clone();
        rest.remove(gone);
        let after = assign(b"g", &members(&rest, &topics), &ps);
        for p in &ps {
            if before[p] != addrs[gone].as_slice() {
                prop_assert_eq!(before[p], after[p]);
            } else {
                prop_assert_ne!(after[p], addrs[gone].as_slice());
            }
        }
    }

    #[test]
    fn adding_a_member_moves_partitions_only_to_it(
        addrs in arb_members(),
        ps in arb_parts(),
        extra in any::<u64>(),
    ) {
        let topics = all_topics();
        let new = format!("{extra:032X}").into_bytes();
        prop_assume!(!addrs.contains(&new));
        let before = assign(b"g", &members(&addrs, &topics), &ps);
        let mut more = addrs.clone();
        more.push(new.clone());
        let after = assign(b"g", &members(&more, &topics), &ps);
        for p in &ps {
            if before[p] != after[p] {
                prop_assert_eq!(after[p], new.as_slice());
            }
        }
    }

    #[test]
    fn two_views_one_inside_the_other_disagree_only_about_the_extra_members(
        addrs in arb_members(),
        ps in arb_parts(),
        keep in prop::collection::vec(any::<bool>(), 12),
    ) {
        // The basis of the duplicate bound (docs/groups.md): if view A is a
        // subset of view B, a partition's owner in B is A's owner or a
        // member A does not know.
        let topics = all_topics();
        let small: Vec<Vec<u8>> = addrs
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(a, _)| a.clone())
            .collect();
        let a = assign(b"g", &members(&small, &topics), &ps);
        let b = assign(b"g", &members(&addrs, &topics), &ps);
        for p in &ps {
            if let Some(owner_a) = a.get(p) {
                prop_assert!(b[p] == *owner_a || !small.iter().any(|m| m.as_slice() == b[p]));
            }
        }
    }
}
