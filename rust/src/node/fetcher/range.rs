//! Exactly the records `[start, end)` of one partition, from the stores
//! (and its live producer): FETCH → DIRECT-RECORD, repeated every
//! [`RETRY`] until the range is whole; records retention removed from
//! every store are lost (reported, or an error).

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use crate::error::{Error, Result, Unanswered};
use crate::node::config::{check_name, NodeConfig};
use crate::node::out::Out;
use crate::wire::{Kind, Message};

use super::client::Client;
use super::{LOSS_ROUNDS, MAX_FETCH, RETRY};

/// What [`fetch_range`] read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// `(offset, body)` in offset order, each offset once: each record's
    /// metadata and value ([`crate::meta::split`]).
    pub records: Vec<(u64, Vec<u8>)>,
    /// Ranges `[from, to)` no store holds any more (only with `fail_on_loss` off).
    pub lost: Vec<(u64, u64)>,
}

/// Reads exactly the records `[start, end)` of `partition` of `topic` from
/// stores (and the live producer), in offset order. Records retention removed
/// from every store fail with [`Error::DataLoss`] when `fail_on_loss`, else are
/// skipped and reported in [`Fetched::lost`]. Fails with [`Error::Timeout`]
/// when the range is not complete within `timeout`.
#[allow(clippy::too_many_arguments)]
pub fn fetch_range<E: From<Error>>(
    cfg: &NodeConfig,
    topic: &str,
    partition: &str,
    start: u64,
    end: u64,
    timeout: Duration,
    fail_on_loss: bool,
    mut check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<Fetched, E> {
    check_range((topic, partition, start, end))?;
    if start == end {
        return Ok(Fetched::default());
    }
    let mut c = Client::open(cfg)?;
    let mut peers = FetchPeers::default();
    let r = (topic, partition, start, end);
    c.read_range(&mut peers, r, timeout, fail_on_loss, &mut check)
}

/// One range to read: `(topic, partition, start, end)`.
pub type Range<'a> = (&'a str, &'a str, u64, u64);

/// Names as [`check_name`], a partition name a store can hold (a producer's
/// address is 32 hex digits; stores drop records of any other name, so no
/// node could answer and the read would wait out its timeout), and
/// `start <= end`.
fn check_range((topic, partition, start, end): Range<'_>) -> Result<()> {
    check_name("topic", topic)?;
    crate::log::format::check_partition_name(partition).map_err(Error::Config)?;
    if start > end {
        return Err(Error::Config(format!(
            "start {start} is past end {end}: a range is [start, end), empty when they are equal"
        )));
    }
    Ok(())
}

/// [`fetch_range`] of several ranges, one after the other, by one client: its
/// discovery and the stores' connections are paid once (a Spark task reading
/// many small partitions). `timeout` applies to each range.
pub fn fetch_ranges<E: From<Error>>(
    cfg: &NodeConfig,
    ranges: &[Range<'_>],
    timeout: Duration,
    fail_on_loss: bool,
    mut check: impl FnMut() -> std::result::Result<(), E>,
) -> std::result::Result<Vec<Fetched>, E> {
    for r in ranges {
        check_range(*r)?;
    }
    if ranges.iter().all(|r| r.2 == r.3) {
        return Ok(vec![Fetched::default(); ranges.len()]);
    }
    let mut c = Client::open(cfg)?;
    let mut peers = FetchPeers::default();
    ranges
        .iter()
        .map(|&r| c.read_range(&mut peers, r, timeout, fail_on_loss, &mut check))
        .collect()
}

/// The peers that answer FETCH, as their subscriptions on the client's XPUB
/// showed: every partition (a store's catch-all `F`) or named ones (a
/// producer's own). Kept across the ranges one client reads.
#[derive(Debug, Default)]
struct FetchPeers {
    all: bool,
    partitions: HashSet<Vec<u8>>,
}

impl FetchPeers {
    fn serve(&self, partition: &[u8]) -> bool {
        self.all || self.partitions.contains(partition)
    }
}

impl Client {
    fn read_range<E: From<Error>>(
        &mut self,
        peers: &mut FetchPeers,
        (topic, partition, start, end): Range<'_>,
        timeout: Duration,
        fail_on_loss: bool,
        check: &mut impl FnMut() -> std::result::Result<(), E>,
    ) -> std::result::Result<Fetched, E> {
        let mut out = Fetched::default();
        if start >= end {
            return Ok(out);
        }
        let want = usize::try_from(end - start).unwrap_or(usize::MAX);
        out.records.reserve(want.min(1 << 20));
        let own = self.core.address.clone();
        let deadline = Instant::now() + timeout;
        let mut next = start;
        let mut pending: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        // FETCH is sent once some peer that answers FETCH for the partition is connected.
        let mut connected = peers.serve(partition.as_bytes());
        let mut next_ask: Option<Instant> = None;
        let mut short_rounds = 0u32;
        let mut progressed = false;
        let mut requested_to = start;
        // In this round, a store answered with records past `next` (it holds
        // none of the records before: retention deleted them?). Evidence
        // counts for its own round only: a store that connects later, or
        // answers slower, may still hold them.
        let mut answered_past = false;
        while next < end {
            let now = Instant::now();
            if now >= deadline {
                return Err(self
                    .timeout(
                        topic.to_string(),
                        Unanswered::Range {
                            partition: partition.to_string(),
                            start,
                            end,
                            next,
                        },
                        timeout,
                    )
                    .into());
            }
            if connected && next_ask.is_none_or(|t| now >= t) {
                if next_ask.is_some() {
                    // A whole retry round passed: did answers start past `next`?
                    let past = std::mem::take(&mut answered_past);
                    if !progressed && past {
                        short_rounds += 1;
                    } else {
                        short_rounds = 0;
                    }
                    progressed = false;
                    if short_rounds >= LOSS_ROUNDS {
                        let first = pending.keys().next().copied().unwrap_or(end);
                        if fail_on_loss {
                            return Err(Error::DataLoss {
                                topic: topic.to_string(),
                                partition: partition.to_string(),
                                from: next,
                                to: first,
                            }
                            .into());
                        }
                        out.lost.push((next, first));
                        next = first;
                        drain(&mut pending, &mut next, end, &mut out.records);
                        short_rounds = 0;
                        continue;
                    }
                }
                let count = (end - next).min(MAX_FETCH) as u32;
                self.core.emit(&Out::Fetch {
                    partition: partition.as_bytes().to_vec(),
                    topic: topic.as_bytes().to_vec(),
                    sequence: next,
                    count,
                })?;
                next_ask = Some(now + RETRY);
                requested_to = next + u64::from(count);
            }
            let mut peer = false;
            let before = next;
            self.step(
                deadline,
                &mut |prefix| {
                    let Some(key) = prefix.key_of(Kind::Fetch) else {
                        return;
                    };
                    if key.is_empty() {
                        peers.all = true;
                    } else {
                        peers.partitions.insert(key.to_vec());
                    }
                    if key.is_empty() || key == partition.as_bytes() {
                        peer = true;
                    }
                },
                &mut |m| {
                    if let Message::DirectRecord(r) = m {
                        if r.topic == own.as_slice()
                            && r.address == partition.as_bytes()
                            && r.subject == topic.as_bytes()
                            && r.sequence >= next
                        {
                            answered_past |= r.sequence > next;
                            if r.sequence < end {
                                pending
                                    .entry(r.sequence)
                                    .or_insert_with(|| r.content.to_vec());
                            }
                        }
                    }
                },
            )?;
            drain(&mut pending, &mut next, end, &mut out.records);
            if next > before {
                progressed = true;
                // Ask for the next window as soon as this one is in; while records
                // of this one flow, hold the retry back.
                next_ask = Some(if next >= requested_to {
                    Instant::now()
                } else {
                    Instant::now() + RETRY
                });
            }
            if peer {
                // Ask the new peer at once, and give it whole rounds before
                // the range counts as deleted: it may hold it.
                connected = true;
                next_ask = None;
                short_rounds = 0;
            }
            check()?;
        }
        Ok(out)
    }
}

fn drain(
    pending: &mut BTreeMap<u64, Vec<u8>>,
    next: &mut u64,
    end: u64,
    into: &mut Vec<(u64, Vec<u8>)>,
) {
    while *next < end {
        match pending.remove(next) {
            Some(v) => {
                into.push((*next, v));
                *next += 1;
            }
            None => break,
        }
    }
}
