//! Parked partitions: those with no record left, kept as their next offset in
//! one registry file instead of a directory with an empty segment each.
//!
//! Every Spark task and every producer run is a new partition, and retention
//! empties each once its producer is gone. The partition keeps its next
//! offset (a store that forgot it would FETCH it back from a peer that still
//! holds it, or, when none does, start it at the first record it gets), but it needs
//! nothing else: no segment, no index, no directory, no descriptor, no
//! [`super::partition::Partition`]. A store that has seen a million
//! partitions would otherwise hold three million files and directories, and
//! open them all at start.
//!
//! A parked partition is forgotten `forget_parked_hours` after it was parked
//! ([`super::LogConfig::forget_parked_hours`]), so that the registry does not
//! grow with every task ever run.
//!
//! `ROOT/.parked` is append-only, one line per parking:
//!
//! ```text
//! <escaped topic> <partition> <next offset> <parked at, ms since the epoch> <crc32c of what precedes, 8 hex digits>\n
//! ```
//!
//! A line without the time (written before the log forgot parked
//! partitions) counts as parked when it is read.
//!
//! In memory ([`Parked`]) a parked partition named by a producer's UUID
//! takes about 50 bytes: topics are kept once, addresses as two numbers.
//!
//! A partition directory that exists wins over its lines (the partition was
//! appended to again after it was parked); of several lines, the last one
//! wins (offsets only grow while the log remembers a partition, but one
//! forgotten and made again may start lower). A line that does not parse or
//! check (a torn append) is left out. The file is rewritten without stale
//! lines at open, and when stale lines outnumber the parked partitions.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use super::config::{IoOp, LogConfig};
use super::error::{LogError, Result};
use super::format::{check_partition_name, escape_name, unescape_name};
use super::io;

/// Name of the registry in the log's root (not a valid escaped topic name).
pub const PARKED_FILE: &str = ".parked";

/// A Dafka address (a producer's UUID, 32 hex digits) as two numbers.
type Bits = (u64, u64);

/// `name` as an address of one case (`true`: lower case), if it is one: 32
/// hex digits whose letters are all upper case, or all lower case.
fn pack(name: &str) -> Option<(bool, Bits)> {
    let b = name.as_bytes();
    if b.len() != 32 || !b.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let upper = b.iter().any(|c| matches!(c, b'A'..=b'F'));
    let lower = b.iter().any(|c| matches!(c, b'a'..=b'f'));
    if upper && lower {
        return None;
    }
    let n = u128::from_str_radix(name, 16).ok()?;
    // The two halves of the number (truncation intended).
    Some((lower, ((n >> 64) as u64, n as u64)))
}

/// The name [`pack`] made `bits` of.
fn unpack(lower: bool, (hi, lo): Bits) -> String {
    if lower {
        format!("{hi:016x}{lo:016x}")
    } else {
        format!("{hi:016X}{lo:016X}")
    }
}

/// A parked partition: its next offset, and when it was parked (ms since the
/// epoch, by the log's clock).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Spot {
    pub next: u64,
    pub at: u64,
}

/// One topic's parked partitions. Addresses take 32 bytes a partition (key
/// and [`Spot`], no allocation): every Spark task and producer run leaves one
/// parked partition behind.
#[derive(Debug, Default, Clone)]
struct TopicParked {
    name: Vec<u8>,
    upper: FxHashMap<Bits, Spot>,
    lower: FxHashMap<Bits, Spot>,
    /// Names that are not addresses (tests, hand-made producers).
    others: FxHashMap<Box<str>, Spot>,
}

impl TopicParked {
    fn len(&self) -> usize {
        self.upper.len() + self.lower.len() + self.others.len()
    }

    fn get(&self, partition: &str) -> Option<Spot> {
        match pack(partition) {
            Some((false, bits)) => self.upper.get(&bits).copied(),
            Some((true, bits)) => self.lower.get(&bits).copied(),
            None => self.others.get(partition).copied(),
        }
    }

    /// Sets the partition's spot; true if it was not parked before.
    fn set(&mut self, partition: &str, spot: Spot) -> bool {
        match pack(partition) {
            Some((false, bits)) => self.upper.insert(bits, spot).is_none(),
            Some((true, bits)) => self.lower.insert(bits, spot).is_none(),
            None => self.others.insert(partition.into(), spot).is_none(),
        }
    }

    fn remove(&mut self, partition: &str) -> Option<Spot> {
        match pack(partition) {
            Some((false, bits)) => self.upper.remove(&bits),
            Some((true, bits)) => self.lower.remove(&bits),
            None => self.others.remove(partition),
        }
    }

