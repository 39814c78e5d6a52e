//! A group member's consumer state: only the partitions its group gave it.

use std::time::Instant;

use super::super::{ConsumerState, Delivery};
use crate::group::view::StartAt;
use crate::node::config::{ConsumerConfig, OffsetReset};
use crate::node::out::Out;
use crate::wire::{Head, Record};

const P: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";
const Q: &[u8] = b"0123456789ABCDEF0123456789ABCDEF";
const ME: &[u8] = b"9E51FBAE55A649C1A50C0B360F3FF7AE";

fn member(reset: OffsetReset) -> ConsumerState {
    let cfg = ConsumerConfig {
        offset_reset: reset,
        group: Some("g".into()),
        ..Default::default()
    };
    ConsumerState::new(ME, &[b"t"], &cfg)
}

fn rec(partition: &'static [u8], sequence: u64) -> Record<'static> {
    Record {
        topic: b"t",
        address: partition,
        subject: b"t",
        sequence,
        content: b"v",
    }
}

fn head(partition: &'static [u8], sequence: u64) -> Head<'static> {
    Head {
        topic: b"t",
        address: partition,
        subject: b"t",
        sequence,
    }
}

fn offsets(d: &[Delivery]) -> Vec<(String, u64)> {
    d.iter()
        .map(|d| (d.partition.to_string(), d.offset))
        .collect()
}

/// Records and HEADs of partitions the group did not give it are dropped,
/// noted once each as seen; nothing is fetched for them.
#[test]
fn partitions_not_owned_are_only_noted() {
    let mut st = member(OffsetReset::Earliest);
    let now = Instant::now();
    let (mut d, mut o) = (Vec::new(), Vec::new());
    st.on_record(&rec(P, 0), false, now, &mut d, &mut o);
    st.on_record(&rec(P, 3), false, now, &mut d, &mut o);
    st.on_head(&head(Q, 9), false, now, &mut o);
    assert!(d.is_empty() && o.is_empty(), "{d:?} {o:?}");
    assert_eq!(st.active_partitions(), 0);
    assert!(st.has_seen());
    let seen = st.take_seen();
    assert_eq!(
        seen,
        vec![(b"t".to_vec(), P.to_vec()), (b"t".to_vec(), Q.to_vec())]
    );
    assert!(!st.has_seen());
    st.on_record(&rec(P, 4), false, now, &mut d, &mut o);
    assert!(st.take_seen().is_empty(), "noted once");
}

/// A partition started at an offset is fetched from there and delivered;
/// released, its state is dropped and where it stopped is returned.
#[test]
fn a_started_partition_is_delivered_from_its_offset_until_released() {
    let mut st = member(OffsetReset::Earliest);
    let now = Instant::now();
    let (mut d, mut o) = (Vec::new(), Vec::new());
    st.on_head(&head(P, 9), false, now, &mut o);
    assert!(o.is_empty());
    let from = st.start_owned(b"t", P, StartAt::Offset(5), 3, now, &mut o);
    assert_eq!(from, 5);
    let fetch = o.iter().find_map(|m| match m {
        Out::Fetch {
            partition,
            sequence,
            count,
            ..
        } => Some((partition.clone(), *sequence, *count)),
        _ => None,
    });
    assert_eq!(fetch, Some((P.to_vec(), 5, 5)), "offsets 5..=9 are known");
    assert!(o.contains(&Out::GetHeads {
        topic: b"t".to_vec()
    }));
    for seq in 5..8 {
        st.on_record(&rec(P, seq), false, now, &mut d, &mut o);
    }
    let pn = String::from_utf8(P.to_vec()).unwrap();
    assert_eq!(offsets(&d), vec![(pn.clone(), 5), (pn.clone(), 6), (pn, 7)]);
    assert!(d.iter().all(|x| x.epoch == 3), "the handle's epoch");
    assert_eq!(st.release(P), Some(8));
    assert_eq!(st.active_partitions(), 0);
    d.clear();
    st.on_record(&rec(P, 8), false, now, &mut d, &mut o);
    assert!(d.is_empty(), "no longer ours");
    assert_eq!(st.release(P), None);
}

/// `latest` starts a partition the group never committed after the last
/// record known of it; `earliest` (and a partition born while the group
/// was away) at 0.
#[test]
fn where_a_started_partition_begins() {
    let now = Instant::now();
    let mut o = Vec::new();
    let mut st = member(OffsetReset::Latest);
    st.on_head(&head(P, 9), false, now, &mut o);
    assert_eq!(st.start_owned(b"t", P, StartAt::Reset, 0, now, &mut o), 10);
    assert_eq!(st.start_owned(b"t", Q, StartAt::Reset, 0, now, &mut o), 0);
    let mut st = member(OffsetReset::Earliest);
    st.on_head(&head(P, 9), false, now, &mut o);
    assert_eq!(st.start_owned(b"t", P, StartAt::Reset, 0, now, &mut o), 0);
    let mut st = member(OffsetReset::Latest);
    st.on_head(&head(P, 9), false, now, &mut o);
    assert_eq!(
        st.start_owned(b"t", P, StartAt::Earliest, 0, now, &mut o),
        0
    );
}

/// Without a group, nothing is gated; but the application's pause is: a
/// paused partition's records are dropped (the others go on) with a new
/// seek epoch; resumed, it is fetched from where `poll` stopped and
/// delivered under a newer epoch.
#[test]
fn without_a_group_only_a_paused_partition_is_held_back_until_resumed() {
    let name = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
    let mut st = ConsumerState::new(ME, &[b"t"], &ConsumerConfig::default());
    let now = Instant::now();
    let (mut d, mut o) = (Vec::new(), Vec::new());
    st.on_record(&rec(P, 0), false, now, &mut d, &mut o);
    st.on_record(&rec(Q, 0), false, now, &mut d, &mut o);
    assert_eq!(d.len(), 2);
    assert!(!st.in_group() && !st.has_seen());
    let epoch = d[0].epoch;
    d.clear();
    st.pause(P, now);
    st.on_record(&rec(P, 1), false, now, &mut d, &mut o);
    st.on_head(&head(P, 5), false, now, &mut o);
    st.on_record(&rec(Q, 1), false, now, &mut d, &mut o);
    assert_eq!(offsets(&d), vec![(name(Q), 1)], "only Q");
    assert!(o.is_empty(), "nothing fetched of P: {o:?}");
    d.clear();
    // `poll` returned P's offset 0: it resumes at 1, fetching it.
    let resumed = st.resume(P, 1, now, &mut o);
    assert!(resumed > epoch + 1, "a newer epoch than the pause's");
    assert!(
        o.iter().any(|x| matches!(x, Out::Fetch { .. })),
        "fetched from where poll stopped: {o:?}"
    );
    let answer = Record {
        topic: ME,
        ..rec(P, 1)
    };
    st.on_record(&answer, true, now, &mut d, &mut o);
    assert_eq!(offsets(&d), vec![(name(P), 1)]);
    assert_eq!(d[0].epoch, resumed);
}

/// A pause that reaches the node after its partition went to another
/// member is let go, and a partition given back starts unpaused: a late
/// pause cannot hold a partition back for as long as it is ours again
/// (the handle forgot it at the revocation).
#[test]
fn a_pause_of_a_partition_no_longer_owned_is_let_go() {
    let mut st = member(OffsetReset::Earliest);
    let now = Instant::now();
    let (mut d, mut o) = (Vec::new(), Vec::new());
    st.start_owned(b"t", P, StartAt::Offset(0), 1, now, &mut o);
    assert_eq!(st.release(P), Some(0));
    // The application paused it from the assignment it saw before.
    st.pause(P, now);
    st.start_owned(b"t", P, StartAt::Offset(0), 2, now, &mut o);
    st.on_record(&rec(P, 0), false, now, &mut d, &mut o);
    assert_eq!(offsets(&d).len(), 1, "delivered: not paused");
    // Paused while owned, then released and given back: unpaused too.
    st.pause(P, now);
    d.clear();
    st.on_record(&rec(P, 1), false, now, &mut d, &mut o);
    assert!(d.is_empty(), "paused while ours");
    st.release(P);
    st.start_owned(b"t", P, StartAt::Offset(1), 3, now, &mut o);
    st.on_record(&rec(P, 1), false, now, &mut d, &mut o);
    assert_eq!(
        offsets(&d).len(),
        1,
        "a partition given back starts unpaused"
    );
    // A resume of a partition no longer ours starts nothing.
    st.release(P);
    o.clear();
    st.resume(P, 2, now, &mut o);
    assert!(o.is_empty(), "{o:?}");
    assert_eq!(st.active_partitions(), 0);
}
