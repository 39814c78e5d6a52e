//! Which gap of a partition a store FETCHes, when it retries and when it
//! gives the gap up ([`StoreState::fetch_gap`]), and what a HEAD (from the
//! producer) or a DIRECT-HEAD (from another store) shows missing.
//!
//! A gap is the offsets between what the log holds (`next_offset`) and the
//! first record held past it, or the highest offset known to exist. Its
//! FETCH is re-sent every `fetch_retry` while unanswered (backing off past
//! `give_up_fetches` tries) and given up only in two cases, after which the
//! partition's new gap is looked at at once:
//! - a partition new to the store whose history nobody answers starts at
//!   the first record it holds;
//! - a partition whose own records retention deleted too skips to the first
//!   record held, when peers answered from past the gap (evidence that it is
//!   gone everywhere, `InFlight::answered_beyond`).

use std::time::Instant;

use super::{valid_partition, InFlight, StoreLog, StoreState};
use crate::log::format::name_fits;
use crate::node::out::{Backoff, Out};
use crate::wire::Head;

/// What a partition's gap calls for now (`StoreState::gap_step`, which
/// sets the partition's FETCH in flight to match).
#[derive(Debug)]
enum GapStep {
    /// Nothing: no gap, or the FETCH in flight still covers it.
    Wait,
    /// Send this FETCH (now in flight).
    Fetch(InFlight),
    /// A new partition whose history nobody holds any more: it starts at
    /// the earliest offset held, `first`, whose record is `content`.
    StartAt { first: u64, content: Vec<u8> },
    /// The gap `[from, to)` is gone from every peer, as it is here: the
    /// partition continues at `to`.
    Skip { from: u64, to: u64 },
}

impl<L: StoreLog> StoreState<L> {
    /// Sends (or re-sends, after `fetch_retry`) a FETCH for the partition's
    /// gap, or gives the gap up and looks at the next one.
    pub(super) fn fetch_gap(
        &mut self,
        topic: &[u8],
        partition: &[u8],
        now: Instant,
        out: &mut Vec<Out>,
    ) {
        loop {
            match self.gap_step(topic, partition, now) {
                GapStep::Wait => return,
                GapStep::Fetch(f) => {
                    self.counters.fetches_sent += 1;
                    out.push(Out::Fetch {
                        partition: partition.to_vec(),
                        topic: topic.to_vec(),
                        sequence: f.from,
                        count: (f.end - f.from) as u32,
                    });
                    return;
                }
                GapStep::StartAt { first, content } => {
                    self.append_run(topic, partition, first, &content);
                }
                GapStep::Skip { from, to } => {
                    if let Err(e) = self.log.skip_to(topic, partition, to) {
                        self.append_failed(e);
                        return;
                    }
                    tracing::warn!(
                        "store: offsets {from}..{to} of {}/{} are gone from every peer \
                         (retention), as they are here; the partition continues at {to}",
                        String::from_utf8_lossy(topic),
                        String::from_utf8_lossy(partition)
                    );
                    self.counters.records_skipped += to - from;
                    self.drain_held(topic, partition, to);
                }
            }
        }
    }