    /// Keeps the partitions whose spot `keep` accepts; returns how many went.
    fn retain(&mut self, mut keep: impl FnMut(&Spot) -> bool) -> usize {
        let before = self.len();
        self.upper.retain(|_, s| keep(s));
        self.lower.retain(|_, s| keep(s));
        self.others.retain(|_, s| keep(s));
        before - self.len()
    }

    /// (partition, spot), in no order.
    fn iter(&self) -> impl Iterator<Item = (String, Spot)> + '_ {
        let upper = self.upper.iter().map(|(b, s)| (unpack(false, *b), *s));
        let lower = self.lower.iter().map(|(b, s)| (unpack(true, *b), *s));
        let others = self.others.iter().map(|(p, s)| (p.to_string(), *s));
        upper.chain(lower).chain(others)
    }
}

/// (topic, partition name) → [`Spot`], for every parked partition. A store
/// keeps them until `forget_parked_hours` passed (see the module's note), so
/// they are kept small: topics once each, addresses as numbers.
#[derive(Debug, Clone)]
pub(crate) struct Parked {
    topics: Vec<TopicParked>,
    /// Topic name → index in `topics` (never removed: topics are few).
    ids: FxHashMap<Vec<u8>, usize>,
    len: usize,
    /// No spot was parked before this (a bound: removals leave it lower),
    /// so that [`Parked::forget`] does not walk every entry at every check.
    oldest: u64,
}

impl Default for Parked {
    fn default() -> Self {
        Parked {
            topics: Vec::new(),
            ids: FxHashMap::default(),
            len: 0,
            oldest: u64::MAX,
        }
    }
}

impl Parked {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn topic(&self, topic: &[u8]) -> Option<&TopicParked> {
        self.ids.get(topic).map(|&i| &self.topics[i])
    }

    /// The partition's next offset, if it is parked.
    pub fn get(&self, topic: &[u8], partition: &str) -> Option<u64> {
        self.spot(topic, partition).map(|s| s.next)
    }

    pub fn spot(&self, topic: &[u8], partition: &str) -> Option<Spot> {
        self.topic(topic)?.get(partition)
    }

    pub fn contains(&self, topic: &[u8], partition: &str) -> bool {
        self.spot(topic, partition).is_some()
    }

    /// The partition stands at `spot` from now on.
    pub fn insert(&mut self, topic: &[u8], partition: &str, spot: Spot) {
        let i = match self.ids.get(topic) {
            Some(&i) => i,
            None => {
                self.topics.push(TopicParked {
                    name: topic.to_vec(),
                    ..TopicParked::default()
                });
                self.ids.insert(topic.to_vec(), self.topics.len() - 1);
                self.topics.len() - 1
            }
        };
        self.len += usize::from(self.topics[i].set(partition, spot));
        self.oldest = self.oldest.min(spot.at);
    }

    pub fn remove(&mut self, topic: &[u8], partition: &str) -> Option<u64> {
        let i = *self.ids.get(topic)?;
        let s = self.topics[i].remove(partition);
        self.len -= usize::from(s.is_some());
        s.map(|s| s.next)
    }

    /// Forgets every partition parked at or before `before` (ms since the
    /// epoch); returns how many. Walks the entries only when one may be due.
    pub fn forget(&mut self, before: u64) -> usize {
        if self.oldest > before {
            return 0;
        }
        let mut n = 0;
        let mut oldest = u64::MAX;
        for t in &mut self.topics {
            n += t.retain(|s| {
                let keep = s.at > before;
                if keep {
                    oldest = oldest.min(s.at);
                }
                keep
            });
        }
        self.len -= n;
        self.oldest = oldest;
        n
    }

    /// The topics with a partition parked, in no order.
    pub fn topics(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.topics
            .iter()
            .filter(|t| t.len() > 0)
            .map(|t| t.name.as_slice())
    }

    /// (topic, partition, spot) of every parked partition, or of one
    /// topic's, in no order.
    pub fn iter<'a>(
        &'a self,
        topic: Option<&[u8]>,
    ) -> impl Iterator<Item = (&'a [u8], String, Spot)> + 'a {
        let only = topic.map(|t| self.ids.get(t).copied());
        self.topics
            .iter()
            .enumerate()
            .filter(move |(i, _)| only.is_none_or(|o| o == Some(*i)))
            .flat_map(|(_, t)| t.iter().map(|(p, s)| (t.name.as_slice(), p, s)))
    }

    /// Every entry, sorted (for tests and comparisons).
    pub fn sorted(&self) -> Vec<(Vec<u8>, String, Spot)> {
        let mut v: Vec<_> = self
            .iter(None)
            .map(|(t, p, s)| (t.to_vec(), p, s))
            .collect();
        v.sort_unstable();
        v
    }
}

impl PartialEq for Parked {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.sorted() == other.sorted()
    }
}

