//! Appending: the record forms a log takes (values, bodies, checked
//! bodies), the offset rule through [`Log::append_records`], skipping a
//! partition ahead, and the open-files budget appends keep.

use super::damage::damaged_error;
use super::error::{LogError, Result};
use super::format::{check_partition_name, escape_name};
use super::partition::Partition;
use super::segment::Records;
use super::{io, parked, Log};
use super::{list_dirty, lossy, unknown_partition};

/// A scratch buffer larger than this is released after an append.
const SCRATCH_KEEP: usize = 4 << 20;

impl Log {
    /// Appends one plain value at `offset`, which must be the partition's next
    /// offset (see [`Log::append_batch`]).
    pub fn append(
        &mut self,
        topic: &[u8],
        partition: &str,
        offset: u64,
        value: &[u8],
    ) -> Result<()> {
        self.append_batch(topic, partition, offset, &[value])
    }

    /// Appends plain values at `first_offset, first_offset + 1, ...` (one write
    /// per segment touched, one fdatasync at most), each stored as the body
    /// `meta::wrap(Some(append time), value)`: a record with no create time,
    /// key or headers. On error a prefix may be stored: [`Log::next_offset`]
    /// says where the partition stands.
    pub fn append_batch<V: AsRef<[u8]>>(
        &mut self,
        topic: &[u8],
        partition: &str,
        first_offset: u64,
        values: &[V],
    ) -> Result<()> {
        let refs: Vec<&[u8]> = values.iter().map(AsRef::as_ref).collect();
        self.append_records(topic, partition, first_offset, &refs, true)
    }

    /// Appends records given as bodies (metadata then value, see
    /// [`crate::meta`]) at `first_offset, first_offset + 1, ...`, as
    /// [`Log::append_batch`] does values: what a store appends. Every body
    /// must parse ([`crate::meta::parse`]), else nothing is appended and the
    /// error is [`LogError::Invalid`].
    pub fn append_bodies<V: AsRef<[u8]>>(
        &mut self,
        topic: &[u8],
        partition: &str,
        first_offset: u64,
        bodies: &[V],
    ) -> Result<()> {
        for (i, b) in bodies.iter().enumerate() {
            if let Err(e) = crate::meta::parse(b.as_ref()) {
                return Err(LogError::Invalid(format!(
                    "append to {}/{partition}: record {i} of the batch (offset {}): {e}",
                    lossy(topic),
                    first_offset.saturating_add(i as u64)
                )));
            }
        }
        self.append_checked_bodies(topic, partition, first_offset, bodies)
    }

    /// [`Log::append_bodies`] of bodies the caller has already checked (a
    /// store's: the wire decoder parsed every body it received, and the store
    /// made the others): no second parse on the store's per-record path. A
    /// body that does not parse would be stored as it is and reported as
    /// corruption when read.
    pub fn append_checked_bodies<V: AsRef<[u8]>>(
        &mut self,
        topic: &[u8],
        partition: &str,
        first_offset: u64,
        bodies: &[V],
    ) -> Result<()> {
        let refs: Vec<&[u8]> = bodies.iter().map(AsRef::as_ref).collect();
        debug_assert!(refs.iter().all(|b| crate::meta::parse(b).is_ok()));
        self.append_records(topic, partition, first_offset, &refs, false)
    }

    /// The log's clock, ms since the Unix epoch: what appends are stamped with.
    pub fn now(&self) -> u64 {
        self.cfg.now()
    }

