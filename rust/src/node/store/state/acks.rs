//! Where an ACK is produced, and which partitions a loop turn looks at.
//! An ACK goes as an ADDRESSED-ACK to a producer that takes them (`ack`).
//!
//! ACKs are pushed by durability: the storage reports what each finished
//! sync made durable ([`StoreLog::take_durable`]: exactly the partitions
//! that sync covered, each with its durable offset), and
//! [`StoreState::on_durable`] turns that into one cumulative ACK per
//! partition that moved. Nothing asks every partition whether it became
//! durable.
//!
//! A turn ([`StoreState::tick`]) then visits only the partitions touched
//! since the last one (a record, a HEAD, a sync's report) and those whose
//! timer is due (`PartState::wake`: a FETCH to retry, an ACK to repeat while
//! the producer is heard, or a partition still busy with nothing timed,
//! looked at again within `ack_refresh`). A visit re-sends what is due,
//! ACKs once more a partition whose state was forgotten and made afresh, and
//! forgets the partitions left with nothing to do. A store that knows ten
//! thousand partitions whose producers are alive but quiet does per turn the
//! work of the partitions that changed, and each quiet one once per
//! `ack_refresh` (its ACK repeat).

use std::time::Instant;

use super::{PartKey, StoreLog, StoreState};
use crate::node::answers::Takers;
use crate::node::out::Out;

/// The ACK of `sequence` to `partition`'s producer: an ADDRESSED-ACK if it
/// subscribed `A` + its partition (this project's producers), else a plain
/// ACK (the C reference's).
fn ack(addressed: &Takers, partition: &[u8], topic: &[u8], sequence: u64) -> Out {
    let (partition, subject) = (partition.to_vec(), topic.to_vec());
    if addressed.takes(&partition) {
        Out::AddressedAck {
            partition,
            subject,
            sequence,
        }
    } else {
        Out::Ack {
            partition,
            subject,
            sequence,
        }
    }
}

impl<L: StoreLog> StoreState<L> {
    /// What syncs made durable, as `(topic, partition)` → durable offset
    /// (every offset below it reached stable storage): an ACK of the last
    /// durable offset for each partition it moves past what was ACKed. A
    /// partition the store keeps no state for (it ACKed all it holds and
    /// forgot it) gets none. The partitions are visited at the next
    /// [`StoreState::tick`] (their ACK repeats are timed there).
    pub fn on_durable(&mut self, marks: &[(PartKey, u64)], now: Instant) -> Vec<Out> {
        let mut out = Vec::new();
        self.acks_for(marks, now, &mut out);
        out
    }

    fn acks_for(&mut self, marks: &[(PartKey, u64)], now: Instant, out: &mut Vec<Out>) {
        for ((topic, partition), durable) in marks {
            let Some(st) = self
                .parts
                .get_mut(topic.as_slice())
                .and_then(|m| m.get_mut(partition.as_slice()))
            else {
                continue;
            };
            if *durable == 0 || st.acked.is_some_and(|a| a >= durable - 1) {
                continue;
            }
            st.acked = Some(durable - 1);
            st.ack_sent = Some(now);
            self.counters.acks_sent += 1;
            out.push(ack(&self.addressed_acks, partition, topic, durable - 1));
            if !st.touched {
                st.touched = true;
                self.touched.push((topic.clone(), partition.clone()));
            }
        }
    }

    /// Each loop turn, after the storage's group commit: ACK what the syncs
    /// finished since the last turn made durable, then visit the partitions
    /// touched since and those whose timer is due: re-send FETCHes whose
    /// retry time passed, repeat ACKs, forget what has nothing left to do.
    pub fn tick(&mut self, now: Instant) -> Vec<Out> {
        let mut out = Vec::new();
        let mut marks = std::mem::take(&mut self.marks);
        self.log.take_durable(&mut marks);
        self.acks_for(&marks, now, &mut out);
        marks.clear();
        self.marks = marks;
        while self.wakes.first().is_some_and(|(at, _)| *at <= now) {
            let Some((_, (topic, partition))) = self.wakes.pop_first() else {
                break;
            };
            if let Some(st) = self
                .parts
                .get_mut(&topic)
                .and_then(|m| m.get_mut(&partition))
            {
                st.wake = None;
                if !st.touched {
                    st.touched = true;
                    self.touched.push((topic, partition));
                }
            }
        }
        // Flags stay set while the list is out: `part` pushes nothing twice.
        let keys = std::mem::take(&mut self.touched);
        for (topic, partition) in keys {
            self.visit(&topic, &partition, now, &mut out);
            if self.still_active(&topic, &partition, now) {
                self.schedule(&topic, &partition, now);
            }
        }
        out
    }