/// What [`load`] found in the registry.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub parked: Parked,
    /// Lines in the file, good or not.
    pub lines: usize,
    /// Lines that did not parse or check, or a last line without its newline.
    pub bad: usize,
    /// Good lines without their parking time (the older form).
    pub untimed: usize,
}

pub(crate) fn path(root: &Path) -> PathBuf {
    root.join(PARKED_FILE)
}

fn line_crc(body: &str) -> u32 {
    crc32c::crc32c(body.as_bytes())
}

/// One registry line, newline included.
pub(crate) fn encode(topic: &[u8], partition: &str, spot: Spot) -> Result<String> {
    let t = escape_name(topic).map_err(LogError::Invalid)?;
    let body = format!("{t} {partition} {} {}", spot.next, spot.at);
    Ok(format!("{body} {:08x}\n", line_crc(&body)))
}

/// The entry of one line (without its newline), if it is whole and checks:
/// topic, partition, next offset and, unless the line is of the form
/// without it, when it was parked.
pub(crate) fn decode(line: &str) -> Option<(Vec<u8>, &str, u64, Option<u64>)> {
    let (body, crc) = line.rsplit_once(' ')?;
    if crc.len() != 8 || u32::from_str_radix(crc, 16).ok()? != line_crc(body) {
        return None;
    }
    let mut it = body.split(' ');
    let (t, p, n) = (it.next()?, it.next()?, it.next()?);
    let at = match it.next() {
        Some(at) => Some(at.parse().ok()?),
        None => None,
    };
    if it.next().is_some() || check_partition_name(p).is_err() {
        return None;
    }
    Some((unescape_name(t)?, p, n.parse().ok()?, at))
}

/// Reads the registry of the log at `root` (empty when there is none); a
/// line without its parking time counts as parked at `now`.
pub(crate) fn load(root: &Path, now: u64) -> Result<Loaded> {
    let path = path(root);
    let text = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded::default()),
        Err(e) => return Err(LogError::io("read", &path, e)),
    };
    let mut out = Loaded::default();
    let whole = text.ends_with(b"\n");
    let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let n = lines.len();
    for (i, raw) in lines.into_iter().enumerate() {
        out.lines += 1;
        let entry = std::str::from_utf8(raw).ok().and_then(decode);
        match entry {
            Some((t, p, next, at)) if whole || i + 1 < n => {
                out.untimed += usize::from(at.is_none());
                let at = at.unwrap_or(now);
                out.parked.insert(&t, p, Spot { next, at });
            }
            _ => out.bad += 1,
        }
    }
    if out.bad > 0 {
        tracing::warn!(
            "{}: {} line(s) torn or damaged were left out",
            path.display(),
            out.bad
        );
    }
    Ok(out)
}

/// Appends `lines` (from [`encode`]) to the registry and fdatasyncs it (and
/// the root, when it created the file).
pub(crate) fn append(cfg: &LogConfig, root: &Path, lines: &str) -> Result<()> {
    let path = path(root);
    let created = !path.exists();
    cfg.fail(IoOp::Write, &path)
        .map_err(|e| LogError::io("write", &path, e))?;
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .map_err(|e| LogError::io("open", &path, e))?;
    f.write_all(lines.as_bytes())
        .map_err(|e| LogError::io("write", &path, e))?;
    io::sync_data(cfg, &f, &path)?;
    if created {
        io::sync_dir(cfg, root)?;
    }
    Ok(())
}

/// Replaces the registry by one line per entry of `parked`, then one per
/// entry of `extra` (partition, next offset: parked at `at`; later lines win),
/// atomically: a new file, synced, renamed over the old one. None at all: no
/// file. Returns the lines written.
pub(crate) fn rewrite(
    cfg: &LogConfig,
    root: &Path,
    parked: &Parked,
    extra: &[((Vec<u8>, String), u64)],
    at: u64,
) -> Result<usize> {
    let path = path(root);
    if parked.is_empty() && extra.is_empty() {
        io::remove(cfg, &path)?;
        io::sync_dir(cfg, root)?;
        return Ok(0);
    }
    let mut text = String::new();
    for (t, p, spot) in parked.iter(None) {
        text.push_str(&encode(t, &p, spot)?);
    }
    for ((t, p), next) in extra {
        text.push_str(&encode(t, p, Spot { next: *next, at })?);
    }
    let tmp = root.join(format!("{PARKED_FILE}.new"));
    let f = io::create(cfg, &tmp)?;
    io::write_at(cfg, &f, &tmp, text.as_bytes(), 0)?;
    io::sync_data(cfg, &f, &tmp)?;
    fs::rename(&tmp, &path).map_err(|e| LogError::io("rename", &tmp, e))?;
    io::sync_dir(cfg, root)?;
    Ok(parked.len() + extra.len())
}

#[cfg(test)]
mod tests;
