//! One segment: a `{base:020}.log` file of records after a file header, and its
//! index. [`SegmentReader`] walks records with positioned reads through a bounded
//! buffer (never the whole file); [`Active`] is the segment being appended to,
//! always of the current [`FORMAT_VERSION`] (records are bodies: metadata and
//! value); sealed segments may be of [`super::format::FORMAT_V1`] (values).

use std::fs::File;
use std::path::{Path, PathBuf};

use super::config::LogConfig;
use super::error::{LogError, Result};
use super::format::{
    encode_file_header, encode_record_header, record_crc, record_time, segment_file_name,
    RecordHeader, FILE_HEADER_LEN, FORMAT_VERSION, INDEX_EXT, LOG_EXT, LOG_MAGIC,
    RECORD_HEADER_LEN,
};
use super::index::{Index, IndexEntry};
use super::io::{self, CountedFile, Gauge};
use crate::meta;

/// Bytes a reader fetches per positioned read (records larger than this are read
/// whole).
pub const READ_CHUNK: usize = 256 * 1024;

/// Where a segment's records end, and what is known about the newest of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tail {
    /// Offset the next record appended would take.
    pub next: u64,
    /// Valid bytes in the file (header included).
    pub size: u64,
    /// Newest record time of the segment's records (the create time, else the
    /// append time: [`record_time`]; 0 when empty): what positioning by time
    /// goes by.
    pub max_ts: u64,
    /// Newest append time of the segment's records (0 when empty): what
    /// retention goes by, so that a producer's clock (or an old record a
    /// store fetches late) never decides when stored data is deleted. A
    /// sealed segment opened from its index takes its last record's.
    pub max_append: u64,
    /// Position of the last record.
    pub last_pos: Option<u64>,
    /// Position of the record the last index entry points at.
    pub last_indexed: Option<u64>,
}

impl Tail {
    /// The tail of an empty segment starting at `base`.
    pub fn empty(base: u64) -> Tail {
        Tail {
            next: base,
            size: FILE_HEADER_LEN as u64,
            max_ts: 0,
            max_append: 0,
            last_pos: None,
            last_indexed: None,
        }
    }
}

/// A segment's files and extent. Sealed segments hold no open file.
#[derive(Debug)]
pub struct Segment {
    /// Offset of the first record.
    pub base: u64,
    /// Format version of the file ([`FORMAT_VERSION`], or
    /// [`super::format::FORMAT_V1`] for a segment an older build wrote).
    pub version: u32,
    /// The `.log` file.
    pub log_path: Box<Path>,
    /// The index.
    pub index: Index,
    /// Extent of the records.
    pub tail: Tail,
}

/// Paths of the segment files at `base` in `dir`.
pub fn paths(dir: &Path, base: u64) -> (PathBuf, PathBuf) {
    (
        dir.join(segment_file_name(base, LOG_EXT)),
        dir.join(segment_file_name(base, INDEX_EXT)),
    )
}

impl Segment {
    /// Number of records.
    pub fn records(&self) -> u64 {
        self.tail.next - self.base
    }
}

/// What [`SegmentReader::next`] found.
#[derive(Debug)]
pub enum Next<'a> {
    /// A complete record with a good CRC (its offset is for the caller to check).
    Record {
        /// Byte position of the record.
        pos: u64,
        /// Its header.
        header: RecordHeader,
        /// Its bytes (a body in format 2, a value in format 1), borrowed
        /// from the reader's buffer.
        bytes: &'a [u8],
    },
    /// The end of the valid bytes.
    End,
    /// A record cut short by the end of the file.
    Torn {
        /// Byte position of the record.
        pos: u64,
        /// What is short.
        reason: String,
    },
    /// A complete record that fails its CRC.
    Bad {
        /// Byte position of the record.
        pos: u64,
        /// What is wrong.
        reason: String,
    },
}

/// Walks the records of a segment file from a position up to an end, with
/// positioned reads into one reusable buffer.
pub struct SegmentReader<'f> {
    file: &'f File,
    path: &'f Path,
    pos: u64,
    end: u64,
    buf: Vec<u8>,
    buf_pos: u64,
    chunk: usize,
}

