//! The sparse offset index of one segment: fixed-width entries (relative offset,
//! file position, newest record time so far), one per `index_interval_bytes` of
//! records plus one for the last record of a sealed segment. Lookups binary-search
//! the file with positioned reads; only the few entries not yet written (at most
//! [`PENDING_MAX`]) are held in memory. The index is a cache: recovery rebuilds it
//! from the segment whenever it is missing or does not match.

use std::fs::File;
use std::path::Path;

use super::config::LogConfig;
use super::error::Result;
use super::format::{
    decode_file_header, encode_file_header, FILE_HEADER_LEN, INDEX_ENTRY_LEN, INDEX_MAGIC,
};
use super::io;

/// Entries kept in memory before they are appended to the file.
pub const PENDING_MAX: usize = 256;

/// One index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// Offset of the record minus the segment's base offset.
    pub rel: u32,
    /// Byte position of the record in the segment file.
    pub pos: u32,
    /// Newest record time (see [`super::format::record_time`]: the create
    /// time, else the append time) among the segment's records up to this
    /// one.
    pub max_ts: u64,
}

impl IndexEntry {
    fn encode(&self) -> [u8; INDEX_ENTRY_LEN] {
        let mut b = [0u8; INDEX_ENTRY_LEN];
        b[0..4].copy_from_slice(&self.rel.to_be_bytes());
        b[4..8].copy_from_slice(&self.pos.to_be_bytes());
        b[8..16].copy_from_slice(&self.max_ts.to_be_bytes());
        b
    }

    fn decode(b: &[u8]) -> IndexEntry {
        IndexEntry {
            rel: u32::from_be_bytes(b[0..4].try_into().expect("4 bytes")),
            pos: u32::from_be_bytes(b[4..8].try_into().expect("4 bytes")),
            max_ts: u64::from_be_bytes(b[8..16].try_into().expect("8 bytes")),
        }
    }
}

/// The index of one segment.
#[derive(Debug)]
pub struct Index {
    path: Box<Path>,
    on_file: u64,
    pending: Vec<IndexEntry>,
    last: Option<IndexEntry>,
    usable: bool,
}

fn entry_pos(i: u64) -> u64 {
    FILE_HEADER_LEN as u64 + i * INDEX_ENTRY_LEN as u64
}

impl Index {
    /// Creates an empty index file (replacing any) for the segment at `base`,
    /// of format `version` (its segment's: the entries are alike in both).
    pub fn create(cfg: &LogConfig, path: &Path, base: u64, version: u32) -> Result<Index> {
        let f = io::create(cfg, path)?;
        io::write_at(
            cfg,
            &f,
            path,
            &encode_file_header(&INDEX_MAGIC, version, base),
            0,
        )?;
        Ok(Index {
            path: Box::from(path),
            on_file: 0,
            pending: Vec::new(),
            last: None,
            usable: true,
        })
    }

    /// An index that answers every lookup with "scan from the start", for a
    /// read-only log whose index file cannot be trusted.
    pub fn unusable(path: &Path) -> Index {
        Index {
            path: Box::from(path),
            on_file: 0,
            pending: Vec::new(),
            last: None,
            usable: false,
        }
    }

    /// Loads an index file, checking its header, size and last entry against the
    /// segment's length; `Err` says why it must be rebuilt.
    pub fn load(path: &Path, base: u64, log_len: u64) -> std::result::Result<Index, String> {
        let f = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
        let len = f.metadata().map_err(|e| format!("cannot stat: {e}"))?.len();
        let mut h = [0u8; FILE_HEADER_LEN];
        io::read_at(&f, path, &mut h, 0).map_err(|e| e.to_string())?;
        // Either version: the entries are alike.
        let (b, _) = decode_file_header(&h, &INDEX_MAGIC)?;
        if b != base {
            return Err(format!("index names base offset {b}, its segment {base}"));
        }
        let body = len - FILE_HEADER_LEN as u64;
        if body % INDEX_ENTRY_LEN as u64 != 0 {
            return Err(format!("size {len} is not a whole number of entries"));
        }
        let n = body / INDEX_ENTRY_LEN as u64;
        let mut idx = Index {
            path: Box::from(path),
            on_file: n,
            pending: Vec::new(),
            last: None,
            usable: true,
        };
        if n > 0 {
            let last = idx.read_entry(&f, n - 1).map_err(|e| e.to_string())?;
            if u64::from(last.pos) >= log_len || (last.pos as usize) < FILE_HEADER_LEN {
                return Err(format!(
                    "last entry points at byte {}, the segment has {log_len}",
                    last.pos
                ));
            }
            if n > 1 {
                let prev = idx.read_entry(&f, n - 2).map_err(|e| e.to_string())?;
                if prev.rel >= last.rel || prev.pos >= last.pos || prev.max_ts > last.max_ts {
                    return Err("entries are out of order".into());
                }
            }
            idx.last = Some(last);
        }
        Ok(idx)
    }

