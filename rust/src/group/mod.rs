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

pub mod assign;
pub mod commits;
pub mod registry;
pub mod view;