impl<'f> SegmentReader<'f> {
    /// A reader of `file` between `pos` and `end`.
    pub fn new(file: &'f File, path: &'f Path, pos: u64, end: u64) -> SegmentReader<'f> {
        SegmentReader {
            file,
            path,
            pos,
            end,
            buf: Vec::new(),
            buf_pos: 0,
            chunk: READ_CHUNK,
        }
    }

    /// Sets how many bytes each positioned read fetches (at least one header).
    pub fn with_chunk(mut self, chunk: usize) -> Self {
        self.chunk = chunk.clamp(RECORD_HEADER_LEN, READ_CHUNK);
        self
    }

    /// Position of the next record.
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// Makes `[pos, pos + need)` available in the buffer; false if past the end.
    fn fill(&mut self, need: u64) -> Result<bool> {
        if self.pos + need > self.end {
            return Ok(false);
        }
        let have_end = self.buf_pos + self.buf.len() as u64;
        if self.pos >= self.buf_pos && self.pos + need <= have_end {
            return Ok(true);
        }
        let want = need.max(self.chunk as u64).min(self.end - self.pos) as usize;
        self.buf.resize(want, 0);
        io::read_at(self.file, self.path, &mut self.buf, self.pos)?;
        self.buf_pos = self.pos;
        Ok(true)
    }

    fn slice(&self, pos: u64, len: u64) -> &[u8] {
        let start = (pos - self.buf_pos) as usize;
        &self.buf[start..start + len as usize]
    }

    /// Reads the next record, moving past it when it is good.
    pub fn next(&mut self) -> Result<Next<'_>> {
        let pos = self.pos;
        if pos == self.end {
            return Ok(Next::End);
        }
        if !self.fill(RECORD_HEADER_LEN as u64)? {
            return Ok(Next::Torn {
                pos,
                reason: format!(
                    "record header cut short: {} of {RECORD_HEADER_LEN} bytes",
                    self.end - pos
                ),
            });
        }
        let header = RecordHeader::decode(self.slice(pos, RECORD_HEADER_LEN as u64));
        let len = header.record_len();
        if !self.fill(len)? {
            return Ok(Next::Torn {
                pos,
                reason: format!(
                    "record of {len} bytes cut short: {} bytes left",
                    self.end - pos
                ),
            });
        }
        let value_start = pos + RECORD_HEADER_LEN as u64;
        let crc = record_crc(
            header.timestamp,
            self.slice(value_start, u64::from(header.len)),
        );
        if crc != header.crc {
            return Ok(Next::Bad {
                pos,
                reason: format!(
                    "CRC32C {crc:08x} does not match the stored {:08x}",
                    header.crc
                ),
            });
        }
        self.pos = pos + len;
        Ok(Next::Record {
            pos,
            header,
            bytes: self.slice(value_start, u64::from(header.len)),
        })
    }
}

/// Values at least this long are written in place rather than copied.
const COPY_BELOW: usize = 512;

/// A piece of an append: a range of the scratch buffer or the i-th value.
enum Part {
    Buf(usize, usize),
    Value(usize),
}

/// What an append writes: bodies as they are, or plain values each stored
/// as the body `meta::wrap(Some(append time), value)`.
#[derive(Debug, Clone, Copy)]
pub struct Records<'a> {
    /// The bodies or values.
    pub items: &'a [&'a [u8]],
    /// Whether `items` are plain values, to wrap.
    pub wrap: bool,
}

impl<'a> Records<'a> {
    /// Bytes record `i` takes in a segment after its header.
    pub fn stored_len(&self, i: usize) -> usize {
        self.items[i].len() + if self.wrap { meta::PLAIN_LEN } else { 0 }
    }

    /// Records `i..j`.
    pub fn slice(&self, i: usize, j: usize) -> Records<'a> {
        Records {
            items: &self.items[i..j],
            wrap: self.wrap,
        }
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// The segment being appended to, with its file while that is open.
#[derive(Debug)]
pub struct Active {
    /// Paths, index and extent.
    pub seg: Segment,
    /// The `.log` file; `None` while closed to save a descriptor (a partition
    /// nobody writes to; see [`LogConfig::max_open_files`]). Reopened on use.
    file: Option<CountedFile>,
    gauge: Gauge,
}

/// Writes the header of the empty segment file `file` at `base` and creates
/// its index.
pub(crate) fn start_segment(
    cfg: &LogConfig,
    file: &File,
    log_path: &Path,
    index_path: &Path,
    base: u64,
) -> Result<Index> {
    io::write_at(
        cfg,
        file,
        log_path,
        &encode_file_header(&LOG_MAGIC, FORMAT_VERSION, base),
        0,
    )?;
    Index::create(cfg, index_path, base, FORMAT_VERSION)
}

impl Active {
    /// The active segment `seg`, whose file `file` is open.
    pub fn new(seg: Segment, file: File, gauge: &Gauge) -> Active {
        Active {
            seg,
            file: Some(gauge.track(file)),
            gauge: gauge.clone(),
        }
    }