    /// The index file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The newest entry.
    pub fn last(&self) -> Option<IndexEntry> {
        self.last
    }

    /// Number of entries.
    fn len(&self) -> u64 {
        self.on_file + self.pending.len() as u64
    }

    /// Adds an entry (after the last one), writing pending entries out when
    /// [`PENDING_MAX`] have accumulated.
    pub fn push(&mut self, cfg: &LogConfig, e: IndexEntry) -> Result<()> {
        if !self.usable {
            return Ok(());
        }
        self.pending.push(e);
        self.last = Some(e);
        if self.pending.len() >= PENDING_MAX {
            self.flush(cfg)?;
        }
        Ok(())
    }

    /// Appends the pending entries to the file.
    pub fn flush(&mut self, cfg: &LogConfig) -> Result<()> {
        if self.pending.is_empty() || !self.usable {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(self.pending.len() * INDEX_ENTRY_LEN);
        for e in &self.pending {
            buf.extend_from_slice(&e.encode());
        }
        let f = io::open(&self.path, false)?;
        io::write_at(cfg, &f, &self.path, &buf, entry_pos(self.on_file))?;
        self.on_file += self.pending.len() as u64;
        // Its buffer goes too: a sealed segment, or one idle for long, keeps
        // none (up to PENDING_MAX entries' worth, 4 KiB, per segment).
        self.pending = Vec::new();
        Ok(())
    }

    /// Whether entries wait in memory to be written out.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    fn read_entry(&self, f: &File, i: u64) -> Result<IndexEntry> {
        let mut b = [0u8; INDEX_ENTRY_LEN];
        io::read_at(f, &self.path, &mut b, entry_pos(i))?;
        Ok(IndexEntry::decode(&b))
    }

    fn entry(&self, f: &mut Option<File>, i: u64) -> Result<IndexEntry> {
        if i >= self.on_file {
            return Ok(self.pending[(i - self.on_file) as usize]);
        }
        if f.is_none() {
            *f = Some(io::open(&self.path, true)?);
        }
        self.read_entry(f.as_ref().expect("opened"), i)
    }

    /// The last entry for which `before` holds (`before` must hold for a prefix).
    fn search(&self, before: impl Fn(&IndexEntry) -> bool) -> Result<Option<(u64, IndexEntry)>> {
        if !self.usable {
            return Ok(None);
        }
        let mut f = None;
        let (mut lo, mut hi) = (0u64, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if before(&self.entry(&mut f, mid)?) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            return Ok(None);
        }
        Ok(Some((lo - 1, self.entry(&mut f, lo - 1)?)))
    }

    /// The last entry whose relative offset is at most `rel`.
    pub fn lookup_offset(&self, rel: u64) -> Result<Option<IndexEntry>> {
        Ok(self.search(|e| u64::from(e.rel) <= rel)?.map(|(_, e)| e))
    }

    /// The last entry whose newest record time is before `ts`: every record up
    /// to and including it is older than `ts`.
    pub fn lookup_time(&self, ts: u64) -> Result<Option<IndexEntry>> {
        Ok(self.search(|e| e.max_ts < ts)?.map(|(_, e)| e))
    }

    /// Drops every entry at or after byte `pos` of the segment.
    pub fn truncate_from_pos(&mut self, cfg: &LogConfig, pos: u64) -> Result<()> {
        if !self.usable {
            return Ok(());
        }
        let keep = match self.search(|e| u64::from(e.pos) < pos)? {
            Some((i, _)) => i + 1,
            None => 0,
        };
        if keep >= self.len() {
            return Ok(());
        }
        if keep < self.on_file {
            let f = io::open(&self.path, false)?;
            io::set_len(cfg, &f, &self.path, entry_pos(keep))?;
            self.on_file = keep;
            self.pending.clear();
        } else {
            self.pending.truncate((keep - self.on_file) as usize);
        }
        self.last = if keep == 0 {
            None
        } else {
            Some(self.entry(&mut None, keep - 1)?)
        };
        Ok(())
    }
}
