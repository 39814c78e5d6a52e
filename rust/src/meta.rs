//! A record's metadata beyond its value: its create time, an optional key
//! and optional headers (ordered `(name, value)` pairs, repeats allowed, as
//! Kafka's). One encoding, used on the wire (the META-RECORD-BATCH
//! extension's meta frame, PROTOCOL.md) and in the log (format version 2
//! stores it in front of the value). Pure functions, no I/O.
//!
//! ```text
//! meta     = flags timestamp [key] [headers]
//! flags    = 1 octet: bit 0 key present, bit 1 headers present,
//!            bit 2 the timestamp is a store's append time (the record has
//!            no create time), bit 3 no timestamp at all (the field is 0);
//!            others 0, bits 2 and 3 not both
//! timestamp= 8 octets, ms since the Unix epoch: the create time (bits 2, 3 clear)
//! key      = bytes
//! headers  = varint count (at least 1) + count * (name value)
//! name     = bytes, UTF-8        value = bytes
//! bytes    = varint length + that many octets
//! varint   = unsigned LEB128, 1 to 5 octets, at most 2^32 - 1 (as Kafka's records)
//! ```
//!
//! A record with neither key nor headers costs [`PLAIN_LEN`] (9) bytes.
//!
//! A *body* is a record's metadata followed by its value: what RECORD-BATCHes
//! with metadata carry per record, what the log stores, what a producer holds.
//! [`wrap`] makes one of a plain value (a C producer's record), [`split`]
//! takes one apart.

use std::fmt;

/// Flag bit: a key follows the timestamp.
pub const FLAG_KEY: u8 = 1;
/// Flag bit: headers follow the key (or the timestamp).
pub const FLAG_HEADERS: u8 = 2;
/// Flag bit: the timestamp is a store's append time, not a create time.
pub const FLAG_LOG_APPEND: u8 = 4;
/// Flag bit: no timestamp is known (the timestamp field is 0).
pub const FLAG_NO_TIME: u8 = 8;
const KNOWN_FLAGS: u8 = FLAG_KEY | FLAG_HEADERS | FLAG_LOG_APPEND | FLAG_NO_TIME;
/// Bytes of the metadata of a record with neither key nor headers.
pub const PLAIN_LEN: usize = 9;

/// What a record's timestamp is (Kafka's `timestampType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeType {
    /// Set by the producer (`send`'s `timestamp`, or the time of `send`): 0.
    Create,
    /// A store's append time, for a record that has no create time: 1.
    LogAppend,
}

impl TimeType {
    /// Kafka's number for it: 0 create time, 1 log-append time.
    pub fn code(self) -> i32 {
        match self {
            TimeType::Create => 0,
            TimeType::LogAppend => 1,
        }
    }
}

/// Why metadata could not be parsed (malformed: dropped and counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaError(pub &'static str);

impl fmt::Display for MetaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed record metadata: {}", self.0)
    }
}

impl std::error::Error for MetaError {}

/// Appends the metadata of a record with neither key nor headers.
pub fn encode_plain(out: &mut Vec<u8>, create_time: u64) {
    out.push(0);
    out.extend_from_slice(&create_time.to_be_bytes());
}

/// Appends the body of a plain value (a record without metadata, e.g. from a
/// C-reference producer): `append_time` is the time a store appends it at,
/// None where nobody knows a time (a consumer receiving it live).
pub fn wrap(out: &mut Vec<u8>, append_time: Option<u64>, value: &[u8]) {
    match append_time {
        Some(t) => {
            out.push(FLAG_LOG_APPEND);
            out.extend_from_slice(&t.to_be_bytes());
        }
        None => {
            out.push(FLAG_NO_TIME);
            out.extend_from_slice(&0u64.to_be_bytes());
        }
    }
    out.extend_from_slice(value);
}

/// Takes a body apart: its metadata and its value.
pub fn split(body: &[u8]) -> Result<(MetaRef<'_>, &[u8]), MetaError> {
    parse(body)
}

/// The value of a body (what a node that knows no metadata receives).
pub fn value_of(body: &[u8]) -> Result<&[u8], MetaError> {
    parse(body).map(|(_, v)| v)
}

