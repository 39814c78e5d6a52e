//! The on-disk format: magics, versions, the record header, file naming
//! (`{base:020}.log` / `.index`) and the escaping of topic and partition names into
//! directory names. Pure functions, no I/O.

/// First 8 bytes of every segment file.
pub const LOG_MAGIC: [u8; 8] = *b"DAFKALOG";
/// First 8 bytes of every index file.
pub const INDEX_MAGIC: [u8; 8] = *b"DAFKAIDX";
/// Format version of the segments (and their indexes) written now: a record's
/// bytes are its *body*, its metadata (create time, key, headers: see
/// [`crate::meta`]) followed by its value.
pub const FORMAT_VERSION: u32 = 2;
/// The first format version: a record's bytes are its value alone. Still
/// read and recovered; never appended to (a partition whose last segment is
/// in this format rolls a new one at its first append).
pub const FORMAT_V1: u32 = 1;
/// File header: magic (8) | version u32 | reserved u32 (0) | base offset u64.
pub const FILE_HEADER_LEN: usize = 24;
/// Record header: offset u64 | length u32 | crc32c u32 | timestamp u64 (ms).
pub const RECORD_HEADER_LEN: usize = 24;
/// Index entry: relative offset u32 | file position u32 | max timestamp so far u64.
pub const INDEX_ENTRY_LEN: usize = 16;
/// Largest record a segment takes (1 GiB): its body (metadata and value) in
/// format 2.
pub const MAX_VALUE_LEN: usize = 1 << 30;
/// Largest `segment_bytes` (positions in the index are 32-bit).
pub const MAX_SEGMENT_BYTES: u64 = 1 << 31;
/// Longest escaped directory name (most filesystems allow 255 bytes).
pub const MAX_DIR_NAME: usize = 255;

/// File extension of segment files.
pub const LOG_EXT: &str = "log";
/// File extension of index files.
pub const INDEX_EXT: &str = "index";

/// Encodes a file header for a segment or index file of format `version`.
pub fn encode_file_header(magic: &[u8; 8], version: u32, base: u64) -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(magic);
    h[8..12].copy_from_slice(&version.to_be_bytes());
    h[16..24].copy_from_slice(&base.to_be_bytes());
    h
}

/// Checks a file header; returns the base offset and the format version
/// ([`FORMAT_V1`] or [`FORMAT_VERSION`]) it names, or what is wrong.
pub fn decode_file_header(h: &[u8], magic: &[u8; 8]) -> Result<(u64, u32), String> {
    if h.len() < FILE_HEADER_LEN {
        return Err(format!(
            "file header is {} bytes, need {FILE_HEADER_LEN}",
            h.len()
        ));
    }
    if h[..8] != magic[..] {
        return Err(format!(
            "bad magic {:?}, expected {:?} (not a dafka log file?)",
            String::from_utf8_lossy(&h[..8]),
            String::from_utf8_lossy(magic)
        ));
    }
    let version = u32::from_be_bytes(h[8..12].try_into().expect("4 bytes"));
    if version != FORMAT_V1 && version != FORMAT_VERSION {
        return Err(format!(
            "format version {version}, this build reads versions {FORMAT_V1} and {FORMAT_VERSION}"
        ));
    }
    let base = u64::from_be_bytes(h[16..24].try_into().expect("8 bytes"));
    Ok((base, version))
}

/// A decoded record header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// The record's offset in its partition.
    pub offset: u64,
    /// Length of the record's bytes that follow the header (its body in
    /// format 2, its value in format 1).
    pub len: u32,
    /// CRC32C (Castagnoli) over timestamp and the record's bytes.
    pub crc: u32,
    /// Append time, ms since the Unix epoch.
    pub timestamp: u64,
}

impl RecordHeader {
    /// Decodes the 24 header bytes at the start of `b` (which must be long enough).
    pub fn decode(b: &[u8]) -> RecordHeader {
        RecordHeader {
            offset: u64::from_be_bytes(b[0..8].try_into().expect("8 bytes")),
            len: u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
            crc: u32::from_be_bytes(b[12..16].try_into().expect("4 bytes")),
            timestamp: u64::from_be_bytes(b[16..24].try_into().expect("8 bytes")),
        }
    }

    /// Total bytes of the record on disk.
    pub fn record_len(&self) -> u64 {
        RECORD_HEADER_LEN as u64 + u64::from(self.len)
    }
}

/// The CRC a record carries: CRC32C over the timestamp bytes then the
/// record's bytes (the same in both formats).
pub fn record_crc(timestamp: u64, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&timestamp.to_be_bytes()), bytes)
}

