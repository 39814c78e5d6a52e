use super::*;
use crate::wire::{BEACON, WELCOME};

const U: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";

#[test]
fn announcements_round_trip_for_every_kind() {
    for kind in [NodeType::Producer, NodeType::Consumer, NodeType::Store] {
        let a = Announcement { kind, address: U };
        let topic = a.topic();
        assert_eq!(topic.len(), 2 + U.len());
        assert_eq!(Announcement::parse(&topic), Ok(Some(a)));
        assert_eq!(NodeType::from_octet(kind.octet()), Some(kind));
    }
    let store = Announcement {
        kind: NodeType::Store,
        address: U,
    };
    assert_eq!(store.topic(), [b"Vs".as_slice(), U].concat());
}

/// Nothing a tower publishes can match an announcement, and no
/// announcement is taken for a beacon subscription (which the tower
/// relays upstream) or another message's.
#[test]
fn announcements_match_nothing_a_tower_publishes() {
    let topic = Announcement {
        kind: NodeType::Producer,
        address: U,
    }
    .topic();
    assert!(!topic.starts_with(BEACON) && !BEACON.starts_with(&topic));
    assert!(!topic.starts_with(WELCOME) && !WELCOME.starts_with(&topic));
    assert_eq!(crate::wire::Kind::from_id(KIND_ANNOUNCEMENT[0]), None);
    assert_eq!(
        crate::wire::group::GroupKind::from_id(KIND_ANNOUNCEMENT[0]),
        None
    );
    for other in [b"B".as_slice(), b"", b"W", b"Mtopic", b"vs"] {
        assert_eq!(Announcement::parse(other), Ok(None), "{other:?}");
    }
}

#[test]
fn malformed_announcements_are_errors() {
    let bad: [&[u8]; 7] = [
        b"V",
        b"Vx85E3C6EBDC7B4156AD9C43611EBC09CE",
        b"Vp",
        b"Vp85E3C6EBDC7B4156AD9C43611EBC09C",
        b"Vp85E3C6EBDC7B4156AD9C43611EBC09CE0",
        b"Vp85E3C6EBDC7B4156AD9C43611EBC09CG",
        b"Vp85E3C6EBDC7B4156AD9C43611EBC09C\0",
    ];
    for b in bad {
        assert!(Announcement::parse(b).is_err(), "{b:?}");
    }
    assert_eq!(NodeType::from_octet(b'P'), None);
}