/// Appends a record's metadata. Lengths must fit 32 bits (callers bound
/// records far below that with `max_record_bytes`).
pub fn encode<N: AsRef<str>, V: AsRef<[u8]>>(
    out: &mut Vec<u8>,
    create_time: u64,
    key: Option<&[u8]>,
    headers: &[(N, V)],
) {
    let mut flags = 0;
    if key.is_some() {
        flags |= FLAG_KEY;
    }
    if !headers.is_empty() {
        flags |= FLAG_HEADERS;
    }
    out.push(flags);
    out.extend_from_slice(&create_time.to_be_bytes());
    if let Some(k) = key {
        put_bytes(out, k);
    }
    if !headers.is_empty() {
        put_varint(out, headers.len());
        for (n, v) in headers {
            put_bytes(out, n.as_ref().as_bytes());
            put_bytes(out, v.as_ref());
        }
    }
}

/// The encoded length of [`encode`]'s output, without encoding.
pub fn encoded_len<N: AsRef<str>, V: AsRef<[u8]>>(key: Option<&[u8]>, headers: &[(N, V)]) -> usize {
    let bytes = |b: usize| varint_len(b) + b;
    let mut n = PLAIN_LEN;
    if let Some(k) = key {
        n += bytes(k.len());
    }
    if !headers.is_empty() {
        n += varint_len(headers.len());
        for (h, v) in headers {
            n += bytes(h.as_ref().len()) + bytes(v.as_ref().len());
        }
    }
    n
}

/// Octets of `n` as a varint.
fn varint_len(n: usize) -> usize {
    match n {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0xfff_ffff => 4,
        _ => 5,
    }
}

/// Appends `n` (below 2^32: callers bound records far below that) as an
/// unsigned LEB128 varint.
fn put_varint(out: &mut Vec<u8>, n: usize) {
    let mut n = n as u32;
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len());
    out.extend_from_slice(b);
}

/// A record's metadata, borrowed from the bytes it was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaRef<'a> {
    /// The timestamp field, ms since the Unix epoch (0 without one); what it
    /// is: [`MetaRef::timestamp`].
    pub create_time: u64,
    /// The flags octet.
    pub flags: u8,
    /// The key, if the record has one (it may be empty).
    pub key: Option<&'a [u8]>,
    /// How many headers.
    pub header_count: u32,
    /// The encoded headers (checked by [`parse`]); [`MetaRef::headers`] walks them.
    headers: &'a [u8],
    /// The whole encoding, as parsed.
    pub raw: &'a [u8],
}

impl<'a> MetaRef<'a> {
    /// The record's timestamp and its type, None without one.
    pub fn timestamp(&self) -> Option<(u64, TimeType)> {
        if self.flags & FLAG_NO_TIME != 0 {
            None
        } else if self.flags & FLAG_LOG_APPEND != 0 {
            Some((self.create_time, TimeType::LogAppend))
        } else {
            Some((self.create_time, TimeType::Create))
        }
    }

    /// The time used to position by time: the timestamp, or `fallback` (a
    /// store's append time) without one.
    pub fn time_or(&self, fallback: u64) -> u64 {
        self.timestamp().map_or(fallback, |(t, _)| t)
    }

    /// The headers in order, as `(name, value)`.
    pub fn headers(&self) -> Headers<'a> {
        Headers {
            rest: self.headers,
            left: self.header_count,
        }
    }

    /// An owned copy.
    pub fn to_owned(&self) -> Meta {
        Meta {
            create_time: self.create_time,
            key: self.key.map(<[u8]>::to_vec),
            headers: self
                .headers()
                .map(|(n, v)| (n.to_owned(), v.to_vec()))
                .collect(),
        }
    }
}

/// Iterator over checked headers (see [`MetaRef::headers`]).
#[derive(Debug, Clone)]
pub struct Headers<'a> {
    rest: &'a [u8],
    left: u32,
}

impl<'a> Iterator for Headers<'a> {
    type Item = (&'a str, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // Checked by `parse`: these cannot fail.
        let (n, rest) = take_bytes(self.rest).ok()?;
        let (v, rest) = take_bytes(rest).ok()?;
        self.rest = rest;
        Some((std::str::from_utf8(n).ok()?, v))
    }
}

/// A record's metadata, owned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    /// Create time, ms since the Unix epoch.
    pub create_time: u64,
    /// The key, if any.
    pub key: Option<Vec<u8>>,
    /// The headers in order.
    pub headers: Vec<(String, Vec<u8>)>,
}

