//! Bounded, blocking read clients for batch jobs (Spark executors) and the
//! command line: each runs in the calling thread with its own short-lived
//! node (subscribed only to messages addressed to it), so nothing outlives
//! the call.
//!
//! | file | holds |
//! |---|---|
//! | `client.rs` | the client node: its receive step over the one receive path, and the settling round the questions without a count of answers share |
//! | `heads.rs` | [`heads`], [`offsets`] (GET-HEADS → DIRECT-HEAD, then a first-offset probe) and [`topics`] |
//! | `time.rs` | [`offsets_for_time`] (TIME-QUERY → TIME-OFFSET) |
//! | `watch.rs` | [`HeadsWatch`]: a client kept across rounds of [`offsets`], with its keeper thread |
//! | `range.rs` | [`fetch_range`], [`fetch_ranges`]: exactly `[start, end)` of a partition, FETCH → DIRECT-RECORD |
//! | `groups.rs` | [`list_groups`], [`describe_group`]: consumer groups' commits (COMMIT-QUERY → COMMIT-OFFSETS), members (GROUP-MEMBER) and heads |
//! | `view.rs` | [`cluster_view`]: the nodes the towers relay, and every store's partitions (PARTITIONS-QUERY → PARTITIONS) |
//!
//! Stores learn about the client through discovery (towers) and connect to its
//! XPUB; a store listed only in `peers` cannot answer unless it also lists the
//! client, so reads should name `towers`.

use std::time::Duration;

mod client;
mod groups;
mod heads;
mod range;
mod time;
mod view;
mod watch;

pub use groups::{describe_group, list_groups, GroupSummary};
pub use heads::{heads, offsets, topics, Offsets};
pub use range::{fetch_range, fetch_ranges, Fetched, Range};
pub use time::offsets_for_time;
pub use view::{cluster_view, ClusterView, Node, NodeKind, StorePartition};
pub use watch::{HeadsWatch, WatchStats};

/// How often an unanswered GET-HEADS or FETCH is repeated.
const RETRY: Duration = Duration::from_millis(200);
/// FETCH rounds whose answers all start past the wanted offset before the
/// missing records count as deleted by retention.
const LOSS_ROUNDS: u32 = 3;
/// The most records one FETCH asks for.
const MAX_FETCH: u64 = 10_000;
/// Subscriptions read from the XPUB per turn.
const XPUB_BATCH: usize = 4096;
/// Messages read from peers per turn.
const SUB_BATCH: usize = 4096;
/// Slice of a blocking wait between caller checks (Ctrl-C).
const SLICE: Duration = Duration::from_millis(100);

#[cfg(test)]
mod tests;