    /// Creates the files of an empty segment at `base`. On failure it removes
    /// what it created: a stray segment file left behind (a new partition's,
    /// a roll's or a skip's) would sit inside or before the partition's
    /// offset range, and the next open would take it for a torn segment.
    pub fn create(cfg: &LogConfig, dir: &Path, base: u64, gauge: &Gauge) -> Result<Active> {
        let (log_path, index_path) = paths(dir, base);
        let made = (|| {
            let file = gauge.track(io::create(cfg, &log_path)?);
            let index = start_segment(cfg, &file, &log_path, &index_path, base)?;
            Ok((file, index))
        })();
        let (file, index) = match made {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_file(&log_path);
                let _ = std::fs::remove_file(&index_path);
                return Err(e);
            }
        };
        Ok(Active {
            seg: Segment {
                base,
                version: FORMAT_VERSION,
                log_path: log_path.into_boxed_path(),
                index,
                tail: Tail::empty(base),
            },
            file: Some(file),
            gauge: gauge.clone(),
        })
    }

    /// The open file, reopening it if it was closed.
    pub fn file(&mut self, read_only: bool) -> Result<&CountedFile> {
        Self::reopen(&mut self.file, &self.gauge, &self.seg.log_path, read_only)
    }

    fn reopen<'a>(
        slot: &'a mut Option<CountedFile>,
        gauge: &Gauge,
        path: &Path,
        read_only: bool,
    ) -> Result<&'a CountedFile> {
        if slot.is_none() {
            *slot = Some(gauge.track(io::open(path, read_only)?));
        }
        Ok(slot.as_ref().expect("opened above"))
    }

    /// The file if it is open.
    pub fn open_file(&self) -> Option<&CountedFile> {
        self.file.as_ref()
    }

    /// Closes the file (reopened by the next [`Active::file`]).
    pub fn close_file(&mut self) {
        self.file = None;
    }

    /// Rewrites the file header of an empty segment of an older format as the
    /// current one (and its index), synced at once, so that it takes records
    /// of the current format: a file never mixes formats.
    pub fn upgrade_empty(&mut self, cfg: &LogConfig) -> Result<()> {
        debug_assert_eq!(self.seg.records(), 0);
        let base = self.seg.base;
        let file = Self::reopen(&mut self.file, &self.gauge, &self.seg.log_path, false)?;
        let header = encode_file_header(&LOG_MAGIC, FORMAT_VERSION, base);
        io::write_at(cfg, file, &self.seg.log_path, &header, 0)?;
        // Durable before any record of the new format can be.
        io::sync_data(cfg, file, &self.seg.log_path)?;
        self.seg.version = FORMAT_VERSION;
        let index_path = self.seg.index.path().to_path_buf();
        match Index::create(cfg, &index_path, base, FORMAT_VERSION) {
            Ok(index) => self.seg.index = index,
            Err(e) => disable_index(&mut self.seg.index, &e),
        }
        Ok(())
    }

    /// Appends records `first, first + 1, ...` with one write. On error nothing of
    /// the batch is counted: the caller truncates the file back to `tail.size`.
    /// The segment is of the current format (see [`Active::upgrade_empty`]).
    pub fn write(
        &mut self,
        cfg: &LogConfig,
        buf: &mut Vec<u8>,
        first: u64,
        ts: u64,
        records: Records<'_>,
    ) -> Result<()> {
        debug_assert_eq!(self.seg.version, FORMAT_VERSION);
        buf.clear();
        let mut t = self.seg.tail;
        let mut entries = Vec::new();
        // Headers, wrapping metadata and small values are copied into `buf`;
        // large values are written from where they are (pwritev), saving a copy.
        let mut parts: Vec<Part> = Vec::new();
        let mut run_start = 0usize;
        let mut written = 0u64;
        // A batch shares its append time: the CRC of it (and of the metadata
        // that wraps plain values) is computed once.
        let mut wrapping = [0u8; meta::PLAIN_LEN];
        wrapping[0] = meta::FLAG_LOG_APPEND;
        wrapping[1..].copy_from_slice(&ts.to_be_bytes());
        debug_assert!({
            let mut w = Vec::new();
            meta::wrap(&mut w, Some(ts), b"");
            w == wrapping
        });
        let prefix: &[u8] = if records.wrap { &wrapping } else { &[] };
        let pre_crc = crc32c::crc32c_append(crc32c::crc32c(&ts.to_be_bytes()), prefix);
        for (i, v) in records.items.iter().enumerate() {
            let offset = first + i as u64;
            let pos = t.size + written;
            let time = if records.wrap {
                ts
            } else {
                record_time(FORMAT_VERSION, ts, v)
            };
            let max_ts = t.max_ts.max(time);
            let due = index_due(t.last_indexed, pos, cfg);
            if due {
                entries.push(IndexEntry {
                    rel: (offset - self.seg.base) as u32,
                    pos: pos as u32,
                    max_ts,
                });
                t.last_indexed = Some(pos);
            }
            let len = prefix.len() + v.len();
            let crc = crc32c::crc32c_append(pre_crc, v);
            encode_record_header(buf, offset, len as u32, crc, ts);
            buf.extend_from_slice(prefix);
            if v.len() < COPY_BELOW {
                buf.extend_from_slice(v);
            } else {
                parts.push(Part::Buf(run_start, buf.len()));
                parts.push(Part::Value(i));
                run_start = buf.len();
            }
            written += (RECORD_HEADER_LEN + len) as u64;
            t.max_ts = max_ts;
            t.max_append = t.max_append.max(ts);
            t.last_pos = Some(pos);
            t.next = offset + 1;
        }
        parts.push(Part::Buf(run_start, buf.len()));
        let slices: Vec<&[u8]> = parts
            .iter()
            .map(|p| match *p {
                Part::Buf(a, b) => &buf[a..b],
                Part::Value(i) => records.items[i],
            })
            .filter(|s| !s.is_empty())
            .collect();
        let file = Self::reopen(
            &mut self.file,
            &self.gauge,
            &self.seg.log_path,
            cfg.read_only,
        )?;
        io::write_vectored_at(cfg, file, &self.seg.log_path, &slices, t.size)?;
        t.size += written;
        self.seg.tail = t;
        for e in entries {
            push_index(cfg, &mut self.seg.index, e);
        }
        Ok(())
    }

    /// Finishes the segment: an index entry for its last record, pending entries
    /// written out. Returns the sealed segment; its file is closed.
    pub fn seal(mut self, cfg: &LogConfig) -> Segment {
        finish_index(cfg, &mut self.seg);
        self.seg
    }
}