    /// One partition's turn: an ACK if more is durable than was ACKed
    /// without a sync's report saying so (its state made afresh after it was
    /// forgotten, or the log reopened after an I/O error) or if its producer
    /// is heard and the last ACK is `ack_refresh` old; held records that a
    /// failed append left at the next offset; its gap's FETCH.
    fn visit(&mut self, topic: &[u8], partition: &[u8], now: Instant, out: &mut Vec<Out>) {
        let (refresh, window) = (self.cfg.ack_refresh, self.cfg.ack_refresh_window);
        let durable = self.log.durable_next(topic, partition);
        if let Some(st) = self.parts.get_mut(topic).and_then(|m| m.get_mut(partition)) {
            let advanced = durable.filter(|&d| d > 0 && st.acked.is_none_or(|a| a < d - 1));
            let repeat = st.acked.is_some()
                && st.last_seen.is_some_and(|t| now.duration_since(t) < window)
                && st
                    .ack_sent
                    .is_some_and(|t| now.duration_since(t) >= refresh);
            if advanced.is_some() || repeat {
                let sequence = match advanced {
                    Some(d) => d - 1,
                    None => st.acked.unwrap_or(0),
                };
                st.acked = Some(sequence);
                st.ack_sent = Some(now);
                self.counters.acks_sent += 1;
                out.push(ack(&self.addressed_acks, partition, topic, sequence));
            }
        }
        if let Some(n) = self.log.next_offset(topic, partition) {
            // A failed append left records held at `n`: retry them.
            if self.part(topic, partition).held.contains(n) {
                self.drain_held(topic, partition, n);
            }
        }
        self.fetch_gap(topic, partition, now, out);
    }

    /// Sets the partition's timer after a visit at `now`: its FETCH's retry
    /// time, its ACK's repeat time while its producer is heard, else, still
    /// busy with nothing timed (records not yet durable, a gap it cannot
    /// fetch), `ack_refresh` on (kept, not pushed later at every visit).
    /// Never a time already past: a timer `tick` would not act on would
    /// make the loop spin.
    fn schedule(&mut self, topic: &[u8], partition: &[u8], now: Instant) {
        let (retry, refresh, window) = (
            self.cfg.fetch_retry,
            self.cfg.ack_refresh,
            self.cfg.ack_refresh_window,
        );
        let Some(st) = self.parts.get_mut(topic).and_then(|m| m.get_mut(partition)) else {
            return;
        };
        st.touched = false;
        let repeat = match (st.acked, st.ack_sent, st.last_seen) {
            (Some(_), Some(sent), Some(seen)) if now < seen + window => Some(sent + refresh),
            _ => None,
        };
        let wake = [st.fetch.map(|f| f.retry_at(retry)), repeat]
            .into_iter()
            .flatten()
            .min()
            .or(st.wake)
            .filter(|&at| at > now)
            .unwrap_or(now + refresh);
        self.set_wake(topic, partition, wake);
    }

    /// Moves the partition's timer to `at`.
    fn set_wake(&mut self, topic: &[u8], partition: &[u8], at: Instant) {
        let Some(st) = self.parts.get_mut(topic).and_then(|m| m.get_mut(partition)) else {
            return;
        };
        if st.wake == Some(at) {
            return;
        }
        let key = (topic.to_vec(), partition.to_vec());
        if let Some(old) = st.wake.replace(at) {
            self.wakes.remove(&(old, key.clone()));
        }
        self.wakes.insert((at, key));
    }

    /// Another store connected: FETCHes that backed off are retried at the
    /// next tick (it may hold what nobody answered).
    pub fn store_joined(&mut self) {
        let retry = self.cfg.fetch_retry;
        let mut due = Vec::new();
        for (t, m) in &mut self.parts {
            for (p, st) in m.iter_mut() {
                if let Some(f) = st.fetch.as_mut() {
                    // Due `fetch_retry` after the last FETCH: at once, mostly.
                    f.backoff = Default::default();
                    let at = f.retry_at(retry);
                    if st.wake.is_none_or(|w| at < w) {
                        due.push((t.clone(), p.clone(), at));
                    }
                }
            }
        }
        for (t, p, at) in due {
            self.set_wake(&t, &p, at);
        }
    }

    /// Whether the partition has anything left to do; forgets its state if
    /// not. Idle, it holds nothing the log does not: no FETCH, no held
    /// records, everything stored durable and ACKed, its producer silent. If
    /// the producer speaks again, the state starts afresh from the log (and
    /// ACKs once more what was ACKed, which is harmless: ACKs are cumulative).
    /// A store sees a partition per Spark task, and must not keep each one.
    fn still_active(&mut self, topic: &[u8], partition: &[u8], now: Instant) -> bool {
        let next = self.log.next_offset(topic, partition);
        let durable = self.log.durable_next(topic, partition);
        let window = self.cfg.ack_refresh_window;
        let Some(parts) = self.parts.get_mut(topic) else {
            return false;
        };
        let Some(st) = parts.get_mut(partition) else {
            return false;
        };
        let want = next.unwrap_or(0);
        let busy = st.fetch.is_some()
            || !st.held.is_empty()
            || st.known_head.is_some_and(|h| h >= want)
            // Appended but not yet durable, or durable but not yet ACKed.
            || durable != next
            || st.acked.map(|a| a + 1) != next
            // ACKs are repeated while the producer is heard.
            || st.last_seen.is_some_and(|t| now.duration_since(t) < window);
        if !busy {
            if let Some(at) = st.wake {
                self.wakes
                    .remove(&(at, (topic.to_vec(), partition.to_vec())));
            }
            parts.remove(partition);
            if parts.is_empty() {
                self.parts.remove(topic);
            }
        }
        busy
    }

    /// When [`StoreState::maintain`] is due next: at once if partitions were
    /// touched since the last tick, else the first partition timer (a FETCH
    /// retry, an ACK repeat) or the storage's next sync. The next GET-HEADS
    /// to the other stores is [`StoreState::peer_heads_at`].
    pub fn next_deadline(&self, now: Instant) -> Option<Instant> {
        if !self.touched.is_empty() {
            return Some(now);
        }
        let first = self.wakes.first().map(|(at, _)| *at);
        [first, self.log.next_sync()].into_iter().flatten().min()
    }
}
