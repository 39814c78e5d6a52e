//! Where each partition of a topic stands at a time: TIME-QUERY to the
//! stores, the lowest TIME-OFFSET per partition over them.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::Error;
use crate::node::config::{check_name, NodeConfig};
use crate::node::out::Out;
use crate::wire::{Kind, Message};

use super::client::Client;

/// For each partition of `topic` that stores hold, the first offset whose
/// record time (its timestamp, else its append time) is at or after `time`
/// (ms since the epoch), or the partition's next offset if none is that late:
/// where a reader starting at `time` begins (Kafka's `offsetsForTimes`,
/// with "none" as the end). Asks the stores (TIME-QUERY, PROTOCOL.md) and
/// takes the lowest answer per partition; ends `settle` after the first
/// store connected with no new store or lower answer since; fails with
/// [`Error::Timeout`] when no store connected within `timeout`.
pub fn offsets_for_time<E: From<Error>>(
    cfg: &NodeConfig,
    topic: &str,
    time: u64,
    timeout: Duration,
    settle: Duration,
    mut check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<BTreeMap<String, u64>, E> {
    check_name("topic", topic)?;
    let mut c = Client::open(cfg)?;
    let own = c.core.address.clone();
    let tb = topic.as_bytes();
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    let ask = Out::TimeQuery {
        topic: tb.to_vec(),
        time,
    };
    c.settle_round(
        topic,
        &ask,
        // A store: every TIME-QUERY, or those of our topic.
        |p| p.lets_through(Kind::TimeQuery, tb),
        |m| {
            let Message::TimeOffset(o) = m else {
                return false;
            };
            if o.topic != own.as_slice() || o.subject != tb {
                return false;
            }
            let p = String::from_utf8_lossy(o.address).into_owned();
            let e = got.entry(p).or_insert(u64::MAX);
            let lower = o.sequence < *e;
            *e = (*e).min(o.sequence);
            lower
        },
        timeout,
        settle,
        &mut check,
    )?;
    Ok(got)
}