/// Whether a record at `pos` gets an index entry.
pub fn index_due(last_indexed: Option<u64>, pos: u64, cfg: &LogConfig) -> bool {
    match last_indexed {
        None => true,
        Some(li) => pos - li >= u64::from(cfg.index_interval_bytes),
    }
}

/// Adds the entry for the last record (so a sealed segment's index ends with it)
/// and writes pending entries out.
pub fn finish_index(cfg: &LogConfig, seg: &mut Segment) {
    if let Some(last_pos) = seg.tail.last_pos {
        if seg.tail.last_indexed != Some(last_pos) {
            let e = IndexEntry {
                rel: (seg.tail.next - 1 - seg.base) as u32,
                pos: last_pos as u32,
                max_ts: seg.tail.max_ts,
            };
            push_index(cfg, &mut seg.index, e);
            seg.tail.last_indexed = Some(last_pos);
        }
    }
    if let Err(e) = seg.index.flush(cfg) {
        disable_index(&mut seg.index, &e);
    }
}

/// The index is a cache: failing to write it costs speed, not data. Lookups then
/// scan the segment; the next open rebuilds the index.
pub fn push_index(cfg: &LogConfig, index: &mut Index, e: IndexEntry) {
    if let Err(err) = index.push(cfg, e) {
        disable_index(index, &err);
    }
}

fn disable_index(index: &mut Index, err: &LogError) {
    tracing::warn!("index write failed, scanning instead until reopen: {err}");
    *index = Index::unusable(index.path());
}
