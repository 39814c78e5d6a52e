//! Recovery at open. Sealed segments are checked cheaply (the last index entry
//! must point at a good record that ends the file) and scanned in full only when
//! that fails. The active (last) segment is validated record by record from its
//! last index entry: a torn tail is truncated; damage followed by a valid record
//! is never cut off but reported with path and offset. A missing or inconsistent
//! index is rebuilt from the segment.
//!
//! A torn write can also end the last *sealed* segment, when the machine lost
//! power soon after a roll with `fsync=interval`: that segment was never synced, so
//! nothing after it was reported durable. Recovery then truncates it, deletes the
//! segment after it and appends to it again (not in a read-only open, which
//! reports the damage instead).
//!
//! Segments of both format versions recover alike (the record framing and its
//! CRC are the same in both); a rebuilt index takes its segment's version, and
//! the newest record time is taken from each record's body in format 2 (its
//! metadata's timestamp) and from its append time in format 1.

use std::fs::File;
use std::path::Path;

use super::config::LogConfig;
use super::error::{LogError, Result};
use super::format::{
    decode_file_header, record_crc, record_time, RecordHeader, FILE_HEADER_LEN, FORMAT_V1,
    FORMAT_VERSION, LOG_MAGIC, RECORD_HEADER_LEN,
};
use super::index::{Index, IndexEntry};
use super::io::{self, Gauge};
use super::segment::{
    finish_index, index_due, paths, push_index, Active, Next, Segment, SegmentReader, Tail,
};

/// What recovery does with a damaged tail of the last segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryPolicy {
    /// Truncate any damaged tail (torn, bad CRC, wrong offset) as long as no valid
    /// record follows the damage; otherwise refuse to open.
    #[default]
    TolerateTailCorruption,
    /// Truncate only a torn tail (a last record cut short by the end of the file,
    /// or zero bytes); refuse to open on any other damage.
    AbsoluteConsistency,
}

impl std::str::FromStr for RecoveryPolicy {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "tolerate_tail_corruption" => Ok(RecoveryPolicy::TolerateTailCorruption),
            "absolute_consistency" => Ok(RecoveryPolicy::AbsoluteConsistency),
            _ => Err(format!(
                "recovery policy {s:?}: expected \"tolerate_tail_corruption\" or \"absolute_consistency\""
            )),
        }
    }
}

/// Damage found by a scan.
struct Damage {
    pos: u64,
    torn: bool,
    reason: String,
}

struct Scan {
    tail: Tail,
    damage: Option<Damage>,
}

/// Validates records from `start` (an index entry, or the first record) to `end`
/// of a segment of format `version`, adding index entries as it goes.
#[allow(clippy::too_many_arguments)]
fn scan(
    cfg: &LogConfig,
    file: &File,
    path: &Path,
    base: u64,
    version: u32,
    start: Option<IndexEntry>,
    end: u64,
    index: &mut Index,
) -> Result<Scan> {
    let (pos, mut expected, mut max_ts, mut last_indexed) = match start {
        Some(e) => (
            u64::from(e.pos),
            base.saturating_add(u64::from(e.rel)),
            e.max_ts,
            Some(u64::from(e.pos)),
        ),
        None => (FILE_HEADER_LEN as u64, base, 0, None),
    };
    // Format 1 records' times are their append times, so the entry's newest
    // time is the newest append time too; a format 2 entry's is not, and the
    // records from the entry on (the last one's append time is the newest,
    // unless the clock stepped back) tell it.
    let mut max_append = if version == FORMAT_V1 { max_ts } else { 0 };
    let mut last_pos = None;
    let mut reader = SegmentReader::new(file, path, pos, end);
    let damage = loop {
        match reader.next()? {
            Next::Record { pos, header, bytes } => {
                if header.offset != expected {
                    break Some(Damage {
                        pos,
                        torn: false,
                        reason: format!(
                            "record has offset {} where {expected} belongs",
                            header.offset
                        ),
                    });
                }
                max_ts = max_ts.max(record_time(version, header.timestamp, bytes));
                max_append = max_append.max(header.timestamp);
                if index_due(last_indexed, pos, cfg) {
                    push_index(
                        cfg,
                        index,
                        IndexEntry {
                            rel: (expected - base) as u32,
                            pos: pos as u32,
                            max_ts,
                        },
                    );
                    last_indexed = Some(pos);
                }
                last_pos = Some(pos);
                expected += 1;
            }
            Next::End => break None,
            Next::Torn { pos, reason } => {
                break Some(Damage {
                    pos,
                    torn: true,
                    reason,
                })
            }
            Next::Bad { pos, reason } => {
                break Some(Damage {
                    pos,
                    torn: false,
                    reason,
                })
            }
        }
    };
    let size = damage.as_ref().map_or(end, |d| d.pos);
    Ok(Scan {
        tail: Tail {
            next: expected,
            size,
            max_ts,
            max_append,
            last_pos,
            last_indexed,
        },
        damage,
    })
}