    /// [`Log::append_batch`] (`wrap`: `items` are values) and
    /// [`Log::append_bodies`] (bodies, checked).
    pub(super) fn append_records(
        &mut self,
        topic: &[u8],
        partition: &str,
        first_offset: u64,
        items: &[&[u8]],
        wrap: bool,
    ) -> Result<()> {
        if self.cfg.read_only {
            return Err(LogError::ReadOnly(self.root.clone()));
        }
        if !self.buffer.is_empty() {
            // Buffered appends go first: a partition's records in order.
            self.flush_writes()?;
        }
        if first_offset.checked_add(items.len() as u64).is_none() {
            return Err(LogError::Invalid(format!(
                "offsets {first_offset} + {} records overflow 64 bits",
                items.len()
            )));
        }
        let key = (topic.to_vec(), partition.to_owned());
        if !self.parts.contains_key(&key) {
            if let Some(d) = self.damaged.get(&key) {
                // Never create over a partition's damaged files.
                return Err(damaged_error(&key, &d.why));
            }
            if let Some(expected) = self.parked.get(topic, partition) {
                // It goes on where it stood: a directory again.
                if first_offset != expected {
                    return Err(LogError::OffsetMismatch {
                        topic: lossy(topic),
                        partition: partition.to_owned(),
                        expected,
                        got: first_offset,
                    });
                }
            }
            if items.is_empty() {
                return Ok(());
            }
            check_partition_name(partition).map_err(LogError::Invalid)?;
            let tdir = escape_name(topic)
                .map_err(|e| LogError::Invalid(format!("topic {:?}: {e}", lossy(topic))))?;
            let dir = self.root.join(tdir).join(partition);
            let p = Partition::create(
                self.cfg.clone(),
                &self.root,
                dir,
                topic.to_vec(),
                partition.to_owned(),
                first_offset,
                &self.gauge,
            )?;
            // Its registry line is stale now: the directory wins.
            self.parked.remove(topic, partition);
            self.parts.insert(key.clone(), Box::new(p));
        }
        let now = self.cfg.now();
        self.uses += 1;
        let p = self.parts.get_mut(&key).expect("inserted above");
        p.last_used = self.uses;
        let inline_sync = !self.sync_elsewhere;
        let r = p
            .append(
                &mut self.scratch,
                first_offset,
                Records { items, wrap },
                now,
            )
            .and_then(|()| {
                if inline_sync {
                    p.sync_after_append(now)
                } else {
                    Ok(())
                }
            });
        list_dirty(&mut self.dirty, &key, p);
        if self.scratch.capacity() > SCRATCH_KEEP {
            self.scratch = Vec::new();
        }
        self.close_idle_files();
        r
    }

    /// Drops every record of a partition and continues it at `offset`, past
    /// its next offset (see [`Partition::skip_to`]): for a store whose peers
    /// no longer hold the records in between. Durable with the next sync.
    pub fn skip_to(&mut self, topic: &[u8], partition: &str, offset: u64) -> Result<()> {
        if self.cfg.read_only {
            return Err(LogError::ReadOnly(self.root.clone()));
        }
        self.flush_writes()?;
        let key = (topic.to_vec(), partition.to_owned());
        if let Some(next) = self.parked.get(topic, partition) {
            // No record to drop: it stands at `offset` from now on.
            if offset <= next {
                return Err(LogError::Invalid(format!(
                    "skip to offset {offset}: the partition already reaches {next}"
                )));
            }
            let at = self.cfg.now();
            self.write_parked(&[(key, offset)], at)?;
            self.parked
                .insert(topic, partition, parked::Spot { next: offset, at });
            return Ok(());
        }
        let p = self
            .parts
            .get_mut(&key)
            .ok_or_else(|| unknown_partition(topic, partition))?;
        let r = p.skip_to(offset);
        list_dirty(&mut self.dirty, &key, p);
        self.close_idle_files();
        r
    }

    /// Segment files this log holds open now.
    pub fn open_files(&self) -> usize {
        self.gauge.get()
    }

    /// The most segment files this log had open at once.
    pub fn open_files_peak(&self) -> usize {
        self.gauge.peak()
    }

    /// Past [`LogConfig::max_open_files`]: closes the active files of the
    /// partitions appended to least recently, down to three quarters of the
    /// budget (so the scan runs once per quarter budget of new files, not at
    /// every append). Appends not yet synced lose nothing: the written pages
    /// belong to the file, and a sync opens it by path.
    ///
    /// The same when all the logs of the process together are past half the
    /// open-files limit (two stores in one process). A log holding at least
    /// its fair share of the files closes its own least recent ones until the
    /// total is back to three quarters of that; a smaller one keeps only what
    /// the others leave of it. An idle log does this at its next
    /// [`Log::tick`].
    pub(super) fn close_idle_files(&mut self) {
        let (open, all) = (self.gauge.get(), io::process_open_files());
        if open <= self.max_open && all <= self.process_max {
            return;
        }
        let own = if open > self.max_open {
            open - (self.max_open - self.max_open / 4)
        } else {
            0
        };
        let shared = if all > self.process_max {
            let target = self.process_max - self.process_max / 4;
            if open * io::process_logs() >= all {
                all - target
            } else {
                open.saturating_sub(target.saturating_sub(all - open))
            }
        } else {
            0
        };
        if own == 0 && shared == 0 {
            return;
        }
        let mut stamps: Vec<u64> = self
            .parts
            .values()
            .filter(|p| p.file_open())
            .map(|p| p.last_used)
            .collect();
        let excess = own.max(shared).min(stamps.len());
        if excess == 0 {
            return;
        }
        let (_, cutoff, _) = stamps.select_nth_unstable(excess - 1);
        let cutoff = *cutoff;
        for p in self.parts.values_mut() {
            if p.last_used <= cutoff && p.file_open() {
                p.close_file();
            }
        }
    }
}
