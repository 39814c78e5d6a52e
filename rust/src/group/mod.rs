//! Consumer groups without a coordinator (issue 38, docs/groups.md): the
//! pure parts, no sockets and no clocks.
//!
//! - [`assign`]: which live member reads which partition (rendezvous hashing).
//! - [`view`]: one member's view of its group: announcements in, "look up
//!   the commit of", "start at", "stop" decisions out, in hand-over order.
//! - [`commits`]: the commit record the stores keep, its strict codec, and
//!   the table that merges commits (a join: the highest `(epoch, offset)`).
//! - [`registry`]: the groups as a store or `describe` hears them: live
//!   members and claims, the check of a COMMIT's sender, the description
//!   of a group with its lag.
//!
//! The four group messages (GROUP-MEMBER, COMMIT, COMMIT-QUERY,
//! COMMIT-OFFSETS) are in [`crate::wire::group`], beside the other
//! extensions; the nodes use these parts in `node/consumer/group.rs` and
//! `node/store/groups.rs`.

/// The longest a member counts as live after an announcement, whatever
/// `timeout` it announced (1 to 2^32 - 1 ms on the wire): a receiver takes
/// at most this (docs/groups.md, "Failure timings"), so a forged or
/// careless announcement cannot hold a partition or a registry row for
/// weeks.
pub const MAX_TIMEOUT_MS: u32 = 60_000;

/// How long a receiver counts a member live after an announcement that
/// says `timeout_ms`: at most [`MAX_TIMEOUT_MS`].
pub fn live_ms(timeout_ms: u32) -> u64 {
    u64::from(timeout_ms.min(MAX_TIMEOUT_MS))
}

pub mod assign;
pub mod commits;
pub mod registry;
pub mod view;