/// Checks a segment's file header; returns its format version.
fn check_header(file: &File, path: &Path, base: u64, len: u64) -> Result<u32> {
    let corrupt = |reason: String| LogError::Corruption {
        path: path.to_path_buf(),
        position: 0,
        offset: base,
        reason,
    };
    if len < FILE_HEADER_LEN as u64 {
        return Err(corrupt(format!(
            "file of {len} bytes has no complete header"
        )));
    }
    let mut h = [0u8; FILE_HEADER_LEN];
    io::read_at(file, path, &mut h, 0)?;
    let (b, version) = decode_file_header(&h, &LOG_MAGIC).map_err(corrupt)?;
    if b != base {
        return Err(corrupt(format!(
            "header names base offset {b}, the file name {base}"
        )));
    }
    Ok(version)
}

fn file_len(file: &File, path: &Path) -> Result<u64> {
    Ok(file
        .metadata()
        .map_err(|e| LogError::io("stat", path, e))?
        .len())
}

fn fresh_index(cfg: &LogConfig, path: &Path, base: u64, version: u32) -> Result<Index> {
    if cfg.read_only {
        Ok(Index::unusable(path))
    } else {
        Index::create(cfg, path, base, version)
    }
}

/// A sealed segment as recovery found it.
pub(crate) enum Sealed {
    /// Whole.
    Whole(Segment),
    /// It ends in a torn write (cut short by the end of the file, zero bytes, or
    /// records missing at its end). A segment that was synced does not tear, and
    /// the durable offset only moves past a sealed segment once it is synced, so
    /// nothing after the tear was ever reported durable. The error describes it.
    TornTail(LogError),
}

