//! Reads across segments, verification, and look-up by time.

use std::fs::File;
use std::ops::ControlFlow;

use crate::log::error::{LogError, Result};
use crate::log::format::{record_time, FILE_HEADER_LEN, FORMAT_V1, RECORD_HEADER_LEN};
use crate::log::index::IndexEntry;
use crate::log::io;
use crate::log::segment::{Next, Segment, SegmentReader};
use crate::meta::{self, MetaError, TimeType};

use super::Partition;

/// One record read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// Offset in the partition.
    pub offset: u64,
    /// Append time: when the log appended it, ms since the Unix epoch.
    pub timestamp: u64,
    /// The producer's create time, ms since the Unix epoch; None for a record
    /// that has none (a plain value: appended by [`crate::log::Log::append_batch`],
    /// or stored in format 1).
    pub create_time: Option<u64>,
    /// The record's key, if it has one (it may be empty).
    pub key: Option<Vec<u8>>,
    /// The record's headers in order (repeats allowed).
    pub headers: Vec<(String, Vec<u8>)>,
    /// The record's content.
    pub value: Vec<u8>,
}

impl StoredRecord {
    /// The record at `offset` appended at `timestamp` whose body is `body`.
    pub fn from_body(
        offset: u64,
        timestamp: u64,
        body: &[u8],
    ) -> std::result::Result<StoredRecord, MetaError> {
        let (m, value) = meta::split(body)?;
        Ok(StoredRecord {
            offset,
            timestamp,
            create_time: match m.timestamp() {
                Some((t, TimeType::Create)) => Some(t),
                _ => None,
            },
            key: m.key.map(<[u8]>::to_vec),
            headers: m
                .headers()
                .map(|(n, v)| (n.to_owned(), v.to_vec()))
                .collect(),
            value: value.to_vec(),
        })
    }
}

impl Partition {
    pub(super) fn segments(&self) -> impl Iterator<Item = &Segment> {
        self.sealed
            .values()
            .chain(std::iter::once(&self.active.seg))
    }

    /// The file to read `seg` from: the active segment's own handle while it
    /// is open, else a handle opened into `owned` for this read.
    fn segment_file<'a>(&'a self, seg: &Segment, owned: &'a mut Option<File>) -> Result<&'a File> {
        if seg.base == self.active.seg.base {
            if let Some(f) = self.active.open_file() {
                return Ok(f);
            }
        }
        Ok(owned.insert(io::open(&seg.log_path, true)?))
    }