/// Appends one encoded record carrying `bytes` (a body in format 2) to `out`.
pub fn encode_record(out: &mut Vec<u8>, offset: u64, timestamp: u64, bytes: &[u8]) {
    encode_record_header(
        out,
        offset,
        bytes.len() as u32,
        record_crc(timestamp, bytes),
        timestamp,
    );
    out.extend_from_slice(bytes);
}

/// Appends a 24-byte record header.
pub fn encode_record_header(out: &mut Vec<u8>, offset: u64, len: u32, crc: u32, timestamp: u64) {
    let mut h = [0u8; RECORD_HEADER_LEN];
    h[0..8].copy_from_slice(&offset.to_be_bytes());
    h[8..12].copy_from_slice(&len.to_be_bytes());
    h[12..16].copy_from_slice(&crc.to_be_bytes());
    h[16..24].copy_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&h);
}

/// A record's time, what positioning by time goes by: the timestamp of its
/// metadata (a create time, or the append time a store gave a plain value),
/// else its append time `append_ts` (format 1, whose records have no
/// metadata, or a body without a timestamp). `bytes` are the record's bytes
/// as stored in a segment of format `version`; a body too short to hold
/// metadata (never written by this log: appends check) counts as having none.
pub fn record_time(version: u32, append_ts: u64, bytes: &[u8]) -> u64 {
    if version == FORMAT_V1 || bytes.len() < crate::meta::PLAIN_LEN {
        return append_ts;
    }
    if bytes[0] & crate::meta::FLAG_NO_TIME != 0 {
        return append_ts;
    }
    u64::from_be_bytes(bytes[1..9].try_into().expect("8 bytes"))
}

/// `{base:020}.{ext}`.
pub fn segment_file_name(base: u64, ext: &str) -> String {
    format!("{base:020}.{ext}")
}

/// Parses `{base:020}.{ext}` back; `None` for any other name.
pub fn parse_segment_file_name(name: &str) -> Option<(u64, &str)> {
    let (stem, ext) = name.split_once('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if ext != LOG_EXT && ext != INDEX_EXT {
        return None;
    }
    Some((stem.parse().ok()?, ext))
}

fn plain(b: u8, first: bool) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && !first)
}

/// Escapes a topic name (arbitrary bytes) into a directory name: ASCII letters,
/// digits, `-`, `_` and non-leading `.` stay as they are, every other byte becomes
/// `%XX` (upper-case hex). The empty name is `%`. The mapping is one-to-one and
/// [`unescape_name`] inverts it.
pub fn escape_name(name: &[u8]) -> Result<String, String> {
    let len = escaped_len(name);
    if len > MAX_DIR_NAME {
        return Err(format!(
            "name escapes to {len} bytes, over the {MAX_DIR_NAME}-byte limit of a directory name"
        ));
    }
    if name.is_empty() {
        return Ok("%".to_string());
    }
    let mut s = String::with_capacity(len);
    for (i, &b) in name.iter().enumerate() {
        if plain(b, i == 0) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(s)
}

/// The length of [`escape_name`]'s answer, without building it.
fn escaped_len(name: &[u8]) -> usize {
    let len: usize = name
        .iter()
        .enumerate()
        .map(|(i, &b)| if plain(b, i == 0) { 1 } else { 3 })
        .sum();
    len.max(1) // the empty name is "%"
}

/// Whether [`escape_name`] takes `name` (its escaped form fits a directory
/// name), without building it.
pub fn name_fits(name: &[u8]) -> bool {
    escaped_len(name) <= MAX_DIR_NAME
}

/// Inverts [`escape_name`]; `None` for a name it would never produce.
pub fn unescape_name(s: &str) -> Option<Vec<u8>> {
    if s == "%" {
        return Some(Vec::new());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            if !hex
                .bytes()
                .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c))
            {
                return None;
            }
            let v = u8::from_str_radix(hex, 16).ok()?;
            if plain(v, out.is_empty()) {
                return None; // non-canonical: escape_name keeps this byte plain
            }
            out.push(v);
            i += 3;
        } else if plain(b[i], out.is_empty()) {
            out.push(b[i]);
            i += 1;
        } else {
            return None;
        }
    }
    Some(out)
}

/// Partition names are Dafka addresses (32 hex digits) in practice; any non-empty
/// name of ASCII letters, digits, `-` and `_` up to 64 bytes is accepted so that it
/// is its own directory name.
pub fn check_partition_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err(format!(
            "partition name {name:?} must be 1 to 64 bytes (a Dafka address is 32 hex digits)"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!(
            "partition name {name:?} may hold only ASCII letters, digits, '-' and '_'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
