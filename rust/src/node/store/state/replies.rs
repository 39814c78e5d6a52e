//! How a store answers FETCHes: one job per requester and partition, read
//! from the log in bounded slices ([`StoreState::next_reply_slice`]) served
//! round robin between receives; a requester whose queue is full waits
//! (backing off) with its jobs while everyone else's answers go on.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{FxMap, StoreLog, StoreState};
use crate::node::answers::{Dest, Form, Reply};
use crate::node::batch::Batch;
use crate::node::out::Out;
use crate::wire::Fetch;

/// One slice of a FETCH answer: records `first..first + len()` of a
/// partition for one requester, contents back to back. The store loop reuses
/// one, so answering allocates nothing per record.
#[derive(Debug, Default)]
pub struct ReplySlice {
    pub to: Vec<u8>,
    pub topic: Vec<u8>,
    pub partition: Vec<u8>,
    pub first: u64,
    records: Batch,
    /// The form the requester takes; None while its subscriptions are not
    /// read yet: the slice goes nowhere, as libzmq would drop it, counts as
    /// sent, and the requester FETCHes again ([`AnswerForms`](crate::node::answers::AnswerForms)).
    pub form: Option<Form>,
}

impl ReplySlice {
    /// The slice as the answer it is, if it goes anywhere.
    pub fn reply(&self) -> Option<Reply<'_, impl ExactSizeIterator<Item = &[u8]> + '_>> {
        Some(Reply {
            dest: Dest::Direct {
                to: &self.to,
                partition: &self.partition,
                topic: &self.topic,
            },
            first: self.first,
            bodies: self.contents(),
            form: self.form?,
        })
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
    /// The records' contents in order (offsets `first`, `first + 1`, ...).
    pub fn contents(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.records.iter()
    }
}

/// Whom a FETCH answer goes to, and of which partition: one job each.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct ReplyKey {
    to: Vec<u8>,
    topic: Vec<u8>,
    partition: Vec<u8>,
}

/// A FETCH being answered slice by slice: `[next, end)` left to send.
#[derive(Debug)]
pub(super) struct ReplyJob {
    next: u64,
    end: u64,
}

/// The FETCH answers in progress: found by key in O(1) (a consumer catching
/// up on thousands of partitions sends a FETCH for each at once, and retries
/// them), served round robin in `order`, where each job's key is exactly once.
#[derive(Debug, Default)]
pub(super) struct Replies {
    pub(super) jobs: FxMap<ReplyKey, ReplyJob>,
    order: VecDeque<ReplyKey>,
    /// Requesters whose queue was full (they stopped reading): their jobs
    /// wait here, out of `order`, so that they hold up no one else's answers
    /// and are not read from the log again at every turn.
    blocked: FxMap<Vec<u8>, Blocked>,
}

/// A requester whose queue was full: its jobs wait until `until`; `wait`
/// doubles at each full queue in a row (up to [`MAX_REPLY_BACKOFF`]).
#[derive(Debug)]
struct Blocked {
    until: Instant,
    wait: Duration,
    keys: Vec<ReplyKey>,
}

/// The first wait of a requester whose queue was full, and the longest.
pub const REPLY_BACKOFF: Duration = Duration::from_millis(2);
pub const MAX_REPLY_BACKOFF: Duration = Duration::from_millis(256);

impl Replies {
    /// Jobs of requesters whose wait is over go back to the front of `order`.
    fn unblock(&mut self, now: Instant) {
        if self.blocked.is_empty() {
            return;
        }
        for b in self.blocked.values_mut() {
            if b.until <= now {
                for k in b.keys.drain(..).rev() {
                    self.order.push_front(k);
                }
            }
        }
        // A requester that went away (or read again, its last slice not
        // whole) is forgotten a while after its wait ended.
        self.blocked
            .retain(|_, b| !b.keys.is_empty() || now < b.until + MAX_REPLY_BACKOFF);
    }

    /// The next job to answer: the first in `order` whose requester is not
    /// waiting (those met on the way are set aside with their requester).
    fn pop_ready(&mut self, now: Instant) -> Option<ReplyKey> {
        self.unblock(now);
        while let Some(key) = self.order.pop_front() {
            match self.blocked.get_mut(&key.to) {
                Some(b) if b.until > now => b.keys.push(key),
                _ => return Some(key),
            }
        }
        None
    }

    /// Drops the oldest job (its requester FETCHes again): one in `order`,
    /// else one set aside.
    fn evict_one(&mut self) {
        let old = self.order.pop_front().or_else(|| {
            self.blocked
                .values_mut()
                .find_map(|b| (!b.keys.is_empty()).then(|| b.keys.remove(0)))
        });
        if let Some(old) = old {
            self.jobs.remove(&old);
        }
    }

    /// When a job may be answered next: `now` if one is ready, else when the
    /// first waiting requester's wait ends; None without jobs.
    fn next_at(&self, now: Instant) -> Option<Instant> {
        if !self.order.is_empty() {
            return Some(now);
        }
        self.blocked
            .values()
            .filter(|b| !b.keys.is_empty())
            .map(|b| b.until)
            .min()
    }
}