/// Opens a sealed segment whose successor starts at `next_base`.
pub(crate) fn open_sealed(
    cfg: &LogConfig,
    dir: &Path,
    base: u64,
    next_base: u64,
) -> Result<Sealed> {
    let (log_path, index_path) = paths(dir, base);
    let file = io::open(&log_path, true)?;
    let len = file_len(&file, &log_path)?;
    let version = check_header(&file, &log_path, base, len)?;
    if let Ok(index) = Index::load(&index_path, base, len) {
        if let Some(last) = index.last() {
            let mut reader = SegmentReader::new(&file, &log_path, u64::from(last.pos), len)
                .with_chunk(RECORD_HEADER_LEN);
            if let Next::Record { header, bytes, .. } = reader.next()? {
                let time = record_time(version, header.timestamp, bytes);
                let fits = Some(header.offset) == base.checked_add(u64::from(last.rel))
                    && header.offset.checked_add(1) == Some(next_base)
                    && reader.pos() == len;
                if fits {
                    // The last record's append time is the newest (exactly so
                    // in format 1, whose entries track append times).
                    let max_append = if version == FORMAT_V1 {
                        last.max_ts.max(header.timestamp)
                    } else {
                        header.timestamp
                    };
                    let tail = Tail {
                        next: next_base,
                        size: len,
                        max_ts: last.max_ts.max(time),
                        max_append,
                        last_pos: Some(u64::from(last.pos)),
                        last_indexed: Some(u64::from(last.pos)),
                    };
                    return Ok(Sealed::Whole(Segment {
                        base,
                        version,
                        log_path: log_path.into_boxed_path(),
                        index,
                        tail,
                    }));
                }
            }
        }
    }
    tracing::info!("rebuilding the index of {}", log_path.display());
    let mut index = fresh_index(cfg, &index_path, base, version)?;
    let s = scan(cfg, &file, &log_path, base, version, None, len, &mut index)?;
    if let Some(d) = s.damage {
        let zeros = all_zero(&file, &log_path, d.pos, len)?;
        if d.torn && !zeros {
            // Cut short by the end of the file, as a torn write looks; but a
            // damaged length field looks the same, and then valid records
            // follow. Those are no torn tail: refuse before anything (the
            // segments after this one) is dropped for it.
            if let Some((pos, offset)) =
                find_valid_after(&file, &log_path, d.pos, len, s.tail.next)?
            {
                return Err(LogError::Corruption {
                    path: log_path,
                    position: d.pos,
                    offset: s.tail.next,
                    reason: format!(
                        "{}, yet a valid record (offset {offset}) follows at byte {pos}, in a \
                         sealed segment with later segments after it; it is not a torn \
                         tail, so nothing was changed",
                        d.reason
                    ),
                });
            }
        }
        let torn = d.torn || zeros;
        let e = LogError::Corruption {
            path: log_path,
            position: d.pos,
            offset: s.tail.next,
            reason: format!(
                "{} in a sealed segment, with later segments after it",
                d.reason
            ),
        };
        return if torn {
            Ok(Sealed::TornTail(e))
        } else {
            Err(e)
        };
    }
    if s.tail.next != next_base {
        return Ok(Sealed::TornTail(LogError::Corruption {
            path: log_path,
            position: len,
            offset: s.tail.next,
            reason: format!(
                "the segment ends before offset {} but the next segment starts at {next_base}",
                s.tail.next
            ),
        }));
    }
    let mut seg = Segment {
        base,
        version,
        log_path: log_path.into_boxed_path(),
        index,
        tail: s.tail,
    };
    finish_index(cfg, &mut seg);
    Ok(Sealed::Whole(seg))
}

/// Whether every byte in `[from, end)` is zero (a preallocated or zero-filled tail).
fn all_zero(file: &File, path: &Path, from: u64, end: u64) -> Result<bool> {
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = from;
    while pos < end {
        let n = (end - pos).min(buf.len() as u64) as usize;
        io::read_at(file, path, &mut buf[..n], pos)?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        pos += n as u64;
    }
    Ok(true)
}

/// Looks for a complete, CRC-valid record with a plausible offset anywhere after
/// the damage at `from`; returns its position and offset.
fn find_valid_after(
    file: &File,
    path: &Path,
    from: u64,
    end: u64,
    expected: u64,
) -> Result<Option<(u64, u64)>> {
    const WINDOW: u64 = 1 << 20;
    let hl = RECORD_HEADER_LEN as u64;
    // Saturating: offsets near u64::MAX must not wrap to a bound no record
    // meets (which would truncate valid records as a torn tail).
    let max_offset = expected.saturating_add((end - from) / hl).saturating_add(1);
    let mut start = from + 1;
    let mut buf = Vec::new();
    while start + hl <= end {
        let stop = (start + WINDOW + hl).min(end);
        buf.resize((stop - start) as usize, 0);
        io::read_at(file, path, &mut buf, start)?;
        let mut i = 0usize;
        while i + RECORD_HEADER_LEN <= buf.len() && (i as u64) < WINDOW {
            let h = RecordHeader::decode(&buf[i..]);
            let pos = start + i as u64;
            if h.offset >= expected && h.offset <= max_offset && pos + h.record_len() <= end {
                let vs = i + RECORD_HEADER_LEN;
                let ve = vs + h.len as usize;
                let crc = if ve <= buf.len() {
                    record_crc(h.timestamp, &buf[vs..ve])
                } else {
                    let mut v = vec![0u8; h.len as usize];
                    io::read_at(file, path, &mut v, pos + hl)?;
                    record_crc(h.timestamp, &v)
                };
                if crc == h.crc {
                    return Ok(Some((pos, h.offset)));
                }
            }
            i += 1;
        }
        start += WINDOW;
    }
    Ok(None)
}