    /// Reads records from `start` on: at most `max_records`, and no more than
    /// `max_bytes` of bodies except that one record is always returned if any is
    /// available. `start` equal to the next offset returns nothing. A body
    /// that does not parse (never appended by this log) is a
    /// [`LogError::Corruption`].
    pub fn read(
        &self,
        start: u64,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<StoredRecord>> {
        let mut out = Vec::new();
        let mut bad = None;
        self.read_located(
            start,
            max_records,
            max_bytes,
            |seg, pos, offset, timestamp, body| {
                if bad.is_some() {
                    return;
                }
                match StoredRecord::from_body(offset, timestamp, body) {
                    Ok(r) => out.push(r),
                    Err(e) => bad = Some(malformed(seg, pos, offset, e)),
                }
            },
        )?;
        bad.map_or(Ok(out), Err)
    }

    /// Reads every record held, checking each one's CRC, offset and (format
    /// 2) metadata; returns how many there are. Opening checks only each
    /// segment's tail, so this is what finds damage in the middle of a segment.
    pub fn verify(&self) -> Result<u64> {
        let (mut at, next) = (self.first_offset(), self.next_offset());
        while at < next {
            let mut bad = None;
            let n = self.read_located(at, 1 << 16, 8 << 20, |seg, pos, offset, _, body| {
                if bad.is_none() && seg.version != FORMAT_V1 {
                    if let Err(e) = meta::parse(body) {
                        bad = Some(malformed(seg, pos, offset, e));
                    }
                }
            })?;
            if let Some(e) = bad {
                return Err(e);
            }
            if n == 0 {
                // Every segment is walked until its end: not reached.
                return Err(LogError::Corruption {
                    path: self.dir.to_path_buf(),
                    position: 0,
                    offset: at,
                    reason: format!("no record of offset {at} (the partition ends at {next})"),
                });
            }
            at += n as u64;
        }
        Ok(at - self.first_offset())
    }

    /// [`Partition::read`] without building records: `f(offset, append time,
    /// body)` sees each record in order, its body (metadata and value, see
    /// [`crate::meta`]) borrowed from the read buffer. A record of a format 1
    /// segment (a value alone) is handed over as the body
    /// `meta::wrap(Some(append time), value)`, made in a buffer of this call.
    /// `max_bytes` counts bodies. Returns how many records it saw.
    pub fn read_with(
        &self,
        start: u64,
        max_records: usize,
        max_bytes: usize,
        mut f: impl FnMut(u64, u64, &[u8]),
    ) -> Result<usize> {
        self.read_located(start, max_records, max_bytes, |_, _, offset, ts, body| {
            f(offset, ts, body)
        })
    }

    /// [`Partition::read_with`] telling `f` also the segment and the byte
    /// position of each record: `f(segment, position, offset, append time, body)`.
    fn read_located(
        &self,
        start: u64,
        max_records: usize,
        max_bytes: usize,
        mut f: impl FnMut(&Segment, u64, u64, u64, &[u8]),
    ) -> Result<usize> {
        let (first, next) = (self.first_offset(), self.next_offset());
        if start < first || start > next {
            return Err(LogError::OffsetOutOfRange {
                topic: self.topic_lossy(),
                partition: self.name.clone(),
                requested: start,
                first,
                next,
            });
        }
        let mut count = 0usize;
        if start == next || max_records == 0 {
            return Ok(count);
        }
        let seg_start = self
            .sealed
            .range(..=start)
            .next_back()
            .map_or(self.active.seg.base, |(b, _)| *b);
        let chunk = max_bytes
            .saturating_add(self.cfg.index_interval_bytes as usize)
            .saturating_add(2 * RECORD_HEADER_LEN);
        let mut cur = start;
        let mut bytes = 0usize;
        // Format 1 records are wrapped here (allocated at the first one).
        let mut wrapped = Vec::new();
        for seg in self.segments().filter(|s| s.base >= seg_start) {
            if seg.tail.next <= cur {
                continue;
            }
            let v1 = seg.version == FORMAT_V1;
            let hint = seg.index.lookup_offset(cur - seg.base)?;
            let stop = self.walk_segment(seg, hint, chunk, |pos, offset, timestamp, stored| {
                if offset < cur {
                    return ControlFlow::Continue(());
                }
                let body: &[u8] = if v1 {
                    wrapped.clear();
                    meta::wrap(&mut wrapped, Some(timestamp), stored);
                    &wrapped
                } else {
                    stored
                };
                if count > 0 && bytes + body.len() > max_bytes {
                    return ControlFlow::Break(());
                }
                bytes += body.len();
                f(seg, pos, offset, timestamp, body);
                count += 1;
                cur += 1;
                // Done without reading (and checking) the record after.
                if count >= max_records {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            })?;
            if stop.is_some() {
                break;
            }
        }
        Ok(count)
    }

    /// Reads `seg`'s records in order, from `hint`'s position (the segment's
    /// start for None), handing each `(position, offset, append time, bytes as
    /// stored)` to `visit` until it breaks; returns what it broke with (None:
    /// the segment ended).
    ///
    /// An index is a cache, never synced: an entry damaged in the middle (a
    /// page not written back before a power loss) passes the checks at open.
    /// Where the entry's position holds no record of its offset, the segment
    /// is read from its start instead.
    fn walk_segment<R>(
        &self,
        seg: &Segment,
        mut hint: Option<IndexEntry>,
        chunk: usize,
        mut visit: impl FnMut(u64, u64, u64, &[u8]) -> ControlFlow<R>,
    ) -> Result<Option<R>> {
        let mut owned = None;
        let file = self.segment_file(seg, &mut owned)?;
        'attempt: loop {
            let (pos, mut expected) = match hint {
                Some(e) => (u64::from(e.pos), seg.base.saturating_add(u64::from(e.rel))),
                None => (FILE_HEADER_LEN as u64, seg.base),
            };
            let mut reader =
                SegmentReader::new(file, &seg.log_path, pos, seg.tail.size).with_chunk(chunk);
            let mut first = true;
            loop {
                let (pos, reason) = match reader.next()? {
                    Next::Record { pos, header, bytes } if header.offset == expected => {
                        first = false;
                        expected += 1;
                        if let ControlFlow::Break(r) =
                            visit(pos, header.offset, header.timestamp, bytes)
                        {
                            return Ok(Some(r));
                        }
                        continue;
                    }
                    Next::Record { pos, header, .. } => (
                        pos,
                        format!(
                            "record has offset {} where {expected} belongs",
                            header.offset
                        ),
                    ),
                    Next::End => return Ok(None),
                    Next::Torn { pos, reason } | Next::Bad { pos, reason } => (pos, reason),
                };
                if first && hint.is_some() {
                    tracing::warn!(
                        "{}: the index entry for offset {expected} points at byte {pos}, \
                         where {reason}; reading the segment from its start",
                        seg.log_path.display()
                    );
                    hint = None;
                    continue 'attempt;
                }
                return Err(LogError::Corruption {
                    path: seg.log_path.to_path_buf(),
                    position: pos,
                    offset: expected,
                    reason,
                });
            }
        }
    }

    /// The first offset whose record time (the create time, else the append
    /// time: [`record_time`]) is at or after `ts`, if any: the first whose
    /// newest record time so far is, as Kafka's `offsetsForTimes` answers
    /// with create times out of order.
    pub fn offset_for_time(&self, ts: u64) -> Result<Option<u64>> {
        for seg in self.segments() {
            if seg.records() == 0 || seg.tail.max_ts < ts {
                continue;
            }
            let hint = seg.index.lookup_time(ts)?;
            let version = seg.version;
            let found = self.walk_segment(seg, hint, 64 * 1024, |_, offset, append, bytes| {
                if record_time(version, append, bytes) >= ts {
                    ControlFlow::Break(offset)
                } else {
                    ControlFlow::Continue(())
                }
            })?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }
}

/// The error for a record whose body does not parse (its CRC is good: the
/// writer was at fault, not the disk).
fn malformed(seg: &Segment, pos: u64, offset: u64, e: MetaError) -> LogError {
    LogError::Corruption {
        path: seg.log_path.to_path_buf(),
        position: pos,
        offset,
        reason: format!("{e}, in a record whose CRC is good"),
    }
}