impl<L: StoreLog> StoreState<L> {
    /// FETCH from a consumer or another store: queue an answer from the log.
    pub fn on_fetch(&mut self, f: &Fetch<'_>) -> Vec<Out> {
        if f.requester == self.address.as_slice() || f.count == 0 {
            return Vec::new();
        }
        let Some(next) = self.log.next_offset(f.topic, f.partition) else {
            self.counters.fetches_unknown += 1;
            return Vec::new();
        };
        // From the first record held when retention deleted the start of the
        // range: `count` records from there, even if the whole range asked for
        // is gone. The requester sees the answer start past what it asked and
        // knows the records before are deleted here (a consumer skips them,
        // a reader reports the loss); an empty answer would leave it asking
        // forever. Receivers tolerate records beyond the range (PROTOCOL.md).
        let first = self.log.first_offset(f.topic, f.partition).unwrap_or(0);
        let start = f.sequence.max(first);
        let end = start.saturating_add(u64::from(f.count)).min(next);
        if start >= end {
            return Vec::new();
        }
        // One job per requester and partition. A FETCH that overlaps or
        // continues the job in progress (a consumer pipelining its windows,
        // or retrying from where it stands) widens it; any other replaces it.
        self.counters.fetches_answered += 1;
        let key = ReplyKey {
            to: f.requester.to_vec(),
            topic: f.topic.to_vec(),
            partition: f.partition.to_vec(),
        };
        if let Some(j) = self.replies.jobs.get_mut(&key) {
            if start <= j.end && j.next <= end {
                j.next = j.next.min(start);
                j.end = j.end.max(end);
            } else {
                *j = ReplyJob { next: start, end };
            }
            return Vec::new();
        }
        if self.replies.jobs.len() >= self.cfg.max_reply_jobs {
            // Its requester FETCHes again.
            self.replies.evict_one();
        }
        self.replies.order.push_back(key.clone());
        self.replies.jobs.insert(key, ReplyJob { next: start, end });
        Vec::new()
    }

    /// Fills `slice` with the next slice of FETCH answers (round robin over
    /// jobs); false if there is nothing to send now. The loop calls it while
    /// its XPUB can take more, so a slow peer cannot make the store buffer.
    pub fn next_reply_slice(&mut self, slice: &mut ReplySlice, now: Instant) -> bool {
        let Some(key) = self.replies.pop_ready(now) else {
            return false;
        };
        let Some(mut job) = self.replies.jobs.remove(&key) else {
            return false;
        };
        let want = ((job.end - job.next) as usize).min(self.cfg.reply_batch_records);
        let first = match self.log.read_into(
            &key.topic,
            &key.partition,
            job.next,
            want,
            self.cfg.reply_batch_bytes,
            &mut slice.records,
        ) {
            Ok(first) => first,
            Err(e) => {
                self.note_failure(e.to_string());
                return false;
            }
        };
        if first != Some(job.next) || slice.records.is_empty() {
            // Nothing (left) at the job's offset: it is done.
            slice.records.clear();
            return false;
        }
        slice.records.truncate(want);
        let n = slice.records.len() as u64;
        slice.to.clone_from(&key.to);
        slice.topic.clone_from(&key.topic);
        slice.partition.clone_from(&key.partition);
        slice.first = job.next;
        slice.form = self.forms.form(&key.to);
        job.next += n;
        self.counters.records_served += n;
        self.counters.bytes_served += slice.records.bytes() as u64;
        if job.next < job.end {
            self.replies.order.push_back(key.clone());
            self.replies.jobs.insert(key, job);
        }
        true
    }

    /// Puts back the records of `slice` from its `sent`-th on (the
    /// requester's queue was full): they are answered again first, within the
    /// requester's job for the partition if it still has one.
    pub fn requeue_slice(&mut self, slice: &ReplySlice, sent: usize, now: Instant) {
        if sent >= slice.len() {
            return;
        }
        let from = slice.first + sent as u64;
        let end = slice.first + slice.len() as u64;
        let key = ReplyKey {
            to: slice.to.clone(),
            topic: slice.topic.clone(),
            partition: slice.partition.clone(),
        };
        if let Some(job) = self.replies.jobs.get_mut(&key) {
            job.next = job.next.min(from);
            // `next_reply_slice` put it at the back just now: search from there.
            if let Some(i) = self.replies.order.iter().rposition(|k| *k == key) {
                self.replies.order.remove(i);
            }
        } else {
            self.replies
                .jobs
                .insert(key.clone(), ReplyJob { next: from, end });
        }
        self.counters.records_served -= end - from;
        self.counters.bytes_served -= slice.records.span(sent, slice.len()) as u64;
        // The requester waits (its jobs with it), doubling while its queue
        // stays full; everyone else's answers go on meanwhile.
        let b = self
            .replies
            .blocked
            .entry(key.to.clone())
            .or_insert_with(|| Blocked {
                until: now,
                wait: Duration::ZERO,
                keys: Vec::new(),
            });
        b.wait = (b.wait * 2).clamp(REPLY_BACKOFF, MAX_REPLY_BACKOFF);
        b.until = now + b.wait;
        b.keys.insert(0, key);
    }

    /// A slice went out whole: its requester reads again, and waits no more
    /// next time its queue is full than the first time.
    pub fn reply_sent(&mut self, slice: &ReplySlice) {
        if !self.replies.blocked.is_empty() {
            if let Some(b) = self.replies.blocked.get(&slice.to) {
                if b.keys.is_empty() {
                    self.replies.blocked.remove(&slice.to);
                }
            }
        }
    }

    /// When FETCH answers may go out next (see [`StoreState::next_reply_slice`]):
    /// `now` if one can, None without any.
    pub fn next_reply_at(&self, now: Instant) -> Option<Instant> {
        self.replies.next_at(now)
    }
}
