//! Records held past a gap, waiting for the records before them: a consumer's
//! (per partition, until it can deliver them in order) and a store's (until it
//! can append them). Offset → value, with the values' bytes counted here so
//! that no caller keeps the count by hand.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

#[derive(Debug, Default)]
pub(crate) struct Held {
    records: BTreeMap<u64, Vec<u8>>,
    /// Bytes of the values in `records`.
    bytes: usize,
    /// Bytes held by every `Held` sharing it (a store's partitions), kept
    /// here as `bytes` is, so that no caller counts by hand.
    total: Option<Arc<AtomicUsize>>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.set_bytes(0);
    }
}

impl Held {
    /// A `Held` whose bytes also count in `total`.
    pub fn counted(total: Arc<AtomicUsize>) -> Self {
        Self {
            records: BTreeMap::new(),
            bytes: 0,
            total: Some(total),
        }
    }

    fn set_bytes(&mut self, bytes: usize) {
        if bytes == self.bytes {
            return;
        }
        if let Some(t) = &self.total {
            if bytes >= self.bytes {
                t.fetch_add(bytes - self.bytes, Relaxed);
            } else {
                t.fetch_sub(self.bytes - bytes, Relaxed);
            }
        }
        self.bytes = bytes;
    }

    /// Bytes held by every `Held` counted with this one (its own if none).
    fn total(&self) -> usize {
        self.total.as_ref().map_or(self.bytes, |t| t.load(Relaxed))
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn contains(&self, offset: u64) -> bool {
        self.records.contains_key(&offset)
    }

    /// The lowest offset held.
    pub fn first(&self) -> Option<u64> {
        self.records.keys().next().copied()
    }

    /// The lowest offset held at or past `from`.
    pub fn first_from(&self, from: u64) -> Option<u64> {
        self.records.range(from..).next().map(|(&k, _)| k)
    }

    #[cfg(test)]
    pub fn offsets(&self) -> impl Iterator<Item = u64> + '_ {
        self.records.keys().copied()
    }

    pub fn remove(&mut self, offset: u64) -> Option<Vec<u8>> {
        let v = self.records.remove(&offset)?;
        self.set_bytes(self.bytes - v.len());
        Some(v)
    }

    /// Holds `value` at `offset` whatever the bounds (one taken back).
    pub fn insert(&mut self, offset: u64, value: Vec<u8>) {
        let mut bytes = self.bytes + value.len();
        if let Some(old) = self.records.insert(offset, value) {
            bytes -= old.len();
        }
        self.set_bytes(bytes);
    }

    /// Drops everything held below `offset`.
    pub fn drop_below(&mut self, offset: u64) {
        let mut bytes = self.bytes;
        while let Some(e) = self.records.first_entry() {
            if *e.key() >= offset {
                break;
            }
            bytes -= e.remove().len();
        }
        self.set_bytes(bytes);
    }

    pub fn clear(&mut self) {
        self.records.clear();
        self.set_bytes(0);
    }

    /// Holds `value` at `offset` within `max_records` and `max_bytes`, and
    /// within `max_total` bytes held by every `Held` counted with this one.
    /// Past a bound, this one's records farthest from the gap make room:
    /// those nearest it are kept, so a skip to the first record held (the gap
    /// is deleted everywhere) never jumps over records a node answered with.
    /// A record farther than all held is the one let go. `keep_one`: a record
    /// is held when nothing is, however large (it may be all that follows the
    /// gap). Returns whether it is held, and how many held records were let
    /// go (fetched again later, once the gap before them closes).
    pub fn hold_bounded(
        &mut self,
        offset: u64,
        value: &[u8],
        (max_records, max_bytes, max_total): (usize, usize, usize),
        keep_one: bool,
    ) -> (bool, u64) {
        let over = |h: &Self| {
            h.len() >= max_records
                || h.bytes + value.len() > max_bytes
                || h.total() + value.len() > max_total
        };
        let mut let_go = 0;
        while over(self) {
            let Some(e) = self.records.last_entry() else {
                break;
            };
            if *e.key() < offset {
                break;
            }
            let n = e.remove().len();
            self.set_bytes(self.bytes - n);
            let_go += 1;
        }
        let held = (keep_one && self.is_empty()) || !over(self);
        if held {
            self.insert(offset, value.to_vec());
        }
        (held, let_go)
    }
}

#[cfg(test)]
mod tests;