impl Meta {
    /// Appends the encoding.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode(out, self.create_time, self.key.as_deref(), &self.headers);
    }
}

/// A varint at the start of `b`: at most 5 octets and 2^32 - 1.
fn take_varint(b: &[u8]) -> Result<(usize, &[u8]), MetaError> {
    let mut n: u64 = 0;
    for (i, &byte) in b.iter().take(5).enumerate() {
        n |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            if n > u64::from(u32::MAX) {
                return Err(MetaError("a length over 2^32 - 1"));
            }
            return Ok((n as usize, &b[i + 1..]));
        }
    }
    Err(MetaError(if b.len() < 5 {
        "truncated length"
    } else {
        "a length of more than 5 octets"
    }))
}

fn take_bytes(b: &[u8]) -> Result<(&[u8], &[u8]), MetaError> {
    let (n, rest) = take_varint(b)?;
    if rest.len() < n {
        return Err(MetaError("a length runs past the end"));
    }
    Ok(rest.split_at(n))
}

/// Parses one record's metadata at the start of `b`; returns it and the
/// bytes after it. Checks everything [`MetaRef::headers`] relies on
/// (lengths, UTF-8 names, no unknown flag, a headers flag with at least one
/// header), never panics and never allocates.
pub fn parse(b: &[u8]) -> Result<(MetaRef<'_>, &[u8]), MetaError> {
    if b.len() < PLAIN_LEN {
        return Err(MetaError("shorter than flags and timestamp"));
    }
    let flags = b[0];
    if flags & !KNOWN_FLAGS != 0 {
        return Err(MetaError("unknown flag bits"));
    }
    let create_time = u64::from_be_bytes(b[1..9].try_into().expect("8 bytes"));
    if flags & FLAG_NO_TIME != 0 && (flags & FLAG_LOG_APPEND != 0 || create_time != 0) {
        return Err(MetaError("no-time flag with a time"));
    }
    let mut rest = &b[PLAIN_LEN..];
    let key = if flags & FLAG_KEY != 0 {
        let (k, r) = take_bytes(rest)?;
        rest = r;
        Some(k)
    } else {
        None
    };
    let mut header_count = 0;
    let start = rest;
    if flags & FLAG_HEADERS != 0 {
        let (n, mut r) = take_varint(rest)?;
        if n == 0 {
            return Err(MetaError("headers flag with no header"));
        }
        // Each header takes at least 2 bytes: a count beyond that is a lie,
        // refused before walking it.
        if n > r.len() / 2 {
            return Err(MetaError("more headers than bytes"));
        }
        let headers_start = r;
        for _ in 0..n {
            let (name, r2) = take_bytes(r)?;
            if std::str::from_utf8(name).is_err() {
                return Err(MetaError("a header name is not UTF-8"));
            }
            let (_, r3) = take_bytes(r2)?;
            r = r3;
        }
        header_count = n as u32;
        let used = headers_start.len() - r.len();
        let meta_len = b.len() - r.len();
        let meta = MetaRef {
            create_time,
            flags,
            key,
            header_count,
            headers: &headers_start[..used],
            raw: &b[..meta_len],
        };
        return Ok((meta, r));
    }
    let meta_len = b.len() - start.len();
    Ok((
        MetaRef {
            create_time,
            flags,
            key,
            header_count,
            headers: &[],
            raw: &b[..meta_len],
        },
        rest,
    ))
}

/// Parses exactly `count` metadata back to back filling `b`, calling `f`
/// with each; anything left over, or too few, is an error.
pub fn parse_all<'a>(
    mut b: &'a [u8],
    count: usize,
    mut f: impl FnMut(MetaRef<'a>),
) -> Result<(), MetaError> {
    // Each takes at least PLAIN_LEN bytes.
    if count > b.len() / PLAIN_LEN {
        return Err(MetaError("fewer metadata than records"));
    }
    for _ in 0..count {
        let (m, rest) = parse(b)?;
        f(m);
        b = rest;
    }
    if !b.is_empty() {
        return Err(MetaError("bytes after the last record's metadata"));
    }
    Ok(())
}

/// Milliseconds since the Unix epoch now (0 if the clock is before it).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
