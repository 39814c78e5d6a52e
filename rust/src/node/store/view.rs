//! What a store tells a read client of the cluster view (PROTOCOL.md,
//! "Extensions", PARTITIONS-QUERY): the partitions it holds of a topic (or
//! of every topic), each with its first offset still held, its next offset
//! and its bytes on disk, in PARTITIONS messages of [`CHUNK`] partitions,
//! the last one flagged. A consumer's question about every topic is
//! answered with the topics its certificate allows only (`only`), so
//! nothing it may not read is disclosed.

use crate::error::Result;
use crate::node::out::Fate;
use crate::security::TopicPatterns;
use crate::wire::group::{GroupMessage, PartInfo, Partitions, PartitionsQuery, PARTITIONS_LAST};

use super::state::{StoreLog, StoreState};

/// Partitions per PARTITIONS message (each at most 536 octets: under 64 KiB).
const CHUNK: usize = 100;

/// One partition as the store holds it: (topic, partition, first, next, bytes).
type Row = (Vec<u8>, Vec<u8>, u64, u64, u64);

/// The partitions of `topic` (empty: every topic) held, limited to the
/// topics `only` allows (None: every one).
fn rows<L: StoreLog>(st: &StoreState<L>, topic: &[u8], only: Option<&TopicPatterns>) -> Vec<Row> {
    let log = st.log();
    let want = (!topic.is_empty()).then_some(topic);
    log.partitions(want)
        .into_iter()
        .filter(|(t, _)| only.is_none_or(|o| o.allows(t)))
        .filter_map(|(t, p)| {
            let next = log.next_offset(&t, &p)?;
            let first = log.first_offset(&t, &p).unwrap_or(next).min(next);
            let bytes = log.bytes(&t, &p);
            Some((t, p, first, next, bytes))
        })
        .collect()
}

/// Answers the PARTITIONS-QUERY `q` through `send`: always at least one
/// PARTITIONS (an empty one from a store that holds none of it), so the
/// asker knows the store answered.
pub(super) fn answer<L: StoreLog>(
    st: &StoreState<L>,
    q: &PartitionsQuery<'_>,
    only: Option<&TopicPatterns>,
    send: &mut dyn FnMut(&GroupMessage<'_>) -> Result<()>,
) -> Result<Fate> {
    if q.address == st.address() {
        return Ok(Fate::Ignored);
    }
    let rows = rows(st, q.topic, only);
    let chunks: Vec<&[Row]> = if rows.is_empty() {
        vec![&rows[..]]
    } else {
        rows.chunks(CHUNK).collect()
    };
    let last = chunks.len() - 1;
    for (i, chunk) in chunks.into_iter().enumerate() {
        let parts = chunk
            .iter()
            .map(|(t, p, first, next, bytes)| PartInfo {
                topic: t,
                partition: p,
                first: *first,
                next: *next,
                bytes: *bytes,
            })
            .collect();
        send(&GroupMessage::Partitions(Partitions {
            to: q.address,
            address: st.address(),
            sequence: q.sequence,
            flags: if i == last { PARTITIONS_LAST } else { 0 },
            parts,
        }))?;
    }
    Ok(Fate::Taken(0))
}