    /// What the partition's gap calls for at `now`; the FETCH in flight
    /// set to match (the one to send, or none when the gap is given up or
    /// there is nothing to fetch), and records held below what is stored
    /// dropped.
    fn gap_step(&mut self, topic: &[u8], partition: &[u8], now: Instant) -> GapStep {
        let next = self.log.next_offset(topic, partition);
        if next.is_none() && self.log.set_aside(topic, partition) {
            // Nothing is fetched for it: no retry deadline may stay behind
            // (one `tick` does not act on makes the loop spin).
            let st = self.part(topic, partition);
            st.fetch = None;
            st.held.clear();
            // `tick` repeats no ACK of it (the log gives no durable mark).
            st.ack_sent = None;
            return GapStep::Wait;
        }
        let (retry, give_up, max) = (
            self.cfg.fetch_retry,
            self.cfg.give_up_fetches,
            self.cfg.max_fetch_count,
        );
        let st = self.part(topic, partition);
        let want_from = next.unwrap_or(0);
        // Held records below what is stored are duplicates (an append error
        // of another partition's batch can leave one re-held here).
        st.held.drop_below(want_from);
        let Some(head) = st.known_head.filter(|&h| h >= want_from) else {
            st.fetch = None;
            return GapStep::Wait;
        };
        // Missing: up to the first record held, else up to the head.
        let first_held = st.held.first();
        let gap_end = match first_held {
            Some(f) if f > want_from => f - 1,
            Some(_) => return GapStep::Wait, // drain_held will make progress
            None => head,
        };
        let count = (gap_end - want_from + 1).min(u64::from(max));
        let wanted = InFlight {
            from: want_from,
            end: want_from + count,
            at: now,
            tries: 0,
            answered_beyond: false,
            backoff: Backoff::default(),
        };
        let Some(f) = st.fetch else {
            st.fetch = Some(wanted);
            return GapStep::Fetch(wanted);
        };
        let fresh = now < f.retry_at(retry);
        if fresh && f.from <= want_from && want_from < f.end {
            // The FETCH in flight still covers what is missing: its answers
            // are on their way (asking again would only make peers resend).
            return GapStep::Wait;
        }
        if fresh || f.from != want_from {
            st.fetch = Some(wanted);
            return GapStep::Fetch(wanted);
        }
        // Unanswered: count it, and back off past `give_up_fetches`.
        let tries = f.tries + 1;
        let gave_up = tries >= give_up;
        let again = InFlight {
            tries,
            answered_beyond: f.answered_beyond,
            backoff: if gave_up {
                f.backoff.doubled()
            } else {
                Backoff::default()
            },
            ..wanted
        };
        match (gave_up, next, first_held) {
            // A new partition whose history nobody holds any more starts at
            // the earliest offset held.
            (true, None, Some(first)) => {
                st.fetch = None;
                match st.held.remove(first) {
                    Some(content) => GapStep::StartAt { first, content },
                    None => GapStep::Wait, // `first_held` is held
                }
            }
            // A partition known already gives the gap up only when its own
            // records are all gone too (its retention deleted them: the
            // store was away longer than retention), so skipping destroys
            // nothing, and only when peers answered from past the gap (live
            // records past it prove nothing); both are in `answered_beyond`
            // (set by `on_direct_record`). A store that still holds records
            // of it waits: a peer that holds the gap may only be away.
            (true, Some(n), Some(first)) if again.answered_beyond => {
                st.fetch = None;
                GapStep::Skip { from: n, to: first }
            }
            _ => {
                st.fetch = Some(again);
                GapStep::Fetch(again)
            }
        }
    }

    /// HEAD: the producer's last offset. Fetches anything the store lacks.
    pub fn on_head(&mut self, h: &Head<'_>, now: Instant) -> Vec<Out> {
        self.learn_head(h, now, true)
    }

    /// DIRECT-HEAD from another store (its answer to our GET-HEADS): what it
    /// holds. Beyond what we hold is a gap, fetched like any other; unlike a
    /// HEAD it says nothing about the producer being alive.
    pub fn on_peer_head(&mut self, h: &Head<'_>, now: Instant) -> Vec<Out> {
        self.learn_head(h, now, false)
    }

    /// A partition's head from its producer (which is then alive) or from
    /// another store; FETCHes what lies beyond what we hold.
    fn learn_head(&mut self, h: &Head<'_>, now: Instant, from_producer: bool) -> Vec<Out> {
        let mut out = Vec::new();
        if !valid_partition(h.address) || h.sequence == u64::MAX || !name_fits(h.subject) {
            self.counters.dropped_invalid += 1;
            return out;
        }
        if !from_producer
            && self
                .log
                .next_offset(h.subject, h.address)
                .is_some_and(|n| n > h.sequence)
        {
            // Nothing new from a peer: do not even list the partition for `tick`.
            return out;
        }
        let st = self.part(h.subject, h.address);
        st.known_head = Some(st.known_head.map_or(h.sequence, |k| k.max(h.sequence)));
        if from_producer {
            st.last_seen = Some(now);
        }
        self.fetch_gap(h.subject, h.address, now, &mut out);
        out
    }
}