/// Opens and recovers the last segment of a partition.
pub(crate) fn open_active(cfg: &LogConfig, dir: &Path, base: u64, gauge: &Gauge) -> Result<Active> {
    let (log_path, index_path) = paths(dir, base);
    let file = io::open(&log_path, cfg.read_only)?;
    let len = file_len(&file, &log_path)?;
    if len < FILE_HEADER_LEN as u64 {
        // A crash while the segment was being created: it holds no record.
        tracing::warn!(
            "{}: incomplete file header, recreating the empty segment",
            log_path.display()
        );
        let mut index = Index::unusable(&index_path);
        if !cfg.read_only {
            io::set_len(cfg, &file, &log_path, 0)?;
            index = crate::log::segment::start_segment(cfg, &file, &log_path, &index_path, base)?;
        }
        let seg = Segment {
            base,
            version: FORMAT_VERSION,
            log_path: log_path.into_boxed_path(),
            index,
            tail: Tail::empty(base),
        };
        return Ok(Active::new(seg, file, gauge));
    }
    let version = check_header(&file, &log_path, base, len)?;

    let mut attempt = None;
    match Index::load(&index_path, base, len) {
        Ok(mut index) => {
            let start = index.last();
            let s = scan(cfg, &file, &log_path, base, version, start, len, &mut index)?;
            let bad_start =
                matches!((&s.damage, start), (Some(d), Some(e)) if d.pos == u64::from(e.pos));
            if !bad_start {
                attempt = Some((index, s));
            }
        }
        Err(reason) => tracing::info!("rebuilding the index of {}: {reason}", log_path.display()),
    }
    let (mut index, s) = match attempt {
        Some(a) => a,
        None => {
            let mut index = fresh_index(cfg, &index_path, base, version)?;
            let s = scan(cfg, &file, &log_path, base, version, None, len, &mut index)?;
            (index, s)
        }
    };
    if let Some(d) = &s.damage {
        let zeros = all_zero(&file, &log_path, d.pos, len)?;
        let refuse = |reason: String| LogError::Corruption {
            path: log_path.clone(),
            position: d.pos,
            offset: s.tail.next,
            reason,
        };
        if cfg.recovery == crate::log::RecoveryPolicy::AbsoluteConsistency && !d.torn && !zeros {
            return Err(refuse(format!(
                "{} (recovery policy absolute_consistency truncates only torn tails)",
                d.reason
            )));
        }
        if !zeros {
            if let Some((pos, offset)) =
                find_valid_after(&file, &log_path, d.pos, len, s.tail.next)?
            {
                return Err(refuse(format!(
                    "{}, yet a valid record (offset {offset}) follows at byte {pos}",
                    d.reason
                )));
            }
        }
        tracing::warn!(
            "{}: truncating a damaged tail at byte {} ({}), dropping {} bytes",
            log_path.display(),
            d.pos,
            d.reason,
            len - d.pos
        );
        if !cfg.read_only {
            io::set_len(cfg, &file, &log_path, d.pos)?;
            index.truncate_from_pos(cfg, d.pos)?;
        }
    }
    let seg = Segment {
        base,
        version,
        log_path: log_path.into_boxed_path(),
        index,
        tail: s.tail,
    };
    Ok(Active::new(seg, file, gauge))
}
